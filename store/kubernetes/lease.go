package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batonhq/baton/store"
)

// maxAttempts bounds the read-and-update rounds of a renew, release or admin call under
// contention (on a lease that is the caller's own, or by hand: conflicts are rare there).
const maxAttempts = 16

// acquireAttempts bounds an Acquire's rounds. A round is lost only when another write to the
// key won between the read and the update (a grant, or the release that followed it), so others
// make progress meanwhile; on a key that contenders grant and release back to back, a caller
// can lose many rounds in a row. With 16, eight goroutines cycling one key under -race on a
// loaded 2-core machine once got "too much contention" from a try-acquire, which should answer
// granted or held. Backoff is capped (see backoff), so 64 rounds wait at most ~5 s in all.
const acquireAttempts = 64

// writtenCache keeps the object this store last wrote for each lease it granted, so that a
// renewal or release can be one update guarded by that resourceVersion instead of a read and
// an update. If the object changed meanwhile the update gets a 409 and the call reads it.
type writtenCache struct {
	mu sync.Mutex
	m  map[string]*coordv1.Lease
}

func (c *writtenCache) put(l *coordv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*coordv1.Lease{}
	}
	c.m[l.Name] = l
}

// get returns the cached object of name if it holds lease id.
func (c *writtenCache) get(name, id string) *coordv1.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[name]
	if l == nil || l.Annotations[annLeaseID] != id || l.Annotations[annState] != stateHeld {
		return nil
	}
	return l
}

func (c *writtenCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// view is one read of a key's object: the object, its record, and for how long this store has
// seen it unchanged.
type view struct {
	obj       *coordv1.Lease
	rec       *record
	unchanged time.Duration
	ttl       time.Duration // the record's TTL plus drift: how long it must be seen unchanged
	now       time.Time
}

// expired says whether this store has seen the held lease unchanged for its TTL plus drift.
func (v *view) expired() bool { return v.rec.State == stateHeld && v.unchanged >= v.ttl }

// live says whether the object holds a lease that has not expired for this store.
func (v *view) live() bool { return v.rec.State == stateHeld && !v.expired() }

// read gets key's object. ok is false if there is none.
func (s *Store) read(ctx context.Context, key string) (v *view, ok bool, err error) {
	obj, err := s.leases.Get(ctx, ObjectName(key), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.closed.Wrap(err)
	}
	v, err = s.viewOf(obj, key)
	return v, err == nil, err
}

func (s *Store) viewOf(obj *coordv1.Lease, key string) (*view, error) {
	rec, err := decode(obj, key)
	if err != nil {
		return nil, err
	}
	now := s.now()
	first := s.seen.see(obj.Name, obj.ResourceVersion, now)
	// TTL × (1 + drift): a clock that runs faster than the holder's by up to the drift factor
	// still sees the TTL pass no sooner than the holder does (docs/design.md, "Time": "plus drift").
	ttl := rec.TTL + time.Duration(s.drift*float64(rec.TTL))
	return &view{obj: obj, rec: rec, unchanged: now.Sub(first), ttl: ttl, now: now}, nil
}

// lease is the store.Lease of a held record; left is its TTL left as this store sees it.
func (v *view) lease() *store.Lease {
	left := max(v.ttl-v.unchanged, 0)
	return leaseOf(v.rec, left, v.now)
}

func leaseOf(rec *record, left time.Duration, now time.Time) *store.Lease {
	return &store.Lease{Key: rec.Key, ID: rec.LeaseID, Holder: rec.Holder, Owner: rec.Owner, Token: rec.Token,
		AcquiredAt: rec.AcquiredAt, ExpiresAt: now.Add(left), TTLLeft: left, Metadata: rec.Metadata}
}

// write updates obj (a copy) to rec with obj's resourceVersion as precondition, and records the
// result as seen when the answer arrived. conflict is true on a 409 (or a 404: the object was
// deleted meanwhile).
func (s *Store) write(ctx context.Context, obj *coordv1.Lease, rec *record) (out *coordv1.Lease, conflict bool, err error) {
	obj = obj.DeepCopy()
	if rec.State == stateHeld && obj.Annotations[annLeaseID] != rec.LeaseID {
		obj.Spec.LeaseTransitions = transitions(obj)
	}
	rec.encode(obj, s.now())
	out, err = s.leases.Update(ctx, obj, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, s.closed.Wrap(err)
	}
	if s.closed.Load() {
		// Close overtook the call: report the outcome as unknown, as after a lost connection,
		// so that a renewal in flight during Close extends no holder's deadline.
		return nil, false, store.ErrClosed
	}
	s.seen.see(out.Name, out.ResourceVersion, s.now())
	if rec.State == stateHeld {
		s.written.put(out)
	} else {
		s.written.drop(out.Name)
	}
	return out, false, nil
}

// firstToken is the token of a key's first grant, on a new object: greater than every token a
// deleted object of the same key may have handed out. Each grant is a write, and a write's
// resourceVersion (etcd's revision, store-wide) exceeds every earlier one, so a token never
// exceeds the resourceVersion of the write that granted it; the namespace's current
// resourceVersion, read now, therefore exceeds them all. A resourceVersion that is not a number
// (an API server not backed by etcd) gives 1: then deleting an object restarts its tokens.
func (s *Store) firstToken(ctx context.Context) (uint64, error) {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return 0, s.closed.Wrap(err)
	}
	rv, err := strconv.ParseUint(list.ResourceVersion, 10, 64)
	if err != nil {
		return 1, nil
	}
	return rv + 1, nil
}

