#![cfg(not(loom))]
//! Model-based test of `AdaptiveThrottle`: random sequences of operations
//! (advance the clock by parts of a bucket or whole windows, check, report
//! a ticket accepted, overloaded or ignored, drop a ticket) run
//! single-threaded against the real throttle on a `ManualClock` and
//! against a sequential reference (`tests/model/throttle.rs`) that keeps
//! every request as a record and finds the window's counts by brute force.
//!
//! Checked at every step: each decision (admitted or refused, and the
//! probability a refusal reports), the probability, the window's requests
//! and accepts, and the counters (admitted, refused, accepted, overloaded,
//! ignored) are equal; `late` is at most the accepts that came in after
//! their bucket left the window (it counts those whose slot was reused).
#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/throttle.rs"]
mod model;

#[path = "support/proptest_config.rs"]
mod proptest_config;

use model::{run, Op, Spec};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::throttle::{Response, BUCKETS};

const BUCKET: u64 = 1_000;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Parts of a bucket, a bucket give or take a nanosecond, a window.
        4 => (0..=BUCKET / 2).prop_map(Op::Advance),
        2 => prop::sample::select(vec![BUCKET - 1, BUCKET, BUCKET + 1, 3 * BUCKET])
            .prop_map(Op::Advance),
        1 => prop::sample::select(vec![
            BUCKET * (BUCKETS as u64 - 1),
            BUCKET * BUCKETS as u64,
            BUCKET * 50 * BUCKETS as u64,
        ])
        .prop_map(Op::Advance),
        10 => Just(Op::Check),
        6 => (any::<usize>(), prop::sample::select(vec![
            Response::Accepted,
            Response::Overloaded,
            Response::Ignored,
        ]))
        .prop_map(|(n, r)| Op::Report(n, r)),
        1 => any::<usize>().prop_map(Op::Drop),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::sample::select(vec![1.0, 1.1, 1.5, 2.0, 3.0]),
        prop::sample::select(vec![0.0, 0.5, 0.9, 1.0]),
        any::<u64>(),
    )
        .prop_map(|(k, max_probability, seed)| Spec {
            k,
            max_probability,
            bucket: BUCKET,
            seed,
        })
}

fn config() -> ProptestConfig {
    proptest_config::cases(1000, 10)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn throttle_matches_the_reference(spec in spec(), ops in vec(op(), 0..=200)) {
        run(spec, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }
}

/// An overloaded backend then a long-running call whose accept comes in
/// after its bucket left the window: late, not credited.
#[test]
fn a_late_accept_after_overload() {
    let spec = Spec {
        k: 2.0,
        max_probability: 0.9,
        bucket: BUCKET,
        seed: 1,
    };
    let mut ops = vec![Op::Check];
    for _ in 0..30 {
        ops.push(Op::Check);
        ops.push(Op::Report(1, Response::Overloaded));
    }
    ops.push(Op::Advance(BUCKET * BUCKETS as u64));
    ops.push(Op::Check);
    ops.push(Op::Report(0, Response::Accepted));
    run(spec, &ops).unwrap();
}

/// A ticket kept 50 laps of the ring, reported after a ticket of the
/// current bucket in the same slot: its accept must not overwrite the
/// newer one (found by this test when the accept stopped reading the
/// clock; the requests' slot now says the old bucket is gone).
#[test]
fn regression_an_ancient_accept_never_overwrites_a_newer_one() {
    let spec = Spec {
        k: 1.0,
        max_probability: 0.0,
        bucket: BUCKET,
        seed: 0,
    };
    let ops = [
        Op::Check,
        Op::Advance(BUCKET * 50 * BUCKETS as u64),
        Op::Check,
        Op::Check,
        // Tickets: [old, new, new]; report the second, then the first.
        Op::Report(1, Response::Accepted),
        Op::Report(0, Response::Accepted),
    ];
    run(spec, &ops).unwrap();
}
