package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// cycleBlocks is how many blocks each side of cycles runs, alternating.
const cycleBlocks = 10

// cycles: f.clients goroutines each take and release a key of their own (no contention) through
// the server, and as many in process on the same store: what the HTTP API costs. The two sides
// alternate in blocks of f.duration/10 (f.duration each in all), so that a machine whose load
// changes during the run weighs on both alike. Besides the rates it reports this process's CPU
// time per cycle on each side (client, server and, on SQLite, the database), a steadier measure
// than the rate on a shared machine.
func cycles(ctx context.Context, f flags, overHTTP *baton.Locker, st store.Store) error {
	direct, err := baton.NewLocker(st, &baton.Config{Logger: quietLog()})
	if err != nil {
		return err
	}
	type side struct {
		l      *baton.Locker
		name   string // the pprof label "side" of its clients' goroutines
		prefix string
		n      int64
		wall   time.Duration
		cpu    time.Duration
		lat    []time.Duration
	}
	// block runs the side's clients for d and adds up what they did.
	block := func(sd *side, d time.Duration) error {
		// Cycles are not cut short at the end of the block (a cut acquire may still be granted,
		// and the key would be held at the next block): each client stops starting new ones.
		end := time.Now().Add(d)
		var n atomic.Int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr atomic.Value
		cpu0, _ := processCPU()
		start := time.Now()
		for c := range f.clients {
			wg.Add(1)
			go pprof.Do(ctx, pprof.Labels("side", sd.name), func(ctx context.Context) {
				defer wg.Done()
				key := fmt.Sprintf("%s/%05d", sd.prefix, c)
				var mine []time.Duration
				for ctx.Err() == nil && time.Now().Before(end) {
					start := time.Now()
					lease, err := sd.l.TryAcquire(ctx, key, baton.WithTTL(15*time.Second))
					if err != nil {
						if ctx.Err() == nil {
							firstErr.CompareAndSwap(nil, err)
						}
						break
					}
					if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
						firstErr.CompareAndSwap(nil, err)
						break
					}
					mine = append(mine, time.Since(start))
					n.Add(1)
				}
				mu.Lock()
				sd.lat = append(sd.lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		sd.wall += time.Since(start)
		cpu1, _ := processCPU()
		sd.cpu += cpu1 - cpu0
		sd.n += n.Load()
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
		return ctx.Err()
	}
	httpSide := &side{l: overHTTP, name: "http", prefix: "cyc-http"}
	inSide := &side{l: direct, name: "direct", prefix: "cyc-direct"}
	each := f.duration / cycleBlocks
	for range cycleBlocks {
		if err := block(httpSide, each); err != nil {
			return fmt.Errorf("cycles over HTTP: %w", err)
		}
		if err := block(inSide, each); err != nil {
			return fmt.Errorf("cycles in process: %w", err)
		}
	}
	rate := func(sd *side) float64 { return float64(sd.n) / max(sd.wall.Seconds(), 1e-9) }
	cpuPer := func(sd *side) string {
		if sd.n == 0 || sd.cpu <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.0f µs", float64(sd.cpu.Microseconds())/float64(sd.n))
	}
	fmt.Printf("cycles: %d clients, each acquiring and releasing a key of its own, %s per side in %d alternating blocks\n",
		f.clients, f.duration, cycleBlocks)
	fmt.Printf("  over HTTP %.0f/s (p50 %s, p99 %s, CPU %s a cycle); in process %.0f/s (p50 %s, p99 %s, CPU %s a cycle); HTTP / in process = %.2fx\n",
		rate(httpSide), ms(pct(httpSide.lat, 0.5)), ms(pct(httpSide.lat, 0.99)), cpuPer(httpSide),
		rate(inSide), ms(pct(inSide.lat, 0.5)), ms(pct(inSide.lat, 0.99)), cpuPer(inSide), rate(httpSide)/max(rate(inSide), 1e-9))
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
