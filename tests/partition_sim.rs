#![cfg(not(loom))]
//! Who is refused under overload, in a deterministic simulation on
//! `ManualClock`: a backend of `C = 10` workers, each call taking 10 ms (it
//! serves 1 000 calls/s), offered 2×, 3×, 4× and 5× that for 5 s by three
//! classes of callers, every caller willing to wait 50 ms for a slot:
//!
//! - critical (checkout): 400 calls/s at every load, under its share;
//! - default and batch: the rest of the load, 3 : 5.
//!
//! Two bulkheads in front of it, 10 slots each: **fixed**, one FIFO queue
//! for everyone (a plain `Bulkhead`), and **partitioned**, critical 50 %,
//! default 30 %, batch 20 % (`PartitionedBulkhead::from_percent`). Each
//! call is a real acquire future, polled by hand when woken.
//!
//! Asserted at every load: with partitions the critical class keeps at
//! least 95 % of its calls (goodput ÷ offered) and its p99 latency within
//! its wait plus the call; without them it is refused like everyone else
//! (under half of its calls get through from 3× on); both keep the backend
//! at least 95 % busy, so the partitions cost no capacity.
//!
//! **Adaptive**: the same backend loses 3 of its 10 workers after 1 s; a
//! call it gets with every worker busy hangs (it has no queue) until the
//! caller gives up after 20 ms, a [`Signal::Timeout`]. An AIMD limit (100 ms windows) steers the 10 slots
//! in front of it, a plain `Bulkhead` or the partitioned one (through
//! `AdaptiveLimit::record`, which resizes its total, the least important
//! class shed first), offered 2× the healthy capacity. Asserted once the
//! limit has settled (from 1.5 s on): it tracks the 7 workers (7–8: AIMD
//! probes one above); with partitions batch's room is the first below its
//! share, then default's, critical's last (briefly while the limit falls
//! past 7, never once it has settled), and critical keeps at least
//! 90 % of its calls (93 %: the rest are the probe's cost, which falls on
//! the one class with a free slot of its own); without, critical is
//! refused like everyone else (under half of its calls, 25 %).
//!
//! `cargo test --test partition_sim -- --nocapture` prints the tables.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::Probe;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::limit::{AdaptiveLimit, Aimd, Signal};
use watertight::partition::{ClassPermit, PartitionedBulkhead};
use watertight::{Bulkhead, Permit};

const C: usize = 10;
const SERVICE_MS: u64 = 10;
const MAX_WAIT_MS: u64 = 50;
const RUN_MS: u64 = 5_000;
const CLASSES: [&str; 3] = ["critical", "default", "batch"];
/// Critical calls per second, at every load.
const CRITICAL_PER_S: u64 = 400;

/// A slot of either bulkhead, held for the call.
enum Held<'a> {
    Plain(#[allow(dead_code)] Permit<'a, &'a ManualClock>),
    Class(#[allow(dead_code)] ClassPermit<'a, &'a ManualClock>),
}

type Wait<'a> = Pin<Box<dyn Future<Output = Option<Held<'a>>> + 'a>>;

#[derive(Debug, Default, Clone, Copy)]
struct Class {
    offered: usize,
    completed: usize,
    refused: usize,
    p99_ms: u64,
}

/// Calls per second of each class at `load` × capacity.
fn rates(load: u64) -> [u64; 3] {
    let rest = load * 1_000 - CRITICAL_PER_S;
    [CRITICAL_PER_S, rest * 3 / 8, rest - rest * 3 / 8]
}

/// A call waiting for a slot: (class, arrival ms, future, probe, wakes
/// seen at its last poll).
type Pending<'a> = (usize, u64, Wait<'a>, Probe, usize);

/// The `C` slots in front of the backend, both ways (a run uses one).
struct Front<'a> {
    plain: Bulkhead<&'a ManualClock>,
    parts: PartitionedBulkhead<&'a ManualClock, 3>,
    partitioned: bool,
}

impl<'a> Front<'a> {
    fn new(clock: &'a ManualClock, partitioned: bool) -> Self {
        Front {
            plain: Bulkhead::new("backend", C, clock),
            parts: PartitionedBulkhead::from_percent(
                "backend",
                C,
                [(CLASSES[0], 50), (CLASSES[1], 30), (CLASSES[2], 20)],
                clock,
            )
            .unwrap(),
            partitioned,
        }
    }

