#![cfg(not(loom))]
//! A `Policy` with a rate limit, on a `ManualClock`, through the public API
//! only: the rate is checked before the bulkhead (a refused cell costs no
//! slot and asks no breaker), once per attempt (each retry takes a cell),
//! never waits, refuses with the limiter's exact `retry_after`, and its
//! refusal ends the retries. Nothing sleeps: the clock is advanced by hand.

use std::cell::Cell;
use std::future::{pending, Future, IntoFuture};
use std::pin::pin;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use watertight::clock::ManualClock;
use watertight::deadline::Deadline;
use watertight::policy::{Error, ErrorKind, Policy, PolicyConfig};
use watertight::rate::Quota;
use watertight::retry::RetryConfig;

const MS: Duration = Duration::from_millis(1);

fn kind<T: std::fmt::Debug>(r: Result<T, Error<&'static str>>) -> ErrorKind<&'static str> {
    *r.unwrap_err().kind()
}

/// A policy of `slots` calls at once (no slot wait) with `quota`.
fn policy(clock: &ManualClock, slots: usize, quota: Quota) -> Policy<&ManualClock> {
    let config = PolicyConfig::builder(slots)
        .max_wait(Duration::ZERO)
        .rate(quota)
        .build()
        .unwrap();
    Policy::new("provider", config, clock).unwrap()
}

/// A call that counts how often it was made.
fn counted(made: &Cell<u32>) -> impl Future<Output = Result<u32, &'static str>> + use<> {
    made.set(made.get() + 1);
    async { Ok(7) }
}

#[test]
fn a_refused_cell_costs_no_slot_and_asks_no_breaker() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4, Quota::per_second(10).burst(2));
    let made = Cell::new(0);
    for _ in 0..2 {
        assert_eq!(block_on(p.call(|| counted(&made))), Ok(7));
    }
    let before = (p.bulkhead().metrics(), p.breaker().metrics());

    let err = block_on(p.call(|| counted(&made))).unwrap_err();
    assert_eq!(
        *err.kind(),
        ErrorKind::RateLimited {
            retry_after: 100 * MS
        }
    );
    assert!(err.is_unavailable());
    assert_eq!(err.retry_after(), Some(100 * MS));
    assert_eq!(err.system(), "provider");
    assert_eq!(made.get(), 2, "a refused call is never made");
    // The bulkhead granted nothing more, and the breaker saw nothing.
    assert_eq!(p.bulkhead().metrics(), before.0);
    assert_eq!(p.breaker().metrics(), before.1);
    assert_eq!(p.bulkhead().in_flight(), 0);

    let m = p.rate_limiter().unwrap().metrics();
    assert_eq!((m.admitted, m.refused), (2, 1));
}

#[test]
fn the_rate_is_checked_before_an_open_breaker_and_a_full_bulkhead() {
    let clock = ManualClock::new();
    let p = policy(&clock, 1, Quota::per_second(10).burst(3));
    let made = Cell::new(0);

    // A full bulkhead refuses after the cell was taken: the cell is spent.
    let held = p.bulkhead().try_acquire().unwrap();
    assert_eq!(
        kind(block_on(p.call(|| counted(&made)))),
        ErrorKind::BulkheadFull
    );
    drop(held);
    // So does an open breaker.
    p.breaker().force_open();
    assert!(matches!(
        kind(block_on(p.call(|| counted(&made)))),
        ErrorKind::CircuitOpen(_)
    ));
    assert_eq!(p.rate_limiter().unwrap().metrics().admitted, 2);
    // One cell left, then the rate refuses before the breaker is asked.
    let _ = block_on(p.call(|| counted(&made)));
    let rejected = p.breaker().metrics().rejected;
    assert_eq!(
        kind(block_on(p.call(|| counted(&made)))),
        ErrorKind::RateLimited {
            retry_after: 100 * MS
        }
    );
    assert_eq!(p.breaker().metrics().rejected, rejected);
    assert_eq!(made.get(), 0);
}

#[test]
fn retry_after_is_exact_and_a_cell_conforms_then() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4, Quota::per_second(4).burst(1));
    let made = Cell::new(0);
    assert!(block_on(p.call(|| counted(&made))).is_ok());
    clock.advance(100 * MS);
    assert_eq!(
        kind(block_on(p.call(|| counted(&made)))),
        ErrorKind::RateLimited {
            retry_after: 150 * MS
        }
    );
    clock.advance(149 * MS);
    assert_eq!(
        kind(block_on(p.call(|| counted(&made)))),
        ErrorKind::RateLimited { retry_after: MS }
    );
    clock.advance(MS);
    assert!(block_on(p.call(|| counted(&made))).is_ok());
    assert_eq!(made.get(), 2);
}

