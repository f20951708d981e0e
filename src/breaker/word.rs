//! The breaker's state word and its timestamp word.
//!
//! **State word** (`u32` on every target, so it is lock-free everywhere):
//!
//! | bits | field |
//! |---|---|
//! | 0..3 | state: Closed, Open, HalfOpen, ForcedOpen, Disabled |
//! | 3..11 | half-open probes taken in this episode (ignored probes give theirs back) |
//! | 11..19 | half-open probes that succeeded in this episode |
//! | 19..32 | generation, wrapping; every transition adds one |
//!
//! Every transition is one compare-and-swap of this word from the state it
//! was decided on, so two threads that decide the same transition (two
//! failures that both push the rate over the threshold) cannot both make it:
//! the second CAS fails because the generation moved.
//!
//! **Timestamp word**: when the current state began (the open wait starts at
//! it; so does the half-open episode that `max_half_open_wait` bounds),
//! tagged with the low bits of the generation it belongs to. The thread that
//! wins a transition publishes the stamp right after its CAS; a reader that
//! finds the tag of an older generation knows the stamp is not published yet
//! and treats the state as having begun just now (an open breaker then rejects
//! with the full open wait as its hint). No reader waits for the writer.
//!
//! | target | word | tag | ticks | tick | range of the wrapping stamp |
//! |---|---|---|---|---|---|
//! | 64-bit atomics (servers, loom) | `u64` | 13 bits | 51 bits | 1 µs | 71 years |
//! | 32-bit atomics only (thumbv6m, thumbv7em) | `u32` | 4 bits | 28 bits | 1 ms | 74.5 hours |
//!
//! A transition's time is taken to the tick, rounded down ([`floor`]), and
//! that rounded time is the one the breaker uses everywhere: the open wait
//! ends exactly at it plus `open_duration`, a retry hint is never longer than
//! `open_duration`, and the listener and the metrics report the same instant.
//! On 32-bit targets the stamp wraps: it is read back relative to the
//! current time, correctly for up to 74.5 hours after it was taken, and
//! durations in the config are limited to half of that.

use crate::clock::Instant;

/// The five states, as stored in the low bits of the state word.
pub(crate) const CLOSED: u32 = 0;
pub(crate) const OPEN: u32 = 1;
pub(crate) const HALF_OPEN: u32 = 2;
pub(crate) const FORCED_OPEN: u32 = 3;
pub(crate) const DISABLED: u32 = 4;

const STATE_MASK: u32 = 0b111;
const TAKEN_SHIFT: u32 = 3;
const SUCC_SHIFT: u32 = 11;
const PROBE_MASK: u32 = 0xff;
const GEN_SHIFT: u32 = 19;
/// Bits of generation in the state word.
pub(crate) const GEN_BITS: u32 = 32 - GEN_SHIFT;
pub(crate) const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// The most half-open probes an episode can admit.
pub(crate) const MAX_PROBES: usize = PROBE_MASK as usize;

#[inline]
pub(crate) const fn state(s: u32) -> u32 {
    s & STATE_MASK
}

#[inline]
pub(crate) const fn generation(s: u32) -> u32 {
    s >> GEN_SHIFT
}

#[inline]
pub(crate) const fn taken(s: u32) -> u32 {
    (s >> TAKEN_SHIFT) & PROBE_MASK
}

#[inline]
pub(crate) const fn succeeded(s: u32) -> u32 {
    (s >> SUCC_SHIFT) & PROBE_MASK
}

/// The word of a fresh episode of `state` in generation `gen`: no probes.
#[inline]
pub(crate) const fn make(state: u32, generation: u32) -> u32 {
    ((generation & GEN_MASK) << GEN_SHIFT) | state
}

/// The word after a transition from `s` into `to`: the next generation.
#[inline]
pub(crate) const fn next(s: u32, to: u32) -> u32 {
    make(to, generation(s).wrapping_add(1))
}

#[inline]
pub(crate) const fn with_taken(s: u32, taken: u32) -> u32 {
    (s & !(PROBE_MASK << TAKEN_SHIFT)) | (taken << TAKEN_SHIFT)
}

#[inline]
pub(crate) const fn with_succeeded(s: u32, succeeded: u32) -> u32 {
    (s & !(PROBE_MASK << SUCC_SHIFT)) | (succeeded << SUCC_SHIFT)
}

#[cfg(any(loom, target_has_atomic = "64"))]
mod layout {
    pub(crate) type Stamp = u64;
    pub(crate) type AtomicStamp = crate::sync::AtomicU64;
    pub(crate) const TAG_BITS: u32 = 13;
    pub(crate) const TICK_NS: u64 = 1_000;
    /// `nanos / TICK_NS`.
    #[inline(always)]
    pub(crate) const fn ticks(nanos: u64) -> u64 {
        crate::clock::nanos::div_1e3(nanos)
    }
}

#[cfg(not(any(loom, target_has_atomic = "64")))]
mod layout {
    pub(crate) type Stamp = u32;
    pub(crate) type AtomicStamp = crate::sync::AtomicU32;
    pub(crate) const TAG_BITS: u32 = 4;
    pub(crate) const TICK_NS: u64 = 1_000_000;
    /// `nanos / TICK_NS`, without a 64-bit division (see `clock::nanos`).
    #[inline(always)]
    pub(crate) const fn ticks(nanos: u64) -> u64 {
        crate::clock::nanos::div_1e6(nanos)
    }
}

