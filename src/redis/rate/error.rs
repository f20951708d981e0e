//! A client key as Redis stores it, and what the global rate limiter can
//! fail with.

use std::string::String;

use core::fmt;
use core::time::Duration;

use super::config::GlobalRateConfigError;
use crate::redis::StoreFailure;

/// One client's limit of a [`GlobalRateLimiter`](super::GlobalRateLimiter)
/// (an API key, a user, an IP address), checked once and encoded for Redis:
/// any bytes up to [`MAX_LEN`](Self::MAX_LEN) make a key, and no bytes can
/// break out of the limiter's names in Redis.
///
/// Letters, digits and `-._~:/@+=` are kept as they are (so keys stay
/// readable in `redis-cli`); every other byte, `%` included, is written
/// `%XX`. The encoding is one-to-one: two different keys never share a
/// limit. The system's hash tag `{name}` comes first in every Redis key,
/// so a `{` or `}` in a client key could not move it to another Cluster
/// slot anyway; it is encoded all the same.
///
/// [`RateKey::whole`] is the system's one unkeyed limit.
///
/// # Examples
///
/// ```
/// use watertight::redis::{RateKey, RateKeyError};
///
/// let ip = RateKey::new("203.0.113.7").unwrap();
/// assert_eq!(ip.encoded(), Some("203.0.113.7"));
/// let odd = RateKey::new(b"a{b}\n%").unwrap();
/// assert_eq!(odd.encoded(), Some("a%7Bb%7D%0A%25"));
/// assert_eq!(RateKey::new(""), Err(RateKeyError::Empty));
/// assert_eq!(RateKey::new([b'x'; 300]), Err(RateKeyError::TooLong { len: 300 }));
/// assert_eq!(RateKey::whole().encoded(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RateKey {
    encoded: Option<String>,
}

impl RateKey {
    /// The longest key, in bytes before encoding.
    pub const MAX_LEN: usize = 256;

    /// The limit of client `key`.
    ///
    /// # Errors
    ///
    /// [`RateKeyError::Empty`] for no bytes (most often a header that was
    /// missing), [`RateKeyError::TooLong`] above [`MAX_LEN`](Self::MAX_LEN)
    /// bytes (a client must not choose how much Redis memory its key takes).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::RateKey;
    ///
    /// let user = RateKey::new(format!("user:{}", 42)).unwrap();
    /// assert_eq!(user.encoded(), Some("user:42"));
    /// ```
    pub fn new(key: impl AsRef<[u8]>) -> Result<RateKey, RateKeyError> {
        let key = key.as_ref();
        if key.is_empty() {
            return Err(RateKeyError::Empty);
        }
        if key.len() > Self::MAX_LEN {
            return Err(RateKeyError::TooLong { len: key.len() });
        }
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let mut encoded = String::with_capacity(key.len());
        for &b in key {
            if b.is_ascii_alphanumeric() || b"-._~:/@+=".contains(&b) {
                encoded.push(char::from(b));
            } else {
                encoded.push('%');
                encoded.push(char::from(HEX[usize::from(b >> 4)]));
                encoded.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        Ok(RateKey {
            encoded: Some(encoded),
        })
    }

    /// The system's one limit, for every caller: the unkeyed form.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::RateKey;
    ///
    /// assert_eq!(RateKey::whole(), RateKey::whole());
    /// assert_ne!(RateKey::whole(), RateKey::new("x").unwrap());
    /// ```
    pub const fn whole() -> RateKey {
        RateKey { encoded: None }
    }

    /// The key as it appears in Redis (after `watertight:{name}:rate:`);
    /// `None` for [`whole`](Self::whole) (whose Redis key is
    /// `watertight:{name}:rate`).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::RateKey;
    ///
    /// assert_eq!(RateKey::new("a b").unwrap().encoded(), Some("a%20b"));
    /// ```
    pub fn encoded(&self) -> Option<&str> {
        self.encoded.as_deref()
    }
}

/// Why bytes could not make a [`RateKey`].
///
/// # Examples
///
/// ```
/// use watertight::redis::{RateKey, RateKeyError};
///
/// let err = RateKey::new(vec![0u8; 1000]).unwrap_err();
/// assert_eq!(err, RateKeyError::TooLong { len: 1000 });
/// assert_eq!(err.to_string(), "rate key of 1000 bytes, above the 256-byte maximum");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RateKeyError {
    /// No bytes.
    Empty,
    /// More than [`RateKey::MAX_LEN`] bytes.
    TooLong {
        /// The key's length in bytes.
        len: usize,
    },
}

impl fmt::Display for RateKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateKeyError::Empty => f.write_str("empty rate key"),
            RateKeyError::TooLong { len } => write!(
                f,
                "rate key of {len} bytes, above the {}-byte maximum",
                RateKey::MAX_LEN
            ),
        }
    }
}

impl core::error::Error for RateKeyError {}

