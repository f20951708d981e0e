//! watertight on an embassy Cortex-M4F firmware (STM32F407 memory map).
//!
//! Three workers call a fake upstream (a 5 ms timer, every 7th call fails,
//! every 16th takes 50 ms). Builds, selected by features:
//!
//! - default: fail-fast `Bulkhead::try_acquire`, the breaker and
//!   `deadline::timeout`, with watertight's `alloc` off and **no global
//!   allocator** in the binary;
//! - `heap`: watertight `alloc` and embedded-alloc (8 KiB); the workers wait
//!   for a permit with `acquire_timeout(..).await`;
//! - `no-deadline`: the default build without `deadline::timeout`, to show
//!   what the bulkhead and the breaker cost on their own;
//! - `unguarded`: the baseline, the upstream called directly, to measure what
//!   the guards cost;
//! - `rate`: a `static` rate limiter (10 calls a second, 3 at once) in front
//!   of the bulkhead: `check()` in a fail-fast build, a wait of up to 15 ms
//!   for a cell (`acquire_timeout`) with `wait`, to measure what the limiter
//!   adds to either; with `single-core-atomics` its 64-bit word is changed
//!   with interrupts disabled (portable-atomic's `unsafe-assume-single-core`)
//!   instead of through portable-atomic's fallback lock table;
//! - `time-window`, `consecutive` (with `no-deadline`): the breaker on a
//!   sliding time window (10 s in ten buckets, a `TimeBreaker`) or on 5
//!   failures in a row instead of the last 64 calls, to measure what each
//!   window costs against the count window.
//!
//! It is built and linked (not run) by `build.sh`, which prints its sizes;
//! `src/bin/scenario.rs` is the firmware that runs, in QEMU.

#![no_std]
#![no_main]

#[cfg(all(feature = "heap", feature = "unguarded"))]
compile_error!("`heap` and `unguarded` are separate builds: pick one");
#[cfg(all(feature = "no-deadline", feature = "unguarded"))]
compile_error!("`no-deadline` and `unguarded` are separate builds: pick one");
#[cfg(all(feature = "rate", feature = "unguarded"))]
compile_error!("`rate` and `unguarded` are separate builds: pick one");
#[cfg(all(feature = "time-window", feature = "consecutive"))]
compile_error!("`time-window` and `consecutive` are separate builds: pick one");

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use embassy_executor::Spawner;
use embassy_time::Timer;
use panic_halt as _;
use watertight_firmware::systick;

/// Outcome counters, kept in statics so the work is observable.
static OK: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);
static TIMED_OUT: AtomicU32 = AtomicU32::new(0);
#[cfg_attr(feature = "unguarded", allow(dead_code))]
static REJECTED: AtomicU32 = AtomicU32::new(0);
static CALLS: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UpstreamError {
    /// The upstream answered with an error.
    Refused,
    /// No answer within the deadline.
    #[cfg_attr(any(feature = "unguarded", feature = "no-deadline"), allow(dead_code))]
    TimedOut,
}

/// The fake upstream: 5 ms per call, every 16th call 50 ms, every 7th fails.
async fn upstream_call() -> Result<u32, UpstreamError> {
    let n = CALLS.fetch_add(1, Relaxed);
    if n % 16 == 15 {
        Timer::after_millis(50).await;
    } else {
        Timer::after_millis(5).await;
    }
    if n % 7 == 3 {
        Err(UpstreamError::Refused)
    } else {
        Ok(n)
    }
}

fn count(result: Result<u32, UpstreamError>) {
    match result {
        Ok(_) => OK.fetch_add(1, Relaxed),
        Err(UpstreamError::Refused) => FAILED.fetch_add(1, Relaxed),
        Err(UpstreamError::TimedOut) => TIMED_OUT.fetch_add(1, Relaxed),
    };
}

#[cfg(not(feature = "unguarded"))]
mod guarded {
    use core::sync::atomic::Ordering::Relaxed;
    use core::time::Duration;

    use watertight::breaker::BreakerConfigBuilder;
    #[cfg(feature = "time-window")]
    use watertight::breaker::TimeBreaker;
    use watertight::clock::EmbassyClock;
    #[cfg(not(feature = "no-deadline"))]
    use watertight::deadline::timeout;
    #[cfg(feature = "rate")]
    use watertight::rate::{Quota, RateLimiter};
    #[cfg(not(feature = "time-window"))]
    use watertight::CircuitBreaker;
    use watertight::{BreakerConfig, Bulkhead, CallError};

    use super::{count, upstream_call, UpstreamError, REJECTED};

    /// At most two calls in flight to the upstream.
    pub static UPSTREAM_BULKHEAD: Bulkhead<EmbassyClock> =
        Bulkhead::new("upstream", 2, EmbassyClock::new());

    /// The breaker's window: the last 64 calls, or (`time-window`) the
    /// last 10 s in ten buckets, or (`consecutive`) 5 failures in a row.
    #[cfg(not(any(feature = "time-window", feature = "consecutive")))]
    const WINDOW: BreakerConfigBuilder = BreakerConfig::builder().window_size(64);
    #[cfg(feature = "time-window")]
    const WINDOW: BreakerConfigBuilder =
        BreakerConfig::builder().time_window(Duration::from_secs(10), 10);
    #[cfg(feature = "consecutive")]
    const WINDOW: BreakerConfigBuilder = BreakerConfig::builder().consecutive_failures(5);

