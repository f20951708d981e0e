//! A tour of the bulkhead, the circuit breaker and the per-system policy over
//! real HTTP: one slow dependency, one fast one, what a concurrency limit does
//! to the fast one's callers, what a breaker does when the slow one goes
//! down, and how a handler with a request budget still answers in time when
//! one of the systems it calls degrades; then the same limits as tower
//! middleware and as Prometheus metrics, retries within the budget, a
//! rate limit both ways, classes of callers with guaranteed shares, hedged
//! requests, a budget that travels across services, and a page served
//! from a cache, marked with its age, while a fault injector fails the
//! system behind it.
//!
//! Run: `cargo run --example tour --features tokio,tower,metrics,http,chaos`
//!
//! The program starts a small axum server on `127.0.0.1` (a random free
//! port, loopback only) with two endpoints, then calls them with one shared
//! `reqwest::Client`, each call a real HTTP request made through a
//! [`Bulkhead`](watertight::Bulkhead) (acts 1–3) or a
//! [`CircuitBreaker`](watertight::CircuitBreaker) (act 4):
//!
//! - `GET /inventory/{sku}`: healthy, about 50 ms;
//! - `GET /shipping-rate?zip_code=…`: degraded, 400 ms — slow, not failing
//!   (until act 4 switches it to answering 503).
//!
//! Act 5 adds a storefront on the same server, which calls two more
//! endpoints of it over HTTP, each through its own [`Policy`](watertight::Policy):
//!
//! - `GET /stock/{sku}`: healthy, about 50 ms;
//! - `GET /pricing/{sku}`: 50 ms, until act 5 makes it answer in 3 s;
//! - `GET /product/{sku}`: asks stock and pricing at once;
//! - `GET /checkout/{sku}`: asks pricing, then stock.
//!
//! Acts 1–3 are the classic demonstration of the bulkhead pattern (the
//! pattern of that name in Microsoft's Azure Architecture Center): a
//! checkout that needs only a quick inventory lookup hangs because a
//! degraded shipping-rate API, which it does not even care about, holds
//! every worker of a shared pool. The usual numbers — a 2 s slow call, a
//! 50 ms fast one, a pool of 4, a 1 s max wait — are scaled down five times
//! so the acts take about two seconds: the slow call becomes 400 ms and the
//! max wait 200 ms (still half a slow call); the fast call stays at 50 ms.
//!
//! | act | what it shows | expected |
//! |---|---|---|
//! | 1. one shared limit of 4, waits unbounded; 8 shipping, then 2 inventory | starvation: the fast calls queue behind every slow one | shipping ≈ 400 ms ×4, 800 ms ×4; inventory ≈ 850 ms ×2 (two slow calls + one fast), about 17 times its own time |
//! | 2. same traffic, one bulkhead per system (shipping 4, inventory 2) | isolation: the slow system floods only its own compartment | inventory ≈ 50 ms ×2; shipping unchanged |
//! | 3. shipping 3, inventory 5, max wait 200 ms; 10 shipping + 4 inventory | failing fast: the overflow is refused after a short wait instead of queueing | shipping 3 ok ≈ 400 ms, 7 rejected ≈ 200 ms; inventory 4 ok ≈ 50 ms |
//!
//! Latency is what the *caller* observes: from the moment the call was
//! submitted (its task spawned) to the moment it finished, recorded inside
//! the task as it finishes. There are two classic ways to get this wrong:
//! starting the clock when the work starts (which hides the time spent
//! queueing for a slot — the very thing act 1 is about), and reading the end
//! time when the caller gets round to looking at a result, in submission
//! order (which charges a fast call for the slow one looked at before it).
//!
//! Act 4 is the circuit breaker: the slow endpoint starts answering 503 (a
//! flag in the server's state); the client calls it through a breaker
//! (window 10, minimum 5 calls, failure rate 50 %, open 500 ms — the default
//! 30 s scaled down — and 3 half-open probes), whose classifier counts a 5xx
//! or no answer at all as a failure and any other status as an answer. The breaker opens
//! after the minimum 5 calls; the next calls are refused at once with a
//! retry hint, and the server's request counter shows none of them reached
//! it; the server recovers; after the open wait, 3 probes pass and it
//! closes. It is printed as a timeline, one line per event, in ms since the
//! act began: what happens, and in which order, is the same every run; the
//! milliseconds are measured.
//!
//! Act 5 is a request budget: each storefront request has 1.5 s
//! ([`Deadline::after`](watertight::deadline::Deadline::after)) and calls each system through its policy with
//! `call_within_with(&budget, …)` (act 4's classifier), so a slot wait and a
//! call each get the smaller of their own limit and what is left of the
//! budget. Pricing degrades to 3 s answers; its policy cuts each call at its
//! 300 ms call timeout — a failure for its breaker (window 4, minimum 4,
//! 50 %, open 1 s) — and the product page answers with stock and "price
//! unavailable". Once two of pricing's last four calls have failed, its
//! breaker opens: pages come back in stock's 50 ms, the price part carrying
//! the breaker's retry hint, and no request goes to pricing; a checkout,
//! which cannot go on without a price, answers 503 at once with
//! `Retry-After` from [`watertight::policy::Error::retry_after`]. Stock serves every
//! request it is asked, unaffected. The client prints each request as it was
//! sent: status, the time it took (measured, not asserted) and the body.
//!
//! Act 6 is the integrations, briefly (`examples/load_shedding.rs` and
//! `examples/prometheus.rs` show each at length). Inbound load shedding —
//! better a quick 503 to some than slow answers to all: the server's
//! `GET /report` (200 ms) sits behind a
//! [`BulkheadLayer`](watertight::tower::BulkheadLayer) of 2 slots that fails fast, and a refusal is answered
//! 503 with `Retry-After: 1` by axum's `HandleErrorLayer`; 5 requests at once
//! get 2 × 200 and 3 × 503 at once (the handler is not called for those).
//! Then a few lines of Prometheus text from a real exporter
//! (`metrics-exporter-prometheus`): the exporters of act 5's two policies
//! and of the report bulkhead were registered once at start-up, on a local
//! recorder, and are updated right before rendering, as a `/metrics`
//! handler would.
//!
//! Act 7 is one limit across processes (feature `redis`, and a
//! `redis-server` on PATH; without either the act is skipped with one line
//! saying how to enable it): four worker processes with a bulkhead of 20
//! each protect their neighbour with eighty slots, not twenty. The tour starts a neighbour (an
//! axum server on 127.0.0.1 that counts calls in flight), a redis-server of
//! its own on a Unix socket, and four worker processes (the tour's own
//! binary again, in a worker role), each firing 40 calls at once: through a
//! local `Bulkhead` of 20 each, the neighbour sees 80 at once; through one
//! `watertight::redis::GlobalBulkhead` of 20, at most 20. It is
//! `examples/global_limit.rs`, whose code (`examples/global_limit/demo.rs`)
//! the tour includes; every process it starts is stopped at its end.
//!
//! Act 8 is retries within the request budget, on a server of its own
//! (`GET /search/{q}`, 50 ms), through a policy whose calls are marked
//! idempotent ([`Policy::call_idempotent`](watertight::Policy::call_idempotent), `.within(&budget)`; the
//! default retry config: 2 attempts, backoff 50 ms doubling to 1 s with
//! full jitter, a budget of 10 tokens getting 10 % of one back per
//! success). The server holds the first request 3 s: the policy's 300 ms
//! call timeout cuts it, and the call is retried once, after a jittered
//! backoff, well inside its 1.5 s budget. Then search goes down (503 at
//! once) and 30 calls are made one after another: the first failures are
//! retried, until the budget is down to half its tokens; from there on a
//! failed call is not retried (its breaker judges only after 50 calls, so
//! that the budget alone is at work here). The same 30 calls in a loop
//! that retries 3 times with no delay and no budget send four times as
//! many requests. The counts are the same every run (the jitter is
//! seeded and the calls are made one at a time); the milliseconds are
//! measured.
//!
//! Act 9 is a rate limit, both ways, on a server of its own. Outbound: a
//! client held to 50 requests a second with a burst of 10 (a
//! [`RateLimiter`](watertight::rate::RateLimiter) behind `watertight::tower::RateLimitLayer::max_wait`,
//! a clone of the service per request) sends 30 requests at once; the
//! server counts what reached it and when: 10 at once, then one every
//! 20 ms, never more by any instant than the GCRA bound (`burst +
//! elapsed × rate`). Inbound: `GET /search` sits behind a fail-fast
//! `RateLimitLayer` of 50/s with a burst of 10, a refusal answered 429 with
//! `Retry-After` (the limiter's exact hint, rounded up to whole seconds);
//! 25 requests at once get the burst's 10 answered and the rest 429, and
//! the handler runs only for the admitted. The counts are the limiter's;
//! the milliseconds are measured (a burst that takes longer than 20 ms to
//! arrive earns one more cell).

