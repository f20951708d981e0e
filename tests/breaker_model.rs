#![cfg(not(loom))]
//! Model-based test of `CircuitBreaker`: random sequences of operations run
//! single-threaded against the real `CircuitBreaker<&ManualClock, 8>` (and,
//! the same cases, against a `HeapBreaker`, whose window is sized at run
//! time; and on the heap breaker with windows of 100 and 1000) and
//! against a plain sequential reference model written below (a state enum, a
//! generation counter, a `VecDeque` of outcomes, the instant the open wait
//! began and the instant the half-open episode last admitted a probe, probe
//! counts, rejected and stale counters). Every answer must be the same
//! (permit or rejection, the exact `Rejection` with its `retry_after`, whether
//! the permit is a probe, what `force_open`/`disable` return, what
//! `call_with` returns), and after every step so must `state()`, every field
//! of `metrics()` and which outstanding permits are probes.
//!
//! The model encodes the documented semantics, not the implementation: the
//! `CircuitBreaker` doc section "Decisions on edge semantics" and the method
//! and field docs. In particular:
//!
//! - rates are evaluated after every recorded outcome once the window holds
//!   `minimum_calls`; `rate >= threshold` trips; slow is strictly longer than
//!   `slow_call_duration`, measured by the breaker's clock from `try_acquire`
//!   (or the first poll of `call_with`) to the outcome;
//! - the open wait ends at `opened_at + open_duration` (the instant of the
//!   transition); `Rejection::Open` carries the time left; `state()` says
//!   HalfOpen once the wait is over, without changing anything;
//! - a half-open episode begins with the first `try_acquire` after the wait
//!   (at that instant), which is its first probe; exactly `half_open_calls`
//!   probes in total, more get `ProbesBusy`; an ignored or dropped probe of
//!   the current episode gives its slot back; the first failed or slow probe
//!   reopens (from now); `half_open_calls` successes close;
//! - with `max_half_open_wait`, an episode that has a probe out and has
//!   admitted no probe for that long has reopened *as of* that moment (the
//!   last admission plus the limit), as if the probe had failed: from then
//!   on `state()` reads Open, the open wait runs from that instant, it is the
//!   last transition, a probe outcome recorded after it is stale, and a probe
//!   given back after it gives back nothing (the episode is over); an
//!   episode with no probe out does not expire;
//! - Closed → Open and HalfOpen → Open (and ForcedOpen, Disabled) keep the
//!   window frozen; entering HalfOpen or Closed starts it empty; half-open
//!   probes are recorded in it for metrics but decide by their own counts;
//! - every transition bumps a generation; a success or failure recorded on a
//!   permit of an older generation changes nothing and counts as stale; an
//!   ignored outcome or a drop is not a recorded outcome, so it is never
//!   stale; Disabled records nothing (and its own permits are not stale while
//!   it stays Disabled);
//! - `force_open`, `disable` are transitions unless the breaker is already in
//!   that state (they return whether they made the change); `reset` empties
//!   the window and starts a new generation, and is a transition unless the
//!   breaker is already Closed (then `last_transition` stays);
//! - `metrics()` agrees with `state()`: once the open wait is over and before
//!   the first probe, it shows HalfOpen, an empty window and the end of the
//!   wait as `last_transition`;
//! - `metrics().rejected` counts every rejection (Open, ProbesBusy,
//!   ForcedOpen).
//!
//! The clock moves in whole milliseconds (timestamps are exact to 1 µs), in
//! steps chosen relative to the case's config so that the boundaries (slow
//! duration, open wait, half-open limit, each ± 1 ms) are hit often.
//!
//! Consecutive failures (`every_operation_consecutive`,
//! `open_half_open_cycles_consecutive`): the model keeps the run of failures
//! (a failure, or a slow success when slow calls are failures, lengthens
//! it; any other success ends it; at most 1023), trips at the configured
//! length, records half-open probes in the run too, and shows the run as
//! `calls` and `failed_calls` with no rates.
//!
//! The time window (`every_operation_time`, `open_half_open_cycles_time`):
//! the model keeps every outcome with the instant it was recorded; the
//! window at any moment is the outcomes whose bucket (`instant / bucket`) is
//! the current one or one of the `buckets - 1` before it; the rates are
//! checked after a failure or slow call, and after a plain success while its
//! bucket holds at most `minimum_calls` calls; `metrics()` reads the window
//! at the clock's time, open or not.
//!
//! Two properties: `every_operation` (operator switches included) and
//! `open_half_open_cycles` (no `force_open`/`disable`, more clock steps and
//! successes, so many Closed → Open → HalfOpen → Open/Closed cycles per
//! case). `cargo test --all-features --test breaker_model` runs 10,000 cases
//! of each; `PROPTEST_CASES` overrides that.
//!
//! The `regression_*` tests at the end are divergences the model found,
//! spelled out step by step as the shrunk operation sequences.
//!
//! The reference and the harness live in `tests/model/breaker.rs`, shared
//! with the breaker fuzz target; this file draws the cases.

