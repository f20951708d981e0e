//! One policy per external system: bulkhead, breaker and deadline in one call.
//!
//! Three layers go around every outbound call, in this order (the order
//! resilience4j recommends for its decorators, and the Azure bulkhead
//! pattern's "isolate, then fail fast"):
//! the **bulkhead** outside (how many calls to this system at once; wait for
//! a slot only briefly), the **circuit breaker** inside it (do not call a
//! system that is clearly failing), the **deadline** innermost (how long this
//! one call may take, and no longer than the caller's request budget). Each
//! external system gets its own set, named after it, so one slow system
//! cannot drain the others, and every refusal comes back as one
//! "system unavailable" [`Error`] that the caller maps to a 503 with
//! `Retry-After`, a cached answer or a fallback.
//!
//! # Why "policy"
//!
//! It is the name users of Polly and resilience4j look for; one [`Policy`]
//! per system (`"payments"`, `"inventory"`), never one shared by all.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

#[cfg(feature = "alloc")]
use crate::breaker::Heap;
use crate::breaker::{
    err_is_failure, fail_on_unwind, take_raw, BreakerConfig, BreakerConfigError, BreakerField,
    CircuitBreaker, ErrIsFailure, Guard, Inline, Outcome, Raw, Rejection, WindowStorage,
};
use crate::bulkhead::{AcquireError, Bulkhead};
use crate::clock::{Clock, Instant, Timer};
use crate::deadline::Deadline;
use crate::limit::{AdaptiveLimit, LimitAlgorithm, Signal};
use crate::retry::{Jitter, RetryBudget, RetryConfig, RetryConfigBuilder, RetryConfigError};
use crate::sync::{AtomicUsize, Ordering};

/// The longest slot wait accepted without [`PolicyConfigBuilder::allow_long_max_wait`]:
/// a bulkhead is a fail-fast limit, not a queue (wait for a slot 100 ms or
/// so, never more than 1 s).
pub const LONGEST_USUAL_MAX_WAIT: Duration = Duration::from_secs(1);

/// How one system is guarded: slots, slot wait, call timeout, breaker.
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
    max_concurrent: usize,
    max_wait: Duration,
    call_timeout: Duration,
    breaker: BreakerConfig,
    retry: RetryConfig,
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
            call_timeout: Duration::from_secs(30),
            breaker: BreakerConfig::DEFAULT,
            retry: RetryConfig::builder(),
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

    /// How calls marked idempotent are retried ([`Policy::call_idempotent`]).
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
    call_timeout: Duration,
    breaker: BreakerConfig,
    retry: RetryConfigBuilder,
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
    /// [`Policy::call_idempotent`] and its relatives retry: a plain
    /// [`call`](Policy::call) never does.
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

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// A [`PolicyConfigError`] naming the field: `max_concurrent` zero or
    /// above [`Bulkhead::MAX_PERMITS`]; a [`for_pool`](PolicyConfig::for_pool)
    /// size of zero; `max_wait` above 1 s without
    /// [`allow_long_max_wait`](Self::allow_long_max_wait); `call_timeout`
    /// zero. (A slot wait needs no `alloc`: the call future holds its place
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
        if self.call_timeout.is_zero() {
            return Err(PolicyConfigError::CallTimeoutZero);
        }
        let retry = match self.retry.build() {
            Ok(r) => r,
            Err(e) => return Err(PolicyConfigError::Retry(e)),
        };
        Ok(PolicyConfig {
            max_concurrent: self.max_concurrent,
            max_wait: self.max_wait,
            call_timeout: self.call_timeout,
            breaker: self.breaker,
            retry,
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
    /// The breaker's config does not fit the policy's window capacity `N`.
    Breaker(BreakerConfigError),
    /// The retry config is invalid.
    Retry(RetryConfigError),
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
    /// A setting of the breaker.
    Breaker(BreakerField),
    /// `retry_max_attempts`.
    RetryMaxAttempts,
    /// `retry_backoff` (its base and its cap).
    RetryBackoff,
    /// `retry_budget` (its tokens and its ratio).
    RetryBudget,
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
            PolicyField::Breaker(f) => f.name(),
            PolicyField::RetryMaxAttempts => "retry_max_attempts",
            PolicyField::RetryBackoff => "retry_backoff",
            PolicyField::RetryBudget => "retry_budget",
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
            PolicyConfigError::Breaker(e) => PolicyField::Breaker(e.field()),
            PolicyConfigError::Retry(e) => match e {
                RetryConfigError::AttemptsZero => PolicyField::RetryMaxAttempts,
                RetryConfigError::BaseBackoffZero
                | RetryConfigError::BackoffCapBelowBase { .. } => PolicyField::RetryBackoff,
                _ => PolicyField::RetryBudget,
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
            PolicyConfigError::Breaker(e) => write!(f, "breaker: {e}"),
            PolicyConfigError::Retry(e) => write!(f, "retry: {e}"),
        }
    }
}

impl core::error::Error for PolicyConfigError {}

/// Why a call made through a [`Policy`] did not return the system's answer.
///
/// Every variant but [`Call`](ErrorKind::Call) means "system unavailable":
/// see [`Error::is_unavailable`].
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
/// use watertight::Rejection;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let payments: Policy<_> =
///     Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// payments.breaker().force_open();
///
/// let err = payments.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
/// assert_eq!(*err.kind(), ErrorKind::CircuitOpen(Rejection::ForcedOpen));
/// // The breaker's refusal gave the bulkhead slot back at once.
/// assert_eq!(payments.bulkhead().available(), 4);
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind<E> {
    /// All slots were taken and none came free within the slot wait (or the
    /// request budget). The breaker was not asked and records nothing.
    BulkheadFull,
    /// The bulkhead was closed.
    BulkheadClosed,
    /// The breaker refused: the system is failing. Its slot was given back
    /// at once.
    CircuitOpen(Rejection),
    /// The call ran out of time (the call timeout, or what was left of the
    /// request budget), or the budget had run out before it could start.
    DeadlineExceeded,
    /// The store of a shared limit (Redis, for a
    /// [`GlobalBulkhead`](crate::redis::GlobalBulkhead), feature `redis`)
    /// could not be reached, and its fallback refuses calls.
    StoreUnavailable,
    /// The call ran and returned this error.
    Call(E),
}

