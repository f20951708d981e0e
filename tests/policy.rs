#![cfg(not(loom))]
//! Deterministic tests of `Policy` on a `ManualClock`, through the public API
//! only: the order of the layers, slot waits, call timeouts, request budgets,
//! classifiers and cancellation.
//!
//! Each test drives policy calls by hand (`common::Task`), advancing the
//! clock between polls, so it can check the exact instant each layer answers,
//! which layer was asked, and what each one holds afterwards. Nothing sleeps.

mod common;

use std::cell::Cell;
use std::future::{pending, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use common::{now_or_never, Task};
use watertight::breaker::{BreakerField, State};
use watertight::clock::{Clock, ManualClock, Timer};
use watertight::deadline::Deadline;
use watertight::limit::{AdaptiveLimit, Aimd, Signal};
use watertight::policy::{Error, ErrorKind, Policy, PolicyConfig, PolicyConfigError, PolicyField};
use watertight::{BreakerConfig, Bulkhead, Outcome, Rejection};

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

// ---- helpers ---------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct Boom;

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}

impl std::error::Error for Boom {}

type Res = Result<u32, Boom>;

/// Sets a shared flag when dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// What a call did: whether it was started (its future made) and whether its
/// future was dropped.
#[derive(Clone, Default)]
struct Probe {
    started: Rc<Cell<bool>>,
    dropped: Rc<Cell<bool>>,
}

impl Probe {
    fn started(&self) -> bool {
        self.started.get()
    }
    fn dropped(&self) -> bool {
        self.dropped.get()
    }

    /// A call that never completes.
    fn hang(&self) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Res>>> + use<> {
        let started = Rc::clone(&self.started);
        let dropped = Rc::clone(&self.dropped);
        move || {
            started.set(true);
            let guard = DropFlag(dropped);
            Box::pin(async move {
                let _guard = guard;
                pending::<Res>().await
            })
        }
    }

    /// A call that completes with `value` once `gate` is set.
    fn gated(
        &self,
        gate: &Rc<Cell<bool>>,
        value: Res,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Res>>> + use<> {
        let started = Rc::clone(&self.started);
        let dropped = Rc::clone(&self.dropped);
        let gate = Rc::clone(gate);
        move || {
            started.set(true);
            let guard = DropFlag(dropped);
            Box::pin(async move {
                let _guard = guard;
                std::future::poll_fn(|_| {
                    if gate.get() {
                        Poll::Ready(value.clone())
                    } else {
                        Poll::Pending
                    }
                })
                .await
            })
        }
    }

    /// A call that answers `value` at once.
    fn answer(&self, value: Res) -> impl FnOnce() -> std::future::Ready<Res> + use<> {
        let started = Rc::clone(&self.started);
        move || {
            started.set(true);
            std::future::ready(value)
        }
    }
}

fn ok() -> impl Future<Output = Res> {
    std::future::ready(Ok(1))
}

/// Trips after two outcomes at 50 % failures; open 10 s; one probe.
fn small_breaker() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(2)
        .minimum_calls(2)
        .failure_rate_threshold(50.0)
        .open_duration(10 * SEC)
        .half_open_calls(1)
        .build()
        .unwrap()
}

fn config(max_concurrent: usize, max_wait: Duration, call_timeout: Duration) -> PolicyConfig {
    PolicyConfig::builder(max_concurrent)
        .max_wait(max_wait)
        .call_timeout(call_timeout)
        .breaker(small_breaker())
        .build()
        .unwrap()
}

fn policy<'c>(
    name: &'static str,
    clock: &'c ManualClock,
    max_concurrent: usize,
    max_wait: Duration,
    call_timeout: Duration,
) -> Policy<&'c ManualClock> {
    Policy::new(name, config(max_concurrent, max_wait, call_timeout), clock).unwrap()
}

/// Opens `p`'s breaker with two failed calls.
#[track_caller]
fn trip(p: &Policy<&ManualClock>) {
    for _ in 0..2 {
        let r = now_or_never(p.call(|| async { Err::<u32, _>(Boom) }));
        assert_eq!(r.unwrap_err().into_inner(), Some(Boom));
    }
    assert_eq!(p.breaker().state(), State::Open);
}

/// Trips `p` and waits out the open duration: the next call is a probe.
#[track_caller]
fn half_open(clock: &ManualClock, p: &Policy<&ManualClock>) {
    trip(p);
    clock.advance(10 * SEC);
    assert_eq!(p.breaker().state(), State::HalfOpen);
}

#[track_caller]
fn kind<T: std::fmt::Debug, E: std::fmt::Debug + Clone>(r: Result<T, Error<E>>) -> ErrorKind<E> {
    r.unwrap_err().kind().clone()
}

/// The bulkhead is back to its full capacity and nobody waits.
#[track_caller]
fn assert_all_slots_free(p: &Policy<&ManualClock>) {
    let b = p.bulkhead();
    assert_eq!(b.in_flight(), 0, "no slot held");
    assert_eq!(b.available(), b.capacity(), "every slot free");
    assert_eq!(b.waiting(), 0, "nobody waits");
}

// ---- layer order and permit return in each refusal path --------------------

