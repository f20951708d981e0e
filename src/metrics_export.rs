//! Export bulkhead, breaker, rate limit and policy numbers through the [`metrics`]
//! facade (feature `metrics`), under plain names (`bulkhead_rejected_total`,
//! `circuit_breaker_state`, …) labelled with the system's name, so one
//! dashboard serves every system.
//!
//! An exporter is made once per system, from the bulkhead, breaker or
//! policy it reports on: it registers its gauge and counter handles at
//! construction, with the system's name as the `system` label, and never
//! looks a metric up again. Calls pay nothing: the primitives keep their
//! own atomic counters whatever happens, and
//! [`update`](PolicyExporter::update) copies a snapshot of them into the
//! handles (counters with `absolute`, so they never go back).
//!
//! # When to call `update`
//!
//! Right before the numbers are read: in the `/metrics` scrape handler
//! before rendering (the usual way with a pull exporter such as Prometheus),
//! or from a periodic task at the push interval for a push exporter. Between
//! updates the exported values are those of the last update. A
//! [`StateListener`] keeps `circuit_breaker_state` current between updates
//! by setting it on every transition.
//!
//! Handles bind to the recorder that is current when the exporter is made
//! (the global one, or the one of [`metrics::with_local_recorder`]):
//! install the recorder first.
//!
//! # Metrics
//!
//! | name | type | labels | value |
//! |------|------|--------|-------|
//! | `bulkhead_active_calls` | gauge | `system` | permits held now |
//! | `bulkhead_capacity` | gauge | `system` | the current capacity |
//! | `bulkhead_waiting_calls` | gauge | `system` | tasks waiting for a slot now |
//! | `bulkhead_accepted_total` | counter | `system` | slots granted |
//! | `bulkhead_queued_total` | counter | `system` | acquires that found no slot free and queued |
//! | `bulkhead_rejected_total` | counter | `system`, `reason` | refusals: `reason` is `full`, `timed_out`, `closed` or `queue_full` |
//! | `bulkhead_class_active_calls` | gauge | `system`, `class` | slots of the class's room held now, its own calls and borrowers' ([`PartitionExporter`], for a [`PartitionedBulkhead`]) |
//! | `bulkhead_class_capacity` | gauge | `system`, `class` | the class's guaranteed share, its room's capacity |
//! | `bulkhead_class_waiting_calls` | gauge | `system`, `class` | calls of the class waiting in its room now |
//! | `bulkhead_class_borrowed_total` | counter | `system`, `class` | calls of the class admitted into another class's room |
//! | `bulkhead_class_rejected_total` | counter | `system`, `class`, `reason` | refusals of the class's calls: `reason` is `full`, `timed_out`, `closed` or `queue_full` |
//! | `circuit_breaker_state` | gauge | `system` | 0 closed, 1 open, 2 half_open, 3 forced_open, 4 disabled ([`state_code`]) |
//! | `circuit_breaker_calls` | gauge | `system`, `outcome` | outcomes in the window now: `outcome` is `success` or `failure` |
//! | `circuit_breaker_slow_calls` | gauge | `system` | slow calls in the window now (successes or failures) |
//! | `circuit_breaker_failure_rate` | gauge | `system` | failures in the window, percent; NaN below `minimum_calls` |
//! | `circuit_breaker_slow_call_rate` | gauge | `system` | slow calls in the window, percent; NaN below `minimum_calls` |
//! | `circuit_breaker_rejected_total` | counter | `system` | calls the breaker refused |
//! | `retries_total` | counter | `system`, `reason` | retries of idempotent calls ([`PolicyExporter`] only): `reason` is `failure` or `timeout` |
//! | `retry_budget_exhausted_total` | counter | `system` | failed calls the retry budget did not let retry ([`PolicyExporter`] only) |
//! | `rate_limit_admitted_total` | counter | `system` | requests the rate limiter admitted, waits served included ([`RateLimitExporter`], and [`PolicyExporter`] for a policy with a rate) |
//! | `rate_limit_refused_total` | counter | `system` | requests it refused: no cell by then |
//! | `rate_limit_waiting` | gauge | `system` | waits holding a reservation now |
//! | `throttle_admitted_total` | counter | `system` | requests the adaptive throttle let through ([`ThrottleExporter`], and [`PolicyExporter`] for a policy with a throttle) |
//! | `throttle_refused_total` | counter | `system` | requests it refused locally |
//! | `throttle_window_requests` | gauge | `system` | requests counted in its window now (admitted or refused) |
//! | `throttle_window_accepts` | gauge | `system` | accepts credited in its window now |
//! | `throttle_refusal_probability` | gauge | `system` | the probability a request would be refused now, 0 to 1 |
//! | `bulkhead_limit` | gauge | `system` | an adaptive bulkhead's limit now ([`LimitExporter`] only) |
//! | `bulkhead_limit_window_calls` | gauge | `system`, `signal` | the calls of the last window the algorithm read: `signal` is `success`, `failure`, `dropped` or `timeout` |
//! | `bulkhead_limit_window_rtt_seconds` | gauge | `system` | the average round trip of that window's successes; NaN without any |
//! | `bulkhead_limit_window_max_in_flight` | gauge | `system` | the most calls in flight in that window |
//! | `bulkhead_limit_changes_total` | counter | `system` | windows that changed the limit |
//! | `hedges_total` | counter | `system`, `outcome` | hedged requests ([`HedgeExporter`], for a [`Hedge`](crate::hedge::Hedge)): `outcome` is `won`, `lost`, `not_sent_budget`, `not_sent_bulkhead`, `not_sent_breaker` or `not_sent_limited` |
//! | `hedge_budget_tokens` | gauge | `system` | tokens left in the hedge budget |
//! | `hedge_latency_seconds` | gauge | `system`, `quantile` | the hedge histogram's percentiles, `quantile` `0.5`, `0.95`, `0.99`, `0.999`; NaN without samples |
//! | `chaos_injected_total` | counter | `system`, `fault` | faults a fault injector injected (`ChaosExporter`, feature `chaos`): `fault` is `error`, `outcome`, `latency` or `hang` |
//! | `chaos_passed_total` | counter | `system` | calls it let through untouched while enabled |
//! | `chaos_enabled` | gauge | `system` | 1 while it is enabled, 0 while not |
//! | `stale_served_total` | counter | `system` | stale answers a [`StaleCache`](crate::fallback::StaleCache) served ([`StaleCacheExporter`]) |
//! | `stale_misses_total` | counter | `system`, `reason` | lookups with nothing to serve: `reason` is `absent` or `too_old` |
//! | `stale_recorded_total` | counter | `system` | good answers recorded |
//! | `stale_evictions_total` | counter | `system` | answers forgotten to make room for another key's |
//! | `stale_entries` | gauge | `system` | answers held now |
//!
//! The breaker's call numbers are **gauges of its window** (the last
//! `window_size` outcomes), the very numbers it trips on — not totals: a
//! breaker keeps no lifetime count of calls, and a window that slides or is
//! emptied by a transition goes down. Do not apply `rate()` to them; to
//! count calls over time, count them where you make them. `circuit_breaker_state`
//! is the breaker's [`state`](crate::CircuitBreaker::state): an open breaker
//! whose wait is over reads as half-open (the next call would be a probe).
//!
//! Counters wrap at `usize::MAX` with the primitives' own counters (on
//! 32-bit targets only after four billion refusals).
//!
//! # Example
//!
//! ```
//! use metrics_exporter_prometheus::PrometheusBuilder;
//! use watertight::clock::ManualClock;
//! use watertight::metrics::PolicyExporter;
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! let recorder = PrometheusBuilder::new().build_recorder();
//! let prometheus = recorder.handle();
//! let clock = ManualClock::new();
//! let config = PolicyConfig::builder(1).max_wait(core::time::Duration::ZERO).build().unwrap();
//! let payments: Policy<_> = Policy::new("payments", config, &clock).unwrap();
//!
//! // Once, at start-up (here on a local recorder; usually the global one).
//! let exporter = metrics::with_local_recorder(&recorder, || {
//!     watertight::metrics::describe();
//!     PolicyExporter::new(&payments)
//! });
//!
//! let _held = payments.bulkhead().try_acquire().unwrap();
//! let _ = payments.bulkhead().try_acquire(); // refused: full
//!
//! // In the scrape handler:
//! exporter.update(&payments);
//! let text = prometheus.render();
//! assert!(text.contains(r#"bulkhead_rejected_total{system="payments",reason="full"} 1"#));
//! assert!(text.contains(r#"bulkhead_active_calls{system="payments"} 1"#));
//! assert!(text.contains(r#"circuit_breaker_state{system="payments"} 0"#));
//! ```

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

