//! A hasher that hashes a `u64` to itself, for the model tests of the
//! fixed tables (`tests/rate_keyed_model.rs`, `tests/stale_cache_model.rs`):
//! the reference places each key in its set by the documented formula,
//! `(hash × SETS) >> 64`.

use std::hash::{BuildHasher, Hasher};

/// Hashes a `u64` to itself.
#[derive(Clone, Copy, Default)]
pub struct Identity;

pub struct IdHasher(u64);

impl BuildHasher for Identity {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
