#![cfg(not(loom))]
//! A call that panics is a failure for the breaker, however the panic is
//! caught: a tokio task, a smol task, futures-lite's `catch_unwind` on the
//! future, a plain thread that dies of it, or `std::panic::catch_unwind`
//! around the executor. Each of the breaker's call
//! futures is tried each way: `CircuitBreaker::call`/`call_with`,
//! `Policy::call`/`call_with`, and (with `tower`) the breaker and policy
//! services' futures.
//!
//! Each call future is handed to the executor or `catch_unwind` as it is,
//! not inside an `async` block (an `async` block drops its live futures as a
//! panic unwinds through it, which hides the difference). Under tokio and on
//! a plain thread the future is then dropped while the thread unwinds; under
//! smol and `catch_unwind` it is dropped after the panic was caught, when a
//! drop looks like a cancellation, so only detecting the unwind in `poll`
//! itself records the failure there.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::FutureExt;
use watertight::breaker::State;
use watertight::clock::ManualClock;
use watertight::policy::{Policy, PolicyConfig};
use watertight::{BreakerConfig, CircuitBreaker, Outcome};

type Clock = Arc<ManualClock>;
type Breaker = CircuitBreaker<Clock, 4>;

const OPEN: Duration = Duration::from_secs(1);

/// The ways a panic in a future is caught.
#[derive(Debug, Clone, Copy)]
enum Catch {
    /// `tokio::spawn`: the task's `JoinError` carries the panic.
    Tokio,
    /// A smol task: awaiting it re-raises the panic.
    Smol,
    /// futures-lite's `FutureExt::catch_unwind` around the future.
    FutureCatchUnwind,
    /// A plain thread that dies of the panic (`join()` is an `Err`).
    Thread,
    /// `std::panic::catch_unwind` around `block_on` on this thread.
    StdCatchUnwind,
}

/// Runs `job` (which panics) and checks that the panic was caught as `how`
/// says.
fn run<F>(how: Catch, job: F)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match how {
        Catch::Tokio => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let joined = rt.block_on(async { tokio::spawn(job).await });
            assert!(joined.is_err_and(|e| e.is_panic()));
        }
        Catch::Smol => {
            let ex = smol::Executor::new();
            let task = ex.spawn(job);
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                drop(smol::block_on(ex.run(task)));
            }));
            assert!(r.is_err());
        }
        Catch::FutureCatchUnwind => {
            let r = futures_lite::future::block_on(AssertUnwindSafe(job).catch_unwind());
            assert!(r.is_err());
        }
        Catch::StdCatchUnwind => {
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                drop(futures_lite::future::block_on(job));
            }));
            assert!(r.is_err());
        }
        Catch::Thread => {
            let r = std::thread::spawn(move || drop(futures_lite::future::block_on(job))).join();
            assert!(r.is_err());
        }
    }
}

fn breaker_config() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .half_open_calls(1)
        .open_duration(OPEN)
        .build()
        .unwrap()
}

fn policy_config() -> PolicyConfig {
    PolicyConfig::builder(2)
        .breaker(breaker_config())
        .build()
        .unwrap()
}

/// A breaker for `'static` futures (leaked: a test's worth of memory).
fn breaker(clock: &Clock) -> &'static Breaker {
    let b = CircuitBreaker::new("ledger", breaker_config(), clock.clone());
    Box::leak(Box::new(b))
}

/// A policy for `'static` futures (leaked, as `breaker`).
fn policy(clock: &Clock) -> &'static Policy<Clock, 4> {
    let p = Policy::new("ledger", policy_config(), clock.clone()).unwrap();
    Box::leak(Box::new(p))
}

/// Opens `b` with four failures and waits out the open duration, so that
/// the next call is its one half-open probe.
fn to_half_open(b: &Breaker, clock: &ManualClock) {
    for _ in 0..4 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(OPEN);
    assert_eq!(b.state(), State::HalfOpen);
}

async fn explode() -> Result<u8, ()> {
    panic!("the call panicked")
}

/// A call that is pending once (so a drop-based check would see a started,
/// pending call) and then panics.
async fn explode_later() -> Result<u8, ()> {
    futures_lite::future::yield_now().await;
    panic!("the call panicked on its second poll")
}

/// Failures in the window of `b`.
fn failures(b: &Breaker) -> usize {
    b.metrics().failed_calls
}

fn breaker_call_panic_is_a_failure(how: Catch) {
    let clock = Clock::default();
    let b = breaker(&clock);
    run(how, b.call(explode()));
    assert_eq!((b.metrics().calls, failures(b)), (1, 1), "{how:?}");

    run(how, b.call(explode_later()));
    assert_eq!((b.metrics().calls, failures(b)), (2, 2), "{how:?}");
}

fn breaker_probe_panic_reopens(how: Catch) {
    let clock = Clock::default();
    let b = breaker(&clock);
    to_half_open(b, &clock);
    run(how, b.call(explode()));
    assert_eq!(b.state(), State::Open, "{how:?}");
}

