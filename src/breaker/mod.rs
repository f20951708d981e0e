//! A lock-free circuit breaker with a count window in a ring of atomics.
//!
//! See [`CircuitBreaker`] for the type, [`BreakerConfig`] for its settings and
//! their defaults (a 50-call count window, 50 % failure rate, 30 s open, 3
//! probes), and the decisions on edge semantics it documents, where circuit
//! breakers such as resilience4j's and gobreaker differ.
//!
//! # Which clock
//!
//! A breaker reads its clock for its open wait (rarely) and, with slow-call
//! detection on ([`BreakerConfigBuilder::slow_call_duration`]), twice per
//! call. Pick the clock by the slow-call threshold:
//!
//! | threshold | clock | a read |
//! |---|---|---|
//! | seconds, or many milliseconds (read timeout ÷ 2, the usual) | [`CoarseClock`](crate::clock::CoarseClock) (feature `std`): exact to about its resolution (1 ms by default) | one relaxed load |
//! | below a millisecond, or a few resolutions | [`StdClock`](crate::clock::StdClock): exact to the nanosecond | `std::time::Instant::now()` |
//! | none (slow-call detection off) | any: a closed-state call reads no clock | – |
//! | in tests | [`ManualClock`](crate::clock::ManualClock), moved by hand | a load |
//!
//! On a runtime, the runtime's clock (`TokioClock`, `AsyncIoClock`,
//! `EmbassyClock`) serves too, at its read's cost. The breaker inlines the
//! reads of a clock whose read is a load ([`Clock::CHEAP_NOW`]: the coarse
//! and the manual clock), so timing on the coarse clock costs two loads and
//! a comparison (a closed call 1.24× the untimed call's instructions), and
//! calls the others' reads out of line. A
//! [`Policy`](crate::Policy) waits (for a slot, for its deadlines) on a
//! [`Timer`](crate::clock::Timer), which a coarse clock is not: give its
//! breaker the coarse clock with
//! [`Policy::with_breaker_clock`](crate::Policy::with_breaker_clock); the
//! tower [`BreakerLayer`](crate::tower::BreakerLayer) takes a breaker on any
//! clock, and [`PolicyLayer`](crate::tower::PolicyLayer) such a policy.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use core::time::Duration;
//! use watertight::clock::CoarseClock;
//! use watertight::{BreakerConfig, CircuitBreaker};
//!
//! // Calls over 2 s are slow (a 4 s read timeout): the coarse clock.
//! let config = BreakerConfig::builder()
//!     .slow_call_duration(Duration::from_secs(2))
//!     .build()
//!     .unwrap();
//! let payments: CircuitBreaker<CoarseClock, 64> =
//!     CircuitBreaker::new("payments", config, CoarseClock::new());
//! payments.try_acquire().unwrap().success();
//! assert_eq!(payments.metrics().slow_calls, 0);
//! # }
//! ```

mod config;
mod error;
mod window;
mod word;

use core::fmt;
use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::clock::{nanos, Clock, Instant};
use crate::sync::{AtomicU32, AtomicUsize, Ordering::*};

pub use config::{BreakerConfig, BreakerConfigBuilder, BreakerConfigError, BreakerField};
pub use error::{CallError, Rejection};
pub(crate) use sealed::Guard;
pub(crate) use sealed::Raw;
#[cfg(feature = "alloc")]
pub use window::Heap;
use window::{Counts, Kind, Recorded, Window, MAX_WINDOW};
pub use window::{Inline, WindowStorage};
use word::{AtomicStamp, CLOSED, DISABLED, FORCED_OPEN, HALF_OPEN, OPEN};

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
    /// Calls are refused until [`reset`](CircuitBreaker::reset) (an operator's
    /// switch).
    ForcedOpen,
    /// Calls pass and nothing is recorded until
    /// [`reset`](CircuitBreaker::reset).
    Disabled,
}

