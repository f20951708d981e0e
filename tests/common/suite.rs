//! The behaviour suite run on every supported runtime.
//!
//! Each scenario is a plain async function generic over a [`Runtime`]: the
//! runtime files (`tests/rt_*.rs`) supply a spawner, a yield and a clock, and
//! generate one `#[test]` per scenario with [`behaviour_suite!`]. The
//! scenarios assert counts and order only, never how long anything took: the
//! real timers are used, but only their outcome (`TimedOut`, a race lost) is
//! checked. The breaker scenarios run a `CircuitBreaker` on the runtime's
//! clock the same way: a real open wait or a real slow call is waited out,
//! and only what the breaker made of it is asserted (a 20 ms call is slower
//! than 1 ms, an immediate one is not slower than 10 s). The deadline and
//! policy scenarios likewise run `timeout` and `Policy` on the runtime's
//! clock and timer: a call that never answers is ended by a real 20 ms
//! timeout or a 30 ms budget, and only the outcome is asserted (which error,
//! which layer counted what, that the call's future was dropped). The retry
//! scenario runs `Policy::call_idempotent` there too: a failure and a real
//! 20 ms call timeout are each retried once after a real (jittered, at most
//! 5 ms) backoff, and only the attempts, their order and the counts are
//! asserted. The rate scenario runs a `RateLimiter` on the runtime's clock
//! and timer: its burst, a refusal's hint within one emission interval,
//! waiters served in the order they reserved, a cancelled wait giving its
//! cell back; it asserts counts, order and the limiter's own instants, and
//! bounds latencies only generously.
//!
//! Include it with `#[macro_use] #[path = "common/suite.rs"] mod suite;`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures_lite::{future, FutureExt};
use watertight::breaker::{OnTransition, State, Transition};
use watertight::clock::{Clock, Timer};
use watertight::deadline::{timeout, timeout_at, Deadline, Elapsed};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::rate::{Quota, RateError, RateLimiter};
use watertight::retry::RetryConfig;
use watertight::{AcquireError, BreakerConfig, Bulkhead, CallError, CircuitBreaker, Rejection};

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

/// Every runtime of the suite runs the soak (`tests/common/soak.rs`,
/// which every binary including this file includes too) as it runs the
/// suite.
impl<R: Runtime> super::soak::Rt for R {
    type Clock = R::Clock;

    fn clock(&self) -> R::Clock {
        Runtime::clock(self)
    }

    fn spawn_task(&self, task: BoxFuture) -> BoxFuture {
        Runtime::spawn_task(self, task)
    }
}

