//! The sequential reference of `RateLimiter` and the harness that drives the
//! real limiter next to it, step by step, on a `ManualClock`: used by
//! `tests/rate_model.rs` (whose docs say what is checked).
//!
//! Include it with `#[path = "model/rate.rs"] mod model;` after `mod
//! common;` (for `Task`) and `tests/model/check.rs`. [`run`] plays one case
//! and returns the first [`Mismatch`], named by its step.

#![allow(dead_code)]

use std::fmt;
use std::time::Duration;

use crate::check::Mismatch;
use crate::common::Task;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::rate::{AcquireUntil, NotYet, Quota, RateError, RateLimiter};

// ---------------------------------------------------------------------------
// Operations.
// ---------------------------------------------------------------------------

/// A span of time, in the quota's own units so that every quota sees
/// interesting steps: `quarters` quarters of an emission interval plus
/// `nanos` nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub quarters: u8,
    pub nanos: u8,
}

impl Span {
    fn nanos(self, interval: u64) -> u64 {
        interval * u64::from(self.quarters) / 4 + u64::from(self.nanos)
    }
}

/// One step of a test case. Indices pick among the waits started so far
/// (modulo their number); with none the step does nothing.
#[derive(Clone, Debug)]
pub enum Op {
    /// Move the clock forward.
    Advance(Span),
    /// Move the clock to the schedule's horizon `- span` (if that is later):
    /// the end of time, as far as the limiter can schedule.
    EndOfTime(Span),
    /// `check_n(n)` (`check()` for 1).
    Check(u32),
    /// Start a wait for `n` cells with a deadline `span` from now (`None`:
    /// `until_ready`), and poll it at once unless `lazy`.
    Wait {
        n: u32,
        deadline: Option<Span>,
        lazy: bool,
    },
    /// Poll a wait (a finished one is left alone).
    Poll(usize),
    /// Drop a wait.
    Cancel(usize),
}

// ---------------------------------------------------------------------------
// The reference: GCRA in u128, one step at a time.
// ---------------------------------------------------------------------------

/// `Instant::MAX`: the deadline of a wait without one, and the `ready_at`
/// of a request that never conforms.
const END: u128 = u64::MAX as u128;
/// The last nanosecond a schedule reaches (`watertight::rate::HORIZON`,
/// 2^60 - 1): a request ending past it never conforms.
const HORIZON: u128 = (1 << 60) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefWait {
    /// Made, never polled.
    Unpolled { n: u32, deadline: u128 },
    /// Its cells reserved: the TAT it wrote, and when they conform.
    Reserved { n: u32, end: u128, at: u128 },
    /// Finished, or dropped.
    Gone,
}

/// What the limiter's counters must read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub admitted: usize,
    pub admitted_cells: usize,
    pub refused: usize,
    pub waited: usize,
    pub cancelled: usize,
    pub waiting: usize,
}

/// The documented semantics, written for clarity: every quantity is a
/// `u128`, so nothing can overflow, and the end of time is an explicit
/// rule (`END`).
pub struct Reference {
    /// `T`: `period / cells`, rounded up.
    interval: u128,
    /// `burst × T`.
    tolerance: u128,
    burst: u32,
    tat: u128,
    waits: Vec<RefWait>,
    pub counters: Counters,
    /// Every admission: its instant (a wait's is the instant its cells
    /// conform) and its cells. Cancelled waits are not admissions.
    pub admissions: Vec<(u128, u32)>,
}

impl Reference {
    pub fn new(cells: u32, period: u64, burst: u32) -> Self {
        let period = u128::from(period);
        let cells128 = u128::from(cells);
        let interval = period.div_ceil(cells128);
        Reference {
            interval,
            tolerance: interval * u128::from(burst),
            burst,
            tat: 0,
            waits: Vec::new(),
            counters: Counters::default(),
            admissions: Vec::new(),
        }
    }

    pub fn interval(&self) -> u128 {
        self.interval
    }

    fn admit(&mut self, now: u128, n: u32) {
        self.counters.admitted += 1;
        self.counters.admitted_cells += n as usize;
        self.admissions.push((now, n));
    }

    fn limited(&mut self, now: u128, at: u128) -> RateError {
        self.counters.refused += 1;
        RateError::Limited(NotYet::new(
            Instant::from_nanos(now as u64),
            Instant::from_nanos(at as u64),
        ))
    }

