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
//	              ru, 0 if none), rr (its reason: "cooldown" or "lock-delay"), and, only if the
//	              lease has one, ow (its owner, AcquireParams.Owner; never ''). A record of 14
//	              values has no owner: its owner is "" (see "Owners and the previous version").
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
// and rests started by an earlier version keep their guarantees across an upgrade:
//
//	P lease:K   a hash id, holder, token, acq, acqs, acqu, md, cd, ld, w; PX = TTL (it exists
//	            only while its lease lives).
//	P shadow:K  a hash id, ended (0 live when written, 1 released, 2 force-released), avail
//	            (ms, with ended=0: expiry + lock-delay), r; PX = retention.
//	P rest:K    a string "cooldown" or "lock-delay" with PX = the rest.
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
//
// Owners and the previous version (since 2026-11-26). The owner is the record's last value,
// written only when set, so a lease without an owner is the same 14-value record as before, and
// both versions read every record: cmsgpack.unpack returns every value of the record, and the
// previous version's scripts assign the first 14 (Lua drops the rest). Those scripts know no
// owners: they enforce none, and when they rewrite a live lease (a renewal, a re-acquire by its
// holder, a waiter's mark) they write 14 values, so the lease loses its owner and is from then on
// a lease without one (""), which its owner can no longer renew or release here (ErrNotHeld):
// its holder stops, and the key stays held until the lease expires; nothing is granted over it
// before that. Every lease of the earlier layout has the owner "" too. Tested against the
// previous version's scripts (testdata/record2).

// prelude is shared by every script: the server clock in milliseconds, and KEYS[1] read into
// locals: hash (true if it is a hash: the earlier layout), found (a record was read) and the
// record's fields (ow is nil if the lease has no owner, so that it equals an owner argument left
// out). The scripts use locals and inline code, not Lua functions or tables: each closure or
// table is an allocation per call, and the server runs every call on its one thread.
const prelude = `
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.pcall('GET', KEYS[1])
local hash = type(raw) == 'table'
local found = raw and not hash
local _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr, ow
if found then
  _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr, ow = cmsgpack.unpack(raw)
end
`

// legacy reads, if KEYS[1] has no record, the earlier layout's shadow and rest keys (named by
// the Lua expressions sk and rk, evaluated only then, into locals sk and rk) into the record's
// locals (and sets old): an expiry resting until avail becomes st = 0, exp = now, ld = avail -
// now; a release or force-release st = 1 or 2 with the rest key's length as ru, rr. One EXISTS
// when neither key exists.
func legacy(sk, rk string) string {
	return `
local old, sk, rk = false
if not found then
  sk, rk = ` + sk + `, ` + rk + `
end
if not found and redis.call('EXISTS', sk, rk) > 0 then
  old, found = true, true
  local sh = redis.call('HMGET', sk, 'id', 'ended', 'avail')
  id, st, exp, ld, ru, rr, w = sh[1] or '', tonumber(sh[2] or '1'), now, 0, 0, '', 0
  if st == 0 then
    ld = math.max(0, tonumber(sh[3] or '0') - now)
  end
  local rest = redis.call('GET', rk)
  if rest then
    ru, rr = now + redis.call('PTTL', rk), rest
  end
end
`
}

// acqMS is the record's acquisition time in ms.
const acqMS = `(acqs * 1000 + (acqu - acqu % 1000) / 1000)`

// put writes the record's locals to KEYS[1] with PX = px (a Lua expression; at least 1): 14
// values, and the owner ow as a 15th only if it is set (a nil argument would still be packed,
// one byte more).
func put(px string) string {
	const fields = `1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr`
	return `redis.call('SET', KEYS[1], ow and cmsgpack.pack(` + fields + `, ow) or cmsgpack.pack(` + fields + `), 'PX', math.max(1, ` + px + `))
`
}

