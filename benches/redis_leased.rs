//! `redis::GlobalBulkhead` in leased mode (`GlobalConfigBuilder::leased`)
//! through a real `redis-server` on a Unix socket, beside a local
//! `Bulkhead` and the per-call mode, in the same run.
//!
//! | row | what |
//! |---|---|
//! | `Bulkhead` | a local bulkhead's `acquire_owned_timeout(d).await` + drop (the floor, in the global call's shape) |
//! | leased | the leased global bulkhead's `acquire_timeout(d).await` + drop |
//! | per call | the per-call global bulkhead's `acquire_timeout(d).await` + drop (the release batched by the keeper) |
//!
//! Each at 1 task and at 16 concurrent tasks (limit 64: nobody is refused).
//! "Redis calls per pair" is what Redis counted (`INFO commandstats`,
//! `EVALSHA` calls). Then the fleet: 4 processes × 16 tasks for 1 s in
//! each mode, acquire + release as fast as they go: pairs per second for
//! the fleet, and Redis calls per pair. Each figure in the first table is
//! the median of 7 runs.
//!
//! A bench binary, not criterion: it starts its own `redis-server` (which
//! `.ci/run` installs) and stops it, and runs itself again as the fleet's
//! processes.
//!
//! Then the global rate limiter (`GlobalRateLimiter`, unkeyed limit of
//! 1,000,000/s with a burst of 100,000, refreshed every 100 ms), each row
//! 20,000 checks (at 1 and 16 tasks) after a pause that lets the pocket
//! refill, the median of 7 runs:
//!
//! | row | what |
//! |---|---|
//! | `RateLimiter` | a local `RateLimiter::check` in the same async harness (the floor) |
//! | leased | the leased `GlobalRateLimiter::check(&RateKey::whole()).await` |
//! | per call | the per-call `check`: one GCRA script each (2,000 checks a run) |
//!
//! Run: `cargo bench --bench redis_leased --features redis` (about 25 s).
//! The table: the guide, `src/guide/benchmarks.rs`
//! (`watertight::guide::benchmarks`).

#[path = "../tests/support/global.rs"]
mod global;
#[path = "support/harness.rs"]
mod harness;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use global::runtime;
use harness::{median, run_timed};
use redis_server::RedisServer;
use watertight::clock::StdClock;
use watertight::clock::TokioClock;
use watertight::rate::{Quota, RateLimiter};
use watertight::redis::{
    GlobalBulkhead, GlobalConfig, GlobalRateConfig, GlobalRateLimiter, RateKey,
};
use watertight::Bulkhead;

const RUNS: usize = 7;
const PAIRS: usize = 200_000;
const LIMIT: u32 = 64;

fn leased() -> GlobalConfig {
    GlobalConfig::builder(LIMIT)
        .store_timeout(Duration::from_secs(2))
        .lease(Duration::from_secs(3))
        .leased(Duration::from_millis(500))
        .build()
        .unwrap()
}