#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/breaker.rs"]
mod model;

#[path = "support/proptest_config.rs"]
mod proptest_config;

use std::time::Duration;

use model::{run, Breaker, Cfg, Op, Step, Win, MS};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::breaker::{Heap, Inline, State};
use watertight::clock::ManualClock;
use watertight::{BreakerConfig, CircuitBreaker, Outcome, Rejection};

/// The heap breaker's `N`: the largest window.
const HEAP: usize = BreakerConfig::MAX_WINDOW_SIZE;

fn cfgs() -> impl Strategy<Value = Cfg> {
    cfgs_of(1..=8usize, |window_size| 1..=window_size)
}

/// Windows of 100 and 1000, for the heap breaker: a case's operations
/// (at most 60) never fill them, so the minimum is at most 50 for rates to
/// be evaluated.
fn large_cfgs() -> impl Strategy<Value = Cfg> {
    cfgs_of(prop::sample::select(vec![100usize, 1000]), |_| 1..=50usize)
}

fn cfgs_of(
    windows: impl Strategy<Value = usize>,
    minimum: fn(usize) -> core::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Cfg> {
    windows.prop_flat_map(move |window_size| {
        (
            minimum(window_size),
            prop::sample::select(vec![20u64, 30, 50, 75, 100]),
            prop_oneof![2 => Just(None), 3 => prop::sample::select(vec![1u64, 2, 5, 10]).prop_map(Some)],
            prop::sample::select(vec![20u64, 50, 75, 100]),
            prop::sample::select(vec![1u64, 5, 10, 30]),
            1..=3usize,
            prop_oneof![1 => Just(None), 1 => prop::sample::select(vec![1u64, 3, 10, 50]).prop_map(Some)],
        )
            .prop_map(
                move |(
                    minimum_calls,
                    failure_pct,
                    slow_ms,
                    slow_pct,
                    open_ms,
                    half_open_calls,
                    max_wait_ms,
                )| Cfg {
                    window_size,
                    minimum_calls,
                    failure_pct,
                    slow_ms,
                    slow_pct,
                    open_ms,
                    half_open_calls,
                    max_wait_ms,
                    window: Win::Count,
                },
            )
    })
}

/// Time-window cases: the count window's settings (its size unused; the
/// minimum up to 8) with 1 to 5 buckets of 1 to 20 ms.
fn time_cfgs() -> impl Strategy<Value = Cfg> {
    (cfgs(), 1..=20u64, 1..=5usize, 1..=8usize).prop_map(
        |(cfg, bucket_ms, buckets, minimum_calls)| Cfg {
            window: Win::Time { bucket_ms, buckets },
            minimum_calls,
            ..cfg
        },
    )
}

/// Consecutive-failure cases: the count window's settings (unused but
/// for the open wait, probes, slow duration and half-open limit) with a
/// run of 1 to 5 failures, slow successes counted or not.
fn consecutive_cfgs() -> impl Strategy<Value = Cfg> {
    (cfgs(), 1..=5usize, any::<bool>()).prop_map(|(cfg, failures, slow_is_failure)| Cfg {
        window: Win::Consecutive {
            failures,
            slow_is_failure,
        },
        ..cfg
    })
}

/// Operation kinds, for drawing.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Acquire,
    Success,
    Failure,
    Ignore,
    Drop,
    Advance,
    Call,
    ForceOpen,
    Disable,
    Reset,
}

/// Weighted tables an operation is drawn from, one small integer per table.
/// (Nested `prop_oneof!`s spent several times longer generating a case than
/// running it in the debug test profile; ranges of integers are cheap, and
/// they shrink towards each table's first row.)
///
/// Every operation; the operator switches are rare, as Disabled and
/// ForcedOpen last until the next `reset`.
const ALL: &[(u32, Kind)] = &[
    (10, Kind::Acquire),
    (6, Kind::Success),
    (6, Kind::Failure),
    (2, Kind::Ignore),
    (2, Kind::Drop),
    (8, Kind::Advance),
    (5, Kind::Call),
    (1, Kind::ForceOpen),
    (1, Kind::Disable),
    (2, Kind::Reset),
];

/// No operator switches but `reset`, and more time and probes: the cycle
/// Closed → Open → HalfOpen → Open or Closed, many times per case.
const CYCLE: &[(u32, Kind)] = &[
    (10, Kind::Acquire),
    (7, Kind::Success),
    (5, Kind::Failure),
    (2, Kind::Ignore),
    (2, Kind::Drop),
    (10, Kind::Advance),
    (5, Kind::Call),
    (1, Kind::Reset),
];

