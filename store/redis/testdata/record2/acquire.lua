
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.pcall('GET', KEYS[1])
local hash = type(raw) == 'table'
local found = raw and not hash
local _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr
if found then
  _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr = cmsgpack.unpack(raw)
end

local ttl = tonumber(ARGV[3])
local ret = tonumber(ARGV[5])
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'w')
  if cur[1] then
    -- A live lease of the earlier layout: served in that layout.
    if cur[2] == ARGV[2] then
      local cld = tonumber(cur[6] or '0')
      local sk = (string.sub(KEYS[2], 1, -6) .. 'shadow:' .. string.sub(KEYS[1], #KEYS[2] + 2))
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

local old, sk, rk = false
if not found then
  sk, rk = (string.sub(KEYS[2], 1, -6) .. 'shadow:' .. string.sub(KEYS[1], #KEYS[2] + 2)), (string.sub(KEYS[2], 1, -6) .. 'rest:' .. string.sub(KEYS[1], #KEYS[2] + 2))
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

if found and st == 0 and exp > now then
  if holder == ARGV[2] then
    exp = now + ttl
    redis.call('SET', KEYS[1], cmsgpack.pack(1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr), 'PX', math.max(1, ttl + ld + ret))

    if w == 1 and ARGV[10] == '1' then
      redis.call('SET', (string.sub(KEYS[2], 1, -6) .. 'wake:' .. string.sub(KEYS[1], #KEYS[2] + 2)), '', 'PX', ttl)
    end
    return {'ok', id, holder, tok, (acqs * 1000 + (acqu - acqu % 1000) / 1000), exp, ttl, md, '0', '1'}
  end
  if ARGV[9] == '1' and w ~= 1 then
    w = 1
    redis.call('SET', KEYS[1], cmsgpack.pack(1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr), 'PX', math.max(1, exp + ld + ret - now))

    if ARGV[10] == '1' then
      redis.call('SET', (string.sub(KEYS[2], 1, -6) .. 'wake:' .. string.sub(KEYS[1], #KEYS[2] + 2)), '', 'PX', exp - now)
    end
  end
  return {'held', id, holder, tok, (acqs * 1000 + (acqu - acqu % 1000) / 1000), exp, exp - now, md}
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
id, holder, acqs, acqu, md, cd, ld = ARGV[1], ARGV[2], tonumber(t[1]), tonumber(t[2]), ARGV[6] or '', 0, 0
if ARGV[7] then
  cd, ld = tonumber(ARGV[7]), tonumber(ARGV[8] or '0')
end
w, exp, st, ru, rr = 0, now + ttl, 0, 0, ''
redis.call('SET', KEYS[1], cmsgpack.pack(1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr), 'PX', math.max(1, ttl + ld + ret))

if old then
  redis.call('DEL', sk, rk)
end
return {'new', tok, now, took}