    /// A call of `class` arriving at `now`, polled once: `Some` of a slot
    /// or a refusal, or `None` while it waits (up to `MAX_WAIT_MS`) in
    /// `pending`.
    fn arrive(
        &'a self,
        class: usize,
        now: u64,
        pending: &mut Vec<Pending<'a>>,
    ) -> Option<Option<Held<'a>>> {
        let max_wait = Duration::from_millis(MAX_WAIT_MS);
        let mut fut: Wait<'a> = if self.partitioned {
            let f = self.parts.acquire_timeout(class, max_wait);
            Box::pin(async move { f.await.ok().map(Held::Class) })
        } else {
            let f = self.plain.acquire_timeout(max_wait);
            Box::pin(async move { f.await.ok().map(Held::Plain) })
        };
        let probe = Probe::new();
        match probe.poll(fut.as_mut()) {
            Poll::Ready(got) => Some(got),
            Poll::Pending => {
                let seen = probe.wakes();
                pending.push((class, now, fut, probe, seen));
                None
            }
        }
    }
}

/// Polls the waiting calls woken since their last poll; each one that is
/// done leaves `pending` and goes to `done(class, arrival ms, slot or
/// refusal)`.
fn poll_woken<'a>(
    pending: &mut Vec<Pending<'a>>,
    mut done: impl FnMut(usize, u64, Option<Held<'a>>),
) {
    let mut i = 0;
    while i < pending.len() {
        let (_, _, fut, probe, seen) = &mut pending[i];
        if probe.wakes() == *seen {
            i += 1;
            continue;
        }
        *seen = probe.wakes();
        match probe.poll(fut.as_mut()) {
            Poll::Pending => i += 1,
            Poll::Ready(got) => {
                let (class, arrived, ..) = pending.remove(i);
                done(class, arrived, got);
            }
        }
    }
}

