//! [`GlobalRateLimiter`]: one rate for the whole fleet, kept in Redis. Its
//! docs (on the type: this module is private) say what it guarantees.

use std::{format, string::String, vec::Vec};

use core::future::Future;
use core::hash::BuildHasher;
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use ::redis::{FromRedisValue, Script, ScriptInvocation};
use tokio::sync::mpsc;

use super::conn;
use super::runtime::Runtime;
use super::store::check_name;
use super::{GlobalBuildError, StoreFailure};
use crate::breaker::{HeapBreaker, WindowStorage};
use crate::clock::{Clock, Instant, Timer, TokioClock};
use crate::policy::{self, ErrorKind, Policy};
use crate::rate::{KeyedError, KeyedRateLimiter, RateError, RateLimiter};

mod cells;
mod config;
mod error;
mod lease;
mod telemetry;

pub use config::{GlobalRateConfig, GlobalRateConfigBuilder, GlobalRateConfigError, RateFallback};
pub use error::{GlobalRateBuildError, GlobalRateError, RateKey, RateKeyError};
pub use telemetry::GlobalRateMetrics;

use lease::{Leased, Msg, Pocket};
use telemetry::Stats;

/// Sets of the local fallback's key table: 64 × 8 = 512 keys.
const LOCAL_SETS: usize = 64;

/// Checks a waiting form makes at most.
const MAX_ROUNDS: usize = 32;

/// The fallback: one limiter for the unkeyed limit, a table for the keys
/// (keyed by a hash of the key with this process's random keys: two keys
/// that collide share a limit, which only refuses more).
struct Local<R> {
    whole: RateLimiter<R>,
    keyed: KeyedRateLimiter<u64, R, LOCAL_SETS>,
    hasher: RandomState,
}

struct Inner<R> {
    name: &'static str,
    config: GlobalRateConfig,
    clock: R,
    con: conn::Conn,
    script: Script,
    lease_script: Script,
    return_script: Script,
    breaker: HeapBreaker<R>,
    /// Leased mode: the unkeyed limit's pocket.
    pocket: Option<Arc<Pocket>>,
    /// `close` was called: every check refuses.
    closed: crate::sync::AtomicBool,
    /// `watertight:{name}:rate`; a key's is this, `:`, its encoding.
    whole: String,
    local: Option<Local<R>>,
    stats: Stats,
}

/// What one check decided.
enum Verdict {
    /// Admitted, by Redis (`global`) or the fallback.
    Admitted { global: bool },
    /// Refused: the cells conform this long after the check.
    NotYet(Duration),
}

