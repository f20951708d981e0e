//! `Policy::call_injected`: faults injected where a policy call starts, on
//! `ManualClock`. The breaker judges an injected error as the call's own,
//! a latency runs under the call timeout on the policy's clock, a hang is a
//! timeout, a refused call takes no draw, and the same seed gives the same
//! faults as `Injector::inject`.
#![cfg(not(loom))]

use core::cell::Cell;
use core::time::Duration;

use futures_lite::future::{block_on, poll_once};
use watertight::chaos::{ChaosConfig, Fault, Injector};
use watertight::clock::{Clock, ManualClock};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};

type Out = Result<u16, &'static str>;

fn policy(clock: &ManualClock) -> Policy<&ManualClock> {
    let config = PolicyConfig::builder(4)
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    Policy::new("pricing", config, clock).unwrap()
}

fn one(fault: Fault) -> ChaosConfig<Out> {
    let b = ChaosConfig::builder().seed(1);
    match fault {
        Fault::Error => b.error(1.0, || Err("injected")),
        Fault::Outcome => b.outcome(1.0, || Ok(503)),
        Fault::Latency => b.latency(1.0, Duration::from_millis(300)),
        Fault::Hang => b.hang(1.0),
    }
    .build()
    .unwrap()
}

/// One call through `p` and `chaos`, run to its end: its result, and
/// whether the closure was called.
fn once(p: &Policy<&ManualClock>, chaos: &Injector<&ManualClock, Out>) -> (Out, bool) {
    let made = Cell::new(false);
    let r = block_on(p.call_injected(chaos, || {
        made.set(true);
        async { Ok::<u16, &str>(200) }
    }));
    (
        r.map_err(|e| e.into_inner().unwrap_or("refused")),
        made.get(),
    )
}

#[test]
fn disabled_makes_the_call_and_takes_no_draw() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Error), &clock);
    chaos.disable();
    for _ in 0..5 {
        assert_eq!(once(&p, &chaos), (Ok(200), true));
    }
    let m = chaos.metrics();
    assert_eq!((m.total_injected(), m.passed), (0, 0));
    assert_eq!(p.breaker().metrics().calls, 5);
}

#[test]
fn an_injected_error_is_the_calls_error_and_a_failure() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Error), &clock);
    // The call's own error (not a refusal), and never a call.
    assert_eq!(once(&p, &chaos), (Err("injected"), false));
    assert_eq!(p.breaker().metrics().failed_calls, 1);
    assert_eq!(p.bulkhead().available(), 4, "the slot came back");
    assert_eq!(chaos.metrics().injected(Fault::Error), 1);
}

#[test]
fn an_injected_outcome_is_the_calls_answer() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Outcome), &clock);
    assert_eq!(once(&p, &chaos), (Ok(503), false));
    assert_eq!(p.breaker().metrics().calls, 1);
}

#[test]
fn a_latency_is_slept_on_the_policys_clock_then_the_call_is_made() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Latency), &clock);
    let made = Cell::new(false);
    clock.advance(Duration::from_millis(17)); // not from zero
    let start = clock.now();
    let call = p.call_injected(&chaos, || {
        made.set(true);
        async { Ok::<u16, &str>(200) }
    });
    futures_lite::pin!(call);
    assert!(block_on(poll_once(&mut call)).is_none());
    assert_eq!(
        p.bulkhead().available(),
        3,
        "the slot is held during the latency"
    );
    clock.advance(Duration::from_nanos(299_999_999));
    assert!(block_on(poll_once(&mut call)).is_none());
    assert!(!made.get(), "not made during the latency");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(block_on(poll_once(&mut call)), Some(Ok(200)));
    assert!(made.get());
    assert_eq!(clock.now() - start, Duration::from_millis(300));
    assert_eq!(p.bulkhead().available(), 4);
    assert_eq!(p.breaker().metrics().calls, 1);
}