#[test]
fn the_rate_never_waits_whatever_max_wait_and_the_budget_allow() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4)
        .max_wait(Duration::from_secs(1))
        .rate(Quota::per_second(10).burst(1))
        .build()
        .unwrap();
    let p: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    let request = Deadline::after(&clock, Duration::from_secs(10));
    assert!(block_on(p.call_within(&request, || async { Ok::<_, &str>(1) })).is_ok());
    // Refused on its first poll, with 10 s of budget and 1 s of slot wait.
    let mut call = pin!(p.call_within(&request, || async { Ok::<_, &str>(1) }));
    let first = block_on(poll_once(call.as_mut()));
    assert_eq!(
        kind(first.expect("refused at once, not pending")),
        ErrorKind::RateLimited {
            retry_after: 100 * MS
        }
    );
    assert_eq!(p.rate_limiter().unwrap().waiting(), 0);
}

/// Polls `fut` to its end, advancing the clock 10 ms whenever it waits.
fn drive<F: Future>(clock: &ManualClock, fut: F) -> F::Output {
    let mut fut = pin!(fut);
    for _ in 0..10_000 {
        if let Some(out) = block_on(poll_once(fut.as_mut())) {
            return out;
        }
        clock.advance(10 * MS);
    }
    panic!("the call never finished");
}

fn retrying(clock: &ManualClock, quota: Quota, attempts: u32) -> Policy<&ManualClock> {
    let config = PolicyConfig::builder(4)
        .rate(quota)
        .retry(RetryConfig::builder().max_attempts(attempts).seed(3))
        .build()
        .unwrap();
    Policy::new("search", config, clock).unwrap()
}

#[test]
fn each_attempt_takes_a_cell() {
    let clock = ManualClock::new();
    // Cells come back once an hour: the backoffs do not refill any.
    let p = retrying(&clock, Quota::per_hour(3), 3);
    let made = Cell::new(0);
    let call = p.call_idempotent(|| {
        made.set(made.get() + 1);
        async { Err::<(), _>("reset") }
    });
    let out = drive(&clock, call.into_future());
    assert_eq!(out.unwrap_err().into_inner(), Some("reset"));
    assert_eq!(made.get(), 3);
    let m = p.rate_limiter().unwrap().metrics();
    assert_eq!((m.admitted, m.refused), (3, 0));
    assert_eq!(p.retry_metrics().after_failure, 2);
}

#[test]
fn a_rate_limited_attempt_ends_the_retries_with_the_hint() {
    let clock = ManualClock::new();
    let p = retrying(&clock, Quota::per_hour(2), 5);
    let made = Cell::new(0);
    let call = p.call_idempotent(|| {
        made.set(made.get() + 1);
        async { Err::<(), _>("reset") }
    });
    let err = drive(&clock, call.into_future()).unwrap_err();
    // Two attempts took the two cells; the third was refused, and the
    // retries ended there, with the limiter's hint.
    assert_eq!(made.get(), 2);
    let ErrorKind::RateLimited { retry_after } = *err.kind() else {
        panic!("expected RateLimited, got {err:?}");
    };
    assert!(err.is_unavailable());
    assert_eq!(err.retry_after(), Some(retry_after));
    let m = p.rate_limiter().unwrap().metrics();
    assert_eq!((m.admitted, m.refused), (2, 1));
    assert_eq!(p.retry_metrics().after_failure, 2);
    // The hint is exact: the emission interval of 30 min from the first
    // cell's time 0, minus the time the backoffs took.
    let elapsed = watertight::clock::Clock::now(&clock).as_nanos();
    assert_eq!(
        retry_after,
        Duration::from_secs(1800) - Duration::from_nanos(elapsed)
    );
}

#[test]
fn a_cancelled_call_keeps_its_cell_spent() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4, Quota::per_second(1).burst(1));
    {
        let mut call = pin!(p.call(pending::<Result<(), &str>>));
        assert!(block_on(poll_once(call.as_mut())).is_none());
        assert_eq!(p.bulkhead().in_flight(), 1);
    } // dropped mid-call: the slot goes back, the cell stays spent
    assert_eq!(p.bulkhead().in_flight(), 0);
    assert_eq!(
        kind(block_on(p.call(|| async { Ok::<_, &str>(()) }))),
        ErrorKind::RateLimited {
            retry_after: Duration::from_secs(1)
        }
    );
}

#[test]
fn a_policy_without_a_rate_has_no_limiter() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(1).build().unwrap();
    assert_eq!(config.rate(), None);
    let p: Policy<_> = Policy::new("plain", config, &clock).unwrap();
    assert!(p.rate_limiter().is_none());
    for _ in 0..1000 {
        assert!(block_on(p.call(|| async { Ok::<_, &str>(()) })).is_ok());
    }
}
