//! The `tracing` feature's events, captured by a small subscriber of this
//! file's own: exactly one event per breaker transition and per rejection,
//! with the system's name and the documented fields.
//!
//! Which layer emits what (so that no refusal is logged twice):
//!
//! | event | level | target | fields |
//! |-------|-------|--------|--------|
//! | breaker transition | INFO | `watertight::breaker` | `system`, `from`, `to`; a trip from closed adds `window` (`count`, `time`, `consecutive`), `calls`, `failures`, `slow` |
//! | breaker refusal | DEBUG | `watertight::breaker` | `system`, `reason` (`open`, `probes_busy`, `forced_open`), `retry_after_ms` when open |
//! | bulkhead refusal | DEBUG | `watertight::bulkhead` | `system`, `reason` (`full`, `timed_out`, `closed`) |
//! | partitioned bulkhead refusal | DEBUG | `watertight::partition` | `system`, `class` (the class's name), `reason` (`full`, `timed_out`, `closed`, `queue_full`); after its room's bulkhead refusal event |
//! | rate limiter refusal | DEBUG | `watertight::rate` | `system`, `retry_after_ms` (rounded up) |
//! | adaptive throttle refusal | DEBUG | `watertight::throttle` | `system`, `probability` (the one the request met, 0 to 1) |
//! | policy refusal not seen by a layer | DEBUG | `watertight::policy` | `system`, `reason` (`deadline_exceeded`), `by_budget` |
//! | retry of an idempotent call | INFO | `watertight::policy` | `system`, `reason` (`failure`, `timeout`), `attempt` (the one about to start: 2 for the first retry), `backoff_ms` |
//! | retry refused by the retry budget | DEBUG | `watertight::policy` | `system` |
//! | adaptive limit change | INFO | `watertight::limit::adaptive` | `system`, `from`, `to`, and the window's `successes`, `avg_rtt_us`, `dropped`, `timed_out` |
//! | fault injected (feature `chaos`) | DEBUG | `watertight::chaos` | `system`, `fault` (`error`, `outcome`, `latency`, `hang`), `latency_ms` for a latency |
//! | stale answer served | DEBUG | `watertight::fallback` | `system`, `age_ms` (rounded down) |
//! | no stale answer to serve | DEBUG | `watertight::fallback` | `system`, `reason` (`absent`, `too_old`) |
//! | hedge not sent | DEBUG | `watertight::hedge` | `system`, `outcome` (`not_sent_budget`, `not_sent_bulkhead`, `not_sent_breaker`, `not_sent_limited`); after the refusing layer's own event, if a layer refused |
//!
//! A retry is one event, before its backoff; a failed attempt emits
//! nothing of its own (a timed-out one emits the policy's timeout event
//! first). A policy refused by its rate limit, its bulkhead (full, or timed
//! out waiting) or its breaker emits only that layer's event. The one
//! refusal logged twice is a partitioned bulkhead's: its class's room is a
//! bulkhead and emits the bulkhead event (`system`, `reason`, as every
//! bulkhead does), then the partition emits its own, which names the class;
//! keep one of them by target (`watertight::partition` for the class). Every test here runs on one thread
//! under `tracing::subscriber::with_default`, on a `ManualClock`: events
//! from tests running at the same time on other threads are not seen.
#![cfg(not(loom))]
#![cfg(feature = "tracing")]

#[path = "support/tracing_capture.rs"]
mod tracing_capture;

use std::cell::Cell;
use std::future::IntoFuture;
use std::pin::pin;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use tracing::Level;
use tracing_capture::{capture, Captured};
use watertight::breaker::TimeBreaker;
use watertight::clock::ManualClock;
use watertight::deadline::Deadline;
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::retry::{RetryConfig, RetryConfigBuilder};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CircuitBreaker, Rejection};

