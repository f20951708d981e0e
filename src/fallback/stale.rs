//! [`StaleCache`]: the last good answer per key, served with its age while
//! the system is unavailable.

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;

use super::Refused;
use crate::clock::{Clock, Instant};
use crate::sync::const_fn;
use crate::table::{DefaultState, EmptySet, Table, WAYS};

/// The last good answer per key, in a table of `SETS ×`
/// [`WAYS`] keys fixed at compile time, served **with its age** when the
/// system is unavailable, up to a max staleness: stale-if-error (RFC 5861's
/// `stale-if-error`, Polly's and failsafe-go's fallback to a cache).
///
/// [`call`](Self::call) wraps a call: an `Ok` answer is recorded (a clone
/// of it, with the instant from the cache's [`Clock`]) and returned as
/// [`Served::Fresh`]; a **refusal** ([`Refused`]: bulkhead full, breaker
/// open, rate limited, out of time, store down) is answered from the table,
/// [`Served::Stale`] with the answer's age, if the key has one no older
/// than the max staleness; otherwise the refusal comes back. The call's own
/// error is not a refusal and is never covered up. [`record`](Self::record)
/// and [`serve`](Self::serve) are the two halves, for use by hand (in an
/// [`or_fallback`](super::FallbackExt::or_fallback), say).
///
/// # The table
///
/// The same as [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter)'s (the
/// code is shared): a key's hash picks one of `SETS` sets, each of
/// [`WAYS`] slots under its own lock, on cache lines of its own. A lookup
/// compares at most [`WAYS`] keys. A new key takes a free slot of its set,
/// else the slot of the set's **least recently recorded** key, which is
/// forgotten (an [eviction](StaleMetrics::evictions)): the table never
/// grows, and holds at most `SETS × WAYS` answers. An answer found older
/// than the max staleness is a miss and is dropped from the table at once.
///
/// The lock is held for at most [`WAYS`] key comparisons and one clone of
/// the value (in [`serve`](Self::serve)): keep `V` cheap to clone (a small
/// `Copy` value, an `Arc`). Values replaced or dropped from the table are
/// dropped after the lock is released. Keys are hashed with std's
/// `RandomState` (random keys per cache) with `std`, [`FnvState`] without:
/// see [the keyed limiter's notes on hostile
/// keys](crate::rate::KeyedRateLimiter#hostile-keys).
///
/// # Why a fixed table, with `std` too
///
/// Measured in `benches/stale.rs` (record and lookup at 1,024 keys, `u64`
/// keys and values, one thread;
/// [the numbers](crate::guide::benchmarks#stale-if-error-cache)): this
/// table against quick_cache's and mini-moka's `sync::Cache`, both holding
/// `(value, Instant)`. Ours and quick_cache were on par (0.8–1.3× of each
/// other either way from run to run); mini-moka was 4–8× slower than both.
/// No crate did better by a margin that pays for a dependency, and the
/// table is the only one of the three that allocates nothing after
/// construction and builds without `std`. What the crates add — an
/// eviction policy that keeps hot keys (S3-FIFO, TinyLFU), sizes by
/// weight, time-to-live — does not pay here either: a stale answer is
/// wanted for the keys asked *recently*, which the least-recently-recorded
/// rule keeps, and the max staleness is checked on every lookup. So there
/// is one implementation for `std` and `no_std`.
///
/// [`FnvState`]: crate::rate::FnvState
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::fallback::{Served, StaleCache};
/// use watertight::policy::{Policy, PolicyConfig};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let pricing: Policy<_> =
///     Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// // 64 products at most; a price is served for up to 5 minutes after it was fetched.
/// let prices: StaleCache<u32, u64, _, 8> =
///     StaleCache::new("prices", Duration::from_secs(300), &clock);
///
/// let fresh = prices.call(7, pricing.call(|| async { Ok::<u64, ()>(4200) })).await;
/// assert_eq!(fresh, Ok(Served::Fresh(4200)));
///
/// clock.advance(Duration::from_secs(42));
/// pricing.breaker().force_open();
/// let stale = prices.call(7, pricing.call(|| async { Ok::<u64, ()>(4300) })).await.unwrap();
/// assert_eq!(stale.age(), Some(Duration::from_secs(42))); // "price 42 s old"
/// assert_eq!(stale.into_value(), 4200);
/// # });
/// ```
pub struct StaleCache<K, V, C, const SETS: usize, S = DefaultState> {
    table: Table<SetInner<K, V>, SETS, S>,
    max_staleness: Duration,
    name: &'static str,
    clock: C,
}

