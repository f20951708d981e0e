//! `redis::GlobalRateLimiter` in leased mode (`GlobalRateConfigBuilder::leased`)
//! against a real `redis-server`: each test starts its own on a Unix socket
//! (persistence off) and stops it. Assertions are on counts, Redis's own
//! state and commandstats, and bounds computed from Redis's clock.
//!
//! The multi-process test runs this same test binary again as its child
//! processes (`child_process` below, selected by `WT_ROLE`).

#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use global::{
    child, get, output, quick_breaker, redis_time, reported, role, runtime, spend, unix_micros,
};
use redis_server::RedisServer;
use watertight::rate::Quota;
use watertight::redis::{
    GlobalRateConfig, GlobalRateConfigError, GlobalRateError, GlobalRateLimiter, RateFallback,
    RateKey, StoreFailure,
};

fn redis_now_us(server: &RedisServer) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.connection()).unwrap();
    s * 1_000_000 + us
}

/// Waits (at most 5 s) until the keeper has leased more than `than` cells.
async fn leased_past(api: &GlobalRateLimiter, than: u64) -> u64 {
    for _ in 0..500 {
        let l = api.metrics().leased_cells;
        if l > than {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no lease within 5 s");
}

#[test]
fn bad_refresh_intervals_are_typed_errors() {
    for refresh in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_secs(3601),
    ] {
        assert_eq!(
            GlobalRateConfig::builder(Quota::per_second(5))
                .leased(refresh)
                .build(),
            Err(GlobalRateConfigError::BadRefresh { refresh })
        );
    }
}

// ---------------------------------------------------------------------------
// Redis calls per cell, counted by Redis.

#[test]
fn leased_checks_cost_at_most_one_redis_call_per_twenty_cells() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // 2,000/s, burst 200 (a window of 100 ms), refreshed every 100 ms:
        // two "processes" (two handles, each its own keeper and pocket),
        // each with 4 tasks asking about 4,000 times a second.
        let config = GlobalRateConfig::builder(Quota::per_second(2_000).burst(200))
            .store_timeout(Duration::from_secs(1))
            .leased(Duration::from_millis(100))
            .build()
            .unwrap();
        let handles: Vec<_> = (0..2)
            .map(|_| GlobalRateLimiter::connect(&server.url(), "calls", config).unwrap())
            .collect();
        let admitted = Arc::new(AtomicU64::new(0));
        let checks = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for api in &handles {
            for _ in 0..4 {
                let (api, admitted, checks, stop) =
                    (api.clone(), admitted.clone(), checks.clone(), stop.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(SeqCst) {
                        match api.check(&RateKey::whole()).await {
                            Ok(()) => admitted.fetch_add(1, SeqCst),
                            Err(GlobalRateError::Limited { .. }) => 0,
                            Err(e) => panic!("{e}"),
                        };
                        checks.fetch_add(1, SeqCst);
                        tokio::time::sleep(Duration::from_micros(500)).await;
                    }
                }));
            }
        }
        // Steady state: after the first second, for two seconds.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (calls0, cells0, checks0) = (
            server.evalsha_calls(),
            admitted.load(SeqCst),
            checks.load(SeqCst),
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (calls, cells, asked) = (
            server.evalsha_calls() - calls0,
            admitted.load(SeqCst) - cells0,
            checks.load(SeqCst) - checks0,
        );
        stop.store(true, SeqCst);
        for t in tasks {
            t.await.unwrap();
        }
        let per_cell = calls as f64 / cells as f64;
        println!(
            "leased, 2 processes x 4 tasks, 2,000/s refreshed every 100 ms, over 2 s: \
             {cells} cells admitted of {asked} checks, {calls} EVALSHA \
             ({per_cell:.4} Redis calls per admitted cell, {:.5} per check)",
            calls as f64 / asked as f64
        );
        assert!(cells > 2_000, "only {cells} admitted in 2 s");
        assert!(per_cell <= 0.05, "{per_cell} Redis calls per cell");
        for api in &handles {
            api.close().await;
            let m = api.metrics();
            assert_eq!(
                m.leased_cells,
                m.spent_cells + m.wasted_cells + m.returned_cells,
                "{m:?}"
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Redis frozen: the pocket, then the fallback.

#[test]
fn frozen_redis_spends_the_pocket_then_falls_back() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let breaker = quick_breaker();
        let build = |fallback| {
            GlobalRateConfig::builder(Quota::per_second(1_000).burst(100))
                .store_timeout(Duration::from_millis(200))
                .store_breaker(breaker)
                .fallback(fallback)
                .leased(Duration::from_millis(200))
                .build()
                .unwrap()
        };
        let closed =
            GlobalRateLimiter::connect(&server.url(), "closed", build(RateFallback::FailClosed))
                .unwrap();
        let local = GlobalRateLimiter::connect(
            &server.url(),
            "local",
            build(RateFallback::Local(Quota::per_second(5).burst(3))),
        )
        .unwrap();
        // Ask for 40 cells (refused: demand), so that the next leases are
        // more than one cell; then wait for a lease to land and freeze
        // Redis at once: the pocket holds at least that lease.
        for api in [&closed, &local] {
            for _ in 0..40 {
                let _ = api.check(&RateKey::whole()).await;
            }
        }
        let before: Vec<u64> = [&closed, &local]
            .iter()
            .map(|a| a.metrics().spent_cells)
            .collect();
        let (l0, l1) = (closed.metrics().leased_cells, local.metrics().leased_cells);
        leased_past(&closed, l0).await;
        leased_past(&local, l1).await;
        server.freeze();
        let at_freeze: Vec<u64> = [&closed, &local]
            .iter()
            .map(|a| a.metrics().leased_cells)
            .collect();

        // Both at once: the pocket ages out within two refreshes.
        let (a, b) = tokio::join!(spend_while_frozen(&closed), spend_while_frozen(&local));
        for (i, (from_pocket, fallback, unavailable)) in [a, b].into_iter().enumerate() {
            assert!(from_pocket >= 1, "the pocket was not spent");
            assert!(
                from_pocket <= at_freeze[i] - before[i],
                "{from_pocket} spent, more than the {} leased",
                at_freeze[i] - before[i]
            );
            if i == 0 {
                assert_eq!((fallback, unavailable), (0, 20));
            } else {
                // The local quota: 3 at once, then 5 a second.
                assert!((3..=20).contains(&fallback), "{fallback}");
                assert_eq!(unavailable, 0);
            }
        }
        server.thaw();
        for api in [&closed, &local] {
            api.close().await;
            let m = api.metrics();
            assert_eq!(
                m.leased_cells,
                m.spent_cells + m.wasted_cells + m.returned_cells
            );
        }
    });
}

