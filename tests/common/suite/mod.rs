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
//! Include it with `#[macro_use] #[path = "common/suite/mod.rs"] mod suite;`.
//! The scenarios live a file per primitive beside this one.

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

/// Compiles only for types that can be shared between tasks on any thread.
const fn assert_send_sync<T: Send + Sync>() {}

mod breaker;
mod bulkhead;
mod policy;
mod rate;

pub use breaker::*;
pub use bulkhead::*;
pub use policy::*;
pub use rate::*;