/// A GCRA rate limit shared by every process that uses the same Redis and
/// the same name, per client key or for the whole system (feature `redis`).
/// Cloning is cheap (the clones share one connection, one breaker and one
/// fallback).
///
/// A [`RateLimiter`] limits one process: twelve replicas that each allow a
/// provider's "200 requests a second" send it 2,400. A
/// `GlobalRateLimiter` keeps the schedule in Redis, so every process with
/// the same Redis and the same system name spends from one quota:
///
/// ```no_run
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateError, GlobalRateLimiter, RateFallback, RateKey};
///
/// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GlobalRateConfig::builder(Quota::per_second(200).burst(20)) // fleet-wide, per key
///     .fallback(RateFallback::Local(Quota::per_second(50)))                  // on our own while Redis is down
///     .build()?;
/// let api = GlobalRateLimiter::connect("redis://127.0.0.1/", "api", config)?;
///
/// let client = RateKey::new("customer-42")?;
/// match api.check(&client).await {
///     Ok(()) => { /* serve it */ }
///     Err(GlobalRateError::Limited { retry_after }) => { /* 429, Retry-After */ let _ = retry_after; }
///     Err(e) => return Err(e.into()),
/// }
/// # Ok(()) }
/// ```
///
/// # What it guarantees
///
/// **The bound.** The algorithm is GCRA, as the local [`RateLimiter`] and
/// redis-cell use it: a key's whole state is its *theoretical arrival
/// time* (TAT), and a request for `n` cells at time `t` conforms iff
/// `max(tat, t) + n·T − t ≤ burst·T`. Each check is one Lua script
/// (`EVALSHA`) that reads Redis's own `TIME`, steps the TAT and answers,
/// atomically on the primary, so however many processes race: over any
/// window of length `w`, a key admits at most `burst + ⌊w / T⌋` cells
/// fleet-wide. No client's clock takes part; a process whose clock is off
/// by an hour changes nothing.
///
/// **Microseconds.** The TAT is kept in microseconds of Redis's `TIME`
/// (Redis's Lua numbers are doubles: nanoseconds since 1970 would not be
/// exact). `T` is the quota's emission interval rounded *up* to a whole
/// microsecond ([`GlobalRateConfig::interval`]), so the fleet never runs
/// faster than the quota, and the bound above is exact in those units.
/// `retry_after` is exact to the microsecond, from the instant Redis ran
/// the script.
///
/// **Memory.** A key's TAT lives under `watertight:{name}:rate:<key>`
/// (the unkeyed limit under `watertight:{name}:rate`) with a `PX` expiry at
/// its TAT, rounded up to the millisecond: a key whose TAT has passed is
/// the same as a missing one, so Redis forgets it then. A key lives at
/// most one burst window ([`GlobalRateConfig::window`], `burst × T`)
/// after its last admission, and Redis holds only the keys used within the
/// last window. A refusal writes nothing. Client keys are any bytes up to
/// 256, encoded ([`RateKey`]) so that no key can break out of the
/// system's names; the hash tag `{name}` puts a system's keys in one
/// Redis Cluster slot, as the global bulkhead's.
///
/// **Redis down, slow or unreachable**: the global bulkhead's answer. Each
/// script has its own timeout ([`store_timeout`](GlobalRateConfig::store_timeout),
/// 100 ms); a breaker of this crate guards the connection, so a dead Redis
/// costs a few timeouts, then refusals at once; and the
/// [`RateFallback`] decides what callers get: `FailClosed`
/// ([`GlobalRateError::StoreUnavailable`] at once: the fleet's rate is
/// never exceeded) or `Local(quota)`, a local [`RateLimiter`] (per key: a
/// [`KeyedRateLimiter`] of 512 keys) with a quota of its own. When Redis
/// answers again (the breaker lets a probe through), the global rate
/// resumes without a restart.
///
/// **A Redis restart without persistence, or a failover** loses TATs (a
/// replica may not have seen the last ones): each key lost starts again
/// with a full burst, so the bound can be exceeded by at most one burst per
/// key at that moment. Nothing else is kept, so nothing else is lost.
///
/// **Waiting** ([`acquire_until`](GlobalRateLimiter::acquire_until),
/// [`acquire_timeout`](GlobalRateLimiter::acquire_timeout)) checks; if
/// refused and the hint lands after the deadline it is refused at once
/// (no sleep only to fail); otherwise it sleeps for the hint on the
/// runtime's clock and checks again, at most 32 times. It reserves
/// nothing in Redis (a reservation would be a write per refusal, and a
/// waiter that is dropped would have to give it back), so waiters are not
/// served in order: several processes woken for the same cell race for it,
/// and the losers sleep again.
///
/// # Leased mode
///
/// [`GlobalRateConfigBuilder::leased`]`(refresh)` stops paying a round
/// trip per check for the unkeyed limit ([`RateKey::whole`]): each process
/// leases *batches of cells* from the one schedule in Redis and spends
/// them locally.
///
/// ```no_run
/// use core::time::Duration;
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
///
/// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GlobalRateConfig::builder(Quota::per_second(2_000).burst(200))
///     .leased(Duration::from_millis(100)) // one script per process per 100 ms
///     .build()?;
/// let provider = GlobalRateLimiter::connect("redis://127.0.0.1/", "provider", config)?;
/// provider.check(&RateKey::whole()).await?; // no Redis call: from this process's pocket
/// provider.close().await;                    // at shutdown: gives back what it can
/// # Ok(()) }
/// ```
///
/// - **One script per refresh** (`gcra_lease.lua`), sent by a keeper task
///   every `refresh`, and early (at most every quarter of it) when a check
///   found the pocket dry and the last lease got all it asked for. It asks
///   for `k` cells: the cells spent and refused in the last interval,
///   scaled to one refresh, plus a quarter for noise and the cells waited
///   for now, at least 1, less the cells still in the pocket, at most the
///   burst less them (GCRA never admits more than the burst at once, and
///   the pocket never holds more). Redis grants as many of the `k` as
///   conform now, each exactly as a single check would, advances the TAT
///   by the granted cells only, and writes nothing when none conform; it
///   answers with the grant and when one more cell conforms.
/// - **The pocket**: a counter of leased cells. A check takes its cells
///   with one compare-and-swap: no Redis call, no clock read, no counter
///   of its own. Why not pace the pocket through a local [`RateLimiter`]
///   at the slice's rate: its quota is fixed when it is made (a new one
///   at every refresh), it reads the clock on every check, and it would
///   not tighten the fleet's bound below, which is set by how long a cell
///   can sit in a pocket, not by how fast one is spent; a pocket holds at
///   most the burst, so no process alone ever bursts past the quota's
///   burst.
/// - **Ageing.** Cells unspent at a refresh are kept (they were
///   admitted), and the next lease asks for fewer; cells still there at
///   the refresh after are wasted (`wasted_cells`). A cell sits in a
///   pocket at most `H = 2 × refresh + store_timeout`.
///
/// **What it guarantees.** Every cell spent was granted by the GCRA
/// script first, and each grant is a set of cells that conformed, so the
/// fleet's spends, with the per-call checks of the same limit, never pass
/// the GCRA bound over the leases: at most `burst + ⌊t / T⌋` over any
/// `t` from the first lease to the last. What leasing trades is the
/// short window: a cell may be spent up to `H` after Redis admitted it,
/// so over any window `w` the fleet spends at most
/// `burst + ⌊(w + H) / T⌋`: up to `H / T` more than the quota's burst at
/// one moment. Choose `refresh` small beside the burst window
/// ([`GlobalRateConfig::window`]) where the limited party counts bursts
/// strictly. Cells are also lost, never invented: wasted when they age
/// out, or left in a pocket at close.
///
/// **Throughput.** A process leases at most the burst per refresh, and
/// refreshes at most four times per `refresh` when it runs dry: alone it
/// can spend at most `4 × burst` cells per `refresh`. For one process to
/// be able to take the whole rate, choose `refresh ≤ burst × T`.
/// Under overload each refresh takes what the schedule freed since the
/// last one, so the fleet spends the whole rate (99.5 % of `burst + 200 ×
/// 5 s` in the test below).
///
/// **Refusals** are [`GlobalRateError::Limited`] with the time until the
/// next refresh (or until Redis said the next cell conforms, if later):
/// not exact as in per-call mode, since the cells come with a refresh.
/// The waiting forms wait for the pocket's next refill (counted as demand
/// meanwhile), at most 32 times.
///
/// **Redis down**: checks spend what the pocket holds; once a refresh has
/// failed and the pocket is dry, the [`RateFallback`] answers (the pocket
/// ages out within two failed refreshes).
///
/// **Keyed checks stay per call** (one script each) in leased mode. A
/// pocket per client key would need a lease per key per process: with
/// many quiet clients that is more Redis calls than per-call checks, and
/// keys spread over processes would each strand a slice of their small
/// rate in every pocket; the unkeyed limit (a provider's quota) is where
/// one hot key meets every process.
///
/// **Closing.** [`close`](GlobalRateLimiter::close) stops the keeper and
/// gives back the unspent cells of the last lease when nobody has taken
/// cells since (`gcra_return.lua` moves the TAT back only if it is still
/// the one the lease left); other unspent cells are wasted.
///
/// **Metrics**: `redis_calls` (leases and give-backs), `leased_cells`,
/// `spent_cells` (told at each refresh: the hot path counts nothing),
/// `wasted_cells`, `returned_cells`; the refusals as in per-call mode.
///
/// **Measured** (`tests/global_rate_leased.rs`, a real `redis-server`):
/// 4 processes × 4 tasks against 200/s with a burst of 20, refresh
/// 100 ms, for 5 s: 1,015 cells spent, bound 1,021 by Redis's clock, 0.2
/// Redis calls per cell (each refresh leases about 5 cells); 2 processes
/// against 2,000/s with a burst of 200, refresh 100 ms: 0.010 Redis calls
/// per admitted cell by `INFO commandstats`.
///
/// # Cost
///
/// One round trip to Redis per check in per-call mode, none in leased
/// mode (for the unkeyed limit): see the benchmarks (`benches/redis.rs`,
/// `benches/redis_leased.rs`, [the guide](crate::guide::benchmarks)) for
/// what each costs beside the local limiter.
///
/// [`RateLimiter`]: crate::rate::RateLimiter
/// [`KeyedRateLimiter`]: crate::rate::KeyedRateLimiter
/// [`GlobalRateConfigBuilder::leased`]: GlobalRateConfigBuilder::leased
pub struct GlobalRateLimiter<R: Runtime = TokioClock> {
    inner: Arc<Inner<R>>,
    /// Leased mode: the way to the keeper. The keeper holds `inner`, not
    /// this: when the last handle is dropped, its channel closes and the
    /// keeper ends.
    keeper: Option<Arc<mpsc::UnboundedSender<Msg>>>,
}

