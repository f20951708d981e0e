#![cfg(not(loom))]
//! Model-based test of `Bulkhead`: random sequences of operations run
//! single-threaded against the real `Bulkhead<&ManualClock>` and against a
//! plain sequential reference model written below, and after every step the
//! observable state must match.
//!
//! The model encodes the documented semantics (the `Bulkhead` doc sections
//! "Fairness", "Capacity changes and closing" and "Counters", and the method
//! docs) as an exact FIFO wait queue: a release hands its permits to the
//! queued waiters in arrival order (a waiter that wants more than is free
//! keeps its place and the next is looked at), a newcomer never takes a
//! permit while anyone is queued unless, under the queue's lock, no queued
//! waiter can use it, a shrink or `forget` fails the queued waiters above
//! the new capacity, `close` fails them all, a cancelled waiter leaves the
//! queue and gives back permits handed to it. Because a hand-off happens at
//! the release, not when the woken task runs, the model is exact: every
//! poll's outcome, every counter of `metrics()` (`queued` included),
//! `in_flight`, `available` and `waiting` must match it after every step.
//! On top:
//!
//! 1. a waiter handed permits, or refused, has been woken by then; an
//!    untimed queued waiter is never woken for nothing;
//! 2. liveness: once every woken waiter has run (`settle`), nobody is queued
//!    next to permits it could use, above the capacity, past its deadline or
//!    after close;
//! 3. teardown: dropping every waiter and permit brings every permit back.
//!
//! Three drivers: `eager_*` settle after every operation (as an executor that
//! runs every woken task at once); `lazy_mixed` settles only on an explicit
//! `Settle` operation, so releases, newcomers, cancellations and polls happen
//! while woken waiters have not run yet.
//!
//! What the model leaves to the library, as the docs do not say: an empty
//! permit (`n == 0`) is not counted in `accepted`, and `forget` after a
//! shrink takes the capacity down to zero at most.
//!
//! The `regression_*` tests at the end are failures the model found in the
//! earlier wake-up queue, cut down by hand to the steps that matter, and
//! kept as scenarios of the hand-off queue.

mod common;

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::Probe;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::{AcquireError, Bulkhead, ConfigError, Permit};

// ---------------------------------------------------------------------------
// Operations.
// ---------------------------------------------------------------------------

/// One step of a test case. Indices pick among what exists at that moment
/// (modulo its length); on an empty list the step does nothing.
#[derive(Clone)]
enum Op {
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

fn durations() -> impl Strategy<Value = Duration> {
    prop::sample::select(vec![
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_millis(1),
        Duration::from_millis(10),
        Duration::from_millis(100),
    ])
}

/// Waiter sizes for mixed cases: mostly one permit, some zero, some several.
fn mixed_n() -> BoxedStrategy<usize> {
    prop_oneof![1 => Just(0usize), 5 => Just(1usize), 3 => 2..=4usize].boxed()
}

fn single_n() -> BoxedStrategy<usize> {
    Just(1usize).boxed()
}

fn op(waiter_n: BoxedStrategy<usize>) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=4usize).prop_map(Op::TryAcquire),
        6 => (0..8usize).prop_map(Op::DropPermit),
        1 => (0..8usize).prop_map(Op::ForgetPermit),
        4 => waiter_n.clone().prop_map(Op::Acquire),
        4 => (waiter_n, durations()).prop_map(|(n, d)| Op::AcquireUntil(n, d)),
        3 => (0..8usize).prop_map(Op::Poll),
        3 => (0..8usize).prop_map(Op::Cancel),
        4 => durations().prop_map(Op::Advance),
        3 => (0..=5usize).prop_map(Op::Resize),
        1 => Just(Op::Close),
        3 => Just(Op::Settle),
    ]
}

fn ops(waiter_n: BoxedStrategy<usize>) -> impl Strategy<Value = Vec<Op>> {
    vec(op(waiter_n), 0..=60)
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
    cancelled: usize,
    queued: usize,
    peak: usize,
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
struct Rules {
    /// Settle after every operation (otherwise only on `Op::Settle`).
    eager: bool,
}

struct Harness<'a> {
    clock: &'a ManualClock,
    bh: &'a Bulkhead<Clk<'a>>,
    held: Vec<Permit<'a, Clk<'a>>>,
    waiters: Vec<Slot<'a>>,
    model: Model,
}

fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
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
        Harness {
            clock,
            bh,
            held: Vec::new(),
            waiters: Vec::new(),
            model: Model::new(bh.capacity()),
        }
    }

    /// Waiters whose futures are alive and not completed.
    fn live(&self) -> Vec<usize> {
        (0..self.waiters.len())
            .filter(|&i| self.waiters[i].fut.is_some())
            .collect()
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::TryAcquire(n) => {
                let expected = self.model.try_acquire(n);
                let got = self.bh.try_acquire_many(n);
                prop_assert_eq!(view(&got), expected, "try_acquire_many({})", n);
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
                    prop_assert_eq!(got, Err(ConfigError::ZeroCapacity));
                } else {
                    prop_assert_eq!(
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
                prop_assert_eq!(got, !self.model.closed, "close() says whether it closed");
                self.model.close();
            }
            Op::Settle => self.settle()?,
        }
        Ok(())
    }

    fn start_waiter(&mut self, n: usize, timeout: Option<Duration>) -> Result<(), TestCaseError> {
        let deadline = timeout.map(|d| self.clock.now() + d);
        let mut fut: AcquireFuture<'a> = match deadline {
            None => Box::pin(self.bh.acquire_many(n)),
            Some(deadline) => Box::pin(self.bh.acquire_many_until(n, deadline)),
        };
        let expected = self.model.start_waiter(n, deadline.map(Instant::as_nanos));
        let probe = Probe::new();
        let got = probe.poll(fut.as_mut());
        prop_assert_eq!(
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
    fn poll_waiter(&mut self, i: usize) -> Result<(), TestCaseError> {
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
                prop_assert!(woken, "{} was not woken", ctx);
            }
            // The queue never wakes a waiter for nothing (a timed waiter's
            // sleep on the manual clock wakes on every `advance`).
            WaiterState::Queued if w.deadline.is_none() => {
                prop_assert!(!woken, "{} was woken for nothing", ctx);
            }
            _ => {}
        }
        let fut = slot.fut.as_mut().expect("a live waiter's future");
        let got = slot.probe.poll(fut.as_mut());
        slot.seen = slot.probe.wakes();
        let expected = self.model.poll(i);
        prop_assert_eq!(view_poll(&got), expected, "poll of {}", ctx);
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
    fn settle(&mut self) -> Result<(), TestCaseError> {
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
    fn check_settled(&self) -> Result<(), TestCaseError> {
        let m = &self.model;
        for i in self.live() {
            let w = &m.waiters[i];
            let ctx = format!(
                "after settling, waiter #{i} (n {}, deadline {:?}, state {:?})",
                w.n, w.deadline, w.state
            );
            prop_assert_eq!(w.state, WaiterState::Queued, "{} has not run", ctx);
            prop_assert!(!m.closed, "{} is queued on a closed bulkhead", ctx);
            prop_assert!(!m.expired(w.deadline), "{} is past its deadline", ctx);
            prop_assert!(
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
    fn check_state(&self) -> Result<(), TestCaseError> {
        let (m, bh) = (&self.model, self.bh);
        let owed: usize = m
            .waiters
            .iter()
            .filter(|w| w.state == WaiterState::Granted)
            .map(|w| w.n)
            .sum();
        prop_assert_eq!(
            m.in_flight,
            m.held.iter().sum::<usize>() + owed,
            "model: in flight is the held permits and those handed to waiters"
        );
        prop_assert_eq!(
            self.held.iter().map(Permit::count).collect::<Vec<_>>(),
            m.held.clone(),
            "held permits"
        );
        prop_assert_eq!(self.clock.now().as_nanos(), m.now, "clock");
        let lib = bh.metrics();
        prop_assert_eq!(
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
        prop_assert_eq!(
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
        prop_assert_eq!(
            (
                lib.accepted,
                lib.rejected_full,
                lib.rejected_timed_out,
                lib.rejected_closed,
                lib.cancelled_waits,
                lib.queued,
                lib.peak_in_flight
            ),
            (
                m.accepted,
                m.rejected_full,
                m.rejected_timed_out,
                m.rejected_closed,
                m.cancelled,
                m.queued,
                m.peak
            ),
            "metrics (accepted, full, timed out, closed, cancelled, queued, peak)"
        );
        prop_assert_eq!(
            lib.rejected(),
            m.rejected_full + m.rejected_timed_out + m.rejected_closed
        );
        Ok(())
    }

    /// Drops every waiter (cancelling the queued ones, giving back what was
    /// handed to the others), then every permit: everything must come back.
    fn teardown(&mut self) -> Result<(), TestCaseError> {
        for i in 0..self.waiters.len() {
            if let Some(fut) = self.waiters[i].fut.take() {
                drop(fut);
                self.model.cancel(i);
                self.check_state()?;
            }
        }
        prop_assert_eq!(self.model.waiting(), 0);
        while let Some(p) = self.held.pop() {
            drop(p);
            let n = self.model.held.pop().unwrap();
            self.model.release(n);
        }
        self.check_state()?;
        prop_assert_eq!(self.bh.available(), self.model.capacity);
        prop_assert_eq!(self.bh.in_flight(), 0);
        Ok(())
    }
}

fn run(capacity: usize, ops: &[Op], rules: Rules) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", capacity, &clock);
    let mut h = Harness::new(&clock, &bh);
    h.check_state()?;
    for (step, op) in ops.iter().enumerate() {
        let at = |e: TestCaseError| fail(format!("step {step} {op:?}: {e}"));
        h.apply(op).map_err(at)?;
        h.check_state().map_err(at)?;
        if rules.eager {
            h.settle().map_err(at)?;
            h.check_state().map_err(at)?;
        }
    }
    let at_end = |e: TestCaseError| fail(format!("at the end: {e}"));
    h.settle().map_err(at_end)?;
    h.check_state().map_err(at_end)?;
    h.teardown().map_err(at_end)
}

/// 2,000 cases per property by default, 20 under Miri; `PROPTEST_CASES`
/// overrides both (`with_cases` alone would ignore it).
fn config() -> ProptestConfig {
    let mut config = if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(if cfg!(miri) { 20 } else { 2000 })
    };
    if cfg!(miri) {
        // No file system under Miri's isolation.
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    /// Every operation, waiters of 0 to 4 permits, woken waiters run at once.
    #[test]
    fn eager_mixed(capacity in 1..=4usize, ops in ops(mixed_n())) {
        run(capacity, &ops, Rules { eager: true })?;
    }

    /// Single-permit waiters only, run as soon as woken: served in arrival order.
    #[test]
    fn eager_single_permit_fifo(capacity in 1..=4usize, ops in ops(single_n())) {
        run(capacity, &ops, Rules { eager: true })?;
    }

    /// Woken waiters run only on `Settle` (or when polled by index), so every
    /// operation also happens while wake-ups are in flight.
    #[test]
    fn lazy_mixed(capacity in 1..=4usize, ops in ops(mixed_n())) {
        run(capacity, &ops, Rules { eager: false })?;
    }
}

// ---------------------------------------------------------------------------
// Failures the model found, shrunk by hand to the few steps that matter.
// Each one fails against the library as it is.
// ---------------------------------------------------------------------------

/// A release of two permits when one waiter waits: the waiter is handed one,
/// the other stays free and the queue is empty, so a newcomer takes it at
/// once instead of queueing next to it (with the old wake-up queue, it
/// queued behind the woken waiter and was stranded next to the free permit).
/// Shrunk from `lazy_mixed`.
#[test]
fn regression_newcomer_queued_behind_a_woken_waiter_is_stranded() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 2, &clock);
    let both = bh.try_acquire_many(2).unwrap();
    let mut a = Task::pending(bh.acquire());
    drop(both);
    assert!(a.woken());
    assert_eq!((bh.available(), bh.waiting()), (1, 0));
    // `a` has not run yet, but its permit is already its own.
    let pb = futures_lite::future::block_on(bh.acquire()).unwrap();
    let pa = a.ready().unwrap();
    assert_eq!((bh.available(), bh.in_flight()), (0, 2));
    drop((pa, pb));
}

/// Two waiters for three permits with two free, one cancelled, then a
/// single-permit waiter: it must not sleep next to the two free permits
/// (with the old wake-up queue it did, once the state word repeated).
/// Now the big waiter keeps its place and the newcomer, which fits, takes
/// a free permit at once. Shrunk from `eager_mixed`.
#[test]
fn regression_pass_on_suppressed_when_the_word_repeats_strands_a_waiter() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 3, &clock);
    let one = bh.try_acquire().unwrap();
    let big1 = Task::pending(bh.acquire_many(3));
    let mut big2 = Task::pending(bh.acquire_many(3));
    // Nobody is woken for permits it cannot use.
    assert_eq!((big1.wakes(), big2.wakes()), (0, 0));
    drop(big1);
    assert_eq!((big2.wakes(), bh.waiting()), (0, 1));
    let p = futures_lite::future::block_on(bh.acquire()).unwrap();
    assert_eq!((bh.available(), bh.waiting()), (1, 1));
    big2.assert_pending();
    drop((p, one));
    assert_eq!(big2.ready().unwrap().count(), 3);
}

