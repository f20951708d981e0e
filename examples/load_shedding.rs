//! Inbound load shedding: accept as many requests as you can handle and
//! answer the rest at once with 503 and `Retry-After`. Better for everyone
//! than slow answers to all: the refused clients retry later or degrade,
//! the admitted ones are answered in time.
//!
//! An axum server on 127.0.0.1 with two guarded routes:
//!
//! - `/report`: slow (300 ms), behind a bulkhead of `LIMIT` slots with a
//!   50 ms slot wait (long enough for a quick request to free a slot, too
//!   short to become a queue); a request that gets no slot
//!   is answered 503 with `Retry-After: 1` at once;
//! - `/quote`: calls a flaky upstream (every request fails with a 502 while
//!   it is "down"), behind a circuit breaker whose classifier counts 5xx as
//!   failures and 4xx as answers; once open, it answers 503 with
//!   `Retry-After` = the breaker's `retry_after` rounded up to whole seconds.
//!
//! Then it fires requests at both with reqwest and prints the outcome counts.
//!
//! ```text
//! cargo run --example load_shedding --features tower,tokio
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::ServiceBuilder;
use watertight::clock::TokioClock;
use watertight::tower::{BreakerError, BreakerLayer, BulkheadError, BulkheadLayer};
use watertight::{BreakerConfig, Bulkhead, CircuitBreaker, Outcome};

/// Slots on the slow route: how many requests it serves at once with an
/// acceptable latency. Measure it for a real service (a few hundred on one
/// worker is common for a Python or Node server); 4 here, to see the limit.
const LIMIT: usize = 4;
/// Requests fired at it at once.
const BURST: usize = 10;

/// `Retry-After` in whole seconds, rounded up: a client told "0" would
/// come back before the breaker lets anything through.
fn whole_seconds_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn unavailable(retry_after: u64, why: String) -> Response {
    let headers = [(header::RETRY_AFTER, retry_after.to_string())];
    (StatusCode::SERVICE_UNAVAILABLE, headers, why).into_response()
}

/// Bulkhead refusal -> 503, `Retry-After: 1`: come back in a second.
async fn shed(err: BulkheadError<Infallible>) -> Response {
    match err {
        BulkheadError::Rejected(why) => unavailable(1, why.to_string()),
        BulkheadError::Inner(never) => match never {},
    }
}

/// Breaker refusal -> 503, `Retry-After` from the breaker when it has one.
async fn refused(err: BreakerError<Infallible>) -> Response {
    match err {
        BreakerError::Rejected(why) => {
            let secs = why.retry_after().map_or(1, whole_seconds_up);
            unavailable(secs, why.to_string())
        }
        BreakerError::Inner(never) => match never {},
    }
}

async fn report() -> &'static str {
    tokio::time::sleep(Duration::from_millis(300)).await;
    "report"
}

async fn quote(State(down): State<Arc<AtomicBool>>) -> Response {
    if down.load(Ordering::Relaxed) {
        (StatusCode::BAD_GATEWAY, "upstream failed").into_response()
    } else {
        "42.00".into_response()
    }
}

/// A 5xx is the system failing; a 4xx is an answer (the caller's mistake).
fn classify(r: &Result<Response, Infallible>) -> Outcome {
    match r {
        Ok(resp) if resp.status().is_server_error() => Outcome::Failure,
        _ => Outcome::Success,
    }
}

async fn fire(client: &reqwest::Client, url: &str, n: usize) -> BTreeMap<String, usize> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (client, url) = (client.clone(), url.to_owned());
        tasks.push(tokio::spawn(async move {
            let resp = client.get(url).send().await.expect("request");
            let retry = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(|v| format!(" (Retry-After: {v})"))
                .unwrap_or_default();
            format!("{}{retry}", resp.status().as_u16())
        }));
    }
    let mut counts = BTreeMap::new();
    for t in tasks {
        *counts.entry(t.await.expect("task")).or_insert(0) += 1;
    }
    counts
}

#[tokio::main]
async fn main() {
    let slots = Arc::new(Bulkhead::new("report", LIMIT, TokioClock));
    let breaker: Arc<CircuitBreaker<TokioClock, 10>> = Arc::new(CircuitBreaker::new(
        "quote",
        BreakerConfig::builder()
            .window_size(10)
            .minimum_calls(5)
            .failure_rate_threshold(50.0)
            .open_duration(Duration::from_millis(2500))
            .build()
            .expect("breaker config"),
        TokioClock,
    ));
    let down = Arc::new(AtomicBool::new(false));

    let app = Router::new()
        .route(
            "/report",
            get(report).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(shed))
                    .layer(BulkheadLayer::new(slots.clone()).max_wait(Duration::from_millis(50))),
            ),
        )
        .route(
            "/quote",
            get(quote).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(BreakerLayer::new(breaker.clone()).classify(classify)),
            ),
        )
        .with_state(down.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");

    println!("{BURST} requests at once to /report ({LIMIT} slots, 50 ms slot wait, 300 ms each):");
    for (outcome, n) in fire(&client, &format!("{base}/report"), BURST).await {
        println!("  {n:>2} x {outcome}");
    }
    let m = slots.metrics();
    println!(
        "  bulkhead: peak in flight {}, rejected {}",
        m.peak_in_flight,
        m.rejected()
    );

    println!("/quote while the upstream is down, one request at a time:");
    down.store(true, Ordering::Relaxed);
    let mut counts = BTreeMap::<String, usize>::new();
    for _ in 0..8 {
        for (outcome, n) in fire(&client, &format!("{base}/quote"), 1).await {
            *counts.entry(outcome).or_insert(0) += n;
        }
    }
    for (outcome, n) in counts {
        println!("  {n:>2} x {outcome}");
    }
    println!("  breaker: {:?}", breaker.state());
}
