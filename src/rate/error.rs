use core::fmt;
use core::time::Duration;

use crate::clock::Instant;

/// Why a rate limiter did not admit a request.
///
/// `Limited` is a *rejection*: the limiter is doing its job, and the caller
/// should come back after its [`retry_after`](NotYet::retry_after) (a 429 or
/// 503 with `Retry-After`, a cached answer, a fallback). `ExceedsBurst` is
/// an error in the request itself: more cells than the burst can never
/// conform, so it fails at once instead of waiting forever, and it is not
/// counted as a refusal.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateError, RateLimiter};
///
/// let clock = ManualClock::new();
/// let api = RateLimiter::new("api", Quota::per_second(2), &clock);
/// api.check_n(2).unwrap();
/// let err = api.check().unwrap_err();
/// assert!(err.is_rejection());
/// assert_eq!(err.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(err.to_string(), "rate limited: retry after 500ms");
/// match err {
///     RateError::Limited(not_yet) => assert_eq!(not_yet.retry_after(), Duration::from_millis(500)),
///     other => unreachable!("{other}"),
/// }
///
/// let err = api.check_n(3).unwrap_err();
/// assert_eq!(err, RateError::ExceedsBurst { requested: 3, burst: 2 });
/// assert!(!err.is_rejection());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RateError {
    /// The cells do not conform yet; [`NotYet`] says when they would.
    ///
    /// A request that would carry the limiter's schedule past its
    /// [`HORIZON`](super::HORIZON) (`2^60 − 1` ns, about 36 years after the
    /// clock's origin) never conforms: it is refused with `ready_at` at
    /// [`Instant::MAX`].
    Limited(NotYet),
    /// More cells were requested than the quota's burst: waiting could never
    /// succeed, so the request fails at once.
    ExceedsBurst {
        /// Cells asked for.
        requested: u32,
        /// The quota's burst.
        burst: u32,
    },
}

/// When refused cells would conform: at [`ready_at`](Self::ready_at),
/// [`retry_after`](Self::retry_after) from the instant the limiter read its
/// clock for the request (exact: a request for the same cells at
/// `ready_at` is admitted if nothing else took cells in between).
///
/// It holds the two instants and computes the `Duration` when asked, so a
/// refusal costs no division (a `Duration` from nanoseconds is a division by
/// 10⁹: ~2 ns, a fifth of a refusal, in `benches/rate.rs`); a caller that
/// sheds without a `Retry-After` never pays it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, ManualClock};
/// use watertight::rate::{NotYet, Quota, RateError, RateLimiter};
///
/// let clock = ManualClock::new();
/// let r = RateLimiter::new("api", Quota::per_second(4).burst(1), &clock);
/// r.check().unwrap();
/// let now = clock.now();
/// let expected = NotYet::new(now, now + Duration::from_millis(250));
/// assert_eq!(r.check(), Err(RateError::Limited(expected)));
/// assert_eq!(expected.retry_after(), Duration::from_millis(250));
/// assert_eq!(expected.checked_at(), now);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NotYet {
    checked_at: Instant,
    ready_at: Instant,
}

impl NotYet {
    /// Cells checked at `checked_at` that conform at `ready_at` (an earlier
    /// `ready_at` is a `retry_after` of zero).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    /// use watertight::rate::NotYet;
    ///
    /// let n = NotYet::new(Instant::from_nanos(5), Instant::from_nanos(2_000_005));
    /// assert_eq!(n.retry_after(), Duration::from_millis(2));
    /// ```
    pub const fn new(checked_at: Instant, ready_at: Instant) -> NotYet {
        NotYet {
            checked_at,
            ready_at,
        }
    }

    /// How long from the check until the cells conform.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateError, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("api", Quota::per_second(10).burst(1), &clock);
    /// r.check().unwrap();
    /// let RateError::Limited(not_yet) = r.check().unwrap_err() else { unreachable!() };
    /// assert_eq!(not_yet.retry_after(), Duration::from_millis(100));
    /// ```
    pub const fn retry_after(&self) -> Duration {
        self.ready_at.saturating_duration_since(self.checked_at)
    }

    /// When the cells conform, on the limiter's clock ([`Instant::MAX`]:
    /// never, see [`RateError::Limited`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::rate::NotYet;
    ///
    /// let n = NotYet::new(Instant::ZERO, Instant::from_nanos(7));
    /// assert_eq!(n.ready_at(), Instant::from_nanos(7));
    /// ```
    pub const fn ready_at(&self) -> Instant {
        self.ready_at
    }

