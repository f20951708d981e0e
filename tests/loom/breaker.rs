use std::sync::Mutex;
use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Notify};
use loom::thread;
use watertight::breaker::{OnTransition, State, Transition};
use watertight::clock::{Clock, Instant, ManualClock};
use watertight::{BreakerConfig, CallPermit, CircuitBreaker, Rejection};

use super::model;

/// The preemption bound the small models below explore at least,
/// whatever `LOOM_MAX_PREEMPTIONS` says: they take milliseconds at this
/// bound, and loom's bounded search misses races at 2 that it finds here
/// (a recorder preempted between claiming its slot and writing it while
/// another thread freezes the window, for one).
const DEEP: usize = 4;

/// Like [`model`], exploring at least [`DEEP`] preemptions.
fn deep_model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(2).max(DEEP));
    builder.check(f);
}

const OPEN_WAIT: Duration = Duration::from_secs(1);

/// Every transition the breaker made, in the order the listener heard
/// them. A std mutex, not loom's: it is never held across a loom
/// operation, and it must add no interleavings of its own.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<Mutex<Vec<Transition>>>);

impl OnTransition for Log {
    fn on_transition(&self, t: &Transition) {
        self.0.lock().unwrap().push(*t);
    }
}

impl Log {
    fn pairs(&self) -> Vec<(State, State)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|t| (t.from, t.to))
            .collect()
    }

    /// The transitions made, in any order: transitions made at once by
    /// two threads may reach the listener in either order (as
    /// `OnTransition` documents).
    fn assert_made(&self, expected: &[(State, State)]) {
        let key = |p: &(State, State)| (p.0.as_str(), p.1.as_str());
        let mut made = self.pairs();
        made.sort_by_key(key);
        let mut expected = expected.to_vec();
        expected.sort_by_key(key);
        assert_eq!(made, expected, "in the order heard: {:?}", self.pairs());
    }

    fn count(&self, from: State, to: State) -> usize {
        self.pairs().iter().filter(|&&p| p == (from, to)).count()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// When the one transition from `from` to `to` happened.
    fn at(&self, from: State, to: State) -> Instant {
        let log = self.0.lock().unwrap();
        let mut made = log.iter().filter(|t| (t.from, t.to) == (from, to));
        let t = made.next().expect("the transition was made");
        assert!(made.next().is_none(), "made once");
        t.at
    }
}

type Breaker<const N: usize> = CircuitBreaker<ManualClock, N, Log>;
type Permit<'a, const N: usize> = CallPermit<'a, ManualClock, N, Log>;

/// A breaker, its transition log, and the model's count of the half-open
/// probes held.
struct Shared<const N: usize> {
    b: Breaker<N>,
    log: Log,
    probes: AtomicUsize,
}

fn shared<const N: usize>(config: BreakerConfig) -> Arc<Shared<N>> {
    let log = Log::default();
    Arc::new(Shared {
        b: CircuitBreaker::with_listener("loom", config, ManualClock::new(), log.clone()),
        log,
        probes: AtomicUsize::new(0),
    })
}

/// Runs `f` on a new loom thread with its own handle on `s`.
fn spawn<const N: usize, T: 'static>(
    s: &Arc<Shared<N>>,
    f: impl FnOnce(&Shared<N>) -> T + 'static,
) -> thread::JoinHandle<T> {
    let s = s.clone();
    thread::spawn(move || f(&s))
}

