//! The server of acts 1–6, on one random free loopback port: the two
//! systems of acts 1–4 (`GET /inventory/{sku}`, healthy, and
//! `GET /shipping-rate`, degraded, that act 4 takes down), the two of act 5
//! (`GET /stock/{sku}`, `GET /pricing/{sku}`, that act 5 makes slow) and the
//! storefront that calls them over HTTP, each through its own policy, inside
//! a request budget (`GET /product/{sku}`, `GET /checkout/{sku}`), and act
//! 6's `GET /report` behind a fail-fast `BulkheadLayer`; with the tour's
//! client for it, in a [`Stage`] the acts share.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::ServiceBuilder;
use watertight::breaker::Outcome as BreakerOutcome;
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::policy::ErrorKind;
use watertight::tower::{BulkheadError, BulkheadLayer};
use watertight::{BreakerConfig, Bulkhead, Policy, PolicyConfig};

use crate::{json, ms, net, Json, BUDGET, FAST, PRICING_SLOW};

/// The slow dependency's latency (2 s in the usual demonstration, ÷ 5).
pub const SLOW: Duration = Duration::from_millis(400);

/// The server of acts 1–6, its systems' switches and counters, and the
/// tour's client for it: started once, before act 1.
pub struct Stage {
    /// The server's base URL, `http://127.0.0.1:…`.
    pub base: String,
    /// The tour's client: one, shared by every call of acts 1–6.
    pub client: reqwest::Client,
    pub shipping: Arc<Shipping>,
    pub backends: Arc<Backends>,
    /// The storefront's side: its client and its two policies.
    pub front: Arc<Storefront>,
    /// Act 6's bulkhead in front of `GET /report`.
    pub reports: Arc<Bulkhead<TokioClock>>,
}

impl Stage {
    /// Starts the server.
    pub async fn start() -> Stage {
        let shipping = Arc::new(Shipping::default());
        let backends = Arc::new(Backends::default());
        let reports = Arc::new(Bulkhead::new("report", REPORT_SLOTS, TokioClock));
        let (base, front) = start_server(shipping.clone(), backends.clone(), reports.clone()).await;
        Stage {
            base,
            client: net::client(),
            shipping,
            backends,
            front,
            reports,
        }
    }
}

// ---------------------------------------------------------------- acts 1–4's systems

async fn inventory(Path(sku): Path<String>) -> Json {
    tokio::time::sleep(FAST).await;
    json(format!(r#"{{"sku":"{sku}","in_stock":42}}"#))
}

/// The shipping service's switches (act 4 flips them) and its request count.
#[derive(Default)]
pub struct Shipping {
    /// Down: every request is answered 503 at once.
    pub down: AtomicBool,
    /// Healthy: answers in `FAST` instead of `SLOW` (after act 4's recovery).
    pub healthy: AtomicBool,
    /// Requests that reached the handler, answered or not.
    pub hits: AtomicUsize,
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

// ---------------------------------------------------------------- act 5's systems

/// How long pricing's breaker stays open before a probe may pass.
const PRICING_OPEN: Duration = Duration::from_millis(1000);

/// One of act 5's downstream systems: its switch and its request count.
#[derive(Default)]
pub struct Backend {
    /// Degraded: answers in `PRICING_SLOW` instead of `FAST`.
    pub slow: AtomicBool,
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

    pub fn hits(&self) -> usize {
        self.hits.load(SeqCst)
    }
}

/// The two systems the storefront calls: on the same demo server, reached
/// over HTTP like any other.
#[derive(Default)]
pub struct Backends {
    pub pricing: Backend,
    pub stock: Backend,
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
pub struct Storefront {
    client: reqwest::Client,
    base: String,
    pub stock: Policy<TokioClock, 8>,
    pub pricing: Policy<TokioClock, 8>,
}

/// Stock: 8 calls at once, a slot within 100 ms, 1 s per call, the default
/// 5xx-or-no-answer breaker over a window of 8.
pub fn stock_policy() -> PolicyConfig {
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
pub fn pricing_policy() -> PolicyConfig {
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
pub const REPORT: Duration = Duration::from_millis(200);
/// How many reports the server makes at once; the rest are shed.
pub const REPORT_SLOTS: usize = 2;

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
