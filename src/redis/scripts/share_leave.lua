-- A process gives its whole leased share back (at `close`), atomically,
-- and tells the per-call waiters.
--
-- KEYS[1]  the sharers, KEYS[2] the shares, KEYS[3] the demand (see
--          share_refresh.lua)
-- ARGV[1]  the channel per-call waiters listen on
-- ARGV[2]  the process (member)
--
-- Returns the number of slots freed.
local freed = tonumber(redis.call('HGET', KEYS[2], ARGV[2])) or 0
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
if freed > 0 then
  redis.call('PUBLISH', ARGV[1], freed)
end
return freed
