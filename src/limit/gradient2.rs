//! [`Gradient2`]: the window's latency against its long-term average.

use core::time::Duration;

use super::{check_bounds, check_range, LimitAlgorithm, LimitConfigError, Window};

/// Latency-based limit: shrinks when the window's average round-trip time
/// rises above a long-term average of it, grows by a small allowance while
/// it does not.
///
/// For each closed window with at least one success, with `L` the
/// estimated limit (a real number; the limit is its floor) and `rtt` the
/// window's average RTT of successes:
///
/// ```text
/// long = long_term_average(rtt)       // the mean of the first 10 windows, then an
///                                     // exponential average, factor 2 / (600 + 1)
/// if long / rtt > 2: long = long × 0.95   // recovering from overload: let it fall faster
/// if max_in_flight < L / 2: L' = L        // not in use: no evidence
/// gradient = clamp(tolerance × long / rtt, 0.5, 1.0)
/// L' = L × (1 − smoothing) + (L × gradient + queue_size) × smoothing
/// L' = clamp(L', min_limit, max_limit)
/// ```
///
/// This is Netflix concurrency-limits' `Gradient2Limit`, with its defaults:
/// initial limit 20, bounds `[20, 200]`, smoothing 0.2, queue size 4,
/// RTT tolerance 1.5, a long window of 600 samples after a warm-up of 10.
/// Each window is one sample, as under Netflix's `WindowedLimit`.
///
/// Where it differs, for the failure modes in the [module](super) docs:
/// `Gradient2Limit` has no `didDrop` branch, and a dropped call's short RTT
/// enters its average, so an overloaded system that sheds load fast looks
/// fast. Here the average is of successes only, and a window with a drop
/// or a timeout takes the floor gradient without the queue allowance:
///
/// ```text
/// L' = L × (1 − smoothing) + L × 0.5 × smoothing      // = 0.9 × L with the defaults
/// ```
///
/// (AIMD's backoff, from the same evidence.) A window of failures only
/// changes nothing, and neither does one without successes or congestion.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::limit::{Gradient2, LimitAlgorithm, Window};
///
/// let mut g = Gradient2::builder().min_limit(1).build().unwrap();
/// let at = |ms, in_flight| Window {
///     successes: 50,
///     avg_rtt: Some(Duration::from_millis(ms)),
///     max_in_flight: in_flight,
///     ..Window::EMPTY
/// };
/// // Latency at its usual level: 20 × 0.8 + (20 + 4) × 0.2 = 20.8.
/// assert_eq!(g.update(&at(10, 20)), 20);
/// // A drop: 20.8 × 0.9 = 18.72.
/// assert_eq!(g.update(&Window { dropped: 1, ..at(10, 20) }), 18);
/// ```
#[derive(Debug, Clone)]
pub struct Gradient2 {
    estimate: f64,
    min: usize,
    max: usize,
    smoothing: f64,
    queue_size: f64,
    tolerance: f64,
    long_window: u32,
    warmup: u32,
    /// The long-term average RTT, in nanoseconds.
    long_rtt: f64,
    /// Windows averaged so far during the warm-up (then stays at `warmup`).
    seen: u32,
    warmup_sum: f64,
}

impl Gradient2 {
    /// Gradient2 with its source's defaults: initial limit 20, bounds `[20,
    /// 200]`, smoothing 0.2, queue size 4, tolerance 1.5, long window 600
    /// after a warm-up of 10.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// let g = Gradient2::new();
    /// assert_eq!((g.limit(), g.min_limit(), g.max_limit()), (20, 20, 200));
    /// ```
    pub const fn new() -> Self {
        Gradient2 {
            estimate: 20.0,
            min: 20,
            max: 200,
            smoothing: 0.2,
            queue_size: 4.0,
            tolerance: 1.5,
            long_window: 600,
            warmup: 10,
            long_rtt: 0.0,
            seen: 0,
            warmup_sum: 0.0,
        }
    }

    /// A builder starting from the defaults of [`new`](Self::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// let g = Gradient2::builder()
    ///     .initial_limit(8)
    ///     .min_limit(2)
    ///     .max_limit(64)
    ///     .smoothing(0.5)
    ///     .queue_size(2)
    ///     .tolerance(2.0)
    ///     .long_window(100)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(g.limit(), 8);
    /// ```
    pub const fn builder() -> Gradient2Builder {
        Gradient2Builder(Gradient2::new())
    }

