//! The bulkhead's state word: every field a permit decision needs, in one atomic.
//!
//! | bits (64-bit word) | bits (32-bit word) | field |
//! |---|---|---|
//! | 0 | 0 | closed flag |
//! | 1 | 1 | queued flag: the wait queue is not empty |
//! | 2..8 | 2..4 | low bits of the accepted counter (wrapping) |
//! | 8..28 | 4..14 | capacity |
//! | 28..64 | 14..32 | available permits, biased so that negative values fit |
//!
//! Keeping capacity, availability and the queued flag in one word makes each
//! decision (take, queue, resize, close) a single compare-and-swap that sees
//! a consistent snapshot, and makes `in_flight = capacity - available` exact.
//! The accepted counter rides along in the same CAS for free; its carry goes
//! to a cold counter once every `2^COUNT_BITS` acquisitions.
//!
//! The queued flag is set and cleared only under the wait queue's lock, in
//! the same step that makes the queue non-empty or empty, so outside the lock
//! it is exact: a release that reads it clear (in the same atomic add that
//! returns its permits) knows no waiter can be owed them and takes no lock;
//! a newcomer that reads it set does not take a permit a queued waiter is
//! owed. How many wait is not in the word (a word of its own counts them and
//! holds their bound, `queue::waiters`).
//!
//! The 64-bit word is used wherever the target has 64-bit atomics (every
//! server, armv7-linux, wasm32 with atomics); the 32-bit word on
//! microcontrollers without them (thumbv6m, thumbv7em), where a 64-bit atomic
//! would go through a lock.

#[cfg(any(loom, target_has_atomic = "64"))]
mod layout {
    pub(crate) type Word = u64;
    /// Signed arithmetic on the available field, as wide as the word (a
    /// request is compared with it only once it is known to be at most the
    /// capacity, so `n as Avail` never wraps).
    pub(crate) type Avail = i64;
    pub(crate) type AtomicWord = crate::sync::AtomicU64;
    pub(crate) const COUNT_BITS: u32 = 6;
    pub(crate) const CAP_BITS: u32 = 20;
}

#[cfg(not(any(loom, target_has_atomic = "64")))]
mod layout {
    pub(crate) type Word = u32;
    pub(crate) type Avail = i32;
    pub(crate) type AtomicWord = crate::sync::AtomicU32;
    pub(crate) const COUNT_BITS: u32 = 2;
    pub(crate) const CAP_BITS: u32 = 10;
}

pub(crate) use layout::{AtomicWord, Avail, Word};
use layout::{CAP_BITS, COUNT_BITS};

pub(crate) const CLOSED: Word = 1;
/// Set while the wait queue holds a waiter; changed only under its lock.
pub(crate) const QUEUED: Word = 1 << 1;
const COUNT_SHIFT: u32 = 2;
const CAP_SHIFT: u32 = COUNT_SHIFT + COUNT_BITS;
const AVAIL_SHIFT: u32 = CAP_SHIFT + CAP_BITS;
const AVAIL_BITS: u32 = Word::BITS - AVAIL_SHIFT;

const COUNT_MASK: Word = (1 << COUNT_BITS) - 1;
const CAP_MASK: Word = (1 << CAP_BITS) - 1;
/// Offset added to `available` so that the field is never negative.
const BIAS: Avail = 1 << (AVAIL_BITS - 1);

/// The most permits a bulkhead can have: 1 048 575 with a 64-bit word, 1023 with
/// a 32-bit one.
pub(crate) const MAX_PERMITS: usize = (1 << CAP_BITS) - 1;
/// How much the accepted counter's low field holds before it carries.
pub(crate) const COUNT_PERIOD: usize = 1 << COUNT_BITS;

// The available field must hold -MAX_PERMITS..=MAX_PERMITS.
const _: () = assert!(BIAS > MAX_PERMITS as Avail && AVAIL_BITS > CAP_BITS);

/// The word of a fresh bulkhead with `capacity` permits, all free.
pub(crate) const fn initial(capacity: usize) -> Word {
    ((capacity as Word) << CAP_SHIFT) | (((capacity as Avail + BIAS) as Word) << AVAIL_SHIFT)
}

