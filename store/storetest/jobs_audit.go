package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// AuditedJobStore is a store whose audit log records its jobs' claims, renewals and completions.
type AuditedJobStore interface {
	store.Store
	store.JobStore
}

// RunJobAudit checks that the audit log of s (opened with the audit log on, and fresh) records
// each job attempt's claim, its first renewal only, and its end with the outcome, in order,
// with the job, kind, attempt, worker, the attempt's owner as the principal and its fencing
// token; through the batch completion too, when s has one. A job that ends without running is not in it.
func RunJobAudit(t *testing.T, s AuditedJobStore) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !s.Capabilities().Audit {
		t.Fatal("RunJobAudit needs a store opened with the audit log on")
	}
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "audit.apply", MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	const res = "audit/workspace"
	sub, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "audit.apply", Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(worker string) *store.Job {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, &store.ClaimParams{Worker: worker, Owner: "team-" + worker, Kinds: []string{"audit.apply"}, Limit: 1, TTL: time.Minute})
		if err != nil || len(jobs) != 1 || jobs[0].ID != sub.Job.ID {
			t.Fatalf("ClaimJobs(%s) = %v, %v; want job %d", worker, jobs, err, sub.Job.ID)
		}
		// The events are compared with the owner the claim returned: a store that dropped it
		// would record no principal and still match.
		if s.Capabilities().Owners && jobs[0].Owner != "team-"+worker {
			t.Fatalf("ClaimJobs(%s) returned owner %q, want %q", worker, jobs[0].Owner, "team-"+worker)
		}
		return jobs[0]
	}
	heartbeat := func(j *store.Job) {
		t.Helper()
		if _, err := s.HeartbeatJob(ctx, &store.HeartbeatParams{ID: j.ID, Token: j.Token, Owner: j.Owner, TTL: time.Minute}); err != nil {
			t.Fatalf("HeartbeatJob: %v", err)
		}
	}
	first := claim("worker-a")
	heartbeat(first)
	heartbeat(first)
	heartbeat(first)
	if _, err := s.FailJob(ctx, &store.FailParams{ID: first.ID, Token: first.Token, Owner: first.Owner, Code: "apply_failed", Message: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	second := claim("worker-b")
	heartbeat(second)
	if _, err := s.CompleteJob(ctx, &store.CompleteParams{ID: second.ID, Token: second.Token, Owner: second.Owner}); err != nil {
		t.Fatal(err)
	}
	// A cancelled queued job never ran: no job event.
	queued, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "audit.apply", Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelJob(ctx, queued.Job.ID); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Kind, Key, Holder, Actor, Principal string
		Token                               uint64
		JobID                               int64
		JobKind                             string
		Attempt                             int
		Outcome, Reason                     string
	}
	ev := func(kind string, j *store.Job, outcome, reason string) row {
		return row{kind, res, j.Worker, j.Worker, j.Owner, j.Token, j.ID, "audit.apply", j.Attempt, outcome, reason}
	}
	want := []row{
		ev(store.EventJobClaim, first, "", ""),
		ev(store.EventJobRenew, first, "", ""),
		ev(store.EventJobComplete, first, string(store.JobRetryable), "apply_failed"),
		ev(store.EventJobClaim, second, "", ""),
		ev(store.EventJobRenew, second, "", ""),
		ev(store.EventJobComplete, second, string(store.JobSucceeded), ""),
	}
	if mc, ok := s.(store.ManyCompleter); ok {
		next, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "audit.apply", Resource: res})
		if err != nil {
			t.Fatal(err)
		}
		sub = next
		third := claim("worker-c")
		if done, err := mc.CompleteMany(ctx, []*store.CompleteParams{{ID: third.ID, Token: third.Token, Owner: third.Owner}}); err != nil || len(done) != 1 || done[0] == nil {
			t.Fatalf("CompleteMany = %v, %v", done, err)
		}
		want = append(want, ev(store.EventJobClaim, third, "", ""), ev(store.EventJobComplete, third, string(store.JobSucceeded), ""))
	}
	events, err := s.Events(ctx, &store.EventsParams{Key: res})
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	var last time.Time
	for _, e := range events {
		got = append(got, row{e.Kind, e.Key, e.Holder, e.Actor, e.Principal, e.Token, e.JobID, e.JobKind, e.Attempt, e.Outcome, e.Reason})
		if e.LeaseID != "" || e.At.IsZero() || e.At.Before(last.Add(-clockSlack)) {
			t.Errorf("event %d: lease id %q, at %v after %v; want no lease id and times in order", e.ID, e.LeaseID, e.At, last)
		}
		last = e.At
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("audit log of %q:\n got %+v\nwant %+v", res, got, want)
	}
}
