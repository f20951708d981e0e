//! The soak: many tasks run random operations for a long time on one
//! bulkhead, one breaker and one policy, on a real runtime (or plain
//! threads), and the invariants that no scheduler may break are checked
//! throughout and whenever the tasks are all done.
//!
//! One engine for every runtime: a runtime file implements [`Rt`] (a timer
//! clock and a spawner) and calls [`run`]. The run is cut into rounds:
//! [`TASKS`] tasks each run [`PER_ROUND`] operations drawn from their own
//! seeded PRNG, then the round's tasks are awaited, a watchdog turning a
//! task that never finishes into a failure that names what it was doing.
//! At the end of every round (nothing is in flight then) the checks below
//! run, and a serial stretch of breaker operations is compared step for
//! step with the sequential reference (`tests/model/breaker.rs`): there the
//! order is known again, so the breaker that went through the concurrent
//! part must answer exactly as the model does.
//!
//! The operations: `try_acquire_many` (now and then above the capacity),
//! `acquire_many` with and without a deadline, each sometimes raced against
//! a short wait and dropped mid-wait; a permit held across yields or a real
//! 1 ms sleep, dropped, or `forget`-ed; a panic while a permit is held;
//! `resize` up and down; `close` and a fresh instance in its place; breaker
//! permits finished with every outcome or dropped, `call_with`, a panic in
//! the call, `force_open`, `reset`, and jumps of the breaker's
//! `ManualClock`; policy calls that answer, fail, take a real millisecond,
//! run past the call timeout, panic, or are dropped mid-call.
//!
//! Invariants:
//!
//! - throughout: the permits callers hold never exceed [`CAP`], the largest
//!   capacity a bulkhead is ever given (after a shrink, in flight may stay
//!   above the new capacity until permits come back, as `resize` documents);
//!   no refusal a caller cannot expect (`ExceedsCapacity` only for the
//!   requests made above the capacity);
//! - when all tasks are done, for every bulkhead instance: nothing in flight
//!   or waiting and available = capacity; every attempt counted once
//!   (`accepted + rejected + cancelled_waits` = attempts); every wait
//!   counted (`queued` at least the waits that were ever pending, and at
//!   most the waits: a timed wait can queue and time out within its first
//!   poll, when its deadline is due by then); the refusals by
//!   cause at least those callers saw, and what callers did not see (a
//!   permit handed to a waiter dropped before it looked, a refusal not
//!   looked at, a cancelled wait) adds up to the waits dropped while
//!   pending; every permit callers got came back or was forgotten;
//! - the breaker's and the policy's rejection counts equal the rejections
//!   callers saw; the policy's bulkhead, like the others, ends empty;
//! - the serial breaker stretch agrees with the model at every step.
//!
//! A run is reproducible as far as a real scheduler lets it be: the seed
//! fixes every task's operations (not their interleaving). The seed is
//! printed first, and every failure names it; `WT_SOAK_SEED` replays one,
//! `WT_SOAK_OPS` sets how many operations a run makes (default
//! [`DEFAULT_OPS`]).
//!
//! Include it with `#[path = "common/soak.rs"] mod soak;` after
//! `tests/model/check.rs` and `#[path = "model/breaker.rs"] mod breaker_model;`.

// Each runtime file uses a part of the report.
#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::task::Poll;
use std::time::Duration;

use futures_lite::{future, FutureExt};
use watertight::breaker::Inline;
use watertight::clock::{Clock, ManualClock, Timer};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CallError, CircuitBreaker, Outcome};

use crate::breaker_model::{Cfg, Harness, Op as ModelOp, Step, Win};

/// A spawned task, or the wait for one.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a runtime gives the soak.
pub trait Rt: Clone + Send + Sync + 'static {
    /// The runtime's timer clock (bulkhead waits, policy deadlines, sleeps).
    type Clock: Timer<Sleep: Send> + Clone + Send + Sync + 'static;

    /// A clock handle.
    fn clock(&self) -> Self::Clock;

    /// Starts `task` at once; the returned future completes when it has run
    /// to completion (and panics if the task panicked, where the runtime
    /// reports that).
    fn spawn_task(&self, task: BoxFuture) -> BoxFuture;
}

/// Tasks per round.
pub const TASKS: usize = 8;
/// Operations each task makes per round.
pub const PER_ROUND: u64 = 250;
/// Operations per run unless `WT_SOAK_OPS` says otherwise: a few seconds
/// on 2 cores in the debug test profile.
pub const DEFAULT_OPS: u64 = 100_000;
/// The largest capacity a soaked bulkhead is ever given.
pub const CAP: usize = 4;
/// The most permits one request asks for (requests above the capacity
/// aside). `resize` and `forget` keep the capacity at least this, so a
/// waiter is never refused for asking more than the capacity.
const MAX_N: usize = 2;
/// Serial breaker operations compared with the model after each round.
const REPLAY_OPS: usize = 24;
/// Real time without a single finished operation after which the watchdog
/// calls the run stuck: far beyond any wait the soak makes (a few ms).
const STALL: Duration = Duration::from_secs(30);

