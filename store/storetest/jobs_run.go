package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// JobHarness tells RunJobs how to make job stores.
type JobHarness struct {
	// NewJobStore returns an empty, isolated job store for one test (a temporary file, a fresh
	// schema) and releases it when t ends.
	NewJobStore func(t *testing.T) store.JobStore
	// Advance (optional) moves forward the clock of the store NewJobStore made for t. Without
	// it, cases that need time to pass wait for short real TTLs and cooldowns by polling, and the
	// parts that cannot be waited for are skipped.
	Advance func(t *testing.T, d time.Duration)
}

// RunJobs runs the job-store suite: the semantics of docs/jobs.md, checked through
// store.JobStore alone. Concurrency cases run first, one at a time; the rest run in parallel.
func RunJobs(t *testing.T, h JobHarness) {
	if h.NewJobStore == nil {
		t.Fatal("JobHarness.NewJobStore is nil")
	}
	serial := []struct {
		name string
		fn   func(*testing.T, JobHarness)
	}{
		{"ExclusionAndOrderUnderConcurrency", testJobExclusion},
		{"IdempotentSubmit", testJobIdempotency},
		{"SubmitManyConcurrency", testJobSubmitManyConcurrency},
		{"SubmitRacesCompletion", testJobSubmitRacesCompletion},
		{"JobsHaveTheirResources", testJobsHaveTheirResources},
		{"OneResourceExclusion", testOneResourceExclusion},
		{"LineFIFO", testLineFIFO},
		{"LineNoStarvation", testLineNoStarvation},
		{"JobLimitCapacity", testJobLimitCapacity},
		{"SharedJobsTogether", testSharedJobsConcurrent},
		{"JobTreeConcurrent", testJobTreeConcurrent},
		{"ReplaceConcurrent", testJobReplaceConcurrent},
		{"RateNeverExceeded", testJobRateConcurrent},
		{"RateNeverExceededShared", testJobRateShared},
		{"LimitRateNeverExceeded", testLimitRateConcurrent},
		{"PrefixRateNeverExceeded", testPrefixRateConcurrent},
	}
	for _, c := range serial {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
	parallel := []struct {
		name string
		fn   func(*testing.T, JobHarness)
	}{
		// Core and FIFO.
		{"RegisterKinds", testJobKinds},
		{"SubmitGetList", testJobSubmitGetList},
		{"TraceParentKept", testJobTraceParent},
		{"CompleteMany", testJobCompleteMany},
		{"CompleteAndClaim", testJobCompleteAndClaim},
		{"CompleteAndClaimHandsOff", testJobCompleteAndClaimHandsOff},
		{"PerResourceFIFO", testJobFIFO},
		{"PriorityAcrossResources", testJobPriority},
		{"TokensIncreasePerResource", testJobTokens},
		{"AttemptTokensPassFences", testJobFenceTokens},
		{"SubscribeWakes", testJobSubscribe},
		{"SubscribeSeveralKinds", testJobSubscribeKinds},
		// Leases and jobs on one resource.
		{"OneResourceRefusals", testOneResourceRefusals},
		{"LineAbandoned", testLineAbandoned},
		{"LineTryKeepsThePlace", testLineTryKeepsThePlace},
		{"LineClaimPassesBlockedHead", testLineClaimPassesBlockedHead},
		{"LineWithJobs", testLineWithJobs},
		{"LineVisible", testLineVisible},
		// Jobs beyond one key.
		{"JobHoldsAsLeases", testJobHoldsAsLeases},
		{"JobBeyondBadInput", testJobBeyondBadInput},
		{"SharedJobsInOrder", testSharedJobsStep},
		// Jobs in trees.
		{"JobTreeOrder", testJobTreeOrder},
		{"JobTreeSharedLeaseWaits", testJobTreeSharedLeaseWaits},
		{"JobTreeBadResource", testJobTreeBadResource},
		{"JobTreeSeen", testJobTreeSeen},
		// Policies and guards.
		{"PolicyReject", testJobPolicyReject},
		{"PolicySkip", testJobPolicySkip},
		{"PolicyOverride", testJobPolicyOverride},
		{"ReplaceQueued", testJobReplaceQueued},
		{"ReplaceRunning", testJobReplaceRunning},
		{"ReplaceDebounce", testJobReplaceDebounce},
		{"ReplaceBadInput", testJobReplaceBadInput},
		{"StateGuard", testJobGuard},
		{"StateGuardFailure", testJobGuardFailure},
		{"KindCooldown", testJobCooldown},
		{"ResourceCooldown", testJobResourceCooldown},
		{"RateWaits", testJobRateWaits},
		{"RateFrees", testJobRateFrees},
		{"RateBadInput", testJobRateBadInput},
		{"ScopedRateWaits", testScopedRateWaits},
		{"ScopedRateFrees", testScopedRateFrees},
		{"ScopedRateBadInput", testScopedRateBadInput},
		// Retries, heartbeat, cancel, reaper.
		{"FailRetryDiscard", testJobFailRetry},
		{"Heartbeat", testJobHeartbeat},
		{"HeartbeatAfterExpiry", testJobHeartbeatExpired},
		{"OwnerKeepsAttempt", testJobOwnerKeepsAttempt},
		{"Cancel", testJobCancel},
		{"Reap", testJobReap},
		// Administration and bad input.
		{"RetryByHand", testJobRetryByHand},
		{"Purge", testJobPurge},
		{"Clean", testJobClean},
		{"CleanDeadLetterAge", testJobCleanDeadLetterAge},
		{"KindStats", testJobKindStats},
		{"Resources", testJobResources},
		{"JobCounts", testJobCounts},
		{"BadSubmit", testJobBadSubmit},
		// SubmitMany.
		{"SubmitManyOrderAndHeads", testJobSubmitManyOrder},
		{"SubmitManyIdempotency", testJobSubmitManyIdempotency},
		{"SubmitManyPolicies", testJobSubmitManyPolicies},
		{"SubmitManyBadInput", testJobSubmitManyBadInput},
		{"BadInput", testJobBadInput},
	}
	for _, c := range parallel {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// clockSlack absorbs the rounding of stored timestamps when the suite compares two times on
// the store's clock (both written by the store).
const clockSlack = 50 * time.Millisecond

// jobEnv is one test's job store with helpers that fail the test on unexpected errors.
type jobEnv struct {
	t   *testing.T
	h   JobHarness
	s   store.JobStore
	ctx context.Context
}

func newJobEnv(t *testing.T, h JobHarness, kinds ...store.Kind) *jobEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &jobEnv{t: t, h: h, s: h.NewJobStore(t), ctx: ctx}
	if len(kinds) > 0 {
		if err := e.s.RegisterKinds(ctx, kinds); err != nil {
			t.Fatalf("RegisterKinds: %v", err)
		}
	}
	return e
}

// canAdvance reports whether the harness can move the store's clock.
func (e *jobEnv) canAdvance() bool { return e.h.Advance != nil }

func (e *jobEnv) advance(d time.Duration) {
	e.t.Helper()
	e.h.Advance(e.t, d)
}

func (e *jobEnv) submit(p store.SubmitParams) *store.Job {
	e.t.Helper()
	res, err := e.s.SubmitJob(e.ctx, &p)
	if err != nil {
		e.t.Fatalf("SubmitJob(%s on %q): %v", p.Kind, p.Resource, err)
	}
	if res.Existing {
		e.t.Fatalf("SubmitJob(%s on %q) returned an existing job %d", p.Kind, p.Resource, res.Job.ID)
	}
	return res.Job
}

// sub submits a job of kind on resource with the defaults.
func (e *jobEnv) sub(kind, resource string) *store.Job {
	e.t.Helper()
	return e.submit(store.SubmitParams{Kind: kind, Resource: resource})
}

func (e *jobEnv) get(id int64) *store.Job {
	e.t.Helper()
	j, err := e.s.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetJob(%d): %v", id, err)
	}
	return j
}

func (e *jobEnv) gone(id int64) {
	e.t.Helper()
	if j, err := e.s.GetJob(e.ctx, id); !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("GetJob(%d) = %+v, %v; want ErrNotFound", id, j, err)
	}
}