impl State {
    const fn from_bits(bits: u32) -> State {
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

/// What a call's result means to the breaker: the caller decides.
///
/// An HTTP 404 is an answer ([`Success`](Outcome::Success)); a 503 or a
/// timeout is a [`Failure`](Outcome::Failure); a call cancelled by its own
/// caller, or refused for bad input before it reached the system, says
/// nothing about the system ([`Ignored`](Outcome::Ignored)).
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
/// use watertight::clock::ManualClock;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let search: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("search", BreakerConfig::DEFAULT, &clock);
/// let classify = |r: &Result<u16, &str>| match r {
///     Ok(status) if *status >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success,
///     Err(_bad_query) => Outcome::Ignored, // refused before it reached the system
/// };
/// for result in [Ok(404), Ok(503), Err("empty query")] {
///     let got = search.call_with(async move { result }, classify).await;
///     assert_eq!(got.is_ok(), result.is_ok()); // the result comes back as it was
/// }
/// let m = search.metrics();
/// assert_eq!((m.calls, m.failed_calls), (2, 1)); // the ignored call is not in the window
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The system answered.
    Success,
    /// The system failed.
    Failure,
    /// Not recorded; a half-open probe gives its slot back.
    Ignored,
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
}

/// Told about every state change of a breaker: for logs and metrics.
///
/// Only changes of state are told: `from` and `to` always differ. A
/// [`reset`](CircuitBreaker::reset) of a closed breaker empties its window
/// but changes no state, so it tells nothing. A transition the clock makes
/// lazily (the end of the open wait) is told when a call makes it: the first
/// half-open probe, with `at` the moment of that probe; until then
/// [`state`](CircuitBreaker::state) and [`metrics`](CircuitBreaker::metrics)
/// already report it.
///
/// `()` is the listener of a breaker made with [`CircuitBreaker::new`]: it
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

/// A breaker on the process-wide [`StdClock`](crate::clock::StdClock).
///
/// # Examples
///
/// ```
/// use watertight::BreakerConfig;
/// use watertight::breaker::{State, StdBreaker};
/// use watertight::clock::StdClock;
///
/// static INVENTORY: StdBreaker<64> =
///     StdBreaker::new("inventory", BreakerConfig::DEFAULT, StdClock::new());
/// INVENTORY.try_acquire().unwrap().success();
/// assert_eq!(INVENTORY.state(), State::Closed);
/// assert_eq!(INVENTORY.metrics().calls, 1);
/// ```
#[cfg(feature = "std")]
pub type StdBreaker<const N: usize> = CircuitBreaker<crate::clock::StdClock, N>;

/// A breaker whose window is sized from config at run time (feature
/// `alloc`): any `window_size` a [`BreakerConfig`] holds, up to
/// [`BreakerConfig::MAX_WINDOW_SIZE`] (1023), for servers that read the
/// window from their environment.
///
/// Its slots ([`Heap`]) are one boxed slice of exactly `window_size` bytes,
/// allocated once, when the breaker is made
/// ([`try_new`](CircuitBreaker::try_new) or
/// [`try_with_listener`](CircuitBreaker::try_with_listener), which never
/// fail for it: every valid config fits); no call allocates. Everything
/// else is the `CircuitBreaker` of a compile-time `N`: the same lock-free
/// ring, the same code, the same behaviour. Its `N` is the largest window,
/// [`BreakerConfig::MAX_WINDOW_SIZE`].
///
/// # Examples
///
/// ```
/// use watertight::breaker::{HeapBreaker, State};
/// use watertight::clock::ManualClock;
/// use watertight::BreakerConfig;
///
/// // A window of 100 calls, as an operator might set it.
/// let config = BreakerConfig::builder().window_size(100).minimum_calls(100).build().unwrap();
/// let clock = ManualClock::new();
/// let search: HeapBreaker<_> = HeapBreaker::try_new("search", config, &clock).unwrap();
/// for i in 0..100 {
///     let permit = search.try_acquire().unwrap();
///     if i % 2 == 0 { permit.failure() } else { permit.success() }
/// }
/// assert_eq!(search.state(), State::Open); // 50 of 100
/// assert_eq!(search.metrics().calls, 100);
/// ```
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub type HeapBreaker<C, H = ()> = CircuitBreaker<C, { BreakerConfig::MAX_WINDOW_SIZE }, H, Heap>;

/// A circuit breaker: stops calling a system that is clearly failing or
/// slowly dying, and lets it recover.
///
/// `N` is the window's capacity, fixed at compile time so that no heap is
/// needed (a breaker can live in a `static` on a microcontroller); the
/// window size in use is the config's `window_size ≤ N`. `C` is the clock
/// (the same breaker runs on tokio, smol, async-std, embassy, or a
/// [`ManualClock`](crate::clock::ManualClock) in tests); `H` is an optional
/// [`OnTransition`] listener. `W` is where the window's slots live:
/// [`Inline<N>`] (the default) inside the breaker, or, for a window sized
/// from config at run time, [`Heap`] (feature `alloc`), one allocation made
/// with the breaker: see [`HeapBreaker`].
///
/// Two ways to use it: [`call`](Self::call) / [`call_with`](Self::call_with)
/// wrap a future and record its outcome; [`try_acquire`](Self::try_acquire)
/// returns a [`CallPermit`] on which code that cannot be wrapped records the
/// outcome itself.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
/// use watertight::breaker::State;
/// use watertight::clock::ManualClock;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let config = BreakerConfig::builder()
///     .window_size(10)
///     .minimum_calls(4)
///     .open_duration(Duration::from_secs(30))
///     .build()
///     .unwrap();
/// let payments: CircuitBreaker<_, 10> = CircuitBreaker::new("payments", config, &clock);
///
/// // A 503 is a failure; a 404 is an answer.
/// let classify = |r: &Result<u16, ()>| match r {
///     Ok(status) if *status >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success,
///     Err(()) => Outcome::Failure,
/// };
/// for status in [404, 503, 503, 200] {
///     let got = payments.call_with(async move { Ok(status) }, classify).await;
///     assert_eq!(got, Ok(status));
/// }
/// // 2 failures of 4 is 50 %: it opened, and says when to come back.
/// assert_eq!(payments.state(), State::Open);
/// let refused = payments.call(async { Ok::<_, ()>(200) }).await.unwrap_err();
/// assert_eq!(refused.retry_after(), Some(Duration::from_secs(30)));
///
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(payments.state(), State::HalfOpen);
/// # });
/// ```
///
/// # Decisions on edge semantics
///
/// - **When rates are evaluated**: after every recorded outcome, once the
///   window holds at least `minimum_calls` outcomes; so a success can trip
///   the breaker (5 failures then 1 success, with minimum 6 and 50 %).
/// - **Threshold**: `rate >= threshold` trips (3 of 6 at 50 % trips). The
///   failure rate counts slow failures; the slow-call rate counts slow
///   successes and slow failures.
/// - **Slow**: a call is slow when its duration, measured by the breaker's
///   clock from `try_acquire` (or the first poll of `call`) to the outcome,
///   is strictly greater than `slow_call_duration`.
/// - **End of the open wait**: probes may pass once `now >= opened_at +
///   open_duration`, where `opened_at` is the transition's time as the
///   listener and the metrics report it (kept to the microsecond, rounded
///   down; the millisecond on targets without 64-bit atomics); so a retry
///   hint is never longer than `open_duration`. Rejected calls do not
///   extend the wait. [`state`](Self::state)
///   consults the clock, so it never says Open when a call would be let
///   through.
/// - **Half-open**: an episode begins with the first call after the open
///   wait, and admits exactly `half_open_calls` probes in total; more are
///   rejected at once ([`Rejection::ProbesBusy`], no hint). A probe whose
///   outcome is ignored, or whose permit is dropped without an outcome,
///   gives its slot back. The first failed or slow probe reopens (a new open
///   wait); when `half_open_calls` probes have succeeded, it closes. With
///   `max_half_open_wait` set, an episode that has a probe out and has
///   admitted no probe for that long reopens, as of that moment, as if the
///   probe had failed, and the late probe's outcome counts as stale: a lost
///   probe cannot wedge the breaker. An episode with no probe out (say one
///   of three probes came back and traffic is quiet) waits for calls and does
///   not expire.
/// - **Windows**: Closed → Open and HalfOpen → Open keep the window frozen
///   for metrics (it shows why it opened); entering HalfOpen or Closed starts
///   an empty window (half-open probes are recorded in it for metrics; they
///   decide through their own counts). ForcedOpen and Disabled keep the
///   window frozen too. Rejected and stale counts run over the breaker's life.
///   [`metrics`](Self::metrics) shows the state [`state`](Self::state)
///   reports: once the open wait is over, HalfOpen with an empty window,
///   even before the first probe makes the transition.
/// - **Generations**: every transition bumps a generation. An outcome
///   recorded on a permit of an older generation changes nothing and is
///   counted as stale.
/// - **Panics**: under `std`, a call of [`call`](Self::call) that panics
///   records a failure as the panic unwinds out of its `poll`, whoever
///   catches it; a [`CallPermit`] dropped while its thread panics records a
///   failure; a permit or call dropped otherwise without an outcome
///   (cancellation) records nothing and frees its half-open slot.
/// - **Operator switches**: [`force_open`](Self::force_open) refuses
///   everything; [`disable`](Self::disable) admits everything and records
///   nothing; [`reset`](Self::reset) empties the window and closes, from any
///   state. Each is a transition, but a reset of a closed breaker, which
///   changes no state (it only starts a fresh window).
/// - **Bad config**: refused with a [`BreakerConfigError`] naming the field,
///   never clamped.
///
/// # Lock-free on every target
///
/// The state, the generation and the half-open probe counts are one `u32`
/// word, so every transition is a single compare-and-swap and only one of
/// two threads that decide the same transition makes it (a trip happens
/// once per generation). The window is a ring of `u8` slots plus one `u32`
/// word with its generation and index; its counts are derived from the
/// slots, so no counter can drift from them (see `src/breaker/window.rs`).
/// The time the current state began lives in its own word tagged with the
/// generation; on targets without 64-bit atomics (thumbv6m, thumbv7em) it is
/// 32 bits of milliseconds, read back with wrapping arithmetic, which limits
/// durations in the config to 37 hours there. There is no lock and no spin
/// anywhere: a thread that finds a transition half-published works with what
/// is published (an open breaker whose stamp is not out yet rejects with the
/// full open wait as its hint).
///
/// Single-threaded, the breaker answers exactly as a plain sequential state
/// machine would (`tests/breaker_model.rs` checks that on random sequences).
/// Under concurrency, outcomes may land in the window in any order, none is
/// lost, and the probe cap holds (`tests/loom.rs`).
///
/// # Memory ordering
///
/// State changes are `AcqRel` compare-and-swaps on the state word and loads
/// are `Acquire`, so a thread that sees a state also sees what the thread
/// that made it wrote before (the window it installed, the stamp it
/// published). The rejected and stale counters are `Relaxed`: they are
/// statistics, not synchronisation.
///
/// # Cost
///
/// A closed-state call with slow-call detection off reads no clock. In a
/// healthy system (the window full of plain successes) it is three loads and
/// no write at all: the state word to admit, the state word and the window
/// word to record — a window of nothing but successes does not change with
/// one more. Otherwise recording is one compare-and-swap on the window word,
/// a slot write if the slot changes, and a read of the window's slots when an
/// outcome may have raised a rate. Slow-call detection adds two clock reads:
/// two relaxed loads on a [`CoarseClock`](crate::clock::CoarseClock) (see
/// the module's "Which clock").
/// No operation allocates.
pub struct CircuitBreaker<C, const N: usize, H = (), W = Inline<N>> {
    state: AtomicU32,
    /// When the current state began (tagged with its generation).
    stamp: AtomicStamp,
    /// When the current half-open episode last admitted a probe (tagged with
    /// its generation); kept only with `max_half_open_wait` set.
    admitted: AtomicStamp,
    window: Window<W>,
    rejected: AtomicUsize,
    stale: AtomicUsize,
    config: BreakerConfig,
    name: &'static str,
    clock: C,
    listener: H,
}

impl<C, const N: usize> CircuitBreaker<C, N> {
    crate::sync::const_fn! {
        /// A closed breaker named `name` (for metrics and logs), with no
        /// listener.
        ///
        /// # Panics
        ///
        /// If `config.window_size()` is larger than `N`; in a `static` or
        /// `const` that is a compile-time error. Use [`try_new`](Self::try_new)
        /// for config read at run time. `N` of zero, or above 1023, does not
        /// compile.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::{BreakerConfig, CircuitBreaker};
        /// use watertight::clock::StdClock;
        ///
        /// static UPSTREAM: CircuitBreaker<StdClock, 64> =
        ///     CircuitBreaker::new("upstream", BreakerConfig::DEFAULT, StdClock::new());
        /// assert!(UPSTREAM.try_acquire().is_ok());
        /// ```
        ///
        /// A window that does not fit in `N` is refused at compile time in a
        /// `static` (the default window is 50):
        ///
        /// ```compile_fail
        /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::StdClock;
        /// static TOO_SMALL: CircuitBreaker<StdClock, 16> =
        ///     CircuitBreaker::new("upstream", BreakerConfig::DEFAULT, StdClock::new());
        /// ```
        ///
        /// and so is a capacity of zero:
        ///
        /// ```compile_fail
        /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::StdClock;
        /// let b: CircuitBreaker<StdClock, 0> =
        ///     CircuitBreaker::new("upstream", BreakerConfig::builder().window_size(1).minimum_calls(1).build().unwrap(), StdClock::new());
        /// ```
        #[track_caller]
        pub const fn new(name: &'static str, config: BreakerConfig, clock: C) -> Self {
            Self::with_listener(name, config, clock, ())
        }
    }
}

impl<C, const N: usize, W: WindowStorage> CircuitBreaker<C, N, (), W> {
    /// Like [`new`](CircuitBreaker::new), for config read at run time; and
    /// the constructor of a [`HeapBreaker`], which allocates its window's
    /// `window_size` slots here, once.
    ///
    /// # Errors
    ///
    /// [`BreakerConfigError::WindowAboveCapacity`] if `config.window_size()`
    /// is larger than `N`. Never for a [`HeapBreaker`]: its `N` is the
    /// largest window a config can hold.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{BreakerConfig, BreakerConfigError, CircuitBreaker};
    /// use watertight::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let err = CircuitBreaker::<_, 16>::try_new("x", BreakerConfig::DEFAULT, &clock).unwrap_err();
    /// assert_eq!(err, BreakerConfigError::WindowAboveCapacity { window_size: 50, capacity: 16 });
    ///
    /// // Sized at run time: any window a config holds.
    /// # #[cfg(feature = "alloc")] {
    /// let config = BreakerConfig::builder().window_size(1000).build().unwrap();
    /// let b = watertight::breaker::HeapBreaker::try_new("x", config, &clock).unwrap();
    /// assert_eq!(b.config().window_size(), 1000);
    /// # }
    /// ```
    pub fn try_new(
        name: &'static str,
        config: BreakerConfig,
        clock: C,
    ) -> Result<Self, BreakerConfigError> {
        Self::try_with_listener(name, config, clock, ())
    }
}

impl<C, const N: usize, H> CircuitBreaker<C, N, H> {
    crate::sync::const_fn! {
        /// Like [`new`](CircuitBreaker::new), with a listener told about every
        /// state change.
        ///
        /// # Panics
        ///
        /// If `config.window_size()` is larger than `N`.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::atomic::{AtomicUsize, Ordering};
        /// use watertight::{BreakerConfig, CircuitBreaker};
        /// use watertight::breaker::Transition;
        /// use watertight::clock::ManualClock;
        ///
        /// static OPENED: AtomicUsize = AtomicUsize::new(0);
        /// let clock = ManualClock::new();
        /// let config = BreakerConfig::builder().window_size(4).minimum_calls(2).build().unwrap();
        /// let breaker = CircuitBreaker::<_, 4, _>::with_listener("db", config, &clock, |t: &Transition| {
        ///     if t.to == watertight::breaker::State::Open {
        ///         OPENED.fetch_add(1, Ordering::Relaxed);
        ///     }
        /// });
        /// breaker.try_acquire().unwrap().failure();
        /// breaker.try_acquire().unwrap().failure();
        /// assert_eq!(OPENED.load(Ordering::Relaxed), 1);
        /// ```
        #[track_caller]
        pub const fn with_listener(name: &'static str, config: BreakerConfig, clock: C, listener: H) -> Self {
            const { assert!(N > 0 && N <= MAX_WINDOW, "a breaker's window capacity N must be in 1..=MAX_WINDOW") };
            if config.window_size as usize > N {
                panic!("breaker config: window_size is above the breaker's capacity N");
            }
            Self::assemble(name, config, clock, listener, Window::new())
        }
    }
}

impl<C, const N: usize, H, W: WindowStorage> CircuitBreaker<C, N, H, W> {
    /// Like [`with_listener`](CircuitBreaker::with_listener), for config
    /// read at run time; and the constructor of a [`HeapBreaker`] with a
    /// listener, which allocates its window's `window_size` slots here,
    /// once.
    ///
    /// # Errors
    ///
    /// [`BreakerConfigError::WindowAboveCapacity`] if `config.window_size()`
    /// is larger than `N` (never for a [`HeapBreaker`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{BreakerConfig, CircuitBreaker};
    /// use watertight::breaker::Transition;
    /// use watertight::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let b = CircuitBreaker::<_, 64, _>::try_with_listener(
    ///     "db", BreakerConfig::DEFAULT, &clock, |_: &Transition| {},
    /// ).unwrap();
    /// assert_eq!(b.name(), "db");
    /// ```
    pub fn try_with_listener(
        name: &'static str,
        config: BreakerConfig,
        clock: C,
        listener: H,
    ) -> Result<Self, BreakerConfigError> {
        const {
            assert!(
                N > 0 && N <= MAX_WINDOW,
                "a breaker's window capacity N must be in 1..=MAX_WINDOW"
            )
        };
        if config.window_size as usize > N {
            return Err(BreakerConfigError::WindowAboveCapacity {
                window_size: config.window_size as usize,
                capacity: N,
            });
        }
        let window = Window::for_window(config.window_size as usize);
        Ok(Self::assemble(name, config, clock, listener, window))
    }
}

impl<C, const N: usize, H, W> CircuitBreaker<C, N, H, W> {
    crate::sync::const_fn! {
        /// A closed breaker around `window`.
        const fn assemble(
            name: &'static str,
            config: BreakerConfig,
            clock: C,
            listener: H,
            window: Window<W>,
        ) -> Self {
            CircuitBreaker {
                state: AtomicU32::new(word::make(CLOSED, 0)),
                stamp: AtomicStamp::new(word::NEVER),
                admitted: AtomicStamp::new(word::NEVER),
                window,
                rejected: AtomicUsize::new(0),
                stale: AtomicUsize::new(0),
                config,
                name,
                clock,
                listener,
            }
        }
    }