    /// Where `n` cells at `now` would go: the new TAT and from when they
    /// conform; `None` past the end of time.
    fn place(&self, now: u128, n: u32) -> Option<(u128, u128)> {
        let start = self.tat.max(now);
        let end = start + u128::from(n) * self.interval;
        if end > HORIZON {
            return None;
        }
        Some((end, end.saturating_sub(self.tolerance)))
    }

    pub fn check(&mut self, now: u128, n: u32) -> Result<(), RateError> {
        if n > self.burst {
            return Err(RateError::ExceedsBurst {
                requested: n,
                burst: self.burst,
            });
        }
        if n == 0 {
            return Ok(());
        }
        match self.place(now, n) {
            Some((end, at)) if at <= now => {
                self.tat = end;
                self.admit(now, n);
                Ok(())
            }
            Some((_, at)) => Err(self.limited(now, at)),
            None => Err(self.limited(now, END)),
        }
    }

    pub fn start_wait(&mut self, n: u32, deadline: u128) -> usize {
        self.waits.push(RefWait::Unpolled { n, deadline });
        self.waits.len() - 1
    }

    /// Polls wait `i`: `None` while pending, `Some(result)` when done.
    pub fn poll(&mut self, now: u128, i: usize) -> Option<Result<(), RateError>> {
        match self.waits[i] {
            RefWait::Unpolled { n, deadline } => {
                if n > self.burst || n == 0 {
                    self.waits[i] = RefWait::Gone;
                    return Some(self.check(now, n));
                }
                let out = match self.place(now, n) {
                    Some((end, at)) if at <= now => {
                        self.tat = end;
                        self.admit(now, n);
                        Some(Ok(()))
                    }
                    Some((end, at)) if at <= deadline => {
                        self.tat = end;
                        self.counters.waiting += 1;
                        self.waits[i] = RefWait::Reserved { n, end, at };
                        return self.poll(now, i);
                    }
                    Some((_, at)) => Some(Err(self.limited(now, at))),
                    None => Some(Err(self.limited(now, END))),
                };
                self.waits[i] = RefWait::Gone;
                out
            }
            RefWait::Reserved { n, at, .. } => {
                if now < at {
                    return None;
                }
                self.serve(i, n, at);
                Some(Ok(()))
            }
            RefWait::Gone => unreachable!("the harness polls only live waits"),
        }
    }

    fn serve(&mut self, i: usize, n: u32, at: u128) {
        self.waits[i] = RefWait::Gone;
        self.counters.waiting -= 1;
        self.counters.waited += 1;
        self.admit(at, n);
    }

    /// Drops wait `i`: before its instant it gives its cells back if nothing
    /// was scheduled after it (the TAT is still what it wrote); at or after
    /// it, its cells are spent.
    pub fn cancel(&mut self, now: u128, i: usize) {
        if let RefWait::Reserved { n, end, at } = self.waits[i] {
            if now < at {
                if self.tat == end {
                    self.tat = end - u128::from(n) * self.interval;
                }
                self.waits[i] = RefWait::Gone;
                self.counters.waiting -= 1;
                self.counters.cancelled += 1;
            } else {
                self.serve(i, n, at);
            }
        }
        self.waits[i] = RefWait::Gone;
    }
}

/// The window bound, over the admissions' instants: in any window
/// `[x, x + w]` the cells admitted are at most `burst + ⌊w / T⌋`, and so at
/// most `burst + ⌊w × cells / period⌋` (`T ≥ period / cells`). Checked for
/// every window from one admission to another, which covers every window
/// (shrinking a window to its first and last admission keeps its cells and
/// only tightens its bound).
pub fn check_windows(
    admissions: &[(u128, u32)],
    interval: u128,
    cells: u32,
    period: u64,
    burst: u32,
) -> Result<(), Mismatch> {
    let mut sorted = admissions.to_vec();
    sorted.sort_unstable();
    for i in 0..sorted.len() {
        let mut taken = 0u128;
        for j in i..sorted.len() {
            taken += u128::from(sorted[j].1);
            let w = sorted[j].0 - sorted[i].0;
            let bound = u128::from(burst) + w / interval;
            ensure!(
                taken <= bound,
                "{taken} cells admitted in [{}, {}] (w = {w} ns), above burst {burst} + w / T ({interval} ns) = {bound}; admissions {sorted:?}",
                sorted[i].0,
                sorted[j].0
            );
            let by_rate = u128::from(burst) + w * u128::from(cells) / u128::from(period);
            ensure!(
                taken <= by_rate,
                "{taken} cells admitted in [{}, {}], above burst + w × rate = {by_rate}",
                sorted[i].0,
                sorted[j].0
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------

/// A case's quota: `cells` per `period` nanoseconds, `burst` at once.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub cells: u32,
    pub period: u64,
    pub burst: u32,
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} per {} ns, burst {}",
            self.cells, self.period, self.burst
        )
    }
}

