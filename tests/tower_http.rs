//! The tower layers over real HTTP on 127.0.0.1 (axum server, reqwest
//! client), and unit-level checks of the bulkhead service's permit handling.
//!
//! Counts and order only: the slow handler blocks on a gate the test opens,
//! so "before any slow request finishes" is a fact of the test, not a timing.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::{mpsc, Semaphore};
use tower::{Layer, Service, ServiceBuilder};
use watertight::breaker::State as BreakerState;
use watertight::clock::TokioClock;
use watertight::tower::{BreakerError, BreakerLayer, BulkheadError, BulkheadLayer};
use watertight::{BreakerConfig, Bulkhead, CircuitBreaker, Outcome};

/// `Retry-After` in whole seconds, rounded up (a 2.5 s wait is "3").
fn whole_seconds_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn unavailable(retry_after: u64) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, retry_after.to_string())],
        "overloaded",
    )
        .into_response()
}

async fn shed(err: BulkheadError<Infallible>) -> Response {
    match err {
        BulkheadError::Rejected(_) => unavailable(1), // load shedding: "come back in a second"
        BulkheadError::Inner(never) => match never {},
    }
}

async fn refused(err: BreakerError<Infallible>) -> Response {
    match err {
        BreakerError::Rejected(why) => unavailable(why.retry_after().map_or(1, whole_seconds_up)),
        BreakerError::Inner(never) => match never {},
    }
}

#[derive(Clone)]
struct Gate {
    open: Arc<Semaphore>,
    entered: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

async fn slow(State(g): State<Gate>) -> &'static str {
    g.entered.fetch_add(1, Ordering::SeqCst);
    g.open.acquire().await.unwrap().forget();
    g.finished.fetch_add(1, Ordering::SeqCst);
    "done"
}

async fn upstream(axum::extract::Path(status): axum::extract::Path<u16>) -> StatusCode {
    StatusCode::from_u16(status).unwrap()
}

fn classify(r: &Result<Response, Infallible>) -> Outcome {
    match r {
        Ok(resp) if resp.status().is_server_error() => Outcome::Failure,
        _ => Outcome::Success,
    }
}

const OPEN: Duration = Duration::from_millis(2500);

struct Server {
    base: String,
    client: reqwest::Client,
    gate: Gate,
    slots: Arc<Bulkhead<TokioClock>>,
    breaker: Arc<CircuitBreaker<TokioClock, 8>>,
}

async fn start(limit: usize) -> Server {
    let gate = Gate {
        open: Arc::new(Semaphore::new(0)),
        entered: Arc::new(AtomicUsize::new(0)),
        finished: Arc::new(AtomicUsize::new(0)),
    };
    let slots = Arc::new(Bulkhead::try_new("slow", limit, TokioClock).unwrap());
    let config = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN)
        .build()
        .unwrap();
    let breaker = Arc::new(CircuitBreaker::new("upstream", config, TokioClock));
    let app = Router::new()
        .route("/slow", get(slow))
        .route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(shed))
                .layer(BulkheadLayer::new(slots.clone())),
        )
        .route(
            "/upstream/{status}",
            get(upstream).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(BreakerLayer::new(breaker.clone()).classify(classify)),
            ),
        )
        .with_state(gate.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    Server {
        base,
        client,
        gate,
        slots,
        breaker,
    }
}

