package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each lease operation is one script, so one round trip and one atomic step on
// the server. Scripts read the server's clock with TIME (allowed since Redis 5's effects
// replication; within a script every expiry check uses the script's start time, so a key set
// with PX in a script expires at exactly now+PX as the script computed it).
//
// Keys of one lease key K under prefix P:
//
//	P lease:K   hash id, holder, token, acq (ms; acqs, acqu: TIME's seconds and µs), md, cd (cooldown ms), ld (lock-delay ms)
//	            (md, cd, ld absent: '', 0, 0),
//	            w ("1" once a waiting acquire was refused by this lease: its end publishes); PX = TTL.
//	P shadow:K  hash id, ended, avail (ms), r ("1": the end started a rest:K pause; absent if unknown);
//	            outlives the lease by ld + ShadowRetention. avail is meaningful with ended=0 only.
//	            ended=0: the lease was live when last written; if lease:K is gone, it expired
//	            without a release: the key is resting until avail (= expiry + lock-delay), and
//	            the next grant is a takeover. ended=1: released cleanly by id (a second release
//	            by the same id is AlreadyReleased). ended=2: force-released.
//	P rest:K    string "cooldown" or "lock-delay", PX = the pause after a release / force-release.
//	P token     the store-wide token counter, INCRed by grants only. Never deleted, no expiry.
//	P released  the Pub/Sub channel of releases of leases with waiters (w); the payload is K.

// nowMS is shared by every script: the server clock in milliseconds.
const nowMS = `
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
`

// acquireScript: KEYS lease, shadow, rest, token. ARGV id, holder, ttl ms, metadata, cooldown ms,
// lock-delay ms, token floor (refuse with "reset" if the counter is below it), shadow retention ms,
// raise (first raise the counter to at least this; Redlock's write-back, 0 for a single node),
// wait ("1": the caller will wait if refused; a refusal by another holder's live lease then sets
// the lease's w field, so that its release publishes).
//
// The common paths are kept to few calls, because each redis.call costs about a microsecond of
// the server's single thread: the rest key is read only when the shadow cannot rule it out (a
// shadow with ended=0 means no pause was started since that grant; ended=1 or 2 with r=0 means
// that release started none), and the counter is read before INCR only when there is something
// to raise. Otherwise INCR runs first and is undone (DECR, in the same atomic script, so no one
// sees it) if the counter was below the floor.
//
// Replies: {"new", token, acq, tookOver} (a grant: ID, holder, metadata and TTL are the
// caller's), {"ok", id, holder, token, acq, exp, ttlLeft, md, tookOver, renewed} (a renewal),
// {"held", id, holder, token, acq, exp, ttlLeft, md}, {"rest", reason, remaining},
// {"reset", counter}.
var acquireScript = goredis.NewScript(nowMS + `
local ttl = tonumber(ARGV[3])
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
if cur[1] then
  if cur[2] == ARGV[2] then
    local ld = tonumber(cur[6] or '0')
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
    redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[8]))
    return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', '0', '1'}
  end
  if ARGV[10] == '1' and not cur[7] then
    redis.call('HSET', KEYS[1], 'w', '1')
  end
  local pttl = redis.call('PTTL', KEYS[1])
  return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
local sh = redis.call('HMGET', KEYS[2], 'ended', 'avail', 'r')
if sh[1] ~= '0' and not ((sh[1] == '1' or sh[1] == '2') and sh[3] == '0') then
  local rest = redis.call('GET', KEYS[3])
  if rest then
    return {'rest', rest, redis.call('PTTL', KEYS[3])}
  end
end
local took = '0'
if sh[1] == '0' then
  local avail = tonumber(sh[2])
  if avail > now then
    return {'rest', 'lock-delay', avail - now}
  end
  took = '1'
end
local tok
local floor = tonumber(ARGV[7])
if ARGV[9] ~= '0' then
  local c = tonumber(redis.call('GET', KEYS[4]) or '0')
  if tonumber(ARGV[9]) > c then
    redis.call('SET', KEYS[4], ARGV[9])
    c = tonumber(ARGV[9])
  end
  if c < floor then
    return {'reset', c}
  end
  tok = redis.call('INCR', KEYS[4])
else
  tok = redis.call('INCR', KEYS[4])
  if tok - 1 < floor then
    redis.call('DECR', KEYS[4])
    return {'reset', tok - 1}
  end
end
local ld = tonumber(ARGV[6])
if cur[2] or cur[6] or cur[7] then
  redis.call('DEL', KEYS[1]) -- a stray hash without an id: start clean
end
if ARGV[4] == '' and ARGV[5] == '0' and ARGV[6] == '0' then
  -- md, cd and ld read as '', 0 and 0 when absent: the common lease writes fewer fields.
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'holder', ARGV[2], 'token', tok, 'acq', now, 'acqs', t[1], 'acqu', t[2])
else
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'holder', ARGV[2], 'token', tok, 'acq', now, 'acqs', t[1], 'acqu', t[2],
    'md', ARGV[4], 'cd', ARGV[5], 'ld', ARGV[6])
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '0', 'avail', now + ttl + ld, 'r', '0')
redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[8]))
return {'new', tok, now, took}
`)

// renewScript: KEYS lease, shadow. ARGV id, ttl ms, shadow retention ms.
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md, cd, ld} or {"nothld"}. cd and ld
// (the lease's cooldown and lock-delay, ms) let Redlock restore the lease on a node that lost it.
var renewScript = goredis.NewScript(nowMS + `
local ttl = tonumber(ARGV[2])
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'cd')
if cur[1] ~= ARGV[1] then
  return {'nothld'}
end
local ld = tonumber(cur[6] or '0')
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[3]))
return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', cur[7] or '0', cur[6] or '0'}
`)

