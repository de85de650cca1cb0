-- The renew script of the earlier key layout (store/redis/scripts.go at b4adec0), run by the
-- layout migration tests as a process of the earlier version would run it.

local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000

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
