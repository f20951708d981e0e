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
