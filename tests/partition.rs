#![cfg(not(loom))]
//! Deterministic tests of `PartitionedBulkhead`: time on `ManualClock`,
//! futures polled by hand with counting wakers; the one test on real
//! threads asserts bounds that hold in every interleaving.

mod common;
#[path = "support/partition_fixture.rs"]
mod fixture;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use common::Task;
use fixture::{full, three, BATCH, CRITICAL, DEFAULT, MS};
use watertight::clock::{ManualClock, StdClock};
use watertight::partition::{
    PartitionConfigError, PartitionError, PartitionShares, PartitionedBulkhead,
};
use watertight::AcquireError;

#[test]
fn a_class_bursts_into_every_idle_room_least_important_first() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let held: Vec<_> = (0..3).map(|_| b.try_acquire(DEFAULT).unwrap()).collect();
    assert!(held.iter().all(|p| p.room() == DEFAULT));
    // Its room full, default borrows batch's two slots before critical's.
    let rooms: Vec<_> = (0..7)
        .map(|_| b.try_acquire(DEFAULT).unwrap().room())
        .collect();
    // Each borrowed slot was dropped at once: the same room lends again.
    assert_eq!(rooms, vec![BATCH; 7]);
    let borrowed: Vec<_> = (0..7).map(|_| b.try_acquire(DEFAULT).unwrap()).collect();
    let rooms: Vec<_> = borrowed.iter().map(|p| p.room()).collect();
    assert_eq!(
        rooms,
        [BATCH, BATCH, CRITICAL, CRITICAL, CRITICAL, CRITICAL, CRITICAL]
    );
    assert_eq!(b.in_flight(), 10);
    assert_eq!(b.try_acquire(DEFAULT).unwrap_err(), full());
    assert_eq!(b.class_metrics(DEFAULT).unwrap().borrowed, 14);
}

#[test]
fn a_class_under_its_share_gets_its_room_back_from_the_first_borrower_to_leave() {
    let clock = ManualClock::new();
    let b = three(&clock);
    // Batch takes the whole capacity: 2 of its own, 8 borrowed.
    let mut batch: Vec<_> = (0..10).map(|_| b.try_acquire(BATCH).unwrap()).collect();
    // A critical call with no time to wait is refused...
    assert_eq!(b.try_acquire(CRITICAL).unwrap_err(), full());
    // ...one with time waits in its room.
    let mut critical = Task::pending(b.acquire_timeout(CRITICAL, 100 * MS));
    // A borrower in critical's room finishes: the slot is handed to the
    // waiter at once, so no newcomer of another class can take it.
    let in_critical = batch.iter().position(|p| p.room() == CRITICAL).unwrap();
    drop(batch.remove(in_critical));
    assert!(critical.woken());
    assert_eq!(b.try_acquire(BATCH).unwrap_err(), full());
    assert_eq!(b.try_acquire(DEFAULT).unwrap_err(), full());
    let p = critical.ready().unwrap();
    assert_eq!(
        (p.class(), p.room(), p.is_borrowed()),
        (CRITICAL, CRITICAL, false)
    );
    assert_eq!(b.in_flight(), b.capacity());
    let m = b.class_metrics(CRITICAL).unwrap();
    assert_eq!((m.refused_full, m.refused_timed_out, m.borrowed), (1, 0, 0));
}

#[test]
fn a_waiter_borrows_a_slot_freed_in_another_room_that_nobody_there_wants() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let mut batch: Vec<_> = (0..10).map(|_| b.try_acquire(BATCH).unwrap()).collect();
    let mut critical = Task::pending(b.acquire_timeout(CRITICAL, 100 * MS));
    let mut default = Task::pending(b.acquire_timeout(DEFAULT, 100 * MS));
    // Batch's own slot frees; nobody of batch waits: the first waiter of
    // the most important waiting class is woken to borrow it.
    let own = batch.iter().position(|p| p.room() == BATCH).unwrap();
    drop(batch.remove(own));
    assert!(critical.woken());
    assert!(!default.woken());
    let p = critical.ready().unwrap();
    assert_eq!(
        (p.class(), p.room(), p.is_borrowed()),
        (CRITICAL, BATCH, true)
    );
    assert_eq!(b.room(CRITICAL).unwrap().waiting(), 0);
    // Next, a borrower leaves default's room: handed to default's waiter.
    let in_default = batch.iter().position(|p| p.room() == DEFAULT).unwrap();
    drop(batch.remove(in_default));
    let q = default.ready().unwrap();
    assert_eq!((q.class(), q.room()), (DEFAULT, DEFAULT));
    assert_eq!(b.class_metrics(CRITICAL).unwrap().borrowed, 1);
}

