//! Act 5, a request budget: each storefront request has 1.5 s and calls
//! stock and pricing through a policy each; pricing degrades, its call
//! timeout cuts it, its breaker opens, and the store still answers. The
//! client prints each request as it was sent.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use axum::http::header::RETRY_AFTER;
use watertight::clock::{Clock, TokioClock};

use crate::storefront::{pricing_policy, stock_policy, Stage, Storefront};
use crate::{header, ms, upper, Timeline, BUDGET, FAST, PRICING_SLOW};

/// Act 5: a request budget over two systems, one policy each.
pub async fn act_5(stage: &Stage) {
    let (client, base) = (&stage.client, stage.base.as_str());
    let (front, backends) = (&stage.front, &stage.backends);
    let (stock_cfg, pricing_cfg) = (stock_policy(), pricing_policy());
    let pricing_breaker = pricing_cfg.breaker();
    header(
        "Act 5: a request budget, one policy per system — pricing degrades, the store still answers",
        &format!(
            "/product/{{sku}} and /checkout/{{sku}} have {} ms each and call /stock and /pricing \
             (this server, over HTTP), each through its policy:\n   \
             stock: {} at once, slot wait {} ms, call timeout {} ms; \
             pricing: {} at once, slot wait {} ms, call timeout {} ms,\n   \
             breaker window {}, minimum {} calls, failure rate {:.0} %, open {} ms.\n   \
             A product page asks both at once and answers without a price; \
             a checkout asks pricing first and stops without one",
            BUDGET.as_millis(),
            stock_cfg.max_concurrent(),
            stock_cfg.max_wait().as_millis(),
            stock_cfg.call_timeout().as_millis(),
            pricing_cfg.max_concurrent(),
            pricing_cfg.max_wait().as_millis(),
            pricing_cfg.call_timeout().as_millis(),
            pricing_breaker.window_size(),
            pricing_breaker.minimum_calls(),
            pricing_breaker.failure_rate_threshold(),
            pricing_breaker.open_duration().as_millis(),
        ),
    );
    let timeline = Timeline::start();
    let mut visits = Vec::new();
    for path in ["/product/SKU-1", "/checkout/SKU-1"] {
        visits.push(visit(client, base, path, front, timeline).await);
    }
    backends.pricing.slow.store(true, SeqCst);
    timeline.now(format_args!(
        "server: /pricing degrades, answers in {} ms",
        PRICING_SLOW.as_millis()
    ));
    for path in [
        "/product/SKU-2",
        "/product/SKU-3",
        "/product/SKU-4",
        "/product/SKU-5",
        "/checkout/SKU-5",
        "/product/SKU-6",
    ] {
        visits.push(visit(client, base, path, front, timeline).await);
    }

    let with = |status: u16, part: &str| {
        visits
            .iter()
            .filter(|v| v.status.as_u16() == status && v.body.contains(part))
            .count()
    };
    let slowest = visits.iter().map(|v| v.took).max().unwrap_or_default();
    let (s, p) = (
        front.stock.breaker().metrics(),
        front.pricing.breaker().metrics(),
    );
    println!();
    println!(
        "  {} answers: {} full, {} partial (no price), {} unavailable (503); the slowest \
         took {} ms of its {} ms budget",
        visits.len(),
        with(200, r#""price":{"price_cents""#),
        with(200, r#""price":{"unavailable""#),
        with(503, ""),
        ms(slowest),
        BUDGET.as_millis()
    );
    println!(
        "  stock:   {} requests reached it, all it was asked; breaker {}, {} failures",
        backends.stock.hits(),
        s.state,
        s.failed_calls
    );
    println!(
        "  pricing: {} requests reached it ({} answered, {} cut at {} ms); breaker {}, \
         {} calls refused without a request",
        backends.pricing.hits(),
        p.calls - p.failed_calls,
        p.failed_calls,
        pricing_cfg.call_timeout().as_millis(),
        p.state,
        p.rejected
    );
    println!(
        "  -> pricing's slow answers cost a request {} ms (its call timeout), not {} ms; once \
         its breaker opened they cost nothing, and came with its retry hint; stock answered \
         every page in {} ms as before",
        pricing_cfg.call_timeout().as_millis(),
        PRICING_SLOW.as_millis(),
        FAST.as_millis()
    );
}

/// What the client got from the storefront.
struct Visit {
    status: reqwest::StatusCode,
    body: String,
    /// From sending the request to reading the whole answer.
    took: Duration,
}

/// One GET of the storefront, on the timeline at the moment it was sent:
/// status, `Retry-After` if any, the time it took as the client saw it, and
/// the body; then pricing's breaker, if it changed state meanwhile.
async fn visit(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    front: &Storefront,
    timeline: Timeline,
) -> Visit {
    let before = front.pricing.breaker().state();
    let sent = TokioClock.now();
    let start = Instant::now();
    let response = client
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("HTTP request");
    let status = response.status();
    let retry = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(|v| format!(", Retry-After: {v}"))
        .unwrap_or_default();
    let body = response.text().await.expect("HTTP response body");
    let took = start.elapsed();
    timeline.at(
        sent,
        format_args!(
            "GET {path:<15} -> {} in {:>3} ms{retry}",
            status.as_u16(),
            ms(took)
        ),
    );
    println!("            {body}");
    let after = front.pricing.breaker().state();
    if after != before {
        let m = front.pricing.breaker().metrics();
        timeline.now(format_args!(
            "pricing breaker {} -> {} (window: {} failures of {} calls)",
            upper(before),
            upper(after),
            m.failed_calls,
            m.calls
        ));
    }
    Visit { status, body, took }
}