/// The soaked breaker's config, in the model's units.
const BREAKER: Cfg = Cfg {
    window_size: 8,
    minimum_calls: 4,
    failure_pct: 50,
    slow_ms: Some(2),
    slow_pct: 50,
    open_ms: 10,
    half_open_calls: 2,
    max_wait_ms: Some(20),
    window: Win::Count,
};

/// The payload of the panics the soak makes on purpose (not printed).
struct SoakPanic;

fn install_quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<SoakPanic>() {
                previous(info);
            }
        }));
    });
}

fn planted_panic() -> ! {
    std::panic::panic_any(SoakPanic)
}

fn is_planted(payload: &(dyn Any + Send)) -> bool {
    payload.is::<SoakPanic>()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The run's seed and length, from the environment.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Fixes every task's operations.
    pub seed: u64,
    /// Operations in the run, all tasks together.
    pub ops: u64,
}

impl Settings {
    /// `WT_SOAK_SEED` (decimal or `0x` hex; a fixed seed by default, so a
    /// plain `cargo test` is the same run every time) and `WT_SOAK_OPS`.
    pub fn from_env() -> Self {
        fn var(name: &str) -> Option<u64> {
            let v = std::env::var(name).ok()?;
            let v = v.trim().replace('_', "");
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            Some(parsed.unwrap_or_else(|e| panic!("{name}={v}: {e}")))
        }
        Settings {
            seed: var("WT_SOAK_SEED").unwrap_or(0x00c0_ffee),
            ops: var("WT_SOAK_OPS").unwrap_or(DEFAULT_OPS).max(1),
        }
    }
}

/// One bulkhead and what its callers saw of it.
struct Instance<C> {
    bh: Bulkhead<C>,
    serial: usize,
    /// Attempts to acquire (each polled at least once), requests above
    /// the capacity aside.
    attempts: AtomicUsize,
    grants: AtomicUsize,
    released: AtomicUsize,
    forgotten: AtomicUsize,
    full: AtomicUsize,
    timed_out: AtomicUsize,
    closed: AtomicUsize,
    /// Requests above the capacity, refused as such.
    above_capacity: AtomicUsize,
    /// Acquire futures polled (`acquire*`, as opposed to `try_acquire*`).
    waits: AtomicUsize,
    /// Acquire futures that were pending at least once.
    ever_pending: AtomicUsize,
    /// Acquire futures dropped while pending (cancelled mid-wait).
    dropped_pending: AtomicUsize,
    /// Permits callers hold right now.
    held: AtomicUsize,
}

impl<C> Instance<C> {
    fn new(serial: usize, clock: C) -> Self {
        Instance {
            bh: Bulkhead::new("soak", CAP, clock),
            serial,
            attempts: AtomicUsize::new(0),
            grants: AtomicUsize::new(0),
            released: AtomicUsize::new(0),
            forgotten: AtomicUsize::new(0),
            full: AtomicUsize::new(0),
            timed_out: AtomicUsize::new(0),
            closed: AtomicUsize::new(0),
            above_capacity: AtomicUsize::new(0),
            waits: AtomicUsize::new(0),
            ever_pending: AtomicUsize::new(0),
            dropped_pending: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
        }
    }
}

/// What callers saw of the policy.
#[derive(Default)]
struct PolicySeen {
    calls: AtomicUsize,
    ok: AtomicUsize,
    failed: AtomicUsize,
    full: AtomicUsize,
    open: AtomicUsize,
    deadline: AtomicUsize,
    panicked: AtomicUsize,
    cancelled: AtomicUsize,
}

type SoakBreaker = CircuitBreaker<&'static ManualClock, 8>;

/// Every run's clock and breaker.
static KEPT: Mutex<Vec<(&'static ManualClock, &'static SoakBreaker)>> = Mutex::new(Vec::new());
type SoakPolicy<C> = Policy<C, 8, Inline<8>, &'static ManualClock>;

/// Every operation kind, and how often it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TryAcquire,
    Acquire,
    AcquireTimeout,
    Forget,
    PanicHolding,
    Resize,
    Reopen,
    BreakerPermit,
    BreakerCall,
    BreakerPanic,
    ForceOpen,
    Reset,
    Jump,
    PolicyCall,
}