use crate::breaker::{
    BreakerMetrics, CircuitBreaker, OnTransition, State, Transition, WindowStorage,
};
use crate::bulkhead::{Bulkhead, BulkheadMetrics};
use crate::clock::Clock;
use crate::limit::{AdaptiveBulkhead, AdaptiveLimit, LimitAlgorithm};
use crate::partition::PartitionedBulkhead;
use crate::policy::Policy;
use crate::rate::{RateLimiter, RateMetrics};
use crate::throttle::{AdaptiveThrottle, ThrottleMetrics};

#[path = "metrics_export/hedge.rs"]
mod hedge;
pub use hedge::{HedgeExporter, HEDGES_TOTAL, HEDGE_BUDGET_TOKENS, HEDGE_LATENCY_SECONDS};
#[path = "metrics_export/stale.rs"]
mod stale;
pub use stale::{
    StaleCacheExporter, STALE_ENTRIES, STALE_EVICTIONS_TOTAL, STALE_MISSES_TOTAL,
    STALE_RECORDED_TOTAL, STALE_SERVED_TOTAL,
};

#[cfg(feature = "chaos")]
#[path = "metrics_export/chaos.rs"]
mod chaos;
#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub use chaos::{ChaosExporter, CHAOS_ENABLED, CHAOS_INJECTED_TOTAL, CHAOS_PASSED_TOTAL};

/// `bulkhead_active_calls{system}`: permits held now (gauge).
pub const BULKHEAD_ACTIVE_CALLS: &str = "bulkhead_active_calls";
/// `bulkhead_capacity{system}`: the current capacity (gauge).
pub const BULKHEAD_CAPACITY: &str = "bulkhead_capacity";
/// `bulkhead_waiting_calls{system}`: tasks waiting for a slot now (gauge).
pub const BULKHEAD_WAITING_CALLS: &str = "bulkhead_waiting_calls";
/// `bulkhead_accepted_total{system}`: slots granted (counter).
pub const BULKHEAD_ACCEPTED_TOTAL: &str = "bulkhead_accepted_total";
/// `bulkhead_queued_total{system}`: acquires that found no slot free and
/// queued, whatever came of the wait (counter). Beside
/// `bulkhead_accepted_total`, how often callers had to wait.
pub const BULKHEAD_QUEUED_TOTAL: &str = "bulkhead_queued_total";
/// `bulkhead_rejected_total{system,reason}`: refusals by reason, `full`,
/// `timed_out`, `closed` or `queue_full` (counter).
pub const BULKHEAD_REJECTED_TOTAL: &str = "bulkhead_rejected_total";
/// `bulkhead_class_active_calls{system,class}`: slots of a partitioned
/// bulkhead's class's room held now, by its own calls and by borrowers
/// (gauge).
pub const BULKHEAD_CLASS_ACTIVE_CALLS: &str = "bulkhead_class_active_calls";
/// `bulkhead_class_capacity{system,class}`: a class's guaranteed share, its
/// room's capacity (gauge).
pub const BULKHEAD_CLASS_CAPACITY: &str = "bulkhead_class_capacity";
/// `bulkhead_class_waiting_calls{system,class}`: calls of a class waiting in
/// its room now (gauge).
pub const BULKHEAD_CLASS_WAITING_CALLS: &str = "bulkhead_class_waiting_calls";
/// `bulkhead_class_borrowed_total{system,class}`: calls of a class admitted
/// into another class's room (counter).
pub const BULKHEAD_CLASS_BORROWED_TOTAL: &str = "bulkhead_class_borrowed_total";
/// `bulkhead_class_rejected_total{system,class,reason}`: refusals of a
/// class's calls by reason, `full`, `timed_out`, `closed` or `queue_full`
/// (counter).
pub const BULKHEAD_CLASS_REJECTED_TOTAL: &str = "bulkhead_class_rejected_total";
/// `circuit_breaker_state{system}`: the state as a number, see [`state_code`]
/// (gauge).
pub const CIRCUIT_BREAKER_STATE: &str = "circuit_breaker_state";
/// `circuit_breaker_calls{system,outcome}`: outcomes in the window now,
/// `success` or `failure` (gauge).
pub const CIRCUIT_BREAKER_CALLS: &str = "circuit_breaker_calls";
/// `circuit_breaker_slow_calls{system}`: slow calls in the window now (gauge).
pub const CIRCUIT_BREAKER_SLOW_CALLS: &str = "circuit_breaker_slow_calls";
/// `circuit_breaker_failure_rate{system}`: failures in the window in
/// percent, NaN below `minimum_calls` (gauge).
pub const CIRCUIT_BREAKER_FAILURE_RATE: &str = "circuit_breaker_failure_rate";
/// `circuit_breaker_slow_call_rate{system}`: slow calls in the window in
/// percent, NaN below `minimum_calls` (gauge).
pub const CIRCUIT_BREAKER_SLOW_CALL_RATE: &str = "circuit_breaker_slow_call_rate";
/// `circuit_breaker_rejected_total{system}`: calls the breaker refused
/// (counter).
pub const CIRCUIT_BREAKER_REJECTED_TOTAL: &str = "circuit_breaker_rejected_total";
/// `retries_total{system,reason}`: retries of idempotent calls by the
/// reason, `failure` or `timeout` (counter), from
/// [`Policy::retry_metrics`].
pub const RETRIES_TOTAL: &str = "retries_total";
/// `retry_budget_exhausted_total{system}`: failed calls the retry budget did
/// not let retry (counter), from [`Policy::retry_metrics`].
pub const RETRY_BUDGET_EXHAUSTED_TOTAL: &str = "retry_budget_exhausted_total";
/// `rate_limit_admitted_total{system}`: requests a rate limiter admitted,
/// waits served included (counter), from [`RateMetrics::admitted`].
pub const RATE_LIMIT_ADMITTED_TOTAL: &str = "rate_limit_admitted_total";
/// `rate_limit_refused_total{system}`: requests a rate limiter refused
/// (counter), from [`RateMetrics::refused`].
pub const RATE_LIMIT_REFUSED_TOTAL: &str = "rate_limit_refused_total";
/// `rate_limit_waiting{system}`: waits holding a reservation now (gauge),
/// from [`RateMetrics::waiting`].
pub const RATE_LIMIT_WAITING: &str = "rate_limit_waiting";
/// `throttle_admitted_total{system}`: requests an adaptive throttle let
/// through (counter), from [`ThrottleMetrics::admitted`].
pub const THROTTLE_ADMITTED_TOTAL: &str = "throttle_admitted_total";
/// `throttle_refused_total{system}`: requests it refused locally
/// (counter), from [`ThrottleMetrics::refused`].
pub const THROTTLE_REFUSED_TOTAL: &str = "throttle_refused_total";
/// `throttle_window_requests{system}`: requests in its window now
/// (gauge), from [`ThrottleMetrics::requests`].
pub const THROTTLE_WINDOW_REQUESTS: &str = "throttle_window_requests";
/// `throttle_window_accepts{system}`: accepts in its window now (gauge),
/// from [`ThrottleMetrics::accepts`].
pub const THROTTLE_WINDOW_ACCEPTS: &str = "throttle_window_accepts";
/// `throttle_refusal_probability{system}`: the refusal probability now
/// (gauge, 0 to 1), from [`ThrottleMetrics::probability`].
pub const THROTTLE_REFUSAL_PROBABILITY: &str = "throttle_refusal_probability";
/// Gauge: an adaptive bulkhead's current limit (its capacity).
pub const BULKHEAD_LIMIT: &str = "bulkhead_limit";
/// Gauge: the calls of the last window the limit algorithm read, by `signal`.
pub const BULKHEAD_LIMIT_WINDOW_CALLS: &str = "bulkhead_limit_window_calls";
/// Gauge: the average round-trip time of the last window's successes, in seconds.
pub const BULKHEAD_LIMIT_WINDOW_RTT_SECONDS: &str = "bulkhead_limit_window_rtt_seconds";
/// Gauge: the most calls in flight in the last window.
pub const BULKHEAD_LIMIT_WINDOW_MAX_IN_FLIGHT: &str = "bulkhead_limit_window_max_in_flight";
/// Counter: windows that changed the limit.
pub const BULKHEAD_LIMIT_CHANGES_TOTAL: &str = "bulkhead_limit_changes_total";

