//! The circuit breaker's scenarios.

use super::*;

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
