package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/storetest"
)

// benchResources is how many resources the benchmark's jobs spread over.
const benchResources = 10000

// naiveQueue is the baseline: the textbook queue, one row per job, claimed with
// FOR UPDATE SKIP LOCKED LIMIT 1 and completed by a second statement, on a pool of the same size
// as the store's. It knows nothing of resources: it keeps no job from overlapping another on the
// same resource, which is what Baton adds.
func naiveQueue(b testing.TB, schema string, maxConns int32) storetest.JobBench {
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(dsn())
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	t := pgx.Identifier{schema, "naive_jobs"}.Sanitize()
	for _, stmt := range []string{
		`CREATE TABLE ` + t + ` (id bigserial PRIMARY KEY, resource text NOT NULL, args jsonb NOT NULL DEFAULT '{}',
			state text NOT NULL, attempt int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(),
			attempted_at timestamptz, finished_at timestamptz)`,
		`CREATE INDEX ON ` + t + ` (id) WHERE state = 'available'`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	claim := `UPDATE ` + t + ` SET state = 'running', attempt = attempt + 1, attempted_at = now()
WHERE id = (SELECT id FROM ` + t + ` WHERE state = 'available' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`
	complete := `UPDATE ` + t + ` SET state = 'succeeded', finished_at = now() WHERE id = $1`
	return storetest.JobBench{
		Load: func(ctx context.Context, n int) error {
			_, err := pool.Exec(ctx, `INSERT INTO `+t+` (resource, state) SELECT 'r' || (g % $2), 'available' FROM generate_series(1, $1) g`, n, benchResources)
			return err
		},
		Drain: func(ctx context.Context, workers, n int) error {
			var done atomic.Int64
			var wg sync.WaitGroup
			var firstErr atomic.Value
			for range workers {
				wg.Go(func() {
					for done.Load() < int64(n) {
						var id int64
						err := pool.QueryRow(ctx, claim).Scan(&id)
						if err == pgx.ErrNoRows {
							continue // the rest are running elsewhere
						}
						if err == nil {
							_, err = pool.Exec(ctx, complete, id)
						}
						if err != nil {
							firstErr.CompareAndSwap(nil, err)
							return
						}
						done.Add(1)
					}
				})
			}
			wg.Wait()
			if err, _ := firstErr.Load().(error); err != nil {
				return err
			}
			return nil
		},
	}
}

// loadJobs queues n no-op jobs over benchResources resources straight into the store's tables
// (submitting them one by one would take longer than the drain being measured), with the head of
// each resource marked as SubmitJob would.
func loadJobs(pool *pgxpool.Pool, schema string) func(ctx context.Context, n int) error {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return func(ctx context.Context, n int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, stmt := range []string{
				`INSERT INTO ` + id("resources") + ` (key) SELECT 'r' || g FROM generate_series(0, ` + fmt.Sprint(benchResources-1) + `) g ON CONFLICT DO NOTHING`,
				`INSERT INTO ` + id("jobs") + ` (seq, kind, resource, state, max_attempts, scheduled_at)
					SELECT nextval('` + id("job_seq") + `'), 'noop', 'r' || (g % ` + fmt.Sprint(benchResources) + `), 'available', 5, now()
					FROM generate_series(1, ` + fmt.Sprint(n) + `) g ORDER BY g`,
				`UPDATE ` + id("jobs") + ` SET head = true WHERE id IN (SELECT DISTINCT ON (resource) id FROM ` + id("jobs") + `
					WHERE state IN ('available', 'running', 'retryable', 'scheduled') ORDER BY resource, seq) AND NOT head`,
				`ANALYZE ` + id("jobs"),
			} {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// BenchmarkJobThroughput: no-op jobs over 10,000 resources, claimed and completed by 8 workers,
// against the naive SKIP LOCKED queue on the same database with the same number of workers.
func BenchmarkJobThroughput(b *testing.B) {
	for _, batch := range []int{1, 10} {
		b.Run(fmt.Sprintf("workers=8/batch=%d", batch), func(b *testing.B) {
			schema := newSchema(b)
			s := openDefault(b, schema)
			if err := s.RegisterKinds(context.Background(), []store.Kind{{Name: "noop"}}); err != nil {
				b.Fatal(err)
			}
			naive := naiveQueue(b, schema, s.Pool().Config().MaxConns-1)
			baton := storetest.JobBench{Load: loadJobs(s.Pool(), schema), Drain: storetest.DrainStore(s, "noop", batch)}
			storetest.BenchJobsPaired(b, 8, naive, baton)
		})
	}
}

// BenchmarkJobWorker is the same drain through the public API: one baton.Worker with 8 slots
// (claims up to its free slots per round trip, completes in batches) against 8 naive workers.
func BenchmarkJobWorker(b *testing.B) {
	schema := newSchema(b)
	s := openDefault(b, schema)
	q, err := baton.NewQueue(context.Background(), s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "noop"}}})
	if err != nil {
		b.Fatal(err)
	}
	naive := naiveQueue(b, schema, s.Pool().Config().MaxConns-1)
	storetest.BenchJobsPaired(b, 8, naive, storetest.JobBench{Load: loadJobs(s.Pool(), schema), Drain: storetest.DrainWorker(q, "noop")})
}

// BenchmarkJobHandoff: consecutive jobs on one resource, handler end to next handler start.
func BenchmarkJobHandoff(b *testing.B) {
	s := openDefault(b, newSchema(b))
	q, err := baton.NewQueue(context.Background(), s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "step"}}})
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchJobHandoff(b, q, "step")
}

// BenchmarkJobClaimDeepQueue measures one claim + completion (one job per round trip, one
// worker) with 10,000 and with 1,000,000 jobs queued over 10,000 resources: the claim walks the
// heads index, so its cost should not grow with the queue. Load time is not measured.
func BenchmarkJobClaimDeepQueue(b *testing.B) {
	for _, depth := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			schema := newSchema(b)
			s := openDefault(b, schema)
			ctx := context.Background()
			if err := s.RegisterKinds(ctx, []store.Kind{{Name: "noop"}}); err != nil {
				b.Fatal(err)
			}
			if err := loadJobs(s.Pool(), schema)(ctx, depth+b.N); err != nil {
				b.Fatal(err)
			}
			p := &store.ClaimParams{Worker: "w", Kinds: []string{"noop"}, Limit: 1, TTL: time.Minute}
			b.ResetTimer()
			for range b.N {
				js, err := s.ClaimJobs(ctx, p)
				if err != nil || len(js) != 1 {
					b.Fatalf("claim: %v (%d jobs)", err, len(js))
				}
				if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
