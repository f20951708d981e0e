//! `redis::GlobalBulkhead` through a real `redis-server` on a Unix socket,
//! beside the floor: a `PING` round trip on a connection of the same kind
//! (redis-rs's connection manager, RESP3), in the same run.
//!
//! | row | what |
//! |---|---|
//! | `PING` | one `PING` round trip (the floor) |
//! | `try_acquire + drop` | a grant, then the permit dropped: the release goes to the keeper task, batched with others |
//! | `try_acquire + release().await` | a grant, then a release waited for: two round trips |
//! | `local front refuses` | the local cap is reached: refused with no Redis call (ns) |
//! | `Bulkhead::try_acquire refuses` | the same refusal from a plain local `Bulkhead` (ns), for reading the row above |
//! | `GlobalRateLimiter::check` | one fleet-wide GCRA check, admitted: one script (per check, not per pair) |
//! | `RateLimiter::check admits` | the local rate limiter's admission (ns), for reading the row above |
//!
//! Each row runs at 1 task and at 16 concurrent tasks (limit 64, so nobody
//! is refused). "Round trips" is time per pair ÷ time per `PING` at the
//! same concurrency; "script calls" is what Redis counted (`INFO
//! commandstats`, `EVALSHA` calls) per pair: the releases the keeper sent
//! in one call are one. Each figure is the median of 7 runs.
//!
//! A bench binary, not criterion: it starts its own `redis-server` (which
//! `.ci/run` installs) and stops it.
//!
//! Run: `cargo bench --bench redis --features redis` (about 30 s). The
//! table and how to read it: the guide, `src/guide/benchmarks.rs`
//! (`watertight::guide::benchmarks`).

#[path = "../tests/support/global.rs"]
mod global;
#[path = "support/harness.rs"]
mod harness;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use global::runtime;
use harness::{median, run};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_server::RedisServer;
use watertight::clock::StdClock;
use watertight::rate::{Quota, RateLimiter};
use watertight::redis::{
    GlobalBulkhead, GlobalConfig, GlobalRateConfig, GlobalRateLimiter, RateKey,
};
use watertight::Bulkhead;

const RUNS: usize = 7;
const PAIRS: usize = 4_000;

/// Script calls and server µs per pair since `before`.
fn per_pair(server: &RedisServer, before: (u64, u64), pairs: usize) -> (f64, f64) {
    let now = server.evalsha_stats();
    let n = pairs as f64;
    ((now.0 - before.0) as f64 / n, (now.1 - before.1) as f64 / n)
}

/// Waits until Redis holds no member of the bench's system (the keeper's
/// last releases are in).
async fn drained(server: &RedisServer) {
    for _ in 0..500 {
        if server.zcard("watertight:{bench}:holders") == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the bench's permits were not all released");
}

struct Row {
    name: &'static str,
    tasks: usize,
    /// µs per pair (or per op).
    us: f64,
    /// `us` ÷ the `PING` row's at the same concurrency.
    vs_ping: Option<f64>,
    /// Script calls Redis ran per pair.
    requests: Option<f64>,
    /// µs Redis spent running them, per pair.
    server_us: Option<f64>,
}

fn main() {
    let server = RedisServer::start();
    let rt = runtime();
    let rows = rt.block_on(bench(&server));
    let opt = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.2}"));
    println!();
    println!("| row | tasks | µs per pair | ÷ PING | script calls per pair | Redis µs per pair |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let us = if r.us < 0.1 {
            format!("{:.1} ns", r.us * 1000.0)
        } else {
            format!("{:.1}", r.us)
        };
        println!(
            "| {} | {} | {us} | {} | {} | {} |",
            r.name,
            r.tasks,
            opt(r.vs_ping),
            opt(r.requests),
            opt(r.server_us)
        );
    }
}

/// Medians of one measured variant: time per pair, script calls per pair,
/// server µs per pair.
#[derive(Default)]
struct Samples(Vec<f64>, Vec<f64>, Vec<f64>);

impl Samples {
    fn push(&mut self, t: Duration, (calls, usec): (f64, f64)) {
        self.0.push(t.as_secs_f64());
        self.1.push(calls);
        self.2.push(usec);
    }

    fn row(self, name: &'static str, tasks: usize, ping: f64) -> Row {
        let t = median(self.0);
        Row {
            name,
            tasks,
            us: t * 1e6,
            vs_ping: Some(t / ping),
            requests: Some(median(self.1)),
            server_us: Some(median(self.2)),
        }
    }
}

