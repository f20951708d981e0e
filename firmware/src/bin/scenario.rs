//! The firmware that runs: watertight's primitives checked on an emulated
//! board, in QEMU (`run-qemu.sh`).
//!
//! One embassy task runs the checks in order on embassy time (the chip's
//! 1 kHz tick): a `static` bulkhead refuses the call over its capacity and
//! takes it after a release; a wait for a slot times out, and another is
//! served by a release (no allocator: the waiting future holds its queue
//! node); a `static` breaker trips on failures, refuses with a retry hint,
//! is half-open once the hint has passed and closes on good probes; a
//! deadline cuts a call that overruns; a `static` rate limiter admits its
//! burst, refuses the next cell with the exact retry hint, admits it once the
//! hint has passed, refuses a wait that could not be served by its deadline
//! at once and serves a timed wait at its cell's instant (no allocator
//! either: the wait is a reservation held in the future, and on the
//! Cortex-M0 the limiter's 64-bit word goes through portable-atomic's
//! critical-section fallback); and a `static` partitioned bulkhead lends
//! a class's idle slot to a burst of another class and gives it back to
//! the owner's waiter first. Each check prints one line over
//! semihosting (`ok` or `FAIL`, and what it saw); QEMU exits with status 0
//! when every check passed, and 1 when one failed or on a panic. The checks
//! assert counts, states and order; times only as bounds a correct run
//! cannot miss (a 10 ms wait lasts at least 10 ms; a 100 ms call cut at a
//! 20 ms deadline ends before 100 ms).

#![no_std]
#![no_main]

use core::cell::Cell;
use core::fmt;
use core::time::Duration;

use cortex_m_semihosting::{debug, hprintln};
use embassy_executor::Spawner;
use embassy_futures::join::join;
use embassy_time::{Instant, Timer};
use watertight::breaker::{State, TimeBreaker};
use watertight::clock::{Clock as _, EmbassyClock, Timer as _};
use watertight::deadline::timeout;
use watertight::partition::{PartitionError, PartitionedBulkhead};
use watertight::rate::{NotYet, Quota, RateError, RateLimiter};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CallError, CircuitBreaker};

#[cfg(chip = "stm32f4")]
mod board {
    use watertight_firmware::systick;

    pub const NAME: &str =
        "netduinoplus2: STM32F405, Cortex-M4F, thumbv7em-none-eabihf; tick: SysTick";

    /// SysTick at 168 MHz: QEMU's netduinoplus2 clocks the core at a fixed
    /// 168 MHz (it models no RCC).
    pub fn start_ticks(core: cortex_m::Peripherals) {
        systick::init::<{ systick::QEMU_NETDUINOPLUS2_HZ }>(core.SYST);
    }
}

#[cfg(chip = "nrf51")]
mod board {
    use watertight_firmware::nrf51_timer;

    pub const NAME: &str =
        "microbit: nRF51822, Cortex-M0, thumbv6m-none-eabi (no CAS: critical sections); tick: TIMER0";

    pub fn start_ticks(_core: cortex_m::Peripherals) {
        nrf51_timer::init();
    }
}

/// Two calls at a time, one caller waiting at most: a second waiter is
/// refused at once (`QueueFull`).
const CAPACITY: usize = 2;
static BULKHEAD: Bulkhead<EmbassyClock> =
    Bulkhead::new("upstream", CAPACITY, EmbassyClock::new()).with_max_waiters(1);

const MINIMUM_CALLS: usize = 4;
const OPEN_WAIT: Duration = Duration::from_millis(100);
const PROBES: usize = 2;
const BREAKER_CONFIG: BreakerConfig = match BreakerConfig::builder()
    .window_size(8)
    .minimum_calls(MINIMUM_CALLS)
    .failure_rate_threshold(50.0)
    .no_slow_call_duration()
    .open_duration(OPEN_WAIT)
    .half_open_calls(PROBES)
    .build()
{
    Ok(config) => config,
    Err(e) => e.panic(),
};
/// Opens when half of the last 8 calls (at least 4) failed.
static BREAKER: CircuitBreaker<EmbassyClock, 8> =
    CircuitBreaker::new("upstream", BREAKER_CONFIG, EmbassyClock::new());

