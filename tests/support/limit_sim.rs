//! A deterministic simulation of a bulkhead in front of a downstream whose
//! capacity changes, on `ManualClock`: shared by `tests/limit_sim.rs`
//! (which asserts the targets) and `benches/limit.rs` (which prints the
//! table).
//!
//! The downstream has `c` workers: a call is served at once while fewer
//! than `c` are busy, queues (first come, first served) behind them
//! otherwise, and is refused at once (a fast failure, [`Signal::Dropped`])
//! when `QUEUE_BOUND` calls already wait. Service times are uniform in
//! `[10, 30]` ms. Calls arrive open-loop (a Poisson process of
//! `ARRIVALS_PER_SEC`, the same sequence for every limiter), each through
//! the limiter under test: refused at once when it is full, else sent. Three
//! phases of `PHASE_SECS` each: `c = 40`, then 10, then 40 again.
//!
//! Every simulated second is one window of the adaptive bulkheads (their
//! default), and the simulation keeps, per second, the successes and their
//! latencies. A limiter has *converged* in a phase from the first second
//! after which every second reaches 90 % of the best fixed limit's goodput
//! in that phase and a p99 within 1.5 × its p99 (measured over the phase's
//! second half); what the table reports "after convergence" is measured
//! from that second to the end of the phase.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use watertight::clock::ManualClock;
use watertight::limit::{
    AdaptiveBulkhead, AdaptivePermit, Aimd, Gradient2, LimitAlgorithm, Signal,
};
use watertight::{Bulkhead, Permit};

pub const ARRIVALS_PER_SEC: f64 = 1_500.0;
pub const PHASE_SECS: u64 = 60;
pub const WORKERS: [usize; 3] = [40, 10, 40];
pub const QUEUE_BOUND: usize = 20;
pub const SERVICE_MS: (u64, u64) = (10, 30);
pub const FIXED: [usize; 3] = [8, 32, 200];
const SEED: u64 = 0x5eed_a11c_e5ca_1ab1;
const SEC: u64 = 1_000_000_000;

/// A small, fixed generator (xorshift64*): the same numbers on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `(0, 1]`.
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// One call: when it arrived and how long the downstream takes to serve it.
#[derive(Clone, Copy)]
struct Call {
    at: u64,
    service: u64,
}

fn arrivals() -> Vec<Call> {
    let mut rng = Rng(SEED);
    let end = PHASE_SECS * 3 * SEC;
    let mut t = 0u64;
    let mut calls = Vec::new();
    loop {
        t += (-rng.unit().ln() / ARRIVALS_PER_SEC * SEC as f64) as u64;
        if t >= end {
            return calls;
        }
        let (lo, hi) = SERVICE_MS;
        let service = (lo * 1_000_000) + rng.next() % ((hi - lo) * 1_000_000 + 1);
        calls.push(Call { at: t, service });
    }
}

/// What the simulation needs of a limiter: take a slot, give it back with a
/// verdict, read the limit.
pub trait Gate {
    type Slot<'a>
    where
        Self: 'a;
    fn take(&self) -> Option<Self::Slot<'_>>;
    fn finish(slot: Self::Slot<'_>, signal: Signal);
    fn limit(&self) -> usize;
}

impl<'c> Gate for Bulkhead<&'c ManualClock> {
    type Slot<'a>
        = Permit<'a, &'c ManualClock>
    where
        Self: 'a;
    fn take(&self) -> Option<Self::Slot<'_>> {
        self.try_acquire().ok()
    }
    fn finish(slot: Self::Slot<'_>, _: Signal) {
        drop(slot);
    }
    fn limit(&self) -> usize {
        self.capacity()
    }
}

impl<'c, A: LimitAlgorithm> Gate for AdaptiveBulkhead<&'c ManualClock, A> {
    type Slot<'a>
        = AdaptivePermit<'a, &'c ManualClock, A>
    where
        Self: 'a;
    fn take(&self) -> Option<Self::Slot<'_>> {
        self.try_acquire().ok()
    }
    fn finish(slot: Self::Slot<'_>, signal: Signal) {
        slot.record(signal);
    }
    fn limit(&self) -> usize {
        AdaptiveBulkhead::limit(self)
    }
}

/// One simulated second.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub arrivals: usize,
    pub successes: usize,
    pub rejected: usize,
    pub dropped: usize,
    /// Latencies of the successes completed in this second, in ns.
    pub latencies: Vec<u64>,
    /// The limit at the end of the second.
    pub limit: usize,
}

/// A run: one limiter through the three phases.
#[derive(Clone, Debug)]
pub struct Run {
    pub name: String,
    pub seconds: Vec<Second>,
}

impl Run {
    pub fn phase(&self, p: usize) -> &[Second] {
        let n = PHASE_SECS as usize;
        &self.seconds[p * n..(p + 1) * n]
    }
}

