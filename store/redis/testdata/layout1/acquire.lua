-- The acquire script of the earlier key layout (store/redis/scripts.go at b4adec0), run by the
-- layout migration tests as a process of the earlier version would run it.

local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000

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
