package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/postgres"
)

// Jobs beyond one key (jobs_beyond.go): their attempts are granted through holds.

func beyondStore(t *testing.T, kinds ...store.Kind) (*postgres.Store, string) {
	t.Helper()
	schema := newSchema(t)
	s := openStore(t, schema)
	if len(kinds) > 0 {
		if err := s.RegisterKinds(testCtx(t), kinds); err != nil {
			t.Fatal(err)
		}
	}
	return s, schema
}

func setLimit(t *testing.T, s *postgres.Store, name string, capacity int) {
	t.Helper()
	if _, err := s.SetLimit(testCtx(t), &store.SetLimitParams{Name: name, Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
}

func submitP(t *testing.T, s store.JobStore, p *store.SubmitParams) *store.Job {
	t.Helper()
	r, err := s.SubmitJob(testCtx(t), p)
	if err != nil {
		t.Fatalf("submit %+v: %v", p, err)
	}
	return r.Job
}

func claimAs(t *testing.T, s store.JobStore, worker string, ttl time.Duration, kinds ...string) []*store.Job {
	t.Helper()
	js, err := s.ClaimJobs(testCtx(t), &store.ClaimParams{Worker: worker, Kinds: kinds, Limit: 1, TTL: ttl})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return js
}

func complete(t *testing.T, s store.JobStore, j *store.Job) {
	t.Helper()
	if _, err := s.CompleteJob(testCtx(t), &store.CompleteParams{ID: j.ID, Token: j.Token, Owner: j.Owner}); err != nil {
		t.Fatalf("complete job %d: %v", j.ID, err)
	}
}

// countRunning reads the number of running jobs in one snapshot.
func countRunning(ctx context.Context, conn *pgx.Conn, schema string) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "jobs"}.Sanitize()+` WHERE state = 'running'`).Scan(&n)
	return n, err
}

// A kind whose jobs take a unit of a limit of 2, over many resources, claimed by many workers at
// once: never more than 2 run at once (sampled in the database while they run), and all run.
func TestJobsBeyondLimitBoundsRunning(t *testing.T) {
	ctx := testCtx(t)
	s, schema := beyondStore(t, store.Kind{Name: "k", Limits: []string{"cap"}})
	setLimit(t, s, "cap", 2)
	const jobs, workers = 24, 6
	for i := range jobs {
		j := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: fmt.Sprintf("res/%d", i)})
		if len(j.Limits) != 1 || j.Limits[0] != "cap" {
			t.Fatalf("job limits %v; want [cap] from its kind", j.Limits)
		}
	}
	var done atomic.Int32
	var maxSeen atomic.Int32
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		var err error
		withConn(t, func(ctx context.Context, conn *pgx.Conn) error {
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				n, e := countRunning(ctx, conn, schema)
				if e != nil {
					err = e
					return nil
				}
				if int32(n) > maxSeen.Load() {
					maxSeen.Store(int32(n))
				}
			}
		})
		sampled <- err
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(time.Minute)
			for done.Load() < jobs && time.Now().Before(deadline) {
				js, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: fmt.Sprintf("w%d", w), Kinds: []string{"k"}, Limit: 1, TTL: 10 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				if len(js) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				time.Sleep(10 * time.Millisecond)
				if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: js[0].ID, Token: js[0].Token}); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if done.Load() != jobs {
		t.Fatalf("%d of %d jobs ran", done.Load(), jobs)
	}
	t.Logf("at most %d jobs ran at once", maxSeen.Load())
	if m := maxSeen.Load(); m > 2 || m == 0 {
		t.Fatalf("at most %d jobs ran at once; want 2 (the limit), at least 1", m)
	}
	ls, err := s.Limits(ctx, &store.LimitsParams{Name: "cap", Limit: 1})
	if err != nil || len(ls) != 1 || ls[0].InUse != 0 {
		t.Fatalf("limit after: %+v %v; want none in use", ls, err)
	}
}

