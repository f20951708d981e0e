//! A real `redis-server` for a test or a bench: started on a Unix socket in
//! a fresh directory (no TCP port to collide with), persistence off, and
//! stopped (and its directory removed) on drop.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

impl RedisServer {
    /// Starts a server and waits until it answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not on PATH (`.ci/run` installs it:
    /// `apt-get install -y redis-server`) or does not answer within 10 s.
    pub fn start() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wt-redis-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory for redis-server");
        let socket = dir.join("redis.sock");
        let mut server = RedisServer {
            child: None,
            dir,
            socket,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&self.socket)
            .args([
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (apt-get install -y redis-server)");
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if self.socket.exists() && self.ping() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server did not answer within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn ping(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// A plain (blocking) connection for the test's own bookkeeping.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("a connection to the test's redis-server")
    }

    /// `EVALSHA` calls the server has run, and the µs it spent in them
    /// (`INFO commandstats`): the scripts' round trips and their cost.
    pub fn evalsha_stats(&self) -> (u64, u64) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .unwrap();
        let Some(line) = info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        else {
            return (0, 0);
        };
        let field = |name: &str| {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name))
                .map_or(0, |v| v.parse().unwrap())
        };
        (field("calls="), field("usec="))
    }

    /// `EVALSHA` calls the server has run.
    pub fn evalsha_calls(&self) -> u64 {
        self.evalsha_stats().0
    }

    /// Members of the sorted set `key` (a system's holders).
    pub fn zcard(&self, key: &str) -> u64 {
        redis::cmd("ZCARD")
            .arg(key)
            .query(&mut self.connection())
            .unwrap()
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {sig} {}", self.pid());
    }

    /// Freezes the server (SIGSTOP): it holds its connections and answers nothing.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Thaws a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Kills the server (SIGKILL) and waits for it to go.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Starts it again on the same socket, with nothing in it.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            // A frozen server ignores SIGTERM until thawed; SIGKILL does not wait.
            self.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
