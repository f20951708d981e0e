#![cfg(not(loom))]
//! A `Policy` with a client-side adaptive throttle, on a `ManualClock`,
//! through the public API only: the throttle is asked first (a local
//! refusal takes no cell, no slot, asks no breaker and makes no call),
//! once per attempt, at admission; a success is an accept, a failure and
//! the call timeout are not, and an attempt refused by another layer, cut
//! by the caller's budget or cancelled takes its request back; the window
//! must cover the call timeout.
use std::cell::Cell;
use std::future::{pending, Future, IntoFuture};
use std::pin::pin;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use watertight::clock::ManualClock;
use watertight::deadline::Deadline;
use watertight::policy::{ErrorKind, Policy, PolicyConfig, PolicyConfigError, PolicyField};
use watertight::rate::Quota;
use watertight::retry::RetryConfig;
use watertight::throttle::{ThrottleConfig, ThrottleConfigError, ThrottleMetrics};

const MS: Duration = Duration::from_millis(1);

fn builder(slots: usize) -> watertight::policy::PolicyConfigBuilder {
    PolicyConfig::builder(slots)
        .max_wait(Duration::ZERO)
        .call_timeout(Duration::from_secs(1))
        .retry(RetryConfig::builder().seed(5))
        .throttle(
            ThrottleConfig::builder()
                .window(Duration::from_secs(20))
                .build()
                .unwrap(),
        )
}

fn policy(clock: &ManualClock, slots: usize) -> Policy<&ManualClock> {
    let p: Policy<_> = Policy::new("backend", builder(slots).build().unwrap(), clock).unwrap();
    // The breaker would open on these failures; let the throttle decide.
    p.breaker().disable();
    p
}

fn metrics(p: &Policy<&ManualClock>) -> ThrottleMetrics {
    p.throttle().unwrap().metrics()
}

/// Drives the throttle to its cap: 50 overloaded attempts.
fn overload(p: &Policy<&ManualClock>) {
    for _ in 0..50 {
        let _ = block_on(p.call(|| async { Err::<(), _>("503") }));
    }
}

#[test]
fn a_local_refusal_takes_nothing_and_makes_no_call() {
    let clock = ManualClock::new();
    let config = builder(4).rate(Quota::per_second(1000)).build().unwrap();
    let p: Policy<_> = Policy::new("backend", config, &clock).unwrap();
    p.breaker().disable();
    overload(&p);
    assert_eq!(metrics(&p).probability, 0.9);
    let before = (
        p.bulkhead().metrics().accepted,
        p.rate_limiter().unwrap().metrics().admitted,
    );
    let made = Cell::new(0u32);
    let mut refused = 0;
    for _ in 0..100 {
        let r = block_on(p.call(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("503") }
        }));
        if let Err(e) = r {
            if let ErrorKind::Throttled(t) = *e.kind() {
                assert!(e.is_unavailable());
                assert_eq!(e.retry_after(), None);
                assert!(t.probability() > 0.5);
                assert_eq!(e.to_string(), format!("backend unavailable: {t}"));
                refused += 1;
            }
        }
    }
    assert!(refused > 70, "{refused}");
    let after = (
        p.bulkhead().metrics().accepted,
        p.rate_limiter().unwrap().metrics().admitted,
    );
    // Only the admitted calls were made, took a slot and a cell.
    assert_eq!(made.get(), 100 - refused);
    assert_eq!(after.0 - before.0, made.get() as usize);
    assert_eq!(after.1 - before.1, made.get() as usize);
}

#[test]
fn a_success_is_an_accept_and_a_failure_is_not() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    block_on(p.call(|| async { Ok::<_, &str>(()) })).unwrap();
    let _ = block_on(p.call(|| async { Err::<(), _>("503") }));
    let m = metrics(&p);
    assert_eq!(
        (m.requests, m.accepts, m.accepted, m.overloaded),
        (2, 1, 1, 1)
    );
}

#[test]
fn the_call_timeout_is_not_an_accept() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let mut call = pin!(p.call(pending::<Result<(), &str>>));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(Duration::from_secs(1));
    let err = block_on(call).unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::DeadlineExceeded);
    let m = metrics(&p);
    assert_eq!((m.requests, m.accepts, m.overloaded), (1, 0, 1));
}

