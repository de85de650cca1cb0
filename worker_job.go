package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// jobRun is one claimed attempt: the handler's goroutine, and the job lease kept alive by a
// holderClock, as a Lease is. The lease is lost, and the handler's context cancelled with
// ErrLeaseLost, when a heartbeat says ErrNotHeld or when no heartbeat succeeded before the local
// deadline; with StopGrace, the handler is told to stop that long before the deadline.
type jobRun struct {
	w       *Worker
	job     *Job
	handler Handler
	log     *slog.Logger
	// handlerDone is called once the handler has returned (ran: it held a run token; took: how
	// long it ran), or once the job gave up waiting for a token, before the attempt is reported:
	// the slot is free for another job while the report (often batched) is in flight.
	handlerDone func(ran bool, took time.Duration)

	// clock is the job lease's: its ctx is cancelled when the lease is lost (cause
	// wrapping ErrLeaseLost), its stopCtx StopGrace before that.
	clock holderClock
	// hctx is the handler's context: cancelled when the handler must stop (the lease's stopCtx),
	// by a cancel request, or at shutdown.
	hctx    context.Context
	hcancel context.CancelCauseFunc

	// reporting is set while the attempt is reported: a heartbeat that finds the attempt ended
	// then is seeing the report's own effect, and the report learns of a real loss by itself.
	reporting atomic.Bool

	// span is the attempt's: a child of the claim span, itself a child of the submitter's
	// span (Job.TraceParent). The handler's context carries it.
	span trace.Span
}

// startSpan records the claim (from claimStart, when the claim request began, to now) and starts
// the attempt span, both in the trace of the job's submitter, and puts the attempt span in the
// handler's context.
func (r *jobRun) startSpan(claimStart time.Time) {
	ctx := jobSpanContext(context.Background(), r.job)
	ctx, claim := tracer.Start(ctx, "baton.claim", trace.WithTimestamp(claimStart), trace.WithSpanKind(trace.SpanKindConsumer))
	if claim.IsRecording() {
		claim.SetAttributes(attrJobID.Int64(r.job.ID), attrJobKind.String(r.job.Kind), attrWorker.String(r.w.cfg.Name))
	}
	claim.End()
	_, r.span = tracer.Start(ctx, "baton.job.attempt")
	if r.span.IsRecording() {
		r.span.SetAttributes(attrJobID.Int64(r.job.ID), attrJobKind.String(r.job.Kind), attrResource.String(r.job.Resource),
			attrAttempt.Int(r.job.Attempt), attrToken.Int64(int64(r.job.Token)), attrWorker.String(r.w.cfg.Name))
	}
	r.hctx = trace.ContextWithSpan(r.hctx, r.span)
}

// endSpan ends the attempt span with the attempt's outcome.
func (r *jobRun) endSpan(outcome JobState, err error, lost error) {
	if r.span == nil {
		return
	}
	if r.span.IsRecording() && outcome != "" {
		r.span.SetAttributes(attrJobState.String(string(outcome)))
	}
	if err == nil {
		err = lost
	}
	endSpan(r.span, err)
}

// newJobRun arms the job lease's local deadline from the start of the claim request and its
// first heartbeat.
// requested is when the claim request began; claimStart, a lower bound of the grant time.
func (w *Worker) newJobRun(jobsCtx context.Context, job *Job, h Handler, requested, claimStart time.Time) *jobRun {
	r := &jobRun{w: w, job: job, handler: h,
		log: w.log.With("job", job.ID, "kind", job.Kind, "resource", job.Resource, "attempt", job.Attempt)}
	r.hctx, r.hcancel = context.WithCancelCause(jobsCtx)
	r.startSpan(requested)
	ttl := w.cfg.LeaseTTL
	r.clock.start(context.Background(), clockConfig{
		ttl: ttl, validity: w.lease.validity(ttl), grace: w.cfg.StopGrace,
		keepalive: true, interval: w.cfg.HeartbeatInterval, timeout: ttl / 3,
		renew: r.heartbeat, gone: jobGone, words: &jobWords, log: r.log,
	}, claimStart)
	stopCtx := r.clock.stopCtx
	context.AfterFunc(stopCtx, func() { r.hcancel(context.Cause(stopCtx)) })
	return r
}

