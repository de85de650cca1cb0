package baton_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Jobs on one resource run one at a time, in submission order, with strictly increasing tokens;
// jobs on different resources run in parallel; failed attempts are retried in place (the job
// stays its resource's head) and every failure is recorded.
func TestWorkerFIFOPerResource(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const resources, perResource = 20, 10
		q := newQueue(t, b.open(t), baton.Kind{Name: "step", MaxAttempts: 10})
		for i := range perResource {
			for r := range resources {
				submit(t, q, baton.SubmitParams{Kind: "step", Resource: fmt.Sprintf("res/%02d", r), Args: fmt.Appendf(nil, `{"i":%d}`, i)})
			}
		}
		log := newRunLog(t)
		var failures atomic.Int64
		var succeeded atomic.Int32
		done := make(chan struct{})
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency:  8,
			LeaseTTL:     5 * time.Second,
			PollInterval: 200 * time.Millisecond,
			Backoff:      func(int) time.Duration { return 0 },
			Handlers: map[string]baton.Handler{"step": func(ctx context.Context, job *baton.Job) error {
				end, err := log.start(job)
				if err != nil {
					return err
				}
				defer end()
				time.Sleep(time.Millisecond) // some work, so that overlaps would show
				if job.Attempt < job.MaxAttempts && rand.IntN(4) == 0 {
					failures.Add(1)
					return errors.New("flaky")
				}
				return nil
			}},
			OnJobEnd: func(j *baton.Job, outcome baton.JobState, _ time.Duration) {
				if outcome == baton.JobSucceeded && succeeded.Add(1) == resources*perResource {
					close(done)
				}
			},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runWorker(t, w)
		waitProgress(t, done, func() int64 { return int64(succeeded.Load()) + failures.Load() },
			"attempts succeeded or failed (200 jobs to succeed)")
		stop()

		log.mu.Lock()
		defer log.mu.Unlock()
		runs, tokens := log.runs, log.tokens
		for res, is := range runs {
			// Attempts in start order: each i repeats while it fails, then the next one starts.
			want := 0
			for k, i := range is {
				if i != want && i != want+1 || k == 0 && i != 0 {
					t.Fatalf("%s ran %v: out of order", res, is)
				}
				want = i
			}
			if want != perResource-1 {
				t.Fatalf("%s ran %v", res, is)
			}
			for k := 1; k < len(tokens[res]); k++ {
				if tokens[res][k] <= tokens[res][k-1] {
					t.Fatalf("%s tokens %v do not increase", res, tokens[res])
				}
			}
		}
		jobs := listAll(t, q)
		var retried int64
		for _, j := range jobs {
			if j.State != baton.JobSucceeded || len(j.Errors) != j.Attempt-1 {
				t.Fatalf("job %d: %s after %d attempts with %d errors", j.ID, j.State, j.Attempt, len(j.Errors))
			}
			for _, e := range j.Errors {
				if e.Code != store.CodeHandlerError || e.Message != "flaky" {
					t.Fatalf("job %d: error %+v", j.ID, e)
				}
			}
			retried += int64(j.Attempt - 1)
		}
		if len(jobs) != resources*perResource || retried != failures.Load() {
			t.Fatalf("%d jobs, %d retries recorded, %d failures returned", len(jobs), retried, failures.Load())
		}
		if log.maxActive.Load() < 2 {
			t.Errorf("at most %d jobs ran at once: resources did not run in parallel", log.maxActive.Load())
		}
		t.Logf("%d failures retried; up to %d jobs at once", failures.Load(), log.maxActive.Load())
	})
}

