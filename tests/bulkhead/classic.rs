//! The classic semaphore-bulkhead tests, translated.

use super::*;

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
