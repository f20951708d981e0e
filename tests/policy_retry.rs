#![cfg(not(loom))]
//! Retries through a `Policy` (`call_idempotent`), on a `ManualClock`:
//! attempt counts, what is and is not retried, the backoff's bounds, the
//! request budget's cap, the retry budget under a storm and its refill,
//! cancellation during a backoff, and a `Retry-After` hint. Nothing sleeps:
//! each test polls by hand and advances the clock.

mod common;

use std::cell::Cell;
use std::future::{pending, IntoFuture};
use std::time::Duration;

use common::Task;
use proptest::prelude::*;
use watertight::clock::{Clock, ManualClock};
use watertight::deadline::Deadline;
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::retry::RetryConfig;
use watertight::{BreakerConfig, Outcome};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// A breaker that does not open within these tests' few calls (they are
/// about retries): it judges only once 64 calls are in its window.
fn lenient() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(64)
        .minimum_calls(64)
        .build()
        .unwrap()
}

fn policy(
    clock: &ManualClock,
    retry: watertight::retry::RetryConfigBuilder,
) -> Policy<&ManualClock> {
    let config = PolicyConfig::builder(4)
        .call_timeout(2 * SEC)
        .breaker(lenient())
        .retry(retry.seed(7))
        .build()
        .unwrap();
    Policy::new("search", config, clock).unwrap()
}

/// Polls `task` until ready, advancing the clock `step` after each pending
/// poll, at most `limit` times.
fn drive<F: std::future::Future>(
    clock: &ManualClock,
    task: &mut Task<F>,
    step: Duration,
) -> F::Output {
    for _ in 0..10_000 {
        if let std::task::Poll::Ready(out) = task.poll() {
            return out;
        }
        clock.advance(step);
    }
    panic!("the call never finished");
}

#[test]
fn a_failing_call_is_made_max_attempts_times() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder().max_attempts(3));
    let made = Cell::new(0);
    let mut task = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("reset") }
        })
        .into_future(),
    );
    let err = drive(&clock, &mut task, MS).unwrap_err();
    assert_eq!(err.into_inner(), Some("reset"));
    assert_eq!(made.get(), 3);
    assert_eq!(p.retry_metrics().after_failure, 2);
    assert_eq!(
        p.breaker().metrics().failed_calls,
        3,
        "each attempt passed the breaker"
    );
    assert_eq!(p.bulkhead().available(), 4);
}

#[test]
fn a_call_that_times_out_is_retried_once_by_default() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder());
    let made = Cell::new(0);
    let mut task = Task::pending(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            pending::<Result<(), ()>>()
        })
        .into_future(),
    );
    assert_eq!(p.bulkhead().in_flight(), 1);
    let err = drive(&clock, &mut task, 10 * MS).unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(made.get(), 2);
    assert_eq!(p.retry_metrics().after_timeout, 1);
    assert_eq!(p.bulkhead().available(), 4);
}

#[test]
fn successes_refusals_and_non_idempotent_calls_are_not_retried() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder().max_attempts(5));
    let made = Cell::new(0);
    let count = || made.set(made.get() + 1);

    // A success.
    let mut t = Task::new(
        p.call_idempotent(|| {
            count();
            async { Ok::<_, ()>(1) }
        })
        .into_future(),
    );
    assert_eq!(t.ready(), Ok(1));
    assert_eq!(made.get(), 1);

    // An error the classifier calls a success (the system answered), and one it ignores.
    for outcome in [Outcome::Success, Outcome::Ignored] {
        made.set(0);
        let mut t = Task::new(
            p.call_idempotent(|| {
                count();
                async { Err::<(), _>(404) }
            })
            .classify(move |_: &Result<(), i32>| outcome)
            .into_future(),
        );
        assert!(t.ready().is_err());
        assert_eq!(made.get(), 1, "{outcome:?} was retried");
    }

    // A refusal by the policy's own layers: the breaker, then the bulkhead.
    made.set(0);
    p.breaker().force_open();
    let mut t = Task::new(
        p.call_idempotent(|| {
            count();
            async { Err::<(), _>("x") }
        })
        .into_future(),
    );
    assert!(matches!(
        t.ready().unwrap_err().kind(),
        ErrorKind::CircuitOpen(_)
    ));
    p.breaker().reset();
    let full = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .retry(RetryConfig::builder().max_attempts(5))
        .build()
        .unwrap();
    let q: Policy<_> = Policy::new("one", full, &clock).unwrap();
    let _busy = q.bulkhead().try_acquire().unwrap();
    let mut t = Task::new(
        q.call_idempotent(|| {
            count();
            async { Err::<(), _>("x") }
        })
        .into_future(),
    );
    assert_eq!(*t.ready().unwrap_err().kind(), ErrorKind::BulkheadFull);
    assert_eq!(made.get(), 0);

    // A plain call never retries.
    let mut t = Task::new(p.call(|| {
        count();
        async { Err::<(), _>("x") }
    }));
    assert!(t.ready().is_err());
    assert_eq!(made.get(), 1);
    assert_eq!(p.retry_metrics().after_failure, 0);
}