/// Single-permit waiters are not served in arrival order after a shrink. With
/// in flight above the capacity, a release that leaves no permit free still
/// wakes the first waiter; it finds nothing, queues again at the back, and
/// the next permit goes to the waiter that arrived after it. Fairness: "Waiters
/// are woken in the order they started waiting". Shrunk from
/// `eager_single_permit_fifo`.
#[test]
fn regression_a_release_below_capacity_sends_the_head_waiter_to_the_back() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 2, &clock);
    let p1 = bh.try_acquire().unwrap();
    let p2 = bh.try_acquire().unwrap();
    assert_eq!(bh.resize(1), Ok(2));
    let mut first = Task::pending(bh.acquire());
    let mut second = Task::pending(bh.acquire());
    drop(p1); // in flight 1, capacity 1: nothing free
    if first.woken() {
        first.assert_pending();
    }
    let (first_before, second_before) = (first.wakes(), second.wakes());
    drop(p2); // one permit free
    assert!(
        first.wakes() > first_before && second.wakes() == second_before,
        "the permit must go to the waiter that arrived first (wakes before the \
         release: first {first_before}, second {second_before}; after: first {}, second {})",
        first.wakes(),
        second.wakes()
    );
    let p = first.ready().unwrap();
    drop(p);
    drop(second.ready().unwrap());
}

