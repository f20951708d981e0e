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
        err.contains("window") && err.contains("`count` or `consecutive`"),
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
