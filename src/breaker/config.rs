//! Breaker configuration: defaults, a builder, and typed errors.

use core::fmt;
use core::time::Duration;

use super::time::{MAX_BUCKETS, MIN_BUCKET_NS};
use super::window::MAX_WINDOW;
use super::word::{MAX_DURATION_NS, MAX_PROBES};

/// How a [`CircuitBreaker`](super::CircuitBreaker) decides, validated.
///
/// Made by [`BreakerConfig::builder`] (every field has a default, below), or
/// taken as [`BreakerConfig::DEFAULT`] / [`BreakerConfig::CRITICAL`]. The
/// defaults are the ones resilience guides give for an HTTP dependency, and
/// resilience4j's where it has one: a count window of 50 calls (resilience4j:
/// 100), rates evaluated from 10 calls, a 50 % failure-rate threshold, 30 s
/// open (resilience4j: 60 s), 3 half-open probes.
/// Every builder method and `build` is a `const fn`, so a config for a
/// `static` breaker is checked at compile time.
///
/// | setting | default | |
/// |---|---|---|
/// | `window_size` | 50 | outcomes in the count window (≤ the breaker's `N`; any up to 1023 for a [`HeapBreaker`](super::HeapBreaker)) |
/// | `minimum_calls` | 10 | outcomes in the window before rates are evaluated |
/// | `failure_rate_threshold` | 50 % | trips when the failure rate is at or above it |
/// | `slow_call_duration` | off | a call is slow when it takes strictly longer |
/// | `slow_call_rate_threshold` | 100 % | trips when the slow-call rate is at or above it |
/// | `open_duration` | 30 s | how long it stays open before probes may pass |
/// | `half_open_calls` | 3 | probes admitted per half-open episode (may exceed `window_size`) |
/// | `max_half_open_wait` | none | a probe out this long after the last admission counts as failed |
///
/// Thresholds are percent, as in resilience4j: `30.0` means 30 %. One rule
/// for both: a threshold is kept to a hundredth of a percent (rounded to the
/// nearest), and the value kept must be in (1, 100]. So `1.01` and `100` are
/// accepted, `1.004` (kept as 1.00) and `100.01` are refused, and a value in
/// (0, 1] is refused with a hint that percent is meant, so `0.5` is never
/// read as half a percent.
///
/// `half_open_calls` may be larger than `window_size`: the probes decide
/// through their own count, not through the window (which shows the last
/// `window_size` of them, for metrics), so the two are independent, as in
/// resilience4j (`permittedNumberOfCallsInHalfOpenState`).
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
/// assert_eq!(err.field(), watertight::breaker::BreakerField::FailureRateThreshold);
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
    /// Which window judges the closed state (`KIND_*`), and
    /// [`SLOW_IS_FAILURE`] (consecutive failures: a slow success counts as a
    /// failure).
    pub(crate) kind: u8,
    /// The run of plain successes after which one more changes nothing:
    /// `window_size` for the count window, 0 for consecutive failures (a
    /// success into a run of none changes nothing), never for the time
    /// window. Read by the closed path's inline check, which is the same
    /// for every kind.
    pub(crate) plain_run: u16,
    /// The time window: one bucket's length in milliseconds.
    pub(crate) bucket_ms: u32,
}

/// The flag of [`BreakerConfig::kind`] for `slow_calls_are_failures`.
pub(crate) const SLOW_IS_FAILURE: u8 = 0x10;

/// Which window a [`BreakerConfig`] judges the closed state by.
///
/// | window | trips when | pick it for |
/// |---|---|---|
/// | [`Count`](Self::Count) (the default) | the last `window_size` outcomes fail (or are slow) at the thresholds' rates, once `minimum_calls` are in | steady traffic: the rate of the last N calls, whatever their age |
/// | [`Time`](Self::Time) | the outcomes of the last `duration` fail (or are slow) at the thresholds' rates, once `minimum_calls` are in | low or bursty traffic: "at least 20 calls in the last 30 s, half failing"; an old outage leaves the window with time, however few calls come |
/// | [`Consecutive`](Self::Consecutive) | `failures` outcomes in a row failed; a success resets the run | gobreaker's and Polly v7's classic breaker: a dependency that either works or does not, at any traffic |
///
/// # Examples
///
/// ```
/// use watertight::BreakerConfig;
/// use watertight::breaker::BreakerWindow;
///
/// let config = BreakerConfig::builder()
///     .window(BreakerWindow::Consecutive { failures: 5 })
///     .build()
///     .unwrap();
/// assert_eq!(config.window(), BreakerWindow::Consecutive { failures: 5 });
/// assert_eq!(BreakerConfig::DEFAULT.window(), BreakerWindow::Count);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerWindow {
    /// The last `window_size` outcomes, in a ring (the breaker's `N` slots).
    Count,
    /// The outcomes of the last `duration`, in `buckets` buckets of
    /// `duration / buckets` each (a ring of atomic counters; a bucket that
    /// has left the window is zeroed by the first call that sees it, no
    /// timer). The window at any moment is the current, partial bucket and
    /// the `buckets - 1` before it, as resilience4j's
    /// `SlidingTimeWindowMetrics` (whose buckets are one second each).
    /// `minimum_calls` is the calls the window must hold before rates are
    /// evaluated (not bounded by `window_size`, which is not used); the
    /// thresholds, open wait and probes are the same as the count window's.
    /// Needs a breaker with bucket storage:
    /// [`TimeBreaker<C, B>`](super::TimeBreaker) with `B ≥ buckets`, or a
    /// [`HeapBreaker`](super::HeapBreaker).
    ///
    /// `duration` must divide into whole milliseconds per bucket, a bucket
    /// must be at least 1 ms (the resolution of the coarsest clock), and
    /// `buckets` is 1 to 64.
    Time {
        /// How far back the window reaches.
        duration: Duration,
        /// Buckets it is cut into: 1 to 64.
        buckets: usize,
    },
    /// `failures` failures in a row trip the breaker; any success (and a
    /// slow success too, unless
    /// [`slow_calls_are_failures`](BreakerConfigBuilder::slow_calls_are_failures)
    /// says so) ends the run. Rates, `window_size` and `minimum_calls` are
    /// not used; the open wait and probes are the same. Needs no slots: a
    /// `CircuitBreaker<C, 1>` holds it.
    Consecutive {
        /// Failures in a row that trip: 1 to 1023.
        failures: usize,
    },
}