fn run(load: u64, partitioned: bool) -> [Class; 3] {
    let clock = ManualClock::new();
    let front = Front::new(&clock, partitioned);
    let mut pending = Vec::new();
    // (class, arrival ms, end ms, slot)
    let mut running: Vec<(usize, u64, u64, Held<'_>)> = Vec::new();
    let mut latencies: [Vec<u64>; 3] = Default::default();
    let mut out = [Class::default(); 3];
    let per_s = rates(load);
    let mut credit = [0u64; 3];
    for now in 0..RUN_MS {
        running.retain(|(class, arrived, end, _)| {
            if *end <= now {
                latencies[*class].push(end - arrived);
                false
            } else {
                true
            }
        });
        poll_woken(&mut pending, |class, arrived, got| match got {
            Some(slot) => running.push((class, arrived, now + SERVICE_MS, slot)),
            None => out[class].refused += 1,
        });
        // Arrivals, the classes interleaved ms by ms.
        for class in 0..3 {
            credit[class] += per_s[class];
            while credit[class] >= 1_000 {
                credit[class] -= 1_000;
                out[class].offered += 1;
                match front.arrive(class, now, &mut pending) {
                    Some(Some(slot)) => running.push((class, now, now + SERVICE_MS, slot)),
                    Some(None) => out[class].refused += 1,
                    None => {}
                }
            }
        }
        assert!(running.len() <= C);
        clock.advance(Duration::from_millis(1));
    }
    for class in 0..3 {
        let l = &mut latencies[class];
        l.sort_unstable();
        out[class].completed = l.len();
        out[class].p99_ms = l.get(l.len() * 99 / 100).copied().unwrap_or(0);
    }
    drop(pending);
    drop(running);
    out
}

#[test]
fn partitions_keep_the_critical_class_served_at_every_overload() {
    let secs = (RUN_MS / 1_000) as usize;
    println!("| load | bulkhead | class | offered/s | goodput/s | kept | refused | p99 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    for load in 2..=5 {
        let fixed = run(load, false);
        let parts = run(load, true);
        for (name, r) in [("fixed", &fixed), ("partitioned", &parts)] {
            for (class, c) in r.iter().enumerate() {
                println!(
                    "| {load}× | {name} | {} | {} | {} | {:.0} % | {} | {} |",
                    CLASSES[class],
                    c.offered / secs,
                    c.completed / secs,
                    100.0 * c.completed as f64 / c.offered as f64,
                    c.refused,
                    c.p99_ms
                );
            }
        }
        let kept = |c: &Class| c.completed as f64 / c.offered as f64;
        // Calls still running or waiting at the end are neither kept nor
        // refused: at most the capacity and 50 ms of arrivals.
        assert!(kept(&parts[0]) >= 0.95, "{load}×: {parts:?}");
        assert!(
            parts[0].p99_ms <= MAX_WAIT_MS + SERVICE_MS,
            "{load}×: {parts:?}"
        );
        if load >= 3 {
            assert!(kept(&fixed[0]) < 0.5, "{load}×: {fixed:?}");
        }
        for r in [&fixed, &parts] {
            let goodput: usize = r.iter().map(|c| c.completed).sum::<usize>() / secs;
            assert!(
                goodput * 100 >= C * 1_000 / SERVICE_MS as usize * 95,
                "{load}×: {r:?}"
            );
        }
    }
}

/// The backend's workers: all 10, then 7 from 1 s on.
fn workers(now_ms: u64) -> usize {
    if now_ms < DEGRADED_FROM_MS {
        C
    } else {
        7
    }
}

const DEGRADED_FROM_MS: u64 = 1_000;
/// The caller's timeout on a call that hangs at the backend.
const CALL_TIMEOUT_MS: u64 = 20;
/// The limit has settled by then: what is asserted counts from here.
const SETTLED_MS: u64 = 1_500;
/// Calls per second of each class, 2× the healthy capacity.
const ADAPTIVE_RATES: [u64; 3] = [CRITICAL_PER_S, 600, 1_000];

#[derive(Debug, Default, Clone, Copy)]
struct Settled {
    /// Per class, calls arrived from `SETTLED_MS` on.
    classes: [Class; 3],
    /// Per class, calls that timed out at the backend (every worker busy).
    timed_out: [usize; 3],
    /// The limit's lowest and highest.
    limit: (usize, usize),
    /// Per class, its room's lowest and highest capacity (partitioned).
    rooms: [(usize, usize); 3],
    /// Per class, when its room first fell below its configured share.
    first_below: [Option<u64>; 3],
}

fn run_adaptive(partitioned: bool) -> Settled {
    let clock = ManualClock::new();
    let front = Front::new(&clock, partitioned);
    let (plain, parts) = (&front.plain, &front.parts);
    let aimd = Aimd::builder()
        .initial_limit(C)
        .min_limit(3)
        .max_limit(2 * C)
        .build()
        .unwrap();
    let limit = AdaptiveLimit::with_window(aimd, Duration::from_millis(100), 10, clock.now());
    // Called with the call's slot back.
    let record = |started: Instant, signal: Signal| {
        if partitioned {
            limit.record(parts, started, signal);
        } else {
            limit.record(plain, started, signal);
        }
    };
    let mut pending = Vec::new();
    // (class, arrival ms, started, end ms, slot, served): calls at the
    // backend, served by a worker or hanging until their timeout.
    let mut running: Vec<(usize, u64, Instant, u64, Held<'_>, bool)> = Vec::new();
    // Slots granted this millisecond: (class, arrival ms, slot).
    let mut granted: Vec<(usize, u64, Held<'_>)> = Vec::new();
    let mut out = Settled {
        limit: (usize::MAX, 0),
        rooms: [(usize::MAX, 0); 3],
        ..Settled::default()
    };
    let counts = |arrived: u64| arrived >= SETTLED_MS;
    let mut credit = [0u64; 3];
    for now in 0..RUN_MS {
        let mut i = 0;
        while i < running.len() {
            if running[i].3 > now {
                i += 1;
                continue;
            }
            let (class, arrived, started, _, slot, served) = running.remove(i);
            drop(slot);
            if served {
                record(started, Signal::Success);
                if counts(arrived) {
                    out.classes[class].completed += 1;
                }
            } else {
                record(started, Signal::Timeout);
                if counts(arrived) {
                    out.timed_out[class] += 1;
                }
            }
        }
        poll_woken(&mut pending, |class, arrived, got| match got {
            Some(slot) => granted.push((class, arrived, slot)),
            None if counts(arrived) => out.classes[class].refused += 1,
            None => {}
        });
        // The classes arrive in turn first, so that none is always the
        // one admitted into a slot beyond the backend's workers.
        for turn in 0..3 {
            let class = (turn + now as usize) % 3;
            credit[class] += ADAPTIVE_RATES[class];
            while credit[class] >= 1_000 {
                credit[class] -= 1_000;
                if counts(now) {
                    out.classes[class].offered += 1;
                }
                match front.arrive(class, now, &mut pending) {
                    Some(Some(slot)) => granted.push((class, now, slot)),
                    Some(None) if counts(now) => out.classes[class].refused += 1,
                    Some(None) | None => {}
                }
            }
        }
        // The backend serves what it has workers for; the rest hang.
        for (class, arrived, slot) in granted.drain(..) {
            let started = clock.now();
            let busy = running.iter().filter(|r| r.5).count();
            if busy < workers(now) {
                running.push((class, arrived, started, now + SERVICE_MS, slot, true));
            } else {
                running.push((class, arrived, started, now + CALL_TIMEOUT_MS, slot, false));
            }
        }
        for (class, first) in out.first_below.iter_mut().enumerate() {
            if first.is_none() && parts.capacity_of(class) < parts.share(class) {
                *first = Some(now);
            }
        }
        if counts(now) {
            let cap = if partitioned {
                parts.capacity()
            } else {
                plain.capacity()
            };
            out.limit = (out.limit.0.min(cap), out.limit.1.max(cap));
            for (class, room) in out.rooms.iter_mut().enumerate() {
                let c = parts.capacity_of(class);
                *room = (room.0.min(c), room.1.max(c));
            }
        }
        clock.advance(Duration::from_millis(1));
    }
    drop(pending);
    drop(running);
    out
}

#[test]
fn as_the_adaptive_limit_falls_the_lowest_class_is_shed_first() {
    let secs = (RUN_MS - SETTLED_MS) as f64 / 1_000.0;
    println!("| bulkhead | class | offered/s | goodput/s | kept | refused | timed out | room |");
    println!("|---|---|---|---|---|---|---|---|");
    let fixed = run_adaptive(false);
    let parts = run_adaptive(true);
    for (name, r) in [("adaptive", &fixed), ("adaptive partitioned", &parts)] {
        for (class, c) in r.classes.iter().enumerate() {
            let room = if std::ptr::eq(r, &parts) {
                format!("{}–{}", r.rooms[class].0, r.rooms[class].1)
            } else {
                "–".to_string()
            };
            println!(
                "| {name} | {} | {:.0} | {:.0} | {:.0} % | {} | {} | {room} |",
                CLASSES[class],
                c.offered as f64 / secs,
                c.completed as f64 / secs,
                100.0 * c.completed as f64 / c.offered as f64,
                c.refused,
                r.timed_out[class],
            );
        }
        println!("| {name} | limit | {}–{} |", r.limit.0, r.limit.1);
    }
    let kept = |c: &Class| c.completed as f64 / c.offered as f64;
    for r in [&fixed, &parts] {
        // The limit tracks the 7 workers: it probes one above and backs off.
        assert!(r.limit.0 >= 6 && r.limit.1 <= 8, "{r:?}");
        // The backend stays busy: at least 95 % of its 7 workers' 700/s.
        let goodput: usize = r.classes.iter().map(|c| c.completed).sum();
        assert!(goodput as f64 / secs >= 0.95 * 700.0, "{r:?}");
    }
    // Partitioned: the slots lost were batch's, then default's; critical
    // keeps its 5 slots and its calls.
    // (Critical's may dip while the limit falls, at most once it is below
    // both others'.)
    match parts.first_below {
        [critical, Some(default), Some(batch)] => {
            assert!(batch <= default, "{parts:?}");
            assert!(critical.is_none_or(|c| c >= default), "{parts:?}");
        }
        _ => panic!("{parts:?}"),
    }
    assert_eq!(parts.rooms[0].0, 5, "{parts:?}");
    assert_eq!(parts.rooms[2], (1, 1), "{parts:?}");
    assert!(parts.rooms[1].1 <= 2, "{parts:?}");
    assert!(kept(&parts.classes[0]) >= 0.9, "{parts:?}");
    // One FIFO queue: critical is refused like everyone else.
    assert!(kept(&fixed.classes[0]) < 0.5, "{fixed:?}");
}
