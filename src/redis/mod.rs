//! One limit across processes: a bulkhead shared by every process that uses
//! the same Redis (or Valkey) and the same system name (feature `redis`).
//!
//! A [`crate::bulkhead::Bulkhead`] limits one process. Twelve replicas with
//! a bulkhead of 20 each put 240 calls at a provider that allows 20. A
//! [`GlobalBulkhead`] counts the calls of every replica in Redis:
//!
//! ```no_run
//! use core::time::Duration;
//! use watertight::redis::{Fallback, GlobalBulkhead, GlobalConfig};
//!
//! # async fn charge() -> Result<(), ()> { Ok(()) }
//! # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalConfig::builder(20)      // 20 calls at once, fleet-wide
//!     .local_cap(4)                            // and at most 4 from this process
//!     .fallback(Fallback::LocalShare(2))       // 2 on our own while Redis is down
//!     .build()?;
//! let payments = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", config)?;
//!
//! let permit = payments.acquire_timeout(Duration::from_millis(200)).await?;
//! let token = permit.fencing_token(); // for a downstream that rejects stale holders
//! charge().await.ok();
//! drop(permit); // released in the background; `permit.release().await` waits for it
//!
//! payments.close().await?; // at shutdown: every release sent, the keeper stopped
//! # let _ = token; Ok(()) }
//! ```
//!
//! # How it works
//!
//! Each system has three names in Redis, all with the hash tag `{name}`, so
//! that in a Redis Cluster they live in one slot:
//!
//! - `watertight:{name}:holders`, a sorted set: one member per permit
//!   held anywhere, scored by the time its lease ends, in milliseconds of
//!   Redis's own `TIME` (never a client's clock);
//! - `watertight:{name}:fence`, a counter: each grant takes the next value,
//!   its *fencing token*;
//! - `watertight:{name}:released`, a pub/sub channel: each release
//!   publishes how many slots it freed.
//!
//! Taking a slot is one Lua script (`EVALSHA`, reloaded on `NOSCRIPT` by
//! redis-rs's `Script`): drop the members whose lease has ended, count the
//! rest, and if they are under the limit, add ours and return the next
//! fencing token. Giving slots back is another: remove the members and
//! publish. Both run atomically on the primary, so the limit holds however
//! many processes race.
//!
//! **Leases.** A grant lives for one lease ([`GlobalConfig::lease`], 60 s
//! by default) unless renewed. One background task per `GlobalBulkhead`
//! (the *keeper*) renews every lease this process holds in one script call
//! each [`renew_every`](GlobalConfig::renew_every), and sends the releases
//! that dropped permits hand it, batched: a drop never blocks or waits for
//! Redis. A process that dies (`kill -9`) renews nothing: its slots come
//! back within one lease.
//!
//! **A lost lease.** If renewals fail for a whole lease (Redis unreachable,
//! the process frozen), or Redis lost the member (a failover to a replica
//! that had not seen it), the permit is *lost*: [`GlobalPermit::is_lost`]
//! turns true, `global_bulkhead_leases_lost_total` counts it and a tracing
//! warning names the system. Another process may then hold the slot, so the
//! fleet may be running one call over its limit. The call is not cancelled
//! (only the caller knows whether stopping half-way is safe); a caller
//! that must not run over the limit checks `is_lost()` before each step,
//! and a downstream that must not accept a stale holder checks the fencing
//! token: tokens only grow, so a downstream that remembers the highest
//! token it has seen can refuse a smaller one.
//!
//! **Failover.** Redis replicates asynchronously: a primary that fails can
//! take its last grants with it. By default this crate guarantees the
//! limit on one primary, not across a failover; with
//! [acknowledged grants](GlobalConfigBuilder::acknowledged) across one
//! too. See [Failover](#failover) below, with the measured figures. A
//! fencing counter that is missing (a Redis restarted without
//! persistence, an evicted key) starts again from Redis's `TIME` in
//! microseconds, so tokens keep growing across a restart as long as the
//! system took fewer than one grant per microsecond since the counter
//! first started (a Redis primary runs well under 100,000 grants a second)
//! and the new server's clock is not behind the old one's.
//!
//! **Shutting down.** [`GlobalBulkhead::close`] refuses new acquisitions,
//! waits for the permits still held, sends every release and waits for
//! Redis to confirm it, then stops the keeper: call it before `main`
//! returns (a rolling deploy would otherwise leave the last moments'
//! slots taken for a lease). Without it, on tokio, a runtime that shuts
//! down drops the keeper, whose drop sends what is still queued on a
//! blocking connection (at most one store timeout, nothing more tried
//! after a failure), as do permits dropped after it.
//!
//! **Waiting** is woken, not polled. A waiter ([`acquire_until`],
//! [`acquire_timeout`]) registers for the release notifications (the
//! connection is subscribed to the system's channel through RESP3 push),
//! runs the acquire script, and if refused sleeps until a release
//! notification, the end of the earliest lease (which the script returns:
//! that is when a crashed holder's slot comes back), or its deadline,
//! whichever is first; then it tries again. It is **not FIFO across
//! processes**: each release wakes as many waiters in every process as it
//! freed slots, and whichever reaches Redis first wins. Within one process
//! waiters are woken in the order they started waiting.
//!
//! **When Redis is down, slow or unreachable.** Each command has its own
//! timeout ([`store_timeout`](GlobalConfig::store_timeout), 100 ms). A
//! caller whose deadline comes first stops waiting then; its acquire
//! command runs on to its own timeout in a task of its own, which gives
//! back a grant nobody is left to read, and tells the breaker how Redis
//! did. That breaker, one of this crate's, guards the connection: after a
//! few failures it opens, and callers get the fallback at once, without a
//! timeout each, however short their deadlines. The
//! [`Fallback`] decides what they get: [`StoreUnavailable`](GlobalError::StoreUnavailable)
//! at once, or a permit from a local bulkhead of `k` slots. redis-rs's
//! connection manager reconnects by itself; when its breaker lets a probe
//! through and Redis answers, the global limit resumes, without a restart.
//!
//! # Leased shares
//!
//! Per call, every acquisition is a script on one Redis primary: about
//! 11 µs of Redis CPU per acquire+release pair, a round trip on every
//! call. With [`GlobalConfigBuilder::leased`] (mode [`Mode::Leased`]) a
//! process instead holds a *lease on a share* of the limit and serves
//! acquisitions from a local lock-free bulkhead of that size, with no
//! Redis call; its keeper refreshes the share in one script call every
//! `refresh`:
//!
//! ```no_run
//! use core::time::Duration;
//! use watertight::redis::{GlobalBulkhead, GlobalConfig};
//!
//! # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = GlobalConfig::builder(20)
//!     .lease(Duration::from_secs(3))          // a dead process's share comes back within 3 s
//!     .leased(Duration::from_millis(500))     // refreshed twice a second
//!     .build()?;
//! let payments = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", config)?;
//! let permit = payments.acquire_timeout(Duration::from_millis(200)).await?; // no Redis call
//! drop(permit);
//! println!("{} Redis calls so far", payments.metrics().redis_calls);
//! payments.close().await?; // gives the share back
//! # Ok(()) }
//! ```
//!
//! - **Demand.** Each refresh reports the process's demand: slots in use,
//!   callers waiting, and calls refused since the last refresh (capped at
//!   the limit). A share that runs dry (a caller refused or waiting) asks
//!   for an early refresh, never sooner than a quarter of `refresh` after
//!   the last one, and only when it could help (the demand grew, or the
//!   last answer gave less than the fair share).
//! - **Allocation: max-min fair on reported demand** (water-filling): the
//!   limit, less the per-call holders, is divided so that no process gets
//!   more than it asked for and every process that asked for more gets an
//!   equal part of what is left. Each demand is first raised to the
//!   *floor* ([`lease_floor`](GlobalConfigBuilder::lease_floor), 1 by
//!   default), so that a new or quiet process can take a call at once. We
//!   chose max-min fairness (Doorman's default) over proportional shares:
//!   a small process is never squeezed by a large one, and a process that
//!   asks for little leaves the rest to the others.
//! - **Safety, enforced in the script: the shares never sum past the
//!   limit.** A process is granted at most what the limit leaves after the
//!   per-call holders and every other live share *as recorded*; what is
//!   recorded for it is the larger of its grant and what it may still be
//!   using (its local capacity until it hears the answer, or the calls it
//!   runs). So a share shrinks only as fast as its holder releases: a
//!   process told to go from 6 to 2 stops granting at once, and Redis
//!   counts it at 6 until its next refresh reports the calls ended (a
//!   shrink is refreshed again after a quarter of `refresh`). A process
//!   whose demand fell below its share cuts its local share to the demand
//!   *before* it reports, so that Redis can record the smaller share at
//!   once.
//! - **Giving back on demand.** A process granted less than its fair share
//!   (others still hold it) publishes a *wanted* notice (the channel
//!   `watertight:{name}:wanted`, which leased processes listen on); a
//!   process that holds more than it needs then refreshes after the
//!   usual quarter-refresh gap instead of at its next refresh.
//! - **A dead process** frees its share within one lease (the script
//!   drops shares whose lease ended). A **frozen** one (SIGSTOP, a long
//!   pause) finds its lease over by its own clock when it wakes: its
//!   permits report [`is_lost`](GlobalPermit::is_lost), it takes no more
//!   from the old share, and its next refresh starts a new lease with a
//!   larger fencing token (one token per lease: every permit of a share
//!   carries it).
//! - **Redis down**: the process keeps serving from its share until the
//!   lease ends (it was granted; nobody else can hold those slots), then
//!   meets the [`Fallback`] like a per-call acquisition. Refreshes do not
//!   go through the store breaker: no caller waits for them.
//! - **Redis restarted without persistence** forgets every share: each
//!   process's next refresh learns its lease was lost (its permits report
//!   it), and Redis records what it still runs, so new grants go only to
//!   what is left; the limit holds again once those calls end.
//! - **Mixed fleets.** Per-call and leased processes of one system share
//!   one limit: the per-call script counts the live shares, and the
//!   refresh counts the per-call holders (a rolling switch from one mode
//!   to the other is safe).
//! - **The trade:** a share can sit idle for up to one refresh while
//!   another process waits, and a new process starts with its floor until
//!   its first refresh reports its demand.
//!
//! Measured (tests/global_leased.rs, real redis-server, limit 20, 4
//! processes × 32 tasks, demand 3 : 3 : 6 : 24 then 24 : 3 : 6 : 0,
//! refresh 250 ms): at most 20 at once (marked on a second Redis), 94 % of
//! the limit in use on average while demand exceeded it, 0.016 Redis
//! calls per call; the process whose demand rose had its fair share
//! 199–264 ms after the change (three runs, with a CI run on the same two
//! cores; 391–581 ms before the wanted notices); the idle one ended
//! holding its floor.
//!
//! **A local front.** [`GlobalConfigBuilder::local_cap`] puts a local
//! bulkhead in front: a process already at its cap is refused (or waits)
//! without a Redis round trip.
//!
//! # Failover
//!
//! Redis replicates asynchronously: a primary that dies takes with it the
//! writes its replicas had not received yet. After Sentinel promotes a
//! replica:
//!
//! - **a lost grant** still has its holder running, but the new primary
//!   does not count it: another process can be granted its slot, and the
//!   fleet runs over the limit until the holder's next renewal finds its
//!   member gone (its permit then reports [`is_lost`](GlobalPermit::is_lost));
//! - **a lost release** keeps its slot counted until its lease ends (the
//!   safe side: fewer grants, not more);
//! - **the fencing counter steps back**, so tokens handed out before the
//!   failover are handed out again after it.
//!
//! **Acknowledged grants** ([`GlobalConfigBuilder::acknowledged`]`(replicas,
//! timeout)`) close this: each grant, lease renewal and share refresh is
//! followed by `WAIT replicas timeout` in the same pipeline (one round
//! trip, on the same connection: a `WAIT` on another connection would
//! wait for nothing), and counts only once that many replicas have it.
//! Replication is one ordered stream, so a replica that has a grant has
//! everything written before it. A grant not acknowledged in time is
//! given back and becomes [`StoreFailure::NotAcknowledged`]: a store
//! failure like any other, so the [`Fallback`] decides (`FailClosed`
//! refuses it with [`GlobalError::StoreUnavailable`], `LocalShare` serves
//! the local share, not counted in Redis), the store breaker counts it,
//! and so does [`GlobalMetrics::unacknowledged`]. A fencing token is
//! handed out only with an acknowledged grant (per call) or an
//! acknowledged refresh (leased); a renewal or refresh not acknowledged is
//! a failed one, so a lease runs on from its last acknowledged renewal.
//! The promise: with `replicas` equal to the number of replicas, the
//! replica Sentinel promotes has every grant a caller was given and every
//! token handed out, so the limit holds and tokens never repeat across the
//! failover (for calls that stay within their lease or stop when
//! `is_lost()` turns true, as always). With fewer, it holds as long as
//! Sentinel promotes a replica with the most of the stream (its choice
//! among reachable replicas of equal priority). The cost: every grant
//! waits for a replica's acknowledgement (a replica round trip; commands
//! pipelined behind a `WAIT` on the shared connection wait too), and
//! nothing is granted while fewer than `replicas` replicas are connected,
//! for instance after a failover until the failed node is back as a
//! replica. Leased shares keep serving through that time from a share
//! whose lease was acknowledged, until the lease ends.
//!
//! **Sentinel** ([`GlobalBulkhead::connect_sentinel`], and
//! [`GlobalRateLimiter::connect_sentinel`]): the connection goes to the
//! primary the Sentinels name. A command that fails on the
//! connection (refused, dropped, timed out, or `READONLY` from a demoted
//! primary) makes the next command ask the Sentinels again (one asks, the
//! others wait for its answer), and redis-rs checks that the server they
//! name calls itself a primary; a new primary gets a new connection (the
//! release channel is subscribed again), and the scripts are loaded there
//! on their first `NOSCRIPT`. No restart, no configuration change. One
//! gap is Sentinel's own: after a failover with the old primary alive (a
//! planned one, a partition), the old primary answers as a primary until
//! Sentinel demotes it (some 8 s later, for Redis 7.0's Sentinel), and a
//! client whose connection to it still works writes there meanwhile (the
//! writes are lost when it is demoted). With acknowledged grants that
//! costs no grant: the old primary has lost its replica, so its grants go
//! unacknowledged, and an unacknowledged write also makes the client ask
//! the Sentinels again.
//!
//! Measured (`tests/global_failover.rs`; redis-server 7.0 on loopback: a
//! primary, one replica, three Sentinels with `down-after-milliseconds`
//! 500; two systems of limit 6, each used by one per-call process of 8
//! tasks and one leased process of 3, a quarter of the calls 2.5 s long
//! and the rest 5 ms, each call marked on a separate redis-server; one
//! system with `acknowledged(1, 100 ms)`, one without. The replica is cut
//! off for 300 ms before the primary is killed with SIGKILL, the way a
//! lagging replica loses the last writes; the killed node comes back as
//! the new primary's replica 1.5 s after the promotion; nine runs):
//!
//! | | acknowledged | not acknowledged |
//! |---|---|---|
//! | calls over the limit (fleet, at most 6 at once) | 0 | 0 |
//! | fencing tokens handed out twice | 0 | 34–114 per run |
//! | limit 1: a grant taken while the replica is cut off | refused (`NotAcknowledged`) | granted, lost in the failover; a second holder got the only slot 1.79–2.28 s after the kill while the first still ran |
//! | per-call grants resume after the kill | 3.29–3.99 s (once the killed node is back as a replica, 3.28–3.53 s) | 2.03–2.71 s (Sentinel promoted the replica 1.70–1.92 s after the kill) |
//! | leased processes | kept serving from the share acknowledged before the cut until its lease (3 s) ended; a new share once a replica was back | kept serving from their share, refreshed on the new primary after the promotion |
//!
//! The fleet ran over its limit in no run even without acknowledgement:
//! under a steady load, the releases lost with the same 300 ms kept more
//! slots counted on the promoted replica than the lost grants freed. The
//! limit-1 system shows what a rising load (more grants than releases in
//! the lost moments) meets: a slot handed out twice.
//!
//! # Redis Cluster
//!
//! [`GlobalBulkhead::connect_cluster`] (and
//! [`GlobalRateLimiter::connect_cluster`]) take the URLs of some of a
//! cluster's nodes and speak to it through redis-rs's cluster client:
//!
//! ```no_run
//! use watertight::redis::{GlobalBulkhead, GlobalConfig};
//!
//! # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let nodes = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"];
//! let config = GlobalConfig::builder(20).build()?;
//! let payments = GlobalBulkhead::connect_cluster(&nodes, "payments", config)?;
//! drop(payments.acquire_timeout(core::time::Duration::from_millis(200)).await?);
//! payments.close().await?;
//! # Ok(()) }
//! ```
//!
//! - **One system, one slot.** Every key a script touches is passed in
//!   `KEYS` and carries the hash tag `{name}`, and so do the channels: a
//!   system lives on the one primary that serves its slot, where its
//!   scripts run atomically as on a lone Redis, and the limit holds as
//!   there. Systems spread over the primaries by their names' slots: a
//!   cluster scales the number of systems, not one system's calls (the
//!   leased mode is the way to take one system's load off Redis).
//! - **Notifications are sharded pub/sub** (`SSUBSCRIBE`, and `SPUBLISH`
//!   in the scripts; **Redis 7.0 or later**, or Valkey): a release is
//!   published on the system's own node only, not over the cluster bus to
//!   every node. The subscriptions ride a second cluster connection that
//!   runs no script: a node that gives a slot away pushes an unsolicited
//!   `sunsubscribe`, which redis-rs (1.8) would take for the reply of a
//!   command in flight on the same connection (valkey-io/valkey#1066).
//!   The waiters are woken by it, as by a lost connection, and the keeper
//!   subscribes again on the slot's new node within a second.
//! - **A slot that moves** (`redis-cli --cluster reshard`, a rebalance):
//!   while the system's keys are split between the two nodes, its scripts
//!   are refused (`ASK`, `TRYAGAIN`), and redis-rs retries them within the
//!   [store timeout](GlobalConfig::store_timeout). A caller whose command
//!   is still refused at its end gets the [`Fallback`]
//!   ([`StoreUnavailable`](GlobalError::StoreUnavailable) by default): a
//!   typed error, never a permit Redis did not record. Such refusals do not
//!   count for the [store breaker](GlobalBulkhead::store_breaker) (a slot
//!   moving is Redis working as meant; counted, they would shut the limit
//!   for the breaker's whole open duration). A leased share serves on
//!   from its lease meanwhile. Measured (tests/global_cluster.rs, three
//!   primaries on one machine, 16 tasks per system): a per-call system
//!   whose slot was moved key by key with 300 ms pauses (refused for
//!   longer than its 500 ms store timeout) saw 6–57 typed errors among
//!   2,250–2,900 grants (six runs) and its first grant within 15 ms of
//!   the move's end; a leased one moved with 100 ms pauses saw none;
//!   neither held more than its limit at once, lost a permit, or left a
//!   slot taken.
//! - **Leases are scored on the serving node's clock** (`TIME`): a slot
//!   that moves takes its scores to a node whose clock should agree
//!   (NTP) to well within a lease.
//! - **A primary's failover** inside the cluster is a failover like any
//!   other (see *Failover* above): the cluster promotes one of its
//!   replicas, and redis-rs follows the slot there (`MOVED`).
//! - **Acknowledged grants** ([`GlobalConfigBuilder::acknowledged`]) work
//!   in a cluster as on one primary: redis-rs sends a pipeline to the node
//!   of its first command that names a slot, the script's `EVALSHA` (a
//!   `WAIT` names none), so the `WAIT` behind it runs on the same
//!   connection and counts the replicas of the primary that serves the
//!   system. A system whose primary has fewer replicas than asked for gets
//!   no grant ([`StoreFailure::NotAcknowledged`]), whatever the other
//!   primaries have. Tested (tests/global_cluster.rs, a replica added to
//!   one of three primaries): the system on it was granted 30 times in a
//!   row, its replica holding each grant the moment it was handed out,
//!   and a leased share refreshed acknowledged; the system on a primary
//!   without a replica was refused and its grant given back. A `WAIT`
//!   sent on its own (redis-rs sends a keyless `WAIT` to every primary and
//!   keeps the smallest answer) refused the first system too.
//! - Cluster clients name nodes by host and port: no Unix sockets. On
//!   shutdown, a keeper dropped with its runtime sends its last releases
//!   on a blocking cluster connection, as it does on one Redis.
//!
//! [`acquire_until`]: GlobalBulkhead::acquire_until
//! [`acquire_timeout`]: GlobalBulkhead::acquire_timeout