impl BreakerWindow {
    /// The window's name as the config keys spell it (`cb_window`):
    /// `"count"`, `"time"`, `"consecutive"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::breaker::BreakerWindow;
    /// assert_eq!(BreakerWindow::Consecutive { failures: 3 }.name(), "consecutive");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            BreakerWindow::Count => "count",
            BreakerWindow::Time { .. } => "time",
            BreakerWindow::Consecutive { .. } => "consecutive",
        }
    }
}

/// The window kinds as the machine dispatches on them.
pub(crate) const KIND_COUNT: u8 = 0;
pub(crate) const KIND_TIME: u8 = 1;
pub(crate) const KIND_CONSECUTIVE: u8 = 2;

impl BreakerConfig {
    /// The defaults: window 50, minimum 10 calls, failure rate 50 %, open
    /// 30 s, 3 half-open probes, slow-call detection off (rate threshold
    /// 100 % once a duration is set), no half-open limit.
    pub const DEFAULT: BreakerConfig = match BreakerConfigBuilder::new().build() {
        Ok(c) => c,
        Err(e) => e.panic(),
    };

    /// The preset for critical systems (payments, fiscal receipts): the
    /// defaults with a 30 % failure-rate threshold, so that a payment
    /// provider in trouble is left alone sooner than an ordinary dependency.
    pub const CRITICAL: BreakerConfig = match BreakerConfigBuilder::new()
        .failure_rate_threshold(30.0)
        .build()
    {
        Ok(c) => c,
        Err(e) => e.panic(),
    };

    /// The largest `window_size` a config may have, and so the largest
    /// window any breaker holds: 1023 outcomes (the window's index is 10
    /// bits of its one atomic word). A larger one is refused by
    /// [`build`](BreakerConfigBuilder::build) (and by `Deserialize`) with
    /// [`BreakerConfigError::TooLarge`] naming `window_size`. A
    /// [`HeapBreaker`](super::HeapBreaker) takes any window up to it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::breaker::BreakerField;
    /// use watertight::{BreakerConfig, BreakerConfigError};
    ///
    /// assert_eq!(BreakerConfig::MAX_WINDOW_SIZE, 1023);
    /// let largest = BreakerConfig::builder().window_size(BreakerConfig::MAX_WINDOW_SIZE).build();
    /// assert!(largest.is_ok());
    /// let err = BreakerConfig::builder().window_size(1024).build().unwrap_err();
    /// assert_eq!(
    ///     err,
    ///     BreakerConfigError::TooLarge { field: BreakerField::WindowSize, value: 1024, max: 1023 }
    /// );
    /// ```
    pub const MAX_WINDOW_SIZE: usize = MAX_WINDOW;

