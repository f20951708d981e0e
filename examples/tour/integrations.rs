//! Act 6, the integrations briefly: inbound load shedding (the server's
//! `GET /report` behind a fail-fast `BulkheadLayer`, a refusal answered 503
//! with `Retry-After: 1`), then a few lines of Prometheus text from a real
//! exporter, for act 5's two policies and the report bulkhead.

use std::time::{Duration, Instant};

use axum::http::header::RETRY_AFTER;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use watertight::clock::TokioClock;
use watertight::metrics::{BulkheadExporter, PolicyExporter};
use watertight::Bulkhead;

use crate::storefront::{Stage, Storefront, REPORT, REPORT_SLOTS};
use crate::{header, ms};

/// Act 6: the same primitives as tower middleware and as metrics.
pub async fn act_6(stage: &Stage, exporters: &Exporters) {
    let (client, base) = (&stage.client, stage.base.as_str());
    let (front, reports) = (&stage.front, &stage.reports);
    header(
        "Act 6: load shedding with tower, and the numbers in Prometheus",
        &format!(
            "/report ({} ms) behind watertight::tower::BulkheadLayer: bulkhead \"report\" ({}), \
             fail fast, a refusal answered 503 + Retry-After: 1; 5 requests at once",
            REPORT.as_millis(),
            REPORT_SLOTS
        ),
    );
    let answers = report_burst(client, base, 5).await;
    for a in &answers {
        let retry = a
            .retry_after
            .as_deref()
            .map(|v| format!(", Retry-After: {v}"))
            .unwrap_or_default();
        println!(
            "  GET /report -> {} in {:>3} ms{retry:<16}  {}",
            a.status,
            ms(a.took),
            a.body
        );
    }
    let m = reports.metrics();
    let shed_at_once = answers
        .iter()
        .filter(|a| a.status == 503 && a.retry_after.as_deref() == Some("1"))
        .count();
    println!(
        "  -> {} served, {} shed at once with 503 + Retry-After: 1; bulkhead \"report\": \
         accepted {}, rejected {} (full), peak in flight {}/{}",
        answers.iter().filter(|a| a.status == 200).count(),
        shed_at_once,
        m.accepted,
        m.rejected_full,
        m.peak_in_flight,
        m.capacity
    );

    exporters.update(front, reports);
    println!();
    println!(
        "  Prometheus text (metrics-exporter-prometheus), a few lines of the scrape — \
         state: 0 closed, 1 open, 2 half_open:"
    );
    for line in relevant(&exporters.prometheus.render()) {
        println!("    {line}");
    }
}

/// The exporters of act 5's two policies and of act 6's bulkhead, made once,
/// and the handle of the recorder they are registered on.
pub struct Exporters {
    pricing: PolicyExporter,
    stock: PolicyExporter,
    reports: BulkheadExporter,
    prometheus: PrometheusHandle,
}

impl Exporters {
    /// Registers the exporters at start-up, on a recorder of their own (a
    /// local one: the tour installs no global recorder).
    pub fn register(stage: &Stage) -> Exporters {
        let recorder = PrometheusBuilder::new().build_recorder();
        let prometheus = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            watertight::metrics::describe();
            Exporters {
                pricing: PolicyExporter::new(&stage.front.pricing),
                stock: PolicyExporter::new(&stage.front.stock),
                reports: BulkheadExporter::new(&stage.reports),
                prometheus,
            }
        })
    }

    /// Copies the numbers now into the handles: what a `/metrics` handler
    /// does before rendering.
    fn update(&self, front: &Storefront, reports: &Bulkhead<TokioClock>) {
        self.pricing.update(&front.pricing);
        self.stock.update(&front.stock);
        self.reports.update(reports);
    }
}

/// What one `GET /report` got: status, `Retry-After`, body, time taken.
struct Shed {
    status: u16,
    retry_after: Option<String>,
    body: String,
    took: Duration,
}

/// `n` GETs of `/report` sent at once, each its own task; the answers in the
/// order they came back.
async fn report_burst(client: &reqwest::Client, base: &str, n: usize) -> Vec<Shed> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), format!("{base}/report"));
            tokio::spawn(async move {
                let start = Instant::now();
                let response = client.get(url).send().await.expect("HTTP request");
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = response.text().await.expect("HTTP response body");
                Shed {
                    status,
                    retry_after,
                    body,
                    took: start.elapsed(),
                }
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for task in tasks {
        answers.push(task.await.expect("report task panicked"));
    }
    answers.sort_by_key(|a| a.took);
    answers
}

/// The lines of a Prometheus scrape worth showing here, sorted: each
/// system's breaker state and refusals, and each bulkhead's refusals for
/// being full.
fn relevant(scrape: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = scrape
        .lines()
        .filter(|l| {
            l.starts_with("circuit_breaker_state{")
                || l.starts_with("circuit_breaker_rejected_total{")
                || (l.starts_with("bulkhead_rejected_total{") && l.contains(r#"reason="full""#))
        })
        .collect();
    lines.sort_unstable();
    lines
}
