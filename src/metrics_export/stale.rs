//! The `stale_*` metrics of one [`StaleCache`].

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

use super::count;
use crate::fallback::{StaleCache, StaleMetrics};

/// `stale_served_total{system}`: stale answers served (counter).
pub const STALE_SERVED_TOTAL: &str = "stale_served_total";
/// `stale_misses_total{system,reason}`: lookups with nothing to serve,
/// `reason` `absent` (no answer for the key) or `too_old` (older than the
/// max staleness) (counter).
pub const STALE_MISSES_TOTAL: &str = "stale_misses_total";
/// `stale_recorded_total{system}`: good answers recorded (counter).
pub const STALE_RECORDED_TOTAL: &str = "stale_recorded_total";
/// `stale_evictions_total{system}`: answers forgotten to make room
/// (counter).
pub const STALE_EVICTIONS_TOTAL: &str = "stale_evictions_total";
/// `stale_entries{system}`: answers held now (gauge).
pub const STALE_ENTRIES: &str = "stale_entries";

pub(super) fn describe() {
    describe_counter!(STALE_SERVED_TOTAL, Unit::Count, "Stale answers served");
    describe_counter!(
        STALE_MISSES_TOTAL,
        Unit::Count,
        "Lookups with no stale answer to serve (absent, too_old)"
    );
    describe_counter!(STALE_RECORDED_TOTAL, Unit::Count, "Good answers recorded");
    describe_counter!(
        STALE_EVICTIONS_TOTAL,
        Unit::Count,
        "Answers forgotten to make room for another key's"
    );
    describe_gauge!(STALE_ENTRIES, Unit::Count, "Answers held now");
}

/// The `stale_*` metrics of one [`StaleCache`], registered once, labelled
/// with its name.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::fallback::StaleCache;
/// use watertight::metrics::StaleCacheExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let prices: StaleCache<u32, u64, _, 4> = StaleCache::new("prices", Duration::from_secs(60), &clock);
/// let exporter = metrics::with_local_recorder(&recorder, || StaleCacheExporter::new(&prices));
///
/// prices.record(7, 4200);
/// assert!(prices.serve(&7).is_some());
/// assert!(prices.serve(&8).is_none());
/// exporter.update(&prices);
/// let text = prometheus.render();
/// assert!(text.contains(r#"stale_served_total{system="prices"} 1"#));
/// assert!(text.contains(r#"stale_misses_total{system="prices",reason="absent"} 1"#));
/// assert!(text.contains(r#"stale_misses_total{system="prices",reason="too_old"} 0"#));
/// assert!(text.contains(r#"stale_entries{system="prices"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct StaleCacheExporter {
    served: Counter,
    absent: Counter,
    too_old: Counter,
    recorded: Counter,
    evictions: Counter,
    entries: Gauge,
}

impl StaleCacheExporter {
    /// Registers the handles for `cache` (labelled with its name) with the
    /// current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::ManualClock, fallback::StaleCache, metrics::StaleCacheExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("geo", Duration::from_secs(1), &clock);
    /// c.record(1, 1);
    /// let _exporter = metrics::with_local_recorder(&recorder, || StaleCacheExporter::new(&c));
    /// assert!(prometheus.render().contains(r#"stale_recorded_total{system="geo"} 1"#));
    /// ```
    pub fn new<K, V, C, const SETS: usize, S>(cache: &StaleCache<K, V, C, SETS, S>) -> Self
    where
        K: core::hash::Hash + Eq,
        C: crate::clock::Clock,
        S: core::hash::BuildHasher,
    {
        let exporter = Self::named(cache.name());
        exporter.update(cache);
        exporter
    }

    /// Registers the handles for the cache `system`, exporting nothing yet:
    /// feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::metrics::StaleCacheExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let _exporter = metrics::with_local_recorder(&recorder, || StaleCacheExporter::named("geo"));
    /// assert!(prometheus.render().contains(r#"stale_served_total{system="geo"} 0"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        StaleCacheExporter {
            served: counter!(STALE_SERVED_TOTAL, "system" => system),
            absent: counter!(STALE_MISSES_TOTAL, "system" => system, "reason" => "absent"),
            too_old: counter!(STALE_MISSES_TOTAL, "system" => system, "reason" => "too_old"),
            recorded: counter!(STALE_RECORDED_TOTAL, "system" => system),
            evictions: counter!(STALE_EVICTIONS_TOTAL, "system" => system),
            entries: gauge!(STALE_ENTRIES, "system" => system),
        }
    }

    /// Copies the cache's numbers now into the handles (takes each set's
    /// lock in turn: for a scrape, not a request).
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::ManualClock, fallback::StaleCache, metrics::StaleCacheExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("geo", Duration::from_secs(1), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || StaleCacheExporter::new(&c));
    /// c.record(1, 1);
    /// clock.advance(Duration::from_secs(2));
    /// assert!(c.serve(&1).is_none()); // too old
    /// exporter.update(&c);
    /// assert!(prometheus.render().contains(r#"stale_misses_total{system="geo",reason="too_old"} 1"#));
    /// ```
    pub fn update<K, V, C, const SETS: usize, S>(&self, cache: &StaleCache<K, V, C, SETS, S>)
    where
        K: core::hash::Hash + Eq,
        C: crate::clock::Clock,
        S: core::hash::BuildHasher,
    {
        self.record(&cache.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::{clock::ManualClock, fallback::StaleCache, metrics::StaleCacheExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let c: StaleCache<u32, u32, _, 1> = StaleCache::new("geo", Duration::from_secs(1), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || StaleCacheExporter::named("geo"));
    /// for k in 0..9 {
    ///     c.record(k, k);
    /// }
    /// exporter.record(&c.metrics());
    /// assert!(prometheus.render().contains(r#"stale_evictions_total{system="geo"} 1"#));
    /// ```
    pub fn record(&self, m: &StaleMetrics) {
        self.served.absolute(count(m.served_stale));
        self.absent.absolute(count(m.missed_absent));
        self.too_old.absolute(count(m.missed_too_old));
        self.recorded.absolute(count(m.recorded));
        self.evictions.absolute(count(m.evictions));
        self.entries.set(m.entries as f64);
    }
}