/// The events' fields as (name, value) pairs, without the message: what the
/// assertions compare.
fn summary(events: &[Captured]) -> Vec<Vec<(String, String)>> {
    events
        .iter()
        .map(|e| {
            e.fields
                .iter()
                .filter(|(k, _)| *k != "message")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn transition(system: &str, from: &str, to: &str) -> Vec<(String, String)> {
    pairs(&[("from", from), ("system", system), ("to", to)])
}

/// A closed breaker's trip: the transition, the window that opened it and
/// the numbers it opened on.
fn tripped(
    system: &str,
    window: &str,
    calls: usize,
    failures: usize,
    slow: usize,
) -> Vec<(String, String)> {
    let (calls, failures, slow) = (calls.to_string(), failures.to_string(), slow.to_string());
    pairs(&[
        ("calls", &calls),
        ("failures", &failures),
        ("from", "closed"),
        ("slow", &slow),
        ("system", system),
        ("to", "open"),
        ("window", window),
    ])
}

#[test]
fn a_trip_says_which_window_opened_the_breaker_and_on_what_numbers() {
    let clock = ManualClock::new();
    let time = BreakerConfig::builder()
        .time_window(Duration::from_secs(10), 5)
        .minimum_calls(3)
        .failure_rate_threshold(50.0)
        .build()
        .unwrap();
    let by_time: TimeBreaker<_, 5> = TimeBreaker::new("search", time, &clock);
    let run = BreakerConfig::builder()
        .consecutive_failures(3)
        .build()
        .unwrap();
    let in_a_row: CircuitBreaker<_, 1> = CircuitBreaker::new("ledger", run, &clock);

    let ((), events) = capture(|| {
        by_time.try_acquire().unwrap().success();
        clock.advance(Duration::from_secs(3));
        by_time.try_acquire().unwrap().failure();
        by_time.try_acquire().unwrap().failure(); // 2 of 3 in the last 10 s
        in_a_row.try_acquire().unwrap().failure();
        in_a_row.try_acquire().unwrap().success(); // the run ends
        for _ in 0..3 {
            in_a_row.try_acquire().unwrap().failure();
        }
    });
    assert_eq!(
        summary(&events),
        vec![
            tripped("search", "time", 3, 2, 0),
            tripped("ledger", "consecutive", 3, 3, 0),
        ],
        "{events:#?}"
    );
}

#[test]
fn one_event_per_breaker_transition_and_rejection() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(2)
        .failure_rate_threshold(50.0)
        .open_duration(Duration::from_secs(30))
        .half_open_calls(2)
        .build()
        .unwrap();
    let breaker: CircuitBreaker<_, 4> = CircuitBreaker::new("payments", config, &clock);

    let ((), events) = capture(|| {
        breaker.try_acquire().unwrap().success();
        breaker.try_acquire().unwrap().failure(); // 1 of 2: opens
        assert!(matches!(breaker.try_acquire(), Err(Rejection::Open { .. })));
        clock.advance(Duration::from_millis(10_500));
        assert!(matches!(breaker.try_acquire(), Err(Rejection::Open { .. })));
        clock.advance(Duration::from_secs(20));
        let first = breaker.try_acquire().unwrap(); // the first probe: half-open
        let second = breaker.try_acquire().unwrap();
        assert_eq!(breaker.try_acquire().unwrap_err(), Rejection::ProbesBusy);
        first.success();
        second.success(); // closes
        breaker.force_open();
        assert_eq!(breaker.try_acquire().unwrap_err(), Rejection::ForcedOpen);
        breaker.reset();
        breaker.disable();
    });

    let expected = vec![
        tripped("payments", "count", 2, 1, 0),
        pairs(&[
            ("reason", "open"),
            ("retry_after_ms", "30000"),
            ("system", "payments"),
        ]),
        pairs(&[
            ("reason", "open"),
            ("retry_after_ms", "19500"),
            ("system", "payments"),
        ]),
        transition("payments", "open", "half_open"),
        pairs(&[("reason", "probes_busy"), ("system", "payments")]),
        transition("payments", "half_open", "closed"),
        transition("payments", "closed", "forced_open"),
        pairs(&[("reason", "forced_open"), ("system", "payments")]),
        transition("payments", "forced_open", "closed"),
        transition("payments", "closed", "disabled"),
    ];
    assert_eq!(summary(&events), expected, "{events:#?}");
    for e in &events {
        assert_eq!(e.target, "watertight::breaker");
        let want = if e.fields.contains_key("to") {
            Level::INFO
        } else {
            Level::DEBUG
        };
        assert_eq!(e.level, want, "{e:?}");
        assert!(e.field("message").is_some(), "{e:?}");
    }
    // As many rejection events as the breaker counted.
    let rejections = events.iter().filter(|e| e.field("reason").is_some());
    assert_eq!(rejections.count(), breaker.metrics().rejected);
}

#[test]
fn one_event_per_bulkhead_rejection() {
    let clock = ManualClock::new();
    let bulkhead = Bulkhead::new("inventory", 1, &clock);

    let ((), events) = capture(|| {
        let held = bulkhead.try_acquire().unwrap();
        assert_eq!(bulkhead.try_acquire().unwrap_err(), AcquireError::Full);
        // A wait that runs out.
        let mut wait = pin!(bulkhead.acquire_timeout(Duration::from_millis(100)));
        assert!(block_on(poll_once(wait.as_mut())).is_none());
        clock.advance(Duration::from_millis(100));
        assert_eq!(block_on(wait).unwrap_err(), AcquireError::TimedOut);
        // An error in the request is not a rejection: no event.
        assert!(matches!(
            bulkhead.try_acquire_many(5),
            Err(AcquireError::ExceedsCapacity { .. })
        ));
        drop(held);
        bulkhead.close();
        assert_eq!(bulkhead.try_acquire().unwrap_err(), AcquireError::Closed);
    });

    let expected = vec![
        pairs(&[("reason", "full"), ("system", "inventory")]),
        pairs(&[("reason", "timed_out"), ("system", "inventory")]),
        pairs(&[("reason", "closed"), ("system", "inventory")]),
    ];
    assert_eq!(summary(&events), expected, "{events:#?}");
    for e in &events {
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, "watertight::bulkhead")
        );
    }
    assert_eq!(bulkhead.metrics().rejected(), events.len());
}

