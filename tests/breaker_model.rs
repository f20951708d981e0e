#![cfg(not(loom))]
//! Model-based test of `CircuitBreaker`: random sequences of operations run
//! single-threaded against the real `CircuitBreaker<&ManualClock, 8>` (and,
//! the same cases, against a `HeapBreaker`, whose window is sized at run
//! time; and on the heap breaker with windows of 100 and 1000) and
//! against a plain sequential reference model written below (a state enum, a
//! generation counter, a `VecDeque` of outcomes, the instant the open wait
//! began and the instant the half-open episode last admitted a probe, probe
//! counts, rejected and stale counters). Every answer must be the same
//! (permit or rejection, the exact `Rejection` with its `retry_after`, whether
//! the permit is a probe, what `force_open`/`disable` return, what
//! `call_with` returns), and after every step so must `state()`, every field
//! of `metrics()` and which outstanding permits are probes.
//!
//! The model encodes the documented semantics, not the implementation: the
//! `CircuitBreaker` doc section "Decisions on edge semantics" and the method
//! and field docs. In particular:
//!
//! - rates are evaluated after every recorded outcome once the window holds
//!   `minimum_calls`; `rate >= threshold` trips; slow is strictly longer than
//!   `slow_call_duration`, measured by the breaker's clock from `try_acquire`
//!   (or the first poll of `call_with`) to the outcome;
//! - the open wait ends at `opened_at + open_duration` (the instant of the
//!   transition); `Rejection::Open` carries the time left; `state()` says
//!   HalfOpen once the wait is over, without changing anything;
//! - a half-open episode begins with the first `try_acquire` after the wait
//!   (at that instant), which is its first probe; exactly `half_open_calls`
//!   probes in total, more get `ProbesBusy`; an ignored or dropped probe of
//!   the current episode gives its slot back; the first failed or slow probe
//!   reopens (from now); `half_open_calls` successes close;
//! - with `max_half_open_wait`, an episode that has a probe out and has
//!   admitted no probe for that long has reopened *as of* that moment (the
//!   last admission plus the limit), as if the probe had failed: from then
//!   on `state()` reads Open, the open wait runs from that instant, it is the
//!   last transition, a probe outcome recorded after it is stale, and a probe
//!   given back after it gives back nothing (the episode is over); an
//!   episode with no probe out does not expire;
//! - Closed → Open and HalfOpen → Open (and ForcedOpen, Disabled) keep the
//!   window frozen; entering HalfOpen or Closed starts it empty; half-open
//!   probes are recorded in it for metrics but decide by their own counts;
//! - every transition bumps a generation; a success or failure recorded on a
//!   permit of an older generation changes nothing and counts as stale; an
//!   ignored outcome or a drop is not a recorded outcome, so it is never
//!   stale; Disabled records nothing (and its own permits are not stale while
//!   it stays Disabled);
//! - `force_open`, `disable` are transitions unless the breaker is already in
//!   that state (they return whether they made the change); `reset` empties
//!   the window and starts a new generation, and is a transition unless the
//!   breaker is already Closed (then `last_transition` stays);
//! - `metrics()` agrees with `state()`: once the open wait is over and before
//!   the first probe, it shows HalfOpen, an empty window and the end of the
//!   wait as `last_transition`;
//! - `metrics().rejected` counts every rejection (Open, ProbesBusy,
//!   ForcedOpen).
//!
//! The clock moves in whole milliseconds (timestamps are exact to 1 µs), in
//! steps chosen relative to the case's config so that the boundaries (slow
//! duration, open wait, half-open limit, each ± 1 ms) are hit often.
//!
//! Two properties: `every_operation` (operator switches included) and
//! `open_half_open_cycles` (no `force_open`/`disable`, more clock steps and
//! successes, so many Closed → Open → HalfOpen → Open/Closed cycles per
//! case). `cargo test --all-features --test breaker_model` runs 10,000 cases
//! of each; `PROPTEST_CASES` overrides that.
//!
//! The `regression_*` tests at the end are divergences the model found,
//! spelled out step by step as the shrunk operation sequences.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::breaker::{Heap, Inline, State, WindowStorage};
use watertight::clock::{Clock, ManualClock};
use watertight::{BreakerConfig, CallError, CallPermit, CircuitBreaker, Outcome, Rejection};

/// The heap breaker's `N`: the largest window.
const HEAP: usize = BreakerConfig::MAX_WINDOW_SIZE;

const MS: u64 = 1_000_000;