use std::{format, string::String, vec::Vec};

mod config;
mod conn;
mod era;
mod error;
mod keeper;
mod rate;
mod runtime;
mod share;
mod store;
mod telemetry;

pub use config::{Ack, Fallback, GlobalConfig, GlobalConfigBuilder, GlobalConfigError, Mode};
pub use error::{GlobalBuildError, GlobalError, StoreFailure};
pub use rate::{
    GlobalRateBuildError, GlobalRateConfig, GlobalRateConfigBuilder, GlobalRateConfigError,
    GlobalRateError, GlobalRateLimiter, GlobalRateMetrics, RateFallback, RateKey, RateKeyError,
};
pub use runtime::Runtime;
pub use telemetry::GlobalMetrics;

use core::future::Future;
use core::time::Duration;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::breaker::{HeapBreaker, WindowStorage};
use crate::bulkhead::{AcquireError, Bulkhead, OwnedPermit};
use crate::clock::{Clock, Instant, Timer, TokioClock};
use crate::policy::{self, ErrorKind, Policy};
use crate::sync::{AtomicU64, Ordering};

use keeper::Msg;
use store::{check_name, Acquired, Core, Lease};

/// What a handle and its permits hold.
struct Inner<R> {
    core: Arc<Core<R>>,
    /// To the keeper: members whose permits were dropped, and `close`.
    releases: mpsc::UnboundedSender<Msg>,
    front: Option<Arc<Bulkhead<R>>>,
    share: Option<Arc<Bulkhead<R>>>,
    /// In leased mode, this process's share of the limit.
    leased: Option<Arc<share::Share<R>>>,
    breaker: HeapBreaker<R>,
    /// A random tag of this handle, so that members never collide across
    /// processes (or across handles in one process).
    tag: String,
    seq: AtomicU64,
}

