//! Act 8, retries within the request budget, on a search server of its
//! own: a call the call timeout cuts is retried once inside its budget;
//! then, search down, a storm of calls the retry budget stops, against a
//! loop that retries with no budget.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use watertight::clock::TokioClock;
use watertight::deadline::Deadline;
use watertight::retry::RetryConfig;
use watertight::{BreakerConfig, Policy, PolicyConfig};

use crate::{header, json, ms, net, Json, Timeline, BUDGET, FAST, PRICING_SLOW};

/// Calls in act 8's storm, one after another.
const STORM: usize = 30;
/// Outcomes search's breaker waits for before it judges: more than act 8
/// makes, so that the budget alone is at work there.
const SEARCH_JUDGES_AFTER: usize = 50;

/// The search service act 8 calls: its switches and its request count.
#[derive(Default)]
struct Search {
    /// Requests still to hold for `PRICING_SLOW` before answering (each
    /// held request takes one).
    hold: AtomicUsize,
    /// Down: every request is answered 503 at once.
    down: AtomicBool,
    /// Requests that reached the handler, answered or not.
    hits: AtomicUsize,
}

async fn search(
    State(service): State<Arc<Search>>,
    Path(q): Path<String>,
) -> Result<Json, (StatusCode, Json)> {
    service.hits.fetch_add(1, SeqCst);
    if service.down.load(SeqCst) {
        let body = r#"{"error":"search unavailable"}"#;
        return Err((StatusCode::SERVICE_UNAVAILABLE, json(body.to_owned())));
    }
    let held = service
        .hold
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok();
    tokio::time::sleep(if held { PRICING_SLOW } else { FAST }).await;
    Ok(json(format!(r#"{{"q":"{q}","results":3}}"#)))
}

/// Why a search attempt failed: a 5xx, or no answer. An error, so that
/// the policy's default classifier calls it a failure and retries it.
#[derive(Debug)]
enum SearchError {
    Status(u16),
    Transport(reqwest::Error),
}

impl Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::Status(s) => write!(f, "status {s}"),
            SearchError::Transport(e) => write!(f, "no answer: {e}"),
        }
    }
}

/// One attempt: `GET url`, its body if the status is not a 5xx.
async fn get_search(client: reqwest::Client, url: String) -> Result<String, SearchError> {
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(SearchError::Transport)?;
    let status = response.status();
    if status.is_server_error() {
        return Err(SearchError::Status(status.as_u16()));
    }
    response.text().await.map_err(SearchError::Transport)
}

/// Search: 4 at once, a slot within 50 ms, 300 ms per call, a breaker that
/// judges only after `SEARCH_JUDGES_AFTER` calls (so that in act 8 the
/// budget alone stops the retries), and the default retry config with a fixed jitter seed (so
/// that every run draws the same backoffs).
fn search_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(SEARCH_JUDGES_AFTER)
        .minimum_calls(SEARCH_JUDGES_AFTER)
        .build()
        .expect("search breaker");
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .retry(RetryConfig::builder().seed(8))
        .build()
        .expect("search policy")
}

/// Act 8: a timed-out call retried once within its budget, and a storm
/// that the retry budget stops.
pub async fn act_8() {
    let service = Arc::new(Search::default());
    let base = net::serve(
        Router::new()
            .route("/search/{q}", get(search))
            .with_state(service.clone()),
    )
    .await;
    let client = net::client();
    let config = search_policy();
    let retry = *config.retry();
    let search: Policy<TokioClock> =
        Policy::new("search", config, TokioClock).expect("search policy");
    let hits = || service.hits.load(SeqCst);

    header(
        "Act 8: retries within the budget — a timed-out call retried once, a storm the budget stops",
        &format!(
            "policy \"search\": {} at once, call timeout {} ms; call_idempotent(..).within(&budget) \
             with the default retries: {} attempts, backoff {} ms doubling to {} s with full jitter, \
             no attempt with under {} ms of the budget left;\n   \
             retry budget {} tokens: a failure takes one, a success gives {} % of one back, \
             a failed call is retried only while more than half is left; {} ms per request",
            config.max_concurrent(),
            config.call_timeout().as_millis(),
            retry.max_attempts(),
            retry.base_backoff().as_millis(),
            retry.max_backoff().as_secs(),
            retry.min_attempt_time().as_millis(),
            retry.budget_max_tokens(),
            retry.budget_ratio_percent(),
            BUDGET.as_millis(),
        ),
    );
    let timeline = Timeline::start();
    service.hold.store(1, SeqCst);
    let url = format!("{base}/search/boots");
    let attempts = AtomicUsize::new(0);
    let request = Deadline::after(TokioClock, BUDGET);
    let answer = search
        .call_idempotent(|| {
            let n = attempts.fetch_add(1, SeqCst) + 1;
            let held = if n == 1 {
                " (search holds this one 3 s)"
            } else {
                ""
            };
            timeline.now(format_args!("attempt {n}: GET /search/boots{held}"));
            get_search(client.clone(), url.clone())
        })
        .within(&request)
        .await;
    match &answer {
        Ok(body) => timeline.now(format_args!("answered {body}")),
        Err(e) => timeline.now(format_args!("failed: {e}")),
    }
    let m = search.retry_metrics();
    println!(
        "  -> attempt 1 was cut at its {} ms call timeout and retried once, inside the \
         request's {} ms ({} left): {} retry after a timeout, {} requests reached search, \
         {:.1} of {} tokens left",
        config.call_timeout().as_millis(),
        BUDGET.as_millis(),
        ms(request.remaining()),
        m.after_timeout,
        hits(),
        search.retry_budget().tokens(),
        retry.budget_max_tokens()
    );

    println!();
    service.down.store(true, SeqCst);
    timeline.now("server: /search goes down, answers 503 at once");
    let (before, hits_before) = (search.retry_metrics(), hits());
    let mut failed = 0;
    for i in 0..STORM {
        let url = format!("{base}/search/q{i}");
        let request = Deadline::after(TokioClock, BUDGET);
        let r = search
            .call_idempotent(|| get_search(client.clone(), url.clone()))
            .within(&request)
            .await;
        failed += usize::from(r.is_err());
    }
    let m = search.retry_metrics();
    let ours = hits() - hits_before;
    timeline.now(format_args!(
        "{STORM} calls through call_idempotent: {failed} failed; {ours} requests reached \
         search: {} retries, then the budget refused {} ({:.1} tokens left)",
        m.after_failure - before.after_failure,
        m.budget_exhausted - before.budget_exhausted,
        search.retry_budget().tokens()
    ));
    let hits_before = hits();
    for i in 0..STORM {
        let url = format!("{base}/search/q{i}");
        for _ in 0..4 {
            if get_search(client.clone(), url.clone()).await.is_ok() {
                break;
            }
        }
    }
    let naive = hits() - hits_before;
    timeline.now(format_args!(
        "the same {STORM} calls in a loop that retries 3 times, no delay, no budget: \
         {naive} requests reached search"
    ));
    let b = search.breaker().metrics();
    println!(
        "  -> the budget let {} of {STORM} failing calls retry and then stopped: {ours} \
         requests for {STORM} calls, where the loop sent {naive}; breaker {} ({} failures of \
         {} calls, it judges after {})",
        m.after_failure - before.after_failure,
        b.state,
        b.failed_calls,
        b.calls,
        SEARCH_JUDGES_AFTER
    );
}
