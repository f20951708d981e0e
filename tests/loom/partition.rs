use super::*;
use watertight::partition::{room_capacities, PartitionError, PartitionedBulkhead};

type Clock = std::sync::Arc<ManualClock>;

struct Parts {
    pb: PartitionedBulkhead<Clock, 2>,
    active: AtomicUsize,
}

fn parts() -> Arc<Parts> {
    Arc::new(Parts {
        pb: PartitionedBulkhead::try_new(
            "loom",
            [("a", 1), ("b", 1)],
            std::sync::Arc::new(ManualClock::new()),
        )
        .unwrap(),
        active: AtomicUsize::new(0),
    })
}

impl Parts {
    fn enter(&self) {
        let now = self.active.fetch_add(1, SeqCst) + 1;
        assert!(now <= 2, "{now} slots held, capacity 2");
    }

    fn leave(&self) {
        self.active.fetch_sub(1, SeqCst);
    }

    fn assert_balanced(&self) {
        assert_eq!(self.active.load(SeqCst), 0);
        assert_eq!(self.pb.in_flight(), 0);
        for c in 0..2 {
            assert_eq!(self.pb.class_metrics(c).unwrap().waiting, 0);
        }
    }
}

/// (P1) Class `b` holds its own room and borrows `a`'s, racing class
/// `a`'s wait: `a` is served from its own room, by the borrower's
/// release if the borrower was first.
#[test]
fn a_borrower_hands_the_owner_its_slot() {
    model(|| {
        let s = parts();
        let own = s.pb.try_acquire(1).unwrap();
        s.enter();
        let borrower = {
            let s = s.clone();
            thread::spawn(move || match s.pb.try_acquire(1) {
                Ok(p) => {
                    assert_eq!((p.class(), p.room()), (1, 0));
                    s.enter();
                    s.leave();
                    drop(p);
                    true
                }
                Err(e) => {
                    assert_eq!(e, PartitionError::Refused(AcquireError::Full));
                    false
                }
            })
        };
        let owner = {
            let s = s.clone();
            thread::spawn(move || {
                let p = block_on(s.pb.acquire_until(0, Instant::MAX))
                    .expect("a class under its share is served");
                assert_eq!((p.class(), p.room()), (0, 0));
                s.enter();
                s.leave();
            })
        };
        let borrowed = borrower.join().unwrap();
        owner.join().unwrap();
        s.leave();
        drop(own);
        s.assert_balanced();
        let (a, b) = (
            s.pb.class_metrics(0).unwrap(),
            s.pb.class_metrics(1).unwrap(),
        );
        assert_eq!(b.borrowed, usize::from(borrowed));
        assert_eq!(a.refused_full + a.refused_timed_out, 0);
        assert_eq!(b.refused_full, usize::from(!borrowed));
        // Room a: the owner, and the borrower if it got in.
        assert_eq!(a.room_accepted, 1 + usize::from(borrowed));
    });
}

/// (P3) A waiter of class `a` (its room held) while two releases race
/// it: a slot of `b`'s room, which nobody of `b` waits for (so `a`'s
/// first waiter is woken to borrow it), and `a`'s own slot (handed to
/// the waiter). Whatever the order, the waiter ends with exactly one
/// slot, the total holds, and once everyone is done every slot is free:
/// the borrow and the hand-off never both land, nor neither.
#[test]
fn a_borrow_racing_a_hand_off_takes_one_slot() {
    model(|| {
        // A static (loom's, made anew for each execution) so that
        // permits can move to the releasing threads.
        loom::lazy_static! {
            static ref P3: Parts = Parts {
                pb: PartitionedBulkhead::try_new(
                    "loom",
                    [("a", 1), ("b", 1)],
                    std::sync::Arc::new(ManualClock::new()),
                )
                .unwrap(),
                active: AtomicUsize::new(0),
            };
        }
        let s: &'static Parts = &P3;
        let a_slot = s.pb.try_acquire(0).unwrap();
        let b_slot = s.pb.try_acquire(1).unwrap();
        s.enter();
        s.enter();
        let waiter = thread::spawn(move || {
            let p = block_on(s.pb.acquire_until(0, Instant::MAX))
                .expect("a class under its share is served");
            s.enter();
            let room = p.room();
            s.leave();
            drop(p);
            room
        });
        let release = |p| {
            thread::spawn(move || {
                s.leave();
                drop(p);
            })
        };
        let (r1, r2) = (release(b_slot), release(a_slot));
        r1.join().unwrap();
        r2.join().unwrap();
        let room = waiter.join().unwrap();
        assert!(room <= 1);
        s.assert_balanced();
        let a = s.pb.class_metrics(0).unwrap();
        assert_eq!(a.borrowed, usize::from(room == 1));
        assert_eq!(a.refused_full + a.refused_timed_out, 0);
    });
}

