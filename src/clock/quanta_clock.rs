//! `QuantaClock`: the CPU's time-stamp counter, scaled to nanoseconds by
//! quanta.

use super::{Clock, Instant};

/// The CPU's time-stamp counter as a [`Clock`], through
/// [quanta](https://docs.rs/quanta) (feature `quanta`): the clock governor
/// reads by default.
///
/// A read is one `rdtsc` and a multiply (about 7 ns on x86_64, where
/// [`StdClock`](super::StdClock)'s `clock_gettime` costs 20–55 ns), at
/// nanosecond resolution, with no thread of its own (where
/// [`CoarseClock`](super::CoarseClock) is one load, at a millisecond). Pick
/// it for a limiter checked on every request of a busy server, above all a
/// [`RateLimiter`](crate::rate::RateLimiter), whose every check reads the
/// clock: there the clock is most of the check (see the guide's
/// [benchmarks](crate::guide::benchmarks)).
///
/// quanta uses the counter only where the CPU says it is invariant
/// (constant rate, synchronised across cores: every x86_64 server CPU of the
/// last decade) and its calibration against the OS clock succeeds; anywhere
/// else (other architectures, a hypervisor that hides the flag) it reads the
/// OS's monotonic clock instead, at `StdClock`'s cost. Either way a later read
/// never returns an earlier instant: where quanta cannot promise that, it
/// does not use the counter.
///
/// Its instants count from the counter's own start (about the machine's
/// boot), the same for every handle in the process; they are not comparable
/// with another clock's.
/// It is not a [`Timer`](super::Timer): to wait, use `TokioClock`,
/// `AsyncIoClock` or `EmbassyClock`.
///
/// # Examples
///
/// ```
/// use watertight::clock::{Clock, QuantaClock};
/// use watertight::rate::{Quota, RateLimiter};
///
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
///
/// let limiter = RateLimiter::new("api", Quota::per_second(50).burst(10), clock);
/// for _ in 0..10 {
///     assert!(limiter.check().is_ok());
/// }
/// assert!(limiter.check().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct QuantaClock {
    clock: quanta::Clock,
}

impl QuantaClock {
    /// A handle on the process's counter clock. The first call in a process
    /// calibrates the counter against the OS clock (a few milliseconds,
    /// once); later calls copy the calibration.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, Instant, QuantaClock};
    ///
    /// let clock = QuantaClock::new();
    /// assert!(clock.now() >= Instant::ZERO);
    /// ```
    pub fn new() -> Self {
        QuantaClock {
            clock: quanta::Clock::new(),
        }
    }
}

impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

impl Clock for QuantaClock {
    /// The counter, scaled to nanoseconds since it started (read as
    /// governor reads it, with no `Duration` in between).
    #[inline]
    fn now(&self) -> Instant {
        Instant::from_nanos(self.clock.delta_as_nanos(0, self.clock.raw()))
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use super::*;
    use core::time::Duration;

    /// Monotonic under interleaved reads from two handles, and in step with
    /// `std::time::Instant` over a real interval (1 ms slack a side for a
    /// preempted read on a loaded machine).
    #[test]
    fn monotonic_and_in_step_with_std() {
        let (a, b) = (QuantaClock::new(), QuantaClock::default());
        let mut last = a.now();
        for _ in 0..100_000 {
            let x = a.now();
            let y = b.now();
            assert!(x >= last && y >= x, "{last:?} {x:?} {y:?}");
            last = y;
        }
        let (q0, s0) = (a.now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (q1, s1) = (a.now(), std::time::Instant::now());
        let (q, s) = (q1 - q0, s1 - s0);
        let slack = Duration::from_millis(2);
        assert!(q + slack >= s && s + slack >= q, "quanta {q:?}, std {s:?}");
    }
}