struct SetInner<K, V> {
    slots: [Option<Entry<K, V>>; WAYS],
    /// The next record's stamp: the eviction order.
    stamp: u64,
    recorded: usize,
    served: usize,
    absent: usize,
    too_old: usize,
    evictions: usize,
}

struct Entry<K, V> {
    key: K,
    value: V,
    /// When it was recorded, on the cache's clock.
    at: u64,
    /// The set's count of records when it was: the least is evicted first.
    stamp: u64,
}

impl<K, V> EmptySet for SetInner<K, V> {
    const EMPTY: Self = SetInner {
        slots: [const { None }; WAYS],
        stamp: 0,
        recorded: 0,
        served: 0,
        absent: 0,
        too_old: 0,
        evictions: 0,
    };
}

/// An answer from the cache, recorded `age` before it was served.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::fallback::Stale;
///
/// let s = Stale { value: "42 €", age: Duration::from_secs(42) };
/// assert_eq!(s.to_string(), "42 € (42s old)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stale<V> {
    /// The answer as it was recorded.
    pub value: V,
    /// How long before it was served it was recorded, on the cache's
    /// clock: what an HTTP `Age` header says.
    pub age: Duration,
}

impl<V: fmt::Display> fmt::Display for Stale<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?} old)", self.value, self.age)
    }
}

/// The answer of [`StaleCache::call`]: the system's own, or the cache's
/// with its age.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::fallback::{Served, Stale};
///
/// let fresh = Served::Fresh(10);
/// assert_eq!((fresh.age(), fresh.is_stale(), *fresh.value()), (None, false, 10));
/// let stale = Served::Stale(Stale { value: 9, age: Duration::from_secs(3) });
/// assert_eq!((stale.age(), stale.is_stale(), stale.into_value()), (Some(Duration::from_secs(3)), true, 9));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Served<V> {
    /// The system answered now.
    Fresh(V),
    /// The system was unavailable; this is the last answer it gave.
    Stale(Stale<V>),
}

impl<V> Served<V> {
    /// The answer, fresh or stale.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::fallback::{Served, Stale};
    /// let s = Served::Stale(Stale { value: "42 €", age: Duration::from_secs(42) });
    /// assert_eq!(*s.value(), "42 €");
    /// ```
    pub fn value(&self) -> &V {
        match self {
            Served::Fresh(v) => v,
            Served::Stale(s) => &s.value,
        }
    }

    /// The answer, fresh or stale.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::fallback::Served;
    /// assert_eq!(Served::Fresh(String::from("ok")).into_value(), "ok");
    /// ```
    pub fn into_value(self) -> V {
        match self {
            Served::Fresh(v) => v,
            Served::Stale(s) => s.value,
        }
    }

    /// The stale answer's age; `None` for a fresh one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::fallback::{Served, Stale};
    /// let s = Served::Stale(Stale { value: 1, age: Duration::from_secs(9) });
    /// // An HTTP `Age` header, in whole seconds.
    /// assert_eq!(s.age().map(|a| a.as_secs()), Some(9));
    /// ```
    pub fn age(&self) -> Option<Duration> {
        match self {
            Served::Fresh(_) => None,
            Served::Stale(s) => Some(s.age),
        }
    }

    /// Whether this came from the cache.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::fallback::Served;
    /// assert!(!Served::Fresh(1).is_stale());
    /// ```
    pub fn is_stale(&self) -> bool {
        matches!(self, Served::Stale(_))
    }
}

