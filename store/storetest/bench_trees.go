package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// BenchTreeGrant measures a grant and release of a key three levels below the root of a tree
// ("tree/eu/bench/<client>": three ancestors to check, and its descendants' range) against the
// same cycle on a flat key of the same shape, in the same run (BenchPaired), at 1 and 8 clients
// on keys of their own: exclusive (one statement each), and shared (the holds' transaction each).
// "tree/flat" is the tree cycle's time over the flat one's (1.0 = as fast; the inverse of
// x-baseline). l's store must be a store.Treer.
func BenchTreeGrant(b *testing.B, l *baton.Locker, tr store.Treer) {
	ctx := context.Background()
	if _, err := tr.SetTree(ctx, &store.SetTreeParams{Prefix: "tree/", Actor: "bench"}); err != nil {
		b.Fatal(err)
	}
	cycle := func(prefix string, opts ...baton.Option) CycleFunc {
		return func(ctx context.Context, key string) error {
			lease, err := l.TryAcquire(ctx, prefix+key, opts...)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	}
	for _, mode := range []string{"exclusive", "shared"} {
		var opts []baton.Option
		if mode == "shared" {
			opts = append(opts, baton.WithShared())
		}
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/depth=3/clients=%d", mode, clients), func(b *testing.B) {
				costs := benchAgainst(b, clients, false, cycle("tree/eu/", opts...), Baseline{Cycle: cycle("flat/eu/", opts...)})
				if len(costs) == 1 {
					b.ReportMetric(costs[0], "tree/flat")
				}
			})
		}
	}
}
