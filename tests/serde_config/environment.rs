//! Environment-style string maps (envy on a fake env vector).

use super::*;

#[test]
fn per_system_prefixes_from_one_environment() {
    let vars = env(&[
        ("CLIENT_PAYMENTS__POOL_SIZE", "10"),
        ("CLIENT_PAYMENTS__CB_FAILURE_RATE", "30"),
        ("CLIENT_PAYMENTS__CB_OPEN_DURATION", "45s"),
        ("CLIENT_PAYMENTS__CB_SLOW_THRESHOLD", "15"),
        ("CLIENT_PAYMENTS__CALL_TIMEOUT", "30"),
        ("CLIENT_INVENTORY__MAX_CONCURRENT", "20"),
        ("CLIENT_INVENTORY__MAX_WAIT", "250ms"),
        ("CLIENT_INVENTORY__ALLOW_LONG_MAX_WAIT", "false"),
        ("CLIENT_INVENTORY__CB_MIN_CALLS", "20"),
        ("PATH", "/usr/bin"),
        ("HOME", "/root"),
    ]);
    let payments: PolicyConfig = envy::prefixed("CLIENT_PAYMENTS__")
        .from_iter(vars.clone())
        .unwrap();
    let inventory: PolicyConfig = envy::prefixed("CLIENT_INVENTORY__")
        .from_iter(vars)
        .unwrap();

    assert_eq!(payments.max_concurrent(), 8);
    assert_eq!(payments.breaker().failure_rate_threshold(), 30.0);
    assert_eq!(payments.breaker().open_duration(), S(45));
    assert_eq!(payments.breaker().slow_call_duration(), Some(S(15)));
    assert_eq!(payments.call_timeout(), S(30));

    assert_eq!(inventory.max_concurrent(), 20);
    assert_eq!(inventory.max_wait(), MS(250));
    assert_eq!(inventory.breaker().minimum_calls(), 20);
    assert_eq!(inventory.breaker().failure_rate_threshold(), 50.0);

    // Both build a policy of the default window capacity.
    let clock = ManualClock::new();
    let p: Policy<_> = Policy::new("payments", payments, &clock).unwrap();
    assert_eq!(p.bulkhead().capacity(), 8);
}

#[test]
fn bad_environment_values_name_the_field() {
    let cases = [
        ("CB_OPEN_DURATION", "-5s", "cb_open_duration", "negative"),
        ("CB_OPEN_DURATION", "5 parsecs", "cb_open_duration", "unit"),
        ("CB_WINDOW_SIZE", "abc", "cb_window_size", "not a number"),
        (
            "CB_WINDOW_SIZE",
            "0",
            "cb_window_size",
            "is 0; allowed: 1 to 1023",
        ),
        ("CB_FAILURE_RATE", "0.3", "cb_failure_rate", "percent"),
        ("MAX_WAIT", "2s", "max_wait", "allow_long_max_wait"),
        ("CB_FAILURE_RAT", "30", "cb_failure_rat", "unknown field"),
    ];
    for (key, value, field, what) in cases {
        let vars = env(&[
            ("SYS__MAX_CONCURRENT", "4"),
            (&format!("SYS__{key}"), value),
        ]);
        let err = envy::prefixed("SYS__").from_iter::<_, PolicyConfig>(vars);
        assert_names(err.map_err(|e| e.to_string()), field, what);
    }
}

#[test]
fn a_window_above_the_policys_capacity_is_refused_by_policy_new() {
    let vars = env(&[("S__MAX_CONCURRENT", "4"), ("S__CB_WINDOW_SIZE", "100")]);
    let config: PolicyConfig = envy::prefixed("S__").from_iter(vars).unwrap();
    let clock = ManualClock::new();
    let err = Policy::<_, 64>::new("s", config, &clock).unwrap_err();
    assert_eq!(err.field(), "window_size");
    assert!(Policy::<_, 128>::new("s", config, &clock).is_ok());
}

