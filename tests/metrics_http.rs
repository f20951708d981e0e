//! The Prometheus example (`examples/prometheus.rs`) scraped over real HTTP:
//! an axum server on 127.0.0.1, a `reqwest` client, and the metric lines and
//! values the scrape must show after known traffic.
//!
//! Each test registers the example's metrics with its own recorder
//! (`metrics::with_local_recorder` around the one call that registers the
//! handles): handles bind to their recorder when registered, and are never
//! looked up again, so the two tests can run at once in one process without a
//! global recorder. Counts and states only, never latencies: the slots are
//! held by the test itself, not by slow calls.
#![cfg(not(loom))]
#![cfg(all(feature = "metrics", feature = "tokio"))]

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::header::RETRY_AFTER;
use metrics_exporter_prometheus::PrometheusBuilder;

#[allow(dead_code)] // the example's `main` is not used here
#[path = "../examples/prometheus.rs"]
mod example;

use example::Shop;

/// A server with the example's routes, its metrics on a recorder of its own.
async fn start() -> (String, Arc<Shop>, reqwest::Client) {
    let recorder = PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let shop = metrics::with_local_recorder(&recorder, || example::shop(prometheus));
    let base = example::serve(shop.clone(), "127.0.0.1:0").await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    (base, shop, client)
}

/// GET /metrics: every sample line as series → value.
async fn scrape(client: &reqwest::Client, base: &str) -> (String, HashMap<String, String>) {
    let response = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("scrape body");
    let samples = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line");
            (series.to_owned(), value.to_owned())
        })
        .collect();
    (text, samples)
}

fn value<'a>(samples: &'a HashMap<String, String>, series: &str) -> &'a str {
    samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in the scrape: {samples:?}"))
}

/// GET /checkout with `query`: the status and the Retry-After header.
async fn checkout(client: &reqwest::Client, base: &str, query: &str) -> (u16, Option<u64>) {
    let r = client
        .get(format!("{base}/checkout{query}"))
        .send()
        .await
        .expect("checkout");
    let retry_after = r
        .headers()
        .get(RETRY_AFTER)
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (r.status().as_u16(), retry_after)
}

const ACTIVE: &str = r#"bulkhead_active_calls{system="payments"}"#;
const ACCEPTED: &str = r#"bulkhead_accepted_total{system="payments"}"#;
const QUEUED: &str = r#"bulkhead_queued_total{system="payments"}"#;
const FULL: &str = r#"bulkhead_rejected_total{system="payments",reason="full"}"#;
const TIMED_OUT: &str = r#"bulkhead_rejected_total{system="payments",reason="timed_out"}"#;
const CLOSED: &str = r#"bulkhead_rejected_total{system="payments",reason="closed"}"#;
const CAPACITY: &str = r#"bulkhead_capacity{system="payments"}"#;
const STATE: &str = r#"circuit_breaker_state{system="payments"}"#;
const SUCCESSES: &str = r#"circuit_breaker_calls{system="payments",outcome="success"}"#;
const FAILURES: &str = r#"circuit_breaker_calls{system="payments",outcome="failure"}"#;
const FAILURE_RATE: &str = r#"circuit_breaker_failure_rate{system="payments"}"#;
const BREAKER_REJECTED: &str = r#"circuit_breaker_rejected_total{system="payments"}"#;

#[tokio::test]
async fn bulkhead_rejections_and_active_calls_are_scraped() {
    let (base, shop, client) = start().await;

    let (text, s) = scrape(&client, &base).await;
    assert!(text.contains("# HELP bulkhead_rejected_total"), "{text}");
    assert!(
        text.contains("# TYPE bulkhead_rejected_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE bulkhead_active_calls gauge"),
        "{text}"
    );
    for series in [ACTIVE, ACCEPTED, QUEUED, FULL, TIMED_OUT, CLOSED, STATE] {
        assert_eq!(value(&s, series), "0", "{series}");
    }
    assert_eq!(value(&s, CAPACITY), "2");

    // Both slots held: three checkouts are refused at once, 503 without a
    // Retry-After (the bulkhead has no hint), and never reach the breaker.
    let first = shop.payments.bulkhead().try_acquire().unwrap();
    let second = shop.payments.bulkhead().try_acquire().unwrap();
    for _ in 0..3 {
        assert_eq!(checkout(&client, &base, "").await, (503, None));
    }
    let (_, s) = scrape(&client, &base).await;
    assert_eq!(value(&s, FULL), "3");
    assert_eq!(value(&s, ACTIVE), "2");
    assert_eq!(value(&s, ACCEPTED), "2");
    assert_eq!(value(&s, TIMED_OUT), "0");
    assert_eq!(value(&s, SUCCESSES), "0");
    assert_eq!(value(&s, BREAKER_REJECTED), "0");

    // Slots back: a checkout passes; the counter keeps its 3.
    drop((first, second));
    assert_eq!(checkout(&client, &base, "").await, (200, None));
    let (_, s) = scrape(&client, &base).await;
    assert_eq!(value(&s, ACTIVE), "0");
    assert_eq!(value(&s, ACCEPTED), "3");
    assert_eq!(value(&s, FULL), "3");
    assert_eq!(value(&s, SUCCESSES), "1");
    assert_eq!(value(&s, STATE), "0");
}

