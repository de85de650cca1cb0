package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// wantBusy fails unless err is a *ResourceBusyError naming head in state.
func wantBusy(t *testing.T, err error, resource string, head int64, state store.JobState) {
	t.Helper()
	var busy *store.ResourceBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrResourceBusy) || busy.Resource != resource ||
		busy.HeadJob != head || busy.State != state {
		t.Fatalf("submit to busy %q: %v; want a ResourceBusyError naming head job %d (%s)", resource, err, head, state)
	}
}

func testJobPolicyReject(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "rej", Policy: store.PolicyReject})
	a := e.sub("rej", "rej/1")
	_, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "rej", Resource: "rej/1", IdempotencyKey: "rejected-once"})
	wantBusy(t, err, "rej/1", a.ID, store.JobAvailable)
	// Nothing written: not the job, not its idempotency key.
	if got := e.listAll(store.JobListParams{}); !slices.Equal(ids(got), []int64{a.ID}) {
		t.Fatalf("jobs after a rejected submit: %v; want only %d", ids(got), a.ID)
	}
	if r := e.resource("rej/1"); r.Unfinished != 1 {
		t.Fatalf("resource after a rejected submit = %+v; want 1 unfinished job", r)
	}
	// Another resource is not busy.
	other := e.submit(store.SubmitParams{Kind: "rej", Resource: "rej/2", IdempotencyKey: "rejected-once"})
	if !other.Head || other.IdempotencyKey != "rejected-once" {
		t.Fatalf("submit with the key of a rejected submit: %s; want a new head job", show(other))
	}
	// A running head is busy too; once it ends the resource is free.
	got := e.claim(10, "rej")
	if len(got) != 2 {
		t.Fatalf("claimed %v; want the heads %d and %d", ids(got), a.ID, other.ID)
	}
	j := got[0]
	if j.ID != a.ID {
		j = got[1]
	}
	_, err = e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "rej", Resource: "rej/1"})
	wantBusy(t, err, "rej/1", a.ID, store.JobRunning)
	e.complete(j)
	b := e.sub("rej", "rej/1")
	if !b.Head || b.State != store.JobAvailable {
		t.Fatalf("submit to a resource whose jobs all ended: %s; want an available head", show(b))
	}
}

func testJobPolicySkip(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "skip", Policy: store.PolicySkip})
	a := e.sub("skip", "skip/1")
	res, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "skip", Resource: "skip/1"})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Job
	if s.State != store.JobSkipped || s.Head || s.FinishedAt.IsZero() || len(s.Errors) != 1 ||
		s.Errors[0].Code != store.CodeResourceBusy || s.Attempt != 0 || res.Existing {
		t.Fatalf("submit to a busy resource under skip: %s; want skipped, finished, error resource_busy", show(s))
	}
	if got := e.get(s.ID); got.State != store.JobSkipped {
		t.Fatalf("GetJob of the skipped job: %s", show(got))
	}
	if r := e.resource("skip/1"); r.Unfinished != 1 {
		t.Fatalf("resource = %+v; want only the first job unfinished", r)
	}
	if got := e.listAll(store.JobListParams{Resource: "skip/1"}); !slices.Equal(ids(got), []int64{a.ID, s.ID}) {
		t.Fatalf("jobs of skip/1 = %v; want %d and the skipped %d", ids(got), a.ID, s.ID)
	}
	e.complete(e.claimOne(a.ID, "skip"))
	e.claimNone("a skipped job never runs by itself", "skip")
	e.expectState(s.ID, store.JobSkipped)
	// Not busy any more: the next submit is queued.
	if b := e.sub("skip", "skip/1"); b.State != store.JobAvailable || !b.Head {
		t.Fatalf("submit to a free resource under skip: %s; want an available head", show(b))
	}
}

func testJobPolicyOverride(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "ovr.rej", Policy: store.PolicyReject}, store.Kind{Name: "ovr.queue"})
	a := e.sub("ovr.rej", "ovr/1")
	// The submit's policy wins over the kind's, both ways.
	b := e.submit(store.SubmitParams{Kind: "ovr.rej", Resource: "ovr/1", Policy: store.PolicyQueue})
	if b.State != store.JobAvailable || b.Head {
		t.Fatalf("queue override on a reject kind: %s; want queued behind %d", show(b), a.ID)
	}
	_, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "ovr.queue", Resource: "ovr/1", Policy: store.PolicyReject})
	wantBusy(t, err, "ovr/1", a.ID, store.JobAvailable)
	res, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "ovr.queue", Resource: "ovr/1", Policy: store.PolicySkip})
	if err != nil || res.Job.State != store.JobSkipped {
		t.Fatalf("skip override on a queue kind: %+v, %v; want skipped", res, err)
	}
	// A queue kind without override queues.
	c := e.sub("ovr.queue", "ovr/1")
	if got := e.listAll(store.JobListParams{Resource: "ovr/1", State: store.JobAvailable}); !slices.Equal(ids(got), []int64{a.ID, b.ID, c.ID}) {
		t.Fatalf("available jobs of ovr/1 = %v; want %v", ids(got), []int64{a.ID, b.ID, c.ID})
	}
}

