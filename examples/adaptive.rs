//! An adaptive bulkhead following a real server's capacity over HTTP.
//!
//! Run: `cargo run --release --example adaptive --features tokio`
//!
//! An axum server on `127.0.0.1` (a random free port, loopback only) has
//! `workers` request handlers: a request is served (50 ms of work) while a
//! handler is free, waits for one while fewer than 10 requests wait, and is
//! answered 503 at once past that. The program changes the worker count
//! during the run — 20, then 5, then 20 again, 3 s each — and calls the
//! server at 300 requests/s, open-loop (a new request every 3.3 ms whatever
//! happened to the others), each through one
//! [`AdaptiveBulkhead`](watertight::limit::AdaptiveBulkhead) running
//! [`Gradient2`] on tokio's clock, with windows of 100 ms (at least 10
//! calls). A call the bulkhead refuses never reaches the server; a 503 is
//! recorded as [`Signal::Dropped`] (the server shedding load), a 200 as a
//! success with its round trip.
//!
//! It prints, every 250 ms, the server's workers beside the limit and what
//! the calls saw in that quarter second, and a text plot of the limit (`#`)
//! against the workers (`|`). The limit's numbers differ a little from run
//! to run (real time, real sockets); the shape does not: the limit settles
//! near what 20 workers need for 300 requests/s (about 15 in flight), falls
//! towards the 5 workers when they are all there is, with the server's 503s
//! stopping, and climbs back when the workers return.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tokio::sync::Semaphore;
use watertight::clock::TokioClock;
use watertight::limit::{AdaptiveBulkhead, Gradient2, Signal};

const SERVICE: Duration = Duration::from_millis(50);
const QUEUE_BOUND: usize = 10;
const PHASES: [usize; 3] = [20, 5, 20];
const PHASE: Duration = Duration::from_secs(3);
const RATE_PER_SEC: u64 = 300;
const ROW: Duration = Duration::from_millis(250);

// ---------------------------------------------------------------- the server

/// The server's handlers (a semaphore's permits, added and taken away as
/// the worker count changes) and its queue.
struct Server {
    handlers: Semaphore,
    workers: AtomicUsize,
    waiting: AtomicUsize,
}

impl Server {
    /// Sets the worker count: permits added, or taken out of circulation
    /// (those in use are taken as they come back).
    async fn set_workers(self: &Arc<Self>, n: usize) {
        let old = self.workers.swap(n, SeqCst);
        if n > old {
            self.handlers.add_permits(n - old);
        } else if n < old {
            let this = self.clone();
            let fewer = (old - n) as u32;
            tokio::spawn(async move {
                if let Ok(p) = this.handlers.acquire_many(fewer).await {
                    p.forget();
                }
            });
        }
    }
}