#[test]
fn other_refusals_budget_cuts_and_cancels_take_the_request_back() {
    let clock = ManualClock::new();
    let p = policy(&clock, 1);
    // The bulkhead refuses: its one slot is held.
    let held = p.bulkhead().try_acquire().unwrap();
    assert_eq!(
        *block_on(p.call(|| async { Ok::<_, &str>(()) }))
            .unwrap_err()
            .kind(),
        ErrorKind::BulkheadFull
    );
    drop(held);
    // The breaker refuses.
    p.breaker().force_open();
    assert!(matches!(
        block_on(p.call(|| async { Ok::<_, &str>(()) }))
            .unwrap_err()
            .kind(),
        ErrorKind::CircuitOpen(_)
    ));
    p.breaker().disable();
    // The caller's budget runs out first.
    let budget = Deadline::after(&clock, 100 * MS);
    let mut call = pin!(p.call_within(&budget, pending::<Result<(), &str>>));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(100 * MS);
    assert_eq!(
        *block_on(call).unwrap_err().kind(),
        ErrorKind::DeadlineExceeded
    );
    // Cancelled mid-call.
    {
        let mut call = pin!(p.call(pending::<Result<(), &str>>));
        assert!(block_on(poll_once(call.as_mut())).is_none());
        assert_eq!(metrics(&p).requests, 1);
    }
    let m = metrics(&p);
    assert_eq!((m.requests, m.accepts, m.admitted, m.ignored), (0, 0, 4, 4));
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

#[test]
fn each_attempt_counts_once_and_a_throttled_attempt_ends_the_retries() {
    let clock = ManualClock::new();
    let config = builder(4)
        .retry(RetryConfig::builder().max_attempts(3).seed(9))
        .build()
        .unwrap();
    let p: Policy<_> = Policy::new("backend", config, &clock).unwrap();
    p.breaker().disable();
    let made = Cell::new(0u32);
    let call = p.call_idempotent(|| {
        made.set(made.get() + 1);
        async { Err::<(), _>("503") }
    });
    let out = drive(&clock, call.into_future());
    let m = metrics(&p);
    // Every attempt asked the throttle; a throttled one ended the retries.
    assert_eq!(m.requests, u64::from(made.get()) + m.refused as u64);
    match out.unwrap_err().kind() {
        ErrorKind::Throttled(_) => assert_eq!(m.refused, 1),
        ErrorKind::Call(_) => assert_eq!((made.get(), m.refused), (3, 0)),
        other => panic!("{other:?}"),
    }
    assert_eq!(m.accepts, 0);
}

/// A call admitted at 0.5 s (bucket 0 of 1 s buckets) that succeeds at
/// 1.4 s (bucket 1): its accept is credited to bucket 0 and leaves the
/// window with its request, at 20 s. Counted at completion, the accept
/// would outlive its request by a bucket.
#[test]
fn a_slow_success_is_credited_to_its_admission_bucket() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    clock.advance(500 * MS);
    let answered = Cell::new(false);
    let mut slow = pin!(p.call(|| {
        std::future::poll_fn(|_| {
            if answered.get() {
                std::task::Poll::Ready(Ok::<_, &str>(()))
            } else {
                std::task::Poll::Pending
            }
        })
    }));
    assert!(block_on(poll_once(slow.as_mut())).is_none());
    clock.advance(900 * MS);
    answered.set(true);
    assert_eq!(block_on(poll_once(slow.as_mut())), Some(Ok(())));
    clock.advance(Duration::from_millis(19_900 - 1400));
    assert_eq!((metrics(&p).requests, metrics(&p).accepts), (1, 1));
    clock.advance(100 * MS); // 20 s: bucket 0 leaves the window
    assert_eq!((metrics(&p).requests, metrics(&p).accepts), (0, 0));
}

#[test]
fn the_window_must_cover_the_call_timeout() {
    let short = ThrottleConfig::builder()
        .window(Duration::from_secs(10))
        .build()
        .unwrap();
    let err = PolicyConfig::builder(4)
        .call_timeout(Duration::from_secs(10))
        .throttle(short)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        PolicyConfigError::Throttle(ThrottleConfigError::WindowShorterThanTimeout { .. })
    ));
    assert_eq!(err.field(), PolicyField::ThrottleWindow);
    assert_eq!(err.field(), "throttle_window");
    // 10 s less a 500 ms bucket covers 9.5 s.
    assert!(PolicyConfig::builder(4)
        .call_timeout(9500 * MS)
        .throttle(short)
        .build()
        .is_ok());
}

#[test]
fn a_policy_without_a_throttle_has_none() {
    let clock = ManualClock::new();
    let p: Policy<_> = Policy::new("x", PolicyConfig::builder(1).build().unwrap(), &clock).unwrap();
    assert!(p.throttle().is_none());
}
