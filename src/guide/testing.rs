//! What we tried: faults and bad input, the soak, fuzzing.
//!
//! # Run it
//!
//! ```sh
//! # the whole test suite: unit, integration, every runtime, HTTP, doc tests
//! cargo test --all-features
//!
//! # the long soak: a million random operations per runtime (tokio, smol,
//! # async-std, embassy, plain threads); WT_SOAK_SEED replays a printed seed
//! WT_SOAK_OPS=1000000 cargo test --all-features --test rt_tokio --test rt_smol \
//!     --test rt_async_std --test rt_embassy --test soak_threads soak -- --nocapture
//!
//! # one fuzz target (breaker, bulkhead or config) for a minute (nightly, cargo-fuzz),
//! # from the kept corpus, new inputs to a scratch directory
//! mkdir -p /tmp/fuzz-breaker
//! cargo +nightly fuzz run breaker /tmp/fuzz-breaker fuzz/corpus/breaker -- -max_total_time=60
//!
//! # everything CI runs
//! bash .ci/run
//! ```
//!
//! `bash .ci/run` runs everything CI runs (format, clippy, the tests above
//! with the short soak, the no_std builds, a feature powerset, loom models, Miri,
//! the fuzz targets, ThreadSanitizer and AddressSanitizer, the firmware's sizes
//! and its runs in QEMU), installing the targets and tools it needs.
//!
//! # Faults and bad input
//!
//! Each fault below is exercised by a test that runs in CI; the right column
//! is what the crate does about it (and what the test asserts).
//!
//! | fault or bad input | covered by | what the crate does |
//! |---|---|---|
//! | a panic inside the guarded call, a probe or the classifier; on a tokio task, a smol task and under `catch_unwind` | `tests/panics.rs` | the call counts as a failure (a probe's reopens the breaker); the bulkhead slot comes back |
//! | a panic while a permit is held, or inside `call_with` or a policy call, from many tasks at once | the soak (`tests/common/soak.rs`) | the permit comes back while unwinding; every counter still adds up |
//! | a waiter dropped at each point: queued, after being handed its permits, after being refused | `tests/bulkhead/` (`a_cancelled_waiter_is_counted_as_cancelled_not_rejected`, …), `tests/bulkhead_model.rs`, the loom models `cancelled_waiter_*`, the `bulkhead` fuzz target, the soak | a queued wait is counted as cancelled; permits handed to it go to the next waiter; a refusal it never saw is counted as that refusal; nothing lost or invented |
//! | a policy call dropped while waiting for a slot, while running, as a half-open probe, before its first poll, during a retry backoff | `tests/policy/` (`cancelling_*`), `tests/policy_retry.rs`, the soak | the slot comes back, the probe slot is freed, nothing is recorded |
//! | clock jumps on `ManualClock`: past deadlines, the end of an open wait, the half-open limit, ± 1 ms at each | `tests/breaker_model.rs`, `tests/bulkhead_model.rs`, the `breaker` and `bulkhead` fuzz targets, the soak (jumps while tasks run) | exactly what the sequential reference does, step for step |
//! | a clock that goes backwards; a clock at the end of time (`u64::MAX` ns) | `tests/clock_faults.rs` | no panic, no overflow; an open breaker reads its wait as over and admits its half-open probes, no more; a budget has what the clock says is left, never less than zero; every permit comes back |
//! | hostile budget headers (`grpc-timeout`, milliseconds): empty, negative, a decimal point, white space, 9 digits, no unit or an unknown one, past `u64::MAX`, any bytes | `deadline::wire`'s unit tests, `tests/deadline_wire.rs` (proptest), the `wire` fuzz target | a typed `ParseError`, or a value that is sent on as itself; what the sender writes never reads back as more than it had |
//! | absurd configs: capacity 0 or above `MAX_PERMITS`, `minimum_calls` above the window, thresholds of 0, above 100 or written as fractions, zero probes, a zero open duration or call timeout, a window above the compile-time capacity, a slot wait above 1 s | `tests/bulkhead/`, `tests/breaker/`, `tests/policy/`, `tests/serde_config/` | a typed error naming the field; never clamped |
//! | hostile config strings, as JSON and as environment variables: wrong types, overflowing or negative durations, `NaN`, unknown keys, partition shares of the wrong count or not adding up, any bytes | the `config` fuzz target, `tests/serde_config/` | a typed error whose message names the field, or a config that the constructors accept and that works (partition shares: a bulkhead whose capacity is the sum of its shares) |
//! | a request above the capacity; resizes up and down under load; `forget`; `close` with waiters, and a fresh instance in its place | `tests/bulkhead/`, the model tests, the soak | an error at once, never a wait; resizing never blocks (waiters above the new capacity fail); close fails every waiter with `Closed`; in flight never above the largest capacity set |
//! | breaker outcomes of every kind, dropped permits, `force_open` and `reset`, from many tasks at once | the soak, then a serial stretch per round against the reference | rejections counted equal those callers saw; after a `reset`, the breaker answers as the reference does at every step |
//! | data races, memory errors, leaks | ThreadSanitizer over the soak on threads, AddressSanitizer over the unit and rule tests, Miri, loom (`.ci/run`) | none found |
//!
//! # The soak
//!
//! One engine (`tests/common/soak.rs`) on every runtime: tokio
//! multi-thread (`tests/rt_tokio.rs`), smol on four threads, async-std,
//! embassy's executor on the host, and plain threads
//! (`tests/soak_threads.rs`). Eight tasks per round, each drawing its
//! operations from a seeded PRNG (the seed fixes the operations, the
//! scheduler their interleaving): every operation in the table above that
//! the soak covers, on one bulkhead, one breaker (on a `ManualClock` the
//! tasks move) and one policy. Checked throughout: permits held never above
//! the largest capacity set. After every round: nothing in flight or waiting,
//! available = capacity, accepted + rejected + cancelled waits = attempts,
//! `queued` between the waits that were ever pending and all waits (a wait
//! can queue and end within its first poll), the refusals by cause at least
//! those callers saw and the rest accounted for by the waits dropped
//! mid-wait, every permit back or forgotten, the breaker's and the policy's
//! rejections equal to those callers saw, and a watchdog that names the
//! stuck operation if none finishes for 30 s. The seed is printed first and
//! in every failure; `WT_SOAK_SEED` replays it, `WT_SOAK_OPS` sets the length
//! (100,000 operations per runtime by default, a few seconds each).
//!
//! The long run (the command above, seed `0xc0ffee`, debug
//! test profile, this 2-core machine with other builds running beside it,
//! load average 1.5–2.9):
//!
//! | runtime | operations | time | permits granted | refusals | cancelled waits | bulkheads (reopened) | planted panics | serial breaker steps vs the reference |
//! |---|---|---|---|---|---|---|---|---|
//! | tokio multi-thread (4 workers) | 1,000,000 | 38.5 s | 253,680 | 214,994 | 28,329 | 2,396 | 18,279 | 12,000 |
//! | smol, four threads | 1,000,000 | 21.1 s | 255,901 | 211,339 | 29,687 | 2,319 | 17,987 | 12,000 |
//! | async-std | 1,000,000 | 20.9 s | 255,955 | 211,195 | 29,792 | 2,389 | 18,056 | 12,000 |
//! | embassy (host executor) | 1,000,000 | 20.2 s | 248,710 | 216,923 | 31,155 | 2,373 | 18,037 | 12,000 |
//! | plain threads | 1,000,000 | 23.0 s | 265,878 | 199,046 | 32,090 | 2,357 | 18,295 | 12,000 |
//!
//! Every check held on every round, and again with `WT_SOAK_SEED=0x5eed`
//! (20.7–38.0 s per runtime). The counts vary from run to run with the
//! interleaving, which the seed does not fix. The times are the soak's own real
//! waits (1 ms holds, timed waits, call timeouts) more than its work: they
//! are not a speed figure.
//!
//! # Fuzzing
//!
//! `fuzz/` (its own workspace; `cargo +nightly fuzz run
//! <target>`) has these targets, among others: `breaker` and `bulkhead` drive the real type
//! and the sequential reference of the model tests (`tests/model/`, shared by
//! both) with the fuzzer's bytes; `config` feeds `BreakerConfig` and
//! `PolicyConfig` hostile JSON and environment variables. The corpus kept in
//! `fuzz/corpus/` is small (16 inputs per differential target, 10 hand-written
//! configs); CI runs each target for 30 s from it (45 s until five targets
//! made the stage long), about 25,000–45,000 executions of each
//! differential target (a case is up to 256 steps) and 0.7–1.1 million
//! configs. 150 s of each found nothing: 230,216 breaker
//! cases, 152,217 bulkhead cases, 4,953,550 configs.
//! `wire` feeds the budget header parser (`deadline::wire`) any bytes in
//! both formats, and the encoder any duration: about 100,000 inputs a
//! second (1,655,804 in 16 s here), from 10 hand-written header values.
