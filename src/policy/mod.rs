//! One policy per external system: bulkhead, breaker and deadline in one call.
//!
//! Three layers go around every outbound call, in this order (the order
//! resilience4j recommends for its decorators, and the Azure bulkhead
//! pattern's "isolate, then fail fast"):
//! the **bulkhead** outside (how many calls to this system at once; wait for
//! a slot only briefly), the **circuit breaker** inside it (do not call a
//! system that is clearly failing), the **deadline** innermost (how long this
//! one call may take, and no longer than the caller's request budget). A
//! policy may carry a **rate limit** too ([`PolicyConfigBuilder::rate`]):
//! checked before the bulkhead, so a refused cell costs no slot, and once
//! per attempt, since each retry is a request to the system. Each
//! external system gets its own set, named after it, so one slow system
//! cannot drain the others, and every refusal comes back as one
//! "system unavailable" [`Error`] that the caller maps to a 503 with
//! `Retry-After`, a cached answer or a fallback.
//!
//! # Why "policy"
//!
//! It is the name users of Polly and resilience4j look for; one [`Policy`]
//! per system (`"payments"`, `"inventory"`), never one shared by all.

use core::cell::Cell;
use core::fmt;
use core::future::Future;
use core::time::Duration;

#[cfg(feature = "alloc")]
use crate::breaker::{BreakerConfig, Heap};
use crate::breaker::{CircuitBreaker, ErrIsFailure, Inline, Outcome, WindowStorage};
use crate::bulkhead::Bulkhead;
use crate::clock::{Clock, Instant, Timer};
use crate::deadline::Deadline;
use crate::limit::{AdaptiveLimit, LimitAlgorithm, Signal};
use crate::rate::RateLimiter;
use crate::retry::{Jitter, RetryBudget, RetryConfig};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};
use crate::throttle::AdaptiveThrottle;

mod call;
#[cfg(feature = "chaos")]
mod chaos;
mod config;
mod error;
mod hedge;
mod retry;

// For the tower services, which start and judge calls their own way.
#[cfg(feature = "tower")]
pub(crate) use call::{Dispatch, Redispatch};
pub use call::{Make, PolicyCall};
#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub use chaos::Injected;
pub use config::{
    PolicyConfig, PolicyConfigBuilder, PolicyConfigError, PolicyField, LONGEST_USUAL_MAX_WAIT,
};
pub use error::{Error, ErrorKind};
#[cfg(feature = "tower")]
pub(crate) use hedge::Relend;
pub use hedge::{HedgedCall, Hedging, MakeEach};
pub use retry::{MakeMut, NoHint, RetryCall, RetryHint, RetryMetrics, Retrying};