/// Status and `Retry-After` of one GET.
async fn get_status(client: reqwest::Client, url: String) -> (u16, Option<String>) {
    let resp = client.get(url).send().await.unwrap();
    let retry = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    (resp.status().as_u16(), retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_n_slots_k_of_n_plus_k_slow_requests_get_503_before_any_finishes() {
    const N: usize = 4;
    const K: usize = 3;
    let s = start(N).await;

    let (tx, mut answers) = mpsc::unbounded_channel();
    for _ in 0..N + K {
        let (client, url, tx) = (s.client.clone(), format!("{}/slow", s.base), tx.clone());
        tokio::spawn(async move { tx.send(get_status(client, url).await).unwrap() });
    }

    // The gate is shut: the first K answers can only be refusals.
    let mut early = Vec::new();
    for _ in 0..K {
        early.push(answers.recv().await.unwrap());
    }
    assert_eq!(s.gate.finished.load(Ordering::SeqCst), 0);
    assert!(
        early
            .iter()
            .all(|(status, retry)| *status == 503 && retry.as_deref() == Some("1")),
        "{early:?}"
    );
    // Wait for the N admitted ones to be inside the handler: then nothing
    // more is coming until the gate opens.
    while s.gate.entered.load(Ordering::SeqCst) < N {
        tokio::task::yield_now().await;
    }
    assert_eq!(s.slots.in_flight(), N);
    assert_eq!(s.slots.metrics().rejected(), K);
    assert!(answers.try_recv().is_err());

    s.gate.open.add_permits(N);
    let mut late = Vec::new();
    for _ in 0..N {
        late.push(answers.recv().await.unwrap());
    }
    assert!(late.iter().all(|(status, _)| *status == 200), "{late:?}");
    assert_eq!(s.gate.entered.load(Ordering::SeqCst), N);
    assert_eq!(s.gate.finished.load(Ordering::SeqCst), N);
    assert_eq!(s.slots.in_flight(), 0);
    println!(
        "load shedding: N = {N}, k = {K}: {} x 503 (Retry-After: 1) before any finished, {} x 200",
        early.len(),
        late.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tripped_breaker_answers_503_with_retry_after_rounded_up() {
    let s = start(1).await;
    let url = |status: u16| format!("{}/upstream/{status}", s.base);

    // 4xx are answers: the breaker stays closed.
    for _ in 0..6 {
        assert_eq!(get_status(s.client.clone(), url(404)).await.0, 404);
    }
    assert_eq!(s.breaker.metrics().failed_calls, 0);
    assert_eq!(s.breaker.state(), BreakerState::Closed);

    // 5xx are failures: with 6 answers in the window of 8, the 4th failure
    // makes 4 of 8 (50 %) and opens the breaker; until then it stays closed.
    for i in 1..=4 {
        assert_eq!(
            s.breaker.state(),
            BreakerState::Closed,
            "before failure {i}"
        );
        assert_eq!(get_status(s.client.clone(), url(500)).await.0, 500);
    }
    assert_eq!(s.breaker.state(), BreakerState::Open);
    assert_eq!(s.breaker.metrics().failed_calls, 4);

    let (status, retry) = get_status(s.client.clone(), url(200)).await;
    assert_eq!(status, 503);
    // The open wait is 2.5 s: whole seconds rounded up is 3, for any
    // elapsed time under half a second since it opened, and never more.
    let retry: u64 = retry.unwrap().parse().unwrap();
    assert!(retry <= whole_seconds_up(OPEN));
    assert_eq!(retry, 3);
    println!("breaker: 503 with Retry-After: {retry} (open for {OPEN:?})");
}

// ---------------------------------------------------------------------------
// Unit level: readiness holds no permit; the permit lives in the future.
// ---------------------------------------------------------------------------

fn echo() -> impl Service<u32, Response = u32, Error = Infallible, Future: Send> + Clone {
    tower::service_fn(|n: u32| async move { Ok::<_, Infallible>(n) })
}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn poll_ready_does_not_hoard_a_permit() {
    let slots = Arc::new(Bulkhead::new("one", 1, watertight::clock::StdClock));
    let mut a = BulkheadLayer::new(slots.clone()).layer(echo());
    let mut b = BulkheadLayer::new(slots.clone()).layer(echo());
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..100 {
        assert!(matches!(a.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        assert!(matches!(b.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(slots.available(), 1);
    }
    // A call takes the permit; a second service's call is refused while the
    // first future lives, even though both were ready.
    let first = a.call(1);
    assert_send(&first);
    assert_eq!(slots.available(), 0);
    let mut second = std::pin::pin!(b.call(2));
    assert!(matches!(
        second.as_mut().poll(&mut cx),
        Poll::Ready(Err(BulkheadError::Rejected(watertight::AcquireError::Full)))
    ));
    let mut first = std::pin::pin!(first);
    assert!(matches!(first.as_mut().poll(&mut cx), Poll::Ready(Ok(1))));
    assert_eq!(slots.available(), 1, "given back on completion");
}

#[test]
fn dropping_the_response_future_gives_the_permit_back() {
    let slots = Arc::new(Bulkhead::new("one", 1, watertight::clock::StdClock));
    let mut svc = BulkheadLayer::new(slots.clone()).layer(tower::service_fn(|()| {
        std::future::pending::<Result<(), Infallible>>()
    }));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_ready());
    let mut fut = Box::pin(svc.call(()));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(slots.in_flight(), 1);
    drop(fut);
    assert_eq!(slots.in_flight(), 0);
    assert_eq!(slots.available(), 1);
    // A future never polled holds its permit too, and gives it back.
    let fut = svc.call(());
    assert_eq!(slots.available(), 0);
    drop(fut);
    assert_eq!(slots.available(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_bounded_wait_gets_the_permit_freed_in_time_and_times_out_otherwise() {
    let slots = Arc::new(Bulkhead::new("one", 1, TokioClock));
    let layer = BulkheadLayer::new(slots.clone()).max_wait(Duration::from_millis(50));
    let mut svc = layer.layer(echo());
    let held = slots.try_acquire_owned().unwrap();
    let waiting = tokio::spawn(svc.call(7));
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    assert_eq!(waiting.await.unwrap(), Ok(7));
    assert_eq!(slots.available(), 1);

    let _held = slots.try_acquire_owned().unwrap();
    let r = svc.call(8).await;
    assert_eq!(
        r,
        Err(BulkheadError::Rejected(watertight::AcquireError::TimedOut))
    );
    // One refusal counted once: the wait's first try is not a refusal.
    let m = slots.metrics();
    assert_eq!((m.rejected_full, m.rejected_timed_out), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_policy_service_refuses_with_the_policy_error_and_classifies_5xx() {
    use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    use watertight::tower::PolicyLayer;

    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .breaker(
            BreakerConfig::builder()
                .window_size(4)
                .minimum_calls(2)
                .failure_rate_threshold(50.0)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let policy: Arc<Policy<TokioClock, 4>> =
        Arc::new(Policy::new("pricing", config, TokioClock).unwrap());
    let mut svc = PolicyLayer::new(policy.clone())
        .classify(|r: &Result<u16, Infallible>| match r {
            Ok(s) if *s >= 500 => Outcome::Failure,
            _ => Outcome::Success,
        })
        .layer(tower::service_fn(
            |s: u16| async move { Ok::<_, Infallible>(s) },
        ));
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..10 {
        assert!(svc.poll_ready(&mut cx).is_ready());
    }
    assert_eq!(policy.bulkhead().available(), 1, "readiness holds no slot");

    assert_eq!(svc.call(404).await, Ok(404));
    let m = policy.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls), (1, 0), "a 4xx is an answer");
    let held = policy.bulkhead().try_acquire().unwrap();
    let err = svc.call(200).await.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
    assert_eq!(err.system(), "pricing");
    drop(held);

    // One 5xx in two calls is 50 %: the breaker opens, and the next call
    // is refused without reaching the service.
    assert_eq!(svc.call(503).await, Ok(503));
    assert_eq!(policy.breaker().metrics().failed_calls, 1);
    let err = svc.call(200).await.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::CircuitOpen(_)));
    assert!(err.is_unavailable());
    assert_eq!(policy.bulkhead().available(), 1, "slot given back");
}
