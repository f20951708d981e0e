//! `redis::GlobalBulkhead` across a Redis failover, acknowledged grants,
//! and the global rate limiter through Sentinel, against real servers started and stopped by the tests: a
//! primary, one replica and three Sentinels on loopback
//! (`support/sentinel.rs`), and a separate `redis-server` on which the
//! child processes mark each call's entry and exit (INCR/DECR, keeping the
//! maximum), so that the marks survive the failover.
//!
//! The multi-process test runs this same test binary again as the child
//! processes (`child_process` below, selected by `WT_ROLE`). Assertions are
//! on counts and maxima; times are printed, never asserted tightly.

#[path = "support/ack.rs"]
mod ack;
#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/sentinel.rs"]
mod sentinel;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use global::{child, first_grant, output, quick_breaker, reported, role, runtime};
use redis_server::RedisServer;
use sentinel::{SentinelGroup, MASTER};
use watertight::rate::Quota;
use watertight::redis::{
    Fallback, GlobalBulkhead, GlobalConfig, GlobalConfigError, GlobalError, GlobalRateConfig,
    GlobalRateLimiter, RateKey, StoreFailure,
};

const HOLDERS: &str = "watertight:{payments}:holders";
const SHARERS: &str = "watertight:{payments}:sharers";

#[test]
fn the_config_checks_the_acknowledged_settings() {
    let ms = Duration::from_millis;
    let c = GlobalConfig::builder(5)
        .acknowledged(2, ms(40))
        .build()
        .unwrap();
    let ack = c.acknowledged().unwrap();
    assert_eq!((ack.replicas, ack.timeout), (2, ms(40)));
    assert_eq!(
        GlobalConfig::builder(5)
            .acknowledged(0, ms(40))
            .build()
            .unwrap_err(),
        GlobalConfigError::AckReplicasZero
    );
    assert!(matches!(
        GlobalConfig::builder(5)
            .acknowledged(1, Duration::from_micros(500))
            .build(),
        Err(GlobalConfigError::AckTimeoutTooShort { .. })
    ));
    // The store timeout (100 ms by default) must outlast the WAIT.
    assert!(matches!(
        GlobalConfig::builder(5).acknowledged(1, ms(100)).build(),
        Err(GlobalConfigError::AckTimeoutTooLong { .. })
    ));
    assert!(GlobalConfig::builder(5)
        .store_timeout(ms(300))
        .acknowledged(1, ms(100))
        .build()
        .is_ok());
}

/// Acknowledged by one replica within 20 ms, on a Redis that has none.
fn unreplicated(limit: u32) -> watertight::redis::GlobalConfigBuilder {
    GlobalConfig::builder(limit)
        .store_timeout(Duration::from_secs(1))
        .acknowledged(1, Duration::from_millis(20))
}

#[test]
fn a_grant_no_replica_acknowledges_is_given_back_and_refused() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect(&server.url(), "payments", unreplicated(3).build().unwrap())
                .unwrap();
        ack::refused_and_given_back(&g, || server.zcard(HOLDERS)).await;
        g.close().await.unwrap();
    });
}

#[test]
fn an_unacknowledged_grant_falls_back_to_the_local_share_when_asked_to() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let config = unreplicated(3)
            .fallback(Fallback::LocalShare(1))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", config).unwrap();
        let p = g.try_acquire().await.unwrap();
        assert!(!p.is_global(), "an unacknowledged grant was handed out");
        assert_eq!(p.fencing_token(), None);
        let m = g.metrics();
        assert_eq!((m.unacknowledged, m.fallback_granted, m.granted), (1, 1, 0));
        drop(p);
        g.close().await.unwrap();
        assert_eq!(server.zcard(HOLDERS), 0);
    });
}

#[test]
fn a_leased_share_no_replica_acknowledges_is_never_served() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let config = unreplicated(3)
            .lease(Duration::from_secs(1))
            .leased(Duration::from_millis(100))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect(&server.url(), "payments", config).unwrap();
        for _ in 0..3 {
            let err = g
                .acquire_timeout(Duration::from_millis(1500))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    GlobalError::StoreUnavailable(StoreFailure::NotAcknowledged { .. })
                ),
                "{err:?}"
            );
        }
        let m = g.metrics();
        assert_eq!((m.share, m.refreshes, m.granted), (0, 0, 0));
        assert!(m.unacknowledged >= 1);
        // Redis recorded the share (the refresh ran there) but it was never
        // taken; `close` gives it back.
        g.close().await.unwrap();
        assert_eq!(server.zcard(SHARERS), 0);
    });
}

