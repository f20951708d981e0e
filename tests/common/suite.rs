//! The behaviour suite run on every supported runtime.
//!
//! Each scenario is a plain async function generic over a [`Runtime`]: the
//! runtime files (`tests/rt_*.rs`) supply a spawner, a yield and a clock, and
//! generate one `#[test]` per scenario with [`behaviour_suite!`]. The
//! scenarios assert counts and order only, never how long anything took: the
//! real timers are used, but only their outcome (`TimedOut`, a race lost) is
//! checked.
//!
//! Include it with `#[macro_use] #[path = "common/suite.rs"] mod suite;`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures_lite::future;
use watertight::clock::{Clock, Timer};
use watertight::{AcquireError, Bulkhead};

/// A spawned task, or the wait for one.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A wait that must never run out during a test (it stands for "as long as
/// it takes"); only a broken bulkhead would reach it.
pub const LONG: Duration = Duration::from_secs(60);
/// How long a test waits for a spawned task before calling it stuck: longer
/// than any wait in the suite, so only a broken bulkhead gets there (under
/// tokio's paused time, only a runtime with nothing else left to do).
pub const STUCK: Duration = Duration::from_secs(120);
/// A wait that is meant to run out.
pub const SHORT: Duration = Duration::from_millis(20);

/// What a runtime file provides to the suite.
pub trait Runtime: Clone + Send + Sync + 'static {
    /// The runtime's timer clock.
    type Clock: Timer<Sleep: Send> + Clone + Send + Sync + 'static;

    /// A clock handle for a new bulkhead.
    fn clock(&self) -> Self::Clock;

    /// Starts `task` at once on the runtime; the returned future completes
    /// when the task has run to completion (and panics if the task panicked,
    /// where the runtime reports that).
    fn spawn_task(&self, task: BoxFuture) -> BoxFuture;

    /// Lets the other tasks run once.
    fn yield_now(&self) -> impl Future<Output = ()> + Send;
}

/// Spawns `fut` now and returns a future of its output, which fails the test
/// if the task has not finished after [`STUCK`].
pub fn spawn<R, T, F>(rt: &R, fut: F) -> impl Future<Output = T> + Send + 'static
where
    R: Runtime,
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let slot = Arc::new(Mutex::new(None));
    let put = Arc::clone(&slot);
    let join = rt.spawn_task(Box::pin(async move {
        let value = fut.await;
        *lock(&put) = Some(value);
    }));
    let clock = rt.clock();
    async move {
        let finished = future::or(
            async {
                join.await;
                true
            },
            async {
                clock.sleep_until(clock.now() + STUCK).await;
                false
            },
        )
        .await;
        assert!(finished, "a spawned task is stuck");
        lock(&slot)
            .take()
            .expect("the task finished without an output")
    }
}

/// A sleep of `d` from now on the runtime's clock.
pub fn sleep<R: Runtime>(rt: &R, d: Duration) -> <R::Clock as Timer>::Sleep {
    let clock = rt.clock();
    clock.sleep_until(clock.now() + d)
}

/// Yields until `cond` holds. A safety net turns a hang into a failure after
/// 30 s of real time; it is not a latency assertion.
pub async fn until<R: Runtime>(rt: &R, what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "gave up waiting until {what}"
        );
        rt.yield_now().await;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A one-shot flag that tasks can await: a gate the test opens, or the end
/// of a task on a runtime without join handles.
#[derive(Clone, Default)]
pub struct Flag(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Flag {
    /// A lowered flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag and wakes everyone waiting for it.
    pub fn set(&self) {
        let wakers = {
            let mut state = lock(&self.0);
            state.0 = true;
            std::mem::take(&mut state.1)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Completes once the flag is raised.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let flag = self.clone();
        future::poll_fn(move |cx| {
            let mut state = lock(&flag.0);
            if state.0 {
                return Poll::Ready(());
            }
            if !state.1.iter().any(|w| w.will_wake(cx.waker())) {
                state.1.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

fn bulkhead<R: Runtime>(rt: &R, name: &'static str, capacity: usize) -> Arc<Bulkhead<R::Clock>> {
    Arc::new(Bulkhead::new(name, capacity, rt.clock()))
}

/// Generates one test per scenario.
///
/// - `behaviour_suite!(async #[tokio::test] with TokioRt);` makes
///   `#[tokio::test] async fn scenario() { suite::scenario(TokioRt).await }`;
/// - `behaviour_suite!(run run_on_smol);` makes
///   `#[test] fn scenario() { run_on_smol(suite::scenario) }`.
///
/// The including file must declare the suite as `crate::suite`.
macro_rules! behaviour_suite {
    (@one [async $(#[$m:meta])* with $rt:expr] $name:ident) => {
        $(#[$m])*
        async fn $name() {
            crate::suite::$name($rt).await
        }
    };
    (@one [run $runner:path] $name:ident) => {
        #[test]
        fn $name() {
            $runner(crate::suite::$name)
        }
    };
    (@each $how:tt $($name:ident)*) => {
        $( behaviour_suite!(@one $how $name); )*
    };
    ($($how:tt)*) => {
        behaviour_suite!(@each [$($how)*]
            limit_holds_under_contention
            exhausted_wait_times_out
            waiters_served_in_fifo_order
            cancelled_wait_loses_no_permit
            cancelled_after_wake_passes_permit_on
            timed_out_waiter_does_not_block_the_next
            close_wakes_all_waiters
            owned_permits_move_into_tasks
            bulkheads_are_independent
        );
    };
}

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

/// (d') A waiter dropped after the release woke it, before it could take the
/// permit, passes the permit on to the waiter behind it.
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

    drop(held); // wakes X, the first in line
    drop(x); // ... which never looks
    assert_eq!(y.await, Ok(()));

    let m = b.metrics();
    assert_eq!((m.accepted, m.cancelled_waits, m.rejected()), (2, 1, 0));
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
