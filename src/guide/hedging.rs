//! Hedged requests: cutting the tail of a replicated system's latency for a
//! few percent more load, inside the request's deadline and a budget.
//!
//! # When to hedge
//!
//! When the calls are **idempotent** (a read, a lookup, a `PUT` of the same
//! value) and the system behind them is **replicated**, so that a second
//! request is likely to meet another, healthy replica. The slowest calls to
//! such a system are usually calls that met one slow replica (a garbage
//! collection, a compaction, a noisy neighbour), not a slow system: "The
//! Tail at Scale" (Dean & Barroso) sent a second request once the first had
//! been out for the 95th-percentile latency and cut a p99.9 from 1,800 ms
//! to 74 ms for about 2 % more load.
//!
//! Not for calls that change state each time, and not as a retry: a
//! hedge is sent because an attempt is *slow*, never because it *failed*
//! (that is [`Policy::call_idempotent`](crate::Policy::call_idempotent)'s
//! job). When the whole system is slow, hedging only doubles its load:
//! the budget stops it (below).
//!
//! # A hedged call
//!
//! One [`Hedge`](crate::hedge::Hedge) per system, beside its
//! [`Policy`](crate::Policy), and [`Policy::call_hedged`](crate::Policy::call_hedged)
//! for each call:
//!
//! ```
//! use core::future::IntoFuture;
//! use core::time::Duration;
//! use watertight::clock::{Clock, ManualClock, Timer};
//! use watertight::deadline::Deadline;
//! use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new(); // in a server: TokioClock, AsyncIoClock, EmbassyClock
//! let search: Policy<_> = Policy::new("search", PolicyConfig::builder(8).build().unwrap(), &clock).unwrap();
//! let hedge = Hedge::new(
//!     "search",
//!     HedgeConfig::builder()
//!         .delay(HedgeDelay::Percentile(Percentile::P95)) // the default
//!         .min_samples(20)
//!         .build()
//!         .unwrap(),
//! );
//!
//! // Warm up: 20 calls of 10 ms give the histogram its p95.
//! for _ in 0..20 {
//!     let call = search.call_hedged(&hedge, || async {
//!         (&clock).sleep_until(clock.now() + Duration::from_millis(10)).await;
//!         Ok::<_, ()>("replica")
//!     });
//!     let mut call = core::pin::pin!(call.into_future());
//!     while futures_lite::future::poll_once(call.as_mut()).await.is_none() {
//!         clock.advance(Duration::from_millis(1));
//!     }
//! }
//! assert!(hedge.delay().unwrap() >= Duration::from_millis(10));
//!
//! // A call whose first replica stalls: the hedge answers.
//! let request = Deadline::after(&clock, Duration::from_millis(500));
//! let mut replica = 0;
//! let call = search
//!     .call_hedged(&hedge, || {
//!         replica += 1;
//!         let (clock, ms, name) = match replica {
//!             1 => (&clock, 400, "stalled replica"),
//!             _ => (&clock, 8, "healthy replica"),
//!         };
//!         async move {
//!             clock.sleep_until(clock.now() + Duration::from_millis(ms)).await;
//!             Ok::<_, ()>(name)
//!         }
//!     })
//!     .within(&request);
//! let mut call = core::pin::pin!(call.into_future());
//! let answer = loop {
//!     if let Some(answer) = futures_lite::future::poll_once(call.as_mut()).await {
//!         break answer;
//!     }
//!     clock.advance(Duration::from_millis(1));
//! };
//! assert_eq!(answer, Ok("healthy replica"));
//! assert_eq!(hedge.metrics().won, 1);
//! assert_eq!(search.bulkhead().in_flight(), 0); // the stalled attempt was dropped
//! # });
//! ```
//!
//! What each attempt goes through, and what is counted:
//!
//! | step | what happens |
//! |---|---|
//! | the first attempt | exactly [`Policy::call`](crate::Policy::call): throttle, rate limit, a bulkhead slot (waiting up to `max_wait`), the breaker, the call timeout |
//! | the delay | fixed, or the histogram's percentile read when the call starts (no hedge below `min_samples`); counted from the first attempt's start, its slot taken |
//! | a hedge is due | not at or past the request's deadline; a token of the hedge budget (none: `not_sent_budget`); then the whole policy again, but **never waiting for a slot**: a full bulkhead, an open breaker, a rate limit or the throttle means `not_sent_*`, the token goes back, and the attempts in flight go on |
//! | an attempt answers | the classifier's [`Success`](crate::Outcome::Success) (or `Ignored`) wins: the others are dropped (`lost`), their slots back, **nothing recorded** — no failure, no slow call for the breaker, no outcome for the throttle; a success refills the budget |
//! | an attempt fails | not the answer while another is in flight; the last one's error is the call's; a failure before any hedge is due ends the call (hedging is not retrying) |
//!
//! The attempts live in the call's own future (room for the first and up to
//! [`MAX_HEDGES`](crate::hedge::MAX_HEDGES) hedges, polled together), with
//! one timer for the next hedge: no task is spawned, nothing is allocated
//! (`tests/hedge_no_alloc.rs` counts 0 allocations per hedged call on
//! tokio's clock), and it runs on any [`Timer`](crate::clock::Timer).
//!
//! With the `tower` feature, `tower::HedgeLayer` does the same around a
//! tower service: each attempt readies the inner service and sends it a
//! clone of the request (so `Req: Clone`), through an `Arc<Policy>` and an
//! `Arc<Hedge>`; its response future, `HedgeFuture`, is the same
//! [`HedgedCall`](crate::policy::HedgedCall), allocation-free.
//!
//! # The delay and its histogram
//!
//! [`LatencyHistogram`](crate::hedge::LatencyHistogram): 976 log buckets
//! (exact below 16 ns, then 16 per power of two), two atomic slots each and
//! the largest value the bucket was given, 23.4 KB, no lock, no upper cap.
//! A percentile reports that largest value: never below the true one, at
//! most 6.25 % above (the bucket's top), so a hedge goes out a little late
//! rather than early; exact on latencies that repeat.
//!
//! **Windowed by count**: the last `window` to `2 × window` calls (1000 by
//! default), not the last period of time, and not exponentially decayed.
//! tower's `Hedge` rotates two HdrHistograms every period behind a mutex;
//! its first version capped latencies at 10 s (tower#475) and it hedges
//! nothing until a full period has been recorded. By count, the histogram
//! needs no clock (a record is one `fetch_add` and one compare-and-swap),
//! every percentile rests on the same number of calls at the peak and at
//! night, and a window ends without a clearing pass: each bucket's two
//! slots carry their window's number, so a record two windows late is
//! simply not counted ([`LatencyHistogram`](crate::hedge::LatencyHistogram)
//! has the details; a loom model checks them).
//!
//! **What it records**: one sample per hedged call, the first attempt's
//! latency, or when a hedge won, how long the first attempt had run when it
//! was dropped. That is a sample of the latency *without* hedging (cut off
//! from below, and above the delay: a tail sample stays in the tail).
//! Recording the winners instead — what tower does — feeds the hedged,
//! shorter tail back into the delay, which then falls call after call.
//!
//! # The budget
//!
//! Its own, not the retry budget: hedges are spent on a healthy system all
//! day long (about `100 − p` percent of the calls), retries on failures, all
//! at once in an outage; sharing one bucket would let steady hedging hold
//! the retries at their threshold, and an outage's retries would stop the
//! hedges to the replicas that are fine. A token per hedge sent, 10 % of a
//! token back per successful call (10 tokens by default): in the long run
//! hedges are at most 10 % of the calls, whatever the histogram says when
//! everything slows down. An empty budget stops *new* hedges only; those in
//! flight run to their end (failsafe-go#141 cancelled them).
//!
//! # Metrics
//!
//! With the `metrics` feature, `metrics::HedgeExporter`:
//! `hedges_total{system,outcome}` (`won`, `lost`, `not_sent_budget`,
//! `not_sent_bulkhead`, `not_sent_breaker`, `not_sent_limited`),
//! `hedge_budget_tokens{system}` and `hedge_latency_seconds{system,quantile}`
//! (the histogram's p50, p95, p99, p99.9). With `tracing`, a DEBUG event
//! per hedge not sent (target `watertight::hedge`).
//!
//! # The simulation
//!
//! `tests/hedge_sim.rs`, on [`ManualClock`](crate::clock::ManualClock): 3
//! replicas, request `i` to replica `i mod 3` and its hedge to the next;
//! every attempt 10 ms plus a uniform 0–10 ms, except that replica 2 is
//! slow on 5 % of its calls (500 ms plus a uniform 0–500 ms); 10 000
//! requests, one after another, through a policy; the delay at the p95, 100
//! samples before the first hedge, one hedge per call. tower's `Hedge` runs
//! the same latencies with the same settings on tokio's paused clock (its
//! period 15 s, about 1000 requests).
//!
//! ```sh
//! cargo test --all-features --test hedge_sim -- --nocapture
//! ```
//!
//! | | p50 ms | p99 ms | p99.9 ms | extra load |
//! |---|---:|---:|---:|---:|
//! | no hedging | 15 | 743 | 973 | 0.00 % |
//! | `call_hedged`, p95 | 15 | 35 | 40 | 1.80 % |
//! | tower `Hedge`, p95 | 15 | 35 | 500 | 1.70 % |
//!
//! Hedging at the p95 cuts the p99 20× and the p99.9 24× for 1.8 % more
//! load — the 1.7 % of requests whose first attempt was slow, and nothing
//! else (180 hedges, all won). Beside tower: the same p99, 35 ms (these
//! latencies are whole milliseconds and their p95 is exactly 20 ms, which
//! tower's three-significant-digit histogram holds exactly and ours reads
//! as the largest value its bucket was given, 20 ms too; reading the
//! bucket's top, 20.97 ms, cost one 1 ms step); our p99.9 is 12× lower,
//! because tower hedges nothing during its first
//! period (about 1000 requests, 17 of them slow) and we hedge from the
//! 100th sample on. The test asserts bounds that follow from the setup,
//! not these figures: without hedging the p99 is a slow attempt (over 1 %
//! of requests are slow); with it p99 and p99.9 are at most the delay
//! (≤ 20 ms × 17/16) plus a fast attempt, at least 3× lower, for at most
//! 5 % more load.
//!
//! # Over real HTTP
//!
//! `tests/hedge_http.rs`: an axum server on 127.0.0.1 with three replica
//! routes, a `reqwest` client, the policy on `TokioClock`; replica 2 never
//! answers 1 in 10 of the requests it gets first (3 of 90). One run, one
//! request after another:
//!
//! ```sh
//! cargo test --all-features --test hedge_http -- --nocapture
//! ```
//!
//! | 90 requests | p99 | requests sent |
//! |---|---:|---:|
//! | `call`, 300 ms call timeout | 302 ms (the timeout) | 90 |
//! | `call_hedged`, a fixed 50 ms delay | 53–56 ms | 93 (3 hedges, all won) |
//!
//! The test asserts the counts only (which requests timed out, that the 3
//! were answered by their hedge, the breaker's window free of failures,
//! the losers' client futures dropped), never the latencies.
//!
//! # What it costs
//!
//! `benches/hedge.rs` (criterion, on a shared 2-core machine, one short run:
//! read the ratios, not the nanoseconds):
//!
//! ```sh
//! cargo bench --bench hedge -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! | a call whose first attempt answers at once | median | ÷ `call` |
//! |---|---:|---:|
//! | `call` | 45 ns | 1.0 |
//! | `call_hedged`, fixed delay | 100 ns | 2.2 |
//! | `call_hedged`, p95 of a full histogram | 114 ns | 2.5 |
//!
//! The difference is the hedged call's own work: two clock reads (the first
//! attempt's start and end), one histogram record (17 ns: a `fetch_add` and
//! a compare-and-swap) and the kept delay's load. Reading a percentile
//! itself walks the 976 buckets twice (1.5–2.4 µs); [`Hedge::delay`](crate::hedge::Hedge::delay)
//! does it once per `window / 16` records and keeps the value in one word
//! in between, so a call pays it only when a refresh period turns.
