//! [`KeyedRateLimiter`]: one [`Quota`] per key (client, API key, device) in
//! a table of fixed size.

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;

use super::gcra::{self, Slot};
use super::{NotYet, Quota, RateError};
use crate::clock::{Clock, Instant};
use crate::sync::const_fn;
pub use crate::table::{DefaultState, FnvHasher, FnvState, WAYS};
use crate::table::{EmptySet, Table};

/// A GCRA rate limit per key, with one [`Quota`] for every key, in a table
/// of `SETS × WAYS` keys fixed at compile time: no allocation, ever, and
/// `const`-constructible for a `static`.
///
/// Each key's state is its theoretical arrival time (TAT), stepped exactly
/// as [`RateLimiter`](super::RateLimiter) steps its one: the same
/// decisions and the same `retry_after` for the same sequence of requests.
///
/// # The table: sets of [`WAYS`] slots, one lock per set
///
/// A key's hash picks its set, `(hash × SETS) >> 64` (the high half of the
/// 128-bit product, so any `SETS` spreads evenly); the key lives in one of
/// that set's [`WAYS`] slots. Each set has its own lock (the crate's:
/// `std::sync::Mutex` with `std`, a critical section with
/// `critical-section`, a spin lock otherwise) and its own counters, on
/// cache lines of its own: two threads on keys in different sets share
/// nothing, and `SETS` is the number of shards. The lock is held for at
/// most [`WAYS`] key comparisons, one GCRA step and one write; the key is
/// hashed before it is taken.
///
/// A key whose TAT is at or before now is the same as a new key (its next
/// request finds the full burst), so it costs nothing to forget. A new key
/// takes, in its set:
///
/// 1. a slot never used, else
/// 2. the slot of a *stale* key (TAT ≤ now), the one with the earliest
///    TAT (the first such slot on a tie): the old key is forgotten, which
///    [`evictions`](KeyedRateMetrics::evictions) counts;
/// 3. when all [`WAYS`] keys of its set are live, nothing: the request is
///    refused with [`KeyedError::Full`], whose `retry_after` says when the
///    set's first key goes stale. The table never grows, and a live key is
///    never forgotten, so no key ever gets a second burst early.
///
/// A refusal (by the rate or for a full set) writes nothing; a new key is
/// stored only when its request is admitted.
///
/// # Memory per key
///
/// A slot is the key (as `Option<K>`) and its TAT (`u64`); a set is
/// [`WAYS`] slots, four counters and the lock, aligned to 64 bytes (except
/// on microcontrollers, `target_os = "none"`). For `u64` keys on x86_64 a
/// slot is 24 bytes and a set 256: **32 bytes per key**, 32 KiB for
/// `SETS = 128` (1,024 keys) and 256 KiB for 8,192 keys (checked at compile
/// time). Whatever the load, that is all the limiter ever takes.
///
/// # Hostile keys
///
/// A lookup touches one set: at most [`WAYS`] comparisons, however the keys
/// collide, so a flood of colliding keys cannot make lookups slower. What
/// colliding keys can do is fill one set, and then new keys of that set are
/// refused ([`Full`](KeyedError::Full)) until its keys go stale. With `std`,
/// [`new`](KeyedRateLimiter::new) hashes with std's `RandomState` (SipHash
/// with random keys), so a client cannot choose keys that land in one set.
/// Without `std` the default is [`FnvState`] (FNV-1a, unkeyed: pick it for
/// keys an attacker does not choose, such as your own device ids), or pass
/// any [`BuildHasher`], for instance one keyed from a hardware random
/// number, to [`with_hasher`](KeyedRateLimiter::with_hasher).
///
/// # Waits
///
/// There are none: a keyed limit is for shedding (a server refuses a
/// client's excess with `429` and the `retry_after` hint), and a wait would
/// hold a reservation in a slot the table might need. A caller that wants
/// to wait sleeps for the hint and checks again.
///
/// # Counters
///
/// Each set counts its own admissions, refusals, evictions and full-set
/// refusals under its lock (no shared counter on the hot path);
/// [`metrics`](Self::metrics) sums them and counts the live keys, taking
/// each set's lock in turn (`O(SETS × WAYS)`: for a scrape, not a request).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::rate::{KeyedError, KeyedRateLimiter, Quota, RateError};
///
/// let clock = ManualClock::new();
/// // 16 sets of 8: at most 128 clients, each held to 5/s with a burst of 2.
/// let per_client: KeyedRateLimiter<&str, _, 16> =
///     KeyedRateLimiter::new("clients", Quota::per_second(5).burst(2), &clock);
/// per_client.check_key(&"alice").unwrap();
/// per_client.check_key(&"alice").unwrap();
/// assert!(matches!(
///     per_client.check_key(&"alice"),
///     Err(KeyedError::Rate(RateError::Limited(n)))
///         if n.retry_after() == Duration::from_millis(200)
/// ));
/// per_client.check_key(&"bob").unwrap(); // another key, its own burst
/// assert_eq!(per_client.metrics().keys_live, 2);
/// ```
pub struct KeyedRateLimiter<K, C, const SETS: usize, S = DefaultState> {
    table: Table<SetInner<K>, SETS, S>,
    quota: Quota,
    name: &'static str,
    clock: C,
}

