//! `ThrottleConfig`, and the throttle in a policy.

use super::*;

fn throttle(
    fields: Vec<(&'static str, V)>,
) -> Result<watertight::throttle::ThrottleConfig, String> {
    from(fields)
}

#[test]
fn every_throttle_field_deserializes() {
    use watertight::throttle::ThrottleConfig;
    let t = throttle(vec![
        ("k", V::F(1.5)),
        ("max_probability", V::S("0.5")),
        ("window", V::S("1m")),
    ])
    .unwrap();
    assert_eq!(
        (t.k(), t.max_probability(), t.window()),
        (1.5, 0.5, Duration::from_secs(60))
    );
    // Whole numbers, and the defaults.
    assert_eq!(throttle(vec![("k", V::U(3))]).unwrap().k(), 3.0);
    assert_eq!(throttle(vec![]), Ok(ThrottleConfig::DEFAULT));
    assert_eq!(
        throttle(vec![("window", V::Null)]),
        Ok(ThrottleConfig::DEFAULT)
    );
}

#[test]
fn bad_throttles_are_refused_naming_the_field() {
    assert_names(throttle(vec![("k", V::F(0.5))]), "k", "at least 1");
    assert_names(throttle(vec![("k", V::I(-2))]), "k", "at least 1");
    assert_names(throttle(vec![("k", V::S("two"))]), "k", "not a number");
    assert_names(throttle(vec![("k", V::S("NaN"))]), "k", "not a number");
    assert_names(throttle(vec![("k", V::S("inf"))]), "k", "finite");
    assert_names(
        throttle(vec![("max_probability", V::U(90))]),
        "max_probability",
        "[0, 1]",
    );
    assert_names(
        throttle(vec![("max_probability", V::F(-0.1))]),
        "max_probability",
        "[0, 1]",
    );
    assert_names(
        throttle(vec![("window", V::U(0))]),
        "window",
        "at least 20 ns",
    );
    assert_names(
        throttle(vec![("window", V::S("-1s"))]),
        "window",
        "negative",
    );
    let err = throttle(vec![("K", V::U(2))]).unwrap_err();
    assert!(err.contains("unknown field `K`"), "{err}");
}

#[test]
fn a_policy_throttle_flat_or_nested_but_not_both_and_covering_the_timeout() {
    use watertight::throttle::ThrottleConfig;
    let flat = policy(vec![
        ("max_concurrent", V::U(4)),
        ("throttle_k", V::F(1.5)),
        ("throttle_window", V::S("60s")),
    ])
    .unwrap();
    let expected = ThrottleConfig::builder()
        .k(1.5)
        .window(Duration::from_secs(60))
        .build()
        .unwrap();
    assert_eq!(flat.throttle(), Some(expected));
    let nested = policy(vec![
        ("max_concurrent", V::U(4)),
        (
            "throttle",
            V::Map(vec![("k", V::F(1.5)), ("window", V::U(60))]),
        ),
    ])
    .unwrap();
    assert_eq!(nested, flat);
    // An empty nested table: the defaults.
    let defaults = policy(vec![
        ("max_concurrent", V::U(4)),
        ("throttle", V::Map(vec![])),
    ])
    .unwrap();
    assert_eq!(defaults.throttle(), Some(ThrottleConfig::DEFAULT));
    assert_eq!(
        policy(vec![("max_concurrent", V::U(4))])
            .unwrap()
            .throttle(),
        None
    );
    let err = policy(vec![
        ("max_concurrent", V::U(4)),
        ("throttle", V::Map(vec![])),
        ("throttle_k", V::U(2)),
    ])
    .unwrap_err();
    assert!(err.contains("not both"), "{err}");
    assert_names(
        policy(vec![("max_concurrent", V::U(4)), ("throttle_k", V::F(0.9))]),
        "throttle_k",
        "at least 1",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("throttle", V::Map(vec![("max_probability", V::U(2))])),
        ]),
        "throttle.max_probability",
        "[0, 1]",
    );
    // The window, less a bucket, must cover the call timeout (30 s).
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("throttle_window", V::U(30)),
        ]),
        "throttle_window",
        "shorter than the timeout",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("call_timeout", V::U(10)),
            ("throttle", V::Map(vec![("window", V::U(10))])),
        ]),
        "throttle.window",
        "shorter than the timeout",
    );
}

#[test]
fn a_policy_throttle_from_the_environment() {
    let vars = env(&[
        ("CLIENT_SEARCH__MAX_CONCURRENT", "8"),
        ("CLIENT_SEARCH__CALL_TIMEOUT", "2s"),
        ("CLIENT_SEARCH__THROTTLE_K", "2"),
        ("CLIENT_SEARCH__THROTTLE_MAX_PROBABILITY", "0.5"),
        ("CLIENT_SEARCH__THROTTLE_WINDOW", "1m"),
    ]);
    let config: PolicyConfig = envy::prefixed("CLIENT_SEARCH__").from_iter(vars).unwrap();
    let t = config.throttle().unwrap();
    assert_eq!(
        (t.k(), t.max_probability(), t.window()),
        (2.0, 0.5, Duration::from_secs(60))
    );
    // The policy made from it refuses at most half, once overloaded.
    let clock = ManualClock::new();
    let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    search.breaker().disable();
    for _ in 0..200 {
        let _ = futures_lite::future::block_on(search.call(|| async { Err::<(), _>("503") }));
    }
    assert_eq!(search.throttle().unwrap().probability(), 0.5);
    for (k, v, key) in [
        ("THROTTLE_K", "0", "throttle_k"),
        ("THROTTLE_K", "two", "throttle_k"),
        (
            "THROTTLE_MAX_PROBABILITY",
            "90%",
            "throttle_max_probability",
        ),
        ("THROTTLE_WINDOW", "0", "throttle_window"),
        ("THROTTLE_WINDOW", "10s", "throttle_window"),
    ] {
        let vars = env(&[("MAX_CONCURRENT", "4"), (k, v)]);
        let err = envy::from_iter::<_, PolicyConfig>(vars)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("`{key}`")), "{k}={v}: {err}");
    }
}
