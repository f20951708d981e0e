#![cfg(not(loom))]
//! Model-based test of `RateLimiter`: random sequences of operations
//! (advance the clock, `check_n`, start a wait with or without a deadline,
//! poll waits, cancel waits, jump to the end of time) run single-threaded
//! against the real `RateLimiter<&ManualClock>` and against a plain
//! sequential GCRA written in `u128` arithmetic (`tests/model/rate.rs`).
//!
//! Checked, at every step:
//!
//! 1. **every decision is equal**: each `check_n` and each poll of a wait
//!    gives the same `Ok`, pending, `ExceedsBurst` or `Limited` — with the
//!    same `retry_after` and `ready_at` to the nanosecond;
//! 2. **the counters are equal**: admitted (calls and cells), refused,
//!    waited, cancelled, waiting.
//!
//! And over each whole run, with every wait still alive dropped at the end:
//!
//! 3. **the window bound**: over the admission instants (a wait counts at the
//!    instant its cells conform, a check at its time; cancelled waits are
//!    not admissions), in every window `[x, x + w]` the cells admitted are at
//!    most `burst + ⌊w / T⌋`, and at most `burst + ⌊w × cells / period⌋`.
//!    It is checked for every window from one admission to another. The
//!    bound holds because every admission moves the TAT past where the last
//!    one left it by its `k·T` and leaves it at most `burst·T` after its own
//!    instant: for the admissions in a window, the last one's TAT is at
//!    least `x + (their cells)·T` and at most `x + w + burst·T`.
//!
//! The window check is the independent one: it does not use the reference's
//! rules, only the instants the (equal) decisions produced. It is what
//! rejects giving a cancelled wait's cells back from the middle of the
//! chain (the `RateLimiter` docs, "Cancel safety"):
//! `regression_middle_refund_would_break_the_window` is the case, and with
//! that rule in both the limiter and the reference the proptest fails it.
mod common;
#[path = "support/proptest_config.rs"]
mod proptest_config;
#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/rate.rs"]
mod model;

use model::{run, Op, Span, Spec};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn span() -> impl Strategy<Value = Span> {
    prop_oneof![
        // Whole and quarter intervals, the usual steps.
        4 => (0..=12u8).prop_map(|quarters| Span { quarters, nanos: 0 }),
        // An interval give or take a nanosecond or two.
        3 => (prop::sample::select(vec![0u8, 4, 8]), 0..=3u8)
            .prop_map(|(quarters, nanos)| Span { quarters, nanos }),
        1 => (0..=40u8).prop_map(|quarters| Span { quarters, nanos: 1 }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => span().prop_map(Op::Advance),
        1 => span().prop_map(|s| Op::EndOfTime(Span { quarters: s.quarters * 3, nanos: s.nanos })),
        6 => (0..=5u32).prop_map(Op::Check),
        5 => (0..=5u32, prop::option::weighted(0.8, span()), prop::bool::weighted(0.2))
            .prop_map(|(n, deadline, lazy)| Op::Wait { n, deadline, lazy }),
        5 => any::<usize>().prop_map(Op::Poll),
        3 => any::<usize>().prop_map(Op::Cancel),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1..=5u32,
        prop::sample::select(vec![
            1_000_000_000u64, // per second: T rounded up for 3
            60_000_000_000,   // per minute
            10,               // a few ns: rounding matters a lot
            7,
            1_000,
            1,
        ]),
        1..=4u32,
    )
        .prop_map(|(cells, period, burst)| Spec {
            cells,
            period,
            burst,
        })
}

fn config() -> ProptestConfig {
    proptest_config::cases(2000, 20)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn limiter_matches_gcra_and_keeps_the_window_bound(spec in spec(), ops in vec(op(), 0..=60)) {
        run(spec, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }
}

fn q(quarters: u8) -> Span {
    Span { quarters, nanos: 0 }
}

/// The counterexample in the `RateLimiter` docs: burst 1, a check, two
/// waits, the first dropped early. Had its cell come back, a check at the
/// second wait's instant would conform next to it.
#[test]
fn regression_middle_refund_would_break_the_window() {
    let spec = Spec {
        cells: 1,
        period: 10,
        burst: 1,
    };
    let wait = Op::Wait {
        n: 1,
        deadline: None,
        lazy: false,
    };
    let ops = [
        Op::Check(1),
        wait.clone(),
        wait,
        Op::Cancel(0),
        Op::Advance(q(8)),
        Op::Check(1),
        Op::Poll(1),
    ];
    run(spec, &ops).unwrap();
}

/// `per_second(3)`: rounded up, four cells never fit in one second.
#[test]
fn regression_rounding_up() {
    let spec = Spec {
        cells: 3,
        period: 1_000_000_000,
        burst: 1,
    };
    let mut ops = vec![];
    for _ in 0..4 {
        ops.push(Op::Check(1));
        ops.push(Op::Advance(Span {
            quarters: 4,
            nanos: 0,
        }));
    }
    run(spec, &ops).unwrap();
}
