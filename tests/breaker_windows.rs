//! The breaker's other windows: consecutive failures and the sliding time
//! window, on a `ManualClock`. Cases ported from other breakers name their
//! source (file and test) above them.

use std::cell::RefCell;
use std::time::Duration;

use watertight::breaker::{BreakerField, BreakerWindow, State, Transition, Tripped};
use watertight::clock::{Clock, ManualClock};
use watertight::{BreakerConfig, BreakerConfigError, CircuitBreaker, Outcome, Rejection};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

#[track_caller]
fn succeed<C: Clock, const N: usize, H: watertight::breaker::OnTransition, W>(
    b: &CircuitBreaker<C, N, H, W>,
    n: usize,
) where
    W: watertight::breaker::WindowStorage,
{
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").success();
    }
}

#[track_caller]
fn fail<C: Clock, const N: usize, H: watertight::breaker::OnTransition, W>(
    b: &CircuitBreaker<C, N, H, W>,
    n: usize,
) where
    W: watertight::breaker::WindowStorage,
{
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").failure();
    }
}

// ---- consecutive failures ----------------------------------------------------

/// gobreaker's default breaker (`ReadyToTrip`: more than 5 consecutive
/// failures, `Timeout` 60 s, `MaxRequests` 1), step by step.
/// Ported from sony/gobreaker, `gobreaker_test.go`, `TestDefaultCircuitBreaker`.
#[test]
fn gobreaker_default_circuit_breaker() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .consecutive_failures(6) // "more than 5"
        .open_duration(60 * SEC)
        .half_open_calls(1)
        .build()
        .unwrap();
    let cb: CircuitBreaker<_, 1> = CircuitBreaker::new("", config, &clock);
    fail(&cb, 5);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.metrics().failed_calls, 5); // ConsecutiveFailures 5
    succeed(&cb, 1);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.metrics().failed_calls, 0); // a success resets the run
    fail(&cb, 1);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.metrics().failed_calls, 1);
    // StateClosed to StateOpen: 6 consecutive failures.
    fail(&cb, 5);
    assert_eq!(cb.state(), State::Open);
    assert!(matches!(cb.try_acquire(), Err(Rejection::Open { .. })));
    clock.advance(59 * SEC);
    assert_eq!(cb.state(), State::Open);
    // StateOpen to StateHalfOpen: over the timeout.
    clock.advance(SEC);
    assert_eq!(cb.state(), State::HalfOpen);
    // StateHalfOpen to StateOpen: the probe fails.
    fail(&cb, 1);
    assert_eq!(cb.state(), State::Open);
    // StateOpen to StateHalfOpen.
    clock.advance(60 * SEC);
    assert_eq!(cb.state(), State::HalfOpen);
    // StateHalfOpen to StateClosed: the probe succeeds; the run is empty.
    succeed(&cb, 1);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.metrics().failed_calls, 0);
    // And it takes six in a row again to open.
    fail(&cb, 5);
    assert_eq!(cb.state(), State::Closed);
    fail(&cb, 1);
    assert_eq!(cb.state(), State::Open);
}