    /// The name given at construction.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("inventory", BreakerConfig::DEFAULT, &clock);
    /// assert_eq!(b.name(), "inventory");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The config it was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::CRITICAL, &clock);
    /// assert_eq!(b.config().failure_rate_threshold(), 30.0);
    /// ```
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The clock it measures with.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// assert_eq!(b.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> CircuitBreaker<C, N, H, W> {
    /// Asks to make one call.
    ///
    /// Closed or disabled: a permit. Open: refused with
    /// [`Rejection::Open`] and how long until a probe may pass — unless the
    /// open wait is over, in which case this call begins a half-open episode
    /// as its first probe. Half-open: a probe permit while the episode has
    /// probes left, else [`Rejection::ProbesBusy`]. Forced open:
    /// [`Rejection::ForcedOpen`]. Never waits.
    ///
    /// The permit records the call's outcome: [`CallPermit::success`],
    /// [`failure`](CallPermit::failure), [`ignore`](CallPermit::ignore).
    /// With slow-call detection on, the call's duration is measured from here.
    ///
    /// # Errors
    ///
    /// A [`Rejection`] saying why; it is counted in
    /// [`metrics`](Self::metrics)`().rejected`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let permit = b.try_acquire().unwrap();
    /// // ... make the call that cannot be wrapped ...
    /// permit.success();
    /// assert_eq!(b.metrics().calls, 1);
    /// ```
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<CallPermit<'_, C, N, H, W>, Rejection> {
        self.acquire_raw()
            .map(|raw| CallPermit { breaker: self, raw })
    }

