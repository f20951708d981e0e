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

// ---- the window ------------------------------------------------------------

#[test]
fn window_fills_up_to_window_size() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(100.0));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("w", config, &clock);
    assert_eq!(counts(&b), (0, 0, 0));
    for n in 1..=4 {
        if n == 2 {
            fail(&b, 1);
        } else {
            succeed(&b, 1);
        }
        assert_eq!(b.metrics().calls, n);
    }
    assert_eq!(counts(&b), (4, 1, 0));
    succeed(&b, 1);
    assert_eq!(b.metrics().calls, 4, "a full window stays at window_size");
}

#[test]
fn window_evicts_the_oldest_outcome_once_full() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(100.0));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("w", config, &clock);
    fail(&b, 1);
    succeed(&b, 3);
    assert_eq!(counts(&b), (4, 1, 0));
    succeed(&b, 1); // evicts the failure
    assert_eq!(counts(&b), (4, 0, 0));
    fail(&b, 3); // [S, F, F, F]
    assert_eq!(counts(&b), (4, 3, 0));
    assert_eq!(b.state(), State::Closed, "75 % < 100 %");
    fail(&b, 1); // evicts the last success: [F, F, F, F]
    assert_eq!(counts(&b), (4, 4, 0));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn window_size_below_capacity_uses_only_window_size_slots() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(3)
        .minimum_calls(3)
        .failure_rate_threshold(100.0));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("w", config, &clock);
    succeed(&b, 1);
    fail(&b, 2);
    assert_eq!(counts(&b), (3, 2, 0));
    assert_eq!(b.state(), State::Closed);
    // With 8 slots this would be 3 of 4 (75 %); in a window of 3 the success
    // is evicted and it is 3 of 3.
    fail(&b, 1);
    assert_eq!(counts(&b), (3, 3, 0));
    assert_eq!(b.state(), State::Open);
}

// ---- when rates are evaluated; the threshold -------------------------------

#[test]
fn no_evaluation_below_minimum_calls() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(20).minimum_calls(10));
    let b: CircuitBreaker<_, 20> = CircuitBreaker::new("m", config, &clock);
    fail(&b, 9);
    assert_eq!(b.state(), State::Closed, "9 failures of 9 with minimum 10");
    assert_eq!(b.metrics().failure_rate, None);
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn evaluated_after_every_outcome_once_minimum_is_in() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(10).minimum_calls(4));
    let b: CircuitBreaker<_, 10> = CircuitBreaker::new("e", config, &clock);
    succeed(&b, 4);
    assert_eq!(b.metrics().failure_rate, Some(0.0));
    // 1/5, 2/6, 3/7 stay below 50 %; the fourth failure makes 4/8.
    for _ in 0..3 {
        fail(&b, 1);
        assert_eq!(b.state(), State::Closed);
    }
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
    assert_eq!(counts(&b), (8, 4, 0));
}

#[test]
fn a_success_can_trip() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(10).minimum_calls(6));
    let b: CircuitBreaker<_, 10> = CircuitBreaker::new("s", config, &clock);
    fail(&b, 5);
    assert_eq!(b.state(), State::Closed);
    succeed(&b, 1); // 5 of 6 failed
    assert_eq!(b.state(), State::Open);
    assert_eq!(counts(&b), (6, 5, 0));
}

#[test]
fn rate_at_threshold_trips() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(6).minimum_calls(6));
    let b: CircuitBreaker<_, 6> = CircuitBreaker::new("t", config, &clock);
    succeed(&b, 3);
    fail(&b, 2);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 1); // 3 of 6 = 50 %
    assert_eq!(b.state(), State::Open);
}

#[test]
fn rate_below_threshold_does_not_trip() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(6).minimum_calls(6));
    let b: CircuitBreaker<_, 6> = CircuitBreaker::new("t", config, &clock);
    succeed(&b, 4);
    fail(&b, 2); // 2 of 6
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failure_rate, Some(2.0 * 100.0 / 6.0));
}

#[test]
fn critical_preset_trips_at_thirty_percent() {
    let clock = ManualClock::new();
    let critical: CircuitBreaker<_, 50> =
        CircuitBreaker::new("payments", BreakerConfig::CRITICAL, &clock);
    let default: CircuitBreaker<_, 50> =
        CircuitBreaker::new("catalog", BreakerConfig::DEFAULT, &clock);
    for b in [&critical, &default] {
        succeed(b, 7);
        fail(b, 3); // 3 of 10 = 30 %
    }
    assert_eq!(critical.state(), State::Open);
    assert_eq!(default.state(), State::Closed);

    let just_below: CircuitBreaker<_, 50> =
        CircuitBreaker::new("payments", BreakerConfig::CRITICAL, &clock);
    succeed(&just_below, 12);
    fail(&just_below, 5); // 5 of 17 = 29.4 %
    assert_eq!(just_below.state(), State::Closed);
    fail(&just_below, 1); // 6 of 18 = 33 %
    assert_eq!(just_below.state(), State::Open);
}

// ---- slow calls --------------------------------------------------------------

#[test]
fn slow_is_strictly_longer_than_slow_call_duration() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(10)
        .minimum_calls(10)
        .slow_call_duration(100 * MS));
    let b: CircuitBreaker<_, 10> = CircuitBreaker::new("slow", config, &clock);
    timed(&b, &clock, 100 * MS, Outcome::Success);
    timed(&b, &clock, 100 * MS, Outcome::Failure);
    assert_eq!(counts(&b), (2, 1, 0), "exactly the duration is not slow");
    timed(&b, &clock, 100 * MS + US, Outcome::Success);
    assert_eq!(counts(&b), (3, 1, 1), "one microsecond more is slow");
    // Measured from try_acquire: time before it does not count.
    clock.advance(SEC);
    timed(&b, &clock, 50 * MS, Outcome::Success);
    assert_eq!(counts(&b), (4, 1, 1));
}

#[test]
fn slow_call_rate_trips() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(4)
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(50.0));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("slow", config, &clock);
    timed(&b, &clock, 200 * MS, Outcome::Success);
    for _ in 0..3 {
        timed(&b, &clock, MS, Outcome::Success);
    }
    assert_eq!(b.state(), State::Closed, "1 slow of 4");
    timed(&b, &clock, 200 * MS, Outcome::Success); // evicts the slow one: 1 of 4
    assert_eq!(b.state(), State::Closed);
    timed(&b, &clock, 200 * MS, Outcome::Success); // 2 of 4 = 50 %
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.failed_calls, m.slow_calls), (0, 2));
    assert_eq!((m.failure_rate, m.slow_call_rate), (Some(0.0), Some(50.0)));
}

