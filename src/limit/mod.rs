//! Adaptive concurrency: limit algorithms that measure how many calls a
//! system handles at once with acceptable latency, and keep measuring.
//!
//! A fixed bulkhead capacity is a guess ("80 % of the pool", "200 in
//! flight") that goes stale the moment the system behind it gets slower or
//! faster. A [`LimitAlgorithm`] reads what the calls of one *window* saw —
//! their round-trip times and outcomes, summed up in a [`Window`] — and
//! answers with the next limit, always inside its `[min, max]` bounds.
//!
//! | algorithm | signal | reacts to | source |
//! |---|---|---|---|
//! | [`Aimd`] | loss | a dropped or timed-out call (backs off by 10 %), else grows by one while the limit is in use | Netflix concurrency-limits `AIMDLimit` |
//! | [`Gradient2`] | latency | the window's average RTT against a long-term average of it; a drop or timeout as the steepest gradient | Netflix concurrency-limits `Gradient2Limit` |
//!
//! Both keep their source's published defaults (written on each type) and
//! take no allocation, no `std` and no floating-point function beyond
//! `+ - * /`, so they run on a microcontroller too.
//!
//! Not here (yet): Envoy's adaptive concurrency filter. Its gradient
//! controller compares each window's latency (the p50 of its samples, by
//! default) with a *minimum* RTT measured on purpose, by periodically
//! holding the limit at a very low count (3 by default) for a number of
//! requests (50), at intervals with a jitter (15 %), plus a buffer; the
//! limit is capped at 1000 by default. That re-measurement is what keeps a
//! minimum-based baseline honest, at the cost of throttling every caller
//! during it; `Gradient2` avoids the pause with its long-term average
//! instead, and needs its 0.95 decay for the same reason.
//!
//! # The failure modes they are built against
//!
//! - **A dropped or refused call must not look like a fast one.** A call the
//!   system refused for load (a 429, a 503, a full queue) or that the caller
//!   gave up on returns quickly; averaged in with the successes it makes
//!   the system look faster just when it is overloaded, and a latency
//!   algorithm then raises the limit into the overload (Netflix's
//!   `Gradient2Limit` ignores `didDrop`, and its drops' RTTs enter the
//!   average: reported against concurrency-limits). Here only a
//!   [`Signal::Success`] contributes its round-trip time to
//!   [`Window::avg_rtt`]; [`Signal::Dropped`] and [`Signal::Timeout`] are
//!   counted as congestion, never as time.
//! - **Steady timeouts must not push the limit up.** Calls that hang hold
//!   their permits until they time out, so in flight stays high — exactly
//!   the condition under which AIMD grows — while the calls that do finish
//!   are the quick ones. Here a window with any timed-out call never grows
//!   the limit: [`Aimd`] backs off, [`Gradient2`] takes its floor gradient.
//! - **A window without evidence changes nothing.** A window with no
//!   success and no congestion (only [`Signal::Failure`]s: errors that say
//!   nothing about load; the circuit breaker's business) leaves the limit
//!   where it was, and so does a window in which the limit was not in use
//!   (an application-limited caller says nothing about the system's
//!   capacity).
//!
//! # Examples
//!
//! ```
//! use core::time::Duration;
//! use watertight::limit::{Aimd, LimitAlgorithm, Window};
//!
//! let mut aimd = Aimd::new();
//! assert_eq!(aimd.limit(), 20);
//! // A busy window of quick successes: one more.
//! let busy = Window { successes: 50, avg_rtt: Some(Duration::from_millis(10)), max_in_flight: 20, ..Window::EMPTY };
//! assert_eq!(aimd.update(&busy), 21);
//! // A window with a drop: back off by 10 %, never below the minimum (20).
//! let dropped = Window { dropped: 1, ..busy };
//! assert_eq!(aimd.update(&dropped), 20);
//! ```

use core::fmt;
use core::time::Duration;

mod adaptive;
mod aimd;
mod gradient2;
mod samples;

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use adaptive::OwnedAdaptivePermit;
pub use adaptive::{AdaptiveBulkhead, AdaptiveLimit, AdaptivePermit, LimitChange, Resizable};
pub use aimd::{Aimd, AimdBuilder};
pub use gradient2::{Gradient2, Gradient2Builder};

