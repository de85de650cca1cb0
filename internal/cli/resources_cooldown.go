package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) resourcesClearCooldownCommand() *cobra.Command {
	var reason string
	cmd := a.command(&cobra.Command{
		Use:   "clear-cooldown KEY --reason TEXT [-o table|json]",
		Short: "end a resource's cooldown early (admin)",
		Long: `End a resource's cooldown early (admin): the cooldown that a job of a kind with a resource
cooldown ('baton kinds set --resource-cooldown') started when it ended on KEY, during which
every job submitted to KEY is skipped. The next submit runs; a job that was queued on KEY before
the cooldown began, and that the cooldown held back, can start at once. The audit log records
who and why (kind resource_cooldown_cleared). Exit code 3 if KEY is not cooling down.

Example:
  baton resources clear-cooldown node-1 --reason "checked by hand, healthy"

Output:
  cleared the cooldown of node-1 after job 7 (9m12s were left)
With -o json: {"resource", "until", "remaining_ms", "job"}.`,
		Args: exactArgs(1, "KEY"),
	}, meta{exits: exitsLookup, writes: true, names: flagNames{"resource": "KEY", "reason": "--reason"}})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit log (required)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := required("reason", reason); err != nil {
			return err
		}
		p := &store.ClearCooldownParams{Resource: args[0], Reason: reason}
		return a.call(p, func(ctx context.Context, st *client.Store) error { return a.clearCooldown(ctx, st, p) })
	}
	return cmd
}

// clearCooldown is resources clear-cooldown's call.
func (a *app) clearCooldown(ctx context.Context, st *client.Store, p *store.ClearCooldownParams) error {
	cd, err := st.ClearResourceCooldown(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return explain(err, "resource %q is not cooling down: no cooldown to clear", p.Resource)
	}
	if err != nil {
		return err
	}
	if a.g.output == "json" {
		return writeJSON(a.stdout, wire.ResourceCooldownFrom(cd))
	}
	_, err = fmt.Fprintf(a.stdout, "cleared the cooldown of %s after job %d (%s were left)\n",
		printable(cd.Resource), cd.Job, roundDuration(cd.Left))
	return err
}
