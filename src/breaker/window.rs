//! The count window: the last `window_size` outcomes in a ring of atomics.
//!
//! Two parts:
//!
//! - **slots**, one `u8` per outcome: a valid bit, the low bits of the
//!   generation that wrote it, and the outcome's kind (success, failure,
//!   slow success, slow failure);
//! - **the window word**, one atomic with the generation the window belongs
//!   to (its tag), the ring's next index, whether the ring has wrapped once,
//!   and the counts of failures and slow calls in the slots.
//!
//! | bits (64-bit word) | bits (32-bit word) | field |
//! |---|---|---|
//! | 0..13 | 0..5 | tag: the generation this window belongs to |
//! | 13..29 | 5..13 | index of the next slot |
//! | 29 | 13 | full: the ring has wrapped at least once |
//! | 30..47 | 14..23 | failures in the window (signed, see below) |
//! | 47..64 | 23..32 | slow calls in the window (signed) |
//!
//! Recording an outcome is: claim the next index with a CAS on the window
//! word that also checks its tag (so an outcome of another generation is
//! never counted here); write the slot with a CAS that refuses to write once
//! the window has been replaced; then, only if the slot's contribution
//! changed, add the difference to the counts with a CAS that again checks the
//! tag. In the steady state of a healthy system (a success replacing a
//! success) that is one CAS and two loads.
//!
//! The counts are kept exact over the slots: each slot write learns what it
//! replaced and moves the counts by the difference. When two writers lap each
//! other on one slot (more outcomes in flight than the window holds), their
//! differences can arrive in either order, so a count may be off by the
//! number of writers in flight for a moment (even below zero); the fields are
//! signed with a spare bit for that, and readers clamp to `0..=calls`. Once
//! the writers are done, the counts equal the slots again.
//!
//! A fresh window (entering Closed or HalfOpen) is installed by marking every
//! slot that does not belong to the new generation empty and then swapping in
//! a word with the new tag; a frozen one (entering Open, ForcedOpen,
//! Disabled) only gets the new tag, so its counts stay readable and no late
//! outcome of the old generation can change them.

use crate::sync::{AtomicU8, Ordering::*};

#[cfg(any(loom, target_has_atomic = "64"))]
mod layout {
    pub(crate) type Word = u64;
    pub(crate) type AtomicWord = crate::sync::AtomicU64;
    pub(crate) const TAG_BITS: u32 = 13;
    pub(crate) const IDX_BITS: u32 = 16;
}

#[cfg(not(any(loom, target_has_atomic = "64")))]
mod layout {
    pub(crate) type Word = u32;
    pub(crate) type AtomicWord = crate::sync::AtomicU32;
    pub(crate) const TAG_BITS: u32 = 5;
    pub(crate) const IDX_BITS: u32 = 8;
}

use layout::{AtomicWord, Word, IDX_BITS, TAG_BITS};

const TAG_MASK: Word = (1 << TAG_BITS) - 1;
const IDX_SHIFT: u32 = TAG_BITS;
const IDX_MASK: Word = (1 << IDX_BITS) - 1;
const FULL_BIT: Word = 1 << (IDX_SHIFT + IDX_BITS);
const FAIL_SHIFT: u32 = IDX_SHIFT + IDX_BITS + 1;
const COUNT_BITS: u32 = (Word::BITS - FAIL_SHIFT) / 2;
const SLOW_SHIFT: u32 = FAIL_SHIFT + COUNT_BITS;
const _: () = assert!(SLOW_SHIFT + COUNT_BITS == Word::BITS);
// A count up to the window size, plus a sign bit for the moments when
// lapping writers' differences arrive out of order.
const _: () = assert!(COUNT_BITS > IDX_BITS);

/// The largest window a breaker can have: 65 535 outcomes with 64-bit
/// atomics, 255 on targets with 32-bit atomics only.
pub(crate) const MAX_WINDOW: usize = IDX_MASK as usize;

/// What one outcome is, as the window stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Success = 0,
    Failure = 1,
    SlowSuccess = 2,
    SlowFailure = 3,
}

impl Kind {
    #[inline]
    pub(crate) const fn new(failed: bool, slow: bool) -> Kind {
        match (failed, slow) {
            (false, false) => Kind::Success,
            (true, false) => Kind::Failure,
            (false, true) => Kind::SlowSuccess,
            (true, true) => Kind::SlowFailure,
        }
    }