/// What one finished call says about the system, for a limit algorithm.
///
/// # Examples
///
/// ```
/// use watertight::limit::Signal;
///
/// // An HTTP client's mapping: 429 and 503 are the system shedding load.
/// fn signal(status: u16) -> Signal {
///     match status {
///         200..=399 => Signal::Success,
///         429 | 503 => Signal::Dropped,
///         _ => Signal::Failure,
///     }
/// }
/// assert_eq!(signal(503), Signal::Dropped);
/// assert!(Signal::Timeout.is_congestion());
/// assert!(!Signal::Failure.is_congestion());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// The call completed; its round-trip time is a latency sample.
    Success,
    /// The call failed for a reason that says nothing about load (a 404, a
    /// validation error, a 500 from a bug): neither a latency sample nor
    /// congestion.
    Failure,
    /// The system refused the call for load (a 429, a 503, a full queue): a
    /// congestion signal; its (short) round-trip time is not a latency sample.
    Dropped,
    /// The call ran out of time: a congestion signal; its round-trip time
    /// (the timeout) is not a latency sample.
    Timeout,
}

impl Signal {
    /// Whether the signal is congestion ([`Dropped`](Self::Dropped) or
    /// [`Timeout`](Self::Timeout)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Signal;
    ///
    /// assert!(Signal::Dropped.is_congestion());
    /// assert!(!Signal::Success.is_congestion());
    /// ```
    pub const fn is_congestion(self) -> bool {
        matches!(self, Signal::Dropped | Signal::Timeout)
    }
}

/// What the calls that finished in one window saw: the input of a
/// [`LimitAlgorithm`].
///
/// Netflix's `WindowedLimit` hands its algorithms the same summary (the
/// window's average RTT, the most calls in flight, whether any call
/// dropped); here the counts are kept apart, and the average is of
/// successes only (see the [module](self) docs).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::limit::Window;
///
/// let w = Window { successes: 9, dropped: 1, avg_rtt: Some(Duration::from_millis(12)), max_in_flight: 7, ..Window::EMPTY };
/// assert_eq!(w.samples(), 10);
/// assert!(w.congested());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// Calls that succeeded.
    pub successes: usize,
    /// The average round-trip time of the successes (`None` without any).
    pub avg_rtt: Option<Duration>,
    /// The most calls in flight seen by a call of the window as it finished
    /// (itself included).
    pub max_in_flight: usize,
    /// Calls that failed without saying anything about load.
    pub failed: usize,
    /// Calls the system refused for load.
    pub dropped: usize,
    /// Calls that ran out of time.
    pub timed_out: usize,
}

impl Window {
    /// A window in which nothing finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Window;
    ///
    /// assert_eq!(Window::EMPTY.samples(), 0);
    /// assert_eq!(Window::EMPTY, Window::default());
    /// ```
    pub const EMPTY: Window = Window {
        successes: 0,
        avg_rtt: None,
        max_in_flight: 0,
        failed: 0,
        dropped: 0,
        timed_out: 0,
    };

    /// Every call of the window, whatever its signal.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Window;
    ///
    /// let w = Window { successes: 3, failed: 1, timed_out: 2, ..Window::EMPTY };
    /// assert_eq!(w.samples(), 6);
    /// ```
    pub const fn samples(&self) -> usize {
        self.successes
            .saturating_add(self.failed)
            .saturating_add(self.dropped)
            .saturating_add(self.timed_out)
    }

    /// Whether any call of the window was dropped or timed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Window;
    ///
    /// assert!(Window { timed_out: 1, ..Window::EMPTY }.congested());
    /// assert!(!Window { failed: 5, ..Window::EMPTY }.congested());
    /// ```
    pub const fn congested(&self) -> bool {
        self.dropped > 0 || self.timed_out > 0
    }
}

/// An algorithm that turns windows of samples into a concurrency limit.
///
/// # Contract for implementors
///
/// - [`limit`](Self::limit) and every value [`update`](Self::update)
///   returns lie in `[min_limit(), max_limit()]`, and `1 <= min_limit() <=
///   max_limit()`.
/// - `update` never panics, whatever the window holds (zero counts, an
///   `avg_rtt` of zero or of `Duration::MAX`).
///
/// The adaptive bulkhead calls `update` from whichever call closes a
/// window, one at a time, never concurrently; it needs no synchronisation
/// of its own.
///
/// # Examples
///
/// A limit that halves on any congestion and otherwise stays (an
/// illustration of the trait, not a good algorithm):
///
/// ```
/// use watertight::limit::{LimitAlgorithm, Window};
///
/// struct Halving(usize);
///
/// impl LimitAlgorithm for Halving {
///     fn limit(&self) -> usize { self.0 }
///     fn min_limit(&self) -> usize { 1 }
///     fn max_limit(&self) -> usize { 64 }
///     fn update(&mut self, window: &Window) -> usize {
///         if window.congested() {
///             self.0 = (self.0 / 2).max(1);
///         }
///         self.0
///     }
/// }
///
/// let mut h = Halving(64);
/// assert_eq!(h.update(&Window { dropped: 1, ..Window::EMPTY }), 32);
/// ```
pub trait LimitAlgorithm {
    /// The current limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2::new().limit(), 20);
    /// ```
    fn limit(&self) -> usize;

