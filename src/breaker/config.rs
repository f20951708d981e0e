//! Breaker configuration: seed 002's defaults, a builder, and typed errors.

use core::fmt;
use core::time::Duration;

use super::window::MAX_WINDOW;
use super::word::{MAX_DURATION_NS, MAX_PROBES};

/// How a [`CircuitBreaker`](super::CircuitBreaker) decides, validated.
///
/// Made by [`BreakerConfig::builder`] (every field has seed 002's default),
/// or taken as [`BreakerConfig::DEFAULT`] / [`BreakerConfig::CRITICAL`].
/// Every builder method and `build` is a `const fn`, so a config for a
/// `static` breaker is checked at compile time.
///
/// | setting | default | |
/// |---|---|---|
/// | `window_size` | 50 | outcomes in the count window (≤ the breaker's `N`) |
/// | `minimum_calls` | 10 | outcomes in the window before rates are evaluated |
/// | `failure_rate_threshold` | 50 % | trips when the failure rate is at or above it |
/// | `slow_call_duration` | off | a call is slow when it takes strictly longer |
/// | `slow_call_rate_threshold` | 100 % | trips when the slow-call rate is at or above it |
/// | `open_duration` | 30 s | how long it stays open before probes may pass |
/// | `half_open_calls` | 3 | probes admitted per half-open episode |
/// | `max_half_open_wait` | none | a probe out this long after the last admission counts as failed |
///
/// Thresholds are percent, as in resilience4j: `30.0` means 30 %. A value in
/// (0, 1] is refused with a hint, so `0.5` is never read as half a percent.
/// They are kept to a hundredth of a percent.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::BreakerConfig;
///
/// const PAYMENTS: BreakerConfig = match BreakerConfig::builder()
///     .failure_rate_threshold(30.0)
///     .slow_call_duration(Duration::from_secs(15))
///     .build()
/// {
///     Ok(config) => config,
///     Err(e) => e.panic(),
/// };
/// assert_eq!(PAYMENTS.window_size(), 50);
///
/// let err = BreakerConfig::builder().failure_rate_threshold(0.5).build().unwrap_err();
/// assert_eq!(err.field(), "failure_rate_threshold");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    pub(crate) window_size: u16,
    pub(crate) minimum_calls: u16,
    /// Hundredths of a percent.
    pub(crate) failure_bp: u16,
    /// Hundredths of a percent.
    pub(crate) slow_bp: u16,
    /// Nanoseconds; 0 = slow-call detection off.
    pub(crate) slow_ns: u64,
    pub(crate) open_ns: u64,
    /// Nanoseconds; 0 = no limit.
    pub(crate) max_half_open_ns: u64,
    pub(crate) half_open_calls: u8,
}

impl BreakerConfig {
    /// Seed 002's defaults: window 50, minimum 10 calls, failure rate 50 %,
    /// open 30 s, 3 half-open probes, slow-call detection off (rate
    /// threshold 100 % once a duration is set), no half-open limit.
    pub const DEFAULT: BreakerConfig = match BreakerConfigBuilder::new().build() {
        Ok(c) => c,
        Err(e) => e.panic(),
    };

    /// The preset for critical systems (payments, fiscal receipts): the
    /// defaults with a 30 % failure-rate threshold (seed 002, R-RES-CB-3).
    pub const CRITICAL: BreakerConfig = match BreakerConfigBuilder::new()
        .failure_rate_threshold(30.0)
        .build()
    {
        Ok(c) => c,
        Err(e) => e.panic(),
    };

