#![cfg(not(loom))]
//! Deterministic integration tests of the public `Bulkhead` API.
//!
//! Time comes from a `ManualClock`, futures are polled by hand with counting
//! wakers (`common::Probe`, `common::Task`), and nothing sleeps: every test
//! gives the same answer on every run. The one test with real threads
//! (`never_exceeds_max_concurrent_calls`) asserts an invariant that must hold
//! in every interleaving.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use common::{now_or_never, Probe, Task};
use futures_lite::future;
use watertight::clock::{Clock, Instant, ManualClock, StdClock};
use watertight::{AcquireError, Bulkhead, ConfigError, Permit};

const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

fn exceeds(requested: usize, capacity: usize) -> AcquireError {
    AcquireError::ExceedsCapacity {
        requested,
        capacity,
    }
}

/// Asserts every counter of `bh` in one line: accepted, rejected_full,
/// rejected_timed_out, rejected_closed, cancelled_waits.
#[track_caller]
fn assert_counters<C>(bh: &Bulkhead<C>, expected: (usize, usize, usize, usize, usize)) {
    let m = bh.metrics();
    assert_eq!(
        (
            m.accepted,
            m.rejected_full,
            m.rejected_timed_out,
            m.rejected_closed,
            m.cancelled_waits
        ),
        expected,
        "(accepted, full, timed out, closed, cancelled)"
    );
}

// ---------------------------------------------------------------------------
// The classic semaphore-bulkhead tests (as a Python service would write
// them), translated.
// ---------------------------------------------------------------------------

#[test]
fn allows_calls_up_to_capacity() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 2, &clock);

    let call = |bh: &Bulkhead<&ManualClock>| -> Result<i32, AcquireError> {
        let _permit = bh.try_acquire()?;
        Ok(1 + 1)
    };
    assert_eq!(call(&bh), Ok(2));

    // Up to capacity, waiting acquires complete on their first poll.
    let a = now_or_never(bh.acquire_timeout(Duration::from_secs(1))).unwrap();
    let b = now_or_never(bh.acquire()).unwrap();
    assert_eq!((bh.in_flight(), bh.available()), (2, 0));
    // One more is refused.
    assert_eq!(bh.try_acquire().unwrap_err(), AcquireError::Full);
    assert_eq!(call(&bh), Err(AcquireError::Full));
    drop((a, b));
    assert_eq!(call(&bh), Ok(2));
    assert_counters(&bh, (4, 2, 0, 0, 0));
}

#[test]
fn rejects_once_capacity_and_wait_are_exhausted() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let holder = bh.try_acquire().unwrap();

    let mut call = Task::pending(bh.acquire_timeout(200 * MS));
    assert_eq!(bh.waiting(), 1);

    clock.advance(199 * MS);
    call.assert_pending();

    clock.advance(MS);
    assert!(call.woken(), "the deadline must wake the waiter");
    assert_eq!(call.ready().unwrap_err(), AcquireError::TimedOut);
    assert_eq!(bh.waiting(), 0);
    // The holder still has its permit.
    assert_eq!(bh.in_flight(), 1);
    assert_counters(&bh, (1, 0, 1, 0, 0));
    drop(holder);
    assert_eq!(bh.available(), 1);
}

#[test]
fn releases_the_slot_even_if_the_call_errors() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);

    fn failing_call(bh: &Bulkhead<&ManualClock>) -> Result<(), &'static str> {
        let _permit = bh.try_acquire().map_err(|_| "busy")?;
        Err("downstream exploded")
    }

    assert_eq!(failing_call(&bh), Err("downstream exploded"));
    // If the slot leaked this would be "busy".
    assert_eq!(bh.available(), 1);
    assert_eq!(failing_call(&bh), Err("downstream exploded"));

    // An error path also hands the slot to a waiter.
    fn call_holding(permit: Permit<'_, &ManualClock>) -> Result<(), &'static str> {
        let _permit = permit;
        Err("failed while holding the permit")
    }
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire_timeout(100 * MS));
    assert!(call_holding(held).is_err());
    assert!(waiter.woken());
    let permit = waiter.ready().unwrap();
    assert_eq!(bh.in_flight(), 1);
    drop(permit);
    assert_eq!((bh.in_flight(), bh.available()), (0, 1));
}

