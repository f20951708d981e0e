//! Loom models of the bulkhead's lock-free protocol.
//!
//! Every model runs two or three threads against one small bulkhead and checks:
//!
//! - **the limit holds**: a loom counter, raised after a permit is taken and
//!   lowered before it is given back, never exceeds the capacity in force;
//! - **no permit is lost or invented**: once every thread has joined,
//!   `available == capacity`, `in_flight == 0` and `waiting == 0`;
//! - **no wake-up is lost**: a waiter driven by `loom::future::block_on` that
//!   is owed a permit completes (loom reports a deadlock otherwise);
//! - **the counters add up**: every attempt is counted once, as accepted, as a
//!   rejection of the right kind, or as a cancelled wait.
//!
//! The other primitives' models are in a module each beside this file
//! (`breaker.rs`, `rate.rs`, `partition.rs`, …), each with its own list of
//! what it checks.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom`
//! (append `breaker` to run only the breaker's models).
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::{AcquireError, Bulkhead, Permit};

/// Runs `f` under loom; without `LOOM_MAX_PREEMPTIONS` the bound defaults to 2,
/// so that a bare `cargo test` finishes in seconds too.
fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// A bulkhead and the model's own count of the permits held.
struct Shared<C = ManualClock> {
    bh: Bulkhead<C>,
    active: AtomicUsize,
}

impl Shared {
    fn new(capacity: usize) -> Arc<Self> {
        Self::with_clock(capacity, ManualClock::new())
    }
}

impl<C> Shared<C> {
    fn with_clock(capacity: usize, clock: C) -> Arc<Self> {
        Arc::new(Shared {
            bh: Bulkhead::new("loom", capacity, clock),
            active: AtomicUsize::new(0),
        })
    }

    /// Counts `permit` as held and checks that at most `limit` are; returns
    /// how many are held, this one included.
    fn enter(&self, permit: &Permit<'_, C>, limit: usize) -> usize {
        let now = self.active.fetch_add(permit.count(), SeqCst) + permit.count();
        assert!(now <= limit, "{now} permits held, limit {limit}");
        now
    }

    /// Stops counting `permit`, then gives it back.
    fn leave(&self, permit: Permit<'_, C>) {
        self.active.fetch_sub(permit.count(), SeqCst);
        drop(permit);
    }

    /// Holds `permit` for a moment: enter, check the word agrees, leave.
    fn work(&self, permit: Permit<'_, C>, limit: usize) {
        self.enter(&permit, limit);
        let in_flight = self.bh.in_flight();
        assert!(
            in_flight >= 1 && in_flight <= limit,
            "in flight {in_flight}, limit {limit}"
        );
        self.leave(permit);
    }

    /// Nothing held, nothing waiting, every permit free.
    fn assert_balanced(&self, capacity: usize) {
        let m = self.bh.metrics();
        assert_eq!(self.active.load(SeqCst), 0);
        assert_eq!(m.capacity, capacity, "{m:?}");
        assert_eq!(m.available, capacity, "{m:?}");
        assert_eq!(m.in_flight, 0, "{m:?}");
        assert_eq!(m.waiting, 0, "{m:?}");
    }
}

/// Polls `fut` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(fut).poll(&mut cx)
}

/// (1) Two threads race `try_acquire` on one permit.
#[test]
fn try_acquire_two_threads_one_permit() {
    model(|| {
        let s = Shared::new(1);
        let spawn = || {
            let s = s.clone();
            thread::spawn(move || match s.bh.try_acquire() {
                Ok(p) => {
                    s.work(p, 1);
                    true
                }
                Err(e) => {
                    assert_eq!(e, AcquireError::Full);
                    false
                }
            })
        };
        let (a, b) = (spawn(), spawn());
        let took = usize::from(a.join().unwrap()) + usize::from(b.join().unwrap());

        assert!(took >= 1, "the first try_acquire finds the permit free");
        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, took);
        assert_eq!(m.accepted + m.rejected(), 2);
        assert_eq!(m.rejected_full, 2 - took);
        assert_eq!(m.peak_in_flight, 1);
    });
}