    /// A builder starting from the defaults.
    pub const fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder::new()
    }

    /// Outcomes in the count window.
    pub const fn window_size(&self) -> usize {
        self.window_size as usize
    }

    /// Outcomes in the window before rates are evaluated.
    pub const fn minimum_calls(&self) -> usize {
        self.minimum_calls as usize
    }

    /// The failure-rate threshold, in percent.
    pub fn failure_rate_threshold(&self) -> f32 {
        self.failure_bp as f32 / 100.0
    }

    /// The slow-call-rate threshold, in percent.
    pub fn slow_call_rate_threshold(&self) -> f32 {
        self.slow_bp as f32 / 100.0
    }

    /// The duration above which a call is slow; `None` when slow-call
    /// detection is off.
    pub const fn slow_call_duration(&self) -> Option<Duration> {
        if self.slow_ns == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.slow_ns))
        }
    }

    /// How long the breaker stays open before probes may pass.
    pub const fn open_duration(&self) -> Duration {
        Duration::from_nanos(self.open_ns)
    }

    /// Probes admitted per half-open episode.
    pub const fn half_open_calls(&self) -> usize {
        self.half_open_calls as usize
    }

    /// The longest a half-open episode may wait for its probes, if limited.
    pub const fn max_half_open_wait(&self) -> Option<Duration> {
        if self.max_half_open_ns == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.max_half_open_ns))
        }
    }
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig::DEFAULT
    }
}

/// Builds a [`BreakerConfig`]; see there for the settings and defaults.
///
/// Setters take any value; [`build`](Self::build) checks them all and names
/// the first bad field. Nothing is clamped.
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BreakerConfigBuilder {
    window_size: usize,
    minimum_calls: usize,
    failure_rate_threshold: f32,
    slow_call_rate_threshold: f32,
    slow_call_duration: Option<Duration>,
    open_duration: Duration,
    half_open_calls: usize,
    max_half_open_wait: Option<Duration>,
}

impl Default for BreakerConfigBuilder {
    fn default() -> Self {
        BreakerConfigBuilder::new()
    }
}

impl BreakerConfigBuilder {
    /// A builder with seed 002's defaults.
    pub const fn new() -> Self {
        BreakerConfigBuilder {
            window_size: 50,
            minimum_calls: 10,
            failure_rate_threshold: 50.0,
            slow_call_rate_threshold: 100.0,
            slow_call_duration: None,
            open_duration: Duration::from_secs(30),
            half_open_calls: 3,
            max_half_open_wait: None,
        }
    }

    /// Outcomes in the count window (default 50): at least 1, at most the
    /// breaker's capacity `N`.
    pub const fn window_size(mut self, n: usize) -> Self {
        self.window_size = n;
        self
    }

    /// Outcomes in the window before any rate is evaluated (default 10):
    /// at least 1, at most `window_size`.
    pub const fn minimum_calls(mut self, n: usize) -> Self {
        self.minimum_calls = n;
        self
    }

    /// Trips when the failure rate is at or above this many percent
    /// (default 50): in (1, 100].
    pub const fn failure_rate_threshold(mut self, percent: f32) -> Self {
        self.failure_rate_threshold = percent;
        self
    }

    /// Trips when the slow-call rate is at or above this many percent
    /// (default 100): in (1, 100]. Used once a slow-call duration is set.
    pub const fn slow_call_rate_threshold(mut self, percent: f32) -> Self {
        self.slow_call_rate_threshold = percent;
        self
    }

    /// A call that takes strictly longer than this is slow (default: off).
    /// Seed 002 suggests half the read timeout. Turning it on costs two clock
    /// reads per call; while it is off, a closed-state call reads no clock.
    pub const fn slow_call_duration(mut self, d: Duration) -> Self {
        self.slow_call_duration = Some(d);
        self
    }

    /// How long the breaker stays open before probes may pass (default 30 s).
    pub const fn open_duration(mut self, d: Duration) -> Self {
        self.open_duration = d;
        self
    }

    /// Probes admitted per half-open episode (default 3): 1 to 255.
    pub const fn half_open_calls(mut self, n: usize) -> Self {
        self.half_open_calls = n;
        self
    }

