//! Why a breaker refused a call, and the error of a wrapped call.

use core::fmt;
use core::time::Duration;

/// A call the breaker did not let through, and why.
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker, Rejection};
/// use watertight::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let breaker: CircuitBreaker<_, 64> = CircuitBreaker::new("payments", BreakerConfig::DEFAULT, &clock);
/// breaker.force_open();
/// assert_eq!(breaker.try_acquire().unwrap_err(), Rejection::ForcedOpen);
/// assert_eq!(Rejection::ForcedOpen.retry_after(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// The breaker is open: the system is failing. No call passes until the
    /// open wait ends, `retry_after` from now.
    Open {
        /// How long until a probe may pass: what a server can send as
        /// `Retry-After`.
        retry_after: Duration,
    },
    /// The breaker is half-open and this episode's probes are all taken.
    /// There is no hint: the probes decide, and they may reopen it.
    ProbesBusy,
    /// The breaker was forced open by an operator
    /// ([`force_open`](super::CircuitBreaker::force_open)).
    ForcedOpen,
}

impl Rejection {
    /// How long until a probe may pass, when the breaker is open.
    pub const fn retry_after(&self) -> Option<Duration> {
        match *self {
            Rejection::Open { retry_after } => Some(retry_after),
            _ => None,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Open { retry_after } => {
                write!(f, "circuit open, retry after {retry_after:?}")
            }
            Rejection::ProbesBusy => f.write_str("circuit half-open, probes busy"),
            Rejection::ForcedOpen => f.write_str("circuit forced open"),
        }
    }
}

impl core::error::Error for Rejection {}

/// The error of a call made through [`CircuitBreaker::call`](super::CircuitBreaker::call):
/// the breaker refused it, or the call ran and returned its own error.
///
/// # Examples
///
/// ```
/// use watertight::{CallError, Rejection};
///
/// let e: CallError<&str> = CallError::Failed("503");
/// assert_eq!(e.into_inner(), Some("503"));
/// let r: CallError<&str> = CallError::Rejected(Rejection::ProbesBusy);
/// assert!(r.is_rejected());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallError<E> {
    /// The breaker did not let the call through; the call did not run.
    Rejected(Rejection),
    /// The call ran and returned this error.
    Failed(E),
}

impl<E> CallError<E> {
    /// Whether the breaker refused the call.
    pub const fn is_rejected(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }

    /// The refusal, if the breaker refused.
    pub const fn rejection(&self) -> Option<Rejection> {
        match self {
            CallError::Rejected(r) => Some(*r),
            CallError::Failed(_) => None,
        }
    }

    /// How long until a probe may pass, if the breaker refused because it is
    /// open.
    pub const fn retry_after(&self) -> Option<core::time::Duration> {
        match self {
            CallError::Rejected(r) => r.retry_after(),
            CallError::Failed(_) => None,
        }
    }

    /// The call's own error, if it ran and failed.
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Rejected(_) => None,
            CallError::Failed(e) => Some(e),
        }
    }
}

impl<E> From<Rejection> for CallError<E> {
    fn from(r: Rejection) -> Self {
        CallError::Rejected(r)
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(r) => fmt::Display::fmt(r, f),
            CallError::Failed(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Failed(e) => Some(e),
        }
    }
}
