//! Isolation: one policy's trouble does not reach another's.

use super::*;

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