#[test]
fn a_waiter_is_refused_only_by_its_deadline() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let _batch: Vec<_> = (0..10).map(|_| b.try_acquire(BATCH).unwrap()).collect();
    let mut critical = Task::pending(b.acquire_timeout(CRITICAL, 20 * MS));
    clock.advance(19 * MS);
    critical.assert_pending();
    clock.advance(MS);
    assert_eq!(
        critical.ready().unwrap_err(),
        PartitionError::Refused(AcquireError::TimedOut)
    );
    assert_eq!(b.class_metrics(CRITICAL).unwrap().refused_timed_out, 1);
    assert_eq!(b.room(CRITICAL).unwrap().waiting(), 0);
}

#[test]
fn newcomers_of_a_class_with_waiters_queue_behind_them_instead_of_borrowing() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 2)], &clock);
    let web = b.try_acquire(0).unwrap();
    let jobs = b.try_acquire(1).unwrap();
    let jobs2 = b.try_acquire(1).unwrap();
    let mut first = Task::pending(b.acquire_timeout(0, 100 * MS));
    // A jobs slot frees: web's first waiter is woken to borrow it; a web
    // newcomer, coming before that waiter runs, does not take it ahead of
    // the waiter: it queues behind.
    drop(jobs);
    assert!(first.woken());
    assert_eq!(b.try_acquire(0).unwrap_err(), full());
    let mut second = Task::pending(b.acquire_timeout(0, 100 * MS));
    // The waiters are served in order: the first borrows the jobs slot.
    let served = first.ready().unwrap();
    assert_eq!((served.room(), served.is_borrowed()), (1, true));
    second.assert_pending();
    // web's own slot frees: handed to the second.
    drop(web);
    assert_eq!(second.ready().unwrap().room(), 0);
    drop(jobs2);
}

#[test]
fn a_wake_up_the_first_waiter_did_not_use_passes_on() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let web = b.try_acquire(0).unwrap();
    let jobs = b.try_acquire(1).unwrap();
    let mut first = Task::pending(b.acquire_timeout(0, 100 * MS));
    let mut second = Task::pending(b.acquire_timeout(0, 100 * MS));
    // jobs' slot frees (the first is woken to borrow it), then web's own
    // slot is handed to the first before it runs: the first takes its own
    // room's slot, and the jobs slot it was woken for passes on.
    drop(jobs);
    drop(web);
    let p = first.ready().unwrap();
    assert_eq!(p.room(), 0);
    assert!(second.woken());
    let q = second.ready().unwrap();
    assert_eq!((q.room(), q.is_borrowed()), (1, true));
}

#[test]
fn a_wait_that_finds_a_free_slot_borrows_it_at_once() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let _web = b.try_acquire(0).unwrap();
    let mut wait = Task::new(b.acquire_timeout(0, 10 * MS));
    let p = wait.ready().unwrap();
    assert_eq!((p.class(), p.room()), (0, 1));
    assert!(p.is_borrowed());
}

#[test]
fn a_dropped_wait_gives_its_place_back() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let held = (b.try_acquire(1).unwrap(), b.try_acquire(1).unwrap());
    let first = Task::pending(b.acquire_timeout(0, 100 * MS));
    let mut second = Task::pending(b.acquire_timeout(0, 100 * MS));
    drop(first);
    assert_eq!(b.room(0).unwrap().waiting(), 1);
    drop(held);
    let served = second.ready().unwrap();
    assert_eq!(served.class(), 0);
    assert_eq!(b.in_flight(), 1);
    assert_eq!(b.room(0).unwrap().metrics().cancelled_waits, 1);
}