/// (2) A waiter against a releasing thread: the waiter always completes.
#[test]
fn waiter_is_woken_by_release() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let s2 = s.clone();
        let waiter = thread::spawn(move || {
            let p = block_on(s2.bh.acquire()).expect("a permit is released for it");
            s2.work(p, 1);
        });

        s.leave(held);
        waiter.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 2);
        assert_eq!(m.rejected() + m.cancelled_waits, 0);
    });
}

/// A thread that polls one `acquire()` once: if it got the permit it works
/// with it and returns `true`; otherwise it drops the future, cancelling the
/// wait, and returns `false`.
fn spawn_poll_once_then_cancel(s: &Arc<Shared>) -> thread::JoinHandle<bool> {
    let s = s.clone();
    thread::spawn(move || {
        let mut fut = pin!(s.bh.acquire());
        match poll_once(&mut fut) {
            Poll::Ready(r) => {
                s.work(r.expect("only Full or a permit is possible"), 1);
                true
            }
            // Dropped at the end of the closure: the wait is cancelled.
            Poll::Pending => false,
        }
    })
}

/// (3a) A waiter polled once (so registered, unless the release came first)
/// and then dropped, concurrently with a release: the permit comes back and
/// a third party can take it.
#[test]
fn cancelled_waiter_gives_the_permit_back() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let waiter = spawn_poll_once_then_cancel(&s);

        s.leave(held);
        let took = waiter.join().unwrap();

        s.assert_balanced(1);
        // A waiter dropped after the permit was handed to it (before it
        // looked) counts as accepted and gives the permit back; one dropped
        // while still queued counts as a cancelled wait: once either way.
        let m = s.bh.metrics();
        assert_eq!(m.accepted + m.cancelled_waits, 2);
        assert!(took || m.accepted == 1 || m.cancelled_waits == 0);
        assert_eq!(m.rejected(), 0);

        let third = s.bh.try_acquire().expect("the permit is back");
        s.work(third, 1);
        s.assert_balanced(1);
    });
}

/// (3b) As (3a) with a second, patient waiter: whatever wake-up the cancelled
/// waiter received is passed on, so the patient one completes.
#[test]
fn cancelled_waiter_passes_the_wake_up_on() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let quitter = spawn_poll_once_then_cancel(&s);
        let s2 = s.clone();
        let patient = thread::spawn(move || {
            let p = block_on(s2.bh.acquire()).expect("a permit is released for it");
            s2.work(p, 1);
        });

        s.leave(held);
        let took = quitter.join().unwrap();
        patient.join().unwrap();

        s.assert_balanced(1);
        // The quitter: accepted (it took the permit, or was handed it and
        // gave it back) or cancelled (still queued), once.
        let m = s.bh.metrics();
        assert_eq!(m.accepted + m.cancelled_waits, 3);
        assert!(!took || m.cancelled_waits == 0);
        assert_eq!(m.rejected(), 0);
    });
}

/// (4) `close` concurrent with a waiter and a release: the waiter gets a
/// permit or `Closed`, never hangs, and the permits balance.
#[test]
fn close_wakes_the_waiter() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let s2 = s.clone();
        let waiter = thread::spawn(move || match block_on(s2.bh.acquire()) {
            Ok(p) => {
                s2.work(p, 1);
                true
            }
            Err(e) => {
                assert_eq!(e, AcquireError::Closed);
                false
            }
        });
        let s3 = s.clone();
        let closer = thread::spawn(move || assert!(s3.bh.close()));

        s.leave(held);
        let took = waiter.join().unwrap();
        closer.join().unwrap();

        s.assert_balanced(1);
        assert!(s.bh.is_closed());
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(took));
        assert_eq!(m.rejected_closed, usize::from(!took));
        assert_eq!(
            m.rejected_full + m.rejected_timed_out + m.cancelled_waits,
            0
        );
        assert_eq!(s.bh.try_acquire().unwrap_err(), AcquireError::Closed);
    });
}

/// (4b) `close` against a waiter whose permit never comes: it must get `Closed`.
#[test]
fn close_fails_a_stuck_waiter() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();

        let s2 = s.clone();
        let waiter = thread::spawn(move || block_on(s2.bh.acquire()).map(drop));
        s.bh.close();
        assert_eq!(waiter.join().unwrap(), Err(AcquireError::Closed));

        drop(held);
        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!((m.accepted, m.rejected_closed), (1, 1));
    });
}

