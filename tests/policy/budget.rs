//! Request budgets: the slot wait and the call timeout inside what is left.

use super::*;

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
