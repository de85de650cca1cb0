package baton

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// Locker hands out leases over a store. It is safe for concurrent use. It does not own the
// store: close the store when done with it.
type Locker struct {
	store        store.Store
	cfg          Config
	holderPrefix string
	pending      unsettled // leases whose release has an unknown outcome
	clockTime    clockTime // the leases' time and timers; nil: this process's (tests set it)
}

// NewLocker returns a Locker over s. A nil cfg means all defaults.
func NewLocker(s store.Store, cfg *Config) (*Locker, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Locker{store: s, cfg: c, holderPrefix: defaultHolderPrefix()}, nil
}

// Store returns the store the Locker works over.
func (l *Locker) Store() store.Store { return l.store }

// TryAcquire takes the key if it is free now and never waits. It returns a *LockHeldError
// (ErrLockHeld) naming the holder, a *RestingError (ErrResting), or an *InvalidArgumentError.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...Option) (lease *Lease, err error) {
	ctx, sp := tracer.Start(ctx, "baton.acquire", trace.WithAttributes(attrKey.String(key)))
	defer func() { endAcquireSpan(sp, lease, err) }()
	p, o, err := l.params(key, opts)
	if err != nil {
		return nil, err
	}
	return l.acquireOnce(ctx, p, o)
}

// endAcquireSpan ends an acquire span with the lease it granted, or the error.
func endAcquireSpan(sp trace.Span, lease *Lease, err error) {
	if lease != nil && sp.IsRecording() {
		sp.SetAttributes(attrLeaseID.String(lease.ID), attrToken.Int64(int64(lease.Token)))
	}
	endSpan(sp, err)
}

// Acquire waits until the key is granted, ctx ends, or the wait timeout passes. Waiters are woken
// by the store's push when the key is released and fall back to a jittered poll (and to the
// holder's expiry, which sends no push). Transient store errors (the store or the server
// unreachable, a database restart) are retried with backoff until the wait ends; bad input, a
// closed store and refused credentials end it at once. When waiting ends unsuccessfully, the
// error wraps both ctx's error and the last refusal (*LockHeldError, *RestingError or the
// transient error).
//
// However long it waited, the lease is fully usable: its local deadline is measured from a lower
// bound of the grant time (the start of the attempt that granted, plus the time a store that
// waits itself reports it waited), never from the start of the wait.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...Option) (lease *Lease, err error) {
	ctx, sp := tracer.Start(ctx, "baton.acquire", trace.WithAttributes(attrKey.String(key)))
	defer func() { endAcquireSpan(sp, lease, err) }()
	p, o, err := l.params(key, opts)
	if err != nil {
		return nil, err
	}
	if o.waitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.waitTimeout)
		defer cancel()
	}
	sl, start, err := l.wait(ctx, p, true, func() (*store.Lease, error) { return l.grant(ctx, p) })
	if err != nil {
		return nil, err
	}
	return l.newLease(ctx, sl, p.TTL, l.cfg.grantedAfter(start, sl.Waited), o), nil
}