// ---------------------------------------------------------------------------
// Config and operations.
// ---------------------------------------------------------------------------

/// A case's breaker config, in the units the model works in.
#[derive(Debug, Clone, Copy)]
struct Cfg {
    window_size: usize,
    minimum_calls: usize,
    /// Percent.
    failure_pct: u64,
    /// Milliseconds; `None`: slow-call detection off.
    slow_ms: Option<u64>,
    /// Percent.
    slow_pct: u64,
    open_ms: u64,
    half_open_calls: usize,
    /// Milliseconds; `None`: no limit.
    max_wait_ms: Option<u64>,
}

impl Cfg {
    fn build(&self) -> BreakerConfig {
        let mut b = BreakerConfig::builder()
            .window_size(self.window_size)
            .minimum_calls(self.minimum_calls)
            .failure_rate_threshold(self.failure_pct as f32)
            .slow_call_rate_threshold(self.slow_pct as f32)
            .open_duration(Duration::from_millis(self.open_ms))
            .half_open_calls(self.half_open_calls);
        if let Some(ms) = self.slow_ms {
            b = b.slow_call_duration(Duration::from_millis(ms));
        }
        if let Some(ms) = self.max_wait_ms {
            b = b.max_half_open_wait(Duration::from_millis(ms));
        }
        b.build().expect("the generated config is valid")
    }
}

fn cfgs() -> impl Strategy<Value = Cfg> {
    cfgs_of(1..=8usize, |window_size| 1..=window_size)
}

/// Windows of 100 and 1000, for the heap breaker: a case's operations
/// (at most 60) never fill them, so the minimum is at most 50 for rates to
/// be evaluated.
fn large_cfgs() -> impl Strategy<Value = Cfg> {
    cfgs_of(prop::sample::select(vec![100usize, 1000]), |_| 1..=50usize)
}

fn cfgs_of(
    windows: impl Strategy<Value = usize>,
    minimum: fn(usize) -> core::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Cfg> {
    windows.prop_flat_map(move |window_size| {
        (
            minimum(window_size),
            prop::sample::select(vec![20u64, 30, 50, 75, 100]),
            prop_oneof![2 => Just(None), 3 => prop::sample::select(vec![1u64, 2, 5, 10]).prop_map(Some)],
            prop::sample::select(vec![20u64, 50, 75, 100]),
            prop::sample::select(vec![1u64, 5, 10, 30]),
            1..=3usize,
            prop_oneof![1 => Just(None), 1 => prop::sample::select(vec![1u64, 3, 10, 50]).prop_map(Some)],
        )
            .prop_map(
                move |(
                    minimum_calls,
                    failure_pct,
                    slow_ms,
                    slow_pct,
                    open_ms,
                    half_open_calls,
                    max_wait_ms,
                )| Cfg {
                    window_size,
                    minimum_calls,
                    failure_pct,
                    slow_ms,
                    slow_pct,
                    open_ms,
                    half_open_calls,
                    max_wait_ms,
                },
            )
    })
}

/// How far the clock moves, resolved against the case's config so that the
/// interesting boundaries are hit; every step is whole milliseconds.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// This many milliseconds (0 included).
    Ms(u64),
    /// The slow-call duration (2 ms when off) plus this, at least 0.
    Slow(i8),
    /// The open duration plus this, at least 0.
    Open(i8),
    /// The half-open limit (the open duration when off) plus this, at least 0.
    MaxWait(i8),
    /// One second: past every duration the config can have.
    Big,
}

impl Step {
    fn ms(self, cfg: &Cfg) -> u64 {
        let plus = |base: u64, d: i8| base.saturating_add_signed(i64::from(d));
        match self {
            Step::Ms(ms) => ms,
            Step::Slow(d) => plus(cfg.slow_ms.unwrap_or(2), d),
            Step::Open(d) => plus(cfg.open_ms, d),
            Step::MaxWait(d) => plus(cfg.max_wait_ms.unwrap_or(cfg.open_ms), d),
            Step::Big => 1_000,
        }
    }
}

