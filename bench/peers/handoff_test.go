// Package peers benchmarks Baton's Redis and etcd backends side by side with the libraries users
// would otherwise pick (go-redsync/redsync, bsm/redislock, etcd's concurrency.Mutex) and with the
// raw commands that do the minimum. It is a module of its own so that those libraries never
// enter Baton's dependencies. Every benchmark starts its own servers on ports of its own.
package peers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// acquireFunc waits for the key and returns its release.
type acquireFunc func(ctx context.Context) (release func(context.Context) error, err error)

// benchHandoff has waiters goroutines contend for one key through acquire; each holder releases
// at once. It reports the time from the start of a release to the return of the next acquire,
// p50 and p99 in ms, the same measurement as storetest.BenchHandoff.
func benchHandoff(b *testing.B, waiters int, acquire acquireFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
				release, err := acquire(ctx)
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
				if err := release(context.Background()); err != nil {
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
