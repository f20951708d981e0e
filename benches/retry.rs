//! Retries, measured two ways in one run.
//!
//! **What a retryable call costs when it needs no retry** (criterion): a
//! policy call that succeeds first time through `call_idempotent` beside
//! the same call through `call`, each on its own `Policy<TokioClock, 64>`
//! made from the same config, in one tokio current-thread `block_on` (as
//! `benches/policy.rs` runs its policy). Every criterion iteration is one
//! call, so criterion's time per iteration is ns per call.
//!
//! | group | what |
//! |---|---|
//! | `retry/first-try` | `call(ready).await` and `call_idempotent(ready).await` |
//! | `retry/first-try-within` | the same in a 1.5 s request budget made per call: `call_within(&request, ready)` and `call_idempotent(ready).within(&request)` |
//!
//! After the groups (under `cargo bench`) the binary prints each pair's
//! ratio of criterion's medians: `call_idempotent ÷ call`.
//!
//! **A retry storm** (deterministic counts, no timing): 10 000 calls, one
//! every millisecond, against a simulated system that fails every attempt
//! for the first 5 s (the calls 1–5 000) and then recovers, after which
//! only a blip is left: the first attempt of every 20th call fails, its
//! retry succeeds. Three ways to retry, each allowed 3 retries per call and
//! the same backoff (full jitter, 50 ms doubling, from a seeded
//! `watertight::retry::Jitter`), so that only what bounds the retries
//! differs:
//!
//! - `watertight`: `Policy::call_idempotent` with `max_attempts(4)` and the
//!   default budget (10 tokens, 10 %: gRFC A6's throttling), the breaker
//!   disabled (it would stop the storm itself: every call refused, no
//!   attempt at all; here the budget alone is measured);
//! - `naive`: a loop of up to 4 attempts, no budget;
//! - `tower`: tower 0.5's `Retry` middleware over a `service_fn`, with a
//!   `Policy` that gives up after 3 retries and withdraws from tower's
//!   `TpsBudget::default()` (a 10 s window, 10 retries a second as a floor,
//!   20 % of the requests) before each retry and deposits on each success.
//!
//! Each runs in a tokio current-thread runtime of its own on paused time
//! (`TpsBudget` and `TokioClock` both read tokio's clock), one task per
//! call: the interleaving and the virtual clock are the same every run, so
//! the counts are. The binary runs the simulation twice and checks that
//! the counts agree, then prints the table (before the criterion groups).
//!
//! Run: `cargo bench --bench retry --features tokio -- --warm-up-time 1 --measurement-time 3`
//! (about 30 s). Both tables and what they show: the guide,
//! `src/guide/benchmarks.rs` (`watertight::guide::benchmarks`).

use std::future::Future;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use tower::retry::budget::{Budget, TpsBudget};
use tower::ServiceExt;
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::policy::{Policy, PolicyConfig};
use watertight::retry::{Jitter, RetryConfig};

// ---------------------------------------------------------------------------
// The first-try cost
// ---------------------------------------------------------------------------

/// Slots in the bulkhead (as `benches/policy.rs`).
const MAX_CONCURRENT: usize = 64;
/// The call timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The slot wait.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// The request budget of the `within` group.
const BUDGET: Duration = Duration::from_millis(1500);

type Ours = Policy<TokioClock, 64>;

/// `benches/policy.rs`'s policy, with the default retry config.
fn ours() -> Ours {
    let config = PolicyConfig::builder(MAX_CONCURRENT)
        .max_wait(MAX_WAIT)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("policy config");
    Policy::new("bench", config, TokioClock).expect("policy")
}

/// The trivial call.
async fn ready() -> Result<(), ()> {
    Ok(())
}

/// A loop of `iters` calls of `call` in one `block_on`: the loop's time.
fn looped<F, Fut>(rt: &Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call().await);
        }
        start.elapsed()
    })
}

