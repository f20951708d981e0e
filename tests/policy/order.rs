//! The order of the layers, the permit each refusal path gives back, and
//! a call timeout that releases both layers and records a failure.

use super::*;

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
