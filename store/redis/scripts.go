package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each lease operation is one script, so one round trip and one atomic step on
// the server. Scripts read the server's clock with TIME (allowed since Redis 5's effects
// replication).
//
// Keys of one lease key K under prefix P (the layout since 2026-11-22; the earlier one is below):
//
//	P lease:K   a string: one MessagePack record (cmsgpack, built into Redis's Lua) of the key's
//	            latest lease and what happened to it, the lease and its former "shadow" and "rest"
//	            keys folded into one key:
//	              1 (the format), id, holder, token, acqs, acqu (TIME's seconds and µs at the
//	              grant), md (metadata, '' if none), cd (cooldown ms), ld (lock-delay ms),
//	              w (1: a waiting acquire was refused by this lease: its end publishes),
//	              exp (ms: the lease's expiry), st (0 granted, 1 released by its ID, 2
//	              force-released), ru (ms: the cooldown or lock-delay after the end runs until
//	              ru, 0 if none), rr (its reason: "cooldown" or "lock-delay").
//	            The lease is live while st = 0 and exp > now (the server's TIME): liveness is
//	            checked by the scripts, not by the key's existence. st = 0 and exp <= now: it
//	            expired without a release, the key rests until exp + ld and the next grant is a
//	            takeover. The key's PX is the record's retention: while live, TTL + ld +
//	            ShadowRetention past the grant or renew; after a release cd + ShadowRetention,
//	            after a force-release ld + ShadowRetention. A key used within that time keeps a
//	            record, so a grant reads and writes this one key (and INCRs the counter): 4 calls.
//	P wake:K    a string with PX = the lease's remaining TTL, written only when a waiting
//	            acquire marks the lease (w) and the server publishes expiry events: its expiry
//	            event wakes waiters when the lease expires (the record outlives the lease, so its
//	            own expiry is no signal). Deleted by the lease's end.
//	P token     the store-wide token counter, INCRed by grants only. Never deleted, no expiry.
//	P released  the Pub/Sub channel of releases of leases with waiters (w); the payload is K.
//
// The earlier layout (before 2026-11-22), which the scripts still serve, so that leases granted
// and pauses started by an earlier version keep their guarantees across an upgrade:
//
//	P lease:K   a hash id, holder, token, acq, acqs, acqu, md, cd, ld, w; PX = TTL (it exists
//	            only while its lease lives).
//	P shadow:K  a hash id, ended (0 live when written, 1 released, 2 force-released), avail
//	            (ms, with ended=0: expiry + lock-delay), r; PX = retention.
//	P rest:K    a string "cooldown" or "lock-delay" with PX = the pause.
//
// A lease:K hash with an id is a live lease of the earlier layout: every script serves it in
// that layout (renew, release, force-release, re-acquire by its holder, waiter mark) until it
// ends, so a process of the earlier version that still runs keeps working on it. A grant on a
// key without a record reads the earlier layout's shadow and rest keys if any exists (one
// EXISTS otherwise) and honours them (lock-delay after an expiry, TookOver, cooldown,
// AlreadyReleased), and the grant writes the record and deletes them: converted on touch. The
// token counter is the same key in both layouts, so tokens keep increasing across the upgrade.
// A process of the earlier version that meets a record fails (WRONGTYPE: its scripts read the
// key as a hash first) without writing anything: it never grants over a record.

// prelude is shared by every script: the server clock in milliseconds, and the record's codec.
const prelude = `
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local function dec(raw)
  local v, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr = cmsgpack.unpack(raw)
  return {id = id, holder = holder, tok = tok, acqs = acqs, acqu = acqu, md = md, cd = cd, ld = ld,
    w = w, exp = exp, st = st, ru = ru, rr = rr}
end
local function put(key, r, px)
  redis.call('SET', key, cmsgpack.pack(1, r.id, r.holder, r.tok, r.acqs, r.acqu, r.md, r.cd, r.ld,
    r.w, r.exp, r.st, r.ru, r.rr), 'PX', math.max(1, px))
end
local function acqms(r)
  return r.acqs * 1000 + (r.acqu - r.acqu % 1000) / 1000
end
-- load reads the record of KEYS[1]: the record (a table), false if the key is absent, or
-- 'hash' if it is a hash (the earlier layout).
local function load()
  local raw = redis.pcall('GET', KEYS[1])
  if type(raw) == 'table' then
    return 'hash'
  end
  if raw then
    return dec(raw)
  end
  return false
end
-- legacy reads the earlier layout's shadow (KEYS[2]) and rest (KEYS[3]) keys into a record
-- (flag old), or returns false if neither exists.
local function legacy()
  if redis.call('EXISTS', KEYS[2], KEYS[3]) == 0 then
    return false
  end
  local sh = redis.call('HMGET', KEYS[2], 'id', 'ended', 'avail')
  local r = {old = true, id = sh[1] or '', st = tonumber(sh[2] or '1'), exp = now, ld = 0, ru = 0, rr = ''}
  if r.st == 0 then
    r.ld = math.max(0, tonumber(sh[3] or '0') - now)
  end
  local rest = redis.call('GET', KEYS[3])
  if rest then
    r.ru = now + redis.call('PTTL', KEYS[3])
    r.rr = rest
  end
  return r
end
`