const KINDS: &[(u32, Kind)] = &[
    (140, Kind::TryAcquire),
    (120, Kind::Acquire),
    (140, Kind::AcquireTimeout),
    (15, Kind::Forget),
    (10, Kind::PanicHolding),
    (20, Kind::Resize),
    (2, Kind::Reopen),
    (150, Kind::BreakerPermit),
    (60, Kind::BreakerCall),
    (5, Kind::BreakerPanic),
    (2, Kind::ForceOpen),
    (6, Kind::Reset),
    (40, Kind::Jump),
    (140, Kind::PolicyCall),
];

const KIND_COUNT: usize = 14;

fn kind_index(kind: Kind) -> usize {
    KINDS
        .iter()
        .position(|&(_, k)| k == kind)
        .expect("every kind is in the table")
}

fn pick<T: Copy>(rng: &mut fastrand::Rng, table: &[(u32, T)]) -> T {
    let total: u32 = table.iter().map(|&(w, _)| w).sum();
    let mut n = rng.u32(0..total);
    for &(weight, value) in table {
        if n < weight {
            return value;
        }
        n -= weight;
    }
    unreachable!("drawn below the table's total")
}

/// What each task is doing, for the watchdog; and how much got done.
struct Progress {
    done: AtomicU64,
    by_kind: [AtomicU64; KIND_COUNT],
    doing: Vec<Mutex<(&'static str, u64)>>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            done: AtomicU64::new(0),
            by_kind: std::array::from_fn(|_| AtomicU64::new(0)),
            doing: (0..TASKS).map(|_| Mutex::new(("idle", 0))).collect(),
        }
    }

    fn start(&self, task: usize, what: &'static str, op: u64) {
        *lock(&self.doing[task]) = (what, op);
    }

    fn finish(&self, task: usize, kind: Kind) {
        *lock(&self.doing[task]) = ("idle", 0);
        self.by_kind[kind_index(kind)].fetch_add(1, SeqCst);
        self.done.fetch_add(1, SeqCst);
    }

    fn stuck(&self) -> String {
        self.doing
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let (what, op) = *lock(d);
                (what != "idle").then(|| format!("task {i} in operation {op}: {what}"))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Everything the tasks share.
struct World<R: Rt> {
    rt: R,
    seed: u64,
    label: &'static str,
    current: Mutex<Arc<Instance<R::Clock>>>,
    /// Every instance made, for the checks at the end of a round.
    instances: Mutex<Vec<Arc<Instance<R::Clock>>>>,
    /// Serialises `resize` and `forget`, which alone change the capacity,
    /// so that it stays at least [`MAX_N`].
    capacity_changes: Mutex<()>,
    clock: &'static ManualClock,
    breaker: &'static SoakBreaker,
    /// Rejections callers saw from the soaked breaker, ever.
    breaker_rejections: AtomicUsize,
    policy: SoakPolicy<R::Clock>,
    policy_seen: PolicySeen,
    planted_panics: AtomicUsize,
    progress: Progress,
}

impl<R: Rt> World<R> {
    fn tag(&self) -> String {
        format!(
            "soak on {} (seed {:#x}: WT_SOAK_SEED={:#x} replays it)",
            self.label, self.seed, self.seed
        )
    }

    fn current(&self) -> Arc<Instance<R::Clock>> {
        Arc::clone(&lock(&self.current))
    }

    fn sleep(&self, d: Duration) -> <R::Clock as Timer>::Sleep {
        let clock = self.rt.clock();
        clock.sleep_until(clock.now() + d)
    }
}

/// A permit a caller holds, counted while held (also while unwinding).
struct Held<'a, C> {
    inst: &'a Instance<C>,
    permit: Option<watertight::Permit<'a, C>>,
    n: usize,
}

impl<'a, C> Held<'a, C> {
    fn new(
        inst: &'a Instance<C>,
        permit: watertight::Permit<'a, C>,
        tag: &dyn Fn() -> String,
    ) -> Self {
        let n = permit.count();
        inst.grants.fetch_add(1, SeqCst);
        let now = inst.held.fetch_add(n, SeqCst) + n;
        assert!(
            now <= CAP && inst.bh.in_flight() <= CAP,
            "{}: instance {} has {now} permits held by callers (in flight {}), above every capacity it had ({CAP})",
            tag(),
            inst.serial,
            inst.bh.in_flight()
        );
        Held {
            inst,
            permit: Some(permit),
            n,
        }
    }

    fn forget(mut self) {
        self.inst.held.fetch_sub(self.n, SeqCst);
        self.inst.forgotten.fetch_add(1, SeqCst);
        self.permit.take().expect("held").forget();
    }
}

impl<C> Drop for Held<'_, C> {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.inst.held.fetch_sub(self.n, SeqCst);
            self.inst.released.fetch_add(1, SeqCst);
            drop(p);
        }
    }
}