/// Bulkhead, breaker and deadline for one external system, in this order:
/// bulkhead outside, breaker inside, deadline innermost.
///
/// [`call`](Self::call) runs a call through the three:
///
/// 0. if the config set a throttle ([`PolicyConfigBuilder::throttle`]),
///    ask it: refused locally, [`ErrorKind::Throttled`]; nothing else is
///    asked or taken. Admitted, the attempt's outcome is reported to it
///    when the call ends (a success is an accept; a failure or the call
///    timeout is not; any other end takes the request back).
/// 0. if the config set a rate ([`PolicyConfigBuilder::rate`]), take one
///    cell of it, never waiting. None conforms now:
///    [`ErrorKind::RateLimited`] with the limiter's exact `retry_after`; no
///    slot is taken and the breaker is not asked. Without a rate this step
///    is one branch.
/// 1. wait for a bulkhead slot for at most `max_wait` — or what is left of
///    the request budget, if less. No slot: [`ErrorKind::BulkheadFull`]; the
///    breaker is not asked and records nothing.
/// 2. ask the breaker. Refused: [`ErrorKind::CircuitOpen`] with its
///    `retry_after`; the slot is given back at once.
/// 3. run the call for at most `call_timeout` — or what is left of the
///    budget, if less. Its result is classified and recorded by the breaker.
///    Running out of `call_timeout` is a failure for the breaker; running out
///    of the caller's budget first is recorded as nothing (the system did
///    not exceed its own timeout: the caller ran out of time), and a budget
///    already spent when the slot is granted does not start the call.
///
/// A call with nothing to wait for costs no clock read and no timer: the
/// slot is tried before any wait is computed, and the call is polled once
/// before its timeout is armed, so the timeout counts from the end of that
/// first poll (a first poll cannot be cut short by any timer anyway). With a
/// budget, one clock read checks that it is not spent.
///
/// Both layers are released when the call ends, however it ends: dropping
/// the future at any await point gives the slot back and frees a half-open
/// probe slot.
///
/// The clock `C` is a [`Timer`]: the slot wait and the timeouts wait on it.
/// The breaker times on `C` too, unless the policy is made with
/// [`with_breaker_clock`](Policy::with_breaker_clock), which gives it a
/// clock of its own, `B`: any [`Clock`], such as a
/// [`CoarseClock`](crate::clock::CoarseClock) for slow-call thresholds of
/// seconds (one relaxed load per read; it cannot wait, so it cannot be `C`).
///
/// `N` is the breaker's window capacity (64 by default), fixed at compile
/// time with the window kept inline (`W` = [`Inline<N>`]): no heap. A
/// server that reads the window from config at run time uses a
/// [`HeapPolicy`] (`W` = [`Heap`]), which takes any
/// window up to [`BreakerConfig::MAX_WINDOW_SIZE`].
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
/// use watertight::policy::{Policy, PolicyConfig};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let config = PolicyConfig::for_pool(10).call_timeout(Duration::from_secs(2)).build().unwrap();
/// let inventory: Policy<_> = Policy::new("inventory", config, &clock).unwrap();
///
/// // The request has 1.5 s in all; the call gets no more than that.
/// let request = Deadline::after(&clock, core::time::Duration::from_millis(1500));
/// let stock = inventory.call_within(&request, || async { Ok::<u32, ()>(12) }).await;
/// assert_eq!(stock, Ok(12));
/// # });
/// ```
pub struct Policy<C, const N: usize = 64, W = Inline<N>, B = C> {
    // Checked once per attempt, first; `None`: one branch.
    throttle: Option<AdaptiveThrottle<C>>,
    // Checked once per attempt, before the bulkhead; `None`: one branch.
    rate: Option<RateLimiter<C>>,
    bulkhead: Bulkhead<C>,
    breaker: CircuitBreaker<B, N, (), W>,
    clock: C,
    max_wait: Duration,
    call_timeout: Duration,
    retry: Retries,
}

/// What a policy keeps for its retries: their config, the system's budget,
/// the jitter's sequence and the counts.
#[derive(Debug)]
pub(crate) struct Retries {
    config: RetryConfig,
    budget: RetryBudget,
    jitter: Jitter,
    after_failure: AtomicUsize,
    after_timeout: AtomicUsize,
    budget_exhausted: AtomicUsize,
}

impl Retries {
    fn new(name: &'static str, config: RetryConfig) -> Self {
        Retries {
            budget: RetryBudget::new(&config),
            jitter: Jitter::new(config.seed().unwrap_or_else(|| default_seed(name))),
            config,
            after_failure: AtomicUsize::new(0),
            after_timeout: AtomicUsize::new(0),
            budget_exhausted: AtomicUsize::new(0),
        }
    }
}

/// Mixed into the policy's seed for its throttle's draws.
const THROTTLE_SEED: u64 = 0x7468_726f_7474_6c65; // "throttle"

/// The jitter's seed when the config sets none: with `std`, random per
/// policy (std's random hash keys, fresh per process and per call), so that
/// replicas do not retry in step; without it, the name's FNV-1a hash.
pub(crate) fn default_seed(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    #[cfg(feature = "std")]
    {
        // Random keys per process, and a fresh pair per `RandomState`.
        use core::hash::{BuildHasher, Hasher};
        let mut r = std::collections::hash_map::RandomState::new().build_hasher();
        r.write_u64(h);
        h = r.finish();
    }
    h
}

