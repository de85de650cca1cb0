package sqlite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Failures back off while attempts remain (the job stays head), then dead-letter with the history.
func TestJobFailRetryDiscard(t *testing.T) {
	x := newJobsT(t)
	if _, err := x.s.SetResourceState(x.ctx, &store.SetResourceStateParams{Key: "svc", State: "ready"}); err != nil {
		t.Fatal(err)
	}
	d := x.submit("deploy", "svc")
	behind := x.submit("deploy", "svc")
	for attempt := 1; attempt <= 3; attempt++ {
		c := x.claimOnly(d.ID, "deploy")
		if c.Attempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, c)
		}
		f, err := x.s.FailJob(x.ctx, &store.FailParams{ID: c.ID, Token: c.Token, Message: fmt.Sprint("boom ", attempt), RetryAfter: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Errors) != attempt || f.Errors[attempt-1].Code != store.CodeHandlerError || f.Errors[attempt-1].Attempt != attempt ||
			f.Errors[attempt-1].Message != fmt.Sprint("boom ", attempt) || !f.Errors[attempt-1].At.Equal(x.clock.now()) {
			t.Fatalf("errors after attempt %d: %+v", attempt, f.Errors)
		}
		if attempt < 3 {
			if f.State != store.JobRetryable || !f.Head || !f.ScheduledAt.Equal(x.clock.now().Add(10*time.Second)) {
				t.Fatalf("after attempt %d: %+v", attempt, f)
			}
			if got := x.claim(time.Minute, "deploy"); len(got) != 0 {
				t.Fatalf("claimed %v during the backoff", jobIDs(got))
			}
			x.clock.advance(10 * time.Second)
			continue
		}
		if f.State != store.JobDiscarded || f.Head {
			t.Fatalf("after the last attempt: %+v", f)
		}
	}
	// The retry started from the running state its first attempt set; the dead letter sets the
	// failure state, and the job behind is promoted (and refused from "failed").
	if r, _ := x.s.GetResource(x.ctx, "svc"); r.State != "failed" {
		t.Fatalf("resource after the dead letter = %+v", r)
	}
	if j := x.get(behind.ID); !j.Head {
		t.Fatalf("job behind = %+v", j)
	}
	// A retry by hand puts it back at the end of the queue with one more attempt.
	r := x.get(d.ID)
	retried, err := x.s.RetryJob(x.ctx, d.ID)
	if err != nil || retried.State != store.JobAvailable || retried.Head || retried.Seq <= behind.Seq || retried.MaxAttempts != 4 ||
		len(retried.Errors) != 3 || !retried.FinishedAt.IsZero() {
		t.Fatalf("retry by hand = %+v, %v (was %+v)", retried, err, r)
	}
	var se *store.JobStateError
	if _, err := x.s.RetryJob(x.ctx, d.ID); !errors.As(err, &se) || se.Op != "retry" || se.State != store.JobAvailable {
		t.Fatalf("retry of an available job: %v", err)
	}
}

// Cancelling a running job only requests it: the resource stays locked until the attempt ends.
func TestJobCancelRunning(t *testing.T) {
	x := newJobsT(t)
	a, b := x.submit("build", "r"), x.submit("build", "r")
	c := x.claimOnly(a.ID, "build")
	j, err := x.s.CancelJob(x.ctx, a.ID)
	if err != nil || j.State != store.JobRunning || !j.CancelRequested {
		t.Fatalf("cancel running = %+v, %v", j, err)
	}
	if r, _ := x.s.GetResource(x.ctx, "r"); r.RunningJob != a.ID {
		t.Fatalf("resource after the cancel request = %+v", r)
	}
	if got := x.claim(time.Minute, "build"); len(got) != 0 {
		t.Fatalf("claimed %v while a cancelled job still runs", jobIDs(got))
	}
	hb, err := x.s.HeartbeatJob(x.ctx, &store.HeartbeatParams{ID: a.ID, Token: c.Token, TTL: time.Minute})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat = %+v, %v", hb, err)
	}
	done, err := x.s.FailJob(x.ctx, &store.FailParams{ID: a.ID, Token: c.Token, Message: "context canceled"})
	if err != nil || done.State != store.JobCancelled {
		t.Fatalf("fail after cancel = %+v, %v", done, err)
	}
	var se *store.JobStateError
	if _, err := x.s.CancelJob(x.ctx, a.ID); !errors.As(err, &se) || se.Op != "cancel" || se.State != store.JobCancelled || se.ID != a.ID {
		t.Fatalf("cancel of a finished job: %v", err)
	}
	// A job not running is cancelled at once.
	if j, err := x.s.CancelJob(x.ctx, b.ID); err != nil || j.State != store.JobCancelled || j.Head {
		t.Fatalf("cancel waiting = %+v, %v", j, err)
	}
	if _, err := x.s.CancelJob(x.ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

// The reaper ends expired attempts on the store's clock; the late worker's token is dead.
func TestJobReap(t *testing.T) {
	x := newJobsT(t)
	if err := x.s.RegisterKinds(x.ctx, []store.Kind{{Name: "fragile", MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	j := x.submit("fragile", "r")
	c := x.claimOnly(j.ID, "fragile")
	if got, err := x.s.ReapJobs(x.ctx, &store.ReapParams{}); err != nil || len(got) != 0 {
		t.Fatalf("reap before expiry = %v, %v", got, err)
	}
	x.clock.advance(time.Minute)
	if _, err := x.s.HeartbeatJob(x.ctx, &store.HeartbeatParams{ID: j.ID, Token: c.Token, TTL: time.Minute}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("heartbeat of an expired lease: %v", err)
	}
	got, err := x.s.ReapJobs(x.ctx, &store.ReapParams{RetryAfter: time.Second})
	if err != nil || len(got) != 1 || got[0].Reason != store.CodeWorkerTimeout || got[0].Job.State != store.JobRetryable ||
		!got[0].Job.Head || got[0].Job.Errors[0].Code != store.CodeWorkerTimeout {
		t.Fatalf("reap = %+v, %v", got, err)
	}
	if _, err := x.s.CompleteJob(x.ctx, &store.CompleteParams{ID: j.ID, Token: c.Token}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete after the reap: %v", err)
	}
	x.clock.advance(time.Second)
	c2 := x.claimOnly(j.ID, "fragile")
	if c2.Token <= c.Token || c2.Attempt != 2 {
		t.Fatalf("second attempt = %+v", c2)
	}
	// A running job without a lease (a bug, or an operator) is reaped too; attempts are spent.
	if _, err := x.s.DB().Exec(`UPDATE jobs SET lease_expires_at = NULL WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	got, err = x.s.ReapJobs(x.ctx, &store.ReapParams{})
	if err != nil || len(got) != 1 || got[0].Reason != store.CodeLockStateLost || got[0].Job.State != store.JobDiscarded || len(got[0].Job.Errors) != 2 {
		t.Fatalf("reap without lease = %+v, %v", got, err)
	}
}