// jobGone says that a heartbeat's error means the attempt no longer holds the job.
func jobGone(err error) bool { return errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotFound) }

// run waits for a run token (a job claimed into the worker's local queue waits for a handler to
// return), calls the handler, reports the outcome while the lease is kept alive, then stops the
// lease's clock. A job whose handler context ends while it waits (its lease lost, a cancel
// requested, the shutdown's deadline) never runs, and is reported as an attempt that stopped for
// that cause.
func (r *jobRun) run() {
	var panicked bool
	var err error
	var took time.Duration
	ctx := r.hctx
	ran := r.w.slots.startHandler(ctx)
	if ran {
		if r.job.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, r.job.Timeout, ErrJobTimeout)
			defer cancel()
		}
		started := time.Now()
		panicked, err = r.call(ctx)
		took = time.Since(started)
	} else {
		err = context.Cause(ctx)
	}
	cause := context.Cause(ctx)
	if r.handlerDone != nil {
		r.handlerDone(ran, took)
	}

	final, outcome := r.job, JobState("")
	lost := r.clock.err()
	defer func() { r.endSpan(outcome, err, lost) }()
	if lost != nil {
		// Another worker may already run the job: reporting could only be refused or, worse,
		// record a result for work that stopped half-way. The reaper ends the attempt.
		r.log.Warn("baton: job lease lost; leaving the attempt to the reaper", "cause", lost, "err", err)
	} else if job, rerr := r.report(r.outcome(err, panicked, cause)); rerr != nil {
		if errors.Is(rerr, ErrNotHeld) {
			r.log.Warn("baton: job lease lost before the attempt was reported", "err", rerr)
		} else {
			r.log.Error("baton: reporting the attempt failed; the reaper will end it", "err", rerr)
		}
	} else {
		final, outcome = job, job.State
	}
	r.clock.stop()
	r.hcancel(nil)
	r.clock.cancel(nil)
	if f := r.w.cfg.OnJobEnd; f != nil {
		f(final, outcome, took)
	}
}

// call runs the handler, turning a panic into an error.
func (r *jobRun) call(ctx context.Context) (panicked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("baton: job handler panicked", "panic", p, "stack", string(debug.Stack()))
			panicked, err = true, fmt.Errorf("panic: %v", p)
		}
	}()
	// The handler gets a copy: what it does to it cannot change what is reported.
	job := *r.job
	return false, r.handler(ctx, &job)
}

// outcome says how to report an attempt: nil FailParams to complete it.
func (r *jobRun) outcome(err error, panicked bool, cause error) *store.FailParams {
	if err == nil && !panicked {
		return nil
	}
	fp := &store.FailParams{ID: r.job.ID, Token: r.job.Token, Code: store.CodeHandlerError, Message: err.Error()}
	switch {
	case panicked:
		fp.RetryAfter = retryAfter(r.w.cfg.Backoff, r.job.Attempt)
	case errors.Is(cause, ErrJobCancelled):
		// The store ends the job cancelled whatever the code; this one says why it stopped.
		fp.Code = store.CodeCancelled
	case IsPermanent(err):
		fp.Code, fp.Permanent = store.CodePermanent, true
	case errors.Is(cause, ErrJobTimeout):
		fp.Code = store.CodeTimeout
		fp.RetryAfter = retryAfter(r.w.cfg.Backoff, r.job.Attempt)
	case errors.Is(cause, ErrWorkerShutdown):
		// Not the job's fault: retry at once, on a worker that is not going away.
		fp.Code = CodeWorkerShutdown
	default:
		fp.RetryAfter = retryAfter(r.w.cfg.Backoff, r.job.Attempt)
	}
	return fp
}

