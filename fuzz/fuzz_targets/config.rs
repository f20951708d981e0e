//! `BreakerConfig`, `PolicyConfig` and `PartitionShares` from hostile
//! input, the two ways a service reads them: JSON (standing for any
//! self-describing format) and environment variables (envy, from
//! `KEY=VALUE` lines, never the real environment). Either a typed error,
//! whose message can be shown, or a config that the constructors accept
//! and that works (shares: a bulkhead whose capacity is the sum of its
//! shares, as the value says); never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watertight::clock::ManualClock;
use watertight::partition::{PartitionShares, PartitionedBulkhead};
use watertight::policy::{Policy, PolicyConfig};
use watertight::{BreakerConfig, HeapBreaker, HeapPolicy};

/// `KEY=VALUE` lines as envy reads them (keys are matched lowercased).
fn env(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn breaker_config(r: Result<BreakerConfig, impl std::fmt::Display>) {
    match r {
        Ok(config) => {
            let clock = ManualClock::new();
            let b = HeapBreaker::try_new("fuzz", config, &clock).unwrap_or_else(|e| {
                panic!("{config:?} was accepted but the breaker refuses it: {e}")
            });
            // It works: calls are admitted and outcomes recorded.
            for _ in 0..config.window_size() {
                if let Ok(p) = b.try_acquire() {
                    p.failure();
                }
            }
            let _ = b.metrics();
        }
        Err(e) => drop(e.to_string()),
    }
}

fn policy_config(r: Result<PolicyConfig, impl std::fmt::Display>) {
    match r {
        Ok(config) => {
            let clock = ManualClock::new();
            let p: HeapPolicy<&ManualClock> =
                Policy::new("fuzz", config, &clock).unwrap_or_else(|e| {
                    panic!("{config:?} was accepted but the policy refuses it: {e}")
                });
            let answer = futures_lite::future::block_on(p.call(|| async { Ok::<_, ()>(7) }));
            assert_eq!(
                answer,
                Ok(7),
                "{config:?}: a first call through a fresh policy"
            );
        }
        Err(e) => drop(e.to_string()),
    }
}

fn partition_shares<const K: usize>(r: Result<PartitionShares<K>, impl std::fmt::Display>) {
    match r {
        Ok(shares) => {
            let clock = ManualClock::new();
            let names: [&'static str; K] = std::array::from_fn(|_| "class");
            let b = PartitionedBulkhead::from_shares("fuzz", names, shares, &clock).unwrap_or_else(
                |e| panic!("{shares:?} was accepted but the bulkhead refuses it: {e}"),
            );
            let each: [usize; K] = std::array::from_fn(|k| b.share(k));
            assert_eq!(shares.class_slots(), Some(each), "{shares:?}");
            assert!(each.iter().all(|&s| s >= 1), "{shares:?}: {each:?}");
            assert_eq!(b.capacity(), each.iter().sum::<usize>(), "{shares:?}");
            assert_eq!(b.capacity(), shares.capacity(), "{shares:?}");
            for k in 0..K {
                let room = b.room(k).unwrap();
                assert_eq!(room.max_waiters(), shares.max_waiters(), "{shares:?}");
                // Each class is admitted into its own room first.
                let p = b.try_acquire(k).unwrap();
                assert!(!p.is_borrowed(), "{shares:?}: class {k}");
            }
        }
        Err(e) => drop(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // The seeds' first bytes (0 to 3) keep their meaning.
    match how % 8 {
        0 => breaker_config(serde_json::from_str::<BreakerConfig>(text)),
        1 => policy_config(serde_json::from_str::<PolicyConfig>(text)),
        2 => breaker_config(envy::from_iter::<_, BreakerConfig>(env(text))),
        3 => policy_config(envy::from_iter::<_, PolicyConfig>(env(text))),
        4 => partition_shares(serde_json::from_str::<PartitionShares<3>>(text)),
        5 => partition_shares(envy::from_iter::<_, PartitionShares<3>>(env(text))),
        6 => partition_shares(serde_json::from_str::<PartitionShares<1>>(text)),
        _ => partition_shares(envy::from_iter::<_, PartitionShares<2>>(env(text))),
    }
});
