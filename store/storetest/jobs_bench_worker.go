package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// DrainWorker is Baton's drain through the public API: one baton.Worker with concurrency
// workers and a no-op handler for kind, run until n jobs have succeeded (DrainWorkers over q).
func DrainWorker(q *baton.Queue, kind string) func(ctx context.Context, workers, n int) error {
	return func(ctx context.Context, workers, n int) error {
		_, err := DrainWorkers(ctx, []*baton.Queue{q}, kind, workers, n)
		return err
	}
}

// DrainWorkers runs one baton.Worker per queue, slots split evenly between them, with a no-op
// handler for kind, until n jobs have succeeded in all, then stops them. It returns when they
// have stopped, with the instant the last job ended: a caller that times the drain alone
// leaves out the workers' stop. A job that ends otherwise, a worker that stops early or ctx
// ending first is an error.
func DrainWorkers(ctx context.Context, queues []*baton.Queue, kind string, slots, n int) (drained time.Time, err error) {
	var done atomic.Int64
	all := make(chan struct{})
	var failed atomic.Value
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, len(queues))
	for _, q := range queues {
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency: slots / len(queues),
			Handlers:    map[string]baton.Handler{kind: func(context.Context, *baton.Job) error { return nil }},
			OnJobEnd: func(j *baton.Job, outcome baton.JobState, _ time.Duration) {
				if outcome != baton.JobSucceeded {
					failed.CompareAndSwap(nil, fmt.Errorf("job %d ended %q", j.ID, outcome))
				}
				if done.Add(1) == int64(n) {
					close(all)
				}
			},
		})
		if err != nil {
			return time.Time{}, err
		}
		go func() { errc <- w.Run(runCtx) }()
	}
	select {
	case <-all:
		drained = time.Now()
	case err := <-errc:
		return time.Time{}, fmt.Errorf("a worker stopped early: %v", err)
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%d of %d jobs done: %w", done.Load(), n, ctx.Err())
	}
	stop()
	for range queues {
		if err := <-errc; err != nil {
			return time.Time{}, err
		}
	}
	if err, _ := failed.Load().(error); err != nil {
		return time.Time{}, err
	}
	return drained, nil
}

// BenchJobHandoff measures the handoff between consecutive jobs on one resource: from the
// moment job i's handler returns to the moment job i+1's handler starts, through completion,
// promotion, wake-up and claim. b.N jobs are queued on one resource, then one worker with 8
// slots (all idle but one) runs them. Reports p50 and p99 in ms.
func BenchJobHandoff(b *testing.B, q *baton.Queue, kind string) {
	ctx := context.Background()
	n := max(b.N, 2)
	for range n {
		if _, err := q.Submit(ctx, store.SubmitParams{Kind: kind, Resource: "handoff"}); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lastEnd time.Time
	gaps := make([]time.Duration, 0, n)
	var count atomic.Int64
	all := make(chan struct{})
	w, err := q.NewWorker(baton.WorkerConfig{
		Concurrency: 8,
		Handlers: map[string]baton.Handler{kind: func(context.Context, *baton.Job) error {
			mu.Lock()
			if !lastEnd.IsZero() {
				gaps = append(gaps, time.Since(lastEnd))
			}
			lastEnd = time.Now()
			mu.Unlock()
			return nil
		}},
		OnJobEnd: func(*baton.Job, baton.JobState, time.Duration) {
			if count.Add(1) == int64(n) {
				close(all)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()
	select {
	case <-all:
	case err := <-errc:
		b.Fatalf("worker stopped early: %v", err)
	}
	b.StopTimer()
	stop()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds())/1000, "p99-ms")
	}
}
