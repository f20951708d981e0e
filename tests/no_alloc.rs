//! The hot paths allocate nothing. Bulkhead: `try_acquire`, an acquire that
//! succeeds at once (including the timed ones), and release. Breaker: every
//! operation, in every state — permits and their outcomes, trips, rejections,
//! half-open probes, `call` polled to completion, the operator switches and
//! the metrics. Counted by a global allocator that tallies the allocations
//! made on the current thread.
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use watertight::breaker::{State, Transition};
use watertight::clock::{ManualClock, StdClock};
use watertight::{BreakerConfig, Bulkhead, CallError, CircuitBreaker, Outcome, Rejection};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; the thread-local counter
// has a const initializer, so touching it never allocates or recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn hot_paths_do_not_allocate() {
    let clock = ManualClock::new();
    let b = Bulkhead::new("hot", 4, &clock);
    let std_b = Bulkhead::new("std", 4, StdClock);
    let owned = Arc::new(Bulkhead::new("owned", 4, StdClock));
    // Warm up once: nothing lazily allocated may hide in the first call.
    drop(b.try_acquire().unwrap());

    assert_eq!(
        allocations_in(|| drop(b.try_acquire().unwrap())),
        0,
        "try_acquire + release"
    );
    assert_eq!(
        allocations_in(|| drop(b.try_acquire_many(3).unwrap())),
        0,
        "try_acquire_many + release"
    );
    assert_eq!(
        allocations_in(|| drop(std_b.try_acquire().unwrap())),
        0,
        "StdClock bulkhead"
    );
    assert_eq!(
        allocations_in(|| drop(owned.try_acquire_owned().unwrap())),
        0,
        "owned permit"
    );
    assert_eq!(
        allocations_in(|| {
            let held = b.try_acquire_many(4).unwrap();
            assert!(b.try_acquire().is_err());
            drop(held);
        }),
        0,
        "a rejection"
    );

    // Acquires that find a permit free complete on their first poll without
    // creating a listener. block_on caches its waker on first use: warm it.
    futures_lite::future::block_on(async {});
    let n = allocations_in(|| drop(futures_lite::future::block_on(b.acquire()).unwrap()));
    assert_eq!(n, 0, "acquire() with a permit free");
    let n = allocations_in(|| {
        let p = futures_lite::future::block_on(b.acquire_timeout(Duration::from_millis(5)));
        drop(p.unwrap());
    });
    assert_eq!(n, 0, "acquire_timeout() with a permit free");
    let n = allocations_in(|| drop(futures_lite::future::block_on(b.acquire_many(2)).unwrap()));
    assert_eq!(n, 0, "acquire_many() with permits free");
}

#[test]
fn a_wait_allocates_its_listener() {
    // The documented cost of waiting: event-listener allocates one node per
    // wait. This test keeps that claim honest (and fails if it changes).
    let clock = ManualClock::new();
    let b = Bulkhead::new("wait", 1, &clock);
    let held = b.try_acquire().unwrap();
    let n = allocations_in(|| {
        let mut fut = std::pin::pin!(b.acquire());
        assert!(
            futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut)).is_none()
        );
    });
    assert!(n >= 1, "a registered wait allocates its listener");
    drop(held);
}

// ---------------------------------------------------------------------------
// Breaker
// ---------------------------------------------------------------------------

/// Window 4, rates from 2 outcomes, open 10 s, 2 probes; with `max_wait`,
/// a half-open episode may wait 5 s for its probes.
fn small_config(max_wait: bool) -> BreakerConfig {
    let b = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(2)
        .open_duration(Duration::from_secs(10))
        .half_open_calls(2);
    let b = if max_wait {
        b.max_half_open_wait(Duration::from_secs(5))
    } else {
        b
    };
    b.build().unwrap()
}

/// Opens `b` with two failures (50 % of 2 outcomes).
fn trip<C: watertight::clock::Clock, const N: usize, H: watertight::breaker::OnTransition>(
    b: &CircuitBreaker<C, N, H>,
) {
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
}

#[test]
fn breaker_permit_outcomes_do_not_allocate() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 64> = CircuitBreaker::new("hot", BreakerConfig::DEFAULT, &clock);
    // No warm-up: the very first calls count.
    assert_eq!(
        allocations_in(|| b.try_acquire().unwrap().success()),
        0,
        "try_acquire + success"
    );
    assert_eq!(
        allocations_in(|| b.try_acquire().unwrap().failure()),
        0,
        "try_acquire + failure"
    );
    assert_eq!(
        allocations_in(|| b.try_acquire().unwrap().ignore()),
        0,
        "try_acquire + ignore"
    );
    assert_eq!(
        allocations_in(|| b.try_acquire().unwrap().record(Outcome::Success)),
        0,
        "try_acquire + record"
    );
    assert_eq!(
        allocations_in(|| drop(b.try_acquire().unwrap())),
        0,
        "a permit dropped without an outcome"
    );
    // Past the window's first lap (50 outcomes): the ring's steady state.
    let n = allocations_in(|| {
        for _ in 0..200 {
            b.try_acquire().unwrap().success();
        }
    });
    assert_eq!(n, 0, "200 successes around the ring");
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 50, 0));

    // The same on the real clocks, with and without slow-call timing.
    let std_b: CircuitBreaker<StdClock, 64> =
        CircuitBreaker::new("std", BreakerConfig::DEFAULT, StdClock);
    let timed_config = BreakerConfig::builder()
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    let timed: CircuitBreaker<StdClock, 64> = CircuitBreaker::new("timed", timed_config, StdClock);
    assert_eq!(
        allocations_in(|| std_b.try_acquire().unwrap().success()),
        0,
        "StdClock breaker"
    );
    assert_eq!(
        allocations_in(|| {
            timed.try_acquire().unwrap().success();
            timed.try_acquire().unwrap().failure();
        }),
        0,
        "StdClock breaker with slow-call timing"
    );
    assert_eq!(timed.metrics().calls, 2);
}