fn policy(clock: &ManualClock) -> Policy<&ManualClock, 8> {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(8)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .call_timeout(Duration::from_secs(2))
        .breaker(breaker)
        .build()
        .unwrap();
    Policy::new("stock", config, clock).unwrap()
}

async fn ok() -> Result<u32, &'static str> {
    Ok(7)
}

#[test]
fn a_policy_refusal_is_one_event_from_the_layer_that_refused() {
    let clock = ManualClock::new();
    let stock = policy(&clock);

    // Bulkhead full: the bulkhead's event only.
    let (err, events) = capture(|| {
        let _held = stock.bulkhead().try_acquire().unwrap();
        block_on(stock.call(ok)).unwrap_err()
    });
    assert_eq!(err.kind(), &ErrorKind::BulkheadFull);
    assert_eq!(
        summary(&events),
        vec![pairs(&[("reason", "full"), ("system", "stock")])]
    );
    assert_eq!(events[0].target, "watertight::bulkhead");

    // Breaker refused: the breaker's event only (its transition is outside).
    stock.breaker().force_open();
    let (err, events) = capture(|| block_on(stock.call(ok)).unwrap_err());
    assert_eq!(err.kind(), &ErrorKind::CircuitOpen(Rejection::ForcedOpen));
    assert_eq!(
        summary(&events),
        vec![pairs(&[("reason", "forced_open"), ("system", "stock")])]
    );
    assert_eq!(events[0].target, "watertight::breaker");
    stock.breaker().reset();

    // A request budget already spent: the policy's event.
    let (err, events) = capture(|| {
        let spent = Deadline::after(&clock, Duration::ZERO);
        block_on(stock.call_within(&spent, ok)).unwrap_err()
    });
    assert_eq!(err.kind(), &ErrorKind::DeadlineExceeded);
    assert_eq!(
        summary(&events),
        vec![pairs(&[
            ("by_budget", "true"),
            ("reason", "deadline_exceeded"),
            ("system", "stock"),
        ])]
    );
    assert_eq!(
        (events[0].level, events[0].target.as_str()),
        (Level::DEBUG, "watertight::policy")
    );

    // Out of the call timeout: the policy's event (the failure it records
    // does not trip this breaker: 1 of at least 8 calls).
    let (err, events) = capture(|| {
        let mut call = pin!(stock.call(std::future::pending::<Result<u32, &str>>));
        assert!(block_on(poll_once(call.as_mut())).is_none());
        clock.advance(Duration::from_secs(2));
        block_on(call).unwrap_err()
    });
    assert_eq!(err.kind(), &ErrorKind::DeadlineExceeded);
    assert_eq!(
        summary(&events),
        vec![pairs(&[
            ("by_budget", "false"),
            ("reason", "deadline_exceeded"),
            ("system", "stock"),
        ])]
    );
    assert_eq!(stock.breaker().metrics().failed_calls, 1);

    // Closed: the bulkhead refuses and reports it, once, and counts it.
    stock.bulkhead().close();
    let (err, events) = capture(|| block_on(stock.call(ok)).unwrap_err());
    assert_eq!(err.kind(), &ErrorKind::BulkheadClosed);
    assert_eq!(
        summary(&events),
        vec![pairs(&[("reason", "closed"), ("system", "stock")])]
    );
    assert_eq!(events[0].target, "watertight::bulkhead");
    assert_eq!(stock.bulkhead().metrics().rejected_closed, 1);
}