/// The error of [`Policy::call`]: which layer refused, or the call's own
/// error, with the system's name.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::BreakerConfig;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let breaker = BreakerConfig::builder().minimum_calls(1).build().unwrap();
/// let config = PolicyConfig::builder(4).breaker(breaker).build().unwrap();
/// let payments: Policy<_> = Policy::new("payments", config, &clock).unwrap();
///
/// let err = payments.call(|| async { Err::<(), _>("gateway down") }).await.unwrap_err();
/// assert_eq!(err.to_string(), "payments: gateway down");
///
/// // That failure opened the breaker: the next call is refused for 30 s.
/// let err = payments.call(|| async { Ok::<(), &str>(()) }).await.unwrap_err();
/// assert!(err.is_unavailable());
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(30)));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error<E> {
    system: &'static str,
    kind: ErrorKind<E>,
}

impl<E> Error<E> {
    /// The system's name (the policy's).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap(), &clock).unwrap();
    /// let _busy = p.bulkhead().try_acquire().unwrap();
    /// let err = p.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
    /// assert_eq!(err.system(), "stock");
    /// # });
    /// ```
    pub const fn system(&self) -> &'static str {
        self.system
    }

    /// What happened.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap(), &clock).unwrap();
    /// let _busy = p.bulkhead().try_acquire().unwrap();
    /// let err = p.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
    /// assert_eq!(*err.kind(), watertight::policy::ErrorKind::BulkheadFull);
    /// # });
    /// ```
    pub const fn kind(&self) -> &ErrorKind<E> {
        &self.kind
    }

    /// Whether a layer refused or the time ran out: the caller should answer
    /// "system unavailable" (a 503, a cached answer, a fallback). False only
    /// for the call's own error.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap(), &clock).unwrap();
    /// let _busy = p.bulkhead().try_acquire().unwrap();
    /// let err = p.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
    /// assert!(err.is_unavailable());
    /// # });
    /// ```
    pub const fn is_unavailable(&self) -> bool {
        !matches!(self.kind, ErrorKind::Call(_))
    }

    /// How long until the breaker lets a probe through, when it refused
    /// because it is open: a server's `Retry-After`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap(), &clock).unwrap();
    /// let _busy = p.bulkhead().try_acquire().unwrap();
    /// let err = p.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
    /// assert_eq!(err.retry_after(), None); // only an open breaker gives one
    ///
    /// // One failure opens this breaker for 10 s; 4 s later, 6 s are left.
    /// let brk = watertight::BreakerConfig::builder()
    ///     .minimum_calls(1)
    ///     .open_duration(core::time::Duration::from_secs(10))
    ///     .build()
    ///     .unwrap();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).breaker(brk).build().unwrap(), &clock).unwrap();
    /// assert!(p.call(|| async { Err::<(), _>("down") }).await.is_err());
    /// clock.advance(core::time::Duration::from_secs(4));
    /// let err = p.call(|| async { Ok::<(), &str>(()) }).await.unwrap_err();
    /// assert_eq!(err.retry_after(), Some(core::time::Duration::from_secs(6)));
    /// # });
    /// ```
    pub const fn retry_after(&self) -> Option<Duration> {
        match &self.kind {
            ErrorKind::CircuitOpen(r) => r.retry_after(),
            _ => None,
        }
    }

    /// The call's own error, if it ran and failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap(), &clock).unwrap();
    /// let _busy = p.bulkhead().try_acquire().unwrap();
    /// let err = p.call(|| async { Ok::<(), ()>(()) }).await.unwrap_err();
    /// assert_eq!(err.into_inner(), None);
    /// # });
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self.kind {
            ErrorKind::Call(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn new(system: &'static str, kind: ErrorKind<E>) -> Self {
        Error { system, kind }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let system = self.system;
        match &self.kind {
            ErrorKind::BulkheadFull => write!(f, "{system} unavailable: bulkhead full"),
            ErrorKind::BulkheadClosed => write!(f, "{system} unavailable: bulkhead closed"),
            ErrorKind::CircuitOpen(r) => write!(f, "{system} unavailable: {r}"),
            ErrorKind::DeadlineExceeded => write!(f, "{system} unavailable: deadline exceeded"),
            ErrorKind::StoreUnavailable => {
                write!(f, "{system} unavailable: limit store unreachable")
            }
            ErrorKind::Call(e) => write!(f, "{system}: {e}"),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::CircuitOpen(r) => Some(r),
            ErrorKind::Call(e) => Some(e),
            _ => None,
        }
    }
}

/// Bulkhead, breaker and deadline for one external system, in this order:
/// bulkhead outside, breaker inside, deadline innermost.
///
/// [`call`](Self::call) runs a call through the three:
///
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

/// The jitter's seed when the config sets none: with `std`, random per
/// policy (std's random hash keys, fresh per process and per call), so that
/// replicas do not retry in step; without it, the name's FNV-1a hash.
fn default_seed(name: &str) -> u64 {
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
        let bulkhead =
            Bulkhead::try_new(name, config.max_concurrent, clock.clone()).map_err(|_| {
                PolicyConfigError::MaxConcurrentTooLarge {
                    max: Bulkhead::<()>::MAX_PERMITS,
                }
            })?;
        Ok(Policy {
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
    pub fn call<F, Fut, T, E>(&self, make: F) -> PolicyCall<&Self, Make<F>, ErrIsFailure<T, E>>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        PolicyCall::new(self, None, Make(Some(make)), err_is_failure)
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
        K: FnOnce(&Result<T, E>) -> Outcome,
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
    ) -> PolicyCall<&Self, Make<F>, ErrIsFailure<T, E>>
    where
        C: Timer + Clone,
        B: Clock,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        PolicyCall::new(
            self,
            Some(budget.instant()),
            Make(Some(make)),
            err_is_failure,
        )
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
        K: FnOnce(&Result<T, E>) -> Outcome,
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
        let mut started: Option<Instant> = None;
        let mut said: Option<Signal> = None;
        let bulkhead = &self.bulkhead;
        let result = self
            .call_with(
                || {
                    started = Some(bulkhead.clock().now());
                    make()
                },
                |r| {
                    let s = signal(r);
                    said = Some(s);
                    match s {
                        Signal::Success => Outcome::Success,
                        _ => Outcome::Failure,
                    }
                },
            )
            .await;
        let verdict = match &result {
            Err(e) if matches!(e.kind(), ErrorKind::DeadlineExceeded) => Some(Signal::Timeout),
            _ => said,
        };
        if let (Some(started), Some(verdict)) = (started, verdict) {
            // The call's slot is back by now, as `record` expects.
            limit.record(bulkhead, started, verdict);
        }
        result
    }
}

impl<C, const N: usize, W: WindowStorage, B> fmt::Debug for Policy<C, N, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name())
            .field("bulkhead", &self.bulkhead)
            .field("breaker", &self.breaker)
            .field("max_wait", &self.max_wait)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

