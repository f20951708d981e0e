//! The bulkhead's scenarios.

use super::*;

/// (a) Limit 3, ten tasks: everyone gets in, never more than three at once.
pub async fn limit_holds_under_contention<R: Runtime>(rt: R) {
    const LIMIT: usize = 3;
    const TASKS: usize = 10;
    let b = bulkhead(&rt, "limit", LIMIT);
    let active = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));

    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (b, active, peak, rt2) = (
                Arc::clone(&b),
                Arc::clone(&active),
                Arc::clone(&peak),
                rt.clone(),
            );
            spawn(&rt, async move {
                let permit = b.acquire_timeout(LONG).await?;
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                for _ in 0..3 {
                    rt2.yield_now().await;
                }
                // Leave before giving the permit back, so that the count
                // never shows the next holder and this one together.
                active.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
                Ok::<(), AcquireError>(())
            })
        })
        .collect();

    let mut ok = 0;
    for t in tasks {
        t.await.expect("every task gets a permit within its wait");
        ok += 1;
    }

    assert_eq!(ok, TASKS);
    let seen = peak.load(Ordering::SeqCst);
    assert!(
        (1..=LIMIT).contains(&seen),
        "tasks saw {seen} at once, limit {LIMIT}"
    );
    let m = b.metrics();
    assert_eq!(m.accepted, TASKS);
    assert!(
        m.peak_in_flight <= LIMIT,
        "peak_in_flight {}",
        m.peak_in_flight
    );
    assert!(m.peak_in_flight >= seen);
    assert_eq!(m.rejected(), 0);
    assert_eq!(m.cancelled_waits, 0);
    assert_eq!((m.in_flight, m.waiting, m.available), (0, 0, LIMIT));
}

/// (b) No permit and the wait runs out: `TimedOut`, counted once.
pub async fn exhausted_wait_times_out<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "exhausted", 1);
    let held = b.try_acquire().unwrap();

    let b2 = Arc::clone(&b);
    let r = spawn(
        &rt,
        async move { b2.acquire_timeout(SHORT).await.map(drop) },
    )
    .await;
    assert_eq!(r, Err(AcquireError::TimedOut));

    let m = b.metrics();
    assert_eq!(m.rejected_timed_out, 1);
    assert_eq!(m.rejected(), 1);
    assert_eq!(m.cancelled_waits, 0);
    assert_eq!((m.accepted, m.in_flight, m.waiting), (1, 1, 0));

    drop(held);
    // The timed-out waiter left nothing behind: the permit is free again.
    let again = b.acquire_timeout(SHORT).await.unwrap();
    assert_eq!(b.metrics().accepted, 2);
    drop(again);
    assert_eq!(b.available(), 1);
}

/// (c) Waiters get the permit in the order they started waiting.
pub async fn waiters_served_in_fifo_order<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "fifo", 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let held = b.try_acquire().unwrap();

    let mut waiters = Vec::new();
    for (i, id) in ['A', 'B', 'C'].into_iter().enumerate() {
        let (b2, order) = (Arc::clone(&b), Arc::clone(&order));
        waiters.push(spawn(&rt, async move {
            let permit = b2.acquire_timeout(LONG).await?;
            lock(&order).push(id);
            drop(permit);
            Ok::<(), AcquireError>(())
        }));
        until(&rt, "the waiter is registered", || b.waiting() == i + 1).await;
    }
    assert_eq!(b.waiting(), 3);
    assert!(lock(&order).is_empty());

    drop(held);
    for w in waiters {
        w.await.unwrap();
    }

    assert_eq!(*lock(&order), ['A', 'B', 'C']);
    let m = b.metrics();
    assert_eq!((m.accepted, m.rejected(), m.cancelled_waits), (4, 0, 0));
    assert_eq!((m.in_flight, m.waiting, m.peak_in_flight), (0, 0, 1));
}

