//! A policy's configuration: its builder, its typed errors, its fields.

use core::fmt;
use core::time::Duration;

use crate::breaker::{BreakerConfig, BreakerConfigError, BreakerField};
use crate::bulkhead::Bulkhead;
use crate::rate::Quota;
use crate::retry::{RetryConfig, RetryConfigBuilder, RetryConfigError};
use crate::throttle::{ThrottleConfig, ThrottleConfigError};

/// The longest slot wait accepted without [`PolicyConfigBuilder::allow_long_max_wait`]:
/// a bulkhead is a fail-fast limit, not a queue (wait for a slot 100 ms or
/// so, never more than 1 s).
pub const LONGEST_USUAL_MAX_WAIT: Duration = Duration::from_secs(1);

/// How one system is guarded: slots, slot wait, call timeout, breaker,
/// retries, and an optional rate limit.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::BreakerConfig;
/// use watertight::policy::PolicyConfig;
///
/// // An HTTP client pool of 10 connections: 8 calls at once (pool × 0.8).
/// let payments = PolicyConfig::for_pool(10)
///     .max_wait(Duration::from_millis(100))
///     .call_timeout(Duration::from_secs(5))
///     .breaker(BreakerConfig::CRITICAL)
///     .build()
///     .unwrap();
/// assert_eq!(payments.max_concurrent(), 8);
///
/// let err = PolicyConfig::builder(4).max_wait(Duration::from_secs(3)).build().unwrap_err();
/// assert_eq!(err.field(), "max_wait");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyConfig {
    pub(super) max_concurrent: usize,
    pub(super) max_wait: Duration,
    pub(super) max_waiters: Option<usize>,
    pub(super) call_timeout: Duration,
    pub(super) breaker: BreakerConfig,
    pub(super) retry: RetryConfig,
    pub(super) rate: Option<Quota>,
    pub(super) throttle: Option<ThrottleConfig>,
}

impl PolicyConfig {
    /// A builder for `max_concurrent` calls at once, with a 100 ms slot wait,
    /// a 30 s call timeout (a common HTTP read timeout) and the breaker's
    /// defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::PolicyConfig;
    ///
    /// let inventory = PolicyConfig::builder(4).build().unwrap();
    /// assert_eq!(inventory.max_concurrent(), 4);
    /// assert_eq!(inventory.max_wait(), Duration::from_millis(100));
    /// assert_eq!(inventory.call_timeout(), Duration::from_secs(30));
    /// ```
    pub const fn builder(max_concurrent: usize) -> PolicyConfigBuilder {
        PolicyConfigBuilder {
            max_concurrent,
            max_wait: Duration::from_millis(100),
            max_waiters: None,
            call_timeout: Duration::from_secs(30),
            breaker: BreakerConfig::DEFAULT,
            retry: RetryConfig::builder(),
            rate: None,
            throttle: None,
            allow_long_max_wait: false,
            from_pool: false,
        }
    }

    /// A builder sized from the connection pool in front of the system:
    /// `max_concurrent = pool_size × 0.8` rounded down, at least 1 (leave a
    /// fifth of the pool for health checks and retries, so that the
    /// bulkhead, not the pool, is what refuses).
    ///
    /// A pool of 0 is refused by [`build`](PolicyConfigBuilder::build) with
    /// [`PolicyConfigError::PoolSizeZero`], the error `Deserialize` gives for
    /// `pool_size = 0`. (Like every other setting, it is checked by `build`,
    /// so that this stays a `const fn` returning a builder.)
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::{PolicyConfig, PolicyConfigError};
    /// assert_eq!(PolicyConfig::for_pool(10).build().unwrap().max_concurrent(), 8);
    /// assert_eq!(PolicyConfig::for_pool(1).build().unwrap().max_concurrent(), 1);
    /// assert_eq!(PolicyConfig::for_pool(0).build(), Err(PolicyConfigError::PoolSizeZero));
    /// ```
    pub const fn for_pool(pool_size: usize) -> PolicyConfigBuilder {
        let n = pool_size / 5 * 4 + pool_size % 5 * 4 / 5;
        let mut b = PolicyConfig::builder(if n == 0 && pool_size > 0 { 1 } else { n });
        b.from_pool = true;
        b
    }