func guardKinds() []store.Kind {
	return []store.Kind{
		{Name: "create", MaxAttempts: 2, FromStates: []string{"PENDING"}, RunningState: "CREATING",
			SuccessState: "READY", FailureState: "FAILED"},
		{Name: "touch"},
	}
}

func testJobGuard(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, guardKinds()...)
	r0 := e.setState("vm/1", "PENDING")
	first := e.sub("create", "vm/1")
	second := e.sub("create", "vm/1")
	after := e.sub("touch", "vm/1")
	j := e.claimOne(first.ID, "create", "touch")
	r1 := e.resource("vm/1")
	if r1.State != "CREATING" || r1.Version <= r0.Version || r1.RunningJob != first.ID {
		t.Fatalf("resource after the claim = %+v (before %+v); want CREATING, version bumped, job %d running", r1, r0, first.ID)
	}
	e.complete(j)
	r2 := e.resource("vm/1")
	if r2.State != "READY" || r2.Version <= r1.Version {
		t.Fatalf("resource after success = %+v (before %+v); want READY, version bumped", r2, r1)
	}
	// The second create may not start from READY: discarded by the claim, not returned.
	e.claimNone("the guard refuses READY", "create")
	d := e.expectState(second.ID, store.JobDiscarded)
	if d.Head || d.Attempt != 0 || lastError(d).Code != store.CodeInvalidResourceState || d.FinishedAt.IsZero() {
		t.Fatalf("refused job: %s; want discarded without an attempt, error invalid_resource_state", show(d))
	}
	if r := e.resource("vm/1"); r.State != "READY" {
		t.Fatalf("resource after a refused job = %+v; want READY untouched (the job never had an attempt)", r)
	}
	// The next job was promoted.
	if a := e.get(after.ID); !a.Head {
		t.Fatalf("after the refusal: %s; want promoted to head", show(a))
	}
	e.complete(e.claimOne(after.ID, "touch", "create"))
	// A resource never set has state "", which this guard does not allow.
	fresh := e.sub("create", "vm/2")
	e.claimNone("the guard refuses the empty state", "create")
	if d := e.expectState(fresh.ID, store.JobDiscarded); lastError(d).Code != store.CodeInvalidResourceState {
		t.Fatalf("refused job: %s; want error invalid_resource_state", show(d))
	}
}

func testJobGuardFailure(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, guardKinds()...)
	e.setState("vm/f", "PENDING")
	job := e.sub("create", "vm/f")
	j := e.claimOne(job.ID, "create")
	v1 := e.resource("vm/f")
	f := e.fail(j, store.FailParams{Message: "first try"})
	if f.State != store.JobRetryable || !f.Head {
		t.Fatalf("failed first attempt: %s; want retryable head", show(f))
	}
	if r := e.resource("vm/f"); r.State != "CREATING" {
		t.Fatalf("resource after a failed attempt with attempts left = %+v; want still CREATING", r)
	}
	// The retry starts from CREATING, the state its own first attempt set.
	j2 := e.claimOne(job.ID, "create")
	if j2.Attempt != 2 || j2.Token <= j.Token {
		t.Fatalf("retry: %s; want attempt 2 with a larger token than %d", show(j2), j.Token)
	}
	f = e.fail(j2, store.FailParams{Message: "second try"})
	if f.State != store.JobDiscarded || f.Head || len(f.Errors) != 2 {
		t.Fatalf("failed last attempt: %s; want discarded with 2 errors", show(f))
	}
	if r := e.resource("vm/f"); r.State != "FAILED" || r.Version <= v1.Version || r.RunningJob != 0 {
		t.Fatalf("resource after the last attempt failed = %+v (before %+v); want FAILED, version bumped", r, v1)
	}
	// A permanent failure on the first attempt sets the failure state too.
	e.setState("vm/p", "PENDING")
	p := e.sub("create", "vm/p")
	f = e.fail(e.claimOne(p.ID, "create"), store.FailParams{Code: store.CodePermanent, Permanent: true, Message: "no"})
	if f.State != store.JobDiscarded || f.Attempt != 1 {
		t.Fatalf("permanent failure: %s; want discarded after one attempt", show(f))
	}
	if r := e.resource("vm/p"); r.State != "FAILED" {
		t.Fatalf("resource after a permanent failure = %+v; want FAILED", r)
	}
}

