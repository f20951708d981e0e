#![cfg(not(loom))]
//! Model-based test of `Bulkhead`: random sequences of operations run
//! single-threaded against the real `Bulkhead<&ManualClock>` and against a
//! plain sequential reference model written below, and after every step the
//! observable state must match.
//!
//! The model encodes the documented semantics (the `Bulkhead` doc sections
//! "Fairness", "Capacity changes and closing" and "Counters", the method docs,
//! and DESIGN.md "Bulkhead deadline"). Wake-ups travel through
//! event-listener's queue and a future runs only when the test polls it, so
//! the model does not guess *which* waiter a release wakes: each waiter is
//! polled with its own counting `Probe`, and the model checks what must hold
//! whatever the wake scheduling:
//!
//! 1. permits are never invented or lost: `in_flight` is the sum of the held
//!    permits, `available` is `max(0, capacity - in_flight)`, and `forget`
//!    takes permits out of the capacity;
//! 2. a waiter that completes `Ok` gets exactly its `n` permits, only while
//!    it is registered, only after a wake-up, only if `n` are free;
//! 3. no newcomer (`try_acquire_many`, or an `acquire*` on its first poll)
//!    takes a free permit while anyone waits;
//! 4. FIFO: when every waiter asks for one permit and each is polled as soon
//!    as it is woken, waiters complete `Ok` in the order they registered;
//! 5. liveness: once every woken waiter has run (`settle`), no permit is free
//!    while a pending waiter could use it;
//! 6. every counter of `metrics()` matches the model exactly;
//! 7. after `close`, every pending waiter completes with `Closed` when polled,
//!    and no waiter is left pending once the woken ones have run.
//!
//! Also: a waiter is never left pending past its deadline, a poll of a waiter
//! that was not woken changes nothing, and after a `resize` the woken waiters
//! that ask for more than the new capacity fail with `ExceedsCapacity`.
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
//! The `regression_*` tests at the end are failures the model found, cut
//! down by hand to the steps that matter.

mod common;

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
    /// Registered in the queue; `seq` is its place in arrival order.
    Pending { seq: u64 },
    /// Completed (or never registered) or cancelled.
    Done,
}

#[derive(Debug, Clone)]
struct ModelWaiter {
    n: usize,
    /// Nanoseconds on the manual clock; `None` for `acquire_many`.
    deadline: Option<u64>,
    state: WaiterState,
}

impl ModelWaiter {
    fn seq(&self) -> Option<u64> {
        match self.state {
            WaiterState::Pending { seq } => Some(seq),
            WaiterState::Done => None,
        }
    }
}

/// What the rules say about an acquisition by a newcomer (one who is not
/// registered as a waiter).
enum Newcomer {
    Grant,
    Refuse(AcquireError),
    /// Would have to wait: `Full` for `try_acquire`, a wait for `acquire*`.
    Blocked,
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
    next_seq: u64,
    accepted: usize,
    rejected_full: usize,
    rejected_timed_out: usize,
    rejected_closed: usize,
    cancelled: usize,
    peak: usize,
}

impl Model {
    fn new(capacity: usize) -> Self {
        Model {
            capacity,
            ..Model::default()
        }
    }

    fn available(&self) -> usize {
        self.capacity.saturating_sub(self.in_flight)
    }

    fn waiting(&self) -> usize {
        self.waiters.iter().filter(|w| w.seq().is_some()).count()
    }

    fn pending(&self) -> impl Iterator<Item = (usize, &ModelWaiter)> {
        self.waiters
            .iter()
            .enumerate()
            .filter(|(_, w)| w.seq().is_some())
    }

    fn expired(&self, deadline: Option<u64>) -> bool {
        deadline.is_some_and(|d| self.now >= d)
    }

    /// The checks every acquisition makes, in the documented order: closed
    /// first (every later acquire fails), then a request above the capacity,
    /// then an empty request, which is granted, then "free and nobody waits".
    fn newcomer(&self, n: usize) -> Newcomer {
        if self.closed {
            Newcomer::Refuse(AcquireError::Closed)
        } else if n > self.capacity {
            Newcomer::Refuse(AcquireError::ExceedsCapacity {
                requested: n,
                capacity: self.capacity,
            })
        } else if n == 0 || (self.waiting() == 0 && self.available() >= n) {
            Newcomer::Grant
        } else {
            Newcomer::Blocked
        }
    }