fn per_call() -> GlobalConfig {
    GlobalConfig::builder(LIMIT)
        .store_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// `per_task` pairs of `g` (`acquire_timeout(5 s).await` + drop) on each
/// of `tasks` tasks at once: the wall time per pair.
async fn pairs(g: &GlobalBulkhead, tasks: usize, per_task: usize) -> Duration {
    let g = g.clone();
    run_timed(tasks, per_task, move || {
        let g = g.clone();
        async move {
            drop(black_box(
                g.acquire_timeout(Duration::from_secs(5)).await.unwrap(),
            ))
        }
    })
    .await
}

/// Lets `g`'s share grow to what `tasks` tasks ask for.
async fn warm(g: &GlobalBulkhead, tasks: usize) {
    let mut held = Vec::new();
    for _ in 0..tasks {
        held.push(g.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    }
}

fn main() {
    if let Ok(mode) = std::env::var("WT_FLEET") {
        fleet_process(&mode);
        return;
    }
    let server = RedisServer::start();
    let rt = runtime();
    println!();
    println!("| row | tasks | ns per pair | ÷ Bulkhead | Redis calls per pair |");
    println!("|---|---|---|---|---|");
    rt.block_on(async {
        let local = Arc::new(Bulkhead::new("bench-local", LIMIT as usize, TokioClock));
        let leased_g = GlobalBulkhead::connect(&server.url(), "bench-leased", leased()).unwrap();
        let per_call_g =
            GlobalBulkhead::connect(&server.url(), "bench-per-call", per_call()).unwrap();
        warm(&leased_g, 16).await;
        per_call_g
            .try_acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        for tasks in [1, 16] {
            let per_task = PAIRS / tasks;
            let (mut base, mut lease, mut call) = (vec![], vec![], vec![]);
            let (mut lease_calls, mut call_calls) = (vec![], vec![]);
            for _ in 0..RUNS {
                // The same shape as the global call: a wait with a
                // timeout, an owned permit.
                let l = local.clone();
                let t = run_timed(tasks, per_task, move || {
                    let l = l.clone();
                    async move {
                        let p = l.acquire_owned_timeout(Duration::from_secs(5)).await;
                        drop(black_box(p.unwrap()));
                    }
                })
                .await;
                base.push(t.as_secs_f64());

                let before = server.evalsha_calls();
                let t = pairs(&leased_g, tasks, per_task).await;
                lease.push(t.as_secs_f64());
                lease_calls.push((server.evalsha_calls() - before) as f64 / PAIRS as f64);

                // Fewer pairs: each is a round trip.
                let before = server.evalsha_calls();
                let n = per_task / 100;
                let t = pairs(&per_call_g, tasks, n).await;
                call.push(t.as_secs_f64());
                tokio::time::sleep(Duration::from_millis(20)).await; // the keeper's batches
                call_calls.push((server.evalsha_calls() - before) as f64 / (n * tasks) as f64);
            }
            let base = median(base);
            for (name, t, calls) in [
                ("Bulkhead (local)", base, None),
                ("leased", median(lease), Some(median(lease_calls))),
                ("per call", median(call), Some(median(call_calls))),
            ] {
                println!(
                    "| {name} | {tasks} | {:.0} | {:.2} | {} |",
                    t * 1e9,
                    t / base,
                    calls.map_or("—".into(), |c: f64| format!("{c:.4}"))
                );
            }
        }
        leased_g.close().await.unwrap();
        per_call_g.close().await.unwrap();
    });

    rt.block_on(rate_rows(&server));

    println!();
    println!(
        "| fleet: 4 processes × 16 tasks, 1 s | pairs (or admitted checks) per second | Redis calls per pair (or check) |"
    );
    println!("|---|---|---|");
    for mode in ["leased", "per-call", "rate-leased", "rate-per-call"] {
        let before = server.evalsha_calls();
        let children: Vec<_> = (0..4)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .env("WT_FLEET", mode)
                    .env("WT_URL", server.url())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut pairs = 0u64;
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            pairs += String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap();
        }
        let calls = server.evalsha_calls() - before;
        println!(
            "| {mode} | {:.0} | {:.6} |",
            pairs as f64,
            calls as f64 / pairs as f64
        );
    }
}

/// Makes the leased limiter's keeper lease at least `cells` at once:
/// `cells` checks (demand), then a wait (at most 300 ms) for a lease that
/// large, again if none came.
async fn filled(g: &GlobalRateLimiter, cells: u64) {
    for _ in 0..20 {
        for _ in 0..cells {
            let _ = g.check(&RateKey::whole()).await;
        }
        let before = g.metrics().leased_cells;
        for _ in 0..300 {
            if g.metrics().leased_cells >= before + cells {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The global rate limiter's rows: leased and per-call checks beside a
/// local `RateLimiter::check`.
async fn rate_rows(server: &RedisServer) {
    let quota = Quota::per_second(1_000_000).burst(100_000);
    let build = |leased: bool| {
        let b = GlobalRateConfig::builder(quota).store_timeout(Duration::from_secs(2));
        if leased {
            b.leased(Duration::from_millis(100)).build().unwrap()
        } else {
            b.build().unwrap()
        }
    };
    let local = Arc::new(RateLimiter::new("bench-local-rate", quota, StdClock));
    let leased =
        GlobalRateLimiter::connect(&server.url(), "bench-rate-leased", build(true)).unwrap();
    let per_call =
        GlobalRateLimiter::connect(&server.url(), "bench-rate-per-call", build(false)).unwrap();
    per_call.check(&RateKey::whole()).await.unwrap();
    const CHECKS: usize = 20_000;
    println!();
    println!(
        "| rate row | tasks | ns per check | ÷ RateLimiter | admitted | Redis calls per check |"
    );
    println!("|---|---|---|---|---|---|");
    let admitted = Arc::new(AtomicU64::new(0));
    for tasks in [1, 16] {
        let per_task = CHECKS / tasks;
        let (mut base, mut lease, mut call) = (vec![], vec![], vec![]);
        let (mut base_ok, mut lease_ok) = (vec![], vec![]);
        let (mut lease_calls, mut call_calls) = (vec![], vec![]);
        for _ in 0..RUNS {
            admitted.store(0, Ordering::Relaxed);
            let (l, ok) = (local.clone(), admitted.clone());
            let t = run_timed(tasks, per_task, move || {
                let (l, ok) = (l.clone(), ok.clone());
                async move {
                    if black_box(l.check()).is_ok() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .await;
            base.push(t.as_secs_f64());
            base_ok.push(admitted.load(Ordering::Relaxed) as f64 / (per_task * tasks) as f64);

            // A run's worth of cells in the pocket (they age out after two
            // refreshes: the run starts at once).
            filled(&leased, CHECKS as u64).await;
            admitted.store(0, Ordering::Relaxed);
            let before = server.evalsha_calls();
            let (g, ok) = (leased.clone(), admitted.clone());
            let t = run_timed(tasks, per_task, move || {
                let (g, ok) = (g.clone(), ok.clone());
                async move {
                    if black_box(g.check(&RateKey::whole()).await).is_ok() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .await;
            lease.push(t.as_secs_f64());
            lease_ok.push(admitted.load(Ordering::Relaxed) as f64 / (per_task * tasks) as f64);
            lease_calls.push((server.evalsha_calls() - before) as f64 / (per_task * tasks) as f64);

            let before = server.evalsha_calls();
            let g = per_call.clone();
            let n = per_task / 10;
            let t = run_timed(tasks, n, move || {
                let g = g.clone();
                async move {
                    black_box(g.check(&RateKey::whole()).await).unwrap();
                }
            })
            .await;
            call.push(t.as_secs_f64());
            call_calls.push((server.evalsha_calls() - before) as f64 / (n * tasks) as f64);
        }
        let base = median(base);
        for (name, t, ok, calls) in [
            ("RateLimiter (local)", base, median(base_ok), None),
            (
                "leased",
                median(lease),
                median(lease_ok),
                Some(median(lease_calls)),
            ),
            // Unwrapped above: every per-call check was admitted.
            ("per call", median(call), 1.0, Some(median(call_calls))),
        ] {
            println!(
                "| {name} | {tasks} | {:.0} | {:.2} | {:.1} % | {} |",
                t * 1e9,
                t / base,
                ok * 100.0,
                calls.map_or("—".into(), |c: f64| format!("{c:.4}"))
            );
        }
    }
    leased.close().await;
}

/// One process of the fleet: 16 tasks taking and dropping permits for 1 s
/// (after a warm-up), or checking a global rate (`rate-…` modes, a quota
/// of 1,000,000/s); prints the pairs done (or checks admitted).
fn fleet_process(mode: &str) {
    let url = std::env::var("WT_URL").unwrap();
    if let Some(rate_mode) = mode.strip_prefix("rate-") {
        runtime().block_on(fleet_rate(&url, rate_mode == "leased"));
        return;
    }
    runtime().block_on(async {
        let config = if mode == "leased" {
            leased()
        } else {
            per_call()
        };
        let g = GlobalBulkhead::connect(&url, "bench-fleet", config).unwrap();
        warm(&g, 16).await;
        let stop = Arc::new(AtomicBool::new(false));
        let pairs = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (g, stop, pairs) = (g.clone(), stop.clone(), pairs.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(p) = g.acquire_timeout(Duration::from_secs(1)).await {
                        drop(black_box(p));
                        pairs.fetch_add(1, Ordering::Relaxed);
                    }
                    // A call does I/O: the runtime's other tasks (the
                    // keeper, the timers) get their turn.
                    tokio::task::yield_now().await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        g.close().await.unwrap();
        println!("{}", pairs.load(Ordering::Relaxed));
    });
}

/// A fleet process of the rate rows: 16 tasks checking one unkeyed global
/// rate of 1,000,000/s (the fastest a quota in µs goes; burst 100,000)
/// for 1 s; prints the checks admitted (the fleet's total is at most the
/// quota: a leased fleet that reaches it is held to it).
async fn fleet_rate(url: &str, leased: bool) {
    let quota = Quota::per_second(1_000_000).burst(100_000);
    let mut config = GlobalRateConfig::builder(quota).store_timeout(Duration::from_secs(2));
    if leased {
        config = config.leased(Duration::from_millis(100));
    }
    let api = GlobalRateLimiter::connect(url, "bench-fleet-rate", config.build().unwrap()).unwrap();
    // Connected (and, leased, the first lease taken) before the second
    // starts; no cells leased ahead beyond that, so that the second's
    // count is what the fleet was let through in it.
    let _ = api.check(&RateKey::whole()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (api, stop, admitted) = (api.clone(), stop.clone(), admitted.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if black_box(api.check(&RateKey::whole()).await).is_ok() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    api.close().await;
    println!("{}", admitted.load(Ordering::Relaxed));
}
