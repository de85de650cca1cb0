package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func resourcesClearCooldown(args []string, g *globals, stdout, stderr io.Writer) int {
	c := newCommand("baton resources clear-cooldown", `Usage: baton resources clear-cooldown KEY --reason TEXT [-o table|json]

End a resource's cooldown early (admin): the cooldown that a job of a kind with a resource
cooldown ('baton kinds set --resource-cooldown') started when it ended on KEY, during which
every job submitted to KEY is skipped. The next submit runs; a job that was queued on KEY before
the cooldown began, and that the cooldown held back, can start at once. The audit log records
who and why (kind resource_cooldown_cleared). Exit code 3 if KEY is not cooling down.

Example:
  baton resources clear-cooldown node-1 --reason "checked by hand, healthy"

Output:
  cleared the cooldown of node-1 after job 7 (9m12s were left)
With -o json: {"resource", "until", "remaining_ms", "job"}.

`+jobExitCodesHelp+"\n", stdout, stderr)
	g.register(c.fs, true)
	reason := c.fs.String("reason", "", "why, for the audit log (required)")
	pos, code, ok := clientCommand(c, g, args, 1, "KEY")
	if !ok {
		return code
	}
	if *reason == "" {
		return c.usageError("--reason is required")
	}
	p := &store.ClearCooldownParams{Resource: pos[0], Reason: *reason}
	names := flagNames{"resource": "KEY", "reason": "--reason"}
	if err := p.Validate(); err != nil {
		return c.jobFail(g, err, names, "")
	}
	js, closeFn, code, ok := openJobStore(c, g)
	if !ok {
		return code
	}
	defer closeFn()
	ctx, cancel := callContext(0)
	defer cancel()
	cd, err := js.ClearResourceCooldown(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "%s: resource %q is not cooling down: no cooldown to clear\n", c.name, p.Resource)
		return exitNotFound
	}
	if err != nil {
		return c.jobFail(g, err, names, "")
	}
	if g.output == "json" {
		err = writeJSON(stdout, wire.ResourceCooldownFrom(cd))
	} else {
		_, err = fmt.Fprintf(stdout, "cleared the cooldown of %s after job %d (%s were left)\n",
			printable(cd.Resource), cd.Job, roundDuration(cd.Left))
	}
	if err != nil {
		return c.jobFail(g, err, nil, "")
	}
	return exitOK
}
