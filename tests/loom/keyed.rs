use super::*;
use watertight::rate::{FnvState, KeyedError, KeyedRateLimiter, Quota, RateError, WAYS};

type Keyed = KeyedRateLimiter<u32, std::sync::Arc<ManualClock>, 1, FnvState>;

/// One cell a second, a burst of `burst`, one set.
fn setup(burst: u32) -> (Arc<Keyed>, std::sync::Arc<ManualClock>) {
    let clock = std::sync::Arc::new(ManualClock::new());
    let quota = Quota::per_second(1).burst(burst);
    (
        Arc::new(KeyedRateLimiter::with_hasher(
            "loom",
            quota,
            clock.clone(),
            FnvState,
        )),
        clock,
    )
}

#[test]
fn two_threads_on_one_key_admit_exactly_the_burst() {
    model(|| {
        let (r, _clock) = setup(2);
        let other = {
            let r = r.clone();
            thread::spawn(move || [r.check_key(&7).is_ok(), r.check_key(&7).is_ok()])
        };
        let mine = r.check_key(&7).is_ok();
        let theirs = other.join().unwrap();
        let admitted = theirs.iter().chain([&mine]).filter(|&&ok| ok).count();
        assert_eq!(admitted, 2);
        assert!(matches!(
            r.check_key(&7),
            Err(KeyedError::Rate(RateError::Limited(n)))
                if n.retry_after() == Duration::from_secs(1)
        ));
        let m = r.metrics();
        assert_eq!((m.admitted, m.refused, m.keys_live), (2, 2, 1));
    });
}

#[test]
fn a_key_evicted_while_checked_is_never_double_counted() {
    model(|| {
        let (r, clock) = setup(2);
        // Fill the set at 0 (TATs 1 s), key 0 first; at 1 s all stale.
        for k in 0..WAYS as u32 {
            r.check_key(&k).unwrap();
        }
        clock.advance(Duration::from_secs(1));
        let newcomer = {
            let r = r.clone();
            thread::spawn(move || r.check_key(&100))
        };
        // Key 0: its whole burst, in its slot or a fresh one.
        let mine = r.check_key_n(&0, 2);
        let theirs = newcomer.join().unwrap();
        assert_eq!((mine, theirs), (Ok(()), Ok(())));
        // Key 0 spent 2 cells at 1 s (TAT 3 s): nothing is left for it,
        // and the next cell comes at 2 s, not sooner.
        assert!(matches!(
            r.check_key(&0),
            Err(KeyedError::Rate(RateError::Limited(n)))
                if n.retry_after() == Duration::from_secs(1)
        ));
        // The newcomer spent 1 of its 2 (TAT 2 s).
        r.check_key(&100).unwrap();
        assert!(r.check_key(&100).is_err());
        let m = r.metrics();
        // Evicted: key 0 (then key 0 evicted another), or only another.
        assert!(m.evictions == 1 || m.evictions == 2, "{m:?}");
        assert_eq!((m.admitted, m.full, m.keys_live), (WAYS + 3, 0, 2));
    });
}
