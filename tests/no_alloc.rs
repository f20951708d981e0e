//! The hot paths allocate nothing. Bulkhead: `try_acquire`, an acquire that
//! succeeds at once (including the timed ones), and release. Breaker: every
//! operation, in every state — permits and their outcomes, trips, rejections,
//! half-open probes, `call` polled to completion, the operator switches and
//! the metrics. Deadlines: a `timeout` that completes, budgets. Policy: a
//! call with nothing failing polled to completion with a slot free, and
//! every refusal. Waiting: a wait that queues and is handed its permit, one
//! cancelled while queued, one that times out (on tokio), a policy's wait for
//! a slot — none allocates (the futures hold their own queue nodes). Rate
//! limiter: `check`, `check_n` admitted and refused, a wait admitted or
//! refused at once, and (on tokio) a wait that sleeps for its cells and is
//! served, or is cancelled and gives them back — none allocates (a wait is
//! a reservation held in its future).
//! Counted by a global allocator that tallies the allocations made on the
//! current thread.
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use watertight::breaker::{State, Transition};
use watertight::clock::{Clock, ManualClock, StdClock};
use watertight::deadline::{timeout, timeout_at, Deadline, Elapsed};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::rate::{Quota, RateLimiter};
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
fn a_wait_that_queues_and_is_handed_its_permit_allocates_nothing() {
    // futures-lite's `block_on` makes its thread's parker on first use.
    futures_lite::future::block_on(async {});
    // The waiting future holds its own queue node: queueing, the hand-off on
    // release and taking the permit allocate nothing (no event-listener).
    let clock = ManualClock::new();
    let b = Bulkhead::new("wait", 1, &clock);
    let n = allocations_in(|| {
        for _ in 0..3 {
            let held = b.try_acquire().unwrap();
            let mut fut = std::pin::pin!(b.acquire());
            let first = futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut));
            assert!(first.is_none());
            assert_eq!(b.waiting(), 1);
            drop(held); // handed to the waiter
            let permit = futures_lite::future::block_on(fut).unwrap();
            assert_eq!(b.in_flight(), 1);
            drop(permit);
        }
    });
    assert_eq!(n, 0, "a wait that queues, is woken and takes its permit");
    assert_eq!(b.metrics().queued, 3);
}

#[test]
fn a_wait_cancelled_while_queued_allocates_nothing() {
    // futures-lite's `block_on` makes its thread's parker on first use.
    futures_lite::future::block_on(async {});
    let clock = ManualClock::new();
    let b = Bulkhead::new("wait", 1, &clock);
    let held = b.try_acquire().unwrap();
    let n = allocations_in(|| {
        for _ in 0..3 {
            let mut fut = Box::pin(b.acquire_many(1));
            let first = futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut));
            assert!(first.is_none());
            drop(fut);
        }
    });
    // The box is the test's own: one allocation per round, nothing else.
    assert_eq!(n, 3, "a wait cancelled while queued");
    assert_eq!((b.waiting(), b.metrics().cancelled_waits), (0, 3));
    drop(held);
}

#[cfg(feature = "tokio")]
#[test]
fn a_timed_out_wait_allocates_nothing() {
    use watertight::clock::TokioClock;
    use watertight::AcquireError;
    fn count() -> usize {
        ALLOCS.with(Cell::get)
    }
    // On tokio (paused time) the wait's sleep is tokio's timer entry, held in
    // place: a wait that runs out allocates nothing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let b = Bulkhead::new("wait", 1, TokioClock);
    let held = b.try_acquire().unwrap();
    let rounds: Vec<usize> = (0..2)
        .map(|_| {
            rt.block_on(async {
                // tokio makes its deferred-waker list on the first yield.
                tokio::task::yield_now().await;
                let before = count();
                let r = b.acquire_timeout(Duration::from_millis(10)).await;
                assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
                count() - before
            })
        })
        .collect();
    assert_eq!(rounds[1], 0, "a timed-out wait; first round {}", rounds[0]);
    assert_eq!(b.metrics().rejected_timed_out, 2);
    drop(held);
}

// ---------------------------------------------------------------------------
// Rate limiter
// ---------------------------------------------------------------------------

