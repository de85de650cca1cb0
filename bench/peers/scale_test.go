package peers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// The scale-out benchmarks: three `baton serve` processes (the binary built from this tree) on
// one PostgreSQL schema, and the Go client in this process spread round-robin over the first k
// of them, k = 1, 2, 3 alternating in each round. All three run throughout, so the idle ones
// cost the same in every block; each block uses keys, jobs or resources of its own.

// scaleReplicas is how many `baton serve` processes the scale-out benchmarks start.
const scaleReplicas = 3

// scaleRounds is how many times each replica count runs, alternating 1, 2, 3, 1, 2, 3, ...
const scaleRounds = 3

// scaleGuard bounds every wait of these benchmarks (a server ready, a drain, a grant): it turns a
// hang into a failure, it is never what is measured.
const scaleGuard = 3 * time.Minute

// replica is one running `baton serve`.
type replica struct {
	url string
	cmd *exec.Cmd
	log string
}

// scaleSet is the running replicas and the name their PostgreSQL connections carry.
type scaleSet struct {
	rs   []*replica
	app  string
	pool *pgxpool.Pool
}

// runDelay is the time pid's threads have spent runnable but waiting for a CPU, in seconds
// (/proc/PID/task/*/schedstat, second field; 0 if the kernel keeps no schedstats): on a shared
// machine, how much of a block went to waiting for the cores rather than to work.
func runDelay(pid int) float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns float64
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(raw)); len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			ns += v
		}
	}
	return ns / 1e9
}

// backendsCPU returns the CPU seconds so far of each PostgreSQL backend serving the replicas
// and their time waiting for a CPU (pg_stat_activity by application_name, /proc: the server must
// run on this machine).
func (s *scaleSet) backendsCPU(b *testing.B) map[int][2]float64 {
	rows, err := s.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, s.app)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	m := map[int][2]float64{}
	for _, pid := range pids {
		if _, c, ok := procStat(int(pid)); ok {
			m[int(pid)] = [2]float64{c, runDelay(int(pid))}
		}
	}
	return m
}

// buildBaton builds cmd/baton from this tree (without -race: it is measured) into a directory
// removed when b ends.
func buildBaton(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = "../.." // the root module, whose go.sum has the binary's dependencies
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building baton: %v\n%s", err, out)
	}
	return bin
}

// startReplicas builds baton and starts n `baton serve` processes on free loopback ports over
// one fresh PostgreSQL schema, one after the other (the first creates the tables), each ready
// when it returns. They are stopped (SIGTERM) when b ends.
func startReplicas(b *testing.B, pool *pgxpool.Pool, n int) *scaleSet {
	b.Helper()
	bin := buildBaton(b)
	schema := pgSchema(b, pool, "baton_scale", false)
	sep := "?"
	if strings.Contains(pgDSN(), "?") {
		sep = "&"
	}
	// The replicas' connections are named after the schema (application_name), so that the CPU
	// of their backends can be told from other sessions' on a shared server.
	storeURL := pgDSN() + sep + "baton_schema=" + schema + "&application_name=" + schema
	var rs []*replica
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		r := &replica{url: "http://" + addr, log: filepath.Join(b.TempDir(), fmt.Sprintf("serve-%d.log", i))}
		logf, err := os.Create(r.log)
		if err != nil {
			b.Fatal(err)
		}
		r.cmd = exec.Command(bin, "serve", "--listen", addr, "--store", storeURL, "--log-format", "json")
		r.cmd.Stdout, r.cmd.Stderr = logf, logf
		if err := r.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		logf.Close()
		b.Cleanup(func() { r.stop(b) })
		deadline := time.Now().Add(scaleGuard)
		for {
			resp, err := http.Get(r.url + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				out, _ := os.ReadFile(r.log)
				b.Fatalf("baton serve %d not ready after %s: %v\n%s", i, scaleGuard, err, out)
			}
			time.Sleep(20 * time.Millisecond) // the readiness endpoint is the only signal
		}
		rs = append(rs, r)
	}
	return &scaleSet{rs: rs, app: schema, pool: pool}
}

func (r *replica) stop(b *testing.B) {
	if r.cmd.Process == nil || r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			out, _ := os.ReadFile(r.log)
			b.Errorf("baton serve exited with %v\n%s", err, out)
		}
	case <-time.After(scaleGuard):
		_ = r.cmd.Process.Kill()
		b.Errorf("baton serve still running %s after SIGTERM", scaleGuard)
	}
}

