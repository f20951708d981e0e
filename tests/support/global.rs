//! What the tests of the Redis-backed limits (`tests/global_*.rs`) share:
//! their tokio runtime (the Redis benches' too), a breaker that opens
//! quickly on a frozen Redis, and the harness of the multi-process tests.
//!
//! A multi-process test runs its own test binary again as the child
//! processes ([`child`]): each such file has an ignored `child_process`
//! test that reads `WT_ROLE`, `WT_URL` and whatever else its parent set,
//! plays that role, and tells the parent what it did in lines
//! `WT key=value` on stdout ([`report`]).
//!
//! Included beside the server, whose type it names:
//!
//! ```ignore
//! #[path = "support/redis_server.rs"]
//! mod redis_server;
//! #[path = "support/global.rs"]
//! mod global;
//! ```

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use watertight::breaker::BreakerConfig;
use watertight::redis::{
    GlobalBulkhead, GlobalPermit, GlobalRateError, GlobalRateLimiter, RateKey,
};

use super::redis_server::RedisServer;

/// A multi-threaded tokio runtime of two workers (the machine's cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A store breaker that opens at once on a frozen Redis: a window of 4,
/// open at 50 % failures of at least 2 calls, no slow calls, open for
/// 500 ms.
pub fn quick_breaker() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(2)
        .failure_rate_threshold(50.0)
        .no_slow_call_duration()
        .open_duration(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// The string value of `key` on `server`, if it has one.
pub fn get(server: &RedisServer, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

// ---------------------------------------------------------------------------
// The child processes.

/// This test binary run again as a child process in `role`, on `server`,
/// with `env` set besides: its stdout piped, its stderr the parent's.
pub fn child(role: &str, server: &RedisServer, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_process",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("WT_ROLE", role)
    .env("WT_URL", server.url())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The role and the Redis URL a parent gave this process ([`child`]), or
/// `None` when it runs as a test of its own (its `child_process` then
/// does nothing).
pub fn role() -> Option<(String, String)> {
    let role = std::env::var("WT_ROLE").ok()?;
    Some((role, std::env::var("WT_URL").unwrap()))
}

/// Waits for `child` to end, checks it succeeded, and returns its stdout.
pub fn output(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "a child process failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `WT key=value` in a child's output.
pub fn report(out: &str, key: &str) -> Option<u64> {
    // libtest prints `test child_process ... ` before the test's own output.
    out.lines()
        .filter_map(|l| l.find("WT ").map(|i| &l[i + 3..]))
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.trim().parse().ok())
}

/// As [`report`], for a report the child must have made.
pub fn reported(out: &str, key: &str) -> u64 {
    report(out, key).unwrap_or_else(|| panic!("no {key} in a child's report:\n{out}"))
}

/// A running child's stdout, line by line as it comes.
pub fn lines(child: &mut Child) -> Lines<BufReader<ChildStdout>> {
    BufReader::new(child.stdout.take().unwrap()).lines()
}

/// The next `WT key=value` among `lines`, waiting for it; `None` if the
/// child's stdout ends first.
pub fn next_report(lines: &mut Lines<BufReader<ChildStdout>>, key: &str) -> Option<u64> {
    lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| report(&l, key))
}

/// Marks entry: INCR the in-flight counter and keep its maximum.
const ENTER: &str = r"
local v = redis.call('INCR', KEYS[1])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
if v > m then redis.call('SET', KEYS[2], v) end
return v
";

/// The marks the child processes of a limit's test keep on a Redis:
/// `test:cur`, the calls in flight fleet-wide now, and `test:max`, the
/// most there were at once. A clone shares the connection.
#[derive(Clone)]
pub struct Marks {
    con: redis::aio::MultiplexedConnection,
    enter: redis::Script,
}

impl Marks {
    /// Marks on the Redis at `url`.
    pub async fn open(url: &str) -> Marks {
        let con = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Marks {
            con,
            enter: redis::Script::new(ENTER),
        }
    }

    /// A call that lasts `d`: its entry marked before, its exit after.
    pub async fn call(&mut self, d: Duration) {
        let _: i64 = self
            .enter
            .key("test:cur")
            .key("test:max")
            .invoke_async(&mut self.con)
            .await
            .unwrap();
        tokio::time::sleep(d).await;
        let _: i64 = redis::cmd("DECR")
            .arg("test:cur")
            .query_async(&mut self.con)
            .await
            .unwrap();
    }

    /// One round trip on the marks' connection.
    pub async fn ping(&mut self) {
        let _: () = redis::cmd("PING").query_async(&mut self.con).await.unwrap();
    }
}

// ---------------------------------------------------------------------------
// The fleets of the global rate limiter.

/// The Unix time in µs: the children of a run start at one such instant.
pub fn unix_micros() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

/// Redis's clock (`TIME`) in µs.
pub async fn redis_time(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(con).await.unwrap();
    s * 1_000_000 + us
}

/// `tasks` tasks each check `api`'s unkeyed limit, then sleep 2 ms, over
/// and over until `end`; returns the checks admitted.
pub async fn spend(api: &GlobalRateLimiter, tasks: usize, end: tokio::time::Instant) -> u64 {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let api = api.clone();
        handles.push(tokio::spawn(async move {
            let mut admitted = 0u64;
            while tokio::time::Instant::now() < end {
                match api.check(&RateKey::whole()).await {
                    Ok(()) => admitted += 1,
                    Err(GlobalRateError::Limited { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for h in handles {
        admitted += h.await.unwrap();
    }
    admitted
}

/// The first permit `g` grants in `tries` tries `every` apart, if any: a
/// bounded wait for a store that is coming back (a thawed or promoted
/// Redis).
pub async fn first_grant(g: &GlobalBulkhead, tries: u32, every: Duration) -> Option<GlobalPermit> {
    for _ in 0..tries {
        if let Ok(p) = g.try_acquire().await {
            return Some(p);
        }
        tokio::time::sleep(every).await;
    }
    None
}
