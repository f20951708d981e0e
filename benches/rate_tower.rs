//! The rate limit layer beside tower's `RateLimit` behind a `Buffer`, on
//! the same quota, around the same ready inner service, on the admitted
//! path: a quota large enough to admit everything (`u32::MAX` a second;
//! ours with a burst of as many, one cell a nanosecond, and 4.3 s of
//! slack; tower's window of `u32::MAX` calls a second), so nothing waits
//! and nothing is refused.
//!
//! Every criterion iteration is one request: `ready().await`, then
//! `call(()).await`, in a loop inside one tokio current-thread `block_on`
//! (time driver on: tower's `RateLimit` sleeps on tokio's timer and reads
//! its clock, so ours runs on `TokioClock`). `Buffer`'s worker is a task on
//! the same runtime; a call through it is a message on its channel and an
//! answer back.
//!
//! | function | what |
//! |---|---|
//! | `watertight` | `RateLimitLayer::new(limiter)` around the inner service, one service reused |
//! | `tower-buffer` | `Buffer::new(RateLimit::new(inner, Rate::new(u32::MAX, 1 s)), 1024)`, one handle reused |
//! | `watertight/clone-per-call` | a clone per request, `svc.clone().oneshot(())`, as axum's router calls a route |
//! | `tower-buffer/clone-per-call` | the same with the `Buffer`'s handle |
//! | `tower-bare` | tower's `RateLimit` without the `Buffer` (not `Clone`: a reference, not a peer) |
//!
//! After criterion, a table of its own (medians of 11 rounds of 200 000
//! requests each, the functions interleaved) prints ours ÷ theirs.
//!
//! Run: `cargo bench --bench rate_tower --features tower,tokio -- --warm-up-time 1 --measurement-time 3`

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use tower::buffer::Buffer;
use tower::limit::rate::{Rate, RateLimit};
use tower::{Layer, Service, ServiceExt};
use watertight::clock::TokioClock;
use watertight::rate::{Quota, RateLimiter};
use watertight::tower::RateLimitLayer;

/// The ready inner service every side wraps.
#[derive(Clone, Copy)]
struct Inner;

impl Service<()> for Inner {
    type Response = ();
    type Error = Infallible;
    type Future = Ready<Result<(), Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        ready(Ok(()))
    }
}

const BUFFER: usize = 1024;

fn limiter() -> Arc<RateLimiter<TokioClock>> {
    let quota = Quota::new(u32::MAX, Duration::from_secs(1)).burst(u32::MAX);
    Arc::new(RateLimiter::new("bench", quota, TokioClock))
}

fn tower_rate() -> Rate {
    Rate::new(u64::from(u32::MAX), Duration::from_secs(1))
}

/// One request through `svc`: ready, then call.
async fn once<S>(svc: &mut S)
where
    S: Service<()>,
    S::Error: std::fmt::Debug,
{
    let ready = svc.ready().await.unwrap();
    black_box(ready.call(()).await.unwrap());
}

/// One request through a clone of `svc`, as axum's router makes one.
async fn once_cloned<S>(svc: &S)
where
    S: Service<()> + Clone,
    S::Error: std::fmt::Debug,
{
    black_box(svc.clone().oneshot(()).await.unwrap());
}

/// A loop of `iters` requests through one `svc` in one `block_on`.
fn looped_on<S>(rt: &Runtime, iters: u64, svc: &mut S) -> Duration
where
    S: Service<()>,
    S::Error: std::fmt::Debug,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            once(svc).await;
        }
        start.elapsed()
    })
}

/// A loop of `iters` requests made by `request` in one `block_on`.
fn looped<F, Fut>(rt: &Runtime, iters: u64, mut request: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            request().await;
        }
        start.elapsed()
    })
}

type Ours = watertight::tower::RateLimitService<Inner, Arc<RateLimiter<TokioClock>>>;
type Theirs = Buffer<(), <RateLimit<Inner> as Service<()>>::Future>;

fn sides(rt: &Runtime) -> (Ours, Theirs, RateLimit<Inner>) {
    let _guard = rt.enter(); // the Buffer spawns its worker on `rt`
    let ours = RateLimitLayer::new(limiter()).layer(Inner);
    let theirs = Buffer::new(RateLimit::new(Inner, tower_rate()), BUFFER);
    let bare = RateLimit::new(Inner, tower_rate());
    (ours, theirs, bare)
}

fn criterion_groups(c: &mut Criterion, rt: &Runtime) {
    let (ours, theirs, bare) = sides(rt);
    let mut g = c.benchmark_group("rate/tower");
    g.bench_function("watertight", |b| {
        let mut svc = ours.clone();
        b.iter_custom(|iters| looped_on(rt, iters, &mut svc))
    });
    g.bench_function("tower-buffer", |b| {
        let mut svc = theirs.clone();
        b.iter_custom(|iters| looped_on(rt, iters, &mut svc))
    });
    g.bench_function("watertight/clone-per-call", |b| {
        b.iter_custom(|iters| looped(rt, iters, || once_cloned(&ours)))
    });
    g.bench_function("tower-buffer/clone-per-call", |b| {
        b.iter_custom(|iters| looped(rt, iters, || once_cloned(&theirs)))
    });
    let mut bare = bare;
    g.bench_function("tower-bare", |b| {
        b.iter_custom(|iters| looped_on(rt, iters, &mut bare))
    });
    g.finish();
    let m = ours.limiter().metrics();
    assert_eq!(m.refused, 0, "ours refused a request");
}

/// Medians of interleaved rounds, and ours ÷ theirs.
fn ratio_table(rt: &Runtime) {
    const ROUNDS: usize = 11;
    const CALLS: u64 = 200_000;
    let (ours, theirs, mut bare) = sides(rt);
    let (mut o, mut t) = (ours.clone(), theirs.clone());
    let ns = |d: Duration| d.as_nanos() as f64 / CALLS as f64;
    let mut seen: [Vec<f64>; 5] = Default::default();
    for round in 0..ROUNDS {
        for k in 0..5 {
            let i = (round + k) % 5;
            let d = match i {
                0 => looped_on(rt, CALLS, &mut o),
                1 => looped_on(rt, CALLS, &mut t),
                2 => looped(rt, CALLS, || once_cloned(&ours)),
                3 => looped(rt, CALLS, || once_cloned(&theirs)),
                _ => looped_on(rt, CALLS, &mut bare),
            };
            seen[i].push(ns(d));
        }
    }
    let med: Vec<f64> = seen
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    println!();
    println!("| request (ready + call), admitted | ns, median of {ROUNDS} rounds of {CALLS} | ours ÷ theirs |");
    println!("|---|---|---|");
    println!(
        "| `watertight` | {:.1} ns | **{:.3}×** |",
        med[0],
        med[0] / med[1]
    );
    println!("| `tower-buffer` | {:.1} ns | 1 |", med[1]);
    println!(
        "| `watertight/clone-per-call` | {:.1} ns | **{:.3}×** |",
        med[2],
        med[2] / med[3]
    );
    println!("| `tower-buffer/clone-per-call` | {:.1} ns | 1 |", med[3]);
    println!(
        "| `tower-bare` (not `Clone`; a reference) | {:.1} ns | ours ÷ it: {:.2}× |",
        med[4],
        med[0] / med[4]
    );
    assert_eq!(ours.limiter().metrics().refused, 0);
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio current-thread runtime");
    let mut c = Criterion::default().configure_from_args();
    criterion_groups(&mut c, &rt);
    c.final_summary();
    ratio_table(&rt);
}
