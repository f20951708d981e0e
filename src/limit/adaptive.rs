//! [`AdaptiveBulkhead`]: a bulkhead whose capacity a limit algorithm moves.

use core::fmt;
use core::time::Duration;

use super::samples::Samples;
use super::{LimitAlgorithm, Signal, Window};
use crate::bulkhead::{AcquireError, Bulkhead, Permit};
use crate::clock::{Clock, Instant, Timer};
use crate::partition::PartitionedBulkhead;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// A [`Bulkhead`] whose capacity a [`LimitAlgorithm`] sets, from the
/// round-trip times and outcomes of the calls it lets through.
///
/// Each call takes an [`AdaptivePermit`] and, when it finishes, says how it
/// went with [`AdaptivePermit::record`]: the permit measures the round trip
/// on the bulkhead's clock, adds it to the open *window* and gives the slot
/// back. The first call to finish after the window has lasted its length
/// (1 s by default, Netflix's `WindowedLimit` default) closes it: if it
/// holds at least the minimum number of samples (10, the same source's),
/// the algorithm reads it and the bulkhead is [resized](Bulkhead::resize)
/// to the algorithm's answer; a window with fewer is dropped, as
/// `WindowedLimit` drops one, so that a quiet period cannot set the limit
/// from a handful of calls. Where calls are too few or too irregular to
/// close windows on time, [`tick`](Self::tick) closes a due window from a
/// timer the caller drives.
///
/// | what | cost |
/// |---|---|
/// | acquire, release | the bulkhead's own: lock-free, no allocation |
/// | [`record`](AdaptivePermit::record) | one clock read, three relaxed atomic adds at most |
/// | closing a window | a flag taken with one compare-and-swap (a caller that finds it taken does not wait: someone else is closing), the algorithm's `update`, a `resize` if the limit changed |
///
/// A permit dropped without a verdict (a cancelled call, a panic) gives its
/// slot back and records nothing: cancellation says nothing about the
/// system (concurrency-limits stopped counting cancelled gRPC calls as
/// timeouts for the same reason).
///
/// The limit stays in `[min_limit, max_limit]` of the algorithm (and in
/// `[1, Bulkhead::MAX_PERMITS]` whatever the algorithm answers). A shrink
/// takes effect as permits come back, as for any resize: no permit already
/// out is revoked, and none is granted until in flight is below the new
/// limit.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
///
/// let clock = ManualClock::new();
/// let aimd = Aimd::builder().initial_limit(4).min_limit(1).build().unwrap();
/// let search = AdaptiveBulkhead::new("search", aimd, &clock);
/// assert_eq!(search.limit(), 4);
///
/// // A window of quick calls with the limit in use: one more.
/// for _ in 0..10 {
///     let calls: Vec<_> = (0..2).map(|_| search.try_acquire().unwrap()).collect();
///     clock.advance(Duration::from_millis(20));
///     for call in calls {
///         call.record(Signal::Success);
///     }
///     clock.advance(Duration::from_millis(80));
/// }
/// let last = search.try_acquire().unwrap();
/// assert_eq!(last.record(Signal::Success).map(|c| c.to), Some(5));
/// assert_eq!(search.limit(), 5);
/// ```
///
/// # Memory ordering
///
/// The algorithm is reached only by the closer, which holds the closing
/// flag: taken with an `Acquire` compare-and-swap and given back with a
/// `Release` store, so each closer sees everything the previous one wrote.
/// The samples are relaxed counters (each is a tally, read by the closer's
/// swap); the limit is published through the bulkhead's own state word.
pub struct AdaptiveBulkhead<C, A> {
    bulkhead: Bulkhead<C>,
    steer: AdaptiveLimit<A>,
}

/// A limit algorithm and its windows, steering a [`Bulkhead`] it does not
/// own: the part of an [`AdaptiveBulkhead`] that is not the bulkhead, for
/// a bulkhead that lives elsewhere — a [`Policy`](crate::policy::Policy)'s,
/// or a [`PartitionedBulkhead`], whose total it moves, shedding the least
/// important class first (see [`Resizable`]).
///
/// Each call through that bulkhead reports how it went with
/// [`record`](Self::record), after its slot is back; the first report
/// after a window's end closes it, and the bulkhead is resized to the
/// algorithm's answer. The windows, the samples, the closing flag and the
/// guarantees are those of [`AdaptiveBulkhead`]. The round trip is what the
/// caller measures from `started`: for a policy's call, that includes its
/// wait for a slot (at most the policy's `max_wait`).
///
/// # Examples
///
/// A policy whose bulkhead the algorithm moves:
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, ManualClock};
/// use watertight::limit::{AdaptiveLimit, Aimd, LimitChange, Signal};
/// use watertight::policy::{Policy, PolicyConfig};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let config = PolicyConfig::builder(10).build().unwrap();
/// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
/// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
/// let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
///
/// let started = clock.now();
/// let r = search.call(|| async { Err::<(), u16>(503) }).await;
/// let signal = if r.is_ok() { Signal::Success } else { Signal::Dropped };
/// let change = limit.record(search.bulkhead(), started, signal);
/// assert_eq!(change, Some(LimitChange { from: 10, to: 9 }));
/// assert_eq!(search.bulkhead().capacity(), 9);
/// # });
/// ```
pub struct AdaptiveLimit<A> {
    samples: Samples,
    window_nanos: u64,
    min_samples: usize,
    closing: AtomicBool,
    algorithm: UnsafeCell<A>,
    initial: usize,
    windows: AtomicUsize,
    changes: AtomicUsize,
    last: LastWindow,
}

