package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkTreeGrant: an exclusive grant and release of a key 3 levels below the root of a tree
// ("tb/eu/bench/N": its ancestors tb/eu/bench, tb/eu and tb are locked FOR SHARE and read), against
// the flat exclusive grant (the baseline: one statement each way) and the flat shared grant (the
// holds transaction the tree's grant runs, without the tree), in the same run, at 1 and 8
// clients on keys of their own (siblings: they share their ancestors).
func BenchmarkTreeGrant(b *testing.B) {
	s := openDefault(b, newSchema(b))
	if _, err := s.SetTree(context.Background(), &store.SetTreeParams{Prefix: "tb/", Actor: "bench"}); err != nil {
		b.Fatal(err)
	}
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	cycle := func(prefix string, opts ...baton.Option) storetest.CycleFunc {
		return func(ctx context.Context, key string) error {
			lease, err := locker.TryAcquire(ctx, prefix+key, opts...)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	}
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			storetest.BenchAgainst(b, clients, cycle("tb/eu/"),
				storetest.Baseline{Name: "flat", Cycle: storetest.LockerCycle(locker)},
				storetest.Baseline{Name: "flat-shared", Cycle: cycle("shared/", baton.WithShared())})
		})
	}
}