func testJobCooldown(t *testing.T, h JobHarness) {
	// A store whose clock the suite moves (Advance) moves it past the cooldown itself: its
	// cooldown is long enough that the real time a loaded machine takes between two steps
	// (the offset clock runs on with it) cannot end it early (with 2 s, a run at load 17 claimed
	// the next job after "half" the cooldown). Without Advance, the test waits it out for real.
	cooldown := 2 * time.Second
	if h.Advance != nil {
		cooldown = time.Minute
	}
	// coolb is cool for the batches below: their claims must not find a job of cool/1 whose
	// cooldown passed meanwhile (on a loaded machine, more than the cooldown goes by).
	e := newJobEnv(t, h, store.Kind{Name: "cool", Cooldown: cooldown}, store.Kind{Name: "coolb", Cooldown: cooldown})
	a := e.sub("cool", "cool/1")
	b := e.sub("cool", "cool/1")
	completing := time.Now()
	done := e.complete(e.claimOne(a.ID, "cool"))
	// Promoted, but not before the cooldown has passed.
	pb := e.get(b.ID)
	if !pb.Head || pb.ScheduledAt.Before(done.FinishedAt.Add(cooldown-clockSlack)) {
		t.Fatalf("next job after a completion with a %s cooldown: %s, previous finished %s; want head, scheduled after the cooldown",
			cooldown, show(pb), done.FinishedAt.Format(time.RFC3339Nano))
	}
	// Another resource is not cooling down.
	other := e.sub("cool", "cool/2")
	e.claimOne(other.ID, "cool")
	var claimed *store.Job
	if e.canAdvance() {
		e.claimNone("cool/1 is cooling down", "cool")
		e.advance(cooldown / 2)
		e.claimNone("half the cooldown has passed", "cool")
		e.advance(cooldown/2 + clockSlack)
		claimed = e.claimOne(b.ID, "cool")
	} else {
		var got []*store.Job
		e.poll("the job after the cooldown becomes claimable", 10*cooldown, func() bool {
			got = e.claim(10, "cool")
			return len(got) > 0
		})
		if len(got) != 1 || got[0].ID != b.ID {
			t.Fatalf("claim after the cooldown = %v; want job %d", ids(got), b.ID)
		}
		// The first claim of the poll goes right after the completion: a store that let b go
		// at once fails here. (A claim that finds nothing is no check on the real clock: a
		// loaded machine can take longer than the cooldown to get from the completion to it.)
		if waited := time.Since(completing); waited < cooldown-clockSlack {
			t.Fatalf("job %d claimed %s after the previous completed, inside the %s cooldown", b.ID, waited, cooldown)
		}
		claimed = got[0]
	}
	// A job submitted to a cooling resource is scheduled after the cooldown too.
	completing = time.Now()
	done = e.complete(claimed)
	c := e.sub("cool", "cool/1")
	if !c.Head || c.ScheduledAt.Before(done.FinishedAt.Add(cooldown-clockSlack)) {
		t.Fatalf("submit during the cooldown: %s, previous finished %s; want scheduled after the cooldown",
			show(c), done.FinishedAt.Format(time.RFC3339Nano))
	}
	if got := e.claim(10, "cool"); len(got) > 0 && time.Since(completing) < cooldown-clockSlack {
		t.Fatalf("ClaimJobs([cool]) = %v %s after the previous completed; want nothing inside the %s cooldown",
			ids(got), time.Since(completing), cooldown)
	}

	// So does the first job of a batch on a cooling resource (a batch without keys, and one
	// with: separate statements in the SQL stores); the next one is queued behind it, and a job
	// on another resource is a head.
	ended := map[int]*store.Job{}
	for i := range 2 {
		ended[i] = e.complete(e.claimOne(e.sub("coolb", fmt.Sprintf("cool/batch%d", i)).ID, "coolb"))
	}
	for i, key := range []string{"", "cool-batch-key"} {
		res := fmt.Sprintf("cool/batch%d", i)
		out := e.submitMany(store.SubmitParams{Kind: "coolb", Resource: res, IdempotencyKey: key},
			store.SubmitParams{Kind: "coolb", Resource: res}, store.SubmitParams{Kind: "coolb", Resource: res + "/other"})
		if j := out[0].Job; !j.Head || j.ScheduledAt.Before(ended[i].FinishedAt.Add(cooldown-clockSlack)) {
			t.Fatalf("batch %d, first job during the cooldown: %s, previous finished %s; want head, scheduled after the cooldown",
				i, show(j), ended[i].FinishedAt.Format(time.RFC3339Nano))
		}
		if j := out[1].Job; j.Head || j.State == store.JobSkipped {
			t.Fatalf("batch %d, second job: %s; want queued behind the first", i, show(j))
		}
		if j := out[2].Job; !j.Head {
			t.Fatalf("batch %d, job on another resource: %s; want a head", i, show(j))
		}
	}
}
