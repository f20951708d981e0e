-- Lease a batch of cells of a global rate limit: as many of the cells asked
-- for as conform now, atomically, on Redis's own clock (see gcra.lua).
--
-- KEYS[1]  the key's theoretical arrival time (TAT), µs of Redis's TIME
-- ARGV[1]  T: the emission interval (µs)
-- ARGV[2]  tolerance: the burst times T (µs)
-- ARGV[3]  k: the cells asked for (1 ≤ k ≤ burst)
--
-- The grant g is the largest g ≤ k with max(tat, now) + g·T - now ≤
-- tolerance: each of the g cells conforms, one after the other, exactly as
-- g single checks at this instant would. The TAT moves by the granted
-- cells only (g·T) and the key expires at its TAT; a grant of zero writes
-- nothing. So the cells leased by every process, with the cells taken by
-- per-call checks, follow one GCRA schedule: over any window of length w,
-- at most burst + ⌊w / T⌋ cells are *leased* fleet-wide.
--
-- Returns {g, µs until one more cell conforms (0 if g = k), the new TAT
-- (the TAT if g = 0)}: the TAT lets the process give back the tail of its
-- grant at close, if nobody took cells after it (gcra_return.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local k = tonumber(ARGV[3])

local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then
  tat = now
end
local g = math.floor((now + tolerance - tat) / interval)
if g > k then
  g = k
end
if g < 1 then
  return {0, tat + interval - tolerance - now, tat}
end
local new = tat + g * interval
local ttl = math.floor((new - now + 999) / 1000)
if ttl < 1 then
  ttl = 1
end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', string.format('%.0f', ttl))
local hint = 0
if g < k then
  hint = new + interval - tolerance - now
end
return {g, hint, new}
