//! A closed-state call with a trivial `Ok`, ours beside recloser's and
//! failsafe's breakers (failsafe twice: its default policy, and consecutive
//! failures only), every peer in the same run.
//!
//! Every criterion iteration is one call (admit + run the trivial call +
//! record its outcome), so criterion's time per iteration is ns per call.
//!
//! | group | what |
//! |---|---|
//! | `breaker/closed/sync` | one call, one thread: ours `try_acquire().unwrap().success()` (and `watertight-call`, the same wrapped as a `call(\|\| …)` function like the peers'; `watertight-time` and `watertight-time-coarse`, the same call on a 100 ms time window of 10 buckets on `StdClock` and on `CoarseClock`; `watertight-consecutive`, on 5 consecutive failures); peers `.call(\|\| Ok(()))` |
//! | `breaker/forms/sync` | ours only (also timed in interleaved rounds with `WT_FORMS_ROUNDS=41`, and counted in instructions by `scripts/forms_instructions.py`), one closed-state call written each way a caller writes it: `try_acquire().unwrap()`, `if let Ok(p)`, a `match` whose `Err` arm uses the rejection, `?` in a function returning it, and `call` / `call_with` polled once with a no-op waker, and `call` awaited in an `async` block polled the same way (`call-awaited`) (and `ref-poll-ready`, the trivial call's future polled the same way with no breaker: the wrapped forms' harness share); the breaker and the call's result behind `black_box` (every `Err` arm live), the outcome recorded from the result |
//! | `breaker/closed/async` | a loop of `call(async { Ok(()) }).await` in one `futures_lite::future::block_on`; peers' future-aware breakers the same way |
//! | `breaker/closed/async-block_on-per-call` | one `block_on(call(async { Ok(()) }))` per call, every peer on the same `block_on` |
//! | `breaker/slow-timing/sync` | as `closed/sync`, ours with `slow_call_duration(1 s)` on `StdClock` (two clock reads per call); `watertight-untimed` is ours without, `watertight-coarse` the same timed breaker on `CoarseClock` (two relaxed loads per call), `watertight-quanta` on a bench-local clock reading `quanta::Clock::recent()` (quanta's `Upkeep` at 1 ms, `CoarseClock`'s default resolution, running beside `CoarseClock`'s updater); `Instant::now`, `StdClock::now`, `quanta::Clock::now` (TSC, scaled), `CoarseClock::now`, `quanta::Clock::recent` and `quanta::Instant::recent` (the global form) one clock read each, as references |
//! | `breaker/contended/2-threads` | 2 threads hammer one breaker with sync trivial calls, released together by a barrier; time per call per thread (the slower thread's wall time ÷ its calls) |
//!
//! Ours is `CircuitBreaker<StdClock, 64>` with `BreakerConfig::DEFAULT` (slow
//! calls off: a closed-state call reads no clock); recloser is
//! `Recloser::default()` (its `AsyncRecloser` for async); failsafe is
//! `Config::new().build()` (success rate over a time window, or else 5
//! consecutive failures, jittered backoff) and a breaker with
//! `consecutive_failures(5, constant(30 s))` only.
//!
//! After the criterion groups it prints `size_of` of the breakers (peers keep
//! their state behind a pointer, so theirs is the handle only) and saves it
//! for `scripts/bench_table.py`.
//!
//! Run: `cargo bench --bench breaker` (≈ 4 min), then
//! `python3 scripts/bench_table.py --only breaker --write`, which puts the
//! tables into the guide (`src/guide/benchmarks.rs`, `watertight::guide::benchmarks`).
//! Quick: `cargo bench --bench breaker -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::Criterion;
use futures_lite::future::block_on;
use watertight::breaker::TimeBreaker;
use watertight::clock::{Clock, CoarseClock, Instant as WtInstant, StdClock};
use watertight::{BreakerConfig, CallError, CircuitBreaker};