    /// A builder starting from the defaults.
    pub const fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder::new()
    }

    /// Outcomes in the count window; 0 for the other windows (they have
    /// none: see [`window`](Self::window)).
    pub const fn window_size(&self) -> usize {
        self.slots_needed()
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

    /// The window the closed state is judged by.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::BreakerConfig;
    /// use watertight::breaker::BreakerWindow;
    ///
    /// let c = BreakerConfig::builder().consecutive_failures(3).build().unwrap();
    /// assert_eq!(c.window(), BreakerWindow::Consecutive { failures: 3 });
    /// ```
    pub const fn window(&self) -> BreakerWindow {
        match self.kind() {
            KIND_CONSECUTIVE => BreakerWindow::Consecutive {
                failures: self.param(),
            },
            KIND_TIME => BreakerWindow::Time {
                duration: Duration::from_millis(self.bucket_ms as u64 * self.param() as u64),
                buckets: self.param(),
            },
            _ => BreakerWindow::Count,
        }
    }

    /// With consecutive failures: whether a slow success counts as a
    /// failure (default true; only matters with a slow-call duration).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::BreakerConfig;
    /// assert!(BreakerConfig::DEFAULT.slow_calls_are_failures());
    /// ```
    pub const fn slow_calls_are_failures(&self) -> bool {
        self.kind & SLOW_IS_FAILURE != 0
    }

    /// The window's kind, as the machine dispatches on it.
    #[inline(always)]
    pub(crate) const fn kind(&self) -> u8 {
        self.kind & 3
    }

    /// The other windows' number (consecutive failures, or buckets), kept
    /// where the count window keeps its size.
    #[inline(always)]
    pub(crate) const fn param(&self) -> usize {
        self.window_size as usize
    }

    /// The buckets the time window needs (0 for the other kinds).
    pub(crate) const fn buckets_needed(&self) -> usize {
        match self.kind() {
            KIND_TIME => self.param(),
            _ => 0,
        }
    }

    /// The time window's settings.
    #[inline]
    pub(crate) const fn time_spec(&self) -> super::time::Spec {
        super::time::Spec {
            bucket_ns: self.bucket_ms as u64 * 1_000_000,
            buckets: self.param(),
        }
    }

    /// The slots the count window needs (0 for the other kinds).
    pub(crate) const fn slots_needed(&self) -> usize {
        match self.kind() {
            KIND_COUNT => self.window_size as usize,
            _ => 0,
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
    window: BreakerWindow,
    slow_calls_are_failures: bool,
}

impl Default for BreakerConfigBuilder {
    fn default() -> Self {
        BreakerConfigBuilder::new()
    }
}

impl BreakerConfigBuilder {
    /// A builder with the defaults (see [`BreakerConfig`]).
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
            window: BreakerWindow::Count,
            slow_calls_are_failures: true,
        }
    }

    /// Which window judges the closed state (default
    /// [`BreakerWindow::Count`]); see [`BreakerWindow`] for when to pick
    /// which.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::BreakerConfig;
    /// use watertight::breaker::BreakerWindow;
    ///
    /// let c = BreakerConfig::builder()
    ///     .window(BreakerWindow::Consecutive { failures: 6 })
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(c.window().name(), "consecutive");
    /// ```
    pub const fn window(mut self, window: BreakerWindow) -> Self {
        self.window = window;
        self
    }

    /// Shorthand for [`window`](Self::window)`(BreakerWindow::Consecutive {
    /// failures })`: trip after `failures` failures in a row (1 to 1023).
    /// gobreaker's default trips on more than 5, that is `6` here.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::breaker::State;
    /// use watertight::clock::ManualClock;
    /// use watertight::{BreakerConfig, CircuitBreaker};
    ///
    /// let config = BreakerConfig::builder().consecutive_failures(2).build().unwrap();
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
    /// b.try_acquire().unwrap().failure();
    /// b.try_acquire().unwrap().success(); // the run is over
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.state(), State::Closed);
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.state(), State::Open);
    /// ```
    pub const fn consecutive_failures(self, failures: usize) -> Self {
        self.window(BreakerWindow::Consecutive { failures })
    }

    /// Shorthand for [`window`](Self::window)`(BreakerWindow::Time {
    /// duration, buckets })`: judge the outcomes of the last `duration`,
    /// kept in `buckets` buckets (see [`BreakerWindow::Time`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::breaker::{State, TimeBreaker};
    /// use watertight::clock::ManualClock;
    /// use watertight::BreakerConfig;
    ///
    /// // At least 4 calls in the last 10 s, half of them failing.
    /// let config = BreakerConfig::builder()
    ///     .time_window(Duration::from_secs(10), 10)
    ///     .minimum_calls(4)
    ///     .build()
    ///     .unwrap();
    /// let clock = ManualClock::new();
    /// let b: TimeBreaker<_, 10> = TimeBreaker::new("x", config, &clock);
    /// for fail in [true, true, false] {
    ///     let p = b.try_acquire().unwrap();
    ///     if fail { p.failure() } else { p.success() }
    /// }
    /// // Ten seconds later the two failures have left the window.
    /// clock.advance(Duration::from_secs(10));
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.state(), State::Closed);
    /// assert_eq!(b.metrics().calls, 1);
    /// ```
    pub const fn time_window(self, duration: Duration, buckets: usize) -> Self {
        self.window(BreakerWindow::Time { duration, buckets })
    }

    /// With consecutive failures and a slow-call duration: whether a slow
    /// success counts as a failure of the run (default true) or as a
    /// success that ends it. A slow failure is a failure either way. The
    /// rate windows count slow calls through
    /// [`slow_call_rate_threshold`](Self::slow_call_rate_threshold) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::BreakerConfig;
    ///
    /// let c = BreakerConfig::builder()
    ///     .consecutive_failures(3)
    ///     .slow_call_duration(Duration::from_secs(2))
    ///     .slow_calls_are_failures(false)
    ///     .build()
    ///     .unwrap();
    /// assert!(!c.slow_calls_are_failures());
    /// ```
    pub const fn slow_calls_are_failures(mut self, yes: bool) -> Self {
        self.slow_calls_are_failures = yes;
        self
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
    /// (default 50): in (1, 100], kept to a hundredth of a percent (see
    /// [`BreakerConfig`] for the rule).
    pub const fn failure_rate_threshold(mut self, percent: f32) -> Self {
        self.failure_rate_threshold = percent;
        self
    }

    /// Trips when the slow-call rate is at or above this many percent
    /// (default 100): in (1, 100], kept to a hundredth of a percent. Used
    /// once a slow-call duration is set.
    pub const fn slow_call_rate_threshold(mut self, percent: f32) -> Self {
        self.slow_call_rate_threshold = percent;
        self
    }

    /// A call that takes strictly longer than this is slow (default: off;
    /// [`no_slow_call_duration`](Self::no_slow_call_duration) turns it off
    /// again). Half the read timeout is the usual choice. Turning it on costs
    /// two reads of the breaker's clock per call; while it is off, a
    /// closed-state call reads no clock.
    ///
    /// # Which clock
    ///
    /// The breaker measures with its own clock, so the threshold decides
    /// which one to give it:
    ///
    /// - **A threshold of seconds (or many milliseconds)**, the usual
    ///   read-timeout-over-two: [`CoarseClock`](crate::clock::CoarseClock)
    ///   (feature `std`). A read is one relaxed load, so the two reads cost
    ///   next to nothing; a duration is exact to about the clock's
    ///   resolution (1 ms by default), which a threshold of many
    ///   resolutions does not notice. When its updater thread is starved, a
    ///   slow call may pass for fast, never the other way round.
    /// - **A threshold below a millisecond, or of a few resolutions**:
    ///   [`StdClock`](crate::clock::StdClock), exact to the nanosecond, at
    ///   the cost of a `std::time::Instant::now()` per read.
    /// - **In tests**: [`ManualClock`](crate::clock::ManualClock), moved by
    ///   hand: no sleeps, exact answers.
    ///
    /// A [`Policy`](crate::Policy) times its breaker on the clock it waits
    /// with unless given one of the breaker's own
    /// ([`Policy::with_breaker_clock`](crate::Policy::with_breaker_clock)):
    /// a coarse clock cannot wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{CoarseClock, ManualClock};
    /// use watertight::{BreakerConfig, CircuitBreaker};
    ///
    /// // A 4 s read timeout: calls over 2 s are slow. Seconds: the coarse clock.
    /// let config = BreakerConfig::builder()
    ///     .slow_call_duration(Duration::from_secs(2))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.slow_call_duration(), Some(Duration::from_secs(2)));
    /// # #[cfg(feature = "std")] {
    /// let db: CircuitBreaker<_, 64> = CircuitBreaker::new("db", config, CoarseClock::new());
    /// db.try_acquire().unwrap().success();
    /// assert_eq!(db.metrics().slow_calls, 0);
    /// # }
    ///
    /// // The same config in a test, on a clock moved by hand.
    /// let clock = ManualClock::new();
    /// let db: CircuitBreaker<_, 64> = CircuitBreaker::new("db", config, &clock);
    /// let permit = db.try_acquire().unwrap();
    /// clock.advance(Duration::from_millis(2001));
    /// permit.success();
    /// assert_eq!(db.metrics().slow_calls, 1);
    /// ```
    pub const fn slow_call_duration(mut self, d: Duration) -> Self {
        self.slow_call_duration = Some(d);
        self
    }

    /// Turns slow-call detection off (the default), undoing
    /// [`slow_call_duration`](Self::slow_call_duration): for a builder
    /// refined from a base that set one.
    ///
    /// (An off switch rather than an `Option<Duration>` argument: the
    /// setters stay `const fn`s taking a plain `Duration`, and a zero
    /// duration stays an error rather than meaning "off".)
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::BreakerConfig;
    ///
    /// let base = BreakerConfig::builder().slow_call_duration(Duration::from_secs(2));
    /// let batch = base.no_slow_call_duration().build().unwrap();
    /// assert_eq!(batch.slow_call_duration(), None);
    /// ```
    pub const fn no_slow_call_duration(mut self) -> Self {
        self.slow_call_duration = None;
        self
    }

    /// How long the breaker stays open before probes may pass (default 30 s).
    pub const fn open_duration(mut self, d: Duration) -> Self {
        self.open_duration = d;
        self
    }

    /// Probes admitted per half-open episode (default 3): 1 to 255, and may
    /// be above `window_size` (the probes are counted apart from the window;
    /// see [`BreakerConfig`]).
    pub const fn half_open_calls(mut self, n: usize) -> Self {
        self.half_open_calls = n;
        self
    }

    /// A half-open episode that has a probe out and has admitted no probe for
    /// this long reopens the breaker, as if the probe had failed (default: no
    /// limit; [`no_max_half_open_wait`](Self::no_max_half_open_wait) removes
    /// it again). Stops a lost probe from wedging the breaker; an episode
    /// with no probe out does not expire.
    pub const fn max_half_open_wait(mut self, d: Duration) -> Self {
        self.max_half_open_wait = Some(d);
        self
    }

    /// No limit on a half-open episode (the default), undoing
    /// [`max_half_open_wait`](Self::max_half_open_wait).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::BreakerConfig;
    ///
    /// let base = BreakerConfig::builder().max_half_open_wait(Duration::from_secs(60));
    /// let patient = base.no_max_half_open_wait().build().unwrap();
    /// assert_eq!(patient.max_half_open_wait(), None);
    /// ```
    pub const fn no_max_half_open_wait(mut self) -> Self {
        self.max_half_open_wait = None;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// A [`BreakerConfigError`] naming the first bad field, its value and
    /// what is allowed: a zero window, minimum, probe count or duration;
    /// `minimum_calls > window_size`; a window above 1023 or more than 255
    /// probes; a threshold that, kept to a hundredth of a percent, is not in
    /// (1, 100] (one in (0, 1] is refused as looking like a fraction); a
    /// duration longer than the breaker's
    /// timestamps can hold (35 years; 37 hours on targets without 64-bit
    /// atomics). The window's fit in the breaker's `N` is checked when the
    /// breaker is made.
    pub const fn build(self) -> Result<BreakerConfig, BreakerConfigError> {
        use BreakerConfigError as E;
        use BreakerField as F;
        if self.window_size == 0 {
            return Err(E::Zero {
                field: F::WindowSize,
            });
        }
        if self.window_size > MAX_WINDOW {
            return Err(E::TooLarge {
                field: F::WindowSize,
                value: self.window_size,
                max: MAX_WINDOW,
            });
        }
        if self.minimum_calls == 0 {
            return Err(E::Zero {
                field: F::MinimumCalls,
            });
        }
        if matches!(self.window, BreakerWindow::Count) && self.minimum_calls > self.window_size {
            return Err(E::MinimumCallsAboveWindow {
                minimum_calls: self.minimum_calls,
                window_size: self.window_size,
            });
        }
        let failure_bp = match percent(F::FailureRateThreshold, self.failure_rate_threshold) {
            Ok(bp) => bp,
            Err(e) => return Err(e),
        };
        let slow_bp = match percent(F::SlowCallRateThreshold, self.slow_call_rate_threshold) {
            Ok(bp) => bp,
            Err(e) => return Err(e),
        };
        let slow_ns = match self.slow_call_duration {
            None => 0,
            Some(d) => match nanos(F::SlowCallDuration, d) {
                Ok(ns) => ns,
                Err(e) => return Err(e),
            },
        };
        let open_ns = match nanos(F::OpenDuration, self.open_duration) {
            Ok(ns) => ns,
            Err(e) => return Err(e),
        };
        if self.half_open_calls == 0 {
            return Err(E::Zero {
                field: F::HalfOpenCalls,
            });
        }
        if self.half_open_calls > MAX_PROBES {
            return Err(E::TooLarge {
                field: F::HalfOpenCalls,
                value: self.half_open_calls,
                max: MAX_PROBES,
            });
        }
        let max_half_open_ns = match self.max_half_open_wait {
            None => 0,
            Some(d) => match nanos(F::MaxHalfOpenWait, d) {
                Ok(ns) => ns,
                Err(e) => return Err(e),
            },
        };
        let mut bucket_ms = 0;
        let (kind, plain_run, param) = match self.window {
            BreakerWindow::Count => (KIND_COUNT, self.window_size as u16, 0),
            BreakerWindow::Consecutive { failures } => {
                if failures == 0 {
                    return Err(E::Zero {
                        field: F::ConsecutiveFailures,
                    });
                }
                if failures > MAX_WINDOW {
                    return Err(E::TooLarge {
                        field: F::ConsecutiveFailures,
                        value: failures,
                        max: MAX_WINDOW,
                    });
                }
                (KIND_CONSECUTIVE, 0, failures as u16)
            }
            BreakerWindow::Time { duration, buckets } => {
                if buckets == 0 {
                    return Err(E::Zero {
                        field: F::WindowBuckets,
                    });
                }
                if buckets > MAX_BUCKETS {
                    return Err(E::TooLarge {
                        field: F::WindowBuckets,
                        value: buckets,
                        max: MAX_BUCKETS,
                    });
                }
                let ns = match nanos(F::WindowDuration, duration) {
                    Ok(ns) => ns,
                    Err(e) => return Err(e),
                };
                let per = ns / buckets as u64;
                if per < MIN_BUCKET_NS {
                    return Err(E::BucketTooShort {
                        bucket: Duration::from_nanos(per),
                        min: Duration::from_nanos(MIN_BUCKET_NS),
                    });
                }
                if ns % (buckets as u64 * MIN_BUCKET_NS) != 0 {
                    return Err(E::BucketsNotWhole { duration, buckets });
                }
                if self.minimum_calls > MAX_WINDOW {
                    return Err(E::TooLarge {
                        field: F::MinimumCalls,
                        value: self.minimum_calls,
                        max: MAX_WINDOW,
                    });
                }
                // At most 35 years (or 37 hours) in at least one bucket:
                // fits in 32 bits of milliseconds.
                bucket_ms = (per / MIN_BUCKET_NS) as u32;
                // No success is ever taken without a write: the run field
                // never reaches this.
                (KIND_TIME, u16::MAX, buckets as u16)
            }
        };
        Ok(BreakerConfig {
            window_size: if kind == KIND_COUNT {
                self.window_size as u16
            } else {
                param
            },
            minimum_calls: self.minimum_calls as u16,
            failure_bp,
            slow_bp,
            slow_ns,
            open_ns,
            max_half_open_ns,
            half_open_calls: self.half_open_calls as u8,
            kind: kind
                | if self.slow_calls_are_failures {
                    SLOW_IS_FAILURE
                } else {
                    0
                },
            plain_run,
            bucket_ms,
        })
    }
}

/// A threshold in percent, as hundredths of a percent: the rule of
/// [`BreakerConfig`]'s thresholds, checked on the value as kept.
const fn percent(field: BreakerField, p: f32) -> Result<u16, BreakerConfigError> {
    // `as` saturates (NaN and negatives become 0), so every input lands on
    // a whole number of hundredths, rounded to the nearest.
    let bp = (p * 100.0 + 0.5) as u32;
    // Written so that NaN fails the range check too.
    if bp > MIN_BP && bp <= MAX_BP && p <= 100.0 {
        return Ok(bp as u16);
    }
    if p > 0.0 && p <= 1.0 {
        return Err(BreakerConfigError::ThresholdLooksLikeFraction { field, value: p });
    }
    Err(BreakerConfigError::ThresholdOutOfRange { field, value: p })
}

/// 1 % in hundredths of a percent: thresholds must be above it.
const MIN_BP: u32 = 100;
/// 100 % in hundredths of a percent: the highest threshold.
const MAX_BP: u32 = 10_000;

const fn nanos(field: BreakerField, d: Duration) -> Result<u64, BreakerConfigError> {
    if d.is_zero() {
        return Err(BreakerConfigError::Zero { field });
    }
    let ns = d.as_nanos();
    if ns > MAX_DURATION_NS as u128 {
        return Err(BreakerConfigError::DurationTooLong {
            field,
            value: d,
            max: Duration::from_nanos(MAX_DURATION_NS),
        });
    }
    Ok(ns as u64)
}

/// A setting of a [`BreakerConfig`], as [`BreakerConfigError::field`] names
/// it: match on it to map errors; [`name`](Self::name) is how the builder
/// spells it, for messages.
///
/// # Examples
///
/// ```
/// use watertight::BreakerConfig;
/// use watertight::breaker::BreakerField;
///
/// let err = BreakerConfig::builder().minimum_calls(0).build().unwrap_err();
/// assert_eq!(err.field(), BreakerField::MinimumCalls);
/// assert_eq!(err.field().name(), "minimum_calls");
/// assert_eq!(err.field(), "minimum_calls"); // compares the name
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerField {
    /// `window_size`.
    WindowSize,
    /// `minimum_calls`.
    MinimumCalls,
    /// `failure_rate_threshold`.
    FailureRateThreshold,
    /// `slow_call_rate_threshold`.
    SlowCallRateThreshold,
    /// `slow_call_duration`.
    SlowCallDuration,
    /// `open_duration`.
    OpenDuration,
    /// `half_open_calls`.
    HalfOpenCalls,
    /// `max_half_open_wait`.
    MaxHalfOpenWait,
    /// `consecutive_failures` (of [`BreakerWindow::Consecutive`]).
    ConsecutiveFailures,
    /// `window_duration` (of [`BreakerWindow::Time`]).
    WindowDuration,
    /// `window_buckets` (of [`BreakerWindow::Time`]).
    WindowBuckets,
}

impl BreakerField {
    /// The setting's name, as the builder spells it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::breaker::BreakerField;
    /// assert_eq!(BreakerField::OpenDuration.name(), "open_duration");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            BreakerField::WindowSize => "window_size",
            BreakerField::MinimumCalls => "minimum_calls",
            BreakerField::FailureRateThreshold => "failure_rate_threshold",
            BreakerField::SlowCallRateThreshold => "slow_call_rate_threshold",
            BreakerField::SlowCallDuration => "slow_call_duration",
            BreakerField::OpenDuration => "open_duration",
            BreakerField::HalfOpenCalls => "half_open_calls",
            BreakerField::MaxHalfOpenWait => "max_half_open_wait",
            BreakerField::ConsecutiveFailures => "consecutive_failures",
            BreakerField::WindowDuration => "window_duration",
            BreakerField::WindowBuckets => "window_buckets",
        }
    }
}