#[test]
fn rate_checks_and_waits_that_need_no_sleep_do_not_allocate() {
    // futures-lite's `block_on` makes its thread's parker on first use.
    futures_lite::future::block_on(async {});
    let clock = ManualClock::new();
    let r = RateLimiter::new("hot", Quota::per_second(10).burst(3), &clock);
    let n = allocations_in(|| {
        r.check().unwrap();
        r.check_n(2).unwrap();
        assert!(r.check().is_err(), "refused");
        assert!(r.check_n(4).is_err(), "above the burst");
    });
    assert_eq!(n, 0, "check, check_n, a refusal, ExceedsBurst");
    clock.advance(Duration::from_millis(300));
    let n = allocations_in(|| {
        // Conforms now: admitted on the first poll, no sleep made.
        let now = futures_lite::future::block_on(r.acquire_timeout(Duration::from_millis(5)));
        assert!(now.is_ok());
        r.check_n(2).unwrap();
        // Its cell conforms after its deadline: refused at once.
        let early = futures_lite::future::block_on(r.acquire_timeout(Duration::from_millis(50)));
        assert!(early.is_err());
        let _ = r.metrics();
    });
    assert_eq!(n, 0, "a wait admitted at once, one refused at once");
    let m = r.metrics();
    assert_eq!((m.admitted, m.refused, m.waited), (4, 2, 0));
}

#[cfg(feature = "tokio")]
#[test]
fn a_rate_wait_that_sleeps_allocates_nothing() {
    use watertight::clock::TokioClock;
    fn count() -> usize {
        ALLOCS.with(Cell::get)
    }
    // On tokio (paused time) the wait's sleep is tokio's timer entry, held in
    // place with the reservation: a wait served at its instant and one
    // cancelled before it allocate nothing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let r = RateLimiter::new("wait", Quota::per_second(10).burst(1), TokioClock);
    let rounds: Vec<(usize, usize)> = (0..2)
        .map(|_| {
            rt.block_on(async {
                // tokio makes its deferred-waker list on the first yield.
                tokio::task::yield_now().await;
                let before = count();
                r.check().unwrap();
                r.acquire_timeout(Duration::from_secs(1)).await.unwrap();
                let served = count() - before;

                let before = count();
                {
                    let mut wait = std::pin::pin!(r.acquire_timeout(Duration::from_secs(1)));
                    assert!(futures_lite::future::poll_once(&mut wait).await.is_none());
                    assert_eq!(r.waiting(), 1);
                } // dropped here, before its instant
                let cancelled = count() - before;
                assert_eq!(r.waiting(), 0);
                // Its cell given back: the next one is taken at the instant
                // the cancelled wait would have been served.
                tokio::time::sleep(Duration::from_millis(100)).await;
                (served, cancelled)
            })
        })
        .collect();
    assert_eq!(
        rounds[1],
        (0, 0),
        "(a wait served, a wait cancelled); first round {:?}",
        rounds[0]
    );
    let m = r.metrics();
    assert_eq!((m.waited, m.cancelled, m.waiting), (2, 2, 0));
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

#[test]
fn a_heap_breaker_allocates_once_when_made_and_never_per_call() {
    use watertight::breaker::HeapBreaker;
    use watertight::policy::HeapPolicy;

    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .window_size(100)
        .minimum_calls(100)
        .open_duration(Duration::from_secs(10))
        .half_open_calls(2)
        .build()
        .unwrap();
    let mut made = None;
    let n = allocations_in(|| made = Some(HeapBreaker::try_new("heap", config, &clock).unwrap()));
    assert_eq!(
        n, 1,
        "the window's slots: one allocation, when the breaker is made"
    );
    let b = made.unwrap();
    futures_lite::future::block_on(async {});

    let n = allocations_in(|| {
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().ignore();
        b.try_acquire().unwrap().record(Outcome::Success);
        drop(b.try_acquire().unwrap());
    });
    assert_eq!(n, 0, "permits and their outcomes");
    // Around the 100-call ring three times, then the healthy-window path.
    let n = allocations_in(|| {
        for _ in 0..400 {
            b.try_acquire().unwrap().success();
        }
    });
    assert_eq!(n, 0, "400 successes around the ring");
    assert_eq!((b.metrics().calls, b.metrics().failed_calls), (100, 0));

    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(b.call(async { Ok::<_, ()>(7) }));
        assert_eq!(r, Ok(7));
        // 50 failures of the last 100 calls trip it (50 %).
        for _ in 0..50 {
            b.try_acquire().unwrap().failure();
        }
        assert!(b.try_acquire().is_err());
    });
    assert_eq!(n, 0, "call(), a trip and a rejection");
    assert_eq!(b.state(), State::Open);

    clock.advance(Duration::from_secs(10));
    let n = allocations_in(|| {
        let first = b.try_acquire().unwrap();
        let second = b.try_acquire().unwrap();
        assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
        first.success();
        second.success();
        b.force_open();
        b.disable();
        b.reset();
        let _ = b.metrics();
    });
    assert_eq!(n, 0, "half-open probes, the close, the operator switches");
    assert_eq!(b.state(), State::Closed);

    // A heap policy: its window is allocated by `new`, its calls allocate nothing.
    let window = BreakerConfig::builder().window_size(1000).build().unwrap();
    let config = PolicyConfig::builder(4).breaker(window).build().unwrap();
    let p = HeapPolicy::new("heap policy", config, &clock).unwrap();
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(p.call(|| async { Ok::<_, ()>(1) }));
        assert_eq!(r, Ok(1));
        let r = futures_lite::future::block_on(p.call(|| async { Err::<(), _>("boom") }));
        assert!(r.is_err());
    });
    assert_eq!(n, 0, "a heap policy's calls");
    assert_eq!(p.breaker().metrics().calls, 2);
}

