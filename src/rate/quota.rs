//! [`Quota`]: how many cells per period, with what burst.

use core::fmt;
use core::time::Duration;

use super::gcra::HORIZON_NANOS;
use super::QuotaError;
use crate::clock::nanos;

/// A rate: `cells` per `period`, of which up to `burst` may be taken at once.
///
/// The limiter spaces cells one **emission interval** `T = period / cells`
/// apart, and lets a caller run up to `burst × T` ahead of that schedule
/// (the generic cell rate algorithm's tolerance). Over any window of length
/// `w` the cells admitted are at most `burst + ⌊w / T⌋`.
///
/// # Decisions
///
/// - **The default burst is the per-period count**: `Quota::per_second(50)`
///   admits 50 cells at once from idle, then one every 20 ms, as governor's
///   `Quota::per_second` does. Set it with [`burst`](Self::burst):
///   `Quota::per_second(50).burst(10)` keeps the rate and admits 10 at once.
///   (redis-cell's `CL.THROTTLE key max_burst count period` counts its
///   burst from zero: its `max_burst` 9 is our `burst(10)`.)
/// - **`T` is rounded up** to a whole nanosecond, so the quota is never
///   exceeded: `per_second(3)` spaces cells 333 333 334 ns apart, and three
///   intervals take 2 ns more than a second. The effective rate is below the
///   asked one by less than one nanosecond per cell, which matters only
///   near 10⁹ cells a second (`Quota::new(u32::MAX, 1 s)` is one per ns).
/// - **Validated once, here.** Zero cells, a zero burst, a zero period, a
///   period above `2^60 − 1` ns (about 36 years, the schedule's
///   [`HORIZON`](super::HORIZON)) and a burst whose `burst × T` is longer
///   than that are refused: the `const fn`s panic
///   (a compile-time error in a `static` or `const`), the `try_*` forms
///   return a [`QuotaError`]. A limiter built from a `Quota` never fails on
///   its configuration.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::Quota;
///
/// const UPLINK: Quota = Quota::per_second(10).burst(2);
/// assert_eq!(UPLINK.emission_interval(), Duration::from_millis(100));
/// assert_eq!((UPLINK.cells(), UPLINK.burst_size()), (10, 2));
///
/// // Rounded up: never faster than asked.
/// assert_eq!(Quota::per_second(3).emission_interval(), Duration::from_nanos(333_333_334));
///
/// let provider = Quota::per_minute(100);
/// assert_eq!(provider.period(), Duration::from_secs(60));
/// assert_eq!(provider.burst_size(), 100); // the default burst: the per-period count
/// ```
///
/// A zero in a `const` does not compile:
///
/// ```compile_fail
/// use watertight::rate::Quota;
///
/// const NONE: Quota = Quota::per_second(0);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// `T`, in nanoseconds (at least 1).
    interval: u64,
    /// `burst × T`, in nanoseconds: how far ahead of the schedule a caller
    /// may run.
    tolerance: u64,
    /// The period the rate was given for, in nanoseconds (at least 1).
    period: u64,
    cells: u32,
    burst: u32,
}

impl Quota {
    /// `cells` per second, with a burst of `cells`.
    ///
    /// # Panics
    ///
    /// If `cells` is zero; in a `const` or `static` that is a compile-time
    /// error. For a count read at run time use [`try_new`](Self::try_new).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_second(50).emission_interval(), Duration::from_millis(20));
    /// ```
    pub const fn per_second(cells: u32) -> Quota {
        Quota::new(cells, Duration::from_secs(1))
    }

    /// `cells` per minute, with a burst of `cells`.
    ///
    /// # Panics
    ///
    /// If `cells` is zero (see [`per_second`](Self::per_second)).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_minute(100).emission_interval(), Duration::from_millis(600));
    /// ```
    pub const fn per_minute(cells: u32) -> Quota {
        Quota::new(cells, Duration::from_secs(60))
    }

    /// `cells` per hour, with a burst of `cells`.
    ///
    /// # Panics
    ///
    /// If `cells` is zero (see [`per_second`](Self::per_second)).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_hour(7).emission_interval(), Duration::from_nanos(514_285_714_286));
    /// ```
    pub const fn per_hour(cells: u32) -> Quota {
        Quota::new(cells, Duration::from_secs(3600))
    }

    /// `cells` per `period`, with a burst of `cells`.
    ///
    /// # Panics
    ///
    /// Where [`try_new`](Self::try_new) returns an error; in a `const` or
    /// `static` that is a compile-time error.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// // A modem contract: 10 messages per 2 seconds, 3 at once.
    /// const MODEM: Quota = Quota::new(10, Duration::from_secs(2)).burst(3);
    /// assert_eq!(MODEM.emission_interval(), Duration::from_millis(200));
    /// ```
    pub const fn new(cells: u32, period: Duration) -> Quota {
        match Quota::try_new(cells, period) {
            Ok(q) => q,
            Err(e) => e.panic(),
        }
    }