/// Polls `fut` to the end, counting whether it was ever pending and
/// whether it was dropped while pending.
async fn watched<C, F: Future>(inst: &Instance<C>, fut: F) -> F::Output {
    struct Guard<'a, C> {
        inst: &'a Instance<C>,
        pending: bool,
        done: bool,
    }
    impl<C> Drop for Guard<'_, C> {
        fn drop(&mut self) {
            if self.pending && !self.done {
                self.inst.dropped_pending.fetch_add(1, SeqCst);
            }
        }
    }
    inst.waits.fetch_add(1, SeqCst);
    let mut guard = Guard {
        inst,
        pending: false,
        done: false,
    };
    let mut fut = pin!(fut);
    let out = future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Pending => {
            if !guard.pending {
                guard.pending = true;
                inst.ever_pending.fetch_add(1, SeqCst);
            }
            Poll::Pending
        }
        ready => ready,
    })
    .await;
    guard.done = true;
    out
}

/// Runs the soak on `rt`, as the runtime called `label`; returns what was
/// done (also printed).
pub async fn run<R: Rt>(rt: R, label: &'static str) -> Report {
    install_quiet_panics();
    let settings = Settings::from_env();
    let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
    let config = BREAKER.build();
    let breaker: &'static SoakBreaker =
        Box::leak(Box::new(CircuitBreaker::new("soak", config, clock)));
    // Kept reachable, for LeakSanitizer: leaked on purpose (tasks and the
    // serial stretch borrow them for `'static`), not lost.
    lock(&KEPT).push((clock, breaker));
    let policy_config = PolicyConfig::builder(3)
        .max_wait(Duration::from_millis(2))
        .call_timeout(Duration::from_millis(3))
        .breaker(
            BreakerConfig::builder()
                .window_size(8)
                .minimum_calls(4)
                .open_duration(Duration::from_millis(10))
                .build()
                .expect("a valid breaker config"),
        )
        .build()
        .expect("a valid policy config");
    let policy = Policy::with_breaker_clock("soak-policy", policy_config, rt.clock(), clock)
        .expect("the window fits");
    let first = Arc::new(Instance::new(0, rt.clock()));
    let world = Arc::new(World {
        rt: rt.clone(),
        seed: settings.seed,
        label,
        current: Mutex::new(Arc::clone(&first)),
        instances: Mutex::new(vec![first]),
        capacity_changes: Mutex::new(()),
        clock,
        breaker,
        breaker_rejections: AtomicUsize::new(0),
        policy,
        policy_seen: PolicySeen::default(),
        planted_panics: AtomicUsize::new(0),
        progress: Progress::new(),
    });
    println!(
        "{}: {} operations, {TASKS} tasks, {PER_ROUND} operations per task per round",
        world.tag(),
        settings.ops
    );
    let started = std::time::Instant::now();
    let per_round = TASKS as u64 * PER_ROUND;
    let rounds = settings.ops.div_ceil(per_round);
    let mut replayed = 0;
    for round in 0..rounds {
        let joins: Vec<BoxFuture> = (0..TASKS)
            .map(|t| {
                let world = Arc::clone(&world);
                let seed =
                    settings.seed ^ (round << 8 | t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                rt.spawn_task(Box::pin(async move { task(&world, t, seed).await }))
            })
            .collect();
        let all = async {
            for join in joins {
                join.await;
            }
            None
        };
        let stuck = future::or(all, watchdog(&world)).await;
        if let Some(stuck) = stuck {
            panic!(
                "{}: round {round}: no operation finished for {STALL:?}; stuck: {stuck}",
                world.tag()
            );
        }
        check_round(&world, round);
        replayed += replay(&world, round);
    }
    let instances = lock(&world.instances).len();
    let report = Report {
        label,
        seed: settings.seed,
        ops: world.progress.done.load(SeqCst),
        replayed,
        instances,
        planted_panics: world.planted_panics.load(SeqCst),
        elapsed: started.elapsed(),
        by_kind: KINDS
            .iter()
            .map(|&(_, k)| (k, world.progress.by_kind[kind_index(k)].load(SeqCst)))
            .map(|(k, n)| (format!("{k:?}"), n))
            .collect(),
        waits_cancelled: sum(&world, |i| i.bh.metrics().cancelled_waits),
        grants: sum(&world, |i| i.grants.load(SeqCst)),
        refusals: sum(&world, |i| i.bh.metrics().rejected()),
        policy_calls: world.policy_seen.calls.load(SeqCst),
        breaker_rejections: world.breaker_rejections.load(SeqCst),
    };
    println!("{report}");
    report
}

fn sum<R: Rt>(world: &World<R>, f: impl Fn(&Instance<R::Clock>) -> usize) -> usize {
    lock(&world.instances).iter().map(|i| f(i)).sum()
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// The runtime.
    pub label: &'static str,
    /// The seed.
    pub seed: u64,
    /// Operations finished by the tasks.
    pub ops: u64,
    /// Serial breaker operations compared with the model.
    pub replayed: usize,
    /// Bulkhead instances (one per close and reopen, and the first).
    pub instances: usize,
    /// Panics planted inside guarded code.
    pub planted_panics: usize,
    /// Real time the run took.
    pub elapsed: Duration,
    /// Operations by kind.
    pub by_kind: Vec<(String, u64)>,
    /// Waits dropped while queued, over every instance.
    pub waits_cancelled: usize,
    /// Permits callers were given, over every instance.
    pub grants: usize,
    /// Refusals, over every instance.
    pub refusals: usize,
    /// Policy calls made.
    pub policy_calls: usize,
    /// Rejections callers saw from the soaked breaker.
    pub breaker_rejections: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "soak on {}: {} operations in {:.1?} (seed {:#x}); {} grants, {} refusals, {} cancelled waits \
             on {} bulkheads; {} policy calls; {} breaker rejections; {} planted panics; \
             {} serial breaker steps agreed with the model; by kind:",
            self.label,
            self.ops,
            self.elapsed,
            self.seed,
            self.grants,
            self.refusals,
            self.waits_cancelled,
            self.instances,
            self.policy_calls,
            self.breaker_rejections,
            self.planted_panics,
            self.replayed
        )?;
        for (kind, n) in &self.by_kind {
            write!(f, " {kind} {n}")?;
        }
        Ok(())
    }
}

