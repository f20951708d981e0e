//! The connection to Redis that the global limits share the shape of:
//! redis-rs's connection manager with this crate's timeouts, and one
//! command run under the store timeout.
//!
//! [`GlobalRateLimiter`](super::GlobalRateLimiter) uses both as they are;
//! the global bulkhead's store (`store.rs`) uses them too, with RESP3
//! pushes (its release notifications) on top, through a [`Link`]: one
//! Redis, or the primary that Sentinel names.

use std::boxed::Box;
use std::string::{String, ToString};
use std::vec::Vec;

use core::future::Future;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use ::redis::{
    Client, Cmd, ErrorKind, IntoConnectionInfo, Pipeline, ProtocolVersion, RedisConnectionInfo,
    RedisError, RedisFuture, ServerErrorKind, Value,
};

use event_listener::Event;

use super::error::StoreFailure;
use super::runtime::Runtime;
use crate::clock::Instant;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// The connection manager's settings for a store timeout of
/// `store_timeout`: our own timeout ([`timed`]) cuts each command, and
/// redis-rs's, twice as long, only backs it up. A refused connection is an
/// error at once, not a wait: one attempt per command (the next command
/// tries again), so that the breaker in front of Redis, not a retry loop,
/// decides how often Redis is asked.
pub(super) fn manager_config(store_timeout: Duration) -> ConnectionManagerConfig {
    let timeout = store_timeout.saturating_mul(2);
    ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(store_timeout)
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(timeout))
}

/// A connection manager for the Redis at `url` (RESP2, no pushes), made
/// lazily: nothing is sent until the first command, and the manager
/// reconnects by itself after a lost connection.
///
/// # Errors
///
/// The URL's error, if redis-rs cannot open it.
pub(super) fn open_lazy(
    url: &str,
    store_timeout: Duration,
) -> Result<ConnectionManager, RedisError> {
    let client = ::redis::Client::open(url.into_connection_info()?)?;
    ConnectionManager::new_lazy_with_config(client, manager_config(store_timeout))
}

/// Where the global bulkhead's commands go: one Redis, through redis-rs's
/// connection manager (which reconnects by itself to the same address), or
/// the primary that Sentinel names, found again after a connection error
/// ([`SentinelLink`]). Cloning is cheap; clones share the connection.
#[derive(Clone)]
pub(super) enum Link {
    /// One Redis at a fixed address.
    Direct {
        con: ConnectionManager,
        /// For a blocking connection at shutdown.
        client: Client,
    },
    /// The primary of a Sentinel-monitored group.
    Sentinel(Arc<SentinelLink>),
}