// ---- the call future -------------------------------------------------------

mod sealed {
    use core::future::Future;
    use core::task::{Context, Poll};
    use core::time::Duration;

    use crate::breaker::{Guard, Outcome};
    use crate::bulkhead::Bulkhead;
    use crate::clock::Timer;

    /// The parts of a policy that a [`PolicyCall`](super::PolicyCall) works
    /// with, borrowed from a handle: `&Policy` for `Policy::call` and its
    /// relatives, `Arc<Policy>` for the tower service.
    #[allow(missing_debug_implementations)]
    pub struct Parts<'a, C, B> {
        pub(crate) bulkhead: &'a Bulkhead<C>,
        pub(crate) breaker: &'a B,
        pub(crate) clock: &'a C,
        pub(crate) max_wait: Duration,
        pub(crate) call_timeout: Duration,
        pub(crate) retry: &'a super::Retries,
    }

    /// A way to reach a policy: a reference, or an `Arc`.
    pub trait Handle {
        #[doc(hidden)]
        type Clock: Timer;
        #[doc(hidden)]
        type Breaker: Guard;
        #[doc(hidden)]
        fn parts(&self) -> Parts<'_, Self::Clock, Self::Breaker>;
    }

    /// How the call is started once the policy lets it through: a closure
    /// that makes the future, or a tower service to ready and call.
    pub trait Dispatch {
        #[doc(hidden)]
        type Future: Future;
        /// `Ready(Ok(future))` once the call is made; `Ready(Err(output))`
        /// when starting it already failed (a service's readiness error).
        #[doc(hidden)]
        fn poll_dispatch(
            &mut self,
            cx: &mut Context<'_>,
        ) -> Poll<Result<Self::Future, <Self::Future as Future>::Output>>;
    }

    /// A [`Dispatch`] that can start the next attempt of a retried call:
    /// it gives back, out of the finished attempt's dispatch, what the next
    /// one needs (the closure; the service and the request).
    pub trait Redispatch: Dispatch + Sized {
        #[doc(hidden)]
        fn take_back(&mut self) -> Self;
    }

    /// What the breaker should make of a result.
    pub trait Judge<O> {
        #[doc(hidden)]
        fn judge(self, output: &O) -> Outcome;
    }
}
pub(crate) use sealed::{Dispatch, Handle, Judge, Parts, Redispatch};

impl<C: Timer, const N: usize, W: WindowStorage, B: Clock> Handle for &Policy<C, N, W, B> {
    type Clock = C;
    type Breaker = CircuitBreaker<B, N, (), W>;
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Policy::parts(self)
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
impl<C: Timer, const N: usize, W: WindowStorage, B: Clock> Handle
    for alloc::sync::Arc<Policy<C, N, W, B>>
{
    type Clock = C;
    type Breaker = CircuitBreaker<B, N, (), W>;
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Policy::parts(self)
    }
}

impl<C, const N: usize, W, B> Policy<C, N, W, B> {
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Parts {
            bulkhead: &self.bulkhead,
            breaker: &self.breaker,
            clock: &self.clock,
            max_wait: self.max_wait,
            call_timeout: self.call_timeout,
            retry: &self.retry,
        }
    }
}

/// The call of [`Policy::call`] and its relatives: a closure that makes the
/// call's future, run once the policy lets it through (a refused call is
/// never made).
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
///
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("mail", PolicyConfig::builder(1).build().unwrap(), &clock).unwrap();
/// p.breaker().force_open();
/// let mut made = false;
/// let r = futures_lite::future::block_on(p.call(|| {
///     made = true;
///     async { Ok::<_, ()>(()) }
/// }));
/// assert!(matches!(r.unwrap_err().kind(), ErrorKind::CircuitOpen(_)));
/// assert!(!made);
/// ```
#[derive(Debug)]
pub struct Make<F>(Option<F>);

impl<F: FnOnce() -> Fut, Fut: Future> Dispatch for Make<F> {
    type Future = Fut;
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self.0.take().expect("a call is made once");
        Poll::Ready(Ok(make()))
    }
}

impl<T, E, K: FnOnce(&Result<T, E>) -> Outcome> Judge<Result<T, E>> for K {
    fn judge(self, output: &Result<T, E>) -> Outcome {
        self(output)
    }
}

/// A bulkhead wait: the acquire futures' core (with its own queue node),
/// kept in the call future.
type SlotWaiter = crate::bulkhead::Waiter;

/// Where a [`PolicyCall`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Not polled yet: nothing taken.
    Start,
    /// Waiting for a bulkhead slot.
    Slot,
    /// Slot and breaker permit held: starting, then running the call.
    Call,
    /// Finished.
    Done,
}