// report completes (fp nil) or fails the attempt, retrying transient store errors while the job
// lease is alive (heartbeats go on meanwhile), for at most one TTL.
func (r *jobRun) report(fp *store.FailParams) (job *Job, err error) {
	r.reporting.Store(true)
	ctx, cancel := context.WithTimeout(r.clock.ctx, r.w.cfg.LeaseTTL)
	defer cancel()
	name := "baton.complete"
	if fp != nil {
		name = "baton.fail"
	}
	if r.span != nil {
		ctx = trace.ContextWithSpan(ctx, r.span)
	}
	ctx, sp := tracer.Start(ctx, name)
	defer func() {
		if sp.IsRecording() {
			sp.SetAttributes(attrJobID.Int64(r.job.ID))
			if fp != nil {
				sp.SetAttributes(attrErrorCode.String(fp.Code))
			}
			if job != nil {
				sp.SetAttributes(attrJobState.String(string(job.State)))
			}
		}
		endSpan(sp, err)
	}()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for logged := false; ; logged = true {
		var job *Job
		var err error
		switch {
		case fp == nil && r.w.completer != nil:
			job, err = r.w.completer.complete(ctx, &store.CompleteParams{ID: r.job.ID, Token: r.job.Token})
		case fp == nil:
			job, err = r.w.st.CompleteJob(ctx, &store.CompleteParams{ID: r.job.ID, Token: r.job.Token})
		default:
			p := *fp
			job, err = r.w.st.FailJob(ctx, &p)
		}
		if err == nil || !retry.Transient(err) || ctx.Err() != nil {
			if lost := r.clock.err(); err != nil && ctx.Err() != nil && lost != nil {
				err = fmt.Errorf("%w (%w)", lost, err)
			}
			return job, err
		}
		if !logged {
			r.log.Warn("baton: reporting the attempt failed; retrying", "err", err)
		}
		wait := retry.Held(r.w.cfg.LeaseTTL)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
	}
}

// heartbeat extends the job lease once (the clock's renew). A requested cancel cancels the
// handler. While the attempt is reported, a heartbeat that finds it ended ends keepalive: the
// report ended it.
func (r *jobRun) heartbeat(ctx context.Context) error {
	start := time.Now()
	res, err := r.w.st.HeartbeatJob(ctx, &store.HeartbeatParams{ID: r.job.ID, Token: r.job.Token, TTL: r.w.cfg.LeaseTTL})
	if err != nil && r.span != nil && r.span.IsRecording() && !(jobGone(err) && r.reporting.Load()) {
		// A failed heartbeat is the job lease's renew failure: recorded under the attempt.
		_, sp := tracer.Start(trace.ContextWithSpan(context.Background(), r.span), "baton.heartbeat",
			trace.WithTimestamp(start), trace.WithAttributes(attrJobID.Int64(r.job.ID)))
		endSpan(sp, err)
	}
	switch {
	case err != nil && jobGone(err) && r.reporting.Load():
		return errKeepaliveEnded
	case err != nil:
		return err
	}
	if res.CancelRequested {
		r.hcancel(ErrJobCancelled)
	}
	return nil
}

// completer sends the completions of many attempts in one round trip when the store offers
// store.ManyCompleter: the completions that arrive while batches are in flight (up to
// completerFlushers at once) go together in the next, so a lone completion waits for nothing and
// a busy worker pays one commit per batch.
type completer struct {
	mc      store.ManyCompleter
	timeout time.Duration
	reqs    chan *completion
	done    chan struct{}
	// claimer, if set, claims jobs for the worker's free slots in each batch's round trip.
	claimer *completeClaim
	// pending counts the completions handed to the completer and not yet answered.
	pending atomic.Int64
	// w, if set, is the worker whose completions these are (see gather).
	w *Worker
	// lastFlush is how long the last batch's round trip took (ns).
	lastFlush atomic.Int64
	running   sync.WaitGroup
}

// completerFlushers is how many batches a worker of concurrency slots may have in flight at
// once. With one, the store's CPU sat idle while each round trip's answer travelled back and the
// next batch formed; with two, the River comparison at C=100 and C=1000 went from 0.68-0.76x to
// 0.81-0.96x (same-run A/B, docs/benchmarks.md), for somewhat smaller batches. A small worker
// keeps one: at C=10 (20,000 no-op jobs on 1,000 resources) two batches of four or five jobs
// each cost PostgreSQL 280-420 µs of statement time a job against 210-225 µs for one batch of
// ten, which drained 31-53% more jobs a second (three alternating runs; a round trip costs the
// store about as much for one job as for ten). Batches hold
// disjoint jobs, and claims reserve slots atomically, so two in flight never take more slots
// than are free.
func completerFlushers(concurrency int) int {
	if concurrency < 32 {
		return 1
	}
	return 2
}

// maxGather bounds how long a batch waits for the completions of handlers about to return.
const maxGather = 2 * time.Millisecond

