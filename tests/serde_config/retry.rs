//! The retry keys of `PolicyConfig`.

use super::*;

#[test]
fn every_retry_field_deserializes() {
    let c = policy(vec![
        ("max_concurrent", V::U(4)),
        ("retry_max_attempts", V::U(3)),
        ("retry_base_backoff", V::S("20ms")),
        ("retry_max_backoff", V::F(0.5)),
        ("retry_min_attempt_time", V::S("80ms")),
        ("retry_budget_tokens", V::U(100)),
        ("retry_budget_ratio", V::F(2.5)),
    ])
    .unwrap();
    let r = c.retry();
    assert_eq!(r.max_attempts(), 3);
    assert_eq!(r.base_backoff(), MS(20));
    assert_eq!(r.max_backoff(), MS(500));
    assert_eq!(r.min_attempt_time(), MS(80));
    assert_eq!(r.budget_max_tokens(), 100);
    assert_eq!(r.budget_ratio_percent(), 2.5);

    // The same from the environment, as strings.
    let vars = env(&[
        ("SEARCH__MAX_CONCURRENT", "4"),
        ("SEARCH__RETRY_MAX_ATTEMPTS", "3"),
        ("SEARCH__RETRY_BASE_BACKOFF", "20ms"),
        ("SEARCH__RETRY_MAX_BACKOFF", "0.5"),
        ("SEARCH__RETRY_MIN_ATTEMPT_TIME", "80ms"),
        ("SEARCH__RETRY_BUDGET_TOKENS", "100"),
        ("SEARCH__RETRY_BUDGET_RATIO", "2.5%"),
    ]);
    let e: PolicyConfig = envy::prefixed("SEARCH__").from_iter(vars).unwrap();
    assert_eq!(e.retry(), c.retry());
}

#[test]
fn retry_defaults_and_one_half_of_a_pair() {
    let c = policy(vec![("max_concurrent", V::U(4))]).unwrap();
    assert_eq!(*c.retry(), watertight::retry::RetryConfig::DEFAULT);
    // Only the cap: the base keeps its default (50 ms).
    let c = policy(vec![
        ("max_concurrent", V::U(4)),
        ("retry_max_backoff", V::S("200ms")),
        ("retry_budget_ratio", V::U(50)),
    ])
    .unwrap();
    assert_eq!(c.retry().base_backoff(), MS(50));
    assert_eq!(c.retry().max_backoff(), MS(200));
    assert_eq!(c.retry().budget_max_tokens(), 10);
    assert_eq!(c.retry().budget_ratio_percent(), 50.0);
    // Only the base, above the default cap of 1 s: refused, naming the cap.
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("retry_base_backoff", V::U(2)),
        ]),
        "retry_max_backoff",
        "below base_backoff",
    );
}

#[test]
fn retry_validation_names_the_field() {
    let with = |k: &'static str, v: V| policy(vec![("max_concurrent", V::U(4)), (k, v)]);
    assert_names(
        with("retry_max_attempts", V::U(0)),
        "retry_max_attempts",
        "must not be zero",
    );
    assert_names(
        with("retry_max_attempts", V::S("-1")),
        "retry_max_attempts",
        "negative",
    );
    assert_names(
        with("retry_max_attempts", V::U(1 << 33)),
        "retry_max_attempts",
        "too large",
    );
    assert_names(
        with("retry_base_backoff", V::U(0)),
        "retry_base_backoff",
        "must not be zero",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("retry_base_backoff", V::S("100ms")),
            ("retry_max_backoff", V::S("10ms")),
        ]),
        "retry_max_backoff",
        "below base_backoff",
    );
    assert_names(
        with("retry_min_attempt_time", V::S("soon")),
        "retry_min_attempt_time",
        "not a number",
    );
    assert_names(
        with("retry_budget_tokens", V::U(0)),
        "retry_budget_tokens",
        "1 to 1000000",
    );
    assert_names(
        with("retry_budget_tokens", V::U(2_000_000)),
        "retry_budget_tokens",
        "1 to 1000000",
    );
    for bad in [V::F(0.05), V::U(0), V::F(100.5), V::I(-5), V::S("NaN")] {
        assert_names(
            with("retry_budget_ratio", bad),
            "retry_budget_ratio",
            "0.1 % to 100 %",
        );
    }
    assert_names(
        with("retry_budget_ratio", V::S("lots")),
        "retry_budget_ratio",
        "not a number",
    );
    // The bounds themselves are accepted.
    for ok in [V::F(0.1), V::U(100), V::S("100%")] {
        assert!(with("retry_budget_ratio", ok).is_ok());
    }
    assert_eq!(
        with("retry_max_attempts", V::U(1))
            .unwrap()
            .retry()
            .max_attempts(),
        1
    );
    // A typo is refused, not a silent default.
    assert!(with("retry_max_attempt", V::U(3))
        .unwrap_err()
        .contains("retry_max_attempt"));
}

#[test]
fn bad_retry_environment_values_name_the_field() {
    for (k, v, key) in [
        ("RETRY_MAX_ATTEMPTS", "0", "retry_max_attempts"),
        ("RETRY_MAX_ATTEMPTS", "two", "retry_max_attempts"),
        ("RETRY_MAX_BACKOFF", "1ms", "retry_max_backoff"),
        ("RETRY_BUDGET_RATIO", "150", "retry_budget_ratio"),
        ("RETRY_BUDGET_TOKENS", "0", "retry_budget_tokens"),
    ] {
        let vars = env(&[
            ("SEARCH__MAX_CONCURRENT", "4"),
            (&format!("SEARCH__{k}"), v),
        ]);
        let err = envy::prefixed("SEARCH__")
            .from_iter::<_, PolicyConfig>(vars)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("`{key}`")), "{k}={v}: {err}");
    }
}
