//! `PolicyConfig`: its keys, the breaker nested or flat, the two sizings.

use super::*;

#[test]
fn every_policy_field_deserializes() {
    let c = policy(vec![
        ("max_concurrent", V::U(12)),
        ("max_wait", V::S("50ms")),
        ("call_timeout", V::F(2.5)),
        ("cb_window_size", V::U(20)),
        ("cb_min_calls", V::U(5)),
        ("cb_failure_rate", V::U(30)),
        ("cb_slow_call_rate", V::U(70)),
        ("cb_slow_call_duration", V::U(1)),
        ("cb_open_duration", V::S("10s")),
        ("cb_half_open_calls", V::U(1)),
        ("cb_max_half_open_wait", V::U(5)),
    ])
    .unwrap();
    assert_eq!(c.max_concurrent(), 12);
    assert_eq!(c.max_wait(), MS(50));
    assert_eq!(c.call_timeout(), MS(2500));
    let b = c.breaker();
    assert_eq!(
        (b.window_size(), b.minimum_calls(), b.half_open_calls()),
        (20, 5, 1)
    );
    assert_eq!(b.failure_rate_threshold(), 30.0);
    assert_eq!(b.slow_call_rate_threshold(), 70.0);
    assert_eq!(b.slow_call_duration(), Some(S(1)));
    assert_eq!(b.open_duration(), S(10));
    assert_eq!(b.max_half_open_wait(), Some(S(5)));
}

#[test]
fn a_policy_with_only_its_size_has_the_builders_defaults() {
    let c = policy(vec![("max_concurrent", V::U(4))]).unwrap();
    assert_eq!(c, PolicyConfig::builder(4).build().unwrap());
    // The bulkhead's names as Python services often spell them (`bulkhead_*`).
    let c = policy(vec![
        ("bulkhead_max_concurrent", V::U(16)),
        ("bulkhead_acquire_timeout", V::F(0.1)),
    ])
    .unwrap();
    assert_eq!(c, PolicyConfig::builder(16).build().unwrap());
}

#[test]
fn pool_size_gives_four_fifths() {
    for (pool, n) in [(10, 8), (25, 20), (1, 1), (4, 3)] {
        let c = policy(vec![("pool_size", V::U(pool))]).unwrap();
        assert_eq!(c.max_concurrent(), n, "pool {pool}");
    }
    // The same typed error as `PolicyConfig::for_pool(0)`, in its words.
    let code = PolicyConfig::for_pool(0).build().unwrap_err();
    assert_eq!(code, watertight::policy::PolicyConfigError::PoolSizeZero);
    assert_eq!(
        policy(vec![("pool_size", V::U(0))]).unwrap_err(),
        format!("invalid value for `pool_size`: {code}")
    );
    assert_names(
        policy(vec![("pool_size", V::U(10)), ("max_concurrent", V::U(8))]),
        "pool_size",
        "not both",
    );
    assert_names(policy(vec![]), "max_concurrent", "missing field");
    assert_names(
        policy(vec![("pool_size", V::U(u64::from(u32::MAX)))]),
        "pool_size",
        "must be at most",
    );
}

#[test]
fn policy_validation_names_the_field() {
    assert_names(
        policy(vec![("max_concurrent", V::U(0))]),
        "max_concurrent",
        "must not be zero",
    );
    assert_names(
        policy(vec![("max_concurrent", V::U(4)), ("max_wait", V::S("3s"))]),
        "max_wait",
        "allow_long_max_wait",
    );
    let c = policy(vec![
        ("max_concurrent", V::U(4)),
        ("max_wait", V::S("3s")),
        ("allow_long_max_wait", V::B(true)),
    ])
    .unwrap();
    assert_eq!(c.max_wait(), S(3));
    assert_names(
        policy(vec![("max_concurrent", V::U(4)), ("call_timeout", V::U(0))]),
        "call_timeout",
        "must not be zero",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("allow_long_max_wait", V::S("maybe")),
        ]),
        "allow_long_max_wait",
        "true or false",
    );
    // Zero is a valid slot wait: fail at once.
    let c = policy(vec![("max_concurrent", V::U(4)), ("max_wait", V::U(0))]).unwrap();
    assert_eq!(c.max_wait(), Duration::ZERO);
}

#[test]
fn the_breaker_nested_or_flat_but_not_both() {
    let nested = policy(vec![
        ("max_concurrent", V::U(4)),
        (
            "breaker",
            V::Map(vec![
                ("failure_rate", V::U(30)),
                ("open_duration", V::U(60)),
            ]),
        ),
    ])
    .unwrap();
    let flat = policy(vec![
        ("max_concurrent", V::U(4)),
        ("cb_failure_rate", V::U(30)),
        ("cb_open_duration", V::U(60)),
    ])
    .unwrap();
    assert_eq!(nested, flat);
    assert_eq!(nested.breaker().failure_rate_threshold(), 30.0);
    assert_eq!(nested.breaker().open_duration(), S(60));

    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("breaker", V::Map(vec![("failure_rate", V::F(0.5))])),
        ]),
        "breaker.failure_rate",
        "a fraction (write ",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("breaker", V::Map(vec![])),
            ("cb_window_size", V::U(20)),
        ]),
        "breaker",
        "not both",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("breaker", V::Map(vec![("failure_rat", V::U(3))])),
        ]),
        "failure_rat",
        "unknown field",
    );
}

#[test]
fn unknown_policy_fields_are_refused() {
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("cb_failure_rat", V::U(30)),
        ]),
        "cb_failure_rat",
        "unknown field",
    );
    assert_names(
        policy(vec![("max_concurent", V::U(4))]),
        "max_concurent",
        "unknown field",
    );
}