/// (5a) Shrink 2 -> 1 concurrent with a waiter and a `try_acquire`: once the
/// resize has completed, no permit is granted that would put more than one
/// in flight.
#[test]
fn shrink_while_acquiring() {
    model(|| {
        let s = Shared::new(2);
        let resized = Arc::new(AtomicBool::new(false));

        let (s1, r1) = (s.clone(), resized.clone());
        let waiter = thread::spawn(move || {
            let after = r1.load(SeqCst);
            let p = block_on(s1.bh.acquire()).expect("never closed");
            let now = s1.enter(&p, 2);
            if after {
                assert!(now <= 1, "{now} held after the shrink to 1");
            }
            s1.leave(p);
        });
        let (s2, r2) = (s.clone(), resized.clone());
        let other = thread::spawn(move || {
            let after = r2.load(SeqCst);
            if let Ok(p) = s2.bh.try_acquire() {
                let now = s2.enter(&p, 2);
                if after {
                    assert!(now <= 1, "{now} held after the shrink to 1");
                }
                s2.leave(p);
            }
        });

        assert_eq!(s.bh.resize(1), Ok(2));
        resized.store(true, SeqCst);
        waiter.join().unwrap();
        other.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted + m.rejected_full, 2);
        assert!(m.accepted >= 1);
    });
}

/// (5b) Grow 1 -> 2 while the only permit is held: the waiter is served by
/// the new permit alone (the resize wakes it), and at most two are held.
#[test]
fn grow_wakes_a_waiter() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let s1 = s.clone();
        let waiter = thread::spawn(move || {
            let p = block_on(s1.bh.acquire()).expect("the grow frees a permit");
            assert_eq!(s1.enter(&p, 2), 2);
            s1.leave(p);
        });
        let s2 = s.clone();
        let resizer = thread::spawn(move || assert_eq!(s2.bh.resize(2), Ok(1)));

        waiter.join().unwrap();
        resizer.join().unwrap();
        s.leave(held);

        s.assert_balanced(2);
        assert_eq!(s.bh.metrics().accepted, 2);
    });
}

/// (5c) Grow 1 -> 2 concurrent with a release and a `try_acquire`: at most
/// two permits are held, and two only once the grow has taken effect.
#[test]
fn grow_while_releasing() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let s1 = s.clone();
        let other = thread::spawn(move || match s1.bh.try_acquire() {
            Ok(p) => {
                if s1.enter(&p, 2) == 2 {
                    assert_eq!(s1.bh.capacity(), 2, "two held before the grow");
                }
                s1.leave(p);
                true
            }
            Err(e) => {
                assert_eq!(e, AcquireError::Full);
                false
            }
        });
        let s2 = s.clone();
        let resizer = thread::spawn(move || assert_eq!(s2.bh.resize(2), Ok(1)));

        s.leave(held);
        let took = other.join().unwrap();
        resizer.join().unwrap();

        s.assert_balanced(2);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(took));
        assert_eq!(m.rejected_full, usize::from(!took));
    });
}

/// (5d) Shrink 2 -> 1 under a waiter for two permits: it gets both (taken
/// before the shrink) or `ExceedsCapacity`, never hangs, and leaves the queue.
#[test]
fn shrink_below_a_many_waiter() {
    model(|| {
        let s = Shared::new(2);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 2);

        let s1 = s.clone();
        let waiter = thread::spawn(move || match block_on(s1.bh.acquire_many(2)) {
            Ok(p) => {
                s1.enter(&p, 2);
                s1.leave(p);
                true
            }
            Err(e) => {
                assert_eq!(
                    e,
                    AcquireError::ExceedsCapacity {
                        requested: 2,
                        capacity: 1
                    }
                );
                false
            }
        });
        let s2 = s.clone();
        let resizer = thread::spawn(move || assert_eq!(s2.bh.resize(1), Ok(2)));

        s.leave(held);
        let took = waiter.join().unwrap();
        resizer.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(took));
        assert_eq!(m.rejected() + m.cancelled_waits, 0);
    });
}