fn first_try(c: &mut Criterion, rt: &Runtime) {
    let (plain, idempotent) = (ours(), ours());
    let mut g = c.benchmark_group("retry/first-try");
    g.bench_function("call", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&plain).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("call_idempotent", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&idempotent).call_idempotent(ready).await.unwrap();
            })
        })
    });
    g.finish();
    check_nothing_failed(&plain);
    check_nothing_failed(&idempotent);

    let (plain, idempotent) = (ours(), ours());
    let mut g = c.benchmark_group("retry/first-try-within");
    g.bench_function("call", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                let request = Deadline::after(TokioClock, black_box(BUDGET));
                black_box(&plain)
                    .call_within(&request, ready)
                    .await
                    .unwrap();
            })
        })
    });
    g.bench_function("call_idempotent", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                let request = Deadline::after(TokioClock, black_box(BUDGET));
                black_box(&idempotent)
                    .call_idempotent(ready)
                    .within(&request)
                    .await
                    .unwrap();
            })
        })
    });
    g.finish();
    check_nothing_failed(&plain);
    check_nothing_failed(&idempotent);
}

/// Every call above succeeded first time, and left the policy as it was.
fn check_nothing_failed(p: &Ours) {
    assert_eq!(p.breaker().metrics().failed_calls, 0, "a call failed");
    assert_eq!(p.bulkhead().available(), MAX_CONCURRENT, "a slot was lost");
    let m = p.retry_metrics();
    assert_eq!(
        (m.after_failure, m.after_timeout, m.budget_exhausted),
        (0, 0, 0),
        "a call was retried"
    );
    assert_eq!(p.retry_budget().tokens(), 10.0);
}

/// Where criterion writes its reports (its own rule: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else the target dir this binary sits in).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    // target/<profile>/deps/retry-<hash>
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|t| t.join("criterion")))
        .unwrap_or_else(|| "target/criterion".into())
}

/// The median criterion saved for `group/function` in this run, in ns.
fn median(group: &str, function: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group.replace('/', "_"))
        .join(function)
        .join("new/estimates.json");
    let json = std::fs::read_to_string(path).ok()?;
    // `{"mean":{…},"median":{"confidence_interval":{…},"point_estimate":N,…`
    let rest = &json[json.find("\"median\"")?..];
    let rest = &rest[rest.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = rest.find([',', '}'])?;
    rest[..end].trim().parse().ok()
}

