package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton/store"
)

// maxAttempts bounds the read-and-write rounds of one call that keep losing races.
const maxAttempts = 16

// condFree is the condition of a grant made without reading first: no item, or a tombstone
// with no rest after it.
const condFree = "attribute_not_exists(#k) OR (#st <> :held AND #pn = :zero)"

// condSeen is the condition of a write decided on a read: the item is still the version read.
const condSeen = "#rvn = :seen"

// condHeldBy is the condition of a write to a held lease named by its ID (a renewal, a release,
// a re-acquire): still held, under that ID, by that owner. A lease written without an owner (by
// a library caller, or by an earlier version) has no own attribute: it is owner "" and only
// that. The owner's value, if any, is added to vals.
func condHeldBy(owner string, vals map[string]types.AttributeValue) string {
	if owner == "" {
		return "#st = :held AND #lid = :lid AND attribute_not_exists(#own)"
	}
	vals[":own"] = sv(owner)
	return "#st = :held AND #lid = :lid AND #own = :own"
}

func (s *Store) lease(it *item, ttlLeft time.Duration) *store.Lease {
	return &store.Lease{
		Key: it.key, ID: it.leaseID, Holder: it.holder, Owner: it.owner, Token: it.token, AcquiredAt: it.acquiredAt,
		ExpiresAt: s.wall().Add(ttlLeft), TTLLeft: ttlLeft, Metadata: it.metadata,
	}
}

// wrote records a version this store has just written, and decodes it.
func (s *Store) wrote(attrs map[string]types.AttributeValue, at time.Time) (*item, error) {
	it, err := decodeItem(attrs)
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, errors.New("dynamodb: the write returned no item")
	}
	s.seen.see(it.key, it.rvn, true, at)
	return it, nil
}

// grant writes a new lease under cond (condFree, or condSeen with seen).
func (s *Store) grant(ctx context.Context, p *store.AcquireParams, cond, seen string) (*store.Lease, error) {
	set := "SET #st = :held, #lid = :lid, #hold = :hold, #rvn = :rvn, #dur = :dur, #cd = :cd, #ld = :ld, #acq = :acq, #pn = :zero"
	vals := map[string]types.AttributeValue{
		":held": sv(stHeld), ":lid": sv(p.LeaseID), ":hold": sv(p.Holder), ":rvn": sv(newRVN()),
		":dur": nv(int64(p.TTL)), ":cd": nv(int64(p.Cooldown)), ":ld": nv(int64(p.LockDelay)),
		":acq": nv(s.wall().UnixNano()), ":zero": nv(0), ":one": nv(1), ":seen": sv(seen),
	}
	var remove []string // what an earlier lease of the item may have left
	if len(p.Metadata) > 0 {
		set += ", #md = :md"
		vals[":md"] = sv(string(p.Metadata))
	} else {
		remove = append(remove, "#md")
	}
	if p.Owner != "" {
		set += ", #own = :own"
		vals[":own"] = sv(p.Owner)
	} else {
		remove = append(remove, "#own")
	}
	if len(remove) > 0 {
		set += " REMOVE " + strings.Join(remove, ", ")
	}
	set += " ADD #tok :one"
	attrs, err := s.run(ctx, update{key: p.Key, set: set, cond: cond, vals: vals, returnVals: types.ReturnValueAllNew})
	if err != nil {
		return nil, err
	}
	it, err := s.wrote(attrs, s.now())
	if err != nil {
		return nil, err
	}
	return s.lease(it, p.TTL), nil
}

// extend gives the lease in it (still at version it.rvn) a new TTL and record version.
func (s *Store) extend(ctx context.Context, key, cond string, vals map[string]types.AttributeValue, ttl time.Duration) (*store.Lease, error) {
	vals[":rvn"], vals[":dur"] = sv(newRVN()), nv(int64(ttl))
	attrs, err := s.run(ctx, update{key: key, set: "SET #rvn = :rvn, #dur = :dur", cond: cond, vals: vals, returnVals: types.ReturnValueAllNew})
	if err != nil {
		return nil, err
	}
	it, err := s.wrote(attrs, s.now())
	if err != nil {
		return nil, err
	}
	return s.lease(it, ttl), nil
}

