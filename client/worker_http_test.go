package client_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// A baton.Worker over HTTP waits in the server: a job submitted while its claim waits is run at
// once, though the worker's own poll interval is an hour.
func TestWorkerOverHTTPWaitsInTheServer(t *testing.T) {
	b := newJobBackend(t, false)
	ctx := testContext(t)
	st := b.open(t, client.Config{ClaimWait: 5 * time.Second})
	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "http.work"}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var claims atomic.Int64
	ran := make(chan *baton.Job, 1)
	w, err := q.NewWorker(baton.WorkerConfig{Name: "http-worker", PollInterval: time.Hour, LeaseTTL: 30 * time.Second,
		Handlers: map[string]baton.Handler{"http.work": func(_ context.Context, j *baton.Job) error {
			ran <- j
			return nil
		}},
		OnJobEnd: func(*baton.Job, baton.JobState, time.Duration) { claims.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Submit from another client, so that no local wake-up can help the worker.
	other := b.open(t, client.Config{})
	res, err := other.SubmitJob(ctx, &store.SubmitParams{Kind: "http.work", Resource: "r/1", IdempotencyKey: "once"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-ran:
		if j.ID != res.Job.ID || j.Token == 0 || j.Worker != "http-worker" {
			t.Fatalf("ran %+v; want job %d", j, res.Job.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not run the job within 30s")
	}
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	j, err := st.GetJob(ctx, res.Job.ID)
	if err != nil || j.State != store.JobSucceeded {
		t.Fatalf("job after the worker: %+v, %v; want succeeded", j, err)
	}
	again, err := st.SubmitJob(ctx, &store.SubmitParams{Kind: "http.work", Resource: "r/1", IdempotencyKey: "once"})
	if err != nil || !again.Existing || again.Job.ID != res.Job.ID {
		t.Fatalf("second submit with the key = %+v, %v; want the same job, Existing", again, err)
	}
}