impl<R: Runtime> Clone for GlobalRateLimiter<R> {
    fn clone(&self) -> Self {
        GlobalRateLimiter {
            inner: Arc::clone(&self.inner),
            keeper: self.keeper.clone(),
        }
    }
}

impl<R: Runtime> core::fmt::Debug for GlobalRateLimiter<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GlobalRateLimiter")
            .field("name", &self.inner.name)
            .field("quota", &self.inner.config.quota)
            .field("interval", &self.inner.config.interval())
            .finish_non_exhaustive()
    }
}

impl GlobalRateLimiter {
    /// A global rate limiter for system `name` on the Redis at `url`
    /// (`redis://host:port/db`, `rediss://…`, `redis+unix:///path`).
    ///
    /// It does not wait for Redis: the connection is made on first use (and
    /// made again by itself after it is lost), so a service starts while
    /// Redis is down, with the [fallback](RateFallback) until Redis
    /// answers. It holds no background task.
    ///
    /// # Errors
    ///
    /// [`GlobalRateBuildError::BadUrl`] for a URL redis-rs cannot open,
    /// [`GlobalRateBuildError::BadName`] for an empty name, one above 128
    /// bytes or one with `{`, `}` or a control character,
    /// [`GlobalRateBuildError::NoRuntime`] outside a tokio runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// // No Redis needs to be there yet.
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
    /// assert_eq!(api.name(), "api");
    /// # });
    /// ```
    pub fn connect(
        url: &str,
        name: &'static str,
        config: GlobalRateConfig,
    ) -> Result<Self, GlobalRateBuildError> {
        Self::connect_on(url, name, config, TokioClock)
    }

    /// A global rate limiter for system `name` on the primary that the
    /// Redis Sentinels at `sentinels` name `master`, followed across
    /// failovers without a restart, as
    /// [`GlobalBulkhead::connect_sentinel`](super::GlobalBulkhead::connect_sentinel)
    /// does: after a command fails on the connection, the next one asks
    /// the Sentinels again. A failover can lose the rate's last spends
    /// (replication is asynchronous): the new primary may admit up to a
    /// burst more than the quota once. Everything else is as
    /// [`connect`](GlobalRateLimiter::connect).
    ///
    /// # Errors
    ///
    /// [`GlobalRateBuildError::BadUrl`] for an empty list or a URL
    /// redis-rs cannot open; the others as
    /// [`connect`](GlobalRateLimiter::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// let sentinels = ["redis://127.0.0.1:26379/", "redis://127.0.0.1:26380/"];
    /// // No Sentinel needs to be there yet.
    /// let api = GlobalRateLimiter::connect_sentinel(&sentinels, "main", "api", config).unwrap();
    /// assert_eq!(api.name(), "api");
    /// # });
    /// ```
    pub fn connect_sentinel(
        sentinels: &[&str],
        master: &str,
        name: &'static str,
        config: GlobalRateConfig,
    ) -> Result<Self, GlobalRateBuildError> {
        Self::connect_sentinel_on(sentinels, master, name, config, TokioClock)
    }

