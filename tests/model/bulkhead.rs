//! The sequential reference of `Bulkhead` and the harness that drives the
//! real bulkhead next to it, step by step, on a `ManualClock`: shared by the
//! model test (`tests/bulkhead_model.rs`, whose docs say what the reference
//! encodes) and the bulkhead fuzz target (`fuzz/`).
//!
//! Include it with `#[path = "model/bulkhead.rs"] mod model;` after
//! `mod common;` (for `Probe`) and `tests/model/check.rs`. [`run`] plays
//! one case and returns the first [`Mismatch`], named by its step.

// The fuzz target builds its operations itself and uses less of this.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use crate::check::Mismatch;
use crate::common::Probe;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::{AcquireError, Bulkhead, ConfigError, Permit};

// ---------------------------------------------------------------------------
// Operations.
// ---------------------------------------------------------------------------

/// One step of a test case. Indices pick among what exists at that moment
/// (modulo its length); on an empty list the step does nothing.
#[derive(Clone)]
pub enum Op {
    /// `try_acquire_many(n)`, keeping the permit.
    TryAcquire(usize),
    /// Drop a held permit.
    DropPermit(usize),
    /// `Permit::forget` a held permit.
    ForgetPermit(usize),
    /// `acquire_many(n)`, polled once at once.
    Acquire(usize),
    /// `acquire_many_until(n, now + d)`, polled once at once.
    AcquireUntil(usize, Duration),
    /// Poll a pending waiter, woken or not.
    Poll(usize),
    /// Drop a waiter's future (cancels it if it is still pending).
    Cancel(usize),
    /// `ManualClock::advance(d)`.
    Advance(Duration),
    /// `resize(c)`; `c == 0` must be an error that changes nothing.
    Resize(usize),
    /// `close()`.
    Close,
    /// Run every woken waiter until nothing changes (explicit in lazy mode).
    Settle,
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::TryAcquire(n) => write!(f, "TryAcquire({n})"),
            Op::DropPermit(i) => write!(f, "DropPermit({i})"),
            Op::ForgetPermit(i) => write!(f, "ForgetPermit({i})"),
            Op::Acquire(n) => write!(f, "Acquire({n})"),
            Op::AcquireUntil(n, d) => write!(f, "AcquireUntil({n}, {d:?})"),
            Op::Poll(i) => write!(f, "Poll({i})"),
            Op::Cancel(i) => write!(f, "Cancel({i})"),
            Op::Advance(d) => write!(f, "Advance({d:?})"),
            Op::Resize(c) => write!(f, "Resize({c})"),
            Op::Close => write!(f, "Close"),
            Op::Settle => write!(f, "Settle"),
        }
    }
}

// ---------------------------------------------------------------------------
// The reference model: plain sequential bookkeeping, no atomics, no wakers.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaiterState {
    /// In the queue (the model's `queue` has its place).
    Queued,
    /// Its permits were handed to it; it has not looked yet.
    Granted,
    /// Refused while queued (closed, or too big after a shrink); not seen yet.
    Refused(AcquireError),
    /// Completed, never queued, or dropped.
    Done,
}

#[derive(Debug, Clone)]
struct ModelWaiter {
    n: usize,
    /// Nanoseconds on the manual clock; `None` for `acquire_many`.
    deadline: Option<u64>,
    state: WaiterState,
}

#[derive(Debug, Default)]
struct Model {
    capacity: usize,
    in_flight: usize,
    closed: bool,
    now: u64,
    /// Counts of the held permits, index for index with the harness's.
    held: Vec<usize>,
    /// Index for index with the harness's waiters.
    waiters: Vec<ModelWaiter>,
    /// The wait queue: waiter indices in arrival order.
    queue: VecDeque<usize>,
    accepted: usize,
    rejected_full: usize,
    rejected_timed_out: usize,
    rejected_closed: usize,
    rejected_queue_full: usize,
    cancelled: usize,
    queued: usize,
    peak: usize,
    /// The bound on waiters, if any.
    max_waiters: Option<usize>,
}

