#![cfg(not(loom))]
//! Hedged calls through a `Policy` (`call_hedged`), on a `ManualClock`:
//! when hedges start and when they do not (the deadline, the budget, a
//! full bulkhead, an open breaker, a histogram with too few samples), that
//! the first acceptable answer wins and the losers are dropped and recorded
//! nowhere, and what the histogram is fed. Nothing sleeps: each test polls
//! by hand and advances the clock one millisecond at a time.

mod common;

use std::cell::{Cell, RefCell};
use std::future::IntoFuture;
use std::time::Duration;

use common::Task;
use watertight::clock::{Clock, Instant, ManualClock, Timer};
use watertight::deadline::Deadline;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::BreakerConfig;

const MS: Duration = Duration::from_millis(1);

/// A breaker that does not open within these few calls, and counts calls
/// over 50 ms as slow (so a loser recorded as slow would show).
fn policy(clock: &ManualClock, slots: usize) -> Policy<&ManualClock> {
    let breaker = BreakerConfig::builder()
        .window_size(64)
        .minimum_calls(64)
        .slow_call_duration(50 * MS)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(slots)
        .max_wait(Duration::ZERO)
        .call_timeout(Duration::from_secs(2))
        .breaker(breaker)
        .build()
        .unwrap();
    Policy::new("search", config, clock).unwrap()
}

fn fixed(ms: u64) -> HedgeConfig {
    HedgeConfig::builder()
        .delay(HedgeDelay::Fixed(Duration::from_millis(ms)))
        .build()
        .unwrap()
}

/// What the replicas saw: attempts started (their start times), and
/// attempts dropped before they finished.
#[derive(Default)]
struct Log {
    started: RefCell<Vec<Instant>>,
    dropped: Cell<usize>,
}

/// Counts a drop unless disarmed (the attempt finished).
struct OnDrop<'a>(&'a Log, bool);
impl Drop for OnDrop<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.dropped.set(self.0.dropped.get() + 1);
        }
    }
}

/// Attempt `n` (0 for the first) takes `latency(n)` and answers with its
/// number, or fails if `fail(n)`.
fn replica<'a>(
    clock: &'a ManualClock,
    log: &'a Log,
    latency: impl Fn(usize) -> u64 + 'a,
    fail: impl Fn(usize) -> bool + 'a,
) -> impl FnMut() -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<usize, &'static str>> + 'a>,
> + 'a {
    move || {
        let n = log.started.borrow().len();
        log.started.borrow_mut().push(clock.now());
        let (ms, fails) = (latency(n), fail(n));
        Box::pin(async move {
            let mut guard = OnDrop(log, true);
            clock
                .sleep_until(clock.now() + Duration::from_millis(ms))
                .await;
            guard.1 = false;
            if fails {
                Err("failed")
            } else {
                Ok(n)
            }
        })
    }
}

/// Polls until ready, advancing the clock 1 ms after each pending poll;
/// returns the output and the time it took.
fn drive<F: IntoFuture>(clock: &ManualClock, fut: F) -> (F::Output, Duration) {
    let start = clock.now();
    let mut task = Task::new(fut.into_future());
    for _ in 0..100_000 {
        if let std::task::Poll::Ready(out) = task.poll() {
            return (out, clock.now() - start);
        }
        clock.advance(MS);
    }
    panic!("the call did not end");
}

#[test]
fn a_slow_first_attempt_is_hedged_and_the_hedge_wins() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    let make = replica(&clock, &log, |n| if n == 0 { 500 } else { 10 }, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!(out, Ok(1));
    assert_eq!(took, 30 * MS);
    // The hedge started 20 ms after the first attempt.
    let started = log.started.borrow();
    assert_eq!(started[1] - started[0], 20 * MS);
    // The first attempt was dropped, its slot is back, and the breaker
    // recorded only the winner: no failure, no slow call.
    assert_eq!(log.dropped.get(), 1);
    assert_eq!(p.bulkhead().in_flight(), 0);
    let b = p.breaker().metrics();
    assert_eq!((b.calls, b.failed_calls, b.slow_calls), (1, 0, 0));
    let m = hedge.metrics();
    assert_eq!((m.won, m.lost), (1, 0));
    // The histogram got the first attempt's 30 ms: cut short, a tail sample.
    assert_eq!(hedge.histogram().len(), 1);
    assert!(hedge.histogram().percentile(Percentile::P50).unwrap() >= 30 * MS);
}

