//! The time window: the outcomes of the last `duration`, in a ring of
//! `buckets` buckets of `duration / buckets` each, every bucket three
//! counters (calls, failures, slow calls) in atomics.
//!
//! Time is cut into **epochs** of one bucket's length (`now / bucket`, by the
//! breaker's clock); epoch `e` lives in bucket `e % buckets`. The window at
//! epoch `e` is the epochs `e - buckets + 1 ..= e`: the current, partial
//! bucket and the `buckets - 1` whole ones before it, as in resilience4j's
//! `SlidingTimeWindowMetrics` (one partial aggregation per epoch second
//! there, per bucket here).
//!
//! **A counter is one `u32`** that says whose it is and when:
//!
//! | bits | field |
//! |---|---|
//! | 0..22 | count (saturates: a bucket counts its first 4 194 303 calls) |
//! | 22..30 | epoch tag: the low 8 bits of the epoch it counts |
//! | 30..32 | era tag: the era of the window word it was written in |
//!
//! so a counter can never add to the wrong bucket or window: recording is a
//! CAS that either adds one to a counter of this generation and epoch, or
//! replaces a counter of another epoch or generation by a count of one. No
//! reset of a bucket has to be coordinated with the writers into it, and no
//! two counters have to change together: a bucket's calls may be counted an
//! instant before its failure, which then counts as a success for that
//! instant (the failure's writer counts again after its own write, so the
//! last writer sees every outcome, as in the count window).
//!
//! **Stale buckets are cleared lazily** (no timer, no lock): the window word
//! keeps the latest epoch any call has seen (22 bits of it, and a bit that
//! says there is one, in the bits the count window's index and run use;
//! beside the generation tag and frozen bit, which it shares with the other
//! kinds); the first call of a
//! new epoch moves it forward with a CAS and zeroes the counters of the
//! epochs it skipped over (at most `buckets`), so a counter is never left
//! behind long enough for its 8-bit epoch tag to come round again. A reader
//! (the trip check, [`metrics`](super::CircuitBreaker::metrics)) sums the
//! counters whose tags are the window's generation and an epoch of the window
//! that is not past the latest, so a bucket not yet cleared is never read.
//!
//! **Generations**: entering Closed or HalfOpen installs a new window
//! generation in the window word (as for the count window), which leaves
//! no latest epoch, so the new window reads empty and its first call bumps
//! the era and zeroes every older counter; a
//! writer checks the window word between reading a counter and writing it,
//! so an outcome of an older generation never lands in the new window (it
//! either sees the new tag, or its CAS fails on a counter the sweep zeroed
//! and it sees the tag on retry).
//!
//! **The closed path's success** is one CAS: a plain success into a closed
//! breaker, whose bucket is this epoch's (the window word's latest epoch
//! is this call's, so there is nothing to move on or clear) and already
//! holds `minimum_calls` (so no trip check is due), is counted inline by
//! `takes_time_success`: the counter's load, the window word's load (in
//! that order, as every writer reads them), and a CAS of the value the
//! checks were made on. Anything else, a lost CAS included, takes the full
//! path below, which decides as it always did; the inline path is that
//! path's first pass with the answers known. (A `fetch_add` would not need
//! the load, but it cannot refuse: it would add to a counter a clear or
//! sweep has just replaced, or carry a saturated count into the tags, and
//! undoing it afterwards shows a call that never was to a concurrent trip
//! check. On x86 a locked add costs what a locked CAS does.)
//!
//! **What is not exact**, and by how little: a window idle for a multiple of
//! 2²² bucket lengths (70 minutes of 1 ms buckets, 48 days of 1 s ones),
//! to within `buckets` of it, takes its latest epoch for a recent one and
//! may read the buckets of that old lap; a writer preempted for 128
//! bucket lengths between reading the latest epoch and its CAS could take a
//! live bucket for a stale one (the 8-bit tag has wrapped); a writer stalled
//! across 256 generations could take a later window for its own. Both need
//! a thread stalled for longer than the window, the same order of residue as
//! the count window's 6-bit slot tags.

