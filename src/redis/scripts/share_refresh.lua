-- Refresh one process's leased share of a global bulkhead, atomically:
-- renew its lease, record its demand, and give it its new share.
--
-- KEYS[1]  the sharers: a sorted set of processes scored by lease expiry
--          (ms, Redis's TIME)
-- KEYS[2]  the shares: a hash, process -> slots it may be using (recorded)
-- KEYS[3]  the demand: a hash, process -> slots it asked for last
-- KEYS[4]  the fencing counter (see acquire.lua)
-- KEYS[5]  the per-call holders (see acquire.lua): counted, never touched
--          but for expired members
-- ARGV[1]  the limit
-- ARGV[2]  the lease (ms)
-- ARGV[3]  the process (member), unique per handle
-- ARGV[4]  its demand: slots in use, waited for and refused since its last
--          refresh
-- ARGV[5]  its bound: the most slots it may be using until it hears this
--          answer (its local capacity now, or what is in use if more)
-- ARGV[6]  the floor: the share any sharer is given whatever its demand,
--          while the limit allows
-- ARGV[7]  1 if the process starts a new lease (it held none, or lost
--          it): it takes a new fencing token
-- ARGV[8]  the channel per-call waiters listen on
-- ARGV[9]  the channel leased processes listen on: a process granted
--          less than its fair share publishes its name there, so that
--          processes holding more than they need refresh (and give back)
--          at once
--
-- Safety: a process is granted at most what the limit leaves after the
-- per-call holders and every other live share as recorded; what is
-- recorded for it is the larger of that grant and its bound, so the
-- recorded shares (plus the per-call holders) never pass the limit unless
-- slots were in use that Redis had forgotten (a restart without
-- persistence), and a share shrinks only as its holder reports slots
-- given back.
--
-- Returns {grant, recorded, token (0 unless a new lease), lost (1 if the
-- process thought it held a lease that Redis no longer had), slots held
-- fleet-wide, target (its fair share: more than the grant while others
-- still hold what is to be its)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local me = ARGV[3]
local want = tonumber(ARGV[4])
local bound = tonumber(ARGV[5])
local floor = tonumber(ARGV[6])
local fresh = ARGV[7] == '1'

-- Shares whose lease ended (their process died or lost touch) leave.
local freed = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  freed = freed + (tonumber(redis.call('HGET', KEYS[2], m)) or 0)
  redis.call('HDEL', KEYS[2], m)
  redis.call('HDEL', KEYS[3], m)
  redis.call('ZREM', KEYS[1], m)
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local per_call = redis.call('ZCARD', KEYS[5])

local known = redis.call('ZSCORE', KEYS[1], me)
local lost = 0
if not known and not fresh then
  lost = 1
end
local token = 0
if fresh or not known then
  if redis.call('EXISTS', KEYS[4]) == 0 then
    redis.call('SET', KEYS[4], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  token = redis.call('INCR', KEYS[4])
end
local before = tonumber(redis.call('HGET', KEYS[2], me)) or 0
redis.call('ZADD', KEYS[1], now + lease, me)
redis.call('HSET', KEYS[3], me, want)

-- Max-min fair allocation (water-filling) of what the per-call holders
-- leave, over every live sharer's demand raised to the floor; ties in
-- the order of the members' names.
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local demands = redis.call('HMGET', KEYS[3], unpack(members))
local held = redis.call('HMGET', KEYS[2], unpack(members))
local rows = {}
local others = 0
for i, m in ipairs(members) do
  rows[i] = {math.max(tonumber(demands[i]) or 0, floor), m}
  if m ~= me then
    others = others + (tonumber(held[i]) or 0)
  end
end
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then
    return a[1] < b[1]
  end
  return a[2] < b[2]
end)
local left = math.max(limit - per_call, 0)
local target = 0
for i, r in ipairs(rows) do
  local give = math.min(r[1], math.floor(left / (#rows - i + 1)))
  left = left - give
  if r[2] == me then
    target = give
    break
  end
end

local grant = math.max(math.min(target, limit - per_call - others), 0)
local recorded = math.max(grant, bound)
redis.call('HSET', KEYS[2], me, recorded)

-- The three outlive their longest lease by a second, then go by themselves.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local gone = tonumber(last[2]) + 1000
redis.call('PEXPIREAT', KEYS[1], gone)
redis.call('PEXPIREAT', KEYS[2], gone)
redis.call('PEXPIREAT', KEYS[3], gone)

if before > recorded then
  freed = freed + before - recorded
end
if freed > 0 then
  redis.call('PUBLISH', ARGV[8], freed)
end
if grant < target then
  redis.call('PUBLISH', ARGV[9], me)
end
return {grant, recorded, token, lost, per_call + others + recorded, target}
