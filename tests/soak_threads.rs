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
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use soak::BoxFuture;
use watertight::clock::AsyncIoClock;

/// A thread per task.
#[derive(Clone, Copy)]
struct Threads;

/// How a task's thread ended, and who waits for it.
type Ending = Mutex<(Option<std::thread::Result<()>>, Option<Waker>)>;

impl soak::Rt for Threads {
    type Clock = AsyncIoClock;

    fn clock(&self) -> AsyncIoClock {
        AsyncIoClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        let ending = Arc::new(Ending::default());
        let end = Arc::clone(&ending);
        std::thread::spawn(move || {
            let r =
                std::panic::catch_unwind(AssertUnwindSafe(|| futures_lite::future::block_on(task)));
            let waiter = {
                let mut e = end.lock().unwrap_or_else(|e| e.into_inner());
                e.0 = Some(r);
                e.1.take()
            };
            if let Some(w) = waiter {
                w.wake();
            }
        });
        Box::pin(futures_lite::future::poll_fn(move |cx| {
            let outcome = {
                let mut e = ending.lock().unwrap_or_else(|e| e.into_inner());
                let outcome = e.0.take();
                if outcome.is_none() {
                    e.1 = Some(cx.waker().clone());
                }
                outcome
            };
            match outcome {
                Some(Ok(())) => Poll::Ready(()),
                Some(Err(payload)) => std::panic::resume_unwind(payload),
                None => Poll::Pending,
            }
        }))
    }
}

#[test]
fn soak_on_plain_threads() {
    futures_lite::future::block_on(soak::run(Threads, "plain threads"));
}
