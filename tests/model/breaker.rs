//! The sequential reference of `CircuitBreaker` and the harness that
//! drives the real breaker next to it, step by step, on a `ManualClock`:
//! shared by the model test (`tests/breaker_model.rs`, whose docs say what
//! the reference encodes) and the breaker fuzz target (`fuzz/`).
//!
//! Include it with `#[path = "model/breaker.rs"] mod model;` after
//! `tests/model/check.rs`. [`run`] plays one case and returns the first
//! [`Mismatch`], named by its step, with the model's state.

// The fuzz target builds its operations itself and uses less of this.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::check::Mismatch;
use watertight::breaker::{State, WindowStorage};
use watertight::clock::{Clock, ManualClock};
use watertight::{
    BreakerConfig, BreakerConfigError, CallError, CallPermit, CircuitBreaker, Outcome, Rejection,
};

/// A millisecond in nanoseconds, the unit of the model's clock.
pub const MS: u64 = 1_000_000;

// ---------------------------------------------------------------------------
// Config and operations.
// ---------------------------------------------------------------------------

/// A case's breaker config, in the units the model works in.
#[derive(Debug, Clone, Copy)]
pub struct Cfg {
    pub window_size: usize,
    pub minimum_calls: usize,
    /// Percent.
    pub failure_pct: u64,
    /// Milliseconds; `None`: slow-call detection off.
    pub slow_ms: Option<u64>,
    /// Percent.
    pub slow_pct: u64,
    pub open_ms: u64,
    pub half_open_calls: usize,
    /// Milliseconds; `None`: no limit.
    pub max_wait_ms: Option<u64>,
    /// Which window judges the closed state.
    pub window: Win,
}

/// The window of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Win {
    /// The last `window_size` outcomes.
    Count,
    /// `failures` in a row trip; a success ends the run (and a slow success
    /// too unless `slow_is_failure`).
    Consecutive {
        failures: usize,
        slow_is_failure: bool,
    },
    /// The outcomes of the last `bucket_ms * buckets` ms, in buckets of
    /// `bucket_ms`: the current bucket and the `buckets - 1` before it.
    Time { bucket_ms: u64, buckets: usize },
}

impl Cfg {
    /// The config, which the generators only make valid.
    pub fn build(&self) -> BreakerConfig {
        self.try_build().expect("the generated config is valid")
    }

    /// The config, or the builder's refusal (a threshold of 1 % reads as a
    /// fraction, and is refused).
    pub fn try_build(&self) -> Result<BreakerConfig, BreakerConfigError> {
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
        match self.window {
            Win::Count => {}
            Win::Consecutive {
                failures,
                slow_is_failure,
            } => {
                b = b
                    .consecutive_failures(failures)
                    .slow_calls_are_failures(slow_is_failure)
            }
            Win::Time { bucket_ms, buckets } => {
                b = b.time_window(Duration::from_millis(bucket_ms * buckets as u64), buckets)
            }
        }
        b.build()
    }
}

/// How far the clock moves, resolved against the case's config so that the
/// interesting boundaries are hit; every step is whole milliseconds.
#[derive(Debug, Clone, Copy)]
pub enum Step {
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
pub enum Op {
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
    generation: u64,
    probe: bool,
    /// ns, by the breaker's clock.
    acquired_at: u64,
}

/// One window entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    failed: bool,
    slow: bool,
    /// ns: when it was recorded (the time window's bucket).
    at: u64,
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
    generation: u64,
    window: VecDeque<Entry>,
    /// Consecutive failures: the failures in a row so far.
    run: usize,
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
            generation: 0,
            window: VecDeque::new(),
            run: 0,
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
        self.generation += 1;
        self.last_transition = Some(at);
        if matches!(to, Phase::Closed | Phase::HalfOpen { .. }) {
            self.window.clear();
            self.run = 0;
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
            generation: self.generation,
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
        if !p.probe || p.generation != self.generation {
            return;
        }
        match &mut self.phase {
            Phase::HalfOpen { out, .. } => *out -= 1,
            other => panic!("model: a probe of the current generation in {other:?}"),
        }
    }