// acquireScript: KEYS lease, token. ARGV id, holder, ttl ms, token floor (refuse with "reset" if
// the counter is below it), retention ms, and then, each left out when it and every one after
// it have their default (node.acquire trims them: fewer arguments cost less on both ends):
// metadata (""), cooldown ms (0), lock-delay ms (0), wait ("1": the caller will wait if refused;
// a refusal by another holder's live lease then sets the lease's w mark, so that its end
// publishes; '0'), events ("1": the server publishes expiry events; a mark then also writes the
// wake key; '0'), raise (first raise the counter to at least this; Redlock's write-back; 0),
// owner (left out if none, never empty). The holder's live lease is renewed only if its owner is
// the same (both none, or equal); otherwise it refuses the key as any other live lease does.
//
// The other keys of the lock are named from these two (the prefix is KEYS[2] without "token",
// the lock's key KEYS[1] after the prefix and "lease:"), and only on the paths that touch them:
// the earlier layout's shadow and rest keys, and the wake key.
//
// The counter is read before INCR only when there is something to raise. Otherwise INCR runs
// first and is undone (DECR, in the same atomic script, so no one sees it) if the counter was
// below the floor.
//
// Replies: {"new", token, acq, tookOver} (a grant: ID, holder, owner, metadata and TTL are the
// caller's), {"ok", id, holder, token, acq, exp, ttlLeft, md, tookOver, renewed, owner} (a
// renewal; owner left out if none), {"held", id, holder, token, acq, exp, ttlLeft, md},
// {"rest", reason, remaining}, {"reset", counter}.
var acquireScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[3])
local ret = tonumber(ARGV[5])
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
  if cur[1] then
    -- A live lease of the earlier layout (no owner): served in that layout.
    if cur[2] == ARGV[2] and not ARGV[12] then
      local cld = tonumber(cur[6] or '0')
      local sk = ` + sibling("shadow") + `
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('HSET', sk, 'id', cur[1], 'ended', '0', 'avail', now + ttl + cld)
      redis.call('PEXPIRE', sk, ttl + cld + ret)
      return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', '0', '1'}
    end
    if ARGV[9] == '1' and not cur[7] then
      redis.call('HSET', KEYS[1], 'w', '1')
    end
    local pttl = redis.call('PTTL', KEYS[1])
    return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
  end
  -- a stray hash without an id: overwritten below
end
` + legacy(sibling("shadow"), sibling("rest")) + `
if found and st == 0 and exp > now then
  if holder == ARGV[2] and ow == ARGV[12] then
    exp = now + ttl
    ` + put("ttl + ld + ret") + `
    if w == 1 and ARGV[10] == '1' then
      redis.call('SET', ` + sibling("wake") + `, '', 'PX', ttl)
    end
    return {'ok', id, holder, tok, ` + acqMS + `, exp, ttl, md, '0', '1', ow}
  end
  if ARGV[9] == '1' and w ~= 1 then
    w = 1
    ` + put("exp + ld + ret - now") + `
    if ARGV[10] == '1' then
      redis.call('SET', ` + sibling("wake") + `, '', 'PX', exp - now)
    end
  end
  return {'held', id, holder, tok, ` + acqMS + `, exp, exp - now, md}
end
local took = '0'
if found then
  if st == 0 then
    if exp + ld > now then
      return {'rest', 'lock-delay', exp + ld - now}
    end
    took = '1'
  elseif ru > now then
    return {'rest', rr, ru - now}
  end
end
local floor = tonumber(ARGV[4])
if ARGV[11] and ARGV[11] ~= '0' then
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tonumber(ARGV[11]) > c then
    redis.call('SET', KEYS[2], ARGV[11])
    c = tonumber(ARGV[11])
  end
  if c < floor then
    return {'reset', c}
  end
  tok = redis.call('INCR', KEYS[2])
else
  tok = redis.call('INCR', KEYS[2])
  if tok - 1 < floor then
    redis.call('DECR', KEYS[2])
    return {'reset', tok - 1}
  end
end
id, holder, acqs, acqu, md, cd, ld, ow = ARGV[1], ARGV[2], tonumber(t[1]), tonumber(t[2]), ARGV[6] or '', 0, 0, ARGV[12]
if ARGV[7] then
  cd, ld = tonumber(ARGV[7]), tonumber(ARGV[8] or '0')
end
w, exp, st, ru, rr = 0, now + ttl, 0, 0, ''
` + put("ttl + ld + ret") + `
if old then
  redis.call('DEL', sk, rk)
end
return {'new', tok, now, took}
`)

// sibling is the Lua expression of the name of the acquire script's lock's key of the given
// kind ("shadow", "rest", "wake"), from KEYS[1] (prefix .. "lease:" .. key) and KEYS[2] (prefix
// .. "token").
func sibling(kind string) string {
	return `(string.sub(KEYS[2], 1, -6) .. '` + kind + `:' .. string.sub(KEYS[1], #KEYS[2] + 2))`
}

// renewScript: KEYS lease, shadow (the earlier layout's), wake. ARGV id, ttl ms, retention ms,
// events, owner (left out if none; the lease's must be the same, else "nothld"). Replies: {"ok",
// id, holder, token, acq, exp, ttlLeft, md, cd, ld, owner} (owner left out if none) or
// {"nothld"}. cd and ld (the lease's cooldown and lock-delay, ms) let Redlock restore the lease
// on a node that lost it.
var renewScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'cd')
  if cur[1] ~= ARGV[1] or ARGV[5] then
    return {'nothld'}
  end
  local cld = tonumber(cur[6] or '0')
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + cld)
  redis.call('PEXPIRE', KEYS[2], ttl + cld + tonumber(ARGV[3]))
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', cur[7] or '0', cur[6] or '0'}
end
if not found or id ~= ARGV[1] or st ~= 0 or exp <= now or ow ~= ARGV[5] then
  return {'nothld'}