/// (6) `acquire_many(2)` waiting for two permits released one at a time, by
/// two threads (owned permits, so that one can move to the releasing thread).
#[test]
fn acquire_many_waits_for_two_releases() {
    model(|| {
        let bh = std::sync::Arc::new(Bulkhead::new("loom", 2, ManualClock::new()));
        let active = Arc::new(AtomicUsize::new(0));
        let a = bh.try_acquire_owned().unwrap();
        let b = bh.try_acquire_owned().unwrap();
        active.store(2, SeqCst);

        let (bh1, active1) = (bh.clone(), active.clone());
        let waiter = thread::spawn(move || {
            let p = block_on(bh1.acquire_many(2)).expect("both permits come back");
            assert_eq!(p.count(), 2);
            let now = active1.fetch_add(2, SeqCst) + 2;
            assert!(now <= 2, "{now} permits held, limit 2");
            assert_eq!(bh1.in_flight(), 2);
            active1.fetch_sub(2, SeqCst);
            drop(p);
        });
        let active2 = active.clone();
        let releaser = thread::spawn(move || {
            active2.fetch_sub(1, SeqCst);
            drop(a);
        });

        active.fetch_sub(1, SeqCst);
        drop(b);
        releaser.join().unwrap();
        waiter.join().unwrap();

        let m = bh.metrics();
        assert_eq!(active.load(SeqCst), 0);
        assert_eq!(
            (m.capacity, m.available, m.in_flight, m.waiting),
            (2, 2, 0, 0),
            "{m:?}"
        );
        assert_eq!(m.accepted, 3);
        assert_eq!(m.rejected() + m.cancelled_waits, 0);
    });
}

/// A thread that waits for one permit until `deadline`, works with it if it
/// gets it, and returns whether it did; the only error allowed is `TimedOut`.
fn spawn_deadline_waiter(
    s: &Arc<Shared<std::sync::Arc<ManualClock>>>,
    deadline: Instant,
) -> thread::JoinHandle<bool> {
    let s = s.clone();
    thread::spawn(move || match block_on(s.bh.acquire_until(deadline)) {
        Ok(p) => {
            s.work(p, 1);
            true
        }
        Err(e) => {
            assert_eq!(e, AcquireError::TimedOut);
            false
        }
    })
}

/// (7) A deadline wait against a clock advance and a release: the waiter
/// gets the permit or `TimedOut`, never hangs, and the counters add up.
#[test]
fn deadline_wait_against_advance_and_release() {
    model(|| {
        let clock = std::sync::Arc::new(ManualClock::new());
        let s = Shared::with_clock(1, clock.clone());
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);
        let deadline = clock.now() + Duration::from_millis(100);

        let waiter = spawn_deadline_waiter(&s, deadline);
        let ticker = thread::spawn(move || clock.advance(Duration::from_millis(100)));

        s.leave(held);
        let took = waiter.join().unwrap();
        ticker.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(took));
        assert_eq!(m.rejected_timed_out, usize::from(!took));
        assert_eq!(m.rejected_full + m.rejected_closed + m.cancelled_waits, 0);
    });
}

/// (8) Two single waiters, two releases: both waiters complete.
#[test]
fn two_waiters_two_releases() {
    model(|| {
        let s = Shared::new(2);
        let a = s.bh.try_acquire().unwrap();
        let b = s.bh.try_acquire().unwrap();
        s.enter(&a, 2);
        s.enter(&b, 2);

        let spawn = || {
            let s = s.clone();
            thread::spawn(move || {
                let p = block_on(s.bh.acquire()).expect("a permit is released for it");
                s.work(p, 2);
            })
        };
        let (w1, w2) = (spawn(), spawn());

        s.leave(a);
        s.leave(b);
        w1.join().unwrap();
        w2.join().unwrap();

        s.assert_balanced(2);
        assert_eq!(s.bh.metrics().accepted, 4);
    });
}

