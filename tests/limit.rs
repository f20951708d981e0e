#![cfg(not(loom))]
//! The limit algorithms under random windows and random settings: whatever
//! the windows hold, the limit never leaves `[min, max]`, and a congested
//! window never raises it.

use core::time::Duration;

use proptest::prelude::*;
use watertight::limit::{Aimd, Gradient2, LimitAlgorithm, Window};

fn window() -> impl Strategy<Value = Window> {
    (
        0usize..1_000,
        prop_oneof![
            Just(None),
            (0u64..10_000_000_000).prop_map(|n| Some(Duration::from_nanos(n))),
            Just(Some(Duration::ZERO)),
            Just(Some(Duration::MAX)),
        ],
        prop_oneof![0usize..400, Just(usize::MAX)],
        0usize..50,
        0usize..3,
        0usize..3,
    )
        .prop_map(
            |(successes, avg_rtt, max_in_flight, failed, dropped, timed_out)| Window {
                successes,
                avg_rtt,
                max_in_flight,
                failed,
                dropped,
                timed_out,
            },
        )
}

/// `(min, max, initial)` with `1 <= min <= initial <= max`.
fn bounds() -> impl Strategy<Value = (usize, usize, usize)> {
    (1usize..100, 0usize..200, 0usize..=100).prop_map(|(min, span, at)| {
        let max = min + span;
        (min, max, min + span * at / 100)
    })
}

fn check(mut alg: impl LimitAlgorithm, windows: &[Window]) -> Result<(), TestCaseError> {
    let (min, max) = (alg.min_limit(), alg.max_limit());
    prop_assert!((min..=max).contains(&alg.limit()));
    for w in windows {
        let before = alg.limit();
        let after = alg.update(w);
        prop_assert_eq!(after, alg.limit());
        prop_assert!(
            (min..=max).contains(&after),
            "{} outside [{}, {}]",
            after,
            min,
            max
        );
        if w.congested() {
            prop_assert!(
                after <= before,
                "a congested window raised {} to {}",
                before,
                after
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn aimd_stays_within_its_bounds(
        (min, max, initial) in bounds(),
        ratio in 0.5f64..1.0,
        timeout_ms in 1u64..10_000,
        windows in proptest::collection::vec(window(), 1..200),
    ) {
        let aimd = Aimd::builder()
            .min_limit(min)
            .max_limit(max)
            .initial_limit(initial)
            .backoff_ratio(ratio)
            .timeout(Duration::from_millis(timeout_ms))
            .build()
            .unwrap();
        check(aimd, &windows)?;
    }

    #[test]
    fn gradient2_stays_within_its_bounds(
        (min, max, initial) in bounds(),
        smoothing in 0.01f64..=1.0,
        tolerance in 1.0f64..4.0,
        queue in 0usize..16,
        long_window in 1u32..1_000,
        windows in proptest::collection::vec(window(), 1..200),
    ) {
        let g = Gradient2::builder()
            .min_limit(min)
            .max_limit(max)
            .initial_limit(initial)
            .smoothing(smoothing)
            .tolerance(tolerance)
            .queue_size(queue)
            .long_window(long_window)
            .build()
            .unwrap();
        check(g, &windows)?;
    }
}

/// `AdaptiveBulkhead::call`: a verdict is recorded, no verdict (`None`) and
/// a cancelled call record nothing, and the slot comes back either way.
#[test]
fn call_records_only_a_verdict() {
    use futures_lite::future::{block_on, poll_once};
    use watertight::clock::ManualClock;
    use watertight::limit::{AdaptiveBulkhead, Signal};

    let clock = ManualClock::new();
    let aimd = Aimd::builder()
        .min_limit(1)
        .initial_limit(10)
        .build()
        .unwrap();
    let b = AdaptiveBulkhead::with_window("t", aimd, Duration::ZERO, 1, &clock);
    // No verdict: nothing recorded, no window closed.
    block_on(b.call(async { 503 }, |_| None)).unwrap();
    assert_eq!((b.limit(), b.windows()), (10, 0));
    // Cancelled while the call is pending: nothing recorded either.
    {
        let mut pending =
            Box::pin(b.call(std::future::pending::<u16>(), |_| Some(Signal::Dropped)));
        assert!(block_on(poll_once(pending.as_mut())).is_none());
        assert_eq!(b.bulkhead().in_flight(), 1);
    }
    assert_eq!(
        (b.limit(), b.windows(), b.bulkhead().in_flight()),
        (10, 0, 0)
    );
    // A verdict: recorded, and with a zero window it closes one.
    block_on(b.call(async { 503 }, |s| (*s == 503).then_some(Signal::Dropped))).unwrap();
    assert_eq!(
        (b.limit(), b.windows(), b.bulkhead().in_flight()),
        (9, 1, 0)
    );
}

/// `AdaptiveLimit` steering a `Policy`'s own bulkhead: drops reported
/// after each call shrink it window by window, a refusal by the policy is
/// not reported, and the permits all come back.
#[test]
fn adaptive_limit_steers_a_policys_bulkhead() {
    use futures_lite::future::block_on;
    use watertight::clock::{Clock, ManualClock};
    use watertight::limit::{AdaptiveLimit, Signal};
    use watertight::policy::{ErrorKind, Policy, PolicyConfig};

    let clock = ManualClock::new();
    let config = PolicyConfig::builder(10)
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    let aimd = Aimd::builder()
        .min_limit(1)
        .initial_limit(10)
        .build()
        .unwrap();
    let limit = AdaptiveLimit::with_window(aimd, Duration::from_secs(1), 1, clock.now());
    let mut capacities = Vec::new();
    for _ in 0..3 {
        let started = clock.now();
        let r = block_on(search.call(|| async { Err::<(), u16>(503) }));
        let signal = match r {
            Ok(()) => Some(Signal::Success),
            Err(e) if matches!(e.kind(), ErrorKind::Call(503)) => Some(Signal::Dropped),
            Err(_) => None,
        };
        clock.advance(Duration::from_secs(1));
        limit.record(search.bulkhead(), started, signal.unwrap());
        capacities.push(search.bulkhead().capacity());
    }
    // 10 → 9 → 8 → 7: floor(L × 0.9) each window.
    assert_eq!(capacities, [9, 8, 7]);
    assert_eq!(limit.limit_changes(), 3);
    assert_eq!(search.bulkhead().in_flight(), 0);
    assert_eq!(search.bulkhead().available(), 7);
}
