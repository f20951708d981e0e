//! [`Bulkhead`]: how many calls to one external system may run at once.

use core::fmt;

#[cfg(target_os = "none")]
use crate::sync::AtomicPtr;
use crate::sync::{const_fn, AtomicUsize, Mutex, Ordering};

mod error;
mod queue;
mod wait;
mod word;

pub use error::{AcquireError, ConfigError};
// For the policy's call future, which waits for a slot itself.
pub(crate) use wait::{poll_until, Waiter};
pub use wait::{Acquire, AcquireTimeout, AcquireUntil};
#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use wait::{AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil};

use word::{AtomicWord, Word};

/// A concurrency limit for one external system: at most `capacity` calls in
/// flight, and a caller who finds it full fails fast or waits a short,
/// bounded time — it never joins an unbounded queue.
///
/// Each call takes a [`Permit`] and gives it back when the permit is dropped:
/// after success, after an error, during a panic's unwinding and when the
/// future holding it is cancelled. One bulkhead per system, named after it
/// (`"payments"`, `"inventory"`), so that a slow system fills only its own
/// compartment.
///
/// | method | when no permit is free |
/// |---|---|
/// | [`try_acquire`](Self::try_acquire), [`try_acquire_many`](Self::try_acquire_many) | `Err(Full)` at once |
/// | [`acquire_timeout`](Self::acquire_timeout), [`acquire_until`](Self::acquire_until) | waits, then `Err(TimedOut)` |
/// | [`acquire`](Self::acquire), [`acquire_many`](Self::acquire_many) | waits until a permit is free or the bulkhead is closed |
///
/// A waiting method is refused at once with `Err(QueueFull)` when a
/// [bound on waiters](Self#bounded-wait-queue) is reached.
///
/// None of them allocates, with or without `alloc`: a waiting future carries
/// its own place in the bulkhead's wait queue.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::{AcquireError, Bulkhead};
/// use watertight::clock::ManualClock;
///
/// static CLOCK: ManualClock = ManualClock::new();
/// static PAYMENTS: Bulkhead<&ManualClock> = Bulkhead::new("payments", 2, &CLOCK);
///
/// let a = PAYMENTS.try_acquire().unwrap();
/// let b = PAYMENTS.try_acquire().unwrap();
/// assert_eq!(PAYMENTS.try_acquire().unwrap_err(), AcquireError::Full);
/// drop(a);
/// # futures_lite::future::block_on(async {
/// // A short, bounded wait; a permit is free, so it succeeds at once.
/// let c = PAYMENTS.acquire_timeout(Duration::from_millis(100)).await.unwrap();
/// assert_eq!(PAYMENTS.in_flight(), 2);
/// # drop((b, c));
/// # });
/// ```
///
/// # Fairness
///
/// Waiters are served in the order they started waiting: a release hands
/// its permits to the head of the queue directly (a FIFO list of the waiting
/// futures themselves, linked in place; no allocation). **A newcomer never
/// takes a permit a queued waiter is owed**: while anyone waits,
/// `try_acquire` fails with `Full`, and a new `acquire*` queues behind the
/// others — even if a permit has just been released and the waiter it was
/// handed to has not run yet.
///
/// The reason: a bulkhead's waits are short and bounded. With barging, a
/// steady stream of newcomers can keep taking the permit that was released
/// for a waiter, and that waiter then runs out its whole max wait and is
/// rejected although permits kept coming free — the caller who asked first
/// is the one refused. Without barging a waiter's wait is bounded by the
/// permits released ahead of it, which is what a max wait is sized on.
/// (tokio's `Semaphore` is fair the same way; async-lock's lets a releasing
/// task take its permit straight back.)
///
/// Requests for several permits (`acquire_many`) are the exception to
/// strict arrival order. A waiter for several permits at the head of the
/// queue keeps its place while fewer are free than it wants, and the
/// waiters behind it that want no more than is free are served with them
/// instead of sleeping next to them; a new `acquire*` that wants no more
/// than is free, when every queued waiter wants more, takes them too.
/// tokio's semaphore makes the other choice — everyone waits behind the
/// big request, which collects permits as they come — which for a
/// bulkhead, where the small requests are nearly all of the traffic and
/// each has a short max wait, would turn one large request into a burst of
/// timeouts. The cost: a large request can wait longer under a steady
/// stream of small ones (it is served as soon as enough are free at once).
///
/// The loom models in `tests/loom/main.rs` and the model-based test in
/// `tests/bulkhead_model.rs` check that no permit is lost, none is taken
/// from a waiter it was owed, and no waiter sleeps next to permits it could
/// use.
///
/// # Capacity changes and closing
///
/// [`resize`](Self::resize) grows or shrinks the capacity without blocking.
/// After a shrink no permit is granted until in flight is below the new
/// capacity; permits already out stay valid and are simply returned. A waiter
/// that asks for more than the new capacity (after a shrink, or after
/// [`Permit::forget`] took capacity away) fails with
/// [`ExceedsCapacity`](AcquireError::ExceedsCapacity).
/// [`close`](Self::close) fails every waiter and every later acquire with
/// [`Closed`](AcquireError::Closed); permits already out stay valid.
///
/// # Counters
///
/// [`metrics`](Self::metrics) returns accepted, rejected by cause (full, timed
/// out, closed), acquires that had to queue, cancelled waits, peak in
/// flight, in flight and waiting.
/// What the hot path pays for them: accepted rides in the same
/// compare-and-swap that takes the permit (its low bits live in the state
/// word, with a carry to a cold counter every 64 acquisitions), in flight is
/// derived from the state word, the peak is a plain load that becomes a
/// `fetch_max` only when the peak grows, and rejections and cancellations are
/// counted on their own (cold) cache line. All counters wrap at `usize::MAX`.
///
/// # Memory ordering
///
/// Taking a permit is an `Acquire` operation and giving one back is a
/// `Release` operation on the state word: everything a permit holder did
/// before dropping its permit happens-before whatever the next holder of
/// that permit does after taking it, like a mutex handing over. A permit
/// handed to a queued waiter is taken from the state word (`Acquire`) by
/// whoever serves the queue, and published to the waiter by a `Release`
/// store it reads with `Acquire`, so the same holds across a hand-off.
///
/// # Locking
///
/// `try_acquire`, a release with nobody queued and every acquire that finds
/// a permit free are lock-free (one compare-and-swap or one atomic add).
/// The wait queue has a short lock, held for a few loads and stores and
/// never while a waker runs or is dropped: `std::sync::Mutex` with `std`; a
/// critical section with `critical-section` and no `std`; otherwise a spin
/// lock. [`metrics`](Self::metrics) reads the total queued under it too;
/// [`waiting`](Self::waiting) is one atomic load, and a refusal for a full
/// queue ([`QueueFull`](AcquireError::QueueFull)) takes no lock. On a
/// microcontroller without
/// `critical-section`, do not wait on, release into or read the waiters of
/// the same bulkhead from an interrupt handler that can preempt a task doing
/// so (enable `critical-section` for that).
///
/// # Limits
///
/// At most [`MAX_PERMITS`](Self::MAX_PERMITS) permits (1 048 575; 1023 on
/// targets without 64-bit atomics). The number of waiting tasks has no limit
/// but memory (each waiting future holds its own queue node) unless
/// [`with_max_waiters`](Self::with_max_waiters) sets one.
///
/// # Bounded wait queue
///
/// [`with_max_waiters(n)`](Self::with_max_waiters) lets at most `n` tasks
/// wait; a wait that would be one too many is refused at once with
/// [`QueueFull`](AcquireError::QueueFull) (counted as
/// [`rejected_queue_full`](BulkheadMetrics::rejected_queue_full), traced
/// with reason `queue_full`), by one atomic compare-and-swap and no lock.
/// `try_acquire*` never waits, so the bound never concerns it.
///
/// **What to size it on.** The max wait decides: a bulkhead's waits are
/// short (tens of milliseconds, 100 ms at most for an interactive call,
/// never more than 1 s), and a waiter who cannot be served within them is
/// refused anyway. The bound is for when the max wait is long (a batch
/// system, `allow_long_max_wait`) or the arrival rate is far above what
/// the system serves: it caps the memory the waiting futures hold and the
/// latency of those admitted, and turns a wait that could not succeed into
/// an immediate refusal. Size it as what the system serves within the max
/// wait, `capacity × max_wait / call time`: with 16 slots, calls of 50 ms
/// and a 100 ms wait, about 32 waiters can be served in time, and a 33rd
/// would time out after waiting its whole 100 ms. Finagle's `maxWaiters`,
/// Polly's `QueueLimit` and failsafe-go's queue (a multiple of the limit)
/// are the same bound.
///
/// ```
/// use core::pin::pin;
/// use core::time::Duration;
/// use futures_lite::future::poll_once;
/// use watertight::{AcquireError, Bulkhead};
/// use watertight::clock::ManualClock;
///
/// static CLOCK: ManualClock = ManualClock::new();
/// // 2 slots, and at most 2 waiters: a 5th caller is refused at once.
/// static EXPORTS: Bulkhead<&ManualClock> = Bulkhead::new("exports", 2, &CLOCK).with_max_waiters(2);
///
/// # futures_lite::future::block_on(async {
/// let _a = EXPORTS.try_acquire().unwrap();
/// let _b = EXPORTS.try_acquire().unwrap();
/// let mut c = pin!(EXPORTS.acquire_timeout(Duration::from_secs(5)));
/// let mut d = pin!(EXPORTS.acquire_timeout(Duration::from_secs(5)));
/// assert!(poll_once(c.as_mut()).await.is_none());
/// assert!(poll_once(d.as_mut()).await.is_none());
/// let e = EXPORTS.acquire_timeout(Duration::from_secs(5)).await;
/// assert_eq!(e.unwrap_err(), AcquireError::QueueFull);
/// assert_eq!((EXPORTS.waiting(), EXPORTS.metrics().rejected_queue_full), (2, 1));
/// # });
/// ```
#[repr(C)]
pub struct Bulkhead<C> {
    hot: Hot,
    cold: Cold,
    name: &'static str,
    clock: C,
}