    /// Runs `call` if the breaker lets it through and records its outcome: an
    /// `Err` is a failure, an `Ok` a success. See [`call_with`](Self::call_with)
    /// to decide which results are failures.
    ///
    /// The permit is asked for on the first poll. The result is the call's
    /// own, or [`CallError::Rejected`] when the call did not run.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] when the breaker refused; [`CallError::Failed`]
    /// with the call's error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes drops the call and records
    /// nothing; a half-open probe slot it held is given back. Under `std`,
    /// if the call (or the classifier) panics, the unwinding records a
    /// failure as it leaves `poll`, however the panic is caught: a task
    /// harness, `catch_unwind` on the future, or on the thread.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker, CallError}; use watertight::clock::ManualClock;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// assert_eq!(b.call(async { Ok::<_, &str>(7) }).await, Ok(7));
    /// assert_eq!(b.call(async { Err::<u8, _>("boom") }).await, Err(CallError::Failed("boom")));
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn call<F, T, E>(&self, call: F) -> Call<'_, Self, F, ErrIsFailure<T, E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_with(call, err_is_failure::<T, E>)
    }

    /// Runs `call` if the breaker lets it through, and records what
    /// `classify` makes of its result.
    ///
    /// `classify` sees the call's result and says whether the system
    /// answered ([`Outcome::Success`]: an HTTP 404 is an answer), failed
    /// ([`Outcome::Failure`]: a 503), or said nothing
    /// ([`Outcome::Ignored`]). The result is returned as it is, whatever the
    /// classifier says: an `Ok(503)` classified as a failure is still
    /// `Ok(503)`.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] when the breaker refused; [`CallError::Failed`]
    /// with the call's error.
    ///
    /// # Cancel safety
    ///
    /// As for [`call`](Self::call).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker, Outcome}; use watertight::clock::ManualClock;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let status = b
    ///     .call_with(async { Ok::<u16, ()>(503) }, |r| match r {
    ///         Ok(s) if *s < 500 => Outcome::Success,
    ///         _ => Outcome::Failure,
    ///     })
    ///     .await;
    /// assert_eq!(status, Ok(503));
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn call_with<F, T, E, K>(&self, call: F, classify: K) -> Call<'_, Self, F, K>
    where
        F: Future<Output = Result<T, E>>,
        K: FnOnce(&Result<T, E>) -> Outcome,
    {
        Call {
            breaker: self,
            call,
            classify: Some(classify),
            raw: None,
        }
    }

    /// The state now. It consults the clock: once the open wait is over it
    /// says [`State::HalfOpen`] (the next call would be let through as a
    /// probe), and a half-open episode past `max_half_open_wait` reads as
    /// [`State::Open`]. Reading the state changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::breaker::State;
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.force_open();
    /// assert_eq!(b.state(), State::ForcedOpen);
    /// b.reset();
    /// assert_eq!(b.state(), State::Closed);
    /// ```
    pub fn state(&self) -> State {
        self.look().state
    }

    /// The state as the clock makes it, and, when the state word lags
    /// behind (the open wait is over but no probe has come yet, or a
    /// half-open episode ran out of time), when the state it reports began.
    fn look(&self) -> Look {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            let settled = |bits| Look {
                state: State::from_bits(bits),
                lazy: None,
            };
            return match word::state(s) {
                OPEN => match self.began(s, now) {
                    Began::At(opened) if now >= opened.saturating_add(self.open_duration()) => {
                        Look {
                            state: State::HalfOpen,
                            lazy: Some(opened.saturating_add(self.open_duration())),
                        }
                    }
                    Began::Moved(current) => {
                        s = current;
                        continue;
                    }
                    _ => settled(OPEN),
                },
                HALF_OPEN if self.config.max_half_open_ns != 0 => {
                    match self.half_open_expiry(s, now) {
                        Expiry::At(expired) => {
                            let reopens = expired.saturating_add(self.open_duration());
                            if now < reopens {
                                Look {
                                    state: State::Open,
                                    lazy: Some(expired),
                                }
                            } else {
                                Look {
                                    state: State::HalfOpen,
                                    lazy: Some(reopens),
                                }
                            }
                        }
                        Expiry::Moved(current) => {
                            s = current;
                            continue;
                        }
                        Expiry::Not => settled(HALF_OPEN),
                    }
                }
                bits => settled(bits),
            };
        }
    }

    /// A snapshot of the breaker's numbers. Each field is read atomically;
    /// the snapshot as a whole is not (a call may land between two reads).
    ///
    /// The snapshot agrees with [`state`](Self::state), which consults the
    /// clock: once the open wait is over (and before the first probe makes
    /// the transition), it shows HalfOpen with the empty window a half-open
    /// episode starts with, and `last_transition` at the end of the open
    /// wait; a half-open episode that ran out of time shows Open, with
    /// `last_transition` at the moment it ran out. When the first probe
    /// comes, the transition it makes (and tells an [`OnTransition`]
    /// listener about) is dated at that probe's admission.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let config = BreakerConfig::builder().window_size(4).minimum_calls(2).build().unwrap();
    /// let b: CircuitBreaker<_, 4> = CircuitBreaker::new("x", config, &clock);
    /// b.try_acquire().unwrap().success();
    /// assert_eq!(b.metrics().failure_rate, None); // not enough calls yet
    /// b.try_acquire().unwrap().success();
    /// assert_eq!(b.metrics().failure_rate, Some(0.0));
    /// ```
    ///
    /// After the open wait, before any probe:
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::{Instant, ManualClock};
    /// use core::time::Duration;
    /// use watertight::breaker::State;
    ///
    /// let clock = ManualClock::new();
    /// let config = BreakerConfig::builder().window_size(2).minimum_calls(2).build().unwrap();
    /// let b: CircuitBreaker<_, 2> = CircuitBreaker::new("x", config, &clock);
    /// b.try_acquire().unwrap().failure();
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.metrics().failure_rate, Some(100.0)); // open: why it opened
    /// clock.advance(Duration::from_secs(31)); // the open wait is 30 s
    /// let m = b.metrics();
    /// assert_eq!((m.state, m.calls, m.failure_rate), (State::HalfOpen, 0, None));
    /// assert_eq!(m.last_transition, Some(Instant::ZERO + Duration::from_secs(30)));
    /// ```
    pub fn metrics(&self) -> BreakerMetrics {
        let look = self.look();
        // Half-open by the clock while the word lags behind (no probe has
        // begun the episode yet): its empty window is not installed.
        let fresh = look.state == State::HalfOpen && look.lazy.is_some();
        let counts = if fresh {
            Counts::default()
        } else {
            self.window.counts(self.config.window_size as usize)
        };
        let rate = |n: usize| {
            if counts.calls >= self.config.minimum_calls as usize && counts.calls > 0 {
                Some(n as f32 * 100.0 / counts.calls as f32)
            } else {
                None
            }
        };
        let last_transition = match look.lazy {
            Some(at) => Some(word::floor(at)),
            None => word::read_any(self.stamp.load(Acquire), self.now()),
        };
        BreakerMetrics {
            state: look.state,
            failure_rate: rate(counts.failures),
            slow_call_rate: rate(counts.slow),
            calls: counts.calls,
            failed_calls: counts.failures,
            slow_calls: counts.slow,
            rejected: self.rejected.load(Relaxed),
            stale: self.stale.load(Relaxed),
            last_transition,
        }
    }

    /// Forces the breaker open: every call is refused with
    /// [`Rejection::ForcedOpen`] until [`reset`](Self::reset). Returns
    /// whether this call made the change (false if it was already forced
    /// open).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker, Rejection}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// assert!(b.force_open());
    /// assert!(!b.force_open());
    /// assert_eq!(b.try_acquire().unwrap_err(), Rejection::ForcedOpen);
    /// ```
    pub fn force_open(&self) -> bool {
        self.switch_to(FORCED_OPEN)
    }

    /// Disables the breaker: every call passes and nothing is recorded until
    /// [`reset`](Self::reset). Returns whether this call made the change.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.disable();
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.metrics().calls, 0);
    /// ```
    pub fn disable(&self) -> bool {
        self.switch_to(DISABLED)
    }

    /// Empties the window and closes the breaker, from any state. Outcomes
    /// of permits taken before count as stale.
    ///
    /// From Closed it changes no state: it starts a fresh window (and a new
    /// generation, so earlier permits' outcomes are stale), but it is not a
    /// transition: an [`OnTransition`] listener is told nothing, `tracing`
    /// gets no event, and `metrics().last_transition` stays where it was.
    /// (A distinct "reset" event was the other choice; a listener that
    /// needs one can be called next to `reset()` by the operator's code.)
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let old = b.try_acquire().unwrap();
    /// b.reset();
    /// old.failure();
    /// assert_eq!(b.metrics().stale, 1);
    /// assert_eq!(b.metrics().calls, 0);
    /// ```
    pub fn reset(&self) {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            match self.transition(s, word::next(s, CLOSED), now) {
                Ok(()) => return,
                Err(actual) => s = actual,
            }
        }
    }

    // ---- internals -------------------------------------------------------

    /// The clock: every read of the breaker's goes through here. Inlined
    /// for a clock whose read is a load ([`Clock::CHEAP_NOW`]: a
    /// `CoarseClock` read was one load inside a call, and the call was most
    /// of what slow-call timing cost: a closed call timed on the coarse
    /// clock took 77 instructions against 49 untimed, inlined 61), out of
    /// line for the others: on a microcontroller an inlined read is a
    /// critical section and a 64-bit multiplication, about 40 bytes of flash
    /// per call site, and inlining `StdClock`'s read made the untimed call
    /// (which reads no clock) 3 instructions longer for the registers it
    /// takes.
    #[inline(always)]
    fn now(&self) -> Instant {
        if C::CHEAP_NOW {
            self.clock.now()
        } else {
            self.now_out_of_line()
        }
    }

    #[inline(never)]
    fn now_out_of_line(&self) -> Instant {
        self.clock.now()
    }

    fn open_duration(&self) -> Duration {
        hint(self.config.open_ns)
    }

    /// Whether generation `gen` is still the breaker's.
    #[inline]
    fn current(&self, gen: u32) -> bool {
        word::gen(self.state.load(Acquire)) == gen
    }

    /// When the state in word `s` began, as far as the stamp tells.
    #[inline]
    fn began(&self, s: u32, now: Instant) -> Began {
        match word::read(self.stamp.load(Acquire), word::gen(s), now) {
            Some(at) => Began::At(at),
            None => {
                // Either the transition into `s` has not published its stamp
                // yet, or the breaker has moved past `s` and the stamp is a
                // later generation's: a decision made on `s` would be stale.
                let current = self.state.load(Acquire);
                if word::gen(current) != word::gen(s) {
                    Began::Moved(current)
                } else {
                    Began::Unpublished
                }
            }
        }
    }

    /// For a half-open word `s` with a limit set: whether the episode has run
    /// out of time. It has when a probe is out (taken and not yet succeeded)
    /// and no probe has been admitted for `max_half_open_wait`.
    fn half_open_expiry(&self, s: u32, now: Instant) -> Expiry {
        if word::taken(s) <= word::succeeded(s) {
            return Expiry::Not;
        }
        let last = match word::read(self.admitted.load(Acquire), word::gen(s), now) {
            Some(at) => at,
            None => match self.began(s, now) {
                Began::At(at) => at,
                Began::Unpublished => return Expiry::Not,
                Began::Moved(current) => return Expiry::Moved(current),
            },
        };
        let expires =
            Instant::from_nanos(last.as_nanos().saturating_add(self.config.max_half_open_ns));
        if now >= expires {
            Expiry::At(expires)
        } else {
            Expiry::Not
        }
    }

    /// Notes that the half-open episode of generation `gen` admitted a probe
    /// at `now` (only with a limit set).
    fn note_admission(&self, gen: u32, now: Instant) {
        self.publish(&self.admitted, gen, word::stamp(gen, now));
    }

    /// Publishes `at` as the stamp of generation `gen` in `word`, unless the
    /// breaker has moved past `gen` (a later generation's stamp must not be
    /// overwritten by a late writer).
    fn publish(&self, word: &AtomicStamp, gen: u32, stamp: word::Stamp) {
        let mut old = word.load(Acquire);
        while old != stamp && self.current(gen) {
            match word.compare_exchange_weak(old, stamp, AcqRel, Acquire) {
                Ok(_) => break,
                Err(actual) => old = actual,
            }
        }
    }

    /// Counts a refusal (and reports it to `tracing`); out of line, as it is
    /// reached from four places of the slow path.
    #[inline(never)]
    fn reject(&self, why: Rejection) -> Rejection {
        self.rejected.fetch_add(1, Relaxed);
        // One event per refusal, at DEBUG: refusals come at the rate of
        // traffic (the counter above is what dashboards read).
        #[cfg(feature = "tracing")]
        tracing::debug!(
            system = self.name,
            reason = match why {
                Rejection::Open { .. } => "open",
                Rejection::ProbesBusy => "probes_busy",
                Rejection::ForcedOpen => "forced_open",
            },
            retry_after_ms = why
                .retry_after()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "circuit breaker rejected a call"
        );
        why
    }

    /// The start of a call's duration, if slow-call detection is on.
    #[inline(always)]
    fn start(&self) -> Instant {
        if self.config.slow_ns != 0 {
            self.now()
        } else {
            Instant::from_nanos(0)
        }
    }

    /// Admits a call: the closed state inline, everything else out of line.
    ///
    /// The slow path returns an `Option<Raw>` (16 bytes: two registers) and
    /// writes a refusal through `why`, rather than returning the 24-byte
    /// `Result<Raw, Rejection>`, which goes through memory: the fast path
    /// then had to build its `Raw` in the same stack slot, field by field,
    /// and the caller's move of the permit out of it reloaded the 16 bytes
    /// in one wide load, which stalls on store forwarding (about 6 ns, when
    /// the caller's `Err` arm was live: `if let`, `match`, `call`).
    #[inline(always)]
    fn acquire_raw(&self) -> Result<Raw, Rejection> {
        let s = self.state.load(Acquire);
        if word::state(s) == CLOSED {
            return Ok(Raw::new(self.start(), word::gen(s), false));
        }
        let mut why = Rejection::ProbesBusy;
        match self.acquire_slow(s, &mut why) {
            Some(raw) => Ok(raw),
            None => Err(why),
        }
    }

    /// Every state but closed: a permit, or `None` with the refusal in `why`.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, mut s: u32, why: &mut Rejection) -> Option<Raw> {
        loop {
            match word::state(s) {
                CLOSED => return Some(Raw::new(self.start(), word::gen(s), false)),
                FORCED_OPEN => {
                    *why = self.reject(Rejection::ForcedOpen);
                    return None;
                }
                OPEN => {
                    let now = self.now();
                    let opened = match self.began(s, now) {
                        Began::At(opened) => opened,
                        // Just opened by a thread that has not published the
                        // stamp yet: the whole wait is ahead (`open_ns` is
                        // never zero, so the refusal below follows).
                        Began::Unpublished => now,
                        Began::Moved(current) => {
                            s = current;
                            continue;
                        }
                    };
                    let ends = opened.as_nanos().saturating_add(self.config.open_ns);
                    if now.as_nanos() < ends {
                        *why = self.reject(Rejection::Open {
                            retry_after: hint(ends - now.as_nanos()),
                        });
                        return None;
                    }
                    // The wait is over: this call begins a half-open episode
                    // as its first probe.
                    let probing = word::with_taken(word::next(s, HALF_OPEN), 1);
                    match self.transition(s, probing, now) {
                        Ok(()) => {
                            return Some(Raw::new(
                                if self.config.slow_ns != 0 {
                                    now
                                } else {
                                    Instant::from_nanos(0)
                                },
                                word::gen(probing),
                                true,
                            ))
                        }
                        Err(actual) => s = actual,
                    }
                }
                HALF_OPEN => {
                    if self.config.max_half_open_ns != 0 {
                        match self.half_open_expiry(s, self.now()) {
                            Expiry::At(expired) => {
                                match self.transition(s, word::next(s, OPEN), expired) {
                                    Ok(()) => s = self.state.load(Acquire),
                                    Err(actual) => s = actual,
                                }
                                continue;
                            }
                            Expiry::Moved(current) => {
                                s = current;
                                continue;
                            }
                            Expiry::Not => {}
                        }
                    }
                    let taken = word::taken(s);
                    if taken >= self.config.half_open_calls as u32 {
                        *why = self.reject(Rejection::ProbesBusy);
                        return None;
                    }
                    let more = word::with_taken(s, taken + 1);
                    match self.state.compare_exchange_weak(s, more, AcqRel, Acquire) {
                        Ok(_) => {
                            let start = self.start();
                            if self.config.max_half_open_ns != 0 {
                                let now = if self.config.slow_ns != 0 {
                                    start
                                } else {
                                    self.now()
                                };
                                self.note_admission(word::gen(s), now);
                            }
                            return Some(Raw::new(start, word::gen(s), true));
                        }
                        Err(actual) => s = actual,
                    }
                }
                // DISABLED, the fifth state: admit and record nothing.
                _ => return Some(Raw::new(Instant::from_nanos(0), word::gen(s), false)),
            }
        }
    }

    /// Records the outcome of a permit: a plain success into a closed
    /// breaker's healthy window inline (it changes nothing), everything else
    /// out of line.
    #[inline(always)]
    fn record(&self, raw: Raw, failed: bool) {
        let slow = self.config.slow_ns != 0
            && self.now().as_nanos().saturating_sub(raw.start.as_nanos()) > self.config.slow_ns;
        if !failed
            && !slow
            && self.state.load(Acquire) == word::make(CLOSED, raw.gen())
            && self
                .window
                .takes_plain_success_as_is(raw.gen(), self.config.window_size as usize)
        {
            return;
        }
        self.record_slow(raw, Kind::new(failed, slow), failed, slow);
    }

    #[inline(never)]
    fn record_slow(&self, raw: Raw, kind: Kind, failed: bool, slow: bool) {
        // One increment for every way an outcome can turn out stale.
        if self.record_outcome(raw, kind, failed, slow) == Landed::Stale {
            self.stale.fetch_add(1, Relaxed);
        }
    }

    /// Records an outcome the inline check of `record` could not settle;
    /// says whether it was counted or came too late.
    #[inline(always)]
    fn record_outcome(&self, raw: Raw, kind: Kind, failed: bool, slow: bool) -> Landed {
        let mut s = self.state.load(Acquire);
        let state = word::state(s);
        if word::gen(s) != raw.gen() {
            return Landed::Stale;
        }
        // Disabled records nothing. Open and ForcedOpen hand out no permits,
        // so a permit of their generation cannot exist.
        if state != CLOSED && state != HALF_OPEN {
            return Landed::Yes;
        }
        if state == HALF_OPEN && self.config.max_half_open_ns != 0 {
            match self.half_open_expiry(s, self.now()) {
                Expiry::At(expired) => {
                    // The episode ran out before this probe came back: it
                    // reopens, and this outcome is too late.
                    let _ = self.transition(s, word::next(s, OPEN), expired);
                    return Landed::Stale;
                }
                Expiry::Moved(_) => {
                    return Landed::Stale;
                }
                Expiry::Not => {}
            }
        }
        // One call site for the window in either state: it is the largest
        // piece of the breaker's code (this matters on a microcontroller).
        let recorded =
            self.window
                .record(raw.gen(), kind, self.config.window_size as usize, || {
                    self.current(raw.gen())
                });
        let Some(recorded) = recorded else {
            return Landed::Stale;
        };
        if state == CLOSED {
            if let Recorded::Counted(counts) = recorded {
                if self.trips(counts) {
                    let _ = self.transition(s, word::next(s, OPEN), self.now());
                }
            }
            return Landed::Yes;
        }
        // A half-open probe: it decides the episode, or adds to its successes.
        loop {
            if word::gen(s) != raw.gen() {
                // Another probe decided the episode meanwhile.
                return Landed::Stale;
            }
            let decided = if failed || slow {
                word::next(s, OPEN)
            } else {
                let succeeded = word::succeeded(s) + 1;
                if succeeded >= self.config.half_open_calls as u32 {
                    word::next(s, CLOSED)
                } else {
                    word::with_succeeded(s, succeeded)
                }
            };
            let result = if word::gen(decided) != raw.gen() {
                self.transition(s, decided, self.now())
            } else {
                self.state
                    .compare_exchange_weak(s, decided, AcqRel, Acquire)
                    .map(drop)
            };
            match result {
                Ok(()) => return Landed::Yes,
                Err(actual) => s = actual,
            }
        }
    }

    /// Gives back the half-open slot of a probe that brought no outcome.
    fn release(&self, raw: Raw) {
        if !raw.is_probe() {
            return;
        }
        let mut s = self.state.load(Acquire);
        if word::gen(s) == raw.gen()
            && word::state(s) == HALF_OPEN
            && self.config.max_half_open_ns != 0
        {
            match self.half_open_expiry(s, self.now()) {
                Expiry::At(expired) => {
                    // The episode ran out while this probe was out: it
                    // reopens, and giving the slot back cannot revive it.
                    let _ = self.transition(s, word::next(s, OPEN), expired);
                    return;
                }
                Expiry::Moved(_) => return,
                Expiry::Not => {}
            }
        }
        while word::gen(s) == raw.gen() && word::state(s) == HALF_OPEN && word::taken(s) > 0 {
            let fewer = word::with_taken(s, word::taken(s) - 1);
            match self.state.compare_exchange_weak(s, fewer, AcqRel, Acquire) {
                Ok(_) => return,
                Err(actual) => s = actual,
            }
        }
    }

    /// Whether the window's numbers trip the breaker.
    #[inline]
    fn trips(&self, c: Counts) -> bool {
        let calls = c.calls as u64;
        if calls == 0 || calls < self.config.minimum_calls as u64 {
            return false;
        }
        c.failures as u64 * 10_000 >= self.config.failure_bp as u64 * calls
            || (self.config.slow_ns != 0
                && c.slow as u64 * 10_000 >= self.config.slow_bp as u64 * calls)
    }

    fn switch_to(&self, to: u32) -> bool {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            if word::state(s) == to {
                return false;
            }
            match self.transition(s, word::next(s, to), now) {
                Ok(()) => return true,
                Err(actual) => s = actual,
            }
        }
    }

    /// One transition: a single CAS of the state word from `from` to `to`
    /// (a word of the next generation); the winner then publishes when it
    /// happened, installs or freezes the window, and tells the listener.
    fn transition(&self, from: u32, to: u32, at: Instant) -> Result<(), u32> {
        self.state.compare_exchange(from, to, AcqRel, Acquire)?;
        let gen = word::gen(to);
        let current = || self.current(gen);
        // A reset of a closed breaker changes no state: a new generation and
        // an empty window, but no new transition time (a closed state's
        // stamp is never read but for `last_transition`) and nothing to tell.
        let changed = word::state(from) != word::state(to);
        let (stamp, at) = word::stamp_and_floor(gen, at);
        if changed {
            self.publish(&self.stamp, gen, stamp);
        }
        match word::state(to) {
            CLOSED | HALF_OPEN => self.window.install(gen, current),
            _ => self.window.freeze(current),
        }
        if !changed {
            return Ok(());
        }
        self.listener.on_transition(&Transition {
            name: self.name,
            from: State::from_bits(word::state(from)),
            to: State::from_bits(word::state(to)),
            at,
        });
        // One event per transition, by the thread that made it.
        #[cfg(feature = "tracing")]
        tracing::info!(
            system = self.name,
            from = State::from_bits(word::state(from)).as_str(),
            to = State::from_bits(word::state(to)).as_str(),
            "circuit breaker state changed"
        );
        Ok(())
    }
}

