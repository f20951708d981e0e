//! `BreakerConfig` and `PolicyConfig` from hostile input, the two ways a
//! service reads them: JSON (standing for any self-describing format) and
//! environment variables (envy, from `KEY=VALUE` lines, never the real
//! environment). Either a typed error, whose message can be shown, or a
//! config that the constructors accept and that works; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watertight::clock::ManualClock;
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

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match how % 4 {
        0 => breaker_config(serde_json::from_str::<BreakerConfig>(text)),
        1 => policy_config(serde_json::from_str::<PolicyConfig>(text)),
        2 => breaker_config(envy::from_iter::<_, BreakerConfig>(env(text))),
        _ => policy_config(envy::from_iter::<_, PolicyConfig>(env(text))),
    }
});