/// Ours, as benched: the window's capacity `N` is 64 (the default window
/// is 50).
type Ours = CircuitBreaker<StdClock, 64>;

// The size the guide states (160 B on x86_64; guide::benchmarks), checked where the numbers are made.
#[cfg(target_arch = "x86_64")]
const _: () = assert!(size_of::<Ours>() <= 160);

/// Threads in the contended group.
const THREADS: usize = 2;

fn ours() -> Ours {
    CircuitBreaker::new("bench", BreakerConfig::DEFAULT, StdClock)
}

/// The slow-timing group's config: calls over 1 s are slow.
fn timed_config() -> BreakerConfig {
    BreakerConfig::builder()
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .expect("slow-call config")
}

fn ours_timed() -> Ours {
    CircuitBreaker::new("bench", timed_config(), StdClock)
}

type FailsafeDefault = failsafe::StateMachine<
    failsafe::failure_policy::OrElse<
        failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::EqualJittered>,
        failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::EqualJittered>,
    >,
    (),
>;

type FailsafeConsecutive = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
>;

fn failsafe_default() -> FailsafeDefault {
    failsafe::Config::new().build()
}

fn failsafe_consecutive() -> FailsafeConsecutive {
    failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            5,
            failsafe::backoff::constant(Duration::from_secs(30)),
        ))
        .build()
}

/// The trivial call every peer makes.
#[inline]
fn trivial() -> Result<(), ()> {
    Ok(())
}

/// Ours as a sync `call(f)` function, the shape of the peers' `call`: what a
/// user writes around [`CircuitBreaker::try_acquire`].
#[inline]
fn ours_call<C: Clock, const N: usize, T, E>(
    b: &CircuitBreaker<C, N>,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, CallError<E>> {
    let permit = b.try_acquire().map_err(CallError::Rejected)?;
    let result = f();
    match result {
        Ok(_) => permit.success(),
        Err(_) => permit.failure(),
    }
    result.map_err(CallError::Failed)
}

// ---------------------------------------------------------------------------
// One sync call of each peer
// ---------------------------------------------------------------------------

#[inline]
fn ours_once(b: &Ours) {
    black_box(b).try_acquire().unwrap().success();
}

#[inline]
fn recloser_once(r: &recloser::Recloser) {
    black_box(black_box(r).call(trivial)).unwrap();
}

#[inline]
fn failsafe_once<P: failsafe::FailurePolicy>(f: &failsafe::StateMachine<P, ()>) {
    black_box(failsafe::CircuitBreaker::call(black_box(f), trivial)).unwrap();
}

/// The peers of the sync groups, each measured by `bench`.
fn sync_peers(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let rec = recloser::Recloser::default();
    g.bench_function("recloser", |b| b.iter(|| recloser_once(&rec)));
    let fs = failsafe_default();
    g.bench_function("failsafe-default", |b| b.iter(|| failsafe_once(&fs)));
    let fs = failsafe_consecutive();
    g.bench_function("failsafe-consecutive", |b| b.iter(|| failsafe_once(&fs)));
}

/// Ours with a sliding time window of 10 buckets (resilience4j's
/// time-based default shape) of 10 ms each, on the given clock. Short
/// buckets so that every call the bench times is counted: a bucket caps at
/// 4 194 303 calls, which criterion's loop reaches in tens of milliseconds,
/// after which a success adds nothing and the bench would time that
/// (cheaper) path. The length costs a call nothing else: one call in a
/// bucket's (about a million here) moves the window on.
fn ours_time<C: watertight::clock::Clock>(clock: C) -> TimeBreaker<C, 10> {
    let config = BreakerConfig::builder()
        .time_window(Duration::from_millis(100), 10)
        .build()
        .expect("time-window config");
    TimeBreaker::new("bench", config, clock)
}

/// Ours tripping on 5 failures in a row (failsafe's consecutive policy).
fn ours_consecutive() -> CircuitBreaker<StdClock, 1> {
    let config = BreakerConfig::builder()
        .consecutive_failures(5)
        .build()
        .expect("consecutive config");
    CircuitBreaker::new("bench", config, StdClock)
}

#[inline]
fn ours_time_once<C: watertight::clock::Clock>(b: &TimeBreaker<C, 10>) {
    black_box(b).try_acquire().unwrap().success();
}

#[inline]
fn ours_consecutive_once(b: &CircuitBreaker<StdClock, 1>) {
    black_box(b).try_acquire().unwrap().success();
}

fn closed_sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker/closed/sync");
    let b = ours();
    g.bench_function("watertight", |bn| bn.iter(|| ours_once(&b)));
    let b = ours_time(StdClock);
    g.bench_function("watertight-time", |bn| bn.iter(|| ours_time_once(&b)));
    let b = ours_time(CoarseClock::new());
    g.bench_function("watertight-time-coarse", |bn| {
        bn.iter(|| ours_time_once(&b))
    });
    let b = ours_consecutive();
    g.bench_function("watertight-consecutive", |bn| {
        bn.iter(|| ours_consecutive_once(&b))
    });
    let b = ours();
    g.bench_function("watertight-call", |bn| {
        bn.iter(|| black_box(ours_call(black_box(&b), trivial)).unwrap())
    });
    sync_peers(&mut g);
    g.finish();
}