    /// A global rate limiter for system `name` on a Redis Cluster, given
    /// the URLs of some of its nodes (the client learns the others from
    /// them). Every key of the system carries the hash tag `{name}`, so
    /// one system lives in one slot, and the GCRA script runs there; see
    /// [the `redis` module](crate::redis#redis-cluster) for what a
    /// cluster changes (the GCRA script publishes nothing: no
    /// subscription, one connection). Everything else is as
    /// [`connect`](GlobalRateLimiter::connect).
    ///
    /// # Errors
    ///
    /// [`GlobalRateBuildError::BadUrl`] for no URL, one redis-rs cannot
    /// open, a Unix socket, or nodes that disagree on password, protocol
    /// or TLS; the others as [`connect`](GlobalRateLimiter::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// // No cluster needs to be there yet.
    /// let nodes = ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"];
    /// let api = GlobalRateLimiter::connect_cluster(&nodes, "api", config).unwrap();
    /// assert_eq!(api.name(), "api");
    /// # });
    /// ```
    pub fn connect_cluster<U: AsRef<str>>(
        nodes: &[U],
        name: &'static str,
        config: GlobalRateConfig,
    ) -> Result<Self, GlobalRateBuildError> {
        Self::connect_cluster_on(nodes, name, config, TokioClock)
    }
}

impl<R: Runtime> GlobalRateLimiter<R> {
    /// Like [`connect`](GlobalRateLimiter::connect), on `runtime`: its
    /// clock times the store timeouts and the waits, and its executor runs
    /// the waiting forms' checks (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect`](GlobalRateLimiter::connect).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// let api = GlobalRateLimiter::connect_on("redis://127.0.0.1:1/", "api", config, TokioClock).unwrap();
    /// assert_eq!(api.config().quota(), Quota::per_second(200));
    /// # });
    /// ```
    pub fn connect_on(
        url: &str,
        name: &'static str,
        config: GlobalRateConfig,
        runtime: R,
    ) -> Result<Self, GlobalRateBuildError> {
        Self::open(conn::Endpoint::Single(url), name, config, runtime)
    }

    /// Like [`connect_sentinel`](GlobalRateLimiter::connect_sentinel), on
    /// `runtime` (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect_sentinel`](GlobalRateLimiter::connect_sentinel).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// let sentinels = ["redis://127.0.0.1:1/"];
    /// let api = GlobalRateLimiter::connect_sentinel_on(&sentinels, "main", "api", config, TokioClock).unwrap();
    /// assert_eq!(api.config().quota(), Quota::per_second(200));
    /// # });
    /// ```
    pub fn connect_sentinel_on(
        sentinels: &[&str],
        master: &str,
        name: &'static str,
        config: GlobalRateConfig,
        runtime: R,
    ) -> Result<Self, GlobalRateBuildError> {
        Self::open(
            conn::Endpoint::Sentinel { sentinels, master },
            name,
            config,
            runtime,
        )
    }

    /// Like [`connect_cluster`](GlobalRateLimiter::connect_cluster), on
    /// `runtime` (see [`Runtime`]).
    ///
    /// # Errors
    ///
    /// As [`connect_cluster`](GlobalRateLimiter::connect_cluster).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200)).build().unwrap();
    /// let nodes = ["redis://127.0.0.1:7000"];
    /// let api = GlobalRateLimiter::connect_cluster_on(&nodes, "api", config, TokioClock).unwrap();
    /// assert_eq!(api.config().quota(), Quota::per_second(200));
    /// # });
    /// ```
    pub fn connect_cluster_on<U: AsRef<str>>(
        nodes: &[U],
        name: &'static str,
        config: GlobalRateConfig,
        runtime: R,
    ) -> Result<Self, GlobalRateBuildError> {
        let nodes: Vec<String> = nodes.iter().map(|u| String::from(u.as_ref())).collect();
        Self::open(conn::Endpoint::Cluster(&nodes), name, config, runtime)
    }

    fn open(
        endpoint: conn::Endpoint<'_>,
        name: &'static str,
        config: GlobalRateConfig,
        runtime: R,
    ) -> Result<Self, GlobalRateBuildError> {
        if let Err(GlobalBuildError::BadName { name, reason }) = check_name(name) {
            return Err(GlobalRateBuildError::BadName { name, reason });
        }
        if !runtime.can_spawn() {
            return Err(GlobalRateBuildError::NoRuntime);
        }
        let con =
            conn::open(endpoint, config.store_timeout).map_err(GlobalRateBuildError::BadUrl)?;
        let breaker = HeapBreaker::try_new(name, config.store_breaker, runtime.clone())
            .map_err(|e| GlobalRateBuildError::Config(GlobalRateConfigError::StoreBreaker(e)))?;
        let local = match config.fallback {
            RateFallback::FailClosed => None,
            RateFallback::Local(quota) => Some(Local {
                whole: RateLimiter::new(name, quota, runtime.clone()),
                keyed: KeyedRateLimiter::new(name, quota, runtime.clone()),
                hasher: RandomState::new(),
            }),
        };
        let inner = Arc::new(Inner {
            name,
            config,
            clock: runtime.clone(),
            con,
            script: Script::new(include_str!("../scripts/gcra.lua")),
            lease_script: Script::new(include_str!("../scripts/gcra_lease.lua")),
            return_script: Script::new(include_str!("../scripts/gcra_return.lua")),
            breaker,
            pocket: config.leased.map(|_| Arc::new(Pocket::new())),
            closed: crate::sync::AtomicBool::new(false),
            whole: format!("watertight:{{{name}}}:rate"),
            local,
            stats: Stats::default(),
        });
        let keeper = match (config.leased, &inner.pocket) {
            (Some(refresh), Some(pocket)) => {
                let (tx, rx) = mpsc::unbounded_channel();
                runtime.spawn(lease::run(
                    Arc::clone(&inner),
                    Arc::clone(pocket),
                    refresh,
                    rx,
                ));
                Some(Arc::new(tx))
            }
            _ => None,
        };
        Ok(GlobalRateLimiter { inner, keeper })
    }

