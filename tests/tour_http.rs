//! The tour's server and client (`examples/tour/storefront.rs`, the acts
//! in `examples/tour/`) over real HTTP: an axum server on 127.0.0.1, a
//! `reqwest` client, a bulkhead per system, and (act 4) a circuit breaker
//! in front of a shipping endpoint that answers 503.
//!
//! These tests assert counts and order only, never latencies: the slow
//! endpoint does not sleep, it blocks on a gate (a semaphore with no permits)
//! until the test opens it, and reports each arrival on a channel, so every
//! step waits for an event, not for time to pass. The breaker tests wait out
//! a short open duration with a real `tokio::time::sleep` and assert only
//! what happened after it, never how long anything took; they assume only
//! that a few immediate calls take less than the open duration (200 ms).
//!
//! Act 5's tests run a storefront on the same server that calls a stock and
//! a pricing endpoint of it over HTTP, each through its own `Policy`, inside
//! a request budget. A degraded pricing hangs for good (never answers), so
//! its calls end only by the policy's call timeout or the budget: real time
//! passes, but only outcomes are asserted (which answers were partial, what
//! the breaker recorded, which requests reached which system), never how
//! long anything took. They assume only that a request reaches the server
//! well within its call's timeout (300 ms) and that a few immediate calls
//! take less than pricing's open duration (60 s).
//!
//! Act 8's test calls a search endpoint through `call_idempotent` inside a
//! request budget: a first request that hangs for good is cut by the 300 ms
//! call timeout and retried once; then, search answering 503, 30 calls one
//! after another get exactly the retries the budget allows. It asserts
//! which requests reached the server and what the retry counted, never how
//! long anything took, and assumes only that a request reaches the server
//! well within 300 ms.
//!
//! Act 9's test (feature `tower`) runs both rate limits on a `ManualClock`
//! that only the test moves: 30 requests at once through a client held to
//! 50/s with a burst of 10 reach the server 10 at once and then 5 per
//! 100 ms advanced, never more; 25 requests at once to a route behind the
//! same rate get 10 answers and 15 × 429 with `Retry-After: 1`.
#![cfg(not(loom))]
#![cfg(feature = "tokio")]

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::get;
use axum::Router;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use watertight::breaker::{OnTransition, State as BreakerState, Transition};
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::{AcquireError, Bulkhead, OwnedPermit};
use watertight::{BreakerConfig, CallError, CircuitBreaker, Outcome, Rejection};
use BreakerState::{Closed, HalfOpen, Open};

/// A guard against hangs only (a regression fails instead of blocking CI);
/// nothing is asserted about how long anything takes.
const HANG_GUARD: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct Gate {
    /// Each shipping request reports its zip code here on arrival.
    arrivals: mpsc::UnboundedSender<String>,
    /// Each shipping request then waits for one permit of this semaphore.
    open: Arc<Semaphore>,
    /// While set, shipping answers 503 at once (no arrival, no gate).
    down: Arc<AtomicBool>,
    /// Shipping requests that reached the server, answered or not.
    hits: Arc<AtomicUsize>,
}

