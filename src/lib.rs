//! Async, runtime-agnostic, `no_std`-friendly resilience primitives.
//!
//! A service that calls several external systems — or a gateway that calls
//! several peripherals — sinks when one of them floods: its slow calls hold
//! the threads, connections and memory that every other call needs. This
//! crate keeps each system in its own compartment:
//!
//! - the [`Bulkhead`]: *no more than N calls to this system at once, and do
//!   not wait long for a slot*;
//! - the [`CircuitBreaker`]: *stop calling a system that is clearly failing
//!   or slowly dying, and let it recover* — a count window of the last calls
//!   in a ring of atomics, failure-rate and slow-call thresholds, an open
//!   wait, and capped half-open probes;
//! - [`deadline`]: a timeout per call ([`deadline::timeout`]) and a request
//!   budget ([`deadline::Deadline`]) handed down the call chain;
//! - the [`RateLimiter`]: *no more than n calls to this system per period,
//!   with a burst* — GCRA on one atomic word, a refusal that says when to
//!   come back, and waits that reserve their cells instead of queueing;
//! - the [`Policy`]: one per external system, running a call through the
//!   bulkhead, the breaker and a deadline in that order, with one "system
//!   unavailable" error for every refusal.
//!
//! # Which primitive, when
//!
//! One of each per **external system** (a payment API, a database pool, a
//! modem link), named after it; never one shared by everything.
//!
//! | you want to… | use | notes |
//! |---|---|---|
//! | cap the calls in flight to a system and refuse the rest at once | [`Bulkhead::try_acquire`] | no allocation, no clock read, no executor; a 503 or a fallback instead of a queue |
//! | the same, but wait a short, bounded time for a slot | [`Bulkhead::acquire_timeout`] | milliseconds, not seconds: a long wait is a queue in disguise; no allocation (the future is its own queue node), FIFO hand-off |
//! | promise each class of callers (checkout, browsing, batch) its share of the slots, and let any class use what the others leave idle | [`partition::PartitionedBulkhead`] | a class under its share is refused only by its own deadline; FIFO inside a class, borrowing least important first; no lock on the fast path, no allocation |
//! | let the cap follow what the system can take, measured from its latency and its refusals | [`limit::AdaptiveBulkhead`] with [`limit::Aimd`] or [`limit::Gradient2`] | a `Bulkhead` the algorithm resizes once per window; no lock, no allocation |
//! | stop sending what an overloaded system refuses anyway, in proportion to how much more it is asked than it accepts | [`throttle::AdaptiveThrottle`], or [`PolicyConfigBuilder::throttle`](policy::PolicyConfigBuilder::throttle) | the SRE book's client-side throttling: counted at admission over a window at least the call timeout, refusing locally with probability `(requests − K·accepts)/(requests + 1)`; no lock |
//! | stop calling a system that is failing or slowly dying, and tell callers when to come back | [`CircuitBreaker::call`] / [`CircuitBreaker::try_acquire`] | count window, failure-rate and slow-call thresholds, `retry_after` hint |
//! | bound one call in time | [`deadline::timeout`] | drops the call the moment time runs out |
//! | bound a whole request across several calls | [`deadline::Deadline`], [`Policy::call_within`] | a child budget never outlives its parent |
//! | cut the tail of a replicated system's latency: a second request when the first is slow | [`Policy::call_hedged`] with a [`hedge::Hedge`] | idempotent calls only; the delay at a percentile of recent latencies, each attempt through the policy, a budget of its own; [`guide::hedging`] |
//! | carry that budget to the next service, so it stops when the caller has given up | [`deadline::wire`], and the `tower` layers `InboundDeadlineLayer` / `OutboundDeadlineLayer` (`http` feature) | `grpc-timeout` or a milliseconds header, what is left minus a network margin; a request with too little left is refused at admission ([guide](guide::deadline)) |
//! | all three around every call to one system | [`Policy`] | bulkhead outside, breaker inside, deadline innermost; one error type |
//! | answer a refused call anyway: a default, the answer without its optional part, a 503 with `Retry-After` | [`fallback::FallbackExt::or_fallback`] | the fallback gets the typed refusal (which layer, its retry hint), never the call's own error unless asked ([`or_fallback_any`](fallback::FallbackExt::or_fallback_any)); no allocation; [`guide::degrade`] |
//! | serve the last good answer, marked with its age, while the system is unavailable | [`fallback::StaleCache::call`] | stale-if-error up to a max staleness, in a fixed table of `SETS × 8` keys; no allocation, `no_std` |
//! | shed load in an HTTP server, or guard a client | the `tower` layers (`tower` feature) | `BulkheadLayer`, `BreakerLayer`, `PolicyLayer` (`.idempotent()` to retry), `HedgeLayer` |
//! | prove in a test that a policy holds when the system fails: errors, 503s, latency, hangs at a rate | `chaos::Injector` (feature `chaos`), or `tower::ChaosLayer` | seeded: the same faults on every run on `ManualClock`; switched on and off at run time; the resilience test kit is the guide's `chaos` page |
//! | a general async semaphore: long or unbounded waits, permits as bytes | not this crate | `tokio::sync::Semaphore`, `async_lock::Semaphore` |
//!
//! Why that order in a [`Policy`]: the bulkhead first, so a call refused for
//! want of a slot never reaches the breaker and is not counted against the
//! system; the breaker next, so a call to an open circuit gives its slot
//! back at once; the deadline innermost, so a call that runs out of its own
//! time is a failure the breaker sees.
//!
//! Use a [`Bulkhead`] when a call should **fail fast** rather than queue
//! behind a slow system: it rejects at once or after a short, bounded wait,
//! counts why, and names the system in its metrics. Use a
//! [`CircuitBreaker`] when calls to a failing system should be refused at
//! once instead of piling up behind timeouts. Neither needs a heap or std,
//! and neither takes a lock on its fast paths (a bulkhead's wait queue has a
//! short one, taken only by waits and by releases that find someone
//! waiting), so the same types guard a payment API on a server and an
//! upstream link on a gateway, in a `static` if you like.
//!
//! # Example
//!
//! ```
//! use core::time::Duration;
//! use watertight::{AcquireError, Bulkhead};
//! use watertight::clock::ManualClock;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let shipping = Bulkhead::new("shipping", 1, &clock);
//!
//! let call = shipping.acquire_timeout(Duration::from_millis(100)).await.unwrap();
//! // A second call finds the one slot taken and gives up after its wait.
//! let second = shipping.acquire_timeout(Duration::from_millis(100));
//! clock.advance(Duration::from_millis(100));
//! assert_eq!(second.await.unwrap_err(), AcquireError::TimedOut);
//! drop(call);
//! assert_eq!(shipping.metrics().rejected_timed_out, 1);
//! # });
//! ```
//!
//! A breaker that opens after half of the last calls failed, and tells the
//! caller when to come back:
//!
//! ```
//! use core::time::Duration;
//! use watertight::{BreakerConfig, CircuitBreaker, Rejection};
//! use watertight::clock::ManualClock;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let config = BreakerConfig::builder().window_size(4).minimum_calls(4).build().unwrap();
//! let payments: CircuitBreaker<_, 4> = CircuitBreaker::new("payments", config, &clock);
//!
//! for ok in [true, false, true, false] {
//!     let _ = payments.call(async move { if ok { Ok(()) } else { Err("503") } }).await;
//! }
//! let refused = payments.call(async { Ok::<_, &str>(()) }).await.unwrap_err();
//! assert_eq!(
//!     refused.rejection(),
//!     Some(Rejection::Open { retry_after: Duration::from_secs(30) })
//! );
//! # });
//! ```
//!
//! # Defaults, and where they come from
//!
//! The defaults are the numbers resilience guides commonly give for a
//! service calling HTTP APIs; every one of them is a setting.
//!
//! | layer | default | why |
//! |---|---|---|
//! | bulkhead | [`PolicyConfig::for_pool`]: 80 % of the connection pool in front of the system (8 of 10); a slot wait of 100 ms, and over 1 s only when asked for ([`policy::LONGEST_USUAL_MAX_WAIT`]) | the limit refuses before the pool runs dry, and a caller that finds no slot fails fast instead of queueing: a long wait is a queue in disguise |
//! | circuit breaker | [`BreakerConfig::DEFAULT`]: a count window of the last 50 calls, evaluated from 10 calls on, open at 50 % failures, for 30 s, then 3 half-open probes; [`BreakerConfig::CRITICAL`]: the same at 30 %, for payments and other systems where a failure is expensive | a count window rather than a time window: with uneven traffic a time window holds thousands of calls at the peak and a handful at night, so its verdict rests on very different evidence; smaller and quicker to react than resilience4j's defaults (a 100-call window, 60 s open, 10 probes) |
//! | slow calls | off; when set, resilience guides suggest half the client's read timeout | a breaker that counts slow calls notices a system dying slowly before the timeouts do |
//! | deadline | [`PolicyConfig::builder`]: a 30 s call timeout (a common HTTP read timeout); a request budget from the caller's own deadline, handed down | each step gets the smaller of its own limit and what is left of the request's |
//!
//! The bulkhead is the pattern of that name in Microsoft's Azure
//! Architecture Center (one compartment per system, so that one flooding
//! cannot sink the rest) built as a semaphore that fails fast, like
//! resilience4j's `SemaphoreBulkhead`. The breaker's states and settings
//! follow resilience4j's (percent thresholds, a minimum number of calls
//! before any verdict, ForcedOpen and Disabled), with what counts as a
//! failure left to the caller, as gobreaker's `IsSuccessful` does.
//!
//! # Design decisions
//!
//! Peers disagree on the edge cases; each decision here is written on the
//! item it concerns:
//!
//! - when the breaker evaluates its rates, how thresholds compare, what is
//!   slow, when the open wait ends, how many probes pass, what a panic
//!   records, and what happens to the window on each transition: the
//!   "Decisions on edge semantics" of [`CircuitBreaker`];
//! - the bulkhead's wait order (first come, first served, and no barging
//!   past a waiter), capacity changes and closing: [`Bulkhead`]; a wait at
//!   its deadline (a free permit is still taken, a queued waiter gives up):
//!   [`Bulkhead::acquire_until`];
//! - a request budget covers the whole protected call, the wait for a slot
//!   included, and a call cut by the caller's budget is not the system's
//!   failure: [`Policy`];
//! - bad settings are refused with an error that names the setting:
//!   [`BreakerConfigError`], [`policy::PolicyConfigError`].
//!
//! # Features
//!
//! `std` is the default; everything else is opt-in: a clock per runtime
//! (`tokio`, `async-io`, `embassy`), `critical-section` for targets without
//! compare-and-swap, the integrations (`tower`, `metrics`, `tracing`,
//! `serde`), fault injection to test them (`chaos`) and a limit shared across processes on Redis (`redis`,
//! `redis-smol`). What each one enables, what it needs and which runtimes it
//! serves: [`guide::features`], the crate's one feature table.
//!
//! Without `alloc` (`--no-default-features`) everything but owned permits
//! builds and needs no allocator — the bulkhead, waits for a permit
//! included, the whole circuit breaker, deadlines and a policy with a slot
//! wait: `firmware/` links them into a Cortex-M4F binary that has none.
//!
//! # Runtime support
//!
//! Nothing here spawns or assumes an executor: a waiting future links its
//! own node into the bulkhead's wait queue and is woken through its
//! `Waker`, which any executor provides, and time comes from the clock type
//! parameter: tokio, smol, async-std and embassy each have a clock behind a
//! feature, [`clock::ManualClock`] is always built for tests of your own
//! code, and [`clock::Timer`] is the trait to implement for another
//! executor. Which runtime is tested where: [the runtimes](guide::features#runtimes).
//!
//! # Guide
//!
//! Longer pages — the tour, one policy per system and retries, the breaker's
//! decisions, adaptive limits, the global bulkhead, firmware, what we tried,
//! every benchmark — are in [`guide`], documentation-only modules.
//!
//! # Memory ordering
//!
//! **Bulkhead.** Taking a permit is an `Acquire` and giving it back a
//! `Release` on the bulkhead's one state word, so a permit hands over like a
//! mutex: what its last holder wrote is visible to its next holder. A
//! waiter woken by a release takes its permit with the same `Acquire`.
//!
//! **Breaker.** Transitions are `AcqRel` compare-and-swaps of the state
//! word, and every read of it is `Acquire`, so whoever sees a state also
//! sees what the thread that made the transition wrote before it (the
//! window it installed or froze, the time it published). Recording an
//! outcome writes its slot, then issues a `SeqCst` fence before counting
//! the other slots: of two writers that fill the window together, at least
//! one sees both outcomes, so a trip cannot be missed (found by loom,
//! checked by the loom models). Statistics that decide nothing (rejected,
//! stale) are `Relaxed`.
//!
//! **Adaptive bulkhead.** The limit algorithm is run by one closer at a
//! time, behind a flag taken with an `Acquire` compare-and-swap and given
//! back with a `Release` store; the window's samples are `Relaxed` tallies,
//! each taken whole by the closer's swap; the new limit is published by the
//! bulkhead's own resize ([`limit::AdaptiveBulkhead`]).
//!
//! **Everything else** (`ManualClock`, the counters behind metrics) reads
//! and writes with `Acquire`/`Release` or `Relaxed` as documented on each
//! item; a metrics snapshot is a set of separate reads, not one atomic
//! picture. The bulkhead's and the breaker's protocols are checked by the
//! loom models in `tests/loom/`.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85. Raising it is a minor-version change, made only when a
//! dependency or a language feature we need requires it.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