/// The value of `circuit_breaker_state` for a state: 0 closed, 1 open,
/// 2 half-open, 3 forced open, 4 disabled. Alert on `> 0` for "not closed".
///
/// # Examples
///
/// ```
/// use watertight::breaker::State;
/// use watertight::metrics::state_code;
///
/// assert_eq!(state_code(State::Closed), 0);
/// assert_eq!(state_code(State::HalfOpen), 2);
/// assert_eq!(state_code(State::Disabled), 4);
/// ```
pub const fn state_code(state: State) -> u8 {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
    }
}

/// Describes every metric of this module (help text and unit) to the current
/// recorder, for the `# HELP` lines of a Prometheus scrape. Call it once at
/// start-up, after installing the recorder; exporters work without it.
///
/// # Examples
///
/// ```
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// metrics::with_local_recorder(&recorder, || {
///     watertight::metrics::describe();
///     metrics::gauge!("bulkhead_active_calls", "system" => "payments").set(0);
/// });
/// assert!(prometheus.render().contains("# HELP bulkhead_active_calls"));
/// ```
pub fn describe() {
    hedge::describe();
    #[cfg(feature = "chaos")]
    chaos::describe();
    stale::describe();
    describe_counter!(
        THROTTLE_ADMITTED_TOTAL,
        Unit::Count,
        "Requests the adaptive throttle let through"
    );
    describe_counter!(
        THROTTLE_REFUSED_TOTAL,
        Unit::Count,
        "Requests the adaptive throttle refused locally"
    );
    describe_gauge!(
        THROTTLE_WINDOW_REQUESTS,
        Unit::Count,
        "Requests in the adaptive throttle's window now"
    );
    describe_gauge!(
        THROTTLE_WINDOW_ACCEPTS,
        Unit::Count,
        "Accepts in the adaptive throttle's window now"
    );
    describe_gauge!(
        THROTTLE_REFUSAL_PROBABILITY,
        "Probability the adaptive throttle refuses a request now (0 to 1)"
    );
    describe_gauge!(BULKHEAD_LIMIT, Unit::Count, "Adaptive bulkhead limit");
    describe_gauge!(
        BULKHEAD_LIMIT_WINDOW_CALLS,
        Unit::Count,
        "Calls of the last window the limit algorithm read, by signal"
    );
    describe_gauge!(
        BULKHEAD_LIMIT_WINDOW_RTT_SECONDS,
        Unit::Seconds,
        "Average round trip of the last window's successes"
    );
    describe_gauge!(
        BULKHEAD_LIMIT_WINDOW_MAX_IN_FLIGHT,
        Unit::Count,
        "Most calls in flight in the last window"
    );
    describe_counter!(
        BULKHEAD_LIMIT_CHANGES_TOTAL,
        Unit::Count,
        "Windows that changed the adaptive bulkhead's limit"
    );
    describe_gauge!(
        BULKHEAD_ACTIVE_CALLS,
        Unit::Count,
        "Calls holding a bulkhead slot now"
    );
    describe_gauge!(BULKHEAD_CAPACITY, Unit::Count, "Bulkhead slots");
    describe_gauge!(
        BULKHEAD_WAITING_CALLS,
        Unit::Count,
        "Calls waiting for a bulkhead slot now"
    );
    describe_counter!(
        BULKHEAD_ACCEPTED_TOTAL,
        Unit::Count,
        "Bulkhead slots granted"
    );
    describe_counter!(
        BULKHEAD_QUEUED_TOTAL,
        Unit::Count,
        "Bulkhead acquires that had to queue for a slot"
    );
    describe_counter!(
        BULKHEAD_REJECTED_TOTAL,
        Unit::Count,
        "Calls refused by the bulkhead, by reason (full, timed_out, closed, queue_full)"
    );
    describe_gauge!(
        BULKHEAD_CLASS_ACTIVE_CALLS,
        Unit::Count,
        "Slots of a partitioned bulkhead class's room held now (its calls and borrowers')"
    );
    describe_gauge!(
        BULKHEAD_CLASS_CAPACITY,
        Unit::Count,
        "Slots guaranteed to a partitioned bulkhead class"
    );
    describe_gauge!(
        BULKHEAD_CLASS_WAITING_CALLS,
        Unit::Count,
        "Calls of a partitioned bulkhead class waiting for a slot now"
    );
    describe_counter!(
        BULKHEAD_CLASS_BORROWED_TOTAL,
        Unit::Count,
        "Calls of a partitioned bulkhead class admitted into another class's room"
    );
    describe_counter!(
        BULKHEAD_CLASS_REJECTED_TOTAL,
        Unit::Count,
        "Calls of a partitioned bulkhead class refused, by reason (full, timed_out, closed, queue_full)"
    );
    describe_gauge!(
        CIRCUIT_BREAKER_STATE,
        "Circuit breaker state: 0 closed, 1 open, 2 half_open, 3 forced_open, 4 disabled"
    );
    describe_gauge!(
        CIRCUIT_BREAKER_CALLS,
        Unit::Count,
        "Call outcomes in the breaker's window now, by outcome (success, failure)"
    );
    describe_gauge!(
        CIRCUIT_BREAKER_SLOW_CALLS,
        Unit::Count,
        "Slow calls in the breaker's window now"
    );
    describe_gauge!(
        CIRCUIT_BREAKER_FAILURE_RATE,
        Unit::Percent,
        "Failures in the breaker's window, percent (NaN below minimum_calls)"
    );
    describe_gauge!(
        CIRCUIT_BREAKER_SLOW_CALL_RATE,
        Unit::Percent,
        "Slow calls in the breaker's window, percent (NaN below minimum_calls)"
    );
    describe_counter!(
        CIRCUIT_BREAKER_REJECTED_TOTAL,
        Unit::Count,
        "Calls refused by the circuit breaker"
    );
    describe_counter!(
        RETRIES_TOTAL,
        Unit::Count,
        "Retries of idempotent calls, by reason (failure, timeout)"
    );
    describe_counter!(
        RETRY_BUDGET_EXHAUSTED_TOTAL,
        Unit::Count,
        "Failed calls the retry budget did not let retry"
    );
    describe_counter!(
        RATE_LIMIT_ADMITTED_TOTAL,
        Unit::Count,
        "Requests the rate limiter admitted"
    );
    describe_counter!(
        RATE_LIMIT_REFUSED_TOTAL,
        Unit::Count,
        "Requests the rate limiter refused"
    );
    describe_gauge!(
        RATE_LIMIT_WAITING,
        Unit::Count,
        "Waits for a rate limiter's cells holding a reservation now"
    );
}