#[test]
fn bulkhead_full_never_reaches_the_breaker() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    let _held = p.bulkhead().try_acquire().unwrap();

    let call = Probe::default();
    let r = now_or_never(p.call(call.answer(Ok(1))));
    let e = r.unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::BulkheadFull);
    assert_eq!(e.system(), "payments");
    assert!(!call.started());
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected), (0, 0), "the breaker was not asked");
    assert_eq!(p.bulkhead().metrics().rejected_full, 1);
}

#[test]
fn bulkhead_full_by_a_running_call_never_reaches_the_breaker() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    let first = Probe::default();
    let mut running = Task::pending(p.call(first.hang()));

    let second = Probe::default();
    assert_eq!(
        kind(now_or_never(p.call(second.answer(Ok(2))))),
        ErrorKind::BulkheadFull
    );
    assert!(!second.started());
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected), (0, 0));
    running.assert_pending();
}

#[test]
fn breaker_open_refuses_with_retry_after_and_gives_the_slot_back_at_once() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    trip(&p);
    clock.advance(4 * SEC);
    let accepted = p.bulkhead().metrics().accepted;

    let call = Probe::default();
    let e = now_or_never(p.call(call.answer(Ok(1)))).unwrap_err();
    assert_eq!(
        *e.kind(),
        ErrorKind::CircuitOpen(Rejection::Open {
            retry_after: 6 * SEC
        })
    );
    assert_eq!(e.retry_after(), Some(6 * SEC));
    assert!(!call.started());
    // The bulkhead was asked first (outside) and its slot is back already.
    assert_eq!(p.bulkhead().metrics().accepted, accepted + 1);
    assert_eq!(p.bulkhead().in_flight(), 0);
    let again = p.bulkhead().try_acquire();
    assert!(again.is_ok(), "another call can take the only slot");
    drop(again);
    assert_eq!(p.breaker().metrics().rejected, 1);
}

#[test]
fn breaker_forced_open_refuses_without_retry_after_and_gives_the_slot_back() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    p.breaker().force_open();
    let e = now_or_never(p.call(ok)).unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    assert_eq!(e.retry_after(), None);
    assert_all_slots_free(&p);
}

#[test]
fn bulkhead_closed_refuses_and_never_reaches_the_breaker() {
    let clock = ManualClock::new();
    for max_wait in [Duration::ZERO, 100 * MS] {
        let p = policy("payments", &clock, 2, max_wait, SEC);
        p.bulkhead().close();
        let call = Probe::default();
        let e = now_or_never(p.call(call.answer(Ok(1)))).unwrap_err();
        assert_eq!(
            *e.kind(),
            ErrorKind::BulkheadClosed,
            "max_wait {max_wait:?}"
        );
        assert!(e.is_unavailable());
        assert!(!call.started());
        let m = p.breaker().metrics();
        assert_eq!((m.calls, m.rejected), (0, 0));
    }
}

#[test]
fn slot_wait_gets_the_slot_released_within_the_wait() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let gate = Rc::new(Cell::new(false));
    let holder = Probe::default();
    let mut holding = Task::pending(p.call(holder.gated(&gate, Ok(1))));

    let waiter = Probe::default();
    let mut waiting = Task::pending(p.call(waiter.answer(Ok(2))));
    assert_eq!(p.bulkhead().waiting(), 1);
    assert!(!waiter.started());

    clock.advance(60 * MS);
    waiting.assert_pending();
    gate.set(true);
    assert_eq!(holding.ready(), Ok(1));
    assert!(waiting.woken(), "the release wakes the waiting call");
    assert_eq!(waiting.ready(), Ok(2));
    assert!(waiter.started());
    assert_all_slots_free(&p);
    assert_eq!(p.breaker().metrics().calls, 2);
}

#[test]
fn slot_wait_ends_with_bulkhead_full_at_exactly_max_wait() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let _held = p.bulkhead().try_acquire().unwrap();

    let call = Probe::default();
    let mut waiting = Task::pending(p.call(call.answer(Ok(1))));
    clock.advance(100 * MS - US);
    waiting.assert_pending();
    clock.advance(US);
    assert!(waiting.woken());
    assert_eq!(kind(waiting.ready()), ErrorKind::BulkheadFull);
    assert!(!call.started());
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected), (0, 0));
    assert_eq!(p.bulkhead().metrics().rejected_timed_out, 1);
    assert_eq!(p.bulkhead().waiting(), 0);
}

#[test]
fn a_long_max_wait_allowed_explicitly_is_waited() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(1)
        .max_wait(3 * SEC)
        .allow_long_max_wait()
        .build()
        .unwrap();
    let p: Policy<_> = Policy::new("batch", config, &clock).unwrap();
    let _held = p.bulkhead().try_acquire().unwrap();
    let mut waiting = Task::pending(p.call(ok));
    clock.advance(3 * SEC - US);
    waiting.assert_pending();
    clock.advance(US);
    assert_eq!(kind(waiting.ready()), ErrorKind::BulkheadFull);
}

// ---- a timeout releases both layers and records a failure -------------------

#[test]
fn call_timeout_releases_both_layers_and_records_a_failure() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    let call = Probe::default();
    let mut running = Task::pending(p.call(call.hang()));
    assert_eq!(p.bulkhead().in_flight(), 1);

    clock.advance(SEC - US);
    running.assert_pending();
    clock.advance(US);
    assert!(running.woken());
    let e = running.ready().unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::DeadlineExceeded);
    assert!(call.dropped(), "the call is dropped when its time runs out");
    assert_eq!(p.bulkhead().in_flight(), 0);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1));
    drop(running);
}

