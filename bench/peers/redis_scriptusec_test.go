package peers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
)

// BenchmarkRedisScriptUsec measures what each lock-cycle script costs the server, as the server
// times it: INFO commandstats' usec per EVALSHA (and EVAL) call, which includes the calls the
// script makes and is not charged for time the server waits for the CPU, so it holds up better
// than wall time on a loaded machine. The grants of a block of keys run first (8 clients), then
// their releases, with the stats read around each phase: "acq-usec" and "rel-usec" per script
// call, "cycle-usec" their sum. A first block, not counted, writes every key's record, so the
// measured grants are of keys whose last lease was released (the steady state of a lock).
// "acq-cpu-us" and "rel-cpu-us" are the server's CPU time (INFO cpu, user + sys) per grant and
// per release over the same phases: it includes reading the requests and writing the replies,
// and, unlike usec, is not inflated when the server is preempted mid-script on busy cores.
func BenchmarkRedisScriptUsec(b *testing.B) {
	addr := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	b.Cleanup(func() { c.Close() })
	b.Run("baton", func(b *testing.B) {
		l := batonRedisLocker(b, addr)
		scriptUsec(b, c, func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.TryAcquire(ctx, key, baton.WithKeepalive(false))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		})
	})
	b.Run("sameWork", func(b *testing.B) {
		cycle := sameWorkSteps(c)
		scriptUsec(b, c, cycle)
	})
}

// sameWorkSteps is redisSameWorkCycle split into its grant and its release.
func sameWorkSteps(c *redis.Client) func(ctx context.Context, key string) (func(context.Context) error, error) {
	ttl := strconv.FormatInt(benchTTL.Milliseconds(), 10)
	var seq atomic.Int64
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		id := fmt.Sprintf("%032x", seq.Add(1))
		k := "samework:lease:" + key
		tok, err := sameWorkAcquire.Run(ctx, c, []string{k, "samework:token"}, id, ttl).Int64()
		if err != nil {
			return nil, err
		}
		if tok == 0 {
			return nil, fmt.Errorf("same-work grant refused %s", key)
		}
		return func(ctx context.Context) error {
			r, err := sameWorkRelease.Run(ctx, c, []string{k}, id).Int64()
			if err == nil && r != 2 {
				err = fmt.Errorf("same-work release of %s: %d", key, r)
			}
			return err
		}, nil
	}
}

type stepFunc func(ctx context.Context, key string) (func(context.Context) error, error)

func scriptUsec(b *testing.B, c *redis.Client, acquire stepFunc) {
	ctx := context.Background()
	const block = 1000
	keys := make([]string, block)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/usec/%d", i)
	}
	releases := make([]func(context.Context) error, block)
	var acqUsec, relUsec, acqCPU, relCPU float64
	var acqCalls, relCalls int64
	for round := -1; round < (b.N+block-1)/block; round++ {
		n := block
		if round >= 0 {
			n = min(block, b.N-round*block)
		}
		u0, c0 := scriptStats(b, c)
		p0 := cpuSeconds(b, c)
		inParallel(b, n, func(i int) error {
			var err error
			releases[i], err = acquire(ctx, keys[i])
			return err
		})
		p1 := cpuSeconds(b, c)
		u1, c1 := scriptStats(b, c)
		p2 := cpuSeconds(b, c)
		inParallel(b, n, func(i int) error { return releases[i](ctx) })
		p3 := cpuSeconds(b, c)
		u2, c2 := scriptStats(b, c)
		if round >= 0 {
			acqCPU, relCPU = acqCPU+p1-p0, relCPU+p3-p2
			acqUsec, acqCalls = acqUsec+u1-u0, acqCalls+c1-c0
			relUsec, relCalls = relUsec+u2-u1, relCalls+c2-c1
		}
	}
	if acqCalls > 0 && relCalls > 0 {
		b.ReportMetric(acqUsec/float64(b.N), "acq-usec")
		b.ReportMetric(relUsec/float64(b.N), "rel-usec")
		b.ReportMetric((acqUsec+relUsec)/float64(b.N), "cycle-usec")
		b.ReportMetric(float64(acqCalls+relCalls)/float64(b.N), "scripts/op")
		b.ReportMetric(acqCPU*1e6/float64(b.N), "acq-cpu-us")
		b.ReportMetric(relCPU*1e6/float64(b.N), "rel-cpu-us")
	}
}

// inParallel runs fn(0..n-1) over 8 goroutines.
func inParallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// scriptStats returns the server's total usec and calls of EVALSHA and EVAL so far.
func scriptStats(b *testing.B, c *redis.Client) (usec float64, calls int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		var rest string
		var ok bool
		if rest, ok = strings.CutPrefix(line, "cmdstat_evalsha:"); !ok {
			if rest, ok = strings.CutPrefix(line, "cmdstat_eval:"); !ok {
				continue
			}
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatalf("commandstats %q: %v", line, err)
				}
				calls += n
			case "usec":
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("commandstats %q: %v", line, err)
				}
				usec += x
			}
		}
	}
	return usec, calls
}
