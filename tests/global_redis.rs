//! `redis::GlobalBulkhead` against a real `redis-server`: each test starts
//! its own on a Unix socket (persistence off) and stops it. Assertions are
//! on counts, maxima and order; where time matters, bounds are loose
//! (seconds), never tight latencies.
//!
//! The multi-process tests run this same test binary again as the child
//! processes (`child_process` below, selected by `WT_ROLE`).

#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use global::{child, lines, next_report, output, quick_breaker, report, role, runtime, Marks};
use redis_server::RedisServer;
use watertight::clock::TokioClock;
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::redis::{
    Fallback, GlobalBuildError, GlobalBulkhead, GlobalConfig, GlobalConfigError, GlobalError,
    GlobalPermit, StoreFailure,
};

const HOLDERS: &str = "watertight:{payments}:holders";

/// A config for tests on a loaded machine: a generous store timeout.
fn config(limit: u32) -> watertight::redis::GlobalConfigBuilder {
    GlobalConfig::builder(limit).store_timeout(Duration::from_secs(1))
}

/// How many times Redis ran `EVALSHA` (every script call).
fn holders(server: &RedisServer) -> u64 {
    server.zcard(HOLDERS)
}

/// Polls `f` (a test's own bookkeeping, not the code under test) until it
/// holds, for at most `limit`.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// The first permit `g` grants, trying every 50 ms for at most `limit`:
/// how a test waits for the global limit to come back.
async fn granted_within(g: &GlobalBulkhead, limit: Duration) -> Option<GlobalPermit> {
    tokio::time::timeout(limit, async {
        loop {
            match g.try_acquire().await {
                Ok(p) => break p,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .ok()
}

/// Whether `permit` reports its lease lost within `limit`.
async fn lost_within(permit: &GlobalPermit, limit: Duration) -> bool {
    tokio::time::timeout(limit, async {
        while !permit.is_lost() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .is_ok()
}

// ---------------------------------------------------------------------------
// The child processes.

#[test]
#[ignore = "the entry point of the child processes the multi-process tests start"]
fn child_process() {
    let Some((role, url)) = role() else {
        return;
    };
    if role == "exiter" {
        // One thread: the keeper cannot run between the drops and the
        // runtime's shutdown, which is what a process exiting looks like.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(exiter(&url));
        drop(rt);
        println!("WT exited=1");
        return;
    }
    runtime().block_on(async move {
        match role.as_str() {
            "worker" => worker(&url).await,
            "holder" => holder(&url).await,
            other => panic!("unknown role {other}"),
        }
    });
}

const TASKS: usize = 32;
const CALLS_PER_TASK: usize = 5;

async fn worker(url: &str) {
    let g = GlobalBulkhead::connect(url, "payments", config(10).build().unwrap()).unwrap();
    let mut marks = Marks::open(url).await;
    let start = Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (g, mut marks, start) = (g.clone(), marks.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut granted = 0;
            for _ in 0..CALLS_PER_TASK {
                let Ok(permit) = g.acquire_timeout(Duration::from_secs(60)).await else {
                    continue;
                };
                assert!(permit.is_global());
                marks.call(Duration::from_millis(5)).await;
                drop(permit);
                granted += 1;
            }
            granted
        }));
    }
    let mut granted = 0;
    for t in tasks {
        granted += t.await.unwrap();
    }
    // Let the keeper send the last releases before the process exits.
    marks.ping().await;
    drop(g);
    tokio::time::sleep(Duration::from_millis(200)).await;
    println!("WT granted={granted}");
}

async fn holder(url: &str) {
    let config = config(5)
        .lease(Duration::from_secs(2))
        .renew_every(Duration::from_millis(500))
        .build()
        .unwrap();
    let g = GlobalBulkhead::connect(url, "payments", config).unwrap();
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(g.try_acquire().await.unwrap());
    }
    println!("WT held={}", held.len());
    // Killed (SIGKILL) by the parent long before this ends.
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// Takes five permits, drops them and returns: `main` ending right after.
async fn exiter(url: &str) {
    let g = GlobalBulkhead::connect(url, "payments", config(5).build().unwrap()).unwrap();
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(g.try_acquire().await.unwrap());
    }
    println!("WT held={}", held.len());
    drop(held);
}

// ---------------------------------------------------------------------------
// Many processes, one limit.

#[test]
fn four_processes_stay_within_one_limit_and_use_it() {
    let server = RedisServer::start();
    let children: Vec<_> = (0..4).map(|_| child("worker", &server, &[])).collect();
    let mut granted = 0;
    for c in children {
        granted += report(&output(c), "granted").expect("a worker's report");
    }
    let mut con = server.connection();
    let max: u64 = redis::cmd("GET").arg("test:max").query(&mut con).unwrap();
    let cur: i64 = redis::cmd("GET").arg("test:cur").query(&mut con).unwrap();
    println!("4 processes x {TASKS} tasks, limit 10: max concurrent {max}, {granted} calls");
    assert_eq!(
        granted,
        (4 * TASKS * CALLS_PER_TASK) as u64,
        "every call got a slot"
    );
    assert!(max <= 10, "the limit was exceeded: {max} at once");
    assert!(max >= 8, "the limit was not used: at most {max} at once");
    assert_eq!(cur, 0);
    assert!(
        eventually(Duration::from_secs(5), || holders(&server) == 0),
        "every slot was given back"
    );
}

#[test]
fn a_killed_holder_s_slots_come_back_within_one_lease() {
    let server = RedisServer::start();
    let mut holder = child("holder", &server, &[]);
    let held = next_report(&mut lines(&mut holder), "held").expect("the holder's report");
    assert_eq!(held, 5);
    holder.kill().unwrap(); // SIGKILL: no release, no renewal
    holder.wait().unwrap();
    let killed = Instant::now();

    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", config(5).build().unwrap()).unwrap();
        // Still held by the dead process: the limit is not exceeded.
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
        let mut taken = Vec::new();
        for _ in 0..5 {
            // Woken when the earliest dead lease ends (the script says when).
            taken.push(g.acquire_timeout(Duration::from_secs(10)).await.unwrap());
        }
        let back = killed.elapsed();
        println!("a killed holder's 5 slots came back {back:?} after SIGKILL (lease 2 s)");
        assert!(back <= Duration::from_secs(2) + Duration::from_millis(1500));
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
        assert_eq!(holders(&server), 5);
    });
}

