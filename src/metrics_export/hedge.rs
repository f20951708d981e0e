//! The `hedge*` metrics of one system's [`Hedge`].

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

use crate::hedge::{Hedge, HedgeMetrics, HedgeOutcome, Percentile};

/// `hedges_total{system,outcome}`: hedges by what became of them: `won`,
/// `lost`, `not_sent_budget`, `not_sent_bulkhead`, `not_sent_breaker`,
/// `not_sent_limited` (counter).
pub const HEDGES_TOTAL: &str = "hedges_total";
/// `hedge_budget_tokens{system}`: tokens left in the hedge budget (gauge).
pub const HEDGE_BUDGET_TOKENS: &str = "hedge_budget_tokens";
/// `hedge_latency_seconds{system,quantile}`: percentiles of the hedge's
/// latency histogram — `0.5`, `0.95`, `0.99`, `0.999` — over its last
/// window or two of calls; NaN without samples (gauge).
pub const HEDGE_LATENCY_SECONDS: &str = "hedge_latency_seconds";

/// The quantiles exported, with their labels.
const QUANTILES: [(Percentile, &str); 4] = [
    (Percentile::P50, "0.5"),
    (Percentile::P95, "0.95"),
    (Percentile::P99, "0.99"),
    (Percentile::P999, "0.999"),
];

pub(super) fn describe() {
    describe_counter!(
        HEDGES_TOTAL,
        Unit::Count,
        "Hedged requests by outcome (won, lost, not_sent_budget, not_sent_bulkhead, not_sent_breaker, not_sent_limited)"
    );
    describe_gauge!(
        HEDGE_BUDGET_TOKENS,
        Unit::Count,
        "Tokens left in the hedge budget"
    );
    describe_gauge!(
        HEDGE_LATENCY_SECONDS,
        Unit::Seconds,
        "Percentiles of the latency histogram hedge delays are read from"
    );
}

/// The `hedges_total`, `hedge_budget_tokens` and `hedge_latency_seconds`
/// metrics of one [`Hedge`], registered once, labelled with its name.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::hedge::{Hedge, HedgeConfig};
/// use watertight::metrics::HedgeExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
/// let exporter = metrics::with_local_recorder(&recorder, || HedgeExporter::new(&hedge));
/// hedge.histogram().record(Duration::from_millis(40));
/// exporter.update(&hedge);
/// let text = prometheus.render();
/// assert!(text.contains(r#"hedges_total{system="search",outcome="won"} 0"#));
/// assert!(text.contains(r#"hedge_budget_tokens{system="search"} 10"#));
/// assert!(text.contains(r#"hedge_latency_seconds{system="search",quantile="0.95"} 0.04"#));
/// ```
#[derive(Debug, Clone)]
pub struct HedgeExporter {
    hedges: [Counter; 6],
    tokens: Gauge,
    latency: [Gauge; 4],
}

impl HedgeExporter {
    /// Registers the handles for `hedge` (labelled with its name) with the
    /// current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{hedge::{Hedge, HedgeConfig}, metrics::HedgeExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let hedge = Hedge::new("db", HedgeConfig::DEFAULT);
    /// let _e = metrics::with_local_recorder(&recorder, || HedgeExporter::new(&hedge));
    /// assert!(prometheus.render().contains(r#"hedges_total{system="db",outcome="not_sent_budget"} 0"#));
    /// ```
    pub fn new(hedge: &Hedge) -> Self {
        let system = hedge.name();
        let exporter = HedgeExporter {
            hedges: HedgeOutcome::ALL
                .map(|o| counter!(HEDGES_TOTAL, "system" => system, "outcome" => o.label())),
            tokens: gauge!(HEDGE_BUDGET_TOKENS, "system" => system),
            latency: QUANTILES
                .map(|(_, q)| gauge!(HEDGE_LATENCY_SECONDS, "system" => system, "quantile" => q)),
        };
        exporter.update(hedge);
        exporter
    }

    /// Copies the hedge's numbers now into the handles: its counts, its
    /// budget, and four percentiles of its histogram (each a pass over its
    /// buckets). Pass the hedge this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{hedge::{Hedge, HedgeConfig}, metrics::HedgeExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let hedge = Hedge::new("db", HedgeConfig::DEFAULT);
    /// let exporter = metrics::with_local_recorder(&recorder, || HedgeExporter::new(&hedge));
    /// assert!(hedge.budget().try_spend());
    /// exporter.update(&hedge);
    /// assert!(prometheus.render().contains(r#"hedge_budget_tokens{system="db"} 9"#));
    /// ```
    pub fn update(&self, hedge: &Hedge) {
        self.record(&hedge.metrics());
        self.tokens.set(hedge.budget().tokens());
        for ((p, _), gauge) in QUANTILES.iter().zip(&self.latency) {
            let seconds = hedge
                .histogram()
                .percentile(*p)
                .map_or(f64::NAN, |d| d.as_secs_f64());
            gauge.set(seconds);
        }
    }

    /// Copies a snapshot of the counts into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{hedge::{Hedge, HedgeConfig, HedgeMetrics}, metrics::HedgeExporter};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let hedge = Hedge::new("db", HedgeConfig::DEFAULT);
    /// let exporter = metrics::with_local_recorder(&recorder, || HedgeExporter::new(&hedge));
    /// exporter.record(&HedgeMetrics::default());
    /// ```
    pub fn record(&self, m: &HedgeMetrics) {
        for (o, c) in HedgeOutcome::ALL.iter().zip(&self.hedges) {
            c.absolute(m.get(*o) as u64);
        }
    }
}
