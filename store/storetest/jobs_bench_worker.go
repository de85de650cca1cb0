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
// workers and a no-op handler for kind, run until n jobs have succeeded.
func DrainWorker(q *baton.Queue, kind string) func(ctx context.Context, workers, n int) error {
	return func(ctx context.Context, workers, n int) error {
		var done atomic.Int64
		all := make(chan struct{})
		var failed atomic.Value
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency: workers,
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
			return err
		}
		runCtx, stop := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- w.Run(runCtx) }()
		select {
		case <-all:
		case err := <-errc:
			stop()
			return fmt.Errorf("worker stopped early: %v", err)
		}
		stop()
		if err := <-errc; err != nil {
			return err
		}
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
		return nil
	}
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