    fn record(&mut self, p: ModelPermit, failed: bool) {
        self.expire();
        if p.generation != self.generation {
            self.stale += 1;
            return;
        }
        let slow = self
            .cfg
            .slow_ms
            .is_some_and(|ms| self.now - p.acquired_at > ms * MS);
        let now = self.now;
        match self.phase {
            Phase::Closed if self.consecutive().is_some() => {
                let (n, _) = self.consecutive().unwrap();
                if self.run_fails(failed, slow) >= n {
                    self.transition(Phase::Open { opened_at: now }, now);
                }
            }
            Phase::Closed => {
                self.push(Entry {
                    failed,
                    slow,
                    at: now,
                });
                if self.checks(failed || slow) && self.trips() {
                    self.transition(Phase::Open { opened_at: now }, now);
                }
            }
            Phase::HalfOpen {
                out,
                succeeded,
                last_admitted,
            } => {
                assert!(p.probe, "model: a non-probe permit of a half-open episode");
                let fails = if self.consecutive().is_some() {
                    self.run_fails(failed, slow);
                    let (_, slow_is_failure) = self.consecutive().unwrap();
                    failed || (slow && slow_is_failure)
                } else {
                    self.push(Entry {
                        failed,
                        slow,
                        at: now,
                    });
                    failed || slow
                };
                if fails {
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

    /// `(failures, slow_is_failure)` of a consecutive-failures case.
    fn consecutive(&self) -> Option<(usize, bool)> {
        match self.cfg.window {
            Win::Consecutive {
                failures,
                slow_is_failure,
            } => Some((failures, slow_is_failure)),
            _ => None,
        }
    }

    /// Consecutive failures: one outcome lengthens or ends the run (at
    /// most 1023 long); returns the run after it.
    fn run_fails(&mut self, failed: bool, slow: bool) -> usize {
        let (_, slow_is_failure) = self.consecutive().expect("a consecutive case");
        if failed || (slow && slow_is_failure) {
            self.run = (self.run + 1).min(1023);
        } else {
            self.run = 0;
        }
        self.run
    }

    /// Whether the rates are checked after an outcome: always for the count
    /// window; for the time window after a failure or slow call, and after
    /// a plain success while its bucket holds at most `minimum_calls`
    /// calls (the only times a success can trip it: reaching the minimum,
    /// or the first call of a new bucket, when the oldest has left).
    fn checks(&self, failed_or_slow: bool) -> bool {
        match self.cfg.window {
            Win::Time { bucket_ms, .. } if !failed_or_slow => {
                let epoch = |at: u64| at / (bucket_ms * MS);
                let now = epoch(self.now);
                let in_bucket = self.window.iter().filter(|e| epoch(e.at) == now).count();
                in_bucket <= self.cfg.minimum_calls
            }
            _ => true,
        }
    }

    fn push(&mut self, e: Entry) {
        self.window.push_back(e);
        if let Win::Time { bucket_ms, buckets } = self.cfg.window {
            // Keep only what is still in the window.
            let first = (self.now / (bucket_ms * MS)).saturating_sub(buckets as u64 - 1);
            self.window.retain(|e| e.at / (bucket_ms * MS) >= first);
            return;
        }
        if self.window.len() > self.cfg.window_size {
            self.window.pop_front();
        }
    }

    fn counts(&self) -> (usize, usize, usize) {
        if self.consecutive().is_some() {
            return (self.run, self.run, 0);
        }
        let live = |e: &&Entry| match self.cfg.window {
            Win::Time { bucket_ms, buckets } => {
                let first = (self.now / (bucket_ms * MS)).saturating_sub(buckets as u64 - 1);
                e.at / (bucket_ms * MS) >= first
            }
            _ => true,
        };
        let calls = self.window.iter().filter(live).count();
        let failed = self.window.iter().filter(live).filter(|e| e.failed).count();
        let slow = self.window.iter().filter(live).filter(|e| e.slow).count();
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
            self.generation += 1;
            self.window.clear();
            self.run = 0;
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
        if calls == 0 || calls < self.cfg.minimum_calls || self.consecutive().is_some() {
            return (None, None);
        }
        let pct = |n: usize| n as f64 * 100.0 / calls as f64;
        (Some(pct(failed)), Some(pct(slow)))
    }
}

// ---------------------------------------------------------------------------
// The harness: the real breaker, driven step by step next to the model.
// ---------------------------------------------------------------------------

pub type Clk<'a> = &'a ManualClock;
/// The inline breaker the regression tests use.
pub type Breaker<'a> = CircuitBreaker<Clk<'a>, 8>;

pub struct Harness<'a, const N: usize, W: WindowStorage> {
    clock: &'a ManualClock,
    breaker: &'a CircuitBreaker<Clk<'a>, N, (), W>,
    permits: Vec<CallPermit<'a, Clk<'a>, N, (), W>>,
    model: Model,
}

fn fail(msg: impl Into<String>) -> Mismatch {
    Mismatch::new(msg)
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
    /// Takes over a breaker that other code has driven (the soak's, from
    /// many tasks at once), right after its `reset()` with no permit out:
    /// from there on the order is known again, and the breaker must answer
    /// as the model does. The model starts Closed with an empty window at
    /// the clock's time, with the breaker's lifetime counters (rejected,
    /// stale) and last transition, which the concurrent part left
    /// unknowable.
    pub fn resume(
        clock: &'a ManualClock,
        breaker: &'a CircuitBreaker<Clk<'a>, N, (), W>,
        cfg: Cfg,
    ) -> Self {
        let lib = breaker.metrics();
        let mut model = Model::new(cfg);
        model.now = clock.now().as_nanos();
        model.rejected = lib.rejected;
        model.stale = lib.stale;
        model.last_transition = lib.last_transition.map(|t| t.as_nanos());
        Harness {
            clock,
            breaker,
            permits: Vec::new(),
            model,
        }
    }

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

    /// Applies `op` to the breaker and to the model, comparing every answer.
    pub fn apply(&mut self, op: &Op) -> Result<(), Mismatch> {
        match *op {
            Op::Acquire => {
                let want = self.model.acquire();
                let got = self.breaker.try_acquire();
                match (got, want) {
                    (Ok(p), Ok(mp)) => {
                        ensure_eq!(p.is_probe(), mp.probe, "try_acquire: is_probe");
                        self.permits.push(p);
                        self.model.permits.push(mp);
                    }
                    (Err(r), Err(mr)) => ensure_eq!(r, mr, "try_acquire: rejection"),
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
                ensure_eq!(got, want.map_err(CallError::Rejected), "call_with");
            }
            Op::ForceOpen => {
                let want = self.model.switch(Phase::ForcedOpen);
                ensure_eq!(self.breaker.force_open(), want, "force_open()");
            }
            Op::Disable => {
                let want = self.model.switch(Phase::Disabled);
                ensure_eq!(self.breaker.disable(), want, "disable()");
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
    pub fn check(&self) -> Result<(), Mismatch> {
        let m = &self.model;
        ensure_eq!(self.clock.now().as_nanos(), m.now, "clock");
        ensure_eq!(self.breaker.state(), m.state(), "state()");
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
        ensure_eq!(got, m.metrics(), "metrics()");
        let (failure_rate, slow_call_rate) = m.rates();
        ensure!(
            same_rate(lib.failure_rate, failure_rate),
            "metrics().failure_rate: got {:?}, model {:?}",
            lib.failure_rate,
            failure_rate
        );
        ensure!(
            same_rate(lib.slow_call_rate, slow_call_rate),
            "metrics().slow_call_rate: got {:?}, model {:?}",
            lib.slow_call_rate,
            slow_call_rate
        );
        ensure_eq!(
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
pub fn run<const N: usize, W: WindowStorage>(cfg: Cfg, ops: &[Op]) -> Result<(), Mismatch> {
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