/// One step of a test case. Permit indices pick among the outstanding
/// permits (modulo their number); with none outstanding the step does
/// nothing.
#[derive(Clone)]
enum Op {
    /// `try_acquire`, keeping the permit.
    Acquire,
    /// `success()` on a permit.
    Success(usize),
    /// `failure()` on a permit.
    Failure(usize),
    /// `ignore()` on a permit.
    Ignore(usize),
    /// Drop a permit without an outcome.
    Drop(usize),
    /// `ManualClock::advance`.
    Advance(Step),
    /// `call_with` on a future that advances the clock by the step, then is
    /// classified as the outcome.
    Call(Outcome, Step),
    /// `force_open()`.
    ForceOpen,
    /// `disable()`.
    Disable,
    /// `reset()`.
    Reset,
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Acquire => write!(f, "Acquire"),
            Op::Success(i) => write!(f, "Success({i})"),
            Op::Failure(i) => write!(f, "Failure({i})"),
            Op::Ignore(i) => write!(f, "Ignore({i})"),
            Op::Drop(i) => write!(f, "Drop({i})"),
            Op::Advance(s) => write!(f, "Advance({s:?})"),
            Op::Call(o, s) => write!(f, "Call({o:?}, {s:?})"),
            Op::ForceOpen => write!(f, "ForceOpen"),
            Op::Disable => write!(f, "Disable"),
            Op::Reset => write!(f, "Reset"),
        }
    }
}

/// Operation kinds, for drawing.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Acquire,
    Success,
    Failure,
    Ignore,
    Drop,
    Advance,
    Call,
    ForceOpen,
    Disable,
    Reset,
}

/// Weighted tables an operation is drawn from, one small integer per table.
/// (Nested `prop_oneof!`s spent several times longer generating a case than
/// running it in the debug test profile; ranges of integers are cheap, and
/// they shrink towards each table's first row.)
///
/// Every operation; the operator switches are rare, as Disabled and
/// ForcedOpen last until the next `reset`.
const ALL: &[(u32, Kind)] = &[
    (10, Kind::Acquire),
    (6, Kind::Success),
    (6, Kind::Failure),
    (2, Kind::Ignore),
    (2, Kind::Drop),
    (8, Kind::Advance),
    (5, Kind::Call),
    (1, Kind::ForceOpen),
    (1, Kind::Disable),
    (2, Kind::Reset),
];

/// No operator switches but `reset`, and more time and probes: the cycle
/// Closed → Open → HalfOpen → Open or Closed, many times per case.
const CYCLE: &[(u32, Kind)] = &[
    (10, Kind::Acquire),
    (7, Kind::Success),
    (5, Kind::Failure),
    (2, Kind::Ignore),
    (2, Kind::Drop),
    (10, Kind::Advance),
    (5, Kind::Call),
    (1, Kind::Reset),
];

const OUTCOMES: &[(u32, Outcome)] = &[
    (4, Outcome::Success),
    (4, Outcome::Failure),
    (1, Outcome::Ignored),
];

const STEPS: &[(u32, Step)] = &[
    (2, Step::Ms(0)),
    (2, Step::Ms(1)),
    (1, Step::Ms(2)),
    (1, Step::Ms(5)),
    (1, Step::Slow(-1)),
    (1, Step::Slow(0)),
    (1, Step::Slow(1)),
    (1, Step::Open(-1)),
    (2, Step::Open(0)),
    (1, Step::Open(1)),
    (1, Step::MaxWait(-1)),
    (1, Step::MaxWait(0)),
    (1, Step::MaxWait(1)),
    (1, Step::Big),
];

const fn total<T>(table: &[(u32, T)]) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while i < table.len() {
        sum += table[i].0;
        i += 1;
    }
    sum
}

fn pick<T: Copy>(table: &[(u32, T)], mut n: u32) -> T {
    for &(weight, value) in table {
        if n < weight {
            return value;
        }
        n -= weight;
    }
    unreachable!("drawn below the table's total")
}

fn op(kinds: &'static [(u32, Kind)]) -> impl Strategy<Value = Op> {
    (
        0..total(kinds),
        0..8usize,
        0..total(OUTCOMES),
        0..total(STEPS),
    )
        .prop_map(|(kind, i, outcome, step)| {
            let step = pick(STEPS, step);
            match pick(kinds, kind) {
                Kind::Acquire => Op::Acquire,
                Kind::Success => Op::Success(i),
                Kind::Failure => Op::Failure(i),
                Kind::Ignore => Op::Ignore(i),
                Kind::Drop => Op::Drop(i),
                Kind::Advance => Op::Advance(step),
                Kind::Call => Op::Call(pick(OUTCOMES, outcome), step),
                Kind::ForceOpen => Op::ForceOpen,
                Kind::Disable => Op::Disable,
                Kind::Reset => Op::Reset,
            }
        })
}

fn ops(kinds: &'static [(u32, Kind)]) -> impl Strategy<Value = Vec<Op>> {
    vec(op(kinds), 0..=60)
}

