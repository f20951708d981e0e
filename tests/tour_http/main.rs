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

/// The storefront's and the retries' request budget, as the tour's.
const BUDGET: Duration = Duration::from_millis(1500);
/// Pricing's (and search's) call timeout, as the tour's: well inside the
/// budget.
const PRICING_TIMEOUT: Duration = Duration::from_millis(300);

mod breaker;
mod retries;
mod storefront;

/// Act 9's server, with the limiters on a `ManualClock` that only the test
/// moves: which requests are admitted is a fact of the test.
#[cfg(feature = "tower")]
mod rate;