#[test]
fn slow_failures_count_in_both_rates() {
    let clock = ManualClock::new();
    let base = builder()
        .window_size(4)
        .minimum_calls(4)
        .slow_call_duration(100 * MS);

    // Counted as a failure: 1 slow failure + 1 failure of 4 trips at 50 %.
    let by_failures: CircuitBreaker<_, 4> = CircuitBreaker::new(
        "f",
        cfg(base
            .failure_rate_threshold(50.0)
            .slow_call_rate_threshold(90.0)),
        &clock,
    );
    timed(&by_failures, &clock, 200 * MS, Outcome::Failure);
    timed(&by_failures, &clock, MS, Outcome::Failure);
    timed(&by_failures, &clock, MS, Outcome::Success);
    assert_eq!(counts(&by_failures), (3, 2, 1));
    timed(&by_failures, &clock, MS, Outcome::Success);
    assert_eq!(by_failures.state(), State::Open);

    // Counted as slow: 1 slow failure + 1 slow success of 4 trips at 50 %.
    let by_slow: CircuitBreaker<_, 4> = CircuitBreaker::new(
        "s",
        cfg(base
            .failure_rate_threshold(90.0)
            .slow_call_rate_threshold(50.0)),
        &clock,
    );
    timed(&by_slow, &clock, 200 * MS, Outcome::Failure);
    timed(&by_slow, &clock, 200 * MS, Outcome::Success);
    timed(&by_slow, &clock, MS, Outcome::Success);
    assert_eq!(counts(&by_slow), (3, 1, 2));
    timed(&by_slow, &clock, MS, Outcome::Success);
    assert_eq!(by_slow.state(), State::Open);
    let m = by_slow.metrics();
    assert_eq!((m.failure_rate, m.slow_call_rate), (Some(25.0), Some(50.0)));
}

#[test]
fn no_slow_detection_without_slow_call_duration() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(2)
        .slow_call_rate_threshold(10.0));
    assert_eq!(config.slow_call_duration(), None);
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("noslow", config, &clock);
    for _ in 0..4 {
        timed(&b, &clock, 3600 * SEC, Outcome::Success);
    }
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!((m.calls, m.slow_calls, m.slow_call_rate), (4, 0, Some(0.0)));
}

// ---- open --------------------------------------------------------------------

#[test]
fn open_rejects_with_exact_retry_after_that_decreases() {
    let clock = ManualClock::new();
    let config = cfg(small().open_duration(30 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", config, &clock);
    clock.advance(7 * MS);
    fail(&b, 2); // opened at 7 ms
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.try_acquire().unwrap_err(),
        Rejection::Open {
            retry_after: 30 * SEC
        }
    );
    clock.advance(MS);
    assert_eq!(open_hint(&b), 30 * SEC - MS);
    clock.advance(10 * SEC);
    assert_eq!(open_hint(&b), 20 * SEC - MS);
    clock.advance(20 * SEC - MS - US);
    assert_eq!(open_hint(&b), US);
}

#[test]
fn rejections_do_not_extend_the_open_wait() {
    let clock = ManualClock::new();
    let config = cfg(small().open_duration(30 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", config, &clock);
    fail(&b, 2);
    for k in 0..30u32 {
        for _ in 0..3 {
            assert_eq!(open_hint(&b), (30 - k) * SEC);
        }
        clock.advance(SEC);
    }
    let probe = b.try_acquire().expect("the wait ends 30 s after the trip");
    assert!(probe.is_probe());
    assert_eq!(b.metrics().rejected, 90);
}

#[test]
fn probes_allowed_exactly_at_the_end_of_the_open_wait_not_before() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", cfg(small()), &clock);
    clock.advance(3 * MS);
    fail(&b, 2);
    clock.advance(10 * SEC - US);
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), US);
    clock.advance(US);
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().expect("opened_at + open_duration admits");
    assert!(probe.is_probe());
    probe.success();
}

#[test]
fn state_reads_half_open_once_the_wait_is_over_without_a_call() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("o", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    clock.advance(MS);
    fail(&b, 2);
    clock.advance(10 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.state(), State::HalfOpen);
    // Reading changed nothing: no transition told.
    assert_eq!(log.borrow().len(), 1);
    // The snapshot agrees with `state()`: half-open, with the empty window
    // an episode starts with, since the end of the open wait.
    let m = b.metrics();
    assert_eq!(m.state, State::HalfOpen);
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (0, 0, 0));
    assert_eq!((m.failure_rate, m.slow_call_rate), (None, None));
    assert_eq!(m.last_transition, Some(at(MS + 10 * SEC)));
    clock.advance(2 * SEC);
    assert_eq!(b.metrics().last_transition, Some(at(MS + 10 * SEC)));
    assert_eq!(b.metrics().calls, 0);
    // The next call is the first probe and makes the transition, dated at
    // its admission.
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(log.borrow().len(), 2);
    assert_eq!(log.borrow()[1].at, at(MS + 12 * SEC));
    let m = b.metrics();
    assert_eq!((m.state, m.calls), (State::HalfOpen, 0));
    assert_eq!(m.last_transition, Some(at(MS + 12 * SEC)));
    probe.failure();
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Open, 1, 1));
}

#[test]
fn metrics_of_an_expired_episode_agree_with_state_through_the_next_wait() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap(); // half-open at 10 s
    clock.advance(5 * SEC); // ran out at 15 s: Open, by the clock
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.last_transition, Some(at(15 * SEC)));
    // After that open wait too, still untouched: half-open with an empty
    // window since 25 s.
    clock.advance(10 * SEC);
    let m = b.metrics();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        (m.state, m.calls, m.failure_rate),
        (State::HalfOpen, 0, None)
    );
    assert_eq!(m.last_transition, Some(at(25 * SEC)));
    drop(stuck);
}

// ---- half-open -------------------------------------------------------------

#[test]
fn half_open_admits_exactly_half_open_calls_in_total() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    let p3 = b.try_acquire().unwrap();
    assert!(p1.is_probe() && p2.is_probe() && p3.is_probe());
    let busy = b.try_acquire().unwrap_err();
    assert_eq!(busy, Rejection::ProbesBusy);
    assert_eq!(busy.retry_after(), None);
    // In total, not at once: a finished probe does not free its slot.
    p1.success();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    assert_eq!(b.state(), State::HalfOpen);
    p3.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().rejected, 3);
}