// create makes key's object with a first grant. conflict is true if it exists already.
func (s *Store) create(ctx context.Context, p *store.AcquireParams) (*store.Lease, bool, error) {
	token, err := s.firstToken(ctx)
	if err != nil {
		return nil, false, err
	}
	rec := grantRecord(p, token, s.now())
	obj := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(p.Key), Namespace: s.namespace}}
	rec.encode(obj, s.now())
	out, err := s.leases.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, s.closed.Wrap(err)
	}
	s.seen.see(out.Name, out.ResourceVersion, s.now())
	s.written.put(out)
	return leaseOf(rec, p.TTL, s.now()), false, nil
}

// Acquire reads the key's object and grants, renews (same holder), or refuses, in one update
// guarded by the resourceVersion read; on a conflict it reads again.
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := store.RefuseBeyond("kubernetes", p); err != nil {
		return nil, err
	}
	for attempt := range acquireAttempts {
		v, ok, err := s.read(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		if !ok {
			l, conflict, err := s.create(ctx, p)
			if conflict {
				continue
			}
			return l, err
		}
		l, retry, err := s.acquireOn(ctx, p, v)
		if !retry {
			return l, err
		}
		// Lost a race. Under contention the winner may already have released again; a short
		// jittered pause spreads the losers' next reads instead of racing in step.
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("kubernetes: acquire %q: too much contention", p.Key)
}

// acquireOn decides on one view of the key. retry is true after a conflict.
func (s *Store) acquireOn(ctx context.Context, p *store.AcquireParams, v *view) (*store.Lease, bool, error) {
	rec := v.rec
	tookOver := false
	switch {
	case v.live() && rec.Holder == p.Holder && rec.Owner == p.Owner:
		// Idempotent re-acquire: the same lease, renewed. A live lease of the same holder and
		// another owner is refused below like any other, unchanged.
		next := *rec
		next.TTL = p.TTL
		if _, conflict, err := s.write(ctx, v.obj, &next); conflict || err != nil {
			return nil, conflict, err
		}
		return leaseOf(&next, p.TTL, s.now()), false, nil
	case v.live():
		left := v.ttl - v.unchanged
		return nil, false, &store.LockHeldError{Key: p.Key, Holder: rec.Holder, Token: rec.Token,
			ExpiresAt: v.now.Add(left), RetryAfter: left}
	case rec.State == stateHeld: // expired for this store
		if rest := v.ttl + rec.LockDelay - v.unchanged; rest > 0 {
			return nil, false, &store.RestingError{Key: p.Key, Reason: store.ReasonLockDelay, Remaining: rest}
		}
		tookOver = true
	default:
		reason, length := store.ReasonCooldown, rec.Cooldown
		if rec.State == stateForced {
			reason, length = store.ReasonLockDelay, rec.LockDelay
		}
		if rest := length - v.unchanged; rest > 0 {
			return nil, false, &store.RestingError{Key: p.Key, Reason: reason, Remaining: rest}
		}
	}
	next := grantRecord(p, rec.Token+1, s.now())
	if _, conflict, err := s.write(ctx, v.obj, next); conflict || err != nil {
		return nil, conflict, err
	}
	l := leaseOf(next, p.TTL, s.now())
	l.TookOver = tookOver
	return l, false, nil
}

// heldView returns a view of the lease (key, id) for a renewal or release: the object this
// store last wrote for it if any and useCache (then cached is true: no read), else a read. ok
// is false if the object is gone.
func (s *Store) heldView(ctx context.Context, key, id string, useCache bool) (v *view, ok, cached bool, err error) {
	if useCache {
		if obj := s.written.get(ObjectName(key), id); obj != nil {
			v, err := s.viewOf(obj, key)
			return v, err == nil, true, err
		}
	}
	v, ok, err = s.read(ctx, key)
	return v, ok, false, err
}

// change updates the object of lease (key, id): on the object this store last wrote for it
// first (no read), then on fresh reads after each conflict. decide returns the record to write,
// or an error to return as is; a refusal decided on the cached object, which may be stale (a
// lease ID reused by another owner), is decided again on a read.
func (s *Store) change(ctx context.Context, op, key, id string, decide func(v *view, ok bool) (*record, error)) (*view, *record, error) {
	for attempt := range maxAttempts {
		v, ok, cached, err := s.heldView(ctx, key, id, attempt == 0)
		if err != nil {
			return nil, nil, err
		}
		next, err := decide(v, ok)
		if err != nil && cached {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		_, conflict, err := s.write(ctx, v.obj, next)
		if err != nil {
			return nil, nil, err
		}
		if !conflict {
			return v, next, nil
		}
		if attempt > 0 { // the first conflict is usually the cached object being stale
			if err := backoff(ctx, attempt); err != nil {
				return nil, nil, err
			}
		}
	}
	return nil, nil, fmt.Errorf("kubernetes: %s %q: too much contention", op, key)
}

// Renew extends the lease if it is still the key's, p.Owner's, and this store has not seen it
// expire.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	_, next, err := s.change(ctx, "renew", p.Key, p.LeaseID, func(v *view, ok bool) (*record, error) {
		if !ok || !v.live() || v.rec.LeaseID != p.LeaseID || v.rec.Owner != p.Owner {
			return nil, store.ErrNotHeld
		}
		next := *v.rec
		next.TTL = p.TTL
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	return leaseOf(next, p.TTL, s.now()), nil
}

// errAlreadyReleased ends a Release that finds its lease released before.
var errAlreadyReleased = errors.New("already released")

// Release marks the lease released, keeping the object and its token, if it is p.Owner's.
// Already released answers whoever names the lease's ID: nothing changes.
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v, _, err := s.change(ctx, "release", p.Key, p.LeaseID, func(v *view, ok bool) (*record, error) {
		switch {
		case !ok || v.rec.LeaseID != p.LeaseID:
			return nil, store.ErrNotHeld
		case v.rec.State == stateReleased:
			return nil, errAlreadyReleased
		case !v.live():
			return nil, store.ErrNotHeld // forced, or expired for this store
		case v.rec.Owner != p.Owner:
			return nil, store.ErrNotHeld
		}
		next := *v.rec
		next.State = stateReleased
		return &next, nil
	})
	if errors.Is(err, errAlreadyReleased) {
		return &store.ReleaseResult{AlreadyReleased: true}, nil
	}
	if err != nil {
		return nil, err
	}
	return &store.ReleaseResult{Held: max(s.now().Sub(v.rec.AcquiredAt), time.Nanosecond)}, nil
}

// Get returns the lease on key unless it is released or this store has seen it expire.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	v, ok, err := s.read(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok || !v.live() {
		return nil, store.ErrNotFound
	}
	return v.lease(), nil
}

// ForceRelease marks whatever live lease holds key forced; its lock-delay follows.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil { // defaults an empty actor to "unknown", as ClearRest's
		return nil, err
	}
	// No lease ID: never the cached object, always a read.
	v, _, err := s.change(ctx, "force-release", p.Key, "", func(v *view, ok bool) (*record, error) {
		if !ok || !v.live() {
			return nil, store.ErrNotFound
		}
		next := *v.rec
		next.State, next.ForceReason, next.ForceActor = stateForced, p.Reason, p.Actor
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	return v.lease(), nil
}

// backoff waits a random time below attempt+1 times 10 ms, at most 80 ms, or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(min(attempt, 7)+1) * 10 * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
