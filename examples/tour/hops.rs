//! The tour's act 12: the request budget across three hops of loopback
//! HTTP (feature `http`). A (the tour, a reqwest client) → B (an axum
//! server that calls C) → C (an axum server whose job takes a second, in
//! 10 ms steps, in a task of its own so that only its budget stops it).
//! A has 300 ms. Twice: with the layers (`OutboundDeadlineLayer` at A and
//! B, a margin of 25 ms a hop; `InboundDeadlineLayer` at B and C, each
//! server's own maximum 10 s), and with the header off — A still gives up
//! at 300 ms, but tells no one.
//!
//! B and C log what they do ([`Event`]), each instant read on the tour's
//! clock; the tour prints a line per run from the log, and
//! `tests/deadline_http.rs` compiles this file in and asserts the log: C
//! stops before A's deadline, and nothing starts after it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::{get, MethodRouter};
use axum::Router;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use watertight::clock::{Clock, Instant, TokioClock};
use watertight::deadline::Deadline;
use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineLayer};

use crate::net::{self, serve};

/// A's budget for the whole request.
pub const BUDGET: Duration = Duration::from_millis(300);
/// What each sender keeps back for the network.
pub const MARGIN: Duration = Duration::from_millis(25);
/// Each server's own maximum (what a request without the header gets).
const SERVER_MAX: Duration = Duration::from_secs(10);
pub const STEP: Duration = Duration::from_millis(10);
/// C's job: 100 steps of 10 ms.
pub const STEPS: usize = 100;
/// How long the tour waits, after A's answer, for C's job to end.
pub const PATIENCE: Duration = Duration::from_secs(3);

/// What happened at B and C, in order, each instant read on the tour's
/// clock by the server that logged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// B's handler started (and calls C), with its budget.
    BStarted(Instant, Duration),
    /// C's handler started, with its budget.
    CStarted(Instant, Duration),
    /// C started one step of its job.
    CStep(Instant),
    /// C stopped its job: out of budget after `steps` steps.
    CStopped(Instant, usize),
    /// C finished all its steps.
    CFinished(Instant),
}

/// What A got: a status, or an error (its deadline's, or another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Status(StatusCode),
    Failed {
        /// The deadline ended it: the outbound layer's, or A's own.
        deadline: bool,
        /// What A makes of it.
        error: String,
    },
}

/// One run, A → B → C.
#[derive(Debug)]
pub struct Run {
    /// When the run began, servers not yet started: what the tour's
    /// milliseconds count from.
    pub start: Instant,
    /// A's deadline.
    #[allow(dead_code)] // what tests/deadline_http.rs holds the log against
    pub a_deadline: Instant,
    /// What A got, and how long it took from sending its request.
    pub a_answer: Answer,
    pub a_took: Duration,
    /// What B and C did, in order.
    pub log: Vec<Event>,
}

/// Whether C's job has ended, either way.
pub fn ended(log: &[Event]) -> bool {
    log.iter()
        .any(|e| matches!(e, Event::CStopped(..) | Event::CFinished(..)))
}

type Log = Arc<Mutex<Vec<Event>>>;

fn log(l: &Log, e: Event) {
    l.lock().expect("log").push(e);
}

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
    State(l): State<Log>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    log(&l, Event::CStarted(TokioClock.now(), deadline.remaining()));
    // Handed to a task of its own: only the budget stops it.
    let job = tokio::spawn(async move {
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
    // A job cut short by the budget is no answer (if the inbound layer has
    // not answered 504 already).
    match job.await {
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

async fn b_calls_c(
    State(b): State<B>,
    Extension(deadline): Extension<Deadline<TokioClock>>,
) -> StatusCode {
    log(
        &b.log,
        Event::BStarted(TokioClock.now(), deadline.remaining()),
    );
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

/// A server with the inbound layer on its one route: its handler's
/// `Deadline` from the header, capped by the server's own maximum.
fn hop<S: Clone + Send + Sync + 'static>(path: &str, route: MethodRouter<S>, state: S) -> Router {
    Router::new()
        .route(path, route)
        .route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .layer(InboundDeadlineLayer::new(TokioClock, SERVER_MAX)),
        )
        .with_state(state)
}

/// One run: A → B → C with the header (`propagate`) or without; then a
/// wait of at most `patience` for C's job to end, whichever way.
pub async fn run(propagate: bool, patience: Duration) -> Run {
    let start = TokioClock.now();
    let l = Log::default();
    let client = net::client();
    let c = serve(hop("/job", get(c_job), l.clone())).await;
    let b = B {
        log: l.clone(),
        c,
        client: client.clone(),
        propagate,
    };
    let b = serve(hop("/work", get(b_calls_c), b)).await;

    // A: 300 ms for the whole request.
    let deadline = Deadline::after(TokioClock, BUDGET);
    let req = axum::http::Request::builder()
        .uri(format!("{b}/work"))
        .extension(deadline)
        .body(String::new())
        .expect("request");
    let sent = std::time::Instant::now();
    let failed = |deadline, error| Answer::Failed { deadline, error };
    let a_answer = if propagate {
        match OutboundDeadlineLayer::<TokioClock>::new(MARGIN)
            .layer(reqwest_service(client))
            .oneshot(req)
            .await
        {
            Ok(status) => Answer::Status(status),
            Err(e) => failed(e.is_deadline(), format!("{e}")),
        }
    } else {
        // Header off: A still gives up at its deadline, but tells no one.
        match deadline.run(reqwest_service(client).oneshot(req)).await {
            Ok(Ok(status)) => Answer::Status(status),
            Ok(Err(e)) => failed(false, format!("{e}")),
            Err(_) => failed(true, "gave up (its own deadline)".to_owned()),
        }
    };
    let a_took = sent.elapsed();
    // C's job ends by its budget or after its second (bounded).
    let waited = std::time::Instant::now();
    while !ended(&l.lock().expect("log")) && waited.elapsed() < patience {
        tokio::time::sleep(STEP).await;
    }
    let log = l.lock().expect("log").clone();
    Run {
        start,
        a_deadline: deadline.instant(),
        a_answer,
        a_took,
        log,
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| format!("{} ms", d.as_millis()))
}

/// One line per run: what A got, B's and C's budgets on arrival, and how
/// C's job ended, in ms since the run began.
pub fn print(label: &str, run: &Run) {
    let (mut b_budget, mut c_budget, mut c_steps, mut end) = (None, None, 0, None);
    for e in &run.log {
        match *e {
            Event::BStarted(_, budget) => b_budget = Some(budget),
            Event::CStarted(_, budget) => c_budget = Some(budget),
            Event::CStep(_) => c_steps += 1,
            Event::CStopped(at, _) => end = Some((at - run.start, false)),
            Event::CFinished(at) => end = Some((at - run.start, true)),
        }
    }
    let end = match end {
        Some((at, true)) => format!("finished its job at {} ms", at.as_millis()),
        Some((at, false)) => format!("stopped by its budget at {} ms", at.as_millis()),
        None => "still working".to_owned(),
    };
    let answer = match &run.a_answer {
        Answer::Status(status) => format!("{}", status.as_u16()),
        Answer::Failed { error, .. } => error.clone(),
    };
    println!(
        "  {label:<16} A: {answer:<28} after {:>4} ms | B got {:>8} | C got {:>8}, ran {c_steps:>3} of {STEPS} steps, {end}",
        run.a_took.as_millis(),
        ms(b_budget),
        ms(c_budget),
    );
}
