package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// Defaults of WorkerConfig.
const (
	DefaultConcurrency     = 10
	MaxConcurrency         = 1000
	DefaultJobLeaseTTL     = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// Handler runs one attempt of a job. Its context is cancelled, with a cause that
// context.Cause reports, when the job's lease is lost (ErrLeaseLost), a cancel is requested
// (ErrJobCancelled), the kind's timeout passes (ErrJobTimeout) or the worker's shutdown timeout
// passes (ErrWorkerShutdown). Returning nil completes the job; an error fails the attempt, to be
// retried after a backoff unless attempts are exhausted or it is Permanent. job.Token is the
// attempt's fencing token: pass it to the resource so that it can refuse a stale attempt.
type Handler func(ctx context.Context, job *Job) error

// WorkerConfig configures a Worker. Zero fields take their defaults.
type WorkerConfig struct {
	// Name is recorded on the jobs this worker runs (Job.Worker). Default: host:pid:random.
	Name string
	// Concurrency is how many jobs run at once (DefaultConcurrency, at most MaxConcurrency).
	Concurrency int
	// Handlers maps each kind this worker runs to its handler; at least one.
	Handlers map[string]Handler
	// LeaseTTL is the TTL of each job's lease (DefaultJobLeaseTTL, 1 s .. 24 h); heartbeats
	// renew it every HeartbeatInterval. A worker cut off from the store stops its handlers (context
	// cause ErrLeaseLost) at claim or heartbeat start + LeaseTTL*(1-DriftFactor) - SafetyMargin,
	// before the store could hand the job to another worker.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often a running job's lease is renewed (default LeaseTTL/3, also
	// the most allowed, so that a failed heartbeat leaves time for retries before the lease
	// expires). A shorter interval also makes a requested cancel reach the handler sooner: the
	// worker learns of it from a heartbeat's answer.
	HeartbeatInterval time.Duration
	// DriftFactor and SafetyMargin shorten the worker's view of a job lease's validity, as in
	// Config (DefaultDriftFactor, DefaultSafetyMargin).
	DriftFactor  float64
	SafetyMargin time.Duration
	// StopGrace is how long a handler needs to stop once told to (a child process's SIGTERM to
	// SIGKILL grace). When heartbeats fail, the handler's context is cancelled (cause
	// ErrLeaseLost) StopGrace before the job lease's local deadline, so that the handler has
	// stopped by the deadline; a heartbeat that succeeds first moves the deadline on. 0 (the
	// default) cancels at the deadline itself; at most LeaseTTL/3, so that heartbeats (every
	// LeaseTTL/3) have time to succeed before it.
	StopGrace time.Duration
	// PollInterval is the fallback poll for claimable jobs, jittered by ±20%
	// (DefaultPollInterval). Workers are normally woken by the store when a job of their kinds
	// becomes claimable.
	PollInterval time.Duration
	// Backoff says how long to wait before retrying a job whose attempt number attempt failed.
	// Default: DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// ShutdownTimeout is how long running jobs may go on after Run's context ends before their
	// contexts are cancelled with ErrWorkerShutdown (DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Logger defaults to the Queue's.
	Logger *slog.Logger
	// OnJobEnd, if set, is called after each attempt with the job as the store returned it and
	// its state (succeeded, retryable, discarded, cancelled), and how long the handler ran.
	// outcome is "" when the worker could not report the attempt: its lease was lost (the reaper
	// ends it) or the store refused or failed the report. It must not block.
	OnJobEnd func(job *Job, outcome JobState, took time.Duration)
}

func (c WorkerConfig) withDefaults(q *Queue) (WorkerConfig, Config, error) {
	if c.Name == "" {
		c.Name = defaultHolderPrefix() + ":" + newID()[:12]
	}
	if err := store.ValidateHolder(c.Name); err != nil {
		return c, Config{}, &InvalidArgumentError{Field: "name", Rule: err.(*InvalidArgumentError).Rule}
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return c, Config{}, &InvalidArgumentError{Field: "concurrency",
			Rule: fmt.Sprintf("must be between 1 and %d (got %d)", MaxConcurrency, c.Concurrency)}
	}
	if len(c.Handlers) == 0 {
		return c, Config{}, &InvalidArgumentError{Field: "handlers", Rule: "must name at least one kind"}
	}
	for kind, h := range c.Handlers {
		if err := store.ValidateKind(kind); err != nil {
			return c, Config{}, &InvalidArgumentError{Field: "handlers", Rule: err.(*InvalidArgumentError).Rule}
		}
		if h == nil {
			return c, Config{}, &InvalidArgumentError{Field: "handlers", Rule: fmt.Sprintf("handler of kind %q must not be nil", kind)}
		}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultJobLeaseTTL
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.ShutdownTimeout < 0 {
		return c, Config{}, &InvalidArgumentError{Field: "shutdown_timeout", Rule: "must not be negative"}
	}
	if c.Logger == nil {
		c.Logger = q.log
	}
	// The job lease follows the lease rules: validate and default like a Locker's Config.
	lc, err := Config{TTL: c.LeaseTTL, DriftFactor: c.DriftFactor, SafetyMargin: c.SafetyMargin,
		PollInterval: c.PollInterval, Logger: c.Logger}.withDefaults()
	if err != nil {
		var inv *InvalidArgumentError
		if errors.As(err, &inv) && inv.Field == "ttl" {
			return c, lc, &InvalidArgumentError{Field: "lease_ttl", Rule: inv.Rule}
		}
		return c, lc, err
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseTTL / 3
	}
	if c.HeartbeatInterval < 0 || c.HeartbeatInterval > c.LeaseTTL/3 {
		return c, lc, &InvalidArgumentError{Field: "heartbeat_interval",
			Rule: fmt.Sprintf("must be positive and at most a third of lease_ttl, %s (got %s)", c.LeaseTTL/3, c.HeartbeatInterval)}
	}
	if err := checkStopGrace(c.StopGrace, c.LeaseTTL, "lease_ttl"); err != nil {
		return c, lc, err
	}
	c.DriftFactor, c.SafetyMargin, c.PollInterval = lc.DriftFactor, lc.SafetyMargin, lc.PollInterval
	return c, lc, nil
}

// Worker claims jobs of its kinds and runs their handlers, each under the job's lease. Make one
// with Queue.NewWorker and run it with Run (or Start and Stop). A Worker runs once.
type Worker struct {
	q     *Queue
	st    store.JobStore
	cfg   WorkerConfig
	lease Config // the job lease's TTL, drift and margin, as a lease Config
	kinds []string
	log   *slog.Logger

	started atomic.Bool
	slots   *slots
	// handlerTime is a moving average of how long handlers take (ns), for the completer.
	handlerTime atomic.Int64
	// completer batches completions when the store can (nil otherwise); set by run.
	completer *completer
	jobsDone  sync.WaitGroup

	// Start and Stop.
	stopMu   sync.Mutex
	stopRun  context.CancelFunc
	hardStop chan struct{} // closed by Stop when its context ends: cancel running jobs now
	hardOnce sync.Once
	runDone  chan struct{}
	runErr   error
}

// NewWorker returns a worker for the kinds of cfg.Handlers.
func (q *Queue) NewWorker(cfg WorkerConfig) (*Worker, error) {
	c, lc, err := cfg.withDefaults(q)
	if err != nil {
		return nil, err
	}
	handlers := make(map[string]Handler, len(c.Handlers))
	kinds := make([]string, 0, len(c.Handlers))
	for k, h := range c.Handlers {
		handlers[k] = h
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	c.Handlers = handlers
	return &Worker{q: q, st: q.st, cfg: c, lease: lc, kinds: kinds, log: c.Logger.With("worker", c.Name),
		slots: newSlots(c.Concurrency), hardStop: make(chan struct{}), runDone: make(chan struct{})}, nil
}

// Name is the worker's name, recorded on the jobs it runs.
func (w *Worker) Name() string { return w.cfg.Name }

// Running is the number of handlers the worker is running now (at most Concurrency); jobs
// claimed into its local queue and waiting for one to return are not counted.
func (w *Worker) Running() int { return w.slots.handlers() }

var errWorkerStarted = errors.New("baton: worker already started")

// Run claims and runs jobs until ctx ends, then shuts down: it stops claiming, lets running jobs
// finish for up to ShutdownTimeout, cancels those still running with ErrWorkerShutdown and waits
// for them. It returns nil after such a shutdown, or the store error (ErrClosed, a rejected
// claim) that stopped it, after the same shutdown.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errWorkerStarted
	}
	return w.run(ctx)
}

func (w *Worker) run(ctx context.Context) error {
	// Running jobs outlive ctx: they end on their own, or at the shutdown deadline.
	jobsCtx, cancelJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelJobs(nil)
	if mc, ok := w.st.(store.ManyCompleter); ok {
		w.completer = newCompleter(mc, w.cfg.LeaseTTL, w.cfg.Concurrency)
		w.completer.w = w
		if cc, ok := mc.(store.CompleteClaimer); ok {
			// Completions also claim jobs for the free slots, in the same round trip, while
			// Run's context lasts.
			w.completer.claimer = &completeClaim{cc: cc, w: w, runCtx: ctx, jobsCtx: jobsCtx}
		}
	}
	err := w.claimLoop(ctx, jobsCtx)
	w.shutdown(cancelJobs)
	if w.completer != nil {
		w.completer.close() // every job has returned: nobody sends to it any more
	}
	w.log.Debug("baton: worker stopped")
	w.runErr = err
	close(w.runDone)
	return err
}

// Start runs the worker in the background until Stop (or until ctx ends, as Run).
func (w *Worker) Start(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errWorkerStarted
	}
	runCtx, cancel := context.WithCancel(ctx)
	w.stopMu.Lock()
	w.stopRun = cancel
	w.stopMu.Unlock()
	go func() { _ = w.run(runCtx) }()
	return nil
}