// acquireScript: KEYS lease, shadow, rest (the earlier layout's), token, wake. ARGV id, holder,
// ttl ms, metadata, cooldown ms, lock-delay ms, token floor (refuse with "reset" if the counter is
// below it), retention ms, raise (first raise the counter to at least this; Redlock's
// write-back, 0 for a single node), wait ("1": the caller will wait if refused; a refusal by
// another holder's live lease then sets the lease's w mark, so that its end publishes), events
// ("1": the server publishes expiry events; a mark then also writes the wake key).
//
// The counter is read before INCR only when there is something to raise. Otherwise INCR runs
// first and is undone (DECR, in the same atomic script, so no one sees it) if the counter was
// below the floor.
//
// Replies: {"new", token, acq, tookOver} (a grant: ID, holder, metadata and TTL are the
// caller's), {"ok", id, holder, token, acq, exp, ttlLeft, md, tookOver, renewed} (a renewal),
// {"held", id, holder, token, acq, exp, ttlLeft, md}, {"rest", reason, remaining},
// {"reset", counter}.
var acquireScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[3])
local ret = tonumber(ARGV[8])
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
  if cur[1] then
    -- A live lease of the earlier layout: served in that layout.
    if cur[2] == ARGV[2] then
      local ld = tonumber(cur[6] or '0')
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
      redis.call('PEXPIRE', KEYS[2], ttl + ld + ret)
      return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', '0', '1'}
    end
    if ARGV[10] == '1' and not cur[7] then
      redis.call('HSET', KEYS[1], 'w', '1')
    end
    local pttl = redis.call('PTTL', KEYS[1])
    return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
  end
  r = false -- a stray hash without an id: overwritten below
end
if not r then
  r = legacy()
end
if r and r.st == 0 and r.exp > now then
  if r.holder == ARGV[2] then
    r.exp = now + ttl
    put(KEYS[1], r, ttl + r.ld + ret)
    if r.w == 1 and ARGV[11] == '1' then
      redis.call('SET', KEYS[5], '', 'PX', ttl)
    end
    return {'ok', r.id, r.holder, r.tok, acqms(r), r.exp, ttl, r.md, '0', '1'}
  end
  if ARGV[10] == '1' and r.w ~= 1 then
    r.w = 1
    put(KEYS[1], r, r.exp + r.ld + ret - now)
    if ARGV[11] == '1' then
      redis.call('SET', KEYS[5], '', 'PX', r.exp - now)
    end
  end
  return {'held', r.id, r.holder, r.tok, acqms(r), r.exp, r.exp - now, r.md}
end
local took = '0'
if r then
  if r.st == 0 then
    if r.exp + r.ld > now then
      return {'rest', 'lock-delay', r.exp + r.ld - now}
    end
    took = '1'
  elseif r.ru > now then
    return {'rest', r.rr, r.ru - now}
  end
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
put(KEYS[1], {id = ARGV[1], holder = ARGV[2], tok = tok, acqs = tonumber(t[1]), acqu = tonumber(t[2]),
  md = ARGV[4], cd = tonumber(ARGV[5]), ld = ld, w = 0, exp = now + ttl, st = 0, ru = 0, rr = ''},
  ttl + ld + ret)
