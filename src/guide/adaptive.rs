//! A limit that finds itself: adaptive concurrency.
//!
//! A fixed capacity is a guess — 80 % of the pool, or "200 in flight, from
//! measurements" — and it goes stale the moment the system behind it gets
//! slower or faster. [`AdaptiveBulkhead`](crate::limit::AdaptiveBulkhead) is a [`Bulkhead`](crate::Bulkhead)
//! whose capacity a limit algorithm moves, from the round-trip times and
//! outcomes of the calls it lets through:
//!
//! ```rust
//! # #[cfg(feature = "tokio")] {
//! use watertight::clock::TokioClock;
//! use watertight::limit::{AdaptiveBulkhead, Gradient2, Signal};
//!
//! async fn search(q: &str, limit: &AdaptiveBulkhead<TokioClock, Gradient2>) -> Option<u16> {
//!     let call = limit.try_acquire().ok()?; // full: refuse at once (a 503 upstream)
//!     let status = get(q).await;
//!     // The permit measures the round trip and gives the slot back.
//!     call.record(match status {
//!         200..=399 => Signal::Success,
//!         429 | 503 => Signal::Dropped, // the system shedding load: congestion, not a fast call
//!         _ => Signal::Failure,        // says nothing about load
//!     });
//!     Some(status)
//! }
//!
//! async fn get(_q: &str) -> u16 {
//!     200
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! #     let limit = AdaptiveBulkhead::new("search", Gradient2::new(), TokioClock);
//! #     assert_eq!(search("boots", &limit).await, Some(200));
//! # });
//! # }
//! ```
//!
//! - **Two algorithms** behind one small trait (`LimitAlgorithm`), each with
//!   its source's published defaults and formula on its docs: `Aimd` (Netflix
//!   concurrency-limits' `AIMDLimit`: +1 per window while at least half the
//!   limit is in use, × 0.9 on a drop or timeout; initial 20, bounds
//!   `[20, 200]`, timeout 5 s) and `Gradient2` (its `Gradient2Limit`: the
//!   window's average RTT against a long-term exponential average of it,
//!   `gradient = clamp(1.5 × long / short, 0.5, 1)`, `L' = 0.8 L + 0.2 (L ×
//!   gradient + 4)`; initial 20, bounds `[20, 200]`, a long window of 600 after
//!   a warm-up of 10). Both `no_std`, no allocation, the limit always in
//!   `[min, max]`.
//! - **The failure modes their users reported, handled**: a dropped or refused
//!   call comes back fast, and averaged in with the successes it makes an
//!   overloaded system look fast — here only successes are latency samples, and
//!   a drop or a timeout is congestion (Gradient2 takes its floor gradient for
//!   that window: × 0.9). Calls that time out hold their permits while the
//!   quick ones finish, which is when AIMD grows — here any timeout in a window
//!   means no growth.
//! - **Lock-free**: acquire and release are the bulkhead's own; `record` is
//!   one clock read and up to three relaxed atomic adds; the first call to
//!   finish after a window (1 s, at least 10 samples: Netflix's `WindowedLimit`
//!   defaults) closes it behind a flag nobody waits on, runs the algorithm and
//!   resizes the bulkhead — or `tick()` does, from a timer you drive, where
//!   traffic is sparse. A permit dropped without a verdict (cancelled,
//!   panicked) records nothing. One `tracing` event per limit change
//!   (`bulkhead limit changed`, with `from`, `to` and the window's counts).
//! - **Checked**: unit tests against the formulas with worked numbers, a
//!   proptest that random windows never push either algorithm out of its
//!   bounds nor up on congestion (`tests/limit.rs`), the bulkhead model test
//!   with the limit moving under held permits (no permit lost or invented),
//!   loom models of the sample/window protocol (every sample counted once,
//!   one closer at a time, permits intact through the resizes).
//!
//! # The simulation
//!
//! A deterministic simulation on `ManualClock` (a downstream whose workers go
//! from 40 to 10 and back, fixed limits beside AIMD and Gradient2), its
//! tables and what they show: [benchmarks: the simulation](super::benchmarks#adaptive-limits-the-simulation).
//!
//! # On real HTTP
//!
//! `examples/adaptive.rs`: an axum server on 127.0.0.1 with 20 workers (50 ms
//! of work per request, a queue of 10, then 503), called at 300 requests/s
//! open-loop through an `AdaptiveBulkhead` running Gradient2 on `TokioClock`
//! with windows of 100 ms; after 3 s the server drops to 5 workers, after 6 s
//! it has 20 again. Every 250 ms it prints the limit beside the workers, what
//! the calls saw, and a text plot (`#` up to the limit, `|` at the workers):
//!
//! ```sh
//! cargo run --release --example adaptive --features tokio   # about 10 s
//! ```
//!
//! ```text
//! 300 requests/s through an adaptive bulkhead (Gradient2, windows of 100 ms) to a server of 20, then 5, then 20 workers (50 ms of work each, 503 past 10 waiting)
//!
//! |   t s | workers | limit | ok | 503 | refused | p50 ms |  limit # against workers |
//! |------:|--------:|------:|---:|----:|--------:|-------:|--------------------------|
//! |  0.25 |      20 |    21 | 61 |   0 |       0 |   51.3 | ####################|      |
//! |  0.50 |      20 |    23 | 75 |   0 |       0 |   51.4 | ####################|##    |
//! |  0.75 |      20 |    25 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  1.00 |      20 |    27 | 75 |   0 |       0 |   51.4 | ####################|####  |
//! |  1.25 |      20 |    29 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  1.50 |      20 |    31 | 75 |   0 |       0 |   51.4 | ####################|####  |
//! |  1.75 |      20 |    32 | 75 |   0 |       0 |   51.2 | ####################|####  |
//! |  2.00 |      20 |    33 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  2.25 |      20 |    34 | 75 |   0 |       0 |   51.4 | ####################|####  |
//! |  2.50 |      20 |    34 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  2.75 |      20 |    34 | 75 |   0 |       0 |   51.2 | ####################|####  |
//! |  3.00 |       5 |    34 | 75 |   0 |       0 |   51.4 | #####|###################  |
//! |  3.25 |       5 |    27 | 33 |  43 |       0 |   85.1 | #####|###################  |
//! |  3.50 |       5 |    20 | 24 |  51 |       0 |  152.1 | #####|##############       |
//! |  3.75 |       5 |    16 | 23 |  51 |       0 |  151.2 | #####|##########           |
//! |  4.00 |       5 |    14 | 25 |   3 |      48 |  150.3 | #####|########             |
//! |  4.25 |       5 |    13 | 25 |   0 |      51 |  143.1 | #####|#######              |
//! |  4.50 |       5 |    12 | 25 |   0 |      52 |  138.7 | #####|######               |
//! |  4.75 |       5 |    12 | 25 |   0 |      49 |  110.6 | #####|######               |
//! |  5.00 |       5 |    12 | 25 |   0 |      52 |  108.3 | #####|######               |
//! |  5.25 |       5 |    13 | 23 |   0 |      51 |  108.9 | #####|#######              |
//! |  5.50 |       5 |    12 | 22 |   0 |      52 |  138.3 | #####|######               |
//! |  5.75 |       5 |    12 | 25 |   0 |      51 |  109.8 | #####|######               |
//! |  6.00 |      20 |    13 | 25 |   0 |      48 |  108.2 | #############       |      |
//! |  6.25 |      20 |    14 | 55 |   0 |      20 |   51.5 | ##############      |      |
//! |  6.50 |      20 |    16 | 69 |   0 |       5 |   51.3 | ################    |      |
//! |  6.75 |      20 |    18 | 73 |   0 |       1 |   51.3 | ##################  |      |
//! |  7.00 |      20 |    20 | 75 |   0 |       0 |   51.3 | ####################|      |
//! |  7.25 |      20 |    22 | 75 |   0 |       0 |   51.4 | ####################|#     |
//! |  7.50 |      20 |    23 | 75 |   0 |       0 |   51.4 | ####################|##    |
//! |  7.75 |      20 |    26 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  8.00 |      20 |    27 | 75 |   0 |       0 |   51.3 | ####################|####  |
//! |  8.25 |      20 |    30 | 75 |   0 |       0 |   51.4 | ####################|####  |
//! |  8.50 |      20 |    31 | 75 |   0 |       0 |   51.2 | ####################|####  |
//! |  8.75 |      20 |    33 | 75 |   0 |       0 |   51.4 | ####################|####  |
//! |  9.00 |      20 |    34 | 75 |   0 |       0 |   51.4 | ####################|####  |
//!
//! phase 1 (20 workers): 811 answered 200, 0 answered 503 by the server, 0 refused by the bulkhead
//! phase 2 (5 workers): 350 answered 200, 148 answered 503 by the server, 406 refused by the bulkhead
//! phase 3 (20 workers): 913 answered 200, 0 answered 503 by the server, 74 refused by the bulkhead
//! limit changes: 48, windows: 88
//! ```
//!
//! (One run; the numbers move a little from run to run, real sockets on real
//! time, the shape does not.) The limit falls from 34 to 14 within a second
//! of the workers dropping to 5, and to 12–13 by 1.25 s; the server's 503s
//! stop after a second (the row at 4.00 s has the last 3): from then on the
//! bulkhead refuses the excess at once, the server no longer has to. It is
//! back at 20 a second after the workers return, and the refusals stop.
//! Gradient2 holds 12–13 in flight for 5 workers, not 5: its fixed queue
//! allowance of 4 per window and its tolerance of 1.5 × the long-term RTT
//! (which rises slowly during the overload) keep a queue of about 8 at the
//! server — its p50 there is 108–152 ms, against 51 ms with 20 workers. With
//! 20 workers it grows to 34, more than twice the 15 in flight 300
//! requests/s need, and then stops (a limit less than half used is not grown).
//! `tests/adaptive_http.rs` runs the same story with phases of 1.5 s and
//! asserts counts and order, never latencies: every call started is answered
//! 200, answered 503 or refused by the bulkhead; with 5 workers the server
//! sheds load and the bulkhead refuses calls itself, the limit ending that
//! phase below where it ended the first and ending the last above it.
//!
//! # Where it plugs in
//!
//! - **tower**: `tower::AdaptiveLayer::new(Arc<AdaptiveBulkhead>)` (feature
//!   `tower`) refuses with `BulkheadError::Rejected` when the limit is reached
//!   and records each call's signal from a classifier (`.classify(|r| …)`; by
//!   default `Ok` is a success and `Err` a failure) when its response future
//!   completes; a dropped response future gives its slot back and records
//!   nothing. `AdaptiveBulkhead::try_acquire_owned` gives the same permit
//!   owning an `Arc`, for a spawned task.
//! - **metrics**: `metrics::LimitExporter` (feature `metrics`) exports
//!   `bulkhead_limit{system}`, the last window behind it —
//!   `bulkhead_limit_window_calls{system,signal}`,
//!   `bulkhead_limit_window_rtt_seconds{system}`,
//!   `bulkhead_limit_window_max_in_flight{system}` — and
//!   `bulkhead_limit_changes_total{system}`, beside the bulkhead's own metrics
//!   (`LimitExporter::steering(policy.bulkhead(), &limit)` for an
//!   `AdaptiveLimit` steering a policy's bulkhead).
//! - **tracing**: one INFO event per limit change (`bulkhead limit changed`,
//!   target `watertight::limit::adaptive`, with `system`, `from`, `to` and the
//!   window's counts and average RTT).
//! - **`Policy`**: `limit::AdaptiveLimit` is the algorithm and its windows
//!   without a bulkhead of their own, steering one that lives elsewhere — a
//!   policy's. `policy.call_adaptive(&limit, make, signal)` runs the call
//!   through the policy as `call_with` does and records it with the limit:
//!   its round trip from its start (slot taken, breaker passed) to its end,
//!   and what `signal` makes of its result (a 503 as `Signal::Dropped`, say;
//!   anything but a success is a failure for the breaker too). A call the
//!   policy cut at its timeout is a timeout whatever `signal` says, and a call
//!   the policy refused (bulkhead full, circuit open, no budget) records
//!   nothing: a refusal is not a fast call. The policy's bulkhead is resized
//!   window by window. By hand, `limit.record(policy.bulkhead(), started,
//!   signal)` after any call does the same. Or in front of it:
//!   `AdaptiveBulkhead::call(policy.call(…), classify)` runs the call on an
//!   adaptive permit, with the policy's bulkhead behind it as a fixed
//!   ceiling.