/// (d) A wait dropped by losing a race to a timer loses no permit, and the
/// waiter queued behind it still gets the permit.
pub async fn cancelled_wait_loses_no_permit<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "cancel", 1);
    let held = b.try_acquire().unwrap();
    let gate = Flag::new();

    // X waits, racing a short sleep that starts only once Y queues behind it.
    let (b2, gate2, rt2) = (Arc::clone(&b), gate.clone(), rt.clone());
    let x = spawn(&rt, async move {
        future::or(
            async {
                let r = b2.acquire_timeout(LONG).await;
                Some(r.map(drop))
            },
            async {
                gate2.wait().await;
                sleep(&rt2, SHORT).await;
                None
            },
        )
        .await
    });
    until(&rt, "X is registered", || b.waiting() == 1).await;

    let b3 = Arc::clone(&b);
    let y = spawn(&rt, async move { b3.acquire_timeout(LONG).await.map(drop) });
    until(&rt, "Y is registered", || b.waiting() == 2).await;

    gate.set();
    assert_eq!(x.await, None, "X must lose the race: nobody released");
    let m = b.metrics();
    assert_eq!((m.waiting, m.cancelled_waits, m.in_flight), (1, 1, 1));
    assert_eq!(m.rejected(), 0);

    drop(held);
    assert_eq!(y.await, Ok(()));
    let m = b.metrics();
    assert_eq!((m.accepted, m.cancelled_waits, m.rejected()), (2, 1, 0));
    assert_eq!((m.in_flight, m.waiting, m.available), (0, 0, 1));
}

/// (d') A waiter dropped after the release handed it the permit, before it
/// could see it, passes the permit on to the waiter behind it.
pub async fn cancelled_after_wake_passes_permit_on<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "handover", 1);
    let held = b.try_acquire().unwrap();

    // X lives in this task, so it can be dropped between wake-up and poll.
    let mut x = Box::pin(b.acquire_timeout(LONG));
    assert!(future::poll_once(&mut x).await.is_none());
    assert_eq!(b.waiting(), 1);

    let b2 = Arc::clone(&b);
    let y = spawn(&rt, async move { b2.acquire_timeout(LONG).await.map(drop) });
    until(&rt, "Y is registered", || b.waiting() == 2).await;

    drop(held); // hands the permit to X, the first in line
    drop(x); // ... which never looks
    assert_eq!(y.await, Ok(()));

    // X counts as accepted (it held the permit, for no time), not cancelled.
    let m = b.metrics();
    assert_eq!((m.accepted, m.cancelled_waits, m.rejected()), (3, 0, 0));
    assert_eq!((m.in_flight, m.waiting, m.available), (0, 0, 1));
}

/// A waiter whose wait runs out leaves the queue; the one behind it is
/// served when a permit comes back.
pub async fn timed_out_waiter_does_not_block_the_next<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "timeout-queue", 1);
    let held = b.try_acquire().unwrap();

    // X lives in this task: once registered it stays in the queue until it
    // is polled again, however soon its short wait runs out, so Y is surely
    // queued behind it.
    let mut x = Box::pin(b.acquire_timeout(SHORT));
    assert!(future::poll_once(&mut x).await.is_none());
    let b2 = Arc::clone(&b);
    let y = spawn(&rt, async move { b2.acquire_timeout(LONG).await.map(drop) });
    until(&rt, "Y is registered behind X", || b.waiting() == 2).await;

    assert_eq!(x.await.unwrap_err(), AcquireError::TimedOut);
    assert_eq!(b.waiting(), 1);
    drop(held);
    assert_eq!(y.await, Ok(()));

    let m = b.metrics();
    assert_eq!((m.accepted, m.rejected_timed_out, m.rejected()), (2, 1, 1));
    assert_eq!((m.cancelled_waits, m.in_flight, m.waiting), (0, 0, 0));
}

/// (e) `close` fails every waiter with `Closed`; held permits stay valid.
pub async fn close_wakes_all_waiters<R: Runtime>(rt: R) {
    let b = bulkhead(&rt, "close", 1);
    let held = b.try_acquire().unwrap();

    let b1 = Arc::clone(&b);
    let w1 = spawn(&rt, async move { b1.acquire().await.map(drop) });
    until(&rt, "the first waiter is registered", || b.waiting() == 1).await;
    let b2 = Arc::clone(&b);
    let w2 = spawn(&rt, async move { b2.acquire_timeout(LONG).await.map(drop) });
    until(&rt, "the second waiter is registered", || b.waiting() == 2).await;
    let b3 = Arc::clone(&b);
    let w3 = spawn(&rt, async move {
        b3.acquire_owned_timeout(LONG).await.map(drop)
    });
    until(&rt, "the third waiter is registered", || b.waiting() == 3).await;

    assert!(b.close());
    assert!(!b.close());
    assert_eq!(w1.await, Err(AcquireError::Closed));
    assert_eq!(w2.await, Err(AcquireError::Closed));
    assert_eq!(w3.await, Err(AcquireError::Closed));

    let m = b.metrics();
    assert_eq!(
        (m.rejected_closed, m.rejected(), m.cancelled_waits),
        (3, 3, 0)
    );
    assert_eq!((m.in_flight, m.waiting), (1, 0));
    drop(held);
    assert_eq!(b.in_flight(), 0);
    assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Closed);
    assert_eq!(
        b.acquire_timeout(LONG).await.unwrap_err(),
        AcquireError::Closed
    );
    assert_eq!(b.metrics().rejected_closed, 5);
}