type SleepOf<R> = <<R as Handle>::Clock as Timer>::Sleep;
type OutputOf<D> = <<D as Dispatch>::Future as Future>::Output;

pin_project_lite::pin_project! {
    /// The future of [`Policy::call`] and its relatives (and of the tower
    /// policy service): the three layers as one named future. `R` reaches
    /// the policy (`&Policy` or `Arc<Policy>`), `D` starts the call, `K`
    /// classifies its result.
    ///
    /// In order: a bulkhead slot (at once, or within the policy's
    /// `max_wait`, or what is left of the budget if less); the breaker's
    /// permit (a refusal gives the slot back at once); then the call, under
    /// the policy's `call_timeout` (or the budget's end if sooner), armed
    /// after its first poll: a call that is ready at once reads no clock and
    /// arms no timer, and its timeout counts from the end of that poll.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point leaves a slot wait (counted as cancelled),
    /// drops the call, records nothing for the breaker (a half-open probe
    /// slot is given back) and gives the bulkhead slot back.
    ///
    /// Under `std`, a call (or classifier) that panics records a failure as
    /// the panic unwinds out of `poll`, however it is caught (a task
    /// harness, `catch_unwind` on the future or on the thread); the slot
    /// goes back when the future is dropped.
    ///
    /// # Examples
    ///
    /// Named, so it can sit in a struct without a box:
    ///
    /// ```
    /// use core::future::Ready;
    /// use watertight::breaker::ErrIsFailure;
    /// use watertight::clock::ManualClock;
    /// use watertight::futures::PolicyCall;
    /// use watertight::policy::{Make, Policy, PolicyConfig};
    ///
    /// type Lookup<'p> = PolicyCall<
    ///     &'p Policy<&'p ManualClock>,
    ///     Make<fn() -> Ready<Result<u32, ()>>>,
    ///     ErrIsFailure<u32, ()>,
    /// >;
    ///
    /// let clock = ManualClock::new();
    /// let stock = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
    /// let call: Lookup<'_> = stock.call(|| core::future::ready(Ok(7)));
    /// assert_eq!(stock.bulkhead().in_flight(), 0); // nothing taken before the first poll
    /// assert_eq!(futures_lite::future::block_on(call), Ok(7));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PolicyCall<R: Handle, D: Dispatch, K> {
        policy: R,
        budget: Option<Instant>,
        dispatch: D,
        classify: Option<K>,
        stage: Stage,
        // The bulkhead: a wait for a slot (idle until one is needed), and
        // whether the slot is held.
        #[pin]
        waiter: SlotWaiter,
        slot_deadline: Instant,
        #[pin]
        slot_sleep: Option<SleepOf<R>>,
        held: bool,
        // The breaker's permit.
        raw: Option<Raw>,
        // The call once made; its timeout once armed, and whether that
        // timeout is the caller's budget rather than `call_timeout`.
        #[pin]
        fut: Option<D::Future>,
        #[pin]
        sleep: Option<SleepOf<R>>,
        by_budget: bool,
    }

    impl<R: Handle, D: Dispatch, K> PinnedDrop for PolicyCall<R, D, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let parts = this.policy.parts();
            this.waiter.cancel(parts.bulkhead);
            if let Some(raw) = take_raw(this.raw) {
                parts.breaker.abandon(raw);
            }
            if core::mem::take(this.held) {
                parts.bulkhead.release(1);
            }
        }
    }
}

impl<R: Handle, D: Dispatch, K> PolicyCall<R, D, K> {
    /// The call's starter, which a retry takes back after the attempt.
    pub(crate) fn dispatch_mut(self: Pin<&mut Self>) -> &mut D {
        self.project().dispatch
    }

    pub(crate) fn new(policy: R, budget: Option<Instant>, dispatch: D, classify: K) -> Self {
        PolicyCall {
            policy,
            budget,
            dispatch,
            classify: Some(classify),
            stage: Stage::Start,
            waiter: SlotWaiter::new(1),
            slot_deadline: Instant::ZERO,
            slot_sleep: None,
            held: false,
            raw: None,
            fut: None,
            sleep: None,
            by_budget: false,
        }
    }
}

