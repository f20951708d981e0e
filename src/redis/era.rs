//! The lease of a leased share and its *eras*: when the lease ends, and
//! which lease the permits of the share were granted under.
//!
//! Two words, changed only by CAS (or a swap):
//!
//! - `until`: when the lease ends, in nanoseconds on the runtime's clock;
//!   zero for no lease. Whoever first sees it over (an acquisition, a
//!   permit's `is_lost`, the keeper) swaps it to zero and ends the era.
//! - `era`: the number of the current lease (high half) and the permits
//!   granted under it still held (low half). Ending an era starts the next
//!   with nothing held: the old era's permits then report lost, and their
//!   drops leave the new era's count alone.
//!
//! This file uses nothing of the crate but `crate::sync`, so that
//! the loom tests can compile it on loom's atomics
//! (`tests/loom/lease_era.rs`).

use crate::sync::{AtomicU64, Ordering};

/// The low half of the era word: permits held under the current lease.
const HELD: u64 = 0xffff_ffff;

/// A lease's end and its eras (see the module).
#[derive(Debug)]
pub(crate) struct LeaseEra {
    until: AtomicU64,
    era: AtomicU64,
}

impl LeaseEra {
    /// No lease, era 0, nothing held.
    pub(crate) fn new() -> Self {
        LeaseEra {
            until: AtomicU64::new(0),
            era: AtomicU64::new(0),
        }
    }

    /// Whether the lease is live at `now` (nanoseconds). A lease whose
    /// end has passed is ended by the first caller to see it: it alone
    /// gets `Err(held)`, the permits the ended era still held (for the
    /// count of leases lost); everyone else `Ok(false)`.
    ///
    /// # Memory ordering
    ///
    /// The CAS that ends the lease is `AcqRel`, so exactly one caller ends
    /// each lease; the era's bump that follows is a CAS loop of its own.
    pub(crate) fn is_live(&self, now: u64) -> Result<bool, u64> {
        let until = self.until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(false);
        }
        if now < until {
            return Ok(true);
        }
        match self
            .until
            .compare_exchange(until, 0, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Err(self.next_era() & HELD),
            Err(_) => Ok(false),
        }
    }

    /// When the lease ends (nanoseconds; `None`: no lease).
    pub(crate) fn until(&self) -> Option<u64> {
        match self.until.load(Ordering::Acquire) {
            0 => None,
            n => Some(n),
        }
    }

    /// A refresh renewed the lease (or started one) until `until`.
    pub(crate) fn renew(&self, until: u64) {
        self.until.store(until.max(1), Ordering::Release);
    }

    /// The lease is over (Redis no longer had it, or the share was given
    /// back): no lease, and the next era. Returns the permits the ended
    /// era still held.
    pub(crate) fn end(&self) -> u64 {
        self.until.store(0, Ordering::Release);
        self.next_era() & HELD
    }

    /// Starts the next era, with nothing held; returns the word before.
    fn next_era(&self) -> u64 {
        let mut cur = self.era.load(Ordering::Acquire);
        loop {
            let next = ((cur >> 32).wrapping_add(1)) << 32;
            match self
                .era
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Counts a permit held under the current lease, if it is live at
    /// `now`: its era, and how many the era holds with it. `Err` carries
    /// what [`is_live`](Self::is_live) returned (`Err(held)` if this call
    /// ended the lease).
    pub(crate) fn enter(&self, now: u64) -> Result<(u32, u64), Result<bool, u64>> {
        let mut cur = self.era.load(Ordering::Acquire);
        loop {
            match self.is_live(now) {
                Ok(true) => {}
                other => return Err(other),
            }
            if cur & HELD == HELD {
                return Err(Ok(true));
            }
            match self
                .era
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(((cur >> 32) as u32, (cur & HELD) + 1)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// A permit of era `era` is gone: it stops counting if its era is
    /// still the current one.
    pub(crate) fn leave(&self, era: u32) {
        let mut cur = self.era.load(Ordering::Acquire);
        while (cur >> 32) as u32 == era && cur & HELD > 0 {
            match self
                .era
                .compare_exchange_weak(cur, cur - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The current era.
    pub(crate) fn era(&self) -> u32 {
        (self.era.load(Ordering::Acquire) >> 32) as u32
    }

    /// Permits held under the current era.
    pub(crate) fn held(&self) -> u64 {
        self.era.load(Ordering::Acquire) & HELD
    }
}
