//! The connection to Redis that the global limits share: one Redis
//! through redis-rs's connection manager, the primary that Redis Sentinel
//! names (followed across failovers), or a Redis Cluster through redis-rs's
//! cluster client, with this crate's timeouts; and one command run under
//! the store timeout.
//!
//! [`GlobalRateLimiter`](super::GlobalRateLimiter) uses [`open`] (no
//! pushes); the global bulkhead's store (`store.rs`) uses
//! [`open_with_pushes`]: a connection for its scripts, one for its
//! channel's subscription (the same connection on one Redis and under
//! Sentinel), and a blocking client for shutdown ([`Blocking`]).
//!
//! **The abstraction.** Everything above this file speaks to a [`Conn`]
//! (an `aio::ConnectionLike`, so scripts and pipelines run on it
//! unchanged) and names where Redis is with an [`Endpoint`]. What differs
//! between the three lives here: how the connections are made, which
//! subscribe command a channel takes ([`Conn::subscribe`]: `SUBSCRIBE`, or
//! `SSUBSCRIBE` in a cluster, where the channel lives in its hash tag's
//! slot), which publish command the scripts use ([`Conn::sharded`], see
//! `store.rs`), when the Sentinels are asked again ([`Conn::suspect`],
//! [`SentinelLink`]) and which connection a subscription is on
//! ([`Conn::generation`]), and which failures only say that a slot is
//! moving ([`slot_moving`]).

use std::boxed::Box;
use std::string::{String, ToString};
use std::vec::Vec;

