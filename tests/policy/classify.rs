//! Classifiers, and cancellation at every await point.

use super::*;

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