if r and r.old then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return {'new', tok, now, took}
`)

// renewScript: KEYS lease, shadow (the earlier layout's), wake. ARGV id, ttl ms, retention ms,
// events. Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md, cd, ld} or {"nothld"}. cd and
// ld (the lease's cooldown and lock-delay, ms) let Redlock restore the lease on a node that lost
// it.
var renewScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'cd')
  if cur[1] ~= ARGV[1] then
    return {'nothld'}
  end
  local ld = tonumber(cur[6] or '0')
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
  redis.call('PEXPIRE', KEYS[2], ttl + ld + tonumber(ARGV[3]))
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', cur[7] or '0', cur[6] or '0'}
end
if not r or r.id ~= ARGV[1] or r.st ~= 0 or r.exp <= now then
  return {'nothld'}
end
r.exp = now + ttl
put(KEYS[1], r, ttl + r.ld + tonumber(ARGV[3]))
if r.w == 1 and ARGV[4] == '1' then
  redis.call('SET', KEYS[3], '', 'PX', ttl)
end
return {'ok', r.id, r.holder, r.tok, acqms(r), r.exp, ttl, r.md, r.cd, r.ld}
`)

// restoreScript: Redlock's renew puts a lease back on a node that lost it (restarted empty, or
// the lease expired there while the node was cut off) while other nodes still renew it, so
// that the holder's majority heals instead of shrinking with every restart. It writes only if
// the node is free for this lease: no live lease on the key (another lease is a lost vote:
// "held"), no cooldown or lock-delay (another lease's, or a pause: a lost vote: "rest"), and this
// lease ID was not released or force-released on this node ("nothld": an end the holder must not
// undo). The lease is written as a grant would have written it, with the ID, holder, token,
// acquisition time, metadata, cooldown and lock-delay that the renewing nodes hold (not a new
// token), and the token counter raised to at least the token.
//
// KEYS lease, shadow, rest (the earlier layout's), token. ARGV id, holder, ttl ms, token, acq ms,
// acq s, acq µs, md, cooldown ms, lock-delay ms, retention ms.
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} (restored, or renewed if this ID is
// there already), {"held", id, holder, token, acq, exp, ttlLeft, md}, {"rest", reason,
// remaining}, {"nothld"}.
var restoreScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[3])
local ld = tonumber(ARGV[10])
local ret = tonumber(ARGV[11])
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
  if cur[1] == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ld)
    redis.call('PEXPIRE', KEYS[2], ttl + ld + ret)
    return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or ''}
  end
  if cur[1] then
    local pttl = redis.call('PTTL', KEYS[1])
    return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
  end
  r = false
end
if not r then
  r = legacy()
end
if r then
  if r.st == 0 and r.exp > now then
    if r.id == ARGV[1] then
      r.exp = now + ttl
      put(KEYS[1], r, ttl + r.ld + ret)
      return {'ok', r.id, r.holder, r.tok, acqms(r), r.exp, ttl, r.md}
    end
    return {'held', r.id, r.holder, r.tok, acqms(r), r.exp, r.exp - now, r.md}
  end
  if r.id == ARGV[1] and r.st ~= 0 then
    return {'nothld'}
  end
  if r.id ~= ARGV[1] and r.st == 0 and r.exp + r.ld > now then
    return {'rest', 'lock-delay', r.exp + r.ld - now}
  end
  if r.ru > now then
    return {'rest', r.rr, r.ru - now}
  end
end
if tonumber(redis.call('GET', KEYS[4]) or '0') < tonumber(ARGV[4]) then
  redis.call('SET', KEYS[4], ARGV[4])
end
put(KEYS[1], {id = ARGV[1], holder = ARGV[2], tok = tonumber(ARGV[4]), acqs = tonumber(ARGV[6]),
  acqu = tonumber(ARGV[7]), md = ARGV[8], cd = tonumber(ARGV[9]), ld = ld, w = 0, exp = now + ttl,
  st = 0, ru = 0, rr = ''}, ttl + ld + ret)
if r and r.old then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return {'ok', ARGV[1], ARGV[2], ARGV[4], ARGV[5], now + ttl, ttl, ARGV[8]}
`)

// releaseScript: KEYS lease, shadow, rest (the earlier layout's), channel, wake. ARGV id, key,
// retention ms, always ("1": publish even if no waiter marked the lease; Redlock, whose waiters
// may have been marked on other nodes only).
// Replies: {"ok", held µs}, {"already"}, {"nothld"}.
var releaseScript = goredis.NewScript(prelude + `
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'acqs', 'acqu', 'cd', 'w')
  if cur[1] == ARGV[1] then
    redis.call('DEL', KEYS[1])
    local cd = tonumber(cur[4] or '0')
    local rs = '0'
    if cd > 0 then
      redis.call('SET', KEYS[3], 'cooldown', 'PX', cd)
      rs = '1'
    end
    redis.call('HSET', KEYS[2], 'id', ARGV[1], 'ended', '1', 'r', rs)
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
    if cur[5] or ARGV[4] == '1' then
      redis.call('PUBLISH', KEYS[4], ARGV[2])
    end
    local held = (tonumber(t[1]) - tonumber(cur[2] or t[1])) * 1000000 + (tonumber(t[2]) - tonumber(cur[3] or t[2]))
    return {'ok', held}
  end
  r = false
