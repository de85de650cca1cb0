package kubernetes

import (
	"context"

	"github.com/batonhq/baton/store"
)

// ClearRest ends the rest of a key that no live lease holds by writing its record without one:
// a released record with no cooldown, a forced record with no lock-delay (a lease that expired
// and rests for its lock-delay becomes forced, so the next grant is not reported as a
// takeover). The rest's remaining time is measured like Acquire's, from when this store first
// saw the object's resourceVersion. The write's new resourceVersion wakes waiters through the
// watch. No audit log beyond the force-reason and force-actor annotations.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var rest *store.Rest
	_, _, err := s.change(ctx, "clear-rest", p.Key, "", func(v *view, ok bool) (*record, error) {
		if !ok || v.live() {
			return nil, store.ErrNotFound
		}
		rec := v.rec
		next := *rec
		rest = &store.Rest{Key: p.Key, Reason: store.ReasonLockDelay}
		switch rec.State {
		case stateHeld: // expired for this store
			rest.Remaining = v.ttl + rec.LockDelay - v.unchanged
			next.State, next.ForceReason, next.ForceActor = stateForced, p.Reason, p.Actor
			next.LockDelay = 0
		case stateForced:
			rest.Remaining = rec.LockDelay - v.unchanged
			next.LockDelay, next.ForceReason, next.ForceActor = 0, p.Reason, p.Actor
		default:
			rest.Reason, rest.Remaining = store.ReasonCooldown, rec.Cooldown-v.unchanged
			next.Cooldown = 0
		}
		if rest.Remaining <= 0 {
			return nil, store.ErrNotFound
		}
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	s.hub.Notify(p.Key)
	return rest, nil
}
