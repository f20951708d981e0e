#![cfg(all(feature = "std", not(loom)))]
//! `CoarseClock`'s bounds on real threads: monotonic, never ahead of
//! `StdClock`, behind by at most the resolution plus a stated slack, and a
//! breaker on it telling slow calls from fast ones. Bounds, not latencies:
//! the slack is generous for a loaded CI machine.

use std::thread;
use std::time::Duration;

use watertight::clock::{Clock, CoarseClock, StdClock};
use watertight::{BreakerConfig, CircuitBreaker};

/// A handle at [`RES`]; every test here asks for the same resolution, so
/// they share one updater.
fn clock() -> CoarseClock {
    CoarseClock::with_resolution(RES).expect("every test asks for RES")
}

/// Scheduling delay allowed on top of the resolution (a noisy 2-core VM).
const SLACK: Duration = Duration::from_millis(50);
const THREADS: usize = 4;
/// The updater's resolution in these tests: 5 ms, so that three
/// resolutions beyond a threshold are well above the machine's noise.
const RES: Duration = Duration::from_millis(5);
/// How long each thread reads: 60 resolutions, so many refreshes are seen.
const RUN: Duration = Duration::from_millis(300);

#[test]
fn monotonic_across_threads() {
    let clock = clock();
    let reads: Vec<_> = (0..THREADS)
        .map(|_| {
            let clock = clock.clone();
            thread::spawn(move || {
                let mut last = clock.now();
                let mut advanced = 0;
                let end = StdClock.now() + RUN;
                while StdClock.now() < end {
                    let t = clock.now();
                    assert!(t >= last, "went back: {last:?} then {t:?}");
                    advanced += usize::from(t > last);
                    last = t;
                }
                advanced
            })
        })
        .collect();
    for r in reads {
        let advanced = r.join().unwrap();
        assert!(advanced >= 5, "saw only {advanced} refreshes in {RUN:?}");
    }
    // Across threads: a read after a join never precedes one before it.
    let a = clock.now();
    thread::spawn({
        let clock = clock.clone();
        move || assert!(clock.now() >= a)
    })
    .join()
    .unwrap();
}

#[test]
fn never_ahead_and_lag_bounded() {
    let clock = clock();
    let bound = clock.resolution() + SLACK;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let clock = clock.clone();
            thread::spawn(move || {
                let mut worst = Duration::ZERO;
                let end = StdClock.now() + RUN;
                let mut i = 0_u64;
                while StdClock.now() < end {
                    i += 1;
                    let coarse = clock.now();
                    let real = StdClock.now();
                    assert!(coarse <= real, "ahead: {coarse:?} > {real:?}");
                    worst = worst.max(real - coarse);
                    if i % 1_000 == 0 {
                        // Read at every phase of the updater's period.
                        thread::sleep(Duration::from_micros(300));
                    }
                }
                worst
            })
        })
        .collect();
    for w in workers {
        let worst = w.join().unwrap();
        assert!(worst <= bound, "lag {worst:?} over {bound:?}");
    }
}

#[test]
fn the_clock_moves() {
    let clock = clock();
    let a = clock.now();
    thread::sleep(clock.resolution() * 10 + SLACK);
    let elapsed = clock.now() - a;
    assert!(elapsed >= clock.resolution() * 10, "moved only {elapsed:?}");
}

/// Waits until `clock` reads at least `t` (a `StdClock` instant: the
/// updater has run since then), or fails after `SLACK` many resolutions.
fn caught_up(clock: &CoarseClock, t: watertight::clock::Instant) {
    let give_up = StdClock.now() + SLACK * 20;
    while clock.now() < t {
        assert!(
            StdClock.now() < give_up,
            "the updater never caught up with {t:?}"
        );
        thread::sleep(clock.resolution() / 5);
    }
}

