//! [`GlobalRateLimiter`]: one rate for the whole fleet, kept in Redis. Its
//! docs (on the type: this module is private) say what it guarantees.

use std::{format, string::String};

use core::future::Future;
use core::hash::BuildHasher;
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use ::redis::aio::ConnectionManager;
use ::redis::Script;

use super::conn;
use super::runtime::Runtime;
use super::store::check_name;
use super::{GlobalBuildError, StoreFailure};
use crate::breaker::{HeapBreaker, WindowStorage};
use crate::clock::{Clock, Instant, Timer, TokioClock};
use crate::policy::{self, ErrorKind, Policy};
use crate::rate::{KeyedError, KeyedRateLimiter, RateError, RateLimiter};

mod config;
mod error;
mod telemetry;

pub use config::{GlobalRateConfig, GlobalRateConfigBuilder, GlobalRateConfigError, RateFallback};
pub use error::{GlobalRateBuildError, GlobalRateError, RateKey, RateKeyError};
pub use telemetry::GlobalRateMetrics;

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
    con: ConnectionManager,
    script: Script,
    breaker: HeapBreaker<R>,
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
/// # Cost
///
/// One round trip to Redis per check (per-call mode): see the benchmarks
/// (`benches/redis.rs`, [the guide](crate::guide::benchmarks)) for what it
/// costs beside the local limiter.
///
/// [`RateLimiter`]: crate::rate::RateLimiter
/// [`KeyedRateLimiter`]: crate::rate::KeyedRateLimiter
pub struct GlobalRateLimiter<R: Runtime = TokioClock> {
    inner: Arc<Inner<R>>,
}

impl<R: Runtime> Clone for GlobalRateLimiter<R> {
    fn clone(&self) -> Self {
        GlobalRateLimiter {
            inner: Arc::clone(&self.inner),
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
        if let Err(GlobalBuildError::BadName { name, reason }) = check_name(name) {
            return Err(GlobalRateBuildError::BadName { name, reason });
        }
        if !runtime.can_spawn() {
            return Err(GlobalRateBuildError::NoRuntime);
        }
        let con =
            conn::open_lazy(url, config.store_timeout).map_err(GlobalRateBuildError::BadUrl)?;
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
        Ok(GlobalRateLimiter {
            inner: Arc::new(Inner {
                name,
                config,
                clock: runtime,
                con,
                script: Script::new(include_str!("../scripts/gcra.lua")),
                breaker,
                whole: format!("watertight:{{{name}}}:rate"),
                local,
                stats: Stats::default(),
            }),
        })
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
    /// and the fallback is `FailClosed` (with a local fallback: its verdict).
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
        match inner.attempt(key, n).await {
            Ok(Verdict::Admitted { global }) => {
                inner.stats.admitted(inner.name, n, global, false);
                Ok(())
            }
            Ok(Verdict::NotYet(retry_after)) => Err(inner
                .stats
                .refused(inner.name, GlobalRateError::Limited { retry_after })),
            Err(e) => Err(inner.stats.refused(inner.name, e)),
        }
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
        Err(inner
            .stats
            .refused(inner.name, GlobalRateError::Limited { retry_after: last }))
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

    /// Runs one check in a task of its own (see
    /// [`acquire_n_until`](Self::acquire_n_until)).
    fn ask(
        &self,
        key: RateKey,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, GlobalRateError>> + Send + 'static {
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
        let burst = self.config.quota.burst_size();
        if n > burst {
            return Some(Err(GlobalRateError::ExceedsBurst {
                requested: n,
                burst,
            }));
        }
        (n == 0).then_some(Ok(()))
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
        let probe = self
            .breaker
            .try_acquire()
            .map_err(StoreFailure::BreakerOpen)?;
        self.stats.redis_call(self.name);
        // Both fit: n ≤ burst, and burst × T ≤ 2^50 (checked by the config).
        let inc = u64::from(n) * self.config.interval_us;
        let mut con = self.con.clone();
        let reply = conn::timed(
            &self.clock,
            self.config.store_timeout,
            self.script
                .key(self.redis_key(key))
                .arg(inc)
                .arg(self.config.window_us())
                .invoke_async::<(i64, i64)>(&mut con),
        )
        .await;
        let verdict = match reply {
            Ok((1, _)) => Ok(Verdict::Admitted { global: true }),
            Ok((0, us)) if us > 0 => Ok(Verdict::NotYet(Duration::from_micros(us.unsigned_abs()))),
            Ok(_) => Err(StoreFailure::BadReply),
            Err(e) => Err(e),
        };
        match &verdict {
            Ok(_) => probe.success(),
            Err(e) => {
                self.stats.store_failed(self.name, e);
                probe.failure();
            }
        }
        verdict
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
    }
}
