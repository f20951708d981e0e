//! The bulkhead, driven by fuzz bytes, next to the sequential reference of
//! the model test (`tests/model/bulkhead.rs`): try-acquires, waiters with
//! and without deadlines polled and cancelled in any order, clock advances,
//! resizes, forgets and close; woken waiters run after every step or only
//! on `Settle`, as the first byte says. Any disagreement panics with the
//! step.
#![no_main]

#[path = "../../tests/common/mod.rs"]
mod common;
#[macro_use]
#[path = "../../tests/model/check.rs"]
mod check;
#[path = "../../tests/model/bulkhead.rs"]
mod model;

use std::time::Duration;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use model::{Op, Rules};

const MAX_OPS: usize = 256;

fn duration(u: &mut Unstructured<'_>) -> Result<Duration> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => Duration::ZERO,
        1 => Duration::from_nanos(1),
        2 => Duration::from_millis(1),
        3 => Duration::from_millis(10),
        4 => Duration::from_millis(100),
        _ => Duration::from_nanos(u.int_in_range(0..=50_000_000u64)?),
    })
}

fn op(u: &mut Unstructured<'_>) -> Result<Op> {
    let i = usize::from(u.int_in_range(0..=7u8)?);
    let n = usize::from(u.int_in_range(0..=5u8)?);
    Ok(match u.int_in_range(0..=10u8)? {
        0 => Op::TryAcquire(n),
        1 => Op::DropPermit(i),
        2 => Op::ForgetPermit(i),
        3 => Op::Acquire(n),
        4 => Op::AcquireUntil(n, duration(u)?),
        5 => Op::Poll(i),
        6 => Op::Cancel(i),
        7 => Op::Advance(duration(u)?),
        8 => Op::Resize(n),
        9 => Op::Close,
        _ => Op::Settle,
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(capacity), Ok(eager)) = (u.int_in_range(1..=4usize), u.arbitrary::<bool>()) else {
        return;
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_OPS {
        match op(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    if let Err(m) = model::run(capacity, &ops, Rules { eager }) {
        panic!("capacity {capacity}, eager {eager}: {m}");
    }
});
