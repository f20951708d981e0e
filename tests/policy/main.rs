#![cfg(not(loom))]
//! Deterministic tests of `Policy` on a `ManualClock`, through the public API
//! only: the order of the layers, slot waits, call timeouts, request budgets,
//! classifiers and cancellation.
//!
//! Each test drives policy calls by hand (`common::Task`), advancing the
//! clock between polls, so it can check the exact instant each layer answers,
//! which layer was asked, and what each one holds afterwards. Nothing sleeps.

#[path = "../common/mod.rs"]
mod common;

mod adaptive;
mod budget;
mod classify;
mod config;
mod errors;
mod isolation;
mod order;

use std::cell::Cell;
use std::future::{pending, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use common::{now_or_never, Task};
use watertight::breaker::{BreakerField, State};
use watertight::clock::{Clock, ManualClock, Timer};
use watertight::deadline::Deadline;
use watertight::limit::{AdaptiveLimit, Aimd, Signal};
use watertight::policy::{Error, ErrorKind, Policy, PolicyConfig, PolicyConfigError, PolicyField};
use watertight::{BreakerConfig, Bulkhead, Outcome, Rejection};

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

// ---- helpers ---------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct Boom;

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}

impl std::error::Error for Boom {}

type Res = Result<u32, Boom>;

/// Sets a shared flag when dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// What a call did: whether it was started (its future made) and whether its
/// future was dropped.
#[derive(Clone, Default)]
struct Probe {
    started: Rc<Cell<bool>>,
    dropped: Rc<Cell<bool>>,
}

impl Probe {
    fn started(&self) -> bool {
        self.started.get()
    }
    fn dropped(&self) -> bool {
        self.dropped.get()
    }

    /// A call that never completes.
    fn hang(&self) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Res>>> + use<> {
        let started = Rc::clone(&self.started);
        let dropped = Rc::clone(&self.dropped);
        move || {
            started.set(true);
            let guard = DropFlag(dropped);
            Box::pin(async move {
                let _guard = guard;
                pending::<Res>().await
            })
        }
    }

    /// A call that completes with `value` once `gate` is set.
    fn gated(
        &self,
        gate: &Rc<Cell<bool>>,
        value: Res,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Res>>> + use<> {
        let started = Rc::clone(&self.started);
        let dropped = Rc::clone(&self.dropped);
        let gate = Rc::clone(gate);
        move || {
            started.set(true);
            let guard = DropFlag(dropped);
            Box::pin(async move {
                let _guard = guard;
                std::future::poll_fn(|_| {
                    if gate.get() {
                        Poll::Ready(value.clone())
                    } else {
                        Poll::Pending
                    }
                })
                .await
            })
        }
    }

    /// A call that answers `value` at once.
    fn answer(&self, value: Res) -> impl FnOnce() -> std::future::Ready<Res> + use<> {
        let started = Rc::clone(&self.started);
        move || {
            started.set(true);
            std::future::ready(value)
        }
    }
}

fn ok() -> impl Future<Output = Res> {
    std::future::ready(Ok(1))
}

/// Trips after two outcomes at 50 % failures; open 10 s; one probe.
fn small_breaker() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(2)
        .minimum_calls(2)
        .failure_rate_threshold(50.0)
        .open_duration(10 * SEC)
        .half_open_calls(1)
        .build()
        .unwrap()
}

fn config(max_concurrent: usize, max_wait: Duration, call_timeout: Duration) -> PolicyConfig {
    PolicyConfig::builder(max_concurrent)
        .max_wait(max_wait)
        .call_timeout(call_timeout)
        .breaker(small_breaker())
        .build()
        .unwrap()
}

fn policy<'c>(
    name: &'static str,
    clock: &'c ManualClock,
    max_concurrent: usize,
    max_wait: Duration,
    call_timeout: Duration,
) -> Policy<&'c ManualClock> {
    Policy::new(name, config(max_concurrent, max_wait, call_timeout), clock).unwrap()
}

/// Opens `p`'s breaker with two failed calls.
#[track_caller]
fn trip(p: &Policy<&ManualClock>) {
    for _ in 0..2 {
        let r = now_or_never(p.call(|| async { Err::<u32, _>(Boom) }));
        assert_eq!(r.unwrap_err().into_inner(), Some(Boom));
    }
    assert_eq!(p.breaker().state(), State::Open);
}

/// Trips `p` and waits out the open duration: the next call is a probe.
#[track_caller]
fn half_open(clock: &ManualClock, p: &Policy<&ManualClock>) {
    trip(p);
    clock.advance(10 * SEC);
    assert_eq!(p.breaker().state(), State::HalfOpen);
}

#[track_caller]
fn kind<T: std::fmt::Debug, E: std::fmt::Debug + Clone>(r: Result<T, Error<E>>) -> ErrorKind<E> {
    r.unwrap_err().kind().clone()
}

/// The bulkhead is back to its full capacity and nobody waits.
#[track_caller]
fn assert_all_slots_free(p: &Policy<&ManualClock>) {
    let b = p.bulkhead();
    assert_eq!(b.in_flight(), 0, "no slot held");
    assert_eq!(b.available(), b.capacity(), "every slot free");
    assert_eq!(b.waiting(), 0, "nobody waits");
}