/// Completes with the list of stuck operations if no operation finishes
/// for [`STALL`] of real time; otherwise never.
async fn watchdog<R: Rt>(world: &World<R>) -> Option<String> {
    let mut last = world.progress.done.load(SeqCst);
    let mut since = std::time::Instant::now();
    loop {
        world.sleep(Duration::from_millis(50)).await;
        let done = world.progress.done.load(SeqCst);
        if done != last {
            (last, since) = (done, std::time::Instant::now());
        } else if since.elapsed() >= STALL {
            return Some(world.progress.stuck());
        }
    }
}

/// One task's round: [`PER_ROUND`] operations drawn from `seed`.
async fn task<R: Rt>(world: &World<R>, t: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    for op in 0..PER_ROUND {
        let kind = pick(&mut rng, KINDS);
        world.progress.start(t, kind_name(kind), op);
        match kind {
            Kind::TryAcquire => try_acquire(world, &mut rng).await,
            Kind::Acquire => acquire(world, &mut rng, None).await,
            Kind::AcquireTimeout => {
                let d = [0, 1, 3][rng.usize(0..3)];
                acquire(world, &mut rng, Some(Duration::from_millis(d))).await
            }
            Kind::Forget => forget(world, &mut rng),
            Kind::PanicHolding => panic_holding(world).await,
            Kind::Resize => {
                let inst = world.current();
                let _turn = lock(&world.capacity_changes);
                let c = rng.usize(MAX_N..=CAP);
                let old = inst.bh.capacity();
                assert_eq!(inst.bh.resize(c), Ok(old), "{}: resize({c})", world.tag());
            }
            Kind::Reopen => {
                let fresh = {
                    let mut all = lock(&world.instances);
                    let fresh = Arc::new(Instance::new(all.len(), world.rt.clock()));
                    all.push(Arc::clone(&fresh));
                    fresh
                };
                let old = std::mem::replace(&mut *lock(&world.current), fresh);
                old.bh.close();
            }
            Kind::BreakerPermit => breaker_permit(world, &mut rng).await,
            Kind::BreakerCall => breaker_call(world, &mut rng, false).await,
            Kind::BreakerPanic => breaker_call(world, &mut rng, true).await,
            Kind::ForceOpen => {
                world.breaker.force_open();
            }
            Kind::Reset => world.breaker.reset(),
            Kind::Jump => world.clock.advance(Duration::from_millis(rng.u64(1..=12))),
            Kind::PolicyCall => policy_call(world, &mut rng).await,
        }
        world.progress.finish(t, kind);
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::TryAcquire => "try_acquire_many",
        Kind::Acquire => "acquire_many (no deadline)",
        Kind::AcquireTimeout => "acquire_many_timeout",
        Kind::Forget => "try_acquire_many, then forget",
        Kind::PanicHolding => "a panic while holding a permit",
        Kind::Resize => "resize",
        Kind::Reopen => "close and reopen",
        Kind::BreakerPermit => "breaker try_acquire and an outcome",
        Kind::BreakerCall => "breaker call_with",
        Kind::BreakerPanic => "breaker call_with that panics",
        Kind::ForceOpen => "breaker force_open",
        Kind::Reset => "breaker reset",
        Kind::Jump => "a jump of the breaker's ManualClock",
        Kind::PolicyCall => "a policy call",
    }
}