async fn work(State(server): State<Arc<Server>>) -> StatusCode {
    if server.waiting.fetch_add(1, SeqCst) >= QUEUE_BOUND {
        server.waiting.fetch_sub(1, SeqCst);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let handler = server.handlers.acquire().await;
    server.waiting.fetch_sub(1, SeqCst);
    let Ok(_handler) = handler else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    tokio::time::sleep(SERVICE).await;
    StatusCode::OK
}

async fn start_server(server: Arc<Server>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    let app = Router::new().route("/work", get(work)).with_state(server);
    tokio::spawn(async move { axum::serve(listener, app).await.expect("server") });
    base
}

// ---------------------------------------------------------------- the client

/// What the calls of one row saw.
#[derive(Default)]
struct Row {
    ok: usize,
    dropped: usize,
    refused: usize,
    failed: usize,
    latencies_ms: Vec<f64>,
}

type Limit = AdaptiveBulkhead<TokioClock, Gradient2>;

async fn one_call(limit: Arc<Limit>, client: reqwest::Client, url: Arc<str>, row: Arc<Mutex<Row>>) {
    let Ok(call) = limit.try_acquire() else {
        row.lock().unwrap().refused += 1;
        return;
    };
    let started = std::time::Instant::now();
    let answer = client.get(&*url).send().await.map(|r| r.status());
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let signal = match answer {
        Ok(s) if s.is_success() => Signal::Success,
        Ok(s) if s == reqwest::StatusCode::SERVICE_UNAVAILABLE => Signal::Dropped,
        _ => Signal::Failure,
    };
    call.record(signal);
    let mut row = row.lock().unwrap();
    match signal {
        Signal::Success => {
            row.ok += 1;
            row.latencies_ms.push(ms);
        }
        Signal::Dropped => row.dropped += 1,
        _ => row.failed += 1,
    }
}

fn p50(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What a run changes: the worker counts and how long each lasts, the
/// arrival rate, how often a row is printed.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub phases: [usize; 3],
    pub phase: Duration,
    pub rate_per_sec: u64,
    pub row: Duration,
}

impl Setup {
    /// The run the guide shows (`guide::adaptive`).
    pub const DEFAULT: Setup = Setup {
        phases: PHASES,
        phase: PHASE,
        rate_per_sec: RATE_PER_SEC,
        row: ROW,
    };
}

/// What a run saw, per phase: answered 200, answered 503 by the server,
/// refused by the bulkhead, failed otherwise; the limit at each row; calls
/// started.
#[derive(Debug, Default)]
pub struct Report {
    pub ok: [usize; 3],
    pub dropped: [usize; 3],
    pub refused: [usize; 3],
    pub failed: [usize; 3],
    /// (phase, limit) at the end of each row.
    pub limits: Vec<(usize, usize)>,
    pub started: usize,
}

/// Runs the story and returns what the calls saw; prints the table when
/// `print` is set.
pub async fn run(setup: Setup, print: bool) -> Report {
    let server = Arc::new(Server {
        handlers: Semaphore::new(0),
        workers: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
    });
    server.set_workers(setup.phases[0]).await;
    let url: Arc<str> = format!("{}/work", start_server(server.clone()).await).into();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");

    let gradient = Gradient2::builder().min_limit(1).build().expect("settings");
    let limit = Arc::new(AdaptiveBulkhead::with_window(
        "work",
        gradient,
        Duration::from_millis(100),
        10,
        TokioClock,
    ));

    if print {
        println!(
            "{} requests/s through an adaptive bulkhead (Gradient2, windows of 100 ms) to a server of {}, then {}, then {} workers ({} ms of work each, 503 past {QUEUE_BOUND} waiting)",
            setup.rate_per_sec,
            setup.phases[0],
            setup.phases[1],
            setup.phases[2],
            SERVICE.as_millis()
        );
        println!();
        println!(
            "|   t s | workers | limit | ok | 503 | refused | p50 ms |  limit # against workers |"
        );
        println!(
            "|------:|--------:|------:|---:|----:|--------:|-------:|--------------------------|"
        );
    }

    let mut report = Report::default();
    let row = Arc::new(Mutex::new(Row::default()));
    let start = tokio::time::Instant::now();
    let end = start + setup.phase * setup.phases.len() as u32;
    let mut arrivals = tokio::time::interval(Duration::from_micros(1_000_000 / setup.rate_per_sec));
    arrivals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut next_row = start + setup.row;
    let mut phase = 0;
    let mut calls = Vec::new();
    let add = |report: &mut Report, phase: usize, r: &Row| {
        report.ok[phase] += r.ok;
        report.dropped[phase] += r.dropped;
        report.refused[phase] += r.refused;
        report.failed[phase] += r.failed;
    };
    while tokio::time::Instant::now() < end {
        let now = arrivals.tick().await;
        let at = now.duration_since(start);
        let p = ((at.as_millis() / setup.phase.as_millis()) as usize).min(setup.phases.len() - 1);
        if p != phase {
            phase = p;
            server.set_workers(setup.phases[p]).await;
        }
        report.started += 1;
        calls.push(tokio::spawn(one_call(
            limit.clone(),
            client.clone(),
            url.clone(),
            row.clone(),
        )));
        if now >= next_row {
            next_row += setup.row;
            let mut r = std::mem::take(&mut *row.lock().unwrap());
            let workers = server.workers.load(SeqCst);
            let l = limit.limit();
            add(&mut report, phase, &r);
            report.limits.push((phase, l));
            if print {
                let bar: String = (0..=25)
                    .map(|i| {
                        if i == workers {
                            '|'
                        } else if i < l.min(25) {
                            '#'
                        } else {
                            ' '
                        }
                    })
                    .collect();
                println!(
                    "| {:5.2} | {workers:7} | {l:5} | {:2} | {:3} | {:7} | {:6.1} | {bar} |",
                    at.as_secs_f64(),
                    r.ok,
                    r.dropped,
                    r.refused,
                    p50(&mut r.latencies_ms),
                );
            }
        }
    }
    // Every call finishes (the server answers each within its queue).
    for call in calls {
        call.await.expect("call task");
    }
    let r = std::mem::take(&mut *row.lock().unwrap());
    add(&mut report, phase, &r);
    if print {
        println!();
        for i in 0..3 {
            println!(
                "phase {} ({} workers): {} answered 200, {} answered 503 by the server, {} refused by the bulkhead",
                i + 1,
                setup.phases[i],
                report.ok[i],
                report.dropped[i],
                report.refused[i]
            );
        }
        println!(
            "limit changes: {}, windows: {}",
            limit.limit_changes(),
            limit.windows()
        );
    }
    report
}

#[tokio::main]
async fn main() {
    run(Setup::DEFAULT, true).await;
}
