#![cfg(not(loom))]
//! Model-based test of `Bulkhead`: random sequences of operations run
//! single-threaded against the real `Bulkhead<&ManualClock>` and against a
//! plain sequential reference model written below, and after every step the
//! observable state must match.
//!
//! The model encodes the documented semantics (the `Bulkhead` doc sections
//! "Fairness", "Capacity changes and closing" and "Counters", and the method
//! docs) as an exact FIFO wait queue: a release hands its permits to the
//! queued waiters in arrival order (a waiter that wants more than is free
//! keeps its place and the next is looked at), a newcomer never takes a
//! permit while anyone is queued unless, under the queue's lock, no queued
//! waiter can use it, a shrink or `forget` fails the queued waiters above
//! the new capacity, `close` fails them all, a cancelled waiter leaves the
//! queue and gives back permits handed to it. Because a hand-off happens at
//! the release, not when the woken task runs, the model is exact: every
//! poll's outcome, every counter of `metrics()` (`queued` included),
//! `in_flight`, `available` and `waiting` must match it after every step.
//! On top:
//!
//! 1. a waiter handed permits, or refused, has been woken by then; an
//!    untimed queued waiter is never woken for nothing;
//! 2. liveness: once every woken waiter has run (`settle`), nobody is queued
//!    next to permits it could use, above the capacity, past its deadline or
//!    after close;
//! 3. teardown: dropping every waiter and permit brings every permit back.
//!
//! Three drivers: `eager_*` settle after every operation (as an executor that
//! runs every woken task at once); `lazy_mixed` settles only on an explicit
//! `Settle` operation, so releases, newcomers, cancellations and polls happen
//! while woken waiters have not run yet.
//!
//! What the model leaves to the library, as the docs do not say: an empty
//! permit (`n == 0`) is not counted in `accepted`, and `forget` after a
//! shrink takes the capacity down to zero at most.
//!
//! The `regression_*` tests at the end are failures the model found in the
//! earlier wake-up queue, cut down by hand to the steps that matter, and
//! kept as scenarios of the hand-off queue.
//!
//! The reference and the harness live in `tests/model/bulkhead.rs`, shared
//! with the bulkhead fuzz target; this file draws the cases.

mod common;
#[path = "support/proptest_config.rs"]
mod proptest_config;
#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/bulkhead.rs"]
mod model;

use std::time::Duration;

use model::{run, run_bounded, Op, Rules};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::clock::{Clock, ManualClock};
use watertight::Bulkhead;

fn durations() -> impl Strategy<Value = Duration> {
    prop::sample::select(vec![
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_millis(1),
        Duration::from_millis(10),
        Duration::from_millis(100),
    ])
}

/// Waiter sizes for mixed cases: mostly one permit, some zero, some several.
fn mixed_n() -> BoxedStrategy<usize> {
    prop_oneof![1 => Just(0usize), 5 => Just(1usize), 3 => 2..=4usize].boxed()
}

fn single_n() -> BoxedStrategy<usize> {
    Just(1usize).boxed()
}

fn op(waiter_n: BoxedStrategy<usize>) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=4usize).prop_map(Op::TryAcquire),
        6 => (0..8usize).prop_map(Op::DropPermit),
        1 => (0..8usize).prop_map(Op::ForgetPermit),
        4 => waiter_n.clone().prop_map(Op::Acquire),
        4 => (waiter_n, durations()).prop_map(|(n, d)| Op::AcquireUntil(n, d)),
        3 => (0..8usize).prop_map(Op::Poll),
        3 => (0..8usize).prop_map(Op::Cancel),
        4 => durations().prop_map(Op::Advance),
        3 => (0..=5usize).prop_map(Op::Resize),
        1 => Just(Op::Close),
        3 => Just(Op::Settle),
    ]
}

fn ops(waiter_n: BoxedStrategy<usize>) -> impl Strategy<Value = Vec<Op>> {
    vec(op(waiter_n), 0..=60)
}

fn config() -> ProptestConfig {
    proptest_config::cases(2000, 20)
}

