//! The permit API, `call` and `call_with`, metrics and the listener.

use super::*;

// ---- the permit API ------------------------------------------------------------

#[test]
fn permit_success_failure_ignore_and_record() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("p", config, &clock);
    let p = b.try_acquire().unwrap();
    assert_eq!(p.breaker().name(), "p");
    assert!(!p.is_probe());
    p.success();
    assert_eq!(counts(&b), (1, 0, 0));
    b.try_acquire().unwrap().failure();
    assert_eq!(counts(&b), (2, 1, 0));
    b.try_acquire().unwrap().ignore();
    assert_eq!(counts(&b), (2, 1, 0));
    b.try_acquire().unwrap().record(Outcome::Success);
    assert_eq!(counts(&b), (3, 1, 0));
    b.try_acquire().unwrap().record(Outcome::Failure);
    assert_eq!(counts(&b), (4, 2, 0));
    b.try_acquire().unwrap().record(Outcome::Ignored);
    assert_eq!(counts(&b), (4, 2, 0));

    // record(Ignored) gives a probe's slot back, like ignore().
    let h: CircuitBreaker<_, 4> = CircuitBreaker::new("p", cfg(small().half_open_calls(1)), &clock);
    fail(&h, 2);
    clock.advance(10 * SEC);
    let probe = h.try_acquire().unwrap();
    assert_eq!(h.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    probe.record(Outcome::Ignored);
    h.try_acquire().unwrap().record(Outcome::Success);
    assert_eq!(h.state(), State::Closed);
}

#[test]
fn permit_dropped_without_outcome_records_nothing() {
    let clock = ManualClock::new();
    let config = cfg(small().minimum_calls(1));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("p", config, &clock);
    for _ in 0..10 {
        drop(b.try_acquire().unwrap());
    }
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.stale), (State::Closed, 0, 0));
}

#[test]
fn permit_dropped_during_a_panic_records_a_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(4).minimum_calls(4));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("p", config, &clock);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
        let _permit = b.try_acquire().unwrap();
        panic!("the call panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(counts(&b), (1, 1, 0));

    // A probe that panics reopens.
    let h: CircuitBreaker<_, 4> = CircuitBreaker::new("p", cfg(small()), &clock);
    fail(&h, 2);
    clock.advance(10 * SEC);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
        let _probe = h.try_acquire().unwrap();
        panic!("the probe panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(h.state(), State::Open);
    assert_eq!(open_hint(&h), 10 * SEC);
}

// ---- call / call_with ----------------------------------------------------------

#[test]
fn call_ok_is_success_and_err_is_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("c", config, &clock);
    future::block_on(async {
        assert_eq!(b.call(async { Ok::<u8, &str>(7) }).await, Ok(7));
        assert_eq!(counts(&b), (1, 0, 0));
        assert_eq!(
            b.call(async { Err::<u8, &str>("boom") }).await,
            Err(CallError::Failed("boom"))
        );
        assert_eq!(counts(&b), (2, 1, 0));
    });
}

#[test]
fn call_with_classifier_decides_the_outcome() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(8).minimum_calls(8));
    let b: CircuitBreaker<_, 8> = CircuitBreaker::new("c", config, &clock);
    let http = |r: &Result<u16, &str>| match r {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Ignored,
    };
    future::block_on(async {
        // A 503 is a failure, and still returned as it is.
        assert_eq!(b.call_with(async { Ok(503) }, http).await, Ok(503));
        assert_eq!(counts(&b), (1, 1, 0));
        // A 404 is an answer.
        assert_eq!(b.call_with(async { Ok(404) }, http).await, Ok(404));
        assert_eq!(counts(&b), (2, 1, 0));
        // Ignored records nothing; the error is still the caller's.
        assert_eq!(
            b.call_with(async { Err("cancelled by caller") }, http)
                .await,
            Err(CallError::Failed("cancelled by caller"))
        );
        assert_eq!(counts(&b), (2, 1, 0));
        // An Err the classifier calls a success is recorded as one.
        let lenient = |_: &Result<u16, &str>| Outcome::Success;
        assert_eq!(
            b.call_with(async { Err::<u16, _>("not found") }, lenient)
                .await,
            Err(CallError::Failed("not found"))
        );
        assert_eq!(counts(&b), (3, 1, 0));
    });
}