#[test]
fn ignored_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p1.ignore();
    assert_eq!(b.metrics().calls, 0, "an ignored probe records nothing");
    let p3 = b.try_acquire().expect("the ignored probe's slot");
    assert!(p3.is_probe());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the ignored probe was no success"
    );
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn dropped_probe_permit_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    drop(p1);
    assert_eq!(b.metrics().calls, 0, "a dropped probe records nothing");
    let p3 = b.try_acquire().expect("the dropped probe's slot");
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(b.state(), State::HalfOpen);
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn first_failed_probe_reopens_with_a_new_full_wait() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    clock.advance(3 * SEC);
    p1.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), 10 * SEC, "a full wait from the failed probe");
    clock.advance(10 * SEC - US);
    assert_eq!(open_hint(&b), US);
    p2.success(); // the episode is over: too late
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().stale, 1);
    clock.advance(US);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn slow_probe_reopens() {
    let clock = ManualClock::new();
    let config = cfg(small().slow_call_duration(SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    timed(&b, &clock, SEC, Outcome::Success); // exactly 1 s: not slow
    assert_eq!(b.state(), State::HalfOpen);
    timed(&b, &clock, SEC + US, Outcome::Success);
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), 10 * SEC);
    // The window kept the probes for metrics.
    assert_eq!(counts(&b), (2, 0, 1));
}

#[test]
fn all_probes_succeeding_close_with_an_empty_window() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    for n in 1..=2 {
        succeed(&b, 1);
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.metrics().calls, n, "probes are recorded for metrics");
    }
    succeed(&b, 1);
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls, m.failure_rate), (0, 0, None));
    assert!(!b.try_acquire().unwrap().is_probe());
}

#[test]
fn max_half_open_wait_reopens_a_stuck_episode_and_the_late_outcome_is_stale() {
    let clock = ManualClock::new();
    let config = cfg(small().max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap(); // the episode began at 10 s
    clock.advance(5 * SEC - US);
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(US); // 15 s = began + max wait
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().state, State::Open);
    clock.advance(SEC); // 16 s
    stuck.success();
    assert_eq!(b.metrics().stale, 1, "the probe came back after the limit");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().last_transition, Some(at(15 * SEC)));
    // The new wait counts from 15 s, not from when it was noticed.
    assert_eq!(open_hint(&b), 9 * SEC);
    clock.advance(9 * SEC - US);
    assert_eq!(b.state(), State::Open);
    clock.advance(US);
    assert_eq!(b.state(), State::HalfOpen);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn max_half_open_wait_reopen_is_seen_by_the_next_call() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    clock.advance(7 * SEC); // 17 s; the episode ran out at 15 s
    assert_eq!(open_hint(&b), 8 * SEC);
    assert_eq!(b.metrics().last_transition, Some(at(15 * SEC)));
    stuck.success();
    assert_eq!(b.metrics().stale, 1);
    assert_eq!(b.state(), State::Open);
    // Past began + max wait + open duration, it reads half-open again.
    clock.advance(8 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn max_half_open_wait_does_not_expire_an_episode_with_no_probe_out() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(3).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    succeed(&b, 1); // one of three probes back; none out
    clock.advance(60 * SEC); // quiet traffic, far past the limit
    assert_eq!(b.state(), State::HalfOpen);
    // The episode goes on: two more probes close it.
    succeed(&b, 2);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().stale, 0);
}

#[test]
fn max_half_open_wait_counts_from_the_latest_probe_admission() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(3).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    succeed(&b, 1); // the episode began at 10 s
    clock.advance(4 * SEC); // 14 s
    let late = b.try_acquire().unwrap(); // admitted at 14 s
    clock.advance(4 * SEC); // 18 s: past began + 5 s, but the probe is out 4 s
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(SEC); // 19 s = 14 s + 5 s
    assert_eq!(b.state(), State::Open);
    late.success();
    assert_eq!(b.metrics().stale, 1);
    assert_eq!(b.metrics().last_transition, Some(at(19 * SEC)));
}

#[test]
fn without_max_half_open_wait_a_stuck_probe_keeps_it_half_open() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1));
    assert_eq!(config.max_half_open_wait(), None);
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap();
    clock.advance(24 * 3600 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    stuck.success();
    assert_eq!(b.metrics().stale, 0);
    assert_eq!(b.state(), State::Closed);
}

// ---- generations -------------------------------------------------------------

#[test]
fn generations_outcome_from_before_a_trip_is_stale() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("g", cfg(small()), &clock);
    let old = b.try_acquire().unwrap();
    fail(&b, 2);
    assert_eq!(b.state(), State::Open);
    old.success();
    let m = b.metrics();
    assert_eq!((m.stale, m.calls, m.failed_calls), (1, 2, 2));
    // Nor does it count as a probe of the next episode.
    clock.advance(10 * SEC);
    succeed(&b, 1);
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn generations_outcome_from_before_a_reset_is_stale() {
    let clock = ManualClock::new();
    let config = cfg(small().minimum_calls(1));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("g", config, &clock);
    let old = b.try_acquire().unwrap();
    b.reset();
    old.failure(); // would trip at minimum 1
    let m = b.metrics();
    assert_eq!((m.state, m.stale, m.calls), (State::Closed, 1, 0));
}

#[test]
fn generations_outcome_from_before_force_open_is_stale() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("g", cfg(small()), &clock);
    succeed(&b, 1);
    let old = b.try_acquire().unwrap();
    assert!(b.force_open());
    old.failure();
    let m = b.metrics();
    assert_eq!(m.state, State::ForcedOpen);
    assert_eq!((m.stale, m.calls, m.failed_calls), (1, 1, 0));
}

#[test]
fn generations_probe_of_an_earlier_episode_is_stale() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("g", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let a = b.try_acquire().unwrap();
    let late = b.try_acquire().unwrap();
    a.failure(); // reopens
    clock.advance(10 * SEC);
    let c = b.try_acquire().unwrap(); // a new episode
    late.success();
    assert_eq!(b.metrics().stale, 1);
    c.success();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the late success was not counted"
    );
    succeed(&b, 1);
    assert_eq!(b.state(), State::Closed);
}

// ---- windows on transitions --------------------------------------------------

#[test]
fn closed_to_open_keeps_the_window() {
    let clock = ManualClock::new();
    let config = cfg(small().minimum_calls(4));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("t", config, &clock);
    succeed(&b, 2);
    fail(&b, 2);
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(
        (m.calls, m.failed_calls, m.failure_rate),
        (4, 2, Some(50.0))
    );
    // Kept for the whole wait; once it is over, the snapshot shows the
    // half-open episode `state()` reports, with its empty window.
    clock.advance(10 * SEC - US);
    assert_eq!(counts(&b), (4, 2, 0));
    clock.advance(US);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(counts(&b), (0, 0, 0));
}

#[test]
fn half_open_entry_starts_an_empty_window() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("t", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let probe = b.try_acquire().unwrap();
    assert_eq!(counts(&b), (0, 0, 0));
    assert_eq!(b.metrics().failure_rate, None);
    probe.failure();
    // HalfOpen -> Open keeps the probe's outcome for metrics.
    assert_eq!(b.state(), State::Open);
    assert_eq!(counts(&b), (1, 1, 0));
}