impl Model {
    fn new(capacity: usize) -> Self {
        Model {
            capacity,
            ..Model::default()
        }
    }

    /// Free permits, negative while in flight is above a shrunk capacity.
    fn free(&self) -> i64 {
        self.capacity as i64 - self.in_flight as i64
    }

    fn available(&self) -> usize {
        self.free().max(0) as usize
    }

    fn waiting(&self) -> usize {
        self.queue.len()
    }

    fn expired(&self, deadline: Option<u64>) -> bool {
        deadline.is_some_and(|d| self.now >= d)
    }

    /// The refusals that do not depend on free permits, in the documented
    /// order: closed first, then a request above the capacity.
    fn check_request(&self, n: usize) -> Result<(), AcquireError> {
        if self.closed {
            Err(AcquireError::Closed)
        } else if n > self.capacity {
            Err(AcquireError::ExceedsCapacity {
                requested: n,
                capacity: self.capacity,
            })
        } else {
            Ok(())
        }
    }

    /// The lock-free take of a newcomer: free permits and nobody queued (a
    /// newcomer never takes a permit a queued waiter is owed). An empty
    /// request is granted and not counted in `accepted`.
    fn take(&mut self, n: usize) -> Result<usize, AcquireError> {
        self.check_request(n)?;
        if n == 0 {
            return Ok(0);
        }
        if !self.queue.is_empty() || self.free() < n as i64 {
            return Err(AcquireError::Full);
        }
        self.grant(n);
        Ok(n)
    }

    fn grant(&mut self, n: usize) {
        self.in_flight += n;
        self.accepted += 1;
        self.peak = self.peak.max(self.in_flight);
    }

    fn count_rejection(&mut self, e: AcquireError) {
        match e {
            AcquireError::Full => self.rejected_full += 1,
            AcquireError::TimedOut => self.rejected_timed_out += 1,
            AcquireError::Closed => self.rejected_closed += 1,
            AcquireError::QueueFull => self.rejected_queue_full += 1,
            // An error in the request, not a rejection: counted nowhere.
            _ => {}
        }
    }

    fn try_acquire(&mut self, n: usize) -> Result<usize, AcquireError> {
        let r = self.take(n);
        if let Err(e) = r {
            self.count_rejection(e);
        }
        r
    }

    /// Serving the queue, as the docs' Fairness says: from the head, each
    /// waiter is handed its permits as soon as that many are free; one that
    /// wants more keeps its place and the next is looked at, until none is
    /// free. With `all` (after a resize or a forget) every waiter is looked
    /// at, and those above the capacity fail with `ExceedsCapacity`.
    fn serve(&mut self, all: bool) {
        let order: Vec<usize> = self.queue.iter().copied().collect();
        for i in order {
            if self.closed {
                return;
            }
            let n = self.waiters[i].n;
            if all && n > self.capacity {
                self.unqueue(i);
                self.waiters[i].state = WaiterState::Refused(AcquireError::ExceedsCapacity {
                    requested: n,
                    capacity: self.capacity,
                });
                continue;
            }
            if self.free() < n as i64 {
                if !all && self.free() <= 0 {
                    return;
                }
                continue;
            }
            self.grant(n);
            self.unqueue(i);
            self.waiters[i].state = WaiterState::Granted;
        }
    }

    fn unqueue(&mut self, i: usize) {
        let at = self.queue.iter().position(|&j| j == i).expect("queued");
        self.queue.remove(at);
    }

    fn release(&mut self, n: usize) {
        self.in_flight -= n;
        if !self.queue.is_empty() {
            self.serve(false);
        }
    }