impl fmt::Display for BreakerField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field equals its [`name`](BreakerField::name).
impl PartialEq<&str> for BreakerField {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

/// A breaker setting that cannot work: the field, the value asked for and
/// what is allowed.
///
/// Returned by [`BreakerConfigBuilder::build`] and
/// [`CircuitBreaker::try_new`](super::CircuitBreaker::try_new); never a silent
/// clamp. Its message (`Display`, and [`panic`](Self::panic) after
/// "breaker config: ") reads "`field` is `value`; allowed: `range`".
///
/// `PartialEq` but not `Eq`: the threshold errors carry the `f32` asked for
/// (which may be NaN).
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, BreakerConfigError};
/// use watertight::breaker::BreakerField;
///
/// let err = BreakerConfig::builder().failure_rate_threshold(0.3).build().unwrap_err();
/// assert_eq!(
///     err,
///     BreakerConfigError::ThresholdLooksLikeFraction {
///         field: BreakerField::FailureRateThreshold,
///         value: 0.3,
///     }
/// );
/// assert_eq!(
///     err.to_string(),
///     "failure_rate_threshold is 0.3, a fraction (write 30 for 30 %); \
///      allowed: percent in (1, 100], to a hundredth (30 means 30 %)"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum BreakerConfigError {
    /// The field is zero, and must not be.
    Zero {
        /// The setting.
        field: BreakerField,
    },
    /// The field is above what the breaker can hold.
    TooLarge {
        /// The setting.
        field: BreakerField,
        /// The value asked for.
        value: usize,
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
    /// A threshold is not in (1, 100] percent once kept to a hundredth of a
    /// percent (1.004 is kept as 1.00, and refused), or is NaN.
    ThresholdOutOfRange {
        /// The setting.
        field: BreakerField,
        /// The value asked for.
        value: f32,
    },
    /// A threshold is in (0, 1]: thresholds are percent, so `0.5` would mean
    /// half a percent. Write `50.0` for 50 %.
    ThresholdLooksLikeFraction {
        /// The setting.
        field: BreakerField,
        /// The value asked for.
        value: f32,
    },
    /// The time window's `duration` does not divide into `buckets` buckets
    /// of a whole number of milliseconds each.
    BucketsNotWhole {
        /// The window's duration.
        duration: Duration,
        /// The buckets asked for.
        buckets: usize,
    },
    /// The time window's buckets (`duration / buckets`) are shorter than
    /// the coarsest clock's resolution (1 ms): a clock that moves by the
    /// millisecond would skip buckets.
    BucketTooShort {
        /// One bucket's length.
        bucket: Duration,
        /// The shortest bucket accepted.
        min: Duration,
    },
    /// `buckets` is larger than the breaker's bucket capacity (the `B` of
    /// [`TimeBreaker<C, B>`](super::TimeBreaker); 0 for a count-window
    /// breaker).
    BucketsAboveCapacity {
        /// The buckets asked for.
        buckets: usize,
        /// The breaker's bucket capacity.
        capacity: usize,
    },
    /// A duration is longer than the breaker's timestamps can hold.
    DurationTooLong {
        /// The setting.
        field: BreakerField,
        /// The duration asked for.
        value: Duration,
        /// The longest duration accepted on this target.
        max: Duration,
    },
}