// ---------------------------------------------------------------------------
// Deadlines and the policy
// ---------------------------------------------------------------------------

/// `max_concurrent` slots, the default slot wait (100 ms) and call timeout
/// (30 s); the breaker trips at 50 % failures of 2 outcomes (window 4).
fn policy_on<C: watertight::clock::Timer + Clone>(
    name: &'static str,
    max_concurrent: usize,
    max_wait: Duration,
    clock: C,
) -> Policy<C, 4> {
    let config = PolicyConfig::builder(max_concurrent)
        .max_wait(max_wait)
        .breaker(small_config(false))
        .build()
        .unwrap();
    Policy::new(name, config, clock).unwrap()
}

#[test]
fn a_timeout_that_completes_does_not_allocate() {
    let clock = ManualClock::new();
    futures_lite::future::block_on(async {});
    let mut got = None;
    let n = allocations_in(|| {
        got = Some(futures_lite::future::block_on(timeout(
            &clock,
            Duration::from_secs(1),
            async { 7 },
        )));
    });
    assert_eq!(n, 0, "timeout() ready at once");
    assert_eq!(got, Some(Ok(7)));

    let at = clock.now() + Duration::from_secs(1);
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(timeout_at(&clock, at, async { 8 }));
        assert_eq!(r, Ok(8));
    });
    assert_eq!(n, 0, "timeout_at() ready at once");

    // Budgets: made, asked, narrowed and run, all in place.
    let n = allocations_in(|| {
        let request = Deadline::after(&clock, Duration::from_millis(1500));
        let child = request.child(Duration::from_secs(5));
        assert_eq!(child.instant(), request.instant(), "capped by its parent");
        assert!(!child.is_expired());
        assert_eq!(child.remaining(), Duration::from_millis(1500));
        let r = futures_lite::future::block_on(child.run(async { 9 }));
        assert_eq!(r, Ok(9));
    });
    assert_eq!(n, 0, "Deadline::after, child, remaining, run");
}

#[test]
fn a_timeout_that_runs_out_allocates_only_its_sleeps_listener() {
    // ManualClock's sleep registers an event-listener node once pending: the
    // documented cost of a wait on it, counted so a change is noticed. The
    // first round also makes the clock's wake list; the second is the
    // steady state.
    let clock = ManualClock::new();
    let mut counts = Vec::new();
    for _ in 0..2 {
        let mut fut = Box::pin(timeout(
            &clock,
            Duration::from_millis(10),
            core::future::pending::<()>(),
        ));
        let pending = allocations_in(|| {
            let first = futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut));
            assert!(first.is_none());
        });
        clock.advance(Duration::from_millis(10));
        let elapsed =
            allocations_in(|| assert_eq!(futures_lite::future::block_on(&mut fut), Err(Elapsed)));
        counts.push((pending, elapsed));
    }
    assert_eq!(
        counts[1],
        (1, 0),
        "one listener for the pending sleep, none to run out"
    );
}

