//! The rate limiters, ours beside governor's on the same quota, in the same
//! run.
//!
//! Every criterion iteration is one `check` (per thread, in the two-thread
//! groups: each of two threads makes `iters` checks at once, and the wall
//! time is divided by `iters`), so the time per iteration is ns per check.
//!
//! | group | what |
//! |---|---|
//! | `rate/check/admitted` | `check()` that conforms (a quota of `u32::MAX` a second, as large a burst), 1 thread; ours on `StdClock` (`watertight`), on `CoarseClock` (`watertight-coarse`) and on `QuantaClock` (`watertight-quanta`: the clock governor reads, quanta's scaled counter, so the limiters alone are compared); governor on its default clock (quanta) |
//! | `rate/check/refused` | `check()` that does not conform (1 an hour, burst 1, taken), 1 thread; `watertight-quanta-uncounted` is a limiter made `without_refusal_count()`, which counts nothing on a refusal, as governor's |
//! | `rate/check/2-threads-one-key` | `check()` admitted, two threads on one limiter (ours on `StdClock` and on quanta) |
//! | `rate/keyed/1-thread` | `check_key` admitted, one key: ours (`KeyedRateLimiter<u64, StdClock, 128>`, std's `RandomState`) and governor's `RateLimiter::keyed` (its default `DashMap` store); ours on `StdClock` and on quanta |
//! | `rate/keyed/2-threads-two-keys` | the same, two threads, each on a key of its own |
//! | `rate/keyed-map/1-thread` | the map choice: one GCRA step on one of 512 live `u64` keys under one `std::sync::Mutex`: our set-associative table (`RandomState` and `FnvState`; it reads a `ManualClock`, one load), `hashbrown::HashMap` (`RandomState`) and `heapless::FnvIndexMap<_, _, 1024>` (no clock read) |
//!
//! Run: `cargo bench --bench rate --features quanta` (a minute or two); quick:
//! `cargo bench --bench rate --features quanta -- --warm-up-time 1 --measurement-time 2`.

use std::hash::{BuildHasher, RandomState};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use watertight::clock::{CoarseClock, QuantaClock, StdClock};
use watertight::rate::{FnvState, KeyedRateLimiter, Quota, RateLimiter};

/// A quota every check conforms to: one cell a nanosecond, a burst of 4 s.
fn wide() -> Quota {
    Quota::per_second(u32::MAX)
}

fn gov_wide() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::MAX)
}

/// A quota spent after one check.
fn narrow() -> Quota {
    Quota::per_hour(1)
}

fn gov_narrow() -> governor::Quota {
    governor::Quota::per_hour(NonZeroU32::MIN)
}

fn check(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate/check/admitted");
    let ours = RateLimiter::new("bench", wide(), StdClock);
    g.bench_function("watertight", |b| {
        b.iter(|| black_box(&ours).check().unwrap())
    });
    let coarse = RateLimiter::new("bench", wide(), CoarseClock::new());
    g.bench_function("watertight-coarse", |b| {
        b.iter(|| black_box(&coarse).check().unwrap())
    });
    let quanta = RateLimiter::new("bench", wide(), QuantaClock::new());
    g.bench_function("watertight-quanta", |b| {
        b.iter(|| black_box(&quanta).check().unwrap())
    });
    let gov = governor::RateLimiter::direct(gov_wide());
    g.bench_function("governor", |b| b.iter(|| black_box(&gov).check().unwrap()));
    g.finish();

    let mut g = c.benchmark_group("rate/check/refused");
    let ours = RateLimiter::new("bench", narrow(), StdClock);
    ours.check().unwrap();
    g.bench_function("watertight", |b| {
        b.iter(|| black_box(black_box(&ours).check()).unwrap_err())
    });
    let coarse = RateLimiter::new("bench", narrow(), CoarseClock::new());
    coarse.check().unwrap();
    g.bench_function("watertight-coarse", |b| {
        b.iter(|| black_box(black_box(&coarse).check()).unwrap_err())
    });
    let quanta = RateLimiter::new("bench", narrow(), QuantaClock::new());
    quanta.check().unwrap();
    g.bench_function("watertight-quanta", |b| {
        b.iter(|| black_box(black_box(&quanta).check()).unwrap_err())
    });
    let uncounted = RateLimiter::new("bench", narrow(), QuantaClock::new()).without_refusal_count();
    uncounted.check().unwrap();
    g.bench_function("watertight-quanta-uncounted", |b| {
        b.iter(|| black_box(black_box(&uncounted).check()).unwrap_err())
    });
    let gov = governor::RateLimiter::direct(gov_narrow());
    gov.check().unwrap();
    g.bench_function("governor", |b| {
        b.iter(|| black_box(black_box(&gov).check()).unwrap_err())
    });
    g.finish();
}

/// Two threads each run `op(thread)` `iters` times, started together; the
/// wall time of the slower.
fn two_threads(iters: u64, op: &(dyn Fn(u64) + Sync)) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(t);
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

