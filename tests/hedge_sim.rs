#![cfg(not(loom))]
//! Tail latency with and without hedging, in a deterministic simulation on
//! `ManualClock` ("The Tail at Scale"'s setting, small):
//!
//! - **3 replicas**; request `i`'s first attempt goes to replica `i mod 3`,
//!   a hedge to the next one.
//! - **Latency**: every attempt takes 10 ms plus a uniform 0–10 ms (whole
//!   milliseconds), except on replica 2, which is **slow 5 % of the time**:
//!   an attempt there takes 500 ms plus a uniform 0–500 ms with
//!   probability 5 %. So 1/3 × 5 % ≈ 1.7 % of first attempts are slow.
//!   Each (request, replica) pair draws its latency from a seeded hash, so
//!   every run and every mode sees the same latencies.
//! - **10 000 requests**, one after another, each through a `Policy`
//!   (4 slots, a 2 s call timeout), the clock stepped 1 ms at a time.
//!
//! Modes: no hedging (`Policy::call`); ours (`Policy::call_hedged`, the
//! delay at the 95th percentile of a histogram of the last 1000–2000
//! calls, none before 100 samples, one hedge per call, the default
//! budget); with the `tokio` feature, tower's `Hedge` with the same
//! settings on the same latencies (on tokio's paused clock, which tower
//! reads). Reported: p50, p99, p99.9 and the extra load (attempts sent ÷
//! requests − 1).
//!
//! Asserted, from the setup rather than from a run: without hedging the
//! p99 is a slow attempt (over 1 % of requests are slow, each ≥ 500 ms);
//! with it the p99 and p99.9 are at most a delay (≤ 20 ms, the fast
//! latencies' top, and at most a sixteenth above the true p95) plus a fast
//! attempt (≤ 20 ms), so at least 3× lower (the p99.9 too: of the first
//! 100 requests, which are not hedged for want of samples, fewer than 10
//! are slow); the extra load is at most 5 %: only attempts slower than the
//! p95 are hedged. Beside tower's: see the assertions' comment (the
//! issue's target, our p99 ≤ tower's, is missed by the one 1 ms step our
//! coarser buckets cost on these whole-millisecond latencies).
//!
//! `cargo test --test hedge_sim -- --nocapture` prints the table.

mod common;

use std::cell::Cell;
use std::future::{Future, IntoFuture};
use std::time::Duration;

use common::Task;
use watertight::clock::{Clock, ManualClock, Timer};
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};
use watertight::policy::{Policy, PolicyConfig};
use watertight::BreakerConfig;

const REQUESTS: u64 = 10_000;
const REPLICAS: u64 = 3;
const SLOW_REPLICA: u64 = 2;
const MS: Duration = Duration::from_millis(1);

/// SplitMix64 of `x`: the seeded hash each latency is drawn from.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The latency, in ms, of request `i`'s attempt on `replica`.
fn latency_ms(i: u64, replica: u64) -> u64 {
    let h = mix(i * REPLICAS + replica);
    let slow = replica == SLOW_REPLICA && h % 1000 < 50;
    let u = (h >> 20) % 1000;
    if slow {
        500 + u / 2 // 500–999
    } else {
        10 + u % 11 // 10–20
    }
}

/// What a run reports.
#[derive(Debug)]
struct Figures {
    p50: Duration,
    p99: Duration,
    p999: Duration,
    extra_load: f64,
    attempts: u64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64 / 100.0).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn figures(mut latencies: Vec<Duration>, attempts: u64) -> Figures {
    latencies.sort_unstable();
    Figures {
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        p999: percentile(&latencies, 99.9),
        extra_load: attempts as f64 / REQUESTS as f64 - 1.0,
        attempts,
    }
}

fn policy(clock: &ManualClock) -> Policy<&ManualClock> {
    // A breaker that never opens here: the slow replica answers, slowly.
    let breaker = BreakerConfig::builder()
        .window_size(64)
        .minimum_calls(64)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(4)
        .call_timeout(Duration::from_secs(2))
        .breaker(breaker)
        .build()
        .unwrap();
    Policy::new("replicas", config, clock).unwrap()
}

/// Polls until ready, stepping the clock 1 ms after each pending poll.
fn drive<F: Future>(clock: &ManualClock, fut: F) -> F::Output {
    let mut task = Task::new(fut);
    for _ in 0..10_000 {
        if let std::task::Poll::Ready(out) = task.poll() {
            return out;
        }
        clock.advance(MS);
    }
    panic!("a request did not end");
}

/// Runs the 10 000 requests; `hedge`: through `call_hedged`, else `call`.
fn run(hedge: Option<&Hedge>) -> Figures {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let attempts = Cell::new(0u64);
    let mut latencies = Vec::with_capacity(REQUESTS as usize);
    for i in 0..REQUESTS {
        let start = clock.now();
        let mut n = 0;
        let clock = &clock;
        let attempts = &attempts;
        let make = move || {
            let replica = (i + n) % REPLICAS;
            n += 1;
            attempts.set(attempts.get() + 1);
            let ms = latency_ms(i, replica);
            async move {
                clock
                    .sleep_until(clock.now() + Duration::from_millis(ms))
                    .await;
                Ok::<_, ()>(replica)
            }
        };
        let out = match hedge {
            Some(h) => drive(clock, p.call_hedged(h, make).into_future()),
            None => drive(clock, p.call(make)),
        };
        assert!(out.is_ok(), "request {i}: {out:?}");
        latencies.push(clock.now() - start);
    }
    assert_eq!(p.bulkhead().in_flight(), 0);
    figures(latencies, attempts.get())
}