//!
//! Act 10 is who gets a slot under overload, on a server of its own:
//! `GET /search` with 5 slots in front of it, once as one FIFO bulkhead and
//! once as a `PartitionedBulkhead` (checkout promised 3, export 2,
//! `tower::PartitionLayer`, the class from an `x-class` header). The
//! handler holds each call until the act lets it go. 8 export calls come
//! first (5 take every slot, 3 wait), then 3 checkout calls (they wait);
//! the act lets the first 5 go and counts who got the freed slots: with
//! one queue, the export calls that came first; with partitions, checkout
//! gets its 3 back, ahead of the export calls that waited longer. Counts,
//! not times: every step waits for the server's own counters.
//!
//! Act 11 is hedged requests, on a server of its own: three replicas of
//! `GET /replica/{n}/{i}` answering in 20 ms, except that replica 2 holds
//! 1 in 10 of the requests it gets first for 2 s. 90 calls one after
//! another, request `i` to replica `i mod 3`: first through `Policy::call`
//! (a 300 ms call timeout), every latency recorded into a
//! `LatencyHistogram`; then through `Policy::call_hedged` with the delay at
//! that histogram's 95th percentile, a hedge going to the next replica.
//! It prints the p99 of each and the extra requests the hedges cost.
//!
//! Act 12 is the request budget across three services (feature `http`;
//! skipped with one line without it): A → B → C on loopback, A with
//! 300 ms, C with a 1 s job in 10 ms steps that checks its `Deadline`
//! before each. With `OutboundDeadlineLayer` (what is left minus a 25 ms
//! margin, in `x-request-timeout-ms`) and `InboundDeadlineLayer` on each
//! hop, C stops before A's 300 ms are up; with the header off, A gives up
//! just the same and C works its full second for nobody
//! (`examples/tour/hops.rs`).
//!
//! Act 13 is the stale-if-error cache, with faults injected (feature
//! `chaos`; skipped with one line without it): a pricing server whose
//! route sits behind a `tower::ChaosLayer` (a seeded `chaos::Injector`,
//! off at first), and a storefront whose `GET /product/{sku}` asks it over
//! HTTP through a `tower::StaleCacheLayer` over a `tower::PolicyLayer`
//! (window 4, opens at 50 % failed, open 1.5 s, 1 probe). Two pages while
//! pricing is healthy record its prices; then the injector answers every
//! request 503: two pages get the cached price with its age (the layer
//! passes a failure on; the page serves the cache's price itself) and open
//! the breaker; four more are refused without a request, the layer serving
//! the cached price with its age (a product never priced: 503 with
//! `Retry-After`); then the injector off, the open wait over, a probe
//! closes the breaker and the prices are fresh. It prints a row per page
//! (injector, whether pricing was asked, the breaker after, the page) and
//! the counts: what reached pricing, what the breaker kept from it, what
//! the cache served. The counts are the same every run; the ages are
//! measured on the tour's clock, a page every 200 ms
//! (`examples/tour/degrade.rs`).
//!
//! The code: this file runs the acts in order and holds what several acts
//! share (`header`, `ms`, the JSON body, the `Timeline` of acts 4, 5 and
//! 8, the constants of acts 1–5 that act 8 reuses); each act, or group of
//! acts, is a module under `examples/tour/`:
//!
//! | file | what |
//! |---|---|
//! | `storefront.rs` | the server of acts 1–6 (every endpoint above, `/report`) and the `Stage` they share: the server's switches and counters, the tour's client |
//! | `bulkheads.rs` | acts 1–3: the bursts, the latency table |
//! | `breaker.rs` | act 4: the breaker's classifier and timeline |
//! | `budget.rs` | act 5: the storefront's requests, as the client saw them |
//! | `integrations.rs` | act 6: the load-shedding burst, the Prometheus exporters |
//! | `../global_limit/demo.rs` | act 7 (the `global_limit` example's code) |
//! | `retries.rs`, `rate.rs`, `partitions.rs`, `hedging.rs` | acts 8, 9, 10 and 11, each with its server |
//! | `hops.rs`, `degrade.rs` | acts 12 and 13, each with its servers (compiled into `tests/deadline_http.rs` and `tests/tour_degrade.rs`) |
//! | `net.rs` | what every act starts its servers and makes its clients with |

