//! Act 9: both rate limits on a `ManualClock` that only the test moves.

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
