//! Acquire + release, ours beside tokio's and async-lock's semaphores (and,
//! for `try_acquire`, the physical floor: a CAS decrement plus a `fetch_add`
//! on a bare atomic), every peer in the same run.
//!
//! Every criterion iteration is one acquire + release pair, so criterion's
//! time per iteration is ns per pair (wall time ÷ pairs).
//!
//! | group | what |
//! |---|---|
//! | `uncontended/try_acquire+drop` | `try_acquire` + drop, one thread; with `floor` |
//! | `uncontended/try_acquire-forms` | ours only: `try_acquire` + drop written as `unwrap()`, `if let Ok(..)`, a `match` whose `Err` arm uses the error, and `?` in a function returning it, the bulkhead behind `black_box` (every `Err` arm live) |
//! | `uncontended/acquire.await+drop/block_on` | a free `acquire().await` + drop, a loop of pairs in one `futures_lite::future::block_on` |
//! | `uncontended/acquire.await+drop/tokio-current-thread` | the same in one tokio current-thread `block_on` |
//! | `contended/{yield,spin}/M=../P=..` | M tasks on a 2-worker tokio runtime, P permits, each task loops acquire → hold → release; hold = `yield_now().await` or 16 `black_box` adds |
//!
//! The hand-off (a queued `acquire` woken by a release on another thread)
//! has a bench of its own, `benches/handoff.rs`: criterion's mean over
//! thousands of hand-offs moved by ±50 ns between runs there.
//!
//! After the criterion groups a fairness probe runs (not a criterion timing):
//! 16 tasks share 1 permit on the 2-worker runtime, each loops acquire →
//! `yield_now` → release; it prints each peer's first finisher's and median
//! finisher's finishing time as a share of the whole run (a fair limiter has
//! both near 1.0; one that lets newcomers barge lets the first task finish
//! early). It is skipped when a filter is given, unless the filter contains
//! `fairness`.
//!
//! Run: `cargo bench --bench bulkhead` (all, a few minutes), then
//! `python3 scripts/bench_table.py --only bulkhead --write`, which puts the
//! tables into the guide (`src/guide/benchmarks.rs`, `watertight::guide::benchmarks`).
//! Quick: `cargo bench --bench bulkhead -- uncontended`,
//! `cargo bench --bench bulkhead -- fairness` (the probe only).

use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use watertight::clock::StdClock;
use watertight::Bulkhead;

/// Permits in the uncontended groups (any value above 1 gives the same path).
const UNCONTENDED_PERMITS: usize = 16;
/// Tasks per contended cell.
const TASKS: [usize; 3] = [2, 16, 256];
/// Permits per contended cell.
const PERMITS: [usize; 3] = [1, 4, 64];

// ---------------------------------------------------------------------------
// Uncontended
// ---------------------------------------------------------------------------

/// The least any counting limiter must do: a CAS that takes one unit and an
/// add that gives it back.
#[inline]
fn floor_pair(count: &AtomicUsize) {
    let mut cur = count.load(Ordering::Relaxed);
    loop {
        assert!(cur != 0, "floor: no unit free");
        match count.compare_exchange_weak(cur, cur - 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(actual) => cur = actual,
        }
    }
    black_box(count);
    count.fetch_add(1, Ordering::Release);
}

fn uncontended_try(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended/try_acquire+drop");
    let floor = AtomicUsize::new(UNCONTENDED_PERMITS);
    g.bench_function("floor", |b| b.iter(|| floor_pair(black_box(&floor))));
    let ours = Bulkhead::new("bench", UNCONTENDED_PERMITS, StdClock);
    g.bench_function("watertight", |b| {
        b.iter(|| drop(black_box(black_box(&ours).try_acquire().unwrap())))
    });
    let tokio_sem = tokio::sync::Semaphore::new(UNCONTENDED_PERMITS);
    g.bench_function("tokio", |b| {
        b.iter(|| drop(black_box(black_box(&tokio_sem).try_acquire().unwrap())))
    });
    let lock_sem = async_lock::Semaphore::new(UNCONTENDED_PERMITS);
    g.bench_function("async-lock", |b| {
        b.iter(|| drop(black_box(black_box(&lock_sem).try_acquire().unwrap())))
    });
    g.finish();
}

