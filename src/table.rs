//! A table of `SETS × WAYS` slots fixed at compile time, one lock per set:
//! the storage of [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter) and
//! of [`StaleCache`](crate::fallback::StaleCache).
//!
//! A key's hash picks its set, `(hash × SETS) >> 64` (the high half of the
//! 128-bit product, so any `SETS` spreads evenly); the key lives in one of
//! that set's [`WAYS`] slots, and what a slot holds, how a set picks a slot
//! for a new key and what it counts is the user's (`T`, one set's state).
//! Each set has its own lock (the crate's: `std::sync::Mutex` with `std`,
//! a critical section with `critical-section`, a spin lock otherwise) on
//! cache lines of its own (except on microcontrollers,
//! `target_os = "none"`): two threads on keys in different sets share
//! nothing.
//!
//! The hashers are here too: std's `RandomState` by default with `std`,
//! [`FnvState`] (unkeyed FNV-1a) without.

use core::hash::{BuildHasher, Hash, Hasher};

use crate::sync::{const_fn, Mutex};

/// Keys per set: a key lives in one of the `WAYS` slots of the set its hash
/// picks, so a lookup compares at most `WAYS` keys, whatever the hash.
pub const WAYS: usize = 8;

/// One set's state, as it is before any key: what a table starts with.
pub(crate) trait EmptySet {
    /// The state of a set that never held a key.
    const EMPTY: Self;
}

/// One set: its state under one lock, on lines of its own.
#[cfg_attr(not(target_os = "none"), repr(align(64)))]
pub(crate) struct Set<T> {
    pub(crate) inner: Mutex<T>,
}

/// `SETS` sets of state `T` and the hasher that picks a key's set.
pub(crate) struct Table<T, const SETS: usize, S> {
    sets: [Set<T>; SETS],
    hasher: S,
}

impl<T: EmptySet, const SETS: usize, S> Table<T, SETS, S> {
    const_fn! {
        /// A table of empty sets. The caller checks `SETS > 0` (with its
        /// own message) before it builds one.
        pub(crate) const fn new(hasher: S) -> Self {
            Table {
                sets: Self::empty_sets(),
                hasher,
            }
        }
    }

    #[cfg(not(loom))]
    const fn empty_sets() -> [Set<T>; SETS] {
        [const {
            Set {
                inner: Mutex::new(T::EMPTY),
            }
        }; SETS]
    }

    #[cfg(loom)]
    fn empty_sets() -> [Set<T>; SETS] {
        core::array::from_fn(|_| Set {
            inner: Mutex::new(T::EMPTY),
        })
    }
}

impl<T, const SETS: usize, S> Table<T, SETS, S> {
    /// Every set, for a scrape that takes each lock in turn.
    pub(crate) fn sets(&self) -> &[Set<T>; SETS] {
        &self.sets
    }
}

impl<T, const SETS: usize, S: BuildHasher> Table<T, SETS, S> {
    /// The set `key` lives in. The key is hashed here, before any lock.
    #[inline]
    pub(crate) fn set_of<K: Hash + ?Sized>(&self, key: &K) -> &Set<T> {
        let h = self.hasher.hash_one(key);
        // The high half of h × SETS: in 0..SETS for any SETS.
        let i = ((u128::from(h) * SETS as u128) >> 64) as usize;
        &self.sets[i]
    }
}

/// The hasher [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter) and
/// [`StaleCache`](crate::fallback::StaleCache) use unless told otherwise:
/// std's `RandomState` with `std`, [`FnvState`] without. Code that must
/// build both ways and names the hasher (a `static` built by
/// [`with_hasher`](crate::rate::KeyedRateLimiter::with_hasher)) names it
/// explicitly, so that enabling `std` elsewhere does not change its type.
#[cfg(feature = "std")]
pub type DefaultState = std::hash::RandomState;
/// The hasher [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter) and
/// [`StaleCache`](crate::fallback::StaleCache) use unless told otherwise:
/// std's `RandomState` with `std`, [`FnvState`] without.
#[cfg(not(feature = "std"))]
pub type DefaultState = FnvState;

/// The default hasher, built: random keys per table with `std`.
pub(crate) fn default_state() -> DefaultState {
    #[cfg(feature = "std")]
    return std::hash::RandomState::new();
    #[cfg(not(feature = "std"))]
    return FnvState;
}

/// FNV-1a, 64-bit: a small, fast, **unkeyed** hash, the default without
/// `std` (see [Hostile keys](crate::rate::KeyedRateLimiter#hostile-keys)).
///
/// # Examples
///
/// ```
/// use core::hash::BuildHasher;
/// use watertight::rate::FnvState;
///
/// assert_eq!(FnvState.hash_one(1u8), FnvState.hash_one(1u8));
/// assert_ne!(FnvState.hash_one(1u8), FnvState.hash_one(2u8));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FnvState;

/// The [`Hasher`] of [`FnvState`].
///
/// # Examples
///
/// ```
/// use core::hash::{BuildHasher, Hasher};
/// use watertight::rate::FnvState;
///
/// let mut h = FnvState.build_hasher();
/// h.write(b"a");
/// assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FnvHasher(u64);

impl BuildHasher for FnvState {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
