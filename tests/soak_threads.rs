//! The soak (`tests/common/soak.rs`) on plain threads: every task a thread
//! of its own, driven by `futures_lite::future::block_on`, with async-io's
//! timer. No executor between the tasks and the primitives: only the OS
//! scheduler, so this is the part ThreadSanitizer runs over.
#![cfg(not(loom))]
#![cfg(feature = "async-io")]

#[macro_use]
#[path = "model/check.rs"]
mod check;
#[path = "model/breaker.rs"]
mod breaker_model;
#[path = "common/soak.rs"]
mod soak;

use std::panic::AssertUnwindSafe;

use soak::BoxFuture;
use watertight::clock::AsyncIoClock;

/// A thread per task.
#[derive(Clone, Copy)]
struct Threads;

impl soak::Rt for Threads {
    type Clock = AsyncIoClock;

    fn clock(&self) -> AsyncIoClock {
        AsyncIoClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        let (tx, rx) = smol::channel::bounded(1);
        std::thread::spawn(move || {
            let r =
                std::panic::catch_unwind(AssertUnwindSafe(|| futures_lite::future::block_on(task)));
            // The receiver waits for this; it is gone only if the soak is.
            let _ = tx.send_blocking(r);
        });
        Box::pin(async move {
            match rx.recv().await {
                Ok(Ok(())) => {}
                Ok(Err(payload)) => std::panic::resume_unwind(payload),
                Err(_) => panic!("a soak thread ended without its result"),
            }
        })
    }
}

#[test]
fn soak_on_plain_threads() {
    futures_lite::future::block_on(soak::run(Threads, "plain threads"));
}
