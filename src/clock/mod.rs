//! Time, as the primitives see it: a [`Clock`] that reads a monotonic
//! [`Instant`], and a [`Timer`] that can also wake a task at one.
//!
//! Every time-based type in this crate is generic over its clock instead of
//! reading a global one. That costs a type parameter, and buys three things:
//! tests run on [`ManualClock`] with no real sleeps and exact answers; the same
//! bulkhead runs on tokio, smol, async-std or embassy by swapping a zero-sized
//! clock type; and nothing needs to be linked in by a `#[global]` hook (the
//! opposite trade from embassy-time's driver, which suits a single-executor
//! firmware but not a library used on several runtimes in one process).
//!
//! | clock | feature | where its time comes from | [`Timer`] |
//! |---|---|---|---|
//! | [`ManualClock`] | always | a counter moved by [`ManualClock::advance`] | `&ManualClock`, `Arc<ManualClock>` with `alloc` |
//! | `StdClock` | `std` | `std::time::Instant` | no (no runtime to wake tasks) |
//! | `CoarseClock` | `std` | `StdClock`'s time, stored every 1 ms (configurable) by one updater thread; a read is one relaxed atomic load | no |
//! | `TokioClock` | `tokio` | `tokio::time::Instant` (honours paused time) | yes |
//! | `QuantaClock` | `quanta` | the CPU's time-stamp counter, scaled (quanta; the OS clock where the counter is not invariant) | no |
//! | `AsyncIoClock` | `async-io` | `std::time::Instant`, `async_io::Timer` | yes |
//! | `EmbassyClock` | `embassy` | `embassy_time::Instant` | yes |

use core::fmt;
use core::future::Future;
use core::ops::{Add, Sub};
use core::time::Duration;

mod manual;
pub(crate) mod nanos;
pub use manual::ManualClock;
#[cfg(feature = "alloc")]
pub use manual::ManualSleep;

#[cfg(feature = "std")]
mod std_clock;
#[cfg(feature = "std")]
pub use std_clock::StdClock;

// A thread and process-wide statics: not modelled under loom.
#[cfg(all(feature = "std", not(loom)))]
mod coarse;
#[cfg(all(feature = "std", not(loom)))]
pub use coarse::{CoarseClock, CoarseClockError};

#[cfg(all(feature = "quanta", not(loom)))]
mod quanta_clock;
#[cfg(all(feature = "quanta", not(loom)))]
pub use quanta_clock::QuantaClock;

#[cfg(feature = "tokio")]
mod tokio_clock;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;

#[cfg(feature = "async-io")]
mod async_io_clock;
#[cfg(feature = "async-io")]
pub use async_io_clock::{AsyncIoClock, AsyncIoSleep};

#[cfg(feature = "embassy")]
mod embassy_clock;
#[cfg(feature = "embassy")]
pub use embassy_clock::EmbassyClock;