impl<R, D, K, T, E> Future for PolicyCall<R, D, K>
where
    R: Handle,
    D: Dispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Judge<Result<T, E>>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Parts {
            bulkhead,
            breaker,
            clock,
            max_wait,
            call_timeout,
            ..
        } = this.policy.parts();
        let name = bulkhead.name();
        let budget = *this.budget;
        let fail = |kind| Poll::Ready(Err(Error::new(name, kind)));

        if *this.stage == Stage::Start {
            // 1. Bulkhead, outside: a free slot at once (no clock read); else
            // a wait of `max_wait`, or what is left of the budget if less.
            let slot = match bulkhead.try_acquire_uncounted() {
                Err(AcquireError::Full) => {
                    let wait = match budget {
                        Some(end) if !max_wait.is_zero() => {
                            max_wait.min(end.saturating_duration_since(clock.now()))
                        }
                        _ => max_wait,
                    };
                    if wait.is_zero() {
                        // Counted as the bulkhead's own refusal.
                        Some(bulkhead.try_acquire())
                    } else {
                        start_wait(bulkhead, wait, this.slot_deadline)
                    }
                }
                // Closed: refused again through the counted path, so the
                // bulkhead counts the refusal (and reports it, with
                // `tracing`) itself.
                Err(AcquireError::Closed) => Some(bulkhead.try_acquire()),
                other => Some(other),
            };
            *this.stage = Stage::Slot;
            match slot {
                None => {}
                Some(Ok(permit)) => {
                    core::mem::forget(permit);
                    *this.held = true;
                }
                Some(Err(e)) => {
                    *this.stage = Stage::Done;
                    return fail(slot_refusal(e));
                }
            }
        }
        if *this.stage == Stage::Slot && !*this.held {
            match poll_wait(
                bulkhead,
                this.waiter.as_mut(),
                *this.slot_deadline,
                this.slot_sleep.as_mut(),
                cx,
            ) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) => *this.held = true,
                Poll::Ready(Err(e)) => {
                    *this.stage = Stage::Done;
                    return fail(slot_refusal(e));
                }
            }
        }
        // The breaker's permit while the call is polled: out of the future
        // (see `breaker::fail_on_unwind`), so a call ready at its first poll
        // never stores it.
        let mut raw = None;
        if *this.stage == Stage::Slot {
            // 2. Breaker, inside: a refusal gives the slot back at once.
            match breaker.acquire_raw() {
                Ok(admitted) => raw = Some(admitted),
                Err(why) => {
                    *this.held = false;
                    bulkhead.release(1);
                    *this.stage = Stage::Done;
                    return fail(ErrorKind::CircuitOpen(why));
                }
            }
            *this.stage = Stage::Call;
            // 3. Deadline, innermost. A budget already spent does not start
            // the call: the system did nothing wrong, so nothing is recorded.
            if let Some(end) = budget {
                if clock.now() >= end {
                    if let Some(raw) = raw {
                        breaker.finish(raw, Outcome::Ignored);
                    }
                    *this.held = false;
                    bulkhead.release(1);
                    *this.stage = Stage::Done;
                    #[cfg(feature = "tracing")]
                    tracing::debug!(
                        system = name,
                        reason = "deadline_exceeded",
                        by_budget = true,
                        "policy refused a call"
                    );
                    return fail(ErrorKind::DeadlineExceeded);
                }
            }
        }
        assert!(
            *this.stage == Stage::Call,
            "`PolicyCall` polled after completion"
        );

        // The call, polled once before a timer is armed. A panic in it is a
        // failure, recorded as it unwinds (see `breaker::fail_on_unwind`).
        let raw = raw.or_else(|| take_raw(this.raw));
        let polled = fail_on_unwind(breaker, raw, || {
            poll_call(this.dispatch, this.fut.as_mut(), cx)
        });
        let result = match polled {
            Poll::Ready(result) => result,
            Poll::Pending => {
                *this.raw = raw;
                if this.sleep.is_none() {
                    let now = clock.now();
                    let limit = match budget {
                        Some(end) if end.saturating_duration_since(now) < call_timeout => {
                            *this.by_budget = true;
                            end.saturating_duration_since(now)
                        }
                        _ => call_timeout,
                    };
                    this.sleep
                        .set(Some(clock.sleep_until(now.saturating_add(limit))));
                }
                let timer = this.sleep.as_mut().as_pin_mut().expect("armed just above");
                if timer.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Out of time: the call is dropped now. Out of
                // `call_timeout`, a failure of the system; cut short by the
                // caller's budget, nothing is recorded.
                this.fut.set(None);
                this.sleep.set(None);
                let outcome = if *this.by_budget {
                    Outcome::Ignored
                } else {
                    Outcome::Failure
                };
                if let Some(raw) = take_raw(this.raw) {
                    breaker.finish(raw, outcome);
                }
                *this.held = false;
                bulkhead.release(1);
                *this.stage = Stage::Done;
                #[cfg(feature = "tracing")]
                tracing::debug!(
                    system = name,
                    reason = "deadline_exceeded",
                    by_budget = *this.by_budget,
                    "policy call ran out of time"
                );
                return fail(ErrorKind::DeadlineExceeded);
            }
        };
        this.fut.set(None);
        this.sleep.set(None);
        let classify = this.classify.take().expect("classifier taken once");
        let outcome = fail_on_unwind(breaker, raw, || classify.judge(&result));
        if let Some(raw) = raw {
            breaker.finish(raw, outcome);
        }
        *this.held = false;
        bulkhead.release(1);
        *this.stage = Stage::Done;
        Poll::Ready(result.map_err(|e| Error::new(name, ErrorKind::Call(e))))
    }
}

/// Starts a slot wait of `wait`; `None` means "wait".
fn start_wait<'b, C: Timer>(
    bulkhead: &'b Bulkhead<C>,
    wait: Duration,
    deadline: &mut Instant,
) -> Option<Result<crate::Permit<'b, C>, AcquireError>> {
    *deadline = bulkhead.clock().now().saturating_add(wait);
    None
}

/// Polls a slot wait; `Ready(Ok(()))` means the slot is held.
fn poll_wait<C: Timer>(
    bulkhead: &Bulkhead<C>,
    waiter: Pin<&mut SlotWaiter>,
    deadline: Instant,
    sleep: Pin<&mut Option<C::Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    crate::bulkhead::poll_until(bulkhead, waiter, deadline, sleep, cx)
}

/// The policy's error for a slot that was not had.
fn slot_refusal<E>(e: AcquireError) -> ErrorKind<E> {
    match e {
        AcquireError::Closed => ErrorKind::BulkheadClosed,
        _ => ErrorKind::BulkheadFull,
    }
}

/// Starts the call if it is not started yet, and polls it.
fn poll_call<D: Dispatch>(
    dispatch: &mut D,
    mut fut: Pin<&mut Option<D::Future>>,
    cx: &mut Context<'_>,
) -> Poll<OutputOf<D>> {
    if fut.is_none() {
        match core::task::ready!(dispatch.poll_dispatch(cx)) {
            Ok(started) => fut.set(Some(started)),
            Err(output) => return Poll::Ready(output),
        }
    }
    fut.as_pin_mut().expect("started just above").poll(cx)
}

impl<R: Handle, D: Dispatch, K> fmt::Debug for PolicyCall<R, D, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyCall")
            .field("stage", &self.stage)
            .field("slot_held", &self.held)
            .field("running", &self.fut.is_some())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// Retries: retry ⊃ bulkhead ⊃ breaker ⊃ deadline.

