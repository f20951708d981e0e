//! The global rate limiter's settings, their defaults and their checks.

use core::fmt;
use core::time::Duration;

use crate::breaker::{BreakerConfig, BreakerConfigError};
use crate::rate::Quota;

/// The longest burst window (`burst × T`) in microseconds: 2^50 µs, about
/// 35 years. Redis's Lua numbers are doubles, exact up to 2^53; Redis's
/// clock in µs (about 1.8 × 10^15) plus two windows stays under that.
const MAX_WINDOW_MICROS: u64 = 1 << 50;

/// What callers get while Redis cannot be reached (or its breaker is open).
///
/// # Examples
///
/// ```
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, RateFallback};
///
/// // 200/s fleet-wide; 4 processes: 50/s each on their own.
/// let config = GlobalRateConfig::builder(Quota::per_second(200))
///     .fallback(RateFallback::Local(Quota::per_second(50)))
///     .build()
///     .unwrap();
/// assert_eq!(config.fallback(), RateFallback::Local(Quota::per_second(50)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RateFallback {
    /// Refuse at once with
    /// [`GlobalRateError::StoreUnavailable`](super::GlobalRateError::StoreUnavailable):
    /// the fleet's rate is never exceeded, and the system is unavailable
    /// while Redis is.
    FailClosed,
    /// Fall back to a local limit of this quota in this process (per key,
    /// for keyed checks: a table of 512 keys, see
    /// [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter)), for example the
    /// global rate ÷ the number of processes you expect. Cells taken
    /// locally are not counted in Redis, and Redis's cells are not counted
    /// locally: while Redis is down the fleet runs at the sum of the local
    /// quotas, and when it comes back each key starts from its state in
    /// Redis (or from a full burst if Redis lost it).
    Local(Quota),
}

/// Settings of a [`GlobalRateLimiter`](super::GlobalRateLimiter).
///
/// Defaults: 100 ms for each Redis command, [`RateFallback::FailClosed`],
/// and the global bulkhead's breaker in front of Redis (it opens when half
/// of the last 10 commands failed, at least 5 of them, for 5 s).
///
/// # Microseconds
///
/// The schedule is kept in microseconds of Redis's `TIME` (Lua's numbers
/// are doubles: nanoseconds since 1970 would not be exact). The quota's
/// emission interval `T` is rounded **up** to a whole microsecond
/// ([`interval`](Self::interval)), so the fleet never runs faster than the
/// quota: `Quota::per_second(3)` is 333,334 µs apart. The bound is exact in
/// those units: over any window of `w`, at most `burst + ⌊w / T⌋` cells.
/// A quota whose `T` is under 1 µs (above a million cells a second) is
/// refused.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::Quota;
/// use watertight::redis::GlobalRateConfig;
///
/// let config = GlobalRateConfig::builder(Quota::per_second(200).burst(20)).build().unwrap();
/// assert_eq!(config.interval(), Duration::from_millis(5));
/// assert_eq!(config.window(), Duration::from_millis(100)); // a key's longest life in Redis
/// assert_eq!(config.store_timeout(), Duration::from_millis(100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalRateConfig {
    pub(super) quota: Quota,
    pub(super) interval_us: u64,
    pub(super) store_timeout: Duration,
    pub(super) fallback: RateFallback,
    pub(super) store_breaker: BreakerConfig,
    pub(super) leased: Option<Duration>,
}

impl GlobalRateConfig {
    /// A builder for a fleet-wide rate of `quota` (per key, for keyed
    /// checks), with the defaults above.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    /// use watertight::redis::GlobalRateConfig;
    ///
    /// let config = GlobalRateConfig::builder(Quota::per_minute(100))
    ///     .store_timeout(Duration::from_millis(50))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.quota(), Quota::per_minute(100));
    /// ```
    pub const fn builder(quota: Quota) -> GlobalRateConfigBuilder {
        GlobalRateConfigBuilder {
            config: GlobalRateConfig {
                quota,
                interval_us: 0,
                store_timeout: Duration::from_millis(100),
                fallback: RateFallback::FailClosed,
                store_breaker: super::super::config::STORE_BREAKER,
                leased: None,
            },
        }
    }

