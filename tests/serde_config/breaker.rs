//! `BreakerConfig`: every key, thresholds in percent, the field named.

use super::*;

#[test]
fn an_empty_breaker_map_is_the_default() {
    assert_eq!(breaker(vec![]), Ok(BreakerConfig::DEFAULT));
    // An explicit null keeps the default too.
    assert_eq!(
        breaker(vec![("open_duration", V::Null)]),
        Ok(BreakerConfig::DEFAULT)
    );
}

#[test]
fn every_breaker_field_deserializes() {
    let c = breaker(vec![
        ("window_size", V::U(20)),
        ("min_calls", V::U(5)),
        ("failure_rate", V::F(30.0)),
        ("slow_call_rate", V::U(80)),
        ("slow_call_duration", V::F(2.5)),
        ("open_duration", V::S("45s")),
        ("half_open_calls", V::U(2)),
        ("max_half_open_wait", V::S("1m")),
    ])
    .unwrap();
    assert_eq!(c.window_size(), 20);
    assert_eq!(c.minimum_calls(), 5);
    assert_eq!(c.failure_rate_threshold(), 30.0);
    assert_eq!(c.slow_call_rate_threshold(), 80.0);
    assert_eq!(c.slow_call_duration(), Some(MS(2500)));
    assert_eq!(c.open_duration(), S(45));
    assert_eq!(c.half_open_calls(), 2);
    assert_eq!(c.max_half_open_wait(), Some(S(60)));
    let built = BreakerConfig::builder()
        .window_size(20)
        .minimum_calls(5)
        .failure_rate_threshold(30.0)
        .slow_call_rate_threshold(80.0)
        .slow_call_duration(MS(2500))
        .open_duration(S(45))
        .half_open_calls(2)
        .max_half_open_wait(S(60))
        .build()
        .unwrap();
    assert_eq!(c, built);
}

#[test]
fn breaker_aliases_follow_the_builder_and_common_setting_names() {
    let c = breaker(vec![
        ("minimum_calls", V::U(7)),
        ("failure_rate_threshold", V::U(40)),
        ("slow_call_rate_threshold", V::U(60)),
        ("slow_threshold", V::U(15)),
    ])
    .unwrap();
    assert_eq!(c.minimum_calls(), 7);
    assert_eq!(c.failure_rate_threshold(), 40.0);
    assert_eq!(c.slow_call_rate_threshold(), 60.0);
    assert_eq!(c.slow_call_duration(), Some(S(15)));
}

#[test]
fn a_fraction_is_refused_with_the_percent_hint() {
    for v in [V::F(0.5), V::F(0.3), V::F(1.0), V::U(1), V::S("0.5")] {
        let err = breaker(vec![("failure_rate", v.clone())]);
        assert_names(err, "failure_rate", "a fraction (write ");
        let err = breaker(vec![("slow_call_rate", v)]);
        assert_names(err, "slow_call_rate", "a fraction (write ");
    }
    // A fraction where percent is meant, from the environment: refused.
    let err = envy::prefixed("CLIENT_SBER__").from_iter::<_, PolicyConfig>(env(&[
        ("CLIENT_SBER__MAX_CONCURRENT", "16"),
        ("CLIENT_SBER__CB_FAILURE_RATE", "0.5"),
    ]));
    assert_names(
        err.map_err(|e| e.to_string()),
        "cb_failure_rate",
        "0.5, a fraction (write 50 for 50 %)",
    );
    // Percent with a sign is fine.
    let c = breaker(vec![("failure_rate", V::S("30%"))]).unwrap();
    assert_eq!(c.failure_rate_threshold(), 30.0);
}

#[test]
fn out_of_range_values_are_refused_naming_the_field() {
    assert_names(
        breaker(vec![("failure_rate", V::U(150))]),
        "failure_rate",
        "is 150; allowed: percent in (1, 100]",
    );
    assert_names(
        breaker(vec![("failure_rate", V::I(-10))]),
        "failure_rate",
        "is -10; allowed: percent in (1, 100]",
    );
    assert_names(
        breaker(vec![("window_size", V::U(0))]),
        "window_size",
        "window_size is 0; allowed: 1 to 1023",
    );
    assert_names(
        breaker(vec![("window_size", V::U(5000))]),
        "window_size",
        "window_size is 5000; allowed: 1 to 1023",
    );
    assert_names(
        breaker(vec![("window_size", V::U(10)), ("min_calls", V::U(20))]),
        "min_calls",
        "minimum_calls is 20; allowed: 1 to window_size (10)",
    );
    assert_names(
        breaker(vec![("half_open_calls", V::U(300))]),
        "half_open_calls",
        "half_open_calls is 300; allowed: 1 to 255",
    );
    assert_names(
        breaker(vec![("open_duration", V::U(0))]),
        "open_duration",
        "open_duration is 0; allowed: above zero",
    );
    assert_names(
        breaker(vec![("window_size", V::F(2.5))]),
        "window_size",
        "whole number",
    );
    assert_names(
        breaker(vec![("window_size", V::I(-4))]),
        "window_size",
        "negative",
    );
    assert_names(
        breaker(vec![("half_open_calls", V::S("three"))]),
        "half_open_calls",
        "not a number",
    );
    assert_names(
        breaker(vec![("window_size", V::B(true))]),
        "window_size",
        "invalid type",
    );
}

#[test]
fn unknown_breaker_fields_are_refused() {
    assert_names(
        breaker(vec![("failure_rat", V::U(30))]),
        "failure_rat",
        "unknown field",
    );
    // The flat policy names are not breaker names.
    assert_names(
        breaker(vec![("cb_failure_rate", V::U(30))]),
        "cb_failure_rate",
        "unknown field",
    );
}

#[test]
fn durations_in_each_form() {
    let cases = [
        (V::U(30), S(30)),
        (V::F(0.25), MS(250)),
        (V::F(30.0), S(30)),
        (V::S("30"), S(30)),
        (V::S("0.25"), MS(250)),
        (V::S("250ms"), MS(250)),
        (V::S("30s"), S(30)),
        (V::S("2m"), S(120)),
        (V::S("1h"), S(3600)),
        (V::S("1.5s"), MS(1500)),
        (V::S(" 500 us "), Duration::from_micros(500)),
    ];
    for (v, want) in cases {
        let c = breaker(vec![("open_duration", v.clone())]).unwrap();
        assert_eq!(c.open_duration(), want, "{v:?}");
    }
}

#[test]
fn bad_durations_are_refused_naming_the_field() {
    let cases = [
        (V::I(-1), "must not be negative"),
        (V::F(-0.5), "must not be negative"),
        (V::F(f64::NAN), "must be a finite number"),
        (V::F(f64::INFINITY), "must be a finite number"),
        (V::F(1e30), "too large"),
        (V::S("-1s"), "must not be negative"),
        (V::S("30x"), "unknown unit"),
        (V::S("abc"), "not a number"),
        (V::S("NaN"), "not a number"),
        (V::S("1.2.3s"), "not a number"),
        (V::B(true), "a duration"),
    ];
    for (v, what) in cases {
        assert_names(
            breaker(vec![("open_duration", v.clone())]),
            "open_duration",
            what,
        );
        assert_names(
            policy(vec![("max_concurrent", V::U(4)), ("cb_slow_threshold", v)]),
            "cb_slow_call_duration",
            what,
        );
    }
    // The value itself is shown.
    assert_names(
        breaker(vec![("open_duration", V::S("30x"))]),
        "open_duration",
        "\"30x\"",
    );
}
