use super::*;
use watertight::chaos::{ChaosConfig, Fault, Injector};

type Chaos = Injector<ManualClock, Result<(), ()>>;

fn config() -> ChaosConfig<Result<(), ()>> {
    ChaosConfig::builder()
        .error(0.3, || Err(()))
        .hang(0.3)
        .seed(5)
        .build()
        .unwrap()
}

/// The first `n` draws of a fresh injector, one after another.
fn sequential(n: usize) -> Vec<Option<Fault>> {
    let chaos: Chaos = Injector::new("loom", config(), ManualClock::new());
    (0..n).map(|_| chaos.draw()).collect()
}

fn key(f: &Option<Fault>) -> usize {
    f.map_or(4, |f| f as usize)
}

#[test]
fn concurrent_draws_are_a_sequential_run_shared_out() {
    model(|| {
        let chaos: Arc<Chaos> = Arc::new(Injector::new("loom", config(), ManualClock::new()));
        let other = {
            let chaos = chaos.clone();
            thread::spawn(move || [chaos.draw(), chaos.draw()])
        };
        let mine = [chaos.draw(), chaos.draw()];
        let theirs = other.join().unwrap();
        let mut got: Vec<_> = mine.iter().chain(&theirs).copied().collect();
        let mut want = sequential(4);
        got.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(got, want);
        let m = chaos.metrics();
        assert_eq!(m.total_injected() + m.passed, 4, "{m:?}");
    });
}

#[test]
fn a_draw_racing_disable_is_counted_once_or_not_at_all() {
    model(|| {
        let chaos: Arc<Chaos> = Arc::new(Injector::new("loom", config(), ManualClock::new()));
        let other = {
            let chaos = chaos.clone();
            thread::spawn(move || chaos.draw())
        };
        chaos.disable();
        assert_eq!(chaos.draw(), None, "disabled on this thread: no draw");
        let theirs = other.join().unwrap();
        chaos.enable();
        let mine = chaos.draw();
        let m = chaos.metrics();
        let taken = m.total_injected() + m.passed;
        let seq = sequential(2);
        match taken {
            // The other call saw the flag up: it took the first draw.
            2 => assert_eq!([theirs, mine], [seq[0], seq[1]]),
            // It saw the flag down: no draw, and the sequence resumes.
            1 => assert_eq!((theirs, mine), (None, seq[0])),
            n => panic!("{n} draws counted for at most 2 calls"),
        }
    });
}