    /// Hands out `n` permits. `accepted` counts an acquisition of one or more
    /// permits once; an empty permit (`n == 0`) takes nothing and is not
    /// counted (the library's behaviour; the docs do not say).
    fn grant(&mut self, n: usize) {
        if n > 0 {
            self.in_flight += n;
            self.accepted += 1;
            self.peak = self.peak.max(self.in_flight);
        }
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
        let r = match self.newcomer(n) {
            Newcomer::Grant => Ok(n),
            Newcomer::Refuse(e) => Err(e),
            Newcomer::Blocked => Err(AcquireError::Full),
        };
        match r {
            Ok(n) => self.grant(n),
            Err(e) => self.count_rejection(e),
        }
        r
    }

    /// The first poll of a new `acquire*`: taken at once, refused at once,
    /// timed out at once (deadline passed and it would have to wait: it does
    /// not register), or registered at the back of the queue.
    fn start_waiter(
        &mut self,
        n: usize,
        deadline: Option<u64>,
    ) -> Poll<Result<usize, AcquireError>> {
        let (state, r) = match self.newcomer(n) {
            Newcomer::Grant => (WaiterState::Done, Poll::Ready(Ok(n))),
            Newcomer::Refuse(e) => (WaiterState::Done, Poll::Ready(Err(e))),
            Newcomer::Blocked if self.expired(deadline) => {
                (WaiterState::Done, Poll::Ready(Err(AcquireError::TimedOut)))
            }
            Newcomer::Blocked => {
                self.next_seq += 1;
                (WaiterState::Pending { seq: self.next_seq }, Poll::Pending)
            }
        };
        match r {
            Poll::Ready(Ok(n)) => self.grant(n),
            Poll::Ready(Err(e)) => self.count_rejection(e),
            Poll::Pending => {}
        }
        self.waiters.push(ModelWaiter { n, deadline, state });
        r
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
    /// `None` once the future has been dropped.
    fut: Option<AcquireFuture<'a>>,
    probe: Probe,
    /// The probe's wake count when the future was last polled.
    seen: usize,
}

#[derive(Debug, Clone, Copy)]
struct Rules {
    /// Settle after every operation (otherwise only on `Op::Settle`).
    eager: bool,
    /// Check FIFO completion order (only meaningful with single-permit waiters
    /// and eager settling).
    fifo: bool,
}

struct Harness<'a> {
    clock: &'a ManualClock,
    bh: &'a Bulkhead<Clk<'a>>,
    held: Vec<Permit<'a, Clk<'a>>>,
    waiters: Vec<Slot<'a>>,
    model: Model,
    rules: Rules,
    /// A `forget` lowered the capacity since the last successful `resize`.
    /// `forget` wakes nobody, so a waiter above the capacity may then sit
    /// pending; otherwise (at the start, or after a `resize`, which wakes
    /// every waiter) none may once the woken waiters have run.
    forgot_since_resize: bool,
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
    fn new(clock: &'a ManualClock, bh: &'a Bulkhead<Clk<'a>>, rules: Rules) -> Self {
        Harness {
            clock,
            bh,
            held: Vec::new(),
            waiters: Vec::new(),
            model: Model::new(bh.capacity()),
            rules,
            forgot_since_resize: false,
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::TryAcquire(n) => {
                let waiting_before = self.bh.waiting();
                let expected = self.model.try_acquire(n);
                let got = self.bh.try_acquire_many(n);
                if n > 0 && got.is_ok() && waiting_before > 0 {
                    return Err(fail(format!(
                        "a newcomer's try_acquire_many({n}) succeeded while {waiting_before} \
                         waited (Fairness: no barging)"
                    )));
                }
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
                    self.model.in_flight -= n;
                }
            }
            Op::ForgetPermit(i) => {
                if !self.held.is_empty() {
                    let i = i % self.held.len();
                    self.held.remove(i).forget();
                    let n = self.model.held.remove(i);
                    self.model.in_flight -= n;
                    // Removed from the capacity, which stops at zero (it can
                    // be below `n` after a shrink).
                    self.model.capacity = self.model.capacity.saturating_sub(n);
                    if n > 0 {
                        self.forgot_since_resize = true;
                    }
                }
            }
            Op::Acquire(n) => self.start_waiter(n, None)?,
            Op::AcquireUntil(n, d) => self.start_waiter(n, Some(d))?,
            Op::Poll(i) => {
                let pending: Vec<usize> = self.model.pending().map(|(i, _)| i).collect();
                if !pending.is_empty() {
                    let i = pending[i % pending.len()];
                    self.poll_waiter(i)?;
                }
            }
            Op::Cancel(i) => {
                let live: Vec<usize> = (0..self.waiters.len())
                    .filter(|&i| self.waiters[i].fut.is_some())
                    .collect();
                if !live.is_empty() {
                    let i = live[i % live.len()];
                    drop(self.waiters[i].fut.take());
                    let w = &mut self.model.waiters[i];
                    if w.seq().is_some() {
                        // A wait abandoned while registered: cancelled, not
                        // rejected. Dropping a completed future counts nothing.
                        w.state = WaiterState::Done;
                        self.model.cancelled += 1;
                    }
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
                    self.forgot_since_resize = false;
                }
            }
            Op::Close => {
                let got = self.bh.close();
                prop_assert_eq!(got, !self.model.closed, "close() says whether it closed");
                self.model.closed = true;
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
        let waiting_before = self.model.waiting();
        let expected = self.model.start_waiter(n, deadline.map(Instant::as_nanos));
        let probe = Probe::new();
        let seen = probe.wakes();
        let got = probe.poll(fut.as_mut());
        let got_view = view_poll(&got);
        if n > 0 && matches!(got_view, Poll::Ready(Ok(_))) && waiting_before > 0 {
            return Err(fail(format!(
                "a new acquire_many({n}) took a free permit on its first poll while \
                 {waiting_before} waited (Fairness: a newcomer queues behind the others)"
            )));
        }
        prop_assert_eq!(
            got_view,
            expected,
            "first poll of acquire_many({}) deadline {:?}",
            n,
            deadline
        );
        if let Poll::Ready(Ok(p)) = got {
            self.held.push(p);
            self.model.held.push(n);
        }
        self.waiters.push(Slot {
            fut: Some(fut),
            probe,
            seen,
        });
        Ok(())
    }

    /// Polls pending waiter `i` once and checks the outcome against the model.
    fn poll_waiter(&mut self, i: usize) -> Result<(), TestCaseError> {
        let slot = &mut self.waiters[i];
        let fut = slot
            .fut
            .as_mut()
            .expect("a pending waiter's future is alive");
        let wakes = slot.probe.wakes();
        let woken = wakes > slot.seen;
        slot.seen = wakes;
        let got = slot.probe.poll(fut.as_mut());

        let m = &mut self.model;
        let w = m.waiters[i].clone();
        let seq = w.seq().expect("polled waiters are pending in the model");
        let ctx = || {
            format!(
                "waiter #{i} (n {}, deadline {:?}, woken {woken})",
                w.n, w.deadline
            )
        };
        let r = match got {
            Poll::Pending => {
                prop_assert!(!m.closed, "{} still pending after close", ctx());
                prop_assert!(
                    !m.expired(w.deadline),
                    "{} still pending at its deadline (now {})",
                    ctx(),
                    m.now
                );
                return Ok(());
            }
            Poll::Ready(r) => r,
        };
        // Nothing wakes a waiter's probe without a reason: a release, a
        // resize, a close, a passed-on wake-up or the clock. An un-woken
        // waiter must find nothing changed.
        prop_assert!(
            woken,
            "{} completed with {:?} without being woken",
            ctx(),
            view(&r)
        );
        m.waiters[i].state = WaiterState::Done;
        match &r {
            Ok(p) => {
                prop_assert_eq!(p.count(), w.n, "{} got a permit of the wrong size", ctx());
                prop_assert!(!m.closed, "{} granted after close", ctx());
                prop_assert!(
                    m.available() >= w.n,
                    "{} granted {} permits while the model has {} free (capacity {}, in flight {})",
                    ctx(),
                    w.n,
                    m.available(),
                    m.capacity,
                    m.in_flight
                );
                if self.rules.fifo {
                    if let Some((j, _)) = m.pending().find(|(_, o)| o.seq().unwrap() < seq) {
                        return Err(fail(format!(
                            "FIFO: {} was served before waiter #{j}, which registered earlier \
                             and is still pending",
                            ctx()
                        )));
                    }
                }
                m.grant(w.n);
            }
            Err(AcquireError::Closed) => {
                prop_assert!(m.closed, "{} failed Closed on an open bulkhead", ctx());
                m.count_rejection(AcquireError::Closed);
            }
            Err(e) if m.closed => {
                return Err(fail(format!(
                    "{} got {e:?} after close, expected Closed",
                    ctx()
                )));
            }
            Err(AcquireError::TimedOut) => {
                prop_assert!(
                    m.expired(w.deadline),
                    "{} timed out early (now {})",
                    ctx(),
                    m.now
                );
                m.count_rejection(AcquireError::TimedOut);
            }
            Err(AcquireError::ExceedsCapacity {
                requested,
                capacity,
            }) => {
                prop_assert_eq!(
                    (*requested, *capacity),
                    (w.n, m.capacity),
                    "{} ExceedsCapacity fields",
                    ctx()
                );
                prop_assert!(
                    w.n > m.capacity,
                    "{} ExceedsCapacity within the capacity",
                    ctx()
                );
            }
            Err(e) => {
                return Err(fail(format!(
                    "{} got {e:?}, which a waiter never gets",
                    ctx()
                )))
            }
        }
        if let Ok(p) = r {
            self.held.push(p);
            self.model.held.push(w.n);
        }
        Ok(())
    }

    /// Runs every woken waiter, again and again, until none is woken: what an
    /// executor does with the tasks a step woke.
    fn settle(&mut self) -> Result<(), TestCaseError> {
        let mut polls = 0;
        loop {
            let mut progressed = false;
            for i in 0..self.waiters.len() {
                let slot = &self.waiters[i];
                if self.model.waiters[i].seq().is_some() && slot.probe.wakes() > slot.seen {
                    self.poll_waiter(i)?;
                    progressed = true;
                    polls += 1;
                }
            }
            if !progressed {
                break;
            }
            prop_assert!(
                polls <= 100 * (self.waiters.len() + 1),
                "waiters keep waking each other ({} polls)",
                polls
            );
        }
        self.check_settled()
    }

    /// What must hold once every woken waiter has run.
    fn check_settled(&self) -> Result<(), TestCaseError> {
        let m = &self.model;
        for (i, w) in m.pending() {
            let ctx = || {
                format!(
                    "after settling, waiter #{i} (n {}, deadline {:?}) is pending",
                    w.n, w.deadline
                )
            };
            prop_assert!(!m.closed, "{} on a closed bulkhead", ctx());
            prop_assert!(
                !m.expired(w.deadline),
                "{} past its deadline (now {})",
                ctx(),
                m.now
            );
            prop_assert!(
                w.n > m.available(),
                "{} next to {} free permits (capacity {}, in flight {}): a stranded waiter",
                ctx(),
                m.available(),
                m.capacity,
                m.in_flight
            );
            if !self.forgot_since_resize {
                prop_assert!(
                    w.n <= m.capacity,
                    "{} above the capacity {}",
                    ctx(),
                    m.capacity
                );
            }
        }
        Ok(())
    }

    /// The library's observable state against the model's.
    fn check_state(&self) -> Result<(), TestCaseError> {
        let (m, bh) = (&self.model, self.bh);
        prop_assert_eq!(
            m.in_flight,
            m.held.iter().sum::<usize>(),
            "model: in flight is the held permits"
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
                lib.peak_in_flight
            ),
            (
                m.accepted,
                m.rejected_full,
                m.rejected_timed_out,
                m.rejected_closed,
                m.cancelled,
                m.peak
            ),
            "metrics (accepted, full, timed out, closed, cancelled, peak)"
        );
        prop_assert_eq!(
            lib.rejected(),
            m.rejected_full + m.rejected_timed_out + m.rejected_closed
        );
        Ok(())
    }