func listAll(t *testing.T, q *baton.Queue) []*baton.Job {
	t.Helper()
	var all []*baton.Job
	for after := int64(0); ; {
		page, err := q.ListJobs(testCtx(t), baton.JobListParams{After: after, Limit: store.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Jobs...)
		if page.Next == 0 {
			return all
		}
		after = page.Next
	}
}

// How each ending of a handler is reported: permanent errors, panics, timeouts.
func TestWorkerOutcomes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t),
			baton.Kind{Name: "permanent", MaxAttempts: 5},
			baton.Kind{Name: "panic", MaxAttempts: 1},
			baton.Kind{Name: "slow", MaxAttempts: 1, Timeout: 100 * time.Millisecond},
			baton.Kind{Name: "fail", MaxAttempts: 2})
		causes := make(chan error, 1)
		ch, onEnd := endedChan(8)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: time.Second,
			Backoff:  func(int) time.Duration { return 0 },
			Handlers: map[string]baton.Handler{
				"permanent": func(context.Context, *baton.Job) error {
					return fmt.Errorf("parse: %w", baton.Permanent(errors.New("bad args")))
				},
				"panic": func(context.Context, *baton.Job) error { panic("boom") },
				"slow": func(ctx context.Context, _ *baton.Job) error {
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return ctx.Err()
				},
				"fail": func(context.Context, *baton.Job) error { return errors.New("nope") },
			},
			OnJobEnd: onEnd,
			Logger:   quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		cases := []struct {
			kind     string
			state    baton.JobState
			attempts int
			code     string
			message  string
		}{
			{"permanent", baton.JobDiscarded, 1, store.CodePermanent, "parse: bad args"},
			{"panic", baton.JobDiscarded, 1, store.CodeHandlerError, "panic: boom"},
			{"slow", baton.JobDiscarded, 1, store.CodeTimeout, "context deadline exceeded"},
			{"fail", baton.JobDiscarded, 2, store.CodeHandlerError, "nope"},
		}
		for _, c := range cases {
			j := submit(t, q, baton.SubmitParams{Kind: c.kind, Resource: "r/" + c.kind})
			var e ended
			for e = waitEnded(t, ch); e.outcome != c.state; e = waitEnded(t, ch) {
				if e.job.ID != j.ID || e.outcome != baton.JobRetryable {
					t.Fatalf("%s: ended %s", c.kind, e.outcome)
				}
			}
			got := getJob(t, q, j.ID)
			if got.State != c.state || got.Attempt != c.attempts || len(got.Errors) != c.attempts {
				t.Fatalf("%s: %s after %d attempts, errors %+v", c.kind, got.State, got.Attempt, got.Errors)
			}
			if last := got.Errors[len(got.Errors)-1]; last.Code != c.code || last.Message != c.message {
				t.Fatalf("%s: last error %+v, want %s %q", c.kind, last, c.code, c.message)
			}
		}
		if cause := recv(t, causes); !errors.Is(cause, baton.ErrJobTimeout) {
			t.Fatalf("slow handler's context cause: %v", cause)
		}
	})
}

// Cancelling a running job cancels its handler's context at the next heartbeat; the job ends
// cancelled.
func TestWorkerCancelRunning(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t), baton.Kind{Name: "long"})
		started, causes := make(chan struct{}), make(chan error, 1)
		ch, onEnd := endedChan(1)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: time.Second,
			Handlers: map[string]baton.Handler{"long": func(ctx context.Context, _ *baton.Job) error {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			}},
			OnJobEnd: onEnd,
			Logger:   quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		j := submit(t, q, baton.SubmitParams{Kind: "long", Resource: "r"})
		recv(t, started)
		if c, err := q.Cancel(testCtx(t), j.ID); err != nil || c.State != baton.JobRunning || !c.CancelRequested {
			t.Fatalf("Cancel of a running job: %+v, %v", c, err)
		}
		if cause := recv(t, causes); !errors.Is(cause, baton.ErrJobCancelled) {
			t.Fatalf("cause %v, want ErrJobCancelled", cause)
		}
		if e := waitEnded(t, ch); e.outcome != baton.JobCancelled {
			t.Fatalf("outcome %s", e.outcome)
		}
		if got := getJob(t, q, j.ID); got.State != baton.JobCancelled {
			t.Fatalf("job %s", got.State)
		}
	})
}

// leaseLossStore makes every heartbeat fail as the store would for a job lease that was lost (or,
// with hang, hang as a store cut off from the worker would), and counts reports.
type leaseLossStore struct {
	jobStore
	hang      bool
	completes atomic.Int32
	fails     atomic.Int32
}

func (s *leaseLossStore) HeartbeatJob(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if s.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("wrapped: %w", store.ErrNotHeld)
}

func (s *leaseLossStore) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	s.completes.Add(1)
	return s.jobStore.CompleteJob(ctx, p)
}

func (s *leaseLossStore) FailJob(ctx context.Context, p *store.FailParams) (*store.Job, error) {
	s.fails.Add(1)
	return s.jobStore.FailJob(ctx, p)
}