/// The last window the algorithm read, for [`AdaptiveBulkhead::last_window`]
/// and the metrics: written by the closer, read by anyone (relaxed: a
/// snapshot of separate values, like the bulkhead's metrics).
struct LastWindow {
    successes: AtomicUsize,
    avg_rtt_us: AtomicU64,
    max_in_flight: AtomicUsize,
    failed: AtomicUsize,
    dropped: AtomicUsize,
    timed_out: AtomicUsize,
}

// SAFETY: the algorithm is reached only through `close`, by the one caller
// that holds the closing flag, so sharing the limit moves access to `A`
// between threads but never shares it: `A: Send` suffices. The rest is
// atomics. (`AdaptiveBulkhead` is then `Sync` when its `Bulkhead` is.)
unsafe impl<A: Send> Sync for AdaptiveLimit<A> {}

/// The limit before and after a window moved it, from
/// [`AdaptivePermit::record`] and [`AdaptiveBulkhead::tick`].
///
/// # Examples
///
/// ```
/// use watertight::limit::LimitChange;
///
/// let c = LimitChange { from: 20, to: 18 };
/// assert!(c.to < c.from);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitChange {
    /// The limit before.
    pub from: usize,
    /// The limit after.
    pub to: usize,
}

impl<C: Clock, A: LimitAlgorithm> AdaptiveBulkhead<C, A> {
    /// The default window: 1 s (Netflix `WindowedLimit`'s minimum and
    /// maximum window time).
    pub const DEFAULT_WINDOW: Duration = DEFAULT_WINDOW;
    /// The default minimum of samples for a window to count: 10 (Netflix
    /// `WindowedLimit`'s window size).
    pub const DEFAULT_MIN_SAMPLES: usize = DEFAULT_MIN_SAMPLES;

    /// An adaptive bulkhead named `name` starting at the algorithm's
    /// current limit, with windows of [`DEFAULT_WINDOW`](Self::DEFAULT_WINDOW)
    /// and [`DEFAULT_MIN_SAMPLES`](Self::DEFAULT_MIN_SAMPLES).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Gradient2};
    ///
    /// let payments = AdaptiveBulkhead::new("payments", Gradient2::new(), StdClock);
    /// assert_eq!(payments.limit(), 20);
    /// assert_eq!(payments.bulkhead().name(), "payments");
    /// ```
    pub fn new(name: &'static str, algorithm: A, clock: C) -> Self {
        Self::with_window(
            name,
            algorithm,
            Self::DEFAULT_WINDOW,
            Self::DEFAULT_MIN_SAMPLES,
            clock,
        )
    }

    /// Like [`new`](Self::new), with windows of `window` that count only
    /// with at least `min_samples` calls. A zero `window` closes a window at
    /// every call that finishes (with `min_samples` of 0 or 1, the
    /// algorithm then reads every call, as Netflix's algorithms do without
    /// `WindowedLimit`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let modem = AdaptiveBulkhead::with_window(
    ///     "modem",
    ///     Aimd::builder().min_limit(1).initial_limit(2).max_limit(8).build().unwrap(),
    ///     Duration::from_millis(250),
    ///     4,
    ///     StdClock,
    /// );
    /// assert_eq!(modem.limit(), 2);
    /// ```
    pub fn with_window(
        name: &'static str,
        algorithm: A,
        window: Duration,
        min_samples: usize,
        clock: C,
    ) -> Self {
        let steer = AdaptiveLimit::with_window(algorithm, window, min_samples, clock.now());
        AdaptiveBulkhead {
            bulkhead: Bulkhead::new(name, steer.initial, clock),
            steer,
        }
    }
}

