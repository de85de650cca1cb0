package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/retry"
)

// holderClock is the holder's side of the lease contract, for a Lease and for a worker's job
// attempt alike: the holder's own view of the lease's validity, and the keepalive that extends
// it. Everything else consumes its two contexts.
//
//   - ctx ends at the local deadline, start_of_request + validity measured on this process's
//     monotonic clock, unless a renew succeeded first (each success moves the deadline on); when
//     the store says the holder is gone; or when the holder ends it. Its cause says which.
//   - stopCtx ends stop-grace before the local deadline, so that work that needs that long to
//     stop has stopped by the deadline; and with ctx. Once ended it stays ended, even if a renew
//     then succeeds: work told to stop is not told to go on. Without stop-grace it is ctx.
//
// Keepalive runs on timers, not on a goroutine per holder: a renew every interval; after a
// transient failure, quick retries (retry.Held) until the local deadline.
type holderClock struct {
	clockConfig

	ctx        context.Context
	cancel     context.CancelCauseFunc
	stopCtx    context.Context
	stopCancel context.CancelCauseFunc

	mu         sync.Mutex
	localEnd   time.Time  // the local deadline, on this process's monotonic clock
	endTimer   clockTimer // fires at localEnd
	stopTimer  clockTimer // fires grace before localEnd; nil without grace
	renewTimer clockTimer // the next keepalive renew; nil without keepalive
	stopped    bool       // the holder ended: no more renews, no more deadlines

	// tickMu is held by a keepalive renew in flight, so that stop can wait for it.
	tickMu  sync.Mutex
	failing bool // under tickMu: the last keepalive renew failed transiently
}

// clockConfig is what the owner of a holderClock tells it.
type clockConfig struct {
	ttl      time.Duration // the lease's TTL
	validity time.Duration // how long after a successful request's start the holder may count on the lease
	grace    time.Duration // stop-grace: how long the holder's work needs to stop; 0 for none
	// keepalive renews every interval, each renew bounded by timeout; off, the owner renews.
	keepalive         bool
	interval, timeout time.Duration
	// renew asks the store once to extend the lease by its TTL. errKeepaliveEnded stops
	// keepalive quietly.
	renew func(ctx context.Context) error
	// gone says that a renew's error means the store no longer holds the lease for this holder.
	gone  func(error) bool
	words *clockWords
	log   *slog.Logger
	attrs []slog.Attr // logged with every message
	// time is the clock's time and timers: nil for this process's (a test's otherwise).
	time clockTime
}

// clockTime is where a holderClock reads the time and sets its timers.
type clockTime interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) clockTimer
}

// clockTimer is what a holderClock does with a timer: *time.Timer's Reset and Stop.
type clockTimer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// processTime is this process's monotonic clock and runtime timers.
type processTime struct{}

// defaultClockTime is the clock of a holderClock whose owner set none: this process's. Only a
// build with the chaosclock tag (holder_clock_chaos.go, the fault harness's) changes it.
var defaultClockTime clockTime = processTime{}

func (processTime) Now() time.Time                                 { return time.Now() }
func (processTime) AfterFunc(d time.Duration, f func()) clockTimer { return time.AfterFunc(d, f) }

// clockWords are what a holderClock says in logs and causes, in its owner's terms.
type clockWords struct {
	lost, failing, recovered string // log messages
	expired                  string // the cause at the local deadline
	stopping                 string // the cause at stop-grace; %s is the grace
	// logEnd, if set, logs the ends at the deadline and at stop-grace, for an owner that has
	// nobody else to tell (a Lease's caller reads Err).
	logEnd bool
}

var (
	leaseWords = clockWords{
		lost:      "baton: lease lost",
		failing:   "baton: lease renew failed; retrying until the local deadline",
		recovered: "baton: lease renew recovered",
		expired:   "no renew succeeded before the holder's local deadline",
		stopping:  "no renew succeeded; stopping %s before the holder's local deadline",
	}
	jobWords = clockWords{
		lost:      "baton: job lease lost",
		failing:   "baton: job heartbeat failed; retrying until the local deadline",
		recovered: "baton: job heartbeat recovered",
		expired:   "no heartbeat succeeded before the worker's local deadline",
		stopping:  "no heartbeat succeeded; stopping %s before the worker's local deadline",
		logEnd:    true,
	}
)

// errKeepaliveEnded, from a renew, says that the holder's work ended on its own (a job's
// attempt was reported): keepalive stops without losing anything.
var errKeepaliveEnded = errors.New("baton: keepalive ended")

