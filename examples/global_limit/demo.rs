//! A bulkhead acts inside one process: four worker processes with a
//! bulkhead of 20 each protect their neighbour with eighty slots, not
//! twenty. Shown here with real processes; shared by `examples/global_limit.rs` and the tour's act 7.
//!
//! The parent process starts a *neighbour* (an axum server on `127.0.0.1`,
//! a random free port, that counts the calls in flight and keeps the
//! maximum; each call holds 20–50 ms) and a `redis-server` of its own (a
//! Unix socket in a fresh temporary directory, no TCP port, persistence off).
//! It then runs two rounds, each of [`WORKERS`] OS processes (the program
//! itself, started again with [`ROLE`] set), each firing [`CALLS`] calls at
//! the neighbour at once:
//!
//! 1. each worker through its own [`watertight::Bulkhead`] of
//!    [`LOCAL_SLOTS`]: every process keeps its limit, and the neighbour sees
//!    up to 4 × 20 = 80 calls at once;
//! 2. each worker through one [`GlobalBulkhead`] of [`GLOBAL_LIMIT`] (its
//!    local front, `local_cap(20)`, is the same per-process cap as before):
//!    the neighbour sees at most 20, and every call costs Redis calls;
//! 3. the same limit in leased mode (`GlobalConfigBuilder::leased`): each
//!    worker serves its calls from a leased share of the 20, refreshed in
//!    one Redis call every [`REFRESH`] (and early when the share runs dry):
//!    at most 20 still, with a small fraction of a Redis call per call.
//!
//! Workers connect and warm up (HTTP connections, and Redis in round 2)
//! first, report `ready`, and start together when the parent writes `go`,
//! so that the rounds measure the limits, not process start-up. Every
//! worker's call is bounded (a 10 s wait for a slot, a 5 s HTTP timeout),
//! each round is bounded (30 s), and every child process and the
//! redis-server are killed on drop, on an error or a panic too.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use watertight::clock::TokioClock;
use watertight::redis::{GlobalBulkhead, GlobalConfig};
use watertight::Bulkhead;

/// Worker processes per round (four workers, as a four-process server runs).
pub const WORKERS: usize = 4;
/// Each worker's local bulkhead, and its local cap in round 2.
pub const LOCAL_SLOTS: usize = 20;
/// The one limit of round 2, shared by every worker through Redis.
pub const GLOBAL_LIMIT: u32 = 20;
/// Calls each worker fires at once, each round.
pub const CALLS: usize = 40;
/// The environment variable that makes the program a worker:
/// `local` (round 1) or `global` (round 2).
pub const ROLE: &str = "WATERTIGHT_GLOBAL_LIMIT_ROLE";
const NEIGHBOUR: &str = "WATERTIGHT_GLOBAL_LIMIT_NEIGHBOUR";
const REDIS: &str = "WATERTIGHT_GLOBAL_LIMIT_REDIS";
/// How often a leased share is refreshed in round 3.
pub const REFRESH: Duration = Duration::from_millis(200);
/// How to get a `redis-server` where there is none.
pub const HOW_TO_ENABLE: &str = "apt-get install -y redis-server";
/// The longest a worker's call waits for a slot.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// A bound on one round, start-up included.
const ROUND_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- the neighbour

/// What the neighbour counts.
#[derive(Default)]
struct Neighbour {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: AtomicUsize,
}

/// Takes one call off the count when its handler ends, answered or dropped.
struct InFlight<'a>(&'a Neighbour);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, SeqCst);
    }
}

async fn call(State(n): State<Arc<Neighbour>>) -> &'static str {
    let now = n.in_flight.fetch_add(1, SeqCst) + 1;
    let _counted = InFlight(&n);
    n.max_in_flight.fetch_max(now, SeqCst);
    let i = n.calls.fetch_add(1, SeqCst);
    // 20–50 ms, spread evenly over the calls.
    let hold = 20 + (i * 7) % 31;
    tokio::time::sleep(Duration::from_millis(hold as u64)).await;
    "ok"
}

/// Not counted: opens the workers' pooled connections before a round.
async fn warm() -> &'static str {
    "ok"
}

