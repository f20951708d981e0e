#![cfg(not(loom))]
//! Model-based test of `PartitionedBulkhead`: random sequences of
//! operations on three classes run single-threaded against the real type on
//! `ManualClock` and against a sequential reference written below; every
//! answer, every room's in-flight and waiting count, and every class's
//! counters must match after every step.
//!
//! The reference states the documented rule as plain code: a call takes a
//! free slot of its class's room; else, if nobody of its class waits, a
//! free slot of another room, the last class's first; else it waits in its
//! room's FIFO queue until its deadline (or is refused at once with no
//! time). A release hands the slot to the first waiter of the room it
//! belongs to, exactly; with nobody waiting there, the slot is free, and
//! the first waiter of some class borrows it (the release wakes the most
//! important class's first waiter; a first waiter of another class polled
//! before it may take it): the reference checks that the borrower was first
//! of its class and the slot free. Every woken waiter is polled after each
//! step (an executor that runs woken tasks at once).
//!
//! On top of agreement, after every step:
//!
//! 1. the slots in flight never pass the capacity;
//! 2. **the rule**: a class refused (no slot and no time to wait, or its
//!    wait ran out) while it had fewer than its share in flight found its
//!    room full, so its room held a borrower;
//! 3. nobody waits while a slot is free anywhere (once woken waiters ran);
//! 4. teardown gives every slot back.

mod common;
#[path = "support/proptest_config.rs"]
mod proptest_config;

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::Probe;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use watertight::clock::ManualClock;
use watertight::partition::{AcquireClass, ClassPermit, PartitionError, PartitionedBulkhead};
use watertight::AcquireError;

const K: usize = 3;
const SHARES: [usize; K] = [3, 2, 1];

#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire(class)`.
    Try(usize),
    /// `acquire_timeout(class, ms)`, polled once now and whenever woken.
    Wait(usize, u64),
    /// Drop the held slot at this index (mod the number held).
    Release(usize),
    /// Drop the pending wait at this index (mod the number pending).
    Cancel(usize),
    /// Advance the clock by this many ms.
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..K).prop_map(Op::Try),
        3 => ((0..K), 0..30u64).prop_map(|(c, ms)| Op::Wait(c, ms)),
        4 => (0..16usize).prop_map(Op::Release),
        1 => (0..8usize).prop_map(Op::Cancel),
        2 => (1..15u64).prop_map(Op::Advance),
    ]
}

/// What a call got: the room of its slot, or the refusal.
type Answer = Result<usize, AcquireError>;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counters {
    borrowed: usize,
    full: usize,
    timed_out: usize,
    accepted: usize,
}

/// The sequential reference.
struct Model {
    now: u64,
    occupied: [usize; K],
    /// Per room: waiter ids with their deadlines (ms), in arrival order.
    queues: [VecDeque<(usize, u64)>; K],
    /// Slots held: (class, room).
    held: Vec<(usize, usize)>,
    counters: [Counters; K],
}

impl Model {
    fn new() -> Self {
        Model {
            now: 0,
            occupied: [0; K],
            queues: Default::default(),
            held: Vec::new(),
            counters: [Counters::default(); K],
        }
    }

    fn class_in_flight(&self, class: usize) -> usize {
        self.held.iter().filter(|&&(c, _)| c == class).count()
    }

    /// A free slot now, or `None`.
    fn take(&mut self, class: usize) -> Option<usize> {
        let free = |m: &Model, r: usize| m.occupied[r] < SHARES[r] && m.queues[r].is_empty();
        let room = if free(self, class) {
            Some(class)
        } else if self.queues[class].is_empty() {
            (0..K)
                .rev()
                .filter(|&r| r != class)
                .find(|&r| free(self, r))
        } else {
            None
        };
        if let Some(r) = room {
            self.occupied[r] += 1;
            self.held.push((class, r));
            self.counters[r].accepted += 1;
            if r != class {
                self.counters[class].borrowed += 1;
            }
        }
        room
    }

    fn try_acquire(&mut self, class: usize) -> Answer {
        match self.take(class) {
            Some(r) => Ok(r),
            None => {
                self.counters[class].full += 1;
                Err(AcquireError::Full)
            }
        }
    }

    /// `Ok(Some(room))` at once, `Ok(None)` queued (as waiter `id`), or a
    /// refusal.
    fn wait(
        &mut self,
        class: usize,
        max_ms: u64,
        id: usize,
    ) -> Result<Option<usize>, AcquireError> {
        if let Some(r) = self.take(class) {
            return Ok(Some(r));
        }
        if max_ms == 0 {
            self.counters[class].timed_out += 1;
            return Err(AcquireError::TimedOut);
        }
        self.queues[class].push_back((id, self.now + max_ms));
        Ok(None)
    }