func (e *jobEnv) claimTTL(ttl time.Duration, limit int, kinds ...string) []*store.Job {
	e.t.Helper()
	jobs, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: "worker-1", Kinds: kinds, Limit: limit, TTL: ttl})
	if err != nil {
		e.t.Fatalf("ClaimJobs(%v): %v", kinds, err)
	}
	for _, j := range jobs {
		if j.State != store.JobRunning || j.Token == 0 || j.Worker != "worker-1" || j.Attempt < 1 {
			e.t.Fatalf("claimed job = %s; want running, with a token, worker-1 and an attempt", show(j))
		}
	}
	return jobs
}

func (e *jobEnv) claim(limit int, kinds ...string) []*store.Job {
	e.t.Helper()
	return e.claimTTL(time.Minute, limit, kinds...)
}

// claimOne claims with Limit 10 and requires exactly job id.
func (e *jobEnv) claimOne(id int64, kinds ...string) *store.Job {
	e.t.Helper()
	jobs := e.claim(10, kinds...)
	if len(jobs) != 1 || jobs[0].ID != id {
		e.t.Fatalf("ClaimJobs(%v) = %v; want only job %d", kinds, ids(jobs), id)
	}
	return jobs[0]
}

func (e *jobEnv) claimNone(why string, kinds ...string) {
	e.t.Helper()
	if jobs := e.claim(10, kinds...); len(jobs) != 0 {
		e.t.Fatalf("ClaimJobs(%v) = %v; want nothing: %s", kinds, ids(jobs), why)
	}
}

