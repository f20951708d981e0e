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
//! The circuit breaker's models are in `mod breaker` at the end of the file,
//! with their own list of what they check.
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
mod breaker {
    use std::sync::Mutex;
    use std::time::Duration;

    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use loom::sync::{Arc, Notify};
    use loom::thread;
    use watertight::breaker::{OnTransition, State, Transition};
    use watertight::clock::{Clock, Instant, ManualClock};
    use watertight::{BreakerConfig, CallPermit, CircuitBreaker, Rejection};

    use super::model;

    /// The preemption bound the small models below explore at least,
    /// whatever `LOOM_MAX_PREEMPTIONS` says: they take milliseconds at this
    /// bound, and loom's bounded search misses races at 2 that it finds here
    /// (a recorder preempted between claiming its slot and writing it while
    /// another thread freezes the window, for one).
    const DEEP: usize = 4;

    /// Like [`model`], exploring at least [`DEEP`] preemptions.
    fn deep_model<F>(f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(2).max(DEEP));
        builder.check(f);
    }

    const OPEN_WAIT: Duration = Duration::from_secs(1);

    /// Every transition the breaker made, in the order the listener heard
    /// them. A std mutex, not loom's: it is never held across a loom
    /// operation, and it must add no interleavings of its own.
    #[derive(Clone, Default)]
    struct Log(std::sync::Arc<Mutex<Vec<Transition>>>);

    impl OnTransition for Log {
        fn on_transition(&self, t: &Transition) {
            self.0.lock().unwrap().push(*t);
        }
    }

    impl Log {
        fn pairs(&self) -> Vec<(State, State)> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .map(|t| (t.from, t.to))
                .collect()
        }

        /// The transitions made, in any order: transitions made at once by
        /// two threads may reach the listener in either order (as
        /// `OnTransition` documents).
        fn assert_made(&self, expected: &[(State, State)]) {
            let key = |p: &(State, State)| (p.0.as_str(), p.1.as_str());
            let mut made = self.pairs();
            made.sort_by_key(key);
            let mut expected = expected.to_vec();
            expected.sort_by_key(key);
            assert_eq!(made, expected, "in the order heard: {:?}", self.pairs());
        }

        fn count(&self, from: State, to: State) -> usize {
            self.pairs().iter().filter(|&&p| p == (from, to)).count()
        }

        fn len(&self) -> usize {
            self.0.lock().unwrap().len()
        }

        /// When the one transition from `from` to `to` happened.
        fn at(&self, from: State, to: State) -> Instant {
            let log = self.0.lock().unwrap();
            let mut made = log.iter().filter(|t| (t.from, t.to) == (from, to));
            let t = made.next().expect("the transition was made");
            assert!(made.next().is_none(), "made once");
            t.at
        }
    }

    type Breaker<const N: usize> = CircuitBreaker<ManualClock, N, Log>;
    type Permit<'a, const N: usize> = CallPermit<'a, ManualClock, N, Log>;

    /// A breaker, its transition log, and the model's count of the half-open
    /// probes held.
    struct Shared<const N: usize> {
        b: Breaker<N>,
        log: Log,
        probes: AtomicUsize,
    }

    fn shared<const N: usize>(config: BreakerConfig) -> Arc<Shared<N>> {
        let log = Log::default();
        Arc::new(Shared {
            b: CircuitBreaker::with_listener("loom", config, ManualClock::new(), log.clone()),
            log,
            probes: AtomicUsize::new(0),
        })
    }

    /// Runs `f` on a new loom thread with its own handle on `s`.
    fn spawn<const N: usize, T: 'static>(
        s: &Arc<Shared<N>>,
        f: impl FnOnce(&Shared<N>) -> T + 'static,
    ) -> thread::JoinHandle<T> {
        let s = s.clone();
        thread::spawn(move || f(&s))
    }

    /// A thread that takes a permit and then records `then` on it, while the
    /// caller goes on once the permit is taken: the outcome of a permit of
    /// the generation before whatever the caller does next. (The permit is
    /// taken on the recording thread because it borrows the breaker through
    /// that thread's handle.)
    fn spawn_taken_then<const N: usize>(
        s: &Arc<Shared<N>>,
        then: impl FnOnce(Permit<'_, N>) + 'static,
    ) -> thread::JoinHandle<()> {
        let taken = Arc::new(Notify::new());
        let t = spawn(s, {
            let taken = taken.clone();
            move |s| {
                let p = s.b.try_acquire().expect("closed");
                taken.notify();
                then(p);
            }
        });
        taken.wait();
        t
    }

    /// A window of `window` outcomes, rates from `minimum` outcomes on, a
    /// failure-rate threshold of `threshold` percent, a one-second open
    /// wait, `probes` half-open probes.
    fn config(window: usize, minimum: usize, threshold: f32, probes: usize) -> BreakerConfig {
        BreakerConfig::builder()
            .window_size(window)
            .minimum_calls(minimum)
            .failure_rate_threshold(threshold)
            .open_duration(OPEN_WAIT)
            .half_open_calls(probes)
            .build()
            .unwrap()
    }

    impl<const N: usize> Shared<N> {
        /// The generation, as the breaker's `Debug` shows it.
        fn generation(&self) -> usize {
            let dbg = format!("{:?}", self.b);
            let at = dbg
                .find("generation: ")
                .expect("Debug shows the generation")
                + 12;
            let digits: String = dbg[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        }

        /// Every transition was logged once and moved the generation by one.
        fn assert_generations_match_log(&self) {
            assert_eq!(self.generation(), self.log.len(), "{:?}", self.log.pairs());
        }

        /// Single-threaded setup: trips the breaker with one failure (the
        /// config must trip on one failure of one call), then lets the open
        /// wait run out.
        fn open_and_wait(&self) {
            self.b.try_acquire().unwrap().failure();
            assert_eq!(self.b.state(), State::Open);
            self.b.clock().advance(OPEN_WAIT);
            assert_eq!(self.b.state(), State::HalfOpen);
        }

        /// Asks for a permit; a probe is counted as held and checked against
        /// `cap`.
        fn attempt(&self, cap: usize) -> Result<Permit<'_, N>, Rejection> {
            let p = self.b.try_acquire()?;
            if p.is_probe() {
                let held = self.probes.fetch_add(1, SeqCst) + 1;
                assert!(held <= cap, "{held} probes held, cap {cap}");
            }
            Ok(p)
        }

        /// Stops counting `p` as held, before the caller gives it back or
        /// records its outcome.
        fn leave<'a>(&self, p: Permit<'a, N>) -> Permit<'a, N> {
            if p.is_probe() {
                self.probes.fetch_sub(1, SeqCst);
            }
            p
        }

        /// The first probe after a trip made by this thread or another: while
        /// the breaker says Open (its wait not over, or the tripping thread's
        /// stamp not published yet), moves the clock on by the hint and lets
        /// the other threads run.
        fn probe_after_wait(&self) -> Permit<'_, N> {
            loop {
                match self.b.try_acquire() {
                    Ok(p) => {
                        assert!(p.is_probe(), "the first call after the wait is a probe");
                        return p;
                    }
                    Err(Rejection::Open { retry_after }) => {
                        self.b.clock().advance(retry_after);
                        thread::yield_now();
                    }
                    Err(e) => panic!("{e:?} before the first probe"),
                }
            }
        }
    }

    /// Two threads each record a failure into a window of 2 (minimum 2):
    /// exactly one trip, whichever outcome lands last.
    fn two_failures_trip_once(threshold: f32) {
        deep_model(move || {
            let s = shared::<2>(config(2, 2, threshold, 1));
            let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            let b = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            a.join().unwrap();
            b.join().unwrap();

            assert_eq!(
                s.log.pairs(),
                [(State::Closed, State::Open)],
                "2 of 2 failed"
            );
            assert_eq!(s.b.state(), State::Open);
            assert_eq!(s.generation(), 1);
            assert_eq!(s.b.metrics().rejected, 0);
        });
    }

    /// (B1) Two failures race into a window of 2 at 50 %: one trip.
    #[test]
    fn breaker_concurrent_failures_trip_once() {
        two_failures_trip_once(50.0);
    }

    /// (B1b) The same at 100 %: the trip needs both failures counted, so it
    /// must be decided by whichever lands last.
    #[test]
    fn breaker_concurrent_failures_trip_once_at_full_threshold() {
        two_failures_trip_once(100.0);
    }

    /// (B1c) Two failures and a success race into a window of 3 (minimum 3,
    /// 50 %): 2 of 3 trips, exactly once, in every order.
    #[test]
    fn breaker_failures_and_a_success_trip_once() {
        deep_model(|| {
            let s = shared::<3>(config(3, 3, 50.0, 1));
            let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            let b = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            s.b.try_acquire().expect("closed").success();
            a.join().unwrap();
            b.join().unwrap();

            assert_eq!(
                s.log.pairs(),
                [(State::Closed, State::Open)],
                "2 of 3 failed"
            );
            assert_eq!(s.b.state(), State::Open);
            s.assert_generations_match_log();
        });
    }

    /// (B1d) The window a trip freezes shows why it opened: two failures race
    /// into a window of 2 (minimum 2, 50 %); each is either in the frozen
    /// window or counted stale, never both, and what the window holds are
    /// failures.
    #[test]
    fn breaker_trip_freezes_each_outcome_once() {
        deep_model(|| {
            let s = shared::<2>(config(2, 2, 50.0, 1));
            let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            s.b.try_acquire().expect("closed").failure();
            t.join().unwrap();

            let m = s.b.metrics();
            assert_eq!(m.state, State::Open);
            assert_eq!(m.calls + m.stale, 2, "each outcome once: {m:?}");
            assert_eq!(
                m.failed_calls, m.calls,
                "only failures were recorded: {m:?}"
            );
        });
    }

    /// (B2) Half-open with 2 probes and three threads asking at once; two of
    /// them give their first probe back (one ignores it, one drops it) and
    /// ask once more, then succeed. Never more than 2 probes are held, the
    /// episode begins once, every rejection is counted, and with nothing
    /// but successes it never reopens.
    #[test]
    fn breaker_half_open_admits_at_most_the_cap() {
        const CAP: usize = 2;
        model(|| {
            let s = shared::<2>(config(2, 1, 50.0, CAP));
            s.open_and_wait();

            // Returns how many of its asks were refused.
            let give_back_then_succeed = |ignore: bool| {
                move |s: &Shared<2>| {
                    let mut refused = 0;
                    match s.attempt(CAP) {
                        Ok(p) if ignore => s.leave(p).ignore(),
                        Ok(p) => drop(s.leave(p)),
                        Err(_) => refused += 1,
                    }
                    match s.attempt(CAP) {
                        Ok(p) => s.leave(p).success(),
                        Err(_) => refused += 1,
                    }
                    refused
                }
            };
            let a = spawn(&s, give_back_then_succeed(true));
            let b = spawn(&s, give_back_then_succeed(false));
            let mut refused = match s.attempt(CAP) {
                Ok(p) => {
                    s.leave(p).success();
                    0
                }
                Err(_) => 1,
            };
            refused += a.join().unwrap() + b.join().unwrap();

            assert_eq!(s.probes.load(SeqCst), 0);
            assert_eq!(
                s.log.count(State::Open, State::HalfOpen),
                1,
                "{:?}",
                s.log.pairs()
            );
            assert_eq!(
                s.log.count(State::HalfOpen, State::Open),
                0,
                "{:?}",
                s.log.pairs()
            );
            let m = s.b.metrics();
            assert_eq!(m.rejected, refused);
            assert!(matches!(m.state, State::HalfOpen | State::Closed), "{m:?}");
            s.assert_generations_match_log();
        });
    }

    /// (B3a) A permit of generation 0 records a failure while another thread
    /// resets the breaker and then records a success in the new window: the
    /// old failure is wiped with the old window or counted stale, and never
    /// lands in the new one.
    #[test]
    fn breaker_stale_outcome_never_lands_after_reset() {
        deep_model(|| {
            let s = shared::<2>(config(2, 2, 50.0, 1));
            let t = spawn_taken_then(&s, |p| p.failure());
            s.b.reset();
            s.b.try_acquire().expect("closed").success();
            t.join().unwrap();

            // A reset of a closed breaker changes no state: nothing told.
            s.log.assert_made(&[]);
            let m = s.b.metrics();
            assert_eq!(m.state, State::Closed);
            assert_eq!(m.calls, 1, "the new window holds the success: {m:?}");
            assert_eq!(m.failed_calls, 0, "the old failure is not in it: {m:?}");
            assert!(m.stale <= 1, "{m:?}");
        });
    }

    /// (B3b) A permit of generation 0 records a failure while another thread
    /// forces the breaker open (which freezes the window for metrics): the
    /// failure is either in the frozen window or stale, never both.
    #[test]
    fn breaker_stale_outcome_is_counted_once_against_force_open() {
        deep_model(|| {
            let s = shared::<2>(config(2, 2, 50.0, 1));
            let t = spawn_taken_then(&s, |p| p.failure());
            assert!(s.b.force_open());
            t.join().unwrap();

            s.log.assert_made(&[(State::Closed, State::ForcedOpen)]);
            let m = s.b.metrics();
            assert_eq!(m.state, State::ForcedOpen);
            assert_eq!(m.calls + m.stale, 1, "counted once: {m:?}");
            assert_eq!(
                m.failed_calls, m.calls,
                "the one outcome was a failure: {m:?}"
            );
        });
    }

    /// (B3c) A permit taken before a trip records a success while the trip
    /// happens (by its own outcome or the other thread's failure) and the
    /// breaker goes on through half-open to closed: the old outcome never
    /// lands in the half-open or the new closed window.
    #[test]
    fn breaker_outcome_racing_a_trip_never_lands_in_the_next_window() {
        deep_model(|| {
            let s = shared::<2>(config(2, 1, 50.0, 1));
            let t = spawn_taken_then(&s, |p| p.success());
            // 1 of 1 or 1 of 2 failed: this trips, unless the old success
            // saw this failure and tripped first.
            s.b.try_acquire().expect("closed").failure();
            s.probe_after_wait().success();
            t.join().unwrap();

            s.log.assert_made(&[
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Closed),
            ]);
            let m = s.b.metrics();
            assert_eq!(m.state, State::Closed);
            assert_eq!(m.calls, 0, "the new window is empty: {m:?}");
            assert!(m.stale <= 1, "{m:?}");
        });
    }

    /// (B4) Three outcomes race into a window of 3 that they do not trip
    /// (minimum 3, thresholds 100 %): a failure, a success and a slow
    /// success (its permit taken before the clock moved past the slow-call
    /// duration). All three are counted, each as what it was.
    #[test]
    fn breaker_no_recorded_outcome_is_lost() {
        deep_model(|| {
            let config = BreakerConfig::builder()
                .window_size(3)
                .minimum_calls(3)
                .failure_rate_threshold(100.0)
                .slow_call_rate_threshold(100.0)
                .slow_call_duration(Duration::from_millis(1))
                .build()
                .unwrap();
            let s = shared::<3>(config);
            let slow = s.b.try_acquire().unwrap();
            s.b.clock().advance(Duration::from_millis(2));
            let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            let b = spawn(&s, |s| s.b.try_acquire().expect("closed").success());
            slow.success();
            a.join().unwrap();
            b.join().unwrap();

            let m = s.b.metrics();
            assert_eq!(m.state, State::Closed, "{m:?}");
            assert_eq!((m.calls, m.failed_calls, m.slow_calls), (3, 1, 1), "{m:?}");
            assert_eq!(m.stale, 0, "{m:?}");
            assert_eq!(s.log.len(), 0);
        });
    }

    /// (B4b) A full window of plain successes takes one more without a write
    /// (the fast path); a failure racing it still lands, and trips once
    /// (window 2, minimum 2, 50 %: the failure with either success is 1 of
    /// 2). The frozen window holds the failure.
    #[test]
    fn breaker_success_fast_path_against_a_failure() {
        deep_model(|| {
            let s = shared::<2>(config(2, 2, 50.0, 1));
            for _ in 0..2 {
                s.b.try_acquire().unwrap().success();
            }
            // Refused only if the failure has already tripped it.
            let t = spawn(&s, |s| {
                if let Ok(p) = s.b.try_acquire() {
                    p.success();
                }
            });
            s.b.try_acquire().expect("closed").failure();
            t.join().unwrap();

            s.log.assert_made(&[(State::Closed, State::Open)]);
            let m = s.b.metrics();
            assert_eq!(m.state, State::Open);
            assert_eq!((m.calls, m.failed_calls), (2, 1), "{m:?}");
            assert!(m.stale <= 1, "{m:?}");
        });
    }

    /// (B5) A window of 1 and two writers lapping each other on its one slot
    /// (minimum 1, 50 %): the window ends up holding exactly one of the two
    /// outcomes (never a count out of range), and a closed breaker holds the
    /// success (a window of 1 holding a failure has tripped).
    ///
    /// Not asserted: that an open breaker's frozen window holds the failure
    /// that tripped it. With more outcomes in flight than the window holds,
    /// the success may overwrite the failure between the failure's count and
    /// the freeze (the window's documented lapping rule: the slot holds one
    /// of the two).
    #[test]
    fn breaker_lapping_writers_leave_one_outcome() {
        deep_model(|| {
            let s = shared::<1>(config(1, 1, 50.0, 1));
            let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            // Refused only if the failure has already tripped it.
            if let Ok(p) = s.b.try_acquire() {
                p.success();
            }
            t.join().unwrap();

            let m = s.b.metrics();
            assert_eq!(m.calls, 1, "{m:?}");
            assert!(m.failed_calls <= 1, "{m:?}");
            assert!(m.stale <= 1, "{m:?}");
            assert!(s.log.len() <= 1, "{:?}", s.log.pairs());
            if m.state == State::Closed {
                assert_eq!(
                    m.failed_calls, 0,
                    "a window of 1 holding a failure trips: {m:?}"
                );
            } else {
                s.log.assert_made(&[(State::Closed, State::Open)]);
            }
        });
    }

    /// (B6) The open wait is over and two threads ask at once, with 1 probe:
    /// exactly one episode begins, the other caller is refused with
    /// `ProbesBusy` (or, if the probe has already closed the breaker, gets a
    /// plain permit), and the probe's success closes the breaker once.
    #[test]
    fn breaker_open_to_half_open_race() {
        deep_model(|| {
            let s = shared::<2>(config(2, 1, 50.0, 1));
            s.open_and_wait();

            let ask = |s: &Shared<2>| match s.attempt(1) {
                Ok(p) => {
                    s.leave(p).success();
                    1
                }
                Err(e) => {
                    assert_eq!(e, Rejection::ProbesBusy, "the open wait is over");
                    0
                }
            };
            let t = spawn(&s, ask);
            let admitted = ask(&s) + t.join().unwrap();

            assert!(admitted >= 1, "the first call after the wait is a probe");
            s.log.assert_made(&[
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Closed),
            ]);
            assert_eq!(s.b.metrics().rejected, 2 - admitted);
            s.assert_generations_match_log();
        });
    }

    /// (B6b) The open wait is over and two threads ask at once, with 2
    /// probes: both are admitted as probes (one begins the episode, the other
    /// takes the second slot), and their successes close the breaker once.
    #[test]
    fn breaker_both_callers_admitted_when_two_probes_are_free() {
        const CAP: usize = 2;
        deep_model(|| {
            let s = shared::<2>(config(2, 1, 50.0, CAP));
            s.open_and_wait();

            let ask = |s: &Shared<2>| {
                let p = s.attempt(CAP).expect("a probe slot is free");
                assert!(p.is_probe(), "the breaker closes only after both");
                s.leave(p).success();
            };
            let t = spawn(&s, ask);
            ask(&s);
            t.join().unwrap();

            s.log.assert_made(&[
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Closed),
            ]);
            assert_eq!(s.b.metrics().rejected, 0);
            s.assert_generations_match_log();
        });
    }

    /// (B6c) `state()` read while another thread begins the half-open
    /// episode and closes it: the open wait is over throughout, so it never
    /// says Open (it consults the clock: HalfOpen, or Closed once the probe
    /// is back).
    #[test]
    fn breaker_state_is_never_open_after_the_wait() {
        deep_model(|| {
            let s = shared::<2>(config(2, 1, 50.0, 1));
            s.open_and_wait();

            let t = spawn(&s, |s| s.b.state());
            s.attempt(1).expect("the first probe").success();
            let seen = t.join().unwrap();

            assert!(
                matches!(seen, State::HalfOpen | State::Closed),
                "the open wait was over, yet state() said {seen:?}"
            );
            assert_eq!(s.b.state(), State::Closed);
        });
    }

    /// (B7) Two probes out (2 per episode): one fails while the other
    /// succeeds. The failure reopens, exactly once; the success never
    /// closes (the episode needs two).
    #[test]
    fn breaker_probe_failure_and_success_race() {
        const CAP: usize = 2;
        deep_model(|| {
            let s = shared::<2>(config(2, 1, 50.0, CAP));
            s.open_and_wait();
            let first = s.attempt(CAP).expect("the first probe");
            let t = spawn(&s, |s| {
                let p = s.attempt(CAP).expect("the second probe: one slot is free");
                assert!(p.is_probe());
                s.leave(p).failure();
            });
            s.leave(first).success();
            t.join().unwrap();

            s.log.assert_made(&[
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Open),
            ]);
            let m = s.b.metrics();
            assert_eq!(m.state, State::Open);
            assert!(m.stale <= 1, "{m:?}");
            s.assert_generations_match_log();
        });
    }

    /// (B8) A half-open episode whose probe is out past `max_half_open_wait`:
    /// a new caller and the late probe's success race to reopen it. It
    /// reopens once, as of the moment the episode ran out; the caller is
    /// refused as Open with the whole open wait ahead; the probe's outcome is
    /// stale.
    #[test]
    fn breaker_half_open_expiry_race() {
        deep_model(|| {
            let config = BreakerConfig::builder()
                .window_size(2)
                .minimum_calls(1)
                .open_duration(OPEN_WAIT)
                .half_open_calls(1)
                .max_half_open_wait(Duration::from_secs(1))
                .build()
                .unwrap();
            let s = shared::<2>(config);
            s.open_and_wait();
            let late = s.b.try_acquire().expect("the probe");
            let began = s.b.clock().now();
            s.b.clock().advance(Duration::from_secs(1));

            let t = spawn(&s, |s| {
                assert_eq!(
                    s.b.try_acquire().unwrap_err(),
                    Rejection::Open {
                        retry_after: OPEN_WAIT
                    },
                    "the episode ran out just now"
                );
            });
            late.success();
            t.join().unwrap();

            s.log.assert_made(&[
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Open),
            ]);
            assert_eq!(
                s.log.at(State::HalfOpen, State::Open),
                began + Duration::from_secs(1),
                "it reopened as of the moment the episode ran out"
            );
            let m = s.b.metrics();
            assert_eq!(m.state, State::Open);
            assert_eq!((m.stale, m.rejected), (1, 1), "{m:?}");
            s.assert_generations_match_log();
        });
    }

    // ---- consecutive failures: the run in the window word ----------------

    fn consecutive(n: usize) -> BreakerConfig {
        BreakerConfig::builder()
            .consecutive_failures(n)
            .open_duration(OPEN_WAIT)
            .build()
            .unwrap()
    }

    /// Two failures recorded at once make a run of two: the breaker opens
    /// exactly once, and the listener hears the run it tripped on.
    #[test]
    fn consecutive_two_failures_at_once_trip_once() {
        deep_model(|| {
            let s = shared::<1>(consecutive(2));
            let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
            s.b.try_acquire().expect("closed").failure();
            t.join().unwrap();
            s.log.assert_made(&[(State::Closed, State::Open)]);
            let tripped = s.log.0.lock().unwrap()[0]
                .tripped
                .expect("the window tripped");
            assert_eq!((tripped.calls, tripped.failures), (2, 2));
            assert_eq!(s.b.metrics().failed_calls, 2);
        });
    }

    /// A failure and a success at once, after one failure: the run ends
    /// at 0 (the success last) or 2, and trips exactly when it reaches 2.
    #[test]
    fn consecutive_success_races_a_failure() {
        deep_model(|| {
            let s = shared::<1>(consecutive(2));
            s.b.try_acquire().expect("closed").failure();
            let t = spawn(&s, |s| s.b.try_acquire().map(|p| p.success()).is_ok());
            let failed = s.b.try_acquire().map(|p| p.failure()).is_ok();
            let succeeded = t.join().unwrap();
            let opened = s.log.count(State::Closed, State::Open);
            let run = s.b.metrics().failed_calls;
            match opened {
                // The failure came right after the first: a run of 2
                // tripped. (The success may still land in the run before the
                // trip freezes the window, which then shows 0: it was taken
                // and recorded in the closed generation.)
                1 => {
                    assert!(failed);
                    let t = s.log.0.lock().unwrap()[0].tripped.expect("tripped");
                    assert_eq!(t.failures, 2);
                }
                0 => {
                    assert!(succeeded, "only a success stops a run of two");
                    assert!(run <= 1, "run {run}");
                }
                n => panic!("opened {n} times"),
            }
            s.assert_generations_match_log();
        });
    }

    /// A failure recorded while the breaker is reset: it lands in the old
    /// run (which the reset empties) or is stale; never in the new run.
    #[test]
    fn consecutive_failure_races_a_reset() {
        deep_model(|| {
            let s = shared::<1>(consecutive(3));
            s.b.try_acquire().expect("closed").failure();
            let t = spawn_taken_then(&s, |p| p.failure());
            s.b.reset();
            t.join().unwrap();
            let m = s.b.metrics();
            assert_eq!(m.failed_calls, 0, "{m:?}");
            assert!(m.stale <= 1, "{m:?}");
            assert_eq!(s.log.len(), 0);
        });
    }

    // ---- the time window: bucket rollover racing a record ----------------

    type TimeShared = Arc<(watertight::breaker::TimeBreaker<ManualClock, 3, Log>, Log)>;

    fn time_breaker(buckets: usize, minimum: usize) -> TimeShared {
        let log = Log::default();
        let config = BreakerConfig::builder()
            .time_window(Duration::from_secs(buckets as u64), buckets)
            .minimum_calls(minimum)
            .failure_rate_threshold(50.0)
            .open_duration(OPEN_WAIT)
            .build()
            .unwrap();
        let b = CircuitBreaker::try_with_listener("loom", config, ManualClock::new(), log.clone())
            .unwrap();
        Arc::new((b, log))
    }

    /// Two calls of a new second race, and the first of them rolls the
    /// bucket of three seconds earlier over (its failure leaves the window)
    /// while the other records into it: whichever clears it, the old
    /// failure never counts again and neither new outcome is lost.
    #[test]
    fn time_bucket_rollover_races_a_record() {
        model(|| {
            let s = time_breaker(3, 3);
            let b = &s.0;
            b.try_acquire().unwrap().failure(); // second 0
            b.clock().advance(Duration::from_secs(1));
            b.try_acquire().unwrap().success(); // second 1
            b.clock().advance(Duration::from_secs(2)); // second 3: bucket 0 again
            let t = {
                let s = s.clone();
                thread::spawn(move || s.0.try_acquire().unwrap().failure())
            };
            b.try_acquire().unwrap().success();
            t.join().unwrap();
            let m = b.metrics();
            // Seconds 1..=3: one success, then the two new outcomes.
            assert_eq!((m.calls, m.failed_calls), (3, 1), "{m:?}");
            assert_eq!(s.1.len(), 0, "1 of 3 is under 50 %: never tripped");
        });
    }

    /// After a whole window idle, two failures of the same second race:
    /// the first sweeps every counter into a new era while the other
    /// records; they trip the breaker once, on the two of them.
    #[test]
    fn time_idle_sweep_races_a_record() {
        model(|| {
            let s = time_breaker(3, 2);
            let b = &s.0;
            b.try_acquire().unwrap().failure();
            b.clock().advance(Duration::from_secs(10));
            let t = {
                let s = s.clone();
                thread::spawn(move || s.0.try_acquire().unwrap().failure())
            };
            b.try_acquire().unwrap().failure();
            t.join().unwrap();
            s.1.assert_made(&[(State::Closed, State::Open)]);
            // The trip may see the other failure's call before its failure
            // (it counts as a success for that instant: 1 of 2 is 50 %).
            let tripped = s.1 .0.lock().unwrap()[0]
                .tripped
                .expect("the window tripped");
            assert_eq!(tripped.calls, 2, "{tripped:?}");
            assert!(tripped.failures >= 1, "{tripped:?}");
            // The frozen window shows both, and the old failure in neither.
            let m = b.metrics();
            assert_eq!((m.calls, m.failed_calls, m.stale), (2, 2, 0), "{m:?}");
        });
    }
}

