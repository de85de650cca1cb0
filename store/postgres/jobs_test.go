package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
	"github.com/batonhq/baton/store/storetest"
)

func jobStore(t *testing.T, kinds ...store.Kind) *postgres.Store {
	t.Helper()
	s := openStore(t, newSchema(t))
	if len(kinds) > 0 {
		if err := s.RegisterKinds(testCtx(t), kinds); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func submit(t *testing.T, s store.JobStore, kind, res string) *store.Job {
	t.Helper()
	r, err := s.SubmitJob(testCtx(t), &store.SubmitParams{Kind: kind, Resource: res})
	if err != nil {
		t.Fatalf("submit %s on %s: %v", kind, res, err)
	}
	return r.Job
}

func claim(t *testing.T, s store.JobStore, n int, kinds ...string) []*store.Job {
	t.Helper()
	js, err := s.ClaimJobs(testCtx(t), &store.ClaimParams{Worker: "w", Kinds: kinds, Limit: n, TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return js
}

func TestJobsHeadAndPromotion(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "destroy"})
	a := submit(t, s, "destroy", "c1")
	b := submit(t, s, "destroy", "c1")
	c := submit(t, s, "destroy", "c2")
	if !a.Head || b.Head || !c.Head {
		t.Fatalf("heads: a=%v b=%v c=%v, want true false true", a.Head, b.Head, c.Head)
	}
	got := claim(t, s, 10, "destroy")
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != c.ID {
		t.Fatalf("claimed %v, want a and c", ids(got))
	}
	if got[1].Token <= got[0].Token || got[0].State != store.JobRunning || got[0].Attempt != 1 {
		t.Fatalf("claim results: %+v", got[0])
	}
	if more := claim(t, s, 10, "destroy"); len(more) != 0 {
		t.Fatalf("b claimable while a runs: %v", ids(more))
	}
	done, err := s.CompleteJob(ctx, &store.CompleteParams{ID: a.ID, Token: got[0].Token})
	if err != nil || done.State != store.JobSucceeded || done.Head {
		t.Fatalf("complete: %+v %v", done, err)
	}
	next := claim(t, s, 10, "destroy")
	if len(next) != 1 || next[0].ID != b.ID || next[0].Token <= got[1].Token {
		t.Fatalf("after complete claimed %v", ids(next))
	}
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: a.ID, Token: got[0].Token}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("second complete: %v, want ErrNotHeld", err)
	}
}

func ids(js []*store.Job) []int64 {
	var out []int64
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func TestJobsGuardRetryAndDeadLetter(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "create", MaxAttempts: 2, FromStates: []string{"PENDING"},
		RunningState: "CREATING", SuccessState: "READY", FailureState: "FAILED"})
	if _, err := s.SetResourceState(ctx, &store.SetResourceStateParams{Key: "c", State: "PENDING"}); err != nil {
		t.Fatal(err)
	}
	j := submit(t, s, "create", "c")
	later := submit(t, s, "create", "c")
	got := claim(t, s, 1, "create")
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	if r, _ := s.GetResource(ctx, "c"); r.State != "CREATING" || r.RunningJob != j.ID || r.Unfinished != 2 {
		t.Fatalf("resource during run: %+v", r)
	}
	f, err := s.FailJob(ctx, &store.FailParams{ID: j.ID, Token: got[0].Token, Message: "boom"})
	if err != nil || f.State != store.JobRetryable || !f.Head || len(f.Errors) != 1 || f.Errors[0].Message != "boom" {
		t.Fatalf("fail: %+v %v", f, err)
	}
	got = claim(t, s, 1, "create") // a retry may start from CREATING
	if len(got) != 1 || got[0].ID != j.ID || got[0].Attempt != 2 {
		t.Fatalf("retry claim: %v", ids(got))
	}
	f, err = s.FailJob(ctx, &store.FailParams{ID: j.ID, Token: got[0].Token, Message: "boom again"})
	if err != nil || f.State != store.JobDiscarded || len(f.Errors) != 2 {
		t.Fatalf("last fail: %+v %v", f, err)
	}
	if r, _ := s.GetResource(ctx, "c"); r.State != "FAILED" {
		t.Fatalf("resource after dead letter: %+v", r)
	}
	// later is head now, but FAILED is not a from-state: discarded with invalid_resource_state.
	if got = claim(t, s, 1, "create"); len(got) != 0 {
		t.Fatalf("guard let %v run", ids(got))
	}
	l, _ := s.GetJob(ctx, later.ID)
	if l.State != store.JobDiscarded || l.Errors[0].Code != store.CodeInvalidResourceState {
		t.Fatalf("guarded job: %+v", l)
	}
}

func TestJobsConcurrentIdempotentSubmit(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	var wg sync.WaitGroup
	seen := make(chan int64, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "k", Resource: fmt.Sprintf("r%d", i%3), IdempotencyKey: "one"})
			if err != nil {
				t.Error(err)
				return
			}
			seen <- r.Job.ID
		}()
	}
	wg.Wait()
	close(seen)
	var first int64
	for id := range seen {
		if first == 0 {
			first = id
		}
		if id != first {
			t.Fatalf("two jobs for one key: %d and %d", first, id)
		}
	}
	js, _ := s.ListJobs(ctx, &store.JobListParams{})
	if len(js) != 1 {
		t.Fatalf("%d jobs, want 1", len(js))
	}
}