/// `(threshold, failures, breaks)`: one failure breaks a threshold of 1,
/// not of 2. Ported from App-vNext/Polly,
/// `test/Polly.Core.Tests/CircuitBreaker/Controller/ConsecutiveFailuresCircuitBehaviorTests.cs`,
/// `OnActionFailure_Ok`; and `OnActionSuccess_Ok` (a success in between
/// resets the count).
#[test]
fn polly_consecutive_failures_behavior() {
    for (threshold, failures, breaks) in [(1, 1, true), (2, 1, false), (2, 2, true), (3, 2, false)]
    {
        let clock = ManualClock::new();
        let config = BreakerConfig::builder()
            .consecutive_failures(threshold)
            .build()
            .unwrap();
        let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
        fail(&b, failures);
        assert_eq!(b.state() == State::Open, breaks, "{threshold} {failures}");
    }
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .consecutive_failures(2)
        .build()
        .unwrap();
    let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
    fail(&b, 1);
    succeed(&b, 1);
    fail(&b, 1);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn consecutive_slow_calls_count_as_failures_unless_told_not_to() {
    for (slow_is_failure, opens) in [(true, true), (false, false)] {
        let clock = ManualClock::new();
        let config = BreakerConfig::builder()
            .consecutive_failures(3)
            .slow_call_duration(10 * MS)
            .slow_calls_are_failures(slow_is_failure)
            .build()
            .unwrap();
        let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
        fail(&b, 2);
        let p = b.try_acquire().unwrap();
        clock.advance(11 * MS);
        p.success(); // slow
        assert_eq!(
            b.state() == State::Open,
            opens,
            "slow_is_failure {slow_is_failure}"
        );
        // A call just at the duration is not slow: it ends the run either way.
        if !opens {
            fail(&b, 2);
            let p = b.try_acquire().unwrap();
            clock.advance(10 * MS);
            p.success();
            fail(&b, 2);
            assert_eq!(b.state(), State::Closed);
        }
    }
}

#[test]
fn consecutive_probes_decide_as_the_count_windows_do() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .consecutive_failures(2)
        .half_open_calls(2)
        .open_duration(SEC)
        .build()
        .unwrap();
    let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
    fail(&b, 2);
    clock.advance(SEC);
    let (p1, p2) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p1.success();
    assert_eq!(b.state(), State::HalfOpen);
    p2.success();
    assert_eq!(b.state(), State::Closed);
    // One failure is not a run of two; the closed window starts empty.
    fail(&b, 1);
    assert_eq!(b.state(), State::Closed);
    // An ignored outcome neither lengthens nor ends the run.
    b.try_acquire().unwrap().record(Outcome::Ignored);
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn consecutive_trip_tells_the_listener_the_run() {
    let clock = ManualClock::new();
    let log: RefCell<Vec<Transition>> = RefCell::new(Vec::new());
    let config = BreakerConfig::builder()
        .consecutive_failures(4)
        .build()
        .unwrap();
    let b = CircuitBreaker::<_, 1, _>::with_listener("db", config, &clock, |t: &Transition| {
        log.borrow_mut().push(*t)
    });
    fail(&b, 4);
    let t = log.borrow()[0];
    assert_eq!((t.from, t.to), (State::Closed, State::Open));
    assert_eq!(
        t.tripped,
        Some(Tripped {
            window: BreakerWindow::Consecutive { failures: 4 },
            calls: 4,
            failures: 4,
            slow: 0
        })
    );
    // The frozen run stays in the metrics; no rate is reported.
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls, m.failure_rate), (4, 4, None));
    // Reopening from half-open is not the window's doing.
    clock.advance(30 * SEC);
    fail(&b, 1);
    assert_eq!(log.borrow()[2].tripped, None);
}

#[test]
fn consecutive_runs_longer_than_any_window_saturate() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .consecutive_failures(1023)
        .build()
        .unwrap();
    let b: CircuitBreaker<_, 1> = CircuitBreaker::new("x", config, &clock);
    fail(&b, 1022);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn consecutive_config_errors_name_the_field() {
    let err = BreakerConfig::builder()
        .consecutive_failures(0)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BreakerConfigError::Zero {
            field: BreakerField::ConsecutiveFailures
        }
    );
    assert_eq!(
        err.to_string(),
        "consecutive_failures is 0; allowed: 1 to 1023"
    );
    let err = BreakerConfig::builder()
        .consecutive_failures(1024)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "consecutive_failures");
    assert_eq!(
        err.to_string(),
        "consecutive_failures is 1024; allowed: 1 to 1023"
    );
    // The count window's sizes do not constrain it: a minimum above the
    // window size is fine, and any `N` holds it.
    let c = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(10)
        .consecutive_failures(3)
        .build()
        .unwrap();
    assert!(CircuitBreaker::<_, 1>::try_new("x", c, ManualClock::new()).is_ok());
}

