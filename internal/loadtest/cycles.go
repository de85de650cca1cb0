package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// cycles: f.clients goroutines each take and release a key of their own (no contention) for
// f.duration through the server, then as long again in process on the same store: what the
// HTTP API costs.
func cycles(ctx context.Context, f flags, overHTTP *baton.Locker, st store.Store) error {
	direct, err := baton.NewLocker(st, &baton.Config{Logger: quietLog()})
	if err != nil {
		return err
	}
	run := func(l *baton.Locker, prefix string) (int64, []time.Duration, error) {
		runCtx, stop := context.WithTimeout(ctx, f.duration)
		defer stop()
		var n atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for c := range f.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("%s/%05d", prefix, c)
				var mine []time.Duration
				for runCtx.Err() == nil {
					start := time.Now()
					lease, err := l.TryAcquire(runCtx, key, baton.WithTTL(15*time.Second))
					if err != nil {
						if runCtx.Err() == nil {
							firstErr.CompareAndSwap(nil, err)
						}
						break
					}
					if err := lease.Release(context.WithoutCancel(runCtx)); err != nil {
						firstErr.CompareAndSwap(nil, err)
						break
					}
					mine = append(mine, time.Since(start))
					n.Add(1)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return 0, nil, err
		}
		return n.Load(), lat, nil
	}
	httpN, httpLat, err := run(overHTTP, "cyc-http")
	if err != nil {
		return fmt.Errorf("cycles over HTTP: %w", err)
	}
	inN, inLat, err := run(direct, "cyc-direct")
	if err != nil {
		return fmt.Errorf("cycles in process: %w", err)
	}
	secs := f.duration.Seconds()
	fmt.Printf("cycles: %d clients, each acquiring and releasing a key of its own, %s per side\n", f.clients, f.duration)
	fmt.Printf("  over HTTP %.0f/s (p50 %s, p99 %s); in process %.0f/s (p50 %s, p99 %s); HTTP / in process = %.2fx\n",
		float64(httpN)/secs, ms(pct(httpLat, 0.5)), ms(pct(httpLat, 0.99)),
		float64(inN)/secs, ms(pct(inLat, 0.5)), ms(pct(inLat, 0.99)), float64(httpN)/max(float64(inN), 1))
	return nil
}

// hammer: f.clients goroutines loop on acquire (no wait) and release of keys of their own with a
// short TTL (5 s), as fast as the server lets them. A client told "overloaded" waits the
// Retry-After the server gave, as the clients do. What matters: latency, shedding with
// Retry-After instead of timeouts, and no release refused because its lease expired while the
// release queued.
func hammer(ctx context.Context, f flags, l *baton.Locker) error {
	runCtx, stop := context.WithTimeout(ctx, f.duration)
	defer stop()
	var cyclesN, shed, timeouts, refused, otherErr atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for c := range f.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("ham/%05d", c)
			var mine []time.Duration
			for runCtx.Err() == nil {
				t0 := time.Now()
				callCtx, cancel := context.WithTimeout(runCtx, 10*time.Second)
				lease, err := l.TryAcquire(callCtx, key, baton.WithTTL(5*time.Second))
				cancel()
				if err == nil {
					rctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 10*time.Second)
					err = lease.Release(rctx)
					cancel()
					if errors.Is(err, baton.ErrNotHeld) {
						refused.Add(1)
						continue
					}
					if err == nil {
						mine = append(mine, time.Since(t0))
						cyclesN.Add(1)
						continue
					}
				}
				var pe *client.ProblemError
				switch {
				case runCtx.Err() != nil:
				case errors.As(err, &pe) && pe.Code == "overloaded":
					shed.Add(1)
					select {
					case <-time.After(pe.RetryAfter):
					case <-runCtx.Done():
					}
				case errors.Is(err, context.DeadlineExceeded):
					timeouts.Add(1)
				default:
					otherErr.Add(1)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("hammer: %d clients, acquire + release of keys of their own, TTL 5 s, %s\n", f.clients, el.Round(time.Millisecond))
	fmt.Printf("  cycles %d (%.0f/s), cycle p50 %s p99 %s; shed with 503 overloaded + Retry-After %d; client timeouts (10 s) %d; releases refused (lease expired in the queue) %d; other errors %d\n",
		cyclesN.Load(), float64(cyclesN.Load())/el.Seconds(), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)),
		shed.Load(), timeouts.Load(), refused.Load(), otherErr.Load())
	return nil
}
