//! The stale-if-error cache's table beside the crates it was chosen
//! against for `std`, at 1,024 keys (`u64` keys and values), one thread:
//!
//! | group | what |
//! |---|---|
//! | `stale/insert/1k-keys` | `record` of one of 1,024 keys already held (the steady state: an answer replaced) |
//! | `stale/insert/4k-keys` | the same over 4,096 keys: most records evict |
//! | `stale/get/1k-keys` | `serve` of one of 1,024 keys held: found, aged, cloned |
//!
//! Ours is `StaleCache<u64, u64, StdClock, 128>` (std's `RandomState`:
//! SipHash with random keys), and the same with `FnvState` to show what
//! the hash costs;
//! the peers are quick_cache's and mini-moka's `sync::Cache` with 1,024
//! entries, holding `(value, std::time::Instant)` and computing the age on
//! a hit, as ours does. Run with
//! `cargo bench --bench stale -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use watertight::clock::StdClock;
use watertight::fallback::{FnvState, StaleCache};

const KEYS: u64 = 1024;
const MAX_STALE: Duration = Duration::from_secs(3600);

fn ours() -> Box<StaleCache<u64, u64, StdClock, 128>> {
    Box::new(StaleCache::new("bench", MAX_STALE, StdClock))
}

/// The same table hashing with FNV-1a (unkeyed): what SipHash costs.
fn ours_fnv() -> Box<StaleCache<u64, u64, StdClock, 128, FnvState>> {
    Box::new(StaleCache::with_hasher(
        "bench", MAX_STALE, StdClock, FnvState,
    ))
}

fn quick() -> quick_cache::sync::Cache<u64, (u64, Instant)> {
    quick_cache::sync::Cache::new(KEYS as usize)
}

fn moka() -> mini_moka::sync::Cache<u64, (u64, Instant)> {
    mini_moka::sync::Cache::new(KEYS)
}

fn insert(c: &mut Criterion, name: &str, keys: u64) {
    let mut g = c.benchmark_group(name);
    let cache = ours();
    let mut k = 0u64;
    g.bench_function("watertight", |b| {
        b.iter(|| {
            k = (k + 1) % keys;
            cache.record(black_box(k), k);
        })
    });
    let cache = ours_fnv();
    g.bench_function("watertight-fnv", |b| {
        b.iter(|| {
            k = (k + 1) % keys;
            cache.record(black_box(k), k);
        })
    });
    let cache = quick();
    g.bench_function("quick_cache", |b| {
        b.iter(|| {
            k = (k + 1) % keys;
            cache.insert(black_box(k), (k, Instant::now()));
        })
    });
    let cache = moka();
    g.bench_function("mini-moka", |b| {
        b.iter(|| {
            k = (k + 1) % keys;
            cache.insert(black_box(k), (k, Instant::now()));
        })
    });
    g.finish();
}

fn inserts(c: &mut Criterion) {
    insert(c, "stale/insert/1k-keys", KEYS);
    insert(c, "stale/insert/4k-keys", 4 * KEYS);
}

fn gets(c: &mut Criterion) {
    let mut g = c.benchmark_group("stale/get/1k-keys");
    // Ours holds 1,024 keys in sets of 8: a few sets fill before others,
    // so fill with 896 keys (7 of 8 ways on average) and read those.
    let held = KEYS * 7 / 8;
    let cache = ours();
    for k in 0..held {
        cache.record(k, k);
    }
    assert!((0..held).filter(|k| cache.serve(k).is_some()).count() as u64 > held * 9 / 10);
    let mut k = 0u64;
    g.bench_function("watertight", |b| {
        b.iter(|| {
            k = (k + 1) % held;
            black_box(cache.serve(black_box(&k)))
        })
    });
    let cache = ours_fnv();
    for k in 0..held {
        cache.record(k, k);
    }
    g.bench_function("watertight-fnv", |b| {
        b.iter(|| {
            k = (k + 1) % held;
            black_box(cache.serve(black_box(&k)))
        })
    });
    let cache = quick();
    for k in 0..held {
        cache.insert(k, (k, Instant::now()));
    }
    g.bench_function("quick_cache", |b| {
        b.iter(|| {
            k = (k + 1) % held;
            black_box(
                cache
                    .get(black_box(&k))
                    .map(|(v, at)| (v, at.elapsed()))
                    .filter(|(_, age)| *age <= MAX_STALE),
            )
        })
    });
    let cache = moka();
    for k in 0..held {
        cache.insert(k, (k, Instant::now()));
    }
    g.bench_function("mini-moka", |b| {
        b.iter(|| {
            k = (k + 1) % held;
            black_box(
                cache
                    .get(black_box(&k))
                    .map(|(v, at)| (v, at.elapsed()))
                    .filter(|(_, age)| *age <= MAX_STALE),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, inserts, gets);
criterion_main!(benches);
