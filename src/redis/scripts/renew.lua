-- Renew the leases one process holds, in one call.
--
-- KEYS[1]  the holders (see acquire.lua)
-- ARGV[1]  the channel its waiters listen on
-- ARGV[2]  the lease (ms)
-- ARGV[3…] the members to renew
--
-- A member that is gone, or whose lease has ended, is lost: it is not
-- renewed (an ended lease is removed), and is returned.
-- Returns the list of lost members.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local lost = {}
local freed = 0
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) > now then
    redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i])
  else
    if score then
      freed = freed + redis.call('ZREM', KEYS[1], ARGV[i])
    end
    lost[#lost + 1] = ARGV[i]
  end
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]) + 1000)
end
if freed > 0 then
  redis.call('PUBLISH', ARGV[1], freed)
end
return lost