// ---------------------------------------------------------------------------
// The reference model.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    /// Open since `opened_at` (ns); the wait may be over (then `state()`
    /// says HalfOpen, but no episode has begun yet).
    Open {
        opened_at: u64,
    },
    /// A half-open episode: probes out (admitted, no outcome yet, not given
    /// back), probes that succeeded, and when it last admitted one (ns).
    HalfOpen {
        out: usize,
        succeeded: usize,
        last_admitted: u64,
    },
    ForcedOpen,
    Disabled,
}

/// What the model knows of a permit.
#[derive(Debug, Clone, Copy)]
struct ModelPermit {
    gen: u64,
    probe: bool,
    /// ns, by the breaker's clock.
    acquired_at: u64,
}

/// One window entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    failed: bool,
    slow: bool,
}

/// The model's `metrics()`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ModelMetrics {
    state: State,
    calls: usize,
    failed_calls: usize,
    slow_calls: usize,
    rejected: usize,
    stale: usize,
    /// ns.
    last_transition: Option<u64>,
}

#[derive(Debug)]
struct Model {
    cfg: Cfg,
    /// ns.
    now: u64,
    phase: Phase,
    gen: u64,
    window: VecDeque<Entry>,
    rejected: usize,
    stale: usize,
    /// ns.
    last_transition: Option<u64>,
    /// Outstanding permits, index for index with the harness's.
    permits: Vec<ModelPermit>,
}

impl Model {
    fn new(cfg: Cfg) -> Self {
        Model {
            cfg,
            now: 0,
            phase: Phase::Closed,
            gen: 0,
            window: VecDeque::new(),
            rejected: 0,
            stale: 0,
            last_transition: None,
            permits: Vec::new(),
        }
    }

    fn open_ns(&self) -> u64 {
        self.cfg.open_ms * MS
    }

    /// A transition at `at`: a new generation; entering Closed or HalfOpen
    /// starts an empty window, every other state keeps it frozen.
    fn transition(&mut self, to: Phase, at: u64) {
        self.gen += 1;
        self.last_transition = Some(at);
        if matches!(to, Phase::Closed | Phase::HalfOpen { .. }) {
            self.window.clear();
        }
        self.phase = to;
    }

    /// When the half-open episode ran out of time, if it has: a probe is out
    /// and none has been admitted for `max_half_open_wait`.
    fn expiry(&self) -> Option<u64> {
        match (self.phase, self.cfg.max_wait_ms) {
            (
                Phase::HalfOpen {
                    out, last_admitted, ..
                },
                Some(max),
            ) if out > 0 && self.now >= last_admitted + max * MS => Some(last_admitted + max * MS),
            _ => None,
        }
    }

    /// An episode that ran out of time has reopened, as of that moment. The
    /// model applies this before every operation and after every clock step,
    /// so that the moment is never missed: what happens later (a probe's
    /// outcome, a probe given back) happens to an open breaker.
    fn expire(&mut self) {
        if let Some(at) = self.expiry() {
            self.transition(Phase::Open { opened_at: at }, at);
        }
    }

    fn state(&self) -> State {
        match self.phase {
            Phase::Closed => State::Closed,
            Phase::Open { opened_at } if self.now >= opened_at + self.open_ns() => State::HalfOpen,
            Phase::Open { .. } => State::Open,
            Phase::HalfOpen { .. } => match self.expiry() {
                Some(at) if self.now < at + self.open_ns() => State::Open,
                _ => State::HalfOpen,
            },
            Phase::ForcedOpen => State::ForcedOpen,
            Phase::Disabled => State::Disabled,
        }
    }

    fn reject(&mut self, why: Rejection) -> Result<ModelPermit, Rejection> {
        self.rejected += 1;
        Err(why)
    }

    fn acquire(&mut self) -> Result<ModelPermit, Rejection> {
        self.expire();
        let now = self.now;
        match self.phase {
            Phase::Closed | Phase::Disabled => {}
            Phase::ForcedOpen => return self.reject(Rejection::ForcedOpen),
            Phase::Open { opened_at } => {
                let ends = opened_at + self.open_ns();
                if now < ends {
                    let retry_after = Duration::from_nanos(ends - now);
                    return self.reject(Rejection::Open { retry_after });
                }
                // The wait is over: this call begins an episode as its first
                // probe.
                let episode = Phase::HalfOpen {
                    out: 1,
                    succeeded: 0,
                    last_admitted: now,
                };
                self.transition(episode, now);
            }
            Phase::HalfOpen { out, succeeded, .. } => {
                // Every admission takes a slot for good unless the probe
                // gives it back: the episode's total is the probe count.
                if out + succeeded >= self.cfg.half_open_calls {
                    return self.reject(Rejection::ProbesBusy);
                }
                self.phase = Phase::HalfOpen {
                    out: out + 1,
                    succeeded,
                    last_admitted: now,
                };
            }
        }
        Ok(ModelPermit {
            gen: self.gen,
            probe: matches!(self.phase, Phase::HalfOpen { .. }),
            acquired_at: now,
        })
    }

