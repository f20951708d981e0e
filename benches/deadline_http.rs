//! What the budget's layers add to a request: `OutboundDeadlineLayer` on
//! the client and `InboundDeadlineLayer` on the server, against an empty
//! axum handler's round trip on 127.0.0.1 in the same run.
//!
//! | group / function | what |
//! |---|---|
//! | `deadline/round-trip/plain` | a GET of an empty handler: a reqwest client (an `http::Request` converted, as a tower client would), an axum server on its own runtime, keep-alive |
//! | `deadline/round-trip/layered` | the same with both layers: the request carries a `Deadline` (made per request), the client's layer writes `x-request-timeout-ms` and bounds the call, the server's reads it, starts the handler's `Deadline`, puts it in the extensions and bounds the handler |
//! | `deadline/layers/outbound` | the client's layer alone around a ready inner service: a request with a `Deadline` in its extensions, through the layer |
//! | `deadline/layers/inbound` | the server's layer alone around a ready inner service: a request with the header, through the layer |
//!
//! After criterion, a table of its own: medians of 11 rounds of 2 000
//! round trips each — plain, layered, each side's layer alone, and the
//! plain trip inside `tokio::time::timeout` (what a local cut costs without
//! the layer) — interleaved, and the layers' own cost (the `layers`
//! functions net of their bare requests, 200 000 calls each) as a share of
//! the plain round trip: the figure to hold under 2 %. The round trips'
//! differences are printed too, but on a shared machine they are within
//! their noise (a few per cent either way: the timeout-only trip has come
//! out faster than the plain one).
//!
//! Run: `cargo bench --bench deadline_http --features http,tokio -- --warm-up-time 1 --measurement-time 3`

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::hint::black_box;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use criterion::Criterion;
use tokio::runtime::Runtime;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineLayer};

const BUDGET: Duration = Duration::from_secs(10);

async fn empty() -> StatusCode {
    StatusCode::OK
}

async fn refused(_: InboundDeadlineError<Infallible>) -> StatusCode {
    StatusCode::GATEWAY_TIMEOUT
}