/// A time window: 3 calls in the last 200 ms (four 50 ms buckets), half
/// failing, open it for 100 ms; one probe.
const TIME_WINDOW: Duration = Duration::from_millis(200);
const TIME_CONFIG: BreakerConfig = match BreakerConfig::builder()
    .time_window(TIME_WINDOW, 4)
    .minimum_calls(3)
    .failure_rate_threshold(50.0)
    .open_duration(OPEN_WAIT)
    .half_open_calls(1)
    .build()
{
    Ok(config) => config,
    Err(e) => e.panic(),
};
static TIME_BREAKER: TimeBreaker<EmbassyClock, 4> =
    TimeBreaker::new("sensor", TIME_CONFIG, EmbassyClock::new());

/// An uplink allowed 10 messages a second, 3 at once: one cell every
/// 100 ms (the emission interval), a burst of 3.
const RATE: Quota = Quota::per_second(10).burst(3);
const INTERVAL: Duration = Duration::from_millis(100);
static UPLINK: RateLimiter<EmbassyClock> = RateLimiter::new("uplink", RATE, EmbassyClock::new());

/// A gateway's uplink: alarms are promised 1 slot, bulk uploads 2; either
/// may borrow what the other leaves idle.
const ALARMS: usize = 0;
const BULK: usize = 1;
static UPLINK_SLOTS: PartitionedBulkhead<EmbassyClock, 2> =
    PartitionedBulkhead::new("uplink", [("alarms", 1), ("bulk", 2)], EmbassyClock::new());

/// The upstream's error.
#[derive(Debug)]
struct Refused;

/// Passed and failed checks; each check prints its line.
#[derive(Default)]
struct Checks {
    passed: u32,
    failed: u32,
}

impl Checks {
    fn check(&mut self, ok: bool, what: fmt::Arguments<'_>) {
        if ok {
            self.passed += 1;
            hprintln!("ok   {}", what);
        } else {
            self.failed += 1;
            hprintln!("FAIL {}", what);
        }
    }
}

/// An acquire's result as a line shows it.
struct Shown<'a, T>(&'a Result<T, AcquireError>);

impl<T> fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(_) => f.write_str("granted"),
            Err(e) => fmt::Display::fmt(e, f),
        }
    }
}

/// A refusal's retry hint as a line shows it.
struct Hint(Option<Duration>);

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(hint) => write!(f, "{hint:?}"),
            None => f.write_str("(no hint)"),
        }
    }
}

fn ms_since(start: Instant) -> u64 {
    start.elapsed().as_millis()
}

/// Capacity, refusal, release; then a wait that times out and one a
/// release serves.
async fn bulkhead(c: &mut Checks) {
    let first = BULKHEAD.try_acquire();
    let second = BULKHEAD.try_acquire();
    c.check(
        first.is_ok() && second.is_ok() && BULKHEAD.available() == 0,
        format_args!(
            "bulkhead: 2 calls in, {} of {CAPACITY} slots taken",
            BULKHEAD.in_flight()
        ),
    );
    let over = BULKHEAD.try_acquire();
    c.check(
        matches!(over, Err(AcquireError::Full)),
        format_args!("bulkhead: the third call refused: {}", Shown(&over)),
    );
    drop(first);
    let after_release = BULKHEAD.try_acquire();
    c.check(
        after_release.is_ok() && BULKHEAD.available() == 0,
        format_args!(
            "bulkhead: after a release the next call is {}",
            Shown(&after_release)
        ),
    );

    // Both slots held: a wait with nothing released ends at its timeout,
    // and leaves no node in the queue.
    let start = Instant::now();
    let timed_out = BULKHEAD.acquire_timeout(Duration::from_millis(10)).await;
    let waited = ms_since(start);
    c.check(
        matches!(timed_out, Err(AcquireError::TimedOut)) && waited >= 10 && BULKHEAD.waiting() == 0,
        format_args!(
            "wait: nothing released, a 10 ms wait ended: {} (after {waited} ms, {} left waiting)",
            Shown(&timed_out),
            BULKHEAD.waiting()
        ),
    );

    // A wait of up to 100 ms, and a release 5 ms in: the release serves it.
    let step = Cell::new(0u32);
    let next = || {
        step.set(step.get() + 1);
        step.get()
    };
    // A second caller 2 ms in finds the one place in the queue taken: it is
    // refused at once, and the first waiter keeps its place.
    let start = Instant::now();
    let (((served, served_at), (queued, released_at)), (bounced, bounced_after)) = join(
        join(
            async {
                let permit = BULKHEAD.acquire_timeout(Duration::from_millis(100)).await;
                (permit, next())
            },
            async move {
                Timer::after_millis(5).await;
                let queued = BULKHEAD.waiting();
                drop(second);
                (queued, next())
            },
        ),
        async {
            Timer::after_millis(2).await;
            let asked = Instant::now();
            let refused = BULKHEAD.acquire_timeout(Duration::from_millis(100)).await;
            (refused, ms_since(asked))
        },
    )
    .await;
    let waited = ms_since(start);
    c.check(
        matches!(bounced, Err(AcquireError::QueueFull)) && bounced_after == 0,
        format_args!(
            "queue: a second waiter with 1 place in the queue: {} (after {bounced_after} ms)",
            Shown(&bounced)
        ),
    );
    c.check(
        served.is_ok() && queued == 1 && released_at < served_at && (5..100).contains(&waited),
        format_args!(
            "wait: {queued} waiting, a release 5 ms in, then the wait {} (step {released_at} release, step {served_at} served, after {waited} ms)",
            Shown(&served)
        ),
    );
    drop(served);
    drop(after_release);
    c.check(
        BULKHEAD.available() == CAPACITY && BULKHEAD.metrics().rejected() == 3,
        format_args!(
            "bulkhead: {} of {CAPACITY} slots free at the end, {} refusals counted (full, timed out, queue full)",
            BULKHEAD.available(),
            BULKHEAD.metrics().rejected()
        ),
    );
}