async fn bench(server: &RedisServer) -> Vec<Row> {
    let info = redis::IntoConnectionInfo::into_connection_info(server.url()).unwrap();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let client = redis::Client::open(info.set_redis_settings(settings)).unwrap();
    let con = ConnectionManager::new_with_config(client, ConnectionManagerConfig::new())
        .await
        .unwrap();
    let config = GlobalConfig::builder(64)
        .store_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let g = GlobalBulkhead::connect(&server.url(), "bench", config).unwrap();
    // Connect and load the scripts.
    g.try_acquire().await.unwrap().release().await.unwrap();
    let acquire = Arc::new(redis::Script::new(include_str!(
        "../src/redis/scripts/acquire.lua"
    )));
    let release = Arc::new(redis::Script::new(include_str!(
        "../src/redis/scripts/release.lua"
    )));
    // A quota nobody reaches (a million a second, a second's burst): every
    // check is admitted, one script each.
    let wide = Quota::per_second(1_000_000).burst(1_000_000);
    let rate = GlobalRateLimiter::connect(
        &server.url(),
        "bench-rate",
        GlobalRateConfig::builder(wide)
            .store_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    )
    .unwrap();
    rate.check(&RateKey::whole()).await.unwrap();

    let mut rows = Vec::new();
    for tasks in [1, 16] {
        let per_task = PAIRS / tasks;
        let mut ping = vec![];
        let (mut raw, mut dropped, mut awaited, mut checked) = (
            Samples::default(),
            Samples::default(),
            Samples::default(),
            Samples::default(),
        );
        for _ in 0..RUNS {
            let c = con.clone();
            let t = run(tasks, per_task, move || {
                let mut c = c.clone();
                async move {
                    let _: String = redis::cmd("PING").query_async(&mut c).await.unwrap();
                }
            })
            .await;
            ping.push(t.as_secs_f64());

            // The two scripts alone, no watertight around them.
            let before = server.evalsha_stats();
            let (c, a, r) = (con.clone(), acquire.clone(), release.clone());
            let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let t = run(tasks, per_task, move || {
                let (mut c, a, r, seq) = (c.clone(), a.clone(), r.clone(), seq.clone());
                async move {
                    let m = seq
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                        .to_string();
                    let _: redis::Value = a
                        .key("watertight:{raw}:holders")
                        .key("watertight:{raw}:fence")
                        .key("watertight:{raw}:sharers")
                        .key("watertight:{raw}:shares")
                        .arg(1_000_000)
                        .arg(60_000)
                        .arg(&m)
                        .invoke_async(&mut c)
                        .await
                        .unwrap();
                    let _: u64 = r
                        .key("watertight:{raw}:holders")
                        .arg("watertight:{raw}:released")
                        .arg(&m)
                        .invoke_async(&mut c)
                        .await
                        .unwrap();
                }
            })
            .await;
            raw.push(t, per_pair(server, before, PAIRS));

            let before = server.evalsha_stats();
            let gg = g.clone();
            let t = run(tasks, per_task, move || {
                let g = gg.clone();
                async move {
                    drop(black_box(g.try_acquire().await.unwrap()));
                }
            })
            .await;
            // Counted once the keeper's last batch is in.
            drained(server).await;
            dropped.push(t, per_pair(server, before, PAIRS));

            let before = server.evalsha_stats();
            let gg = g.clone();
            let t = run(tasks, per_task, move || {
                let g = gg.clone();
                async move {
                    g.try_acquire().await.unwrap().release().await.unwrap();
                }
            })
            .await;
            awaited.push(t, per_pair(server, before, PAIRS));

            let before = server.evalsha_stats();
            let rr = rate.clone();
            let t = run(tasks, per_task, move || {
                let r = rr.clone();
                async move {
                    r.check(&RateKey::whole()).await.unwrap();
                }
            })
            .await;
            checked.push(t, per_pair(server, before, PAIRS));
        }
        let ping = median(ping);
        rows.push(Row {
            name: "PING (the floor)",
            tasks,
            us: ping * 1e6,
            vs_ping: Some(1.0),
            requests: None,
            server_us: None,
        });
        rows.push(raw.row("the two scripts alone, one after the other", tasks, ping));
        rows.push(dropped.row(
            "try_acquire + drop (release handed to the keeper)",
            tasks,
            ping,
        ));
        rows.push(awaited.row("try_acquire + release().await", tasks, ping));
        rows.push(checked.row(
            "GlobalRateLimiter::check, admitted (one GCRA script; per check)",
            tasks,
            ping,
        ));
    }

    // The local front at its cap: refused without Redis.
    let capped = GlobalBulkhead::connect(
        &server.url(),
        "bench-front",
        GlobalConfig::builder(64).local_cap(1).build().unwrap(),
    )
    .unwrap();
    let _held = capped.try_acquire().await.unwrap();
    let local = Bulkhead::new("bench-local", 1, StdClock);
    let _local_held = local.try_acquire().unwrap();
    let (mut front, mut plain) = (vec![], vec![]);
    const REFUSALS: u32 = 200_000;
    for _ in 0..RUNS {
        let before = server.evalsha_calls();
        let t = Instant::now();
        for _ in 0..REFUSALS {
            black_box(capped.try_acquire().await.unwrap_err());
        }
        front.push((t.elapsed() / REFUSALS).as_secs_f64());
        assert_eq!(server.evalsha_calls(), before, "the front called Redis");
        let t = Instant::now();
        for _ in 0..REFUSALS {
            let _ = black_box(local.try_acquire());
        }
        plain.push((t.elapsed() / REFUSALS).as_secs_f64());
    }
    // The local rate limiter's admission, for reading the global one's.
    let local_rate = RateLimiter::new("bench-local-rate", wide, StdClock);
    let mut local_checks = vec![];
    const CHECKS: u32 = 200_000;
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..CHECKS {
            let _ = black_box(local_rate.check());
        }
        local_checks.push((t.elapsed() / CHECKS).as_secs_f64());
    }
    for (name, v) in [
        ("local front at its cap refuses (no Redis call)", front),
        ("for reading it: Bulkhead::try_acquire refuses", plain),
        (
            "for reading the GCRA row: RateLimiter::check admits",
            local_checks,
        ),
    ] {
        rows.push(Row {
            name,
            tasks: 1,
            us: median(v) * 1e6,
            vs_ping: None,
            requests: None,
            server_us: None,
        });
    }
    rows
}
