//! A bounded wait queue (`with_max_waiters`).

use super::*;

// ---------------------------------------------------------------------------
// A bounded wait queue (`with_max_waiters`).
// ---------------------------------------------------------------------------

/// (waiting, rejected_queue_full, rejected_timed_out, cancelled_waits)
#[track_caller]
fn assert_queue<C>(bh: &Bulkhead<C>, expected: (usize, usize, usize, usize)) {
    let m = bh.metrics();
    assert_eq!(
        (
            m.waiting,
            m.rejected_queue_full,
            m.rejected_timed_out,
            m.cancelled_waits
        ),
        expected,
        "(waiting, queue full, timed out, cancelled)"
    );
    assert_eq!(bh.waiting(), m.waiting);
}

#[test]
fn a_bounded_queue_refuses_the_one_too_many_at_once() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("exports", 1, &clock).with_max_waiters(2);
    assert_eq!(bh.max_waiters(), Some(2));
    let held = bh.try_acquire().unwrap();
    let mut a = Task::pending(bh.acquire_timeout(100 * MS));
    let mut b = Task::pending(bh.acquire());
    // The third is refused on its first poll, without waiting (no clock
    // moves) and without a place.
    let mut c = Task::new(bh.acquire_timeout(100 * MS));
    assert_eq!(c.ready().unwrap_err(), AcquireError::QueueFull);
    assert_eq!(
        now_or_never(bh.acquire_many(1)).unwrap_err(),
        AcquireError::QueueFull
    );
    // A call that does not wait is refused as `Full`, as ever.
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    assert_queue(&bh, (2, 2, 0, 0));
    assert_eq!(bh.metrics().rejected(), 3);

    // A release hands the permit to `a` and gives its place back at once,
    // before `a` has run: a newcomer may queue.
    drop(held);
    assert!(a.woken());
    assert_queue(&bh, (1, 2, 0, 0));
    let mut d = Task::pending(bh.acquire());
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::QueueFull
    );
    let pa = a.ready().unwrap();
    drop(pa);
    // `b`'s permit, dropped at once, goes on to `d`.
    assert!(b.ready().is_ok());
    assert_queue(&bh, (0, 3, 0, 0));
    assert!(d.ready().is_ok());
    assert_counters(&bh, (4, 1, 0, 0, 0));
}

#[test]
fn cancel_timeout_and_close_give_places_back() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("exports", 1, &clock).with_max_waiters(2);
    let _held = bh.try_acquire().unwrap();
    let a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire_timeout(10 * MS));
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::QueueFull
    );

    // A cancelled wait's place is free again.
    drop(a);
    assert_queue(&bh, (1, 1, 0, 1));
    let c = Task::pending(bh.acquire());
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::QueueFull
    );

    // So is a timed-out one's.
    clock.advance(10 * MS);
    assert_eq!(b.ready().unwrap_err(), AcquireError::TimedOut);
    assert_queue(&bh, (1, 2, 1, 1));
    let mut d = Task::pending(bh.acquire());

    // Closing fails both waiters and frees every place; later waits are
    // refused as closed, not as full.
    let mut c = c;
    bh.close();
    assert_queue(&bh, (0, 2, 1, 1));
    assert_eq!(c.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(d.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::Closed
    );
    assert_eq!(bh.metrics().rejected_queue_full, 2);
}

#[test]
fn zero_max_waiters_never_waits() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("strict", 1, &clock).with_max_waiters(0);
    // A free permit is still taken by a waiting call.
    let held = now_or_never(bh.acquire_timeout(10 * MS)).unwrap();
    assert_eq!(
        now_or_never(bh.acquire_timeout(10 * MS)).unwrap_err(),
        AcquireError::QueueFull
    );
    drop(held);
    assert!(now_or_never(bh.acquire()).is_ok());
    assert_queue(&bh, (0, 1, 0, 0));
}

