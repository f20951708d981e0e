//! `CoarseClock`: one relaxed atomic load per read, refreshed by one updater
//! thread shared by the whole process.

use core::fmt;
use core::time::Duration;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use super::{Clock, Instant, StdClock};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// The time the updater last stored: nanoseconds on `StdClock`'s origin.
static NOW: AtomicU64 = AtomicU64::new(0);
/// Set to ask the updater to exit.
static STOP: AtomicBool = AtomicBool::new(false);
/// Who holds the updater: handles alive, its resolution, its thread.
static STATE: Mutex<Updater> = Mutex::new(Updater {
    handles: 0,
    resolution: CoarseClock::DEFAULT_RESOLUTION,
    thread: None,
});

/// The updater thread's name (at most 15 bytes, so Linux shows it whole).
const THREAD_NAME: &str = "wt-coarse-clock";

struct Updater {
    handles: usize,
    resolution: Duration,
    thread: Option<JoinHandle<()>>,
}

fn state() -> std::sync::MutexGuard<'static, Updater> {
    // Nothing that can panic runs with the lock held; take it anyway.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stores the current `StdClock` time, never moving `NOW` back.
fn refresh() {
    NOW.fetch_max(StdClock.now().as_nanos(), Ordering::Relaxed);
}

/// Why [`CoarseClock::with_resolution`] gave no clock.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{CoarseClock, CoarseClockError};
///
/// assert_eq!(
///     CoarseClock::with_resolution(Duration::ZERO).unwrap_err(),
///     CoarseClockError::BadResolution(Duration::ZERO),
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoarseClockError {
    /// The resolution is zero or above [`CoarseClock::MAX_RESOLUTION`].
    BadResolution(Duration),
    /// The process's updater already runs at another resolution (given):
    /// one updater serves every `CoarseClock`, so all handles alive at once
    /// share one resolution.
    OtherResolution(Duration),
    /// The updater thread could not be started.
    Spawn,
}

impl fmt::Display for CoarseClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoarseClockError::BadResolution(d) => write!(
                f,
                "coarse clock resolution {d:?} is not in (0, {:?}]",
                CoarseClock::MAX_RESOLUTION
            ),
            CoarseClockError::OtherResolution(d) => {
                write!(f, "the coarse clock's updater already runs at {d:?}")
            }
            CoarseClockError::Spawn => {
                f.write_str("the coarse clock's updater thread did not start")
            }
        }
    }
}

impl core::error::Error for CoarseClockError {}

