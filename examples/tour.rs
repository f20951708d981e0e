//! A tour of the bulkhead, the circuit breaker and the per-system policy over
//! real HTTP: one slow dependency, one fast one, what a concurrency limit does
//! to the fast one's callers, what a breaker does when the slow one goes
//! down, and how a handler with a request budget still answers in time when
//! one of the systems it calls degrades; then the same limits as tower
//! middleware and as Prometheus metrics, retries within the budget, a
//! rate limit both ways, classes of callers with guaranteed shares, hedged
//! requests, a budget that travels across services, and a page served
//! from a cache, marked with its age, while a fault injector fails the
//! system behind it.
//!
//! Run: `cargo run --example tour --features tokio,tower,metrics,http,chaos`
//!
//! The program starts a small axum server on `127.0.0.1` (a random free
//! port, loopback only) with two endpoints, then calls them with one shared
//! `reqwest::Client`, each call a real HTTP request made through a
//! [`Bulkhead`] (acts 1–3) or a [`CircuitBreaker`] (act 4):
//!
//! - `GET /inventory/{sku}`: healthy, about 50 ms;
//! - `GET /shipping-rate?zip_code=…`: degraded, 400 ms — slow, not failing
//!   (until act 4 switches it to answering 503).
//!
//! Act 5 adds a storefront on the same server, which calls two more
//! endpoints of it over HTTP, each through its own [`Policy`]:
//!
//! - `GET /stock/{sku}`: healthy, about 50 ms;
//! - `GET /pricing/{sku}`: 50 ms, until act 5 makes it answer in 3 s;
//! - `GET /product/{sku}`: asks stock and pricing at once;
//! - `GET /checkout/{sku}`: asks pricing, then stock.
//!
//! Acts 1–3 are the classic demonstration of the bulkhead pattern (the
//! pattern of that name in Microsoft's Azure Architecture Center): a
//! checkout that needs only a quick inventory lookup hangs because a
//! degraded shipping-rate API, which it does not even care about, holds
//! every worker of a shared pool. The usual numbers — a 2 s slow call, a
//! 50 ms fast one, a pool of 4, a 1 s max wait — are scaled down five times
//! so the acts take about two seconds: the slow call becomes 400 ms and the
//! max wait 200 ms (still half a slow call); the fast call stays at 50 ms.
//!
//! | act | what it shows | expected |
//! |---|---|---|
//! | 1. one shared limit of 4, waits unbounded; 8 shipping, then 2 inventory | starvation: the fast calls queue behind every slow one | shipping ≈ 400 ms ×4, 800 ms ×4; inventory ≈ 850 ms ×2 (two slow calls + one fast), about 17 times its own time |
//! | 2. same traffic, one bulkhead per system (shipping 4, inventory 2) | isolation: the slow system floods only its own compartment | inventory ≈ 50 ms ×2; shipping unchanged |
//! | 3. shipping 3, inventory 5, max wait 200 ms; 10 shipping + 4 inventory | failing fast: the overflow is refused after a short wait instead of queueing | shipping 3 ok ≈ 400 ms, 7 rejected ≈ 200 ms; inventory 4 ok ≈ 50 ms |
//!
//! Latency is what the *caller* observes: from the moment the call was
//! submitted (its task spawned) to the moment it finished, recorded inside
//! the task as it finishes. There are two classic ways to get this wrong:
//! starting the clock when the work starts (which hides the time spent
//! queueing for a slot — the very thing act 1 is about), and reading the end
//! time when the caller gets round to looking at a result, in submission
//! order (which charges a fast call for the slow one looked at before it).
//!
//! Act 4 is the circuit breaker: the slow endpoint starts answering 503 (a
//! flag in the server's state); the client calls it through a breaker
//! (window 10, minimum 5 calls, failure rate 50 %, open 500 ms — the default
//! 30 s scaled down — and 3 half-open probes), whose classifier counts a 5xx
//! or no answer at all as a failure and any other status as an answer. The breaker opens
//! after the minimum 5 calls; the next calls are refused at once with a
//! retry hint, and the server's request counter shows none of them reached
//! it; the server recovers; after the open wait, 3 probes pass and it
//! closes. It is printed as a timeline, one line per event, in ms since the
//! act began: what happens, and in which order, is the same every run; the
//! milliseconds are measured.
//!
//! Act 5 is a request budget: each storefront request has 1.5 s
//! ([`Deadline::after`]) and calls each system through its policy with
//! `call_within_with(&budget, …)` (act 4's classifier), so a slot wait and a
//! call each get the smaller of their own limit and what is left of the
//! budget. Pricing degrades to 3 s answers; its policy cuts each call at its
//! 300 ms call timeout — a failure for its breaker (window 4, minimum 4,
//! 50 %, open 1 s) — and the product page answers with stock and "price
//! unavailable". Once two of pricing's last four calls have failed, its
//! breaker opens: pages come back in stock's 50 ms, the price part carrying
//! the breaker's retry hint, and no request goes to pricing; a checkout,
//! which cannot go on without a price, answers 503 at once with
//! `Retry-After` from [`watertight::policy::Error::retry_after`]. Stock serves every
//! request it is asked, unaffected. The client prints each request as it was
//! sent: status, the time it took (measured, not asserted) and the body.
//!
//! Act 6 is the integrations, briefly (`examples/load_shedding.rs` and
//! `examples/prometheus.rs` show each at length). Inbound load shedding —
//! better a quick 503 to some than slow answers to all: the server's
//! `GET /report` (200 ms) sits behind a
//! [`BulkheadLayer`] of 2 slots that fails fast, and a refusal is answered
//! 503 with `Retry-After: 1` by axum's `HandleErrorLayer`; 5 requests at once
//! get 2 × 200 and 3 × 503 at once (the handler is not called for those).
//! Then a few lines of Prometheus text from a real exporter
//! (`metrics-exporter-prometheus`): the exporters of act 5's two policies
//! and of the report bulkhead were registered once at start-up, on a local
//! recorder, and are updated right before rendering, as a `/metrics`
//! handler would.
//!
//! Act 7 is one limit across processes (feature `redis`, and a
//! `redis-server` on PATH; without either the act is skipped with one line
//! saying how to enable it): four worker processes with a bulkhead of 20
//! each protect their neighbour with eighty slots, not twenty. The tour starts a neighbour (an
//! axum server on 127.0.0.1 that counts calls in flight), a redis-server of
//! its own on a Unix socket, and four worker processes (the tour's own
//! binary again, in a worker role), each firing 40 calls at once: through a
//! local `Bulkhead` of 20 each, the neighbour sees 80 at once; through one
//! `watertight::redis::GlobalBulkhead` of 20, at most 20. It is
//! `examples/global_limit.rs`, whose code (`examples/global_limit/demo.rs`)
//! the tour includes; every process it starts is stopped at its end.
//!
//! Act 8 is retries within the request budget, on a server of its own
//! (`GET /search/{q}`, 50 ms), through a policy whose calls are marked
//! idempotent ([`Policy::call_idempotent`], `.within(&budget)`; the
//! default retry config: 2 attempts, backoff 50 ms doubling to 1 s with
//! full jitter, a budget of 10 tokens getting 10 % of one back per
//! success). The server holds the first request 3 s: the policy's 300 ms
//! call timeout cuts it, and the call is retried once, after a jittered
//! backoff, well inside its 1.5 s budget. Then search goes down (503 at
//! once) and 30 calls are made one after another: the first failures are
//! retried, until the budget is down to half its tokens; from there on a
//! failed call is not retried (its breaker judges only after 50 calls, so
//! that the budget alone is at work here). The same 30 calls in a loop
//! that retries 3 times with no delay and no budget send four times as
//! many requests. The counts are the same every run (the jitter is
//! seeded and the calls are made one at a time); the milliseconds are
//! measured.
//!
//! Act 9 is a rate limit, both ways, on a server of its own. Outbound: a
//! client held to 50 requests a second with a burst of 10 (a
//! [`RateLimiter`] behind `watertight::tower::RateLimitLayer::max_wait`,
//! a clone of the service per request) sends 30 requests at once; the
//! server counts what reached it and when: 10 at once, then one every
//! 20 ms, never more by any instant than the GCRA bound (`burst +
//! elapsed × rate`). Inbound: `GET /search` sits behind a fail-fast
//! `RateLimitLayer` of 50/s with a burst of 10, a refusal answered 429 with
//! `Retry-After` (the limiter's exact hint, rounded up to whole seconds);
//! 25 requests at once get the burst's 10 answered and the rest 429, and
//! the handler runs only for the admitted. The counts are the limiter's;
//! the milliseconds are measured (a burst that takes longer than 20 ms to
//! arrive earns one more cell).

