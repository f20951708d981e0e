//! [`ThrottleConfig`], its builder and its errors.

use core::fmt;
use core::time::Duration;

use super::window::BUCKETS;

/// How an [`AdaptiveThrottle`](super::AdaptiveThrottle) decides: `K`, the
/// most it refuses, and the window it counts over.
///
/// Defaults (the SRE book's): `K = 2`, refusals capped at 90 %, a window
/// of two minutes.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::throttle::ThrottleConfig;
///
/// let c = ThrottleConfig::DEFAULT;
/// assert_eq!((c.k(), c.max_probability(), c.window()), (2.0, 0.9, Duration::from_secs(120)));
/// let lenient = ThrottleConfig::builder().k(1.5).build().unwrap();
/// assert_eq!(lenient.k(), 1.5);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ThrottleConfig {
    pub(super) k: f64,
    pub(super) max_probability: f64,
    pub(super) window: Duration,
    pub(super) bucket_nanos: u64,
}

impl ThrottleConfig {
    /// `K = 2`, at most 90 % refused, a two-minute window (6 s buckets).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::ThrottleConfig;
    /// assert_eq!(ThrottleConfig::builder().build().unwrap(), ThrottleConfig::DEFAULT);
    /// ```
    pub const DEFAULT: ThrottleConfig = ThrottleConfig {
        k: 2.0,
        max_probability: 0.9,
        window: Duration::from_secs(120),
        bucket_nanos: 120_000_000_000 / BUCKETS as u64,
    };

    /// A builder starting from [`DEFAULT`](Self::DEFAULT).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::throttle::ThrottleConfig;
    /// let c = ThrottleConfig::builder().window(Duration::from_secs(60)).build().unwrap();
    /// assert_eq!(c.window(), Duration::from_secs(60));
    /// ```
    pub const fn builder() -> ThrottleConfigBuilder {
        ThrottleConfigBuilder {
            k: 2.0,
            max_probability: 0.9,
            window: Duration::from_secs(120),
            timeout: None,
        }
    }

    /// The multiplier `K`: refusing starts once requests exceed `K ×`
    /// accepts.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::throttle::ThrottleConfig::DEFAULT.k(), 2.0);
    /// ```
    pub const fn k(&self) -> f64 {
        self.k
    }

    /// The most the throttle refuses, as a probability in `[0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::throttle::ThrottleConfig::DEFAULT.max_probability(), 0.9);
    /// ```
    pub const fn max_probability(&self) -> f64 {
        self.max_probability
    }

    /// The window requests and accepts are counted over.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// assert_eq!(watertight::throttle::ThrottleConfig::DEFAULT.window(), Duration::from_secs(120));
    /// ```
    pub const fn window(&self) -> Duration {
        self.window
    }

    /// One bucket's width: the window divided into
    /// [`BUCKETS`](super::BUCKETS), rounded up to the nanosecond. Counts
    /// leave the window a bucket at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::throttle::ThrottleConfig;
    /// assert_eq!(ThrottleConfig::DEFAULT.bucket(), Duration::from_secs(6));
    /// ```
    pub const fn bucket(&self) -> Duration {
        Duration::from_nanos(self.bucket_nanos)
    }
}

/// Settings compare by their bits: a built config holds no NaN, so this
/// is an equivalence (and a [`PolicyConfig`](crate::PolicyConfig) holding
/// one stays `Eq`).
impl PartialEq for ThrottleConfig {
    fn eq(&self, other: &Self) -> bool {
        self.k.to_bits() == other.k.to_bits()
            && self.max_probability.to_bits() == other.max_probability.to_bits()
            && self.window == other.window
    }
}

impl Eq for ThrottleConfig {}

