use super::*;
use watertight::rate::{Quota, RateError, RateLimiter};

const SECOND: Duration = Duration::from_secs(1);

type Limiter = RateLimiter<std::sync::Arc<ManualClock>>;

/// One cell a second, a burst of `burst`, on a clock the test can move.
fn setup(burst: u32) -> (Arc<Limiter>, std::sync::Arc<ManualClock>) {
    let clock = std::sync::Arc::new(ManualClock::new());
    let quota = Quota::per_second(1).burst(burst);
    (
        Arc::new(RateLimiter::new("loom", quota, clock.clone())),
        clock,
    )
}

fn limited_for(err: RateError) -> Duration {
    match err {
        RateError::Limited(n) => n.retry_after(),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn three_racing_checks_admit_exactly_the_burst() {
    model(|| {
        let (r, _clock) = setup(2);
        let spawn = || {
            let r = r.clone();
            thread::spawn(move || r.check().is_ok())
        };
        let (a, b) = (spawn(), spawn());
        let mine = r.check().is_ok();
        let admitted = [mine, a.join().unwrap(), b.join().unwrap()]
            .into_iter()
            .filter(|&ok| ok)
            .count();
        assert_eq!(admitted, 2);
        // The third cell comes back one interval later, not sooner.
        assert_eq!(limited_for(r.check().unwrap_err()), SECOND);
        let m = r.metrics();
        assert_eq!((m.admitted, m.refused), (2, 2));
    });
}

#[test]
fn racing_checks_with_a_moving_clock_never_pass_the_burst() {
    model(|| {
        let (r, clock) = setup(1);
        r.check().unwrap(); // the next cell conforms at 1 s
        let ticker = thread::spawn(move || clock.advance(SECOND));
        let r2 = r.clone();
        let other = thread::spawn(move || r2.check().is_ok());
        let mine = r.check().is_ok();
        let theirs = other.join().unwrap();
        ticker.join().unwrap();
        // At most the one cell of the second second, whoever got it.
        assert!(!(mine && theirs), "two cells in one interval");
        let last = r.check().is_ok();
        assert_eq!(
            usize::from(mine) + usize::from(theirs) + usize::from(last),
            1
        );
    });
}

#[test]
fn a_reservation_and_a_check_never_take_the_same_cell() {
    model(|| {
        let (r, clock) = setup(1);
        r.check().unwrap();
        clock.set(Instant::ZERO + SECOND); // one cell conforms now
        let done = Arc::new(AtomicBool::new(false));

        let (r1, done1) = (r.clone(), done.clone());
        let waiter = thread::spawn(move || {
            block_on(r1.acquire_until(Instant::ZERO + 2 * SECOND)).unwrap();
            done1.store(true, SeqCst);
        });
        let r2 = r.clone();
        let checker = thread::spawn(move || r2.check().is_ok());

        let checked = checker.join().unwrap();
        // Finished while the clock still reads 1 s: it took that cell.
        let waited_at_once = done.load(SeqCst);
        assert!(
            !(checked && waited_at_once),
            "the check and the wait share a cell"
        );
        clock.advance(SECOND); // 2 s: a reserved cell conforms
        waiter.join().unwrap();

        // One cell at 0, one at 1 s, one at 2 s: whoever took them.
        let last = r.check().is_ok();
        assert_eq!(last, !checked);
        let m = r.metrics();
        assert_eq!((m.admitted, m.waiting), (3, 0));
    });
}

/// Two waits reserve at once (two different cells: the TAT moves by two
/// intervals), then each is dropped before its cell conforms, in either
/// order: the newest gives its cell back, one behind it cannot (its
/// successor's instant was computed with it), so the cells come back
/// all or one, never more. Waits that sleep on the clock are in
/// `a_reservation_and_a_check_never_take_the_same_cell` and in
/// `tests/rate.rs`; here the clock stands still, as a clock read
/// before another thread's advance may otherwise put a reservation one
/// interval later than the test could wait for.
#[test]
fn two_reservations_cancelled_in_any_order_never_invent_cells() {
    model(|| {
        let (r, clock) = setup(1);
        r.check().unwrap(); // the next cell conforms at 1 s
        let spawn = || {
            let r = r.clone();
            thread::spawn(move || {
                let mut wait = pin!(r.until_ready());
                let first = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                assert!(first.is_pending(), "nothing conforms at 0");
            })
        };
        let (a, b) = (spawn(), spawn());
        a.join().unwrap();
        b.join().unwrap();
        let m = r.metrics();
        assert_eq!((m.cancelled, m.waiting, m.admitted), (2, 0, 1));

        // Both cells back: one at 1 s, the next at 2 s. One back: the
        // first is spent, so nothing at 1 s. Never two at 1 s.
        clock.advance(SECOND);
        let at_one = usize::from(r.check().is_ok()) + usize::from(r.check().is_ok());
        assert!(at_one <= 1, "{at_one} cells at 1 s");
        clock.advance(SECOND);
        assert!(r.check().is_ok(), "the cell of 2 s is free either way");
        assert!(r.check().is_err());
    });
}

#[test]
fn a_cancel_racing_a_check_never_invents_cells() {
    model(|| {
        let (r, clock) = setup(1);
        r.check().unwrap(); // the next cell conforms at 1 s
        let r1 = r.clone();
        let canceller = thread::spawn(move || {
            // Reserved (pending) or, if the clock moved first, admitted;
            // dropped as the thread ends.
            let mut wait = pin!(r1.until_ready());
            let first = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            first.is_ready()
        });
        let ticker = thread::spawn(move || clock.advance(SECOND));
        let checked = r.check().is_ok();
        let _ = canceller.join().unwrap();
        ticker.join().unwrap();

        // Whether the wait gave its cell back (dropped before 1 s), spent
        // it (dropped at 1 s) or took it at once, and whether the check
        // ran before or after: by 1 s exactly two cells are out.
        let last = r.check().is_ok();
        assert!(!(checked && last));
        let m = r.metrics();
        assert_eq!(m.admitted, 2, "{m:?}");
        assert_eq!(m.waiting, 0);
    });
}
