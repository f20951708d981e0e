//! The global rate limiter's counters, and what it tells `metrics` and
//! `tracing` (each behind its feature).
//!
//! Metric names (label `system`, and `source` or `cause` where given):
//!
//! | name | kind | what |
//! |---|---|---|
//! | `global_rate_admitted_total` | counter | requests admitted; `source` = `global` (Redis) or `local` (the fallback) |
//! | `global_rate_refused_total` | counter | refusals; `cause` = `limited`, `timed_out`, `store_unavailable` |
//! | `global_rate_redis_calls_total` | counter | scripts sent to Redis |
//! | `global_rate_store_errors_total` | counter | Redis commands that failed or timed out |
//! | `global_rate_leased_cells_total` | counter | leased mode: cells Redis granted this process |
//! | `global_rate_spent_cells_total` | counter | leased mode: cells spent from the pocket (told at each refresh) |
//! | `global_rate_wasted_cells_total` | counter | leased mode: cells that aged out of the pocket unspent, or were left at close |
//!
//! Tracing: a DEBUG event per refusal (target `watertight::redis::rate`,
//! with `retry_after_us`; never the client key, which may be personal
//! data), a WARN event per Redis command that failed or timed out.

use super::error::GlobalRateError;
use crate::redis::StoreFailure;
use crate::sync::{AtomicU64, Ordering};

/// What a [`GlobalRateLimiter`](super::GlobalRateLimiter) has done since it
/// was made (this process's view).
///
/// # Examples
///
/// ```
/// # use watertight::rate::Quota;
/// # use watertight::redis::{GlobalRateConfig, GlobalRateLimiter};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
/// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
/// let m = api.metrics();
/// assert_eq!((m.admitted, m.refused(), m.redis_calls), (0, 0, 0));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GlobalRateMetrics {
    /// Requests admitted by Redis.
    pub admitted: u64,
    /// Cells those requests took.
    pub admitted_cells: u64,
    /// Requests admitted by the local fallback while Redis was unreachable.
    pub fallback_admitted: u64,
    /// Admissions (of either kind) that slept for a `retry_after` first.
    pub waited: u64,
    /// Refused: the cells do not conform (by Redis or the fallback).
    pub refused_limited: u64,
    /// Refused: a waiting form's deadline came while Redis was asked.
    pub refused_timed_out: u64,
    /// Refused: Redis unreachable, `FailClosed`.
    pub refused_store_unavailable: u64,
    /// Scripts sent to Redis.
    pub redis_calls: u64,
    /// Redis commands that returned an error.
    pub store_errors: u64,
    /// Redis commands that did not answer within the store timeout.
    pub store_timeouts: u64,
    /// Leased mode: cells Redis granted this process (scripts that leased
    /// them are in `redis_calls`).
    pub leased_cells: u64,
    /// Leased mode: cells spent from the pocket, as of the last refresh
    /// (the hot path counts nothing; exact after
    /// [`close`](super::GlobalRateLimiter::close)).
    pub spent_cells: u64,
    /// Leased mode: cells that aged out of the pocket unspent, or were in
    /// it at close and could not be given back.
    pub wasted_cells: u64,
    /// Leased mode: cells given back to Redis at close.
    pub returned_cells: u64,
}

impl GlobalRateMetrics {
    /// All refusals together.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalRateMetrics;
    /// assert_eq!(GlobalRateMetrics::default().refused(), 0);
    /// ```
    pub fn refused(&self) -> u64 {
        self.refused_limited + self.refused_timed_out + self.refused_store_unavailable
    }
}

