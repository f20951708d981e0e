//! `redis::GlobalBulkhead`'s metrics and tracing events against a real
//! `redis-server`. Its own test binary, with one test: tracing caches each
//! event site's interest process-wide, and a site first reached by another
//! test's thread (which has no subscriber) at the moment this test installs
//! its own can keep "never" cached, losing this test's events. Alone in its
//! process, nothing else reaches the sites.
#![cfg(all(feature = "metrics", feature = "tracing"))]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_server::RedisServer;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError};

const HOLDERS: &str = "watertight:{payments}:holders";

/// Records each event's level and `system` field; has no spans.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(Level, String, String)>>>);

struct Fields(String, String);

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "system" {
            self.0 = value.to_owned();
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.1 = format!("{value:?}");
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut f = Fields(String::new(), String::new());
        event.record(&mut f);
        self.0
            .lock()
            .unwrap()
            .push((*event.metadata().level(), f.0, f.1));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn grants_refusals_and_a_lost_lease_are_counted_and_logged() {
    let server = RedisServer::start();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let sink = Capture::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(sink.clone(), || {
        metrics::with_local_recorder(&recorder, || {
            rt.block_on(async {
                let c = GlobalConfig::builder(1)
                    .store_timeout(Duration::from_secs(1))
                    .lease(Duration::from_millis(600))
                    .renew_every(Duration::from_millis(150))
                    .build()
                    .unwrap();
                let g = GlobalBulkhead::connect(&server.url(), "payments", c).unwrap();
                let permit = g.try_acquire().await.unwrap();
                assert!(matches!(g.try_acquire().await, Err(GlobalError::Full)));
                let _: () = redis::cmd("DEL")
                    .arg(HOLDERS)
                    .query(&mut server.connection())
                    .unwrap();
                while !permit.is_lost() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                // Let the keeper's renewal that found it gone finish.
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        });
    });
    let text = prometheus.render();
    for series in [
        r#"global_bulkhead_acquired_total{system="payments",source="global"} 1"#,
        r#"global_bulkhead_rejected_total{system="payments",cause="full"} 1"#,
        r#"global_bulkhead_leases_lost_total{system="payments"} 1"#,
        r#"global_bulkhead_in_flight{system="payments"} 1"#,
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    assert!(
        text.contains("global_bulkhead_lease_renewals_total"),
        "{text}"
    );
    let events = sink.0.lock().unwrap().clone();
    let lost: Vec<_> = events
        .iter()
        .filter(|(level, system, msg)| {
            *level == Level::WARN && system == "payments" && msg.contains("lease was lost")
        })
        .collect();
    assert_eq!(lost.len(), 1, "{events:?}");
    assert!(events
        .iter()
        .any(|(level, system, _)| *level == Level::DEBUG && system == "payments"));
}