/// A point in time on one [`Clock`]: whole nanoseconds since that clock's origin.
///
/// Instants of different clocks are not comparable; each clock fixes its own
/// origin (the first read in the process for the std-based clocks, zero
/// for a new [`ManualClock`], boot for embassy). A `u64` of nanoseconds spans 584 years,
/// so arithmetic saturates rather than wraps, and never panics.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::Instant;
///
/// let t = Instant::from_nanos(1_500);
/// assert_eq!(t + Duration::from_nanos(500), Instant::from_nanos(2_000));
/// assert_eq!(t.saturating_duration_since(Instant::from_nanos(2_000)), Duration::ZERO);
/// assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant(0);
    /// The farthest representable instant; deadlines saturate here ("never").
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the origin.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    ///
    /// let t = Instant::from_nanos(2_500_000);
    /// assert_eq!(t.since_origin(), Duration::from_micros(2_500));
    /// assert_eq!(Instant::from_nanos(0), Instant::ZERO);
    /// ```
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// Nanoseconds since the origin.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_micros(3));
    /// assert_eq!(clock.now().as_nanos(), 3_000);
    /// ```
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time elapsed since the origin.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(250));
    /// assert_eq!(clock.now().since_origin(), Duration::from_millis(250));
    /// ```
    pub const fn since_origin(self) -> Duration {
        nanos::duration(self.0)
    }

    /// `self + d`, or `None` past [`Instant::MAX`] (the panic-free form of `+`
    /// for callers who want to know).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    ///
    /// let now = Instant::from_nanos(1_000);
    /// assert_eq!(now.checked_add(Duration::from_nanos(500)), Some(Instant::from_nanos(1_500)));
    /// // A timeout too long to represent: no deadline rather than a wrong one.
    /// assert_eq!(now.checked_add(Duration::MAX), None);
    /// ```
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        match nanos::checked_from(d) {
            Some(nanos) => self.0.checked_add(nanos).map(Instant),
            None => None,
        }
    }

    /// `self + d`, stopping at [`Instant::MAX`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    ///
    /// let now = Instant::from_nanos(1_000);
    /// assert_eq!(now.saturating_add(Duration::from_nanos(24)), Instant::from_nanos(1_024));
    /// // An unbounded wait becomes the "never" deadline.
    /// assert_eq!(now.saturating_add(Duration::MAX), Instant::MAX);
    /// ```
    pub fn saturating_add(self, d: Duration) -> Instant {
        self.checked_add(d).unwrap_or(Instant::MAX)
    }

    /// `self - d`, stopping at [`Instant::ZERO`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    ///
    /// // The start of a 10 s window ending now.
    /// let now = Instant::from_nanos(15_000_000_000);
    /// let window = Duration::from_secs(10);
    /// assert_eq!(now.saturating_sub(window), Instant::from_nanos(5_000_000_000));
    /// // Early in the clock's life the window starts at the origin.
    /// assert_eq!(Instant::from_nanos(3).saturating_sub(window), Instant::ZERO);
    /// ```
    pub fn saturating_sub(self, d: Duration) -> Instant {
        let nanos = nanos::saturating_from(d);
        Instant(self.0.saturating_sub(nanos))
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let start = clock.now();
    /// clock.advance(Duration::from_millis(40));
    /// let end = clock.now();
    /// assert_eq!(end.saturating_duration_since(start), Duration::from_millis(40));
    /// assert_eq!(start.saturating_duration_since(end), Duration::ZERO);
    /// ```
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        nanos::duration(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`]; never panics.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::ZERO`]; never panics.
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero; never panics.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({:?})", self.since_origin())
    }
}

/// A monotonic source of [`Instant`]s.
///
/// # Contract for implementors
///
/// - `now` **must** be monotonic: a later call on the same clock (from any
///   thread) never returns an earlier instant than an earlier call.
/// - `now` **must not** fail or panic, and must not block.
/// - Instants count nanoseconds from an origin fixed for the clock's whole
///   life; they must not overflow in the clock's lifetime (584 years of `u64`).
/// - The clock may tick coarser than a nanosecond (embassy's default tick is
///   1 µs); a deadline is then reached at the first tick at or after it.
///
/// Consumers rely on nothing else: no wall-clock meaning, no comparison across
/// clocks.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, Instant, ManualClock};
///
/// fn age<C: Clock>(clock: &C, since: Instant) -> Duration {
///     clock.now() - since
/// }
///
/// let clock = ManualClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_millis(30));
/// assert_eq!(age(&clock, start), Duration::from_millis(30));
/// ```
pub trait Clock {
    /// The current instant.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, Instant, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// assert_eq!(clock.now(), Instant::ZERO);
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(clock.now(), Instant::ZERO + Duration::from_secs(2));
    /// ```
    fn now(&self) -> Instant;