use super::window::{tag_of, Counts, Kind, Recorded, Window, WindowStorage, FROZEN_BIT, TAG_MASK};
use crate::sync::{fence, AtomicU32, Ordering::*};

const _: () = assert!(FROZEN_BIT == 1 << 19);

const COUNT_BITS: u32 = 22;
const COUNT_MAX: u32 = (1 << COUNT_BITS) - 1;
const ETAG_SHIFT: u32 = COUNT_BITS;
const GTAG_SHIFT: u32 = ETAG_SHIFT + 8;

/// The most buckets a time window may have: 64 (a minute of one-second
/// buckets fits). A bucket's counters are at most two laps old when a call
/// clears them, and the 8-bit epoch tag tells epochs apart up to 255 apart
/// (with the few epochs a call may be ahead): 2 × 64 + 64 < 256.
pub(crate) const MAX_BUCKETS: usize = 64;
const _: () = assert!(3 * MAX_BUCKETS < 256);

/// The shortest bucket: 1 ms, the resolution of the coarsest clock the
/// crate has ([`CoarseClock`](crate::clock::CoarseClock)'s default) and of
/// the breaker's timestamps on targets without 64-bit atomics.
pub(crate) const MIN_BUCKET_NS: u64 = 1_000_000;

/// One bucket of the time window: its three counters. Opaque outside the
/// breaker; 12 bytes.
#[derive(Debug)]
pub struct Bucket {
    calls: AtomicU32,
    failures: AtomicU32,
    slow: AtomicU32,
}

impl Bucket {
    crate::sync::const_fn! {
        /// An empty bucket (generation 0's, epoch 0's, count 0).
        pub(crate) const fn new() -> Self {
            Bucket {
                calls: AtomicU32::new(0),
                failures: AtomicU32::new(0),
                slow: AtomicU32::new(0),
            }
        }
    }

    fn cells(&self) -> [&AtomicU32; 3] {
        [&self.calls, &self.failures, &self.slow]
    }
}

/// A counter of 2-bit tag `mine`, epoch `epoch`.
#[inline]
const fn cell(mine: u32, epoch: u64, count: u32) -> u32 {
    ((mine & 3) << GTAG_SHIFT) | (((epoch as u32) & 0xff) << ETAG_SHIFT) | count
}

#[inline]
const fn count_of(v: u32) -> u32 {
    v & COUNT_MAX
}

#[inline]
const fn tags_of(v: u32) -> u32 {
    v >> ETAG_SHIFT
}

#[inline]
const fn gen_tag(v: u32) -> u32 {
    v >> GTAG_SHIFT
}

#[inline]
const fn epoch_tag(v: u32) -> u8 {
    (v >> ETAG_SHIFT) as u8
}

/// How many epochs after `epoch` the counter `v` is (0: the same, or
/// older; tag arithmetic, valid for counters up to 127 epochs apart).
#[inline]
fn ahead(v: u32, epoch: u64) -> u32 {
    u32::from(epoch_tag(v).wrapping_sub(epoch as u8))
}

/// The time window's part of the window word, beside the generation tag
/// (bits 0..8) and the frozen bit (19) it shares with the other kinds: the
/// latest epoch (20 bits of it and a bit saying there is one: 21 bits, in
/// bits 8..19 and 20..30) and the era (bits 30..32), bumped whenever the
/// window is found idle for a whole window, or with no latest epoch (as
/// after an install): a counter's 2-bit tag is the era it was written in,
/// so a bump makes every older counter foreign at once, and the call that
/// bumps it zeroes them, every one: no counter outlives the sweep after
/// it, so none can meet its tag again four eras on. (An install keeps the
/// era; the count and consecutive windows' claims drop these bits.)
const LATEST_BITS: u32 = 20;
const LATEST_SET: u32 = 1 << LATEST_BITS;
const ERA_SHIFT: u32 = 30;