/// What every acquire and release touches, on one cache line of its own, so
/// that the cold counters' writes never invalidate it. Microcontrollers
/// (`target_os = "none"`) have no caches shared between cores to protect, so
/// there the padding is left out and RAM is saved.
#[cfg_attr(not(target_os = "none"), repr(C, align(64)))]
#[cfg_attr(target_os = "none", repr(C))]
struct Hot {
    word: AtomicWord,
    peak: AtomicUsize,
    /// The wait queue (its ends and the total queued, under the lock).
    queue: Mutex<queue::List>,
    /// The bound on waiters and how many wait (`queue::waiters`): read by
    /// every wait that queues, changed by it and by every unlink, so beside
    /// the lock.
    waiters: AtomicUsize,
    /// The accepted counter's carry: written by a taker right after its
    /// compare-and-swap on `word`, whose line it then owns, once every 64
    /// acquisitions, so here rather than among the cold counters.
    accepted_carry: AtomicUsize,
    /// The queue's hand-off (`serve_queue`), stored by the first wait: a
    /// release reaches the queue through it, so a firmware that never waits
    /// links none of the queue's code (on Cortex-M that is 350 B of flash).
    /// Null until then; once the queued flag is set it is set too. Only on
    /// microcontrollers: elsewhere flash is not scarce, a release calls the
    /// queue directly, and the word is left for the waiter count.
    #[cfg(target_os = "none")]
    serve: AtomicPtr<()>,
}