/// `try_acquire` + drop written each way a caller writes it
/// (`uncontended/try_acquire-forms`): the bulkhead is behind `black_box`, so
/// every `Err` arm is live code; each form should cost the same.
mod forms {
    use super::*;
    use watertight::AcquireError;

    type Ours = Bulkhead<StdClock>;

    #[inline]
    pub(super) fn unwrap(b: &Ours) {
        drop(black_box(black_box(b).try_acquire().unwrap()));
    }

    #[inline]
    pub(super) fn if_let(b: &Ours) {
        if let Ok(p) = black_box(b).try_acquire() {
            drop(black_box(p));
        }
    }

    /// A `match` whose `Err` arm uses the error.
    #[inline]
    pub(super) fn match_err(b: &Ours) {
        match black_box(b).try_acquire() {
            Ok(p) => drop(black_box(p)),
            Err(e) => {
                black_box(e.is_rejection());
            }
        }
    }

    /// `?` in a function returning the error.
    #[inline]
    pub(super) fn question(b: &Ours) -> Result<(), AcquireError> {
        let p = black_box(b).try_acquire()?;
        drop(black_box(p));
        Ok(())
    }
}

fn uncontended_try_forms(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended/try_acquire-forms");
    let ours = Bulkhead::new("bench", UNCONTENDED_PERMITS, StdClock);
    g.bench_function("unwrap", |b| b.iter(|| forms::unwrap(&ours)));
    g.bench_function("if-let", |b| b.iter(|| forms::if_let(&ours)));
    g.bench_function("match-err", |b| b.iter(|| forms::match_err(&ours)));
    g.bench_function("question-mark", |b| {
        b.iter(|| black_box(forms::question(&ours)))
    });
    g.finish();
    assert_eq!(ours.available(), UNCONTENDED_PERMITS);
}

/// The loops of `iters` free `acquire().await` + drop pairs, one per peer,
/// each returning the time the loop took. Run inside one `block_on`, so no
/// executor entry is paid per pair.
async fn ours_await_loop(b: &Bulkhead<StdClock>, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        drop(black_box(black_box(b).acquire().await.unwrap()));
    }
    start.elapsed()
}

async fn tokio_await_loop(s: &tokio::sync::Semaphore, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        drop(black_box(black_box(s).acquire().await.unwrap()));
    }
    start.elapsed()
}

async fn lock_await_loop(s: &async_lock::Semaphore, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        drop(black_box(black_box(s).acquire().await));
    }
    start.elapsed()
}

fn uncontended_await(c: &mut Criterion) {
    let ours = Bulkhead::new("bench", UNCONTENDED_PERMITS, StdClock);
    let tokio_sem = tokio::sync::Semaphore::new(UNCONTENDED_PERMITS);
    let lock_sem = async_lock::Semaphore::new(UNCONTENDED_PERMITS);

    let mut g = c.benchmark_group("uncontended/acquire.await+drop/block_on");
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| futures_lite::future::block_on(ours_await_loop(&ours, iters)))
    });
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| futures_lite::future::block_on(tokio_await_loop(&tokio_sem, iters)))
    });
    g.bench_function("async-lock", |b| {
        b.iter_custom(|iters| futures_lite::future::block_on(lock_await_loop(&lock_sem, iters)))
    });
    g.finish();

    // Note: inside a tokio runtime tokio's semaphore spends the task's coop
    // budget, so every 128th acquire yields once; that is part of its cost
    // there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime");
    let mut g = c.benchmark_group("uncontended/acquire.await+drop/tokio-current-thread");
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| rt.block_on(ours_await_loop(&ours, iters)))
    });
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| rt.block_on(tokio_await_loop(&tokio_sem, iters)))
    });
    g.bench_function("async-lock", |b| {
        b.iter_custom(|iters| rt.block_on(lock_await_loop(&lock_sem, iters)))
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// Contended
// ---------------------------------------------------------------------------

/// What a task does while it holds its permit.
#[derive(Clone, Copy, Debug)]
enum Hold {
    /// `tokio::task::yield_now().await`: the holder is descheduled, as a
    /// real call that awaits I/O would be.
    Yield,
    /// 16 `black_box` adds: a short critical section with no await in it.
    Spin,
}

impl Hold {
    fn name(self) -> &'static str {
        match self {
            Hold::Yield => "yield",
            Hold::Spin => "spin",
        }
    }

    #[inline]
    async fn run(self) {
        match self {
            Hold::Yield => tokio::task::yield_now().await,
            Hold::Spin => spin16(),
        }
    }
}

#[inline]
fn spin16() {
    let mut acc = 0u64;
    for i in 0..16u64 {
        acc = black_box(acc.wrapping_add(i));
    }
    black_box(acc);
}

fn multi_thread_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio 2-worker runtime")
}