/// The neighbour's server task; stopped on drop.
struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn start_neighbour() -> Result<(String, Arc<Neighbour>, Serving), String> {
    let n = Arc::new(Neighbour::default());
    let app = Router::new()
        .route("/call", get(call))
        .route("/warm", get(warm))
        .with_state(n.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("binding the neighbour on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let serving = Serving(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }));
    Ok((format!("http://{addr}"), n, serving))
}

// ---------------------------------------------------------------- redis-server

/// `redis-server` on PATH, if there is one.
pub fn redis_server_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// A redis-server of our own; killed, and its directory removed, on drop.
struct RedisServer {
    child: std::process::Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl RedisServer {
    fn start(program: &Path) -> Result<Self, String> {
        let dir =
            std::env::temp_dir().join(format!("watertight-global-limit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let socket = dir.join("redis.sock");
        let child = std::process::Command::new(program)
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args([
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("starting {}: {e}", program.display()));
            }
        };
        // From here the guard stops the server, whatever happens next.
        let server = RedisServer { child, dir, socket };
        let start = Instant::now();
        while !server.ping() {
            if start.elapsed() > Duration::from_secs(10) {
                return Err("redis-server did not answer PING within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }

    fn ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::os::unix::net::UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut answer = [0; 7];
        s.write_all(b"PING\r\n").is_ok()
            && s.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }

    fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------- the workers

/// The two rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// A local `Bulkhead` of 20 in each process.
    Local,
    /// One `GlobalBulkhead` of 20 for all of them.
    Global,
    /// The same, in leased mode.
    Leased,
}

impl Round {
    fn role(self) -> &'static str {
        match self {
            Round::Local => "local",
            Round::Global => "global",
            Round::Leased => "leased",
        }
    }
}

/// What a worker counted.
#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    ok: usize,
    refused: usize,
    failed: usize,
}

/// If this process was started as a worker ([`ROLE`] set), runs it and
/// returns its exit code; `None` in the parent.
pub async fn run_worker_if_asked() -> Option<ExitCode> {
    let role = std::env::var(ROLE).ok()?;
    Some(match worker(&role).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("global_limit worker {}: {e}", std::process::id());
            ExitCode::FAILURE
        }
    })
}

enum Limit {
    Local(Arc<Bulkhead<TokioClock>>),
    Global(GlobalBulkhead),
}

async fn worker(role: &str) -> Result<(), String> {
    let base = std::env::var(NEIGHBOUR).map_err(|_| format!("{NEIGHBOUR} unset"))?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let limit = match role {
        "local" => Limit::Local(Arc::new(Bulkhead::new(
            "neighbour",
            LOCAL_SLOTS,
            TokioClock,
        ))),
        "global" | "leased" => {
            let url = std::env::var(REDIS).map_err(|_| format!("{REDIS} unset"))?;
            let mut config = GlobalConfig::builder(GLOBAL_LIMIT).local_cap(LOCAL_SLOTS);
            if role == "leased" {
                config = config.lease(Duration::from_secs(2)).leased(REFRESH);
            }
            let config = config.build().map_err(|e| e.to_string())?;
            let g =
                GlobalBulkhead::connect(&url, "neighbour", config).map_err(|e| e.to_string())?;
            // Connect to Redis (and load the scripts) before the round.
            g.try_acquire()
                .await
                .map_err(|e| format!("warm-up: {e}"))?
                .release()
                .await
                .map_err(|e| format!("warm-up: {e}"))?;
            Limit::Global(g)
        }
        other => return Err(format!("unknown role {other:?}")),
    };
    // As many pooled connections as the process will use at once.
    let warm_ups: Vec<_> = (0..LOCAL_SLOTS)
        .map(|_| {
            let (client, url) = (client.clone(), format!("{base}/warm"));
            tokio::spawn(async move { client.get(url).send().await?.bytes().await })
        })
        .collect();
    for w in warm_ups {
        w.await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("warm-up: {e}"))?;
    }

    // Redis calls made so far (connecting, warming up): not the round's.
    let warm_calls = match &limit {
        Limit::Global(g) => g.metrics().redis_calls,
        Limit::Local(_) => 0,
    };
    println!("ready");
    let mut line = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await
        .map_err(|e| e.to_string())?;
    if line.trim() != "go" {
        return Err(format!("expected go, got {line:?}"));
    }

    let limit = Arc::new(limit);
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            let (client, limit, url) = (client.clone(), limit.clone(), format!("{base}/call"));
            tokio::spawn(async move { one_call(&client, &limit, url).await })
        })
        .collect();
    let mut tally = Tally::default();
    for c in calls {
        match c.await.map_err(|e| e.to_string())? {
            Outcome::Ok => tally.ok += 1,
            Outcome::Refused => tally.refused += 1,
            Outcome::Failed => tally.failed += 1,
        }
    }
    let mut redis_calls = 0;
    if let Limit::Global(g) = &*limit {
        // Before `main` returns: every release (or the share) reaches
        // Redis, and the keeper task stops.
        let before = g.metrics().redis_calls;
        g.close().await.map_err(|e| format!("close: {e}"))?;
        // The round's calls, the warm-up's and close's aside.
        redis_calls = before - warm_calls;
    }
    println!(
        "done {} {} {} {redis_calls}",
        tally.ok, tally.refused, tally.failed
    );
    Ok(())
}

