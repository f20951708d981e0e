-- One GCRA step of a global rate limit, atomically, on Redis's own clock.
--
-- KEYS[1]  the key's theoretical arrival time (TAT), in microseconds of
--          Redis's TIME, as a decimal integer; missing = no cells owed
-- ARGV[1]  inc: the cells asked for times the emission interval T (µs)
-- ARGV[2]  tolerance: the burst times T (µs)
--
-- Conforms iff max(tat, now) + inc - now <= tolerance. Then the TAT moves
-- to max(tat, now) + inc and the key expires when the TAT is reached (a
-- key whose TAT is past is the same as a missing one), so a key lives at
-- most `tolerance` and Redis holds only the keys used within one burst
-- window. A refusal writes nothing.
--
-- Every number stays below 2^53 (Redis's Lua numbers are doubles): now is
-- about 1.8e15 µs, and the client keeps the tolerance under 2^50 µs.
--
-- Returns {1, 0} (admitted) or {0, µs until the cells conform}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local inc = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])

local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then
  tat = now
end
local new = tat + inc
local at = new - tolerance
if at > now then
  return {0, at - now}
end
-- As a string: Lua's own number formatting would round 16 digits.
-- PX: whole milliseconds, rounded up, at least 1.
local ttl = math.floor((new - now + 999) / 1000)
if ttl < 1 then
  ttl = 1
end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', string.format('%.0f', ttl))
return {1, 0}
