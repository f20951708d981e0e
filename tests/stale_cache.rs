#![cfg(not(loom))]
//! `fallback::StaleCache` through the public API, on a `ManualClock`: an
//! `Ok` answer is recorded and served fresh; a refusal is answered with
//! the last answer and its exact age, up to the max staleness and not a
//! nanosecond past it; the call's own error is never covered up; a miss
//! gives the refusal back as it was; the table never holds more than its
//! capacity, evicting the least recently recorded key; threads on one
//! cache keep the counters whole.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future::block_on;
use watertight::clock::ManualClock;
use watertight::fallback::{FnvState, Served, Stale, StaleCache, WAYS};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::Rejection;

const SEC: Duration = Duration::from_secs(1);
const NS: Duration = Duration::from_nanos(1);

fn pricing(clock: &ManualClock) -> Policy<&ManualClock> {
    Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), clock).unwrap()
}

#[test]
fn a_refusal_is_answered_with_the_last_good_answer_and_its_age() {
    let clock = ManualClock::new();
    let p = pricing(&clock);
    let prices: StaleCache<u32, u64, _, 4> = StaleCache::new("prices", 60 * SEC, &clock);

    let fresh = block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(4200) })));
    assert_eq!(fresh, Ok(Served::Fresh(4200)));
    clock.advance(20 * SEC);
    let fresh = block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(4300) })));
    assert_eq!(fresh, Ok(Served::Fresh(4300)));

    clock.advance(42 * SEC);
    p.breaker().force_open();
    let made = Cell::new(false);
    let stale = block_on(prices.call(
        7,
        p.call(|| {
            made.set(true);
            async { Ok::<u64, &str>(1) }
        }),
    ));
    assert!(!made.get(), "refused: the call was not made");
    // The newer answer, 42 s old: "price 42 s old".
    assert_eq!(
        stale,
        Ok(Served::Stale(Stale {
            value: 4300,
            age: 42 * SEC
        }))
    );
    let m = prices.metrics();
    assert_eq!((m.recorded, m.served_stale, m.entries), (2, 1, 1));
}

#[test]
fn an_answer_is_served_up_to_the_max_staleness_and_not_past_it() {
    let clock = ManualClock::new();
    let p = pricing(&clock);
    let prices: StaleCache<u32, u64, _, 1> = StaleCache::new("prices", 60 * SEC, &clock);
    block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(4200) }))).unwrap();
    p.breaker().force_open();

    clock.advance(60 * SEC);
    let at_max = block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(1) })));
    assert_eq!(at_max.unwrap().age(), Some(60 * SEC));

    clock.advance(NS);
    let past = block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(1) })));
    // A miss: the refusal comes back as the policy gave it.
    let err = past.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    let m = prices.metrics();
    assert_eq!((m.served_stale, m.missed_too_old, m.entries), (1, 1, 0));
    // Dropped: the next miss is an absent key.
    assert_eq!(prices.serve(&7), None);
    assert_eq!(prices.metrics().missed_absent, 1);
}

#[test]
fn the_calls_own_error_is_never_covered_by_a_stale_answer() {
    let clock = ManualClock::new();
    let p = pricing(&clock);
    let prices: StaleCache<u32, u64, _, 1> = StaleCache::new("prices", 60 * SEC, &clock);
    block_on(prices.call(7, p.call(|| async { Ok::<u64, &str>(4200) }))).unwrap();
    let err =
        block_on(prices.call(7, p.call(|| async { Err::<u64, _>("no such sku") }))).unwrap_err();
    assert_eq!(err.into_inner(), Some("no such sku"));
    let m = prices.metrics();
    assert_eq!(
        (m.served_stale, m.missed_absent, m.missed_too_old),
        (0, 0, 0)
    );
    assert_eq!(m.recorded, 1, "an error is not recorded");
}

#[test]
fn a_key_never_recorded_gives_the_refusal_back() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    let p: Policy<_> = Policy::new("stock", config, &clock).unwrap();
    let levels: StaleCache<u32, u32, _, 1> = StaleCache::new("stock", 60 * SEC, &clock);
    block_on(levels.call(1, p.call(|| async { Ok::<u32, ()>(5) }))).unwrap();
    let _busy = p.bulkhead().try_acquire().unwrap();
    let err = block_on(levels.call(2, p.call(|| async { Ok::<u32, ()>(5) }))).unwrap_err();
    assert_eq!(
        (err.system(), *err.kind()),
        ("stock", ErrorKind::BulkheadFull)
    );
    // Key 1 has one: served.
    let served = block_on(levels.call(1, p.call(|| async { Ok::<u32, ()>(6) }))).unwrap();
    assert_eq!(
        served,
        Served::Stale(Stale {
            value: 5,
            age: Duration::ZERO
        })
    );
    assert_eq!(levels.metrics().missed_absent, 1);
}

