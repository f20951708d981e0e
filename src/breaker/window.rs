//! The count window: the last `window_size` outcomes in a ring of atomics.
//!
//! Two parts:
//!
//! - **slots**, one `u8` per outcome: the low 6 bits of the generation that
//!   wrote it (its tag) and the outcome's kind (success, failure, slow
//!   success, slow failure);
//! - **the window word**, a `u32` (lock-free on every target) with the
//!   generation the window belongs to, the ring's next index, whether the
//!   ring has wrapped once, and how many of the latest claims in a row were
//!   plain successes.
//!
//! | bits | field |
//! |---|---|
//! | 0..8 | tag: the low 8 bits of the generation this window belongs to |
//! | 8..18 | index of the next slot |
//! | 18 | full: the ring has wrapped at least once |
//! | 19 | frozen: the breaker has left this window's generation |
//! | 20..30 | run: plain successes claimed in a row, up to the window size |
//!
//! (The consecutive-failures window keeps its run in the index field, and
//! the time window its latest epoch in bits 8..19 and 20..32: see
//! `time.rs`.)
//!
//! Recording an outcome is: claim the next index with a CAS on the window
//! word that also checks its tag (so an outcome of another generation is
//! never counted here); then write the slot with a CAS that refuses to write
//! once the window word has moved to another generation.
//!
//! **A healthy window takes a success for free.** When the ring is full and
//! the last `window_size` claims were all plain successes (the run field),
//! the window holds nothing but plain successes, and one more would not
//! change it: such a success is recorded by reading the window word, with no
//! write at all. Any other outcome resets the run in its own claim, so a
//! success that sees a full run is ordered before every failure that could
//! change the window. That is the closed-state hot path of a healthy system:
//! two loads (the state word, the window word) and no read-modify-write.
//!
//! **Counts are derived, never kept.** The number of calls is the index (or
//! the window size once full); failures and slow calls are counted from the
//! slots below it whose tag is the window's. So there is no counter that
//! concurrent writers could leave out of step with the slots: when two
//! writers lap each other on one slot (more outcomes in flight than the
//! window holds), the slot simply holds one of the two outcomes. Counting
//! reads `window_size` bytes; it happens only when an outcome could have
//! raised a rate (a failure or slow call written, or a call added before the
//! ring is full), and for metrics.
//!
//! A slot claimed but not yet written still holds an older generation's tag
//! and counts as a plain success for that moment; its writer counts again
//! once it has written (after a fence that orders its write before its
//! reads, against the other writers), so the last of several concurrent
//! writers sees them all. A window frozen by a transition still takes the
//! outcomes it had handed slots to. A writer delayed past the install of the
//! next window cannot write into it: its CAS either sees the window word's
//! new tag before it writes, or finds the slot already written by the new
//! window (a different tag) and then sees the new tag. The 6-bit
//! slot tag could only be confused with a slot written 64 generations
//! earlier, and only in a slot below the index that its new owner has
//! claimed but not yet written.
//!
//! Entering Closed or HalfOpen installs a fresh window (index 0, new tag);
//! entering Open, ForcedOpen or Disabled marks the window as it is frozen
//! (kept for metrics: it shows why it opened), so no late outcome of its
//! generation can land in it.

use super::time::Bucket;
use crate::sync::{fence, AtomicU32, AtomicU8, Ordering::*};

const TAG_BITS: u32 = 8;
pub(super) const TAG_MASK: u32 = (1 << TAG_BITS) - 1;
const IDX_SHIFT: u32 = TAG_BITS;
const IDX_BITS: u32 = 10;
const IDX_MASK: u32 = (1 << IDX_BITS) - 1;
const FULL_BIT: u32 = 1 << (IDX_SHIFT + IDX_BITS);
pub(super) const FROZEN_BIT: u32 = FULL_BIT << 1;
const RUN_SHIFT: u32 = IDX_SHIFT + IDX_BITS + 2;
const RUN_MASK: u32 = IDX_MASK;
const _: () = assert!(RUN_SHIFT + IDX_BITS <= 30);
/// The time window's era (see `time.rs`): the word's top two bits.
const ERA_MASK: u32 = 3 << 30;
// A recorder checks the state word's whole generation before the window's
// tag, so the tag only has to tell apart windows a few generations apart.
const _: () = assert!(TAG_BITS <= super::word::GEN_BITS);

