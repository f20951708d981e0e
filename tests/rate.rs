#![cfg(not(loom))]
//! `RateLimiter` behaviour on `ManualClock` (and two hand-made clocks): the
//! burst, exact retry hints, refill, multi-cell requests, the end of time
//! and backwards clocks, waits (served at their instant, refused at once,
//! FIFO, cancelled) and the counters. Small and free of real time, so Miri
//! runs them: `cargo +nightly miri test --test rate`.

mod common;

use std::cell::Cell;
use std::time::Duration;

use common::Task;
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::rate::{NotYet, Quota, QuotaError, RateError, RateLimiter, HORIZON};

const MS: Duration = Duration::from_millis(1);

/// The refusal of cells that conform at `ready_at`, `retry_after` after
/// the check (for `ready_at == Instant::MAX`, the check's time is
/// `MAX - retry_after`).
fn limited(retry_after: Duration, ready_at: Instant) -> RateError {
    RateError::Limited(NotYet::new(ready_at - retry_after, ready_at))
}

/// The error for cells that conform `after` from `clock`'s now.
fn limited_in(clock: &impl Clock, after: Duration) -> RateError {
    limited(after, clock.now() + after)
}

#[test]
fn burst_then_exact_retry_after_then_refill() {
    let clock = ManualClock::new();
    // T = 100 ms, burst 3.
    let r = RateLimiter::new("api", Quota::per_second(10).burst(3), &clock);
    for _ in 0..3 {
        r.check().unwrap();
    }
    assert_eq!(r.check(), Err(limited_in(&clock, 100 * MS)));
    clock.advance(40 * MS);
    assert_eq!(r.check(), Err(limited_in(&clock, 60 * MS)));
    clock.advance(60 * MS - Duration::from_nanos(1));
    assert_eq!(r.check(), Err(limited_in(&clock, Duration::from_nanos(1))));
    clock.advance(Duration::from_nanos(1));
    r.check().unwrap();
    assert!(r.check().is_err());
    // Idle long enough: the whole burst again, no more.
    clock.advance(Duration::from_secs(10));
    for _ in 0..3 {
        r.check().unwrap();
    }
    assert!(r.check().is_err());
}

#[test]
fn refusal_writes_nothing() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(2).burst(1), &clock);
    r.check().unwrap();
    let before = format!("{r:?}");
    for _ in 0..5 {
        assert_eq!(r.check(), Err(limited_in(&clock, 500 * MS)));
    }
    assert_eq!(format!("{r:?}"), before, "a refusal changed the state");
    clock.advance(500 * MS);
    r.check().unwrap();
}

#[test]
fn check_n_and_exceeds_burst() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("batch", Quota::per_second(10).burst(5), &clock);
    assert_eq!(
        r.check_n(6),
        Err(RateError::ExceedsBurst {
            requested: 6,
            burst: 5
        })
    );
    r.check_n(0).unwrap();
    r.check_n(4).unwrap();
    // One left; three need two more intervals.
    assert_eq!(r.check_n(3), Err(limited_in(&clock, 200 * MS)));
    r.check_n(1).unwrap();
    assert_eq!(r.check_n(5), Err(limited_in(&clock, 500 * MS)));
    clock.advance(500 * MS);
    r.check_n(5).unwrap();
    // Neither the too-large request nor the empty one is counted.
    let m = r.metrics();
    assert_eq!((m.admitted, m.admitted_cells, m.refused), (3, 10, 2));
}

#[test]
fn quotas_per_minute_hour_and_odd_periods() {
    let q = Quota::per_second(3);
    assert_eq!(q.emission_interval(), Duration::from_nanos(333_333_334));
    assert_eq!(Quota::per_minute(100).emission_interval(), 600 * MS);
    assert_eq!(
        Quota::per_hour(1).emission_interval(),
        Duration::from_secs(3600)
    );
    let odd = Quota::new(3, Duration::from_nanos(10)).burst(2);
    assert_eq!(odd.emission_interval(), Duration::from_nanos(4));

    // per_second(3): three cells at once, the fourth 333 333 334 ns later,
    // never sooner: four cells need more than one second.
    let clock = ManualClock::new();
    let r = RateLimiter::new("three", q, &clock);
    r.check_n(3).unwrap();
    assert_eq!(
        r.check(),
        Err(limited_in(&clock, Duration::from_nanos(333_333_334)))
    );
    clock.advance(Duration::from_secs(1));
    // 1 s later, 999 999 999.99… ns of cells are back: only two whole ones
    // and a fraction, rounded against the caller.
    r.check_n(2).unwrap();
    assert_eq!(r.check(), Err(limited_in(&clock, Duration::from_nanos(2))));

    let clock = ManualClock::new();
    let hourly = RateLimiter::new("report", Quota::per_hour(2).burst(1), &clock);
    hourly.check().unwrap();
    assert_eq!(
        hourly.check(),
        Err(limited_in(&clock, Duration::from_secs(1800)))
    );
}

