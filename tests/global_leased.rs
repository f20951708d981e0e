//! `redis::GlobalBulkhead` in leased mode ([`Mode::Leased`]) against a real
//! `redis-server`: each test starts its own on a Unix socket (persistence
//! off) and stops it. Assertions are on counts and maxima; where time
//! matters, bounds are loose (seconds), never tight latencies.
//!
//! The multi-process tests run this same test binary again as the child
//! processes (`child_process` below, selected by `WT_ROLE`). Their entries
//! and exits are marked on a *second* redis-server, so that the marks do
//! not count as calls to the limit's Redis.

#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use global::{child, first_grant, lines, next_report, output, report, role, runtime, Marks};
use redis_server::RedisServer;
use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError, Mode, StoreFailure};

const SHARES: &str = "watertight:{payments}:shares";
const SHARERS: &str = "watertight:{payments}:sharers";
const HOLDERS: &str = "watertight:{payments}:holders";

/// Leased, refreshed every 200 ms, a lease of 2 s; a generous store
/// timeout for a loaded machine.
fn leased(limit: u32) -> watertight::redis::GlobalConfigBuilder {
    GlobalConfig::builder(limit)
        .store_timeout(Duration::from_secs(1))
        .lease(Duration::from_secs(2))
        .leased(Duration::from_millis(200))
}

/// The holders' limit and its rivals': leased, a limit of 5, a lease of
/// 1 s (a dead holder's share comes back within it).
fn holder_config() -> GlobalConfig {
    leased(5).lease(Duration::from_secs(1)).build().unwrap()
}

/// The recorded shares in Redis, by process.
fn shares(server: &RedisServer) -> HashMap<String, u64> {
    redis::cmd("HGETALL")
        .arg(SHARES)
        .query(&mut server.connection())
        .unwrap()
}

/// The recorded shares in Redis, summed over the processes.
fn shared(server: &RedisServer) -> u64 {
    shares(server).values().sum()
}

/// Polls `f` until it holds, for at most `limit`.
async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

#[test]
fn the_config_checks_the_leased_settings() {
    use watertight::redis::GlobalConfigError;
    let c = leased(20).lease_floor(2).build().unwrap();
    assert_eq!(
        c.mode(),
        Mode::Leased {
            refresh: Duration::from_millis(200),
            floor: 2
        }
    );
    assert_eq!(
        leased(20).leased(Duration::ZERO).build().unwrap_err(),
        GlobalConfigError::RefreshZero
    );
    assert!(matches!(
        leased(20).leased(Duration::from_millis(1500)).build(),
        Err(GlobalConfigError::RefreshTooRare { .. })
    ));
    assert_eq!(
        leased(3).lease_floor(4).build().unwrap_err(),
        GlobalConfigError::FloorAboveLimit { floor: 4, limit: 3 }
    );
}

#[test]
fn a_leased_share_serves_calls_without_a_redis_call_each() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", leased(8).build().unwrap()).unwrap();
        // The first permits wait for the share to grow to the demand.
        let held: Vec<_> = futures_lite_join(&g, 4).await;
        assert_eq!(held.len(), 4);
        assert!(held
            .iter()
            .all(|p| p.is_global() && p.fencing_token().is_some()));
        drop(held);

        let calls_before = server.evalsha_calls();
        let pairs = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (g, pairs, peak, now) = (g.clone(), pairs.clone(), peak.clone(), now.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..500 {
                    let p = g.acquire_timeout(Duration::from_secs(5)).await.unwrap();
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    // About half a second in all: a few refreshes.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    drop(p);
                    pairs.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let calls = server.evalsha_calls() - calls_before;
        let pairs = pairs.load(Ordering::Relaxed) as u64;
        println!(
            "leased: {pairs} acquire+release pairs, {calls} Redis calls ({:.4} per pair), peak {}",
            calls as f64 / pairs as f64,
            peak.load(Ordering::SeqCst)
        );
        assert!(peak.load(Ordering::SeqCst) <= 8);
        assert!(
            calls * 20 <= pairs,
            "more than 0.05 Redis calls per pair: {calls} for {pairs}"
        );
        let m = g.metrics();
        assert_eq!(m.granted, pairs + 4);
        assert!(m.refreshes >= 1 && m.redis_calls >= m.refreshes);
        g.close().await.unwrap();
        assert!(shares(&server).is_empty(), "close gave the share back");
        assert_eq!(server.zcard(SHARERS), 0);
    });
}

