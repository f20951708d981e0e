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
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom`.
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
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 1 + usize::from(took));
        assert_eq!(m.cancelled_waits, usize::from(!took));
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
        let m = s.bh.metrics();
        assert_eq!(m.accepted, 2 + usize::from(took));
        assert_eq!(m.cancelled_waits, usize::from(!took));
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

/// (9b) The interleaving behind (9), replayed on one thread: the waiter for
/// two permits is woken by the only release, finds one permit free and
/// re-queues without passing the wake-up on; the single waiter then sleeps
/// with a permit free that nobody else can use.
#[test]
fn many_waiter_does_not_block_single_waiter_sequential() {
    model(|| {
        let s = Shared::new(2);
        let a = s.bh.try_acquire().unwrap();
        let b = s.bh.try_acquire().unwrap();

        let (many_woken, many_waker) = flag();
        let mut many = pin!(s.bh.acquire_many(2));
        let mut cx = Context::from_waker(&many_waker);
        assert!(many.as_mut().poll(&mut cx).is_pending(), "registered");

        let (one_woken, one_waker) = flag();
        let mut one = pin!(s.bh.acquire());
        let mut cx1 = Context::from_waker(&one_waker);
        assert!(
            one.as_mut().poll(&mut cx1).is_pending(),
            "registered behind it"
        );
        assert_eq!(s.bh.waiting(), 2);

        drop(a); // one permit back: notify(1) reaches the first listener, `many`'s
        assert!(many_woken.0.load(std::sync::atomic::Ordering::SeqCst));
        assert!(
            many.as_mut().poll(&mut cx).is_pending(),
            "one permit is not two"
        );

        assert_eq!((s.bh.available(), s.bh.waiting()), (1, 2));
        assert!(
            one_woken.0.load(std::sync::atomic::Ordering::SeqCst),
            "a permit is free and the single-permit waiter was never woken"
        );
        match one.as_mut().poll(&mut cx1) {
            Poll::Ready(r) => drop(r.unwrap()),
            Poll::Pending => panic!("woken, yet no permit"),
        }
        drop(b);
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
