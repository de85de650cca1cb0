package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each lease operation is one script, so one round trip and one atomic step on
// the server. Scripts read the server's clock with TIME (allowed since Redis 5's effects
// replication; within a script every expiry check uses the script's start time, so a key set
// with PX in a script expires at exactly now+PX as the script computed it).
//
// Keys of one lease key K under prefix P:
//
//	P lease:K   hash id, holder, token, acq (ms; acqs, acqu: TIME's seconds and µs), md, cd (cooldown ms), ld (lock-delay ms); PX = TTL.
//	P shadow:K  hash id, ended, avail (ms); outlives the lease by ld + ShadowRetention.
//	            ended=0: the lease was live when last written; if lease:K is gone, it expired
//	            without a release: the key is resting until avail (= expiry + lock-delay), and
//	            the next grant is a takeover. ended=1: released cleanly by id (a second release
//	            by the same id is AlreadyReleased). ended=2: force-released.
//	P rest:K    string "cooldown" or "lock-delay", PX = the pause after a release / force-release.
//	P token     the store-wide token counter, INCRed by grants only. Never deleted, no expiry.
//	P released  the Pub/Sub channel of releases; the payload is K.

// nowMS is shared by every script: the server clock in milliseconds.
const nowMS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// acquireScript: KEYS lease, shadow, rest, token. ARGV id, holder, ttl ms, metadata, cooldown ms,
// lock-delay ms, token floor (refuse with "reset" if the counter is below it), shadow retention ms,
// raise (first raise the counter to at least this; Redlock's write-back, 0 for a single node).
//
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md, tookOver, renewed}
// {"held", id, holder, token, acq, exp, ttlLeft, md}, {"rest", reason, remaining},
// {"reset", counter}.
var acquireScript = goredis.NewScript(nowMS + `
local ttl = tonumber(ARGV[3])
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld')
if cur[1] then
  if cur[2] == ARGV[2] then
    local ld = tonumber(cur[6] or '0')
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
    redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[8]))
    return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', '0', '1'}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
local rest = redis.call('GET', KEYS[3])
if rest then
  return {'rest', rest, redis.call('PTTL', KEYS[3])}
end
local took = '0'
local sh = redis.call('HMGET', KEYS[2], 'ended', 'avail')
if sh[1] == '0' then
  local avail = tonumber(sh[2])
  if avail > now then
    return {'rest', 'lock-delay', avail - now}
  end
  took = '1'
end
local c = tonumber(redis.call('GET', KEYS[4]) or '0')
if tonumber(ARGV[9]) > c then
  redis.call('SET', KEYS[4], ARGV[9])
  c = tonumber(ARGV[9])
end
if c < tonumber(ARGV[7]) then
  return {'reset', c}
end
local tok = redis.call('INCR', KEYS[4])
local ld = tonumber(ARGV[6])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'holder', ARGV[2], 'token', tok, 'acq', now, 'acqs', t[1], 'acqu', t[2],
  'md', ARGV[4], 'cd', ARGV[5], 'ld', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '0', 'avail', now + ttl + ld)
redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[8]))
return {'ok', ARGV[1], ARGV[2], tok, now, now + ttl, ttl, ARGV[4], took, '0'}
`)

// renewScript: KEYS lease, shadow. ARGV id, ttl ms, shadow retention ms.
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"nothld"}.
var renewScript = goredis.NewScript(nowMS + `
local ttl = tonumber(ARGV[2])
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld')
if cur[1] ~= ARGV[1] then
  return {'nothld'}
end
local ld = tonumber(cur[6] or '0')
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[3]))
return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or ''}
`)

// releaseScript: KEYS lease, shadow, rest, channel. ARGV id, key, shadow retention ms.
// Replies: {"ok", held µs}, {"already"}, {"nothld"}.
var releaseScript = goredis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'id', 'acqs', 'acqu', 'cd')
if cur[1] == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '1')
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
  local cd = tonumber(cur[4] or '0')
  if cd > 0 then
    redis.call('SET', KEYS[3], 'cooldown', 'PX', cd)
  end
  redis.call('PUBLISH', KEYS[4], ARGV[2])
  local held = (tonumber(t[1]) - tonumber(cur[2] or t[1])) * 1000000 + (tonumber(t[2]) - tonumber(cur[3] or t[2]))
  return {'ok', held}
end
local sh = redis.call('HMGET', KEYS[2], 'id', 'ended')
if sh[1] == ARGV[1] and sh[2] == '1' then
  return {'already'}
end
return {'nothld'}
`)

// forceReleaseScript: KEYS lease, shadow, rest, channel. ARGV key, shadow retention ms.
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"notfound"}.
var forceReleaseScript = goredis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld')
if not cur[1] then
  return {'notfound'}
end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '2')
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
local ld = tonumber(cur[6] or '0')
if ld > 0 then
  redis.call('SET', KEYS[3], 'lock-delay', 'PX', ld)
end
redis.call('PUBLISH', KEYS[4], ARGV[1])
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