/// How many retries a policy has made, and why, and how often its budget
/// said no ([`Policy::retry_metrics`]).
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
///
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let m = p.retry_metrics();
/// assert_eq!((m.after_failure, m.after_timeout, m.budget_exhausted), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetryMetrics {
    /// Retries of a call that failed.
    pub after_failure: usize,
    /// Retries of a call that ran out of its call timeout.
    pub after_timeout: usize,
    /// Failed calls the budget did not let retry.
    pub budget_exhausted: usize,
}

impl<C, const N: usize, W, B> Policy<C, N, W, B> {
    /// The retry counts (see [`RetryMetrics`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// ```
    pub fn retry_metrics(&self) -> RetryMetrics {
        let r = &self.retry;
        RetryMetrics {
            after_failure: r.after_failure.load(Ordering::Relaxed),
            after_timeout: r.after_timeout.load(Ordering::Relaxed),
            budget_exhausted: r.budget_exhausted.load(Ordering::Relaxed),
        }
    }

    /// The system's retry budget, shared by every idempotent call through
    /// this policy.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_budget().tokens(), 10.0);
    /// ```
    pub fn retry_budget(&self) -> &RetryBudget {
        &self.retry.budget
    }

    /// The retry config.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_config().max_attempts(), 2);
    /// ```
    pub fn retry_config(&self) -> &RetryConfig {
        &self.retry.config
    }
}

impl<C, const N: usize, W: WindowStorage, B> Policy<C, N, W, B> {
    /// Like [`call`](Self::call), for a call that is safe to make twice:
    /// a failure or a call timeout is retried, each attempt through the
    /// whole policy again (its own slot, the breaker, its own timeout), up
    /// to the config's attempts, after a backoff with full jitter, while
    /// the retry budget allows. A refusal by the policy (bulkhead full,
    /// breaker open, budget spent) is never retried, nor a success.
    ///
    /// `make` is called once per attempt. Add a request budget with
    /// [`within`](Retrying::within), a classifier with
    /// [`classify`](Retrying::classify), a server's `Retry-After` with
    /// [`retry_after`](Retrying::retry_after).
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call): the last attempt's error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the attempt in flight (as dropping a
    /// [`PolicyCall`] does: its slot goes back, the breaker records
    /// nothing) or the backoff sleep (no slot is held during it), and
    /// records nothing in the budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::cell::Cell;
    /// use core::future::IntoFuture;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let tries = Cell::new(0);
    /// let mut call = core::pin::pin!(p.call_idempotent(|| {
    ///     tries.set(tries.get() + 1);
    ///     let n = tries.get();
    ///     async move { if n == 1 { Err("reset by peer") } else { Ok("hits") } }
    /// }).into_future());
    /// // The first attempt fails; the retry waits its backoff (at most 50 ms).
    /// assert!(futures_lite::future::poll_once(call.as_mut()).await.is_none());
    /// clock.advance(core::time::Duration::from_millis(50));
    /// assert_eq!(call.await, Ok("hits"));
    /// assert_eq!(tries.get(), 2);
    /// # });
    /// ```
    pub fn call_idempotent<F, Fut, T, E>(
        &self,
        make: F,
    ) -> Retrying<'_, C, N, W, B, F, ErrIsFailure<T, E>, NoHint>
    where
        C: Timer,
        B: Clock,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        Retrying {
            policy: self,
            budget: None,
            make,
            classify: err_is_failure,
            hint: NoHint,
        }
    }
}

/// No `Retry-After` hint: the backoff is the config's.
///
/// # Examples
///
/// ```
/// use watertight::policy::{NoHint, RetryHint};
/// assert_eq!(RetryHint::<&str>::retry_after(&mut NoHint, &"busy"), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHint;

/// A hint from the call's error: how long to wait before the retry.
/// Any `FnMut(&E) -> Option<Duration>` is one.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::policy::RetryHint;
///
/// let mut hint = |status: &u16| (*status == 503).then_some(Duration::from_secs(2));
/// assert_eq!(hint.retry_after(&503), Some(Duration::from_secs(2)));
/// assert_eq!(hint.retry_after(&500), None);
/// ```
pub trait RetryHint<E> {
    /// `Some(d)`: wait `d` (a server's `Retry-After`) instead of the
    /// jittered backoff. `None`: the backoff.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::RetryHint;
    /// let mut never = |_: &()| None::<Duration>;
    /// assert_eq!(never.retry_after(&()), None);
    /// ```
    fn retry_after(&mut self, error: &E) -> Option<Duration>;
}

impl<E> RetryHint<E> for NoHint {
    fn retry_after(&mut self, _: &E) -> Option<Duration> {
        None
    }
}

impl<E, H: FnMut(&E) -> Option<Duration>> RetryHint<E> for H {
    fn retry_after(&mut self, error: &E) -> Option<Duration> {
        self(error)
    }
}

/// A retrying call, before it starts: [`Policy::call_idempotent`]'s value.
/// Set its options, then `.await` it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::Outcome;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let request = Deadline::after(&clock, Duration::from_millis(1500));
/// let hits = p
///     .call_idempotent(|| async { Ok::<_, u16>("hits") })
///     .within(&request)
///     .classify(|r: &Result<&str, u16>| match r {
///         Err(404) => Outcome::Success, // the system answered
///         Err(_) => Outcome::Failure,
///         Ok(_) => Outcome::Success,
///     })
///     .retry_after(|status: &u16| (*status == 503).then(|| Duration::from_secs(1)))
///     .await;
/// assert_eq!(hits, Ok("hits"));
/// # });
/// ```
#[must_use = "a retrying call does nothing until it is awaited"]
pub struct Retrying<'p, C, const N: usize, W, B, F, K, H> {
    policy: &'p Policy<C, N, W, B>,
    budget: Option<Instant>,
    make: F,
    classify: K,
    hint: H,
}

