//! The tour's server and client (`examples/tour.rs`) over real HTTP: an axum
//! server on 127.0.0.1, a `reqwest` client, a bulkhead per system.
//!
//! These tests assert counts and order only, never latencies: the slow
//! endpoint does not sleep, it blocks on a gate (a semaphore with no permits)
//! until the test opens it, and reports each arrival on a channel, so every
//! step waits for an event, not for time to pass.
#![cfg(not(loom))]
#![cfg(feature = "tokio")]

use std::future::{poll_fn, Future};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::Router;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use watertight::clock::TokioClock;
use watertight::{AcquireError, Bulkhead, OwnedPermit};

/// A guard against hangs only (a regression fails instead of blocking CI);
/// nothing is asserted about how long anything takes.
const HANG_GUARD: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct Gate {
    /// Each shipping request reports its zip code here on arrival.
    arrivals: mpsc::UnboundedSender<String>,
    /// Each shipping request then waits for one permit of this semaphore.
    open: Arc<Semaphore>,
}

async fn inventory(Path(sku): Path<String>) -> String {
    format!(r#"{{"sku":"{sku}","in_stock":42}}"#)
}

async fn shipping_rate(State(gate): State<Gate>, RawQuery(query): RawQuery) -> String {
    let zip = query
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("zip_code=")))
        .unwrap_or("")
        .to_owned();
    gate.arrivals.send(zip.clone()).expect("test is listening");
    gate.open.acquire().await.expect("gate open").forget();
    format!(r#"{{"zip_code":"{zip}","rate_cents":899}}"#)
}

struct Server {
    base: String,
    arrivals: mpsc::UnboundedReceiver<String>,
    open: Arc<Semaphore>,
    client: reqwest::Client,
}

/// The tour's two endpoints on a random free loopback port, the slow one gated.
async fn start() -> Server {
    let (tx, arrivals) = mpsc::unbounded_channel();
    let open = Arc::new(Semaphore::new(0));
    let gate = Gate {
        arrivals: tx,
        open: open.clone(),
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
