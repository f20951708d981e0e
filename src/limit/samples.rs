//! The open window's samples, in atomics: what calls add as they finish
//! and what the call that closes the window takes.
//!
//! Recording is two or three uncontended-in-the-common-case atomic adds and
//! never waits. Closing swaps every counter for zero; a sample that races
//! with a close lands whole in one window or the next (each counter is
//! swapped once, and the success count and its RTT sum share one word, so
//! a success is never split between windows). Drops and timeouts share a
//! word the same way; a failure or an in-flight peak added just after the
//! swap of its counter belongs to the next window, which is what it is.

use core::time::Duration;

use super::{Signal, Window};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// Bits of the success word holding the sum of RTTs in microseconds.
const SUM_BITS: u32 = 40;
const SUM_MASK: u64 = (1 << SUM_BITS) - 1;
const ONE_SUCCESS: u64 = 1 << SUM_BITS;
/// A single RTT counts for at most this (2³² µs, 71 minutes), so that a
/// window can take many before its sum nears its 40 bits.
const MAX_RTT_MICROS: u64 = 1 << 32;
/// Past half of either field, the window is closed at once, whatever its
/// age: the other half is headroom for the adds that race with the close.
const FULL_SUM: u64 = 1 << (SUM_BITS - 1);
const FULL_COUNT: u64 = 1 << (64 - SUM_BITS - 1);

const ONE_TIMEOUT: u64 = 1 << 32;
const FULL_DROPS: u64 = 1 << 31;

pub(crate) struct Samples {
    /// When the open window opened, in nanoseconds of the clock.
    opened: AtomicU64,
    /// Successes (high 24 bits) and the sum of their RTTs in µs (low 40).
    ok: AtomicU64,
    /// Drops (low 32 bits) and timeouts (high 32).
    congestion: AtomicU64,
    failed: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Samples {
    crate::sync::const_fn! {
        pub(crate) const fn new(opened: u64) -> Self {
            Samples {
                opened: AtomicU64::new(opened),
                ok: AtomicU64::new(0),
                congestion: AtomicU64::new(0),
                failed: AtomicUsize::new(0),
                max_in_flight: AtomicUsize::new(0),
            }
        }
    }

    /// Adds one finished call; returns whether the window is so full that
    /// it must close now.
    ///
    /// `Relaxed`: the counters are independent tallies; the close reads
    /// them with swaps, which see every add ordered before them in each
    /// counter's own modification order.
    pub(crate) fn record(&self, signal: Signal, rtt: Duration, in_flight: usize) -> bool {
        if in_flight > self.max_in_flight.load(Ordering::Relaxed) {
            self.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        }
        match signal {
            Signal::Success => {
                let micros =
                    crate::clock::nanos::div_1e3(crate::clock::nanos::saturating_from(rtt))
                        .min(MAX_RTT_MICROS);
                let old = self.ok.fetch_add(ONE_SUCCESS | micros, Ordering::Relaxed);
                (old & SUM_MASK) >= FULL_SUM || (old >> SUM_BITS) >= FULL_COUNT
            }
            Signal::Dropped | Signal::Timeout => {
                let one = if signal == Signal::Dropped {
                    1
                } else {
                    ONE_TIMEOUT
                };
                let old = self.congestion.fetch_add(one, Ordering::Relaxed);
                (old & (ONE_TIMEOUT - 1)) >= FULL_DROPS || (old >> 32) >= FULL_DROPS
            }
            Signal::Failure => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Whether the open window has lasted `length` by `now`.
    pub(crate) fn due(&self, now: u64, length: u64) -> bool {
        now >= self.opened.load(Ordering::Relaxed).saturating_add(length)
    }

    /// Closes the open window at `now` and opens the next; returns what the
    /// closed one saw. Only one caller at a time (the adaptive bulkhead's
    /// closing flag sees to it).
    pub(crate) fn take(&self, now: u64) -> Window {
        self.opened.store(now, Ordering::Relaxed);
        let ok = self.ok.swap(0, Ordering::Relaxed);
        let congestion = self.congestion.swap(0, Ordering::Relaxed);
        let failed = self.failed.swap(0, Ordering::Relaxed);
        let max_in_flight = self.max_in_flight.swap(0, Ordering::Relaxed);
        let successes = (ok >> SUM_BITS) as usize;
        let sum = ok & SUM_MASK;
        Window {
            successes,
            avg_rtt: (successes > 0).then(|| Duration::from_micros(sum / successes as u64)),
            max_in_flight,
            failed,
            dropped: (congestion & (ONE_TIMEOUT - 1)) as usize,
            timed_out: (congestion >> 32) as usize,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_window_sums_what_was_recorded() {
        let s = Samples::new(0);
        s.record(Signal::Success, Duration::from_millis(10), 3);
        s.record(Signal::Success, Duration::from_millis(30), 5);
        s.record(Signal::Dropped, Duration::from_micros(1), 7);
        s.record(Signal::Timeout, Duration::from_secs(1), 2);
        s.record(Signal::Timeout, Duration::from_secs(1), 2);
        s.record(Signal::Failure, Duration::from_millis(1), 1);
        assert!(!s.due(999, 1_000));
        assert!(s.due(1_000, 1_000));
        let w = s.take(1_000);
        assert_eq!(
            w,
            Window {
                successes: 2,
                avg_rtt: Some(Duration::from_millis(20)),
                max_in_flight: 7,
                failed: 1,
                dropped: 1,
                timed_out: 2,
            }
        );
        // The next window starts empty, at the close.
        assert_eq!(s.take(1_500), Window::EMPTY);
        assert!(!s.due(2_000, 1_000));
    }

    #[test]
    fn a_window_near_its_sums_capacity_asks_to_close() {
        let s = Samples::new(0);
        // One RTT counts for at most 2^32 µs; 128 of them reach half the sum.
        let mut full = false;
        for _ in 0..128 {
            full = s.record(Signal::Success, Duration::MAX, 1);
        }
        assert!(!full);
        assert!(s.record(Signal::Success, Duration::MAX, 1));
        let w = s.take(0);
        assert_eq!(w.successes, 129);
        assert_eq!(w.avg_rtt, Some(Duration::from_micros(MAX_RTT_MICROS)));
    }
}