#[test]
fn a_call_timeout_that_trips_the_breaker_is_a_transition_then_the_timeout() {
    let clock = ManualClock::new();
    let breaker = BreakerConfig::builder()
        .window_size(2)
        .minimum_calls(1)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .call_timeout(Duration::from_secs(1))
        .breaker(breaker)
        .build()
        .unwrap();
    let shipping: Policy<_, 2> = Policy::new("shipping", config, &clock).unwrap();

    let (err, events) = capture(|| {
        let mut call = pin!(shipping.call(std::future::pending::<Result<(), ()>>));
        assert!(block_on(poll_once(call.as_mut())).is_none());
        clock.advance(Duration::from_secs(1));
        block_on(call).unwrap_err()
    });
    assert_eq!(err.kind(), &ErrorKind::DeadlineExceeded);
    assert_eq!(
        summary(&events),
        vec![
            tripped("shipping", "count", 1, 1, 0),
            pairs(&[
                ("by_budget", "false"),
                ("reason", "deadline_exceeded"),
                ("system", "shipping"),
            ]),
        ]
    );
    assert_eq!(events[0].level, Level::INFO);
}

/// Polls `fut` to its end on this thread, advancing the clock 10 ms
/// whenever it waits (a backoff or a call timeout).
fn drive<F: std::future::Future>(clock: &ManualClock, fut: F) -> F::Output {
    let mut fut = pin!(fut);
    for _ in 0..10_000 {
        if let Some(out) = block_on(poll_once(fut.as_mut())) {
            return out;
        }
        clock.advance(Duration::from_millis(10));
    }
    panic!("the call never finished");
}

fn retrying_policy(clock: &ManualClock, retry: RetryConfigBuilder) -> Policy<&ManualClock, 8> {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(8)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(4)
        .call_timeout(Duration::from_millis(100))
        .breaker(breaker)
        .retry(retry.seed(7))
        .build()
        .unwrap();
    Policy::new("search", config, clock).unwrap()
}

