#![cfg(not(loom))]
//! The request budget across three hops of real HTTP on 127.0.0.1: A (this
//! test, a reqwest client) → B (an axum server that calls C) → C (an axum
//! server whose work takes a second). A has 300 ms.
//!
//! C's work runs in a task of its own, as work handed to a worker pool or a
//! database does: dropping C's handler (or closing its connection) does not
//! stop it. What stops it is the budget: the work is a loop of 10 ms steps
//! and checks C's `Deadline` (from the request's extensions) before each
//! one, logging the instant it checked. So "no step started after A's
//! deadline" follows from the instants C's own checks read, not from how
//! fast anything ran.
//!
//! - With the layers, C's budget is what A had, less what each hop spent
//!   and two 25 ms margins: C stops before A's deadline, neither B nor C
//!   starts any work after it, and A has its error well before C's second.
//! - The control: the same servers, the budget header not sent. B and C
//!   each get their server's own 10 s; A still gives up at 300 ms, and C
//!   works its full second for nobody.
//!
//! Counts and order are asserted, and instants against instants; the one
//! latency bound (A's answer well under C's second) is loose.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use watertight::clock::{Clock, Instant, TokioClock};
use watertight::deadline::Deadline;
use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineLayer};

const BUDGET: Duration = Duration::from_millis(300);
const MARGIN: Duration = Duration::from_millis(25);
const SERVER_MAX: Duration = Duration::from_secs(10);
const STEP: Duration = Duration::from_millis(10);
/// C's work: 100 steps of 10 ms.
const STEPS: usize = 100;
/// A guard against hangs only.
const PATIENCE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// B's handler started (and calls C).
    BStarted(Instant),
    /// C's handler started, with its budget.
    CStarted(Instant, Duration),
    /// C started one step of its work.
    CStep(Instant),
    /// C stopped its work: out of budget after `steps` steps.
    CStopped(Instant, usize),
    /// C finished all its steps.
    CFinished(Instant),
}

type Log = Arc<Mutex<Vec<Event>>>;

fn log(l: &Log, e: Event) {
    l.lock().unwrap().push(e);
}

/// reqwest as a tower client of `http::Request`s: what the outbound layer
/// wraps. Answers with the status.
fn reqwest_service(
    client: reqwest::Client,
) -> impl Service<
    http::Request<String>,
    Response = StatusCode,
    Error = reqwest::Error,
    Future: Send + 'static,