/// Polls a call that `chaos` keeps from being made until the policy's
/// 500 ms call timeout: pending at 499 ms, then a timeout recorded as a
/// failure, the closure never called.
fn times_out_unmade(chaos: ChaosConfig<Out>) {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", chaos, &clock);
    let made = Cell::new(false);
    let call = p.call_injected(&chaos, || {
        made.set(true);
        async { Ok::<u16, &str>(200) }
    });
    futures_lite::pin!(call);
    assert!(block_on(poll_once(&mut call)).is_none());
    clock.advance(Duration::from_millis(499));
    assert!(block_on(poll_once(&mut call)).is_none());
    clock.advance(Duration::from_millis(1));
    let err = block_on(call).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::DeadlineExceeded), "{err:?}");
    assert!(!made.get());
    assert_eq!(p.breaker().metrics().failed_calls, 1);
    assert_eq!(p.bulkhead().available(), 4);
}

#[test]
fn a_latency_past_the_call_timeout_is_a_timeout() {
    times_out_unmade(
        ChaosConfig::builder()
            .latency(1.0, Duration::from_secs(2))
            .build()
            .unwrap(),
    );
}

#[test]
fn a_hang_is_a_timeout_and_never_makes_the_call() {
    times_out_unmade(one(Fault::Hang));
}

#[test]
fn a_call_dropped_during_the_latency_is_never_made_and_gives_its_slot_back() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Latency), &clock);
    let made = Cell::new(false);
    {
        let call = p.call_injected(&chaos, || {
            made.set(true);
            async { Ok::<u16, &str>(200) }
        });
        futures_lite::pin!(call);
        assert!(block_on(poll_once(&mut call)).is_none());
        assert_eq!(p.bulkhead().available(), 3);
    }
    clock.advance(Duration::from_secs(1));
    assert!(!made.get());
    assert_eq!(p.bulkhead().available(), 4);
    let b = p.breaker().metrics();
    assert_eq!((b.calls, b.failed_calls), (0, 0), "nothing recorded");
}

#[test]
fn a_refused_call_takes_no_draw() {
    let clock = ManualClock::new();
    let p = policy(&clock);
    let chaos = Injector::new("pricing", one(Fault::Error), &clock);
    p.breaker().force_open();
    let err = block_on(p.call_injected(&chaos, || async { Ok::<u16, &str>(200) })).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::CircuitOpen(_)), "{err:?}");
    assert_eq!(chaos.metrics().total_injected(), 0);
}

#[test]
fn the_same_seed_gives_the_same_faults_as_inject() {
    let mixed = || {
        ChaosConfig::builder()
            .error(0.2, || Err("injected"))
            .outcome(0.1, || Ok(503))
            .seed(11)
            .build()
            .unwrap()
    };
    let clock = ManualClock::new();
    let p = policy(&clock);
    let through_policy = Injector::new("pricing", mixed(), &clock);
    let bare = Injector::new("pricing", mixed(), &clock);
    for i in 0..300 {
        let a = block_on(p.call_injected(&through_policy, || async { Ok::<u16, &str>(200) }));
        let b = block_on(bare.inject(async { Ok::<u16, &str>(200) }));
        match (a, b) {
            (Ok(x), Ok(y)) => assert_eq!(x, y, "call {i}"),
            (Err(e), Err(y)) => assert_eq!(e.into_inner(), Some(y), "call {i}"),
            (a, b) => panic!("call {i}: {a:?} against {b:?}"),
        }
        p.breaker().reset();
    }
    assert_eq!(through_policy.metrics(), bare.metrics());
}

#[test]
fn a_panicking_fault_maker_records_a_failure_and_gives_the_slot_back() {
    // The injected start runs outside the breaker's unwind guard, with its
    // permit kept in the future: dropped while unwinding, the future
    // records the failure and gives the slot back.
    let clock = ManualClock::new();
    let p = policy(&clock);
    let config = ChaosConfig::builder()
        .error(1.0, || panic!("the maker broke"))
        .build()
        .unwrap();
    let chaos = Injector::new("pricing", config, &clock);
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        block_on(p.call_injected(&chaos, || async { Ok::<u16, &str>(200) }))
    }));
    assert!(unwound.is_err());
    assert_eq!(p.breaker().metrics().failed_calls, 1);
    assert_eq!(p.bulkhead().available(), 4, "the slot came back");
}