/// A `usize` counter value as the facade's `u64` (lossless: `usize` is at
/// most 64 bits on every target Rust supports).
#[inline]
pub(crate) fn count(n: usize) -> u64 {
    n as u64
}

/// The `bulkhead_*` metrics of one bulkhead, registered once.
///
/// # Examples
///
/// ```
/// use watertight::Bulkhead;
/// use watertight::clock::StdClock;
/// use watertight::metrics::BulkheadExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let search = Bulkhead::new("search", 1, StdClock);
/// let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&search));
///
/// let _held = search.try_acquire().unwrap();
/// search.close();
/// let _ = search.try_acquire();
/// exporter.update(&search);
/// let text = prometheus.render();
/// assert!(text.contains(r#"bulkhead_rejected_total{system="search",reason="closed"} 1"#));
/// assert!(text.contains(r#"bulkhead_accepted_total{system="search"} 1"#));
///
/// // A wait refused for the bound on waiters is `reason="queue_full"`.
/// # futures_lite::future::block_on(async {
/// let exports = Bulkhead::new("exports", 1, StdClock).with_max_waiters(0);
/// let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&exports));
/// let _held = exports.try_acquire().unwrap();
/// assert!(exports.acquire().await.is_err());
/// exporter.update(&exports);
/// let text = prometheus.render();
/// assert!(text.contains(r#"bulkhead_rejected_total{system="exports",reason="queue_full"} 1"#));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct BulkheadExporter {
    active: Gauge,
    capacity: Gauge,
    waiting: Gauge,
    accepted: Counter,
    queued: Counter,
    rejected_full: Counter,
    rejected_timed_out: Counter,
    rejected_closed: Counter,
    rejected_queue_full: Counter,
}

impl BulkheadExporter {
    /// Registers the handles for `bulkhead` (labelled with its name) with
    /// the current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BulkheadExporter, Bulkhead};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments = Bulkhead::new("payments", 8, &clock);
    /// let _held = payments.try_acquire_many(3).unwrap();
    ///
    /// let _exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&payments));
    /// // Exported at once, before any `update`.
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"bulkhead_capacity{system="payments"} 8"#));
    /// assert!(text.contains(r#"bulkhead_active_calls{system="payments"} 3"#));
    /// ```
    pub fn new<C>(bulkhead: &Bulkhead<C>) -> Self {
        let exporter = Self::named(bulkhead.name());
        exporter.update(bulkhead);
        exporter
    }

    /// Registers the handles for the system `system`, exporting nothing yet:
    /// feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BulkheadExporter, Bulkhead};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::named("payments"));
    /// // Registered, but still at zero.
    /// assert!(prometheus.render().contains(r#"bulkhead_capacity{system="payments"} 0"#));
    ///
    /// // Later, with the bulkhead (or only its snapshots) at hand:
    /// let clock = ManualClock::new();
    /// let payments = Bulkhead::new("payments", 8, &clock);
    /// exporter.record(&payments.metrics());
    /// assert!(prometheus.render().contains(r#"bulkhead_capacity{system="payments"} 8"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        let rejected = |reason: &'static str| {
            let labels = [("system", system), ("reason", reason)];
            counter!(BULKHEAD_REJECTED_TOTAL, &labels)
        };
        BulkheadExporter {
            active: gauge!(BULKHEAD_ACTIVE_CALLS, "system" => system),
            capacity: gauge!(BULKHEAD_CAPACITY, "system" => system),
            waiting: gauge!(BULKHEAD_WAITING_CALLS, "system" => system),
            accepted: counter!(BULKHEAD_ACCEPTED_TOTAL, "system" => system),
            queued: counter!(BULKHEAD_QUEUED_TOTAL, "system" => system),
            rejected_full: rejected("full"),
            rejected_timed_out: rejected("timed_out"),
            rejected_closed: rejected("closed"),
            rejected_queue_full: rejected("queue_full"),
        }
    }

    /// Copies the bulkhead's numbers now into the handles. Pass the
    /// bulkhead this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BulkheadExporter, Bulkhead};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments = Bulkhead::new("payments", 2, &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&payments));
    ///
    /// let _held = payments.try_acquire().unwrap();
    /// // Until the next update, the exported numbers are the last ones.
    /// assert!(prometheus.render().contains(r#"bulkhead_active_calls{system="payments"} 0"#));
    /// exporter.update(&payments);
    /// assert!(prometheus.render().contains(r#"bulkhead_active_calls{system="payments"} 1"#));
    /// ```
    pub fn update<C>(&self, bulkhead: &Bulkhead<C>) {
        self.record(&bulkhead.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BulkheadExporter, Bulkhead};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments = Bulkhead::new("payments", 1, &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&payments));
    ///
    /// let _held = payments.try_acquire().unwrap();
    /// assert!(payments.try_acquire().is_err()); // full
    /// // One snapshot, for a log line and for the exporter alike.
    /// let snapshot = payments.metrics();
    /// assert_eq!(snapshot.rejected_full, 1);
    /// exporter.record(&snapshot);
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"bulkhead_rejected_total{system="payments",reason="full"} 1"#));
    /// ```
    pub fn record(&self, m: &BulkheadMetrics) {
        self.active.set(m.in_flight as f64);
        self.capacity.set(m.capacity as f64);
        self.waiting.set(m.waiting as f64);
        self.accepted.absolute(count(m.accepted));
        self.queued.absolute(count(m.queued));
        self.rejected_full.absolute(count(m.rejected_full));
        self.rejected_timed_out
            .absolute(count(m.rejected_timed_out));
        self.rejected_closed.absolute(count(m.rejected_closed));
        self.rejected_queue_full
            .absolute(count(m.rejected_queue_full));
    }
}

/// The `circuit_breaker_*` metrics of one breaker, registered once.
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::clock::ManualClock;
/// use watertight::metrics::BreakerExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let config = BreakerConfig::builder().window_size(4).minimum_calls(2).build().unwrap();
/// let shipping: CircuitBreaker<_, 4> = CircuitBreaker::new("shipping", config, &clock);
/// let exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::new(&shipping));
///
/// shipping.try_acquire().unwrap().success();
/// shipping.try_acquire().unwrap().failure(); // 50 %: opens
/// let _ = shipping.try_acquire(); // refused
/// exporter.update(&shipping);
/// let text = prometheus.render();
/// assert!(text.contains(r#"circuit_breaker_state{system="shipping"} 1"#));
/// assert!(text.contains(r#"circuit_breaker_rejected_total{system="shipping"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct BreakerExporter {
    state: Gauge,
    successes: Gauge,
    failures: Gauge,
    slow: Gauge,
    failure_rate: Gauge,
    slow_call_rate: Gauge,
    rejected: Counter,
}

