package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// BenchTreeGrant measures an exclusive grant and release of a key three levels below the root of
// a tree ("tree/eu/bench/<client>": three ancestors to check, and its descendants' range)
// against the same cycle on a flat key of the same shape, in the same run (BenchPaired), at 1 and
// 8 clients on keys of their own. "tree/flat" is the tree cycle's time over the flat one's
// (1.0 = as fast; the inverse of x-baseline). l's store must be a store.Treer.
func BenchTreeGrant(b *testing.B, l *baton.Locker, tr store.Treer) {
	ctx := context.Background()
	if _, err := tr.SetTree(ctx, &store.SetTreeParams{Prefix: "tree/", Actor: "bench"}); err != nil {
		b.Fatal(err)
	}
	cycle := func(prefix string) CycleFunc {
		return func(ctx context.Context, key string) error {
			lease, err := l.TryAcquire(ctx, prefix+key)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	}
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("depth=3/clients=%d", clients), func(b *testing.B) {
			if costs := benchAgainst(b, clients, false, cycle("tree/eu/"), Baseline{Cycle: cycle("flat/eu/")}); len(costs) == 1 {
				b.ReportMetric(costs[0], "tree/flat")
			}
		})
	}
}