#[test]
fn call_timeouts_open_the_breaker() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    let (a, b) = (Probe::default(), Probe::default());
    let mut first = Task::pending(p.call(a.hang()));
    let mut second = Task::pending(p.call(b.hang()));
    clock.advance(SEC);
    assert_eq!(kind(first.ready()), ErrorKind::DeadlineExceeded);
    assert_eq!(kind(second.ready()), ErrorKind::DeadlineExceeded);
    assert_eq!(p.breaker().state(), State::Open);
    assert_all_slots_free(&p);
    assert_eq!(
        now_or_never(p.call(ok)).unwrap_err().retry_after(),
        Some(10 * SEC)
    );
}

#[test]
fn a_half_open_probe_that_times_out_reopens_and_frees_its_slot_for_the_next_episode() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    half_open(&clock, &p);
    let probe = Probe::default();
    let mut running = Task::pending(p.call(probe.hang()));
    // The only probe is out.
    assert_eq!(
        kind(now_or_never(p.call(ok))),
        ErrorKind::CircuitOpen(Rejection::ProbesBusy)
    );
    assert_eq!(
        p.bulkhead().in_flight(),
        1,
        "the refused call's slot is back"
    );

    clock.advance(SEC);
    assert_eq!(kind(running.ready()), ErrorKind::DeadlineExceeded);
    assert!(probe.dropped());
    assert_all_slots_free(&p);
    assert_eq!(p.breaker().state(), State::Open, "a failed probe reopens");
    assert_eq!(p.breaker().metrics().failed_calls, 1);

    clock.advance(10 * SEC);
    assert_eq!(now_or_never(p.call(ok)), Ok(1), "a new probe passes");
    assert_eq!(p.breaker().state(), State::Closed);
}

// ---- budget propagation ----------------------------------------------------

#[test]
fn a_budget_smaller_than_max_wait_ends_the_slot_wait() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let _held = p.bulkhead().try_acquire().unwrap();
    let budget = Deadline::after(&clock, 40 * MS);

    let call = Probe::default();
    let mut waiting = Task::pending(p.call_within(&budget, call.answer(Ok(1))));
    clock.advance(40 * MS - US);
    waiting.assert_pending();
    clock.advance(US);
    assert_eq!(kind(waiting.ready()), ErrorKind::BulkheadFull);
    assert!(!call.started());
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected), (0, 0));
}

#[test]
fn a_budget_smaller_than_call_timeout_ends_the_call_and_records_nothing() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let budget = Deadline::after(&clock, 300 * MS);
    let call = Probe::default();
    let mut running = Task::pending(p.call_within(&budget, call.hang()));

    clock.advance(300 * MS - US);
    running.assert_pending();
    clock.advance(US);
    assert_eq!(kind(running.ready()), ErrorKind::DeadlineExceeded);
    assert!(call.dropped());
    assert_all_slots_free(&p);
    let m = p.breaker().metrics();
    assert_eq!(
        (m.calls, m.failed_calls),
        (0, 0),
        "the caller ran out, not the system"
    );
}

#[test]
fn a_budget_equal_to_call_timeout_counts_as_the_call_timeout() {
    // The docs: the budget decides only when what remains is *less* than the
    // call timeout.
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let budget = Deadline::after(&clock, SEC);
    let mut running = Task::pending(p.call_within(&budget, Probe::default().hang()));
    clock.advance(SEC);
    assert_eq!(kind(running.ready()), ErrorKind::DeadlineExceeded);
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn the_slot_wait_and_the_call_share_one_budget() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let gate = Rc::new(Cell::new(false));
    let mut holding = Task::pending(p.call(Probe::default().gated(&gate, Ok(0))));
    let budget = Deadline::after(&clock, 300 * MS);
    let call = Probe::default();
    let mut waiting = Task::pending(p.call_within(&budget, call.hang()));

    clock.advance(80 * MS);
    gate.set(true);
    assert_eq!(holding.ready(), Ok(0));
    waiting.assert_pending();
    assert!(
        call.started(),
        "the slot came free at 80 ms and the call began"
    );

    // The call gets what is left of the budget (220 ms), not 300 ms more.
    clock.advance(220 * MS - US);
    waiting.assert_pending();
    clock.advance(US);
    assert_eq!(kind(waiting.ready()), ErrorKind::DeadlineExceeded);
    assert_all_slots_free(&p);
    let m = p.breaker().metrics();
    assert_eq!(
        (m.calls, m.failed_calls),
        (1, 0),
        "only the holder's success"
    );
}

#[test]
fn a_budget_spent_before_the_call_never_starts_it_and_records_nothing() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let spent = Deadline::after(&clock, 10 * MS);
    clock.advance(10 * MS);

    let call = Probe::default();
    let e = now_or_never(p.call_within(&spent, call.answer(Ok(1)))).unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::DeadlineExceeded);
    assert!(!call.started());
    assert_all_slots_free(&p);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls, m.rejected), (0, 0, 0));
}