impl BreakerExporter {
    /// Registers the handles for `breaker` (labelled with its name) with the
    /// current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BreakerExporter, BreakerConfig, CircuitBreaker};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let shipping: CircuitBreaker<_, 64> =
    ///     CircuitBreaker::new("shipping", BreakerConfig::DEFAULT, &clock);
    ///
    /// let _exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::new(&shipping));
    /// // Exported at once: closed, and no failure rate yet (too few calls).
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"circuit_breaker_state{system="shipping"} 0"#));
    /// assert!(text.contains(r#"circuit_breaker_failure_rate{system="shipping"} NaN"#));
    /// ```
    pub fn new<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
        breaker: &CircuitBreaker<C, N, H, W>,
    ) -> Self {
        let exporter = Self::named(breaker.name());
        exporter.update(breaker);
        exporter
    }

    /// Registers the handles for the system `system`, exporting nothing yet:
    /// feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BreakerExporter, BreakerConfig, CircuitBreaker};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::named("shipping"));
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="shipping"} 0"#));
    ///
    /// // Later, with the breaker (or only its snapshots) at hand:
    /// let clock = ManualClock::new();
    /// let shipping: CircuitBreaker<_, 64> =
    ///     CircuitBreaker::new("shipping", BreakerConfig::DEFAULT, &clock);
    /// shipping.force_open();
    /// exporter.record(&shipping.metrics());
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="shipping"} 3"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        BreakerExporter {
            state: gauge!(CIRCUIT_BREAKER_STATE, "system" => system),
            successes: gauge!(CIRCUIT_BREAKER_CALLS, "system" => system, "outcome" => "success"),
            failures: gauge!(CIRCUIT_BREAKER_CALLS, "system" => system, "outcome" => "failure"),
            slow: gauge!(CIRCUIT_BREAKER_SLOW_CALLS, "system" => system),
            failure_rate: gauge!(CIRCUIT_BREAKER_FAILURE_RATE, "system" => system),
            slow_call_rate: gauge!(CIRCUIT_BREAKER_SLOW_CALL_RATE, "system" => system),
            rejected: counter!(CIRCUIT_BREAKER_REJECTED_TOTAL, "system" => system),
        }
    }

    /// Copies the breaker's numbers now into the handles (it reads the
    /// breaker's clock once or twice). Pass the breaker this exporter was
    /// made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BreakerExporter, BreakerConfig, CircuitBreaker};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let config = BreakerConfig::builder().window_size(4).minimum_calls(2).build().unwrap();
    /// let shipping: CircuitBreaker<_, 4> = CircuitBreaker::new("shipping", config, &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::new(&shipping));
    ///
    /// shipping.try_acquire().unwrap().success();
    /// shipping.try_acquire().unwrap().failure(); // 50 %: opens
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="shipping"} 0"#));
    /// exporter.update(&shipping);
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="shipping"} 1"#));
    /// ```
    pub fn update<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
        &self,
        breaker: &CircuitBreaker<C, N, H, W>,
    ) {
        self.record(&breaker.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::BreakerExporter, BreakerConfig, CircuitBreaker};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let shipping: CircuitBreaker<_, 64> =
    ///     CircuitBreaker::new("shipping", BreakerConfig::DEFAULT, &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::new(&shipping));
    ///
    /// shipping.try_acquire().unwrap().success();
    /// shipping.try_acquire().unwrap().success();
    /// shipping.try_acquire().unwrap().failure();
    /// let snapshot = shipping.metrics();
    /// assert_eq!((snapshot.calls, snapshot.failed_calls), (3, 1));
    /// exporter.record(&snapshot);
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"circuit_breaker_calls{system="shipping",outcome="success"} 2"#));
    /// assert!(text.contains(r#"circuit_breaker_calls{system="shipping",outcome="failure"} 1"#));
    /// ```
    pub fn record(&self, m: &BreakerMetrics) {
        self.state.set(state_code(m.state));
        self.successes
            .set(m.calls.saturating_sub(m.failed_calls) as f64);
        self.failures.set(m.failed_calls as f64);
        self.slow.set(m.slow_calls as f64);
        self.failure_rate.set(m.failure_rate.unwrap_or(f32::NAN));
        self.slow_call_rate
            .set(m.slow_call_rate.unwrap_or(f32::NAN));
        self.rejected.absolute(count(m.rejected));
    }
}

/// The `rate_limit_*` metrics of one [`RateLimiter`], registered once.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::metrics::RateLimitExporter;
/// use watertight::rate::{Quota, RateLimiter};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let uplink = RateLimiter::new("uplink", Quota::per_second(10).burst(2), &clock);
/// let exporter = metrics::with_local_recorder(&recorder, || RateLimitExporter::new(&uplink));
///
/// uplink.check().unwrap();
/// uplink.check().unwrap();
/// assert!(uplink.check().is_err()); // the burst is spent
/// exporter.update(&uplink);
/// let text = prometheus.render();
/// assert!(text.contains(r#"rate_limit_admitted_total{system="uplink"} 2"#));
/// assert!(text.contains(r#"rate_limit_refused_total{system="uplink"} 1"#));
/// assert!(text.contains(r#"rate_limit_waiting{system="uplink"} 0"#));
/// ```
#[derive(Debug, Clone)]
pub struct RateLimitExporter {
    admitted: Counter,
    refused: Counter,
    waiting: Gauge,
}

impl RateLimitExporter {
    /// Registers the handles for `limiter` (labelled with its name) with
    /// the current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::RateLimitExporter};
    /// # use watertight::rate::{Quota, RateLimiter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = RateLimiter::new("api", Quota::per_second(5), &clock);
    /// api.check_n(3).unwrap(); // one request of three cells
    ///
    /// let _exporter = metrics::with_local_recorder(&recorder, || RateLimitExporter::new(&api));
    /// // Exported at once, before any `update`.
    /// assert!(prometheus.render().contains(r#"rate_limit_admitted_total{system="api"} 1"#));
    /// ```
    pub fn new<C>(limiter: &RateLimiter<C>) -> Self {
        let exporter = Self::named(limiter.name());
        exporter.update(limiter);
        exporter
    }

    /// Registers the handles for the system `system`, exporting nothing yet:
    /// feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::metrics::RateLimitExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let _exporter = metrics::with_local_recorder(&recorder, || RateLimitExporter::named("api"));
    /// assert!(prometheus.render().contains(r#"rate_limit_refused_total{system="api"} 0"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        RateLimitExporter {
            admitted: counter!(RATE_LIMIT_ADMITTED_TOTAL, "system" => system),
            refused: counter!(RATE_LIMIT_REFUSED_TOTAL, "system" => system),
            waiting: gauge!(RATE_LIMIT_WAITING, "system" => system),
        }
    }

    /// Copies the limiter's numbers now into the handles. Pass the limiter
    /// this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::RateLimitExporter};
    /// # use watertight::rate::{Quota, RateLimiter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = RateLimiter::new("api", Quota::per_second(1), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || RateLimitExporter::new(&api));
    ///
    /// api.check().unwrap();
    /// // Until the next update, the exported numbers are the last ones.
    /// assert!(prometheus.render().contains(r#"rate_limit_admitted_total{system="api"} 0"#));
    /// exporter.update(&api);
    /// assert!(prometheus.render().contains(r#"rate_limit_admitted_total{system="api"} 1"#));
    /// ```
    pub fn update<C>(&self, limiter: &RateLimiter<C>) {
        self.record(&limiter.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::RateLimitExporter};
    /// # use watertight::rate::{Quota, RateLimiter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = RateLimiter::new("api", Quota::per_second(1), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || RateLimitExporter::named("api"));
    ///
    /// api.check().unwrap();
    /// assert!(api.check().is_err());
    /// let snapshot = api.metrics(); // one snapshot, for a log line and the exporter
    /// exporter.record(&snapshot);
    /// assert!(prometheus.render().contains(r#"rate_limit_refused_total{system="api"} 1"#));
    /// ```
    pub fn record(&self, m: &RateMetrics) {
        self.admitted.absolute(count(m.admitted));
        self.refused.absolute(count(m.refused));
        self.waiting.set(m.waiting as f64);
    }
}