/// The largest window a breaker can have: 1023 outcomes.
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

    #[cfg(test)]
    const fn is_failure(self) -> bool {
        self as u8 & 1 != 0
    }

    #[cfg(test)]
    const fn is_slow(self) -> bool {
        self as u8 & 2 != 0
    }
}

const SLOT_TAG_SHIFT: u32 = 2;
const SLOT_TAG_MASK: u8 = 0x3f;
/// What a never-written slot holds: generation 63's success, which no
/// fresh breaker's generation 0 window counts.
const EMPTY_SLOT: u8 = SLOT_TAG_MASK << SLOT_TAG_SHIFT;

#[inline]
const fn slot_value(generation: u32, kind: Kind) -> u8 {
    (((generation as u8) & SLOT_TAG_MASK) << SLOT_TAG_SHIFT) | kind as u8
}

#[inline]
pub(super) const fn tag_of(generation: u32) -> u32 {
    generation & TAG_MASK
}

/// The window's numbers at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Outcomes in the window.
    pub(crate) calls: usize,
    /// Of those, failures (slow or not).
    pub(crate) failures: usize,
    /// Of those, slow calls (successes or failures).
    pub(crate) slow: usize,
}

/// Where a breaker's window keeps its slots (one byte per outcome): the `W`
/// of [`CircuitBreaker<C, N, H, W>`](super::CircuitBreaker).
///
/// Two kinds, and no others (the trait is sealed):
///
/// - [`Inline<N>`], the default: `N` slots inside the breaker, sized at
///   compile time, so that a breaker needs no heap and can live in a
///   `static` on a microcontroller;
/// - [`Heap`] (feature `alloc`): exactly `window_size` slots in one boxed
///   slice, allocated once when the breaker is made, for a window read from
///   config at run time ([`HeapBreaker`](super::HeapBreaker)).
///
/// Both are the same lock-free ring; a call reads and writes the slots the
/// same way and allocates nothing with either.
///
/// # Examples
///
/// Code that works with a breaker of either kind names the storage as a
/// parameter bound by this trait:
///
/// ```
/// use watertight::breaker::{OnTransition, WindowStorage};
/// use watertight::clock::{Clock, ManualClock};
/// use watertight::{BreakerConfig, CircuitBreaker};
///
/// fn failures<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
///     b: &CircuitBreaker<C, N, H, W>,
/// ) -> usize {
///     b.metrics().failed_calls
/// }
///
/// let clock = ManualClock::new();
/// let inline: CircuitBreaker<_, 64> = CircuitBreaker::new("a", BreakerConfig::DEFAULT, &clock);
/// inline.try_acquire().unwrap().failure();
/// assert_eq!(failures(&inline), 1);
/// # #[cfg(feature = "alloc")] {
/// let config = BreakerConfig::builder().window_size(200).build().unwrap();
/// let heap = watertight::breaker::HeapBreaker::try_new("b", config, &clock).unwrap();
/// heap.try_acquire().unwrap().failure();
/// assert_eq!(failures(&heap), 1);
/// # }
/// ```
pub trait WindowStorage: sealed::Slots {}

pub(crate) mod sealed {
    use crate::sync::AtomicU8;

    use super::super::time::Bucket;

    /// The slots, and how to make them for a window of a given size.
    pub trait Slots {
        /// Every slot (at least the window's size).
        #[doc(hidden)]
        fn slots(&self) -> &[AtomicU8];
        /// Every bucket of the time window (at least its `buckets`).
        #[doc(hidden)]
        fn buckets(&self) -> &[Bucket];
        /// Empty slots for a window of `window_size ≤` the breaker's `N`
        /// and `buckets ≤` its bucket capacity (checked by the caller). The
        /// heap's allocation, once.
        #[doc(hidden)]
        fn for_window(window_size: usize, buckets: usize) -> Self
        where
            Self: Sized;
        /// The most buckets this storage can hold: a constant, so that a
        /// breaker whose storage has none compiles no time-window code.
        #[doc(hidden)]
        const BUCKETS: usize;
    }
}