// AcquireRecord waits for the key as Acquire does, but returns the store's record instead of a
// kept-alive Lease: for a server that hands leases to remote holders, which renew them
// themselves. p is validated; p.LeaseID must be set by the caller. The record's Waited is how
// long this call waited before the attempt that granted began (plus what the store itself
// reported), so that the remote holder can bound the grant time from below.
//
// When ctx ends first, the waiter's ticket stays in the store's line (store.LineWaiter): the end
// of one request is not its remote waiter's give-up, which continues under the same lease ID or
// leaves the line itself (LeaveLine), and an abandoned ticket expires within p.TTL.
func (l *Locker) AcquireRecord(ctx context.Context, p *store.AcquireParams) (sl *store.Lease, err error) {
	ctx, sp := tracer.Start(ctx, "baton.acquire", trace.WithAttributes(attrKey.String(p.Key)))
	defer func() {
		if sl != nil && sp.IsRecording() {
			sp.SetAttributes(attrLeaseID.String(sl.ID), attrToken.Int64(int64(sl.Token)))
		}
		endSpan(sp, err)
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	called := time.Now()
	sl, start, err := l.wait(ctx, p, false, func() (*store.Lease, error) { return l.store.Acquire(ctx, p) })
	if err != nil {
		return nil, err
	}
	sl.Waited = l.cfg.grantedAfter(start, sl.Waited).Sub(called)
	return sl, nil
}

// wait retries attempt until it grants, ctx ends, or it fails with anything but a held key, a
// resting one or a transient store error. It returns the granted lease and the instant the
// granting attempt began. When ctx ends it leaves the store's line if leaveOnEnd is set.
func (l *Locker) wait(ctx context.Context, p *store.AcquireParams, leaveOnEnd bool, attempt func() (*store.Lease, error)) (*store.Lease, time.Time, error) {
	p.Wait = true
	// Subscribe before the first attempt so that a release between the attempt and the wait
	// still wakes us. A store with a line wakes its front by name, and keeps our ticket alive
	// only while we retry: we retry at least every third of the ticket's TTL (p.TTL).
	line, _ := l.store.(store.LineWaiter)
	if line != nil && !l.store.Capabilities().Line {
		line = nil // a wrapper that passes the methods on to a store without a line
	}
	var waiter *notify.Waiter
	if line != nil {
		waiter = notify.NewWaiter(line.SubscribeAs(p.Key, p.LeaseID))
	} else {
		waiter = notify.NewWaiter(l.store.Subscribe(p.Key))
	}
	defer waiter.Close()
	var refusal error // the last refusal: who we were waiting for, or why the store failed
	// attempted: an attempt was made, so a ticket may be in the line, even if no refusal came
	// back (a store that waits itself, the HTTP client's long-poll; an attempt ctx aborted).
	attempted := false
	called, ws, holder := time.Now(), waitSpan{ctx: ctx}, ""
	gaveUp := func() (err error) {
		defer func() { ws.end(called, time.Now(), holder, err) }()
		if line != nil && attempted && leaveOnEnd {
			l.leaveLine(ctx, line, p)
		}
		if refusal == nil {
			return ctx.Err()
		}
		return fmt.Errorf("baton: gave up waiting for %q: %w: %w", p.Key, ctx.Err(), refusal)
	}
	failures := 0 // consecutive transient failures
	for {
		if ctx.Err() != nil {
			return nil, time.Time{}, gaveUp()
		}
		start := time.Now()
		attempted = true
		sl, err := attempt()
		if err == nil {
			if failures > 0 {
				l.cfg.Logger.Info("baton: store reachable again; acquired", "key", p.Key)
			}
			ws.end(called, start, holder, nil)
			return sl, start, nil
		}
		wait := retry.Jitter(l.cfg.PollInterval)
		var held *LockHeldError
		var resting *RestingError
		switch {
		case errors.As(err, &held) && p.Owner != "" && held.Holder == p.Holder:
			// A lease of this holder string under another owner (store.AcquireParams.Owner):
			// the caller is not its owner, and waiting would not make it so. Its refusal
			// enqueued a ticket: leave the line.
			if line != nil {
				l.leaveLine(ctx, line, p)
			}
			return nil, time.Time{}, err
		case errors.As(err, &held):
			if held.RetryAfter > 0 { // zero when the key is free and a job is first in line
				wait = min(wait, held.RetryAfter+time.Millisecond)
			}
			failures = 0
			holder = held.Holder
		case errors.As(err, &resting):
			wait = min(wait, resting.Remaining+time.Millisecond)
			failures = 0
		case ctx.Err() != nil:
			// The wait ended during the attempt: report whom we were waiting for.
			return nil, time.Time{}, gaveUp()
		case retry.Transient(err):
			// The store or the server is unreachable (a restart, a network fault), or
			// overloaded and says when to come back (Retry-After): keep waiting, backing off.
			if failures == 0 {
				l.cfg.Logger.Warn("baton: acquire failed; retrying until the wait ends", "key", p.Key, "err", err)
			}
			failures++
			wait = max(retry.Backoff(l.cfg.PollInterval, failures), retry.After(err))
		default:
			return nil, time.Time{}, err
		}
		refusal = err
		ws.refused()
		if line != nil {
			wait = min(wait, p.TTL/3)
		}
		var ev notify.Event
		if failures > 0 {
			// A wake-up after a store failure is no sign the store is back (the HTTP client's
			// hub wakes everyone at Close): keep backing off.
			ev = waiter.WaitFor(ctx, wait, nil)
		} else {
			ev = waiter.Wait(ctx, wait)
		}
		if ev == notify.Cancelled {
			return nil, time.Time{}, gaveUp()
		}
	}
}

// leaveLine removes the ticket of a waiter that gave up, so that it does not hold the line until
// it expires. Best effort, bounded: the ticket expires within p.TTL anyway.
func (l *Locker) leaveLine(ctx context.Context, line store.LineWaiter, p *store.AcquireParams) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.PollInterval)
	defer cancel()
	if err := line.LeaveLine(ctx, p.Key, p.LeaseID, p.Owner); err != nil {
		l.cfg.Logger.Debug("baton: leaving the line failed; the ticket expires by itself", "key", p.Key, "err", err)
	}
}