fn counters<C>(r: &RateLimiter<C>) -> Counters {
    let m = r.metrics();
    Counters {
        admitted: m.admitted,
        admitted_cells: m.admitted_cells,
        refused: m.refused,
        waited: m.waited,
        cancelled: m.cancelled,
        waiting: m.waiting,
    }
}

type Wait<'a> = Task<AcquireUntil<'a, &'a ManualClock>>;

/// Plays `ops` on a real limiter and on the reference; every decision, every
/// hint, and the counters after every step must be equal, and the
/// admissions must keep the window bound.
pub fn run(spec: Spec, ops: &[Op]) -> Result<(), Mismatch> {
    let quota = Quota::new(spec.cells, Duration::from_nanos(spec.period)).burst(spec.burst);
    let clock = ManualClock::new();
    let limiter = RateLimiter::new("model", quota, &clock);
    let mut reference = Reference::new(spec.cells, spec.period, spec.burst);
    ensure_eq!(
        quota.emission_interval().as_nanos(),
        reference.interval(),
        "{spec}: emission interval"
    );
    let interval = reference.interval() as u64;
    // The real waits, parallel to the reference's; `None` once finished or
    // dropped.
    let mut waits: Vec<Option<Wait<'_>>> = Vec::new();

    for (step, op) in ops.iter().enumerate() {
        let at = |m: Mismatch| m.at(format_args!("{spec}: step {step} ({op:?})"));
        let now = || u128::from(clock.now().as_nanos());
        match *op {
            Op::Advance(span) => clock.advance(Duration::from_nanos(span.nanos(interval))),
            Op::EndOfTime(span) => clock.set(Instant::from_nanos(
                watertight::rate::HORIZON
                    .as_nanos()
                    .saturating_sub(span.nanos(interval)),
            )),
            Op::Check(n) => {
                let real = if n == 1 {
                    limiter.check()
                } else {
                    limiter.check_n(n)
                };
                let expected = reference.check(now(), n);
                (|| {
                    ensure_eq!(real, expected, "decision");
                    Ok(())
                })()
                .map_err(at)?;
            }
            Op::Wait { n, deadline, lazy } => {
                let (fut, deadline) = match deadline {
                    Some(span) => {
                        let d = clock.now() + Duration::from_nanos(span.nanos(interval));
                        (limiter.acquire_n_until(n, d), u128::from(d.as_nanos()))
                    }
                    None if n == 1 => (limiter.until_ready(), END),
                    None => (limiter.acquire_n_until(n, Instant::MAX), END),
                };
                let i = reference.start_wait(n, deadline);
                waits.push(Some(Task::new(fut)));
                if !lazy {
                    poll_one(&mut waits, &mut reference, i, now()).map_err(at)?;
                }
            }
            Op::Poll(i) if !waits.is_empty() => {
                let i = i % waits.len();
                if waits[i].is_some() {
                    poll_one(&mut waits, &mut reference, i, now()).map_err(at)?;
                }
            }
            Op::Cancel(i) if !waits.is_empty() => {
                let i = i % waits.len();
                if let Some(task) = waits[i].take() {
                    drop(task);
                    reference.cancel(now(), i);
                }
            }
            Op::Poll(_) | Op::Cancel(_) => {}
        }
        (|| {
            ensure_eq!(counters(&limiter), reference.counters, "counters");
            Ok(())
        })()
        .map_err(at)?;
    }

    // Teardown: every wait still alive is dropped, in order, now.
    for (i, wait) in waits.iter_mut().enumerate() {
        if let Some(task) = wait.take() {
            drop(task);
            reference.cancel(u128::from(clock.now().as_nanos()), i);
        }
    }
    ensure_eq!(
        counters(&limiter),
        reference.counters,
        "{spec}: teardown counters"
    );
    check_windows(
        &reference.admissions,
        reference.interval(),
        spec.cells,
        spec.period,
        spec.burst,
    )
    .map_err(|m| m.at(spec))
}

fn poll_one(
    waits: &mut [Option<Wait<'_>>],
    reference: &mut Reference,
    i: usize,
    now: u128,
) -> Result<(), Mismatch> {
    let task = waits[i].as_mut().expect("polled only while alive");
    let real = match task.poll() {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    };
    let expected = reference.poll(now, i);
    ensure_eq!(real, expected, "wait {i}: poll");
    if real.is_some() {
        waits[i] = None;
    }
    Ok(())
}
