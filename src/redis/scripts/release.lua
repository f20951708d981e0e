-- Give back slots of a global bulkhead, atomically, and tell the waiters.
--
-- KEYS[1]  the holders (see acquire.lua)
-- ARGV[1]  the channel its waiters listen on
-- ARGV[2…] the members to remove (absent ones are skipped: a lease that
--          expired, or a release sent twice, frees nothing)
--
-- Returns the number of slots freed.
local freed = 0
for i = 2, #ARGV do
  freed = freed + redis.call('ZREM', KEYS[1], ARGV[i])
end
if freed > 0 then
  redis.call('PUBLISH', ARGV[1], freed)
end
return freed