    /// The system's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// assert_eq!(api.name(), "api");
    /// # });
    /// ```
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// The config it was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// assert_eq!(api.config().quota().cells(), 5);
    /// # });
    /// ```
    pub fn config(&self) -> &GlobalRateConfig {
        &self.inner.config
    }

    /// The breaker in front of Redis.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// assert_eq!(api.store_breaker().state(), watertight::breaker::State::Closed);
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
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// assert_eq!(api.metrics().admitted, 0);
    /// # });
    /// ```
    pub fn metrics(&self) -> GlobalRateMetrics {
        self.inner.stats.snapshot()
    }

    /// The Redis key that holds `key`'s schedule (for `redis-cli`,
    /// dashboards and tests).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// assert_eq!(api.redis_key(&RateKey::whole()), "watertight:{api}:rate");
    /// assert_eq!(api.redis_key(&RateKey::new("a b").unwrap()), "watertight:{api}:rate:a%20b");
    /// # });
    /// ```
    pub fn redis_key(&self, key: &RateKey) -> String {
        self.inner.redis_key(key)
    }

    /// Takes one cell of `key`'s limit if it conforms now, fleet-wide;
    /// never waits for one (it does wait for Redis's answer, at most the
    /// store timeout).
    ///
    /// # Errors
    ///
    /// [`GlobalRateError::Limited`] with the exact `retry_after` if the
    /// cell does not conform (nothing is written then),
    /// [`GlobalRateError::StoreUnavailable`] when Redis cannot be reached
    /// and the fallback is `FailClosed` (with a local fallback: its verdict),
    /// [`GlobalRateError::Closed`] after [`close`](Self::close). In
    /// [leased mode](GlobalRateLimiter#leased-mode), the unkeyed limit's
    /// cell comes from this process's pocket with no Redis call, and a
    /// refusal's `retry_after` is the time until the next refresh.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before Redis answers may leave the cell spent
    /// (if the script ran): a cell can be lost that way, never invented.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::{GlobalRateError, GlobalRateLimiter, RateKey};
    /// # #[allow(dead_code)] async fn run(api: GlobalRateLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// match api.check(&RateKey::new("203.0.113.7")?).await {
    ///     Ok(()) => { /* serve */ }
    ///     Err(GlobalRateError::Limited { retry_after }) => { /* 429 */ let _ = retry_after; }
    ///     Err(e) => { /* Redis unreachable, FailClosed: 503 */ let _ = e; }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check(&self, key: &RateKey) -> Result<(), GlobalRateError> {
        self.check_n(key, 1).await
    }

    /// Takes `n` cells of `key`'s limit at once if they conform now.
    ///
    /// A request for zero cells conforms at once, with no Redis call, and
    /// counts nothing.
    ///
    /// # Errors
    ///
    /// [`GlobalRateError::ExceedsBurst`] at once, with no Redis call, if
    /// `n` is above the quota's burst (it never could conform; likewise
    /// above the local fallback's burst while it answers); otherwise as
    /// [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use watertight::redis::{GlobalRateError, GlobalRateLimiter, RateKey};
    /// # #[allow(dead_code)] async fn run(api: GlobalRateLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// let burst = api.config().quota().burst_size();
    /// let too_many = api.check_n(&RateKey::whole(), burst + 1).await.unwrap_err();
    /// assert!(matches!(too_many, GlobalRateError::ExceedsBurst { .. }));
    /// # Ok(()) }
    /// ```
    pub async fn check_n(&self, key: &RateKey, n: u32) -> Result<(), GlobalRateError> {
        let inner = &*self.inner;
        if let Some(early) = inner.pre_check(n) {
            return early;
        }
        if let (Some(pocket), None) = (&inner.pocket, key.encoded()) {
            // The hot path: one compare-and-swap, no clock, no count.
            if pocket.take(u64::from(n)) {
                return Ok(());
            }
            return self.check_pocket(pocket, n).await;
        }
        inner.answer(inner.attempt(key, n).await, n, false)
    }

    /// Waits for one cell of `key`'s limit for at most `max_wait` from now.
    ///
    /// # Errors
    ///
    /// As [`acquire_n_until`](Self::acquire_n_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_n_until`](Self::acquire_n_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use watertight::redis::{GlobalRateLimiter, RateKey};
    /// # #[allow(dead_code)] async fn run(provider: GlobalRateLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// provider.acquire_timeout(&RateKey::whole(), Duration::from_secs(2)).await?;
    /// // call the provider: within its quota, fleet-wide
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(
        &self,
        key: &RateKey,
        max_wait: Duration,
    ) -> Result<(), GlobalRateError> {
        let deadline = self.inner.clock.now().saturating_add(max_wait);
        self.acquire_n_until(key, 1, deadline).await
    }

    /// Waits for one cell of `key`'s limit until `deadline` (on the
    /// runtime's clock) at the latest.
    ///
    /// # Errors
    ///
    /// As [`acquire_n_until`](Self::acquire_n_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_n_until`](Self::acquire_n_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use watertight::clock::{Clock, TokioClock};
    /// # use watertight::redis::{GlobalRateLimiter, RateKey};
    /// # #[allow(dead_code)] async fn run(provider: GlobalRateLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// let deadline = TokioClock.now() + Duration::from_millis(500); // the request's budget
    /// provider.acquire_until(&RateKey::whole(), deadline).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_until(
        &self,
        key: &RateKey,
        deadline: Instant,
    ) -> Result<(), GlobalRateError> {
        self.acquire_n_until(key, 1, deadline).await
    }

    /// Waits for `n` cells of `key`'s limit until `deadline` at the latest:
    /// checks; if refused, and the cells would conform by the deadline,
    /// sleeps until they do on the runtime's clock and checks again (at
    /// most 32 checks: another process may take the cell first). Each
    /// check runs in a task of its own, so that a deadline that comes while
    /// Redis is being asked stops the wait at once and the breaker still
    /// hears how Redis did. A deadline already past makes it one
    /// [`check_n`](Self::check_n).
    ///
    /// # Errors
    ///
    /// [`GlobalRateError::Limited`], at once, when the cells would conform
    /// only after the deadline (`retry_after` says when);
    /// [`GlobalRateError::TimedOut`] when the deadline came while Redis was
    /// being asked; otherwise as [`check_n`](Self::check_n).
    ///
    /// # Cancel safety
    ///
    /// Nothing is reserved while it sleeps, so dropping it then costs
    /// nothing. A check whose caller is gone runs to its end in its task:
    /// a cell it took is spent (lost, never invented).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use watertight::clock::{Clock, TokioClock};
    /// # use watertight::redis::{GlobalRateLimiter, RateKey};
    /// # #[allow(dead_code)] async fn run(uploads: GlobalRateLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// // 8 cells (say, 8 MiB of a bandwidth quota), within a second.
    /// let deadline = TokioClock.now() + Duration::from_secs(1);
    /// uploads.acquire_n_until(&RateKey::new("tenant-7")?, 8, deadline).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_n_until(
        &self,
        key: &RateKey,
        n: u32,
        deadline: Instant,
    ) -> Result<(), GlobalRateError> {
        let inner = &*self.inner;
        if let Some(early) = inner.pre_check(n) {
            return early;
        }
        if inner.clock.now() >= deadline {
            return self.check_n(key, n).await;
        }
        if let (Some(pocket), None) = (&inner.pocket, key.encoded()) {
            return self.wait_pocket(pocket, n, deadline).await;
        }
        let mut waited = false;
        let mut last = Duration::ZERO;
        for _ in 0..MAX_ROUNDS {
            let asked = self.ask(key.clone(), n);
            let verdict = tokio::select! {
                biased;
                v = asked => v,
                () = inner.clock.sleep_until(deadline) => {
                    return Err(inner.stats.refused(inner.name, GlobalRateError::TimedOut));
                }
            };
            match verdict {
                Ok(Verdict::Admitted { global }) => {
                    inner.stats.admitted(inner.name, n, global, waited);
                    return Ok(());
                }
                Ok(Verdict::NotYet(retry_after)) => {
                    last = retry_after;
                    let ready = inner.clock.now().saturating_add(retry_after);
                    if ready > deadline {
                        break;
                    }
                    inner.clock.sleep_until(ready).await;
                    waited = true;
                }
                Err(e) => return Err(inner.stats.refused(inner.name, e)),
            }
        }
        Err(inner.limited(last))
    }

    /// Runs `make`'s call through `policy` after taking one cell of `key`'s
    /// limit, never waiting for it (as the policy's own rate limit): a
    /// refusal is the policy's [`ErrorKind::RateLimited`] with the exact
    /// `retry_after`, and Redis unreachable with `FailClosed` is
    /// [`ErrorKind::StoreUnavailable`]: the same one
    /// [`is_unavailable`](policy::Error::is_unavailable) error for callers.
    ///
    /// # Errors
    ///
    /// The policy's [`Error`](policy::Error).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check); dropping the future cancels the call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use watertight::clock::TokioClock;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
    ///
    /// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let provider = GlobalRateLimiter::connect(
    ///     "redis://127.0.0.1/",
    ///     "provider",
    ///     GlobalRateConfig::builder(Quota::per_second(200)).build()?,
    /// )?;
    /// let policy: Policy<_> = Policy::new("provider", PolicyConfig::builder(8).build()?, TokioClock)?;
    /// let answer = provider
    ///     .call(&policy, &RateKey::whole(), || async { Ok::<_, std::io::Error>("ok") })
    ///     .await;
    /// if let Err(e) = &answer {
    ///     if let ErrorKind::RateLimited { retry_after } = e.kind() { /* 429 */ let _ = retry_after; }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn call<C, const N: usize, W, B, F, Fut, T, E>(
        &self,
        policy: &Policy<C, N, W, B>,
        key: &RateKey,
        make: F,
    ) -> Result<T, policy::Error<E>>
    where
        C: Timer + Clone,
        B: Clock,
        W: WindowStorage,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.check(key)
            .await
            .map_err(|e| policy::Error::new(policy.name(), policy_kind(e)))?;
        policy.call(make).await
    }

    /// Ends this limiter: every check after it (by any clone) refuses with
    /// [`GlobalRateError::Closed`]. In leased mode it also stops the
    /// keeper and gives back the unspent cells of its last lease if nobody
    /// has taken cells of the limit since (then Redis's schedule is as if
    /// they had never been asked for); other unspent cells are wasted
    /// (`wasted_cells`): a cell is lost that way, never invented. It
    /// returns when that is done (at most one store timeout for the
    /// give-back); the metrics are then exact.
    ///
    /// Without `close`, the keeper ends when the last clone is dropped,
    /// the same way, if its runtime still runs; a keeper dropped with its
    /// runtime gives nothing back (nothing is held in Redis but the
    /// schedule, which expires by itself).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the limiter closed; the keeper finishes
    /// on its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateError, GlobalRateLimiter, RateKey};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(200))
    ///     .leased(Duration::from_millis(100))
    ///     .store_timeout(Duration::from_millis(20))
    ///     .build()
    ///     .unwrap();
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
    /// api.close().await;
    /// assert!(matches!(api.check(&RateKey::whole()).await, Err(GlobalRateError::Closed)));
    /// # });
    /// ```
    pub async fn close(&self) {
        let inner = &*self.inner;
        inner.closed.store(true, crate::sync::Ordering::Release);
        let (Some(tx), Some(pocket)) = (&self.keeper, &inner.pocket) else {
            return;
        };
        let (ack, done) = tokio::sync::oneshot::channel();
        if tx.send(Msg::Close(ack)).is_ok() {
            let _ = done.await;
            return;
        }
        // Another clone closed it already: wait for the keeper to end.
        loop {
            let listener = pocket.changed.listen();
            if pocket.has_ended() {
                return;
            }
            listener.await;
        }
    }

    /// A leased check that found the pocket short: the first lease on its
    /// way, the fallback while Redis is down, or a refusal with the time
    /// until more cells may come.
    async fn check_pocket(&self, pocket: &Pocket, n: u32) -> Result<(), GlobalRateError> {
        let inner = &*self.inner;
        if inner.closed.load(crate::sync::Ordering::Acquire) || pocket.has_ended() {
            return Err(GlobalRateError::Closed);
        }
        if !pocket.has_tried() {
            // Just connected: the keeper's first lease is on its way.
            let until = inner
                .clock
                .now()
                .saturating_add(inner.config.store_timeout * 2);
            pocket.first_attempt(&inner.clock, until).await;
            if pocket.take(u64::from(n)) {
                return Ok(());
            }
        }
        pocket.refused(u64::from(n));
        if let Some(failure) = pocket.failure() {
            return inner.answer(inner.fallback(&RateKey::whole(), n, failure), n, false);
        }
        Err(inner.limited(pocket.hint(inner.clock.now())))
    }

    /// A leased wait: the pocket, or a wait for the keeper's next refill
    /// (counted as demand while it waits), at most 32 times.
    async fn wait_pocket(
        &self,
        pocket: &Pocket,
        n: u32,
        deadline: Instant,
    ) -> Result<(), GlobalRateError> {
        let inner = &*self.inner;
        let cells = u64::from(n);
        let mut waited = false;
        for _ in 0..MAX_ROUNDS {
            let listener = pocket.changed.listen();
            if pocket.take(cells) {
                if waited {
                    inner.stats.admitted_waited();
                }
                return Ok(());
            }
            if inner.closed.load(crate::sync::Ordering::Acquire) || pocket.has_ended() {
                return Err(GlobalRateError::Closed);
            }
            if pocket.has_tried() {
                if let Some(failure) = pocket.failure() {
                    pocket.refused(cells);
                    let verdict = inner.fallback(&RateKey::whole(), n, failure);
                    return inner.answer(verdict, n, waited);
                }
            }
            let now = inner.clock.now();
            if now >= deadline {
                break;
            }
            let _waiting = pocket.wait(cells);
            tokio::select! {
                () = listener => {}
                () = inner.clock.sleep_until(deadline) => {}
            }
            waited = true;
        }
        Err(inner.limited(pocket.hint(inner.clock.now())))
    }

    /// Runs one check in a task of its own (see
    /// [`acquire_n_until`](Self::acquire_n_until)).
    fn ask(
        &self,
        key: RateKey,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, GlobalRateError>> + Send + 'static + use<R> {
        let inner = Arc::clone(&self.inner);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = inner.clock.clone();
        runtime.spawn(async move {
            let _ = tx.send(inner.attempt(&key, n).await);
        });
        async move {
            // The task ends only by sending, unless the runtime is shutting
            // down: then Redis is as good as unreachable.
            rx.await.unwrap_or(Err(GlobalRateError::StoreUnavailable(
                StoreFailure::TimedOut,
            )))
        }
    }
}

