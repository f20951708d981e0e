//! Act 10, who gets a slot under overload, on a server of its own: one FIFO
//! bulkhead against a `PartitionedBulkhead` with guaranteed shares per
//! class of caller. Counts, not times: every step waits for the server's
//! own counters.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use tower::ServiceBuilder;
use watertight::clock::TokioClock;
use watertight::partition::PartitionedBulkhead;
use watertight::tower::{BulkheadError, BulkheadLayer, PartitionLayer, PartitionServiceError};
use watertight::Bulkhead;

use crate::{header, net};

/// Act 10's partitioned slots: checkout promised 3, export 2.
static SEARCH_CLASSES: PartitionedBulkhead<TokioClock, 2> =
    PartitionedBulkhead::new("search", [("checkout", 3), ("export", 2)], TokioClock);
const CHECKOUT_CALLS: usize = 3;
const EXPORT_CALLS: usize = 8;

/// Act 10's server state: a gate the act opens (a handler holds its slot
/// until it gets a permit), and who reached the handler, in order.
struct Held {
    gate: tokio::sync::Semaphore,
    reached: std::sync::Mutex<Vec<&'static str>>,
}

fn class_of(headers: &HeaderMap) -> &'static str {
    match headers.get("x-class") {
        Some(v) if v == "checkout" => "checkout",
        _ => "export",
    }
}

async fn held_search(State(held): State<Arc<Held>>, headers: HeaderMap) -> &'static str {
    held.reached
        .lock()
        .expect("reached")
        .push(class_of(&headers));
    held.gate.acquire().await.expect("gate").forget();
    "results"
}

/// The partitioned route's refusal: 503 under load, 500 for a class the
/// bulkhead has not.
async fn shed_class(err: PartitionServiceError<Infallible>) -> StatusCode {
    if err.is_refusal() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

async fn shed_fifo(_: BulkheadError<Infallible>) -> StatusCode {
    StatusCode::SERVICE_UNAVAILABLE
}

/// Waits (at most 5 s) until `done` holds, checking every millisecond.
async fn until(mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One run of act 10 on `path`: the export calls, then the checkout calls,
/// then the first five let go; who reached the handler next, every call's
/// status, and what `when_full` read once the first five held every slot
/// (before any was let go, so that what happens after cannot move it).
async fn act_10_run(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    held: &Held,
    waiting: impl Fn() -> usize,
    when_full: impl FnOnce() -> usize,
) -> (Vec<&'static str>, Vec<u16>, usize) {
    let send = |class: &'static str| {
        let request = client.get(format!("{base}{path}")).header("x-class", class);
        tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) })
    };
    let mut calls: Vec<_> = (0..EXPORT_CALLS).map(|_| send("export")).collect();
    until(|| held.reached.lock().expect("reached").len() == 5 && waiting() == EXPORT_CALLS - 5)
        .await;
    let at_full = when_full();
    calls.extend((0..CHECKOUT_CALLS).map(|_| send("checkout")));
    until(|| waiting() == EXPORT_CALLS - 5 + CHECKOUT_CALLS).await;
    held.gate.add_permits(5);
    until(|| held.reached.lock().expect("reached").len() == 10).await;
    let next = held.reached.lock().expect("reached")[5..10].to_vec();
    held.gate.add_permits(EXPORT_CALLS + CHECKOUT_CALLS);
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.expect("request task").unwrap_or(0));
    }
    (next, statuses, at_full)
}

/// Act 10: who gets the slots under overload, one FIFO queue against
/// classes with guaranteed shares.
pub async fn act_10() {
    let fifo_held = Arc::new(Held {
        gate: tokio::sync::Semaphore::new(0),
        reached: std::sync::Mutex::default(),
    });
    let parts_held = Arc::new(Held {
        gate: tokio::sync::Semaphore::new(0),
        reached: std::sync::Mutex::default(),
    });
    let fifo = Arc::new(Bulkhead::new("search", 5, TokioClock));
    let app = Router::new()
        .route(
            "/fifo/search",
            get(held_search).with_state(fifo_held.clone()).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(shed_fifo))
                    .layer(BulkheadLayer::new(fifo.clone()).max_wait(Duration::from_secs(5))),
            ),
        )
        .route(
            "/classes/search",
            get(held_search).with_state(parts_held.clone()).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(shed_class))
                    .layer(
                        PartitionLayer::new(&SEARCH_CLASSES, |req: &axum::extract::Request| {
                            usize::from(class_of(req.headers()) == "export")
                        })
                        .max_wait(Duration::from_secs(5)),
                    ),
            ),
        );
    let base = net::serve(app).await;
    let client = net::client();

    header(
        "Act 10: who gets a slot under overload — one FIFO queue, then checkout 3 / export 2",
        &format!(
            "GET /search, 5 slots, each call held until the act lets it go; {EXPORT_CALLS} export calls \
             (5 in, 3 waiting), then {CHECKOUT_CALLS} checkout calls (waiting); then the first 5 let go"
        ),
    );
    let (next, statuses, _) = act_10_run(
        &client,
        &base,
        "/fifo/search",
        &fifo_held,
        || fifo.waiting(),
        || 0,
    )
    .await;
    let count = |v: &[&str], c: &str| v.iter().filter(|&&x| x == c).count();
    println!(
        "  one Bulkhead of 5 (FIFO):          the 5 freed slots went to {} export, {} checkout; {} of {} answered 200",
        count(&next, "export"),
        count(&next, "checkout"),
        statuses.iter().filter(|&&s| s == 200).count(),
        statuses.len()
    );
    let waiting = || {
        (0..2)
            .filter_map(|c| SEARCH_CLASSES.class_metrics(c))
            .map(|m| m.waiting)
            .sum()
    };
    // What export had borrowed while its five held every slot: read then,
    // since an export let in by the final release may borrow once more.
    let borrowed = || SEARCH_CLASSES.class_metrics(1).expect("export").borrowed;
    let (next, statuses, borrowed) = act_10_run(
        &client,
        &base,
        "/classes/search",
        &parts_held,
        waiting,
        borrowed,
    )
    .await;
    println!(
        "  PartitionedBulkhead (3 / 2):       the 5 freed slots went to {} export, {} checkout; {} of {} answered 200",
        count(&next, "export"),
        count(&next, "checkout"),
        statuses.iter().filter(|&&s| s == 200).count(),
        statuses.len()
    );
    println!(
        "  -> with one queue checkout waits behind the export calls that came first; with partitions \
         it gets back its 3 slots, which export had borrowed ({borrowed} borrowed), ahead of them"
    );
}
