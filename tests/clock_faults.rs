//! A clock that breaks the `Clock` contract: its reading jumps backwards,
//! and to the end of time. `ManualClock` cannot do that (`set` to an
//! earlier instant is ignored), so this file has a clock of its own.
//!
//! What the crate does, asserted here: nothing panics or overflows; an
//! open breaker whose clock runs back reads its wait as over (its start is
//! kept relative to `now`) and admits its half-open probes, no more, then
//! goes on as usual; a call whose clock ran back is not slow; a budget's
//! `remaining` is what the clock says is left, never negative; and no
//! permit is lost on the way.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use watertight::breaker::State;
use watertight::clock::{Clock, Instant};
use watertight::deadline::Deadline;
use watertight::{BreakerConfig, Bulkhead, CircuitBreaker, Rejection};

/// A clock read from a number the test sets to anything.
#[derive(Debug, Default)]
struct Unruly(AtomicU64);

impl Unruly {
    fn at(secs: u64) -> Self {
        Unruly(AtomicU64::new(secs * 1_000_000_000))
    }

    fn set_secs(&self, secs: u64) {
        self.0.store(secs * 1_000_000_000, SeqCst);
    }

    fn set_nanos(&self, ns: u64) {
        self.0.store(ns, SeqCst);
    }
}

impl Clock for Unruly {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.0.load(SeqCst))
    }
}

fn config() -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(2)
        .minimum_calls(2)
        .open_duration(Duration::from_secs(30))
        .slow_call_duration(Duration::from_secs(1))
        .half_open_calls(1)
        .build()
        .unwrap()
}

/// The open wait's start is kept as the low bits of a tick count and read
/// back relative to `now` (it cannot lie after `now` on a monotonic
/// clock), so a clock that runs back reads as one that ran far ahead: the
/// wait is over. The breaker then does what it does at the end of any open
/// wait, no more: it admits its `half_open_calls` probes and refuses the
/// rest, and a failed probe reopens it for a full wait from the new now.
#[test]
fn an_open_breaker_whose_clock_runs_back_admits_only_its_probes() {
    let clock = Unruly::at(100);
    let b: CircuitBreaker<_, 2> = CircuitBreaker::new("backwards", config(), &clock);
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);

    clock.set_secs(60);
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(
        b.try_acquire().map(|p| p.is_probe()),
        Err(Rejection::ProbesBusy)
    );
    probe.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.try_acquire().map(|p| p.is_probe()),
        Err(Rejection::Open {
            retry_after: Duration::from_secs(30)
        })
    );
    clock.set_secs(90);
    assert!(b.try_acquire().unwrap().is_probe());
    let m = b.metrics();
    assert_eq!((m.rejected, m.stale), (2, 0));
}

#[test]
fn a_call_whose_clock_ran_back_is_not_slow() {
    let clock = Unruly::at(100);
    let b: CircuitBreaker<_, 2> = CircuitBreaker::new("backwards", config(), &clock);
    let p = b.try_acquire().unwrap();
    clock.set_secs(10);
    p.success();
    let m = b.metrics();
    assert_eq!((m.calls, m.slow_calls, m.failed_calls), (1, 0, 0));
}

#[test]
fn the_end_of_time_overflows_nothing() {
    let clock = Unruly::at(0);
    let b: CircuitBreaker<_, 2> = CircuitBreaker::new("end", config(), &clock);
    b.try_acquire().unwrap().failure();
    clock.set_nanos(u64::MAX);
    b.try_acquire().unwrap().failure();
    // Opened at the last instant: the end of its wait saturates at the
    // last instant too, which is now, so the wait is over at once and one
    // probe passes (time cannot go on to end it otherwise).
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.try_acquire().map(|_| ()), Err(Rejection::ProbesBusy));
    // Back to the start with the probe out: nothing panics, and still only
    // the one probe is out.
    clock.set_nanos(0);
    assert_eq!(b.try_acquire().map(|_| ()), Err(Rejection::ProbesBusy));
    probe.success();
    assert_eq!(b.state(), State::Closed);

    let d = Deadline::after(&clock, Duration::MAX);
    assert_eq!(d.instant(), Instant::MAX);
    clock.set_nanos(u64::MAX);
    assert!(d.is_expired());
    assert_eq!(d.remaining(), Duration::ZERO);
}

#[test]
fn a_budget_whose_clock_runs_back_has_what_the_clock_says_is_left() {
    let clock = Unruly::at(100);
    let d = Deadline::after(&clock, Duration::from_secs(2));
    clock.set_secs(103);
    assert!(d.is_expired());
    assert_eq!(d.remaining(), Duration::ZERO);
    clock.set_secs(99);
    assert!(!d.is_expired());
    assert_eq!(d.remaining(), Duration::from_secs(3));
    let child = d.child(Duration::from_secs(1));
    assert_eq!(child.remaining(), Duration::from_secs(1));
}

#[test]
fn permits_taken_and_given_back_across_a_jump_back_are_all_there() {
    let clock = Unruly::at(100);
    let bh = Bulkhead::new("backwards", 2, &clock);
    let a = bh.try_acquire().unwrap();
    clock.set_secs(1);
    let b = bh.try_acquire().unwrap();
    assert!(bh.try_acquire().is_err());
    clock.set_nanos(u64::MAX);
    drop((a, b));
    let m = bh.metrics();
    assert_eq!(
        (m.available, m.in_flight, m.accepted, m.rejected_full),
        (2, 0, 2, 1)
    );
}