/// Spawns `fut` now and returns a future of its output, which fails the test
/// if the task has not finished after [`STUCK`].
pub fn spawn<R, T, F>(rt: &R, fut: F) -> impl Future<Output = T> + Send + 'static + use<R, T, F>
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
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
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
///   `#[test] fn scenario() { run_on_smol(suite::scenario) }`;
/// - `behaviour_suite!(no_task_panics: run run_on_embassy);` leaves out the
///   scenario whose spawned task panics, for a runtime that cannot survive a
///   panicking task and report it through the task's join.
///
/// The including file must declare the suite as `crate::suite`.
macro_rules! behaviour_suite {
    (@one [async $(#[$m:meta])* with $rt:expr_2021] $name:ident) => {
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
    (@all $how:tt $($extra:ident)*) => {
        behaviour_suite!(@each $how
            limit_holds_under_contention
            exhausted_wait_times_out
            waiters_served_in_fifo_order
            cancelled_wait_loses_no_permit
            cancelled_after_wake_passes_permit_on
            timed_out_waiter_does_not_block_the_next
            close_wakes_all_waiters
            owned_permits_move_into_tasks
            bulkheads_are_independent
            breaker_concurrent_failures_trip_once
            breaker_probes_after_the_open_wait
            breaker_cancelled_call_gives_back_its_probe_slot
            breaker_slow_calls_trip_and_fast_calls_do_not
            breaker_many_tasks_on_a_closed_breaker
            deadline_timeout_on_the_real_timer
            policy_layers_in_order
            policies_isolate_a_hanging_system
            policy_cancelled_call_leaves_both_layers_clean
            policy_budget_limits_the_call
            policy_retries_a_failure_and_a_timeout_once
            rate_burst_fifo_waiters_and_a_cancelled_wait
            $($extra)*
        );
    };
    (no_task_panics: $($how:tt)*) => {
        behaviour_suite!(@all [$($how)*]);
    };
    ($($how:tt)*) => {
        behaviour_suite!(@all [$($how)*] breaker_panicking_call_records_a_failure);
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

// ---- the circuit breaker -------------------------------------------------

/// The suite's breakers: a window of up to 16 outcomes on the runtime's
/// clock, with a listener that records every transition.
pub type Breaker<R> = CircuitBreaker<<R as Runtime>::Clock, 16, Transitions>;

/// The open wait of the scenarios that wait it out: short, so that real time
/// passes quickly; only its outcome is asserted.
pub const OPEN_FOR: Duration = Duration::from_millis(50);

/// A listener that records each transition's `(from, to)`, in order.
#[derive(Clone, Default)]
pub struct Transitions(Arc<Mutex<Vec<(State, State)>>>);

impl Transitions {
    /// The transitions so far.
    pub fn seen(&self) -> Vec<(State, State)> {
        lock(&self.0).clone()
    }
}

impl OnTransition for Transitions {
    fn on_transition(&self, t: &Transition) {
        lock(&self.0).push((t.from, t.to));
    }
}

/// Compiles only for types that can be shared between tasks on any thread.
const fn assert_send_sync<T: Send + Sync>() {}

/// A breaker on the runtime's clock, shared through an `Arc`, and its
/// transitions.
fn breaker<R: Runtime>(
    rt: &R,
    name: &'static str,
    config: BreakerConfig,
) -> (Arc<Breaker<R>>, Transitions) {
    // With this runtime's clock, with and without a listener.
    assert_send_sync::<Breaker<R>>();
    assert_send_sync::<CircuitBreaker<R::Clock, 16>>();
    let seen = Transitions::default();
    let b = CircuitBreaker::try_with_listener(name, config, rt.clock(), seen.clone())
        .expect("the window fits");
    (Arc::new(b), seen)
}

/// Trips a breaker with `minimum_calls` failures and a 50 % threshold, and
/// returns when it opened (by its own clock).
async fn trip<R: Runtime>(b: &Breaker<R>) -> watertight::clock::Instant {
    for _ in 0..b.config().minimum_calls() {
        let r = b.call(async { Err::<(), _>("503") }).await;
        assert_eq!(r, Err(CallError::Failed("503")));
    }
    // Not `state()`: with a short open wait, a stalled machine may already
    // read half-open. The listener and the stamp say what happened.
    let m = b.metrics();
    assert_eq!(m.failed_calls, b.config().minimum_calls());
    m.last_transition.expect("the failures opened the breaker")
}

/// Waits on the breaker's own clock until its open wait that began at
/// `opened` is over.
async fn wait_out_open<R: Runtime>(b: &Breaker<R>, opened: watertight::clock::Instant) {
    b.clock()
        .sleep_until(opened + b.config().open_duration())
        .await;
}

/// (h) Ten calls in flight at once on spawned tasks all fail: the breaker
/// trips exactly once, every outcome is either in the frozen window or
/// counted stale, and later calls are refused with a hint no longer than the
/// open wait, without running.
pub async fn breaker_concurrent_failures_trip_once<R: Runtime>(rt: R) {
    const TASKS: usize = 10;
    const MIN: usize = 4;
    const LATER: usize = 5;
    let config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(MIN)
        .failure_rate_threshold(50.0)
        .open_duration(LONG)
        .build()
        .unwrap();
    let (b, seen) = breaker(&rt, "trip-once", config);
    let gate = Flag::new();
    let inside = Arc::new(AtomicUsize::new(0));

    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (b, gate, inside) = (Arc::clone(&b), gate.clone(), Arc::clone(&inside));
            spawn(&rt, async move {
                b.call(async {
                    inside.fetch_add(1, Ordering::SeqCst);
                    gate.wait().await;
                    Err::<(), _>("503")
                })
                .await
            })
        })
        .collect();
    until(&rt, "every call is in flight", || {
        inside.load(Ordering::SeqCst) == TASKS
    })
    .await;
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().calls, 0);

    gate.set();
    for t in tasks {
        assert_eq!(t.await, Err(CallError::Failed("503")));
    }

    assert_eq!(seen.seen(), [(State::Closed, State::Open)]);
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert!(m.calls >= MIN, "{} outcomes in the window", m.calls);
    assert_eq!(m.failed_calls, m.calls);
    assert_eq!(
        m.calls + m.stale,
        TASKS,
        "every outcome is in the window or counted stale"
    );
    assert_eq!(m.rejected, 0);

    // Later calls, from tasks and from here, are refused and do not run.
    let ran = Arc::new(AtomicUsize::new(0));
    let later: Vec<_> = (0..LATER)
        .map(|_| {
            let (b, ran) = (Arc::clone(&b), Arc::clone(&ran));
            spawn(&rt, async move {
                b.call(async {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), &str>(())
                })
                .await
            })
        })
        .collect();
    for t in later {
        match t.await {
            Err(CallError::Rejected(Rejection::Open { retry_after })) => {
                assert!(
                    retry_after > Duration::ZERO && retry_after <= LONG,
                    "retry_after {retry_after:?}"
                );
            }
            other => panic!("expected an open rejection, got {other:?}"),
        }
    }
    let hint = b.try_acquire().unwrap_err().retry_after();
    assert!(hint.is_some_and(|d| d <= LONG), "hint {hint:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(seen.seen(), [(State::Closed, State::Open)]);
    let m = b.metrics();
    assert_eq!((m.state, m.rejected), (State::Open, LATER + 1));
    assert_eq!(m.calls + m.stale, TASKS);
}

/// (i) Once the open wait is over, exactly `half_open_calls` calls are let
/// through as probes while they are held pending; the rest are refused with
/// `ProbesBusy`. When the probes succeed, the breaker closes on a fresh
/// window.
pub async fn breaker_probes_after_the_open_wait<R: Runtime>(rt: R) {
    const PROBES: usize = 3;
    const EXTRA: usize = 2;
    let config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(2)
        .open_duration(OPEN_FOR)
        .half_open_calls(PROBES)
        .build()
        .unwrap();
    let (b, seen) = breaker(&rt, "probes", config);
    let opened = trip::<R>(&b).await;
    assert_eq!(seen.seen(), [(State::Closed, State::Open)]);

    wait_out_open::<R>(&b, opened).await;
    assert_eq!(b.state(), State::HalfOpen);
    // Reading the state changed nothing.
    assert_eq!(seen.seen(), [(State::Closed, State::Open)]);

    let gate = Flag::new();
    let inside = Arc::new(AtomicUsize::new(0));
    let calls: Vec<_> = (0..PROBES + EXTRA)
        .map(|_| {
            let (b, gate, inside) = (Arc::clone(&b), gate.clone(), Arc::clone(&inside));
            spawn(&rt, async move {
                b.call(async {
                    inside.fetch_add(1, Ordering::SeqCst);
                    gate.wait().await;
                    Ok::<(), &str>(())
                })
                .await
            })
        })
        .collect();
    until(&rt, "every call was let through or refused", || {
        inside.load(Ordering::SeqCst) + b.metrics().rejected == PROBES + EXTRA
    })
    .await;
    assert_eq!(inside.load(Ordering::SeqCst), PROBES);
    assert_eq!(b.metrics().rejected, EXTRA);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    assert_eq!(
        seen.seen(),
        [(State::Closed, State::Open), (State::Open, State::HalfOpen)]
    );

    gate.set();
    let (mut passed, mut busy) = (0, 0);
    for c in calls {
        match c.await {
            Ok(()) => passed += 1,
            Err(CallError::Rejected(Rejection::ProbesBusy)) => busy += 1,
            other => panic!("expected a probe's success or ProbesBusy, got {other:?}"),
        }
    }
    assert_eq!((passed, busy), (PROBES, EXTRA));
    assert_eq!(
        seen.seen(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed)
        ]
    );
    let m = b.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!((m.calls, m.failed_calls), (0, 0), "a fresh window");
    assert_eq!((m.rejected, m.stale), (EXTRA + 1, 0));

    // Closed again: calls pass and fill the new window.
    assert_eq!(b.call(async { Ok::<_, &str>(1) }).await, Ok(1));
    assert_eq!(b.metrics().calls, 1);
}

/// (j) A call cancelled while its inner future is pending records nothing:
/// closed, it leaves the window empty; half-open, it gives its probe slot
/// back, whether it lost a race to a timer on a spawned task or was held
/// here and dropped, and the next probe passes and closes the breaker.
pub async fn breaker_cancelled_call_gives_back_its_probe_slot<R: Runtime>(rt: R) {
    let config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(2)
        .open_duration(OPEN_FOR)
        .half_open_calls(1)
        .build()
        .unwrap();
    let (b, seen) = breaker(&rt, "cancel-probe", config);

    // Closed: a call that loses a race to a timer records nothing.
    let (b1, rt1) = (Arc::clone(&b), rt.clone());
    let lost = spawn(&rt, async move {
        future::or(
            async { Some(b1.call(future::pending::<Result<(), &str>>()).await) },
            async {
                sleep(&rt1, SHORT).await;
                None
            },
        )
        .await
    });
    assert_eq!(lost.await, None);
    assert_eq!((b.metrics().calls, b.metrics().stale), (0, 0));

    let opened = trip::<R>(&b).await;
    wait_out_open::<R>(&b, opened).await;
    assert_eq!(b.state(), State::HalfOpen);

    // X takes the only probe slot on a spawned task and stays pending; its
    // race against a timer starts only when the gate opens.
    let gate = Flag::new();
    let inside = Arc::new(AtomicUsize::new(0));
    let (b2, gate2, inside2, rt2) = (
        Arc::clone(&b),
        gate.clone(),
        Arc::clone(&inside),
        rt.clone(),
    );
    let x = spawn(&rt, async move {
        future::or(
            async {
                let call = b2.call(async {
                    inside2.fetch_add(1, Ordering::SeqCst);
                    future::pending::<Result<(), &str>>().await
                });
                Some(call.await)
            },
            async {
                gate2.wait().await;
                sleep(&rt2, SHORT).await;
                None
            },
        )
        .await
    });
    until(&rt, "X is probing", || inside.load(Ordering::SeqCst) == 1).await;
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);

    gate.set();
    assert_eq!(x.await, None, "X must lose the race: its call never ends");
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.stale), (State::HalfOpen, 0, 0));

    // Y takes the slot again here, on its first poll, and is dropped.
    let mut y = Box::pin(b.call(future::pending::<Result<(), &str>>()));
    assert!(future::poll_once(&mut y).await.is_none());
    assert_eq!(b.try_acquire().unwrap_err(), Rejection::ProbesBusy);
    drop(y);

    // Z gets the slot and closes the breaker.
    let b3 = Arc::clone(&b);
    let z = spawn(
        &rt,
        async move { b3.call(async { Ok::<_, &str>(7) }).await },
    );
    assert_eq!(z.await, Ok(7));
    assert_eq!(
        seen.seen(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed)
        ]
    );
    let m = b.metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 0, 0));
    assert_eq!((m.rejected, m.stale), (2, 0));
}