#[test]
fn a_process_that_drops_its_permits_and_exits_leaves_no_member() {
    let server = RedisServer::start();
    let out = output(child("exiter", &server, &[]));
    assert_eq!(report(&out, "held"), Some(5));
    assert_eq!(report(&out, "exited"), Some(1));
    // Checked at once, not eventually: the process is gone, so whatever it
    // did not send before exiting is never sent.
    assert_eq!(
        holders(&server),
        0,
        "the exited process left members behind"
    );
}

#[test]
fn close_waits_for_held_permits_and_flushes_every_release() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", config(5).build().unwrap()).unwrap();
        let other =
            GlobalBulkhead::connect(&server.url(), "payments", config(5).build().unwrap()).unwrap();
        let mut permits = Vec::new();
        for _ in 0..3 {
            permits.push(g.try_acquire().await.unwrap());
        }
        let long = g.try_acquire().await.unwrap();
        drop(permits); // handed to the keeper, not yet in Redis
        let holder = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(!long.is_lost());
            drop(long);
        });
        let closing = {
            let g = g.clone();
            tokio::spawn(async move { g.close().await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Closing: no new slot, while the held one stays counted.
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Closed)));
        assert!(
            !closing.is_finished(),
            "close did not wait for the held permit"
        );
        assert_eq!(g.held(), 1);
        holder.await.unwrap();
        closing.await.unwrap().unwrap();
        // Confirmed by Redis when close returns: no waiting here.
        assert_eq!(holders(&server), 0);
        assert_eq!(g.held(), 0);
        let m = g.metrics();
        assert_eq!((m.released, m.rejected_closed), (4, 1));
        g.close().await.unwrap(); // again: at once
                                  // Another handle is not affected.
        assert!(other.try_acquire().await.is_ok());
    });
}

#[test]
fn fencing_tokens_grow_across_a_redis_restart_without_persistence() {
    let mut server = RedisServer::start();
    runtime().block_on(async {
        let c = config(2)
            .store_breaker(quick_breaker())
            .lease(Duration::from_secs(2))
            .renew_every(Duration::from_millis(250))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        let mut before = 0;
        for _ in 0..3 {
            let p = g.try_acquire().await.unwrap();
            before = before.max(p.fencing_token().unwrap());
            p.release().await.unwrap();
        }
        server.restart(); // empty: the counter is gone
        let p = granted_within(&g, Duration::from_secs(15))
            .await
            .expect("the global limit did not resume after the restart");
        let after = p.fencing_token().unwrap();
        println!("fencing token before the restart {before}, after {after}");
        assert!(
            after > before,
            "a token after the restart ({after}) is not above the last one before it ({before})"
        );
    });
}