/// The `throttle_*` metrics of one [`AdaptiveThrottle`], registered once.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::metrics::ThrottleExporter;
/// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let search = AdaptiveThrottle::with_seed("search", ThrottleConfig::DEFAULT, &clock, 1);
/// let exporter = metrics::with_local_recorder(&recorder, || ThrottleExporter::new(&search));
///
/// search.check().unwrap().accepted();
/// search.check().unwrap().overloaded();
/// exporter.update(&search);
/// let text = prometheus.render();
/// assert!(text.contains(r#"throttle_admitted_total{system="search"} 2"#));
/// assert!(text.contains(r#"throttle_refused_total{system="search"} 0"#));
/// assert!(text.contains(r#"throttle_window_requests{system="search"} 2"#));
/// assert!(text.contains(r#"throttle_window_accepts{system="search"} 1"#));
/// assert!(text.contains(r#"throttle_refusal_probability{system="search"} 0"#));
/// ```
#[derive(Debug, Clone)]
pub struct ThrottleExporter {
    admitted: Counter,
    refused: Counter,
    requests: Gauge,
    accepts: Gauge,
    probability: Gauge,
}

impl ThrottleExporter {
    /// Registers the handles for `throttle` (labelled with its name) with
    /// the current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::ThrottleExporter};
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, &clock, 1);
    /// api.check().unwrap().overloaded();
    /// let _exporter = metrics::with_local_recorder(&recorder, || ThrottleExporter::new(&api));
    /// assert!(prometheus.render().contains(r#"throttle_refusal_probability{system="api"} 0.5"#));
    /// ```
    pub fn new<C: Clock>(throttle: &AdaptiveThrottle<C>) -> Self {
        let exporter = Self::named(throttle.name());
        exporter.update(throttle);
        exporter
    }

    /// Registers the handles for the system `system`, exporting nothing
    /// yet: feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::metrics::ThrottleExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let _exporter = metrics::with_local_recorder(&recorder, || ThrottleExporter::named("api"));
    /// assert!(prometheus.render().contains(r#"throttle_refused_total{system="api"} 0"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        ThrottleExporter {
            admitted: counter!(THROTTLE_ADMITTED_TOTAL, "system" => system),
            refused: counter!(THROTTLE_REFUSED_TOTAL, "system" => system),
            requests: gauge!(THROTTLE_WINDOW_REQUESTS, "system" => system),
            accepts: gauge!(THROTTLE_WINDOW_ACCEPTS, "system" => system),
            probability: gauge!(THROTTLE_REFUSAL_PROBABILITY, "system" => system),
        }
    }

    /// Copies the throttle's numbers now into the handles (one clock read,
    /// for the window). Pass the throttle this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::ThrottleExporter};
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, &clock, 1);
    /// let exporter = metrics::with_local_recorder(&recorder, || ThrottleExporter::new(&api));
    /// api.check().unwrap().accepted();
    /// exporter.update(&api);
    /// assert!(prometheus.render().contains(r#"throttle_window_accepts{system="api"} 1"#));
    /// ```
    pub fn update<C: Clock>(&self, throttle: &AdaptiveThrottle<C>) {
        self.record(&throttle.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{clock::ManualClock, metrics::ThrottleExporter};
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let api = AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, &clock, 1);
    /// let exporter = metrics::with_local_recorder(&recorder, || ThrottleExporter::named("api"));
    /// api.check().unwrap().overloaded();
    /// exporter.record(&api.metrics());
    /// assert!(prometheus.render().contains(r#"throttle_admitted_total{system="api"} 1"#));
    /// ```
    pub fn record(&self, m: &ThrottleMetrics) {
        self.admitted.absolute(count(m.admitted));
        self.refused.absolute(count(m.refused));
        self.requests.set(m.requests as f64);
        self.accepts.set(m.accepts as f64);
        self.probability.set(m.probability);
    }
}

/// Both exporters of a [`Policy`], its bulkhead's and its breaker's, and
/// its retry counters (`retries_total{system,reason}`,
/// `retry_budget_exhausted_total{system}`), and its rate limiter's
/// (`rate_limit_*`, only for a policy with a rate), and its throttle's
/// (`throttle_*`, only for a policy with a throttle), under the policy's
/// name.
///
/// The [module docs](self) show it in a scrape handler.
///
/// # Examples
///
/// ```
/// # use watertight::clock::ManualClock;
/// # use watertight::metrics::PolicyExporter;
/// # use watertight::policy::{Policy, PolicyConfig};
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let payments: Policy<_> = Policy::new("payments", config, &clock).unwrap();
/// let _exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&payments));
///
/// // Both families, under one `system` label.
/// let text = prometheus.render();
/// assert!(text.contains(r#"bulkhead_capacity{system="payments"} 4"#));
/// assert!(text.contains(r#"circuit_breaker_state{system="payments"} 0"#));
/// assert!(text.contains(r#"retries_total{system="payments",reason="timeout"} 0"#));
/// ```
#[derive(Debug, Clone)]
pub struct PolicyExporter {
    bulkhead: BulkheadExporter,
    breaker: BreakerExporter,
    retries_failure: Counter,
    retries_timeout: Counter,
    retry_budget_exhausted: Counter,
    rate: Option<RateLimitExporter>,
    throttle: Option<ThrottleExporter>,
}

impl PolicyExporter {
    /// Registers the handles for `policy` (labelled with its name) with the
    /// current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let payments: Policy<_> = Policy::new("payments", config, &clock).unwrap();
    /// payments.breaker().force_open();
    ///
    /// let _exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&payments));
    /// // Exported at once, before any `update`.
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="payments"} 3"#));
    /// ```
    pub fn new<C, const N: usize, W, B>(policy: &Policy<C, N, W, B>) -> Self
    where
        C: Clock,
        B: Clock,
        W: WindowStorage,
    {
        let system = policy.name();
        let retries = |reason: &'static str| {
            let labels = [("system", system), ("reason", reason)];
            counter!(RETRIES_TOTAL, &labels)
        };
        let exporter = PolicyExporter {
            bulkhead: BulkheadExporter::new(policy.bulkhead()),
            breaker: BreakerExporter::new(policy.breaker()),
            retries_failure: retries("failure"),
            retries_timeout: retries("timeout"),
            retry_budget_exhausted: counter!(RETRY_BUDGET_EXHAUSTED_TOTAL, "system" => system),
            rate: policy.rate_limiter().map(RateLimitExporter::new),
            throttle: policy.throttle().map(ThrottleExporter::new),
        };
        exporter.record_retries(policy);
        exporter
    }

    fn record_retries<C, const N: usize, W, B>(&self, policy: &Policy<C, N, W, B>) {
        let m = policy.retry_metrics();
        self.retries_failure.absolute(count(m.after_failure));
        self.retries_timeout.absolute(count(m.after_timeout));
        self.retry_budget_exhausted
            .absolute(count(m.budget_exhausted));
    }

    /// Copies the policy's numbers now into the handles. Pass the policy this
    /// exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments: Policy<_> =
    ///     Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&payments));
    ///
    /// let _held = payments.bulkhead().try_acquire().unwrap();
    /// payments.breaker().force_open();
    /// exporter.update(&payments);
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"bulkhead_active_calls{system="payments"} 1"#));
    /// assert!(text.contains(r#"circuit_breaker_state{system="payments"} 3"#));
    /// ```
    pub fn update<C, const N: usize, W, B>(&self, policy: &Policy<C, N, W, B>)
    where
        C: Clock,
        B: Clock,
        W: WindowStorage,
    {
        self.bulkhead.update(policy.bulkhead());
        self.breaker.update(policy.breaker());
        self.record_retries(policy);
        if let (Some(exporter), Some(limiter)) = (&self.rate, policy.rate_limiter()) {
            exporter.update(limiter);
        }
        if let (Some(exporter), Some(throttle)) = (&self.throttle, policy.throttle()) {
            exporter.update(throttle);
        }
    }

    /// The bulkhead's exporter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments: Policy<_> =
    ///     Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&payments));
    ///
    /// // Refresh only the bulkhead's numbers (no clock read) after a resize.
    /// payments.bulkhead().resize(8).unwrap();
    /// exporter.bulkhead().update(payments.bulkhead());
    /// assert!(prometheus.render().contains(r#"bulkhead_capacity{system="payments"} 8"#));
    /// ```
    pub fn bulkhead(&self) -> &BulkheadExporter {
        &self.bulkhead
    }

    /// The breaker's exporter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let payments: Policy<_> =
    ///     Policy::new("payments", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&payments));
    ///
    /// // An operator's switch: export the breaker's new state at once.
    /// payments.breaker().force_open();
    /// exporter.breaker().update(payments.breaker());
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="payments"} 3"#));
    /// ```
    pub fn breaker(&self) -> &BreakerExporter {
        &self.breaker
    }

    /// The rate limiter's exporter, for a policy with a rate.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::rate::Quota;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).rate(Quota::per_second(1)).build().unwrap();
    /// let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&provider));
    ///
    /// let limiter = provider.rate_limiter().unwrap();
    /// limiter.check().unwrap();
    /// exporter.rate().unwrap().update(limiter);
    /// assert!(prometheus.render().contains(r#"rate_limit_admitted_total{system="provider"} 1"#));
    ///
    /// // A policy without a rate exports no `rate_limit_*` series.
    /// let plain: Policy<_> = Policy::new("plain", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&plain));
    /// assert!(exporter.rate().is_none());
    /// assert!(!prometheus.render().contains(r#"rate_limit_admitted_total{system="plain"}"#));
    /// ```
    pub fn rate(&self) -> Option<&RateLimitExporter> {
        self.rate.as_ref()
    }

    /// The throttle's exporter, for a policy with a throttle.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::PolicyExporter;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::throttle::ThrottleConfig;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).throttle(ThrottleConfig::DEFAULT).build().unwrap();
    /// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&search));
    /// # futures_lite::future::block_on(async {
    /// search.call(|| async { Ok::<_, ()>(()) }).await.unwrap();
    /// # });
    /// exporter.update(&search);
    /// assert!(prometheus.render().contains(r#"throttle_window_accepts{system="search"} 1"#));
    /// assert!(exporter.throttle().is_some());
    ///
    /// // A policy without a throttle exports no `throttle_*` series.
    /// let plain: Policy<_> = Policy::new("plain", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let exporter = metrics::with_local_recorder(&recorder, || PolicyExporter::new(&plain));
    /// assert!(exporter.throttle().is_none());
    /// assert!(!prometheus.render().contains(r#"throttle_admitted_total{system="plain"}"#));
    /// ```
    pub fn throttle(&self) -> Option<&ThrottleExporter> {
        self.throttle.as_ref()
    }
}