async fn inventory(Path(sku): Path<String>) -> String {
    format!(r#"{{"sku":"{sku}","in_stock":42}}"#)
}

async fn shipping_rate(
    State(gate): State<Gate>,
    RawQuery(query): RawQuery,
) -> Result<String, (StatusCode, &'static str)> {
    gate.hits.fetch_add(1, SeqCst);
    if gate.down.load(SeqCst) {
        return Err((StatusCode::SERVICE_UNAVAILABLE, "carrier API unavailable"));
    }
    let zip = query
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("zip_code=")))
        .unwrap_or("")
        .to_owned();
    gate.arrivals.send(zip.clone()).expect("test is listening");
    gate.open.acquire().await.expect("gate open").forget();
    Ok(format!(r#"{{"zip_code":"{zip}","rate_cents":899}}"#))
}

struct Server {
    base: String,
    arrivals: mpsc::UnboundedReceiver<String>,
    open: Arc<Semaphore>,
    down: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
    client: reqwest::Client,
}

impl Server {
    /// Shipping requests that reached the server so far.
    fn hits(&self) -> usize {
        self.hits.load(SeqCst)
    }
}

/// The tour's two endpoints on a random free loopback port, the slow one gated.
async fn start() -> Server {
    let (tx, arrivals) = mpsc::unbounded_channel();
    let open = Arc::new(Semaphore::new(0));
    let down = Arc::new(AtomicBool::new(false));
    let hits = Arc::new(AtomicUsize::new(0));
    let gate = Gate {
        arrivals: tx,
        open: open.clone(),
        down: down.clone(),
        hits: hits.clone(),
    };
    let app = Router::new()
        .route("/inventory/{sku}", get(inventory))
        .route("/shipping-rate", get(shipping_rate))
        .with_state(gate);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    Server {
        base,
        arrivals,
        open,
        down,
        hits,
        client,
    }
}

/// Completed calls, in completion order.
type Log = Arc<Mutex<Vec<String>>>;

/// GETs `url` while holding `permit`; logs `label` before giving the permit
/// back, so the log's order is the order in which permits were used.
fn spawn_call(
    client: &reqwest::Client,
    url: String,
    permit: impl Future<Output = Result<OwnedPermit<TokioClock>, AcquireError>> + Send + 'static,
    log: &Log,
    label: &'static str,
) -> JoinHandle<(u16, String)> {
    let (client, log) = (client.clone(), log.clone());
    tokio::spawn(async move {
        let permit = permit.await.expect("a permit");
        let response = client.get(&url).send().await.expect("HTTP request");
        let status = response.status().as_u16();
        let body = response.text().await.expect("HTTP body");
        log.lock().unwrap().push(label.to_owned());
        drop(permit);
        (status, body)
    })
}

fn log_of(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_shipping_bulkhead_turns_callers_away_while_inventory_is_served() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut server = start().await;
        let shipping = Arc::new(Bulkhead::new("shipping", 3, TokioClock));
        let inventory = Arc::new(Bulkhead::new("inventory", 5, TokioClock));
        let log = Log::default();

        // Three shipping calls take all three slots and reach the server,
        // where they stay until the gate opens.
        let mut calls = Vec::new();
        for i in 0..3 {
            let url = format!("{}/shipping-rate?zip_code=9410{i}", server.base);
            let permit = shipping.acquire_owned_timeout(Duration::from_secs(5));
            calls.push(spawn_call(&server.client, url, permit, &log, "shipping"));
        }
        let mut arrived = Vec::new();
        for _ in 0..3 {
            arrived.push(server.arrivals.recv().await.unwrap());
        }
        arrived.sort();
        assert_eq!(arrived, ["94100", "94101", "94102"]);
        assert_eq!((shipping.in_flight(), shipping.available()), (3, 0));

        // Shipping is full: a fourth caller is turned away at once, or after
        // a short wait in which no slot comes free (the gate is shut).
        assert_eq!(shipping.try_acquire().unwrap_err(), AcquireError::Full);
        let waited = shipping.acquire_timeout(Duration::from_millis(10)).await;
        assert_eq!(waited.unwrap_err(), AcquireError::TimedOut);

        // Inventory has its own compartment: served while shipping is full.
        let url = format!("{}/inventory/SKU-1", server.base);
        let permit = inventory.acquire_owned_timeout(Duration::from_secs(5));
        let (status, body) = spawn_call(&server.client, url, permit, &log, "inventory")
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert!(body.contains(r#""sku":"SKU-1""#), "{body}");
        assert_eq!(log_of(&log), ["inventory"]);
        assert_eq!(shipping.in_flight(), 3);

        // Open the gate: the three shipping calls complete, after inventory.
        server.open.add_permits(3);
        let mut zips = Vec::new();
        for call in calls {
            let (status, body) = call.await.unwrap();
            assert_eq!(status, 200);
            zips.push(body);
        }
        for i in 0..3 {
            let zip = format!(r#""zip_code":"9410{i}""#);
            assert!(zips.iter().any(|b| b.contains(&zip)), "{zips:?}");
        }
        assert_eq!(
            log_of(&log),
            ["inventory", "shipping", "shipping", "shipping"]
        );

        let s = shipping.metrics();
        assert_eq!((s.accepted, s.peak_in_flight, s.in_flight), (3, 3, 0));
        assert_eq!(
            (s.rejected_full, s.rejected_timed_out, s.rejected()),
            (1, 1, 2)
        );
        let v = inventory.metrics();
        assert_eq!((v.accepted, v.peak_in_flight, v.in_flight), (1, 1, 0));
        assert_eq!(v.rejected(), 0);
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shared_bulkhead_makes_inventory_queue_behind_shipping() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut server = start().await;
        let shared = Arc::new(Bulkhead::new("shared", 2, TokioClock));
        let log = Log::default();
        let shipping_url = |i: usize| format!("{}/shipping-rate?zip_code=9410{i}", server.base);

        // Two shipping calls hold both slots of the shared bulkhead.
        let mut calls = Vec::new();
        for i in 0..2 {
            let permit = shared.acquire_owned();
            calls.push(spawn_call(
                &server.client,
                shipping_url(i),
                permit,
                &log,
                "shipping",
            ));
        }
        for _ in 0..2 {
            server.arrivals.recv().await.unwrap();
        }

        // Then an inventory call and a third shipping call queue, in that
        // order: each wait is polled once here, which registers it.
        let mut inventory_wait = Box::pin(shared.acquire_owned());
        let mut shipping_wait = Box::pin(shared.acquire_owned());
        let first = poll_fn(|cx| Poll::Ready(inventory_wait.as_mut().poll(cx))).await;
        assert!(
            first.is_pending(),
            "inventory must wait: the shared slots are taken"
        );
        let first = poll_fn(|cx| Poll::Ready(shipping_wait.as_mut().poll(cx))).await;
        assert!(first.is_pending());
        assert_eq!(shared.waiting(), 2);

        let url = format!("{}/inventory/SKU-1", server.base);
        let inventory_call = spawn_call(&server.client, url, inventory_wait, &log, "inventory");
        calls.push(spawn_call(
            &server.client,
            shipping_url(2),
            shipping_wait,
            &log,
            "shipping",
        ));

        // One slow call finishes; only then does inventory get a slot.
        server.open.add_permits(1);
        let (status, body) = inventory_call.await.unwrap();
        assert_eq!(status, 200);
        assert!(body.contains(r#""sku":"SKU-1""#), "{body}");
        assert_eq!(log_of(&log), ["shipping", "inventory"]);

        // The third shipping call gets inventory's slot and reaches the server.
        server.arrivals.recv().await.unwrap();
        server.open.add_permits(2);
        for call in calls {
            assert_eq!(call.await.unwrap().0, 200);
        }
        assert_eq!(
            log_of(&log),
            ["shipping", "inventory", "shipping", "shipping"]
        );

        let m = shared.metrics();
        assert_eq!((m.accepted, m.peak_in_flight, m.in_flight), (4, 2, 0));
        assert_eq!((m.rejected(), m.cancelled_waits, m.waiting), (0, 0, 0));
    })
    .await
    .expect("test hung");
}

// ---------------------------------------------------------------- the breaker (act 4)

/// The breaker tests' open duration: short, waited for in real time.
const OPEN: Duration = Duration::from_millis(200);

/// What the client makes of one HTTP call: the status, or no answer at all.
type Answer = Result<u16, reqwest::Error>;

/// The tour's classifier: a 5xx or no answer is a failure, any other status
/// (a 404 too) is an answer.
fn classify(answer: &Answer) -> Outcome {
    match answer {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// One GET, its body read to the end.
async fn get_status(client: reqwest::Client, url: String) -> Answer {
    let response = client.get(&url).send().await?;
    let status = response.status().as_u16();
    response.bytes().await?;
    Ok(status)
}

/// State changes in the order the listener was told of them.
type Transitions = Arc<Mutex<Vec<(BreakerState, BreakerState)>>>;

fn seen(transitions: &Transitions) -> Vec<(BreakerState, BreakerState)> {
    transitions.lock().unwrap().clone()
}

/// The tour's breaker (window 10, minimum 5 calls, failure rate 50 %, 3
/// probes), open for `OPEN`, with a listener that logs every transition.
fn shipping_breaker() -> (
    Arc<CircuitBreaker<TokioClock, 10, impl OnTransition + Send + Sync + 'static>>,
    Transitions,
) {
    let config = BreakerConfig::builder()
        .window_size(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN)
        .half_open_calls(3)
        .build()
        .unwrap();
    let transitions = Transitions::default();
    let log = transitions.clone();
    let breaker =
        CircuitBreaker::with_listener("shipping", config, TokioClock, move |t: &Transition| {
            log.lock().unwrap().push((t.from, t.to))
        });
    (Arc::new(breaker), transitions)
}

/// One GET of `url` through `breaker`, classified as the tour does.
async fn call<H: OnTransition>(
    breaker: &CircuitBreaker<TokioClock, 10, H>,
    client: &reqwest::Client,
    url: &str,
) -> Result<u16, CallError<reqwest::Error>> {
    let request = get_status(client.clone(), url.to_owned());
    breaker.call_with(request, classify).await
}

/// The refusal of a call the breaker did not let through.
fn refusal(result: Result<u16, CallError<reqwest::Error>>) -> Rejection {
    match result {
        Err(CallError::Rejected(why)) => why,
        Ok(status) => panic!("expected a refusal, the call ran: {status}"),
        Err(CallError::Failed(e)) => panic!("expected a refusal, the call ran: {e}"),
    }
}

/// The retry hint of a refusal while open.
fn open_hint(why: Rejection) -> Duration {
    match why {
        Rejection::Open { retry_after } => retry_after,
        other => panic!("expected Rejection::Open, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opens_on_503s_refuses_without_a_request_and_closes_after_probes() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut server = start().await;
        let (breaker, transitions) = shipping_breaker();
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);

        // Shipping goes down: the first 5 calls (the minimum) reach it, get
        // a 503 each, which is passed back as the call's own result; the 5th
        // outcome trips the breaker.
        server.down.store(true, SeqCst);
        for i in 1..=5 {
            assert_eq!(breaker.state(), Closed, "before call {i}");
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
            assert_eq!(server.hits(), i);
        }
        assert_eq!(breaker.state(), Open);
        assert_eq!(seen(&transitions), [(Closed, Open)]);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (5, 5, 0));

        // Open: refused at once, no request made, each with a hint no longer
        // than the open duration and not growing (refusals do not extend it).
        let mut hints = Vec::new();
        for _ in 0..3 {
            let why = refusal(call(&breaker, &server.client, &url).await);
            hints.push(open_hint(why));
        }
        assert_eq!(server.hits(), 5, "a refused call reached the server");
        assert!(hints.iter().all(|h| *h <= OPEN), "{hints:?}");
        assert!(hints.windows(2).all(|w| w[0] >= w[1]), "{hints:?}");
        assert_eq!(breaker.metrics().rejected, 3);

        // The server recovers (its gate stays shut for now); the client waits
        // as the last hint said. `state()` then says half-open, changing
        // nothing: no transition has been made yet.
        server.down.store(false, SeqCst);
        tokio::time::sleep(*hints.last().unwrap()).await;
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(seen(&transitions), [(Closed, Open)]);

        // Three probes go through and wait at the server's gate; the first
        // one's admission began the half-open episode.
        let mut probes = Vec::new();
        for _ in 0..3 {
            let (breaker, client, url) = (breaker.clone(), server.client.clone(), url.clone());
            probes.push(tokio::spawn(
                async move { call(&breaker, &client, &url).await },
            ));
        }
        for _ in 0..3 {
            server.arrivals.recv().await.unwrap();
        }
        assert_eq!(server.hits(), 8);
        assert_eq!(seen(&transitions), [(Closed, Open), (Open, HalfOpen)]);

        // A fourth call while the three are out: refused at once, no hint.
        let why = refusal(call(&breaker, &server.client, &url).await);
        assert_eq!(why, Rejection::ProbesBusy);
        assert_eq!(why.retry_after(), None);
        assert_eq!(server.hits(), 8);
        assert_eq!(breaker.state(), HalfOpen);

        // The gate opens: three good probes close the breaker.
        server.open.add_permits(4);
        for probe in probes {
            assert_eq!(probe.await.unwrap().unwrap(), 200);
        }
        assert_eq!(
            seen(&transitions),
            [(Closed, Open), (Open, HalfOpen), (HalfOpen, Closed)]
        );
        assert_eq!(breaker.state(), Closed);
        assert_eq!(breaker.metrics().calls, 0, "closing starts an empty window");

        // Closed again: calls pass and fill the new window.
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 200);
        assert_eq!(server.hits(), 9);
        let m = breaker.metrics();
        assert_eq!(m.state, Closed);
        assert_eq!((m.calls, m.failed_calls), (1, 0));
        assert_eq!((m.rejected, m.stale), (4, 0));
        assert_eq!(seen(&transitions).len(), 3);
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_probe_reopens_the_breaker_for_a_new_open_wait() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = start().await;
        let (breaker, transitions) = shipping_breaker();
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);

        server.down.store(true, SeqCst);
        for _ in 0..5 {
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        }
        assert_eq!(breaker.state(), Open);
        let hint = open_hint(refusal(call(&breaker, &server.client, &url).await));
        assert_eq!(server.hits(), 5);

        // The wait is over but the server is still down: the probe gets a
        // 503 and the breaker reopens. It reads Open at once: a new wait
        // began (the old one is over, so it would read HalfOpen).
        tokio::time::sleep(hint).await;
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        assert_eq!(server.hits(), 6);
        assert_eq!(breaker.state(), Open);
        assert_eq!(
            seen(&transitions),
            [(Closed, Open), (Open, HalfOpen), (HalfOpen, Open)]
        );
        let hint = open_hint(refusal(call(&breaker, &server.client, &url).await));
        assert!(hint <= OPEN, "{hint:?}");
        assert_eq!(server.hits(), 6);

        // Recovered, and after the new wait: three probes, one at a time, close it.
        server.down.store(false, SeqCst);
        server.open.add_permits(3);
        tokio::time::sleep(hint).await;
        for i in 0..3 {
            assert_eq!(breaker.state(), HalfOpen, "before probe {i}");
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 200);
        }
        assert_eq!(breaker.state(), Closed);
        assert_eq!(server.hits(), 9);
        assert_eq!(
            seen(&transitions),
            [
                (Closed, Open),
                (Open, HalfOpen),
                (HalfOpen, Open),
                (Open, HalfOpen),
                (HalfOpen, Closed)
            ]
        );
        let m = breaker.metrics();
        assert_eq!((m.rejected, m.stale), (2, 0));
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_classifier_makes_a_404_an_answer_and_a_503_or_no_answer_a_failure() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = start().await;
        let (breaker, transitions) = shipping_breaker();

        // A 404 is an answer: passed back as it is, recorded as a success.
        let missing = format!("{}/no-such-route", server.base);
        assert_eq!(call(&breaker, &server.client, &missing).await.unwrap(), 404);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls), (1, 0));

        // A 503 is a failure, still passed back as the call's own result.
        server.down.store(true, SeqCst);
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls), (2, 1));

        // No answer at all (nothing listens on the port): the call's error,
        // recorded as a failure.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let nobody = format!("http://{}/shipping-rate", closed.local_addr().unwrap());
        drop(closed);
        match call(&breaker, &server.client, &nobody).await {
            Err(CallError::Failed(e)) => assert!(e.is_connect(), "{e:?}"),
            other => panic!("expected the transport error, got {other:?}"),
        }
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (3, 2, 0));
        assert_eq!(
            breaker.state(),
            Closed,
            "3 outcomes: below the minimum of 5"
        );
        assert!(seen(&transitions).is_empty());
    })
    .await
    .expect("test hung");
}