#[derive(Default)]
pub(super) struct Stats {
    admitted: AtomicU64,
    admitted_cells: AtomicU64,
    fallback_admitted: AtomicU64,
    waited: AtomicU64,
    refused_limited: AtomicU64,
    refused_timed_out: AtomicU64,
    refused_store: AtomicU64,
    redis_calls: AtomicU64,
    store_errors: AtomicU64,
    store_timeouts: AtomicU64,
    leased_cells: AtomicU64,
    spent_cells: AtomicU64,
    wasted_cells: AtomicU64,
    returned_cells: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub(super) fn snapshot(&self) -> GlobalRateMetrics {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        GlobalRateMetrics {
            admitted: r(&self.admitted),
            admitted_cells: r(&self.admitted_cells),
            fallback_admitted: r(&self.fallback_admitted),
            waited: r(&self.waited),
            refused_limited: r(&self.refused_limited),
            refused_timed_out: r(&self.refused_timed_out),
            refused_store_unavailable: r(&self.refused_store),
            redis_calls: r(&self.redis_calls),
            store_errors: r(&self.store_errors),
            store_timeouts: r(&self.store_timeouts),
            leased_cells: r(&self.leased_cells),
            spent_cells: r(&self.spent_cells),
            wasted_cells: r(&self.wasted_cells),
            returned_cells: r(&self.returned_cells),
        }
    }

    /// An admission of `n` cells, by Redis (`global`) or the fallback.
    pub(super) fn admitted(&self, system: &'static str, n: u32, global: bool, waited: bool) {
        if global {
            bump(&self.admitted, 1);
            bump(&self.admitted_cells, u64::from(n));
        } else {
            bump(&self.fallback_admitted, 1);
        }
        if waited {
            bump(&self.waited, 1);
        }
        #[cfg(feature = "metrics")]
        ::metrics::counter!(
            "global_rate_admitted_total",
            "system" => system,
            "source" => if global { "global" } else { "local" }
        )
        .increment(1);
        let _ = system;
    }

    /// A leased admission that waited (the hot path counts nothing else).
    pub(super) fn admitted_waited(&self) {
        bump(&self.waited, 1);
    }

    /// Counts `refusal` (and reports it) by its cause, and hands it back.
    /// `ExceedsBurst` is a bad request, not a refusal: not counted.
    pub(super) fn refused(
        &self,
        system: &'static str,
        refusal: GlobalRateError,
    ) -> GlobalRateError {
        let counter = match refusal {
            GlobalRateError::Limited { .. } => &self.refused_limited,
            GlobalRateError::TimedOut => &self.refused_timed_out,
            GlobalRateError::StoreUnavailable(_) => &self.refused_store,
            GlobalRateError::ExceedsBurst { .. } | GlobalRateError::Closed => return refusal,
        };
        bump(counter, 1);
        let cause = refusal.cause();
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_rate_refused_total", "system" => system, "cause" => cause)
            .increment(1);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "watertight::redis::rate",
            system,
            cause,
            retry_after_us = refusal.retry_after().map(|d| d.as_micros() as u64),
            "global rate limiter refused a request"
        );
        let _ = (system, cause);
        refusal
    }

    /// The keeper's account of the pocket since its last report: cells
    /// leased, spent, wasted and given back.
    pub(super) fn pocket(
        &self,
        system: &'static str,
        leased: u64,
        spent: u64,
        wasted: u64,
        returned: u64,
    ) {
        bump(&self.leased_cells, leased);
        bump(&self.spent_cells, spent);
        bump(&self.wasted_cells, wasted);
        bump(&self.returned_cells, returned);
        #[cfg(feature = "metrics")]
        {
            ::metrics::counter!("global_rate_leased_cells_total", "system" => system)
                .increment(leased);
            ::metrics::counter!("global_rate_spent_cells_total", "system" => system)
                .increment(spent);
            ::metrics::counter!("global_rate_wasted_cells_total", "system" => system)
                .increment(wasted);
        }
        let _ = system;
    }

    pub(super) fn redis_call(&self, system: &'static str) {
        bump(&self.redis_calls, 1);
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_rate_redis_calls_total", "system" => system).increment(1);
        let _ = system;
    }

    pub(super) fn store_failed(&self, system: &'static str, failure: &StoreFailure) {
        match failure {
            StoreFailure::TimedOut => bump(&self.store_timeouts, 1),
            StoreFailure::BreakerOpen(_) => return,
            _ => bump(&self.store_errors, 1),
        }
        #[cfg(feature = "metrics")]
        ::metrics::counter!("global_rate_store_errors_total", "system" => system).increment(1);
        #[cfg(feature = "tracing")]
        tracing::warn!(
            target: "watertight::redis::rate",
            system,
            error = %failure,
            "global rate limiter: Redis command failed"
        );
        let _ = system;
    }
}
