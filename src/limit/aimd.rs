//! [`Aimd`]: additive increase, multiplicative decrease.

use core::time::Duration;

use super::{check_bounds, check_range, LimitAlgorithm, LimitConfigError, Window};

/// Loss-based limit: one more per window while the limit is in use and
/// nothing is lost, 10 % less per window in which a call was dropped or
/// timed out.
///
/// For each closed window, with `L` the current limit:
///
/// ```text
/// if dropped > 0 || timed_out > 0 || avg_rtt > timeout:
///     L' = floor(L × backoff_ratio)                 // at least one less, as L is whole
/// else if successes > 0 && 2 × max_in_flight >= L:
///     L' = L + 1
/// else:
///     L' = L                                        // the limit was not in use
/// L' = clamp(L', min_limit, max_limit)
/// ```
///
/// This is Netflix concurrency-limits' `AIMDLimit` (its `_update`), with
/// its defaults: initial limit 20, bounds `[20, 200]`, backoff ratio 0.9
/// (its builder accepts `[0.5, 1.0)`, and so does ours), timeout 5 s. The
/// two differences, both for the failure modes in the [module](super) docs:
/// `AIMDLimit` sees one `didDrop` flag and a window's RTT, while here a
/// timed-out call counts as a drop on its own (its RTT does not enter the
/// average, so steady timeouts can neither hide behind quick successes nor
/// look like growth), and growth needs at least one success in the window.
///
/// The bounds of `[20, 200]` suit a server calling a service; a small
/// system (a pool of 10, a modem link) wants a lower `min_limit`.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::limit::{Aimd, LimitAlgorithm, Window};
///
/// let mut aimd = Aimd::builder().initial_limit(10).min_limit(1).max_limit(100).build().unwrap();
/// let busy = Window { successes: 20, avg_rtt: Some(Duration::from_millis(5)), max_in_flight: 10, ..Window::EMPTY };
/// assert_eq!(aimd.update(&busy), 11);
/// assert_eq!(aimd.update(&Window { timed_out: 1, ..busy }), 9); // floor(11 × 0.9)
/// // Half the limit not in use: no growth.
/// assert_eq!(aimd.update(&Window { max_in_flight: 4, ..busy }), 9);
/// ```
#[derive(Debug, Clone)]
pub struct Aimd {
    limit: usize,
    min: usize,
    max: usize,
    backoff_ratio: f64,
    timeout: Duration,
}

impl Aimd {
    /// AIMD with its source's defaults: initial limit 20, bounds `[20, 200]`,
    /// backoff ratio 0.9, timeout 5 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// let aimd = Aimd::new();
    /// assert_eq!((aimd.limit(), aimd.min_limit(), aimd.max_limit()), (20, 20, 200));
    /// ```
    pub const fn new() -> Self {
        Aimd {
            limit: 20,
            min: 20,
            max: 200,
            backoff_ratio: 0.9,
            timeout: Duration::from_secs(5),
        }
    }

    /// A builder starting from the defaults of [`new`](Self::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// let aimd = Aimd::builder()
    ///     .initial_limit(4)
    ///     .min_limit(2)
    ///     .max_limit(16)
    ///     .backoff_ratio(0.5)
    ///     .timeout(Duration::from_millis(500))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(aimd.limit(), 4);
    /// ```
    pub const fn builder() -> AimdBuilder {
        AimdBuilder(Aimd::new())
    }
}

impl Default for Aimd {
    fn default() -> Self {
        Aimd::new()
    }
}

impl LimitAlgorithm for Aimd {
    fn limit(&self) -> usize {
        self.limit
    }

    fn min_limit(&self) -> usize {
        self.min
    }

    fn max_limit(&self) -> usize {
        self.max
    }

    fn update(&mut self, w: &Window) -> usize {
        let slow = matches!(w.avg_rtt, Some(rtt) if rtt > self.timeout);
        let next = if w.congested() || slow {
            // `as` truncates toward zero: the floor of a positive product.
            (self.limit as f64 * self.backoff_ratio) as usize
        } else if w.successes > 0 && w.max_in_flight.saturating_mul(2) >= self.limit {
            self.limit.saturating_add(1)
        } else {
            self.limit
        };
        self.limit = next.clamp(self.min, self.max);
        self.limit
    }
}

/// Settings for an [`Aimd`], checked by [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use watertight::limit::{Aimd, LimitConfigError};
///
/// let err = Aimd::builder().backoff_ratio(1.0).build().unwrap_err();
/// assert!(matches!(err, LimitConfigError::OutOfRange { setting: "backoff_ratio", .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct AimdBuilder(Aimd);

impl AimdBuilder {
    /// The limit before the first window closes (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// assert_eq!(Aimd::builder().initial_limit(50).build().unwrap().limit(), 50);
    /// ```
    pub const fn initial_limit(mut self, limit: usize) -> Self {
        self.0.limit = limit;
        self
    }

    /// The lowest limit (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(1).build().unwrap();
    /// assert_eq!(aimd.min_limit(), 1);
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
    /// use watertight::limit::{Aimd, LimitAlgorithm};
    ///
    /// assert_eq!(Aimd::builder().max_limit(1000).build().unwrap().max_limit(), 1000);
    /// ```
    pub const fn max_limit(mut self, limit: usize) -> Self {
        self.0.max = limit;
        self
    }

