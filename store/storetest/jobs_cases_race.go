package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

// testJobSubmitRacesCompletion: jobs submitted to a resource while its running job completes
// (through CompleteMany when the store batches, the worker's path) are never stranded. A submit
// that still sees the running job queues behind it without becoming the head; the completion
// must then see that job and promote it. If a completion decided the successor without holding
// the resource as submits do, a job could commit behind a head that is gone: unfinished, never
// the head, never claimable. Each round submits while the resource's job completes, then claims
// until nothing is unfinished. A store that batches is run both ways: its single CompleteJob
// (the HTTP API's path) has a statement of its own.
func testJobSubmitRacesCompletion(t *testing.T, h JobHarness) {
	if _, batched := h.NewJobStore(t).(store.ManyCompleter); batched {
		t.Run("CompleteMany", func(t *testing.T) { submitRacesCompletion(t, h, true) })
		t.Run("CompleteJob", func(t *testing.T) { submitRacesCompletion(t, h, false) })
		return
	}
	submitRacesCompletion(t, h, false)
}

func submitRacesCompletion(t *testing.T, h JobHarness, batch bool) {
	e := newJobEnv(t, h, store.Kind{Name: "race"})
	const resources, rounds = 4, 40
	mc, _ := e.s.(store.ManyCompleter)
	complete := func(js []*store.Job) error {
		if batch {
			ps := make([]*store.CompleteParams, len(js))
			for i, j := range js {
				ps[i] = &store.CompleteParams{ID: j.ID, Token: j.Token}
			}
			_, err := mc.CompleteMany(e.ctx, ps)
			return err
		}
		for _, j := range js {
			if _, err := e.s.CompleteJob(e.ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
				return err
			}
		}
		return nil
	}
	for r := range resources {
		e.sub("race", fmt.Sprintf("race/%d", r))
	}
	submitted := resources
	for round := range rounds {
		running := e.claimTTL(time.Minute, resources, "race")
		if len(running) != resources {
			t.Fatalf("round %d: claimed %d jobs; want one per resource (%d): a job was stranded or lost",
				round, len(running), resources)
		}
		var wg sync.WaitGroup
		errs := make(chan error, resources+1)
		start := make(chan struct{})
		for r := range resources {
			wg.Go(func() {
				<-start
				_, err := e.s.SubmitJob(e.ctx, &store.SubmitParams{Kind: "race", Resource: fmt.Sprintf("race/%d", r)})
				errs <- err
			})
		}
		wg.Go(func() {
			<-start
			errs <- complete(running)
		})
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		submitted += resources
	}
	// Every job submitted ran or runs now: the last round's are claimable, one per resource.
	left := e.claimTTL(time.Minute, resources, "race")
	if err := complete(left); err != nil {
		t.Fatal(err)
	}
	if len(left) != resources {
		t.Fatalf("after %d rounds: %d jobs claimable at the end; want %d (one per resource)", rounds, len(left), resources)
	}
	for _, st := range []store.JobState{store.JobAvailable, store.JobScheduled, store.JobRetryable, store.JobRunning} {
		if js := e.listAll(store.JobListParams{Kind: "race", State: st}); len(js) != 0 {
			t.Fatalf("%d of %d jobs left %s: %s", len(js), submitted, st, show(js[0]))
		}
	}
}

// testJobsHaveTheirResources: every job a submit records, queued, head or skipped, single or in
// a batch, has its resource's row, with the job counted. Stores may rely on the submit paths for
// this rather than on a foreign key (PostgreSQL does, for bulk submit speed).
func testJobsHaveTheirResources(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, store.Kind{Name: "hr"}, store.Kind{Name: "hs", Policy: store.PolicySkip})
	var jobs []*store.Job
	jobs = append(jobs, e.sub("hr", "hr/single"), e.sub("hr", "hr/single"), e.sub("hs", "hr/single"))
	ps := make([]*store.SubmitParams, 0, 30)
	for i := range 30 {
		kind := "hr"
		if i%3 == 0 {
			kind = "hs"
		}
		ps = append(ps, &store.SubmitParams{Kind: kind, Resource: fmt.Sprintf("hr/batch/%d", i%7)})
	}
	out, err := e.s.SubmitMany(e.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out {
		jobs = append(jobs, r.Job)
	}
	unfinished := map[string]int64{}
	for _, j := range jobs {
		if j.State != store.JobSkipped {
			unfinished[j.Resource]++
		}
	}
	for _, j := range jobs {
		if r := e.resource(j.Resource); r.Key != j.Resource || r.Unfinished != unfinished[j.Resource] {
			t.Fatalf("resource of job %s = %+v; want its row, with %d unfinished jobs", show(j), r, unfinished[j.Resource])
		}
	}
}
