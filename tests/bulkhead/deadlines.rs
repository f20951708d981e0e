//! Deadlines on the manual clock.

use super::*;

// ---------------------------------------------------------------------------
// Deadlines on the manual clock.
// ---------------------------------------------------------------------------

#[test]
fn a_free_permit_is_taken_even_when_the_deadline_has_passed() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1));
    let bh = Bulkhead::new("test", 3, &clock);

    let past = now_or_never(bh.acquire_until(Instant::ZERO)).unwrap();
    let at_deadline = now_or_never(bh.acquire_until(clock.now())).unwrap();
    assert_eq!(bh.in_flight(), 2);
    drop((past, at_deadline));

    let many = now_or_never(bh.acquire_many_until(3, clock.now() - MS)).unwrap();
    assert_eq!(many.count(), 3);
    assert_counters(&bh, (3, 0, 0, 0, 0));
}

#[test]
fn a_wait_with_a_past_deadline_times_out_at_once_without_registering() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(1));
    let bh = Bulkhead::new("test", 1, &clock);
    let _held = bh.try_acquire().unwrap();

    let mut past = pin!(bh.acquire_until(clock.now() - NS));
    let probe = Probe::new();
    match probe.poll(past.as_mut()) {
        Poll::Ready(r) => assert_eq!(r.unwrap_err(), AcquireError::TimedOut),
        Poll::Pending => panic!("a past deadline must not wait"),
    }
    assert_eq!(bh.waiting(), 0);

    // A deadline equal to now has passed too.
    let r = now_or_never(bh.acquire_until(clock.now()));
    assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);
    let r = now_or_never(bh.acquire_many_until(1, Instant::ZERO));
    assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);
    assert_counters(&bh, (1, 0, 3, 0, 0));
}

#[test]
fn a_waiter_gives_up_exactly_at_its_deadline() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let _held = bh.try_acquire().unwrap();

    let deadline = clock.now() + 100 * MS;
    let mut waiter = Task::pending(bh.acquire_until(deadline));
    assert_eq!(bh.waiting(), 1);

    clock.advance(100 * MS - NS);
    waiter.assert_pending();
    assert_eq!(bh.waiting(), 1);
    assert_eq!(bh.metrics().rejected_timed_out, 0);

    let wakes_before = waiter.wakes();
    clock.advance(NS);
    assert_eq!(clock.now(), deadline);
    assert!(
        waiter.wakes() > wakes_before,
        "reaching the deadline wakes it"
    );
    assert_eq!(waiter.ready().unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);
    assert_counters(&bh, (1, 0, 1, 0, 0));
}

#[test]
fn acquire_timeout_fixes_its_deadline_when_the_future_is_created() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let _held = bh.try_acquire().unwrap();

    let mut waiter = Task::new(bh.acquire_timeout(100 * MS));
    clock.advance(60 * MS);
    waiter.assert_pending(); // first poll 60 ms after creation
    clock.advance(40 * MS - NS);
    waiter.assert_pending();
    clock.advance(NS); // 100 ms after creation, 40 ms after the first poll
    assert_eq!(waiter.ready().unwrap_err(), AcquireError::TimedOut);

    // Created after its whole wait has passed: fails on the first poll.
    let late = bh.acquire_many_timeout(1, 10 * MS);
    clock.advance(10 * MS);
    assert_eq!(now_or_never(late).unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);
}

#[test]
fn a_permit_released_before_the_deadline_goes_to_the_waiter() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    let mut waiter = Task::pending(bh.acquire_timeout(100 * MS));
    clock.advance(100 * MS - NS);
    waiter.assert_pending();
    let wakes_before = waiter.wakes();
    drop(held);
    assert!(
        waiter.wakes() > wakes_before,
        "the release wakes the waiter"
    );

    // The waiter was woken for the permit before its deadline; it gets the
    // permit even if its task only runs after the deadline.
    clock.advance(Duration::from_secs(1));
    let permit = waiter.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
    assert_counters(&bh, (2, 0, 0, 0, 0));
    drop(permit);

    // And a waiter that runs before its deadline, of course.
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire_many_timeout(1, 50 * MS));
    clock.advance(10 * MS);
    waiter.assert_pending();
    drop(held);
    assert!(waiter.ready().is_ok());
    assert_counters(&bh, (4, 0, 0, 0, 0));
}

#[test]
fn zero_timeout_behaves_like_try_acquire() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);

    // A free permit: taken on the first poll.
    let permit = now_or_never(bh.acquire_timeout(Duration::ZERO)).unwrap();
    assert_eq!(bh.in_flight(), 1);

    // None free: fails on the first poll, without queueing.
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    let r = now_or_never(bh.acquire_timeout(Duration::ZERO));
    assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);

    // A permit just released to a waiter: handed to it, not taken ahead of
    // it, even before the waiter has run.
    let mut waiter = Task::pending(bh.acquire());
    drop(permit);
    assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (0, 1, 0));
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    let r = now_or_never(bh.acquire_timeout(Duration::ZERO));
    assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    assert!(waiter.ready().is_ok());
    assert_counters(&bh, (2, 2, 2, 0, 0));
}

