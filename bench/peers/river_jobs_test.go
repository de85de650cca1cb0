package peers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/storetest"
)

// jobResources is how many resources the jobs of the River comparison spread over.
var jobResources = envIntOr("BENCH_RESOURCES", 10000)

type riverNoopArgs struct {
	Resource string `json:"resource"`
}

func (riverNoopArgs) Kind() string { return "noop" }

type riverNoopWorker struct {
	river.WorkerDefaults[riverNoopArgs]
}

func (riverNoopWorker) Work(context.Context, *river.Job[riverNoopArgs]) error { return nil }

// riverSide is River's side of the drain: its tables in a schema of their own (rivermigrate),
// jobs inserted with InsertManyFast (untimed), then a client with workers slots started and run
// until it has reported n completions (completions are reported once River's batching completer
// has written them).
func riverSide(b *testing.B, pool *pgxpool.Pool) storetest.JobBench {
	ctx := context.Background()
	schema := pgSchema(b, pool, "river", true)
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, riverNoopWorker{})
	newClient := func(slots int) (*river.Client[pgx.Tx], error) {
		return river.NewClient(driver, &river.Config{
			Schema:        schema,
			Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: slots}},
			Workers:       workers,
			FetchCooldown: 2 * time.Millisecond,
		})
	}
	return storetest.JobBench{
		Load: func(ctx context.Context, n int) error {
			c, err := newClient(1)
			if err != nil {
				return err
			}
			const chunk = 5000
			for i := 0; i < n; i += chunk {
				ps := make([]river.InsertManyParams, 0, min(chunk, n-i))
				for g := i; g < min(i+chunk, n); g++ {
					ps = append(ps, river.InsertManyParams{Args: riverNoopArgs{Resource: fmt.Sprintf("r%d", g%jobResources)}})
				}
				if _, err := c.InsertManyFast(ctx, ps); err != nil {
					return err
				}
			}
			return nil
		},
		Drain: func(ctx context.Context, slots, n int) error {
			c, err := newClient(slots)
			if err != nil {
				return err
			}
			events, cancel := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1000,
				Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
			defer cancel()
			if err := c.Start(ctx); err != nil {
				return err
			}
			var ferr error
			for done := 0; done < n && ferr == nil; {
				ev := <-events
				if ev.Kind != river.EventKindJobCompleted {
					ferr = fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
				}
				done++
			}
			if err := c.Stop(ctx); err != nil && ferr == nil {
				ferr = err
			}
			return ferr
		},
	}
}

// batonSide is Baton's side: a store in a schema of its own (the default pool: 8 connections for
// statements and one for LISTEN), jobs written straight into its tables with each resource's head
// marked as SubmitJob would (untimed), and one baton.Worker with workers slots run until n jobs
// have succeeded.
func batonSide(b *testing.B, pool *pgxpool.Pool) storetest.JobBench {
	ctx := context.Background()
	schema := pgSchema(b, pool, "baton_river", true)
	s, err := postgres.Open(ctx, pgDSN(), postgres.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var st store.JobStore = s
	if os.Getenv("BENCH_BATON_SEPARATE_CLAIMS") != "" {
		// For comparison: completions without the claim in their round trip.
		st = separateClaims{s, s}
	}
	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "noop"}}})
	if err != nil {
		b.Fatal(err)
	}
	load := func(ctx context.Context, n int) error { return loadBatonJobs(ctx, pool, schema, jobResources, n) }
	return storetest.JobBench{Load: load, Drain: storetest.DrainWorker(q, "noop")}
}

// loadBatonJobs writes n no-op jobs straight into the tables of the store in schema, job g on
// resource r<g % resources>, each resource's first job marked head as SubmitJob would, and
// analyzes the jobs table (untimed loading for the jobs benchmarks).
func loadBatonJobs(ctx context.Context, pool *pgxpool.Pool, schema string, resources, n int) error {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO ` + id("resources") + ` (key) SELECT 'r' || g FROM generate_series(0, $1::int - 1) g
				ON CONFLICT DO NOTHING`, []any{resources}},
			{`INSERT INTO ` + id("jobs") + ` (seq, kind, resource, state, max_attempts, scheduled_at)
				SELECT nextval('` + id("job_seq") + `'), 'noop', 'r' || (g % $1::int), 'available', 5, now()
				FROM generate_series(0, $2::int - 1) g ORDER BY g`, []any{resources, n}},
			{`UPDATE ` + id("jobs") + ` SET head = true WHERE id IN (SELECT DISTINCT ON (resource) id FROM ` + id("jobs") + `
				WHERE state IN ('available', 'running', 'retryable', 'scheduled') ORDER BY resource, seq) AND NOT head`, nil},
			{`ANALYZE ` + id("jobs"), nil},
		} {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// separateClaims hides a store's store.CompleteClaimer, so that a worker claims only in its
// claim loop (BENCH_BATON_SEPARATE_CLAIMS=1).
type separateClaims struct {
	store.JobStore
	mc store.ManyCompleter
}

func (s separateClaims) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	return s.mc.CompleteMany(ctx, ps)
}

// walLSN is the server's current WAL insert position.
func walLSN(b *testing.B, pool *pgxpool.Pool) string {
	var lsn string
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walSince is the WAL written since lsn, in bytes.
func walSince(b *testing.B, pool *pgxpool.Pool, lsn string) float64 {
	var n float64
	if err := pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRiverJobs drains no-op jobs spread over 10,000 resources with River (riverpgxv5,
// FetchCooldown 2 ms) and with a baton.Worker at the same concurrency, on the same PostgreSQL in
// the same run, alternating: River, Baton, River, Baton, each draining b.N jobs loaded just
// before (untimed). Both pools hold 9 connections. River keeps no two jobs of a resource apart;
// Baton runs at most one job per resource at a time, in submission order. Each round runs on
// fresh tables (BENCH_RIVER_REUSE=1: one schema per system for all rounds). Reports jobs/s for
// both and x-river = Baton jobs/s ÷ River jobs/s.
func BenchmarkRiverJobs(b *testing.B) {
	for _, c := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) {
			pool := pgPool(b, int32(postgres.DefaultMaxConns())+1)
			// Every round of both systems starts on fresh tables (a schema of its own), unless
			// BENCH_RIVER_REUSE keeps one schema per system for all rounds. That shows what the
			// rows and dead index entries of the rounds before do without VACUUM (this machine's
			// PostgreSQL runs with autovacuum off, PostgreSQL's default is on): Baton writes more
			// row versions a job than River, and pays more for them.
			reuse := os.Getenv("BENCH_RIVER_REUSE") != ""
			var rs, bs storetest.JobBench
			ctx := context.Background()
			n := max(b.N, 100)
			var river, baton sideCost
			meter := newCPUMeter(b, pool)
			b.ResetTimer()
			b.StopTimer()
			const rounds = 2
			for r := range rounds {
				if r == 0 || !reuse {
					rs, bs = riverSide(b, pool), batonSide(b, pool)
				}
				for _, side := range []struct {
					jb   storetest.JobBench
					cost *sideCost
				}{{rs, &river}, {bs, &baton}} {
					if err := side.jb.Load(ctx, n); err != nil {
						b.Fatal(err)
					}
					side.cost.measure(b, pool, meter, func() error { return side.jb.Drain(ctx, c, n) })
				}
			}
			reportVsRiver(b, float64(rounds*n), baton, river)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// envIntOr is the positive integer in the environment variable name, or def.
func envIntOr(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