/// An axum server with `/plain` and `/layered` on a runtime of its own
/// (two worker threads); its address.
fn start_server() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().route("/plain", get(empty)).route(
                "/layered",
                get(empty).route_layer(
                    ServiceBuilder::new()
                        .layer(HandleErrorLayer::new(refused))
                        .layer(InboundDeadlineLayer::new(TokioClock, BUDGET)),
                ),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(format!("http://{}", listener.local_addr().unwrap()))
                .unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// reqwest as a tower client of `http::Request`s.
fn client(
    c: reqwest::Client,
) -> impl Service<
    http::Request<String>,
    Response = StatusCode,
    Error = reqwest::Error,
    Future: Future + 'static,
> + Clone {
    tower::service_fn(move |req: http::Request<String>| {
        let c = c.clone();
        async move {
            let resp = c.execute(reqwest::Request::try_from(req)?).await?;
            Ok(StatusCode::from_u16(resp.status().as_u16()).unwrap())
        }
    })
}

struct Client<P, L> {
    base: String,
    plain: P,
    layered: L,
}

fn clients(
    base: String,
) -> Client<
    impl Service<http::Request<String>, Response = StatusCode, Error = reqwest::Error> + Clone,
    impl Service<http::Request<String>, Response = StatusCode, Error: std::fmt::Debug> + Clone,
> {
    let c = reqwest::Client::builder().no_proxy().build().unwrap();
    Client {
        base,
        plain: client(c.clone()),
        layered: OutboundDeadlineLayer::<TokioClock>::new(Duration::from_millis(5))
            .layer(client(c)),
    }
}

async fn plain_trip<P>(c: &Client<P, impl Sized>)
where
    P: Service<http::Request<String>, Response = StatusCode, Error = reqwest::Error> + Clone,
{
    plain_trip_to(c, "plain").await
}

async fn plain_trip_to<P>(c: &Client<P, impl Sized>, path: &str)
where
    P: Service<http::Request<String>, Response = StatusCode, Error = reqwest::Error> + Clone,
{
    let req = http::Request::builder()
        .uri(format!("{}/{path}", c.base))
        .body(String::new())
        .unwrap();
    let status = c.plain.clone().oneshot(req).await.unwrap();
    assert_eq!(status, StatusCode::OK);
}

async fn layered_trip<L>(c: &Client<impl Sized, L>)
where
    L: Service<http::Request<String>, Response = StatusCode, Error: std::fmt::Debug> + Clone,
{
    layered_trip_to(c, "layered").await
}

async fn layered_trip_to<L>(c: &Client<impl Sized, L>, path: &str)
where
    L: Service<http::Request<String>, Response = StatusCode, Error: std::fmt::Debug> + Clone,
{
    let req = http::Request::builder()
        .uri(format!("{}/{path}", c.base))
        .extension(Deadline::after(TokioClock, BUDGET))
        .body(String::new())
        .unwrap();
    let status = c.layered.clone().oneshot(req).await.unwrap();
    assert_eq!(status, StatusCode::OK);
}

/// The plain round trip bounded by tokio's own timeout: what cutting a
/// call locally costs without the layer.
async fn timed_trip<P>(c: &Client<P, impl Sized>)
where
    P: Service<http::Request<String>, Response = StatusCode, Error = reqwest::Error> + Clone,
{
    tokio::time::timeout(BUDGET, plain_trip(c)).await.unwrap();
}

/// A ready inner service: what the layers wrap when measured alone.
#[derive(Clone, Copy)]
struct Ready200;

impl<B> Service<http::Request<B>> for Ready200 {
    type Response = StatusCode;
    type Error = Infallible;
    type Future = Ready<Result<StatusCode, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<B>) -> Self::Future {
        ready(Ok(StatusCode::OK))
    }
}

/// `iters` calls of `one` in a loop on `rt`: the loop's time.
fn looped<F, Fut>(rt: &Runtime, iters: u64, one: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(one().await);
        }
        start.elapsed()
    })
}

/// The outbound layer alone: a request with a `Deadline`, through it.
async fn outbound_alone() {
    let svc = OutboundDeadlineLayer::<TokioClock>::new(Duration::from_millis(5)).layer(Ready200);
    let req = http::Request::builder()
        .uri("http://127.0.0.1/")
        .extension(Deadline::after(TokioClock, BUDGET))
        .body(())
        .unwrap();
    black_box(svc.oneshot(req).await.unwrap());
}

/// The same request without the layer: what the outbound figure is net of.
async fn outbound_bare() {
    let req = http::Request::builder()
        .uri("http://127.0.0.1/")
        .body(())
        .unwrap();
    black_box(Ready200.oneshot(req).await.unwrap());
}

/// The inbound layer alone: a request with the header, through it.
async fn inbound_alone() {
    let svc = InboundDeadlineLayer::new(TokioClock, BUDGET).layer(Ready200);
    let req = http::Request::builder()
        .uri("http://127.0.0.1/")
        .header("x-request-timeout-ms", "9000")
        .body(())
        .unwrap();
    black_box(svc.oneshot(req).await.unwrap());
}