#[test]
fn close_fails_waiters_and_newcomers_but_keeps_held_slots() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let held = (b.try_acquire(1).unwrap(), b.try_acquire(1).unwrap());
    let mut waiter = Task::pending(b.acquire_timeout(0, 100 * MS));
    assert!(b.close());
    assert!(!b.close());
    let closed = PartitionError::Refused(AcquireError::Closed);
    assert_eq!(waiter.ready().unwrap_err(), closed);
    assert_eq!(b.try_acquire(1).unwrap_err(), closed);
    assert_eq!(b.in_flight(), 2);
    drop(held);
    assert_eq!(b.in_flight(), 0);
}

#[test]
fn a_bounded_room_refuses_one_waiter_too_many() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock).with_max_waiters(1);
    let _held = (b.try_acquire(0).unwrap(), b.try_acquire(1).unwrap());
    let _web = Task::pending(b.acquire_timeout(0, 100 * MS));
    let mut over = Task::new(b.acquire_timeout(0, 100 * MS));
    assert_eq!(
        over.ready().unwrap_err(),
        PartitionError::Refused(AcquireError::QueueFull)
    );
    // The bound is per class: jobs still has its place.
    let _jobs = Task::pending(b.acquire_timeout(1, 100 * MS));
    assert_eq!(b.class_metrics(0).unwrap().refused_queue_full, 1);
    assert_eq!(b.class_metrics(1).unwrap().waiting, 1);
}

