//! `redis::GlobalBulkhead`'s metrics and tracing events against a real
//! `redis-server`. Its own test binary, with one test: tracing caches each
//! event site's interest process-wide, and a site first reached by another
//! test's thread (which has no subscriber) at the moment this test installs
//! its own can keep "never" cached, losing this test's events. Alone in its
//! process, nothing else reaches the sites.
#![cfg(all(feature = "metrics", feature = "tracing"))]

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/tracing_capture.rs"]
mod tracing_capture;

use std::time::Duration;

use redis_server::RedisServer;
use tracing::Level;
use tracing_capture::{capture, Captured};
use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError};

const HOLDERS: &str = "watertight:{payments}:holders";

#[test]
fn grants_refusals_and_a_lost_lease_are_counted_and_logged() {
    let server = RedisServer::start();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ((), events) = capture(|| {
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
    let from_payments = |e: &&Captured| e.field("system") == Some("payments");
    let lost: Vec<_> = events
        .iter()
        .filter(from_payments)
        .filter(|e| {
            e.level == Level::WARN
                && e.field("message")
                    .is_some_and(|m| m.contains("lease was lost"))
        })
        .collect();
    assert_eq!(lost.len(), 1, "{events:?}");
    assert!(events
        .iter()
        .filter(from_payments)
        .any(|e| e.level == Level::DEBUG));
}