/// The INFO events (the retries), each as its fields but `backoff_ms`,
/// which is checked against the backoff cap.
fn retries(events: &[Captured], cap_ms: u64) -> Vec<Vec<(String, String)>> {
    let infos: Vec<Captured> = events
        .iter()
        .filter(|e| e.level == Level::INFO)
        .cloned()
        .collect();
    for e in &infos {
        assert_eq!(e.target, "watertight::policy");
        assert_eq!(e.field("message"), Some("retrying a call"));
        let ms: u64 = e.field("backoff_ms").expect("backoff_ms").parse().unwrap();
        assert!(ms <= cap_ms, "backoff {ms} ms over the cap {cap_ms} ms");
    }
    infos
        .iter()
        .map(|e| {
            e.fields
                .iter()
                .filter(|(k, _)| *k != "message" && *k != "backoff_ms")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

#[test]
fn one_info_event_per_retry_with_its_reason_and_attempt() {
    let clock = ManualClock::new();
    let search = retrying_policy(&clock, RetryConfig::builder().max_attempts(3));

    // Fails twice, then answers: two retries, attempts 2 and 3.
    let tries = Cell::new(0);
    let (out, events) = capture(|| {
        drive(
            &clock,
            search
                .call_idempotent(|| {
                    tries.set(tries.get() + 1);
                    let n = tries.get();
                    async move {
                        if n < 3 {
                            Err("reset")
                        } else {
                            Ok(n)
                        }
                    }
                })
                .into_future(),
        )
    });
    assert_eq!(out, Ok(3));
    assert_eq!(
        retries(&events, 100),
        vec![
            pairs(&[
                ("attempt", "2"),
                ("reason", "failure"),
                ("system", "search")
            ]),
            pairs(&[
                ("attempt", "3"),
                ("reason", "failure"),
                ("system", "search")
            ]),
        ]
    );
    assert_eq!(events.len(), 2, "{events:?}");

    // Times out once: the timeout's DEBUG event, then the retry's.
    let tries = Cell::new(0);
    let (out, events) = capture(|| {
        drive(
            &clock,
            search
                .call_idempotent(|| {
                    tries.set(tries.get() + 1);
                    let first = tries.get() == 1;
                    async move {
                        if first {
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, &str>(0)
                    }
                })
                .into_future(),
        )
    });
    assert_eq!(out, Ok(0));
    assert_eq!(
        retries(&events, 50),
        vec![pairs(&[
            ("attempt", "2"),
            ("reason", "timeout"),
            ("system", "search"),
        ])]
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].field("reason"), Some("deadline_exceeded"));

    // A success, and a plain call that fails: no retry, no event.
    let (_, events) = capture(|| {
        drive(&clock, search.call_idempotent(ok).into_future()).unwrap();
        drive(&clock, search.call(|| async { Err::<(), _>("reset") })).unwrap_err();
    });
    assert_eq!(events, vec![]);
}

#[test]
fn a_retry_the_budget_refuses_is_one_debug_event() {
    let clock = ManualClock::new();
    // Two tokens: the first failure leaves one, not more than half.
    let search = retrying_policy(&clock, RetryConfig::builder().budget(2, 10.0));
    let (out, events) = capture(|| {
        drive(
            &clock,
            search
                .call_idempotent(|| async { Err::<(), _>("down") })
                .into_future(),
        )
    });
    assert_eq!(out.unwrap_err().into_inner(), Some("down"));
    assert_eq!(search.retry_metrics().budget_exhausted, 1);
    assert_eq!(summary(&events), vec![pairs(&[("system", "search")])]);
    assert_eq!(
        (
            events[0].level,
            events[0].target.as_str(),
            events[0].field("message")
        ),
        (
            Level::DEBUG,
            "watertight::policy",
            Some("retry budget exhausted: the failed call is not retried")
        )
    );
}

/// One INFO event per window that moves an adaptive bulkhead's limit, none
/// for a window that leaves it where it was.
#[test]
fn one_event_per_adaptive_limit_change() {
    use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};

    let clock = ManualClock::new();
    let aimd = Aimd::builder()
        .min_limit(1)
        .initial_limit(10)
        .build()
        .unwrap();
    let b = AdaptiveBulkhead::with_window("catalog", aimd, Duration::from_secs(1), 1, &clock);
    let ((), events) = capture(|| {
        // Window 1: a drop (10 → 9). Window 2: one quick success with 1 in
        // flight, 2 × 1 < 9: unchanged. Window 3: a timeout (9 → 8).
        for signal in [Signal::Dropped, Signal::Success, Signal::Timeout] {
            let call = b.try_acquire().unwrap();
            clock.advance(Duration::from_secs(1));
            call.record(signal);
        }
    });
    let changes: Vec<_> = events
        .iter()
        .filter(|e| e.field("message") == Some("bulkhead limit changed"))
        .collect();
    assert_eq!(changes.len(), 2, "{events:?}");
    assert!(changes.iter().all(|e| e.level == Level::INFO));
    assert!(changes
        .iter()
        .all(|e| e.target == "watertight::limit::adaptive"));
    let got: Vec<_> = changes
        .iter()
        .map(|e| {
            (
                e.field("system"),
                e.field("from"),
                e.field("to"),
                e.field("dropped"),
                e.field("timed_out"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("catalog"), Some("10"), Some("9"), Some("1"), Some("0")),
            (Some("catalog"), Some("9"), Some("8"), Some("0"), Some("1")),
        ]
    );
    assert_eq!(b.limit_changes(), 2);
}

#[test]
fn one_event_per_rate_refusal() {
    use watertight::rate::{Quota, RateError, RateLimiter};

    let clock = ManualClock::new();
    let uplink = RateLimiter::new("uplink", Quota::per_second(3).burst(1), &clock);

    let ((), events) = capture(|| {
        uplink.check().unwrap();
        assert!(uplink.check().is_err()); // 333.333334 ms to go: 334 ms
        clock.advance(Duration::from_millis(300));
        // A wait that could not conform by its deadline: refused at once.
        let early = block_on(uplink.acquire_timeout(Duration::from_millis(10)));
        assert!(matches!(early, Err(RateError::Limited(_))));
        // An error in the request is not a refusal: no event.
        assert!(matches!(
            uplink.check_n(2),
            Err(RateError::ExceedsBurst { .. })
        ));
        // Admitted: no event.
        clock.advance(Duration::from_millis(34));
        uplink.check().unwrap();
    });

    let expected = vec![
        pairs(&[("retry_after_ms", "334"), ("system", "uplink")]),
        pairs(&[("retry_after_ms", "34"), ("system", "uplink")]),
    ];
    assert_eq!(summary(&events), expected, "{events:#?}");
    for e in &events {
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, "watertight::rate")
        );
        assert!(e.field("message").is_some(), "{e:?}");
    }
    assert_eq!(uplink.metrics().refused, events.len());

    // Through a policy: the limiter's event only, before any other layer.
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .rate(Quota::per_second(2).burst(1))
        .build()
        .unwrap();
    let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    let (err, events) = capture(|| {
        block_on(provider.call(ok)).unwrap();
        block_on(provider.call(ok)).unwrap_err()
    });
    assert_eq!(
        *err.kind(),
        ErrorKind::RateLimited {
            retry_after: Duration::from_millis(500)
        }
    );
    assert_eq!(
        summary(&events),
        vec![pairs(&[("retry_after_ms", "500"), ("system", "provider")])],
        "{events:#?}"
    );
    assert_eq!(events[0].target, "watertight::rate");
}

#[test]
fn one_event_per_throttle_refusal() {
    use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};

    let clock = ManualClock::new();
    let search = AdaptiveThrottle::with_seed("search", ThrottleConfig::DEFAULT, &clock, 4);
    let (refused, events) = capture(|| {
        let mut refused = Vec::new();
        for _ in 0..50 {
            match search.check() {
                // Reported outcomes emit nothing.
                Ok(ticket) => ticket.overloaded(),
                Err(t) => refused.push(t.probability()),
            }
        }
        refused
    });
    assert!(refused.len() > 30, "{}", refused.len());
    assert_eq!(events.len(), refused.len(), "{events:#?}");
    for (e, p) in events.iter().zip(&refused) {
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, "watertight::throttle")
        );
        assert_eq!(e.field("system"), Some("search"));
        let logged: f64 = e.field("probability").unwrap().parse().unwrap();
        assert!((logged - p).abs() < 1e-6, "{logged} vs {p}");
        assert!(e.field("message").is_some(), "{e:?}");
    }
    assert_eq!(search.metrics().refused, events.len());

    // Through a policy: the throttle's event only, before any other layer.
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .throttle(ThrottleConfig::DEFAULT)
        .build()
        .unwrap();
    let provider: Policy<_> = Policy::new("provider", config, &clock).unwrap();
    provider.breaker().disable();
    let (kinds, events) = capture(|| {
        (0..50)
            .map(|_| {
                *block_on(provider.call(|| async { Err::<(), _>("503") }))
                    .unwrap_err()
                    .kind()
            })
            .collect::<Vec<_>>()
    });
    let throttled = kinds
        .iter()
        .filter(|k| matches!(k, ErrorKind::Throttled(_)))
        .count();
    assert!(throttled > 30, "{throttled}");
    assert_eq!(events.len(), throttled, "{events:#?}");
    assert!(events.iter().all(|e| e.target == "watertight::throttle"));
}

