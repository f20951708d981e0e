//! The rate limit layer over real HTTP on 127.0.0.1 (axum server, reqwest
//! client, ports from the OS).
//!
//! Counts and bounds only. The inbound tests and the outbound refusal run
//! the limiter on a `ManualClock` that only the test moves, so which
//! requests are admitted is a fact of the test, not a timing. The outbound
//! rate test runs on real time (`TokioClock`) and asserts the GCRA bound
//! on what reached the server — by each arrival's time since the client
//! began, at most `burst + elapsed / T` — never a latency.
#![cfg(not(loom))]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{header, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::mpsc;
use tower::{Layer, ServiceBuilder, ServiceExt};
use watertight::clock::{ManualClock, TokioClock};
use watertight::rate::{Quota, RateLimiter};
use watertight::tower::{RateLimitError, RateLimitLayer};

/// A guard against hangs only; nothing is asserted about how long anything
/// takes.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The exact hint, in ms, beside the whole seconds of `Retry-After`.
const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("x-retry-after-ms");

/// The limiter's refusal as a server answers it: 429, `Retry-After` in
/// whole seconds rounded up, and the exact hint for the test.
async fn too_many(err: RateLimitError<Infallible>) -> Response {
    match err.retry_after() {
        Some(wait) => {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let headers = [
                (header::RETRY_AFTER, secs.to_string()),
                (RETRY_AFTER_MS, wait.as_millis().to_string()),
            ];
            (StatusCode::TOO_MANY_REQUESTS, headers, "slow down").into_response()
        }
        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// What reached the handler: a count, and each arrival's time since the
/// test's origin.
#[derive(Clone)]
struct Hits {
    count: Arc<AtomicUsize>,
    at: Arc<Mutex<Vec<Duration>>>,
    origin: Arc<Mutex<Option<Instant>>>,
}

impl Hits {
    fn new() -> Self {
        Hits {
            count: Arc::new(AtomicUsize::new(0)),
            at: Arc::default(),
            origin: Arc::default(),
        }
    }

    fn count(&self) -> usize {
        self.count.load(SeqCst)
    }
}

async fn search(State(hits): State<Hits>) -> &'static str {
    let now = Instant::now();
    hits.count.fetch_add(1, SeqCst);
    if let Some(origin) = *hits.origin.lock().unwrap() {
        hits.at.lock().unwrap().push(now.duration_since(origin));
    }
    "results"
}

/// Serves `/search`, behind `layer` if given, on a free loopback port;
/// returns its base URL.
async fn serve(hits: Hits, limiter: Option<Arc<RateLimiter<Arc<ManualClock>>>>) -> String {
    let route = match limiter {
        Some(limiter) => get(search).route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(too_many))
                .layer(RateLimitLayer::new(limiter)),
        ),
        None => get(search),
    };
    let app = Router::new().route("/search", route).with_state(hits);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Status, `Retry-After` and the exact hint of one answer.
type Answer = (u16, Option<String>, Option<String>);