#[test]
fn a_fast_first_attempt_sends_no_hedge() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    let make = replica(&clock, &log, |_| 19, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(0), 19 * MS));
    assert_eq!(log.started.borrow().len(), 1);
    assert_eq!(hedge.metrics().sent(), 0);
    assert_eq!(hedge.budget().tokens(), 10.0); // full: nothing to refill
                                               // Its latency, recorded.
    let p50 = hedge.histogram().percentile(Percentile::P50).unwrap();
    assert!(p50 >= 19 * MS && p50 < 22 * MS, "{p50:?}");
}

#[test]
fn the_first_answer_wins_and_the_loser_is_dropped_unrecorded() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    // The first attempt answers at 100 ms, before the hedge's 200 ms.
    let make = replica(&clock, &log, |n| if n == 0 { 100 } else { 200 }, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(0), 100 * MS));
    assert_eq!(log.dropped.get(), 1, "the hedge was dropped");
    let m = hedge.metrics();
    assert_eq!((m.won, m.lost), (0, 1));
    let b = p.breaker().metrics();
    // Only the first attempt recorded (slow: 100 ms > 50 ms); the hedge,
    // cancelled at 80 ms of its 200, neither failed nor was slow.
    assert_eq!((b.calls, b.failed_calls, b.slow_calls), (1, 0, 1));
    assert_eq!(p.bulkhead().in_flight(), 0);
}

#[test]
fn a_failure_while_a_hedge_is_out_is_not_the_answer() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    // The first attempt fails at 30 ms; the hedge (sent at 20) answers at 60.
    let make = replica(&clock, &log, |n| if n == 0 { 30 } else { 40 }, |n| n == 0);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(1), 60 * MS));
    assert_eq!(hedge.metrics().won, 1);
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn a_failure_before_the_hedge_is_due_ends_the_call() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    let make = replica(&clock, &log, |_| 5, |_| true);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!(out.unwrap_err().into_inner(), Some("failed"));
    assert_eq!(took, 5 * MS);
    assert_eq!(log.started.borrow().len(), 1, "hedging is not retrying");
}

#[test]
fn when_every_attempt_fails_the_last_error_is_the_calls() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(20));
    let log = Log::default();
    let make = replica(&clock, &log, |n| if n == 0 { 50 } else { 40 }, |_| true);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!(out.unwrap_err().into_inner(), Some("failed"));
    assert_eq!(took, 60 * MS); // the hedge, sent at 20, failed last at 60
    let m = hedge.metrics();
    assert_eq!((m.won, m.lost), (0, 1));
}