#[inline]
const fn latest_of(w: u32) -> u32 {
    ((w >> 8) & 0x7ff) | (((w >> 20) & 0x3ff) << 11)
}

#[inline]
const fn era_of(w: u32) -> u32 {
    w >> ERA_SHIFT
}

/// The 2-bit tag of the counters the window word `w` takes: its era.
#[inline]
const fn mine_of(w: u32) -> u32 {
    era_of(w)
}

#[inline]
const fn with_latest(w: u32, latest: u32, era: u32) -> u32 {
    (w & (TAG_MASK | FROZEN_BIT))
        | ((latest & 0x7ff) << 8)
        | (((latest >> 11) & 0x3ff) << 20)
        | ((era & 3) << ERA_SHIFT)
}

/// `a - b` in epochs, for 20-bit epochs (sign-extended).
#[inline]
const fn ediff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << (32 - LATEST_BITS)) as i32) >> (32 - LATEST_BITS)
}

#[inline]
const fn elow(epoch: u64) -> u32 {
    (epoch as u32) & (LATEST_SET - 1)
}

/// The time window's settings, as the machine passes them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) bucket_ns: u64,
    pub(crate) buckets: usize,
}

impl Spec {
    #[inline]
    pub(crate) fn epoch(self, now_ns: u64) -> u64 {
        now_ns / self.bucket_ns
    }
}

impl<W: WindowStorage> Window<W> {
    fn bucket(&self, epoch: u64, spec: Spec) -> &Bucket {
        &self.slots.buckets()[(epoch % spec.buckets as u64) as usize]
    }

    /// How many epochs the latest of word `w` is past `epoch` (negative:
    /// `epoch` is newer); 0 when none is set.
    #[inline]
    fn lead(w: u32, epoch: u64) -> i32 {
        let latest = latest_of(w);
        if latest & LATEST_SET == 0 {
            0
        } else {
            ediff(latest, elow(epoch))
        }
    }

    /// Moves the latest epoch forward to `epoch` if it is behind. The call
    /// that moves it zeroes the buckets of the epochs passed over, or, when
    /// a whole window (or more) was passed over or none was set, bumps the
    /// era and zeroes every counter of an older era or generation. Returns
    /// the window word it leaves, or `None` if the window no longer takes
    /// generation `tag`.
    fn advance(&self, tag: u32, epoch: u64, spec: Spec) -> Option<u32> {
        let mut w = self.word.load(Acquire);
        loop {
            if !Self::open_to(w, tag) {
                return None;
            }
            let latest = latest_of(w);
            let gap = if latest & LATEST_SET == 0 {
                i32::MAX
            } else {
                ediff(elow(epoch), latest)
            };
            if gap <= 0 {
                return Some(w);
            }
            let idle = gap >= spec.buckets as i32;
            let era = era_of(w) + u32::from(idle);
            let next = with_latest(w, elow(epoch) | LATEST_SET, era);
            match self.word.compare_exchange_weak(w, next, AcqRel, Acquire) {
                Ok(_) => {
                    if idle {
                        self.sweep(tag);
                    } else {
                        for x in (epoch + 1 - gap as u64)..=epoch {
                            self.clear_for(tag, x, spec);
                        }
                    }
                    return Some(next);
                }
                Err(now) => w = now,
            }
        }
    }

    /// Zeroes the counters of `epoch`'s bucket that hold an older epoch
    /// (the previous laps': at most two windows old, so the 8-bit tag tells
    /// them from a newer one).
    fn clear_for(&self, tag: u32, epoch: u64, spec: Spec) {
        for c in self.bucket(epoch, spec).cells() {
            let mut v = c.load(Acquire);
            loop {
                let w = self.word.load(Acquire);
                if !Self::open_to(w, tag) {
                    return;
                }
                let lead = Self::lead(w, epoch).max(0) as u32;
                // The same epoch (0), or a newer one (another call moved
                // on): nothing stale to clear.
                if ahead(v, epoch) <= lead {
                    break;
                }
                let zero = cell(gen_tag(v), epoch, 0);
                match c.compare_exchange_weak(v, zero, AcqRel, Acquire) {
                    Ok(_) => break,
                    Err(now) => v = now,
                }
            }
        }
    }