/// `elapsed` for `pairs` pairs, scaled to `iters` pairs.
fn scale(elapsed: Duration, iters: u64, pairs: u64) -> Duration {
    let ns = elapsed.as_nanos() * u128::from(iters) / u128::from(pairs.max(1));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// One contended measurement: `m` tasks each running `task(sem, k)` with
/// `k = max(1, iters / m)`, timed from spawning the first task until all have
/// been joined, scaled to `iters` pairs.
fn contended_run<S, F, Fut>(rt: &Runtime, sem: Arc<S>, m: usize, iters: u64, task: F) -> Duration
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, u64) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let k = (iters / m as u64).max(1);
    let elapsed = rt.block_on(async {
        let start = Instant::now();
        let handles: Vec<_> = (0..m)
            .map(|_| tokio::spawn(task(Arc::clone(&sem), k)))
            .collect();
        for h in handles {
            h.await.expect("bench task panicked");
        }
        start.elapsed()
    });
    scale(elapsed, iters, m as u64 * k)
}

async fn ours_task(b: Arc<Bulkhead<StdClock>>, k: u64, hold: Hold) {
    for _ in 0..k {
        let permit = b.acquire().await.unwrap();
        hold.run().await;
        drop(permit);
    }
}

async fn tokio_task(s: Arc<tokio::sync::Semaphore>, k: u64, hold: Hold) {
    for _ in 0..k {
        let permit = s.acquire().await.unwrap();
        hold.run().await;
        drop(permit);
    }
}

async fn lock_task(s: Arc<async_lock::Semaphore>, k: u64, hold: Hold) {
    for _ in 0..k {
        let permit = s.acquire().await;
        hold.run().await;
        drop(permit);
    }
}