impl<A: LimitAlgorithm> AdaptiveLimit<A> {
    /// The algorithm with windows of [`AdaptiveBulkhead::DEFAULT_WINDOW`]
    /// and [`AdaptiveBulkhead::DEFAULT_MIN_SAMPLES`], the first opening at
    /// `now` (on the clock of the bulkhead it will steer).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, StdClock};
    /// use watertight::limit::{AdaptiveLimit, Gradient2};
    ///
    /// let limit = AdaptiveLimit::new(Gradient2::new(), StdClock.now());
    /// assert_eq!(limit.initial_limit(), 20);
    /// ```
    pub fn new(algorithm: A, now: Instant) -> Self {
        Self::with_window(algorithm, DEFAULT_WINDOW, DEFAULT_MIN_SAMPLES, now)
    }

    /// Like [`new`](Self::new), with windows of `window` that count only
    /// with at least `min_samples` calls (see
    /// [`AdaptiveBulkhead::with_window`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    /// use watertight::limit::{AdaptiveLimit, Aimd};
    ///
    /// let limit = AdaptiveLimit::with_window(Aimd::new(), Duration::from_millis(500), 20, Instant::ZERO);
    /// assert_eq!(limit.windows(), 0);
    /// ```
    pub fn with_window(algorithm: A, window: Duration, min_samples: usize, now: Instant) -> Self {
        AdaptiveLimit {
            samples: Samples::new(now.as_nanos()),
            window_nanos: crate::clock::nanos::saturating_from(window),
            min_samples,
            closing: AtomicBool::new(false),
            initial: algorithm.limit().clamp(1, Bulkhead::<()>::MAX_PERMITS),
            algorithm: UnsafeCell::new(algorithm),
            windows: AtomicUsize::new(0),
            changes: AtomicUsize::new(0),
            last: LastWindow {
                successes: AtomicUsize::new(0),
                avg_rtt_us: AtomicU64::new(u64::MAX),
                max_in_flight: AtomicUsize::new(0),
                failed: AtomicUsize::new(0),
                dropped: AtomicUsize::new(0),
                timed_out: AtomicUsize::new(0),
            },
        }
    }

    /// The algorithm's limit when it was handed over (within `[1,
    /// Bulkhead::MAX_PERMITS]`): what to size the steered bulkhead to at
    /// first, as the first window that moves the limit resizes it anyway.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::limit::{AdaptiveLimit, Aimd};
    ///
    /// let aimd = Aimd::builder().initial_limit(42).build().unwrap();
    /// assert_eq!(AdaptiveLimit::new(aimd, Instant::ZERO).initial_limit(), 42);
    /// ```
    pub fn initial_limit(&self) -> usize {
        self.initial
    }

    /// Records a finished call through `bulkhead`, started at `started` (on
    /// the bulkhead's clock), after its slot is back; closes the window if
    /// this is the first report after its end, and resizes `bulkhead` if
    /// the limit moved. Pass the same bulkhead every time: a [`Bulkhead`]
    /// or a [`PartitionedBulkhead`] (see [`Resizable`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveLimit, Aimd, Signal};
    ///
    /// let clock = ManualClock::new();
    /// let db = Bulkhead::new("db", 10, &clock);
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
    /// let started = clock.now();
    /// drop(db.try_acquire().unwrap()); // the call, its slot back
    /// limit.record(&db, started, Signal::Timeout);
    /// assert_eq!(db.capacity(), 9);
    /// ```
    pub fn record<B: Resizable + ?Sized>(
        &self,
        bulkhead: &B,
        started: Instant,
        signal: Signal,
    ) -> Option<LimitChange> {
        // The call's own slot is back: count it in flight.
        self.finish(bulkhead, started, signal, 1, || {})
    }

    /// Closes the open window of `bulkhead`'s limit if it has lasted its
    /// length (see [`AdaptiveBulkhead::tick`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveLimit, Aimd};
    ///
    /// let clock = ManualClock::new();
    /// let db = Bulkhead::new("db", 20, &clock);
    /// let limit = AdaptiveLimit::new(Aimd::new(), clock.now());
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limit.tick(&db), None);
    /// assert_eq!(limit.windows(), 1);
    /// ```
    pub fn tick<B: Resizable + ?Sized>(&self, bulkhead: &B) -> Option<LimitChange> {
        self.close(bulkhead, bulkhead.now(), false)
    }
}

impl<C: Clock, A: LimitAlgorithm> AdaptiveBulkhead<C, A> {
    /// The bulkhead itself, for what does not need a verdict: its counters,
    /// its name, closing it. Its capacity is the limit; resizing it by hand
    /// lasts until the next window closes.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let b = AdaptiveBulkhead::new("db", Aimd::new(), StdClock);
    /// let _call = b.try_acquire().unwrap();
    /// assert_eq!(b.bulkhead().in_flight(), 1);
    /// assert_eq!(b.bulkhead().metrics().accepted, 1);
    /// ```
    pub fn bulkhead(&self) -> &Bulkhead<C> {
        &self.bulkhead
    }

    /// The current limit: the bulkhead's capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// assert_eq!(AdaptiveBulkhead::new("db", Aimd::new(), StdClock).limit(), 20);
    /// ```
    pub fn limit(&self) -> usize {
        self.bulkhead.capacity()
    }

