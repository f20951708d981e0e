//! The breaker, driven by fuzz bytes, next to the sequential reference of
//! the model test (`tests/model/breaker.rs`): the first byte choices make a
//! config, the rest a sequence of operations; any disagreement panics with
//! the step and the model's state.
#![no_main]

#[macro_use]
#[path = "../../tests/model/check.rs"]
mod check;
#[path = "../../tests/model/breaker.rs"]
mod model;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use model::{Cfg, Op, Step, Win};
use watertight::breaker::{Heap, Inline};
use watertight::{BreakerConfig, Outcome};

/// The longest case: enough for several open / half-open cycles.
const MAX_OPS: usize = 256;

fn cfg(u: &mut Unstructured<'_>) -> Result<Cfg> {
    let window_size = u.int_in_range(1..=8usize)?;
    Ok(Cfg {
        window_size,
        // (A time window takes a minimum above `window_size` too; the
        // model's cases keep to it.)
        minimum_calls: u.int_in_range(1..=window_size)?,
        failure_pct: u.int_in_range(2..=100u64)?,
        slow_ms: if u.arbitrary()? {
            Some(u.int_in_range(1..=20u64)?)
        } else {
            None
        },
        slow_pct: u.int_in_range(2..=100u64)?,
        open_ms: u.int_in_range(1..=50u64)?,
        half_open_calls: u.int_in_range(1..=4usize)?,
        max_wait_ms: if u.arbitrary()? {
            Some(u.int_in_range(1..=60u64)?)
        } else {
            None
        },
        window: window(u)?,
    })
}

/// Which window: the count window half the time, else the others.
fn window(u: &mut Unstructured<'_>) -> Result<Win> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 | 1 => Win::Count,
        2 => Win::Time {
            bucket_ms: u.int_in_range(1..=20u64)?,
            buckets: u.int_in_range(1..=8usize)?,
        },
        _ => Win::Consecutive {
            failures: u.int_in_range(1..=5usize)?,
            slow_is_failure: u.arbitrary()?,
        },
    })
}

fn step(u: &mut Unstructured<'_>) -> Result<Step> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => Step::Ms(u.int_in_range(0..=30u64)?),
        1 => Step::Slow(u.int_in_range(-2..=2i8)?),
        2 => Step::Open(u.int_in_range(-2..=2i8)?),
        3 => Step::MaxWait(u.int_in_range(-2..=2i8)?),
        _ => Step::Big,
    })
}

fn op(u: &mut Unstructured<'_>) -> Result<Op> {
    let i = usize::from(u.int_in_range(0..=7u8)?);
    Ok(match u.int_in_range(0..=9u8)? {
        0 => Op::Acquire,
        1 => Op::Success(i),
        2 => Op::Failure(i),
        3 => Op::Ignore(i),
        4 => Op::Drop(i),
        5 => Op::Advance(step(u)?),
        6 => {
            let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored]
                [usize::from(u.int_in_range(0..=2u8)?)];
            Op::Call(outcome, step(u)?)
        }
        7 => Op::ForceOpen,
        8 => Op::Disable,
        _ => Op::Reset,
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    // Thresholds of 1 % are refused (they read as fractions): not a case.
    let Ok(cfg) = cfg(&mut u) else { return };
    if cfg.try_build().is_err() {
        return;
    }
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_OPS {
        match op(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    if let Err(m) = model::run::<8, Inline<8, 8>>(cfg, &ops) {
        panic!("inline breaker, {cfg:?}: {m}");
    }
    if let Err(m) = model::run::<{ BreakerConfig::MAX_WINDOW_SIZE }, Heap>(cfg, &ops) {
        panic!("heap breaker, {cfg:?}: {m}");
    }
});
