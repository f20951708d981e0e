//! The guide: how the pieces fit, what was decided, and what was measured.
//!
//! Documentation only: these modules hold no items. Each page's Rust examples
//! are compiled doc tests (those that need a feature compile with it, e.g.
//! under `cargo test --all-features --doc`); shell commands are `sh` blocks to
//! run from the repository's root. Each item's own rules are on the item; a
//! page here links to them.
//!
//! | page | what it covers |
//! |---|---|
//! | [`tour`] | the tour on real loopback HTTP: how to run it, and each of its thirteen acts with its output |
//! | [`policy`] | one [`Policy`](crate::Policy) per external system (bulkhead ⊃ breaker ⊃ deadline), and retries within the request's budget |
//! | [`deadline`] | deadlines across the wire: the budget header (`grpc-timeout`, milliseconds), which way values round, the network margin, admission refusal, the inbound and outbound tower layers |
//! | [`breaker`] | the [`CircuitBreaker`](crate::CircuitBreaker)'s decisions: when it trips, what is slow, the open wait, half-open probes, generations, window sizes |
//! | [`hedging`] | hedged requests: when to hedge, what each attempt goes through, the latency histogram and the budget, the tail-latency simulation beside tower's `Hedge` |
//! | [`overload`] | who waits and who is refused under overload: a bounded wait queue, classes with guaranteed shares, client-side throttling; the simulations and what they showed |
//! | [`adaptive`] | adaptive concurrency: AIMD and Gradient2 behind an [`AdaptiveBulkhead`](crate::limit::AdaptiveBulkhead), on real HTTP, and where it plugs in |
//! | [`rate`] | rate limits: GCRA in one word, waits without a queue, keyed limits in a fixed table, memory per key |
//! | [`degrade`] | the degrade ladder, best first: answer without the optional part, cached data marked with its age, one retry within the budget, a clear refusal with `Retry-After`; each rung in code |
//! | [`throttle`] | client-side adaptive throttling (the SRE book's): counted at admission, what is an accept, in a policy and in tower, what it costs |
//! | [`global`] | one limit across processes: the global bulkhead on Redis (feature `redis`) |
//! | [`firmware`] | embassy firmware: flash and RAM on a Cortex-M4F, and runs on two boards in QEMU |
//! | `chaos` (feature `chaos`) | the resilience test kit: your own policy against injected errors, outcomes, latency and hangs (feature `chaos`), on `ManualClock`, the same faults on every run |
//! | [`testing`] | what we tried: faults and bad input, the soak on every runtime, fuzzing, and everything CI runs |
//! | [`when_to_use`] | when to use a [`Bulkhead`](crate::Bulkhead), and when tokio's `Semaphore` is enough |
//! | [`features`] | the one feature table: what each feature enables and which runtimes it serves; the runtimes, tested where; the examples |
//! | [`benchmarks`] | every bench table, each with the command that reproduces it |
//!
//! The crate's own docs ([the crate root](crate)) say which primitive to use
//! when, the defaults and where they come from, and the memory ordering.

pub mod adaptive;
pub mod benchmarks;
pub mod breaker;
#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub mod chaos;
pub mod deadline;
pub mod degrade;
pub mod features;
pub mod firmware;
pub mod global;
pub mod hedging;
pub mod overload;
pub mod policy;
pub mod rate;
pub mod testing;
pub mod throttle;
pub mod tour;
pub mod when_to_use;
