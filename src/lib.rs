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
//!   wait, and capped half-open probes.
//!
//! - [`deadline`]: a timeout per call ([`deadline::timeout`]) and a request
//!   budget ([`deadline::Deadline`]) handed down the call chain;
//! - the [`Policy`]: one per external system, running a call through the
//!   bulkhead, the breaker and a deadline in that order, with one "system
//!   unavailable" error for every refusal.
//!
//! # When to use it, and when not
//!
//! Use a [`Bulkhead`] per external system when a call should **fail fast**
//! (a 503, a cached answer, a fallback) rather than queue behind a system
//! that is slow: it rejects at once or after a short, bounded wait, counts
//! why, names the system in its metrics, and runs unchanged on tokio, smol,
//! async-std and embassy, with or without an allocator.
//!
//! Use a [`CircuitBreaker`] per external system when calls to a failing
//! system should be refused at once (with a `Retry-After` hint) instead of
//! piling up behind timeouts. It needs no lock, no heap and no std, so the
//! same type guards a payment API on a server and an upstream link on a
//! gateway, in a `static` if you like.
//!
//! If you need a general async semaphore on tokio — long or unbounded waits,
//! permits as a budget of bytes or items, no metrics — `tokio::sync::Semaphore`
//! is enough, and so is `async_lock::Semaphore` elsewhere.
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
//! # Features
//!
//! - `std` (default): [`clock::StdClock`]; implies `alloc`.
//! - `alloc`: waiting (`acquire*`), owned permits where the target has
//!   `alloc::sync`, and [`clock::ManualClock`] as a [`clock::Timer`]. Each wait
//!   allocates one listener node (event-listener); `try_acquire`, an acquire
//!   that succeeds at once, and release never allocate.
//! - `critical-section`: forwarded to portable-atomic for targets without
//!   compare-and-swap (`thumbv6m`). Enable it in the firmware binary.
//! - `tokio`: `clock::TokioClock`.
//! - `async-io`: `clock::AsyncIoClock`, for smol and async-std.
//! - `embassy`: `clock::EmbassyClock`.
//! - `tower`: `tower` — `Layer`s and `Service`s for a bulkhead, a breaker and
//!   a policy (inbound load shedding, outbound protection).
//! - `metrics`: `metrics` — exporters that copy bulkhead, breaker and policy
//!   numbers into the `metrics` facade under the seeds' names, with handles
//!   registered once.
//! - `tracing`: one `tracing` event per breaker transition and per
//!   rejection, with the system's name.
//! - `serde`: `Deserialize` for `BreakerConfig` and `PolicyConfig`,
//!   validated (errors name the field; thresholds are percent).
//!
//! Without `alloc`, the fail-fast bulkhead (`try_acquire*`) and the whole
//! circuit breaker still build and need no allocator.
//!
//! # Runtime support
//!
//! Nothing here spawns or assumes an executor: waiting parks on an
//! `event_listener::Event`, which any executor can drive, and time comes from
//! the clock type parameter. The same tests run on tokio (current-thread and
//! multi-thread), smol, async-std and embassy's executor.
//!
//! # Memory ordering
//!
//! Taking a permit is an `Acquire` and giving it back a `Release` on the
//! bulkhead's state word, so a permit hands over like a mutex: what its last
//! holder wrote is visible to its next holder.
//!
//! A breaker's transitions are `AcqRel` compare-and-swaps on its state word
//! and its reads `Acquire`, so whoever sees a state also sees the window and
//! timestamp that the thread making the transition wrote before it. Counters
//! that are only statistics (rejected, stale) are `Relaxed`.
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

pub mod breaker;
pub mod bulkhead;
pub mod clock;
pub mod deadline;
pub mod policy;

#[cfg(feature = "serde")]
mod config_serde;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
#[path = "metrics_export.rs"]
pub mod metrics;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;

pub use breaker::{
    BreakerConfig, BreakerConfigError, BreakerMetrics, CallError, CallPermit, CircuitBreaker,
    Outcome, Rejection,
};
#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use bulkhead::OwnedPermit;
pub use bulkhead::{AcquireError, Bulkhead, BulkheadMetrics, ConfigError, Permit};
pub use policy::{Policy, PolicyConfig};

/// The named futures returned by this crate's async methods, for storing them
/// in structs or naming them in trait impls.
pub mod futures {
    pub use crate::breaker::Call;
    #[cfg(feature = "alloc")]
    pub use crate::bulkhead::{Acquire, AcquireTimeout, AcquireUntil};
    #[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
    pub use crate::bulkhead::{AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil};
    pub use crate::deadline::Timeout;
}