use core::future::Future;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use ::redis::aio::{AsyncPushSender, ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
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

/// Where the Redis of a global limit is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Endpoint<'a> {
    /// One Redis (its primary), by URL.
    Single(&'a str),
    /// The primary that the Sentinels at `sentinels` name `master`.
    Sentinel {
        sentinels: &'a [&'a str],
        master: &'a str,
    },
    /// A Redis Cluster, by the URLs of some of its nodes (the client
    /// learns the rest from them).
    Cluster(&'a [String]),
}

/// An async connection to a global limit's Redis. Every kind is made
/// lazily (nothing is sent until the first command) and reconnects by
/// itself; a Sentinel link also asks the Sentinels again after a failure
/// ([`SentinelLink`]), and a cluster connection follows the slots as they
/// move (`MOVED`, `ASK`), retrying a few times within the store timeout.
/// Cloning is cheap; clones share the connection.
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Sentinel(Arc<SentinelLink>),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Whether the scripts must publish with `SPUBLISH` (sharded pub/sub,
    /// in a cluster) rather than `PUBLISH`.
    pub(super) fn sharded(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Subscribes to `channel` (pushes go to the handler given to
    /// [`open_with_pushes`]): `SUBSCRIBE` on one Redis and on Sentinel's
    /// primary, `SSUBSCRIBE` in a cluster (the node that serves the
    /// channel's slot; redis-rs moves the subscription when the slot
    /// moves, and a node that gives the slot away unsubscribes us, which
    /// the push handler sees).
    pub(super) async fn subscribe(&self, channel: &str) -> Result<(), RedisError> {
        match self {
            Conn::Single(c) => c.clone().subscribe(channel).await,
            Conn::Sentinel(link) => {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.subscribe(channel).await;
                watch.settle(&r);
                r
            }
            Conn::Cluster(c) => c.clone().ssubscribe(channel).await,
        }
    }

    /// Asks the Sentinels again before the next command (a Sentinel
    /// link; nothing for the others): a write that no replica
    /// acknowledged may have gone to a primary that Sentinel has replaced
    /// (its replica promoted), which still answers until Sentinel demotes
    /// it. (A cluster's own failover moves the slot: redis-rs follows the
    /// `MOVED` that the demoted node answers.)
    pub(super) fn suspect(&self) {
        if let Conn::Sentinel(link) = self {
            link.suspect.store(true, Ordering::Release);
        }
    }

    /// Which connection this is: it changes when Sentinel names another
    /// primary (whose connection holds no subscription yet). Always 0 for
    /// the others, whose connections make their subscriptions again by
    /// themselves.
    pub(super) fn generation(&self) -> u64 {
        match self {
            Conn::Single(_) | Conn::Cluster(_) => 0,
            Conn::Sentinel(link) => link.generation.load(Ordering::Acquire),
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Sentinel(link) => Box::pin(async move {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.req_packed_command(cmd).await;
                watch.settle(&r);
                r
            }),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    /// A pipeline goes on one connection: for a cluster, redis-rs sends
    /// it to the node of the first command that names a slot (the
    /// script's `EVALSHA`; a `WAIT` behind it names none), so the `WAIT`
    /// of an acknowledged grant counts the replicas of the system's node.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(link) => Box::pin(async move {
                let mut con = link.manager().await?;
                let mut watch = Watch::new(&link.suspect);
                let r = con.req_packed_commands(pipeline, offset, count).await;
                watch.settle(&r);
                r
            }),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Sentinel(_) => 0,
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// What makes a blocking connection to the same Redis: the last resort
/// once a keeper's runtime has shut down (see `store.rs`).
#[derive(Clone)]
pub(super) enum Blocking {
    Single(Client),
    /// The primary Sentinel named last.
    Sentinel(Arc<SentinelLink>),
    /// Boxed: a cluster client is twice a client's size, and rare.
    Cluster(Box<ClusterClient>),
}

impl Blocking {
    /// A blocking connection, each read and write bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// Redis's, if the connection cannot be made in time (under
    /// Sentinel: also if no primary was named yet).
    pub(super) fn connect(
        &self,
        timeout: Duration,
    ) -> Result<Box<dyn ::redis::ConnectionLike + Send>, RedisError> {
        let single = |client: &Client| -> Result<Box<dyn ::redis::ConnectionLike + Send>, _> {
            let c = client.get_connection_with_timeout(timeout)?;
            c.set_read_timeout(Some(timeout))?;
            c.set_write_timeout(Some(timeout))?;
            Ok(Box::new(c))
        };
        match self {
            Blocking::Single(client) => single(client),
            Blocking::Sentinel(link) => single(
                &link
                    .client()
                    .ok_or_else(|| RedisError::from((ErrorKind::Client, "no primary known")))?,
            ),
            // The client's own connection and response timeouts (set in
            // `open`) bound it.
            Blocking::Cluster(client) => Ok(Box::new(client.get_connection()?)),
        }
    }
}

/// The connection manager's settings for a store timeout of
/// `store_timeout`: our own timeout ([`timed`]) cuts each command, and
/// redis-rs's, twice as long, only backs it up. A refused connection is an
/// error at once, not a wait: one attempt per command (the next command
/// tries again), so that the breaker in front of Redis, not a retry loop,
/// decides how often Redis is asked.
fn manager_config(store_timeout: Duration) -> ConnectionManagerConfig {
    let timeout = store_timeout.saturating_mul(2);
    ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(store_timeout)
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(timeout))
}

/// The cluster client's settings for a store timeout of `store_timeout`:
/// redis-rs's timeouts twice ours, as for one Redis; and retries, so that
/// a command follows a slot that moves (`MOVED` and `ASK` are retried at
/// once; `TRYAGAIN`, while a script's keys are split between two nodes,
/// after 5 ms, then longer, up to a quarter of the store timeout) within
/// our timeout, which cuts the rest. Redirections are not failures of
/// Redis: they do not count for the breaker ([`slot_moving`]).
fn cluster_builder(nodes: &[String], store_timeout: Duration) -> ClusterClientBuilder {
    let timeout = store_timeout.saturating_mul(2);
    let max_wait = u64::try_from(store_timeout.as_millis() / 4)
        .unwrap_or(u64::MAX)
        .max(10);
    ClusterClientBuilder::new(nodes.iter().map(String::as_str))
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(8)
        .min_retry_wait(5)
        .max_retry_wait(max_wait)
}

/// Whether `failure` says only that the system's slot is moving between
/// two cluster nodes (`MOVED`, `ASK` or `TRYAGAIN` still, after redis-rs's
/// retries): Redis is up and will answer once the move ends. The breaker
/// in front of Redis ignores such a failure (the caller still gets its
/// typed error): a slot migration, a routine operation, must not shut the
/// limit for the breaker's whole open duration.
pub(super) fn slot_moving(failure: &StoreFailure) -> bool {
    use ::redis::{ErrorKind, ServerErrorKind};
    matches!(
        failure,
        StoreFailure::Redis(e) if matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain)
        )
    )
}

/// The per-connection settings of a cluster connection (those of
/// [`cluster_builder`]: a `ClusterConfig` replaces the builder's).
fn cluster_config(store_timeout: Duration) -> ClusterConfig {
    let timeout = store_timeout.saturating_mul(2);
    ClusterConfig::new()
        .set_connection_timeout(timeout)
        .set_response_timeout(timeout)
}

/// A connection to `endpoint` (RESP2, no pushes), made lazily: nothing is
/// sent until the first command, and it reconnects by itself after a lost
/// connection.
///
/// # Errors
///
/// The URL's error, if redis-rs cannot open it (under Sentinel: also no
/// Sentinel URL; for a cluster: also no URL at all, a Unix socket, or
/// nodes that disagree on their password, protocol or TLS).
pub(super) fn open(endpoint: Endpoint<'_>, store_timeout: Duration) -> Result<Conn, RedisError> {
    match endpoint {
        Endpoint::Single(url) => {
            let client = ::redis::Client::open(url.into_connection_info()?)?;
            let con =
                ConnectionManager::new_lazy_with_config(client, manager_config(store_timeout))?;
            Ok(Conn::Single(con))
        }
        Endpoint::Sentinel { sentinels, master } => Ok(Conn::Sentinel(SentinelLink::new(
            sentinels,
            master,
            ProtocolVersion::RESP2,
            manager_config(store_timeout),
        )?)),
        Endpoint::Cluster(nodes) => {
            let client = cluster_builder(nodes, store_timeout).build()?;
            Ok(Conn::Cluster(
                client.get_pending_async_connection_with_config(cluster_config(store_timeout)),
            ))
        }
    }
}

/// The connections of a store that listens for notifications: commands
/// go on `commands`, subscriptions on `subscriptions`, and `blocking`
/// makes a blocking connection for shutdown.
pub(super) struct Connections {
    pub(super) commands: Conn,
    pub(super) subscriptions: Conn,
    pub(super) blocking: Blocking,
}

/// Like [`open`], with the pushes of a subscription connection (the
/// replies to [`Conn::subscribe`], the messages, and a lost connection)
/// sent to `push`, and the subscriptions made again after a reconnection.
///
/// On one Redis the commands and the subscriptions share one RESP3
/// connection, as they always have; under Sentinel they share the
/// current primary's (a new primary's connection subscribes again, see
/// [`Conn::generation`]). In a cluster they do not: a node
/// that gives a slot away sends its shard channels' subscribers an
/// unsolicited `sunsubscribe` push, and redis-rs (1.8) takes that push
/// for the reply to the oldest command in flight on the connection, and
/// every later reply for the command before it (the same trap as
/// valkey-io/valkey#1066, fixed in rueidis#691 and
/// StackExchange.Redis#2969). On a connection that runs the scripts, a
/// reply meant for another acquire could then read as a grant. So in a
/// cluster the scripts run on a RESP2 connection that never subscribes,
/// and the shard channels live on a second cluster connection that runs
/// nothing but subscriptions (and redis-rs's own slot lookups).
///
/// # Errors
///
/// As [`open`].
pub(super) fn open_with_pushes(
    endpoint: Endpoint<'_>,
    store_timeout: Duration,
    push: impl AsyncPushSender,
) -> Result<Connections, RedisError> {
    match endpoint {
        Endpoint::Single(url) => {
            let info = url.into_connection_info()?;
            let settings = info
                .redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3);
            let client = ::redis::Client::open(info.set_redis_settings(settings))?;
            let manager = manager_config(store_timeout)
                .set_push_sender(push)
                .set_automatic_resubscription();
            let con = Conn::Single(ConnectionManager::new_lazy_with_config(
                client.clone(),
                manager,
            )?);
            Ok(Connections {
                commands: con.clone(),
                subscriptions: con,
                blocking: Blocking::Single(client),
            })
        }
        Endpoint::Sentinel { sentinels, master } => {
            let manager = manager_config(store_timeout)
                .set_push_sender(push)
                .set_automatic_resubscription();
            let link = SentinelLink::new(sentinels, master, ProtocolVersion::RESP3, manager)?;
            Ok(Connections {
                commands: Conn::Sentinel(Arc::clone(&link)),
                subscriptions: Conn::Sentinel(Arc::clone(&link)),
                blocking: Blocking::Sentinel(link),
            })
        }
        Endpoint::Cluster(nodes) => {
            let commands = cluster_builder(nodes, store_timeout).build()?;
            // redis-rs's cluster client tracks the subscriptions itself and
            // makes them again on the node that serves their slot.
            let subscriptions = cluster_builder(nodes, store_timeout)
                .use_protocol(ProtocolVersion::RESP3)
                .push_sender(push)
                .build()?;
            let config = || cluster_config(store_timeout);
            Ok(Connections {
                commands: Conn::Cluster(
                    commands.get_pending_async_connection_with_config(config()),
                ),
                subscriptions: Conn::Cluster(
                    subscriptions.get_pending_async_connection_with_config(config()),
                ),
                blocking: Blocking::Cluster(Box::new(commands)),
            })
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
/// ([`Conn::suspect`]), makes the link *suspect*: the next command first
/// asks the Sentinels again (one at a time; the others wait for its answer
/// rather than use a connection that may point at a demoted or restarted
/// server), and redis-rs checks
/// that the server they name calls itself a primary. A new address gets a
/// new connection manager (and a new [`Conn::generation`]); the same one
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
    /// A link to the primary named `master` by the Sentinels at
    /// `sentinels`, speaking `protocol`, with `manager`'s settings for each
    /// primary's connection; made lazily (the Sentinels are first asked
    /// by the first command).
    fn new(
        sentinels: &[&str],
        master: &str,
        protocol: ProtocolVersion,
        manager: ConnectionManagerConfig,
    ) -> Result<Arc<Self>, RedisError> {
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(RedisConnectionInfo::default().set_protocol(protocol));
        let client = SentinelClient::build(
            sentinels.to_vec(),
            master.to_string(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Arc::new(SentinelLink {
            sentinel: tokio::sync::Mutex::new(client),
            current: Mutex::new(None),
            suspect: AtomicBool::new(true),
            generation: AtomicU64::new(0),
            manager,
        }))
    }

    /// A client for the current primary, for a blocking connection
    /// (`None` before Sentinel was first asked).
    fn client(&self) -> Option<Client> {
        match self.current.lock() {
            Ok(current) => current.as_ref().map(|(_, c)| c.clone()),
            Err(_) => None,
        }
    }

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