/// Trip, refusal with a hint, half-open after the open wait, closed after
/// good probes.
async fn breaker(c: &mut Checks) {
    let mut failed = 0;
    for _ in 0..MINIMUM_CALLS {
        let result = BREAKER.call(async { Err::<u32, _>(Refused) }).await;
        failed += u32::from(matches!(result, Err(CallError::Failed(Refused))));
    }
    let opened = Instant::now();
    c.check(
        failed == MINIMUM_CALLS as u32 && BREAKER.state() == State::Open,
        format_args!(
            "breaker: {failed} of {MINIMUM_CALLS} calls failed, state {}",
            BREAKER.state()
        ),
    );

    let ran = Cell::new(false);
    let refused = BREAKER
        .call(async {
            ran.set(true);
            Ok::<u32, Refused>(1)
        })
        .await;
    // The hint counts from the refusal; reading the clock after it can only
    // make the wait longer.
    let refused_at = Instant::now();
    let hint = refused.as_ref().err().and_then(CallError::retry_after);
    c.check(
        !ran.get()
            && refused.as_ref().is_err_and(CallError::is_rejected)
            && hint.is_some_and(|h| h > Duration::ZERO && h <= OPEN_WAIT),
        format_args!(
            "breaker: the next call refused without running (ran: {}), retry after {}",
            ran.get(),
            Hint(hint)
        ),
    );
    let hint = hint.unwrap_or(OPEN_WAIT);

    Timer::at(refused_at + (hint / 2).try_into().unwrap()).await;
    c.check(
        BREAKER.state() == State::Open,
        format_args!(
            "breaker: {} ms after opening, state {}",
            ms_since(opened),
            BREAKER.state()
        ),
    );
    Timer::at(refused_at + hint.try_into().unwrap()).await;
    c.check(
        BREAKER.state() == State::HalfOpen,
        format_args!(
            "breaker: once the retry hint has passed ({} ms after opening), state {}",
            ms_since(opened),
            BREAKER.state()
        ),
    );

    let first = BREAKER.call(async { Ok::<u32, Refused>(1) }).await;
    let after_first = BREAKER.state();
    let second = BREAKER.call(async { Ok::<u32, Refused>(2) }).await;
    c.check(
        matches!((first, second), (Ok(1), Ok(2)))
            && after_first == State::HalfOpen
            && BREAKER.state() == State::Closed,
        format_args!(
            "breaker: {PROBES} good probes: state {after_first} after the first, {} after the second",
            BREAKER.state()
        ),
    );
}

