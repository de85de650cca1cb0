package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/store"
)

// clearRestScript ends the cooldown or lock-delay of a key that no live lease holds, keeping
// the record (and its retention) otherwise as it was, and publishes so that waiters retry.
// KEYS lease, shadow, rest (the earlier layout's), channel. ARGV key.
// Replies: {"ok", reason, remaining ms} or {"notfound"}.
var clearRestScript = goredis.NewScript(prelude + `
if hash then
  return {'notfound'}
end
if not found then
  local pt = redis.call('PTTL', KEYS[3])
  if pt > 0 then
    local reason = redis.call('GET', KEYS[3])
    redis.call('DEL', KEYS[3])
    redis.call('PUBLISH', KEYS[4], ARGV[1])
    return {'ok', reason, pt}
  end
  local sh = redis.call('HMGET', KEYS[2], 'ended', 'avail')
  local avail = tonumber(sh[2] or '0')
  if sh[1] == '0' and avail > now then
    redis.call('HSET', KEYS[2], 'avail', now)
    redis.call('PUBLISH', KEYS[4], ARGV[1])
    return {'ok', 'lock-delay', avail - now}
  end
  return {'notfound'}
end
local left, reason = 0, ''
if st == 0 then
  if exp > now then
    return {'notfound'}
  end
  left, reason = exp + ld - now, 'lock-delay'
  if left > 0 then
    ld = now - exp
  end
else
  left, reason = ru - now, rr
  if left > 0 then
    ru, rr = 0, ''
  end
end
if left <= 0 then
  return {'notfound'}
end
` + put("redis.call('PTTL', KEYS[1])") + `
redis.call('PUBLISH', KEYS[4], ARGV[1])
return {'ok', reason, left}
`)

// clearRest runs clearRestScript: status "ok" with the rest's reason and what was left of it
// (wait), or "notfound".
func (n *node) clearRest(ctx context.Context, key string) (*reply, error) {
	v, err := clearRestScript.Run(ctx, n.rdb,
		[]string{n.leaseKey(key), n.shadowKey(key), n.restKey(key), n.channel}, key).Slice()
	if err != nil {
		return nil, err
	}
	return &reply{status: str(v, 0), reason: str(v, 1), wait: time.Duration(num(v, 2)) * time.Millisecond}, nil
}

// ClearRest ends the cooldown or lock-delay of a key that no live lease holds. No audit log.
func (s *Store) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := s.n.clearRest(ctx, p.Key)
	if err != nil {
		return nil, s.wrap(err)
	}
	if r.status != "ok" {
		return nil, store.ErrNotFound
	}
	s.hub.Notify(p.Key)
	return &store.Rest{Key: p.Key, Reason: r.reason, Remaining: r.wait}, nil
}

// ClearRest ends the rest on every node that has one; it returns the longest that was left,
// or ErrNotFound if no node had one.
func (s *RedlockStore) ClearRest(ctx context.Context, p *store.ClearRestParams) (*store.Rest, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	replies, errs := s.each(ctx, s.nodeTimeout, func(ctx context.Context, n *node) (*reply, error) {
		return n.clearRest(ctx, p.Key)
	})
	var best *reply
	for _, r := range replies {
		if r != nil && r.status == "ok" && (best == nil || r.wait > best.wait) {
			best = r
		}
	}
	if best != nil {
		s.hub.Notify(p.Key)
		return &store.Rest{Key: p.Key, Reason: best.reason, Remaining: best.wait}, nil
	}
	if err := s.tooManyFailed(errs, "clear-rest "+p.Key); err != nil {
		return nil, err
	}
	return nil, store.ErrNotFound
}