/// `n` GETs of `url` sent at once, each its own task.
async fn burst(client: &reqwest::Client, url: &str, n: usize) -> Vec<Answer> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move {
                let resp = client.get(url).send().await.unwrap();
                let header = |name: &str| {
                    resp.headers()
                        .get(name)
                        .map(|v| v.to_str().unwrap().to_owned())
                };
                (
                    resp.status().as_u16(),
                    header("retry-after"),
                    header("x-retry-after-ms"),
                )
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

fn count(answers: &[Answer], status: u16) -> usize {
    answers.iter().filter(|a| a.0 == status).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_a_burst_of_30_gets_the_10_of_the_burst_and_20_429s_with_retry_after() {
    tokio::time::timeout(HANG_GUARD, async {
        let clock = Arc::new(ManualClock::new());
        let quota = Quota::per_second(50).burst(10);
        let limiter = Arc::new(RateLimiter::new("api", quota, clock.clone()));
        let hits = Hits::new();
        let base = serve(hits.clone(), Some(limiter.clone())).await;
        let (client, url) = (client(), format!("{base}/search"));

        let answers = burst(&client, &url, 30).await;
        assert_eq!((count(&answers, 200), count(&answers, 429)), (10, 20));
        assert_eq!(hits.count(), 10, "the handler saw exactly the burst");
        for a in answers.iter().filter(|a| a.0 == 429) {
            // Refusals write nothing: all see the same schedule, one
            // emission interval (20 ms) from the next cell.
            assert_eq!(a.1.as_deref(), Some("1"), "Retry-After, whole seconds up");
            assert_eq!(a.2.as_deref(), Some("20"), "the exact hint");
        }
        let m = limiter.metrics();
        assert_eq!((m.admitted, m.refused), (10, 20));

        // 100 ms later, 5 cells have conformed: 5 of 8 more.
        clock.advance(Duration::from_millis(100));
        let answers = burst(&client, &url, 8).await;
        assert_eq!((count(&answers, 200), count(&answers, 429)), (5, 3));
        assert_eq!(hits.count(), 15);
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_per_request_as_axum_makes_holds_a_5_per_second_limit() {
    tokio::time::timeout(HANG_GUARD, async {
        // axum#3682's case, bounded: a limit of 5 a second against 100
        // requests at once. axum clones the route's service per request;
        // every clone asks the one limiter.
        let clock = Arc::new(ManualClock::new());
        let limiter = Arc::new(RateLimiter::new("api", Quota::per_second(5), clock));
        let hits = Hits::new();
        let base = serve(hits.clone(), Some(limiter.clone())).await;

        let answers = burst(&client(), &format!("{base}/search"), 100).await;
        assert_eq!((count(&answers, 200), count(&answers, 429)), (5, 95));
        assert_eq!(hits.count(), 5);
        for a in answers.iter().filter(|a| a.0 == 429) {
            assert_eq!(a.2.as_deref(), Some("200"), "one interval of 5/s");
        }

        // The same through an explicit clone per request, as axum's
        // router does it (clone, ready, call), in one task.
        let direct =
            RateLimitLayer::new(limiter.clone()).layer(tower::service_fn(|_: u32| async {
                Ok::<_, Infallible>(())
            }));
        let mut admitted = 0;
        for i in 0..100 {
            admitted += usize::from(direct.clone().oneshot(i).await.is_ok());
        }
        assert_eq!(admitted, 0, "the burst is spent; the clones share it");
        assert_eq!(limiter.metrics().refused, 195);
    })
    .await
    .expect("test hung");
}

/// A GET through the client, its status.
async fn get_status(client: reqwest::Client, url: String) -> Result<u16, reqwest::Error> {
    Ok(client.get(url).send().await?.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_40_requests_held_to_50_per_second_with_a_burst_of_10() {
    tokio::time::timeout(HANG_GUARD, async {
        const N: usize = 40;
        const BURST: u32 = 10;
        let quota = Quota::per_second(50).burst(BURST);
        let interval = quota.emission_interval();
        let hits = Hits::new();
        let base = serve(hits.clone(), None).await;
        let limiter = Arc::new(RateLimiter::new("provider", quota, TokioClock));
        let http = client();
        let svc = RateLimitLayer::new(limiter.clone())
            .max_wait(Duration::from_secs(5))
            .layer(tower::service_fn(move |url: String| {
                get_status(http.clone(), url)
            }));

        let origin = Instant::now();
        *hits.origin.lock().unwrap() = Some(origin);
        let tasks: Vec<_> = (0..N)
            .map(|_| {
                let (svc, url) = (svc.clone(), format!("{base}/search"));
                tokio::spawn(async move { svc.oneshot(url).await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), 200);
        }

        let mut at = hits.at.lock().unwrap().clone();
        at.sort();
        assert_eq!(at.len(), N, "every request reached the server");
        // The k-th arrival, at `e` since the client began, is at most
        // `burst + ⌊e / T⌋` (1 µs of slack for the clocks' rounding).
        for (k, e) in at.iter().enumerate() {
            let allowed = BURST as u128 + (e.as_nanos() + 1_000) / interval.as_nanos();
            assert!(
                (k + 1) as u128 <= allowed,
                "arrival {} at {e:?}: only {allowed} may have been admitted by then",
                k + 1
            );
        }
        let m = limiter.metrics();
        assert_eq!((m.admitted, m.refused, m.waiting), (N, 0, 0));
        assert!(
            m.waited > 0,
            "the requests past the burst waited for their cells"
        );
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_requests_that_cannot_conform_within_the_max_wait_are_refused_at_once() {
    tokio::time::timeout(HANG_GUARD, async {
        let hits = Hits::new();
        let base = serve(hits.clone(), None).await;
        let clock = Arc::new(ManualClock::new());
        let quota = Quota::per_second(50).burst(10);
        let limiter = Arc::new(RateLimiter::new("provider", quota, clock.clone()));
        let http = client();
        let svc = RateLimitLayer::new(limiter.clone())
            .max_wait(Duration::from_millis(50))
            .layer(tower::service_fn(move |url: String| {
                get_status(http.clone(), url)
            }));

        // 20 at once: the burst goes now, 2 more conform within 50 ms (at
        // 20 and 40 ms), the other 8 are refused at once.
        let (tx, mut done) = mpsc::unbounded_channel();
        for _ in 0..20 {
            let (svc, url, tx) = (svc.clone(), format!("{base}/search"), tx.clone());
            tokio::spawn(async move { tx.send(svc.oneshot(url).await).unwrap() });
        }
        let mut first = Vec::new();
        for _ in 0..18 {
            first.push(done.recv().await.unwrap());
        }
        let ok = first.iter().filter(|r| matches!(r, Ok(200))).count();
        let refused: Vec<_> = first.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!((ok, refused.len()), (10, 8));
        for e in refused {
            // Refusals write nothing: the 13th cell conforms at 60 ms.
            let expect = Duration::from_millis(60);
            assert!(matches!(e, RateLimitError::Limited { retry_after } if *retry_after == expect));
        }
        assert_eq!(hits.count(), 10, "the waiting two have not been sent");
        assert_eq!(limiter.waiting(), 2);

        clock.advance(Duration::from_millis(40));
        for _ in 0..2 {
            assert!(matches!(done.recv().await.unwrap(), Ok(200)));
        }
        assert_eq!(hits.count(), 12);
        let m = limiter.metrics();
        assert_eq!((m.admitted, m.waited, m.refused, m.waiting), (12, 2, 8, 0));
    })
    .await
    .expect("test hung");
}

/// A limit per client, keyed by a request header: each client gets its own
/// burst, a client over its limit is answered 429 while the others are
/// served, and a new client finding its part of the table held by live
/// clients is answered 429 too (the table never grows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_layer_limits_each_client_on_its_own_and_never_grows() {
    use axum::extract::Request;
    use watertight::rate::KeyedRateLimiter;

    let clock = Arc::new(ManualClock::new());
    // One set of 8 slots: the ninth live client finds no slot.
    let per_client: Arc<KeyedRateLimiter<String, _, 1>> = Arc::new(KeyedRateLimiter::new(
        "search",
        Quota::per_second(10).burst(3),
        clock.clone(),
    ));
    let client_of = |req: &Request| {
        req.headers()
            .get("x-client")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("anonymous")
            .to_owned()
    };
    let hits = Hits::new();
    let route = get(search).route_layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(too_many))
            .layer(RateLimitLayer::keyed(per_client.clone(), client_of)),
    );
    let app = Router::new()
        .route("/search", route)
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/search", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let http = client();
    let get_as = |who: String| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let resp = http.get(url).header("x-client", who).send().await.unwrap();
            resp.status().as_u16()
        }
    };
    tokio::time::timeout(HANG_GUARD, async {
        // 8 clients, 5 requests each: each gets its burst of 3.
        let mut statuses = Vec::new();
        for c in 0..8 {
            for _ in 0..5 {
                statuses.push((c, get_as(format!("client-{c}")).await));
            }
        }
        for c in 0..8 {
            let ok = statuses.iter().filter(|s| s.0 == c && s.1 == 200).count();
            let shed = statuses.iter().filter(|s| s.0 == c && s.1 == 429).count();
            assert_eq!((ok, shed), (3, 2), "client-{c}");
        }
        assert_eq!(hits.count(), 24);
        // A ninth client while all eight are live: no slot, refused.
        assert_eq!(get_as("client-8".into()).await, 429);
        assert_eq!(per_client.metrics().full, 1);
        // Once the others' limits have refilled they are stale: the ninth
        // takes a slot, and the table still holds at most 8 keys.
        clock.advance(Duration::from_millis(300));
        assert_eq!(get_as("client-8".into()).await, 200);
        assert_eq!(hits.count(), 25);
        assert!(per_client.metrics().keys_live <= 8);
    })
    .await
    .unwrap();
}