/// The inner future of a call that panics.
#[allow(dead_code)] // not on runtimes generated with `no_task_panics`
async fn explode() -> Result<(), &'static str> {
    panic!("a call panics (the breaker suite expects this)")
}

/// (k) A call that panics on a spawned task records a failure as the task
/// unwinds (the runtime catches the panic and reports it through the join):
/// with one success before it, 1 of 2 failed trips a 50 % breaker.
#[allow(dead_code)] // not on runtimes generated with `no_task_panics`
pub async fn breaker_panicking_call_records_a_failure<R: Runtime>(rt: R) {
    let config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(2)
        .failure_rate_threshold(50.0)
        .open_duration(LONG)
        .build()
        .unwrap();
    let (b, seen) = breaker(&rt, "panic", config);
    assert_eq!(b.call(async { Ok::<_, &str>(()) }).await, Ok(()));

    let b1 = Arc::clone(&b);
    let task = spawn(&rt, async move { b1.call(explode()).await });
    let joined = AssertUnwindSafe(task).catch_unwind().await;
    let payload = joined.expect_err("the runtime reports the task's panic");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a call panics (the breaker suite expects this)")
    );

    assert_eq!(seen.seen(), [(State::Closed, State::Open)]);
    let m = b.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!((m.calls, m.failed_calls, m.stale), (2, 1, 0));
}