impl<R: Runtime> Inner<R> {
    fn redis_key(&self, key: &RateKey) -> String {
        match key.encoded() {
            None => self.whole.clone(),
            Some(enc) => format!("{}:{enc}", self.whole),
        }
    }

    /// What a request for `n` cells gets before anything is asked: zero
    /// cells conform, more than the burst never do.
    fn pre_check(&self, n: u32) -> Option<Result<(), GlobalRateError>> {
        if self.closed.load(crate::sync::Ordering::Acquire) {
            return Some(Err(GlobalRateError::Closed));
        }
        let burst = self.config.quota.burst_size();
        if n > burst {
            return Some(Err(GlobalRateError::ExceedsBurst {
                requested: n,
                burst,
            }));
        }
        (n == 0).then_some(Ok(()))
    }

    /// A check's answer from its `verdict` on `n` cells, counted (and
    /// reported): admitted, limited, or refused for the verdict's error.
    fn answer(
        &self,
        verdict: Result<Verdict, GlobalRateError>,
        n: u32,
        waited: bool,
    ) -> Result<(), GlobalRateError> {
        match verdict {
            Ok(Verdict::Admitted { global }) => {
                self.stats.admitted(self.name, n, global, waited);
                Ok(())
            }
            Ok(Verdict::NotYet(retry_after)) => Err(self.limited(retry_after)),
            Err(e) => Err(self.stats.refused(self.name, e)),
        }
    }