#[test]
fn a_hedge_never_starts_at_or_past_the_deadline() {
    for (budget_ms, hedges) in [
        (19, 0),
        (20, 0),
        (21, 1),
        (40, 1),
        (41, 2),
        (60, 2),
        (61, 3),
    ] {
        let clock = ManualClock::new();
        let p = policy(&clock, 8);
        let config = HedgeConfig::builder()
            .delay(HedgeDelay::Fixed(20 * MS))
            .max_hedges(3)
            .build()
            .unwrap();
        let hedge = Hedge::new("search", config);
        let log = Log::default();
        let make = replica(&clock, &log, |_| 1000, |_| false);
        let request = Deadline::after(&clock, budget_ms * MS);
        let (out, took) = drive(&clock, p.call_hedged(&hedge, make).within(&request));
        assert_eq!(*out.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
        assert_eq!(took, budget_ms * MS);
        let started = log.started.borrow();
        assert_eq!(started.len(), 1 + hedges, "budget {budget_ms} ms");
        assert!(started.iter().all(|t| *t < request.instant()));
        // Every attempt was cut by the caller's budget: nothing recorded.
        assert_eq!(p.breaker().metrics().calls, 0);
        assert_eq!(p.bulkhead().in_flight(), 0);
        assert_eq!(hedge.metrics().lost, hedges);
    }
}

#[test]
fn hedges_are_one_delay_apart_up_to_max_hedges() {
    let clock = ManualClock::new();
    let p = policy(&clock, 8);
    let config = HedgeConfig::builder()
        .delay(HedgeDelay::Fixed(10 * MS))
        .max_hedges(2)
        .build()
        .unwrap();
    let hedge = Hedge::new("search", config);
    let log = Log::default();
    // Only the third attempt is quick.
    let make = replica(&clock, &log, |n| if n == 2 { 5 } else { 1000 }, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(2), 25 * MS));
    let started = log.started.borrow();
    let offsets: Vec<_> = started.iter().map(|t| *t - started[0]).collect();
    assert_eq!(offsets, [Duration::ZERO, 10 * MS, 20 * MS]);
    assert_eq!(log.dropped.get(), 2);
    let m = hedge.metrics();
    assert_eq!((m.won, m.lost), (1, 1));
}

#[test]
fn an_empty_budget_sends_no_new_hedge_and_keeps_those_in_flight() {
    let clock = ManualClock::new();
    let p = policy(&clock, 8);
    // One token, refilled by 10 % of one per success.
    let config = HedgeConfig::builder()
        .delay(HedgeDelay::Fixed(10 * MS))
        .max_hedges(2)
        .budget(1, 10.0)
        .build()
        .unwrap();
    let hedge = Hedge::new("search", config);
    let log = Log::default();
    // The first hedge (sent at 10 ms, the token's) is the one that answers,
    // at 60 ms; the second is due at 20 ms with the budget empty.
    let make = replica(&clock, &log, |n| if n == 1 { 50 } else { 1000 }, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(1), 60 * MS));
    assert_eq!(log.started.borrow().len(), 2);
    let m = hedge.metrics();
    assert_eq!((m.won, m.not_sent_budget), (1, 1));
    // The success gave back a tenth of a token.
    assert_eq!(hedge.budget().tokens(), 0.1);
}

#[test]
fn a_full_bulkhead_or_an_open_breaker_means_no_hedge() {
    let clock = ManualClock::new();
    // One slot: the first attempt holds it, so the hedge finds it full.
    let p = policy(&clock, 1);
    let hedge = Hedge::new("search", fixed(10));
    let log = Log::default();
    let make = replica(&clock, &log, |_| 30, |_| false);
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!((out, took), (Ok(0), 30 * MS));
    assert_eq!(log.started.borrow().len(), 1);
    let m = hedge.metrics();
    assert_eq!((m.not_sent_bulkhead, m.sent()), (1, 0));
    assert_eq!(hedge.budget().tokens(), 10.0, "the token went back");

    // An open breaker: forced open once the first attempt is out.
    let p = policy(&clock, 4);
    let log = Log::default();
    let make = replica(&clock, &log, |_| 30, |_| false);
    let mut task = Task::new(p.call_hedged(&hedge, make).into_future());
    task.assert_pending();
    p.breaker().force_open();
    for _ in 0..29 {
        clock.advance(MS);
        task.assert_pending();
    }
    clock.advance(MS);
    assert_eq!(task.ready(), Ok(0));
    assert_eq!(log.started.borrow().len(), 1);
    assert_eq!(hedge.metrics().not_sent_breaker, 1);
}

