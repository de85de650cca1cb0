package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// BenchBeyond measures a grant that takes a unit of one limit, and a shared grant, each against
// the plain exclusive grant in the same run (BenchPaired: "x-baseline" is the plain cycle's
// throughput over theirs' inverse, 1.0 = as fast), at 1 and 8 clients on keys of their own. The
// clients share the one limit, as the units of a budget do.
func BenchBeyond(b *testing.B, l *baton.Locker, lim store.Limiter) {
	ctx := context.Background()
	if _, err := lim.SetLimit(ctx, &store.SetLimitParams{Name: "bench-pool", Capacity: store.MaxLimitCapacity}); err != nil {
		b.Fatal(err)
	}
	plain := LockerCycle(l)
	cycle := func(prefix string, opts ...baton.Option) CycleFunc {
		return func(ctx context.Context, key string) error {
			lease, err := l.TryAcquire(ctx, prefix+key, opts...)
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}
	}
	for _, c := range []struct {
		name  string
		cycle CycleFunc
	}{
		{"limit", cycle("limited/", baton.WithLimits("bench-pool"))},
		{"shared", cycle("shared/", baton.WithShared())},
	} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", c.name, clients), func(b *testing.B) {
				BenchPaired(b, clients, plain, c.cycle)
			})
		}
	}
}