/// The forms a caller writes a closed-state call in (`breaker/forms/sync`).
/// Each makes the trivial call, its result behind `black_box`, and records
/// the outcome its result gives; the breaker is behind `black_box` too, so no
/// form can prove the call is never refused: every `Err` arm is live code.
///
/// Each form is a function of its own (`#[inline(never)]`), compiled once
/// and called through its pointer in [`forms::ALL`] by every loop that runs
/// it (criterion's, the rounds', the instruction count's), with what it
/// calls inlined into it: left to `#[inline]`, a
/// form used from three loops was kept out of line and its `poll_once`
/// too, which then took the future by address (`call` 1.65× the fastest
/// instead of the same).
mod forms {
    use super::*;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    use watertight::breaker::CallPermit;
    use watertight::clock::StdClock;
    use watertight::Rejection;

    /// The trivial call, opaque to the optimiser.
    #[inline(always)]
    fn made() -> Result<(), ()> {
        black_box(trivial())
    }

    /// Records what the call's result says.
    #[inline(always)]
    fn record(p: CallPermit<'_, StdClock, 64>, r: Result<(), ()>) {
        match r {
            Ok(()) => p.success(),
            Err(()) => p.failure(),
        }
    }

    #[inline(never)]
    pub(super) fn unwrap(b: &Ours) {
        let p = black_box(b).try_acquire().unwrap();
        record(p, made());
    }

    #[inline(never)]
    pub(super) fn if_let(b: &Ours) {
        if let Ok(p) = black_box(b).try_acquire() {
            record(p, made());
        }
    }

    /// A `match` whose `Err` arm uses the rejection (its retry hint).
    #[inline(never)]
    pub(super) fn match_err(b: &Ours) {
        match black_box(b).try_acquire() {
            Ok(p) => record(p, made()),
            Err(why) => {
                black_box(why.retry_after());
            }
        }
    }

    /// `?` in a function returning the rejection.
    #[inline(always)]
    fn fallible(b: &Ours) -> Result<(), Rejection> {
        let p = black_box(b).try_acquire()?;
        record(p, made());
        Ok(())
    }

    /// The `?` form: its function inlined into the caller, which takes the
    /// result.
    #[inline(never)]
    pub(super) fn question(b: &Ours) {
        let _ = black_box(fallible(b));
    }

