#![cfg(all(not(loom), feature = "tower"))]
//! `HedgeLayer` on a `ManualClock`: a slow first request is hedged with a
//! clone of the request and the hedge's answer returned; the inner service
//! is called once per attempt sent; the loser is dropped with its slot
//! given back and nothing recorded; a full bulkhead means no hedge.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};
use watertight::clock::{Clock, ManualClock, Timer};
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
use watertight::policy::{Policy, PolicyConfig};
use watertight::tower::HedgeLayer;

const MS: Duration = Duration::from_millis(1);

struct Dropped(Arc<AtomicUsize>, bool);
impl Drop for Dropped {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A service whose `n`th call (from 0) takes `latency[n]` ms and answers
/// with the request and `n`; it logs the requests it was sent.
#[allow(clippy::type_complexity)]
fn replicas(
    clock: Arc<ManualClock>,
    latency: &'static [u64],
) -> (
    impl Service<
            u32,
            Response = (u32, usize),
            Error = (),
            Future = impl std::future::Future<Output = Result<(u32, usize), ()>> + Send,
        > + Clone,
    Arc<Mutex<Vec<u32>>>,
    Arc<AtomicUsize>,
) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (s, d) = (sent.clone(), dropped.clone());
    let svc = tower::service_fn(move |q: u32| {
        let n = {
            let mut sent = s.lock().unwrap();
            sent.push(q);
            sent.len() - 1
        };
        let (clock, ms, d) = (clock.clone(), latency[n], d.clone());
        async move {
            let mut guard = Dropped(d, true);
            clock
                .sleep_until(clock.now() + Duration::from_millis(ms))
                .await;
            guard.1 = false;
            Ok::<_, ()>((q, n))
        }
    });
    (svc, sent, dropped)
}

fn setup(slots: usize) -> (Arc<ManualClock>, Arc<Policy<Arc<ManualClock>>>, Arc<Hedge>) {
    let clock = Arc::new(ManualClock::new());
    let config = PolicyConfig::builder(slots)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    let policy = Arc::new(Policy::new("search", config, clock.clone()).unwrap());
    let hedge = HedgeConfig::builder()
        .delay(HedgeDelay::Fixed(20 * MS))
        .build()
        .unwrap();
    (clock, policy, Arc::new(Hedge::new("search", hedge)))
}

fn drive<F: std::future::Future>(clock: &ManualClock, fut: F) -> (F::Output, Duration) {
    let start = clock.now();
    let mut fut = std::pin::pin!(fut);
    for _ in 0..10_000 {
        if let Some(out) =
            futures_lite::future::block_on(futures_lite::future::poll_once(fut.as_mut()))
        {
            return (out, clock.now() - start);
        }
        clock.advance(MS);
    }
    panic!("the call did not end");
}

#[test]
fn a_slow_request_is_hedged_with_a_clone_and_the_loser_dropped() {
    let (clock, policy, hedge) = setup(4);
    let (inner, sent, dropped) = replicas(clock.clone(), &[500, 10]);
    let mut svc = HedgeLayer::new(policy.clone(), hedge.clone()).layer(inner);
    let call = futures_lite::future::block_on(svc.ready()).unwrap().call(7);
    let (out, took) = drive(&clock, call);
    assert_eq!(out, Ok((7, 1)));
    assert_eq!(took, 30 * MS);
    assert_eq!(*sent.lock().unwrap(), [7, 7]);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(policy.bulkhead().in_flight(), 0);
    assert_eq!(policy.breaker().metrics().calls, 1);
    assert_eq!(hedge.metrics().won, 1);
}

#[test]
fn a_full_bulkhead_sends_no_hedge_through_the_layer() {
    let (clock, policy, hedge) = setup(1);
    let (inner, sent, _) = replicas(clock.clone(), &[50, 10]);
    let mut svc = HedgeLayer::new(policy.clone(), hedge.clone()).layer(inner);
    let call = futures_lite::future::block_on(svc.ready()).unwrap().call(3);
    let (out, took) = drive(&clock, call);
    assert_eq!((out, took), (Ok((3, 0)), 50 * MS));
    assert_eq!(sent.lock().unwrap().len(), 1);
    assert_eq!(hedge.metrics().not_sent_bulkhead, 1);
}

#[test]
fn the_response_future_is_send() {
    fn send<T: Send>(_: &T) {}
    let (clock, policy, hedge) = setup(4);
    let (inner, _, _) = replicas(clock.clone(), &[1]);
    let mut svc = HedgeLayer::new(policy, hedge).layer(inner);
    let call = svc.call(1);
    send(&call);
    assert_eq!(drive(&clock, call).0, Ok((1, 0)));
}