/// `n` permits of `g`, taken by `n` waits at once.
async fn futures_lite_join(g: &GlobalBulkhead, n: usize) -> Vec<watertight::redis::GlobalPermit> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let g = g.clone();
        tasks.push(tokio::spawn(async move {
            g.acquire_timeout(Duration::from_secs(5)).await
        }));
    }
    let mut held = Vec::new();
    for t in tasks {
        held.push(t.await.unwrap().unwrap());
    }
    held
}

#[test]
fn two_sharers_split_the_limit_fairly_and_never_pass_it() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let url = server.url();
        let a = GlobalBulkhead::connect(&url, "payments", leased(10).build().unwrap()).unwrap();
        let b = GlobalBulkhead::connect(&url, "payments", leased(10).build().unwrap()).unwrap();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = |g: &GlobalBulkhead, tasks: usize| {
            (0..tasks)
                .map(|_| {
                    let (g, in_flight, peak, stop) =
                        (g.clone(), in_flight.clone(), peak.clone(), stop.clone());
                    tokio::spawn(async move {
                        let mut served = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let Ok(p) = g.acquire_timeout(Duration::from_millis(300)).await else {
                                continue;
                            };
                            let n = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(n, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            drop(p);
                            served += 1;
                        }
                        served
                    })
                })
                .collect::<Vec<_>>()
        };
        // A busy alone takes the whole limit but B's floor of one...
        let mut tasks = busy(&a, 12);
        assert!(
            eventually(Duration::from_secs(5), || a.metrics().share == 9).await,
            "A alone grows to the limit less B's floor: {:?}",
            a.metrics()
        );
        assert_eq!(b.metrics().share, 1);
        // ...and gives half back when B asks for as much.
        tasks.extend(busy(&b, 12));
        let mut max_recorded = 0;
        let fair = eventually(Duration::from_secs(5), || {
            let sum = shared(&server);
            max_recorded = max_recorded.max(sum);
            a.metrics().share == 5 && b.metrics().share == 5
        })
        .await;
        for _ in 0..25 {
            let sum = shared(&server);
            max_recorded = max_recorded.max(sum);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let mut served = 0;
        for t in tasks {
            served += t.await.unwrap();
        }
        println!(
            "two sharers of 10: peak in flight {}, recorded shares at most {max_recorded}, {served} calls",
            peak.load(Ordering::SeqCst)
        );
        assert!(fair, "5 and 5: A {:?}, B {:?}", a.metrics(), b.metrics());
        assert!(peak.load(Ordering::SeqCst) <= 10, "over the limit");
        assert!(max_recorded <= 10, "the recorded shares passed the limit");
        a.close().await.unwrap();
        b.close().await.unwrap();
    });
}

#[test]
fn per_call_and_leased_processes_share_one_limit() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let url = server.url();
        let leased_g =
            GlobalBulkhead::connect(&url, "payments", leased(4).build().unwrap()).unwrap();
        let per_call = GlobalBulkhead::connect(
            &url,
            "payments",
            GlobalConfig::builder(4)
                .store_timeout(Duration::from_secs(1))
                .build()
                .unwrap(),
        )
        .unwrap();
        let held = futures_lite_join(&leased_g, 3).await;
        assert!(eventually(Duration::from_secs(3), || shared(&server) == 3).await);
        let one = per_call.try_acquire().await.unwrap();
        assert!(matches!(
            per_call.try_acquire().await,
            Err(GlobalError::Full)
        ));
        // The leased side cannot grow into the per-call holder's slot.
        assert!(matches!(
            leased_g.acquire_timeout(Duration::from_millis(800)).await,
            Err(GlobalError::TimedOut)
        ));
        drop(one);
        // Once it is given back, it can.
        let fourth = leased_g
            .acquire_timeout(Duration::from_secs(3))
            .await
            .unwrap();
        assert!(server.zcard(HOLDERS) + shared(&server) <= 4);
        drop((held, fourth));
        leased_g.close().await.unwrap();
        per_call.close().await.unwrap();
    });
}

