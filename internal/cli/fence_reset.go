package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func fenceReset(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton fence reset", `Usage: baton fence reset RESOURCE --reason TEXT [-o table|json]

Delete the fence the server keeps for RESOURCE (admin role), so that the next 'baton fence
check' accepts any token the store has issued. It is the way out when the fence holds a token
that no current holder can match (raised by a token of another store, or stored before the
server refused tokens it never issued), and every real holder is refused as stale. Until a
holder checks again, nothing refuses a late writer of RESOURCE: reset only a fence you know is
wrong. The audit log records who and why (kind fence_reset, with the token the fence held).
Exit code 3 if RESOURCE has no fence.

Example:
  baton fence reset db/orders --reason "fence raised by a token of the old store"

Output:
  reset the fence of db/orders (it held token 9223372036854775807)
With -o json: {"resource", "token"} (the token the fence held).

`+exitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	reason := c.fs.String("reason", "", "why, for the audit log (required)")
	pos, code, ok := clientCommand(c, g, args, 1, "RESOURCE")
	if !ok {
		return code
	}
	if *reason == "" {
		return c.usageError("--reason is required")
	}
	p := &store.ResetFenceParams{Resource: pos[0], Reason: *reason}
	if g.token == "" {
		p.Actor = osActor() // with a token, the server records the token's name instead
	}
	if err := p.Validate(); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	token, err := st.ResetFence(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "%s: resource %q has no fence: nothing to reset\n", c.name, p.Resource)
		return exitNotFound
	}
	if err != nil {
		return c.fail(g, err)
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.FenceResetResponse{Resource: p.Resource, Token: token})
	} else {
		_, err = fmt.Fprintf(stdout, "reset the fence of %s (it held token %d)\n", printable(p.Resource), token)
	}
	if err != nil {
		return c.fail(g, err)
	}
	return exitOK
}
