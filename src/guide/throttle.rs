//! Client-side adaptive throttling: stop sending what the backend will
//! refuse anyway.
//!
//! A backend that is overloaded refuses most of what it gets, and each
//! refusal still costs it a parse, a lookup, a response. A client that keeps
//! sending at full rate keeps it overloaded. An
//! [`AdaptiveThrottle`](crate::throttle::AdaptiveThrottle) — Google's SRE
//! book, "Handling Overload", client-side throttling — lets the client
//! refuse locally, in proportion to how much more it asks than the backend
//! accepts. Each item's rules are on the item; this page gives the decisions
//! in short.
//!
//! # The rule
//!
//! Over a window (two minutes by default, cut into
//! [`BUCKETS`](crate::throttle::BUCKETS) buckets) the throttle counts the
//! requests the application asked to send, the ones it refused itself
//! included, and the accepts; a new request is refused with probability
//!
//! ```text
//! min(max_probability, max(0, (requests − K × accepts) / (requests + 1)))
//! ```
//!
//! `K = 2` and `max_probability = 0.9` by default. While the backend
//! accepts everything nothing is refused; under overload, what reaches the
//! backend settles near `K ×` what it accepts: the deterministic simulation
//! in `tests/throttle.rs` (a backend of capacity C, offered 2–5 × C) holds
//! it within 10 % of that (measured: 0.998–1.002 at K = 2 and K = 1.5), and
//! the refusals follow the formula within ±0.01 in every band of
//! probability over a scripted overload (1.6 million draws).
//!
//! # The decisions
//!
//! - **Counted at admission.** A request counts in the bucket of the
//!   instant it was decided on, and its accept is credited to that same
//!   bucket, however late it comes: counting at completion (go-zero#5011's
//!   first mistake) credits slow calls to a window that did not send them.
//! - **The window covers the timeout.** With
//!   [`ThrottleConfigBuilder::timeout`](crate::throttle::ThrottleConfigBuilder::timeout)
//!   (and always in a policy, against its `call_timeout`), a window that,
//!   less one bucket, is shorter than the timeout is refused with a typed
//!   error: counts leave a bucket at a time, and a call outliving its
//!   bucket is never credited (go-zero#5011's second mistake).
//! - **What is an accept.** The book's rule: the backend answered, other
//!   than with a refusal for overload. An application error (a 404, even a
//!   500) is an accept; a 503, a 429, a `RESOURCE_EXHAUSTED` or a timeout
//!   is not. On a [`Ticket`](crate::throttle::Ticket) the caller says which;
//!   a ticket dropped unreported (a cancelled call, or one another layer
//!   refused) takes its request back, so a caller that gives up never reads
//!   as an overloaded backend.
//! - **In a [`Policy`](crate::Policy)** the throttle is the outermost
//!   layer (throttle ⊃ rate limit ⊃ bulkhead ⊃ breaker ⊃ deadline), asked
//!   once per attempt; a local refusal is
//!   [`ErrorKind::Throttled`](crate::policy::ErrorKind::Throttled), costs
//!   no cell and no slot, and is never retried. The policy has one
//!   classifier, so its success is an accept and its failure (the call
//!   timeout included) is not: classify application errors as successes
//!   to follow the book exactly. The tower
//!   `tower::ThrottleLayer` takes a classifier of
//!   its own.
//! - **No lock.** Each bucket is two `usize` words, a tag (the bucket's
//!   epoch) over a count; whoever first touches a stale word rolls it over
//!   with one compare-and-swap, and a record of an epoch that has left the
//!   window lands nowhere, never in a newer one (the loom models in
//!   `tests/loom/throttle.rs`). `usize` words keep it lock-free on
//!   32-bit targets (16-bit tags and counts there: a bucket saturates at
//!   65 535 requests).
//! - **Seeded draws.** The retries' SplitMix64
//!   ([`Jitter`](crate::retry::Jitter)), seeded per throttle; drawn only
//!   when the probability is above zero, so a healthy backend costs none.
//!
//! # In code
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! use watertight::throttle::ThrottleConfig;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let config = PolicyConfig::builder(16)
//!     .call_timeout(Duration::from_secs(2))
//!     .throttle(ThrottleConfig::builder().window(Duration::from_secs(60)).build().unwrap())
//!     .build()
//!     .unwrap();
//! let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
//! search.breaker().disable(); // the throttle alone, for this example
//!
//! // The backend sheds three calls in four (a 503 each: a failure).
//! let mut sent = 0;
//! let mut throttled = 0;
//! for i in 0..4000u32 {
//!     let shed = i % 4 != 0;
//!     let r = search
//!         .call(|| {
//!             sent += 1;
//!             async move { if shed { Err("503") } else { Ok(()) } }
//!         })
//!         .await;
//!     if let Err(e) = r {
//!         if matches!(e.kind(), ErrorKind::Throttled(_)) {
//!             throttled += 1;
//!         }
//!     }
//!     clock.advance(Duration::from_millis(10));
//! }
//! // With K = 2, a backend that accepts a quarter of what it gets is
//! // accepting less than 1 / K: the throttle climbs to its cap and stays
//! // there (90 % refused locally), and the trickle it lets through keeps
//! // measuring the backend (about 9 in 10 of the 4000 were refused here).
//! let m = search.throttle().unwrap().metrics();
//! assert_eq!(m.refused, throttled);
//! assert_eq!(sent + throttled, 4000);
//! assert_eq!(m.probability, 0.9);
//! assert!(throttled > 3400, "{throttled}");
//! # });
//! ```
//!
//! # Cost
//!
//! An admission reads the clock, walks the ring once (40 words) and counts
//! its request with one compare-and-swap; an accept is one more (no clock
//! read). `benches/throttle.rs` (`cargo bench --bench throttle --features
//! tokio`), one quick run on the shared 2-core machine:
//!
//! | what | plain | throttled | ratio |
//! |---|---|---|---|
//! | a `Policy` call of a ready future, on `ManualClock` (a clock read is one load) | 31.3 ns | 53.1 ns | 1.70× |
//! | the same on `TokioClock` (tokio's `Instant::now`, ~85 ns in this build, with `test-util`) | 30.7 ns | 138.8 ns | 4.5× |
//! | `check()` + `accepted()` alone: `ManualClock` / `StdClock` (whose read is 22.9 ns) / `TokioClock` | | 22.4 / 53.9 / 107.5 ns | |
//!
//! A plain policy call of a ready future reads no clock at all, and the
//! throttle's counts are time-windowed, so it cannot stay within 1.2× of
//! one: its floor is a clock read plus two compare-and-swaps. Where the
//! clock read matters, put the throttle on a cheap clock: an
//! `AdaptiveThrottle<CoarseClock>` in a `tower::ThrottleLayer`
//! in front of the policy (its buckets are seconds wide).