end
exp = now + ttl
` + put("ttl + ld + tonumber(ARGV[3])") + `
if w == 1 and ARGV[4] == '1' then
  redis.call('SET', KEYS[3], '', 'PX', ttl)
end
return {'ok', id, holder, tok, ` + acqMS + `, exp, ttl, md, cd, ld, ow}
`)

// restoreScript: Redlock's renew puts a lease back on a node that lost it (restarted empty, or
// the lease expired there while the node was cut off) while other nodes still renew it, so
// that the holder's majority heals instead of shrinking with every restart. It writes only if
// the node is free for this lease: no live lease on the key (another lease is a lost vote:
// "held"), no cooldown or lock-delay (another lease's, or a rest: a lost vote: "rest"), and this
// lease ID was not released or force-released on this node ("nothld": an end the holder must not
// undo). The lease is written as a grant would have written it, with the ID, holder, token,
// acquisition time, metadata, cooldown and lock-delay that the renewing nodes hold (not a new
// token), and the token counter raised to at least the token.
//
// KEYS lease, shadow, rest (the earlier layout's), token. ARGV id, holder, ttl ms, token, acq ms,
// acq s, acq µs, md, cooldown ms, lock-delay ms, retention ms, owner (left out if none).
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md, owner} (restored, or renewed if this
// ID is there already with the same owner; owner left out if none), {"held", id, holder, token,
// acq, exp, ttlLeft, md}, {"rest", reason, remaining}, {"nothld"} (also: this ID is live there
// with another owner).
var restoreScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[3])
local ret = tonumber(ARGV[11])
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
  if cur[1] == ARGV[1] and ARGV[12] then
    return {'nothld'}
  end
  if cur[1] == ARGV[1] then
    local ald = tonumber(ARGV[10])
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + ald)
    redis.call('PEXPIRE', KEYS[2], ttl + ald + ret)
    return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or ''}
  end
  if cur[1] then
    local pttl = redis.call('PTTL', KEYS[1])
    return {'held', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
  end
end
` + legacy("KEYS[2]", "KEYS[3]") + `
if found then
  if st == 0 and exp > now then
    if id == ARGV[1] then
      if ow ~= ARGV[12] then
        return {'nothld'}
      end
      exp = now + ttl
      ` + put("ttl + ld + ret") + `
      return {'ok', id, holder, tok, ` + acqMS + `, exp, ttl, md, ow}
    end
    return {'held', id, holder, tok, ` + acqMS + `, exp, exp - now, md}
  end
  if id == ARGV[1] and st ~= 0 then
    return {'nothld'}
  end
  if id ~= ARGV[1] and st == 0 and exp + ld > now then
    return {'rest', 'lock-delay', exp + ld - now}
  end
  if ru > now then
    return {'rest', rr, ru - now}
  end
end
if tonumber(redis.call('GET', KEYS[4]) or '0') < tonumber(ARGV[4]) then
  redis.call('SET', KEYS[4], ARGV[4])
end
id, holder, tok, acqs, acqu, md, cd, ld, ow = ARGV[1], ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[12]
w, exp, st, ru, rr = 0, now + ttl, 0, 0, ''
` + put("ttl + ld + ret") + `
if old then
  redis.call('DEL', sk, rk)
end
return {'ok', ARGV[1], ARGV[2], ARGV[4], ARGV[5], now + ttl, ttl, ARGV[8], ow}
`)