/// The classifier of [`CircuitBreaker::call`]: an `Err` is a failure.
pub type ErrIsFailure<T, E> = fn(&Result<T, E>) -> Outcome;

/// A retry hint of `ns` nanoseconds. Out of line: the conversion is a
/// dozen multiplications on a 32-bit target, and two refusals need it.
#[inline(never)]
fn hint(ns: u64) -> Duration {
    nanos::duration(ns)
}

/// Whether an outcome was taken (or, in Disabled, deliberately not), or
/// arrived after the breaker had moved on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landed {
    Yes,
    Stale,
}

/// The state as [`CircuitBreaker::state`] reports it and, when the state
/// word lags behind the clock, when that state began.
#[derive(Debug, Clone, Copy)]
struct Look {
    state: State,
    lazy: Option<Instant>,
}

/// What the stamp says about when a state began.
#[derive(Debug, Clone, Copy)]
enum Began {
    At(Instant),
    /// The transition into the state has not published its stamp yet.
    Unpublished,
    /// The breaker has moved on to this state word.
    Moved(u32),
}

/// Whether a half-open episode has run out of time.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    Not,
    At(Instant),
    /// The breaker has moved on to this state word.
    Moved(u32),
}

#[inline]
pub(crate) fn err_is_failure<T, E>(result: &Result<T, E>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

impl<C, const N: usize, H, W: WindowStorage> fmt::Debug for CircuitBreaker<C, N, H, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.load(Acquire);
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name)
            .field("state", &State::from_bits(word::state(s)))
            .field("generation", &word::gen(s))
            .field("capacity", &self.window.capacity())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A snapshot of a breaker's numbers, from [`CircuitBreaker::metrics`].
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
    /// The state, as [`CircuitBreaker::state`] reports it.
    pub state: State,
    /// Failures in the window, in percent; `None` until the window holds
    /// `minimum_calls` outcomes.
    pub failure_rate: Option<f32>,
    /// Slow calls in the window, in percent; `None` until the window holds
    /// `minimum_calls` outcomes.
    pub slow_call_rate: Option<f32>,
    /// Outcomes in the window.
    pub calls: usize,
    /// Failures in the window (slow or not).
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

