#![cfg(not(loom))]
//! The tower policy service's named future (`PolicyFuture`), step by step on
//! a `ManualClock`: the same order and accounting as `Policy::call_with`
//! (bulkhead outside, breaker inside, call timeout innermost), and what a
//! dropped future gives back. Nothing sleeps.

mod common;

use std::cell::Cell;
use std::convert::Infallible;
use std::future::{pending, ready, Future, Pending, Ready};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use common::Task;
use tower::{Layer, Service};
use watertight::breaker::State;
use watertight::clock::ManualClock;
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::tower::PolicyLayer;
use watertight::{BreakerConfig, Outcome, Rejection};

const MS: Duration = Duration::from_millis(1);

type Clock = Arc<ManualClock>;

fn policy(max_concurrent: usize, max_wait: Duration, clock: &Clock) -> Arc<Policy<Clock>> {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .half_open_calls(1)
        .open_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    let config = PolicyConfig::builder(max_concurrent)
        .max_wait(max_wait)
        .call_timeout(300 * MS)
        .breaker(breaker)
        .build()
        .unwrap();
    Arc::new(Policy::new("ledger", config, clock.clone()).unwrap())
}

/// An inner service that answers at once, counting the calls that reach it.
fn answering(
    hits: &Arc<AtomicUsize>,
) -> impl Service<u32, Response = u32, Error = u32, Future = Ready<Result<u32, u32>>> + Clone + use<>
{
    let hits = hits.clone();
    tower::service_fn(move |n: u32| {
        hits.fetch_add(1, Relaxed);
        ready(if n < 100 { Ok(n) } else { Err(n) })
    })
}

/// An inner service whose calls never finish; sets a flag when one is dropped.
#[derive(Clone)]
struct Hanging(Rc<Cell<usize>>);

struct HangingCall(Rc<Cell<usize>>, Pending<Result<u32, u32>>);

impl Future for HangingCall {
    type Output = Result<u32, u32>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.1).poll(cx)
    }
}

impl Drop for HangingCall {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

impl Service<u32> for Hanging {
    type Response = u32;
    type Error = u32;
    type Future = HangingCall;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), u32>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: u32) -> HangingCall {
        HangingCall(self.0.clone(), pending())
    }
}

/// An inner service that is never ready, or whose readiness fails.
#[derive(Clone)]
struct NotReady(Option<u32>);

impl Service<u32> for NotReady {
    type Response = u32;
    type Error = u32;
    type Future = Ready<Result<u32, u32>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), u32>> {
        match self.0 {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        }
    }
    fn call(&mut self, n: u32) -> Self::Future {
        ready(Ok(n))
    }
}

#[test]
fn nothing_is_taken_before_the_first_poll_and_a_free_slot_runs_the_call() {
    let clock = Clock::default();
    let p = policy(2, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    let mut call = Task::new(svc.call(7));
    assert_eq!(p.bulkhead().in_flight(), 0);
    assert_eq!(
        hits.load(Relaxed),
        0,
        "tower's call() only makes the future"
    );
    assert_eq!(call.ready(), Ok(7));
    assert_eq!(hits.load(Relaxed), 1);
    assert_eq!(p.bulkhead().in_flight(), 0, "the slot is back");
    assert_eq!(p.breaker().metrics().calls, 1);
    assert_eq!(p.bulkhead().metrics().accepted, 1);
}

#[test]
fn a_full_bulkhead_without_a_wait_refuses_at_once_and_counts_it() {
    let clock = Clock::default();
    let p = policy(1, Duration::ZERO, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    let held = p.bulkhead().try_acquire().unwrap();
    let err = Task::new(svc.call(7)).ready().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::BulkheadFull);
    assert_eq!(err.system(), "ledger");
    assert_eq!(p.bulkhead().metrics().rejected_full, 1);
    assert_eq!(p.breaker().metrics().calls, 0, "never reached the breaker");
    assert_eq!(hits.load(Relaxed), 0);
    drop(held);
}

#[test]
fn a_slot_wait_ends_when_a_slot_frees_or_at_max_wait() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    // A slot frees within the wait: the call goes through.
    let held = p.bulkhead().try_acquire().unwrap();
    let mut call = Task::pending(svc.call(1));
    assert_eq!(p.bulkhead().waiting(), 1);
    clock.advance(50 * MS);
    call.assert_pending();
    drop(held);
    assert!(call.woken());
    assert_eq!(call.ready(), Ok(1));

    // None frees: refused at exactly max_wait, counted as timed out.
    let held = p.bulkhead().try_acquire().unwrap();
    let mut call = Task::pending(svc.call(2));
    clock.advance(99 * MS);
    call.assert_pending();
    clock.advance(MS);
    assert_eq!(call.ready().unwrap_err().kind(), &ErrorKind::BulkheadFull);
    let m = p.bulkhead().metrics();
    assert_eq!(
        (m.rejected_timed_out, m.rejected_full, m.waiting),
        (1, 0, 0)
    );
    assert_eq!(hits.load(Relaxed), 1);
    drop(held);
}

