//! The throttle's window: a ring of [`BUCKETS`] time buckets, each two
//! atomic words (requests, accepts), cleared lazily.
//!
//! A word packs a *tag* (the bucket's epoch — `now / bucket_width` —
//! truncated to the upper half of a `usize`) over a *count* (the lower
//! half). Epoch `e` lives in slot `e % BUCKETS`; a word counts for epoch
//! `e` only while its tag is `e`'s. Writers move a word on with one
//! compare-and-swap: a word whose tag is older than their epoch is
//! replaced by `(tag(e), 1)` (the lazy clear); a word that holds a count
//! under a newer tag (up to eight laps ahead: a thread with a later clock
//! read has already rolled the slot) is left alone and the count is
//! dropped, since its epoch has left the window.
//! Readers sum the words whose tags match the window's epochs and clear
//! the older ones they meet that still hold a count, so that an idle slot
//! never keeps a count its tag could later alias.
//!
//! Every word is `usize`-sized, so the ring is lock-free on 32-bit
//! targets too (thumbv7em has no 64-bit atomics): there the tag and the
//! count have 16 bits each (a bucket saturates at 65 535 requests), on
//! 64-bit targets 32 each. Tags compare with wrapping arithmetic; a tag
//! could alias only if the throttle saw no admission at all for 2¹⁶
//! (32-bit) or 2³² (64-bit) bucket widths and then its stale words were
//! read before being cleared — the readers' clearing makes even that
//! impossible for any slot read since its last write.

use crate::sync::{AtomicUsize, Ordering::Relaxed};

/// How many time buckets the window is cut into: a bucket is
/// `window / BUCKETS` wide.
pub const BUCKETS: usize = 20;

const HALF: u32 = usize::BITS / 2;
const COUNT_MASK: usize = (1 << HALF) - 1;
/// A bucket's largest count; a count saturates there.
pub(crate) const COUNT_MAX: usize = COUNT_MASK;

#[inline(always)]
fn tag_of(epoch: u64) -> usize {
    (epoch as usize) & COUNT_MASK
}

#[inline(always)]
fn tag(word: usize) -> usize {
    word >> HALF
}

#[inline(always)]
fn count(word: usize) -> usize {
    word & COUNT_MASK
}

#[inline(always)]
fn pack(tag: usize, count: usize) -> usize {
    (tag << HALF) | count
}

/// How `word`'s tag stands against `epoch`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Age {
    Same,
    Older,
    Newer,
}

/// How far ahead of an epoch a word's tag may be and still be taken for
/// a newer epoch (eight laps of the ring): a thread whose clock read is a
/// lap or two behind another's meets such words. A tag further ahead, by
/// wrapping distance, is an old one that has wrapped, so it is older.
const NEWER_SPAN: usize = 8 * BUCKETS;

#[inline(always)]
fn age(word: usize, epoch: u64) -> Age {
    let ours = tag_of(epoch);
    let theirs = tag(word);
    let diff = ours.wrapping_sub(theirs) & COUNT_MASK;
    if diff == 0 {
        Age::Same
    } else if diff > COUNT_MASK - NEWER_SPAN && count(word) != 0 {
        // An empty word is never newer: it holds nothing to keep (and a
        // fresh ring's words have tag 0, whatever the clock says).
        Age::Newer
    } else {
        Age::Older
    }
}

/// What a change to one word did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Counted (or uncounted) in the epoch's word.
    Done,
    /// The epoch has left the window (a newer epoch holds the slot, or,
    /// for a decrement, the word has been cleared): nothing changed.
    Gone,
}

/// One counter per slot.
#[derive(Debug)]
pub(crate) struct Column {
    words: [AtomicUsize; BUCKETS],
}

