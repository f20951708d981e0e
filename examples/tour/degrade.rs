//! The tour's act 13: a product page that keeps its price, marked with its
//! age, while pricing fails and while pricing's breaker is open (feature
//! `chaos`; the tour needs `tower` already). Two axum servers on loopback:
//!
//! - pricing, `GET /price/{sku}` (a price in cents, the sku × 100), its
//!   route behind a `ChaosLayer`: a seeded `Injector`, off at first; once
//!   the act turns it on it answers every request 503 itself (an outcome at
//!   rate 1), without calling the handler;
//! - the storefront, `GET /product/{sku}`, which asks pricing over HTTP
//!   through a `StaleCacheLayer` (the last good price per sku, served up to
//!   60 s old) over a `PolicyLayer` (a breaker of window 4 that opens when
//!   half of them failed, for `Setup::open`, and lets 1 probe through).
//!
//! The tour, a reqwest client, asks for pages one after another: two while
//! pricing is healthy (its prices are recorded), then, the injector on, two
//! that pricing answers 503 (the layer passes a failure on, so the page
//! itself serves the cache's price: a choice, not the layer's default) and
//! that open the breaker, then four refused by the breaker without a
//! request (the layer serves the cached price; a sku never priced gets 503
//! with `Retry-After`); then the injector off, the open wait over, a probe
//! that closes the breaker, and fresh prices. The ages are real, on
//! `TokioClock`: what the cache measured since it recorded each price.
//!
//! `tests/tour_degrade.rs` runs it and asserts every row and count.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::header::{AGE, RETRY_AFTER};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::{Layer, ServiceExt};
use watertight::breaker::State as BreakerState;
use watertight::chaos::{ChaosConfig, Fault, Injector};
use watertight::clock::TokioClock;
use watertight::fallback::{Refused, Served, Stale, StaleCache, StaleMetrics};
use watertight::policy::{self, ErrorKind, Policy, PolicyConfig};
use watertight::tower::{ChaosLayer, PolicyLayer, StaleCacheLayer};
use watertight::BreakerConfig;

use crate::net::{self, serve};

/// How the act is paced.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// The pause before each page of the outage (and twice that before the
    /// first): what makes the ages grow.
    pub step: Duration,
    /// How long pricing's breaker stays open before a probe may pass.
    pub open: Duration,
}

impl Setup {
    /// The tour's: a page every 200 ms, the breaker open 1.5 s (the outage's
    /// four refused pages take 0.8 s of it).
    pub const TOUR: Setup = Setup {
        step: Duration::from_millis(200),
        open: Duration::from_millis(1_500),
    };
}

/// How long the storefront serves a recorded price.
pub const MAX_STALENESS: Duration = Duration::from_secs(60);

/// Where a page's price came from: the storefront's `x-price` header.
const X_PRICE: HeaderName = HeaderName::from_static("x-price");

/// Where a page's price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Pricing answered now.
    Fresh,
    /// Pricing answered with a failure (its 503); the page served the
    /// cache's last price.
    StaleAfterFailure,
    /// The policy refused (the breaker is open) without asking pricing; the
    /// `StaleCacheLayer` served the last price.
    StaleAfterRefusal,
    /// No price: refused, or failed, with nothing cached for the sku.
    Unavailable,
}

impl Source {
    const ALL: [Source; 4] = [
        Source::Fresh,
        Source::StaleAfterFailure,
        Source::StaleAfterRefusal,
        Source::Unavailable,
    ];

    /// Its `x-price` value.
    pub fn label(self) -> &'static str {
        match self {
            Source::Fresh => "fresh",
            Source::StaleAfterFailure => "stale-after-failure",
            Source::StaleAfterRefusal => "stale-after-refusal",
            Source::Unavailable => "unavailable",
        }
    }
}

