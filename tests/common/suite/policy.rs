//! Deadlines and the policy's scenarios, retries included.

use super::*;

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
