package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// CycleFunc acquires and releases key once.
type CycleFunc func(ctx context.Context, key string) error

// BenchCycles runs b.N cycles spread over clients goroutines, each on a key of its own
// (uncontended), and returns the nanoseconds per cycle so that a later benchmark in the same run
// can report its ratio to this one.
func BenchCycles(b *testing.B, clients int, cycle CycleFunc) float64 {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		key := fmt.Sprintf("bench/%d", c)
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := cycle(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return float64(elapsed.Nanoseconds()) / float64(b.N)
}

// LockerCycle is the Baton lock cycle measured against the raw baseline: TryAcquire with the
// default options (keepalive on) and Release.
func LockerCycle(l *baton.Locker) CycleFunc {
	return func(ctx context.Context, key string) error {
		lease, err := l.TryAcquire(ctx, key)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
}

// ReportRatio reports baseline/measured throughput: 1.0 means as fast as the baseline.
func ReportRatio(b *testing.B, baselineNs, ns float64) {
	if baselineNs > 0 && ns > 0 {
		b.ReportMetric(baselineNs/ns, "x-baseline")
	}
}

// BenchHandoff has waiters goroutines contend for one key with a waiting Acquire; each holder
// releases at once. It measures, per handoff, the time from the start of the release to the
// moment the next holder's Acquire returned, and reports p50 and p99 in milliseconds.
func BenchHandoff(b *testing.B, l *baton.Locker, waiters int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const key = "handoff"
	var (
		mu           sync.Mutex
		releaseStart time.Time
		latencies    = make([]time.Duration, 0, b.N)
		handoffs     int
	)
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	b.ResetTimer()
	for range waiters {
		wg.Go(func() {
			for {
				lease, err := l.Acquire(ctx, key, baton.WithKeepalive(false))
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				now := time.Now()
				mu.Lock()
				if !releaseStart.IsZero() {
					latencies = append(latencies, now.Sub(releaseStart))
				}
				handoffs++
				done := handoffs > b.N
				releaseStart = time.Now()
				mu.Unlock()
				if done {
					cancel()
				}
				if err := lease.Release(context.Background()); err != nil {
					errs <- err
					return
				}
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	slices.Sort(latencies)
	if len(latencies) == 0 {
		return
	}
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