/// A [`Policy`] whose breaker window is sized from config at run time
/// (feature `alloc`): a [`HeapBreaker`](crate::breaker::HeapBreaker)
/// inside, so any `window_size` a config holds (up to
/// [`BreakerConfig::MAX_WINDOW_SIZE`], 1023) is taken, where a `Policy<C>`
/// holds at most 64. For servers whose operators set the window in the
/// environment (`cb_window_size = 100`).
///
/// The window's slots are allocated once, by [`Policy::new`]; no call
/// allocates. Everything else is `Policy`'s: the same calls, layers and
/// exporters.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{HeapPolicy, PolicyConfig};
/// use watertight::BreakerConfig;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let window = BreakerConfig::builder().window_size(100).build().unwrap();
/// let config = PolicyConfig::builder(8).breaker(window).build().unwrap();
/// let search: HeapPolicy<_> = HeapPolicy::new("search", config, &clock).unwrap();
/// assert_eq!(search.call(|| async { Ok::<_, ()>("hits") }).await, Ok("hits"));
/// assert_eq!(search.breaker().config().window_size(), 100);
/// # });
/// ```
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub type HeapPolicy<C, B = C> = Policy<C, { BreakerConfig::MAX_WINDOW_SIZE }, Heap, B>;

impl<C: Clone, const N: usize, W: WindowStorage> Policy<C, N, W> {
    /// The policy for system `name`. A [`HeapPolicy`] allocates its
    /// breaker's window here, once, sized by the config.
    ///
    /// # Errors
    ///
    /// [`PolicyConfigError::Breaker`] if the breaker's window does not fit
    /// in `N` (never for a [`HeapPolicy`], whose window is sized from the
    /// config).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::BreakerConfig;
    ///
    /// let clock = ManualClock::new();
    /// let small = BreakerConfig::builder().window_size(16).build().unwrap();
    /// let config = PolicyConfig::builder(4).breaker(small).build().unwrap();
    /// let p: Policy<_, 16> = Policy::new("x", config, &clock).unwrap();
    /// assert_eq!(p.name(), "x");
    ///
    /// // The default window of 50 does not fit in 16.
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let err = Policy::<_, 16>::new("x", config, &clock).unwrap_err();
    /// assert_eq!(err.field(), "window_size");
    ///
    /// // Sized at run time: any window a config holds.
    /// # #[cfg(feature = "alloc")] {
    /// let large = BreakerConfig::builder().window_size(500).build().unwrap();
    /// let config = PolicyConfig::builder(4).breaker(large).build().unwrap();
    /// let p = watertight::policy::HeapPolicy::new("x", config, &clock).unwrap();
    /// assert_eq!(p.breaker().config().window_size(), 500);
    /// # }
    /// ```
    pub fn new(
        name: &'static str,
        config: PolicyConfig,
        clock: C,
    ) -> Result<Self, PolicyConfigError> {
        Policy::with_breaker_clock(name, config, clock.clone(), clock)
    }
}