// A heartbeat answered ErrNotHeld cancels the handler with ErrLeaseLost, and the worker reports
// nothing: the attempt belongs to the reaper now.
func TestWorkerLeaseLost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := &leaseLossStore{jobStore: b.open(t)}
		q := newQueue(t, st, baton.Kind{Name: "k"})
		causes := make(chan error, 1)
		ch, onEnd := endedChan(1)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: time.Second,
			Handlers: map[string]baton.Handler{"k": func(ctx context.Context, _ *baton.Job) error {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil // even a success is not reported after the lease is lost
			}},
			OnJobEnd: onEnd,
			Logger:   quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
		if cause := recv(t, causes); !errors.Is(cause, baton.ErrLeaseLost) || !errors.Is(cause, baton.ErrNotHeld) {
			t.Fatalf("cause %v, want ErrLeaseLost and ErrNotHeld", cause)
		}
		if e := waitEnded(t, ch); e.outcome != "" {
			t.Fatalf("outcome %q, want none", e.outcome)
		}
		if st.completes.Load() != 0 || st.fails.Load() != 0 {
			t.Fatalf("%d completes, %d fails sent after the lease was lost", st.completes.Load(), st.fails.Load())
		}
		if got := getJob(t, q, j.ID); got.State != baton.JobRunning {
			t.Fatalf("job %s, want still running (left to the reaper)", got.State)
		}
	})
}

// cutOffWorker runs a worker whose heartbeats hang (cut off from the store), with the lease
// settings of cfg, submits a job, checks that the handler was cancelled for the lease, and
// returns how long after the submit that came, with the job as the store has it and the worker.
func cutOffWorker(t *testing.T, b backend, cfg baton.WorkerConfig) (time.Duration, *baton.Job, *baton.Worker) {
	st := &leaseLossStore{jobStore: b.open(t), hang: true}
	q := newQueue(t, st, baton.Kind{Name: "k"})
	causes := make(chan error, 1)
	cfg.Handlers = map[string]baton.Handler{"k": func(ctx context.Context, job *baton.Job) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}}
	cfg.Logger = quietLogger()
	w, err := q.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	submitted := time.Now()
	j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
	cause := recv(t, causes)
	took := time.Since(submitted)
	if !errors.Is(cause, baton.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
	return took, getJob(t, q, j.ID), w
}

// A worker cut off from the store (heartbeats hang) stops its handler at the local deadline,
// claim start + TTL*(1-drift) - margin, before the store's lease could expire.
func TestWorkerLocalDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		took, got, w := cutOffWorker(t, b, baton.WorkerConfig{LeaseTTL: time.Second, DriftFactor: 0.1, SafetyMargin: 200 * time.Millisecond})
		// The store lease lasts 1s from the claim: the handler must stop 1s*0.9 - 200ms = 700ms
		// after the claim request started. That request may have started a little before the
		// submit (a poll already in flight that sees the job), hence 50ms of slack below 700ms;
		// the bound that matters for safety is the upper one.
		if took < 650*time.Millisecond || took >= time.Second {
			t.Fatalf("handler stopped %s after the submit, want in [650ms, 1s)", took)
		}
		if got.State != baton.JobRunning || got.Worker != w.Name() {
			t.Fatalf("job %s by %q: the store must still see it running", got.State, got.Worker)
		}
	})
}

// With StopGrace, a worker cut off from the store tells its handler to stop StopGrace before the
// local deadline, so that a handler needing that long to stop has stopped by the deadline.
func TestWorkerStopGraceBeforeTheLocalDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		took, _, _ := cutOffWorker(t, b, baton.WorkerConfig{LeaseTTL: 3 * time.Second, DriftFactor: 0.1,
			SafetyMargin: 200 * time.Millisecond, StopGrace: time.Second})
		// The local deadline is 3s*0.9 - 200ms = 2.5s after the claim began; the handler is told
		// to stop a second before it (50ms of slack below for a claim already in flight).
		if took < 1450*time.Millisecond || took >= 2*time.Second {
			t.Fatalf("handler told to stop %s after the submit, want in [1.45s, 2s)", took)
		}
	})
}