    /// Calls allowed at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    ///
    /// // A pool of 20 connections leaves 4 for health checks and retries.
    /// let payments = PolicyConfig::for_pool(20).build().unwrap();
    /// assert_eq!(payments.max_concurrent(), 16);
    /// ```
    pub const fn max_concurrent(&self) -> usize {
        self.max_concurrent
    }

    /// The longest a call waits for a slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::PolicyConfig;
    ///
    /// let payments = PolicyConfig::builder(8).max_wait(Duration::from_millis(50)).build().unwrap();
    /// assert_eq!(payments.max_wait(), Duration::from_millis(50));
    /// ```
    pub const fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// The bound on calls waiting for a slot, if there is one
    /// ([`PolicyConfigBuilder::max_waiters`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    ///
    /// assert_eq!(PolicyConfig::builder(8).build().unwrap().max_waiters(), None);
    /// let search = PolicyConfig::builder(8).max_waiters(16).build().unwrap();
    /// assert_eq!(search.max_waiters(), Some(16));
    /// ```
    pub const fn max_waiters(&self) -> Option<usize> {
        self.max_waiters
    }

    /// The longest one call may run.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::PolicyConfig;
    ///
    /// let payments = PolicyConfig::builder(8).call_timeout(Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(payments.call_timeout(), Duration::from_secs(5));
    /// ```
    pub const fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// The breaker's config.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    /// use watertight::BreakerConfig;
    ///
    /// let payments = PolicyConfig::builder(8).breaker(BreakerConfig::CRITICAL).build().unwrap();
    /// assert_eq!(payments.breaker().failure_rate_threshold(), 30.0);
    /// ```
    pub const fn breaker(&self) -> &BreakerConfig {
        &self.breaker
    }

    /// How calls marked idempotent are retried ([`Policy::call_idempotent`](super::Policy::call_idempotent)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    ///
    /// let inventory = PolicyConfig::builder(8).build().unwrap();
    /// assert_eq!(inventory.retry().max_attempts(), 2); // one retry
    /// ```
    pub const fn retry(&self) -> &RetryConfig {
        &self.retry
    }

    /// The rate limit, if the policy has one ([`PolicyConfigBuilder::rate`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(PolicyConfig::builder(8).build().unwrap().rate(), None);
    /// let provider = PolicyConfig::builder(8).rate(Quota::per_minute(100)).build().unwrap();
    /// assert_eq!(provider.rate(), Some(Quota::per_minute(100)));
    /// ```
    pub const fn rate(&self) -> Option<Quota> {
        self.rate
    }

    /// The client-side adaptive throttle, if the policy has one
    /// ([`PolicyConfigBuilder::throttle`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    /// use watertight::throttle::ThrottleConfig;
    ///
    /// assert_eq!(PolicyConfig::builder(8).build().unwrap().throttle(), None);
    /// let c = PolicyConfig::builder(8).throttle(ThrottleConfig::DEFAULT).build().unwrap();
    /// assert_eq!(c.throttle(), Some(ThrottleConfig::DEFAULT));
    /// ```
    pub const fn throttle(&self) -> Option<ThrottleConfig> {
        self.throttle
    }
}

/// Builds a [`PolicyConfig`]; [`build`](Self::build) checks every setting.
///
/// It is `Copy`: one base builder can be refined per system.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::policy::PolicyConfig;
/// use watertight::BreakerConfig;
///
/// let base = PolicyConfig::builder(8).call_timeout(Duration::from_secs(2));
/// let payments = base.breaker(BreakerConfig::CRITICAL).build().unwrap();
/// let search = base.max_wait(Duration::ZERO).build().unwrap();
///
/// assert_eq!(payments.call_timeout(), search.call_timeout());
/// assert_eq!(payments.max_wait(), Duration::from_millis(100));
/// assert_eq!(search.max_wait(), Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PolicyConfigBuilder {
    max_concurrent: usize,
    max_wait: Duration,
    max_waiters: Option<usize>,
    call_timeout: Duration,
    breaker: BreakerConfig,
    retry: RetryConfigBuilder,
    rate: Option<Quota>,
    throttle: Option<ThrottleConfig>,
    allow_long_max_wait: bool,
    /// Made by [`PolicyConfig::for_pool`]: a zero size is the pool's.
    from_pool: bool,
}