enum Outcome {
    Ok,
    Refused,
    Failed,
}

/// One GET of the neighbour, its body read to the end.
async fn ask(client: &reqwest::Client, url: String) -> Outcome {
    match client.get(url).send().await {
        Ok(r) if r.status().is_success() => match r.bytes().await {
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Failed,
        },
        _ => Outcome::Failed,
    }
}

/// One call through the worker's limit; the slot is given back once the
/// neighbour has answered.
async fn one_call(client: &reqwest::Client, limit: &Limit, url: String) -> Outcome {
    match limit {
        Limit::Local(b) => {
            let Ok(_permit) = b.acquire_timeout(MAX_WAIT).await else {
                return Outcome::Refused;
            };
            ask(client, url).await
        }
        Limit::Global(g) => {
            let Ok(permit) = g.acquire_timeout(MAX_WAIT).await else {
                return Outcome::Refused;
            };
            let outcome = ask(client, url).await;
            // The drop hands the release to the keeper task (never
            // blocking); `close` at the end of the worker flushes them.
            drop(permit);
            outcome
        }
    }
}

/// A round's worker processes; killed on drop unless they have exited.
struct Workers(Vec<(Child, ChildStdin, Lines<BufReader<ChildStdout>>)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (child, _, _) in &mut self.0 {
            let _ = child.start_kill();
        }
    }
}

/// One round's numbers.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    pub round: Round,
    /// Calls the workers fired.
    pub calls: usize,
    /// Calls answered.
    pub ok: usize,
    /// Calls refused a slot (none, with a 10 s wait).
    pub refused: usize,
    /// Calls that got no answer.
    pub failed: usize,
    /// Commands the workers sent to Redis during the round.
    pub redis_calls: u64,
    /// Calls the neighbour saw.
    pub seen: usize,
    /// The most calls in flight at the neighbour at once.
    pub max_in_flight: usize,
    /// From `go` to the last worker's last answer.
    pub took: Duration,
}

async fn round(round: Round, base: &str, redis: &str, n: &Neighbour) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut workers = Workers(Vec::new());
    for _ in 0..WORKERS {
        let mut child = Command::new(&exe)
            .env(ROLE, round.role())
            .env(NEIGHBOUR, base)
            .env(REDIS, redis)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting a worker: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        workers
            .0
            .push((child, stdin, BufReader::new(stdout).lines()));
    }
    for (_, _, out) in &mut workers.0 {
        expect_line(out, "ready").await?;
    }
    n.in_flight.store(0, SeqCst);
    n.max_in_flight.store(0, SeqCst);
    n.calls.store(0, SeqCst);

    let start = Instant::now();
    for (_, stdin, _) in &mut workers.0 {
        stdin
            .write_all(b"go\n")
            .await
            .map_err(|e| format!("telling a worker to go: {e}"))?;
    }
    let mut total = Tally::default();
    let mut redis_calls = 0;
    for (_, _, out) in &mut workers.0 {
        let line = expect_line(out, "done").await?;
        let v: Vec<usize> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let [ok, refused, failed, calls] = v[..] else {
            return Err(format!("a worker said {line:?}"));
        };
        total.ok += ok;
        total.refused += refused;
        total.failed += failed;
        redis_calls += calls as u64;
    }
    let took = start.elapsed();
    for (child, _, _) in &mut workers.0 {
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("a worker exited with {status}"));
        }
    }
    Ok(Report {
        round,
        calls: WORKERS * CALLS,
        ok: total.ok,
        refused: total.refused,
        failed: total.failed,
        redis_calls,
        seen: n.calls.load(SeqCst),
        max_in_flight: n.max_in_flight.load(SeqCst),
        took,
    })
}

