package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// ListScaleFill is how BenchListScale's callers name the filler leases they load: half before
// the listed prefix, half after it, so that a scan bounded on one side only reads them.
func ListScaleFill(i, n int) string {
	if i < n/2 {
		return fmt.Sprintf("a/%08d", i)
	}
	return fmt.Sprintf("z/%08d", i)
}

// ListScaleTargets is how many leases BenchListScale lists: fewer than a page, so that a scan
// without an upper bound reads on past the prefix looking for more.
const ListScaleTargets = 50

// BenchListScale measures List with a prefix on big (loaded with many held filler leases, named
// by ListScaleFill) against the same List on small (loaded with few), alternating in blocks of
// b.N/10 so that both see the same machine. Both stores also hold ListScaleTargets leases under
// "target/", acquired here; one op is one page (limit 100) of them. ns/op is big's; small's is
// reported as "small-ns/op" and the ratio big/small as "x-slower" (1.0 = the held leases do not
// matter).
func BenchListScale(b *testing.B, small, big store.Store) {
	ctx := context.Background()
	for _, s := range []store.Store{small, big} {
		for i := range ListScaleTargets {
			_, err := s.Acquire(ctx, &store.AcquireParams{Key: fmt.Sprintf("target/%03d", i), LeaseID: fmt.Sprintf("bench-%d", i),
				Holder: "bench", TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	list := func(s store.Store, n int) time.Duration {
		start := time.Now()
		for range n {
			ls, err := s.List(ctx, &store.ListParams{Prefix: "target/", Limit: 100})
			if err != nil {
				b.Fatal(err)
			}
			if len(ls) != ListScaleTargets {
				b.Fatalf("listed %d leases under target/, want %d", len(ls), ListScaleTargets)
			}
		}
		return time.Since(start)
	}
	const blocks = 10
	var smallTime, bigTime time.Duration
	var smallN, bigN int
	b.ResetTimer()
	for i := range blocks {
		n := b.N / blocks
		if i == blocks-1 {
			n = b.N - (blocks-1)*(b.N/blocks)
		}
		b.StopTimer()
		smallTime += list(small, n)
		smallN += n
		b.StartTimer()
		bigTime += list(big, n)
		bigN += n
	}
	b.StopTimer()
	if smallN > 0 && bigN > 0 && smallTime > 0 {
		smallNs := float64(smallTime.Nanoseconds()) / float64(smallN)
		bigNs := float64(bigTime.Nanoseconds()) / float64(bigN)
		b.ReportMetric(smallNs, "small-ns/op")
		b.ReportMetric(bigNs/smallNs, "x-slower")
	}
}