fn two_threads_one_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate/check/2-threads-one-key");
    let ours = RateLimiter::new("bench", wide(), StdClock);
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| two_threads(iters, &|_| black_box(&ours).check().unwrap()))
    });
    let quanta = RateLimiter::new("bench", wide(), QuantaClock::new());
    g.bench_function("watertight-quanta", |b| {
        b.iter_custom(|iters| two_threads(iters, &|_| black_box(&quanta).check().unwrap()))
    });
    let gov = governor::RateLimiter::direct(gov_wide());
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| two_threads(iters, &|_| black_box(&gov).check().unwrap()))
    });
    g.finish();
}

type Keyed = KeyedRateLimiter<u64, StdClock, 128>;
type KeyedQuanta = KeyedRateLimiter<u64, QuantaClock, 128>;

fn keyed(c: &mut Criterion) {
    let ours: Box<Keyed> = Box::new(KeyedRateLimiter::new("bench", wide(), StdClock));
    let quanta: Box<KeyedQuanta> =
        Box::new(KeyedRateLimiter::new("bench", wide(), QuantaClock::new()));
    let gov = governor::RateLimiter::keyed(gov_wide());

    let mut g = c.benchmark_group("rate/keyed/1-thread");
    g.bench_function("watertight", |b| {
        b.iter(|| black_box(&*ours).check_key(black_box(&1)).unwrap())
    });
    g.bench_function("watertight-quanta", |b| {
        b.iter(|| black_box(&*quanta).check_key(black_box(&1)).unwrap())
    });
    g.bench_function("governor", |b| {
        b.iter(|| black_box(&gov).check_key(black_box(&1)).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("rate/keyed/2-threads-two-keys");
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, &|t| {
                black_box(&*ours).check_key(black_box(&(t + 1))).unwrap()
            })
        })
    });
    g.bench_function("watertight-quanta", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, &|t| {
                black_box(&*quanta).check_key(black_box(&(t + 1))).unwrap()
            })
        })
    });
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, &|t| {
                black_box(&gov).check_key(black_box(&(t + 1))).unwrap()
            })
        })
    });
    g.finish();
}

/// The GCRA step on a stored TAT (`now` fixed, a wide quota).
#[inline(always)]
fn step(tat: &mut u64, now: u64) {
    let start = (*tat).max(now);
    *tat = start + 1;
}

/// Keys the map group keeps live.
const MAP_KEYS: u64 = 512;

fn keyed_map(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate/keyed-map/1-thread");
    // Ours: time fixed at 0 on a ManualClock, so every key stays live.
    let clock = watertight::clock::ManualClock::new();
    let ours_rs: Box<KeyedRateLimiter<u64, &watertight::clock::ManualClock, 128, RandomState>> =
        Box::new(KeyedRateLimiter::with_hasher(
            "bench",
            wide(),
            &clock,
            RandomState::new(),
        ));
    let ours_fnv: Box<KeyedRateLimiter<u64, &watertight::clock::ManualClock, 128, FnvState>> =
        Box::new(KeyedRateLimiter::with_hasher(
            "bench",
            wide(),
            &clock,
            FnvState,
        ));
    for k in 0..MAP_KEYS {
        // A full set refuses a key: the rest are enough to measure.
        let _ = ours_rs.check_key(&k);
        let _ = ours_fnv.check_key(&k);
    }
    let mut k = 0u64;
    g.bench_function("watertight-set-assoc-randomstate", |b| {
        b.iter(|| {
            k = (k + 1) % MAP_KEYS;
            let _ = black_box(ours_rs.check_key(black_box(&k)));
        })
    });
    g.bench_function("watertight-set-assoc-fnv", |b| {
        b.iter(|| {
            k = (k + 1) % MAP_KEYS;
            let _ = black_box(ours_fnv.check_key(black_box(&k)));
        })
    });
    let hb: Mutex<hashbrown::HashMap<u64, u64, RandomState>> = Mutex::new(
        hashbrown::HashMap::with_capacity_and_hasher(1024, RandomState::new()),
    );
    for k in 0..MAP_KEYS {
        hb.lock().unwrap().insert(k, 0);
    }
    g.bench_function("hashbrown", |b| {
        b.iter(|| {
            k = (k + 1) % MAP_KEYS;
            let mut m = black_box(&hb).lock().unwrap();
            step(m.entry(black_box(k)).or_insert(0), black_box(0));
        })
    });
    let hl: Mutex<heapless::index_map::FnvIndexMap<u64, u64, 1024>> =
        Mutex::new(heapless::index_map::FnvIndexMap::new());
    for k in 0..MAP_KEYS {
        hl.lock().unwrap().insert(k, 0).unwrap();
    }
    g.bench_function("heapless-fnvindexmap", |b| {
        b.iter(|| {
            k = (k + 1) % MAP_KEYS;
            let mut m = black_box(&hl).lock().unwrap();
            match m.get_mut(&black_box(k)) {
                Some(tat) => step(tat, black_box(0)),
                None => {
                    let _ = m.insert(k, 1);
                }
            }
        })
    });
    // For reading it: the hash alone.
    let rs = RandomState::new();
    g.bench_function("hash-only-randomstate", |b| {
        b.iter(|| black_box(rs.hash_one(black_box(k))))
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    check(&mut c);
    two_threads_one_key(&mut c);
    keyed(&mut c);
    keyed_map(&mut c);
    c.final_summary();
}