#[test]
fn rejected_call_does_not_run_the_future() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(4 * SEC);
    let ran = Cell::new(false);
    let got = future::block_on(b.call(async {
        ran.set(true);
        Ok::<(), ()>(())
    }));
    assert!(!ran.get(), "the call must not run");
    assert_eq!(
        got,
        Err(CallError::Rejected(Rejection::Open {
            retry_after: 6 * SEC
        }))
    );
    assert_eq!(got.unwrap_err().retry_after(), Some(6 * SEC));
    assert_eq!(b.metrics().rejected, 1);
}

#[test]
fn call_dropped_while_pending_records_nothing_and_frees_a_probe_slot() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", cfg(small().half_open_calls(1)), &clock);
    let pending_once = || async {
        future::yield_now().await;
        Ok::<u8, ()>(1)
    };

    // Closed: nothing recorded.
    let mut call = Box::pin(b.call(pending_once()));
    assert_eq!(future::block_on(future::poll_once(call.as_mut())), None);
    drop(call);
    assert_eq!(counts(&b), (0, 0, 0));

    // Half-open: the probe slot comes back.
    fail(&b, 2);
    clock.advance(10 * SEC);
    let mut call = Box::pin(b.call(pending_once()));
    assert_eq!(future::block_on(future::poll_once(call.as_mut())), None);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    drop(call);
    assert_eq!(counts(&b), (0, 0, 0));
    assert_eq!(b.metrics().stale, 0);
    let probe = b.try_acquire().expect("the dropped call's slot");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

async fn explode() -> Result<u8, ()> {
    panic!("the call panicked")
}

#[test]
fn panicking_call_records_a_failure() {
    let clock = ManualClock::new();
    let config = cfg(builder().window_size(4).minimum_calls(4));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("c", config, &clock);
    let unwound = panic::catch_unwind(AssertUnwindSafe(|| future::block_on(b.call(explode()))));
    assert!(unwound.is_err());
    assert_eq!(counts(&b), (1, 1, 0));
}

// ---- metrics -------------------------------------------------------------------

#[test]
fn metrics_rates_are_none_until_minimum_calls_then_exact() {
    let clock = ManualClock::new();
    let config = cfg(builder()
        .window_size(4)
        .minimum_calls(3)
        .slow_call_duration(10 * MS));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", config, &clock);
    let rates = |b: &CircuitBreaker<&ManualClock, 4>| {
        let m = b.metrics();
        (m.failure_rate, m.slow_call_rate)
    };
    assert_eq!(rates(&b), (None, None));
    timed(&b, &clock, MS, Outcome::Success);
    timed(&b, &clock, 20 * MS, Outcome::Failure);
    assert_eq!(rates(&b), (None, None));
    timed(&b, &clock, MS, Outcome::Success);
    let third = 100.0_f32 / 3.0;
    assert_eq!(rates(&b), (Some(third), Some(third)));
    timed(&b, &clock, 20 * MS, Outcome::Success);
    assert_eq!(rates(&b), (Some(25.0), Some(50.0)));
    assert_eq!(counts(&b), (4, 1, 2));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn metrics_rejected_counts_every_rejection() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", cfg(small().half_open_calls(1)), &clock);
    fail(&b, 2);
    assert_eq!(b.metrics().rejected, 0, "admitted calls are not rejections");
    open_hint(&b);
    open_hint(&b);
    let by_call = future::block_on(b.call(async { Ok::<(), ()>(()) }));
    assert!(by_call.unwrap_err().is_rejected());
    assert_eq!(b.metrics().rejected, 3);
    clock.advance(10 * SEC);
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    assert_eq!(b.metrics().rejected, 4);
    probe.ignore();
    b.force_open();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    b.reset();
    // Over the breaker's life: a reset keeps it.
    assert_eq!(b.metrics().rejected, 5);
}