/// The metrics of one [`AdaptiveBulkhead`]: its bulkhead's
/// ([`BulkheadExporter`]), the `bulkhead_limit` gauge, and the last window
/// behind it (its calls by signal, their average round trip, the most in
/// flight) and the count of limit changes; registered once.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
/// use watertight::metrics::LimitExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
/// let search = AdaptiveBulkhead::with_window("search", aimd, Duration::from_secs(1), 1, &clock);
/// let exporter = metrics::with_local_recorder(&recorder, || LimitExporter::new(&search));
///
/// let call = search.try_acquire().unwrap();
/// clock.advance(Duration::from_secs(1));
/// call.record(Signal::Dropped); // closes the window: 10 × 0.9
/// exporter.update(&search);
/// let text = prometheus.render();
/// assert!(text.contains(r#"bulkhead_limit{system="search"} 9"#));
/// assert!(text.contains(r#"bulkhead_limit_window_calls{system="search",signal="dropped"} 1"#));
/// assert!(text.contains(r#"bulkhead_limit_changes_total{system="search"} 1"#));
/// assert!(text.contains(r#"bulkhead_capacity{system="search"} 9"#));
/// ```
#[derive(Debug, Clone)]
pub struct LimitExporter {
    bulkhead: BulkheadExporter,
    limit: Gauge,
    successes: Gauge,
    failed: Gauge,
    dropped: Gauge,
    timed_out: Gauge,
    rtt: Gauge,
    max_in_flight: Gauge,
    changes: Counter,
}

impl LimitExporter {
    /// Registers the handles for `adaptive` (labelled with its name) with
    /// the current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Gradient2};
    /// use watertight::metrics::LimitExporter;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let db = AdaptiveBulkhead::new("db", Gradient2::new(), &clock);
    /// let _exporter = metrics::with_local_recorder(&recorder, || LimitExporter::new(&db));
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"bulkhead_limit{system="db"} 20"#));
    /// assert!(text.contains(r#"bulkhead_limit_window_rtt_seconds{system="db"} NaN"#));
    /// ```
    pub fn new<C: Clock, A: LimitAlgorithm>(adaptive: &AdaptiveBulkhead<C, A>) -> Self {
        let exporter = Self::named(adaptive.bulkhead().name());
        exporter.update(adaptive);
        exporter
    }

    /// Like [`new`](Self::new), for an [`AdaptiveLimit`] steering a bulkhead
    /// it does not own (a policy's): labelled with that bulkhead's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveLimit, Aimd};
    /// use watertight::metrics::LimitExporter;
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let search: Policy<_> = Policy::new("search", PolicyConfig::builder(20).build().unwrap(), &clock).unwrap();
    /// let limit = AdaptiveLimit::new(Aimd::new(), clock.now());
    /// let exporter = metrics::with_local_recorder(&recorder, || {
    ///     LimitExporter::steering(search.bulkhead(), &limit)
    /// });
    /// exporter.update_steering(search.bulkhead(), &limit);
    /// assert!(prometheus.render().contains(r#"bulkhead_limit{system="search"} 20"#));
    /// ```
    pub fn steering<C: Clock, A: LimitAlgorithm>(
        bulkhead: &Bulkhead<C>,
        limit: &AdaptiveLimit<A>,
    ) -> Self {
        let exporter = Self::named(bulkhead.name());
        exporter.update_steering(bulkhead, limit);
        exporter
    }

    fn named(system: &'static str) -> Self {
        let calls = |signal: &'static str| {
            let labels = [("system", system), ("signal", signal)];
            gauge!(BULKHEAD_LIMIT_WINDOW_CALLS, &labels)
        };
        LimitExporter {
            bulkhead: BulkheadExporter::named(system),
            limit: gauge!(BULKHEAD_LIMIT, "system" => system),
            successes: calls("success"),
            failed: calls("failure"),
            dropped: calls("dropped"),
            timed_out: calls("timeout"),
            rtt: gauge!(BULKHEAD_LIMIT_WINDOW_RTT_SECONDS, "system" => system),
            max_in_flight: gauge!(BULKHEAD_LIMIT_WINDOW_MAX_IN_FLIGHT, "system" => system),
            changes: counter!(BULKHEAD_LIMIT_CHANGES_TOTAL, "system" => system),
        }
    }

    /// Copies the adaptive bulkhead's numbers now into the handles. Pass
    /// the bulkhead this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    /// use watertight::metrics::LimitExporter;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let db = AdaptiveBulkhead::new("db", Aimd::new(), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || LimitExporter::new(&db));
    /// let _call = db.try_acquire().unwrap();
    /// exporter.update(&db);
    /// assert!(prometheus.render().contains(r#"bulkhead_active_calls{system="db"} 1"#));
    /// ```
    pub fn update<C: Clock, A: LimitAlgorithm>(&self, adaptive: &AdaptiveBulkhead<C, A>) {
        self.export(
            adaptive.bulkhead(),
            &adaptive.last_window(),
            adaptive.limit_changes(),
        );
    }

    /// Copies the numbers of an [`AdaptiveLimit`] and the bulkhead it
    /// steers into the handles: pass those this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveLimit, Aimd, Signal};
    /// use watertight::metrics::LimitExporter;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let db = Bulkhead::new("db", 10, &clock);
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
    /// let exporter = metrics::with_local_recorder(&recorder, || LimitExporter::steering(&db, &limit));
    /// limit.record(&db, clock.now(), Signal::Dropped);
    /// exporter.update_steering(&db, &limit);
    /// assert!(prometheus.render().contains(r#"bulkhead_limit{system="db"} 9"#));
    /// ```
    pub fn update_steering<C: Clock, A: LimitAlgorithm>(
        &self,
        bulkhead: &Bulkhead<C>,
        limit: &AdaptiveLimit<A>,
    ) {
        self.export(bulkhead, &limit.last_window(), limit.limit_changes());
    }

    fn export<C>(&self, bulkhead: &Bulkhead<C>, w: &crate::limit::Window, changes: usize) {
        self.bulkhead.update(bulkhead);
        self.limit.set(bulkhead.capacity() as f64);
        self.successes.set(w.successes as f64);
        self.failed.set(w.failed as f64);
        self.dropped.set(w.dropped as f64);
        self.timed_out.set(w.timed_out as f64);
        self.rtt
            .set(w.avg_rtt.map_or(f64::NAN, |d| d.as_secs_f64()));
        self.max_in_flight.set(w.max_in_flight as f64);
        self.changes.absolute(count(changes));
    }
}

