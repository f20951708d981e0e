#![cfg(not(loom))]
//! Rule-by-rule integration tests of the public `CircuitBreaker` API.
//!
//! One test per rule of the breaker's "Decisions on edge semantics", named
//! after it. Time comes from a `ManualClock` advanced in whole microseconds or
//! milliseconds (the breaker stores its timestamps to the microsecond), so
//! every test gives the same answer on every run; nothing sleeps. Futures are
//! driven with `futures_lite::future::block_on` / `poll_once`.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use futures_lite::future;
use watertight::breaker::{
    BreakerConfigBuilder, BreakerField, BreakerWindow, OnTransition, State, Transition, Tripped,
};
use watertight::clock::{Clock, Instant, ManualClock, StdClock};
use watertight::{
    BreakerConfig, BreakerConfigError, CallError, CircuitBreaker, Outcome, Rejection,
};

mod api;
mod config;
mod generations;
mod open;
mod operator;
mod window;

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

// ---- helpers ---------------------------------------------------------------

fn builder() -> BreakerConfigBuilder {
    BreakerConfig::builder()
}

#[track_caller]
fn cfg(b: BreakerConfigBuilder) -> BreakerConfig {
    b.build().expect("a valid config")
}

/// The instant `d` after the clock's origin.
fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// Records `n` successes, each on a fresh permit.
#[track_caller]
fn succeed<C: Clock, const N: usize, H: OnTransition>(b: &CircuitBreaker<C, N, H>, n: usize) {
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").success();
    }
}

/// Records `n` failures, each on a fresh permit.
#[track_caller]
fn fail<C: Clock, const N: usize, H: OnTransition>(b: &CircuitBreaker<C, N, H>, n: usize) {
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").failure();
    }
}

/// One call that takes `d` on `clock` and then reports `outcome`.
#[track_caller]
fn timed<C: Clock, const N: usize, H: OnTransition>(
    b: &CircuitBreaker<C, N, H>,
    clock: &ManualClock,
    d: Duration,
    outcome: Outcome,
) {
    let permit = b.try_acquire().expect("the breaker admits");
    clock.advance(d);
    permit.record(outcome);
}

/// The `retry_after` of an `Open` rejection; panics on anything else.
#[track_caller]
fn open_hint<C: Clock, const N: usize, H: OnTransition>(b: &CircuitBreaker<C, N, H>) -> Duration {
    match b.try_acquire() {
        Err(Rejection::Open { retry_after }) => retry_after,
        other => panic!("expected Rejection::Open, got {other:?}"),
    }
}

/// `(calls, failed_calls, slow_calls)` of the window.
fn counts<C: Clock, const N: usize, H: OnTransition>(
    b: &CircuitBreaker<C, N, H>,
) -> (usize, usize, usize) {
    let m = b.metrics();
    (m.calls, m.failed_calls, m.slow_calls)
}

/// Window 4, minimum 2, 50 %, open 10 s, 2 probes: trips on two failures.
fn small() -> BreakerConfigBuilder {
    builder()
        .window_size(4)
        .minimum_calls(2)
        .open_duration(10 * SEC)
        .half_open_calls(2)
}