// Stop shuts a started worker down as Run does when its context ends, and returns Run's error.
// If ctx ends first, running jobs are cancelled at once (ErrWorkerShutdown); Stop still waits for
// them to return, then returns ctx's error.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopMu.Lock()
	stop := w.stopRun
	w.stopMu.Unlock()
	if stop == nil {
		return errors.New("baton: worker not started")
	}
	stop()
	select {
	case <-w.runDone:
		return w.runErr
	default:
	}
	select {
	case <-w.runDone:
		return w.runErr
	case <-ctx.Done():
		w.hardOnce.Do(func() { close(w.hardStop) })
		<-w.runDone
		return ctx.Err()
	}
}

// claimLoop claims as many jobs as there are free slots, one round trip at a time, and between
// claims waits for news: a wake-up from the store, a free slot, or the poll.
func (w *Worker) claimLoop(ctx, jobsCtx context.Context) error {
	waiter := notify.NewWaiter(w.st.SubscribeJobs(w.kinds...))
	defer waiter.Close()
	var state claimState
	for ctx.Err() == nil {
		// Jobs are queued and most slots are busy: let a few more free up (briefly) and claim
		// them in one round trip rather than one job per round trip.
		if w.worthGathering(state.backlog) && waiter.WaitFor(ctx, claimBatchDelay, w.slots.freed) == notify.Cancelled {
			break
		}
		next, wait, err := w.claimFree(ctx, jobsCtx, &state)
		if err != nil {
			return err
		}
		switch next {
		case claimAgain:
		case waitForSlot:
			// Leave wake-ups unread: a store that wakes one subscriber per event (SQLite's
			// in-process hub) then passes them to another worker.
			waiter.WaitFor(ctx, wait, w.slots.freed)
		case waitOut:
			waiter.WaitFor(ctx, wait, nil)
		default:
			waiter.Wait(ctx, wait)
		}
	}
	return nil
}

