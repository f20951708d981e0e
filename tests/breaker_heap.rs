#![cfg(not(loom))]
//! The breaker's behaviour with a window sized at run time: the scenarios of
//! `tests/breaker/` (the window, evaluation, thresholds, slow calls, the
//! open wait, half-open probes, generations, the operator switches, the
//! listener, `call`), scaled to the window, on a [`HeapBreaker`] with a
//! window of 100 and of 1000, and — as the control that the two storages
//! behave alike — on a compile-time `CircuitBreaker<_, 1000>` with the same
//! config. `tests/breaker_model.rs` runs its model against the heap breaker
//! too, with small and large windows.

use std::cell::RefCell;
use std::time::Duration;

use futures_lite::future;
use watertight::breaker::{HeapBreaker, Inline, OnTransition, State, Transition, WindowStorage};
use watertight::clock::{Clock, ManualClock};
use watertight::{BreakerConfig, CallError, CircuitBreaker, Outcome, Rejection};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// A breaker of either storage, made the one way both can be made.
fn make<const N: usize, W: WindowStorage>(
    clock: &ManualClock,
    config: BreakerConfig,
) -> CircuitBreaker<&ManualClock, N, (), W> {
    CircuitBreaker::try_new("b", config, clock).expect("the window fits")
}

#[track_caller]
fn succeed<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    b: &CircuitBreaker<C, N, H, W>,
    n: usize,
) {
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").success();
    }
}

#[track_caller]
fn fail<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    b: &CircuitBreaker<C, N, H, W>,
    n: usize,
) {
    for _ in 0..n {
        b.try_acquire().expect("the breaker admits").failure();
    }
}

fn counts<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    b: &CircuitBreaker<C, N, H, W>,
) -> (usize, usize, usize) {
    let m = b.metrics();
    (m.calls, m.failed_calls, m.slow_calls)
}

/// Window `w`, rates from `w` calls, 50 %, open 10 s, 2 probes.
fn config(w: usize) -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(w)
        .minimum_calls(w)
        .open_duration(10 * SEC)
        .half_open_calls(2)
        .build()
        .unwrap()
}

/// The fewest failures of `w` calls that reach 50 %.
fn half(w: usize) -> usize {
    w.div_ceil(2)
}

/// `n` of `w`, in percent.
fn pct(n: usize, w: usize) -> f32 {
    n as f32 * 100.0 / w as f32
}

/// Opens a breaker made with `config(w)`: `half(w)` failures after a full
/// window of successes.
fn trip<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    b: &CircuitBreaker<C, N, H, W>,
    w: usize,
) {
    succeed(b, w);
    fail(b, half(w));
    assert_eq!(b.state(), State::Open);
}

// ---- the scenarios, generic over the window's size and storage -----------

/// The window fills up to `window_size`, then evicts the oldest outcome.
fn window_fills_then_evicts<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    fail(&b, 3);
    succeed(&b, w - 4);
    assert_eq!(counts(&b), (w - 1, 3, 0));
    succeed(&b, 1);
    assert_eq!(counts(&b), (w, 3, 0));
    // Three more successes push the three failures out, one by one.
    for left in [2, 1, 0] {
        succeed(&b, 1);
        assert_eq!(counts(&b), (w, left, 0));
    }
    // Many laps of a healthy window (the path that writes nothing).
    succeed(&b, 3 * w);
    assert_eq!(counts(&b), (w, 0, 0));
    assert_eq!(b.state(), State::Closed);
}

/// Nothing is evaluated below `minimum_calls`; at it, `rate >= threshold`
/// trips, and a success can be the outcome that trips.
fn a_success_at_the_minimum_can_trip<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    fail(&b, half(w));
    succeed(&b, w - half(w) - 1);
    assert_eq!(b.state(), State::Closed, "below the minimum: not evaluated");
    assert_eq!(b.metrics().failure_rate, None);
    succeed(&b, 1);
    assert_eq!(b.state(), State::Open, "50 % of {w} at the minimum");
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls), (w, half(w)));
    assert_eq!(
        m.failure_rate,
        Some(pct(half(w), w)),
        "the frozen window shows why"
    );
}

/// One failure below the threshold does not trip; the rate is exact.
fn just_below_the_threshold_stays_closed<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    succeed(&b, w);
    fail(&b, half(w) - 1);
    assert_eq!(b.state(), State::Closed);
    let rate = b.metrics().failure_rate.unwrap();
    let want = pct(half(w) - 1, w);
    assert!(
        rate < 50.0 && (rate - want).abs() < 1e-3,
        "{rate} vs {want}"
    );
    fail(&b, 1);
    assert_eq!(b.state(), State::Open);
}

/// Slow is strictly longer than `slow_call_duration`; the slow-call rate
/// trips on its own.
fn slow_calls_trip_by_their_own_rate<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .window_size(w)
        .minimum_calls(w)
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(50.0)
        .build()
        .unwrap();
    let b = make::<N, W>(&clock, config);
    let timed = |d: Duration| {
        let p = b.try_acquire().unwrap();
        clock.advance(d);
        p.success();
    };
    for _ in 0..w - half(w) {
        timed(100 * MS); // exactly the limit: not slow
    }
    for _ in 0..half(w) - 1 {
        timed(101 * MS);
    }
    assert_eq!(counts(&b), (w - 1, 0, half(w) - 1));
    assert_eq!(b.state(), State::Closed);
    timed(101 * MS);
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (w, 0, half(w)));
    assert_eq!(m.slow_call_rate, Some(pct(half(w), w)));
}

