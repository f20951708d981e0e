#![cfg(not(loom))]
//! `PartitionedBulkhead::resize` and the rule it applies,
//! `partition::room_capacities`: the least important class is shed first,
//! down to 1 slot a class; rising back, the most important recovers first;
//! above the configured total, the rooms grow in proportion to the shares.
//! Deterministic: `ManualClock`, futures polled by hand; the one test on
//! real threads asserts what holds in every interleaving.

mod common;
#[path = "support/partition_fixture.rs"]
mod fixture;

use std::thread;
use std::time::Duration;

use common::Task;
use fixture::{full, three, BATCH, CRITICAL, DEFAULT, MS};
use watertight::clock::{Clock, ManualClock, StdClock};
use watertight::limit::{AdaptiveLimit, Aimd, Signal};
use watertight::partition::{room_capacities, PartitionConfigError, PartitionedBulkhead};
use watertight::Bulkhead;

fn rooms<C, const K: usize>(b: &PartitionedBulkhead<C, K>) -> [usize; K] {
    core::array::from_fn(|class| b.capacity_of(class))
}

/// The table for 5/3/2, every total from 0 to 20, worked out by hand:
/// below 10 the last class goes to 1 first, then the middle one, then the
/// first; above 10, D'Hondt on the shares.
#[test]
fn the_split_of_5_3_2_at_every_total() {
    let expected: [(usize, Option<[usize; 3]>); 21] = [
        (0, None),
        (1, None),
        (2, None),
        (3, Some([1, 1, 1])),
        (4, Some([2, 1, 1])),
        (5, Some([3, 1, 1])),
        (6, Some([4, 1, 1])),
        (7, Some([5, 1, 1])),
        (8, Some([5, 2, 1])),
        (9, Some([5, 3, 1])),
        (10, Some([5, 3, 2])),
        (11, Some([6, 3, 2])),
        (12, Some([6, 4, 2])),
        (13, Some([7, 4, 2])),
        (14, Some([7, 4, 3])),
        (15, Some([8, 4, 3])),
        (16, Some([8, 5, 3])),
        (17, Some([9, 5, 3])),
        // 5/10 = 3/6 = 2/4: the tie goes to the most important class.
        (18, Some([10, 5, 3])),
        (19, Some([10, 6, 3])),
        (20, Some([10, 6, 4])),
    ];
    for (total, rooms) in expected {
        assert_eq!(room_capacities(&[5, 3, 2], total), rooms, "total {total}");
    }
}