    /// Windows closed so far, counted or dropped for want of samples
    /// (wrapping).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let clock = ManualClock::new();
    /// let b = AdaptiveBulkhead::new("db", Aimd::new(), &clock);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(b.tick(), None); // closed, but empty: no change
    /// assert_eq!(b.windows(), 1);
    /// ```
    pub fn windows(&self) -> usize {
        self.steer.windows()
    }

    /// Windows that changed the limit so far (wrapping).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// assert_eq!(AdaptiveBulkhead::new("db", Aimd::new(), StdClock).limit_changes(), 0);
    /// ```
    pub fn limit_changes(&self) -> usize {
        self.steer.limit_changes()
    }

    /// The last window the algorithm read (windows dropped for want of
    /// samples are not kept); [`Window::EMPTY`] before the first. Each field
    /// is read separately: under load, not one atomic picture.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
    ///
    /// let clock = ManualClock::new();
    /// let b = AdaptiveBulkhead::with_window("db", Aimd::new(), Duration::from_secs(1), 1, &clock);
    /// let call = b.try_acquire().unwrap();
    /// clock.advance(Duration::from_secs(1));
    /// call.record(Signal::Success); // closes the window
    /// let w = b.last_window();
    /// assert_eq!((w.successes, w.avg_rtt, w.max_in_flight), (1, Some(Duration::from_secs(1)), 1));
    /// ```
    pub fn last_window(&self) -> Window {
        self.steer.last_window()
    }

    /// A permit if one is free and nobody waits; never waits.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::try_acquire`]: [`Full`](AcquireError::Full) when the
    /// limit is reached, [`Closed`](AcquireError::Closed) after close.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(1).build().unwrap();
    /// let b = AdaptiveBulkhead::new("db", aimd, StdClock);
    /// let _held = b.try_acquire().unwrap();
    /// assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Full);
    /// ```
    pub fn try_acquire(&self) -> Result<AdaptivePermit<'_, C, A>, AcquireError> {
        let permit = self.bulkhead.try_acquire()?;
        Ok(self.wrap(permit))
    }

    /// Waits at most `max_wait` for a permit. The round trip is measured
    /// from when the permit is granted: the wait is the caller's, not the
    /// system's.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire_timeout`].
    ///
    /// # Cancel safety
    ///
    /// As [`Bulkhead::acquire_timeout`]: dropping the future leaves the
    /// queue, and a permit handed to it goes back.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = AdaptiveBulkhead::new("db", Aimd::new(), &clock);
    /// let call = b.acquire_timeout(Duration::from_millis(50)).await.unwrap();
    /// call.record(Signal::Success);
    /// # });
    /// ```
    pub async fn acquire_timeout(
        &self,
        max_wait: Duration,
    ) -> Result<AdaptivePermit<'_, C, A>, AcquireError>
    where
        C: Timer,
    {
        let permit = self.bulkhead.acquire_timeout(max_wait).await?;
        Ok(self.wrap(permit))
    }

    /// Runs `call` on a permit, if one is free, and records what
    /// `classify` makes of its output (`None`: no verdict, nothing
    /// recorded, as for a call refused before it reached the system).
    ///
    /// One way to give a [`Policy`](crate::policy::Policy)'s calls an adaptive
    /// limit: put the policy's call inside, and the policy's own bulkhead
    /// stays as a fixed ceiling behind it (the other: [`AdaptiveLimit`],
    /// which moves the policy's own bulkhead). A refusal by the policy's
    /// breaker or bulkhead is no verdict; its call timeout is
    /// [`Signal::Timeout`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire): the call is not made.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (or a panic in `call`) gives the slot back and
    /// records nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
    /// use watertight::policy::{Error, ErrorKind, Policy, PolicyConfig};
    ///
    /// // A call whose policy ran out of time is congestion; one the policy
    /// // refused never reached the system: no verdict.
    /// fn signal<T>(r: &Result<T, Error<u16>>) -> Option<Signal> {
    ///     match r {
    ///         Ok(_) => Some(Signal::Success),
    ///         Err(e) => match e.kind() {
    ///             ErrorKind::Call(503) => Some(Signal::Dropped),
    ///             ErrorKind::Call(_) => Some(Signal::Failure),
    ///             ErrorKind::DeadlineExceeded => Some(Signal::Timeout),
    ///             _ => None,
    ///         },
    ///     }
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(50).build().unwrap(); // the ceiling
    /// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let limit = AdaptiveBulkhead::with_window("search", aimd, Duration::ZERO, 1, &clock);
    ///
    /// let r = limit.call(search.call(|| async { Err::<(), u16>(503) }), signal).await;
    /// assert!(r.unwrap().is_err());
    /// assert_eq!(limit.limit(), 9); // the 503 was a drop: 10 × 0.9
    /// # });
    /// ```
    pub async fn call<F, O>(
        &self,
        call: F,
        classify: impl FnOnce(&O) -> Option<Signal>,
    ) -> Result<O, AcquireError>
    where
        F: core::future::Future<Output = O>,
    {
        let permit = self.try_acquire()?;
        let out = call.await;
        if let Some(signal) = classify(&out) {
            permit.record(signal);
        }
        Ok(out)
    }

    /// Closes the open window if it has lasted its length, for callers
    /// whose traffic is too sparse to close windows on time; returns the
    /// change if the limit moved. Call it from a periodic timer (every
    /// window's length is enough). Does nothing if another call is closing
    /// the window right now.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, LimitChange, Signal};
    ///
    /// let clock = ManualClock::new();
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let b = AdaptiveBulkhead::with_window("db", aimd, Duration::from_secs(1), 1, &clock);
    /// b.try_acquire().unwrap().record(Signal::Dropped);
    /// assert_eq!(b.tick(), None); // the window is not over yet
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(b.tick(), Some(LimitChange { from: 10, to: 9 }));
    /// ```
    pub fn tick(&self) -> Option<LimitChange> {
        self.steer.tick(&self.bulkhead)
    }

    fn wrap<'a>(&'a self, permit: Permit<'a, C>) -> AdaptivePermit<'a, C, A> {
        AdaptivePermit {
            permit,
            owner: self,
            started: self.bulkhead.clock().now(),
        }
    }

    /// A finished call: its sample, then `release` gives its slot back,
    /// then the window is closed if due (or full).
    fn finish(
        &self,
        started: Instant,
        signal: Signal,
        release: impl FnOnce(),
    ) -> Option<LimitChange> {
        self.steer
            .finish(&self.bulkhead, started, signal, 0, release)
    }
}