end
if not r then
  local sh = redis.call('HMGET', KEYS[2], 'id', 'ended')
  if sh[1] == ARGV[1] and sh[2] == '1' then
    return {'already'}
  end
  return {'nothld'}
end
if r.id ~= ARGV[1] then
  return {'nothld'}
end
if r.st == 1 then
  return {'already'}
end
if r.st ~= 0 or r.exp <= now then
  return {'nothld'}
end
local w = r.w
r.st, r.w = 1, 0
if r.cd > 0 then
  r.ru, r.rr = now + r.cd, 'cooldown'
end
put(KEYS[1], r, r.cd + tonumber(ARGV[3]))
if w == 1 then
  redis.call('DEL', KEYS[5])
end
if w == 1 or ARGV[4] == '1' then
  redis.call('PUBLISH', KEYS[4], ARGV[2])
end
return {'ok', (tonumber(t[1]) - r.acqs) * 1000000 + (tonumber(t[2]) - r.acqu)}
`)

// forceReleaseScript: KEYS lease, shadow, rest (the earlier layout's), channel, wake. ARGV key,
// retention ms, always (as for releaseScript).
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"notfound"}.
var forceReleaseScript = goredis.NewScript(prelude + `
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
  if not cur[1] then
    return {'notfound'}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  local ld = tonumber(cur[6] or '0')
  local rs = '0'
  if ld > 0 then
    redis.call('SET', KEYS[3], 'lock-delay', 'PX', ld)
    rs = '1'
  end
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '2', 'r', rs)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
  if cur[7] or ARGV[3] == '1' then
    redis.call('PUBLISH', KEYS[4], ARGV[1])
  end
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
if not r or r.st ~= 0 or r.exp <= now then
  return {'notfound'}
end
local exp, w = r.exp, r.w
r.st, r.w = 2, 0
if r.ld > 0 then
  r.ru, r.rr = now + r.ld, 'lock-delay'
end
put(KEYS[1], r, r.ld + tonumber(ARGV[2]))
if w == 1 then
  redis.call('DEL', KEYS[5])
end
if w == 1 or ARGV[3] == '1' then
  redis.call('PUBLISH', KEYS[4], ARGV[1])
end
return {'ok', r.id, r.holder, r.tok, acqms(r), exp, exp - now, r.md}
`)

// rollbackScript undoes a Redlock grant that did not reach a quorum: it deletes the lease (and,
// in the earlier layout, its shadow) if it is still this ID's and not ended, leaving no cooldown
// or lock-delay behind, and publishes so that waiters retry. KEYS lease, shadow, channel, wake.
// ARGV id, key. Reply: 1 if deleted.
var rollbackScript = goredis.NewScript(prelude + `
local r = load()
if r == 'hash' then
  if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
    redis.call('DEL', KEYS[1])
    if redis.call('HGET', KEYS[2], 'id') == ARGV[1] then
      redis.call('DEL', KEYS[2])
    end
    redis.call('PUBLISH', KEYS[3], ARGV[2])
    return 1
  end
  return 0
end
if r and r.id == ARGV[1] and r.st == 0 then
  redis.call('DEL', KEYS[1], KEYS[4])
  redis.call('PUBLISH', KEYS[3], ARGV[2])
  return 1
end
return 0
`)

// getScript: KEYS lease. Reply: {"ok", id, holder, token, acq, exp, ttlLeft, md} or {"notfound"}.
var getScript = goredis.NewScript(prelude + `
local r = load()
if r == 'hash' then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
  if not cur[1] then
    return {'notfound'}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
if not r or r.st ~= 0 or r.exp <= now then
  return {'notfound'}
end
return {'ok', r.id, r.holder, r.tok, acqms(r), r.exp, r.exp - now, r.md}
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