/// Why a [`GlobalRateLimiter`](super::GlobalRateLimiter) could not be made.
///
/// # Examples
///
/// ```
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateBuildError, GlobalRateConfig, GlobalRateLimiter};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
/// let err = GlobalRateLimiter::connect("mysql://db", "api", config).unwrap_err();
/// assert!(matches!(err, GlobalRateBuildError::BadUrl(_)));
/// let err = GlobalRateLimiter::connect("redis://127.0.0.1", "a{b}", config).unwrap_err();
/// assert!(matches!(err, GlobalRateBuildError::BadName { .. }));
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalRateBuildError {
    /// The URL is not a Redis URL redis-rs can open (for a cluster: no
    /// URL, a Unix socket, or nodes that disagree on password, protocol or
    /// TLS).
    BadUrl(::redis::RedisError),
    /// The system's name is empty, above 128 bytes, or holds `{`, `}` (which
    /// would break the keys' hash tag) or a control character.
    BadName {
        /// The name given.
        name: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The config does not make a breaker for Redis.
    Config(GlobalRateConfigError),
    /// Not called inside a runtime that can spawn the limiter's tasks (on
    /// tokio: outside a tokio runtime).
    NoRuntime,
}

impl fmt::Display for GlobalRateBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalRateBuildError::BadUrl(e) => write!(f, "bad Redis URL: {e}"),
            GlobalRateBuildError::BadName { name, reason } => {
                write!(f, "bad system name {name:?}: {reason}")
            }
            GlobalRateBuildError::Config(e) => write!(f, "bad config: {e}"),
            GlobalRateBuildError::NoRuntime => {
                f.write_str("GlobalRateLimiter::connect must be called inside a tokio runtime")
            }
        }
    }
}

impl core::error::Error for GlobalRateBuildError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalRateBuildError::BadUrl(e) => Some(e),
            GlobalRateBuildError::Config(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a [`GlobalRateLimiter`](super::GlobalRateLimiter) did not admit a
/// request.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::GlobalRateError;
///
/// let e = GlobalRateError::Limited { retry_after: Duration::from_millis(5) };
/// assert!(e.is_rejection());
/// assert_eq!(e.retry_after(), Some(Duration::from_millis(5)));
/// assert_eq!(e.cause(), "limited");
/// assert_eq!(e.to_string(), "global rate limited: retry after 5ms");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalRateError {
    /// The cells do not conform yet (fleet-wide, or in the local fallback
    /// while Redis is down); `retry_after` says when they would: exact, in
    /// microseconds of Redis's clock, from when Redis ran the check (the
    /// way back to the caller takes a little of it).
    Limited {
        /// How long until the cells conform.
        retry_after: Duration,
    },
    /// More cells were asked for than the quota's burst: they never
    /// conform, so the request fails at once (not counted as a refusal).
    ExceedsBurst {
        /// Cells asked for.
        requested: u32,
        /// The quota's burst.
        burst: u32,
    },
    /// A waiting form's deadline came while Redis was being asked.
    TimedOut,
    /// Redis could not be reached and the fallback is
    /// [`FailClosed`](super::RateFallback::FailClosed).
    StoreUnavailable(StoreFailure),
    /// The limiter was [closed](super::GlobalRateLimiter::close): it admits
    /// nothing more.
    Closed,
}

impl GlobalRateError {
    /// Whether a later request could be admitted (all but `ExceedsBurst`).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::GlobalRateError;
    ///
    /// assert!(!GlobalRateError::ExceedsBurst { requested: 9, burst: 8 }.is_rejection());
    /// assert!(GlobalRateError::TimedOut.is_rejection());
    /// ```
    pub fn is_rejection(&self) -> bool {
        !matches!(self, GlobalRateError::ExceedsBurst { .. })
    }

    /// When to try again: the exact hint for `Limited`, the breaker's for
    /// a refusal by the open breaker in front of Redis, `None` otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::{GlobalRateError, StoreFailure};
    ///
    /// assert_eq!(GlobalRateError::StoreUnavailable(StoreFailure::TimedOut).retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GlobalRateError::Limited { retry_after } => Some(*retry_after),
            GlobalRateError::StoreUnavailable(StoreFailure::BreakerOpen(r)) => r.retry_after(),
            _ => None,
        }
    }

    /// The cause as the metrics label it: `limited`, `exceeds_burst`,
    /// `timed_out`, `store_unavailable`, `closed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::GlobalRateError;
    ///
    /// assert_eq!(GlobalRateError::TimedOut.cause(), "timed_out");
    /// ```
    pub fn cause(&self) -> &'static str {
        match self {
            GlobalRateError::Limited { .. } => "limited",
            GlobalRateError::ExceedsBurst { .. } => "exceeds_burst",
            GlobalRateError::TimedOut => "timed_out",
            GlobalRateError::StoreUnavailable(_) => "store_unavailable",
            GlobalRateError::Closed => "closed",
        }
    }
}

impl fmt::Display for GlobalRateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalRateError::Limited { retry_after } => {
                write!(f, "global rate limited: retry after {retry_after:?}")
            }
            GlobalRateError::ExceedsBurst { requested, burst } => write!(
                f,
                "requested {requested} cells but the global rate limit's burst is {burst}"
            ),
            GlobalRateError::TimedOut => {
                f.write_str("the deadline came while the global rate limit was asked")
            }
            GlobalRateError::StoreUnavailable(e) => {
                write!(f, "global rate limit unavailable: {e}")
            }
            GlobalRateError::Closed => f.write_str("the global rate limiter was closed"),
        }
    }
}

impl core::error::Error for GlobalRateError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalRateError::StoreUnavailable(e) => Some(e),
            _ => None,
        }
    }
}

crate::fallback::refused_if_rejection!(GlobalRateError);