#[test]
fn an_open_breaker_refuses_and_gives_the_slot_back_at_once() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    p.breaker().force_open();
    let mut call = Task::new(svc.call(7));
    let err = call.ready().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    assert!(err.is_unavailable());
    // Back when the refusal is returned, not when the future is dropped.
    assert_eq!(p.bulkhead().in_flight(), 0);
    drop(call);
    assert_eq!(
        p.bulkhead().metrics().accepted,
        1,
        "the slot was had, then given back"
    );
    assert_eq!(hits.load(Relaxed), 0);
}

#[test]
fn errors_are_failures_that_open_the_breaker_and_the_classifier_can_say_otherwise() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    for n in [100, 101, 102, 103] {
        let err = Task::new(svc.call(n)).ready().unwrap_err();
        assert_eq!(err.kind(), &ErrorKind::Call(n));
    }
    assert_eq!(p.breaker().state(), State::Open);
    let err = Task::new(svc.call(1)).ready().unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::CircuitOpen(Rejection::Open { .. })
    ));
    assert_eq!(hits.load(Relaxed), 4);

    // The same errors, classified as answers: the breaker stays closed.
    let q = policy(1, 100 * MS, &clock);
    let mut lenient = PolicyLayer::new(q.clone())
        .classify(|_: &Result<u32, u32>| Outcome::Success)
        .layer(answering(&hits));
    for n in [100, 101, 102, 103] {
        assert_eq!(
            Task::new(lenient.call(n)).ready().unwrap_err().kind(),
            &ErrorKind::Call(n)
        );
    }
    assert_eq!(q.breaker().state(), State::Closed);
    assert_eq!(q.breaker().metrics().failed_calls, 0);
}

#[test]
fn a_call_past_its_timeout_is_dropped_counted_as_a_failure_and_frees_the_slot() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let dropped = Rc::new(Cell::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(Hanging(dropped.clone()));

    let mut call = Task::pending(svc.call(7));
    assert_eq!(p.bulkhead().in_flight(), 1);
    clock.advance(299 * MS);
    call.assert_pending();
    clock.advance(MS);
    assert!(call.woken());
    assert_eq!(
        call.ready().unwrap_err().kind(),
        &ErrorKind::DeadlineExceeded
    );
    assert_eq!(dropped.get(), 1, "the call is dropped when time runs out");
    assert_eq!(
        p.bulkhead().in_flight(),
        0,
        "and its slot is back, future alive or not"
    );
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1));
}

#[test]
fn inner_readiness_counts_against_the_timeout_and_its_error_is_the_calls() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);

    let mut never = PolicyLayer::new(p.clone()).layer(NotReady(None));
    let mut call = Task::pending(never.call(7));
    clock.advance(300 * MS);
    assert_eq!(
        call.ready().unwrap_err().kind(),
        &ErrorKind::DeadlineExceeded
    );

    let mut broken = PolicyLayer::new(p.clone()).layer(NotReady(Some(42)));
    assert_eq!(
        Task::new(broken.call(7)).ready().unwrap_err().kind(),
        &ErrorKind::Call(42)
    );
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (2, 2));
    assert_eq!(p.bulkhead().in_flight(), 0);
}