/// (9) A waiter for two permits must not keep a single-permit waiter asleep
/// while one permit is free (see "Fairness" on `Bulkhead`).
#[test]
fn many_waiter_does_not_block_single_waiter() {
    model(|| {
        let s = Shared::new(2);
        let a = s.bh.try_acquire().unwrap();
        let b = s.bh.try_acquire().unwrap();
        s.enter(&a, 2);
        s.enter(&b, 2);

        let s1 = s.clone();
        let many = thread::spawn(move || {
            let p = block_on(s1.bh.acquire_many(2)).expect("never closed");
            s1.work(p, 2);
        });
        let s2 = s.clone();
        let one = thread::spawn(move || {
            let p = block_on(s2.bh.acquire()).expect("never closed");
            s2.work(p, 2);
        });

        // One permit comes back; the other stays out until the single
        // waiter, which that one permit can serve, has finished.
        s.leave(a);
        one.join().unwrap();
        s.leave(b);
        many.join().unwrap();

        s.assert_balanced(2);
        assert_eq!(s.bh.metrics().accepted, 4);
    });
}

/// A waker that records whether it was woken.
struct Flag(std::sync::atomic::AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn flag() -> (std::sync::Arc<Flag>, Waker) {
    let f = std::sync::Arc::new(Flag(std::sync::atomic::AtomicBool::new(false)));
    (f.clone(), Waker::from(f))
}

/// (9b) The case behind (9), on one thread: one release, one permit free;
/// the waiter for two keeps its place and is not even woken, and the
/// single-permit waiter behind it is handed the permit.
#[test]
fn many_waiter_does_not_block_single_waiter_sequential() {
    model(|| {
        let s = Shared::new(2);
        let a = s.bh.try_acquire().unwrap();
        let b = s.bh.try_acquire().unwrap();

        let (many_woken, many_waker) = flag();
        let mut many = pin!(s.bh.acquire_many(2));
        let mut cx = Context::from_waker(&many_waker);
        assert!(many.as_mut().poll(&mut cx).is_pending(), "queued");

        let (one_woken, one_waker) = flag();
        let mut one = pin!(s.bh.acquire());
        let mut cx1 = Context::from_waker(&one_waker);
        assert!(one.as_mut().poll(&mut cx1).is_pending(), "queued behind it");
        assert_eq!(s.bh.waiting(), 2);

        drop(a); // one permit back: it goes to `one`, which fits
        assert!(!many_woken.0.load(std::sync::atomic::Ordering::SeqCst));
        assert!(many.as_mut().poll(&mut cx).is_pending(), "one is not two");
        assert_eq!((s.bh.available(), s.bh.waiting()), (0, 1));
        assert!(
            one_woken.0.load(std::sync::atomic::Ordering::SeqCst),
            "the single-permit waiter is handed the free permit"
        );
        match one.as_mut().poll(&mut cx1) {
            Poll::Ready(r) => drop(r.unwrap()),
            Poll::Pending => panic!("woken, yet no permit"),
        }
        drop(b);
        assert!(many_woken.0.load(std::sync::atomic::Ordering::SeqCst));
        let r = many.as_mut().poll(&mut cx);
        match r {
            Poll::Ready(r) => assert_eq!(r.unwrap().count(), 2),
            Poll::Pending => panic!("two free, yet pending"),
        }
    });
}

/// (10) A deadline waiter and a patient waiter behind one held permit, while
/// the clock passes the deadline and the permit is released: the patient
/// waiter completes whether the first one timed out or was served.
#[test]
fn timed_out_waiter_does_not_strand_the_next() {
    model(|| {
        let clock = std::sync::Arc::new(ManualClock::new());
        let s = Shared::with_clock(1, clock.clone());
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);
        let deadline = clock.now() + Duration::from_millis(100);

        let hasty = spawn_deadline_waiter(&s, deadline);
        let s2 = s.clone();
        let patient = thread::spawn(move || {
            let p = block_on(s2.bh.acquire()).expect("never closed");
            s2.work(p, 1);
        });

        clock.advance(Duration::from_millis(100));
        s.leave(held);
        let took = hasty.join().unwrap();
        patient.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 2 + usize::from(took));
        assert_eq!(m.rejected_timed_out, usize::from(!took));
    });
}

// ===========================================================================
// The circuit breaker
// ===========================================================================

