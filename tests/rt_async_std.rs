//! The behaviour suite on async-std, with the async-io clock.
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

use suite::{BoxFuture, Runtime};
use watertight::clock::AsyncIoClock;

/// async-std's global executor.
#[derive(Clone, Copy)]
struct AsyncStdRt;

impl Runtime for AsyncStdRt {
    type Clock = AsyncIoClock;

    fn clock(&self) -> AsyncIoClock {
        AsyncIoClock::new()
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        Box::pin(async_std::task::spawn(task))
    }

    fn yield_now(&self) -> impl Future<Output = ()> + Send {
        async_std::task::yield_now()
    }
}

behaviour_suite!(async #[async_std::test] with AsyncStdRt);

/// The soak (`tests/common/soak.rs`) on async-std's global executor.
#[async_std::test]
async fn soak() {
    soak::run(AsyncStdRt, "async-std").await;
}
