//! `Quota`, and the rate in a policy, nested or flat.

use super::*;

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