/// Counts a refusal a caller saw, failing on one it cannot expect.
fn refused<R: Rt>(world: &World<R>, inst: &Instance<R::Clock>, e: AcquireError, above: bool) {
    match e {
        AcquireError::Full => inst.full.fetch_add(1, SeqCst),
        AcquireError::TimedOut => inst.timed_out.fetch_add(1, SeqCst),
        AcquireError::Closed => inst.closed.fetch_add(1, SeqCst),
        AcquireError::ExceedsCapacity { .. } if above => inst.above_capacity.fetch_add(1, SeqCst),
        other => panic!(
            "{}: instance {}: an unexpected refusal {other:?} (capacity {})",
            world.tag(),
            inst.serial,
            inst.bh.capacity()
        ),
    };
}

/// Holds a permit for a while: not at all, a few yields, or a real 1 ms.
async fn hold<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng) {
    match rng.u32(0..10) {
        0..=5 => {}
        6..=8 => {
            for _ in 0..rng.u32(1..=3) {
                future::yield_now().await;
            }
        }
        _ => world.sleep(Duration::from_millis(1)).await,
    }
}

async fn try_acquire<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng) {
    let inst = world.current();
    let above = rng.u32(0..50) == 0;
    let n = if above { CAP + 1 } else { rng.usize(1..=MAX_N) };
    if !above {
        inst.attempts.fetch_add(1, SeqCst);
    }
    match inst.bh.try_acquire_many(n) {
        Ok(p) => {
            assert!(
                !above,
                "{}: {n} permits granted above every capacity",
                world.tag()
            );
            let held = Held::new(&inst, p, &|| world.tag());
            hold(world, rng).await;
            drop(held);
        }
        Err(e) => {
            // A request above every capacity is not an attempt the
            // bulkhead counts (`ExceedsCapacity` is no rejection), unless
            // the instance was closed by then (another task replaced it
            // after this one read it): `Closed` is checked first, and
            // counted.
            if above && e == AcquireError::Closed {
                inst.attempts.fetch_add(1, SeqCst);
            }
            refused(world, &inst, e, above)
        }
    };
}

/// `acquire_many` (or `acquire_many_timeout`), a third of the time raced
/// against a short wait that drops it mid-wait.
async fn acquire<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng, timeout: Option<Duration>) {
    let inst = world.current();
    let n = rng.usize(1..=MAX_N);
    inst.attempts.fetch_add(1, SeqCst);
    let acquired = async {
        Some(match timeout {
            None => watched(&inst, inst.bh.acquire_many(n)).await,
            Some(d) => watched(&inst, inst.bh.acquire_many_timeout(n, d)).await,
        })
    };
    let result = match rng.u32(0..6) {
        0 => {
            let yields = rng.u32(0..4);
            future::or(acquired, async {
                for _ in 0..yields {
                    future::yield_now().await;
                }
                None
            })
            .await
        }
        1 => {
            future::or(acquired, async {
                world.sleep(Duration::from_millis(1)).await;
                None
            })
            .await
        }
        _ => acquired.await,
    };
    match result {
        Some(Ok(p)) => {
            let held = Held::new(&inst, p, &|| world.tag());
            hold(world, rng).await;
            drop(held);
        }
        Some(Err(e)) => refused(world, &inst, e, false),
        None => {}
    }
}

fn forget<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng) {
    let inst = world.current();
    let n = rng.usize(1..=MAX_N);
    inst.attempts.fetch_add(1, SeqCst);
    match inst.bh.try_acquire_many(n) {
        Ok(p) => {
            let held = Held::new(&inst, p, &|| world.tag());
            let _turn = lock(&world.capacity_changes);
            if inst.bh.capacity() >= n + MAX_N {
                held.forget();
            }
        }
        Err(e) => refused(world, &inst, e, false),
    };
}