/// A thread that takes a permit and then records `then` on it, while the
/// caller goes on once the permit is taken: the outcome of a permit of
/// the generation before whatever the caller does next. (The permit is
/// taken on the recording thread because it borrows the breaker through
/// that thread's handle.)
fn spawn_taken_then<const N: usize>(
    s: &Arc<Shared<N>>,
    then: impl FnOnce(Permit<'_, N>) + 'static,
) -> thread::JoinHandle<()> {
    let taken = Arc::new(Notify::new());
    let t = spawn(s, {
        let taken = taken.clone();
        move |s| {
            let p = s.b.try_acquire().expect("closed");
            taken.notify();
            then(p);
        }
    });
    taken.wait();
    t
}

/// A window of `window` outcomes, rates from `minimum` outcomes on, a
/// failure-rate threshold of `threshold` percent, a one-second open
/// wait, `probes` half-open probes.
fn config(window: usize, minimum: usize, threshold: f32, probes: usize) -> BreakerConfig {
    BreakerConfig::builder()
        .window_size(window)
        .minimum_calls(minimum)
        .failure_rate_threshold(threshold)
        .open_duration(OPEN_WAIT)
        .half_open_calls(probes)
        .build()
        .unwrap()
}

impl<const N: usize> Shared<N> {
    /// The generation, as the breaker's `Debug` shows it.
    fn generation(&self) -> usize {
        let dbg = format!("{:?}", self.b);
        let at = dbg
            .find("generation: ")
            .expect("Debug shows the generation")
            + 12;
        let digits: String = dbg[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap()
    }

    /// Every transition was logged once and moved the generation by one.
    fn assert_generations_match_log(&self) {
        assert_eq!(self.generation(), self.log.len(), "{:?}", self.log.pairs());
    }

    /// Single-threaded setup: trips the breaker with one failure (the
    /// config must trip on one failure of one call), then lets the open
    /// wait run out.
    fn open_and_wait(&self) {
        self.b.try_acquire().unwrap().failure();
        assert_eq!(self.b.state(), State::Open);
        self.b.clock().advance(OPEN_WAIT);
        assert_eq!(self.b.state(), State::HalfOpen);
    }

    /// Asks for a permit; a probe is counted as held and checked against
    /// `cap`.
    fn attempt(&self, cap: usize) -> Result<Permit<'_, N>, Rejection> {
        let p = self.b.try_acquire()?;
        if p.is_probe() {
            let held = self.probes.fetch_add(1, SeqCst) + 1;
            assert!(held <= cap, "{held} probes held, cap {cap}");
        }
        Ok(p)
    }

    /// Stops counting `p` as held, before the caller gives it back or
    /// records its outcome.
    fn leave<'a>(&self, p: Permit<'a, N>) -> Permit<'a, N> {
        if p.is_probe() {
            self.probes.fetch_sub(1, SeqCst);
        }
        p
    }

    /// The first probe after a trip made by this thread or another: while
    /// the breaker says Open (its wait not over, or the tripping thread's
    /// stamp not published yet), moves the clock on by the hint and lets
    /// the other threads run.
    fn probe_after_wait(&self) -> Permit<'_, N> {
        loop {
            match self.b.try_acquire() {
                Ok(p) => {
                    assert!(p.is_probe(), "the first call after the wait is a probe");
                    return p;
                }
                Err(Rejection::Open { retry_after }) => {
                    self.b.clock().advance(retry_after);
                    thread::yield_now();
                }
                Err(e) => panic!("{e:?} before the first probe"),
            }
        }
    }
}

/// Two threads each record a failure into a window of 2 (minimum 2):
/// exactly one trip, whichever outcome lands last.
fn two_failures_trip_once(threshold: f32) {
    deep_model(move || {
        let s = shared::<2>(config(2, 2, threshold, 1));
        let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        let b = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        a.join().unwrap();
        b.join().unwrap();

        assert_eq!(
            s.log.pairs(),
            [(State::Closed, State::Open)],
            "2 of 2 failed"
        );
        assert_eq!(s.b.state(), State::Open);
        assert_eq!(s.generation(), 1);
        assert_eq!(s.b.metrics().rejected, 0);
    });
}

/// (B1) Two failures race into a window of 2 at 50 %: one trip.
#[test]
fn breaker_concurrent_failures_trip_once() {
    two_failures_trip_once(50.0);
}