/// What a threshold may be, in every message that refuses one.
const THRESHOLD_RANGE: &str = "percent in (1, 100], to a hundredth (30 means 30 %)";

impl BreakerConfigError {
    /// The setting at fault.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::BreakerConfig;
    /// use watertight::breaker::BreakerField;
    ///
    /// let err = BreakerConfig::builder().window_size(4).minimum_calls(5).build().unwrap_err();
    /// assert_eq!(err.field(), BreakerField::MinimumCalls);
    /// ```
    pub const fn field(&self) -> BreakerField {
        match *self {
            BreakerConfigError::Zero { field }
            | BreakerConfigError::TooLarge { field, .. }
            | BreakerConfigError::ThresholdOutOfRange { field, .. }
            | BreakerConfigError::ThresholdLooksLikeFraction { field, .. }
            | BreakerConfigError::DurationTooLong { field, .. } => field,
            BreakerConfigError::MinimumCallsAboveWindow { .. } => BreakerField::MinimumCalls,
            BreakerConfigError::WindowAboveCapacity { .. } => BreakerField::WindowSize,
            BreakerConfigError::BucketsNotWhole { .. }
            | BreakerConfigError::BucketTooShort { .. }
            | BreakerConfigError::BucketsAboveCapacity { .. } => BreakerField::WindowBuckets,
        }
    }

