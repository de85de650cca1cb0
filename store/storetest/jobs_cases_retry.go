package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

func testJobFailRetry(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "flaky", MaxAttempts: 3})
	a := e.sub("flaky", "flaky/1")
	b := e.sub("flaky", "flaky/1")
	j1 := e.claimOne(a.ID, "flaky")
	f := e.fail(j1, store.FailParams{Message: "boom", RetryAfter: time.Hour})
	want := store.JobError{Attempt: 1, Code: store.CodeHandlerError, Message: "boom"}
	if f.State != store.JobRetryable || !f.Head || f.Attempt != 1 || len(f.Errors) != 1 || f.Errors[0].At.IsZero() ||
		f.Errors[0].Attempt != want.Attempt || f.Errors[0].Code != want.Code || f.Errors[0].Message != want.Message ||
		!near(f.ScheduledAt, f.Errors[0].At.Add(time.Hour)) || !f.FinishedAt.IsZero() {
		t.Fatalf("after a failed attempt with an hour's backoff: %s; want retryable head, error %+v, scheduled an hour after it", show(f), want)
	}
	if g := e.get(a.ID); g.State != store.JobRetryable || len(g.Errors) != 1 || !near(g.ScheduledAt, f.ScheduledAt) {
		t.Fatalf("GetJob after the failure: %s; FailJob returned %s", show(g), show(f))
	}
	// It stays head while it backs off: the job behind it waits.
	e.claimNone("the head backs off for an hour and the job behind it waits", "flaky")
	if g := e.get(b.ID); g.Head || g.State != store.JobAvailable {
		t.Fatalf("job behind a retryable head: %s; want available, not head", show(g))
	}
	if e.canAdvance() {
		e.advance(time.Hour + clockSlack)
	} else {
		e.retry(a.ID) // a retryable job becomes claimable now
	}
	j2 := e.claimOne(a.ID, "flaky")
	if j2.Attempt != 2 || j2.Token <= j1.Token {
		t.Fatalf("second attempt: %s; want attempt 2 with a token above %d", show(j2), j1.Token)
	}
	f = e.fail(j2, store.FailParams{Code: "net_down", Message: "again"})
	if f.State != store.JobRetryable || len(f.Errors) != 2 || f.Errors[1].Attempt != 2 || f.Errors[1].Code != "net_down" ||
		f.Errors[1].Message != "again" || f.Errors[0].Message != "boom" || f.ScheduledAt.After(f.Errors[1].At.Add(clockSlack)) {
		t.Fatalf("after the second failure without backoff: %s; want both errors in order, claimable now", show(f))
	}
	j3 := e.claimOne(a.ID, "flaky")
	f = e.fail(j3, store.FailParams{Message: "last"})
	if f.State != store.JobDiscarded || f.Head || f.Attempt != 3 || len(f.Errors) != 3 || f.FinishedAt.IsZero() {
		t.Fatalf("after the last attempt failed: %s; want discarded, 3 errors, finished", show(f))
	}
	// The next job is promoted; a permanent failure discards at once.
	jb := e.claimOne(b.ID, "flaky")
	long := strings.Repeat("é", store.MaxErrorMessageLen) // twice the limit in bytes
	f = e.fail(jb, store.FailParams{Code: store.CodePermanent, Message: long, Permanent: true, RetryAfter: time.Hour})
	if f.State != store.JobDiscarded || f.Attempt != 1 || len(f.Errors) != 1 || f.Errors[0].Code != store.CodePermanent {
		t.Fatalf("after a permanent failure: %s; want discarded after one attempt", show(f))
	}
	if msg := e.get(b.ID).Errors[0].Message; msg != store.TruncateMessage(long) {
		t.Fatalf("a %d-byte message was stored as %d bytes; want it cut to %d at a rune boundary", len(long), len(msg), len(store.TruncateMessage(long)))
	}
	e.claimNone("every job of the resource is discarded", "flaky")
}

