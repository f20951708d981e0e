//! Act 9, a rate limit both ways, on a server of its own: a client held to
//! 50 requests a second with a burst of 10, and a route shedding the same
//! rate with 429 and `Retry-After`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::{Layer, ServiceBuilder, ServiceExt};
use watertight::clock::TokioClock;
use watertight::rate::{Quota, RateLimiter};
use watertight::tower::{RateLimitError, RateLimitLayer};

use crate::{header, json, ms, net, Json};

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
pub async fn act_9() {
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