impl<C, const N: usize, W, B, F, K, H> fmt::Debug for Retrying<'_, C, N, W, B, F, K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrying")
            .field("system", &self.policy.bulkhead.name())
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<'p, C, const N: usize, W, B, F, K, H> Retrying<'p, C, N, W, B, F, K, H> {
    /// Within a request budget: no attempt runs past it, no backoff sleeps
    /// past it, and no attempt starts with less than the config's
    /// [`min_attempt_time`](RetryConfig::min_attempt_time) of it left.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let request = Deadline::after(&clock, Duration::from_millis(30));
    /// // 30 ms left is under the 50 ms an attempt needs: no retry.
    /// let r = p.call_idempotent(|| async { Err::<(), _>("reset") }).within(&request).await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some("reset"));
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// # });
    /// ```
    pub fn within(mut self, budget: &Deadline<C>) -> Self
    where
        C: Clock,
    {
        self.budget = Some(budget.instant());
        self
    }

    /// With a classifier (called once or twice per attempt: keep it pure).
    /// Only what it calls a [`Failure`](Outcome::Failure) is retried.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// // A 404 is an answer, not a failure: not retried.
    /// let r = p
    ///     .call_idempotent(|| async { Err::<(), u16>(404) })
    ///     .classify(|r: &Result<(), u16>| if matches!(r, Err(404)) { Outcome::Success } else { Outcome::Failure })
    ///     .await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some(404));
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> Retrying<'p, C, N, W, B, F, K2, H> {
        Retrying {
            policy: self.policy,
            budget: self.budget,
            make: self.make,
            classify,
            hint: self.hint,
        }
    }

    /// With a hint from the error: `Some(d)` waits `d` before the retry
    /// (a server's `Retry-After`) instead of the jittered backoff; still
    /// never past the request budget.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let request = Deadline::after(&clock, Duration::from_secs(1));
    /// // The server says: come back in 5 s. The request cannot wait that long.
    /// let r = p
    ///     .call_idempotent(|| async { Err::<(), u16>(503) })
    ///     .retry_after(|_: &u16| Some(Duration::from_secs(5)))
    ///     .within(&request)
    ///     .await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some(503));
    /// # });
    /// ```
    pub fn retry_after<H2>(self, hint: H2) -> Retrying<'p, C, N, W, B, F, K, H2> {
        Retrying {
            policy: self.policy,
            budget: self.budget,
            make: self.make,
            classify: self.classify,
            hint,
        }
    }
}

impl<'p, C, const N: usize, W, B, F, Fut, T, E, K, H> core::future::IntoFuture
    for Retrying<'p, C, N, W, B, F, K, H>
where
    C: Timer,
    W: WindowStorage,
    B: Clock,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    K: Fn(&Result<T, E>) -> Outcome + Clone,
    H: RetryHint<E>,
{
    type Output = Result<T, Error<E>>;
    type IntoFuture = RetryCall<&'p Policy<C, N, W, B>, MakeMut<F>, K, H>;

    fn into_future(self) -> Self::IntoFuture {
        RetryCall::new(
            self.policy,
            self.budget,
            MakeMut(Some(self.make)),
            self.classify,
            self.hint,
        )
    }
}

/// Starts an attempt by calling the closure, which it keeps (so that the
/// retry can take it back for the next attempt): the `D` of the
/// [`RetryCall`] that [`Policy::call_idempotent`] makes.
///
/// # Examples
///
/// ```
/// use core::future::{IntoFuture, Ready};
/// use watertight::clock::ManualClock;
/// use watertight::futures::RetryCall;
/// use watertight::policy::{MakeMut, NoHint, Policy, PolicyConfig};
///
/// type Lookup<'p> = RetryCall<
///     &'p Policy<&'p ManualClock>,
///     MakeMut<fn() -> Ready<Result<u32, ()>>>,
///     watertight::breaker::ErrIsFailure<u32, ()>,
///     NoHint,
/// >;
/// let clock = ManualClock::new();
/// let p = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
/// let call: Lookup<'_> = p.call_idempotent((|| core::future::ready(Ok(7))) as fn() -> _).into_future();
/// assert_eq!(futures_lite::future::block_on(call), Ok(7));
/// ```
#[derive(Debug)]
pub struct MakeMut<F>(Option<F>);

impl<F: FnMut() -> Fut, Fut: Future> Dispatch for MakeMut<F> {
    type Future = Fut;
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self
            .0
            .as_mut()
            .expect("the closure is back before each attempt");
        Poll::Ready(Ok(make()))
    }
}

impl<F: FnMut() -> Fut, Fut: Future> Redispatch for MakeMut<F> {
    fn take_back(&mut self) -> Self {
        MakeMut(self.0.take())
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`Retrying`] call (and of the tower
    /// [`IdempotentPolicyService`](crate::tower::IdempotentPolicyService)):
    /// attempts through the policy and the backoff sleeps between them. `R`
    /// reaches the policy, `D` starts each attempt (a closure, or a clone
    /// of a request sent to a tower service), `K` classifies, `H` reads a
    /// `Retry-After` hint.
    ///
    /// # Cancel safety
    ///
    /// See [`Policy::call_idempotent`].
    ///
    /// # Examples
    ///
    /// Named, so it can sit in a struct without a box:
    ///
    /// ```
    /// use core::future::{IntoFuture, Ready};
    /// use watertight::breaker::ErrIsFailure;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{MakeMut, NoHint, Policy, PolicyConfig, RetryCall};
    ///
    /// type Lookup<'p> = RetryCall<
    ///     &'p Policy<&'p ManualClock>,
    ///     MakeMut<fn() -> Ready<Result<u32, ()>>>,
    ///     ErrIsFailure<u32, ()>,
    ///     NoHint,
    /// >;
    ///
    /// let clock = ManualClock::new();
    /// let stock = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
    /// let make: fn() -> Ready<Result<u32, ()>> = || core::future::ready(Ok(7));
    /// let call: Lookup<'_> = stock.call_idempotent(make).into_future();
    /// assert_eq!(futures_lite::future::block_on(call), Ok(7));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RetryCall<R: Handle, D: Dispatch, K, H> {
        policy: R,
        budget: Option<Instant>,
        classify: K,
        hint: H,
        attempts: u32,
        // What starts the next attempt, between attempts.
        next: Option<D>,
        #[pin]
        attempt: Option<PolicyCall<R, D, K>>,
        #[pin]
        backoff: Option<SleepOf<R>>,
    }
}

