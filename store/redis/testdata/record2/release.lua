
local t = redis.call('TIME')
local now = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
local raw = redis.pcall('GET', KEYS[1])
local hash = type(raw) == 'table'
local found = raw and not hash
local _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr
if found then
  _, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr = cmsgpack.unpack(raw)
end

if hash then
  local cur = redis.call('HMGET', KEYS[1], 'id', 'acqs', 'acqu', 'cd', 'w')
  if cur[1] == ARGV[1] then
    local pre = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 6)
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
  local sh = redis.call('HMGET', string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 6) .. 'shadow:' .. ARGV[2], 'id', 'ended')
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
if st ~= 0 or exp <= now then
  return {'nothld'}
end
local marked = w == 1
st, w = 1, 0
if cd > 0 then
  ru, rr = now + cd, 'cooldown'
end
redis.call('SET', KEYS[1], cmsgpack.pack(1, id, holder, tok, acqs, acqu, md, cd, ld, w, exp, st, ru, rr), 'PX', math.max(1, cd + tonumber(ARGV[3])))

if marked then
  redis.call('DEL', string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 6) .. 'wake:' .. ARGV[2])
end
if marked or ARGV[4] == '1' then
  redis.call('PUBLISH', string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 6) .. 'released', ARGV[2])
end
return {'ok', (tonumber(t[1]) - acqs) * 1000000 + (tonumber(t[2]) - acqu)}
