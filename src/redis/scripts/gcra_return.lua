-- Give back the unspent tail of a lease (gcra_lease.lua) at close.
--
-- KEYS[1]  the key's TAT (µs of Redis's TIME)
-- ARGV[1]  the TAT the lease left (its reply's third number)
-- ARGV[2]  the cells given back times T (µs): at most that lease's grant
--
-- Only when the key still holds exactly the TAT the lease left: then no
-- cell has been taken since, the cells given back are the last ones on
-- the schedule, and moving the TAT back by them leaves the key as if the
-- lease had asked for fewer. Otherwise (others took cells after it, or
-- the key expired) nothing is written: the cells stay spent, which only
-- refuses more.
--
-- Returns 1 if given back, 0 if not.
local cur = redis.call('GET', KEYS[1])
if not cur or cur ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local new = tonumber(cur) - tonumber(ARGV[2])
if new <= now then
  redis.call('DEL', KEYS[1])
  return 1
end
local ttl = math.floor((new - now + 999) / 1000)
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', string.format('%.0f', ttl))
return 1