    /// Polls a future once with a no-op waker: the wrapped forms, without an
    /// executor's cost (the call is ready at once).
    #[inline(always)]
    fn poll_once<F: std::future::Future>(f: F) -> Poll<F::Output> {
        let f = pin!(f);
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// The wrapped forms' own share, for reading them: the trivial call's
    /// future polled once the same way, with no breaker.
    #[inline(never)]
    pub(super) fn poll_ready(_: &Ours) {
        let got = poll_once(std::future::ready(made()));
        let _ = black_box(got);
    }

    #[inline(never)]
    pub(super) fn call(b: &Ours) {
        let got = poll_once(black_box(b).call(std::future::ready(made())));
        let _ = black_box(got);
    }

    /// `call` as async code writes it: awaited in an `async` block, that
    /// block polled once.
    #[inline(never)]
    pub(super) fn call_awaited(b: &Ours) {
        let got = poll_once(async { black_box(b).call(std::future::ready(made())).await });
        let _ = black_box(got);
    }

    /// A form: its row name, and the function making its call.
    pub(super) type Form = (&'static str, fn(&Ours));

    /// Every form, for each loop that runs them; the `ref-` row is a
    /// reference, not a form.
    pub(super) const ALL: [Form; 8] = [
        ("unwrap", unwrap),
        ("if-let", if_let),
        ("match-err", match_err),
        ("question-mark", question),
        ("call", call),
        ("call-awaited", call_awaited),
        ("call_with", call_with),
        ("ref-poll-ready", poll_ready),
    ];

    #[inline(never)]
    pub(super) fn call_with(b: &Ours) {
        let got = poll_once(black_box(b).call_with(std::future::ready(made()), |r| {
            if r.is_ok() {
                watertight::Outcome::Success
            } else {
                watertight::Outcome::Failure
            }
        }));
        let _ = black_box(got);
    }
}

/// Instruction counts, for `scripts/forms_instructions.py`: with
/// `WT_COUNT_FORM` set, the binary makes that form's call (or, for `none`,
/// nothing) `WT_COUNT_CALLS` times through a function pointer, after 1000
/// calls that fill the window, and exits; run under callgrind, the count
/// of a form minus that of `none`, over the calls, is the form's
/// instructions per call. Time on this machine moves by a tenth between
/// runs; the count does not. Besides the forms: `untimed` and `coarse`,
/// the slow-timing group's untimed call and the same call timed on
/// `CoarseClock`.
fn count_instructions(form: &str) {
    fn nothing(_: &Ours) {}
    let calls: u64 = std::env::var("WT_COUNT_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    // The other windows' closed calls, each as `untimed` is the count
    // window's (`ours_once`).
    match form {
        "time" => {
            let b = ours_time(StdClock);
            let f = black_box(ours_time_once::<StdClock> as fn(&TimeBreaker<StdClock, 10>));
            (0..1000 + calls).for_each(|_| f(&b));
            return;
        }
        "time-coarse" => {
            let b = ours_time(CoarseClock::new());
            let f = black_box(ours_time_once::<CoarseClock> as fn(&TimeBreaker<CoarseClock, 10>));
            (0..1000 + calls).for_each(|_| f(&b));
            return;
        }
        "consecutive" => {
            let b = ours_consecutive();
            let f = black_box(ours_consecutive_once as fn(&CircuitBreaker<StdClock, 1>));
            (0..1000 + calls).for_each(|_| f(&b));
            return;
        }
        _ => {}
    }
    if form == "coarse" {
        let b: CircuitBreaker<CoarseClock, 64> =
            CircuitBreaker::new("bench", timed_config(), CoarseClock::new());
        let f: fn(&CircuitBreaker<CoarseClock, 64>) = |b| {
            black_box(b).try_acquire().unwrap().success();
        };
        let f = black_box(f);
        (0..1000 + calls).for_each(|_| f(&b));
        return;
    }
    let f: fn(&Ours) = match form {
        "none" => nothing,
        "untimed" => ours_once,
        _ => match forms::ALL.iter().find(|(name, _)| *name == form) {
            Some(&(_, f)) => f,
            None => panic!("WT_COUNT_FORM: no form {form:?}"),
        },
    };
    let f = black_box(f);
    let b = ours();
    (0..1000 + calls).for_each(|_| f(&b));
}

/// The forms timed in rounds (`WT_FORMS_ROUNDS=R`): each round times every
/// form over the same number of calls (each form a function of its own, as
/// criterion's loop calls it), starting at a different form each round; a
/// form's figure is its median over the rounds. Criterion times one form
/// after another, so this machine's drift (a tenth between runs of a few
/// seconds) lands on whichever form it falls on; here every form sees it.
fn forms_in_rounds(rounds: usize) {
    fn timed(calls: u64, f: impl Fn()) -> f64 {
        let start = Instant::now();
        for _ in 0..calls {
            f();
        }
        start.elapsed().as_nanos() as f64 / calls as f64
    }
    let b = ours();
    (0..1000).for_each(|_| ours_once(&b));
    let calls = 200_000;
    let forms = forms::ALL;
    let mut seen = vec![Vec::with_capacity(rounds); forms.len()];
    for round in 0..rounds {
        for k in 0..forms.len() {
            let i = (round + k) % forms.len();
            let f = forms[i].1;
            seen[i].push(timed(calls, || f(&b)));
        }
    }
    let medians: Vec<f64> = seen
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    let is_form = |name: &str| !name.starts_with("ref-");
    let fastest = forms
        .iter()
        .zip(&medians)
        .filter(|((name, _), _)| is_form(name))
        .map(|(_, &m)| m)
        .fold(f64::INFINITY, f64::min);
    println!("| form | ns, median of {rounds} rounds of {calls} calls | ÷ fastest |");
    println!("|---|---|---|");
    for ((name, _), m) in forms.iter().zip(&medians) {
        let ratio = if is_form(name) {
            format!("{:.2}×", m / fastest)
        } else {
            "–".to_string()
        };
        println!("| `{name}` | {m:.2} ns | {ratio} |");
    }
    assert_eq!(b.metrics().failed_calls, 0);
}

/// One closed-state call written each way a caller writes it: every form
/// should cost the same.
fn forms_sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker/forms/sync");
    let b = ours();
    for (name, f) in forms::ALL {
        g.bench_function(name, |bn| bn.iter(|| f(&b)));
    }
    g.finish();
    assert_eq!(b.metrics().failed_calls, 0);
}

/// The [`Clock`] a user would write on quanta's coarse time: the time
/// `quanta::Upkeep` last stored (`quanta::Clock::recent()`, one load), as
/// nanoseconds since the quanta time at construction, the way our std-based
/// clocks count from their origin.
struct QuantaRecent {
    clock: quanta::Clock,
    origin: quanta::Instant,
}

impl QuantaRecent {
    fn new(clock: quanta::Clock) -> Self {
        let origin = clock.now();
        QuantaRecent { clock, origin }
    }
}

impl Clock for QuantaRecent {
    #[inline]
    fn now(&self) -> WtInstant {
        // Saturates at the origin (quanta's `recent` is 0 before an
        // `Upkeep` runs), and at `u64::MAX` nanoseconds (584 years).
        let d = self.clock.recent().saturating_duration_since(self.origin);
        WtInstant::from_nanos(
            d.as_secs()
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::from(d.subsec_nanos())),
        )
    }
    /// Like `CoarseClock`'s, a load: the breaker inlines it the same way.
    const CHEAP_NOW: bool = true;
}

fn slow_timing(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker/slow-timing/sync");
    let b = ours_timed();
    g.bench_function("watertight", |bn| bn.iter(|| ours_once(&b)));
    let b = ours();
    g.bench_function("watertight-untimed", |bn| bn.iter(|| ours_once(&b)));
    g.bench_function("Instant::now", |bn| bn.iter(|| black_box(Instant::now())));
    g.bench_function("StdClock::now", |bn| {
        bn.iter(|| black_box(black_box(StdClock).now()))
    });
    // quanta's calibration (TSC against the OS clock) runs here, untimed.
    let quanta_clock = quanta::Clock::new();
    g.bench_function("quanta::Clock::now", |bn| {
        bn.iter(|| black_box(black_box(&quanta_clock).now()))
    });
    // Both updaters run, at 1 ms, for every row from here on.
    let coarse = CoarseClock::new();
    let upkeep =
        quanta::Upkeep::new_with_clock(CoarseClock::DEFAULT_RESOLUTION, quanta_clock.clone())
            .start()
            .expect("quanta's upkeep thread");
    g.bench_function("CoarseClock::now", |bn| {
        bn.iter(|| black_box(black_box(&coarse).now()))
    });
    g.bench_function("quanta::Clock::recent", |bn| {
        bn.iter(|| black_box(black_box(&quanta_clock).recent()))
    });
    g.bench_function("quanta::Instant::recent", |bn| {
        bn.iter(|| black_box(quanta::Instant::recent()))
    });
    let config = timed_config();
    let b: CircuitBreaker<CoarseClock, 64> = CircuitBreaker::new("bench", config, coarse.clone());
    g.bench_function("watertight-coarse", |bn| {
        bn.iter(|| black_box(&b).try_acquire().unwrap().success())
    });
    let b: CircuitBreaker<QuantaRecent, 64> =
        CircuitBreaker::new("bench", config, QuantaRecent::new(quanta_clock.clone()));
    g.bench_function("watertight-quanta", |bn| {
        bn.iter(|| black_box(&b).try_acquire().unwrap().success())
    });
    sync_peers(&mut g);
    g.finish();
    drop(upkeep);
}

// ---------------------------------------------------------------------------
// Async
// ---------------------------------------------------------------------------

async fn ready() -> Result<(), ()> {
    Ok(())
}

/// `iters` calls in one `block_on`: the loop's time.
fn ours_async_loop(b: &Ours, iters: u64) -> Duration {
    block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(black_box(b).call(ready()).await).unwrap();
        }
        start.elapsed()
    })
}