/// (l) The slow-call rule on the real clock: calls that sleep 20 ms are
/// slower than 1 ms and trip the breaker by slow-call rate (none failed);
/// calls that complete on their first poll are not slower than 10 s, even
/// with a 10 % threshold that one slow call in the window would reach.
pub async fn breaker_slow_calls_trip_and_fast_calls_do_not<R: Runtime>(rt: R) {
    const CALLS: usize = 4;
    const TAKES: Duration = Duration::from_millis(20);
    let slow_config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(CALLS)
        .slow_call_duration(Duration::from_millis(1))
        .slow_call_rate_threshold(50.0)
        .open_duration(LONG)
        .build()
        .unwrap();
    let (slow, slow_seen) = breaker(&rt, "slow", slow_config);
    let tasks: Vec<_> = (0..CALLS)
        .map(|_| {
            let (b, rt2) = (Arc::clone(&slow), rt.clone());
            spawn(&rt, async move {
                b.call(async move {
                    sleep(&rt2, TAKES).await;
                    Ok::<(), &str>(())
                })
                .await
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await, Ok(()));
    }
    assert_eq!(slow_seen.seen(), [(State::Closed, State::Open)]);
    let m = slow.metrics();
    assert_eq!(m.state, State::Open);
    assert_eq!((m.calls, m.slow_calls, m.failed_calls), (CALLS, CALLS, 0));
    assert_eq!((m.slow_call_rate, m.failure_rate), (Some(100.0), Some(0.0)));

    const TASKS: usize = 4;
    const EACH: usize = 4;
    let fast_config = BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(4)
        .slow_call_duration(Duration::from_secs(10))
        .slow_call_rate_threshold(10.0)
        .open_duration(LONG)
        .build()
        .unwrap();
    let (fast, fast_seen) = breaker(&rt, "fast", fast_config);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let b = Arc::clone(&fast);
            spawn(&rt, async move {
                for i in 0..EACH {
                    assert_eq!(b.call(async move { Ok::<_, &str>(i) }).await, Ok(i));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    assert_eq!(fast_seen.seen(), []);
    let m = fast.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!(
        (m.calls, m.slow_calls, m.failed_calls),
        (TASKS * EACH, 0, 0)
    );
    assert_eq!(m.slow_call_rate, Some(0.0));
}

/// (m) Eight tasks make fifty successful calls each through one closed
/// breaker, several calls in flight at once: none is refused, the window is
/// full and holds no failure, and nothing moved.
pub async fn breaker_many_tasks_on_a_closed_breaker<R: Runtime>(rt: R) {
    const TASKS: usize = 8;
    const CALLS: usize = 50;
    const WINDOW: usize = 16;
    let config = BreakerConfig::builder()
        .window_size(WINDOW)
        .minimum_calls(4)
        .open_duration(LONG)
        .build()
        .unwrap();
    let (b, seen) = breaker(&rt, "hammer", config);

    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (b, rt2) = (Arc::clone(&b), rt.clone());
            spawn(&rt, async move {
                let mut ok = 0;
                for i in 0..CALLS {
                    let rt3 = rt2.clone();
                    let r = b
                        .call(async move {
                            // Some calls stay in flight while others run.
                            if i % 3 == 0 {
                                rt3.yield_now().await;
                            }
                            Ok::<_, &str>(i)
                        })
                        .await;
                    assert_eq!(r, Ok(i));
                    ok += 1;
                    if i % 7 == 0 {
                        rt2.yield_now().await;
                    }
                }
                ok
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += t.await;
    }

    assert_eq!(ok, TASKS * CALLS);
    assert_eq!(seen.seen(), []);
    let m = b.metrics();
    assert_eq!(m.state, State::Closed);
    assert_eq!(m.calls, (TASKS * CALLS).min(WINDOW));
    assert_eq!((m.failed_calls, m.slow_calls), (0, 0));
    assert_eq!((m.rejected, m.stale), (0, 0));
    assert_eq!(m.failure_rate, Some(0.0));
}

// ---- deadlines and the policy --------------------------------------------

/// Counts the calls made by [`Hangs::call`] that started and those whose
/// future was dropped: a hanging system, ended only by cancellation.
#[derive(Clone, Default)]
pub struct Hangs {
    started: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

/// Adds one to its counter when dropped.
struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Hangs {
    /// A call that never answers: counted as started on its first poll and
    /// as dropped when its future goes.
    pub fn call<T: Send + 'static>(&self) -> impl Future<Output = T> + Send + 'static + use<T> {
        let guard = CountDrop(Arc::clone(&self.dropped));
        let started = Arc::clone(&self.started);
        async move {
            let _guard = guard;
            started.fetch_add(1, Ordering::SeqCst);
            future::pending::<T>().await
        }
    }

    /// Calls started so far.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    /// Calls whose future was dropped so far.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// The suite's policies: a breaker window of up to 16 outcomes, on the
/// runtime's clock.
pub type SuitePolicy<R> = Policy<<R as Runtime>::Clock, 16>;

/// A breaker config for the policies: a window of 16, `minimum_calls`
/// outcomes before it judges, a 50 % threshold, `open_for` open.
fn policy_breaker(minimum_calls: usize, open_for: Duration) -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(16)
        .minimum_calls(minimum_calls)
        .failure_rate_threshold(50.0)
        .open_duration(open_for)
        .half_open_calls(1)
        .build()
        .unwrap()
}

/// A policy on the runtime's clock, shared through an `Arc`.
fn policy<R: Runtime>(rt: &R, name: &'static str, config: PolicyConfig) -> Arc<SuitePolicy<R>> {
    assert_send_sync::<SuitePolicy<R>>();
    Arc::new(Policy::new(name, config, rt.clock()).expect("the window fits"))
}

/// A call that answers at once, counting that it ran.
fn answer<T: Send + 'static>(
    ran: &Arc<AtomicUsize>,
    value: T,
) -> impl Future<Output = Result<T, &'static str>> + Send + 'static + use<T> {
    let ran = Arc::clone(ran);
    async move {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok(value)
    }
}

/// (n) `timeout` on the real timer: a call that never answers ends with
/// `Elapsed`, its future dropped as the time runs out (before the `Timeout`
/// itself is dropped), and not before the deadline by the clock; a future
/// that is ready, at once or later, wins.
pub async fn deadline_timeout_on_the_real_timer<R: Runtime>(rt: R) {
    let clock = rt.clock();
    let hangs = Hangs::default();

    let start = clock.now();
    let mut never = Box::pin(timeout(clock.clone(), SHORT, hangs.call::<()>()));
    assert_eq!((&mut never).await, Err(Elapsed));
    assert_eq!((hangs.started(), hangs.dropped()), (1, 1));
    assert!(clock.now() >= start + SHORT, "it ran out before its time");
    drop(never);
    assert_eq!(hangs.dropped(), 1);

    // The same on a spawned task, with `timeout_at` and a `Deadline`.
    let (c2, h2) = (clock.clone(), hangs.clone());
    let on_task = spawn(&rt, async move {
        let at = c2.now() + SHORT;
        let r = timeout_at(c2.clone(), at, h2.call::<u8>()).await;
        let budget = Deadline::after(c2, SHORT);
        let run = budget.run(h2.call::<u8>()).await;
        (r, run, budget.is_expired())
    });
    assert_eq!(on_task.await, (Err(Elapsed), Err(Elapsed), true));
    assert_eq!((hangs.started(), hangs.dropped()), (3, 3));

    // Ready futures win: at once (even against no time at all), and after
    // another task lets them finish, long before a long timeout.
    assert_eq!(
        timeout(clock.clone(), Duration::ZERO, async { 7 }).await,
        Ok(7)
    );
    assert_eq!(timeout(clock.clone(), LONG, async { 8 }).await, Ok(8));
    let gate = Flag::new();
    let (gate2, rt2) = (gate.clone(), rt.clone());
    let opener = spawn(&rt, async move {
        rt2.yield_now().await;
        gate2.set();
    });
    let waited = gate.wait();
    assert_eq!(
        timeout(clock.clone(), LONG, async move {
            waited.await;
            9
        })
        .await,
        Ok(9)
    );
    opener.await;
    let budget = Deadline::after(clock, LONG);
    assert_eq!(budget.run(async { 10 }).await, Ok(10));
    assert!(!budget.is_expired());
}

/// (o) The layers in order on a real runtime. Two calls held pending take
/// both slots; a third with no slot wait is `BulkheadFull`, does not run and
/// the breaker records nothing; released, both succeed. A call that runs out
/// of its 20 ms call timeout is `DeadlineExceeded`, its future dropped, its
/// slot given back and a failure counted; when the failures trip the breaker
/// the next call is `CircuitOpen`, does not run, and its slot is given back
/// at once.
pub async fn policy_layers_in_order<R: Runtime>(rt: R) {
    let config = PolicyConfig::builder(2)
        .max_wait(Duration::ZERO)
        .call_timeout(LONG)
        .breaker(policy_breaker(4, LONG))
        .build()
        .unwrap();
    let p = policy(&rt, "layers", config);
    let gate = Flag::new();
    let inside = Arc::new(AtomicUsize::new(0));
    let held: Vec<_> = (0..2)
        .map(|i| {
            let (p, gate, inside) = (Arc::clone(&p), gate.clone(), Arc::clone(&inside));
            spawn(&rt, async move {
                p.call(|| async move {
                    inside.fetch_add(1, Ordering::SeqCst);
                    gate.wait().await;
                    Ok::<usize, &str>(i)
                })
                .await
            })
        })
        .collect();
    until(&rt, "both calls hold a slot", || {
        inside.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(p.bulkhead().in_flight(), 2);

    let ran = Arc::new(AtomicUsize::new(0));
    let err = p.call(|| answer(&ran, ())).await.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
    assert_eq!((err.system(), err.is_unavailable()), ("layers", true));
    assert_eq!(err.retry_after(), None);
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a refused call never runs");
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.rejected), (State::Closed, 0, 0));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.rejected_full, m.in_flight), (2, 1, 2));

    gate.set();
    for (i, h) in held.into_iter().enumerate() {
        assert_eq!(h.await, Ok(i));
    }
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.failed_calls, m.rejected), (2, 0, 0));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (2, 0, 2));

    // A call timeout of 20 ms; two failures of two trip the breaker.
    let config = PolicyConfig::builder(2)
        .max_wait(Duration::ZERO)
        .call_timeout(SHORT)
        .breaker(policy_breaker(2, LONG))
        .build()
        .unwrap();
    let slow = policy(&rt, "slow", config);
    let hangs = Hangs::default();
    let (s2, h2) = (Arc::clone(&slow), hangs.clone());
    let first = spawn(&rt, async move {
        s2.call(|| h2.call::<Result<(), &str>>()).await
    });
    let err = first.await.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!((err.system(), err.is_unavailable()), ("slow", true));
    assert_eq!((hangs.started(), hangs.dropped()), (1, 1));
    let m = slow.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (1, 0, 2));
    let m = slow.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 1, 1));

    let err = slow.call(|| hangs.call::<Result<(), &str>>()).await;
    assert_eq!(*err.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    assert_eq!((hangs.started(), hangs.dropped()), (2, 2));
    let m = slow.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Open, 2, 2));

    let err = slow.call(|| answer(&ran, ())).await.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::CircuitOpen(Rejection::Open { .. })),
        "{err:?}"
    );
    let hint = err.retry_after();
    assert!(
        hint.is_some_and(|d| d > Duration::ZERO && d <= LONG),
        "hint {hint:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "a refused call never runs");
    assert_eq!(slow.breaker().metrics().rejected, 1);
    let m = slow.bulkhead().metrics();
    assert_eq!((m.accepted, m.rejected(), m.in_flight), (3, 0, 0));
    assert_eq!(m.available, 2, "the breaker's refusal gave the slot back");
}

