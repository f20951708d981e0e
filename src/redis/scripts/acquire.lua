-- Take one slot of a global bulkhead, atomically.
--
-- KEYS[1]  the holders: a sorted set of members scored by lease expiry (ms, Redis's TIME)
-- KEYS[2]  the fencing counter: one INCR per grant, never reset by this crate;
--          when it is missing (first use, or a restart without persistence)
--          it starts from Redis's TIME in microseconds, so that tokens keep
--          growing across a restart (grants are far fewer than 1 per µs)
-- KEYS[3]  the leased shares' sharers, KEYS[4] their shares (see
--          share_refresh.lua): every live share counts as held, so that
--          per-call and leased processes of one system share one limit
-- ARGV[1]  the limit
-- ARGV[2]  the lease (ms)
-- ARGV[3]  the member to add: unique per attempt, chosen by the client
--
-- Returns {1, fencing token, holders after the grant}
--      or {0, holders, ms until the earliest lease ends}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])

-- Expired leases (their holders died or lost touch) free their slots here.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
local sharers = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf')
if #sharers > 0 then
  for _, s in ipairs(redis.call('HMGET', KEYS[4], unpack(sharers))) do
    held = held + (tonumber(s) or 0)
  end
end

if held < limit then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    -- As a string: Lua's number formatting would round 16 digits.
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  local token = redis.call('INCR', KEYS[2])
  redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
  -- The set outlives its longest lease by a second, then goes by itself.
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]) + 1000)
  return {1, token, held + 1}
end

-- The earliest lease to end, a holder's or a share's.
local wait = lease
for _, k in ipairs({KEYS[1], KEYS[3]}) do
  local first = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] then
    wait = math.min(wait, tonumber(first[2]) - now)
  end
end
return {0, held, wait}