#[test]
fn closed_entry_starts_an_empty_window() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("t", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    succeed(&b, 2);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(counts(&b), (0, 0, 0));
    fail(&b, 1);
    assert_eq!(counts(&b), (1, 1, 0));
    assert_eq!(b.state(), State::Closed, "1 outcome is below minimum 2");
}

// ---- operator switches -------------------------------------------------------

#[test]
fn force_open_rejects_with_forced_open_and_no_hint() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("f", cfg(small()), &clock);
    assert!(b.force_open());
    assert_eq!(b.state(), State::ForcedOpen);
    let why = b.try_acquire().unwrap_err();
    assert_eq!(why, Rejection::ForcedOpen);
    assert_eq!(why.retry_after(), None);
    // It does not end by itself.
    clock.advance(3600 * SEC);
    assert_eq!(b.state(), State::ForcedOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    b.reset();
    assert!(!b.try_acquire().unwrap().is_probe());
}

#[test]
fn force_open_twice_returns_false_the_second_time() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("f", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    fail(&b, 2); // from Open too
    assert!(b.force_open());
    assert!(!b.force_open());
    assert_eq!(b.state(), State::ForcedOpen);
    assert!(b.disable());
    assert!(!b.disable());
    let seen: Vec<_> = log.borrow().iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(
        seen,
        [
            (State::Closed, State::Open),
            (State::Open, State::ForcedOpen),
            (State::ForcedOpen, State::Disabled),
        ]
    );
}

#[test]
fn disabled_admits_everything_and_records_nothing() {
    let clock = ManualClock::new();
    let config = cfg(small().slow_call_duration(MS));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("d", config, &clock);
    fail(&b, 2);
    assert_eq!(b.state(), State::Open);
    assert!(b.disable());
    assert_eq!(b.state(), State::Disabled);
    for _ in 0..20 {
        let p = b.try_acquire().expect("disabled admits");
        assert!(!p.is_probe());
        clock.advance(SEC);
        p.failure();
    }
    let m = b.metrics();
    assert_eq!(m.state, State::Disabled);
    // The frozen window of the trip, untouched; nothing stale, nothing rejected.
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (2, 2, 0));
    assert_eq!((m.stale, m.rejected), (0, 0));
}

#[test]
fn reset_from_closed_tells_nothing_and_keeps_last_transition() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("r", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    // Never transitioned: a reset of the closed breaker tells nothing.
    succeed(&b, 1);
    let old = b.try_acquire().unwrap();
    clock.advance(SEC);
    b.reset();
    assert!(
        log.borrow().is_empty(),
        "reset from Closed told {:?}",
        log.borrow()
    );
    let m = b.metrics();
    assert_eq!(
        (m.state, m.calls, m.last_transition),
        (State::Closed, 0, None)
    );
    old.failure();
    assert_eq!(
        b.metrics().stale,
        1,
        "a permit from before the reset is stale"
    );

    // After a real transition, a reset from Closed leaves its time alone.
    fail(&b, 2); // Closed -> Open at 1 s
    clock.advance(10 * SEC);
    succeed(&b, 2); // HalfOpen at 11 s, Closed at 11 s
    assert_eq!(b.state(), State::Closed);
    let told = log.borrow().len();
    clock.advance(SEC);
    b.reset();
    assert_eq!(log.borrow().len(), told);
    assert_eq!(b.metrics().last_transition, Some(at(11 * SEC)));

    // From any other state it is a transition, told as such.
    fail(&b, 2); // Open at 12 s
    clock.advance(SEC);
    b.reset();
    let last = *log.borrow().last().unwrap();
    assert_eq!(
        (last.from, last.to, last.at),
        (State::Open, State::Closed, at(13 * SEC))
    );
    assert!(log.borrow().iter().all(|t| t.from != t.to));
}

#[test]
fn reset_from_every_state_closes_with_an_empty_window() {
    for from in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ] {
        let clock = ManualClock::new();
        let b: CircuitBreaker<_, 4> = CircuitBreaker::new("r", cfg(small()), &clock);
        let mut outstanding = None;
        match from {
            State::Closed => {
                succeed(&b, 2);
                fail(&b, 1); // 1 of 3
            }
            State::Open => fail(&b, 2),
            State::HalfOpen => {
                fail(&b, 2);
                clock.advance(10 * SEC);
                succeed(&b, 1);
                outstanding = Some(b.try_acquire().unwrap());
            }
            State::ForcedOpen => {
                fail(&b, 1);
                b.force_open();
            }
            State::Disabled => {
                fail(&b, 1);
                b.disable();
            }
        }
        assert_eq!(b.state(), from);
        assert!(b.metrics().calls > 0, "{from}: the window holds outcomes");
        b.reset();
        let m = b.metrics();
        assert_eq!(m.state, State::Closed, "{from}");
        assert_eq!(
            (m.calls, m.failed_calls, m.failure_rate),
            (0, 0, None),
            "{from}"
        );
        if let Some(p) = outstanding {
            p.success();
            assert_eq!(b.metrics().stale, 1, "{from}");
        }
        // And it works as a fresh closed breaker.
        let p = b.try_acquire().unwrap();
        assert!(!p.is_probe(), "{from}");
        p.failure();
        assert_eq!(b.state(), State::Closed, "{from}");
        fail(&b, 1);
        assert_eq!(b.state(), State::Open, "{from}");
    }
}

// ---- the permit API ------------------------------------------------------------

#[test]
fn permit_success_failure_ignore_and_record() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("p", config, &clock);
    let p = b.try_acquire().unwrap();
    assert_eq!(p.breaker().name(), "p");
    assert!(!p.is_probe());
    p.success();
    assert_eq!(counts(&b), (1, 0, 0));
    b.try_acquire().unwrap().failure();
    assert_eq!(counts(&b), (2, 1, 0));
    b.try_acquire().unwrap().ignore();
    assert_eq!(counts(&b), (2, 1, 0));
    b.try_acquire().unwrap().record(Outcome::Success);
    assert_eq!(counts(&b), (3, 1, 0));
    b.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(counts(&b), (4, 2, 0));
    b.try_acquire().unwrap().record(Outcome::Ignored);
    assert_eq!(counts(&b), (4, 2, 0));

    // record(Ignored) gives a probe's slot back, like ignore().
    let h: CircuitBreaker<_, 4> = CircuitBreaker::new("p", cfg(small().half_open_calls(1)), &clock);
    fail(&h, 2);
    clock.advance(10 * SEC);
    let probe = h.try_acquire().unwrap();
    assert_eq!(h.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    probe.record(Outcome::Ignored);
    h.try_acquire().unwrap().record(Outcome::Success);
    assert_eq!(h.state(), State::Closed);
}

