//! Rate limits: how often calls start, for one system or per key.
//!
//! A [`Bulkhead`](crate::Bulkhead) bounds how many calls are in flight; a
//! [`RateLimiter`](crate::rate::RateLimiter) bounds how often they start
//! (a provider's "100 requests per minute", a modem's 10 messages a
//! second), and a [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter) does
//! the same per client, per API key or per device, in a table of fixed
//! size. Each item's rules are on the item; this page gives the decisions in
//! short.
//!
//! # One limit: GCRA in one word
//!
//! A [`Quota`](crate::rate::Quota) of `n` cells per period spaces cells one
//! emission interval `T = period / n` apart (rounded up) and lets a caller
//! run `burst × T` ahead of that schedule. The whole state is the
//! *theoretical arrival time* (TAT); `k` cells at `t` conform iff
//! `max(tat, t) + k·T − t ≤ burst·T`.
//!
//! - An admission is one compare-and-swap of the TAT; **a refusal writes
//!   nothing** and carries the exact `retry_after`.
//! - Asking for more than the burst is
//!   [`ExceedsBurst`](crate::rate::RateError::ExceedsBurst) at once: never
//!   a wait that cannot end.
//! - A wait reserves its cells by moving the TAT (first come, first
//!   served), sleeps until they conform on the clock's timer, and is refused
//!   at once if that is after its deadline. No queue, no lock, no
//!   allocation.
//! - A wait dropped early gives its cells back only if its reservation is
//!   still the newest: given back from the middle of the chain, two callers
//!   could be served at one instant where the quota allows one
//!   ([Cancel safety](crate::rate::RateLimiter#cancel-safety) has the
//!   counterexample).
//! - Over any window of length `w`, at most `burst + ⌊w / T⌋` cells are
//!   admitted (checked against a sequential reference in
//!   `tests/rate_model.rs`).
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::rate::{Quota, RateLimiter};
//!
//! let clock = ManualClock::new();
//! let uplink = RateLimiter::new("uplink", Quota::per_second(10).burst(2), &clock);
//! uplink.check().unwrap();
//! uplink.check().unwrap();
//! assert_eq!(uplink.check().unwrap_err().retry_after(), Some(Duration::from_millis(100)));
//! ```
//!
//! # Which clock
//!
//! A check reads the clock every time, and on a server the read can cost
//! more than the rest of the check:
//!
//! | clock | a read | a `check()` (admitted, this machine) | pick it for |
//! |---|---|---|---|
//! | `StdClock` (feature `std`) | `clock_gettime`, 20–55 ns on this virtual machine | 21–22 ns (about 1.1× governor's) | a check per request of a modest service |
//! | `QuantaClock` (feature `quanta`) | the CPU's counter, scaled (governor's clock) | 19 ns, 0.97× governor's | a busy server that wants nanosecond resolution |
//! | `CoarseClock` (feature `std`) | one relaxed load, refreshed every 1 ms | 9 ns, under half of governor's | a busy server whose emission interval is well above 1 ms |
//! | `EmbassyClock` (feature `embassy`) | the chip's tick | – | firmware |
//!
//! The figures and how they were taken: [benchmarks](super::benchmarks).
//! To wait for cells the limiter needs a [`Timer`](crate::clock::Timer)
//! clock (`TokioClock`, `AsyncIoClock`, `EmbassyClock`); a check never
//! waits, so any clock serves it.
//!
//! # Keyed limits with bounded memory
//!
//! `KeyedRateLimiter<K, C, SETS>` holds one TAT per key, stepped exactly as
//! a `RateLimiter` steps its one, in `SETS` sets of
//! [`WAYS`](crate::rate::WAYS) = 8 slots fixed at compile time. A key's hash
//! picks its set; each set has its own lock (std's mutex, a critical
//! section, or a spin lock, as the crate's wait queues) and its own
//! counters, so threads on keys in different sets share nothing. The same
//! code runs with and without `std`, and it is `const`-constructible for a
//! `static`.
//!
//! A key whose TAT is at or before now is the same as a new key, so
//! forgetting it costs nothing. A new key takes an unused slot of its set,
//! else the stale slot with the earliest TAT (an *eviction*); when all 8 are
//! live it is refused with [`KeyedError::Full`](crate::rate::KeyedError::Full)
//! and the time until the set's first key goes stale. The table never
//! grows, and a live key is never forgotten, so no key ever gets a second
//! burst early.
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::rate::{KeyedError, KeyedRateLimiter, Quota};
//!
//! let clock = ManualClock::new();
//! // 1 set of 8 slots: 8 clients at most at once, 1 request per 100 ms each.
//! let clients: KeyedRateLimiter<u32, _, 1> =
//!     KeyedRateLimiter::new("clients", Quota::per_second(10).burst(1), &clock);
//! for client in 0..8 {
//!     clients.check_key(&client).unwrap();
//! }
//! assert!(matches!(clients.check_key(&8), Err(KeyedError::Full { .. })));
//! clock.advance(Duration::from_millis(100)); // everyone is stale again
//! clients.check_key(&8).unwrap(); // takes a stale client's slot
//! assert_eq!(clients.metrics().evictions, 1);
//! ```
//!
//! **Hostile keys.** A lookup compares at most 8 keys, whatever the hash,
//! so colliding keys cannot slow lookups down; they can only fill their set.
//! With `std` the default hasher is std's `RandomState` (keyed SipHash, new
//! keys per limiter), so a client cannot aim its keys at one set; without
//! `std` it is [`FnvState`](crate::rate::FnvState) (unkeyed FNV-1a), or any
//! `BuildHasher` given to `with_hasher`.
//!
//! **No waits.** A keyed limit sheds (a server answers `429` with the
//! `retry_after`); a wait would hold a reservation in a slot the table may
//! need. A caller that wants to wait sleeps for the hint.
//!
//! # Memory per key
//!
//! A slot is `Option<K>` and a `u64` TAT; a set is 8 slots, 4 counters and
//! its lock, aligned to 64 bytes. For `u64` keys on x86_64 with `std`: a
//! slot is **24 bytes**, a set 256, so **32 bytes per key** (checked at
//! compile time):
//!
//! | `SETS` | keys | table |
//! |---|---|---|
//! | 1 | 8 | 256 B |
//! | 128 | 1,024 | 32 KiB |
//! | 1,024 | 8,192 | 256 KiB |
//!
//! That is all the limiter ever takes, whatever the load: nothing is
//! allocated after it is made (a large table goes in a `static`, or a `Box`
//! built in release mode).
//!
//! # Why this table
//!
//! Measured in `benches/rate.rs` (`rate/keyed-map/1-thread`: one GCRA step
//! on one of 512 live keys under one lock), the set-associative table is as
//! fast as `heapless::FnvIndexMap` with the same hash and within a few ns of
//! `hashbrown` with the same `RandomState` (figures in
//! [benchmarks](crate::guide::benchmarks#rate-limiter)). It was chosen on
//! what the others lack: finding a stale key to evict is a scan of 8 slots,
//! not of the table; lookups are bounded by 8 compares under any hash (an
//! open-addressed map's probe runs grow with collisions); it never
//! allocates or rehashes (hashbrown grows); and one lock per set gives the
//! sharding for free, in the same code for `no_std` and `std` (dashmap and
//! scc need `std` and allocate).