    /// The first poll of a new `acquire*`: the lock-free take; else timed out
    /// at once if its deadline has passed; else, under the queue's lock, the
    /// queue served first, then the permits taken if they are free (nobody
    /// queued can use them), or the waiter queued at the back.
    fn start_waiter(
        &mut self,
        n: usize,
        deadline: Option<u64>,
    ) -> Poll<Result<usize, AcquireError>> {
        let i = self.waiters.len();
        self.waiters.push(ModelWaiter {
            n,
            deadline,
            state: WaiterState::Done,
        });
        let r = match self.take(n) {
            Err(AcquireError::Full) if self.expired(deadline) => {
                Poll::Ready(Err(AcquireError::TimedOut))
            }
            // At the bound: refused at once, unless `n` permits are free
            // (every queued waiter wants more); then, as under the lock,
            // the queue is served and the permits taken if still free. It
            // never queues.
            Err(AcquireError::Full)
                if self.max_waiters.is_some_and(|max| self.queue.len() >= max) =>
            {
                if self.free() >= n as i64 {
                    self.serve(false);
                }
                match self.check_request(n) {
                    Err(e) => Poll::Ready(Err(e)),
                    Ok(()) if self.free() >= n as i64 => {
                        self.grant(n);
                        Poll::Ready(Ok(n))
                    }
                    Ok(()) => Poll::Ready(Err(AcquireError::QueueFull)),
                }
            }
            Err(AcquireError::Full) => {
                self.serve(false);
                match self.check_request(n) {
                    Err(e) => Poll::Ready(Err(e)),
                    Ok(()) if self.free() >= n as i64 => {
                        self.grant(n);
                        Poll::Ready(Ok(n))
                    }
                    Ok(()) => {
                        self.queue.push_back(i);
                        self.queued += 1;
                        self.waiters[i].state = WaiterState::Queued;
                        Poll::Pending
                    }
                }
            }
            other => Poll::Ready(other),
        };
        if let Poll::Ready(Err(e)) = r {
            self.count_rejection(e);
        }
        r
    }

    /// A poll of a live waiter: what its node says, or for a queued timed
    /// wait whose deadline has passed, a time-out (it leaves the queue).
    fn poll(&mut self, i: usize) -> Poll<Result<usize, AcquireError>> {
        let w = self.waiters[i].clone();
        let r = match w.state {
            WaiterState::Queued if self.expired(w.deadline) => {
                self.unqueue(i);
                Err(AcquireError::TimedOut)
            }
            WaiterState::Queued => return Poll::Pending,
            WaiterState::Granted => Ok(w.n),
            WaiterState::Refused(e) => Err(e),
            WaiterState::Done => unreachable!("only live waiters are polled"),
        };
        self.waiters[i].state = WaiterState::Done;
        if let Err(e) = r {
            self.count_rejection(e);
        }
        Poll::Ready(r)
    }

    /// A waiter's future dropped: a queued one is cancelled; one that was
    /// handed permits it never saw gives them back (it counts as accepted);
    /// one that was refused counts as that refusal.
    fn cancel(&mut self, i: usize) {
        let state = std::mem::replace(&mut self.waiters[i].state, WaiterState::Done);
        match state {
            WaiterState::Queued => {
                self.unqueue(i);
                self.cancelled += 1;
            }
            WaiterState::Granted => self.release(self.waiters[i].n),
            WaiterState::Refused(e) => self.count_rejection(e),
            WaiterState::Done => {}
        }
    }

    fn close(&mut self) {
        self.closed = true;
        for i in std::mem::take(&mut self.queue) {
            self.waiters[i].state = WaiterState::Refused(AcquireError::Closed);
        }
    }
}

// ---------------------------------------------------------------------------
// The harness: the real bulkhead, driven step by step next to the model.
// ---------------------------------------------------------------------------

type Clk<'a> = &'a ManualClock;
type AcquireFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Permit<'a, Clk<'a>>, AcquireError>> + 'a>>;

/// One waiter's future and the probe it is always polled with.
struct Slot<'a> {
    /// `None` once the future has completed or been dropped.
    fut: Option<AcquireFuture<'a>>,
    probe: Probe,
    /// The probe's wake count when the future was last polled.
    seen: usize,
}

#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Settle after every operation (otherwise only on `Op::Settle`).
    pub eager: bool,
}

struct Harness<'a> {
    clock: &'a ManualClock,
    bh: &'a Bulkhead<Clk<'a>>,
    held: Vec<Permit<'a, Clk<'a>>>,
    waiters: Vec<Slot<'a>>,
    model: Model,
}

