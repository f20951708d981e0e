//! The global bulkhead's counters, and what it tells `metrics` and
//! `tracing` (each behind its feature).
//!
//! Metric names (label `system`, and `cause` or `source` where given):
//!
//! | name | kind | what |
//! |---|---|---|
//! | `global_bulkhead_in_flight` | gauge | holders fleet-wide, as Redis last answered this process |
//! | `global_bulkhead_acquired_total` | counter | permits granted; `source` = `global` or `local_share` |
//! | `global_bulkhead_rejected_total` | counter | refusals; `cause` = `full`, `timed_out`, `local_cap`, `store_unavailable`, `closed` |
//! | `global_bulkhead_store_errors_total` | counter | Redis commands that failed or timed out |
//! | `global_bulkhead_lease_renewals_total` | counter | leases renewed (one per lease per renewal) |
//! | `global_bulkhead_leases_lost_total` | counter | leases lost (per permit; in leased mode, per share lease lost with permits under it) |
//! | `global_bulkhead_redis_calls_total` | counter | commands sent to Redis (scripts, subscriptions) |
//! | `global_bulkhead_unacknowledged_total` | counter | acknowledged grants: writes (grants, renewals, refreshes) fewer replicas had in time than asked for |
//! | `global_bulkhead_share` | gauge | leased mode: the slots this process may use now |
//! | `global_bulkhead_demand` | gauge | leased mode: the demand it reported last |

use super::error::GlobalError;
use crate::sync::{AtomicU64, Ordering};

/// What a [`GlobalBulkhead`](super::GlobalBulkhead) has done since it was
/// made (this process's view).
///
/// # Examples
///
/// ```
/// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "payments", GlobalConfig::builder(2).build().unwrap()).unwrap();
/// let m = g.metrics();
/// assert_eq!((m.granted, m.rejected(), m.held), (0, 0, 0));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GlobalMetrics {
    /// Global permits this process holds now.
    pub held: usize,
    /// Holders fleet-wide, as Redis last answered this process.
    pub in_flight_seen: u64,
    /// Global permits granted.
    pub granted: u64,
    /// Permits taken from the local share while Redis was unreachable.
    pub fallback_granted: u64,
    /// Refused: the limit (or the share) was reached, and no wait.
    pub rejected_full: u64,
    /// Refused: the wait reached its deadline.
    pub rejected_timed_out: u64,
    /// Refused by the local front, without a Redis call.
    pub rejected_local_cap: u64,
    /// Refused: Redis unreachable, `FailClosed`.
    pub rejected_store_unavailable: u64,
    /// Refused: the handle was closed.
    pub rejected_closed: u64,
    /// Redis commands that returned an error.
    pub store_errors: u64,
    /// Redis commands that did not answer within the store timeout.
    pub store_timeouts: u64,
    /// Leases renewed (one per lease per renewal call).
    pub lease_renewals: u64,
    /// Leases lost.
    pub leases_lost: u64,
    /// Members released in Redis (by drop or `release`).
    pub released: u64,
    /// Commands sent to Redis (scripts and subscriptions), from this
    /// process: in leased mode, about one per refresh.
    pub redis_calls: u64,
    /// Leased mode: the slots this process may use now (its share), 0
    /// without a live lease.
    pub share: u64,
    /// Leased mode: what Redis counts as this process's share (more than
    /// `share` while a shrink waits for calls to end).
    pub share_recorded: u64,
    /// Leased mode: the demand the last refresh reported (slots in use,
    /// waited for, and refused since the refresh before).
    pub demand_reported: u64,
    /// Leased mode: refreshes that reached Redis.
    pub refreshes: u64,
    /// Acknowledged grants ([`GlobalConfigBuilder::acknowledged`](super::GlobalConfigBuilder::acknowledged)):
    /// writes that fewer replicas had in time than asked for. A grant
    /// among them was given back (and refused, or served from the
    /// fallback's local share); a renewal or refresh among them failed.
    pub unacknowledged: u64,
}

impl GlobalMetrics {
    /// All refusals together.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalMetrics;
    /// assert_eq!(GlobalMetrics::default().rejected(), 0);
    /// ```
    pub fn rejected(&self) -> u64 {
        self.rejected_full
            + self.rejected_timed_out
            + self.rejected_local_cap
            + self.rejected_store_unavailable
            + self.rejected_closed
    }
}

#[derive(Default)]
pub(super) struct Stats {
    in_flight_seen: AtomicU64,
    granted: AtomicU64,
    fallback_granted: AtomicU64,
    rejected_full: AtomicU64,
    rejected_timed_out: AtomicU64,
    rejected_local_cap: AtomicU64,
    rejected_store: AtomicU64,
    rejected_closed: AtomicU64,
    store_errors: AtomicU64,
    store_timeouts: AtomicU64,
    renewals: AtomicU64,
    lost: AtomicU64,
    released: AtomicU64,
    redis_calls: AtomicU64,
    unacknowledged: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub(super) fn snapshot(&self, held: usize) -> GlobalMetrics {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        GlobalMetrics {
            held,
            in_flight_seen: r(&self.in_flight_seen),
            granted: r(&self.granted),
            fallback_granted: r(&self.fallback_granted),
            rejected_full: r(&self.rejected_full),
            rejected_timed_out: r(&self.rejected_timed_out),
            rejected_local_cap: r(&self.rejected_local_cap),
            rejected_store_unavailable: r(&self.rejected_store),
            rejected_closed: r(&self.rejected_closed),
            store_errors: r(&self.store_errors),
            store_timeouts: r(&self.store_timeouts),
            lease_renewals: r(&self.renewals),
            leases_lost: r(&self.lost),
            released: r(&self.released),
            redis_calls: r(&self.redis_calls),
            share: 0,
            share_recorded: 0,
            demand_reported: 0,
            refreshes: 0,
            unacknowledged: r(&self.unacknowledged),
        }
    }

