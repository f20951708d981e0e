//! The count window: how it fills and evicts, when rates are evaluated
//! against the threshold, and slow calls.

use super::*;

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