#[test]
fn a_slot_granted_as_the_budget_runs_out_does_not_start_the_call() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let gate = Rc::new(Cell::new(false));
    let mut holding = Task::pending(p.call(Probe::default().gated(&gate, Ok(0))));
    let budget = Deadline::after(&clock, 50 * MS);
    let call = Probe::default();
    let mut waiting = Task::pending(p.call_within(&budget, call.answer(Ok(1))));

    clock.advance(50 * MS);
    gate.set(true);
    assert_eq!(holding.ready(), Ok(0));
    // The slot is free and the budget is spent: either way, no call.
    let k = kind(waiting.ready());
    assert_eq!(k, ErrorKind::DeadlineExceeded);
    assert!(!call.started());
    assert_all_slots_free(&p);
    assert_eq!(p.breaker().metrics().calls, 1, "only the holder's success");
}

#[test]
fn a_spent_budget_in_half_open_gives_the_probe_slot_back() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    half_open(&clock, &p);
    let spent = Deadline::after(&clock, Duration::ZERO);
    assert_eq!(
        kind(now_or_never(p.call_within(&spent, ok))),
        ErrorKind::DeadlineExceeded
    );
    assert_eq!(p.breaker().state(), State::HalfOpen);
    assert_eq!(now_or_never(p.call(ok)), Ok(1), "the probe slot is free");
    assert_eq!(p.breaker().state(), State::Closed);
}

#[test]
fn a_half_open_probe_cut_by_the_budget_gives_its_slot_back() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    half_open(&clock, &p);
    let budget = Deadline::after(&clock, 200 * MS);
    let mut probe = Task::pending(p.call_within(&budget, Probe::default().hang()));
    clock.advance(200 * MS);
    assert_eq!(kind(probe.ready()), ErrorKind::DeadlineExceeded);
    assert_eq!(p.breaker().state(), State::HalfOpen, "recorded as nothing");
    assert_eq!(p.breaker().metrics().failed_calls, 0);
    assert_all_slots_free(&p);
    assert_eq!(now_or_never(p.call(ok)), Ok(1), "another probe passes");
    assert_eq!(p.breaker().state(), State::Closed);
}

#[test]
fn child_deadlines_passed_to_call_within_cap_the_call() {
    let clock = ManualClock::new();
    let p = policy("inventory", &clock, 4, 100 * MS, 30 * SEC);
    let request = Deadline::after(&clock, 1500 * MS);

    // A child asking for less than the request ends first: at 1 s.
    let step = request.child(SEC);
    let mut first = Task::pending(p.call_within(&step, Probe::default().hang()));
    clock.advance(SEC - US);
    first.assert_pending();
    clock.advance(US);
    assert_eq!(kind(first.ready()), ErrorKind::DeadlineExceeded);

    // At 1.2 s a child asking for 1 s more ends with the request, at 1.5 s.
    clock.advance(200 * MS);
    let step = request.child(SEC);
    let mut second = Task::pending(p.call_within(&step, Probe::default().hang()));
    clock.advance(300 * MS - US);
    second.assert_pending();
    clock.advance(US);
    assert_eq!(kind(second.ready()), ErrorKind::DeadlineExceeded);

    // Both were cut by the caller's budget: nothing recorded.
    assert_eq!(p.breaker().metrics().calls, 0);
    assert_all_slots_free(&p);
}

#[test]
fn a_call_timeout_shorter_than_the_child_deadline_wins_and_is_a_failure() {
    let clock = ManualClock::new();
    let p = policy("inventory", &clock, 4, 100 * MS, 200 * MS);
    let request = Deadline::after(&clock, 1500 * MS);
    let step = request.child(SEC);
    let mut call = Task::pending(p.call_within(&step, Probe::default().hang()));
    clock.advance(200 * MS - US);
    call.assert_pending();
    clock.advance(US);
    assert_eq!(kind(call.ready()), ErrorKind::DeadlineExceeded);
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn call_within_a_generous_budget_returns_the_answer() {
    let clock = ManualClock::new();
    let p = policy("inventory", &clock, 4, 100 * MS, SEC);
    let request = Deadline::after(&clock, 1500 * MS);
    assert_eq!(now_or_never(p.call_within(&request, ok)), Ok(1));
    assert_eq!(
        now_or_never(p.call_within(&Deadline::never(&clock), ok)),
        Ok(1)
    );
    assert_eq!(p.breaker().metrics().calls, 2);
}

// ---- classifier ------------------------------------------------------------

fn status_classifier(r: &Result<u16, Boom>) -> Outcome {
    match r {
        Ok(s) if *s >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Success,
    }
}

#[test]
fn classifier_ok_503_is_a_failure_and_still_returned() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let r = now_or_never(p.call_with(|| async { Ok::<u16, Boom>(503) }, status_classifier));
    assert_eq!(r, Ok(503));
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1));
}

#[test]
fn classifier_err_as_success_still_returns_the_error() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let e = now_or_never(p.call_with(|| async { Err::<u16, Boom>(Boom) }, status_classifier))
        .unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::Call(Boom));
    assert!(!e.is_unavailable());
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 0));
}

#[test]
fn classifier_ignored_records_nothing() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let r = now_or_never(p.call_with(|| async { Ok::<u16, Boom>(400) }, |_| Outcome::Ignored));
    assert_eq!(r, Ok(400));
    assert_eq!(p.breaker().metrics().calls, 0);
}