#[test]
fn quota_errors() {
    let s = Duration::from_secs(1);
    assert_eq!(Quota::try_new(0, s), Err(QuotaError::ZeroCells));
    assert_eq!(
        Quota::try_new(1, Duration::ZERO),
        Err(QuotaError::ZeroPeriod)
    );
    assert_eq!(
        Quota::try_new(1, Duration::MAX),
        Err(QuotaError::PeriodTooLong)
    );
    assert_eq!(
        Quota::per_second(1).try_burst(0),
        Err(QuotaError::ZeroBurst)
    );
    assert_eq!(
        Quota::per_hour(1).try_burst(u32::MAX),
        Err(QuotaError::BurstTooLong {
            burst: u32::MAX,
            interval: Duration::from_secs(3600)
        })
    );
    // The largest period that fits (the schedule's horizon), and a rate of
    // one cell per nanosecond.
    let longest = HORIZON.since_origin();
    assert_eq!(
        Quota::try_new(1, longest).unwrap().emission_interval(),
        longest
    );
    assert_eq!(
        Quota::try_new(1, longest + Duration::from_nanos(1)),
        Err(QuotaError::PeriodTooLong)
    );
    assert_eq!(
        // Two cells: T rounds up to 2^59 ns, and the default burst of 2
        // reaches 2^60, one past the horizon.
        Quota::try_new(2, longest),
        Err(QuotaError::BurstTooLong {
            burst: 2,
            interval: (longest + Duration::from_nanos(1)) / 2
        })
    );
    assert_eq!(
        Quota::new(u32::MAX, s).emission_interval(),
        Duration::from_nanos(1)
    );
    let p = std::panic::catch_unwind(|| Quota::per_second(0)).unwrap_err();
    assert_eq!(
        p.downcast_ref::<&str>().copied(),
        Some("a rate limit must admit at least 1 cell per period")
    );
}

/// A clock the test sets freely, backwards too (it breaks the `Clock`
/// contract on purpose).
struct Rewind(Cell<u64>);

impl Clock for Rewind {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.0.get())
    }
}

#[test]
fn end_of_time_and_backwards_clocks() {
    // At the schedule's horizon: the cells that fit are admitted, then
    // nothing more, with no overflow and no panic; past it (up to the
    // clock's end of time) nothing conforms.
    let h = HORIZON.as_nanos();
    let never = |now: u64| limited(Duration::from_nanos(u64::MAX - now), Instant::MAX);
    let clock = Rewind(Cell::new(h - 250));
    let r = RateLimiter::new("end", Quota::per_second(10).burst(3), &clock);
    // T = 100 ms: the first cell moves the TAT to h - 250 + 100 ms, past h.
    assert_eq!(r.check(), Err(never(h - 250)));
    clock.0.set(h + 1);
    assert_eq!(r.check(), Err(never(h + 1)));
    clock.0.set(u64::MAX);
    assert_eq!(r.check(), Err(limited(Duration::ZERO, Instant::MAX)));
    assert_eq!(r.check_n(3), Err(limited(Duration::ZERO, Instant::MAX)));
    assert_eq!(r.metrics().admitted, 0);

    // One nanosecond per cell fits right up to the horizon.
    let clock = Rewind(Cell::new(h - 2));
    let r = RateLimiter::new(
        "ns",
        Quota::new(1, Duration::from_nanos(1)).burst(2),
        &clock,
    );
    r.check().unwrap();
    r.check().unwrap();
    assert_eq!(r.check(), Err(never(h - 2)));
    assert_eq!(r.metrics().admitted, 2);

    // A clock that runs backwards finds the schedule further ahead: it is
    // refused more, never admitted more, and the hint counts from its now.
    let clock = Rewind(Cell::new(10_000_000_000));
    let r = RateLimiter::new("back", Quota::per_second(10).burst(2), &clock);
    r.check_n(2).unwrap();
    clock.0.set(5_000_000_000);
    let ready = Instant::from_nanos(10_100_000_000);
    assert_eq!(r.check(), Err(limited(Duration::from_millis(5_100), ready)));
    clock.0.set(0);
    assert_eq!(r.check(), Err(limited(ready.since_origin(), ready)));
    clock.0.set(10_100_000_000);
    r.check().unwrap();
    assert!(r.check().is_err());
}

