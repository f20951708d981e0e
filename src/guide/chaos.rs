//! The resilience test kit: test your own policy against injected faults
//! (feature `chaos`), on [`ManualClock`](crate::clock::ManualClock), with
//! no real sleeps — the same faults on every run.
//!
//! A policy's settings are claims: "the breaker opens when half the calls
//! fail", "a hung call costs at most 200 ms and gives its slot back",
//! "retries ride out a 30 % error rate". Polly users prove such claims with
//! Simmy, injecting faults at a rate into a test run; here the same is done
//! with a [`chaos::Injector`](crate::chaos::Injector) in place of the system
//! the policy guards. Two things make it a unit test rather than a game
//! day:
//!
//! - **A seed.** The injector draws from a seeded sequence, one draw per
//!   call, so a test that makes its calls one after another gets exactly
//!   the same faults in the same order on every run and every machine: a
//!   count can be asserted exactly, and a failure replays.
//! - **A manual clock.** The policy, its timeouts, its backoffs and the
//!   injected latencies all sleep on the one `ManualClock`; the test moves
//!   time itself, so a 30 s open wait or a 2 s hang costs nothing, and
//!   "within 200 ms" is asserted to the nanosecond.
//!
//! # The kit
//!
//! | to inject | config | what the policy sees |
//! |---|---|---|
//! | a failure of the system | [`error(rate, make)`](crate::chaos::ChaosConfigBuilder::error) | the error `make` returns, the call not made |
//! | a bad answer (a 503, an empty page) | [`outcome(rate, make)`](crate::chaos::ChaosConfigBuilder::outcome) | that value as the call's result |
//! | slowness | [`latency(rate, d)`](crate::chaos::ChaosConfigBuilder::latency) | the call's own result, `d` later on the clock |
//! | a system that never answers | [`hang(rate)`](crate::chaos::ChaosConfigBuilder::hang) | nothing: its deadline must cut it |
//!
//! Put the injector innermost, where the system would be:
//! `policy.call_injected(&chaos, || system_call())` — the policy draws
//! where the call starts, once a slot and the breaker's permit are had, and
//! no future wraps the call's —, `policy.call(|| chaos.inject(system_call()))`
//! around any future (the form for retried and hedged calls), or, in a
//! tower stack, `ChaosLayer` right above the service it stands for (`tower`
//! feature).
//! Assert on what the policy did (its errors, its breaker's state, its
//! bulkhead's free slots) and on the injector's
//! [`metrics`](crate::chaos::Injector::metrics) (faults injected by kind,
//! calls passed), and keep the seed in the test.
//!
//! A helper moves the clock until a call is done: poll, and if the call is
//! waiting (a backoff, a latency, a hang under its timeout), advance 1 ms.
//! Every example below uses it.
//!
//! ```
//! use core::future::Future;
//! use core::time::Duration;
//! use futures_lite::future::{block_on, poll_once};
//! use watertight::clock::ManualClock;
//!
//! /// Polls `call` to completion, moving `clock` 1 ms whenever it waits;
//! /// at most an hour of clock time (a call with no deadline around a hang
//! /// would never finish).
//! fn drive<F: Future>(clock: &ManualClock, call: F) -> F::Output {
//!     let mut call = core::pin::pin!(call);
//!     for _ in 0..3_600_000 {
//!         if let Some(out) = block_on(poll_once(call.as_mut())) {
//!             return out;
//!         }
//!         clock.advance(Duration::from_millis(1));
//!     }
//!     panic!("not done after an hour of clock time");
//! }
//! # let clock = ManualClock::new();
//! # assert_eq!(drive(&clock, async { 1 }), 1);
//! ```
//!
//! # The breaker opens under injected failures
//!
//! Half the calls to pricing fail (rate 0.5, seed 7). With a window of 10
//! calls and the default 50 % threshold, the breaker must open once the
//! window is full and half of it failed — and, the seed being fixed, at the
//! same call on every run:
//!
//! ```
//! use watertight::chaos::{ChaosConfig, Fault, Injector};
//! use watertight::clock::ManualClock;
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! use watertight::breaker::State;
//! use watertight::BreakerConfig;
//! # use futures_lite::future::block_on;
//!
//! /// The index of the first call the breaker refused, and the faults
//! /// injected before it.
//! fn first_refusal(seed: u64) -> (usize, usize) {
//!     let clock = ManualClock::new();
//!     let breaker = BreakerConfig::builder().window_size(10).minimum_calls(10).build().unwrap();
//!     let config = PolicyConfig::builder(4).breaker(breaker).build().unwrap();
//!     let pricing: Policy<_> = Policy::new("pricing", config, &clock).unwrap();
//!     let chaos = Injector::new(
//!         "pricing",
//!         ChaosConfig::builder().error(0.5, || Err("pricing: 500")).seed(seed).build().unwrap(),
//!         &clock,
//!     );
//!     for i in 0..100 {
//!         let r = block_on(pricing.call_injected(&chaos, || async { Ok::<u32, &str>(42) }));
//!         if let Err(e) = r {
//!             if let ErrorKind::CircuitOpen(_) = e.kind() {
//!                 assert_eq!(pricing.breaker().state(), State::Open);
//!                 return (i, chaos.metrics().injected(Fault::Error));
//!             }
//!         }
//!     }
//!     panic!("the breaker never opened");
//! }
//!
//! let (at, failures) = first_refusal(7);
//! assert_eq!((at, failures), (10, 8)); // this seed: open once the window is full, 8 of 10 failed
//! assert_eq!(first_refusal(7), (at, failures)); // and on every run
//! ```
//!
//! The exact numbers belong to the seed: pin them, and a change in the
//! policy's behaviour (a threshold, a window, the order of its layers)
//! shows up as a changed number, not as a flaky test.
//!
//! # A hang costs its timeout, and gives its slot back
//!
//! One call in five hangs. With a 200 ms call timeout, every call must be
//! over within 200 ms of clock time, each hang must come back as
//! [`DeadlineExceeded`](crate::policy::ErrorKind::DeadlineExceeded), and
//! the bulkhead must end with every slot free:
//!
//! ```
//! use core::time::Duration;
//! use watertight::chaos::{ChaosConfig, Fault, Injector};
//! use watertight::clock::{Clock, ManualClock};
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! # use core::future::Future;
//! # use futures_lite::future::{block_on, poll_once};
//! # fn drive<F: Future>(clock: &ManualClock, call: F) -> F::Output {
//! #     let mut call = core::pin::pin!(call);
//! #     for _ in 0..3_600_000 {
//! #         if let Some(out) = block_on(poll_once(call.as_mut())) { return out; }
//! #         clock.advance(Duration::from_millis(1));
//! #     }
//! #     panic!("not done after an hour of clock time");
//! # }
//!
//! let clock = ManualClock::new();
//! let config = PolicyConfig::builder(4)
//!     .call_timeout(Duration::from_millis(200))
//!     .build()
//!     .unwrap();
//! let inventory: Policy<_> = Policy::new("inventory", config, &clock).unwrap();
//! let chaos = Injector::new(
//!     "inventory",
//!     ChaosConfig::builder().hang(0.2).seed(7).build().unwrap(),
//!     &clock,
//! );
//!
//! let mut timed_out = 0;
//! for _ in 0..50 {
//!     let start = clock.now();
//!     let r = drive(&clock, inventory.call_injected(&chaos, || async { Ok::<u32, &str>(3) }));
//!     assert!(clock.now() - start <= Duration::from_millis(200));
//!     match r {
//!         Ok(n) => assert_eq!(n, 3),
//!         Err(e) => {
//!             assert!(matches!(e.kind(), ErrorKind::DeadlineExceeded));
//!             timed_out += 1;
//!         }
//!     }
//! }
//! assert_eq!(timed_out, chaos.metrics().injected(Fault::Hang));
//! assert_eq!(timed_out, 10); // this seed
//! assert_eq!(inventory.bulkhead().available(), 4);
//! ```
//!
//! # Retries ride out injected errors
//!
//! Three attempts for an idempotent call, against 30 % injected errors:
//! a caller should see an error only when all its attempts fail (or the
//! retry budget says stop). Backoffs sleep on the clock, so the helper
//! moves it:
//!
//! ```
//! use core::time::Duration;
//! use watertight::chaos::{ChaosConfig, Fault, Injector};
//! use watertight::clock::ManualClock;
//! use watertight::policy::{Policy, PolicyConfig};
//! use watertight::retry::RetryConfig;
//! use std::future::IntoFuture;
//! # use core::future::Future;
//! # use futures_lite::future::{block_on, poll_once};
//! # fn drive<F: Future>(clock: &ManualClock, call: F) -> F::Output {
//! #     let mut call = core::pin::pin!(call);
//! #     for _ in 0..3_600_000 {
//! #         if let Some(out) = block_on(poll_once(call.as_mut())) { return out; }
//! #         clock.advance(Duration::from_millis(1));
//! #     }
//! #     panic!("not done after an hour of clock time");
//! # }
//!
//! let clock = ManualClock::new();
//! let config = PolicyConfig::builder(4)
//!     .retry(RetryConfig::builder().max_attempts(3).budget(100, 20.0).seed(1))
//!     .build()
//!     .unwrap();
//! let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
//! let chaos = Injector::new(
//!     "search",
//!     ChaosConfig::builder().error(0.3, || Err("search: reset")).seed(7).build().unwrap(),
//!     &clock,
//! );
//!
//! let failed = (0..200)
//!     .filter(|_| {
//!         let call = search.call_idempotent(|| chaos.inject(async { Ok::<u32, &str>(1) }));
//!         drive(&clock, call.into_future()).is_err()
//!     })
//!     .count();
//! let injected = chaos.metrics().injected(Fault::Error);
//! // 30 % of attempts failed, but about 0.3³ of the calls: 2.7 %.
//! assert!(injected > 50);
//! assert!(failed <= 10, "{failed} of 200 calls failed");
//! assert_eq!((injected, failed), (77, 5)); // this seed
//! ```
//!
//! # The control run
//!
//! The same test with the injector [disabled](crate::chaos::Injector::disable)
//! is the control: every call passes untouched, and the injector counts
//! nothing. A disabled injector takes no draw, so switching it back on
//! continues its sequence where it stopped:
//!
//! ```
//! use watertight::chaos::{ChaosConfig, Injector};
//! use watertight::clock::ManualClock;
//! use watertight::policy::{Policy, PolicyConfig};
//! # use futures_lite::future::block_on;
//!
//! let clock = ManualClock::new();
//! let pricing: Policy<_> =
//!     Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
//! let chaos = Injector::new(
//!     "pricing",
//!     ChaosConfig::builder().error(0.5, || Err("pricing: 500")).seed(7).build().unwrap(),
//!     &clock,
//! );
//! chaos.disable();
//! for _ in 0..100 {
//!     let r = block_on(pricing.call_injected(&chaos, || async { Ok::<u32, &str>(42) }));
//!     assert_eq!(r.unwrap(), 42);
//! }
//! assert_eq!(chaos.metrics().total_injected() + chaos.metrics().passed, 0);
//! ```
//!
//! # On a real runtime
//!
//! The injector takes any [`Timer`](crate::clock::Timer): on `TokioClock`
//! an injected latency is a real tokio sleep (or paused time's), and
//! `ChaosLayer` puts it in a tower stack in front of a real service. The
//! seed still fixes the faults of the first *n* calls, but callers running
//! at once share the sequence: between them they get exactly the faults of
//! a sequential run, in an order that depends on the scheduling
//! (`tests/chaos_tower.rs` checks this on a multi-thread runtime). Assert
//! counts there, not who got which fault — or give each caller its own
//! injector.
//!
//! # What it costs to leave in
//!
//! A disabled injector is one relaxed load and a wrapper future around the
//! call, about 3 ns: see [the bench](super::benchmarks#fault-injection). Counters, metrics
//! (`ChaosExporter`, feature `metrics`) and one DEBUG event per fault
//! (feature `tracing`, target `watertight::chaos`) make a game day visible
//! on the same dashboards as the policy.