/// (p) One system hanging does not touch another: "payments" hangs and
/// "inventory" answers at once, on one runtime. Of the payments calls, each
/// that got a slot ran out of its call timeout (its future dropped, a
/// failure counted) and each that did not was refused by the bulkhead;
/// every inventory call, made while payments hangs, succeeds without a
/// refusal and its breaker sees no failure.
pub async fn policies_isolate_a_hanging_system<R: Runtime>(rt: R) {
    const PAYMENTS: usize = 8;
    const INVENTORY: usize = 12;
    const SLOTS: usize = 2;
    let payments = policy(
        &rt,
        "payments",
        PolicyConfig::builder(SLOTS)
            .max_wait(Duration::from_millis(5))
            .call_timeout(SHORT)
            // Never judges within this test: only the bulkhead and the
            // timeout refuse payments calls.
            .breaker(policy_breaker(16, LONG))
            .build()
            .unwrap(),
    );
    let inventory = policy(
        &rt,
        "inventory",
        PolicyConfig::builder(4)
            .max_wait(LONG)
            .allow_long_max_wait()
            .call_timeout(LONG)
            .breaker(policy_breaker(4, LONG))
            .build()
            .unwrap(),
    );
    let hangs = Hangs::default();

    let pay: Vec<_> = (0..PAYMENTS)
        .map(|_| {
            let (p, hangs) = (Arc::clone(&payments), hangs.clone());
            spawn(&rt, async move {
                p.call(|| hangs.call::<Result<(), &str>>()).await
            })
        })
        .collect();
    until(&rt, "payments is hanging", || hangs.started() >= SLOTS).await;

    let ran = Arc::new(AtomicUsize::new(0));
    let inv: Vec<_> = (0..INVENTORY)
        .map(|i| {
            let (p, ran, rt2) = (Arc::clone(&inventory), Arc::clone(&ran), rt.clone());
            spawn(&rt, async move {
                p.call(|| async move {
                    // Some calls stay in flight while others run.
                    if i % 2 == 0 {
                        rt2.yield_now().await;
                    }
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok::<usize, &str>(i)
                })
                .await
            })
        })
        .collect();
    let mut answered = 0;
    for (i, t) in inv.into_iter().enumerate() {
        assert_eq!(t.await, Ok(i));
        answered += 1;
    }
    assert_eq!(answered, INVENTORY);
    assert_eq!(ran.load(Ordering::SeqCst), INVENTORY);

    let (mut timed_out, mut full) = (0, 0);
    for t in pay {
        let err = t.await.expect_err("payments never answers");
        assert_eq!((err.system(), err.is_unavailable()), ("payments", true));
        match err.kind() {
            ErrorKind::DeadlineExceeded => timed_out += 1,
            ErrorKind::BulkheadFull => full += 1,
            other => panic!("a payments call ended with {other:?}"),
        }
    }
    assert_eq!(timed_out + full, PAYMENTS);
    assert!(timed_out >= SLOTS, "{timed_out} payments calls ran");
    assert_eq!((hangs.started(), hangs.dropped()), (timed_out, timed_out));
    let m = payments.breaker().metrics();
    assert_eq!((m.state, m.rejected), (State::Closed, 0));
    assert_eq!((m.calls, m.failed_calls), (timed_out, timed_out));
    let m = payments.bulkhead().metrics();
    assert_eq!(
        (m.accepted, m.rejected(), m.in_flight),
        (timed_out, full, 0)
    );
    assert!(m.peak_in_flight <= SLOTS);

    let m = inventory.breaker().metrics();
    assert_eq!((m.state, m.failed_calls, m.rejected), (State::Closed, 0, 0));
    assert_eq!(m.calls, INVENTORY.min(16));
    let m = inventory.bulkhead().metrics();
    assert_eq!(
        (m.accepted, m.rejected(), m.cancelled_waits),
        (INVENTORY, 0, 0)
    );
    assert_eq!((m.in_flight, m.available), (0, 4));
    assert!(m.peak_in_flight <= 4);
}

