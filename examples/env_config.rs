//! Per-system policies from environment variables, so operators retune a
//! system without a rebuild (`CLIENT_PAYMENTS__CB_FAILURE_RATE=40`): one
//! prefix per system, a double underscore between the system and the
//! setting.
//!
//! Run: `cargo run --example env_config --features serde,tokio`
//!
//! Each system reads the variables under its own prefix with
//! `envy::prefixed`, over defaults kept in code beside the system:
//!
//! ```text
//! CLIENT_PAYMENTS__POOL_SIZE=10            # max_concurrent = 10 × 0.8 = 8
//! CLIENT_PAYMENTS__CB_FAILURE_RATE=30      # percent
//! CLIENT_PAYMENTS__CB_OPEN_DURATION=45s    # or 45, 0.75, 750ms, 2m
//! CLIENT_INVENTORY__MAX_CONCURRENT=20
//! CLIENT_INVENTORY__MAX_WAIT=250ms
//! CLIENT_INVENTORY__CB_WINDOW_SIZE=100     # any window up to 1023
//! CLIENT_INVENTORY__RETRY_MAX_ATTEMPTS=3   # for idempotent calls only; 1: none
//! CLIENT_INVENTORY__RETRY_BUDGET_RATIO=20  # percent of a token per success
//! ```
//!
//! The policies are `HeapPolicy`s: their breaker window is sized from the
//! config when the policy is made (one allocation, then none per call), so
//! any `cb_window_size` the config accepts (1 to 1023) runs. A
//! `Policy<C>` would hold at most 64, its compile-time `N`, for targets
//! without a heap.
//!
//! With nothing set, every system gets its defaults. Try:
//!
//! ```text
//! CLIENT_INVENTORY__MAX_CONCURRENT=20 CLIENT_PAYMENTS__CB_FAILURE_RATE=40 \
//!     cargo run --example env_config --features serde,tokio
//! CLIENT_PAYMENTS__CB_WINDOW_SIZE=100 cargo run --example env_config --features serde,tokio
//! CLIENT_PAYMENTS__CB_FAILURE_RATE=0.5 cargo run --example env_config --features serde,tokio
//! CLIENT_PAYMENTS__CB_WINDOW_SIZE=2000 cargo run --example env_config --features serde,tokio
//! ```
//!
//! The last two are refused (exit code 2): thresholds are percent, and a
//! window holds at most 1023 calls. The keys are
//! listed in the docs of `PolicyConfig`'s `Deserialize` impl.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use watertight::clock::TokioClock;
use watertight::{HeapPolicy, PolicyConfig};

/// One downstream system: its name, its variables' prefix and its defaults
/// (as the variables would spell them, without the prefix).
struct System {
    name: &'static str,
    prefix: &'static str,
    defaults: &'static [(&'static str, &'static str)],
}

const SYSTEMS: [System; 2] = [
    System {
        name: "payments",
        prefix: "CLIENT_PAYMENTS__",
        // Critical, as `BreakerConfig::CRITICAL`: 30 %; a pool of 10 connections.
        defaults: &[
            ("POOL_SIZE", "10"),
            ("CALL_TIMEOUT", "5s"),
            ("CB_FAILURE_RATE", "30"),
            ("CB_SLOW_CALL_DURATION", "2.5s"),
        ],
    },
    System {
        name: "inventory",
        prefix: "CLIENT_INVENTORY__",
        defaults: &[("MAX_CONCURRENT", "16"), ("CALL_TIMEOUT", "2s")],
    },
];

/// The keys that size the bulkhead: an operator's one replaces the default's.
const SIZE_KEYS: [&str; 3] = ["POOL_SIZE", "MAX_CONCURRENT", "BULKHEAD_MAX_CONCURRENT"];

