//! Wakers that give back a permit of the same bulkhead when dropped.

use super::*;

// ---------------------------------------------------------------------------
// Wakers that give back a permit of the same bulkhead when dropped: the last
// reference to a task whose future holds a permit (tokio's
// `release_permits_at_drop` pattern). A waker dropped while the queue's lock
// is held would deadlock the release it causes, so every path that drops or
// wakes a waker must do it with the lock released. Each scenario runs on a
// thread of its own and must finish (a deadlock fails it instead of hanging
// the suite).
// ---------------------------------------------------------------------------

type Shared = Arc<Bulkhead<Arc<ManualClock>>>;

/// A waker that owns the bulkhead's only permit: dropping its last copy
/// releases it.
struct PermitInWaker(
    // Never read: held for its drop.
    #[allow(dead_code)] std::sync::Mutex<Option<watertight::OwnedPermit<Arc<ManualClock>>>>,
);

impl std::task::Wake for PermitInWaker {
    fn wake(self: Arc<Self>) {}
}

/// A waker that owns `permit`: dropping its last copy releases it.
fn waker_holding(permit: watertight::OwnedPermit<Arc<ManualClock>>) -> std::task::Waker {
    std::task::Waker::from(Arc::new(PermitInWaker(std::sync::Mutex::new(Some(permit)))))
}

/// A capacity-1 bulkhead whose one permit lives inside the returned waker.
fn permit_in_waker() -> (Arc<ManualClock>, Shared, std::task::Waker) {
    let clock = Arc::new(ManualClock::new());
    let bh = Arc::new(Bulkhead::new("waker", 1, Arc::clone(&clock)));
    let waker = waker_holding(bh.try_acquire_owned().unwrap());
    (clock, bh, waker)
}

fn without_deadlock(scenario: &'static str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let worker = thread::spawn(move || {
        f();
        done.send(()).unwrap();
    });
    // Generous: the scenario takes microseconds; this only turns a hang
    // into a failure.
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The scenario panicked: report its panic.
            if let Err(panic) = worker.join() {
                panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{scenario}: deadlocked (a waker dropped under the queue's lock)")
        }
    }
}

fn poll_with<F: std::future::Future>(
    fut: std::pin::Pin<&mut F>,
    waker: &std::task::Waker,
) -> Poll<F::Output> {
    fut.poll(&mut std::task::Context::from_waker(waker))
}

#[test]
fn a_replaced_waker_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("re-poll with a new waker", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = pin!(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        // The caller drops its copy: the queue's is the last one.
        drop(first);
        let second = Probe::new();
        // Replacing the waker drops the old one, which releases the permit;
        // the release hands it to this very waiter.
        let r = second.poll(fut.as_mut());
        let permit = match r {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => {
                assert!(second.woken(), "the permit released by the old waker");
                match second.poll(fut.as_mut()) {
                    Poll::Ready(r) => r.unwrap(),
                    Poll::Pending => panic!("handed its permit, yet pending"),
                }
            }
        };
        assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
        drop(permit);
        assert_eq!(bh.available(), 1);
    });
}

#[test]
fn a_waker_dropped_on_cancel_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("cancel", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        // Leaving the queue drops the last copy: the permit comes back.
        drop(fut);
        let m = bh.metrics();
        assert_eq!(
            (m.available, m.in_flight, m.waiting, m.cancelled_waits),
            (1, 0, 0, 1)
        );
    });
}

#[test]
fn a_waker_dropped_on_timeout_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("timeout", || {
        let (clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire_timeout(10 * MS));
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        clock.advance(10 * MS);
        // The poll that meets the deadline drops the old waker, whose permit
        // is handed to this waiter before it gives up: it keeps it.
        let second = Probe::new();
        let permit = match second.poll(fut.as_mut()) {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => panic!("pending past its deadline"),
        };
        assert_eq!((bh.in_flight(), bh.waiting()), (1, 0));
        drop(permit);

        // A second waiter, timed out while its waker is the last holder of
        // the permit: the time-out unlinks it and drops the waker after.
        let held = bh.try_acquire_owned().unwrap();
        let holder = waker_holding(held);
        let mut fut = Box::pin(bh.acquire_timeout(10 * MS));
        assert!(poll_with(fut.as_mut(), &holder).is_pending());
        clock.advance(10 * MS);
        let r = poll_with(fut.as_mut(), &holder);
        drop(holder);
        assert!(
            matches!(r, Poll::Ready(Err(AcquireError::TimedOut))),
            "{r:?}"
        );
        assert_eq!((bh.available(), bh.waiting()), (1, 0));
    });
}

#[test]
fn a_waker_dropped_on_close_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("close", || {
        let (_clock, bh, first) = permit_in_waker();
        let mut fut = Box::pin(bh.acquire());
        assert!(poll_with(fut.as_mut(), &first).is_pending());
        drop(first);
        // `close` wakes (and so drops) the last copy: the permit comes back.
        assert!(bh.close());
        assert_eq!((bh.available(), bh.in_flight(), bh.waiting()), (1, 0, 0));
        let second = Probe::new();
        assert!(matches!(
            second.poll(fut.as_mut()),
            Poll::Ready(Err(AcquireError::Closed))
        ));
    });
}

#[test]
fn a_woken_waker_that_releases_a_permit_does_not_deadlock() {
    without_deadlock("hand-off", || {
        // A hand-off wakes the waiter's waker, the last copy, which releases
        // a permit: it must find the queue's lock free.
        let clock = Arc::new(ManualClock::new());
        let bh = Arc::new(Bulkhead::new("waker", 2, Arc::clone(&clock)));
        let a = bh.try_acquire_owned().unwrap();
        let b = bh.try_acquire_owned().unwrap();
        let holder = waker_holding(b);
        let mut first = Box::pin(bh.acquire());
        let mut second = Box::pin(bh.acquire());
        assert!(poll_with(first.as_mut(), &holder).is_pending());
        let probe = Probe::new();
        assert!(probe.poll(second.as_mut()).is_pending());
        drop(holder);
        drop(a); // handed to `first`; waking it releases `b`, handed to `second`
        assert!(probe.woken());
        assert_eq!((bh.in_flight(), bh.waiting()), (2, 0));
        assert!(matches!(probe.poll(second.as_mut()), Poll::Ready(Ok(_))));
        drop(first); // handed a permit it never saw: given back
        assert_eq!(bh.in_flight(), 0);
    });
}

#[test]
fn ten_thousand_waiters_queue_and_are_served_in_order() {
    // No cap on waiters but memory (the waiter count used to live in a
    // 12-bit field of the state word: the 4096th was refused as `Full`).
    let n = if cfg!(miri) { 40 } else { 10_000 };
    let clock = ManualClock::new();
    let bh = Bulkhead::new("busy", 1, &clock);
    let held = bh.try_acquire().unwrap();
    let mut waiters: Vec<_> = (0..n)
        .map(|_| Task::pending(bh.acquire_timeout(Duration::from_millis(100))))
        .collect();
    let m = bh.metrics();
    assert_eq!((m.waiting, m.queued, m.rejected()), (n, n, 0));
    drop(held);
    // Each permit goes to the next in line, and only to it.
    for i in 0..n {
        assert!(waiters[i].woken(), "waiter {i} was handed the permit");
        let p = waiters[i].ready().unwrap();
        if let Some(next) = waiters.get(i + 1) {
            assert!(!next.woken(), "waiter {} woken out of turn", i + 1);
        }
        drop(p);
    }
    let m = bh.metrics();
    assert_eq!((m.waiting, m.accepted, m.in_flight), (0, n + 1, 0));
}