/// A newcomer takes a permit on its first poll while a woken waiter, who
/// needs every free permit, has not run yet; the waiter then finds too few
/// and queues again at the back. The newcomer's registration saw the
/// "stranded" flag (left set from when the big waiter registered next to one
/// free permit) and woke "the first waiter to look" with an *additional*
/// notification; the only waiter was already notified, so the notification
/// went to the newcomer's own listener. Fairness: "a new `acquire*` queues
/// behind the others, even if a permit has just been released and the woken
/// waiter has not run yet". Shrunk from `lazy_mixed`.
#[test]
fn regression_newcomer_barges_past_a_woken_waiter() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 4, &clock);
    let three = bh.try_acquire_many(3).unwrap();
    let mut all = Task::pending(bh.acquire_many(4)); // queues next to 1 free permit
    drop(three); // 4 free: the waiter is woken for them
    assert!(all.woken());
    let mut newcomer = Task::new(bh.acquire());
    let first = newcomer.poll();
    let (available, waiting) = (bh.available(), bh.waiting());
    assert!(
        first.is_pending(),
        "a newcomer took a permit while a woken waiter for all four had not run \
         ({:?}; then available {available}, waiting {waiting})",
        first.map(|r| r.map(|p| p.count())),
    );
    assert_eq!(all.ready().unwrap().count(), 4);
}

/// A grow wakes every waiter; a newcomer arriving before they run must queue
/// behind them. (Holds at 5b5b158; fails with a grow that sets the stranded
/// flag, whose newcomer wake-up then lands on the newcomer's own listener,
/// as in `regression_newcomer_barges_past_a_woken_waiter`.) Shrunk from
/// `lazy_mixed`.
#[test]
fn regression_newcomer_queues_behind_waiters_woken_by_a_grow() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 1, &clock);
    let held = bh.try_acquire().unwrap();
    let mut waiter = Task::pending(bh.acquire());
    assert_eq!(bh.resize(2), Ok(1));
    assert!(waiter.woken());
    let mut newcomer = Task::new(bh.acquire());
    let first = newcomer.poll();
    assert!(
        first.is_pending(),
        "a newcomer took the permit a grow freed for the woken waiter ({:?})",
        first.map(|r| r.map(|p| p.count())),
    );
    let p = waiter.ready().unwrap();
    drop((p, held));
    drop(newcomer.ready().unwrap());
}

// ---------------------------------------------------------------------------
// The adaptive bulkhead: the same permit accounting while an algorithm moves
// the capacity.
// ---------------------------------------------------------------------------

mod adaptive {
    use super::*;
    use watertight::limit::{AdaptiveBulkhead, Aimd, LimitAlgorithm, Signal, Window};

    const WINDOW: Duration = Duration::from_millis(10);