#[test]
fn a_percentile_delay_waits_for_samples_then_follows_them() {
    let clock = ManualClock::new();
    let p = policy(&clock, 8);
    let config = HedgeConfig::builder()
        .delay(HedgeDelay::Percentile(Percentile::P95))
        .min_samples(20)
        .window(100)
        .build()
        .unwrap();
    let hedge = Hedge::new("search", config);
    let log = Log::default();
    // Before 20 samples: never hedged, however slow.
    for _ in 0..19 {
        let make = replica(&clock, &log, |_| 40, |_| false);
        let (out, _) = drive(&clock, p.call_hedged(&hedge, make));
        assert!(out.is_ok());
    }
    assert_eq!(log.started.borrow().len(), 19);
    assert_eq!(hedge.delay(), None);
    let make = replica(&clock, &log, |_| 40, |_| false);
    drive(&clock, p.call_hedged(&hedge, make)).0.unwrap();
    // 20 samples of 40 ms: the delay is their p95, 40 ms (to its bucket's top).
    let delay = hedge.delay().unwrap();
    assert!(delay >= 40 * MS && delay <= 45 * MS, "{delay:?}");
    // A slow call now gets a hedge at that delay.
    let first = log.started.borrow().len();
    let make = replica(
        &clock,
        &log,
        |n| if n == first { 500 } else { 10 },
        |_| false,
    );
    let (out, took) = drive(&clock, p.call_hedged(&hedge, make));
    assert_eq!(out, Ok(first + 1));
    // The hedge starts at the first 1 ms step at or past the delay.
    assert_eq!(took, ceil_ms(delay) + 10 * MS);
}

/// `d` rounded up to a whole millisecond (the test's clock steps).
fn ceil_ms(d: Duration) -> Duration {
    let ms = d.as_nanos().div_ceil(1_000_000) as u32;
    ms * MS
}

#[test]
fn dropping_the_call_drops_every_attempt_and_counts_hedges_lost() {
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(10));
    let log = Log::default();
    let make = replica(&clock, &log, |_| 1000, |_| false);
    let mut task = Task::new(p.call_hedged(&hedge, make).into_future());
    for _ in 0..15 {
        task.assert_pending();
        clock.advance(MS);
    }
    assert_eq!(log.started.borrow().len(), 2);
    assert_eq!(p.bulkhead().in_flight(), 2);
    drop(task);
    assert_eq!(log.dropped.get(), 2);
    assert_eq!(p.bulkhead().in_flight(), 0);
    assert_eq!(p.breaker().metrics().calls, 0);
    assert_eq!(hedge.metrics().lost, 1);
}

#[test]
fn a_hedged_call_is_send_when_its_call_is() {
    fn send<T: Send>(_: &T) {}
    let clock = ManualClock::new();
    let p = policy(&clock, 4);
    let hedge = Hedge::new("search", fixed(10));
    let call = p
        .call_hedged(&hedge, || async { Ok::<_, ()>(1) })
        .into_future();
    send(&call);
    assert_eq!(futures_lite::future::block_on(call), Ok(1));
}

#[test]
fn the_delay_is_kept_for_a_refresh_period_then_read_again() {
    // A window of 160: the delay is read again every 10 records.
    let config = HedgeConfig::builder()
        .min_samples(10)
        .window(160)
        .build()
        .unwrap();
    let hedge = Hedge::new("search", config);
    for _ in 0..9 {
        hedge.histogram().record(10 * MS);
    }
    assert_eq!(hedge.delay(), None, "nothing kept below min_samples");
    hedge.histogram().record(10 * MS);
    let first = hedge.delay().unwrap();
    assert!(first >= 10 * MS && first < 11 * MS, "{first:?}");
    for _ in 0..9 {
        hedge.histogram().record(100 * MS);
    }
    // 19 records: still the period of the 10th, the delay as it was kept.
    assert_eq!(hedge.delay(), Some(first));
    hedge.histogram().record(100 * MS);
    // 20: read again, half the samples at 100 ms.
    let now = hedge.delay().unwrap();
    assert_eq!(Some(now), hedge.histogram().percentile(Percentile::P95));
    assert!(now >= 100 * MS, "{now:?}");
}