/// (B1b) The same at 100 %: the trip needs both failures counted, so it
/// must be decided by whichever lands last.
#[test]
fn breaker_concurrent_failures_trip_once_at_full_threshold() {
    two_failures_trip_once(100.0);
}

/// (B1c) Two failures and a success race into a window of 3 (minimum 3,
/// 50 %): 2 of 3 trips, exactly once, in every order.
#[test]
fn breaker_failures_and_a_success_trip_once() {
    deep_model(|| {
        let s = shared::<3>(config(3, 3, 50.0, 1));
        let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        let b = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        s.b.try_acquire().expect("closed").success();
        a.join().unwrap();
        b.join().unwrap();

        assert_eq!(
            s.log.pairs(),
            [(State::Closed, State::Open)],
            "2 of 3 failed"
        );
        assert_eq!(s.b.state(), State::Open);
        s.assert_generations_match_log();
    });
}

/// (B1d) The window a trip freezes shows why it opened: two failures race
/// into a window of 2 (minimum 2, 50 %); each is either in the frozen
/// window or counted stale, never both, and what the window holds are
/// failures.
#[test]
fn breaker_trip_freezes_each_outcome_once() {
    deep_model(|| {
        let s = shared::<2>(config(2, 2, 50.0, 1));
        let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        s.b.try_acquire().expect("closed").failure();
        t.join().unwrap();

        let m = s.b.metrics();
        assert_eq!(m.state, State::Open);
        assert_eq!(m.calls + m.stale, 2, "each outcome once: {m:?}");
        assert_eq!(
            m.failed_calls, m.calls,
            "only failures were recorded: {m:?}"
        );
    });
}

/// (B2) Half-open with 2 probes and three threads asking at once; two of
/// them give their first probe back (one ignores it, one drops it) and
/// ask once more, then succeed. Never more than 2 probes are held, the
/// episode begins once, every rejection is counted, and with nothing
/// but successes it never reopens.
#[test]
fn breaker_half_open_admits_at_most_the_cap() {
    const CAP: usize = 2;
    model(|| {
        let s = shared::<2>(config(2, 1, 50.0, CAP));
        s.open_and_wait();

        // Returns how many of its asks were refused.
        let give_back_then_succeed = |ignore: bool| {
            move |s: &Shared<2>| {
                let mut refused = 0;
                match s.attempt(CAP) {
                    Ok(p) if ignore => s.leave(p).ignore(),
                    Ok(p) => drop(s.leave(p)),
                    Err(_) => refused += 1,
                }
                match s.attempt(CAP) {
                    Ok(p) => s.leave(p).success(),
                    Err(_) => refused += 1,
                }
                refused
            }
        };
        let a = spawn(&s, give_back_then_succeed(true));
        let b = spawn(&s, give_back_then_succeed(false));
        let mut refused = match s.attempt(CAP) {
            Ok(p) => {
                s.leave(p).success();
                0
            }
            Err(_) => 1,
        };
        refused += a.join().unwrap() + b.join().unwrap();

        assert_eq!(s.probes.load(SeqCst), 0);
        assert_eq!(
            s.log.count(State::Open, State::HalfOpen),
            1,
            "{:?}",
            s.log.pairs()
        );
        assert_eq!(
            s.log.count(State::HalfOpen, State::Open),
            0,
            "{:?}",
            s.log.pairs()
        );
        let m = s.b.metrics();
        assert_eq!(m.rejected, refused);
        assert!(matches!(m.state, State::HalfOpen | State::Closed), "{m:?}");
        s.assert_generations_match_log();
    });
}