/// (f) Owned permits are `'static`: taken here and dropped in spawned tasks,
/// and taken in tasks and handed on to further tasks.
pub async fn owned_permits_move_into_tasks<R: Runtime>(rt: R) {
    const CAP: usize = 2;
    const LATER: usize = 4;
    let b = bulkhead(&rt, "owned", CAP);
    let gate = Flag::new();

    let first = b.try_acquire_owned().unwrap();
    let second = b.acquire_owned_timeout(LONG).await.unwrap();
    let holders: Vec<_> = [first, second]
        .into_iter()
        .map(|permit| {
            let gate = gate.clone();
            spawn(&rt, async move {
                gate.wait().await;
                drop(permit);
            })
        })
        .collect();
    assert_eq!(b.in_flight(), CAP);
    assert_eq!(b.try_acquire_owned().unwrap_err(), AcquireError::Full);

    // These queue behind the moved permits, then pass theirs to a new task.
    let later: Vec<_> = (0..LATER)
        .map(|_| {
            let (b, rt2) = (Arc::clone(&b), rt.clone());
            spawn(&rt, async move {
                let permit = b.acquire_owned_timeout(LONG).await?;
                let n = permit.count();
                spawn(&rt2, async move {
                    assert_eq!(permit.bulkhead().name(), "owned");
                    drop(permit);
                })
                .await;
                Ok::<usize, AcquireError>(n)
            })
        })
        .collect();
    until(&rt, "the later tasks are waiting", || b.waiting() == LATER).await;
    assert_eq!(b.in_flight(), CAP);

    gate.set();
    for h in holders {
        h.await;
    }
    for t in later {
        assert_eq!(t.await, Ok(1));
    }

    let m = b.metrics();
    assert_eq!(m.accepted, CAP + LATER);
    assert_eq!(
        (m.rejected_full, m.rejected(), m.cancelled_waits),
        (1, 1, 0)
    );
    assert_eq!((m.in_flight, m.waiting, m.available), (0, 0, CAP));
    assert!(m.peak_in_flight <= CAP);
}

/// (g) One bulkhead held full does not stop another from admitting.
pub async fn bulkheads_are_independent<R: Runtime>(rt: R) {
    let payments = bulkhead(&rt, "payments", 1);
    let inventory = bulkhead(&rt, "inventory", 2);

    let held = payments.try_acquire().unwrap();
    let p2 = Arc::clone(&payments);
    let stuck = spawn(&rt, async move { p2.acquire_timeout(LONG).await.map(drop) });
    until(&rt, "a task is waiting on payments", || {
        payments.waiting() == 1
    })
    .await;

    // Inventory admits at once, here and from other tasks.
    let local = inventory.try_acquire().unwrap();
    let i2 = Arc::clone(&inventory);
    let from_task = spawn(&rt, async move {
        let p = i2.acquire_timeout(LONG).await?;
        Ok::<usize, AcquireError>(p.bulkhead().in_flight())
    });
    assert_eq!(from_task.await, Ok(2));
    drop(local);

    assert_eq!(payments.try_acquire().unwrap_err(), AcquireError::Full);
    let (pm, im) = (payments.metrics(), inventory.metrics());
    assert_eq!(
        (pm.name, pm.in_flight, pm.waiting, pm.accepted),
        ("payments", 1, 1, 1)
    );
    assert_eq!(pm.rejected_full, 1);
    assert_eq!(
        (im.name, im.in_flight, im.waiting, im.accepted),
        ("inventory", 0, 0, 2)
    );
    assert_eq!((im.rejected(), im.peak_in_flight), (0, 2));

    drop(held);
    assert_eq!(stuck.await, Ok(()));
    assert_eq!(payments.metrics().accepted, 2);
    assert_eq!(inventory.metrics().accepted, 2);
}