impl<A: LimitAlgorithm> AdaptiveLimit<A> {
    /// Windows closed so far (see [`AdaptiveBulkhead::windows`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::limit::{AdaptiveLimit, Aimd};
    ///
    /// assert_eq!(AdaptiveLimit::new(Aimd::new(), Instant::ZERO).windows(), 0);
    /// ```
    pub fn windows(&self) -> usize {
        self.windows.load(Ordering::Relaxed)
    }

    /// Windows that changed the limit so far (see
    /// [`AdaptiveBulkhead::limit_changes`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::limit::{AdaptiveLimit, Gradient2};
    ///
    /// assert_eq!(AdaptiveLimit::new(Gradient2::new(), Instant::ZERO).limit_changes(), 0);
    /// ```
    pub fn limit_changes(&self) -> usize {
        self.changes.load(Ordering::Relaxed)
    }

    /// The last window the algorithm read (see
    /// [`AdaptiveBulkhead::last_window`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::Instant;
    /// use watertight::limit::{AdaptiveLimit, Aimd, Window};
    ///
    /// assert_eq!(AdaptiveLimit::new(Aimd::new(), Instant::ZERO).last_window(), Window::EMPTY);
    /// ```
    pub fn last_window(&self) -> Window {
        let l = &self.last;
        let rtt = l.avg_rtt_us.load(Ordering::Relaxed);
        Window {
            successes: l.successes.load(Ordering::Relaxed),
            avg_rtt: (rtt != u64::MAX).then(|| Duration::from_micros(rtt)),
            max_in_flight: l.max_in_flight.load(Ordering::Relaxed),
            failed: l.failed.load(Ordering::Relaxed),
            dropped: l.dropped.load(Ordering::Relaxed),
            timed_out: l.timed_out.load(Ordering::Relaxed),
        }
    }

    /// A finished call: its sample (with `in_flight` + `extra` in flight),
    /// then `release` gives its slot back, then the window is closed if due
    /// (or full).
    fn finish<B: Resizable + ?Sized>(
        &self,
        bulkhead: &B,
        started: Instant,
        signal: Signal,
        extra: usize,
        release: impl FnOnce(),
    ) -> Option<LimitChange> {
        let now = bulkhead.now();
        let rtt = now.saturating_duration_since(started);
        let in_flight = bulkhead.in_flight().saturating_add(extra);
        let full = self.samples.record(signal, rtt, in_flight);
        release();
        self.close(bulkhead, now, full)
    }
    /// Closes the window if it is due (or `force`), unless another caller
    /// is closing it.
    fn close<B: Resizable + ?Sized>(
        &self,
        bulkhead: &B,
        now: Instant,
        force: bool,
    ) -> Option<LimitChange> {
        let now = now.as_nanos();
        if !force && !self.samples.due(now, self.window_nanos) {
            return None;
        }
        if self
            .closing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // Given back on every way out, a panicking algorithm included.
        let _flag = Unflag(&self.closing);
        // Checked again: a closer may have closed it since.
        if !force && !self.samples.due(now, self.window_nanos) {
            return None;
        }
        let window = self.samples.take(now);
        self.windows.fetch_add(1, Ordering::Relaxed);
        if window.samples() < self.min_samples {
            return None;
        }
        self.apply(bulkhead, &window)
    }

