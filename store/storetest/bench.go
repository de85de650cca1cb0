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

// BenchPaired measures cycle against baseline at clients concurrent clients, each on a key of its
// own (uncontended). The two alternate in blocks of b.N/10 cycles so that drift in the database
// (checkpoints, autovacuum, WAL growth) weighs on both alike. ns/op is cycle's; the baseline's
// ns/op and the throughput ratio baseline/cycle ("x-baseline", 1.0 = as fast) are reported too.
func BenchPaired(b *testing.B, clients int, baseline, cycle CycleFunc) {
	benchAgainst(b, clients, false, cycle, Baseline{Cycle: baseline})
}

// Baseline is a cycle that BenchAgainst measures another against.
type Baseline struct {
	// Name labels the baseline's metrics: "<Name>-ns/op", "x-<Name>" and "<Name>-cpu-us/op".
	// The first baseline's are "baseline-ns/op", "x-baseline" and "baseline-cpu-us/op",
	// whatever its name.
	Name  string
	Cycle CycleFunc
}

// BenchAgainst is BenchPaired against several baselines at once: in each of the 10 blocks every
// baseline runs its b.N/10 cycles, then cycle (timed). For each baseline it reports its ns/op and
// the throughput ratio baseline/cycle. It also reports the CPU time this process spent per
// cycle ("cpu-us/op", and per baseline cycle): for a database server running in the benchmark
// process (an embedded etcd), that is client and server together, a steadier measure than
// wall time on a shared machine.
func BenchAgainst(b *testing.B, clients int, cycle CycleFunc, baselines ...Baseline) {
	benchAgainst(b, clients, true, cycle, baselines...)
}

// benchAgainst runs BenchAgainst and returns cycle's time per cycle over each baseline's (1.0 = as
// fast, 2.0 = twice as slow); nil if nothing was measured.
func benchAgainst(b *testing.B, clients int, cpu bool, cycle CycleFunc, baselines ...Baseline) []float64 {
	const blocks = 10
	var cycleTime, cycleCPU time.Duration
	baseTime := make([]time.Duration, len(baselines))
	baseCPU := make([]time.Duration, len(baselines))
	_, cpuOK := processCPU()
	cpuOK = cpu && cpuOK
	// timed runs n cycles and adds their wall and CPU time.
	timed := func(n int, c CycleFunc, wall, used *time.Duration) {
		before, _ := processCPU()
		*wall += runCycles(b, clients, n, c)
		after, _ := processCPU()
		*used += after - before
	}
	var cycleN, baseN int
	b.ResetTimer()
	for i := range blocks {
		n := b.N / blocks
		if i == blocks-1 {
			n = b.N - (blocks-1)*(b.N/blocks)
		}
		b.StopTimer()
		for j, base := range baselines {
			timed(n, base.Cycle, &baseTime[j], &baseCPU[j])
		}
		baseN += n
		b.StartTimer()
		timed(n, cycle, &cycleTime, &cycleCPU)
		cycleN += n
	}
	b.StopTimer()
	if cycleN == 0 || baseN == 0 || cycleTime <= 0 {
		return nil
	}
	cycleNs := float64(cycleTime.Nanoseconds()) / float64(cycleN)
	if cpuOK {
		b.ReportMetric(float64(cycleCPU.Microseconds())/float64(cycleN), "cpu-us/op")
	}
	costs := make([]float64, len(baselines))
	for j, base := range baselines {
		name := base.Name
		if j == 0 {
			name = "baseline"
		}
		baseNs := float64(baseTime[j].Nanoseconds()) / float64(baseN)
		costs[j] = cycleNs / baseNs
		b.ReportMetric(baseNs, name+"-ns/op")
		b.ReportMetric(baseNs/cycleNs, "x-"+name)
		if cpuOK {
			b.ReportMetric(float64(baseCPU[j].Microseconds())/float64(baseN), name+"-cpu-us/op")
		}
	}
	return costs
}

// runCycles runs n cycles over clients goroutines and returns the elapsed time.
func runCycles(b *testing.B, clients, n int, cycle CycleFunc) time.Duration {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for c := range clients {
		key := fmt.Sprintf("bench/%d", c)
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := cycle(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return elapsed
}

// BenchLockCycle runs the paired lock-cycle benchmark at 1 and 8 clients: locker's cycle against
// the backend's raw baseline.
func BenchLockCycle(b *testing.B, locker *baton.Locker, baseline CycleFunc) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			BenchPaired(b, clients, baseline, LockerCycle(locker))
		})
	}
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

// BenchHandoff has waiters goroutines contend for one key with a waiting Acquire; each holder
// releases at once. It measures, per handoff, the time from the start of the release to the
// moment the next holder's Acquire returned, and reports p50 and p99 in milliseconds.
func BenchHandoff(b *testing.B, l *baton.Locker, waiters int) {
	BenchHandoffFunc(b, waiters, func(ctx context.Context) (func(context.Context) error, error) {
		lease, err := l.Acquire(ctx, "handoff", baton.WithKeepalive(false))
		if err != nil {
			return nil, err
		}
		return lease.Release, nil
	})
}

// AcquireFunc waits for the benchmark's one key and returns its release.
type AcquireFunc func(ctx context.Context) (release func(context.Context) error, err error)

// BenchHandoffFunc is BenchHandoff for any lock, Baton's or a peer library's: waiters goroutines
// contend through acquire, each holder releases at once.
func BenchHandoffFunc(b *testing.B, waiters int, acquire AcquireFunc) {
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
	ReportPercentiles(b, latencies)
}

// ReportPercentiles reports the p50 and p99 of latencies in milliseconds (nothing if empty).
func ReportPercentiles(b *testing.B, latencies []time.Duration) {
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
