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

func (a *app) fenceResetCommand() *cobra.Command {
	var reason string
	cmd := a.command(&cobra.Command{
		Use:   "reset RESOURCE --reason TEXT [-o table|json]",
		Short: "delete a resource's fence (admin, audited)",
		Long: `Delete the fence the server keeps for RESOURCE (admin role), so that the next 'baton fence
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
With -o json: {"resource", "token"} (the token the fence held).`,
		Args: exactArgs(1, "RESOURCE"),
	}, meta{exits: exitsLookup})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit log (required)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := required("reason", reason); err != nil {
			return err
		}
		p := &store.ResetFenceParams{Resource: args[0], Reason: reason, Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error { return a.resetFence(ctx, st, p) })
	}
	return cmd
}

// resetFence is fence reset's call.
func (a *app) resetFence(ctx context.Context, st *client.Store, p *store.ResetFenceParams) error {
	token, err := st.ResetFence(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return explain(err, "resource %q has no fence: nothing to reset", p.Resource)
	}
	if err != nil {
		return err
	}
	if a.g.output == "json" {
		return writeJSON(a.stdout, wire.FenceResetResponse{Resource: p.Resource, Token: token})
	}
	_, err = fmt.Fprintf(a.stdout, "reset the fence of %s (it held token %d)\n", printable(p.Resource), token)
	return err
}