impl<R: Handle + Clone, D: Dispatch, K: Clone, H> RetryCall<R, D, K, H> {
    /// The call before its first attempt: nothing is taken until it is
    /// polled.
    pub(crate) fn new(
        policy: R,
        budget: Option<Instant>,
        dispatch: D,
        classify: K,
        hint: H,
    ) -> Self {
        let first = PolicyCall::new(policy.clone(), budget, dispatch, classify.clone());
        RetryCall {
            policy,
            budget,
            classify,
            hint,
            attempts: 1,
            next: None,
            attempt: Some(first),
            backoff: None,
        }
    }
}

impl<R: Handle, D: Dispatch, K, H> fmt::Debug for RetryCall<R, D, K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryCall")
            .field("system", &self.policy.parts().bulkhead.name())
            .field("attempts", &self.attempts)
            .field("backing_off", &self.backoff.is_some())
            .finish_non_exhaustive()
    }
}

/// Why an attempt is retried: the label of `retries_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryReason {
    Failure,
    Timeout,
}

impl<R, D, T, E, K, H> Future for RetryCall<R, D, K, H>
where
    R: Handle + Clone,
    D: Redispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Judge<Result<T, E>> + Clone,
    H: RetryHint<E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Borrowed, not cloned: an `Arc` handle is cloned only for a new attempt.
        let handle: &R = this.policy;
        let parts = handle.parts();
        let (retry, clock) = (parts.retry, parts.clock);
        #[cfg(feature = "tracing")]
        let name = parts.bulkhead.name();
        loop {
            if let Some(sleep) = this.backoff.as_mut().as_pin_mut() {
                core::task::ready!(sleep.poll(cx));
                this.backoff.set(None);
                *this.attempts += 1;
                let next = this
                    .next
                    .take()
                    .expect("the dispatch is back before each attempt");
                this.attempt.set(Some(PolicyCall::new(
                    handle.clone(),
                    *this.budget,
                    next,
                    this.classify.clone(),
                )));
            }
            let mut call = this
                .attempt
                .as_mut()
                .as_pin_mut()
                .expect("`RetryCall` polled after completion");
            let out = core::task::ready!(call.as_mut().poll(cx));
            let next = call.dispatch_mut().take_back();
            this.attempt.set(None);

            // What the attempt says about the system, and whether to retry.
            let (out, reason) = match out {
                // An answer the classifier calls a failure (an HTTP client's
                // `Ok(503)`) is retried like an error.
                Ok(v) => {
                    let judged: Result<T, E> = Ok(v);
                    let outcome = this.classify.clone().judge(&judged);
                    let Ok(v) = judged else {
                        unreachable!("made as an answer just above")
                    };
                    match outcome {
                        Outcome::Failure => (Ok(v), RetryReason::Failure),
                        Outcome::Success => {
                            retry.budget.succeeded();
                            return Poll::Ready(Ok(v));
                        }
                        _ => return Poll::Ready(Ok(v)),
                    }
                }
                Err(Error {
                    system,
                    kind: ErrorKind::Call(e),
                }) => {
                    let judged: Result<T, E> = Err(e);
                    let outcome = this.classify.clone().judge(&judged);
                    let Err(e) = judged else {
                        unreachable!("made as an error just above")
                    };
                    let err = Error::new(system, ErrorKind::Call(e));
                    match outcome {
                        Outcome::Failure => (Err(err), RetryReason::Failure),
                        Outcome::Success => {
                            retry.budget.succeeded();
                            return Poll::Ready(Err(err));
                        }
                        _ => return Poll::Ready(Err(err)),
                    }
                }
                Err(err) if matches!(err.kind(), ErrorKind::DeadlineExceeded) => {
                    let now = clock.now();
                    // Out of the request's budget, not the call timeout:
                    // nothing to say about the system, no time to retry.
                    if this.budget.is_some_and(|end| now >= end) {
                        return Poll::Ready(Err(err));
                    }
                    (Err(err), RetryReason::Timeout)
                }
                // A refusal by the policy's own layers: stop.
                Err(err) => return Poll::Ready(Err(err)),
            };

            // A retryable failure: it takes its token whatever comes next.
            if *this.attempts >= retry.config.max_attempts() {
                retry.budget.failed();
                return Poll::Ready(out);
            }
            let now = clock.now();
            let hinted = match &out {
                Err(Error {
                    kind: ErrorKind::Call(e),
                    ..
                }) => this.hint.retry_after(e),
                _ => None,
            };
            let wait = hinted
                .unwrap_or_else(|| retry.jitter.up_to(retry.config.backoff_cap(*this.attempts)));
            let start = now.saturating_add(wait);
            if let Some(end) = *this.budget {
                if end.saturating_duration_since(start) < retry.config.min_attempt_time() {
                    retry.budget.failed();
                    return Poll::Ready(out);
                }
            }
            if !retry.budget.failed_may_retry() {
                retry.budget_exhausted.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "tracing")]
                tracing::debug!(
                    system = name,
                    "retry budget exhausted: the failed call is not retried"
                );
                return Poll::Ready(out);
            }
            match reason {
                RetryReason::Failure => &retry.after_failure,
                RetryReason::Timeout => &retry.after_timeout,
            }
            .fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::info!(
                system = name,
                reason = match reason {
                    RetryReason::Failure => "failure",
                    RetryReason::Timeout => "timeout",
                },
                attempt = *this.attempts + 1,
                backoff_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "retrying a call"
            );
            *this.next = Some(next);
            this.backoff.set(Some(clock.sleep_until(start)));
        }
    }
}