/// One page, as the tour's client got it.
#[derive(Debug, Clone)]
pub struct Row {
    pub sku: u32,
    /// Whether the injector was on.
    pub chaos: bool,
    /// Whether a request reached pricing for it (its counters moved).
    pub sent: bool,
    pub status: u16,
    /// The page's `x-price` (`None`: missing or unknown, or no answer).
    pub source: Option<Source>,
    /// Pricing's breaker once the page was answered.
    pub breaker: BreakerState,
    /// The page's body (or the client's error).
    pub body: String,
}

/// What one run saw.
#[derive(Debug)]
pub struct Degrade {
    pub rows: Vec<Row>,
    /// The first row after the open wait, and the breaker's state before
    /// it (half-open: that page's call is the probe).
    pub probe: (usize, BreakerState),
    /// Requests pricing's handler answered.
    pub handled: usize,
    /// Requests the injector answered 503 itself.
    pub injected: usize,
    /// Calls pricing's breaker refused.
    pub refused: usize,
    /// The storefront's cache.
    pub cache: StaleMetrics,
    /// The whole act.
    pub took: Duration,
}

impl Degrade {
    /// The pages whose price came from `source`.
    pub fn count(&self, source: Source) -> usize {
        self.rows
            .iter()
            .filter(|r| r.source == Some(source))
            .count()
    }

    /// The pages for which no request reached pricing.
    pub fn not_sent(&self) -> usize {
        self.rows.iter().filter(|r| !r.sent).count()
    }
}

/// The answer pricing's route gives: the handler's, or the injector's.
type Answer = Result<Response, Infallible>;

async fn price(State(handled): State<Arc<AtomicUsize>>, Path(sku): Path<u32>) -> String {
    handled.fetch_add(1, SeqCst);
    (u64::from(sku) * 100).to_string()
}

/// Seconds, to a tenth.
fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A page with a price from the cache, its age in the body and in `Age`.
fn stale_page(sku: u32, stale: Stale<u64>, source: Source, why: &str) -> Response {
    (
        [
            (X_PRICE, source.label().to_owned()),
            (AGE, stale.age.as_secs().to_string()),
        ],
        format!(
            "product {sku}: price {}, {} old ({why})",
            stale.value,
            secs(stale.age)
        ),
    )
        .into_response()
}

/// No price: 503, with pricing's retry hint when there is one.
fn unavailable(sku: u32, why: &str, retry_after: Option<Duration>) -> Response {
    let mut page = (
        StatusCode::SERVICE_UNAVAILABLE,
        [(X_PRICE, Source::Unavailable.label())],
        format!(
            "product {sku}: price unavailable ({why}{})",
            retry_after.map_or(String::new(), |d| format!(", retry in {}", secs(d)))
        ),
    )
        .into_response();
    if let Some(d) = retry_after {
        // Whole seconds, rounded up.
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        page.headers_mut()
            .insert(RETRY_AFTER, s.max(1).to_string().parse().expect("digits"));
    }
    page
}

/// The product page from what the cache layer answered.
fn page(sku: u32, answer: Result<Served<u64>, policy::Error<u16>>, prices: &Prices) -> Response {
    match answer {
        Ok(Served::Fresh(cents)) => (
            [(X_PRICE, Source::Fresh.label())],
            format!("product {sku}: price {cents}"),
        )
            .into_response(),
        Ok(Served::Stale(stale)) => stale_page(
            sku,
            stale,
            Source::StaleAfterRefusal,
            "pricing not asked: its breaker is open",
        ),
        Err(e) => match e.into_refusal() {
            // Refused, and nothing cached for this sku.
            Ok(refused) => {
                let why = match refused.kind() {
                    ErrorKind::CircuitOpen(_) => "pricing not asked: its breaker is open",
                    _ => "pricing unavailable",
                };
                unavailable(sku, why, refused.retry_after())
            }
            // Pricing answered, with a failure: the layer passes it on (it
            // is the system's answer), and the page chooses to serve the
            // last good price all the same.
            Err(failed) => {
                let why = match failed.into_inner() {
                    Some(0) | None => "pricing gave no price".to_owned(),
                    Some(status) => format!("pricing answered {status}"),
                };
                match prices.serve(&sku) {
                    Some(stale) => stale_page(sku, stale, Source::StaleAfterFailure, &why),
                    None => unavailable(sku, &why, None),
                }
            }
        },
    }
}

