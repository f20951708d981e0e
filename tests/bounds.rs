#![cfg(not(loom))]
//! Compile-time checks of the auto traits the public types promise.
//!
//! Nothing here runs: if a type loses `Send`, `Sync` or `Unpin` (say, a
//! raw pointer or a `!Sync` cell slips into a future), this file stops
//! compiling. Bulkheads live in `static`s and are shared between threads;
//! permits and acquire futures move into spawned tasks (tokio, smol and
//! async-std require `Send + 'static` futures).

use std::sync::Arc;

use watertight::clock::{ManualClock, StdClock};
use watertight::futures::{
    Acquire, AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil, AcquireTimeout, AcquireUntil,
};
use watertight::{AcquireError, Bulkhead, BulkheadMetrics, ConfigError, OwnedPermit, Permit};

const fn send_sync<T: ?Sized + Send + Sync>() {}
const fn unpin<T: ?Sized + Unpin>() {}
const fn static_<T: ?Sized + 'static>() {}
const fn error<T: std::error::Error + Send + Sync + 'static>() {}

// The bulkhead itself: shared by reference across threads, or kept in a static.
const _: () = send_sync::<Bulkhead<StdClock>>();
const _: () = send_sync::<Bulkhead<ManualClock>>();
const _: () = send_sync::<Bulkhead<&'static ManualClock>>();
const _: () = send_sync::<Bulkhead<Arc<ManualClock>>>();
const _: () = unpin::<Bulkhead<StdClock>>();
static IN_A_STATIC: Bulkhead<StdClock> = Bulkhead::new("static", 1, StdClock);
static CLOCK: ManualClock = ManualClock::new();
static ON_A_MANUAL_CLOCK: Bulkhead<&ManualClock> = Bulkhead::new("manual", 1, &CLOCK);

// Permits move into tasks and threads; owned ones need no borrow.
const _: () = send_sync::<Permit<'static, StdClock>>();
const _: () = send_sync::<Permit<'static, &'static ManualClock>>();
const _: () = send_sync::<OwnedPermit<StdClock>>();
const _: () = send_sync::<OwnedPermit<Arc<ManualClock>>>();
const _: () = static_::<OwnedPermit<StdClock>>();
const _: () = unpin::<Permit<'static, StdClock>>();
const _: () = unpin::<OwnedPermit<StdClock>>();

// The acquire futures are Send + Sync, so a task holding one across an
// `.await` can be spawned on a multi-threaded runtime.
const _: () = send_sync::<Acquire<'static, StdClock>>();
const _: () = send_sync::<Acquire<'static, &'static ManualClock>>();
const _: () = send_sync::<AcquireUntil<'static, &'static ManualClock>>();
const _: () = send_sync::<AcquireTimeout<'static, &'static ManualClock>>();
const _: () = send_sync::<AcquireUntil<'static, Arc<ManualClock>>>();
const _: () = send_sync::<AcquireOwned<StdClock>>();
const _: () = send_sync::<AcquireOwnedUntil<Arc<ManualClock>>>();
const _: () = send_sync::<AcquireOwnedTimeout<Arc<ManualClock>>>();
const _: () = static_::<AcquireOwned<StdClock>>();
const _: () = static_::<AcquireOwnedUntil<Arc<ManualClock>>>();

// The waiting futures hold their own wait-queue node, linked by address, so
// they are `!Unpin` (pin them with `pin!` or `Box::pin`, as tokio's). The
// check: `not_unpin` is ambiguous, so does not compile, for an `Unpin` type.
trait NotUnpin<A> {
    fn check() {}
}
impl<T: ?Sized> NotUnpin<()> for T {}
impl<T: ?Sized + Unpin> NotUnpin<u8> for T {}
#[allow(dead_code)]
fn waiting_futures_are_not_unpin() {
    <Acquire<'static, StdClock> as NotUnpin<_>>::check();
    <AcquireOwned<StdClock> as NotUnpin<_>>::check();
    <AcquireUntil<'static, &'static ManualClock> as NotUnpin<_>>::check();
    <AcquireOwnedUntil<Arc<ManualClock>> as NotUnpin<_>>::check();
}

// Errors and metrics cross threads and box into `dyn Error + Send + Sync`.
const _: () = error::<AcquireError>();
const _: () = error::<ConfigError>();
const _: () = send_sync::<BulkheadMetrics>();
const _: () = unpin::<BulkheadMetrics>();

// The statics above must be usable, not merely declared.
const _: fn() = || {
    let _ = IN_A_STATIC.try_acquire();
    drop(ON_A_MANUAL_CLOCK.acquire_until(watertight::clock::Instant::ZERO));
};

// The breaker: in a static, shared across threads; its permit and call
// future move into tasks.
mod breaker {
    use super::*;
    use watertight::breaker::{BreakerConfigBuilder, State, Transition};
    use watertight::futures::Call;
    use watertight::{
        BreakerConfig, BreakerConfigError, BreakerMetrics, CallError, CallPermit, CircuitBreaker,
        Outcome, Rejection,
    };

