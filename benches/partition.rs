//! The partitioned bulkhead's fast path beside the plain bulkhead's, in the
//! same run: one `try_acquire` + drop per criterion iteration, one thread.
//!
//! | group | what |
//! |---|---|
//! | `partition/try_acquire+drop` | `plain`: `Bulkhead::try_acquire` on 16 slots; `own-room`: `PartitionedBulkhead::try_acquire(0)` on two classes of 8, class 0's room free; `borrowed`: the same with class 0's room held full, so each call borrows a slot of class 1's room; `tokio`: `tokio::sync::Semaphore::try_acquire` on 16 permits, the semaphore users would otherwise reach for (one per class) |
//!
//! Run: `cargo bench --bench partition` (under a minute); quick:
//! `cargo bench --bench partition -- --warm-up-time 1 --measurement-time 2`.
//! After criterion's groups it times the same rows in 21 interleaved
//! rounds of 2 000 000 pairs and prints each one's median and its ratio to
//! `plain` (medians of interleaved rounds are steadier than criterion's
//! one-row-at-a-time runs on a shared machine).

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use watertight::clock::StdClock;
use watertight::partition::PartitionedBulkhead;
use watertight::Bulkhead;

type Parts = PartitionedBulkhead<StdClock, 2>;

fn plain() -> Bulkhead<StdClock> {
    Bulkhead::new("bench", 16, StdClock)
}

fn parts() -> Parts {
    PartitionedBulkhead::new("bench", [("critical", 8), ("batch", 8)], StdClock)
}

#[inline(never)]
fn plain_pair(b: &Bulkhead<StdClock>) {
    drop(black_box(black_box(b).try_acquire().unwrap()));
}

#[inline(never)]
fn class_pair(p: &Parts) {
    drop(black_box(black_box(p).try_acquire(0).unwrap()));
}

#[inline(never)]
fn tokio_pair(s: &tokio::sync::Semaphore) {
    drop(black_box(black_box(s).try_acquire().unwrap()));
}

fn criterion_rows(c: &mut Criterion) {
    let mut g = c.benchmark_group("partition/try_acquire+drop");
    let b = plain();
    g.bench_function("plain", |bn| bn.iter(|| plain_pair(&b)));
    let p = parts();
    g.bench_function("own-room", |bn| bn.iter(|| class_pair(&p)));
    let full = parts();
    let held: Vec<_> = (0..8).map(|_| full.try_acquire(0).unwrap()).collect();
    g.bench_function("borrowed", |bn| bn.iter(|| class_pair(&full)));
    drop(held);
    let s = tokio::sync::Semaphore::new(16);
    g.bench_function("tokio", |bn| bn.iter(|| tokio_pair(&s)));
    g.finish();
}

fn timed(calls: u64, f: &dyn Fn()) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The rows in interleaved rounds: each round times every row once.
fn rounds(rounds: usize, calls: u64) {
    let b = plain();
    let p = parts();
    let full = parts();
    let _held: Vec<_> = (0..8).map(|_| full.try_acquire(0).unwrap()).collect();
    let s = tokio::sync::Semaphore::new(16);
    let rows: [(&str, &dyn Fn()); 4] = [
        ("plain", &|| plain_pair(&b)),
        ("own-room", &|| class_pair(&p)),
        ("borrowed", &|| class_pair(&full)),
        ("tokio", &|| tokio_pair(&s)),
    ];
    let mut seen: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in rows.iter().enumerate() {
            seen[i].push(timed(calls, *f));
        }
    }
    let medians: Vec<f64> = seen.into_iter().map(median).collect();
    println!();
    println!("| try_acquire + drop | median of {rounds} rounds of {calls} | ÷ plain |");
    println!("|---|---|---|");
    for ((name, _), m) in rows.iter().zip(&medians) {
        println!("| {name} | {m:.2} ns | {:.2}× |", m / medians[0]);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    criterion_rows(&mut c);
    c.final_summary();
    // `cargo bench -- --list` (and `cargo test --benches`) run no timings.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return;
    }
    rounds(21, 2_000_000);
}