#[test]
fn one_event_per_partition_refusal_naming_the_class_after_its_rooms() {
    use watertight::partition::{PartitionError, PartitionedBulkhead};

    let clock = ManualClock::new();
    let search = PartitionedBulkhead::new("search", [("critical", 1), ("batch", 1)], &clock)
        .with_max_waiters(1);
    let refused = |e: AcquireError| PartitionError::Refused(e);

    let ((), events) = capture(|| {
        // Batch takes its slot and borrows critical's: full for batch.
        let batch = (
            search.try_acquire(1).unwrap(),
            search.try_acquire(1).unwrap(),
        );
        assert_eq!(
            search.try_acquire(1).unwrap_err(),
            refused(AcquireError::Full)
        );
        // Critical waits for its room and runs out of time.
        let mut wait = pin!(search.acquire_timeout(0, Duration::from_millis(100)));
        assert!(block_on(poll_once(wait.as_mut())).is_none());
        // A second critical waiter is one past the bound.
        let queue_full = block_on(search.acquire_timeout(0, Duration::from_millis(100)));
        assert_eq!(queue_full.unwrap_err(), refused(AcquireError::QueueFull));
        clock.advance(Duration::from_millis(100));
        assert_eq!(block_on(wait).unwrap_err(), refused(AcquireError::TimedOut));
        // A class that does not exist is not a refusal: no event.
        assert!(matches!(
            search.try_acquire(2),
            Err(PartitionError::NoSuchClass { .. })
        ));
        drop(batch);
        search.close();
        assert_eq!(
            search.try_acquire(0).unwrap_err(),
            refused(AcquireError::Closed)
        );
        let waited = block_on(search.acquire_timeout(1, Duration::from_millis(100)));
        assert_eq!(waited.unwrap_err(), refused(AcquireError::Closed));
    });

    let room = |reason| pairs(&[("reason", reason), ("system", "search")]);
    let class =
        |class, reason| pairs(&[("class", class), ("reason", reason), ("system", "search")]);
    let expected = vec![
        room("full"),
        class("batch", "full"),
        room("queue_full"),
        class("critical", "queue_full"),
        room("timed_out"),
        class("critical", "timed_out"),
        room("closed"),
        class("critical", "closed"),
        room("closed"),
        class("batch", "closed"),
    ];
    assert_eq!(summary(&events), expected, "{events:#?}");
    for e in &events {
        let target = if e.fields.contains_key("class") {
            "watertight::partition"
        } else {
            "watertight::bulkhead"
        };
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, target),
            "{e:?}"
        );
        assert!(e.field("message").is_some(), "{e:?}");
    }
    // As many partition events as refusals the rooms counted.
    let counted: usize = (0..2)
        .map(|i| search.room(i).unwrap().metrics().rejected())
        .sum();
    let partition = events
        .iter()
        .filter(|e| e.target == "watertight::partition");
    assert_eq!(partition.count(), counted);
}