/// Each pair's ratio of medians, as criterion saved them.
fn ratios() {
    println!();
    println!("| group | call | call_idempotent | call_idempotent ÷ call |");
    println!("|---|---|---|---|");
    for group in ["retry/first-try", "retry/first-try-within"] {
        match (median(group, "call"), median(group, "call_idempotent")) {
            (Some(plain), Some(idem)) => println!(
                "| `{group}` | {plain:.1} ns | {idem:.1} ns | {:.3}× |",
                idem / plain
            ),
            _ => println!(
                "| `{group}` | – | – | (no estimates in {:?}) |",
                criterion_dir()
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// The storm
// ---------------------------------------------------------------------------

/// Calls in the simulation, one per `ARRIVAL`.
const CALLS: usize = 10_000;
/// The time between two calls' arrivals.
const ARRIVAL: Duration = Duration::from_millis(1);
/// How long the system fails every attempt: the calls that arrive in it
/// are the failing phase.
const OUTAGE: Duration = Duration::from_secs(5);
/// After the outage, the first attempt of every `BLIP`-th call fails.
const BLIP: usize = 20;
/// Retries each way may make per call.
const RETRIES: u32 = 3;
/// The jitter's seed, the same for each way.
const SEED: u64 = 2026;

/// The simulated system: down until `recovers`, then failing only the first
/// attempt of every `BLIP`-th call. Counts every attempt of every call.
struct System {
    recovers: tokio::time::Instant,
    attempts: Vec<AtomicU32>,
}

/// The system's refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Down;

impl System {
    fn new() -> Arc<Self> {
        Arc::new(System {
            recovers: tokio::time::Instant::now() + OUTAGE,
            attempts: (0..CALLS).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// One attempt of call `call`.
    fn attempt(&self, call: usize) -> Result<(), Down> {
        let nth = self.attempts[call].fetch_add(1, Ordering::Relaxed) + 1;
        if tokio::time::Instant::now() < self.recovers || (call % BLIP == 0 && nth == 1) {
            Err(Down)
        } else {
            Ok(())
        }
    }
}

/// The backoff every way uses: full jitter under watertight's default caps
/// (50 ms doubling to 1 s), from one seeded sequence.
struct Backoff {
    caps: RetryConfig,
    jitter: Jitter,
}

impl Backoff {
    fn new() -> Arc<Self> {
        Arc::new(Backoff {
            caps: RetryConfig::DEFAULT,
            jitter: Jitter::new(SEED),
        })
    }

    /// The sleep before retry `n` (1 for the first).
    fn before(&self, n: u32) -> tokio::time::Sleep {
        tokio::time::sleep(self.jitter.up_to(self.caps.backoff_cap(n)))
    }
}

/// What one way of retrying did: attempts per call, and whether it ended
/// well.
struct Run {
    way: &'static str,
    attempts: Vec<u32>,
    failed: Vec<bool>,
    /// What stopped retries, if anything says (ours: refusals by the budget).
    note: String,
}

/// Calls `call(i)` for i in 0..CALLS, each on its own task, one every
/// `ARRIVAL`, on a paused current-thread runtime; waits for all of them.
fn simulate<S, F, Fut>(setup: S) -> (Arc<System>, Vec<bool>, String)
where
    S: FnOnce(Arc<System>) -> (F, Box<dyn FnOnce() -> String>),
    F: Fn(usize) -> Fut,
    Fut: Future<Output = bool> + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("paused tokio runtime");
    rt.block_on(async {
        let system = System::new();
        let (call, note) = setup(Arc::clone(&system));
        let local = tokio::task::LocalSet::new();
        let failed = local
            .run_until(async {
                let start = tokio::time::Instant::now();
                let mut tasks = Vec::with_capacity(CALLS);
                for i in 0..CALLS {
                    tokio::time::sleep_until(start + ARRIVAL * i as u32).await;
                    tasks.push(tokio::task::spawn_local(call(i)));
                }
                let mut failed = Vec::with_capacity(CALLS);
                for t in tasks {
                    failed.push(!t.await.expect("a call panicked"));
                }
                failed
            })
            .await;
        (system, failed, note())
    })
}

fn run_of(way: &'static str, (system, failed, note): (Arc<System>, Vec<bool>, String)) -> Run {
    Run {
        way,
        attempts: system
            .attempts
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect(),
        failed,
        note,
    }
}

/// Ours: `call_idempotent` through a policy whose breaker is disabled.
fn watertight() -> Run {
    run_of(
        "watertight (budget 10 tokens, 10 %)",
        simulate(|system| {
            let config = PolicyConfig::builder(MAX_CONCURRENT)
                .retry(RetryConfig::builder().max_attempts(RETRIES + 1).seed(SEED))
                .build()
                .expect("policy config");
            let p: Arc<Policy<TokioClock>> =
                Arc::new(Policy::new("storm", config, TokioClock).expect("policy"));
            p.breaker().disable();
            let q = Arc::clone(&p);
            let call = move |i: usize| {
                let (p, system) = (Arc::clone(&p), Arc::clone(&system));
                async move {
                    let r = p.call_idempotent(|| {
                        let r = system.attempt(i);
                        async move { r }
                    });
                    r.await.is_ok()
                }
            };
            let note = Box::new(move || {
                let m = q.retry_metrics();
                format!(
                    "the budget refused {} retries; {} tokens left",
                    m.budget_exhausted,
                    q.retry_budget().tokens()
                )
            });
            (call, note as Box<dyn FnOnce() -> String>)
        }),
    )
}

/// A loop of up to `RETRIES + 1` attempts with the same backoff, no budget.
fn naive() -> Run {
    run_of(
        "naive (retry 3 times)",
        simulate(|system| {
            let backoff = Backoff::new();
            let call = move |i: usize| {
                let (system, backoff) = (Arc::clone(&system), Arc::clone(&backoff));
                async move {
                    for retry in 0..=RETRIES {
                        if retry > 0 {
                            backoff.before(retry).await;
                        }
                        if system.attempt(i).is_ok() {
                            return true;
                        }
                    }
                    false
                }
            };
            (call, Box::new(String::new) as Box<dyn FnOnce() -> String>)
        }),
    )
}

/// tower's retry policy: up to `RETRIES` retries, each withdrawn from a
/// shared `TpsBudget` first; every success deposits.
#[derive(Clone)]
struct TowerRetry {
    budget: Arc<TpsBudget>,
    backoff: Arc<Backoff>,
    refused: Arc<AtomicUsize>,
    /// Retries made for this request (tower clones the policy per request).
    retries: u32,
}

impl tower::retry::Policy<usize, (), Down> for TowerRetry {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, _: &mut usize, result: &mut Result<(), Down>) -> Option<Self::Future> {
        match result {
            Ok(()) => {
                self.budget.deposit();
                None
            }
            Err(Down) if self.retries == RETRIES => None,
            Err(Down) => {
                if !self.budget.withdraw() {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                self.retries += 1;
                Some(self.backoff.before(self.retries))
            }
        }
    }

    fn clone_request(&mut self, call: &usize) -> Option<usize> {
        Some(*call)
    }
}

fn tower_retry() -> Run {
    run_of(
        "tower retry (TpsBudget::default)",
        simulate(|system| {
            let refused = Arc::new(AtomicUsize::new(0));
            let policy = TowerRetry {
                // Made on the paused clock: its window starts there.
                budget: Arc::new(TpsBudget::default()),
                backoff: Backoff::new(),
                refused: Arc::clone(&refused),
                retries: 0,
            };
            let service = tower::service_fn(move |i: usize| {
                let r = system.attempt(i);
                async move { r }
            });
            let retrying = tower::retry::Retry::new(policy, service);
            let call = move |i: usize| {
                let svc = retrying.clone();
                async move { svc.oneshot(i).await.is_ok() }
            };
            let note = Box::new(move || {
                format!(
                    "the budget refused {} retries",
                    refused.load(Ordering::Relaxed)
                )
            });
            (call, note as Box<dyn FnOnce() -> String>)
        }),
    )
}

/// The calls that arrived during the outage.
fn failing_calls() -> usize {
    (OUTAGE.as_nanos() / ARRIVAL.as_nanos()) as usize
}

/// The storm's table rows (per way and phase: calls, attempts, attempts per
/// call, retries and the calls that failed in the end), then one line per
/// way saying what its budget refused.
fn storm() -> Vec<String> {
    let runs = [watertight(), naive(), tower_retry()];
    let split = failing_calls();
    let mut rows = Vec::new();
    for r in &runs {
        for (phase, range) in [("failing", 0..split), ("recovered", split..CALLS)] {
            let calls = range.len();
            let attempts: u64 = r.attempts[range.clone()]
                .iter()
                .map(|&a| u64::from(a))
                .sum();
            let failed = r.failed[range].iter().filter(|&&f| f).count();
            rows.push(format!(
                "| {} | {phase} | {calls} | {attempts} | {:.3} | {} | {failed} |",
                r.way,
                attempts as f64 / calls as f64,
                attempts - calls as u64,
            ));
        }
    }
    for r in &runs {
        if !r.note.is_empty() {
            rows.push(format!("{}: {}", r.way, r.note));
        }
    }
    rows
}

fn print_storm() {
    let first = storm();
    let again = storm();
    assert_eq!(first, again, "the storm's counts differ between two runs");
    println!();
    println!(
        "A retry storm: {CALLS} calls, one every {} ms; every attempt fails for the first {} s \
         (the calls that arrive then: the failing phase), then only the first attempt of every \
         {BLIP}th call does. Each way: at most {RETRIES} retries per call, full-jitter backoff \
         from 50 ms. Deterministic (paused tokio time), the same in two runs:",
        ARRIVAL.as_millis(),
        OUTAGE.as_secs()
    );
    println!();
    println!("| way | phase | calls | attempts | attempts per call | retries | calls failed |");
    println!("|---|---|---|---|---|---|---|");
    let (table, notes): (Vec<_>, Vec<_>) = first.iter().partition(|r| r.starts_with('|'));
    for row in table {
        println!("{row}");
    }
    println!();
    for note in notes {
        println!("{note}");
    }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not (then
    // criterion runs each benchmark once and saves nothing).
    let bench = std::env::args().any(|a| a == "--bench");
    let list = std::env::args().any(|a| a == "--list" || a == "--profile-time");
    let test = !bench || std::env::args().any(|a| a == "--test");
    if !list {
        print_storm();
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio current-thread runtime");
    let mut c = Criterion::default().configure_from_args();
    first_try(&mut c, &rt);
    c.final_summary();
    if !list && !test {
        ratios();
    }
}