/// The time-window breaker: opens on 3 failures, recovers through a probe
/// after the open wait, and forgets failures older than its window.
async fn time_breaker(c: &mut Checks) {
    let fail = || TIME_BREAKER.call(async { Err::<u32, _>(Refused) });
    for _ in 0..3 {
        let _ = fail().await;
    }
    c.check(
        TIME_BREAKER.state() == State::Open,
        format_args!(
            "time breaker: 3 of 3 calls in 200 ms failed, state {}",
            TIME_BREAKER.state()
        ),
    );
    Timer::after_millis(OPEN_WAIT.as_millis() as u64).await;
    let probe = TIME_BREAKER.call(async { Ok::<u32, Refused>(1) }).await;
    c.check(
        probe.is_ok() && TIME_BREAKER.state() == State::Closed,
        format_args!(
            "time breaker: after the open wait a good probe: state {}",
            TIME_BREAKER.state()
        ),
    );
    let _ = fail().await;
    let _ = fail().await;
    Timer::after_millis(TIME_WINDOW.as_millis() as u64).await;
    let _ = fail().await;
    let _ = fail().await;
    let m = TIME_BREAKER.metrics();
    c.check(
        m.state == State::Closed && m.calls == 2,
        format_args!(
            "time breaker: 2 failures, 200 ms, 2 more: state {}, {} calls in the window",
            m.state, m.calls
        ),
    );
}

/// A call that overruns its deadline is cut; one within it returns.
async fn deadline(c: &mut Checks) {
    let finished = Cell::new(false);
    let start = Instant::now();
    let cut = timeout(EmbassyClock::new(), Duration::from_millis(20), async {
        Timer::after_millis(100).await;
        finished.set(true);
    })
    .await;
    let took = ms_since(start);
    c.check(
        cut.is_err() && !finished.get() && (20..100).contains(&took),
        format_args!(
            "deadline: a 100 ms call under a 20 ms deadline: {} after {took} ms",
            if cut.is_err() { "cut" } else { "finished" }
        ),
    );
    let within = timeout(EmbassyClock::new(), Duration::from_millis(20), async {
        Timer::after_millis(5).await;
        7
    })
    .await;
    c.check(
        within == Ok(7),
        format_args!("deadline: a 5 ms call under a 20 ms deadline returned {within:?}"),
    );
}

/// A rate limiter's result as a line shows it.
struct Rated<'a>(&'a Result<(), RateError>);

impl fmt::Display for Rated<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(()) => f.write_str("admitted"),
            Err(e) => fmt::Display::fmt(e, f),
        }
    }
}

/// The burst, the refusal with its exact hint, the cell admitted once the
/// hint has passed; a wait refused at once because its deadline is too
/// early, and a timed wait served at its cell's instant. Times on the
/// limiter's own clock (embassy's, whole milliseconds at the 1 kHz tick).
async fn rate(c: &mut Checks) {
    let clock = EmbassyClock::new();
    // Start on a fresh tick, so the burst and the refusal read one instant.
    Timer::after_millis(1).await;
    let start = clock.now();
    let mut burst = 0;
    for _ in 0..RATE.burst_size() {
        burst += u32::from(UPLINK.check().is_ok());
    }
    let over = UPLINK.check();
    let same_tick = clock.now() == start;
    let ready_at = match over {
        Err(RateError::Limited(n)) => n.ready_at(),
        _ => start + INTERVAL,
    };
    c.check(
        burst == 3
            && same_tick
            && over == Err(RateError::Limited(NotYet::new(start, start + INTERVAL))),
        format_args!(
            "rate: a burst of {burst} admitted at once, the 4th refused: {}",
            Rated(&over)
        ),
    );

    // One tick before the hint: still refused, 1 ms away; at it: admitted,
    // and only that one cell.
    clock.sleep_until(ready_at - Duration::from_millis(1)).await;
    let early = UPLINK.check();
    clock.sleep_until(ready_at).await;
    let at_hint = UPLINK.check();
    let next = UPLINK.check();
    let waited = clock.now().saturating_duration_since(start).as_millis();
    c.check(
        early.is_err_and(|e| e.retry_after() == Some(Duration::from_millis(1)))
            && at_hint.is_ok()
            && next.is_err_and(|e| e.retry_after() == Some(INTERVAL)),
        format_args!(
            "rate: 1 ms before the hint {}, at the hint ({waited} ms in) {}, the next {}",
            Rated(&early),
            Rated(&at_hint),
            Rated(&next)
        ),
    );

    // The next cell is 100 ms away: a 50 ms wait is refused at once, with
    // the hint, instead of sleeping only to fail.
    let asked = clock.now();
    let short = UPLINK.acquire_timeout(Duration::from_millis(50)).await;
    let took = clock.now().saturating_duration_since(asked).as_millis();
    c.check(
        short.is_err_and(|e| e.retry_after() == Some(INTERVAL)) && took == 0,
        format_args!(
            "rate: a 50 ms wait for a cell 100 ms away refused at once (after {took} ms): {}",
            Rated(&short)
        ),
    );

    // A 150 ms wait: it reserves the cell, sleeps, and is served at the
    // cell's instant, before its deadline.
    let asked = clock.now();
    let instant = asked + INTERVAL;
    let deadline = asked + Duration::from_millis(150);
    let (served, waiting) = join(
        async {
            let served = UPLINK.acquire_timeout(deadline - asked).await;
            (served, clock.now())
        },
        async {
            Timer::after_millis(5).await;
            UPLINK.waiting()
        },
    )
    .await;
    let (served, served_at) = served;
    let after = served_at.saturating_duration_since(asked).as_millis();
    c.check(
        served.is_ok() && waiting == 1 && served_at >= instant && served_at < deadline,
        format_args!(
            "rate: a 150 ms wait, {waiting} waiting 5 ms in, {} at the cell's instant (after {after} ms, deadline 150 ms)",
            if served.is_ok() { "served" } else { "refused" }
        ),
    );

    let m = UPLINK.metrics();
    c.check(
        (m.admitted, m.waited, m.refused, m.cancelled, m.waiting) == (5, 1, 4, 0, 0),
        format_args!(
            "rate: {} admitted ({} after a wait), {} refused, {} cancelled, {} waiting",
            m.admitted, m.waited, m.refused, m.cancelled, m.waiting
        ),
    );
}