impl ThrottleConfig {
    /// Whether every call that ends within `timeout` of its admission is
    /// credited: the window less one bucket covers it.
    ///
    /// # Errors
    ///
    /// [`ThrottleConfigError::WindowShorterThanTimeout`] if not.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::throttle::ThrottleConfig;
    /// assert!(ThrottleConfig::DEFAULT.covers(Duration::from_secs(114)).is_ok());
    /// assert!(ThrottleConfig::DEFAULT.covers(Duration::from_secs(115)).is_err());
    /// ```
    pub const fn covers(&self, timeout: Duration) -> Result<(), ThrottleConfigError> {
        let covered = self.window.as_nanos() - self.bucket_nanos as u128;
        if covered < timeout.as_nanos() {
            return Err(ThrottleConfigError::WindowShorterThanTimeout {
                window: self.window,
                timeout,
                bucket: Duration::from_nanos(self.bucket_nanos),
            });
        }
        Ok(())
    }
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig::DEFAULT
    }
}

/// Builds a [`ThrottleConfig`]; [`build`](Self::build) checks every
/// setting.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::throttle::{ThrottleConfig, ThrottleConfigError};
///
/// let err = ThrottleConfig::builder()
///     .window(Duration::from_secs(10))
///     .timeout(Duration::from_secs(30))
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, ThrottleConfigError::WindowShorterThanTimeout { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleConfigBuilder {
    k: f64,
    max_probability: f64,
    window: Duration,
    timeout: Option<Duration>,
}

impl ThrottleConfigBuilder {
    /// The multiplier `K` (default 2): the client sends up to `K` times
    /// what the backend accepts before it refuses anything. Lower is
    /// stricter (1.1 wastes less of an overloaded backend on rejections);
    /// higher reacts later but lets the backend's recovery show sooner.
    /// At least 1 and finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::{ThrottleConfig, ThrottleConfigError};
    /// assert_eq!(ThrottleConfig::builder().k(0.5).build(), Err(ThrottleConfigError::K(0.5)));
    /// ```
    pub const fn k(mut self, k: f64) -> Self {
        self.k = k;
        self
    }

    /// The most the throttle refuses (default 0.9), so that some requests
    /// always reach the backend and see it recover. In `[0, 1]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::{ThrottleConfig, ThrottleConfigError};
    /// assert!(ThrottleConfig::builder().max_probability(1.0).build().is_ok());
    /// assert_eq!(
    ///     ThrottleConfig::builder().max_probability(90.0).build(),
    ///     Err(ThrottleConfigError::MaxProbability(90.0))
    /// );
    /// ```
    pub const fn max_probability(mut self, p: f64) -> Self {
        self.max_probability = p;
        self
    }

    /// The window counted over (default 2 min, the SRE book's "last two
    /// minutes"). Make it at least as long as the calls' timeout (and say
    /// so with [`timeout`](Self::timeout)): an accept is credited to the
    /// bucket its request was admitted in, and a call still out when that
    /// bucket leaves the window is never credited.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::throttle::{ThrottleConfig, ThrottleConfigError};
    /// assert_eq!(
    ///     ThrottleConfig::builder().window(Duration::ZERO).build(),
    ///     Err(ThrottleConfigError::WindowZero)
    /// );
    /// ```
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The calls' timeout, to check the window against (default: none
    /// stated). `build` refuses a window that, less one bucket, is
    /// shorter: counts leave a bucket at a time, so the window less a
    /// bucket is what every call is sure to be credited within.
    /// ([`PolicyConfigBuilder::throttle`](crate::policy::PolicyConfigBuilder::throttle)
    /// states the policy's call timeout.)
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::throttle::ThrottleConfig;
    /// let b = ThrottleConfig::builder().window(Duration::from_secs(40));
    /// assert!(b.timeout(Duration::from_secs(30)).build().is_ok());
    /// // 40 s less a 2 s bucket is 38 s: not enough for 39 s.
    /// assert!(b.timeout(Duration::from_secs(39)).build().is_err());
    /// ```
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// A [`ThrottleConfigError`] naming the setting: `K` below 1 or not
    /// finite, a maximum probability outside `[0, 1]`, a zero window (or
    /// one under a nanosecond per bucket), a window that does not cover
    /// the stated timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::ThrottleConfig;
    /// assert_eq!(ThrottleConfig::builder().k(f64::NAN).build().unwrap_err().field(), "k");
    /// ```
    pub const fn build(self) -> Result<ThrottleConfig, ThrottleConfigError> {
        if !self.k.is_finite() || self.k < 1.0 {
            return Err(ThrottleConfigError::K(self.k));
        }
        if !(self.max_probability >= 0.0 && self.max_probability <= 1.0) {
            return Err(ThrottleConfigError::MaxProbability(self.max_probability));
        }
        let nanos = self.window.as_nanos();
        if nanos < BUCKETS as u128 {
            return Err(ThrottleConfigError::WindowZero);
        }
        if nanos > u64::MAX as u128 {
            return Err(ThrottleConfigError::WindowTooLong);
        }
        let config = ThrottleConfig {
            k: self.k,
            max_probability: self.max_probability,
            window: self.window,
            bucket_nanos: (nanos as u64).div_ceil(BUCKETS as u64),
        };
        if let Some(timeout) = self.timeout {
            if let Err(e) = config.covers(timeout) {
                return Err(e);
            }
        }
        Ok(config)
    }
}

/// A [`ThrottleConfig`] setting that was refused.
///
/// # Examples
///
/// ```
/// use watertight::throttle::{ThrottleConfig, ThrottleConfigError};
/// let e = ThrottleConfig::builder().k(0.9).build().unwrap_err();
/// assert_eq!(e, ThrottleConfigError::K(0.9));
/// assert_eq!(e.to_string(), "throttle k must be finite and at least 1, got 0.9");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ThrottleConfigError {
    /// `K` is below 1 (the throttle would refuse a backend that accepts
    /// everything) or not finite.
    K(f64),
    /// The maximum refusal probability is outside `[0, 1]` (or NaN).
    MaxProbability(f64),
    /// The window is zero (or shorter than one nanosecond per bucket).
    WindowZero,
    /// The window does not fit in `u64` nanoseconds (584 years).
    WindowTooLong,
    /// The window, less one bucket, is shorter than the stated timeout: a
    /// call could end after its admission bucket left the window and its
    /// accept would be lost (go-zero#5011's second mistake).
    WindowShorterThanTimeout {
        /// The window asked for.
        window: Duration,
        /// The timeout it must cover.
        timeout: Duration,
        /// One bucket of that window.
        bucket: Duration,
    },
}