#[test]
fn classifier_with_a_budget() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let request = Deadline::after(&clock, 500 * MS);
    let r = now_or_never(p.call_within_with(
        &request,
        || async { Ok::<u16, Boom>(502) },
        status_classifier,
    ));
    assert_eq!(r, Ok(502));
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn default_classifier_err_is_a_failure_ok_a_success() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    assert_eq!(now_or_never(p.call(ok)), Ok(1));
    let e = now_or_never(p.call(|| async { Err::<u32, _>(Boom) })).unwrap_err();
    assert_eq!(e.into_inner(), Some(Boom));
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (2, 1));
}

// ---- cancellation at every await point --------------------------------------

#[test]
fn cancelling_while_waiting_for_a_slot_loses_no_permit() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let held = p.bulkhead().try_acquire().unwrap();
    let call = Probe::default();
    let waiting = Task::pending(p.call(call.answer(Ok(1))));
    assert_eq!(p.bulkhead().waiting(), 1);
    clock.advance(50 * MS);
    drop(waiting);
    assert_eq!(p.bulkhead().waiting(), 0);
    drop(held);

    assert!(!call.started());
    assert_all_slots_free(&p);
    assert_eq!(p.bulkhead().metrics().cancelled_waits, 1);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected), (0, 0));
    assert_eq!(now_or_never(p.call(ok)), Ok(1));
}

#[test]
fn cancelling_while_the_call_runs_loses_no_permit_and_records_nothing() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    let call = Probe::default();
    let running = Task::pending(p.call(call.hang()));
    assert_eq!(p.bulkhead().in_flight(), 1);
    clock.advance(500 * MS);
    drop(running);
    assert!(call.dropped());
    assert_all_slots_free(&p);
    assert_eq!(p.breaker().metrics().calls, 0);
}

#[test]
fn cancelling_a_running_half_open_probe_frees_the_probe_slot() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 2, 100 * MS, SEC);
    half_open(&clock, &p);
    let probe = Probe::default();
    let running = Task::pending(p.call(probe.hang()));
    assert_eq!(
        kind(now_or_never(p.call(ok))),
        ErrorKind::CircuitOpen(Rejection::ProbesBusy)
    );
    drop(running);
    assert!(probe.dropped());
    assert_all_slots_free(&p);
    assert_eq!(p.breaker().state(), State::HalfOpen);
    assert_eq!(now_or_never(p.call(ok)), Ok(1), "another probe is admitted");
    assert_eq!(p.breaker().state(), State::Closed);
}

#[test]
fn cancelling_a_half_open_call_waiting_for_a_slot_takes_no_probe() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    half_open(&clock, &p);
    let held = p.bulkhead().try_acquire().unwrap();
    let waiting = Task::pending(p.call(ok));
    drop(waiting);
    drop(held);
    assert_all_slots_free(&p);
    assert_eq!(
        now_or_never(p.call(ok)),
        Ok(1),
        "the probe slot was never taken"
    );
    assert_eq!(p.breaker().state(), State::Closed);
}

#[test]
fn cancelling_a_call_before_its_first_poll_takes_nothing() {
    let clock = ManualClock::new();
    let p = policy("payments", &clock, 1, 100 * MS, SEC);
    let call = Probe::default();
    drop(p.call(call.answer(Ok(1))));
    assert!(!call.started());
    assert_all_slots_free(&p);
    assert_eq!(p.bulkhead().metrics().accepted, 0);
}

// ---- error API -------------------------------------------------------------

#[test]
fn error_api_for_each_kind() {
    let clock = ManualClock::new();
    let mut errors: Vec<(Error<Boom>, bool, Option<Duration>)> = Vec::new();

    // BulkheadFull.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    let held = p.bulkhead().try_acquire().unwrap();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    drop(held);
    // BulkheadClosed.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    p.bulkhead().close();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    // CircuitOpen(Open), retry_after the whole open wait.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    trip(&p);
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, Some(10 * SEC)));
    // CircuitOpen(ForcedOpen).
    p.breaker().force_open();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    // CircuitOpen(ProbesBusy).
    let p = policy("payments", &clock, 2, Duration::ZERO, SEC);
    half_open(&clock, &p);
    let probe = Task::pending(p.call(Probe::default().hang()));
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    drop(probe);
    // DeadlineExceeded.
    let spent = Deadline::after(&clock, Duration::ZERO);
    errors.push((
        now_or_never(p.call_within(&spent, ok)).unwrap_err(),
        true,
        None,
    ));
    // Call.
    errors.push((
        now_or_never(p.call(|| async { Err::<u32, _>(Boom) })).unwrap_err(),
        false,
        None,
    ));

    let kinds: Vec<_> = errors.iter().map(|(e, _, _)| e.kind().clone()).collect();
    assert!(matches!(kinds[0], ErrorKind::BulkheadFull));
    assert!(matches!(kinds[1], ErrorKind::BulkheadClosed));
    assert!(matches!(
        kinds[2],
        ErrorKind::CircuitOpen(Rejection::Open { .. })
    ));
    assert!(matches!(
        kinds[3],
        ErrorKind::CircuitOpen(Rejection::ForcedOpen)
    ));
    assert!(matches!(
        kinds[4],
        ErrorKind::CircuitOpen(Rejection::ProbesBusy)
    ));
    assert!(matches!(kinds[5], ErrorKind::DeadlineExceeded));
    assert!(matches!(kinds[6], ErrorKind::Call(Boom)));

    for (e, unavailable, retry_after) in errors {
        let kind = e.kind().clone();
        assert_eq!(e.is_unavailable(), unavailable, "{kind:?}");
        assert_eq!(e.retry_after(), retry_after, "{kind:?}");
        assert_eq!(e.system(), "payments", "{kind:?}");
        let shown = e.to_string();
        assert!(shown.contains("payments"), "{shown}");
        if unavailable {
            assert!(shown.contains("unavailable"), "{shown}");
        }
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        match &kind {
            ErrorKind::Call(_) => assert_eq!(source.as_deref(), Some("boom")),
            ErrorKind::CircuitOpen(r) => assert_eq!(source, Some(r.to_string())),
            _ => assert_eq!(source, None, "{kind:?}"),
        }
        let inner = e.into_inner();
        assert_eq!(inner.is_some(), !unavailable, "{kind:?}");
    }
}