/// Checks every 5 ms (at most 3 s) until the fallback has answered 20
/// times; returns (cells from the pocket, fallback admissions, refusals
/// for want of Redis). No cell comes from the pocket once the fallback
/// has answered: nothing refills it while Redis is frozen.
async fn spend_while_frozen(api: &GlobalRateLimiter) -> (u64, u64, u64) {
    let (mut from_pocket, mut limited, mut unavailable, mut fallback) = (0u64, 0, 0, 0);
    let mut down = false;
    for _ in 0..600 {
        let fb = api.metrics().fallback_admitted;
        match api.check(&RateKey::whole()).await {
            Ok(()) if api.metrics().fallback_admitted > fb => {
                down = true;
                fallback += 1;
            }
            Ok(()) => {
                assert!(!down, "a cell from the pocket after the fallback began");
                from_pocket += 1;
            }
            Err(GlobalRateError::Limited { .. }) => limited += 1,
            Err(GlobalRateError::StoreUnavailable(
                StoreFailure::TimedOut | StoreFailure::BreakerOpen(_),
            )) => {
                down = true;
                unavailable += 1;
            }
            Err(e) => panic!("{e}"),
        }
        if fallback + unavailable >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "{}: Redis frozen: {from_pocket} cells from the pocket, then {limited} limited, \
         {unavailable} unavailable, {fallback} by the local fallback",
        api.name()
    );
    (from_pocket, fallback, unavailable)
}

// ---------------------------------------------------------------------------
// Close.

/// Makes `api`'s keeper lease many cells: 30 cells asked for and refused
/// (demand), then waits for the lease that follows.
async fn fill(api: &GlobalRateLimiter) {
    for _ in 0..30 {
        let _ = api.check(&RateKey::whole()).await;
    }
    let l = api.metrics().leased_cells;
    leased_past(api, l).await;
}

