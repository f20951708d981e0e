//! [`LatencyHistogram`]: log-bucketed atomic counters over a window of the
//! last calls, for percentiles of recent latency.

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// Sub-buckets per power of two, as a power of two: 2⁴ = 16, so a bucket
/// is at most 1/16 (6.25 %) as wide as its lower bound.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

/// Buckets: values `0..16` ns one each, then 16 per power of two from 2⁴
/// to 2⁶³ ns (60 powers): 16 + 60 × 16 = 976. Every `u64` of nanoseconds
/// has one, so no latency is too large to record.
#[cfg(not(loom))]
const BUCKETS: usize = (SUB as usize) * (64 - SUB_BITS as usize + 1);
/// Under loom the same code runs on the first 16 buckets (0 to 15 ns, each
/// its own), so that a model can read the whole histogram in a few steps;
/// larger values share the last one. The models record only values below 16.
#[cfg(loom)]
const BUCKETS: usize = 16;

/// The bucket of `nanos`: exact below 16, then 16 per power of two.
#[inline]
const fn bucket_of(nanos: u64) -> usize {
    let i = if nanos < SUB {
        nanos as usize
    } else {
        let e = 63 - nanos.leading_zeros(); // 4..=63
        let sub = (nanos >> (e - SUB_BITS)) & (SUB - 1);
        ((e - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
    };
    if i < BUCKETS {
        i
    } else {
        BUCKETS - 1
    }
}

/// The largest value in bucket `i` (what a percentile in it reports).
#[inline]
const fn bucket_max(i: usize) -> u64 {
    let (i, sub) = (i as u64, SUB);
    if i < sub {
        return i;
    }
    let e = i / sub + SUB_BITS as u64 - 1; // the power of two
    let s = i % sub;
    let width = 1u64 << (e - SUB_BITS as u64);
    // The last bucket's end is u64::MAX: (2⁶³ + 16 × 2⁵⁹) − 1 wraps to it.
    (1u64 << e)
        .wrapping_add((s + 1).wrapping_mul(width))
        .wrapping_sub(1)
}

/// One slot: a window number (high 32 bits, wrapping) and the count of that
/// window's samples in the bucket (low 32 bits).
#[inline]
const fn pack(window: u32, count: u32) -> u64 {
    ((window as u64) << 32) | count as u64
}

#[inline]
const fn unpack(slot: u64) -> (u32, u32) {
    ((slot >> 32) as u32, slot as u32)
}

/// A percentile, `0.0..=100.0`: checked once, when made.
///
/// # Examples
///
/// ```
/// use watertight::hedge::Percentile;
///
/// assert_eq!(Percentile::new(95.0).unwrap(), Percentile::P95);
/// assert!(Percentile::new(100.5).is_err());
/// assert!(Percentile::new(f64::NAN).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Percentile(f64);

impl Percentile {
    /// The median.
    pub const P50: Percentile = Percentile(50.0);
    /// The 95th percentile: "The Tail at Scale"'s hedge delay.
    pub const P95: Percentile = Percentile(95.0);
    /// The 99th percentile.
    pub const P99: Percentile = Percentile(99.0);
    /// The 99.9th percentile.
    pub const P999: Percentile = Percentile(99.9);

    /// `p` percent.
    ///
    /// # Errors
    ///
    /// [`PercentileError`] if `p` is not a number from 0 to 100.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::Percentile;
    /// assert_eq!(Percentile::new(99.9).unwrap().get(), 99.9);
    /// assert!(Percentile::new(-1.0).is_err());
    /// ```
    pub const fn new(p: f64) -> Result<Percentile, PercentileError> {
        // NaN fails both comparisons.
        if p >= 0.0 && p <= 100.0 {
            Ok(Percentile(p))
        } else {
            Err(PercentileError)
        }
    }

    /// The percentage.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::Percentile::P95.get(), 95.0);
    /// ```
    pub const fn get(self) -> f64 {
        self.0
    }

    /// The nearest rank of this percentile among `n` samples (1-based, at
    /// least 1): the smallest `r` with `r ≥ p × n / 100` (multiplied
    /// first, so that 99.9 % of 1000 is 999, not 999.000…1).
    fn rank(self, n: u64) -> u64 {
        let x = self.0 * n as f64 / 100.0;
        let mut r = x as u64; // truncates; `ceil` is not in `core`
        if (r as f64) < x {
            r += 1;
        }
        r.clamp(1, n.max(1))
    }
}

/// A percentile outside `0..=100`, or not a number.
///
/// # Examples
///
/// ```
/// use watertight::hedge::{Percentile, PercentileError};
/// assert_eq!(Percentile::new(101.0), Err(PercentileError));
/// assert_eq!(PercentileError.to_string(), "a percentile must be from 0 to 100");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PercentileError;

impl fmt::Display for PercentileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a percentile must be from 0 to 100")
    }
}