#[inline]
pub(crate) const fn closed(w: Word) -> bool {
    w & CLOSED != 0
}

#[inline]
pub(crate) const fn queued(w: Word) -> bool {
    w & QUEUED != 0
}

#[inline]
pub(crate) const fn count(w: Word) -> usize {
    ((w >> COUNT_SHIFT) & COUNT_MASK) as usize
}

#[inline]
pub(crate) const fn capacity(w: Word) -> usize {
    ((w >> CAP_SHIFT) & CAP_MASK) as usize
}

/// Free permits; negative after a shrink below what is in flight.
#[inline]
pub(crate) const fn available(w: Word) -> Avail {
    (w >> AVAIL_SHIFT) as Avail - BIAS
}

#[inline]
pub(crate) const fn in_flight(w: Word) -> usize {
    (capacity(w) as Avail - available(w)) as usize
}

/// `available` as the field it is stored in, for `fetch_add` on release.
#[inline]
pub(crate) const fn permits(n: usize) -> Word {
    (n as Word) << AVAIL_SHIFT
}

/// `w` with `n` permits taken and the accepted counter bumped; the flag says
/// whether the counter's low field wrapped (the caller then carries into the
/// cold counter). `n <= available(w)` is the caller's to check.
#[inline]
pub(crate) const fn take(w: Word, n: usize) -> (Word, bool) {
    let w = w - permits(n);
    if count(w) as Word == COUNT_MASK {
        (w & !(COUNT_MASK << COUNT_SHIFT), true)
    } else {
        (w + (1 << COUNT_SHIFT), false)
    }
}

/// `w` with capacity `cap` and availability `avail`, other fields kept.
#[inline]
pub(crate) const fn with_capacity(w: Word, cap: usize, avail: Avail) -> Word {
    let keep = w & !((CAP_MASK << CAP_SHIFT) | (!0 << AVAIL_SHIFT));
    keep | ((cap as Word) << CAP_SHIFT) | (((avail + BIAS) as Word) << AVAIL_SHIFT)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let w = initial(7);
        assert_eq!(capacity(w), 7);
        assert_eq!(available(w), 7);
        assert_eq!(in_flight(w), 0);
        assert!(!queued(w));
        assert!(!closed(w));
        let (w, wrapped) = take(w, 3);
        assert!(!wrapped);
        assert_eq!((available(w), in_flight(w), count(w)), (4, 3, 1));
        let w = w | QUEUED;
        assert!(queued(w));
        let w = w + permits(3);
        assert!(queued(w));
        assert_eq!((available(w), in_flight(w), capacity(w)), (7, 0, 7));
    }

    #[test]
    fn negative_availability_after_shrink() {
        let (w, _) = take(initial(MAX_PERMITS), MAX_PERMITS);
        let w = with_capacity(w, 1, 1 - MAX_PERMITS as Avail);
        assert_eq!(capacity(w), 1);
        assert_eq!(available(w), 1 - MAX_PERMITS as Avail);
        assert_eq!(in_flight(w), MAX_PERMITS);
        let w = w + permits(MAX_PERMITS);
        assert_eq!((available(w), in_flight(w)), (1, 0));
    }

    #[test]
    fn counter_wraps_and_reports_it() {
        let mut w = initial(MAX_PERMITS);
        let mut wraps = 0;
        for i in 1..=3 * COUNT_PERIOD {
            let (next, wrapped) = take(w, 1);
            w = next + permits(1);
            wraps += usize::from(wrapped);
            assert_eq!(count(w) + wraps * COUNT_PERIOD, i);
        }
        assert_eq!(wraps, 3);
        assert_eq!(available(w), MAX_PERMITS as Avail);
    }

    #[test]
    fn close_flag_is_independent() {
        let w = initial(3) | CLOSED;
        assert!(closed(w));
        assert_eq!(capacity(w), 3);
        assert_eq!(available(w), 3);
        let w = with_capacity(w | QUEUED, 5, 5);
        assert!(closed(w) && queued(w));
        assert_eq!((capacity(w), available(w)), (5, 5));
    }
}