    /// A half-open episode that has a probe out and has admitted no probe for
    /// this long reopens the breaker, as if the probe had failed (default: no
    /// limit). Stops a lost probe from wedging the breaker; an episode with
    /// no probe out does not expire.
    pub const fn max_half_open_wait(mut self, d: Duration) -> Self {
        self.max_half_open_wait = Some(d);
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// A [`BreakerConfigError`] naming the first bad field: a zero window,
    /// minimum, probe count or duration; `minimum_calls > window_size`; a
    /// window above 1023 or more
    /// than 255 probes; a threshold that is not in (0, 100] percent, or looks
    /// like a fraction (in (0, 1]); a duration longer than the breaker's
    /// timestamps can hold (35 years; 37 hours on targets without 64-bit
    /// atomics). The window's fit in the breaker's `N` is checked when the
    /// breaker is made.
    pub const fn build(self) -> Result<BreakerConfig, BreakerConfigError> {
        use BreakerConfigError as E;
        if self.window_size == 0 {
            return Err(E::Zero {
                field: "window_size",
            });
        }
        if self.window_size > MAX_WINDOW {
            return Err(E::TooLarge {
                field: "window_size",
                max: MAX_WINDOW,
            });
        }
        if self.minimum_calls == 0 {
            return Err(E::Zero {
                field: "minimum_calls",
            });
        }
        if self.minimum_calls > self.window_size {
            return Err(E::MinimumCallsAboveWindow {
                minimum_calls: self.minimum_calls,
                window_size: self.window_size,
            });
        }
        let failure_bp = match percent("failure_rate_threshold", self.failure_rate_threshold) {
            Ok(bp) => bp,
            Err(e) => return Err(e),
        };
        let slow_bp = match percent("slow_call_rate_threshold", self.slow_call_rate_threshold) {
            Ok(bp) => bp,
            Err(e) => return Err(e),
        };
        let slow_ns = match self.slow_call_duration {
            None => 0,
            Some(d) => match nanos("slow_call_duration", d) {
                Ok(ns) => ns,
                Err(e) => return Err(e),
            },
        };
        let open_ns = match nanos("open_duration", self.open_duration) {
            Ok(ns) => ns,
            Err(e) => return Err(e),
        };
        if self.half_open_calls == 0 {
            return Err(E::Zero {
                field: "half_open_calls",
            });
        }
        if self.half_open_calls > MAX_PROBES {
            return Err(E::TooLarge {
                field: "half_open_calls",
                max: MAX_PROBES,
            });
        }
        let max_half_open_ns = match self.max_half_open_wait {
            None => 0,
            Some(d) => match nanos("max_half_open_wait", d) {
                Ok(ns) => ns,
                Err(e) => return Err(e),
            },
        };
        Ok(BreakerConfig {
            window_size: self.window_size as u16,
            minimum_calls: self.minimum_calls as u16,
            failure_bp,
            slow_bp,
            slow_ns,
            open_ns,
            max_half_open_ns,
            half_open_calls: self.half_open_calls as u8,
        })
    }
}

/// A threshold in percent, as hundredths of a percent.
const fn percent(field: &'static str, p: f32) -> Result<u16, BreakerConfigError> {
    // Written so that NaN fails the range check too.
    if !(p > 0.0 && p <= 100.0) {
        return Err(BreakerConfigError::ThresholdOutOfRange { field });
    }
    if p <= 1.0 {
        return Err(BreakerConfigError::ThresholdLooksLikeFraction { field });
    }
    Ok((p * 100.0 + 0.5) as u16)
}

const fn nanos(field: &'static str, d: Duration) -> Result<u64, BreakerConfigError> {
    if d.is_zero() {
        return Err(BreakerConfigError::Zero { field });
    }
    let ns = d.as_nanos();
    if ns > MAX_DURATION_NS as u128 {
        return Err(BreakerConfigError::DurationTooLong {
            field,
            max: Duration::from_nanos(MAX_DURATION_NS),
        });
    }
    Ok(ns as u64)
}

/// A breaker setting that cannot work, naming the field.
///
/// Returned by [`BreakerConfigBuilder::build`] and
/// [`CircuitBreaker::try_new`](super::CircuitBreaker::try_new); never a silent
/// clamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerConfigError {
    /// The field is zero, and must not be.
    Zero {
        /// The setting's name.
        field: &'static str,
    },
    /// The field is above what the breaker can hold.
    TooLarge {
        /// The setting's name.
        field: &'static str,
        /// The largest value accepted.
        max: usize,
    },
    /// `minimum_calls` is larger than `window_size`, so no rate would ever be
    /// evaluated.
    MinimumCallsAboveWindow {
        /// The minimum asked for.
        minimum_calls: usize,
        /// The window it must fit in.
        window_size: usize,
    },
    /// `window_size` is larger than the breaker's compile-time capacity `N`.
    WindowAboveCapacity {
        /// The window asked for.
        window_size: usize,
        /// The breaker's `N`.
        capacity: usize,
    },
    /// A threshold is not in (0, 100] percent (or is NaN).
    ThresholdOutOfRange {
        /// The setting's name.
        field: &'static str,
    },
    /// A threshold is in (0, 1]: thresholds are percent, so `0.5` would mean
    /// half a percent. Write `50.0` for 50 %.
    ThresholdLooksLikeFraction {
        /// The setting's name.
        field: &'static str,
    },
    /// A duration is longer than the breaker's timestamps can hold.
    DurationTooLong {
        /// The setting's name.
        field: &'static str,
        /// The longest duration accepted on this target.
        max: Duration,
    },
}