/// Leave to make one call, from [`CircuitBreaker::try_acquire`]: record the
/// outcome on it.
///
/// Dropped without an outcome, it records nothing and a half-open probe
/// gives its slot back (a cancelled call says nothing about the system).
/// Under `std`, dropped while its thread panics, it records a failure.
///
/// # Examples
///
/// Guarding a blocking call that cannot be wrapped in a future:
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::clock::ManualClock;
///
/// fn fetch_stock(sku: &str) -> Result<u32, String> {
///     if sku.is_empty() { Err("timeout".into()) } else { Ok(3) }
/// }
///
/// let clock = ManualClock::new();
/// let inventory: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("inventory", BreakerConfig::DEFAULT, &clock);
/// for sku in ["A-1", ""] {
///     let permit = inventory.try_acquire().unwrap();
///     match fetch_stock(sku) {
///         Ok(_) => permit.success(),
///         Err(_) => permit.failure(),
///     }
/// }
/// drop(inventory.try_acquire().unwrap()); // no outcome: nothing recorded
/// let m = inventory.metrics();
/// assert_eq!((m.calls, m.failed_calls), (2, 1));
/// ```
#[must_use = "a permit records nothing unless its outcome is given"]
#[clippy::has_significant_drop]
pub struct CallPermit<
    'a,
    C: Clock,
    const N: usize,
    H: OnTransition = (),
    W: WindowStorage = Inline<N>,