func testJobHeartbeat(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "hb"})
	a := e.sub("hb", "hb/1")
	e.sub("hb", "hb/2")
	got := e.claimTTL(10*time.Second, 10, "hb")
	if len(got) != 2 {
		t.Fatalf("claimed %v; want both heads", ids(got))
	}
	j, o := got[0], got[1]
	if j.ID != a.ID {
		j, o = o, j
	}
	if !near(j.LeaseExpiresAt, j.AttemptedAt.Add(10*time.Second)) {
		t.Fatalf("claimed with a 10s TTL: %s, attempted %s, lease until %s", show(j), j.AttemptedAt, j.LeaseExpiresAt)
	}
	hb, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, TTL: time.Hour})
	if err != nil || hb.CancelRequested || hb.TTLLeft <= time.Hour-time.Minute || hb.TTLLeft > time.Hour+clockSlack {
		t.Fatalf("heartbeat with a 1h TTL = %+v, %v; want about 1h left, no cancel", hb, err)
	}
	if g := e.get(a.ID); g.LeaseExpiresAt.Before(j.LeaseExpiresAt.Add(50 * time.Minute)) {
		t.Fatalf("lease after a 1h heartbeat expires %s; it was %s", g.LeaseExpiresAt, j.LeaseExpiresAt)
	}
	notHeld := func(what string, id int64, tok uint64) {
		t.Helper()
		_, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: id, Token: tok, TTL: time.Minute})
		wantErr(t, what+": heartbeat", err, store.ErrNotHeld)
		_, err = e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: id, Token: tok})
		wantErr(t, what+": complete", err, store.ErrNotHeld)
		_, err = e.s.FailJob(e.ctx, &store.FailParams{ID: id, Token: tok, Message: "x"})
		wantErr(t, what+": fail", err, store.ErrNotHeld)
	}
	notHeld("a token never issued", j.ID, j.Token+1000)
	notHeld("another job's token", j.ID, o.Token)
	if g := e.expectState(a.ID, store.JobRunning); g.Attempt != 1 || len(g.Errors) != 0 || g.Token != j.Token {
		t.Fatalf("after refused calls: %s; want the attempt untouched", show(g))
	}
	// A stale token: the previous attempt's.
	e.fail(j, store.FailParams{Message: "retry me"})
	j2 := e.claimOne(a.ID, "hb")
	notHeld("the previous attempt's token", j.ID, j.Token)
	if g := e.expectState(a.ID, store.JobRunning); g.Token != j2.Token || len(g.Errors) != 1 {
		t.Fatalf("after stale calls: %s; want attempt 2 untouched", show(g))
	}
	e.complete(j2)
	notHeld("a finished attempt's token", j2.ID, j2.Token)
	if g := e.expectState(a.ID, store.JobSucceeded); len(g.Errors) != 1 {
		t.Fatalf("after calls on a finished job: %s; want it untouched", show(g))
	}
	e.complete(o)
}

func testJobHeartbeatExpired(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "hbx"})
	requireNotApplicable(t, e.canAdvance(),
		"without JobHarness.Advance the suite cannot hold a lease expired and not yet reaped")
	a := e.sub("hbx", "hbx/1")
	j := e.claimTTL(time.Second, 1, "hbx")[0]
	e.advance(2 * time.Second)
	_, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, TTL: time.Minute})
	wantErr(t, "heartbeat after the lease expired", err, store.ErrNotHeld)
	// Not reaped yet: the worker may still report its result.
	if done := e.complete(j); done.ID != a.ID || done.State != store.JobSucceeded {
		t.Fatalf("complete after expiry, before the reaper: %s; want succeeded", show(done))
	}
}

func testJobCancel(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "cx"}, store.Kind{Name: "cx.guard", FailureState: "ABORTED"})
	a := e.sub("cx", "cx/1")
	b := e.sub("cx", "cx/1")
	c := e.sub("cx", "cx/1")
	// An available head: cancelled at once, the next promoted.
	if ca := e.cancel(a.ID); ca.State != store.JobCancelled || ca.Head || ca.FinishedAt.IsZero() {
		t.Fatalf("cancel of an available head: %s; want cancelled, finished", show(ca))
	}
	jb := e.claimOne(b.ID, "cx")
	// A queued job behind a running one: cancelled at once, the running one untouched.
	e.cancel(c.ID)
	e.expectState(c.ID, store.JobCancelled)
	e.expectState(b.ID, store.JobRunning)
	d := e.sub("cx", "cx/1")
	// A running job: only a request; the resource stays locked until its worker stops.
	if cr := e.cancel(b.ID); cr.State != store.JobRunning || !cr.CancelRequested {
		t.Fatalf("cancel of a running job: %s; want running with CancelRequested", show(cr))
	}
	hb, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: jb.ID, Token: jb.Token, TTL: time.Minute})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat after a cancel request = %+v, %v; want CancelRequested", hb, err)
	}
	e.claimNone("a running job with a cancel request still holds its resource", "cx")
	if r := e.resource("cx/1"); r.RunningJob != b.ID {
		t.Fatalf("resource = %+v; want job %d still running", r, b.ID)
	}
	// The work finished anyway: a cancel request that came too late does not undo it.
	if done := e.complete(jb); done.State != store.JobSucceeded || done.FinishedAt.IsZero() {
		t.Fatalf("complete after a cancel request: %s; want succeeded", show(done))
	}
	// The same through FailJob: cancelled, not retried.
	jd := e.claimOne(d.ID, "cx")
	e.cancel(d.ID)
	if f := e.fail(jd, store.FailParams{Message: "stopped"}); f.State != store.JobCancelled || f.Head {
		t.Fatalf("fail after a cancel request: %s; want cancelled", show(f))
	}
	// Finished jobs cannot be cancelled.
	_, err = e.s.CancelJob(e.ctx, a.ID)
	wantJobState(t, "cancel of a cancelled job", err, a.ID, "cancel", store.JobCancelled)
	s := e.sub("cx", "cx/2")
	e.complete(e.claimOne(s.ID, "cx"))
	_, err = e.s.CancelJob(e.ctx, s.ID)
	wantJobState(t, "cancel of a succeeded job", err, s.ID, "cancel", store.JobSucceeded)
	_, err = e.s.CancelJob(e.ctx, d.ID+1000)
	wantErr(t, "cancel of an unknown job", err, store.ErrNotFound)
	// A retryable job is not running: cancelled at once, and since it had an attempt the
	// resource takes the failure state.
	g := e.sub("cx.guard", "cx/g")
	g2 := e.sub("cx.guard", "cx/g")
	e.fail(e.claimOne(g.ID, "cx.guard"), store.FailParams{Message: "later", RetryAfter: time.Hour})
	if cg := e.cancel(g.ID); cg.State != store.JobCancelled || cg.Head {
		t.Fatalf("cancel of a retryable job: %s; want cancelled at once", show(cg))
	}
	if r := e.resource("cx/g"); r.State != "ABORTED" {
		t.Fatalf("resource after cancelling a job that had an attempt = %+v; want the failure state ABORTED", r)
	}
	e.claimOne(g2.ID, "cx.guard")
}