async fn panic_holding<R: Rt>(world: &World<R>) {
    let inst = world.current();
    inst.attempts.fetch_add(1, SeqCst);
    let r = AssertUnwindSafe(async {
        let got = future::or(
            async { Some(watched(&inst, inst.bh.acquire()).await) },
            async {
                world.sleep(Duration::from_millis(2)).await;
                None
            },
        )
        .await;
        match got {
            Some(Ok(p)) => {
                let _held = Held::new(&inst, p, &|| world.tag());
                future::yield_now().await;
                planted_panic();
            }
            Some(Err(e)) => refused(world, &inst, e, false),
            None => {}
        }
    })
    .catch_unwind()
    .await;
    match r {
        Ok(()) => {}
        Err(payload) if is_planted(&*payload) => {
            world.planted_panics.fetch_add(1, SeqCst);
        }
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

fn outcome(rng: &mut fastrand::Rng) -> Outcome {
    [
        Outcome::Success,
        Outcome::Success,
        Outcome::Failure,
        Outcome::Ignored,
    ][rng.usize(0..4)]
}

async fn breaker_permit<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng) {
    match world.breaker.try_acquire() {
        Ok(p) => {
            if rng.bool() {
                future::yield_now().await;
            }
            if rng.u32(0..8) == 0 {
                // A slow call, by the breaker's clock.
                world.clock.advance(Duration::from_millis(3));
            }
            match rng.u32(0..5) {
                0 => drop(p),
                _ => p.record(outcome(rng)),
            }
        }
        Err(_) => {
            world.breaker_rejections.fetch_add(1, SeqCst);
        }
    }
}

async fn breaker_call<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng, panics: bool) {
    let result = outcome(rng);
    let yields = rng.bool();
    let call = AssertUnwindSafe(world.breaker.call_with(
        async move {
            if yields {
                future::yield_now().await;
            }
            if panics {
                planted_panic();
            }
            Ok::<(), ()>(())
        },
        move |_| result,
    ))
    .catch_unwind()
    .await;
    match call {
        Ok(Ok(())) => {}
        Ok(Err(CallError::Rejected(_))) => {
            world.breaker_rejections.fetch_add(1, SeqCst);
        }
        Ok(Err(e)) => panic!("{}: call_with: {e:?}", world.tag()),
        Err(payload) if is_planted(&*payload) => {
            world.planted_panics.fetch_add(1, SeqCst);
        }
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

async fn policy_call<R: Rt>(world: &World<R>, rng: &mut fastrand::Rng) {
    let seen = &world.policy_seen;
    seen.calls.fetch_add(1, SeqCst);
    let what = rng.u32(0..12);
    let call = world.policy.call(|| async move {
        match what {
            0..=3 => Ok(()),
            4..=5 => Err("failed"),
            6..=7 => {
                world.sleep(Duration::from_millis(1)).await;
                Ok(())
            }
            // Past the 3 ms call timeout: ended by the deadline.
            8 => {
                world.sleep(Duration::from_millis(20)).await;
                Ok(())
            }
            9 => {
                future::yield_now().await;
                planted_panic()
            }
            // Dropped mid-call (or mid-wait) by the race below.
            _ => {
                world.sleep(Duration::from_millis(10)).await;
                Ok(())
            }
        }
    });
    let raced = async {
        if what >= 10 {
            world.sleep(Duration::from_millis(1)).await;
        } else {
            future::pending::<()>().await;
        }
        None
    };
    let r = AssertUnwindSafe(future::or(async { Some(call.await) }, raced))
        .catch_unwind()
        .await;
    let counter = match r {
        Ok(None) => &seen.cancelled,
        Ok(Some(Ok(()))) => &seen.ok,
        Ok(Some(Err(e))) => match e.kind() {
            ErrorKind::Call(_) => &seen.failed,
            ErrorKind::BulkheadFull => &seen.full,
            ErrorKind::CircuitOpen(_) => &seen.open,
            ErrorKind::DeadlineExceeded => &seen.deadline,
            other => panic!("{}: policy call: unexpected {other:?}", world.tag()),
        },
        Err(payload) if is_planted(&*payload) => {
            world.planted_panics.fetch_add(1, SeqCst);
            &seen.panicked
        }
        Err(payload) => std::panic::resume_unwind(payload),
    };
    counter.fetch_add(1, SeqCst);
}

/// The checks once every task of `round` is done.
fn check_round<R: Rt>(world: &World<R>, round: u64) {
    let tag = || format!("{}: after round {round}", world.tag());
    for inst in lock(&world.instances).iter() {
        let m = inst.bh.metrics();
        let get = |a: &AtomicUsize| a.load(SeqCst);
        let id = inst.serial;
        assert_eq!(
            (m.in_flight, m.waiting, get(&inst.held)),
            (0, 0, 0),
            "{}: instance {id}: in flight, waiting, held by callers",
            tag()
        );
        assert_eq!(
            m.available,
            m.capacity,
            "{}: instance {id}: available = capacity",
            tag()
        );
        assert!(
            m.capacity >= MAX_N && m.capacity <= CAP,
            "{}: instance {id}: capacity {}",
            tag(),
            m.capacity
        );
        assert_eq!(
            m.accepted + m.rejected() + m.cancelled_waits,
            get(&inst.attempts),
            "{}: instance {id}: accepted + rejected + cancelled waits = attempts ({m:?})",
            tag()
        );
        assert!(
            get(&inst.ever_pending) <= m.queued && m.queued <= get(&inst.waits),
            "{}: instance {id}: queued between the waits ever pending ({}) and all waits ({}) ({m:?})",
            tag(),
            get(&inst.ever_pending),
            get(&inst.waits)
        );
        assert_eq!(
            get(&inst.grants),
            get(&inst.released) + get(&inst.forgotten),
            "{}: instance {id}: every permit callers got came back or was forgotten",
            tag()
        );
        let seen = [get(&inst.full), get(&inst.timed_out), get(&inst.closed)];
        let counted = [m.rejected_full, m.rejected_timed_out, m.rejected_closed];
        assert!(
            m.accepted >= get(&inst.grants) && seen.iter().zip(&counted).all(|(s, c)| c >= s),
            "{}: instance {id}: counted fewer than callers saw: grants {}, refusals seen {seen:?} ({m:?})",
            tag(),
            get(&inst.grants)
        );
        let unseen = (m.accepted - get(&inst.grants))
            + counted.iter().zip(&seen).map(|(c, s)| c - s).sum::<usize>()
            + m.cancelled_waits;
        assert_eq!(
            unseen,
            get(&inst.dropped_pending),
            "{}: instance {id}: what callers did not see adds up to the waits dropped while pending ({m:?})",
            tag()
        );
        if !Arc::ptr_eq(inst, &lock(&world.current)) {
            assert!(
                inst.bh.is_closed(),
                "{}: instance {id} was replaced but is open",
                tag()
            );
        }
    }
    let p = world.policy.bulkhead().metrics();
    let seen = &world.policy_seen;
    let get = |a: &AtomicUsize| a.load(SeqCst);
    assert_eq!(
        (p.in_flight, p.waiting, p.available),
        (0, 0, p.capacity),
        "{}: the policy's bulkhead is empty",
        tag()
    );
    assert_eq!(
        p.accepted + p.rejected() + p.cancelled_waits,
        get(&seen.calls),
        "{}: every policy call took a slot, was refused one, or was cancelled waiting ({p:?})",
        tag()
    );
    assert!(
        p.rejected() >= get(&seen.full) && p.rejected() <= get(&seen.full) + get(&seen.cancelled),
        "{}: the policy's bulkhead refusals ({p:?}) against BulkheadFull seen {}",
        tag(),
        get(&seen.full)
    );
    assert_eq!(
        world.policy.breaker().metrics().rejected,
        get(&seen.open),
        "{}: the policy's breaker rejections = CircuitOpen seen",
        tag()
    );
    assert_eq!(
        world.breaker.metrics().rejected,
        get(&world.breaker_rejections),
        "{}: the breaker's rejections = rejections callers saw",
        tag()
    );
}

/// After `round`: resets the soaked breaker and drives it serially next to
/// the model; returns the steps compared.
fn replay<R: Rt>(world: &World<R>, round: u64) -> usize {
    let mut rng = fastrand::Rng::with_seed(world.seed ^ round.wrapping_mul(0x2545_f491_4f6c_dd1d));
    world.breaker.reset();
    let mut h = Harness::resume(world.clock, world.breaker, BREAKER);
    let ops: Vec<ModelOp> = (0..REPLAY_OPS).map(|_| model_op(&mut rng)).collect();
    let mut result = h.check().map_err(|m| m.at("right after reset"));
    for (i, op) in ops.iter().enumerate() {
        if result.is_err() {
            break;
        }
        result = h
            .apply(op)
            .and_then(|()| h.check())
            .map_err(|m| m.at(format!("step {i} {op:?}")));
    }
    drop(h);
    // The serial stretch's rejections are the model's business: carry them
    // into the count the next round checks.
    world
        .breaker_rejections
        .store(world.breaker.metrics().rejected, SeqCst);
    if let Err(m) = result {
        panic!(
            "{}: after round {round}, the breaker disagrees with the sequential model: {m}\nsteps: {ops:?}",
            world.tag()
        );
    }
    REPLAY_OPS
}

fn model_op(rng: &mut fastrand::Rng) -> ModelOp {
    let i = rng.usize(0..8);
    let step = [
        Step::Ms(0),
        Step::Ms(1),
        Step::Slow(0),
        Step::Slow(1),
        Step::Open(-1),
        Step::Open(0),
        Step::MaxWait(1),
        Step::Big,
    ][rng.usize(0..8)];
    match rng.u32(0..40) {
        0..=9 => ModelOp::Acquire,
        10..=14 => ModelOp::Success(i),
        15..=19 => ModelOp::Failure(i),
        20..=21 => ModelOp::Ignore(i),
        22..=23 => ModelOp::Drop(i),
        24..=30 => ModelOp::Advance(step),
        31..=36 => ModelOp::Call(outcome(rng), step),
        37 => ModelOp::ForceOpen,
        38 => ModelOp::Disable,
        _ => ModelOp::Reset,
    }
}
