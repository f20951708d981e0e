//! Open and half-open: the open wait and its hint, probes and their cap,
//! the episode's end.

use super::*;

// ---- open --------------------------------------------------------------------

#[test]
fn open_rejects_with_exact_retry_after_that_decreases() {
    let clock = ManualClock::new();
    let config = cfg(small().open_duration(30 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", config, &clock);
    clock.advance(7 * MS);
    fail(&b, 2); // opened at 7 ms
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.try_acquire().unwrap_err(),
        Rejection::Open {
            retry_after: 30 * SEC
        }
    );
    clock.advance(MS);
    assert_eq!(open_hint(&b), 30 * SEC - MS);
    clock.advance(10 * SEC);
    assert_eq!(open_hint(&b), 20 * SEC - MS);
    clock.advance(20 * SEC - MS - US);
    assert_eq!(open_hint(&b), US);
}

#[test]
fn rejections_do_not_extend_the_open_wait() {
    let clock = ManualClock::new();
    let config = cfg(small().open_duration(30 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", config, &clock);
    fail(&b, 2);
    for k in 0..30u32 {
        for _ in 0..3 {
            assert_eq!(open_hint(&b), (30 - k) * SEC);
        }
        clock.advance(SEC);
    }
    let probe = b.try_acquire().expect("the wait ends 30 s after the trip");
    assert!(probe.is_probe());
    assert_eq!(b.metrics().rejected, 90);
}

#[test]
fn probes_allowed_exactly_at_the_end_of_the_open_wait_not_before() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("o", cfg(small()), &clock);
    clock.advance(3 * MS);
    fail(&b, 2);
    clock.advance(10 * SEC - US);
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), US);
    clock.advance(US);
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().expect("opened_at + open_duration admits");
    assert!(probe.is_probe());
    probe.success();
}

#[test]
fn state_reads_half_open_once_the_wait_is_over_without_a_call() {
    let clock = ManualClock::new();
    let log = RefCell::new(Vec::new());
    let b =
        CircuitBreaker::<_, 4, _>::with_listener("o", cfg(small()), &clock, |t: &Transition| {
            log.borrow_mut().push(*t)
        });
    clock.advance(MS);
    fail(&b, 2);
    clock.advance(10 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.state(), State::HalfOpen);
    // Reading changed nothing: no transition told.
    assert_eq!(log.borrow().len(), 1);
    // The snapshot agrees with `state()`: half-open, with the empty window
    // an episode starts with, since the end of the open wait.
    let m = b.metrics();
    assert_eq!(m.state, State::HalfOpen);
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (0, 0, 0));
    assert_eq!((m.failure_rate, m.slow_call_rate), (None, None));
    assert_eq!(m.last_transition, Some(at(MS + 10 * SEC)));
    clock.advance(2 * SEC);
    assert_eq!(b.metrics().last_transition, Some(at(MS + 10 * SEC)));
    assert_eq!(b.metrics().calls, 0);
    // The next call is the first probe and makes the transition, dated at
    // its admission.
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(log.borrow().len(), 2);
    assert_eq!(log.borrow()[1].at, at(MS + 12 * SEC));
    let m = b.metrics();
    assert_eq!((m.state, m.calls), (State::HalfOpen, 0));
    assert_eq!(m.last_transition, Some(at(MS + 12 * SEC)));
    probe.failure();
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Open, 1, 1));
}

#[test]
fn metrics_of_an_expired_episode_agree_with_state_through_the_next_wait() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap(); // half-open at 10 s
    clock.advance(5 * SEC); // ran out at 15 s: Open, by the clock
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!(m.last_transition, Some(at(15 * SEC)));
    // After that open wait too, still untouched: half-open with an empty
    // window since 25 s.
    clock.advance(10 * SEC);
    let m = b.metrics();
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        (m.state, m.calls, m.failure_rate),
        (State::HalfOpen, 0, None)
    );
    assert_eq!(m.last_transition, Some(at(25 * SEC)));
    drop(stuck);
}

// ---- half-open -------------------------------------------------------------

#[test]
fn half_open_admits_exactly_half_open_calls_in_total() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    let p3 = b.try_acquire().unwrap();
    assert!(p1.is_probe() && p2.is_probe() && p3.is_probe());
    let busy = b.try_acquire().unwrap_err();
    assert_eq!(busy, Rejection::ProbesBusy);
    assert_eq!(busy.retry_after(), None);
    // In total, not at once: a finished probe does not free its slot.
    p1.success();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    assert_eq!(b.state(), State::HalfOpen);
    p3.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().rejected, 3);
}