> + Clone
       + Send
       + 'static {
    tower::service_fn(move |req: http::Request<String>| {
        let client = client.clone();
        async move {
            let resp = client.execute(reqwest::Request::try_from(req)?).await?;
            Ok(StatusCode::from_u16(resp.status().as_u16()).unwrap())
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

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn inbound() -> InboundDeadlineLayer<TokioClock> {
    InboundDeadlineLayer::new(TokioClock, SERVER_MAX)
}

async fn c_work(
    State(l): State<Log>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    log(&l, Event::CStarted(TokioClock.now(), deadline.remaining()));
    // Handed to a task of its own: only the budget stops it.
    let work = tokio::spawn(async move {
        for step in 0..STEPS {
            let now = TokioClock.now();
            if now >= deadline.instant() {
                log(&l, Event::CStopped(now, step));
                return false;
            }
            log(&l, Event::CStep(now));
            let _ = deadline.run(tokio::time::sleep(STEP)).await;
        }
        log(&l, Event::CFinished(TokioClock.now()));
        true
    });
    // Work cut short by the budget is no answer (if the inbound layer has
    // not answered 504 already).
    match work.await {
        Ok(true) => StatusCode::OK,
        _ => StatusCode::GATEWAY_TIMEOUT,
    }
}

#[derive(Clone)]
struct B {
    log: Log,
    c: String,
    client: reqwest::Client,
    propagate: bool,
}

async fn b_work(
    State(b): State<B>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    log(&b.log, Event::BStarted(TokioClock.now()));
    let req = http::Request::builder()
        .uri(format!("{}/work", b.c))
        .extension(deadline)
        .body(String::new())
        .unwrap();
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

/// What A saw, and when its deadline was.
struct Run {
    a_deadline: Instant,
    a_answer: Result<StatusCode, bool>,
    a_took: Duration,
    log: Vec<Event>,
}

async fn three_hops(propagate: bool) -> Run {
    let l: Log = Arc::default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let c = serve(
        Router::new()
            .route("/work", get(c_work))
            .route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(inbound()),
            )
            .with_state(l.clone()),
    )
    .await;
    let b = serve(
        Router::new()
            .route("/work", get(b_work))
            .route_layer(
                ServiceBuilder::new()
                    .layer(HandleErrorLayer::new(refused))
                    .layer(inbound()),
            )
            .with_state(B {
                log: l.clone(),
                c,
                client: client.clone(),
                propagate,
            }),
    )
    .await;

    // A: 300 ms for the whole request.
    let deadline = Deadline::after(TokioClock, BUDGET);
    let req = http::Request::builder()
        .uri(format!("{b}/work"))
        .extension(deadline)
        .body(String::new())
        .unwrap();
    let start = std::time::Instant::now();
    let a_answer = if propagate {
        OutboundDeadlineLayer::<TokioClock>::new(MARGIN)
            .layer(reqwest_service(client))
            .oneshot(req)
            .await
            .map_err(|e| e.is_deadline())
    } else {
        // Headers off: A still gives up at its deadline, but tells no one.
        match deadline.run(reqwest_service(client).oneshot(req)).await {
            Ok(r) => r.map_err(|_| false),
            Err(_elapsed) => Err(true),
        }
    };
    let a_took = start.elapsed();

    // Wait for C's work to end, whichever way (bounded).
    let ended = |log: &[Event]| {
        log.iter()
            .any(|e| matches!(e, Event::CStopped(..) | Event::CFinished(..)))
    };
    let waited = std::time::Instant::now();
    while !ended(&l.lock().unwrap()) {
        assert!(
            waited.elapsed() < PATIENCE,
            "C's work never ended: {:?}",
            l.lock().unwrap()
        );
        tokio::time::sleep(STEP).await;
    }
    let log = l.lock().unwrap().clone();
    Run {
        a_deadline: deadline.instant(),
        a_answer,
        a_took,
        log,
    }
}

fn steps(log: &[Event]) -> Vec<Instant> {
    log.iter()
        .filter_map(|e| match e {
            Event::CStep(at) => Some(*at),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_travels_a_to_b_to_c_and_c_stops_before_a_gives_up() {
    let run = three_hops(true).await;
    let log = &run.log;
    println!("A: {:?} after {:?}; log: {log:?}", run.a_answer, run.a_took);

    // A got an error (B's 504, or its own cut), well before C's second.
    assert!(
        matches!(run.a_answer, Ok(StatusCode::GATEWAY_TIMEOUT) | Err(true)),
        "{:?}",
        run.a_answer
    );
    assert!(run.a_took < Duration::from_millis(800), "{:?}", run.a_took);

    // One request each at B and C; C started with less than A's budget,
    // two margins less at least.
    let b_started: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::BStarted(at) => Some(*at),
            _ => None,
        })
        .collect();
    let c_budgets: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::CStarted(_, budget) => Some(*budget),
            _ => None,
        })
        .collect();
    assert_eq!(b_started.len(), 1, "{log:?}");
    assert_eq!(c_budgets.len(), 1, "{log:?}");
    assert!(c_budgets[0] <= BUDGET - 2 * MARGIN, "{c_budgets:?}");

    // C stopped by its budget, never finished, and its stop came before
    // A's deadline; B and C started nothing after it.
    let stops: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::CStopped(at, n) => Some((*at, *n)),
            _ => None,
        })
        .collect();
    assert_eq!(stops.len(), 1, "{log:?}");
    assert!(!log.iter().any(|e| matches!(e, Event::CFinished(_))));
    let (stopped_at, done) = stops[0];
    assert!(done < STEPS, "{done}");
    assert!(
        stopped_at < run.a_deadline,
        "C stopped at {stopped_at:?}, A's deadline {:?}",
        run.a_deadline
    );
    assert!(b_started.iter().all(|&at| at < run.a_deadline));
    assert!(steps(log).iter().all(|&at| at < run.a_deadline), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_without_the_header_c_works_its_full_second_for_nobody() {
    let run = three_hops(false).await;
    let log = &run.log;
    println!(
        "control: A: {:?} after {:?}; C: {} steps",
        run.a_answer,
        run.a_took,
        steps(log).len()
    );

    // A gave up at its own deadline, as before.
    assert_eq!(run.a_answer, Err(true));
    // C got its server's budget, not A's, and did all its work: most of it
    // after A had given up.
    assert!(log
        .iter()
        .any(|e| matches!(e, Event::CStarted(_, budget) if *budget > BUDGET)));
    assert!(log.iter().any(|e| matches!(e, Event::CFinished(_))));
    assert!(!log.iter().any(|e| matches!(e, Event::CStopped(..))));
    let steps = steps(log);
    assert_eq!(steps.len(), STEPS);
    assert!(
        steps.iter().filter(|&&at| at >= run.a_deadline).count() > STEPS / 2,
        "{log:?}"
    );
}
