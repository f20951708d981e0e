//! Fairness and order.

use super::*;

// ---------------------------------------------------------------------------
// Fairness and order.
// ---------------------------------------------------------------------------

#[test]
fn waiters_are_served_in_arrival_order() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 3, &clock);
    let mut held: Vec<_> = (0..3).map(|_| bh.try_acquire().unwrap()).collect();

    let mut a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut c = Task::pending(bh.acquire());

    held.pop();
    assert_eq!((a.wakes(), b.wakes(), c.wakes()), (1, 0, 0));
    // Polled in reverse order, the later waiters still do not get it.
    c.assert_pending();
    b.assert_pending();
    let pa = a.ready().unwrap();

    held.pop();
    assert_eq!((b.wakes(), c.wakes()), (1, 0));
    c.assert_pending();
    let pb = b.ready().unwrap();

    held.pop();
    assert_eq!(c.wakes(), 1);
    let pc = c.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (3, 0));
    drop((pa, pb, pc));
}

#[test]
fn a_newcomer_never_barges_ahead_of_a_waiter() {
    let clock = ManualClock::new();
    let bh = Arc::new(Bulkhead::new("test", 1, &clock));
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));

    drop(held);
    // The permit went to the waiter, which has not run yet.
    assert_eq!((bh.available(), bh.in_flight()), (0, 1));
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    assert_eq!(bh.try_acquire_many(1).unwrap_err(), AcquireError::Full);
    assert_eq!(bh.try_acquire_owned().unwrap_err(), AcquireError::Full);
    let mut newcomer = Task::pending(bh.acquire());
    let mut owned_newcomer = Task::pending(bh.acquire_owned());
    // The newcomers queue; the first waiter is no longer queued: it was
    // handed its permit.
    assert_eq!(bh.waiting(), 2);

    let p = waiter.ready().unwrap();
    drop(p);
    // The newcomers queued behind the waiter, in their own order.
    owned_newcomer.assert_pending();
    let p = newcomer.ready().unwrap();
    drop(p);
    let p = owned_newcomer.ready().unwrap();
    drop(p);
    assert_counters(&bh, (4, 3, 0, 0, 0));
}

#[test]
fn a_multi_permit_waiter_does_not_keep_a_free_permit_from_a_single_permit_waiter() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 2, &clock);
    let p1 = bh.try_acquire().unwrap();
    let p2 = bh.try_acquire().unwrap();

    let mut two = Task::pending(bh.acquire_many(2));
    let mut one = Task::pending(bh.acquire_timeout(100 * MS));

    drop(p1);
    // One permit free; the head waiter needs two and keeps its place, taking
    // nothing and not even woken.
    assert!(!two.woken());
    two.assert_pending();
    // The single-permit waiter behind it fits the free permit and gets it
    // (see Fairness on `Bulkhead`), well before its 100 ms deadline.
    assert!(one.woken());
    assert_eq!((bh.available(), bh.waiting()), (0, 1));
    clock.advance(50 * MS);
    match one.poll() {
        Poll::Ready(Ok(p)) => drop(p),
        other => panic!(
            "one permit has been free all along, yet the single-permit waiter \
             (woken {} times) got {other:?}",
            one.wakes()
        ),
    }
    drop(p2);
    assert_eq!(two.ready().unwrap().count(), 2);
}

#[test]
fn close_fails_every_waiter_and_later_acquires_but_keeps_held_permits() {
    let clock = ManualClock::new();
    let bh = Arc::new(Bulkhead::new("test", 2, &clock));
    let held = bh.try_acquire().unwrap();
    let held_owned = bh.try_acquire_owned().unwrap();

    let mut a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut c = Task::pending(bh.acquire_many(2));
    let mut d = Task::pending(bh.acquire_owned());
    assert_eq!(bh.waiting(), 4);

    assert!(bh.close());
    assert!(bh.is_closed());
    assert!(a.woken() && b.woken() && c.woken() && d.woken());
    assert_eq!(a.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(b.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(c.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(d.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(bh.waiting(), 0);
    assert!(!bh.close(), "already closed");

    // Permits already out stay valid and come back as usual.
    assert_eq!(bh.in_flight(), 2);
    drop(held);
    assert_eq!((bh.in_flight(), bh.available()), (1, 1));

    // Later acquires fail, even with a permit free.
    let deadline = clock.now() + Duration::from_secs(1);
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Closed);
    assert_eq!(bh.try_acquire_many(0).unwrap_err(), AcquireError::Closed);
    assert_eq!(bh.try_acquire_owned().unwrap_err(), AcquireError::Closed);
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::Closed
    );
    assert_eq!(
        now_or_never(bh.acquire_until(deadline)).unwrap_err(),
        AcquireError::Closed
    );
    let r = now_or_never(bh.acquire_timeout(Duration::ZERO));
    assert_eq!(r.unwrap_err(), AcquireError::Closed);
    assert_eq!(
        now_or_never(bh.acquire_owned()).unwrap_err(),
        AcquireError::Closed
    );

    drop(held_owned);
    assert_eq!((bh.in_flight(), bh.available()), (0, 2));
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Closed);
    assert_counters(&bh, (2, 0, 0, 12, 0));
}

#[test]
fn growing_the_capacity_wakes_waiters() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    let mut a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut c = Task::pending(bh.acquire());

    assert_eq!(bh.resize(3), Ok(1));
    assert!(a.woken() && b.woken());
    let pa = a.ready().unwrap();
    let pb = b.ready().unwrap();
    c.assert_pending();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.waiting()), (3, 3, 1));

    let before = c.wakes();
    assert_eq!(bh.resize(4), Ok(3));
    assert!(c.wakes() > before);
    let pc = c.ready().unwrap();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.waiting()), (4, 4, 0));
    drop((held, pa, pb, pc));
    assert_eq!(bh.available(), 4);
}
