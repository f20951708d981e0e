//! The stale-if-error cache over real HTTP on 127.0.0.1 (axum server,
//! reqwest client, a port from the OS): a product page's price, fetched
//! from a pricing server through a policy and a `StaleCacheLayer`, is
//! served from the cache with its age while pricing is down and its
//! breaker open, and the refused requests never reach the server.
//!
//! Counts and order only. The policy and the cache run on a `ManualClock`
//! that only the test moves, so the age is exact and which call is refused
//! is a fact of the test, not a timing.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower::{Layer, ServiceExt};
use watertight::clock::ManualClock;
use watertight::fallback::{Served, Stale, StaleCache};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::tower::{PolicyLayer, StaleCacheLayer};
use watertight::{BreakerConfig, Rejection};

/// The pricing server: its hits, and whether it is failing.
#[derive(Clone, Default)]
struct Pricing {
    hits: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

async fn price(State(p): State<Pricing>, Path(sku): Path<u32>) -> Result<String, StatusCode> {
    p.hits.fetch_add(1, SeqCst);
    if p.down.load(SeqCst) {
        Err(StatusCode::SERVICE_UNAVAILABLE)
    } else {
        Ok((u64::from(sku) * 100).to_string())
    }
}

async fn serve(p: Pricing) -> String {
    let app = Router::new()
        .route("/price/{sku}", get(price))
        .with_state(p);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_is_served_with_its_age_while_pricing_is_down() {
    let server = Pricing::default();
    let base = serve(server.clone()).await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();

    let clock = Arc::new(ManualClock::new());
    let breaker = BreakerConfig::builder()
        .minimum_calls(1)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let pricing: Arc<Policy<_>> = Arc::new(
        Policy::new(
            "pricing",
            PolicyConfig::builder(4).breaker(breaker).build().unwrap(),
            clock.clone(),
        )
        .unwrap(),
    );
    let prices: Arc<StaleCache<u32, u64, _, 8>> = Arc::new(StaleCache::new(
        "prices",
        Duration::from_secs(300),
        clock.clone(),
    ));
    // The client: GET /price/{sku}; a non-2xx status is the call's error.
    let fetch = tower::service_fn(move |sku: u32| {
        let (client, url) = (client.clone(), format!("{base}/price/{sku}"));
        async move {
            let resp = client.get(url).send().await.map_err(|_| 0u16)?;
            if !resp.status().is_success() {
                return Err(resp.status().as_u16());
            }
            let text = resp.text().await.map_err(|_| 0u16)?;
            text.parse::<u64>().map_err(|_| 0u16)
        }
    });
    let page = StaleCacheLayer::new(prices.clone(), |sku: &u32| *sku)
        .layer(PolicyLayer::new(pricing.clone()).layer(fetch));
    let call = |sku| tokio::time::timeout(Duration::from_secs(30), page.clone().oneshot(sku));

    // Up: fresh, and recorded.
    assert_eq!(call(42).await.unwrap(), Ok(Served::Fresh(4200)));
    assert_eq!(server.hits.load(SeqCst), 1);

    // 42 s later pricing fails: its 503 is the call's own error, passed on
    // (never covered by the cache), and it opens the breaker.
    clock.advance(Duration::from_secs(42));
    server.down.store(true, SeqCst);
    let err = call(42).await.unwrap().unwrap_err();
    assert_eq!(err.into_inner(), Some(503));
    assert_eq!(server.hits.load(SeqCst), 2);

    // Refused by the open breaker: "price 42 s old", without a request.
    let stale = call(42).await.unwrap().unwrap();
    assert_eq!(
        stale,
        Served::Stale(Stale {
            value: 4200,
            age: Duration::from_secs(42)
        })
    );
    // A product never priced: the refusal, with the breaker's hint.
    let err = call(7).await.unwrap().unwrap_err();
    assert_eq!(
        *err.kind(),
        ErrorKind::CircuitOpen(Rejection::Open {
            retry_after: Duration::from_secs(30)
        })
    );
    assert_eq!(server.hits.load(SeqCst), 2, "refused requests never sent");
    let m = prices.metrics();
    assert_eq!((m.recorded, m.served_stale, m.missed_absent), (1, 1, 1));
}