fn fail(msg: impl Into<String>) -> Mismatch {
    Mismatch::new(msg)
}

/// A result of the library as comparable data: the permit's count or the error.
fn view<C>(r: &Result<Permit<'_, C>, AcquireError>) -> Result<usize, AcquireError> {
    r.as_ref().map(Permit::count).map_err(|e| *e)
}

fn view_poll<C>(
    p: &Poll<Result<Permit<'_, C>, AcquireError>>,
) -> Poll<Result<usize, AcquireError>> {
    match p {
        Poll::Ready(r) => Poll::Ready(view(r)),
        Poll::Pending => Poll::Pending,
    }
}

impl<'a> Harness<'a> {
    fn new(clock: &'a ManualClock, bh: &'a Bulkhead<Clk<'a>>) -> Self {
        let mut model = Model::new(bh.capacity());
        model.max_waiters = bh.max_waiters();
        Harness {
            clock,
            bh,
            held: Vec::new(),
            waiters: Vec::new(),
            model,
        }
    }

    /// Waiters whose futures are alive and not completed.
    fn live(&self) -> Vec<usize> {
        (0..self.waiters.len())
            .filter(|&i| self.waiters[i].fut.is_some())
            .collect()
    }

    fn apply(&mut self, op: &Op) -> Result<(), Mismatch> {
        match *op {
            Op::TryAcquire(n) => {
                let expected = self.model.try_acquire(n);
                let got = self.bh.try_acquire_many(n);
                ensure_eq!(view(&got), expected, "try_acquire_many({})", n);
                if let Ok(p) = got {
                    self.held.push(p);
                    self.model.held.push(n);
                }
            }
            Op::DropPermit(i) => {
                if !self.held.is_empty() {
                    let i = i % self.held.len();
                    drop(self.held.remove(i));
                    let n = self.model.held.remove(i);
                    self.model.release(n);
                }
            }
            Op::ForgetPermit(i) => {
                if !self.held.is_empty() {
                    let i = i % self.held.len();
                    self.held.remove(i).forget();
                    let n = self.model.held.remove(i);
                    let m = &mut self.model;
                    m.in_flight -= n;
                    // Removed from the capacity, which stops at zero (it can
                    // be below `n` after a shrink).
                    m.capacity = m.capacity.saturating_sub(n);
                    if n > 0 && !m.queue.is_empty() {
                        m.serve(true);
                    }
                }
            }
            Op::Acquire(n) => self.start_waiter(n, None)?,
            Op::AcquireUntil(n, d) => self.start_waiter(n, Some(d))?,
            Op::Poll(i) => {
                let live = self.live();
                if !live.is_empty() {
                    self.poll_waiter(live[i % live.len()])?;
                }
            }
            Op::Cancel(i) => {
                let live = self.live();
                if !live.is_empty() {
                    let i = live[i % live.len()];
                    drop(self.waiters[i].fut.take());
                    self.model.cancel(i);
                }
            }
            Op::Advance(d) => {
                self.clock.advance(d);
                self.model.now += u64::try_from(d.as_nanos()).unwrap();
            }
            Op::Resize(c) => {
                let got = self.bh.resize(c);
                if c == 0 {
                    ensure_eq!(got, Err(ConfigError::ZeroCapacity));
                } else {
                    ensure_eq!(
                        got,
                        Ok(self.model.capacity),
                        "resize({}) returns the old capacity",
                        c
                    );
                    self.model.capacity = c;
                    if !self.model.queue.is_empty() {
                        self.model.serve(true);
                    }
                }
            }
            Op::Close => {
                let got = self.bh.close();
                ensure_eq!(got, !self.model.closed, "close() says whether it closed");
                self.model.close();
            }
            Op::Settle => self.settle()?,
        }
        Ok(())
    }