#[test]
fn dropping_the_future_while_waiting_for_a_slot_leaves_the_queue() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(answering(&hits));

    let held = p.bulkhead().try_acquire().unwrap();
    let call = Task::pending(svc.call(7));
    assert_eq!(p.bulkhead().waiting(), 1);
    drop(call);
    let m = p.bulkhead().metrics();
    assert_eq!((m.waiting, m.cancelled_waits, m.in_flight), (0, 1, 1));
    drop(held);
    assert_eq!(p.bulkhead().in_flight(), 0);
    assert_eq!(hits.load(Relaxed), 0);
}

#[test]
fn dropping_the_future_mid_call_records_nothing_and_frees_the_slot_and_the_probe() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    for _ in 0..4 {
        p.breaker().try_acquire().unwrap().failure();
    }
    clock.advance(Duration::from_secs(1));
    let dropped = Rc::new(Cell::new(0));
    let mut svc = PolicyLayer::new(p.clone()).layer(Hanging(dropped.clone()));

    let call = Task::pending(svc.call(7)); // the one half-open probe
    assert_eq!(p.breaker().state(), State::HalfOpen);
    assert_eq!(
        p.breaker().try_acquire().unwrap_err(),
        Rejection::ProbesBusy
    );
    assert_eq!(p.bulkhead().in_flight(), 1);
    let before = p.breaker().metrics().calls;

    drop(call);
    assert_eq!(dropped.get(), 1);
    assert_eq!(p.bulkhead().in_flight(), 0);
    assert_eq!(p.breaker().metrics().calls, before, "nothing recorded");
    let probe = p
        .breaker()
        .try_acquire()
        .expect("the probe slot is free again");
    assert!(probe.is_probe());
}

#[test]
fn a_closed_bulkhead_refuses_with_bulkhead_closed() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let mut svc = PolicyLayer::new(p.clone()).layer(tower::service_fn(|n: u32| async move {
        Ok::<_, Infallible>(n)
    }));
    p.bulkhead().close();
    let err = Task::new(svc.call(7)).ready().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::BulkheadClosed);
    assert_eq!(p.bulkhead().metrics().rejected_closed, 1);
    assert_eq!(p.breaker().metrics().calls, 0);
}

// ---- retries: `PolicyLayer::idempotent` ------------------------------------

/// An inner service that fails its first `fails` calls, then answers;
/// records each request it is sent.
fn flaky(
    sent: &Arc<std::sync::Mutex<Vec<u32>>>,
    fails: usize,
) -> impl Service<u32, Response = u32, Error = u32, Future = Ready<Result<u32, u32>>> + Clone + use<>
{
    let sent = sent.clone();
    tower::service_fn(move |n: u32| {
        let mut sent = sent.lock().unwrap();
        sent.push(n);
        ready(if sent.len() <= fails { Err(n) } else { Ok(n) })
    })
}

fn sent() -> Arc<std::sync::Mutex<Vec<u32>>> {
    Arc::default()
}

#[test]
fn a_failing_request_is_retried_once_as_a_clone_through_the_whole_policy() {
    let clock = Clock::default();
    let p = policy(2, 100 * MS, &clock);
    let log = sent();
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(flaky(&log, 1));

    let mut call = Task::pending(svc.call(7));
    // The first attempt failed; its slot is back during the backoff.
    assert_eq!(*log.lock().unwrap(), [7]);
    assert_eq!(p.bulkhead().in_flight(), 0);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 1));
    clock.advance(50 * MS); // the backoff is at most the base, 50 ms
    assert_eq!(call.ready(), Ok(7));
    assert_eq!(*log.lock().unwrap(), [7, 7], "the request, sent again");
    // The retry took its own slot and passed the breaker again.
    assert_eq!(p.bulkhead().metrics().accepted, 2);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (2, 1));
    assert_eq!(p.retry_metrics().after_failure, 1);

    // Failing every time: two attempts (the default), then the last error.
    let log = sent();
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(flaky(&log, usize::MAX));
    let mut call = Task::pending(svc.call(8));
    clock.advance(50 * MS);
    assert_eq!(call.ready().unwrap_err().into_inner(), Some(8));
    assert_eq!(*log.lock().unwrap(), [8, 8]);
    assert_eq!(p.retry_metrics().after_failure, 2);
}