// cpu is the replica's CPU seconds so far.
func (r *replica) cpu() float64 {
	_, c, _ := procStat(r.cmd.Process.Pid)
	return c
}

// errorLines counts the replica's ERROR log lines (its log is JSON).
func (r *replica) errorLines() int {
	out, _ := os.ReadFile(r.log)
	return strings.Count(string(out), `"level":"ERROR"`)
}

// scaleClient is a Go client store for the replica, closed when b ends.
func scaleClient(b *testing.B, r *replica, cfg client.Config) *client.Store {
	b.Helper()
	cfg.BaseURL = r.url
	st, err := client.NewStore(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scaleCost is what one replica count did in all its blocks: work, wall time, and CPU seconds of
// the PostgreSQL backends serving the replicas, of the replicas and of this process (the
// clients). PostgreSQL's background processes (WAL writer, checkpointer) are not counted: on a
// shared server they cannot be told apart from other sessions' work.
type scaleCost struct {
	n                   int
	wall                time.Duration
	pg, servers, client float64
	// Seconds runnable but waiting for a CPU: the backends' and the replicas' threads.
	pgWait, serversWait float64
}

// measure runs block and adds its cost. block returns when its work ended (zero: when it
// returns): a drain's work ends with its last job, before its workers stop.
func (c *scaleCost) measure(b *testing.B, set *scaleSet, n int, block func() (time.Time, error)) {
	b.Helper()
	serversCPU := func() (s, wait float64) {
		for _, r := range set.rs {
			s += r.cpu()
			wait += runDelay(r.cmd.Process.Pid)
		}
		return s, wait
	}
	_, self0, _ := procStat(os.Getpid())
	pg0 := set.backendsCPU(b)
	srv0, srvWait0 := serversCPU()
	start := time.Now()
	end, err := block()
	if err != nil {
		b.Fatal(err)
	}
	if end.IsZero() {
		end = time.Now()
	}
	c.wall += end.Sub(start)
	_, self1, _ := procStat(os.Getpid())
	// A backend that ended during the block is missed; one that began is counted whole.
	for pid, cpu := range set.backendsCPU(b) {
		c.pg += cpu[0] - pg0[pid][0]
		c.pgWait += cpu[1] - pg0[pid][1]
	}
	srv1, srvWait1 := serversCPU()
	c.servers += srv1 - srv0
	c.serversWait += srvWait1 - srvWait0
	c.client += self1 - self0
	c.n += n
}

func (c *scaleCost) rate() float64 { return float64(c.n) / c.wall.Seconds() }

// report reports, for k replicas, the rate (unit per s), its ratio to one replica's, the CPU time
// per unit of PostgreSQL's backends, the replicas and the clients in µs, and the share of the
// machine's CPU (CPU seconds ÷ (wall seconds × cores)) of the backends and of all three.
func (c *scaleCost) report(b *testing.B, k int, unit string, one *scaleCost) {
	per := func(s float64) float64 { return s * 1e6 / float64(c.n) }
	b.ReportMetric(c.rate(), fmt.Sprintf("%s/s-%dr", unit, k))
	if k > 1 {
		b.ReportMetric(c.rate()/one.rate(), fmt.Sprintf("x-1replica-%dr", k))
	}
	b.ReportMetric(per(c.pg), fmt.Sprintf("pg-µs/%s-%dr", unit, k))
	b.ReportMetric(per(c.servers), fmt.Sprintf("serve-µs/%s-%dr", unit, k))
	b.ReportMetric(per(c.client), fmt.Sprintf("client-µs/%s-%dr", unit, k))
	b.ReportMetric(per(c.pgWait), fmt.Sprintf("pg-runq-µs/%s-%dr", unit, k))
	b.ReportMetric(per(c.serversWait), fmt.Sprintf("serve-runq-µs/%s-%dr", unit, k))
	b.ReportMetric(100*c.pg/c.wall.Seconds()/float64(runtime.NumCPU()), fmt.Sprintf("pg-cpu%%-%dr", k))
	b.ReportMetric(100*(c.pg+c.servers+c.client)/c.wall.Seconds()/float64(runtime.NumCPU()), fmt.Sprintf("all-cpu%%-%dr", k))
}

// loadAvg is the 1-minute load average, for the record.
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// checkReplicaErrors fails b if a replica logged an ERROR.
func checkReplicaErrors(b *testing.B, rs []*replica) {
	for i, r := range rs {
		if n := r.errorLines(); n > 0 {
			out, _ := os.ReadFile(r.log)
			b.Errorf("replica %d logged %d ERROR lines:\n%s", i, n, out)
		}
	}
}

// BenchmarkScaleLockCycle: 64 clients, each taking and releasing a key of its own (TryAcquire +
// Release, TTL 15 s, keepalive on) through the Go client, spread round-robin over the first k of
// three replicas; k = 1, 2, 3 alternating, scaleRounds blocks each, each block b.N cycles in
// all. Reports cycles/s per k, the ratio to one replica, CPU per cycle (PostgreSQL, the
// replicas, the clients) and PostgreSQL's share of the machine's CPU.
func BenchmarkScaleLockCycle(b *testing.B) {
	const clients = 64
	pool := pgPool(b, 2)
	set := startReplicas(b, pool, scaleReplicas)
	rs := set.rs
	lockers := make([]*baton.Locker, len(rs))
	for i, r := range rs {
		l, err := baton.NewLocker(scaleClient(b, r, client.Config{}), &baton.Config{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		lockers[i] = l
	}
	ctx := context.Background()
	per := max(b.N/clients, 1)
	runScaleRounds(b, set, per*clients, "cycles", func(round, k int) func() (time.Time, error) {
		return func() (time.Time, error) {
			var wg sync.WaitGroup
			var firstErr atomic.Value
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lockers[c%k]
					key := fmt.Sprintf("cyc/%d/%d/%03d", round, k, c)
					for range per {
						lease, err := l.TryAcquire(ctx, key, baton.WithTTL(15*time.Second))
						if err == nil {
							err = lease.Release(ctx)
						}
						if err != nil {
							firstErr.CompareAndSwap(nil, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			err, _ := firstErr.Load().(error)
			return time.Time{}, err
		}
	})
}

// runScaleRounds runs scaleRounds rounds of blocks over k = 1, 2, 3 replicas alternating, each
// block of n units: block(round, k) does the block's untimed preparation and returns its timed
// work, which returns when the work ended (zero: when it returns). It then reports each k's
// costs (scaleCost.report) and checks the replicas' logs.
func runScaleRounds(b *testing.B, set *scaleSet, n int, unit string, block func(round, k int) func() (time.Time, error)) {
	b.Helper()
	costs := make([]*scaleCost, scaleReplicas+1)
	for k := 1; k <= scaleReplicas; k++ {
		costs[k] = &scaleCost{}
	}
	b.Logf("load before: %s", loadAvg())
	b.ResetTimer()
	b.StopTimer()
	for round := range scaleRounds {
		for k := 1; k <= scaleReplicas; k++ {
			costs[k].measure(b, set, n, block(round, k))
		}
	}
	b.Logf("load after: %s", loadAvg())
	for k := 1; k <= scaleReplicas; k++ {
		costs[k].report(b, k, unit, costs[1])
	}
	b.ReportMetric(0, "ns/op")
	checkReplicaErrors(b, set.rs)
}

// BenchmarkScaleJobs: b.N no-op jobs over 1,000 resources submitted in bulk (SubmitMany through
// one replica, untimed), then drained by baton.Workers of 64 slots in all, one Worker per replica
// in use (its Queue over the Go client of that replica, 64/k slots each); k = 1, 2, 3
// alternating, scaleRounds drains each. A drain ends when the workers have seen b.N jobs
// succeed. Reports jobs/s per k, the ratio to one replica, CPU per job and PostgreSQL's share.
// Two variants: the Go client's default claim, which waits in the server for a job (a long-poll,
// client.Config.ClaimWait), and claims that never wait there (ClaimWait -1: a worker that finds
// nothing waits for its own poll or a wake-up of its own process).
func BenchmarkScaleJobs(b *testing.B) {
	for _, v := range []struct {
		name string
		wait time.Duration
	}{{"claimwait=default", 0}, {"claimwait=off", -1}} {
		b.Run(v.name, func(b *testing.B) { benchScaleJobs(b, v.wait) })
	}
}

func benchScaleJobs(b *testing.B, claimWait time.Duration) {
	const (
		slots     = 64
		resources = 1000
		kind      = "noop"
	)
	pool := pgPool(b, 2)
	set := startReplicas(b, pool, scaleReplicas)
	rs := set.rs
	ctx := context.Background()
	queues := make([]*baton.Queue, len(rs))
	for i, r := range rs {
		q, err := baton.NewQueue(ctx, scaleClient(b, r, client.Config{ClaimWait: claimWait}), &baton.QueueConfig{
			Kinds: []baton.Kind{{Name: kind}}, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		queues[i] = q
	}
	submitter := scaleClient(b, rs[0], client.Config{})
	n := max(b.N, 100)
	runScaleRounds(b, set, n, "jobs", func(round, k int) func() (time.Time, error) {
		// Load: n jobs, round-robin over resources of this block's own.
		for i := 0; i < n; i += 1000 {
			ps := make([]*store.SubmitParams, 0, min(1000, n-i))
			for g := i; g < min(i+1000, n); g++ {
				ps = append(ps, &store.SubmitParams{Kind: kind, Resource: fmt.Sprintf("r/%d/%d/%d", round, k, g%resources)})
			}
			if _, err := submitter.SubmitMany(ctx, ps); err != nil {
				b.Fatal(err)
			}
		}
		// The drain ends with its last job; the workers' stop is not part of it.
		return func() (time.Time, error) {
			dctx, cancel := context.WithTimeout(ctx, scaleGuard)
			defer cancel()
			return storetest.DrainWorkers(dctx, queues[:k], kind, slots, n)
		}
	})
}

// BenchmarkScaleHandoff: lock handoff between two clients, the holder's on replica A and the
// waiter's on replica A (same) or on the next replica B (cross), alternating same and cross, A
// rotating over the three replicas; one pair at a time, b.N handoffs of each kind. The waiter
// blocks in Acquire (waiting in its server); once its ticket is in the key's line, the holder
// releases at t0 and the waiter's Acquire returns at t1: handoff = t1 − t0 (the release's round
// trip included). Reports p50 and p99 of both in ms, and x-same = cross p50 ÷ same p50.
func BenchmarkScaleHandoff(b *testing.B) {
	pool := pgPool(b, 2)
	set := startReplicas(b, pool, scaleReplicas)
	rs := set.rs
	stores := make([]*client.Store, len(rs))
	lockers := make([]*baton.Locker, len(rs))
	for i, r := range rs {
		stores[i] = scaleClient(b, r, client.Config{})
		l, err := baton.NewLocker(stores[i], &baton.Config{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		lockers[i] = l
	}
	ctx := context.Background()
	n := max(b.N, 10)
	var same, cross []time.Duration
	handoff := func(i, a, w int) time.Duration {
		key := fmt.Sprintf("handoff/%d", i)
		lease, err := lockers[a].TryAcquire(ctx, key, baton.WithTTL(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		type grant struct {
			at    time.Time
			lease *baton.Lease
			err   error
		}
		got := make(chan grant, 1)
		wctx, cancel := context.WithTimeout(ctx, scaleGuard)
		defer cancel()
		go func() {
			l, err := lockers[w].Acquire(wctx, key, baton.WithTTL(30*time.Second))
			got <- grant{time.Now(), l, err}
		}()
		// The waiter's ticket in the line says its server is waiting for the key (it subscribed
		// before the attempt that wrote it). Polling is the only signal from another process.
		deadline := time.Now().Add(scaleGuard)
		for {
			line, err := stores[a].ResourceLine(ctx, key, 10)
			if err != nil {
				b.Fatal(err)
			}
			if len(line.Tickets) > 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no ticket in the line of %s after %s", key, scaleGuard)
			}
			time.Sleep(time.Millisecond)
		}
		t0 := time.Now()
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		g := <-got
		if g.err != nil {
			b.Fatal(g.err)
		}
		d := g.at.Sub(t0)
		if err := g.lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return d
	}
	b.Logf("load before: %s", loadAvg())
	b.ResetTimer()
	for i := range n {
		a := i % len(rs)
		for _, cr := range []bool{i%2 == 0, i%2 != 0} { // which goes first alternates too
			if cr {
				cross = append(cross, handoff(2*i+1, a, (a+1)%len(rs)))
			} else {
				same = append(same, handoff(2*i, a, a))
			}
		}
	}
	b.StopTimer()
	b.Logf("load after: %s", loadAvg())
	q := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(same, 0.5), "same-p50-ms")
	b.ReportMetric(q(same, 0.99), "same-p99-ms")
	b.ReportMetric(q(cross, 0.5), "cross-p50-ms")
	b.ReportMetric(q(cross, 0.99), "cross-p99-ms")
	b.ReportMetric(q(cross, 0.5)/q(same, 0.5), "x-same-p50")
	b.ReportMetric(0, "ns/op")
	checkReplicaErrors(b, rs)
}
