package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton/store"
)

// ClearRest ends the rest of a key that no live lease holds, guarded by the version read: a
// tombstone gets no rest (pn = 0); a lease that expired and rests for its lock-delay becomes a
// forced tombstone without rest, so the next grant is not reported as a takeover. The rest's
// remaining time is measured like Acquire's, from when this store first saw the item's version
// (see observe.go). No audit log.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
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
		if it == nil {
			return nil, store.ErrNotFound
		}
		elapsed := s.seen.see(p.Key, it.rvn, it.state == stHeld || it.rest > 0, at)
		ttl := s.wait(it.ttl)
		rest := &store.Rest{Key: p.Key, Reason: store.ReasonLockDelay}
		switch {
		case it.state == stHeld && elapsed >= ttl && elapsed < ttl+it.lockDelay:
			rest.Remaining = ttl + it.lockDelay - elapsed
		case it.state != stHeld && elapsed < it.rest:
			rest.Remaining = it.rest - elapsed
			if it.state == stReleased {
				rest.Reason = store.ReasonCooldown
			}
		default:
			return nil, store.ErrNotFound // free, or held
		}
		set := "SET #rvn = :rvn, #pn = :zero"
		if it.state == stHeld {
			set = "SET #st = :forced, #rvn = :rvn, #pn = :zero"
		}
		rvn := newRVN()
		_, err = s.run(ctx, update{key: p.Key, set: set, cond: condSeen,
			vals: map[string]types.AttributeValue{":forced": sv(stForced), ":rvn": sv(rvn), ":zero": nv(0), ":seen": sv(it.rvn)}})
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.seen.see(p.Key, rvn, false, s.now())
		s.hub.Notify(p.Key)
		return rest, nil
	}
	return nil, fmt.Errorf("dynamodb: clear-rest %q: too much contention", p.Key)
}
