//! The behaviour suite on tokio: current-thread, multi-thread and paused time.
#![cfg(not(loom))]
#![cfg(feature = "tokio")]

#[macro_use]
#[path = "common/suite.rs"]
mod suite;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use suite::{BoxFuture, Runtime};
use watertight::clock::{Clock, TokioClock};
use watertight::{AcquireError, Bulkhead};

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

/// The whole suite again on paused time: timers fire by auto-advance.
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