impl Column {
    crate::sync::const_fn! {
        pub(crate) const fn new() -> Self {
            // `[const { … }; N]` is not const with loom's atomics; an
            // explicit list is.
            Column {
                words: [
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0),
                    AtomicUsize::new(0), AtomicUsize::new(0),
                ],
            }
        }
    }

    /// Whether the slot of `epoch` still holds that epoch.
    #[inline]
    pub(crate) fn holds(&self, epoch: u64) -> bool {
        age(self.slot(epoch).load(Relaxed), epoch) == Age::Same
    }

    #[inline(always)]
    fn slot(&self, epoch: u64) -> &AtomicUsize {
        &self.words[(epoch % BUCKETS as u64) as usize]
    }

    /// Adds one to `epoch`'s count (saturating), rolling an older slot
    /// over to it.
    #[inline]
    pub(crate) fn add(&self, epoch: u64) -> Change {
        let slot = self.slot(epoch);
        let mut word = slot.load(Relaxed);
        loop {
            let new = match age(word, epoch) {
                Age::Same if count(word) == COUNT_MAX => return Change::Done,
                Age::Same => word + 1,
                Age::Older => pack(tag_of(epoch), 1),
                Age::Newer => return Change::Gone,
            };
            match slot.compare_exchange_weak(word, new, Relaxed, Relaxed) {
                Ok(_) => return Change::Done,
                Err(actual) => word = actual,
            }
        }
    }

    /// Takes one from `epoch`'s count, if the slot still holds that epoch
    /// and a count.
    #[inline]
    pub(crate) fn sub(&self, epoch: u64) -> Change {
        let slot = self.slot(epoch);
        let mut word = slot.load(Relaxed);
        loop {
            if age(word, epoch) != Age::Same || count(word) == 0 {
                return Change::Gone;
            }
            match slot.compare_exchange_weak(word, word - 1, Relaxed, Relaxed) {
                Ok(_) => return Change::Done,
                Err(actual) => word = actual,
            }
        }
    }

    /// The count of every epoch in `(now − BUCKETS, now]`, summed; older
    /// words that still hold a count are cleared on the way.
    #[cfg(test)]
    pub(crate) fn sum(&self, now: u64) -> u64 {
        let mut total = 0;
        walk(now, |back, slot| total += self.at(slot, now - back));
        total
    }

    /// Slot `slot`'s count if it holds `epoch`; else 0, and an older word
    /// that still holds a count is cleared.
    #[inline(always)]
    fn at(&self, slot: usize, epoch: u64) -> u64 {
        let word = self.words[slot].load(Relaxed);
        if tag(word) == tag_of(epoch) {
            count(word) as u64
        } else {
            self.stale(slot, word, epoch);
            0
        }
    }

    /// The lazy clear, out of the readers' loop: only if nobody moved the
    /// word meanwhile (a writer of `epoch` or of a newer one wins).
    #[cold]
    #[inline(never)]
    fn stale(&self, slot: usize, word: usize, epoch: u64) {
        if count(word) != 0 && age(word, epoch) == Age::Older {
            let _ =
                self.words[slot].compare_exchange(word, pack(tag_of(epoch), 0), Relaxed, Relaxed);
        }
    }
}

/// Calls `f(back, slot)` for each epoch `now − back` of the window (none
/// before epoch 0), newest first, walking the ring's slots down from
/// `now`'s without a division per slot.
#[inline(always)]
fn walk(now: u64, mut f: impl FnMut(u64, usize)) {
    let mut slot = (now % BUCKETS as u64) as usize;
    let last = now.min(BUCKETS as u64 - 1);
    for back in 0..=last {
        f(back, slot);
        slot = if slot == 0 { BUCKETS - 1 } else { slot - 1 };
    }
}

/// Requests and accepts, per bucket.
#[derive(Debug)]
pub(crate) struct Ring {
    pub(crate) requests: Column,
    pub(crate) accepts: Column,
}

impl Ring {
    crate::sync::const_fn! {
        pub(crate) const fn new() -> Self {
            Ring {
                requests: Column::new(),
                accepts: Column::new(),
            }
        }
    }