struct SetInner<K> {
    slots: [Entry<K>; WAYS],
    admitted: usize,
    refused: usize,
    full: usize,
    evictions: usize,
}

struct Entry<K> {
    tat: u64,
    key: Option<K>,
}

// The sizes the docs state: 24 bytes a slot and 256 a set (32 a key) for
// `u64` keys on x86_64 with std's lock.
#[cfg(all(target_arch = "x86_64", feature = "std", not(loom)))]
const _: () = {
    assert!(core::mem::size_of::<Entry<u64>>() == 24);
    assert!(core::mem::size_of::<crate::table::Set<SetInner<u64>>>() == 256);
    assert!(core::mem::size_of::<crate::table::Set<SetInner<u64>>>() / WAYS == 32);
};

impl<K> EmptySet for SetInner<K> {
    const EMPTY: Self = SetInner {
        slots: [const { Entry { tat: 0, key: None } }; WAYS],
        admitted: 0,
        refused: 0,
        full: 0,
        evictions: 0,
    };
}

/// Why a keyed request was refused, from
/// [`KeyedRateLimiter::check_key`] and
/// [`check_key_n`](KeyedRateLimiter::check_key_n).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::{KeyedError, RateError};
/// use watertight::clock::Instant;
///
/// let full = KeyedError::Full {
///     retry_after: Duration::from_millis(5),
///     ready_at: Instant::from_nanos(5_000_000),
/// };
/// assert!(full.is_rejection());
/// assert_eq!(full.retry_after(), Some(Duration::from_millis(5)));
/// let big = KeyedError::from(RateError::ExceedsBurst { requested: 9, burst: 2 });
/// assert!(!big.is_rejection());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyedError {
    /// The key's own limit refused it: as [`RateLimiter`](super::RateLimiter)
    /// would (`Limited` with its `retry_after`, or `ExceedsBurst`).
    Rate(RateError),
    /// A new key found every slot of its set held by a live key; nothing
    /// was written.
    Full {
        /// How long until the set's earliest key goes stale and frees its
        /// slot.
        retry_after: Duration,
        /// The instant it does.
        ready_at: Instant,
    },
}

impl KeyedError {
    /// Whether a later request could succeed: a `Limited` refusal or a full
    /// set, not `ExceedsBurst`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::{KeyedError, RateError};
    ///
    /// let e = KeyedError::Rate(RateError::ExceedsBurst { requested: 3, burst: 1 });
    /// assert!(!e.is_rejection());
    /// ```
    pub fn is_rejection(&self) -> bool {
        match self {
            KeyedError::Rate(e) => e.is_rejection(),
            KeyedError::Full { .. } => true,
        }
    }

