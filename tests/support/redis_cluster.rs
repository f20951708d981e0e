//! A real Redis Cluster for a test: three primaries (`redis-server
//! --cluster-enabled yes`) on free loopback ports, persistence off, joined
//! by `redis-cli --cluster create` (slots 0-5460, 5461-10922 and
//! 10923-16383, no replicas); every process stopped and the directory
//! removed on drop, a panicking test's too. A replica can be added to a
//! primary afterwards (`add_replica`).
//!
//! It also moves a slot from one node to another the way `redis-cli
//! --cluster reshard` does (`CLUSTER SETSLOT … IMPORTING / MIGRATING`,
//! `MIGRATE` key by key, `CLUSTER SETSLOT … NODE`), slowly enough that the
//! clients meet `ASK` and `TRYAGAIN` on the way.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct RedisCluster {
    children: Vec<Child>,
    /// The primaries' ports (replicas added later are not among them).
    ports: Vec<u16>,
    replicas: Vec<u16>,
    dir: PathBuf,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A loopback port that is free, and whose cluster bus port (+10000) is
/// free too.
fn free_port(taken: &[u16]) -> u16 {
    for _ in 0..1000 {
        let l = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let p = l.local_addr().unwrap().port();
        if p > 55_000 || taken.contains(&p) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
    panic!("no free loopback port pair for a cluster node");
}

/// A cluster-enabled `redis-server` on loopback `port`, persistence off,
/// its cluster config file in `dir`.
fn spawn_node(dir: &Path, port: u16) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes"])
        .arg("--cluster-config-file")
        .arg(dir.join(format!("nodes-{port}.conf")))
        .args(["--cluster-node-timeout", "5000"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH (apt-get install -y redis-server)")
}

impl RedisCluster {
    /// Starts three primaries, joins them into one cluster and waits until
    /// every node reports `cluster_state:ok`.
    ///
    /// # Panics
    ///
    /// If `redis-server` or `redis-cli` is not on PATH (`.ci/run` installs
    /// both: `apt-get install -y redis-server redis-tools`), or the cluster
    /// is not up within 20 s.
    pub fn start() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wt-redis-cluster-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory for the cluster");
        let mut cluster = RedisCluster {
            children: Vec::new(),
            ports: Vec::new(),
            replicas: Vec::new(),
            dir,
        };
        for _ in 0..3 {
            let port = free_port(&cluster.ports);
            let child = spawn_node(&cluster.dir, port);
            cluster.children.push(child);
            cluster.ports.push(port);
        }
        let start = Instant::now();
        for &port in &cluster.ports {
            wait_answering(port, start);
        }
        let nodes: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let mut create = vec!["create"];
        create.extend(nodes.iter().map(String::as_str));
        create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        redis_cli_cluster(&create);
        cluster.wait_ok(Duration::from_secs(20));
        cluster
    }

    /// Starts one more node and makes it a replica of the primary on
    /// `primary` (`redis-cli --cluster add-node … --cluster-slave`); returns
    /// its port once the primary's `WAIT` counts it (the initial sync done)
    /// and it says its link to the primary is up.
    ///
    /// # Panics
    ///
    /// If the replica is not in sync within 20 s.
    pub fn add_replica(&mut self, primary: u16) -> u16 {
        let taken: Vec<u16> = self.ports.iter().chain(&self.replicas).copied().collect();
        let port = free_port(&taken);
        let child = spawn_node(&self.dir, port);
        self.children.push(child);
        self.replicas.push(port);
        let start = Instant::now();
        wait_answering(port, start);
        // The primary sends its first sync at once, not after the 5 s
        // that a diskless sync waits for more replicas by default.
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg(0)
            .query::<()>(&mut self.node(primary))
            .unwrap();
        redis_cli_cluster(&[
            "add-node",
            &format!("127.0.0.1:{port}"),
            &format!("127.0.0.1:{primary}"),
            "--cluster-slave",
            "--cluster-master-id",
            &self.id(primary),
        ]);
        loop {
            // What the tests need: the primary's `WAIT` counts the replica
            // (a replica still syncing, or synced but not yet put online
            // on its first ACK, is not counted). On a connection that wrote
            // nothing, `WAIT` answers at once with the replicas online.
            let counted: u64 = redis::cmd("WAIT")
                .arg(1)
                .arg(100)
                .query(&mut self.node(primary))
                .unwrap();
            let link: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut self.node(port))
                .unwrap();
            if counted == 1 && link.contains("master_link_status:up") {
                return port;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the replica on {port} was not in sync within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every node says `cluster_state:ok` and knows every slot's
    /// owner the same way.
    fn wait_ok(&self, limit: Duration) {
        let start = Instant::now();
        loop {
            let ok = self.ports.iter().all(|&p| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut self.node(p))
                    .unwrap();
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
            });
            if ok {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "the cluster was not ok within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The nodes' URLs, for `connect_cluster`.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The nodes' ports.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// A plain (blocking) connection to the node on `port`, for the test's
    /// own bookkeeping.
    pub fn node(&self, port: u16) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("a connection to a cluster node")
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.node(self.ports[0]))
            .unwrap()
    }

    /// The port of the node that serves `slot`, as the node on `ask`
    /// sees it (`CLUSTER NODES`).
    pub fn owner_seen_by(&self, ask: u16, slot: u16) -> u16 {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.node(ask))
            .unwrap();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            // id addr flags master ping pong epoch state slot...
            let port: u16 = fields[1]
                .split(['@', ':'])
                .nth(1)
                .and_then(|p| p.parse().ok())
                .unwrap();
            for range in &fields[8..] {
                if range.starts_with('[') {
                    continue; // a slot being migrated or imported
                }
                let (lo, hi) = match range.split_once('-') {
                    Some((lo, hi)) => (lo.parse().unwrap(), hi.parse().unwrap()),
                    None => {
                        let s = range.parse().unwrap();
                        (s, s)
                    }
                };
                if (lo..=hi).contains(&slot) {
                    return port;
                }
            }
        }
        panic!("no node serves slot {slot}");
    }

    /// The port of the node that serves `slot`, as every node agrees.
    ///
    /// # Panics
    ///
    /// If the nodes disagree.
    pub fn owner(&self, slot: u16) -> u16 {
        let seen: Vec<u16> = self
            .ports
            .iter()
            .map(|&p| self.owner_seen_by(p, slot))
            .collect();
        assert!(
            seen.iter().all(|&p| p == seen[0]),
            "the nodes disagree on slot {slot}: {seen:?}"
        );
        seen[0]
    }

    /// The id of the node on `port`.
    pub fn id(&self, port: u16) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.node(port))
            .unwrap()
    }

    /// The keys of `slot` on the node on `port`.
    pub fn keys_in_slot(&self, port: u16, slot: u16) -> Vec<String> {
        redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1000)
            .query(&mut self.node(port))
            .unwrap()
    }

    /// Moves `slot` from the node that serves it to the node on `to`, as
    /// `redis-cli --cluster reshard` does, with `pause` between its steps
    /// (the slot marked importing and migrating; each key moved on its own
    /// `MIGRATE`; the slot given to its new node): for `pause` and more,
    /// commands on the slot meet `ASK` redirections, and scripts whose
    /// keys are split between the nodes meet `TRYAGAIN`. Returns the keys
    /// moved.
    pub fn migrate_slot(&self, slot: u16, to: u16, pause: Duration) -> usize {
        let from = self.owner(slot);
        assert_ne!(from, to, "slot {slot} is already on {to}");
        let (from_id, to_id) = (self.id(from), self.id(to));
        let setslot = |port: u16, args: &[&str]| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(args)
                .query(&mut self.node(port))
                .unwrap();
        };
        setslot(to, &["IMPORTING", &from_id]);
        setslot(from, &["MIGRATING", &to_id]);
        std::thread::sleep(pause);
        let mut moved = 0;
        loop {
            let keys = self.keys_in_slot(from, slot);
            if keys.is_empty() {
                break;
            }
            for key in keys {
                let _: redis::Value = redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(to)
                    .arg(&key)
                    .arg(0)
                    .arg(5000)
                    .arg("REPLACE")
                    .query(&mut self.node(from))
                    .unwrap();
                moved += 1;
                std::thread::sleep(pause / 4);
            }
        }
        std::thread::sleep(pause);
        // The new owner first, then the old one, then the rest (as
        // redis-cli does): the epoch bump spreads it over the bus too.
        setslot(to, &["NODE", &to_id]);
        setslot(from, &["NODE", &to_id]);
        for &p in &self.ports {
            if p != to && p != from {
                setslot(p, &["NODE", &to_id]);
            }
        }
        let start = Instant::now();
        while self
            .ports
            .iter()
            .any(|&p| self.owner_seen_by(p, slot) != to)
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the nodes did not agree on slot {slot}'s new owner within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        moved
    }

    /// The clients of the node on `port` (`CLIENT LIST`), each as its
    /// `field=value` pairs.
    pub fn clients(&self, port: u16) -> Vec<Vec<(String, String)>> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut self.node(port))
            .unwrap();
        list.lines()
            .map(|l| {
                l.split(' ')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect()
            })
            .collect()
    }

    /// Subscribers of the shard channel `channel` on the node on `port`
    /// (`PUBSUB SHARDNUMSUB`).
    pub fn shard_subscribers(&self, port: u16, channel: &str) -> u64 {
        let v: (String, u64) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query(&mut self.node(port))
            .unwrap();
        v.1
    }
}

/// Runs `redis-cli --cluster` with `args`.
///
/// # Panics
///
/// If `redis-cli` is not on PATH or fails.
fn redis_cli_cluster(args: &[&str]) {
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli on PATH (apt-get install -y redis-tools)");
    assert!(
        out.status.success(),
        "redis-cli --cluster {} failed:\n{}",
        args[0],
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Waits until the node on `port` answers `PING`, at most 10 s after
/// `start`.
fn wait_answering(port: u16, start: Instant) {
    while !ping(port) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the cluster node on {port} did not answer within 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ping(port: u16) -> bool {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