/// A bulkhead whose limit is shared by every process that uses the same
/// Redis and the same name. See [the module](self) for how it works and
/// what it guarantees.
///
/// Cloning is cheap (the handles share one connection, one keeper task and
/// one local front).
///
/// # Examples
///
/// ```no_run
/// use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError};
///
/// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GlobalConfig::builder(20).build()?;
/// let payments = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", config)?;
/// match payments.try_acquire().await {
///     Ok(permit) => { /* call the provider; the permit is released on drop */ drop(permit) }
///     Err(GlobalError::Full) => { /* 20 calls are running fleet-wide: answer 503 */ }
///     Err(e) => return Err(e.into()),
/// }
/// # Ok(()) }
/// ```
pub struct GlobalBulkhead<R = TokioClock> {
    inner: Arc<Inner<R>>,
}

impl<R> Clone for GlobalBulkhead<R> {
    fn clone(&self) -> Self {
        GlobalBulkhead {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<R: Runtime> core::fmt::Debug for GlobalBulkhead<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GlobalBulkhead")
            .field("name", &self.inner.core.name)
            .field("limit", &self.inner.core.config.limit)
            .field("held", &self.held())
            .finish()
    }
}

impl<R: Runtime> Inner<R> {
    /// Gives `member`'s slot back, never blocking while the keeper runs:
    /// the keeper sends it, batched. Once the keeper has ended (`close`)
    /// a task of its own sends it; once the keeper's runtime has shut down,
    /// a blocking connection does (bounded by the store timeout).
    fn give_back(&self, member: String) {
        let Err(mpsc::error::SendError(Msg::Release(member))) =
            self.releases.send(Msg::Release(member))
        else {
            return;
        };
        let core = &self.core;
        if !core.keeper_gone() && core.clock.can_spawn() {
            let core = Arc::clone(core);
            core.clock.clone().spawn(async move {
                let _ = core.release(core::slice::from_ref(&member)).await;
            });
        } else {
            core.release_blocking(core::slice::from_ref(&member));
        }
    }
}

/// A tag unique to this process and handle: the process id, the time and
/// std's per-process random hash keys.
fn random_tag() -> String {
    use core::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(t);
    format!("{:08x}-{:016x}", std::process::id(), h.finish())
}

impl GlobalBulkhead {
    /// A global bulkhead for system `name` on the Redis at `url`
    /// (`redis://host:port/db`, `rediss://…`, `redis+unix:///path`).
    ///
    /// It does not wait for Redis: the connection is made on first use (and
    /// made again by itself after it is lost), so a service starts while
    /// Redis is down, with the [fallback](Fallback) until Redis answers.
    /// The connection speaks RESP3 (Redis 6 or later), for the release
    /// notifications. It starts the keeper task on the current tokio
    /// runtime; the task ends when the last handle and permit are dropped,
    /// or at [`close`](GlobalBulkhead::close).
    ///
    /// Call [`close`](GlobalBulkhead::close)`.await` before the process
    /// exits: it sends the releases still queued and waits for Redis to
    /// confirm them. (If the runtime shuts down first, the keeper's drop
    /// sends them on a blocking connection, best effort.)
    ///
    /// # Errors
    ///
    /// [`GlobalBuildError::BadUrl`] for a URL redis-rs cannot open,
    /// [`GlobalBuildError::BadName`] for an empty name, one above 128 bytes
    /// or one with `{`, `}` or a control character,
    /// [`GlobalBuildError::NoRuntime`] outside a tokio runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).build().unwrap();
    /// // No Redis needs to be there yet.
    /// let payments = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", config).unwrap();
    /// assert_eq!(payments.name(), "payments");
    /// # });
    /// ```
    pub fn connect(
        url: &str,
        name: &'static str,
        config: GlobalConfig,
    ) -> Result<Self, GlobalBuildError> {
        Self::connect_on(url, name, config, TokioClock)
    }