/// Open refuses with the time left; probes pass exactly at the end of the
/// wait; exactly `half_open_calls` of them; all good closes with an empty
/// window.
fn open_wait_probes_and_close<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    trip(&b, w);
    clock.advance(4 * SEC);
    assert_eq!(
        b.try_acquire().unwrap_err(),
        Rejection::Open {
            retry_after: 6 * SEC
        }
    );
    clock.advance(6 * SEC - MS);
    assert!(b.try_acquire().is_err(), "1 ms before the end of the wait");
    clock.advance(MS);
    assert_eq!(b.state(), State::HalfOpen);
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    assert!(first.is_probe() && second.is_probe());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    first.success();
    second.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(counts(&b), (0, 0, 0), "a fresh window");
    assert_eq!(b.metrics().rejected, 3);
    // The fresh window fills to `w` again.
    succeed(&b, w + 1);
    assert_eq!(counts(&b), (w, 0, 0));
}

/// A failed probe reopens with a full new wait; an ignored one gives its
/// slot back.
fn a_failed_probe_reopens<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    trip(&b, w);
    clock.advance(10 * SEC);
    b.try_acquire().unwrap().ignore();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.try_acquire().unwrap_err(),
        Rejection::Open {
            retry_after: 10 * SEC
        }
    );
}

/// An outcome of a permit taken before a trip, a reset or a force-open is
/// stale and changes nothing.
fn outcomes_of_an_older_generation_are_stale<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    let old = b.try_acquire().unwrap();
    trip(&b, w);
    old.failure();
    assert_eq!(b.metrics().stale, 1);
    b.reset();
    let before_reset = b.try_acquire().unwrap();
    b.reset();
    before_reset.failure();
    let before_force = b.try_acquire().unwrap();
    b.force_open();
    before_force.success();
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.stale), (State::ForcedOpen, 0, 3));
}

/// The operator's switches: forced open refuses everything, disabled
/// records nothing, reset closes with an empty window.
fn operator_switches<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    fail(&b, 3);
    assert!(b.force_open());
    assert!(!b.force_open());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    assert_eq!(counts(&b), (3, 3, 0), "the frozen window");
    assert!(b.disable());
    fail(&b, w);
    assert_eq!(b.state(), State::Disabled);
    b.reset();
    assert_eq!((b.state(), counts(&b)), (State::Closed, (0, 0, 0)));
}

/// The listener hears every state change, in order.
fn the_listener_hears_every_change<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let listen = |t: &Transition| log.borrow_mut().push((t.from, t.to));
    let b = CircuitBreaker::<_, N, _, W>::try_with_listener("b", config(w), &clock, listen)
        .expect("the window fits");
    trip(&b, w);
    clock.advance(10 * SEC);
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().success();
    b.reset(); // from Closed: no change of state, nothing told
    assert_eq!(
        *log.borrow(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ]
    );
}

/// `call` and `call_with` record what the classifier says and return the
/// result as it was.
fn call_and_classify<const N: usize, W: WindowStorage>(w: usize) {
    let clock = ManualClock::new();
    let b = make::<N, W>(&clock, config(w));
    let classify = |r: &Result<u16, ()>| match r {
        Ok(s) if *s >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(()) => Outcome::Ignored,
    };
    for status in [200, 404, 503] {
        let got = future::block_on(b.call_with(async move { Ok(status) }, classify));
        assert_eq!(got, Ok(status));
    }
    assert_eq!(
        future::block_on(b.call(async { Err::<u8, _>("boom") })),
        Err(CallError::Failed("boom"))
    );
    assert_eq!(counts(&b), (4, 2, 0));
    b.force_open();
    assert_eq!(
        future::block_on(b.call(async { Ok::<_, ()>(1) })),
        Err(CallError::Rejected(Rejection::ForcedOpen))
    );
}

macro_rules! scenarios {
    ($($name:ident: $n:expr_2021, $storage:ty, $window:expr_2021;)*) => {
        $(
            mod $name {
                use super::*;

                #[test]
                fn window_fills_then_evicts() {
                    super::window_fills_then_evicts::<{ $n }, $storage>($window);
                }
                #[test]
                fn a_success_at_the_minimum_can_trip() {
                    super::a_success_at_the_minimum_can_trip::<{ $n }, $storage>($window);
                }
                #[test]
                fn just_below_the_threshold_stays_closed() {
                    super::just_below_the_threshold_stays_closed::<{ $n }, $storage>($window);
                }
                #[test]
                fn slow_calls_trip_by_their_own_rate() {
                    super::slow_calls_trip_by_their_own_rate::<{ $n }, $storage>($window);
                }
                #[test]
                fn open_wait_probes_and_close() {
                    super::open_wait_probes_and_close::<{ $n }, $storage>($window);
                }
                #[test]
                fn a_failed_probe_reopens() {
                    super::a_failed_probe_reopens::<{ $n }, $storage>($window);
                }
                #[test]
                fn outcomes_of_an_older_generation_are_stale() {
                    super::outcomes_of_an_older_generation_are_stale::<{ $n }, $storage>($window);
                }
                #[test]
                fn operator_switches() {
                    super::operator_switches::<{ $n }, $storage>($window);
                }
                #[test]
                fn the_listener_hears_every_change() {
                    super::the_listener_hears_every_change::<{ $n }, $storage>($window);
                }
                #[test]
                fn call_and_classify() {
                    super::call_and_classify::<{ $n }, $storage>($window);
                }
            }
        )*
    };
}