#[test]
fn wait_is_served_at_its_instant() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("uplink", Quota::per_second(10).burst(1), &clock);
    r.check().unwrap();
    let mut wait = Task::pending(r.acquire_timeout(Duration::from_secs(1)));
    assert_eq!(r.waiting(), 1);
    // The reservation is visible to checks: the cell at 100 ms is taken.
    clock.advance(99 * MS);
    wait.assert_pending();
    assert_eq!(r.check(), Err(limited_in(&clock, 101 * MS)));
    clock.advance(MS);
    assert!(wait.woken());
    assert_eq!(wait.ready(), Ok(()));
    assert_eq!(r.check(), Err(limited_in(&clock, 100 * MS)));
    let m = r.metrics();
    assert_eq!((m.admitted, m.waited, m.waiting, m.refused), (2, 1, 0, 2));
}

#[test]
fn wait_that_conforms_now_is_not_a_wait() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(2), &clock);
    clock.advance(MS);
    let mut wait = Task::new(r.acquire_until(Instant::ZERO));
    // Its deadline has passed, but the cell conforms now: taken.
    assert_eq!(wait.ready(), Ok(()));
    assert_eq!(r.metrics().waited, 0);
    // A future does nothing before its first poll.
    let lazy = r.until_ready();
    r.check().unwrap();
    drop(lazy);
    assert!(r.check().is_err());
}

#[test]
fn wait_refused_at_once_when_the_deadline_is_too_early() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(10).burst(1), &clock);
    r.check().unwrap();
    let mut early = Task::new(r.acquire_timeout(99 * MS));
    assert_eq!(early.ready(), Err(limited_in(&clock, 100 * MS)));
    // Nothing was reserved: the cell is there at 100 ms for anyone.
    clock.advance(100 * MS);
    r.check().unwrap();
    let mut big = Task::new(r.acquire_n_until(2, Instant::MAX));
    assert_eq!(
        big.ready(),
        Err(RateError::ExceedsBurst {
            requested: 2,
            burst: 1
        })
    );
    let m = r.metrics();
    assert_eq!((m.refused, m.waiting, m.admitted), (1, 0, 2));
}

#[test]
fn waiters_are_served_in_order() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(10).burst(2), &clock);
    r.check_n(2).unwrap();
    let mut a = Task::pending(r.until_ready());
    let mut b = Task::pending(r.acquire_n_until(2, Instant::MAX));
    let mut c = Task::pending(r.until_ready());
    assert_eq!(r.waiting(), 3);
    // a at 100 ms, b (two cells) at 300 ms, c at 400 ms.
    clock.advance(100 * MS);
    assert_eq!(a.ready(), Ok(()));
    b.assert_pending();
    c.assert_pending();
    clock.advance(199 * MS);
    b.assert_pending();
    clock.advance(MS);
    assert_eq!(b.ready(), Ok(()));
    c.assert_pending();
    clock.advance(100 * MS);
    assert_eq!(c.ready(), Ok(()));
    // And a check after them all sees every reserved cell.
    assert_eq!(r.check(), Err(limited_in(&clock, 100 * MS)));
    let m = r.metrics();
    assert_eq!((m.admitted, m.admitted_cells, m.waited), (4, 6, 3));
}

#[test]
fn cancelled_wait_gives_its_cells_to_the_next_caller() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(10).burst(1), &clock);
    r.check().unwrap();
    let wait = Task::pending(r.until_ready());
    drop(wait);
    assert_eq!(r.waiting(), 0);
    // The cell at 100 ms is free again: the next caller gets it at once.
    clock.advance(100 * MS);
    r.check().unwrap();
    assert!(r.check().is_err());
    let m = r.metrics();
    assert_eq!((m.admitted, m.cancelled, m.waited), (2, 1, 0));
}

#[test]
fn cancelled_wait_behind_another_leaves_its_cells_spent() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(100).burst(1), &clock);
    r.check().unwrap(); // TAT 10 ms
    let w0 = Task::pending(r.until_ready()); // at 10 ms
    let mut w1 = Task::pending(r.until_ready()); // at 20 ms
    drop(w0);
    // Giving w0's cell back would let a check at 20 ms conform next to w1.
    clock.advance(20 * MS);
    assert_eq!(r.check(), Err(limited_in(&clock, 10 * MS)));
    assert_eq!(w1.ready(), Ok(()));
    // The newest reservation's cells do come back.
    let w2 = Task::pending(r.until_ready()); // at 30 ms
    drop(w2);
    clock.advance(10 * MS);
    r.check().unwrap();
    let m = r.metrics();
    assert_eq!((m.admitted, m.cancelled, m.waited, m.waiting), (3, 2, 1, 0));
}

