package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

const benchResources = 10000

// naiveQueue is the baseline: the textbook queue (one row per job, claim the oldest available
// with UPDATE … WHERE id = (SELECT … LIMIT 1) RETURNING, then complete it) through the same driver
// and pragmas as the store, one connection (SQLite has one writer). SQLite has no SKIP LOCKED:
// its single writer serialises claims anyway. It knows nothing of resources.
func naiveQueue(b *testing.B, dir string) storetest.JobBench {
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(dir, "naive.db"), sqlite.Config{}))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	for _, stmt := range []string{
		`CREATE TABLE naive_jobs (id INTEGER PRIMARY KEY, resource TEXT NOT NULL, args TEXT NOT NULL DEFAULT '{}',
			state TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, attempted_at INTEGER, finished_at INTEGER)`,
		`CREATE INDEX naive_available ON naive_jobs (id) WHERE state = 'available'`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			b.Fatal(err)
		}
	}
	return storetest.JobBench{
		Load: func(ctx context.Context, n int) error {
			_, err := db.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
				INSERT INTO naive_jobs (resource, state) SELECT 'r' || (i % ?), 'available' FROM g`, n, benchResources)
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
						err := db.QueryRowContext(ctx, `UPDATE naive_jobs SET state = 'running', attempt = attempt + 1, attempted_at = ?
							WHERE id = (SELECT id FROM naive_jobs WHERE state = 'available' ORDER BY id LIMIT 1) RETURNING id`,
							time.Now().UnixNano()).Scan(&id)
						if err == sql.ErrNoRows {
							continue
						}
						if err == nil {
							_, err = db.ExecContext(ctx, `UPDATE naive_jobs SET state = 'succeeded', finished_at = ? WHERE id = ?`, time.Now().UnixNano(), id)
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

// loadJobs queues n no-op jobs over benchResources resources straight into the store's tables,
// each resource's oldest unfinished job marked head as SubmitJob would.
func loadJobs(s *sqlite.Store) func(ctx context.Context, n int) error {
	return func(ctx context.Context, n int) error {
		now := time.Now().UnixNano()
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < ? - 1)
				INSERT INTO resources (key, updated_at) SELECT 'r' || i, ? FROM g WHERE true ON CONFLICT DO NOTHING`, []any{benchResources, now}},
			{`WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
				INSERT INTO jobs (seq, kind, resource, state, max_attempts, created_at, scheduled_at)
				SELECT (SELECT value FROM counters WHERE name = 'job_seq') + i, 'noop', 'r' || (i % ?), 'available', 5, ?, ? FROM g`,
				[]any{n, benchResources, now, now}},
			{`UPDATE counters SET value = (SELECT max(seq) FROM jobs) WHERE name = 'job_seq'`, nil},
			{`UPDATE jobs SET head = 1 WHERE id IN (SELECT (SELECT u.id FROM jobs u WHERE u.resource = r.key
				AND u.state IN ('scheduled', 'available', 'running', 'retryable') ORDER BY u.seq LIMIT 1) FROM resources r)
				AND head = 0`, nil},
		} {
			if _, err := tx.ExecContext(ctx, stmt.sql, stmt.args...); err != nil {
				return err
			}
		}
		return tx.Commit()
	}
}

// BenchmarkJobWorker: no-op jobs over 10,000 resources through one baton.Worker with 8 slots,
// against 8 goroutines running the naive queue, on files in the same directory.
func BenchmarkJobWorker(b *testing.B) {
	dir := b.TempDir()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	q, err := baton.NewQueue(context.Background(), s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "noop"}}})
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchJobsPaired(b, 8, naiveQueue(b, dir), storetest.JobBench{Load: loadJobs(s), Drain: storetest.DrainWorker(q, "noop")})
}

// BenchmarkJobHandoff: consecutive jobs on one resource, handler end to next handler start.
func BenchmarkJobHandoff(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "baton.db"), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	q, err := baton.NewQueue(context.Background(), s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "step"}}})
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchJobHandoff(b, q, "step")
}