#[test]
fn an_env_window_of_100_builds_a_working_heap_policy() {
    use watertight::breaker::State;
    use watertight::HeapPolicy;

    let vars = env(&[
        ("S__MAX_CONCURRENT", "4"),
        ("S__CB_WINDOW_SIZE", "100"),
        ("S__CB_MIN_CALLS", "100"),
    ]);
    let config: PolicyConfig = envy::prefixed("S__").from_iter(vars).unwrap();
    assert_eq!(config.breaker().window_size(), 100);
    let clock = ManualClock::new();
    let p: HeapPolicy<_> = HeapPolicy::new("s", config, &clock).expect("any window up to 1023");
    futures_lite::future::block_on(async {
        // 100 calls fill the window; 50 failures among them trip it.
        for i in 0..100 {
            let r = p
                .call(|| async move {
                    if i % 2 == 0 {
                        Err(())
                    } else {
                        Ok(i)
                    }
                })
                .await;
            assert_eq!(r.is_ok(), i % 2 == 1);
        }
    });
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Open, 100, 50));
    assert_eq!(p.bulkhead().available(), 4, "every slot given back");

    // The largest window the config holds runs too; one more is refused
    // where the config is read, naming the key.
    let vars = env(&[("S__MAX_CONCURRENT", "4"), ("S__CB_WINDOW_SIZE", "1023")]);
    let config: PolicyConfig = envy::prefixed("S__").from_iter(vars).unwrap();
    assert!(HeapPolicy::new("s", config, &clock).is_ok());
    let vars = env(&[("S__MAX_CONCURRENT", "4"), ("S__CB_WINDOW_SIZE", "1024")]);
    let err = envy::prefixed("S__").from_iter::<_, PolicyConfig>(vars);
    assert_names(
        err.map_err(|e| e.to_string()),
        "cb_window_size",
        "is 1024; allowed: 1 to 1023",
    );
}

/// An application's own settings and the policy's under one prefix, as a
/// service keeps its HTTP client's timeouts beside the breaker's settings.
#[test]
fn flattened_into_the_applications_settings() {
    #[derive(Debug, serde::Deserialize)]
    struct ClientSettings {
        base_url: String,
        #[serde(flatten)]
        policy: PolicyConfig,
    }
    let vars = env(&[
        ("CLIENT_SBER__BASE_URL", "http://127.0.0.1:9"),
        ("CLIENT_SBER__POOL_SIZE", "20"),
        ("CLIENT_SBER__CB_FAILURE_RATE", "30"),
    ]);
    let s: ClientSettings = envy::prefixed("CLIENT_SBER__").from_iter(vars).unwrap();
    assert_eq!(s.base_url, "http://127.0.0.1:9");
    assert_eq!(s.policy.max_concurrent(), 16);
    assert_eq!(s.policy.breaker().failure_rate_threshold(), 30.0);
}

/// The builder's threshold rule, with the builder's error: kept to a
/// hundredth of a percent, in (1, 100] as kept.
#[test]
fn threshold_boundaries_are_the_builders() {
    for (given, value) in [
        (V::F(1.001), 1.001f32),
        (V::S("1.004"), 1.004),
        (V::F(100.01), 100.01),
        (V::S("100.5%"), 100.5),
        (V::U(0), 0.0),
        (V::U(1), 1.0),
    ] {
        let from_code = BreakerConfig::builder()
            .failure_rate_threshold(value)
            .build()
            .unwrap_err();
        assert_eq!(
            breaker(vec![("failure_rate", given.clone())]).unwrap_err(),
            format!("invalid value for `failure_rate`: {from_code}"),
            "{given:?}"
        );
    }
    for (given, kept) in [
        (V::F(1.01), 1.01f32),
        (V::S("1.006"), 1.01),
        (V::F(99.999), 100.0),
        (V::U(100), 100.0),
    ] {
        let c = breaker(vec![("failure_rate", given.clone())]).unwrap();
        assert_eq!(c.failure_rate_threshold(), kept, "{given:?}");
    }
}