#[test]
fn permit_dropped_without_outcome_records_nothing() {
    let clock = ManualClock::new();
    let config = cfg(small().minimum_calls(1));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("p", config, &clock);
    for _ in 0..10 {
        drop(b.try_acquire().unwrap());
    }
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.stale), (State::Closed, 0, 0));
}

#[test]
fn permit_dropped_during_a_panic_records_a_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(4).minimum_calls(4));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("p", config, &clock);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
        let _permit = b.try_acquire().unwrap();
        panic!("the call panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(counts(&b), (1, 1, 0));

    // A probe that panics reopens.
    let h: CircuitBreaker<_, 4> = CircuitBreaker::new("p", cfg(small()), &clock);
    fail(&h, 2);
    clock.advance(10 * SEC);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
        let _probe = h.try_acquire().unwrap();
        panic!("the probe panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(h.state(), State::Open);
    assert_eq!(open_hint(&h), 10 * SEC);
}

// ---- call / call_with ----------------------------------------------------------

#[test]
fn call_ok_is_success_and_err_is_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("c", config, &clock);
    future::block_on(async {
        assert_eq!(b.call(async { Ok::<u8, &str>(7) }).await, Ok(7));
        assert_eq!(counts(&b), (1, 0, 0));
        assert_eq!(
            b.call(async { Err::<u8, &str>("boom") }).await,
            Err(CallError::Failed("boom"))
        );
        assert_eq!(counts(&b), (2, 1, 0));
    });
}

#[test]
fn call_with_classifier_decides_the_outcome() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("c", config, &clock);
    let http = |r: &Result<u16, &str>| match r {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Ignored,
    };
    future::block_on(async {
        // A 503 is a failure, and still returned as it is.
        assert_eq!(b.call_with(async { Ok(503) }, http).await, Ok(503));
        assert_eq!(counts(&b), (1, 1, 0));
        // A 404 is an answer.
        assert_eq!(b.call_with(async { Ok(404) }, http).await, Ok(404));
        assert_eq!(counts(&b), (2, 1, 0));
        // Ignored records nothing; the error is still the caller's.
        assert_eq!(
            b.call_with(async { Err("cancelled by caller") }, http)
                .await,
            Err(CallError::Failed("cancelled by caller"))
        );
        assert_eq!(counts(&b), (2, 1, 0));
        // An Err the classifier calls a success is recorded as one.
        let lenient = |_: &Result<u16, &str>| Outcome::Success;
        assert_eq!(
            b.call_with(async { Err::<u16, _>("not found") }, lenient)
                .await,
            Err(CallError::Failed("not found"))
        );
        assert_eq!(counts(&b), (3, 1, 0));
    });
}

#[test]
fn rejected_call_does_not_run_the_future() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(4 * SEC);
    let ran = Cell::new(false);
    let got = future::block_on(b.call(async {
        ran.set(true);
        Ok::<(), ()>(())
    }));
    assert!(!ran.get(), "the call must not run");
    assert_eq!(
        got,
        Err(CallError::Rejected(Rejection::Open {
            retry_after: 6 * SEC
        }))
    );
    assert_eq!(got.unwrap_err().retry_after(), Some(6 * SEC));
    assert_eq!(b.metrics().rejected, 1);
}

#[test]
fn call_dropped_while_pending_records_nothing_and_frees_a_probe_slot() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", cfg(small().half_open_calls(1)), &clock);
    let pending_once = || async {
        future::yield_now().await;
        Ok::<u8, ()>(1)
    };

    // Closed: nothing recorded.
    let mut call = Box::pin(b.call(pending_once()));
    assert_eq!(future::block_on(future::poll_once(call.as_mut())), None);
    drop(call);
    assert_eq!(counts(&b), (0, 0, 0));

    // Half-open: the probe slot comes back.
    fail(&b, 2);
    clock.advance(10 * SEC);
    let mut call = Box::pin(b.call(pending_once()));
    assert_eq!(future::block_on(future::poll_once(call.as_mut())), None);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    drop(call);
    assert_eq!(counts(&b), (0, 0, 0));
    assert_eq!(b.metrics().stale, 0);
    let probe = b.try_acquire().expect("the dropped call's slot");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

async fn explode() -> Result<u8, ()> {
    panic!("the call panicked")
}

#[test]
fn panicking_call_records_a_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(4).minimum_calls(4));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", config, &clock);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| future::block_on(b.call(explode()))));
    assert!(unwound.is_err());
    assert_eq!(counts(&b), (1, 1, 0));
}

// ---- metrics -------------------------------------------------------------------

#[test]
fn metrics_rates_are_none_until_minimum_calls_then_exact() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(3)
        .slow_call_duration(10 * MS));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", config, &clock);
    let rates = |b: &CircuitBreaker<&ManualClock, 4>| {
        let m = b.metrics();
        (m.failure_rate, m.slow_call_rate)
    };
    assert_eq!(rates(&b), (None, None));
    timed(&b, &clock, MS, Outcome::Success);
    timed(&b, &clock, 20 * MS, Outcome::Failure);
    assert_eq!(rates(&b), (None, None));
    timed(&b, &clock, MS, Outcome::Success);
    let third = 100.0_f32 / 3.0;
    assert_eq!(rates(&b), (Some(third), Some(third)));
    timed(&b, &clock, 20 * MS, Outcome::Success);
    assert_eq!(rates(&b), (Some(25.0), Some(50.0)));
    assert_eq!(counts(&b), (4, 1, 2));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn metrics_rejected_counts_every_rejection() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", cfg(small().half_open_calls(1)), &clock);
    fail(&b, 2);
    assert_eq!(b.metrics().rejected, 0, "admitted calls are not rejections");
    open_hint(&b);
    open_hint(&b);
    let by_call = future::block_on(b.call(async { Ok::<(), ()>(()) }));
    assert!(by_call.unwrap_err().is_rejected());
    assert_eq!(b.metrics().rejected, 3);
    clock.advance(10 * SEC);
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    assert_eq!(b.metrics().rejected, 4);
    probe.ignore();
    b.force_open();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    b.reset();
    // Over the breaker's life: a reset keeps it.
    assert_eq!(b.metrics().rejected, 5);
}

#[test]
fn metrics_last_transition_is_none_then_the_time_of_the_last_one() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", cfg(small()), &clock);
    succeed(&b, 1);
    clock.advance(5 * MS);
    assert_eq!(b.metrics().last_transition, None);
    fail(&b, 1); // 1 of 2: trips at 5 ms
    assert_eq!(b.metrics().last_transition, Some(at(5 * MS)));
    clock.advance(10 * SEC - US);
    assert_eq!(b.metrics().last_transition, Some(at(5 * MS)));
    // Half-open by the clock since the end of the wait, 10.005 s.
    clock.advance(3 * MS + US);
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 5 * MS)));
    succeed(&b, 1); // the probe begins an episode at 10.008 s
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 8 * MS)));
    clock.advance(2 * MS);
    b.reset();
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 10 * MS)));
}

