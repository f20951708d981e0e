#![cfg(not(loom))]
//! `KeyedRateLimiter` behaviour on `ManualClock`: each key decides as a
//! `RateLimiter` would, a full set refuses new keys with the hint and takes
//! them once a key goes stale, refusals write nothing, colliding keys stay
//! within one set, a panicking key leaves the table intact, and two threads
//! on different keys each get exactly their burst.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use watertight::clock::{Instant, ManualClock};
use watertight::rate::{
    FnvState, KeyedError, KeyedRateLimiter, NotYet, Quota, RateError, RateLimiter, WAYS,
};

const MS: Duration = Duration::from_millis(1);

/// Every key hashes to 0: all in set 0.
#[derive(Clone, Copy)]
struct Collide;

impl BuildHasher for Collide {
    type Hasher = Zero;
    fn build_hasher(&self) -> Zero {
        Zero
    }
}

struct Zero;

impl Hasher for Zero {
    fn write(&mut self, _: &[u8]) {}
    fn finish(&self) -> u64 {
        0
    }
}

#[test]
fn each_key_decides_as_a_rate_limiter_would() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(4).burst(2);
    let keyed: KeyedRateLimiter<u32, _, 4> = KeyedRateLimiter::new("k", quota, &clock);
    let a = RateLimiter::new("a", quota, &clock);
    let b = RateLimiter::new("b", quota, &clock);
    let steps = [
        (0u32, 1u32),
        (0, 1),
        (0, 1),
        (1, 2),
        (1, 1),
        (0, 2),
        (1, 3),
        (0, 0),
    ];
    for round in 0..6 {
        for &(k, n) in &steps {
            let want = if k == 0 { a.check_n(n) } else { b.check_n(n) };
            assert_eq!(
                keyed.check_key_n(&k, n),
                want.map_err(KeyedError::Rate),
                "round {round}, key {k}, n {n}"
            );
        }
        clock.advance(90 * MS);
    }
    let m = keyed.metrics();
    let (ma, mb) = (a.metrics(), b.metrics());
    assert_eq!(m.admitted, ma.admitted + mb.admitted);
    assert_eq!(m.refused, ma.refused + mb.refused);
    assert_eq!((m.full, m.evictions), (0, 0));
}

#[test]
fn a_full_set_refuses_with_the_hint_then_evicts_the_earliest_stale_key() {
    let clock = ManualClock::new();
    // T = 100 ms, burst 1: a key is live for 100 ms after its check.
    let r: KeyedRateLimiter<u32, _, 1, Collide> =
        KeyedRateLimiter::with_hasher("k", Quota::per_second(10).burst(1), &clock, Collide);
    for k in 0..WAYS as u32 {
        r.check_key(&k).unwrap();
        clock.advance(MS);
    }
    // At 8 ms: key 0 goes stale at 100 ms.
    assert_eq!(
        r.check_key(&100),
        Err(KeyedError::Full {
            retry_after: 92 * MS,
            ready_at: Instant::from_nanos(100_000_000),
        })
    );
    let m = r.metrics();
    assert_eq!((m.keys_live, m.full, m.evictions, m.admitted), (8, 1, 0, 8));

    clock.advance(92 * MS); // 100 ms: key 0 stale, the others live
    r.check_key(&100).unwrap();
    assert_eq!(r.metrics().evictions, 1);
    // Key 0 was forgotten: new again, and the set is full of live keys.
    assert!(matches!(r.check_key(&0), Err(KeyedError::Full { .. })));
    // Key 1 is still known, and still limited (its TAT is 101 ms).
    assert_eq!(
        r.check_key(&1),
        Err(KeyedError::Rate(RateError::Limited(NotYet::new(
            Instant::from_nanos(100_000_000),
            Instant::from_nanos(101_000_000),
        ))))
    );
    clock.advance(MS);
    // Key 1 conforms in its own slot: no eviction.
    r.check_key(&1).unwrap();
    assert_eq!(r.metrics().evictions, 1);
}

#[test]
fn refusals_zero_cells_and_oversized_requests_store_nothing() {
    let clock = ManualClock::new();
    let r: KeyedRateLimiter<u32, _, 1, Collide> =
        KeyedRateLimiter::with_hasher("k", Quota::per_second(10).burst(2), &clock, Collide);
    assert_eq!(r.check_key_n(&1, 0), Ok(()));
    assert_eq!(
        r.check_key_n(&2, 3),
        Err(KeyedError::Rate(RateError::ExceedsBurst {
            requested: 3,
            burst: 2
        }))
    );
    let m = r.metrics();
    assert_eq!((m.keys_live, m.admitted, m.refused), (0, 0, 0));
    // Fill the set; every refusal after leaves it as it was.
    for k in 0..WAYS as u32 {
        r.check_key_n(&k, 2).unwrap();
    }
    for _ in 0..3 {
        assert!(r.check_key(&0).is_err());
        assert!(matches!(r.check_key(&99), Err(KeyedError::Full { .. })));
    }
    let m = r.metrics();
    assert_eq!((m.keys_live, m.refused, m.full, m.evictions), (8, 3, 3, 0));
    // Nothing moved: each key conforms again exactly one interval on.
    clock.advance(100 * MS);
    for k in 0..WAYS as u32 {
        r.check_key(&k).unwrap();
        assert!(r.check_key(&k).is_err());
    }
}