#[test]
fn releases_the_slot_even_if_the_call_panics() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);

    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let _permit = bh.try_acquire().unwrap();
        assert_eq!(bh.in_flight(), 1);
        panic!("downstream exploded");
    }));
    assert!(outcome.is_err());
    assert_eq!((bh.in_flight(), bh.available()), (0, 1));

    // Unwinding hands the slot to a waiter too.
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire());
    let outcome = panic::catch_unwind(AssertUnwindSafe(move || {
        let _permit = held;
        panic!("still exploding");
    }));
    assert!(outcome.is_err());
    assert!(waiter.woken());
    let permit = waiter.ready().unwrap();
    assert_eq!(bh.in_flight(), 1);
    let outcome = panic::catch_unwind(AssertUnwindSafe(move || {
        let _permit = permit;
        panic!("the waiter's call exploded");
    }));
    assert!(outcome.is_err());
    assert_eq!((bh.in_flight(), bh.available()), (0, 1));

    // An owned permit on a thread that panics is released by the unwinding.
    let owned = Arc::new(Bulkhead::new("owned", 1, StdClock));
    let permit = owned.try_acquire_owned().unwrap();
    let joined = thread::spawn(move || {
        let _permit = permit;
        panic!("the spawned call exploded");
    })
    .join();
    assert!(joined.is_err());
    assert_eq!((owned.in_flight(), owned.available()), (0, 1));
    assert!(owned.try_acquire().is_ok());
}

#[test]
fn never_exceeds_max_concurrent_calls() {
    const LIMIT: usize = 3;
    const CALLERS: usize = 10;
    let iterations = if cfg!(miri) { 3 } else { 200 };

    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", LIMIT, &clock);
    let in_call = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let completed = AtomicUsize::new(0);

    thread::scope(|s| {
        for _ in 0..CALLERS {
            s.spawn(|| {
                for _ in 0..iterations {
                    let permit = future::block_on(bh.acquire()).unwrap();
                    let now = in_call.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    thread::yield_now();
                    in_call.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
                completed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });

    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=LIMIT).contains(&peak), "observed peak {peak}");
    assert_eq!(completed.load(Ordering::SeqCst), CALLERS);
    let m = bh.metrics();
    assert!(m.peak_in_flight <= LIMIT, "{m:?}");
    assert!(m.peak_in_flight >= peak, "{m:?}");
    assert_eq!(m.accepted, CALLERS * iterations);
    assert_eq!((m.in_flight, m.available, m.waiting), (0, LIMIT, 0));
    assert_eq!(m.rejected(), 0);
}

#[test]
fn two_bulkheads_are_independent() {
    let clock = ManualClock::new();
    let a = Bulkhead::new("a", 1, &clock);
    let b = Bulkhead::new("b", 1, &clock);

    let held = a.try_acquire().unwrap();
    let mut waiting_on_a = Task::pending(a.acquire_timeout(200 * MS));
    assert_eq!(a.try_acquire().unwrap_err(), AcquireError::Full);

    // a's single slot is taken and a has a waiter; b is untouched.
    assert_eq!((b.available(), b.waiting()), (1, 0));
    let on_b = now_or_never(b.acquire_timeout(200 * MS)).unwrap();
    assert_eq!(on_b.bulkhead().name(), "b");
    // Releasing b's permit does not wake a's waiter.
    drop(on_b);
    assert!(!waiting_on_a.woken());
    waiting_on_a.assert_pending();

    assert_eq!(a.metrics().name, "a");
    assert_eq!(b.metrics().name, "b");
    assert_counters(&a, (1, 1, 0, 0, 0));
    assert_counters(&b, (1, 0, 0, 0, 0));

    // a's waiter times out on the shared clock; b does not notice.
    clock.advance(200 * MS);
    assert_eq!(waiting_on_a.ready().unwrap_err(), AcquireError::TimedOut);
    assert_counters(&b, (1, 0, 0, 0, 0));
    drop(held);
}

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

// ---------------------------------------------------------------------------
// Cancellation.
// ---------------------------------------------------------------------------

#[test]
fn dropping_a_pending_acquire_loses_no_permit_and_keeps_the_order() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);
    let held = bh.try_acquire().unwrap();

    let mut a = Task::pending(bh.acquire());
    let b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut c = Task::pending(bh.acquire());
    let mut d = Task::pending(bh.acquire_until(clock.now() + Duration::from_secs(1)));
    assert_eq!(bh.waiting(), 4);

    drop(b);
    assert_eq!((bh.waiting(), bh.in_flight(), bh.available()), (3, 1, 0));
    assert!(!a.woken() && !c.woken() && !d.woken());

    drop(held);
    assert!(a.woken());
    assert!(!c.woken() && !d.woken());
    c.assert_pending();
    d.assert_pending();
    let pa = a.ready().unwrap();

    drop(pa);
    assert!(c.woken());
    assert!(!d.woken());
    d.assert_pending();
    let pc = c.ready().unwrap();

    drop(pc);
    let pd = d.ready().unwrap();
    assert_eq!((bh.waiting(), bh.in_flight()), (0, 1));
    drop(pd);
    assert_eq!(bh.available(), 1);
    assert_counters(&bh, (4, 0, 0, 0, 1));
}

