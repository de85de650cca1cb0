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

	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkRedisServerCPU measures what each contender's lock cycle (8 clients, uncontended, as
// in BenchmarkRedisCycle) costs the Redis server: its CPU time (INFO cpu, user + sys) per cycle,
// "server-us/op", and the raw baseline's server CPU per cycle divided by the contender's,
// "x-raw-server" (1.0 = as cheap for the server as SET NX PX + compare-and-delete). The two
// alternate in blocks, as BenchPaired does. On a shared 2-core machine the server's CPU time is
// a steadier measure of the work a design asks of the server than the cycle's wall time.
func BenchmarkRedisServerCPU(b *testing.B) {
	addr := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	b.Cleanup(func() { c.Close() })
	raw := rawCycle(c)
	for _, p := range []struct {
		name  string
		cycle func(b *testing.B) storetest.CycleFunc
	}{
		{"baton", func(b *testing.B) storetest.CycleFunc { return storetest.LockerCycle(batonRedisLocker(b, addr)) }},
		{"redsync", func(*testing.B) storetest.CycleFunc { return redsyncCycle(c) }},
		{"redislock", func(*testing.B) storetest.CycleFunc { return redislockCycle(c) }},
		{"sameWork", func(*testing.B) storetest.CycleFunc { return redisSameWorkCycle(c) }},
	} {
		b.Run(p.name+"/clients=8", func(b *testing.B) {
			cycle := p.cycle(b)
			const blocks = 10
			var cycleCPU, rawCPU float64
			for i := range blocks {
				n := b.N / blocks
				if i == blocks-1 {
					n = b.N - (blocks-1)*(b.N/blocks)
				}
				rawCPU += serverCPU(b, c, func() { runServerCycles(b, 8, n, raw) })
				cycleCPU += serverCPU(b, c, func() { runServerCycles(b, 8, n, cycle) })
			}
			if b.N > 0 && cycleCPU > 0 {
				b.ReportMetric(cycleCPU*1e6/float64(b.N), "server-us/op")
				b.ReportMetric(rawCPU*1e6/float64(b.N), "raw-server-us/op")
				b.ReportMetric(rawCPU/cycleCPU, "x-raw-server")
			}
		})
	}
}

// serverCPU returns the server's CPU seconds (user + sys) spent while fn ran.
func serverCPU(b *testing.B, c *redis.Client, fn func()) float64 {
	b.Helper()
	before := cpuSeconds(b, c)
	fn()
	return cpuSeconds(b, c) - before
}

func cpuSeconds(b *testing.B, c *redis.Client) float64 {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu %q: %v", line, err)
				}
				total += x
			}
		}
	}
	return total
}

// runServerCycles runs n cycles over clients goroutines, each on a key of its own.
func runServerCycles(b *testing.B, clients, n int, cycle storetest.CycleFunc) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		key := fmt.Sprintf("bench/%d", i)
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
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