/// Every share vector of 1 to 3 classes, shares 1..=6, every total up to
/// four times the configured one: the properties the rule promises.
#[test]
fn the_split_keeps_its_promises_for_every_small_configuration() {
    let mut configurations = 0;
    for k in 1..=3usize {
        let mut shares = vec![1usize; k];
        loop {
            check(&shares);
            configurations += 1;
            // The next vector, like an odometer.
            let Some(i) = shares.iter().rposition(|&s| s < 6) else {
                break;
            };
            shares[i] += 1;
            shares[i + 1..].fill(1);
        }
    }
    assert_eq!(configurations, 6 + 36 + 216);

    fn split(shares: &[usize], total: usize) -> Option<Vec<usize>> {
        match *shares {
            [a] => room_capacities(&[a], total).map(|r| r.to_vec()),
            [a, b] => room_capacities(&[a, b], total).map(|r| r.to_vec()),
            [a, b, c] => room_capacities(&[a, b, c], total).map(|r| r.to_vec()),
            _ => unreachable!(),
        }
    }

    fn check(shares: &[usize]) {
        let k = shares.len();
        let configured: usize = shares.iter().sum();
        let mut before: Option<Vec<usize>> = None;
        for total in 0..=4 * configured {
            let at = format!("shares {shares:?}, total {total}");
            let Some(rooms) = split(shares, total) else {
                assert!(total < k, "{at}: no split");
                continue;
            };
            assert!(total >= k, "{at}: a split below one slot a class");
            assert_eq!(rooms.iter().sum::<usize>(), total, "{at}: {rooms:?}");
            assert!(rooms.iter().all(|&r| r >= 1), "{at}: {rooms:?}");
            if total == configured {
                assert_eq!(rooms, shares, "{at}");
            }
            if total <= configured {
                // Shed from the back: a class below its share means every
                // class after it is down to 1.
                for i in 0..k {
                    assert!(rooms[i] <= shares[i], "{at}: {rooms:?}");
                    if rooms[i] < shares[i] {
                        assert!(rooms[i + 1..].iter().all(|&r| r == 1), "{at}: {rooms:?}");
                    }
                }
            } else {
                // In proportion (D'Hondt): at least the share, and no class
                // would rather have a slot of another's: for all i, j with
                // rooms[j] > 0, shares[i] / (rooms[i] + 1) <= shares[j] / rooms[j].
                for i in 0..k {
                    assert!(rooms[i] >= shares[i], "{at}: {rooms:?}");
                    for j in 0..k {
                        assert!(
                            shares[i] * rooms[j] <= shares[j] * (rooms[i] + 1),
                            "{at}: {rooms:?}, class {i} owed a slot of class {j}'s"
                        );
                    }
                }
            }
            // No room shrinks when the total grows: one more slot is one
            // room one larger.
            if let Some(prev) = &before {
                let grown: Vec<_> = (0..k).filter(|&i| rooms[i] != prev[i]).collect();
                assert_eq!(grown.len(), 1, "{at}: {prev:?} -> {rooms:?}");
                assert_eq!(rooms[grown[0]], prev[grown[0]] + 1, "{at}");
            }
            before = Some(rooms);
        }
    }
}

#[test]
fn the_split_takes_any_input_without_panicking() {
    assert_eq!(room_capacities::<0>(&[], 5), None);
    assert_eq!(room_capacities(&[3, 0], 5), None);
    assert_eq!(room_capacities(&[1], usize::MAX), Some([usize::MAX]));
    let big = room_capacities(&[usize::MAX, usize::MAX], usize::MAX).unwrap();
    assert_eq!(
        big.iter().map(|&r| r as u128).sum::<u128>(),
        usize::MAX as u128
    );
    assert_eq!(
        room_capacities(&[usize::MAX, 1], 2),
        Some([1, 1]),
        "shed to one slot each"
    );
    assert_eq!(
        room_capacities(&[1, usize::MAX], usize::MAX),
        Some([1, usize::MAX - 1])
    );
}

#[test]
fn a_shrink_sheds_the_last_class_first_and_revokes_nothing() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let mut batch: Vec<_> = (0..2).map(|_| b.try_acquire(BATCH).unwrap()).collect();
    assert!(batch.iter().all(|p| !p.is_borrowed()));

    // The limit falls to 7: batch's room goes to 1, default's to 1;
    // critical keeps its 5. The batch calls out stay out.
    assert_eq!(b.resize(7), Ok(10));
    assert_eq!(rooms(&b), [5, 1, 1]);
    assert_eq!((b.capacity(), b.configured_capacity()), (7, 10));
    assert_eq!((b.share(BATCH), b.capacity_of(BATCH)), (2, 1));
    let m = b.class_metrics(BATCH).unwrap();
    assert_eq!((m.share, m.capacity, m.room_in_flight), (2, 1, 2));

    // Critical still gets its whole share, from its own room.
    let critical: Vec<_> = (0..5).map(|_| b.try_acquire(CRITICAL).unwrap()).collect();
    assert!(critical.iter().all(|p| !p.is_borrowed()));
    let default = b.try_acquire(DEFAULT).unwrap();
    assert!(!default.is_borrowed());
    // Batch is refused: its room is over its new capacity, and nothing
    // is idle to borrow. So is critical past its share, and default.
    for class in [BATCH, DEFAULT, CRITICAL] {
        assert_eq!(b.try_acquire(class).unwrap_err(), full(), "class {class}");
    }
    // One batch call back: its room holds 1 of 1, still nothing for batch.
    drop(batch.pop());
    assert_eq!(b.try_acquire(BATCH).unwrap_err(), full());
    drop(batch.pop());
    let again = b.try_acquire(BATCH).unwrap();
    assert!(!again.is_borrowed());
    assert_eq!(b.try_acquire(BATCH).unwrap_err(), full());

    // The limit comes back: batch's second slot and default's two are
    // free again.
    assert_eq!(b.resize(10), Ok(7));
    assert_eq!(rooms(&b), [5, 3, 2]);
    let more: Vec<_> = (0..3).map(|_| b.try_acquire(BATCH).unwrap()).collect();
    assert_eq!(b.in_flight(), 10);
    drop((critical, default, again, more));
    assert_eq!(b.in_flight(), 0);
}