    /// When to try again, if a later request could succeed.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    /// use watertight::rate::{KeyedError, NotYet, RateError};
    ///
    /// let e = KeyedError::Rate(RateError::Limited(NotYet::new(
    ///     Instant::ZERO,
    ///     Instant::from_nanos(1_000_000_000),
    /// )));
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KeyedError::Rate(e) => e.retry_after(),
            KeyedError::Full { retry_after, .. } => Some(*retry_after),
        }
    }
}

impl From<RateError> for KeyedError {
    fn from(e: RateError) -> Self {
        KeyedError::Rate(e)
    }
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedError::Rate(e) => fmt::Display::fmt(e, f),
            KeyedError::Full { retry_after, .. } => write!(
                f,
                "rate limiter's key table is full: retry after {retry_after:?}"
            ),
        }
    }
}

impl core::error::Error for KeyedError {}

/// A snapshot of a keyed limiter's counters, from
/// [`KeyedRateLimiter::metrics`]; each set is read under its lock, one after
/// the other.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::rate::{KeyedRateLimiter, Quota};
///
/// let clock = ManualClock::new();
/// let r: KeyedRateLimiter<u32, _, 1> =
///     KeyedRateLimiter::new("devices", Quota::per_second(1), &clock);
/// r.check_key(&7).unwrap();
/// let _ = r.check_key(&7);
/// let m = r.metrics();
/// assert_eq!((m.capacity, m.keys_live, m.admitted, m.refused), (8, 1, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyedRateMetrics {
    /// The limiter's name.
    pub name: &'static str,
    /// Its quota, for every key.
    pub quota: Quota,
    /// Keys the table can hold: `SETS × WAYS`.
    pub capacity: usize,
    /// Keys whose TAT is after now.
    pub keys_live: usize,
    /// Requests admitted.
    pub admitted: usize,
    /// Requests refused by their key's rate (`Limited`).
    pub refused: usize,
    /// New keys refused because every slot of their set was live.
    pub full: usize,
    /// Stale keys forgotten to make room for a new one.
    pub evictions: usize,
}

impl<K, C, const SETS: usize> KeyedRateLimiter<K, C, SETS, DefaultState> {
    /// A keyed limiter named `name` holding every key to `quota`, reading
    /// time from `clock`, hashing with [`DefaultState`]: std's `RandomState`
    /// (random keys per limiter) with `std`, [`FnvState`] without (see
    /// [Hostile keys](Self#hostile-keys)). For a `static`, use the `const`
    /// [`with_hasher`](Self::with_hasher).
    ///
    /// The table is inline (`SETS × 256` bytes for `u64` keys): put a large
    /// one in a `static`, or in a `Box` or an `Arc` built in release mode
    /// (a debug build may build the value on the stack first).
    ///
    /// A `SETS` of 0 does not compile.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// // 1,024 API keys at most, 100 requests a minute each.
    /// let limits: Arc<KeyedRateLimiter<u64, StdClock, 128>> =
    ///     Arc::new(KeyedRateLimiter::new("api-keys", Quota::per_minute(100), StdClock));
    /// assert_eq!(limits.capacity(), 1024);
    /// assert!(limits.check_key(&42).is_ok());
    /// ```
    pub fn new(name: &'static str, quota: Quota, clock: C) -> Self {
        Self::with_hasher(name, quota, clock, crate::table::default_state())
    }
}