/// (11) The wait queue: two releases racing each other and one queued
/// waiter for both permits. Whatever the order, the waiter is handed both
/// (exactly once), and nothing is left over or missing.
#[test]
fn queue_two_releases_one_many_waiter() {
    model(|| {
        let bh = std::sync::Arc::new(Bulkhead::new("loom", 2, ManualClock::new()));
        let a = bh.try_acquire_owned().unwrap();
        let b = bh.try_acquire_owned().unwrap();

        let bh1 = bh.clone();
        let waiter = thread::spawn(move || {
            let p = block_on(bh1.acquire_many(2)).expect("never closed");
            assert_eq!((p.count(), bh1.in_flight()), (2, 2));
        });
        let releaser = thread::spawn(move || drop(b));
        drop(a);
        releaser.join().unwrap();
        waiter.join().unwrap();

        let m = bh.metrics();
        assert_eq!((m.available, m.in_flight, m.waiting), (2, 0, 0));
        assert_eq!((m.accepted, m.rejected(), m.cancelled_waits), (3, 0, 0));
        assert!(m.queued <= 1);
    });
}

/// (12) `close` racing a waiter that is queueing: queued first and failed by
/// `close`, or refused at once because the flag was set first — `Closed`
/// either way, never stuck in the queue, counted once.
#[test]
fn queue_close_vs_enqueue() {
    model(|| {
        let s = Shared::new(1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);

        let s1 = s.clone();
        let waiter = thread::spawn(move || block_on(s1.bh.acquire()).map(drop));
        let s2 = s.clone();
        let closer = thread::spawn(move || assert!(s2.bh.close()));
        closer.join().unwrap();
        assert_eq!(waiter.join().unwrap(), Err(AcquireError::Closed));
        s.leave(held);

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(
            (m.accepted, m.rejected_closed, m.cancelled_waits),
            (1, 1, 0)
        );
    });
}

/// (13) A shrink racing the releases that would serve a queued waiter for
/// two: the waiter is handed both permits (if they came back before the
/// shrink) or fails with `ExceedsCapacity` — never more than the capacity in
/// force, never stuck, and the permits balance at the new capacity.
#[test]
fn queue_resize_vs_queued_many_waiter() {
    model(|| {
        let s = Shared::new(2);
        let both = s.bh.try_acquire_many(2).unwrap();
        s.enter(&both, 2);

        let s1 = s.clone();
        let waiter = thread::spawn(move || match block_on(s1.bh.acquire_many(2)) {
            Ok(p) => {
                s1.work(p, 2);
                true
            }
            Err(e) => {
                assert_eq!(
                    e,
                    AcquireError::ExceedsCapacity {
                        requested: 2,
                        capacity: 1
                    }
                );
                false
            }
        });
        let s2 = s.clone();
        let shrinker = thread::spawn(move || assert_eq!(s2.bh.resize(1), Ok(2)));
        s.leave(both);
        shrinker.join().unwrap();
        let served = waiter.join().unwrap();

        s.assert_balanced(1);
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(served));
        assert_eq!((m.rejected(), m.cancelled_waits), (0, 0));
    });
}