// claimState is what the claim loop remembers from one claim to the next.
type claimState struct {
	failing bool // the last claim failed: log the recovery
	backlog bool // the last claim filled its limit: more jobs are probably waiting
}

// afterClaim says what the claim loop does after a claim.
type afterClaim int

const (
	waitForNews afterClaim = iota // for a wake-up from the store, or the poll
	claimAgain                    // at once: a full batch, and slots still free
	waitForSlot                   // for a slot to free (or the poll): every slot is taken
	waitOut                       // for the time an overloaded server asked for, whatever comes
)

// claimFree claims jobs for the free slots, if any, and says what to do next and how long to wait
// at most. Only a closed store or a claim the store rejects ends the loop (the error).
func (w *Worker) claimFree(ctx, jobsCtx context.Context, state *claimState) (afterClaim, time.Duration, error) {
	wait := retry.Jitter(w.cfg.PollInterval)
	free := w.slots.free()
	if free <= 0 || w.completerClaims() {
		return waitForSlot, wait, nil
	}
	limit := w.slots.reserve(min(free, store.MaxClaimLimit))
	if limit == 0 {
		return waitForSlot, wait, nil // the completer's claim took the free slots meanwhile
	}
	n, err := w.claim(ctx, jobsCtx, limit)
	switch {
	case err == nil:
		if state.failing {
			w.log.Info("baton: claiming jobs recovered")
		}
		state.failing, state.backlog = false, n == limit
		switch {
		case n == free:
			return waitForSlot, wait, nil
		case n == limit:
			return claimAgain, 0, nil // there may be more right now
		}
		return waitForNews, wait, nil
	case errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument):
		return 0, 0, err
	case ctx.Err() != nil:
		return waitForNews, 0, nil // the loop ends
	}
	if !state.failing {
		w.log.Warn("baton: claiming jobs failed; retrying", "err", err)
	}
	state.failing = true
	if d := retry.After(err); d > 0 {
		// An overloaded server said when to come back (503 with Retry-After): wait that long,
		// whatever wakes the loop meanwhile.
		return waitOut, max(wait, d), nil
	}
	return waitForNews, wait, nil
}

