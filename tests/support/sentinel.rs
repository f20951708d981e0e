//! A real Redis group under Sentinel for a test: a primary, one replica
//! (`--replicaof`) and three Sentinels (`redis-server FILE --sentinel`),
//! each on a free loopback port, persistence off, every file in one fresh
//! directory; stopped (and the directory removed) on drop.
//!
//! The Sentinels are told of each other and of the replica in their config
//! files (`known-sentinel`, `known-replica`), so that they agree from the
//! start instead of after a few hello messages, and fail over quickly:
//! `down-after-milliseconds` 500, `failover-timeout` 2000.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the primary under.
pub const MASTER: &str = "wt";

/// One `redis-server` process (a data node or a Sentinel).
struct Node {
    child: Option<Child>,
    port: u16,
}

impl Node {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // A frozen node ignores SIGTERM until thawed; SIGKILL does not wait.
        self.kill();
    }
}

pub struct SentinelGroup {
    dir: PathBuf,
    /// The two data nodes; which one is the primary changes with failovers.
    nodes: Vec<Node>,
    sentinels: Vec<Node>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// `n` loopback ports free now (all bound at once, so they differ).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

fn connection(port: u16) -> redis::RedisResult<redis::Connection> {
    let c =
        redis::Client::open(url(port))?.get_connection_with_timeout(Duration::from_millis(500))?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(c)
}

/// Polls `f` every 20 ms until it holds.
///
/// # Panics
///
/// If it does not within `limit` (`what` says what was awaited).
fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl SentinelGroup {
    /// Starts the group and waits until every Sentinel knows the primary,
    /// the replica and the other two, and the replica is in sync.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not on PATH or the group is not ready in 10 s.
    pub fn start() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wt-sentinel-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let ports = free_ports(5);
        let mut group = SentinelGroup {
            dir,
            nodes: Vec::new(),
            sentinels: Vec::new(),
        };
        let primary = group.data_node(ports[0], None);
        group.nodes.push(primary);
        let replica = group.data_node(ports[1], Some(ports[0]));
        group.nodes.push(replica);

        let ids: Vec<String> = (0..3).map(|i| format!("{:040x}", 0xa11ce + i)).collect();
        for i in 0..3 {
            let mut conf = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nsentinel myid {id}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {p} 2\n\
                 sentinel down-after-milliseconds {MASTER} 500\n\
                 sentinel failover-timeout {MASTER} 2000\n\
                 sentinel parallel-syncs {MASTER} 1\n\
                 sentinel known-replica {MASTER} 127.0.0.1 {r}\n",
                port = ports[2 + i],
                dir = group.dir.display(),
                id = ids[i],
                p = ports[0],
                r = ports[1],
            );
            for j in (0..3).filter(|&j| j != i) {
                conf.push_str(&format!(
                    "sentinel known-sentinel {MASTER} 127.0.0.1 {} {}\n",
                    ports[2 + j],
                    ids[j]
                ));
            }
            let file = group.dir.join(format!("sentinel-{i}.conf"));
            std::fs::write(&file, conf).unwrap();
            let child = Command::new("redis-server")
                .arg(&file)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH (apt-get install -y redis-server)");
            group.sentinels.push(Node {
                child: Some(child),
                port: ports[2 + i],
            });
        }
        group.wait_in_sync(ports[1]);
        for s in &group.sentinels {
            let port = s.port;
            wait_until(Duration::from_secs(10), "a Sentinel ready", || {
                sentinel_ready(port, ports[0])
            });
        }
        group
    }

    /// Starts a data node on `port`, a replica of `primary` if given.
    fn data_node(&self, port: u16, primary: Option<u16>) -> Node {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--dbfilename", &format!("dump-{port}.rdb")])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = primary {
            cmd.args(["--replicaof", "127.0.0.1", &p.to_string()]);
        }
        let child = cmd
            .spawn()
            .expect("redis-server on PATH (apt-get install -y redis-server)");
        let node = Node {
            child: Some(child),
            port,
        };
        wait_until(Duration::from_secs(10), "redis-server answering", || {
            connection(port)
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
        node
    }

    /// Waits until the replica on `port` has its link to the primary up
    /// and the primary's `WAIT` counts it: a replica still syncing, or
    /// synced but not yet put online by its first ACK, is not counted, and
    /// an acknowledged grant made then would be refused. On a connection
    /// that wrote nothing, `WAIT` answers at once with the replicas online.
    pub fn wait_in_sync(&self, port: u16) {
        wait_until(Duration::from_secs(10), "the replica in sync", || {
            let Some(info) = info_replication(port) else {
                return false;
            };
            let primary = info
                .lines()
                .find_map(|l| l.strip_prefix("master_port:"))
                .and_then(|p| p.trim().parse::<u16>().ok());
            let (true, Some(primary)) = (info.contains("master_link_status:up"), primary) else {
                return false;
            };
            connection(primary)
                .and_then(|mut c| redis::cmd("WAIT").arg(1).arg(100).query::<u64>(&mut c))
                .is_ok_and(|counted| counted >= 1)
        });
    }

    /// The Sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| url(s.port)).collect()
    }

    /// The port of the primary the Sentinels name now (the first that
    /// answers).
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let mut c = connection(s.port).ok()?;
            let (_, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(MASTER)
                .query(&mut c)
                .ok()?;
            Some(port)
        })
    }

    /// Kills the current primary with SIGKILL; returns its port.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self.primary_port().expect("a Sentinel naming the primary");
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("the primary is one of the group's nodes");
        node.kill();
        port
    }

    /// Waits until the Sentinels name a primary other than `old` that
    /// calls itself one; its port.
    ///
    /// # Panics
    ///
    /// If that does not happen within `limit`.
    pub fn wait_for_failover(&self, old: u16, limit: Duration) -> u16 {
        let mut new = 0;
        wait_until(limit, "Sentinel's failover", || match self.primary_port() {
            Some(p) if p != old && is_primary(p) => {
                new = p;
                true
            }
            _ => false,
        });
        new
    }

    /// Starts the node that was on `port` again, empty, as a replica of
    /// the primary on `primary` (as a supervisor that restarts a crashed
    /// Redis into the group would), and waits until it is in sync.
    pub fn restart_as_replica(&mut self, port: u16, primary: u16) {
        let node = self.data_node(port, Some(primary));
        self.wait_in_sync(port);
        match self.nodes.iter_mut().find(|n| n.port == port) {
            Some(slot) => *slot = node,
            None => self.nodes.push(node),
        }
    }

    /// Cuts the replica off the primary for a while, the way a slow or
    /// partitioned network would: freezes the replica (SIGSTOP: it can
    /// neither acknowledge nor reconnect) and drops its replication link
    /// on the primary (`CLIENT KILL TYPE replica`). The primary's writes
    /// from then on reach no replica. Returns the replica's port.
    pub fn cut_off_replica(&self) -> u16 {
        let primary = self.primary_port().expect("a Sentinel naming the primary");
        let replica = self
            .nodes
            .iter()
            .find(|n| n.port != primary && n.child.is_some())
            .expect("a replica");
        signal(replica, "-STOP");
        let mut c = connection(primary).expect("the primary");
        let _: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut c)
            .unwrap();
        replica.port
    }

    /// Asks a Sentinel for a failover with the primary alive (`SENTINEL
    /// FAILOVER`): the replica is promoted and the old primary, still
    /// running with its connections, is turned into its replica. Returns
    /// the old primary's port.
    pub fn planned_failover(&self) -> u16 {
        let old = self.primary_port().expect("a Sentinel naming the primary");
        let mut c = connection(self.sentinels[0].port).expect("a Sentinel");
        let () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER)
            .query(&mut c)
            .expect("SENTINEL FAILOVER accepted");
        old
    }

    /// Turns the node on `port` into a replica of `primary` (`REPLICAOF`),
    /// as Sentinel does with a primary it replaced; its connections stay.
    pub fn demote(&self, port: u16, primary: u16) {
        let mut c = connection(port).expect("a data node");
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary)
            .query(&mut c)
            .unwrap();
    }

    /// `EVALSHA` calls the node on `port` has run (`INFO commandstats`):
    /// the scripts clients sent it (a replica applies their effects, not
    /// the calls).
    pub fn evalsha_calls(&self, port: u16) -> u64 {
        let mut c = connection(port).expect("a data node");
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut c)
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|v| v.split(',').next())
            .map_or(0, |v| v.parse().unwrap())
    }

    /// Whether the node on `port` is a replica now.
    pub fn is_replica(&self, port: u16) -> bool {
        info_replication(port).is_some_and(|i| i.contains("role:slave"))
    }

    /// Members of the sorted set `key` on the node on `port`.
    pub fn zcard(&self, port: u16, key: &str) -> u64 {
        let mut c = connection(port).expect("a data node");
        redis::cmd("ZCARD").arg(key).query(&mut c).unwrap()
    }

    /// Thaws the node on `port` (SIGCONT).
    pub fn thaw(&self, port: u16) {
        if let Some(node) = self.nodes.iter().find(|n| n.port == port) {
            signal(node, "-CONT");
        }
    }

    /// Replicas connected to the primary on `port`.
    pub fn connected_replicas(&self, port: u16) -> u64 {
        info_replication(port)
            .and_then(|i| {
                i.lines()
                    .find_map(|l| l.strip_prefix("connected_slaves:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        self.sentinels.clear();
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn signal(node: &Node, sig: &str) {
    let pid = node.child.as_ref().map_or(0, Child::id);
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill {sig} {pid}");
}

fn info_replication(port: u16) -> Option<String> {
    let mut c = connection(port).ok()?;
    redis::cmd("INFO").arg("replication").query(&mut c).ok()
}

fn is_primary(port: u16) -> bool {
    info_replication(port).is_some_and(|i| i.contains("role:master"))
}

/// Whether the Sentinel on `port` names `primary` and knows one replica
/// and two other Sentinels.
fn sentinel_ready(port: u16, primary: u16) -> bool {
    let Ok(mut c) = connection(port) else {
        return false;
    };
    let Ok(fields) = redis::cmd("SENTINEL")
        .arg("master")
        .arg(MASTER)
        .query::<Vec<String>>(&mut c)
    else {
        return false;
    };
    let field = |name: &str| {
        fields
            .chunks(2)
            .find(|kv| kv[0] == name)
            .map(|kv| kv[1].clone())
    };
    field("port").as_deref() == Some(primary.to_string().as_str())
        && field("flags").as_deref() == Some("master")
        && field("num-slaves").as_deref() == Some("1")
        && field("num-other-sentinels").as_deref() == Some("2")
}