/// A bulk burst borrows the alarms' idle slot; an alarm then waits in its
/// room and is served by the borrower's release, ahead of bulk.
async fn partition(c: &mut Checks) {
    let mut bulk = [None, None, None];
    for slot in &mut bulk {
        *slot = UPLINK_SLOTS.try_acquire(BULK).ok();
    }
    let borrowed = bulk.iter().flatten().filter(|p| p.is_borrowed()).count();
    let fourth = UPLINK_SLOTS.try_acquire(BULK).map(|_| ());
    c.check(
        bulk.iter().all(Option::is_some)
            && borrowed == 1
            && fourth == Err(PartitionError::Refused(AcquireError::Full)),
        format_args!(
            "partition: bulk took 3 of 3 slots ({borrowed} borrowed from alarms), the 4th refused: {}",
            Parted(&fourth)
        ),
    );
    let lent = bulk
        .iter()
        .position(|p| p.as_ref().is_some_and(|p| p.is_borrowed()))
        .unwrap_or(0);
    let start = Instant::now();
    let (alarm, ()) = join(
        UPLINK_SLOTS.acquire_timeout(ALARMS, Duration::from_millis(50)),
        async {
            Timer::after_millis(5).await;
            bulk[lent] = None;
        },
    )
    .await;
    let waited = ms_since(start);
    let bulk_after = UPLINK_SLOTS.try_acquire(BULK).map(|_| ());
    c.check(
        alarm.as_ref().is_ok_and(|p| p.room() == ALARMS)
            && (5..50).contains(&waited)
            && bulk_after.is_err(),
        format_args!(
            "partition: an alarm waited in its lent-out room and was served when the borrower left (after {waited} ms, room {}), bulk still refused",
            alarm
                .as_ref()
                .ok()
                .and_then(|p| UPLINK_SLOTS.class_name(p.room()))
                .unwrap_or("none")
        ),
    );
}

/// A partition refusal as a line shows it.
struct Parted<'a>(&'a Result<(), PartitionError>);

impl fmt::Display for Parted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(()) => f.write_str("granted"),
            Err(e) => fmt::Display::fmt(e, f),
        }
    }
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    let core = cortex_m::Peripherals::take().unwrap();
    board::start_ticks(core);
    hprintln!("watertight scenario on {}", board::NAME);
    let mut checks = Checks::default();
    bulkhead(&mut checks).await;
    breaker(&mut checks).await;
    time_breaker(&mut checks).await;
    deadline(&mut checks).await;
    rate(&mut checks).await;
    partition(&mut checks).await;
    hprintln!(
        "scenario: {} checks passed, {} failed, {} ms of embassy time",
        checks.passed,
        checks.failed,
        Instant::now().as_millis()
    );
    debug::exit(if checks.failed == 0 {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
}

/// A panic fails the run: its message, then exit status 1.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