/// The retry budget: two callers failing at once never get more retries
/// than half the budget allows, whatever the interleaving; a success in
/// between gives back its share, never more than the budget's size.
mod retry_budget {
    use super::*;
    use watertight::retry::{RetryBudget, RetryConfig};

    #[test]
    fn concurrent_failures_share_the_budget() {
        model(|| {
            // 4 tokens, 50 %: retries only while more than 2 are left.
            let config = RetryConfig::builder().budget(4, 50.0).build().unwrap();
            let budget = Arc::new(RetryBudget::new(&config));
            let allowed = Arc::new(AtomicUsize::new(0));
            let t = {
                let (budget, allowed) = (budget.clone(), allowed.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        if budget.failed_may_retry() {
                            allowed.fetch_add(1, SeqCst);
                        }
                    }
                })
            };
            budget.succeeded();
            if budget.failed_may_retry() {
                allowed.fetch_add(1, SeqCst);
            }
            t.join().unwrap();
            // Three failures and one success: 4 − 3 + 0.5 = 1.5 tokens in
            // every interleaving; the success (capped at 4 when it came
            // first) allowed one or two retries, never three.
            let n = allowed.load(SeqCst);
            assert!((1..=2).contains(&n), "{n} retries");
            assert!(
                budget.tokens() == 1.0 || budget.tokens() == 1.5,
                "{}",
                budget.tokens()
            );
        });
    }
}

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
mod adaptive {
    use super::*;
    use watertight::limit::{AdaptiveBulkhead, LimitAlgorithm, Signal, Window};