/// (14) A queued waiter whose waker, when dropped, gives back a permit of
/// the same bulkhead (the last reference to a task holding one), replaced
/// by a new waker while a release races: loom's mutex reports a deadlock if
/// the old waker is dropped under the queue's lock.
#[test]
fn queue_waker_drop_releases_a_permit() {
    struct Holder(
        #[allow(dead_code)] std::sync::Mutex<Option<watertight::OwnedPermit<ManualClock>>>,
    );
    impl std::task::Wake for Holder {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    model(|| {
        let bh = std::sync::Arc::new(Bulkhead::new("loom", 2, ManualClock::new()));
        let a = bh.try_acquire_owned().unwrap();
        let b = bh.try_acquire_owned().unwrap();
        let holder = Waker::from(std::sync::Arc::new(Holder(std::sync::Mutex::new(Some(b)))));

        let bh1 = bh.clone();
        let releaser = thread::spawn(move || drop(a));
        let mut fut = pin!(bh1.acquire());
        let first = fut.as_mut().poll(&mut Context::from_waker(&holder));
        drop(holder);
        let r = match first {
            Poll::Ready(r) => r,
            // Re-polled with a new waker: the old one (the last holder of
            // `b`) is dropped, and `b` comes back.
            Poll::Pending => block_on(fut.as_mut()),
        };
        drop(r.expect("never closed"));
        releaser.join().unwrap();
        let m = bh.metrics();
        assert_eq!((m.available, m.in_flight, m.waiting), (2, 0, 0));
    });
}

/// Loom models of the circuit breaker's atomic protocol: the state word
/// (state, generation, half-open probe counts), the timestamp word tagged
/// with the generation, and the count window (a ring of slots plus one word
/// with its generation and index).
///
/// Each model runs two or three threads against one breaker with a tiny
/// window on a [`ManualClock`] (the breaker owns it; `b.clock()` moves it)
/// and checks, once every thread has joined:
///
/// - **one transition per decision**: a listener logs every transition;
///   two threads that decide the same transition make it once, and the
///   generation (read from the breaker's `Debug`) moved once per logged
///   transition;
/// - **the probe cap holds**: a loom counter, raised after a probe permit is
///   taken and lowered before it is given back, never exceeds
///   `half_open_calls`;
/// - **nothing is lost or counted twice**: every outcome of a generation is in
///   its window or counted stale, not both, and an outcome of an older
///   generation never lands in a newer window;
/// - **rates are evaluated after every outcome**: once every outcome is in, a
///   closed breaker's window is below the threshold.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom breaker`.
mod breaker;

/// The retry budget: two callers failing at once never get more retries
/// than half the budget allows, whatever the interleaving; a success in
/// between gives back its share, never more than the budget's size.
mod retry_budget;

/// The adaptive bulkhead's sample/window protocol: calls that finish add
/// their samples with atomics, the first to find the window over closes it
/// (one at a time, through the closing flag), and the limit moves by a
/// resize while other calls take and give back permits. Checked:
///
/// - **every sample is counted once**: over all the windows closed (the
///   last by a `tick` after the threads joined), the algorithm sees exactly
///   the samples recorded, none lost in a race with a close, none twice;
/// - **the algorithm is never run by two closers at once** (its state
///   lives in a loom cell, so two overlapping updates are a reported race);
/// - **no permit is lost or invented while the limit moves**: once every
///   thread has joined, `in_flight == 0` and `available == capacity`.
mod adaptive;

/// The rate limiter's one-word protocol: checks, reservations and their
/// cancellation, each a compare-and-swap of the theoretical arrival time,
/// racing on two or three threads (time from a `ManualClock`, moved by the
/// model). Checked:
///
/// - **racing checks never admit past the burst**, and admit all of it when
///   the clock stands still (a lost compare-and-swap is retried, never
///   turned into a refusal);
/// - **a reservation and a check never take the same cells**: the cell a
///   wait reserved is never also admitted to a `check`, and two waits
///   reserve two different cells;
/// - **a cancellation racing a check never invents cells, nor loses them**:
///   once everything has joined, the cells admitted are exactly what the
///   quota allows by then.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom rate`.
mod rate;

/// The keyed limiter's sets: each a short lock over `WAYS` slots of (key,
/// TAT), racing on two threads (time from a `ManualClock`). Checked:
///
/// - **two threads on the same key never admit past the burst**, and admit
///   all of it when the clock stands still;
/// - **a key evicted while another thread checks it is never
///   double-counted**: with a set full of stale keys, one thread checks the
///   earliest (its own slot, or a new one if it was just evicted) while the
///   other's new key evicts a stale key; whichever wins, afterwards the
///   checked key has spent exactly the cells it was admitted, the new key
///   its own, and no live key was overwritten.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom keyed`.
mod keyed;

/// The adaptive throttle's ring of time buckets (`src/throttle/window.rs`):
/// a bucket rolled over lazily by whoever first touches it in a new epoch,
/// racing records of the old epoch and of the new.
///
/// - **a record never lands in a newer epoch**: an accept for a request
///   admitted in epoch 0, racing the rollover of its slot to epoch 20, is
///   credited to epoch 0 (and leaves the window with it) or dropped as
///   late, never counted at epoch 20;
/// - **no record of the live epoch is lost**: two requests racing each
///   other and the lazy clear of a stale slot both count;
/// - **the window never counts more than was asked**: requests in the
///   window never exceed the checks made in it, accepts never exceed
///   requests.
mod throttle;

// ===========================================================================
// The bounded wait queue (`with_max_waiters`)
// ===========================================================================

/// The waiter count and its bound: a place is reserved (one CAS, no lock)
/// before a wait takes the lock and is given back by whoever unlinks the
/// node (a hand-off, a cancel) or by the wait itself if it did not queue.
/// Checked: the count never passes the bound, every attempt is counted once
/// (accepted, cancelled or refused as queue full), and no place leaks.
mod bounded_queue;

/// The partitioned bulkhead's models: its rooms are bulkheads (modelled
/// above); these check what it adds, borrowing and the hand-back.
///
/// - **the total holds**: a loom counter of the slots held never exceeds
///   the capacity;
/// - **a class under its share is served by the borrower's release**: a
///   waiter of class `a` whose room a borrower of class `b` holds always
///   completes with a slot of its own room (loom reports a deadlock
///   otherwise), never refused;
/// - **nothing is lost**: once every thread has joined, every room is free
///   and nobody waits.
mod partition;

/// `crate::sync` for the crate files compiled into this test
/// (`src/redis/era.rs`): loom's atomics, as the crate's own `sync` gives
/// them under `--cfg loom`.
mod sync {
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
}

/// `src/redis/era.rs` itself (see `mod lease_era`).
#[allow(dead_code)]
#[path = "../../src/redis/era.rs"]
mod era;

/// The leased share's lease and eras (`src/redis/era.rs`, which uses
/// nothing of the crate but `crate::sync`, compiled here on loom's
/// atomics: the global bulkhead itself needs tokio and Redis). Checked:
///
/// - **a lease ends once**: of the callers that find it over, exactly one
///   ends it and is told how many permits its era held;
/// - **a permit of an ended era is lost**, and counted in the ended era's
///   count exactly when it entered before the end;
/// - **eras do not mix**: a permit of an ended era leaving never changes
///   the next era's count, and no count wraps.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom lease_era`.
mod lease_era;

/// `src/redis/rate/cells.rs` itself (see `mod pocket_cells`).
#[allow(dead_code)]
#[path = "../../src/redis/rate/cells.rs"]
mod cells;

/// The leased global rate's pocket of cells (`src/redis/rate/cells.rs`,
/// compiled here on loom's atomics as `era.rs` is). Checked: spends
/// racing each other and the keeper's refill lose and invent nothing —
/// every cell granted is spent once, wasted once, or left, and no spend
/// takes a cell the pocket did not hold.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom pocket_cells`.
mod pocket_cells;

/// The latency histogram's slot protocol (`watertight::hedge`): records
/// take a sequence number, which names their window, and add to their
/// bucket's slot for that window's parity, starting it afresh when it
/// holds a window two back, giving up when a later window has it. Under
/// loom the histogram has 16 buckets (0 to 15 ns, one each), so a read is
/// a few steps. Checked:
///
/// - **once the records are done, a read sees exactly the samples of the
///   current window and the one before**, whatever the interleaving — a
///   record delayed past two windows lands in none of them, never in a
///   later window's count;
/// - **a read racing with records counts nothing twice and invents
///   nothing**: at most as many samples as records started, at most two
///   windows' worth, and a percentile that is one of the recorded values.
mod latency_histogram;

/// The hedge budget: a token bucket in one atomic word. Checked: **no
/// token is spent twice** (of callers racing for the last token, exactly
/// one gets it) and **refunds and refills are never lost** against a
/// concurrent spend (the count once all have joined is the same in every
/// interleaving).
mod hedge_budget;

/// The hedge's kept percentile delay: one word holding the delay and the
/// refresh period it was read in. Checked: **a delay read racing with
/// records is one the histogram could give** (one of the recorded
/// latencies' buckets, never a torn or invented value), and **once the
/// next period starts the kept value is read again**, so a stale one (read
/// while a record was still landing) does not outlive its period.
mod hedge_delay;

/// The fault injector's shared sequence (feature `chaos`): each draw is one
/// `fetch_add` on the jitter's counter, so callers drawing at once take
/// distinct draws and skip none — between them, exactly a sequential run's
/// faults — and a call racing `disable` takes one draw and is counted once,
/// or takes none and is not counted.
#[cfg(feature = "chaos")]
mod chaos;