async fn expect_line(
    out: &mut Lines<BufReader<ChildStdout>>,
    word: &str,
) -> Result<String, String> {
    match out.next_line().await {
        Ok(Some(line)) if line.starts_with(word) => Ok(line),
        Ok(Some(line)) => Err(format!("expected {word:?} from a worker, got {line:?}")),
        Ok(None) => Err(format!("a worker exited before saying {word:?}")),
        Err(e) => Err(format!("reading a worker: {e}")),
    }
}

/// Runs both rounds with the `redis-server` at `program`: starts the
/// neighbour and the server, and stops both (and every worker) before it
/// returns, whether it succeeds or not.
pub async fn run(program: &Path) -> Result<Vec<Report>, String> {
    let (base, neighbour, serving) = start_neighbour().await?;
    let redis = RedisServer::start(program)?;
    let url = redis.url();
    let mut reports = Vec::new();
    for r in [Round::Local, Round::Global, Round::Leased] {
        let report = tokio::time::timeout(ROUND_LIMIT, round(r, &base, &url, &neighbour))
            .await
            .map_err(|_| format!("round {} took over {} s", r.role(), ROUND_LIMIT.as_secs()))??;
        reports.push(report);
    }
    drop(redis);
    drop(serving);
    Ok(reports)
}

// ---------------------------------------------------------------- the report

/// The setup, in one line.
pub fn setup() -> String {
    format!(
        "{WORKERS} worker processes, each firing {CALLS} calls at once at a neighbour on \
         127.0.0.1 that holds each call 20-50 ms; a redis-server of our own on a Unix socket"
    )
}

/// The rounds as a table, each line indented by `indent`.
pub fn print_table(reports: &[Report], indent: &str) {
    println!(
        "{indent}{:<5}  {:<56}  {:>8}  {:>30}  {:>7}  {:>20}",
        "round",
        "limit",
        "answered",
        "max in flight at the neighbour",
        "time",
        "Redis calls per call"
    );
    for r in reports {
        let (n, limit) = match r.round {
            Round::Local => (
                1,
                format!("Bulkhead({LOCAL_SLOTS}) in each of the {WORKERS} processes"),
            ),
            Round::Global => (
                2,
                format!("GlobalBulkhead({GLOBAL_LIMIT}) on Redis, local_cap({LOCAL_SLOTS}) each"),
            ),
            Round::Leased => (
                3,
                format!(
                    "the same, leased: a share each, refreshed every {} ms",
                    REFRESH.as_millis()
                ),
            ),
        };
        let answered = format!("{}/{}", r.ok, r.calls);
        let per_call = match r.round {
            Round::Local => "-".to_string(),
            _ => format!("{:.2}", r.redis_calls as f64 / r.calls as f64),
        };
        println!(
            "{indent}{n:<5}  {limit:<56}  {answered:>8}  {:>30}  {:>4} ms  {per_call:>20}",
            r.max_in_flight,
            r.took.as_millis()
        );
        if r.refused + r.failed > 0 || r.seen != r.ok {
            println!(
                "{indent}       ({} refused a slot, {} without an answer, {} seen by the neighbour)",
                r.refused, r.failed, r.seen
            );
        }
    }
}

/// What the rounds showed, in one sentence.
pub fn conclusion(reports: &[Report]) -> String {
    let max = |round| {
        reports
            .iter()
            .find(|r| r.round == round)
            .map_or(0, |r| r.max_in_flight)
    };
    let calls = |round| {
        reports
            .iter()
            .find(|r| r.round == round)
            .map_or(0.0, |r| r.redis_calls as f64 / r.calls as f64)
    };
    format!(
        "local limits alone let {} calls at once reach the neighbour ({WORKERS} x {LOCAL_SLOTS} \
         slots); through one GlobalBulkhead of {GLOBAL_LIMIT}, {} at most ({:.2} Redis calls \
         per call), and leased, {} at most ({:.2} Redis calls per call)",
        max(Round::Local),
        max(Round::Global),
        calls(Round::Global),
        max(Round::Leased),
        calls(Round::Leased)
    )
}