/// A snapshot of a [`StaleCache`]'s counters, from
/// [`StaleCache::metrics`]; each set is read under its lock, one after the
/// other.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::fallback::StaleCache;
///
/// let clock = ManualClock::new();
/// let c: StaleCache<u8, u8, _, 1> = StaleCache::new("c", Duration::from_secs(1), &clock);
/// c.record(1, 10);
/// assert!(c.serve(&1).is_some());
/// assert!(c.serve(&2).is_none());
/// let m = c.metrics();
/// assert_eq!((m.entries, m.recorded, m.served_stale, m.missed_absent), (1, 1, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StaleMetrics {
    /// The cache's name.
    pub name: &'static str,
    /// Answers the table can hold: `SETS × WAYS`.
    pub capacity: usize,
    /// Answers held now (some may be older than the max staleness: they
    /// go when they are next looked up, or evicted).
    pub entries: usize,
    /// Answers recorded.
    pub recorded: usize,
    /// Stale answers served.
    pub served_stale: usize,
    /// Lookups that found no answer for the key.
    pub missed_absent: usize,
    /// Lookups that found one older than the max staleness (dropped then).
    pub missed_too_old: usize,
    /// Answers forgotten to make room for another key's.
    pub evictions: usize,
}

impl<K, V, C, const SETS: usize> StaleCache<K, V, C, SETS, DefaultState> {
    /// A cache named `name` that serves answers up to `max_staleness` old,
    /// reading time from `clock`, hashing with [`DefaultState`] (random
    /// keys per cache with `std`). For a `static`, use the `const`
    /// [`with_hasher`](Self::with_hasher).
    ///
    /// The table is inline (`SETS` sets of [`WAYS`] slots): put a large one
    /// in a `static`, a `Box` or an `Arc`. A `SETS` of 0 does not compile.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::fallback::StaleCache;
    ///
    /// // 1,024 users' profiles, each served up to an hour old.
    /// let profiles: Arc<StaleCache<u64, Arc<str>, StdClock, 128>> =
    ///     Arc::new(StaleCache::new("profiles", Duration::from_secs(3600), StdClock));
    /// assert_eq!(profiles.capacity(), 1024);
    /// ```
    pub fn new(name: &'static str, max_staleness: Duration, clock: C) -> Self {
        Self::with_hasher(name, max_staleness, clock, crate::table::default_state())
    }
}

impl<K, V, C, const SETS: usize, S> StaleCache<K, V, C, SETS, S> {
    const_fn! {
        /// A cache hashing keys with `hasher`. `const`, so it can live in a
        /// `static` (with a hasher built in a constant, such as
        /// [`FnvState`](crate::rate::FnvState)).
        ///
        /// A `SETS` of 0 does not compile.
        ///
        /// # Examples
        ///
        /// ```
        /// use core::time::Duration;
        /// use watertight::clock::ManualClock;
        /// use watertight::fallback::{FnvState, StaleCache};
        ///
        /// static CLOCK: ManualClock = ManualClock::new();
        /// // The last reading of 16 sensors, served up to 10 s old.
        /// static READINGS: StaleCache<u8, i16, &ManualClock, 2, FnvState> =
        ///     StaleCache::with_hasher("sensors", Duration::from_secs(10), &CLOCK, FnvState);
        /// READINGS.record(3, -12);
        /// assert_eq!(READINGS.serve(&3).unwrap().value, -12);
        /// ```
        pub const fn with_hasher(name: &'static str, max_staleness: Duration, clock: C, hasher: S) -> Self {
            const { assert!(SETS > 0, "a StaleCache needs at least one set") };
            StaleCache {
                table: Table::new(hasher),
                max_staleness,
                name,
                clock,
            }
        }
    }

    /// The name given at construction.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::StdClock, fallback::StaleCache};
    /// let c: StaleCache<u64, u64, _, 1> = StaleCache::new("c", core::time::Duration::from_secs(1), StdClock);
    /// assert_eq!(c.name(), "c");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The oldest answer [`serve`](Self::serve) gives.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::StdClock, fallback::StaleCache};
    /// let c: StaleCache<u64, u64, _, 1> = StaleCache::new("c", Duration::from_secs(9), StdClock);
    /// assert_eq!(c.max_staleness(), Duration::from_secs(9));
    /// ```
    pub fn max_staleness(&self) -> Duration {
        self.max_staleness
    }

