//! Config: errors naming the field, boundaries, defaults, and a `static`
//! breaker.

use super::*;

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