#[test]
fn wait_dropped_after_its_instant_has_spent_its_cells() {
    let clock = ManualClock::new();
    let r = RateLimiter::new("api", Quota::per_second(10).burst(1), &clock);
    r.check().unwrap();
    let wait = Task::pending(r.until_ready());
    clock.advance(100 * MS);
    drop(wait); // due, never polled again
    assert_eq!(r.check(), Err(limited_in(&clock, 100 * MS)));
    let m = r.metrics();
    assert_eq!((m.admitted, m.waited, m.cancelled, m.waiting), (2, 1, 0, 0));
}

#[test]
fn a_static_limiter_and_debug() {
    static CLOCK: ManualClock = ManualClock::new();
    static LIMIT: RateLimiter<&ManualClock> =
        RateLimiter::new("static", Quota::per_minute(60).burst(1), &CLOCK);
    LIMIT.check().unwrap();
    assert_eq!(LIMIT.name(), "static");
    assert_eq!(LIMIT.quota(), Quota::per_minute(60).burst(1));
    assert_eq!(LIMIT.clock().now(), Instant::ZERO);
    let debug = format!("{LIMIT:?}");
    assert!(debug.starts_with("RateLimiter { name: \"static\", quota: Quota { cells: 60, period: 60s, burst: 1, emission_interval: 1s }"), "{debug}");
    let wait = LIMIT.until_ready();
    assert!(format!("{wait:?}").contains("state: \"start\""));
    let m = LIMIT.metrics();
    assert_eq!((m.name, m.admitted), ("static", 1));
}

/// The admission counter rides in the TAT's word (four bits, carried into a
/// counter every sixteenth admission): four threads admitting at once, with a
/// reader taking snapshots meanwhile, end with every admission counted
/// once, and no snapshot ever reports less than the one before it.
#[test]
#[cfg_attr(miri, ignore = "40 000 checks on 4 threads: minutes under Miri")]
fn the_admission_count_is_exact_and_never_goes_back() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let r = RateLimiter::new("wide", Quota::per_second(u32::MAX), ManualClock::new());
    let done = AtomicBool::new(false);
    let admitted = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut last = 0;
            let mut reads = 0u32;
            while !done.load(SeqCst) || reads == 0 {
                let m = r.metrics().admitted;
                assert!(m >= last, "snapshot went back from {last} to {m}");
                last = m;
                reads += 1;
            }
        });
        let workers: Vec<_> = (0..4)
            .map(|_| s.spawn(|| (0..10_000).filter(|_| r.check().is_ok()).count()))
            .collect();
        let admitted: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, SeqCst);
        reader.join().unwrap();
        admitted
    });
    // The clock stands still: a burst of u32::MAX admits all of them.
    assert_eq!(admitted, 40_000);
    let m = r.metrics();
    assert_eq!(
        (m.admitted, m.admitted_cells, m.refused),
        (40_000, 40_000, 0)
    );
}

/// A limiter made `without_refusal_count` decides every request as a
/// counted one does, with the same hints, and counts all but its refusals
/// (checks and waits alike).
#[test]
fn uncounted_refusals_decide_alike_and_count_nothing() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).burst(3);
    let counted = RateLimiter::new("a", quota, &clock);
    let uncounted = RateLimiter::new("b", quota, &clock).without_refusal_count();
    assert!(counted.counts_refusals() && !uncounted.counts_refusals());
    let mut refusals = 0;
    for step in 0..200u64 {
        let n = (step % 4) as u32 + 1;
        let (a, b) = (counted.check_n(n), uncounted.check_n(n));
        assert_eq!(a, b, "step {step}");
        if matches!(a, Err(RateError::Limited(_))) {
            refusals += 1;
        }
        // A wait whose deadline is too early: refused at once, and counted
        // only by the counted limiter.
        let a = Task::new(counted.acquire_until(clock.now())).ready();
        let b = Task::new(uncounted.acquire_until(clock.now())).ready();
        assert_eq!(a.is_ok(), b.is_ok(), "step {step}");
        refusals += usize::from(a.is_err());
        clock.advance(Duration::from_millis(37 + step % 50));
    }
    let (a, b) = (counted.metrics(), uncounted.metrics());
    assert!(refusals > 50, "the run refuses often: {refusals}");
    assert_eq!(a.refused, refusals);
    assert_eq!(b.refused, 0);
    assert_eq!(
        (a.admitted, a.admitted_cells),
        (b.admitted, b.admitted_cells)
    );
}