/// The contended groups' sample size, warm-up and measurement time: 10
/// samples, 1 s, 2 s, so that the 54 of them take about three minutes,
/// unless the command line says otherwise.
fn contended(c: &mut Criterion, rt: &Runtime, args: &Args) {
    for hold in [Hold::Yield, Hold::Spin] {
        for m in TASKS {
            for p in PERMITS {
                let name = format!("contended/{}/M={m}/P={p}", hold.name());
                let mut g = c.benchmark_group(name);
                if !args.sample_size {
                    g.sample_size(10);
                }
                if !args.warm_up_time {
                    g.warm_up_time(Duration::from_secs(1));
                }
                if !args.measurement_time {
                    g.measurement_time(Duration::from_secs(2));
                }
                g.bench_function("watertight", |b| {
                    b.iter_custom(|iters| {
                        let sem = Arc::new(Bulkhead::new("bench", p, StdClock));
                        contended_run(rt, sem, m, iters, move |s, k| ours_task(s, k, hold))
                    })
                });
                g.bench_function("tokio", |b| {
                    b.iter_custom(|iters| {
                        let sem = Arc::new(tokio::sync::Semaphore::new(p));
                        contended_run(rt, sem, m, iters, move |s, k| tokio_task(s, k, hold))
                    })
                });
                g.bench_function("async-lock", |b| {
                    b.iter_custom(|iters| {
                        let sem = Arc::new(async_lock::Semaphore::new(p));
                        contended_run(rt, sem, m, iters, move |s, k| lock_task(s, k, hold))
                    })
                });
                g.finish();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Fairness probe
// ---------------------------------------------------------------------------

const PROBE_TASKS: usize = 16;
const PROBE_LOOPS: u64 = 2000;
const PROBE_ROUNDS: usize = 5;

/// Finishing times of `PROBE_TASKS` tasks, each running `task(sem, k)`, as
/// shares of the whole run (the last finisher's time), sorted.
fn probe_round<S, F, Fut>(rt: &Runtime, sem: Arc<S>, k: u64, task: F) -> Vec<f64>
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, u64) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let finished: Vec<Duration> = rt.block_on(async {
        let start = Instant::now();
        let handles: Vec<_> = (0..PROBE_TASKS)
            .map(|_| {
                let run = task(Arc::clone(&sem), k);
                tokio::spawn(async move {
                    run.await;
                    start.elapsed()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.expect("probe task panicked"));
        }
        out
    });
    let whole = finished
        .iter()
        .max()
        .copied()
        .unwrap_or_default()
        .as_secs_f64();
    let mut shares: Vec<f64> = finished
        .iter()
        .map(|d| {
            if whole > 0.0 {
                d.as_secs_f64() / whole
            } else {
                1.0
            }
        })
        .collect();
    shares.sort_by(f64::total_cmp);
    shares
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

struct ProbeResult {
    peer: &'static str,
    first: f64,
    median: f64,
    run: Duration,
}

/// Runs `round` `rounds` times; reports the median over rounds of the first
/// finisher's share and of the median finisher's share.
fn probe_peer(
    peer: &'static str,
    rounds: usize,
    mut round: impl FnMut() -> Vec<f64>,
) -> ProbeResult {
    let mut firsts = Vec::with_capacity(rounds);
    let mut medians = Vec::with_capacity(rounds);
    let start = Instant::now();
    for _ in 0..rounds {
        let shares = round();
        firsts.push(shares[0]);
        medians.push(median(&shares));
    }
    let run = start.elapsed() / rounds as u32;
    firsts.sort_by(f64::total_cmp);
    medians.sort_by(f64::total_cmp);
    ProbeResult {
        peer,
        first: median(&firsts),
        median: median(&medians),
        run,
    }
}

fn fairness(rt: &Runtime, loops: u64, rounds: usize, save: bool) {
    let hold = Hold::Yield;
    let results = [
        probe_peer("watertight", rounds, || {
            let sem = Arc::new(Bulkhead::new("probe", 1, StdClock));
            probe_round(rt, sem, loops, move |s, k| ours_task(s, k, hold))
        }),
        probe_peer("tokio", rounds, || {
            let sem = Arc::new(tokio::sync::Semaphore::new(1));
            probe_round(rt, sem, loops, move |s, k| tokio_task(s, k, hold))
        }),
        probe_peer("async-lock", rounds, || {
            let sem = Arc::new(async_lock::Semaphore::new(1));
            probe_round(rt, sem, loops, move |s, k| lock_task(s, k, hold))
        }),
    ];

    println!();
    println!(
        "fairness: {PROBE_TASKS} tasks, 1 permit, 2 workers, each loops {loops}× acquire → \
         yield_now → release; finishing time as a share of the whole run \
         (median of {rounds} rounds; fair ≈ 1.0 for both)"
    );
    println!();
    println!("| peer | first finisher | median finisher | run |");
    println!("|---|---|---|---|");
    for r in &results {
        println!(
            "| {} | {:.3} | {:.3} | {:.1} ms |",
            r.peer,
            r.first,
            r.median,
            r.run.as_secs_f64() * 1e3
        );
    }

    let sizes = [
        (
            "watertight::Bulkhead<StdClock>",
            size_of::<Bulkhead<StdClock>>(),
        ),
        (
            "tokio::sync::Semaphore",
            size_of::<tokio::sync::Semaphore>(),
        ),
        ("async_lock::Semaphore", size_of::<async_lock::Semaphore>()),
    ];
    println!();
    println!("| type | size_of on {} |", std::env::consts::ARCH);
    println!("|---|---|");
    for (ty, size) in sizes {
        println!("| `{ty}` | {size} B |");
    }
    println!();

    if save {
        write_probe_json(loops, rounds, &results, &sizes);
    }
}

/// Where criterion writes its reports (its own rule: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else the target dir this binary sits in).
fn criterion_dir() -> std::path::PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return std::path::PathBuf::from(target).join("criterion");
    }
    // target/<profile>/deps/bulkhead-<hash>
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|t| t.join("criterion")))
        .unwrap_or_else(|| "target/criterion".into())
}

/// Saves the probe for `scripts/bench_table.py`.
fn write_probe_json(loops: u64, rounds: usize, results: &[ProbeResult], sizes: &[(&str, usize)]) {
    let peers: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "    {{\"peer\": \"{}\", \"first\": {:.6}, \"median\": {:.6}, \"run_ns\": {}}}",
                r.peer,
                r.first,
                r.median,
                r.run.as_nanos()
            )
        })
        .collect();
    let sizes: Vec<String> = sizes
        .iter()
        .map(|(ty, size)| format!("    {{\"type\": \"{ty}\", \"bytes\": {size}}}"))
        .collect();
    let json = format!(
        "{{\n  \"tasks\": {PROBE_TASKS},\n  \"permits\": 1,\n  \"workers\": 2,\n  \"loops\": {loops},\n  \
         \"rounds\": {rounds},\n  \"arch\": \"{}\",\n  \"peers\": [\n{}\n  ],\n  \"sizes\": [\n{}\n  ]\n}}\n",
        std::env::consts::ARCH,
        peers.join(",\n"),
        sizes.join(",\n"),
    );
    let dir = criterion_dir();
    let path = dir.join("bulkhead-fairness.json");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, json)) {
        eprintln!("fairness: could not write {}: {e}", path.display());
    }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