// ---- the listener --------------------------------------------------------------

#[test]
fn listener_sees_every_transition_exactly_once() {
    let clock = ManualClock::new();
    let log: RefCell<Vec<Transition>> = RefCell::new(Vec::new());
    let config = cfg(builder()
        .window_size(2)
        .minimum_calls(2)
        .open_duration(10 * MS)
        .half_open_calls(1)
        .max_half_open_wait(5 * MS));
    let b = CircuitBreaker::<_, 2, _>::with_listener("db", config, &clock, |t: &Transition| {
        log.borrow_mut().push(*t)
    });
    use State::*;
    clock.advance(MS);
    fail(&b, 2); // Closed -> Open at 1 ms
    clock.advance(10 * MS);
    let p = b.try_acquire().unwrap(); // Open -> HalfOpen at 11 ms
    clock.advance(MS);
    p.success(); // HalfOpen -> Closed at 12 ms
    clock.advance(MS);
    fail(&b, 2); // Closed -> Open at 13 ms
    clock.advance(10 * MS);
    let p = b.try_acquire().unwrap(); // Open -> HalfOpen at 23 ms
    clock.advance(MS);
    p.failure(); // HalfOpen -> Open at 24 ms
    clock.advance(10 * MS);
    let stuck = b.try_acquire().unwrap(); // Open -> HalfOpen at 34 ms
    clock.advance(6 * MS);
    assert_eq!(b.state(), Open); // reading tells nobody
    assert_eq!(open_hint(&b), 9 * MS); // HalfOpen -> Open as of 39 ms
    drop(stuck);
    clock.advance(MS);
    b.reset(); // Open -> Closed at 41 ms
    clock.advance(MS);
    assert!(b.force_open()); // Closed -> ForcedOpen at 42 ms
    assert!(!b.force_open());
    clock.advance(MS);
    assert!(b.disable()); // ForcedOpen -> Disabled at 43 ms
    clock.advance(MS);
    b.reset(); // Disabled -> Closed at 44 ms

    let expected = [
        (Closed, Open, 1),
        (Open, HalfOpen, 11),
        (HalfOpen, Closed, 12),
        (Closed, Open, 13),
        (Open, HalfOpen, 23),
        (HalfOpen, Open, 24),
        (Open, HalfOpen, 34),
        (HalfOpen, Open, 39),
        (Open, Closed, 41),
        (Closed, ForcedOpen, 42),
        (ForcedOpen, Disabled, 43),
        (Disabled, Closed, 44),
    ]
    .map(|(from, to, ms)| Transition {
        name: "db",
        from,
        to,
        at: at(ms * MS),
        // The two trips say what the count window held: 2 of 2 failed.
        tripped: (from == Closed && to == Open).then_some(Tripped {
            window: BreakerWindow::Count,
            calls: 2,
            failures: 2,
            slow: 0,
        }),
    });
    assert_eq!(*log.borrow(), expected);
}

// ---- config --------------------------------------------------------------------

#[test]
fn config_errors_name_the_field_the_value_and_the_range() {
    use BreakerConfigError as E;
    use BreakerField as F;
    let th = "percent in (1, 100], to a hundredth (30 means 30 %)";
    let cases: Vec<(BreakerConfigBuilder, E, String)> = vec![
        (
            builder().window_size(0),
            E::Zero {
                field: F::WindowSize,
            },
            "window_size is 0; allowed: 1 to 1023, and at most the breaker's capacity N".into(),
        ),
        (
            builder().window_size(1_024),
            E::TooLarge {
                field: F::WindowSize,
                value: 1_024,
                max: 1_023,
            },
            "window_size is 1024; allowed: 1 to 1023".into(),
        ),
        (
            builder().minimum_calls(0),
            E::Zero {
                field: F::MinimumCalls,
            },
            "minimum_calls is 0; allowed: 1 to window_size".into(),
        ),
        (
            builder().window_size(5).minimum_calls(6),
            E::MinimumCallsAboveWindow {
                minimum_calls: 6,
                window_size: 5,
            },
            "minimum_calls is 6; allowed: 1 to window_size (5)".into(),
        ),
        (
            builder().failure_rate_threshold(0.0),
            E::ThresholdOutOfRange {
                field: F::FailureRateThreshold,
                value: 0.0,
            },
            format!("failure_rate_threshold is 0; allowed: {th}"),
        ),
        (
            builder().failure_rate_threshold(100.5),
            E::ThresholdOutOfRange {
                field: F::FailureRateThreshold,
                value: 100.5,
            },
            format!("failure_rate_threshold is 100.5; allowed: {th}"),
        ),
        (
            builder().failure_rate_threshold(-50.0),
            E::ThresholdOutOfRange {
                field: F::FailureRateThreshold,
                value: -50.0,
            },
            format!("failure_rate_threshold is -50; allowed: {th}"),
        ),
        (
            builder().failure_rate_threshold(0.5),
            E::ThresholdLooksLikeFraction {
                field: F::FailureRateThreshold,
                value: 0.5,
            },
            format!("failure_rate_threshold is 0.5, a fraction (write 50 for 50 %); allowed: {th}"),
        ),
        (
            builder().failure_rate_threshold(1.0),
            E::ThresholdLooksLikeFraction {
                field: F::FailureRateThreshold,
                value: 1.0,
            },
            format!("failure_rate_threshold is 1, a fraction (write 100 for 100 %); allowed: {th}"),
        ),
        (
            builder().slow_call_rate_threshold(0.5),
            E::ThresholdLooksLikeFraction {
                field: F::SlowCallRateThreshold,
                value: 0.5,
            },
            format!(
                "slow_call_rate_threshold is 0.5, a fraction (write 50 for 50 %); allowed: {th}"
            ),
        ),
        (
            builder().open_duration(Duration::ZERO),
            E::Zero {
                field: F::OpenDuration,
            },
            "open_duration is 0; allowed: above zero, up to ".into(),
        ),
        (
            builder().slow_call_duration(Duration::ZERO),
            E::Zero {
                field: F::SlowCallDuration,
            },
            "slow_call_duration is 0; allowed: above zero, up to ".into(),
        ),
        (
            builder().max_half_open_wait(Duration::ZERO),
            E::Zero {
                field: F::MaxHalfOpenWait,
            },
            "max_half_open_wait is 0; allowed: above zero, up to ".into(),
        ),
        (
            builder().half_open_calls(0),
            E::Zero {
                field: F::HalfOpenCalls,
            },
            "half_open_calls is 0; allowed: 1 to 255".into(),
        ),
        (
            builder().half_open_calls(256),
            E::TooLarge {
                field: F::HalfOpenCalls,
                value: 256,
                max: 255,
            },
            "half_open_calls is 256; allowed: 1 to 255".into(),
        ),
    ];
    for (b, expected, message) in cases {
        let err = b.build().expect_err("a bad config must be refused");
        assert_eq!(err, expected);
        assert_eq!(err.field(), expected.field());
        assert_eq!(err.field(), err.field().name(), "the field equals its name");
        let shown = err.to_string();
        assert!(shown.starts_with(&message), "{shown:?} is not {message:?}");
        // The field the error names is the one its message is about.
        assert!(
            shown.starts_with(&format!("{} is ", err.field().name())),
            "{shown:?} is not about {}",
            err.field()
        );
        // What a `const` config panics with: the same message.
        let panicked = panic::catch_unwind(|| err.panic()).unwrap_err();
        let panicked = panicked
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert_eq!(panicked, format!("breaker config: {shown}"));
    }
    // NaN, which equals nothing, not even itself.
    for set in [
        BreakerConfigBuilder::failure_rate_threshold as fn(BreakerConfigBuilder, f32) -> _,
        BreakerConfigBuilder::slow_call_rate_threshold,
    ] {
        let err = set(builder(), f32::NAN).build().unwrap_err();
        assert!(matches!(err, E::ThresholdOutOfRange { value, .. } if value.is_nan()));
        assert!(err
            .to_string()
            .contains(" is NaN; allowed: percent in (1, 100]"));
    }
}