// start arms the clock: the local deadline counts from the request that granted, which began at
// from (or a lower bound of the grant time). parent gives the contexts their values, not their
// end.
func (c *holderClock) start(parent context.Context, cfg clockConfig, from time.Time) {
	if cfg.time == nil {
		cfg.time = defaultClockTime
	}
	c.clockConfig = cfg
	c.ctx, c.cancel = context.WithCancelCause(context.WithoutCancel(parent))
	c.stopCtx, c.stopCancel = c.ctx, c.cancel
	if cfg.grace > 0 {
		c.stopCtx, c.stopCancel = context.WithCancelCause(c.ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.localEnd = from.Add(cfg.validity)
	c.endTimer = c.time.AfterFunc(c.until(c.localEnd), c.expire)
	if cfg.grace > 0 {
		c.stopTimer = c.time.AfterFunc(c.until(c.localEnd.Add(-cfg.grace)), c.stopSoon)
	}
	if cfg.keepalive {
		c.renewTimer = c.time.AfterFunc(cfg.interval, c.tick)
	}
}

// until is how long until t, on the clock's time.
func (c *holderClock) until(t time.Time) time.Duration { return t.Sub(c.time.Now()) }

// deadline is the local deadline.
func (c *holderClock) deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.localEnd
}

// err is nil while the lease is held, then why it ended.
func (c *holderClock) err() error { return context.Cause(c.ctx) }

// renewOnce renews the lease once and, if the store agreed, moves the local deadline on. A
// renew the store refused because the lease is gone ends ctx at once.
func (c *holderClock) renewOnce(ctx context.Context) error {
	start := c.time.Now()
	err := c.renew(ctx)
	switch {
	case err == nil:
		return c.extend(start)
	case c.gone(err):
		c.cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
	}
	return err
}

// extend moves the local deadline to validity after start, the start of a renew the store
// agreed to, unless the lease already ended for this holder: a deadline that passed while the
// renew was in flight stays passed, although the store renewed the lease (the holder releases
// it once its work stopped).
func (c *holderClock) extend(start time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.err(); err != nil {
		return err
	}
	if c.stopped {
		return nil
	}
	if end := start.Add(c.validity); end.After(c.localEnd) {
		c.localEnd = end
		c.endTimer.Reset(c.until(end))
		if c.stopTimer != nil {
			c.stopTimer.Reset(c.until(end.Add(-c.grace)))
		}
	}
	return nil
}

// tick is one keepalive renew. ErrNotHeld (gone) ends the lease at once; other errors are
// retried quickly until the local deadline ends it.
func (c *holderClock) tick() {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	if c.isStopped() || c.ctx.Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	err := c.renewOnce(rctx)
	cancel()
	next := c.interval
	switch {
	case err == nil:
		if c.failing {
			c.logAt(slog.LevelInfo, c.words.recovered)
		}
		c.failing = false
	case errors.Is(err, errKeepaliveEnded):
		return
	case c.gone(err):
		c.logAt(slog.LevelWarn, c.words.lost, slog.Any("err", err))
		return
	case c.ctx.Err() != nil:
		return
	default:
		if !c.failing {
			c.logAt(slog.LevelWarn, c.words.failing, slog.Any("err", err))
		}
		c.failing = true
		next = retry.Held(c.ttl)
	}
	c.mu.Lock()
	if !c.stopped {
		c.renewTimer.Reset(next)
	}
	c.mu.Unlock()
}

// expire runs at the local deadline: no renew succeeded in time, so the store may grant the
// lease to another holder soon. It ends ctx at once, whatever is in flight (a renew in flight
// is cancelled with it). It does not release the lease: the work under it may still be
// stopping, and a release would let the next holder start beside it. The holder releases once
// its work has stopped; until then the store expires the lease at its TTL.
func (c *holderClock) expire() {
	if c.isStopped() {
		return
	}
	if c.words.logEnd {
		c.logAt(slog.LevelWarn, c.words.lost+": "+c.words.expired)
	}
	c.cancel(fmt.Errorf("%w: %s", ErrLeaseLost, c.words.expired))
}

// stopSoon runs stop-grace before the local deadline: no renew has succeeded for a while, and
// work that needs the grace to stop must begin now to have stopped by the deadline. The lease
// is not given up: a renew may still succeed.
func (c *holderClock) stopSoon() {
	c.mu.Lock()
	left := c.until(c.localEnd)
	stale := c.stopped || left > c.grace // stopped, or a renew moved the deadline meanwhile
	c.mu.Unlock()
	if stale {
		return
	}
	cause := fmt.Errorf("%w: "+c.words.stopping, ErrLeaseLost, c.grace)
	if c.words.logEnd {
		c.logAt(slog.LevelWarn, "baton: "+fmt.Sprintf(c.words.stopping, c.grace), slog.Duration("deadline_in", left.Round(time.Millisecond)))
	}
	c.stopCancel(cause)
}

func (c *holderClock) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// stop ends keepalive and the deadlines, and waits for a renew in flight. The contexts stay as
// they are: the owner ends them (end).
func (c *holderClock) stop() {
	c.mu.Lock()
	c.stopped = true
	c.endTimer.Stop()
	if c.stopTimer != nil {
		c.stopTimer.Stop()
	}
	if c.renewTimer != nil {
		c.renewTimer.Stop()
	}
	c.mu.Unlock()
	// Taking the tick lock waits for a renew in flight to finish.
	c.tickMu.Lock()
	c.tickMu.Unlock() //lint:ignore SA2001 the empty section is the wait for a renew in flight
}

// end stops the clock and ends its contexts with cause, unless they already ended.
func (c *holderClock) end(cause error) {
	c.stop()
	c.cancel(cause)
}

func (c *holderClock) logAt(level slog.Level, msg string, attrs ...slog.Attr) {
	c.log.LogAttrs(context.Background(), level, msg, slices.Concat(c.attrs, attrs)...)
}