/// (q) A policy call dropped at each await point — while it waits for a
/// slot, while it runs, and while it runs as the half-open probe — leaves
/// the bulkhead at full availability and the breaker with no outcome
/// recorded and no probe slot taken.
pub async fn policy_cancelled_call_leaves_both_layers_clean<R: Runtime>(rt: R) {
    let config = PolicyConfig::builder(1)
        .max_wait(LONG)
        .allow_long_max_wait()
        .call_timeout(LONG)
        .breaker(policy_breaker(2, OPEN_FOR))
        .build()
        .unwrap();
    let p = policy(&rt, "cancel", config);
    let ran = Arc::new(AtomicUsize::new(0));
    let hangs = Hangs::default();

    // Waiting for the slot, held here; the race starts when the gate opens.
    let held = p.bulkhead().try_acquire().unwrap();
    let gate = Flag::new();
    let (p2, ran2, gate2, rt2) = (Arc::clone(&p), Arc::clone(&ran), gate.clone(), rt.clone());
    let x = spawn(&rt, async move {
        future::or(async { Some(p2.call(|| answer(&ran2, ())).await) }, async {
            gate2.wait().await;
            sleep(&rt2, SHORT).await;
            None
        })
        .await
    });
    until(&rt, "the call waits for a slot", || {
        p.bulkhead().waiting() == 1
    })
    .await;
    gate.set();
    assert_eq!(x.await, None, "nobody released the slot");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let m = p.bulkhead().metrics();
    assert_eq!((m.waiting, m.cancelled_waits, m.in_flight), (0, 1, 1));
    drop(held);
    assert_eq!(p.bulkhead().available(), 1);
    let m = p.breaker().metrics();
    assert_eq!((m.calls, m.rejected, m.stale), (0, 0, 0));

    // Running, until a timer wins the race.
    let (p2, h2, rt2) = (Arc::clone(&p), hangs.clone(), rt.clone());
    let x = spawn(&rt, async move {
        future::or(
            async { Some(p2.call(|| h2.call::<Result<(), &str>>()).await) },
            async {
                sleep(&rt2, SHORT).await;
                None
            },
        )
        .await
    });
    assert_eq!(x.await, None, "the call never answers");
    assert_eq!((hangs.started(), hangs.dropped()), (1, 1));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (2, 0, 1));
    assert_eq!((m.rejected(), m.cancelled_waits), (0, 1));
    let m = p.breaker().metrics();
    assert_eq!(
        (m.state, m.calls, m.rejected, m.stale),
        (State::Closed, 0, 0, 0)
    );

    // Half-open: trip it, wait out the open wait, take the only probe slot
    // and drop the call.
    for _ in 0..2 {
        let err = p.call(|| async { Err::<(), _>("503") }).await.unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::Call("503"));
    }
    let opened = p.breaker().metrics().last_transition.expect("it opened");
    p.breaker().clock().sleep_until(opened + OPEN_FOR).await;
    assert_eq!(p.breaker().state(), State::HalfOpen);
    let gate = Flag::new();
    let (p2, h2, gate2, rt2) = (Arc::clone(&p), hangs.clone(), gate.clone(), rt.clone());
    let x = spawn(&rt, async move {
        future::or(
            async { Some(p2.call(|| h2.call::<Result<(), &str>>()).await) },
            async {
                gate2.wait().await;
                sleep(&rt2, SHORT).await;
                None
            },
        )
        .await
    });
    until(&rt, "the probe runs", || hangs.started() == 2).await;
    assert_eq!(
        p.breaker().try_acquire().unwrap_err(),
        Rejection::ProbesBusy
    );
    gate.set();
    assert_eq!(x.await, None, "the probe never answers");
    assert_eq!(hangs.dropped(), 2);
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.stale), (State::HalfOpen, 0, 0));
    assert_eq!(p.bulkhead().available(), 1);

    // The probe slot is free again: the next call probes and closes it.
    assert_eq!(p.call(|| answer(&ran, 7)).await, Ok(7));
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.failed_calls, m.rejected), (State::Closed, 0, 1));
    let m = p.bulkhead().metrics();
    assert_eq!((m.in_flight, m.waiting, m.available), (0, 0, 1));
}