/// The slots of a window kept inside the breaker: `N` of them for the count
/// window, and `B` buckets for the time window (none by default), sized at
/// compile time. The default storage of a
/// [`CircuitBreaker`](super::CircuitBreaker); no heap.
///
/// A count-window breaker is `CircuitBreaker<C, N>`, that is
/// `CircuitBreaker<C, N, (), Inline<N>>`; a time-window breaker of up to `B`
/// buckets is a [`TimeBreaker<C, B>`](super::TimeBreaker), that is
/// `CircuitBreaker<C, 1, (), Inline<1, B>>` (12 bytes a bucket).
///
/// # Examples
///
/// `CircuitBreaker<C, N>` means `CircuitBreaker<C, N, (), Inline<N>>`:
///
/// ```
/// use watertight::breaker::Inline;
/// use watertight::clock::StdClock;
/// use watertight::{BreakerConfig, CircuitBreaker};
///
/// static UPSTREAM: CircuitBreaker<StdClock, 64, (), Inline<64>> =
///     CircuitBreaker::new("upstream", BreakerConfig::DEFAULT, StdClock::new());
/// let same: &CircuitBreaker<StdClock, 64> = &UPSTREAM;
/// assert_eq!(same.name(), "upstream");
/// ```
pub struct Inline<const N: usize, const B: usize = 0>([AtomicU8; N], [Bucket; B]);

impl<const N: usize, const B: usize> sealed::Slots for Inline<N, B> {
    #[inline(always)]
    fn slots(&self) -> &[AtomicU8] {
        &self.0
    }

    #[inline(always)]
    fn buckets(&self) -> &[Bucket] {
        &self.1
    }

    fn for_window(_: usize, _: usize) -> Self {
        Inline(empty_slots::<N>(), empty_buckets::<B>())
    }

    const BUCKETS: usize = B;
}

impl<const N: usize, const B: usize> WindowStorage for Inline<N, B> {}

impl<const N: usize, const B: usize> core::fmt::Debug for Inline<N, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inline")
            .field("slots", &N)
            .field("buckets", &B)
            .finish()
    }
}

/// The slots of a window in one boxed slice of exactly `window_size` bytes,
/// allocated once when the breaker is made and freed when it is dropped:
/// the storage of a [`HeapBreaker`](super::HeapBreaker), whose window is
/// sized from config at run time (up to
/// [`BreakerConfig::MAX_WINDOW_SIZE`](super::BreakerConfig::MAX_WINDOW_SIZE)).
/// No call allocates.
///
/// # Examples
///
/// ```
/// use watertight::breaker::{Heap, HeapBreaker};
/// use watertight::clock::ManualClock;
/// use watertight::{BreakerConfig, CircuitBreaker};
///
/// let clock = ManualClock::new();
/// let config = BreakerConfig::builder().window_size(100).build().unwrap();
/// // `HeapBreaker<C>` is `CircuitBreaker<C, 1023, (), Heap>`.
/// let b: CircuitBreaker<_, 1023, (), Heap> = HeapBreaker::try_new("search", config, &clock).unwrap();
/// b.try_acquire().unwrap().success();
/// assert_eq!(b.metrics().calls, 1);
/// ```
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub struct Heap(alloc::boxed::Box<[AtomicU8]>, alloc::boxed::Box<[Bucket]>);

#[cfg(feature = "alloc")]
impl sealed::Slots for Heap {
    #[inline(always)]
    fn slots(&self) -> &[AtomicU8] {
        &self.0
    }

    #[inline(always)]
    fn buckets(&self) -> &[Bucket] {
        &self.1
    }

    fn for_window(window_size: usize, buckets: usize) -> Self {
        // One allocation of exactly `window_size` bytes, or of `buckets`
        // buckets (the iterator's exact length sizes it; the box takes it
        // as it is); an empty box allocates nothing.
        Heap(
            core::iter::repeat_with(|| AtomicU8::new(EMPTY_SLOT))
                .take(window_size)
                .collect(),
            core::iter::repeat_with(Bucket::new).take(buckets).collect(),
        )
    }

    const BUCKETS: usize = super::time::MAX_BUCKETS;
}

#[cfg(feature = "alloc")]
impl WindowStorage for Heap {}