    /// A global bulkhead for system `name` on the primary that the Redis
    /// Sentinels at `sentinels` (`redis://host:port`, each a Sentinel)
    /// name `master`, followed across failovers without a restart.
    ///
    /// Like [`connect`](GlobalBulkhead::connect), it does not wait: the
    /// Sentinels are first asked by the first command. After a command
    /// fails on the connection (the primary died, refused, timed out, or
    /// answered `READONLY` because it was demoted), the next command asks
    /// the Sentinels again, and redis-rs checks that the server they name
    /// calls itself a primary before it is used; commands then go to the
    /// new primary (with the store breaker and the [fallback](Fallback)
    /// in between, as for any outage). The primary's connection speaks
    /// RESP3 without a password or database number (Sentinel URLs may
    /// carry their own credentials).
    ///
    /// A failover is where Redis's asynchronous replication can lose the
    /// last grants: pair this with
    /// [`acknowledged`](GlobalConfigBuilder::acknowledged) grants when the
    /// limit must hold across it (see [the module](self#failover)).
    ///
    /// # Errors
    ///
    /// [`GlobalBuildError::BadUrl`] for an empty list or a URL redis-rs
    /// cannot open, and the rest as [`connect`](GlobalBulkhead::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20)
    ///     .acknowledged(1, Duration::from_millis(50)) // a grant survives the primary
    ///     .build()
    ///     .unwrap();
    /// let sentinels = ["redis://127.0.0.1:26379/", "redis://127.0.0.1:26380/", "redis://127.0.0.1:26381/"];
    /// // No Sentinel needs to be there yet.
    /// let payments = GlobalBulkhead::connect_sentinel(&sentinels, "main", "payments", config).unwrap();
    /// assert_eq!(payments.name(), "payments");
    /// # });
    /// ```
    pub fn connect_sentinel(
        sentinels: &[&str],
        master: &str,
        name: &'static str,
        config: GlobalConfig,
    ) -> Result<Self, GlobalBuildError> {
        Self::connect_sentinel_on(sentinels, master, name, config, TokioClock)
    }