impl core::error::Error for PercentileError {}

/// Recent latencies, for their percentiles: fixed memory, no lock, no
/// allocation, no clock, `no_std`.
///
/// **Buckets.** Logarithmic, as HdrHistogram's are: exact below 16 ns,
/// then 16 buckets per power of two up to 2⁶⁴ ns (584 years), 976 in all.
/// A percentile reports the largest value its bucket has been given (one
/// more atomic per bucket, raised by a record only when it is larger), so
/// it is never below the true one and at most 6.25 % above it, the
/// bucket's top (a hedge sent a little late, never early); on latencies
/// that repeat (whole milliseconds) it is exact. There is **no upper cap**: every duration has a
/// bucket (past 584 years, the last one). tower's `Hedge` once kept
/// HdrHistogram's bounds of 1 ms to 10 s and reported an error for every
/// slower call (tower#475); HdrHistogram itself needs a highest trackable
/// value, or resizes (allocating) when told to grow.
///
/// **Windowed, by count.** The histogram keeps the samples of the last
/// `window` to `2 × window` calls: the current window (filling) and the
/// one before it (full). A percentile reads both, so after `window`
/// samples it always rests on at least `window` of them, and a change in
/// the system's latency is seen fully within two windows. Why windows of
/// calls rather than of time (tower rotates its two HdrHistograms every
/// period, behind a mutex), and why not exponential decay:
///
/// - **no clock**: [`record`](Self::record) is two atomic operations and
///   needs no time source, so the histogram works in `no_std` on its own,
///   and a simulation on any clock gives the same numbers;
/// - **the same evidence at every hour**: a time window holds thousands of
///   calls at the peak and a handful at night, so its percentile at night
///   is the largest of a few samples (the breaker's count window makes the
///   same choice);
/// - **decay cannot be lock-free and exact**: halving 976 counters is not
///   one atomic step, so records racing with it are halved or not at
///   random; a window here is never cleared at all (below).
///
/// A quiet system keeps its last windows however old they are, which is
/// what a hedge needs: the latency of the system's last calls.
///
/// **How a window ends without a clearing pass.** Every bucket has two
/// slots, one for even windows and one for odd ones, each holding a window
/// number and a count in one atomic word. A record takes its sequence
/// number (one `fetch_add`), which says its window; it adds one to its
/// bucket's slot if the slot holds that window, or starts it at one if the
/// slot holds an older window (whose count is two windows old: no longer
/// read). A read counts a slot only if its number is the current window's
/// or the one before. So nothing is ever reset in bulk, a record is one
/// compare-and-swap on its own bucket, and a read sees each sample of the
/// two windows once, never one of an older window.
///
/// # Memory ordering
///
/// Relaxed throughout: each slot is its own datum (window number and count
/// change together in one word), and no other memory is published through
/// the histogram. A read racing with records is a set of separate loads:
/// it may miss records that finished during it, never counts a sample
/// twice and never counts one of an older window. Window numbers are 32
/// bits, so a bucket untouched for 2³² windows could be mistaken for a
/// current one.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::hedge::{LatencyHistogram, Percentile};
///
/// let latencies = LatencyHistogram::new(1000);
/// for ms in 1..=100 {
///     latencies.record(Duration::from_millis(ms));
/// }
/// let p95 = latencies.percentile(Percentile::P95).unwrap();
/// // 95 ms, reported as the largest value its bucket was given: 95 ms here,
/// // never below and at most 6.25 % above.
/// assert!(p95 >= Duration::from_millis(95) && p95 <= Duration::from_micros(95_000 * 17 / 16));
/// assert_eq!(latencies.len(), 100);
/// ```
pub struct LatencyHistogram {
    window: u32,
    recorded: AtomicU64,
    slots: [AtomicU64; 2 * BUCKETS],
    /// The largest value each bucket has ever been given (never reset: a
    /// bucket's values are within 6.25 % of each other, so an old one
    /// costs at most that much, as the bucket's top would).
    maxes: [AtomicU64; BUCKETS],
}

impl LatencyHistogram {
    /// Buckets in a histogram (each with two slots of 8 bytes and its
    /// largest value, 8 more: 23.4 KB).
    #[cfg(not(loom))]
    pub const BUCKETS: usize = BUCKETS;