#[cfg(feature = "alloc")]
impl core::fmt::Debug for Heap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Heap")
            .field("slots", &self.0.len())
            .field("buckets", &self.1.len())
            .finish()
    }
}

/// The ring of the last `window_size` outcomes, in the slots `W` keeps
/// (at least `window_size` of them).
pub(crate) struct Window<W> {
    pub(super) word: AtomicU32,
    pub(super) slots: W,
}

impl<const N: usize, const B: usize> Window<Inline<N, B>> {
    crate::sync::const_fn! {
        /// An empty window of generation 0, its slots inline.
        pub(crate) const fn new() -> Self {
            Window {
                word: AtomicU32::new(tag_of(0)),
                slots: Inline(empty_slots::<N>(), empty_buckets::<B>()),
            }
        }
    }
}

impl<W: WindowStorage> Window<W> {
    /// An empty window of generation 0 for `window_size` outcomes, or
    /// `buckets` buckets.
    pub(crate) fn for_window(window_size: usize, buckets: usize) -> Self {
        Window {
            word: AtomicU32::new(tag_of(0)),
            slots: W::for_window(window_size, buckets),
        }
    }

    /// How many slots the storage holds.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.slots().len()
    }

    /// The counts now, whatever generation the window belongs to.
    pub(crate) fn counts(&self, window_size: usize) -> Counts {
        self.count(self.word.load(Acquire), window_size)
    }

    /// Counts the slots of the window whose word is `w`.
    fn count(&self, w: u32, window_size: usize) -> Counts {
        let idx = ((w >> IDX_SHIFT) & IDX_MASK) as usize;
        let calls = if w & FULL_BIT != 0 { window_size } else { idx };
        let tag = w as u8 & SLOT_TAG_MASK;
        let (mut failures, mut slow) = (0, 0);
        let slots = self.slots.slots();
        for slot in &slots[..calls.min(slots.len())] {
            let v = slot.load(Acquire);
            if (v >> SLOT_TAG_SHIFT) & SLOT_TAG_MASK == tag {
                failures += (v & 1) as usize;
                slow += ((v >> 1) & 1) as usize;
            }
        }
        Counts {
            calls,
            failures,
            slow,
        }
    }

    /// Installs an empty window for generation `gen`, unless `current` says
    /// the breaker has already moved past it. Idempotent: the winner of the
    /// transition and a recorder that finds the window not yet installed
    /// may both call it.
    pub(crate) fn install(&self, generation: u32, current: impl Fn() -> bool) {
        let mut w = self.word.load(Acquire);
        while w & TAG_MASK != tag_of(generation) || w & FROZEN_BIT != 0 {
            if !current() {
                return;
            }
            // The top two bits are the time window's era: kept (the other
            // kinds do not use them).
            let fresh = tag_of(generation) | (w & ERA_MASK);
            match self.word.compare_exchange_weak(w, fresh, AcqRel, Acquire) {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Freezes the window as it is, for the generation that has just left it
    /// (entering Open, ForcedOpen or Disabled): it stays readable for
    /// metrics, and no outcome can land in it any more. Does nothing once
    /// `current` says the breaker has moved past the transition's
    /// generation (a later window may be installed).
    pub(crate) fn freeze(&self, current: impl Fn() -> bool) {
        let mut w = self.word.load(Acquire);
        while w & FROZEN_BIT == 0 {
            if !current() {
                return;
            }
            match self
                .word
                .compare_exchange_weak(w, w | FROZEN_BIT, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// Whether the window whose word is `w` is full and its last
    /// `window_size` claims were plain successes.
    #[inline]
    const fn all_plain(w: u32, window_size: usize) -> bool {
        w & FULL_BIT != 0 && (w >> RUN_SHIFT) & RUN_MASK >= window_size as u32
    }

    /// Whether outcomes of the generation tagged `tag` may land in the
    /// window whose word is `w`.
    #[inline]
    pub(super) const fn open_to(w: u32, tag: u32) -> bool {
        w & (TAG_MASK | FROZEN_BIT) == tag
    }

    /// Whether a plain success of generation `gen` would change nothing: the
    /// window is that generation's, open, full, and holds nothing but plain
    /// successes. One load; the hot path of a healthy closed breaker.
    #[inline(always)]
    pub(crate) fn takes_plain_success_as_is(&self, generation: u32, window_size: usize) -> bool {
        let w = self.word.load(Acquire);
        Self::open_to(w, tag_of(generation)) && Self::all_plain(w, window_size)
    }

    /// Records `kind` for generation `gen`. Returns the counts after it when
    /// they may have raised a rate, `Some` with unchanged counts otherwise
    /// (without counting), or `None` when the window no longer belongs to
    /// `gen` (the breaker moved on while the outcome was on its way: a stale
    /// outcome).
    ///
    /// `current` tells whether generation `gen` is still the breaker's; when
    /// the window is not yet installed for it, the recorder installs it.
    pub(crate) fn record(
        &self,
        generation: u32,
        kind: Kind,
        window_size: usize,
        current: impl Fn() -> bool,
    ) -> Option<Recorded> {
        let tag = tag_of(generation);
        let plain = matches!(kind, Kind::Success);
        let mut w = self.word.load(Acquire);
        // 1. Claim the next index; a plain success lengthens the run, any
        // other outcome ends it.
        let (index, was_full) = loop {
            if !Self::open_to(w, tag) {
                if w & TAG_MASK == tag || !current() {
                    // Frozen: the breaker has left this generation.
                    return None;
                }
                self.install(generation, &current);
                w = self.word.load(Acquire);
                if !Self::open_to(w, tag) {
                    return None;
                }
                continue;
            }
            // A `window_size` of 0 is consecutive failures: no slot, the run
            // in the index field (up to 1023), an empty run the full bit (so
            // that the closed path's inline check takes a success into it as
            // it is); a plain success ends the run, anything else lengthens
            // it. One CAS on the window word.
            if window_size == 0 {
                let run = (w >> IDX_SHIFT) & IDX_MASK;
                let (next, after) = if plain {
                    (tag | FULL_BIT, 0)
                } else {
                    let n = (run + 1).min(IDX_MASK);
                    (tag | (n << IDX_SHIFT), n)
                };
                if next != w {
                    if let Err(now) = self.word.compare_exchange_weak(w, next, AcqRel, Acquire) {
                        w = now;
                        continue;
                    }
                }
                let after = after as usize;
                return Some(Recorded::Counted(Counts {
                    calls: after,
                    failures: after,
                    slow: 0,
                }));
            }
            // A full window of plain successes does not change with one more.
            if plain && Self::all_plain(w, window_size) {
                return Some(Recorded::Unchanged);
            }
            let idx = ((w >> IDX_SHIFT) & IDX_MASK) as usize;
            let next = if idx + 1 >= window_size { 0 } else { idx + 1 };
            let full = if next == 0 { FULL_BIT } else { w & FULL_BIT };
            let run = if plain {
                (((w >> RUN_SHIFT) & RUN_MASK) + 1).min(window_size as u32)
            } else {
                0
            };
            let claimed = (w & TAG_MASK) | ((next as u32) << IDX_SHIFT) | full | (run << RUN_SHIFT);
            match self.word.compare_exchange_weak(w, claimed, AcqRel, Acquire) {
                Ok(_) => break (idx, w & FULL_BIT != 0),
                Err(now) => w = now,
            }
        };

        // 2. Write the slot, unless another window has been installed
        // meanwhile (a frozen window still takes the outcomes it handed
        // slots to: they were claimed before it froze).
        let slot = &self.slots.slots()[index];
        let new = slot_value(generation, kind);
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

        // 3. Count, if this outcome could have raised a rate: it added a
        // call to a ring not yet full, or it is a failure or slow call that
        // replaced something else. The fence orders this slot write before
        // the reads of the other slots, against every other counting writer
        // doing the same: of two writers that fill the window together, at
        // least one sees both outcomes (otherwise each could count the
        // other's slot as not yet written, and neither would trip).
        let raised = !was_full || (old != new && !plain);
        if !raised {
            return Some(Recorded::Unchanged);
        }
        fence(SeqCst);
        let now = self.word.load(Acquire);
        if now & TAG_MASK != tag {
            // Landed before another window was installed: recorded, and the
            // breaker has moved on, so there is nothing to evaluate.
            return Some(Recorded::Unchanged);
        }
        Some(Recorded::Counted(self.count(now, window_size)))
    }
}

impl<W: WindowStorage> Window<W> {
    /// Consecutive failures: the failures in a row so far (the window
    /// word's index field; its full bit says the run is empty, so that the
    /// closed path's inline check takes a success into it as it is). See
    /// [`record`](Self::record) with a `window_size` of 0.
    pub(crate) fn run(&self) -> usize {
        ((self.word.load(Acquire) >> IDX_SHIFT) & IDX_MASK) as usize
    }
}

/// What recording one outcome did to the window's rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// They may have gone up: here are the counts after it.
    Counted(Counts),
    /// They cannot have gone up.
    Unchanged,
}

#[cfg(not(loom))]
const fn empty_slots<const N: usize>() -> [AtomicU8; N] {
    [const { AtomicU8::new(EMPTY_SLOT) }; N]
}

#[cfg(loom)]
fn empty_slots<const N: usize>() -> [AtomicU8; N] {
    core::array::from_fn(|_| AtomicU8::new(EMPTY_SLOT))
}

#[cfg(not(loom))]
const fn empty_buckets<const B: usize>() -> [Bucket; B] {
    [const { Bucket::new() }; B]
}

#[cfg(loom)]
fn empty_buckets<const B: usize>() -> [Bucket; B] {
    core::array::from_fn(|_| Bucket::new())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn record<W: WindowStorage>(w: &Window<W>, generation: u32, kind: Kind, size: usize) -> Counts {
        w.record(generation, kind, size, || true)
            .expect("current window");
        w.counts(size)
    }

    /// A window of `N` slots kept inline.
    macro_rules! inline_window {
        ($n:literal) => {
            Window::<Inline<$n>>::new()
        };
    }

    /// A window of `N` slots on the heap.
    #[cfg(feature = "alloc")]
    macro_rules! heap_window {
        ($n:literal) => {
            Window::<Heap>::for_window($n, 0)
        };
    }

    /// The same cases on either storage.
    macro_rules! window_tests {
        ($window:ident) => {
            #[test]
            fn counts_grow_until_the_ring_is_full() {
                let w = $window!(8);
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
                let w = $window!(4);
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
            fn record_reports_counts_only_when_a_rate_may_have_risen() {
                let w = $window!(2);
                // Ring not full: every outcome adds a call, so it is counted.
                assert!(matches!(
                    w.record(0, Kind::Success, 2, || true),
                    Some(Recorded::Counted(_))
                ));
                assert!(matches!(
                    w.record(0, Kind::Success, 2, || true),
                    Some(Recorded::Counted(_))
                ));
                // Full: a success replacing a success changes nothing.
                assert_eq!(
                    w.record(0, Kind::Success, 2, || true),
                    Some(Recorded::Unchanged)
                );
                // A failure replacing a success may raise the failure rate.
                let got = w.record(0, Kind::Failure, 2, || true);
                assert_eq!(
                    got,
                    Some(Recorded::Counted(Counts {
                        calls: 2,
                        failures: 1,
                        slow: 0
                    }))
                );
            }

            #[test]
            fn window_size_below_capacity_uses_only_that_many_slots() {
                let w = $window!(16);
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
                let w = $window!(4);
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
                for _ in 0..4 {
                    assert_eq!(record(&w, 1, Kind::Success, 4).failures, 0);
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
                let w = $window!(4);
                record(&w, 0, Kind::Failure, 4);
                record(&w, 0, Kind::Success, 4);
                w.freeze(|| true);
                assert_eq!(
                    w.counts(4),
                    Counts {
                        calls: 2,
                        failures: 1,
                        slow: 0
                    }
                );
                assert_eq!(w.record(0, Kind::Failure, 4, || true), None);
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
            fn a_frozen_window_gives_way_to_the_next_install() {
                let w = $window!(4);
                record(&w, 0, Kind::Failure, 4);
                w.freeze(|| true);
                // Freezing again (Open -> ForcedOpen) keeps it as it is.
                w.freeze(|| true);
                assert_eq!(w.counts(4).failures, 1);
                // A freeze by a generation that is no longer current does nothing
                // to a window installed after it.
                w.install(3, || true);
                w.freeze(|| false);
                assert_eq!(record(&w, 3, Kind::Failure, 4).failures, 1);
            }

            #[test]
            fn a_recorder_installs_a_window_the_transition_has_not_installed_yet() {
                let w = $window!(4);
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
                let w = $window!(4);
                w.install(3, || true);
                record(&w, 3, Kind::Failure, 4);
                w.install(3, || true);
                assert_eq!(w.counts(4).failures, 1);
                // A late install of an older generation is refused.
                w.install(2, || false);
                assert_eq!(w.counts(4).failures, 1);
            }

            #[test]
            fn slots_of_a_window_64_generations_back_do_not_count_once_rewritten() {
                let w = $window!(4);
                for _ in 0..4 {
                    record(&w, 0, Kind::Failure, 4);
                }
                // 64 generations later the slot tag repeats; the fresh window's
                // calls are only those it claimed, and each claimed slot is
                // rewritten before it is counted.
                w.install(64, || true);
                assert_eq!(
                    w.counts(4),
                    Counts {
                        calls: 0,
                        failures: 0,
                        slow: 0
                    }
                );
                assert_eq!(
                    record(&w, 64, Kind::Success, 4),
                    Counts {
                        calls: 1,
                        failures: 0,
                        slow: 0
                    }
                );
            }

            #[test]
            fn a_full_window_of_plain_successes_takes_one_more_without_a_write() {
                let w = $window!(3);
                record(&w, 0, Kind::Failure, 3);
                for _ in 0..3 {
                    record(&w, 0, Kind::Success, 3);
                }
                // The failure is gone and the last three claims were successes.
                let before = w.word.load(Acquire);
                assert_eq!(
                    w.record(0, Kind::Success, 3, || true),
                    Some(Recorded::Unchanged)
                );
                assert_eq!(w.word.load(Acquire), before, "no claim was made");
                // A slow success is not plain: it claims, and ends the run.
                let c = record(&w, 0, Kind::SlowSuccess, 3);
                assert_eq!(
                    c,
                    Counts {
                        calls: 3,
                        failures: 0,
                        slow: 1
                    }
                );
                // Three plain successes later the window is plain again.
                for _ in 0..3 {
                    record(&w, 0, Kind::Success, 3);
                }
                assert_eq!(
                    w.counts(3),
                    Counts {
                        calls: 3,
                        failures: 0,
                        slow: 0
                    }
                );
                let before = w.word.load(Acquire);
                record(&w, 0, Kind::Success, 3);
                assert_eq!(w.word.load(Acquire), before);
                // And a failure still lands and is counted.
                assert_eq!(record(&w, 0, Kind::Failure, 3).failures, 1);
            }
        };
    }

    mod inline {
        use super::*;
        window_tests!(inline_window);
    }

    #[cfg(feature = "alloc")]
    mod heap {
        use super::*;
        window_tests!(heap_window);

        #[test]
        fn a_heap_window_holds_exactly_its_size_and_up_to_the_largest() {
            assert_eq!(Window::<Heap>::for_window(100, 0).capacity(), 100);
            // The largest window (a smaller one under Miri, where the
            // first lap's counting is slow).
            let size = if cfg!(miri) { 100 } else { MAX_WINDOW };
            let w = Window::<Heap>::for_window(size, 0);
            assert_eq!(w.capacity(), size);
            // Fill it with failures, then two laps of successes: the index
            // wraps at the window's size.
            for _ in 0..size {
                w.record(0, Kind::Failure, size, || true).unwrap();
            }
            assert_eq!(
                w.counts(size),
                Counts {
                    calls: size,
                    failures: size,
                    slow: 0
                }
            );
            for _ in 0..size - 1 {
                w.record(0, Kind::Success, size, || true).unwrap();
            }
            assert_eq!(w.counts(size).failures, 1);
            for _ in 0..size + 1 {
                w.record(0, Kind::Success, size, || true).unwrap();
            }
            assert_eq!(w.counts(size).failures, 0);
        }
    }

    #[test]
    fn kinds_encode_failure_and_slowness() {
        for (f, s) in [(false, false), (true, false), (false, true), (true, true)] {
            let k = Kind::new(f, s);
            assert_eq!((k.is_failure(), k.is_slow()), (f, s));
        }
    }
}