#[test]
fn a_breaker_on_it_tells_slow_from_fast() {
    let clock = clock();
    // Tens of milliseconds, many resolutions: what the coarse clock is for.
    let threshold = Duration::from_millis(20);
    let config = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(8)
        .slow_call_duration(threshold)
        .build()
        .unwrap();
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("coarse", config, clock.clone());

    // Calls that take next to nothing: fast. A reading lags by at most a
    // resolution plus the updater's delay, so a call reads long by at most
    // that: slow only if the updater had been starved for 20 ms before
    // `try_acquire` and ran between the two lines.
    for _ in 0..3 {
        let permit = b.try_acquire().unwrap();
        permit.success();
    }
    assert_eq!(b.metrics().slow_calls, 0, "an instant call read as slow");

    // A call that sleeps three resolutions beyond the threshold: slow. Its
    // outcome is recorded once the clock has caught up with the end of the
    // sleep (the updater ran since): a starved updater reads a call short,
    // which is the documented way a slow call can pass for fast, and not
    // what this checks. Measured from a start reading that lags, the call
    // reads at least as long as it slept.
    let permit = b.try_acquire().unwrap();
    sleep_past(&clock, threshold);
    permit.success();
    let m = b.metrics();
    assert_eq!((m.calls, m.slow_calls), (4, 1), "{m:?}");
}

/// A call that sleeps three resolutions beyond `threshold`, and returns once
/// `clock` has caught up with the end of its sleep (see above).
fn sleep_past(clock: &CoarseClock, threshold: Duration) {
    thread::sleep(threshold + clock.resolution() * 3);
    caught_up(clock, StdClock.now());
}

/// A policy whose breaker times on the coarse clock while its waits are on
/// a timer (`Policy::with_breaker_clock`), the same policy as a tower
/// `PolicyLayer`, and a `BreakerLayer` on a coarse-clock breaker: each
/// tells a slow call from an instant one.
#[cfg(feature = "tower")]
#[test]
fn a_policy_and_the_tower_layers_time_on_it() {
    use std::sync::Arc;
    use tower::{Layer, ServiceExt};
    use watertight::breaker::Inline;
    use watertight::clock::ManualClock;
    use watertight::policy::{Policy, PolicyConfig};
    use watertight::tower::{BreakerLayer, PolicyLayer};

    let clock = clock();
    let threshold = Duration::from_millis(20);
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(8)
        .slow_call_duration(threshold)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(4).breaker(breaker).build().unwrap();
    let timer = Arc::new(ManualClock::new());
    let policy: Arc<Policy<Arc<ManualClock>, 8, Inline<8>, CoarseClock>> = Arc::new(
        Policy::with_breaker_clock("coarse-policy", config, timer, clock.clone()).unwrap(),
    );
    futures_lite::future::block_on(async {
        policy.call(|| async { Ok::<_, ()>(()) }).await.unwrap();
        policy
            .call(|| async {
                sleep_past(&clock, threshold);
                Ok::<_, ()>(())
            })
            .await
            .unwrap();
        let m = policy.breaker().metrics();
        assert_eq!((m.calls, m.slow_calls), (2, 1), "policy: {m:?}");

        let service = |slow: bool| {
            let clock = clock.clone();
            async move {
                if slow {
                    sleep_past(&clock, threshold);
                }
                Ok::<_, ()>(())
            }
        };
        let svc = PolicyLayer::new(policy.clone()).layer(tower::service_fn(service));
        svc.clone().oneshot(false).await.unwrap();
        svc.oneshot(true).await.unwrap();
        let m = policy.breaker().metrics();
        assert_eq!((m.calls, m.slow_calls), (4, 2), "policy layer: {m:?}");

        let b: Arc<CircuitBreaker<CoarseClock, 8>> =
            Arc::new(CircuitBreaker::new("coarse-layer", breaker, clock.clone()));
        let svc = BreakerLayer::new(b.clone()).layer(tower::service_fn(service));
        svc.clone().oneshot(false).await.unwrap();
        svc.oneshot(true).await.unwrap();
        let m = b.metrics();
        assert_eq!((m.calls, m.slow_calls), (2, 1), "breaker layer: {m:?}");
    });
}
