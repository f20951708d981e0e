//! The rate limiter's scenario.

use super::*;

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