    fn finish(&mut self, p: ModelPermit, outcome: Outcome) {
        match outcome {
            Outcome::Success => self.record(p, false),
            Outcome::Failure => self.record(p, true),
            Outcome::Ignored => self.give_back(p),
        }
    }

    /// An ignored outcome or a drop without one: a probe of the current
    /// episode gives its slot back; nothing else happens.
    fn give_back(&mut self, p: ModelPermit) {
        self.expire();
        if !p.probe || p.gen != self.gen {
            return;
        }
        match &mut self.phase {
            Phase::HalfOpen { out, .. } => *out -= 1,
            other => panic!("model: a probe of the current generation in {other:?}"),
        }
    }

    fn record(&mut self, p: ModelPermit, failed: bool) {
        self.expire();
        if p.gen != self.gen {
            self.stale += 1;
            return;
        }
        let slow = self
            .cfg
            .slow_ms
            .is_some_and(|ms| self.now - p.acquired_at > ms * MS);
        let now = self.now;
        match self.phase {
            Phase::Closed => {
                self.push(Entry { failed, slow });
                if self.trips() {
                    self.transition(Phase::Open { opened_at: now }, now);
                }
            }
            Phase::HalfOpen {
                out,
                succeeded,
                last_admitted,
            } => {
                assert!(p.probe, "model: a non-probe permit of a half-open episode");
                self.push(Entry { failed, slow });
                if failed || slow {
                    self.transition(Phase::Open { opened_at: now }, now);
                } else if succeeded + 1 >= self.cfg.half_open_calls {
                    self.transition(Phase::Closed, now);
                } else {
                    self.phase = Phase::HalfOpen {
                        out: out - 1,
                        succeeded: succeeded + 1,
                        last_admitted,
                    };
                }
            }
            Phase::Disabled => {}
            Phase::Open { .. } | Phase::ForcedOpen => {
                panic!(
                    "model: a permit of the current generation in {:?}",
                    self.phase
                )
            }
        }
    }

    fn push(&mut self, e: Entry) {
        self.window.push_back(e);
        if self.window.len() > self.cfg.window_size {
            self.window.pop_front();
        }
    }

    fn counts(&self) -> (usize, usize, usize) {
        let calls = self.window.len();
        let failed = self.window.iter().filter(|e| e.failed).count();
        let slow = self.window.iter().filter(|e| e.slow).count();
        (calls, failed, slow)
    }

    fn trips(&self) -> bool {
        let (calls, failed, slow) = self.counts();
        let (calls, failed, slow) = (calls as u64, failed as u64, slow as u64);
        calls >= self.cfg.minimum_calls as u64
            && (failed * 100 >= self.cfg.failure_pct * calls
                || (self.cfg.slow_ms.is_some() && slow * 100 >= self.cfg.slow_pct * calls))
    }

    /// `force_open` / `disable`: a transition unless already there.
    fn switch(&mut self, to: Phase) -> bool {
        self.expire();
        if self.phase == to {
            return false;
        }
        let now = self.now;
        self.transition(to, now);
        true
    }

    fn reset(&mut self) {
        self.expire();
        if self.phase == Phase::Closed {
            // No state change: a fresh window and generation, but no
            // transition (nothing told, `last_transition` unchanged).
            self.gen += 1;
            self.window.clear();
            return;
        }
        let now = self.now;
        self.transition(Phase::Closed, now);
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms * MS;
        self.expire();
    }

    /// Half-open by the clock, before the first probe: when the open wait
    /// ended.
    fn lazily_half_open(&self) -> Option<u64> {
        match self.phase {
            Phase::Open { opened_at } if self.now >= opened_at + self.open_ns() => {
                Some(opened_at + self.open_ns())
            }
            _ => None,
        }
    }

    /// The window as `metrics()` shows it: empty once the open wait is over
    /// (the half-open episode `state()` reports starts empty).
    fn shown_counts(&self) -> (usize, usize, usize) {
        match self.lazily_half_open() {
            Some(_) => (0, 0, 0),
            None => self.counts(),
        }
    }

