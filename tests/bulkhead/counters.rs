//! Counters, forget, owned permits, configuration.

use super::*;

// ---------------------------------------------------------------------------
// Counters, forget, owned permits, configuration.
// ---------------------------------------------------------------------------

#[test]
fn accepted_counts_correctly_past_the_wrap_of_its_low_bits() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 4, &clock);

    // 200 acquisitions through every path that takes a permit.
    for i in 1..=200 {
        match i % 4 {
            0 => drop(bh.try_acquire().unwrap()),
            1 => drop(bh.try_acquire_many(3).unwrap()), // counts once
            2 => drop(now_or_never(bh.acquire()).unwrap()),
            _ => drop(now_or_never(bh.acquire_timeout(MS)).unwrap()),
        }
        assert_eq!(bh.metrics().accepted, i);
    }

    // And 70 more through a registered waiter (woken by a release).
    let held_all = bh.try_acquire_many(4).unwrap();
    let mut accepted = 201;
    assert_eq!(bh.metrics().accepted, accepted);
    let mut slot = Some(held_all);
    for _ in 0..70 {
        let mut waiter = Task::pending(bh.acquire_many(4));
        drop(slot.take());
        slot = Some(waiter.ready().unwrap());
        accepted += 1;
        assert_eq!(bh.metrics().accepted, accepted);
    }
    assert_eq!(bh.metrics().accepted, 271);
    assert_eq!(bh.metrics().rejected(), 0);
}

#[test]
fn rejections_are_counted_by_cause() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    // Full, twice.
    assert!(bh.try_acquire().is_err());
    assert!(bh.try_acquire_many(1).is_err());
    // Timed out: at once, and after waiting.
    assert!(now_or_never(bh.acquire_timeout(Duration::ZERO)).is_err());
    let mut waiter = Task::pending(bh.acquire_timeout(10 * MS));
    clock.advance(10 * MS);
    assert_eq!(waiter.ready().unwrap_err(), AcquireError::TimedOut);
    // Cancelled: not a rejection.
    drop(Task::pending(bh.acquire()));
    // Above capacity: not a rejection.
    assert!(bh.try_acquire_many(2).is_err());

    let m = bh.metrics();
    assert_eq!(
        (m.rejected_full, m.rejected_timed_out, m.rejected_closed),
        (2, 2, 0)
    );
    assert_eq!(m.cancelled_waits, 1);
    assert_eq!(m.rejected(), 4);

    // Closed, once for a waiter and once for a newcomer.
    let mut waiter = Task::pending(bh.acquire());
    bh.close();
    assert_eq!(waiter.ready().unwrap_err(), AcquireError::Closed);
    assert!(bh.try_acquire().is_err());

    let m = bh.metrics();
    assert_eq!(
        (m.rejected_full, m.rejected_timed_out, m.rejected_closed),
        (2, 2, 2)
    );
    assert_eq!(m.rejected(), 6);
    assert_eq!((m.accepted, m.cancelled_waits), (1, 1));
    drop(held);
}

#[test]
fn peak_in_flight_records_the_highest_concurrency() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 5, &clock);
    assert_eq!(bh.metrics().peak_in_flight, 0);

    let three = bh.try_acquire_many(3).unwrap();
    assert_eq!(bh.metrics().peak_in_flight, 3);
    drop(three);
    let one = bh.try_acquire().unwrap();
    let two = now_or_never(bh.acquire()).unwrap();
    assert_eq!(bh.metrics().peak_in_flight, 3, "the peak never decreases");
    let pair = bh.try_acquire_many(2).unwrap();
    assert_eq!(bh.metrics().peak_in_flight, 4);

    // Through a waiter: in flight 4, then 2, then 5.
    let mut waiter = Task::pending(bh.acquire_many(3));
    drop((one, two));
    let three = waiter.ready().unwrap();
    assert_eq!(bh.in_flight(), 5);
    assert_eq!(bh.metrics().peak_in_flight, 5);
    drop((pair, three));
    let m = bh.metrics();
    assert_eq!((m.in_flight, m.peak_in_flight), (0, 5));
}

#[test]
fn forget_removes_capacity() {
    let clock = ManualClock::new();
    let bh = Arc::new(Bulkhead::new("test", 4, &clock));

    bh.try_acquire().unwrap().forget();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (3, 0, 3));
    bh.try_acquire_many_owned(2).unwrap().forget();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (1, 0, 1));

    // Forgetting while a waiter waits neither frees nor takes its permit.
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire());
    assert_eq!(bh.resize(2), Ok(1));
    let p = waiter.ready().unwrap();
    let mut waiter = Task::pending(bh.acquire());
    p.forget();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (1, 1, 0));
    waiter.assert_pending();
    drop(held);
    let p = waiter.ready().unwrap();

    // Down to zero: nothing can be acquired until a resize restores capacity.
    p.forget();
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (0, 0, 0));
    assert_eq!(bh.try_acquire().unwrap_err(), exceeds(1, 0));
    assert_eq!(bh.resize(4), Ok(0));
    assert_eq!(bh.try_acquire_many(4).unwrap().count(), 4);
}