    /// A global bulkhead for system `name` on a Redis Cluster (Redis 7.0
    /// or later, or Valkey), given the URLs of some of its nodes
    /// (`redis://host:port`, `rediss://…`; the client learns the others
    /// from them). See [the module's section](self#redis-cluster) for what
    /// a cluster changes.
    ///
    /// Everything else is as [`connect`](GlobalBulkhead::connect): the
    /// connection is made on first use, through redis-rs's cluster
    /// client, which follows the system's slot when it moves.
    ///
    /// # Errors
    ///
    /// [`GlobalBuildError::BadUrl`] for no URL, one redis-rs cannot open,
    /// a Unix socket (a cluster names its nodes by host and port), or
    /// nodes that disagree on password, protocol or TLS; the others as
    /// [`connect`](GlobalBulkhead::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::{GlobalBuildError, GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).build().unwrap();
    /// // No cluster needs to be there yet.
    /// let nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"];
    /// let payments = GlobalBulkhead::connect_cluster(&nodes, "payments", config).unwrap();
    /// assert_eq!(payments.name(), "payments");
    ///
    /// let none: [&str; 0] = [];
    /// let err = GlobalBulkhead::connect_cluster(&none, "payments", config).unwrap_err();
    /// assert!(matches!(err, GlobalBuildError::BadUrl(_)));
    /// # });
    /// ```
    pub fn connect_cluster<U: AsRef<str>>(
        nodes: &[U],
        name: &'static str,
        config: GlobalConfig,
    ) -> Result<Self, GlobalBuildError> {
        Self::connect_cluster_on(nodes, name, config, TokioClock)
    }
}

impl<R: Runtime> GlobalBulkhead<R> {
    /// Like [`connect`](GlobalBulkhead::connect), on `runtime`: its clock
    /// times everything, and its executor runs the tasks (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect`](GlobalBulkhead::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).build().unwrap();
    /// let g = GlobalBulkhead::connect_on("redis://127.0.0.1:1/", "payments", config, TokioClock).unwrap();
    /// assert_eq!(g.config().limit(), 20);
    /// # });
    /// ```
    pub fn connect_on(
        url: &str,
        name: &'static str,
        config: GlobalConfig,
        runtime: R,
    ) -> Result<Self, GlobalBuildError> {
        Self::open(conn::Endpoint::Single(url), name, config, runtime)
    }

    /// Like [`connect_sentinel`](GlobalBulkhead::connect_sentinel), on
    /// `runtime` (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect_sentinel`](GlobalBulkhead::connect_sentinel).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).build().unwrap();
    /// let sentinels = ["redis://127.0.0.1:1/", "redis://127.0.0.1:2/"];
    /// let g = GlobalBulkhead::connect_sentinel_on(&sentinels, "main", "payments", config, TokioClock).unwrap();
    /// assert_eq!(g.name(), "payments");
    /// # });
    /// ```
    pub fn connect_sentinel_on(
        sentinels: &[&str],
        master: &str,
        name: &'static str,
        config: GlobalConfig,
        runtime: R,
    ) -> Result<Self, GlobalBuildError> {
        Self::open(
            conn::Endpoint::Sentinel { sentinels, master },
            name,
            config,
            runtime,
        )
    }

    /// Like [`connect_cluster`](GlobalBulkhead::connect_cluster), on
    /// `runtime` (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect_cluster`](GlobalBulkhead::connect_cluster).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).build().unwrap();
    /// let nodes = ["redis://127.0.0.1:7000"];
    /// let g = GlobalBulkhead::connect_cluster_on(&nodes, "payments", config, TokioClock).unwrap();
    /// assert_eq!(g.config().limit(), 20);
    /// # });
    /// ```
    pub fn connect_cluster_on<U: AsRef<str>>(
        nodes: &[U],
        name: &'static str,
        config: GlobalConfig,
        runtime: R,
    ) -> Result<Self, GlobalBuildError> {
        let nodes: Vec<String> = nodes.iter().map(|u| String::from(u.as_ref())).collect();
        Self::open(conn::Endpoint::Cluster(&nodes), name, config, runtime)
    }

    fn open(
        endpoint: conn::Endpoint<'_>,
        name: &'static str,
        config: GlobalConfig,
        runtime: R,
    ) -> Result<Self, GlobalBuildError> {
        check_name(name)?;
        if !runtime.can_spawn() {
            return Err(GlobalBuildError::NoRuntime);
        }
        let core = Core::open(endpoint, name, config, runtime.clone())?;

        let breaker = HeapBreaker::try_new(name, config.store_breaker, runtime.clone())
            .map_err(|e| GlobalBuildError::Config(GlobalConfigError::StoreBreaker(e)))?;
        let share = match config.fallback {
            Fallback::LocalShare(k) => Some(Arc::new(
                Bulkhead::try_new(name, k, runtime.clone())
                    .map_err(|_| GlobalBuildError::Config(GlobalConfigError::LocalCapTooLarge))?,
            )),
            Fallback::FailClosed => None,
        };
        let front = match config.local_cap {
            Some(k) => Some(Arc::new(
                Bulkhead::try_new(name, k, runtime.clone())
                    .map_err(|_| GlobalBuildError::Config(GlobalConfigError::LocalCapTooLarge))?,
            )),
            None => None,
        };

        let core = Arc::new(core);
        let (tx, rx) = mpsc::unbounded_channel();
        let tag = random_tag();
        let leased = match config.mode {
            Mode::Leased { refresh, floor } => {
                let leased = Arc::new(share::Share::new(
                    name,
                    tag.clone(),
                    floor,
                    refresh,
                    runtime.clone(),
                ));
                runtime.spawn(share::run(Arc::clone(&core), Arc::clone(&leased), rx));
                Some(leased)
            }
            Mode::PerCall => {
                runtime.spawn(keeper::run(Arc::clone(&core), rx));
                None
            }
        };
        Ok(GlobalBulkhead {
            inner: Arc::new(Inner {
                core,
                releases: tx,
                front,
                share,
                leased,
                breaker,
                tag,
                seq: AtomicU64::new(0),
            }),
        })
    }

