-- The release script of the earlier key layout (store/redis/scripts.go at b4adec0), run by the
-- layout migration tests as a process of the earlier version would run it.

local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000

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