#[test]
fn ignored_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p1.ignore();
    assert_eq!(b.metrics().calls, 0, "an ignored probe records nothing");
    let p3 = b.try_acquire().expect("the ignored probe's slot");
    assert!(p3.is_probe());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the ignored probe was no success"
    );
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn dropped_probe_permit_gives_its_slot_back() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small()), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    drop(p1);
    assert_eq!(b.metrics().calls, 0, "a dropped probe records nothing");
    let p3 = b.try_acquire().expect("the dropped probe's slot");
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    p2.success();
    assert_eq!(b.state(), State::HalfOpen);
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn first_failed_probe_reopens_with_a_new_full_wait() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    clock.advance(3 * SEC);
    p1.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), 10 * SEC, "a full wait from the failed probe");
    clock.advance(10 * SEC - US);
    assert_eq!(open_hint(&b), US);
    p2.success(); // the episode is over: too late
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().stale, 1);
    clock.advance(US);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn slow_probe_reopens() {
    let clock = ManualClock::new();
    let config = cfg(small().slow_call_duration(SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    timed(&b, &clock, SEC, Outcome::Success); // exactly 1 s: not slow
    assert_eq!(b.state(), State::HalfOpen);
    timed(&b, &clock, SEC + US, Outcome::Success);
    assert_eq!(b.state(), State::Open);
    assert_eq!(open_hint(&b), 10 * SEC);
    // The window kept the probes for metrics.
    assert_eq!(counts(&b), (2, 0, 1));
}

#[test]
fn all_probes_succeeding_close_with_an_empty_window() {
    let clock = ManualClock::new();
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", cfg(small().half_open_calls(3)), &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    for n in 1..=2 {
        succeed(&b, 1);
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.metrics().calls, n, "probes are recorded for metrics");
    }
    succeed(&b, 1);
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!((m.calls, m.failed_calls, m.failure_rate), (0, 0, None));
    assert!(!b.try_acquire().unwrap().is_probe());
}

#[test]
fn max_half_open_wait_reopens_a_stuck_episode_and_the_late_outcome_is_stale() {
    let clock = ManualClock::new();
    let config = cfg(small().max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap(); // the episode began at 10 s
    clock.advance(5 * SEC - US);
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(US); // 15 s = began + max wait
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().state, State::Open);
    clock.advance(SEC); // 16 s
    stuck.success();
    assert_eq!(b.metrics().stale, 1, "the probe came back after the limit");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().last_transition, Some(at(15 * SEC)));
    // The new wait counts from 15 s, not from when it was noticed.
    assert_eq!(open_hint(&b), 9 * SEC);
    clock.advance(9 * SEC - US);
    assert_eq!(b.state(), State::Open);
    clock.advance(US);
    assert_eq!(b.state(), State::HalfOpen);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn max_half_open_wait_reopen_is_seen_by_the_next_call() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    clock.advance(7 * SEC); // 17 s; the episode ran out at 15 s
    assert_eq!(open_hint(&b), 8 * SEC);
    assert_eq!(b.metrics().last_transition, Some(at(15 * SEC)));
    stuck.success();
    assert_eq!(b.metrics().stale, 1);
    assert_eq!(b.state(), State::Open);
    // Past began + max wait + open duration, it reads half-open again.
    clock.advance(8 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn max_half_open_wait_does_not_expire_an_episode_with_no_probe_out() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(3).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    succeed(&b, 1); // one of three probes back; none out
    clock.advance(60 * SEC); // quiet traffic, far past the limit
    assert_eq!(b.state(), State::HalfOpen);
    // The episode goes on: two more probes close it.
    succeed(&b, 2);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().stale, 0);
}

#[test]
fn max_half_open_wait_counts_from_the_latest_probe_admission() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(3).max_half_open_wait(5 * SEC));
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    succeed(&b, 1); // the episode began at 10 s
    clock.advance(4 * SEC); // 14 s
    let late = b.try_acquire().unwrap(); // admitted at 14 s
    clock.advance(4 * SEC); // 18 s: past began + 5 s, but the probe is out 4 s
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(SEC); // 19 s = 14 s + 5 s
    assert_eq!(b.state(), State::Open);
    late.success();
    assert_eq!(b.metrics().stale, 1);
    assert_eq!(b.metrics().last_transition, Some(at(19 * SEC)));
}

#[test]
fn without_max_half_open_wait_a_stuck_probe_keeps_it_half_open() {
    let clock = ManualClock::new();
    let config = cfg(small().half_open_calls(1));
    assert_eq!(config.max_half_open_wait(), None);
    let b: CircuitBreaker<_, 4> = CircuitBreaker::new("h", config, &clock);
    fail(&b, 2);
    clock.advance(10 * SEC);
    let stuck = b.try_acquire().unwrap();
    clock.advance(24 * 3600 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    stuck.success();
    assert_eq!(b.metrics().stale, 0);
    assert_eq!(b.state(), State::Closed);
}