    /// The message, built in a `const` context (for [`panic`](Self::panic)).
    const fn message(&self) -> Msg {
        let mut m = Msg::new();
        match *self {
            BreakerConfigError::Zero { field } => {
                m.str(field.name());
                m.str(" is 0; allowed: ");
                match field {
                    BreakerField::WindowSize => {
                        m.str("1 to ");
                        m.uint(MAX_WINDOW as u64);
                        m.str(", and at most the breaker's capacity N");
                    }
                    BreakerField::MinimumCalls => m.str("1 to window_size"),
                    BreakerField::HalfOpenCalls => {
                        m.str("1 to ");
                        m.uint(MAX_PROBES as u64);
                    }
                    BreakerField::ConsecutiveFailures => {
                        m.str("1 to ");
                        m.uint(MAX_WINDOW as u64);
                    }
                    BreakerField::WindowBuckets => {
                        m.str("1 to ");
                        m.uint(MAX_BUCKETS as u64);
                    }
                    _ => {
                        m.str("above zero, up to ");
                        m.duration(Duration::from_nanos(MAX_DURATION_NS));
                    }
                }
            }
            BreakerConfigError::TooLarge { field, value, max } => {
                m.str(field.name());
                m.str(" is ");
                m.uint(value as u64);
                m.str("; allowed: 1 to ");
                m.uint(max as u64);
            }
            BreakerConfigError::MinimumCallsAboveWindow {
                minimum_calls,
                window_size,
            } => {
                m.str("minimum_calls is ");
                m.uint(minimum_calls as u64);
                m.str("; allowed: 1 to window_size (");
                m.uint(window_size as u64);
                m.str(")");
            }
            BreakerConfigError::WindowAboveCapacity {
                window_size,
                capacity,
            } => {
                m.str("window_size is ");
                m.uint(window_size as u64);
                m.str("; allowed: 1 to the breaker's capacity N (");
                m.uint(capacity as u64);
                m.str(")");
            }
            BreakerConfigError::ThresholdOutOfRange { field, value } => {
                m.str(field.name());
                m.str(" is ");
                m.float(value);
                m.str("; allowed: ");
                m.str(THRESHOLD_RANGE);
            }
            BreakerConfigError::ThresholdLooksLikeFraction { field, value } => {
                m.str(field.name());
                m.str(" is ");
                m.float(value);
                m.str(", a fraction (write ");
                m.float(value * 100.0);
                m.str(" for ");
                m.float(value * 100.0);
                m.str(" %); allowed: ");
                m.str(THRESHOLD_RANGE);
            }
            BreakerConfigError::BucketsNotWhole { duration, buckets } => {
                m.str("window_buckets is ");
                m.uint(buckets as u64);
                m.str(", which does not divide window_duration (");
                m.duration(duration);
                m.str(") into whole milliseconds; allowed: a divisor of it in ms");
            }
            BreakerConfigError::BucketTooShort { bucket, min } => {
                m.str("window_buckets makes buckets of ");
                m.duration(bucket);
                m.str("; allowed: buckets of at least ");
                m.duration(min);
                m.str(" (fewer buckets, or a longer window)");
            }
            BreakerConfigError::BucketsAboveCapacity { buckets, capacity } => {
                m.str("window_buckets is ");
                m.uint(buckets as u64);
                m.str("; allowed: 1 to the breaker's bucket capacity B (");
                m.uint(capacity as u64);
                m.str(")");
            }
            BreakerConfigError::DurationTooLong { field, value, max } => {
                m.str(field.name());
                m.str(" is ");
                m.duration(value);
                m.str("; allowed: above zero, up to ");
                m.duration(max);
            }
        }
        m
    }