//!
//! Act 10 is who gets a slot under overload, on a server of its own:
//! `GET /search` with 5 slots in front of it, once as one FIFO bulkhead and
//! once as a `PartitionedBulkhead` (checkout promised 3, export 2,
//! `tower::PartitionLayer`, the class from an `x-class` header). The
//! handler holds each call until the act lets it go. 8 export calls come
//! first (5 take every slot, 3 wait), then 3 checkout calls (they wait);
//! the act lets the first 5 go and counts who got the freed slots: with
//! one queue, the export calls that came first; with partitions, checkout
//! gets its 3 back, ahead of the export calls that waited longer. Counts,
//! not times: every step waits for the server's own counters.
//!
//! Act 11 is hedged requests, on a server of its own: three replicas of
//! `GET /replica/{n}/{i}` answering in 20 ms, except that replica 2 holds
//! 1 in 10 of the requests it gets first for 2 s. 90 calls one after
//! another, request `i` to replica `i mod 3`: first through `Policy::call`
//! (a 300 ms call timeout), every latency recorded into a
//! `LatencyHistogram`; then through `Policy::call_hedged` with the delay at
//! that histogram's 95th percentile, a hedge going to the next replica.
//! It prints the p99 of each and the extra requests the hedges cost.
//!
//! Act 12 is the request budget across three services (feature `http`;
//! skipped with one line without it): A → B → C on loopback, A with
//! 300 ms, C with a 1 s job in 10 ms steps that checks its `Deadline`
//! before each. With `OutboundDeadlineLayer` (what is left minus a 25 ms
//! margin, in `x-request-timeout-ms`) and `InboundDeadlineLayer` on each
//! hop, C stops before A's 300 ms are up; with the header off, A gives up
//! just the same and C works its full second for nobody
//! (`examples/tour/hops.rs`).
//!
//! Act 13 is the stale-if-error cache, with faults injected (feature
//! `chaos`; skipped with one line without it): a pricing server whose
//! route sits behind a `tower::ChaosLayer` (a seeded `chaos::Injector`,
//! off at first), and a storefront whose `GET /product/{sku}` asks it over
//! HTTP through a `tower::StaleCacheLayer` over a `tower::PolicyLayer`
//! (window 4, opens at 50 % failed, open 1.5 s, 1 probe). Two pages while
//! pricing is healthy record its prices; then the injector answers every
//! request 503: two pages get the cached price with its age (the layer
//! passes a failure on; the page serves the cache's price itself) and open
//! the breaker; four more are refused without a request, the layer serving
//! the cached price with its age (a product never priced: 503 with
//! `Retry-After`); then the injector off, the open wait over, a probe
//! closes the breaker and the prices are fresh. It prints a row per page
//! (injector, whether pricing was asked, the breaker after, the page) and
//! the counts: what reached pricing, what the breaker kept from it, what
//! the cache served. The counts are the same every run; the ages are
//! measured on the tour's clock, a page every 200 ms
//! (`examples/tour/degrade.rs`).

#[cfg(feature = "chaos")]
#[path = "tour/degrade.rs"]
mod degrade;
#[cfg(feature = "redis")]
#[path = "global_limit/demo.rs"]
mod global_limit;
#[cfg(feature = "http")]
#[path = "tour/hops.rs"]
mod hops;
#[path = "tour/net.rs"]
mod net;

use std::convert::Infallible;
use std::fmt::Display;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{HeaderName, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower::{Layer, ServiceBuilder, ServiceExt};
use watertight::breaker::{
    OnTransition, Outcome as BreakerOutcome, State as BreakerState, Transition,
};
use watertight::clock::{self, Clock, TokioClock};
use watertight::deadline::Deadline;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};
use watertight::metrics::{BulkheadExporter, PolicyExporter};
use watertight::partition::PartitionedBulkhead;
use watertight::policy::ErrorKind;
use watertight::rate::{Quota, RateLimiter};
use watertight::retry::RetryConfig;
use watertight::tower::{
    BulkheadError, BulkheadLayer, PartitionLayer, PartitionServiceError, RateLimitError,
    RateLimitLayer,
};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CallError, CircuitBreaker};
use watertight::{OwnedPermit, Policy, PolicyConfig, Rejection};

/// The slow dependency's latency (2 s in the usual demonstration, ÷ 5).
const SLOW: Duration = Duration::from_millis(400);
/// The fast dependency's latency: a quick lookup.
const FAST: Duration = Duration::from_millis(50);
/// The longest a caller waits for a slot in act 3: half a slow call (1 s ÷ 5).
const MAX_WAIT: Duration = Duration::from_millis(200);
/// How long act 4's breaker stays open before probes may pass
/// ([`BreakerConfig::DEFAULT`]'s 30 s, scaled down).
const OPEN_WAIT: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------- the server

