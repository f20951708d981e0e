//! What building and using a global bulkhead can fail with.

use core::fmt;
use core::time::Duration;

use super::config::GlobalConfigError;
use crate::breaker::Rejection;
use crate::bulkhead::AcquireError;

/// Why a [`GlobalBulkhead`](super::GlobalBulkhead) could not be made.
///
/// # Examples
///
/// ```
/// use watertight::redis::{GlobalBuildError, GlobalBulkhead, GlobalConfig};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalConfig::builder(20).build().unwrap();
/// let err = GlobalBulkhead::connect("mysql://db", "payments", config).unwrap_err();
/// assert!(matches!(err, GlobalBuildError::BadUrl(_)));
/// let err = GlobalBulkhead::connect("redis://127.0.0.1", "", config).unwrap_err();
/// assert!(matches!(err, GlobalBuildError::BadName { .. }));
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalBuildError {
    /// The URL is not a Redis URL redis-rs can open (for a cluster: no
    /// URL, a Unix socket, or nodes that disagree on password, protocol or
    /// TLS).
    BadUrl(::redis::RedisError),
    /// The system's name is empty, above 128 bytes, or holds a character
    /// that would break the keys' hash tag (`{`, `}`) or a control
    /// character.
    BadName {
        /// The name given.
        name: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The config does not make a breaker for Redis.
    Config(GlobalConfigError),
    /// Not called inside a tokio runtime: the lease keeper is a tokio task.
    NoRuntime,
}

impl fmt::Display for GlobalBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalBuildError::BadUrl(e) => write!(f, "bad Redis URL: {e}"),
            GlobalBuildError::BadName { name, reason } => {
                write!(f, "bad system name {name:?}: {reason}")
            }
            GlobalBuildError::Config(e) => write!(f, "bad config: {e}"),
            GlobalBuildError::NoRuntime => {
                f.write_str("GlobalBulkhead::connect must be called inside a tokio runtime")
            }
        }
    }
}

impl core::error::Error for GlobalBuildError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalBuildError::BadUrl(e) => Some(e),
            GlobalBuildError::Config(e) => Some(e),
            _ => None,
        }
    }
}

/// Why Redis could not answer.
///
/// # Examples
///
/// ```
/// use watertight::redis::StoreFailure;
/// assert_eq!(StoreFailure::TimedOut.to_string(), "Redis did not answer in time");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreFailure {
    /// The command took longer than the store timeout.
    TimedOut,
    /// Redis (or the connection to it) returned an error.
    Redis(::redis::RedisError),
    /// The breaker in front of Redis is open: recent commands failed, and
    /// none is sent until it lets a probe through.
    BreakerOpen(Rejection),
    /// Redis answered something the scripts never return.
    BadReply,
    /// Acknowledged grants ([`GlobalConfigBuilder::acknowledged`](super::GlobalConfigBuilder::acknowledged)):
    /// fewer replicas than asked for had the write when `WAIT` timed out.
    /// A grant is given back; a renewal or refresh counts as failed.
    NotAcknowledged {
        /// Replicas that had it.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
    },
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreFailure::TimedOut => f.write_str("Redis did not answer in time"),
            StoreFailure::Redis(e) => write!(f, "Redis error: {e}"),
            StoreFailure::BreakerOpen(r) => write!(f, "Redis breaker: {r}"),
            StoreFailure::BadReply => f.write_str("Redis gave an unexpected reply"),
            StoreFailure::NotAcknowledged { acked, wanted } => write!(
                f,
                "the write reached {acked} of the {wanted} replicas asked for in time"
            ),
        }
    }
}

impl core::error::Error for StoreFailure {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            StoreFailure::Redis(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a [`GlobalBulkhead`](super::GlobalBulkhead) gave no permit. Each is
/// a rejection: the caller should answer "system unavailable".
///
/// # Examples
///
/// ```
/// use watertight::redis::GlobalError;
/// assert_eq!(GlobalError::Full.to_string(), "global limit reached");
/// assert_eq!(GlobalError::Full.cause(), "full");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalError {
    /// Every slot of the global limit (or of the local share, while Redis
    /// is down) was taken, and the caller would not wait.
    Full,
    /// The caller waited until its deadline and no slot came free.
    TimedOut,
    /// This process's own cap (the local front) refused: Redis was not asked.
    LocalCap(AcquireError),
    /// Redis could not be reached and the fallback is
    /// [`FailClosed`](super::Fallback::FailClosed).
    StoreUnavailable(StoreFailure),
    /// [`close`](super::GlobalBulkhead::close) was called: this process
    /// takes no more slots.
    Closed,
}

impl GlobalError {
    /// The cause as the metrics label it: `full`, `timed_out`, `local_cap`,
    /// `store_unavailable`, `closed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::{GlobalError, StoreFailure};
    /// assert_eq!(GlobalError::StoreUnavailable(StoreFailure::TimedOut).cause(), "store_unavailable");
    /// ```
    pub fn cause(&self) -> &'static str {
        match self {
            GlobalError::Full => "full",
            GlobalError::TimedOut => "timed_out",
            GlobalError::LocalCap(_) => "local_cap",
            GlobalError::StoreUnavailable(_) => "store_unavailable",
            GlobalError::Closed => "closed",
        }
    }

    /// How long until the breaker in front of Redis lets a command through,
    /// when it is why the call was refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::GlobalError;
    /// assert_eq!(GlobalError::TimedOut.retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GlobalError::StoreUnavailable(StoreFailure::BreakerOpen(r)) => r.retry_after(),
            _ => None,
        }
    }
}

impl fmt::Display for GlobalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalError::Full => f.write_str("global limit reached"),
            GlobalError::TimedOut => f.write_str("timed out waiting for a global slot"),
            GlobalError::LocalCap(e) => write!(f, "local cap: {e}"),
            GlobalError::StoreUnavailable(e) => write!(f, "global limit unavailable: {e}"),
            GlobalError::Closed => f.write_str("global bulkhead closed"),
        }
    }
}

impl core::error::Error for GlobalError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalError::LocalCap(e) => Some(e),
            GlobalError::StoreUnavailable(e) => Some(e),
            _ => None,
        }
    }
}

crate::fallback::always_refused!(GlobalError);
