package client_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// A lease granted at the end of a long-poll that waited longer than its TTL is fully usable:
// its local deadline is about a TTL after the grant, not after the start of the request. Before
// the server reported waited_ms, this lease came back already past its deadline.
func TestLeaseAfterALongPollKeepsItsValidity(t *testing.T) {
	b := newBackend(t, backendOptions{})
	ctx := testContext(t)
	holder, err := baton.NewLocker(b.open(t, client.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := holder.TryAcquire(ctx, "k", baton.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := baton.NewLocker(b.open(t, client.Config{}), &baton.Config{PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	type result struct {
		lease *baton.Lease
		err   error
		at    time.Time
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := waiter.Acquire(ctx, "k", baton.WithTTL(ttl), baton.WithKeepalive(false))
		got <- result{l, err, time.Now()}
	}()
	<-b.refused // the long-poll is under way
	// Hold the key past the waiter's TTL: the waiting is the scenario, not synchronisation.
	time.Sleep(ttl + time.Second)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lease.Release(ctx)
	if waited := r.at.Sub(start); waited < ttl+time.Second {
		t.Fatalf("waited only %s", waited)
	}
	if err := r.lease.Err(); err != nil {
		t.Fatalf("lease after a %s wait: %v", r.at.Sub(start), err)
	}
	// The deadline is TTL*(1-drift) - margin after a lower bound of the grant, which is at most
	// the response's arrival: so at most that after r.at. Measured from the request's start it
	// would have passed before the answer came (the wait was longer than the TTL); measured
	// from the grant it is still ahead, by however much of it the answer's way back (slow on
	// a loaded machine) left.
	left := r.lease.Deadline().Sub(r.at)
	if max := ttl*99/100 - 100*time.Millisecond; left > max || left <= 0 {
		t.Fatalf("local deadline %s after the grant arrived; want at most %s, and ahead", left, max)
	}
	t.Logf("local deadline %s after the grant arrived", left.Round(time.Millisecond))
}

// A worker over HTTP whose claim waited in the server longer than the job lease's TTL runs the
// job with a full lease: the server reports how long the claim waited, and the worker measures
// the lease from the start of the claim that found the job.
func TestJobClaimedAfterALongWaitKeepsItsLease(t *testing.T) {
	b := newJobBackend(t, false)
	ctx := testContext(t)
	st := b.open(t, client.Config{ClaimWait: 20 * time.Second})
	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "slow.work"}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	type outcome struct {
		state baton.JobState
	}
	ended := make(chan outcome, 1)
	started := make(chan struct{})
	w, err := q.NewWorker(baton.WorkerConfig{Name: "w", Concurrency: 1, PollInterval: time.Hour, LeaseTTL: ttl,
		Handlers: map[string]baton.Handler{"slow.work": func(ctx context.Context, _ *baton.Job) error {
			close(started)
			// Longer than the time a lease measured from the claim request's start would
			// have left, shorter than one measured from the claim.
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(500 * time.Millisecond):
				return nil
			}
		}},
		OnJobEnd: func(_ *baton.Job, s baton.JobState, _ time.Duration) { ended <- outcome{state: s} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		_ = w.Stop(stopCtx)
	}()
	// Let the worker's claim wait in the server past the TTL, then submit from another client.
	time.Sleep(ttl + time.Second)
	if _, err := b.open(t, client.Config{}).SubmitJob(ctx, &store.SubmitParams{Kind: "slow.work", Resource: "r/1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(hangGuard):
		t.Fatalf("the job did not start in %s (hung)", hangGuard)
	}
	if o := <-ended; o.state != baton.JobSucceeded {
		t.Fatalf("job claimed after a long wait ended %q; want succeeded (the lease must not be lost)", o.state)
	}
}
