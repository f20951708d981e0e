//! The adaptive throttle's admission: what it adds to a call.
//!
//! Every criterion iteration is one call, so the time per iteration is ns
//! per call. The backend always answers, so the throttle's probability
//! stays 0: the admission path a healthy system pays on every call (a
//! clock read, the window's 40 words read, one compare-and-swap for the
//! request, and for the accept a clock read and one more).
//!
//! | group | what |
//! |---|---|
//! | `throttle/policy` | a `Policy<TokioClock>` call of a ready future, with (`throttled`) and without (`plain`) `PolicyConfigBuilder::throttle`, in one tokio current-thread `block_on` loop: **the ratio the issue asks for** (a plain policy call is the "plain call" a throttled one is compared with) |
//! | `throttle/policy-manual` | the same on `ManualClock` (a clock read is one load): the throttle's own work with the clock's cost taken out |
//! | `throttle/raw` | `check()` + `accepted()` alone on `StdClock`, `TokioClock` and `ManualClock`, beside the clock read alone (`StdClock::now`) for reading it |
//!
//! Run: `cargo bench --bench throttle --features tokio`; quick:
//! `cargo bench --bench throttle --features tokio -- --warm-up-time 1 --measurement-time 2`.

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use watertight::clock::{Clock, ManualClock, StdClock, Timer, TokioClock};
use watertight::policy::{Policy, PolicyConfig};
use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};

fn config(throttled: bool) -> PolicyConfig {
    let b = PolicyConfig::builder(64)
        .max_wait(Duration::from_millis(100))
        .call_timeout(Duration::from_secs(30));
    if throttled {
        b.throttle(ThrottleConfig::DEFAULT).build().unwrap()
    } else {
        b.build().unwrap()
    }
}

fn policy<C: Timer + Clone>(clock: C, throttled: bool) -> Policy<C> {
    Policy::new("bench", config(throttled), clock).unwrap()
}

async fn ready() -> Result<(), ()> {
    Ok(())
}

/// A loop of `iters` calls of `call` in one `block_on`: the loop's time.
fn looped<F, Fut>(rt: &Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call().await);
        }
        start.elapsed()
    })
}

fn policy_calls(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("throttle/policy");
    for (name, throttled) in [("plain", false), ("throttled", true)] {
        let p = policy(TokioClock, throttled);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| looped(rt, iters, || p.call(ready)))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("throttle/policy-manual");
    let clock = ManualClock::new();
    for (name, throttled) in [("plain", false), ("throttled", true)] {
        let p = policy(&clock, throttled);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| looped(rt, iters, || p.call(ready)))
        });
    }
    g.finish();
}

fn raw(c: &mut Criterion) {
    let mut g = c.benchmark_group("throttle/raw");
    fn admit<C: Clock>(t: &AdaptiveThrottle<C>) {
        match t.check() {
            Ok(ticket) => ticket.accepted(),
            Err(e) => panic!("a healthy backend is refused: {e}"),
        }
    }
    let std = AdaptiveThrottle::with_seed("bench", ThrottleConfig::DEFAULT, StdClock, 1);
    g.bench_function("check+accepted/StdClock", |b| {
        b.iter(|| admit(black_box(&std)))
    });
    let tokio = AdaptiveThrottle::with_seed("bench", ThrottleConfig::DEFAULT, TokioClock, 1);
    g.bench_function("check+accepted/TokioClock", |b| {
        b.iter(|| admit(black_box(&tokio)))
    });
    let clock = ManualClock::new();
    let manual = AdaptiveThrottle::with_seed("bench", ThrottleConfig::DEFAULT, &clock, 1);
    g.bench_function("check+accepted/ManualClock", |b| {
        b.iter(|| admit(black_box(&manual)))
    });
    g.bench_function("StdClock::now", |b| b.iter(|| black_box(StdClock.now())));
    g.finish();
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut c = Criterion::default().configure_from_args();
    policy_calls(&mut c, &rt);
    raw(&mut c);
    c.final_summary();
}