#[test]
fn error_display_per_kind() {
    let clock = ManualClock::new();
    let p = policy("inventory", &clock, 1, Duration::ZERO, SEC);
    let held = p.bulkhead().try_acquire().unwrap();
    assert_eq!(
        now_or_never(p.call(ok)).unwrap_err().to_string(),
        "inventory unavailable: bulkhead full"
    );
    drop(held);
    assert_eq!(
        now_or_never(p.call(|| async { Err::<u32, _>(Boom) }))
            .unwrap_err()
            .to_string(),
        "inventory: boom"
    );
    let spent = Deadline::after(&clock, Duration::ZERO);
    assert_eq!(
        now_or_never(p.call_within(&spent, ok))
            .unwrap_err()
            .to_string(),
        "inventory unavailable: deadline exceeded"
    );
}

// ---- sizing and config checks ----------------------------------------------

fn max_concurrent_for_pool(pool: usize) -> usize {
    PolicyConfig::for_pool(pool)
        .build()
        .unwrap()
        .max_concurrent()
}

#[test]
fn for_pool_takes_four_fifths_rounded_down_at_least_one() {
    assert_eq!(max_concurrent_for_pool(10), 8);
    assert_eq!(max_concurrent_for_pool(1), 1);
    assert_eq!(max_concurrent_for_pool(7), 5);
    assert_eq!(max_concurrent_for_pool(2), 1);
    assert_eq!(max_concurrent_for_pool(3), 2);
    assert_eq!(max_concurrent_for_pool(4), 3);
    assert_eq!(max_concurrent_for_pool(5), 4);
    assert_eq!(max_concurrent_for_pool(100), 80);
    for pool in 1..=2_000usize {
        let want = ((pool as u128 * 4) / 5).max(1) as usize;
        assert_eq!(max_concurrent_for_pool(pool), want, "pool {pool}");
    }
}

#[test]
fn for_pool_of_zero_is_refused_as_the_pool_size() {
    let e = PolicyConfig::for_pool(0).build().unwrap_err();
    assert_eq!(e, PolicyConfigError::PoolSizeZero);
    assert_eq!(e.field(), PolicyField::PoolSize);
    assert_eq!(e.field().name(), "pool_size");
    assert_eq!(e.to_string(), "pool_size must not be zero");
    // Refined further, still refused: the size is checked by `build`.
    let e = PolicyConfig::for_pool(0)
        .call_timeout(SEC)
        .max_wait(Duration::ZERO)
        .build();
    assert_eq!(e, Err(PolicyConfigError::PoolSizeZero));
    // `builder(0)` is the other setting's error.
    let e = PolicyConfig::builder(0).build().unwrap_err();
    assert_eq!(e.field(), PolicyField::MaxConcurrent);
}

#[test]
fn policy_fields_are_an_enum_with_the_builders_names() {
    let clock = ManualClock::new();
    let over = Bulkhead::<()>::MAX_PERMITS + 1;
    let cases = [
        (
            PolicyConfig::builder(0).build().unwrap_err(),
            PolicyField::MaxConcurrent,
            "max_concurrent",
        ),
        (
            PolicyConfig::builder(over).build().unwrap_err(),
            PolicyField::MaxConcurrent,
            "max_concurrent",
        ),
        (
            PolicyConfig::for_pool(0).build().unwrap_err(),
            PolicyField::PoolSize,
            "pool_size",
        ),
        (
            PolicyConfig::builder(1)
                .max_wait(2 * SEC)
                .build()
                .unwrap_err(),
            PolicyField::MaxWait,
            "max_wait",
        ),
        (
            PolicyConfig::builder(1)
                .call_timeout(Duration::ZERO)
                .build()
                .unwrap_err(),
            PolicyField::CallTimeout,
            "call_timeout",
        ),
        (
            Policy::<_, 16>::new("x", PolicyConfig::builder(1).build().unwrap(), &clock)
                .unwrap_err(),
            PolicyField::Breaker(BreakerField::WindowSize),
            "window_size",
        ),
    ];
    for (e, field, name) in cases {
        assert_eq!(e.field(), field, "{e}");
        assert_eq!(e.field().name(), name);
        assert_eq!(e.field().to_string(), name);
        assert_eq!(e.field(), name);
    }
}