    /// Zeroes every counter whose 2-bit tag is not the one the window word
    /// takes now (re-read for each, so a sweep by a call that has fallen
    /// behind never zeroes the current era's counters), while the window
    /// still takes generation `tag`.
    fn sweep(&self, tag: u32) {
        for b in self.slots.buckets() {
            for c in b.cells() {
                let mut v = c.load(Acquire);
                loop {
                    let w = self.word.load(Acquire);
                    if !Self::open_to(w, tag) || gen_tag(v) == mine_of(w) {
                        break;
                    }
                    let zero = cell(mine_of(w), u64::from(epoch_tag(v)), 0);
                    match c.compare_exchange_weak(v, zero, AcqRel, Acquire) {
                        Ok(_) => break,
                        Err(now) => v = now,
                    }
                }
            }
        }
    }

    /// Adds one to counter `c` for generation `tag`, epoch `epoch`. Returns
    /// the count after it, or `None` when the outcome must not land: the
    /// window word no longer takes the generation, the bucket has moved on
    /// to a later epoch, or the epoch has left the window (the writer
    /// stalled). `Some(0)` when the counter is saturated.
    ///
    /// `then` is for a failure or slow call whose call is already counted:
    /// it lands in a window frozen since (a trip by another call), as the
    /// count window's claimed slots do, so the frozen window shows it.
    fn add(&self, c: &AtomicU32, tag: u32, epoch: u64, spec: Spec, then: bool) -> Option<u32> {
        let mut v = c.load(Acquire);
        loop {
            // The word after the counter: a counter zeroed by an install's
            // or an era's sweep is read with the word that made it.
            let w = self.word.load(Acquire);
            let takes = if then {
                w & TAG_MASK == tag
            } else {
                Self::open_to(w, tag)
            };
            if !takes {
                return None;
            }
            let lead = Self::lead(w, epoch);
            if lead >= spec.buckets as i32 {
                return None;
            }
            let mine = mine_of(w);
            let new = if tags_of(v) == tags_of(cell(mine, epoch, 0)) {
                if count_of(v) == COUNT_MAX {
                    return Some(0);
                }
                v + 1
            } else {
                let a = ahead(v, epoch);
                if gen_tag(v) == mine && a != 0 && a <= lead.max(0) as u32 {
                    return None;
                }
                cell(mine, epoch, 1)
            };
            match c.compare_exchange_weak(v, new, AcqRel, Acquire) {
                Ok(_) => return Some(count_of(new)),
                Err(now) => v = now,
            }
        }
    }

    /// The closed path's plain success, counted with one CAS and nothing
    /// else when the window is in step: it takes generation `generation`,
    /// its latest epoch is this call's (nothing to advance, no bucket to
    /// clear), and this epoch's calls counter is this era's and epoch's,
    /// already at `minimum` calls or more (so the trip check would be
    /// skipped); a saturated counter takes it as is. Returns `false`, having written nothing,
    /// whenever any of that does not hold or the CAS loses a race:
    /// [`record_time`](Self::record_time) then decides, as for every other
    /// outcome.
    ///
    /// It is [`add`](Self::add)'s first pass with the answers known: the
    /// counter is read before the window word, as there, so a counter
    /// zeroed by a sweep is judged by the word that made it; the CAS
    /// replaces only the value the checks were made on.
    #[inline(always)]
    pub(crate) fn takes_time_success(
        &self,
        generation: u32,
        now_ns: u64,
        spec: Spec,
        minimum: usize,
    ) -> bool {
        let epoch = spec.epoch(now_ns);
        let c = &self.bucket(epoch, spec).calls;
        let v = c.load(Acquire);
        let w = self.word.load(Acquire);
        let count = count_of(v);
        if !(Self::open_to(w, tag_of(generation))
            && latest_of(w) == elow(epoch) | LATEST_SET
            && tags_of(v) == tags_of(cell(mine_of(w), epoch, 0))
            && count as usize >= minimum)
        {
            return false;
        }
        // Saturated: the bucket's rates are those of its first calls, and
        // this one is not counted (as in `record_time`: nothing written).
        // A strong compare-and-swap: a weak one's spurious failure would
        // send the success the long way for nothing (and on x86 they are
        // the same instruction).
        count == COUNT_MAX || c.compare_exchange(v, v + 1, AcqRel, Acquire).is_ok()
    }