> {
    breaker: &'a CircuitBreaker<C, N, H, W>,
    raw: Raw,
}

impl<'a, C: Clock, const N: usize, H: OnTransition, W: WindowStorage> CallPermit<'a, C, N, H, W> {
    /// Records that the system answered. Slow if it took longer than the
    /// slow-call duration.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().success();
    /// assert_eq!(b.metrics().calls, 1);
    /// ```
    #[inline(always)]
    pub fn success(self) {
        self.record(Outcome::Success)
    }

    /// Records that the system failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// ```
    #[inline(always)]
    pub fn failure(self) {
        self.record(Outcome::Failure)
    }

    /// Records nothing: the call said nothing about the system. A half-open
    /// probe gives its slot back.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().ignore();
    /// assert_eq!(b.metrics().calls, 0);
    /// ```
    pub fn ignore(self) {
        self.record(Outcome::Ignored)
    }

    /// Records `outcome`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker, Outcome}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let status = 503;
    /// let permit = b.try_acquire().unwrap();
    /// permit.record(if status >= 500 { Outcome::Failure } else { Outcome::Success });
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// ```
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        let this = ManuallyDrop::new(self);
        finish(this.breaker, this.raw, outcome);
    }

    /// Whether this permit is a half-open probe.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// assert!(!b.try_acquire().unwrap().is_probe());
    /// ```
    pub fn is_probe(&self) -> bool {
        self.raw.is_probe()
    }

    /// The breaker this permit belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let p = b.try_acquire().unwrap();
    /// assert_eq!(p.breaker().name(), "x");
    /// ```
    pub fn breaker(&self) -> &'a CircuitBreaker<C, N, H, W> {
        self.breaker
    }
}

#[inline(always)]
fn finish<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    breaker: &CircuitBreaker<C, N, H, W>,
    raw: Raw,
    outcome: Outcome,
) {
    // One inlined `record` for both outcomes, not one per outcome: the
    // classifier decides at run time anyway, and on a microcontroller each
    // copy is a clock read and the healthy-window check in flash.
    match outcome {
        Outcome::Ignored => breaker.release(raw),
        _ => breaker.record(raw, matches!(outcome, Outcome::Failure)),
    }
}

/// Drop without an outcome: a failure if the thread is panicking (under
/// `std`), otherwise nothing, and a probe's slot back.
fn abandon<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    breaker: &CircuitBreaker<C, N, H, W>,
    raw: Raw,
) {
    #[cfg(feature = "std")]
    if std::thread::panicking() {
        breaker.record(raw, true);
        return;
    }
    breaker.release(raw);
}

/// Runs `poll` (a step of a call future that holds the permit `raw`) so
/// that a panic unwinding out of it records a failure on `raw` there and
/// then, whoever catches the panic: a task harness, `catch_unwind` around
/// the future, or `std::panic::catch_unwind` around the executor. A future
/// dropped after its panic was caught (as `FutureExt::catch_unwind` does)
/// cannot tell that drop from a cancellation, so the unwind is caught here,
/// in `poll`.
///
/// The guard is armed only while `poll` runs and is forgotten when it
/// returns, so only an unwind can drop it armed: it reads no thread-local
/// state and costs nothing when `poll` returns. Without `std` there is no
/// unwinding to catch (`no_std` targets abort on panic), and no guard.
///
/// The caller takes `raw` out of its future for the call (so that an unwind
/// finds the permit here only, and the future's drop does not see it again)
/// and puts it back if `poll` is pending. The permit is passed by value, not
/// by reference to the future's field: a future ready at its first poll then
/// keeps its permit in registers from admission to record (a round trip
/// through the field, stored in pieces and reloaded in one wide load,
/// stalled on store forwarding).
#[inline(always)]
pub(crate) fn fail_on_unwind<B: sealed::Guard + ?Sized, R>(
    breaker: &B,
    raw: Option<Raw>,
    poll: impl FnOnce() -> R,
) -> R {
    #[cfg(feature = "std")]
    let guard = Unwinding { breaker, raw };
    #[cfg(not(feature = "std"))]
    let _ = (breaker, raw);
    let r = poll();
    #[cfg(feature = "std")]
    core::mem::forget(guard);
    r
}

/// Takes the permit out of a future's field, reading its start only if
/// there is one. `Option::take` reads the whole field, and for `None` its
/// first eight bytes are whatever the stack slot last held: a narrower store
/// there (a neighbour's byte, say) makes that wide load stall on store
/// forwarding, which cost a ready `call` half again its time in the bench.
#[inline(always)]
pub(crate) fn take_raw(field: &mut Option<Raw>) -> Option<Raw> {
    if field.is_none() {
        return None;
    }
    field.take()
}

/// Armed by [`fail_on_unwind`]: dropped only by an unwind, it records a
/// failure on the permit it holds.
#[cfg(feature = "std")]
struct Unwinding<'a, B: sealed::Guard + ?Sized> {
    breaker: &'a B,
    raw: Option<Raw>,
}

#[cfg(feature = "std")]
impl<B: sealed::Guard + ?Sized> Drop for Unwinding<'_, B> {
    // Inlined into the landing pad, so that the guard's fields need not be
    // stored for an out-of-line drop to read (they are in registers anyway).
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.breaker.finish(raw, Outcome::Failure);
        }
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> Drop
    for CallPermit<'_, C, N, H, W>
{
    fn drop(&mut self) {
        abandon(self.breaker, self.raw);
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> fmt::Debug
    for CallPermit<'_, C, N, H, W>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallPermit")
            .field("breaker", &self.breaker.name)
            .field("generation", &self.raw.gen())
            .field("probe", &(self.raw.is_probe()))
            .finish()
    }
}

mod sealed {
    use core::num::NonZeroU32;

    use crate::clock::Instant;