#[cfg(feature = "alloc")]
#[test]
fn consecutive_on_the_heap_breaker() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .consecutive_failures(3)
        .build()
        .unwrap();
    let b = watertight::breaker::HeapBreaker::try_new("x", config, &clock).unwrap();
    fail(&b, 2);
    succeed(&b, 1);
    fail(&b, 3);
    assert_eq!(b.state(), State::Open);
}

// ---- config from the environment --------------------------------------------

#[cfg(feature = "serde")]
fn from_env<T: serde::de::DeserializeOwned>(
    prefix: &str,
    vars: &[(&str, &str)],
) -> Result<T, String> {
    let env = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    envy::prefixed(prefix)
        .from_iter(env)
        .map_err(|e| e.to_string())
}

#[cfg(feature = "serde")]
#[test]
fn consecutive_keys_from_the_environment() {
    let c: BreakerConfig = from_env(
        "CB_",
        &[
            ("CB_WINDOW", "consecutive"),
            ("CB_CONSECUTIVE_FAILURES", "7"),
        ],
    )
    .unwrap();
    assert_eq!(c.window(), BreakerWindow::Consecutive { failures: 7 });
    // Named without a count: 5 in a row.
    let c: BreakerConfig = from_env("CB_", &[("CB_WINDOW", "Consecutive")]).unwrap();
    assert_eq!(c.window(), BreakerWindow::Consecutive { failures: 5 });
    // The count alone implies the window.
    let c: BreakerConfig = from_env(
        "CB_",
        &[
            ("CB_CONSECUTIVE_FAILURES", "3"),
            ("CB_SLOW_CALLS_ARE_FAILURES", "false"),
        ],
    )
    .unwrap();
    assert_eq!(c.window(), BreakerWindow::Consecutive { failures: 3 });
    assert!(!c.slow_calls_are_failures());
    let c: BreakerConfig = from_env("CB_", &[("CB_WINDOW", "count")]).unwrap();
    assert_eq!(c.window(), BreakerWindow::Count);
    // Refusals name the key.
    let err = from_env::<BreakerConfig>("CB_", &[("CB_WINDOW", "sliding")]).unwrap_err();
    assert!(
        err.contains("window") && err.contains("`count`, `time` or `consecutive`"),
        "{err}"
    );
    let err = from_env::<BreakerConfig>("CB_", &[("CB_CONSECUTIVE_FAILURES", "0")]).unwrap_err();
    assert!(
        err.contains("`consecutive_failures`") && err.contains("1 to 1023"),
        "{err}"
    );
    let err = from_env::<BreakerConfig>(
        "CB_",
        &[("CB_WINDOW", "count"), ("CB_CONSECUTIVE_FAILURES", "3")],
    )
    .unwrap_err();
    assert!(err.contains("`consecutive_failures` is set"), "{err}");
}

#[cfg(feature = "serde")]
#[test]
fn consecutive_keys_flat_in_a_policy_config() {
    let p: watertight::PolicyConfig = from_env(
        "APP_",
        &[
            ("APP_MAX_CONCURRENT", "8"),
            ("APP_CB_WINDOW", "consecutive"),
            ("APP_CB_CONSECUTIVE_FAILURES", "4"),
        ],
    )
    .unwrap();
    assert_eq!(
        p.breaker().window(),
        BreakerWindow::Consecutive { failures: 4 }
    );
    let err = from_env::<watertight::PolicyConfig>(
        "APP_",
        &[
            ("APP_MAX_CONCURRENT", "8"),
            ("APP_CB_CONSECUTIVE_FAILURES", "2000"),
        ],
    )
    .unwrap_err();
    assert!(err.contains("`cb_consecutive_failures`"), "{err}");
}

// ---- the time window ----------------------------------------------------------

use watertight::breaker::TimeBreaker;

/// A time window of `secs` seconds in one-second buckets, as resilience4j
/// builds its `SlidingTimeWindowMetrics(secs)`, that never trips (the
/// minimum is out of reach), for counting.
fn counting(secs: u32) -> BreakerConfig {
    BreakerConfig::builder()
        .time_window(secs * SEC, secs as usize)
        .minimum_calls(1023)
        .slow_call_duration(1000 * MS)
        .build()
        .unwrap()
}