    /// Panics with this error's message (the field, the value and what is
    /// allowed, after "breaker config: "): for `const` configs, where the
    /// panic is a compile-time error.
    ///
    /// # Panics
    ///
    /// Always.
    ///
    /// # Examples
    ///
    /// ```should_panic
    /// use watertight::BreakerConfig;
    ///
    /// const PROBES: BreakerConfig = match BreakerConfig::builder().half_open_calls(3).build() {
    ///     Ok(config) => config,
    ///     Err(e) => e.panic(), // a compile-time error, naming the field
    /// };
    /// assert_eq!(PROBES.half_open_calls(), 3);
    /// // At run time it is a panic: "breaker config: half_open_calls is 300;
    /// // allowed: 1 to 255".
    /// match BreakerConfig::builder().half_open_calls(300).build() {
    ///     Ok(_) => unreachable!(),
    ///     Err(e) => e.panic(),
    /// }
    /// ```
    #[track_caller]
    pub const fn panic(self) -> ! {
        let mut m = Msg::new();
        m.str("breaker config: ");
        let body = self.message();
        m.str(body.as_str());
        panic!("{}", m.as_str())
    }
}

impl fmt::Display for BreakerConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message().as_str())
    }
}

impl core::error::Error for BreakerConfigError {}

/// A message built in a `const fn`, where `format!` is not available: a
/// fixed buffer, cut short (at a character boundary) if it ever filled up.
struct Msg {
    buf: [u8; 192],
    len: usize,
}