#[test]
fn the_critical_class_is_shed_last_and_restored_first() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let mut seen = Vec::new();
    for total in (3..=10).rev().chain(4..=10) {
        b.resize(total).unwrap();
        seen.push(rooms(&b));
    }
    assert_eq!(
        seen,
        [
            [5, 3, 2],
            [5, 3, 1],
            [5, 2, 1],
            [5, 1, 1],
            [4, 1, 1],
            [3, 1, 1],
            [2, 1, 1],
            [1, 1, 1],
            [2, 1, 1],
            [3, 1, 1],
            [4, 1, 1],
            [5, 1, 1],
            [5, 2, 1],
            [5, 3, 1],
            [5, 3, 2],
        ]
    );
    // At one slot a class, critical can still wait in its room and is
    // served when its slot comes back.
    b.resize(3).unwrap();
    let held = b.try_acquire(CRITICAL).unwrap();
    let others = [
        b.try_acquire(DEFAULT).unwrap(),
        b.try_acquire(BATCH).unwrap(),
    ];
    let mut wait = Task::pending(b.acquire_timeout(CRITICAL, 10 * MS));
    drop(held);
    assert!(!wait.ready().unwrap().is_borrowed());
    drop(others);
}

#[test]
fn a_grow_wakes_a_waiter_of_another_class_to_borrow_the_new_slot() {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 2)], &clock);
    b.resize(2).unwrap();
    assert_eq!(rooms(&b), [1, 1]);
    let _web = b.try_acquire(0).unwrap();
    let _jobs = b.try_acquire(1).unwrap();
    let mut jobs = Task::pending(b.acquire_timeout(1, 100 * MS));
    // Web's room grows; nobody waits in it: jobs' first waiter is woken
    // and borrows the slot.
    b.resize(3).unwrap();
    assert_eq!(rooms(&b), [2, 1]);
    assert!(jobs.woken());
    let p = jobs.ready().unwrap();
    assert_eq!((p.class(), p.room()), (1, 0));
}

#[test]
fn a_total_out_of_range_is_a_typed_error_and_changes_nothing() {
    let clock = ManualClock::new();
    let b = three(&clock);
    for total in [0, 1, 2] {
        assert_eq!(
            b.resize(total),
            Err(PartitionConfigError::CapacityBelowClasses {
                requested: total,
                classes: 3
            })
        );
    }
    let max = Bulkhead::<()>::MAX_PERMITS;
    assert_eq!(b.max_capacity(), max);
    assert_eq!(
        b.resize(max + 1),
        Err(PartitionConfigError::ShareTooLarge {
            class: "search",
            requested: max + 1,
            max
        })
    );
    assert!(!b.resize(usize::MAX).unwrap_err().to_string().is_empty());
    assert_eq!(rooms(&b), [5, 3, 2]);
    // The largest total is taken; every room stays within a bulkhead's.
    assert_eq!(b.resize(max), Ok(10));
    assert_eq!(b.capacity(), max);
    assert!(rooms(&b).iter().all(|&r| r <= max));
    assert_eq!(b.resize(3), Ok(max));
    let e = PartitionConfigError::CapacityBelowClasses {
        requested: 2,
        classes: 3,
    };
    assert!(e.to_string().contains("below"));
}