    /// Whether [`now`](Clock::now) costs about one memory load, as
    /// [`CoarseClock`]'s and [`ManualClock`]'s do. A breaker inlines its
    /// clock reads (slow-call timing) for a clock that says so, and calls
    /// the others' out of line: on a microcontroller
    /// an inlined read costs flash at every call site, and on a server a
    /// read of tens of nanoseconds gains nothing from it, while the code
    /// around it loses registers. Defaults to `false`. It changes speed and
    /// code size only, never what is read.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::{Clock, CoarseClock, ManualClock, StdClock};
    ///
    /// assert!(ManualClock::CHEAP_NOW && CoarseClock::CHEAP_NOW);
    /// assert!(!StdClock::CHEAP_NOW);
    /// // References and `Arc`s say what the clock they reach says.
    /// assert!(<&CoarseClock>::CHEAP_NOW && <Arc<ManualClock>>::CHEAP_NOW);
    /// assert!(!<&StdClock>::CHEAP_NOW);
    /// ```
    const CHEAP_NOW: bool = false;
}

/// A [`Clock`] that can also wake a task at an instant.
///
/// The returned [`Sleep`](Timer::Sleep) is a named type so that futures that
/// hold one (such as [`AcquireUntil`](crate::futures::AcquireUntil)) can be
/// named and stored.
///
/// # Contract for implementors
///
/// - The sleep completes at or after `deadline` by this clock's `now()`, never
///   before; a deadline already passed completes on the first poll.
/// - Dropping the sleep before it completes is allowed at any time and cancels
///   the wake-up.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, ManualClock, Timer};
///
/// let clock = ManualClock::new();
/// let timer = &clock;
/// let sleep = timer.sleep_until(timer.now() + Duration::from_millis(5));
/// clock.advance(Duration::from_millis(5));
/// futures_lite::future::block_on(sleep); // already due: completes at once
/// ```
///
/// # Which clocks can wait
///
/// `TokioClock` (feature `tokio`), `AsyncIoClock` (`async-io`: smol,
/// async-std), `EmbassyClock` (`embassy`), and `&ManualClock` or
/// `Arc<ManualClock>` (`alloc`) are timers. `StdClock` and `CoarseClock`
/// only read the time: waking a task needs a runtime's timer, so they cannot
/// be given to anything that waits, and the compiler says so, naming the
/// clocks above:
///
#[cfg_attr(feature = "std", doc = "```compile_fail,E0277")]
#[cfg_attr(not(feature = "std"), doc = "```ignore")]
/// use core::time::Duration;
/// use watertight::clock::StdClock;
///
/// // error[E0277]: `&StdClock` cannot wait: it is a `Clock` but not a `Timer`
/// let _ = watertight::deadline::timeout(&StdClock, Duration::from_millis(5), async {});
/// ```
///
/// The same call on a timer compiles:
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let _ = watertight::deadline::timeout(&clock, Duration::from_millis(5), async {});
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot wait: it is a `Clock` but not a `Timer`",
    label = "this clock reads the time but cannot wake a task",
    note = "waiting (a bulkhead slot wait, a timeout, a policy) needs a `Timer`: `TokioClock` (feature `tokio`), `AsyncIoClock` (`async-io`, for smol and async-std), `EmbassyClock` (`embassy`), or `&ManualClock` / `Arc<ManualClock>` in tests",
    note = "a `Clock` such as `StdClock` or `CoarseClock` only reads the time: waking a task needs a runtime's timer"
)]
pub trait Timer: Clock {
    /// The future returned by [`sleep_until`](Timer::sleep_until).
    type Sleep: Future<Output = ()>;

    /// A future that completes once `now() >= deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use futures_lite::future::{block_on, poll_once};
    /// use watertight::clock::{Clock, ManualClock, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let timer = &clock;
    /// let sleep = timer.sleep_until(timer.now() + Duration::from_millis(10));
    /// futures_lite::pin!(sleep);
    ///
    /// clock.advance(Duration::from_millis(9));
    /// assert!(block_on(poll_once(&mut sleep)).is_none()); // 1 ms early
    /// clock.advance(Duration::from_millis(1));
    /// assert!(block_on(poll_once(&mut sleep)).is_some()); // due
    /// ```
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> Instant {
        (**self).now()
    }
    const CHEAP_NOW: bool = C::CHEAP_NOW;
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    #[inline]
    fn now(&self) -> Instant {
        (**self).now()
    }
    const CHEAP_NOW: bool = C::CHEAP_NOW;
}