#[test]
fn dropping_a_woken_waiter_passes_the_wakeup_on() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 1, &clock);

    // The woken waiter is an `Acquire`.
    let held = bh.try_acquire().unwrap();
    let a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire());
    drop(held);
    assert!(a.woken());
    assert!(!b.woken());
    drop(a);
    assert!(
        b.woken(),
        "the permit handed to the cancelled waiter reaches the next one"
    );
    let p = b.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));

    // The woken waiter is an `AcquireUntil`.
    let a = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    let mut b = Task::pending(bh.acquire_timeout(Duration::from_secs(1)));
    drop(p);
    assert!(a.woken());
    assert!(!b.woken());
    drop(a);
    assert!(b.woken());
    let p = b.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
    drop(p);
    // A dropped waiter whose permit had been handed to it counts as accepted
    // (it held the permit, for no time): five grants, no cancelled wait.
    assert_counters(&bh, (5, 0, 0, 0, 0));
}

#[test]
fn dropping_a_woken_waiter_passes_the_wakeup_on_after_a_batch_release() {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("test", 2, &clock);
    let held = bh.try_acquire_many(2).unwrap();

    let a = Task::pending(bh.acquire());
    let mut b = Task::pending(bh.acquire());
    let mut c = Task::pending(bh.acquire());
    drop(held); // two permits back at once: handed to the first two waiters
    assert!(a.woken() && b.woken());
    assert!(!c.woken());
    assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (0, 2, 1));
    drop(a);
    // A's permit is not lost: it goes straight on to C.
    assert!(c.woken(), "the second permit must reach the next waiter");
    assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (0, 2, 0));
    let pb = b.ready().unwrap();
    let pc = c.ready().unwrap();
    assert_eq!((bh.in_flight(), bh.waiting()), (2, 0));
    drop((pb, pc));
    assert_counters(&bh, (4, 0, 0, 0, 0));
}

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

// ---------------------------------------------------------------------------
// Wakers that give back a permit of the same bulkhead when dropped: the last
// reference to a task whose future holds a permit (tokio's
// `release_permits_at_drop` pattern). A waker dropped while the queue's lock
// is held would deadlock the release it causes, so every path that drops or
// wakes a waker must do it with the lock released. Each scenario runs on a
// thread of its own and must finish (a deadlock fails it instead of hanging
// the suite).
// ---------------------------------------------------------------------------

type Shared = Arc<Bulkhead<Arc<ManualClock>>>;

/// A waker that owns the bulkhead's only permit: dropping its last copy
/// releases it.
struct PermitInWaker(
    // Never read: held for its drop.
    #[allow(dead_code)] std::sync::Mutex<Option<watertight::OwnedPermit<Arc<ManualClock>>>>,
);

impl std::task::Wake for PermitInWaker {
    fn wake(self: Arc<Self>) {}
}

/// A waker that owns `permit`: dropping its last copy releases it.
fn waker_holding(permit: watertight::OwnedPermit<Arc<ManualClock>>) -> std::task::Waker {
    std::task::Waker::from(Arc::new(PermitInWaker(std::sync::Mutex::new(Some(permit)))))
}

/// A capacity-1 bulkhead whose one permit lives inside the returned waker.
fn permit_in_waker() -> (Arc<ManualClock>, Shared, std::task::Waker) {
    let clock = Arc::new(ManualClock::new());
    let bh = Arc::new(Bulkhead::new("waker", 1, Arc::clone(&clock)));
    let waker = waker_holding(bh.try_acquire_owned().unwrap());
    (clock, bh, waker)
}

fn without_deadlock(scenario: &'static str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let worker = thread::spawn(move || {
        f();
        done.send(()).unwrap();
    });
    // Generous: the scenario takes microseconds; this only turns a hang
    // into a failure.
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The scenario panicked: report its panic.
            if let Err(panic) = worker.join() {
                panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{scenario}: deadlocked (a waker dropped under the queue's lock)")
        }
    }
}

fn poll_with<F: std::future::Future>(
    fut: std::pin::Pin<&mut F>,
    waker: &std::task::Waker,
) -> Poll<F::Output> {
    fut.poll(&mut std::task::Context::from_waker(waker))
}