fn recloser_async_loop(r: &recloser::AsyncRecloser, iters: u64) -> Duration {
    block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(black_box(r).call(ready()).await).unwrap();
        }
        start.elapsed()
    })
}

fn failsafe_async_loop<P>(f: &failsafe::StateMachine<P, ()>, iters: u64) -> Duration
where
    P: failsafe::FailurePolicy + Send + Sync,
{
    block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(failsafe::futures::CircuitBreaker::call(black_box(f), ready()).await)
                .unwrap();
        }
        start.elapsed()
    })
}

fn closed_async(c: &mut Criterion) {
    let b = ours();
    let rec = recloser::AsyncRecloser::from(recloser::Recloser::default());
    let fs_default = failsafe_default();
    let fs_consecutive = failsafe_consecutive();

    let mut g = c.benchmark_group("breaker/closed/async");
    g.bench_function("watertight", |bn| {
        bn.iter_custom(|iters| ours_async_loop(&b, iters))
    });
    g.bench_function("recloser", |bn| {
        bn.iter_custom(|iters| recloser_async_loop(&rec, iters))
    });
    g.bench_function("failsafe-default", |bn| {
        bn.iter_custom(|iters| failsafe_async_loop(&fs_default, iters))
    });
    g.bench_function("failsafe-consecutive", |bn| {
        bn.iter_custom(|iters| failsafe_async_loop(&fs_consecutive, iters))
    });
    g.finish();

    // block_on caches its parker and waker per thread; warm it once.
    block_on(async {});
    let mut g = c.benchmark_group("breaker/closed/async-block_on-per-call");
    g.bench_function("watertight", |bn| {
        bn.iter(|| black_box(block_on(black_box(&b).call(ready()))).unwrap())
    });
    g.bench_function("recloser", |bn| {
        bn.iter(|| black_box(block_on(black_box(&rec).call(ready()))).unwrap())
    });
    g.bench_function("failsafe-default", |bn| {
        bn.iter(|| {
            let call = failsafe::futures::CircuitBreaker::call(black_box(&fs_default), ready());
            black_box(block_on(call)).unwrap()
        })
    });
    g.bench_function("failsafe-consecutive", |bn| {
        bn.iter(|| {
            let call = failsafe::futures::CircuitBreaker::call(black_box(&fs_consecutive), ready());
            black_box(block_on(call)).unwrap()
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// Contended
// ---------------------------------------------------------------------------

/// `THREADS` threads each make `iters` calls on `shared`, released together
/// by a barrier; returns the slower thread's time, so criterion's time per
/// iteration is the time per call per thread.
fn hammer<S: Sync>(shared: &S, iters: u64, call: impl Fn(&S) + Sync) -> Duration {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        call(shared);
                    }
                    start.elapsed()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("bench thread panicked"))
            .max()
            .unwrap_or_default()
    })
}

fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("breaker/contended/{THREADS}-threads"));
    let b = ours();
    g.bench_function("watertight", |bn| {
        bn.iter_custom(|iters| hammer(&b, iters, ours_once))
    });
    let rec = recloser::Recloser::default();
    g.bench_function("recloser", |bn| {
        bn.iter_custom(|iters| hammer(&rec, iters, recloser_once))
    });
    let fs = failsafe_default();
    g.bench_function("failsafe-default", |bn| {
        bn.iter_custom(|iters| hammer(&fs, iters, failsafe_once))
    });
    let fs = failsafe_consecutive();
    g.bench_function("failsafe-consecutive", |bn| {
        bn.iter_custom(|iters| hammer(&fs, iters, failsafe_once))
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

fn sizes(save: bool) {
    let sizes = [
        (
            "watertight::CircuitBreaker<StdClock, 64>",
            size_of::<Ours>(),
        ),
        ("recloser::Recloser", size_of::<recloser::Recloser>()),
        (
            "failsafe::StateMachine (default)",
            size_of::<FailsafeDefault>(),
        ),
    ];
    println!();
    println!("| type | size_of on {} |", std::env::consts::ARCH);
    println!("|---|---|");
    for (ty, size) in sizes {
        println!("| `{ty}` | {size} B |");
    }
    println!();
    println!(
        "(recloser's state and ring buffer and failsafe's whole state machine live on the \
         heap; their size is the handle's)"
    );
    if save {
        let rows: Vec<String> = sizes
            .iter()
            .map(|(ty, size)| format!("    {{\"type\": \"{ty}\", \"bytes\": {size}}}"))
            .collect();
        let json = format!(
            "{{\n  \"arch\": \"{}\",\n  \"sizes\": [\n{}\n  ]\n}}\n",
            std::env::consts::ARCH,
            rows.join(",\n")
        );
        let dir = criterion_dir();
        let path = dir.join("breaker-sizes.json");
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, json)) {
            eprintln!("sizes: could not write {}: {e}", path.display());
        }
    }
}

/// Where criterion writes its reports (its own rule: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else the target dir this binary sits in).
fn criterion_dir() -> std::path::PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return std::path::PathBuf::from(target).join("criterion");
    }
    // target/<profile>/deps/breaker-<hash>
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|t| t.join("criterion")))
        .unwrap_or_else(|| "target/criterion".into())
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

fn main() {
    if let Ok(form) = std::env::var("WT_COUNT_FORM") {
        count_instructions(&form);
        return;
    }
    if let Some(rounds) = std::env::var("WT_FORMS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        forms_in_rounds(rounds);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` does not (then
    // criterion runs each benchmark once, and nothing is saved).
    let mut bench = false;
    let mut list = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--bench" => bench = true,
            "--list" | "--profile-time" => list = true,
            _ => {}
        }
    }
    let test = !bench || std::env::args().any(|a| a == "--test");

    let mut c = Criterion::default().configure_from_args();
    closed_sync(&mut c);
    forms_sync(&mut c);
    closed_async(&mut c);
    slow_timing(&mut c);
    contended(&mut c);
    c.final_summary();

    if !list {
        sizes(!test);
    }
}
