//! The hand-off, measured so that runs agree: a queued `acquire` woken by a
//! release on another thread, ours beside tokio's, async-lock's and
//! maitake-sync's semaphores and the floor, in paired rounds.
//!
//! The cell (every peer with owned permits, one permit in all): the
//! releaser holds the one permit; each hand-off the waiter polls a fresh
//! `acquire` once (it queues), says so and spins on its waker's flag; the
//! releaser, on the other core, drops the permit; the waiter polls again,
//! takes the permit and gives it back, and the releaser takes it again with
//! `try_acquire`. The floor does the same with no permits at all (a waker
//! left under a lock and taken out and woken by the releaser): what remains
//! above it is the peer's own hand-off.
//!
//! On a shared 2-core virtual machine a criterion run of this cell (it was
//! `benches/bulkhead.rs`'s `handoff/2-threads/P=1` group) moved by ±50 ns
//! from run to run, as much as the gaps it was meant to show
//! (criterion's figure is a mean over thousands of hand-offs, and one
//! preemption among them moves it). Here:
//!
//! - the two threads are pinned, the waiter (the main thread) to CPU 0 and
//!   the releaser to CPU 1 (`sched_setaffinity`, Linux), so that neither
//!   migrates and the cache-line transfers measured are always between the
//!   same two cores;
//! - each step of each hand-off is timed on the thread that runs it (the
//!   time-stamp counter on x86_64), and a measurement is the median over
//!   its hand-offs, which a preemption or an interrupt does not move;
//! - every round runs every peer once, back to back, in an order rotated
//!   from round to round, so that a slow spell of the machine lands on all
//!   the peers of a round; each round's figures are taken relative to the
//!   same round's floor and the same round's watertight, and the table gives
//!   the median over rounds of each per-round figure, with its quartiles.
//!
//! The columns: `latency`, the hand-off as the waiter sees it, from its
//! first poll to the end of the drop of the permit it was handed (it
//! includes one handshake each way); `above the floor`, that less the
//! floor's in the same round; `above, / watertight`, the peer's figure
//! over ours, round by round; `- watertight`, the peer's latency less ours
//! in the same round (the steadiest of the comparisons: two peers doing the
//! same work, back to back); `enqueue`, the waiter's first poll (it
//! queues); `release+wake`, the releaser's drop of its permit (the hand-off
//! and the wake); `woken poll`, the waiter's second poll (it finds the
//! permit); `drop`, the waiter's drop of that permit; `retake`, the
//! releaser's `try_acquire` taking it back (outside the latency).
//!
//! Run:
//!
//! ```sh
//! cargo bench --bench handoff
//! ```
//!
//! (under half a minute: 101 rounds of 5 000 hand-offs per peer, after one
//! round of warm-up; short rounds, so that a round's peers see the machine
//! in the same state.) The tables and what they show are in
//! `watertight::guide::benchmarks` (the hand-off). `HANDOFF_ROUNDS` and
//! `HANDOFF_ITERS` change both; `HANDOFF_PEERS=watertight,maitake-sync`
//! measures only those (the floor always runs); `HANDOFF_NO_PIN=1` leaves
//! the threads unpinned. Under `cargo test` it runs a few short rounds, to
//! check that it works.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use watertight::clock::StdClock;
use watertight::Bulkhead;

