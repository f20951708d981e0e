//! Generations (an outcome of an earlier episode is stale) and the window
//! each transition starts.

use super::*;

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