/// (B3a) A permit of generation 0 records a failure while another thread
/// resets the breaker and then records a success in the new window: the
/// old failure is wiped with the old window or counted stale, and never
/// lands in the new one.
#[test]
fn breaker_stale_outcome_never_lands_after_reset() {
    deep_model(|| {
        let s = shared::<2>(config(2, 2, 50.0, 1));
        let t = spawn_taken_then(&s, |p| p.failure());
        s.b.reset();
        s.b.try_acquire().expect("closed").success();
        t.join().unwrap();

        // A reset of a closed breaker changes no state: nothing told.
        s.log.assert_made(&[]);
        let m = s.b.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(m.calls, 1, "the new window holds the success: {m:?}");
        assert_eq!(m.failed_calls, 0, "the old failure is not in it: {m:?}");
        assert!(m.stale <= 1, "{m:?}");
    });
}

/// (B3b) A permit of generation 0 records a failure while another thread
/// forces the breaker open (which freezes the window for metrics): the
/// failure is either in the frozen window or stale, never both.
#[test]
fn breaker_stale_outcome_is_counted_once_against_force_open() {
    deep_model(|| {
        let s = shared::<2>(config(2, 2, 50.0, 1));
        let t = spawn_taken_then(&s, |p| p.failure());
        assert!(s.b.force_open());
        t.join().unwrap();

        s.log.assert_made(&[(State::Closed, State::ForcedOpen)]);
        let m = s.b.metrics();
        assert_eq!(m.state, State::ForcedOpen);
        assert_eq!(m.calls + m.stale, 1, "counted once: {m:?}");
        assert_eq!(
            m.failed_calls, m.calls,
            "the one outcome was a failure: {m:?}"
        );
    });
}

/// (B3c) A permit taken before a trip records a success while the trip
/// happens (by its own outcome or the other thread's failure) and the
/// breaker goes on through half-open to closed: the old outcome never
/// lands in the half-open or the new closed window.
#[test]
fn breaker_outcome_racing_a_trip_never_lands_in_the_next_window() {
    deep_model(|| {
        let s = shared::<2>(config(2, 1, 50.0, 1));
        let t = spawn_taken_then(&s, |p| p.success());
        // 1 of 1 or 1 of 2 failed: this trips, unless the old success
        // saw this failure and tripped first.
        s.b.try_acquire().expect("closed").failure();
        s.probe_after_wait().success();
        t.join().unwrap();

        s.log.assert_made(&[
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ]);
        let m = s.b.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(m.calls, 0, "the new window is empty: {m:?}");
        assert!(m.stale <= 1, "{m:?}");
    });
}

/// (B4) Three outcomes race into a window of 3 that they do not trip
/// (minimum 3, thresholds 100 %): a failure, a success and a slow
/// success (its permit taken before the clock moved past the slow-call
/// duration). All three are counted, each as what it was.
#[test]
fn breaker_no_recorded_outcome_is_lost() {
    deep_model(|| {
        let config = BreakerConfig::builder()
            .window_size(3)
            .minimum_calls(3)
            .failure_rate_threshold(100.0)
            .slow_call_rate_threshold(100.0)
            .slow_call_duration(Duration::from_millis(1))
            .build()
            .unwrap();
        let s = shared::<3>(config);
        let slow = s.b.try_acquire().unwrap();
        s.b.clock().advance(Duration::from_millis(2));
        let a = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        let b = spawn(&s, |s| s.b.try_acquire().expect("closed").success());
        slow.success();
        a.join().unwrap();
        b.join().unwrap();

        let m = s.b.metrics();
        assert_eq!(m.state, State::Closed, "{m:?}");
        assert_eq!((m.calls, m.failed_calls, m.slow_calls), (3, 1, 1), "{m:?}");
        assert_eq!(m.stale, 0, "{m:?}");
        assert_eq!(s.log.len(), 0);
    });
}