// completeClaim claims jobs with a batch of completions (store.CompleteClaimer): the claim sees
// the successors the completions promoted, so a worker takes the next job of a resource in the
// round trip that completed the previous one, with no wake-up and no claim round trip between.
type completeClaim struct {
	cc      store.CompleteClaimer
	w       *Worker
	runCtx  context.Context // no claims once Run's context ends
	jobsCtx context.Context
}

type completion struct {
	ctx   context.Context
	p     *store.CompleteParams
	reply chan completed // capacity 1: the completer never blocks on a job gone away
}

type completed struct {
	job *Job
	err error
}

// newCompleter starts a completer for a worker of concurrency slots. Up to that many completions
// wait while a batch is in flight, so that jobs hand theirs over without waiting for the round
// trip.
func newCompleter(mc store.ManyCompleter, timeout time.Duration, concurrency int) *completer {
	c := &completer{mc: mc, timeout: timeout, reqs: make(chan *completion, concurrency), done: make(chan struct{})}
	for range completerFlushers(concurrency) {
		c.running.Add(1)
		go c.run()
	}
	go func() { c.running.Wait(); close(c.done) }()
	return c
}

// complete completes one attempt, batched with others, as CompleteJob would.
func (c *completer) complete(ctx context.Context, p *store.CompleteParams) (*Job, error) {
	req := &completion{ctx: ctx, p: p, reply: make(chan completed, 1)}
	c.pending.Add(1)
	defer c.pending.Add(-1)
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.job, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close stops the completer once no job can send to it any more.
func (c *completer) close() {
	close(c.reqs)
	<-c.done
}

func (c *completer) run() {
	defer c.running.Done()
	for req := range c.reqs {
		batch := []*completion{req}
	drain:
		for len(batch) < store.MaxClaimLimit {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		batch = c.gather(batch)
		start := time.Now()
		c.flush(batch)
		c.lastFlush.Store(int64(time.Since(start)))
		if c.w != nil {
			c.w.tuneQueue()
		}
	}
}

// gather waits briefly for the completions of handlers that are about to return, so that a
// worker with short handlers sends them in one round trip rather than trickling them out a few
// at a time (each round trip costs the store about as much for five jobs as for fifty). It waits
// only while handlers are running and handlers typically return sooner than half a round trip,
// and at most that long (and maxGather), so a lone completion and a worker of long handlers wait
// for nothing.
func (c *completer) gather(batch []*completion) []*completion {
	if c.w == nil || c.w.slots.inHand() <= 0 {
		return batch
	}
	d := min(time.Duration(c.lastFlush.Load())/2, maxGather)
	if d <= 0 || time.Duration(c.w.handlerTime.Load()) >= d {
		return batch
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(batch) < store.MaxClaimLimit && c.w.slots.inHand() > 0 {
		select {
		case r, ok := <-c.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

func (c *completer) flush(batch []*completion) {
	ps := make([]*store.CompleteParams, 0, len(batch))
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.reply <- completed{err: err}
			continue
		}
		ps = append(ps, r.p)
		live = append(live, r)
	}
	if len(ps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// A request has one parent: the batch's joins the trace of its first attempt's completion.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(live[0].ctx))
	var jobs []*Job
	var err error
	if cl := c.claimer; cl != nil && cl.runCtx.Err() == nil {
		// The batch's handlers have returned: their slots count as free.
		if n := cl.w.slots.reserve(store.MaxClaimLimit); n > 0 {
			start := time.Now()
			var claimed []*Job
			jobs, claimed, err = cl.cc.CompleteManyAndClaim(ctx, ps, cl.w.claimParams(n))
			cl.w.startJobs(cl.jobsCtx, claimed, start, n)
		} else {
			jobs, err = c.mc.CompleteMany(ctx, ps)
		}
	} else {
		jobs, err = c.mc.CompleteMany(ctx, ps)
	}
	for i, r := range live {
		switch {
		case err != nil:
			r.reply <- completed{err: err}
		case i >= len(jobs) || jobs[i] == nil:
			r.reply <- completed{err: fmt.Errorf("baton: complete job %d: %w", r.p.ID, ErrNotHeld)}
		default:
			r.reply <- completed{job: jobs[i]}
		}
	}
}