/// A [`Clock`] whose `now()` is one relaxed atomic load: the time an updater
/// thread stores every resolution (1 ms by default). For slow-call
/// thresholds of milliseconds to seconds, where two `StdClock` reads per
/// call would cost more than the call's bookkeeping.
///
/// # The updater
///
/// One thread per process, named `wt-coarse-clock`, started by the first
/// handle ([`CoarseClock::new`] or [`with_resolution`](CoarseClock::with_resolution))
/// and shared by every handle, clones included. It wakes every resolution
/// and stores `StdClock::now()`. When the last handle is dropped the updater
/// is told to stop and that drop joins it (a wake-up and an exit, not a
/// resolution's wait), so no thread is left; a later handle starts a new
/// one. The resolution is fixed while the updater runs:
/// `with_resolution` of another value fails with
/// [`CoarseClockError::OtherResolution`] (and `new` shares whatever runs).
///
/// It is a plain thread and an atomic rather than `quanta`'s `Upkeep` and
/// `Clock::recent` (the same design on a TSC-based time), picked by
/// measurement. Three runs of `cargo bench --bench breaker -- slow-timing
/// --warm-up-time 1 --measurement-time 2` on a 2-core x86_64 VM put
/// quanta's `Clock::recent()` at 2.4–3.1× `CoarseClock::now()` (an
/// out-of-line call that checks for quanta's mock clock before its load;
/// `quanta::Instant::recent()` 1.8–2.2×), and the breaker timed on a clock
/// reading it at 1.09–1.41× the same breaker on this one (1.74× in a later
/// full run, both reads inlined by the breaker: [`Clock::CHEAP_NOW`]). Starting, in a
/// fresh process, took a median 0.13 ms from `new` to the first fresh
/// reading, against 0.76 ms for `quanta::Clock::new` (its TSC calibration,
/// 0.65 ms) and `Upkeep::start`; the last drop joined in a median 0.04 ms,
/// quanta's handle in 0.48 ms (its thread sleeps out the interval). The
/// guarantees decide it. quanta's time is the TSC scaled by that
/// calibration, and drifted from `CLOCK_MONOTONIC` (what `StdClock` reads
/// on Linux) by 18–26 ppm on that VM: its recent time read 0.5 ms
/// *ahead* of a fresh `CLOCK_MONOTONIC` read after 20 s, so it can neither
/// share `StdClock`'s origin nor promise never to be ahead. Its
/// `Clock::now()` went back by up to 6 µs across threads there. Its
/// `Clock::recent()` is 0 until an `Upkeep` runs, freezes for good when the
/// one `Handle` is dropped, and `quanta::set_recent` lets any code in the
/// process move it. And it would add four crates (crossbeam-utils,
/// once_cell, raw-cpuid, bitflags). This clock needs no calibration and no
/// dependency, and works wherever `std` does.
///
/// # Guarantees
///
/// - **Shares `StdClock`'s origin**: a reading is a `StdClock` instant
///   (taken by the updater), comparable with `StdClock::now()`.
/// - **Monotonic**, across threads: the stored time never moves back.
/// - **Never ahead** of `StdClock::now()` read after it.
/// - **Behind by at most the resolution plus the updater's scheduling
///   delay** (a loaded machine can add milliseconds).
/// - **When the updater is starved, readings freeze** until it runs again.
///   A duration measured on this clock (end reading minus start reading)
///   is the real one minus the end reading's lag plus the start reading's:
///   a call during which the updater is starved reads short (zero if it is
///   starved throughout), so a slow call may be classified fast; a call
///   reads long by at most the start reading's lag (one resolution plus the
///   scheduling delay), so with a slow-call threshold well above that a
///   fast call is never classified slow. Durations are exact only to about
///   a resolution: use it for thresholds of many resolutions (the
///   breaker's `slow_call_duration` of seconds), `StdClock` below.
///
/// If the thread cannot be started, `new` gives a clock that reads
/// `StdClock` directly (same origin, every guarantee above, the cost of a
/// `StdClock` read). It is not a [`Timer`](super::Timer): it cannot wake a
/// task.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, CoarseClock, StdClock};
/// use watertight::{BreakerConfig, CircuitBreaker};
///
/// let clock = CoarseClock::new();
/// let a = clock.now();
/// assert!(a <= StdClock.now(), "never ahead of the real clock");
/// assert!(clock.now() >= a);
///
/// // A breaker timing calls against a threshold of seconds.
/// let config = BreakerConfig::builder()
///     .slow_call_duration(Duration::from_secs(2))
///     .build()
///     .unwrap();
/// let breaker: CircuitBreaker<_, 64> = CircuitBreaker::new("db", config, clock.clone());
/// breaker.try_acquire().unwrap().success();
/// assert_eq!(breaker.metrics().slow_calls, 0);
/// ```
pub struct CoarseClock {
    /// Reads `StdClock` itself: the updater could not be started.
    direct: bool,
    resolution: Duration,
}

impl CoarseClock {
    /// The resolution of [`CoarseClock::new`]'s updater.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::CoarseClock;
    ///
    /// assert_eq!(CoarseClock::DEFAULT_RESOLUTION, Duration::from_millis(1));
    /// ```
    pub const DEFAULT_RESOLUTION: Duration = Duration::from_millis(1);

    /// The coarsest resolution accepted.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::CoarseClock;
    ///
    /// assert_eq!(CoarseClock::MAX_RESOLUTION, Duration::from_secs(1));
    /// ```
    pub const MAX_RESOLUTION: Duration = Duration::from_secs(1);

    /// A handle on the process's updater, starting it at
    /// [`DEFAULT_RESOLUTION`](Self::DEFAULT_RESOLUTION) if none runs, or
    /// sharing the one that does, at its resolution. Never fails: without a
    /// thread it reads `StdClock` directly.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, CoarseClock};
    ///
    /// let clock = CoarseClock::new();
    /// let t = clock.now();
    /// assert!(clock.now() >= t);
    /// ```
    pub fn new() -> Self {
        let mut s = state();
        let resolution = if s.handles > 0 {
            s.resolution
        } else {
            Self::DEFAULT_RESOLUTION
        };
        match start(&mut s, resolution) {
            Ok(clock) => clock,
            Err(_) => CoarseClock {
                direct: true,
                resolution: Duration::ZERO,
            },
        }
    }