#[test]
fn metrics_last_transition_is_none_then_the_time_of_the_last_one() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("m", cfg(small()), &clock);
    succeed(&b, 1);
    clock.advance(5 * MS);
    assert_eq!(b.metrics().last_transition, None);
    fail(&b, 1); // 1 of 2: trips at 5 ms
    assert_eq!(b.metrics().last_transition, Some(at(5 * MS)));
    clock.advance(10 * SEC - US);
    assert_eq!(b.metrics().last_transition, Some(at(5 * MS)));
    // Half-open by the clock since the end of the wait, 10.005 s.
    clock.advance(3 * MS + US);
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 5 * MS)));
    succeed(&b, 1); // the probe begins an episode at 10.008 s
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 8 * MS)));
    clock.advance(2 * MS);
    b.reset();
    assert_eq!(b.metrics().last_transition, Some(at(10 * SEC + 10 * MS)));
}

// ---- the listener --------------------------------------------------------------

#[test]
fn listener_sees_every_transition_exactly_once() {
    let clock = ManualClock::new();
    let log: RefCell<Vec<Transition>> = RefCell::new(Vec::new());
    let config = cfg(builder()
        .window_size(2)
        .minimum_calls(2)
        .open_duration(10 * MS)
        .half_open_calls(1)
        .max_half_open_wait(5 * MS));
    let b = CircuitBreaker::<_, 2, _>::with_listener("db", config, &clock, |t: &Transition| {
        log.borrow_mut().push(*t)
    });
    use State::*;
    clock.advance(MS);
    fail(&b, 2); // Closed -> Open at 1 ms
    clock.advance(10 * MS);
    let p = b.try_acquire().unwrap(); // Open -> HalfOpen at 11 ms
    clock.advance(MS);
    p.success(); // HalfOpen -> Closed at 12 ms
    clock.advance(MS);
    fail(&b, 2); // Closed -> Open at 13 ms
    clock.advance(10 * MS);
    let p = b.try_acquire().unwrap(); // Open -> HalfOpen at 23 ms
    clock.advance(MS);
    p.failure(); // HalfOpen -> Open at 24 ms
    clock.advance(10 * MS);
    let stuck = b.try_acquire().unwrap(); // Open -> HalfOpen at 34 ms
    clock.advance(6 * MS);
    assert_eq!(b.state(), Open); // reading tells nobody
    assert_eq!(open_hint(&b), 9 * MS); // HalfOpen -> Open as of 39 ms
    drop(stuck);
    clock.advance(MS);
    b.reset(); // Open -> Closed at 41 ms
    clock.advance(MS);
    assert!(b.force_open()); // Closed -> ForcedOpen at 42 ms
    assert!(!b.force_open());
    clock.advance(MS);
    assert!(b.disable()); // ForcedOpen -> Disabled at 43 ms
    clock.advance(MS);
    b.reset(); // Disabled -> Closed at 44 ms

    let expected = [
        (Closed, Open, 1),
        (Open, HalfOpen, 11),
        (HalfOpen, Closed, 12),
        (Closed, Open, 13),
        (Open, HalfOpen, 23),
        (HalfOpen, Open, 24),
        (Open, HalfOpen, 34),
        (HalfOpen, Open, 39),
        (Open, Closed, 41),
        (Closed, ForcedOpen, 42),
        (ForcedOpen, Disabled, 43),
        (Disabled, Closed, 44),
    ]
    .map(|(from, to, ms)| Transition {
        name: "db",
        from,
        to,
        at: at(ms * MS),
        // The two trips say what the count window held: 2 of 2 failed.
        tripped: (from == Closed && to == Open).then_some(Tripped {
            window: BreakerWindow::Count,
            calls: 2,
            failures: 2,
            slow: 0,
        }),
    });
    assert_eq!(*log.borrow(), expected);
}