    pub(super) fn saw_in_flight(&self, system: &'static str, held: u64) {
        self.in_flight_seen.store(held, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        ::metrics::gauge!("global_bulkhead_in_flight", "system" => system).set(held as f64);
        let _ = system;
    }

    pub(super) fn granted(&self, system: &'static str, held: u64) {
        bump(&self.granted, 1);
        self.saw_in_flight(system, held);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_acquired_total", "system" => system, "source" => "global")
            .increment(1);
    }

    /// `n` permits granted from the leased share since the last count
    /// (told to the metrics at each refresh; the snapshot reads the share).
    pub(super) fn granted_leased(&self, system: &'static str, n: u64) {
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_acquired_total", "system" => system, "source" => "global")
            .increment(n);
        let _ = (system, n);
    }

    /// A refresh gave this process `share` slots (`target` its fair
    /// share), with `fleet_held` held fleet-wide.
    pub(super) fn share(&self, system: &'static str, share: u64, target: u64, fleet_held: u64) {
        self.saw_in_flight(system, fleet_held);
        #[cfg(feature = "metrics")]
        ::metrics::gauge!("global_bulkhead_share", "system" => system).set(share as f64);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            system,
            share,
            target,
            fleet_held,
            "global bulkhead: leased share refreshed"
        );
        let _ = (system, share, target);
    }

    /// A demand reported by a refresh.
    pub(super) fn demand(&self, system: &'static str, demand: u64) {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!("global_bulkhead_demand", "system" => system).set(demand as f64);
        let _ = (system, demand);
    }

    /// A command sent to Redis.
    pub(super) fn redis_call(&self, system: &'static str) {
        bump(&self.redis_calls, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_redis_calls_total", "system" => system).increment(1);
        let _ = system;
    }

    pub(super) fn fallback_grant(&self, system: &'static str) {
        bump(&self.fallback_granted, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_acquired_total", "system" => system, "source" => "local_share")
            .increment(1);
        let _ = system;
    }

    /// Counts `refusal` (and reports it) by its cause, and hands it back.
    pub(super) fn rejected(&self, system: &'static str, refusal: GlobalError) -> GlobalError {
        bump(
            match refusal {
                GlobalError::Full => &self.rejected_full,
                GlobalError::TimedOut => &self.rejected_timed_out,
                GlobalError::LocalCap(_) => &self.rejected_local_cap,
                GlobalError::StoreUnavailable(_) => &self.rejected_store,
                GlobalError::Closed => &self.rejected_closed,
            },
            1,
        );
        let cause = refusal.cause();
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_rejected_total", "system" => system, "cause" => cause)
            .increment(1);
        #[cfg(feature = "tracing")]
        tracing::debug!(system, cause, "global bulkhead refused a call");
        let _ = (system, cause);
        refusal
    }

    pub(super) fn store_error(&self, system: &'static str, e: &::redis::RedisError) {
        bump(&self.store_errors, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_store_errors_total", "system" => system).increment(1);
        #[cfg(feature = "tracing")]
        tracing::warn!(system, error = %e, "global bulkhead: Redis command failed");
        let _ = (system, e);
    }

    pub(super) fn store_timeout(&self, system: &'static str) {
        bump(&self.store_timeouts, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_store_errors_total", "system" => system).increment(1);
        #[cfg(feature = "tracing")]
        tracing::warn!(system, "global bulkhead: Redis did not answer in time");
        let _ = system;
    }

    pub(super) fn renewed(&self, system: &'static str, n: usize) {
        bump(&self.renewals, n as u64);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_lease_renewals_total", "system" => system)
            .increment(n as u64);
        let _ = system;
    }

    pub(super) fn lost(&self, system: &'static str, member: &str) {
        bump(&self.lost, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_leases_lost_total", "system" => system).increment(1);
        #[cfg(feature = "tracing")]
        tracing::warn!(
            system,
            member,
            "global bulkhead: a lease was lost; this call may run over the limit"
        );
        let _ = (system, member);
    }

    /// A write that fewer replicas had in time than `wanted`.
    pub(super) fn unacknowledged(&self, system: &'static str, acked: u32, wanted: u32) {
        bump(&self.unacknowledged, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_bulkhead_unacknowledged_total", "system" => system)
            .increment(1);
        #[cfg(feature = "tracing")]
        tracing::warn!(
            system,
            acked,
            wanted,
            "global bulkhead: a write was not acknowledged by enough replicas in time"
        );
        let _ = (system, acked, wanted);
    }

    pub(super) fn released(&self, n: usize) {
        bump(&self.released, n as u64);
    }
}
