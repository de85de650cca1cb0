package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Jobs beyond one key (store/jobs_holds.go): a job's attempt holds its resource shared, holds
// extra resources and takes units of limits, granted like a lease that asks the same, and on the
// same lines as leases.

// beyondJobStore is a job store that also grants leases beyond one key (store.Limiter), or the
// test is skipped; a store that refuses jobs beyond one with ErrUnsupported skips too, once
// submitting shows it.
func beyondJobStore(t *testing.T, e *jobEnv) (store.Store, store.Limiter) {
	t.Helper()
	ls := resourceStore(t, e)
	lim, ok := ls.(store.Limiter)
	requireNotApplicable(t, ok && ls.Capabilities().Limits, "the store keeps no limits")
	return ls, lim
}

// submitBeyond submits p, skipping the test if the store refuses jobs beyond one key.
func (e *jobEnv) submitBeyond(p store.SubmitParams) *store.Job {
	e.t.Helper()
	res, err := e.s.SubmitJob(e.ctx, &p)
	if errors.Is(err, store.ErrUnsupported) {
		e.t.Skipf("not applicable: %v", err)
	}
	if err != nil {
		e.t.Fatalf("SubmitJob(%s on %q, mode %q, resources %v, limits %v): %v", p.Kind, p.Resource, p.Mode, p.Resources, p.Limits, err)
	}
	return res.Job
}