/// The storefront's cache: 4 sets of 8 prices.
type Prices = StaleCache<u32, u64, TokioClock, 4>;

/// One run of the act.
pub async fn run(setup: Setup) -> Degrade {
    let started = Instant::now();
    // Pricing: its handler behind the injector. Off at first; on, every
    // draw falls in the outcome's slice (rate 1): a 503, the handler not
    // called. The seed makes any lower rate replay the same faults.
    let handled = Arc::new(AtomicUsize::new(0));
    let config: ChaosConfig<Answer> = ChaosConfig::builder()
        .outcome(1.0, || Ok(StatusCode::SERVICE_UNAVAILABLE.into_response()))
        .seed(13)
        .enabled(false)
        .build()
        .expect("chaos config");
    let chaos = Arc::new(Injector::new("pricing", config, TokioClock));
    let pricing_base = serve(
        Router::new()
            .route("/price/{sku}", get(price))
            .route_layer(ChaosLayer::new(chaos.clone()))
            .with_state(handled.clone()),
    )
    .await;

    // The storefront: pricing through its policy, under the cache.
    let client = net::client();
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(setup.open)
        .half_open_calls(1)
        .build()
        .expect("pricing breaker");
    let pricing: Arc<Policy<TokioClock>> = Arc::new(
        Policy::new(
            "pricing",
            PolicyConfig::builder(4)
                .call_timeout(Duration::from_secs(1))
                .breaker(breaker)
                .build()
                .expect("pricing policy"),
            TokioClock,
        )
        .expect("pricing policy"),
    );
    let prices = Arc::new(Prices::new("prices", MAX_STALENESS, TokioClock));
    // GET /price/{sku}; a status other than 2xx is the call's error (0: no
    // answer, or one that is not a price).
    let ask = {
        let client = client.clone();
        tower::service_fn(move |sku: u32| {
            let (client, url) = (client.clone(), format!("{pricing_base}/price/{sku}"));
            async move {
                let resp = client.get(url).send().await.map_err(|_| 0u16)?;
                if !resp.status().is_success() {
                    return Err(resp.status().as_u16());
                }
                let text = resp.text().await.map_err(|_| 0u16)?;
                text.parse::<u64>().map_err(|_| 0u16)
            }
        })
    };
    let priced = StaleCacheLayer::new(prices.clone(), |sku: &u32| *sku)
        .layer(PolicyLayer::new(pricing.clone()).layer(ask));
    let front = {
        let prices = prices.clone();
        serve(Router::new().route(
            "/product/{sku}",
            get(move |Path(sku): Path<u32>| {
                let (priced, prices) = (priced.clone(), prices.clone());
                async move { page(sku, priced.oneshot(sku).await, &prices) }
            }),
        ))
        .await
    };

    let act = Act {
        client,
        front,
        chaos,
        handled,
        pricing,
    };
    let mut rows = Vec::new();

    // Healthy: each price recorded.
    for sku in [42, 7] {
        rows.push(act.visit(sku).await);
    }
    tokio::time::sleep(setup.step).await;

    // Pricing fails: two 503s (the page serves the cached price), which with
    // the two good calls before them make half of the window: it opens.
    act.chaos.enable();
    for sku in [42, 42] {
        tokio::time::sleep(setup.step).await;
        rows.push(act.visit(sku).await);
    }
    let opened = Instant::now();
    // Open: refused without a request; the cache answers, except for a sku
    // it never saw.
    for sku in [42, 7, 9, 42] {
        tokio::time::sleep(setup.step).await;
        rows.push(act.visit(sku).await);
    }

    // Pricing recovers; once the open wait is over the breaker lets one
    // probe through, which closes it, and the prices are fresh again.
    act.chaos.disable();
    let wait =
        (opened + setup.open + Duration::from_millis(50)).saturating_duration_since(Instant::now());
    tokio::time::sleep(wait).await;
    let probe = (rows.len(), act.pricing.breaker().state());
    for sku in [42, 7, 9] {
        rows.push(act.visit(sku).await);
    }

    Degrade {
        rows,
        probe,
        handled: act.handled.load(SeqCst),
        injected: act.chaos.metrics().injected(Fault::Outcome),
        refused: act.pricing.breaker().metrics().rejected,
        cache: prices.metrics(),
        took: started.elapsed(),
    }
}