    /// The window's requests and accepts at epoch `now`, in one walk of
    /// the ring.
    #[inline]
    pub(crate) fn sums(&self, now: u64) -> (u64, u64) {
        let (mut requests, mut accepts) = (0, 0);
        walk(now, |back, slot| {
            requests += self.requests.at(slot, now - back);
            accepts += self.accepts.at(slot, now - back);
        });
        (requests, accepts)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_in_its_epoch_and_sums_the_window() {
        let c = Column::new();
        assert_eq!(c.add(5), Change::Done);
        assert_eq!(c.add(5), Change::Done);
        assert_eq!(c.add(6), Change::Done);
        assert_eq!(c.sum(6), 3);
        // Epoch 5 is in the window until epoch 5 + BUCKETS.
        assert_eq!(c.sum(5 + BUCKETS as u64 - 1), 3);
        assert_eq!(c.sum(5 + BUCKETS as u64), 1);
        assert_eq!(c.sum(6 + BUCKETS as u64), 0);
    }

    #[test]
    fn a_stale_slot_is_rolled_over_not_added_to() {
        let c = Column::new();
        c.add(3);
        c.add(3);
        let later = 3 + BUCKETS as u64; // the same slot, one lap on
        assert_eq!(c.add(later), Change::Done);
        assert_eq!(c.sum(later), 1);
        // The old epoch is gone: an accept for it is dropped.
        assert_eq!(c.add(3), Change::Gone);
        assert_eq!(c.sub(3), Change::Gone);
        assert_eq!(c.sum(later), 1);
    }

    #[test]
    fn sub_takes_back_only_its_own_epoch() {
        let c = Column::new();
        c.add(0);
        assert_eq!(c.sub(0), Change::Done);
        assert_eq!(c.sub(0), Change::Gone); // nothing left
        assert_eq!(c.sum(0), 0);
    }

    #[test]
    fn a_reader_clears_a_stale_count() {
        let c = Column::new();
        c.add(2);
        let later = 2 + BUCKETS as u64;
        assert_eq!(c.sum(later), 0);
        assert_eq!(c.words[2].load(Relaxed), pack(tag_of(later), 0));
    }

    #[test]
    fn a_newer_word_is_left_alone() {
        let c = Column::new();
        let newer = 1 + BUCKETS as u64;
        c.add(newer);
        // A reader (or writer) whose clock is a lap behind.
        assert_eq!(c.sum(1), 0);
        assert_eq!(c.add(1), Change::Gone);
        assert_eq!(c.sum(newer), 1);
    }

    #[test]
    fn counts_saturate() {
        let c = Column::new();
        c.words[0].store(pack(tag_of(0), COUNT_MAX), Relaxed);
        assert_eq!(c.add(0), Change::Done);
        assert_eq!(c.sum(0), COUNT_MAX as u64);
    }

    #[test]
    fn an_empty_word_is_never_newer() {
        // A fresh ring (tags 0) on a clock whose epoch's tag is just below
        // a wrap: its words are taken.
        let c = Column::new();
        let e = COUNT_MASK as u64 - 1;
        assert_eq!(c.add(e), Change::Done);
        assert_eq!(c.sum(e), 1);
    }

    #[test]
    fn a_word_wrapped_far_ahead_is_old() {
        let c = Column::new();
        c.add(0);
        // Half the tag range later, the same slot: old, not newer.
        let later = (1u64 << (HALF - 1)) / BUCKETS as u64 * BUCKETS as u64;
        assert_eq!(c.add(later), Change::Done);
        assert_eq!(c.sum(later), 1);
    }

    #[test]
    fn tags_wrap() {
        // Epochs past the tag's range still compare by wrapping distance.
        let c = Column::new();
        let base = (COUNT_MASK as u64 + 1) * BUCKETS as u64 - 1;
        c.add(base);
        assert_eq!(c.add(base + 1), Change::Done);
        assert_eq!(c.sum(base + 1), 2);
        assert_eq!(c.sum(base + BUCKETS as u64 + 1), 0);
    }
}