enum Event {
    Arrival(usize),
    Done(usize),
}

/// Runs the three phases through `gate` on `clock`.
pub fn simulate<G: Gate>(name: &str, gate: &G, clock: &ManualClock) -> Run {
    let calls = arrivals();
    let total_secs = (PHASE_SECS * 3) as usize;
    let mut seconds = vec![Second::default(); total_secs];
    let mut slots: Vec<Option<G::Slot<'_>>> = Vec::with_capacity(calls.len());
    slots.resize_with(calls.len(), || None);
    // (time, sequence, event): the sequence keeps equal times in order.
    let mut events: BinaryHeap<Reverse<(u64, u64, usize, bool)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at: u64, ev: Event| {
        seq += 1;
        let (id, done) = match ev {
            Event::Arrival(id) => (id, false),
            Event::Done(id) => (id, true),
        };
        events.push(Reverse((at, seq, id, done)));
    };
    for (id, c) in calls.iter().enumerate() {
        push(&mut events, c.at, Event::Arrival(id));
    }
    let mut now = 0u64;
    let mut busy = 0usize;
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut second = 0usize;
    while let Some(Reverse((at, _, id, done))) = events.pop() {
        while at >= (second as u64 + 1) * SEC && second < total_secs {
            seconds[second].limit = gate.limit();
            second += 1;
        }
        if second >= total_secs {
            break;
        }
        clock.advance(Duration::from_nanos(at - now));
        now = at;
        let workers = WORKERS[(now / (PHASE_SECS * SEC)) as usize];
        let s = &mut seconds[second];
        if !done {
            s.arrivals += 1;
            let Some(slot) = gate.take() else {
                s.rejected += 1;
                continue;
            };
            if busy < workers {
                busy += 1;
                slots[id] = Some(slot);
                push(&mut events, now + calls[id].service, Event::Done(id));
            } else if queue.len() < QUEUE_BOUND {
                slots[id] = Some(slot);
                queue.push_back(id);
            } else {
                s.dropped += 1;
                G::finish(slot, Signal::Dropped);
            }
        } else {
            busy -= 1;
            s.successes += 1;
            s.latencies.push(now - calls[id].at);
            if let Some(slot) = slots[id].take() {
                G::finish(slot, Signal::Success);
            }
            while busy < workers {
                let Some(next) = queue.pop_front() else { break };
                busy += 1;
                push(&mut events, now + calls[next].service, Event::Done(next));
            }
        }
    }
    while second < total_secs {
        seconds[second].limit = gate.limit();
        second += 1;
    }
    drop(slots);
    Run {
        name: name.to_string(),
        seconds,
    }
}

/// The adaptive algorithms as the simulation runs them: the sources'
/// defaults, but for a minimum limit of 1 (the defaults' 20 is above the
/// second phase's 10 workers).
pub fn aimd() -> Aimd {
    Aimd::builder().min_limit(1).build().unwrap()
}

pub fn gradient2() -> Gradient2 {
    Gradient2::builder().min_limit(1).build().unwrap()
}

/// Every run of the table: the fixed limits, then AIMD and Gradient2.
pub fn all_runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for n in FIXED {
        let clock = ManualClock::new();
        let b = Bulkhead::new("sim", n, &clock);
        runs.push(simulate(&format!("fixed {n}"), &b, &clock));
    }
    let clock = ManualClock::new();
    let b = AdaptiveBulkhead::new("sim", aimd(), &clock);
    runs.push(simulate("AIMD", &b, &clock));
    let clock = ManualClock::new();
    let b = AdaptiveBulkhead::new("sim", gradient2(), &clock);
    runs.push(simulate("Gradient2", &b, &clock));
    runs
}

/// `p` (0..=100) percentile of `v`, in ms.
pub fn percentile_ms(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i] as f64 / 1e6
}

/// A phase's figures over `seconds[from..]`.
#[derive(Clone, Debug)]
pub struct Figures {
    pub goodput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub rejected: usize,
    pub dropped: usize,
    pub min_limit: usize,
    pub max_limit: usize,
}

pub fn figures(seconds: &[Second]) -> Figures {
    let mut lat: Vec<u64> = seconds
        .iter()
        .flat_map(|s| s.latencies.iter().copied())
        .collect();
    let successes: usize = seconds.iter().map(|s| s.successes).sum();
    Figures {
        goodput: successes as f64 / seconds.len().max(1) as f64,
        p50_ms: percentile_ms(&mut lat, 50.0),
        p99_ms: percentile_ms(&mut lat, 99.0),
        rejected: seconds.iter().map(|s| s.rejected).sum(),
        dropped: seconds.iter().map(|s| s.dropped).sum(),
        min_limit: seconds.iter().map(|s| s.limit).min().unwrap_or(0),
        max_limit: seconds.iter().map(|s| s.limit).max().unwrap_or(0),
    }
}