    /// Counts what it is shown, and moves the limit between 1 and 2 on
    /// every window, so that resizes race with the other thread's permits.
    struct Counting {
        limit: usize,
        seen: usize,
        out: Arc<AtomicUsize>,
    }

    impl LimitAlgorithm for Counting {
        fn limit(&self) -> usize {
            self.limit
        }
        fn min_limit(&self) -> usize {
            1
        }
        fn max_limit(&self) -> usize {
            2
        }
        fn update(&mut self, w: &Window) -> usize {
            self.seen += w.samples();
            self.out.store(self.seen, SeqCst);
            self.limit = 3 - self.limit;
            self.limit
        }
    }

    fn setup() -> (
        Arc<AdaptiveBulkhead<ManualClock, Counting>>,
        Arc<AtomicUsize>,
    ) {
        let out = Arc::new(AtomicUsize::new(0));
        let alg = Counting {
            limit: 2,
            seen: 0,
            out: out.clone(),
        };
        let clock = ManualClock::new();
        let b = AdaptiveBulkhead::with_window("loom", alg, Duration::from_secs(1), 0, clock);
        // The window is over before anyone finishes: every record may close it.
        b.bulkhead().clock().advance(Duration::from_secs(1));
        (Arc::new(b), out)
    }

    fn finish_one(b: &AdaptiveBulkhead<ManualClock, Counting>, signal: Signal) -> usize {
        match b.try_acquire() {
            Ok(p) => {
                p.record(signal);
                1
            }
            Err(_) => 0,
        }
    }

