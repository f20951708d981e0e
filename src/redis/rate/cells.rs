//! The pocket's cell count: the one word the hot path of a leased global
//! rate changes. Cells are spent by CAS and refilled by the keeper's CAS
//! (wasting the cells older than the last grant, adding the new grant),
//! so no cell is lost or spent twice however they race.
//!
//! This file uses nothing of the crate but `crate::sync`, so that
//! the loom tests can compile it on loom's atomics
//! (`tests/loom/pocket_cells.rs`).

use crate::sync::{AtomicU64, Ordering};

/// Leased cells that may be spent now.
#[derive(Debug)]
pub(crate) struct Cells {
    cells: AtomicU64,
}

impl Cells {
    /// An empty pocket.
    pub(crate) fn new() -> Self {
        Cells {
            cells: AtomicU64::new(0),
        }
    }

    /// Takes `n` cells if the pocket holds them.
    ///
    /// # Memory ordering
    ///
    /// `Relaxed`: the count publishes no other data, and every change to
    /// it is a read-modify-write, so spends and refills never lose or
    /// double a cell.
    #[inline]
    pub(crate) fn take(&self, n: u64) -> bool {
        let mut cur = self.cells.load(Ordering::Relaxed);
        loop {
            if cur < n {
                return false;
            }
            match self.cells.compare_exchange_weak(
                cur,
                cur - n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Cells in the pocket now.
    pub(crate) fn get(&self) -> u64 {
        self.cells.load(Ordering::Relaxed)
    }

    /// Empties the pocket (at the end); returns what it held.
    pub(crate) fn take_all(&self) -> u64 {
        self.cells.swap(0, Ordering::Relaxed)
    }

    /// The keeper's one write: wastes the cells beyond the `young` ones
    /// still in the pocket (older than the last grant), keeps the rest and
    /// adds `grant`. Returns (cells before, wasted, after).
    pub(crate) fn refill(&self, young: u64, grant: u64) -> (u64, u64, u64) {
        let mut cur = self.cells.load(Ordering::Relaxed);
        loop {
            let old = cur.saturating_sub(young);
            let next = cur - old + grant;
            match self
                .cells
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (cur, old, next),
                Err(actual) => cur = actual,
            }
        }
    }
}