#[test]
fn for_pool_of_a_huge_pool_does_not_overflow() {
    let err = PolicyConfig::for_pool(usize::MAX).build().unwrap_err();
    assert_eq!(err.field(), "max_concurrent");
    let cap = Bulkhead::<()>::MAX_PERMITS;
    // The largest pool that still fits.
    let pool = cap / 4 * 5;
    let got = max_concurrent_for_pool(pool);
    assert_eq!(got as u128, (pool as u128 * 4) / 5);
}

#[test]
fn builder_defaults() {
    let c = PolicyConfig::builder(3).build().unwrap();
    assert_eq!(c.max_concurrent(), 3);
    assert_eq!(c.max_wait(), 100 * MS);
    assert_eq!(c.call_timeout(), 30 * SEC);
    assert_eq!(*c.breaker(), BreakerConfig::DEFAULT);
}

#[test]
fn max_wait_of_one_second_is_accepted_one_nanosecond_more_is_refused() {
    let c = PolicyConfig::builder(1).max_wait(SEC).build().unwrap();
    assert_eq!(c.max_wait(), SEC);
    let over = SEC + Duration::from_nanos(1);
    let e = PolicyConfig::builder(1).max_wait(over).build().unwrap_err();
    assert_eq!(e.field(), "max_wait");
    assert_eq!(e, PolicyConfigError::MaxWaitTooLong { max_wait: over });
    assert!(e.to_string().contains("allow_long_max_wait"), "{e}");

    let c = PolicyConfig::builder(1)
        .max_wait(over)
        .allow_long_max_wait()
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), over);
    let c = PolicyConfig::builder(1)
        .allow_long_max_wait()
        .max_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), Duration::from_secs(60));
}

#[test]
fn zero_max_wait_is_accepted() {
    let c = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), Duration::ZERO);
}

#[test]
fn zero_call_timeout_is_refused() {
    let e = PolicyConfig::builder(1)
        .call_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e, PolicyConfigError::CallTimeoutZero);
    assert_eq!(e.field(), "call_timeout");
}

#[test]
fn zero_max_concurrent_is_refused() {
    let e = PolicyConfig::builder(0).build().unwrap_err();
    assert_eq!(e, PolicyConfigError::MaxConcurrentZero);
    assert_eq!(e.field(), "max_concurrent");
}

#[test]
fn max_concurrent_above_the_bulkhead_limit_is_refused() {
    let over = Bulkhead::<()>::MAX_PERMITS.checked_add(1).unwrap();
    let e = PolicyConfig::builder(over).build().unwrap_err();
    assert_eq!(e.field(), "max_concurrent");
    assert!(PolicyConfig::builder(Bulkhead::<()>::MAX_PERMITS)
        .build()
        .is_ok());
}

#[test]
fn policy_new_refuses_a_breaker_window_above_n() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4).build().unwrap(); // window 50
    let e = Policy::<_, 16>::new("x", config, &clock).unwrap_err();
    assert_eq!(e.field(), "window_size");
    assert!(matches!(e, PolicyConfigError::Breaker(_)));

    let fits = BreakerConfig::builder().window_size(16).build().unwrap();
    let config = PolicyConfig::builder(4).breaker(fits).build().unwrap();
    let p = Policy::<_, 16>::new("x", config, &clock).unwrap();
    assert_eq!(p.name(), "x");
    assert_eq!(p.bulkhead().capacity(), 4);
    assert_eq!(p.breaker().name(), "x");
}

// ---- isolation (item 5) ----------------------------------------------------

#[test]
fn a_hanging_system_does_not_affect_another() {
    let clock = ManualClock::new();
    let payments = policy("payments", &clock, 2, 50 * MS, SEC);
    let inventory = policy("inventory", &clock, 2, 50 * MS, SEC);
    let mut inventory_calls = 0;

    // Payments hangs: two calls fill its bulkhead.
    let hung: Vec<Probe> = vec![Probe::default(), Probe::default()];
    let mut hanging: Vec<_> = hung
        .iter()
        .map(|h| Task::pending(payments.call(h.hang())))
        .collect();
    assert_eq!(payments.bulkhead().in_flight(), 2);

    // A third payments caller waits no longer than max_wait...
    let third = Probe::default();
    let mut waiting = Task::pending(payments.call(third.answer(Ok(3))));

    // ...while inventory answers at once, and a slow inventory call finishes
    // on its own time.
    for _ in 0..5 {
        assert_eq!(now_or_never(inventory.call(ok)), Ok(1));
        inventory_calls += 1;
    }
    let timer = &clock;
    let slow_at = timer.now() + 20 * MS;
    let mut slow = Task::pending(inventory.call(|| async move {
        timer.sleep_until(slow_at).await;
        Ok::<u32, Boom>(20)
    }));
    clock.advance(20 * MS);
    assert_eq!(slow.ready(), Ok(20));
    inventory_calls += 1;
    waiting.assert_pending();

    clock.advance(30 * MS - US);
    waiting.assert_pending();
    clock.advance(US);
    assert_eq!(
        kind(waiting.ready()),
        ErrorKind::BulkheadFull,
        "at 50 ms exactly"
    );
    assert!(!third.started());
    for _ in 0..5 {
        assert_eq!(now_or_never(inventory.call(ok)), Ok(1));
        inventory_calls += 1;
    }
    for t in &mut hanging {
        t.assert_pending();
    }

    // At 1 s the hanging calls time out: two failures open payments' breaker.
    clock.advance(SEC - 50 * MS);
    for t in &mut hanging {
        assert_eq!(kind(t.ready()), ErrorKind::DeadlineExceeded);
    }
    assert!(hung.iter().all(Probe::dropped));
    assert_eq!(payments.breaker().state(), State::Open);
    assert_eq!(payments.breaker().metrics().failed_calls, 2);
    assert_all_slots_free(&payments);

    // Payments now refuses at once with a hint; inventory still answers.
    let e = now_or_never(payments.call(ok)).unwrap_err();
    assert!(e.is_unavailable());
    assert_eq!(e.system(), "payments");
    assert_eq!(e.retry_after(), Some(10 * SEC));
    for _ in 0..5 {
        assert_eq!(now_or_never(inventory.call(ok)), Ok(1));
        inventory_calls += 1;
    }

    let m = inventory.breaker().metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!((m.failed_calls, m.rejected), (0, 0));
    // The window holds 2 outcomes; every call was admitted by the bulkhead.
    let b = inventory.bulkhead().metrics();
    assert_eq!(b.accepted, inventory_calls);
    assert_eq!(b.rejected(), 0);
    assert_eq!(b.in_flight, 0);
    assert_eq!(b.peak_in_flight, 1);
    drop(hanging);
}