#[cfg(feature = "alloc")]
#[allow(unused_extern_crates)] // unused where the target lacks `alloc::sync`
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod sync;
mod table;

pub mod breaker;
pub mod bulkhead;
pub mod clock;
pub mod deadline;
pub mod fallback;
pub mod guide;
pub mod hedge;
pub mod limit;
pub mod partition;
pub mod policy;
pub mod rate;
pub mod retry;
pub mod throttle;

#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub mod chaos;
#[cfg(feature = "serde")]
mod config_serde;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
#[path = "metrics_export.rs"]
pub mod metrics;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;

pub use breaker::{
    BreakerConfig, BreakerConfigError, BreakerMetrics, CallError, CallPermit, CircuitBreaker,
    Classify, Outcome, Rejection,
};
#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use bulkhead::OwnedPermit;
pub use bulkhead::{AcquireError, Bulkhead, BulkheadMetrics, ConfigError, Permit};
pub use policy::{Policy, PolicyConfig};
pub use rate::{KeyedError, KeyedRateLimiter, Quota, RateError, RateLimiter};
pub use throttle::{AdaptiveThrottle, ThrottleConfig, Throttled};
#[cfg(feature = "alloc")]
pub use {breaker::HeapBreaker, policy::HeapPolicy};

/// README.md's Rust examples, compiled and run as doc tests (its two
/// examples need `tokio`).
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The named futures returned by this crate's async methods, for storing them
/// in structs or naming them in trait impls.
pub mod futures {
    pub use crate::breaker::Call;
    pub use crate::bulkhead::{Acquire, AcquireTimeout, AcquireUntil};
    #[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
    pub use crate::bulkhead::{AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil};
    #[cfg(feature = "chaos")]
    pub use crate::chaos::Inject;
    pub use crate::deadline::Timeout;
    pub use crate::policy::{PolicyCall, RetryCall};
}
