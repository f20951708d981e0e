//! What a policy call returns when it does not return the system's answer.

use core::convert::Infallible;
use core::fmt;
use core::time::Duration;

use crate::breaker::Rejection;
use crate::throttle::Throttled;

/// Why a call made through a [`Policy`](super::Policy) did not return the system's answer.
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
    /// The policy's client-side adaptive throttle
    /// ([`PolicyConfigBuilder::throttle`](super::PolicyConfigBuilder::throttle))
    /// refused this attempt locally: the system has been accepting much
    /// less than it is sent. Checked first: no cell, no slot was taken and
    /// the call was not made. Not retried.
    Throttled(Throttled),
    /// The policy's rate limit ([`PolicyConfigBuilder::rate`](super::PolicyConfigBuilder::rate))
    /// had no cell for this attempt: it is checked first, so no slot was
    /// taken and the breaker was not asked. `retry_after` is the limiter's
    /// exact hint: a cell conforms then, if nobody else takes it first.
    RateLimited {
        /// How long until a cell conforms.
        retry_after: Duration,
    },
    /// All slots were taken and none came free within the slot wait (or the
    /// request budget), or the [bound on waiters](super::PolicyConfigBuilder::max_waiters)
    /// was reached and the call was refused without waiting. The breaker
    /// was not asked and records nothing. Which of these it was is in the
    /// bulkhead's counters (`rejected_full`, `rejected_timed_out`,
    /// `rejected_queue_full`) and its trace event's `reason`: to a caller
    /// they are one answer (the system has no room for this call now, with
    /// no better `Retry-After` to give), so one kind.
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
    /// `redis::GlobalBulkhead`, feature `redis`)
    /// could not be reached, and its fallback refuses calls.
    StoreUnavailable,
    /// The call ran and returned this error.
    Call(E),
}

/// The error of [`Policy::call`](super::Policy::call): which layer refused, or the call's own
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
    pub(super) system: &'static str,
    pub(super) kind: ErrorKind<E>,
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
    /// because it is open, or until the rate limit has a cell, when it
    /// refused: a server's `Retry-After`.
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
    /// assert_eq!(err.retry_after(), None); // only an open breaker or the rate limit gives one
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
    ///
    /// // A rate limit of 4 a second, one at a time: the next cell in 250 ms.
    /// let rate = watertight::rate::Quota::per_second(4).burst(1);
    /// let p: Policy<_> = Policy::new("stock", PolicyConfig::builder(1).rate(rate).build().unwrap(), &clock).unwrap();
    /// assert!(p.call(|| async { Ok::<(), &str>(()) }).await.is_ok());
    /// let err = p.call(|| async { Ok::<(), &str>(()) }).await.unwrap_err();
    /// assert_eq!(err.retry_after(), Some(core::time::Duration::from_millis(250)));
    /// assert_eq!(err.to_string(), "stock unavailable: rate limited, retry after 250ms");
    /// # });
    /// ```
    pub const fn retry_after(&self) -> Option<Duration> {
        match &self.kind {
            ErrorKind::CircuitOpen(r) => r.retry_after(),
            ErrorKind::RateLimited { retry_after } => Some(*retry_after),
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

    /// The refusal, with the same system and kind, or the call's own
    /// error, as it was: [`Refused`](crate::fallback::Refused)'s split.
    pub(crate) fn into_refusal(self) -> Result<Error<Infallible>, Self> {
        match self.kind.refusal() {
            Ok(kind) => Ok(Error::new(self.system, kind)),
            Err(e) => Err(Error::new(self.system, ErrorKind::Call(e))),
        }
    }
}

impl Error<Infallible> {
    /// This refusal as the error of a call that fails with `E`.
    pub(crate) fn widen<E>(self) -> Error<E> {
        match self.kind.refusal() {
            Ok(kind) => Error::new(self.system, kind),
            Err(never) => match never {},
        }
    }
}

impl<E> ErrorKind<E> {
    /// The same refusal for a call of any error type, or the call's error.
    fn refusal<F>(self) -> Result<ErrorKind<F>, E> {
        Ok(match self {
            ErrorKind::Throttled(t) => ErrorKind::Throttled(t),
            ErrorKind::RateLimited { retry_after } => ErrorKind::RateLimited { retry_after },
            ErrorKind::BulkheadFull => ErrorKind::BulkheadFull,
            ErrorKind::BulkheadClosed => ErrorKind::BulkheadClosed,
            ErrorKind::CircuitOpen(r) => ErrorKind::CircuitOpen(r),
            ErrorKind::DeadlineExceeded => ErrorKind::DeadlineExceeded,
            ErrorKind::StoreUnavailable => ErrorKind::StoreUnavailable,
            ErrorKind::Call(e) => return Err(e),
        })
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let system = self.system;
        match &self.kind {
            ErrorKind::RateLimited { retry_after } => {
                write!(
                    f,
                    "{system} unavailable: rate limited, retry after {retry_after:?}"
                )
            }
            ErrorKind::Throttled(t) => write!(f, "{system} unavailable: {t}"),
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
            ErrorKind::Throttled(t) => Some(t),
            ErrorKind::Call(e) => Some(e),
            _ => None,
        }
    }
}