    /// Shuts this process's use of the limit down cleanly, for the end of
    /// `main` (or a graceful shutdown): it refuses new acquisitions from
    /// every handle ([`GlobalError::Closed`]), waits for the global permits
    /// still held to be dropped (they stay valid and renewed until then,
    /// as a local bulkhead's do after its `close`), sends every release to
    /// Redis and waits for Redis to confirm them, and stops the keeper
    /// task. After it, this process holds nothing in Redis.
    ///
    /// Without it, releases still queued when the runtime shuts down are
    /// sent by the keeper's drop on a blocking connection (at most one
    /// store timeout; on tokio, where a runtime's shutdown drops its tasks;
    /// smol's global executor never drops them, so there only `close`
    /// flushes). A release that is never sent costs its slot one lease.
    ///
    /// Calling it again (or from a clone) waits the same way, and returns
    /// `Ok` at once once the keeper has stopped.
    ///
    /// # Errors
    ///
    /// [`StoreFailure`] if Redis did not confirm every release (those
    /// slots then come back when their leases end).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the handle closed (refusing) and the
    /// keeper running: the releases still go out, only unawaited. Bound the
    /// wait for calls still running with a timeout
    /// (`tokio::time::timeout(d, g.close())`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError};
    /// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1/", "payments", GlobalConfig::builder(20).build()?)?;
    /// let permit = g.try_acquire().await?;
    /// drop(permit);
    /// g.close().await?; // the release has reached Redis; `main` may return
    /// assert!(matches!(g.try_acquire().await, Err(GlobalError::Closed)));
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<(), StoreFailure> {
        let core = &self.inner.core;
        core.close();
        match &self.inner.leased {
            Some(share) => {
                share.local.close();
                // Only the plug left in flight: every leased permit is back.
                core.drained_by(|| share.local.in_flight() <= 1).await;
            }
            None => core.drained_by(|| core.alive() == 0).await,
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.inner.releases.send(Msg::Close(tx)).is_err() {
            return Ok(()); // the keeper has already stopped
        }
        // The keeper ends only by answering, unless its runtime shuts down.
        rx.await.unwrap_or(Err(StoreFailure::TimedOut))
    }

    /// The system's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
    /// assert_eq!(g.name(), "payments");
    /// # });
    /// ```
    pub fn name(&self) -> &'static str {
        self.inner.core.name
    }

    /// The config it was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
    /// assert_eq!(g.config().limit(), 2);
    /// # });
    /// ```
    pub fn config(&self) -> &GlobalConfig {
        &self.inner.core.config
    }

    /// Global permits this process holds now (taken from Redis, not yet
    /// released) whose lease is not lost: it agrees with
    /// [`GlobalPermit::is_lost`] and with the metrics' `leases_lost` at any
    /// moment (a lease found over by the clock here is marked lost and
    /// counted at once, before the keeper's next renewal).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
    /// assert_eq!(g.held(), 0);
    /// # });
    /// ```
    pub fn held(&self) -> usize {
        let core = &self.inner.core;
        match &self.inner.leased {
            Some(share) => share.held(core, core.clock.now()),
            None => core.held(),
        }
    }

    /// The local front, if the config has a local cap.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalConfig::builder(20).local_cap(4).build().unwrap();
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", config).unwrap();
    /// assert_eq!(g.local_front().unwrap().capacity(), 4);
    /// # });
    /// ```
    pub fn local_front(&self) -> Option<&Bulkhead<R>> {
        self.inner.front.as_deref()
    }

    /// The breaker in front of Redis.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
    /// assert_eq!(g.store_breaker().state(), watertight::breaker::State::Closed);
    /// # });
    /// ```
    pub fn store_breaker(&self) -> &HeapBreaker<R> {
        &self.inner.breaker
    }

    /// Counters since it was made.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
    /// assert_eq!(g.metrics().granted, 0);
    /// # });
    /// ```
    pub fn metrics(&self) -> GlobalMetrics {
        let mut m = self.inner.core.stats.snapshot(self.held());
        if let Some(share) = &self.inner.leased {
            m.granted += share.granted();
            let live = share.lease_end().is_some();
            if let Ok(last) = share.last.lock() {
                m.share = if live { last.grant } else { 0 };
                m.share_recorded = if live { last.recorded } else { 0 };
                m.demand_reported = last.demand;
                m.refreshes = last.refreshes;
            }
        }
        m
    }

    /// A permit if a slot is free now, fleet-wide; never waits for one
    /// (it does wait for Redis's answer, at most the store timeout).
    ///
    /// # Errors
    ///
    /// [`GlobalError::Full`] when the limit is reached,
    /// [`GlobalError::LocalCap`] when the local front is full,
    /// [`GlobalError::StoreUnavailable`] when Redis cannot be reached and
    /// the fallback is `FailClosed` (with a local share, its permit, or
    /// `Full` when the share is full too).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back whatever it took: a grant Redis made
    /// after the drop is released by the keeper.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) {
    /// if let Ok(permit) = g.try_acquire().await {
    ///     assert!(permit.is_global());
    /// }
    /// # }
    /// ```
    pub async fn try_acquire(&self) -> Result<GlobalPermit<R>, GlobalError> {
        self.acquire_inner(None, None).await
    }