#[path = "tour/breaker.rs"]
mod breaker;
#[path = "tour/budget.rs"]
mod budget;
#[path = "tour/bulkheads.rs"]
mod bulkheads;
#[cfg(feature = "chaos")]
#[path = "tour/degrade.rs"]
mod degrade;
#[cfg(feature = "redis")]
#[path = "global_limit/demo.rs"]
mod global_limit;
#[path = "tour/hedging.rs"]
mod hedging;
#[cfg(feature = "http")]
#[path = "tour/hops.rs"]
mod hops;
#[path = "tour/integrations.rs"]
mod integrations;
#[path = "tour/net.rs"]
mod net;
#[path = "tour/partitions.rs"]
mod partitions;
#[path = "tour/rate.rs"]
mod rate;
#[path = "tour/retries.rs"]
mod retries;
#[path = "tour/storefront.rs"]
mod storefront;

use std::fmt::Display;
use std::process::ExitCode;
use std::time::Duration;

use axum::http::header::{HeaderName, CONTENT_TYPE};
use watertight::breaker::State as BreakerState;
use watertight::clock::{self, Clock, TokioClock};

/// The fast dependency's latency: a quick lookup (acts 1–5), and search's
/// answer in act 8.
const FAST: Duration = Duration::from_millis(50);
/// The storefront's budget for one request, from its SLA: answer within
/// 1.5 s (act 5); act 8's requests have the same.
const BUDGET: Duration = Duration::from_millis(1500);
/// Pricing's latency once it degrades, far past its call timeout (act 5);
/// how long act 8's search holds its first request.
const PRICING_SLOW: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> ExitCode {
    // Act 7 starts this program again as its worker processes.
    #[cfg(feature = "redis")]
    if let Some(code) = global_limit::run_worker_if_asked().await {
        return code;
    }
    // Acts 1–6 on one server; act 6's exporters registered at start-up.
    let stage = storefront::Stage::start().await;
    let exporters = integrations::Exporters::register(&stage);
    bulkheads::acts_1_to_3(&stage).await;
    breaker::act_4(&stage).await;
    budget::act_5(&stage).await;
    integrations::act_6(&stage, &exporters).await;
    let code = act_7().await;
    retries::act_8().await;
    rate::act_9().await;
    partitions::act_10().await;
    hedging::act_11().await;
    act_12().await;
    act_13().await;
    code
}