// ---------------------------------------------------------------- the storefront (act 5)

/// The storefront tests' request budget, as the tour's.
const BUDGET: Duration = Duration::from_millis(1500);
/// Pricing's call timeout, as the tour's: well inside the budget.
const PRICING_TIMEOUT: Duration = Duration::from_millis(300);
/// Pricing's open duration: longer than any test, never waited for.
const PRICING_OPEN: Duration = Duration::from_secs(60);

/// One downstream system: requests that reached it, and (pricing) a switch
/// that makes it hang.
#[derive(Default)]
struct Backend {
    hits: AtomicUsize,
    hang: AtomicBool,
}

/// The two systems and the arrivals of pricing's requests.
struct Backends {
    stock: Backend,
    pricing: Backend,
    /// Each pricing request reports its SKU here on arrival.
    arrivals: mpsc::UnboundedSender<String>,
}

async fn stock(State(b): State<Arc<Backends>>, Path(_sku): Path<String>) -> &'static str {
    b.stock.hits.fetch_add(1, SeqCst);
    r#"{"in_stock":42}"#
}

async fn pricing(State(b): State<Arc<Backends>>, Path(sku): Path<String>) -> &'static str {
    b.pricing.hits.fetch_add(1, SeqCst);
    b.arrivals.send(sku).expect("test is listening");
    if b.pricing.hang.load(SeqCst) {
        std::future::pending::<()>().await;
    }
    r#"{"price_cents":1299}"#
}