/// What the command line asks of the probe, read the way criterion reads it:
/// the first positional argument is the filter.
struct Args {
    filter: Option<String>,
    /// `cargo test --benches` or `-- --test`: run everything once, quickly.
    test: bool,
    /// `--list` or `--profile-time`: no probe.
    skip: bool,
    /// Options given on the command line, which then override the contended
    /// groups' own settings.
    sample_size: bool,
    warm_up_time: bool,
    measurement_time: bool,
}

fn args() -> Args {
    // Criterion options that take a value (`--opt value`).
    const WITH_VALUE: &[&str] = &[
        "-c",
        "--color",
        "--colour",
        "-s",
        "--save-baseline",
        "-b",
        "--baseline",
        "--baseline-lenient",
        "--format",
        "--profile-time",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--plotting-backend",
        "--output-format",
    ];
    let mut out = Args {
        filter: None,
        test: true,
        skip: false,
        sample_size: false,
        warm_up_time: false,
        measurement_time: false,
    };
    let mut bench = false;
    let mut test = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let opt = a.split('=').next().unwrap_or_default();
        match opt {
            "--bench" => bench = true,
            "--test" => test = true,
            "--list" | "--profile-time" | "--ignored" => out.skip = true,
            "--sample-size" | "--quick" => out.sample_size = true,
            "--warm-up-time" => out.warm_up_time = true,
            "--measurement-time" => out.measurement_time = true,
            _ => {}
        }
        if WITH_VALUE.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') && out.filter.is_none() {
            out.filter = Some(a);
        }
    }
    out.test = test || !bench;
    out
}

fn main() {
    let args = args();
    let rt = multi_thread_runtime();

    let mut c = Criterion::default().configure_from_args();
    uncontended_try(&mut c);
    uncontended_try_forms(&mut c);
    uncontended_await(&mut c);
    contended(&mut c, &rt, &args);
    c.final_summary();

    let probe = match &args.filter {
        None => true,
        Some(f) => f.contains("fairness"),
    };
    if probe && !args.skip {
        if args.test {
            // Check that it runs; the numbers mean nothing at this size.
            fairness(&rt, 20, 1, false);
        } else {
            fairness(&rt, PROBE_LOOPS, PROBE_ROUNDS, true);
        }
    }
}
