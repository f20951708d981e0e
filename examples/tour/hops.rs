//! The tour's act 12: the request budget across three hops of loopback
//! HTTP (feature `http`). A (the tour, a reqwest client) → B (an axum
//! server that calls C) → C (an axum server whose job takes a second, in
//! 10 ms steps, in a task of its own so that only its budget stops it).
//! A has 300 ms. Twice: with the layers (`OutboundDeadlineLayer` at A and
//! B, a margin of 25 ms a hop; `InboundDeadlineLayer` at B and C, each
//! server's own maximum 10 s), and with the header off — A still gives up
//! at 300 ms, but tells no one.
//!
//! The same three hops as `tests/deadline_http.rs`, which asserts them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineLayer};

/// A's budget for the whole request.
pub const BUDGET: Duration = Duration::from_millis(300);
/// What each sender keeps back for the network.
pub const MARGIN: Duration = Duration::from_millis(25);
/// Each server's own maximum (what a request without the header gets).
const SERVER_MAX: Duration = Duration::from_secs(10);
const STEP: Duration = Duration::from_millis(10);
/// C's job: 100 steps of 10 ms.
pub const STEPS: usize = 100;

/// What one run saw, in ms since A sent its request.
#[derive(Debug, Default)]
pub struct Hops {
    /// B's budget on arrival.
    pub b_budget: Option<Duration>,
    /// C's budget on arrival.
    pub c_budget: Option<Duration>,
    /// Steps of its job C started.
    pub c_steps: usize,
    /// When C's job ended, and whether it was all of it.
    pub c_end: Option<(Duration, bool)>,
    /// What A got, and when.
    pub a_answer: String,
    pub a_took: Duration,
}

struct Shared {
    start: Instant,
    hops: Mutex<Hops>,
}

type Ctx = Arc<Shared>;

/// reqwest as a tower client of `axum::http::Request`s.
fn reqwest_service(
    client: reqwest::Client,
) -> impl Service<
    axum::http::Request<String>,
    Response = StatusCode,
    Error = reqwest::Error,
    Future: Send,
> + Clone
       + Send {
    tower::service_fn(move |req: axum::http::Request<String>| {
        let client = client.clone();
        async move {
            let resp = client.execute(reqwest::Request::try_from(req)?).await?;
            Ok(StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY))
        }
    })
}

async fn refused(e: InboundDeadlineError<Infallible>) -> StatusCode {
    match e {
        InboundDeadlineError::Malformed(_) => StatusCode::BAD_REQUEST,
        InboundDeadlineError::Refused { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::GATEWAY_TIMEOUT,
    }
}

async fn c_job(
    State(ctx): State<Ctx>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    ctx.hops.lock().expect("log").c_budget = Some(deadline.remaining());
    let job = tokio::spawn(async move {
        let mut done = 0;
        while done < STEPS && !deadline.is_expired() {
            done += 1;
            let _ = deadline.run(tokio::time::sleep(STEP)).await;
        }
        let mut hops = ctx.hops.lock().expect("log");
        hops.c_steps = done;
        hops.c_end = Some((ctx.start.elapsed(), done == STEPS));
        done == STEPS
    });
    match job.await {
        Ok(true) => StatusCode::OK,
        _ => StatusCode::GATEWAY_TIMEOUT,
    }
}

#[derive(Clone)]
struct B {
    ctx: Ctx,
    c: String,
    client: reqwest::Client,
    propagate: bool,
}

async fn b_calls_c(
    State(b): State<B>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    b.ctx.hops.lock().expect("log").b_budget = Some(deadline.remaining());
    let req = axum::http::Request::builder()
        .uri(format!("{}/job", b.c))
        .extension(deadline)
        .body(String::new())
        .expect("request");
    let answer = if b.propagate {
        OutboundDeadlineLayer::<TokioClock>::new(MARGIN)
            .layer(reqwest_service(b.client))
            .oneshot(req)
            .await
            .map_err(|e| e.is_deadline())
    } else {
        reqwest_service(b.client)
            .oneshot(req)
            .await
            .map_err(|_| false)
    };
    match answer {
        Ok(status) => status,
        Err(true) => StatusCode::GATEWAY_TIMEOUT,
        Err(false) => StatusCode::BAD_GATEWAY,
    }
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("server") });
    base
}

/// One run: A → B → C with the header (`propagate`) or without.
pub async fn run(propagate: bool) -> Hops {
    let ctx = Arc::new(Shared {
        start: Instant::now(),
        hops: Mutex::default(),
    });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    let c = serve(
        Router::new()
            .route("/job", get(c_job))
            .route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(InboundDeadlineLayer::new(TokioClock, SERVER_MAX)),
            )
            .with_state(ctx.clone()),
    )
    .await;
    let b = serve(
        Router::new()
            .route("/work", get(b_calls_c))
            .route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(InboundDeadlineLayer::new(TokioClock, SERVER_MAX)),
            )
            .with_state(B {
                ctx: ctx.clone(),
                c,
                client: client.clone(),
                propagate,
            }),
    )
    .await;

    let deadline = Deadline::after(TokioClock, BUDGET);
    let req = axum::http::Request::builder()
        .uri(format!("{b}/work"))
        .extension(deadline)
        .body(String::new())
        .expect("request");
    let sent = Instant::now();
    let answer = if propagate {
        match OutboundDeadlineLayer::<TokioClock>::new(MARGIN)
            .layer(reqwest_service(client))
            .oneshot(req)
            .await
        {
            Ok(status) => format!("{}", status.as_u16()),
            Err(e) => format!("{e}"),
        }
    } else {
        match deadline.run(reqwest_service(client).oneshot(req)).await {
            Ok(Ok(status)) => format!("{}", status.as_u16()),
            Ok(Err(e)) => format!("{e}"),
            Err(_) => "gave up (its own deadline)".to_owned(),
        }
    };
    let a_took = sent.elapsed();
    // C's job ends by its budget or after its second (bounded: 3 s).
    let waited = Instant::now();
    while ctx.hops.lock().expect("log").c_end.is_none() && waited.elapsed() < Duration::from_secs(3)
    {
        tokio::time::sleep(STEP).await;
    }
    let mut hops = std::mem::take(&mut *ctx.hops.lock().expect("log"));
    hops.a_answer = answer;
    hops.a_took = a_took;
    hops
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| format!("{} ms", d.as_millis()))
}

/// One line per run.
pub fn print(label: &str, h: &Hops) {
    let end = match h.c_end {
        Some((at, true)) => format!("finished its job at {} ms", at.as_millis()),
        Some((at, false)) => format!("stopped by its budget at {} ms", at.as_millis()),
        None => "still working".to_owned(),
    };
    println!(
        "  {label:<16} A: {:<28} after {:>4} ms | B got {:>8} | C got {:>8}, ran {:>3} of {STEPS} steps, {end}",
        h.a_answer,
        h.a_took.as_millis(),
        ms(h.b_budget),
        ms(h.c_budget),
        h.c_steps,
    );
}