    /// What a permit needs to know: when the call began (when slow-call
    /// detection is on), its generation, and whether it is a half-open
    /// probe.
    ///
    /// Two scalars, so that the compiler passes and returns it (and an
    /// `Option<Raw>`, through the tag's niche) in two registers and copies
    /// it field by field: the generation and the probe flag are one
    /// `NonZeroU32`, `gen << 2 | probe << 1 | 1`. (As three fields it was an
    /// aggregate: returned through memory, built there in pieces and
    /// reloaded in wider loads that stalled on store forwarding, 6 ns of a
    /// 2 ns call. With a `bool` for the flag, the padding bytes were copied
    /// piecemeal, to the same effect.)
    #[derive(Debug, Clone, Copy)]
    pub struct Raw {
        pub(crate) start: Instant,
        tag: NonZeroU32,
    }

    impl Raw {
        #[inline(always)]
        pub(crate) const fn new(start: Instant, gen: u32, probe: bool) -> Raw {
            // `gen` has 13 bits (`word::GEN_BITS`): the shift loses nothing.
            let bits = gen << 2 | (probe as u32) << 1 | 1;
            match NonZeroU32::new(bits) {
                Some(tag) => Raw { start, tag },
                None => unreachable!(),
            }
        }

        /// The generation it was admitted in.
        #[inline(always)]
        pub(crate) const fn gen(self) -> u32 {
            self.tag.get() >> 2
        }

        /// Whether it is a half-open probe.
        #[inline(always)]
        pub(crate) const fn is_probe(self) -> bool {
            self.tag.get() & 2 != 0
        }
    }

    /// What [`Call`](super::Call) needs from a breaker, so that the future
    /// can name the breaker as one type parameter (pin-project-lite cannot
    /// take the breaker's const generic).
    pub trait Guard {
        #[doc(hidden)]
        fn acquire_raw(&self) -> Result<super::Raw, super::Rejection>;
        #[doc(hidden)]
        fn finish(&self, raw: super::Raw, outcome: super::Outcome);
        #[doc(hidden)]
        fn abandon(&self, raw: super::Raw);
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> sealed::Guard
    for CircuitBreaker<C, N, H, W>
{
    #[inline(always)]
    fn acquire_raw(&self) -> Result<Raw, Rejection> {
        CircuitBreaker::acquire_raw(self)
    }
    #[inline(always)]
    fn finish(&self, raw: Raw, outcome: Outcome) {
        finish(self, raw, outcome)
    }
    // Out of line and cold. A call future is dropped by the landing pads of
    // every call that may unwind while it is alive (the inner future's
    // poll, the clock, the breaker's slow paths): rustc calls its drop glue
    // there through a `cold` call site, which LLVM inlines only if the glue
    // is small. With the abandon inlined it was not, so the glue took the
    // future's address: the future could not live in registers, and a ready
    // `call` stored all its fields, re-read them after every opaque call,
    // and tested its permit field on the way out (75 instructions against
    // the `try_acquire` forms' 55; with this, 60). The glue is now a test of
    // the permit field and this call. Where panics abort there are no
    // landing pads, and it is inlined as before.
    #[cfg_attr(panic = "unwind", cold, inline(never))]
    #[cfg_attr(not(panic = "unwind"), inline)]
    fn abandon(&self, raw: Raw) {
        abandon(self, raw)
    }
}

pin_project_lite::pin_project! {
    /// The future of [`CircuitBreaker::call`] and
    /// [`call_with`](CircuitBreaker::call_with): `B` is the breaker's type,
    /// `F` the call, `K` the classifier.
    ///
    /// # Cancel safety
    ///
    /// Dropping it before it completes drops the call and records nothing;
    /// a half-open probe slot it held is given back. Under `std`, a call
    /// (or classifier) that panics records a failure as the panic unwinds
    /// out of `poll`, however the panic is caught.
    ///
    /// # Examples
    ///
    /// The breaker is asked on the first poll, not when the future is made:
    ///
    /// ```
    /// use futures_lite::future::block_on;
    /// use watertight::clock::ManualClock;
    /// use watertight::{BreakerConfig, CallError, CircuitBreaker, Rejection};
    ///
    /// let clock = ManualClock::new();
    /// let breaker: CircuitBreaker<_, 64> =
    ///     CircuitBreaker::new("ledger", BreakerConfig::DEFAULT, &clock);
    /// let call = breaker.call(async { Ok::<_, ()>(42) });
    /// breaker.force_open(); // before the first poll
    /// assert_eq!(block_on(call), Err(CallError::Rejected(Rejection::ForcedOpen)));
    /// breaker.reset();
    /// assert_eq!(block_on(breaker.call(async { Ok::<_, ()>(42) })), Ok(42));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Call<'a, B: sealed::Guard, F, K> {
        breaker: &'a B,
        #[pin]
        call: F,
        classify: Option<K>,
        // The permit while the call is pending. Not asked yet: no permit
        // and the classifier still there; done: no classifier.
        raw: Option<Raw>,
    }

    impl<'a, B: sealed::Guard, F, K> PinnedDrop for Call<'a, B, F, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(raw) = take_raw(this.raw) {
                this.breaker.abandon(raw);
            }
        }
    }
}

impl<B: sealed::Guard, F, K, T, E> Future for Call<'_, B, F, K>
where
    F: Future<Output = Result<T, E>>,
    K: FnOnce(&Result<T, E>) -> Outcome,
{
    type Output = Result<T, CallError<E>>;

    // Always inlined: with `#[inline]`, LLVM kept it out of line as soon as
    // one program polled the same `Call` type from two places, and a ready
    // call then cost 99 instructions instead of 60 (the future passed by
    // address, its output through memory). The slow paths are out of line,
    // so what is inlined is the fast path. Where panics abort (firmware),
    // `#[inline]` as before: there the size counts, and without landing pads
    // an out-of-line poll costs less.
    #[cfg_attr(panic = "unwind", inline(always))]
    #[cfg_attr(not(panic = "unwind"), inline)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The breaker, the classifier and the permit stay out of the future
        // while the call is polled: read before anything is called, they
        // are known to the optimiser (`call`'s `ErrIsFailure` is a function
        // pointer: read back after a call it was called indirectly, never
        // inlined; the breaker was reloaded through a store), and a call
        // ready at its first poll never stores its permit (see
        // `fail_on_unwind`).
        let breaker: &B = this.breaker;
        let Some(classify) = this.classify.take() else {
            panic!("`Call` polled after completion");
        };
        let raw = match take_raw(this.raw) {
            Some(raw) => raw,
            None => match breaker.acquire_raw() {
                Ok(raw) => raw,
                Err(why) => return Poll::Ready(Err(CallError::Rejected(why))),
            },
        };
        let call = this.call;
        // A panic in the call or its classifier is a failure, recorded as it
        // unwinds (see `fail_on_unwind`). Pending, the classifier and the
        // permit go back.
        let polled = fail_on_unwind(breaker, Some(raw), move || match call.poll(cx) {
            Poll::Pending => Err(classify),
            Poll::Ready(result) => {
                let outcome = classify(&result);
                Ok((result, outcome))
            }
        });
        let (result, outcome) = match polled {
            Ok(done) => done,
            Err(classify) => {
                *this.classify = Some(classify);
                *this.raw = Some(raw);
                return Poll::Pending;
            }
        };
        breaker.finish(raw, outcome);
        Poll::Ready(result.map_err(CallError::Failed))
    }
}

impl<B: sealed::Guard, F, K> fmt::Debug for Call<'_, B, F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("started", &(self.raw.is_some() || self.classify.is_none()))
            .field("done", &self.classify.is_none())
            .finish_non_exhaustive()
    }
}

// Size targets: a breaker with a 64-call window on the std clock
// fits in 160 bytes on x86_64; on thumbv7em and thumbv6m, with a zero-sized
// clock such as `EmbassyClock`, in 136 (32-bit stamps, counters and name).
#[cfg(all(target_arch = "x86_64", feature = "std", not(loom)))]
const _: () = assert!(core::mem::size_of::<CircuitBreaker<crate::clock::StdClock, 64>>() <= 160);
#[cfg(all(target_os = "none", target_arch = "arm", not(loom)))]
const _: () = assert!(core::mem::size_of::<CircuitBreaker<(), 64>>() <= 136);
