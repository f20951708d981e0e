//! One policy per system, and retries within the request's budget.
//!
//! A [`Policy`](crate::Policy) runs every call to one system through its
//! bulkhead, its breaker and a deadline, in that order (why that order: the
//! [crate docs](crate#which-primitive-when)):
//!
//! ```rust
//! # #[cfg(feature = "tokio")] {
//! use core::time::Duration;
//! use watertight::clock::TokioClock;
//! use watertight::deadline::Deadline;
//! use watertight::policy::{Error, Policy, PolicyConfig};
//! use watertight::BreakerConfig;
//!
//! async fn price(
//!     pricing: &Policy<TokioClock>,
//!     request: &Deadline<TokioClock>,
//!     sku: u32,
//! ) -> Result<u32, Error<std::io::Error>> {
//!     // Slot wait and call timeout are each capped by what is left of the
//!     // request's budget; a refusal by any layer is `err.is_unavailable()`.
//!     pricing.call_within(request, || fetch_price(sku)).await
//! }
//!
//! async fn fetch_price(_sku: u32) -> Result<u32, std::io::Error> {
//!     Ok(1299)
//! }
//!
//! fn pricing() -> Policy<TokioClock> {
//!     // A pool of 10 connections: 8 calls at once, 100 ms slot wait, 2 s per call.
//!     let config = PolicyConfig::for_pool(10)
//!         .max_wait(Duration::from_millis(100))
//!         .call_timeout(Duration::from_secs(2))
//!         .breaker(BreakerConfig::DEFAULT)
//!         .build()
//!         .expect("valid config");
//!     Policy::new("pricing", config, TokioClock).expect("window fits")
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! #     let request = Deadline::after(TokioClock, Duration::from_millis(1500));
//! #     assert_eq!(price(&pricing(), &request, 7).await.unwrap(), 1299);
//! # });
//! # }
//! ```
//!
//! `Policy<TokioClock>` keeps its breaker's window inline, at most 64 calls
//! (`Policy<C, N>` for another compile-time `N`, up to 1023): no heap, so it
//! also runs on a microcontroller, and a config with a larger window is
//! refused by `Policy::new`. A server whose window comes from its
//! environment (`CLIENT_PRICING__CB_WINDOW_SIZE=100`) uses a
//! `HeapPolicy<TokioClock>` instead: the same policy with the window sized
//! from the config when it is made — one allocation, then none per call — so
//! any `window_size` a config accepts (1 to 1023) runs
//! (`examples/env_config.rs`).
//!
//! A bulkhead refusal never reaches the breaker; a breaker refusal gives the
//! slot back at once; a call that runs out of its own `call_timeout` is a
//! failure for the breaker, while one cut short by the caller's budget is
//! recorded as nothing (the system did not exceed its own timeout).
//!
//! # Retries
//!
//! A call that is safe to make twice can be retried through its policy:
//!
//! ```rust
//! # #[cfg(feature = "tokio")] {
//! use core::time::Duration;
//! use watertight::clock::TokioClock;
//! use watertight::deadline::Deadline;
//! use watertight::policy::{Error, Policy, PolicyConfig};
//! use watertight::retry::RetryConfig;
//!
//! #[derive(Debug)]
//! enum SearchError {
//!     Status(u16),
//! }
//!
//! async fn search(
//!     policy: &Policy<TokioClock>,
//!     request: &Deadline<TokioClock>,
//!     q: &str,
//! ) -> Result<String, Error<SearchError>> {
//!     // Safe to make twice: a failure or a call timeout is retried, each
//!     // attempt through the whole policy again, inside the request's budget.
//!     policy
//!         .call_idempotent(|| fetch(q))
//!         .within(request)
//!         .retry_after(|e: &SearchError| match e {
//!             SearchError::Status(503) => Some(Duration::from_millis(200)),
//!             _ => None,
//!         })
//!         .await
//! }
//!
//! async fn fetch(q: &str) -> Result<String, SearchError> {
//!     if q.is_empty() { Err(SearchError::Status(503)) } else { Ok(format!("results for {q}")) }
//! }
//!
//! fn search_policy() -> Policy<TokioClock> {
//!     let config = PolicyConfig::builder(4)
//!         .call_timeout(Duration::from_millis(300))
//!         // The defaults, written out.
//!         .retry(
//!             RetryConfig::builder()
//!                 .max_attempts(2)
//!                 .backoff(Duration::from_millis(50), Duration::from_secs(1))
//!                 .min_attempt_time(Duration::from_millis(50))
//!                 .budget(10, 10.0),
//!         )
//!         .build()
//!         .expect("valid config");
//!     Policy::new("search", config, TokioClock).expect("window fits")
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! #     let request = Deadline::after(TokioClock, Duration::from_millis(1500));
//! #     let policy = search_policy();
//! #     assert_eq!(search(&policy, &request, "boots").await.unwrap(), "results for boots");
//! # });
//! # }
//! ```
//!
//! **The order: retry ⊃ rate limit ⊃ bulkhead ⊃ breaker ⊃ deadline.** The
//! retry is outermost, so each attempt is a call like any other: it takes a
//! cell of the rate limit if the policy has one (see [below](#a-rate-limit-in-a-policy)),
//! a slot of its own (none is held through the backoff sleep), passes the breaker again
//! (which sees every attempt's outcome, and an open breaker refuses the retry
//! as it refuses any call), and runs under its own call timeout, all inside
//! what is left of the request's budget. A retry inside the bulkhead would
//! hold a slot while it sleeps; inside the breaker it would show the breaker
//! one outcome for several attempts and keep calling a system the breaker has
//! given up on.
//!
//! **What is retried, and what never is.** Only calls marked idempotent
//! (`call_idempotent`, or a tower layer made with `PolicyLayer::idempotent()`;
//! a plain `call`, `call_with` or `call_within` never retries), and of those
//! only an attempt that failed — an outcome the classifier (`.classify(k)`;
//! by default: every `Err`) calls a `Failure`, an `Err` or an answer such as
//! an HTTP client's `Ok(503)` (when the retries end, the last answer is
//! returned) — or that ran out of its own call timeout. Never a success, an
//! outcome the classifier calls a `Success` or `Ignored`, a call cut short by
//! the request's own budget, nor any refusal by this crate's layers: a full
//! or closed bulkhead, an open breaker, a rate limit with no cell, a spent
//! budget mean "stop", and
//! retrying them is the storm. `.retry_after(hint)` lets an error say how
//! long to wait (a server's `Retry-After`) instead of the backoff, still
//! never past the budget.
//!
//! **Bounded three ways, and the defaults.**
//!
//! - Attempts: 2 in all (one retry: retry once, if the operation is
//!   idempotent and the budget allows).
//! - Time: before retry *n*, a sleep drawn uniformly from
//!   `[0, min(1 s, 50 ms × 2ⁿ⁻¹)]` (full jitter, from a SplitMix64 sequence
//!   per policy: no global RNG, `no_std`); never a sleep past the request's
//!   deadline, and no attempt started with less than 50 ms of it left (the
//!   last error is returned instead).
//! - The system's retry budget, shared by every caller of the policy:
//!   10 tokens, 10 % of a token back per success (gRFC A6's retry throttling).
//!   Every failed attempt of an idempotent call takes a token (the last
//!   attempt's too), every success gives a tenth of one back (plain calls do
//!   not touch the budget); a failed call is retried only if, after its
//!   failure took its token, more than half of the tokens are left. So
//!   from a full budget a storm gets at most 4 retries, and then none until
//!   successes bring it back above half (10 successes give back one token).
//!   One atomic word, lock-free, no allocation; the check and the withdrawal
//!   are one step, so callers failing at once cannot spend the same tokens.
//!
//! `Policy::retry_metrics()` counts the retries after a failure and after a
//! timeout, and the failed calls the budget did not let retry (exported as
//! `retries_total{system, reason}` and `retry_budget_exhausted_total{system}`
//! by the `metrics` feature's `PolicyExporter`; the `tracing` feature logs
//! one event per retry); `Policy::retry_budget().tokens()` reads the budget.
//! With `serde`, the settings are the config keys `retry_max_attempts`,
//! `retry_base_backoff`, `retry_max_backoff`, `retry_min_attempt_time`,
//! `retry_budget_tokens` and `retry_budget_ratio`.
//!
//!
//! How those bounds do in a retry storm, beside a naive loop and tower's
//! `retry` with its `TpsBudget`, and what a retryable call costs when it
//! needs no retry: [benchmarks: retries](super::benchmarks#retries).
//!
//! # A bounded wait queue
//!
//! `max_wait` decides how long a call may wait for a slot; `max_waiters`
//! (`PolicyConfigBuilder::max_waiters`, key `max_waiters`) caps how many
//! may wait at once. Size the wait first: with the usual 100 ms a bound
//! changes little, since a waiter who cannot be served in time is refused
//! when its wait runs out anyway. The bound is for a long wait (a queue
//! meant, `allow_long_max_wait`) or a load far above what the system
//! serves: set it to about what the system serves within the wait you
//! will accept, `max_concurrent × wait / call time`, and the excess is
//! refused at once (`BulkheadFull`; the bulkhead counts it as
//! `rejected_queue_full`, the exporter as `reason="queue_full"`) instead of
//! holding memory and then timing out. In the overload simulation
//! (`cargo test --test overload_sim -- --nocapture`: 4 slots, 10 ms calls,
//! a 1 s max wait, 5 s of open-loop arrivals) both keep the backend at its
//! 400 calls/s; the bound of 20 (50 ms of work) holds the admitted calls'
//! p99 at 60 ms and the queue at 20, where without it p99 is 1 010 ms and
//! the queue holds every call that arrives within the second (800 at 2×,
//! 2 000 at 5×), most of them to time out.
//!
//! | load | config | goodput/s | p99 | refused at once | timed out | max waiting |
//! |---|---|---|---|---|---|---|
//! | 2× | no bound | 399 | 1 010 ms | 0 | 1 200 | 800 |
//! | 2× | 20 waiters | 399 | 60 ms | 1 980 | 0 | 20 |
//! | 5× | no bound | 399 | 1 010 ms | 0 | 6 000 | 2 000 |
//! | 5× | 20 waiters | 399 | 60 ms | 7 980 | 0 | 20 |
//!
//! # A rate limit in a policy
//!
//! A bulkhead bounds how many calls are in flight; a rate limit how often
//! they start (a provider's "100 requests per minute", a modem's 10
//! messages a second). `PolicyConfigBuilder::rate(Quota)` gives the policy
//! a [`RateLimiter`](crate::rate::RateLimiter) (GCRA, one atomic word),
//! named after the system and on the policy's clock:
//!
//! ```rust
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! use watertight::rate::Quota;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! // The provider allows 50 requests a second, 10 at once.
//! let config = PolicyConfig::builder(8)
//!     .rate(Quota::per_second(50).burst(10))
//!     .build()
//!     .unwrap();
//! let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
//!
//! for _ in 0..10 {
//!     provider.call(|| async { Ok::<_, ()>("ok") }).await.unwrap();
//! }
//! let err = provider.call(|| async { Ok::<_, ()>("ok") }).await.unwrap_err();
//! // One "unavailable" error with the exact hint: a 429 or 503 + Retry-After.
//! assert_eq!(*err.kind(), ErrorKind::RateLimited { retry_after: Duration::from_millis(20) });
//! assert!(err.is_unavailable());
//! assert_eq!(err.retry_after(), Some(Duration::from_millis(20)));
//!
//! clock.advance(Duration::from_millis(20)); // one emission interval
//! assert!(provider.call(|| async { Ok::<_, ()>("ok") }).await.is_ok());
//! let m = provider.rate_limiter().unwrap().metrics();
//! assert_eq!((m.admitted, m.refused), (11, 1));
//! # });
//! ```
//!
//! Where it sits, and why:
//!
//! - **Before the bulkhead.** A refused cell costs no slot, asks no breaker
//!   and starts no timer; a call that does not conform is refused before it
//!   holds anything. (After the bulkhead, a refusal would have taken a slot
//!   and given it back, and a full bulkhead would not tell how often calls
//!   start.) A cell taken is spent even if the bulkhead or the breaker then
//!   refuses: the limit only ever errs towards fewer calls.
//! - **Once per attempt.** Each attempt of `call_idempotent` is a request
//!   to the system, so each takes a cell: a provider counts retries too.
//!   Hedged requests, when the crate has them, are attempts as well.
//! - **A refusal ends the retries**, as every refusal by a layer does: the
//!   caller gets `RateLimited` with the limiter's exact `retry_after` rather
//!   than a loop that spends the next cells on retries.
//! - **It never waits.** A cell that does not conform now is refused at
//!   once, whatever `max_wait` and the request budget say: `max_wait` is the
//!   bulkhead's (a slot frees when any call ends, a cell only when its time
//!   comes, which `retry_after` already tells exactly). To wait for a cell,
//!   await the limiter's own `acquire_until(deadline)`, which refuses at once
//!   a cell that cannot conform by the deadline.
//! - **Free without one.** A policy with no rate pays one branch per call.
//!
//! With `serde` the keys are `rate_cells`, `rate_period` (1 s by default)
//! and `rate_burst` (the cells by default), or a nested `rate` table with
//! `cells`, `period`, `burst`; the `metrics` feature's `PolicyExporter`
//! exports `rate_limit_admitted_total`, `rate_limit_refused_total` and
//! `rate_limit_waiting` under the system's label, and the `tracing` feature
//! logs one DEBUG event per refusal (target `watertight::rate`, fields
//! `system`, `retry_after_ms`).
