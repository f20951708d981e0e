//! Uncontended acquire + release, beside tokio's and async-lock's semaphores
//! and the physical floor (a CAS decrement plus a `fetch_add` on a bare
//! atomic), all in one run.
//!
//! Run: `cargo bench --bench bulkhead`

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use watertight::clock::StdClock;
use watertight::Bulkhead;

/// The least any counting limiter must do: a CAS that takes one unit and an
/// add that gives it back.
fn floor_pair(count: &AtomicUsize) {
    let mut cur = count.load(Ordering::Relaxed);
    loop {
        if cur == 0 {
            panic!("floor: no unit free");
        }
        match count.compare_exchange_weak(cur, cur - 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(actual) => cur = actual,
        }
    }
    black_box(&count);
    count.fetch_add(1, Ordering::Release);
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended/try_acquire+drop");
    let floor = AtomicUsize::new(16);
    g.bench_function("floor", |b| b.iter(|| floor_pair(black_box(&floor))));
    let ours = Bulkhead::new("bench", 16, StdClock);
    g.bench_function("watertight", |b| {
        b.iter(|| drop(black_box(ours.try_acquire().unwrap())))
    });
    let tokio_sem = tokio::sync::Semaphore::new(16);
    g.bench_function("tokio", |b| {
        b.iter(|| drop(black_box(tokio_sem.try_acquire().unwrap())))
    });
    let lock_sem = async_lock::Semaphore::new(16);
    g.bench_function("async-lock", |b| {
        b.iter(|| drop(black_box(lock_sem.try_acquire().unwrap())))
    });
    g.finish();

    let mut g = c.benchmark_group("uncontended/acquire.await+drop (block_on)");
    g.bench_function("watertight", |b| {
        b.iter(|| {
            futures_lite::future::block_on(async { drop(black_box(ours.acquire().await.unwrap())) })
        })
    });
    g.bench_function("tokio", |b| {
        b.iter(|| {
            futures_lite::future::block_on(async {
                drop(black_box(tokio_sem.acquire().await.unwrap()))
            })
        })
    });
    g.bench_function("async-lock", |b| {
        b.iter(|| {
            futures_lite::future::block_on(async { drop(black_box(lock_sem.acquire().await)) })
        })
    });
    g.finish();
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