impl PolicyConfigBuilder {
    /// The longest a call waits for a slot (default 100 ms; zero fails at
    /// once when all slots are taken). Above 1 s is refused unless
    /// [`allow_long_max_wait`](Self::allow_long_max_wait) is called.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::{PolicyConfig, PolicyConfigError};
    ///
    /// let fail_fast = PolicyConfig::builder(4).max_wait(Duration::ZERO).build().unwrap();
    /// assert_eq!(fail_fast.max_wait(), Duration::ZERO);
    ///
    /// let err = PolicyConfig::builder(4).max_wait(Duration::from_secs(3)).build().unwrap_err();
    /// assert_eq!(err, PolicyConfigError::MaxWaitTooLong { max_wait: Duration::from_secs(3) });
    /// ```
    pub const fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// At most `n` calls wait for a slot at once (default: no bound but
    /// memory); a call that finds every slot taken and `n` calls waiting
    /// is refused at once with
    /// [`ErrorKind::BulkheadFull`](super::ErrorKind::BulkheadFull), without
    /// waiting (the bulkhead counts it as
    /// [`rejected_queue_full`](crate::BulkheadMetrics::rejected_queue_full)).
    /// `0` refuses every wait, as a zero `max_wait` does.
    ///
    /// Size the wait first: the max wait decides, and with a short one
    /// (100 ms) a bound changes little. The bound is for a long max wait
    /// ([`allow_long_max_wait`](Self::allow_long_max_wait)) or a load far
    /// above what the system serves: it caps the memory the waiting calls
    /// hold and the latency of those admitted. A bound of about what the
    /// system serves within the max wait, `max_concurrent × max_wait /
    /// call time`, refuses at once the calls that would time out anyway
    /// (see [`Bulkhead`'s bounded wait queue](crate::Bulkhead#bounded-wait-queue)).
    /// Above [`Bulkhead::MAX_WAITERS`] is refused by
    /// [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::pin::pin;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// // One slot, calls of up to 5 s may wait 5 s, but at most one waits.
    /// let config = PolicyConfig::builder(1)
    ///     .max_wait(Duration::from_secs(5))
    ///     .allow_long_max_wait()
    ///     .max_waiters(1)
    ///     .build()
    ///     .unwrap();
    /// let export: Policy<_> = Policy::new("export", config, &clock).unwrap();
    /// let _busy = export.bulkhead().try_acquire().unwrap();
    /// let mut waiting = pin!(export.call(|| async { Ok::<_, ()>(()) }));
    /// assert!(poll_once(waiting.as_mut()).await.is_none());
    ///
    /// let err = export.call(|| async { Ok::<_, ()>(()) }).await.unwrap_err();
    /// assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
    /// assert_eq!(export.bulkhead().metrics().rejected_queue_full, 1);
    /// # });
    /// ```
    pub const fn max_waiters(mut self, n: usize) -> Self {
        self.max_waiters = Some(n);
        self
    }

    /// Accepts a slot wait above 1 s: you mean a queue, and know it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::PolicyConfig;
    ///
    /// // A nightly export may queue behind the others for up to 5 s.
    /// let export = PolicyConfig::builder(2)
    ///     .max_wait(Duration::from_secs(5))
    ///     .allow_long_max_wait()
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(export.max_wait(), Duration::from_secs(5));
    /// ```
    pub const fn allow_long_max_wait(mut self) -> Self {
        self.allow_long_max_wait = true;
        self
    }

    /// The longest one call may run (default 30 s). A call that runs out
    /// counts as a failure for the breaker.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::pin::pin;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).call_timeout(Duration::from_secs(2)).build().unwrap();
    /// let payments: Policy<_> = Policy::new("payments", config, &clock).unwrap();
    ///
    /// let mut hung = pin!(payments.call(|| core::future::pending::<Result<(), ()>>()));
    /// assert!(poll_once(hung.as_mut()).await.is_none());
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(*hung.await.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    /// assert_eq!(payments.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub const fn call_timeout(mut self, d: Duration) -> Self {
        self.call_timeout = d;
        self
    }