    fn metrics(&self) -> ModelMetrics {
        let (calls, failed_calls, slow_calls) = self.shown_counts();
        ModelMetrics {
            state: self.state(),
            calls,
            failed_calls,
            slow_calls,
            rejected: self.rejected,
            stale: self.stale,
            last_transition: self.lazily_half_open().or(self.last_transition),
        }
    }

    /// Failure and slow-call rates in percent, `None` below the minimum.
    fn rates(&self) -> (Option<f64>, Option<f64>) {
        let (calls, failed, slow) = self.shown_counts();
        if calls == 0 || calls < self.cfg.minimum_calls {
            return (None, None);
        }
        let pct = |n: usize| n as f64 * 100.0 / calls as f64;
        (Some(pct(failed)), Some(pct(slow)))
    }
}

// ---------------------------------------------------------------------------
// The harness: the real breaker, driven step by step next to the model.
// ---------------------------------------------------------------------------

type Clk<'a> = &'a ManualClock;
type Breaker<'a> = CircuitBreaker<Clk<'a>, 8>;

struct Harness<'a, const N: usize, W: WindowStorage> {
    clock: &'a ManualClock,
    breaker: &'a CircuitBreaker<Clk<'a>, N, (), W>,
    permits: Vec<CallPermit<'a, Clk<'a>, N, (), W>>,
    model: Model,
}

fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

/// A rate of the library against the model's: both `None`, or equal to
/// within f32 rounding.
fn same_rate(got: Option<f32>, want: Option<f64>) -> bool {
    match (got, want) {
        (None, None) => true,
        (Some(g), Some(w)) => (f64::from(g) - w).abs() < 1e-3,
        _ => false,
    }
}

impl<'a, const N: usize, W: WindowStorage> Harness<'a, N, W> {
    fn new(
        clock: &'a ManualClock,
        breaker: &'a CircuitBreaker<Clk<'a>, N, (), W>,
        cfg: Cfg,
    ) -> Self {
        Harness {
            clock,
            breaker,
            permits: Vec::new(),
            model: Model::new(cfg),
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Acquire => {
                let want = self.model.acquire();
                let got = self.breaker.try_acquire();
                match (got, want) {
                    (Ok(p), Ok(mp)) => {
                        prop_assert_eq!(p.is_probe(), mp.probe, "try_acquire: is_probe");
                        self.permits.push(p);
                        self.model.permits.push(mp);
                    }
                    (Err(r), Err(mr)) => prop_assert_eq!(r, mr, "try_acquire: rejection"),
                    (got, want) => {
                        return Err(fail(format!(
                            "try_acquire: got {:?}, model {:?}",
                            got.map(|p| p.is_probe()),
                            want.map(|p| p.probe)
                        )))
                    }
                }
            }
            Op::Success(i) => self.finish(i, Outcome::Success),
            Op::Failure(i) => self.finish(i, Outcome::Failure),
            Op::Ignore(i) => self.finish(i, Outcome::Ignored),
            Op::Drop(i) => {
                if !self.permits.is_empty() {
                    let i = i % self.permits.len();
                    drop(self.permits.remove(i));
                    let mp = self.model.permits.remove(i);
                    self.model.give_back(mp);
                }
            }
            Op::Advance(step) => {
                let ms = step.ms(&self.model.cfg);
                self.clock.advance(Duration::from_millis(ms));
                self.model.advance(ms);
            }
            Op::Call(outcome, step) => {
                let ms = step.ms(&self.model.cfg);
                let want = self.model.acquire().map(|mp| {
                    self.model.now += ms * MS;
                    self.model.finish(mp, outcome);
                });
                let clock = self.clock;
                let got = futures_lite::future::block_on(self.breaker.call_with(
                    async move {
                        clock.advance(Duration::from_millis(ms));
                        Ok::<(), ()>(())
                    },
                    move |_| outcome,
                ));
                prop_assert_eq!(got, want.map_err(CallError::Rejected), "call_with");
            }
            Op::ForceOpen => {
                let want = self.model.switch(Phase::ForcedOpen);
                prop_assert_eq!(self.breaker.force_open(), want, "force_open()");
            }
            Op::Disable => {
                let want = self.model.switch(Phase::Disabled);
                prop_assert_eq!(self.breaker.disable(), want, "disable()");
            }
            Op::Reset => {
                self.model.reset();
                self.breaker.reset();
            }
        }
        // The clock only moves forward: a half-open limit may have run out.
        self.model.expire();
        Ok(())
    }

