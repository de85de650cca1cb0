package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/store"
)

// leaseSet is what --watch compares: which leases hold which keys (renewals do not count).
func leaseSet(leases []*store.Lease) []string {
	out := make([]string, len(leases))
	for i, l := range leases {
		out[i] = fmt.Sprintf("%s\x00%s\x00%d", l.Key, l.ID, l.Token)
	}
	return out
}

// watchLeases prints the list again each time its leases change, until interrupted.
func (a *app) watchLeases(cmd *cobra.Command, last []*store.Lease, list func(context.Context) ([]*store.Lease, error), interval time.Duration) error {
	ctx, stop := interruptContext()
	defer stop()
	if a.g.output != "json" {
		fmt.Fprintln(a.stderr, cmd.CommandPath()+": watching; Ctrl-C to stop")
	}
	seen := leaseSet(last)
	return poll(ctx, interval, func(ctx context.Context) error {
		leases, err := list(ctx)
		if err != nil {
			return err
		}
		now := leaseSet(leases)
		if slices.Equal(now, seen) {
			return nil
		}
		seen = now
		if a.g.output != "json" {
			fmt.Fprintf(a.stdout, "\n--- %s\n", time.Now().UTC().Format("15:04:05Z"))
		}
		return writeLeases(a.stdout, a.g, leases)
	})
}