#[test]
fn a_call_timeout_is_retried_and_each_attempt_has_its_own_timeout() {
    let clock = Clock::default();
    let p = policy(1, 100 * MS, &clock);
    let dropped = Rc::new(Cell::new(0));
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(Hanging(dropped.clone()));

    let mut call = Task::pending(svc.call(7));
    clock.advance(300 * MS); // the first attempt's call timeout
    call.assert_pending();
    assert_eq!(dropped.get(), 1);
    assert_eq!(p.bulkhead().in_flight(), 0, "no slot held in the backoff");
    clock.advance(50 * MS); // the backoff: the second attempt starts
    call.assert_pending();
    assert_eq!(p.bulkhead().in_flight(), 1);
    clock.advance(300 * MS);
    assert_eq!(
        call.ready().unwrap_err().kind(),
        &ErrorKind::DeadlineExceeded
    );
    assert_eq!(dropped.get(), 2);
    let r = p.retry_metrics();
    assert_eq!((r.after_failure, r.after_timeout), (0, 1));
}

#[test]
fn a_success_is_not_retried() {
    let clock = Clock::default();
    let p = policy(2, 100 * MS, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(answering(&hits));
    assert_eq!(Task::new(svc.call(7)).ready(), Ok(7));
    assert_eq!(hits.load(Relaxed), 1);
    assert_eq!(p.bulkhead().metrics().accepted, 1);
    assert_eq!(p.retry_metrics(), Default::default());
}

#[test]
fn a_refusal_by_the_policy_is_not_retried() {
    let clock = Clock::default();
    let p = policy(1, Duration::ZERO, &clock);
    let hits = Arc::new(AtomicUsize::new(0));
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(answering(&hits));

    // A full bulkhead: refused at once, never retried.
    let held = p.bulkhead().try_acquire().unwrap();
    let err = Task::new(svc.call(7)).ready().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::BulkheadFull);
    assert_eq!(p.bulkhead().metrics().rejected_full, 1);
    drop(held);

    // An open breaker: the same.
    p.breaker().force_open();
    let err = Task::new(svc.call(7)).ready().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    assert_eq!(p.breaker().metrics().rejected, 1);

    assert_eq!(hits.load(Relaxed), 0);
    assert_eq!(p.retry_metrics(), Default::default());
    assert_eq!(p.retry_budget().tokens(), 10.0, "no token taken");
}

#[test]
fn without_the_opt_in_nothing_is_retried() {
    let clock = Clock::default();
    let p = policy(2, 100 * MS, &clock);
    let log = sent();
    let mut svc = PolicyLayer::new(p.clone()).layer(flaky(&log, 1));
    assert_eq!(
        Task::new(svc.call(7)).ready().unwrap_err().into_inner(),
        Some(7)
    );
    assert_eq!(*log.lock().unwrap(), [7]);
    assert_eq!(p.retry_metrics(), Default::default());
    // The same policy retries through the opted-in layer.
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .layer(flaky(&log, 1));
    assert_eq!(Task::new(svc.call(9)).ready(), Ok(9));
    assert_eq!(*log.lock().unwrap(), [7, 9]);
}

#[test]
fn a_retry_after_hint_from_the_error_replaces_the_backoff() {
    let clock = Clock::default();
    let p = policy(2, 100 * MS, &clock);
    let log = sent();
    // An error of 150 or more says "retry after that many ms".
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .retry_after(|e: &u32| (*e >= 150).then(|| *e * MS))
        .layer(flaky(&log, 1));

    let mut call = Task::pending(svc.call(200));
    clock.advance(199 * MS);
    call.assert_pending();
    assert_eq!(*log.lock().unwrap(), [200], "not before the hint");
    clock.advance(MS);
    assert_eq!(call.ready(), Ok(200));
    assert_eq!(*log.lock().unwrap(), [200, 200]);

    // No hint from this error: the jittered backoff (at most 50 ms).
    let log = sent();
    let mut svc = PolicyLayer::new(p.clone())
        .idempotent()
        .retry_after(|e: &u32| (*e >= 150).then(|| *e * MS))
        .layer(flaky(&log, 1));
    let mut call = Task::pending(svc.call(8));
    clock.advance(50 * MS);
    assert_eq!(call.ready(), Ok(8));
    assert_eq!(*log.lock().unwrap(), [8, 8]);
}