/// Pins the calling thread to `cpu` (a no-op where that is not available,
/// or when the machine has fewer CPUs).
fn pin(cpu: usize) {
    if std::env::var_os("HANDOFF_NO_PIN").is_some() {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set; the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        // Fails harmlessly (and is then ignored) if `cpu` is not ours.
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// Spins until `done`, yielding the core after a while so that a loaded
/// machine does not turn a handshake into a time slice.
#[inline]
fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins += 1;
        if spins < 10_000 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A waker that sets a flag, for the spinning waiter.
struct Flag(AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// A timestamp in ticks: the time-stamp counter on x86_64 (constant-rate on
/// every x86_64 a server runs on; fenced so that it is not reordered with
/// the code it brackets), nanoseconds from a fixed instant elsewhere.
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` and `rdtsc` exist on every x86_64.
    unsafe {
        use std::arch::x86_64::{_mm_lfence, _rdtsc};
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick, measured once against `Instant` over 50 ms.
fn ns_per_tick() -> f64 {
    let (t0, i0) = (ticks(), Instant::now());
    std::thread::sleep(Duration::from_millis(50));
    let (t1, i1) = (ticks(), Instant::now());
    (i1 - i0).as_nanos() as f64 / (t1 - t0) as f64
}

/// One measurement of a peer: the median over its hand-offs of each step,
/// in ticks.
#[derive(Clone, Copy, Default)]
struct Sample {
    /// The hand-off as the waiter sees it: from its first poll to the end of
    /// the drop of the permit it was handed (its enqueue, the handshake, the
    /// releaser's release and wake, the flag seen, its second poll and its
    /// own release).
    latency: f64,
    /// The waiter's first poll (it queues), the future's creation included.
    enqueue: f64,
    /// The releaser's drop of its permit: the hand-off itself and the wake.
    release: f64,
    /// The waiter's second poll (it finds the permit).
    finish: f64,
    /// The waiter's drop of that permit (the queue is empty by then).
    drop: f64,
    /// The releaser's `try_acquire` that takes the permit back.
    retake: f64,
}

fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// `n` hand-offs between two pinned threads; the median of each step.
/// Medians, not means: a preemption or an interrupt during one hand-off of
/// thousands moves a mean by as much as the differences measured here.
fn run<S, P, Fut>(
    sem: Arc<S>,
    n: u64,
    acquire: fn(&Arc<S>) -> Fut,
    try_acquire: fn(&Arc<S>) -> Option<P>,
) -> Sample
where
    S: Send + Sync + 'static,
    P: Send + 'static,
    Fut: Future,
{
    let queued = Arc::new(AtomicU64::new(0));
    let returned = Arc::new(AtomicU64::new(0));
    let retaken = Arc::new(AtomicU64::new(0));
    let start = Arc::new(std::sync::Barrier::new(2));
    let held = try_acquire(&sem).expect("the one permit");
    let releaser = {
        let (sem, queued, returned, retaken, start) = (
            Arc::clone(&sem),
            Arc::clone(&queued),
            Arc::clone(&returned),
            Arc::clone(&retaken),
            Arc::clone(&start),
        );
        std::thread::spawn(move || {
            pin(1);
            let mut release = Vec::with_capacity(n as usize);
            let mut retake = Vec::with_capacity(n as usize);
            let mut held = Some(held);
            start.wait();
            for i in 1..=n {
                spin_until(|| queued.load(Ordering::Acquire) == i);
                let t0 = ticks();
                drop(held.take()); // the hand-off
                release.push(ticks() - t0);
                spin_until(|| returned.load(Ordering::Acquire) == i);
                let t0 = ticks();
                held = try_acquire(&sem);
                retake.push(ticks() - t0);
                assert!(held.is_some(), "the permit came back");
                retaken.store(i, Ordering::Release);
            }
            (median(&mut release), median(&mut retake))
        })
    };
    // The waiter is the calling thread, pinned to CPU 0 by `main`.
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&flag));
    let mut cx = Context::from_waker(&waker);
    let mut latency = Vec::with_capacity(n as usize);
    let mut enqueue = Vec::with_capacity(n as usize);
    let mut finish = Vec::with_capacity(n as usize);
    let mut dropped = Vec::with_capacity(n as usize);
    start.wait();
    for i in 1..=n {
        spin_until(|| retaken.load(Ordering::Acquire) == i - 1);
        flag.0.store(false, Ordering::Relaxed);
        let t0 = ticks();
        let mut fut = std::pin::pin!(acquire(&sem));
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "the permit is held"
        );
        let t1 = ticks();
        queued.store(i, Ordering::Release);
        spin_until(|| flag.0.load(Ordering::Acquire));
        let t2 = ticks();
        let Poll::Ready(permit) = fut.as_mut().poll(&mut cx) else {
            panic!("woken without the permit");
        };
        let t3 = ticks();
        drop(permit);
        let t4 = ticks();
        returned.store(i, Ordering::Release);
        latency.push(t4 - t0);
        enqueue.push(t1 - t0);
        finish.push(t3 - t2);
        dropped.push(t4 - t3);
    }
    let (release, retake) = releaser.join().expect("releaser panicked");
    Sample {
        latency: median(&mut latency),
        enqueue: median(&mut enqueue),
        release,
        finish: median(&mut finish),
        drop: median(&mut dropped),
        retake,
    }
}

/// The floor: no permits, only what any hand-off needs — the waiter leaves
/// its waker under a lock, the releaser takes it out and wakes it. The same
/// two threads and handshakes as the peers.
#[derive(Default)]
struct FloorSlot {
    waker: std::sync::Mutex<Option<Waker>>,
    released: AtomicBool,
}

struct FloorPermit(Arc<FloorSlot>);

impl Drop for FloorPermit {
    fn drop(&mut self) {
        self.0.released.store(true, Ordering::Release);
        if let Some(w) = self.0.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

struct FloorAcquire(Arc<FloorSlot>);

impl Future for FloorAcquire {
    type Output = FloorPermit;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FloorPermit> {
        if self.0.released.swap(false, Ordering::Acquire) {
            return Poll::Ready(FloorPermit(Arc::clone(&self.0)));
        }
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// One peer: its name and one measurement of `n` hand-offs.
struct Peer {
    name: &'static str,
    measure: fn(u64) -> Sample,
}

const PEERS: [Peer; 5] = [
    Peer {
        name: "floor",
        measure: |n| {
            run(
                Arc::new(FloorSlot::default()),
                n,
                |s| FloorAcquire(Arc::clone(s)),
                // The releaser's "permit" is always there to take; the
                // waiter's drop of its own marks it released for nobody.
                |s| {
                    s.released.store(false, Ordering::Relaxed);
                    Some(FloorPermit(Arc::clone(s)))
                },
            )
        },
    },
    Peer {
        name: "watertight",
        measure: |n| {
            run(
                Arc::new(Bulkhead::new("bench", 1, StdClock)),
                n,
                |s| s.acquire_owned(),
                |s| s.try_acquire_owned().ok(),
            )
        },
    },
    Peer {
        name: "tokio",
        measure: |n| {
            run(
                Arc::new(tokio::sync::Semaphore::new(1)),
                n,
                |s| Arc::clone(s).acquire_owned(),
                |s| Arc::clone(s).try_acquire_owned().ok(),
            )
        },
    },
    Peer {
        name: "async-lock",
        measure: |n| {
            run(
                Arc::new(async_lock::Semaphore::new(1)),
                n,
                |s| s.acquire_arc(),
                |s| s.try_acquire_arc(),
            )
        },
    },
    Peer {
        name: "maitake-sync",
        measure: |n| {
            run(
                Arc::new(maitake_sync::Semaphore::new(1)),
                n,
                |s| s.acquire_owned(1),
                |s| s.try_acquire_owned(1).ok(),
            )
        },
    },
];

/// The median and the two quartiles of `v` (sorted in place).
fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let x = q * (v.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
    };
    (at(0.5), at(0.25), at(0.75))
}

/// "median [q1, q3]" of `v`, scaled by `k`, with `digits` decimals.
fn spread(mut v: Vec<f64>, k: f64, digits: usize) -> String {
    let (m, q1, q3) = quartiles(&mut v);
    format!("{:.d$} [{:.d$}, {:.d$}]", m * k, q1 * k, q3 * k, d = digits)
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` runs this as a test.
    let bench = std::env::args().any(|a| a == "--bench");
    pin(0);
    let (rounds, iters) = if bench {
        (env("HANDOFF_ROUNDS", 101), env("HANDOFF_ITERS", 5_000))
    } else {
        (3, 200)
    };
    let wanted = std::env::var("HANDOFF_PEERS").ok();
    let peers: Vec<&Peer> = PEERS
        .iter()
        .filter(|p| {
            p.name == "floor"
                || wanted
                    .as_deref()
                    .is_none_or(|w| w.split(',').any(|x| x == p.name))
        })
        .collect();
    let ours = peers.iter().position(|p| p.name == "watertight");
    let k = ns_per_tick();

    // Warm-up: one round, not counted.
    for p in &peers {
        (p.measure)(iters / 4 + 1);
    }
    // samples[peer][round]
    let mut samples = vec![Vec::with_capacity(rounds as usize); peers.len()];
    for r in 0..rounds as usize {
        for j in 0..peers.len() {
            let i = (j + r) % peers.len();
            samples[i].push((peers[i].measure)(iters));
        }
    }

    let floor = samples[0].clone();
    let field =
        |i: usize, f: fn(&Sample) -> f64| -> Vec<f64> { samples[i].iter().map(f).collect() };
    let minus_ours = |i: usize, o: usize| -> Vec<f64> {
        samples[i]
            .iter()
            .zip(&samples[o])
            .map(|(s, w)| s.latency - w.latency)
            .collect()
    };
    let above = |i: usize| -> Vec<f64> {
        samples[i]
            .iter()
            .zip(&floor)
            .map(|(s, f)| s.latency - f.latency)
            .collect()
    };
    println!(
        "hand-off, 2 pinned threads: {rounds} rounds x {iters} hand-offs per peer, peers in \
         rotated order within each round; each figure the median over rounds of the \
         round's median [quartiles over rounds], ns"
    );
    println!(
        "{:<13} {:>19} {:>17} {:>21} {:>19} {:>17} {:>17} {:>17} {:>17} {:>17}",
        "peer",
        "latency",
        "above the floor",
        "above, / watertight",
        "- watertight",
        "enqueue",
        "release+wake",
        "woken poll",
        "drop",
        "retake"
    );
    for (i, p) in peers.iter().enumerate() {
        let diff = match ours {
            Some(o) if o != i => spread(minus_ours(i, o), k, 0),
            _ => "-".to_owned(),
        };
        let (above_s, ratio) = if i == 0 {
            ("-".to_owned(), "-".to_owned())
        } else {
            let ratio = match ours {
                Some(o) if o != i => {
                    let (a, w) = (above(i), above(o));
                    spread(a.iter().zip(&w).map(|(a, w)| a / w).collect(), 1.0, 2)
                }
                _ => "-".to_owned(),
            };
            (spread(above(i), k, 0), ratio)
        };
        println!(
            "{:<13} {:>19} {:>17} {:>21} {:>19} {:>17} {:>17} {:>17} {:>17} {:>17}",
            p.name,
            spread(field(i, |s| s.latency), k, 0),
            above_s,
            ratio,
            diff,
            spread(field(i, |s| s.enqueue), k, 0),
            spread(field(i, |s| s.release), k, 0),
            spread(field(i, |s| s.finish), k, 0),
            spread(field(i, |s| s.drop), k, 0),
            spread(field(i, |s| s.retake), k, 0),
        );
    }
}