    const _: () = send_sync::<CircuitBreaker<StdClock, 64>>();
    const _: () = send_sync::<CircuitBreaker<&'static ManualClock, 8>>();
    const _: () = send_sync::<CircuitBreaker<StdClock, 64, fn(&Transition)>>();
    const _: () = unpin::<CircuitBreaker<StdClock, 64>>();
    const _: () = send_sync::<CallPermit<'static, StdClock, 64>>();
    const _: () = unpin::<CallPermit<'static, StdClock, 64>>();
    type Fut = std::future::Ready<Result<(), ()>>;
    type Classify = fn(&Result<(), ()>) -> Outcome;
    const _: () = send_sync::<Call<'static, CircuitBreaker<StdClock, 64>, Fut, Classify>>();
    const _: () = unpin::<Call<'static, CircuitBreaker<StdClock, 64>, Fut, Classify>>();
    const _: () = send_sync::<BreakerConfig>();
    const _: () = send_sync::<BreakerConfigBuilder>();
    const _: () = send_sync::<BreakerMetrics>();
    const _: () = send_sync::<State>();
    const _: () = error::<BreakerConfigError>();
    const _: () = error::<Rejection>();
    const _: () = error::<CallError<std::io::Error>>();

    static BREAKER: CircuitBreaker<StdClock, 64> =
        CircuitBreaker::new("static", BreakerConfig::DEFAULT, StdClock);
    static ON_A_MANUAL_CLOCK: CircuitBreaker<&ManualClock, 8> = CircuitBreaker::new(
        "manual",
        match BreakerConfig::builder()
            .window_size(8)
            .minimum_calls(4)
            .build()
        {
            Ok(c) => c,
            Err(e) => e.panic(),
        },
        &CLOCK,
    );

    #[test]
    fn statics_are_usable_and_sizes_are_within_target() {
        BREAKER.try_acquire().unwrap().success();
        ON_A_MANUAL_CLOCK.try_acquire().unwrap().failure();
        assert_eq!(ON_A_MANUAL_CLOCK.metrics().failed_calls, 1);
        let size = std::mem::size_of::<CircuitBreaker<StdClock, 64>>();
        println!("size_of::<CircuitBreaker<StdClock, 64>>() = {size}");
        if cfg!(target_arch = "x86_64") {
            assert!(size <= 160, "{size} bytes");
        }
    }
}

// The tower response futures move into spawned tasks (axum, hyper): `Send`
// and `'static` when the inner service's future is, with no box.
#[cfg(all(feature = "tower", feature = "tokio"))]
mod tower_futures {
    use super::*;
    use std::future::Ready;
    use watertight::clock::TokioClock;
    use watertight::tower::{BreakerFuture, ErrIsFailure, IdempotentPolicyFuture, PolicyFuture};
    use watertight::CircuitBreaker;

    const fn send_static<T: Send + 'static>() {}

    #[derive(Clone)]
    struct Echo;
    impl tower::Service<u32> for Echo {
        type Response = u32;
        type Error = std::io::Error;
        type Future = Ready<Result<u32, std::io::Error>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, n: u32) -> Self::Future {
            std::future::ready(Ok(n))
        }
    }

    const _: () = send_static::<PolicyFuture<TokioClock, 64, Echo, u32, ErrIsFailure>>();
    const _: () = send_static::<PolicyFuture<Arc<ManualClock>, 8, Echo, u32>>();
    const _: () = send_static::<IdempotentPolicyFuture<TokioClock, 64, Echo, u32>>();
    const _: () = send_static::<IdempotentPolicyFuture<Arc<ManualClock>, 8, Echo, u32>>();
    const _: () = send_static::<
        BreakerFuture<
            CircuitBreaker<TokioClock, 64>,
            Ready<Result<u32, std::io::Error>>,
            ErrIsFailure,
        >,
    >();
}

/// The adaptive bulkhead: shared by reference or `Arc` across threads, its
/// permits moved into tasks, its algorithms and errors plain data.
mod adaptive {
    use super::*;
    use watertight::limit::{
        AdaptiveBulkhead, AdaptivePermit, Aimd, Gradient2, LimitConfigError, OwnedAdaptivePermit,
    };

    const _: () = send_sync::<AdaptiveBulkhead<StdClock, Aimd>>();
    const _: () = send_sync::<AdaptiveBulkhead<Arc<ManualClock>, Gradient2>>();
    const _: () = send_sync::<AdaptivePermit<'static, StdClock, Gradient2>>();
    const _: () = send_sync::<OwnedAdaptivePermit<StdClock, Aimd>>();
    const _: () = static_::<OwnedAdaptivePermit<StdClock, Aimd>>();
    const _: () = unpin::<OwnedAdaptivePermit<StdClock, Aimd>>();
    const _: () = error::<LimitConfigError>();
}