use layout::{ticks, TAG_BITS, TICK_NS};
pub(crate) use layout::{AtomicStamp, Stamp};

const TICK_BITS: u32 = Stamp::BITS - TAG_BITS;
const TICK_MASK: u64 = (1 << TICK_BITS) - 1;
const STAMP_TAG_MASK: u32 = (1 << TAG_BITS) - 1;

/// The stamp word before the first transition: no tag matches it.
pub(crate) const NEVER: Stamp = Stamp::MAX;

/// The longest duration the config accepts for the open wait and the
/// half-open limit: half the stamp's range, so a wrapped stamp is never
/// mistaken for a recent one while a wait is running.
pub(crate) const MAX_DURATION_NS: u64 = (TICK_MASK / 2) * TICK_NS;

/// `at` rounded down to the stamp's tick: the time a transition is kept as.
#[inline]
pub(crate) fn floor(at: Instant) -> Instant {
    Instant::from_nanos(ticks(at.as_nanos()) * TICK_NS)
}

/// A stamp for `at` in generation `gen`: it keeps `at` rounded down to the
/// tick (see [`floor`]).
#[inline]
pub(crate) fn stamp(generation: u32, at: Instant) -> Stamp {
    stamp_and_floor(generation, at).0
}

/// [`stamp`] and [`floor`] of `at` at once (one division by the tick).
#[inline]
pub(crate) fn stamp_and_floor(generation: u32, at: Instant) -> (Stamp, Instant) {
    let whole = ticks(at.as_nanos());
    let t = whole & TICK_MASK;
    // All ones is `NEVER`; the tick before it is as good.
    let t = if t == TICK_MASK { t - 1 } else { t };
    (
        ((t << TAG_BITS) as Stamp) | (generation & STAMP_TAG_MASK) as Stamp,
        Instant::from_nanos(whole * TICK_NS),
    )
}

/// When the state of generation `gen` began, if its stamp is published:
/// reconstructed relative to `now` (the stamp is not after `now`, and not
/// older than the stamp's range).
#[inline]
pub(crate) fn read(stamp: Stamp, generation: u32, now: Instant) -> Option<Instant> {
    if stamp == NEVER || (stamp as u32) & STAMP_TAG_MASK != generation & STAMP_TAG_MASK {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // a widening on 32-bit targets
    let low = (stamp as u64) >> TAG_BITS;
    let now_ticks = ticks(now.as_nanos());
    // How many ticks the stamp lies before `now`, modulo the stamp's range.
    let back = now_ticks.wrapping_sub(low) & TICK_MASK;
    let at = now_ticks.saturating_sub(back);
    Some(Instant::from_nanos(at.saturating_mul(TICK_NS)))
}

/// When the last transition happened, for metrics: like [`read`] but
/// without a generation to match.
#[inline]
pub(crate) fn read_any(stamp: Stamp, now: Instant) -> Option<Instant> {
    if stamp == NEVER {
        return None;
    }
    read(stamp, stamp as u32 & STAMP_TAG_MASK, now)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn state_word_fields_round_trip() {
        let s = make(HALF_OPEN, 77);
        let s = with_succeeded(with_taken(s, 3), 2);
        assert_eq!(
            (state(s), generation(s), taken(s), succeeded(s)),
            (HALF_OPEN, 77, 3, 2)
        );
        let n = next(s, CLOSED);
        assert_eq!(
            (state(n), generation(n), taken(n), succeeded(n)),
            (CLOSED, 78, 0, 0)
        );
        // The generation wraps instead of overflowing into the probe fields.
        let last = make(OPEN, GEN_MASK);
        assert_eq!(generation(next(last, HALF_OPEN)), 0);
        assert_eq!(state(next(last, HALF_OPEN)), HALF_OPEN);
    }

    #[test]
    fn stamps_keep_the_floored_time_and_read_back_near_now() {
        let at = floor(Instant::from_nanos(5 * TICK_NS + 1));
        assert_eq!(at, Instant::from_nanos(5 * TICK_NS));
        let st = stamp(9, at);
        assert_eq!(read(st, 9, at), Some(at));
        let later = Instant::from_nanos(1_000 * TICK_NS + 3);
        assert_eq!(read(st, 9, later), Some(at));
        // Another generation's stamp is not this one's.
        assert_eq!(read(st, 10, later), None);
        assert_eq!(read(NEVER, 0, later), None);
        assert_eq!(read_any(st, later), Some(at));
    }

    #[test]
    fn stamps_survive_wrapping_of_the_tick_field() {
        // A stamp taken just before the tick field wraps reads back correctly
        // after it has wrapped.
        let base = (TICK_MASK - 2) * TICK_NS;
        let st = stamp(1, Instant::from_nanos(base));
        let now = Instant::from_nanos(base + 10 * TICK_NS);
        assert_eq!(read(st, 1, now), Some(Instant::from_nanos(base)));
    }
}
