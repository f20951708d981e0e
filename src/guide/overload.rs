//! Under overload: who waits, who is refused, and who is not sent at all.
//!
//! Three answers, each its own item, usable together:
//!
//! | question | answer | where |
//! |---|---|---|
//! | how many may wait for a slot? | a bound on waiters; one too many is refused at once (`QueueFull`) | [`Bulkhead::with_max_waiters`](crate::Bulkhead::with_max_waiters), a policy's `max_waiters` ([the policy guide](super::policy#a-bounded-wait-queue)) |
//! | which callers keep their slots when everyone wants more? | classes with guaranteed shares that borrow what the others leave idle | [`PartitionedBulkhead`](crate::partition::PartitionedBulkhead) |
//! | should a client even send what the backend will refuse? | client-side adaptive throttling | [`AdaptiveThrottle`](crate::throttle::AdaptiveThrottle) ([the throttle guide](super::throttle)) |
//!
//! # Classes with guaranteed shares
//!
//! A search backend of 10 slots serves checkout, browsing and a nightly
//! export. One FIFO queue treats them alike: when the export floods it,
//! checkout waits behind the export and is refused as often. A
//! [`PartitionedBulkhead`](crate::partition::PartitionedBulkhead) gives each
//! class a room of its share:
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::partition::PartitionedBulkhead;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let search = PartitionedBulkhead::from_percent(
//!     "search",
//!     10,
//!     [("checkout", 50), ("browse", 30), ("export", 20)],
//!     &clock,
//! )
//! .unwrap();
//! let (checkout, export) = (search.class_of("checkout").unwrap(), search.class_of("export").unwrap());
//!
//! // The export takes everything nobody else is using...
//! let flood: Vec<_> = (0..10).map(|_| search.try_acquire(export).unwrap()).collect();
//! // ...and checkout, under its share, gets the first slot an export call
//! // leaves (here at once; with none free it would wait, and be refused
//! // only if its own wait ran out).
//! let mut flood = flood.into_iter();
//! drop(flood.next());
//! let slot = search.acquire_timeout(checkout, Duration::from_millis(50)).await.unwrap();
//! assert_eq!(slot.class(), checkout);
//! # });
//! ```
//!
//! **The rule: a class under its guaranteed share is never refused for
//! capacity, only by its own deadline.** Each class's room is a
//! [`Bulkhead`](crate::Bulkhead) of its share; a class takes a slot of its
//! room, or borrows an idle slot of another room (the least important
//! class's first), or waits in its room. A slot goes back to its room,
//! whose waiters (all of its class) come first. The item's documentation
//! lists the decisions: only a class's first waiter borrows, the hand-off
//! inside a room is exact and across rooms a wake-up, calls in flight are
//! never pre-empted.
//!
//! How it was checked: a sequential reference and a model-based proptest
//! (`tests/partition_model.rs`: every answer, room count and class counter
//! equal, the total within the capacity, the rule at every refusal, no
//! waiter next to a free slot), three loom models (a borrower racing the
//! owner's wait, two classes borrowing at once, a borrow racing a hand-off
//! in the waiter's own room), and the simulation below.
//!
//! # The simulation
//!
//! ```sh
//! cargo test --test partition_sim -- --nocapture
//! ```
//!
//! A backend of 10 workers, 10 ms a call (1 000 calls/s), offered 2–5×
//! that for 5 s on `ManualClock`; every caller waits up to 50 ms for a
//! slot. Checkout sends 400 calls/s at every load, under its 50 %; browse
//! and export send the rest, 3 : 5. The share of checkout's calls served:
//!
//! | load | one FIFO bulkhead of 10 | partitioned 50 / 30 / 20 | checkout's p99 |
//! |---|---|---|---|
//! | 2× | 50 % | **100 %** | 18 ms |
//! | 3× | 31 % | **100 %** | 18 ms |
//! | 4× | 25 % | **100 %** | 19 ms |
//! | 5× | 25 % | **100 %** | 19 ms |
//!
//! Both keep the backend 99 % busy (997–998 of its 1 000 calls/s): the
//! partitions move refusals onto the classes over their share, and lose no
//! capacity, since a slot freed where nobody waits goes to a waiting class
//! (the full table per class is on
//! [`PartitionedBulkhead`](crate::partition#under-overload)).
//!
//! # When the limit falls
//!
//! [`PartitionedBulkhead::resize`](crate::partition::PartitionedBulkhead::resize)
//! moves the total and sheds the least important class first (down to one
//! slot each, so every class keeps a room to wait in); rising again, the
//! most important class gets its share back first, and above the
//! configured total the rooms grow in proportion to the shares. An
//! [`AdaptiveLimit`](crate::limit::AdaptiveLimit) drives it as it drives a
//! plain bulkhead. In the same simulation's adaptive run (the backend loses
//! 3 of its 10 workers after 1 s; an AIMD limit over 100 ms windows,
//! offered 2×), once the limit has settled at 7–8:
//!
//! | | checkout's calls served | its room | browse's room | export's room |
//! |---|---|---|---|---|
//! | one adaptive FIFO bulkhead | 25 % | – | – | – |
//! | adaptive, partitioned 50 / 30 / 20 | **93 %** | 5 (its share) | 1–2 | 1 |
//!
//! The 7 % checkout loses is AIMD's probe one slot above the 7 workers:
//! the probe's slot is always the one class with a free slot of its own.
//!
//! In tower, `tower::PartitionLayer` (feature `tower`) picks the
//! class by a function of the request (a header, a route) and answers a
//! refusal with an error a server maps to 503; `PartitionExporter`
//! (feature `metrics`) exports each class's numbers.
//!
//! # From configuration
//!
//! The class names are code (`&'static str`, matched by the tower layer's
//! function and carried by metrics); the numbers are configuration: a
//! [`PartitionShares`](crate::partition::PartitionShares) holds either
//! slots per class (`shares`) or percentages of a capacity (`capacity` and
//! `percent`), and optionally `max_waiters`, and
//! [`PartitionedBulkhead::from_shares`](crate::partition::PartitionedBulkhead::from_shares)
//! puts the two together. With `serde` it is read from any format or from
//! environment variables, a list as a comma-separated string there, and
//! checked as it is read: a list of other than one entry per class, a
//! share of 0, percentages not adding up to 100 or both forms at once are
//! refused naming the key, so a value read always builds.
//!
//! ```
//! # #[cfg(feature = "serde")] {
//! use watertight::clock::StdClock;
//! use watertight::partition::{PartitionShares, PartitionedBulkhead};
//!
//! // SEARCH_PARTITION_CAPACITY=10 SEARCH_PARTITION_PERCENT=50,30,20
//! let env = [("SEARCH_PARTITION_CAPACITY", "10"), ("SEARCH_PARTITION_PERCENT", "50,30,20")]
//!     .map(|(k, v)| (k.to_string(), v.to_string()));
//! let shares: PartitionShares<3> = envy::prefixed("SEARCH_PARTITION_").from_iter(env).unwrap();
//! let search = PartitionedBulkhead::from_shares(
//!     "search",
//!     ["checkout", "browse", "export"],
//!     shares,
//!     StdClock,
//! )
//! .unwrap();
//! assert_eq!((search.share(0), search.share(1), search.share(2)), (5, 3, 2));
//!
//! // Two numbers for three classes: refused, naming the key and the count.
//! let env = [("SEARCH_PARTITION_SHARES".to_string(), "8,2".to_string())];
//! let err = envy::prefixed("SEARCH_PARTITION_").from_iter::<_, PartitionShares<3>>(env).unwrap_err();
//! assert!(err.to_string().contains("`shares`: 2 entries, expected 3"), "{err}");
//! # }
//! ```
//!
//! # What it costs
//!
//! ```sh
//! cargo bench --bench partition
//! ```
//!
//! `try_acquire` + drop, one thread, the median of 21 interleaved rounds of
//! 2 000 000, in two runs (run 1 with two builds beside it on the 2-core
//! machine, run 2 with the machine otherwise idle):
//!
//! | | run 1 ns | ÷ plain | run 2 ns | ÷ plain |
//! |---|---|---|---|---|
//! | `Bulkhead::try_acquire`, 16 slots | 15.44 | 1.00× | 16.24 | 1.00× |
//! | `PartitionedBulkhead::try_acquire`, its own room free | 16.20 | **1.05×** | 17.30 | **1.07×** |
//! | the same, its room full: a slot borrowed from the next room | 20.26 | 1.31× | 21.38 | 1.32× |
//! | `tokio::sync::Semaphore::try_acquire` (one per class, the usual alternative) | 22.13 | 1.43× | 23.34 | 1.44× |
//!
//! The own-room path is the bulkhead's compare-and-swap plus a class index
//! and, on release, one load of the partition's waiter count; borrowing
//! adds a failed look at the own room and one compare-and-swap per room
//! tried.