    fn check_teardown(
        b: &AdaptiveBulkhead<ManualClock, Counting>,
        out: &AtomicUsize,
        recorded: usize,
    ) {
        b.bulkhead().clock().advance(Duration::from_secs(1));
        b.tick();
        assert_eq!(out.load(SeqCst), recorded, "samples lost or counted twice");
        assert_eq!(b.bulkhead().in_flight(), 0);
        assert_eq!(b.bulkhead().available(), b.limit());
        assert!((1..=2).contains(&b.limit()));
    }

    #[test]
    fn two_finishers_race_to_close_the_window() {
        model(|| {
            let (b, out) = setup();
            let b2 = b.clone();
            let t = thread::spawn(move || finish_one(&b2, Signal::Success));
            let mine = finish_one(&b, Signal::Dropped);
            let theirs = t.join().unwrap();
            check_teardown(&b, &out, mine + theirs);
        });
    }

    #[test]
    fn a_finisher_and_a_tick_race_while_a_permit_is_held() {
        model(|| {
            let (b, out) = setup();
            let held = b.try_acquire().unwrap();
            let b2 = b.clone();
            let t = thread::spawn(move || finish_one(&b2, Signal::Timeout));
            b.tick();
            held.record(Signal::Success);
            let theirs = t.join().unwrap();
            check_teardown(&b, &out, 1 + theirs);
        });
    }
}

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
mod rate {
    use super::*;
    use watertight::rate::{Quota, RateError, RateLimiter};