    /// The quota, as given.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let q = Quota::per_second(5);
    /// assert_eq!(GlobalRateConfig::builder(q).build().unwrap().quota(), q);
    /// ```
    pub const fn quota(&self) -> Quota {
        self.quota
    }

    /// The emission interval Redis spaces cells by: the quota's, rounded up
    /// to a whole microsecond.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let c = GlobalRateConfig::builder(Quota::per_second(3)).build().unwrap();
    /// assert_eq!(c.interval(), Duration::from_micros(333_334));
    /// ```
    pub const fn interval(&self) -> Duration {
        Duration::from_micros(self.interval_us)
    }

    /// The burst window, `burst × interval`: how far ahead of the schedule a
    /// key may run, and the longest a key lives in Redis after its last
    /// admission.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let c = GlobalRateConfig::builder(Quota::per_minute(60).burst(5)).build().unwrap();
    /// assert_eq!(c.window(), Duration::from_secs(5));
    /// ```
    pub const fn window(&self) -> Duration {
        Duration::from_micros(self.window_us())
    }

    pub(super) const fn window_us(&self) -> u64 {
        // Checked by `build`: at most 2^50.
        self.interval_us * self.quota.burst_size() as u64
    }

    /// The time each Redis command may take.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let c = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
    /// assert_eq!(c.store_timeout().as_millis(), 100);
    /// ```
    pub const fn store_timeout(&self) -> Duration {
        self.store_timeout
    }

    /// What callers get while Redis cannot be reached.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::{GlobalRateConfig, RateFallback};
    /// let c = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
    /// assert_eq!(c.fallback(), RateFallback::FailClosed);
    /// ```
    pub const fn fallback(&self) -> RateFallback {
        self.fallback
    }

    /// The breaker in front of Redis.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let c = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
    /// assert_eq!(c.store_breaker().window_size(), 10);
    /// ```
    pub const fn store_breaker(&self) -> &BreakerConfig {
        &self.store_breaker
    }

    /// The leased mode's refresh interval, if leased (`None`: one script
    /// per check, the default). See
    /// [the limiter's docs](super::GlobalRateLimiter#leased-mode).
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::rate::Quota; use watertight::redis::GlobalRateConfig;
    /// let c = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
    /// assert_eq!(c.leased(), None);
    /// let c = GlobalRateConfig::builder(Quota::per_second(5)).leased(Duration::from_millis(100)).build().unwrap();
    /// assert_eq!(c.leased(), Some(Duration::from_millis(100)));
    /// ```
    pub const fn leased(&self) -> Option<Duration> {
        self.leased
    }
}

/// Builds a [`GlobalRateConfig`]; [`build`](Self::build) checks it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, RateFallback};
///
/// let config = GlobalRateConfig::builder(Quota::per_second(100))
///     .store_timeout(Duration::from_millis(20))
///     .fallback(RateFallback::Local(Quota::per_second(25)))
///     .build()
///     .unwrap();
/// assert_eq!(config.store_timeout(), Duration::from_millis(20));
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct GlobalRateConfigBuilder {
    config: GlobalRateConfig,
}

impl GlobalRateConfigBuilder {
    /// The time each Redis command may take (100 ms by default). A command
    /// that takes longer counts as a failure of Redis, for its breaker.
    pub const fn store_timeout(mut self, d: Duration) -> Self {
        self.config.store_timeout = d;
        self
    }

    /// What callers get while Redis cannot be reached.
    pub const fn fallback(mut self, fallback: RateFallback) -> Self {
        self.config.fallback = fallback;
        self
    }

    /// The breaker in front of Redis (see [`GlobalRateConfig`] for its
    /// default).
    pub const fn store_breaker(mut self, config: BreakerConfig) -> Self {
        self.config.store_breaker = config;
        self
    }