#[test]
fn held_and_the_metrics_agree_with_is_lost() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // A store timeout longer than the lease: the keeper's renewal is
        // still waiting on a frozen Redis when the lease ends by the clock.
        let c = GlobalConfig::builder(1)
            .store_timeout(Duration::from_secs(3))
            .lease(Duration::from_millis(600))
            .renew_every(Duration::from_millis(150))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        let permit = g.try_acquire().await.unwrap();
        server.freeze();
        let lost = lost_within(&permit, Duration::from_secs(5)).await;
        // At the moment `is_lost` turns true, `held` and the metrics say so.
        let (held, m) = (g.held(), g.metrics());
        server.thaw();
        assert!(lost);
        assert_eq!((held, m.held, m.leases_lost), (0, 0, 1));
        // And the other way round: a lease over by the clock is lost for
        // `held` first, then for the permit, counted once.
        let permit2 = {
            tokio::time::sleep(Duration::from_millis(200)).await;
            granted_within(&g, Duration::from_secs(5)).await.unwrap()
        };
        server.freeze();
        tokio::time::sleep(Duration::from_millis(900)).await;
        let held = g.held();
        server.thaw();
        assert_eq!(held, 0);
        assert!(permit2.is_lost());
        assert_eq!(g.metrics().leases_lost, 2);
    });
}

// ---------------------------------------------------------------------------
// The protocol, in one process.

#[test]
fn the_limit_holds_and_fencing_tokens_grow() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let a =
            GlobalBulkhead::connect(&server.url(), "payments", config(3).build().unwrap()).unwrap();
        // A second handle stands for a second process.
        let b =
            GlobalBulkhead::connect(&server.url(), "payments", config(3).build().unwrap()).unwrap();
        let p1 = a.try_acquire().await.unwrap();
        let p2 = b.try_acquire().await.unwrap();
        let p3 = a.try_acquire().await.unwrap();
        assert!(matches!(b.try_acquire().await, Err(GlobalError::Full)));
        // Consecutive, from wherever the counter started (Redis's `TIME`).
        let t1 = p1.fencing_token().unwrap();
        let tokens = [p1.fencing_token(), p2.fencing_token(), p3.fencing_token()];
        assert_eq!(tokens, [Some(t1), Some(t1 + 1), Some(t1 + 2)]);
        assert_eq!((a.held(), b.held()), (2, 1));
        assert_eq!(holders(&server), 3);
        p2.release().await.unwrap();
        assert_eq!(holders(&server), 2);
        let p4 = b.try_acquire().await.unwrap();
        assert_eq!(p4.fencing_token(), Some(t1 + 3));
        drop((p1, p3, p4));
        assert!(
            eventually(Duration::from_secs(5), || holders(&server) == 0),
            "dropped permits are released by the keeper"
        );
        assert!(eventually(Duration::from_secs(5), || a.metrics().released == 2));
        let m = a.metrics();
        assert_eq!((m.granted, m.rejected(), m.released), (2, 0, 2));
        assert_eq!(b.metrics().rejected_full, 1);
    });
}

#[test]
fn a_waiter_is_woken_by_a_release_not_by_polling() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let url = server.url();
        let a = GlobalBulkhead::connect(&url, "payments", config(1).build().unwrap()).unwrap();
        let b = GlobalBulkhead::connect(&url, "payments", config(1).build().unwrap()).unwrap();
        let held = a.try_acquire().await.unwrap();
        let first = held.fencing_token().unwrap();
        // Let b's connection subscribe before it waits.
        let _ = b.try_acquire().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = server.evalsha_calls();
        let waiter = tokio::spawn(async move {
            let start = Instant::now();
            let p = b.acquire_timeout(Duration::from_secs(20)).await;
            (p.map(|p| p.fencing_token()), start.elapsed())
        });
        // The waiter sits for a second: a poller would call Redis many times.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let during = server.evalsha_calls() - before;
        assert!(during <= 2, "the waiter polled Redis {during} times in 1 s");
        held.release().await.unwrap();
        let (token, waited) = waiter.await.unwrap();
        assert_eq!(
            token.unwrap(),
            Some(first + 1),
            "the waiter took the freed slot"
        );
        // Woken by the release, long before the 60 s lease would free it.
        assert!(waited < Duration::from_secs(10));
        let calls = server.evalsha_calls() - before;
        println!("a waiter held for 1 s: {during} script calls while it waited, {calls} in all");
    });
}