    /// The lowest limit the algorithm may answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// assert_eq!(Aimd::builder().min_limit(2).build().unwrap().min_limit(), 2);
    /// ```
    fn min_limit(&self) -> usize;

    /// The highest limit the algorithm may answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// assert_eq!(Aimd::new().max_limit(), 200);
    /// ```
    fn max_limit(&self) -> usize;

    /// Reads one closed window and returns the new limit, within
    /// `[min_limit(), max_limit()]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm, Window};
    ///
    /// let mut aimd = Aimd::builder().initial_limit(30).build().unwrap();
    /// assert_eq!(aimd.update(&Window { dropped: 2, ..Window::EMPTY }), 27);
    /// ```
    fn update(&mut self, window: &Window) -> usize;
}

/// A limit algorithm's setting that cannot work, from the algorithms'
/// `build`; each variant names the setting.
///
/// # Examples
///
/// ```
/// use watertight::limit::{Aimd, LimitConfigError};
///
/// assert_eq!(Aimd::builder().min_limit(0).build().unwrap_err(), LimitConfigError::ZeroMinLimit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LimitConfigError {
    /// `min_limit` is zero: a limit of zero refuses every call for ever.
    ZeroMinLimit,
    /// `min_limit` is above `max_limit`.
    MinAboveMax {
        /// The minimum asked for.
        min: usize,
        /// The maximum asked for.
        max: usize,
    },
    /// `max_limit` is above [`Bulkhead::MAX_PERMITS`](crate::bulkhead::Bulkhead::MAX_PERMITS).
    MaxTooLarge {
        /// The maximum asked for.
        max: usize,
        /// The largest a bulkhead can hold.
        permitted: usize,
    },
    /// `initial_limit` lies outside `[min_limit, max_limit]`.
    InitialOutOfBounds {
        /// The initial limit asked for.
        initial: usize,
    },
    /// A ratio or factor lies outside its range (named by `setting`).
    OutOfRange {
        /// The setting's name (`"backoff_ratio"`, `"smoothing"`, …).
        setting: &'static str,
        /// The value asked for.
        value: f64,
    },
    /// A duration setting is zero.
    ZeroDuration {
        /// The setting's name.
        setting: &'static str,
    },
}

impl fmt::Display for LimitConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitConfigError::ZeroMinLimit => f.write_str("min_limit must be at least 1"),
            LimitConfigError::MinAboveMax { min, max } => {
                write!(f, "min_limit ({min}) is above max_limit ({max})")
            }
            LimitConfigError::MaxTooLarge { max, permitted } => {
                write!(
                    f,
                    "max_limit ({max}) is above the largest bulkhead ({permitted})"
                )
            }
            LimitConfigError::InitialOutOfBounds { initial } => {
                write!(
                    f,
                    "initial_limit ({initial}) is outside [min_limit, max_limit]"
                )
            }
            LimitConfigError::OutOfRange { setting, value } => {
                write!(f, "{setting} ({value}) is out of its range")
            }
            LimitConfigError::ZeroDuration { setting } => write!(f, "{setting} must not be zero"),
        }
    }
}

impl core::error::Error for LimitConfigError {}

/// The bounds every algorithm's builder checks.
fn check_bounds(min: usize, max: usize, initial: usize) -> Result<(), LimitConfigError> {
    if min == 0 {
        return Err(LimitConfigError::ZeroMinLimit);
    }
    if min > max {
        return Err(LimitConfigError::MinAboveMax { min, max });
    }
    let permitted = crate::bulkhead::Bulkhead::<()>::MAX_PERMITS;
    if max > permitted {
        return Err(LimitConfigError::MaxTooLarge { max, permitted });
    }
    if initial < min || initial > max {
        return Err(LimitConfigError::InitialOutOfBounds { initial });
    }
    Ok(())
}

/// `value` within `[lo, hi]` (`lo` for NaN), or an error naming `setting`.
fn check_range(
    setting: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
) -> Result<(), LimitConfigError> {
    if value >= lo && value <= hi {
        Ok(())
    } else {
        Err(LimitConfigError::OutOfRange { setting, value })
    }
}
