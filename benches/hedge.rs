//! What hedging costs a call that needs no hedge (criterion): a policy
//! call whose first attempt answers at once, through `call` and through
//! `call_hedged` with a fixed delay and with a percentile delay read from a
//! full histogram (2000 samples), each on its own `Policy<&ManualClock>`
//! from the same config, polled by `futures_lite::future::block_on`. And
//! the histogram alone: `record` and `percentile` (976 buckets, both
//! windows full). Every criterion iteration is one call.
//!
//! | group | what |
//! |---|---|
//! | `hedge/first-answers` | `call(ready)`, `call_hedged(&fixed, ready)`, `call_hedged(&p95, ready)` |
//! | `hedge/histogram` | `record(d)`, `percentile(P95)` |
//!
//! Run: `cargo bench --bench hedge -- --warm-up-time 1 --measurement-time 3`.
//! The table and what it shows: `src/guide/hedging.rs`.

use std::future::{ready, Ready};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use futures_lite::future::block_on;
use watertight::clock::ManualClock;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, LatencyHistogram, Percentile};
use watertight::policy::{Policy, PolicyConfig};

fn policy(clock: &ManualClock) -> Policy<&ManualClock> {
    Policy::new("bench", PolicyConfig::builder(64).build().unwrap(), clock).unwrap()
}

fn answer() -> Ready<Result<u32, ()>> {
    ready(Ok(7))
}

/// A histogram with both windows full: 2000 latencies from 1 to 100 ms.
fn fill(h: &LatencyHistogram) {
    for i in 0..2000u64 {
        h.record(Duration::from_micros(1000 + (i * 7919) % 99_000));
    }
}

fn first_answers(c: &mut Criterion) {
    let clock = ManualClock::new();
    let (plain, fixed_p, p95_p) = (policy(&clock), policy(&clock), policy(&clock));
    let fixed = Hedge::new(
        "bench",
        HedgeConfig::builder()
            .delay(HedgeDelay::Fixed(Duration::from_millis(20)))
            .build()
            .unwrap(),
    );
    let p95 = Hedge::new("bench", HedgeConfig::DEFAULT);
    fill(p95.histogram());
    let mut g = c.benchmark_group("hedge/first-answers");
    g.bench_function("call", |b| {
        b.iter(|| block_on(black_box(&plain).call(answer)).unwrap())
    });
    g.bench_function("call_hedged_fixed", |b| {
        b.iter(|| {
            block_on(
                black_box(&fixed_p)
                    .call_hedged(&fixed, answer)
                    .into_future(),
            )
            .unwrap()
        })
    });
    g.bench_function("call_hedged_p95", |b| {
        b.iter(|| block_on(black_box(&p95_p).call_hedged(&p95, answer).into_future()).unwrap())
    });
    g.finish();
    assert_eq!(
        fixed.metrics().sent() + p95.metrics().sent(),
        0,
        "a hedge was sent"
    );
    assert_eq!(
        plain.bulkhead().in_flight() + p95_p.bulkhead().in_flight(),
        0
    );
}

fn histogram(c: &mut Criterion) {
    let h = LatencyHistogram::new(1000);
    fill(&h);
    let mut g = c.benchmark_group("hedge/histogram");
    let mut i = 0u64;
    g.bench_function("record", |b| {
        b.iter(|| {
            i += 1;
            h.record(black_box(Duration::from_micros(1000 + (i * 7919) % 99_000)));
        })
    });
    g.bench_function("percentile", |b| {
        b.iter(|| black_box(&h).percentile(Percentile::P95).unwrap())
    });
    g.finish();
}

use std::future::IntoFuture;

criterion_group!(benches, first_answers, histogram);
criterion_main!(benches);