/// Act 13: stale prices, marked with their age, while pricing is down.
#[cfg(feature = "chaos")]
async fn act_13() {
    let setup = degrade::Setup::TOUR;
    header(
        "Act 13: serve stale, marked with its age — a fault injector fails pricing, its breaker opens, the page keeps its price",
        &format!(
            "GET /price/{{sku}} behind a ChaosLayer (seeded; on: every request answered 503 by the injector); \
             GET /product/{{sku}} asks it through a StaleCacheLayer (max staleness {} s) over a PolicyLayer \
             (breaker: window 4, opens at 50 % failed, open {} ms, 1 probe); a page every {} ms of the outage",
            degrade::MAX_STALENESS.as_secs(),
            setup.open.as_millis(),
            setup.step.as_millis()
        ),
    );
    let run = degrade::run(setup).await;
    degrade::print(&run);
    println!(
        "  -> while pricing failed and while its breaker was open the page kept its price, marked with \
         its age (measured on the tour's clock); the refused pages sent pricing nothing; once the injector \
         was off and the open wait over, one probe closed the breaker and the prices were fresh again"
    );
}

/// Act 13 without the `chaos` feature: one line.
#[cfg(not(feature = "chaos"))]
async fn act_13() {
    println!();
    println!(
        "== Act 13: serve stale, marked with its age: skipped, it needs the chaos feature \
         (--features tokio,tower,metrics,http,chaos)"
    );
}

