//! What a fault injector costs when it injects nothing (criterion): a call
//! with the injector disabled, and enabled with every rate 0 (a draw and a
//! counter, no fault), beside the same call without it — around a
//! `Policy<&ManualClock>` call that answers at once (the call the injector
//! sits in in a test or a game day), and around a bare ready future (the
//! wrapper's own nanoseconds). Futures are polled once with a no-op waker,
//! so no executor is timed. Every criterion iteration is one call.
//!
//! | group | what |
//! |---|---|
//! | `chaos/policy-call` | `call(ready)`, `call(‖ disabled.inject(ready))`, `call(‖ rate0.inject(ready))`, `call_injected(&disabled, ready)`, `call_injected(&rate0, ready)` |
//! | `chaos/bare-future` | `ready`, `disabled.inject(ready)`, `rate0.inject(ready)` |
//!
//! Then, because criterion times one benchmark after another and a shared
//! machine's load drifts between them, the same five policy calls in
//! **paired rounds**: each round times 10 000 calls of each, in a rotating
//! order (a round is about a millisecond, so most rounds run whole between
//! two preemptions), and the table gives the median and the minimum of the
//! rounds' ns per call, and the median of each round's ratio to the plain
//! call (`cargo bench` only: 201 rounds).
//!
//! Run: `cargo bench --bench chaos --features chaos -- --warm-up-time 1 --measurement-time 3`.
//! For an instruction count, `CHAOS_WAY=k` (0 to 4, the paired table's
//! rows) makes the bench binary run that one way 100 000 times and exit:
//! `CHAOS_WAY=3 valgrind --tool=callgrind target/release/deps/chaos-…`.
//! The table: `src/guide/benchmarks.rs`, "Fault injection".

use std::future::{ready, Future, Ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use std::time::Instant;

use criterion::Criterion;
use watertight::chaos::{ChaosConfig, Injector};
use watertight::clock::ManualClock;
use watertight::policy::{Policy, PolicyConfig};

type Out = Result<u32, ()>;

fn answer() -> Ready<Out> {
    ready(Ok(7))
}

/// Polls `fut` once: every future here is ready at once.
#[inline(always)]
fn now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(fut).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a benched call waited"),
    }
}

fn policy(clock: &ManualClock) -> Policy<&ManualClock> {
    Policy::new("bench", PolicyConfig::builder(64).build().unwrap(), clock).unwrap()
}

/// An injector with an error rate of 1 (so that a call it did not skip
/// would fail), disabled; and one enabled with every rate 0.
fn injectors(clock: &ManualClock) -> (Injector<&ManualClock, Out>, Injector<&ManualClock, Out>) {
    let all = ChaosConfig::builder()
        .error(1.0, || Err(()))
        .enabled(false)
        .seed(1)
        .build()
        .unwrap();
    let none = ChaosConfig::builder().seed(1).build().unwrap();
    (
        Injector::new("bench", all, clock),
        Injector::new("bench", none, clock),
    )
}

fn policy_call(c: &mut Criterion) {
    let clock = ManualClock::new();
    let (plain, off_p, zero_p) = (policy(&clock), policy(&clock), policy(&clock));
    let (off, zero) = injectors(&clock);
    let mut g = c.benchmark_group("chaos/policy-call");
    g.bench_function("call", |b| {
        b.iter(|| now(black_box(&plain).call(answer)).unwrap())
    });
    g.bench_function("call_disabled", |b| {
        b.iter(|| {
            let off = black_box(&off);
            now(black_box(&off_p).call(|| off.inject(answer()))).unwrap()
        })
    });
    g.bench_function("call_rate0", |b| {
        b.iter(|| {
            let zero = black_box(&zero);
            now(black_box(&zero_p).call(|| zero.inject(answer()))).unwrap()
        })
    });
    g.bench_function("call_injected_disabled", |b| {
        b.iter(|| now(black_box(&off_p).call_injected(black_box(&off), answer)).unwrap())
    });
    g.bench_function("call_injected_rate0", |b| {
        b.iter(|| now(black_box(&zero_p).call_injected(black_box(&zero), answer)).unwrap())
    });
    g.finish();
    assert_eq!(off.metrics().total_injected() + off.metrics().passed, 0);
    assert_eq!(zero.metrics().total_injected(), 0);
}

fn bare_future(c: &mut Criterion) {
    let clock = ManualClock::new();
    let (off, zero) = injectors(&clock);
    let mut g = c.benchmark_group("chaos/bare-future");
    g.bench_function("ready", |b| b.iter(|| now(black_box(answer())).unwrap()));
    g.bench_function("disabled", |b| {
        b.iter(|| now(black_box(&off).inject(black_box(answer()))).unwrap())
    });
    g.bench_function("rate0", |b| {
        b.iter(|| now(black_box(&zero).inject(black_box(answer()))).unwrap())
    });
    g.finish();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The three policy calls in rounds, each round timing `calls` of each in a
/// rotating order; prints the medians and the ratios to the plain call.
fn paired(rounds: usize, calls: u32) {
    let clock = ManualClock::new();
    let (plain, off_p, zero_p) = (policy(&clock), policy(&clock), policy(&clock));
    let (off, zero) = injectors(&clock);
    let time = |way: usize| {
        let start = Instant::now();
        for _ in 0..calls {
            let r = match way {
                0 => now(black_box(&plain).call(answer)),
                1 => {
                    let off = black_box(&off);
                    now(black_box(&off_p).call(|| off.inject(answer())))
                }
                2 => {
                    let zero = black_box(&zero);
                    now(black_box(&zero_p).call(|| zero.inject(answer())))
                }
                3 => now(black_box(&off_p).call_injected(black_box(&off), answer)),
                _ => now(black_box(&zero_p).call_injected(black_box(&zero), answer)),
            };
            black_box(r.unwrap());
        }
        start.elapsed().as_nanos() as f64 / f64::from(calls)
    };
    if let Ok(w) = std::env::var("CHAOS_WAY") {
        black_box(time(w.parse().unwrap()));
        return;
    }
    const WAYS: usize = 5;
    let mut ns: [Vec<f64>; WAYS] = Default::default();
    let mut ratio: [Vec<f64>; WAYS] = Default::default();
    for round in 0..rounds {
        let mut t = [0.0; WAYS];
        for k in 0..WAYS {
            let way = (round + k) % WAYS;
            t[way] = time(way);
        }
        for way in 0..WAYS {
            ns[way].push(t[way]);
            ratio[way].push(t[way] / t[0]);
        }
    }
    assert_eq!(off.metrics().total_injected() + off.metrics().passed, 0);
    println!();
    println!("paired rounds: {rounds} x {calls} calls of each");
    println!("| call | ns per call, median | minimum | ratio to `call`, median of rounds |");
    println!("|---|---|---|---|");
    let names = [
        "`call(ready)`",
        "`call(|| disabled.inject(ready))`",
        "`call(|| rate0.inject(ready))`",
        "`call_injected(&disabled, ready)`",
        "`call_injected(&rate0, ready)`",
    ];
    for way in 0..WAYS {
        let min = ns[way].iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "| {} | {:.1} | {:.1} | {:.3} |",
            names[way],
            median(&mut ns[way]),
            min,
            median(&mut ratio[way])
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not (then
    // criterion runs each benchmark once, and one short round is enough).
    let bench = std::env::args().any(|a| a == "--bench");
    if std::env::var("CHAOS_WAY").is_ok() {
        paired(1, 100_000);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    policy_call(&mut c);
    bare_future(&mut c);
    c.final_summary();
    if bench {
        paired(201, 10_000);
    } else {
        paired(1, 1_000);
    }
}