/// (B4b) A full window of plain successes takes one more without a write
/// (the fast path); a failure racing it still lands, and trips once
/// (window 2, minimum 2, 50 %: the failure with either success is 1 of
/// 2). The frozen window holds the failure.
#[test]
fn breaker_success_fast_path_against_a_failure() {
    deep_model(|| {
        let s = shared::<2>(config(2, 2, 50.0, 1));
        for _ in 0..2 {
            s.b.try_acquire().unwrap().success();
        }
        // Refused only if the failure has already tripped it.
        let t = spawn(&s, |s| {
            if let Ok(p) = s.b.try_acquire() {
                p.success();
            }
        });
        s.b.try_acquire().expect("closed").failure();
        t.join().unwrap();

        s.log.assert_made(&[(State::Closed, State::Open)]);
        let m = s.b.metrics();
        assert_eq!(m.state, State::Open);
        assert_eq!((m.calls, m.failed_calls), (2, 1), "{m:?}");
        assert!(m.stale <= 1, "{m:?}");
    });
}

/// (B5) A window of 1 and two writers lapping each other on its one slot
/// (minimum 1, 50 %): the window ends up holding exactly one of the two
/// outcomes (never a count out of range), and a closed breaker holds the
/// success (a window of 1 holding a failure has tripped).
///
/// Not asserted: that an open breaker's frozen window holds the failure
/// that tripped it. With more outcomes in flight than the window holds,
/// the success may overwrite the failure between the failure's count and
/// the freeze (the window's documented lapping rule: the slot holds one
/// of the two).
#[test]
fn breaker_lapping_writers_leave_one_outcome() {
    deep_model(|| {
        let s = shared::<1>(config(1, 1, 50.0, 1));
        let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        // Refused only if the failure has already tripped it.
        if let Ok(p) = s.b.try_acquire() {
            p.success();
        }
        t.join().unwrap();

        let m = s.b.metrics();
        assert_eq!(m.calls, 1, "{m:?}");
        assert!(m.failed_calls <= 1, "{m:?}");
        assert!(m.stale <= 1, "{m:?}");
        assert!(s.log.len() <= 1, "{:?}", s.log.pairs());
        if m.state == State::Closed {
            assert_eq!(
                m.failed_calls, 0,
                "a window of 1 holding a failure trips: {m:?}"
            );
        } else {
            s.log.assert_made(&[(State::Closed, State::Open)]);
        }
    });
}

/// (B6) The open wait is over and two threads ask at once, with 1 probe:
/// exactly one episode begins, the other caller is refused with
/// `ProbesBusy` (or, if the probe has already closed the breaker, gets a
/// plain permit), and the probe's success closes the breaker once.
#[test]
fn breaker_open_to_half_open_race() {
    deep_model(|| {
        let s = shared::<2>(config(2, 1, 50.0, 1));
        s.open_and_wait();

        let ask = |s: &Shared<2>| match s.attempt(1) {
            Ok(p) => {
                s.leave(p).success();
                1
            }
            Err(e) => {
                assert_eq!(e, Rejection::ProbesBusy, "the open wait is over");
                0
            }
        };
        let t = spawn(&s, ask);
        let admitted = ask(&s) + t.join().unwrap();

        assert!(admitted >= 1, "the first call after the wait is a probe");
        s.log.assert_made(&[
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ]);
        assert_eq!(s.b.metrics().rejected, 2 - admitted);
        s.assert_generations_match_log();
    });
}

/// (B6b) The open wait is over and two threads ask at once, with 2
/// probes: both are admitted as probes (one begins the episode, the other
/// takes the second slot), and their successes close the breaker once.
#[test]
fn breaker_both_callers_admitted_when_two_probes_are_free() {
    const CAP: usize = 2;
    deep_model(|| {
        let s = shared::<2>(config(2, 1, 50.0, CAP));
        s.open_and_wait();

        let ask = |s: &Shared<2>| {
            let p = s.attempt(CAP).expect("a probe slot is free");
            assert!(p.is_probe(), "the breaker closes only after both");
            s.leave(p).success();
        };
        let t = spawn(&s, ask);
        ask(&s);
        t.join().unwrap();

        s.log.assert_made(&[
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
        ]);
        assert_eq!(s.b.metrics().rejected, 0);
        s.assert_generations_match_log();
    });
}