/// (r) A call inside a 30 ms request budget, with a 10 s call timeout, that
/// never answers ends with `DeadlineExceeded` when the budget runs out; the
/// system did not exceed its own timeout, so the breaker records nothing,
/// however often it happens. A budget already spent does not start the call;
/// a budget with room lets it answer.
pub async fn policy_budget_limits_the_call<R: Runtime>(rt: R) {
    const BUDGET: Duration = Duration::from_millis(30);
    let config = PolicyConfig::builder(1)
        .call_timeout(Duration::from_secs(10))
        .breaker(policy_breaker(2, LONG))
        .build()
        .unwrap();
    let p = policy(&rt, "budget", config);
    let hangs = Hangs::default();

    let (p2, h2, clock) = (Arc::clone(&p), hangs.clone(), rt.clock());
    let on_task = spawn(&rt, async move {
        let budget = Deadline::after(clock, BUDGET);
        let r = p2
            .call_within(&budget, || h2.call::<Result<(), &str>>())
            .await;
        (r, budget.is_expired())
    });
    let (r, expired) = on_task.await;
    let err = r.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!((err.system(), err.is_unavailable()), ("budget", true));
    assert!(expired, "it ran out before the budget did");
    assert_eq!((hangs.started(), hangs.dropped()), (1, 1));

    // Twice more: two recorded failures would trip this breaker.
    for n in 2..=3 {
        let budget = Deadline::after(rt.clock(), BUDGET);
        let r = p
            .call_within(&budget, || hangs.call::<Result<(), &str>>())
            .await;
        assert_eq!(*r.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
        assert_eq!((hangs.started(), hangs.dropped()), (n, n));
    }
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 0, 0));
    assert_eq!((m.rejected, m.stale), (0, 0));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (3, 0, 1));

    let ran = Arc::new(AtomicUsize::new(0));
    let spent = Deadline::after(rt.clock(), Duration::ZERO);
    let r = p.call_within(&spent, || answer(&ran, ())).await;
    assert_eq!(*r.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a spent budget starts nothing"
    );

    let roomy = Deadline::after(rt.clock(), LONG);
    assert_eq!(p.call_within(&roomy, || answer(&ran, 5)).await, Ok(5));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 1, 0));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (5, 0, 1));
}

/// (s) Retries on the runtime's clock and timer. A call marked idempotent
/// whose first attempt fails and second succeeds, on a spawned task, is
/// made twice, in order, each attempt holding its own slot (the first one's
/// given back before the second starts); the breaker sees both outcomes and
/// the retry counts one retry after a failure. A call whose first attempt
/// never answers is cut by the real 20 ms call timeout (its future dropped)
/// and retried once; the second attempt answers. Only counts and order are
/// asserted, never how long the backoff slept.
pub async fn policy_retries_a_failure_and_a_timeout_once<R: Runtime>(rt: R) {
    let config = PolicyConfig::builder(2)
        .call_timeout(SHORT)
        .breaker(policy_breaker(16, LONG))
        .retry(
            RetryConfig::builder()
                .max_attempts(3)
                .backoff(Duration::from_millis(1), Duration::from_millis(5))
                .min_attempt_time(Duration::ZERO)
                .seed(17),
        )
        .build()
        .unwrap();
    let p = policy(&rt, "retry", config);

    // Fails once, then succeeds; each attempt logs its number and the
    // slots in flight as it starts.
    let log = Arc::new(Mutex::new(Vec::new()));
    let (p2, log2) = (Arc::clone(&p), Arc::clone(&log));
    let on_task = spawn(&rt, async move {
        let made = AtomicUsize::new(0);
        p2.call_idempotent(|| {
            let n = made.fetch_add(1, Ordering::SeqCst) + 1;
            lock(&log2).push((n, p2.bulkhead().in_flight()));
            async move {
                if n == 1 {
                    Err("connection reset")
                } else {
                    Ok(n)
                }
            }
        })
        .await
    });
    assert_eq!(on_task.await, Ok(2), "the second attempt's answer");
    assert_eq!(
        *lock(&log),
        [(1, 1), (2, 1)],
        "two attempts, in order, one slot each"
    );
    let r = p.retry_metrics();
    assert_eq!(
        (r.after_failure, r.after_timeout, r.budget_exhausted),
        (1, 0, 0)
    );
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 2, 1));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (2, 0, 2));

    // The first attempt hangs until the call timeout cuts it; the retry
    // answers at once.
    let hangs = Hangs::default();
    let ran = Arc::new(AtomicUsize::new(0));
    let made = AtomicUsize::new(0);
    let r = p
        .call_idempotent(|| {
            let attempt: Pin<Box<dyn Future<Output = Result<u8, &str>> + Send>> =
                if made.fetch_add(1, Ordering::SeqCst) == 0 {
                    Box::pin(hangs.call())
                } else {
                    Box::pin(answer(&ran, 9))
                };
            attempt
        })
        .await;
    assert_eq!(r, Ok(9));
    assert_eq!(made.load(Ordering::SeqCst), 2);
    assert_eq!(
        (hangs.started(), hangs.dropped(), ran.load(Ordering::SeqCst)),
        (1, 1, 1),
        "the hung attempt was dropped, then the retry ran"
    );
    let r = p.retry_metrics();
    assert_eq!(
        (r.after_failure, r.after_timeout, r.budget_exhausted),
        (1, 1, 0)
    );
    let m = p.breaker().metrics();
    assert_eq!((m.state, m.calls, m.failed_calls), (State::Closed, 4, 2));
    let m = p.bulkhead().metrics();
    assert_eq!((m.accepted, m.in_flight, m.available), (4, 0, 2));
}