fn breaker_classifier_panic_is_a_failure(how: Catch) {
    let clock = Clock::default();
    let b = breaker(&clock);
    let job = b.call_with(async { Ok::<u8, ()>(1) }, |_| -> Outcome {
        panic!("the classifier panicked")
    });
    run(how, job);
    assert_eq!((b.metrics().calls, failures(b)), (1, 1), "{how:?}");
}

fn policy_call_panic_is_a_failure(how: Catch) {
    let clock = Clock::default();
    let p = policy(&clock);
    run(how, p.call(explode));
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1), "{how:?}");
    assert_eq!(p.bulkhead().in_flight(), 0, "{how:?}: the slot is back");

    run(how, p.call(explode_later));
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (2, 2), "{how:?}");
    assert_eq!(p.bulkhead().in_flight(), 0, "{how:?}: the slot is back");
}

fn policy_probe_panic_reopens(how: Catch) {
    let clock = Clock::default();
    let p = policy(&clock);
    to_half_open(p.breaker(), &clock);
    run(how, p.call(explode));
    assert_eq!(p.breaker().state(), State::Open, "{how:?}");
    assert_eq!(p.bulkhead().in_flight(), 0, "{how:?}: the slot is back");
}

fn policy_classifier_panic_is_a_failure(how: Catch) {
    let clock = Clock::default();
    let p = policy(&clock);
    let job = p.call_with(
        || async { Ok::<u8, ()>(1) },
        |_| -> Outcome { panic!("the classifier panicked") },
    );
    run(how, job);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1), "{how:?}");
}

#[cfg(feature = "tower")]
fn tower_breaker_panic_is_a_failure(how: Catch) {
    use tower::{Layer, ServiceExt};
    use watertight::tower::BreakerLayer;

    let clock = Clock::default();
    let b = Arc::new(CircuitBreaker::new(
        "ledger",
        breaker_config(),
        clock.clone(),
    ));
    let svc = BreakerLayer::new(b.clone()).layer(tower::service_fn(|_: ()| explode_later()));
    run(how, svc.oneshot(()));
    assert_eq!((b.metrics().calls, failures(&b)), (1, 1), "{how:?}");
}

#[cfg(feature = "tower")]
fn tower_policy_panic_is_a_failure(how: Catch) {
    use tower::{Layer, ServiceExt};
    use watertight::tower::PolicyLayer;

    let clock = Clock::default();
    let p: Arc<Policy<Clock, 4>> =
        Arc::new(Policy::new("ledger", policy_config(), clock.clone()).unwrap());
    let svc = PolicyLayer::new(p.clone()).layer(tower::service_fn(|_: ()| explode_later()));
    run(how, svc.oneshot(()));
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1), "{how:?}");
    assert_eq!(p.bulkhead().in_flight(), 0, "{how:?}: the slot is back");
}

/// One `#[test]` per way of catching, for each scenario.
macro_rules! each_catch {
    ($($(#[$attr:meta])* $scenario:ident),* $(,)?) => {
        mod tokio_task { $($(#[$attr])* #[test] fn $scenario() { super::$scenario(super::Catch::Tokio) })* }
        mod smol_task { $($(#[$attr])* #[test] fn $scenario() { super::$scenario(super::Catch::Smol) })* }
        mod catch_unwind { $($(#[$attr])* #[test] fn $scenario() { super::$scenario(super::Catch::FutureCatchUnwind) })* }
        mod plain_thread { $($(#[$attr])* #[test] fn $scenario() { super::$scenario(super::Catch::Thread) })* }
        mod std_catch_unwind { $($(#[$attr])* #[test] fn $scenario() { super::$scenario(super::Catch::StdCatchUnwind) })* }
    };
}

each_catch!(
    breaker_call_panic_is_a_failure,
    breaker_probe_panic_reopens,
    breaker_classifier_panic_is_a_failure,
    policy_call_panic_is_a_failure,
    policy_probe_panic_reopens,
    policy_classifier_panic_is_a_failure,
    #[cfg(feature = "tower")]
    tower_breaker_panic_is_a_failure,
    #[cfg(feature = "tower")]
    tower_policy_panic_is_a_failure,
);

/// A call that is dropped pending, with no panic anywhere, is still a
/// cancellation: the guard in `poll` fires only on an unwind.
#[test]
fn a_dropped_pending_call_is_no_failure() {
    let clock = Clock::default();
    let b = breaker(&clock);
    let mut call = Box::pin(b.call(std::future::pending::<Result<u8, ()>>()));
    assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut call)).is_none());
    drop(call);
    assert_eq!(b.metrics().calls, 0);

    let p = policy(&clock);
    let mut call = Box::pin(p.call(std::future::pending::<Result<u8, ()>>));
    assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut call)).is_none());
    drop(call);
    assert_eq!(p.breaker().metrics().calls, 0);
    assert_eq!(p.bulkhead().in_flight(), 0);
}
