use core::fmt;

/// Why a bulkhead did not grant a permit.
///
/// `Full`, `TimedOut`, `Closed` and `QueueFull` are *rejections*: the bulkhead is doing its
/// job, and the caller should fail fast (a 503, a cached answer, a fallback).
/// `ExceedsCapacity` is an error in the request itself and is never counted as
/// a rejection.
///
/// # Examples
///
/// ```
/// use watertight::{AcquireError, Bulkhead};
/// use watertight::clock::StdClock;
///
/// let b = Bulkhead::new("ml", 2, StdClock);
/// assert!(AcquireError::Full.is_rejection());
/// let err = b.try_acquire_many(3).unwrap_err();
/// assert!(!err.is_rejection());
/// assert_eq!(err.to_string(), "requested 3 permits but the bulkhead has only 2");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// No permit was free (or tasks were already waiting for one) and the
    /// caller would not wait.
    Full,
    /// The caller waited until its deadline and no permit came free.
    TimedOut,
    /// The bulkhead was closed.
    Closed,
    /// The caller would have waited, but the bulkhead's
    /// [bound on waiters](crate::Bulkhead::with_max_waiters) was reached:
    /// refused at once, without waiting.
    QueueFull,
    /// More permits were requested than the bulkhead has; waiting could never
    /// succeed, so the request fails at once.
    ExceedsCapacity {
        /// Permits asked for.
        requested: usize,
        /// The capacity at the time.
        capacity: usize,
    },
}

impl AcquireError {
    /// Whether this is a rejection (`Full`, `TimedOut`, `Closed`,
    /// `QueueFull`): the system
    /// is unavailable to this caller right now.
    pub fn is_rejection(&self) -> bool {
        !matches!(self, AcquireError::ExceedsCapacity { .. })
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Full => f.write_str("bulkhead full"),
            AcquireError::TimedOut => f.write_str("timed out waiting for a bulkhead permit"),
            AcquireError::Closed => f.write_str("bulkhead closed"),
            AcquireError::QueueFull => f.write_str("bulkhead wait queue full"),
            AcquireError::ExceedsCapacity {
                requested,
                capacity,
            } => write!(
                f,
                "requested {requested} permits but the bulkhead has only {capacity}"
            ),
        }
    }
}

impl core::error::Error for AcquireError {}

/// A bulkhead capacity (or bound on waiters) that cannot be used.
///
/// # Examples
///
/// ```
/// use watertight::{Bulkhead, ConfigError};
/// use watertight::clock::StdClock;
///
/// let err = Bulkhead::try_new("x", usize::MAX, StdClock).unwrap_err();
/// assert!(matches!(err, ConfigError::CapacityTooLarge { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// A capacity of zero would refuse every call.
    ZeroCapacity,
    /// The capacity is above what the state word can hold on this target.
    CapacityTooLarge {
        /// The capacity asked for.
        requested: usize,
        /// `Bulkhead::MAX_PERMITS` on this target.
        max: usize,
    },
    /// The bound on waiters is above
    /// [`Bulkhead::MAX_WAITERS`](crate::Bulkhead::MAX_WAITERS).
    MaxWaitersTooLarge {
        /// The bound asked for.
        requested: usize,
        /// `Bulkhead::MAX_WAITERS` on this target.
        max: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroCapacity => f.write_str("bulkhead capacity must be at least 1"),
            ConfigError::CapacityTooLarge { requested, max } => write!(
                f,
                "bulkhead capacity {requested} is above the maximum of {max}"
            ),
            ConfigError::MaxWaitersTooLarge { requested, max } => write!(
                f,
                "bulkhead max_waiters {requested} is above the maximum of {max}"
            ),
        }
    }
}

impl core::error::Error for ConfigError {}