// Graceful shutdown: Run's context ending lets a running job finish, with its context intact.
func TestWorkerGracefulShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t), baton.Kind{Name: "k"})
		started, release, ctxErr := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		w, err := q.NewWorker(baton.WorkerConfig{
			// Heartbeats every second; long enough that one late under load still lands in time.
			LeaseTTL: 3 * time.Second,
			Handlers: map[string]baton.Handler{"k": func(ctx context.Context, _ *baton.Job) error {
				close(started)
				<-release
				ctxErr <- ctx.Err()
				return nil
			}},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
		recv(t, started)
		cancel()
		// Heartbeats go on while the job finishes: see two of them extend the lease before
		// releasing it.
		for seen, last := 0, getJob(t, q, j.ID).LeaseExpiresAt; seen < 2; {
			select {
			case err := <-done:
				t.Fatalf("Run returned %v with a job still running", err)
			case <-time.After(50 * time.Millisecond): // polling the store: a heartbeat sends no signal
			}
			if got := getJob(t, q, j.ID).LeaseExpiresAt; got.After(last) {
				seen, last = seen+1, got
			}
		}
		close(release)
		if err := recv(t, done); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := <-ctxErr; err != nil {
			t.Fatalf("handler's context ended during a graceful shutdown: %v", err)
		}
		if got := getJob(t, q, j.ID); got.State != baton.JobSucceeded {
			t.Fatalf("job %s", got.State)
		}
		if err := w.Run(context.Background()); err == nil {
			t.Fatal("a second Run started")
		}
	})
}

// Forced shutdown: after ShutdownTimeout the handler is cancelled with ErrWorkerShutdown and the
// job is retryable at once with code worker_shutdown.
func TestWorkerForcedShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t), baton.Kind{Name: "k"})
		started, causes := make(chan struct{}), make(chan error, 1)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL:        time.Second,
			ShutdownTimeout: 200 * time.Millisecond,
			Handlers: map[string]baton.Handler{"k": func(ctx context.Context, _ *baton.Job) error {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			}},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		j := submit(t, q, baton.SubmitParams{Kind: "k", Resource: "r"})
		recv(t, started)
		stopAt := time.Now()
		cancel()
		if err := recv(t, done); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(stopAt); took < 200*time.Millisecond {
			t.Fatalf("Run returned %s after its context ended, before ShutdownTimeout", took)
		}
		if cause := recv(t, causes); !errors.Is(cause, baton.ErrWorkerShutdown) {
			t.Fatalf("cause %v", cause)
		}
		got := getJob(t, q, j.ID)
		if got.State != baton.JobRetryable || len(got.Errors) != 1 || got.Errors[0].Code != baton.CodeWorkerShutdown {
			t.Fatalf("job %s, errors %+v", got.State, got.Errors)
		}
	})
}

// Start and Stop; Stop with an ended context cancels running jobs at once.
func TestWorkerStartStop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		q := newQueue(t, b.open(t), baton.Kind{Name: "k"})
		started, causes := make(chan struct{}, 1), make(chan error, 1)
		ch, onEnd := endedChan(2)
		w, err := q.NewWorker(baton.WorkerConfig{
			LeaseTTL: time.Second,
			Handlers: map[string]baton.Handler{"k": func(ctx context.Context, job *baton.Job) error {
				var args struct{ Block bool }
				if err := json.Unmarshal(job.Args, &args); err != nil {
					return err
				}
				if args.Block {
					started <- struct{}{}
					<-ctx.Done()
					causes <- context.Cause(ctx)
					return ctx.Err()
				}
				return nil
			}},
			OnJobEnd: onEnd,
			Logger:   quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Stop(context.Background()) }) // if the test fails half-way
		if err := w.Start(context.Background()); err == nil {
			t.Fatal("second Start succeeded")
		}
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "a"})
		if e := waitEnded(t, ch); e.outcome != baton.JobSucceeded {
			t.Fatalf("outcome %s", e.outcome)
		}
		submit(t, q, baton.SubmitParams{Kind: "k", Resource: "b", Args: []byte(`{"block":true}`)})
		recv(t, started)
		expired, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Stop(expired); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop: %v", err)
		}
		if cause := recv(t, causes); !errors.Is(cause, baton.ErrWorkerShutdown) {
			t.Fatalf("cause %v", cause)
		}
		if e := waitEnded(t, ch); e.outcome != baton.JobRetryable {
			t.Fatalf("outcome %s", e.outcome)
		}
	})
}