proptest! {
    #![proptest_config(config())]

    /// Every operation, waiters of 0 to 4 permits, woken waiters run at once.
    #[test]
    fn eager_mixed(capacity in 1..=4usize, ops in ops(mixed_n())) {
        run(capacity, &ops, Rules { eager: true }).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// Single-permit waiters only, run as soon as woken: served in arrival order.
    #[test]
    fn eager_single_permit_fifo(capacity in 1..=4usize, ops in ops(single_n())) {
        run(capacity, &ops, Rules { eager: true }).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// Woken waiters run only on `Settle` (or when polled by index), so every
    /// operation also happens while wake-ups are in flight.
    #[test]
    fn lazy_mixed(capacity in 1..=4usize, ops in ops(mixed_n())) {
        run(capacity, &ops, Rules { eager: false }).map_err(|m| TestCaseError::fail(m.0))?;
    }

    /// A bound on waiters (0 to 3): refused at once at the bound, places
    /// given back by hand-offs, cancels, timeouts, shrinks and close, and
    /// the multi-permit rule kept at the bound.
    #[test]
    fn bounded_queue_eager(capacity in 1..=4usize, max in 0..=3usize, ops in ops(mixed_n())) {
        run_bounded(capacity, Some(max), &ops, Rules { eager: true })
            .map_err(|m| TestCaseError::fail(m.0))?;
    }

    #[test]
    fn bounded_queue_lazy(capacity in 1..=4usize, max in 0..=3usize, ops in ops(mixed_n())) {
        run_bounded(capacity, Some(max), &ops, Rules { eager: false })
            .map_err(|m| TestCaseError::fail(m.0))?;
    }
}

// ---------------------------------------------------------------------------
// Failures the model found, shrunk by hand to the few steps that matter.
// Each one fails against the library as it is.
// ---------------------------------------------------------------------------

/// A release of two permits when one waiter waits: the waiter is handed one,
/// the other stays free and the queue is empty, so a newcomer takes it at
/// once instead of queueing next to it (with the old wake-up queue, it
/// queued behind the woken waiter and was stranded next to the free permit).
/// Shrunk from `lazy_mixed`.
#[test]
fn regression_newcomer_queued_behind_a_woken_waiter_is_stranded() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 2, &clock);
    let both = bh.try_acquire_many(2).unwrap();
    let mut a = Task::pending(bh.acquire());
    drop(both);
    assert!(a.woken());
    assert_eq!((bh.available(), bh.waiting()), (1, 0));
    // `a` has not run yet, but its permit is already its own.
    let pb = futures_lite::future::block_on(bh.acquire()).unwrap();
    let pa = a.ready().unwrap();
    assert_eq!((bh.available(), bh.in_flight()), (0, 2));
    drop((pa, pb));
}

/// Two waiters for three permits with two free, one cancelled, then a
/// single-permit waiter: it must not sleep next to the two free permits
/// (with the old wake-up queue it did, once the state word repeated).
/// Now the big waiter keeps its place and the newcomer, which fits, takes
/// a free permit at once. Shrunk from `eager_mixed`.
#[test]
fn regression_pass_on_suppressed_when_the_word_repeats_strands_a_waiter() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 3, &clock);
    let one = bh.try_acquire().unwrap();
    let big1 = Task::pending(bh.acquire_many(3));
    let mut big2 = Task::pending(bh.acquire_many(3));
    // Nobody is woken for permits it cannot use.
    assert_eq!((big1.wakes(), big2.wakes()), (0, 0));
    drop(big1);
    assert_eq!((big2.wakes(), bh.waiting()), (0, 1));
    let p = futures_lite::future::block_on(bh.acquire()).unwrap();
    assert_eq!((bh.available(), bh.waiting()), (1, 1));
    big2.assert_pending();
    drop((p, one));
    assert_eq!(big2.ready().unwrap().count(), 3);
}

