//! The operator's switches: force open, disable, reset.

use super::*;

// ---- operator switches -------------------------------------------------------

#[test]
fn force_open_rejects_with_forced_open_and_no_hint() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("f", cfg(small()), &clock);
    assert!(b.force_open());
    assert_eq!(b.state(), State::ForcedOpen);
    let why = b.try_acquire().unwrap_err();
    assert_eq!(why, Rejection::ForcedOpen);
    assert_eq!(why.retry_after(), None);
    // It does not end by itself.
    clock.advance(3600 * SEC);
    assert_eq!(b.state(), State::ForcedOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    b.reset();
    assert!(!b.try_acquire().unwrap().is_probe());
}

#[test]
fn force_open_twice_returns_false_the_second_time() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("f", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    fail(&b, 2); // from Open too
    assert!(b.force_open());
    assert!(!b.force_open());
    assert_eq!(b.state(), State::ForcedOpen);
    assert!(b.disable());
    assert!(!b.disable());
    let seen: Vec<_> = log.borrow().iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(
        seen,
        [
            (State::Closed, State::Open),
            (State::Open, State::ForcedOpen),
            (State::ForcedOpen, State::Disabled),
        ]
    );
}

#[test]
fn disabled_admits_everything_and_records_nothing() {
    let clock = ManualClock::new();
    let config = cfg(small().slow_call_duration(MS));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("d", config, &clock);
    fail(&b, 2);
    assert_eq!(b.state(), State::Open);
    assert!(b.disable());
    assert_eq!(b.state(), State::Disabled);
    for _ in 0..20 {
        let p = b.try_acquire().expect("disabled admits");
        assert!(!p.is_probe());
        clock.advance(SEC);
        p.failure();
    }
    let m = b.metrics();
    assert_eq!(m.state, State::Disabled);
    // The frozen window of the trip, untouched; nothing stale, nothing rejected.
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (2, 2, 0));
    assert_eq!((m.stale, m.rejected), (0, 0));
}

#[test]
fn reset_from_closed_tells_nothing_and_keeps_last_transition() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("r", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    // Never transitioned: a reset of the closed breaker tells nothing.
    succeed(&b, 1);
    let old = b.try_acquire().unwrap();
    clock.advance(SEC);
    b.reset();
    assert!(
        log.borrow().is_empty(),
        "reset from Closed told {:?}",
        log.borrow()
    );
    let m = b.metrics();
    assert_eq!(
        (m.state, m.calls, m.last_transition),
        (State::Closed, 0, None)
    );
    old.failure();
    assert_eq!(
        b.metrics().stale,
        1,
        "a permit from before the reset is stale"
    );

    // After a real transition, a reset from Closed leaves its time alone.
    fail(&b, 2); // Closed -> Open at 1 s
    clock.advance(10 * SEC);
    succeed(&b, 2); // HalfOpen at 11 s, Closed at 11 s
    assert_eq!(b.state(), State::Closed);
    let told = log.borrow().len();
    clock.advance(SEC);
    b.reset();
    assert_eq!(log.borrow().len(), told);
    assert_eq!(b.metrics().last_transition, Some(at(11 * SEC)));

    // From any other state it is a transition, told as such.
    fail(&b, 2); // Open at 12 s
    clock.advance(SEC);
    b.reset();
    let last = *log.borrow().last().unwrap();
    assert_eq!(
        (last.from, last.to, last.at),
        (State::Open, State::Closed, at(13 * SEC))
    );
    assert!(log.borrow().iter().all(|t| t.from != t.to));
}

#[test]
fn reset_from_every_state_closes_with_an_empty_window() {
    for from in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ] {
        let clock = ManualClock::new();
        let b: CircuitBreaker<_, 4> = CircuitBreaker::new("r", cfg(small()), &clock);
        let mut outstanding = None;
        match from {
            State::Closed => {
                succeed(&b, 2);
                fail(&b, 1); // 1 of 3
            }
            State::Open => fail(&b, 2),
            State::HalfOpen => {
                fail(&b, 2);
                clock.advance(10 * SEC);
                succeed(&b, 1);
                outstanding = Some(b.try_acquire().unwrap());
            }
            State::ForcedOpen => {
                fail(&b, 1);
                b.force_open();
            }
            State::Disabled => {
                fail(&b, 1);
                b.disable();
            }
        }
        assert_eq!(b.state(), from);
        assert!(b.metrics().calls > 0, "{from}: the window holds outcomes");
        b.reset();
        let m = b.metrics();
        assert_eq!(m.state, State::Closed, "{from}");
        assert_eq!(
            (m.calls, m.failed_calls, m.failure_rate),
            (0, 0, None),
            "{from}"
        );
        if let Some(p) = outstanding {
            p.success();
            assert_eq!(b.metrics().stale, 1, "{from}");
        }
        // And it works as a fresh closed breaker.
        let p = b.try_acquire().unwrap();
        assert!(!p.is_probe(), "{from}");
        p.failure();
        assert_eq!(b.state(), State::Closed, "{from}");
        fail(&b, 1);
        assert_eq!(b.state(), State::Open, "{from}");
    }
}