func (l *Locker) acquireOnce(ctx context.Context, p *store.AcquireParams, o acquireOptions) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := time.Now()
	sl, err := l.grant(ctx, p)
	if err != nil {
		return nil, err
	}
	return l.newLease(ctx, sl, p.TTL, start, o), nil
}

// WithLock acquires key (waiting as Acquire does), runs fn, and releases. fn's context is
// cancelled when ctx ends or the lease is lost. If the lease was lost while fn ran, WithLock
// returns fn's error or, if fn returned nil, the loss (ErrLeaseLost): the work may have overlapped
// with the next holder's, and the caller should know.
func (l *Locker) WithLock(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	lease, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(lease.Context(), func() { cancel(lease.Err()) })
	fnErr := fn(fnCtx)
	stop()
	cancel(nil)
	lost := lease.Err()
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.TTL)
	defer relCancel()
	relErr := lease.Release(relCtx)
	switch {
	case fnErr != nil:
		return fnErr
	case lost != nil:
		return lost
	default:
		return relErr
	}
}

// Get returns the live lease on key, or ErrNotFound.
func (l *Locker) Get(ctx context.Context, key string) (*LeaseInfo, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	sl, err := l.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return infoOf(sl), nil
}

// LeaseListParams filter Locker.ListLeases. After is the Next of the previous page.
type LeaseListParams struct {
	Prefix string // only keys with this prefix
	Holder string // only leases of this holder, if set
	After  string // only keys greater than this one
	Limit  int    // default 100, at most 1000
}

// LeasePage is one page of live leases, in key order. Next is set when the page is full: pass it
// as the next call's After (that page may turn out empty). An empty Next means there are no more
// pages.
type LeasePage struct {
	Leases []*LeaseInfo
	Next   string
}

// ListLeases returns live leases whose key starts with p.Prefix, page by page.
func (l *Locker) ListLeases(ctx context.Context, p LeaseListParams) (*LeasePage, error) {
	sp := &store.ListParams{Prefix: p.Prefix, Holder: p.Holder, After: p.After, Limit: p.Limit}
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	leases, err := l.store.List(ctx, sp)
	if err != nil {
		return nil, err
	}
	page := &LeasePage{}
	if len(leases) == sp.Limit {
		page.Next = leases[len(leases)-1].Key
	}
	for _, sl := range leases {
		page.Leases = append(page.Leases, infoOf(sl))
	}
	return page, nil
}

// ListOptions filters List. Cursor is the NextCursor of the previous page.
//
// Deprecated: use LeaseListParams with ListLeases.
type ListOptions struct {
	Prefix string
	Holder string
	Limit  int // default 100, at most 1000
	Cursor string
}

// ListPage is one page of live leases, in key order. NextCursor is set when the page is full;
// an empty NextCursor means there are no more pages.
//
// Deprecated: use LeasePage, which ListLeases returns.
type ListPage struct {
	Leases     []*LeaseInfo
	NextCursor string
}

// List returns live leases whose key starts with opts.Prefix, page by page.
//
// Deprecated: use ListLeases, whose page has the shape of every other list.
func (l *Locker) List(ctx context.Context, opts ListOptions) (*ListPage, error) {
	page, err := l.ListLeases(ctx, LeaseListParams{Prefix: opts.Prefix, Holder: opts.Holder, After: opts.Cursor, Limit: opts.Limit})
	if err != nil {
		return nil, err
	}
	return &ListPage{Leases: page.Leases, NextCursor: page.Next}, nil
}

// ForceRelease ends whatever lease holds key, for an operator. The key then rests for that
// lease's lock-delay. It returns the lease that was ended, or ErrNotFound.
func (l *Locker) ForceRelease(ctx context.Context, key, reason string) (*LeaseInfo, error) {
	sl, err := l.store.ForceRelease(ctx, &store.ForceReleaseParams{Key: key, Reason: reason})
	if err != nil {
		return nil, err
	}
	return infoOf(sl), nil
}

// LeaseInfo describes a lease as the store holds it. Times are on the store's clock.
type LeaseInfo struct {
	Key        string
	ID         string
	Holder     string
	Token      uint64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	Metadata   []byte
}

func infoOf(sl *store.Lease) *LeaseInfo {
	return &LeaseInfo{Key: sl.Key, ID: sl.ID, Holder: sl.Holder, Token: sl.Token,
		AcquiredAt: sl.AcquiredAt, ExpiresAt: sl.ExpiresAt, Metadata: sl.Metadata}
}