#[test]
fn colliding_keys_fill_one_set_and_never_more() {
    let clock = ManualClock::new();
    let r: KeyedRateLimiter<u64, _, 64, Collide> =
        KeyedRateLimiter::with_hasher("k", Quota::per_hour(1), &clock, Collide);
    let mut full = 0;
    for k in 0..10_000u64 {
        match r.check_key(&k) {
            Ok(()) => {}
            Err(KeyedError::Full { .. }) => full += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    let m = r.metrics();
    assert_eq!(m.capacity, 512);
    assert_eq!(
        (m.keys_live, m.admitted, full, m.full),
        (WAYS, WAYS, 10_000 - WAYS, full)
    );
}

#[test]
fn the_end_of_time_refuses_a_new_key_without_storing_it() {
    let clock = ManualClock::new();
    let r: KeyedRateLimiter<u8, _, 1> =
        KeyedRateLimiter::new("k", Quota::per_second(1).burst(2), &clock);
    clock.set(Instant::from_nanos(u64::MAX - 10));
    assert_eq!(
        r.check_key(&1),
        Err(KeyedError::Rate(RateError::Limited(NotYet::new(
            Instant::from_nanos(u64::MAX - 10),
            Instant::MAX,
        ))))
    );
    assert_eq!(r.metrics().keys_live, 0);
    assert_eq!(r.metrics().refused, 1);
}

/// A key whose `clone` panics (as it is stored): the table is unchanged
/// and the limiter goes on.
#[test]
fn a_key_panicking_in_clone_leaves_the_table_intact() {
    #[derive(PartialEq, Eq, Hash, Debug)]
    struct Touchy(u32);
    impl Clone for Touchy {
        fn clone(&self) -> Self {
            assert!(self.0 != 13, "unlucky");
            Touchy(self.0)
        }
    }
    let clock = ManualClock::new();
    let r: Arc<KeyedRateLimiter<Touchy, &'static ManualClock, 1, Collide>> = {
        let clock: &'static ManualClock = Box::leak(Box::new(clock));
        Arc::new(KeyedRateLimiter::with_hasher(
            "k",
            Quota::per_hour(1),
            clock,
            Collide,
        ))
    };
    r.check_key(&Touchy(1)).unwrap();
    let r2 = Arc::clone(&r);
    let panicked = std::thread::spawn(move || r2.check_key(&Touchy(13))).join();
    assert!(panicked.is_err());
    let m = r.metrics();
    assert_eq!((m.keys_live, m.admitted), (1, 1));
    assert!(r.check_key(&Touchy(1)).is_err());
    r.check_key(&Touchy(2)).unwrap();
}

#[test]
fn a_static_with_a_const_hasher() {
    static CLOCK: ManualClock = ManualClock::new();
    static DEVICES: KeyedRateLimiter<u16, &ManualClock, 2, FnvState> =
        KeyedRateLimiter::with_hasher("devices", Quota::per_second(10), &CLOCK, FnvState);
    for _ in 0..10 {
        DEVICES.check_key(&7).unwrap();
    }
    assert!(DEVICES.check_key(&7).is_err());
    assert!(DEVICES.check_key(&8).is_ok());
    assert_eq!(DEVICES.capacity(), 16);
}

/// Two threads, each on its own keys, with time standing still: each key
/// admits exactly its burst, however the threads interleave.
#[test]
fn two_threads_on_different_keys_each_get_their_burst() {
    let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
    let r: Arc<KeyedRateLimiter<u64, &'static ManualClock, 16>> = Arc::new(KeyedRateLimiter::new(
        "k",
        Quota::per_second(1).burst(50),
        clock,
    ));
    let handles: Vec<_> = (0..2u64)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                let mut ok = 0;
                for i in 0..1_000u64 {
                    // Keys 0..4 for thread 0, 4..8 for thread 1.
                    if r.check_key(&(t * 4 + i % 4)).is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let oks: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let m = r.metrics();
    // 8 keys in 128 slots of 16 random sets: a full set is possible but
    // would take 8 of them in one set; each key then has its burst.
    assert_eq!(m.full, 0);
    assert_eq!(oks, vec![200, 200]);
    assert_eq!((m.admitted, m.refused, m.keys_live), (400, 1600, 8));
}

/// The hash is computed outside the set's lock, from `Hash` alone: a key
/// type hashing differently per call would land anywhere, so keys must hash
/// consistently (as for any map). Here: the same key always reaches its own
/// state.
#[test]
fn a_key_always_finds_its_own_state() {
    #[derive(PartialEq, Eq, Clone)]
    struct Name(String);
    impl Hash for Name {
        fn hash<H: Hasher>(&self, h: &mut H) {
            self.0.hash(h);
        }
    }
    let clock = ManualClock::new();
    let r: KeyedRateLimiter<Name, _, 64> = KeyedRateLimiter::new("k", Quota::per_minute(2), &clock);
    for n in 0..40 {
        let name = Name(format!("user-{n}"));
        r.check_key_n(&name, 2).unwrap();
        assert!(r.check_key(&name).is_err());
    }
    assert_eq!(r.metrics().keys_live, 40);
}