func (e *jobEnv) complete(j *store.Job) *store.Job {
	e.t.Helper()
	done, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token})
	if err != nil {
		e.t.Fatalf("CompleteJob(%d, token %d): %v", j.ID, j.Token, err)
	}
	return done
}

func (e *jobEnv) fail(j *store.Job, p store.FailParams) *store.Job {
	e.t.Helper()
	p.ID, p.Token = j.ID, j.Token
	done, err := e.s.FailJob(e.ctx, &p)
	if err != nil {
		e.t.Fatalf("FailJob(%d, token %d): %v", j.ID, j.Token, err)
	}
	return done
}

func (e *jobEnv) cancel(id int64) *store.Job {
	e.t.Helper()
	j, err := e.s.CancelJob(e.ctx, id)
	if err != nil {
		e.t.Fatalf("CancelJob(%d): %v", id, err)
	}
	return j
}

func (e *jobEnv) retry(id int64) *store.Job {
	e.t.Helper()
	j, err := e.s.RetryJob(e.ctx, id)
	if err != nil {
		e.t.Fatalf("RetryJob(%d): %v", id, err)
	}
	return j
}

func (e *jobEnv) resource(key string) *store.Resource {
	e.t.Helper()
	r, err := e.s.GetResource(e.ctx, key)
	if err != nil {
		e.t.Fatalf("GetResource(%q): %v", key, err)
	}
	return r
}

func (e *jobEnv) setState(key, state string) *store.Resource {
	e.t.Helper()
	r, err := e.s.SetResourceState(e.ctx, &store.SetResourceStateParams{Key: key, State: state})
	if err != nil {
		e.t.Fatalf("SetResourceState(%q, %q): %v", key, state, err)
	}
	return r
}

// listAll pages through ListJobs with p's filters, Limit per page.
func (e *jobEnv) listAll(p store.JobListParams) []*store.Job {
	e.t.Helper()
	jobs, err := listAllJobs(e.ctx, e.s, p)
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs
}

// expectState fails unless job id is in state want, and returns it.
func (e *jobEnv) expectState(id int64, want store.JobState) *store.Job {
	e.t.Helper()
	j := e.get(id)
	if j.State != want {
		e.t.Fatalf("job %d is %s (%s); want %s", id, j.State, show(j), want)
	}
	return j
}

// poll calls f until it returns true, failing the test after limit. It waits for time to pass
// on a store whose clock the harness cannot move; nothing signals that.
func (e *jobEnv) poll(what string, limit time.Duration, f func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func listAllJobs(ctx context.Context, s store.JobStore, p store.JobListParams) ([]*store.Job, error) {
	var all []*store.Job
	limit := p.Limit
	if limit == 0 {
		limit = store.DefaultListSize
	}
	for {
		page, err := s.ListJobs(ctx, &p)
		if err != nil {
			return nil, fmt.Errorf("ListJobs(%+v): %w", p, err)
		}
		if len(page) > limit {
			return nil, fmt.Errorf("ListJobs(%+v) returned %d jobs, more than the limit", p, len(page))
		}
		for i, j := range page {
			if j.ID <= p.After || (i > 0 && j.ID <= page[i-1].ID) {
				return nil, fmt.Errorf("ListJobs(%+v) returned IDs %v: not increasing after the cursor", p, ids(page))
			}
		}
		all = append(all, page...)
		if len(page) < limit {
			return all, nil
		}
		p.After = page[len(page)-1].ID
	}
}

// wantInvalid fails unless err is an *InvalidArgumentError on field.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || !errors.Is(err, store.ErrInvalidArgument) || inv.Field != field {
		t.Fatalf("%s: %v; want an invalid argument on field %q", what, err, field)
	}
}

// wantJobState fails unless err is a *JobStateError for op on job id in state.
func wantJobState(t *testing.T, what string, err error, id int64, op string, state store.JobState) {
	t.Helper()
	var se *store.JobStateError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrJobState) || se.ID != id || se.Op != op || se.State != state {
		t.Fatalf("%s: %v; want a JobStateError (%s job %d, %s)", what, err, op, id, state)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v; want %v", what, err, want)
	}
}

// near reports whether a and b (times on the store's clock) are within clockSlack.
func near(a, b time.Time) bool {
	d := a.Sub(b)
	return d > -clockSlack && d < clockSlack
}

func ids(jobs []*store.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func show(j *store.Job) string {
	if j == nil {
		return "<nil>"
	}
	return fmt.Sprintf("job %d {kind %s, resource %q, seq %d, %s, head %v, attempt %d/%d, token %d, errors %v, scheduled %s}",
		j.ID, j.Kind, j.Resource, j.Seq, j.State, j.Head, j.Attempt, j.MaxAttempts, j.Token, j.Errors,
		j.ScheduledAt.Format(time.RFC3339Nano))
}

func lastError(j *store.Job) store.JobError {
	if len(j.Errors) == 0 {
		return store.JobError{}
	}
	return j.Errors[len(j.Errors)-1]
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