// ---- the rate limiter ----------------------------------------------------

/// The suite's rate: 20 cells a second, 5 at once; one cell every 50 ms.
const RATE: Quota = Quota::per_second(20).burst(5);
/// `RATE`'s emission interval.
const CELL: Duration = Duration::from_millis(50);

/// (t) A rate limiter on the runtime's clock and timer. The burst of 5 is
/// admitted at once and the next cell refused with a hint within one
/// interval. Then waits reserve cells ahead of the schedule, on spawned
/// tasks: a batch of 5 cells (so the single cells behind it lie 300 ms and
/// more ahead: no stall of the test turns them into admissions at once),
/// three single cells `A`, `B`, `C` (`acquire_timeout`) and a last one,
/// `E`. `E`, the newest reservation, is dropped before its instant: its cell
/// goes back, so the next cell conforms one interval earlier (the limiter's
/// own `ready_at`, read before and after, moves by exactly 50 ms), and a
/// check at that earlier instant is admitted. The others complete in the
/// order they reserved. Counts and order are asserted; time only through
/// the limiter's instants and a refusal's hint bounded by one interval.
pub async fn rate_burst_fifo_waiters_and_a_cancelled_wait<R: Runtime>(rt: R) {
    let clock = rt.clock();
    let r = Arc::new(RateLimiter::new("rate", RATE, rt.clock()));
    let start = clock.now();
    for i in 1..=5 {
        r.check()
            .unwrap_or_else(|e| panic!("cell {i} of the burst: {e}"));
    }
    // The sixth is refused, with a hint of at most one interval; a stall of
    // a whole interval since the burst began would have let one more cell
    // conform, and only then may it be admitted.
    let mut late = 0;
    match r.check() {
        Err(RateError::Limited(n)) => assert!(
            n.retry_after() > Duration::ZERO && n.retry_after() <= CELL,
            "hint {:?} for a cell at most {CELL:?} away",
            n.retry_after()
        ),
        Ok(()) => {
            assert!(
                clock.now() - start >= CELL,
                "a sixth cell within one interval of the burst"
            );
            late = 1;
        }
        Err(e) => panic!("{e}"),
    }

    // The waiters, each on a task of its own, in order of reservation.
    let order = Arc::new(Mutex::new(Vec::new()));
    let registered = |n: usize| {
        let (r, order) = (Arc::clone(&r), Arc::clone(&order));
        move || r.waiting() + lock(&order).len() == n
    };
    let mut waiters = Vec::new();
    for (i, id) in ['H', 'A', 'B', 'C'].into_iter().enumerate() {
        let (r2, order2) = (Arc::clone(&r), Arc::clone(&order));
        waiters.push(spawn(&rt, async move {
            let served = if id == 'H' {
                let deadline = r2.clock().now() + LONG;
                r2.acquire_n_until(5, deadline).await
            } else {
                r2.acquire_timeout(LONG).await
            };
            lock(&order2).push(id);
            served
        }));
        until(&rt, "the wait has reserved", registered(i + 1)).await;
    }
    let gate = Flag::new();
    let (r2, gate2) = (Arc::clone(&r), gate.clone());
    let e = spawn(&rt, async move {
        future::or(async { Some(r2.acquire_timeout(LONG).await) }, async {
            gate2.wait().await;
            None
        })
        .await
    });
    until(&rt, "E has reserved", registered(5)).await;

    // E is the newest reservation: dropping it gives its cell back, and the
    // next cell conforms exactly one interval earlier.
    let ready_at = |refused: Result<(), RateError>| match refused {
        Err(RateError::Limited(n)) => n.ready_at(),
        other => panic!("the schedule is booked 400 ms and more ahead, yet {other:?}"),
    };
    let with_e = ready_at(r.check());
    gate.set();
    assert_eq!(e.await, None, "E was dropped while it waited");
    let without_e = ready_at(r.check());
    assert_eq!(
        with_e - without_e,
        CELL,
        "E's cell given back: the next conforms one interval earlier"
    );
    assert_eq!(r.metrics().cancelled, 1);

    for w in waiters {
        w.await.expect("every wait is served within its deadline");
    }
    assert_eq!(*lock(&order), ['H', 'A', 'B', 'C'], "served in order");

    // At the earlier instant the next cell is admitted.
    clock.sleep_until(without_e).await;
    r.check().expect("the cell E gave back, at its instant");

    let m = r.metrics();
    assert_eq!(
        (m.admitted, m.admitted_cells, m.refused),
        (10 + late, 14 + late, 3 - late)
    );
    assert_eq!((m.waited, m.cancelled, m.waiting), (4, 1, 0));
}
