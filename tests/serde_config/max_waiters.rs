//! `max_waiters` in a policy.

use super::*;

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