    /// The breaker's config (default [`BreakerConfig::DEFAULT`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyConfig;
    /// use watertight::BreakerConfig;
    ///
    /// let inventory = PolicyConfig::builder(8).build().unwrap();
    /// assert_eq!(*inventory.breaker(), BreakerConfig::DEFAULT);
    ///
    /// let payments = PolicyConfig::builder(8).breaker(BreakerConfig::CRITICAL).build().unwrap();
    /// assert_eq!(*payments.breaker(), BreakerConfig::CRITICAL);
    /// ```
    pub const fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// How calls marked idempotent are retried (default: see
    /// [`RetryConfig`]); checked by [`build`](Self::build). Only
    /// [`Policy::call_idempotent`](super::Policy::call_idempotent) and its
    /// relatives retry: a plain [`call`](super::Policy::call) never does.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::{PolicyConfig, PolicyConfigError};
    /// use watertight::retry::{RetryConfig, RetryConfigError};
    ///
    /// let search = PolicyConfig::builder(8)
    ///     .retry(RetryConfig::builder().max_attempts(3))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(search.retry().max_attempts(), 3);
    ///
    /// let err = PolicyConfig::builder(8)
    ///     .retry(RetryConfig::builder().max_attempts(0))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, PolicyConfigError::Retry(RetryConfigError::AttemptsZero));
    /// assert_eq!(err.field(), "retry_max_attempts");
    /// ```
    pub const fn retry(mut self, retry: RetryConfigBuilder) -> Self {
        self.retry = retry;
        self
    }

    /// A rate limit for the system (default: none): how often calls may
    /// start, as a GCRA [`Quota`] (`Quota::per_second(50).burst(10)`).
    ///
    /// It is the policy's outermost layer: **checked before the bulkhead**,
    /// so a refused cell costs no slot and asks no breaker, and **once per
    /// attempt**: each retry of
    /// [`call_idempotent`](super::Policy::call_idempotent) is a request to
    /// the system and takes a cell of its own. It never waits: a cell that
    /// does not conform now is refused at once with
    /// [`ErrorKind::RateLimited`](super::ErrorKind::RateLimited) and the
    /// limiter's exact `retry_after` (the policy's one "unavailable" error,
    /// for a 429 or 503 with `Retry-After`), and a refusal ends the
    /// retries. A cell taken is spent even if the bulkhead or the breaker
    /// then refuses the call: the limit errs only towards fewer calls.
    /// (To wait for a cell, await the limiter's own
    /// [`acquire_until`](crate::rate::RateLimiter::acquire_until) first.)
    /// A `Quota` is valid once made, so `build` has nothing to check here.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    /// use watertight::rate::Quota;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).rate(Quota::per_second(2)).build().unwrap();
    /// let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    /// for _ in 0..2 {
    ///     provider.call(|| async { Ok::<_, ()>(()) }).await.unwrap(); // the burst
    /// }
    /// let err = provider.call(|| async { Ok::<_, ()>(()) }).await.unwrap_err();
    /// let wait = Duration::from_millis(500);
    /// assert_eq!(*err.kind(), ErrorKind::RateLimited { retry_after: wait });
    /// assert!(err.is_unavailable());
    /// assert_eq!(err.retry_after(), Some(wait));
    /// assert_eq!(provider.bulkhead().metrics().accepted, 2); // no slot for the refusal
    /// # });
    /// ```
    pub const fn rate(mut self, quota: Quota) -> Self {
        self.rate = Some(quota);
        self
    }

