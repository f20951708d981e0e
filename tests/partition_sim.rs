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
//! `cargo test --test partition_sim -- --nocapture` prints the table.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::Probe;
use watertight::clock::ManualClock;
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

fn run(load: u64, partitioned: bool) -> [Class; 3] {
    let clock = ManualClock::new();
    let plain = Bulkhead::new("backend", C, &clock);
    let parts = PartitionedBulkhead::from_percent(
        "backend",
        C,
        [(CLASSES[0], 50), (CLASSES[1], 30), (CLASSES[2], 20)],
        &clock,
    )
    .unwrap();
    let max_wait = Duration::from_millis(MAX_WAIT_MS);
    let ask = |class: usize| -> Wait<'_> {
        if partitioned {
            let f = parts.acquire_timeout(class, max_wait);
            Box::pin(async move { f.await.ok().map(Held::Class) })
        } else {
            let f = plain.acquire_timeout(max_wait);
            Box::pin(async move { f.await.ok().map(Held::Plain) })
        }
    };
    // (class, arrival ms, future, probe, wakes seen)
    let mut pending: Vec<(usize, u64, Wait<'_>, Probe, usize)> = Vec::new();
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
                    match got {
                        Some(slot) => running.push((class, arrived, now + SERVICE_MS, slot)),
                        None => out[class].refused += 1,
                    }
                }
            }
        }
        // Arrivals, the classes interleaved ms by ms.
        for class in 0..3 {
            credit[class] += per_s[class];
            while credit[class] >= 1_000 {
                credit[class] -= 1_000;
                out[class].offered += 1;
                let mut fut = ask(class);
                let probe = Probe::new();
                match probe.poll(fut.as_mut()) {
                    Poll::Ready(Some(slot)) => {
                        running.push((class, now, now + SERVICE_MS, slot));
                    }
                    Poll::Ready(None) => out[class].refused += 1,
                    Poll::Pending => {
                        let seen = probe.wakes();
                        pending.push((class, now, fut, probe, seen));
                    }
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
