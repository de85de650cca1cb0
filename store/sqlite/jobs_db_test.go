package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
	"github.com/batonhq/baton/store/storetest"
)

// Concurrent submits with one idempotency key create one job.
func TestJobIdempotencyConcurrent(t *testing.T) {
	x := newJobsT(t)
	var wg sync.WaitGroup
	results := make([]*store.SubmitResult, 32)
	errs := make([]error, 32)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "build", Resource: fmt.Sprint("r", i), IdempotencyKey: "once-only"})
		}()
	}
	wg.Wait()
	created := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !r.Existing {
			created++
		}
		if r.Job.ID != results[0].Job.ID {
			t.Fatalf("submit %d returned job %d, submit 0 job %d", i, r.Job.ID, results[0].Job.ID)
		}
	}
	jobs, err := x.s.ListJobs(x.ctx, &store.JobListParams{})
	if created != 1 || err != nil || len(jobs) != 1 {
		t.Fatalf("%d submits created a job; %d jobs listed (%v)", created, len(jobs), err)
	}
}

// The database itself refuses a second running job on a resource, whatever the code does.
func TestJobOneRunningPerResourceIndex(t *testing.T) {
	x := newJobsT(t)
	a, b := x.submit("build", "r"), x.submit("build", "r")
	x.claimOnly(a.ID, "build")
	_, err := x.s.DB().Exec(`UPDATE jobs SET state = 'running' WHERE id = ?`, b.ID)
	if err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("second running job on one resource: %v", err)
	}
}

// SubmitJobTx enqueues in the caller's transaction: nothing if it rolls back.
func TestSubmitJobTx(t *testing.T) {
	x := newJobsT(t)
	db, err := sql.Open("sqlite", sqlite.DSN(x.path, sqlite.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(x.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO orders (id) VALUES (7)`); err != nil {
			t.Fatal(err)
		}
		res, err := x.s.SubmitJobTx(x.ctx, tx, &store.SubmitParams{Kind: "build", Resource: "order/7", IdempotencyKey: "order-7"})
		if err != nil || res.Existing || !res.Job.Head {
			t.Fatalf("SubmitJobTx = %+v, %v", res, err)
		}
		if !commit {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := x.s.GetJob(x.ctx, res.Job.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("job after rollback: %v", err)
			}
			if _, err := x.s.GetResource(x.ctx, "order/7"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("resource after rollback: %v", err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		x.claimOnly(res.Job.ID, "build")
	}
}

func TestJobSubscribeAndClose(t *testing.T) {
	x := newJobsT(t)
	wake, cancel := x.s.SubscribeJobs("build")
	defer cancel()
	x.submit("build", "r")
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after the submit of a head job")
	}
	if err := x.s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up on Close")
	}
	if _, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "build", Resource: "r"}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("submit after Close: %v", err)
	}
	if _, err := x.s.ClaimJobs(x.ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"build"}, Limit: 1, TTL: time.Minute}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("claim after Close: %v", err)
	}
	if _, err := x.s.GetJob(x.ctx, 1); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("get after Close: %v", err)
	}
}

// offsetClock is the real clock moved forward by Advance.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// TestJobConformance runs the shared job-store suite on a fresh file per test, with a store clock
// the suite can move (Advance).
func TestJobConformance(t *testing.T) {
	var clocks sync.Map // *testing.T → *offsetClock
	storetest.RunJobs(t, storetest.JobHarness{
		NewJobStore: func(t *testing.T) store.JobStore {
			c := &offsetClock{}
			clocks.Store(t, c)
			t.Cleanup(func() { clocks.Delete(t) })
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"), sqlite.Config{Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Advance: func(t *testing.T, d time.Duration) {
			c, ok := clocks.Load(t)
			if !ok {
				t.Fatal("Advance before NewJobStore")
			}
			c.(*offsetClock).off.Add(int64(d))
		},
	})
}

// Leases and jobs wake each other in one process (the one-resource line).
func TestOneResourceWakeUps(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wake.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.RunOneResourceWakeUps(t, s)
}

// The cleaner deletes the line's expired tickets (abandoned waits) and keeps live ones.
func TestCleanDeletesExpiredTickets(t *testing.T) {
	x := newJobsT(t)
	const key = "line/clean"
	wait := func(id string, ttl time.Duration) {
		t.Helper()
		_, err := x.s.Acquire(x.ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: id, TTL: ttl, Wait: true})
		if !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("waiting acquire of %s: %v; want ErrLockHeld, its ticket enqueued", id, err)
		}
	}
	if _, err := x.s.Acquire(x.ctx, &store.AcquireParams{Key: key, LeaseID: "holder", Holder: "holder", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	wait("gone", time.Second)
	wait("live", time.Hour)
	x.clock.advance(2 * time.Second)
	if _, err := x.s.CleanJobs(x.ctx, &store.CleanParams{Age: time.Hour, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if left := leaseIDs(t, x, `SELECT lease_id FROM tickets ORDER BY lease_id`); !slices.Equal(left, []string{"live"}) {
		t.Fatalf("tickets after cleaning: %v; want [live] (the expired one deleted)", left)
	}
}

// The cleaner deletes holds that ended longer ago than the age (and store.MaxRest), and keeps
// the live ones and those of recent ends.
func TestCleanDeletesOldHolds(t *testing.T) {
	x := newJobsT(t)
	if _, err := x.s.SetLimit(x.ctx, &store.SetLimitParams{Name: "pool", Capacity: 9}); err != nil {
		t.Fatal(err)
	}
	grant := func(id string) {
		t.Helper()
		_, err := x.s.Acquire(x.ctx, &store.AcquireParams{Key: "holds/" + id, LeaseID: id, Holder: id, TTL: time.Hour,
			Shared: true, Limits: []string{"pool"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	grant("old")
	if _, err := x.s.Release(x.ctx, &store.ReleaseParams{Key: "holds/old", LeaseID: "old"}); err != nil {
		t.Fatal(err)
	}
	x.clock.advance(store.MaxRest + 2*time.Hour)
	grant("live")
	if _, err := x.s.CleanJobs(x.ctx, &store.CleanParams{Age: time.Hour, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if left := leaseIDs(t, x, `SELECT DISTINCT lease_id FROM holds ORDER BY lease_id`); !slices.Equal(left, []string{"live"}) {
		t.Fatalf("holds after cleaning: %v; want [live] (the old release's deleted)", left)
	}
}

// leaseIDs runs query, which selects lease IDs, on the test's database.
func leaseIDs(t *testing.T, x *jobsT, query string) []string {
	t.Helper()
	rows, err := x.s.DB().QueryContext(x.ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A kind rate's count survives reopening the file.
func TestRateRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates.db")
	var prev *sqlite.Store
	storetest.RunRateRestart(t, func() store.JobStore {
		if prev != nil {
			if err := prev.Close(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		prev = s
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
