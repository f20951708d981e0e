#![cfg(not(loom))]
//! Model-based test of `KeyedRateLimiter`: random sequences of clock
//! advances and `check_key_n` on a small alphabet of keys, run against the
//! real limiter (`SETS` = 1, 2 or 3, so sets fill and keys are evicted and
//! refused) and against a sequential reference: per set, a plain list of
//! `(key, TAT)` pairs of at most `WAYS` entries, GCRA in `u128`, and the
//! documented rule for a new key (append while there is room; else replace
//! the stale entry, TAT ≤ now, with the earliest TAT, the first on a tie;
//! else `Full`, retry when the earliest TAT comes).
//!
//! Keys are hashed by an identity hasher, so the reference can place each
//! key in its set by the documented formula, `(hash × SETS) >> 64`.
//!
//! Checked at every step: the same decision (`Ok`, `ExceedsBurst`,
//! `Limited` with the same `retry_after` and `ready_at`, `Full` with the
//! same ones); the same counters (admitted, refused, full, evictions) and
//! the same number of live keys. Over each run, for every key: **the window
//! bound** (in any window of length `w`, at most `burst + ⌊w / T⌋` cells),
//! by `tests/model/rate.rs`'s `check_windows` over the instants the
//! limiter admitted, eviction or not.
mod common;
#[path = "support/identity_hasher.rs"]
mod identity_hasher;
#[path = "support/proptest_config.rs"]
mod proptest_config;
#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/rate.rs"]
mod model;

use std::collections::HashMap;
use std::time::Duration;

use check::Mismatch;
use identity_hasher::Identity;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::rate::{KeyedError, KeyedRateLimiter, NotYet, Quota, RateError, WAYS};