/// With a replica in sync, acknowledged grants are granted, per call and
/// leased, through Sentinel, and nothing goes unacknowledged.
#[test]
fn acknowledged_grants_pass_with_a_replica_in_sync() {
    let group = SentinelGroup::start();
    let urls = group.sentinel_urls();
    let sentinels: Vec<&str> = urls.iter().map(String::as_str).collect();
    runtime().block_on(async {
        let config = |leased: bool| {
            let c = GlobalConfig::builder(4)
                .store_timeout(Duration::from_millis(500))
                .lease(Duration::from_secs(2))
                .renew_every(Duration::from_millis(500))
                .acknowledged(1, Duration::from_millis(200));
            let c = if leased {
                c.leased(Duration::from_millis(100))
            } else {
                c
            };
            c.build().unwrap()
        };
        let per_call =
            GlobalBulkhead::connect_sentinel(&sentinels, MASTER, "per-call", config(false))
                .unwrap();
        let leased =
            GlobalBulkhead::connect_sentinel(&sentinels, MASTER, "leased", config(true)).unwrap();
        let mut tokens = Vec::new();
        for _ in 0..50 {
            let p = per_call
                .acquire_timeout(Duration::from_secs(1))
                .await
                .unwrap();
            assert!(p.is_global());
            tokens.push(p.fencing_token().unwrap());
            let q = leased
                .acquire_timeout(Duration::from_secs(1))
                .await
                .unwrap();
            assert!(q.is_global());
        }
        assert!(tokens.windows(2).all(|w| w[0] < w[1]));
        let (a, b) = (per_call.metrics(), leased.metrics());
        assert_eq!((a.unacknowledged, a.granted), (0, 50));
        assert_eq!(b.unacknowledged, 0, "{b:?}");
        assert!(b.refreshes >= 1);
        per_call.close().await.unwrap();
        leased.close().await.unwrap();
    });
}

/// A planned failover (`SENTINEL FAILOVER`): the old primary stays up as
/// the new one's replica, so a connection to it is not dropped but
/// answers writes with `READONLY` (or is closed by the demotion); the
/// client asks the Sentinels again and its grants go to the new primary.
#[test]
fn a_planned_failover_is_followed_to_the_new_primary() {
    let group = SentinelGroup::start();
    let urls = group.sentinel_urls();
    let sentinels: Vec<&str> = urls.iter().map(String::as_str).collect();
    runtime().block_on(async {
        let config = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(250))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect_sentinel(&sentinels, MASTER, "payments", config).unwrap();
        for _ in 0..10 {
            g.try_acquire().await.unwrap().release().await.unwrap();
        }
        let old = group.planned_failover();
        let new = group.wait_for_failover(old, Duration::from_secs(15));
        // Sentinel turns the old primary into a replica some 8 s later
        // (once it has reported itself a primary for that long); the test
        // does it at once, as Sentinel would.
        group.demote(old, new);
        assert!(group.is_replica(old));
        // Bounded: 10 s of tries 20 ms apart.
        let p = first_grant(&g, 500, Duration::from_millis(20))
            .await
            .expect("no grant within 10 s of the failover");
        assert!(p.is_global());
        // Written on the new primary (the old one, a replica now, has it
        // by replication only if the new one granted it).
        assert_eq!(group.zcard(new, HOLDERS), 1);
        drop(p);
        g.close().await.unwrap();
        assert_eq!(group.zcard(new, HOLDERS), 0);
    });
}