    /// Leased mode: each process leases batches of cells of the unkeyed
    /// limit ([`RateKey::whole`](super::RateKey::whole)), one script per
    /// `refresh` (earlier when its pocket runs dry, at most every quarter
    /// of it), and spends them with no Redis call. Keyed checks stay one
    /// script each. See [the limiter's docs](super::GlobalRateLimiter#leased-mode)
    /// for what it guarantees and trades.
    pub const fn leased(mut self, refresh: Duration) -> Self {
        self.config.leased = Some(refresh);
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`GlobalRateConfigError`] names the setting at fault: a zero store
    /// timeout, a quota faster than one cell per microsecond, a burst
    /// window (`burst × T`) above 2^50 µs (about 35 years), or (leased) a
    /// refresh interval under a millisecond or above an hour.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateConfigError};
    ///
    /// let err = GlobalRateConfig::builder(Quota::per_second(2_000_000)).build().unwrap_err();
    /// assert!(matches!(err, GlobalRateConfigError::TooFast { .. }));
    /// let err = GlobalRateConfig::builder(Quota::per_second(1))
    ///     .store_timeout(Duration::ZERO)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, GlobalRateConfigError::StoreTimeoutZero);
    /// ```
    pub fn build(self) -> Result<GlobalRateConfig, GlobalRateConfigError> {
        let mut c = self.config;
        if c.store_timeout.is_zero() {
            return Err(GlobalRateConfigError::StoreTimeoutZero);
        }
        let interval = c.quota.emission_interval();
        if interval < Duration::from_micros(1) {
            return Err(GlobalRateConfigError::TooFast { interval });
        }
        // Rounded up: never faster than the quota.
        let interval_us = u64::try_from(interval.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX);
        match interval_us.checked_mul(u64::from(c.quota.burst_size())) {
            Some(w) if w <= MAX_WINDOW_MICROS => {}
            _ => return Err(GlobalRateConfigError::WindowTooLong),
        }
        if let Some(refresh) = c.leased {
            if refresh < Duration::from_millis(1) || refresh > Duration::from_secs(3600) {
                return Err(GlobalRateConfigError::BadRefresh { refresh });
            }
        }
        c.interval_us = interval_us;
        Ok(c)
    }
}

/// A [`GlobalRateConfig`] that [`build`](GlobalRateConfigBuilder::build)
/// refused.
///
/// # Examples
///
/// ```
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateConfigError};
///
/// let err = GlobalRateConfig::builder(Quota::per_hour(1).burst(315_000)).build().unwrap_err();
/// assert_eq!(err, GlobalRateConfigError::WindowTooLong);
/// assert_eq!(err.to_string(), "the burst window (burst × interval) is above 2^50 µs (about 35 years)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum GlobalRateConfigError {
    /// The store timeout is zero.
    StoreTimeoutZero,
    /// The quota's emission interval is under one microsecond, the
    /// resolution of the schedule in Redis.
    TooFast {
        /// The quota's emission interval.
        interval: Duration,
    },
    /// `burst × T` is above 2^50 µs (about 35 years): Redis's Lua numbers
    /// would no longer be exact.
    WindowTooLong,
    /// The store breaker's config does not make a breaker.
    StoreBreaker(BreakerConfigError),
    /// Leased mode with a refresh interval under 1 ms (a Redis call per
    /// millisecond per process is the per-call mode's cost, not a lease)
    /// or above an hour.
    BadRefresh {
        /// The refresh interval given.
        refresh: Duration,
    },
}

impl fmt::Display for GlobalRateConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalRateConfigError::StoreTimeoutZero => f.write_str("store_timeout must not be zero"),
            GlobalRateConfigError::TooFast { interval } => write!(
                f,
                "quota: cells {interval:?} apart, under the 1 µs resolution of the schedule in Redis"
            ),
            GlobalRateConfigError::WindowTooLong => f.write_str(
                "the burst window (burst × interval) is above 2^50 µs (about 35 years)",
            ),
            GlobalRateConfigError::StoreBreaker(e) => write!(f, "store_breaker: {e}"),
            GlobalRateConfigError::BadRefresh { refresh } => write!(
                f,
                "leased: refresh {refresh:?} is not between 1 ms and an hour"
            ),
        }
    }
}

impl core::error::Error for GlobalRateConfigError {}
