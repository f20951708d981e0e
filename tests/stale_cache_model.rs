#![cfg(not(loom))]
//! Model-based test of `StaleCache`: random sequences of clock advances,
//! `record`, `serve` and `remove` on a small alphabet of keys, run against
//! the real cache (`SETS` = 1 or 2, so sets fill and keys are evicted) and
//! against a sequential reference: per set, a plain list of
//! `(key, value, recorded at)` in the order recorded, at most `WAYS` long;
//! a record of a key present moves it to the end with its new value; a new
//! key past `WAYS` evicts the front (the least recently recorded); a serve
//! gives the value and `now − at` when that is at most the max staleness,
//! else drops the entry and misses.
//!
//! Keys are hashed by an identity hasher, so the reference places each key
//! in its set by the documented formula, `(hash × SETS) >> 64`.
//!
//! Checked at every step: the same answer (value and age, or a miss), the
//! same removal; after every step, the same counters (recorded, served,
//! misses of each kind, evictions) and the same number of entries.
#[path = "support/identity_hasher.rs"]
mod identity_hasher;
#[path = "support/proptest_config.rs"]
mod proptest_config;

use std::time::Duration;

use identity_hasher::Identity;
use proptest::collection::vec;
use proptest::prelude::*;
use watertight::clock::ManualClock;
use watertight::fallback::{Stale, StaleCache, WAYS};

const MAX_STALE: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Record(u64, u32),
    Serve(u64),
    Remove(u64),
}

/// Twenty keys spread over the hash space (an odd multiplier).
fn key(k: u64) -> u64 {
    k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u64..30).prop_map(Op::Advance),
        4 => (0u64..20, any::<u32>()).prop_map(|(k, v)| Op::Record(key(k), v)),
        4 => (0u64..20).prop_map(|k| Op::Serve(key(k))),
        1 => (0u64..20).prop_map(|k| Op::Remove(key(k))),
    ]
}

#[derive(Default, Debug, PartialEq)]
struct Counts {
    recorded: usize,
    served: usize,
    absent: usize,
    too_old: usize,
    evictions: usize,
    entries: usize,
}

/// The reference: per set, entries in the order recorded.
struct Reference {
    sets: Vec<Vec<(u64, u32, Duration)>>,
    counts: Counts,
}

impl Reference {
    fn set(&mut self, k: u64) -> &mut Vec<(u64, u32, Duration)> {
        let n = self.sets.len();
        let i = ((u128::from(k) * n as u128) >> 64) as usize;
        &mut self.sets[i]
    }

    fn record(&mut self, k: u64, v: u32, now: Duration) {
        self.counts.recorded += 1;
        let set = self.set(k);
        set.retain(|e| e.0 != k);
        let evicted = set.len() == WAYS;
        if evicted {
            set.remove(0);
        }
        set.push((k, v, now));
        if evicted {
            self.counts.evictions += 1;
        }
    }

    fn serve(&mut self, k: u64, now: Duration) -> Option<Stale<u32>> {
        let set = self.set(k);
        let Some(i) = set.iter().position(|e| e.0 == k) else {
            self.counts.absent += 1;
            return None;
        };
        let age = now - set[i].2;
        if age > MAX_STALE {
            set.remove(i);
            self.counts.too_old += 1;
            return None;
        }
        let value = set[i].1;
        self.counts.served += 1;
        Some(Stale { value, age })
    }

    fn remove(&mut self, k: u64) -> Option<u32> {
        let set = self.set(k);
        let i = set.iter().position(|e| e.0 == k)?;
        Some(set.remove(i).1)
    }
}

fn run<const SETS: usize>(ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let cache: StaleCache<u64, u32, _, SETS, Identity> =
        StaleCache::with_hasher("model", MAX_STALE, &clock, Identity);
    let mut reference = Reference {
        sets: vec![Vec::new(); SETS],
        counts: Counts::default(),
    };
    let mut now = Duration::ZERO;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                now += Duration::from_millis(ms);
            }
            Op::Record(k, v) => {
                cache.record(k, v);
                reference.record(k, v, now);
            }
            Op::Serve(k) => {
                prop_assert_eq!(
                    cache.serve(&k),
                    reference.serve(k, now),
                    "step {}: {:?}",
                    step,
                    op
                );
            }
            Op::Remove(k) => {
                prop_assert_eq!(
                    cache.remove(&k),
                    reference.remove(k),
                    "step {}: {:?}",
                    step,
                    op
                );
            }
        }
        let m = cache.metrics();
        reference.counts.entries = reference.sets.iter().map(Vec::len).sum();
        let real = Counts {
            recorded: m.recorded,
            served: m.served_stale,
            absent: m.missed_absent,
            too_old: m.missed_too_old,
            evictions: m.evictions,
            entries: m.entries,
        };
        prop_assert_eq!(&real, &reference.counts, "step {}: {:?}", step, op);
        prop_assert!(m.entries <= m.capacity);
    }
    Ok(())
}

proptest! {
    #![proptest_config(proptest_config::cases(256, 8))]

    #[test]
    fn one_set_matches_the_reference(ops in vec(op(), 1..200)) {
        run::<1>(&ops)?;
    }

    #[test]
    fn two_sets_match_the_reference(ops in vec(op(), 1..200)) {
        run::<2>(&ops)?;
    }
}
