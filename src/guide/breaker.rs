//! The circuit breaker — decisions worth knowing.
//!
//! Use a [`CircuitBreaker`](crate::CircuitBreaker) per external system when calls to a failing system
//! should be refused at once, with a hint of when to come back, instead of
//! piling up behind timeouts. `call` / `call_with` wrap a future (the
//! classifier decides what a failure is); `try_acquire` returns a permit for
//! code that cannot be wrapped (`success()`, `failure()`, `ignore()`). Peers
//! disagree on the edges; this crate decides (all documented on the type):
//!
//! - **Evaluated after every outcome** once `minimum_calls` are in the window, so
//!   a success can trip it (5 failures, then 1 success, minimum 6, 50 %);
//!   `rate >= threshold` trips (3 of 6 at 50 %). Thresholds are percent:
//!   `0.5` is refused with a hint, never read as half a percent.
//! - **Slow** means strictly longer than `slow_call_duration`, measured by the
//!   breaker's clock; with slow-call detection off, no clock is read at all.
//!   `CoarseClock` makes those two reads relaxed atomic loads, exact to about
//!   its resolution (1 ms): for thresholds of seconds or many milliseconds;
//!   `StdClock` below a millisecond; `ManualClock` in tests
//!   (`tests/coarse_clock.rs` checks its bounds on real threads). A `Policy`
//!   waits on a `Timer`, which the coarse clock is not:
//!   `Policy::with_breaker_clock(name, config, TokioClock, CoarseClock::new())`
//!   times its breaker on the coarse clock (and `PolicyLayer` takes that
//!   policy; `BreakerLayer` a breaker on any clock).
//! - **Open wait** ends at `opened_at + open_duration`; rejected calls do not
//!   extend it; `state()` consults the clock, so it never says Open when a call
//!   would pass.
//! - **Half-open** admits exactly `half_open_calls` probes per episode, more are
//!   refused at once; an ignored or cancelled probe gives its slot back; the
//!   first failed or slow probe reopens; all probes good closes. With
//!   `max_half_open_wait`, a probe out that long reopens it, so a lost probe
//!   cannot wedge the breaker.
//! - **Generations**: every transition bumps one; an outcome of an older
//!   generation changes nothing and is counted as stale. Under `std` a call
//!   that panics records a failure (however the panic is caught), as does a
//!   permit dropped during a panic; a cancelled call records nothing.
//! - **Operator switches**: `force_open()`, `disable()`, `reset()`.
//! - **Window size**: a config holds 1 to 1023 calls
//!   (`BreakerConfig::MAX_WINDOW_SIZE`; larger is refused by the builder and
//!   by `Deserialize`, naming `window_size`). `CircuitBreaker<C, N>` keeps its
//!   window inline, `window_size ≤ N`, fixed at compile time (no heap, usable
//!   in a `static`); `HeapBreaker<C>` (feature `alloc`) sizes it from the
//!   config at run time, allocating its slots once when it is made. Both are
//!   the same lock-free ring, and no call of either allocates.
//! - **Lock-free on every target**: state, generation and probe counts in one
//!   `u32`, every transition one compare-and-swap; the window a ring of `u8`
//!   slots with its counts derived from them. A healthy call (window full of
//!   successes) is three loads and no write. `size_of::<CircuitBreaker<StdClock,
//!   64>>()` is 160 B on x86_64; with a zero-sized clock, 136 B on
//!   `thumbv7em`.
//!
//! # Which window
//!
//! | window | trips when | pick it when | costs |
//! |---|---|---|---|
//! | count (default): `window_size(50)` | the last N outcomes fail (or are slow) at the thresholds, once `minimum_calls` are in | traffic is steady: N calls span seconds, so "the last 50" is "now" | N bytes; a healthy call three loads |
//! | time: `time_window(30 s, 6)` | the outcomes of the last `duration` do, once `minimum_calls` are in it | traffic is low or bursty: at 1 call a minute a count window of 50 remembers an outage for an hour; here it leaves after `duration` | 12 bytes a bucket; every call a clock read and a CAS on its bucket |
//! | consecutive: `consecutive_failures(5)` | N failures in a row (a success resets) | the dependency either works or does not (gobreaker's, Polly v7's classic breaker); no rates to tune | no slots; a healthy call as the count window's |
//!
//! The time window matches resilience4j's `SlidingTimeWindowMetrics`: its
//! window is the current, partial bucket and the `buckets - 1` before it
//! (resilience4j: one-second buckets, `slidingWindowSize` of them), and
//! `minimum_calls` counts the calls in it, so "at least 20 calls in the last
//! 30 s, 50 % failing" is `time_window(30 s, 30).minimum_calls(20)`. Where it
//! differs, by decision: a plain success is checked against the thresholds
//! only while its bucket holds at most `minimum_calls` calls (the only times
//! a success can trip it: bringing the window to the minimum, or the first
//! call of a new bucket); `metrics()` of an open breaker reads the frozen
//! window at the clock's time, so it empties as its buckets age (the
//! [`Transition`](crate::breaker::Transition) a listener gets keeps the
//! numbers it tripped on, in `tripped`). From config:
//! `cb_window = count|time|consecutive`, `cb_window_duration`,
//! `cb_window_buckets`, `cb_consecutive_failures`.
//!
//! ```
//! use core::time::Duration;
//! use watertight::breaker::{State, TimeBreaker};
//! use watertight::clock::ManualClock;
//! use watertight::BreakerConfig;
//!
//! // At least 4 calls in the last 10 s, half of them failing.
//! let config = BreakerConfig::builder()
//!     .time_window(Duration::from_secs(10), 5)
//!     .minimum_calls(4)
//!     .build()
//!     .unwrap();
//! let clock = ManualClock::new();
//! let b: TimeBreaker<_, 5> = TimeBreaker::new("search", config, &clock);
//! b.try_acquire().unwrap().failure();
//! b.try_acquire().unwrap().failure();
//! // An hour of nothing: the outage has left the window.
//! clock.advance(Duration::from_secs(3600));
//! b.try_acquire().unwrap().success();
//! b.try_acquire().unwrap().failure();
//! assert_eq!((b.state(), b.metrics().calls), (State::Closed, 2));
//! ```
