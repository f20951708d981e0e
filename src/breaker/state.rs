//! The state a breaker reports, its numbers, and the transitions its
//! listener is told about. The state as stored, with its generation and probe counts, is the
//! state word (`word.rs`); the machine that moves it is `machine.rs`.

use core::fmt;

use super::config::BreakerWindow;
use super::word::{CLOSED, FORCED_OPEN, HALF_OPEN, OPEN};
use crate::clock::Instant;

/// The state of a breaker.
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::breaker::State;
/// use watertight::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let payments: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("payments", BreakerConfig::DEFAULT, &clock);
/// assert_eq!(payments.state(), State::Closed);
/// payments.disable(); // an operator's switch: admit everything
/// assert_eq!(payments.state(), State::Disabled);
/// payments.force_open(); // the other switch: refuse everything
/// assert_eq!(payments.state(), State::ForcedOpen);
/// assert!(payments.try_acquire().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls pass and their outcomes fill the window.
    Closed,
    /// Calls are refused until the open wait ends.
    Open,
    /// A limited number of probes pass; their outcomes decide.
    HalfOpen,
    /// Calls are refused until [`reset`](super::CircuitBreaker::reset) (an operator's
    /// switch).
    ForcedOpen,
    /// Calls pass and nothing is recorded until
    /// [`reset`](super::CircuitBreaker::reset).
    Disabled,
}

impl State {
    /// The state of a state word's state bits.
    pub(super) const fn from_bits(bits: u32) -> State {
        match bits {
            CLOSED => State::Closed,
            OPEN => State::Open,
            HALF_OPEN => State::HalfOpen,
            FORCED_OPEN => State::ForcedOpen,
            _ => State::Disabled,
        }
    }

    /// The state's name in lowercase snake case (`"half_open"`), for logs and
    /// metric labels.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::breaker::State;
    ///
    /// assert_eq!(State::HalfOpen.as_str(), "half_open");
    /// assert_eq!(State::ForcedOpen.as_str(), "forced_open");
    /// // `Display` writes the same name.
    /// assert_eq!(State::Open.to_string(), State::Open.as_str());
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change, as a [`OnTransition`] listener sees it.
///
/// # Examples
///
/// ```
/// use core::cell::RefCell;
/// use core::time::Duration;
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::breaker::{State, Transition};
/// use watertight::clock::{Instant, ManualClock};
///
/// let clock = ManualClock::new();
/// let log = RefCell::new(Vec::new());
/// let config = BreakerConfig::builder().window_size(4).minimum_calls(2).build().unwrap();
/// let record = |t: &Transition| log.borrow_mut().push(*t);
/// let payments = CircuitBreaker::<_, 4, _>::with_listener("payments", config, &clock, record);
/// clock.advance(Duration::from_secs(10));
/// payments.try_acquire().unwrap().failure();
/// payments.try_acquire().unwrap().failure();
/// let t = log.borrow()[0];
/// assert_eq!((t.name, t.from, t.to), ("payments", State::Closed, State::Open));
/// assert_eq!(t.at, Instant::from_nanos(10_000_000_000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The breaker's name.
    pub name: &'static str,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// When it happened, by the breaker's clock, to the microsecond
    /// (millisecond on targets without 64-bit atomics), rounded down: the
    /// time the breaker keeps and measures its waits from. For a half-open
    /// episode that ran out of time (`max_half_open_wait`), the moment it
    /// ran out.
    pub at: Instant,
    /// For a Closed → Open transition the window made: which window it was
    /// and the numbers it tripped on. `None` for every other transition (a
    /// probe that failed, an operator's switch, the end of a wait).
    pub tripped: Option<Tripped>,
}

/// What the window said when it opened a closed breaker: the
/// [`Transition::tripped`] a listener gets.
///
/// For the count and time windows, the window's calls, failures and slow
/// calls at the outcome that tripped it; for consecutive failures, the run
/// (`calls` and `failures` both the failures in a row, `slow` 0).
///
/// # Examples
///
/// ```
/// use core::cell::Cell;
/// use watertight::breaker::{BreakerWindow, Transition};
/// use watertight::clock::ManualClock;
/// use watertight::{BreakerConfig, CircuitBreaker};
///
/// let clock = ManualClock::new();
/// let seen = Cell::new(None);
/// let config = BreakerConfig::builder().consecutive_failures(3).build().unwrap();
/// let b = CircuitBreaker::<_, 1, _>::with_listener("db", config, &clock, |t: &Transition| {
///     seen.set(t.tripped)
/// });
/// for _ in 0..3 {
///     b.try_acquire().unwrap().failure();
/// }
/// let t = seen.get().unwrap();
/// assert_eq!(t.window, BreakerWindow::Consecutive { failures: 3 });
/// assert_eq!((t.calls, t.failures, t.slow), (3, 3, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tripped {
    /// The window, as configured.
    pub window: BreakerWindow,
    /// Outcomes in the window (consecutive failures: the run).
    pub calls: usize,
    /// Of those, failures.
    pub failures: usize,
    /// Of those, slow calls.
    pub slow: usize,
}

