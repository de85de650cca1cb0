package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// Shared jobs of one resource (store.ModeShared): the shared jobs at the front of a resource's
// line run together; an exclusive job, plain or with holds, runs alone, after every job submitted
// before it and before every job submitted after it.

// sharedKinds are the kinds of the shared-jobs cases: plan is shared by its kind, apply is a
// plain exclusive job, apply-wide an exclusive job with holds (an extra resource).
var sharedKinds = []store.Kind{{Name: "plan", Mode: store.ModeShared}, {Name: "apply"}, {Name: "apply-wide"}}

// submitMix submits on resource the jobs of pattern in order: 'p' a plan (shared), 'x' an apply
// (plain, exclusive), 'w' an apply-wide (exclusive, with the extra resource extra/<resource>/<i>).
func (e *jobEnv) submitMix(resource, pattern string) []*store.Job {
	e.t.Helper()
	var out []*store.Job
	for i, c := range pattern {
		p := store.SubmitParams{Resource: resource}
		switch c {
		case 'p':
			p.Kind = "plan"
		case 'x':
			p.Kind = "apply"
		case 'w':
			p.Kind, p.Resources = "apply-wide", []string{fmt.Sprintf("extra/%s/%d", resource, i)}
		default:
			e.t.Fatalf("pattern %q: unknown job %q", pattern, c)
		}
		j := e.submitBeyond(p)
		if j.Shared != (c == 'p') {
			e.t.Fatalf("job %d (%s) reads back shared %v", j.ID, p.Kind, j.Shared)
		}
		out = append(out, j)
	}
	return out
}

// testSharedJobsStep walks one resource's line step by step: plan, plan, apply, plan, apply-wide,
// plan, plan.
//   - The two plans at the front are claimed together; the apply behind them and everything
//     behind it are not claimed while either runs.
//   - The apply runs alone once both ended; the plan behind it waits for it, the apply-wide
//     behind that plan waits for the plan; the two plans behind the apply-wide wait for it.
//   - A shared job submitted while shared jobs run and none waits joins them at once.
func testSharedJobsStep(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, sharedKinds...)
	ls, _ := beyondJobStore(t, e)
	all := []string{"plan", "apply", "apply-wide"}
	js := e.submitMix("state/step", "ppxpwpp")
	claimed := func(want ...*store.Job) []*store.Job {
		t.Helper()
		got := e.claim(10, all...)
		var gotIDs, wantIDs []int64
		for _, j := range got {
			gotIDs = append(gotIDs, j.ID)
		}
		for _, j := range want {
			wantIDs = append(wantIDs, j.ID)
		}
		slices.Sort(gotIDs)
		slices.Sort(wantIDs)
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("claimed %v; want %v", gotIDs, wantIDs)
		}
		return got
	}
	front := claimed(js[0], js[1])
	// A shared lock request waits too: the apply, submitted before it, waits for the plans, and
	// a writer is not overtaken by later readers.
	_, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "state/step", LeaseID: "reader", Holder: "reader", TTL: time.Minute, Shared: true})
	if !errors.Is(err, store.ErrLockHeld) {
		t.Fatalf("a shared lock request behind an apply waiting for plans: %v; want refused (ErrLockHeld)", err)
	}
	e.complete(front[0])
	e.claimNone("a shared job still runs, the apply waits for it", all...)
	e.complete(front[1])
	apply := claimed(js[2])
	e.claimNone("the apply runs", all...)
	e.complete(apply[0])
	plan := claimed(js[3])
	e.claimNone("the apply-wide waits for the plan before it", all...)
	e.complete(plan[0])
	wide := claimed(js[4])
	e.claimNone("the plans wait for the apply-wide before them", all...)
	e.complete(wide[0])
	last := claimed(js[5], js[6])
	late := e.submitMix("state/step", "p")
	joined := claimed(late[0])
	for _, j := range append(last, joined...) {
		e.complete(j)
	}
	for _, j := range append(js, late...) {
		e.expectState(j.ID, store.JobSucceeded)
	}
}

// jobRun is one recorded attempt of the shared-jobs run: its job's place in its resource's line,
// whether it is shared, and from when to when it ran, as the worker saw it (start after the
// claim returned, end before the completion was sent: within the true attempt).
type jobRun struct {
	job        *store.Job
	place      int
	shared     bool
	start, end time.Time
}