#[test]
fn bad_classes_and_shares_are_typed_errors() {
    let clock = ManualClock::new();
    let b = three(&clock);
    assert_eq!(
        b.try_acquire(3).unwrap_err(),
        PartitionError::NoSuchClass {
            class: 3,
            classes: 3
        }
    );
    let mut wait = Task::new(b.acquire_timeout(usize::MAX, MS));
    assert_eq!(
        wait.ready().unwrap_err(),
        PartitionError::NoSuchClass {
            class: usize::MAX,
            classes: 3
        }
    );
    assert_eq!(
        PartitionedBulkhead::<_, 0>::try_new("none", [], StdClock).unwrap_err(),
        PartitionConfigError::NoClasses
    );
    assert_eq!(
        PartitionedBulkhead::try_new("db", [("a", 1), ("b", 0)], StdClock).unwrap_err(),
        PartitionConfigError::ZeroShare { class: "b" }
    );
    assert!(matches!(
        PartitionedBulkhead::try_new("db", [("a", usize::MAX)], StdClock).unwrap_err(),
        PartitionConfigError::ShareTooLarge { class: "a", .. }
    ));
    assert_eq!(
        PartitionedBulkhead::from_percent("db", 10, [("a", 60), ("b", 60)], StdClock).unwrap_err(),
        PartitionConfigError::PercentNot100 { sum: 120 }
    );
    assert!(matches!(
        PartitionedBulkhead::from_percent("db", usize::MAX, [("a", 100)], StdClock).unwrap_err(),
        PartitionConfigError::ShareTooLarge { .. }
    ));
    for e in [
        PartitionConfigError::NoClasses,
        PartitionConfigError::ZeroShare { class: "b" },
        PartitionConfigError::PercentNot100 { sum: 120 },
    ] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn percentages_round_to_whole_slots_that_add_up_to_the_capacity() {
    for capacity in 3..200 {
        let b = PartitionedBulkhead::from_percent(
            "api",
            capacity,
            [("critical", 50), ("default", 30), ("batch", 20)],
            StdClock,
        )
        .unwrap();
        let shares = [b.share(0), b.share(1), b.share(2)];
        assert_eq!(shares.iter().sum::<usize>(), capacity, "{shares:?}");
        for (share, pct) in shares.iter().zip([50, 30, 20]) {
            // Within one slot of the exact share.
            let exact = capacity as f64 * pct as f64 / 100.0;
            assert!(
                (*share as f64 - exact).abs() < 1.0,
                "{capacity}: {shares:?}"
            );
        }
    }
    let b =
        PartitionedBulkhead::from_percent("api", 10, [("a", 50), ("b", 30), ("c", 20)], StdClock)
            .unwrap();
    assert_eq!((b.share(0), b.share(1), b.share(2)), (5, 3, 2));
    assert_eq!((b.class_name(2), b.class_of("b")), (Some("c"), Some(1)));
}

#[test]
fn from_shares_builds_as_try_new_and_from_percent_do() {
    let classes = ["critical", "default", "batch"];
    let b = PartitionedBulkhead::from_shares(
        "api",
        classes,
        PartitionShares::slots([5, 3, 2]),
        StdClock,
    )
    .unwrap();
    assert_eq!(
        (b.share(0), b.share(1), b.share(2), b.capacity()),
        (5, 3, 2, 10)
    );
    assert_eq!(
        (b.class_name(2), b.room(0).unwrap().max_waiters()),
        (Some("batch"), None)
    );
    // Percentages: the same slots as from_percent, at every capacity.
    for capacity in 3..200 {
        let shares = PartitionShares::percent(capacity, [50, 30, 20]);
        let b = PartitionedBulkhead::from_shares("api", classes, shares, StdClock).unwrap();
        let p = PartitionedBulkhead::from_percent(
            "api",
            capacity,
            [("critical", 50), ("default", 30), ("batch", 20)],
            StdClock,
        )
        .unwrap();
        let got = [b.share(0), b.share(1), b.share(2)];
        assert_eq!(got, [p.share(0), p.share(1), p.share(2)], "{capacity}");
        assert_eq!(shares.class_slots(), Some(got));
        assert_eq!((b.capacity(), shares.capacity()), (capacity, capacity));
    }
    // The waiter bound, on every room.
    let shares = PartitionShares::slots([2, 1]).with_max_waiters(1);
    let b = PartitionedBulkhead::from_shares("db", ["web", "jobs"], shares, StdClock).unwrap();
    assert_eq!(b.room(0).unwrap().max_waiters(), Some(1));
    assert_eq!(b.room(1).unwrap().max_waiters(), Some(1));
}

#[test]
fn from_shares_names_the_class_at_fault() {
    let classes = ["web", "jobs"];
    let build = |shares| PartitionedBulkhead::from_shares("db", classes, shares, StdClock);
    assert_eq!(
        build(PartitionShares::slots([3, 0])).unwrap_err(),
        PartitionConfigError::ZeroShare { class: "jobs" }
    );
    let max = watertight::Bulkhead::<()>::MAX_PERMITS;
    assert_eq!(
        build(PartitionShares::slots([max + 1, 1])).unwrap_err(),
        PartitionConfigError::ShareTooLarge {
            class: "web",
            requested: max + 1,
            max
        }
    );
    assert_eq!(
        build(PartitionShares::percent(10, [60, 60])).unwrap_err(),
        PartitionConfigError::PercentNot100 { sum: 120 }
    );
    // A percentage that rounds to no slot.
    assert_eq!(
        build(PartitionShares::percent(1, [50, 50])).unwrap_err(),
        PartitionConfigError::ZeroShare { class: "jobs" }
    );
    // The capacity is the system's.
    assert_eq!(
        build(PartitionShares::percent(max + 1, [50, 50])).unwrap_err(),
        PartitionConfigError::ShareTooLarge {
            class: "db",
            requested: max + 1,
            max
        }
    );
    let waiters = watertight::Bulkhead::<()>::MAX_WAITERS;
    let err = build(PartitionShares::slots([1, 1]).with_max_waiters(waiters + 1)).unwrap_err();
    assert_eq!(
        err,
        PartitionConfigError::MaxWaitersTooLarge {
            requested: waiters + 1,
            max: waiters
        }
    );
    assert!(err.to_string().contains("above the maximum"), "{err}");
    let b = build(PartitionShares::slots([1, 1]).with_max_waiters(waiters)).unwrap();
    assert_eq!(b.room(1).unwrap().max_waiters(), Some(waiters));
    assert_eq!(
        PartitionedBulkhead::<_, 0>::from_shares("none", [], PartitionShares::slots([]), StdClock)
            .unwrap_err(),
        PartitionConfigError::NoClasses
    );
    assert_eq!(PartitionShares::slots([3, 0]).class_slots(), None);
    assert_eq!(PartitionShares::percent(10, [60, 60]).class_slots(), None);
}

/// Real threads, every class hammering: the total never passes the
/// capacity, and a class never holds more of its own room than its share.
#[test]
fn the_bound_holds_across_threads() {
    static B: PartitionedBulkhead<StdClock, 3> = PartitionedBulkhead::new(
        "threads",
        [("critical", 3), ("default", 2), ("batch", 1)],
        StdClock,
    );
    static IN: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    static ADMITTED: AtomicUsize = AtomicUsize::new(0);
    let threads: Vec<_> = (0..6)
        .map(|t| {
            thread::spawn(move || {
                // Miri runs this too, far slower.
                for _ in 0..if cfg!(miri) { 50 } else { 20_000 } {
                    if let Ok(p) = B.try_acquire(t % 3) {
                        let now = IN.fetch_add(1, Ordering::SeqCst) + 1;
                        PEAK.fetch_max(now, Ordering::SeqCst);
                        ADMITTED.fetch_add(1, Ordering::Relaxed);
                        std::hint::spin_loop();
                        IN.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(PEAK.load(Ordering::SeqCst) <= 6);
    assert_eq!(B.in_flight(), 0);
    let accepted: usize = (0..3)
        .map(|c| B.class_metrics(c).unwrap().room_accepted)
        .sum();
    assert_eq!(accepted, ADMITTED.load(Ordering::Relaxed));
}

/// Owned permits (an `Arc` of the bulkhead): they move into other threads,
/// give their slot back to the room it came from, and a borrowed one's
/// release wakes a waiting class, as the borrowed form does.
#[test]
fn owned_permits_move_across_threads_and_hand_back_like_borrowed_ones() {
    use std::sync::Arc;
    let clock = Arc::new(ManualClock::new());
    let b = Arc::new(
        PartitionedBulkhead::try_new("db", [("web", 1), ("jobs", 1)], clock.clone()).unwrap(),
    );
    let own = b.try_acquire_owned(1).unwrap();
    let lent = b.try_acquire_owned(1).unwrap();
    assert_eq!((own.room(), lent.room(), lent.is_borrowed()), (1, 0, true));
    assert_eq!(b.try_acquire_owned(0).unwrap_err(), full());
    // web waits in its lent-out room; the borrower, dropped on another
    // thread, hands the slot back to it.
    let mut web = Task::pending(b.acquire_owned_timeout(0, 100 * MS));
    thread::spawn(move || drop(lent)).join().unwrap();
    let served = web.ready().unwrap();
    assert_eq!((served.class(), served.room()), (0, 0));
    // A jobs waiter, then jobs' own slot freed on another thread: the
    // waiter is served from it.
    let mut jobs = Task::pending(b.acquire_owned_timeout(1, 100 * MS));
    thread::spawn(move || drop(own)).join().unwrap();
    assert_eq!(jobs.ready().unwrap().room(), 1);
    // A dropped owned wait leaves no place behind, and a timed-out one is
    // counted.
    let held = b.try_acquire_owned(1).unwrap();
    drop(Task::pending(b.acquire_owned_timeout(1, 100 * MS)));
    assert_eq!(b.room(1).unwrap().waiting(), 0);
    let mut late = Task::pending(b.acquire_owned_timeout(1, 10 * MS));
    clock.advance(10 * MS);
    assert_eq!(
        late.ready().unwrap_err(),
        PartitionError::Refused(AcquireError::TimedOut)
    );
    drop((held, served));
    assert_eq!(b.in_flight(), 0);
    assert_eq!(Arc::strong_count(&b), 1);
}