    fn apply<B: Resizable + ?Sized>(&self, bulkhead: &B, window: &Window) -> Option<LimitChange> {
        let l = &self.last;
        l.successes.store(window.successes, Ordering::Relaxed);
        let rtt = window.avg_rtt.map_or(u64::MAX, |d| {
            crate::clock::nanos::div_1e3(crate::clock::nanos::saturating_from(d)).min(u64::MAX - 1)
        });
        l.avg_rtt_us.store(rtt, Ordering::Relaxed);
        l.max_in_flight
            .store(window.max_in_flight, Ordering::Relaxed);
        l.failed.store(window.failed, Ordering::Relaxed);
        l.dropped.store(window.dropped, Ordering::Relaxed);
        l.timed_out.store(window.timed_out, Ordering::Relaxed);
        // SAFETY: the closing flag is held (see `close`), so no other
        // reference to the algorithm exists.
        let next = self.algorithm.with_mut(|a| unsafe { (*a).update(window) });
        let (min, max) = bulkhead.capacity_range();
        let to = next.clamp(min, max);
        let from = bulkhead.capacity();
        if to == from {
            return None;
        }
        bulkhead.set_capacity(to);
        self.changes.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::info!(
            system = bulkhead.name(),
            from,
            to,
            successes = window.successes,
            avg_rtt_us = window.avg_rtt.map_or(0, |d| d.as_micros() as u64),
            dropped = window.dropped,
            timed_out = window.timed_out,
            "bulkhead limit changed"
        );
        Some(LimitChange { from, to })
    }
}

/// What an [`AdaptiveLimit`] can steer: a limit of calls in flight with a
/// total capacity that can be resized. Sealed; implemented for
///
/// - [`Bulkhead`]: the limit is its capacity
///   ([`resize`](Bulkhead::resize)d, in `[1, Bulkhead::MAX_PERMITS]`);
/// - [`PartitionedBulkhead`]: the limit is its total capacity, the sum of
///   its rooms' ([`resize`](PartitionedBulkhead::resize)d, in `[K,
///   max_capacity()]`), so that a falling limit sheds the least important
///   class first and the most important class keeps its share longest.
///
/// A limit the algorithm answers outside that range is clamped into it
/// (for a partitioned bulkhead, give the algorithm a minimum of at least
/// `K`, so that its own idea of the limit does not fall below the rooms').
///
/// # Examples
///
/// An AIMD limit on a partitioned bulkhead: timeouts shrink the export
/// class's room first, while checkout keeps its 5 slots.
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, ManualClock};
/// use watertight::limit::{AdaptiveLimit, Aimd, Signal};
/// use watertight::partition::PartitionedBulkhead;
///
/// let clock = ManualClock::new();
/// let search = PartitionedBulkhead::new(
///     "search",
///     [("checkout", 5), ("browse", 3), ("export", 2)],
///     &clock,
/// );
/// let aimd = Aimd::builder().initial_limit(10).min_limit(3).build().unwrap();
/// let limit = AdaptiveLimit::with_window(aimd, Duration::ZERO, 1, clock.now());
///
/// for to in [9, 8] {
///     let started = clock.now();
///     let call = search.try_acquire(0).unwrap();
///     drop(call); // the call timed out; its slot is back
///     let change = limit.record(&search, started, Signal::Timeout);
///     assert_eq!(change.map(|c| c.to), Some(to));
/// }
/// let rooms = [search.capacity_of(0), search.capacity_of(1), search.capacity_of(2)];
/// assert_eq!(rooms, [5, 2, 1]);
/// ```
pub trait Resizable: private::Steer {}

impl<C: Clock> Resizable for Bulkhead<C> {}

impl<C: Clock, const K: usize> Resizable for PartitionedBulkhead<C, K> {}

mod private {
    use crate::bulkhead::Bulkhead;
    use crate::clock::{Clock, Instant};
    use crate::partition::PartitionedBulkhead;

    /// What the windows need of the steered limit (out of reach of other
    /// crates: the trait is sealed).
    pub trait Steer {
        /// The name for the tracing event.
        #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
        fn name(&self) -> &'static str;
        /// Now, on its clock.
        fn now(&self) -> Instant;
        /// The limit now.
        fn capacity(&self) -> usize;
        /// Calls in flight now.
        fn in_flight(&self) -> usize;
        /// The smallest and the largest limit it takes.
        fn capacity_range(&self) -> (usize, usize);
        /// Sets the limit, in `capacity_range()`.
        fn set_capacity(&self, capacity: usize);
    }

