//! Cancellation.

use super::*;

// ---------------------------------------------------------------------------
// Cancellation.
// ---------------------------------------------------------------------------

#[test]
fn dropping_a_pending_acquire_loses_no_permit_and_keeps_the_order() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    let mut a = Task::pending(bh.acquire());
    let b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut c = Task::pending(bh.acquire());
    let mut d = Task::pending(bh.acquire_until(clock.now() + Duration::from_secs(1)));
    assert_eq!(bh.waiting(), 4);

    drop(b);
    assert_eq!((bh.waiting(), bh.in_flight(), bh.available()), (3, 1, 0));
    assert!(!a.woken() && !c.woken() && !d.woken());

    drop(held);
    assert!(a.woken());
    assert!(!c.woken() && !d.woken());
    c.assert_pending();
    d.assert_pending();
    let pa = a.ready().unwrap();

    drop(pa);
    assert!(c.woken());
    assert!(!d.woken());
    d.assert_pending();
    let pc = c.ready().unwrap();

    drop(pc);
    let pd = d.ready().unwrap();
    assert_eq!((bh.waiting(), bh.in_flight()), (0, 1));
    drop(pd);
    assert_eq!(bh.available(), 1);
    assert_counters(&bh, (4, 0, 0, 0, 1));
}

#[test]
fn dropping_a_woken_waiter_passes_the_wakeup_on() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);

    // The woken waiter is an `Acquire`.
    let held = bh.try_acquire().unwrap();
    let a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire());
    drop(held);
    assert!(a.woken());
    assert!(!b.woken());
    drop(a);
    assert!(
        b.woken(),
        "the permit handed to the cancelled waiter reaches the next one"
    );
    let p = b.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));

    // The woken waiter is an `AcquireUntil`.
    let a = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    drop(p);
    assert!(a.woken());
    assert!(!b.woken());
    drop(a);
    assert!(b.woken());
    let p = b.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
    drop(p);
    // A dropped waiter whose permit had been handed to it counts as accepted
    // (it held the permit, for no time): five grants, no cancelled wait.
    assert_counters(&bh, (5, 0, 0, 0, 0));
}

#[test]
fn dropping_a_woken_waiter_passes_the_wakeup_on_after_a_batch_release() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 2, &clock);
    let held = bh.try_acquire_many(2).unwrap();

    let a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire());
    let mut c = Task::pending(bh.acquire());
    drop(held); // two permits back at once: handed to the first two waiters
    assert!(a.woken() && b.woken());
    assert!(!c.woken());
    assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (0, 2, 1));
    drop(a);
    // A's permit is not lost: it goes straight on to C.
    assert!(c.woken(), "the second permit must reach the next waiter");
    assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (0, 2, 0));
    let pb = b.ready().unwrap();
    let pc = c.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (2, 0));
    drop((pb, pc));
    assert_counters(&bh, (4, 0, 0, 0, 0));
}