    const BREAKER_CONFIG: BreakerConfig = match WINDOW
        .minimum_calls(8)
        .failure_rate_threshold(50.0)
        .slow_call_duration(Duration::from_millis(20))
        .open_duration(Duration::from_secs(2))
        .build()
    {
        Ok(config) => config,
        Err(e) => e.panic(),
    };

    /// At most 10 calls a second to the upstream, 3 at once.
    #[cfg(feature = "rate")]
    pub static UPSTREAM_RATE: RateLimiter<EmbassyClock> = RateLimiter::new(
        "upstream",
        Quota::per_second(10).burst(3),
        EmbassyClock::new(),
    );

    /// Opens when half the last 64 calls failed (or half the last 10 s's,
    /// or on 5 failures in a row).
    #[cfg(not(any(feature = "time-window", feature = "consecutive")))]
    pub static UPSTREAM_BREAKER: CircuitBreaker<EmbassyClock, 64> =
        CircuitBreaker::new("upstream", BREAKER_CONFIG, EmbassyClock::new());
    #[cfg(feature = "time-window")]
    pub static UPSTREAM_BREAKER: TimeBreaker<EmbassyClock, 10> =
        TimeBreaker::new("upstream", BREAKER_CONFIG, EmbassyClock::new());
    #[cfg(feature = "consecutive")]
    pub static UPSTREAM_BREAKER: CircuitBreaker<EmbassyClock, 1> =
        CircuitBreaker::new("upstream", BREAKER_CONFIG, EmbassyClock::new());

    /// The upstream call under a 20 ms deadline.
    #[cfg(not(feature = "no-deadline"))]
    async fn bounded_call() -> Result<u32, UpstreamError> {
        match timeout(
            EmbassyClock::new(),
            Duration::from_millis(20),
            upstream_call(),
        )
        .await
        {
            Ok(result) => result,
            Err(_elapsed) => Err(UpstreamError::TimedOut),
        }
    }

    /// The `no-deadline` build: the upstream call as it is, so the table can
    /// show what the bulkhead and the breaker cost on their own.
    #[cfg(feature = "no-deadline")]
    async fn bounded_call() -> Result<u32, UpstreamError> {
        upstream_call().await
    }

    /// One guarded call: a cell of the rate (`rate`), a bulkhead permit,
    /// then breaker, then deadline.
    pub async fn call_once() {
        // Refused when the rate is spent ...
        #[cfg(all(feature = "rate", not(any(feature = "heap", feature = "wait"))))]
        let cell = UPSTREAM_RATE.check();
        // ... or wait up to 15 ms for the next cell: the future holds its
        // reservation, no allocator either.
        #[cfg(all(feature = "rate", any(feature = "heap", feature = "wait")))]
        let cell = UPSTREAM_RATE
            .acquire_timeout(Duration::from_millis(15))
            .await;
        #[cfg(feature = "rate")]
        if cell.is_err() {
            REJECTED.fetch_add(1, Relaxed);
            return;
        }

        // Fail fast when the bulkhead is full ...
        #[cfg(not(any(feature = "heap", feature = "wait")))]
        let permit = UPSTREAM_BULKHEAD.try_acquire();
        // ... or wait up to 15 ms for a permit: the future holds its own
        // queue node, so this needs no allocator (`wait`); `heap` is the
        // same with watertight's `alloc` and a global allocator.
        #[cfg(any(feature = "heap", feature = "wait"))]
        let permit = UPSTREAM_BULKHEAD
            .acquire_timeout(Duration::from_millis(15))
            .await;
        let Ok(_permit) = permit else {
            REJECTED.fetch_add(1, Relaxed);
            return;
        };

        // The breaker around the call: refused at once while it is open.
        match UPSTREAM_BREAKER.call(bounded_call()).await {
            Ok(n) => count(Ok(n)),
            Err(CallError::Failed(e)) => count(Err(e)),
            Err(CallError::Rejected(_)) => {
                REJECTED.fetch_add(1, Relaxed);
            }
        }
    }
}

#[embassy_executor::task(pool_size = 3)]
async fn worker() {
    loop {
        #[cfg(not(feature = "unguarded"))]
        guarded::call_once().await;
        #[cfg(feature = "unguarded")]
        count(upstream_call().await);
        Timer::after_millis(10).await;
    }
}

#[cfg(feature = "heap")]
mod heap {
    use core::mem::MaybeUninit;
    use embedded_alloc::LlffHeap;

    pub const HEAP_SIZE: usize = 8 * 1024;

    #[global_allocator]
    static HEAP: LlffHeap = LlffHeap::empty();

    /// Hands the 8 KiB arena to the allocator. Call once, first thing.
    pub fn init() {
        static mut ARENA: [MaybeUninit<u8>; HEAP_SIZE] = [MaybeUninit::uninit(); HEAP_SIZE];
        // SAFETY: called once at start, before any allocation; ARENA is used
        // by nothing else.
        unsafe { HEAP.init(core::ptr::addr_of_mut!(ARENA) as usize, HEAP_SIZE) }
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    #[cfg(feature = "heap")]
    heap::init();
    let core = cortex_m::Peripherals::take().unwrap();
    systick::init::<{ systick::HSI_HZ }>(core.SYST);
    for _ in 0..3 {
        spawner.spawn(worker().unwrap());
    }
}