    /// A refusal of cells that conform in `retry_after`, counted.
    fn limited(&self, retry_after: Duration) -> GlobalRateError {
        self.stats
            .refused(self.name, GlobalRateError::Limited { retry_after })
    }

    /// One check: Redis's verdict, or the fallback's when Redis cannot be
    /// reached.
    async fn attempt(&self, key: &RateKey, n: u32) -> Result<Verdict, GlobalRateError> {
        match self.ask_redis(key, n).await {
            Ok(v) => Ok(v),
            Err(failure) => self.fallback(key, n, failure),
        }
    }

    /// The script, through the breaker, under the store timeout.
    async fn ask_redis(&self, key: &RateKey, n: u32) -> Result<Verdict, StoreFailure> {
        // Both fit: n ≤ burst, and burst × T ≤ 2^50 (checked by the config).
        let inc = u64::from(n) * self.config.interval_us;
        let args = |s: &mut ScriptInvocation<'_>| {
            s.key(self.redis_key(key))
                .arg(inc)
                .arg(self.config.window_us());
        };
        self.run_script(&self.script, args, |reply: (i64, i64)| match reply {
            (1, _) => Ok(Verdict::Admitted { global: true }),
            (0, us) if us > 0 => Ok(Verdict::NotYet(Duration::from_micros(us.unsigned_abs()))),
            _ => Err(StoreFailure::BadReply),
        })
        .await
    }

    /// Leases up to `want` cells of the unkeyed limit (one script),
    /// through the breaker, under the store timeout.
    async fn lease(&self, want: u64) -> Result<Leased, StoreFailure> {
        let args = |s: &mut ScriptInvocation<'_>| {
            s.key(&self.whole)
                .arg(self.config.interval_us)
                .arg(self.config.window_us())
                .arg(want);
        };
        self.run_script(
            &self.lease_script,
            args,
            |reply: (i64, i64, i64)| match reply {
                (grant, retry, tat) if (0..=want as i64).contains(&grant) && retry >= 0 => {
                    Ok(Leased {
                        grant: grant.unsigned_abs(),
                        retry: Duration::from_micros(retry.unsigned_abs()),
                        tat,
                    })
                }
                _ => Err(StoreFailure::BadReply),
            },
        )
        .await
    }

    /// Gives back `cells` of the last lease, which left the TAT at `tat`,
    /// if nobody took cells since (see `gcra_return.lua`).
    async fn give_back(&self, tat: i64, cells: u64) -> bool {
        let args = |s: &mut ScriptInvocation<'_>| {
            s.key(&self.whole)
                .arg(tat)
                .arg(cells.saturating_mul(self.config.interval_us));
        };
        self.run_script(&self.return_script, args, |r: i64| Ok(r == 1))
            .await
            .unwrap_or(false)
    }

    /// Runs `script` with the keys and arguments `args` gives it (once the
    /// breaker lets the call through) under the store timeout, and reads
    /// its reply with `read`. Each call is counted; the breaker is told its
    /// outcome, and a failure (Redis's error, the timeout, or a reply
    /// `read` refuses) is counted as one.
    async fn run_script<T, U>(
        &self,
        script: &Script,
        args: impl FnOnce(&mut ScriptInvocation<'_>),
        read: impl FnOnce(T) -> Result<U, StoreFailure>,
    ) -> Result<U, StoreFailure>
    where
        T: FromRedisValue,
    {
        let probe = self
            .breaker
            .try_acquire()
            .map_err(StoreFailure::BreakerOpen)?;
        self.stats.redis_call(self.name);
        let mut invocation = script.prepare_invoke();
        args(&mut invocation);
        let mut con = self.con.clone();
        let reply = conn::timed(
            &self.clock,
            self.config.store_timeout,
            invocation.invoke_async::<T>(&mut con),
        )
        .await;
        let out = reply.and_then(read);
        match &out {
            Ok(_) => probe.success(),
            Err(e) => {
                self.stats.store_failed(self.name, e);
                if conn::slot_moving(e) {
                    probe.ignore();
                } else {
                    probe.failure();
                }
            }
        }
        out
    }

    fn fallback(
        &self,
        key: &RateKey,
        n: u32,
        failure: StoreFailure,
    ) -> Result<Verdict, GlobalRateError> {
        let Some(local) = &self.local else {
            return Err(GlobalRateError::StoreUnavailable(failure));
        };
        let checked = match key.encoded() {
            None => local.whole.check_n(n).map_err(KeyedError::Rate),
            Some(enc) => local.keyed.check_key_n(&local.hasher.hash_one(enc), n),
        };
        match checked {
            Ok(()) => Ok(Verdict::Admitted { global: false }),
            Err(KeyedError::Rate(RateError::ExceedsBurst { requested, burst })) => {
                Err(GlobalRateError::ExceedsBurst { requested, burst })
            }
            Err(e) => Ok(Verdict::NotYet(e.retry_after().unwrap_or(Duration::MAX))),
        }
    }
}

fn policy_kind<E>(e: GlobalRateError) -> ErrorKind<E> {
    match e {
        GlobalRateError::StoreUnavailable(_) => ErrorKind::StoreUnavailable,
        GlobalRateError::TimedOut => ErrorKind::DeadlineExceeded,
        // One cell never exceeds a burst (at least 1).
        GlobalRateError::Limited { retry_after } => ErrorKind::RateLimited { retry_after },
        GlobalRateError::ExceedsBurst { .. } => ErrorKind::RateLimited {
            retry_after: Duration::MAX,
        },
        GlobalRateError::Closed => ErrorKind::StoreUnavailable,
    }
}