    /// Drops every waiter (cancelling the pending ones), then every permit:
    /// everything must come back.
    fn teardown(&mut self) -> Result<(), TestCaseError> {
        for (slot, w) in self.waiters.iter_mut().zip(&mut self.model.waiters) {
            drop(slot.fut.take());
            if w.seq().is_some() {
                w.state = WaiterState::Done;
                self.model.cancelled += 1;
            }
        }
        self.held.clear();
        self.model.held.clear();
        self.model.in_flight = 0;
        self.check_state()?;
        prop_assert_eq!(self.bh.available(), self.model.capacity);
        Ok(())
    }
}

fn run(capacity: usize, ops: &[Op], rules: Rules) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", capacity, &clock);
    let mut h = Harness::new(&clock, &bh, rules);
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
        run(capacity, &ops, Rules { eager: true, fifo: false })?;
    }

    /// Single-permit waiters only, run as soon as woken: served in arrival order.
    #[test]
    fn eager_single_permit_fifo(capacity in 1..=4usize, ops in ops(single_n())) {
        run(capacity, &ops, Rules { eager: true, fifo: true })?;
    }

    /// Woken waiters run only on `Settle` (or when polled by index), so every
    /// operation also happens while wake-ups are in flight.
    #[test]
    fn lazy_mixed(capacity in 1..=4usize, ops in ops(mixed_n())) {
        run(capacity, &ops, Rules { eager: false, fifo: false })?;
    }
}