#[test]
fn a_frozen_redis_ends_the_lease_and_its_permits_report_it() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let config = GlobalConfig::builder(4)
            .store_timeout(Duration::from_millis(100))
            .lease(Duration::from_millis(800))
            .leased(Duration::from_millis(200))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", config).unwrap();
        let p = g.acquire_timeout(Duration::from_secs(3)).await.unwrap();
        let token = p.fencing_token().unwrap();
        assert_eq!(g.held(), 1);
        server.freeze();
        // While the lease is live, the share keeps serving.
        let lost = eventually(Duration::from_secs(5), || p.is_lost()).await;
        assert!(lost, "the permit reports its lease lost");
        assert_eq!(g.held(), 0);
        assert!(g.metrics().leases_lost >= 1);
        assert!(matches!(
            g.try_acquire().await,
            Err(GlobalError::StoreUnavailable(StoreFailure::TimedOut))
        ));
        server.thaw();
        let again = first_grant(&g, 100, Duration::from_millis(50))
            .await
            .expect("the share comes back with Redis");
        assert!(
            again.fencing_token().unwrap() > token,
            "a new lease, a larger token"
        );
        assert!(p.is_lost(), "an old lease stays lost");
        drop((p, again));
        g.close().await.unwrap();
    });
}

#[test]
fn a_restart_without_persistence_loses_the_leases_and_counts_what_is_in_use() {
    let mut server = RedisServer::start();
    let rt = runtime();
    let g = rt.block_on(async {
        GlobalBulkhead::connect(&server.url(), "payments", leased(4).build().unwrap()).unwrap()
    });
    let held = rt.block_on(futures_lite_join(&g, 2));
    server.restart();
    rt.block_on(async {
        let lost = eventually(Duration::from_secs(5), || held.iter().all(|p| p.is_lost())).await;
        assert!(lost, "Redis forgot the lease: its permits are lost");
        // Redis counts what the process still runs, so another process
        // gets only what is left.
        assert!(eventually(Duration::from_secs(3), || shared(&server) >= 2).await);
        let other =
            GlobalBulkhead::connect(&server.url(), "payments", leased(4).build().unwrap()).unwrap();
        let got = futures_lite_join(&other, 2).await;
        assert!(matches!(
            other.acquire_timeout(Duration::from_millis(600)).await,
            Err(GlobalError::TimedOut)
        ));
        drop((held, got));
        g.close().await.unwrap();
        other.close().await.unwrap();
    });
}

// ---------------------------------------------------------------------------
// The child processes.

#[test]
#[ignore = "the entry point of the child processes the multi-process tests start"]
fn child_process() {
    let Some((role, url)) = role() else {
        return;
    };
    runtime().block_on(async move {
        match role.as_str() {
            "worker" => worker(&url).await,
            "holder" => holder(&url).await,
            other => panic!("unknown role {other}"),
        }
    });
}

const LIMIT: u32 = 20;
const TASKS: usize = 32;
/// Busy tasks per process in each half of the run (1 : 1 : 2 : 8, then
/// 8 : 1 : 2 : 0).
const DEMAND: [[usize; 2]; 4] = [[3, 24], [3, 3], [6, 6], [24, 0]];
const HALF: Duration = Duration::from_millis(2500);
const REFRESH: Duration = Duration::from_millis(250);

