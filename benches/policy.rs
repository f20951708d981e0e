//! A policy call with nothing failing, ours beside the same three layers
//! built from peers — tokio's `Semaphore` outside, failsafe's breaker inside,
//! `tokio::time::timeout` innermost — both in the same run, on the same
//! executor.
//!
//! Every criterion iteration is one call (a slot, the breaker's admission,
//! the call under its timeout, the breaker's record, the slot back), so
//! criterion's time per iteration is ns per call. Each sample is a loop of
//! calls in one tokio current-thread `block_on` (`tokio::time::timeout`
//! needs a tokio runtime, so ours runs there too, on `TokioClock`).
//!
//! | group | what |
//! |---|---|
//! | `policy/call` | ours `policy.call(\|\| async { Ok(()) }).await`; peers `let _p = sem.acquire().await?; breaker.call(timeout(30 s, async { Ok(()) })).await` |
//! | `policy/forms` | ours only: `call(ready).await` written as `.unwrap()`, `if let Ok(..)`, a `match` whose `Err` arm uses the error, `?` in a function returning it, and `call_with` with a classifier closure; the policy behind `black_box` (every `Err` arm live) |
//! | `policy/slow-timing` | ours with `slow_call_duration(1 s)`, the breaker timing on `CoarseClock`, `StdClock` or `TokioClock` (`Policy::with_breaker_clock`; the waits on `TokioClock`), beside ours untimed and the peers' stack, all in one run |
//! | `policy/call_within` | the same inside a 1.5 s request budget made per call: ours `call_within(&Deadline::after(TokioClock, 1.5 s), …)`; peers the stack inside an outer `timeout(1.5 s, …)` |
//! | `policy/parts` | references for reading the above, each a loop in the same `block_on`: ours `timeout(TokioClock, 30 s, ready)`, `tokio::time::timeout(30 s, ready)`, a `std::time::Instant::now()` and a `TokioClock::now()`, a free `Bulkhead::acquire_timeout(100 ms)` + drop, a free tokio `Semaphore::acquire` + drop, a closed-state `CircuitBreaker::call` and failsafe's, and `watertight-floor`: our three layers' atomics with no clock read and no sleep (`try_acquire` a slot, `try_acquire` a breaker permit, the call, its record) |
//!
//! Ours is `Policy<TokioClock, 64>` from `PolicyConfig::builder(64)` (slot
//! wait 100 ms, call timeout 30 s, `BreakerConfig::DEFAULT`); the peers are
//! `tokio::sync::Semaphore::new(64)` and failsafe's futures breaker with its
//! default config (`Config::new().build()`: success rate over a time window,
//! or else 5 consecutive failures). failsafe sees the `Timeout`'s own
//! `Result`, so only an elapsed timeout is a failure for it (ours also counts
//! the call's `Err`); on this path nothing fails and that costs nothing.
//!
//! The runtime has its time driver on (both timeouts need it) and no other
//! task. Note that inside a tokio runtime tokio's semaphore and timer spend
//! the task's coop budget, so every 128th call or so yields once; that is
//! part of their cost there.
//!
//! Run: `cargo bench --bench policy --features tokio -- --warm-up-time 1 --measurement-time 3`
//! (about 1 minute), then `python3 scripts/bench_table.py --only policy --write`,
//! which puts the tables into the guide (`src/guide/benchmarks.rs`,
//! `watertight::guide::benchmarks`).

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tokio::runtime::Runtime;
use watertight::breaker::Inline;
use watertight::clock::{Clock, CoarseClock, StdClock, TokioClock};
use watertight::deadline::{timeout, Deadline};
use watertight::policy::{Policy, PolicyConfig};
use watertight::{BreakerConfig, Bulkhead, CircuitBreaker, Outcome};

/// Slots in the bulkhead and permits in tokio's semaphore.
const MAX_CONCURRENT: usize = 64;
/// The call timeout, ours and the peers'.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Our slot wait (the peers' semaphore waits without a limit; on this path
/// nobody waits).
const MAX_WAIT: Duration = Duration::from_millis(100);
/// The request budget of the `call_within` group.
const BUDGET: Duration = Duration::from_millis(1500);

type Ours = Policy<TokioClock, 64>;

fn ours() -> Ours {
    let config = PolicyConfig::builder(MAX_CONCURRENT)
        .max_wait(MAX_WAIT)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("policy config");
    Policy::new("bench", config, TokioClock).expect("policy")
}

type FailsafeDefault = failsafe::StateMachine<
    failsafe::failure_policy::OrElse<
        failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::EqualJittered>,
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
    >,
    (),
>;

/// The peers' stack: a semaphore outside, a breaker inside, a timeout
/// innermost.
struct Peers {
    sem: tokio::sync::Semaphore,
    breaker: FailsafeDefault,
}

fn peers() -> Peers {
    Peers {
        sem: tokio::sync::Semaphore::new(MAX_CONCURRENT),
        breaker: failsafe::Config::new().build(),
    }
}