// ---------------------------------------------------------------------------
// Failures the model found, shrunk by hand to the few steps that matter.
// Each one fails against the library as it is.
// ---------------------------------------------------------------------------

/// A release of two permits wakes the one waiter there is; a newcomer then
/// queues (as Fairness says it must) while the woken waiter has not run yet.
/// The woken waiter takes one permit and the other stays free next to the
/// newcomer, who is never woken: a stranded waiter (an `acquire_timeout`
/// there runs out its whole wait with a permit free). Shrunk from
/// `lazy_mixed`.
#[test]
fn regression_newcomer_queued_behind_a_woken_waiter_is_stranded() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 2, &clock);
    let both = bh.try_acquire_many(2).unwrap();
    let mut a = Task::pending(bh.acquire());
    drop(both);
    assert!(a.woken());
    // `a` has not run yet: the newcomer must queue behind it.
    let mut b = Task::pending(bh.acquire());
    let pa = a.ready().unwrap();
    assert_eq!((bh.available(), bh.waiting()), (1, 1));
    assert!(
        b.woken(),
        "one permit is free and nobody runs to hand it to the waiter (available {}, waiting {})",
        bh.available(),
        bh.waiting()
    );
    let pb = b.ready().unwrap();
    drop((pa, pb));
}

/// Two waiters for three permits with two free hand a wake-up to each other
/// once; one is cancelled, a single-permit waiter arrives, and the state word
/// is then bit for bit the one at which the remaining big waiter last passed
/// a wake-up on (same free permits, same waiter count, same flags), so it
/// does not pass it on again: the single-permit waiter sleeps next to two
/// free permits, although every woken task ran at once. Shrunk from
/// `eager_mixed`.
#[test]
fn regression_pass_on_suppressed_when_the_word_repeats_strands_a_waiter() {
    use common::Task;
    let clock = ManualClock::new();
    let bh = Bulkhead::new("model", 3, &clock);
    let one = bh.try_acquire().unwrap();
    let mut big1 = Task::pending(bh.acquire_many(3));
    let mut big2 = Task::pending(bh.acquire_many(3));
    // The second registration wakes the first to look; the two pass the
    // wake-up round once and then sleep (at most once per state of the word).
    assert_eq!((big1.wakes(), big2.wakes()), (1, 0));
    big1.assert_pending();
    assert_eq!((big1.wakes(), big2.wakes()), (1, 1));
    big2.assert_pending();
    assert_eq!((big1.wakes(), big2.wakes()), (2, 1));
    big1.assert_pending();
    assert_eq!((big1.wakes(), big2.wakes()), (2, 1));
    drop(big1); // cancelled: wakes big2, who is alone and passes nothing
    assert_eq!(big2.wakes(), 2);
    big2.assert_pending();
    let mut small = Task::pending(bh.acquire());
    // The newcomer wakes big2 to look; big2 must hand the wake-up on.
    assert_eq!((big2.wakes(), small.wakes()), (3, 0));
    big2.assert_pending();
    assert_eq!((bh.available(), bh.waiting()), (2, 2));
    assert!(
        small.woken(),
        "two permits are free and the single-permit waiter is never woken"
    );
    let p = small.ready().unwrap();
    drop((p, one, big2));
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