    fn finish(&mut self, i: usize, outcome: Outcome) {
        if self.permits.is_empty() {
            return;
        }
        let i = i % self.permits.len();
        self.permits.remove(i).record(outcome);
        let mp = self.model.permits.remove(i);
        self.model.finish(mp, outcome);
    }

    /// The library's observable state against the model's.
    fn check(&self) -> Result<(), TestCaseError> {
        let m = &self.model;
        prop_assert_eq!(self.clock.now().as_nanos(), m.now, "clock");
        prop_assert_eq!(self.breaker.state(), m.state(), "state()");
        let lib = self.breaker.metrics();
        let got = ModelMetrics {
            state: lib.state,
            calls: lib.calls,
            failed_calls: lib.failed_calls,
            slow_calls: lib.slow_calls,
            rejected: lib.rejected,
            stale: lib.stale,
            last_transition: lib.last_transition.map(|t| t.as_nanos()),
        };
        prop_assert_eq!(got, m.metrics(), "metrics()");
        let (failure_rate, slow_call_rate) = m.rates();
        prop_assert!(
            same_rate(lib.failure_rate, failure_rate),
            "metrics().failure_rate: got {:?}, model {:?}",
            lib.failure_rate,
            failure_rate
        );
        prop_assert!(
            same_rate(lib.slow_call_rate, slow_call_rate),
            "metrics().slow_call_rate: got {:?}, model {:?}",
            lib.slow_call_rate,
            slow_call_rate
        );
        prop_assert_eq!(
            self.permits
                .iter()
                .map(CallPermit::is_probe)
                .collect::<Vec<_>>(),
            m.permits.iter().map(|p| p.probe).collect::<Vec<_>>(),
            "outstanding permits: is_probe"
        );
        Ok(())
    }
}

/// Runs `ops` on a breaker of capacity `N` with its window in `W`, next to
/// the model.
fn run<const N: usize, W: WindowStorage>(cfg: Cfg, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::<_, N, (), W>::try_new("model", cfg.build(), &clock)
        .expect("the window fits");
    let mut h = Harness::new(&clock, &breaker, cfg);
    h.check()?;
    for (step, op) in ops.iter().enumerate() {
        if let Err(e) = h.apply(op).and_then(|()| h.check()) {
            return Err(fail(format!(
                "step {step} {op:?}: {e}\nmodel: {:?}",
                h.model
            )));
        }
    }
    Ok(())
}

/// 10,000 cases by default, 20 under Miri; `PROPTEST_CASES` overrides both
/// (`with_cases` alone would ignore it).
fn config() -> ProptestConfig {
    let mut config = if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(if cfg!(miri) { 20 } else { 10_000 })
    };
    if cfg!(miri) {
        // No file system under Miri's isolation.
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    /// Random configs and random sequences of every operation: the same
    /// answers and the same observable state as the model at every step.
    #[test]
    fn every_operation(cfg in cfgs(), ops in ops(ALL)) {
        run::<8, Inline<8>>(cfg, &ops)?;
    }

    /// The same without `force_open` and `disable`, with more clock steps
    /// and successes: many open / half-open / close cycles per case.
    #[test]
    fn open_half_open_cycles(cfg in cfgs(), ops in ops(CYCLE)) {
        run::<8, Inline<8>>(cfg, &ops)?;
    }

    /// `every_operation` on the heap breaker (the window sized at run time).
    #[test]
    fn every_operation_heap(cfg in cfgs(), ops in ops(ALL)) {
        run::<HEAP, Heap>(cfg, &ops)?;
    }

    /// `open_half_open_cycles` on the heap breaker.
    #[test]
    fn open_half_open_cycles_heap(cfg in cfgs(), ops in ops(CYCLE)) {
        run::<HEAP, Heap>(cfg, &ops)?;
    }

    /// Every operation on heap windows of 100 and 1000.
    #[test]
    fn every_operation_heap_large_windows(cfg in large_cfgs(), ops in ops(ALL)) {
        run::<HEAP, Heap>(cfg, &ops)?;
    }
}

// ---------------------------------------------------------------------------
// Divergences the model found, step for step as proptest shrunk them. Each
// one fails against the library as it is.
// ---------------------------------------------------------------------------

/// The config of both shrunk cases: one-call window, one probe, 1 ms open
/// wait (5 ms in the second), 1 ms half-open limit.
fn shrunk_cfg(open_ms: u64) -> Cfg {
    Cfg {
        window_size: 1,
        minimum_calls: 1,
        failure_pct: 20,
        slow_ms: None,
        slow_pct: 20,
        open_ms,
        half_open_calls: 1,
        max_wait_ms: Some(1),
    }
}