/// The alphabet: 20 keys spread over the hash space.
fn key(i: u8) -> u64 {
    u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// `Instant::MAX`: the deadline of a wait without one, and the `ready_at`
/// of a request that never conforms.
const END: u128 = u64::MAX as u128;
/// The last nanosecond a schedule reaches (`watertight::rate::HORIZON`,
/// 2^60 - 1): a request ending past it never conforms.
const HORIZON: u128 = (1 << 60) - 1;

#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
struct Counters {
    admitted: usize,
    refused: usize,
    full: usize,
    evictions: usize,
    keys_live: usize,
}

struct Reference {
    interval: u128,
    tolerance: u128,
    burst: u32,
    sets: Vec<Vec<(u64, u128)>>,
    counters: Counters,
    admissions: HashMap<u64, Vec<(u128, u32)>>,
}

impl Reference {
    fn new(cells: u32, period: u64, burst: u32, sets: usize) -> Self {
        let interval = u128::from(period).div_ceil(u128::from(cells));
        Reference {
            interval,
            tolerance: interval * u128::from(burst),
            burst,
            sets: vec![Vec::new(); sets],
            counters: Counters::default(),
            admissions: HashMap::new(),
        }
    }

    fn limited(&mut self, now: u128, at: u128) -> KeyedError {
        self.counters.refused += 1;
        KeyedError::Rate(RateError::Limited(NotYet::new(
            Instant::from_nanos(now as u64),
            Instant::from_nanos(at as u64),
        )))
    }

    fn check(&mut self, now: u128, k: u64, n: u32) -> Result<(), KeyedError> {
        if n > self.burst {
            return Err(KeyedError::Rate(RateError::ExceedsBurst {
                requested: n,
                burst: self.burst,
            }));
        }
        if n == 0 {
            return Ok(());
        }
        let s = ((u128::from(k) * self.sets.len() as u128) >> 64) as usize;
        let inc = u128::from(n) * self.interval;
        let known = self.sets[s].iter().position(|e| e.0 == k);
        // A key not in the table starts from now.
        let tat = known.map_or(now, |i| self.sets[s][i].1);
        let end = tat.max(now) + inc;
        if end > HORIZON {
            return Err(self.limited(now, END));
        }
        let at = end.saturating_sub(self.tolerance);
        if at > now {
            return Err(self.limited(now, at));
        }
        let set = &mut self.sets[s];
        match known {
            Some(i) => set[i].1 = end,
            None if set.len() < WAYS => set.push((k, end)),
            None => {
                let stale = set
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.1 <= now)
                    .min_by_key(|(i, e)| (e.1, *i))
                    .map(|(i, _)| i);
                match stale {
                    Some(i) => {
                        set[i] = (k, end);
                        self.counters.evictions += 1;
                    }
                    None => {
                        let first = set.iter().map(|e| e.1).min().unwrap();
                        self.counters.full += 1;
                        return Err(KeyedError::Full {
                            retry_after: Duration::from_nanos((first - now) as u64),
                            ready_at: Instant::from_nanos(first as u64),
                        });
                    }
                }
            }
        }
        self.counters.admitted += 1;
        self.admissions.entry(k).or_default().push((now, n));
        Ok(())
    }

    fn live(&self, now: u128) -> usize {
        self.sets.iter().flatten().filter(|e| e.1 > now).count()
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Move the clock by this many quarters of `T` and nanoseconds.
    Advance(u8, u8),
    /// `check_key_n(key(i), n)`.
    Check(u8, u32),
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    cells: u32,
    period: u64,
    burst: u32,
    sets: usize,
}

fn run_with<const SETS: usize>(spec: Spec, ops: &[Op]) -> Result<(), Mismatch> {
    let clock = ManualClock::new();
    let quota = Quota::new(spec.cells, Duration::from_nanos(spec.period)).burst(spec.burst);
    let real: KeyedRateLimiter<u64, &ManualClock, SETS, Identity> =
        KeyedRateLimiter::with_hasher("model", quota, &clock, Identity);
    let mut reference = Reference::new(spec.cells, spec.period, spec.burst, SETS);
    let mut admitted: HashMap<u64, Vec<(u128, u32)>> = HashMap::new();
    for (step, op) in ops.iter().enumerate() {
        let now = u128::from(clock.now().as_nanos());
        match *op {
            Op::Advance(quarters, nanos) => {
                let d = reference.interval * u128::from(quarters) / 4 + u128::from(nanos);
                clock.advance(Duration::from_nanos(d as u64));
            }
            Op::Check(i, n) => {
                let k = key(i);
                let got = real.check_key_n(&k, n);
                let want = reference.check(now, k, n);
                ensure!(
                    got == want,
                    "step {step} {op:?} at {now}: limiter {got:?}, reference {want:?}"
                );
                if got.is_ok() && n > 0 {
                    admitted.entry(k).or_default().push((now, n));
                }
            }
        }
        let now = u128::from(clock.now().as_nanos());
        let m = real.metrics();
        let got = Counters {
            admitted: m.admitted,
            refused: m.refused,
            full: m.full,
            evictions: m.evictions,
            keys_live: m.keys_live,
        };
        let want = Counters {
            keys_live: reference.live(now),
            ..reference.counters
        };
        ensure!(
            got == want,
            "step {step} {op:?}: limiter counters {got:?}, reference {want:?}"
        );
        ensure!(m.keys_live <= m.capacity, "more live keys than slots");
    }
    ensure!(
        admitted == reference.admissions,
        "admissions differ from the reference's"
    );
    for (k, adm) in &admitted {
        model::check_windows(adm, reference.interval, spec.cells, spec.period, spec.burst)
            .map_err(|m| m.at(format_args!("key {k:#x}")))?;
    }
    Ok(())
}

fn run(spec: Spec, ops: &[Op]) -> Result<(), Mismatch> {
    match spec.sets {
        1 => run_with::<1>(spec, ops),
        2 => run_with::<2>(spec, ops),
        _ => run_with::<3>(spec, ops),
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=8u8, 0..=2u8).prop_map(|(q, n)| Op::Advance(q, n)),
        8 => (0..20u8, 0..=5u32).prop_map(|(k, n)| Op::Check(k, n)),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1..=5u32,
        prop::sample::select(vec![1_000_000_000u64, 10, 7, 1_000, 1]),
        1..=4u32,
        1..=3usize,
    )
        .prop_map(|(cells, period, burst, sets)| Spec {
            cells,
            period,
            burst,
            sets,
        })
}

fn config() -> ProptestConfig {
    proptest_config::cases(1000, 20)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn keyed_limiter_matches_the_reference(spec in spec(), ops in vec(op(), 0..=80)) {
        run(spec, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }
}

/// A set filled with live keys refuses the ninth, then takes it once the
/// earliest goes stale, evicting that one.
#[test]
fn a_full_set_refuses_then_evicts_the_earliest() {
    let spec = Spec {
        cells: 1,
        period: 100,
        burst: 1,
        sets: 1,
    };
    let mut ops: Vec<Op> = Vec::new();
    for k in 0..8 {
        ops.push(Op::Check(k, 1));
        ops.push(Op::Advance(0, 1));
    }
    ops.push(Op::Check(8, 1)); // Full
    ops.push(Op::Advance(4, 0)); // keys 0..=7 stale? only the early ones
    ops.push(Op::Check(8, 1));
    ops.push(Op::Check(0, 1));
    run(spec, &ops).unwrap();
}