#[test]
fn an_answer_the_classifier_calls_a_failure_is_retried_and_returned_last() {
    // An HTTP client's `Ok(503)`: the system answered, badly.
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder().max_attempts(3));
    let made = Cell::new(0);
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            let status = if made.get() < 3 { 503 } else { 200 };
            async move { Ok::<u16, ()>(status) }
        })
        .classify(|r: &Result<u16, ()>| match r {
            Ok(s) if *s >= 500 => Outcome::Failure,
            Ok(_) => Outcome::Success,
            Err(()) => Outcome::Failure,
        })
        .into_future(),
    );
    assert_eq!(drive(&clock, &mut t, MS), Ok(200));
    assert_eq!(made.get(), 3);
    assert_eq!(p.retry_metrics().after_failure, 2);

    // Out of attempts: the last answer is what the caller gets.
    let mut t = Task::new(
        p.call_idempotent(|| async { Ok::<u16, ()>(503) })
            .classify(|r: &Result<u16, ()>| {
                if matches!(r, Ok(503)) {
                    Outcome::Failure
                } else {
                    Outcome::Success
                }
            })
            .into_future(),
    );
    assert_eq!(drive(&clock, &mut t, MS), Ok(503));
}

#[test]
fn no_attempt_starts_that_the_request_budget_cannot_hold() {
    let clock = ManualClock::new();
    // min_attempt_time 50 ms by default.
    let p = policy(&clock, RetryConfig::builder().max_attempts(5));
    let made = Cell::new(0);
    let request = Deadline::after(&clock, 40 * MS);
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("x") }
        })
        .within(&request)
        .into_future(),
    );
    // Returned at once: no sleep, the last error.
    assert_eq!(t.ready().unwrap_err().into_inner(), Some("x"));
    assert_eq!(made.get(), 1);

    // A backoff that would end past the deadline is not slept either.
    let p = policy(&clock, RetryConfig::builder().backoff(10 * SEC, 10 * SEC));
    let request = Deadline::after(&clock, SEC);
    let start = clock.now();
    let mut t = Task::new(
        p.call_idempotent(|| async { Err::<(), _>("x") })
            .retry_after(|_: &&str| Some(5 * SEC))
            .within(&request)
            .into_future(),
    );
    assert!(t.ready().is_err());
    assert_eq!(clock.now(), start);

    // Within a budget the retries that fit are made, the rest are not,
    // and no attempt runs past it.
    let p = policy(
        &clock,
        RetryConfig::builder()
            .max_attempts(100)
            .backoff(100 * MS, 100 * MS),
    );
    let request = Deadline::after(&clock, SEC);
    let made = Cell::new(0);
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("x") }
        })
        .within(&request)
        .into_future(),
    );
    assert!(drive(&clock, &mut t, MS).is_err());
    assert!(
        clock.now() <= request.instant(),
        "slept past the request's deadline"
    );
    assert!(made.get() >= 2 && made.get() < 100, "{}", made.get());
}

#[test]
fn with_no_min_attempt_time_a_retry_past_the_budget_gives_the_last_error_at_once() {
    // `min_attempt_time(0)`: any time left is enough for an attempt, but a
    // backoff still never sleeps past the request's budget (nor up to it,
    // where the attempt could not start).
    for hint in [5 * SEC, SEC] {
        let clock = ManualClock::new();
        let p = policy(
            &clock,
            RetryConfig::builder().min_attempt_time(Duration::ZERO),
        );
        let made = Cell::new(0);
        let request = Deadline::after(&clock, SEC);
        let start = clock.now();
        let mut t = Task::new(
            p.call_idempotent(|| {
                made.set(made.get() + 1);
                async { Err::<(), u16>(503) }
            })
            .retry_after(move |_: &u16| Some(hint))
            .within(&request)
            .into_future(),
        );
        // Ready at its first poll: no backoff sleep, the 503 itself.
        let err = t.ready().unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::Call(503), "hint {hint:?}");
        assert_eq!(clock.now(), start, "no time passed");
        assert_eq!(made.get(), 1);
        assert_eq!(p.retry_metrics().after_failure, 0);
        assert_eq!(p.bulkhead().available(), 4);
    }
}

