package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// clock is an injected store clock that only moves when told to.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type jobsT struct {
	t     *testing.T
	s     *sqlite.Store
	clock *clock
	path  string
	ctx   context.Context
}

var (
	kindBuild  = store.Kind{Name: "build"}
	kindDeploy = store.Kind{Name: "deploy", MaxAttempts: 3, FromStates: []string{"ready"},
		RunningState: "deploying", SuccessState: "deployed", FailureState: "failed"}
	kindOnce = store.Kind{Name: "once", Policy: store.PolicyReject}
	kindSkip = store.Kind{Name: "skippy", Policy: store.PolicySkip}
)

func newJobsT(t *testing.T) *jobsT {
	t.Helper()
	c := newClock()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	x := &jobsT{t: t, s: s, clock: c, path: path, ctx: context.Background()}
	if err := s.RegisterKinds(x.ctx, []store.Kind{kindBuild, kindDeploy, kindOnce, kindSkip}); err != nil {
		t.Fatal(err)
	}
	return x
}

func (x *jobsT) submit(kind, resource string) *store.Job {
	x.t.Helper()
	res, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: kind, Resource: resource})
	if err != nil {
		x.t.Fatalf("submit %s on %s: %v", kind, resource, err)
	}
	return res.Job
}

func (x *jobsT) claim(ttl time.Duration, kinds ...string) []*store.Job {
	x.t.Helper()
	jobs, err := x.s.ClaimJobs(x.ctx, &store.ClaimParams{Worker: "w1", Kinds: kinds, Limit: 10, TTL: ttl})
	if err != nil {
		x.t.Fatalf("claim %v: %v", kinds, err)
	}
	return jobs
}

func (x *jobsT) claimOnly(id int64, kinds ...string) *store.Job {
	x.t.Helper()
	jobs := x.claim(time.Minute, kinds...)
	if len(jobs) != 1 || jobs[0].ID != id {
		x.t.Fatalf("claimed %v; want only job %d", jobIDs(jobs), id)
	}
	return jobs[0]
}

func (x *jobsT) get(id int64) *store.Job {
	x.t.Helper()
	j, err := x.s.GetJob(x.ctx, id)
	if err != nil {
		x.t.Fatalf("get %d: %v", id, err)
	}
	return j
}

func (x *jobsT) complete(j *store.Job) *store.Job {
	x.t.Helper()
	done, err := x.s.CompleteJob(x.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token})
	if err != nil {
		x.t.Fatalf("complete %d: %v", j.ID, err)
	}
	return done
}

func jobIDs(jobs []*store.Job) []int64 {
	var out []int64
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// The whole path, and the fencing token drawn from the counter that leases use too.
func TestJobSubmitClaimComplete(t *testing.T) {
	x := newJobsT(t)
	l1, err := x.s.Acquire(x.ctx, &store.AcquireParams{Key: "k1", LeaseID: "l1", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "build", Resource: "repo/a", Args: []byte(`{"ref":"main"}`), Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Job
	if res.Existing || j.ID == 0 || j.State != store.JobAvailable || !j.Head || j.MaxAttempts != store.DefaultMaxAttempts ||
		string(j.Args) != `{"ref":"main"}` || j.Priority != 3 || !j.CreatedAt.Equal(x.clock.now()) {
		t.Fatalf("submitted %+v", j)
	}
	if got := x.get(j.ID); got.Seq != j.Seq || !got.ScheduledAt.Equal(j.ScheduledAt) || !got.Head || string(got.Args) != `{"ref":"main"}` {
		t.Fatalf("get = %+v; submitted %+v", got, j)
	}
	if _, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "nope", Resource: "repo/a"}); err == nil ||
		err.Error() != (&store.InvalidArgumentError{Field: "kind", Rule: `must name a registered kind ("nope" is not; register it first)`}).Error() {
		t.Fatalf("unknown kind: %v", err)
	}
	if none := x.claim(time.Minute, "deploy"); len(none) != 0 {
		t.Fatalf("claimed %v for another kind", jobIDs(none))
	}
	c := x.claimOnly(j.ID, "build", "deploy")
	if c.Token <= l1.Token || c.Attempt != 1 || c.Worker != "w1" || !c.LeaseExpiresAt.Equal(x.clock.now().Add(time.Minute)) {
		t.Fatalf("claimed %+v; lease token was %d", c, l1.Token)
	}
	l2, err := x.s.Acquire(x.ctx, &store.AcquireParams{Key: "k2", LeaseID: "l2", Holder: "h", TTL: time.Minute})
	if err != nil || l2.Token <= c.Token {
		t.Fatalf("lease after the claim: %+v, %v; job token %d", l2, err, c.Token)
	}
	r, err := x.s.GetResource(x.ctx, "repo/a")
	if err != nil || r.RunningJob != j.ID || r.Unfinished != 1 {
		t.Fatalf("resource = %+v, %v", r, err)
	}
	hb, err := x.s.HeartbeatJob(x.ctx, &store.HeartbeatParams{ID: j.ID, Token: c.Token, TTL: 2 * time.Minute})
	if err != nil || hb.CancelRequested || hb.TTLLeft != 2*time.Minute {
		t.Fatalf("heartbeat = %+v, %v", hb, err)
	}
	if _, err := x.s.CompleteJob(x.ctx, &store.CompleteParams{ID: j.ID, Token: c.Token + 1}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete with another token: %v", err)
	}
	x.clock.advance(time.Second)
	done := x.complete(c)
	if done.State != store.JobSucceeded || done.Head || !done.FinishedAt.Equal(x.clock.now()) {
		t.Fatalf("completed %+v", done)
	}
	if _, err := x.s.CompleteJob(x.ctx, &store.CompleteParams{ID: j.ID, Token: c.Token}); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("complete twice: %v", err)
	}
	if r, _ := x.s.GetResource(x.ctx, "repo/a"); r.RunningJob != 0 || r.Unfinished != 0 {
		t.Fatalf("resource after complete = %+v", r)
	}
}