#[test]
fn the_local_front_refuses_without_a_redis_call() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g = GlobalBulkhead::connect(
            &server.url(),
            "payments",
            config(10).local_cap(2).build().unwrap(),
        )
        .unwrap();
        let _p1 = g.try_acquire().await.unwrap();
        let _p2 = g.try_acquire().await.unwrap();
        let before = server.evalsha_calls();
        for _ in 0..100 {
            let err = g.try_acquire().await.unwrap_err();
            assert!(matches!(
                err,
                GlobalError::LocalCap(watertight::AcquireError::Full)
            ));
        }
        assert_eq!(
            server.evalsha_calls(),
            before,
            "a refusal by the front called Redis"
        );
        assert_eq!(g.metrics().rejected_local_cap, 100);
        assert_eq!(holders(&server), 2);
    });
}

#[test]
fn a_cancelled_acquire_gives_back_what_redis_granted() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", config(1).build().unwrap()).unwrap();
        drop(g.try_acquire().await.unwrap()); // connected and scripts loaded
        assert!(eventually(Duration::from_secs(5), || holders(&server) == 0));
        server.freeze();
        // The script is sent, Redis is frozen: the caller's 50 ms cut it.
        let err = g
            .acquire_timeout(Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, GlobalError::TimedOut), "{err}");
        server.thaw();
        // Redis then ran the script and granted the slot; the keeper gives it back.
        assert!(
            eventually(Duration::from_secs(5), || holders(&server) == 0),
            "a grant whose answer nobody read stayed taken"
        );
        assert!(g.try_acquire().await.unwrap().is_global());
    });
}

#[test]
fn a_release_that_fails_or_is_cancelled_still_gives_the_slot_back() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        let cancelled = g.try_acquire().await.unwrap();
        let failed = g.try_acquire().await.unwrap();
        server.freeze();
        // Cancelled before Redis answers.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), cancelled.release())
                .await
                .is_err()
        );
        // Redis does not answer within the store timeout.
        assert!(matches!(
            failed.release().await,
            Err(StoreFailure::TimedOut)
        ));
        server.thaw();
        // The keeper sends (or retries) both releases.
        assert!(
            eventually(Duration::from_secs(5), || holders(&server) == 0),
            "a slot stayed taken"
        );
    });
}

// ---------------------------------------------------------------------------
// Leases.

#[test]
fn renewal_keeps_a_long_call_s_permit() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let lease = config(1)
            .lease(Duration::from_millis(600))
            .renew_every(Duration::from_millis(150))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", lease).unwrap();
        let other = GlobalBulkhead::connect(&server.url(), "payments", lease).unwrap();
        let permit = g.try_acquire().await.unwrap();
        // Five leases long: without renewal it would have expired four times.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(!permit.is_lost());
            assert!(matches!(other.try_acquire().await, Err(GlobalError::Full)));
        }
        assert!(g.metrics().lease_renewals >= 5);
        assert_eq!(g.metrics().leases_lost, 0);
    });
}

#[test]
fn a_lost_lease_is_reported() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let lease = config(1)
            .lease(Duration::from_millis(600))
            .renew_every(Duration::from_millis(150))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", lease).unwrap();
        let permit = g.try_acquire().await.unwrap();
        assert!(!permit.is_lost());
        // What a failover to a replica that never saw the grant looks like.
        let _: () = redis::cmd("DEL")
            .arg(HOLDERS)
            .query(&mut server.connection())
            .unwrap();
        let lost = lost_within(&permit, Duration::from_secs(5)).await;
        assert!(lost, "the renewal did not report the lost lease");
        assert_eq!(g.metrics().leases_lost, 1);
        assert_eq!(g.held(), 0);
    });
}

// ---------------------------------------------------------------------------
// Redis down, slow or unreachable.

