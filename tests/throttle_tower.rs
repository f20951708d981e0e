#![cfg(not(loom))]
//! `ThrottleLayer` around a tower service, on a `ManualClock`: a local
//! refusal never calls the inner service; clones share one throttle; the
//! classifier decides what an answer is; a response that comes in buckets
//! later is credited to its admission bucket; a dropped response future
//! takes its request back; readiness is the inner service's.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use tower::{Layer, Service, ServiceExt};
use watertight::clock::ManualClock;
use watertight::throttle::{AdaptiveThrottle, Response, ThrottleConfig};
use watertight::tower::{ThrottleError, ThrottleLayer};

fn throttle(clock: &Arc<ManualClock>) -> Arc<AdaptiveThrottle<Arc<ManualClock>>> {
    let config = ThrottleConfig::builder()
        .window(Duration::from_secs(20))
        .build()
        .unwrap();
    Arc::new(AdaptiveThrottle::with_seed(
        "backend",
        config,
        clock.clone(),
        8,
    ))
}

#[test]
fn a_refusal_never_calls_the_inner_service_and_clones_share_the_throttle() {
    let clock = Arc::new(ManualClock::new());
    let t = throttle(&clock);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let svc = ThrottleLayer::new(t.clone()).layer(tower::service_fn(move |_: u32| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Err::<u32, _>("503") }
    }));
    let mut a = svc.clone();
    let mut b = svc;
    let mut refused = 0;
    for i in 0..200 {
        let s = if i % 2 == 0 { &mut a } else { &mut b };
        let fut = block_on(s.ready()).unwrap().call(i);
        if let Err(ThrottleError::Throttled(_)) = block_on(fut) {
            refused += 1;
        }
    }
    let m = t.metrics();
    assert_eq!(m.refused, refused);
    assert_eq!(calls.load(Ordering::Relaxed), 200 - refused);
    assert_eq!((m.admitted, m.overloaded), (200 - refused, 200 - refused));
    assert!(refused > 150, "{refused}");
}

#[test]
fn the_classifier_decides_and_a_late_answer_is_credited_at_admission() {
    let clock = Arc::new(ManualClock::new());
    let t = throttle(&clock);
    let (tx, rx) = std::sync::mpsc::channel::<u16>();
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let mut svc = ThrottleLayer::new(t.clone())
        .classify(|r: &Result<u16, ()>| match r {
            Ok(503) | Err(()) => Response::Overloaded,
            Ok(_) => Response::Accepted,
        })
        .layer(tower::service_fn(move |_: ()| {
            let rx = rx.clone();
            std::future::poll_fn(move |_| match rx.lock().unwrap().try_recv() {
                Ok(status) => Poll::Ready(Ok(status)),
                Err(_) => Poll::Pending,
            })
        }));
    // Admitted in bucket 0 (1 s buckets), answered 404 five buckets later.
    let mut call = Box::pin(svc.call(()));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(Duration::from_secs(5));
    tx.send(404).unwrap();
    assert_eq!(block_on(call), Ok(404));
    let m = t.metrics();
    assert_eq!((m.requests, m.accepts, m.accepted), (1, 1, 1));
    // Bucket 0 leaves the window at 20 s, with the accept.
    clock.advance(Duration::from_secs(15));
    assert_eq!((t.metrics().requests, t.metrics().accepts), (0, 0));
    // A 503 is not an accept.
    let call = svc.call(());
    tx.send(503).unwrap();
    assert_eq!(block_on(call), Ok(503));
    assert_eq!((t.metrics().accepts, t.metrics().overloaded), (0, 1));
}

#[test]
fn a_dropped_response_future_takes_its_request_back() {
    let clock = Arc::new(ManualClock::new());
    let t = throttle(&clock);
    let mut svc = ThrottleLayer::new(t.clone()).layer(tower::service_fn(|_: ()| {
        std::future::pending::<Result<(), ()>>()
    }));
    let mut call = Box::pin(svc.call(()));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    assert_eq!(t.metrics().requests, 1);
    drop(call);
    let m = t.metrics();
    assert_eq!((m.requests, m.ignored), (0, 1));
}

#[test]
fn readiness_is_the_inner_services() {
    let clock = Arc::new(ManualClock::new());
    let t = throttle(&clock);
    let mut svc =
        ThrottleLayer::new(t.clone()).layer(tower::service_fn(|_: ()| async { Ok::<_, &str>(()) }));
    assert!(block_on(svc.ready()).is_ok());
    // Readiness takes nothing from the throttle.
    assert_eq!(t.metrics().requests, 0);
}
