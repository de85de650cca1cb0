package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

const fenceUsage = `Usage: baton fence check [--resource R] [--fencing-token T] [-o table|json]
       baton fence reset RESOURCE --reason TEXT [-o table|json]

Fences for resources that cannot check a fencing token themselves: the server keeps, per
resource, the greatest token presented, and refuses a lower one. A script run by 'baton run' or
'baton worker' calls 'baton fence check' before each step that writes, and stops if it fails:
its lease was lost (it was paused past its TTL, say) and a later holder has written.

  baton fence check   check the token (env BATON_FENCING_TOKEN) for the resource
  baton fence reset   delete a resource's fence (admin, audited)

Run 'baton fence COMMAND --help' for its flags.
`

func fenceCommand(args []string, g *globals, stdout, stderr io.Writer) int {
	return runGroup("baton fence", fenceUsage, map[string]subcommand{
		"check": fenceCheck,
		"reset": fenceReset,
	}, args, g, stdout, stderr)
}

func fenceCheck(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton fence check", `Usage: baton fence check [--resource R] [--fencing-token T] [-o table|json]

Raise the resource's fence on the server to the fencing token, or fail if a greater token has
been presented for it: then the lease that gave the token is lost, and the caller must not
write. Equal tokens pass (the same holder may check before every write). The check and the
write after it are not one atomic step: a holder paused between them can still write late, so a
resource that can check the token itself (package fence: fence.Check in its own transaction,
fence.Middleware) is safer. Stores: sqlite and postgres (others answer 501).

Examples:
  baton run --lock db/orders -- sh -c 'baton fence check && ./migrate.sh'
  baton fence check --resource db/orders --fencing-token 42

Output: "fence db/orders: token 42 ok" on stdout; with -o json {"resource", "token"}.
A token greater than every token the store has issued belongs to no holder, and is refused
(exit 2) without touching the fence.

Exit codes: 0 the token passed; 76 the token is stale (a greater one was presented: the lease
was lost); 2 usage error or invalid resource/token; 1 error (server unreachable, or its store
keeps no fences); 77 unauthorized or forbidden.
`, stdout, stderr)
	g.register(c.fs, true)
	resource := firstNonEmpty(os.Getenv("BATON_RESOURCE"), os.Getenv("BATON_LOCK_KEY"))
	token := os.Getenv("BATON_FENCING_TOKEN")
	c.fs.StringVar(&resource, "resource", resource, "the `resource` (default env BATON_RESOURCE, then BATON_LOCK_KEY)")
	c.fs.StringVar(&token, "fencing-token", token, "the fencing `token` (default env BATON_FENCING_TOKEN)")
	if _, code, ok := clientCommand(c, g, args, 0, ""); !ok {
		return code
	}
	if resource == "" {
		return c.usageError("missing --resource (or BATON_RESOURCE or BATON_LOCK_KEY)")
	}
	if token == "" {
		return c.usageError("missing --fencing-token (or BATON_FENCING_TOKEN)")
	}
	tok, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return c.usageError("invalid --fencing-token %q: must be a decimal integer from 1 to %d", token, uint64(store.MaxFenceToken))
	}
	if err := store.ValidateFence(resource, tok); err != nil {
		return c.fail(g, err)
	}
	st, ctx, done, code, ok := c.openStore(g, 0)
	if !ok {
		return code
	}
	defer done()
	stored, err := st.CheckFence(ctx, resource, tok)
	if err != nil {
		return c.fail(g, err)
	}
	if stored > tok {
		fmt.Fprintf(stderr, "baton fence check: stale fencing token %d for %q: token %d has been presented; this holder's lease was lost, do not write\n",
			tok, resource, stored)
		return exitLeaseLost
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.FenceCheckResponse{Resource: resource, Token: tok})
	} else {
		_, err = fmt.Fprintf(stdout, "fence %s: token %d ok\n", resource, tok)
	}
	if err != nil {
		return c.fail(g, err)
	}
	return exitOK
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
