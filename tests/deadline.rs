#![cfg(not(loom))]
//! Deterministic tests of `timeout`, `timeout_at` and `Deadline` on a
//! `ManualClock`, through the public API only.
//!
//! Time moves only when a test advances it; futures are polled by hand
//! (`common::Task`), so every test sees the same instants on every run and
//! can check the exact moment something happens — and what was dropped.

mod common;

use std::cell::Cell;
use std::future::{pending, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use common::{now_or_never, Task};
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::deadline::{timeout, timeout_at, Deadline, Elapsed};

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// The instant `d` after the clock's origin.
fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// Sets a shared flag when dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// A future that never completes and holds a guard; the returned flag is set
/// once the future has been dropped.
fn hanging() -> (impl Future<Output = ()>, Rc<Cell<bool>>) {
    let dropped = Rc::new(Cell::new(false));
    let guard = DropFlag(Rc::clone(&dropped));
    let fut = async move {
        let _guard = guard;
        pending::<()>().await
    };
    (fut, dropped)
}

/// A future that is pending until `ready` is set (and then yields `value`),
/// holding a guard.
fn gated(ready: Rc<Cell<bool>>, value: u32) -> (impl Future<Output = u32>, Rc<Cell<bool>>) {
    let dropped = Rc::new(Cell::new(false));
    let guard = DropFlag(Rc::clone(&dropped));
    let fut = async move {
        let _guard = guard;
        std::future::poll_fn(|_| {
            if ready.get() {
                Poll::Ready(value)
            } else {
                Poll::Pending
            }
        })
        .await
    };
    (fut, dropped)
}

// ---- timeout -----------------------------------------------------------

#[test]
fn timeout_returns_ok_when_the_future_finishes_first() {
    let clock = ManualClock::new();
    let ready = Rc::new(Cell::new(false));
    let (fut, dropped) = gated(Rc::clone(&ready), 7);
    let mut task = Task::pending(timeout(&clock, 100 * MS, fut));

    clock.advance(99 * MS);
    task.assert_pending();
    ready.set(true);
    assert_eq!(task.ready(), Ok(7));
    assert!(
        dropped.get(),
        "the finished future is dropped on completion"
    );
}

#[test]
fn timeout_ready_on_first_poll_wins_even_with_zero_duration() {
    let clock = ManualClock::new();
    assert_eq!(
        now_or_never(timeout(&clock, Duration::ZERO, async { 5 })),
        Ok(5)
    );
    // And a pending future with a zero duration elapses on its first poll.
    let (fut, dropped) = hanging();
    assert_eq!(
        now_or_never(timeout(&clock, Duration::ZERO, fut)),
        Err(Elapsed)
    );
    assert!(dropped.get());
}

#[test]
fn timeout_elapses_exactly_at_start_plus_duration_not_a_microsecond_before() {
    let clock = ManualClock::new();
    clock.advance(3 * SEC); // start away from the origin
    let (fut, _dropped) = hanging();
    let mut task = Task::pending(timeout(&clock, 250 * MS, fut));

    clock.advance(250 * MS - US);
    task.assert_pending();
    clock.advance(US);
    assert!(task.woken(), "advancing to the deadline wakes the task");
    assert_eq!(task.ready(), Err(Elapsed));
    assert_eq!(clock.now(), at(3 * SEC + 250 * MS));
}

#[test]
fn timeout_start_is_taken_when_it_is_made_not_when_first_polled() {
    let clock = ManualClock::new();
    let (fut, _dropped) = hanging();
    let t = timeout(&clock, 10 * MS, fut);
    clock.advance(10 * MS);
    assert_eq!(now_or_never(t), Err(Elapsed));
}

#[test]
fn timeout_drops_the_inner_future_at_the_moment_of_expiry() {
    let clock = ManualClock::new();
    let (fut, dropped) = hanging();
    let mut task = Task::pending(timeout(&clock, 50 * MS, fut));

    clock.advance(50 * MS - US);
    task.assert_pending();
    assert!(!dropped.get());
    clock.advance(US);
    assert_eq!(task.ready(), Err(Elapsed));
    // The Timeout itself is still alive here: the inner future must already be gone.
    assert!(
        dropped.get(),
        "the inner future is dropped when time runs out, not when the Timeout is"
    );
    drop(task);
}

#[test]
fn dropping_a_pending_timeout_drops_the_inner_future() {
    let clock = ManualClock::new();
    let (fut, dropped) = hanging();
    let task = Task::pending(timeout(&clock, SEC, fut));
    assert!(!dropped.get());
    drop(task);
    assert!(dropped.get());
}

#[test]
fn dropping_an_unpolled_timeout_drops_the_inner_future() {
    let clock = ManualClock::new();
    let (fut, dropped) = hanging();
    drop(timeout(&clock, SEC, fut));
    assert!(dropped.get());
}

#[test]
fn timeout_at_with_a_past_deadline_elapses_on_first_poll_if_pending() {
    let clock = ManualClock::new();
    clock.advance(5 * SEC);
    let (fut, dropped) = hanging();
    assert_eq!(now_or_never(timeout_at(&clock, at(SEC), fut)), Err(Elapsed));
    assert!(dropped.get());

    // A future that is ready on its first poll still wins.
    assert_eq!(
        now_or_never(timeout_at(&clock, at(SEC), async { "done" })),
        Ok("done")
    );
}

#[test]
fn timeout_at_elapses_at_its_instant() {
    let clock = ManualClock::new();
    let (fut, _dropped) = hanging();
    let mut task = Task::pending(timeout_at(&clock, at(2 * SEC), fut));
    clock.advance(2 * SEC - US);
    task.assert_pending();
    clock.advance(US);
    assert_eq!(task.ready(), Err(Elapsed));
}

#[test]
fn timeout_with_a_huge_duration_saturates_and_never_elapses() {
    let clock = ManualClock::new();
    clock.set(Instant::from_nanos(u64::MAX / 2));
    let (fut, dropped) = hanging();
    let mut task = Task::pending(timeout(&clock, Duration::MAX, fut));
    clock.advance(Duration::from_secs(100 * 365 * 24 * 3600));
    task.assert_pending();
    assert!(!dropped.get());
}

#[test]
fn elapsed_displays_and_is_an_error() {
    let e: &dyn std::error::Error = &Elapsed;
    assert_eq!(e.to_string(), "deadline has elapsed");
}

// ---- Deadline ----------------------------------------------------------

#[test]
fn deadline_after_remaining_and_is_expired() {
    let clock = ManualClock::new();
    clock.advance(SEC);
    let d = Deadline::after(&clock, 1500 * MS);
    assert_eq!(d.instant(), at(2500 * MS));
    assert_eq!(d.remaining(), 1500 * MS);
    assert!(!d.is_expired());

    clock.advance(1200 * MS);
    assert_eq!(d.remaining(), 300 * MS);
    clock.advance(300 * MS - US);
    assert_eq!(d.remaining(), US);
    assert!(!d.is_expired(), "not expired 1 µs before its instant");
    clock.advance(US);
    assert_eq!(d.remaining(), Duration::ZERO);
    assert!(d.is_expired(), "expired exactly at its instant");
    clock.advance(SEC);
    assert_eq!(d.remaining(), Duration::ZERO, "remaining saturates at zero");
    assert!(d.is_expired());
}

#[test]
fn deadline_with_a_zero_budget_is_expired_at_once() {
    let clock = ManualClock::new();
    let d = Deadline::after(&clock, Duration::ZERO);
    assert!(d.is_expired());
    assert_eq!(d.remaining(), Duration::ZERO);
}

#[test]
fn deadline_at_an_instant() {
    let clock = ManualClock::new();
    let d = Deadline::at(&clock, at(2 * SEC));
    assert_eq!(d.instant(), at(2 * SEC));
    assert_eq!(d.remaining(), 2 * SEC);
    clock.advance(2 * SEC);
    assert!(d.is_expired());

    // An instant already past is expired from the start.
    let past = Deadline::at(&clock, at(SEC));
    assert!(past.is_expired());
    assert_eq!(past.remaining(), Duration::ZERO);
}

#[test]
fn deadline_never_does_not_expire() {
    let clock = ManualClock::new();
    let d = Deadline::never(&clock);
    assert_eq!(d.instant(), Instant::MAX);
    clock.advance(Duration::from_secs(500 * 365 * 24 * 3600));
    assert!(!d.is_expired());
    assert!(d.remaining() > Duration::from_secs(80 * 365 * 24 * 3600));
}

#[test]
fn deadline_is_copy_and_keeps_its_clock() {
    let clock = ManualClock::new();
    let d = Deadline::after(&clock, SEC);
    let e = d; // Copy
    clock.advance(400 * MS);
    assert_eq!(d.remaining(), 600 * MS);
    assert_eq!(e.remaining(), 600 * MS);
    assert_eq!(d.clock().now(), at(400 * MS));
}

#[test]
fn child_asking_for_more_than_the_parent_has_ends_with_the_parent() {
    let clock = ManualClock::new();
    let parent = Deadline::after(&clock, SEC);
    clock.advance(600 * MS);
    let child = parent.child(2 * SEC);
    assert_eq!(child.instant(), parent.instant());
    assert_eq!(child.remaining(), 400 * MS);

    clock.advance(400 * MS - US);
    assert!(!child.is_expired());
    clock.advance(US);
    assert!(child.is_expired() && parent.is_expired());
}

#[test]
fn child_asking_for_less_ends_earlier() {
    let clock = ManualClock::new();
    let parent = Deadline::after(&clock, SEC);
    clock.advance(100 * MS);
    let child = parent.child(300 * MS);
    assert_eq!(child.instant(), at(400 * MS));
    assert_eq!(child.remaining(), 300 * MS);

    clock.advance(300 * MS);
    assert!(child.is_expired());
    assert!(!parent.is_expired());
    assert_eq!(parent.remaining(), 600 * MS);
}

#[test]
fn child_asking_for_exactly_what_is_left_ends_with_the_parent() {
    let clock = ManualClock::new();
    let parent = Deadline::after(&clock, SEC);
    clock.advance(250 * MS);
    assert_eq!(parent.child(750 * MS).instant(), parent.instant());
}

#[test]
fn child_of_an_expired_parent_is_expired() {
    let clock = ManualClock::new();
    let parent = Deadline::after(&clock, 10 * MS);
    clock.advance(20 * MS);
    let child = parent.child(SEC);
    assert!(child.is_expired());
    assert_eq!(child.instant(), parent.instant());
}

#[test]
fn child_of_child_is_capped_by_every_ancestor() {
    let clock = ManualClock::new();
    let request = Deadline::after(&clock, 1500 * MS); // ends at 1.5 s
    let call = request.child(SEC); // ends at 1.0 s
    clock.advance(800 * MS);
    let retry = call.child(500 * MS); // would end at 1.3 s; capped at 1.0 s
    assert_eq!(retry.instant(), at(SEC));
    assert_eq!(retry.remaining(), 200 * MS);
    let short = call.child(50 * MS); // ends at 0.85 s, inside both
    assert_eq!(short.instant(), at(850 * MS));

    clock.advance(200 * MS);
    assert!(retry.is_expired() && call.is_expired());
    assert!(!request.is_expired());
    assert_eq!(request.remaining(), 500 * MS);
}

#[test]
fn child_of_never_is_its_own_cap() {
    let clock = ManualClock::new();
    clock.advance(SEC);
    let child = Deadline::never(&clock).child(250 * MS);
    assert_eq!(child.instant(), at(1250 * MS));
}

#[test]
fn deadline_run_completes_with_the_future() {
    let clock = ManualClock::new();
    let d = Deadline::after(&clock, 50 * MS);
    assert_eq!(now_or_never(d.run(async { "fast" })), Ok("fast"));

    let ready = Rc::new(Cell::new(false));
    let (fut, _dropped) = gated(Rc::clone(&ready), 3);
    let mut task = Task::pending(d.run(fut));
    clock.advance(50 * MS - US);
    task.assert_pending();
    ready.set(true);
    assert_eq!(task.ready(), Ok(3));
}

#[test]
fn deadline_run_elapses_at_the_deadline_and_drops_the_future() {
    let clock = ManualClock::new();
    let request = Deadline::after(&clock, SEC);
    clock.advance(700 * MS);
    // A child asking for 1 s more still ends with its parent, at 1 s.
    let step = request.child(SEC);
    let (fut, dropped) = hanging();
    let mut task = Task::pending(step.run(fut));

    clock.advance(300 * MS - US);
    task.assert_pending();
    clock.advance(US);
    assert!(task.woken());
    assert_eq!(task.ready(), Err(Elapsed));
    assert!(dropped.get());
}

#[test]
fn deadline_run_on_an_expired_deadline_elapses_on_first_poll() {
    let clock = ManualClock::new();
    let d = Deadline::after(&clock, MS);
    clock.advance(MS);
    let (fut, dropped) = hanging();
    assert_eq!(now_or_never(d.run(fut)), Err(Elapsed));
    assert!(dropped.get());
}

#[test]
fn deadline_run_on_never_does_not_elapse() {
    let clock = ManualClock::new();
    let (fut, _dropped) = hanging();
    let mut task = Task::pending(Deadline::never(&clock).run(fut));
    clock.advance(Duration::from_secs(100 * 365 * 24 * 3600));
    task.assert_pending();
}

#[test]
fn deadline_with_a_huge_budget_saturates_and_never_ends() {
    let clock = ManualClock::new();
    clock.set(Instant::from_nanos(u64::MAX - 1_000));
    let d = Deadline::after(&clock, Duration::MAX);
    assert_eq!(d.instant(), Instant::MAX);
    assert!(!d.is_expired());
    assert_eq!(d.remaining(), Duration::from_nanos(1_000));

    // A small budget that would pass the end of time saturates too.
    let small = Deadline::after(&clock, SEC);
    assert_eq!(small.instant(), Instant::MAX);
    // So do children asking for more than the clock can hold.
    let child = d.child(Duration::MAX);
    assert_eq!(child.instant(), Instant::MAX);

    let from_origin = ManualClock::new();
    let long = Deadline::after(&from_origin, Duration::MAX);
    assert_eq!(long.instant(), Instant::MAX);
    from_origin.advance(Duration::from_secs(500 * 365 * 24 * 3600));
    assert!(!long.is_expired());
    assert!(!long.child(Duration::MAX).is_expired());
}

#[test]
fn deadline_debug_shows_its_instant() {
    let clock = ManualClock::new();
    let d = Deadline::after(&clock, SEC);
    let s = format!("{d:?}");
    assert!(s.starts_with("Deadline"), "{s}");
    assert!(s.contains("1s"), "{s}");
}