// Sizes the guide reports (guide::benchmarks, guide::firmware), checked at compile time: one 64-byte line for
// the hot state (the word and the queue's lock, ends and waiter count) and
// one for the rest on x86_64; unpadded on microcontrollers: 64 B with a
// critical section for the lock (thumbv6m), 68 B with the spin lock's flag
// (thumbv7em).
#[cfg(all(target_arch = "x86_64", not(loom)))]
const _: () = assert!(core::mem::size_of::<Bulkhead<()>>() <= 128);
#[cfg(all(
    target_os = "none",
    target_pointer_width = "32",
    feature = "critical-section"
))]
const _: () = assert!(core::mem::size_of::<Bulkhead<()>>() <= 64);
#[cfg(all(
    target_os = "none",
    target_pointer_width = "32",
    not(feature = "critical-section")
))]
const _: () = assert!(core::mem::size_of::<Bulkhead<()>>() <= 68);

/// What only rejections, cancellations, carries and readers touch.
#[repr(C)]
struct Cold {
    accepted_seen: AtomicUsize,
    rejected_full: AtomicUsize,
    rejected_timed_out: AtomicUsize,
    rejected_closed: AtomicUsize,
    rejected_queue_full: AtomicUsize,
    cancelled: AtomicUsize,
}

/// A snapshot of a bulkhead's counters, from [`Bulkhead::metrics`].
///
/// Each field is read separately, so a snapshot taken under load is not an
/// atomic picture of all of them at one instant; `capacity`, `in_flight`,
/// `available` and `waiting` do come from one atomic read.
///
/// # Examples
///
/// ```
/// use watertight::Bulkhead;
/// use watertight::clock::StdClock;
///
/// let b = Bulkhead::new("payments", 8, StdClock);
/// let _p = b.try_acquire_many(2).unwrap();
/// let m = b.metrics();
/// assert_eq!((m.name, m.capacity, m.in_flight, m.available), ("payments", 8, 2, 6));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkheadMetrics {
    /// The bulkhead's name.
    pub name: &'static str,
    /// Current capacity.
    pub capacity: usize,
    /// Permits held right now.
    pub in_flight: usize,
    /// Permits free right now (zero while in flight exceeds a shrunk capacity).
    pub available: usize,
    /// Tasks waiting for a permit right now.
    pub waiting: usize,
    /// Acquires that found no permit free and queued, ever (whatever came
    /// of the wait). With `accepted` it tells how often callers had to wait.
    pub queued: usize,
    /// The most permits ever held at once.
    pub peak_in_flight: usize,
    /// Acquisitions granted (an `acquire_many(n)` counts once). Never decreases.
    pub accepted: usize,
    /// Refused at once by a call that does not wait (`try_acquire*`):
    /// no permit was free, or tasks were waiting (a newcomer never takes a
    /// permit a queued waiter is owed). Never a wait: a wait refused for
    /// the bound on waiters is [`rejected_queue_full`](Self::rejected_queue_full),
    /// and one that reaches its deadline is
    /// [`rejected_timed_out`](Self::rejected_timed_out).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("search", 1, &clock);
    /// let held = b.try_acquire().unwrap();
    /// // No permit free: refused at once, counted here.
    /// assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Full);
    /// assert_eq!(b.metrics().rejected_full, 1);
    ///
    /// // A wait queues however many wait; one that runs out is timed out.
    /// let mut first = core::pin::pin!(b.acquire_timeout(Duration::from_millis(10)));
    /// let mut second = core::pin::pin!(b.acquire_timeout(Duration::from_millis(10)));
    /// assert!(futures_lite::future::poll_once(first.as_mut()).await.is_none());
    /// assert!(futures_lite::future::poll_once(second.as_mut()).await.is_none());
    /// assert_eq!(b.metrics().waiting, 2);
    /// drop(held);
    /// // A permit came free, but it is owed to the first waiter: a newcomer
    /// // that will not wait is refused, and counted here too.
    /// assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Full);
    /// let first = first.await.unwrap();
    /// clock.advance(Duration::from_millis(10));
    /// assert_eq!(second.await.unwrap_err(), AcquireError::TimedOut);
    /// drop(first);
    ///
    /// // A request above the capacity is an error, not a refusal.
    /// assert!(matches!(b.try_acquire_many(2), Err(AcquireError::ExceedsCapacity { .. })));
    /// let m = b.metrics();
    /// assert_eq!((m.rejected_full, m.rejected_timed_out), (2, 1));
    /// # });
    /// ```
    pub rejected_full: usize,
    /// Refused because the wait reached its deadline.
    pub rejected_timed_out: usize,
    /// Refused because the bulkhead was closed.
    pub rejected_closed: usize,
    /// Refused at once because [`max_waiters`](Bulkhead::max_waiters) were
    /// waiting already ([`QueueFull`](AcquireError::QueueFull)). Always zero
    /// without a bound.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::pin::pin;
    /// use futures_lite::future::poll_once;
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("search", 1, &clock).with_max_waiters(1);
    /// let _held = b.try_acquire().unwrap();
    /// let mut first = pin!(b.acquire());
    /// assert!(poll_once(first.as_mut()).await.is_none()); // queued
    /// assert_eq!(b.acquire().await.unwrap_err(), AcquireError::QueueFull);
    /// let m = b.metrics();
    /// assert_eq!((m.waiting, m.rejected_queue_full, m.rejected()), (1, 1, 1));
    /// # });
    /// ```
    pub rejected_queue_full: usize,
    /// Waits abandoned by dropping the acquire future (not rejections).
    pub cancelled_waits: usize,
}