/// (P2) Two classes race for each other's idle rooms: every call that
/// finds a free slot anywhere gets one, and the total holds.
#[test]
fn two_classes_borrow_at_once() {
    model(|| {
        let s = parts();
        let spawn = |class: usize| {
            let s = s.clone();
            thread::spawn(move || {
                let mut got = 0;
                for _ in 0..2 {
                    if let Ok(p) = s.pb.try_acquire(class) {
                        s.enter();
                        got += 1;
                        std::mem::forget(p);
                    }
                }
                got
            })
        };
        let (a, b) = (spawn(0), spawn(1));
        let got = a.join().unwrap() + b.join().unwrap();
        // Four tries on two slots, none given back: both slots taken.
        assert_eq!(got, 2);
        assert_eq!(s.pb.in_flight(), 2);
        let refused: usize = (0..2)
            .map(|c| s.pb.class_metrics(c).unwrap().refused_full)
            .sum();
        assert_eq!(refused, 2);
    });
}
/// (P4) Two resizes race: one applies the total asked last (the other
/// leaves it its total if it finds it at work), so when both are done
/// the rooms are the split of the last total, never a mix of the two.
/// Which was last is told by the old totals they return.
#[test]
fn racing_resizes_end_on_the_last_total() {
    model(|| {
        let s = parts();
        let spawn = |total: usize| {
            let s = s.clone();
            thread::spawn(move || s.pb.resize(total).unwrap())
        };
        let (a, b) = (spawn(3), spawn(4));
        let (a_old, b_old) = (a.join().unwrap(), b.join().unwrap());
        // One swapped first (it saw the configured 2), the other saw its.
        let last = match (a_old, b_old) {
            (2, 3) => 4,
            (4, 2) => 3,
            other => panic!("old totals {other:?}"),
        };
        assert_eq!(s.pb.capacity(), last);
        let rooms = [s.pb.capacity_of(0), s.pb.capacity_of(1)];
        assert_eq!(Some(rooms), room_capacities(&[1, 1], last));
    });
}

/// (P5) A grow racing a waiter of another class: room `a` grows while
/// class `b`'s call, both rooms held, goes to wait. Either the resize
/// sees the waiter and wakes it, or the waiter, queued, sees the free
/// slot itself: it borrows the new slot, never left waiting (loom
/// would report the thread blocked for ever).
#[test]
fn a_grow_racing_a_waiter_of_another_class_is_borrowed() {
    model(|| {
        let s = parts();
        let a_slot = s.pb.try_acquire(0).unwrap();
        let b_slot = s.pb.try_acquire(1).unwrap();
        let waiter = {
            let s = s.clone();
            thread::spawn(move || {
                let p =
                    block_on(s.pb.acquire_until(1, Instant::MAX)).expect("the new slot is free");
                (p.class(), p.room())
            })
        };
        let resizer = {
            let s = s.clone();
            thread::spawn(move || s.pb.resize(3).unwrap())
        };
        assert_eq!(resizer.join().unwrap(), 2);
        assert_eq!(waiter.join().unwrap(), (1, 0));
        drop((a_slot, b_slot));
        assert_eq!([s.pb.capacity_of(0), s.pb.capacity_of(1)], [2, 1]);
        s.assert_balanced();
    });
}
