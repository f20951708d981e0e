#![cfg(not(loom))]
//! `ChaosLayer` around a tower service: on `ManualClock`, an injected fault
//! never calls the inner service and a latency calls it at once but answers
//! after the sleep; on a real multi-thread tokio runtime, callers sharing
//! one injector through cloned services get, between them, exactly the
//! faults of a sequential run of the same seed, each hang cut by the
//! caller's timeout.
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use tower::{Layer, Service, ServiceExt};
use watertight::chaos::{ChaosConfig, Fault, Injector};
use watertight::clock::{ManualClock, TokioClock};
use watertight::tower::ChaosLayer;

type Out = Result<u16, &'static str>;

#[test]
fn faults_never_call_the_inner_service_and_latency_answers_after_the_sleep() {
    let clock = Arc::new(ManualClock::new());
    let config = ChaosConfig::builder()
        .error(0.3, || Err("injected"))
        .outcome(0.3, || Ok(503))
        .seed(21)
        .build()
        .unwrap();
    let chaos = Arc::new(Injector::new("pricing", config, clock.clone()));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let svc = ChaosLayer::new(chaos.clone()).layer(tower::service_fn(move |_: u32| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Ok::<u16, &str>(200) }
    }));
    let (mut a, mut b) = (svc.clone(), svc);
    let mut answers: HashMap<Out, usize> = HashMap::new();
    for i in 0..1_000 {
        let s = if i % 2 == 0 { &mut a } else { &mut b };
        let r = block_on(block_on(s.ready()).unwrap().call(i));
        *answers.entry(r).or_default() += 1;
    }
    let m = chaos.metrics();
    assert_eq!(answers[&Err("injected")], m.injected(Fault::Error));
    assert_eq!(answers[&Ok(503)], m.injected(Fault::Outcome));
    assert_eq!(answers[&Ok(200)], m.passed);
    assert_eq!(calls.load(Ordering::Relaxed), m.passed);

    // Latency: the inner service is called at once, its answer comes after.
    let config = ChaosConfig::builder()
        .latency(1.0, Duration::from_millis(40))
        .build()
        .unwrap();
    let slow = Arc::new(Injector::new("pricing", config, clock.clone()));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let mut svc = ChaosLayer::new(slow).layer(tower::service_fn(move |_: u32| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Ok::<u16, &str>(200) }
    }));
    let call = svc.call(1);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    futures_lite::pin!(call);
    clock.advance(Duration::from_millis(39));
    assert!(block_on(poll_once(&mut call)).is_none());
    clock.advance(Duration::from_millis(1));
    assert_eq!(block_on(poll_once(&mut call)), Some(Ok(200)));
}

#[test]
fn concurrent_callers_share_one_sequence_on_a_real_runtime() {
    const TASKS: usize = 4;
    const CALLS: usize = 100;
    let config = || {
        ChaosConfig::builder()
            .error(0.2, || Err("injected"))
            .outcome(0.1, || Ok(503))
            .hang(0.05)
            .seed(99)
            .build()
            .unwrap()
    };
    // The faults of a sequential run of the same seed, as a multiset.
    let sequential: Injector<_, Out> = Injector::new("pricing", config(), ManualClock::new());
    let mut expected = [0usize; 5];
    for _ in 0..TASKS * CALLS {
        expected[sequential.draw().map_or(4, |f| f as usize)] += 1;
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let (got, inner_calls, metrics) = rt.block_on(async {
        let chaos = Arc::new(Injector::new("pricing", config(), TokioClock::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let svc = ChaosLayer::new(chaos.clone()).layer(tower::service_fn(move |_: usize| {
            seen.fetch_add(1, Ordering::Relaxed);
            async {
                tokio::task::yield_now().await;
                Ok::<u16, &str>(200)
            }
        }));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut svc = svc.clone();
                tokio::spawn(async move {
                    let mut got = [0usize; 5];
                    for i in 0..CALLS {
                        let call = svc.ready().await.unwrap().call(i);
                        // Counts, never latencies: 20 ms only bounds a hang.
                        let slot = match tokio::time::timeout(Duration::from_millis(20), call).await
                        {
                            Err(_elapsed) => Fault::Hang as usize,
                            Ok(Err(_)) => Fault::Error as usize,
                            Ok(Ok(503)) => Fault::Outcome as usize,
                            Ok(Ok(_)) => 4,
                        };
                        got[slot] += 1;
                    }
                    got
                })
            })
            .collect();
        let mut got = [0usize; 5];
        for t in tasks {
            for (g, n) in got.iter_mut().zip(t.await.unwrap()) {
                *g += n;
            }
        }
        (got, calls.load(Ordering::Relaxed), chaos.metrics())
    });
    assert_eq!(got, expected, "the same faults as a sequential run");
    assert_eq!(inner_calls, expected[4]);
    assert_eq!(
        [
            metrics.injected(Fault::Error),
            metrics.injected(Fault::Outcome),
            metrics.injected(Fault::Latency),
            metrics.injected(Fault::Hang),
            metrics.passed
        ],
        expected
    );
    assert!(expected[Fault::Hang as usize] > 0);
}