/// The trivial call every side makes.
async fn ready() -> Result<(), ()> {
    Ok(())
}

/// Which way a peer call failed (never, here).
#[derive(Debug)]
enum PeerError {
    Closed,
    Rejected,
    Elapsed,
    Call,
}

/// One call through the peers' stack, in the same order as ours.
async fn peer_call(p: &Peers) -> Result<(), PeerError> {
    let _slot = p.sem.acquire().await.map_err(|_| PeerError::Closed)?;
    let call = tokio::time::timeout(CALL_TIMEOUT, ready());
    match failsafe::futures::CircuitBreaker::call(&p.breaker, call).await {
        Ok(result) => result.map_err(|()| PeerError::Call),
        Err(failsafe::Error::Rejected) => Err(PeerError::Rejected),
        Err(failsafe::Error::Inner(_)) => Err(PeerError::Elapsed),
    }
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

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio current-thread runtime")
}

fn call(c: &mut Criterion, rt: &Runtime) {
    let ours = ours();
    let peers = peers();
    let mut g = c.benchmark_group("policy/call");
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&ours).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("tokio+failsafe", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                peer_call(black_box(&peers)).await.unwrap();
            })
        })
    });
    g.finish();
    check_nothing_failed(&ours, &peers);
}

fn call_within(c: &mut Criterion, rt: &Runtime) {
    let ours = ours();
    let peers = peers();
    let mut g = c.benchmark_group("policy/call_within");
    g.bench_function("watertight", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                let request = Deadline::after(TokioClock, black_box(BUDGET));
                black_box(&ours).call_within(&request, ready).await.unwrap();
            })
        })
    });
    g.bench_function("tokio+failsafe", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                tokio::time::timeout(black_box(BUDGET), peer_call(black_box(&peers)))
                    .await
                    .unwrap()
                    .unwrap();
            })
        })
    });
    g.finish();
    check_nothing_failed(&ours, &peers);
}

/// A policy whose breaker times every call against `slow_call_duration(1 s)`
/// on `breaker_clock`, its waits on `TokioClock`.
fn ours_timed<B: Clock>(breaker_clock: B) -> Policy<TokioClock, 64, Inline<64>, B> {
    let breaker = BreakerConfig::builder()
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .expect("slow-call config");
    let config = PolicyConfig::builder(MAX_CONCURRENT)
        .max_wait(MAX_WAIT)
        .call_timeout(CALL_TIMEOUT)
        .breaker(breaker)
        .build()
        .expect("policy config");
    Policy::with_breaker_clock("bench", config, TokioClock, breaker_clock).expect("policy")
}

/// A policy call with slow-call timing on, the breaker on each clock, beside
/// the untimed call and the peers' stack, in one run.
fn slow_timing(c: &mut Criterion, rt: &Runtime) {
    let untimed = ours();
    let on_tokio = ours_timed(TokioClock);
    let on_std = ours_timed(StdClock);
    let coarse = CoarseClock::new();
    let on_coarse = ours_timed(coarse.clone());
    let peers = peers();
    let mut g = c.benchmark_group("policy/slow-timing");
    g.bench_function("watertight-untimed", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&untimed).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("watertight-coarse", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&on_coarse).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("watertight-std", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&on_std).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("watertight-tokio", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&on_tokio).call(ready).await.unwrap();
            })
        })
    });
    g.bench_function("tokio+failsafe", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                peer_call(black_box(&peers)).await.unwrap();
            })
        })
    });
    g.finish();
    for m in [
        on_tokio.breaker().metrics(),
        on_std.breaker().metrics(),
        on_coarse.breaker().metrics(),
    ] {
        assert_eq!((m.failed_calls, m.slow_calls), (0, 0), "{m:?}");
    }
    check_nothing_failed(&untimed, &peers);
}

/// A policy call written each way a caller writes it (`policy/forms`): the
/// policy is behind `black_box`, so every `Err` arm is live code; each form
/// should cost the same.
mod forms {
    use super::*;
    use watertight::policy::Error;

    pub(super) async fn unwrap(p: &Ours) {
        black_box(p).call(ready).await.unwrap();
    }

    pub(super) async fn if_let(p: &Ours) {
        if let Ok(v) = black_box(p).call(ready).await {
            black_box(v);
        }
    }

    /// A `match` whose `Err` arm uses the error (its retry hint).
    pub(super) async fn match_err(p: &Ours) {
        match black_box(p).call(ready).await {
            Ok(v) => {
                black_box(v);
            }
            Err(e) => {
                black_box(e.retry_after());
            }
        }
    }

    /// `?` in a function returning the error.
    async fn fallible(p: &Ours) -> Result<(), Error<()>> {
        black_box(p).call(ready).await?;
        Ok(())
    }

    /// The `?` form, its caller handling the error. (Every form consumes its
    /// result where it gets it: `black_box` of a whole 32-byte result, of
    /// which a success writes only the tag, would copy it in wide loads,
    /// which stall on store forwarding and time the harness, not the form.)
    pub(super) async fn question(p: &Ours) {
        if let Err(e) = fallible(p).await {
            black_box(e.retry_after());
        }
    }

