use super::*;
use watertight::limit::{AdaptiveBulkhead, LimitAlgorithm, Signal, Window};

/// Counts what it is shown, and moves the limit between 1 and 2 on
/// every window, so that resizes race with the other thread's permits.
struct Counting {
    limit: usize,
    seen: usize,
    out: Arc<AtomicUsize>,
}

impl LimitAlgorithm for Counting {
    fn limit(&self) -> usize {
        self.limit
    }
    fn min_limit(&self) -> usize {
        1
    }
    fn max_limit(&self) -> usize {
        2
    }
    fn update(&mut self, w: &Window) -> usize {
        self.seen += w.samples();
        self.out.store(self.seen, SeqCst);
        self.limit = 3 - self.limit;
        self.limit
    }
}

fn setup() -> (
    Arc<AdaptiveBulkhead<ManualClock, Counting>>,
    Arc<AtomicUsize>,
) {
    let out = Arc::new(AtomicUsize::new(0));
    let alg = Counting {
        limit: 2,
        seen: 0,
        out: out.clone(),
    };
    let clock = ManualClock::new();
    let b = AdaptiveBulkhead::with_window("loom", alg, Duration::from_secs(1), 0, clock);
    // The window is over before anyone finishes: every record may close it.
    b.bulkhead().clock().advance(Duration::from_secs(1));
    (Arc::new(b), out)
}

fn finish_one(b: &AdaptiveBulkhead<ManualClock, Counting>, signal: Signal) -> usize {
    match b.try_acquire() {
        Ok(p) => {
            p.record(signal);
            1
        }
        Err(_) => 0,
    }
}

fn check_teardown(b: &AdaptiveBulkhead<ManualClock, Counting>, out: &AtomicUsize, recorded: usize) {
    b.bulkhead().clock().advance(Duration::from_secs(1));
    b.tick();
    assert_eq!(out.load(SeqCst), recorded, "samples lost or counted twice");
    assert_eq!(b.bulkhead().in_flight(), 0);
    assert_eq!(b.bulkhead().available(), b.limit());
    assert!((1..=2).contains(&b.limit()));
}

#[test]
fn two_finishers_race_to_close_the_window() {
    model(|| {
        let (b, out) = setup();
        let b2 = b.clone();
        let t = thread::spawn(move || finish_one(&b2, Signal::Success));
        let mine = finish_one(&b, Signal::Dropped);
        let theirs = t.join().unwrap();
        check_teardown(&b, &out, mine + theirs);
    });
}

#[test]
fn a_finisher_and_a_tick_race_while_a_permit_is_held() {
    model(|| {
        let (b, out) = setup();
        let held = b.try_acquire().unwrap();
        let b2 = b.clone();
        let t = thread::spawn(move || finish_one(&b2, Signal::Timeout));
        b.tick();
        held.record(Signal::Success);
        let theirs = t.join().unwrap();
        check_teardown(&b, &out, 1 + theirs);
    });
}