impl BulkheadMetrics {
    /// All rejections together.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("payments", 1, StdClock);
    /// let _p = b.try_acquire().unwrap();
    /// let _ = b.try_acquire();
    /// b.close();
    /// let _ = b.try_acquire();
    /// assert_eq!(b.metrics().rejected(), 2);
    /// ```
    pub fn rejected(&self) -> usize {
        self.rejected_full
            .wrapping_add(self.rejected_timed_out)
            .wrapping_add(self.rejected_closed)
            .wrapping_add(self.rejected_queue_full)
    }
}

impl<C> Bulkhead<C> {
    /// The largest capacity a bulkhead can have on this target.
    pub const MAX_PERMITS: usize = word::MAX_PERMITS;

    /// The largest bound on waiters
    /// ([`with_max_waiters`](Self::with_max_waiters)): 4 294 967 294 on
    /// 64-bit targets, 65 534 on 32-bit ones.
    pub const MAX_WAITERS: usize = queue::waiters::MAX;

    const_fn! {
        /// A bulkhead named `name` with `max_concurrent` permits, reading time from
        /// `clock`. `const`, so it can live in a `static`.
        ///
        /// # Panics
        ///
        /// If `max_concurrent` is zero or above [`MAX_PERMITS`](Self::MAX_PERMITS).
        /// In a `static` or `const` that is a compile-time error; for values
        /// known only at run time use [`try_new`](Self::try_new).
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// static INVENTORY: Bulkhead<StdClock> = Bulkhead::new("inventory", 16, StdClock);
        /// assert_eq!(INVENTORY.capacity(), 16);
        /// assert_eq!(INVENTORY.name(), "inventory");
        /// ```
        ///
        /// ```compile_fail
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// static NONE: Bulkhead<StdClock> = Bulkhead::new("none", 0, StdClock);
        /// ```
        pub const fn new(name: &'static str, max_concurrent: usize, clock: C) -> Self {
            assert!(max_concurrent != 0, "bulkhead capacity must be at least 1");
            assert!(
                max_concurrent <= word::MAX_PERMITS,
                "bulkhead capacity is above Bulkhead::MAX_PERMITS"
            );
            Self::build(name, max_concurrent, clock)
        }
    }

    const_fn! {
        /// At most `max_waiters` tasks may wait for a permit at once; a wait
        /// that would be one too many fails at once with
        /// [`QueueFull`](AcquireError::QueueFull). `0` refuses every wait
        /// (each `acquire*` then takes a free permit or fails at once).
        /// `const`, to follow [`new`](Self::new) in a `static`. See
        /// [Bounded wait queue](Self#bounded-wait-queue) for how to size it.
        ///
        /// # Panics
        ///
        /// If `max_waiters` is above [`MAX_WAITERS`](Self::MAX_WAITERS) (in
        /// a `static`, a compile-time error); use
        /// [`try_with_max_waiters`](Self::try_with_max_waiters) for values
        /// read at run time.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// static SEARCH: Bulkhead<StdClock> = Bulkhead::new("search", 16, StdClock).with_max_waiters(32);
        /// assert_eq!(SEARCH.max_waiters(), Some(32));
        /// assert_eq!(Bulkhead::new("db", 4, StdClock).max_waiters(), None);
        /// ```
        pub const fn with_max_waiters(mut self, max_waiters: usize) -> Self {
            assert!(
                max_waiters <= queue::waiters::MAX,
                "max_waiters is above Bulkhead::MAX_WAITERS"
            );
            self.hot.waiters = AtomicUsize::new(queue::waiters::initial(max_waiters));
            self
        }
    }

    const_fn! {
        /// [`with_max_waiters`](Self::with_max_waiters) in place, for a
        /// bulkhead inside another type (the partitioned bulkhead's rooms);
        /// `max_waiters <= MAX_WAITERS` is the caller's to check.
        pub(crate) const fn bound_waiters(&mut self, max_waiters: usize) {
            self.hot.waiters = AtomicUsize::new(queue::waiters::initial(max_waiters));
        }
    }