// A job with an extra resource holds it: a plain lease on it and a plain job on it wait until
// the job completes.
func TestJobsBeyondExtraResourceExcludes(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	a := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Resources: []string{"r2"}})
	got := claimAs(t, s, "w", time.Minute, "k")
	if len(got) != 1 || got[0].ID != a.ID || len(got[0].Resources) != 1 || got[0].Resources[0] != "r2" {
		t.Fatalf("claimed %+v; want job %d with resources [r2]", got, a.ID)
	}
	run := got[0]
	_, err := s.Acquire(ctx, &store.AcquireParams{Key: "r2", LeaseID: "l1", Holder: "h1", TTL: time.Minute})
	if !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("plain lease on r2 while the job holds it: %v; want ErrLockHeld", err)
	}
	b := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "r2"})
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v while job %d holds r2", js, a.ID)
	}
	complete(t, s, run)
	js := claimAs(t, s, "w", time.Minute, "k")
	if len(js) != 1 || js[0].ID != b.ID {
		t.Fatalf("claimed %v after the job completed; want job %d", js, b.ID)
	}
	if js[0].Token <= run.Token {
		t.Fatalf("token %d not above the holds job's %d", js[0].Token, run.Token)
	}
	complete(t, s, js[0])
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: "r2", LeaseID: "l1", Holder: "h1", TTL: time.Minute})
	if err != nil {
		t.Fatalf("plain lease on r2 once both jobs ended: %v", err)
	}
	if l.Token <= js[0].Token {
		t.Fatalf("lease token %d not above the job's %d", l.Token, js[0].Token)
	}
}

// A shared job runs beside a shared lease on its resource, not beside an exclusive one.
func TestJobsBeyondSharedJob(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k", Mode: store.ModeShared})
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "s", LeaseID: "l1", Holder: "h1", TTL: time.Minute, Shared: true}); err != nil {
		t.Fatal(err)
	}
	a := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "s"})
	if !a.Shared {
		t.Fatalf("job %+v not shared; want its kind's mode", a)
	}
	got := claimAs(t, s, "w", time.Minute, "k")
	if len(got) != 1 || got[0].ID != a.ID || !got[0].Shared {
		t.Fatalf("claimed %+v beside a shared lease; want shared job %d", got, a.ID)
	}
	// Another shared lease joins them; an exclusive one does not.
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "s", LeaseID: "l2", Holder: "h2", TTL: time.Minute, Shared: true}); err != nil {
		t.Fatalf("shared lease beside a shared job: %v", err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "s", LeaseID: "l3", Holder: "h3", TTL: time.Minute}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("exclusive lease beside a shared job: %v; want ErrLockHeld", err)
	}
	complete(t, s, got[0])

	ex, err := s.Acquire(ctx, &store.AcquireParams{Key: "x", LeaseID: "l4", Holder: "h4", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "x"})
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v beside an exclusive lease", js)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "x", LeaseID: ex.ID}); err != nil {
		t.Fatal(err)
	}
	js := claimAs(t, s, "w", time.Minute, "k")
	if len(js) != 1 || js[0].ID != b.ID {
		t.Fatalf("claimed %v once the exclusive lease ended; want job %d", js, b.ID)
	}
	complete(t, s, js[0])

	// An exclusive lease held through holds (several keys) excludes it too.
	ey, err := s.Acquire(ctx, &store.AcquireParams{Key: "y0", Resources: []string{"y"}, LeaseID: "l5", Holder: "h5", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "y"})
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v beside an exclusive lease on several keys", js)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "y0", LeaseID: ey.ID}); err != nil {
		t.Fatal(err)
	}
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 1 || js[0].ID != c.ID {
		t.Fatalf("claimed %v once the lease on several keys ended; want job %d", js, c.ID)
	}
}