/// A planned failover with acknowledged grants: the old primary, not yet
/// demoted by Sentinel, still answers but has no replica left, so its
/// grants go unacknowledged; that makes the client ask the Sentinels
/// again and move to the new primary, where grants are acknowledged once
/// the old primary is its replica.
#[test]
fn an_unacknowledged_grant_makes_the_client_ask_the_sentinels_again() {
    let group = SentinelGroup::start();
    let urls = group.sentinel_urls();
    let sentinels: Vec<&str> = urls.iter().map(String::as_str).collect();
    runtime().block_on(async {
        let config = GlobalConfig::builder(2)
            .store_timeout(Duration::from_millis(250))
            .store_breaker(quick_breaker())
            .acknowledged(1, Duration::from_millis(50))
            .build()
            .unwrap();
        let g = GlobalBulkhead::connect_sentinel(&sentinels, MASTER, "payments", config).unwrap();
        for _ in 0..10 {
            g.try_acquire().await.unwrap().release().await.unwrap();
        }
        let old = group.planned_failover();
        let new = group.wait_for_failover(old, Duration::from_secs(15));
        // The old primary answers until Sentinel demotes it (some 8 s);
        // bounded: 3 s of tries 20 ms apart.
        for _ in 0..150 {
            if group.evalsha_calls(new) > 0 {
                break;
            }
            let err = g.try_acquire().await.unwrap_err();
            assert!(matches!(err, GlobalError::StoreUnavailable(_)), "{err:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            group.evalsha_calls(new) > 0,
            "the client stayed on the replaced primary"
        );
        assert!(g.metrics().unacknowledged >= 1);
        group.demote(old, new);
        group.wait_in_sync(old);
        let held = first_grant(&g, 500, Duration::from_millis(20))
            .await
            .expect("no acknowledged grant on the new primary");
        assert!(held.is_global());
        assert_eq!(group.zcard(new, HOLDERS), 1);
        drop(held);
        g.close().await.unwrap();
    });
}

// ---------------------------------------------------------------------------
// The failover.

/// Each system's limit; a per-call process runs 8 tasks (2 with long
/// calls), a leased one 3 (1 long): demand 11, always at the limit.
const LIMIT: u64 = 6;
/// A long call: it spans the failover, and stays under the lease (so only
/// a grant the failover lost lets another process take its slot).
const LONG: Duration = Duration::from_millis(2500);
const LEASE: Duration = Duration::from_secs(3);

/// Marks entry on the marks' Redis: INCR the system's calls in flight,
/// keep their maximum, count the entries (the system's and the process's)
/// and those above the limit.
const ENTER: &str = r"
local v = redis.call('INCR', KEYS[1])
redis.call('INCR', KEYS[4])
redis.call('INCR', KEYS[5])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
if v > m then redis.call('SET', KEYS[2], v) end
if v > tonumber(ARGV[1]) then redis.call('INCR', KEYS[3]) end
return v
";

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn get_u64(con: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<u64>>(con)
        .unwrap()
        .unwrap_or(0)
}

fn set(con: &mut redis::Connection, key: &str, v: u64) {
    let () = redis::cmd("SET").arg(key).arg(v).query(con).unwrap();
}

/// Waits (at most `limit`) until `system` has marked `n` more entries
/// than `from`.
fn wait_entries(marks: &RedisServer, system: &str, from: u64, n: u64, limit: Duration) -> bool {
    let mut con = marks.connection();
    let start = Instant::now();
    while start.elapsed() < limit {
        if get_u64(&mut con, &format!("{system}:entries")) >= from + n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The tokens a child wrote, one a line.
fn tokens(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Tokens that appear more than once.
fn repeated(tokens: &[u64]) -> usize {
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for t in tokens {
        *seen.entry(*t).or_default() += 1;
    }
    seen.values().filter(|&&n| n > 1).count()
}

/// A primary, one replica, three Sentinels; two systems of limit 6, each
/// used by one per-call and one leased process (demand 12: always at the
/// limit; some calls last 2.5 s), one with acknowledged grants and one
/// without. Mid-run the replica is cut off for 300 ms (the writes of those
/// 300 ms are what asynchronous replication loses), then the primary is
/// killed (SIGKILL) and Sentinel promotes the replica; the killed node is
/// started again as the new primary's replica 1.5 s later.
///
/// The clients follow Sentinel without a restart. With acknowledged
/// grants, no grant (and no fencing token) is handed out while no replica
/// can acknowledge it, no call runs over the limit, and no fencing token
/// repeats; without, the over-limit calls and repeated tokens are
/// measured and printed.
#[test]
fn the_clients_follow_a_failover_and_acknowledged_grants_survive_it() {
    let mut group = SentinelGroup::start();
    let marks = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("wt-failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sentinels = group.sentinel_urls().join(",");
    let roles = [
        ("acked", "percall"),
        ("acked", "leased"),
        ("plain", "percall"),
        ("plain", "leased"),
    ];
    let children: Vec<_> = roles
        .iter()
        .map(|(system, mode)| {
            child(
                "worker",
                &marks,
                &[
                    ("WT_SYSTEM", (*system).to_string()),
                    ("WT_MODE", (*mode).to_string()),
                    ("WT_SENTINELS", sentinels.clone()),
                    (
                        "WT_TOKENS",
                        dir.join(format!("{system}-{mode}")).display().to_string(),
                    ),
                ],
            )
        })
        .collect();

    // Under load first (past the first long calls).
    for system in ["acked", "plain"] {
        assert!(
            wait_entries(&marks, system, 0, 200, Duration::from_secs(10)),
            "{system}: no load before the kill"
        );
    }
    let mut con = marks.connection();
    let cut_at = unix_ms();
    let replica = group.cut_off_replica();
    // A probe takes one permit of each system while the replica is cut
    // off, and holds the one it gets through the failover.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let probe = {
        let (urls, marks_url) = (group.sentinel_urls(), marks.url());
        std::thread::spawn(move || runtime().block_on(probe(urls, marks_url, ready_tx)))
    };
    let _ = ready_rx.recv_timeout(Duration::from_secs(2));
    std::thread::sleep(
        Duration::from_millis(300).saturating_sub(Duration::from_millis(unix_ms() - cut_at)),
    );
    let killed_at = unix_ms();
    let old = group.kill_primary();
    group.thaw(replica);
    set(&mut con, "test:killed", killed_at);
    let new = group.wait_for_failover(old, Duration::from_secs(15));
    let promoted_at = unix_ms();
    set(&mut con, "test:promoted", promoted_at);
    // The new primary runs without a replica for 1.5 s.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(group.connected_replicas(new), 0);
    let window_end = unix_ms();
    group.restart_as_replica(old, new);
    let restarted_at = unix_ms();
    // No replica could acknowledge from the cut (a WAIT answered just
    // before it may reach its caller a moment later, on a loaded machine)
    // until the restart.
    set(&mut con, "test:window_start", cut_at + 150);
    set(&mut con, "test:window_end", window_end);
    // Until every process has served again since the restart.
    let resumed = roles.iter().all(|(system, mode)| {
        let key = format!("{system}-{mode}");
        let from = get_u64(&mut con, &format!("{key}:entries"));
        wait_entries(&marks, &key, from, 20, Duration::from_secs(10))
    });
    set(&mut con, "test:stop", 1);
    let outs: Vec<String> = children.into_iter().map(output).collect();
    let probed = probe.join().unwrap();

    println!(
        "failover: the replica cut off 300 ms before the kill; Sentinel promoted it {} ms \
         after the kill; the killed node was back as its replica {} ms after the kill",
        promoted_at - killed_at,
        restarted_at - killed_at
    );
    println!(
        "limit 1, acknowledged: a grant asked for while the replica was cut off was {}",
        probed.acked
    );
    println!("limit 1, unacknowledged: {}", probed.plain);
    let mut all_tokens: HashMap<&str, Vec<u64>> = HashMap::new();
    let mut resumed_ms: HashMap<&str, u64> = HashMap::new();
    for ((system, mode), out) in roles.iter().zip(&outs) {
        let r = |k: &str| reported(out, k);
        println!(
            "{system:>5} {mode:>7}: {} granted ({} after the promotion, the first {} ms after the \
             kill), longest time without a grant {} ms (ended {} ms after the kill), {} not \
             acknowledged, {} unavailable, {} full, {} granted while no replica could acknowledge \
             ({} new tokens), {} long calls cut short as lost",
            r("granted"),
            r("after_promotion"),
            r("first_after_promotion_ms"),
            r("gap_ms"),
            r("resumed_ms"),
            r("not_acked"),
            r("unavailable"),
            r("refused"),
            r("in_window"),
            r("new_tokens_in_window"),
            r("lost"),
        );
        if *mode == "percall" {
            resumed_ms.insert(system, r("first_after_promotion_ms"));
        }
        all_tokens
            .entry(system)
            .or_default()
            .extend(tokens(&dir.join(format!("{system}-{mode}"))));
        assert!(
            r("after_promotion") > 0,
            "{system} {mode}: no grant after the failover (the client did not follow it)"
        );
    }
    let read = |key: &str| get_u64(&mut marks.connection(), key);
    let (acked_over, plain_over) = (read("acked:over"), read("plain:over"));
    let (acked_rep, plain_rep) = (
        repeated(&all_tokens["acked"]),
        repeated(&all_tokens["plain"]),
    );
    println!(
        "acknowledged: per-call grants resumed {} ms after the kill, at most {} at once (limit {LIMIT}), \
         {acked_over} calls over the limit, {acked_rep} fencing tokens repeated (of {})",
        resumed_ms["acked"],
        read("acked:max"),
        all_tokens["acked"].len()
    );
    println!(
        "unacknowledged: per-call grants resumed {} ms after the kill, at most {} at once (limit {LIMIT}), \
         {plain_over} calls over the limit, {plain_rep} fencing tokens repeated (of {})",
        resumed_ms["plain"],
        read("plain:max"),
        all_tokens["plain"].len()
    );
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        resumed,
        "a process did not serve again once a replica was back"
    );
    assert!(
        probed.acked.starts_with("refused"),
        "a grant was made while the replica was cut off: {}",
        probed.acked
    );
    for ((system, mode), out) in roles.iter().zip(&outs) {
        if *system == "acked" {
            assert_eq!(
                reported(out, "new_tokens_in_window"),
                0,
                "{mode}: a grant was handed out while no replica could acknowledge it"
            );
        }
    }
    assert_eq!(acked_over, 0, "acknowledged grants ran over the limit");
    assert!(read("acked:max") <= LIMIT);
    assert_eq!(acked_rep, 0, "an acknowledged fencing token repeated");
}

/// What the probe saw.
struct Probed {
    /// The acknowledged system's answer while the replica was cut off.
    acked: String,
    /// The unacknowledged system of limit 1: what happened to a second
    /// holder after the promotion, while the first (granted while the
    /// replica was cut off) still held its permit.
    plain: String,
}

/// Two systems of limit 1 with no other user. While the replica is cut
/// off: asks the acknowledged one for a permit, then takes the
/// unacknowledged one's only slot (holding it through the failover), and
/// says it is ready. After the promotion, a second handle asks the
/// unacknowledged system for its slot (up to 3 s).
async fn probe(
    sentinels: Vec<String>,
    marks_url: String,
    ready: std::sync::mpsc::Sender<()>,
) -> Probed {
    let urls: Vec<&str> = sentinels.iter().map(String::as_str).collect();
    let config = |acked: bool| {
        let c = GlobalConfig::builder(1)
            .store_timeout(Duration::from_millis(250))
            .lease(LEASE)
            .renew_every(Duration::from_secs(1))
            .store_breaker(quick_breaker());
        let c = if acked {
            c.acknowledged(1, Duration::from_millis(100))
        } else {
            c
        };
        c.build().unwrap()
    };
    let connect = |name: &'static str, acked: bool| {
        GlobalBulkhead::connect_sentinel(&urls, MASTER, name, config(acked)).unwrap()
    };
    let acked = connect("acked-probe", true);
    let acked_answer = match acked.try_acquire().await {
        Ok(p) => format!("granted (token {:?})", p.fencing_token()),
        Err(e @ GlobalError::StoreUnavailable(StoreFailure::NotAcknowledged { .. })) => {
            format!("refused: {e}")
        }
        Err(e) => format!("other: {e}"),
    };
    let first = connect("plain-probe", false);
    let held = first.try_acquire().await;
    let _ = ready.send(());
    let Ok(held) = held else {
        return Probed {
            acked: acked_answer,
            plain: "no first permit".to_string(),
        };
    };
    let client = redis::Client::open(marks_url).unwrap();
    let marks = client.get_multiplexed_async_connection().await.unwrap();
    let get = |k: &'static str| {
        let mut marks = marks.clone();
        async move {
            redis::cmd("GET")
                .arg(k)
                .query_async::<Option<u64>>(&mut marks)
                .await
                .unwrap()
        }
    };
    for _ in 0..750 {
        if get("test:promoted").await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = connect("plain-probe", false);
    let mut plain = "the second holder was refused for 3 s".to_string();
    for _ in 0..150 {
        if let Ok(p) = second.try_acquire().await {
            let killed = get("test:killed").await.unwrap_or(0);
            plain = format!(
                "a second holder was granted the only slot {} ms after the kill while the first \
                 still held it (the first reported lost: {}); tokens {:?} and {:?}",
                unix_ms().saturating_sub(killed),
                held.is_lost(),
                held.fencing_token(),
                p.fencing_token()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(held);
    for g in [first, second, acked] {
        let _ = tokio::time::timeout(Duration::from_secs(1), g.close()).await;
    }
    Probed {
        acked: acked_answer,
        plain,
    }
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
            other => panic!("unknown role {other}"),
        }
    });
}

/// What a worker's tasks record.
#[derive(Default)]
struct Log {
    /// Each grant: when (Unix ms) and its fencing token.
    grants: Vec<(u64, u64)>,
    not_acked: u64,
    /// Refused: Redis unreachable (or the breaker open).
    unavailable: u64,
    /// Refused: full, or the wait timed out.
    refused: u64,
    /// Long calls that stopped early: their permit reported its lease lost.
    lost: u64,
}

/// One process of a system (`WT_SYSTEM`: `acked` or `plain`), per call or
/// leased (`WT_MODE`), through the Sentinels at `WT_SENTINELS`, until the
/// parent sets `test:stop`. Its tasks take a permit (waiting up to 50 ms),
/// mark a call on the marks' Redis, and give the permit back; one in four
/// makes long calls (2.5 s, checking `is_lost` every 20 ms and
/// stopping early if it turns true, as the docs tell callers to), the rest
/// 5 ms calls.
async fn worker(marks_url: &str) {
    let system: &'static str = match std::env::var("WT_SYSTEM").unwrap().as_str() {
        "acked" => "acked",
        _ => "plain",
    };
    let mode: &'static str = match std::env::var("WT_MODE").unwrap().as_str() {
        "leased" => "leased",
        _ => "percall",
    };
    let leased = mode == "leased";
    let urls = std::env::var("WT_SENTINELS").unwrap();
    let sentinels: Vec<&str> = urls.split(',').collect();
    let mut config = GlobalConfig::builder(LIMIT as u32)
        .store_timeout(Duration::from_millis(250))
        .lease(LEASE)
        .renew_every(Duration::from_secs(1))
        .store_breaker(quick_breaker());
    if leased {
        config = config.leased(Duration::from_millis(100));
    }
    if system == "acked" {
        config = config.acknowledged(1, Duration::from_millis(100));
    }
    let g = GlobalBulkhead::connect_sentinel(&sentinels, MASTER, system, config.build().unwrap())
        .unwrap();
    let client = redis::Client::open(marks_url).unwrap();
    let mut marks = client.get_multiplexed_async_connection().await.unwrap();
    let enter = redis::Script::new(ENTER);
    let log = Arc::new(Mutex::new(Log::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks_n = if leased { 3 } else { 8 };
    let mut tasks = Vec::new();
    for task in 0..tasks_n {
        let long = task % 4 == 0;
        let (g, mut marks, enter, log, stop) = (
            g.clone(),
            marks.clone(),
            enter.clone(),
            log.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            // Bounded: a run lasts seconds, an iteration at least 5 ms.
            for _ in 0..10_000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                match g.acquire_timeout(Duration::from_millis(50)).await {
                    Ok(p) => {
                        let at = unix_ms();
                        let _: u64 = enter
                            .key(format!("{system}:cur"))
                            .key(format!("{system}:max"))
                            .key(format!("{system}:over"))
                            .key(format!("{system}:entries"))
                            .key(format!("{system}-{mode}:entries"))
                            .arg(LIMIT)
                            .invoke_async(&mut marks)
                            .await
                            .unwrap();
                        if long {
                            for _ in 0..LONG.as_millis() / 20 {
                                if p.is_lost() {
                                    log.lock().unwrap().lost += 1;
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        } else {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        let _: i64 = redis::cmd("DECR")
                            .arg(format!("{system}:cur"))
                            .query_async(&mut marks)
                            .await
                            .unwrap();
                        let token = p.fencing_token().unwrap_or(0);
                        drop(p);
                        log.lock().unwrap().grants.push((at, token));
                    }
                    Err(e) => {
                        match e {
                            GlobalError::StoreUnavailable(StoreFailure::NotAcknowledged {
                                ..
                            }) => log.lock().unwrap().not_acked += 1,
                            GlobalError::StoreUnavailable(_) => {
                                log.lock().unwrap().unavailable += 1;
                            }
                            _ => log.lock().unwrap().refused += 1,
                        }
                        // A refusal without a wait (an open breaker, a
                        // leased share without a lease): not a busy loop.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }));
    }
    // Until the parent says stop (bounded: a minute).
    for _ in 0..1200 {
        let s: Option<u64> = redis::cmd("GET")
            .arg("test:stop")
            .query_async(&mut marks)
            .await
            .unwrap();
        if s.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), g.close()).await;

    let mut times = HashMap::new();
    for k in ["killed", "promoted", "window_start", "window_end"] {
        let v: Option<u64> = redis::cmd("GET")
            .arg(format!("test:{k}"))
            .query_async(&mut marks)
            .await
            .unwrap();
        times.insert(k, v.unwrap_or(0));
    }
    let log = log.lock().unwrap();
    let mut at: Vec<u64> = log.grants.iter().map(|(t, _)| *t).collect();
    at.sort_unstable();
    // The longest gap between grants, and the grant that ended it.
    let (gap, resumed) = at
        .windows(2)
        .map(|w| (w[1] - w[0], w[1]))
        .max()
        .unwrap_or((0, 0));
    let window = times["window_start"]..times["window_end"];
    let in_window = at.iter().filter(|t| window.contains(t)).count();
    // Tokens first seen in the window: a grant (per call) or a lease
    // (leased) taken while no replica could acknowledge it.
    let before: std::collections::HashSet<u64> = log
        .grants
        .iter()
        .filter(|(t, _)| *t < window.start)
        .map(|(_, k)| *k)
        .collect();
    let new_in_window: std::collections::HashSet<u64> = log
        .grants
        .iter()
        .filter(|(t, k)| window.contains(t) && !before.contains(k))
        .map(|(_, k)| *k)
        .collect();
    let after_promotion = at.iter().filter(|&&t| t >= times["promoted"]).count();
    // Each grant's token per call; each lease's token once, leased.
    let mut tokens: Vec<u64> = log.grants.iter().map(|(_, t)| *t).collect();
    if leased {
        tokens.sort_unstable();
        tokens.dedup();
    }
    let text: String = tokens.iter().map(|t| format!("{t}\n")).collect();
    std::fs::write(std::env::var("WT_TOKENS").unwrap(), text).unwrap();
    println!("WT granted={}", at.len());
    println!("WT after_promotion={after_promotion}");
    println!("WT in_window={in_window}");
    println!("WT new_tokens_in_window={}", new_in_window.len());
    println!("WT gap_ms={gap}");
    println!("WT resumed_ms={}", resumed.saturating_sub(times["killed"]));
    let first_after = at
        .iter()
        .find(|&&t| t >= times["promoted"])
        .map_or(u64::MAX, |t| t - times["killed"]);
    println!("WT first_after_promotion_ms={first_after}");
    println!("WT not_acked={}", log.not_acked);
    println!("WT unavailable={}", log.unavailable);
    println!("WT refused={}", log.refused);
    println!("WT lost={}", log.lost);
}

/// The global rate limiter through Sentinel: it admits on the primary,
/// and after the primary is killed it asks the Sentinels again and admits
/// on the promoted replica, without a restart.
#[test]
fn a_global_rate_follows_the_failover() {
    let mut group = SentinelGroup::start();
    let urls = group.sentinel_urls();
    let sentinels: Vec<&str> = urls.iter().map(String::as_str).collect();
    runtime().block_on(async {
        let config = GlobalRateConfig::builder(Quota::per_second(1000))
            .store_timeout(Duration::from_millis(250))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let api = GlobalRateLimiter::connect_sentinel(&sentinels, MASTER, "api", config).unwrap();
        for _ in 0..10 {
            api.check(&RateKey::whole()).await.unwrap();
        }
        let old = group.kill_primary();
        let new = group.wait_for_failover(old, Duration::from_secs(15));
        // Bounded: 5 s of checks 20 ms apart.
        let mut admitted = false;
        for _ in 0..250 {
            if api.check(&RateKey::whole()).await.is_ok() {
                admitted = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(admitted, "no check admitted after the failover");
        assert!(group.evalsha_calls(new) > 0, "not on the new primary");
        api.close().await;
    });
}