/// The same request without the layer.
async fn inbound_bare() {
    let req = http::Request::builder()
        .uri("http://127.0.0.1/")
        .header("x-request-timeout-ms", "9000")
        .body(())
        .unwrap();
    black_box(Ready200.oneshot(req).await.unwrap());
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = start_server();
    let c = clients(base);
    // Warm the connection.
    rt.block_on(async {
        plain_trip(&c).await;
        layered_trip(&c).await;
    });

    let mut crit = Criterion::default().configure_from_args();
    {
        let mut g = crit.benchmark_group("deadline/round-trip");
        g.bench_function("plain", |b| {
            b.iter_custom(|n| looped(&rt, n, || plain_trip(&c)))
        });
        g.bench_function("layered", |b| {
            b.iter_custom(|n| looped(&rt, n, || layered_trip(&c)))
        });
        g.finish();
    }
    {
        let mut g = crit.benchmark_group("deadline/layers");
        g.bench_function("outbound", |b| {
            b.iter_custom(|n| looped(&rt, n, outbound_alone))
        });
        g.bench_function("outbound-bare", |b| {
            b.iter_custom(|n| looped(&rt, n, outbound_bare))
        });
        g.bench_function("inbound", |b| {
            b.iter_custom(|n| looped(&rt, n, inbound_alone))
        });
        g.bench_function("inbound-bare", |b| {
            b.iter_custom(|n| looped(&rt, n, inbound_bare))
        });
        g.finish();
    }
    crit.final_summary();

    // The table: interleaved rounds, medians.
    const ROUNDS: usize = 11;
    const TRIPS: u64 = 2_000;
    const CALLS: u64 = 200_000;
    let (mut plain, mut layered) = (Vec::new(), Vec::new());
    let (mut client_only, mut server_only, mut timer_only) = (Vec::new(), Vec::new(), Vec::new());
    let (mut out, mut out_bare, mut inb, mut inb_bare) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        plain.push(looped(&rt, TRIPS, || plain_trip(&c)) / TRIPS as u32);
        layered.push(looped(&rt, TRIPS, || layered_trip(&c)) / TRIPS as u32);
        client_only.push(looped(&rt, TRIPS, || layered_trip_to(&c, "plain")) / TRIPS as u32);
        server_only.push(looped(&rt, TRIPS, || plain_trip_to(&c, "layered")) / TRIPS as u32);
        timer_only.push(looped(&rt, TRIPS, || timed_trip(&c)) / TRIPS as u32);
        out.push(looped(&rt, CALLS, outbound_alone) / CALLS as u32);
        out_bare.push(looped(&rt, CALLS, outbound_bare) / CALLS as u32);
        inb.push(looped(&rt, CALLS, inbound_alone) / CALLS as u32);
        inb_bare.push(looped(&rt, CALLS, inbound_bare) / CALLS as u32);
    }
    let (plain, layered) = (median(plain), median(layered));
    let (client_only, server_only, timer_only) =
        (median(client_only), median(server_only), median(timer_only));
    let (out, out_bare, inb, inb_bare) =
        (median(out), median(out_bare), median(inb), median(inb_bare));
    let layers = out.saturating_sub(out_bare) + inb.saturating_sub(inb_bare);
    let share = |d: Duration| 100.0 * d.as_secs_f64() / plain.as_secs_f64();
    println!();
    println!("deadline layers vs an empty axum handler's round trip (medians of {ROUNDS} interleaved rounds)");
    println!("| what | per request | of the plain round trip |");
    println!("|---|---|---|");
    println!("| plain round trip | {plain:?} | 100 % |");
    println!(
        "| layered round trip | {layered:?} | {:.1} % |",
        share(layered)
    );
    println!(
        "| client's layer only (to the plain route) | {client_only:?} | {:.1} % |",
        share(client_only)
    );
    println!(
        "| server's layer only (plain client, no header) | {server_only:?} | {:.1} % |",
        share(server_only)
    );
    println!(
        "| plain round trip inside `tokio::time::timeout` (a timer per call, no layer) | {timer_only:?} | {:.1} % |",
        share(timer_only)
    );
    println!(
        "| outbound layer alone (net of the bare request: {out_bare:?}) | {:?} | {:.2} % |",
        out.saturating_sub(out_bare),
        share(out.saturating_sub(out_bare))
    );
    println!(
        "| inbound layer alone (net of the bare request: {inb_bare:?}) | {:?} | {:.2} % |",
        inb.saturating_sub(inb_bare),
        share(inb.saturating_sub(inb_bare))
    );
    println!(
        "| both layers | {layers:?} | **{:.2} %** (target ≤ 2 %) |",
        share(layers)
    );
}