/// Act 12: the request budget across three hops.
#[cfg(feature = "http")]
async fn act_12() {
    header(
        "Act 12: the budget travels — A (300 ms) → B → C (a 1 s job), over loopback HTTP",
        &format!(
            "x-request-timeout-ms set by OutboundDeadlineLayer (what is left minus a {} ms margin), \
             read by InboundDeadlineLayer (each server's own maximum 10 s); C checks its \
             Deadline before each 10 ms step of its job",
            hops::MARGIN.as_millis()
        ),
    );
    let with = hops::run(true, hops::PATIENCE).await;
    hops::print("with the header:", &with);
    let without = hops::run(false, hops::PATIENCE).await;
    hops::print("header off:", &without);
    println!(
        "  -> with the header C stops before A's {} ms are up and nobody works for a caller who has gone; \
         without it A gives up just the same, and C works its full second for nobody",
        hops::BUDGET.as_millis()
    );
}

/// Act 12 without the `http` feature: one line.
#[cfg(not(feature = "http"))]
async fn act_12() {
    println!();
    println!(
        "== Act 12: the budget travels across three hops: skipped, it needs the http feature \
         (--features tokio,tower,metrics,http,chaos)"
    );
}

/// Act 7: one limit across processes, on Redis.
#[cfg(feature = "redis")]
async fn act_7() -> ExitCode {
    let title = "Act 7: one limit across processes — 4 workers, a Bulkhead of 20 each, then one GlobalBulkhead of 20, per call and leased";
    let Some(redis_server) = global_limit::redis_server_on_path() else {
        println!();
        println!(
            "== {title}: skipped, no redis-server on PATH (to run it: {})",
            global_limit::HOW_TO_ENABLE
        );
        return ExitCode::SUCCESS;
    };
    header(title, &global_limit::setup());
    match global_limit::run(&redis_server).await {
        Ok(reports) => {
            global_limit::print_table(&reports, "  ");
            println!("  -> {}", global_limit::conclusion(&reports));
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("  act 7 failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Act 7 without the `redis` feature: one line.
#[cfg(not(feature = "redis"))]
async fn act_7() -> ExitCode {
    println!();
    println!(
        "== Act 7: one limit across processes: skipped, it needs the redis feature \
         (--features tokio,tower,metrics,http,chaos,redis; rustc 1.88) and a redis-server on PATH \
         (apt-get install -y redis-server)"
    );
    ExitCode::SUCCESS
}

// ---------------------------------------------------------------- shared by the acts

/// A JSON body with its content type.
type Json = ([(HeaderName, &'static str); 1], String);

fn json(body: String) -> Json {
    ([(CONTENT_TYPE, "application/json")], body)
}

fn ms(d: Duration) -> u128 {
    (d.as_micros() + 500) / 1000
}

fn header(title: &str, setup: &str) {
    println!();
    println!("== {title}");
    println!("   {setup}");
    println!();
}

/// Prints events as `+  12 ms  what`, in ms since the act began, by the
/// breaker's clock.
#[derive(Clone, Copy)]
struct Timeline {
    start: clock::Instant,
}

impl Timeline {
    fn start() -> Self {
        Timeline {
            start: TokioClock.now(),
        }
    }

    fn at(&self, t: clock::Instant, what: impl Display) {
        println!(
            "  +{:>4} ms  {what}",
            ms(t.saturating_duration_since(self.start))
        );
    }

    fn now(&self, what: impl Display) {
        self.at(TokioClock.now(), what)
    }
}

fn upper(state: BreakerState) -> String {
    state.as_str().to_uppercase()
}
