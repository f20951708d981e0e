//! The behaviour suite on smol: an executor driven by the test thread alone,
//! and the same executor shared with three more threads.
#![cfg(not(loom))]
#![cfg(feature = "async-io")]

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

use smol::Executor;
use suite::{BoxFuture, Runtime};
use watertight::clock::AsyncIoClock;
use watertight::Bulkhead;

/// A handle to the test's smol executor.
#[derive(Clone)]
struct SmolRt(Arc<Executor<'static>>);

impl Runtime for SmolRt {
    type Clock = AsyncIoClock;

    fn clock(&self) -> AsyncIoClock {
        AsyncIoClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        // A smol task re-raises its panic when awaited.
        Box::pin(self.0.spawn(task))
    }

    fn yield_now(&self) -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }
}

/// Runs `scenario` on an executor that only the test thread drives.
fn on_one_thread<F, Fut>(scenario: F)
where
    F: FnOnce(SmolRt) -> Fut,
    Fut: Future<Output = ()>,
{
    let ex = Arc::new(Executor::new());
    smol::block_on(ex.run(scenario(SmolRt(Arc::clone(&ex)))));
}

/// Runs `scenario` on an executor driven by the test thread and three others.
fn on_four_threads<F, Fut>(scenario: F)
where
    F: FnOnce(SmolRt) -> Fut,
    Fut: Future<Output = ()>,
{
    let ex = Arc::new(Executor::new());
    let (stop, stopped) = smol::channel::unbounded::<()>();
    std::thread::scope(|s| {
        for _ in 0..3 {
            let (ex, stopped) = (&ex, stopped.clone());
            s.spawn(move || smol::block_on(ex.run(stopped.recv())));
        }
        // Closing the channel (also while unwinding) stops the other threads.
        let _stop = stop;
        smol::block_on(ex.run(scenario(SmolRt(Arc::clone(&ex)))));
    });
}

/// The soak (`tests/common/soak.rs`) on the executor shared by four threads.
#[test]
fn soak_four_threads() {
    on_four_threads(|rt| async move {
        soak::run(rt, "smol, four threads").await;
    });
}

mod one_thread {
    behaviour_suite!(run super::on_one_thread);

    #[test]
    fn dropped_task_loses_no_permit() {
        super::on_one_thread(super::dropped_task_loses_no_permit);
    }
}

mod four_threads {
    behaviour_suite!(run super::on_four_threads);

    #[test]
    fn dropped_task_loses_no_permit() {
        super::on_four_threads(super::dropped_task_loses_no_permit);
    }
}

/// Dropping a smol `Task` cancels it: the wait it held is counted as
/// cancelled and the waiter behind it is served.
async fn dropped_task_loses_no_permit(rt: SmolRt) {
    let b = Arc::new(Bulkhead::new("drop-task", 1, AsyncIoClock::new()));
    let held = b.try_acquire().unwrap();

    let b1 = Arc::clone(&b);
    let x =
        rt.0.spawn(async move { b1.acquire_timeout(suite::LONG).await.map(drop) });
    suite::until(&rt, "X is registered", || b.waiting() == 1).await;
    let b2 = Arc::clone(&b);
    let y =
        rt.0.spawn(async move { b2.acquire_timeout(suite::LONG).await.map(drop) });
    suite::until(&rt, "Y is registered", || b.waiting() == 2).await;

    // `cancel` drops the future (on whichever thread runs it) and waits.
    assert_eq!(x.cancel().await, None);
    let m = b.metrics();
    assert_eq!((m.waiting, m.cancelled_waits, m.rejected()), (1, 1, 0));

    drop(held);
    assert_eq!(y.await, Ok(()));
    let m = b.metrics();
    assert_eq!(
        (m.accepted, m.in_flight, m.waiting, m.available),
        (2, 0, 0, 1)
    );
}