impl BreakerConfigError {
    /// The name of the setting at fault, as the builder spells it.
    pub const fn field(&self) -> &'static str {
        match *self {
            BreakerConfigError::Zero { field }
            | BreakerConfigError::TooLarge { field, .. }
            | BreakerConfigError::ThresholdOutOfRange { field }
            | BreakerConfigError::ThresholdLooksLikeFraction { field }
            | BreakerConfigError::DurationTooLong { field, .. } => field,
            BreakerConfigError::MinimumCallsAboveWindow { .. } => "minimum_calls",
            BreakerConfigError::WindowAboveCapacity { .. } => "window_size",
        }
    }

    /// Panics with this error's message: for `const` configs, where the
    /// panic is a compile-time error.
    ///
    /// # Panics
    ///
    /// Always.
    #[track_caller]
    pub const fn panic(self) -> ! {
        match self {
            BreakerConfigError::Zero { .. } => panic!("breaker config: a setting is zero"),
            BreakerConfigError::TooLarge { .. } => panic!("breaker config: a setting is too large"),
            BreakerConfigError::MinimumCallsAboveWindow { .. } => {
                panic!("breaker config: minimum_calls is above window_size")
            }
            BreakerConfigError::WindowAboveCapacity { .. } => {
                panic!("breaker config: window_size is above the breaker's capacity N")
            }
            BreakerConfigError::ThresholdOutOfRange { .. } => {
                panic!("breaker config: a threshold is not in (0, 100] percent")
            }
            BreakerConfigError::ThresholdLooksLikeFraction { .. } => {
                panic!("breaker config: a threshold is in (0, 1]; thresholds are percent (50.0 means 50 %)")
            }
            BreakerConfigError::DurationTooLong { .. } => {
                panic!("breaker config: a duration is too long")
            }
        }
    }
}

impl fmt::Display for BreakerConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BreakerConfigError::Zero { field } => write!(f, "{field} must not be zero"),
            BreakerConfigError::TooLarge { field, max } => {
                write!(f, "{field} must be at most {max}")
            }
            BreakerConfigError::MinimumCallsAboveWindow {
                minimum_calls,
                window_size,
            } => write!(
                f,
                "minimum_calls ({minimum_calls}) must not exceed window_size ({window_size})"
            ),
            BreakerConfigError::WindowAboveCapacity {
                window_size,
                capacity,
            } => write!(
                f,
                "window_size ({window_size}) must not exceed the breaker's capacity ({capacity})"
            ),
            BreakerConfigError::ThresholdOutOfRange { field } => {
                write!(f, "{field} must be a percentage in (0, 100]")
            }
            BreakerConfigError::ThresholdLooksLikeFraction { field } => write!(
                f,
                "{field} is in (0, 1] but thresholds are percent: write 50.0 for 50 %"
            ),
            BreakerConfigError::DurationTooLong { field, max } => {
                write!(f, "{field} must be at most {max:?}")
            }
        }
    }
}

impl core::error::Error for BreakerConfigError {}