/// The best fixed limit of a phase: the highest goodput over the phase's
/// second half, the lower p99 between two within 1 % of each other.
pub fn best_fixed(runs: &[Run], phase: usize) -> (&Run, Figures) {
    let half = PHASE_SECS as usize / 2;
    let mut best: Option<(&Run, Figures)> = None;
    for r in runs.iter().filter(|r| r.name.starts_with("fixed")) {
        let f = figures(&r.phase(phase)[half..]);
        best = match best {
            None => Some((r, f)),
            Some((br, bf)) => {
                let better = f.goodput > bf.goodput * 1.01
                    || (f.goodput >= bf.goodput * 0.99 && f.p99_ms < bf.p99_ms);
                if better {
                    Some((r, f))
                } else {
                    Some((br, bf))
                }
            }
        };
    }
    best.expect("fixed runs")
}

/// The first second of the phase from which every second reaches 90 % of
/// `best`'s goodput with a p99 within 1.5 × its p99 (`None`: never).
pub fn converged_at(seconds: &[Second], best: &Figures) -> Option<usize> {
    let ok = |s: &Second| {
        let mut l = s.latencies.clone();
        s.successes as f64 >= 0.9 * best.goodput && percentile_ms(&mut l, 99.0) <= 1.5 * best.p99_ms
    };
    let mut at = None;
    for (i, s) in seconds.iter().enumerate().rev() {
        if ok(s) {
            at = Some(i);
        } else {
            break;
        }
    }
    at
}

/// The first second from which the limit stays within ±20 % of its mean
/// over the phase's last 5 seconds.
pub fn settled_at(seconds: &[Second]) -> usize {
    let tail = &seconds[seconds.len() - 5..];
    let end = tail.iter().map(|s| s.limit).sum::<usize>() as f64 / 5.0;
    let within = |s: &Second| (s.limit as f64 - end).abs() <= 0.2 * end;
    let mut at = seconds.len();
    for (i, s) in seconds.iter().enumerate().rev() {
        if within(s) {
            at = i;
        } else {
            break;
        }
    }
    at
}

/// Calls that arrived in the phase before second `k`.
pub fn calls_before(seconds: &[Second], k: usize) -> usize {
    seconds[..k].iter().map(|s| s.arrivals).sum()
}

/// The table `benches/limit.rs` prints and the guide shows (`guide::benchmarks`): per phase and
/// limiter, goodput, p50 and p99 after convergence (fixed limits: over the
/// phase's second half), refusals by the limiter and drops by the
/// downstream over the whole phase, the limit's range after convergence,
/// and the seconds (windows) and calls to convergence.
pub fn table(runs: &[Run]) -> String {
    use std::fmt::Write;
    let half = PHASE_SECS as usize / 2;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nThe limit at the end of every 5th window (workers: {} | {} | {}):",
        WORKERS[0], WORKERS[1], WORKERS[2]
    );
    for r in runs.iter().filter(|r| !r.name.starts_with("fixed")) {
        let phases: Vec<String> = (0..3)
            .map(|p| {
                r.phase(p)
                    .iter()
                    .skip(4)
                    .step_by(5)
                    .map(|s| s.limit.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let _ = writeln!(out, "    {:<9} {}", r.name, phases.join(" | "));
    }
    for (phase, workers) in WORKERS.iter().enumerate() {
        let (best, bf) = best_fixed(runs, phase);
        let _ = writeln!(
            out,
            "\nphase {} (c = {}, {} s, {} calls/s offered): best fixed = {}",
            phase + 1,
            workers,
            PHASE_SECS,
            ARRIVALS_PER_SEC,
            best.name
        );
        let _ = writeln!(
            out,
            "| limiter | goodput/s | vs best | p50 ms | p99 ms | refused | dropped | limit | limit at end | windows to converge | calls to converge | windows to settle |"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
        );
        for r in runs {
            let secs = r.phase(phase);
            let whole = figures(secs);
            let (from, conv) = if r.name.starts_with("fixed") {
                (half, String::from("–"))
            } else {
                match converged_at(secs, &bf) {
                    Some(k) => (k, k.to_string()),
                    None => (half, String::from("never")),
                }
            };
            let calls = if conv == "–" || conv == "never" {
                conv.clone()
            } else {
                calls_before(secs, from).to_string()
            };
            let f = figures(&secs[from..]);
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.0} % | {:.1} | {:.1} | {} | {} | {}–{} | {} | {} | {} | {} |",
                r.name,
                f.goodput,
                100.0 * f.goodput / bf.goodput,
                f.p50_ms,
                f.p99_ms,
                whole.rejected,
                whole.dropped,
                f.min_limit,
                f.max_limit,
                secs[secs.len() - 1].limit,
                conv,
                calls,
                if r.name.starts_with("fixed") {
                    String::from("–")
                } else {
                    settled_at(secs).to_string()
                }
            );
        }
    }
    out
}
