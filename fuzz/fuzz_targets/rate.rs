//! The rate limiter from hostile input, two ways, as the first byte says:
//!
//! - **parsing**: a `Quota` and a `PolicyConfig` with a rate, from JSON and
//!   from environment variables (envy, from `KEY=VALUE` lines): either a
//!   typed error, whose message can be shown, or a quota that works as its
//!   accessors say (the burst admitted at once from idle, one more refused
//!   with `retry_after` exactly one emission interval, more cells than the
//!   burst `ExceedsBurst`); never a panic;
//! - **the limiter against its reference**: a quota and a sequence of
//!   `check_n`, waits (with and without deadlines), polls, cancellations
//!   and clock advances on `ManualClock`, run by the model test's harness
//!   (`tests/model/rate.rs`) next to its sequential GCRA in `u128`: every
//!   decision, hint and counter equal, and in every window of length `w`
//!   at most `burst + ⌊w / T⌋` cells admitted. Any disagreement panics with
//!   the step.
#![no_main]

#[path = "../../tests/common/mod.rs"]
mod common;
#[macro_use]
#[path = "../../tests/model/check.rs"]
mod check;
#[path = "../../tests/model/rate.rs"]
mod model;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use model::{Op, Span, Spec};
use watertight::clock::{Instant, ManualClock};
use watertight::policy::{Policy, PolicyConfig};
use watertight::rate::{Quota, RateError, RateLimiter, HORIZON};

const MAX_OPS: usize = 256;

/// `KEY=VALUE` lines as envy reads them (keys are matched lowercased).
fn env(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A quota that was accepted works as its accessors say.
fn works(quota: Quota) {
    let (cells, burst) = (quota.cells(), quota.burst_size());
    let t = quota.emission_interval();
    assert!(cells >= 1 && burst >= 1, "{quota:?}");
    assert!(!t.is_zero(), "{quota:?}");
    // Rounded up: `cells` intervals never take less than the period.
    assert!(
        t.as_nanos() * u128::from(cells) >= quota.period().as_nanos(),
        "{quota:?}"
    );
    let clock = ManualClock::new();
    let r = RateLimiter::new("fuzz", quota, &clock);
    if let Some(over) = burst.checked_add(1) {
        assert_eq!(
            r.check_n(over),
            Err(RateError::ExceedsBurst {
                requested: over,
                burst
            })
        );
    }
    assert_eq!(r.check_n(burst), Ok(()), "{quota:?}: the burst from idle");
    let next = r.check();
    // The schedule ends at `HORIZON` (2^60 − 1 ns), not at `u64::MAX`: a
    // cell whose arrival time would fall past it never conforms.
    if (u128::from(burst) + 1) * t.as_nanos() <= HORIZON.since_origin().as_nanos() {
        assert_eq!(
            next.map_err(|e| e.retry_after()),
            Err(Some(t)),
            "{quota:?}: the next cell, one interval later"
        );
    } else {
        // Past the clock's end of time: refused, never admitted.
        assert!(
            matches!(next, Err(RateError::Limited(n)) if n.ready_at() == Instant::MAX),
            "{quota:?}: {next:?}"
        );
    }
    let m = r.metrics();
    assert_eq!((m.admitted, m.refused), (1, 1), "{quota:?}");
}

fn quota(parsed: core::result::Result<Quota, impl std::fmt::Display>) {
    match parsed {
        Ok(q) => works(q),
        Err(e) => drop(e.to_string()),
    }
}

fn policy(parsed: core::result::Result<PolicyConfig, impl std::fmt::Display>) {
    match parsed {
        Ok(config) => {
            let clock = ManualClock::new();
            let p: watertight::HeapPolicy<&ManualClock> = Policy::new("fuzz", config, &clock)
                .unwrap_or_else(|e| {
                    panic!("{config:?} was accepted but the policy refuses it: {e}")
                });
            assert_eq!(p.rate_limiter().map(|r| r.quota()), config.rate());
            let answer = futures_lite::future::block_on(p.call(|| async { Ok::<_, ()>(7) }));
            assert_eq!(
                answer,
                Ok(7),
                "{config:?}: a first call through a fresh policy"
            );
            if let Some(q) = config.rate() {
                works(q);
            }
        }
        Err(e) => drop(e.to_string()),
    }
}

fn span(u: &mut Unstructured<'_>) -> Result<Span> {
    Ok(Span {
        quarters: u.int_in_range(0..=40u8)?,
        nanos: u.int_in_range(0..=3u8)?,
    })
}

fn op(u: &mut Unstructured<'_>) -> Result<Op> {
    Ok(match u.int_in_range(0..=10u8)? {
        0..=2 => Op::Advance(span(u)?),
        3 => Op::EndOfTime(span(u)?),
        4..=5 => Op::Check(u.int_in_range(0..=6u32)?),
        6..=7 => Op::Wait {
            n: u.int_in_range(0..=6u32)?,
            deadline: if u.arbitrary::<bool>()? {
                Some(span(u)?)
            } else {
                None
            },
            lazy: u.arbitrary()?,
        },
        8..=9 => Op::Poll(u.arbitrary()?),
        _ => Op::Cancel(u.arbitrary()?),
    })
}

/// A valid quota's numbers: the emission interval times a span's 40
/// quarters and the burst stay far inside `u64` nanoseconds.
fn spec(u: &mut Unstructured<'_>) -> Result<Spec> {
    let cells = u.int_in_range(1..=8u32)?;
    let period = match u.int_in_range(0..=6u8)? {
        0 => 1_000_000_000,
        1 => 60_000_000_000,
        2 => 1,
        3 => 7,
        4 => 10,
        5 => 1_000,
        _ => u.int_in_range(1..=1u64 << 40)?,
    };
    let burst = u.int_in_range(1..=8u32)?;
    Ok(Spec {
        cells,
        period,
        burst,
    })
}

fn differential(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(spec) = spec(&mut u) else {
        return;
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < MAX_OPS {
        match op(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    if let Err(m) = model::run(spec, &ops) {
        panic!("{spec}: {m}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    if how % 4 == 3 {
        return differential(rest);
    }
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match how % 4 {
        0 => quota(serde_json::from_str::<Quota>(text)),
        1 => quota(envy::from_iter::<_, Quota>(env(text))),
        _ => {
            policy(serde_json::from_str::<PolicyConfig>(text));
            policy(envy::from_iter::<_, PolicyConfig>(env(text)));
        }
    }
});