/// One call recorded `outcome` after `took`.
fn call<const B: usize>(
    b: &TimeBreaker<&ManualClock, B>,
    clock: &ManualClock,
    took: Duration,
    failed: bool,
) {
    let p = b.try_acquire().expect("admits");
    clock.advance(took);
    if failed {
        p.failure()
    } else {
        p.success()
    }
}

fn calls_failed<const B: usize>(b: &TimeBreaker<&ManualClock, B>) -> (usize, usize) {
    let m = b.metrics();
    (m.calls, m.failed_calls)
}

/// The window slides a second at a time; a call's outcome counts in the
/// bucket of the moment it is recorded. (resilience4j records its calls in
/// zero time; here each takes the 100 ms its test gives it, so the clock
/// runs 100 ms ahead of resilience4j's after each call, within the same
/// seconds.) Ported from resilience4j/resilience4j,
/// `resilience4j-core/src/test/java/io/github/resilience4j/core/metrics/SlidingTimeWindowMetricsTest.java`,
/// `testSlidingTimeWindowMetrics`.
#[test]
fn resilience4j_sliding_time_window_metrics() {
    let clock = ManualClock::new();
    let b: TimeBreaker<_, 5> = TimeBreaker::new("x", counting(5), &clock);
    let took = 100 * MS;
    call(&b, &clock, took, true); // 0.1 s
    assert_eq!(calls_failed(&b), (1, 1));
    call(&b, &clock, took, false); // 0.2 s
    assert_eq!(calls_failed(&b), (2, 1));
    call(&b, &clock, took, false); // 0.3 s
    assert_eq!(calls_failed(&b), (3, 1));
    clock.advance(SEC - took); // 1.2 s after
    call(&b, &clock, took, false);
    assert_eq!(calls_failed(&b), (4, 1));
    clock.advance(SEC - took);
    call(&b, &clock, took, false); // 2.3 s
    assert_eq!(calls_failed(&b), (5, 1));
    clock.advance(SEC - took);
    call(&b, &clock, took, true); // 3.3 s
    assert_eq!(calls_failed(&b), (6, 2));
    clock.advance(SEC - took);
    call(&b, &clock, took, false); // 4.3 s
    assert_eq!(calls_failed(&b), (7, 2));
    clock.advance(SEC - took);
    call(&b, &clock, took, false); // 5.3 s: second 0 has left
    assert_eq!(calls_failed(&b), (5, 1));
    clock.advance(SEC - took);
    call(&b, &clock, took, false); // 6.3 s: second 1 has left
    assert_eq!(calls_failed(&b), (5, 1));
    clock.advance(5 * SEC - took);
    call(&b, &clock, took, false); // 11.3 s: everything else has left
    assert_eq!(calls_failed(&b), (1, 0));
}

/// The window reads empty once its last bucket has left, without a call
/// (the snapshot moves with the clock). Ported from resilience4j,
/// `SlidingTimeWindowMetricsTest.java`, `shouldClearSlidingTimeWindowMetrics`.
#[test]
fn resilience4j_should_clear_sliding_time_window_metrics() {
    let clock = ManualClock::new();
    let b: TimeBreaker<_, 5> = TimeBreaker::new("x", counting(5), &clock);
    b.try_acquire().unwrap().failure();
    assert_eq!(calls_failed(&b), (1, 1));
    clock.advance(100 * MS);
    b.try_acquire().unwrap().success();
    assert_eq!(calls_failed(&b), (2, 1));
    clock.advance(700 * MS);
    b.try_acquire().unwrap().success();
    assert_eq!(calls_failed(&b), (3, 1));
    clock.advance(4 * SEC); // 4.8 s: all in the window
    assert_eq!(calls_failed(&b), (3, 1));
    clock.advance(SEC); // 5.8 s: all gone
    assert_eq!(calls_failed(&b), (0, 0));
    clock.advance(100 * MS);
    b.try_acquire().unwrap().success();
    assert_eq!(calls_failed(&b), (1, 0));
}

