package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/postgres"
)

// Baton's jobs against Graphile Worker and pg-boss (Node.js, bench/peers/node), each in its mode
// that runs one job per key at a time in submission order: Graphile Worker with a named queue per
// key (queueName), pg-boss with policy key_strict_fifo and a singletonKey per key. Each system's
// runs are checked from the start and end times its handler recorded: no two jobs of a key at
// once, and a key's jobs started in submission order. Baton's violations fail the benchmark; a
// peer's are reported as metrics.

// jsResources is how many resources (keys) the jobs of the Node.js comparisons spread over.
const jsResources = 1000

// jsDB is the database the Node.js comparisons run in, created on the test server if missing, so
// that its pg_stat_database counters (transactions, rows written) are the benchmark's alone.
const jsDB = "baton_bench_js"

// jsSystems are the sides of BenchmarkJSJobs, in the order they alternate.
var jsSystems = []string{"baton", "gw", "gwfast", "pgboss"}

// jobRec is one job's run: its key, its position among the key's jobs in submission order, when
// it was submitted (latency runs), started and ended, in ms on one clock, and how often it ran.
type jobRec struct {
	K int     `json:"k"`
	S int64   `json:"s"`
	T float64 `json:"t"`
	A float64 `json:"a"`
	B float64 `json:"b"`
	N int     `json:"n"`
}

// jobViolations counts, per key, jobs that started before the key's previous job (by start time)
// ended, and jobs that started before a job submitted ahead of them; never-run and rerun jobs.
type jobViolations struct {
	overlap, order, missing, reruns int
}

func (v jobViolations) total() int { return v.overlap + v.order + v.missing + v.reruns }

func (v jobViolations) String() string {
	return fmt.Sprintf("overlap %d, out of order %d, never ran %d, ran again %d", v.overlap, v.order, v.missing, v.reruns)
}

func checkJobRecs(recs []jobRec) jobViolations {
	var v jobViolations
	byKey := map[int][]jobRec{}
	for _, r := range recs {
		if r.N == 0 || r.A < 0 {
			v.missing++
			continue
		}
		if r.N > 1 {
			v.reruns++
		}
		byKey[r.K] = append(byKey[r.K], r)
	}
	for _, rs := range byKey {
		slices.SortFunc(rs, func(x, y jobRec) int {
			if x.A != y.A {
				if x.A < y.A {
					return -1
				}
				return 1
			}
			return int(x.S - y.S)
		})
		for i := 1; i < len(rs); i++ {
			if rs[i].A < rs[i-1].B {
				v.overlap++
			}
			if rs[i].S < rs[i-1].S {
				v.order++
			}
		}
	}
	return v
}

// jsDSN is the test server's DSN with jsDB as its database; jsDB is created if missing.
func jsDSN(b *testing.B) string {
	ctx := context.Background()
	u, err := url.Parse(pgDSN())
	if err != nil {
		b.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, pgDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, jsDB).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+jsDB); err != nil && !strings.Contains(err.Error(), "already exists") {
			b.Fatal(err)
		}
	}
	u.Path = "/" + jsDB
	return u.String()
}

// nodePeerDir is bench/peers/node with its packages installed (npm ci), or it skips b.
func nodePeerDir(b *testing.B) string {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not installed: the Graphile Worker and pg-boss comparisons need Node.js and npm", tool)
		}
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		b.Fatal(err)
	}
	for _, pkg := range []string{"graphile-worker", "pg-boss"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			b.Skipf("%s is not installed in %s: run `npm ci` there (make bench-peers-js does)", pkg, dir)
		}
	}
	return dir
}

// dbStats are the database's cumulative pg_stat_database counters: transactions ended and rows
// written (see jsCost.settle for when they are complete).
type dbStats struct{ xacts, rows float64 }