// A submit that names a limit the store does not have is refused (400, field limits), and
// writes nothing; so is a batch with one such job.
func TestJobsBeyondUnknownLimit(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"}, store.Kind{Name: "z", Limits: []string{"zone/{args.zone}"}})
	setLimit(t, s, "cap", 1)
	var inv *store.InvalidArgumentError
	_, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "k", Resource: "a", Limits: []string{"nope"}})
	if !errors.As(err, &inv) || inv.Field != "limits" {
		t.Fatalf("submit with an unknown limit: %v; want an invalid argument naming limits", err)
	}
	_, err = s.SubmitJob(ctx, &store.SubmitParams{Kind: "z", Resource: "a", Args: []byte(`{"zone":"eu"}`)})
	if !errors.As(err, &inv) || inv.Field != "limits" {
		t.Fatalf("submit whose kind's template names an unknown limit: %v; want an invalid argument naming limits", err)
	}
	_, err = s.SubmitMany(ctx, []*store.SubmitParams{{Kind: "k", Resource: "b", Limits: []string{"cap"}},
		{Kind: "k", Resource: "c", Limits: []string{"cap", "nope"}}})
	if !errors.As(err, &inv) || inv.Field != "jobs[1].limits" {
		t.Fatalf("batch with an unknown limit: %v; want an invalid argument naming jobs[1].limits", err)
	}
	js, err := s.ListJobs(ctx, &store.JobListParams{Limit: 10})
	if err != nil || len(js) != 0 {
		t.Fatalf("jobs after refused submits: %v %v; want none", js, err)
	}
	setLimit(t, s, "zone/eu", 1)
	j := submitP(t, s, &store.SubmitParams{Kind: "z", Resource: "a", Args: []byte(`{"zone":"eu"}`)})
	if len(j.Limits) != 1 || j.Limits[0] != "zone/eu" {
		t.Fatalf("job limits %v; want [zone/eu]", j.Limits)
	}
}

// A heartbeat extends the attempt's holds with its lease.
func TestJobsBeyondHeartbeatExtendsHolds(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	setLimit(t, s, "cap", 1)
	submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Resources: []string{"r2"}, Limits: []string{"cap"}})
	got := claimAs(t, s, "w", 2*time.Second, "k")
	if len(got) != 1 {
		t.Fatalf("claimed %v", got)
	}
	hb, err := s.HeartbeatJob(ctx, &store.HeartbeatParams{ID: got[0].ID, Token: got[0].Token, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if hb.TTLLeft < 30*time.Second {
		t.Fatalf("heartbeat left %v; want about a minute", hb.TTLLeft)
	}
	time.Sleep(2500 * time.Millisecond) // past the claim's TTL
	ls, err := s.Limits(ctx, &store.LimitsParams{Name: "cap", Limit: 1})
	if err != nil || len(ls) != 1 || ls[0].InUse != 1 || len(ls[0].Holders) != 1 ||
		time.Until(ls[0].Holders[0].ExpiresAt) < 30*time.Second {
		t.Fatalf("limit after the heartbeat and the claim's TTL: %+v %v; want its unit held for about a minute", ls, err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "r2", LeaseID: "l1", Holder: "h1", TTL: time.Minute}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("lease on r2 past the claim's TTL: %v; want ErrLockHeld (the heartbeat extended it)", err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "a", LeaseID: "l2", Holder: "h1", TTL: time.Minute}); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("lease on the job's resource past the claim's TTL: %v; want ErrLockHeld", err)
	}
	if rs, err := s.ReapJobs(ctx, &store.ReapParams{}); err != nil || len(rs) != 0 {
		t.Fatalf("reaped %v %v; want none", rs, err)
	}
}