    #[inline]
    pub(crate) const fn is_failure(self) -> bool {
        self as u8 & 1 != 0
    }

    #[inline]
    pub(crate) const fn is_slow(self) -> bool {
        self as u8 & 2 != 0
    }
}

const SLOT_VALID: u8 = 0x80;
const SLOT_TAG_SHIFT: u32 = 2;
const SLOT_TAG_MASK: u8 = 0x1f;

#[inline]
const fn slot_value(gen: u32, kind: Kind) -> u8 {
    SLOT_VALID | (((gen as u8) & SLOT_TAG_MASK) << SLOT_TAG_SHIFT) | kind as u8
}

#[inline]
const fn slot_belongs(slot: u8, gen: u32) -> bool {
    slot & SLOT_VALID != 0
        && (slot >> SLOT_TAG_SHIFT) & SLOT_TAG_MASK == (gen as u8) & SLOT_TAG_MASK
}

/// What a slot adds to (failures, slow calls), as seen by generation `gen`.
#[inline]
const fn contribution(slot: u8, gen: u32) -> (i64, i64) {
    if !slot_belongs(slot, gen) {
        return (0, 0);
    }
    ((slot & 1) as i64, ((slot >> 1) & 1) as i64)
}

#[inline]
const fn tag_of(gen: u32) -> Word {
    gen as Word & TAG_MASK
}

#[inline]
const fn fresh(gen: u32) -> Word {
    tag_of(gen)
}

/// Sign-extends the low `bits` of `v`.
#[inline]
const fn signed(v: u64, bits: u32) -> i64 {
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

/// The window's numbers at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Outcomes in the window.
    pub(crate) calls: usize,
    /// Of those, failures (slow or not).
    pub(crate) failures: usize,
    /// Of those, slow calls (successes or failures).
    pub(crate) slow: usize,
}

impl Counts {
    #[inline]
    pub(crate) const fn decode(w: Word, window_size: usize) -> Counts {
        let idx = ((w >> IDX_SHIFT) & IDX_MASK) as usize;
        let calls = if w & FULL_BIT != 0 { window_size } else { idx };
        #[allow(clippy::unnecessary_cast)] // a widening on 32-bit targets
        let x = (w >> FAIL_SHIFT) as u64;
        let failures = signed(x, COUNT_BITS);
        let slow = signed(x.wrapping_sub(failures as u64) >> COUNT_BITS, COUNT_BITS);
        Counts {
            calls,
            failures: clamp(failures, calls),
            slow: clamp(slow, calls),
        }
    }
}

#[inline]
const fn clamp(v: i64, max: usize) -> usize {
    if v < 0 {
        0
    } else if v as usize > max {
        max
    } else {
        v as usize
    }
}

/// The ring of the last `window_size ≤ N` outcomes.
pub(crate) struct Window<const N: usize> {
    word: AtomicWord,
    slots: [AtomicU8; N],
}

impl<const N: usize> Window<N> {
    crate::sync::const_fn! {
        /// An empty window of generation 0.
        pub(crate) const fn new() -> Self {
            Window {
                word: AtomicWord::new(fresh(0)),
                slots: empty_slots::<N>(),
            }
        }
    }

    /// The counts now, whatever generation the window belongs to.
    #[inline]
    pub(crate) fn counts(&self, window_size: usize) -> Counts {
        Counts::decode(self.word.load(Acquire), window_size)
    }