#[tokio::test]
async fn breaker_trip_and_refusals_are_scraped() {
    let (base, _shop, client) = start().await;

    // 2 answers, then payments is down: the second failure makes 2 of 4.
    let mut statuses = Vec::new();
    for query in ["", "", "?upstream=down", "?upstream=down"] {
        statuses.push(checkout(&client, &base, query).await.0);
    }
    assert_eq!(statuses, [200, 200, 502, 502]);
    let (_, s) = scrape(&client, &base).await;
    assert_eq!(value(&s, STATE), "1", "open");
    assert_eq!(value(&s, SUCCESSES), "2");
    assert_eq!(value(&s, FAILURES), "2");
    assert_eq!(value(&s, FAILURE_RATE), "50");
    assert_eq!(value(&s, BREAKER_REJECTED), "0");

    // Open: refused with a Retry-After of the open wait (60 s, rounded up).
    let (status, retry_after) = checkout(&client, &base, "").await;
    assert_eq!(status, 503);
    assert!(matches!(retry_after, Some(1..=60)), "{retry_after:?}");
    let (_, s) = scrape(&client, &base).await;
    assert_eq!(value(&s, BREAKER_REJECTED), "1");
    assert_eq!(value(&s, STATE), "1");
    // The refusal gave its slot back; the bulkhead refused nothing.
    assert_eq!(value(&s, ACTIVE), "0");
    assert_eq!(value(&s, FULL), "0");
}

#[test]
fn waits_that_queued_are_counted() {
    use watertight::clock::ManualClock;
    use watertight::metrics::BulkheadExporter;
    use watertight::Bulkhead;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let clock = ManualClock::new();
    let payments = Bulkhead::new("payments", 1, &clock);
    let exporter = metrics::with_local_recorder(&recorder, || BulkheadExporter::new(&payments));

    let held = payments.try_acquire().unwrap();
    let mut waits: Vec<_> = (0..3).map(|_| Box::pin(payments.acquire())).collect();
    for w in &mut waits {
        assert!(futures_lite::future::block_on(futures_lite::future::poll_once(w)).is_none());
    }
    drop(held);
    // The first is handed the slot; dropping it gives the slot on to the
    // second, and so on: three grants (none of them looked at), no cancel.
    drop(waits);
    exporter.update(&payments);
    let text = prometheus.render();
    assert!(text.contains(&format!("{QUEUED} 3")), "{text}");
    assert!(text.contains(&format!("{ACCEPTED} 4")), "{text}");
    assert!(
        text.contains("# TYPE bulkhead_queued_total counter"),
        "{text}"
    );
}

/// Polls `fut` to its end, advancing the clock 10 ms whenever it waits
/// (a backoff or a call timeout).
fn drive<F: std::future::Future>(clock: &watertight::clock::ManualClock, fut: F) -> F::Output {
    let mut fut = Box::pin(fut);
    for _ in 0..10_000 {
        if let Some(out) = futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut))
        {
            return out;
        }
        clock.advance(std::time::Duration::from_millis(10));
    }
    panic!("the call never finished");
}

