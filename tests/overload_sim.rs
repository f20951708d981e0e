#![cfg(not(loom))]
//! A bounded wait queue under overload, in a deterministic simulation on
//! `ManualClock`: a backend of `C = 4` workers, each call taking 10 ms (so
//! it serves 400 calls/s), offered 2×, 3×, 4× and 5× that as open-loop
//! arrivals for 5 s, behind a bulkhead of 4 slots with a long max wait
//! (1 s, a queue meant), once with no bound on waiters ("fixed") and once
//! with `max_waiters = C × 50 ms / 10 ms = 20` ("bounded"). Each call is a
//! real `acquire_timeout` future, polled by hand when woken.
//!
//! Asserted, at every load: both keep the backend busy (goodput within 5 %
//! of its capacity, and of each other); the bounded queue never holds more
//! than its bound and keeps the p99 latency of admitted calls within
//! 50 ms of wait plus the call itself, refusing the rest at once
//! (`QueueFull`, none timed out); without the bound the queue grows to
//! what arrives within the max wait and p99 goes to the max wait.
//!
//! `cargo test --test overload_sim -- --nocapture` prints the table.
//!
//! LIFO service (Netflix's LIFO blocking limiter) is not added: with a
//! bound the admitted calls' p99 is already the bound's wait, and with
//! goodput pinned at the backend's capacity LIFO could only reorder who of
//! the admitted waits longest, at the cost of FIFO's "who asked first is
//! served first".

mod common;

use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::Probe;
use watertight::clock::ManualClock;
use watertight::{AcquireError, Bulkhead, Permit};

const C: usize = 4;
const SERVICE_MS: u64 = 10;
const MAX_WAIT_MS: u64 = 1_000;
const TARGET_WAIT_MS: u64 = 50;
const BOUND: usize = C * (TARGET_WAIT_MS / SERVICE_MS) as usize;
const RUN_MS: u64 = 5_000;

type Wait<'a> = Pin<
    Box<dyn std::future::Future<Output = Result<Permit<'a, &'a ManualClock>, AcquireError>> + 'a>,
>;

#[derive(Debug, Default)]
struct Report {
    offered: usize,
    completed: usize,
    refused_queue_full: usize,
    timed_out: usize,
    p99_ms: u64,
    max_waiting: usize,
}

fn run(load: u64, max_waiters: Option<usize>) -> Report {
    let clock = ManualClock::new();
    let bh = Bulkhead::new("backend", C, &clock);
    let bh = match max_waiters {
        Some(n) => bh.with_max_waiters(n),
        None => bh,
    };
    let max_wait = Duration::from_millis(MAX_WAIT_MS);
    // (arrival ms, future, probe, wakes seen)
    let mut pending: Vec<(u64, Wait<'_>, Probe, usize)> = Vec::new();
    // (arrival ms, end ms, permit)
    let mut running: Vec<(u64, u64, Permit<'_, &ManualClock>)> = Vec::new();
    let mut latencies = Vec::new();
    let mut r = Report::default();
    // Arrivals per ms, in hundredths: load × C / SERVICE_MS calls per ms.
    let per_ms_x100 = load * C as u64 * 100 / SERVICE_MS;
    let mut credit = 0;
    for now in 0..RUN_MS {
        // Calls that end now give their slot back (a hand-off, if queued).
        running.retain(|(arrived, end, _)| {
            if *end <= now {
                latencies.push(end - arrived);
                false
            } else {
                true
            }
        });
        let start =
            |arrived: u64, p, running: &mut Vec<_>| running.push((arrived, now + SERVICE_MS, p));
        // Woken waiters run: handed a permit, timed out, or still waiting.
        let mut i = 0;
        while i < pending.len() {
            let (_, fut, probe, seen) = &mut pending[i];
            if probe.wakes() == *seen {
                i += 1;
                continue;
            }
            *seen = probe.wakes();
            match probe.poll(fut.as_mut()) {
                Poll::Pending => i += 1,
                Poll::Ready(res) => {
                    let (arrived, ..) = pending.remove(i);
                    match res {
                        Ok(p) => start(arrived, p, &mut running),
                        Err(AcquireError::TimedOut) => r.timed_out += 1,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            }
        }
        // New arrivals, polled once.
        credit += per_ms_x100;
        while credit >= 100 {
            credit -= 100;
            r.offered += 1;
            let mut fut: Wait<'_> = Box::pin(bh.acquire_timeout(max_wait));
            let probe = Probe::new();
            match probe.poll(fut.as_mut()) {
                Poll::Ready(Ok(p)) => start(now, p, &mut running),
                Poll::Ready(Err(AcquireError::QueueFull)) => r.refused_queue_full += 1,
                Poll::Ready(Err(e)) => panic!("unexpected {e:?}"),
                Poll::Pending => {
                    let seen = probe.wakes();
                    pending.push((now, fut, probe, seen));
                }
            }
        }
        r.max_waiting = r.max_waiting.max(bh.waiting());
        assert!(bh.in_flight() <= C);
        clock.advance(Duration::from_millis(1));
    }
    r.completed = latencies.len();
    latencies.sort_unstable();
    r.p99_ms = latencies[latencies.len() * 99 / 100];
    let m = bh.metrics();
    assert_eq!(m.rejected_queue_full, r.refused_queue_full);
    assert_eq!(m.rejected_timed_out, r.timed_out);
    drop(pending);
    drop(running);
    r
}

#[test]
fn a_bounded_queue_caps_latency_and_memory_under_overload() {
    let capacity_per_s = C * 1_000 / SERVICE_MS as usize;
    let secs = (RUN_MS / 1_000) as usize;
    println!("| load | config | goodput/s | p99 ms | refused at once | timed out | max waiting |");
    println!("|---|---|---|---|---|---|---|");
    for load in 2..=5 {
        let fixed = run(load, None);
        let bounded = run(load, Some(BOUND));
        for (name, r) in [("fixed", &fixed), ("bounded", &bounded)] {
            println!(
                "| {load}× | {name} | {} | {} | {} | {} | {} |",
                r.completed / secs,
                r.p99_ms,
                r.refused_queue_full,
                r.timed_out,
                r.max_waiting
            );
        }
        for r in [&fixed, &bounded] {
            let goodput = r.completed / secs;
            assert!(goodput * 100 >= capacity_per_s * 95, "{load}×: {r:?}");
        }
        // The bound: memory and latency capped, the excess refused at once.
        assert!(bounded.max_waiting <= BOUND, "{load}×: {bounded:?}");
        assert_eq!(bounded.max_waiting, BOUND, "{load}×: the bound is reached");
        assert!(
            bounded.p99_ms <= TARGET_WAIT_MS + SERVICE_MS,
            "{load}×: {bounded:?}"
        );
        assert_eq!(bounded.timed_out, 0, "{load}×: {bounded:?}");
        assert!(bounded.refused_queue_full > 0);
        // Without it: the queue holds what arrives within the max wait, and
        // the admitted wait about that long.
        assert_eq!(fixed.refused_queue_full, 0);
        assert!(fixed.timed_out > 0, "{load}×: {fixed:?}");
        assert!(fixed.max_waiting > 10 * BOUND, "{load}×: {fixed:?}");
        assert!(fixed.p99_ms >= MAX_WAIT_MS * 9 / 10, "{load}×: {fixed:?}");
    }
}