// worthGathering says whether, before claiming, the loop should wait briefly for more slots to
// free: jobs are queued, most slots are busy and only a few are free.
func (w *Worker) worthGathering(backlog bool) bool {
	free := w.slots.free()
	return backlog && w.slots.active.Load() > 0 && free > 0 && free < w.minBatch() && !w.completerClaims()
}

// completerClaims says whether completions are in flight that each claim for the free slots in
// their own round trip, after promoting the successors of the jobs they complete: the claim loop
// leaves the slots to them (a claim now would take them and find no successor yet), and claims
// only once they have all been reported.
func (w *Worker) completerClaims() bool {
	return w.completer != nil && w.completer.claimer != nil && w.completer.pending.Load() > 0
}

// claimBatchDelay bounds how long a busy worker with a backlog waits for more free slots before
// claiming, so that it claims several jobs per round trip (a claim costs about as much for ten
// jobs as for one).
const claimBatchDelay = 2 * time.Millisecond

// minBatch is how many free slots a busy worker with a backlog waits for: a quarter of its slots.
func (w *Worker) minBatch() int { return max(1, w.cfg.Concurrency/4) }

// claim claims up to limit jobs, for as many slots reserved, and starts them. The end of Run's
// context (runCtx) ends only the claim's wait for claimable jobs (a long-poll in the server,
// store.ClaimParams.WaitDone), never the claim: jobs it claimed are held by this worker and are
// run, not left to the reaper, and Run returns without waiting the wait out.
func (w *Worker) claim(runCtx, jobsCtx context.Context, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(jobsCtx, w.lease.validity(w.cfg.LeaseTTL))
	defer cancel()
	start := time.Now()
	p := w.claimParams(limit)
	p.WaitDone = runCtx.Done()
	jobs, err := w.st.ClaimJobs(ctx, p)
	return w.startJobs(jobsCtx, jobs, start, limit), err
}

