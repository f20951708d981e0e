//! The bulkhead's state word: every field a permit decision needs, in one atomic.
//!
//! | bits (64-bit word) | bits (32-bit word) | field |
//! |---|---|---|
//! | 0 | 0 | closed flag |
//! | 1..5 | 1..4 | arrivals epoch (wrapping count of registrations) |
//! | 5..17 | 4..9 | registered waiters |
//! | 17..23 | 9..11 | low bits of the accepted counter (wrapping) |
//! | 23..43 | 11..21 | capacity |
//! | 43..64 | 21..32 | available permits, biased so that negative values fit |
//!
//! Keeping capacity, availability and waiters in one word makes each decision
//! (take, queue, resize, close) a single compare-and-swap that sees a consistent
//! snapshot, and makes `in_flight = capacity - available` exact. The accepted
//! counter rides along in the same CAS for free; its carry goes to a cold
//! counter once every `2^COUNT_BITS` acquisitions.
//!
//! The 64-bit word is used wherever the target has 64-bit atomics (every
//! server, armv7-linux, wasm32 with atomics); the 32-bit word on
//! microcontrollers without them (thumbv6m, thumbv7em), where a 64-bit atomic
//! would go through a lock.

#[cfg(any(loom, target_has_atomic = "64"))]
mod layout {
    pub(crate) type Word = u64;
    pub(crate) type AtomicWord = crate::sync::AtomicU64;
    pub(crate) const EPOCH_BITS: u32 = 4;
    pub(crate) const WAITERS_BITS: u32 = 12;
    pub(crate) const COUNT_BITS: u32 = 6;
    pub(crate) const CAP_BITS: u32 = 20;
}

#[cfg(not(any(loom, target_has_atomic = "64")))]
mod layout {
    pub(crate) type Word = u32;
    pub(crate) type AtomicWord = crate::sync::AtomicU32;
    pub(crate) const EPOCH_BITS: u32 = 3;
    pub(crate) const WAITERS_BITS: u32 = 5;
    pub(crate) const COUNT_BITS: u32 = 2;
    pub(crate) const CAP_BITS: u32 = 10;
}

pub(crate) use layout::{AtomicWord, Word};
use layout::{CAP_BITS, COUNT_BITS, EPOCH_BITS, WAITERS_BITS};

pub(crate) const CLOSED: Word = 1;
/// Where the arrivals epoch starts. Every registration moves it on, so the
/// word differs before and after a waiter arrives even when another left in
/// between (see `Waiter::pass_on`, which hands a wake-up on at most once
/// per state of the word).
const EPOCH_SHIFT: u32 = 1;
#[cfg_attr(not(feature = "alloc"), allow(dead_code))] // waiting needs `alloc`
const EPOCH_MASK: Word = (1 << EPOCH_BITS) - 1;
const WAITERS_SHIFT: u32 = EPOCH_SHIFT + EPOCH_BITS;
const COUNT_SHIFT: u32 = WAITERS_SHIFT + WAITERS_BITS;
const CAP_SHIFT: u32 = COUNT_SHIFT + COUNT_BITS;
const AVAIL_SHIFT: u32 = CAP_SHIFT + CAP_BITS;
const AVAIL_BITS: u32 = Word::BITS - AVAIL_SHIFT;

const WAITERS_MASK: Word = (1 << WAITERS_BITS) - 1;
const COUNT_MASK: Word = (1 << COUNT_BITS) - 1;
const CAP_MASK: Word = (1 << CAP_BITS) - 1;
/// Offset added to `available` so that the field is never negative.
const BIAS: i64 = 1 << (AVAIL_BITS - 1);

/// The most permits a bulkhead can have: 1 048 575 with a 64-bit word, 1023 with
/// a 32-bit one.
pub(crate) const MAX_PERMITS: usize = (1 << CAP_BITS) - 1;
/// The most tasks that can wait at once; one more is refused as `Full`.
pub(crate) const MAX_WAITERS: usize = WAITERS_MASK as usize;
/// How much the accepted counter's low field holds before it carries.
pub(crate) const COUNT_PERIOD: usize = 1 << COUNT_BITS;

// The available field must hold -MAX_PERMITS..=MAX_PERMITS.
const _: () = assert!(BIAS > MAX_PERMITS as i64 && AVAIL_BITS > CAP_BITS);

/// The word of a fresh bulkhead with `capacity` permits, all free.
pub(crate) const fn initial(capacity: usize) -> Word {
    ((capacity as Word) << CAP_SHIFT) | (((capacity as i64 + BIAS) as Word) << AVAIL_SHIFT)
}

#[inline]
pub(crate) const fn closed(w: Word) -> bool {
    w & CLOSED != 0
}

#[inline]
pub(crate) const fn waiters(w: Word) -> usize {
    ((w >> WAITERS_SHIFT) & WAITERS_MASK) as usize
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
pub(crate) const fn available(w: Word) -> i64 {
    (w >> AVAIL_SHIFT) as i64 - BIAS
}

#[inline]
pub(crate) const fn in_flight(w: Word) -> usize {
    (capacity(w) as i64 - available(w)) as usize
}

/// `available` as the field it is stored in, for `fetch_add` on release.
#[inline]
pub(crate) const fn permits(n: usize) -> Word {
    (n as Word) << AVAIL_SHIFT
}

pub(crate) const ONE_WAITER: Word = 1 << WAITERS_SHIFT;

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

/// `w` with one more waiter registered and the arrivals epoch moved on.
#[inline]
#[cfg_attr(not(feature = "alloc"), allow(dead_code))] // waiting needs `alloc`
pub(crate) const fn register(w: Word) -> Word {
    let epoch = ((w >> EPOCH_SHIFT) + 1) & EPOCH_MASK;
    ((w & !(EPOCH_MASK << EPOCH_SHIFT)) | (epoch << EPOCH_SHIFT)) + ONE_WAITER
}

/// `w` with capacity `cap` and availability `avail`, other fields kept.
#[inline]
pub(crate) const fn with_capacity(w: Word, cap: usize, avail: i64) -> Word {
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
        assert_eq!(waiters(w), 0);
        assert!(!closed(w));
        let (w, wrapped) = take(w, 3);
        assert!(!wrapped);
        assert_eq!((available(w), in_flight(w), count(w)), (4, 3, 1));
        let w = register(register(w));
        assert_eq!(waiters(w), 2);
        let w = w + permits(3);
        assert_eq!((available(w), in_flight(w), capacity(w)), (7, 0, 7));
    }

    #[test]
    fn negative_availability_after_shrink() {
        let (w, _) = take(initial(MAX_PERMITS), MAX_PERMITS);
        let w = with_capacity(w, 1, 1 - MAX_PERMITS as i64);
        assert_eq!(capacity(w), 1);
        assert_eq!(available(w), 1 - MAX_PERMITS as i64);
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
        assert_eq!(available(w), MAX_PERMITS as i64);
    }

    #[test]
    fn close_flag_is_independent() {
        let w = initial(3) | CLOSED;
        assert!(closed(w));
        assert_eq!(capacity(w), 3);
        assert_eq!(available(w), 3);
        let w = with_capacity(w, 5, 5);
        assert!(closed(w));
    }
}