/// The tour's side of the act: its client, and what it reads of pricing.
struct Act {
    client: reqwest::Client,
    front: String,
    chaos: Arc<Injector<TokioClock, Answer>>,
    handled: Arc<AtomicUsize>,
    pricing: Arc<Policy<TokioClock>>,
}

impl Act {
    /// Requests that reached pricing: its handler's, and the injector's.
    fn reached(&self) -> usize {
        self.handled.load(SeqCst) + self.chaos.metrics().injected(Fault::Outcome)
    }

    /// `GET /product/{sku}`, and whether pricing was asked for it.
    async fn visit(&self, sku: u32) -> Row {
        let (chaos, before) = (self.chaos.is_enabled(), self.reached());
        let url = format!("{}/product/{sku}", self.front);
        let (status, source, body) = match self.client.get(url).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let source = resp
                    .headers()
                    .get(X_PRICE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| Source::ALL.into_iter().find(|s| s.label() == v));
                let body = resp.text().await.unwrap_or_else(|e| e.to_string());
                (status, source, body)
            }
            Err(e) => (0, None, e.to_string()),
        };
        Row {
            sku,
            chaos,
            sent: self.reached() > before,
            status,
            source,
            breaker: self.pricing.breaker().state(),
            body,
        }
    }
}

fn state(s: BreakerState) -> String {
    s.as_str().replace('_', "-")
}

/// The table and the counts.
pub fn print(d: &Degrade) {
    println!(
        "  {:>2}  {:<7}  {:<8}  {:<13}  {:<13}  page",
        "#", "product", "injector", "pricing asked", "breaker after"
    );
    for (i, r) in d.rows.iter().enumerate() {
        if i == d.probe.0 {
            println!(
                "  -- injector off, the open wait over: breaker {} (the next page's call is its probe)",
                state(d.probe.1)
            );
        }
        println!(
            "  {:>2}  {:<7}  {:<8}  {:<13}  {:<13}  {} {}",
            i + 1,
            r.sku,
            if r.chaos { "on" } else { "off" },
            if r.sent { "yes" } else { "no" },
            state(r.breaker),
            r.status,
            r.body
        );
    }
    println!(
        "  pages: {} fresh, {} stale after pricing's 503, {} stale while its breaker was open, {} without a price",
        d.count(Source::Fresh),
        d.count(Source::StaleAfterFailure),
        d.count(Source::StaleAfterRefusal),
        d.count(Source::Unavailable),
    );
    println!(
        "  pricing: {} requests reached it ({} answered by its handler, {} answered 503 by the injector); \
         its breaker refused {} calls, and {} pages sent it nothing",
        d.handled + d.injected,
        d.handled,
        d.injected,
        d.refused,
        d.not_sent()
    );
    println!(
        "  cache {:?}: {} prices recorded, {} served stale, {} miss (nothing recorded), {} too old; act took {} ms",
        d.cache.name,
        d.cache.recorded,
        d.cache.served_stale,
        d.cache.missed_absent,
        d.cache.missed_too_old,
        d.took.as_millis()
    );
}
