//! The retry budget and the backoff's jitter (`watertight::retry`), on
//! their own: bounds under contention, refill, rounding, and the jitter's
//! range and spread.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use watertight::retry::{Jitter, RetryBudget, RetryConfig};

#[test]
fn a_storm_on_many_threads_gets_no_more_retries_than_half_the_budget() {
    let config = RetryConfig::builder().budget(100, 10.0).build().unwrap();
    let budget = RetryBudget::new(&config);
    let allowed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..1000 {
                    if budget.failed_may_retry() {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // 100 tokens: withdrawals leave 99, 98, … 51 above half; whatever the
    // interleaving, each sees its own count.
    assert_eq!(allowed.load(Ordering::Relaxed), 49);
    assert_eq!(budget.tokens(), 0.0);
}

#[test]
fn successes_refill_the_budget_and_never_past_its_size() {
    let budget = RetryBudget::new(&RetryConfig::DEFAULT); // 10 tokens, 10 %
    while budget.failed_may_retry() {}
    assert!(!budget.failed_may_retry());
    // From 4: 20 successes give 2 tokens back (6), not yet more than half after one is taken.
    for _ in 0..20 {
        budget.succeeded();
    }
    assert!((budget.tokens() - 6.0).abs() < 1e-9, "{}", budget.tokens());
    assert!(!budget.failed_may_retry()); // 6 → 5: not above half
    for _ in 0..20 {
        budget.succeeded();
    }
    assert!(budget.failed_may_retry()); // 7 → 6
    for _ in 0..10_000 {
        budget.succeeded();
    }
    assert_eq!(budget.tokens(), 10.0);
}

#[test]
fn a_fractional_ratio_rounds_down_never_up() {
    // tower issue 857: a fractional ratio must not authorise more retries
    // than asked. 0.15 % is taken as 0.1 %: 1000 successes give one token.
    let config = RetryConfig::builder().budget(1000, 0.15).build().unwrap();
    let budget = RetryBudget::new(&config);
    for _ in 0..1000 {
        budget.failed();
    }
    assert_eq!(budget.tokens(), 0.0);
    for _ in 0..1000 {
        budget.succeeded();
    }
    assert_eq!(budget.tokens(), 1.0);
    // 60 %: exactly 0.6 of a token each.
    let config = RetryConfig::builder().budget(10, 60.0).build().unwrap();
    let budget = RetryBudget::new(&config);
    for _ in 0..10 {
        budget.failed();
    }
    for _ in 0..10 {
        budget.succeeded();
    }
    assert!((budget.tokens() - 6.0).abs() < 1e-9);
}

#[test]
fn jitter_spreads_over_the_whole_range() {
    let jitter = Jitter::new(0x5eed);
    let cap = Duration::from_millis(100);
    let draws: Vec<Duration> = (0..10_000).map(|_| jitter.up_to(cap)).collect();
    let mean = draws.iter().sum::<Duration>() / 10_000;
    assert!(
        mean > Duration::from_millis(45) && mean < Duration::from_millis(55),
        "{mean:?}"
    );
    assert!(draws.iter().any(|d| *d < Duration::from_millis(5)));
    assert!(draws.iter().any(|d| *d > Duration::from_millis(95)));
    // Two policies with different seeds do not retry in step.
    let other = Jitter::new(0x5eee);
    let same = (0..100)
        .filter(|_| jitter.up_to(cap) == other.up_to(cap))
        .count();
    assert!(same < 5);
}

proptest! {
    #[test]
    fn backoff_stays_within_its_cap(seed: u64, base_ms in 1u64..500, extra_ms in 0u64..5000, retry in 1u32..70) {
        let base = Duration::from_millis(base_ms);
        let max = base + Duration::from_millis(extra_ms);
        let config = RetryConfig::builder().backoff(base, max).build().unwrap();
        let cap = config.backoff_cap(retry);
        prop_assert!(cap <= max);
        prop_assert!(cap >= base.min(max));
        prop_assert!(config.backoff_cap(retry + 1) >= cap);
        let jitter = Jitter::new(seed);
        for _ in 0..16 {
            prop_assert!(jitter.up_to(cap) <= cap);
        }
    }
}