func (w *Worker) claimParams(limit int) *store.ClaimParams {
	return &store.ClaimParams{Worker: w.cfg.Name, Kinds: w.kinds, Limit: limit, TTL: w.cfg.LeaseTTL}
}

// startJobs starts the jobs a claim for reserved slots returned, each in one of those slots,
// and gives back the slots left over. start is when the claim request began.
func (w *Worker) startJobs(jobsCtx context.Context, jobs []*Job, start time.Time, reserved int) int {
	started := 0
	for _, job := range jobs {
		h := w.cfg.Handlers[job.Kind]
		if h == nil || started == reserved {
			// The store returned a kind we did not ask for, or more jobs than asked: leave the
			// job to its lease's expiry.
			w.log.Error("baton: claimed a job this worker cannot run", "job", job.ID, "kind", job.Kind)
			continue
		}
		started++
		w.slots.use()
		w.jobsDone.Add(1)
		r := w.newJobRun(jobsCtx, job, h, start, w.lease.grantedAfter(start, job.ClaimWaited))
		r.handlerDone = func(ran bool, took time.Duration) {
			if ran {
				w.noteHandlerTime(took)
				w.tuneQueue()
			}
			w.slots.handlerDone(ran)
		}
		go func() {
			defer w.jobsDone.Done()
			r.run()
			w.slots.reported()
		}()
	}
	w.slots.unreserve(reserved - started)
	return started
}

// noteHandlerTime folds one handler's run time into the moving average (weight 1/8; the first
// is taken as it is). Updates racing with each other may lose one another; an average needs no
// more.
func (w *Worker) noteHandlerTime(d time.Duration) {
	old := w.handlerTime.Load()
	if old == 0 {
		w.handlerTime.Store(max(int64(d), 1))
		return
	}
	w.handlerTime.Store(old + (int64(d)-old)/8)
}

// tuneQueue gives the worker a local queue as deep as its slots (slots.queueRoom) while its
// handlers return sooner, on average, than the last round trip that reported a batch of
// completions and claimed the next jobs, and none otherwise. A worker of short jobs then claims
// up to twice its slots in one round trip, and a handler that returns finds its successor in
// hand instead of waiting for a round trip (a claim costs the store about as much for fifty jobs
// as for ten); a job waits in the queue about one handler's run, less than that round trip. A
// worker of long jobs claims only for free slots, so that jobs are not held by a busy worker
// while another has slots free.
func (w *Worker) tuneQueue() {
	room := 0
	if c := w.completer; c != nil && c.claimer != nil {
		if rt, ht := c.lastFlush.Load(), w.handlerTime.Load(); rt > 0 && ht > 0 && ht < rt {
			room = w.cfg.Concurrency
		}
	}
	w.slots.setQueueRoom(room)
}

// shutdown waits for running jobs, up to ShutdownTimeout (or Stop's hard stop), then cancels
// them with ErrWorkerShutdown and waits for them to return.
func (w *Worker) shutdown(cancelJobs context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() {
		w.jobsDone.Wait()
		close(done)
	}()
	if n := w.slots.inHand(); n > 0 {
		w.log.Info("baton: worker shutting down; waiting for running jobs", "running", n, "timeout", w.cfg.ShutdownTimeout)
	}
	timer := time.NewTimer(w.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	case <-w.hardStop:
	}
	w.log.Warn("baton: cancelling running jobs", "running", w.slots.inHand())
	cancelJobs(ErrWorkerShutdown)
	<-done
}