// An attempt that stops heartbeating frees its units and keys when its lease expires: the next
// job takes the unit, and the reaper retries the first.
func TestJobsBeyondExpiredAttemptFreesUnits(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	setLimit(t, s, "cap", 1)
	a := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Limits: []string{"cap"}})
	b := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "b", Limits: []string{"cap"}, Resources: []string{"r2"}})
	got := claimAs(t, s, "w", time.Second, "k")
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("claimed %v; want job %d", got, a.ID)
	}
	if js := claimAs(t, s, "w", time.Second, "k"); len(js) != 0 {
		t.Fatalf("claimed %v while job %d holds the only unit", js, a.ID)
	}
	time.Sleep(1200 * time.Millisecond) // the attempt "crashed": its lease expires
	js := claimAs(t, s, "w", time.Minute, "k")
	if len(js) != 1 || js[0].ID != b.ID {
		t.Fatalf("claimed %v after job %d's attempt expired; want job %d", js, a.ID, b.ID)
	}
	reaped, err := s.ReapJobs(ctx, &store.ReapParams{})
	if err != nil || len(reaped) != 1 || reaped[0].Job.ID != a.ID || reaped[0].Job.State != store.JobRetryable {
		t.Fatalf("reap: %v %v; want job %d retryable", reaped, err, a.ID)
	}
	ls, err := s.Limits(ctx, &store.LimitsParams{Name: "cap", Limit: 1})
	if err != nil || len(ls) != 1 || ls[0].InUse != 1 {
		t.Fatalf("limit: %+v %v; want one unit in use (job %d's)", ls, err, b.ID)
	}
	complete(t, s, js[0])
	again := claimAs(t, s, "w", time.Minute, "k")
	if len(again) != 1 || again[0].ID != a.ID || again[0].Token <= js[0].Token {
		t.Fatalf("claimed %v; want job %d again, with a greater token", again, a.ID)
	}
}

// A waiting job has its place in its lines by its submit: a lock request that arrives after it
// waits behind it, and one that arrived before goes first.
func TestJobsBeyondPlaceInLine(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	setLimit(t, s, "cap", 1)
	first, err := s.Acquire(ctx, &store.AcquireParams{Key: "x", LeaseID: "l1", Holder: "h1", TTL: time.Minute, Limits: []string{"cap"}})
	if err != nil {
		t.Fatal(err)
	}
	// Before the job: a waiter with a ticket.
	before := &store.AcquireParams{Key: "y", LeaseID: "l2", Holder: "h2", TTL: time.Minute, Limits: []string{"cap"}, Wait: true}
	if _, err := s.Acquire(ctx, before); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("second request: %v; want ErrLockHeld", err)
	}
	j := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Limits: []string{"cap"}})
	// After the job's submit, before any claim of it: a request that waits behind it.
	after := &store.AcquireParams{Key: "z", LeaseID: "l3", Holder: "h3", TTL: time.Minute, Limits: []string{"cap"}, Wait: true}
	if _, err := s.Acquire(ctx, after); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("late request: %v; want ErrLockHeld", err)
	}
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v while the unit is held", js)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "x", LeaseID: first.ID}); err != nil {
		t.Fatal(err)
	}
	// The job waits for the earlier request.
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v before the request that arrived first", js)
	}
	l2, err := s.Acquire(ctx, before)
	if err != nil {
		t.Fatalf("the request that arrived before the job: %v", err)
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "y", LeaseID: l2.ID}); err != nil {
		t.Fatal(err)
	}
	// The late request waits behind the job.
	if _, err := s.Acquire(ctx, after); !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("late request with the job ahead of it: %v; want ErrLockHeld", err)
	}
	js := claimAs(t, s, "w", time.Minute, "k")
	if len(js) != 1 || js[0].ID != j.ID {
		t.Fatalf("claimed %v; want job %d", js, j.ID)
	}
	complete(t, s, js[0])
	if _, err := s.Acquire(ctx, after); err != nil {
		t.Fatalf("late request once the job ended: %v", err)
	}
}