    #[derive(Clone, Debug)]
    enum Op {
        /// `try_acquire`, keeping the permit.
        TryAcquire,
        /// `record` a held permit with a signal.
        Record(usize, Signal),
        /// Drop a held permit without a verdict.
        Drop(usize),
        /// `ManualClock::advance` by this many milliseconds.
        Advance(u64),
        /// `tick`.
        Tick,
    }

    fn signal() -> impl Strategy<Value = Signal> {
        prop_oneof![
            4 => Just(Signal::Success),
            1 => Just(Signal::Failure),
            1 => Just(Signal::Dropped),
            1 => Just(Signal::Timeout),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::TryAcquire),
            4 => (any::<usize>(), signal()).prop_map(|(i, s)| Op::Record(i, s)),
            1 => any::<usize>().prop_map(Op::Drop),
            3 => (0u64..12).prop_map(Op::Advance),
            1 => Just(Op::Tick),
        ]
    }

    /// The window protocol as the docs state it, written out: samples add
    /// up until a record or tick at or past `opened + WINDOW` closes the
    /// window (the sample first), a window of at least one sample is handed
    /// to the algorithm, and the capacity becomes its answer.
    struct Model {
        alg: Aimd,
        opened: Duration,
        w: Window,
        rtt_sum_us: u64,
        capacity: usize,
    }

    impl Model {
        fn close_if_due(&mut self, now: Duration) {
            if now < self.opened + WINDOW {
                return;
            }
            self.opened = now;
            let mut w = std::mem::take(&mut self.w);
            w.avg_rtt = (w.successes > 0)
                .then(|| Duration::from_micros(self.rtt_sum_us / w.successes as u64));
            self.rtt_sum_us = 0;
            if w.samples() >= 1 {
                self.capacity = self.alg.update(&w);
            }
        }
    }

    fn run(ops: &[Op]) -> Result<(), TestCaseError> {
        let clock = ManualClock::new();
        let alg = Aimd::builder()
            .min_limit(1)
            .initial_limit(3)
            .max_limit(6)
            .build()
            .unwrap();
        let b = AdaptiveBulkhead::with_window("model", alg.clone(), WINDOW, 1, &clock);
        let mut m = Model {
            alg,
            opened: Duration::ZERO,
            w: Window::EMPTY,
            rtt_sum_us: 0,
            capacity: 3,
        };
        let mut held = Vec::new();
        for op in ops {
            let now = clock.now().since_origin();
            match op.clone() {
                Op::TryAcquire => {
                    let got = b.try_acquire();
                    prop_assert_eq!(got.is_ok(), held.len() < m.capacity, "{:?}", op);
                    if let Ok(p) = got {
                        held.push(p);
                    }
                }
                Op::Record(i, s) if !held.is_empty() => {
                    let p = held.swap_remove(i % held.len());
                    let rtt = now - p.started().since_origin();
                    m.w.max_in_flight = m.w.max_in_flight.max(held.len() + 1);
                    match s {
                        Signal::Success => {
                            m.w.successes += 1;
                            m.rtt_sum_us += rtt.as_micros() as u64;
                        }
                        Signal::Failure => m.w.failed += 1,
                        Signal::Dropped => m.w.dropped += 1,
                        Signal::Timeout => m.w.timed_out += 1,
                    }
                    p.record(s);
                    m.close_if_due(now);
                }
                Op::Drop(i) if !held.is_empty() => {
                    drop(held.swap_remove(i % held.len()));
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::Tick => {
                    b.tick();
                    m.close_if_due(now);
                }
                _ => {}
            }
            // No permit lost or invented while the limit moves.
            prop_assert_eq!(b.limit(), m.capacity, "after {:?}", op);
            prop_assert!((1..=6).contains(&b.limit()));
            prop_assert_eq!(b.bulkhead().in_flight(), held.len());
            prop_assert_eq!(
                b.bulkhead().available(),
                m.capacity.saturating_sub(held.len())
            );
        }
        drop(held);
        prop_assert_eq!(b.bulkhead().in_flight(), 0);
        prop_assert_eq!(b.bulkhead().available(), b.limit());
        Ok(())
    }

    proptest! {
        #![proptest_config(config())]

        /// Random calls, verdicts, cancellations and ticks on `ManualClock`:
        /// the limit follows the window protocol's model, and in flight and
        /// available follow the permits held, through every limit change.
        #[test]
        fn adaptive_limit_changes_keep_every_permit(ops in vec(op(), 1..120)) {
            run(&ops)?;
        }
    }
}