impl ThrottleConfigError {
    /// The setting's name, as the serde and env keys spell it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::ThrottleConfigError;
    /// assert_eq!(ThrottleConfigError::WindowZero.field(), "window");
    /// ```
    pub const fn field(&self) -> &'static str {
        match self {
            ThrottleConfigError::K(_) => "k",
            ThrottleConfigError::MaxProbability(_) => "max_probability",
            ThrottleConfigError::WindowZero
            | ThrottleConfigError::WindowTooLong
            | ThrottleConfigError::WindowShorterThanTimeout { .. } => "window",
        }
    }
}

impl fmt::Display for ThrottleConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleConfigError::K(k) => {
                write!(f, "throttle k must be finite and at least 1, got {k}")
            }
            ThrottleConfigError::MaxProbability(p) => write!(
                f,
                "throttle max_probability must be in [0, 1] (0.9 is 90 %), got {p}"
            ),
            ThrottleConfigError::WindowZero => {
                write!(f, "throttle window must be at least {BUCKETS} ns")
            }
            ThrottleConfigError::WindowTooLong => {
                write!(f, "throttle window must fit in u64 nanoseconds")
            }
            ThrottleConfigError::WindowShorterThanTimeout {
                window,
                timeout,
                bucket,
            } => write!(
                f,
                "throttle window {window:?} less one bucket ({bucket:?}) is shorter than the timeout {timeout:?}"
            ),
        }
    }
}

impl core::error::Error for ThrottleConfigError {}