#[test]
fn breaker_trip_rejection_and_half_open_do_not_allocate() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("trip", small_config(false), &clock);

    assert_eq!(allocations_in(|| trip(&b)), 0, "a trip to Open");
    assert_eq!(b.state(), State::Open);

    let mut refused = None;
    assert_eq!(
        allocations_in(|| refused = Some(b.try_acquire().unwrap_err())),
        0,
        "a rejection while open"
    );
    assert_eq!(
        refused,
        Some(Rejection::Open {
            retry_after: Duration::from_secs(10)
        })
    );

    clock.advance(Duration::from_secs(10));
    let mut probes = None;
    let n = allocations_in(|| {
        let first = b.try_acquire().unwrap();
        let second = b.try_acquire().unwrap();
        let busy = b.try_acquire().unwrap_err();
        probes = Some((first.is_probe(), second.is_probe(), busy));
        first.success();
        second.success();
    });
    assert_eq!(n, 0, "half-open probes, ProbesBusy, and the close");
    assert_eq!(probes, Some((true, true, Rejection::ProbesBusy)));
    assert_eq!(b.state(), State::Closed);

    // A failed probe reopens; an ignored probe gives its slot back.
    trip(&b);
    clock.advance(Duration::from_secs(10));
    let n = allocations_in(|| {
        b.try_acquire().unwrap().ignore();
        drop(b.try_acquire().unwrap());
        b.try_acquire().unwrap().failure();
    });
    assert_eq!(n, 0, "ignored, dropped and failed probes");
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.state, m.rejected), (State::Open, 2));
}

#[test]
fn breaker_max_half_open_wait_and_stale_outcomes_do_not_allocate() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("wait", small_config(true), &clock);
    trip(&b);
    clock.advance(Duration::from_secs(10));
    let probe = b.try_acquire().unwrap();
    clock.advance(Duration::from_secs(5));
    let mut state = None;
    let n = allocations_in(|| {
        state = Some(b.state());
        // The episode ran out: this call reopens it and is refused.
        assert!(b.try_acquire().is_err());
        // The probe's outcome arrives too late.
        probe.success();
    });
    assert_eq!(n, 0, "an expired half-open episode and a stale outcome");
    assert_eq!(state, Some(State::Open));
    assert_eq!(b.metrics().stale, 1);
}

#[test]
fn breaker_operator_switches_and_metrics_do_not_allocate() {
    let clock = ManualClock::new();
    let opened = std::sync::atomic::AtomicUsize::new(0);
    let b = CircuitBreaker::<_, 4, _>::with_listener(
        "ops",
        small_config(false),
        &clock,
        |t: &Transition| {
            if t.to == State::Open {
                opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        },
    );
    let mut seen = None;
    let n = allocations_in(|| {
        b.force_open();
        let forced = b.try_acquire().unwrap_err();
        b.disable();
        b.try_acquire().unwrap().failure();
        let disabled_calls = b.metrics().calls;
        b.reset();
        trip(&b);
        seen = Some((forced, disabled_calls, b.metrics().state));
    });
    assert_eq!(n, 0, "force_open, disable, reset, a listener, metrics");
    assert_eq!(seen, Some((Rejection::ForcedOpen, 0, State::Open)));
    assert_eq!(opened.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn breaker_call_polled_to_completion_does_not_allocate() {
    let clock = ManualClock::new();
    // Rates from 3 outcomes: the third call below trips it.
    let config = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(3)
        .build()
        .unwrap();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("call", config, &clock);
    // block_on caches its parker and waker on first use: warm it.
    futures_lite::future::block_on(async {});

    let mut got = None;
    let n = allocations_in(|| {
        got = Some(futures_lite::future::block_on(
            b.call(async { Ok::<_, ()>(7) }),
        ));
    });
    assert_eq!(n, 0, "call() returning Ok");
    assert_eq!(got, Some(Ok(7)));

    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(b.call_with(
            async { Ok::<u16, ()>(503) },
            |r: &Result<u16, ()>| match r {
                Ok(s) if *s < 500 => Outcome::Success,
                _ => Outcome::Failure,
            },
        ));
        assert_eq!(r, Ok(503));
    });
    assert_eq!(n, 0, "call_with() classifying an Ok as a failure");

    // A call that yields once before it completes: polled twice.
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(b.call(async {
            futures_lite::future::yield_now().await;
            Err::<u8, _>("boom")
        }));
        assert_eq!(r, Err(CallError::Failed("boom")));
    });
    assert_eq!(n, 0, "call() pending once, then failing (and tripping)");
    assert_eq!(b.state(), State::Open);

    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(b.call(async { Ok::<_, ()>(1) }));
        assert!(matches!(
            r,
            Err(CallError::Rejected(Rejection::Open { .. }))
        ));
    });
    assert_eq!(n, 0, "call() rejected");
}
