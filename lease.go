package baton

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// Lease is one acquisition of a key. Its fields never change; ExpiresAt moves with each renew.
//
// The lease's Context is cancelled at the holder's local deadline, start_of_request +
// TTL*(1-DriftFactor) - SafetyMargin measured on the monotonic clock, unless a renew succeeded
// first; so work under it stops before the store could grant the key to anyone else. Err says why
// it ended. With WithStopGrace, StopContext ends that long earlier, for work that needs time to
// stop.
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
	// Shared, Resources and Limits are what the lease holds beyond Key (WithShared,
	// WithResources, WithLimits); its Token is greater than every earlier token of each.
	Shared    bool
	Resources []string
	Limits    []string
	// Slots numbers the unit held of each of Limits, in 0..N-1 for a limit of capacity N. A
	// later holder of the same slot has a greater Token: a resource that fences each slot as a
	// key (fence.LimitSlotKey) admits at most N holders of the limit at once, even late ones.
	Slots map[string]int

	locker *Locker
	ttl    time.Duration
	clock  holderClock // the local deadline, stop-grace and keepalive
	// logAttrs name the lease in the clock's logs; kept here, a lease costs no allocation more.
	logAttrs [2]slog.Attr
	// span is the acquire span's context: renew failures are recorded as its children.
	span trace.SpanContext

	mu        sync.Mutex
	expiresAt time.Time // store clock
	released  bool      // the store confirmed the release
}

func (l *Locker) newLease(parent context.Context, sl *store.Lease, ttl time.Duration, start time.Time, o acquireOptions) *Lease {
	lease := &Lease{
		Key: sl.Key, ID: sl.ID, Holder: sl.Holder, Token: sl.Token, AcquiredAt: sl.AcquiredAt,
		Metadata: sl.Metadata, TookOver: sl.TookOver, Shared: sl.Shared, Resources: sl.Resources, Limits: sl.Limits, Slots: sl.Slots, locker: l, ttl: ttl, expiresAt: sl.ExpiresAt,
		logAttrs: [2]slog.Attr{slog.String("key", sl.Key), slog.String("lease_id", sl.ID)},
		span:     trace.SpanContextFromContext(parent),
	}
	lease.clock.start(parent, clockConfig{
		ttl: ttl, validity: l.cfg.validity(ttl), grace: o.stopGrace,
		keepalive: !o.noKeepalive, interval: ttl / 3, timeout: ttl / 3,
		renew: lease.renew, gone: leaseGone,
		words: &leaseWords, log: l.cfg.Logger, attrs: lease.logAttrs[:],
		time: l.clockTime,
	}, start)
	return lease
}

// leaseGone says that a renew's error means the store no longer holds the lease.
func leaseGone(err error) bool { return errors.Is(err, ErrNotHeld) }

// ExpiresAt is the expiry on the store's clock as of the last acquire or renew.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Deadline is the holder's local deadline: the instant, on this process's monotonic clock, at
// which the lease's context is cancelled unless a renew succeeds first. Each successful renew
// moves it later. Work that needs time to stop is better served by WithStopGrace and
// StopContext, which end that long before Deadline while renews fail.
func (l *Lease) Deadline() time.Time { return l.clock.deadline() }

// TTL is the lease's time to live, as requested.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Context is cancelled when the lease is lost or released; context.Cause gives Err.
func (l *Lease) Context() context.Context { return l.clock.ctx }

// StopContext is cancelled when the work under the lease must begin to stop: the stop-grace
// (WithStopGrace) before the local deadline when no renew has succeeded by then (cause wrapping
// ErrLeaseLost), and whenever Context is cancelled (its cause). Once cancelled it stays so,
// even if a renew then succeeds. Without a stop-grace it is Context.
func (l *Lease) StopContext() context.Context { return l.clock.stopCtx }

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.clock.ctx.Done() }

// Err is nil while the lease is held; then ErrReleased after Release, or an error wrapping
// ErrLeaseLost (and ErrNotHeld when the store said so) that says why it was lost.
func (l *Lease) Err() error { return l.clock.err() }

// Renew extends the lease by its TTL now. It is what keepalive does; call it yourself when
// keepalive is off. ErrNotHeld means the lease is gone and its context is cancelled.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	return l.clock.renewOnce(ctx)
}

// renew asks the store to extend the lease (the holder clock's renew).
func (l *Lease) renew(ctx context.Context) error {
	start := time.Now()
	sl, err := l.locker.store.Renew(ctx, &store.RenewParams{Key: l.Key, LeaseID: l.ID, TTL: l.ttl, Holds: l.holds()})
	if err != nil {
		l.renewFailed(start, err)
		return err
	}
	l.mu.Lock()
	l.expiresAt = sl.ExpiresAt
	l.mu.Unlock()
	return nil
}

// renewFailed records a failed renew as a span, a child of the acquire span (renews that succeed
// are not recorded: a long-held lease would fill its trace with them).
func (l *Lease) renewFailed(start time.Time, err error) {
	if !l.span.IsSampled() {
		return
	}
	_, sp := tracer.Start(trace.ContextWithSpanContext(context.Background(), l.span), "baton.renew",
		trace.WithTimestamp(start), trace.WithAttributes(attrKey.String(l.Key), attrLeaseID.String(l.ID)))
	endSpan(sp, err)
}

// Release stops keepalive, cancels the lease's context and frees the key (or starts its
// cooldown). Releasing again is harmless and returns nil. A lease that was lost returns ErrNotHeld
// from the store unless nobody took it yet.
func (l *Lease) Release(ctx context.Context) (err error) {
	l.mu.Lock()
	done := l.released
	l.mu.Unlock()
	if done {
		return nil
	}
	var links []trace.SpanStartOption
	if l.span.IsValid() {
		links = append(links, trace.WithLinks(trace.Link{SpanContext: l.span}))
	}
	ctx, sp := tracer.Start(ctx, "baton.release", links...)
	if sp.IsRecording() {
		sp.SetAttributes(attrKey.String(l.Key), attrLeaseID.String(l.ID), attrToken.Int64(int64(l.Token)))
	}
	defer func() { endSpan(sp, err) }()
	l.clock.end(ErrReleased)
	err = l.release(ctx)
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
		_, err := l.locker.store.Release(ctx, &store.ReleaseParams{Key: l.Key, LeaseID: l.ID, Holds: l.holds()})
		wait := retry.After(err)
		if err == nil || wait <= 0 || time.Now().Add(wait).After(l.clock.deadline()) {
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

// holds reports whether the lease was granted beyond one exclusive key (store.RenewParams.Holds).
func (l *Lease) holds() bool { return l.Shared || len(l.Resources) > 0 || len(l.Limits) > 0 }