// Acquire first tries a grant on a free key without reading (unless this store last saw the key
// taken); if the key is taken it reads the item and decides on what it has observed
// (observe.go).
func (s *Store) Acquire(ctx context.Context, p *store.AcquireParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := store.RefuseBeyond("dynamodb", p); err != nil {
		return nil, err
	}
	for attempt := range maxAttempts {
		if err := pause(ctx, attempt); err != nil {
			return nil, err
		}
		if !s.seen.busy(p.Key) {
			l, err := s.grant(ctx, p, condFree, "")
			if !conditionFailed(err) {
				return l, err
			}
		}
		it, at, err := s.read(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		if it == nil {
			s.seen.forget(p.Key) // deleted: the next attempt grants without reading
			continue
		}
		l, err := s.decide(ctx, p, it, at)
		if !conditionFailed(err) {
			return l, err
		}
	}
	return nil, fmt.Errorf("dynamodb: acquire %q: too much contention", p.Key)
}

// decide answers an Acquire on the item it, read at instant at: a re-acquire by the same holder,
// a refusal, or a grant conditioned on the version read (a ConditionalCheckFailedException if
// the item changed meanwhile).
func (s *Store) decide(ctx context.Context, p *store.AcquireParams, it *item, at time.Time) (*store.Lease, error) {
	elapsed := s.seen.see(p.Key, it.rvn, it.state == stHeld || it.rest > 0, at)
	ttl := s.wait(it.ttl)
	if it.state == stHeld {
		if it.owner == p.Owner && (it.holder == p.Holder || it.leaseID == p.LeaseID) {
			// The same holder and owner (or a retried grant that had succeeded): keep the lease,
			// new TTL, as long as it is still that lease; guarded by its ID and owner rather
			// than the version read, so that the SDK's retry of an extension whose reply was
			// lost still succeeds. A lease of another owner is refused below like any other.
			vals := map[string]types.AttributeValue{":held": sv(stHeld), ":lid": sv(it.leaseID)}
			return s.extend(ctx, p.Key, condHeldBy(p.Owner, vals), vals, p.TTL)
		}
		if elapsed < ttl {
			left := ttl - elapsed
			return nil, &store.LockHeldError{Key: p.Key, Holder: it.holder, Token: it.token,
				ExpiresAt: s.wall().Add(left), RetryAfter: left}
		}
		if elapsed < ttl+it.lockDelay {
			return nil, &store.RestingError{Key: p.Key, Reason: store.ReasonLockDelay, Remaining: ttl + it.lockDelay - elapsed}
		}
		l, err := s.grant(ctx, p, condSeen, it.rvn)
		if l != nil {
			l.TookOver = true
		}
		return l, err
	}
	if elapsed < it.rest {
		reason := store.ReasonCooldown
		if it.state == stForced {
			reason = store.ReasonLockDelay
		}
		return nil, &store.RestingError{Key: p.Key, Reason: reason, Remaining: it.rest - elapsed}
	}
	return s.grant(ctx, p, condSeen, it.rvn)
}

// pause waits a little longer after each lost race (none before the first attempt), so that
// contenders spread out.
func pause(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	d := time.Duration(attempt) * 5 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Renew gives the lease a new TTL and record version, if it is still the key's lease and
// p.Owner's (in the write's condition: another owner's renewal changes nothing). A lease
// that no contender has taken over is still the key's, even past its TTL: like dynamolock,
// expiry is what contenders observe. The holder stops trusting it at its own deadline anyway.
func (s *Store) Renew(ctx context.Context, p *store.RenewParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	vals := map[string]types.AttributeValue{":held": sv(stHeld), ":lid": sv(p.LeaseID)}
	l, err := s.extend(ctx, p.Key, condHeldBy(p.Owner, vals), vals, p.TTL)
	if conditionFailed(err) {
		return nil, store.ErrNotHeld
	}
	return l, err
}

// Release turns the lease's item into a tombstone whose rest is the lease's cooldown, in one
// write guarded by the lease ID and owner; only when that is refused does it read, to tell
// "already released" (whoever asks: nothing changes) from "not held".
func (s *Store) Release(ctx context.Context, p *store.ReleaseParams) (*store.ReleaseResult, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rvn := newRVN()
	vals := map[string]types.AttributeValue{":released": sv(stReleased), ":rvn": sv(rvn), ":held": sv(stHeld), ":lid": sv(p.LeaseID)}
	attrs, err := s.run(ctx, update{key: p.Key,
		set:        "SET #st = :released, #rvn = :rvn, #pn = #cd",
		cond:       condHeldBy(p.Owner, vals),
		vals:       vals,
		returnVals: types.ReturnValueAllOld})
	if conditionFailed(err) {
		it, _, err := s.read(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		if it != nil && it.leaseID == p.LeaseID && it.state == stReleased {
			return &store.ReleaseResult{AlreadyReleased: true}, nil
		}
		return nil, store.ErrNotHeld
	}
	if err != nil {
		return nil, err
	}
	held, resting := time.Nanosecond, true
	if old, err := decodeItem(attrs); err == nil && old != nil {
		held = max(s.wall().Sub(old.acquiredAt), held) // wall clocks: a report, not a decision
		resting = old.cooldown > 0
	}
	s.seen.see(p.Key, rvn, resting, s.now())
	s.hub.Notify(p.Key)
	return &store.ReleaseResult{Held: held}, nil
}

// live returns the lease in it if it is held and this store has not seen it expire.
func (s *Store) live(it *item, at time.Time) *store.Lease {
	if it == nil || it.state != stHeld {
		return nil
	}
	elapsed, ttl := s.seen.see(it.key, it.rvn, true, at), s.wait(it.ttl)
	if elapsed >= ttl {
		return nil
	}
	return s.lease(it, ttl-elapsed)
}

// Get returns the live lease on key.
func (s *Store) Get(ctx context.Context, key string) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	it, at, err := s.read(ctx, key)
	if err != nil {
		return nil, err
	}
	if l := s.live(it, at); l != nil {
		return l, nil
	}
	return nil, store.ErrNotFound
}

// ForceRelease turns whatever live lease holds key into a tombstone whose rest is its
// lock-delay, guarded by the version read.
func (s *Store) ForceRelease(ctx context.Context, p *store.ForceReleaseParams) (*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	for attempt := range maxAttempts {
		if err := pause(ctx, attempt); err != nil {
			return nil, err
		}
		it, at, err := s.read(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		l := s.live(it, at)
		if l == nil {
			return nil, store.ErrNotFound
		}
		rvn := newRVN()
		_, err = s.run(ctx, update{key: p.Key,
			set:  "SET #st = :forced, #rvn = :rvn, #pn = #ld",
			cond: condSeen,
			vals: map[string]types.AttributeValue{":forced": sv(stForced), ":rvn": sv(rvn), ":seen": sv(it.rvn)}})
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.seen.see(p.Key, rvn, it.lockDelay > 0, s.now())
		s.hub.Notify(p.Key)
		return l, nil
	}
	return nil, fmt.Errorf("dynamodb: force-release %q: too much contention", p.Key)
}