#[test]
fn frozen_redis_costs_a_timeout_then_fast_refusals() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(200))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        let held = g.try_acquire().await.unwrap();
        server.freeze();
        let mut timed_out = 0;
        let mut breaker_open = 0;
        let start = Instant::now();
        for _ in 0..20 {
            let t = Instant::now();
            match g.acquire_timeout(Duration::from_secs(5)).await.unwrap_err() {
                GlobalError::StoreUnavailable(StoreFailure::TimedOut) => timed_out += 1,
                GlobalError::StoreUnavailable(StoreFailure::BreakerOpen(_)) => breaker_open += 1,
                other => panic!("unexpected {other}"),
            }
            // Never past the store timeout, whatever the caller's deadline.
            assert!(t.elapsed() < Duration::from_secs(2));
        }
        println!(
            "Redis frozen: {timed_out} timeouts, then {breaker_open} fast refusals, in {:?}",
            start.elapsed()
        );
        // Its window holds the first call's success and this timeout: 50 %
        // of 2 calls opens it.
        assert_eq!(timed_out, 1, "the breaker opened after one timeout");
        assert_eq!(breaker_open, 19);
        let m = g.metrics();
        assert_eq!(m.rejected_store_unavailable, 20);
        assert_eq!(m.store_timeouts, 1);
        server.thaw();
        // When Redis answers again, the breaker's probe lets the global limit resume.
        drop(held);
        let back = granted_within(&g, Duration::from_secs(10))
            .await
            .expect("the global limit did not resume");
        assert!(back.is_global());
        let _second = g.try_acquire().await.unwrap();
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
    });
}

#[test]
fn callers_with_short_deadlines_still_open_the_breaker_on_a_frozen_redis() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(200))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        drop(g.try_acquire().await.unwrap());
        server.freeze();
        // Each caller gives up after 20 ms, long before the store timeout;
        // the commands go on and tell the breaker that Redis is not answering.
        let (mut cut, mut refused) = (0, 0);
        for _ in 0..100 {
            let t = Instant::now();
            match g
                .acquire_timeout(Duration::from_millis(20))
                .await
                .unwrap_err()
            {
                GlobalError::TimedOut => cut += 1,
                GlobalError::StoreUnavailable(StoreFailure::BreakerOpen(_)) => {
                    refused += 1;
                    break;
                }
                other => panic!("unexpected {other}"),
            }
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "a call hung past its deadline"
            );
        }
        println!(
            "Redis frozen, 20 ms callers: {cut} cut by their deadline, then the breaker opened"
        );
        assert_eq!(refused, 1, "the breaker never opened");
        assert!(cut >= 1);
        server.thaw();
    });
}

#[test]
fn frozen_redis_falls_back_to_the_local_share() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalConfig::builder(4)
            .store_timeout(Duration::from_millis(200))
            .store_breaker(quick_breaker())
            .fallback(Fallback::LocalShare(2))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        drop(g.try_acquire().await.unwrap());
        server.freeze();
        let a = g.try_acquire().await.unwrap();
        let b = g.try_acquire().await.unwrap();
        assert!(!a.is_global() && !b.is_global());
        assert_eq!(a.fencing_token(), None);
        // The share holds 2: the third is refused, not let through.
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
        drop(a);
        assert!(!g.try_acquire().await.unwrap().is_global());
        assert_eq!(g.metrics().fallback_granted, 3);
        server.thaw();
    });
}

#[test]
fn killed_and_restarted_redis_enforces_the_limit_again() {
    let mut server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(300))
            .store_breaker(quick_breaker())
            .lease(Duration::from_secs(2))
            .renew_every(Duration::from_millis(250))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
        let old = g.try_acquire().await.unwrap();
        server.kill();
        for _ in 0..5 {
            let t = Instant::now();
            let err = g.try_acquire().await.unwrap_err();
            assert!(matches!(err, GlobalError::StoreUnavailable(_)), "{err}");
            assert!(t.elapsed() < Duration::from_secs(2));
        }
        server.restart(); // empty: no persistence
        let p1 = granted_within(&g, Duration::from_secs(15))
            .await
            .expect("the global limit did not resume after the restart");
        let p2 = g.try_acquire().await.unwrap();
        assert!(p1.is_global() && p2.is_global());
        assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
        assert_eq!(holders(&server), 2, "each permit counted once");
        // The grant from before the restart is gone from Redis: reported lost.
        let lost = lost_within(&old, Duration::from_secs(5)).await;
        assert!(
            lost,
            "the permit from before the restart is not reported lost"
        );
    });
}