impl<K, C, const SETS: usize, S> KeyedRateLimiter<K, C, SETS, S> {
    const_fn! {
        /// A keyed limiter hashing keys with `hasher`. `const`, so it can
        /// live in a `static` (with a hasher built in a constant, such as
        /// [`FnvState`]); every key starts with its full burst.
        ///
        /// A `SETS` of 0 does not compile.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::ManualClock;
        /// use watertight::rate::{FnvState, KeyedRateLimiter, Quota};
        ///
        /// static CLOCK: ManualClock = ManualClock::new();
        /// // 64 devices, 10 messages a second each.
        /// static DEVICES: KeyedRateLimiter<u16, &ManualClock, 8, FnvState> =
        ///     KeyedRateLimiter::with_hasher("devices", Quota::per_second(10), &CLOCK, FnvState);
        /// assert!(DEVICES.check_key(&3).is_ok());
        /// ```
        pub const fn with_hasher(name: &'static str, quota: Quota, clock: C, hasher: S) -> Self {
            const { assert!(SETS > 0, "a KeyedRateLimiter needs at least one set") };
            KeyedRateLimiter {
                table: Table::new(hasher),
                quota,
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
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// let r: KeyedRateLimiter<u64, _, 1> = KeyedRateLimiter::new("c", Quota::per_second(1), StdClock);
    /// assert_eq!(r.name(), "c");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The quota every key is held to.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// let r: KeyedRateLimiter<u64, _, 1> =
    ///     KeyedRateLimiter::new("c", Quota::per_second(4).burst(2), StdClock);
    /// assert_eq!(r.quota().burst_size(), 2);
    /// ```
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let r: KeyedRateLimiter<u64, _, 1> = KeyedRateLimiter::new("c", Quota::per_second(1), &clock);
    /// assert_eq!(r.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The most keys the table holds: `SETS × WAYS`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota, WAYS};
    ///
    /// let r: KeyedRateLimiter<u64, _, 4> = KeyedRateLimiter::new("c", Quota::per_second(1), StdClock);
    /// assert_eq!(r.capacity(), 4 * WAYS);
    /// ```
    pub const fn capacity(&self) -> usize {
        SETS * WAYS
    }
}

impl<K: Hash + Eq + Clone, C: Clock, const SETS: usize, S: BuildHasher>
    KeyedRateLimiter<K, C, SETS, S>
{
    /// Takes one cell of `key`'s limit if it conforms now; never waits.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Rate`] with [`Limited`](RateError::Limited) and the
    /// exact `retry_after` if the key's cell does not conform;
    /// [`KeyedError::Full`] if `key` is new and every slot of its set holds
    /// a live key. Nothing is written then.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let r: KeyedRateLimiter<String, _, 4> =
    ///     KeyedRateLimiter::new("users", Quota::per_hour(1), &clock);
    /// assert!(r.check_key(&"ana".to_string()).is_ok());
    /// assert!(r.check_key(&"ana".to_string()).is_err());
    /// ```
    #[inline]
    pub fn check_key(&self, key: &K) -> Result<(), KeyedError> {
        self.take(key, 1)
    }

    /// Takes `n` cells of `key`'s limit at once if they conform now.
    ///
    /// A request for zero cells always conforms, and neither stores the key
    /// nor counts.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Rate`] with [`ExceedsBurst`](RateError::ExceedsBurst)
    /// if `n` is above the burst (never counted, never stored); otherwise as
    /// [`check_key`](Self::check_key).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{KeyedError, KeyedRateLimiter, Quota, RateError};
    ///
    /// let clock = ManualClock::new();
    /// let r: KeyedRateLimiter<u8, _, 1> =
    ///     KeyedRateLimiter::new("batch", Quota::per_second(10), &clock);
    /// r.check_key_n(&1, 10).unwrap();
    /// assert_eq!(
    ///     r.check_key_n(&1, 11),
    ///     Err(KeyedError::Rate(RateError::ExceedsBurst { requested: 11, burst: 10 }))
    /// );
    /// ```
    #[inline]
    pub fn check_key_n(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        if n > self.quota.burst_size() {
            return Err(KeyedError::Rate(RateError::ExceedsBurst {
                requested: n,
                burst: self.quota.burst_size(),
            }));
        }
        if n == 0 {
            return Ok(());
        }
        self.take(key, n)
    }

    /// The counters summed over the sets, and the live keys counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let r: KeyedRateLimiter<u8, _, 2> = KeyedRateLimiter::new("k", Quota::per_second(1), &clock);
    /// r.check_key(&1).unwrap();
    /// assert_eq!(r.metrics().keys_live, 1);
    /// clock.advance(core::time::Duration::from_secs(1));
    /// assert_eq!(r.metrics().keys_live, 0); // stale: as good as forgotten
    /// ```
    pub fn metrics(&self) -> KeyedRateMetrics {
        let now = self.clock.now().as_nanos();
        let mut m = KeyedRateMetrics {
            name: self.name,
            quota: self.quota,
            capacity: SETS * WAYS,
            keys_live: 0,
            admitted: 0,
            refused: 0,
            full: 0,
            evictions: 0,
        };
        for set in self.table.sets() {
            let g = set.inner.lock();
            m.keys_live += g
                .slots
                .iter()
                .filter(|e| e.key.is_some() && e.tat > now)
                .count();
            m.admitted = m.admitted.wrapping_add(g.admitted);
            m.refused = m.refused.wrapping_add(g.refused);
            m.full = m.full.wrapping_add(g.full);
            m.evictions = m.evictions.wrapping_add(g.evictions);
        }
        m
    }

    #[inline]
    fn take(&self, key: &K, n: u32) -> Result<(), KeyedError> {
        let set = self.table.set_of(key);
        // Fits: n ≤ burst and burst × T fits (checked by the quota).
        let inc = u64::from(n) * self.quota.interval_nanos();
        let tolerance = self.quota.tolerance_nanos();
        let now = self.clock.now().as_nanos();
        let mut g = set.inner.lock();
        let g = &mut *g;
        if let Some(e) = g.slots.iter_mut().find(|e| e.key.as_ref() == Some(key)) {
            return match gcra::place(e.tat, now, inc, tolerance) {
                Some(slot) if slot.at <= now => {
                    e.tat = slot.end;
                    g.admitted = g.admitted.wrapping_add(1);
                    Ok(())
                }
                other => {
                    g.refused = g.refused.wrapping_add(1);
                    Err(limited(now, other))
                }
            };
        }
        // A new key: its TAT is now's (a fresh key's), so it conforms unless
        // its end would pass the end of time.
        let slot = match gcra::place(now, now, inc, tolerance) {
            Some(slot) if slot.at <= now => slot,
            other => {
                g.refused = g.refused.wrapping_add(1);
                return Err(limited(now, other));
            }
        };
        // A slot never used (they come last: a slot is never emptied), else
        // the stale slot with the earliest TAT, the first on a tie.
        let mut pick: Option<usize> = None;
        let mut pick_tat = 0;
        let mut earliest = u64::MAX;
        for (i, e) in g.slots.iter().enumerate() {
            if e.key.is_none() {
                pick = Some(i);
                break;
            }
            if e.tat <= now && (pick.is_none() || e.tat < pick_tat) {
                pick = Some(i);
                pick_tat = e.tat;
            }
            earliest = earliest.min(e.tat);
        }
        match pick {
            Some(i) => {
                // The clone runs before anything is written.
                let key = key.clone();
                if g.slots[i].key.is_some() {
                    g.evictions = g.evictions.wrapping_add(1);
                }
                let e = &mut g.slots[i];
                e.key = Some(key);
                e.tat = slot.end;
                g.admitted = g.admitted.wrapping_add(1);
                Ok(())
            }
            None => {
                g.full = g.full.wrapping_add(1);
                Err(KeyedError::Full {
                    retry_after: Instant::from_nanos(earliest)
                        .saturating_duration_since(Instant::from_nanos(now)),
                    ready_at: Instant::from_nanos(earliest),
                })
            }
        }
    }
}

/// A `Limited` refusal at `now` for a request placed at `slot` (`None`:
/// past the end of time).
#[cold]
fn limited(now: u64, slot: Option<Slot>) -> KeyedError {
    let at = match slot {
        Some(slot) => slot.at,
        None => u64::MAX,
    };
    KeyedError::Rate(RateError::Limited(NotYet::new(
        Instant::from_nanos(now),
        Instant::from_nanos(at),
    )))
}

impl<K, C, const SETS: usize, S> fmt::Debug for KeyedRateLimiter<K, C, SETS, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("name", &self.name)
            .field("quota", &self.quota)
            .field("capacity", &(SETS * WAYS))
            .finish_non_exhaustive()
    }
}