func testJobReap(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "reap", MaxAttempts: 2})
	reap := func() []*store.ReapedJob {
		t.Helper()
		r, err := e.s.ReapJobs(e.ctx, &store.ReapParams{Limit: 10})
		if err != nil {
			t.Fatalf("ReapJobs: %v", err)
		}
		return r
	}
	// expire waits until the 1s lease of a job claimed at claimed is reaped.
	expire := func(claimed time.Time) []*store.ReapedJob {
		t.Helper()
		if e.canAdvance() {
			e.advance(time.Second + clockSlack)
			return reap()
		}
		var got []*store.ReapedJob
		e.poll("the reaper ends an expired 1s lease", 15*time.Second, func() bool {
			got = reap()
			return len(got) > 0
		})
		if waited := time.Since(claimed); waited < time.Second-clockSlack {
			t.Fatalf("a 1s lease was reaped %s after the claim", waited)
		}
		return got
	}
	one := func(got []*store.ReapedJob, id int64, state store.JobState) *store.Job {
		t.Helper()
		if len(got) != 1 || got[0].Job.ID != id || got[0].Reason != store.CodeWorkerTimeout || got[0].Job.State != state ||
			lastError(got[0].Job).Code != store.CodeWorkerTimeout {
			var jobs []string
			for _, r := range got {
				jobs = append(jobs, r.Reason+" "+show(r.Job))
			}
			t.Fatalf("reaped %v; want job %d, %s, reason and error worker_timeout", jobs, id, state)
		}
		return got[0].Job
	}
	a := e.sub("reap", "reap/1")
	b := e.sub("reap", "reap/1")
	at := time.Now()
	j1 := e.claimTTL(time.Second, 10, "reap")[0]
	if got := reap(); len(got) != 0 {
		t.Fatalf("ReapJobs right after the claim reaped %d jobs; the lease is live", len(got))
	}
	r := one(expire(at), a.ID, store.JobRetryable)
	if !r.Head || r.Attempt != 1 {
		t.Fatalf("reaped job: %s; want retryable head after attempt 1", show(r))
	}
	_, err := e.s.HeartbeatJob(e.ctx, &store.HeartbeatParams{ID: j1.ID, Token: j1.Token, TTL: time.Minute})
	wantErr(t, "heartbeat of a reaped attempt", err, store.ErrNotHeld)
	_, err = e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j1.ID, Token: j1.Token})
	wantErr(t, "complete of a reaped attempt", err, store.ErrNotHeld)
	// Claimable again, with a larger token; the job behind it still waits.
	at = time.Now()
	got := e.claimTTL(time.Second, 10, "reap")
	if len(got) != 1 || got[0].ID != a.ID || got[0].Attempt != 2 || got[0].Token <= j1.Token {
		t.Fatalf("claim after the reap = %v; want job %d, attempt 2, token above %d", ids(got), a.ID, j1.Token)
	}
	// At max attempts the reaper discards; the next job is promoted.
	if d := one(expire(at), a.ID, store.JobDiscarded); d.Head || len(d.Errors) != 2 || d.FinishedAt.IsZero() {
		t.Fatalf("reaped at max attempts: %s; want discarded with 2 errors", show(d))
	}
	at = time.Now()
	got = e.claimTTL(time.Second, 10, "reap")
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("claim after the head was discarded = %v; want job %d", ids(got), b.ID)
	}
	// A running job with a cancel request is reaped as cancelled.
	e.cancel(b.ID)
	one(expire(at), b.ID, store.JobCancelled)
	if r := e.resource("reap/1"); r.RunningJob != 0 || r.Unfinished != 0 {
		t.Fatalf("resource after its jobs were reaped = %+v", r)
	}
}
