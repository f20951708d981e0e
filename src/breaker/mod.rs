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
//! tower `BreakerLayer` (feature `tower`) takes a breaker on any clock, and
//! `PolicyLayer` such a policy.
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

mod call;
mod classify;
mod config;
mod error;
mod machine;
mod permit;
mod state;
mod time;
mod window;
mod word;

use core::fmt;
use core::future::Future;

use crate::clock::Clock;
use crate::sync::{AtomicU32, AtomicUsize, Ordering::*};

pub use call::Call;
pub use classify::{Classify, ErrIsFailure, Outcome};
pub use config::{
    BreakerConfig, BreakerConfigBuilder, BreakerConfigError, BreakerField, BreakerWindow,
};
pub use error::{CallError, Rejection};
pub use permit::CallPermit;
pub use time::Bucket;
// The seam every call future is built on: `Call`, the tower breaker
// service's and the policy's.
pub(crate) use permit::{Admission, Judged};
pub(crate) use permit::{Guard, Raw};
pub use state::{BreakerMetrics, OnTransition, State, Transition, Tripped};
#[cfg(feature = "alloc")]
pub use window::Heap;
use window::{Counts, Window, MAX_WINDOW};
pub use window::{Inline, WindowStorage};
use word::{AtomicStamp, CLOSED, DISABLED, FORCED_OPEN};
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

/// A breaker whose time window ([`BreakerWindow::Time`]) keeps up to `B`
/// buckets inside it, sized at compile time: no heap, a `static` on a
/// microcontroller. 12 bytes a bucket. Its count-window capacity is 1 (a
/// count-window config is refused unless its `window_size` is 1); for a
/// window of either kind read from config at run time, a [`HeapBreaker`].
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::breaker::{State, TimeBreaker};
/// use watertight::clock::ManualClock;
/// use watertight::BreakerConfig;
///
/// // 20 calls in the last 30 s (six buckets of 5 s), 50 % failing, trip.
/// let config = BreakerConfig::builder()
///     .time_window(Duration::from_secs(30), 6)
///     .minimum_calls(20)
///     .build()
///     .unwrap();
/// let clock = ManualClock::new();
/// let payments: TimeBreaker<_, 6> = TimeBreaker::new("payments", config, &clock);
/// for i in 0..20 {
///     clock.advance(Duration::from_secs(1));
///     let p = payments.try_acquire().unwrap();
///     if i % 2 == 0 { p.failure() } else { p.success() }
/// }
/// assert_eq!(payments.state(), State::Open);
/// ```
pub type TimeBreaker<C, const B: usize, H = ()> = CircuitBreaker<C, 1, H, Inline<1, B>>;

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
/// lost, and the probe cap holds (`tests/loom/breaker.rs`).
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

impl<C, const N: usize, const B: usize> CircuitBreaker<C, N, (), Inline<N, B>> {
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

impl<C, const N: usize, H, const B: usize> CircuitBreaker<C, N, H, Inline<N, B>> {
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
            if config.slots_needed() > N {
                panic!("breaker config: window_size is above the breaker's capacity N");
            }
            if config.buckets_needed() > B {
                panic!("breaker config: window_buckets is above the breaker's bucket capacity B");
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
        if config.slots_needed() > N {
            return Err(BreakerConfigError::WindowAboveCapacity {
                window_size: config.window_size as usize,
                capacity: N,
            });
        }
        let capacity = <W as window::sealed::Slots>::BUCKETS;
        if config.buckets_needed() > capacity {
            return Err(BreakerConfigError::BucketsAboveCapacity {
                buckets: config.buckets_needed(),
                capacity,
            });
        }
        let window = Window::for_window(config.slots_needed(), config.buckets_needed());
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
    pub fn call<F, T, E>(&self, call: F) -> Call<'_, Self, F, ErrIsFailure>
    where
        F: Future<Output = Result<T, E>>,
    {
        Call::new(self, call, ErrIsFailure)
    }

    /// Runs `call` if the breaker lets it through, and records what
    /// `classify` makes of its result.
    ///
    /// `classify` (a [`Classify`]: a closure `Fn(&Result<T, E>) -> Outcome`,
    /// or a type of its own) sees the call's result and says whether the
    /// system answered ([`Outcome::Success`]: an HTTP 404 is an answer),
    /// failed ([`Outcome::Failure`]: a 503), or said nothing
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
        K: Fn(&Result<T, E>) -> Outcome,
    {
        Call::new(self, call, classify)
    }

    /// Like [`call_with`](Self::call_with), with a classifier of any
    /// [`Classify`] type: one of its own, named in a struct or shared
    /// between breakers, or [`ErrIsFailure`].
    ///
    /// (`call_with` takes closures only, so that a closure's argument needs
    /// no type: a closure passed where any `Classify` is taken must spell
    /// out `|r: &Result<T, E>|`.)
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
    /// use watertight::breaker::Classify;
    ///
    /// /// A 5xx is a failure; any other status is an answer.
    /// struct ServerErrors;
    ///
    /// impl<E> Classify<u16, E> for ServerErrors {
    ///     fn classify(&self, result: &Result<u16, E>) -> Outcome {
    ///         match result {
    ///             Ok(status) if *status < 500 => Outcome::Success,
    ///             _ => Outcome::Failure,
    ///         }
    ///     }
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let status = b.call_classified(async { Ok::<u16, ()>(503) }, ServerErrors).await;
    /// assert_eq!(status, Ok(503));
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn call_classified<F, T, E, K>(&self, call: F, classify: K) -> Call<'_, Self, F, K>
    where
        F: Future<Output = Result<T, E>>,
        K: Classify<T, E>,
    {
        Call::new(self, call, classify)
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
        let rated = self.config.kind() != config::KIND_CONSECUTIVE;
        let counts = if fresh {
            Counts::default()
        } else if <W as window::sealed::Slots>::BUCKETS > 0
            && self.config.kind() == config::KIND_TIME
        {
            self.window
                .time_counts(self.now().as_nanos(), self.config.time_spec())
        } else if !rated {
            let run = self.window.run();
            Counts {
                calls: run,
                failures: run,
                slow: 0,
            }
        } else {
            self.window.counts(self.config.window_size as usize)
        };
        let rate = |n: usize| {
            if rated && counts.calls >= self.config.minimum_calls as usize && counts.calls > 0 {
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
        self.close();
    }
}

impl<C, const N: usize, H, W: WindowStorage> fmt::Debug for CircuitBreaker<C, N, H, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.load(Acquire);
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name)
            .field("state", &State::from_bits(word::state(s)))
            .field("generation", &word::generation(s))
            .field("capacity", &self.window.capacity())
            .field("config", &self.config)
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
