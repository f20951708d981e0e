//! The `chaos_*` metrics of one fault [`Injector`] (features `metrics` and
//! `chaos`).

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

use crate::chaos::{ChaosMetrics, Fault, Injector};

/// `chaos_injected_total{system,fault}`: faults injected, by `fault`:
/// `error`, `outcome`, `latency`, `hang` (counter).
pub const CHAOS_INJECTED_TOTAL: &str = "chaos_injected_total";
/// `chaos_passed_total{system}`: calls the injector let through untouched
/// while enabled (counter).
pub const CHAOS_PASSED_TOTAL: &str = "chaos_passed_total";
/// `chaos_enabled{system}`: 1 while the injector is enabled, 0 while not
/// (gauge).
pub const CHAOS_ENABLED: &str = "chaos_enabled";

pub(super) fn describe() {
    describe_counter!(
        CHAOS_INJECTED_TOTAL,
        Unit::Count,
        "Faults injected by the chaos injector, by fault (error, outcome, latency, hang)"
    );
    describe_counter!(
        CHAOS_PASSED_TOTAL,
        Unit::Count,
        "Calls the chaos injector let through untouched while enabled"
    );
    describe_gauge!(
        CHAOS_ENABLED,
        "Whether the chaos injector is enabled (1) or not (0)"
    );
}

/// The `chaos_injected_total`, `chaos_passed_total` and `chaos_enabled`
/// metrics of one [`Injector`], registered once, labelled with its name:
/// a game day shows on the same dashboard as the policy it tests.
///
/// # Examples
///
/// ```
/// use watertight::chaos::{ChaosConfig, Injector};
/// use watertight::clock::ManualClock;
/// use watertight::metrics::ChaosExporter;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let prometheus = recorder.handle();
/// let clock = ManualClock::new();
/// let config = ChaosConfig::<()>::builder().hang(1.0).build().unwrap();
/// let chaos = Injector::new("pricing", config, &clock);
/// let exporter = metrics::with_local_recorder(&recorder, || ChaosExporter::new(&chaos));
/// let _ = chaos.draw();
/// exporter.update(&chaos);
/// let text = prometheus.render();
/// assert!(text.contains(r#"chaos_injected_total{system="pricing",fault="hang"} 1"#));
/// assert!(text.contains(r#"chaos_injected_total{system="pricing",fault="error"} 0"#));
/// assert!(text.contains(r#"chaos_passed_total{system="pricing"} 0"#));
/// assert!(text.contains(r#"chaos_enabled{system="pricing"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct ChaosExporter {
    injected: [Counter; 4],
    passed: Counter,
    enabled: Gauge,
}

impl ChaosExporter {
    /// Registers the handles for `injector` (labelled with its name) with
    /// the current recorder, and exports its numbers now.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::ChaosExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// chaos.disable();
    /// let _e = metrics::with_local_recorder(&recorder, || ChaosExporter::new(&chaos));
    /// assert!(prometheus.render().contains(r#"chaos_enabled{system="db"} 0"#));
    /// ```
    pub fn new<C, O>(injector: &Injector<C, O>) -> Self {
        let exporter = Self::named(injector.name());
        exporter.update(injector);
        exporter
    }

    /// Registers the handles for the system `system`, exporting nothing
    /// yet: feed it with [`record`](Self::record).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::metrics::ChaosExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let _e = metrics::with_local_recorder(&recorder, || ChaosExporter::named("db"));
    /// assert!(prometheus.render().contains(r#"chaos_passed_total{system="db"} 0"#));
    /// ```
    pub fn named(system: &'static str) -> Self {
        ChaosExporter {
            injected: Fault::ALL
                .map(|f| counter!(CHAOS_INJECTED_TOTAL, "system" => system, "fault" => f.label())),
            passed: counter!(CHAOS_PASSED_TOTAL, "system" => system),
            enabled: gauge!(CHAOS_ENABLED, "system" => system),
        }
    }

    /// Copies the injector's numbers now into the handles. Pass the
    /// injector this exporter was made from.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// # use watertight::metrics::ChaosExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// let exporter = metrics::with_local_recorder(&recorder, || ChaosExporter::new(&chaos));
    /// let _ = chaos.draw();
    /// exporter.update(&chaos);
    /// assert!(prometheus.render().contains(r#"chaos_passed_total{system="db"} 1"#));
    /// ```
    pub fn update<C, O>(&self, injector: &Injector<C, O>) {
        self.record(&injector.metrics());
    }

    /// Copies a snapshot into the handles.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::ChaosMetrics;
    /// # use watertight::metrics::ChaosExporter;
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let prometheus = recorder.handle();
    /// let exporter = metrics::with_local_recorder(&recorder, || ChaosExporter::named("db"));
    /// exporter.record(&ChaosMetrics::default());
    /// assert!(prometheus.render().contains(r#"chaos_enabled{system="db"} 0"#));
    /// ```
    pub fn record(&self, m: &ChaosMetrics) {
        for (f, c) in Fault::ALL.iter().zip(&self.injected) {
            c.absolute(m.injected(*f) as u64);
        }
        self.passed.absolute(m.passed as u64);
        self.enabled.set(if m.enabled { 1.0 } else { 0.0 });
    }
}