    /// Client-side adaptive throttling (default: none), the SRE book's:
    /// an [`AdaptiveThrottle`](crate::throttle::AdaptiveThrottle) named
    /// after the system refuses calls locally, with probability
    /// `(requests − K × accepts) / (requests + 1)` over its window, when
    /// the system accepts much less than it is sent.
    ///
    /// It is the policy's outermost layer, **before the rate limit and the
    /// bulkhead**: a call it refuses costs no cell and no slot, and ends
    /// with [`ErrorKind::Throttled`](super::ErrorKind::Throttled) (a
    /// refusal: one of the "unavailable" errors, never retried). It counts
    /// **once per attempt**, at admission. What it counts as accepted is
    /// what the breaker counts as a success (the policy has one
    /// classifier): a success is an accept; a failure or the policy's own
    /// call timeout is not (the system did not serve it: classify only
    /// overload refusals — 503, 429 — and timeouts as failures, and an
    /// application error as a success, to follow the book's rule exactly);
    /// a call refused by another layer, cut by the caller's budget, or
    /// cancelled, counts as nothing (its request is taken back).
    ///
    /// `build` checks that the throttle's window, less one bucket, covers
    /// the policy's `call_timeout` (every call that ends within its
    /// timeout is credited in the bucket it was admitted in).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    /// use watertight::throttle::ThrottleConfig;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).throttle(ThrottleConfig::DEFAULT).build().unwrap();
    /// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    /// search.breaker().disable(); // let the throttle alone decide, for this example
    /// let mut throttled = 0;
    /// for _ in 0..100 {
    ///     // The system sheds everything it gets (a 503, a failure).
    ///     match search.call(|| async { Err::<(), _>("503") }).await {
    ///         Err(e) if matches!(e.kind(), ErrorKind::Throttled(_)) => throttled += 1,
    ///         _ => {}
    ///     }
    /// }
    /// let m = search.throttle().unwrap().metrics();
    /// assert_eq!(m.refused, throttled);
    /// assert!(throttled > 70); // about 90 % once it has seen a few refusals
    /// # });
    /// ```
    pub const fn throttle(mut self, config: ThrottleConfig) -> Self {
        self.throttle = Some(config);
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// A [`PolicyConfigError`] naming the field: `max_concurrent` zero or
    /// above [`Bulkhead::MAX_PERMITS`]; a [`for_pool`](PolicyConfig::for_pool)
    /// size of zero; `max_wait` above 1 s without
    /// [`allow_long_max_wait`](Self::allow_long_max_wait); `max_waiters`
    /// above [`Bulkhead::MAX_WAITERS`]; `call_timeout` zero. (A slot wait needs no `alloc`: the call future holds its place
    /// in the bulkhead's queue.)
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::{PolicyConfig, PolicyConfigError};
    ///
    /// let payments = PolicyConfig::builder(8).build();
    /// assert_eq!(payments.map(|c| c.max_concurrent()), Ok(8));
    ///
    /// let none = PolicyConfig::builder(0).build();
    /// assert_eq!(none, Err(PolicyConfigError::MaxConcurrentZero));
    /// let instant = PolicyConfig::builder(8).call_timeout(Duration::ZERO).build();
    /// assert_eq!(instant, Err(PolicyConfigError::CallTimeoutZero));
    /// ```
    pub const fn build(self) -> Result<PolicyConfig, PolicyConfigError> {
        if self.max_concurrent == 0 {
            return Err(if self.from_pool {
                PolicyConfigError::PoolSizeZero
            } else {
                PolicyConfigError::MaxConcurrentZero
            });
        }
        if self.max_concurrent > Bulkhead::<()>::MAX_PERMITS {
            return Err(PolicyConfigError::MaxConcurrentTooLarge {
                max: Bulkhead::<()>::MAX_PERMITS,
            });
        }
        if !self.allow_long_max_wait && self.max_wait.as_nanos() > LONGEST_USUAL_MAX_WAIT.as_nanos()
        {
            return Err(PolicyConfigError::MaxWaitTooLong {
                max_wait: self.max_wait,
            });
        }
        if let Some(n) = self.max_waiters {
            if n > Bulkhead::<()>::MAX_WAITERS {
                return Err(PolicyConfigError::MaxWaitersTooLarge {
                    max: Bulkhead::<()>::MAX_WAITERS,
                });
            }
        }
        if self.call_timeout.is_zero() {
            return Err(PolicyConfigError::CallTimeoutZero);
        }
        let retry = match self.retry.build() {
            Ok(r) => r,
            Err(e) => return Err(PolicyConfigError::Retry(e)),
        };
        if let Some(throttle) = &self.throttle {
            if let Err(e) = throttle.covers(self.call_timeout) {
                return Err(PolicyConfigError::Throttle(e));
            }
        }
        Ok(PolicyConfig {
            max_concurrent: self.max_concurrent,
            max_wait: self.max_wait,
            max_waiters: self.max_waiters,
            call_timeout: self.call_timeout,
            breaker: self.breaker,
            retry,
            rate: self.rate,
            throttle: self.throttle,
        })
    }
}

/// A policy setting that cannot work, naming the field.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::policy::{PolicyConfig, PolicyConfigError};
///
/// let err = PolicyConfig::builder(0).build().unwrap_err();
/// assert_eq!(err, PolicyConfigError::MaxConcurrentZero);
/// assert_eq!(err.to_string(), "max_concurrent must not be zero");
///
/// let err = PolicyConfig::builder(4).max_wait(Duration::from_secs(2)).build().unwrap_err();
/// assert!(matches!(err, PolicyConfigError::MaxWaitTooLong { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PolicyConfigError {
    /// `max_concurrent` is zero.
    MaxConcurrentZero,
    /// The pool size given to [`PolicyConfig::for_pool`] (or as `pool_size`
    /// to `Deserialize`) is zero.
    PoolSizeZero,
    /// `max_concurrent` is above what a bulkhead holds.
    MaxConcurrentTooLarge {
        /// [`Bulkhead::MAX_PERMITS`].
        max: usize,
    },
    /// `max_wait` is above 1 s: a bulkhead that long is a queue. Call
    /// [`PolicyConfigBuilder::allow_long_max_wait`] if that is meant.
    MaxWaitTooLong {
        /// The wait asked for.
        max_wait: Duration,
    },
    /// `call_timeout` is zero.
    CallTimeoutZero,
    /// `max_waiters` is above what a bulkhead can bound.
    MaxWaitersTooLarge {
        /// [`Bulkhead::MAX_WAITERS`].
        max: usize,
    },
    /// The breaker's config does not fit the policy's window capacity `N`.
    Breaker(BreakerConfigError),
    /// The retry config is invalid.
    Retry(RetryConfigError),
    /// The throttle's window, less one bucket, does not cover the
    /// policy's `call_timeout` (or, read from serde or the environment, a
    /// throttle setting is invalid).
    Throttle(ThrottleConfigError),
}

