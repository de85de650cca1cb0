
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.pcall('GET', KEYS[1])
local hash = type(raw) == 'table'
local found = raw and not hash
local _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr
if found then
  _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr = cmsgpack.unpack(raw)
end

local ttl = tonumber(ARGV[2])
if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'holder', 'token', 'acq', 'md', 'ld', 'cd')
  if cur[1] ~= ARGV[1] then
    return {'nothld'}
  end
  local cld = tonumber(cur[6] or '0')
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[2], 'id', cur[1], 'ended', '0', 'avail', now + ttl + cld)
  redis.call('PEXPIRE', KEYS[2], ttl + cld + tonumber(ARGV[3]))
  return {'ok', cur[1], cur[2], cur[3], cur[4], now + ttl, ttl, cur[5] or '', cur[7] or '0', cur[6] or '0'}
end
if not found or id ~= ARGV[1] or st ~= 0 or exp <= now then
  return {'nothld'}
end
exp = now + ttl
redis.call('SET', KEYS[1], cmsgpack.pack(1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr), 'PX', math.max(1, ttl + ld + tonumber(ARGV[3])))

if w == 1 and ARGV[4] == '1' then
  redis.call('SET', KEYS[3], '', 'PX', ttl)
end
return {'ok', id, holder, tok, (acqs * 1000 + (acqu - acqu % 1000) / 1000), exp, ttl, md, cd, ld}