/// Told about every state change of a breaker: for logs and metrics.
///
/// Only changes of state are told: `from` and `to` always differ. A
/// [`reset`](super::CircuitBreaker::reset) of a closed breaker empties its window
/// but changes no state, so it tells nothing. A transition the clock makes
/// lazily (the end of the open wait) is told when a call makes it: the first
/// half-open probe, with `at` the moment of that probe; until then
/// [`state`](super::CircuitBreaker::state) and [`metrics`](super::CircuitBreaker::metrics)
/// already report it.
///
/// `()` is the listener of a breaker made with [`CircuitBreaker::new`](super::CircuitBreaker::new): it
/// does nothing and costs nothing. Any `Fn(&Transition)` is a listener.
///
/// The listener runs on the thread that made the transition, right after it;
/// it must not block. Two transitions made at once by two threads may reach
/// the listener in either order; `at` and the sequence of `from`/`to` tell
/// them apart.
///
/// # Examples
///
/// A listener type of its own, counting how often the breaker opened:
///
/// ```
/// use core::sync::atomic::{AtomicUsize, Ordering};
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::breaker::{OnTransition, State, Transition};
/// use watertight::clock::ManualClock;
///
/// struct OpenCounter<'a>(&'a AtomicUsize);
///
/// impl OnTransition for OpenCounter<'_> {
///     fn on_transition(&self, t: &Transition) {
///         if t.to == State::Open {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let (clock, opened) = (ManualClock::new(), AtomicUsize::new(0));
/// let config = BreakerConfig::builder().window_size(2).minimum_calls(2).build().unwrap();
/// let db: CircuitBreaker<_, 2, _> =
///     CircuitBreaker::with_listener("db", config, &clock, OpenCounter(&opened));
/// db.try_acquire().unwrap().failure();
/// db.try_acquire().unwrap().failure();
/// db.reset(); // Open -> Closed is not counted
/// assert_eq!(opened.load(Ordering::Relaxed), 1);
/// ```
pub trait OnTransition {
    /// Called once per transition.
    ///
    /// # Examples
    ///
    /// Any `Fn(&Transition)` is a listener, and can be called directly:
    ///
    /// ```
    /// use std::cell::Cell;
    /// use watertight::breaker::{OnTransition, State, Transition};
    /// use watertight::clock::Instant;
    ///
    /// let reopened = Cell::new(0);
    /// let listener = |t: &Transition| {
    ///     if t.from == State::HalfOpen && t.to == State::Open {
    ///         reopened.set(reopened.get() + 1);
    ///     }
    /// };
    /// let t = Transition {
    ///     name: "payments",
    ///     from: State::HalfOpen,
    ///     to: State::Open,
    ///     at: Instant::ZERO,
    ///     tripped: None,
    /// };
    /// listener.on_transition(&t);
    /// assert_eq!(reopened.get(), 1);
    /// ```
    fn on_transition(&self, transition: &Transition);
}

impl OnTransition for () {
    #[inline(always)]
    fn on_transition(&self, _: &Transition) {}
}

impl<F: Fn(&Transition)> OnTransition for F {
    #[inline]
    fn on_transition(&self, transition: &Transition) {
        self(transition)
    }
}

/// A snapshot of a breaker's numbers, from [`CircuitBreaker::metrics`](super::CircuitBreaker::metrics).
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::breaker::State;
/// use watertight::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let config = BreakerConfig::builder().window_size(4).minimum_calls(4).build().unwrap();
/// let payments: CircuitBreaker<_, 4> = CircuitBreaker::new("payments", config, &clock);
/// for fail in [false, true, false, true] {
///     let permit = payments.try_acquire().unwrap();
///     if fail { permit.failure() } else { permit.success() }
/// }
/// assert!(payments.try_acquire().is_err());
/// let m = payments.metrics();
/// assert_eq!(m.state, State::Open);
/// assert_eq!((m.calls, m.failed_calls, m.rejected), (4, 2, 1));
/// assert_eq!(m.failure_rate, Some(50.0)); // the frozen window shows why it opened
/// assert!(m.last_transition.is_some());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BreakerMetrics {
    /// The state, as [`CircuitBreaker::state`](super::CircuitBreaker::state) reports it.
    pub state: State,
    /// Failures in the window, in percent; `None` until the window holds
    /// `minimum_calls` outcomes.
    pub failure_rate: Option<f32>,
    /// Slow calls in the window, in percent; `None` until the window holds
    /// `minimum_calls` outcomes.
    pub slow_call_rate: Option<f32>,
    /// Outcomes in the window. With consecutive failures: the failures in a
    /// row so far (the rates are then `None`).
    pub calls: usize,
    /// Failures in the window (slow or not). With consecutive failures: the
    /// failures in a row so far.
    pub failed_calls: usize,
    /// Slow calls in the window (successes or failures).
    pub slow_calls: usize,
    /// Calls refused over the breaker's life (wraps at `usize::MAX`).
    pub rejected: usize,
    /// Outcomes that arrived after the breaker had moved on to another
    /// generation, over the breaker's life.
    pub stale: usize,
    /// When the last transition happened, by the breaker's clock; `None`
    /// before the first.
    pub last_transition: Option<Instant>,
}
