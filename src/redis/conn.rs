//! The connection to Redis that the global limits share: one Redis
//! through redis-rs's connection manager, or a Redis Cluster through its
//! cluster client, with this crate's timeouts; and one command run under
//! the store timeout.
//!
//! [`GlobalRateLimiter`](super::GlobalRateLimiter) uses [`open`] (no
//! pushes); the global bulkhead's store (`store.rs`) uses
//! [`open_with_pushes`]: a connection for its scripts, one for its
//! channel's subscription (the same connection on one Redis), and a
//! blocking client for shutdown ([`Blocking`]).
//!
//! **The abstraction.** Everything above this file speaks to a [`Conn`]
//! (an `aio::ConnectionLike`, so scripts run on it unchanged) and names
//! where Redis is with an [`Endpoint`]. What differs between one Redis and
//! a cluster lives here: how the connections are made, which subscribe
//! command a channel takes ([`Conn::subscribe`]: `SUBSCRIBE`, or
//! `SSUBSCRIBE` in a cluster, where the channel lives in its hash tag's
//! slot), which publish command the scripts use ([`Conn::sharded`], see
//! `store.rs`), and which failures only say that a slot is moving
//! ([`slot_moving`]). Another kind of endpoint (Sentinel) is one more
//! variant of each.

use std::{boxed::Box, string::String, vec::Vec};

use core::future::Future;
use core::time::Duration;

use ::redis::aio::{AsyncPushSender, ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Cmd, IntoConnectionInfo, Pipeline, ProtocolVersion, RedisError, RedisFuture, Value};

use event_listener::Event;

use super::error::StoreFailure;
use super::runtime::Runtime;
use crate::clock::Instant;

/// Where the Redis of a global limit is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Endpoint<'a> {
    /// One Redis (its primary), by URL.
    Single(&'a str),
    /// A Redis Cluster, by the URLs of some of its nodes (the client
    /// learns the rest from them).
    Cluster(&'a [String]),
}

/// An async connection to a global limit's Redis. Both kinds are made
/// lazily (nothing is sent until the first command) and reconnect by
/// themselves; a cluster connection also follows the slots as they move
/// (`MOVED`, `ASK`), retrying a few times within the store timeout.
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Whether the scripts must publish with `SPUBLISH` (sharded pub/sub,
    /// in a cluster) rather than `PUBLISH`.
    pub(super) fn sharded(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Subscribes to `channel` (pushes go to the handler given to
    /// [`open`]): `SUBSCRIBE` on one Redis, `SSUBSCRIBE` in a cluster (the
    /// node that serves the channel's slot; redis-rs moves the
    /// subscription when the slot moves, and a node that gives the slot
    /// away unsubscribes us, which the push handler sees).
    pub(super) async fn subscribe(&mut self, channel: &str) -> Result<(), RedisError> {
        match self {
            Conn::Single(c) => c.subscribe(channel).await,
            Conn::Cluster(c) => c.ssubscribe(channel).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// What makes a blocking connection to the same Redis: the last resort
/// once a keeper's runtime has shut down (see `store.rs`).
#[derive(Clone)]
pub(super) enum Blocking {
    Single(::redis::Client),
    /// Boxed: a cluster client is twice a client's size, and rare.
    Cluster(Box<ClusterClient>),
}

impl Blocking {
    /// A blocking connection, each read and write bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// Redis's, if the connection cannot be made in time.
    pub(super) fn connect(
        &self,
        timeout: Duration,
    ) -> Result<Box<dyn ::redis::ConnectionLike + Send>, RedisError> {
        match self {
            Blocking::Single(client) => {
                let c = client.get_connection_with_timeout(timeout)?;
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))?;
                Ok(Box::new(c))
            }
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
/// The URL's error, if redis-rs cannot open it (for a cluster: also no
/// URL at all, a Unix socket, or nodes that disagree on their password,
/// protocol or TLS).
pub(super) fn open(endpoint: Endpoint<'_>, store_timeout: Duration) -> Result<Conn, RedisError> {
    match endpoint {
        Endpoint::Single(url) => {
            let client = ::redis::Client::open(url.into_connection_info()?)?;
            let con =
                ConnectionManager::new_lazy_with_config(client, manager_config(store_timeout))?;
            Ok(Conn::Single(con))
        }
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
/// connection, as they always have. In a cluster they do not: a node
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