impl Link {
    /// A link to the Redis at `url`, speaking RESP3, with `manager`'s
    /// settings; made lazily (nothing is sent before the first command).
    pub(super) fn direct(url: &str, manager: ConnectionManagerConfig) -> Result<Self, RedisError> {
        let info = url.into_connection_info()?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(settings))?;
        let con = ConnectionManager::new_lazy_with_config(client.clone(), manager)?;
        Ok(Link::Direct { con, client })
    }

    /// A link to the primary named `master` by the Sentinels at
    /// `sentinels`, speaking RESP3, with `manager`'s settings for each
    /// primary's connection; made lazily (the Sentinels are first asked
    /// by the first command).
    pub(super) fn sentinel(
        sentinels: &[&str],
        master: &str,
        manager: ConnectionManagerConfig,
    ) -> Result<Self, RedisError> {
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(
            RedisConnectionInfo::default().set_protocol(ProtocolVersion::RESP3),
        );
        let client = SentinelClient::build(
            sentinels.to_vec(),
            master.to_string(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Link::Sentinel(Arc::new(SentinelLink {
            sentinel: tokio::sync::Mutex::new(client),
            current: Mutex::new(None),
            suspect: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            manager,
        })))
    }

    /// Subscribes the connection to `channel` (its pushes go to the
    /// manager's push sender).
    pub(super) async fn subscribe(&self, channel: &str) -> Result<(), RedisError> {
        match self {
            Link::Direct { con, .. } => con.clone().subscribe(channel).await,
            Link::Sentinel(link) => {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.subscribe(channel).await;
                watch.settle(&r);
                r
            }
        }
    }

    /// Asks the Sentinels again before the next command (a Sentinel
    /// link; nothing for one Redis): a write that no replica acknowledged
    /// may have gone to a primary that Sentinel has replaced (its replica
    /// promoted), which still answers until Sentinel demotes it.
    pub(super) fn suspect(&self) {
        if let Link::Sentinel(link) = self {
            link.suspect.store(true, Ordering::Release);
        }
    }

    /// Which connection this is: it changes when Sentinel names another
    /// primary (whose connection holds no subscription yet).
    pub(super) fn generation(&self) -> u64 {
        match self {
            Link::Direct { .. } => 0,
            Link::Sentinel(link) => link.generation.load(Ordering::Acquire),
        }
    }

    /// A client for the current primary, for a blocking connection
    /// (`None` before Sentinel was first asked).
    pub(super) fn client(&self) -> Option<Client> {
        match self {
            Link::Direct { client, .. } => Some(client.clone()),
            Link::Sentinel(link) => match link.current.lock() {
                Ok(current) => current.as_ref().map(|(_, c)| c.clone()),
                Err(_) => None,
            },
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Direct { con, .. } => con.req_packed_command(cmd),
            Link::Sentinel(link) => Box::pin(async move {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.req_packed_command(cmd).await;
                watch.settle(&r);
                r
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Direct { con, .. } => con.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(link) => Box::pin(async move {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.req_packed_commands(pipeline, offset, count).await;
                watch.settle(&r);
                r
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Direct { con, .. } => con.get_db(),
            Link::Sentinel(_) => 0,
        }
    }
}

/// The primary of a Sentinel-monitored group, followed across failovers.
///
/// Each command goes to a connection manager for the primary Sentinel last
/// named. A command that fails on the connection (an I/O error, a refused
/// or dropped connection, `READONLY` from a primary turned replica,
/// `MASTERDOWN`; an error reply counts as well as an error) or never
/// finishes (cut by the store timeout), or a write no replica acknowledged
/// ([`Link::suspect`]), makes the link *suspect*: the next command first asks the Sentinels again (one at
/// a time; the others wait for its answer rather than use a connection
/// that may point at a demoted or restarted server), and redis-rs checks
/// that the server they name calls itself a primary. A new address gets a
/// new connection manager (and a new [`Link::generation`]); the same one
/// keeps its manager, which reconnects by itself.
pub(super) struct SentinelLink {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    /// The current primary's connection manager and client.
    current: Mutex<Option<(ConnectionManager, Client)>>,
    /// Ask the Sentinels before the next command (set at first). A plain
    /// flag: it is cleared only under the `sentinel` lock, after the
    /// answer is installed, so a command that fails while another asks
    /// may see its mark cleared by an answer the Sentinels gave before
    /// that failure; then the next command that fails on the connection
    /// marks it again (at worst one more failed command).
    suspect: AtomicBool,
    generation: AtomicU64,
    manager: ConnectionManagerConfig,
}

impl SentinelLink {
    /// The current primary's connection, after asking the Sentinels again
    /// if the link is suspect.
    async fn manager(&self) -> Result<ConnectionManager, RedisError> {
        if self.suspect.load(Ordering::Acquire) {
            let mut sentinel = self.sentinel.lock().await;
            // Another command may have asked while this one waited.
            if self.suspect.load(Ordering::Acquire) {
                let client = sentinel.async_get_client().await?;
                let addr = client.get_connection_info().addr().to_string();
                let same = self.current_addr().is_some_and(|a| a == addr);
                if !same {
                    let con = ConnectionManager::new_lazy_with_config(
                        client.clone(),
                        self.manager.clone(),
                    )?;
                    if let Ok(mut current) = self.current.lock() {
                        *current = Some((con, client));
                    }
                    self.generation.fetch_add(1, Ordering::AcqRel);
                }
                self.suspect.store(false, Ordering::Release);
            }
        }
        match self.current.lock() {
            Ok(current) => current.as_ref().map(|(con, _)| con.clone()),
            Err(_) => None,
        }
        .ok_or_else(|| RedisError::from((ErrorKind::Client, "no primary known yet")))
    }

    fn current_addr(&self) -> Option<String> {
        let current = self.current.lock().ok()?;
        current
            .as_ref()
            .map(|(_, c)| c.get_connection_info().addr().to_string())
    }
}

/// Marks a Sentinel link suspect unless its command settles with an
/// answer (or a server error that says nothing of the connection): a
/// command dropped before it finishes (cut by the store timeout) counts
/// as a connection failure.
struct Watch<'a> {
    suspect: &'a AtomicBool,
    settled: bool,
}

impl<'a> Watch<'a> {
    fn new(suspect: &'a AtomicBool) -> Self {
        Watch {
            suspect,
            settled: false,
        }
    }

    /// A command's answer: an error reply comes back as a value here (the
    /// caller turns it into an error), so both are looked at.
    fn settle<T: Replies>(&mut self, r: &Result<T, RedisError>) {
        self.settled = match r {
            Ok(v) => !v.replies().any(is_role_error),
            Err(e) => !is_link_error(e),
        };
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.suspect.store(true, Ordering::Release);
        }
    }
}

/// Whether `e` says the connection (or the server's role) is wrong, not
/// the command: anything but a server's error, and of those `READONLY`
/// (the server is a replica now) and `MASTERDOWN`.
fn is_link_error(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Server(k) => is_role_kind(k),
        _ => true,
    }
}

fn is_role_kind(k: ServerErrorKind) -> bool {
    matches!(k, ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
}

/// Whether a reply is an error that says the server is not a primary (a
/// script's write on a replica answers `READONLY`).
fn is_role_error(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind().is_some_and(is_role_kind))
}

/// The replies of one command, or of a pipeline.
trait Replies {
    fn replies(&self) -> impl Iterator<Item = &Value>;
}

impl Replies for Value {
    fn replies(&self) -> impl Iterator<Item = &Value> {
        core::iter::once(self)
    }
}

impl Replies for Vec<Value> {
    fn replies(&self) -> impl Iterator<Item = &Value> {
        self.iter()
    }
}

impl Replies for () {
    fn replies(&self) -> impl Iterator<Item = &Value> {
        core::iter::empty()
    }
}

/// Runs `cmd` under `limit` on `clock`: its answer, its error, or
/// [`StoreFailure::TimedOut`] (redis-rs's own timeouts included).
pub(super) async fn timed<R, T, F>(clock: &R, limit: Duration, cmd: F) -> Result<T, StoreFailure>
where
    R: Runtime,
    F: Future<Output = Result<T, RedisError>>,
{
    let end = clock.now().saturating_add(limit);
    tokio::select! {
        biased;
        r = cmd => r.map_err(|e| {
            if e.is_timeout() {
                StoreFailure::TimedOut
            } else {
                StoreFailure::Redis(e)
            }
        }),
        () = clock.sleep_until(end) => Err(StoreFailure::TimedOut),
    }
}

/// Waits until `done()` holds (checked at once and after each
/// notification of `changed`) or `until` comes on `clock`, whichever is
/// first: how a caller waits for a keeper's first refresh.
pub(super) async fn wait_for<R: Runtime>(
    changed: &Event,
    done: impl Fn() -> bool,
    clock: &R,
    until: Instant,
) {
    loop {
        let listener = changed.listen();
        if done() {
            return;
        }
        tokio::select! {
            () = listener => {}
            () = clock.sleep_until(until) => return,
        }
    }
}