scenarios! {
    heap_100: BreakerConfig::MAX_WINDOW_SIZE, watertight::breaker::Heap, 100;
    heap_1000: BreakerConfig::MAX_WINDOW_SIZE, watertight::breaker::Heap, 1000;
    heap_1023: BreakerConfig::MAX_WINDOW_SIZE, watertight::breaker::Heap, 1023;
    inline_1000: 1000, Inline<1000>, 1000;
}

// ---- what only the heap breaker does ---------------------------------------

#[test]
fn a_heap_breaker_takes_every_window_a_config_holds() {
    let clock = ManualClock::new();
    for w in [1, 2, 64, 65, 100, 512, 1000, BreakerConfig::MAX_WINDOW_SIZE] {
        let config = BreakerConfig::builder()
            .window_size(w)
            .minimum_calls(1)
            .build()
            .unwrap();
        let b: HeapBreaker<_> = HeapBreaker::try_new("w", config, &clock).unwrap();
        succeed(&b, w + 1);
        assert_eq!(counts(&b), (w, 0, 0), "window {w}");
        assert!(
            format!("{b:?}").contains(&format!("capacity: {w}")),
            "{b:?}"
        );
    }
    // Above the largest, the config itself refuses, naming the field.
    let err = BreakerConfig::builder()
        .window_size(1024)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), watertight::breaker::BreakerField::WindowSize);
}

#[test]
fn a_heap_breaker_is_send_and_sync_and_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<HeapBreaker<watertight::clock::StdClock>>();

    let b = std::sync::Arc::new(
        HeapBreaker::try_new("shared", config(1000), watertight::clock::StdClock).unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || succeed(&*b, 500))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        counts(&*b),
        (1000, 0, 0),
        "2000 outcomes, the last 1000 kept"
    );
}

/// The tower layers and the exporters take the heap breaker and policy as
/// they take the compile-time ones.
#[cfg(all(feature = "tower", feature = "metrics"))]
#[test]
fn tower_layers_and_exporters_take_the_heap_breaker_and_policy() {
    use std::sync::Arc;
    use tower::{Layer, ServiceExt};
    use watertight::metrics::{BreakerExporter, PolicyExporter};
    use watertight::policy::{HeapPolicy, PolicyConfig};
    use watertight::tower::{BreakerError, BreakerLayer, PolicyLayer};

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let clock = Arc::new(ManualClock::new());
    future::block_on(async {
        let breaker =
            Arc::new(HeapBreaker::try_new("pricing", config(100), clock.clone()).unwrap());
        let exporter = metrics::with_local_recorder(&recorder, || BreakerExporter::new(&*breaker));
        let svc =
            BreakerLayer::new(breaker.clone()).layer(tower::service_fn(|n: u32| async move {
                if n == 0 {
                    Err(())
                } else {
                    Ok(n)
                }
            }));
        for n in 0..100 {
            let r = svc.clone().oneshot(n % 2).await;
            assert_eq!(r.is_ok(), n % 2 == 1);
        }
        assert_eq!(breaker.state(), State::Open, "50 failures of 100");
        assert!(matches!(
            svc.oneshot(1).await,
            Err(BreakerError::Rejected(_))
        ));
        exporter.update(&*breaker);

        let window = BreakerConfig::builder().window_size(100).build().unwrap();
        let config = PolicyConfig::builder(4).breaker(window).build().unwrap();
        let stock: Arc<HeapPolicy<_>> =
            Arc::new(HeapPolicy::new("stock", config, clock.clone()).unwrap());
        let policy_exporter =
            metrics::with_local_recorder(&recorder, || PolicyExporter::new(&*stock));
        let svc = PolicyLayer::new(stock.clone()).layer(tower::service_fn(|n: u32| async move {
            Ok::<_, ()>(n + 1)
        }));
        for n in 0..150 {
            assert_eq!(svc.clone().oneshot(n).await, Ok(n + 1));
        }
        policy_exporter.update(&stock);
        assert_eq!(stock.breaker().metrics().calls, 100);
    });
    let text = prometheus.render();
    assert!(
        text.contains(r#"circuit_breaker_state{system="pricing"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"circuit_breaker_calls{system="pricing",outcome="failure"} 50"#),
        "{text}"
    );
    assert!(
        text.contains(r#"circuit_breaker_calls{system="stock",outcome="success"} 100"#),
        "{text}"
    );
}