#[test]
fn field_names_are_the_builders() {
    use BreakerField as F;
    let all = [
        (F::WindowSize, "window_size"),
        (F::MinimumCalls, "minimum_calls"),
        (F::FailureRateThreshold, "failure_rate_threshold"),
        (F::SlowCallRateThreshold, "slow_call_rate_threshold"),
        (F::SlowCallDuration, "slow_call_duration"),
        (F::OpenDuration, "open_duration"),
        (F::HalfOpenCalls, "half_open_calls"),
        (F::MaxHalfOpenWait, "max_half_open_wait"),
    ];
    for (field, name) in all {
        assert_eq!((field.name(), field.to_string()), (name, name.to_string()));
        assert_eq!(field, name);
        assert!(all.iter().filter(|(f, _)| *f == field).count() == 1);
    }
}

/// One rule for both thresholds: kept to a hundredth of a percent, rounded
/// to the nearest, and the kept value must be in (1, 100].
#[test]
fn threshold_rule_at_every_boundary() {
    use BreakerConfigError as E;
    let accepted: [(f32, f32); 8] = [
        (1.01, 1.01),
        (1.006, 1.01),
        (1.5, 1.5),
        (30.0, 30.0),
        (33.333, 33.33),
        (99.999, 100.0),
        (100.0, 100.0),
        (50.004, 50.0),
    ];
    let fraction = [f32::MIN_POSITIVE, 0.01, 0.3, 0.5, 0.999, 1.0];
    let out_of_range = [
        0.0,
        -0.0,
        -1.0,
        -50.0,
        1.001,
        1.004,
        100.001,
        100.01,
        100.5,
        101.0,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    type Set = fn(BreakerConfigBuilder, f32) -> BreakerConfigBuilder;
    type Get = fn(&BreakerConfig) -> f32;
    let thresholds: [(Set, Get); 2] = [
        (
            BreakerConfigBuilder::failure_rate_threshold,
            BreakerConfig::failure_rate_threshold,
        ),
        (
            BreakerConfigBuilder::slow_call_rate_threshold,
            BreakerConfig::slow_call_rate_threshold,
        ),
    ];
    for (set, get) in thresholds {
        for (p, kept) in accepted {
            let c = set(builder(), p)
                .build()
                .unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(get(&c), kept, "{p} is kept as {kept}");
            // What is kept is accepted when given directly, as itself.
            assert_eq!(set(builder(), kept).build(), Ok(c), "{p} and {kept}");
        }
        for p in fraction {
            let err = set(builder(), p).build().unwrap_err();
            assert!(
                matches!(err, E::ThresholdLooksLikeFraction { value, .. } if value == p),
                "{p}: {err:?}"
            );
        }
        for p in out_of_range {
            let err = set(builder(), p).build().unwrap_err();
            assert!(
                matches!(err, E::ThresholdOutOfRange { value, .. } if value == p),
                "{p}: {err:?}"
            );
        }
    }
}

#[test]
fn optional_durations_can_be_turned_off_again() {
    let base = builder()
        .slow_call_duration(2 * SEC)
        .max_half_open_wait(5 * SEC);
    let on = cfg(base);
    assert_eq!(
        (on.slow_call_duration(), on.max_half_open_wait()),
        (Some(2 * SEC), Some(5 * SEC))
    );
    let off = cfg(base.no_slow_call_duration().no_max_half_open_wait());
    assert_eq!(
        (off.slow_call_duration(), off.max_half_open_wait()),
        (None, None)
    );
    assert_eq!(off, BreakerConfig::DEFAULT);
    // And on again.
    assert_eq!(
        cfg(base.no_slow_call_duration().slow_call_duration(2 * SEC)),
        on
    );

    // Off means off: a slow call is not slow, a stuck probe does not expire.
    let clock = ManualClock::new();
    let config = cfg(small()
        .slow_call_duration(MS)
        .max_half_open_wait(SEC)
        .no_slow_call_duration()
        .no_max_half_open_wait());
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("d", config, &clock);
    timed(&b, &clock, SEC, Outcome::Success);
    assert_eq!(b.metrics().slow_calls, 0);
    fail(&b, 1); // 1 of 2: open
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap();
    clock.advance(60 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    stuck.success();
    assert_eq!(b.metrics().stale, 0);
}

/// `half_open_calls` is not capped by `window_size`: the probes are counted
/// apart from the window.
#[test]
fn half_open_calls_above_the_window_size_work() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(2)
        .minimum_calls(2)
        .open_duration(SEC)
        .half_open_calls(5));
    let b: CircuitBreaker<_, 2> = CircuitBreaker::new("p", config, &clock);
    fail(&b, 2);
    clock.advance(SEC);
    let probes: Vec<_> = (0..5).map(|_| b.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    for p in probes {
        assert_eq!(b.state(), State::HalfOpen, "closes only after all five");
        p.success();
    }
    assert_eq!(b.state(), State::Closed);
    // And one failed probe of five reopens.
    fail(&b, 2);
    clock.advance(SEC);
    succeed(&b, 4);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.metrics().calls, 2, "the window shows the last two probes");
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn config_refuses_durations_the_timestamps_cannot_hold() {
    for (field, set) in [
        (
            "open_duration",
            BreakerConfigBuilder::open_duration
                as fn(BreakerConfigBuilder, Duration) -> BreakerConfigBuilder,
        ),
        (
            "slow_call_duration",
            BreakerConfigBuilder::slow_call_duration,
        ),
        (
            "max_half_open_wait",
            BreakerConfigBuilder::max_half_open_wait,
        ),
    ] {
        let err = set(builder(), Duration::MAX).build().unwrap_err();
        let BreakerConfigError::DurationTooLong {
            field: named,
            value,
            max,
        } = err
        else {
            panic!("{field}: expected DurationTooLong, got {err:?}");
        };
        assert_eq!((named, err.field()), (named, named));
        assert_eq!(named, field);
        assert_eq!(value, Duration::MAX);
        assert!(err.to_string().starts_with(&format!("{field} is ")));
        let shown_max = if max.subsec_nanos() == 0 {
            format!("{} s", max.as_secs())
        } else {
            format!("{} ns", max.as_nanos())
        };
        assert!(err
            .to_string()
            .ends_with(&format!("; allowed: above zero, up to {shown_max}")));
        // The limit itself is accepted, a nanosecond more is not.
        assert!(set(builder(), max).build().is_ok(), "{field} at {max:?}");
        let over = max + Duration::from_nanos(1);
        assert_eq!(
            set(builder(), over).build(),
            Err(BreakerConfigError::DurationTooLong {
                field: named,
                value: over,
                max
            })
        );
    }
}

#[test]
fn config_accepts_the_boundaries() {
    let wide = cfg(builder()
        .window_size(1_023)
        .minimum_calls(1_023)
        .failure_rate_threshold(100.0)
        .slow_call_rate_threshold(1.01)
        .half_open_calls(255));
    assert_eq!(wide.window_size(), 1_023);
    assert_eq!(wide.minimum_calls(), 1_023);
    assert_eq!(wide.failure_rate_threshold(), 100.0);
    assert_eq!(wide.slow_call_rate_threshold(), 1.01);
    assert_eq!(wide.half_open_calls(), 255);
    let one = cfg(builder().window_size(1).minimum_calls(1).half_open_calls(1));
    assert_eq!((one.window_size(), one.minimum_calls()), (1, 1));
}

#[test]
fn try_new_refuses_a_window_above_capacity() {
    let clock = ManualClock::new();
    let err = CircuitBreaker::<_, 16>::try_new("x", BreakerConfig::DEFAULT, &clock).unwrap_err();
    assert_eq!(
        err,
        BreakerConfigError::WindowAboveCapacity {
            window_size: 50,
            capacity: 16
        }
    );
    assert_eq!(err.field(), "window_size");
    assert!(err.to_string().contains("window_size"));
    let err = CircuitBreaker::<_, 49, _>::try_with_listener(
        "x",
        BreakerConfig::DEFAULT,
        &clock,
        |_: &Transition| {},
    )
    .unwrap_err();
    assert_eq!(
        err,
        BreakerConfigError::WindowAboveCapacity {
            window_size: 50,
            capacity: 49
        }
    );
    let fits = CircuitBreaker::<_, 50>::try_new("x", BreakerConfig::DEFAULT, &clock).unwrap();
    assert_eq!(fits.config(), &BreakerConfig::DEFAULT);
}

#[test]
#[should_panic(expected = "window_size is above the breaker's capacity N")]
fn new_panics_on_a_window_above_capacity() {
    let clock = ManualClock::new();
    let _ = CircuitBreaker::<_, 16>::new("x", BreakerConfig::DEFAULT, &clock);
}

#[test]
fn defaults_are_the_documented_ones() {
    let d = BreakerConfig::DEFAULT;
    assert_eq!(d, cfg(builder()));
    assert_eq!(d, BreakerConfig::default());
    assert_eq!(d, cfg(BreakerConfigBuilder::default()));
    assert_eq!(d.window_size(), 50);
    assert_eq!(d.minimum_calls(), 10);
    assert_eq!(d.failure_rate_threshold(), 50.0);
    assert_eq!(d.open_duration(), 30 * SEC);
    assert_eq!(d.half_open_calls(), 3);
    assert_eq!(d.slow_call_duration(), None);
    assert_eq!(d.slow_call_rate_threshold(), 100.0);
    assert_eq!(d.max_half_open_wait(), None);

    let c = BreakerConfig::CRITICAL;
    assert_eq!(c.failure_rate_threshold(), 30.0);
    assert_eq!(c, cfg(builder().failure_rate_threshold(30.0)));

    // And they behave so: 10 failures trip, 30 s open, 3 probes.
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 50> = CircuitBreaker::new("d", d, &clock);
    fail(&b, 9);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 1);
    assert_eq!(open_hint(&b), 30 * SEC);
    clock.advance(30 * SEC);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    probes.into_iter().for_each(|p| p.success());
    assert_eq!(b.state(), State::Closed);
}

