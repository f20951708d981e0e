//! The connection to Redis that the global limits share the shape of:
//! redis-rs's connection manager with this crate's timeouts, and one
//! command run under the store timeout.
//!
//! [`GlobalRateLimiter`](super::GlobalRateLimiter) uses both as they are;
//! the global bulkhead's store (`store.rs`) uses them too, with RESP3
//! pushes (its release notifications) on top.

use core::future::Future;
use core::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{IntoConnectionInfo, RedisError};

use event_listener::Event;

use super::error::StoreFailure;
use super::runtime::Runtime;
use crate::clock::Instant;

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