    fn start_waiter(&mut self, n: usize, timeout: Option<Duration>) -> Result<(), Mismatch> {
        let deadline = timeout.map(|d| self.clock.now() + d);
        let mut fut: AcquireFuture<'a> = match deadline {
            None => Box::pin(self.bh.acquire_many(n)),
            Some(deadline) => Box::pin(self.bh.acquire_many_until(n, deadline)),
        };
        let expected = self.model.start_waiter(n, deadline.map(Instant::as_nanos));
        let probe = Probe::new();
        let got = probe.poll(fut.as_mut());
        ensure_eq!(
            view_poll(&got),
            expected,
            "first poll of acquire_many({}) deadline {:?}",
            n,
            deadline
        );
        let alive = got.is_pending();
        if let Poll::Ready(Ok(p)) = got {
            self.held.push(p);
            self.model.held.push(n);
        }
        self.waiters.push(Slot {
            fut: alive.then_some(fut),
            seen: probe.wakes(),
            probe,
        });
        Ok(())
    }

    /// Polls live waiter `i` once and checks the outcome against the model,
    /// and that it was woken exactly when it had a reason to be.
    fn poll_waiter(&mut self, i: usize) -> Result<(), Mismatch> {
        let slot = &mut self.waiters[i];
        let wakes = slot.probe.wakes();
        let woken = wakes > slot.seen;
        let w = self.model.waiters[i].clone();
        let ctx = format!(
            "waiter #{i} (n {}, deadline {:?}, model state {:?}, woken {woken})",
            w.n, w.deadline, w.state
        );
        match w.state {
            // A hand-off and a refusal always wake the waiter.
            WaiterState::Granted | WaiterState::Refused(_) => {
                ensure!(woken, "{} was not woken", ctx);
            }
            // The queue never wakes a waiter for nothing (a timed waiter's
            // sleep on the manual clock wakes on every `advance`).
            WaiterState::Queued if w.deadline.is_none() => {
                ensure!(!woken, "{} was woken for nothing", ctx);
            }
            _ => {}
        }
        let fut = slot.fut.as_mut().expect("a live waiter's future");
        let got = slot.probe.poll(fut.as_mut());
        slot.seen = slot.probe.wakes();
        let expected = self.model.poll(i);
        ensure_eq!(view_poll(&got), expected, "poll of {}", ctx);
        if got.is_ready() {
            slot.fut = None;
        }
        if let Poll::Ready(Ok(p)) = got {
            self.held.push(p);
            self.model.held.push(w.n);
        }
        Ok(())
    }

    /// Runs every woken waiter, again and again, until none is woken: what an
    /// executor does with the tasks a step woke.
    fn settle(&mut self) -> Result<(), Mismatch> {
        loop {
            let woken: Vec<usize> = self
                .live()
                .into_iter()
                .filter(|&i| self.waiters[i].probe.wakes() > self.waiters[i].seen)
                .collect();
            if woken.is_empty() {
                break;
            }
            for i in woken {
                self.poll_waiter(i)?;
            }
        }
        self.check_settled()
    }

    /// What must hold once every woken waiter has run: nobody queued next to
    /// permits it could use, above the capacity, past its deadline or after
    /// close; and every waiter handed permits or refused has run.
    fn check_settled(&self) -> Result<(), Mismatch> {
        let m = &self.model;
        for i in self.live() {
            let w = &m.waiters[i];
            let ctx = format!(
                "after settling, waiter #{i} (n {}, deadline {:?}, state {:?})",
                w.n, w.deadline, w.state
            );
            ensure_eq!(w.state, WaiterState::Queued, "{} has not run", ctx);
            ensure!(!m.closed, "{} is queued on a closed bulkhead", ctx);
            ensure!(!m.expired(w.deadline), "{} is past its deadline", ctx);
            ensure!(
                w.n as i64 > m.free() && w.n <= m.capacity,
                "{} sits next to {} free permits (capacity {}): a stranded waiter",
                ctx,
                m.free(),
                m.capacity
            );
        }
        Ok(())
    }

    /// The library's observable state against the model's.
    fn check_state(&self) -> Result<(), Mismatch> {
        let (m, bh) = (&self.model, self.bh);
        let owed: usize = m
            .waiters
            .iter()
            .filter(|w| w.state == WaiterState::Granted)
            .map(|w| w.n)
            .sum();
        ensure_eq!(
            m.in_flight,
            m.held.iter().sum::<usize>() + owed,
            "model: in flight is the held permits and those handed to waiters"
        );
        ensure_eq!(
            self.held.iter().map(Permit::count).collect::<Vec<_>>(),
            m.held.clone(),
            "held permits"
        );
        ensure_eq!(self.clock.now().as_nanos(), m.now, "clock");
        let lib = bh.metrics();
        ensure_eq!(
            (
                bh.capacity(),
                bh.in_flight(),
                bh.available(),
                bh.waiting(),
                bh.is_closed()
            ),
            (
                m.capacity,
                m.in_flight,
                m.available(),
                m.waiting(),
                m.closed
            ),
            "(capacity, in_flight, available, waiting, closed)"
        );
        ensure_eq!(
            (
                lib.capacity,
                lib.in_flight,
                lib.available,
                lib.waiting,
                lib.name
            ),
            (m.capacity, m.in_flight, m.available(), m.waiting(), "model"),
            "metrics (capacity, in_flight, available, waiting, name)"
        );
        ensure_eq!(
            (
                lib.accepted,
                lib.rejected_full,
                lib.rejected_timed_out,
                lib.rejected_closed,
                lib.rejected_queue_full,
                lib.cancelled_waits,
                lib.queued,
                lib.peak_in_flight
            ),
            (
                m.accepted,
                m.rejected_full,
                m.rejected_timed_out,
                m.rejected_closed,
                m.rejected_queue_full,
                m.cancelled,
                m.queued,
                m.peak
            ),
            "metrics (accepted, full, timed out, closed, queue full, cancelled, queued, peak)"
        );
        ensure_eq!(
            lib.rejected(),
            m.rejected_full + m.rejected_timed_out + m.rejected_closed + m.rejected_queue_full
        );
        if let Some(max) = m.max_waiters {
            ensure!(
                m.waiting() <= max,
                "model: {} waiting above the bound {}",
                m.waiting(),
                max
            );
        }
        Ok(())
    }

    /// Drops every waiter (cancelling the queued ones, giving back what was
    /// handed to the others), then every permit: everything must come back.
    fn teardown(&mut self) -> Result<(), Mismatch> {
        for i in 0..self.waiters.len() {
            if let Some(fut) = self.waiters[i].fut.take() {
                drop(fut);
                self.model.cancel(i);
                self.check_state()?;
            }
        }
        ensure_eq!(self.model.waiting(), 0);
        while let Some(p) = self.held.pop() {
            drop(p);
            let n = self.model.held.pop().unwrap();
            self.model.release(n);
        }
        self.check_state()?;
        ensure_eq!(self.bh.available(), self.model.capacity);
        ensure_eq!(self.bh.in_flight(), 0);
        Ok(())
    }
}