    /// The most answers the table holds: `SETS × WAYS`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::StdClock, fallback::{StaleCache, WAYS}};
    /// let c: StaleCache<u64, u64, _, 4> = StaleCache::new("c", core::time::Duration::from_secs(1), StdClock);
    /// assert_eq!(c.capacity(), 4 * WAYS);
    /// ```
    pub const fn capacity(&self) -> usize {
        SETS * WAYS
    }

    /// The clock the ages are measured on.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::{Clock, ManualClock}, fallback::StaleCache};
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u64, u64, _, 1> = StaleCache::new("c", core::time::Duration::from_secs(1), &clock);
    /// assert_eq!(c.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<K: Hash + Eq, V, C: Clock, const SETS: usize, S: BuildHasher> StaleCache<K, V, C, SETS, S> {
    /// Records `value` as `key`'s last good answer, now. A key already in
    /// the table has its answer replaced; a new one takes a free slot of
    /// its set, else that of the set's least recently recorded key.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::StaleCache;
    ///
    /// let clock = ManualClock::new();
    /// let c: StaleCache<&str, u32, _, 1> = StaleCache::new("stock", Duration::from_secs(60), &clock);
    /// c.record("sku-1", 5);
    /// clock.advance(Duration::from_secs(10));
    /// c.record("sku-1", 4); // the newer answer, and its age starts again
    /// assert_eq!(c.serve(&"sku-1").map(|s| (s.value, s.age)), Some((4, Duration::ZERO)));
    /// ```
    pub fn record(&self, key: K, value: V) {
        let now = self.clock.now().as_nanos();
        let set = self.table.set_of(&key);
        let mut guard = set.inner.lock();
        let g = &mut *guard;
        let stamp = g.stamp;
        g.stamp = g.stamp.wrapping_add(1);
        g.recorded = g.recorded.wrapping_add(1);
        let entry = Entry {
            key,
            value,
            at: now,
            stamp,
        };
        let i = match g
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|e| e.key == entry.key))
        {
            Some(i) => i,
            None => match g.slots.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    g.evictions = g.evictions.wrapping_add(1);
                    oldest(&g.slots)
                }
            },
        };
        let old = g.slots[i].replace(entry);
        drop(guard);
        // The answer it replaces, dropped outside the lock.
        drop(old);
    }

    /// `key`'s last good answer with its age, if it has one no older than
    /// the max staleness; counted as served, or as a miss (an answer found
    /// too old is dropped from the table).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::{Stale, StaleCache};
    ///
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("fx", Duration::from_secs(60), &clock);
    /// c.record(1, 108);
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(c.serve(&1), Some(Stale { value: 108, age: Duration::from_secs(60) }));
    /// clock.advance(Duration::from_nanos(1));
    /// assert_eq!(c.serve(&1), None); // too old: a miss
    /// assert_eq!(c.metrics().missed_too_old, 1);
    /// ```
    pub fn serve(&self, key: &K) -> Option<Stale<V>>
    where
        V: Clone,
    {
        let now = self.clock.now().as_nanos();
        let set = self.table.set_of(key);
        let mut guard = set.inner.lock();
        let g = &mut *guard;
        let Some(i) = g
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|e| e.key == *key))
        else {
            g.absent = g.absent.wrapping_add(1);
            drop(guard);
            #[cfg(feature = "tracing")]
            trace_miss(self.name, "absent");
            return None;
        };
        let e = g.slots[i].as_ref().expect("found above");
        let age = Instant::from_nanos(now).saturating_duration_since(Instant::from_nanos(e.at));
        if age > self.max_staleness {
            g.too_old = g.too_old.wrapping_add(1);
            let old = g.slots[i].take();
            drop(guard);
            drop(old);
            #[cfg(feature = "tracing")]
            trace_miss(self.name, "too_old");
            return None;
        }
        let value = e.value.clone();
        g.served = g.served.wrapping_add(1);
        drop(guard);
        #[cfg(feature = "tracing")]
        trace_served(self.name, age);
        Some(Stale { value, age })
    }

    /// Forgets `key`'s answer (after a write that made it wrong, say), and
    /// returns it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::ManualClock, fallback::StaleCache};
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("cart", Duration::from_secs(60), &clock);
    /// c.record(1, 3);
    /// assert_eq!(c.remove(&1), Some(3));
    /// assert_eq!(c.serve(&1), None);
    /// ```
    pub fn remove(&self, key: &K) -> Option<V> {
        let set = self.table.set_of(key);
        let mut g = set.inner.lock();
        let i = g
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|e| e.key == *key))?;
        let old = g.slots[i].take();
        drop(g);
        old.map(|e| e.value)
    }

    /// Runs `call` (any future of `Result<V, E>` whose error can be a
    /// refusal: a [`Policy::call`](crate::Policy::call), a breaker's call,
    /// a tower service's response): an `Ok` answer is recorded for `key`
    /// and returned [`Fresh`](Served::Fresh); a refusal is answered with
    /// `key`'s last answer, [`Stale`](Served::Stale) with its age, if
    /// [`serve`](Self::serve) has one.
    ///
    /// # Errors
    ///
    /// The call's own error, as it was; the refusal, when there is no
    /// answer for `key` or it is older than the max staleness.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the call's and records nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::StaleCache;
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(1).max_wait(Duration::ZERO).build().unwrap();
    /// let stock: Policy<_> = Policy::new("stock", config, &clock).unwrap();
    /// let levels: StaleCache<u32, u32, _, 4> = StaleCache::new("stock", Duration::from_secs(30), &clock);
    /// let _busy = stock.bulkhead().try_acquire().unwrap();
    ///
    /// // Nothing recorded for sku 9: the refusal comes back.
    /// let err = levels.call(9, stock.call(|| async { Ok::<u32, ()>(3) })).await.unwrap_err();
    /// assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
    /// # });
    /// ```
    pub fn call<Fut, E>(&self, key: K, call: Fut) -> StaleCall<&Self, K, Fut>
    where
        V: Clone,
        Fut: Future<Output = Result<V, E>>,
        E: Refused,
    {
        StaleCall::new(self, key, call)
    }

    /// A call's result for `key`, settled: an `Ok` recorded and fresh; a
    /// refusal answered from the table if it can be; anything else as it
    /// was.
    fn settle<E: Refused>(&self, key: K, out: Result<V, E>) -> Result<Served<V>, E>
    where
        V: Clone,
    {
        match out {
            Ok(v) => {
                self.record(key, v.clone());
                Ok(Served::Fresh(v))
            }
            Err(e) => match e.into_refusal() {
                Ok(refusal) => match self.serve(&key) {
                    Some(stale) => Ok(Served::Stale(stale)),
                    None => Err(E::from_refusal(refusal)),
                },
                Err(own) => Err(own),
            },
        }
    }

    /// The counters summed over the sets, and the answers held counted.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::ManualClock, fallback::StaleCache};
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("c", Duration::from_secs(1), &clock);
    /// for k in 0..9 {
    ///     c.record(k, k);
    /// }
    /// let m = c.metrics();
    /// assert_eq!((m.capacity, m.entries, m.evictions), (8, 8, 1));
    /// ```
    pub fn metrics(&self) -> StaleMetrics {
        let mut m = StaleMetrics {
            name: self.name,
            capacity: SETS * WAYS,
            entries: 0,
            recorded: 0,
            served_stale: 0,
            missed_absent: 0,
            missed_too_old: 0,
            evictions: 0,
        };
        for set in self.table.sets() {
            let g = set.inner.lock();
            m.entries += g.slots.iter().filter(|s| s.is_some()).count();
            m.recorded = m.recorded.wrapping_add(g.recorded);
            m.served_stale = m.served_stale.wrapping_add(g.served);
            m.missed_absent = m.missed_absent.wrapping_add(g.absent);
            m.missed_too_old = m.missed_too_old.wrapping_add(g.too_old);
            m.evictions = m.evictions.wrapping_add(g.evictions);
        }
        m
    }
}

