//! `LatencyHistogram` against a sequential reference: every sample kept in
//! a list with its sequence number, the read set (the current window and
//! the one before, by count) sorted, the nearest rank taken, and the largest
//! sample ever recorded in that sample's bucket (exact below 16 ns, then 16
//! buckets per power of two, computed here on its own).
#![cfg(not(loom))]

#[path = "support/proptest_config.rs"]
mod proptest_config;

use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use watertight::hedge::{LatencyHistogram, Percentile};

/// The largest value of `v`'s bucket, computed independently of the crate.
fn bucket_top(v: u64) -> u64 {
    if v < 16 {
        return v;
    }
    let e = 63 - v.leading_zeros();
    let width = 1u128 << (e - 4);
    let top = (u128::from(v) / width + 1) * width - 1;
    u64::try_from(top).unwrap_or(u64::MAX)
}

/// The reference: the samples a read sees now, and their percentile.
struct Reference {
    window: u64,
    samples: Vec<u64>,
}

impl Reference {
    fn read_set(&self) -> Vec<u64> {
        let n = self.samples.len() as u64;
        let current = n / self.window;
        let mut read: Vec<u64> = self
            .samples
            .iter()
            .enumerate()
            .filter(|(seq, _)| {
                let w = *seq as u64 / self.window;
                w == current || w + 1 == current
            })
            .map(|(_, v)| *v)
            .collect();
        read.sort_unstable();
        read
    }

    fn percentile(&self, p: f64, min_samples: u64) -> Option<Duration> {
        let read = self.read_set();
        if read.is_empty() || (read.len() as u64) < min_samples {
            return None;
        }
        // Nearest rank, in exact arithmetic: the smallest r with
        // r ≥ p × n / 100, at least 1.
        let n = read.len();
        let rank = (1..=n)
            .find(|r| *r as f64 >= p * n as f64 / 100.0)
            .unwrap_or(n);
        // The largest value its bucket was ever given (the histogram keeps
        // a maximum per bucket, never reset).
        let bucket = bucket_top(read[rank - 1]);
        let largest = self
            .samples
            .iter()
            .copied()
            .filter(|s| bucket_top(*s) == bucket)
            .max()
            .unwrap_or(bucket);
        Some(Duration::from_nanos(largest))
    }
}

/// Latencies over many scales: nanoseconds to hours, and the extremes.
fn latency() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..16,
        0u64..2_000,
        1_000u64..100_000_000,
        1_000_000u64..10_000_000_000,
        Just(u64::MAX),
        any::<u64>(),
    ]
}

fn percentile() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(50.0),
        Just(95.0),
        Just(99.9),
        Just(100.0),
        0.0f64..=100.0
    ]
}

fn config() -> ProptestConfig {
    proptest_config::cases(400, 10)
}

proptest! {
    #![proptest_config(config())]

    /// Random windows and samples, read after every record: the same
    /// count and the same percentile as the reference.
    #[test]
    fn matches_the_sequential_reference(
        window in 1u32..=20,
        samples in vec(latency(), 0..120),
        p in percentile(),
        min_samples in 0u64..10,
    ) {
        let h = LatencyHistogram::new(window);
        let mut r = Reference { window: u64::from(window), samples: Vec::new() };
        let p = Percentile::new(p).unwrap();
        for v in samples {
            h.record(Duration::from_nanos(v));
            r.samples.push(v);
            prop_assert_eq!(h.len(), r.read_set().len() as u64);
            prop_assert_eq!(
                h.percentile_of_at_least(p, min_samples),
                r.percentile(p.get(), min_samples)
            );
        }
        prop_assert_eq!(h.recorded(), r.samples.len() as u64);
    }

    /// The reported value is never below the true percentile and at most
    /// a sixteenth above it.
    #[test]
    fn never_below_and_within_a_sixteenth(samples in vec(latency(), 1..200), p in percentile()) {
        let h = LatencyHistogram::new(1000);
        for v in &samples {
            h.record(Duration::from_nanos(*v));
        }
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        let n = sorted.len();
        let rank = (1..=n).find(|r| *r as f64 >= p * n as f64 / 100.0).unwrap_or(n);
        let exact = u128::from(sorted[rank - 1]);
        let got = h.percentile(Percentile::new(p).unwrap()).unwrap().as_nanos();
        prop_assert!(got >= exact);
        prop_assert!(got - exact <= exact / 16, "{} for {}", got, exact);
    }
}

#[test]
fn a_window_moves_on_by_count() {
    let h = LatencyHistogram::new(100);
    for _ in 0..100 {
        h.record(Duration::from_millis(10));
    }
    for _ in 0..99 {
        h.record(Duration::from_millis(500));
    }
    // The full window of fast calls and the current one, 99 slow: the
    // median is fast.
    assert_eq!(h.len(), 199);
    let p50 = h.percentile(Percentile::P50).unwrap();
    assert!(p50 < Duration::from_millis(12), "{p50:?}");
    // The 100th slow call ends the window: the fast ones are no longer read.
    h.record(Duration::from_millis(500));
    assert_eq!(h.len(), 100);
    let p50 = h.percentile(Percentile::P50).unwrap();
    assert!(p50 >= Duration::from_millis(500), "{p50:?}");
}

#[test]
fn no_upper_cap() {
    let h = LatencyHistogram::new(10);
    for d in [
        Duration::from_secs(11),
        Duration::from_secs(86_400),
        Duration::MAX,
    ] {
        h.record(d);
    }
    // tower's first hedge histogram stopped at 10 s; here a day is a day.
    let p50 = h.percentile(Percentile::P50).unwrap();
    assert!(p50 >= Duration::from_secs(86_400) && p50 <= Duration::from_secs(86_400 * 17 / 16));
    assert_eq!(
        h.percentile(Percentile::new(100.0).unwrap()),
        Some(Duration::from_nanos(u64::MAX))
    );
}

#[test]
fn threads_recording_at_once_lose_nothing_when_windows_do_not_turn() {
    // 4 threads × 2500 samples into a window of 10 000: one window, so
    // every sample is read, whatever the interleaving.
    let h = std::sync::Arc::new(LatencyHistogram::new(10_000));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..2500u64 {
                    h.record(Duration::from_micros(1 + (t * 2500 + i) % 1000));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(h.len(), 10_000);
    assert_eq!(h.recorded(), 10_000);
}