    /// Like [`with_max_waiters`](Self::with_max_waiters), for bounds read
    /// from configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::MaxWaitersTooLarge`] above
    /// [`MAX_WAITERS`](Self::MAX_WAITERS).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{Bulkhead, ConfigError};
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::try_new("orders", 8, StdClock)?.try_with_max_waiters(16)?;
    /// assert_eq!(b.max_waiters(), Some(16));
    /// let err = Bulkhead::new("orders", 8, StdClock).try_with_max_waiters(usize::MAX).unwrap_err();
    /// assert!(matches!(err, ConfigError::MaxWaitersTooLarge { .. }));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn try_with_max_waiters(self, max_waiters: usize) -> Result<Self, ConfigError> {
        if max_waiters > queue::waiters::MAX {
            return Err(ConfigError::MaxWaitersTooLarge {
                requested: max_waiters,
                max: queue::waiters::MAX,
            });
        }
        Ok(self.with_max_waiters(max_waiters))
    }

    /// The bound on waiters, if there is one
    /// ([`with_max_waiters`](Self::with_max_waiters)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("ledger", 2, StdClock).with_max_waiters(0);
    /// assert_eq!(b.max_waiters(), Some(0));
    /// ```
    pub fn max_waiters(&self) -> Option<usize> {
        let bound = queue::waiters::bound(self.hot.waiters.load(Ordering::Relaxed));
        (bound != queue::waiters::UNBOUNDED).then_some(bound)
    }

    /// Like [`new`](Self::new), for capacities read from configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroCapacity`] for zero, [`ConfigError::CapacityTooLarge`]
    /// above [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{Bulkhead, ConfigError};
    /// use watertight::clock::StdClock;
    ///
    /// let configured = 0; // e.g. from an environment variable
    /// let err = Bulkhead::try_new("orders", configured, StdClock).unwrap_err();
    /// assert_eq!(err, ConfigError::ZeroCapacity);
    /// ```
    pub fn try_new(
        name: &'static str,
        max_concurrent: usize,
        clock: C,
    ) -> Result<Self, ConfigError> {
        check_capacity(max_concurrent)?;
        Ok(Self::build(name, max_concurrent, clock))
    }

    const_fn! {
        const fn build(name: &'static str, max_concurrent: usize, clock: C) -> Self {
            Bulkhead {
                hot: Hot {
                    word: AtomicWord::new(word::initial(max_concurrent)),
                    peak: AtomicUsize::new(0),
                    queue: Mutex::new(queue::List::new()),
                    waiters: AtomicUsize::new(queue::waiters::initial(queue::waiters::UNBOUNDED)),
                    accepted_carry: AtomicUsize::new(0),
                    #[cfg(target_os = "none")]
                    serve: AtomicPtr::new(core::ptr::null_mut()),
                },
                cold: Cold {
                    accepted_seen: AtomicUsize::new(0),
                    rejected_full: AtomicUsize::new(0),
                    rejected_timed_out: AtomicUsize::new(0),
                    rejected_closed: AtomicUsize::new(0),
                    rejected_queue_full: AtomicUsize::new(0),
                    cancelled: AtomicUsize::new(0),
                },
                name,
                clock,
            }
        }
    }

    /// The name given at construction, for metrics and logs.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// static PAYMENTS: Bulkhead<StdClock> = Bulkhead::new("payments", 8, StdClock);
    /// assert_eq!(PAYMENTS.name(), "payments");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The clock this bulkhead measures waits with.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("db", 1, &clock);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(b.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Takes one permit if one is free and nobody is waiting; never waits.
    ///
    /// # Errors
    ///
    /// [`Full`](AcquireError::Full) if no permit is free or tasks are waiting
    /// (see [Fairness](Self#fairness)); [`Closed`](AcquireError::Closed) after
    /// [`close`](Self::close); [`ExceedsCapacity`](AcquireError::ExceedsCapacity)
    /// only if [`Permit::forget`] has brought the capacity to zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("search", 1, StdClock);
    /// let p = b.try_acquire().unwrap();
    /// assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Full);
    /// drop(p);
    /// assert!(b.try_acquire().is_ok());
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_, C>, AcquireError> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits at once if they are free and nobody is waiting; never
    /// waits. `n == 0` gives an empty permit unless the bulkhead is closed.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), and
    /// [`ExceedsCapacity`](AcquireError::ExceedsCapacity) if `n` is more than
    /// the capacity (an error in the request, not a rejection: it is not
    /// counted as one).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("batch", 4, StdClock);
    /// let three = b.try_acquire_many(3).unwrap();
    /// assert_eq!(three.count(), 3);
    /// assert_eq!(b.try_acquire_many(2).unwrap_err(), AcquireError::Full);
    /// assert_eq!(
    ///     b.try_acquire_many(5).unwrap_err(),
    ///     AcquireError::ExceedsCapacity { requested: 5, capacity: 4 }
    /// );
    /// ```
    #[inline]
    pub fn try_acquire_many(&self, n: usize) -> Result<Permit<'_, C>, AcquireError> {
        match self.take(n) {
            Ok(()) => Ok(Permit { bulkhead: self, n }),
            Err(e) => Err(self.count_rejection(e)),
        }
    }

    /// One permit if it is free and nobody waits, without counting a
    /// refusal: for callers (the policy) that go on to wait when this fails,
    /// so that the wait alone is counted, or count the refusal themselves
    /// ([`count_rejection`](Self::count_rejection)). The caller holds the
    /// permit in a guard of its own and gives it back with `release(1)`.
    #[inline]
    pub(crate) fn try_acquire_uncounted(&self) -> Result<(), AcquireError> {
        self.take(1)
    }

    /// Free permits right now (zero while in flight exceeds a shrunk capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("db", 3, StdClock);
    /// let _p = b.try_acquire().unwrap();
    /// assert_eq!((b.available(), b.in_flight(), b.capacity(), b.waiting()), (2, 1, 3, 0));
    /// assert!(!b.is_closed());
    /// ```
    pub fn available(&self) -> usize {
        word::available(self.load()).max(0) as usize
    }

    /// Permits held right now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let payments = Bulkhead::new("payments", 4, StdClock);
    /// let batch = payments.try_acquire_many(2).unwrap();
    /// let single = payments.try_acquire().unwrap();
    /// assert_eq!(payments.in_flight(), 3);
    /// drop(batch);
    /// assert_eq!(payments.in_flight(), 1);
    /// # drop(single);
    /// ```
    pub fn in_flight(&self) -> usize {
        word::in_flight(self.load())
    }

    /// The current capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let search = Bulkhead::new("search", 8, StdClock);
    /// assert_eq!(search.capacity(), 8);
    /// search.resize(2).unwrap();
    /// assert_eq!(search.capacity(), 2);
    /// ```
    pub fn capacity(&self) -> usize {
        word::capacity(self.load())
    }

    /// Tasks waiting for a permit right now: the wait queue's length (with
    /// a [bound on waiters](Self::with_max_waiters), plus waits on their way
    /// into it that have reserved a place). One atomic load, no lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use futures_lite::future;
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let db = Bulkhead::new("db", 1, StdClock);
    /// let held = db.try_acquire().unwrap();
    /// let mut waiter = Box::pin(db.acquire());
    /// assert!(future::block_on(future::poll_once(&mut waiter)).is_none());
    /// assert_eq!(db.waiting(), 1);
    /// drop(held);
    /// let permit = future::block_on(waiter).unwrap();
    /// assert_eq!((db.waiting(), db.in_flight()), (0, 1));
    /// # drop(permit);
    /// ```
    pub fn waiting(&self) -> usize {
        queue::waiters::count(self.hot.waiters.load(Ordering::Relaxed))
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let legacy = Bulkhead::new("legacy", 2, StdClock);
    /// assert!(!legacy.is_closed());
    /// legacy.close();
    /// assert!(legacy.is_closed());
    /// assert!(legacy.try_acquire().is_err());
    /// ```
    pub fn is_closed(&self) -> bool {
        word::closed(self.load())
    }

    /// A snapshot of the counters; see [Counters](Self#counters).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("ledger", 1, StdClock);
    /// let p = b.try_acquire().unwrap();
    /// let _ = b.try_acquire();
    /// drop(p);
    /// let m = b.metrics();
    /// assert_eq!((m.accepted, m.rejected_full, m.peak_in_flight, m.in_flight), (1, 1, 1, 0));
    /// ```
    pub fn metrics(&self) -> BulkheadMetrics {
        let w = self.load();
        BulkheadMetrics {
            name: self.name,
            capacity: word::capacity(w),
            in_flight: word::in_flight(w),
            available: word::available(w).max(0) as usize,
            waiting: self.waiting(),
            // Written under the lock, read under it (held for one load).
            queued: self.hot.queue.lock().queued_total(),
            peak_in_flight: self.hot.peak.load(Ordering::Relaxed),
            accepted: self.accepted_from(w),
            rejected_full: self.cold.rejected_full.load(Ordering::Relaxed),
            rejected_timed_out: self.cold.rejected_timed_out.load(Ordering::Relaxed),
            rejected_closed: self.cold.rejected_closed.load(Ordering::Relaxed),
            rejected_queue_full: self.cold.rejected_queue_full.load(Ordering::Relaxed),
            cancelled_waits: self.cold.cancelled.load(Ordering::Relaxed),
        }
    }

    /// Changes the capacity, without blocking; returns the old one.
    ///
    /// Growing frees the new permits at once (waking waiters). Shrinking below
    /// what is in flight takes effect as permits come back: none is granted
    /// until in flight is below the new capacity. Waiters that ask for more
    /// than the new capacity fail with
    /// [`ExceedsCapacity`](AcquireError::ExceedsCapacity).
    ///
    /// # Errors
    ///
    /// The same [`ConfigError`]s as [`try_new`](Self::try_new); the capacity is
    /// then unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("search", 3, StdClock);
    /// let mut held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    /// assert_eq!(b.resize(1), Ok(3));
    /// held.truncate(1); // two come back, one is still out
    /// assert!(b.try_acquire().is_err()); // in flight (1) is not below capacity (1)
    /// held.clear();
    /// assert!(b.try_acquire().is_ok());
    /// ```
    pub fn resize(&self, new_capacity: usize) -> Result<usize, ConfigError> {
        check_capacity(new_capacity)?;
        let old = self.update(|w| {
            let in_flight = word::in_flight(w) as word::Avail;
            word::with_capacity(w, new_capacity, new_capacity as word::Avail - in_flight)
        });
        if word::queued(old) {
            // Serve what grew, fail what no longer fits.
            self.serve_queue(true);
        }
        Ok(word::capacity(old))
    }

    /// Closes the bulkhead: every waiter and every later acquire fails with
    /// [`Closed`](AcquireError::Closed). Permits already held stay valid and
    /// are returned as usual. Returns whether this call closed it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("legacy", 2, StdClock);
    /// assert!(b.close());
    /// assert!(!b.close());
    /// assert_eq!(b.try_acquire().unwrap_err(), AcquireError::Closed);
    /// ```
    pub fn close(&self) -> bool {
        let old = self.hot.word.fetch_or(word::CLOSED, Ordering::AcqRel);
        // Nobody queues once the flag is set (the queue's CAS sees it), so
        // if nobody was queued there is nobody to fail.
        if word::queued(old) {
            self.fail_all();
        }
        !word::closed(old)
    }

    #[inline]
    fn load(&self) -> Word {
        self.hot.word.load(Ordering::Acquire)
    }

    /// Applies `f` to the word in a CAS loop; returns the word before the change.
    fn update(&self, mut f: impl FnMut(Word) -> Word) -> Word {
        let mut cur = self.hot.word.load(Ordering::Relaxed);
        loop {
            let next = f(cur);
            match self.hot.word.compare_exchange_weak(
                cur,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(prev) => return prev,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Takes `n` permits if they are free and nobody is queued (a newcomer
    /// never takes a permit a queued waiter is owed). Lock-free: one CAS.
    #[inline]
    fn take(&self, n: usize) -> Result<(), AcquireError> {
        let mut cur = self.hot.word.load(Ordering::Relaxed);
        loop {
            check_request(cur, n)?;
            if n == 0 {
                return Ok(());
            }
            if word::available(cur) < n as word::Avail || word::queued(cur) {
                return Err(AcquireError::Full);
            }
            match self.take_from(cur, n, false) {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// One compare-and-swap that takes `n` permits from the word `cur` (and
    /// clears the queued flag with `clear_queued`), then the counters'
    /// bookkeeping; the word after on success, the word found on failure.
    /// `Acquire`: it pairs with the `Release` of the add that gave the
    /// permits back. Shared by the lock-free take and the queue's two takes
    /// (a hand-off, and a newcomer under the lock); `n <= available(cur)` is
    /// the caller's to check.
    #[inline]
    fn take_from(&self, cur: Word, n: usize, clear_queued: bool) -> Result<Word, Word> {
        let (mut next, carried) = word::take(cur, n);
        if clear_queued {
            next &= !word::QUEUED;
        }
        self.hot
            .word
            .compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed)?;
        self.after_take(next, carried);
        Ok(next)
    }

    #[inline]
    fn after_take(&self, next: Word, carried: bool) {
        if carried {
            self.hot
                .accepted_carry
                .fetch_add(word::COUNT_PERIOD, Ordering::Release);
        }
        let in_flight = word::in_flight(next);
        if in_flight > self.hot.peak.load(Ordering::Relaxed) {
            self.hot.peak.fetch_max(in_flight, Ordering::Relaxed);
        }
    }

    /// Gives `n` permits back: one atomic add, and the queue's lock only if
    /// someone is queued (then the permits go to the head of the queue).
    #[inline]
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let old = self.hot.word.fetch_add(word::permits(n), Ordering::AcqRel);
        if word::queued(old) {
            self.serve_after_release();
        }
    }

    /// A release that found the queued flag set: serve the queue (on a
    /// microcontroller through the pointer the first wait stored, see
    /// `Hot::serve`).
    #[cold]
    #[inline(never)]
    #[cfg(not(target_os = "none"))]
    fn serve_after_release(&self) {
        self.serve_queue(false);
    }

    /// A release that found the queued flag set: serve the queue, through
    /// the pointer the first wait stored (see `Hot::serve`).
    #[cold]
    #[inline(never)]
    #[cfg(target_os = "none")]
    fn serve_after_release(&self) {
        // `Acquire`: stored before the CAS that first set the queued flag,
        // which the release's add read.
        let serve = self.hot.serve.load(Ordering::Acquire);
        if !serve.is_null() {
            // SAFETY: only `Self::serve_fn` stores here: a `fn(&Self, bool)`
            // for this very type, cast to a data pointer.
            let serve: fn(&Self, bool) = unsafe { core::mem::transmute(serve) };
            serve(self, false);
        }
    }

    /// What a wait stores in `Hot::serve` before it queues.
    #[cfg(target_os = "none")]
    pub(crate) fn serve_fn() -> *mut () {
        let serve: fn(&Self, bool) = Self::serve_queue;
        serve as *mut ()
    }

    /// Removes `n` held permits from the bulkhead for good (`Permit::forget`).
    fn forget(&self, n: usize) {
        if n == 0 {
            return;
        }
        let old = self.update(|w| {
            let in_flight = word::in_flight(w).saturating_sub(n);
            let cap = word::capacity(w).saturating_sub(n);
            word::with_capacity(w, cap, cap as word::Avail - in_flight as word::Avail)
        });
        // The capacity shrank: waiters that now ask for more than it fail,
        // as after `resize`.
        if word::queued(old) {
            self.serve_queue(true);
        }
    }

    fn accepted_from(&self, w: Word) -> usize {
        let carry = self.hot.accepted_carry.load(Ordering::Acquire);
        let total = carry.wrapping_add(word::count(w));
        // A reader between a wrapping CAS and its carry would see up to one
        // period too little; never report less than what was reported before.
        let seen = self.cold.accepted_seen.fetch_max(total, Ordering::Relaxed);
        total.max(seen)
    }

    #[cold]
    pub(crate) fn count_rejection(&self, e: AcquireError) -> AcquireError {
        let counter = match e {
            AcquireError::Full => &self.cold.rejected_full,
            AcquireError::TimedOut => &self.cold.rejected_timed_out,
            AcquireError::Closed => &self.cold.rejected_closed,
            AcquireError::QueueFull => &self.cold.rejected_queue_full,
            AcquireError::ExceedsCapacity { .. } => return e,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // One event per refusal, at DEBUG: refusals come at the rate of
        // traffic (the counter above is what dashboards read).
        #[cfg(feature = "tracing")]
        tracing::debug!(
            system = self.name,
            reason = match e {
                AcquireError::TimedOut => "timed_out",
                AcquireError::Closed => "closed",
                AcquireError::QueueFull => "queue_full",
                _ => "full",
            },
            "bulkhead rejected a call"
        );
        e
    }
}

/// The refusals that do not depend on free permits: closed, or more permits
/// asked for than the bulkhead has.
#[inline]
fn check_request(w: Word, n: usize) -> Result<(), AcquireError> {
    if word::closed(w) {
        return Err(AcquireError::Closed);
    }
    let capacity = word::capacity(w);
    if n > capacity {
        return Err(AcquireError::ExceedsCapacity {
            requested: n,
            capacity,
        });
    }
    Ok(())
}

fn check_capacity(capacity: usize) -> Result<(), ConfigError> {
    if capacity == 0 {
        return Err(ConfigError::ZeroCapacity);
    }
    if capacity > word::MAX_PERMITS {
        return Err(ConfigError::CapacityTooLarge {
            requested: capacity,
            max: word::MAX_PERMITS,
        });
    }
    Ok(())
}

impl<C> fmt::Debug for Bulkhead<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.load();
        f.debug_struct("Bulkhead")
            .field("name", &self.name)
            .field("capacity", &word::capacity(w))
            .field("in_flight", &word::in_flight(w))
            .field("waiting", &self.waiting())
            .field("closed", &word::closed(w))
            .finish()
    }
}

/// One or more permits of a [`Bulkhead`], given back when dropped.
///
/// Dropping returns the permits on every path out of the guarded code: a
/// normal return, `?`, a panic's unwinding, or cancellation of the future
/// that holds it.
///
/// # Examples
///
/// ```
/// use watertight::Bulkhead;
/// use watertight::clock::StdClock;
///
/// let b = Bulkhead::new("db", 1, StdClock);
/// let result: Result<(), &str> = (|| {
///     let _permit = b.try_acquire().map_err(|_| "busy")?;
///     Err("the call failed")
/// })();
/// assert!(result.is_err());
/// assert_eq!(b.available(), 1); // the error path gave the permit back
/// ```
#[must_use = "the permit is released as soon as it is dropped"]
#[clippy::has_significant_drop]
pub struct Permit<'a, C> {
    bulkhead: &'a Bulkhead<C>,
    n: usize,
}

impl<'a, C> Permit<'a, C> {
    /// How many permits this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let batch = Bulkhead::new("batch", 10, StdClock);
    /// let permit = batch.try_acquire_many(4).unwrap();
    /// assert_eq!(permit.count(), 4);
    /// assert_eq!(batch.available(), 10 - permit.count());
    /// ```
    pub fn count(&self) -> usize {
        self.n
    }

    /// The bulkhead the permits belong to.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{Bulkhead, Permit};
    /// use watertight::clock::StdClock;
    ///
    /// // Code that is handed only the permit can still tell which system it guards.
    /// fn label<C>(permit: &Permit<'_, C>) -> &'static str {
    ///     permit.bulkhead().name()
    /// }
    ///
    /// let payments = Bulkhead::new("payments", 2, StdClock);
    /// let permit = payments.try_acquire().unwrap();
    /// assert_eq!(label(&permit), "payments");
    /// assert_eq!(permit.bulkhead().in_flight(), 1);
    /// ```
    pub fn bulkhead(&self) -> &'a Bulkhead<C> {
        self.bulkhead
    }

    /// Gives the permits up for good: they are removed from the capacity (as
    /// tokio's `SemaphorePermit::forget` removes them from the semaphore) and
    /// in flight drops by as many. Use [`Bulkhead::resize`] to restore them.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Bulkhead::new("db", 3, StdClock);
    /// b.try_acquire().unwrap().forget();
    /// assert_eq!((b.capacity(), b.in_flight(), b.available()), (2, 0, 2));
    /// ```
    pub fn forget(self) {
        let this = core::mem::ManuallyDrop::new(self);
        this.bulkhead.forget(this.n);
    }
}

impl<C> Drop for Permit<'_, C> {
    #[inline]
    fn drop(&mut self) {
        self.bulkhead.release(self.n);
    }
}

impl<C> fmt::Debug for Permit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("bulkhead", &self.bulkhead.name)
            .field("n", &self.n)
            .finish()
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use owned::OwnedPermit;

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
mod owned {
    use alloc::sync::Arc;
    use core::fmt;

    use super::{AcquireError, Bulkhead};

    /// Permits that own an `Arc` of their [`Bulkhead`], so they can move into
    /// a spawned task (`'static`). Given back when dropped, like [`Permit`](super::Permit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// let b = Arc::new(Bulkhead::new("jobs", 1, StdClock));
    /// let permit = b.try_acquire_owned().unwrap();
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(b.available(), 1);
    /// ```
    #[must_use = "the permit is released as soon as it is dropped"]
    #[clippy::has_significant_drop]
    pub struct OwnedPermit<C> {
        bulkhead: Arc<Bulkhead<C>>,
        n: usize,
    }

    impl<C> OwnedPermit<C> {
        pub(super) fn new(bulkhead: Arc<Bulkhead<C>>, n: usize) -> Self {
            OwnedPermit { bulkhead, n }
        }

        /// How many permits this guard holds.
        pub fn count(&self) -> usize {
            self.n
        }

        /// The bulkhead the permits belong to.
        pub fn bulkhead(&self) -> &Arc<Bulkhead<C>> {
            &self.bulkhead
        }

        /// Gives the permits up for good, as [`Permit::forget`](super::Permit::forget).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// let b = Arc::new(Bulkhead::new("db", 2, StdClock));
        /// b.try_acquire_owned().unwrap().forget();
        /// assert_eq!(b.capacity(), 1);
        /// ```
        pub fn forget(mut self) {
            let n = core::mem::take(&mut self.n);
            self.bulkhead.forget(n);
        }
    }

    impl<C> Drop for OwnedPermit<C> {
        #[inline]
        fn drop(&mut self) {
            self.bulkhead.release(self.n);
        }
    }

    impl<C> fmt::Debug for OwnedPermit<C> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("OwnedPermit")
                .field("bulkhead", &self.bulkhead.name)
                .field("n", &self.n)
                .finish()
        }
    }

    impl<C> Bulkhead<C> {
        /// [`try_acquire`](Bulkhead::try_acquire) for an `Arc`'d bulkhead: the
        /// permit is `'static` and can move into a spawned task.
        ///
        /// # Errors
        ///
        /// As [`try_acquire`](Bulkhead::try_acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// let b = Arc::new(Bulkhead::new("jobs", 1, StdClock));
        /// let p = b.try_acquire_owned().unwrap();
        /// assert!(b.try_acquire_owned().is_err());
        /// drop(p);
        /// ```
        pub fn try_acquire_owned(self: &Arc<Self>) -> Result<OwnedPermit<C>, AcquireError> {
            self.try_acquire_many_owned(1)
        }

        /// [`try_acquire_many`](Bulkhead::try_acquire_many) for an `Arc`'d bulkhead.
        ///
        /// # Errors
        ///
        /// As [`try_acquire_many`](Bulkhead::try_acquire_many).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// let b = Arc::new(Bulkhead::new("jobs", 4, StdClock));
        /// assert_eq!(b.try_acquire_many_owned(3).unwrap().count(), 3);
        /// ```
        pub fn try_acquire_many_owned(
            self: &Arc<Self>,
            n: usize,
        ) -> Result<OwnedPermit<C>, AcquireError> {
            match self.take(n) {
                Ok(()) => Ok(OwnedPermit::new(Arc::clone(self), n)),
                Err(e) => Err(self.count_rejection(e)),
            }
        }
    }
}