// releaseScript: KEYS lease. ARGV id, key, retention ms, and, each left out when it and the one
// after it have their default: always ("1": publish even if no waiter marked the lease; Redlock,
// whose waiters may have been marked on other nodes only; '0'), owner (none; a live lease's must
// be the same, else "nothld"; a released lease is "already" whoever asks, as the contract says
// only of live leases, and the previous version's release drops the owner). The lock's other
// keys (the channel, the wake key, the earlier layout's shadow and rest) are named from KEYS[1]
// and the key, only on the paths that touch them. Replies: {"ok", held µs}, {"already"},
// {"nothld"}.
var releaseScript = goredis.NewScript(prelude + `
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'acqs', 'acqu', 'cd', 'w')
  if cur[1] == ARGV[1] and ARGV[5] then
    return {'nothld'}
  end
  if cur[1] == ARGV[1] then
    local pre = ` + releasePrefix + `
    local sk = pre .. 'shadow:' .. ARGV[2]
    redis.call('DEL', KEYS[1])
    local ccd = tonumber(cur[4] or '0')
    local rs = '0'
    if ccd > 0 then
      redis.call('SET', pre .. 'rest:' .. ARGV[2], 'cooldown', 'PX', ccd)
      rs = '1'
    end
    redis.call('HSET', sk, 'id', ARGV[1], 'ended', '1', 'r', rs)
    redis.call('PEXPIRE', sk, tonumber(ARGV[3]))
    if cur[5] or ARGV[4] == '1' then
      redis.call('PUBLISH', pre .. 'released', ARGV[2])
    end
    local held = (tonumber(t[1]) - tonumber(cur[2] or t[1])) * 1000000 + (tonumber(t[2]) - tonumber(cur[3] or t[2]))
    return {'ok', held}
  end
end
if not found then
  local sh = redis.call('HMGET', ` + releasePrefix + ` .. 'shadow:' .. ARGV[2], 'id', 'ended')
  if sh[1] == ARGV[1] and sh[2] == '1' then
    return {'already'}
  end
  return {'nothld'}
end
if id ~= ARGV[1] then
  return {'nothld'}
end
if st == 1 then
  return {'already'}
end
if st ~= 0 or exp <= now or ow ~= ARGV[5] then
  return {'nothld'}
end
local marked = w == 1
st, w = 1, 0
if cd > 0 then
  ru, rr = now + cd, 'cooldown'
end
` + put("cd + tonumber(ARGV[3])") + `
if marked then
  redis.call('DEL', ` + releasePrefix + ` .. 'wake:' .. ARGV[2])
end
if marked or ARGV[4] == '1' then
  redis.call('PUBLISH', ` + releasePrefix + ` .. 'released', ARGV[2])
end
return {'ok', (tonumber(t[1]) - acqs) * 1000000 + (tonumber(t[2]) - acqu)}
`)

// releasePrefix is the release script's Lua expression of the store's key prefix: KEYS[1]
// without "lease:" and the key (ARGV[2]).
const releasePrefix = `string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 6)`

// forceReleaseScript: KEYS lease, shadow, rest (the earlier layout's), channel, wake. ARGV key,
// retention ms, always (as for releaseScript).
// Replies: {"ok", id, holder, token, acq, exp, ttlLeft, md, owner} (owner left out if none) or
// {"notfound"}.
var forceReleaseScript = goredis.NewScript(prelude + `
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
  if not cur[1] then
    return {'notfound'}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  local cld = tonumber(cur[6] or '0')
  local rs = '0'
  if cld > 0 then
    redis.call('SET', KEYS[3], 'lock-delay', 'PX', cld)
    rs = '1'
  end
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '2', 'r', rs)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
  if cur[7] or ARGV[3] == '1' then
    redis.call('PUBLISH', KEYS[4], ARGV[1])
  end
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
if not found or st ~= 0 or exp <= now then
  return {'notfound'}
end
local marked = w == 1
st, w = 2, 0
if ld > 0 then
  ru, rr = now + ld, 'lock-delay'
end
` + put("ld + tonumber(ARGV[2])") + `
if marked then
  redis.call('DEL', KEYS[5])
end
if marked or ARGV[3] == '1' then
  redis.call('PUBLISH', KEYS[4], ARGV[1])
end
return {'ok', id, holder, tok, ` + acqMS + `, exp, exp - now, md, ow}
`)

// rollbackScript undoes a Redlock grant that did not reach a quorum: it deletes the lease (and,
// in the earlier layout, its shadow) if it is still this ID's and not ended, leaving no cooldown
// or lock-delay behind, and publishes so that waiters retry. KEYS lease, shadow, channel, wake.
// ARGV id, key. Reply: 1 if deleted.
var rollbackScript = goredis.NewScript(prelude + `
if hash then
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
if found and id == ARGV[1] and st == 0 then
  redis.call('DEL', KEYS[1], KEYS[4])
  redis.call('PUBLISH', KEYS[3], ARGV[2])
  return 1
end
return 0
`)

// getScript: KEYS lease. Reply: {"ok", id, holder, token, acq, exp, ttlLeft, md, owner} (owner
// left out if none) or {"notfound"}.
var getScript = goredis.NewScript(prelude + `
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md')
  if not cur[1] then
    return {'notfound'}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + pttl, pttl, cur[5] or ''}
end
if not found or st ~= 0 or exp <= now then
  return {'notfound'}
end
return {'ok', id, holder, tok, ` + acqMS + `, exp, exp - now, md, ow}
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