/// The slot of the least recently recorded entry of a full set.
fn oldest<K, V>(slots: &[Option<Entry<K, V>>; WAYS]) -> usize {
    let mut pick = 0;
    let mut least = u64::MAX;
    for (i, s) in slots.iter().enumerate() {
        if let Some(e) = s {
            if e.stamp < least {
                least = e.stamp;
                pick = i;
            }
        }
    }
    pick
}

impl<K, V, C, const SETS: usize, S> fmt::Debug for StaleCache<K, V, C, SETS, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCache")
            .field("name", &self.name)
            .field("max_staleness", &self.max_staleness)
            .field("capacity", &(SETS * WAYS))
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The future of [`StaleCache::call`] (`R` is a reference to the
    /// [`StaleCache`], or an `Arc` of it for `tower::StaleCacheService`;
    /// `K` is its key): the call, then its answer
    /// recorded, or a stale one served for its refusal. A named type: no
    /// allocation.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the call's future and records nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::{StaleCache, StaleCall};
    /// use watertight::AcquireError;
    ///
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u8, u8, _, 1> = StaleCache::new("c", Duration::from_secs(1), &clock);
    /// c.record(1, 7);
    /// let call: StaleCall<&StaleCache<u8, u8, _, 1>, u8, _> =
    ///     c.call(1, core::future::ready(Err::<u8, _>(AcquireError::Full)));
    /// assert!(futures_lite::future::block_on(call).unwrap().is_stale());
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct StaleCall<R, K, Fut> {
        cache: R,
        key: Option<K>,
        #[pin]
        call: Fut,
    }
}