fn ms_since_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One of the four: `DEMAND[i]` busy tasks of 32, for two halves of 2.5 s
/// from the shared start time; each busy task holds a permit for 10 ms
/// at a time, marking entry and exit on the marks' Redis.
async fn worker(url: &str) {
    let i: usize = std::env::var("WT_INDEX").unwrap().parse().unwrap();
    let marks_url = std::env::var("WT_MARKS").unwrap();
    let start_ms: u64 = std::env::var("WT_START").unwrap().parse().unwrap();
    let config = GlobalConfig::builder(LIMIT)
        .store_timeout(Duration::from_secs(1))
        .lease(Duration::from_secs(2))
        .leased(REFRESH)
        .build()
        .unwrap();
    let g = GlobalBulkhead::connect(url, "payments", config).unwrap();
    let marks = Marks::open(&marks_url).await;
    let start = Instant::now() + Duration::from_millis(start_ms.saturating_sub(ms_since_epoch()));
    let half = move |now: Instant| usize::from(now >= start + HALF);
    let end = start + HALF * 2;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (g, mut marks) = (g.clone(), marks.clone());
        tasks.push(tokio::spawn(async move {
            let mut served = 0u64;
            tokio::time::sleep_until(start.into()).await;
            loop {
                let now = Instant::now();
                if now >= end {
                    break served;
                }
                if task >= DEMAND[i][half(now)] {
                    let next = if half(now) == 0 { start + HALF } else { end };
                    tokio::time::sleep_until(next.into()).await;
                    continue;
                }
                let Ok(p) = g.acquire_timeout(Duration::from_millis(200)).await else {
                    continue;
                };
                marks.call(Duration::from_millis(10)).await;
                drop(p);
                served += 1;
            }
        }));
    }
    // The share over time: when the second half's fair share was reached,
    // and the share at the end.
    let fair = [[3, 10], [3, 3], [6, 6], [8, 1]][i];
    let mut reached_ms = None;
    tokio::time::sleep_until((start + HALF).into()).await;
    while Instant::now() < end {
        if reached_ms.is_none() && g.metrics().share >= fair[1] {
            reached_ms = Some((Instant::now() - (start + HALF)).as_millis());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let m = g.metrics();
    let mut served = 0;
    for t in tasks {
        served += t.await.unwrap();
    }
    g.close().await.unwrap();
    println!("WT served={served}");
    println!("WT reached_ms={}", reached_ms.unwrap_or(u128::MAX));
    println!("WT share_end={}", m.share);
    println!("WT recorded_end={}", m.share_recorded);
}

/// Takes five permits of a leased limit of 5 and holds them until killed
/// (or, stopped and continued, until they report their lease lost).
async fn holder(url: &str) {
    let config = holder_config();
    let g = GlobalBulkhead::connect(url, "payments", config).unwrap();
    let held = futures_lite_join(&g, 5).await;
    println!("WT held={}", held.len());
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !held.iter().all(|p| p.is_lost()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("WT lost={}", held.iter().filter(|p| p.is_lost()).count());
    drop(held);
    g.close().await.unwrap();
}

fn get(con: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<u64>>(con)
        .unwrap()
        .unwrap_or(0)
}

#[test]
fn four_leased_processes_hold_the_limit_share_it_fairly_and_never_pass_it() {
    let server = RedisServer::start();
    let marks = RedisServer::start();
    let start_ms = ms_since_epoch() + 1500;
    let calls_before = server.evalsha_calls();
    let children: Vec<_> = (0..4)
        .map(|i| {
            child(
                "worker",
                &server,
                &[
                    ("WT_INDEX", i.to_string()),
                    ("WT_MARKS", marks.url()),
                    ("WT_START", start_ms.to_string()),
                ],
            )
        })
        .collect();
    // Sample the marks while demand exceeds the limit, away from the
    // start and the change of demand (a refresh and a half each).
    let mut con = marks.connection();
    let start = Instant::now() + Duration::from_millis(start_ms - ms_since_epoch());
    let windows = [
        (start + REFRESH * 3, start + HALF - REFRESH),
        (start + HALF + REFRESH * 3, start + HALF * 2 - REFRESH),
    ];
    let mut samples = Vec::new();
    for (from, to) in windows {
        std::thread::sleep(from.saturating_duration_since(Instant::now()));
        while Instant::now() < to {
            samples.push(get(&mut con, "test:cur"));
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let outs: Vec<String> = children.into_iter().map(output).collect();
    let calls = server.evalsha_calls() - calls_before;
    let served: u64 = outs.iter().map(|o| report(o, "served").unwrap()).sum();
    let max = get(&mut con, "test:max");
    let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
    let reached = report(&outs[0], "reached_ms").unwrap();
    let idle_share = report(&outs[3], "share_end").unwrap();
    let idle_recorded = report(&outs[3], "recorded_end").unwrap();
    println!(
        "4 leased processes x {TASKS} tasks, limit {LIMIT}, demand 3:3:6:24 then 24:3:6:0: \
         max concurrent {max}, mean in use {mean:.1} ({:.0} %), {served} calls, {calls} Redis \
         calls ({:.4} per call); the riser reached its fair share (10) {reached} ms after the \
         change (refresh {} ms); the idle process ended with a share of {idle_share} \
         (recorded {idle_recorded})",
        mean * 100.0 / f64::from(LIMIT),
        calls as f64 / served as f64,
        REFRESH.as_millis()
    );
    assert!(
        max <= u64::from(LIMIT),
        "the limit was exceeded: {max} at once"
    );
    assert!(
        mean >= 0.9 * f64::from(LIMIT),
        "the fleet held {mean:.1} of {LIMIT} on average while demand exceeded it"
    );
    // Two refreshes, as asked, and one more for a loaded machine.
    assert!(
        u128::from(reached) <= REFRESH.as_millis() * 3,
        "the riser took {reached} ms to reach its fair share"
    );
    assert!(
        idle_share <= 1 && idle_recorded <= 1,
        "an idle process holds at most its floor"
    );
    assert!(
        calls * 20 <= served,
        "more than 0.05 Redis calls per call: {calls} for {served}"
    );
    assert_eq!(get(&mut con, "test:cur"), 0);
}

#[test]
fn a_killed_sharer_s_share_comes_back_within_one_lease() {
    let server = RedisServer::start();
    let mut holder = child("holder", &server, &[]);
    let held = next_report(&mut lines(&mut holder), "held").expect("the holder's report");
    assert_eq!(held, 5);
    holder.kill().unwrap(); // SIGKILL: no refresh, no leave
    holder.wait().unwrap();
    let killed = Instant::now();
    runtime().block_on(async {
        let config = holder_config();
        let g = GlobalBulkhead::connect(&server.url(), "payments", config).unwrap();
        // The dead process's share is still recorded: nothing for us yet.
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
        let taken = futures_lite_join(&g, 5).await;
        let back = killed.elapsed();
        println!("a killed sharer's 5 slots came back {back:?} after SIGKILL (lease 1 s)");
        assert!(back <= Duration::from_secs(1) + Duration::from_millis(1500));
        assert!(shared(&server) <= 5);
        drop(taken);
        g.close().await.unwrap();
    });
}

#[test]
fn a_stopped_sharer_loses_its_lease_and_says_so_when_continued() {
    let server = RedisServer::start();
    let mut holder = child("holder", &server, &[]);
    let mut out = lines(&mut holder);
    let held = next_report(&mut out, "held").expect("the holder's report");
    assert_eq!(held, 5);
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &holder.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    };
    signal("-STOP");
    runtime().block_on(async {
        let config = holder_config();
        let g = GlobalBulkhead::connect(&server.url(), "payments", config).unwrap();
        // Its lease ends in Redis: the others take its share.
        let taken = futures_lite_join(&g, 5).await;
        assert_eq!(taken.len(), 5);
        signal("-CONT");
        let lost = next_report(&mut out, "lost").expect("the holder's report after SIGCONT");
        assert_eq!(
            lost, 5,
            "every permit of the stopped process reports its lease lost"
        );
        drop(taken);
        g.close().await.unwrap();
    });
    assert!(holder.wait().unwrap().success());
}

#[test]
fn a_tower_service_behind_a_leased_limit_holds_a_permit_per_request() {
    use tower::{Layer, Service, ServiceExt};
    use watertight::tower::{GlobalBulkheadError, GlobalBulkheadLayer};
    let server = RedisServer::start();
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", leased(2).build().unwrap()).unwrap();
        // The share grows to two (the layer's permits come from it).
        drop(futures_lite_join(&g, 2).await);
        let (open_tx, open_rx) = tokio::sync::watch::channel(false);
        let calls = Arc::new(AtomicUsize::new(0));
        let inner = {
            let calls = calls.clone();
            tower::service_fn(move |n: u32| {
                let (mut open, calls) = (open_rx.clone(), calls.clone());
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let _ = open.wait_for(|o| *o).await;
                    Ok::<_, std::convert::Infallible>(n)
                }
            })
        };
        let svc = GlobalBulkheadLayer::new(g.clone()).layer(inner);
        let a = tokio::spawn(svc.clone().oneshot(1));
        let b = tokio::spawn(svc.clone().oneshot(2));
        assert!(eventually(Duration::from_secs(3), || calls.load(Ordering::SeqCst) == 2).await);
        assert_eq!(g.held(), 2);
        // Both permits are held by the two requests in flight: a third is
        // refused, and its inner service never called.
        let mut third = svc.clone();
        let refused = third.ready().await.unwrap().call(3).await.unwrap_err();
        assert!(matches!(
            refused,
            GlobalBulkheadError::Refused(GlobalError::Full)
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        open_tx.send(true).unwrap();
        assert_eq!(
            (a.await.unwrap().unwrap(), b.await.unwrap().unwrap()),
            (1, 2)
        );
        assert_eq!(g.held(), 0, "each permit went back with its response");
        assert_eq!(svc.clone().oneshot(4).await.unwrap(), 4);
        g.close().await.unwrap();
    });
}