#[test]
fn a_policy_call_with_nothing_failing_does_not_allocate() {
    let clock = ManualClock::new();
    let p = policy_on("calm", 4, Duration::from_millis(100), &clock);
    futures_lite::future::block_on(async {});

    let mut got = None;
    let n = allocations_in(|| {
        got = Some(futures_lite::future::block_on(
            p.call(|| async { Ok::<_, ()>(7) }),
        ));
    });
    assert_eq!(n, 0, "call() with a slot free");
    assert_eq!(got, Some(Ok(7)));

    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(p.call_with(
            || async { Ok::<u16, ()>(404) },
            |r: &Result<u16, ()>| match r {
                Ok(s) if *s < 500 => Outcome::Success,
                _ => Outcome::Failure,
            },
        ));
        assert_eq!(r, Ok(404));
    });
    assert_eq!(n, 0, "call_with()");

    let n = allocations_in(|| {
        let request = Deadline::after(&clock, Duration::from_millis(1500));
        let r =
            futures_lite::future::block_on(p.call_within(&request, || async { Ok::<_, ()>(3) }));
        assert_eq!(r, Ok(3));
    });
    assert_eq!(n, 0, "call_within() a 1.5 s budget");

    // The call's own error is carried, not boxed.
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(p.call(|| async { Err::<(), _>("boom") }));
        assert_eq!(r.unwrap_err().into_inner(), Some("boom"));
    });
    assert_eq!(n, 0, "call() returning Err");

    // Zero slot wait: the try-once path.
    let quick = policy_on("quick", 4, Duration::ZERO, &clock);
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(quick.call(|| async { Ok::<_, ()>(1) }));
        assert_eq!(r, Ok(1));
    });
    assert_eq!(n, 0, "call() with a zero slot wait");

    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (4, 1));
    assert_eq!(p.bulkhead().available(), 4, "every slot given back");
}

#[test]
fn policy_refusals_do_not_allocate() {
    let clock = ManualClock::new();
    futures_lite::future::block_on(async {});

    // Bulkhead full with a zero slot wait: refused at once.
    let full = policy_on("full", 1, Duration::ZERO, &clock);
    let held = full.bulkhead().try_acquire().unwrap();
    let mut kind = None;
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(full.call(|| async { Ok::<_, ()>(()) }));
        kind = Some(*r.unwrap_err().kind());
    });
    assert_eq!(n, 0, "BulkheadFull");
    assert_eq!(kind, Some(ErrorKind::BulkheadFull));
    drop(held);

    // Circuit open: refused, the slot given back.
    let open = policy_on("open", 2, Duration::from_millis(100), &clock);
    trip(open.breaker());
    let mut err = None;
    let n = allocations_in(|| {
        err = Some(futures_lite::future::block_on(
            open.call(|| async { Ok::<_, ()>(()) }),
        ));
    });
    assert_eq!(n, 0, "CircuitOpen");
    let err = err.unwrap().unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(10)));
    assert_eq!(open.bulkhead().available(), 2);

    // A budget already spent: DeadlineExceeded without starting the call.
    let spent = policy_on("spent", 2, Duration::ZERO, &clock);
    let request = Deadline::after(&clock, Duration::from_millis(5));
    clock.advance(Duration::from_millis(5));
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(
            spent.call_within(&request, || async { Ok::<_, ()>(()) }),
        );
        assert_eq!(*r.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    });
    assert_eq!(n, 0, "DeadlineExceeded, budget spent");
}

