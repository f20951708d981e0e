//! The behaviour suite on embassy's executor, on the host with embassy-time's
//! std driver and `EmbassyClock`.
//!
//! Task functions cannot be generic, so one task type runs any boxed future;
//! each test leaks an executor of its own and stops it with `run_until`.
//! The tests take turns: the task pool and embassy-time's timer queue
//! (`generic-queue-8`: eight timers) are global to the process.
#![cfg(not(loom))]
#![cfg(feature = "embassy")]

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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use embassy_executor::{Executor, SendSpawner};
use suite::{BoxFuture, Flag, Runtime};
use watertight::clock::EmbassyClock;

/// Runs one boxed future; shared by every test.
#[embassy_executor::task(pool_size = 64)]
async fn run_boxed(task: BoxFuture) {
    task.await;
}

/// Raises a [`Flag`] when dropped: when the task completes or unwinds.
struct SetOnDrop(Flag);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A spawner for the test's executor.
#[derive(Clone, Copy)]
struct EmbassyRt(SendSpawner);

impl Runtime for EmbassyRt {
    type Clock = EmbassyClock;

    fn clock(&self) -> EmbassyClock {
        EmbassyClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        // embassy has no join handles: the task raises a flag when it ends.
        let done = Flag::new();
        let guard = SetOnDrop(done.clone());
        let token = run_boxed(Box::pin(async move {
            let _guard = guard;
            task.await;
        }));
        self.0.spawn(token.expect("embassy task pool exhausted"));
        Box::pin(done.wait())
    }

    fn yield_now(&self) -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }
}

/// One test at a time (see the module docs).
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `scenario` as the root task of a fresh executor on this thread,
/// until it completes.
fn run<F, Fut>(scenario: F)
where
    F: FnOnce(EmbassyRt) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let finished = Arc::new(AtomicBool::new(false));
    let set_finished = Arc::clone(&finished);
    let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
    executor.run_until(
        move |spawner| {
            let root = scenario(EmbassyRt(spawner.make_send()));
            let token = run_boxed(Box::pin(async move {
                root.await;
                set_finished.store(true, Ordering::SeqCst);
            }));
            spawner.spawn(token.expect("embassy task pool exhausted"));
        },
        || finished.load(Ordering::SeqCst),
    );
}

// Without the scenario whose spawned call panics: embassy's executor does not
// catch a task's panic, which would unwind through `run_until` and fail the
// test whatever the breaker recorded.
behaviour_suite!(no_task_panics: run run);

/// The soak (`tests/common/soak.rs`) on embassy's executor: its planted
/// panics are caught inside the tasks, so none reaches the executor.
#[test]
fn soak() {
    run(|rt| async move {
        soak::run(rt, "embassy (host executor)").await;
    });
}