    /// The instant the limiter read its clock for the refused request.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::rate::NotYet;
    ///
    /// let n = NotYet::new(Instant::from_nanos(3), Instant::from_nanos(7));
    /// assert_eq!(n.checked_at(), Instant::from_nanos(3));
    /// ```
    pub const fn checked_at(&self) -> Instant {
        self.checked_at
    }
}

impl RateError {
    /// Whether this is a rejection (`Limited`): the system is unavailable
    /// to this caller for now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::RateError;
    ///
    /// assert!(!RateError::ExceedsBurst { requested: 5, burst: 4 }.is_rejection());
    /// ```
    pub fn is_rejection(&self) -> bool {
        matches!(self, RateError::Limited(_))
    }

    /// The time until the cells conform, for a `Retry-After`; `None` for
    /// `ExceedsBurst`, which never will.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::RateError;
    ///
    /// assert_eq!(RateError::ExceedsBurst { requested: 5, burst: 4 }.retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RateError::Limited(n) => Some(n.retry_after()),
            RateError::ExceedsBurst { .. } => None,
        }
    }

    /// When the cells conform (`None` for `ExceedsBurst`).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("api", Quota::per_hour(1), &clock);
    /// r.check().unwrap();
    /// let at = r.check().unwrap_err().ready_at().unwrap();
    /// assert_eq!(at.since_origin().as_secs(), 3600);
    /// ```
    pub fn ready_at(&self) -> Option<Instant> {
        match self {
            RateError::Limited(n) => Some(n.ready_at()),
            RateError::ExceedsBurst { .. } => None,
        }
    }
}

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateError::Limited(n) => {
                write!(f, "rate limited: retry after {:?}", n.retry_after())
            }
            RateError::ExceedsBurst { requested, burst } => write!(
                f,
                "requested {requested} cells but the rate limit's burst is {burst}"
            ),
        }
    }
}

impl core::error::Error for RateError {}

/// A [`Quota`](super::Quota) that cannot be used.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::{Quota, QuotaError};
///
/// let err = Quota::try_new(0, Duration::from_secs(1)).unwrap_err();
/// assert_eq!(err, QuotaError::ZeroCells);
/// assert_eq!(err.to_string(), "a rate limit must admit at least 1 cell per period");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaError {
    /// Zero cells per period would refuse every call.
    ZeroCells,
    /// A burst of zero would refuse every call.
    ZeroBurst,
    /// A period of zero is no rate.
    ZeroPeriod,
    /// The period is longer than `2^60 − 1` nanoseconds (about 36 years,
    /// the schedule's [`HORIZON`](super::HORIZON)).
    PeriodTooLong,
    /// `burst × T` (how far ahead of the schedule a caller may run) is longer
    /// than `2^60 − 1` nanoseconds (about 36 years).
    BurstTooLong {
        /// The burst asked for.
        burst: u32,
        /// The emission interval `T`.
        interval: Duration,
    },
}

impl QuotaError {
    /// The `const fn` constructors' panic, with a message per error.
    pub(crate) const fn panic(self) -> ! {
        match self {
            QuotaError::ZeroCells => panic!("a rate limit must admit at least 1 cell per period"),
            QuotaError::ZeroBurst => panic!("a rate limit's burst must be at least 1"),
            QuotaError::ZeroPeriod => panic!("a rate limit's period must not be zero"),
            QuotaError::PeriodTooLong => {
                panic!("a rate limit's period must not exceed 2^60 - 1 nanoseconds")
            }
            QuotaError::BurstTooLong { .. } => {
                panic!("a rate limit's burst × interval must not exceed 2^60 - 1 nanoseconds")
            }
        }
    }
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::ZeroCells => {
                f.write_str("a rate limit must admit at least 1 cell per period")
            }
            QuotaError::ZeroBurst => f.write_str("a rate limit's burst must be at least 1"),
            QuotaError::ZeroPeriod => f.write_str("a rate limit's period must not be zero"),
            QuotaError::PeriodTooLong => {
                f.write_str("a rate limit's period must not exceed 36 years (2^60 - 1 ns)")
            }
            QuotaError::BurstTooLong { burst, interval } => write!(
                f,
                "a rate limit's burst of {burst} cells {interval:?} apart exceeds 36 years (2^60 - 1 ns)"
            ),
        }
    }
}

impl core::error::Error for QuotaError {}