    /// Records `kind` for generation `gen` at `now_ns`. Returns the counts
    /// after it when they may have raised a rate or reached the minimum,
    /// `Some(Unchanged)` when they cannot have (a plain success into a
    /// bucket already past `minimum` calls: the trip check is skipped), or
    /// `None` when the outcome is stale (the window is another
    /// generation's, or frozen).
    ///
    /// A plain success can trip the breaker only by bringing the window to
    /// `minimum` calls, or as the first call of a new epoch (the oldest
    /// bucket has just left the window); both happen only while its own
    /// bucket holds at most `minimum` calls, which is when it counts.
    pub(crate) fn record_time(
        &self,
        generation: u32,
        kind: Kind,
        now_ns: u64,
        spec: Spec,
        minimum: usize,
        current: impl Fn() -> bool,
    ) -> Option<Recorded> {
        let tag = tag_of(generation);
        let w = self.word.load(Acquire);
        if !Self::open_to(w, tag) {
            if w & TAG_MASK == tag || !current() {
                return None;
            }
            self.install(generation, &current);
        }
        let epoch = spec.epoch(now_ns);
        self.advance(tag, epoch, spec)?;
        let b = self.bucket(epoch, spec);
        let calls = self.add(&b.calls, tag, epoch, spec, false)?;
        if calls == 0 {
            // Saturated: the bucket's rates are those of its first calls.
            return Some(Recorded::Unchanged);
        }
        let (failed, slow) = (kind as u8 & 1 != 0, kind as u8 & 2 != 0);
        if failed {
            self.add(&b.failures, tag, epoch, spec, true)?;
        }
        if slow {
            self.add(&b.slow, tag, epoch, spec, true)?;
        }
        if !failed && !slow && calls as usize > minimum {
            return Some(Recorded::Unchanged);
        }
        // As in the count window: the fence orders this outcome's writes
        // before the reads of the other buckets, against every other
        // counting writer, so of two that fill the window together one sees
        // both.
        fence(SeqCst);
        let w = self.word.load(Acquire);
        if w & TAG_MASK != tag {
            return Some(Recorded::Unchanged);
        }
        Some(Recorded::Counted(self.time_counts_at(w, epoch, spec)))
    }

    /// The counts of the window whose word is `w` at epoch `epoch`: the
    /// buckets of the epochs `epoch - buckets + 1 ..= epoch` not past the
    /// latest epoch, their counters of the word's generation and era.
    fn time_counts_at(&self, w: u32, epoch: u64, spec: Spec) -> Counts {
        let latest = latest_of(w);
        let mut counts = Counts::default();
        if latest & LATEST_SET == 0 {
            return counts;
        }
        let mine = mine_of(w);
        for k in 0..(spec.buckets as u64).min(epoch + 1) {
            let x = epoch - k;
            // Not yet reached by any call: its bucket is not cleared yet.
            if ediff(elow(x), latest) > 0 {
                continue;
            }
            let want = tags_of(cell(mine, x, 0));
            let [calls, failures, slow] = self.bucket(x, spec).cells().map(|c| {
                let v = c.load(Acquire);
                if tags_of(v) == want {
                    count_of(v) as usize
                } else {
                    0
                }
            });
            counts.calls += calls;
            counts.failures += failures;
            counts.slow += slow;
        }
        counts
    }