/// (B6c) `state()` read while another thread begins the half-open
/// episode and closes it: the open wait is over throughout, so it never
/// says Open (it consults the clock: HalfOpen, or Closed once the probe
/// is back).
#[test]
fn breaker_state_is_never_open_after_the_wait() {
    deep_model(|| {
        let s = shared::<2>(config(2, 1, 50.0, 1));
        s.open_and_wait();

        let t = spawn(&s, |s| s.b.state());
        s.attempt(1).expect("the first probe").success();
        let seen = t.join().unwrap();

        assert!(
            matches!(seen, State::HalfOpen | State::Closed),
            "the open wait was over, yet state() said {seen:?}"
        );
        assert_eq!(s.b.state(), State::Closed);
    });
}

/// (B7) Two probes out (2 per episode): one fails while the other
/// succeeds. The failure reopens, exactly once; the success never
/// closes (the episode needs two).
#[test]
fn breaker_probe_failure_and_success_race() {
    const CAP: usize = 2;
    deep_model(|| {
        let s = shared::<2>(config(2, 1, 50.0, CAP));
        s.open_and_wait();
        let first = s.attempt(CAP).expect("the first probe");
        let t = spawn(&s, |s| {
            let p = s.attempt(CAP).expect("the second probe: one slot is free");
            assert!(p.is_probe());
            s.leave(p).failure();
        });
        s.leave(first).success();
        t.join().unwrap();

        s.log.assert_made(&[
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Open),
        ]);
        let m = s.b.metrics();
        assert_eq!(m.state, State::Open);
        assert!(m.stale <= 1, "{m:?}");
        s.assert_generations_match_log();
    });
}

/// (B8) A half-open episode whose probe is out past `max_half_open_wait`:
/// a new caller and the late probe's success race to reopen it. It
/// reopens once, as of the moment the episode ran out; the caller is
/// refused as Open with the whole open wait ahead; the probe's outcome is
/// stale.
#[test]
fn breaker_half_open_expiry_race() {
    deep_model(|| {
        let config = BreakerConfig::builder()
            .window_size(2)
            .minimum_calls(1)
            .open_duration(OPEN_WAIT)
            .half_open_calls(1)
            .max_half_open_wait(Duration::from_secs(1))
            .build()
            .unwrap();
        let s = shared::<2>(config);
        s.open_and_wait();
        let late = s.b.try_acquire().expect("the probe");
        let began = s.b.clock().now();
        s.b.clock().advance(Duration::from_secs(1));

        let t = spawn(&s, |s| {
            assert_eq!(
                s.b.try_acquire().unwrap_err(),
                Rejection::Open {
                    retry_after: OPEN_WAIT
                },
                "the episode ran out just now"
            );
        });
        late.success();
        t.join().unwrap();

        s.log.assert_made(&[
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Open),
        ]);
        assert_eq!(
            s.log.at(State::HalfOpen, State::Open),
            began + Duration::from_secs(1),
            "it reopened as of the moment the episode ran out"
        );
        let m = s.b.metrics();
        assert_eq!(m.state, State::Open);
        assert_eq!((m.stale, m.rejected), (1, 1), "{m:?}");
        s.assert_generations_match_log();
    });
}

// ---- consecutive failures: the run in the window word ----------------

fn consecutive(n: usize) -> BreakerConfig {
    BreakerConfig::builder()
        .consecutive_failures(n)
        .open_duration(OPEN_WAIT)
        .build()
        .unwrap()
}