/// Slow successes and slow failures both count as slow; the slow-call rate
/// is theirs over all calls. Ported from resilience4j,
/// `SlidingTimeWindowMetricsTest.java`, `testSlowCallsPercentage`.
#[test]
fn resilience4j_slow_calls_percentage() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .time_window(5 * SEC, 5)
        .minimum_calls(5)
        .failure_rate_threshold(100.0)
        .slow_call_duration(1000 * MS)
        .build()
        .unwrap();
    let b: TimeBreaker<_, 5> = TimeBreaker::new("x", config, &clock);
    // resilience4j's 10 s calls are 1.001 s here, so the window still holds
    // them all.
    call(&b, &clock, 1001 * MS, false);
    call(&b, &clock, 1001 * MS, true);
    for _ in 0..3 {
        call(&b, &clock, 100 * MS, false);
    }
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (5, 1, 2));
    assert_eq!(m.slow_call_rate, Some(40.0));
    assert_eq!(m.failure_rate, Some(20.0));
    assert_eq!(m.state, State::Closed);
}

/// A time-based breaker opens on the failure rate once the minimum number of
/// calls is in the window, and an outage that has left the window no longer
/// counts. After resilience4j's
/// `resilience4j-circuitbreaker/src/test/java/io/github/resilience4j/circuitbreaker/internal/CircuitBreakerStateMachineTest.java`
/// time-based cases (`slidingWindowType(TIME_BASED)`, window 5 s, minimum 5
/// calls, 50 %).
#[test]
fn resilience4j_state_machine_time_based() {
    let clock = ManualClock::new();
    let log: RefCell<Vec<Transition>> = RefCell::new(Vec::new());
    let config = BreakerConfig::builder()
        .time_window(5 * SEC, 5)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(5 * SEC)
        .half_open_calls(2)
        .build()
        .unwrap();
    let b = TimeBreaker::<_, 5, _>::with_listener("x", config, &clock, |t: &Transition| {
        log.borrow_mut().push(*t)
    });
    // Four failures: below the minimum, closed.
    fail(&b, 4);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failure_rate, None);
    // Five seconds on, the failures have left: a fifth call finds one call.
    clock.advance(5 * SEC);
    fail(&b, 1);
    assert_eq!((b.state(), b.metrics().calls), (State::Closed, 1));
    // Two successes and two failures: 3 of 5 failed, 60 %: open.
    succeed(&b, 2);
    fail(&b, 1);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
    let t = log.borrow()[0];
    assert_eq!(
        t.tripped,
        Some(Tripped {
            window: BreakerWindow::Time {
                duration: 5 * SEC,
                buckets: 5
            },
            calls: 5,
            failures: 3,
            slow: 0
        })
    );
    // The open wait, then two probes close it, with an empty window.
    clock.advance(5 * SEC);
    succeed(&b, 2);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().calls, 0);
    // A success can trip it: it brings the window to the minimum.
    fail(&b, 4);
    succeed(&b, 1); // 4 of 5
    assert_eq!(b.state(), State::Open);
}

