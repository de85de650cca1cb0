package baton_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// A worker starts jobs on wake-ups, not on its poll: with a poll interval of an hour, a job
// submitted while its only slot is busy starts once that slot frees (the submit's wake-up came
// while the worker could not claim), and a job submitted once both have ended starts too.
func TestWorkerStartsJobsWithoutPolling(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t), baton.Kind{Name: "k"})
		started := make(chan string, 3)
		release := make(chan struct{})
		endedCh, onEnd := endedChan(3)
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency:  1,
			PollInterval: time.Hour,
			Logger:       quietLogger(),
			OnJobEnd:     onEnd,
			Handlers: map[string]baton.Handler{"k": func(_ context.Context, j *baton.Job) error {
				started <- j.Resource
				if j.Resource == "busy" {
					<-release
				}
				return nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)

		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "busy"})
		if r := recv(t, started); r != "busy" {
			t.Fatalf("started %s first", r)
		}
		// The only slot is taken: this submit's wake-up finds the worker unable to claim.
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "queued"})
		close(release)
		if r := recv(t, started); r != "queued" {
			t.Fatalf("started %s after the slot freed", r)
		}
		for range 2 {
			if e := waitEnded(t, endedCh); e.outcome != baton.JobSucceeded {
				t.Fatalf("job %d ended %q", e.job.ID, e.outcome)
			}
		}
		// Both jobs have ended: the worker waits for news (or for the last report's slot).
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "idle"})
		if r := recv(t, started); r != "idle" {
			t.Fatalf("started %s on the idle worker", r)
		}
	})
}