    /// The factor a congested window multiplies the limit by, in
    /// `[0.5, 1.0)` (default 0.9).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Aimd;
    ///
    /// assert!(Aimd::builder().backoff_ratio(0.5).build().is_ok());
    /// assert!(Aimd::builder().backoff_ratio(0.4).build().is_err());
    /// ```
    pub const fn backoff_ratio(mut self, ratio: f64) -> Self {
        self.0.backoff_ratio = ratio;
        self
    }

    /// A window whose average RTT exceeds this counts as congested
    /// (default 5 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::limit::Aimd;
    ///
    /// assert!(Aimd::builder().timeout(Duration::from_millis(250)).build().is_ok());
    /// assert!(Aimd::builder().timeout(Duration::ZERO).build().is_err());
    /// ```
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout = timeout;
        self
    }

    /// The algorithm, or the first setting that cannot work.
    ///
    /// # Errors
    ///
    /// [`LimitConfigError`]: a zero minimum, a minimum above the maximum, a
    /// maximum above a bulkhead's, an initial limit outside the bounds, a
    /// backoff ratio outside `[0.5, 1.0)`, a zero timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::{Aimd, LimitConfigError};
    ///
    /// let err = Aimd::builder().initial_limit(300).build().unwrap_err();
    /// assert_eq!(err, LimitConfigError::InitialOutOfBounds { initial: 300 });
    /// ```
    pub fn build(self) -> Result<Aimd, LimitConfigError> {
        let a = self.0;
        check_bounds(a.min, a.max, a.limit)?;
        check_range("backoff_ratio", a.backoff_ratio, 0.5, 1.0)?;
        if a.backoff_ratio >= 1.0 {
            return Err(LimitConfigError::OutOfRange {
                setting: "backoff_ratio",
                value: a.backoff_ratio,
            });
        }
        if a.timeout.is_zero() {
            return Err(LimitConfigError::ZeroDuration { setting: "timeout" });
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(in_flight: usize) -> Window {
        Window {
            successes: 10,
            avg_rtt: Some(Duration::from_millis(10)),
            max_in_flight: in_flight,
            ..Window::EMPTY
        }
    }

    #[test]
    fn grows_by_one_while_half_the_limit_is_in_use() {
        let mut a = Aimd::new();
        // 2 × 10 >= 20: in use.
        assert_eq!(a.update(&busy(10)), 21);
        // 2 × 10 < 21: not in use, no growth.
        assert_eq!(a.update(&busy(10)), 21);
        assert_eq!(a.update(&busy(11)), 22);
    }

    #[test]
    fn backs_off_by_the_ratio_on_a_drop_a_timeout_or_a_slow_window() {
        let mut a = Aimd::builder().initial_limit(100).build().unwrap();
        assert_eq!(
            a.update(&Window {
                dropped: 1,
                ..busy(100)
            }),
            90
        );
        assert_eq!(
            a.update(&Window {
                timed_out: 3,
                ..busy(90)
            }),
            81
        );
        // floor(81 × 0.9) = floor(72.9) = 72.
        let slow = Window {
            avg_rtt: Some(Duration::from_millis(5_001)),
            ..busy(81)
        };
        assert_eq!(a.update(&slow), 72);
        // Exactly the timeout is not slow (Netflix: `rtt > timeout`).
        let at = Window {
            avg_rtt: Some(Duration::from_secs(5)),
            ..busy(72)
        };
        assert_eq!(a.update(&at), 73);
    }

    #[test]
    fn steady_timeouts_never_grow_the_limit() {
        // The calls that finish are quick and the limit is in use, but one
        // call per window times out: the limit only falls.
        let mut a = Aimd::builder()
            .min_limit(1)
            .initial_limit(50)
            .build()
            .unwrap();
        let mut last = a.limit();
        for _ in 0..30 {
            let l = a.update(&Window {
                timed_out: 1,
                ..busy(last)
            });
            assert!(l <= last);
            last = l;
        }
        assert_eq!(last, 1);
    }

    #[test]
    fn failures_alone_change_nothing() {
        let mut a = Aimd::new();
        let w = Window {
            failed: 100,
            max_in_flight: 200,
            ..Window::EMPTY
        };
        assert_eq!(a.update(&w), 20);
    }

    #[test]
    fn the_limit_stays_within_its_bounds() {
        let mut a = Aimd::builder()
            .min_limit(5)
            .max_limit(6)
            .initial_limit(5)
            .build()
            .unwrap();
        assert_eq!(a.update(&busy(5)), 6);
        assert_eq!(a.update(&busy(6)), 6);
        // floor(6 × 0.9) = 5, floor(5 × 0.9) = 4, held at 5.
        assert_eq!(
            a.update(&Window {
                dropped: 1,
                ..busy(6)
            }),
            5
        );
        assert_eq!(
            a.update(&Window {
                dropped: 1,
                ..busy(6)
            }),
            5
        );
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        assert_eq!(
            Aimd::builder().min_limit(0).build().unwrap_err(),
            LimitConfigError::ZeroMinLimit
        );
        assert_eq!(
            Aimd::builder()
                .min_limit(30)
                .max_limit(25)
                .build()
                .unwrap_err(),
            LimitConfigError::MinAboveMax { min: 30, max: 25 }
        );
        assert!(matches!(
            Aimd::builder().max_limit(usize::MAX).build(),
            Err(LimitConfigError::MaxTooLarge { .. })
        ));
        for ratio in [0.49, 1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Aimd::builder().backoff_ratio(ratio).build(),
                Err(LimitConfigError::OutOfRange {
                    setting: "backoff_ratio",
                    ..
                })
            ));
        }
    }
}