func TestJobsSubmitTx(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the Rollback below
	if _, err := s.SubmitJobTx(ctx, tx, &store.SubmitParams{Kind: "k", Resource: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if js, _ := s.ListJobs(ctx, &store.JobListParams{}); len(js) != 0 {
		t.Fatalf("rolled back submit left %d jobs", len(js))
	}
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		_, err := s.SubmitJobTx(ctx, tx, &store.SubmitParams{Kind: "k", Resource: "r"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, 5, "k"); len(got) != 1 {
		t.Fatalf("committed submit: claimed %d", len(got))
	}
}

func TestJobsReap(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k", MaxAttempts: 3})
	j := submit(t, s, "k", "r")
	got, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: "w", Kinds: []string{"k"}, Limit: 1, TTL: time.Second})
	if err != nil || len(got) != 1 {
		t.Fatal(err)
	}
	exec(t, "UPDATE "+pgx.Identifier{s.Schema(), "jobs"}.Sanitize()+" SET lease_expires_at = now() - interval '1 second'")
	reaped, err := s.ReapJobs(ctx, &store.ReapParams{})
	if err != nil || len(reaped) != 1 || reaped[0].Reason != store.CodeWorkerTimeout || reaped[0].Job.State != store.JobRetryable {
		t.Fatalf("reap: %v %v", reaped, err)
	}
	again := claim(t, s, 1, "k")
	if len(again) != 1 || again[0].ID != j.ID || again[0].Token <= got[0].Token {
		t.Fatalf("reclaim: %v", again)
	}
	if _, err := s.HeartbeatJob(ctx, &store.HeartbeatParams{ID: j.ID, Token: got[0].Token, TTL: time.Second}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("stale heartbeat: %v", err)
	}
}

func TestJobConformance(t *testing.T) {
	storetest.RunJobs(t, storetest.JobHarness{NewJobStore: func(t *testing.T) store.JobStore {
		return openStore(t, newSchema(t))
	}})
}

// Leases and jobs wake each other, through NOTIFY (the one-resource line).
func TestOneResourceWakeUps(t *testing.T) {
	storetest.RunOneResourceWakeUps(t, openStore(t, newSchema(t)))
}

// A running job without a lease (only a hand edit or a bug can make one) is reaped as
// lock_state_lost, and its resource is not left stuck.
func TestJobsReapLockStateLost(t *testing.T) {
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	j := submit(t, s, "k", "r")
	if got := claim(t, s, 1, "k"); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	exec(t, "UPDATE "+pgx.Identifier{s.Schema(), "jobs"}.Sanitize()+" SET lease_expires_at = NULL WHERE id = $1", j.ID)
	reaped, err := s.ReapJobs(ctx, &store.ReapParams{})
	if err != nil || len(reaped) != 1 || reaped[0].Reason != store.CodeLockStateLost || reaped[0].Job.State != store.JobRetryable {
		t.Fatalf("reap: %+v %v; want one job, lock_state_lost, retryable", reaped, err)
	}
	if again := claim(t, s, 1, "k"); len(again) != 1 || again[0].ID != j.ID {
		t.Fatalf("after the reap claimed %v; want job %d again", ids(again), j.ID)
	}
}

// A heartbeat changes only lease_expires_at, which no index holds (migration 0008), so
// PostgreSQL can update the row in place of its page (a HOT update) without an entry in each of
// the job's indexes. The old row version's heap-only flag says whether it did; pageinspect
// reads it. Fails if an index on lease_expires_at comes back.
func TestHeartbeatIsAHOTUpdate(t *testing.T) {
	exec(t, `CREATE EXTENSION IF NOT EXISTS pageinspect`)
	ctx := testCtx(t)
	s := jobStore(t, store.Kind{Name: "k"})
	j := submit(t, s, "k", "r")
	got := claim(t, s, 1, "k")
	if len(got) != 1 {
		t.Fatalf("claimed %d jobs", len(got))
	}
	var before string
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT ctid::text FROM `+pgx.Identifier{s.Schema(), "jobs"}.Sanitize()+` WHERE id = $1`, j.ID).Scan(&before)
	})
	if _, err := s.HeartbeatJob(ctx, &store.HeartbeatParams{ID: j.ID, Token: got[0].Token, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// HEAP_HOT_UPDATED (0x4000 in t_infomask2) marks a version replaced by a heap-only one.
	var hot bool
	withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT (t_infomask2 & 16384) <> 0
			FROM heap_page_items(get_raw_page($1, ($2::tid::text::point)[0]::int))
			WHERE lp = ($2::tid::text::point)[1]::int`,
			s.Schema()+".jobs", before).Scan(&hot)
	})
	if !hot {
		t.Fatalf("the heartbeat's update of the row at %s was not a HOT update", before)
	}
}

// A kind rate's count survives reopening the store on the same schema.
func TestRateRestart(t *testing.T) {
	schema := newSchema(t)
	var prev *postgres.Store
	storetest.RunRateRestart(t, func() store.JobStore {
		if prev != nil {
			if err := prev.Close(); err != nil {
				t.Fatal(err)
			}
		}
		prev = openStore(t, schema)
		return prev
	})
}
