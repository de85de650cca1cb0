package baton_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// The reference scenario: cluster lifecycle kinds with state guards.
var (
	kindDestroy = baton.Kind{Name: "destroy", FromStates: []string{"READY", "FAILED"},
		RunningState: "DESTROYING", SuccessState: "DESTROYED", FailureState: "FAILED"}
	kindCreate = baton.Kind{Name: "create", FromStates: []string{"PENDING", "DESTROYED"},
		RunningState: "CREATING", SuccessState: "READY", FailureState: "FAILED"}
)

// Create-during-destroy: a CREATE submitted while a DESTROY runs waits (queue policy) and starts
// only after the DESTROY ended, from the state DESTROY left; under the reject policy it is
// refused, nothing written; and a guard refuses CREATE on a READY cluster.
func TestCreateDuringDestroy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := testCtx(t)
		q := newQueue(t, b.open(t), kindDestroy, kindCreate)
		if _, err := q.SetResourceState(ctx, baton.SetResourceStateParams{Key: "cluster/1", State: "READY"}); err != nil {
			t.Fatal(err)
		}
		destroyRunning, releaseDestroy := make(chan struct{}), make(chan struct{})
		createStarted := make(chan string, 2)
		destroyAtCreate := make(chan baton.JobState, 2)
		var destroyID atomic.Int64
		ends, onEnd := endedChan(8)
		w, err := q.NewWorker(baton.WorkerConfig{Concurrency: 4, OnJobEnd: onEnd, Handlers: map[string]baton.Handler{
			"destroy": func(ctx context.Context, j *baton.Job) error {
				close(destroyRunning)
				<-releaseDestroy
				return nil
			},
			"create": func(ctx context.Context, j *baton.Job) error {
				r, err := q.Resource(ctx, j.Resource)
				if err != nil {
					return err
				}
				d, err := q.Get(ctx, destroyID.Load())
				if err != nil {
					return err
				}
				createStarted <- r.State
				destroyAtCreate <- d.State
				return nil
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		destroy := submit(t, q, baton.SubmitParams{Kind: "destroy", Resource: "cluster/1"})
		destroyID.Store(destroy.ID)
		recv(t, destroyRunning)
		if r, _ := q.Resource(ctx, "cluster/1"); r.State != "DESTROYING" || r.RunningJob != destroy.ID {
			t.Fatalf("during DESTROY the resource is %+v; want DESTROYING, running job %d", r, destroy.ID)
		}
		// reject: refused at once, nothing written.
		_, err = q.Submit(ctx, baton.SubmitParams{Kind: "create", Resource: "cluster/1", Policy: baton.PolicyReject})
		var busy *baton.ResourceBusyError
		if !errors.As(err, &busy) || busy.HeadJob != destroy.ID {
			t.Fatalf("CREATE with reject during DESTROY: %v; want ResourceBusyError naming job %d", err, destroy.ID)
		}
		if page, err := q.ListJobs(ctx, baton.JobListParams{Kind: "create"}); err != nil || len(page.Jobs) != 0 {
			t.Fatalf("a rejected CREATE was written: %+v, %v", page, err)
		}
		// queue: waits; it does not start while DESTROY runs.
		create := submit(t, q, baton.SubmitParams{Kind: "create", Resource: "cluster/1"})
		if create.Head || create.State != baton.JobAvailable {
			t.Fatalf("queued CREATE: %+v; want available, behind DESTROY", create)
		}
		select {
		case st := <-createStarted:
			t.Fatalf("CREATE started (resource %s) while DESTROY was running", st)
		default:
		}
		close(releaseDestroy)
		// CREATE starts only once DESTROY's end is in the store. (OnJobEnd callbacks run on
		// each job's own worker slot, so their order is not the order of the ends.)
		if st := recv(t, createStarted); st != "CREATING" {
			t.Fatalf("CREATE started with the resource %s; want CREATING (from DESTROYED)", st)
		}
		if st := recv(t, destroyAtCreate); st != baton.JobSucceeded {
			t.Fatalf("when CREATE started, DESTROY was %s; want succeeded", st)
		}
		ended := map[int64]baton.JobState{}
		for range 2 {
			e := waitEnded(t, ends)
			ended[e.job.ID] = e.outcome
		}
		if ended[destroy.ID] != baton.JobSucceeded || ended[create.ID] != baton.JobSucceeded {
			t.Fatalf("ends: %v; want DESTROY (job %d) and CREATE (job %d) succeeded", ended, destroy.ID, create.ID)
		}
		if r, _ := q.Resource(ctx, "cluster/1"); r.State != "READY" {
			t.Fatalf("after CREATE the resource is %s; want READY", r.State)
		}
		// The guard: CREATE on a READY cluster is not run; it ends invalid_resource_state.
		again := submit(t, q, baton.SubmitParams{Kind: "create", Resource: "cluster/1"})
		got := waitDiscarded(t, q, again.ID)
		if len(got.Errors) != 1 || got.Errors[0].Code != "invalid_resource_state" || got.Attempt != 0 {
			t.Fatalf("CREATE on READY: %+v; want discarded with invalid_resource_state, never attempted", got)
		}
		select {
		case st := <-createStarted:
			t.Fatalf("the guarded CREATE ran (resource %s)", st)
		default:
		}
		if r, _ := q.Resource(ctx, "cluster/1"); r.State != "READY" {
			t.Fatalf("a refused CREATE changed the resource to %s", r.State)
		}
	})
}

// waitDiscarded waits for a job to be discarded: the guard refuses it inside a claim, which
// reports nothing to the handler, so the job's state is the only signal.
func waitDiscarded(t *testing.T, q *baton.Queue, id int64) *baton.Job {
	t.Helper()
	wake, cancel := q.Store().SubscribeJobs("create")
	defer cancel()
	for {
		j := getJob(t, q, id)
		if j.State == baton.JobDiscarded {
			return j
		}
		select {
		case <-wake:
		case <-testCtx(t).Done():
			t.Fatalf("job %d not discarded: %+v", id, j)
		case <-afterPoll():
		}
	}
}

// afterPoll is the fallback re-check of a state no event announces.
func afterPoll() <-chan time.Time { return time.After(20 * time.Millisecond) }