// ---------------------------------------------------------------------------
// The policy, and bad input.

#[test]
fn a_policy_behind_a_global_limit_gives_one_unavailable_error() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g = GlobalBulkhead::connect(
            &server.url(),
            "payments",
            config(1).local_cap(4).build().unwrap(),
        )
        .unwrap();
        let policy: Policy<_> = Policy::new(
            "payments",
            PolicyConfig::builder(4)
                .max_wait(Duration::from_millis(50))
                .build()
                .unwrap(),
            TokioClock,
        )
        .unwrap();
        let ok = g.call(&policy, || async { Ok::<_, ()>(7) }).await;
        assert_eq!(ok, Ok(7));
        // Its permit was dropped: the keeper releases it in the background.
        assert!(eventually(Duration::from_secs(5), || holders(&server) == 0));
        let _busy = g.try_acquire().await.unwrap();
        let err = g
            .call(&policy, || async { Ok::<_, ()>(7) })
            .await
            .unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
        assert!(err.is_unavailable());
        let err = g.call(&policy, || async { Err::<(), _>("declined") }).await;
        assert!(err.is_err());

        // FailClosed with Redis gone: the policy's StoreUnavailable.
        let down = GlobalBulkhead::connect(
            "redis://127.0.0.1:1/",
            "payments",
            GlobalConfig::builder(1).build().unwrap(),
        )
        .unwrap();
        let err = down
            .call(&policy, || async { Ok::<_, &str>(7) })
            .await
            .unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::StoreUnavailable);
        assert!(err.is_unavailable());
        assert_eq!(
            err.to_string(),
            "payments unavailable: limit store unreachable"
        );
    });
}

#[test]
fn bad_config_names_and_urls_are_typed_errors() {
    use GlobalConfigError as E;
    assert_eq!(GlobalConfig::builder(0).build().unwrap_err(), E::LimitZero);
    let b = GlobalConfig::builder(5);
    assert!(matches!(
        b.lease(Duration::from_secs(10))
            .renew_every(Duration::from_secs(6))
            .build(),
        Err(E::RenewTooRare { .. })
    ));
    assert!(matches!(
        b.lease(Duration::from_secs(1))
            .renew_every(Duration::from_secs(2))
            .build(),
        Err(E::RenewTooRare { .. })
    ));
    assert!(matches!(
        b.lease(Duration::from_millis(1)).build(),
        Err(E::LeaseTooShort { .. })
    ));
    assert_eq!(
        b.renew_every(Duration::ZERO).build(),
        Err(E::RenewEveryZero)
    );
    assert_eq!(
        b.store_timeout(Duration::ZERO).build(),
        Err(E::StoreTimeoutZero)
    );
    assert_eq!(b.local_cap(0).build(), Err(E::LocalCapZero));
    assert_eq!(
        b.fallback(Fallback::LocalShare(0)).build(),
        Err(E::LocalShareZero)
    );

    let ok = GlobalConfig::builder(5).build().unwrap();
    // Outside a runtime: a typed error, not a panic.
    assert!(matches!(
        GlobalBulkhead::connect("redis://127.0.0.1/", "payments", ok),
        Err(GlobalBuildError::NoRuntime)
    ));
    runtime().block_on(async {
        for url in ["", "http://example.com/", "redis://[::1", "not a url"] {
            let err = GlobalBulkhead::connect(url, "payments", ok).unwrap_err();
            assert!(matches!(err, GlobalBuildError::BadUrl(_)), "{url:?}: {err}");
        }
        for name in ["", "a{b}", "tab\there", String::leak("x".repeat(129))] {
            let err = GlobalBulkhead::connect("redis://127.0.0.1/", name, ok).unwrap_err();
            assert!(matches!(err, GlobalBuildError::BadName { .. }), "{name:?}");
        }
        // A good URL with nothing behind it: made at once, refused on use.
        let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", ok).unwrap();
        assert!(matches!(
            g.try_acquire().await,
            Err(GlobalError::StoreUnavailable(_))
        ));
    });
}

// ---------------------------------------------------------------------------
// Metrics and tracing: everything on one thread (a current-thread runtime),
// under a local recorder and a local subscriber.