/// `system`'s config: its defaults, overridden by the variables under its
/// prefix in `vars`.
fn load(system: &System, vars: &[(String, String)]) -> Result<PolicyConfig, envy::Error> {
    let mut merged: BTreeMap<String, String> = system
        .defaults
        .iter()
        .map(|(k, v)| (format!("{}{k}", system.prefix), v.to_string()))
        .collect();
    for (key, value) in vars {
        let Some(short) = key.strip_prefix(system.prefix) else {
            continue;
        };
        if SIZE_KEYS.contains(&short) {
            for k in SIZE_KEYS {
                merged.remove(&format!("{}{k}", system.prefix));
            }
        }
        merged.insert(key.clone(), value.clone());
    }
    envy::prefixed(system.prefix).from_iter(merged)
}

fn show(d: Option<Duration>) -> String {
    d.map_or_else(|| "off".to_owned(), |d| format!("{d:?}"))
}

fn print_config(name: &str, c: &PolicyConfig) {
    let b = c.breaker();
    println!(
        "  {name:<10} max_concurrent={} max_wait={:?} call_timeout={:?}",
        c.max_concurrent(),
        c.max_wait(),
        c.call_timeout()
    );
    println!(
        "  {:<10} breaker: window={} min_calls={} failure_rate={}% slow_call_rate={}% \
         slow_call_duration={} open={:?} half_open_calls={} max_half_open_wait={}",
        "",
        b.window_size(),
        b.minimum_calls(),
        b.failure_rate_threshold(),
        b.slow_call_rate_threshold(),
        show(b.slow_call_duration()),
        b.open_duration(),
        b.half_open_calls(),
        show(b.max_half_open_wait()),
    );
}

fn main() -> ExitCode {
    // The environment is read once, here, before the runtime starts any
    // thread. Nothing below changes it: the typo demo adds its variables to
    // this copy. (Were it set with `std::env::set_var`, that too would have
    // to run before any thread exists: the call is safe to write in edition
    // 2021 but races with threads reading the environment, and is `unsafe`
    // from edition 2024 on.)
    let vars: Vec<(String, String)> = std::env::vars().collect();

    println!("effective config (defaults in code, overridden by CLIENT_<SYSTEM>__* variables):");
    let mut configs = Vec::new();
    for system in &SYSTEMS {
        match load(system, &vars) {
            Ok(config) => {
                print_config(system.name, &config);
                configs.push((system.name, config));
            }
            Err(e) => {
                eprintln!("  {}: {}: {e}", system.name, system.prefix);
                eprintln!("refusing to start with an invalid config");
                return ExitCode::from(2);
            }
        }
    }

    println!();
    println!("what an operator's typo gets (same loader, one variable added):");
    let typos = [
        ("CLIENT_PAYMENTS__CB_FAILURE_RATE", "0.3"),
        ("CLIENT_PAYMENTS__CB_OPEN_DURATION", "-30s"),
        ("CLIENT_INVENTORY__MAX_WAIT", "5s"),
        ("CLIENT_INVENTORY__CB_OPEN_DURATON", "30"),
        ("CLIENT_INVENTORY__CB_WINDOW_SIZE", "2000"),
    ];
    for (key, value) in typos {
        let system = SYSTEMS
            .iter()
            .find(|s| key.starts_with(s.prefix))
            .expect("a known prefix");
        let mut with_typo = vars.clone();
        with_typo.retain(|(k, _)| k != key);
        with_typo.push((key.to_owned(), value.to_owned()));
        match load(system, &with_typo) {
            Ok(_) => println!("  {key}={value}: accepted?!"),
            Err(e) => println!("  {key}={value}\n      -> {e}"),
        }
    }

    // One policy per system, on tokio's clock.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        println!();
        println!("policies:");
        for (name, config) in configs {
            // The breaker's window is allocated here, sized by the config.
            let policy: HeapPolicy<TokioClock> = match HeapPolicy::new(name, config, TokioClock) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("  {name}: {e}");
                    return ExitCode::from(2);
                }
            };
            let answer = policy.call(|| async { Ok::<_, ()>("ok") }).await;
            println!(
                "  {name:<10} {} slots, breaker {:?}, a call: {answer:?}",
                policy.bulkhead().capacity(),
                policy.breaker().state()
            );
        }
        ExitCode::SUCCESS
    })
}