// The release of a unit a waiting job is first in line for wakes its kind's workers.
func TestJobsBeyondWaitingJobWoken(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	setLimit(t, s, "cap", 1)
	l, err := s.Acquire(ctx, &store.AcquireParams{Key: "x", LeaseID: "l1", Holder: "h1", TTL: time.Minute, Limits: []string{"cap"}})
	if err != nil {
		t.Fatal(err)
	}
	submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Limits: []string{"cap"}})
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v while the unit is held", js)
	}
	ch, unsub := s.SubscribeJobs("k")
	defer unsub()
	time.Sleep(100 * time.Millisecond)
	for len(ch) > 0 {
		<-ch
	}
	if _, err := s.Release(ctx, &store.ReleaseParams{Key: "x", LeaseID: l.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the kind's workers were not woken when the unit the job waits for was released")
	}
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 1 {
		t.Fatalf("claimed %v after the release; want the job", js)
	}
}

// A batch completion (CompleteManyAndClaim, as a worker pool sends it) ends the attempts' holds
// before its claim, which starts the next job with holds; a cancelled waiting job leaves its
// lines.
func TestJobsBeyondCompleteManyAndCancel(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k", Limits: []string{"cap"}})
	setLimit(t, s, "cap", 1)
	a := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a"})
	b := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "b"})
	got := claimAs(t, s, "w", time.Minute, "k")
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("claimed %v; want job %d", got, a.ID)
	}
	done, claimed, err := s.CompleteManyAndClaim(ctx, []*store.CompleteParams{{ID: a.ID, Token: got[0].Token}},
		&store.ClaimParams{Worker: "w", Kinds: []string{"k"}, Limit: 2, TTL: time.Minute})
	if err != nil || len(done) != 1 || done[0] == nil || len(claimed) != 1 || claimed[0].ID != b.ID {
		t.Fatalf("complete and claim: %v %v %v; want job %d done and job %d claimed", done, claimed, err, a.ID, b.ID)
	}
	// b holds the unit; c waits in the limit's line (a ticket at its submit), then is cancelled.
	c := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "c"})
	if js := claimAs(t, s, "w", time.Minute, "k"); len(js) != 0 {
		t.Fatalf("claimed %v while job %d holds the unit", js, b.ID)
	}
	if _, err := s.CancelJob(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := s.CompleteMany(ctx, []*store.CompleteParams{{ID: b.ID, Token: claimed[0].Token}}); err != nil || out[0] == nil {
		t.Fatalf("complete many: %v %v", out, err)
	}
	if _, err := s.Acquire(ctx, &store.AcquireParams{Key: "x", LeaseID: "l1", Holder: "h1", TTL: time.Minute, Limits: []string{"cap"}}); err != nil {
		t.Fatalf("lease on the unit after the jobs ended and the waiting one was cancelled: %v", err)
	}
}

// A job whose limit was deleted after its submit can never run: its claim discards it
// (unknown_limit) and starts the next job of its resource.
func TestJobsBeyondDeletedLimitDiscards(t *testing.T) {
	ctx := testCtx(t)
	s, _ := beyondStore(t, store.Kind{Name: "k"})
	setLimit(t, s, "cap", 1)
	a := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a", Limits: []string{"cap"}})
	b := submitP(t, s, &store.SubmitParams{Kind: "k", Resource: "a"})
	if err := s.DeleteLimit(ctx, &store.DeleteLimitParams{Name: "cap"}); err != nil {
		t.Fatal(err)
	}
	js := claimAs(t, s, "w", time.Minute, "k")
	if len(js) != 1 || js[0].ID != b.ID {
		t.Fatalf("claimed %v; want job %d, behind the discarded one", js, b.ID)
	}
	got, err := s.GetJob(ctx, a.ID)
	if err != nil || got.State != store.JobDiscarded || len(got.Errors) != 1 || got.Errors[0].Code != store.CodeUnknownLimit {
		t.Fatalf("job %d: %+v %v; want discarded with %s", a.ID, got, err, store.CodeUnknownLimit)
	}
}