#[test]
fn a_storm_of_1000_failing_calls_gets_no_more_retries_than_the_budget() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder()); // 10 tokens, 10 %
                                                    // The storm is the budget's to stop here, not the breaker's.
    p.breaker().disable();
    let mut attempts = 0;
    for _ in 0..1000 {
        let mut t = Task::new(
            p.call_idempotent(|| {
                attempts += 1;
                async { Err::<(), _>("down") }
            })
            .into_future(),
        );
        let _ = drive(&clock, &mut t, 10 * MS);
    }
    let m = p.retry_metrics();
    println!(
        "1000 failing calls: {attempts} attempts, {} retries, budget refused {}",
        m.after_failure, m.budget_exhausted
    );
    // Half of 10 tokens: at most 5 retries, whatever the order.
    assert!(m.after_failure <= 5, "{m:?}");
    assert_eq!(attempts, 1000 + m.after_failure);
    assert!(m.budget_exhausted >= 990);

    // Recovery: successes refill the budget, and a failure is retried again.
    for _ in 0..100 {
        let mut t = Task::new(
            p.call_idempotent(|| async { Ok::<_, &str>(()) })
                .into_future(),
        );
        assert!(t.ready().is_ok());
    }
    let made = Cell::new(0);
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("blip") }
        })
        .into_future(),
    );
    let _ = drive(&clock, &mut t, 10 * MS);
    assert_eq!(made.get(), 2, "the refilled budget did not allow the retry");
}

#[test]
fn cancelling_during_the_backoff_gives_the_slot_back_and_records_nothing_more() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder().backoff(SEC, SEC));
    let made = Cell::new(0);
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            async { Err::<(), _>("x") }
        })
        .into_future(),
    );
    // The first attempt failed; the retry's backoff is sleeping (drawn in [0, 1 s]).
    let first = t.poll();
    if first.is_ready() {
        // The jitter drew zero: vanishingly unlikely with seed 7; say so.
        panic!("the backoff was zero");
    }
    assert_eq!(
        p.bulkhead().in_flight(),
        0,
        "a slot was held through the backoff"
    );
    let tokens = p.retry_budget().tokens();
    let calls = p.breaker().metrics().calls;
    drop(t);
    assert_eq!(made.get(), 1);
    assert_eq!(p.breaker().metrics().calls, calls);
    assert_eq!(p.retry_budget().tokens(), tokens);
    assert_eq!(p.bulkhead().available(), 4);
}

#[test]
fn a_retry_after_hint_sets_the_backoff() {
    let clock = ManualClock::new();
    let p = policy(&clock, RetryConfig::builder());
    let made = Cell::new(0);
    let start = clock.now();
    let at = Cell::new(Vec::new());
    let mut t = Task::new(
        p.call_idempotent(|| {
            made.set(made.get() + 1);
            let mut v = at.take();
            v.push(clock.now() - start);
            at.set(v);
            async { Err::<(), _>(503) }
        })
        .retry_after(|status: &u16| (*status == 503).then_some(300 * MS))
        .into_future(),
    );
    assert!(t.poll().is_pending());
    clock.advance(299 * MS);
    assert!(t.poll().is_pending());
    assert_eq!(made.get(), 1);
    clock.advance(MS);
    assert!(t.ready().is_err());
    assert_eq!(at.take(), vec![Duration::ZERO, 300 * MS]);
}

proptest! {
    #[test]
    fn the_backoff_is_within_its_jittered_bound(seed: u64, base_ms in 1u64..200, retries in 1u32..5) {
        let clock = ManualClock::new();
        let retry = RetryConfig::builder()
            .max_attempts(retries + 1)
            .backoff(Duration::from_millis(base_ms), Duration::from_millis(20 * base_ms))
            .budget(1000, 10.0)
            .seed(seed);
        let config = PolicyConfig::builder(4).breaker(lenient()).retry(retry).build().unwrap();
        let p: Policy<_> = Policy::new("p", config, &clock).unwrap();
        let times = Cell::new(Vec::new());
        let mut t = Task::new(
            p.call_idempotent(|| {
                let mut v = times.take();
                v.push(clock.now());
                times.set(v);
                async { Err::<(), _>(()) }
            })
            .into_future(),
        );
        let _ = drive(&clock, &mut t, MS);
        let times = times.take();
        prop_assert_eq!(times.len() as u32, retries + 1);
        for (n, w) in times.windows(2).enumerate() {
            let gap = w[1] - w[0];
            let cap = p.retry_config().backoff_cap(n as u32 + 1);
            // Driven in 1 ms steps: the attempt starts within 1 ms after its time.
            prop_assert!(gap <= cap + MS, "retry {} waited {:?}, cap {:?}", n + 1, gap, cap);
        }
    }
}