/// The `bulkhead_class_*` metrics of one [`PartitionedBulkhead`], per
/// class (labels `system` and `class`, the class's name), registered once.
///
/// The rooms are bulkheads of the partitioned bulkhead's name: export them
/// with this, not with a [`BulkheadExporter`] each (their series would
/// share one `system` label).
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::metrics::PartitionExporter;
/// use watertight::partition::PartitionedBulkhead;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let search = PartitionedBulkhead::new("search", [("critical", 1), ("batch", 1)], StdClock);
/// let exporter = metrics::with_local_recorder(&recorder, || PartitionExporter::new(&search));
///
/// let _batch = search.try_acquire(1).unwrap();
/// let _lent = search.try_acquire(1).unwrap(); // borrowed from critical's room
/// assert!(search.try_acquire(1).is_err());
/// exporter.update(&search);
/// let text = prometheus.render();
/// assert!(text.contains(r#"bulkhead_class_active_calls{system="search",class="critical"} 1"#));
/// assert!(text.contains(r#"bulkhead_class_borrowed_total{system="search",class="batch"} 1"#));
/// assert!(text.contains(r#"bulkhead_class_rejected_total{system="search",class="batch",reason="full"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct PartitionExporter<const K: usize> {
    classes: [ClassHandles; K],
}

/// One class's handles.
#[derive(Debug, Clone)]
struct ClassHandles {
    active: Gauge,
    capacity: Gauge,
    waiting: Gauge,
    borrowed: Counter,
    rejected_full: Counter,
    rejected_timed_out: Counter,
    rejected_closed: Counter,
    rejected_queue_full: Counter,
}

impl<const K: usize> PartitionExporter<K> {
    /// Registers the handles of every class of `bulkhead` (labelled with
    /// its name and the class's) with the current recorder, and exports
    /// its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::metrics::PartitionExporter;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let db = PartitionedBulkhead::new("db", [("web", 6), ("jobs", 2)], StdClock);
    /// let _job = db.try_acquire(1).unwrap();
    ///
    /// let _exporter = metrics::with_local_recorder(&recorder, || PartitionExporter::new(&db));
    /// // Exported at once, before any `update`.
    /// let text = prometheus.render();
    /// assert!(text.contains(r#"bulkhead_class_capacity{system="db",class="web"} 6"#));
    /// assert!(text.contains(r#"bulkhead_class_active_calls{system="db",class="jobs"} 1"#));
    /// ```
    pub fn new<C>(bulkhead: &PartitionedBulkhead<C, K>) -> Self {
        let system = bulkhead.name();
        let exporter = PartitionExporter {
            classes: core::array::from_fn(|i| {
                let class = bulkhead.class_name(i).unwrap_or_default();
                let labels = [("system", system), ("class", class)];
                let rejected = |reason: &'static str| {
                    let labels = [("system", system), ("class", class), ("reason", reason)];
                    counter!(BULKHEAD_CLASS_REJECTED_TOTAL, &labels)
                };
                ClassHandles {
                    active: gauge!(BULKHEAD_CLASS_ACTIVE_CALLS, &labels),
                    capacity: gauge!(BULKHEAD_CLASS_CAPACITY, &labels),
                    waiting: gauge!(BULKHEAD_CLASS_WAITING_CALLS, &labels),
                    borrowed: counter!(BULKHEAD_CLASS_BORROWED_TOTAL, &labels),
                    rejected_full: rejected("full"),
                    rejected_timed_out: rejected("timed_out"),
                    rejected_closed: rejected("closed"),
                    rejected_queue_full: rejected("queue_full"),
                }
            }),
        };
        exporter.update(bulkhead);
        exporter
    }

    /// Copies every class's numbers now into the handles. Pass the
    /// bulkhead this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::metrics::PartitionExporter;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// # futures_lite::future::block_on(async {
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let db = PartitionedBulkhead::new("db", [("web", 1)], &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || PartitionExporter::new(&db));
    ///
    /// let _held = db.try_acquire(0).unwrap();
    /// assert!(db.acquire_timeout(0, Duration::ZERO).await.is_err());
    /// // Until the next update, the exported numbers are the last ones.
    /// let before = r#"bulkhead_class_rejected_total{system="db",class="web",reason="timed_out"} 0"#;
    /// assert!(prometheus.render().contains(before));
    /// exporter.update(&db);
    /// let after = r#"bulkhead_class_rejected_total{system="db",class="web",reason="timed_out"} 1"#;
    /// assert!(prometheus.render().contains(after));
    /// # });
    /// ```
    pub fn update<C>(&self, bulkhead: &PartitionedBulkhead<C, K>) {
        for (i, h) in self.classes.iter().enumerate() {
            let (Some(m), Some(room)) = (bulkhead.class_metrics(i), bulkhead.room(i)) else {
                continue;
            };
            h.active.set(m.room_in_flight as f64);
            h.capacity.set(m.share as f64);
            h.waiting.set(m.waiting as f64);
            h.borrowed.absolute(count(m.borrowed));
            h.rejected_full.absolute(count(m.refused_full));
            h.rejected_timed_out.absolute(count(m.refused_timed_out));
            h.rejected_closed
                .absolute(count(room.metrics().rejected_closed));
            h.rejected_queue_full.absolute(count(m.refused_queue_full));
        }
    }
}

/// A breaker listener that sets `circuit_breaker_state{system}` on every
/// transition, so the gauge is current between [`update`](BreakerExporter::update)s.
/// Its handle is registered once, when it is made.
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::clock::ManualClock;
/// use watertight::metrics::StateListener;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let listener = metrics::with_local_recorder(&recorder, || StateListener::new("ledger"));
/// let ledger: CircuitBreaker<_, 64, _> =
///     CircuitBreaker::with_listener("ledger", BreakerConfig::DEFAULT, &clock, listener);
///
/// ledger.force_open();
/// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="ledger"} 3"#));
/// ```
#[derive(Debug, Clone)]
pub struct StateListener {
    state: Gauge,
}

impl StateListener {
    /// Registers `circuit_breaker_state{system}` with the current recorder
    /// and sets it to closed (0), the state a new breaker starts in.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::metrics::StateListener;
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let _listener = metrics::with_local_recorder(&recorder, || StateListener::new("ledger"));
    /// // Closed before any breaker has used it.
    /// assert!(prometheus.render().contains(r#"circuit_breaker_state{system="ledger"} 0"#));
    /// ```
    pub fn new(system: &'static str) -> Self {
        let state = gauge!(CIRCUIT_BREAKER_STATE, "system" => system);
        state.set(state_code(State::Closed));
        StateListener { state }
    }
}

impl OnTransition for StateListener {
    fn on_transition(&self, transition: &Transition) {
        self.state.set(state_code(transition.to));
    }
}