func TestWorkerConfigValidation(t *testing.T) {
	q := newQueue(t, openSQLite(t))
	h := map[string]baton.Handler{"k": func(context.Context, *baton.Job) error { return nil }}
	cases := []struct {
		cfg   baton.WorkerConfig
		field string
	}{
		{baton.WorkerConfig{}, "handlers"},
		{baton.WorkerConfig{Handlers: map[string]baton.Handler{"bad kind": h["k"]}}, "handlers"},
		{baton.WorkerConfig{Handlers: map[string]baton.Handler{"k": nil}}, "handlers"},
		{baton.WorkerConfig{Handlers: h, Concurrency: -1}, "concurrency"},
		{baton.WorkerConfig{Handlers: h, Concurrency: baton.MaxConcurrency + 1}, "concurrency"},
		{baton.WorkerConfig{Handlers: h, LeaseTTL: 500 * time.Millisecond}, "lease_ttl"},
		{baton.WorkerConfig{Handlers: h, DriftFactor: 0.5}, "drift_factor"},
		{baton.WorkerConfig{Handlers: h, SafetyMargin: time.Second}, "safety_margin"},
		{baton.WorkerConfig{Handlers: h, PollInterval: time.Millisecond}, "poll_interval"},
		{baton.WorkerConfig{Handlers: h, ShutdownTimeout: -time.Second}, "shutdown_timeout"},
		{baton.WorkerConfig{Handlers: h, Name: strings.Repeat("x", store.MaxHolderLen+1)}, "name"},
		{baton.WorkerConfig{Handlers: h}, ""},
	}
	for _, c := range cases {
		w, err := q.NewWorker(c.cfg)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.field == "" && !strings.Contains(w.Name(), ":"):
			t.Errorf("default name %q", w.Name())
		case c.field != "" && !isInvalid(err, c.field):
			t.Errorf("%+v: %v, want invalid %s", c.cfg, err, c.field)
		}
	}
}

// completeManyStore records how a worker completes jobs on a store.ManyCompleter.
type completeManyStore struct {
	jobStore
	mu      sync.Mutex
	sizes   []int
	singles int
}

func (s *completeManyStore) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ps))
	s.mu.Unlock()
	return s.jobStore.(store.ManyCompleter).CompleteMany(ctx, ps)
}

func (s *completeManyStore) CompleteJob(ctx context.Context, p *store.CompleteParams) (*store.Job, error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return s.jobStore.CompleteJob(ctx, p)
}

// On a store.ManyCompleter, completions go through CompleteMany, those that end while a batch is
// in flight together.
func TestWorkerBatchesCompletions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := &completeManyStore{jobStore: b.open(t)}
		q := newQueue(t, st, baton.Kind{Name: "k"})
		const n = 60
		for i := range n {
			submit(t, q, baton.SubmitParams{Kind: "k", Resource: fmt.Sprintf("r/%d", i)})
		}
		var succeeded atomic.Int32
		done := make(chan struct{})
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency: 16,
			Handlers:    map[string]baton.Handler{"k": func(context.Context, *baton.Job) error { return nil }},
			OnJobEnd: func(_ *baton.Job, outcome baton.JobState, _ time.Duration) {
				if outcome == baton.JobSucceeded && succeeded.Add(1) == n {
					close(done)
				}
			},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runWorker(t, w)
		recv(t, done)
		stop()
		st.mu.Lock()
		defer st.mu.Unlock()
		total, largest := 0, 0
		for _, s := range st.sizes {
			total, largest = total+s, max(largest, s)
		}
		if total != n || st.singles != 0 {
			t.Fatalf("%d completions in batches %v, %d one by one; want %d in batches", total, st.sizes, st.singles, n)
		}
		t.Logf("%d completions in %d batches (largest %d)", total, len(st.sizes), largest)
	})
}

// claimLimitStore records the largest claim a worker sends, by ClaimJobs or with a batch of
// completions.
type claimLimitStore struct {
	jobStore
	largest atomic.Int64
}

func (s *claimLimitStore) note(p *store.ClaimParams) {
	for m := s.largest.Load(); int64(p.Limit) > m && !s.largest.CompareAndSwap(m, int64(p.Limit)); m = s.largest.Load() {
	}
}

func (s *claimLimitStore) ClaimJobs(ctx context.Context, p *store.ClaimParams) ([]*store.Job, error) {
	s.note(p)
	return s.jobStore.ClaimJobs(ctx, p)
}

func (s *claimLimitStore) CompleteMany(ctx context.Context, ps []*store.CompleteParams) ([]*store.Job, error) {
	return s.jobStore.(store.ManyCompleter).CompleteMany(ctx, ps)
}