#[test]
fn time_window_config_errors_name_the_field() {
    use BreakerConfigError as E;
    let err = |b: watertight::breaker::BreakerConfigBuilder| b.build().unwrap_err();
    let e = err(BreakerConfig::builder().time_window(10 * SEC, 0));
    assert_eq!(
        e,
        E::Zero {
            field: BreakerField::WindowBuckets
        }
    );
    assert_eq!(e.to_string(), "window_buckets is 0; allowed: 1 to 64");
    let e = err(BreakerConfig::builder().time_window(10 * SEC, 65));
    assert_eq!(e.to_string(), "window_buckets is 65; allowed: 1 to 64");
    let e = err(BreakerConfig::builder().time_window(Duration::ZERO, 5));
    assert_eq!(e.field(), BreakerField::WindowDuration);
    let e = err(BreakerConfig::builder().time_window(10 * SEC, 3));
    assert_eq!(
        e,
        E::BucketsNotWhole {
            duration: 10 * SEC,
            buckets: 3
        }
    );
    assert_eq!(
        e.to_string(),
        "window_buckets is 3, which does not divide window_duration (10 s) into whole \
         milliseconds; allowed: a divisor of it in ms"
    );
    let e = err(BreakerConfig::builder().time_window(10 * MS, 20));
    assert_eq!(
        e,
        E::BucketTooShort {
            bucket: Duration::from_micros(500),
            min: MS
        }
    );
    assert_eq!(e.field(), "window_buckets");
    // Not bounded by the count window's size: a minimum above it is fine.
    let c = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(100)
        .time_window(60 * SEC, 60)
        .build()
        .unwrap();
    assert_eq!(c.window_size(), 0);
    assert_eq!(
        c.window(),
        BreakerWindow::Time {
            duration: 60 * SEC,
            buckets: 60
        }
    );
    // A breaker without room for the buckets refuses the config.
    let e = CircuitBreaker::<_, 64>::try_new("x", c, ManualClock::new()).unwrap_err();
    assert_eq!(
        e,
        E::BucketsAboveCapacity {
            buckets: 60,
            capacity: 0
        }
    );
    let e = TimeBreaker::<_, 8>::try_new("x", c, ManualClock::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "window_buckets is 60; allowed: 1 to the breaker's bucket capacity B (8)"
    );
    assert!(TimeBreaker::<_, 60>::try_new("x", c, ManualClock::new()).is_ok());
}

#[cfg(feature = "alloc")]
#[test]
fn time_window_on_the_heap_breaker() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .time_window(2 * SEC, 4)
        .minimum_calls(2)
        .build()
        .unwrap();
    let b = watertight::breaker::HeapBreaker::try_new("x", config, &clock).unwrap();
    fail(&b, 1);
    clock.advance(2 * SEC);
    fail(&b, 1);
    assert_eq!(b.state(), State::Closed);
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

#[cfg(feature = "serde")]
#[test]
fn time_window_keys_from_the_environment() {
    let c: BreakerConfig = from_env(
        "CB_",
        &[
            ("CB_WINDOW", "time"),
            ("CB_WINDOW_DURATION", "30s"),
            ("CB_WINDOW_BUCKETS", "6"),
            ("CB_MIN_CALLS", "20"),
        ],
    )
    .unwrap();
    assert_eq!(
        c.window(),
        BreakerWindow::Time {
            duration: 30 * SEC,
            buckets: 6
        }
    );
    assert_eq!(c.minimum_calls(), 20);
    // The duration alone implies the window; 10 buckets by default.
    let c: BreakerConfig = from_env("CB_", &[("CB_WINDOW_DURATION", "1m")]).unwrap();
    assert_eq!(
        c.window(),
        BreakerWindow::Time {
            duration: 60 * SEC,
            buckets: 10
        }
    );
    let err =
        from_env::<BreakerConfig>("CB_", &[("CB_WINDOW", "time"), ("CB_WINDOW_BUCKETS", "7")])
            .unwrap_err();
    assert!(
        err.contains("`window_buckets`") && err.contains("divide"),
        "{err}"
    );
    let err = from_env::<BreakerConfig>(
        "CB_",
        &[("CB_WINDOW", "consecutive"), ("CB_WINDOW_BUCKETS", "6")],
    )
    .unwrap_err();
    assert!(err.contains("`window_buckets` is set"), "{err}");
    let err = from_env::<watertight::PolicyConfig>(
        "APP_",
        &[
            ("APP_MAX_CONCURRENT", "8"),
            ("APP_CB_WINDOW", "time"),
            ("APP_CB_WINDOW_DURATION", "10s"),
            ("APP_CB_WINDOW_BUCKETS", "3"),
        ],
    )
    .unwrap_err();
    assert!(err.contains("`cb_window_buckets`"), "{err}");
}
