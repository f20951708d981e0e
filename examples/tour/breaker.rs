//! Act 4, the circuit breaker: `/shipping-rate` starts answering 503, and
//! the client calls it one call at a time through a [`CircuitBreaker`]
//! whose classifier counts a 5xx or no answer as a failure; printed as a
//! timeline, one line per event.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use watertight::breaker::{
    OnTransition, Outcome as BreakerOutcome, State as BreakerState, Transition,
};
use watertight::clock::TokioClock;
use watertight::{BreakerConfig, CallError, CircuitBreaker, Rejection};

use crate::storefront::Stage;
use crate::{header, upper, Timeline, FAST};

/// How long act 4's breaker stays open before probes may pass
/// ([`BreakerConfig::DEFAULT`]'s 30 s, scaled down).
const OPEN_WAIT: Duration = Duration::from_millis(500);

/// Act 4: the slow endpoint goes down; a breaker stops calling it.
pub async fn act_4(stage: &Stage) {
    let (client, base) = (&stage.client, stage.base.as_str());
    let shipping_service = &stage.shipping;
    header(
        "Act 4: a circuit breaker — shipping goes down, the calls stop, it comes back",
        &format!(
            "breaker \"shipping\": window 10, minimum 5 calls, failure rate 50 %, open {} ms, \
             3 probes; a 5xx or no answer is a failure; one call at a time",
            OPEN_WAIT.as_millis()
        ),
    );
    let config = BreakerConfig::builder()
        .window_size(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN_WAIT)
        .half_open_calls(3)
        .build()
        .expect("breaker config");
    let timeline = Timeline::start();
    // The listener is told about every state change as it happens.
    let breaker: CircuitBreaker<TokioClock, 10, _> =
        CircuitBreaker::with_listener("shipping", config, TokioClock, move |t: &Transition| {
            timeline.at(
                t.at,
                format_args!("breaker {} -> {}", upper(t.from), upper(t.to)),
            )
        });
    let url = format!("{base}/shipping-rate?zip_code=94107");
    let hits_before = shipping_service.hits.load(SeqCst);
    let hits = || shipping_service.hits.load(SeqCst) - hits_before;

    shipping_service.down.store(true, SeqCst);
    timeline.now("server: /shipping-rate goes down, answers 503 at once");
    let mut refused = Vec::new();
    for n in 1..=8 {
        let before = breaker.state();
        refused.extend(call_through(&breaker, client, &url, n, timeline).await);
        if before == BreakerState::Closed && breaker.state() == BreakerState::Open {
            // The window is kept as it was when it opened: it shows why.
            let m = breaker.metrics();
            println!(
                "            (window: {} failures of {} calls = {:.0} %, threshold {:.0} %)",
                m.failed_calls,
                m.calls,
                m.failure_rate.unwrap_or_default(),
                config.failure_rate_threshold()
            );
        }
    }
    timeline.now(format_args!(
        "server: {} requests so far; the {} refused calls never reached it",
        hits(),
        refused.len()
    ));

    shipping_service.healthy.store(true, SeqCst);
    shipping_service.down.store(false, SeqCst);
    timeline.now(format_args!(
        "server: /shipping-rate is back, healthy ({} ms)",
        FAST.as_millis()
    ));
    let hint = refused.last().and_then(Rejection::retry_after);
    let wait = hint.unwrap_or(OPEN_WAIT);
    timeline.now(format_args!(
        "client sleeps {:.2} ms, as the last refusal said",
        wait.as_secs_f64() * 1e3
    ));
    tokio::time::sleep(wait).await;
    timeline.now(format_args!(
        "state() says {}: the open wait is over, the next call is a probe",
        upper(breaker.state())
    ));
    for n in 9..=12 {
        refused.extend(call_through(&breaker, client, &url, n, timeline).await);
    }

    let m = breaker.metrics();
    println!();
    println!(
        "  breaker {:<12} {}, {} call(s) in its new window ({} failed), rejected {}",
        format!("{:?}:", breaker.name()),
        m.state,
        m.calls,
        m.failed_calls,
        m.rejected
    );
    println!(
        "  -> 12 calls, {} requests reached the server: the {} calls refused while open \
         cost no request and no wait, and came with a retry hint; {} probes closed it \
         (open {} ms here, 30 s by default)",
        hits(),
        refused.len(),
        config.half_open_calls(),
        OPEN_WAIT.as_millis()
    );
}

/// What the client makes of one HTTP call: the status, or no answer at all.
type Answer = Result<reqwest::StatusCode, reqwest::Error>;

/// The caller decides what a failure is: a 5xx, or no answer at all, is the
/// system failing; any other status (a 404 too) is an answer.
fn classify(answer: &Answer) -> BreakerOutcome {
    match answer {
        Ok(status) if status.is_server_error() => BreakerOutcome::Failure,
        Ok(_) => BreakerOutcome::Success,
        Err(_) => BreakerOutcome::Failure,
    }
}

/// One GET, its body read to the end (so the connection goes back to the pool).
async fn get_status(client: reqwest::Client, url: String) -> Answer {
    let response = client.get(&url).send().await?;
    let status = response.status();
    response.bytes().await?;
    Ok(status)
}

/// One call through `breaker`, its answer or refusal on the timeline; returns
/// the refusal, if it was refused.
async fn call_through<H: OnTransition>(
    breaker: &CircuitBreaker<TokioClock, 10, H>,
    client: &reqwest::Client,
    url: &str,
    n: usize,
    timeline: Timeline,
) -> Option<Rejection> {
    // `state()` consults the clock: it says half-open once the open wait is
    // over, before the call that begins the episode.
    let probe = if breaker.state() == BreakerState::HalfOpen {
        " (probe)"
    } else {
        ""
    };
    // The classifier sees the answer first and puts it on the timeline; the
    // breaker then records the outcome (and its listener any transition).
    let note = move |answer: &Answer| {
        let outcome = classify(answer);
        let what = match answer {
            Ok(status) => status.as_u16().to_string(),
            Err(e) => format!("no answer ({e})"),
        };
        let verdict = match outcome {
            BreakerOutcome::Success => "success",
            BreakerOutcome::Failure => "failure",
            BreakerOutcome::Ignored => "ignored",
        };
        timeline.now(format_args!("call {n}{probe} -> {what} ({verdict})"));
        outcome
    };
    let request = get_status(client.clone(), url.to_owned());
    match breaker.call_with(request, note).await {
        Ok(_) | Err(CallError::Failed(_)) => None,
        Err(CallError::Rejected(why)) => {
            let reason = match why.retry_after() {
                Some(hint) => format!("open, retry after {:.2} ms", hint.as_secs_f64() * 1e3),
                None => why.to_string(),
            };
            timeline.now(format_args!("call {n} refused: {reason}"));
            Some(why)
        }
    }
}