/// Single-permit waiters are not served in arrival order after a shrink. With
/// in flight above the capacity, a release that leaves no permit free still
/// wakes the first waiter; it finds nothing, queues again at the back, and
/// the next permit goes to the waiter that arrived after it. Fairness: "Waiters
/// are woken in the order they started waiting". Shrunk from
/// `eager_single_permit_fifo`.
#[test]
fn regression_a_release_below_capacity_sends_the_head_waiter_to_the_back() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 2, &clock);
    let p1 = bh.try_acquire().unwrap();
    let p2 = bh.try_acquire().unwrap();
    assert_eq!(bh.resize(1), Ok(2));
    let mut first = Task::pending(bh.acquire());
    let mut second = Task::pending(bh.acquire());
    drop(p1); // in flight 1, capacity 1: nothing free
    if first.woken() {
        first.assert_pending();
    }
    let (first_before, second_before) = (first.wakes(), second.wakes());
    drop(p2); // one permit free
    assert!(
        first.wakes() > first_before && second.wakes() == second_before,
        "the permit must go to the waiter that arrived first (wakes before the \
         release: first {first_before}, second {second_before}; after: first {}, second {})",
        first.wakes(),
        second.wakes()
    );
    let p = first.ready().unwrap();
    drop(p);
    drop(second.ready().unwrap());
}

/// A newcomer takes a permit on its first poll while a woken waiter, who
/// needs every free permit, has not run yet; the waiter then finds too few
/// and queues again at the back. The newcomer's registration saw the
/// "stranded" flag (left set from when the big waiter registered next to one
/// free permit) and woke "the first waiter to look" with an *additional*
/// notification; the only waiter was already notified, so the notification
/// went to the newcomer's own listener. Fairness: "a new `acquire*` queues
/// behind the others, even if a permit has just been released and the woken
/// waiter has not run yet". Shrunk from `lazy_mixed`.
#[test]
fn regression_newcomer_barges_past_a_woken_waiter() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 4, &clock);
    let three = bh.try_acquire_many(3).unwrap();
    let mut all = Task::pending(bh.acquire_many(4)); // queues next to 1 free permit
    drop(three); // 4 free: the waiter is woken for them
    assert!(all.woken());
    let mut newcomer = Task::new(bh.acquire());
    let first = newcomer.poll();
    let (available, waiting) = (bh.available(), bh.waiting());
    assert!(
        first.is_pending(),
        "a newcomer took a permit while a woken waiter for all four had not run \
         ({:?}; then available {available}, waiting {waiting})",
        first.map(|r| r.map(|p| p.count())),
    );
    assert_eq!(all.ready().unwrap().count(), 4);
}

/// A grow wakes every waiter; a newcomer arriving before they run must queue
/// behind them. (Holds at 5b5b158; fails with a grow that sets the stranded
/// flag, whose newcomer wake-up then lands on the newcomer's own listener,
/// as in `regression_newcomer_barges_past_a_woken_waiter`.) Shrunk from
/// `lazy_mixed`.
#[test]
fn regression_newcomer_queues_behind_waiters_woken_by_a_grow() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 1, &clock);
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire());
    assert_eq!(bh.resize(2), Ok(1));
    assert!(waiter.woken());
    let mut newcomer = Task::new(bh.acquire());
    let first = newcomer.poll();
    assert!(
        first.is_pending(),
        "a newcomer took the permit a grow freed for the woken waiter ({:?})",
        first.map(|r| r.map(|p| p.count())),
    );
    let p = waiter.ready().unwrap();
    drop((p, held));
    drop(newcomer.ready().unwrap());
}

// ---------------------------------------------------------------------------
// The adaptive bulkhead: the same permit accounting while an algorithm moves
// the capacity.
// ---------------------------------------------------------------------------

mod adaptive {
    use super::*;
    use watertight::limit::{AdaptiveBulkhead, Aimd, LimitAlgorithm, Signal, Window};

    const WINDOW: Duration = Duration::from_millis(10);

    #[derive(Clone, Debug)]
    enum Op {
        /// `try_acquire`, keeping the permit.
        TryAcquire,
        /// `record` a held permit with a signal.
        Record(usize, Signal),
        /// Drop a held permit without a verdict.
        Drop(usize),
        /// `ManualClock::advance` by this many milliseconds.
        Advance(u64),
        /// `tick`.
        Tick,
    }