impl<C: Clone, const N: usize, W: WindowStorage, B> Policy<C, N, W, B> {
    /// Like [`new`](Policy::new), with the breaker on a clock of its own:
    /// the bulkhead's slot wait and the deadlines wait on `clock`, a
    /// [`Timer`]; the breaker only reads `breaker_clock` (its open wait and
    /// its calls' durations), which can be any [`Clock`].
    ///
    /// The case it is for: slow-call detection with a threshold of seconds
    /// on a [`CoarseClock`](crate::clock::CoarseClock) (one relaxed load per
    /// read, but not a `Timer`: it cannot wake a task), beside the runtime's
    /// timer for the waits. The two clocks' instants are never compared:
    /// the breaker keeps its own times on its own clock, and a request
    /// budget ([`call_within`](Policy::call_within)) is on `clock`.
    ///
    /// # Errors
    ///
    /// As [`new`](Policy::new).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::time::Duration;
    /// use watertight::breaker::Inline;
    /// use watertight::clock::{CoarseClock, ManualClock};
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::BreakerConfig;
    ///
    /// # futures_lite::future::block_on(async {
    /// let timer = ManualClock::new(); // in a server: `TokioClock`, `AsyncIoClock`
    /// let breaker = BreakerConfig::builder()
    ///     .slow_call_duration(Duration::from_secs(2)) // read_timeout / 2
    ///     .build()
    ///     .unwrap();
    /// let config = PolicyConfig::builder(8).breaker(breaker).build().unwrap();
    /// let db: Policy<_, 64, Inline<64>, CoarseClock> =
    ///     Policy::with_breaker_clock("db", config, &timer, CoarseClock::new()).unwrap();
    /// assert_eq!(db.call(|| async { Ok::<_, ()>(7) }).await, Ok(7));
    /// let m = db.breaker().metrics();
    /// assert_eq!((m.calls, m.slow_calls), (1, 0));
    /// # });
    /// # }
    /// ```
    pub fn with_breaker_clock(
        name: &'static str,
        config: PolicyConfig,
        clock: C,
        breaker_clock: B,
    ) -> Result<Self, PolicyConfigError> {
        let breaker = CircuitBreaker::try_new(name, config.breaker, breaker_clock)
            .map_err(PolicyConfigError::Breaker)?;
        let mut bulkhead =
            Bulkhead::try_new(name, config.max_concurrent, clock.clone()).map_err(|_| {
                PolicyConfigError::MaxConcurrentTooLarge {
                    max: Bulkhead::<()>::MAX_PERMITS,
                }
            })?;
        if let Some(n) = config.max_waiters {
            // Checked by the config's `build`.
            bulkhead = bulkhead.try_with_max_waiters(n).map_err(|_| {
                PolicyConfigError::MaxWaitersTooLarge {
                    max: Bulkhead::<()>::MAX_WAITERS,
                }
            })?;
        }
        let rate = config
            .rate
            .map(|quota| RateLimiter::new(name, quota, clock.clone()));
        let throttle = config.throttle.map(|t| {
            // Its own sequence, not the retries' (the same seed would
            // draw the same numbers for both).
            let seed = config.retry.seed().unwrap_or_else(|| default_seed(name));
            AdaptiveThrottle::with_seed(name, t, clock.clone(), seed ^ THROTTLE_SEED)
        });
        Ok(Policy {
            throttle,
            rate,
            bulkhead,
            breaker,
            clock,
            max_wait: config.max_wait,
            call_timeout: config.call_timeout,
            retry: Retries::new(name, config.retry),
        })
    }
}

impl<C, const N: usize, W, B> Policy<C, N, W, B> {
    /// The system's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.name(), "payments");
    /// ```
    pub fn name(&self) -> &'static str {
        self.bulkhead.name()
    }

    /// The bulkhead, for its metrics or to resize or close it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.bulkhead().capacity(), 4);
    /// ```
    pub fn bulkhead(&self) -> &Bulkhead<C> {
        &self.bulkhead
    }

    /// The breaker, for its state and metrics, or an operator's switch.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.breaker().state(), watertight::breaker::State::Closed);
    /// ```
    pub fn breaker(&self) -> &CircuitBreaker<B, N, (), W> {
        &self.breaker
    }

    /// The rate limiter, if the config set a rate
    /// ([`PolicyConfigBuilder::rate`]), for its metrics: named after the
    /// system, on the policy's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::rate::Quota;
    ///
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).rate(Quota::per_second(10)).build().unwrap();
    /// let p: Policy<_> = Policy::new("payments", config, &clock).unwrap();
    /// let rate = p.rate_limiter().unwrap();
    /// assert_eq!((rate.name(), rate.quota().cells()), ("payments", 10));
    ///
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let p: Policy<_> = Policy::new("payments", config, &clock).unwrap();
    /// assert!(p.rate_limiter().is_none());
    /// ```
    pub fn rate_limiter(&self) -> Option<&RateLimiter<C>> {
        self.rate.as_ref()
    }

    /// The client-side adaptive throttle, if the config set one
    /// ([`PolicyConfigBuilder::throttle`]), for its metrics: named after
    /// the system, on the policy's clock, its draws seeded from the
    /// retries' seed ([`RetryConfigBuilder::seed`](crate::retry::RetryConfigBuilder::seed)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::throttle::ThrottleConfig;
    ///
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).throttle(ThrottleConfig::DEFAULT).build().unwrap();
    /// let p: Policy<_> = Policy::new("payments", config, &clock).unwrap();
    /// assert_eq!(p.throttle().unwrap().name(), "payments");
    /// ```
    pub fn throttle(&self) -> Option<&AdaptiveThrottle<C>> {
        self.throttle.as_ref()
    }
    /// How long a call may wait for a slot (the config's `max_wait`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.max_wait(), core::time::Duration::from_millis(100));
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// How long a call may run (the config's `call_timeout`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.call_timeout(), core::time::Duration::from_secs(30));
    /// ```
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
}