    /// A permit, waiting up to `max_wait` for a slot to come free.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), with
    /// [`GlobalError::TimedOut`] in place of `Full`.
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use watertight::redis::{GlobalBulkhead, GlobalError};
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) {
    /// match g.acquire_timeout(Duration::from_millis(200)).await {
    ///     Ok(_permit) => { /* call */ }
    ///     Err(GlobalError::TimedOut) => { /* the fleet stayed at its limit for 200 ms */ }
    ///     Err(_) => {}
    /// }
    /// # }
    /// ```
    pub async fn acquire_timeout(
        &self,
        max_wait: Duration,
    ) -> Result<GlobalPermit<R>, GlobalError> {
        let now = self.inner.core.clock.now();
        self.acquire_inner(Some(now.saturating_add(max_wait)), Some(now))
            .await
    }

    /// A permit, waiting until `deadline` (on the runtime's clock) for a slot to
    /// come free.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Self::acquire_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use watertight::clock::{Clock, TokioClock};
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) {
    /// let deadline = TokioClock.now() + Duration::from_millis(500); // the request's budget
    /// if let Ok(permit) = g.acquire_until(deadline).await {
    ///     drop(permit);
    /// }
    /// # }
    /// ```
    pub async fn acquire_until(&self, deadline: Instant) -> Result<GlobalPermit<R>, GlobalError> {
        self.acquire_inner(Some(deadline), None).await
    }

    /// Runs `make`'s call through `policy` (its breaker and call timeout, and
    /// its own bulkhead as one more per-process cap) while holding a global
    /// permit taken within the policy's slot wait. A refusal of the global
    /// limit is the policy's `BulkheadFull`, and Redis unreachable with
    /// `FailClosed` is [`ErrorKind::StoreUnavailable`]: the same one
    /// [`is_unavailable`](policy::Error::is_unavailable) error for callers.
    ///
    /// Give the global bulkhead the per-process cap
    /// ([`local_cap`](GlobalConfigBuilder::local_cap)) and the policy at
    /// least as many slots: the cap is then checked before Redis, and the
    /// policy's bulkhead never refuses.
    ///
    /// # Errors
    ///
    /// The policy's [`Error`](policy::Error).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future releases the global permit and cancels the call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use watertight::clock::TokioClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    ///
    /// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let payments = GlobalBulkhead::connect(
    ///     "redis://127.0.0.1/",
    ///     "payments",
    ///     GlobalConfig::builder(20).local_cap(4).build()?,
    /// )?;
    /// let policy: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build()?, TokioClock)?;
    /// let charged = payments.call(&policy, || async { Ok::<_, std::io::Error>("charged") }).await;
    /// if let Err(e) = &charged {
    ///     if e.is_unavailable() { /* 503 */ }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn call<C, const N: usize, W, B, F, Fut, T, E>(
        &self,
        policy: &Policy<C, N, W, B>,
        make: F,
    ) -> Result<T, policy::Error<E>>
    where
        C: Timer + Clone,
        B: Clock,
        W: WindowStorage,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let permit = self
            .acquire_timeout(policy.max_wait())
            .await
            .map_err(|e| policy::Error::new(policy.name(), policy_kind(e)))?;
        let out = policy.call(make).await;
        drop(permit);
        out
    }

    fn next_member(&self) -> (u64, String) {
        let seq = self.inner.seq.fetch_add(1, Ordering::Relaxed);
        (seq, format!("{}:{seq}", self.inner.tag))
    }

    /// An acquisition; `now`, if the caller has just read the clock.
    async fn acquire_inner(
        &self,
        deadline: Option<Instant>,
        now: Option<Instant>,
    ) -> Result<GlobalPermit<R>, GlobalError> {
        let inner = &*self.inner;
        let core = &*inner.core;
        if core.is_closed() {
            return Err(core.stats.rejected(core.name, GlobalError::Closed));
        }
        let front = match &inner.front {
            None => None,
            Some(front) => {
                let got = match deadline {
                    None => front.try_acquire_owned(),
                    Some(d) => front.acquire_owned_until(d).await,
                };
                match got {
                    Ok(p) => Some(p),
                    Err(e) => {
                        return Err(core.stats.rejected(core.name, GlobalError::LocalCap(e)));
                    }
                }
            }
        };
        if let Some(share) = &inner.leased {
            return self.acquire_leased(share, front, deadline, now).await;
        }
        loop {
            // Listen before asking: a release published between the
            // script's answer and the wait below still wakes this waiter.
            let listener = core.listen();
            let sent_at = core.clock.now();
            let (seq, member) = self.next_member();
            let asked = self.ask(member.clone());
            let reply = match deadline {
                None => asked.await,
                Some(d) => tokio::select! {
                    biased;
                    r = asked => r,
                    // The command goes on without us (its task gives back a
                    // grant nobody will read, and tells the breaker how
                    // Redis did); the caller's deadline has come.
                    () = core.clock.sleep_until(d) => {
                        return Err(core.stats.rejected(core.name, GlobalError::TimedOut));
                    }
                },
            };
            match reply {
                Ok(Acquired::Granted { token, held }) => {
                    let lease = Arc::new(Lease::new(member, sent_at));
                    if !core.hold(seq, Arc::clone(&lease)) {
                        // `close` began while Redis was granting it.
                        inner.give_back(String::from(lease.member()));
                        return Err(core.stats.rejected(core.name, GlobalError::Closed));
                    }
                    core.stats.granted(core.name, held);
                    return Ok(GlobalPermit {
                        held: Held::Global { seq, token, lease },
                        inner: Arc::clone(&self.inner),
                        _front: front,
                    });
                }
                Ok(Acquired::Full { held, next_free }) => {
                    core.stats.saw_in_flight(core.name, held);
                    let Some(deadline) = deadline else {
                        return Err(core.stats.rejected(core.name, GlobalError::Full));
                    };
                    let now = core.clock.now();
                    if now >= deadline {
                        return Err(core.stats.rejected(core.name, GlobalError::TimedOut));
                    }
                    // The earliest lease's end, a millisecond late so that
                    // Redis's clock has passed it too.
                    let wake = now
                        .saturating_add(next_free + Duration::from_millis(1))
                        .min(deadline);
                    tokio::select! {
                        () = listener => {}
                        () = core.clock.sleep_until(wake) => {}
                    }
                }
                Err(failure) => return self.fallback(front, deadline, failure).await,
            }
        }
    }

    /// Runs the acquire script for `member` in a task of its own, past the
    /// caller's deadline or cancellation if need be: the task takes the
    /// store breaker's permit, records how Redis did (so a caller with a
    /// short deadline does not hide a dead Redis from the breaker), and
    /// gives back a grant that nobody is left to read. A command that timed
    /// out may still run in Redis later: its member is released too (on the
    /// same connection, so after it).
    fn ask(
        &self,
        member: String,
    ) -> impl Future<Output = Result<Acquired, StoreFailure>> + Send + 'static + use<R> {
        let inner = Arc::clone(&self.inner);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = inner.core.clock.clone();
        runtime.spawn(async move {
            let probe = match inner.breaker.try_acquire() {
                Ok(p) => p,
                Err(r) => {
                    let _ = tx.send(Err(StoreFailure::BreakerOpen(r)));
                    return;
                }
            };
            let reply = inner.core.acquire(&member).await;
            match &reply {
                Ok(_) => probe.success(),
                Err(e) => {
                    if conn::slot_moving(e) {
                        probe.ignore();
                    } else {
                        probe.failure();
                    }
                    inner.give_back(member.clone());
                }
            }
            if let Err(Ok(Acquired::Granted { .. })) = tx.send(reply) {
                // Nobody is waiting for it any more.
                inner.give_back(member);
            }
        });
        async move {
            // The task ends only by sending, unless the runtime is shutting
            // down: then Redis is as good as unreachable.
            rx.await.unwrap_or(Err(StoreFailure::TimedOut))
        }
    }

    async fn fallback(
        &self,
        front: Option<OwnedPermit<R>>,
        deadline: Option<Instant>,
        failure: StoreFailure,
    ) -> Result<GlobalPermit<R>, GlobalError> {
        let core = &self.inner.core;
        let Some(share) = &self.inner.share else {
            return Err(core
                .stats
                .rejected(core.name, GlobalError::StoreUnavailable(failure)));
        };
        let got = match deadline {
            None => share.try_acquire_owned(),
            Some(d) => share.acquire_owned_until(d).await,
        };
        match got {
            Ok(p) => {
                core.stats.fallback_grant(core.name);
                Ok(GlobalPermit {
                    held: Held::Share { _slot: p },
                    inner: Arc::clone(&self.inner),
                    _front: front,
                })
            }
            Err(AcquireError::TimedOut) => {
                Err(core.stats.rejected(core.name, GlobalError::TimedOut))
            }
            Err(_) => Err(core.stats.rejected(core.name, GlobalError::Full)),
        }
    }
}