#[test]
fn a_cancelled_waiter_is_counted_as_cancelled_not_rejected() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    let waiter = Task::pending(bh.acquire_timeout(100 * MS));
    let other = Task::pending(bh.acquire());
    assert_eq!(bh.waiting(), 2);
    drop(waiter);
    drop(other);
    let m = bh.metrics();
    assert_eq!(m.cancelled_waits, 2);
    assert_eq!(m.rejected(), 0);
    assert_eq!((m.waiting, m.in_flight), (0, 1));

    // Its deadline passing afterwards changes nothing.
    clock.advance(Duration::from_secs(1));
    assert_counters(&bh, (1, 0, 0, 0, 2));

    // A future dropped before its first poll never waited; one dropped after
    // it completed has nothing left to cancel.
    drop(bh.acquire_timeout(100 * MS));
    drop(held);
    let mut done = pin!(bh.acquire());
    let permit = match common::poll_noop(done.as_mut()) {
        Poll::Ready(r) => r.unwrap(),
        Poll::Pending => panic!("a permit is free"),
    };
    drop(permit);
    assert_counters(&bh, (2, 0, 0, 0, 2));
}

#[test]
fn a_request_above_capacity_fails_at_once_and_is_counted_nowhere() {
    let clock = ManualClock::new();
    let bh = Arc::new(Bulkhead::new("test", 2, &clock));
    let deadline = clock.now() + Duration::from_secs(1);

    // Also while the bulkhead is full: the answer is not Full.
    for full in [false, true] {
        let held = full.then(|| bh.try_acquire_many(2).unwrap());
        assert_eq!(bh.try_acquire_many(3).unwrap_err(), exceeds(3, 2));
        assert_eq!(bh.try_acquire_many_owned(3).unwrap_err(), exceeds(3, 2));
        assert_eq!(now_or_never(bh.acquire_many(3)).unwrap_err(), exceeds(3, 2));
        let r = now_or_never(bh.acquire_many_until(3, deadline));
        assert_eq!(r.unwrap_err(), exceeds(3, 2));
        let r = now_or_never(bh.acquire_many_timeout(3, Duration::from_secs(1)));
        assert_eq!(r.unwrap_err(), exceeds(3, 2));
        let r = now_or_never(bh.acquire_many_owned(3));
        assert_eq!(r.unwrap_err(), exceeds(3, 2));
        assert_eq!(bh.waiting(), 0);
        drop(held);
    }
    assert!(!exceeds(3, 2).is_rejection());
    assert_counters(&bh, (1, 0, 0, 0, 0));

    // Single-permit requests exceed a capacity that `forget` brought to zero.
    bh.try_acquire_many(2).unwrap().forget();
    assert_eq!(bh.capacity(), 0);
    assert_eq!(bh.try_acquire().unwrap_err(), exceeds(1, 0));
    assert_eq!(bh.try_acquire_owned().unwrap_err(), exceeds(1, 0));
    assert_eq!(now_or_never(bh.acquire()).unwrap_err(), exceeds(1, 0));
    assert_eq!(
        now_or_never(bh.acquire_until(deadline)).unwrap_err(),
        exceeds(1, 0)
    );
    assert_eq!(now_or_never(bh.acquire_owned()).unwrap_err(), exceeds(1, 0));
    assert_eq!(bh.waiting(), 0);
    assert_counters(&bh, (2, 0, 0, 0, 0));
}

#[test]
fn shrinking_never_blocks() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 3, &clock);
    let held: Vec<_> = (0..3).map(|_| bh.try_acquire().unwrap()).collect();
    let mut waiter = Task::pending(bh.acquire());

    // Returns at once, with every permit still out and a waiter queued.
    assert_eq!(bh.resize(1), Ok(3));
    let m = bh.metrics();
    assert_eq!(
        (m.capacity, m.in_flight, m.available, m.waiting),
        (1, 3, 0, 1)
    );
    assert_eq!(bh.resize(2), Ok(1));
    assert_eq!(bh.resize(1), Ok(2));
    waiter.assert_pending();

    // The permits out stay valid and are returned as usual; the one that
    // fits the new capacity goes to the waiter.
    drop(held);
    let m = bh.metrics();
    assert_eq!(
        (m.capacity, m.in_flight, m.available, m.waiting),
        (1, 1, 0, 0)
    );
    let p = waiter.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.available()), (1, 0));
    drop(p);
    assert_eq!((bh.in_flight(), bh.available()), (0, 1));
}

#[test]
fn a_waiter_above_the_new_capacity_fails_after_a_shrink() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 3, &clock);
    let held = bh.try_acquire_many(3).unwrap();

    let mut three = Task::pending(bh.acquire_many_timeout(3, Duration::from_secs(1)));
    let mut two = Task::pending(bh.acquire_many(2));
    assert_eq!(bh.waiting(), 2);

    assert_eq!(bh.resize(2), Ok(3));
    assert!(three.woken(), "a shrink wakes waiters to re-check");
    assert_eq!(three.ready().unwrap_err(), exceeds(3, 2));
    // A waiter that still fits keeps waiting.
    two.assert_pending();
    assert_eq!(bh.waiting(), 1);

    drop(held);
    assert_eq!(two.ready().unwrap().count(), 2);
    assert_eq!(bh.waiting(), 0);
    assert_counters(&bh, (2, 0, 0, 0, 0));
}

#[test]
fn after_a_shrink_no_permit_is_granted_until_in_flight_is_below_the_new_capacity() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 3, &clock);
    let mut held: Vec<_> = (0..3).map(|_| bh.try_acquire().unwrap()).collect();
    assert_eq!(bh.resize(1), Ok(3));

    let mut waiter = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    held.pop();
    waiter.assert_pending(); // in flight 2, capacity 1
    assert_eq!(bh.available(), 0);
    held.pop();
    waiter.assert_pending(); // in flight 1, capacity 1
    assert_eq!(bh.available(), 0);
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    held.pop();
    let permit = waiter.ready().unwrap(); // in flight 0
    assert_eq!((bh.in_flight(), bh.available()), (1, 0));
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    drop(permit);
    assert!(bh.try_acquire().is_ok());
    assert_eq!(bh.metrics().peak_in_flight, 3);
}
