package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// Lease is one acquisition of a key. Its fields never change; ExpiresAt moves with each renew.
//
// The lease's Context is cancelled at the holder's local deadline, start_of_request +
// TTL*(1-DriftFactor) - SafetyMargin measured on the monotonic clock, unless a renew succeeded
// first; so work under it stops before the store could grant the key to anyone else. Err says why
// it ended.
type Lease struct {
	Key        string
	ID         string
	Holder     string
	Token      uint64 // fencing token: strictly greater than every earlier token of Key
	AcquiredAt time.Time
	Metadata   json.RawMessage
	// TookOver is true when this lease took the key over from a lease that expired without
	// being released: its holder crashed or stalled, and may have left the resource half-done.
	TookOver bool

	locker *Locker
	ttl    time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	expiresAt  time.Time   // store clock
	localEnd   time.Time   // the local deadline, on this process's monotonic clock
	deadline   *time.Timer // fires at localEnd
	renewTimer *time.Timer // next keepalive renew; nil without keepalive
	stopped    bool        // Release began: no more renews
	released   bool        // the store confirmed the release

	// tickMu is held by a keepalive renew in flight, so that Release
	// can wait for it. Keepalive runs on timers, not on a goroutine per lease.
	tickMu  sync.Mutex
	failing bool // under tickMu: the last renew failed transiently
}

func (l *Locker) newLease(parent context.Context, sl *store.Lease, ttl time.Duration, start time.Time, keepalive bool) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	lease := &Lease{
		Key: sl.Key, ID: sl.ID, Holder: sl.Holder, Token: sl.Token, AcquiredAt: sl.AcquiredAt,
		Metadata: sl.Metadata, TookOver: sl.TookOver, locker: l, ttl: ttl, ctx: ctx, cancel: cancel,
		expiresAt: sl.ExpiresAt,
	}
	lease.mu.Lock()
	defer lease.mu.Unlock()
	lease.localEnd = start.Add(l.cfg.validity(ttl))
	lease.deadline = time.AfterFunc(time.Until(lease.localEnd), lease.expireLocally)
	if keepalive {
		lease.renewTimer = time.AfterFunc(ttl/3, lease.renewTick)
	}
	return lease
}

// ExpiresAt is the expiry on the store's clock as of the last acquire or renew.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Deadline is the holder's local deadline: the instant, on this process's monotonic clock, at
// which the lease's context is cancelled unless a renew succeeds first. Each successful renew
// moves it later. Work that needs time to stop (a child process's grace period) should begin
// stopping that long before Deadline when renews are failing, so that it has stopped by then.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.localEnd
}

// TTL is the lease's time to live, as requested.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Context is cancelled when the lease is lost or released; context.Cause gives Err.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease is held; then ErrReleased after Release, or an error wrapping
// ErrLeaseLost (and ErrNotHeld when the store said so) that says why it was lost.
func (l *Lease) Err() error { return context.Cause(l.ctx) }

// Renew extends the lease by its TTL now. It is what keepalive does; call it yourself when
// keepalive is off. ErrNotHeld means the lease is gone and its context is cancelled.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	start := time.Now()
	sl, err := l.locker.store.Renew(ctx, &store.RenewParams{Key: l.Key, LeaseID: l.ID, TTL: l.ttl})
	if err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		}
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		// The local deadline passed while the request was in flight; the lease stays lost for
		// this holder even though the store renewed it. Release will free it.
		return l.Err()
	}
	l.expiresAt = sl.ExpiresAt
	if end := start.Add(l.locker.cfg.validity(l.ttl)); end.After(l.localEnd) {
		l.localEnd = end
		l.deadline.Reset(time.Until(end))
	}
	return nil
}

// Release stops keepalive, cancels the lease's context and frees the key (or starts its
// cooldown). Releasing again is harmless and returns nil. A lease that was lost returns ErrNotHeld
// from the store unless nobody took it yet.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	done := l.released
	l.mu.Unlock()
	if done {
		return nil
	}
	l.stop()
	l.cancel(ErrReleased)
	err := l.release(ctx)
	if !settledRelease(err) {
		// The release may still be applied later: this Locker must not hand the lease out
		// again (see unsettled).
		l.locker.pending.add(l.ID, l.ttl, l.locker.cfg.DriftFactor)
	}
	if err != nil {
		return err
	}
	l.locker.pending.remove(l.ID)
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	return nil
}

// release asks the store to release the lease. A refusal that says when to come back (a
// server shedding load: 503 with Retry-After) is sent again then, as long as that is before the
// local deadline and ctx allows; the last error is returned.
func (l *Lease) release(ctx context.Context) error {
	for {
		_, err := l.locker.store.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID})
		wait := retry.After(err)
		if err == nil || wait <= 0 || time.Now().Add(wait).After(l.Deadline()) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// stop ends keepalive and the deadline timer, and waits for a renew in flight.
func (l *Lease) stop() {
	l.mu.Lock()
	l.stopped = true
	l.deadline.Stop()
	if l.renewTimer != nil {
		l.renewTimer.Stop()
	}
	l.mu.Unlock()
	// Taking the tick lock waits for a renew in flight to finish.
	l.tickMu.Lock()
	l.tickMu.Unlock()
}

func (l *Lease) isStopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// expireLocally runs at the local deadline. It cancels at once, whatever is in flight (a renew
// in flight is cancelled with it). It does not release the lease: the work under it may still
// be stopping, and a release would let the next holder start beside it. The holder releases
// once its work has stopped (WithLock does); until then the store expires the lease at its TTL.
func (l *Lease) expireLocally() {
	l.cancel(fmt.Errorf("%w: no renew succeeded before the holder's local deadline", ErrLeaseLost))
}

// renewTick is one keepalive renew, every TTL/3. Transient errors are retried quickly until the
// local deadline cancels the lease; ErrNotHeld cancels at once.
func (l *Lease) renewTick() {
	l.tickMu.Lock()
	defer l.tickMu.Unlock()
	if l.isStopped() || l.ctx.Err() != nil {
		return
	}
	interval := l.ttl / 3
	rctx, cancel := context.WithTimeout(l.ctx, interval)
	err := l.Renew(rctx)
	cancel()
	next := interval
	log := l.locker.cfg.Logger
	switch {
	case err == nil:
		if l.failing {
			log.Info("baton: lease renew recovered", "key", l.Key, "lease_id", l.ID)
		}
		l.failing = false
	case errors.Is(err, ErrNotHeld):
		log.Warn("baton: lease lost", "key", l.Key, "lease_id", l.ID, "err", err)
		return
	case l.ctx.Err() != nil:
		return
	default:
		if !l.failing {
			log.Warn("baton: lease renew failed; retrying until the local deadline", "key", l.Key, "lease_id", l.ID, "err", err)
		}
		l.failing = true
		next = retry.Held(l.ttl)
	}
	l.mu.Lock()
	if !l.stopped {
		l.renewTimer.Reset(next)
	}
	l.mu.Unlock()
}