/// Two failures recorded at once make a run of two: the breaker opens
/// exactly once, and the listener hears the run it tripped on.
#[test]
fn consecutive_two_failures_at_once_trip_once() {
    deep_model(|| {
        let s = shared::<1>(consecutive(2));
        let t = spawn(&s, |s| s.b.try_acquire().expect("closed").failure());
        s.b.try_acquire().expect("closed").failure();
        t.join().unwrap();
        s.log.assert_made(&[(State::Closed, State::Open)]);
        let tripped = s.log.0.lock().unwrap()[0]
            .tripped
            .expect("the window tripped");
        assert_eq!((tripped.calls, tripped.failures), (2, 2));
        assert_eq!(s.b.metrics().failed_calls, 2);
    });
}

/// A failure and a success at once, after one failure: the run ends
/// at 0 (the success last) or 2, and trips exactly when it reaches 2.
#[test]
fn consecutive_success_races_a_failure() {
    deep_model(|| {
        let s = shared::<1>(consecutive(2));
        s.b.try_acquire().expect("closed").failure();
        let t = spawn(&s, |s| s.b.try_acquire().map(|p| p.success()).is_ok());
        let failed = s.b.try_acquire().map(|p| p.failure()).is_ok();
        let succeeded = t.join().unwrap();
        let opened = s.log.count(State::Closed, State::Open);
        let run = s.b.metrics().failed_calls;
        match opened {
            // The failure came right after the first: a run of 2
            // tripped. (The success may still land in the run before the
            // trip freezes the window, which then shows 0: it was taken
            // and recorded in the closed generation.)
            1 => {
                assert!(failed);
                let t = s.log.0.lock().unwrap()[0].tripped.expect("tripped");
                assert_eq!(t.failures, 2);
            }
            0 => {
                assert!(succeeded, "only a success stops a run of two");
                assert!(run <= 1, "run {run}");
            }
            n => panic!("opened {n} times"),
        }
        s.assert_generations_match_log();
    });
}

/// A failure recorded while the breaker is reset: it lands in the old
/// run (which the reset empties) or is stale; never in the new run.
#[test]
fn consecutive_failure_races_a_reset() {
    deep_model(|| {
        let s = shared::<1>(consecutive(3));
        s.b.try_acquire().expect("closed").failure();
        let t = spawn_taken_then(&s, |p| p.failure());
        s.b.reset();
        t.join().unwrap();
        let m = s.b.metrics();
        assert_eq!(m.failed_calls, 0, "{m:?}");
        assert!(m.stale <= 1, "{m:?}");
        assert_eq!(s.log.len(), 0);
    });
}

// ---- the time window: bucket rollover racing a record ----------------

type TimeShared = Arc<(watertight::breaker::TimeBreaker<ManualClock, 3, Log>, Log)>;

fn time_breaker(buckets: usize, minimum: usize) -> TimeShared {
    let log = Log::default();
    let config = BreakerConfig::builder()
        .time_window(Duration::from_secs(buckets as u64), buckets)
        .minimum_calls(minimum)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN_WAIT)
        .build()
        .unwrap();
    let b =
        CircuitBreaker::try_with_listener("loom", config, ManualClock::new(), log.clone()).unwrap();
    Arc::new((b, log))
}

/// Two calls of a new second race, and the first of them rolls the
/// bucket of three seconds earlier over (its failure leaves the window)
/// while the other records into it: whichever clears it, the old
/// failure never counts again and neither new outcome is lost.
#[test]
fn time_bucket_rollover_races_a_record() {
    model(|| {
        let s = time_breaker(3, 3);
        let b = &s.0;
        b.try_acquire().unwrap().failure(); // second 0
        b.clock().advance(Duration::from_secs(1));
        b.try_acquire().unwrap().success(); // second 1
        b.clock().advance(Duration::from_secs(2)); // second 3: bucket 0 again
        let t = {
            let s = s.clone();
            thread::spawn(move || s.0.try_acquire().unwrap().failure())
        };
        b.try_acquire().unwrap().success();
        t.join().unwrap();
        let m = b.metrics();
        // Seconds 1..=3: one success, then the two new outcomes.
        assert_eq!((m.calls, m.failed_calls), (3, 1), "{m:?}");
        assert_eq!(s.1.len(), 0, "1 of 3 is under 50 %: never tripped");
    });
}