    /// The long-term average round-trip time the window's is compared with
    /// (`None` before the first window with a success).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::limit::{Gradient2, LimitAlgorithm, Window};
    ///
    /// let mut g = Gradient2::new();
    /// assert_eq!(g.long_rtt(), None);
    /// g.update(&Window { successes: 1, avg_rtt: Some(Duration::from_millis(8)), ..Window::EMPTY });
    /// assert_eq!(g.long_rtt(), Some(Duration::from_millis(8)));
    /// ```
    pub fn long_rtt(&self) -> Option<Duration> {
        (self.seen > 0).then(|| Duration::from_nanos(self.long_rtt as u64))
    }

    /// Adds one window's RTT to the long-term average (Netflix's
    /// `ExpAvgMeasurement`): a plain mean over the warm-up, then an
    /// exponential average with factor `2 / (long_window + 1)`.
    fn add_long(&mut self, rtt: f64) -> f64 {
        if self.seen < self.warmup {
            self.seen += 1;
            self.warmup_sum += rtt;
            self.long_rtt = self.warmup_sum / self.seen as f64;
        } else {
            let factor = 2.0 / (self.long_window as f64 + 1.0);
            self.long_rtt = self.long_rtt * (1.0 - factor) + rtt * factor;
        }
        self.long_rtt
    }

    fn bounded(&self, estimate: f64) -> f64 {
        estimate.clamp(self.min as f64, self.max as f64)
    }
}

impl Default for Gradient2 {
    fn default() -> Self {
        Gradient2::new()
    }
}

impl LimitAlgorithm for Gradient2 {
    fn limit(&self) -> usize {
        self.estimate as usize
    }

    fn min_limit(&self) -> usize {
        self.min
    }

    fn max_limit(&self) -> usize {
        self.max
    }

    fn update(&mut self, w: &Window) -> usize {
        let limit = self.estimate;
        if let Some(rtt) = w.avg_rtt.filter(|_| w.successes > 0) {
            // At least a nanosecond: a zero RTT would make every ratio infinite.
            let short = (rtt.as_nanos() as f64).max(1.0);
            let mut long = self.add_long(short);
            if long / short > 2.0 {
                self.long_rtt *= 0.95;
                long = self.long_rtt;
            }
            if !w.congested() && (w.max_in_flight as f64) >= limit / 2.0 {
                let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
                let next = limit * gradient + self.queue_size;
                self.estimate =
                    self.bounded(limit * (1.0 - self.smoothing) + next * self.smoothing);
            }
        }
        if w.congested() {
            // The floor gradient, without the queue allowance.
            self.estimate =
                self.bounded(limit * (1.0 - self.smoothing) + limit * 0.5 * self.smoothing);
        }
        self.limit()
    }
}

/// Settings for a [`Gradient2`], checked by [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use watertight::limit::{Gradient2, LimitConfigError};
///
/// let err = Gradient2::builder().smoothing(0.0).build().unwrap_err();
/// assert!(matches!(err, LimitConfigError::OutOfRange { setting: "smoothing", .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct Gradient2Builder(Gradient2);

impl Gradient2Builder {
    /// The limit before the first window closes (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2::builder().initial_limit(40).build().unwrap().limit(), 40);
    /// ```
    pub const fn initial_limit(mut self, limit: usize) -> Self {
        self.0.estimate = limit as f64;
        self
    }

    /// The lowest limit (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2::builder().min_limit(1).build().unwrap().min_limit(), 1);
    /// ```
    pub const fn min_limit(mut self, limit: usize) -> Self {
        self.0.min = limit;
        self
    }

    /// The highest limit (default 200).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2::builder().max_limit(500).build().unwrap().max_limit(), 500);
    /// ```
    pub const fn max_limit(mut self, limit: usize) -> Self {
        self.0.max = limit;
        self
    }

    /// How much of the new estimate a window takes, in `(0, 1]` (default 0.2).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Gradient2;
    ///
    /// assert!(Gradient2::builder().smoothing(1.0).build().is_ok());
    /// assert!(Gradient2::builder().smoothing(1.5).build().is_err());
    /// ```
    pub const fn smoothing(mut self, smoothing: f64) -> Self {
        self.0.smoothing = smoothing;
        self
    }