#[test]
fn close_gives_back_the_unspent_tail_and_then_refuses() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // T = 10 ms, burst 100; refreshed every second (no regular refresh
        // comes during the test's few hundred ms).
        let config = GlobalRateConfig::builder(Quota::per_second(100).burst(100))
            .store_timeout(Duration::from_secs(1))
            .leased(Duration::from_secs(1))
            .build()
            .unwrap();
        let key = "watertight:{api}:rate";
        let api = GlobalRateLimiter::connect(&server.url(), "api", config).unwrap();
        fill(&api).await;
        api.check(&RateKey::whole()).await.unwrap();
        let tat: u64 = get(&server, key).unwrap().parse().unwrap();
        let calls = api.metrics().redis_calls;
        api.close().await;
        let m = api.metrics();
        assert_eq!(
            m.leased_cells,
            m.spent_cells + m.wasted_cells + m.returned_cells
        );
        assert!(m.returned_cells >= 10, "{m:?}");
        assert_eq!(m.redis_calls, calls + 1, "one give-back script");
        // Gave back exactly what it says: the TAT moved back by those cells
        // (or the key went, if that is in the past).
        match get(&server, key) {
            Some(after) => assert_eq!(
                after.parse::<u64>().unwrap(),
                tat - m.returned_cells * 10_000
            ),
            None => assert!(tat - m.returned_cells * 10_000 <= redis_now_us(&server)),
        }
        // Closed: refused at once, in every form, with no Redis call.
        let evalsha = server.evalsha_calls();
        assert!(matches!(
            api.check(&RateKey::whole()).await,
            Err(GlobalRateError::Closed)
        ));
        assert!(matches!(
            api.acquire_timeout(&RateKey::new("k").unwrap(), Duration::from_secs(1))
                .await,
            Err(GlobalRateError::Closed)
        ));
        api.close().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(server.evalsha_calls(), evalsha, "a call after close");

        // Another process took cells after the lease: nothing is given
        // back (the cells stay spent, which only refuses more).
        let config = GlobalRateConfig::builder(Quota::per_second(100).burst(100))
            .store_timeout(Duration::from_secs(1))
            .leased(Duration::from_secs(1))
            .build()
            .unwrap();
        let leased = GlobalRateLimiter::connect(&server.url(), "b", config).unwrap();
        let per_call = GlobalRateLimiter::connect(
            &server.url(),
            "b",
            GlobalRateConfig::builder(Quota::per_second(100).burst(100))
                .build()
                .unwrap(),
        )
        .unwrap();
        fill(&leased).await;
        // (The lease may have taken the whole burst: a cell within 1 s.)
        per_call
            .acquire_timeout(&RateKey::whole(), Duration::from_secs(1))
            .await
            .unwrap();
        let tat = get(&server, "watertight:{b}:rate");
        leased.close().await;
        let m = leased.metrics();
        assert_eq!(m.returned_cells, 0);
        assert!(m.wasted_cells >= 10, "{m:?}");
        assert_eq!(m.leased_cells, m.spent_cells + m.wasted_cells);
        assert_eq!(get(&server, "watertight:{b}:rate"), tat);
    });
}

#[test]
fn keyed_checks_stay_one_script_each_in_leased_mode() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let config = GlobalRateConfig::builder(Quota::per_minute(60).burst(2))
            .store_timeout(Duration::from_secs(1))
            .leased(Duration::from_secs(1))
            .build()
            .unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", config).unwrap();
        // The first lease (at connect) is one script.
        leased_past(&api, 0).await;
        // (The first use of the per-call script loads it.)
        api.check(&RateKey::new("warm").unwrap()).await.unwrap();
        let calls = server.evalsha_calls();
        let k = RateKey::new("client").unwrap();
        api.check(&k).await.unwrap();
        api.check(&k).await.unwrap();
        assert!(matches!(
            api.check(&k).await,
            Err(GlobalRateError::Limited { .. })
        ));
        assert_eq!(server.evalsha_calls(), calls + 3);
        api.close().await;
    });
}