fn row(name: &str, f: &Figures) {
    println!(
        "| {name:<28} | {:>6} | {:>6} | {:>6} | {:>9.2} % |",
        f.p50.as_millis(),
        f.p99.as_millis(),
        f.p999.as_millis(),
        f.extra_load * 100.0
    );
}

/// The same requests through tower's `Hedge` (tower 0.5, feature `hedge`)
/// with the same settings: the 95th percentile, 100 samples before any
/// hedge, one hedge; its histogram rotates by time, so its period is the
/// time 1000 requests take (about 15 s). tower reads tokio's clock, so this
/// run is on a paused tokio runtime, where a sleep ends exactly at its
/// deadline, as a `ManualClock` one does at the 1 ms step.
#[cfg(feature = "tokio")]
fn run_tower() -> Figures {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll};
    use tower::{Service, ServiceExt};

    /// Request `i`, and whether it is the hedge.
    #[derive(Clone, Copy)]
    struct Req(u64, bool);

    #[derive(Clone)]
    struct Replicas(Arc<AtomicU64>);
    impl tower::Service<Req> for Replicas {
        type Response = u64;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<u64, Infallible>>>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: Req) -> Self::Future {
            self.0.fetch_add(1, Ordering::Relaxed);
            let replica = (req.0 + u64::from(req.1)) % REPLICAS;
            let ms = latency_ms(req.0, replica);
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(replica)
            })
        }
    }

    #[derive(Clone)]
    struct Idempotent;
    impl tower::hedge::Policy<Req> for Idempotent {
        fn clone_request(&self, req: &Req) -> Option<Req> {
            Some(Req(req.0, true))
        }
        fn can_retry(&self, _: &Req) -> bool {
            true
        }
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let attempts = Arc::new(AtomicU64::new(0));
        let mut svc = tower::hedge::Hedge::new(
            Replicas(attempts.clone()),
            Idempotent,
            100,
            0.95,
            Duration::from_secs(15),
        );
        let mut latencies = Vec::with_capacity(REQUESTS as usize);
        for i in 0..REQUESTS {
            let start = tokio::time::Instant::now();
            let svc = svc.ready().await.unwrap();
            svc.call(Req(i, false)).await.unwrap();
            latencies.push(start.elapsed());
        }
        figures(latencies, attempts.load(Ordering::Relaxed))
    })
}

#[test]
fn hedging_at_the_p95_cuts_the_tail_for_a_few_percent_more_load() {
    // The setup's own numbers: the share of slow first attempts.
    let slow = (0..REQUESTS)
        .filter(|i| latency_ms(*i, i % REPLICAS) >= 500)
        .count() as f64
        / REQUESTS as f64;
    assert!(slow > 0.01 && slow < 0.025, "slow first attempts: {slow}");

    let plain = run(None);
    let config = HedgeConfig::builder()
        .delay(HedgeDelay::Percentile(Percentile::P95))
        .min_samples(100)
        .window(1000)
        .build()
        .unwrap();
    let hedge = Hedge::new("replicas", config);
    let ours = run(Some(&hedge));
    let m = hedge.metrics();

    println!("3 replicas, one slow (500-999 ms) on 5 % of its calls; 10 000 requests");
    println!("| {:<28} | p50 ms | p99 ms | p99.9 ms | extra load |", "");
    println!("|---|---:|---:|---:|---:|");
    row("no hedging", &plain);
    row("watertight call_hedged, p95", &ours);
    #[cfg(feature = "tokio")]
    let tower = {
        let tower = run_tower();
        row("tower Hedge, p95", &tower);
        tower
    };
    println!(
        "ours: hedges won {}, lost {}, not sent (budget) {}; delay at the end {:?}",
        m.won,
        m.lost,
        m.not_sent_budget,
        hedge.delay()
    );

    // Without hedging: over 1 % of requests are slow, so the p99 is one.
    assert!(plain.p99 >= 500 * MS, "{plain:?}");
    assert!(plain.p50 >= 10 * MS && plain.p50 <= 20 * MS, "{plain:?}");
    assert_eq!(plain.extra_load, 0.0);
    // With it: a slow first attempt is hedged after the delay (≤ 20 ms ×
    // 17/16, rounded up to the 1 ms step) to a fast replica (≤ 20 ms).
    let bound = 22 * MS + 20 * MS;
    assert!(ours.p99 <= bound, "{ours:?}");
    assert!(ours.p999 <= bound, "{ours:?}");
    assert!(ours.p99 * 3 <= plain.p99, "{ours:?} vs {plain:?}");
    assert!(ours.p50 == plain.p50, "{ours:?} vs {plain:?}");
    // Only attempts over the p95 are hedged: at most 5 % more load.
    assert!(ours.extra_load > 0.0 && ours.extra_load <= 0.05, "{ours:?}");
    assert_eq!(m.sent() as u64, ours.attempts - REQUESTS);
    // Beside tower's, in the same requests. Its histogram (HdrHistogram,
    // three significant digits, whole milliseconds) holds the p95 of these
    // whole-millisecond latencies exactly, 20 ms; ours reports the largest
    // value its bucket was given, 20 ms too (the bucket's top, 20.97 ms,
    // would start every hedge one 1 ms step later). Its
    // histogram is empty for a full period (15 s, about 1000 requests) and
    // it hedges nothing meanwhile, so its p99.9 is a slow attempt; ours
    // hedges from the 100th sample on. Both stay within 5 % more load.
    #[cfg(feature = "tokio")]
    {
        assert!(ours.p99 <= tower.p99, "{ours:?} vs tower {tower:?}");
        assert!(tower.p999 >= 500 * MS, "{tower:?}");
        assert!(ours.p999 * 3 <= tower.p999, "{ours:?} vs tower {tower:?}");
        assert!(tower.extra_load <= 0.05, "{tower:?}");
    }
}