    pub(super) async fn call_with(p: &Ours) {
        let got = black_box(p)
            .call_with(ready, |r| {
                if r.is_ok() {
                    Outcome::Success
                } else {
                    Outcome::Failure
                }
            })
            .await;
        match got {
            Ok(v) => {
                black_box(v);
            }
            Err(e) => {
                black_box(e.retry_after());
            }
        }
    }
}

fn forms(c: &mut Criterion, rt: &Runtime) {
    let ours = ours();
    let mut g = c.benchmark_group("policy/forms");
    g.bench_function("unwrap", |b| {
        b.iter_custom(|iters| looped(rt, iters, || forms::unwrap(&ours)))
    });
    g.bench_function("if-let", |b| {
        b.iter_custom(|iters| looped(rt, iters, || forms::if_let(&ours)))
    });
    g.bench_function("match-err", |b| {
        b.iter_custom(|iters| looped(rt, iters, || forms::match_err(&ours)))
    });
    g.bench_function("question-mark", |b| {
        b.iter_custom(|iters| looped(rt, iters, || forms::question(&ours)))
    });
    g.bench_function("call_with", |b| {
        b.iter_custom(|iters| looped(rt, iters, || forms::call_with(&ours)))
    });
    g.finish();
    check_nothing_failed(&ours, &peers());
}

/// The layers one by one, under the same `block_on`, to read the above.
fn parts(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("policy/parts");
    g.bench_function("watertight-timeout", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                timeout(TokioClock, CALL_TIMEOUT, ready())
                    .await
                    .unwrap()
                    .unwrap();
            })
        })
    });
    g.bench_function("tokio-timeout", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                tokio::time::timeout(CALL_TIMEOUT, ready())
                    .await
                    .unwrap()
                    .unwrap();
            })
        })
    });
    g.bench_function("Instant::now", |b| {
        b.iter_custom(|iters| looped(rt, iters, || async { Instant::now() }))
    });
    g.bench_function("TokioClock::now", |b| {
        b.iter_custom(|iters| looped(rt, iters, || async { black_box(TokioClock).now() }))
    });
    let bulkhead = Bulkhead::new("bench", MAX_CONCURRENT, TokioClock);
    g.bench_function("watertight-acquire_timeout", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                drop(
                    black_box(&bulkhead)
                        .acquire_timeout(MAX_WAIT)
                        .await
                        .unwrap(),
                );
            })
        })
    });
    let sem = tokio::sync::Semaphore::new(MAX_CONCURRENT);
    g.bench_function("tokio-acquire", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                drop(black_box(&sem).acquire().await.unwrap());
            })
        })
    });
    let breaker: CircuitBreaker<TokioClock, 64> =
        CircuitBreaker::new("bench", BreakerConfig::DEFAULT, TokioClock);
    g.bench_function("watertight-breaker", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                black_box(&breaker).call(ready()).await.unwrap();
            })
        })
    });
    // Our layers with no clock read and no sleep made: a free slot, the
    // breaker's permit, the call, its record. What a policy call costs
    // when the timeout is armed only if the call is pending.
    let floor_bulkhead = Bulkhead::new("bench", MAX_CONCURRENT, TokioClock);
    g.bench_function("watertight-floor", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                let _slot = black_box(&floor_bulkhead).try_acquire().unwrap();
                let permit = black_box(&breaker).try_acquire().unwrap();
                let r = ready().await;
                permit.record(if r.is_ok() {
                    Outcome::Success
                } else {
                    Outcome::Failure
                });
                r.unwrap();
            })
        })
    });
    let fs: FailsafeDefault = failsafe::Config::new().build();
    g.bench_function("failsafe-breaker", |b| {
        b.iter_custom(|iters| {
            looped(rt, iters, || async {
                failsafe::futures::CircuitBreaker::call(black_box(&fs), ready())
                    .await
                    .unwrap();
            })
        })
    });
    g.finish();
}

/// Every call above succeeded and left both sides as they were.
fn check_nothing_failed(ours: &Ours, peers: &Peers) {
    let m = ours.breaker().metrics();
    assert_eq!(m.failed_calls, 0, "ours recorded a failure");
    assert_eq!(
        ours.bulkhead().available(),
        MAX_CONCURRENT,
        "ours lost a slot"
    );
    assert_eq!(
        peers.sem.available_permits(),
        MAX_CONCURRENT,
        "peers lost a permit"
    );
    assert!(failsafe::CircuitBreaker::is_call_permitted(&peers.breaker));
}

fn main() {
    let rt = runtime();
    let mut c = Criterion::default().configure_from_args();
    call(&mut c, &rt);
    forms(&mut c, &rt);
    slow_timing(&mut c, &rt);
    call_within(&mut c, &rt);
    parts(&mut c, &rt);
    c.final_summary();
}
