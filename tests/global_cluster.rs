//! `redis::GlobalBulkhead` and `GlobalRateLimiter` on a real Redis Cluster:
//! each test starts its own three primaries on loopback ports (persistence
//! off), joins them with `redis-cli --cluster create`, and stops them,
//! even when it fails (tests/support/redis_cluster.rs).
//!
//! Several systems whose names hash to slots on different nodes run under
//! load, per call and leased; a slot moved to another node mid-run is
//! survived with typed errors at worst, no permit lost or invented; and
//! the release notifications (sharded pub/sub) follow the slot;
//! acknowledged grants count the replicas of the system's own primary. The
//! marker of the limit is the test's own: an in-process count of the
//! permits held at once per system, and its maximum.

#[path = "support/ack.rs"]
mod ack;
// `global` names the single server's type; the cluster tests use its
// `spend` only.
#[path = "support/global.rs"]
mod global;
#[path = "support/redis_cluster.rs"]
mod redis_cluster;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis_cluster::RedisCluster;
use tokio::time::Instant;
use watertight::rate::Quota;
use watertight::redis::{
    GlobalBulkhead, GlobalConfig, GlobalError, GlobalRateConfig, GlobalRateLimiter,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Candidate system names; [`spread`] picks from them.
const NAMES: [&str; 12] = [
    "payments", "search", "email", "maps", "sms", "auth", "ledger", "images", "video", "chat",
    "geo", "feeds",
];

/// `count` names whose systems live on `count` different nodes (at most
/// three), each with its slot and the port of its node.
fn spread(cluster: &RedisCluster, count: usize) -> Vec<(&'static str, u16, u16)> {
    let mut nodes = HashSet::new();
    let mut picked = Vec::new();
    for name in NAMES {
        let slot = cluster.keyslot(&format!("watertight:{{{name}}}:holders"));
        // Every key and channel of a system is in its hash tag's slot.
        for suffix in ["fence", "released", "wanted", "sharers", "shares", "demand"] {
            assert_eq!(
                cluster.keyslot(&format!("watertight:{{{name}}}:{suffix}")),
                slot
            );
        }
        let owner = cluster.owner(slot);
        if nodes.insert(owner) {
            picked.push((name, slot, owner));
            if picked.len() == count {
                return picked;
            }
        }
    }
    panic!("no {count} names on different nodes among {NAMES:?}");
}

/// The in-process marker of one system: permits held at once, and the
/// most there were.
#[derive(Default)]
struct Marker {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Marker {
    fn enter(&self) {
        let v = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(v, Ordering::SeqCst);
    }

    fn exit(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

/// What the tasks of one system saw.
#[derive(Default)]
struct Tally {
    granted: AtomicU64,
    /// Refusals of a full limit (the caller's deadline came first).
    full: AtomicU64,
    /// Typed errors other than a full limit (Redis busy moving a slot).
    errors: AtomicU64,
    lost: AtomicU64,
    /// When the system's slot move ended (set by the test), the grants
    /// after it, and how long after it the first one came.
    moved_at: std::sync::Mutex<Option<Instant>>,
    granted_after: AtomicU64,
    first_after: std::sync::Mutex<Option<Duration>>,
    /// The first typed error met, and the last.
    first_error: std::sync::Mutex<Option<String>>,
    last_error: std::sync::Mutex<Option<String>>,
}

/// `handles` × `tasks` tasks on system `name`: each takes a permit (waits
/// at most 200 ms), marks it, holds it 1-3 ms, checks it was not lost,
/// and gives it back; at most `rounds` times each, and until `end`.
#[allow(clippy::too_many_arguments)]
async fn load(
    handles: &[GlobalBulkhead],
    tasks: usize,
    rounds: usize,
    end: Instant,
    marker: Arc<Marker>,
    tally: Arc<Tally>,
) {
    let mut joins = Vec::new();
    for (h, g) in handles.iter().enumerate() {
        for t in 0..tasks {
            let (g, marker, tally) = (g.clone(), Arc::clone(&marker), Arc::clone(&tally));
            joins.push(tokio::spawn(async move {
                for i in 0..rounds {
                    if Instant::now() >= end {
                        break;
                    }
                    match g.acquire_timeout(Duration::from_millis(200)).await {
                        Ok(p) => {
                            marker.enter();
                            let hold = 1 + ((h + t + i) % 3) as u64;
                            tokio::time::sleep(Duration::from_millis(hold)).await;
                            if p.is_lost() {
                                tally.lost.fetch_add(1, Ordering::SeqCst);
                            }
                            marker.exit();
                            tally.granted.fetch_add(1, Ordering::SeqCst);
                            let moved_at = *tally.moved_at.lock().unwrap();
                            if let Some(at) = moved_at {
                                tally.granted_after.fetch_add(1, Ordering::SeqCst);
                                tally
                                    .first_after
                                    .lock()
                                    .unwrap()
                                    .get_or_insert(at.elapsed());
                            }
                            drop(p);
                        }
                        Err(GlobalError::TimedOut | GlobalError::Full) => {
                            tally.full.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e @ GlobalError::StoreUnavailable(_)) => {
                            tally.errors.fetch_add(1, Ordering::SeqCst);
                            let e = Some(e.to_string());
                            tally
                                .first_error
                                .lock()
                                .unwrap()
                                .get_or_insert_with(|| e.clone().unwrap());
                            *tally.last_error.lock().unwrap() = e;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(e) => panic!("an unexpected error: {e}"),
                    }
                }
            }));
        }
    }
    for j in joins {
        j.await.unwrap();
    }
}

/// A config for a loaded machine: a generous store timeout, a lease far
/// longer than the test (so a lost permit would be a real loss).
fn config(limit: u32) -> watertight::redis::GlobalConfigBuilder {
    GlobalConfig::builder(limit)
        .store_timeout(Duration::from_millis(500))
        .lease(Duration::from_secs(30))
        .renew_every(Duration::from_secs(5))
}

/// Two handles on system `name` (two "processes", two connections to the
/// cluster) with [`config`]`(limit)`, leased (refreshed every 100 ms) if
/// `leased`.
fn two_processes(
    cluster: &RedisCluster,
    name: &'static str,
    limit: u32,
    leased: bool,
) -> Vec<GlobalBulkhead> {
    let mut c = config(limit);
    if leased {
        c = c.leased(Duration::from_millis(100));
    }
    let c = c.build().unwrap();
    (0..2)
        .map(|_| GlobalBulkhead::connect_cluster(&cluster.urls(), name, c).unwrap())
        .collect()
}

/// After `close`: the system's keys on `port` hold no permit and no share.
fn assert_empty(cluster: &RedisCluster, port: u16, name: &str) {
    let mut con = cluster.node(port);
    let holders: u64 = redis::cmd("ZCARD")
        .arg(format!("watertight:{{{name}}}:holders"))
        .query(&mut con)
        .unwrap();
    let shares: u64 = redis::cmd("HLEN")
        .arg(format!("watertight:{{{name}}}:shares"))
        .query(&mut con)
        .unwrap();
    assert_eq!((holders, shares), (0, 0), "{name}: holders, shares left");
}

#[test]
fn systems_on_different_nodes_each_hold_their_own_limit() {
    let cluster = RedisCluster::start();
    let systems = spread(&cluster, 3);
    let owners: HashSet<u16> = systems.iter().map(|s| s.2).collect();
    assert_eq!(owners.len(), 3, "three systems on three nodes: {systems:?}");
    // Per call, leased, per call: limits 3, 4, 5.
    let limits = [3u32, 4, 5];
    let leased = [false, true, false];
    runtime().block_on(async {
        let end = Instant::now() + Duration::from_secs(3);
        let mut runs = Vec::new();
        let mut all = Vec::new();
        for (i, &(name, _, _)) in systems.iter().enumerate() {
            let handles = two_processes(&cluster, name, limits[i], leased[i]);
            all.extend(handles.iter().cloned());
            let (marker, tally) = (Arc::new(Marker::default()), Arc::new(Tally::default()));
            let run = {
                let (m, t) = (Arc::clone(&marker), Arc::clone(&tally));
                async move { load(&handles, 8, 400, end, m, t).await }
            };
            runs.push((tokio::spawn(run), marker, tally));
        }
        for (i, (run, marker, tally)) in runs.into_iter().enumerate() {
            run.await.unwrap();
            let (name, limit) = (systems[i].0, limits[i] as usize);
            let granted = tally.granted.load(Ordering::SeqCst);
            println!(
                "{name} (limit {limit}, {}): {granted} granted, most at once {}, {} refused full, {} errors",
                if leased[i] { "leased" } else { "per call" },
                marker.max(),
                tally.full.load(Ordering::SeqCst),
                tally.errors.load(Ordering::SeqCst),
            );
            assert!(marker.max() <= limit, "{name}: {} > {limit}", marker.max());
            assert_eq!(marker.max(), limit, "{name}: 16 tasks never filled it");
            assert!(granted >= 100, "{name}: only {granted} granted");
            assert_eq!(tally.errors.load(Ordering::SeqCst), 0, "{name}");
            assert_eq!(tally.lost.load(Ordering::SeqCst), 0, "{name}");
        }
        for g in &all {
            g.close().await.unwrap();
        }
    });
    for &(name, _, port) in &systems {
        assert_empty(&cluster, port, name);
    }
}

#[test]
fn a_slot_moved_mid_run_loses_and_invents_no_permit() {
    let cluster = RedisCluster::start();
    let systems = spread(&cluster, 2);
    let limits = [4u32, 4];
    let leased = [false, true];
    // Each system's slot goes to the third node, one after the other.
    let third = *cluster
        .ports()
        .iter()
        .find(|p| systems.iter().all(|s| s.2 != **p))
        .unwrap();
    let rt = runtime();
    let (handles, runs) = rt.block_on(async {
        let end = Instant::now() + Duration::from_millis(4500);
        let mut handles = Vec::new();
        let mut runs = Vec::new();
        for (i, &(name, _, _)) in systems.iter().enumerate() {
            let hs = two_processes(&cluster, name, limits[i], leased[i]);
            handles.push(hs.clone());
            let (marker, tally) = (Arc::new(Marker::default()), Arc::new(Tally::default()));
            let run = {
                let (m, t) = (Arc::clone(&marker), Arc::clone(&tally));
                async move { load(&hs, 8, 2000, end, m, t).await }
            };
            runs.push((tokio::spawn(run), marker, tally));
        }
        (handles, runs)
    });
    // Mid-run, on this thread (the runtime's workers run the load): each
    // slot moved, keys one by one. The per-call system's move pauses
    // 300 ms at each step, so that it is refused for longer than its store
    // timeout (500 ms): its callers then get typed errors, not only
    // redis-rs's retries.
    std::thread::sleep(Duration::from_secs(1));
    let mut moved = Vec::new();
    for (i, &(name, slot, _)) in systems.iter().enumerate() {
        let pause = Duration::from_millis(if leased[i] { 100 } else { 300 });
        let keys = cluster.migrate_slot(slot, third, pause);
        *runs[i].2.moved_at.lock().unwrap() = Some(Instant::now());
        assert!(keys >= 1, "{name}: no key moved");
        assert_eq!(cluster.owner(slot), third);
        moved.push(keys);
    }
    rt.block_on(async {
        for (i, (run, marker, tally)) in runs.into_iter().enumerate() {
            run.await.unwrap();
            let (name, limit) = (systems[i].0, limits[i] as usize);
            let (granted, after, errors) = (
                tally.granted.load(Ordering::SeqCst),
                tally.granted_after.load(Ordering::SeqCst),
                tally.errors.load(Ordering::SeqCst),
            );
            println!(
                "{name} (limit {limit}, {}): {} keys moved; {granted} granted ({after} after the move), most at once {}, {} refused full, {errors} typed errors, {} lost",
                if leased[i] { "leased" } else { "per call" },
                moved[i],
                marker.max(),
                tally.full.load(Ordering::SeqCst),
                tally.lost.load(Ordering::SeqCst),
            );
            let resumed = *tally.first_after.lock().unwrap();
            println!(
                "  first grant after the move: {resumed:?}; first typed error {:?}, last {:?}",
                tally.first_error.lock().unwrap(),
                tally.last_error.lock().unwrap()
            );
            assert!(marker.max() <= limit, "{name}: {} > {limit}", marker.max());
            assert_eq!(tally.lost.load(Ordering::SeqCst), 0, "{name}: permits lost");
            assert!(after >= 50, "{name}: only {after} granted after the move");
            // Typed errors only while the slot moved, and service back as
            // soon as it has: the breaker in front of Redis does not count
            // a slot moving as Redis failing (or it would refuse every call
            // for its open duration, 5 s).
            assert!(
                resumed.is_some_and(|d| d < Duration::from_secs(1)),
                "{name}: first grant {resumed:?} after the move"
            );
        }
        // No slot leaked: every handle closes cleanly, and then one
        // handle takes the whole limit at once.
        for hs in &handles {
            for g in hs {
                g.close().await.unwrap();
            }
        }
        for (i, &(name, _, _)) in systems.iter().enumerate() {
            let g = GlobalBulkhead::connect_cluster(
                &cluster.urls(),
                name,
                config(limits[i]).build().unwrap(),
            )
            .unwrap();
            let mut held = Vec::new();
            for _ in 0..limits[i] {
                held.push(g.try_acquire().await.unwrap());
            }
            assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
            drop(held);
            g.close().await.unwrap();
        }
    });
    for &(name, slot, old) in &systems {
        assert_empty(&cluster, third, name);
        assert!(
            cluster.keys_in_slot(old, slot).is_empty(),
            "{name}: keys left behind"
        );
    }
}

/// A waiter on a full limit of one, woken by the release (the lease is
/// 30 s and the waiter's deadline 5 s: only the notification wakes it in
/// time); returns how long it waited.
async fn woken_by_release(holder: &GlobalBulkhead, waiter: &GlobalBulkhead) -> Duration {
    let permit = holder.try_acquire().await.unwrap();
    let w = waiter.clone();
    let start = Instant::now();
    let wait = tokio::spawn(async move { w.acquire_timeout(Duration::from_secs(5)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(permit);
    let got = wait.await.unwrap();
    let waited = start.elapsed();
    assert!(got.is_ok(), "the waiter was not woken: {got:?}");
    waited
}

/// On the node on `port`, the connections subscribed to a shard channel
/// last ran no script, and some other connection did: the scripts never
/// share a connection with a sharded subscription, on which a node that
/// gives the slot away pushes an unsolicited `sunsubscribe` that redis-rs
/// would take for a script's reply (src/redis/conn.rs).
fn scripts_never_run_on_a_subscribed_connection(cluster: &RedisCluster, port: u16) {
    let clients = cluster.clients(port);
    let field = |c: &[(String, String)], k: &str| {
        c.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {k} in CLIENT LIST"))
    };
    let mut subscribed = 0;
    let mut scripted = 0;
    for c in &clients {
        let ran_script = field(c, "cmd").starts_with("evalsha");
        if field(c, "ssub") != "0" {
            subscribed += 1;
            assert!(!ran_script, "a subscribed connection ran a script: {c:?}");
        } else if ran_script {
            scripted += 1;
        }
    }
    assert!(subscribed >= 2 && scripted >= 1, "{clients:?}");
}

#[test]
fn release_notifications_follow_the_slot_to_its_new_node() {
    let cluster = RedisCluster::start();
    let (name, slot, owner) = spread(&cluster, 1)[0];
    let to = *cluster.ports().iter().find(|&&p| p != owner).unwrap();
    let channel = format!("watertight:{{{name}}}:released");
    let rt = runtime();
    let (a, b) = rt.block_on(async {
        let c = config(1).build().unwrap();
        let a = GlobalBulkhead::connect_cluster(&cluster.urls(), name, c).unwrap();
        let b = GlobalBulkhead::connect_cluster(&cluster.urls(), name, c).unwrap();
        (a, b)
    });
    let subscribed = |port: u16, n: u64| {
        let start = std::time::Instant::now();
        while cluster.shard_subscribers(port, &channel) < n {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{n} subscribers on {port} within 5 s: {}",
                cluster.shard_subscribers(port, &channel)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Each handle's keeper subscribes (sharded) on the slot's node.
    subscribed(owner, 2);
    let before = rt.block_on(woken_by_release(&a, &b));
    scripts_never_run_on_a_subscribed_connection(&cluster, owner);
    cluster.migrate_slot(slot, to, Duration::from_millis(50));
    // The old node unsubscribed them; they subscribe again on the new one.
    subscribed(to, 2);
    assert_eq!(cluster.shard_subscribers(owner, &channel), 0);
    let after = rt.block_on(woken_by_release(&b, &a));
    scripts_never_run_on_a_subscribed_connection(&cluster, to);
    println!("woken {before:?} after the release before the move, {after:?} after it");
    assert!(before < Duration::from_secs(3) && after < Duration::from_secs(3));
    rt.block_on(async {
        a.close().await.unwrap();
        b.close().await.unwrap();
    });
    assert_empty(&cluster, to, name);
}

#[test]
fn a_global_rate_on_a_cluster_admits_its_quota() {
    let cluster = RedisCluster::start();
    let systems = spread(&cluster, 2);
    runtime().block_on(async {
        // 100 a second, a burst of 10, for 1 s: per call and leased, on
        // two nodes, two limiters (processes) each.
        let mut runs = Vec::new();
        for (i, &(name, _, _)) in systems.iter().enumerate() {
            let mut c = GlobalRateConfig::builder(Quota::per_second(100).burst(10))
                .store_timeout(Duration::from_millis(500));
            if i == 1 {
                c = c.leased(Duration::from_millis(100));
            }
            let c = c.build().unwrap();
            let limiters: Vec<GlobalRateLimiter> = (0..2)
                .map(|_| GlobalRateLimiter::connect_cluster(&cluster.urls(), name, c).unwrap())
                .collect();
            runs.push(tokio::spawn(async move {
                let start = Instant::now();
                let end = start + Duration::from_secs(1);
                // Four tasks per limiter, each checking every 2 ms.
                let mut tasks = Vec::new();
                for l in &limiters {
                    let l = l.clone();
                    tasks.push(tokio::spawn(async move { global::spend(&l, 4, end).await }));
                }
                let mut admitted = 0;
                for t in tasks {
                    admitted += t.await.unwrap();
                }
                let elapsed = start.elapsed();
                for l in &limiters {
                    l.close().await;
                }
                (admitted, elapsed)
            }));
        }
        for (i, run) in runs.into_iter().enumerate() {
            let (admitted, elapsed) = run.await.unwrap();
            // The bound over the whole run, with 50 ms for the last checks.
            let bound = 10 + ((elapsed.as_secs_f64() + 0.05) * 100.0) as u64;
            println!(
                "{} ({}): {admitted} admitted in {elapsed:?}, bound {bound}",
                systems[i].0,
                if i == 1 { "leased" } else { "per call" }
            );
            assert!(admitted <= bound, "{admitted} > {bound}");
            assert!(admitted >= 80, "only {admitted} admitted");
        }
    });
}

#[test]
fn cluster_urls_redis_rs_cannot_use_are_typed_errors() {
    runtime().block_on(async {
        let c = GlobalConfig::builder(2).build().unwrap();
        let none: [&str; 0] = [];
        for nodes in [
            &none[..],
            &["redis+unix:///tmp/no-such.sock"][..],
            &["mysql://127.0.0.1:1"][..],
        ] {
            let err = GlobalBulkhead::connect_cluster(nodes, "payments", c).unwrap_err();
            assert!(
                matches!(err, watertight::redis::GlobalBuildError::BadUrl(_)),
                "{nodes:?}: {err}"
            );
        }
        let rc = GlobalRateConfig::builder(Quota::per_second(5))
            .build()
            .unwrap();
        let err = GlobalRateLimiter::connect_cluster(&none, "api", rc).unwrap_err();
        assert!(matches!(
            err,
            watertight::redis::GlobalRateBuildError::BadUrl(_)
        ));
    });
}

/// The members of system `name`'s holders on the node on `port`, read
/// there (`READONLY` lets a replica answer for its primary's slots).
fn holders_on(cluster: &RedisCluster, port: u16, name: &str) -> u64 {
    let mut con = cluster.node(port);
    redis::cmd("READONLY").query::<()>(&mut con).unwrap();
    redis::cmd("ZCARD")
        .arg(format!("watertight:{{{name}}}:holders"))
        .query(&mut con)
        .unwrap()
}

/// Acknowledged grants in a cluster: the `[EVALSHA, WAIT]` pipeline goes
/// to the node of the system's slot, so `WAIT` counts that primary's
/// replicas. A system whose node has a replica is granted (and the
/// replica has each grant the moment it is handed out); one whose node
/// has none is refused `NotAcknowledged` and its grant given back. A
/// `WAIT` sent anywhere else (every primary, or a random node) would
/// refuse the first system too.
#[test]
fn acknowledged_grants_count_the_replicas_of_the_systems_node() {
    let mut cluster = RedisCluster::start();
    let systems = spread(&cluster, 2);
    let (replicated, alone) = (systems[0], systems[1]);
    let replica = cluster.add_replica(replicated.2);
    let config = |leased: bool| {
        // Generous on a loaded machine: nothing here is timed.
        let c = config(3)
            .store_timeout(Duration::from_secs(1))
            .acknowledged(1, Duration::from_millis(800));
        if leased {
            c.leased(Duration::from_millis(100)).build().unwrap()
        } else {
            c.build().unwrap()
        }
    };
    runtime().block_on(async {
        let g =
            GlobalBulkhead::connect_cluster(&cluster.urls(), replicated.0, config(false)).unwrap();
        let mut tokens = Vec::new();
        for _ in 0..30 {
            let p = g.acquire_timeout(Duration::from_secs(1)).await.unwrap();
            assert!(p.is_global());
            // Acknowledged: the replica has the grant before it is ours.
            assert_eq!(holders_on(&cluster, replica, replicated.0), 1);
            tokens.push(p.fencing_token().unwrap());
            p.release().await.unwrap();
        }
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
        let m = g.metrics();
        assert_eq!((m.unacknowledged, m.granted), (0, 30), "{m:?}");

        let leased =
            GlobalBulkhead::connect_cluster(&cluster.urls(), replicated.0, config(true)).unwrap();
        let q = leased
            .acquire_timeout(Duration::from_secs(2))
            .await
            .unwrap();
        assert!(q.is_global());
        drop(q);
        let m = leased.metrics();
        assert_eq!(m.unacknowledged, 0, "{m:?}");
        assert!(m.refreshes >= 1, "{m:?}");

        let b = GlobalBulkhead::connect_cluster(&cluster.urls(), alone.0, config(false)).unwrap();
        ack::refused_and_given_back(&b, || holders_on(&cluster, alone.2, alone.0)).await;
        for h in [g, leased, b] {
            h.close().await.unwrap();
        }
    });
    assert_empty(&cluster, replicated.2, replicated.0);
    assert_empty(&cluster, alone.2, alone.0);
}