// restoreScript: Redlock's renew puts a lease back on a node that lost it (restarted empty, or
// the lease expired there while the node was cut off) while other nodes still renew it, so
// that the holder's majority heals instead of shrinking with every restart. It writes only if
// the node is free for this lease: no lease on the key (another lease is a lost vote: "held"),
// no rest:K pause and no other lease's lock-delay (a lost vote: "rest"), and this lease ID was
// not released or force-released on this node ("nothld": an end the holder must not undo).
// The lease is written as a grant would have written it, with the ID, holder, token, acquisition
// time, metadata, cooldown and lock-delay that the renewing nodes hold (not a new token), the
// shadow record of a live lease, and the token counter raised to at least the token.
//
// KEYS lease, shadow, rest, token. ARGV id, holder, ttl ms, token, acq ms, acq s, acq µs, md,
// cooldown ms, lock-delay ms, shadow retention ms.
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} (restored, or renewed if this ID is
// there already), {"held", id, holder, token, acq, exp, ttlLeft, md}, {"rest", reason,
// remaining}, {"nothld"}.
var restoreScript = goredis.NewScript(nowMS + `
local ttl = tonumber(ARGV[3])
local ld = tonumber(ARGV[10])
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
if cur[1] == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
  redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[11]))
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or ''}
end
if cur[1] then
  local pttl = redis.call('PTTL', KEYS[1])
  return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
local sh = redis.call('HMGET', KEYS[2], 'id', 'ended', 'avail')
if sh[1] == ARGV[1] and sh[2] ~= '0' then
  return {'nothld'}
end
if sh[1] and sh[1] ~= ARGV[1] and sh[2] == '0' and tonumber(sh[3]) > now then
  return {'rest', 'lock-delay', tonumber(sh[3]) - now}
end
local rest = redis.call('GET', KEYS[3])
if rest then
  return {'rest', rest, redis.call('PTTL', KEYS[3])}
end
if tonumber(redis.call('GET', KEYS[4]) or '0') < tonumber(ARGV[4]) then
  redis.call('SET', KEYS[4], ARGV[4])
end
redis.call('DEL', KEYS[1]) -- a stray hash without an id: start clean
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'holder', ARGV[2], 'token', ARGV[4], 'acq', ARGV[5], 'acqs', ARGV[6], 'acqu', ARGV[7],
  'md', ARGV[8], 'cd', ARGV[9], 'ld', ARGV[10])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '0', 'avail', now + ttl + ld, 'r', '0')
redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[11]))
return {'ok', ARGV[1], ARGV[2], ARGV[4], ARGV[5], now + ttl, ttl, ARGV[8]}
`)

// releaseScript: KEYS lease, shadow, rest, channel. ARGV id, key, shadow retention ms, always
// ("1": publish even if no waiter marked the lease; Redlock, whose waiters may have been marked
// on other nodes only).
// Replies: {"ok", held µs}, {"already"}, {"nothld"}.
var releaseScript = goredis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'id', 'acqs', 'acqu', 'cd', 'w')
if cur[1] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local cd = tonumber(cur[4] or '0')
  local r = '0'
  if cd > 0 then
    redis.call('SET', KEYS[3], 'cooldown', 'PX', cd)
    r = '1'
  end
  redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '1', 'r', r)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
  if cur[5] or ARGV[4] == '1' then
    redis.call('PUBLISH', KEYS[4], ARGV[2])
  end
  local held = (tonumber(t[1]) - tonumber(cur[2] or t[1])) * 1000000 + (tonumber(t[2]) - tonumber(cur[3] or t[2]))
  return {'ok', held}
end
local sh = redis.call('HMGET', KEYS[2], 'id', 'ended')
if sh[1] == ARGV[1] and sh[2] == '1' then
  return {'already'}
end
return {'nothld'}
`)

// forceReleaseScript: KEYS lease, shadow, rest, channel. ARGV key, shadow retention ms, always
// (as for releaseScript).
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"notfound"}.
var forceReleaseScript = goredis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
if not cur[1] then
  return {'notfound'}
end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
local ld = tonumber(cur[6] or '0')
local r = '0'
if ld > 0 then
  redis.call('SET', KEYS[3], 'lock-delay', 'PX', ld)
  r = '1'
end
redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '2', 'r', r)
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
if cur[7] or ARGV[3] == '1' then
  redis.call('PUBLISH', KEYS[4], ARGV[1])
end
return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
`)

// rollbackScript undoes a Redlock grant that did not reach a quorum: it deletes the lease and its
// shadow if they are still this ID's, leaving no cooldown or lock-delay behind, and publishes so
// that waiters retry. KEYS lease, shadow, channel. ARGV id, key. Reply: 1 if deleted.
var rollbackScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('HGET', KEYS[2], 'id') == ARGV[1] then
    redis.call('DEL', KEYS[2])
  end
  redis.call('PUBLISH', KEYS[3], ARGV[2])
  return 1
end
return 0
`)

// getScript: KEYS lease. Reply: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"notfound"}.
var getScript = goredis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
if not cur[1] then
  return {'notfound'}
end
local pttl = redis.call('PTTL', KEYS[1])
return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
`)

// floorScript raises the token counter to ARGV[1] if it is lower, and returns the counter.
// KEYS token.
var floorScript = goredis.NewScript(`
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local f = tonumber(ARGV[1])
if c < f then
  redis.call('SET', KEYS[1], ARGV[1])
  return f
end
return c
`)
