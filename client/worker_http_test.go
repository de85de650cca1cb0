package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
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
	case <-time.After(hangGuard):
		t.Fatalf("the worker did not run the job in %s (hung)", hangGuard)
	}
	stopCtx, cancel := context.WithTimeout(ctx, hangGuard)
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

// A direct claim asking for more than the HTTP API's per-request bound (wire.MaxClaimLimit, 100)
// gets up to the bound instead of an invalid_argument, and a baton.Worker whose concurrency is
// above the bound (so it asks for up to store.MaxClaimLimit) keeps claiming until every job ran:
// the Go client clamps what it asks of the server.
func TestClaimsAboveTheHTTPBoundAreClamped(t *testing.T) {
	b := newJobBackend(t, false)
	ctx := testContext(t)
	st := b.open(t, client.Config{ClaimWait: -1})
	q, err := baton.NewQueue(ctx, b.open(t, client.Config{ClaimWait: time.Second}), &baton.QueueConfig{
		Kinds: []baton.Kind{{Name: "clamp"}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 250
	ps := make([]*store.SubmitParams, jobs)
	for i := range ps {
		ps[i] = &store.SubmitParams{Kind: "clamp", Resource: fmt.Sprintf("r/%d", i)}
	}
	if _, err := st.SubmitMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	got, err := st.ClaimJobs(ctx, &store.ClaimParams{Worker: "direct", Kinds: []string{"clamp"}, Limit: store.MaxClaimLimit, TTL: time.Minute})
	if err != nil || len(got) != wire.MaxClaimLimit {
		t.Fatalf("claim with limit %d: %d jobs, %v; want %d", store.MaxClaimLimit, len(got), err, wire.MaxClaimLimit)
	}
	for _, j := range got {
		if _, err := st.CompleteJob(ctx, &store.CompleteParams{ID: j.ID, Token: j.Token}); err != nil {
			t.Fatal(err)
		}
	}

	var ran atomic.Int64
	done := make(chan struct{})
	w, err := q.NewWorker(baton.WorkerConfig{Concurrency: 300, LeaseTTL: 30 * time.Second,
		Handlers: map[string]baton.Handler{"clamp": func(context.Context, *baton.Job) error { return nil }},
		OnJobEnd: func(_ *baton.Job, s baton.JobState, _ time.Duration) {
			if s == baton.JobSucceeded && ran.Add(1) == jobs-wire.MaxClaimLimit {
				close(done)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the worker ran %d of %d jobs", ran.Load(), jobs-wire.MaxClaimLimit)
	}
	stopCtx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
}