    /// How far the limit may grow past `limit × gradient` per window
    /// (default 4).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Gradient2;
    ///
    /// assert!(Gradient2::builder().queue_size(0).build().is_ok());
    /// ```
    pub const fn queue_size(mut self, queue_size: usize) -> Self {
        self.0.queue_size = queue_size as f64;
        self
    }

    /// How much above the long-term average the window's RTT may be before
    /// the limit shrinks, at least 1.0 (default 1.5).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Gradient2;
    ///
    /// assert!(Gradient2::builder().tolerance(0.9).build().is_err());
    /// ```
    pub const fn tolerance(mut self, tolerance: f64) -> Self {
        self.0.tolerance = tolerance;
        self
    }

    /// The windows the long-term average spans, at least 1 (default 600).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Gradient2;
    ///
    /// assert!(Gradient2::builder().long_window(0).build().is_err());
    /// ```
    pub const fn long_window(mut self, windows: u32) -> Self {
        self.0.long_window = windows;
        self
    }

    /// The algorithm, or the first setting that cannot work.
    ///
    /// # Errors
    ///
    /// [`LimitConfigError`]: a zero minimum, a minimum above the maximum, a
    /// maximum above a bulkhead's, an initial limit outside the bounds, a
    /// smoothing outside `(0, 1]`, a tolerance below 1 or not finite, a long
    /// window of zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Gradient2, LimitConfigError};
    ///
    /// let err = Gradient2::builder().min_limit(50).build().unwrap_err();
    /// assert_eq!(err, LimitConfigError::InitialOutOfBounds { initial: 20 });
    /// ```
    pub fn build(self) -> Result<Gradient2, LimitConfigError> {
        let g = self.0;
        check_bounds(g.min, g.max, g.estimate as usize)?;
        check_range("smoothing", g.smoothing, f64::MIN_POSITIVE, 1.0)?;
        check_range("tolerance", g.tolerance, 1.0, f64::MAX)?;
        if g.long_window == 0 {
            return Err(LimitConfigError::OutOfRange {
                setting: "long_window",
                value: 0.0,
            });
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, in_flight: usize) -> Window {
        Window {
            successes: 10,
            avg_rtt: Some(Duration::from_millis(ms)),
            max_in_flight: in_flight,
            ..Window::EMPTY
        }
    }

    fn ns(g: &Gradient2) -> f64 {
        g.long_rtt
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn follows_the_formula_with_worked_numbers() {
        let mut g = Gradient2::builder().min_limit(1).build().unwrap();
        // Window 1: long = 10 ms (warm-up mean); gradient = min(1, 1.5) = 1;
        // 20 × 0.8 + (20 × 1 + 4) × 0.2 = 20.8.
        assert_eq!(g.update(&at(10, 20)), 20);
        assert!(close(g.estimate, 20.8));
        // Window 2, RTT 30 ms: long = (10 + 30) / 2 = 20 ms;
        // gradient = 1.5 × 20 / 30 = 1.0; 20.8 × 0.8 + 24.8 × 0.2 = 21.6.
        assert_eq!(g.update(&at(30, 20)), 21);
        assert!(close(g.estimate, 21.6));
        // Window 3, RTT 60 ms: long = (10 + 30 + 60) / 3 = 33.33 ms;
        // gradient = 1.5 × 33.33 / 60 = 0.8333;
        // 21.6 × 0.8 + (21.6 × 0.8333 + 4) × 0.2 = 17.28 + 4.4 = 21.68.
        assert_eq!(g.update(&at(60, 20)), 21);
        assert!(close(g.estimate, 21.68), "{}", g.estimate);
        // Window 4, RTT 200 ms: long = 300 / 4 = 75 ms;
        // gradient = max(0.5, 1.5 × 75 / 200 = 0.5625) = 0.5625;
        // 21.68 × 0.8 + (21.68 × 0.5625 + 4) × 0.2 = 17.344 + 3.239 = 20.583.
        assert_eq!(g.update(&at(200, 20)), 20);
        assert!(close(g.estimate, 20.583), "{}", g.estimate);
    }

    #[test]
    fn the_long_average_turns_exponential_after_the_warm_up() {
        let mut g = Gradient2::builder()
            .min_limit(1)
            .long_window(9)
            .build()
            .unwrap();
        for _ in 0..10 {
            g.update(&at(10, 0));
        }
        assert_eq!(ns(&g), 10_000_000.0);
        // Factor 2 / (9 + 1) = 0.2: 10 × 0.8 + 20 × 0.2 = 12 ms.
        g.update(&at(20, 0));
        assert!((ns(&g) - 12_000_000.0).abs() < 1.0, "{}", ns(&g));
        // Much faster (12 / 5 > 2 after the update: 12 × 0.8 + 5 × 0.2 = 10.6,
        // 10.6 / 5 > 2), so the long average falls by 5 % more: 10.07 ms.
        g.update(&at(5, 0));
        assert!((ns(&g) - 10_070_000.0).abs() < 1.0, "{}", ns(&g));
    }

    #[test]
    fn an_unused_limit_does_not_grow() {
        let mut g = Gradient2::builder().min_limit(1).build().unwrap();
        // 9 in flight < 20 / 2.
        for _ in 0..20 {
            assert_eq!(g.update(&at(10, 9)), 20);
        }
    }

    #[test]
    fn a_drop_takes_the_floor_gradient_and_is_not_a_fast_sample() {
        let mut g = Gradient2::builder()
            .min_limit(1)
            .initial_limit(100)
            .build()
            .unwrap();
        g.update(&at(50, 100));
        let before = g.estimate; // 100 × 0.8 + 104 × 0.2 = 100.8
        assert!(close(before, 100.8));
        // Dropped calls come back in a microsecond; they are not averaged
        // in, so the window's RTT is the successes' 50 ms, and the drop
        // makes it 100.8 × 0.9 = 90.72.
        let w = Window {
            dropped: 1_000,
            ..at(50, 100)
        };
        assert_eq!(g.update(&w), 90);
        assert!(close(g.estimate, 90.72));
        // A window of drops only: again × 0.9.
        let only = Window {
            dropped: 10,
            max_in_flight: 3,
            ..Window::EMPTY
        };
        assert_eq!(g.update(&only), 81);
    }

    #[test]
    fn steady_timeouts_never_grow_the_limit() {
        let mut g = Gradient2::builder()
            .min_limit(1)
            .initial_limit(50)
            .build()
            .unwrap();
        let mut last = g.limit();
        for _ in 0..40 {
            // The quick calls finish in 1 ms, the limit is in use, but a
            // call times out in every window.
            let l = g.update(&Window {
                timed_out: 1,
                ..at(1, 50)
            });
            assert!(l <= last);
            last = l;
        }
        assert!(last < 50 / 4, "{last}");
    }

    #[test]
    fn failures_alone_and_empty_windows_change_nothing() {
        let mut g = Gradient2::new();
        let failed = Window {
            failed: 40,
            max_in_flight: 40,
            ..Window::EMPTY
        };
        assert_eq!(g.update(&failed), 20);
        assert_eq!(g.update(&Window::EMPTY), 20);
        assert_eq!(g.long_rtt(), None);
    }

    #[test]
    fn extreme_rtts_do_not_panic_and_stay_bounded() {
        let mut g = Gradient2::builder()
            .min_limit(3)
            .max_limit(9)
            .initial_limit(5)
            .build()
            .unwrap();
        for rtt in [Duration::ZERO, Duration::MAX, Duration::from_nanos(1)] {
            let w = Window {
                successes: 1,
                avg_rtt: Some(rtt),
                max_in_flight: usize::MAX,
                ..Window::EMPTY
            };
            let l = g.update(&w);
            assert!((3..=9).contains(&l), "{l}");
        }
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        for s in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(matches!(
                Gradient2::builder().smoothing(s).build(),
                Err(LimitConfigError::OutOfRange {
                    setting: "smoothing",
                    ..
                })
            ));
        }
        for t in [0.99, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Gradient2::builder().tolerance(t).build(),
                Err(LimitConfigError::OutOfRange {
                    setting: "tolerance",
                    ..
                })
            ));
        }
        assert_eq!(
            Gradient2::builder().min_limit(0).build().unwrap_err(),
            LimitConfigError::ZeroMinLimit
        );
    }
}