    /// The counts now (`now_ns`), for the generation the window belongs to.
    pub(crate) fn time_counts(&self, now_ns: u64, spec: Spec) -> Counts {
        self.time_counts_at(self.word.load(Acquire), spec.epoch(now_ns), spec)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::breaker::window::Inline;

    const MS: u64 = 1_000_000;
    /// Ten buckets of 100 ms: a one-second window.
    const SPEC: Spec = Spec {
        bucket_ns: 100 * MS,
        buckets: 10,
    };

    fn rec(w: &Window<Inline<1, 10>>, generation: u32, kind: Kind, at_ms: u64) -> Option<Recorded> {
        w.record_time(generation, kind, at_ms * MS, SPEC, 1, || true)
    }

    fn counts(calls: usize, failures: usize, slow: usize) -> Counts {
        Counts {
            calls,
            failures,
            slow,
        }
    }

    #[test]
    fn buckets_add_up_and_leave_the_window_with_time() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 0);
        rec(&w, 0, Kind::Success, 50);
        rec(&w, 0, Kind::SlowSuccess, 150);
        assert_eq!(w.time_counts(150 * MS, SPEC), counts(3, 1, 1));
        // At 999 ms all three are in; at 1000 ms the first bucket is out.
        assert_eq!(w.time_counts(999 * MS, SPEC), counts(3, 1, 1));
        assert_eq!(w.time_counts(1000 * MS, SPEC), counts(1, 0, 1));
        assert_eq!(w.time_counts(1100 * MS, SPEC), counts(0, 0, 0));
    }

    #[test]
    fn a_bucket_of_a_later_lap_starts_from_zero() {
        let w = Window::<Inline<1, 10>>::new();
        for _ in 0..3 {
            rec(&w, 0, Kind::Failure, 20);
        }
        // Epoch 10 is bucket 0 again: the three failures are gone.
        rec(&w, 0, Kind::Success, 1020);
        assert_eq!(w.time_counts(1020 * MS, SPEC), counts(1, 0, 0));
    }

    #[test]
    fn a_long_idle_gap_clears_every_bucket_even_when_the_tag_comes_round() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 300); // epoch 3
                                        // Epoch 256 * 10 + 3 has the same bucket and the same 8-bit tag.
        let later = (2560 + 3) * 100;
        assert_eq!(w.time_counts(later * MS, SPEC), counts(0, 0, 0));
        rec(&w, 0, Kind::Success, later);
        assert_eq!(w.time_counts(later * MS, SPEC), counts(1, 0, 0));
    }

    #[test]
    fn a_bucket_not_reached_by_a_call_is_not_read() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 0);
        // Bucket 5 still holds nothing of epoch 5, and epoch 5 is past the
        // latest epoch: skipped, so no leftover of an old lap is read.
        assert_eq!(w.time_counts(500 * MS, SPEC), counts(1, 1, 0));
    }

    #[test]
    fn an_install_empties_the_window_and_refuses_the_old_generation() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 0);
        w.install(1, || true);
        assert_eq!(w.time_counts(0, SPEC), counts(0, 0, 0));
        // A late outcome of generation 0, which is no longer current.
        assert_eq!(w.record_time(0, Kind::Failure, 0, SPEC, 1, || false), None);
        rec(&w, 1, Kind::Success, 0);
        assert_eq!(w.time_counts(0, SPEC), counts(1, 0, 0));
        // Four generations on, the 2-bit tag repeats: the install zeroed the
        // old counters, so nothing comes back.
        rec(&w, 1, Kind::Failure, 0);
        for g in 2..=5 {
            w.install(g, || true);
            rec(&w, g, Kind::Success, 0);
        }
        assert_eq!(w.time_counts(0, SPEC), counts(1, 0, 0));
    }

    #[test]
    fn installs_with_no_call_between_never_bring_old_counters_back() {
        // Found by the model: four windows installed with no call in them
        // must not make the first one's counters current again.
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 0);
        for g in 1..=8 {
            w.install(g, || true);
            assert_eq!(w.time_counts(0, SPEC), counts(0, 0, 0));
        }
        rec(&w, 8, Kind::Success, 0);
        assert_eq!(w.time_counts(0, SPEC), counts(1, 0, 0));
    }

    #[test]
    fn a_frozen_window_takes_nothing() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Failure, 0);
        w.freeze(|| true);
        assert_eq!(rec(&w, 0, Kind::Failure, 0), None);
        assert_eq!(w.time_counts(0, SPEC), counts(1, 1, 0));
    }

    #[test]
    fn a_success_past_the_minimum_skips_the_trip_check() {
        let w = Window::<Inline<1, 10>>::new();
        let r = |kind| w.record_time(0, kind, 0, SPEC, 2, || true);
        assert!(matches!(r(Kind::Success), Some(Recorded::Counted(_))));
        assert!(matches!(r(Kind::Success), Some(Recorded::Counted(_))));
        assert_eq!(r(Kind::Success), Some(Recorded::Unchanged));
        assert_eq!(r(Kind::Failure), Some(Recorded::Counted(counts(4, 1, 0))));
    }

    #[test]
    fn the_inline_success_counts_only_a_window_in_step() {
        let w = Window::<Inline<1, 10>>::new();
        let inline = |generation, at_ms, minimum| {
            w.takes_time_success(generation, at_ms * MS, SPEC, minimum)
        };
        // No latest epoch yet (a fresh or just installed window).
        assert!(!inline(0, 0, 0));
        rec(&w, 0, Kind::Success, 0);
        // Epoch 0's bucket holds 1 call: under a minimum of 2, the trip
        // check is due, so the slow path takes it.
        assert!(!inline(0, 50, 2));
        assert!(inline(0, 50, 1));
        assert_eq!(w.time_counts(50 * MS, SPEC), counts(2, 0, 0));
        // A new epoch: the window must move on first.
        assert!(!inline(0, 100, 0));
        assert_eq!(w.time_counts(100 * MS, SPEC), counts(2, 0, 0));
        // Another generation's success, and a frozen window's.
        assert!(!inline(1, 50, 0));
        w.freeze(|| true);
        assert!(!inline(0, 50, 0));
        assert_eq!(w.time_counts(50 * MS, SPEC), counts(2, 0, 0));
    }

    #[test]
    fn the_inline_success_leaves_a_saturated_counter_as_it_is() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Success, 0);
        let b = w.bucket(0, SPEC);
        let v = b.calls.load(Relaxed);
        b.calls.store((v & !COUNT_MAX) | COUNT_MAX, Relaxed);
        assert!(w.takes_time_success(0, 0, SPEC, 1));
        assert_eq!(b.calls.load(Relaxed), (v & !COUNT_MAX) | COUNT_MAX);
    }

    #[test]
    fn a_late_outcome_of_an_epoch_out_of_the_window_is_dropped() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Success, 1500);
        // Epoch 2 is more than ten epochs before the latest (15).
        assert_eq!(rec(&w, 0, Kind::Failure, 200), None);
        // Epoch 6 is in the window, and its bucket (6) holds nothing newer.
        assert!(rec(&w, 0, Kind::Failure, 600).is_some());
        assert_eq!(w.time_counts(1500 * MS, SPEC), counts(2, 1, 0));
    }

    #[test]
    fn counters_saturate_and_a_saturated_bucket_counts_nothing_more() {
        let w = Window::<Inline<1, 10>>::new();
        rec(&w, 0, Kind::Success, 0);
        let b = w.bucket(0, SPEC);
        let v = b.calls.load(Relaxed);
        b.calls.store((v & !COUNT_MAX) | (COUNT_MAX - 1), Relaxed);
        rec(&w, 0, Kind::Success, 0);
        assert_eq!(rec(&w, 0, Kind::Failure, 0), Some(Recorded::Unchanged));
        let c = w.time_counts(0, SPEC);
        assert_eq!((c.calls, c.failures), (COUNT_MAX as usize, 0));
    }
}