/// A setting of a [`PolicyConfig`], as [`PolicyConfigError::field`] names
/// it: match on it to map errors; [`name`](Self::name) is how the builder
/// spells it, for messages.
///
/// # Examples
///
/// ```
/// use watertight::breaker::BreakerField;
/// use watertight::policy::{PolicyConfig, PolicyField};
///
/// let err = PolicyConfig::for_pool(0).build().unwrap_err();
/// assert_eq!(err.field(), PolicyField::PoolSize);
/// assert_eq!(err.field().name(), "pool_size");
///
/// let breaker = watertight::BreakerConfig::builder().window_size(32).build().unwrap();
/// let config = PolicyConfig::builder(4).breaker(breaker).build().unwrap();
/// let clock = watertight::clock::ManualClock::new();
/// let err = watertight::Policy::<_, 16>::new("x", config, &clock).unwrap_err();
/// assert_eq!(err.field(), PolicyField::Breaker(BreakerField::WindowSize));
/// assert_eq!(err.field(), "window_size"); // compares the name
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyField {
    /// `max_concurrent`.
    MaxConcurrent,
    /// `pool_size`, of [`PolicyConfig::for_pool`].
    PoolSize,
    /// `max_wait`.
    MaxWait,
    /// `call_timeout`.
    CallTimeout,
    /// `max_waiters`.
    MaxWaiters,
    /// A setting of the breaker.
    Breaker(BreakerField),
    /// `retry_max_attempts`.
    RetryMaxAttempts,
    /// `retry_backoff` (its base and its cap).
    RetryBackoff,
    /// `retry_budget` (its tokens and its ratio).
    RetryBudget,
    /// `throttle_k`.
    ThrottleK,
    /// `throttle_max_probability`.
    ThrottleMaxProbability,
    /// `throttle_window`.
    ThrottleWindow,
}