struct Storefront {
    client: reqwest::Client,
    base: String,
    budget: Duration,
    stock: Policy<TokioClock, 8>,
    pricing: Policy<TokioClock, 8>,
}

/// The tour's stock policy, its call timeout the whole budget: it answers at
/// once, and these tests never let it time out.
fn stock_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(4)
        .build()
        .unwrap();
    PolicyConfig::builder(8)
        .max_wait(Duration::from_millis(100))
        .call_timeout(BUDGET)
        .breaker(breaker)
        .build()
        .unwrap()
}

/// The tour's pricing policy: opens once 2 of its last 4 calls failed.
fn pricing_policy(call_timeout: Duration) -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(PRICING_OPEN)
        .build()
        .unwrap();
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(call_timeout)
        .breaker(breaker)
        .build()
        .unwrap()
}

type Reply = Result<(u16, String), reqwest::Error>;

async fn get_body(client: reqwest::Client, url: String) -> Reply {
    let response = client.get(&url).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

fn classify_reply(reply: &Reply) -> Outcome {
    match reply {
        Ok((status, _)) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// One system's part of an answer as JSON (its data, or why not and when to
/// retry), and its retry hint.
async fn fetch(
    client: &reqwest::Client,
    policy: &Policy<TokioClock, 8>,
    budget: &Deadline<TokioClock>,
    url: String,
) -> Result<String, (String, Option<Duration>)> {
    let call = || get_body(client.clone(), url);
    match policy.call_within_with(budget, call, classify_reply).await {
        Ok((200, body)) => Ok(body),
        Ok((status, _)) => Err((format!(r#"{{"unavailable":"status {status}"}}"#), None)),
        Err(e) => {
            let why = match e.kind() {
                ErrorKind::BulkheadFull | ErrorKind::BulkheadClosed => "busy",
                ErrorKind::CircuitOpen(_) => "circuit open",
                ErrorKind::DeadlineExceeded => "timed out",
                _ => "no answer",
            };
            let json = match e.retry_after() {
                Some(h) => format!(
                    r#"{{"unavailable":"{why}","retry_after_ms":{}}}"#,
                    h.as_millis()
                ),
                None => format!(r#"{{"unavailable":"{why}"}}"#),
            };
            Err((json, e.retry_after()))
        }
    }
}

fn part(r: &Result<String, (String, Option<Duration>)>) -> &str {
    match r {
        Ok(body) | Err((body, _)) => body,
    }
}

type Page = (StatusCode, HeaderMap, String);

/// A 503 with `Retry-After` (whole seconds, rounded up) when a hint was given.
fn unavailable(hint: Option<Duration>, body: String) -> Page {
    let mut headers = HeaderMap::new();
    if let Some(hint) = hint {
        let secs = hint.as_secs() + u64::from(hint.subsec_nanos() > 0);
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    (StatusCode::SERVICE_UNAVAILABLE, headers, body)
}

/// As the tour's: stock and pricing at once, inside one budget; a missing
/// price is a partial answer.
async fn product(State(f): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let budget = Deadline::after(TokioClock, f.budget);
    let (stock, price) = tokio::join!(
        fetch(
            &f.client,
            &f.stock,
            &budget,
            format!("{}/stock/{sku}", f.base)
        ),
        fetch(
            &f.client,
            &f.pricing,
            &budget,
            format!("{}/pricing/{sku}", f.base)
        ),
    );
    let body = format!(
        r#"{{"sku":"{sku}","stock":{},"price":{}}}"#,
        part(&stock),
        part(&price)
    );
    match (stock, price) {
        (Err((_, a)), Err((_, b))) => unavailable(a.max(b), body),
        _ => (StatusCode::OK, HeaderMap::new(), body),
    }
}

/// As the tour's: pricing first, then stock with what is left of the budget;
/// without a price, a 503 at once and stock is not asked.
async fn checkout(State(f): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let budget = Deadline::after(TokioClock, f.budget);
    let url = format!("{}/pricing/{sku}", f.base);
    let price = fetch(&f.client, &f.pricing, &budget, url).await;
    if let Err((json, hint)) = price {
        return unavailable(hint, format!(r#"{{"sku":"{sku}","price":{json}}}"#));
    }
    let url = format!("{}/stock/{sku}", f.base);
    let stock = fetch(&f.client, &f.stock, &budget, url).await;
    let body = format!(
        r#"{{"sku":"{sku}","price":{},"stock":{}}}"#,
        part(&price),
        part(&stock)
    );
    match stock {
        Ok(_) => (StatusCode::OK, HeaderMap::new(), body),
        Err((_, hint)) => unavailable(hint, body),
    }
}

struct Shop {
    base: String,
    client: reqwest::Client,
    backends: Arc<Backends>,
    front: Arc<Storefront>,
    arrivals: mpsc::UnboundedReceiver<String>,
}

impl Shop {
    /// GETs `path` of the storefront: status, `Retry-After`, body.
    async fn get(&self, path: &str) -> (u16, Option<String>, String) {
        let url = format!("{}{path}", self.base);
        let response = self.client.get(&url).send().await.unwrap();
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get(RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        (status, retry, response.text().await.unwrap())
    }

    fn hits(&self) -> (usize, usize) {
        let b = &self.backends;
        (b.stock.hits.load(SeqCst), b.pricing.hits.load(SeqCst))
    }
}

/// The storefront with a `budget` per request and pricing's `call_timeout`,
/// on a random free loopback port.
async fn start_shop(budget: Duration, pricing_timeout: Duration) -> Shop {
    let (tx, arrivals) = mpsc::unbounded_channel();
    let backends = Arc::new(Backends {
        stock: Backend::default(),
        pricing: Backend::default(),
        arrivals: tx,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let front = Arc::new(Storefront {
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
        base: base.clone(),
        budget,
        stock: Policy::new("stock", stock_policy(), TokioClock).unwrap(),
        pricing: Policy::new("pricing", pricing_policy(pricing_timeout), TokioClock).unwrap(),
    });
    let app = Router::new()
        .route("/stock/{sku}", get(stock))
        .route("/pricing/{sku}", get(pricing))
        .with_state(backends.clone())
        .merge(
            Router::new()
                .route("/product/{sku}", get(product))
                .route("/checkout/{sku}", get(checkout))
                .with_state(front.clone()),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Shop {
        base,
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
        backends,
        front,
        arrivals,
    }
}

/// What an answer was: every part there, some missing (and why), or none.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Class {
    Full,
    NoPrice(String),
    Unavailable(String),
}

/// Classifies a storefront answer by its status and its price part.
fn class(status: u16, body: &str) -> Class {
    let why = body
        .split_once(r#""price":{"unavailable":""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(why, _)| why.to_owned());
    match (status, why) {
        (200, None) if body.contains(r#""price":{"price_cents":1299}"#) => Class::Full,
        (200, Some(why)) if body.contains(r#""stock":{"in_stock":42}"#) => Class::NoPrice(why),
        (503, Some(why)) => Class::Unavailable(why),
        _ => panic!("unexpected answer {status}: {body}"),
    }
}

/// The `retry_after_ms` of a body's price part, if it has one.
fn retry_ms(body: &str) -> Option<u128> {
    let (_, rest) = body.split_once(r#""retry_after_ms":"#)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(digits.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pricing_hangs_pages_answer_without_a_price_and_its_breaker_stops_the_calls() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut shop = start_shop(BUDGET, PRICING_TIMEOUT).await;
        let pricing = shop.front.pricing.breaker();
        let mut classes = Vec::new();
        let mut hints = Vec::new();

        // Healthy: a page and a checkout, each with stock and a price.
        for path in ["/product/SKU-1", "/checkout/SKU-1"] {
            let (status, retry, body) = shop.get(path).await;
            assert_eq!(retry, None);
            classes.push(class(status, &body));
            assert_eq!(shop.arrivals.recv().await.unwrap(), "SKU-1");
        }
        assert_eq!(shop.hits(), (2, 2));

        // Pricing hangs: each call reaches it and is cut at pricing's call
        // timeout (inside the budget), a failure; the page answers without a
        // price. The second failure makes 2 of the last 4: the breaker opens.
        shop.backends.pricing.hang.store(true, SeqCst);
        for (i, sku) in ["SKU-2", "SKU-3"].into_iter().enumerate() {
            assert_eq!(pricing.state(), Closed, "before {sku}");
            let (status, retry, body) = shop.get(&format!("/product/{sku}")).await;
            assert_eq!(retry, None);
            assert_eq!(retry_ms(&body), None, "{body}");
            classes.push(class(status, &body));
            assert_eq!(shop.arrivals.recv().await.unwrap(), sku);
            assert_eq!(shop.hits(), (3 + i, 3 + i));
        }
        assert_eq!(pricing.state(), Open);
        let m = pricing.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (4, 2, 0));

        // Open: pages still answer, with stock and the breaker's retry hint
        // for the price; a checkout answers 503 with Retry-After and asks
        // neither system. No request reaches pricing.
        for path in [
            "/product/SKU-4",
            "/product/SKU-5",
            "/checkout/SKU-5",
            "/product/SKU-6",
        ] {
            let (status, retry, body) = shop.get(path).await;
            let hint = retry_ms(&body).unwrap_or_else(|| panic!("no retry hint: {body}"));
            assert!(hint <= PRICING_OPEN.as_millis(), "{body}");
            if status == 503 {
                let secs: u128 = retry.expect("Retry-After").parse().unwrap();
                assert_eq!(secs, hint.div_ceil(1000).max(1), "{body}");
                assert!(!body.contains("stock"), "{body}");
            } else {
                assert_eq!(retry, None);
            }
            hints.push(hint);
            classes.push(class(status, &body));
        }
        assert!(hints.windows(2).all(|w| w[0] >= w[1]), "{hints:?}");

        let no_price = |why: &str| Class::NoPrice(why.to_owned());
        assert_eq!(
            classes,
            [
                Class::Full,
                Class::Full,
                no_price("timed out"),
                no_price("timed out"),
                no_price("circuit open"),
                no_price("circuit open"),
                Class::Unavailable("circuit open".to_owned()),
                no_price("circuit open"),
            ]
        );
        // Pricing: the 4 requests before it opened, none after.
        assert_eq!(shop.hits().1, 4);
        assert!(shop.arrivals.try_recv().is_err());
        let m = pricing.metrics();
        assert_eq!(
            (m.state, m.calls, m.failed_calls, m.rejected),
            (Open, 4, 2, 4)
        );
        // Stock served every request that asked it: all 7 but the refused checkout.
        assert_eq!(shop.hits().0, 7);
        let s = shop.front.stock.breaker().metrics();
        assert_eq!((s.state, s.calls, s.failed_calls), (Closed, 7, 0));
        let b = shop.front.stock.bulkhead().metrics();
        assert_eq!((b.accepted, b.rejected(), b.in_flight), (7, 0, 0));
        let b = shop.front.pricing.bulkhead().metrics();
        assert_eq!((b.accepted, b.rejected(), b.in_flight), (8, 0, 0));
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_the_request_budget_is_not_a_failure_of_the_system() {
    tokio::time::timeout(HANG_GUARD, async {
        // Pricing's own timeout (10 s) is past the whole budget (300 ms): a
        // hanging pricing is cut by the budget, which is the caller running
        // out of time, not pricing failing — its breaker records nothing and
        // never opens, however many calls are cut.
        let budget = Duration::from_millis(300);
        let mut shop = start_shop(budget, Duration::from_secs(10)).await;
        shop.backends.pricing.hang.store(true, SeqCst);
        for i in 1..=5 {
            let sku = format!("SKU-{i}");
            let (_, _, body) = shop.get(&format!("/product/{sku}")).await;
            assert!(
                body.contains(r#""price":{"unavailable":"timed out"}"#),
                "{body}"
            );
            assert_eq!(shop.arrivals.recv().await.unwrap(), sku);
        }
        assert_eq!(shop.hits().1, 5, "every call reached pricing");
        let m = shop.front.pricing.breaker().metrics();
        assert_eq!(
            (m.state, m.calls, m.failed_calls, m.rejected),
            (Closed, 0, 0, 0)
        );
        assert_eq!(shop.front.pricing.bulkhead().metrics().in_flight, 0);
    })
    .await
    .expect("test hung");
}

// ---------------------------------------------------------------- retries (act 8)

/// Search: each request reports its query on arrival; the first `hang`
/// requests never get an answer, and while `down` every request is a 503.
#[derive(Clone)]
struct SearchGate {
    arrivals: mpsc::UnboundedSender<String>,
    hang: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

async fn search(
    State(gate): State<SearchGate>,
    Path(q): Path<String>,
) -> Result<String, StatusCode> {
    gate.arrivals.send(q.clone()).expect("test is listening");
    if gate.down.load(SeqCst) {
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    if gate
        .hang
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        std::future::pending::<()>().await;
    }
    Ok(format!(r#"{{"q":"{q}","results":3}}"#))
}

/// A 5xx is an error, so that the default classifier retries it.
async fn get_search(client: reqwest::Client, url: String) -> Result<String, u16> {
    let response = client.get(&url).send().await.map_err(|_| 0u16)?;
    if response.status().is_server_error() {
        return Err(response.status().as_u16());
    }
    response.text().await.map_err(|_| 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_retried_once_and_the_budget_stops_a_storm() {
    tokio::time::timeout(HANG_GUARD, async {
        let (tx, mut arrivals) = mpsc::unbounded_channel();
        let gate = SearchGate {
            arrivals: tx,
            hang: Arc::new(AtomicUsize::new(1)),
            down: Arc::new(AtomicBool::new(false)),
        };
        let app = Router::new()
            .route("/search/{q}", get(search))
            .with_state(gate.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        // As the tour's: 300 ms per call, the default retries (2 attempts,
        // a budget of 10 tokens, 10 %), a breaker that judges after 50.
        let breaker = BreakerConfig::builder()
            .window_size(50)
            .minimum_calls(50)
            .build()
            .unwrap();
        let config = PolicyConfig::builder(4)
            .call_timeout(PRICING_TIMEOUT)
            .breaker(breaker)
            .retry(watertight::retry::RetryConfig::builder().seed(8))
            .build()
            .unwrap();
        let search: Policy<TokioClock> = Policy::new("search", config, TokioClock).unwrap();

        // The first request hangs; the call timeout cuts it; the retry answers.
        let url = format!("{base}/search/boots");
        let request = Deadline::after(TokioClock, BUDGET);
        let r = search
            .call_idempotent(|| get_search(client.clone(), url.clone()))
            .within(&request)
            .await;
        assert_eq!(r.unwrap(), r#"{"q":"boots","results":3}"#);
        assert_eq!(arrivals.recv().await.unwrap(), "boots");
        assert_eq!(arrivals.recv().await.unwrap(), "boots");
        let m = search.retry_metrics();
        assert_eq!(
            (m.after_failure, m.after_timeout, m.budget_exhausted),
            (0, 1, 0)
        );
        let b = search.breaker().metrics();
        assert_eq!(
            (b.calls, b.failed_calls),
            (2, 1),
            "the timeout was a failure"
        );

        // Down: 30 calls, one after another. The budget (9.1 tokens now)
        // lets a failed call retry while more than 5 are left after its
        // failure took one: the first two calls' (each taking two tokens),
        // then none.
        gate.down.store(true, SeqCst);
        for i in 0..30 {
            let url = format!("{base}/search/q{i}");
            let request = Deadline::after(TokioClock, BUDGET);
            let r = search
                .call_idempotent(|| get_search(client.clone(), url.clone()))
                .within(&request)
                .await;
            assert_eq!(r.unwrap_err().into_inner(), Some(503));
        }
        let mut seen = Vec::new();
        while let Ok(q) = arrivals.try_recv() {
            seen.push(q);
        }
        let expected: Vec<String> = ["q0", "q0", "q1", "q1"]
            .into_iter()
            .map(str::to_owned)
            .chain((2..30).map(|i| format!("q{i}")))
            .collect();
        assert_eq!(seen, expected, "the requests that reached search, in order");
        let m = search.retry_metrics();
        assert_eq!(
            (m.after_failure, m.after_timeout, m.budget_exhausted),
            (2, 1, 28)
        );
        assert_eq!(search.retry_budget().tokens(), 0.0);
        let b = search.breaker().metrics();
        assert_eq!((b.state, b.calls, b.failed_calls), (Closed, 34, 33));
        assert_eq!(search.bulkhead().metrics().in_flight, 0);
    })
    .await
    .expect("test hung");
}

// ---------------------------------------------------------------- the rate limit (act 9)

/// Act 9's server, with the limiters on a `ManualClock` that only the test
/// moves: which requests are admitted is a fact of the test.
#[cfg(feature = "tower")]
mod act_9 {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    use axum::error_handling::HandleErrorLayer;
    use axum::extract::State;
    use axum::http::header::RETRY_AFTER;
    use axum::http::{HeaderValue, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use axum::Router;
    use tokio::sync::mpsc;
    use tower::{Layer, ServiceBuilder, ServiceExt};
    use watertight::clock::ManualClock;
    use watertight::rate::{Quota, RateLimiter};
    use watertight::tower::{RateLimitError, RateLimitLayer};

    use super::HANG_GUARD;

    /// As the tour's: 50 a second, 10 at once.
    const RATE: Quota = Quota::per_second(50).burst(10);

    type Limiter = Arc<RateLimiter<Arc<ManualClock>>>;

    async fn too_many(err: RateLimitError<Infallible>) -> Response {
        match err.retry_after() {
            Some(wait) => {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let headers = [(RETRY_AFTER, HeaderValue::from(secs))];
                (StatusCode::TOO_MANY_REQUESTS, headers).into_response()
            }
            None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        }
    }

    async fn hit(State(hits): State<Arc<AtomicUsize>>) -> &'static str {
        hits.fetch_add(1, SeqCst);
        "ok"
    }

    /// `/quote` (unlimited) and `/search` (behind `inbound`), each counting
    /// what reached it.
    async fn start(inbound: Limiter) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (quotes, searches) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let app = Router::new()
            .route("/quote", get(hit).with_state(quotes.clone()))
            .route(
                "/search",
                get(hit).with_state(searches.clone()).route_layer(
                    ServiceBuilder::new()
                        .layer(HandleErrorLayer::new(too_many))
                        .layer(RateLimitLayer::new(inbound)),
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (base, quotes, searches)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_held_to_50_per_second_and_a_server_shedding_with_429() {
        tokio::time::timeout(HANG_GUARD, async {
            let clock = Arc::new(ManualClock::new());
            let inbound = Arc::new(RateLimiter::new("search", RATE, clock.clone()));
            let (base, quotes, searches) = start(inbound.clone()).await;
            let client = reqwest::Client::builder().no_proxy().build().unwrap();

            // Outbound: 30 requests at once through a client held to the
            // rate, each through its own clone of the service.
            let provider = Arc::new(RateLimiter::new("provider", RATE, clock.clone()));
            let http = client.clone();
            let send = RateLimitLayer::new(provider.clone())
                .max_wait(Duration::from_secs(2))
                .layer(tower::service_fn(move |url: String| {
                    let http = http.clone();
                    async move { http.get(url).send().await.map(|r| r.status().as_u16()) }
                }));
            let (tx, mut done) = mpsc::unbounded_channel();
            for _ in 0..30 {
                let (send, url, tx) = (send.clone(), format!("{base}/quote"), tx.clone());
                tokio::spawn(async move { tx.send(send.oneshot(url).await).unwrap() });
            }
            // The burst reaches the server at once; the other 20 wait.
            for _ in 0..10 {
                assert!(matches!(done.recv().await.unwrap(), Ok(200)));
            }
            assert_eq!(quotes.load(SeqCst), 10);
            assert_eq!(provider.waiting(), 20);
            // Each 100 ms lets 5 more through, never more.
            for step in 1..=4 {
                clock.advance(Duration::from_millis(100));
                for _ in 0..5 {
                    assert!(matches!(done.recv().await.unwrap(), Ok(200)));
                }
                assert_eq!(quotes.load(SeqCst), 10 + 5 * step);
                assert_eq!(provider.waiting(), 20 - 5 * step);
            }
            let m = provider.metrics();
            assert_eq!((m.admitted, m.waited, m.refused), (30, 20, 0));

            // Inbound: 25 at once against the same rate: the burst is
            // answered, the rest get 429 + Retry-After: 1, and the handler
            // runs only for the admitted.
            let tasks: Vec<_> = (0..25)
                .map(|_| {
                    let (client, url) = (client.clone(), format!("{base}/search"));
                    tokio::spawn(async move {
                        let r = client.get(url).send().await.unwrap();
                        let retry = r
                            .headers()
                            .get("retry-after")
                            .map(|v| v.to_str().unwrap().to_owned());
                        (r.status().as_u16(), retry)
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for t in tasks {
                answers.push(t.await.unwrap());
            }
            let ok = answers.iter().filter(|a| a.0 == 200).count();
            let shed = answers
                .iter()
                .filter(|a| a.0 == 429 && a.1.as_deref() == Some("1"))
                .count();
            assert_eq!((ok, shed), (10, 15));
            assert_eq!(searches.load(SeqCst), 10);
            let m = inbound.metrics();
            assert_eq!((m.admitted, m.refused), (10, 15));
        })
        .await
        .expect("test hung");
    }
}