// One resource runs its jobs one at a time in submission order; other resources in parallel.
func TestJobHeadsFIFO(t *testing.T) {
	x := newJobsT(t)
	a1, a2, a3 := x.submit("build", "a"), x.submit("build", "a"), x.submit("build", "a")
	b1 := x.submit("build", "b")
	if !a1.Head || a2.Head || a3.Head || !b1.Head || !(a1.Seq < a2.Seq && a2.Seq < a3.Seq) {
		t.Fatalf("heads: %v %v %v %v", a1.Head, a2.Head, a3.Head, b1.Head)
	}
	got := x.claim(time.Minute, "build")
	if fmt.Sprint(jobIDs(got)) != fmt.Sprint([]int64{a1.ID, b1.ID}) {
		t.Fatalf("first claim = %v; want %d and %d", jobIDs(got), a1.ID, b1.ID)
	}
	if none := x.claim(time.Minute, "build"); len(none) != 0 {
		t.Fatalf("claimed %v behind a running head", jobIDs(none))
	}
	x.complete(got[0])
	if j := x.get(a2.ID); !j.Head || j.State != store.JobAvailable {
		t.Fatalf("a2 after a1 = %+v", j)
	}
	c2 := x.claimOnly(a2.ID, "build")
	x.complete(c2)
	c3 := x.claimOnly(a3.ID, "build")
	if !(got[0].Token < c2.Token && c2.Token < c3.Token) {
		t.Fatalf("tokens %d %d %d do not increase", got[0].Token, c2.Token, c3.Token)
	}
}

func TestJobPolicies(t *testing.T) {
	x := newJobsT(t)
	head := x.submit("once", "r")
	_, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "once", Resource: "r"})
	var busy *store.ResourceBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrResourceBusy) || busy.HeadJob != head.ID || busy.State != store.JobAvailable || busy.Resource != "r" {
		t.Fatalf("reject: %v", err)
	}
	skipped := x.submit("skippy", "r")
	if skipped.State != store.JobSkipped || skipped.Head || skipped.FinishedAt.IsZero() ||
		len(skipped.Errors) != 1 || skipped.Errors[0].Code != store.CodeResourceBusy {
		t.Fatalf("skip: %+v", skipped)
	}
	// The submit's policy overrides the kind's.
	res, err := x.s.SubmitJob(x.ctx, &store.SubmitParams{Kind: "once", Resource: "r", Policy: store.PolicyQueue})
	if err != nil || res.Job.State != store.JobAvailable || res.Job.Head {
		t.Fatalf("queue override: %+v, %v", res, err)
	}
	jobs, err := x.s.ListJobs(x.ctx, &store.JobListParams{Resource: "r"})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("list = %v, %v; want the head, the skipped job and the queued one", jobIDs(jobs), err)
	}
	// A free resource accepts under every policy.
	if j := x.submit("skippy", "free"); j.State != store.JobAvailable || !j.Head {
		t.Fatalf("skip on a free resource: %+v", j)
	}
}

// A guard that refuses the resource's state discards the head in the claim and promotes the next.
func TestJobGuard(t *testing.T) {
	x := newJobsT(t)
	d1, b, d2 := x.submit("deploy", "svc"), x.submit("build", "svc"), x.submit("deploy", "svc")
	// d1 may not start from state "": discarded, and the same claim goes on to its successor.
	got := x.claim(time.Minute, "deploy", "build")
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("claimed %v; want only %d, the successor of the refused job", jobIDs(got), b.ID)
	}
	j := x.get(d1.ID)
	if j.State != store.JobDiscarded || j.Head || j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Code != store.CodeInvalidResourceState {
		t.Fatalf("refused job = %+v", j)
	}
	if r, _ := x.s.GetResource(x.ctx, "svc"); r.State != "" || r.Version != 0 {
		t.Fatalf("resource after a refusal = %+v; want it untouched", r)
	}
	x.complete(got[0])
	if j := x.get(d2.ID); !j.Head || j.State != store.JobAvailable {
		t.Fatalf("next job = %+v", j)
	}
	r, err := x.s.SetResourceState(x.ctx, &store.SetResourceStateParams{Key: "svc", State: "ready"})
	if err != nil || r.Version != 1 {
		t.Fatalf("set state = %+v, %v", r, err)
	}
	c := x.claimOnly(d2.ID, "deploy")
	if r, _ := x.s.GetResource(x.ctx, "svc"); r.State != "deploying" || r.Version != 2 || r.RunningJob != d2.ID {
		t.Fatalf("resource while running = %+v", r)
	}
	x.complete(c)
	if r, _ := x.s.GetResource(x.ctx, "svc"); r.State != "deployed" || r.Version != 3 {
		t.Fatalf("resource after success = %+v", r)
	}
	old := int64(1)
	_, err = x.s.SetResourceState(x.ctx, &store.SetResourceStateParams{Key: "svc", State: "ready", IfVersion: &old})
	var vm *store.VersionMismatchError
	if !errors.As(err, &vm) || vm.Current != 3 || vm.Want != 1 {
		t.Fatalf("compare-and-set at an old version: %v", err)
	}
}