// The clock's bound is on each method rather than on this block, so that a
// clock that cannot wait (`StdClock`) gets `Timer`'s own message ("cannot
// wait", naming the clocks that can) instead of "method exists but its trait
// bounds were not satisfied".
impl<C, const N: usize, W: WindowStorage, B> Policy<C, N, W, B> {
    /// Runs the call `make()` through the three layers (see the type docs):
    /// an `Err` is a failure for the breaker, an `Ok` a success.
    ///
    /// # Errors
    ///
    /// An [`Error`] saying which layer refused, that time ran out, or
    /// carrying the call's own error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point gives the bulkhead slot back, frees
    /// a half-open probe slot, drops the call and records nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// # futures_lite::future::block_on(async {
    /// assert_eq!(p.call(|| async { Ok::<_, ()>("paid") }).await, Ok("paid"));
    /// let err = p.call(|| async { Err::<(), _>("declined") }).await.unwrap_err();
    /// assert!(!err.is_unavailable());
    /// assert_eq!(err.into_inner(), Some("declined"));
    /// # });
    /// ```
    pub fn call<F, Fut, T, E>(&self, make: F) -> PolicyCall<&Self, Make<F>, ErrIsFailure>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        PolicyCall::new(self, None, Make(Some(make)), ErrIsFailure)
    }

    /// Like [`call`](Self::call), with a classifier that says which results
    /// are failures (an HTTP 404 is an answer, a 503 a failure).
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    ///
    /// # Cancel safety
    ///
    /// As [`call`](Self::call).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let status = p
    ///     .call_with(|| async { Ok::<u16, ()>(503) }, |r| match r {
    ///         Ok(s) if *s < 500 => Outcome::Success,
    ///         _ => Outcome::Failure,
    ///     })
    ///     .await;
    /// assert_eq!(status, Ok(503));
    /// assert_eq!(p.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn call_with<F, Fut, T, E, K>(&self, make: F, classify: K) -> PolicyCall<&Self, Make<F>, K>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        K: Fn(&Result<T, E>) -> Outcome,
    {
        PolicyCall::new(self, None, Make(Some(make)), classify)
    }

    /// Like [`call`](Self::call), inside the caller's request budget: the
    /// slot wait and the call timeout are each the smaller of their own
    /// setting and what remains of `budget`. The budget is on the policy's
    /// own clock type, so an instant of another clock cannot be misread.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    ///
    /// # Cancel safety
    ///
    /// As [`call`](Self::call).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// use watertight::deadline::Deadline;
    /// # futures_lite::future::block_on(async {
    /// let request = Deadline::after(&clock, core::time::Duration::from_millis(1500));
    /// assert_eq!(p.call_within(&request, || async { Ok::<_, ()>(1) }).await, Ok(1));
    /// # });
    /// ```
    pub fn call_within<F, Fut, T, E>(
        &self,
        budget: &Deadline<C>,
        make: F,
    ) -> PolicyCall<&Self, Make<F>, ErrIsFailure>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        PolicyCall::new(self, Some(budget.instant()), Make(Some(make)), ErrIsFailure)
    }

    /// [`call_within`](Self::call_within) with a classifier.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    ///
    /// # Cancel safety
    ///
    /// As [`call`](Self::call).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// use watertight::{deadline::Deadline, Outcome};
    /// # futures_lite::future::block_on(async {
    /// let request = Deadline::after(&clock, core::time::Duration::from_millis(1500));
    /// let r = p.call_within_with(&request, || async { Ok::<u16, ()>(404) }, |_| Outcome::Success).await;
    /// assert_eq!(r, Ok(404));
    /// # });
    /// ```
    pub fn call_within_with<F, Fut, T, E, K>(
        &self,
        budget: &Deadline<C>,
        make: F,
        classify: K,
    ) -> PolicyCall<&Self, Make<F>, K>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        K: Fn(&Result<T, E>) -> Outcome,
    {
        PolicyCall::new(self, Some(budget.instant()), Make(Some(make)), classify)
    }

    /// Like [`call_with`](Self::call_with), with the policy's bulkhead
    /// steered by an adaptive `limit`: the call's round trip and what
    /// `signal` makes of its result go to the limit, which resizes the
    /// bulkhead window by window.
    ///
    /// `signal` says what the result means for the limit, and through it
    /// for the breaker: a [`Signal::Success`] is a success, the rest
    /// ([`Failure`](Signal::Failure), a [`Dropped`](Signal::Dropped) 503, a
    /// [`Timeout`](Signal::Timeout)) are failures. The round trip runs
    /// from the call's start (its slot taken and the breaker passed) to
    /// its end. A call the policy cut at its timeout is a
    /// [`Signal::Timeout`] whatever `signal` would say. A call that never
    /// started — refused by the bulkhead or the breaker, or with no
    /// budget left — records nothing: a refusal is not a fast call. Pass
    /// the same `limit` for every call of this policy.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    ///
    /// # Cancel safety
    ///
    /// As [`call`](Self::call): dropping the future records nothing with
    /// the limit either.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveLimit, Aimd, Signal};
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(10).build().unwrap();
    /// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
    /// # futures_lite::future::block_on(async {
    /// // A 503 is the system shedding load: the limit backs off by 10 %.
    /// let r = search
    ///     .call_adaptive(&limit, || async { Ok::<u16, ()>(503) }, |r| match r {
    ///         Ok(503) => Signal::Dropped,
    ///         Ok(_) => Signal::Success,
    ///         Err(()) => Signal::Failure,
    ///     })
    ///     .await;
    /// assert_eq!(r, Ok(503));
    /// assert_eq!(search.bulkhead().capacity(), 9);
    /// assert_eq!(search.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub async fn call_adaptive<A, F, Fut, T, E, K>(
        &self,
        limit: &AdaptiveLimit<A>,
        make: F,
        signal: K,
    ) -> Result<T, Error<E>>
    where
        C: Timer + Clone,
        B: Clock,
        A: LimitAlgorithm,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        K: FnOnce(&Result<T, E>) -> Signal,
    {
        // Filled in by the call's own steps, in the order they run: its
        // start (only if the bulkhead and the breaker let it start) and
        // the classifier's verdict (only if it finished in time).
        // A classifier is a `Classify` (an `Fn`), called once per call: the
        // `FnOnce` signal rides in a cell the classifier owns, and its
        // verdict comes back through an atomic (the future stays `Send`).
        let mut started: Option<Instant> = None;
        let said = AtomicU8::new(NO_SIGNAL);
        let said = &said;
        let signal = Cell::new(Some(signal));
        let bulkhead = &self.bulkhead;
        let result = self
            .call_with(
                || {
                    started = Some(bulkhead.clock().now());
                    make()
                },
                move |r| {
                    let s = signal.take().map_or(Signal::Failure, |signal| signal(r));
                    said.store(s as u8, Ordering::Relaxed);
                    match s {
                        Signal::Success => Outcome::Success,
                        _ => Outcome::Failure,
                    }
                },
            )
            .await;
        let verdict = match &result {
            Err(e) if matches!(e.kind(), ErrorKind::DeadlineExceeded) => Some(Signal::Timeout),
            _ => signal_from(said.load(Ordering::Relaxed)),
        };
        if let (Some(started), Some(verdict)) = (started, verdict) {
            // The call's slot is back by now, as `record` expects.
            limit.record(bulkhead, started, verdict);
        }
        result
    }
}

/// No verdict yet, in [`Policy::call_adaptive`]'s atomic (a [`Signal`] is
/// stored as its discriminant).
const NO_SIGNAL: u8 = u8::MAX;

/// The [`Signal`] stored as `s as u8`, or `None` for [`NO_SIGNAL`].
fn signal_from(code: u8) -> Option<Signal> {
    [
        Signal::Success,
        Signal::Failure,
        Signal::Dropped,
        Signal::Timeout,
    ]
    .into_iter()
    .find(|s| *s as u8 == code)
}

impl<C, const N: usize, W: WindowStorage, B> fmt::Debug for Policy<C, N, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name())
            .field("throttle", &self.throttle)
            .field("rate", &self.rate)
            .field("bulkhead", &self.bulkhead)
            .field("breaker", &self.breaker)
            .field("max_wait", &self.max_wait)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}