#[test]
fn a_replaced_waker_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("re-poll with a new waker", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = pin!(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        // The caller drops its copy: the queue's is the last one.
        drop(first);
        let second = Probe::new();
        // Replacing the waker drops the old one, which releases the permit;
        // the release hands it to this very waiter.
        let r = second.poll(fut.as_mut());
        let permit = match r {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => {
                assert!(second.woken(), "the permit released by the old waker");
                match second.poll(fut.as_mut()) {
                    Poll::Ready(r) => r.unwrap(),
                    Poll::Pending => panic!("handed its permit, yet pending"),
                }
            }
        };
        assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
        drop(permit);
        assert_eq!(bh.available(), 1);
    });
}

#[test]
fn a_waker_dropped_on_cancel_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("cancel", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        // Leaving the queue drops the last copy: the permit comes back.
        drop(fut);
        let m = bh.metrics();
        assert_eq!(
            (m.available, m.in_flight, m.waiting, m.cancelled_waits),
            (1, 0, 0, 1)
        );
    });
}

#[test]
fn a_waker_dropped_on_timeout_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("timeout", || {
        let (clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire_timeout(10 * MS));
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        clock.advance(10 * MS);
        // The poll that meets the deadline drops the old waker, whose permit
        // is handed to this waiter before it gives up: it keeps it.
        let second = Probe::new();
        let permit = match second.poll(fut.as_mut()) {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => panic!("pending past its deadline"),
        };
        assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
        drop(permit);

        // A second waiter, timed out while its waker is the last holder of
        // the permit: the time-out unlinks it and drops the waker after.
        let held = bh.try_acquire_owned().unwrap();
        let holder = waker_holding(held);
        let mut fut = Box::pin(bh.acquire_timeout(10 * MS));
        assert!(poll_with(fut.as_mut(), &holder).is_pending());
        clock.advance(10 * MS);
        let r = poll_with(fut.as_mut(), &holder);
        drop(holder);
        assert!(
            matches!(r, Poll::Ready(Err(AcquireError::TimedOut))),
            "{r:?}"
        );
        assert_eq!((bh.available(), bh.waiting()), (1, 0));
    });
}

#[test]
fn a_waker_dropped_on_close_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("close", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        // `close` wakes (and so drops) the last copy: the permit comes back.
        assert!(bh.close());
        assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (1, 0, 0));
        let second = Probe::new();
        assert!(matches!(
            second.poll(fut.as_mut()),
            Poll::Ready(Err(AcquireError::Closed))
        ));
    });
}

#[test]
fn a_woken_waker_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("hand-off", || {
        // A hand-off wakes the waiter's waker, the last copy, which releases
        // a permit: it must find the queue's lock free.
        let clock = Arc::new(ManualClock::new());
        let bh = Arc::new(Bulkhead::new("waker", 2, Arc::clone(&clock)));
        let a = bh.try_acquire_owned().unwrap();
        let b = bh.try_acquire_owned().unwrap();
        let holder = waker_holding(b);
        let mut first = Box::pin(bh.acquire());
        let mut second = Box::pin(bh.acquire());
        assert!(poll_with(first.as_mut(), &holder).is_pending());
        let probe = Probe::new();
        assert!(probe.poll(second.as_mut()).is_pending());
        drop(holder);
        drop(a); // handed to `first`; waking it releases `b`, handed to `second`
        assert!(probe.woken());
        assert_eq!((bh.in_flight(), bh.waiting()), (2, 0));
        assert!(matches!(probe.poll(second.as_mut()), Poll::Ready(Ok(_))));
        drop(first); // handed a permit it never saw: given back
        assert_eq!(bh.in_flight(), 0);
    });
}

#[test]
fn ten_thousand_waiters_queue_and_are_served_in_order() {
    // No cap on waiters but memory (the waiter count used to live in a
    // 12-bit field of the state word: the 4096th was refused as `Full`).
    let n = if cfg!(miri) { 40 } else { 10_000 };
    let clock = ManualClock::new();
    let bh = Bulkhead::new("busy", 1, &clock);
    let held = bh.try_acquire().unwrap();
    let mut waiters: Vec<_> = (0..n)
        .map(|_| Task::pending(bh.acquire_timeout(Duration::from_millis(100))))
        .collect();
    let m = bh.metrics();
    assert_eq!((m.waiting, m.queued, m.rejected()), (n, n, 0));
    drop(held);
    // Each permit goes to the next in line, and only to it.
    for i in 0..n {
        assert!(waiters[i].woken(), "waiter {i} was handed the permit");
        let p = waiters[i].ready().unwrap();
        if let Some(next) = waiters.get(i + 1) {
            assert!(!next.woken(), "waiter {} woken out of turn", i + 1);
        }
        drop(p);
    }
    let m = bh.metrics();
    assert_eq!((m.waiting, m.accepted, m.in_flight), (0, n + 1, 0));
}

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