/// Plays `ops` on a fresh bulkhead of `capacity` next to the model, then
/// settles and tears down; the first disagreement, with its step.
pub fn run(capacity: usize, ops: &[Op], rules: Rules) -> Result<(), Mismatch> {
    run_bounded(capacity, None, ops, rules)
}

/// [`run`] on a bulkhead with a bound on waiters (`None`: none).
pub fn run_bounded(
    capacity: usize,
    max_waiters: Option<usize>,
    ops: &[Op],
    rules: Rules,
) -> Result<(), Mismatch> {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", capacity, &clock);
    let bh = match max_waiters {
        Some(max) => bh.with_max_waiters(max),
        None => bh,
    };
    let mut h = Harness::new(&clock, &bh);
    h.check_state()?;
    for (step, op) in ops.iter().enumerate() {
        let at = |e: Mismatch| fail(format!("step {step} {op:?}: {e}"));
        h.apply(op).map_err(at)?;
        h.check_state().map_err(at)?;
        if rules.eager {
            h.settle().map_err(at)?;
            h.check_state().map_err(at)?;
        }
    }
    let at_end = |e: Mismatch| fail(format!("at the end: {e}"));
    h.settle().map_err(at_end)?;
    h.check_state().map_err(at_end)?;
    h.teardown().map_err(at_end)
}