#[test]
fn one_event_per_hedge_not_sent_after_the_refusing_layers() {
    use watertight::clock::{Clock, Timer};
    use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};

    let clock = ManualClock::new();
    // One slot: the first attempt holds it, so its hedge finds it full.
    let config = PolicyConfig::builder(1)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    let p: Policy<_> = Policy::new("search", config, &clock).unwrap();
    let hedge = Hedge::new(
        "search",
        HedgeConfig::builder()
            .delay(HedgeDelay::Fixed(Duration::from_millis(10)))
            .budget(1, 10.0)
            .build()
            .unwrap(),
    );
    let slow = || async {
        (&clock)
            .sleep_until(clock.now() + Duration::from_millis(30))
            .await;
        Ok::<_, ()>(())
    };
    let hedged = |p: &Policy<&ManualClock>| {
        let call = p.call_hedged(&hedge, slow).into_future();
        let mut call = pin!(call);
        loop {
            if let Some(r) = block_on(poll_once(call.as_mut())) {
                return r;
            }
            clock.advance(Duration::from_millis(1));
        }
    };
    let (r, events) = capture(|| hedged(&p));
    assert_eq!(r, Ok(()));
    let got: Vec<_> = events
        .iter()
        .map(|e| (e.level, e.target.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Level::DEBUG, "watertight::bulkhead"),
            (Level::DEBUG, "watertight::hedge")
        ],
        "{events:#?}"
    );
    assert_eq!(
        summary(&events[1..]),
        [pairs(&[
            ("outcome", "not_sent_bulkhead"),
            ("system", "search")
        ])]
    );

    // Room for it, but the budget's one token spent first: the hedge's
    // event alone.
    let roomy: Policy<_> =
        Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    assert!(hedge.budget().try_spend());
    let (r, events) = capture(|| hedged(&roomy));
    assert_eq!(r, Ok(()));
    assert_eq!(
        summary(&events),
        [pairs(&[
            ("outcome", "not_sent_budget"),
            ("system", "search")
        ])],
        "{events:#?}"
    );
    assert_eq!(events[0].target, "watertight::hedge");
}