impl PolicyField {
    /// The setting's name, as the builders spell it (a breaker setting by
    /// its own name, `window_size`).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::policy::PolicyField;
    /// assert_eq!(PolicyField::CallTimeout.name(), "call_timeout");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            PolicyField::MaxConcurrent => "max_concurrent",
            PolicyField::PoolSize => "pool_size",
            PolicyField::MaxWait => "max_wait",
            PolicyField::CallTimeout => "call_timeout",
            PolicyField::MaxWaiters => "max_waiters",
            PolicyField::Breaker(f) => f.name(),
            PolicyField::RetryMaxAttempts => "retry_max_attempts",
            PolicyField::RetryBackoff => "retry_backoff",
            PolicyField::RetryBudget => "retry_budget",
            PolicyField::ThrottleK => "throttle_k",
            PolicyField::ThrottleMaxProbability => "throttle_max_probability",
            PolicyField::ThrottleWindow => "throttle_window",
        }
    }
}

impl fmt::Display for PolicyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field equals its [`name`](PolicyField::name).
impl PartialEq<&str> for PolicyField {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

impl PolicyConfigError {
    /// The setting at fault, as the builder spells it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::PolicyConfig;
    ///
    /// let err = PolicyConfig::builder(4).call_timeout(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err.field(), "call_timeout");
    /// // Say which setting of which system to fix.
    /// let msg = format!("payments.{}: {err}", err.field());
    /// assert_eq!(msg, "payments.call_timeout: call_timeout must not be zero");
    /// ```
    pub const fn field(&self) -> PolicyField {
        match self {
            PolicyConfigError::MaxConcurrentZero
            | PolicyConfigError::MaxConcurrentTooLarge { .. } => PolicyField::MaxConcurrent,
            PolicyConfigError::PoolSizeZero => PolicyField::PoolSize,
            PolicyConfigError::MaxWaitTooLong { .. } => PolicyField::MaxWait,
            PolicyConfigError::CallTimeoutZero => PolicyField::CallTimeout,
            PolicyConfigError::MaxWaitersTooLarge { .. } => PolicyField::MaxWaiters,
            PolicyConfigError::Breaker(e) => PolicyField::Breaker(e.field()),
            PolicyConfigError::Retry(e) => match e {
                RetryConfigError::AttemptsZero => PolicyField::RetryMaxAttempts,
                RetryConfigError::BaseBackoffZero
                | RetryConfigError::BackoffCapBelowBase { .. } => PolicyField::RetryBackoff,
                _ => PolicyField::RetryBudget,
            },
            PolicyConfigError::Throttle(e) => match e {
                ThrottleConfigError::K(_) => PolicyField::ThrottleK,
                ThrottleConfigError::MaxProbability(_) => PolicyField::ThrottleMaxProbability,
                _ => PolicyField::ThrottleWindow,
            },
        }
    }
}

impl fmt::Display for PolicyConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyConfigError::MaxConcurrentZero => f.write_str("max_concurrent must not be zero"),
            PolicyConfigError::PoolSizeZero => f.write_str("pool_size must not be zero"),
            PolicyConfigError::MaxConcurrentTooLarge { max } => {
                write!(f, "max_concurrent must be at most {max}")
            }
            PolicyConfigError::MaxWaitTooLong { max_wait } => write!(
                f,
                "max_wait of {max_wait:?} is above 1 s: a bulkhead should fail fast, not queue \
                 (call allow_long_max_wait() if a queue is meant)"
            ),
            PolicyConfigError::CallTimeoutZero => f.write_str("call_timeout must not be zero"),
            PolicyConfigError::MaxWaitersTooLarge { max } => {
                write!(f, "max_waiters must be at most {max}")
            }
            PolicyConfigError::Breaker(e) => write!(f, "breaker: {e}"),
            PolicyConfigError::Retry(e) => write!(f, "retry: {e}"),
            PolicyConfigError::Throttle(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for PolicyConfigError {}