#[test]
fn at_the_bound_a_newcomer_still_takes_permits_no_waiter_can_use() {
    // The multi-permit rule holds at the bound too: a waiter for 3 keeps
    // its place while 1 is free; a newcomer for 1 takes that one (it would
    // without a bound), a newcomer for 2 is refused as the queue is full.
    let clock = ManualClock::new();
    let bh = Bulkhead::new("gpu", 3, &clock).with_max_waiters(1);
    let two = bh.try_acquire_many(2).unwrap();
    let mut big = Task::pending(bh.acquire_many(3));
    let one = now_or_never(bh.acquire()).unwrap();
    assert_eq!(
        now_or_never(bh.acquire_many(2)).unwrap_err(),
        AcquireError::QueueFull
    );
    assert_queue(&bh, (1, 1, 0, 0));
    drop((two, one));
    assert_eq!(big.ready().unwrap().count(), 3);
    assert_queue(&bh, (0, 1, 0, 0));
}

/// A waker whose `clone` panics: the bulkhead clones the waker it queues
/// with, under its lock, before linking the node.
fn panicking_clone_waker() -> std::task::Waker {
    use std::task::{RawWaker, RawWakerVTable, Waker};
    fn clone(_: *const ()) -> RawWaker {
        panic!("this waker cannot be cloned");
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

#[test]
fn a_panic_while_queueing_gives_the_reserved_place_back() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("exports", 1, &clock).with_max_waiters(1);
    let _held = bh.try_acquire().unwrap();
    let waker = panicking_clone_waker();
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut fut = pin!(bh.acquire());
        let mut cx = std::task::Context::from_waker(&waker);
        let _ = std::future::Future::poll(fut.as_mut(), &mut cx);
    }));
    assert!(outcome.is_err());
    // Nothing leaked: the one place is free for the next waiter.
    assert_queue(&bh, (0, 0, 0, 0));
    let _a = Task::pending(bh.acquire());
    assert_eq!(
        now_or_never(bh.acquire()).unwrap_err(),
        AcquireError::QueueFull
    );
}

#[test]
fn max_waiters_is_checked() {
    let clock = ManualClock::new();
    let max = Bulkhead::<&ManualClock>::MAX_WAITERS;
    assert!(max >= 65_534);
    let b = Bulkhead::new("x", 1, &clock)
        .try_with_max_waiters(max)
        .unwrap();
    assert_eq!(b.max_waiters(), Some(max));
    let err = Bulkhead::new("x", 1, &clock)
        .try_with_max_waiters(max + 1)
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::MaxWaitersTooLarge {
            requested: max + 1,
            max
        }
    );
    assert_eq!(Bulkhead::new("x", 1, &clock).max_waiters(), None);
    let outcome = panic::catch_unwind(|| Bulkhead::new("x", 1, StdClock).with_max_waiters(max + 1));
    assert!(outcome.is_err());
}

#[test]
fn the_bound_holds_across_threads_and_every_call_is_counted_once() {
    const THREADS: usize = 6;
    let rounds = if cfg!(miri) { 5 } else { 300 };
    let bh = Arc::new(Bulkhead::new("threads", 2, StdClock).with_max_waiters(3));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (bh, stop) = (Arc::clone(&bh), Arc::clone(&stop));
        thread::spawn(move || {
            let mut max = 0;
            while !stop.load(Ordering::Relaxed) {
                max = max.max(bh.waiting());
                thread::yield_now();
            }
            max
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let bh = Arc::clone(&bh);
            thread::spawn(move || {
                let mut ok = 0;
                for _ in 0..rounds {
                    if let Ok(p) = future::block_on(bh.acquire()) {
                        ok += 1;
                        thread::yield_now();
                        drop(p);
                    }
                }
                ok
            })
        })
        .collect();
    let ok: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let max_waiting = sampler.join().unwrap();
    let m = bh.metrics();
    assert!(max_waiting <= 3, "waiting reached {max_waiting}");
    assert_eq!((m.waiting, m.in_flight, m.available), (0, 0, 2));
    assert_eq!(m.accepted, ok);
    assert_eq!(m.rejected_timed_out, 0);
    assert_eq!(ok + m.rejected_queue_full, THREADS * rounds);
    assert_eq!(m.rejected(), m.rejected_queue_full);
}