const OUTCOMES: &[(u32, Outcome)] = &[
    (4, Outcome::Success),
    (4, Outcome::Failure),
    (1, Outcome::Ignored),
];

const STEPS: &[(u32, Step)] = &[
    (2, Step::Ms(0)),
    (2, Step::Ms(1)),
    (1, Step::Ms(2)),
    (1, Step::Ms(5)),
    (1, Step::Slow(-1)),
    (1, Step::Slow(0)),
    (1, Step::Slow(1)),
    (1, Step::Open(-1)),
    (2, Step::Open(0)),
    (1, Step::Open(1)),
    (1, Step::MaxWait(-1)),
    (1, Step::MaxWait(0)),
    (1, Step::MaxWait(1)),
    (1, Step::Big),
];

const fn total<T>(table: &[(u32, T)]) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while i < table.len() {
        sum += table[i].0;
        i += 1;
    }
    sum
}

fn pick<T: Copy>(table: &[(u32, T)], mut n: u32) -> T {
    for &(weight, value) in table {
        if n < weight {
            return value;
        }
        n -= weight;
    }
    unreachable!("drawn below the table's total")
}

fn op(kinds: &'static [(u32, Kind)]) -> impl Strategy<Value = Op> {
    (
        0..total(kinds),
        0..8usize,
        0..total(OUTCOMES),
        0..total(STEPS),
    )
        .prop_map(|(kind, i, outcome, step)| {
            let step = pick(STEPS, step);
            match pick(kinds, kind) {
                Kind::Acquire => Op::Acquire,
                Kind::Success => Op::Success(i),
                Kind::Failure => Op::Failure(i),
                Kind::Ignore => Op::Ignore(i),
                Kind::Drop => Op::Drop(i),
                Kind::Advance => Op::Advance(step),
                Kind::Call => Op::Call(pick(OUTCOMES, outcome), step),
                Kind::ForceOpen => Op::ForceOpen,
                Kind::Disable => Op::Disable,
                Kind::Reset => Op::Reset,
            }
        })
}

fn ops(kinds: &'static [(u32, Kind)]) -> impl Strategy<Value = Vec<Op>> {
    vec(op(kinds), 0..=60)
}

fn config() -> ProptestConfig {
    proptest_config::cases(10000, 20)
}