// testJobLimitCapacity: 24 jobs on 24 nodes of one zone, half naming the zone's limit on the
// submit and half through their kind's template zone/{args.zone}, claimed by 4 workers while 4
// lockers take units of the same limit as leases: never more than 2 holders of the limit at
// once, tokens increase on the limit in real-time order, and it is not a mutex (2 at once seen).
func testJobLimitCapacity(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "remediate"}, store.Kind{Name: "remediate-zone", Limits: []string{"zone/{args.zone}"}})
	ls, lim := beyondJobStore(t, e)
	const n, jobs, workers, lockers, locksEach = 2, 24, 4, 4, 3
	if _, err := lim.SetLimit(e.ctx, &store.SetLimitParams{Name: "zone/eu-1a", Capacity: n, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		p := store.SubmitParams{Kind: "remediate", Resource: fmt.Sprintf("node/%d", i), Limits: []string{"zone/eu-1a"}}
		if i%2 == 1 {
			p = store.SubmitParams{Kind: "remediate-zone", Resource: fmt.Sprintf("node/%d", i), Args: []byte(`{"zone":"eu-1a"}`)}
		}
		j := e.submitBeyond(p)
		if len(j.Limits) != 1 || j.Limits[0] != "zone/eu-1a" {
			t.Fatalf("job %d on %s takes limits %v; want [zone/eu-1a]", j.ID, j.Resource, j.Limits)
		}
	}
	var hs holdings
	var done atomic.Int64
	const hold = 25 * time.Millisecond // long enough beside a grant for another to be granted meanwhile, under load too
	var wg sync.WaitGroup
	errs := make(chan error, workers+lockers)
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("worker-%d", w)
			for done.Load() < jobs {
				called := time.Now()
				js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: worker, Kinds: []string{"remediate", "remediate-zone"},
					Limit: 2, TTL: time.Minute})
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				start := time.Now()
				if len(js) == 0 {
					time.Sleep(time.Millisecond) // pacing the polls, not synchronisation
					continue
				}
				time.Sleep(hold)
				for _, j := range js {
					x := &holding{keys: []string{j.Resource}, limits: j.Limits, slots: j.Slots, token: j.Token, called: called, start: start, end: time.Now()}
					if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
						errs <- fmt.Errorf("%s: complete %d: %w", worker, j.ID, err)
						return
					}
					hs.add(x)
					done.Add(1)
				}
			}
		})
	}
	for l := range lockers {
		wg.Go(func() {
			for i := range locksEach {
				id := fmt.Sprintf("locker-%d-%d", l, i)
				for {
					called := time.Now()
					lease, err := waitFor(e.ctx, ls, &store.AcquireParams{Key: "lock/" + id, LeaseID: id, Holder: id,
						TTL: time.Minute, Wait: true, Limits: []string{"zone/eu-1a"}})
					if err == nil {
						start := time.Now()
						time.Sleep(hold)
						x := &holding{keys: []string{lease.Key}, limits: lease.Limits, slots: lease.Slots, token: lease.Token, called: called, start: start, end: time.Now()}
						release(t, e.ctx, ls, lease)
						hs.add(x)
						break
					}
					if !errors.Is(err, store.ErrLockHeld) {
						errs <- fmt.Errorf("%s: acquire: %w", id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	most := checkCapacity(t, hs.all, "zone/eu-1a", n)
	checkSlots(t, hs.all, "zone/eu-1a", n)
	checkTokenOrder(t, hs.all)
	if most < 2 {
		t.Fatalf("never 2 holders at once of a limit of %d: the limit is a mutex", n)
	}
	ls2, err := lim.Limits(e.ctx, &store.LimitsParams{Name: "zone/eu-1a", Limit: 10})
	if err != nil || len(ls2) != 1 || ls2[0].InUse != 0 {
		t.Fatalf("after the run: %+v, %v; want nothing in use", ls2, err)
	}
}

// testJobHoldsAsLeases: a job's extra resource and its shared mode exclude and admit leases and
// other jobs as a lease's would, in the one line of each key.
//   - A job on a with extra resource b, claimed: a lease on b is refused, naming the job's
//     worker; a plain job on b is not claimed; both go once the job completes.
//   - A shared job on c, claimed: a shared lease on c is granted beside it, an exclusive one is
//     refused.
//   - An exclusive lease on d held: a shared job on d is not claimed until it is released.
//   - A job waits for its extra resource at its submit time: a lock request that arrives later
//     waits behind it, and is granted only after the job's attempt ends.
func testJobHoldsAsLeases(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "k"})
	ls, _ := beyondJobStore(t, e)
	acquire := func(key, id string, shared bool) (*store.Lease, error) {
		return ls.Acquire(e.ctx, &store.AcquireParams{Key: key, LeaseID: id, Holder: "h-" + id, TTL: time.Minute, Shared: shared})
	}
	mustHeld := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, store.ErrLockHeld) {
			t.Fatalf("%s: %v; want ErrLockHeld", what, err)
		}
	}

	j := e.submitBeyond(store.SubmitParams{Kind: "k", Resource: "a", Resources: []string{"b"}})
	if got := e.get(j.ID); len(got.Resources) != 1 || got.Resources[0] != "b" {
		t.Fatalf("job %d reads back resources %v; want [b]", j.ID, got.Resources)
	}
	plainB := e.sub("k", "b")
	run := e.claimOne(j.ID, "k")
	_, err := acquire("b", "l-b", false)
	mustHeld(err, "lease on b while a job holds it as an extra resource")
	var held *store.LockHeldError
	if errors.As(err, &held) && !strings.Contains(held.Holder, "worker-1") && !strings.Contains(held.Holder, fmt.Sprint(j.ID)) {
		t.Fatalf("the refusal names holder %q; want the job's worker or the job", held.Holder)
	}
	e.claimNone("a job holds b as an extra resource", "k")
	e.complete(run)
	e.claimOne(plainB.ID, "k")

	s := e.submitBeyond(store.SubmitParams{Kind: "k", Resource: "c", Mode: store.ModeShared})
	if !e.get(s.ID).Shared {
		t.Fatalf("job %d reads back exclusive; want shared", s.ID)
	}
	runS := e.claimOne(s.ID, "k")
	shared, err := acquire("c", "l-c-shared", true)
	if err != nil {
		t.Fatalf("shared lease beside a shared job: %v", err)
	}
	if shared.Token <= runS.Token {
		t.Fatalf("shared lease granted after the job's attempt has token %d, not above its %d", shared.Token, runS.Token)
	}
	_, err = acquire("c", "l-c-excl", false)
	mustHeld(err, "exclusive lease beside a shared job")
	release(t, e.ctx, ls, shared)
	e.complete(runS)

	excl, err := acquire("d", "l-d", false)
	if err != nil {
		t.Fatal(err)
	}
	sd := e.submitBeyond(store.SubmitParams{Kind: "k", Resource: "d", Mode: store.ModeShared})
	e.claimNone("an exclusive lease holds d", "k")
	release(t, e.ctx, ls, excl)
	e.complete(e.claimOne(sd.ID, "k"))

	// The place of a waiting job: its submit time.
	first, err := acquire("f", "l-f-1", false)
	if err != nil {
		t.Fatal(err)
	}
	w := e.submitBeyond(store.SubmitParams{Kind: "k", Resource: "g", Resources: []string{"f"}})
	e.claimNone("a lease holds f", "k") // the job takes its place in f's line
	_, err = waitOnce(e.ctx, ls, "f", "l-f-2", time.Minute, false)
	mustHeld(err, "a lock request on f after the job's submit")
	if errors.As(err, &held) && held.Ahead < 1 {
		t.Fatalf("a lock request on f after the job's submit has %d ahead; want the job", held.Ahead)
	}
	release(t, e.ctx, ls, first)
	_, err = waitOnce(e.ctx, ls, "f", "l-f-2", time.Minute, false)
	mustHeld(err, "the later lock request once f is free, before the job's claim")
	runW := e.claimOne(w.ID, "k")
	e.complete(runW)
	later, err := waitOnce(e.ctx, ls, "f", "l-f-2", time.Minute, false)
	if err != nil {
		t.Fatalf("the later lock request after the job: %v", err)
	}
	if later.Token <= runW.Token {
		t.Fatalf("lease after the job has token %d, not above the job's %d", later.Token, runW.Token)
	}
	release(t, e.ctx, ls, later)

	// A waiting job that is cancelled leaves its lines at once: the lock request behind it is
	// granted when the key frees, not when the job's tickets lapse.
	holdH, err := acquire("h", "l-h-1", false)
	if err != nil {
		t.Fatal(err)
	}
	c := e.submitBeyond(store.SubmitParams{Kind: "k", Resource: "i", Resources: []string{"h"}})
	e.claimNone("a lease holds h", "k")
	release(t, e.ctx, ls, holdH)
	e.cancel(c.ID)
	after, err := waitOnce(e.ctx, ls, "h", "l-h-2", time.Minute, false)
	if err != nil {
		t.Fatalf("a lock request on h after the job waiting for it was cancelled: %v", err)
	}
	release(t, e.ctx, ls, after)
}

// testJobBeyondBadInput: an unknown limit, too many extra resources, a resource named twice, a
// bad mode and a template whose argument is missing are refused naming the field, and write
// nothing.
func testJobBeyondBadInput(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "k"}, store.Kind{Name: "kz", Limits: []string{"zone/{args.zone}"}})
	beyondJobStore(t, e)
	many := make([]string, store.MaxResources+1)
	for i := range many {
		many[i] = fmt.Sprintf("extra/%d", i)
	}
	for _, c := range []struct {
		p     store.SubmitParams
		field string
	}{
		{store.SubmitParams{Kind: "k", Resource: "bad/1", Limits: []string{"no-such-limit"}}, "limits"},
		{store.SubmitParams{Kind: "k", Resource: "bad/2", Resources: many}, "resources"},
		{store.SubmitParams{Kind: "k", Resource: "bad/3", Resources: []string{"x", "x"}}, "resources"},
		{store.SubmitParams{Kind: "k", Resource: "bad/4", Resources: []string{"bad/4"}}, "resources"},
		{store.SubmitParams{Kind: "k", Resource: "bad/5", Mode: "sometimes"}, "mode"},
		{store.SubmitParams{Kind: "kz", Resource: "bad/6", Args: []byte(`{"region":"eu"}`)}, "args.zone"},
	} {
		_, err := e.s.SubmitJob(e.ctx, &c.p)
		if errors.Is(err, store.ErrUnsupported) {
			t.Skipf("not applicable: %v", err)
		}
		var bad *store.InvalidArgumentError
		if !errors.As(err, &bad) || bad.Field != c.field {
			t.Fatalf("SubmitJob(%+v): %v; want an invalid argument naming %q", c.p, err, c.field)
		}
		if js := e.listAll(store.JobListParams{Resource: c.p.Resource, Limit: 10}); len(js) != 0 {
			t.Fatalf("a refused submit on %s wrote %d jobs", c.p.Resource, len(js))
		}
	}
	if err := e.s.RegisterKinds(e.ctx, []store.Kind{{Name: "bad", Limits: []string{"zone/{zone}"}}}); err == nil {
		t.Fatal("RegisterKinds accepted the limit template zone/{zone}; want an invalid argument naming limits")
	}
}