#[test]
fn the_table_holds_its_capacity_and_evicts_the_least_recently_recorded() {
    let clock = ManualClock::new();
    let c: StaleCache<u32, u32, _, 1, FnvState> =
        StaleCache::with_hasher("one-set", 60 * SEC, &clock, FnvState);
    for k in 0..WAYS as u32 {
        c.record(k, k);
    }
    // Key 0 recorded again: now the most recent; key 1 is the least.
    c.record(0, 100);
    c.record(99, 99);
    let m = c.metrics();
    assert_eq!((m.entries, m.capacity, m.evictions), (WAYS, WAYS, 1));
    assert_eq!(c.serve(&1), None);
    assert_eq!(c.serve(&0).map(|s| s.value), Some(100));
    assert_eq!(c.serve(&99).map(|s| s.value), Some(99));

    let many: StaleCache<u32, u32, _, 16> = StaleCache::new("many", 60 * SEC, &clock);
    // Fewer under Miri, which runs them far slower.
    let keys = if cfg!(miri) { 400 } else { 10_000 };
    for k in 0..keys {
        many.record(k, k);
    }
    let m = many.metrics();
    assert!(m.entries <= 16 * WAYS, "{m:?}");
    assert_eq!(m.evictions, keys as usize - m.entries);
}

#[test]
fn threads_on_one_cache_keep_its_counters_whole() {
    let clock = Arc::new(ManualClock::new());
    let cache: Arc<StaleCache<u64, u64, _, 4>> =
        Arc::new(StaleCache::new("shared", 60 * SEC, clock));
    const THREADS: u64 = 4;
    // Fewer under Miri, which runs them far slower.
    const OPS: u64 = if cfg!(miri) { 100 } else { 2_000 };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let cache = Arc::clone(&cache);
            std::thread::spawn(move || {
                for i in 0..OPS {
                    let k = (t * 7 + i) % 64;
                    if i % 2 == 0 {
                        cache.record(k, k * 10);
                    } else if let Some(s) = cache.serve(&k) {
                        assert_eq!(s.value, k * 10, "a key's own value");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let m = cache.metrics();
    assert_eq!(m.recorded, (THREADS * OPS / 2) as usize);
    assert_eq!(
        m.served_stale + m.missed_absent + m.missed_too_old,
        (THREADS * OPS / 2) as usize
    );
    assert!(m.entries <= m.capacity);
    assert_eq!(m.missed_too_old, 0, "time never moved");
}

#[cfg(feature = "tower")]
#[test]
fn the_tower_layer_serves_a_refused_request_from_the_cache_by_its_key() {
    use tower::{Layer, ServiceExt};
    use watertight::tower::{PolicyLayer, StaleCacheLayer};

    let clock = Arc::new(ManualClock::new());
    let p: Arc<Policy<_>> = Arc::new(
        Policy::new(
            "pricing",
            PolicyConfig::builder(4).build().unwrap(),
            clock.clone(),
        )
        .unwrap(),
    );
    let prices: Arc<StaleCache<u32, u64, _, 4>> =
        Arc::new(StaleCache::new("prices", 60 * SEC, clock.clone()));
    let called = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let backend = tower::service_fn({
        let called = called.clone();
        move |(sku, price): (u32, u64)| {
            called.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                if sku == 0 {
                    Err("no such sku")
                } else {
                    Ok(price)
                }
            }
        }
    });
    let svc = StaleCacheLayer::new(prices.clone(), |req: &(u32, u64)| req.0)
        .layer(PolicyLayer::new(p.clone()).layer(backend));

    assert_eq!(
        block_on(svc.clone().oneshot((7, 4200))),
        Ok(Served::Fresh(4200))
    );
    let err = block_on(svc.clone().oneshot((0, 1))).unwrap_err();
    assert_eq!(err.into_inner(), Some("no such sku"));

    clock.advance(42 * SEC);
    p.breaker().force_open();
    let stale = block_on(svc.clone().oneshot((7, 1))).unwrap();
    assert_eq!(
        stale,
        Served::Stale(Stale {
            value: 4200,
            age: 42 * SEC
        })
    );
    let err = block_on(svc.oneshot((8, 1))).unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    assert_eq!(
        called.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "refused calls not made"
    );
    let m = prices.metrics();
    assert_eq!((m.recorded, m.served_stale, m.missed_absent), (1, 1, 1));
}