fn policy_kind<E>(e: GlobalError) -> ErrorKind<E> {
    match e {
        GlobalError::StoreUnavailable(_) => ErrorKind::StoreUnavailable,
        GlobalError::LocalCap(AcquireError::Closed) | GlobalError::Closed => {
            ErrorKind::BulkheadClosed
        }
        _ => ErrorKind::BulkheadFull,
    }
}

enum Held<R> {
    Global {
        seq: u64,
        token: u64,
        lease: Arc<Lease>,
    },
    Share {
        /// Held for its drop, which gives the share's slot back.
        _slot: OwnedPermit<R>,
    },
    /// A slot of this process's leased share ([`Mode::Leased`]).
    Leased {
        /// The lease it was granted under.
        era: u32,
        token: u64,
        /// Given back on drop (always `Some` until then).
        slot: Option<OwnedPermit<R>>,
    },
    /// Released by [`GlobalPermit::release`]: nothing left to give back.
    Released,
}

/// A slot of a [`GlobalBulkhead`]: a grant in Redis (renewed while held),
/// or, while Redis is down and the fallback is a local share, a slot of
/// that share. Dropping it gives the slot back: the release is handed to
/// the keeper task and never blocks.
///
/// # Examples
///
/// ```no_run
/// # use watertight::redis::GlobalBulkhead;
/// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) -> Result<(), Box<dyn std::error::Error>> {
/// let permit = g.try_acquire().await?;
/// if let Some(_token) = permit.fencing_token() {
///     // send it with the request: a downstream that saw a larger one
///     // knows this holder's lease was lost and may refuse it
/// }
/// permit.release().await?; // or just drop it
/// # Ok(()) }
/// ```
pub struct GlobalPermit<R: Runtime = TokioClock> {
    held: Held<R>,
    inner: Arc<Inner<R>>,
    _front: Option<OwnedPermit<R>>,
}

impl<R: Runtime> core::fmt::Debug for GlobalPermit<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GlobalPermit")
            .field("system", &self.inner.core.name)
            .field("fencing_token", &self.fencing_token())
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl<R: Runtime> GlobalPermit<R> {
    /// The grant's fencing token: larger for every later grant of the same
    /// system (on one Redis primary). In leased mode, the token of the
    /// share's lease: every permit of one lease carries it, and a lease
    /// taken later (by any process, or by this one after losing its lease)
    /// carries a larger one. `None` for a permit of the fallback's local
    /// share.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) -> Result<(), Box<dyn std::error::Error>> {
    /// let a = g.try_acquire().await?;
    /// let b = g.try_acquire().await?;
    /// assert!(b.fencing_token() > a.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        match &self.held {
            Held::Global { token, .. } | Held::Leased { token, .. } => Some(*token),
            Held::Share { .. } | Held::Released => None,
        }
    }

    /// Whether this permit counts in Redis: a grant, or a slot of this
    /// process's leased share (false: a slot of the fallback's local share,
    /// taken while Redis was unreachable).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = g.try_acquire().await?;
    /// if !permit.is_global() { /* Redis is down: counted in this process only */ }
    /// # Ok(()) }
    /// ```
    pub fn is_global(&self) -> bool {
        matches!(self.held, Held::Global { .. } | Held::Leased { .. })
    }

    /// Whether the lease was lost: Redis no longer counts this permit, so
    /// another process may hold its slot (see [the module](self#how-it-works)).
    /// True once a renewal found the member gone, or once a whole lease has
    /// passed since the last renewal that reached Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = g.try_acquire().await?;
    /// for step in 0..3 {
    ///     if permit.is_lost() {
    ///         break; // stop before a step that must stay within the limit
    ///     }
    ///     # let _ = step;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        match &self.held {
            Held::Global { seq, lease, .. } => self.inner.core.check_lost(*seq, lease),
            Held::Leased { era, .. } => match &self.inner.leased {
                Some(share) => share.is_lost(&self.inner.core, *era, self.inner.core.clock.now()),
                None => false,
            },
            Held::Share { .. } | Held::Released => false,
        }
    }

    /// Releases the slot and waits for Redis to confirm it. In leased mode
    /// the slot goes back to the process's share at once (Redis hears of
    /// it at the share's next refresh), as it does on drop.
    ///
    /// # Errors
    ///
    /// [`StoreFailure`] if Redis did not confirm; the release is then
    /// handed to the keeper, which retries it (and the lease ends by itself
    /// within one lease regardless).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::GlobalBulkhead;
    /// # #[allow(dead_code)] async fn run(g: GlobalBulkhead) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = g.try_acquire().await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), StoreFailure> {
        let Held::Global { seq, lease, .. } = &self.held else {
            return Ok(());
        };
        let (seq, member) = (*seq, String::from(lease.member()));
        let core = Arc::clone(&self.inner.core);
        lease.set_released();
        core.forget_lease(seq);
        let released = core.release(core::slice::from_ref(&member)).await;
        if released.is_ok() {
            self.held = Held::Released;
            core.permit_gone();
        }
        // Otherwise (and if this future is dropped before Redis answers)
        // the permit's drop hands the release to the keeper.
        released.map(drop)
    }
}

impl<R: Runtime> Drop for GlobalPermit<R> {
    fn drop(&mut self) {
        if let (Held::Leased { era, slot, .. }, Some(share)) = (&mut self.held, &self.inner.leased)
        {
            share.leave(*era);
            drop(slot.take());
            if self.inner.core.is_closed() {
                self.inner.core.wake_drained(); // `close` waits for the last
            }
            return;
        }
        if let Held::Global { seq, lease, .. } = &self.held {
            lease.set_released();
            // Handed on before the permit stops counting as alive, so that
            // `close` finds every release queued ahead of it.
            self.inner.give_back(String::from(lease.member()));
            self.inner.core.forget_lease(*seq);
            self.inner.core.permit_gone();
        }
    }
}