func readDBStats(b *testing.B, pool *pgxpool.Pool) dbStats {
	var s dbStats
	if err := pool.QueryRow(context.Background(), `SELECT (xact_commit + xact_rollback)::float8,
		(tup_inserted + tup_updated + tup_deleted)::float8 FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.xacts, &s.rows); err != nil {
		b.Fatal(err)
	}
	return s
}

// jsCost is what one system's timed runs cost, summed: wall time, WAL, CPU of the client process
// (this one for Baton, the node process for the peers) and of the server, transactions and rows
// written in the benchmark's database, and the violations found in the records.
type jsCost struct {
	jobs         float64
	time         time.Duration
	wal, cpu, pg float64
	xacts, rows  float64
	st0          dbStats // at the start of the last measure
	viol         jobViolations
}

// measure runs drain once, timed (drain returns when every job is done and its completion
// written), and adds its cost. clientPID, if not 0, is the process whose CPU counts as the
// client's instead of this one's.
func (c *jsCost) measure(b *testing.B, pool *pgxpool.Pool, meter *cpuMeter, clientPID int, jobs int, drain func() error) {
	lsn := walLSN(b, pool)
	st0 := readDBStats(b, pool)
	self0, pg0 := meter.read()
	var cl0 float64
	if clientPID != 0 {
		_, cl0, _ = procStat(clientPID)
	}
	start := time.Now()
	if err := drain(); err != nil {
		b.Fatal(err)
	}
	c.time += time.Since(start)
	self1, pg1 := meter.read()
	if clientPID != 0 {
		_, cl1, _ := procStat(clientPID)
		c.cpu += cl1 - cl0
	} else {
		c.cpu += self1 - self0
	}
	c.pg += pg1 - pg0
	c.wal += walSince(b, pool, lsn)
	c.jobs += float64(jobs)
	c.st0 = st0
}

// settle adds the pg_stat_database deltas since the last measure, once the side's connections
// are closed or idle: a busy backend sends its counters at most once a second, and an idle one
// within a second or two, so this waits 2 s first (untimed).
func (c *jsCost) settle(b *testing.B, pool *pgxpool.Pool) {
	time.Sleep(2 * time.Second)
	st1 := readDBStats(b, pool)
	c.xacts += st1.xacts - c.st0.xacts
	c.rows += st1.rows - c.st0.rows
}

// nodePeer is a running peer.mjs.
type nodePeer struct {
	sys   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	out   string
	errb  *strings.Builder
}

// startNodePeer starts peer.mjs for system in mode with env, in a fresh schema of jsDB (dropped
// when b ends), and waits until it has loaded its jobs (or started its workers).
func startNodePeer(b *testing.B, dir, dsn string, pool *pgxpool.Pool, system, mode string, env map[string]int) *nodePeer {
	schema := pgSchema(b, pool, "js_"+system, false)
	out := filepath.Join(b.TempDir(), "jobs.jsonl")
	cmd := exec.Command("node", "peer.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PEER_SYSTEM="+system, "PEER_MODE="+mode, "PEER_DSN="+dsn,
		"PEER_SCHEMA="+schema, "PEER_OUT="+out)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+strconv.Itoa(v))
	}
	p := &nodePeer{sys: system, cmd: cmd, out: out, lines: make(chan string, 4), errb: &strings.Builder{}}
	cmd.Stderr = p.errb
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	p.expect(b, "loaded")
	return p
}

func (p *nodePeer) expect(b *testing.B, word string) {
	l, ok := <-p.lines
	if !ok || l != word {
		_ = p.cmd.Wait()
		b.Fatalf("peer %s: expected %q, got %q (stderr: %s)", p.sys, word, l, p.errb.String())
	}
}

// run sends go and waits for drained.
func (p *nodePeer) run(b *testing.B) error {
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		return err
	}
	p.expect(b, "drained")
	return nil
}

// records waits for the process to end and reads its records.
func (p *nodePeer) records(b *testing.B) []jobRec {
	if err := p.cmd.Wait(); err != nil {
		b.Fatalf("peer %s: %v (stderr: %s)", p.sys, err, p.errb.String())
	}
	raw, err := os.ReadFile(p.out)
	if err != nil {
		b.Fatal(err)
	}
	var recs []jobRec
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r jobRec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			b.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// batonRecorder records the runs of a baton.Worker's jobs: preallocated, one slot per job,
// indexed by an atomic counter.
type batonRecorder struct {
	recs []jobRec
	next atomic.Int64
	done chan struct{}
	t0   time.Time
	// In latency runs job g's Args hold {"g": g}, and its record is recs[g], whose submission
	// time T the submitter writes under mu.
	latency bool
	mu      sync.Mutex
	// SubmitMany calls of a latency run: how many, their total and longest time.
	submits               int
	submitTime, submitMax time.Duration
}

func newBatonRecorder(n int, latency bool) *batonRecorder {
	r := &batonRecorder{recs: make([]jobRec, n), done: make(chan struct{}), t0: time.Now(), latency: latency}
	return r
}

func (r *batonRecorder) ms() float64 { return float64(time.Since(r.t0).Nanoseconds()) / 1e6 }

// handle is the no-op handler: it records the start, yields once (so that two runs of one
// resource at once would overlap in the records), and records the end.
func (r *batonRecorder) handle(_ context.Context, j *baton.Job) error {
	a := r.ms()
	runtime.Gosched()
	end := r.ms()
	k, err := strconv.Atoi(strings.TrimPrefix(j.Resource, "r"))
	if err != nil {
		return err
	}
	var i int
	if r.latency {
		var args struct{ G int }
		if err := json.Unmarshal(j.Args, &args); err != nil {
			return err
		}
		i = args.G
		if i < 0 || i >= len(r.recs) {
			return fmt.Errorf("job %d: g %d out of range", j.ID, i)
		}
		r.mu.Lock()
		if r.recs[i].N > 0 {
			r.recs[i].N++ // a rerun
		} else {
			r.recs[i] = jobRec{K: k, S: j.Seq, T: r.recs[i].T, A: a, B: end, N: 1}
		}
		r.mu.Unlock()
	} else {
		i = int(r.next.Add(1) - 1)
		if i >= len(r.recs) {
			return fmt.Errorf("job %d: more runs than jobs", j.ID)
		}
		r.recs[i] = jobRec{K: k, S: j.Seq, A: a, B: end, N: 1}
	}
	return nil
}

// batonJS is Baton's side: a store in a schema of jsDB, and the n jobs over jsResources written
// straight into its tables as SubmitJob would (untimed), drained by one baton.Worker.
type batonJS struct {
	q      *baton.Queue
	pool   *pgxpool.Pool
	schema string
}

func newBatonJS(b *testing.B, dsn string, pool *pgxpool.Pool) *batonJS {
	ctx := context.Background()
	schema := pgSchema(b, pool, "js_baton", true)
	s, err := postgres.Open(ctx, dsn, postgres.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	q, err := baton.NewQueue(ctx, s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "noop"}}})
	if err != nil {
		b.Fatal(err)
	}
	return &batonJS{q: q, pool: pool, schema: schema}
}

func (s *batonJS) load(ctx context.Context, n int) error {
	return loadBatonJobs(ctx, s.pool, s.schema, jsResources, n)
}

// runWorker runs a worker of concurrency c with rec's handler until n jobs have ended (their
// completions written), or until work fails.
func (s *batonJS) runWorker(ctx context.Context, c, n int, rec *batonRecorder, work func() error) error {
	var ended atomic.Int64
	var failed atomic.Value
	w, err := s.q.NewWorker(baton.WorkerConfig{
		Concurrency: c,
		Handlers:    map[string]baton.Handler{"noop": rec.handle},
		OnJobEnd: func(j *baton.Job, outcome baton.JobState, _ time.Duration) {
			if outcome != baton.JobSucceeded {
				failed.CompareAndSwap(nil, fmt.Errorf("job %d ended %q", j.ID, outcome))
			}
			if ended.Add(1) == int64(n) {
				close(rec.done)
			}
		},
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()
	werr := make(chan error, 1)
	go func() { werr <- work() }()
	select {
	case <-rec.done:
	case err := <-errc:
		stop()
		return fmt.Errorf("worker stopped early: %v", err)
	}
	stop()
	if err := <-errc; err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

// BenchmarkJSJobs drains n = b.N no-op jobs over 1,000 resources with C jobs at a time through
// Baton (one baton.Worker), Graphile Worker with its defaults (gw), Graphile Worker with its local
// queue of C+1 jobs and batched completion (gwfast), and pg-boss with policy key_strict_fifo
// (pgboss), on one PostgreSQL in one run, alternating twice: baton, gw, gwfast, pgboss, baton, ...
// Each side's jobs are loaded untimed just before its drain. Reports jobs/s per system, x-gw,
// x-gwfast and x-pgboss (Baton jobs/s ÷ the peer's), and per job and system the WAL written, the
// client's CPU (this process for Baton, node for the peers), the server's CPU, and the
// transactions and rows written in the benchmark's database; and each peer's violations (<sys>-viol).
// BENCH_JS_SYSTEMS (comma-separated) limits the systems run; baton always runs.
// BENCH_JS_ROUNDS (default 2) sets the number of alternating rounds.
func BenchmarkJSJobs(b *testing.B) {
	dir := nodePeerDir(b)
	systems := jsSystemsFromEnv()
	cs := []int{10, 100, 1000}
	if v := os.Getenv("BENCH_JS_C"); v != "" {
		cs = nil
		for _, f := range strings.Split(v, ",") {
			c, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("BENCH_JS_C: %q is not a number", f)
			}
			cs = append(cs, c)
		}
	}
	for _, c := range cs {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) {
			ctx := context.Background()
			dsn := jsDSN(b)
			pool := pgPoolDSN(b, dsn, 2)
			// Every round of every system starts on fresh tables: each peer round runs in a schema
			// of its own, and so does each Baton round, unless BENCH_JS_BATON_REUSE keeps one
			// store for all of Baton's rounds. That shows what a jobs table full of the rows and
			// dead index entries of the rounds before does without VACUUM (this machine's
			// PostgreSQL runs with autovacuum off): Baton's C=100 drain took twice as long.
			reuse := os.Getenv("BENCH_JS_BATON_REUSE") != ""
			var bs *batonJS
			n := max(b.N, 100)
			meter := newCPUMeter(b, pool)
			costs := map[string]*jsCost{}
			for _, s := range systems {
				costs[s] = &jsCost{}
			}
			b.ResetTimer()
			b.StopTimer()
			rounds := envInt(b, "BENCH_JS_ROUNDS", 2)
			for range rounds {
				for _, sys := range systems {
					cost := costs[sys]
					before := cost.time
					var recs []jobRec
					if sys == "baton" {
						if bs == nil || !reuse {
							bs = newBatonJS(b, dsn, pool)
						}
						if err := bs.load(ctx, n); err != nil {
							b.Fatal(err)
						}
						rec := newBatonRecorder(n, false)
						cost.measure(b, pool, meter, 0, n, func() error {
							return bs.runWorker(ctx, c, n, rec, func() error { return nil })
						})
						recs = rec.recs
					} else {
						p := startNodePeer(b, dir, dsn, pool, sys, "drain", map[string]int{"PEER_R": jsResources, "PEER_N": n, "PEER_C": c})
						cost.measure(b, pool, meter, p.cmd.Process.Pid, n, func() error { return p.run(b) })
						recs = p.records(b)
					}
					cost.settle(b, pool)
					v := checkJobRecs(recs)
					cost.viol.overlap += v.overlap
					cost.viol.order += v.order
					cost.viol.missing += v.missing
					cost.viol.reruns += v.reruns
					b.Logf("C=%d %s: %d jobs in %v, %s", c, sys, n, cost.time-before, v)
					if sys == "baton" && v.total() > 0 {
						b.Fatalf("Baton broke its guarantees: %s", v)
					}
				}
			}
			reportJS(b, costs)
		})
	}
}

func jsSystemsFromEnv() []string {
	v := os.Getenv("BENCH_JS_SYSTEMS")
	if v == "" {
		return jsSystems
	}
	out := []string{"baton"}
	for _, s := range strings.Split(v, ",") {
		if s != "baton" && slices.Contains(jsSystems, s) {
			out = append(out, s)
		}
	}
	return out
}

func reportJS(b *testing.B, costs map[string]*jsCost) {
	bt := costs["baton"]
	batonRate := bt.jobs / bt.time.Seconds()
	b.ReportMetric(batonRate, "jobs/s")
	for _, sys := range jsSystems {
		c, ok := costs[sys]
		if !ok {
			continue
		}
		prefix := sys + "-"
		if sys == "baton" {
			prefix = ""
		} else {
			rate := c.jobs / c.time.Seconds()
			b.ReportMetric(rate, prefix+"jobs/s")
			b.ReportMetric(batonRate/rate, "x-"+sys)
			b.ReportMetric(float64(c.viol.total()), prefix+"viol")
		}
		b.ReportMetric(c.wal/c.jobs, prefix+"wal-B/job")
		b.ReportMetric(c.cpu*1e6/c.jobs, prefix+"client-cpu-us/job")
		b.ReportMetric(c.pg*1e6/c.jobs, prefix+"pg-cpu-us/job")
		b.ReportMetric(c.xacts/c.jobs, prefix+"xacts/job")
		b.ReportMetric(c.rows/c.jobs, prefix+"rows/job")
	}
	b.ReportMetric(0, "ns/op")
}

// pgPoolDSN is a pool of maxConns connections to dsn, closed when b ends.
func pgPoolDSN(b *testing.B, dsn string, maxConns int32) *pgxpool.Pool {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// percentile is the p-th percentile (0..100) of sorted xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(float64(len(xs))*p/100+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// latencies are the submit → start times of recs, sorted, in ms.
func latencies(recs []jobRec) []float64 {
	out := make([]float64, 0, len(recs))
	for _, r := range recs {
		if r.N > 0 {
			out = append(out, r.A-r.T)
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkJSLatency offers jobs at a fixed rate (BENCH_JS_RATE jobs/s, default 500, over 1,000
// resources, for BENCH_JS_SECONDS, default 15) to Baton and each peer in turn, each with C = 100
// jobs at a time and its workers already running, and reports the submit → start latency p50 and
// p99 in ms per system (the submission time is taken by the submitter just before its batch is
// sent, every 10 ms; the start by the handler; one clock per system). Violations are checked
// as in BenchmarkJSJobs.
func BenchmarkJSLatency(b *testing.B) {
	dir := nodePeerDir(b)
	systems := jsSystemsFromEnv()
	rate, secs := envInt(b, "BENCH_JS_RATE", 500), envInt(b, "BENCH_JS_SECONDS", 15)
	const c = 100
	n := rate * secs
	ctx := context.Background()
	dsn := jsDSN(b)
	pool := pgPoolDSN(b, dsn, 2)
	b.ResetTimer()
	b.StopTimer()
	for _, sys := range systems {
		var recs []jobRec
		if sys == "baton" {
			bs := newBatonJS(b, dsn, pool)
			rec := newBatonRecorder(n, true)
			if err := bs.runWorker(ctx, c, n, rec, func() error { return batonSubmitLoop(ctx, bs.q, rec, rate, n) }); err != nil {
				b.Fatal(err)
			}
			recs = rec.recs
			b.Logf("baton: %d SubmitMany calls, mean %v, longest %v", rec.submits,
				rec.submitTime/time.Duration(max(rec.submits, 1)), rec.submitMax)
		} else {
			p := startNodePeer(b, dir, dsn, pool, sys, "latency", map[string]int{"PEER_R": jsResources, "PEER_RATE": rate, "PEER_SECONDS": secs, "PEER_C": c})
			if err := p.run(b); err != nil {
				b.Fatal(err)
			}
			recs = p.records(b)
		}
		v := checkJobRecs(recs)
		lat := latencies(recs)
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		b.Logf("%s: %d jobs at %d/s: submit→start p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; %s",
			sys, n, rate, p50, percentile(lat, 90), p99, percentile(lat, 100), v)
		if sys == "baton" && v.total() > 0 {
			b.Fatalf("Baton broke its guarantees: %s", v)
		}
		prefix := sys + "-"
		if sys == "baton" {
			prefix = ""
		} else {
			b.ReportMetric(float64(v.total()), prefix+"viol")
		}
		b.ReportMetric(p50, prefix+"p50-ms")
		b.ReportMetric(p99, prefix+"p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// batonSubmitLoop submits n jobs at rate jobs/s, job g on resource r<g % jsResources> with Args
// {"g": g}, in batches every 10 ms (SubmitMany), recording each job's submission time just
// before its batch is sent.
func batonSubmitLoop(ctx context.Context, q *baton.Queue, rec *batonRecorder, rate, n int) error {
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for g := 0; g < n; {
		due := min(n, int(time.Since(t0).Seconds()*float64(rate)))
		if due > g {
			ps := make([]baton.SubmitParams, 0, due-g)
			for i := g; i < due; i++ {
				ps = append(ps, baton.SubmitParams{Kind: "noop", Resource: "r" + strconv.Itoa(i%jsResources),
					Args: json.RawMessage(`{"g":` + strconv.Itoa(i) + `}`)})
			}
			rec.mu.Lock()
			t := rec.ms()
			for i := g; i < due; i++ {
				rec.recs[i].T = t
			}
			rec.mu.Unlock()
			t0 := time.Now()
			if _, err := q.SubmitMany(ctx, ps); err != nil {
				return err
			}
			rec.submits++
			rec.submitTime += time.Since(t0)
			rec.submitMax = max(rec.submitMax, time.Since(t0))
			g = due
		}
		<-tick.C
	}
	return nil
}

func envInt(b *testing.B, name string, dflt int) int {
	v := os.Getenv(name)
	if v == "" {
		return dflt
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s must be a positive integer, got %q", name, v)
	}
	return n
}