#[test]
fn owned_permit_works_across_threads() {
    let bh = Arc::new(Bulkhead::new("owned", 2, StdClock));

    let permit = bh.try_acquire_owned().unwrap();
    let also = now_or_never(bh.acquire_many_owned(1)).unwrap();
    assert_eq!(bh.in_flight(), 2);
    let name = thread::spawn(move || {
        let name = permit.bulkhead().name();
        assert_eq!(permit.count(), 1);
        drop(permit);
        name
    })
    .join()
    .unwrap();
    assert_eq!(name, "owned");
    assert_eq!(bh.in_flight(), 1);

    // A permit released on another thread wakes a waiter here.
    let other = bh.try_acquire_owned().unwrap();
    let mut waiter = Task::pending(bh.acquire_owned());
    thread::spawn(move || drop((also, other))).join().unwrap();
    assert!(waiter.woken());
    let mine = waiter.ready().unwrap();
    // The permit owns its bulkhead: the Arc can go.
    let weak = Arc::downgrade(&bh);
    drop((bh, waiter));
    assert_eq!(mine.bulkhead().in_flight(), 1);
    drop(mine);
    assert!(weak.upgrade().is_none(), "the last owner was the permit");

    // Owned waits with a deadline, on a shared manual clock.
    let clock = Arc::new(ManualClock::new());
    let bh = Arc::new(Bulkhead::new("owned", 1, Arc::clone(&clock)));
    let held = bh.try_acquire_owned().unwrap();
    let mut waiter = Task::pending(bh.acquire_owned_timeout(10 * MS));
    let mut until = Task::pending(bh.acquire_owned_until(clock.now() + 20 * MS));
    clock.advance(10 * MS);
    assert_eq!(waiter.ready().unwrap_err(), AcquireError::TimedOut);
    thread::spawn(move || drop(held)).join().unwrap();
    let p = until.ready().unwrap();
    assert_eq!(p.count(), 1);
}

#[test]
fn try_new_rejects_bad_capacities() {
    let clock = ManualClock::new();
    assert_eq!(
        Bulkhead::try_new("zero", 0, &clock).unwrap_err(),
        ConfigError::ZeroCapacity
    );
    let max = Bulkhead::<&ManualClock>::MAX_PERMITS;
    assert_eq!(
        Bulkhead::try_new("huge", usize::MAX, &clock).unwrap_err(),
        ConfigError::CapacityTooLarge {
            requested: usize::MAX,
            max
        }
    );
    assert_eq!(
        Bulkhead::try_new("huge", max + 1, &clock).unwrap_err(),
        ConfigError::CapacityTooLarge {
            requested: max + 1,
            max
        }
    );
    let largest = Bulkhead::try_new("largest", max, &clock).unwrap();
    assert_eq!((largest.capacity(), largest.available()), (max, max));
    let one = Bulkhead::try_new("one", 1, &clock).unwrap();
    assert_eq!((one.name(), one.capacity()), ("one", 1));
}

#[test]
fn resize_to_zero_is_an_error_and_leaves_the_capacity_unchanged() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 3, &clock);
    let held = bh.try_acquire().unwrap();

    assert_eq!(bh.resize(0), Err(ConfigError::ZeroCapacity));
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (3, 1, 2));
    let max = Bulkhead::<&ManualClock>::MAX_PERMITS;
    assert_eq!(
        bh.resize(max + 1),
        Err(ConfigError::CapacityTooLarge {
            requested: max + 1,
            max
        })
    );
    assert_eq!((bh.capacity(), bh.in_flight(), bh.available()), (3, 1, 2));
    drop(held);
    assert_eq!(bh.try_acquire_many(3).unwrap().count(), 3);
}

#[test]
fn metrics_snapshot_reports_the_current_state() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("inventory", 3, &clock);
    let held = bh.try_acquire_many(2).unwrap();
    let waiter = Task::pending(bh.acquire_many(2));

    let m = bh.metrics();
    assert_eq!(m.name, "inventory");
    assert_eq!(
        (m.capacity, m.in_flight, m.available, m.waiting),
        (3, 2, 1, 1)
    );
    assert_eq!((m.accepted, m.peak_in_flight, m.rejected()), (1, 2, 0));
    drop((waiter, held));
    let m = bh.metrics();
    assert_eq!((m.in_flight, m.available, m.waiting), (0, 3, 0));
    assert_eq!(m.cancelled_waits, 1);
}

#[test]
fn forget_fails_a_waiter_that_now_asks_for_more_than_the_capacity() {
    let clock = ManualClock::new();
    let b = Bulkhead::new("forget", 3, &clock);
    let one = b.try_acquire().unwrap();
    let two = b.try_acquire_many(2).unwrap();
    let mut all = std::pin::pin!(b.acquire_many(3));
    assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut all)).is_none());
    assert_eq!(b.waiting(), 1);
    one.forget(); // capacity 2: the waiter for 3 can never be served
    let r = futures_lite::future::block_on(futures_lite::future::poll_once(&mut all));
    assert_eq!(
        r.map(|r| r.map(|p| p.count())),
        Some(Err(AcquireError::ExceedsCapacity {
            requested: 3,
            capacity: 2
        }))
    );
    assert_eq!(b.waiting(), 0);
    drop(two);
    assert_eq!((b.capacity(), b.available(), b.in_flight()), (2, 2, 0));
}