#[cfg(feature = "chaos")]
#[test]
fn one_event_per_injected_fault_and_none_for_a_pass() {
    use watertight::chaos::{ChaosConfig, Fault, Injector};
    let clock = ManualClock::new();
    let config = ChaosConfig::builder()
        .error(0.25, || Err("injected"))
        .outcome(0.25, || Ok(503))
        .latency(0.25, Duration::from_millis(120))
        .seed(4)
        .build()
        .unwrap();
    let chaos = Injector::new("pricing", config, &clock);
    let (drawn, events) = capture(|| (0..40).map(|_| chaos.draw()).collect::<Vec<_>>());
    let injected: Vec<Fault> = drawn.iter().flatten().copied().collect();
    assert!(injected.len() < 40, "some calls pass");
    assert_eq!(events.len(), injected.len(), "{events:#?}");
    for (e, f) in events.iter().zip(&injected) {
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, "watertight::chaos")
        );
        assert_eq!(e.field("system"), Some("pricing"));
        assert_eq!(e.field("fault"), Some(f.label()));
        let latency = (*f == Fault::Latency).then_some("120");
        assert_eq!(e.field("latency_ms"), latency);
    }
    // Disabled: no draw, no event.
    chaos.disable();
    let (_, events) = capture(|| (0..40).for_each(|_| assert_eq!(chaos.draw(), None)));
    assert!(events.is_empty());
    // A call through `inject` emits the same one event.
    chaos.enable();
    let (fault, events) = capture(|| {
        (0..10)
            .map(|_| chaos.inject(async { Ok::<u16, &str>(200) }).fault())
            .find(Option::is_some)
            .flatten()
    });
    let fault = fault.expect("a fault in ten calls");
    assert_eq!(events.last().unwrap().field("fault"), Some(fault.label()));
}

#[test]
fn one_event_per_stale_answer_served_and_per_miss() {
    use watertight::fallback::StaleCache;

    let clock = ManualClock::new();
    let prices: StaleCache<u32, u64, _, 1> =
        StaleCache::new("prices", Duration::from_secs(60), &clock);
    let ((), events) = capture(|| {
        prices.record(7, 4200);
        clock.advance(Duration::from_millis(42_500));
        assert!(prices.serve(&7).is_some());
        assert!(prices.serve(&8).is_none());
        clock.advance(Duration::from_secs(60));
        assert!(prices.serve(&7).is_none());
    });
    let expected = vec![
        pairs(&[("age_ms", "42500"), ("system", "prices")]),
        pairs(&[("reason", "absent"), ("system", "prices")]),
        pairs(&[("reason", "too_old"), ("system", "prices")]),
    ];
    assert_eq!(summary(&events), expected, "{events:#?}");
    for e in &events {
        assert_eq!(
            (e.level, e.target.as_str()),
            (Level::DEBUG, "watertight::fallback")
        );
    }
}
