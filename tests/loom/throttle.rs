use super::*;
use watertight::throttle::{AdaptiveThrottle, ThrottleConfig, BUCKETS};

type Throttle = AdaptiveThrottle<std::sync::Arc<ManualClock>>;

/// A 20 s window of 1 s buckets, on a clock the test moves.
fn setup() -> (Arc<Throttle>, std::sync::Arc<ManualClock>) {
    let clock = std::sync::Arc::new(ManualClock::new());
    let config = ThrottleConfig::builder()
        .window(Duration::from_secs(BUCKETS as u64))
        .build()
        .unwrap();
    (
        Arc::new(AdaptiveThrottle::with_seed(
            "loom",
            config,
            clock.clone(),
            1,
        )),
        clock,
    )
}

const WINDOW: Duration = Duration::from_secs(BUCKETS as u64);

#[test]
fn an_accept_of_an_old_epoch_racing_a_rollover_is_never_counted_new() {
    model(|| {
        let (t, clock) = setup();
        let t2 = t.clone();
        // The ticket of epoch 0 is taken before anything races; its
        // accept is reported on the other thread while this one moves
        // the clock a window on and rolls slot 0 over.
        let (tx, rx) = loom::sync::mpsc::channel::<()>();
        let reporter = thread::spawn(move || {
            let ticket = t2.check().unwrap();
            tx.send(()).unwrap();
            ticket.accepted();
        });
        rx.recv().unwrap();
        clock.advance(WINDOW);
        // Epoch 20's own request and accept, in slot 0 of both columns.
        t.check().unwrap().accepted();
        reporter.join().unwrap();
        let m = t.metrics();
        // The epoch-0 accept is in epoch 0 or nowhere: not in 20, and
        // it never overwrites epoch 20's.
        assert_eq!((m.requests, m.accepts), (1, 1), "{m:?}");
    });
}

#[test]
fn two_requests_racing_a_lazy_clear_both_count() {
    model(|| {
        let (t, clock) = setup();
        // A stale count in slot 0 (epoch 0), then a window later two
        // threads check: each reads (and may clear) the stale slot and
        // counts its own request in epoch 20.
        t.check().unwrap().overloaded();
        clock.advance(WINDOW);
        let t2 = t.clone();
        let other = thread::spawn(move || {
            t2.check().unwrap().overloaded();
        });
        t.check().unwrap().overloaded();
        other.join().unwrap();
        let m = t.metrics();
        assert_eq!((m.requests, m.accepts), (2, 0), "{m:?}");
    });
}

#[test]
fn racing_accepts_and_requests_never_count_more_than_asked() {
    model(|| {
        let (t, _clock) = setup();
        let a = t.check().unwrap();
        let t2 = t.clone();
        let other = thread::spawn(move || {
            t2.check().unwrap().accepted();
        });
        a.accepted();
        other.join().unwrap();
        let m = t.metrics();
        assert_eq!((m.requests, m.accepts), (2, 2), "{m:?}");
    });
}