impl Msg {
    const fn new() -> Self {
        Msg {
            buf: [0; 192],
            len: 0,
        }
    }

    const fn byte(&mut self, b: u8) {
        if self.len < self.buf.len() {
            self.buf[self.len] = b;
            self.len += 1;
        }
    }

    const fn str(&mut self, s: &str) {
        let s = s.as_bytes();
        // Whole characters only, so the buffer stays UTF-8.
        if self.len + s.len() > self.buf.len() {
            return;
        }
        let mut i = 0;
        while i < s.len() {
            self.byte(s[i]);
            i += 1;
        }
    }

    const fn uint(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        while i < digits.len() {
            self.byte(digits[i]);
            i += 1;
        }
    }

    /// Up to four decimals, trailing zeros dropped: `0.3`, `1.001`, `150`.
    #[allow(clippy::eq_op)] // `p != p` is the NaN test in a `const fn`
    const fn float(&mut self, p: f32) {
        if p != p {
            self.str("NaN");
            return;
        }
        let mut a = p;
        if a < 0.0 {
            self.byte(b'-');
            a = -a;
        }
        if a >= 1e15 {
            self.str("over 1e15");
            return;
        }
        // Ten-thousandths, rounded, in f32 (single precision is what a
        // Cortex-M4F does in hardware): exact for the thresholds of
        // interest, and about seven significant digits for the rest.
        let scaled = (a * 10_000.0 + 0.5) as u64;
        self.uint(scaled / 10_000);
        let mut frac = scaled % 10_000;
        if frac != 0 {
            self.byte(b'.');
            let mut div = 1_000;
            while frac != 0 {
                self.byte(b'0' + (frac / div) as u8);
                frac %= div;
                div /= 10;
            }
        }
    }

    /// Whole seconds as `30 s`; otherwise nanoseconds, `1500000 ns`.
    const fn duration(&mut self, d: Duration) {
        if d.subsec_nanos() == 0 {
            self.uint(d.as_secs());
            self.str(" s");
        } else if d.as_secs() < 18_000_000_000 {
            self.uint(d.as_secs() * 1_000_000_000 + d.subsec_nanos() as u64);
            self.str(" ns");
        } else {
            self.uint(d.as_secs());
            self.str(" s and a fraction");
        }
    }

    const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.buf.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => "",
        }
    }
}
