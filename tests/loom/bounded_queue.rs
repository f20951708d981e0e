use super::*;

fn bounded(capacity: usize, max: usize) -> Arc<Shared> {
    Arc::new(Shared {
        bh: Bulkhead::new("loom", capacity, ManualClock::new()).with_max_waiters(max),
        active: AtomicUsize::new(0),
    })
}

/// A thread that polls one `acquire()` once and drops it: `Some(true)`
/// it got the permit, `Some(false)` refused as queue full, `None`
/// queued (and cancelled by the drop).
fn spawn_try_wait(s: &Arc<Shared>) -> thread::JoinHandle<Option<bool>> {
    let s = s.clone();
    thread::spawn(move || {
        let mut fut = pin!(s.bh.acquire());
        let r = match poll_once(&mut fut) {
            Poll::Ready(Ok(p)) => {
                s.work(p, 1);
                Some(true)
            }
            Poll::Ready(Err(e)) => {
                assert_eq!(e, AcquireError::QueueFull);
                Some(false)
            }
            Poll::Pending => None,
        };
        assert!(
            s.bh.waiting() <= 1,
            "waiting {} above the bound",
            s.bh.waiting()
        );
        r
    })
}

/// (B1) Two would-be waiters racing a release, one place: each queues
/// (and cancels), is refused, or is handed the permit; the count stays
/// within the bound, and afterwards the one place is free again.
#[test]
fn count_vs_release_and_cancel() {
    model(|| {
        let s = bounded(1, 1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);
        let a = spawn_try_wait(&s);
        let b = spawn_try_wait(&s);
        assert!(s.bh.waiting() <= 1);
        s.leave(held);
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        s.assert_balanced(1);

        let m = s.bh.metrics();
        let full = [a, b].iter().filter(|r| **r == Some(false)).count();
        assert_eq!(m.rejected_queue_full, full, "{m:?}");
        assert_eq!(m.rejected(), full, "{m:?}");
        // Each of the three attempts once: accepted (at once or by a
        // hand-off, seen or not), cancelled while queued, or refused.
        assert_eq!(m.accepted + m.cancelled_waits + full, 3, "{m:?}");

        // No place leaked: one wait queues, the next is refused.
        let _held = s.bh.try_acquire().unwrap();
        let mut first = pin!(s.bh.acquire());
        assert!(poll_once(&mut first).is_pending());
        let mut second = pin!(s.bh.acquire());
        assert!(matches!(
            poll_once(&mut second),
            Poll::Ready(Err(AcquireError::QueueFull))
        ));
    });
}

/// (B2) A patient waiter, a would-be waiter and a release: the patient
/// one completes unless the newcomer reserved the one place first (a
/// refusal never swallows a wake-up: loom reports a deadlock if the
/// patient one is never woken), and each is counted once.
#[test]
fn patient_waiter_vs_refused_newcomer() {
    model(|| {
        let s = bounded(1, 1);
        let held = s.bh.try_acquire().unwrap();
        s.enter(&held, 1);
        let patient = {
            let s = s.clone();
            thread::spawn(move || match block_on(s.bh.acquire()) {
                Ok(p) => {
                    s.work(p, 1);
                    true
                }
                // The newcomer reserved the one place first.
                Err(e) => {
                    assert_eq!(e, AcquireError::QueueFull);
                    false
                }
            })
        };
        let newcomer = spawn_try_wait(&s);
        s.leave(held);
        let p = patient.join().unwrap();
        let n = newcomer.join().unwrap();
        s.assert_balanced(1);
        // One place: both may not be refused.
        assert!(p || n != Some(false));
        let m = s.bh.metrics();
        let full = usize::from(!p) + usize::from(n == Some(false));
        assert_eq!(m.rejected_queue_full, full, "{m:?}");
        assert_eq!(m.accepted + m.cancelled_waits + full, 3, "{m:?}");
    });
}