    /// A handle on an updater refreshing every `resolution`: the running
    /// one if it has that resolution, else a new one if none runs.
    ///
    /// # Errors
    ///
    /// [`BadResolution`](CoarseClockError::BadResolution) for zero or more
    /// than [`MAX_RESOLUTION`](Self::MAX_RESOLUTION);
    /// [`OtherResolution`](CoarseClockError::OtherResolution) if the
    /// updater runs at another resolution (handles hold it: it changes once
    /// they are all dropped); [`Spawn`](CoarseClockError::Spawn) if the
    /// thread did not start.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{CoarseClock, CoarseClockError};
    ///
    /// let clock = CoarseClock::with_resolution(Duration::from_millis(5)).unwrap();
    /// assert_eq!(clock.resolution(), Duration::from_millis(5));
    /// // While it lives, the process's updater runs at 5 ms.
    /// assert_eq!(
    ///     CoarseClock::with_resolution(Duration::from_millis(2)).unwrap_err(),
    ///     CoarseClockError::OtherResolution(Duration::from_millis(5)),
    /// );
    /// assert_eq!(CoarseClock::new().resolution(), Duration::from_millis(5));
    /// ```
    pub fn with_resolution(resolution: Duration) -> Result<Self, CoarseClockError> {
        if resolution.is_zero() || resolution > Self::MAX_RESOLUTION {
            return Err(CoarseClockError::BadResolution(resolution));
        }
        start(&mut state(), resolution)
    }

    /// How often this clock's updater refreshes; zero if it reads
    /// `StdClock` directly.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::CoarseClock;
    ///
    /// let clock = CoarseClock::new();
    /// assert!(clock.resolution() <= CoarseClock::MAX_RESOLUTION);
    /// ```
    pub fn resolution(&self) -> Duration {
        self.resolution
    }

    /// Whether the process's updater thread runs now (some handle lives).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::CoarseClock;
    ///
    /// let clock = CoarseClock::new();
    /// assert!(CoarseClock::updater_running());
    /// drop(clock); // the last handle: the updater is joined
    /// # // Other doctests run in other processes, so nothing else holds one.
    /// assert!(!CoarseClock::updater_running());
    /// ```
    pub fn updater_running() -> bool {
        state().thread.is_some()
    }
}

/// Joins the running updater at `resolution`, or starts one.
fn start(s: &mut Updater, resolution: Duration) -> Result<CoarseClock, CoarseClockError> {
    if s.thread.is_none() {
        // Fresh time before the first read, so a new clock is not stale.
        refresh();
        STOP.store(false, Ordering::Relaxed);
        let (started, running) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                // Named and running: the handle returns after this.
                let _ = started.send(());
                while !STOP.load(Ordering::Acquire) {
                    refresh();
                    // Spurious wake-ups only refresh early.
                    std::thread::park_timeout(resolution);
                }
            })
            .map_err(|_| CoarseClockError::Spawn)?;
        // Fails only if the thread died before sending, which it cannot.
        let _ = running.recv();
        s.thread = Some(thread);
        s.resolution = resolution;
    } else if s.resolution != resolution {
        return Err(CoarseClockError::OtherResolution(s.resolution));
    }
    s.handles += 1;
    Ok(CoarseClock {
        direct: false,
        resolution,
    })
}

impl Default for CoarseClock {
    /// [`CoarseClock::new`].
    fn default() -> Self {
        CoarseClock::new()
    }
}

impl Clone for CoarseClock {
    /// Another handle on the same updater.
    fn clone(&self) -> Self {
        if !self.direct {
            state().handles += 1;
        }
        CoarseClock {
            direct: self.direct,
            resolution: self.resolution,
        }
    }
}

impl Drop for CoarseClock {
    /// The last handle stops the updater and joins its thread.
    fn drop(&mut self) {
        if self.direct {
            return;
        }
        let mut s = state();
        s.handles -= 1;
        if s.handles == 0 {
            if let Some(thread) = s.thread.take() {
                STOP.store(true, Ordering::Release);
                thread.thread().unpark();
                // The updater runs no code that panics; a panic would be
                // its own, and the clock stays readable (frozen) anyway.
                let _ = thread.join();
            }
        }
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("resolution", &self.resolution)
            .field("direct", &self.direct)
            .finish()
    }
}

/// The fallback's read, out of line: inlined, `StdClock`'s read took
/// registers from the code around every coarse read.
#[cold]
#[inline(never)]
fn direct_now() -> Instant {
    StdClock.now()
}

impl Clock for CoarseClock {
    /// The time the updater last stored (one relaxed load).
    #[inline]
    fn now(&self) -> Instant {
        if self.direct {
            return direct_now();
        }
        Instant::from_nanos(NOW.load(Ordering::Relaxed))
    }
    /// One relaxed load (and a test of the fallback flag).
    const CHEAP_NOW: bool = true;
}