    const SECOND: Duration = Duration::from_secs(1);

    type Limiter = RateLimiter<std::sync::Arc<ManualClock>>;

    /// One cell a second, a burst of `burst`, on a clock the test can move.
    fn setup(burst: u32) -> (Arc<Limiter>, std::sync::Arc<ManualClock>) {
        let clock = std::sync::Arc::new(ManualClock::new());
        let quota = Quota::per_second(1).burst(burst);
        (
            Arc::new(RateLimiter::new("loom", quota, clock.clone())),
            clock,
        )
    }

    fn limited_for(err: RateError) -> Duration {
        match err {
            RateError::Limited(n) => n.retry_after(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn three_racing_checks_admit_exactly_the_burst() {
        model(|| {
            let (r, _clock) = setup(2);
            let spawn = || {
                let r = r.clone();
                thread::spawn(move || r.check().is_ok())
            };
            let (a, b) = (spawn(), spawn());
            let mine = r.check().is_ok();
            let admitted = [mine, a.join().unwrap(), b.join().unwrap()]
                .into_iter()
                .filter(|&ok| ok)
                .count();
            assert_eq!(admitted, 2);
            // The third cell comes back one interval later, not sooner.
            assert_eq!(limited_for(r.check().unwrap_err()), SECOND);
            let m = r.metrics();
            assert_eq!((m.admitted, m.refused), (2, 2));
        });
    }

    #[test]
    fn racing_checks_with_a_moving_clock_never_pass_the_burst() {
        model(|| {
            let (r, clock) = setup(1);
            r.check().unwrap(); // the next cell conforms at 1 s
            let ticker = thread::spawn(move || clock.advance(SECOND));
            let r2 = r.clone();
            let other = thread::spawn(move || r2.check().is_ok());
            let mine = r.check().is_ok();
            let theirs = other.join().unwrap();
            ticker.join().unwrap();
            // At most the one cell of the second second, whoever got it.
            assert!(!(mine && theirs), "two cells in one interval");
            let last = r.check().is_ok();
            assert_eq!(
                usize::from(mine) + usize::from(theirs) + usize::from(last),
                1
            );
        });
    }

    #[test]
    fn a_reservation_and_a_check_never_take_the_same_cell() {
        model(|| {
            let (r, clock) = setup(1);
            r.check().unwrap();
            clock.set(Instant::ZERO + SECOND); // one cell conforms now
            let done = Arc::new(AtomicBool::new(false));

            let (r1, done1) = (r.clone(), done.clone());
            let waiter = thread::spawn(move || {
                block_on(r1.acquire_until(Instant::ZERO + 2 * SECOND)).unwrap();
                done1.store(true, SeqCst);
            });
            let r2 = r.clone();
            let checker = thread::spawn(move || r2.check().is_ok());

            let checked = checker.join().unwrap();
            // Finished while the clock still reads 1 s: it took that cell.
            let waited_at_once = done.load(SeqCst);
            assert!(
                !(checked && waited_at_once),
                "the check and the wait share a cell"
            );
            clock.advance(SECOND); // 2 s: a reserved cell conforms
            waiter.join().unwrap();

            // One cell at 0, one at 1 s, one at 2 s: whoever took them.
            let last = r.check().is_ok();
            assert_eq!(last, !checked);
            let m = r.metrics();
            assert_eq!((m.admitted, m.waiting), (3, 0));
        });
    }

    /// Two waits reserve at once (two different cells: the TAT moves by two
    /// intervals), then each is dropped before its cell conforms, in either
    /// order: the newest gives its cell back, one behind it cannot (its
    /// successor's instant was computed with it), so the cells come back
    /// all or one, never more. Waits that sleep on the clock are in
    /// `a_reservation_and_a_check_never_take_the_same_cell` and in
    /// `tests/rate.rs`; here the clock stands still, as a clock read
    /// before another thread's advance may otherwise put a reservation one
    /// interval later than the test could wait for.
    #[test]
    fn two_reservations_cancelled_in_any_order_never_invent_cells() {
        model(|| {
            let (r, clock) = setup(1);
            r.check().unwrap(); // the next cell conforms at 1 s
            let spawn = || {
                let r = r.clone();
                thread::spawn(move || {
                    let mut wait = pin!(r.until_ready());
                    let first = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                    assert!(first.is_pending(), "nothing conforms at 0");
                })
            };
            let (a, b) = (spawn(), spawn());
            a.join().unwrap();
            b.join().unwrap();
            let m = r.metrics();
            assert_eq!((m.cancelled, m.waiting, m.admitted), (2, 0, 1));

            // Both cells back: one at 1 s, the next at 2 s. One back: the
            // first is spent, so nothing at 1 s. Never two at 1 s.
            clock.advance(SECOND);
            let at_one = usize::from(r.check().is_ok()) + usize::from(r.check().is_ok());
            assert!(at_one <= 1, "{at_one} cells at 1 s");
            clock.advance(SECOND);
            assert!(r.check().is_ok(), "the cell of 2 s is free either way");
            assert!(r.check().is_err());
        });
    }

    #[test]
    fn a_cancel_racing_a_check_never_invents_cells() {
        model(|| {
            let (r, clock) = setup(1);
            r.check().unwrap(); // the next cell conforms at 1 s
            let r1 = r.clone();
            let canceller = thread::spawn(move || {
                // Reserved (pending) or, if the clock moved first, admitted;
                // dropped as the thread ends.
                let mut wait = pin!(r1.until_ready());
                let first = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                first.is_ready()
            });
            let ticker = thread::spawn(move || clock.advance(SECOND));
            let checked = r.check().is_ok();
            let _ = canceller.join().unwrap();
            ticker.join().unwrap();

            // Whether the wait gave its cell back (dropped before 1 s), spent
            // it (dropped at 1 s) or took it at once, and whether the check
            // ran before or after: by 1 s exactly two cells are out.
            let last = r.check().is_ok();
            assert!(!(checked && last));
            let m = r.metrics();
            assert_eq!(m.admitted, 2, "{m:?}");
            assert_eq!(m.waiting, 0);
        });
    }
}

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
mod keyed {
    use super::*;
    use watertight::rate::{FnvState, KeyedError, KeyedRateLimiter, Quota, RateError, WAYS};

    type Keyed = KeyedRateLimiter<u32, std::sync::Arc<ManualClock>, 1, FnvState>;

    /// One cell a second, a burst of `burst`, one set.
    fn setup(burst: u32) -> (Arc<Keyed>, std::sync::Arc<ManualClock>) {
        let clock = std::sync::Arc::new(ManualClock::new());
        let quota = Quota::per_second(1).burst(burst);
        (
            Arc::new(KeyedRateLimiter::with_hasher(
                "loom",
                quota,
                clock.clone(),
                FnvState,
            )),
            clock,
        )
    }

    #[test]
    fn two_threads_on_one_key_admit_exactly_the_burst() {
        model(|| {
            let (r, _clock) = setup(2);
            let other = {
                let r = r.clone();
                thread::spawn(move || [r.check_key(&7).is_ok(), r.check_key(&7).is_ok()])
            };
            let mine = r.check_key(&7).is_ok();
            let theirs = other.join().unwrap();
            let admitted = theirs.iter().chain([&mine]).filter(|&&ok| ok).count();
            assert_eq!(admitted, 2);
            assert!(matches!(
                r.check_key(&7),
                Err(KeyedError::Rate(RateError::Limited(n)))
                    if n.retry_after() == Duration::from_secs(1)
            ));
            let m = r.metrics();
            assert_eq!((m.admitted, m.refused, m.keys_live), (2, 2, 1));
        });
    }

    #[test]
    fn a_key_evicted_while_checked_is_never_double_counted() {
        model(|| {
            let (r, clock) = setup(2);
            // Fill the set at 0 (TATs 1 s), key 0 first; at 1 s all stale.
            for k in 0..WAYS as u32 {
                r.check_key(&k).unwrap();
            }
            clock.advance(Duration::from_secs(1));
            let newcomer = {
                let r = r.clone();
                thread::spawn(move || r.check_key(&100))
            };
            // Key 0: its whole burst, in its slot or a fresh one.
            let mine = r.check_key_n(&0, 2);
            let theirs = newcomer.join().unwrap();
            assert_eq!((mine, theirs), (Ok(()), Ok(())));
            // Key 0 spent 2 cells at 1 s (TAT 3 s): nothing is left for it,
            // and the next cell comes at 2 s, not sooner.
            assert!(matches!(
                r.check_key(&0),
                Err(KeyedError::Rate(RateError::Limited(n)))
                    if n.retry_after() == Duration::from_secs(1)
            ));
            // The newcomer spent 1 of its 2 (TAT 2 s).
            r.check_key(&100).unwrap();
            assert!(r.check_key(&100).is_err());
            let m = r.metrics();
            // Evicted: key 0 (then key 0 evicted another), or only another.
            assert!(m.evictions == 1 || m.evictions == 2, "{m:?}");
            assert_eq!((m.admitted, m.full, m.keys_live), (WAYS + 3, 0, 2));
        });
    }
}

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
mod throttle {
    use super::*;
    use watertight::throttle::{AdaptiveThrottle, ThrottleConfig, BUCKETS};

    type Throttle = AdaptiveThrottle<std::sync::Arc<ManualClock>>;

    /// A 20 s window of 1 s buckets, on a clock the test moves.
    fn setup() -> (Arc<Throttle>, std::sync::Arc<ManualClock>) {
        let clock = std::sync::Arc::new(ManualClock::new());
        let config = ThrottleConfig::builder()
            .window(Duration::from_secs(BUCKETS as u64))
            .build()
            .unwrap();
        (
            Arc::new(AdaptiveThrottle::with_seed(
                "loom",
                config,
                clock.clone(),
                1,
            )),
            clock,
        )
    }

    const WINDOW: Duration = Duration::from_secs(BUCKETS as u64);

    #[test]
    fn an_accept_of_an_old_epoch_racing_a_rollover_is_never_counted_new() {
        model(|| {
            let (t, clock) = setup();
            let t2 = t.clone();
            // The ticket of epoch 0 is taken before anything races; its
            // accept is reported on the other thread while this one moves
            // the clock a window on and rolls slot 0 over.
            let (tx, rx) = loom::sync::mpsc::channel::<()>();
            let reporter = thread::spawn(move || {
                let ticket = t2.check().unwrap();
                tx.send(()).unwrap();
                ticket.accepted();
            });
            rx.recv().unwrap();
            clock.advance(WINDOW);
            // Epoch 20's own request and accept, in slot 0 of both columns.
            t.check().unwrap().accepted();
            reporter.join().unwrap();
            let m = t.metrics();
            // The epoch-0 accept is in epoch 0 or nowhere: not in 20, and
            // it never overwrites epoch 20's.
            assert_eq!((m.requests, m.accepts), (1, 1), "{m:?}");
        });
    }

    #[test]
    fn two_requests_racing_a_lazy_clear_both_count() {
        model(|| {
            let (t, clock) = setup();
            // A stale count in slot 0 (epoch 0), then a window later two
            // threads check: each reads (and may clear) the stale slot and
            // counts its own request in epoch 20.
            t.check().unwrap().overloaded();
            clock.advance(WINDOW);
            let t2 = t.clone();
            let other = thread::spawn(move || {
                t2.check().unwrap().overloaded();
            });
            t.check().unwrap().overloaded();
            other.join().unwrap();
            let m = t.metrics();
            assert_eq!((m.requests, m.accepts), (2, 0), "{m:?}");
        });
    }

    #[test]
    fn racing_accepts_and_requests_never_count_more_than_asked() {
        model(|| {
            let (t, _clock) = setup();
            let a = t.check().unwrap();
            let t2 = t.clone();
            let other = thread::spawn(move || {
                t2.check().unwrap().accepted();
            });
            a.accepted();
            other.join().unwrap();
            let m = t.metrics();
            assert_eq!((m.requests, m.accepts), (2, 2), "{m:?}");
        });
    }
}

// ===========================================================================
// The bounded wait queue (`with_max_waiters`)
// ===========================================================================

/// The waiter count and its bound: a place is reserved (one CAS, no lock)
/// before a wait takes the lock and is given back by whoever unlinks the
/// node (a hand-off, a cancel) or by the wait itself if it did not queue.
/// Checked: the count never passes the bound, every attempt is counted once
/// (accepted, cancelled or refused as queue full), and no place leaks.
mod bounded_queue {
    use super::*;

    fn bounded(capacity: usize, max: usize) -> Arc<Shared> {
        Arc::new(Shared {
            bh: Bulkhead::new("loom", capacity, ManualClock::new()).with_max_waiters(max),
            active: AtomicUsize::new(0),
        })
    }

    /// A thread that polls one `acquire()` once and drops it: `Some(true)`
    /// it got the permit, `Some(false)` refused as queue full, `None`
    /// queued (and cancelled by the drop).
    fn spawn_try_wait(s: &Arc<Shared>) -> thread::JoinHandle<Option<bool>> {
        let s = s.clone();
        thread::spawn(move || {
            let mut fut = pin!(s.bh.acquire());
            let r = match poll_once(&mut fut) {
                Poll::Ready(Ok(p)) => {
                    s.work(p, 1);
                    Some(true)
                }
                Poll::Ready(Err(e)) => {
                    assert_eq!(e, AcquireError::QueueFull);
                    Some(false)
                }
                Poll::Pending => None,
            };
            assert!(
                s.bh.waiting() <= 1,
                "waiting {} above the bound",
                s.bh.waiting()
            );
            r
        })
    }

    /// (B1) Two would-be waiters racing a release, one place: each queues
    /// (and cancels), is refused, or is handed the permit; the count stays
    /// within the bound, and afterwards the one place is free again.
    #[test]
    fn count_vs_release_and_cancel() {
        model(|| {
            let s = bounded(1, 1);
            let held = s.bh.try_acquire().unwrap();
            s.enter(&held, 1);
            let a = spawn_try_wait(&s);
            let b = spawn_try_wait(&s);
            assert!(s.bh.waiting() <= 1);
            s.leave(held);
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            s.assert_balanced(1);

            let m = s.bh.metrics();
            let full = [a, b].iter().filter(|r| **r == Some(false)).count();
            assert_eq!(m.rejected_queue_full, full, "{m:?}");
            assert_eq!(m.rejected(), full, "{m:?}");
            // Each of the three attempts once: accepted (at once or by a
            // hand-off, seen or not), cancelled while queued, or refused.
            assert_eq!(m.accepted + m.cancelled_waits + full, 3, "{m:?}");

            // No place leaked: one wait queues, the next is refused.
            let _held = s.bh.try_acquire().unwrap();
            let mut first = pin!(s.bh.acquire());
            assert!(poll_once(&mut first).is_pending());
            let mut second = pin!(s.bh.acquire());
            assert!(matches!(
                poll_once(&mut second),
                Poll::Ready(Err(AcquireError::QueueFull))
            ));
        });
    }

    /// (B2) A patient waiter, a would-be waiter and a release: the patient
    /// one completes unless the newcomer reserved the one place first (a
    /// refusal never swallows a wake-up: loom reports a deadlock if the
    /// patient one is never woken), and each is counted once.
    #[test]
    fn patient_waiter_vs_refused_newcomer() {
        model(|| {
            let s = bounded(1, 1);
            let held = s.bh.try_acquire().unwrap();
            s.enter(&held, 1);
            let patient = {
                let s = s.clone();
                thread::spawn(move || match block_on(s.bh.acquire()) {
                    Ok(p) => {
                        s.work(p, 1);
                        true
                    }
                    // The newcomer reserved the one place first.
                    Err(e) => {
                        assert_eq!(e, AcquireError::QueueFull);
                        false
                    }
                })
            };
            let newcomer = spawn_try_wait(&s);
            s.leave(held);
            let p = patient.join().unwrap();
            let n = newcomer.join().unwrap();
            s.assert_balanced(1);
            // One place: both may not be refused.
            assert!(p || n != Some(false));
            let m = s.bh.metrics();
            let full = usize::from(!p) + usize::from(n == Some(false));
            assert_eq!(m.rejected_queue_full, full, "{m:?}");
            assert_eq!(m.accepted + m.cancelled_waits + full, 3, "{m:?}");
        });
    }
}

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
mod partition {
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
                    let p = block_on(s.pb.acquire_until(1, Instant::MAX))
                        .expect("the new slot is free");
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
}

/// `crate::sync` for the crate files compiled into this test
/// (`src/redis/era.rs`): loom's atomics, as the crate's own `sync` gives
/// them under `--cfg loom`.
mod sync {
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
}

/// `src/redis/era.rs` itself (see `mod lease_era`).
#[allow(dead_code)]
#[path = "../src/redis/era.rs"]
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
mod lease_era {
    use super::era::LeaseEra;
    use super::model;
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn an_expired_lease_ends_once_and_its_permits_are_lost() {
        model(|| {
            let lease = Arc::new(LeaseEra::new());
            lease.renew(10);
            let a = {
                let lease = lease.clone();
                thread::spawn(move || lease.enter(5))
            };
            let enders: Vec<_> = (0..2)
                .map(|_| {
                    let lease = lease.clone();
                    thread::spawn(move || lease.is_live(20))
                })
                .collect();
            let entered = a.join().unwrap();
            let ends: Vec<_> = enders
                .into_iter()
                .map(|t| t.join().unwrap())
                .filter_map(Result::err)
                .collect();
            assert_eq!(ends.len(), 1, "exactly one caller ends the lease");
            assert_eq!(lease.until(), None);
            assert_eq!(lease.era(), 1);
            assert_eq!(lease.held(), 0, "the next era starts empty");
            match entered {
                Ok((era, held)) => {
                    assert_eq!((era, held), (0, 1));
                    assert_eq!(ends[0], 1, "the ended era counted the permit");
                    assert_ne!(lease.era(), era, "its permit is lost");
                    lease.leave(era);
                    assert_eq!(lease.held(), 0);
                }
                Err(_) => assert_eq!(ends[0], 0, "nothing entered the ended era"),
            }
        });
    }

    #[test]
    fn a_permit_of_an_ended_era_never_touches_the_next() {
        model(|| {
            let lease = Arc::new(LeaseEra::new());
            lease.renew(10);
            // A permit taken at 5: under the first lease, or under the
            // second if it is renewed by then (5 is before its end too).
            let old = {
                let lease = lease.clone();
                thread::spawn(move || {
                    let entered = lease.enter(5).ok().map(|(era, _)| era);
                    if let Some(era) = entered {
                        lease.leave(era);
                    }
                    entered
                })
            };
            let renewed = {
                let lease = lease.clone();
                thread::spawn(move || {
                    lease.end();
                    lease.renew(30);
                    lease.enter(25)
                })
            };
            let old_era = old.join().unwrap();
            let (era, held) = renewed.join().unwrap().expect("the new lease is live");
            assert_eq!(era, 1);
            assert!(
                held == 1 || (held == 2 && old_era == Some(1)),
                "the new era counts its own permits only: {held}, the other in {old_era:?}"
            );
            assert_eq!(lease.held(), 1, "only the new era's permit is held");
            lease.leave(era);
            assert_eq!((lease.era(), lease.held()), (1, 0));
        });
    }
}

/// `src/redis/rate/cells.rs` itself (see `mod pocket_cells`).
#[allow(dead_code)]
#[path = "../src/redis/rate/cells.rs"]
mod cells;

/// The leased global rate's pocket of cells (`src/redis/rate/cells.rs`,
/// compiled here on loom's atomics as `era.rs` is). Checked: spends
/// racing each other and the keeper's refill lose and invent nothing —
/// every cell granted is spent once, wasted once, or left, and no spend
/// takes a cell the pocket did not hold.
///
/// Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test
/// --release --test loom pocket_cells`.
mod pocket_cells {
    use super::cells::Cells;
    use super::model;
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn racing_spends_and_a_refill_account_for_every_cell() {
        model(|| {
            let cells = Arc::new(Cells::new());
            cells.refill(0, 3); // the first grant: 3 cells
            let spenders: Vec<_> = [2, 1]
                .into_iter()
                .map(|n| {
                    let cells = cells.clone();
                    thread::spawn(move || if cells.take(n) { n } else { 0 })
                })
                .collect();
            // The next refresh: the 3 cells of the first grant are old
            // (none is young), 2 more granted.
            let refill = {
                let cells = cells.clone();
                thread::spawn(move || cells.refill(0, 2))
            };
            let spent: u64 = spenders.into_iter().map(|t| t.join().unwrap()).sum();
            let (before, wasted, after) = refill.join().unwrap();
            assert_eq!(after, before - wasted + 2);
            assert!(spent <= 3 + 2);
            assert_eq!(
                spent + wasted + cells.get(),
                3 + 2,
                "a cell lost or invented"
            );
        });
    }
}

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
mod latency_histogram {
    use super::*;
    use watertight::hedge::{LatencyHistogram, Percentile};

    /// `per_thread` records of `ns` nanoseconds on each of two threads.
    fn two_recorders(window: u32, per_thread: [&'static [u64]; 2]) -> Arc<LatencyHistogram> {
        let h = Arc::new(LatencyHistogram::new(window));
        let t = {
            let h = h.clone();
            thread::spawn(move || {
                for ns in per_thread[1] {
                    h.record(Duration::from_nanos(*ns));
                }
            })
        };
        for ns in per_thread[0] {
            h.record(Duration::from_nanos(*ns));
        }
        t.join().unwrap();
        h
    }

    #[test]
    fn a_record_two_windows_late_is_not_counted() {
        model(|| {
            // Window 1, three records of one bucket: windows 0, 1, 2; 0 and
            // 2 share the slot. Read after: windows 2 and 3, one sample.
            let h = two_recorders(1, [&[5], &[5, 5]]);
            assert_eq!(h.recorded(), 3);
            assert_eq!(h.len(), 1);
            assert_eq!(h.percentile(Percentile::P50), Some(Duration::from_nanos(5)));
        });
    }

    #[test]
    fn every_sample_of_the_two_windows_is_counted_once() {
        model(|| {
            // Window 2: windows 0, 0, 1; all three read.
            let h = two_recorders(2, [&[3], &[3, 9]]);
            assert_eq!(h.len(), 3);
            assert_eq!(
                h.percentile(Percentile::new(100.0).unwrap()),
                Some(Duration::from_nanos(9))
            );
            assert_eq!(h.percentile(Percentile::P50), Some(Duration::from_nanos(3)));
        });
    }

    #[test]
    fn a_read_racing_with_records_invents_nothing() {
        model(|| {
            let h = Arc::new(LatencyHistogram::new(1));
            let t = {
                let h = h.clone();
                thread::spawn(move || {
                    h.record(Duration::from_nanos(2));
                    h.record(Duration::from_nanos(2));
                })
            };
            h.record(Duration::from_nanos(7));
            let len = h.len();
            assert!(len <= 2, "{len} samples read, two windows of 1");
            let p = h.percentile(Percentile::new(100.0).unwrap());
            let recorded = [
                None,
                Some(Duration::from_nanos(2)),
                Some(Duration::from_nanos(7)),
            ];
            assert!(recorded.contains(&p), "{p:?}");
            t.join().unwrap();
        });
    }
}

/// The hedge budget: a token bucket in one atomic word. Checked: **no
/// token is spent twice** (of callers racing for the last token, exactly
/// one gets it) and **refunds and refills are never lost** against a
/// concurrent spend (the count once all have joined is the same in every
/// interleaving).
mod hedge_budget {
    use super::*;
    use watertight::hedge::{HedgeBudget, HedgeConfig};

    #[test]
    fn racing_hedges_share_the_last_token() {
        model(|| {
            let config = HedgeConfig::builder().budget(1, 50.0).build().unwrap();
            let budget = Arc::new(HedgeBudget::new(&config));
            let sent = Arc::new(AtomicUsize::new(0));
            let t = {
                let (budget, sent) = (budget.clone(), sent.clone());
                thread::spawn(move || {
                    if budget.try_spend() {
                        sent.fetch_add(1, SeqCst);
                    }
                })
            };
            if budget.try_spend() {
                sent.fetch_add(1, SeqCst);
            }
            t.join().unwrap();
            assert_eq!(sent.load(SeqCst), 1);
            assert_eq!(budget.tokens(), 0.0);
        });
    }

    #[test]
    fn refunds_and_refills_are_not_lost() {
        model(|| {
            // 2 tokens, 50 %: one spent and refunded (not sent after all)
            // while another call spends one and succeeds.
            let config = HedgeConfig::builder().budget(2, 50.0).build().unwrap();
            let budget = Arc::new(HedgeBudget::new(&config));
            let t = {
                let budget = budget.clone();
                thread::spawn(move || {
                    assert!(budget.try_spend());
                    budget.refund();
                })
            };
            assert!(budget.try_spend());
            budget.succeeded();
            t.join().unwrap();
            assert_eq!(budget.tokens(), 1.5);
        });
    }
}

/// The hedge's kept percentile delay: one word holding the delay and the
/// refresh period it was read in. Checked: **a delay read racing with
/// records is one the histogram could give** (one of the recorded
/// latencies' buckets, never a torn or invented value), and **once the
/// next period starts the kept value is read again**, so a stale one (read
/// while a record was still landing) does not outlive its period.
mod hedge_delay {
    use super::*;
    use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};

    #[test]
    fn a_kept_delay_lasts_one_period() {
        model(|| {
            // Window 16: a period of one record; the largest sample.
            let top = Percentile::new(100.0).unwrap();
            let config = HedgeConfig::builder()
                .delay(HedgeDelay::Percentile(top))
                .min_samples(1)
                .window(16)
                .build()
                .unwrap();
            let hedge = Arc::new(Hedge::new("loom", config));
            let seen = [Duration::from_nanos(5), Duration::from_nanos(9)];
            let t = {
                let hedge = hedge.clone();
                thread::spawn(move || {
                    hedge.histogram().record(Duration::from_nanos(5));
                    hedge.delay()
                })
            };
            hedge.histogram().record(Duration::from_nanos(9));
            let mine = hedge.delay();
            let theirs = t.join().unwrap();
            for d in [mine, theirs] {
                assert!(d.is_some_and(|d| seen.contains(&d)), "{d:?}");
            }
            hedge.histogram().record(Duration::from_nanos(3));
            assert_eq!(hedge.delay(), hedge.histogram().percentile(top));
            assert_eq!(hedge.delay(), Some(Duration::from_nanos(9)));
        });
    }
}

/// The fault injector's shared sequence (feature `chaos`): each draw is one
/// `fetch_add` on the jitter's counter, so callers drawing at once take
/// distinct draws and skip none — between them, exactly a sequential run's
/// faults — and a call racing `disable` takes one draw and is counted once,
/// or takes none and is not counted.
#[cfg(feature = "chaos")]
mod chaos {
    use super::*;
    use watertight::chaos::{ChaosConfig, Fault, Injector};

    type Chaos = Injector<ManualClock, Result<(), ()>>;

    fn config() -> ChaosConfig<Result<(), ()>> {
        ChaosConfig::builder()
            .error(0.3, || Err(()))
            .hang(0.3)
            .seed(5)
            .build()
            .unwrap()
    }

    /// The first `n` draws of a fresh injector, one after another.
    fn sequential(n: usize) -> Vec<Option<Fault>> {
        let chaos: Chaos = Injector::new("loom", config(), ManualClock::new());
        (0..n).map(|_| chaos.draw()).collect()
    }

    fn key(f: &Option<Fault>) -> usize {
        f.map_or(4, |f| f as usize)
    }

    #[test]
    fn concurrent_draws_are_a_sequential_run_shared_out() {
        model(|| {
            let chaos: Arc<Chaos> = Arc::new(Injector::new("loom", config(), ManualClock::new()));
            let other = {
                let chaos = chaos.clone();
                thread::spawn(move || [chaos.draw(), chaos.draw()])
            };
            let mine = [chaos.draw(), chaos.draw()];
            let theirs = other.join().unwrap();
            let mut got: Vec<_> = mine.iter().chain(&theirs).copied().collect();
            let mut want = sequential(4);
            got.sort_by_key(key);
            want.sort_by_key(key);
            assert_eq!(got, want);
            let m = chaos.metrics();
            assert_eq!(m.total_injected() + m.passed, 4, "{m:?}");
        });
    }

    #[test]
    fn a_draw_racing_disable_is_counted_once_or_not_at_all() {
        model(|| {
            let chaos: Arc<Chaos> = Arc::new(Injector::new("loom", config(), ManualClock::new()));
            let other = {
                let chaos = chaos.clone();
                thread::spawn(move || chaos.draw())
            };
            chaos.disable();
            assert_eq!(chaos.draw(), None, "disabled on this thread: no draw");
            let theirs = other.join().unwrap();
            chaos.enable();
            let mine = chaos.draw();
            let m = chaos.metrics();
            let taken = m.total_injected() + m.passed;
            let seq = sequential(2);
            match taken {
                // The other call saw the flag up: it took the first draw.
                2 => assert_eq!([theirs, mine], [seq[0], seq[1]]),
                // It saw the flag down: no draw, and the sequence resumes.
                1 => assert_eq!((theirs, mine), (None, seq[0])),
                n => panic!("{n} draws counted for at most 2 calls"),
            }
        });
    }
}