/// The closed path's one-CAS success (its bucket already holds the
/// minimum of one call, so `takes_time_success` counts it inline)
/// races a reset and the new window's first call, which bumps the era
/// and sweeps every counter: a success of the old generation lands in
/// the old window or nowhere, never in the new one.
#[test]
fn time_inline_success_races_an_install() {
    model(|| {
        let s = time_breaker(3, 1);
        let b = &s.0;
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success(); // second 0: past the minimum
        let resetting = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let t = {
            let (s, resetting) = (s.clone(), resetting.clone());
            thread::spawn(move || {
                let p = s.0.try_acquire().unwrap();
                // Not yet resetting after the acquire: the permit is the
                // old generation's.
                let old = !resetting.load(SeqCst);
                p.success();
                old
            })
        };
        resetting.store(true, SeqCst);
        b.reset();
        b.try_acquire().unwrap().success();
        let old = t.join().unwrap();
        let m = b.metrics();
        if old {
            assert_eq!(m.calls, 1, "the old generation's success leaked in: {m:?}");
        } else {
            assert!((1..=2).contains(&m.calls), "{m:?}");
        }
        assert_eq!(m.failed_calls, 0, "{m:?}");
    });
}

/// The inline success races a rollover of its own bucket: it reads
/// second 0 (its bucket past the minimum) while the other thread moves
/// the clock to second 3 (bucket 0 again) and records there, clearing
/// the bucket. Second 0's calls never count again: the inline success
/// lands before the clear (and is cleared with them), or its CAS fails
/// and the slow path finds the epoch gone; at second 3 it counts.
#[test]
fn time_inline_success_races_a_rollover() {
    model(|| {
        let s = time_breaker(3, 1);
        let b = &s.0;
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success(); // second 0: past the minimum
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                // Second 3 already: so is the time its success reads.
                let late = s.0.clock().now() >= Instant::from_nanos(3_000_000_000);
                s.0.try_acquire().unwrap().success();
                late
            })
        };
        b.clock().advance(Duration::from_secs(3));
        b.try_acquire().unwrap().success();
        let late = t.join().unwrap();
        let m = b.metrics();
        // Seconds 1..=3: this thread's success, and the other's if it
        // read second 3; never second 0's two (or three).
        if late {
            assert_eq!(m.calls, 2, "a success of second 3 was lost: {m:?}");
        } else {
            assert!((1..=2).contains(&m.calls), "{m:?}");
        }
        assert_eq!(m.failed_calls, 0, "{m:?}");
    });
}

/// After a whole window idle, two failures of the same second race:
/// the first sweeps every counter into a new era while the other
/// records; they trip the breaker once, on the two of them.
#[test]
fn time_idle_sweep_races_a_record() {
    model(|| {
        let s = time_breaker(3, 2);
        let b = &s.0;
        b.try_acquire().unwrap().failure();
        b.clock().advance(Duration::from_secs(10));
        let t = {
            let s = s.clone();
            thread::spawn(move || s.0.try_acquire().unwrap().failure())
        };
        b.try_acquire().unwrap().failure();
        t.join().unwrap();
        s.1.assert_made(&[(State::Closed, State::Open)]);
        // The trip may see the other failure's call before its failure
        // (it counts as a success for that instant: 1 of 2 is 50 %).
        let tripped = s.1 .0.lock().unwrap()[0]
            .tripped
            .expect("the window tripped");
        assert_eq!(tripped.calls, 2, "{tripped:?}");
        assert!(tripped.failures >= 1, "{tripped:?}");
        // The frozen window shows both, and the old failure in neither.
        let m = b.metrics();
        assert_eq!((m.calls, m.failed_calls, m.stale), (2, 2, 0), "{m:?}");
    });
}