// ---- static and const ----------------------------------------------------------

const UPSTREAM_CONFIG: BreakerConfig = match BreakerConfig::builder()
    .window_size(4)
    .minimum_calls(4)
    .open_duration(Duration::from_secs(3600))
    .half_open_calls(1)
    .build()
{
    Ok(c) => c,
    Err(e) => e.panic(),
};

static UPSTREAM: CircuitBreaker<StdClock, 8> =
    CircuitBreaker::new("upstream", UPSTREAM_CONFIG, StdClock::new());

#[test]
fn const_config_built_with_match_on_build() {
    assert_eq!(UPSTREAM_CONFIG.window_size(), 4);
    assert_eq!(UPSTREAM_CONFIG.minimum_calls(), 4);
    assert_eq!(UPSTREAM_CONFIG.open_duration(), Duration::from_secs(3600));
    assert_eq!(UPSTREAM_CONFIG.half_open_calls(), 1);
    assert_eq!(UPSTREAM_CONFIG.failure_rate_threshold(), 50.0);
}

#[test]
fn static_breaker_on_std_clock() {
    assert_eq!(UPSTREAM.name(), "upstream");
    assert_eq!(UPSTREAM.config(), &UPSTREAM_CONFIG);
    assert_eq!(UPSTREAM.state(), State::Closed);
    succeed(&UPSTREAM, 2);
    fail(&UPSTREAM, 2);
    assert_eq!(UPSTREAM.state(), State::Open);
    // Real time: only bounds (the test does not take an hour).
    let hint = open_hint(&UPSTREAM);
    assert!(
        hint > Duration::ZERO && hint <= Duration::from_secs(3600),
        "{hint:?}"
    );
    assert!(UPSTREAM.metrics().last_transition.is_some());
    UPSTREAM.reset();
    assert_eq!(UPSTREAM.state(), State::Closed);
    assert_eq!(UPSTREAM.metrics().calls, 0);
}
