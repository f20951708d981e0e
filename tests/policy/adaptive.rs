//! An adaptive limit steering the policy's bulkhead.

use super::*;

// ---- an adaptive limit steering the policy's bulkhead ----------------------

/// AIMD in `[1, 10]` from `initial`, every call a window of its own.
fn steering(clock: &ManualClock, initial: usize) -> AdaptiveLimit<Aimd> {
    let aimd = Aimd::builder()
        .min_limit(1)
        .max_limit(10)
        .initial_limit(initial)
        .build()
        .unwrap();
    AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now())
}

fn success_or_failure(r: &Res) -> Signal {
    if r.is_ok() {
        Signal::Success
    } else {
        Signal::Failure
    }
}

#[test]
fn call_adaptive_times_the_call_and_grows_the_limit_on_success() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let gate = Rc::new(Cell::new(false));
    let call = Probe::default();
    let mut running =
        Task::pending(p.call_adaptive(&limit, call.gated(&gate, Ok(7)), success_or_failure));
    clock.advance(30 * MS);
    gate.set(true);
    assert_eq!(running.ready(), Ok(7));
    let w = limit.last_window();
    assert_eq!(
        (w.successes, w.avg_rtt, w.max_in_flight),
        (1, Some(30 * MS), 1)
    );
    // One in flight of a limit of one: AIMD adds one, and the policy's
    // bulkhead takes two now.
    assert_eq!(p.bulkhead().capacity(), 2);
    assert_eq!(limit.windows(), 1);
    assert_eq!(p.breaker().metrics().failed_calls, 0);
}

#[test]
fn call_adaptive_counts_a_cut_call_as_a_timeout_and_backs_off() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 10, 100 * MS, SEC);
    let limit = steering(&clock, 10);
    let call = Probe::default();
    let mut running = Task::pending(p.call_adaptive(&limit, call.hang(), |_| {
        unreachable!("a call cut at its timeout has no result to classify")
    }));
    clock.advance(SEC);
    assert_eq!(kind(running.ready()), ErrorKind::DeadlineExceeded);
    let w = limit.last_window();
    assert_eq!((w.timed_out, w.successes, w.avg_rtt), (1, 0, None));
    assert_eq!(p.bulkhead().capacity(), 9, "10 x 0.9 after a timeout");
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn call_adaptive_records_a_drop_as_congestion_and_a_failure_for_the_breaker() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 10, 100 * MS, SEC);
    let limit = steering(&clock, 10);
    let r = now_or_never(p.call_adaptive(
        &limit,
        || async { Err::<u32, _>(Boom) },
        |_| Signal::Dropped,
    ));
    assert_eq!(r.unwrap_err().into_inner(), Some(Boom));
    assert_eq!(limit.last_window().dropped, 1);
    assert_eq!(p.bulkhead().capacity(), 9);
    assert_eq!(p.breaker().metrics().failed_calls, 1);
}

#[test]
fn call_adaptive_records_nothing_for_a_call_that_never_started() {
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let classify = |_: &Res| -> Signal { unreachable!("a refused call has no result") };

    // Refused by the bulkhead after its slot wait.
    let held = p.bulkhead().try_acquire().unwrap();
    let mut waiting = Task::pending(p.call_adaptive(&limit, ok, classify));
    clock.advance(100 * MS);
    assert_eq!(kind(waiting.ready()), ErrorKind::BulkheadFull);
    drop(held);

    // Refused by the open breaker.
    trip(&p);
    let r = now_or_never(p.call_adaptive(&limit, ok, classify));
    assert!(matches!(r.unwrap_err().kind(), ErrorKind::CircuitOpen(_)));

    // No window closed, so the limit never saw a (fast) refusal.
    assert_eq!(limit.windows(), 0);
    assert_eq!(p.bulkhead().capacity(), 1);
}

#[test]
fn call_adaptive_futures_are_send() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let clock = ManualClock::new();
    let p = policy("search", &clock, 1, 100 * MS, SEC);
    let limit = steering(&clock, 1);
    let r = now_or_never(send(p.call_adaptive(
        &limit,
        || async { Ok::<u32, Boom>(1) },
        success_or_failure,
    )));
    assert_eq!(r, Ok(1));
}
