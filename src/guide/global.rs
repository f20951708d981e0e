//! One limit across processes: the global bulkhead on Redis.
//!
//! A `Bulkhead` limits one process. Four workers with a bulkhead of 20 each
//! put 80 calls at a neighbour at once; twelve replicas, 240. Feature `redis`
//! adds `watertight::redis::GlobalBulkhead`: one named system, one limit N
//! shared by every process that uses the same Redis (or Valkey) and the same
//! name, with `try_acquire().await`, `acquire_timeout(d).await`,
//! `acquire_until(deadline).await` and an RAII permit:
//!
//! ```no_run
//! # #[cfg(feature = "redis")] {
//! use core::time::Duration;
//! use watertight::redis::{Fallback, GlobalBulkhead, GlobalConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalConfig::builder(20)      // 20 calls at once, fleet-wide
//!     .local_cap(4)                            // and at most 4 from this process
//!     .fallback(Fallback::LocalShare(2))       // 2 on our own while Redis is down
//!     .build()?;
//! let payments = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", config)?;
//! let permit = payments.acquire_timeout(Duration::from_millis(200)).await?;
//! drop(permit); // handed to a background task, never blocking
//! payments.close().await?; // at shutdown: every release confirmed by Redis
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
//! # }
//! ```
//!
//! What it guarantees, in brief (the `watertight::redis` module's docs say it
//! in full; they are built with the `redis` feature):
//!
//! - **The limit holds on one Redis primary**, however many processes race:
//!   acquire and release are each one atomic Lua script over a sorted set of
//!   holders scored by lease expiry in Redis's own `TIME` (never a client's
//!   clock); expired holders are swept inside the acquire script. The keys
//!   carry the hash tag `{name}` (one Redis Cluster slot per system).
//! - **Fencing tokens**: each grant carries the next value of a per-system
//!   counter (`permit.fencing_token()`), for downstreams that refuse stale
//!   holders. A missing counter (Redis restarted without persistence)
//!   starts again from Redis's `TIME` in microseconds, so tokens keep
//!   growing across a restart.
//! - **Shutting down**: `close().await` refuses new acquisitions, waits for
//!   the permits still held, sends every release and waits for Redis, then
//!   stops the background task; call it before `main` returns. Without it,
//!   a tokio runtime that shuts down drops the task, which sends what is
//!   still queued on a blocking connection (best effort, one store timeout
//!   at most); a release never sent costs its slot one lease.
//! - **Leases** (60 s by default) renewed by one background task per process,
//!   all its holders in one script call; a process that dies (`kill -9`) leaks
//!   nothing, its slots come back within one lease. A permit whose lease was
//!   lost says so (`is_lost()`, a metric, a tracing warning).
//! - **A drop never blocks**: it hands the release to the background task,
//!   which batches releases; `permit.release().await` waits for Redis.
//! - **Waiting is woken, not polled** (release notifications over RESP3
//!   pub/sub), and gives up at its deadline. It is FIFO within a process,
//!   **not across processes**.
//! - **A local front** (`local_cap(k)`): a process at its cap is refused, or
//!   waits, without a Redis round trip.
//! - **When Redis is down, slow or unreachable**: every command has its own
//!   timeout (100 ms); a caller whose deadline is shorter stops waiting at it
//!   while its command runs on in a task of its own and tells the circuit
//!   breaker of this crate that guards the connection how Redis did (a dead
//!   Redis costs one timeout, then fast refusals, however short the callers'
//!   deadlines), and the fallback
//!   decides: `FailClosed` (a typed error at once) or `LocalShare(k)` (a local
//!   bulkhead of k slots). The global limit resumes when Redis is back,
//!   without a restart.
//! - **Across a failover only when asked**: replication is asynchronous,
//!   so a promoted replica can lose the last grants (and run the fleet over
//!   the limit until the holders' renewals report their leases lost) and
//!   hand out fencing tokens again. `connect_sentinel` follows the
//!   failover; `acknowledged(replicas, timeout)` makes a grant count only
//!   once that many replicas have it (see *Which mode for which promise*
//!   below).
//!
//! - **Redis Cluster** (`connect_cluster(&nodes, name, config)`, Redis 7.0
//!   or later): each system lives in the one slot of its hash tag, so its
//!   limit holds on that slot's primary as on a lone Redis, and systems
//!   spread over the primaries by name. Notifications are sharded pub/sub
//!   on the system's node. A slot that moves costs a few typed errors
//!   while the keys are split between the nodes (the store breaker does not
//!   count them), never a permit; the notifications follow the slot. The
//!   `redis` module's section *Redis Cluster* has the details and the
//!   measured figures. Acknowledged grants work there too: the `WAIT`
//!   goes to the system's primary with its script and counts that
//!   primary's replicas.
//!
//!   ```no_run
//!   use watertight::redis::{GlobalBulkhead, GlobalConfig};
//!
//!   # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!   let nodes = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"];
//!   let config = GlobalConfig::builder(20).build()?;
//!   let payments = GlobalBulkhead::connect_cluster(&nodes, "payments", config)?;
//!   drop(payments.try_acquire().await?);
//!   payments.close().await?;
//!   # Ok(()) }
//!   ```
//!
//! - **Leased shares** (`leased(refresh)`): per call, every acquisition is a
//!   script on one Redis primary (about 11 µs of Redis CPU per pair, a
//!   round trip each). In leased mode each process holds a lease on a
//!   *share* of the limit and serves acquisitions from a local lock-free
//!   bulkhead with no Redis call; one script per refresh reports its
//!   demand and takes its new share, max-min fair, never summing past the
//!   limit, shrinking only as calls end. What it trades: a share can sit
//!   idle up to one refresh while another process waits. The details and
//!   the measured figures: the `redis` module, section *Leased shares*.
//!
//!   ```no_run
//!   use core::time::Duration;
//!   use watertight::redis::{GlobalBulkhead, GlobalConfig};
//!
//!   # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!   let config = GlobalConfig::builder(20)
//!       .lease(Duration::from_secs(3))       // a dead process's share is back within 3 s
//!       .leased(Duration::from_millis(500))  // one Redis call per process twice a second
//!       .build()?;
//!   let payments = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", config)?;
//!   let permit = payments.acquire_timeout(Duration::from_millis(200)).await?; // local
//!   drop(permit);
//!   payments.close().await?; // the share goes back to the fleet
//!   # Ok(()) }
//!   ```
//!
//!   Which should be the default? Per call stays the default: it is exact
//!   at every instant (a slot is either held or free in Redis) and needs
//!   no tuning. Choose leased when calls are many per second per process
//!   (its own bench, `benches/redis_leased.rs`: a leased acquire + release
//!   1.5–1.6× a local `Bulkhead`'s, a 4-process fleet 220× the per-call
//!   mode's throughput), or when Redis's CPU or round trips matter.
//!
//! ## Which mode for which promise
//!
//! | you need | choose |
//! |---|---|
//! | the limit exact at every instant on one Redis, no tuning | per call (the default), `connect` |
//! | many calls a second per process, few Redis calls | `leased(refresh)`: one Redis call per process per refresh |
//! | the service to follow a Sentinel failover without a restart | `connect_sentinel(sentinels, master, ..)`, either mode |
//! | the limit to hold, and fencing tokens never to repeat, across a failover | `connect_sentinel` and `acknowledged(number of replicas, timeout)`, either mode |
//! | many systems spread over a Redis Cluster | `connect_cluster(&nodes, ..)`, either mode; with `acknowledged`, counted on each system's primary's replicas |
//! | calls to go on (over the limit if need be) while Redis or its replicas cannot answer | `fallback(Fallback::LocalShare(k))`; with `FailClosed` they are refused |
//!
//! Acknowledged grants cost a replica round trip per grant (per refresh,
//! leased) and grant nothing while fewer replicas than asked for are
//! connected: after a failover, until the failed node is back as a
//! replica. An unacknowledged grant is given back and meets the fallback
//! (`StoreFailure::NotAcknowledged`, counted in the metrics'
//! `unacknowledged`). Leased mode rides through: a process keeps serving
//! from a share whose lease was acknowledged until the lease ends.
//! Measured on a real Sentinel group with the replica cut off 300 ms
//! before the primary was killed (`tests/global_failover.rs`, the
//! module's *Failover* section): with acknowledgement, no call over the
//! limit and no token handed out twice; without, 34–114 tokens handed out
//! twice per run, and a limit-1 system gave its only slot to a second
//! holder while the first still ran.
//!
//! ```no_run
//! # #[cfg(feature = "redis")] {
//! use core::time::Duration;
//! use watertight::redis::{GlobalBulkhead, GlobalConfig};
//!
//! # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalConfig::builder(20)
//!     .store_timeout(Duration::from_millis(200))
//!     .acknowledged(2, Duration::from_millis(50)) // both replicas have every grant
//!     .build()?;
//! let sentinels = ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/", "redis://10.0.0.3:26379/"];
//! let payments = GlobalBulkhead::connect_sentinel(&sentinels, "main", "payments", config)?;
//! let permit = payments.acquire_timeout(Duration::from_millis(300)).await?;
//! let token = permit.fencing_token(); // never handed out again, failover or not
//! # let _ = token;
//! drop(permit);
//! payments.close().await?;
//! # Ok(()) }
//! # }
//! ```
//!
//! `tests/global_redis.rs` checks these against a real redis-server (4
//! processes × 32 tasks against N = 10, a holder killed with `kill -9`, Redis
//! frozen with SIGSTOP, killed and restarted), and `tests/global_redis_smol.rs`
//! the same bulkhead on smol, with no tokio runtime (feature `redis-smol`).
//!
//! The example `global_limit` reproduces the four-workers case with real
//! processes: a neighbour (an axum server on 127.0.0.1) that counts the calls
//! in flight, a redis-server of its own (a Unix socket in a temporary
//! directory, persistence off), and four worker processes (the example itself,
//! started again in a worker role), each firing 40 calls at once, each call
//! held 20–50 ms by the neighbour. Round 1 goes through a local `Bulkhead` of
//! 20 in each process; round 2 through one `GlobalBulkhead` of 20
//! (`local_cap(20)` in front); round 3 through the same in leased mode. It stops every process it started, and without
//! `redis-server` on PATH it prints how to get it (`apt-get install -y
//! redis-server`) and exits. The tour runs it as act 7 when built with the
//! feature.
//!
//! ```sh
//! cargo run --example global_limit --features redis
//! ```
//!
//! ```text
//! global_limit: 4 worker processes, each firing 40 calls at once at a neighbour on 127.0.0.1 that holds each call 20-50 ms; a redis-server of our own on a Unix socket
//!   round  limit                                                     answered  max in flight at the neighbour     time  Redis calls per call
//!   1      Bulkhead(20) in each of the 4 processes                    160/160                              80   122 ms                     -
//!   2      GlobalBulkhead(20) on Redis, local_cap(20) each            160/160                              20   364 ms                  4.55
//!   3      the same, leased: a share each, refreshed every 200 ms     160/160                              20   435 ms                  0.09
//!   -> local limits alone let 80 calls at once reach the neighbour (4 x 20 slots); through one GlobalBulkhead of 20, 20 at most (4.55 Redis calls per call), and leased, 20 at most (0.09 Redis calls per call)
//! ```
//!
//! The time column is the round's wall time, start-up excluded: round 2 is
//! slower because 160 calls now take turns in 20 slots instead of 80, and each
//! acquire and release is a Redis round trip (a waiter asks again after each
//! release it is woken by, hence more than two calls per call); round 3 is
//! slower still to start, as each share grows from its floor to the demand
//! its first refreshes report. Each worker ends with
//! `close().await`, so its last releases reach Redis before it exits. `tests/global_limit_example.rs`
//! runs the same demonstration and checks it: every call answered in every
//! round, more than 20 at once at the neighbour in round 1, between 10 and 20
//! in rounds 2 and 3, and round 3 under a quarter of round 2's Redis calls.
//!
//! # One rate across processes: `GlobalRateLimiter`
//!
//! The bulkhead bounds how many calls run at once; a provider's quota is
//! usually a rate ("200 requests a second per API key"), and twelve
//! replicas that each hold a local `RateLimiter` of 200/s send 2,400.
//! `watertight::redis::GlobalRateLimiter` keeps the GCRA schedule in Redis,
//! one key per client, so the whole fleet spends from one quota:
//!
//! ```no_run
//! # #[cfg(feature = "redis")] {
//! use core::time::Duration;
//! use watertight::rate::Quota;
//! use watertight::redis::{GlobalRateConfig, GlobalRateError, GlobalRateLimiter, RateFallback, RateKey};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalRateConfig::builder(Quota::per_second(200).burst(20)) // per key, fleet-wide
//!     .fallback(RateFallback::Local(Quota::per_second(50)))                  // while Redis is down
//!     .build()?;
//! let api = GlobalRateLimiter::connect("redis://127.0.0.1/", "api", config)?;
//!
//! // Inbound: shed a client past its rate with 429 and the exact hint.
//! let client = RateKey::new("customer-42")?; // any bytes up to 256, encoded for Redis
//! if let Err(GlobalRateError::Limited { retry_after }) = api.check(&client).await {
//!     println!("429, Retry-After: {}", retry_after.as_secs() + 1);
//! }
//!
//! // Outbound: wait (up to 2 s) for a cell of the provider's one quota.
//! api.acquire_timeout(&RateKey::whole(), Duration::from_secs(2)).await?;
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
//! # }
//! ```
//!
//! What it guarantees (its type's docs say it in full):
//!
//! - **The bound, on Redis's clock alone**: each check is one Lua script
//!   that reads Redis's `TIME` and steps the key's theoretical arrival time
//!   atomically, so over any window `w` a key admits at most
//!   `burst + ⌊w / T⌋` cells fleet-wide, whatever the processes' clocks.
//!   The schedule is in microseconds (`T` rounded up: never faster than
//!   asked), and `retry_after` is exact to the microsecond.
//! - **Bounded memory**: a key expires at its theoretical arrival time, so
//!   it lives at most one burst window (`burst × T`) after its last
//!   admission; a refusal writes nothing.
//! - **Hostile keys**: `RateKey::new` refuses empty and over-long keys
//!   with a typed error and encodes every other byte, so no key can leave
//!   the system's `{name}` hash tag or share another key's limit.
//! - **Redis down**: the bulkhead's breaker and store timeout, then
//!   `FailClosed` (a typed `StoreUnavailable`) or `Local(quota)`, a local
//!   `RateLimiter` (per key: a `KeyedRateLimiter` of 512 keys).
//! - **A restart without persistence** forgets the schedules: each key
//!   starts again with a full burst (at most one burst over, per key,
//!   once).
//! - **Waiting** sleeps for the hint on the runtime's clock and checks
//!   again; it is refused at once when the hint lands past the deadline. It
//!   reserves nothing, so waiters are not served in order.
//! - **Policy and tower**: `api.call(&policy, &key, make)` answers a
//!   refusal with the policy's `ErrorKind::RateLimited` and its hint, and
//!   `tower::GlobalRateLimitLayer` sheds inbound requests keyed by a
//!   function of the request (`Clone`, no `Buffer`).
//!
//! `tests/global_rate.rs` runs four processes against 200/s with a burst of
//! 20 for 5 s: 1,020 admitted over 5.006 s of Redis time, where GCRA allows
//! 1,021 (`burst + ⌊w / T⌋`) and the nominal `burst + 200 × 5` is 1,020.
//! A check costs one round trip and about 6 µs of Redis's thread:
//! [benchmarks](super::benchmarks#the-global-rate-limiter-on-redis).
//!
//! What a grant and a release cost against a `PING`, and how many round
//! trips they take: [benchmarks: the global bulkhead](super::benchmarks#the-global-bulkhead-on-redis).
//!
//! ## The leased rate: cells per refresh, spent locally
//!
//! A check that is a round trip is fine for inbound shedding, not for a
//! hot outbound path. `.leased(refresh)` makes each process lease batches
//! of the unkeyed limit's cells (`RateKey::whole()`) and spend them from a
//! local pocket, with no Redis call:
//!
//! ```no_run
//! # #[cfg(feature = "redis")] {
//! use core::time::Duration;
//! use watertight::rate::Quota;
//! use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalRateConfig::builder(Quota::per_second(2_000).burst(200))
//!     .leased(Duration::from_millis(100))
//!     .build()?;
//! let provider = GlobalRateLimiter::connect("redis://127.0.0.1/", "provider", config)?;
//! for _ in 0..1_000 {
//!     // One compare-and-swap; a lease per 100 ms per process behind it.
//!     if provider.check(&RateKey::whole()).await.is_ok() { /* call the provider */ }
//! }
//! provider.close().await; // gives back the unspent tail of the last lease, if it can
//! let m = provider.metrics();
//! println!("{} Redis calls for {} cells", m.redis_calls, m.spent_cells);
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
//! # }
//! ```
//!
//! - **Safety**: a keeper task leases `k` cells per refresh with one
//!   script (`gcra_lease.lua`) that grants as many of them as conform now
//!   on the one GCRA schedule, moving it by the granted cells only. Every
//!   cell spent was granted, so the fleet (leased and per-call processes
//!   together) never passes `burst + ⌊t / T⌋` from the first lease to the
//!   last.
//! - **The trade**: a cell may be spent up to `H = 2 × refresh + store
//!   timeout` after Redis granted it (cells unspent at a refresh are kept
//!   one more refresh, then wasted), so over a short window `w` the fleet
//!   may spend up to `burst + ⌊(w + H) / T⌋`. Keep `refresh` small beside
//!   the burst window where the limited party counts bursts strictly.
//! - **Demand**: `k` is the last interval's cells spent and refused,
//!   scaled to one refresh, plus a quarter and the cells waited for, less
//!   what the pocket still holds, at most the burst (the most GCRA admits
//!   at once). A process that runs dry after a full grant refreshes early,
//!   at most every quarter refresh; after a partial grant it waits: the
//!   schedule is full and cells come at Redis's pace.
//! - **A pocket, not a local `RateLimiter`**: a local limiter's quota is
//!   fixed when it is made and it reads the clock per check; pacing would
//!   not change the fleet's bound (set by how long a cell can wait), and
//!   a pocket never holds more than the burst.
//! - **Redis down**: the pocket is spent, then the fallback answers; the
//!   pocket ages out within two failed refreshes.
//! - **Keyed checks stay per call**: a pocket per client key would take a
//!   lease per key per process, more calls than it saves for quiet keys.
//!
//! Measured on a real `redis-server` (`tests/global_rate_leased.rs`): four
//! processes against 200/s with a burst of 20, refresh 100 ms, for 5 s
//! spent 1,015 cells where Redis's clock allows 1,021 (99.5 % of
//! `burst + 200 × 5`); 0.010 Redis calls per admitted cell at 2,000/s; a
//! leased check costs what a local `RateLimiter::check` does
//! ([benchmarks](super::benchmarks#the-global-rate-limiter-on-redis)).