// ---- an adaptive limit steering the policy's bulkhead ----------------------

/// AIMD in `[1, 10]` from `initial`, every call a window of its own.
fn steering(clock: &ManualClock, initial: usize) -> AdaptiveLimit<Aimd> {
    let aimd = Aimd::builder()
        .min_limit(1)
        .max_limit(10)
        .initial_limit(initial)
        .build()
        .unwrap();
    AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now())
}

fn success_or_failure(r: &Res) -> Signal {
    if r.is_ok() {
        Signal::Success
    } else {
        Signal::Failure
    }
}

#[test]
fn call_adaptive_times_the_call_and_grows_the_limit_on_success() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let gate = Rc::new(Cell::new(false));
    let call = Probe::default();
    let mut running =
        Task::pending(p.call_adaptive(&limit, call.gated(&gate, Ok(7)), success_or_failure));
    clock.advance(30 * MS);
    gate.set(true);
    assert_eq!(running.ready(), Ok(7));
    let w = limit.last_window();
    assert_eq!(
        (w.successes, w.avg_rtt, w.max_in_flight),
        (1, Some(30 * MS), 1)
    );
    // One in flight of a limit of one: AIMD adds one, and the policy's
    // bulkhead takes two now.
    assert_eq!(p.bulkhead().capacity(), 2);
    assert_eq!(limit.windows(), 1);
    assert_eq!(p.breaker().metrics().failed_calls, 0);
}

#[test]
fn call_adaptive_counts_a_cut_call_as_a_timeout_and_backs_off() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 10, 100 * MS, SEC);
    let limit = steering(&clock, 10);
    let call = Probe::default();
    let mut running = Task::pending(p.call_adaptive(&limit, call.hang(), |_| {
        unreachable!("a call cut at its timeout has no result to classify")
    }));
    clock.advance(SEC);
    assert_eq!(kind(running.ready()), ErrorKind::DeadlineExceeded);
    let w = limit.last_window();
    assert_eq!((w.timed_out, w.successes, w.avg_rtt), (1, 0, None));
    assert_eq!(p.bulkhead().capacity(), 9, "10 x 0.9 after a timeout");
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn call_adaptive_records_a_drop_as_congestion_and_a_failure_for_the_breaker() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 10, 100 * MS, SEC);
    let limit = steering(&clock, 10);
    let r = now_or_never(p.call_adaptive(
        &limit,
        || async { Err::<u32, _>(Boom) },
        |_| Signal::Dropped,
    ));
    assert_eq!(r.unwrap_err().into_inner(), Some(Boom));
    assert_eq!(limit.last_window().dropped, 1);
    assert_eq!(p.bulkhead().capacity(), 9);
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn call_adaptive_records_nothing_for_a_call_that_never_started() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let classify = |_: &Res| -> Signal { unreachable!("a refused call has no result") };

    // Refused by the bulkhead after its slot wait.
    let held = p.bulkhead().try_acquire().unwrap();
    let mut waiting = Task::pending(p.call_adaptive(&limit, ok, classify));
    clock.advance(100 * MS);
    assert_eq!(kind(waiting.ready()), ErrorKind::BulkheadFull);
    drop(held);

    // Refused by the open breaker.
    trip(&p);
    let r = now_or_never(p.call_adaptive(&limit, ok, classify));
    assert!(matches!(r.unwrap_err().kind(), ErrorKind::CircuitOpen(_)));

    // No window closed, so the limit never saw a (fast) refusal.
    assert_eq!(limit.windows(), 0);
    assert_eq!(p.bulkhead().capacity(), 1);
}

#[test]
fn call_adaptive_futures_are_send() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let r = now_or_never(send(p.call_adaptive(
        &limit,
        || async { Ok::<u32, Boom>(1) },
        success_or_failure,
    )));
    assert_eq!(r, Ok(1));
}