    fn signal() -> impl Strategy<Value = Signal> {
        prop_oneof![
            4 => Just(Signal::Success),
            1 => Just(Signal::Failure),
            1 => Just(Signal::Dropped),
            1 => Just(Signal::Timeout),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::TryAcquire),
            4 => (any::<usize>(), signal()).prop_map(|(i, s)| Op::Record(i, s)),
            1 => any::<usize>().prop_map(Op::Drop),
            3 => (0u64..12).prop_map(Op::Advance),
            1 => Just(Op::Tick),
        ]
    }

    /// The window protocol as the docs state it, written out: samples add
    /// up until a record or tick at or past `opened + WINDOW` closes the
    /// window (the sample first), a window of at least one sample is handed
    /// to the algorithm, and the capacity becomes its answer.
    struct Model {
        alg: Aimd,
        opened: Duration,
        w: Window,
        rtt_sum_us: u64,
        capacity: usize,
    }

    impl Model {
        fn close_if_due(&mut self, now: Duration) {
            if now < self.opened + WINDOW {
                return;
            }
            self.opened = now;
            let mut w = std::mem::take(&mut self.w);
            w.avg_rtt = (w.successes > 0)
                .then(|| Duration::from_micros(self.rtt_sum_us / w.successes as u64));
            self.rtt_sum_us = 0;
            if w.samples() >= 1 {
                self.capacity = self.alg.update(&w);
            }
        }
    }

    fn run(ops: &[Op]) -> Result<(), TestCaseError> {
        let clock = ManualClock::new();
        let alg = Aimd::builder()
            .min_limit(1)
            .initial_limit(3)
            .max_limit(6)
            .build()
            .unwrap();
        let b = AdaptiveBulkhead::with_window("model", alg.clone(), WINDOW, 1, &clock);
        let mut m = Model {
            alg,
            opened: Duration::ZERO,
            w: Window::EMPTY,
            rtt_sum_us: 0,
            capacity: 3,
        };
        let mut held = Vec::new();
        for op in ops {
            let now = clock.now().since_origin();
            match op.clone() {
                Op::TryAcquire => {
                    let got = b.try_acquire();
                    prop_assert_eq!(got.is_ok(), held.len() < m.capacity, "{:?}", op);
                    if let Ok(p) = got {
                        held.push(p);
                    }
                }
                Op::Record(i, s) if !held.is_empty() => {
                    let p = held.swap_remove(i % held.len());
                    let rtt = now - p.started().since_origin();
                    m.w.max_in_flight = m.w.max_in_flight.max(held.len() + 1);
                    match s {
                        Signal::Success => {
                            m.w.successes += 1;
                            m.rtt_sum_us += rtt.as_micros() as u64;
                        }
                        Signal::Failure => m.w.failed += 1,
                        Signal::Dropped => m.w.dropped += 1,
                        Signal::Timeout => m.w.timed_out += 1,
                    }
                    p.record(s);
                    m.close_if_due(now);
                }
                Op::Drop(i) if !held.is_empty() => {
                    drop(held.swap_remove(i % held.len()));
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::Tick => {
                    b.tick();
                    m.close_if_due(now);
                }
                _ => {}
            }
            // No permit lost or invented while the limit moves.
            prop_assert_eq!(b.limit(), m.capacity, "after {:?}", op);
            prop_assert!((1..=6).contains(&b.limit()));
            prop_assert_eq!(b.bulkhead().in_flight(), held.len());
            prop_assert_eq!(
                b.bulkhead().available(),
                m.capacity.saturating_sub(held.len())
            );
        }
        drop(held);
        prop_assert_eq!(b.bulkhead().in_flight(), 0);
        prop_assert_eq!(b.bulkhead().available(), b.limit());
        Ok(())
    }

    proptest! {
        #![proptest_config(config())]

        /// Random calls, verdicts, cancellations and ticks on `ManualClock`:
        /// the limit follows the window protocol's model, and in flight and
        /// available follow the permits held, through every limit change.
        #[test]
        fn adaptive_limit_changes_keep_every_permit(ops in vec(op(), 1..120)) {
            run(&ops)?;
        }
    }
}