fn at_ms(ms: u64) -> Option<u64> {
    Some(ms * MS)
}

/// An episode that ran out of time (a probe out, no admission for
/// `max_half_open_wait`) "reopens, as of that moment": `state()` and
/// `metrics().state` read Open from then on and the open wait runs from that
/// moment, but `metrics().last_transition` still says when the episode
/// began, until some later `try_acquire` or probe outcome makes the
/// transition (a *rejected* `try_acquire` then moves `last_transition`
/// forward with no visible state change). Expected: `last_transition` is the
/// moment the episode ran out, as soon as `state()` reads Open.
///
/// Shrunk from `every_operation`: `[Call(Failure, Ms(0)), Advance(Ms(1)),
/// Acquire, Advance(Ms(1))]`.
#[test]
fn regression_an_expired_episode_is_the_last_transition_as_soon_as_it_reads_open() {
    let clock = ManualClock::new();
    let b: Breaker<'_> = CircuitBreaker::new("model", shrunk_cfg(1).build(), &clock);
    // Call(Failure, Ms(0)): trips at 0 ms.
    let got = futures_lite::future::block_on(
        b.call_with(async { Ok::<(), ()>(()) }, |_| Outcome::Failure),
    );
    assert_eq!(got, Ok(()));
    assert_eq!(b.metrics().last_transition.map(|t| t.as_nanos()), at_ms(0));
    // Advance(Ms(1)), Acquire: the episode begins at 1 ms with this probe.
    clock.advance(Duration::from_millis(1));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.metrics().last_transition.map(|t| t.as_nanos()), at_ms(1));
    // Advance(Ms(1)): 2 ms, the probe is out and the limit has run out.
    clock.advance(Duration::from_millis(1));
    let m = b.metrics();
    assert_eq!((b.state(), m.state), (State::Open, State::Open));
    assert_eq!(
        m.last_transition.map(|t| t.as_nanos()),
        at_ms(2),
        "metrics() reads Open, reopened as of 2 ms (the open wait runs from there), but \
         last_transition is still the episode's start"
    );
    drop(probe);
}

/// A probe given back (ignored, or its permit dropped: a caller's timeout
/// cancelling the stuck call) *after* its episode ran out revives the
/// episode: `state()` read Open (the episode reopened as of the moment it
/// ran out, "as if the probe had failed", with a new open wait), and after
/// the give-back it reads HalfOpen again, with no transition, and the next
/// `try_acquire` is admitted as a probe instead of being refused with
/// `Rejection::Open` for the rest of the open wait. So a system whose probes
/// hang is probed again as soon as each caller gives up, not once per open
/// wait. Expected: the give-back changes nothing; Open until 6 ms + 5 ms.
///
/// Shrunk from `every_operation` (with the `last_transition` comparison of
/// the case above left out): `[Acquire, Failure(0), Advance(Open(0)),
/// Call(Ignored, Ms(1))]`; the call's future moves the clock 1 ms before its
/// outcome is classified as ignored.
#[test]
fn regression_a_probe_given_back_after_its_episode_ran_out_does_not_revive_it() {
    let clock = ManualClock::new();
    let b: Breaker<'_> = CircuitBreaker::new("model", shrunk_cfg(5).build(), &clock);
    // Acquire, Failure(0): trips at 0 ms.
    b.try_acquire().unwrap().failure();
    // Advance(Open(0)): 5 ms, the open wait is over.
    clock.advance(Duration::from_millis(5));
    assert_eq!(b.state(), State::HalfOpen);
    // Call(Ignored, Ms(1)): a probe admitted at 5 ms whose call takes 1 ms,
    // so the episode ran out (at 6 ms) before the probe is given back.
    let got = futures_lite::future::block_on(b.call_with(
        async {
            clock.advance(Duration::from_millis(1));
            assert_eq!(b.state(), State::Open, "ran out at 6 ms with the probe out");
            Ok::<(), ()>(())
        },
        |_| Outcome::Ignored,
    ));
    assert_eq!(got, Ok(()));
    assert_eq!(
        b.state(),
        State::Open,
        "the episode reopened as of 6 ms; giving the late probe back must not undo that"
    );
    assert_eq!(
        b.try_acquire().map(|p| p.is_probe()),
        Err(Rejection::Open {
            retry_after: Duration::from_millis(5)
        })
    );
}
