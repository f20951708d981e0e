//! `Deserialize` for `BreakerConfig`, `PolicyConfig`, `Quota`, `ThrottleConfig`
//! and `PartitionShares` (feature `serde`):
//! every field from typed values (a small self-describing test format below)
//! and from environment-style string maps (envy on a fake env vector; the
//! real environment is never touched), validation through the builders with
//! the field named, thresholds in percent, unknown fields refused, and
//! durations in each form.

use core::time::Duration;

use serde::de::value::{Error as ValueError, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use watertight::clock::{ManualClock, StdClock};
use watertight::partition::{PartitionShares, PartitionedBulkhead};
use watertight::rate::{Quota, RateError, RateLimiter};
use watertight::{BreakerConfig, Policy, PolicyConfig};

/// A value of a self-describing format (as JSON, TOML or YAML would give).
#[derive(Debug, Clone)]
enum V {
    U(u64),
    I(i64),
    F(f64),
    S(&'static str),
    B(bool),
    Null,
    Map(Vec<(&'static str, V)>),
    Seq(Vec<V>),
}

impl<'de> IntoDeserializer<'de, ValueError> for V {
    type Deserializer = V;
    fn into_deserializer(self) -> V {
        self
    }
}

impl<'de> Deserializer<'de> for V {
    type Error = ValueError;

    fn deserialize_any<W: Visitor<'de>>(self, w: W) -> Result<W::Value, ValueError> {
        match self {
            V::U(n) => w.visit_u64(n),
            V::I(n) => w.visit_i64(n),
            V::F(x) => w.visit_f64(x),
            V::S(s) => w.visit_str(s),
            V::B(b) => w.visit_bool(b),
            V::Null => w.visit_unit(),
            V::Map(m) => {
                let mut map = MapDeserializer::new(m.into_iter());
                let value = w.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
            V::Seq(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter());
                let value = w.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_option<W: Visitor<'de>>(self, w: W) -> Result<W::Value, ValueError> {
        match self {
            V::Null => w.visit_none(),
            other => w.visit_some(other),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

fn from<T: DeserializeOwned>(fields: Vec<(&'static str, V)>) -> Result<T, String> {
    T::deserialize(V::Map(fields)).map_err(|e| e.to_string())
}

fn breaker(fields: Vec<(&'static str, V)>) -> Result<BreakerConfig, String> {
    from(fields)
}

fn policy(fields: Vec<(&'static str, V)>) -> Result<PolicyConfig, String> {
    from(fields)
}

/// An error that names `field` and says `what`.
#[track_caller]
fn assert_names(err: Result<impl core::fmt::Debug, String>, field: &str, what: &str) {
    let err = err.unwrap_err();
    assert!(
        err.contains(&format!("`{field}`")),
        "{err:?} does not name `{field}`"
    );
    assert!(err.contains(what), "{err:?} does not say {what:?}");
}

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;

// ------------------------------------------------------------ breaker

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

// ------------------------------------------------------------ policy

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

// ------------------------------------------------------------ environment

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

// ------------------------------------------------------------ retry

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

// ------------------------------------------------------------ rate

fn quota(fields: Vec<(&'static str, V)>) -> Result<Quota, String> {
    from(fields)
}

#[test]
fn every_quota_field_deserializes() {
    let q = quota(vec![
        ("cells", V::U(100)),
        ("period", V::S("1m")),
        ("burst", V::U(10)),
    ])
    .unwrap();
    assert_eq!(q, Quota::per_minute(100).burst(10));
    // The period defaults to a second, the burst to the cells.
    assert_eq!(quota(vec![("cells", V::U(50))]), Ok(Quota::per_second(50)));
    // Strings and fractional seconds, as env vars and YAML give them.
    let q = quota(vec![
        ("cells", V::S("5")),
        ("period", V::F(0.5)),
        ("burst", V::S("2")),
    ])
    .unwrap();
    assert_eq!(q, Quota::new(5, MS(500)).burst(2));
    assert_eq!(q.emission_interval(), MS(100));
    // Null keeps the default.
    assert_eq!(
        quota(vec![("cells", V::U(3)), ("burst", V::Null)]),
        Ok(Quota::per_second(3))
    );
}

#[test]
fn bad_quotas_are_refused_naming_the_field() {
    assert_names(quota(vec![("cells", V::U(0))]), "cells", "at least 1 cell");
    assert_names(
        quota(vec![("cells", V::U(5)), ("burst", V::U(0))]),
        "burst",
        "at least 1",
    );
    assert_names(
        quota(vec![("cells", V::U(5)), ("period", V::U(0))]),
        "period",
        "must not be zero",
    );
    // Above the schedule's horizon (2^60 - 1 ns, 36 years): absurd.
    assert_names(
        quota(vec![("cells", V::U(5)), ("period", V::S("6000000h"))]),
        "period",
        "36 years",
    );
    // One cell per 20 years with a burst of 2: burst × T is past the horizon.
    assert_names(
        quota(vec![
            ("cells", V::U(1)),
            ("period", V::S("175200h")),
            ("burst", V::U(2)),
        ]),
        "burst",
        "exceeds 36 years",
    );
    assert_names(quota(vec![("cells", V::I(-1))]), "cells", "negative");
    assert_names(
        quota(vec![("cells", V::U(u64::from(u32::MAX) + 1))]),
        "cells",
        "too large",
    );
    assert_names(quota(vec![("cells", V::F(2.5))]), "cells", "whole number");
    assert_names(
        quota(vec![("cells", V::U(5)), ("period", V::S("-1s"))]),
        "period",
        "negative",
    );
    assert_names(
        quota(vec![("cells", V::U(5)), ("period", V::S("1 fortnight"))]),
        "period",
        "unknown unit",
    );
    assert_names(quota(vec![("period", V::U(1))]), "cells", "missing");
    assert_names(quota(vec![]), "cells", "missing");
    let err = quota(vec![("cells", V::U(5)), ("rate", V::U(5))]).unwrap_err();
    assert!(err.contains("unknown field `rate`"), "{err}");
}

#[test]
fn more_cells_than_the_burst_is_the_requests_error_not_the_configs() {
    let q = quota(vec![("cells", V::U(10)), ("burst", V::U(2))]).unwrap();
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", q, &clock);
    assert_eq!(
        r.check_n(3),
        Err(RateError::ExceedsBurst {
            requested: 3,
            burst: 2
        })
    );
}

#[test]
fn a_policy_rate_flat_or_nested_but_not_both() {
    let flat = policy(vec![
        ("max_concurrent", V::U(4)),
        ("rate_cells", V::U(50)),
        ("rate_burst", V::U(10)),
    ])
    .unwrap();
    assert_eq!(flat.rate(), Some(Quota::per_second(50).burst(10)));
    let nested = policy(vec![
        ("max_concurrent", V::U(4)),
        (
            "rate",
            V::Map(vec![("cells", V::U(50)), ("burst", V::U(10))]),
        ),
    ])
    .unwrap();
    assert_eq!(nested, flat);
    // Without either, no rate limit.
    assert_eq!(
        policy(vec![("max_concurrent", V::U(4))]).unwrap().rate(),
        None
    );
    let err = policy(vec![
        ("max_concurrent", V::U(4)),
        ("rate", V::Map(vec![("cells", V::U(50))])),
        ("rate_burst", V::U(10)),
    ])
    .unwrap_err();
    assert!(err.contains("not both"), "{err}");
    // Each error names the key as written.
    assert_names(
        policy(vec![("max_concurrent", V::U(4)), ("rate_cells", V::U(0))]),
        "rate_cells",
        "at least 1 cell",
    );
    assert_names(
        policy(vec![
            ("max_concurrent", V::U(4)),
            ("rate", V::Map(vec![("cells", V::U(5)), ("burst", V::U(0))])),
        ]),
        "rate.burst",
        "at least 1",
    );
    assert_names(
        policy(vec![("max_concurrent", V::U(4)), ("rate_burst", V::U(3))]),
        "rate_cells",
        "missing",
    );
}

#[test]
fn a_policy_rate_from_the_environment() {
    let vars = env(&[
        ("CLIENT_PROVIDER__MAX_CONCURRENT", "8"),
        ("CLIENT_PROVIDER__RATE_CELLS", "100"),
        ("CLIENT_PROVIDER__RATE_PERIOD", "1m"),
        ("CLIENT_PROVIDER__RATE_BURST", "10"),
        ("CLIENT_OTHER__MAX_CONCURRENT", "2"),
    ]);
    let config: PolicyConfig = envy::prefixed("CLIENT_PROVIDER__")
        .from_iter(vars.clone())
        .unwrap();
    assert_eq!(config.rate(), Some(Quota::per_minute(100).burst(10)));
    let other: PolicyConfig = envy::prefixed("CLIENT_OTHER__").from_iter(vars).unwrap();
    assert_eq!(other.rate(), None);

    // The policy made from it refuses the 11th call at once, with its hint.
    let clock = ManualClock::new();
    let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    for _ in 0..10 {
        let r = futures_lite::future::block_on(provider.call(|| async { Ok::<_, ()>(()) }));
        assert!(r.is_ok());
    }
    let err =
        futures_lite::future::block_on(provider.call(|| async { Ok::<_, ()>(()) })).unwrap_err();
    assert_eq!(err.retry_after(), Some(MS(600)));

    for (k, v, key) in [
        ("RATE_CELLS", "0", "rate_cells"),
        ("RATE_CELLS", "fifty", "rate_cells"),
        ("RATE_BURST", "0", "rate_burst"),
        ("RATE_PERIOD", "0", "rate_period"),
        ("RATE_PERIOD", "999999999999h", "rate_period"),
    ] {
        let mut vars = env(&[("P__MAX_CONCURRENT", "4"), ("P__RATE_CELLS", "5")]);
        vars.retain(|(name, _)| *name != format!("P__{k}"));
        vars.push((format!("P__{k}"), v.to_string()));
        let err = envy::prefixed("P__")
            .from_iter::<_, PolicyConfig>(vars)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("`{key}`")), "{k}={v}: {err}");
    }
    // A quota read on its own, as `RATE_*`.
    let q: Quota = envy::prefixed("RATE_")
        .from_iter(env(&[("RATE_CELLS", "10"), ("RATE_PERIOD", "250ms")]))
        .unwrap();
    assert_eq!(q.emission_interval(), Duration::from_millis(25));
}

// ------------------------------------------------------------ throttle

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

// ------------------------------------------------------------ max_waiters

#[test]
fn max_waiters_deserializes_from_numbers_strings_and_env() {
    let c = policy(vec![("max_concurrent", V::U(8)), ("max_waiters", V::U(16))]).unwrap();
    assert_eq!(c.max_waiters(), Some(16));
    assert_eq!(c, PolicyConfig::builder(8).max_waiters(16).build().unwrap());
    // The `bulkhead_` alias, a string, and zero (refuse every wait).
    let c = policy(vec![
        ("bulkhead_max_concurrent", V::U(8)),
        ("bulkhead_max_waiters", V::S("0")),
    ])
    .unwrap();
    assert_eq!(c.max_waiters(), Some(0));
    // Absent, or null: no bound.
    assert_eq!(
        policy(vec![("max_concurrent", V::U(8))])
            .unwrap()
            .max_waiters(),
        None
    );
    assert_eq!(
        policy(vec![("max_concurrent", V::U(8)), ("max_waiters", V::Null)])
            .unwrap()
            .max_waiters(),
        None
    );
    let vars = env(&[
        ("SEARCH__MAX_CONCURRENT", "16"),
        ("SEARCH__MAX_WAITERS", "32"),
    ]);
    let c: PolicyConfig = envy::prefixed("SEARCH__").from_iter(vars).unwrap();
    assert_eq!(c.max_waiters(), Some(32));
}

#[test]
fn bad_max_waiters_are_refused_naming_the_field() {
    let base = || vec![("max_concurrent", V::U(8))];
    let with = |v: V| {
        let mut f = base();
        f.push(("max_waiters", v));
        policy(f)
    };
    assert_names(with(V::I(-1)), "max_waiters", "negative");
    assert_names(with(V::S("1.5")), "max_waiters", "whole number");
    assert_names(with(V::S("many")), "max_waiters", "number");
    let max = watertight::Bulkhead::<()>::MAX_WAITERS;
    let err = PolicyConfig::builder(8)
        .max_waiters(max + 1)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        watertight::policy::PolicyConfigError::MaxWaitersTooLarge { max }
    );
    assert_eq!(err.field(), "max_waiters");
    assert_eq!(
        with(V::U(max as u64 + 1)).unwrap_err(),
        format!("invalid value for `max_waiters`: {err}")
    );
    assert_eq!(with(V::U(max as u64)).unwrap().max_waiters(), Some(max));
}

// ------------------------------------------------------------ partition

fn shares<const K: usize>(fields: Vec<(&'static str, V)>) -> Result<PartitionShares<K>, String> {
    from(fields)
}

fn seq(items: &[u64]) -> V {
    V::Seq(items.iter().map(|&n| V::U(n)).collect())
}

fn env_shares<const K: usize>(vars: &[(&str, &str)]) -> Result<PartitionShares<K>, String> {
    envy::prefixed("SEARCH_PARTITION_")
        .from_iter(env(vars))
        .map_err(|e| e.to_string())
}

const CLASSES: [&str; 3] = ["checkout", "browse", "export"];

/// The bulkhead the shares build, as `[share; 3]` and its capacity.
fn built(s: PartitionShares<3>) -> ([usize; 3], usize) {
    let b = PartitionedBulkhead::from_shares("search", CLASSES, s, StdClock).unwrap();
    ([b.share(0), b.share(1), b.share(2)], b.capacity())
}

#[test]
fn partition_shares_from_typed_values() {
    let s = shares::<3>(vec![("shares", seq(&[5, 3, 2]))]).unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    assert_eq!(built(s), ([5, 3, 2], 10));
    let s = shares::<3>(vec![
        ("capacity", V::U(10)),
        ("percent", seq(&[50, 30, 20])),
        ("max_waiters", V::U(32)),
    ])
    .unwrap();
    assert_eq!(
        s,
        PartitionShares::percent(10, [50, 30, 20]).with_max_waiters(32)
    );
    assert_eq!(built(s), ([5, 3, 2], 10));
    let b = PartitionedBulkhead::from_shares("search", CLASSES, s, StdClock).unwrap();
    assert_eq!(b.room(2).unwrap().max_waiters(), Some(32));
    // Entries as strings and whole floats, a list as one string, an
    // explicit null for the bound.
    let s = shares::<3>(vec![
        ("shares", V::Seq(vec![V::S("5"), V::F(3.0), V::U(2)])),
        ("max_waiters", V::Null),
    ])
    .unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    let s = shares::<3>(vec![("shares", V::S(" 5, 3 ,2 "))]).unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    // One class: a lone number is a list of one.
    assert_eq!(
        shares::<1>(vec![("shares", V::U(4))]),
        Ok(PartitionShares::slots([4]))
    );
    // 7 slots at 50/30/20: rounded as from_percent rounds them.
    let s = shares::<3>(vec![("capacity", V::S("7")), ("percent", V::S("50,30,20"))]).unwrap();
    assert_eq!(built(s), ([4, 2, 1], 7));
}

#[test]
fn partition_shares_from_the_environment() {
    let s = env_shares::<3>(&[
        ("SEARCH_PARTITION_SHARES", "5,3,2"),
        ("SEARCH_PARTITION_MAX_WAITERS", "16"),
        ("OTHER", "x"),
    ])
    .unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]).with_max_waiters(16));
    let s = env_shares::<3>(&[
        ("SEARCH_PARTITION_CAPACITY", "20"),
        ("SEARCH_PARTITION_PERCENT", "50,30,20"),
    ])
    .unwrap();
    assert_eq!(built(s), ([10, 6, 4], 20));
    assert_names(
        env_shares::<3>(&[("SEARCH_PARTITION_SHARES", "5,3")]),
        "shares",
        "2 entries, expected 3 (one per class)",
    );
    assert_names(
        env_shares::<3>(&[
            ("SEARCH_PARTITION_CAPACITY", "10"),
            ("SEARCH_PARTITION_PERCENT", "50,30,30"),
        ]),
        "percent",
        "add up to 110, not 100",
    );
    assert_names(
        env_shares::<3>(&[("SEARCH_PARTITION_SHARES", "5,x,2")]),
        "shares",
        "\"x\" is not a number",
    );
    assert_names(
        env_shares::<3>(&[
            ("SEARCH_PARTITION_SHARES", "5,3,2"),
            ("SEARCH_PARTITION_PERCENT", "50,30,20"),
        ]),
        "shares",
        "not both",
    );
}

#[test]
fn a_list_of_the_wrong_length_names_the_key_and_the_count() {
    for (v, n) in [
        (seq(&[5, 3]), "2 entries"),
        (seq(&[5, 3, 2, 1]), "4 entries"),
        (
            V::Seq(vec![V::U(5), V::U(3), V::U(2), V::Map(vec![])]),
            "4 entries",
        ),
        (V::Seq(vec![]), "0 entries"),
        (V::S(""), "0 entries"),
        (V::S("5,3,2,"), "4 entries"),
        (V::U(10), "1 entry"),
    ] {
        assert_names(
            shares::<3>(vec![("shares", v.clone())]),
            "shares",
            &format!("{n}, expected 3 (one per class)"),
        );
    }
    assert_names(
        shares::<2>(vec![
            ("capacity", V::U(10)),
            ("percent", seq(&[50, 30, 20])),
        ]),
        "percent",
        "3 entries, expected 2 (one per class)",
    );
}

#[test]
fn bad_partition_shares_are_refused_naming_the_key() {
    assert_names(
        shares::<3>(vec![("shares", seq(&[5, 0, 2]))]),
        "shares",
        "class 1 has a share of 0 slots",
    );
    let max = watertight::Bulkhead::<()>::MAX_PERMITS as u64;
    assert_names(
        shares::<3>(vec![("shares", seq(&[5, max + 1, 2]))]),
        "shares",
        &format!(
            "class 1 asks for {} slots, above the maximum of {max}",
            max + 1
        ),
    );
    assert_names(
        shares::<2>(vec![
            ("capacity", V::U(max + 1)),
            ("percent", seq(&[50, 50])),
        ]),
        "capacity",
        "above the maximum",
    );
    assert_names(
        shares::<3>(vec![
            ("capacity", V::U(10)),
            ("percent", seq(&[50, 30, 10])),
        ]),
        "percent",
        "add up to 90, not 100",
    );
    assert_names(
        shares::<3>(vec![("capacity", V::U(2)), ("percent", seq(&[50, 30, 20]))]),
        "percent",
        "class 2's 20 % of `capacity` rounds to 0 slots",
    );
    assert_names(
        shares::<2>(vec![("capacity", V::U(10)), ("percent", seq(&[100, 0]))]),
        "percent",
        "class 1's 0 % of `capacity` rounds to 0 slots",
    );
    assert_names(
        shares::<2>(vec![("capacity", V::U(10)), ("percent", seq(&[300, 0]))]),
        "percent",
        "300 is too large",
    );
    let waiters = watertight::Bulkhead::<()>::MAX_WAITERS as u64;
    assert_names(
        shares::<2>(vec![
            ("shares", seq(&[1, 1])),
            ("max_waiters", V::U(waiters + 1)),
        ]),
        "max_waiters",
        "above the maximum",
    );
    assert!(shares::<2>(vec![
        ("shares", seq(&[1, 1])),
        ("max_waiters", V::U(waiters))
    ])
    .is_ok());
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::I(-1)]))]),
        "shares",
        "negative",
    );
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::F(1.5)]))]),
        "shares",
        "whole number",
    );
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::Null]))]),
        "shares",
        "an entry is null",
    );
    assert_names(
        shares::<2>(vec![("shares", V::B(true))]),
        "shares",
        "a list of 2",
    );
}

#[test]
fn partition_shares_are_given_one_way_exactly() {
    let both = "set `shares` (slots per class) or `capacity` and `percent`, not both";
    for extra in [("capacity", V::U(10)), ("percent", seq(&[50, 50]))] {
        let err = shares::<2>(vec![("shares", seq(&[5, 5])), extra]).unwrap_err();
        assert!(err.contains(both), "{err}");
    }
    assert_names(
        shares::<2>(vec![("capacity", V::U(10))]),
        "percent",
        "missing field",
    );
    assert_names(
        shares::<2>(vec![("percent", seq(&[50, 50]))]),
        "capacity",
        "missing field",
    );
    assert_names(shares::<2>(vec![]), "shares", "missing field");
    // Null is the key not given.
    assert_names(
        shares::<2>(vec![("shares", V::Null)]),
        "shares",
        "missing field",
    );
    // Unknown keys (a typo) are refused.
    assert_names(
        shares::<2>(vec![("share", seq(&[5, 5]))]),
        "share",
        "unknown field",
    );
    // No classes.
    let err = shares::<0>(vec![("shares", V::Seq(vec![]))]).unwrap_err();
    assert!(err.contains("at least one class"), "{err}");
}