// ---------------------------------------------------------------------------
// Four processes, one quota, leased.

const QUOTA_PER_S: u32 = 200;
const BURST: u32 = 20;
const RUN: Duration = Duration::from_secs(5);
const TASKS: usize = 4;

#[test]
#[ignore = "the entry point of the child processes the multi-process test starts"]
fn child_process() {
    let Some((role, url)) = role() else {
        return;
    };
    assert_eq!(role, "leased-spender");
    let start_us: u64 = std::env::var("WT_START").unwrap().parse().unwrap();
    runtime().block_on(spender(&url, start_us));
}

/// From `start_us` (Unix time, µs) for `RUN`: connects in leased mode
/// (after reading Redis's clock: every lease it takes comes after), and
/// `TASKS` tasks each check the one quota, then sleep 2 ms, over and over
/// (demand about 30 × the quota across the four processes). Closes, then
/// reads Redis's clock again, and reports its admissions and leases.
async fn spender(url: &str, start_us: u64) {
    let c = GlobalRateConfig::builder(Quota::per_second(QUOTA_PER_S).burst(BURST))
        .store_timeout(Duration::from_secs(2))
        .leased(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let wait = start_us.saturating_sub(unix_micros());
    tokio::time::sleep(Duration::from_micros(wait)).await;
    let first = redis_time(&mut con).await;
    let api = GlobalRateLimiter::connect(url, "fleet", c).unwrap();
    let admitted = spend(&api, TASKS, tokio::time::Instant::now() + RUN).await;
    api.close().await;
    let last = redis_time(&mut con).await;
    let m = api.metrics();
    assert_eq!(
        m.spent_cells, admitted,
        "the pocket's account differs from the checks"
    );
    assert_eq!(
        m.leased_cells,
        m.spent_cells + m.wasted_cells + m.returned_cells
    );
    println!("WT admitted={admitted}");
    println!("WT leased={}", m.leased_cells - m.returned_cells);
    println!("WT calls={}", m.redis_calls);
    println!("WT first={first}");
    println!("WT last={last}");
}

#[test]
fn four_leased_processes_stay_within_one_quota_and_use_it() {
    let server = RedisServer::start();
    let start = unix_micros() + 1_500_000;
    let children: Vec<_> = (0..4)
        .map(|_| {
            child(
                "leased-spender",
                &server,
                &[("WT_START", start.to_string())],
            )
        })
        .collect();
    let (mut admitted, mut leased, mut calls, mut first, mut last) = (0, 0, 0, u64::MAX, 0);
    for c in children {
        let out = output(c);
        admitted += reported(&out, "admitted");
        leased += reported(&out, "leased");
        calls += reported(&out, "calls");
        first = first.min(reported(&out, "first"));
        last = last.max(reported(&out, "last"));
    }
    // Every lease ran in Redis between `first` and `last` (each process
    // connected after reading `first`, and closed before reading `last`),
    // and each cell spent was leased: GCRA bounds them by burst +
    // ⌊window / T⌋ exactly (T = 5,000 µs).
    let window = last - first;
    let bound = u64::from(BURST) + window / 5_000;
    let nominal = u64::from(BURST) + u64::from(QUOTA_PER_S) * RUN.as_secs();
    println!(
        "leased, 4 processes x {TASKS} tasks, {QUOTA_PER_S}/s burst {BURST}, refresh 100 ms, \
         for {RUN:?}: {admitted} admitted ({leased} leased and kept) over {window} µs of \
         Redis time (bound {bound}; burst + {QUOTA_PER_S} x 5 s = {nominal}; {:.1} % of it); \
         {calls} Redis calls ({:.3} per admitted cell)",
        admitted as f64 * 100.0 / nominal as f64,
        calls as f64 / admitted as f64
    );
    assert!(admitted <= leased, "{admitted} spent, {leased} leased");
    assert!(leased <= bound, "{leased} leased, bound {bound}");
    assert!(admitted <= bound, "{admitted} admitted, bound {bound}");
    assert!(
        window < RUN.as_micros() as u64 + 1_500_000,
        "the run took {window} µs"
    );
    assert!(
        admitted * 10 >= nominal * 9,
        "{admitted} admitted, under 90 % of {nominal}"
    );
}