#[test]
fn retries_are_counted_by_reason_and_the_budget_refusals() {
    use std::cell::Cell;
    use std::future::IntoFuture;
    use std::time::Duration;
    use watertight::clock::ManualClock;
    use watertight::metrics::PolicyExporter;
    use watertight::policy::{Policy, PolicyConfig};
    use watertight::retry::RetryConfig;
    use watertight::BreakerConfig;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let clock = ManualClock::new();
    let lenient = BreakerConfig::builder()
        .window_size(64)
        .minimum_calls(64)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(4)
        .call_timeout(Duration::from_millis(100))
        .breaker(lenient)
        .retry(RetryConfig::builder().seed(7))
        .build()
        .unwrap();
    let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    let exporter = metrics::with_local_recorder(&recorder, || {
        watertight::metrics::describe();
        PolicyExporter::new(&search)
    });

    // Two calls that fail once, then answer: two retries after a failure.
    for _ in 0..2 {
        let tries = Cell::new(0);
        let out = drive(
            &clock,
            search
                .call_idempotent(|| {
                    tries.set(tries.get() + 1);
                    let first = tries.get() == 1;
                    async move {
                        if first {
                            Err("reset")
                        } else {
                            Ok(())
                        }
                    }
                })
                .into_future(),
        );
        assert_eq!(out, Ok(()));
    }
    // One that times out once, then answers: one retry after a timeout.
    let tries = Cell::new(0);
    let out = drive(
        &clock,
        search
            .call_idempotent(|| {
                tries.set(tries.get() + 1);
                let first = tries.get() == 1;
                async move {
                    if first {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, &str>(())
                }
            })
            .into_future(),
    );
    assert_eq!(out, Ok(()));
    // Calls that always fail, until the budget has refused a retry.
    while search.retry_metrics().budget_exhausted == 0 {
        let out = drive(
            &clock,
            search
                .call_idempotent(|| async { Err::<(), _>("down") })
                .into_future(),
        );
        assert!(out.is_err());
    }
    let m = search.retry_metrics();
    assert_eq!(m.after_timeout, 1);
    assert!(m.after_failure >= 2);
    assert_eq!(m.budget_exhausted, 1);

    // Exported only on `update`: still zero before it.
    let text = prometheus.render();
    assert!(
        text.contains(r#"retries_total{system="search",reason="failure"} 0"#),
        "{text}"
    );
    exporter.update(&search);
    let text = prometheus.render();
    let failure = format!(
        r#"retries_total{{system="search",reason="failure"}} {}"#,
        m.after_failure
    );
    assert!(text.contains(&failure), "{text}");
    assert!(
        text.contains(r#"retries_total{system="search",reason="timeout"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"retry_budget_exhausted_total{system="search"} 1"#),
        "{text}"
    );
    assert!(text.contains("# TYPE retries_total counter"), "{text}");
    assert!(text.contains("# HELP retries_total"), "{text}");
    assert!(
        text.contains("# HELP retry_budget_exhausted_total"),
        "{text}"
    );
}

#[test]
fn rate_limit_admissions_refusals_and_waits_are_exported() {
    use std::time::Duration;
    use watertight::clock::ManualClock;
    use watertight::metrics::{PolicyExporter, RateLimitExporter};
    use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    use watertight::rate::{Quota, RateLimiter};

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4)
        .rate(Quota::per_second(10).burst(3))
        .build()
        .unwrap();
    let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    let uplink = RateLimiter::new("uplink", Quota::per_second(1).burst(1), &clock);
    let (policy_exporter, uplink_exporter) = metrics::with_local_recorder(&recorder, || {
        watertight::metrics::describe();
        (
            PolicyExporter::new(&provider),
            RateLimitExporter::new(&uplink),
        )
    });

    // Through the policy: 3 admitted (the burst), 2 refused.
    for i in 0..5 {
        let r = futures_lite::future::block_on(provider.call(|| async { Ok::<_, ()>(i) }));
        assert_eq!(r.is_ok(), i < 3, "call {i}: {r:?}");
        if i >= 3 {
            assert!(matches!(
                r.unwrap_err().kind(),
                ErrorKind::RateLimited { .. }
            ));
        }
    }
    // A limiter of its own: one admitted, one wait holding a reservation.
    uplink.check().unwrap();
    let mut wait = Box::pin(uplink.until_ready());
    assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut wait)).is_none());

    policy_exporter.update(&provider);
    uplink_exporter.update(&uplink);
    let text = prometheus.render();
    for line in [
        r#"rate_limit_admitted_total{system="provider"} 3"#,
        r#"rate_limit_refused_total{system="provider"} 2"#,
        r#"rate_limit_waiting{system="provider"} 0"#,
        r#"rate_limit_admitted_total{system="uplink"} 1"#,
        r#"rate_limit_refused_total{system="uplink"} 0"#,
        r#"rate_limit_waiting{system="uplink"} 1"#,
        // The policy's bulkhead granted only the admitted calls.
        r#"bulkhead_accepted_total{system="provider"} 3"#,
        "# TYPE rate_limit_admitted_total counter",
        "# TYPE rate_limit_refused_total counter",
        "# TYPE rate_limit_waiting gauge",
        "# HELP rate_limit_refused_total",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    // The wait is served: it counts as admitted, and no longer waits.
    clock.advance(Duration::from_secs(1));
    futures_lite::future::block_on(wait).unwrap();
    uplink_exporter.update(&uplink);
    let text = prometheus.render();
    assert!(
        text.contains(r#"rate_limit_admitted_total{system="uplink"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rate_limit_waiting{system="uplink"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rate_limit_refused_total{system="uplink"} 0"#),
        "{text}"
    );
}

#[test]
fn a_partitioned_bulkhead_is_exported_per_class() {
    use std::time::Duration;
    use watertight::clock::ManualClock;
    use watertight::metrics::PartitionExporter;
    use watertight::partition::PartitionedBulkhead;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let clock = ManualClock::new();
    let search = PartitionedBulkhead::new(
        "search",
        [("critical", 2), ("default", 2), ("batch", 1)],
        &clock,
    )
    .with_max_waiters(1);
    let exporter = metrics::with_local_recorder(&recorder, || {
        watertight::metrics::describe();
        PartitionExporter::new(&search)
    });

    // Batch takes its slot and borrows default's two and one of critical's;
    // critical takes its other one; then batch finds every room full.
    let batch: Vec<_> = (0..4).map(|_| search.try_acquire(2).unwrap()).collect();
    let critical = search.try_acquire(0).unwrap();
    assert!(search.try_acquire(2).is_err());
    // Default waits for its room (one waiter, the bound); a second is refused.
    let mut waiting = Box::pin(search.acquire_timeout(1, Duration::from_millis(50)));
    assert!(
        futures_lite::future::block_on(futures_lite::future::poll_once(&mut waiting)).is_none()
    );
    let queue_full =
        futures_lite::future::block_on(search.acquire_timeout(1, Duration::from_millis(50)));
    assert!(queue_full.is_err());

    exporter.update(&search);
    let text = prometheus.render();
    for line in [
        r#"bulkhead_class_capacity{system="search",class="critical"} 2"#,
        r#"bulkhead_class_capacity{system="search",class="batch"} 1"#,
        r#"bulkhead_class_active_calls{system="search",class="critical"} 2"#,
        r#"bulkhead_class_active_calls{system="search",class="default"} 2"#,
        r#"bulkhead_class_active_calls{system="search",class="batch"} 1"#,
        r#"bulkhead_class_waiting_calls{system="search",class="default"} 1"#,
        r#"bulkhead_class_waiting_calls{system="search",class="critical"} 0"#,
        r#"bulkhead_class_borrowed_total{system="search",class="batch"} 3"#,
        r#"bulkhead_class_borrowed_total{system="search",class="critical"} 0"#,
        r#"bulkhead_class_rejected_total{system="search",class="batch",reason="full"} 1"#,
        r#"bulkhead_class_rejected_total{system="search",class="default",reason="queue_full"} 1"#,
        r#"bulkhead_class_rejected_total{system="search",class="default",reason="timed_out"} 0"#,
        "# TYPE bulkhead_class_active_calls gauge",
        "# TYPE bulkhead_class_borrowed_total counter",
        "# TYPE bulkhead_class_rejected_total counter",
        "# HELP bulkhead_class_waiting_calls",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    // The wait runs out; the bulkhead is closed and refuses critical.
    clock.advance(Duration::from_millis(50));
    assert!(futures_lite::future::block_on(waiting).is_err());
    drop((batch, critical));
    search.close();
    assert!(search.try_acquire(0).is_err());
    exporter.update(&search);
    let text = prometheus.render();
    for line in [
        r#"bulkhead_class_rejected_total{system="search",class="default",reason="timed_out"} 1"#,
        r#"bulkhead_class_rejected_total{system="search",class="critical",reason="closed"} 1"#,
        r#"bulkhead_class_waiting_calls{system="search",class="default"} 0"#,
        r#"bulkhead_class_active_calls{system="search",class="default"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}