    crate::sync::const_fn! {
        /// A histogram of the last `window` to `2 × window` samples (a
        /// window of 0 is taken as 1).
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::hedge::LatencyHistogram;
        /// static LATENCY: LatencyHistogram = LatencyHistogram::new(500);
        /// assert_eq!(LATENCY.window(), 500);
        /// assert!(LATENCY.is_empty());
        /// ```
        pub const fn new(window: u32) -> Self {
            LatencyHistogram {
                window: if window == 0 { 1 } else { window },
                recorded: AtomicU64::new(0),
                slots: new_slots(),
                maxes: new_maxes(),
            }
        }
    }

    /// Samples per window.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::LatencyHistogram::new(0).window(), 1);
    /// ```
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Records one latency. Durations past `u64::MAX` nanoseconds (584
    /// years) go to the last bucket.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::hedge::{LatencyHistogram, Percentile};
    ///
    /// let h = LatencyHistogram::new(10);
    /// h.record(Duration::from_secs(3600)); // no upper cap
    /// assert!(h.percentile(Percentile::P50).unwrap() >= Duration::from_secs(3600));
    /// ```
    #[inline]
    pub fn record(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        let bucket = bucket_of(nanos);
        let max = &self.maxes[bucket];
        if max.load(Ordering::Relaxed) < nanos {
            max.fetch_max(nanos, Ordering::Relaxed);
        }
        let seq = self.recorded.fetch_add(1, Ordering::Relaxed);
        let window = seq / u64::from(self.window);
        let tag = window as u32; // wraps: compared by distance
        let slot = &self.slots[2 * bucket + (window & 1) as usize];
        let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            let (held, count) = unpack(old);
            if held == tag {
                Some(pack(tag, count.saturating_add(1)))
            } else if (tag.wrapping_sub(held) as i32) > 0 {
                // Two windows old: no longer read, so started afresh.
                Some(pack(tag, 1))
            } else {
                // A later window has taken the slot while this record
                // waited: its own window is no longer read either.
                None
            }
        });
    }

    /// Samples recorded since the histogram was made (all windows).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// let h = watertight::hedge::LatencyHistogram::new(2);
    /// for _ in 0..5 {
    ///     h.record(Duration::from_millis(1));
    /// }
    /// assert_eq!(h.recorded(), 5);
    /// assert_eq!(h.len(), 3); // the full window of 2 and the current one's 1
    /// ```
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// Samples a percentile reads now: those of the current window and the
    /// one before.
    ///
    /// # Examples
    ///
    /// ```
    /// let h = watertight::hedge::LatencyHistogram::new(100);
    /// assert_eq!(h.len(), 0);
    /// ```
    pub fn len(&self) -> u64 {
        let (now, before) = self.read_windows();
        (0..BUCKETS).map(|b| self.count(b, now, before)).sum()
    }

    /// Whether no sample is read now.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(watertight::hedge::LatencyHistogram::new(100).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `p`th percentile of the samples of the current window and the
    /// one before (nearest rank), reported as the largest value of its
    /// bucket; `None` without samples. Reads every bucket twice (976 × 2
    /// relaxed loads per pass), allocating nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::hedge::{LatencyHistogram, Percentile};
    ///
    /// let h = LatencyHistogram::new(100);
    /// assert_eq!(h.percentile(Percentile::P99), None);
    /// for _ in 0..99 {
    ///     h.record(Duration::from_nanos(5));
    /// }
    /// h.record(Duration::from_nanos(7));
    /// assert_eq!(h.percentile(Percentile::P99), Some(Duration::from_nanos(5)));
    /// assert_eq!(h.percentile(Percentile::new(100.0).unwrap()), Some(Duration::from_nanos(7)));
    /// ```
    pub fn percentile(&self, p: Percentile) -> Option<Duration> {
        self.percentile_of_at_least(p, 1)
    }

    /// [`percentile`](Self::percentile), or `None` when fewer than
    /// `min_samples` are read: a tail of a few samples is not a tail.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::hedge::{LatencyHistogram, Percentile};
    ///
    /// let h = LatencyHistogram::new(100);
    /// h.record(Duration::from_millis(3));
    /// assert_eq!(h.percentile_of_at_least(Percentile::P95, 20), None);
    /// assert!(h.percentile_of_at_least(Percentile::P95, 1).is_some());
    /// ```
    pub fn percentile_of_at_least(&self, p: Percentile, min_samples: u64) -> Option<Duration> {
        let (now, before) = self.read_windows();
        let total: u64 = (0..BUCKETS).map(|b| self.count(b, now, before)).sum();
        if total == 0 || total < min_samples {
            return None;
        }
        let rank = p.rank(total);
        let mut seen = 0;
        let mut last = None;
        for b in 0..BUCKETS {
            let n = self.count(b, now, before);
            if n == 0 {
                continue;
            }
            last = Some(b);
            seen += n;
            if seen >= rank {
                return Some(Duration::from_nanos(self.top(b)));
            }
        }
        // Records raced with the read and moved the windows on: fewer
        // samples than counted at first. The largest still there.
        last.map(|b| Duration::from_nanos(self.top(b)))
    }

    /// Forgets every sample (a read after it sees none until new ones are
    /// recorded): the windows move on by two. Samples recorded while it
    /// runs may be kept or forgotten.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// let h = watertight::hedge::LatencyHistogram::new(10);
    /// h.record(Duration::from_millis(1));
    /// h.reset();
    /// assert!(h.is_empty());
    /// h.record(Duration::from_millis(2));
    /// assert_eq!(h.len(), 1);
    /// ```
    pub fn reset(&self) {
        let w = u64::from(self.window);
        let _ = self
            .recorded
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |seq| {
                // The start of the window two after the current one.
                Some((seq / w + 2).saturating_mul(w))
            });
    }

    /// The current window's number and the one before, as slots hold them.
    #[inline]
    fn read_windows(&self) -> (u32, u32) {
        let window = self.recorded.load(Ordering::Relaxed) / u64::from(self.window);
        let now = window as u32;
        (now, now.wrapping_sub(1))
    }

    /// What a percentile in bucket `b` reads: the largest value the
    /// bucket has been given (never below a sample it holds), or its top.
    #[inline]
    fn top(&self, b: usize) -> u64 {
        let top = bucket_max(b);
        match self.maxes[b].load(Ordering::Relaxed) {
            // A record racing the read may have counted before it raised
            // the maximum: the bucket's top, as without one.
            m if m == 0 || m > top || bucket_of(m) != b => top,
            m => m,
        }
    }

    /// Bucket `b`'s samples of windows `now` and `before` (a slot of
    /// window 0 is counted only once something is recorded: `before` of
    /// window 0 is `u32::MAX`, which no slot holds yet).
    #[inline]
    fn count(&self, b: usize, now: u32, before: u32) -> u64 {
        let mut n = 0;
        for slot in &self.slots[2 * b..2 * b + 2] {
            let (held, count) = unpack(slot.load(Ordering::Relaxed));
            if held == now || held == before {
                n += u64::from(count);
            }
        }
        n
    }
}