    impl<C: Clock> Steer for Bulkhead<C> {
        fn name(&self) -> &'static str {
            Bulkhead::name(self)
        }
        fn now(&self) -> Instant {
            self.clock().now()
        }
        fn capacity(&self) -> usize {
            Bulkhead::capacity(self)
        }
        fn in_flight(&self) -> usize {
            Bulkhead::in_flight(self)
        }
        fn capacity_range(&self) -> (usize, usize) {
            (1, Bulkhead::<C>::MAX_PERMITS)
        }
        fn set_capacity(&self, capacity: usize) {
            // In range, so never an error.
            let _ = self.resize(capacity);
        }
    }

    impl<C: Clock, const K: usize> Steer for PartitionedBulkhead<C, K> {
        fn name(&self) -> &'static str {
            PartitionedBulkhead::name(self)
        }
        fn now(&self) -> Instant {
            // Every partitioned bulkhead has a room (K = 0 is refused).
            self.room(0).map_or(Instant::ZERO, |r| r.clock().now())
        }
        fn capacity(&self) -> usize {
            PartitionedBulkhead::capacity(self)
        }
        fn in_flight(&self) -> usize {
            PartitionedBulkhead::in_flight(self)
        }
        fn capacity_range(&self) -> (usize, usize) {
            (K, self.max_capacity())
        }
        fn set_capacity(&self, capacity: usize) {
            // In range, so never an error.
            let _ = self.resize(capacity);
        }
    }
}

const DEFAULT_WINDOW: Duration = Duration::from_secs(1);
const DEFAULT_MIN_SAMPLES: usize = 10;

/// Clears the closing flag when dropped.
struct Unflag<'a>(&'a AtomicBool);

impl Drop for Unflag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<C, A> fmt::Debug for AdaptiveBulkhead<C, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveBulkhead")
            .field("bulkhead", &self.bulkhead)
            .field("limit", &self.steer)
            .finish()
    }
}

impl<A> fmt::Debug for AdaptiveLimit<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimit")
            .field("window_nanos", &self.window_nanos)
            .field("min_samples", &self.min_samples)
            .field("windows", &self.windows.load(Ordering::Relaxed))
            .field("changes", &self.changes.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A permit of an [`AdaptiveBulkhead`]: the slot, and the instant the call
/// started, so that [`record`](Self::record) can measure its round trip.
///
/// Dropped without [`record`](Self::record), it gives the slot back and
/// records nothing.
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
///
/// let b = AdaptiveBulkhead::new("db", Aimd::new(), StdClock);
/// let call = b.try_acquire().unwrap();
/// let status = 503; // the call's answer
/// call.record(if status == 503 { Signal::Dropped } else { Signal::Success });
/// assert_eq!(b.bulkhead().in_flight(), 0);
/// ```
#[must_use = "the permit is released as soon as it is dropped"]
#[clippy::has_significant_drop]
pub struct AdaptivePermit<'a, C, A> {
    permit: Permit<'a, C>,
    owner: &'a AdaptiveBulkhead<C, A>,
    started: Instant,
}

impl<C: Clock, A: LimitAlgorithm> AdaptivePermit<'_, C, A> {
    /// Records how the call went, gives the slot back, and closes the
    /// window if this call is the first to finish after it ended; returns
    /// the change if the limit moved.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, LimitChange, Signal};
    ///
    /// let clock = ManualClock::new();
    /// let aimd = Aimd::builder().min_limit(1).initial_limit(10).build().unwrap();
    /// let b = AdaptiveBulkhead::with_window("db", aimd, Duration::ZERO, 1, &clock);
    /// // A zero window: every call closes one.
    /// assert_eq!(b.try_acquire().unwrap().record(Signal::Timeout), Some(LimitChange { from: 10, to: 9 }));
    /// ```
    pub fn record(self, signal: Signal) -> Option<LimitChange> {
        let AdaptivePermit {
            permit,
            owner,
            started,
        } = self;
        owner.finish(started, signal, || drop(permit))
    }

    /// When the call started (the permit was granted), on the bulkhead's
    /// clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(3));
    /// let b = AdaptiveBulkhead::new("db", Aimd::new(), &clock);
    /// assert_eq!(b.try_acquire().unwrap().started(), clock.now());
    /// ```
    pub fn started(&self) -> Instant {
        self.started
    }
}

impl<C, A> fmt::Debug for AdaptivePermit<'_, C, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptivePermit")
            .field("permit", &self.permit)
            .field("started", &self.started)
            .finish()
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
mod owned {
    use alloc::sync::Arc;
    use core::fmt;

    use super::{AdaptiveBulkhead, LimitChange};
    use crate::bulkhead::AcquireError;
    use crate::clock::{Clock, Instant};
    use crate::limit::{LimitAlgorithm, Signal};