/// Real threads resizing at once: when they are done the rooms are the
/// split of one total, the one asked last, never a mix of two.
#[test]
fn racing_resizes_end_on_the_split_of_the_last_total() {
    static B: PartitionedBulkhead<StdClock, 3> = PartitionedBulkhead::new(
        "threads",
        [("critical", 5), ("default", 3), ("batch", 2)],
        StdClock,
    );
    for round in 0..200 {
        let threads: Vec<_> = [(3, 20), (4, 9)]
            .into_iter()
            .map(|(low, high)| {
                thread::spawn(move || {
                    for i in 0..50 {
                        B.resize(if i % 2 == 0 { low } else { high }).unwrap();
                    }
                    high
                })
            })
            .collect();
        let lasts: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let total = B.capacity();
        assert!(lasts.contains(&total), "round {round}: {total}");
        assert_eq!(
            Some(rooms(&B)),
            room_capacities(&[5, 3, 2], total),
            "round {round}"
        );
        // The total asked last is what resize reports as the old one.
        assert_eq!(B.resize(10), Ok(total));
    }
}

/// `AdaptiveLimit` steering a partitioned bulkhead: timeouts take the
/// total down one window at a time, the last class first, and never below
/// one slot a class whatever the algorithm's minimum; successes with the
/// limit in use bring it back, critical first.
#[test]
fn an_adaptive_limit_sheds_the_last_class_first_and_restores_the_first() {
    let clock = ManualClock::new();
    let b = three(&clock);
    let aimd = Aimd::builder()
        .initial_limit(10)
        .min_limit(1)
        .build()
        .unwrap();
    let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
    let call = |signal: Signal| {
        let started = clock.now();
        let p = b.try_acquire(CRITICAL).unwrap();
        clock.advance(MS);
        drop(p);
        limit.record(&b, started, signal)
    };
    let mut seen = Vec::new();
    for _ in 0..9 {
        call(Signal::Timeout);
        seen.push(rooms(&b));
    }
    // 10 × 0.9 each window, floored: 9, 8, 7, 6, 5, 4, 3, then the
    // algorithm goes on to 2 and 1 but the rooms stop at 1 slot each.
    assert_eq!(
        seen,
        [
            [5, 3, 1],
            [5, 2, 1],
            [5, 1, 1],
            [4, 1, 1],
            [3, 1, 1],
            [2, 1, 1],
            [1, 1, 1],
            [1, 1, 1],
            [1, 1, 1],
        ]
    );
    // Back up: calls with the limit in use (half of it in flight) grow
    // it by one a window; critical gets its share back first.
    let mut seen = Vec::new();
    while b.capacity() < 10 {
        let held: Vec<_> = (0..b.capacity() / 2)
            .map(|_| b.try_acquire(CRITICAL).unwrap())
            .collect();
        if let Some(change) = call(Signal::Success) {
            seen.push((change.to, rooms(&b)));
        }
        drop(held);
    }
    assert_eq!(
        seen,
        [
            // (The algorithm's 2 and 3 leave the rooms at 1 each.)
            (4, [2, 1, 1]),
            (5, [3, 1, 1]),
            (6, [4, 1, 1]),
            (7, [5, 1, 1]),
            (8, [5, 2, 1]),
            (9, [5, 3, 1]),
            (10, [5, 3, 2]),
        ]
    );
    // tick closes a due window on a partitioned bulkhead too.
    let limit = AdaptiveLimit::with_window(Aimd::new(), Duration::from_secs(1), 1, clock.now());
    clock.advance(Duration::from_secs(1));
    assert_eq!(limit.tick(&b), None);
    assert_eq!(limit.windows(), 1);
}