    /// Gives back the slot at `i`: handed to the first waiter of its room
    /// (its id), or left free.
    fn release(&mut self, i: usize) -> Option<usize> {
        let (_, room) = self.held.remove(i);
        if let Some((id, _)) = self.queues[room].pop_front() {
            self.held.push((room, room));
            self.counters[room].accepted += 1;
            return Some(id);
        }
        self.occupied[room] -= 1;
        None
    }

    /// The first waiter of `class` (`id`) borrows a free slot of `room`:
    /// whether the reference allows it.
    fn borrow_for_waiter(&mut self, id: usize, class: usize, room: usize) -> bool {
        let first = self.queues[class].front().map(|&(w, _)| w) == Some(id);
        if !first || room == class || self.occupied[room] >= SHARES[room] {
            return false;
        }
        self.queues[class].pop_front();
        self.occupied[room] += 1;
        self.held.push((class, room));
        self.counters[room].accepted += 1;
        self.counters[class].borrowed += 1;
        true
    }

    fn cancel(&mut self, id: usize) {
        for q in &mut self.queues {
            q.retain(|&(w, _)| w != id);
        }
    }

    /// Waiters whose deadline has come: (id, class).
    fn expire(&mut self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (class, q) in self.queues.iter_mut().enumerate() {
            q.retain(|&(id, deadline)| {
                if deadline <= self.now {
                    out.push((id, class));
                    false
                } else {
                    true
                }
            });
        }
        for &(_, class) in &out {
            self.counters[class].timed_out += 1;
        }
        out
    }
}

type Wait<'a> = Pin<Box<AcquireClass<'a, &'a ManualClock>>>;

struct Pending<'a> {
    id: usize,
    class: usize,
    fut: Wait<'a>,
    probe: Probe,
    /// Wakes seen when it was last polled: polled again only when woken.
    seen: usize,
}