crate::sync::const_fn! {
    /// No bucket has seen a value.
    const fn new_maxes() -> [AtomicU64; BUCKETS] {
        #[cfg(not(loom))]
        {
            [const { AtomicU64::new(0) }; BUCKETS]
        }
        #[cfg(loom)]
        {
            core::array::from_fn(|_| AtomicU64::new(0))
        }
    }
}

crate::sync::const_fn! {
    /// Every slot at window 0 with no samples.
    const fn new_slots() -> [AtomicU64; 2 * BUCKETS] {
        #[cfg(not(loom))]
        {
            [const { AtomicU64::new(0) }; 2 * BUCKETS]
        }
        #[cfg(loom)]
        {
            core::array::from_fn(|_| AtomicU64::new(0))
        }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("window", &self.window)
            .field("recorded", &self.recorded())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        assert_eq!(BUCKETS, 976);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(15), 15);
        assert_eq!(bucket_of(16), 16);
        assert_eq!(bucket_of(31), 31);
        assert_eq!(bucket_of(32), 32);
        assert_eq!(bucket_of(34), 33);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_max(BUCKETS - 1), u64::MAX);
        for b in 0..BUCKETS - 1 {
            // Contiguous: each bucket's end is one below the next's start.
            assert_eq!(bucket_of(bucket_max(b)), b, "bucket {b}");
            assert_eq!(bucket_of(bucket_max(b) + 1), b + 1, "bucket {b}");
        }
    }

    #[test]
    fn a_bucket_is_at_most_a_sixteenth_of_its_values_wide() {
        for v in [
            17u64,
            100,
            12_345,
            1_000_000,
            987_654_321,
            1 << 40,
            u64::MAX / 3,
        ] {
            let top = bucket_max(bucket_of(v));
            assert!(top >= v);
            assert!((top - v) as f64 <= v as f64 / 16.0, "{v} -> {top}");
        }
    }

    #[test]
    fn rank_is_the_nearest_rank() {
        assert_eq!(Percentile::P50.rank(10), 5);
        assert_eq!(Percentile::P95.rank(10), 10);
        assert_eq!(Percentile::P95.rank(100), 95);
        assert_eq!(Percentile::P999.rank(1000), 999);
        assert_eq!(Percentile(0.0).rank(10), 1);
        assert_eq!(Percentile(100.0).rank(10), 10);
    }
}