    /// `cells` per `period`, with a burst of `cells`, for values read from
    /// configuration.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroCells`], [`QuotaError::ZeroPeriod`],
    /// [`QuotaError::PeriodTooLong`] (above `2^60 − 1` nanoseconds, about
    /// 36 years: [`HORIZON`](super::HORIZON)), or
    /// [`QuotaError::BurstTooLong`] if `cells × T` is longer than that.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::{Quota, QuotaError};
    ///
    /// assert_eq!(Quota::try_new(0, Duration::from_secs(1)), Err(QuotaError::ZeroCells));
    /// assert_eq!(Quota::try_new(5, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    /// assert_eq!(Quota::try_new(5, Duration::MAX), Err(QuotaError::PeriodTooLong));
    /// assert!(Quota::try_new(5, Duration::from_secs(1)).is_ok());
    /// ```
    pub const fn try_new(cells: u32, period: Duration) -> Result<Quota, QuotaError> {
        if cells == 0 {
            return Err(QuotaError::ZeroCells);
        }
        let period = match nanos::checked_from(period) {
            Some(0) => return Err(QuotaError::ZeroPeriod),
            Some(p) if p <= HORIZON_NANOS => p,
            _ => return Err(QuotaError::PeriodTooLong),
        };
        // Rounded up: `cells` intervals are never shorter than the period.
        let interval = period.div_ceil(cells as u64);
        Quota {
            interval,
            tolerance: 0,
            period,
            cells,
            burst: 0,
        }
        .try_burst(cells)
    }

    /// The same rate with a burst of `burst` cells: up to `burst` are
    /// admitted at once from idle.
    ///
    /// # Panics
    ///
    /// Where [`try_burst`](Self::try_burst) returns an error; in a `const`
    /// or `static` that is a compile-time error.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    ///
    /// let q = Quota::per_second(50).burst(10);
    /// assert_eq!((q.cells(), q.burst_size()), (50, 10));
    /// ```
    pub const fn burst(self, burst: u32) -> Quota {
        match self.try_burst(burst) {
            Ok(q) => q,
            Err(e) => e.panic(),
        }
    }

    /// [`burst`](Self::burst), for values read from configuration.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroBurst`], or [`QuotaError::BurstTooLong`] if
    /// `burst × T` is longer than `2^60 − 1` nanoseconds (about 36 years:
    /// [`HORIZON`](super::HORIZON)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::{Quota, QuotaError};
    ///
    /// assert_eq!(Quota::per_second(5).try_burst(0), Err(QuotaError::ZeroBurst));
    /// assert!(matches!(
    ///     Quota::per_hour(1).try_burst(u32::MAX),
    ///     Err(QuotaError::BurstTooLong { .. })
    /// ));
    /// ```
    pub const fn try_burst(self, burst: u32) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        match self.interval.checked_mul(burst as u64) {
            Some(tolerance) if tolerance <= HORIZON_NANOS => Ok(Quota {
                tolerance,
                burst,
                ..self
            }),
            _ => Err(QuotaError::BurstTooLong {
                burst,
                interval: nanos::duration(self.interval),
            }),
        }
    }

    /// The cells per [`period`](Self::period) the quota was given with.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_minute(100).cells(), 100);
    /// ```
    pub const fn cells(&self) -> u32 {
        self.cells
    }

    /// The period the quota was given for.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_hour(1).period(), Duration::from_secs(3600));
    /// ```
    pub const fn period(&self) -> Duration {
        nanos::duration(self.period)
    }

    /// The most cells admitted at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_second(50).burst_size(), 50);
    /// assert_eq!(Quota::per_second(50).burst(10).burst_size(), 10);
    /// ```
    pub const fn burst_size(&self) -> u32 {
        self.burst
    }

    /// `T`: the time one cell takes to come back, `period / cells` rounded up
    /// to a whole nanosecond.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    ///
    /// assert_eq!(Quota::per_second(4).emission_interval(), Duration::from_millis(250));
    /// ```
    pub const fn emission_interval(&self) -> Duration {
        nanos::duration(self.interval)
    }

    /// `T` in nanoseconds.
    #[inline(always)]
    pub(crate) const fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// `burst × T` in nanoseconds.
    #[inline(always)]
    pub(crate) const fn tolerance_nanos(&self) -> u64 {
        self.tolerance
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("cells", &self.cells)
            .field("period", &self.period())
            .field("burst", &self.burst)
            .field("emission_interval", &self.emission_interval())
            .finish()
    }
}
