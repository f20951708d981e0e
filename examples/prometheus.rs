//! Prometheus metrics for a policy, served over HTTP by axum.
//!
//! A checkout endpoint calls a (simulated) payments system through a
//! `Policy` named `payments`; `GET /metrics` copies the policy's numbers into
//! the exporter's handles (registered once, at start-up) and renders the
//! Prometheus text. The example sends some traffic through the policy — a
//! burst that overflows its 2 slots, then a run of failures that opens its
//! breaker — prints the scrape and exits; with `--serve` it keeps serving on
//! 127.0.0.1:9898 for `curl`.
//!
//! ```text
//! cargo run --example prometheus --features metrics,tokio
//! cargo run --example prometheus --features metrics,tokio -- --serve
//! curl -s http://127.0.0.1:9898/metrics | grep -E '^(bulkhead|circuit)'
//! ```
//!
//! `tests/metrics_http.rs` scrapes this same server over HTTP.

use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::Arc;
use watertight::clock::TokioClock;
use watertight::metrics::PolicyExporter;
use watertight::policy::{Policy, PolicyConfig};
use watertight::BreakerConfig;

/// The shop: one policy for the payments system, its exporter, and the
/// recorder's handle that renders the scrape.
pub struct Shop {
    /// The payments system's policy (public for the test, which holds its
    /// slots to overflow it deterministically).
    pub payments: Policy<TokioClock, 8>,
    exporter: PolicyExporter,
    prometheus: PrometheusHandle,
}

/// Payments: 2 calls at once and no wait for a slot (a third is refused at
/// once: `reason="full"`), 1 s per call, and a breaker that opens once 2 of
/// its last 4 calls failed and stays open for a minute.
pub fn payments_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(Duration::from_secs(60))
        .build()
        .expect("payments breaker");
    PolicyConfig::builder(2)
        .max_wait(Duration::ZERO)
        .call_timeout(Duration::from_secs(1))
        .breaker(breaker)
        .build()
        .expect("payments policy")
}

/// Makes the shop and registers its metrics with the current recorder (the
/// global one, or a local one around this call): once, here, never per call.
pub fn shop(prometheus: PrometheusHandle) -> Arc<Shop> {
    let payments = Policy::new("payments", payments_policy(), TokioClock).expect("payments policy");
    watertight::metrics::describe();
    let exporter = PolicyExporter::new(&payments);
    Arc::new(Shop {
        payments,
        exporter,
        prometheus,
    })
}

/// `GET /checkout?upstream=down&delay_ms=200`: one call to payments through
/// the policy. `upstream=down` makes payments fail; `delay_ms` makes it slow.
async fn checkout(
    State(shop): State<Arc<Shop>>,
    RawQuery(query): RawQuery,
) -> (StatusCode, HeaderMap, String) {
    let query = query.unwrap_or_default();
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(k)?.strip_prefix('='))
    };
    let down = param("upstream") == Some("down");
    let delay = param("delay_ms").and_then(|v| v.parse().ok()).unwrap_or(0);
    let paid = shop
        .payments
        .call(|| async move {
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            if down {
                Err("payments answered 503")
            } else {
                Ok("paid")
            }
        })
        .await;
    let mut headers = HeaderMap::new();
    match paid {
        Ok(body) => (StatusCode::OK, headers, body.to_owned()),
        Err(e) if e.is_unavailable() => {
            if let Some(wait) = e.retry_after() {
                // Whole seconds, rounded up.
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                headers.insert(RETRY_AFTER, HeaderValue::from(secs));
            }
            let body = format!("{} unavailable", e.system());
            (StatusCode::SERVICE_UNAVAILABLE, headers, body)
        }
        Err(_) => (
            StatusCode::BAD_GATEWAY,
            headers,
            "payment failed".to_owned(),
        ),
    }
}

/// `GET /metrics`: update, then render. The update is a handful of atomic
/// loads and handle stores, paid per scrape, not per call.
async fn scrape(State(shop): State<Arc<Shop>>) -> String {
    shop.exporter.update(&shop.payments);
    shop.prometheus.render()
}

/// The routes.
pub fn router(shop: Arc<Shop>) -> Router {
    Router::new()
        .route("/checkout", get(checkout))
        .route("/metrics", get(scrape))
        .with_state(shop)
}

/// Serves `router(shop)` on `addr` (port 0: any free port); returns the base
/// URL.
pub async fn serve(shop: Arc<Shop>, addr: &str) -> String {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    tokio::spawn(async move { axum::serve(listener, router(shop)).await.expect("server") });
    base
}

/// Some traffic: a burst of 5 slow checkouts on 2 slots, then failures until
/// the breaker opens, then one more checkout that the open breaker refuses.
async fn traffic(client: &reqwest::Client, base: &str) {
    let get = |query: &'static str| {
        let url = format!("{base}/checkout{query}");
        let client = client.clone();
        async move {
            let r = client.get(url).send().await.expect("checkout");
            r.status().as_u16()
        }
    };
    let burst: Vec<_> = (0..5).map(|_| tokio::spawn(get("?delay_ms=200"))).collect();
    let mut statuses = Vec::new();
    for call in burst {
        statuses.push(call.await.expect("burst"));
    }
    println!("burst of 5 on 2 slots: {statuses:?}");
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(get("?upstream=down").await);
    }
    println!("payments down: {statuses:?}");
    println!("after the breaker opened: {}", get("").await);
}

#[tokio::main]
async fn main() {
    let serve_on = std::env::args().any(|a| a == "--serve");
    // One recorder for the process, installed before anything registers.
    let recorder = PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder");

    let shop = shop(prometheus);
    let addr = if serve_on {
        "127.0.0.1:9898"
    } else {
        "127.0.0.1:0"
    };
    let base = serve(shop, addr).await;
    // `no_proxy`: the server is on loopback.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    traffic(&client, &base).await;

    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("scrape body");
    println!("\nGET {base}/metrics\n");
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        println!("{line}");
    }
    if serve_on {
        println!("\nserving {base}/metrics and {base}/checkout until stopped");
        std::future::pending::<()>().await;
    }
}