#[test]
fn a_policy_wait_for_a_slot_allocates_only_its_manual_sleep() {
    // Waiting for a slot allocates nothing: the call future holds its own
    // queue node. On ManualClock the sleep allocates its event-listener node
    // (a test clock; tokio's and embassy's timers do not). The first round
    // also makes ManualClock's wake list; the second is the steady state.
    let clock = ManualClock::new();
    let p = policy_on("busy", 1, Duration::from_millis(100), &clock);
    let mut counts = Vec::new();
    for i in 0..2 {
        let held = p.bulkhead().try_acquire().unwrap();
        let mut call = Box::pin(p.call(|| async { Ok::<_, ()>(i) }));
        let wait = allocations_in(|| {
            let first = futures_lite::future::block_on(futures_lite::future::poll_once(&mut call));
            assert!(first.is_none());
        });
        drop(held);
        let granted =
            allocations_in(|| assert_eq!(futures_lite::future::block_on(&mut call), Ok(i)));
        counts.push((wait, granted));
    }
    assert_eq!(
        counts[1],
        (1, 0),
        "the ManualClock sleep's node only; none once granted"
    );
}

#[cfg(feature = "tokio")]
#[test]
fn a_policy_call_on_tokio_does_not_allocate() {
    use watertight::clock::TokioClock;

    fn count() -> usize {
        ALLOCS.with(Cell::get)
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let p = policy_on("tokio", 4, Duration::from_millis(100), TokioClock);
    let busy = policy_on("tokio-busy", 1, Duration::from_millis(100), TokioClock);
    // Counted inside the runtime, so block_on's own setup is not; two rounds,
    // the first of which also makes what tokio and the wake lists make once.
    let rounds: Vec<_> = (0..2)
        .map(|_| {
            rt.block_on(async {
                // tokio makes its list of deferred wakers on the first
                // `yield_now` of each `block_on`: not ours to count.
                tokio::task::yield_now().await;

                let before = count();
                assert_eq!(p.call(|| async { Ok::<_, ()>(1) }).await, Ok(1));
                let call = count() - before;

                let before = count();
                let request = Deadline::after(TokioClock, Duration::from_millis(1500));
                let r = p.call_within(&request, || async { Ok::<_, ()>(2) }).await;
                assert_eq!(r, Ok(2));
                let within = count() - before;

                // Pending once: tokio's timer entry is registered in place.
                let before = count();
                let r = p
                    .call(|| async {
                        tokio::task::yield_now().await;
                        Ok::<_, ()>(3)
                    })
                    .await;
                assert_eq!(r, Ok(3));
                let pending_once = count() - before;

                let before = count();
                let r = timeout(TokioClock, Duration::from_secs(1), async { 4 }).await;
                assert_eq!(r, Ok(4));
                let completed_timeout = count() - before;

                // A wait for a slot: nothing (its node is in the future, and
                // tokio's timer entry too).
                let held = busy.bulkhead().try_acquire().unwrap();
                let mut waiting = Box::pin(busy.call(|| async { Ok::<_, ()>(5) }));
                let before = count();
                assert!(futures_lite::future::poll_once(&mut waiting)
                    .await
                    .is_none());
                let wait = count() - before;
                drop(held);
                assert_eq!(waiting.await, Ok(5));

                (call, within, pending_once, completed_timeout, wait)
            })
        })
        .collect();
    assert_eq!(
        rounds[1],
        (0, 0, 0, 0, 0),
        "(call, call_within, pending once, timeout, a wait); first round {:?}",
        rounds[0]
    );
}

#[cfg(feature = "tower")]
#[test]
fn a_policy_service_call_does_not_allocate() {
    use tower::{Layer, Service};
    use watertight::tower::PolicyLayer;

    let clock = ManualClock::new();
    let p = Arc::new(policy_on("ledger", 4, Duration::from_millis(100), &clock));
    let mut svc = PolicyLayer::new(p.clone()).layer(tower::service_fn(|n: u32| {
        std::future::ready(Ok::<_, ()>(n + 1))
    }));
    futures_lite::future::block_on(async {});

    let mut got = None;
    let n = allocations_in(|| {
        got = Some(futures_lite::future::block_on(svc.call(1)));
    });
    assert_eq!(n, 0, "a policy service call with a slot free");
    assert_eq!(got, Some(Ok(2)));

    // Refusals allocate nothing either: the breaker's, and the bulkhead's
    // without a wait.
    p.breaker().force_open();
    let n = allocations_in(|| {
        let r = futures_lite::future::block_on(svc.call(1));
        assert!(matches!(r.unwrap_err().kind(), ErrorKind::CircuitOpen(_)));
    });
    assert_eq!(n, 0, "a refused policy service call");
}