impl<R, K, Fut> StaleCall<R, K, Fut> {
    /// `call` for `key`, its answer settled by `cache`.
    pub(crate) fn new(cache: R, key: K, call: Fut) -> Self {
        StaleCall {
            cache,
            key: Some(key),
            call,
        }
    }
}

impl<R, K, Fut: fmt::Debug> fmt::Debug for StaleCall<R, K, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCall")
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}

/// The future for a cache held as `$r` (a reference, an `Arc`): the same
/// for each.
macro_rules! stale_call_future {
    ($(#[$attr:meta])* $r:ty) => {
        $(#[$attr])*
        impl<K, V, C, const SETS: usize, S, Fut, E> Future for StaleCall<$r, K, Fut>
        where
            K: Hash + Eq,
            V: Clone,
            C: Clock,
            S: BuildHasher,
            Fut: Future<Output = Result<V, E>>,
            E: Refused,
        {
            type Output = Result<Served<V>, E>;

            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                let this = self.project();
                let out = ready!(this.call.poll(cx));
                let key = this.key.take().expect("StaleCall polled after it completed");
                Poll::Ready(this.cache.settle(key, out))
            }
        }
    };
}

stale_call_future!(&StaleCache<K, V, C, SETS, S>);
stale_call_future!(
    #[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
    alloc::sync::Arc<StaleCache<K, V, C, SETS, S>>
);

/// One event per stale answer served (feature `tracing`), at DEBUG as the
/// other primitives' refusals: they come at the rate of traffic, and the
/// counters are what dashboards read.
#[cfg(feature = "tracing")]
#[cold]
fn trace_served(system: &'static str, age: Duration) {
    tracing::debug!(
        target: "watertight::fallback",
        system,
        age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
        "served a stale answer"
    );
}

/// One event per lookup that found nothing to serve: `reason` is `absent`
/// or `too_old`.
#[cfg(feature = "tracing")]
#[cold]
fn trace_miss(system: &'static str, reason: &'static str) {
    tracing::debug!(
        target: "watertight::fallback",
        system,
        reason,
        "no stale answer to serve"
    );
}