proptest! {
    #![proptest_config(config())]

    /// Random configs and random sequences of every operation: the same
    /// answers and the same observable state as the model at every step.
    #[test]
    fn every_operation(cfg in cfgs(), ops in ops(ALL)) {
        run::<8, Inline<8>>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// The same without `force_open` and `disable`, with more clock steps
    /// and successes: many open / half-open / close cycles per case.
    #[test]
    fn open_half_open_cycles(cfg in cfgs(), ops in ops(CYCLE)) {
        run::<8, Inline<8>>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// `every_operation` on the heap breaker (the window sized at run time).
    /// Consecutive failures, every operation (inline, on a one-slot breaker:
    /// the window needs none).
    #[test]
    fn every_operation_consecutive(cfg in consecutive_cfgs(), ops in ops(ALL)) {
        run::<1, Inline<1>>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// Consecutive failures, many open / half-open cycles, on the heap.
    #[test]
    fn open_half_open_cycles_consecutive(cfg in consecutive_cfgs(), ops in ops(CYCLE)) {
        run::<HEAP, Heap>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// The time window, every operation (inline, eight buckets' room).
    #[test]
    fn every_operation_time(cfg in time_cfgs(), ops in ops(ALL)) {
        run::<1, Inline<1, 8>>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// The time window, many open / half-open cycles, on the heap.
    #[test]
    fn open_half_open_cycles_time(cfg in time_cfgs(), ops in ops(CYCLE)) {
        run::<HEAP, Heap>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    #[test]
    fn every_operation_heap(cfg in cfgs(), ops in ops(ALL)) {
        run::<HEAP, Heap>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// `open_half_open_cycles` on the heap breaker.
    #[test]
    fn open_half_open_cycles_heap(cfg in cfgs(), ops in ops(CYCLE)) {
        run::<HEAP, Heap>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// Every operation on heap windows of 100 and 1000.
    #[test]
    fn every_operation_heap_large_windows(cfg in large_cfgs(), ops in ops(ALL)) {
        run::<HEAP, Heap>(cfg, &ops).map_err(|m| TestCaseError::fail(m.0))?;
    }
}

// ---------------------------------------------------------------------------
// Divergences the model found, step for step as proptest shrunk them. Each
// one fails against the library as it is.
// ---------------------------------------------------------------------------

/// The config of both shrunk cases: one-call window, one probe, 1 ms open
/// wait (5 ms in the second), 1 ms half-open limit.
fn shrunk_cfg(open_ms: u64) -> Cfg {
    Cfg {
        window_size: 1,
        minimum_calls: 1,
        failure_pct: 20,
        slow_ms: None,
        slow_pct: 20,
        open_ms,
        half_open_calls: 1,
        max_wait_ms: Some(1),
        window: Win::Count,
    }
}

fn at_ms(ms: u64) -> Option<u64> {
    Some(ms * MS)
}

/// An episode that ran out of time (a probe out, no admission for
/// `max_half_open_wait`) "reopens, as of that moment": `state()` and
/// `metrics().state` read Open from then on and the open wait runs from that
/// moment, but `metrics().last_transition` still says when the episode
/// began, until some later `try_acquire` or probe outcome makes the
/// transition (a *rejected* `try_acquire` then moves `last_transition`
/// forward with no visible state change). Expected: `last_transition` is the
/// moment the episode ran out, as soon as `state()` reads Open.
///
/// Shrunk from `every_operation`: `[Call(Failure, Ms(0)), Advance(Ms(1)),
/// Acquire, Advance(Ms(1))]`.
#[test]
fn regression_an_expired_episode_is_the_last_transition_as_soon_as_it_reads_open() {
    let clock = ManualClock::new();
    let b: Breaker<'_> = CircuitBreaker::new("model", shrunk_cfg(1).build(), &clock);
    // Call(Failure, Ms(0)): trips at 0 ms.
    let got = futures_lite::future::block_on(
        b.call_with(async { Ok::<(), ()>(()) }, |_| Outcome::Failure),
    );
    assert_eq!(got, Ok(()));
    assert_eq!(b.metrics().last_transition.map(|t| t.as_nanos()), at_ms(0));
    // Advance(Ms(1)), Acquire: the episode begins at 1 ms with this probe.
    clock.advance(Duration::from_millis(1));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.metrics().last_transition.map(|t| t.as_nanos()), at_ms(1));
    // Advance(Ms(1)): 2 ms, the probe is out and the limit has run out.
    clock.advance(Duration::from_millis(1));
    let m = b.metrics();
    assert_eq!((b.state(), m.state), (State::Open, State::Open));
    assert_eq!(
        m.last_transition.map(|t| t.as_nanos()),
        at_ms(2),
        "metrics() reads Open, reopened as of 2 ms (the open wait runs from there), but \
         last_transition is still the episode's start"
    );
    drop(probe);
}

/// A probe given back (ignored, or its permit dropped: a caller's timeout
/// cancelling the stuck call) *after* its episode ran out revives the
/// episode: `state()` read Open (the episode reopened as of the moment it
/// ran out, "as if the probe had failed", with a new open wait), and after
/// the give-back it reads HalfOpen again, with no transition, and the next
/// `try_acquire` is admitted as a probe instead of being refused with
/// `Rejection::Open` for the rest of the open wait. So a system whose probes
/// hang is probed again as soon as each caller gives up, not once per open
/// wait. Expected: the give-back changes nothing; Open until 6 ms + 5 ms.
///
/// Shrunk from `every_operation` (with the `last_transition` comparison of
/// the case above left out): `[Acquire, Failure(0), Advance(Open(0)),
/// Call(Ignored, Ms(1))]`; the call's future moves the clock 1 ms before its
/// outcome is classified as ignored.
#[test]
fn regression_a_probe_given_back_after_its_episode_ran_out_does_not_revive_it() {
    let clock = ManualClock::new();
    let b: Breaker<'_> = CircuitBreaker::new("model", shrunk_cfg(5).build(), &clock);
    // Acquire, Failure(0): trips at 0 ms.
    b.try_acquire().unwrap().failure();
    // Advance(Open(0)): 5 ms, the open wait is over.
    clock.advance(Duration::from_millis(5));
    assert_eq!(b.state(), State::HalfOpen);
    // Call(Ignored, Ms(1)): a probe admitted at 5 ms whose call takes 1 ms,
    // so the episode ran out (at 6 ms) before the probe is given back.
    let got = futures_lite::future::block_on(b.call_with(
        async {
            clock.advance(Duration::from_millis(1));
            assert_eq!(b.state(), State::Open, "ran out at 6 ms with the probe out");
            Ok::<(), ()>(())
        },
        |_| Outcome::Ignored,
    ));
    assert_eq!(got, Ok(()));
    assert_eq!(
        b.state(),
        State::Open,
        "the episode reopened as of 6 ms; giving the late probe back must not undo that"
    );
    assert_eq!(
        b.try_acquire().map(|p| p.is_probe()),
        Err(Rejection::Open {
            retry_after: Duration::from_millis(5)
        })
    );
}