    impl<C: Clock, A: LimitAlgorithm> AdaptiveBulkhead<C, A> {
        /// Like [`try_acquire`](Self::try_acquire), for a permit that owns a
        /// reference to the bulkhead (to move into a spawned task, or a
        /// tower response future).
        ///
        /// # Errors
        ///
        /// As [`try_acquire`](Self::try_acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::clock::StdClock;
        /// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
        ///
        /// let b = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
        /// let call = b.try_acquire_owned().unwrap();
        /// std::thread::spawn(move || call.record(Signal::Success)).join().unwrap();
        /// assert_eq!(b.bulkhead().in_flight(), 0);
        /// ```
        pub fn try_acquire_owned(
            self: &Arc<Self>,
        ) -> Result<OwnedAdaptivePermit<C, A>, AcquireError> {
            let permit = self.bulkhead.try_acquire()?;
            // Given back by `OwnedAdaptivePermit` (its `record` or its drop).
            core::mem::forget(permit);
            Ok(OwnedAdaptivePermit {
                owner: Some(self.clone()),
                started: self.bulkhead.clock().now(),
            })
        }
    }

    /// An [`AdaptivePermit`](super::AdaptivePermit) that owns a reference
    /// to its bulkhead, from
    /// [`try_acquire_owned`](AdaptiveBulkhead::try_acquire_owned). Dropped
    /// without [`record`](Self::record), it gives the slot back and records
    /// nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    ///
    /// let b = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
    /// let call = b.try_acquire_owned().unwrap();
    /// drop(call); // cancelled: the slot is back, nothing recorded
    /// assert_eq!(b.bulkhead().in_flight(), 0);
    /// ```
    #[must_use = "the permit is released as soon as it is dropped"]
    #[clippy::has_significant_drop]
    pub struct OwnedAdaptivePermit<C: Clock, A: LimitAlgorithm> {
        owner: Option<Arc<AdaptiveBulkhead<C, A>>>,
        started: Instant,
    }

    impl<C: Clock, A: LimitAlgorithm> OwnedAdaptivePermit<C, A> {
        /// Records how the call went and gives the slot back, as
        /// [`AdaptivePermit::record`](super::AdaptivePermit::record).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use core::time::Duration;
        /// use watertight::clock::ManualClock;
        /// use watertight::limit::{AdaptiveBulkhead, Aimd, LimitChange, Signal};
        ///
        /// let clock = Arc::new(ManualClock::new());
        /// let aimd = Aimd::builder().min_limit(1).initial_limit(5).build().unwrap();
        /// let b = Arc::new(AdaptiveBulkhead::with_window("db", aimd, Duration::ZERO, 1, clock));
        /// let change = b.try_acquire_owned().unwrap().record(Signal::Dropped);
        /// assert_eq!(change, Some(LimitChange { from: 5, to: 4 }));
        /// ```
        pub fn record(mut self, signal: Signal) -> Option<LimitChange> {
            let owner = self.owner.take()?;
            owner.finish(self.started, signal, || owner.bulkhead.release(1))
        }

        /// When the call started, on the bulkhead's clock.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::clock::{Clock, ManualClock};
        /// use watertight::limit::{AdaptiveBulkhead, Aimd};
        ///
        /// let clock = Arc::new(ManualClock::new());
        /// let b = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), clock.clone()));
        /// assert_eq!(b.try_acquire_owned().unwrap().started(), clock.now());
        /// ```
        pub fn started(&self) -> Instant {
            self.started
        }

        /// The bulkhead the permit belongs to.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::clock::StdClock;
        /// use watertight::limit::{AdaptiveBulkhead, Aimd};
        ///
        /// let b = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
        /// let call = b.try_acquire_owned().unwrap();
        /// assert!(Arc::ptr_eq(call.bulkhead(), &b));
        /// ```
        pub fn bulkhead(&self) -> &Arc<AdaptiveBulkhead<C, A>> {
            // Only `record` takes it, and `record` consumes the permit.
            match &self.owner {
                Some(owner) => owner,
                None => unreachable!("an owned adaptive permit keeps its owner until record"),
            }
        }
    }

    impl<C: Clock, A: LimitAlgorithm> Drop for OwnedAdaptivePermit<C, A> {
        fn drop(&mut self) {
            if let Some(owner) = self.owner.take() {
                owner.bulkhead.release(1);
            }
        }
    }

    impl<C: Clock, A: LimitAlgorithm> fmt::Debug for OwnedAdaptivePermit<C, A> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("OwnedAdaptivePermit")
                .field("bulkhead", &self.owner.as_ref().map(|o| o.bulkhead.name()))
                .field("started", &self.started)
                .finish()
        }
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use owned::OwnedAdaptivePermit;