/// The rule, checked at a refusal of `class`.
fn rule(m: &Model, class: usize, what: &str) -> Result<(), TestCaseError> {
    if m.class_in_flight(class) < SHARES[class] {
        let borrowers = m
            .held
            .iter()
            .filter(|&&(c, r)| r == class && c != class)
            .count();
        prop_assert!(
            m.occupied[class] == SHARES[class] && borrowers > 0,
            "{what}: class {class} under its share ({} of {}) refused with room {} of {} held, {borrowers} by borrowers",
            m.class_in_flight(class),
            SHARES[class],
            m.occupied[class],
            SHARES[class]
        );
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let b = PartitionedBulkhead::new(
        "model",
        [("a", SHARES[0]), ("b", SHARES[1]), ("c", SHARES[2])],
        &clock,
    );
    let mut m = Model::new();
    let mut held: Vec<ClassPermit<'_, &ManualClock>> = Vec::new();
    let mut pending: Vec<Pending<'_>> = Vec::new();
    let mut next_id = 0;

    for (step, op) in ops.iter().enumerate() {
        let at = format!("step {step} {op:?}");
        // Ids of waiters the model expects served at this step.
        let mut served: Vec<usize> = Vec::new();
        let mut expired: Vec<(usize, usize)> = Vec::new();
        match *op {
            Op::Try(class) => {
                let real = b.try_acquire(class).map(|p| {
                    let r = p.room();
                    held.push(p);
                    r
                });
                let want = m.try_acquire(class);
                prop_assert_eq!(real.map_err(unrefused), want, "{}", at);
                if want.is_err() {
                    rule(&m, class, &at)?;
                }
            }
            Op::Wait(class, ms) => {
                let id = next_id;
                next_id += 1;
                let mut fut = Box::pin(b.acquire_timeout(class, Duration::from_millis(ms)));
                let probe = Probe::new();
                let first = probe.poll(fut.as_mut());
                let want = m.wait(class, ms, id);
                match (first, want) {
                    (Poll::Ready(Ok(p)), Ok(Some(r))) => {
                        prop_assert_eq!(p.room(), r, "{}", at);
                        prop_assert_eq!(p.class(), class, "{}", at);
                        held.push(p);
                    }
                    (Poll::Pending, Ok(None)) => {
                        let seen = probe.wakes();
                        pending.push(Pending {
                            id,
                            class,
                            fut,
                            probe,
                            seen,
                        })
                    }
                    (Poll::Ready(Err(e)), Err(w)) => {
                        prop_assert_eq!(unrefused(e), w, "{}", at);
                        rule(&m, class, &at)?;
                    }
                    (real, want) => {
                        return Err(TestCaseError::fail(format!(
                            "{at}: real {:?}, model {want:?}",
                            real.map(|r| r.map(|p| p.room()))
                        )))
                    }
                }
            }
            Op::Release(i) => {
                if !held.is_empty() {
                    let i = i % held.len();
                    // The model's held list is in the same order as ours.
                    drop(held.remove(i));
                    served.extend(m.release(i));
                }
            }
            Op::Cancel(i) => {
                if !pending.is_empty() {
                    let p = pending.remove(i % pending.len());
                    m.cancel(p.id);
                    drop(p);
                }
            }
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                m.now += ms;
                expired = m.expire();
            }
        }
        // Settle: poll every woken waiter; exactly the served and expired
        // ones complete, in the model's terms.
        let mut k = 0;
        while k < pending.len() {
            if pending[k].probe.wakes() == pending[k].seen {
                k += 1;
                continue;
            }
            let p = &mut pending[k];
            p.seen = p.probe.wakes();
            match p.probe.poll(p.fut.as_mut()) {
                Poll::Pending => k += 1,
                Poll::Ready(out) => {
                    let p = pending.remove(k);
                    match out {
                        Ok(permit) => {
                            prop_assert_eq!(permit.class(), p.class, "{}", at);
                            if served.contains(&p.id) {
                                // Handed its own room's slot by a release.
                                prop_assert_eq!(permit.room(), p.class, "{}", at);
                                served.retain(|&s| s != p.id);
                            } else {
                                // First of its class, it borrowed a slot
                                // another room freed with nobody waiting
                                // there (a release nudges the most
                                // important class's first waiter; another
                                // class's, polled first, may take it).
                                prop_assert!(
                                    m.borrow_for_waiter(p.id, p.class, permit.room()),
                                    "{}: waiter {} of class {} borrowed room {} unexpectedly",
                                    at,
                                    p.id,
                                    p.class,
                                    permit.room()
                                );
                            }
                            held.push(permit);
                        }
                        Err(e) => {
                            prop_assert_eq!(
                                e,
                                PartitionError::Refused(AcquireError::TimedOut),
                                "{}",
                                at
                            );
                            prop_assert!(
                                expired.iter().any(|&(id, _)| id == p.id),
                                "{}: waiter {} timed out unexpectedly",
                                at,
                                p.id
                            );
                            expired.retain(|&(id, _)| id != p.id);
                            rule(&m, p.class, &at)?;
                        }
                    }
                }
            }
        }
        prop_assert!(
            served.is_empty(),
            "{}: served but never woken: {:?}",
            at,
            served
        );
        prop_assert!(
            expired.is_empty(),
            "{}: expired but never woken: {:?}",
            at,
            expired
        );

        // Agreement on everything observable.
        prop_assert_eq!(held.len(), m.held.len(), "{}", at);
        for (real, want) in held.iter().zip(&m.held) {
            prop_assert_eq!((real.class(), real.room()), *want, "{}", at);
        }
        let in_flight: usize = m.occupied.iter().sum();
        if m.queues.iter().any(|q| !q.is_empty()) {
            prop_assert_eq!(
                in_flight,
                b.capacity(),
                "{}: a waiter next to a free slot",
                at
            );
        }
        prop_assert_eq!(b.in_flight(), in_flight, "{}", at);
        prop_assert!(in_flight <= b.capacity(), "{}", at);
        for c in 0..K {
            let real = b.class_metrics(c).unwrap();
            let want = m.counters[c];
            prop_assert_eq!(real.room_in_flight, m.occupied[c], "{} class {}", at, c);
            prop_assert_eq!(real.waiting, m.queues[c].len(), "{} class {}", at, c);
            prop_assert_eq!(
                (
                    real.borrowed,
                    real.refused_full,
                    real.refused_timed_out,
                    real.room_accepted
                ),
                (want.borrowed, want.full, want.timed_out, want.accepted),
                "{} class {}",
                at,
                c
            );
        }
    }
    drop(pending);
    drop(held);
    prop_assert_eq!(b.in_flight(), 0);
    for c in 0..K {
        prop_assert_eq!(b.class_metrics(c).unwrap().waiting, 0);
    }
    Ok(())
}

fn unrefused(e: PartitionError) -> AcquireError {
    match e {
        PartitionError::Refused(e) => e,
        other => panic!("not a refusal: {other:?}"),
    }
}

fn config() -> ProptestConfig {
    proptest_config::cases(1000, 10)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn partitioned_bulkhead_matches_its_reference(ops in proptest::collection::vec(op(), 1..120)) {
        run(&ops)?;
    }
}

/// The scenario the rule is about, as a fixed sequence: batch fills every
/// room, a critical waiter is served by the first slot freed anywhere.
#[test]
fn the_rule_as_a_fixed_sequence() {
    let mut ops: Vec<Op> = (0..6).map(|_| Op::Try(2)).collect();
    ops.push(Op::Wait(0, 20));
    ops.push(Op::Try(1)); // refused: every room full
    ops.push(Op::Release(0)); // batch's own slot: borrowed by the waiter
    ops.push(Op::Release(0)); // from b's room: free for b
    ops.push(Op::Try(1));
    ops.push(Op::Advance(25));
    run(&ops).unwrap();
}
