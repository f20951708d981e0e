//! Features, and the runtimes each one serves: the crate's one feature table.
//!
//! The README and the crate docs link here instead of repeating it. Every
//! feature of `Cargo.toml`'s `[features]` is a row (`tests/readme.rs` checks
//! that none is missing).
//!
//! The primitives need no feature: [`Bulkhead`](crate::Bulkhead),
//! [`CircuitBreaker`](crate::CircuitBreaker), the
//! [`RateLimiter`](crate::rate::RateLimiter) and the
//! [`KeyedRateLimiter`](crate::rate::KeyedRateLimiter), the
//! [`AdaptiveThrottle`](crate::throttle::AdaptiveThrottle), deadlines and the
//! [`Policy`](crate::policy::Policy) build with `--no-default-features`, on
//! any target, with no allocator; the features add clocks, owned handles
//! and integrations.
//!
//! | feature | default | what it enables | runtimes it serves | needs |
//! |---|---|---|---|---|
//! | `std` | yes | [`StdClock`](crate::clock::StdClock), and [`CoarseClock`](crate::clock::CoarseClock) (one relaxed atomic load per read, refreshed every 1 ms, or a resolution you choose, by one updater thread shared by the process, stopped and joined when its last handle is dropped; for slow-call thresholds of milliseconds to seconds), which read the time but cannot wait: anything that waits (`acquire*`, `timeout`, `Policy::call`) needs a [`Timer`](crate::clock::Timer), i.e. `TokioClock`, `AsyncIoClock`, `EmbassyClock` or [`ManualClock`](crate::clock::ManualClock) (by reference or `Arc`), and the compiler's error says so; a call or permit that panics records a failure | threads, or any executor (with a `Timer` to wait) | implies `alloc` |
//! | `alloc` | via `std` | owned permits and their futures where the target has `alloc::sync`, `ManualClock` as a timer (its sleeps allocate a listener), `HeapBreaker` and `HeapPolicy` (a window sized at run time). Waiting for a permit needs no allocator: each waiting future holds its own queue node | every runtime, embassy included | an allocator |
//! | `critical-section` | no | forwarded to portable-atomic for targets without compare-and-swap (`thumbv6m`), and without `std` the bulkhead's wait-queue lock becomes a critical section instead of a spin lock; enable it in the firmware binary, never in a library | embassy and bare-metal executors on single-core chips without CAS | a `critical-section` implementation in the firmware |
//! | `tokio` | no | `clock::TokioClock` (honours tokio's paused test time) | tokio (current-thread, multi-thread, paused time) | std |
//! | `async-io` | no | `clock::AsyncIoClock`, for smol and async-std | smol, async-std | std |
//! | `quanta` | no | `clock::QuantaClock`: the CPU's time-stamp counter scaled by quanta (the clock governor reads), about 7 ns a read at nanosecond resolution with no thread; for a rate limiter or a timed breaker checked on every request of a busy server (on a CPU without an invariant counter, quanta reads the OS clock instead) | threads, or any executor (no timer: it reads the time but cannot wait) | std |
//! | `embassy` | no | `clock::EmbassyClock` (embassy-time) | embassy, on a microcontroller or on the host | embassy-time, whose tick rate and driver the firmware picks; no std |
//! | `tower` | no | `tower::{BulkheadLayer, BreakerLayer, PolicyLayer, AdaptiveLayer, RateLimitLayer}` and their services (the rate limit's sheds inbound calls for a 429 + `Retry-After`, per client with `RateLimitLayer::keyed`, or waits outbound for its cells); `PartitionLayer` in front of a `PartitionedBulkhead`, each request's class chosen by a function of it (a header, say), failing fast or waiting up to `max_wait`, refusing with `PartitionServiceError` (503), a class number out of range a typed error; permits per call, never hoarded in `poll_ready`; `PolicyLayer::idempotent()` retries `Clone` requests (opt-in, never by default); `ThrottleLayer`, client-side adaptive throttling with a response classifier; `HedgeLayer`, hedged calls of `Clone` requests through a policy and a `Hedge`; `FallbackLayer`, the inner layer's typed refusal turned into a response by a function; `StaleCacheLayer`, the last good response per request key served with its age on a refusal | any (the layers take a clock; the HTTP tests run on tokio) | std |
//! | `http` | no | the request budget across the wire over `http::Request` (axum, hyper, tonic; reqwest through a `service_fn`): `tower::InboundDeadlineLayer` (the handler's `Deadline` from the caller's `grpc-timeout` or `x-request-timeout-ms`, capped by the server's maximum, in the request's extensions; refusal at admission below a minimum cost; the handler stopped at the deadline) and `tower::OutboundDeadlineLayer` (the header set to what is left minus a margin, the call cut at the deadline); the header codec itself, `deadline::wire`, needs no feature | any (the layers take a clock; the HTTP tests run on tokio) | implies `tower`; the `http` crate |
//! | `metrics` | no | exporters into the `metrics` facade under plain Prometheus names, the system's name as the `system` label, handles registered once: `bulkhead_active_calls{system}`, `bulkhead_rejected_total{system,reason}`, `bulkhead_queued_total{system}`, `circuit_breaker_state{system}`, calls by outcome, slow calls, `retries_total{system,reason}`, `retry_budget_exhausted_total{system}`; an adaptive bulkhead's `bulkhead_limit{system}` and the window behind it (`LimitExporter`); a rate limiter's `rate_limit_admitted_total{system}`, `rate_limit_refused_total{system}`, `rate_limit_waiting{system}` (`RateLimitExporter`, and a policy's own); an adaptive throttle's `throttle_admitted_total{system}`, `throttle_refused_total{system}`, `throttle_window_requests{system}`, `throttle_window_accepts{system}`, `throttle_refusal_probability{system}` (`ThrottleExporter`, and a policy's own); a partitioned bulkhead's per class, `bulkhead_class_active_calls{system,class}`, `bulkhead_class_capacity{system,class}`, `bulkhead_class_waiting_calls{system,class}`, `bulkhead_class_borrowed_total{system,class}`, `bulkhead_class_rejected_total{system,class,reason}` (`PartitionExporter`); hedging's `hedges_total{system,outcome}`, `hedge_budget_tokens{system}`, `hedge_latency_seconds{system,quantile}` (`HedgeExporter`); a stale-if-error cache's `stale_served_total{system}`, `stale_misses_total{system,reason}`, `stale_recorded_total{system}`, `stale_evictions_total{system}`, `stale_entries{system}` (`StaleCacheExporter`); with `chaos`, a fault injector's `chaos_injected_total{system,fault}`, `chaos_passed_total{system}`, `chaos_enabled{system}` (`ChaosExporter`) | any | std |
//! | `tracing` | no | one `tracing` event per breaker transition and per rejection, one per rate-limit refusal, one per local throttle refusal, one per partitioned bulkhead refusal naming the class (`watertight::partition`, beside its room's bulkhead event), one per hedge not sent (`watertight::hedge`, with the reason), one per stale answer served and per miss (`watertight::fallback`), with `chaos` one per injected fault (`watertight::chaos`), one per retry, and one per adaptive limit change, with the system's name | any | std |
//! | `chaos` | no | `chaos::Injector`: faults injected at a rate from a seeded sequence (an error, an outcome such as a 503, a latency slept on the injector's clock, a hang the caller's deadline must cut), around any future (`inject`, `call`) or, with `tower`, a tower service (`tower::ChaosLayer`); switched on and off at run time by one atomic flag; counters per fault (`ChaosMetrics`), and with `metrics` `ChaosExporter`, with `tracing` one event per fault (`watertight::chaos`). Deterministic on `ManualClock`: the resilience test kit, `guide::chaos` | any, `no_std` included (latency and hangs need a `Timer`) | — |
//! | `serde` | no | `Deserialize` for `BreakerConfig`, `PolicyConfig` and the rate limiter's `Quota` (`rate_cells`, `rate_period`, `rate_burst` in a policy) and the throttle's `ThrottleConfig` (`throttle_k`, `throttle_max_probability`, `throttle_window` in a policy, the window checked against `call_timeout`) and the partitioned bulkhead's `PartitionShares` (`shares`, or `capacity` and `percent`, one entry per class, a list or `"5,3,2"`; `max_waiters`; built by `PartitionedBulkhead::from_shares`), validated by their builders (errors name the field); per-system config from the environment (`examples/env_config.rs`), retry settings included (`retry_max_attempts`, `retry_budget_ratio`, …) | any, `no_std` included | — |
//! | `redis` | no | `redis::GlobalBulkhead`: one limit shared by every process on the same Redis (or Valkey), through redis-rs's connection manager ([the global bulkhead](super::global)) | tokio | implies `tokio`; redis-rs 1.x needs **rustc 1.88** (the rest of the crate builds on 1.85) |
//! | `redis-smol` | no | the same on smol (`GlobalBulkhead<AsyncIoClock>`, made with `connect_on(…, AsyncIoClock)`; redis-rs's `smol-comp`, tasks on smol's global executor) | smol | implies `redis` and `async-io`; rustc 1.88 |
//!
//! Without `alloc` (`--no-default-features`), everything but owned permits
//! builds and needs no allocator: the bulkhead — `acquire`, `acquire_timeout`
//! and `acquire_until` included, on `EmbassyClock` or a `Timer` of your own —
//! the whole circuit breaker, the deadlines and a policy with a slot wait.
//! `ManualClock` is always built. `firmware/` links them into a Cortex-M4F
//! binary that has no allocator ([firmware](super::firmware)).
//!
//! # Runtimes
//!
//! Nothing here spawns or assumes an executor: a waiting future links its
//! own node into the bulkhead's wait queue and is woken through its
//! `Waker`, which any executor provides, and time comes from the clock type
//! parameter.
//!
//! | runtime | clock | feature | tested by |
//! |---|---|---|---|
//! | tokio (current-thread, multi-thread, paused time) | `TokioClock` | `tokio` | `tests/rt_tokio.rs`, the tour, the HTTP tests |
//! | smol | `AsyncIoClock` | `async-io` | `tests/rt_smol.rs`; the global bulkhead: `tests/global_redis_smol.rs` (`redis-smol`) |
//! | async-std | `AsyncIoClock` | `async-io` | `tests/rt_async_std.rs` |
//! | embassy (Cortex-M, or its executor on the host with embassy-time's std driver) | `EmbassyClock` | `embassy` | `tests/rt_embassy.rs`; `firmware/` links for `thumbv7em-none-eabihf` and runs in QEMU |
//! | none: threads, or your own executor | `StdClock`, `CoarseClock` (no timer), or any `Timer` you write | `std` | the unit and model tests |
//! | any executor, deterministic time: tests of your own code | `ManualClock` | always | `tests/bulkhead/`, `tests/breaker/`, the model tests, loom, Miri: every rule test here, no real sleeps |
//!
//! The runtime suites run the same scenarios on each runtime and assert
//! counts and order, never latencies.
//!
//! | target | features built in CI |
//! |---|---|
//! | `thumbv7em-none-eabihf` | none; `alloc,embassy` (waiting for a permit builds in both); `chaos` |
//! | `thumbv6m-none-eabi` | `critical-section`; `critical-section,alloc,embassy` (the wait queue's lock is a critical section there) |
//!
//! # Examples
//!
//! Each integration has its own example (`cargo run --example NAME --features …`):
//!
//! | example | features | what it shows |
//! |---|---|---|
//! | `load_shedding` | `tower,tokio` | inbound load shedding on axum: a bulkhead layer answers 503 + `Retry-After` when full; a breaker-guarded route answers 503 with `Retry-After` = the breaker's hint rounded up |
//! | `outbound` | `tokio` | a reqwest client with one `Policy` per downstream system, every refusal mapped to the caller's own "system unavailable" error |
//! | `prometheus` | `metrics,tokio` | Prometheus text from a real exporter on `/metrics`, with traffic through a policy |
//! | `env_config` | `serde,tokio` | per-system config from environment variables (`CLIENT_PAYMENTS__CB_FAILURE_RATE=30`), one policy per system |
//! | `adaptive` | `tokio` | an adaptive bulkhead (Gradient2) in front of a loopback axum server whose workers go 20 → 5 → 20: the limit printed against the workers every 250 ms ([on real HTTP](super::adaptive#on-real-http)) |
//! | `global_limit` | `redis` | four worker processes against one loopback neighbour: a local bulkhead of 20 each lets 80 calls at once through, one `GlobalBulkhead` of 20 at most 20 (needs `redis-server` on PATH; [the global bulkhead](super::global)) |
//!
//! `tests/tower_http.rs` checks load shedding over real HTTP on 127.0.0.1: with a
//! limit of N = 4 and 7 concurrent slow requests, exactly 3 are answered 503 with
//! `Retry-After` before any slow request finishes, and 4 are answered 200 once
//! they do. `tests/metrics_http.rs` scrapes the exporter over HTTP;
//! `tests/tracing_events.rs` checks one event per transition and rejection.