/// A JSON body with its content type.
type Json = ([(HeaderName, &'static str); 1], String);

async fn inventory(Path(sku): Path<String>) -> Json {
    tokio::time::sleep(FAST).await;
    json(format!(r#"{{"sku":"{sku}","in_stock":42}}"#))
}

/// The shipping service's switches (act 4 flips them) and its request count.
#[derive(Default)]
struct Shipping {
    /// Down: every request is answered 503 at once.
    down: AtomicBool,
    /// Healthy: answers in `FAST` instead of `SLOW` (after act 4's recovery).
    healthy: AtomicBool,
    /// Requests that reached the handler, answered or not.
    hits: AtomicUsize,
}

async fn shipping_rate(
    State(shipping): State<Arc<Shipping>>,
    RawQuery(query): RawQuery,
) -> Result<Json, (StatusCode, Json)> {
    shipping.hits.fetch_add(1, SeqCst);
    if shipping.down.load(SeqCst) {
        let body = r#"{"error":"carrier API unavailable"}"#;
        return Err((StatusCode::SERVICE_UNAVAILABLE, json(body.to_owned())));
    }
    let healthy = shipping.healthy.load(SeqCst);
    tokio::time::sleep(if healthy { FAST } else { SLOW }).await;
    let zip = query
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("zip_code=")))
        .unwrap_or("");
    Ok(json(format!(r#"{{"zip_code":"{zip}","rate_cents":899}}"#)))
}

fn json(body: String) -> Json {
    ([(CONTENT_TYPE, "application/json")], body)
}

// ---------------------------------------------------------------- act 5's server

/// The storefront's budget for one request, from its SLA: answer within 1.5 s.
const BUDGET: Duration = Duration::from_millis(1500);
/// Pricing's latency once it degrades: far past its call timeout.
const PRICING_SLOW: Duration = Duration::from_secs(3);
/// How long pricing's breaker stays open before a probe may pass.
const PRICING_OPEN: Duration = Duration::from_millis(1000);

/// One of act 5's downstream systems: its switch and its request count.
#[derive(Default)]
struct Backend {
    /// Degraded: answers in `PRICING_SLOW` instead of `FAST`.
    slow: AtomicBool,
    /// Requests that reached it, answered or not.
    hits: AtomicUsize,
}

impl Backend {
    async fn serve(&self, body: String) -> Json {
        self.hits.fetch_add(1, SeqCst);
        let slow = self.slow.load(SeqCst);
        tokio::time::sleep(if slow { PRICING_SLOW } else { FAST }).await;
        json(body)
    }

    fn hits(&self) -> usize {
        self.hits.load(SeqCst)
    }
}

/// The two systems the storefront calls: on the same demo server, reached
/// over HTTP like any other.
#[derive(Default)]
struct Backends {
    pricing: Backend,
    stock: Backend,
}

async fn pricing(State(backends): State<Arc<Backends>>, Path(_sku): Path<String>) -> Json {
    let body = r#"{"price_cents":1299}"#.to_owned();
    backends.pricing.serve(body).await
}

async fn stock(State(backends): State<Arc<Backends>>, Path(_sku): Path<String>) -> Json {
    let body = r#"{"in_stock":42}"#.to_owned();
    backends.stock.serve(body).await
}

/// The storefront's side: its own HTTP client and one policy per system it
/// calls, each named after the system.
struct Storefront {
    client: reqwest::Client,
    base: String,
    stock: Policy<TokioClock, 8>,
    pricing: Policy<TokioClock, 8>,
}

/// Stock: 8 calls at once, a slot within 100 ms, 1 s per call, the default
/// 5xx-or-no-answer breaker over a window of 8.
fn stock_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(4)
        .build()
        .expect("stock breaker");
    PolicyConfig::builder(8)
        .max_wait(Duration::from_millis(100))
        .call_timeout(Duration::from_secs(1))
        .breaker(breaker)
        .build()
        .expect("stock policy")
}

/// Pricing: 4 calls at once, a slot within 50 ms, 300 ms per call — well
/// under the request budget, so that a slow answer is pricing's failure, not
/// the caller running out of time — and a breaker that opens once 2 of its
/// last 4 calls failed.
fn pricing_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(PRICING_OPEN)
        .build()
        .expect("pricing breaker");
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .build()
        .expect("pricing policy")
}

/// What a downstream call came back with: a status and body, or no answer.
type Reply = Result<(reqwest::StatusCode, String), reqwest::Error>;

async fn get_body(client: reqwest::Client, url: String) -> Reply {
    let response = client.get(&url).send().await?;
    let status = response.status();
    Ok((status, response.text().await?))
}

/// As act 4's classifier: a 5xx or no answer is the system failing.
fn classify_reply(reply: &Reply) -> BreakerOutcome {
    match reply {
        Ok((status, _)) if status.is_server_error() => BreakerOutcome::Failure,
        Ok(_) => BreakerOutcome::Success,
        Err(_) => BreakerOutcome::Failure,
    }
}

/// One system's part of an answer: its data, or why it is missing and when
/// to ask again.
enum Part {
    Data(String),
    Unavailable {
        why: &'static str,
        retry_after: Option<Duration>,
    },
}

impl Part {
    fn to_json(&self) -> String {
        match self {
            Part::Data(body) => body.clone(),
            Part::Unavailable {
                why,
                retry_after: Some(hint),
            } => format!(
                r#"{{"unavailable":"{why}","retry_after_ms":{}}}"#,
                ms(*hint)
            ),
            Part::Unavailable { why, .. } => format!(r#"{{"unavailable":"{why}"}}"#),
        }
    }
}

/// One call to a system through its policy, inside the request's budget.
async fn fetch(
    client: &reqwest::Client,
    policy: &Policy<TokioClock, 8>,
    budget: &Deadline<TokioClock>,
    url: String,
) -> Part {
    let call = || get_body(client.clone(), url);
    match policy.call_within_with(budget, call, classify_reply).await {
        Ok((status, body)) if status.is_success() => Part::Data(body),
        Ok(_) => Part::Unavailable {
            why: "error status",
            retry_after: None,
        },
        Err(e) => Part::Unavailable {
            why: match e.kind() {
                ErrorKind::BulkheadFull | ErrorKind::BulkheadClosed => "busy",
                ErrorKind::CircuitOpen(_) => "circuit open",
                ErrorKind::DeadlineExceeded => "timed out",
                _ => "no answer",
            },
            retry_after: e.retry_after(),
        },
    }
}

/// Stock and pricing for `sku`, asked at once, both inside one 1.5 s budget
/// that starts as the request comes in.
async fn look_up(front: &Storefront, sku: &str) -> (Part, Part) {
    let budget = Deadline::after(TokioClock, BUDGET);
    let stock = format!("{}/stock/{sku}", front.base);
    let price = format!("{}/pricing/{sku}", front.base);
    tokio::join!(
        fetch(&front.client, &front.stock, &budget, stock),
        fetch(&front.client, &front.pricing, &budget, price),
    )
}

type Page = (StatusCode, HeaderMap, String);

/// `GET /product/{sku}`: a product page shows what it has. A missing price is
/// a partial answer; only with neither part is it a 503.
async fn product(State(front): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let (stock, price) = look_up(&front, &sku).await;
    let body = format!(
        r#"{{"sku":"{sku}","stock":{},"price":{}}}"#,
        stock.to_json(),
        price.to_json()
    );
    match (&stock, &price) {
        (Part::Unavailable { .. }, Part::Unavailable { .. }) => unavailable([stock, price], body),
        _ => (StatusCode::OK, json_headers(), body),
    }
}

/// `GET /checkout/{sku}`: an order needs a price first, then stock, both
/// inside one 1.5 s budget (stock gets what the price left of it). Without a
/// price, a 503 at once — stock is not asked — with `Retry-After` when
/// pricing's breaker said when to come back.
async fn checkout(State(front): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let budget = Deadline::after(TokioClock, BUDGET);
    let url = format!("{}/pricing/{sku}", front.base);
    let price = fetch(&front.client, &front.pricing, &budget, url).await;
    if let Part::Unavailable { .. } = price {
        let body = format!(r#"{{"sku":"{sku}","price":{}}}"#, price.to_json());
        return unavailable([price], body);
    }
    let url = format!("{}/stock/{sku}", front.base);
    let stock = fetch(&front.client, &front.stock, &budget, url).await;
    let body = format!(
        r#"{{"sku":"{sku}","price":{},"stock":{}}}"#,
        price.to_json(),
        stock.to_json()
    );
    match stock {
        Part::Data(_) => (StatusCode::OK, json_headers(), body),
        Part::Unavailable { .. } => unavailable([stock], body),
    }
}

/// A 503 with the latest retry hint of the missing parts as `Retry-After`
/// (whole seconds, rounded up).
fn unavailable<const K: usize>(parts: [Part; K], body: String) -> Page {
    let mut headers = json_headers();
    let hint = parts
        .iter()
        .filter_map(|p| match p {
            Part::Unavailable { retry_after, .. } => *retry_after,
            Part::Data(_) => None,
        })
        .max();
    if let Some(hint) = hint {
        let secs = hint.as_secs() + u64::from(hint.subsec_nanos() > 0);
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    (StatusCode::SERVICE_UNAVAILABLE, headers, body)
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers
}

// ---------------------------------------------------------------- act 6's server

/// How long `GET /report` takes: a slow endpoint worth protecting.
const REPORT: Duration = Duration::from_millis(200);
/// How many reports the server makes at once; the rest are shed.
const REPORT_SLOTS: usize = 2;

async fn report() -> Json {
    tokio::time::sleep(REPORT).await;
    json(r#"{"report":"ready"}"#.to_owned())
}

/// The bulkhead layer's refusal, as a load-shedding server answers it: 503
/// at once, come back in a second.
async fn shed(err: BulkheadError<Infallible>) -> Response {
    match err {
        BulkheadError::Rejected(why) => {
            let headers = [(RETRY_AFTER, HeaderValue::from_static("1"))];
            (StatusCode::SERVICE_UNAVAILABLE, headers, why.to_string()).into_response()
        }
        BulkheadError::Inner(never) => match never {},
    }
}

/// Serves every endpoint on a random free loopback port; returns the base URL
/// and the storefront (for its policies' state). `/report` is behind
/// `reports`, as tower middleware.
async fn start_server(
    shipping: Arc<Shipping>,
    backends: Arc<Backends>,
    reports: Arc<Bulkhead<TokioClock>>,
) -> (String, Arc<Storefront>) {
    let (listener, base) = net::listen().await;
    let front = Arc::new(Storefront {
        client: net::client(),
        base: base.clone(),
        stock: Policy::new("stock", stock_policy(), TokioClock).expect("stock policy"),
        pricing: Policy::new("pricing", pricing_policy(), TokioClock).expect("pricing policy"),
    });
    let app = Router::new()
        .route("/inventory/{sku}", get(inventory))
        .route("/shipping-rate", get(shipping_rate))
        .with_state(shipping)
        .merge(
            Router::new()
                .route("/pricing/{sku}", get(pricing))
                .route("/stock/{sku}", get(stock))
                .with_state(backends),
        )
        .merge(
            Router::new()
                .route("/product/{sku}", get(product))
                .route("/checkout/{sku}", get(checkout))
                .with_state(front.clone()),
        )
        .route(
            "/report",
            // Fail fast: no free slot, no handler call, a 503 from `shed`.
            get(report).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(shed))
                    .layer(BulkheadLayer::new(reports)),
            ),
        );
    net::spawn(listener, app);
    (base, front)
}

// ---------------------------------------------------------------- the client

#[derive(Clone, Copy, PartialEq, Eq)]
enum System {
    Shipping,
    Inventory,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Shipping => "shipping",
            System::Inventory => "inventory",
        }
    }
}

/// How long a caller is willing to wait for a slot.
#[derive(Clone, Copy)]
enum MaxWait {
    /// `acquire()` (here its owned form, `acquire_owned()`): as long as it
    /// takes, like a thread pool's queue.
    Unbounded,
    /// `acquire_timeout(d)` (`acquire_owned_timeout(d)`): at most `d` from
    /// submission, then rejected with `TimedOut`.
    AtMost(Duration),
}

/// A caller's place in a bulkhead's queue: resolves to a permit or a rejection.
type Slot = Pin<Box<dyn Future<Output = Result<OwnedPermit<TokioClock>, AcquireError>> + Send>>;

/// The HTTP request itself, made once the caller holds a permit.
async fn request(client: &reqwest::Client, base: &str, system: System, i: usize) {
    let url = match system {
        System::Shipping => format!("{base}/shipping-rate?zip_code=9410{i}"),
        System::Inventory => format!("{base}/inventory/SKU-{i}"),
    };
    let response = client.get(&url).send().await.expect("HTTP request");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.text().await.expect("HTTP response body");
}

/// `calls` calls to `system`, each through `bulkhead`.
struct Traffic {
    system: System,
    calls: usize,
    bulkhead: Arc<Bulkhead<TokioClock>>,
}

struct Outcome {
    system: System,
    result: Result<(), AcquireError>,
    /// From submission to completion, as the caller sees it.
    latency: Duration,
}

/// Submits every call at once, in the order given, each as its own task, and
/// waits for all of them.
async fn burst(
    client: &reqwest::Client,
    base: &str,
    traffic: &[Traffic],
    max_wait: MaxWait,
) -> Vec<Outcome> {
    let mut tasks = Vec::new();
    for t in traffic {
        for i in 0..t.calls {
            // The clock starts at submission, not when the call gets its slot:
            // time spent waiting for a slot is latency the caller feels.
            let submitted = Instant::now();
            let mut slot: Slot = match max_wait {
                MaxWait::Unbounded => Box::pin(t.bulkhead.acquire_owned()),
                MaxWait::AtMost(d) => Box::pin(t.bulkhead.acquire_owned_timeout(d)),
            };
            // Submitting joins the bulkhead's queue now, in submission order,
            // as submitting to a thread pool joins its queue: this first
            // poll takes a free slot or registers the wait. (Left to
            // the spawned tasks, the queue order would be whatever order the
            // runtime's worker threads happen to first poll them in.)
            let first_look = poll_fn(|cx| Poll::Ready(slot.as_mut().poll(cx))).await;
            let (client, base, system) = (client.clone(), base.to_owned(), t.system);
            tasks.push(tokio::spawn(async move {
                let permit = match first_look {
                    Poll::Ready(r) => r,
                    Poll::Pending => slot.await,
                };
                let result = match permit {
                    Ok(_permit) => {
                        // The permit is held until the response is read.
                        request(&client, &base, system, i).await;
                        Ok(())
                    }
                    Err(rejected) => Err(rejected),
                };
                // ...and stops here, as the call completes, not when the
                // loop below gets round to this task (the other classic timing
                // mistake).
                let latency = submitted.elapsed();
                Outcome {
                    system,
                    result,
                    latency,
                }
            }));
        }
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await.expect("call task panicked"));
    }
    outcomes
}

// ---------------------------------------------------------------- the report

fn ms(d: Duration) -> u128 {
    (d.as_micros() + 500) / 1000
}

/// Prints one row per system: counts, then every call's latency, sorted.
fn print_table(outcomes: &[Outcome]) {
    println!(
        "  {:<10} {:>5} {:>4} {:>8}   caller-observed latency, ms from submission (sorted)",
        "system", "calls", "ok", "rejected"
    );
    let mut any_rejected = false;
    for system in [System::Shipping, System::Inventory] {
        let mut mine: Vec<&Outcome> = outcomes.iter().filter(|o| o.system == system).collect();
        mine.sort_by_key(|o| o.latency);
        let ok = mine.iter().filter(|o| o.result.is_ok()).count();
        let rejected = mine.len() - ok;
        any_rejected |= rejected > 0;
        let latencies: String = mine
            .iter()
            .map(|o| {
                let mark = if o.result.is_ok() { ' ' } else { '*' };
                format!("{:>5}{mark}", ms(o.latency))
            })
            .collect();
        println!(
            "  {:<10} {:>5} {:>4} {:>8}  {}",
            system.name(),
            mine.len(),
            ok,
            rejected,
            latencies.trim_end()
        );
    }
    if any_rejected {
        println!("  (* = rejected by its bulkhead: no slot within the max wait)");
    }
}

fn print_metrics(bulkheads: &[&Bulkhead<TokioClock>]) {
    for b in bulkheads {
        let m = b.metrics();
        println!(
            "  bulkhead {:<12} accepted {:>2}, rejected {:>2} (timed out {}), peak in flight {}/{}",
            format!("{:?}:", m.name),
            m.accepted,
            m.rejected(),
            m.rejected_timed_out,
            m.peak_in_flight,
            m.capacity
        );
    }
}

fn header(title: &str, setup: &str) {
    println!();
    println!("== {title}");
    println!("   {setup}");
    println!();
}

/// The slowest successful call of `system` (or rejection, if `ok` is false).
fn worst(outcomes: &[Outcome], system: System, ok: bool) -> Option<Duration> {
    outcomes
        .iter()
        .filter(|o| o.system == system && o.result.is_ok() == ok)
        .map(|o| o.latency)
        .max()
}

fn count(outcomes: &[Outcome], system: System, ok: bool) -> usize {
    outcomes
        .iter()
        .filter(|o| o.system == system && o.result.is_ok() == ok)
        .count()
}

fn bulkhead(name: &'static str, capacity: usize) -> Arc<Bulkhead<TokioClock>> {
    Arc::new(Bulkhead::new(name, capacity, TokioClock))
}

// ---------------------------------------------------------------- act 4's client

/// What the client makes of one HTTP call: the status, or no answer at all.
type Answer = Result<reqwest::StatusCode, reqwest::Error>;

/// The caller decides what a failure is: a 5xx, or no answer at all, is the
/// system failing; any other status (a 404 too) is an answer.
fn classify(answer: &Answer) -> BreakerOutcome {
    match answer {
        Ok(status) if status.is_server_error() => BreakerOutcome::Failure,
        Ok(_) => BreakerOutcome::Success,
        Err(_) => BreakerOutcome::Failure,
    }
}

/// One GET, its body read to the end (so the connection goes back to the pool).
async fn get_status(client: reqwest::Client, url: String) -> Answer {
    let response = client.get(&url).send().await?;
    let status = response.status();
    response.bytes().await?;
    Ok(status)
}

/// Prints events as `+  12 ms  what`, in ms since the act began, by the
/// breaker's clock.
#[derive(Clone, Copy)]
struct Timeline {
    start: clock::Instant,
}

impl Timeline {
    fn start() -> Self {
        Timeline {
            start: TokioClock.now(),
        }
    }

    fn at(&self, t: clock::Instant, what: impl Display) {
        println!(
            "  +{:>4} ms  {what}",
            ms(t.saturating_duration_since(self.start))
        );
    }

    fn now(&self, what: impl Display) {
        self.at(TokioClock.now(), what)
    }
}

fn upper(state: BreakerState) -> String {
    state.as_str().to_uppercase()
}

/// One call through `breaker`, its answer or refusal on the timeline; returns
/// the refusal, if it was refused.
async fn call_through<H: OnTransition>(
    breaker: &CircuitBreaker<TokioClock, 10, H>,
    client: &reqwest::Client,
    url: &str,
    n: usize,
    timeline: Timeline,
) -> Option<Rejection> {
    // `state()` consults the clock: it says half-open once the open wait is
    // over, before the call that begins the episode.
    let probe = if breaker.state() == BreakerState::HalfOpen {
        " (probe)"
    } else {
        ""
    };
    // The classifier sees the answer first and puts it on the timeline; the
    // breaker then records the outcome (and its listener any transition).
    let note = move |answer: &Answer| {
        let outcome = classify(answer);
        let what = match answer {
            Ok(status) => status.as_u16().to_string(),
            Err(e) => format!("no answer ({e})"),
        };
        let verdict = match outcome {
            BreakerOutcome::Success => "success",
            BreakerOutcome::Failure => "failure",
            BreakerOutcome::Ignored => "ignored",
        };
        timeline.now(format_args!("call {n}{probe} -> {what} ({verdict})"));
        outcome
    };
    let request = get_status(client.clone(), url.to_owned());
    match breaker.call_with(request, note).await {
        Ok(_) | Err(CallError::Failed(_)) => None,
        Err(CallError::Rejected(why)) => {
            let reason = match why.retry_after() {
                Some(hint) => format!("open, retry after {:.2} ms", hint.as_secs_f64() * 1e3),
                None => why.to_string(),
            };
            timeline.now(format_args!("call {n} refused: {reason}"));
            Some(why)
        }
    }
}

// ---------------------------------------------------------------- act 5's client

/// What the client got from the storefront.
struct Visit {
    status: reqwest::StatusCode,
    body: String,
    /// From sending the request to reading the whole answer.
    took: Duration,
}

/// One GET of the storefront, on the timeline at the moment it was sent:
/// status, `Retry-After` if any, the time it took as the client saw it, and
/// the body; then pricing's breaker, if it changed state meanwhile.
async fn visit(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    front: &Storefront,
    timeline: Timeline,
) -> Visit {
    let before = front.pricing.breaker().state();
    let sent = TokioClock.now();
    let start = Instant::now();
    let response = client
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("HTTP request");
    let status = response.status();
    let retry = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(|v| format!(", Retry-After: {v}"))
        .unwrap_or_default();
    let body = response.text().await.expect("HTTP response body");
    let took = start.elapsed();
    timeline.at(
        sent,
        format_args!(
            "GET {path:<15} -> {} in {:>3} ms{retry}",
            status.as_u16(),
            ms(took)
        ),
    );
    println!("            {body}");
    let after = front.pricing.breaker().state();
    if after != before {
        let m = front.pricing.breaker().metrics();
        timeline.now(format_args!(
            "pricing breaker {} -> {} (window: {} failures of {} calls)",
            upper(before),
            upper(after),
            m.failed_calls,
            m.calls
        ));
    }
    Visit { status, body, took }
}

// ---------------------------------------------------------------- act 6's client

/// The exporters of act 5's two policies and of act 6's bulkhead, made once.
struct Exporters {
    pricing: PolicyExporter,
    stock: PolicyExporter,
    reports: BulkheadExporter,
}

impl Exporters {
    /// Copies the numbers now into the handles: what a `/metrics` handler
    /// does before rendering.
    fn update(&self, front: &Storefront, reports: &Bulkhead<TokioClock>) {
        self.pricing.update(&front.pricing);
        self.stock.update(&front.stock);
        self.reports.update(reports);
    }
}

/// What one `GET /report` got: status, `Retry-After`, body, time taken.
struct Shed {
    status: u16,
    retry_after: Option<String>,
    body: String,
    took: Duration,
}

/// `n` GETs of `/report` sent at once, each its own task; the answers in the
/// order they came back.
async fn report_burst(client: &reqwest::Client, base: &str, n: usize) -> Vec<Shed> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), format!("{base}/report"));
            tokio::spawn(async move {
                let start = Instant::now();
                let response = client.get(url).send().await.expect("HTTP request");
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = response.text().await.expect("HTTP response body");
                Shed {
                    status,
                    retry_after,
                    body,
                    took: start.elapsed(),
                }
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for task in tasks {
        answers.push(task.await.expect("report task panicked"));
    }
    answers.sort_by_key(|a| a.took);
    answers
}

/// The lines of a Prometheus scrape worth showing here, sorted: each
/// system's breaker state and refusals, and each bulkhead's refusals for
/// being full.
fn relevant(scrape: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = scrape
        .lines()
        .filter(|l| {
            l.starts_with("circuit_breaker_state{")
                || l.starts_with("circuit_breaker_rejected_total{")
                || (l.starts_with("bulkhead_rejected_total{") && l.contains(r#"reason="full""#))
        })
        .collect();
    lines.sort_unstable();
    lines
}

// ---------------------------------------------------------------- the acts

#[tokio::main]
async fn main() -> ExitCode {
    // Act 7 starts this program again as its worker processes.
    #[cfg(feature = "redis")]
    if let Some(code) = global_limit::run_worker_if_asked().await {
        return code;
    }
    acts_1_to_6().await;
    let code = act_7().await;
    act_8().await;
    act_9().await;
    act_10().await;
    act_11().await;
    act_12().await;
    act_13().await;
    code
}

/// Act 13: stale prices, marked with their age, while pricing is down.
#[cfg(feature = "chaos")]
async fn act_13() {
    let setup = degrade::Setup::TOUR;
    header(
        "Act 13: serve stale, marked with its age — a fault injector fails pricing, its breaker opens, the page keeps its price",
        &format!(
            "GET /price/{{sku}} behind a ChaosLayer (seeded; on: every request answered 503 by the injector); \
             GET /product/{{sku}} asks it through a StaleCacheLayer (max staleness {} s) over a PolicyLayer \
             (breaker: window 4, opens at 50 % failed, open {} ms, 1 probe); a page every {} ms of the outage",
            degrade::MAX_STALENESS.as_secs(),
            setup.open.as_millis(),
            setup.step.as_millis()
        ),
    );
    let run = degrade::run(setup).await;
    degrade::print(&run);
    println!(
        "  -> while pricing failed and while its breaker was open the page kept its price, marked with \
         its age (measured on the tour's clock); the refused pages sent pricing nothing; once the injector \
         was off and the open wait over, one probe closed the breaker and the prices were fresh again"
    );
}

/// Act 13 without the `chaos` feature: one line.
#[cfg(not(feature = "chaos"))]
async fn act_13() {
    println!();
    println!(
        "== Act 13: serve stale, marked with its age: skipped, it needs the chaos feature \
         (--features tokio,tower,metrics,http,chaos)"
    );
}

/// Act 12: the request budget across three hops.
#[cfg(feature = "http")]
async fn act_12() {
    header(
        "Act 12: the budget travels — A (300 ms) → B → C (a 1 s job), over loopback HTTP",
        &format!(
            "x-request-timeout-ms set by OutboundDeadlineLayer (what is left minus a {} ms margin), \
             read by InboundDeadlineLayer (each server's own maximum 10 s); C checks its \
             Deadline before each 10 ms step of its job",
            hops::MARGIN.as_millis()
        ),
    );
    let with = hops::run(true, hops::PATIENCE).await;
    hops::print("with the header:", &with);
    let without = hops::run(false, hops::PATIENCE).await;
    hops::print("header off:", &without);
    println!(
        "  -> with the header C stops before A's {} ms are up and nobody works for a caller who has gone; \
         without it A gives up just the same, and C works its full second for nobody",
        hops::BUDGET.as_millis()
    );
}

/// Act 12 without the `http` feature: one line.
#[cfg(not(feature = "http"))]
async fn act_12() {
    println!();
    println!(
        "== Act 12: the budget travels across three hops: skipped, it needs the http feature \
         (--features tokio,tower,metrics,http,chaos)"
    );
}

/// Act 7: one limit across processes, on Redis.
#[cfg(feature = "redis")]
async fn act_7() -> ExitCode {
    let title = "Act 7: one limit across processes — 4 workers, a Bulkhead of 20 each, then one GlobalBulkhead of 20, per call and leased";
    let Some(redis_server) = global_limit::redis_server_on_path() else {
        println!();
        println!(
            "== {title}: skipped, no redis-server on PATH (to run it: {})",
            global_limit::HOW_TO_ENABLE
        );
        return ExitCode::SUCCESS;
    };
    header(title, &global_limit::setup());
    match global_limit::run(&redis_server).await {
        Ok(reports) => {
            global_limit::print_table(&reports, "  ");
            println!("  -> {}", global_limit::conclusion(&reports));
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("  act 7 failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Act 7 without the `redis` feature: one line.
#[cfg(not(feature = "redis"))]
async fn act_7() -> ExitCode {
    println!();
    println!(
        "== Act 7: one limit across processes: skipped, it needs the redis feature \
         (--features tokio,tower,metrics,http,chaos,redis; rustc 1.88) and a redis-server on PATH \
         (apt-get install -y redis-server)"
    );
    ExitCode::SUCCESS
}

async fn acts_1_to_6() {
    let shipping_service = Arc::new(Shipping::default());
    let backends = Arc::new(Backends::default());
    let reports = bulkhead("report", REPORT_SLOTS);
    let (base, front) =
        start_server(shipping_service.clone(), backends.clone(), reports.clone()).await;
    // Act 6's exporters, registered once at start-up on their own recorder
    // (a local one: the tour installs no global recorder).
    let recorder = PrometheusBuilder::new().build_recorder();
    let prometheus: PrometheusHandle = recorder.handle();
    let exporters = metrics::with_local_recorder(&recorder, || {
        watertight::metrics::describe();
        Exporters {
            pricing: PolicyExporter::new(&front.pricing),
            stock: PolicyExporter::new(&front.stock),
            reports: BulkheadExporter::new(&reports),
        }
    });
    let client = net::client();

    // Warm-up: open the client's pooled connections before measuring, with as
    // many concurrent requests as any act has in flight (7 in act 3), so that
    // TCP connection setup is not charged to the first calls of act 1.
    let warm_up = bulkhead("warm-up", 8);
    let traffic = [Traffic {
        system: System::Inventory,
        calls: 8,
        bulkhead: warm_up,
    }];
    burst(&client, &base, &traffic, MaxWait::Unbounded).await;

    println!("watertight tour: server on {base}");
    println!(
        "  /shipping-rate takes {} ms (degraded), /inventory/{{sku}} {} ms (healthy); \
         times scaled down 5x from a 2 s slow call",
        SLOW.as_millis(),
        FAST.as_millis()
    );

    // Act 1: one shared pool of 4 workers for every call.
    header(
        "Act 1: one shared limit — a fast dependency starves behind a slow one",
        "one bulkhead \"shared\" (4) for both systems, unbounded wait; \
         8 shipping then 2 inventory at once",
    );
    let shared = bulkhead("shared", 4);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 8,
            bulkhead: shared.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 2,
            bulkhead: shared.clone(),
        },
    ];
    let act1 = burst(&client, &base, &traffic, MaxWait::Unbounded).await;
    print_table(&act1);
    print_metrics(&[&shared]);
    let inv = worst(&act1, System::Inventory, true).unwrap_or_default();
    println!(
        "  -> a {} ms lookup took {} ms ({:.1} slow calls, {:.0}x its own time): it queued \
         behind all 8 shipping calls",
        FAST.as_millis(),
        ms(inv),
        inv.as_secs_f64() / SLOW.as_secs_f64(),
        inv.as_secs_f64() / FAST.as_secs_f64()
    );

    // Act 2: a compartment of its own per dependency.
    header(
        "Act 2: one bulkhead per system — the slow one floods only its own compartment",
        "bulkheads \"shipping\" (4) and \"inventory\" (2), unbounded wait; \
         the same burst as act 1",
    );
    let shipping = bulkhead("shipping", 4);
    let inventory = bulkhead("inventory", 2);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 8,
            bulkhead: shipping.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 2,
            bulkhead: inventory.clone(),
        },
    ];
    let act2 = burst(&client, &base, &traffic, MaxWait::Unbounded).await;
    print_table(&act2);
    print_metrics(&[&shipping, &inventory]);
    let inv = worst(&act2, System::Inventory, true).unwrap_or_default();
    let ship = worst(&act2, System::Shipping, true).unwrap_or_default();
    println!(
        "  -> inventory back to {} ms, its own time; shipping as slow as ever ({} ms): \
         slowness contained, not cured",
        ms(inv),
        ms(ship)
    );

    // Act 3: semaphore bulkheads with a max wait, shipping flooded.
    header(
        "Act 3: a flood with a short max wait — the overflow is turned away fast",
        &format!(
            "bulkheads \"shipping\" (3) and \"inventory\" (5), acquire_timeout({} ms); \
             10 shipping + 4 inventory at once",
            MAX_WAIT.as_millis()
        ),
    );
    let shipping = bulkhead("shipping", 3);
    let inventory = bulkhead("inventory", 5);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 10,
            bulkhead: shipping.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 4,
            bulkhead: inventory.clone(),
        },
    ];
    let act3 = burst(&client, &base, &traffic, MaxWait::AtMost(MAX_WAIT)).await;
    print_table(&act3);
    print_metrics(&[&shipping, &inventory]);
    let rejected_after = worst(&act3, System::Shipping, false).unwrap_or_default();
    let inv = worst(&act3, System::Inventory, true).unwrap_or_default();
    println!(
        "  -> shipping: {} ok, {} turned away by {} ms (max wait {} ms); \
         inventory: {} ok by {} ms",
        count(&act3, System::Shipping, true),
        count(&act3, System::Shipping, false),
        ms(rejected_after),
        MAX_WAIT.as_millis(),
        count(&act3, System::Inventory, true),
        ms(inv)
    );

    // Act 4: the slow endpoint goes down; a breaker stops calling it.
    header(
        "Act 4: a circuit breaker — shipping goes down, the calls stop, it comes back",
        &format!(
            "breaker \"shipping\": window 10, minimum 5 calls, failure rate 50 %, open {} ms, \
             3 probes; a 5xx or no answer is a failure; one call at a time",
            OPEN_WAIT.as_millis()
        ),
    );
    let config = BreakerConfig::builder()
        .window_size(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN_WAIT)
        .half_open_calls(3)
        .build()
        .expect("breaker config");
    let timeline = Timeline::start();
    // The listener is told about every state change as it happens.
    let breaker: CircuitBreaker<TokioClock, 10, _> =
        CircuitBreaker::with_listener("shipping", config, TokioClock, move |t: &Transition| {
            timeline.at(
                t.at,
                format_args!("breaker {} -> {}", upper(t.from), upper(t.to)),
            )
        });
    let url = format!("{base}/shipping-rate?zip_code=94107");
    let hits_before = shipping_service.hits.load(SeqCst);
    let hits = || shipping_service.hits.load(SeqCst) - hits_before;

    shipping_service.down.store(true, SeqCst);
    timeline.now("server: /shipping-rate goes down, answers 503 at once");
    let mut refused = Vec::new();
    for n in 1..=8 {
        let before = breaker.state();
        refused.extend(call_through(&breaker, &client, &url, n, timeline).await);
        if before == BreakerState::Closed && breaker.state() == BreakerState::Open {
            // The window is kept as it was when it opened: it shows why.
            let m = breaker.metrics();
            println!(
                "            (window: {} failures of {} calls = {:.0} %, threshold {:.0} %)",
                m.failed_calls,
                m.calls,
                m.failure_rate.unwrap_or_default(),
                config.failure_rate_threshold()
            );
        }
    }
    timeline.now(format_args!(
        "server: {} requests so far; the {} refused calls never reached it",
        hits(),
        refused.len()
    ));

    shipping_service.healthy.store(true, SeqCst);
    shipping_service.down.store(false, SeqCst);
    timeline.now(format_args!(
        "server: /shipping-rate is back, healthy ({} ms)",
        FAST.as_millis()
    ));
    let hint = refused.last().and_then(Rejection::retry_after);
    let wait = hint.unwrap_or(OPEN_WAIT);
    timeline.now(format_args!(
        "client sleeps {:.2} ms, as the last refusal said",
        wait.as_secs_f64() * 1e3
    ));
    tokio::time::sleep(wait).await;
    timeline.now(format_args!(
        "state() says {}: the open wait is over, the next call is a probe",
        upper(breaker.state())
    ));
    for n in 9..=12 {
        refused.extend(call_through(&breaker, &client, &url, n, timeline).await);
    }

    let m = breaker.metrics();
    println!();
    println!(
        "  breaker {:<12} {}, {} call(s) in its new window ({} failed), rejected {}",
        format!("{:?}:", breaker.name()),
        m.state,
        m.calls,
        m.failed_calls,
        m.rejected
    );
    println!(
        "  -> 12 calls, {} requests reached the server: the {} calls refused while open \
         cost no request and no wait, and came with a retry hint; {} probes closed it \
         (open {} ms here, 30 s by default)",
        hits(),
        refused.len(),
        config.half_open_calls(),
        OPEN_WAIT.as_millis()
    );

    // Act 5: a request budget over two systems, one policy each.
    let (stock_cfg, pricing_cfg) = (stock_policy(), pricing_policy());
    let pricing_breaker = pricing_cfg.breaker();
    header(
        "Act 5: a request budget, one policy per system — pricing degrades, the store still answers",
        &format!(
            "/product/{{sku}} and /checkout/{{sku}} have {} ms each and call /stock and /pricing \
             (this server, over HTTP), each through its policy:\n   \
             stock: {} at once, slot wait {} ms, call timeout {} ms; \
             pricing: {} at once, slot wait {} ms, call timeout {} ms,\n   \
             breaker window {}, minimum {} calls, failure rate {:.0} %, open {} ms.\n   \
             A product page asks both at once and answers without a price; \
             a checkout asks pricing first and stops without one",
            BUDGET.as_millis(),
            stock_cfg.max_concurrent(),
            stock_cfg.max_wait().as_millis(),
            stock_cfg.call_timeout().as_millis(),
            pricing_cfg.max_concurrent(),
            pricing_cfg.max_wait().as_millis(),
            pricing_cfg.call_timeout().as_millis(),
            pricing_breaker.window_size(),
            pricing_breaker.minimum_calls(),
            pricing_breaker.failure_rate_threshold(),
            pricing_breaker.open_duration().as_millis(),
        ),
    );
    let timeline = Timeline::start();
    let mut visits = Vec::new();
    for path in ["/product/SKU-1", "/checkout/SKU-1"] {
        visits.push(visit(&client, &base, path, &front, timeline).await);
    }
    backends.pricing.slow.store(true, SeqCst);
    timeline.now(format_args!(
        "server: /pricing degrades, answers in {} ms",
        PRICING_SLOW.as_millis()
    ));
    for path in [
        "/product/SKU-2",
        "/product/SKU-3",
        "/product/SKU-4",
        "/product/SKU-5",
        "/checkout/SKU-5",
        "/product/SKU-6",
    ] {
        visits.push(visit(&client, &base, path, &front, timeline).await);
    }

    let with = |status: u16, part: &str| {
        visits
            .iter()
            .filter(|v| v.status.as_u16() == status && v.body.contains(part))
            .count()
    };
    let slowest = visits.iter().map(|v| v.took).max().unwrap_or_default();
    let (s, p) = (
        front.stock.breaker().metrics(),
        front.pricing.breaker().metrics(),
    );
    println!();
    println!(
        "  {} answers: {} full, {} partial (no price), {} unavailable (503); the slowest \
         took {} ms of its {} ms budget",
        visits.len(),
        with(200, r#""price":{"price_cents""#),
        with(200, r#""price":{"unavailable""#),
        with(503, ""),
        ms(slowest),
        BUDGET.as_millis()
    );
    println!(
        "  stock:   {} requests reached it, all it was asked; breaker {}, {} failures",
        backends.stock.hits(),
        s.state,
        s.failed_calls
    );
    println!(
        "  pricing: {} requests reached it ({} answered, {} cut at {} ms); breaker {}, \
         {} calls refused without a request",
        backends.pricing.hits(),
        p.calls - p.failed_calls,
        p.failed_calls,
        pricing_cfg.call_timeout().as_millis(),
        p.state,
        p.rejected
    );
    println!(
        "  -> pricing's slow answers cost a request {} ms (its call timeout), not {} ms; once \
         its breaker opened they cost nothing, and came with its retry hint; stock answered \
         every page in {} ms as before",
        pricing_cfg.call_timeout().as_millis(),
        PRICING_SLOW.as_millis(),
        FAST.as_millis()
    );

    // Act 6: the same primitives as tower middleware and as metrics.
    header(
        "Act 6: load shedding with tower, and the numbers in Prometheus",
        &format!(
            "/report ({} ms) behind watertight::tower::BulkheadLayer: bulkhead \"report\" ({}), \
             fail fast, a refusal answered 503 + Retry-After: 1; 5 requests at once",
            REPORT.as_millis(),
            REPORT_SLOTS
        ),
    );
    let answers = report_burst(&client, &base, 5).await;
    for a in &answers {
        let retry = a
            .retry_after
            .as_deref()
            .map(|v| format!(", Retry-After: {v}"))
            .unwrap_or_default();
        println!(
            "  GET /report -> {} in {:>3} ms{retry:<16}  {}",
            a.status,
            ms(a.took),
            a.body
        );
    }
    let m = reports.metrics();
    let shed_at_once = answers
        .iter()
        .filter(|a| a.status == 503 && a.retry_after.as_deref() == Some("1"))
        .count();
    println!(
        "  -> {} served, {} shed at once with 503 + Retry-After: 1; bulkhead \"report\": \
         accepted {}, rejected {} (full), peak in flight {}/{}",
        answers.iter().filter(|a| a.status == 200).count(),
        shed_at_once,
        m.accepted,
        m.rejected_full,
        m.peak_in_flight,
        m.capacity
    );

    exporters.update(&front, &reports);
    println!();
    println!(
        "  Prometheus text (metrics-exporter-prometheus), a few lines of the scrape — \
         state: 0 closed, 1 open, 2 half_open:"
    );
    for line in relevant(&prometheus.render()) {
        println!("    {line}");
    }
}

// ---------------------------------------------------------------- act 8

/// Calls in act 8's storm, one after another.
const STORM: usize = 30;
/// Outcomes search's breaker waits for before it judges: more than act 8
/// makes, so that the budget alone is at work there.
const SEARCH_JUDGES_AFTER: usize = 50;

/// The search service act 8 calls: its switches and its request count.
#[derive(Default)]
struct Search {
    /// Requests still to hold for `PRICING_SLOW` before answering (each
    /// held request takes one).
    hold: AtomicUsize,
    /// Down: every request is answered 503 at once.
    down: AtomicBool,
    /// Requests that reached the handler, answered or not.
    hits: AtomicUsize,
}

async fn search(
    State(service): State<Arc<Search>>,
    Path(q): Path<String>,
) -> Result<Json, (StatusCode, Json)> {
    service.hits.fetch_add(1, SeqCst);
    if service.down.load(SeqCst) {
        let body = r#"{"error":"search unavailable"}"#;
        return Err((StatusCode::SERVICE_UNAVAILABLE, json(body.to_owned())));
    }
    let held = service
        .hold
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok();
    tokio::time::sleep(if held { PRICING_SLOW } else { FAST }).await;
    Ok(json(format!(r#"{{"q":"{q}","results":3}}"#)))
}

/// Why a search attempt failed: a 5xx, or no answer. An error, so that
/// the policy's default classifier calls it a failure and retries it.
#[derive(Debug)]
enum SearchError {
    Status(u16),
    Transport(reqwest::Error),
}

impl Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::Status(s) => write!(f, "status {s}"),
            SearchError::Transport(e) => write!(f, "no answer: {e}"),
        }
    }
}

/// One attempt: `GET url`, its body if the status is not a 5xx.
async fn get_search(client: reqwest::Client, url: String) -> Result<String, SearchError> {
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(SearchError::Transport)?;
    let status = response.status();
    if status.is_server_error() {
        return Err(SearchError::Status(status.as_u16()));
    }
    response.text().await.map_err(SearchError::Transport)
}

/// Search: 4 at once, a slot within 50 ms, 300 ms per call, a breaker that
/// judges only after `SEARCH_JUDGES_AFTER` calls (so that in act 8 the
/// budget alone stops the retries), and the default retry config with a fixed jitter seed (so
/// that every run draws the same backoffs).
fn search_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(SEARCH_JUDGES_AFTER)
        .minimum_calls(SEARCH_JUDGES_AFTER)
        .build()
        .expect("search breaker");
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .retry(RetryConfig::builder().seed(8))
        .build()
        .expect("search policy")
}

/// Act 8: a timed-out call retried once within its budget, and a storm
/// that the retry budget stops.
async fn act_8() {
    let service = Arc::new(Search::default());
    let base = net::serve(
        Router::new()
            .route("/search/{q}", get(search))
            .with_state(service.clone()),
    )
    .await;
    let client = net::client();
    let config = search_policy();
    let retry = *config.retry();
    let search: Policy<TokioClock> =
        Policy::new("search", config, TokioClock).expect("search policy");
    let hits = || service.hits.load(SeqCst);

    header(
        "Act 8: retries within the budget — a timed-out call retried once, a storm the budget stops",
        &format!(
            "policy \"search\": {} at once, call timeout {} ms; call_idempotent(..).within(&budget) \
             with the default retries: {} attempts, backoff {} ms doubling to {} s with full jitter, \
             no attempt with under {} ms of the budget left;\n   \
             retry budget {} tokens: a failure takes one, a success gives {} % of one back, \
             a failed call is retried only while more than half is left; {} ms per request",
            config.max_concurrent(),
            config.call_timeout().as_millis(),
            retry.max_attempts(),
            retry.base_backoff().as_millis(),
            retry.max_backoff().as_secs(),
            retry.min_attempt_time().as_millis(),
            retry.budget_max_tokens(),
            retry.budget_ratio_percent(),
            BUDGET.as_millis(),
        ),
    );
    let timeline = Timeline::start();
    service.hold.store(1, SeqCst);
    let url = format!("{base}/search/boots");
    let attempts = AtomicUsize::new(0);
    let request = Deadline::after(TokioClock, BUDGET);
    let answer = search
        .call_idempotent(|| {
            let n = attempts.fetch_add(1, SeqCst) + 1;
            let held = if n == 1 {
                " (search holds this one 3 s)"
            } else {
                ""
            };
            timeline.now(format_args!("attempt {n}: GET /search/boots{held}"));
            get_search(client.clone(), url.clone())
        })
        .within(&request)
        .await;
    match &answer {
        Ok(body) => timeline.now(format_args!("answered {body}")),
        Err(e) => timeline.now(format_args!("failed: {e}")),
    }
    let m = search.retry_metrics();
    println!(
        "  -> attempt 1 was cut at its {} ms call timeout and retried once, inside the \
         request's {} ms ({} left): {} retry after a timeout, {} requests reached search, \
         {:.1} of {} tokens left",
        config.call_timeout().as_millis(),
        BUDGET.as_millis(),
        ms(request.remaining()),
        m.after_timeout,
        hits(),
        search.retry_budget().tokens(),
        retry.budget_max_tokens()
    );

    println!();
    service.down.store(true, SeqCst);
    timeline.now("server: /search goes down, answers 503 at once");
    let (before, hits_before) = (search.retry_metrics(), hits());
    let mut failed = 0;
    for i in 0..STORM {
        let url = format!("{base}/search/q{i}");
        let request = Deadline::after(TokioClock, BUDGET);
        let r = search
            .call_idempotent(|| get_search(client.clone(), url.clone()))
            .within(&request)
            .await;
        failed += usize::from(r.is_err());
    }
    let m = search.retry_metrics();
    let ours = hits() - hits_before;
    timeline.now(format_args!(
        "{STORM} calls through call_idempotent: {failed} failed; {ours} requests reached \
         search: {} retries, then the budget refused {} ({:.1} tokens left)",
        m.after_failure - before.after_failure,
        m.budget_exhausted - before.budget_exhausted,
        search.retry_budget().tokens()
    ));
    let hits_before = hits();
    for i in 0..STORM {
        let url = format!("{base}/search/q{i}");
        for _ in 0..4 {
            if get_search(client.clone(), url.clone()).await.is_ok() {
                break;
            }
        }
    }
    let naive = hits() - hits_before;
    timeline.now(format_args!(
        "the same {STORM} calls in a loop that retries 3 times, no delay, no budget: \
         {naive} requests reached search"
    ));
    let b = search.breaker().metrics();
    println!(
        "  -> the budget let {} of {STORM} failing calls retry and then stopped: {ours} \
         requests for {STORM} calls, where the loop sent {naive}; breaker {} ({} failures of \
         {} calls, it judges after {})",
        m.after_failure - before.after_failure,
        b.state,
        b.failed_calls,
        b.calls,
        SEARCH_JUDGES_AFTER
    );
}

// ---------------------------------------------------------------- act 9

/// Act 9's quota, both ways: 50 requests a second, 10 at once.
const RATE: Quota = Quota::per_second(50).burst(10);
/// Requests the outbound client sends at once.
const OUTBOUND: usize = 30;
/// Requests sent at once to the inbound limit.
const INBOUND: usize = 25;

/// What reached act 9's server: each outbound request's arrival, since
/// the act began, and the inbound handler's count.
struct Arrivals {
    origin: Instant,
    at: std::sync::Mutex<Vec<Duration>>,
    searches: AtomicUsize,
}

async fn quote(State(arrivals): State<Arc<Arrivals>>, Path(i): Path<usize>) -> Json {
    let at = arrivals.origin.elapsed();
    arrivals.at.lock().expect("arrivals").push(at);
    json(format!(r#"{{"quote":{i}}}"#))
}

async fn rated_search(State(arrivals): State<Arc<Arrivals>>) -> Json {
    arrivals.searches.fetch_add(1, SeqCst);
    json(r#"{"results":3}"#.to_owned())
}

/// The rate limit layer's refusal, as a server answers it: 429 with the
/// limiter's exact hint as `Retry-After`, rounded up to whole seconds.
async fn too_many(err: RateLimitError<Infallible>) -> Response {
    match err.retry_after() {
        Some(wait) => {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let headers = [(RETRY_AFTER, HeaderValue::from(secs))];
            (StatusCode::TOO_MANY_REQUESTS, headers, err.to_string()).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()).into_response(),
    }
}

/// Act 9: a client held to 50/s with a burst of 10, and a server shedding
/// the same rate with 429 + `Retry-After`.
async fn act_9() {
    let arrivals = Arc::new(Arrivals {
        origin: Instant::now(),
        at: std::sync::Mutex::default(),
        searches: AtomicUsize::new(0),
    });
    let inbound = Arc::new(RateLimiter::new("search", RATE, TokioClock));
    let app = Router::new()
        .route("/quote/{i}", get(quote))
        .route("/ping", get(|| async { "pong" }))
        .route(
            "/search",
            get(rated_search).route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(too_many))
                    .layer(RateLimitLayer::new(inbound.clone())),
            ),
        )
        .with_state(arrivals.clone());
    let base = net::serve(app).await;
    let client = net::client();
    // Open the client's connections first, as a client that has been
    // running would have them: the act then counts the limiter's time,
    // not the TCP handshakes'.
    let warm: Vec<_> = (0..INBOUND.max(OUTBOUND))
        .map(|_| tokio::spawn(client.get(format!("{base}/ping")).send()))
        .collect();
    for w in warm {
        w.await.expect("warm-up task").expect("warm-up request");
    }

    header(
        "Act 9: a rate limit — a client held to 50/s with a burst of 10, and inbound shedding with 429 + Retry-After",
        &format!(
            "outbound: RateLimitLayer::new(limiter).max_wait(2 s) around the client, {} cells/s, \
             burst {}, one every {} ms; {OUTBOUND} requests at once, each through its own clone",
            RATE.cells(),
            RATE.burst_size(),
            RATE.emission_interval().as_millis()
        ),
    );
    let provider = Arc::new(RateLimiter::new("provider", RATE, TokioClock));
    let http = client.clone();
    let send = RateLimitLayer::new(provider.clone())
        .max_wait(Duration::from_secs(2))
        .layer(tower::service_fn(move |url: String| {
            let http = http.clone();
            async move { http.get(url).send().await.map(|r| r.status().as_u16()) }
        }));
    let began = arrivals.origin.elapsed();
    let tasks: Vec<_> = (0..OUTBOUND)
        .map(|i| {
            let (send, url) = (send.clone(), format!("{base}/quote/{i}"));
            tokio::spawn(async move { send.oneshot(url).await })
        })
        .collect();
    let mut ok = 0;
    for task in tasks {
        ok += usize::from(matches!(task.await.expect("request task"), Ok(200)));
    }
    let mut at: Vec<Duration> = arrivals.at.lock().expect("arrivals").clone();
    at.sort();
    let at: Vec<Duration> = at.into_iter().map(|a| a.saturating_sub(began)).collect();
    let interval = RATE.emission_interval();
    let bound = |t: Duration| RATE.burst_size() as u128 + t.as_nanos() / interval.as_nanos();
    let last = at.last().copied().unwrap_or_default();
    let mut t = Duration::from_millis(10);
    while t < last + Duration::from_millis(100) {
        let reached = at.iter().filter(|&&a| a <= t).count();
        println!(
            "  by {:>3} ms: {reached:>2} requests had reached the server (bound: {} + {} ms / {} ms = {})",
            t.as_millis(),
            RATE.burst_size(),
            t.as_millis(),
            interval.as_millis(),
            bound(t)
        );
        t = if t < Duration::from_millis(100) {
            Duration::from_millis(100)
        } else {
            t + Duration::from_millis(100)
        };
    }
    let over = at
        .iter()
        .enumerate()
        .filter(|(k, &a)| (*k + 1) as u128 > bound(a))
        .count();
    let m = provider.metrics();
    println!(
        "  -> {ok} of {OUTBOUND} answered, the last reached the server at {} ms: the burst at once, \
         then one every {} ms ({} waited for their cell, {} refused); arrivals over the bound at \
         their own instant: {over}",
        ms(last),
        interval.as_millis(),
        m.waited,
        m.refused
    );

    println!();
    println!(
        "  inbound: GET /search behind a fail-fast RateLimitLayer (limiter \"search\", the same \
         quota), a refusal answered 429 + Retry-After; {INBOUND} requests at once"
    );
    let tasks: Vec<_> = (0..INBOUND)
        .map(|_| {
            let (client, url) = (client.clone(), format!("{base}/search"));
            tokio::spawn(async move {
                let response = client.get(url).send().await.expect("HTTP request");
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (response.status().as_u16(), retry_after)
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(INBOUND);
    for task in tasks {
        answers.push(task.await.expect("request task"));
    }
    let served = answers.iter().filter(|a| a.0 == 200).count();
    let limited = answers
        .iter()
        .filter(|a| a.0 == 429 && a.1.as_deref() == Some("1"))
        .count();
    let m = inbound.metrics();
    println!(
        "  -> {served} x 200, {limited} x 429 with Retry-After: 1 (the limiter's hint, at most {} ms, \
         in whole seconds rounded up); the handler ran {} times; limiter \"search\": admitted {}, \
         refused {}",
        interval.as_millis(),
        arrivals.searches.load(SeqCst),
        m.admitted,
        m.refused
    );
}

// ---------------------------------------------------------------- act 10

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
/// then the first five let go; who reached the handler next.
async fn act_10_run(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    held: &Held,
    waiting: impl Fn() -> usize,
) -> (Vec<&'static str>, Vec<u16>) {
    let send = |class: &'static str| {
        let request = client.get(format!("{base}{path}")).header("x-class", class);
        tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) })
    };
    let mut calls: Vec<_> = (0..EXPORT_CALLS).map(|_| send("export")).collect();
    until(|| held.reached.lock().expect("reached").len() == 5 && waiting() == EXPORT_CALLS - 5)
        .await;
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
    (next, statuses)
}

/// Act 10: who gets the slots under overload, one FIFO queue against
/// classes with guaranteed shares.
async fn act_10() {
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
    let (next, statuses) = act_10_run(&client, &base, "/fifo/search", &fifo_held, || {
        fifo.waiting()
    })
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
    let (next, statuses) =
        act_10_run(&client, &base, "/classes/search", &parts_held, waiting).await;
    let export = SEARCH_CLASSES.class_metrics(1).expect("export");
    println!(
        "  PartitionedBulkhead (3 / 2):       the 5 freed slots went to {} export, {} checkout; {} of {} answered 200",
        count(&next, "export"),
        count(&next, "checkout"),
        statuses.iter().filter(|&&s| s == 200).count(),
        statuses.len()
    );
    println!(
        "  -> with one queue checkout waits behind the export calls that came first; with partitions \
         it gets back its 3 slots, which export had borrowed ({} borrowed), ahead of them",
        export.borrowed
    );
}

// ---------------------------------------------------------------- act 11

/// How many calls act 11 makes, each way.
const HEDGE_CALLS: u64 = 90;

/// A replica: 20 ms, except that replica 2 holds 1 in 10 of the requests
/// it gets first (`i mod 30 = 2`) for 2 s.
async fn replica(Path((n, i)): Path<(u64, u64)>, State(sent): State<Arc<AtomicUsize>>) -> String {
    sent.fetch_add(1, SeqCst);
    let hold = if n == 2 && i % 30 == 2 {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(20)
    };
    tokio::time::sleep(hold).await;
    format!("{n}")
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort_unstable();
    latencies[(latencies.len() * 99).div_ceil(100) - 1]
}

/// Act 11: a slow replica, called with and without hedging.
async fn act_11() {
    let sent = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/replica/{n}/{i}", get(replica))
        .with_state(sent.clone());
    let base = net::serve(app).await;
    let client = net::client();
    let get = |i: u64, attempt: u64| {
        let url = format!("{base}/replica/{}/{i}", (i + attempt) % 3);
        let client = client.clone();
        async move {
            let r = async { client.get(&url).send().await?.text().await }.await;
            r.map_err(|e| e.to_string())
        }
    };
    let policy = || {
        let config = PolicyConfig::builder(8)
            .call_timeout(Duration::from_millis(300))
            .build()
            .expect("replicas policy");
        Policy::<TokioClock>::new("replicas", config, TokioClock).expect("replicas policy")
    };
    header(
        "Act 11: hedged requests — one replica of three slow 1 time in 10",
        &format!(
            "GET /replica/{{n}}/{{i}}: 20 ms, replica 2 holds 1 in 10 of its own requests 2 s; \
             {HEDGE_CALLS} calls, call timeout 300 ms; then call_hedged at the p95 of the first run's latencies"
        ),
    );
    let hedge = Hedge::new(
        "replicas",
        HedgeConfig::builder()
            .delay(HedgeDelay::Percentile(Percentile::P95))
            .min_samples(20)
            .window(100)
            .build()
            .expect("hedge config"),
    );

    let plain = policy();
    let mut latencies = Vec::new();
    let mut timed_out = 0;
    for i in 0..HEDGE_CALLS {
        let start = Instant::now();
        if plain.call(|| get(i, 0)).await.is_err() {
            timed_out += 1;
        }
        latencies.push(start.elapsed());
        // The plain run's latencies are the hedge's history.
        hedge.histogram().record(start.elapsed());
    }
    let sent_plain = sent.swap(0, SeqCst);
    println!(
        "  Policy::call:         p99 {:>4} ms, {sent_plain} requests sent, {timed_out} cut by the call timeout",
        ms(p99(latencies))
    );

    let hedged = policy();
    let delay = hedge.delay().expect("the first run's samples");
    let mut latencies = Vec::new();
    let mut failed = 0;
    for i in 0..HEDGE_CALLS {
        let start = Instant::now();
        let mut attempt = 0;
        let r = hedged
            .call_hedged(&hedge, || {
                attempt += 1;
                get(i, attempt - 1)
            })
            .await;
        failed += usize::from(r.is_err());
        latencies.push(start.elapsed());
    }
    let sent_hedged = sent.swap(0, SeqCst);
    let m = hedge.metrics();
    println!(
        "  Policy::call_hedged:  p99 {:>4} ms, {sent_hedged} requests sent ({} extra: {} hedges won, {} lost), {failed} failed; delay {} ms",
        ms(p99(latencies)),
        sent_hedged.saturating_sub(HEDGE_CALLS as usize),
        m.won,
        m.lost,
        ms(delay)
    );
    println!(
        "  -> the requests that met the slow replica are answered by the next one after the \
         p95 instead of at the call timeout; the hedges cost the extra requests above"
    );
}