    /// Installs an empty window for generation `gen`, unless `current` says
    /// the breaker has already moved past it. Idempotent: the winner of the
    /// transition and any recorder that finds the window not yet installed
    /// may both call it.
    pub(crate) fn install(&self, gen: u32, current: impl Fn() -> bool) {
        // Empty every slot that another generation wrote; slots of `gen`
        // itself were written after the install by someone who helped.
        for slot in &self.slots {
            let mut v = slot.load(Acquire);
            while !slot_belongs(v, gen) && v != 0 {
                match slot.compare_exchange_weak(v, 0, AcqRel, Acquire) {
                    Ok(_) => break,
                    Err(now) => v = now,
                }
            }
        }
        let mut w = self.word.load(Acquire);
        while w & TAG_MASK != tag_of(gen) {
            if !current() {
                return;
            }
            match self
                .word
                .compare_exchange_weak(w, fresh(gen), AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Hands the window as it is to generation `gen` (entering Open,
    /// ForcedOpen or Disabled): the counts stay for metrics, and outcomes of
    /// the generation before can no longer land in it.
    pub(crate) fn freeze(&self, gen: u32, current: impl Fn() -> bool) {
        let mut w = self.word.load(Acquire);
        while w & TAG_MASK != tag_of(gen) {
            if !current() {
                return;
            }
            let frozen = (w & !TAG_MASK) | tag_of(gen);
            match self.word.compare_exchange_weak(w, frozen, AcqRel, Acquire) {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Records `kind` for generation `gen`. Returns the counts after it, or
    /// `None` when the window no longer belongs to `gen` (the breaker moved
    /// on while the outcome was on its way: a stale outcome).
    ///
    /// `current` tells whether generation `gen` is still the breaker's; when
    /// the window is not yet installed for it, the recorder installs it.
    pub(crate) fn record(
        &self,
        gen: u32,
        kind: Kind,
        window_size: usize,
        current: impl Fn() -> bool,
    ) -> Option<Counts> {
        let tag = tag_of(gen);
        // 1. Claim the next index.
        let mut w = self.word.load(Acquire);
        let (index, mut after) = loop {
            if w & TAG_MASK != tag {
                if !current() {
                    return None;
                }
                self.install(gen, &current);
                w = self.word.load(Acquire);
                if w & TAG_MASK != tag {
                    return None;
                }
                continue;
            }
            let idx = ((w >> IDX_SHIFT) & IDX_MASK) as usize;
            let next = if idx + 1 >= window_size { 0 } else { idx + 1 };
            let full = if next == 0 { FULL_BIT } else { w & FULL_BIT };
            let claimed =
                (w & !(IDX_MASK << IDX_SHIFT) & !FULL_BIT) | ((next as Word) << IDX_SHIFT) | full;
            match self.word.compare_exchange_weak(w, claimed, AcqRel, Acquire) {
                Ok(_) => break (idx, claimed),
                Err(now) => w = now,
            }
        };

        // 2. Write the slot, unless the window has been replaced meanwhile.
        let slot = &self.slots[index];
        let new = slot_value(gen, kind);
        let mut old = slot.load(Acquire);
        while old != new {
            if self.word.load(Acquire) & TAG_MASK != tag {
                return None;
            }
            match slot.compare_exchange_weak(old, new, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }

        // 3. Move the counts by what changed in the slot.
        let (f_old, s_old) = contribution(old, gen);
        let (d_fail, d_slow) = (
            kind.is_failure() as i64 - f_old,
            kind.is_slow() as i64 - s_old,
        );
        if d_fail != 0 || d_slow != 0 {
            let delta =
                ((d_fail << FAIL_SHIFT) as Word).wrapping_add((d_slow << SLOW_SHIFT) as Word);
            let mut w = self.word.load(Acquire);
            after = loop {
                if w & TAG_MASK != tag {
                    return None;
                }
                let moved = w.wrapping_add(delta);
                match self.word.compare_exchange_weak(w, moved, AcqRel, Acquire) {
                    Ok(_) => break moved,
                    Err(now) => w = now,
                }
            };
        }
        Some(Counts::decode(after, window_size))
    }
}

#[cfg(not(loom))]
const fn empty_slots<const N: usize>() -> [AtomicU8; N] {
    [const { AtomicU8::new(0) }; N]
}

#[cfg(loom)]
fn empty_slots<const N: usize>() -> [AtomicU8; N] {
    core::array::from_fn(|_| AtomicU8::new(0))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn record<const N: usize>(w: &Window<N>, gen: u32, kind: Kind, size: usize) -> Counts {
        w.record(gen, kind, size, || true).expect("current window")
    }

    #[test]
    fn counts_grow_until_the_ring_is_full() {
        let w = Window::<8>::new();
        assert_eq!(
            w.counts(4),
            Counts {
                calls: 0,
                failures: 0,
                slow: 0
            }
        );
        assert_eq!(record(&w, 0, Kind::Failure, 4).calls, 1);
        record(&w, 0, Kind::Success, 4);
        record(&w, 0, Kind::SlowSuccess, 4);
        let c = record(&w, 0, Kind::SlowFailure, 4);
        assert_eq!(
            c,
            Counts {
                calls: 4,
                failures: 2,
                slow: 2
            }
        );
    }

    #[test]
    fn the_oldest_outcome_is_evicted() {
        let w = Window::<4>::new();
        for k in [Kind::Failure, Kind::Failure, Kind::Success] {
            record(&w, 0, k, 3);
        }
        assert_eq!(w.counts(3).failures, 2);
        // The fourth outcome replaces the first failure.
        let c = record(&w, 0, Kind::Success, 3);
        assert_eq!(
            c,
            Counts {
                calls: 3,
                failures: 1,
                slow: 0
            }
        );
        // Then the second failure goes.
        let c = record(&w, 0, Kind::SlowSuccess, 3);
        assert_eq!(
            c,
            Counts {
                calls: 3,
                failures: 0,
                slow: 1
            }
        );
    }

    #[test]
    fn window_size_below_capacity_uses_only_that_many_slots() {
        let w = Window::<16>::new();
        for _ in 0..5 {
            record(&w, 0, Kind::Failure, 2);
        }
        assert_eq!(
            w.counts(2),
            Counts {
                calls: 2,
                failures: 2,
                slow: 0
            }
        );
        record(&w, 0, Kind::Success, 2);
        assert_eq!(
            w.counts(2),
            Counts {
                calls: 2,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn an_installed_window_starts_empty_and_ignores_old_slots() {
        let w = Window::<4>::new();
        for _ in 0..4 {
            record(&w, 0, Kind::Failure, 4);
        }
        w.install(1, || true);
        assert_eq!(
            w.counts(4),
            Counts {
                calls: 0,
                failures: 0,
                slow: 0
            }
        );
        // The old failures in the slots do not leave the new window's counts
        // when they are overwritten.
        for _ in 0..4 {
            let c = record(&w, 1, Kind::Success, 4);
            assert_eq!(c.failures, 0);
        }
        let c = record(&w, 1, Kind::Failure, 4);
        assert_eq!(
            c,
            Counts {
                calls: 4,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn a_frozen_window_keeps_its_counts_and_refuses_the_old_generation() {
        let w = Window::<4>::new();
        record(&w, 0, Kind::Failure, 4);
        record(&w, 0, Kind::Success, 4);
        w.freeze(1, || true);
        assert_eq!(
            w.counts(4),
            Counts {
                calls: 2,
                failures: 1,
                slow: 0
            }
        );
        assert_eq!(w.record(0, Kind::Failure, 4, || false), None);
        assert_eq!(
            w.counts(4),
            Counts {
                calls: 2,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn a_recorder_installs_a_window_the_transition_has_not_installed_yet() {
        let w = Window::<4>::new();
        record(&w, 0, Kind::Failure, 4);
        // Generation 1 is current but nobody installed its window.
        let c = record(&w, 1, Kind::Success, 4);
        assert_eq!(
            c,
            Counts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
        // A recorder of a generation that is no longer current does not.
        assert_eq!(w.record(2, Kind::Failure, 4, || false), None);
        assert_eq!(
            w.counts(4),
            Counts {
                calls: 1,
                failures: 0,
                slow: 0
            }
        );
    }

    #[test]
    fn installing_twice_or_late_changes_nothing() {
        let w = Window::<4>::new();
        w.install(3, || true);
        record(&w, 3, Kind::Failure, 4);
        w.install(3, || true);
        assert_eq!(w.counts(4).failures, 1);
        // A late install of an older generation is refused.
        w.install(2, || false);
        assert_eq!(w.counts(4).failures, 1);
    }

    #[test]
    fn signed_counts_decode_and_clamp() {
        // failures -1 (a difference that arrived early), slow 2.
        let v = ((-1i64 << FAIL_SHIFT) as Word).wrapping_add((2i64 << SLOW_SHIFT) as Word);
        let v = v | (3 << IDX_SHIFT);
        let c = Counts::decode(v, 8);
        assert_eq!(
            c,
            Counts {
                calls: 3,
                failures: 0,
                slow: 2
            }
        );
    }

    #[test]
    fn kinds_encode_failure_and_slowness() {
        for (f, s) in [(false, false), (true, false), (false, true), (true, true)] {
            let k = Kind::new(f, s);
            assert_eq!((k.is_failure(), k.is_slow()), (f, s));
        }
    }
}
