//! The behaviour suite on tokio: current-thread, multi-thread and paused time.
#![cfg(not(loom))]
#![cfg(feature = "tokio")]

#[macro_use]
#[path = "common/suite/mod.rs"]
mod suite;
#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/breaker.rs"]
mod breaker_model;
#[path = "common/soak.rs"]
mod soak;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use suite::{BoxFuture, Runtime};
use watertight::breaker::{State, Transition};
use watertight::clock::{Clock, TokioClock};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CircuitBreaker};

/// tokio's spawner, for whichever runtime the test runs on.
#[derive(Clone, Copy)]
struct TokioRt;

impl Runtime for TokioRt {
    type Clock = TokioClock;

    fn clock(&self) -> TokioClock {
        TokioClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        let handle = tokio::spawn(task);
        Box::pin(async move {
            if let Err(e) = handle.await {
                std::panic::resume_unwind(e.into_panic());
            }
        })
    }

    fn yield_now(&self) -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

/// The soak (`tests/common/soak.rs`) on four worker threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_multi_thread() {
    soak::run(TokioRt, "tokio multi-thread").await;
}

mod current_thread {
    behaviour_suite!(async #[tokio::test] with super::TokioRt);

    #[tokio::test]
    async fn aborted_task_loses_no_permit() {
        super::aborted_task_loses_no_permit().await;
    }
}

mod multi_thread {
    behaviour_suite!(async #[tokio::test(flavor = "multi_thread", worker_threads = 4)] with super::TokioRt);

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn aborted_task_loses_no_permit() {
        super::aborted_task_loses_no_permit().await;
    }
}

/// The whole suite again on paused time: timers fire by auto-advance (the
/// breaker's open waits and slow calls too: `TokioClock` reads the virtual
/// time they advance).
mod paused {
    behaviour_suite!(async #[tokio::test(start_paused = true)] with super::TokioRt);
}

/// `TokioClock` follows tokio's paused clock: a ten-second wait runs out by
/// auto-advance, without ten seconds of real waiting.
#[tokio::test(start_paused = true)]
async fn paused_time_runs_out_a_long_wait() {
    let b = Bulkhead::new("paused", 1, TokioClock::new());
    let held = b.try_acquire().unwrap();
    let start = TokioClock.now();

    let r = b.acquire_timeout(Duration::from_secs(10)).await;

    assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    // Virtual time moved by the whole wait (a reading of the paused clock,
    // not of real time).
    assert!(TokioClock.now() - start >= Duration::from_secs(10));
    let m = b.metrics();
    assert_eq!(
        (m.rejected_timed_out, m.rejected(), m.cancelled_waits),
        (1, 1, 0)
    );
    assert_eq!((m.accepted, m.in_flight, m.waiting), (1, 1, 0));
    drop(held);
    assert_eq!(b.available(), 1);
}

/// Aborting the task that waits (tokio cancels it by dropping its future)
/// counts a cancelled wait, and the waiter behind it is served.
async fn aborted_task_loses_no_permit() {
    let b = Arc::new(Bulkhead::new("abort", 1, TokioClock::new()));
    let held = b.try_acquire().unwrap();

    let b1 = Arc::clone(&b);
    let x = tokio::spawn(async move { b1.acquire_timeout(suite::LONG).await.map(drop) });
    suite::until(&TokioRt, "X is registered", || b.waiting() == 1).await;
    let b2 = Arc::clone(&b);
    let y = tokio::spawn(async move { b2.acquire_timeout(suite::LONG).await.map(drop) });
    suite::until(&TokioRt, "Y is registered", || b.waiting() == 2).await;

    x.abort();
    assert!(x.await.unwrap_err().is_cancelled());
    let m = b.metrics();
    assert_eq!((m.waiting, m.cancelled_waits, m.rejected()), (1, 1, 0));

    drop(held);
    assert_eq!(y.await.unwrap(), Ok(()));
    let m = b.metrics();
    assert_eq!(
        (m.accepted, m.in_flight, m.waiting, m.available),
        (2, 0, 0, 1)
    );
}

/// Moves tokio's paused clock on until `TokioClock` reads 500 ns past a
/// whole microsecond, where the breaker's 1 µs timestamps must round.
async fn to_half_a_microsecond() {
    let r = TokioClock.now().as_nanos() % 1_000;
    tokio::time::advance(Duration::from_nanos((1_500 - r) % 1_000)).await;
    assert_eq!(TokioClock.now().as_nanos() % 1_000, 500);
}

/// A breaker of two outcomes, tripped by two failures at the paused instant
/// `at` (500 ns past a microsecond), with a 30 s open wait; its listener
/// puts `at` in `opened`.
fn tripped_at_half_a_microsecond(
    opened: &'static std::sync::Mutex<Option<watertight::clock::Instant>>,
) -> CircuitBreaker<TokioClock, 2, impl Fn(&Transition)> {
    let config = BreakerConfig::builder()
        .window_size(2)
        .minimum_calls(2)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let b = CircuitBreaker::with_listener("rounding", config, TokioClock, |t: &Transition| {
        *opened.lock().unwrap() = Some(t.at);
    });
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    b
}

/// The hint given at the very instant of a trip that is not on a whole
/// microsecond is at most the open duration: the breaker keeps the
/// transition's time rounded down to the microsecond and tells the listener
/// that same time.
#[tokio::test(start_paused = true)]
async fn open_hint_at_the_trip_is_at_most_the_open_duration() {
    static OPENED: std::sync::Mutex<Option<watertight::clock::Instant>> =
        std::sync::Mutex::new(None);
    to_half_a_microsecond().await;
    let b = tripped_at_half_a_microsecond(&OPENED);
    let now = TokioClock.now();
    let at = OPENED.lock().unwrap().expect("it opened");
    assert_eq!(
        now.as_nanos() - at.as_nanos(),
        500,
        "kept to the microsecond, rounded down"
    );

    let hint = b.try_acquire().unwrap_err().retry_after();
    assert_eq!(
        hint,
        Some(Duration::from_secs(30) - Duration::from_nanos(500))
    );
}

/// The open wait ends exactly at `opened_at + open_duration`, with
/// `opened_at` the instant the listener was told, also when the trip was not
/// on a whole microsecond.
#[tokio::test(start_paused = true)]
async fn open_wait_ends_at_opened_at_plus_open_duration() {
    static OPENED: std::sync::Mutex<Option<watertight::clock::Instant>> =
        std::sync::Mutex::new(None);
    to_half_a_microsecond().await;
    let b = tripped_at_half_a_microsecond(&OPENED);
    let at = OPENED.lock().unwrap().expect("it opened");

    // 1 ns before the end: still open, and the hint says so.
    let end = at + Duration::from_secs(30);
    tokio::time::advance(end.saturating_duration_since(TokioClock.now()) - Duration::from_nanos(1))
        .await;
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(Duration::from_nanos(1))
    );

    tokio::time::advance(Duration::from_nanos(1)).await;
    assert_eq!(TokioClock.now(), end);
    assert_eq!(b.state(), State::HalfOpen);
    assert!(b.try_acquire().unwrap().is_probe());
}