// testSharedJobsConcurrent: two resources, each with a line of plans (shared), applies (plain,
// exclusive) and apply-wides (exclusive, with holds), claimed by 6 workers that each hold a job
// for a while. From the recorded attempts: every job ran once and succeeded; plans of one
// resource ran together (at least 2 at once); an exclusive job overlapped no other job of its
// resource; every job submitted before an exclusive one ended before it started, and every job
// submitted after it started after it ended (FIFO per resource).
func testSharedJobsConcurrent(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, sharedKinds...)
	beyondJobStore(t, e)
	const pattern, workers, hold = "pppxpppwppppxwpppp", 6, 10 * time.Millisecond
	resources := []string{"state/a", "state/b"}
	place := map[int64]int{}
	var total int64
	for _, r := range resources {
		for i, j := range e.submitMix(r, pattern) {
			place[j.ID] = i
			total++
		}
	}
	var mu sync.Mutex
	var runs []*jobRun
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("worker-%d", w)
			for done.Load() < total && e.ctx.Err() == nil {
				js, err := e.s.ClaimJobs(e.ctx, &store.ClaimParams{Worker: worker, Kinds: []string{"plan", "apply", "apply-wide"},
					Limit: 1, TTL: time.Minute})
				if err != nil && e.ctx.Err() != nil {
					return // the deadline: reported below with how many jobs ran
				}
				if err != nil {
					errs <- fmt.Errorf("%s: claim: %w", worker, err)
					return
				}
				if len(js) == 0 {
					time.Sleep(time.Millisecond) // pacing the polls, not synchronisation
					continue
				}
				j := js[0]
				x := &jobRun{job: j, place: place[j.ID], shared: j.Kind == "plan", start: time.Now()}
				time.Sleep(hold) // the job's work, long enough for others to be claimed meanwhile
				x.end = time.Now()
				if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
					errs <- fmt.Errorf("%s: complete %d: %w", worker, j.ID, err)
					return
				}
				mu.Lock()
				runs = append(runs, x)
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := e.ctx.Err(); err != nil {
		t.Fatalf("%d of %d jobs ran before the test's deadline: %v", done.Load(), total, err)
	}
	checkSharedRuns(t, runs, total)
	for id := range place {
		e.expectState(id, store.JobSucceeded)
	}
}

// checkSharedRuns checks the recorded attempts of testSharedJobsConcurrent (see there).
func checkSharedRuns(t *testing.T, runs []*jobRun, total int64) {
	t.Helper()
	seen := map[int64]bool{}
	byResource := map[string][]*jobRun{}
	for _, x := range runs {
		if seen[x.job.ID] {
			t.Fatalf("job %d ran twice", x.job.ID)
		}
		seen[x.job.ID] = true
		byResource[x.job.Resource] = append(byResource[x.job.Resource], x)
	}
	if int64(len(seen)) != total {
		t.Fatalf("%d jobs ran; want %d", len(seen), total)
	}
	overlap := func(a, b *jobRun) bool { return a.start.Before(b.end) && b.start.Before(a.end) }
	together := 0
	for r, xs := range byResource {
		sort.Slice(xs, func(i, j int) bool { return xs[i].place < xs[j].place })
		for i, a := range xs {
			for j, b := range xs {
				if i == j || !overlap(a, b) {
					continue
				}
				if !a.shared || !b.shared {
					t.Errorf("on %s, job %d (%s, #%d) and job %d (%s, #%d) ran at once; an exclusive job runs alone",
						r, a.job.ID, a.job.Kind, a.place, b.job.ID, b.job.Kind, b.place)
				} else if i < j {
					together++
				}
			}
			if a.shared {
				continue
			}
			for _, b := range xs[:i] {
				if b.end.After(a.start) {
					t.Errorf("on %s, exclusive job %d (#%d) started before job %d (#%d) ended, though submitted after it",
						r, a.job.ID, a.place, b.job.ID, b.place)
				}
			}
			for _, b := range xs[i+1:] {
				if b.start.Before(a.end) {
					t.Errorf("on %s, job %d (#%d) started before exclusive job %d (#%d) ended, though submitted after it",
						r, b.job.ID, b.place, a.job.ID, a.place)
				}
			}
		}
	}
	if together == 0 {
		t.Errorf("no two shared jobs of one resource ran at once: shared jobs ran one at a time")
	}
}