func (s *claimLimitStore) CompleteManyAndClaim(ctx context.Context, ps []*store.CompleteParams, p *store.ClaimParams) ([]*store.Job, []*store.Job, error) {
	s.note(p)
	return s.jobStore.(store.CompleteClaimer).CompleteManyAndClaim(ctx, ps, p)
}

// A worker of short jobs claims ahead of its free slots (a local queue as deep as its slots),
// and still never runs more handlers at once than Concurrency; each resource's jobs still run
// one at a time, in order.
func TestWorkerLocalQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := &claimLimitStore{jobStore: b.open(t)}
		if _, ok := st.jobStore.(store.CompleteClaimer); !ok {
			t.Skipf("%s: no store.CompleteClaimer, so no local queue (its claims go one round trip each)", b.name)
		}
		q := newQueue(t, st, baton.Kind{Name: "k"})
		const concurrency, resources, perResource = 4, 50, 6
		var ps []baton.SubmitParams
		for i := range perResource {
			for r := range resources {
				ps = append(ps, baton.SubmitParams{Kind: "k", Resource: fmt.Sprintf("r/%d", r), Args: fmt.Appendf(nil, `{"i":%d}`, i)})
			}
		}
		if _, err := q.SubmitMany(testCtx(t), ps); err != nil {
			t.Fatal(err)
		}
		log := newRunLog(t)
		var succeeded atomic.Int32
		done := make(chan struct{})
		w, err := q.NewWorker(baton.WorkerConfig{
			Concurrency: concurrency,
			Handlers: map[string]baton.Handler{"k": func(_ context.Context, job *baton.Job) error {
				end, err := log.start(job)
				if err != nil {
					return err
				}
				defer end()
				runtime.Gosched() // let the others start, so that too many at once would show
				return nil
			}},
			OnJobEnd: func(_ *baton.Job, outcome baton.JobState, _ time.Duration) {
				if outcome == baton.JobSucceeded && succeeded.Add(1) == resources*perResource {
					close(done)
				}
			},
			Logger: quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := runWorker(t, w)
		recv(t, done)
		stop()
		if m := log.maxActive.Load(); m > concurrency {
			t.Fatalf("%d handlers ran at once; Concurrency is %d", m, concurrency)
		}
		if l := st.largest.Load(); l <= concurrency {
			t.Fatalf("the largest claim asked for %d jobs: the worker never claimed beyond its %d slots", l, concurrency)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		for res, is := range log.runs {
			if !slices.Equal(is, []int{0, 1, 2, 3, 4, 5}) {
				t.Fatalf("%s ran %v", res, is)
			}
		}
		t.Logf("largest claim %d jobs; at most %d handlers at once", st.largest.Load(), log.maxActive.Load())
	})
}

// runLog records a worker's attempts from inside its handler: it fails the test when two jobs of
// one resource run at once, and keeps the most handlers seen at once and, per resource, each
// attempt's args.I and token in start order.
type runLog struct {
	t                 *testing.T
	inFlight          sync.Map // resource -> *atomic.Int32
	active, maxActive atomic.Int32
	mu                sync.Mutex
	runs              map[string][]int
	tokens            map[string][]uint64
}

func newRunLog(t *testing.T) *runLog {
	return &runLog{t: t, runs: map[string][]int{}, tokens: map[string][]uint64{}}
}

// start records the start of job's attempt; end records its end.
func (l *runLog) start(job *baton.Job) (end func(), err error) {
	c, _ := l.inFlight.LoadOrStore(job.Resource, new(atomic.Int32))
	running := c.(*atomic.Int32)
	if n := running.Add(1); n != 1 {
		l.t.Errorf("%s: %d jobs running at once", job.Resource, n)
	}
	n := l.active.Add(1)
	for m := l.maxActive.Load(); n > m && !l.maxActive.CompareAndSwap(m, n); m = l.maxActive.Load() {
	}
	end = func() {
		l.active.Add(-1)
		running.Add(-1)
	}
	var args struct{ I int }
	if err := json.Unmarshal(job.Args, &args); err != nil {
		end()
		return nil, baton.Permanent(err)
	}
	l.mu.Lock()
	l.runs[job.Resource] = append(l.runs[job.Resource], args.I)
	l.tokens[job.Resource] = append(l.tokens[job.Resource], job.Token)
	l.mu.Unlock()
	return end, nil
}
