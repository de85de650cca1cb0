package cli

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

func (a *app) fenceCommand() *cobra.Command {
	return a.group(&cobra.Command{
		Use: `fence check [--resource R] [--fencing-token T] [-o table|json]
| fence reset RESOURCE --reason TEXT [-o table|json]`,
		Short: "fences for resources that cannot check a fencing token themselves",
		Long: `Fences for resources that cannot check a fencing token themselves: the server keeps, per
resource, the greatest token presented, and refuses a lower one. A script run by 'baton run' or
'baton worker' calls 'baton fence check' before each step that writes, and stops if it fails:
its lease was lost (it was paused past its TTL, say) and a later holder has written.`,
	},
		a.fenceCheckCommand(),
		a.fenceResetCommand(),
	)
}

func (a *app) fenceCheckCommand() *cobra.Command {
	resource := firstNonEmpty(os.Getenv("BATON_RESOURCE"), os.Getenv("BATON_LOCK_KEY"))
	token := os.Getenv("BATON_FENCING_TOKEN")
	cmd := a.command(&cobra.Command{
		Use:   "check [--resource R] [--fencing-token T] [-o table|json]",
		Short: "check the token (env BATON_FENCING_TOKEN) for the resource",
		Long: `Raise the resource's fence on the server to the fencing token, or fail if a greater token has
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
(exit 2) without touching the fence. Exit code 76: the token is stale (a greater one was
presented: the lease was lost); 1 also for a store that keeps no fences.`,
		Args: noArgs,
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitLeaseLost, exitAuth}})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().StringVar(&resource, "resource", resource, "the `resource` (default env BATON_RESOURCE, then BATON_LOCK_KEY)")
	cmd.Flags().StringVar(&token, "fencing-token", token, "the fencing `token` (default env BATON_FENCING_TOKEN)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if resource == "" {
			return usagef("missing --resource (or BATON_RESOURCE or BATON_LOCK_KEY)")
		}
		if token == "" {
			return usagef("missing --fencing-token (or BATON_FENCING_TOKEN)")
		}
		tok, err := strconv.ParseUint(token, 10, 64)
		if err != nil {
			return usagef("invalid --fencing-token %q: must be a decimal integer from 1 to %d", token, uint64(store.MaxFenceToken))
		}
		if err := store.ValidateFence(resource, tok); err != nil {
			return err
		}
		st, ctx, done, err := a.openStore(0)
		if err != nil {
			return err
		}
		defer done()
		stored, err := st.CheckFence(ctx, resource, tok)
		if err != nil {
			return err
		}
		if stored > tok {
			return explain(errStaleFence, "stale fencing token %d for %q: token %d has been presented; this holder's lease was lost, do not write",
				tok, resource, stored)
		}
		if a.g.output == "json" {
			return writeJSON(a.stdout, wire.FenceCheckResponse{Resource: resource, Token: tok})
		}
		_, err = fmt.Fprintf(a.stdout, "fence %s: token %d ok\n", resource, tok)
		return err
	}
	return cmd
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
