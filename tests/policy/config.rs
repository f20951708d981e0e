//! Sizing and config checks, each naming its field.

use super::*;

// ---- sizing and config checks ----------------------------------------------

fn max_concurrent_for_pool(pool: usize) -> usize {
    PolicyConfig::for_pool(pool)
        .build()
        .unwrap()
        .max_concurrent()
}

#[test]
fn for_pool_takes_four_fifths_rounded_down_at_least_one() {
    assert_eq!(max_concurrent_for_pool(10), 8);
    assert_eq!(max_concurrent_for_pool(1), 1);
    assert_eq!(max_concurrent_for_pool(7), 5);
    assert_eq!(max_concurrent_for_pool(2), 1);
    assert_eq!(max_concurrent_for_pool(3), 2);
    assert_eq!(max_concurrent_for_pool(4), 3);
    assert_eq!(max_concurrent_for_pool(5), 4);
    assert_eq!(max_concurrent_for_pool(100), 80);
    for pool in 1..=2_000usize {
        let want = ((pool as u128 * 4) / 5).max(1) as usize;
        assert_eq!(max_concurrent_for_pool(pool), want, "pool {pool}");
    }
}

#[test]
fn for_pool_of_zero_is_refused_as_the_pool_size() {
    let e = PolicyConfig::for_pool(0).build().unwrap_err();
    assert_eq!(e, PolicyConfigError::PoolSizeZero);
    assert_eq!(e.field(), PolicyField::PoolSize);
    assert_eq!(e.field().name(), "pool_size");
    assert_eq!(e.to_string(), "pool_size must not be zero");
    // Refined further, still refused: the size is checked by `build`.
    let e = PolicyConfig::for_pool(0)
        .call_timeout(SEC)
        .max_wait(Duration::ZERO)
        .build();
    assert_eq!(e, Err(PolicyConfigError::PoolSizeZero));
    // `builder(0)` is the other setting's error.
    let e = PolicyConfig::builder(0).build().unwrap_err();
    assert_eq!(e.field(), PolicyField::MaxConcurrent);
}

#[test]
fn policy_fields_are_an_enum_with_the_builders_names() {
    let clock = ManualClock::new();
    let over = Bulkhead::<()>::MAX_PERMITS + 1;
    let cases = [
        (
            PolicyConfig::builder(0).build().unwrap_err(),
            PolicyField::MaxConcurrent,
            "max_concurrent",
        ),
        (
            PolicyConfig::builder(over).build().unwrap_err(),
            PolicyField::MaxConcurrent,
            "max_concurrent",
        ),
        (
            PolicyConfig::for_pool(0).build().unwrap_err(),
            PolicyField::PoolSize,
            "pool_size",
        ),
        (
            PolicyConfig::builder(1)
                .max_wait(2 * SEC)
                .build()
                .unwrap_err(),
            PolicyField::MaxWait,
            "max_wait",
        ),
        (
            PolicyConfig::builder(1)
                .call_timeout(Duration::ZERO)
                .build()
                .unwrap_err(),
            PolicyField::CallTimeout,
            "call_timeout",
        ),
        (
            Policy::<_, 16>::new("x", PolicyConfig::builder(1).build().unwrap(), &clock)
                .unwrap_err(),
            PolicyField::Breaker(BreakerField::WindowSize),
            "window_size",
        ),
    ];
    for (e, field, name) in cases {
        assert_eq!(e.field(), field, "{e}");
        assert_eq!(e.field().name(), name);
        assert_eq!(e.field().to_string(), name);
        assert_eq!(e.field(), name);
    }
}

#[test]
fn for_pool_of_a_huge_pool_does_not_overflow() {
    let err = PolicyConfig::for_pool(usize::MAX).build().unwrap_err();
    assert_eq!(err.field(), "max_concurrent");
    let cap = Bulkhead::<()>::MAX_PERMITS;
    // The largest pool that still fits.
    let pool = cap / 4 * 5;
    let got = max_concurrent_for_pool(pool);
    assert_eq!(got as u128, (pool as u128 * 4) / 5);
}

#[test]
fn builder_defaults() {
    let c = PolicyConfig::builder(3).build().unwrap();
    assert_eq!(c.max_concurrent(), 3);
    assert_eq!(c.max_wait(), 100 * MS);
    assert_eq!(c.call_timeout(), 30 * SEC);
    assert_eq!(*c.breaker(), BreakerConfig::DEFAULT);
}

#[test]
fn max_wait_of_one_second_is_accepted_one_nanosecond_more_is_refused() {
    let c = PolicyConfig::builder(1).max_wait(SEC).build().unwrap();
    assert_eq!(c.max_wait(), SEC);
    let over = SEC + Duration::from_nanos(1);
    let e = PolicyConfig::builder(1).max_wait(over).build().unwrap_err();
    assert_eq!(e.field(), "max_wait");
    assert_eq!(e, PolicyConfigError::MaxWaitTooLong { max_wait: over });
    assert!(e.to_string().contains("allow_long_max_wait"), "{e}");

    let c = PolicyConfig::builder(1)
        .max_wait(over)
        .allow_long_max_wait()
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), over);
    let c = PolicyConfig::builder(1)
        .allow_long_max_wait()
        .max_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), Duration::from_secs(60));
}

#[test]
fn zero_max_wait_is_accepted() {
    let c = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(c.max_wait(), Duration::ZERO);
}

#[test]
fn zero_call_timeout_is_refused() {
    let e = PolicyConfig::builder(1)
        .call_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e, PolicyConfigError::CallTimeoutZero);
    assert_eq!(e.field(), "call_timeout");
}

#[test]
fn zero_max_concurrent_is_refused() {
    let e = PolicyConfig::builder(0).build().unwrap_err();
    assert_eq!(e, PolicyConfigError::MaxConcurrentZero);
    assert_eq!(e.field(), "max_concurrent");
}

#[test]
fn max_concurrent_above_the_bulkhead_limit_is_refused() {
    let over = Bulkhead::<()>::MAX_PERMITS.checked_add(1).unwrap();
    let e = PolicyConfig::builder(over).build().unwrap_err();
    assert_eq!(e.field(), "max_concurrent");
    assert!(PolicyConfig::builder(Bulkhead::<()>::MAX_PERMITS)
        .build()
        .is_ok());
}

#[test]
fn policy_new_refuses_a_breaker_window_above_n() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4).build().unwrap(); // window 50
    let e = Policy::<_, 16>::new("x", config, &clock).unwrap_err();
    assert_eq!(e.field(), "window_size");
    assert!(matches!(e, PolicyConfigError::Breaker(_)));

    let fits = BreakerConfig::builder().window_size(16).build().unwrap();
    let config = PolicyConfig::builder(4).breaker(fits).build().unwrap();
    let p = Policy::<_, 16>::new("x", config, &clock).unwrap();
    assert_eq!(p.name(), "x");
    assert_eq!(p.bulkhead().capacity(), 4);
    assert_eq!(p.breaker().name(), "x");
}
