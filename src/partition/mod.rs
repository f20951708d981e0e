//! A bulkhead split into classes of callers, each with a guaranteed share
//! of the capacity and the right to burst into what the others leave idle.
//!
//! [`PartitionedBulkhead`] answers "who is refused under overload": a
//! search backend of 10 slots can promise checkout (critical) 5, browsing
//! 3 and the nightly export 2, so that a flood of exports never takes the
//! slot a checkout needs, while any class may use slots the others leave
//! idle. It is `no_std`, needs no allocator, and works on any
//! [`Clock`](crate::clock::Clock) (waiting on any [`Timer`]).
//!
//! # The rule
//!
//! **A class under its guaranteed share is never refused for capacity, only
//! by its own deadline.** Each class owns a room: a [`Bulkhead`] whose
//! capacity is its share (the shares add up to the capacity). A call of
//! class `k`:
//!
//! 1. takes a free slot of its own room (one compare-and-swap, the
//!    bulkhead's lock-free fast path);
//! 2. or else, if nobody of its class is waiting, **borrows** a free slot
//!    of another class's room, trying the least important class's room
//!    first (the last class given, then the one before it), so that the
//!    rooms of the more important classes stay free longest;
//! 3. or else waits in its own room's FIFO queue, up to its deadline
//!    ([`acquire_until`](PartitionedBulkhead::acquire_until)), or is refused
//!    at once ([`try_acquire`](PartitionedBulkhead::try_acquire)).
//!
//! A borrowed slot goes back to the room it came from, and a room's
//! released slot goes first to the callers waiting in that room, who are
//! all of its class, ahead of any borrower (a borrower only ever takes a
//! slot nobody waits for). So if class `k` has fewer than its share in
//! flight and its room is full, the room holds borrowers; the first of them
//! to finish hands its slot to class `k`'s first waiter. The total in flight
//! never exceeds the capacity: every slot is a slot of one room.
//!
//! A slot freed in a room where nobody waits is not left idle while others
//! wait: the release wakes the first waiter of the most important class
//! that has waiters, and that waiter borrows it (a first waiter of another
//! class that happens to run first may take it instead). So under overload
//! the partitions cost no capacity (see the simulation below).
//!
//! Decisions written down:
//!
//! - **Only a class's first waiter borrows**, and a newcomer of a class
//!   with waiters queues behind them instead of borrowing: FIFO inside a
//!   class.
//! - **The hand-off inside a room is exact; across rooms it is a wake-up.**
//!   A release that races a waiter's arrival in another room may not see
//!   it; the waiter is then served by its own room, or woken by the next
//!   release or departure anywhere (a waiter that leaves, served by its
//!   own room, timed out or dropped, passes the wake-up on).
//! - **A class that needs its share back waits for a borrower to finish**:
//!   calls in flight are never pre-empted. Give the critical class a wait
//!   at least as long as a call takes; with no wait at all
//!   (`try_acquire`), a class whose room is lent out is refused, since it
//!   has no time to wait.
//! - Shares are whole slots, each at least 1
//!   ([`from_percent`](PartitionedBulkhead::from_percent) rounds
//!   percentages of a capacity to slots). Read from configuration, they
//!   are a [`PartitionShares`] (with `serde`, from any format or the
//!   environment), which [`from_shares`](PartitionedBulkhead::from_shares)
//!   pairs with the class names given in code.
//!
//! # Shedding
//!
//! [`resize`](PartitionedBulkhead::resize) moves the total, the least
//! important class first: below the configured total the last class's
//! room shrinks first, down to 1 slot (every class keeps a room to wait
//! in), then the one before it; rising back, class 0 recovers its share
//! first; above it, the rooms grow in proportion to the shares
//! ([`room_capacities`] is the rule). An
//! [`AdaptiveLimit`](crate::limit::AdaptiveLimit) steers a partitioned
//! bulkhead through it: as its limit falls, the lowest class is refused
//! first while the critical class keeps its share.
//!
//! # Under overload
//!
//! `tests/partition_sim.rs` (run it with `cargo test --test partition_sim
//! -- --nocapture`): 10 slots in front of a backend of 10 workers, 10 ms
//! a call, offered 2–5× what it serves for 5 s, every caller waiting up
//! to 50 ms; critical sends 400 calls/s at every load (under its 50 %),
//! default and batch the rest, 3 : 5. Goodput per second, and the share
//! of the class's calls served:
//!
//! | load | one FIFO bulkhead: critical | default | batch | partitioned 50/30/20: critical | default | batch |
//! |---|---|---|---|---|---|---|
//! | 2× | 199 (50 %) | 299 | 499 | **398 (100 %)**, p99 18 ms | 299 | 300 |
//! | 3× | 125 (31 %) | 373 | 499 | **398 (100 %)**, p99 18 ms | 397 | 201 |
//! | 4× | 99 (25 %) | 398 | 499 | **398 (100 %)**, p99 19 ms | 398 | 201 |
//! | 5× | 99 (25 %) | 447 | 450 | **398 (100 %)**, p99 19 ms | 398 | 201 |
//!
//! Both keep the backend 99 % busy (997–998 calls/s of 1 000); with
//! partitions the overload is refused from the classes over their share.
//!
//! # Examples
//!
//! ```
//! use watertight::clock::StdClock;
//! use watertight::partition::PartitionedBulkhead;
//!
//! // 10 slots: checkout is promised 5, browse 3, export 2.
//! static SEARCH: PartitionedBulkhead<StdClock, 3> = PartitionedBulkhead::new(
//!     "search",
//!     [("checkout", 5), ("browse", 3), ("export", 2)],
//!     StdClock,
//! );
//! const CHECKOUT: usize = 0;
//! const EXPORT: usize = 2;
//!
//! // The export burst takes its 2 slots, then borrows browse's 3 and
//! // checkout's 5: the whole capacity, while nobody else wants it.
//! let export: Vec<_> = (0..10).map(|_| SEARCH.try_acquire(EXPORT).unwrap()).collect();
//! assert!(SEARCH.try_acquire(EXPORT).is_err());
//! assert_eq!(export.iter().filter(|p| p.is_borrowed()).count(), 8);
//!
//! // A checkout now finds its room lent out; the first export to finish
//! // from that room gives the slot back to checkout, not to export.
//! assert!(SEARCH.try_acquire(CHECKOUT).is_err());
//! drop(export);
//! assert!(SEARCH.try_acquire(CHECKOUT).unwrap().room() == CHECKOUT);
//! ```

use core::fmt;
use core::future::Future;
use core::mem::MaybeUninit;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;

use crate::bulkhead::{AcquireError, Bulkhead};
use crate::clock::{Instant, Timer};
use crate::futures::AcquireUntil;
use crate::sync::{const_fn, AtomicBool, AtomicUsize, Ordering};

mod config;
pub use config::PartitionShares;
#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
mod owned;
#[cfg(feature = "serde")]
pub(crate) use config::SharesFault;
#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use owned::OwnedClassPermit;

/// A bulkhead of `K` classes, each with a guaranteed share (its room) and
/// the right to borrow idle slots of the others. See the
/// [module documentation](self) for the rule and the decisions behind it.
///
/// Classes are numbered in the order given, `0` the most important: a
/// borrower tries the rooms from the last class's to the first's.
///
/// Memory: `K` bulkheads (128 B each on x86_64, aligned to a cache line
/// pair so that two rooms never share one), four words a class (its name,
/// configured share and borrow count) and a few for the whole.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::partition::PartitionedBulkhead;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let api = PartitionedBulkhead::from_percent("api", 10, [("critical", 50), ("batch", 50)], &clock)?;
/// assert_eq!(api.share(0), 5);
/// let permit = api.acquire_timeout(0, Duration::from_millis(100)).await?;
/// assert_eq!((permit.class(), permit.room()), (0, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct PartitionedBulkhead<C, const K: usize> {
    name: &'static str,
    rooms: [Bulkhead<C>; K],
    classes: [&'static str; K],
    /// Per class: calls admitted into another class's room.
    borrowed: [AtomicUsize; K],
    /// Waits queued in any room: a release reads it to know whether to
    /// nudge a waiter of another class to borrow the slot.
    queued: AtomicUsize,
    /// Per class: the share it was configured with (its room's capacity at
    /// the configured total).
    shares: [usize; K],
    /// The total last asked of [`resize`](Self::resize) (at first, the
    /// configured total): what the rooms are brought to.
    target: AtomicUsize,
    /// Held by the one resize bringing the rooms to `target`.
    resizing: AtomicBool,
}

/// Why a partitioned bulkhead gave no permit.
///
/// # Examples
///
/// ```
/// use watertight::AcquireError;
/// use watertight::clock::StdClock;
/// use watertight::partition::{PartitionError, PartitionedBulkhead};
///
/// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
/// assert_eq!(
///     b.try_acquire(2).unwrap_err(),
///     PartitionError::NoSuchClass { class: 2, classes: 2 }
/// );
/// let _held = (b.try_acquire(1).unwrap(), b.try_acquire(1).unwrap());
/// assert_eq!(b.try_acquire(0).unwrap_err(), PartitionError::Refused(AcquireError::Full));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionError {
    /// The class's room refused, as a [`Bulkhead`] does:
    /// [`Full`](AcquireError::Full) (its room and every room it could
    /// borrow from were full), [`TimedOut`](AcquireError::TimedOut),
    /// [`Closed`](AcquireError::Closed) or
    /// [`QueueFull`](AcquireError::QueueFull).
    Refused(AcquireError),
    /// There is no class of that number.
    NoSuchClass {
        /// The class asked for.
        class: usize,
        /// How many classes the bulkhead has.
        classes: usize,
    },
}

impl PartitionError {
    /// Whether this is a refusal under load (the caller asked for a class
    /// that exists), as opposed to a bad class number.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::partition::PartitionError;
    ///
    /// assert!(PartitionError::Refused(AcquireError::Full).is_refusal());
    /// assert!(!PartitionError::NoSuchClass { class: 3, classes: 2 }.is_refusal());
    /// ```
    pub fn is_refusal(&self) -> bool {
        matches!(self, PartitionError::Refused(_))
    }
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::Refused(e) => fmt::Display::fmt(e, f),
            PartitionError::NoSuchClass { class, classes } => write!(
                f,
                "no class {class}: the partitioned bulkhead has {classes} classes"
            ),
        }
    }
}

impl core::error::Error for PartitionError {}

impl From<AcquireError> for PartitionError {
    fn from(e: AcquireError) -> Self {
        PartitionError::Refused(e)
    }
}

/// Why [`PartitionedBulkhead::try_new`],
/// [`from_percent`](PartitionedBulkhead::from_percent) or
/// [`from_shares`](PartitionedBulkhead::from_shares) made no bulkhead, or
/// [`resize`](PartitionedBulkhead::resize) refused a total.
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::partition::{PartitionConfigError, PartitionedBulkhead};
///
/// let err = PartitionedBulkhead::try_new("db", [("web", 4), ("jobs", 0)], StdClock).unwrap_err();
/// assert_eq!(err, PartitionConfigError::ZeroShare { class: "jobs" });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionConfigError {
    /// No classes (`K = 0`).
    NoClasses,
    /// A class with no guaranteed slot: it could only ever borrow, and its
    /// waits would have no room to wait in.
    ZeroShare {
        /// The class's name.
        class: &'static str,
    },
    /// A share (or the capacity) above what one room can hold.
    ShareTooLarge {
        /// The class's name (the system's, for the capacity).
        class: &'static str,
        /// The slots asked for.
        requested: usize,
        /// [`Bulkhead::MAX_PERMITS`] on this target.
        max: usize,
    },
    /// Percentages that do not add up to 100.
    PercentNot100 {
        /// Their sum.
        sum: u32,
    },
    /// A bound on waiters above [`Bulkhead::MAX_WAITERS`]
    /// ([`PartitionShares::with_max_waiters`]).
    MaxWaitersTooLarge {
        /// The bound asked for.
        requested: usize,
        /// [`Bulkhead::MAX_WAITERS`] on this target.
        max: usize,
    },
    /// A total capacity ([`resize`](PartitionedBulkhead::resize)) below one
    /// slot per class: every class keeps at least 1 slot, a room to wait
    /// in.
    CapacityBelowClasses {
        /// The total asked for.
        requested: usize,
        /// How many classes the bulkhead has: the smallest total.
        classes: usize,
    },
}

impl fmt::Display for PartitionConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionConfigError::NoClasses => {
                f.write_str("a partitioned bulkhead needs at least one class")
            }
            PartitionConfigError::ZeroShare { class } => write!(
                f,
                "class {class:?} has a share of 0 slots: every class needs at least 1"
            ),
            PartitionConfigError::ShareTooLarge {
                class,
                requested,
                max,
            } => write!(
                f,
                "class {class:?} asks for {requested} slots, above the maximum of {max}"
            ),
            PartitionConfigError::PercentNot100 { sum } => {
                write!(f, "class percentages add up to {sum}, not 100")
            }
            PartitionConfigError::MaxWaitersTooLarge { requested, max } => write!(
                f,
                "a bound of {requested} waiters per class is above the maximum of {max}"
            ),
            PartitionConfigError::CapacityBelowClasses { requested, classes } => write!(
                f,
                "a total of {requested} slots is below 1 slot for each of the {classes} classes"
            ),
        }
    }
}

impl core::error::Error for PartitionConfigError {}

/// What the bulkhead gave: a slot of one room, for one class.
///
/// Dropping it gives the slot back to the room it came from (to that
/// room's first waiter, if any).
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::partition::PartitionedBulkhead;
///
/// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
/// let own = b.try_acquire(1).unwrap();
/// let lent = b.try_acquire(1).unwrap(); // jobs' room is full: web's lends
/// assert!(!own.is_borrowed() && lent.is_borrowed());
/// assert_eq!((lent.class(), lent.room()), (1, 0));
/// ```
#[must_use = "the slot is released as soon as it is dropped"]
#[clippy::has_significant_drop]
pub struct ClassPermit<'a, C> {
    class: usize,
    room: usize,
    rooms: Rooms<'a, C>,
}

impl<C> Drop for ClassPermit<'_, C> {
    #[inline]
    fn drop(&mut self) {
        self.rooms.give_back(self.room);
    }
}

impl<'a, C> ClassPermit<'a, C> {
    /// The class the call was admitted for.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// assert_eq!(b.try_acquire(1).unwrap().class(), 1);
    /// ```
    pub fn class(&self) -> usize {
        self.class
    }

    /// The class whose room the slot belongs to (its own class's, unless
    /// borrowed).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock);
    /// let _jobs = b.try_acquire(1).unwrap();
    /// assert_eq!(b.try_acquire(1).unwrap().room(), 0);
    /// ```
    pub fn room(&self) -> usize {
        self.room
    }

    /// Whether the slot was borrowed from another class's room.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// assert!(!b.try_acquire(0).unwrap().is_borrowed());
    /// ```
    pub fn is_borrowed(&self) -> bool {
        self.class != self.room
    }

    /// The permit's class and room, its slot kept taken: for the owned
    /// permit that takes it over.
    #[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
    pub(crate) fn into_parts(self) -> (usize, usize) {
        // This guard's `Drop` does not run: the slot stays taken, now the
        // caller's.
        let this = core::mem::ManuallyDrop::new(self);
        (this.class, this.room)
    }

    /// The guard of a slot of `room` already taken for `class`.
    fn new(rooms: Rooms<'a, C>, class: usize, room: usize) -> Self {
        ClassPermit { class, room, rooms }
    }
}

impl<C> fmt::Debug for ClassPermit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassPermit")
            .field("class", &self.class)
            .field("room", &self.room)
            .finish()
    }
}

/// One class's numbers, from [`PartitionedBulkhead::class_metrics`].
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::partition::PartitionedBulkhead;
///
/// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
/// let _a = b.try_acquire(1).unwrap();
/// let _b = b.try_acquire(1).unwrap();
/// let jobs = b.class_metrics(1).unwrap();
/// assert_eq!((jobs.name, jobs.share, jobs.borrowed), ("jobs", 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassMetrics {
    /// The class's name.
    pub name: &'static str,
    /// Its configured share ([`PartitionedBulkhead::share`]).
    pub share: usize,
    /// Its room's capacity now: its guaranteed slots at the current total
    /// (its share, until a [`resize`](PartitionedBulkhead::resize)).
    pub capacity: usize,
    /// Slots of its room in flight now (its own calls and borrowers').
    pub room_in_flight: usize,
    /// Callers of the class waiting in its room.
    pub waiting: usize,
    /// Calls admitted into its room, its own and borrowers'.
    pub room_accepted: usize,
    /// Calls of the class admitted into another class's room.
    pub borrowed: usize,
    /// Calls of the class refused: no slot and no time to wait.
    pub refused_full: usize,
    /// Calls of the class whose wait ended at their deadline.
    pub refused_timed_out: usize,
    /// Calls of the class refused because its room's queue was at its bound.
    pub refused_queue_full: usize,
}

const_fn! {
    const fn zeros<const K: usize>() -> [AtomicUsize; K] {
        #[cfg(not(loom))]
        let zeros = [const { AtomicUsize::new(0) }; K];
        // loom's atomics are not `const`.
        #[cfg(loom)]
        let zeros = core::array::from_fn(|_| AtomicUsize::new(0));
        zeros
    }
}

const fn check_shares<const K: usize>(
    classes: &[(&'static str, usize); K],
) -> Result<(), PartitionConfigError> {
    if K == 0 {
        return Err(PartitionConfigError::NoClasses);
    }
    let mut i = 0;
    while i < K {
        let (class, share) = classes[i];
        if share == 0 {
            return Err(PartitionConfigError::ZeroShare { class });
        }
        if share > Bulkhead::<()>::MAX_PERMITS {
            return Err(PartitionConfigError::ShareTooLarge {
                class,
                requested: share,
                max: Bulkhead::<()>::MAX_PERMITS,
            });
        }
        i += 1;
    }
    Ok(())
}

impl<C: Copy, const K: usize> PartitionedBulkhead<C, K> {
    const_fn! {
        /// A bulkhead named `name` whose classes are `(name, share)` in
        /// order of importance (class `0` first); its capacity is the sum of
        /// the shares. `const`, so it can live in a `static`.
        ///
        /// # Panics
        ///
        /// With no classes, a share of 0 or a share above
        /// [`Bulkhead::MAX_PERMITS`]: in a `static`, a compile-time error.
        /// For shares read at run time use [`try_new`](Self::try_new).
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::StdClock;
        /// use watertight::partition::PartitionedBulkhead;
        ///
        /// static DB: PartitionedBulkhead<StdClock, 2> =
        ///     PartitionedBulkhead::new("db", [("web", 6), ("jobs", 2)], StdClock);
        /// assert_eq!(DB.capacity(), 8);
        /// ```
        ///
        /// ```compile_fail
        /// use watertight::clock::StdClock;
        /// use watertight::partition::PartitionedBulkhead;
        ///
        /// static DB: PartitionedBulkhead<StdClock, 2> =
        ///     PartitionedBulkhead::new("db", [("web", 6), ("jobs", 0)], StdClock);
        /// ```
        pub const fn new(name: &'static str, classes: [(&'static str, usize); K], clock: C) -> Self {
            match check_shares(&classes) {
                Ok(()) => {}
                Err(PartitionConfigError::NoClasses) => panic!("a partitioned bulkhead needs at least one class"),
                Err(PartitionConfigError::ZeroShare { .. }) => panic!("every class needs a share of at least 1 slot"),
                Err(_) => panic!("a class's share is above Bulkhead::MAX_PERMITS"),
            }
            Self::build(name, classes, clock)
        }
    }

    const_fn! {
        const fn build(name: &'static str, classes: [(&'static str, usize); K], clock: C) -> Self {
            let mut rooms = [const { MaybeUninit::<Bulkhead<C>>::uninit() }; K];
            let mut names = [""; K];
            let mut shares = [0; K];
            let mut total = 0usize;
            let mut i = 0;
            while i < K {
                rooms[i] = MaybeUninit::new(Bulkhead::new(name, classes[i].1, clock));
                names[i] = classes[i].0;
                shares[i] = classes[i].1;
                total = total.saturating_add(classes[i].1);
                i += 1;
            }
            PartitionedBulkhead {
                name,
                // SAFETY: the loop above initialised every element, and
                // `[MaybeUninit<T>; K]` has the layout of `[T; K]`. The
                // source is never dropped (`MaybeUninit` has no drop glue),
                // so each bulkhead is owned once.
                rooms: unsafe { core::ptr::read((&raw const rooms).cast::<[Bulkhead<C>; K]>()) },
                classes: names,
                borrowed: zeros(),
                queued: AtomicUsize::new(0),
                shares,
                target: AtomicUsize::new(total),
                resizing: AtomicBool::new(false),
            }
        }
    }

    const_fn! {
        /// At most `max_waiters` callers of each class wait at once (in
        /// its room); one more is refused at once with
        /// `Refused(`[`QueueFull`](AcquireError::QueueFull)`)`. `const`, to
        /// follow [`new`](Self::new) in a `static`. Sized as the
        /// bulkhead's bound is ([`Bulkhead::with_max_waiters`]).
        ///
        /// # Panics
        ///
        /// If `max_waiters` is above [`Bulkhead::MAX_WAITERS`] (in a
        /// `static`, a compile-time error).
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::StdClock;
        /// use watertight::partition::PartitionedBulkhead;
        ///
        /// static DB: PartitionedBulkhead<StdClock, 2> =
        ///     PartitionedBulkhead::new("db", [("web", 6), ("jobs", 2)], StdClock).with_max_waiters(16);
        /// assert_eq!(DB.room(1).unwrap().max_waiters(), Some(16));
        /// ```
        pub const fn with_max_waiters(mut self, max_waiters: usize) -> Self {
            assert!(
                max_waiters <= Bulkhead::<()>::MAX_WAITERS,
                "max_waiters is above Bulkhead::MAX_WAITERS"
            );
            let mut i = 0;
            while i < K {
                self.rooms[i].bound_waiters(max_waiters);
                i += 1;
            }
            self
        }
    }
}

impl<C: Clone, const K: usize> PartitionedBulkhead<C, K> {
    /// As [`new`](Self::new), for shares read at run time, and for clocks
    /// that are `Clone` but not `Copy` (an `Arc<ManualClock>`).
    ///
    /// # Errors
    ///
    /// [`NoClasses`](PartitionConfigError::NoClasses),
    /// [`ZeroShare`](PartitionConfigError::ZeroShare) or
    /// [`ShareTooLarge`](PartitionConfigError::ShareTooLarge), naming the
    /// class.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let shares = [("web", 6), ("jobs", 2)]; // e.g. from configuration
    /// let db = PartitionedBulkhead::try_new("db", shares, StdClock)?;
    /// assert_eq!(db.share(1), 2);
    /// # Ok::<(), watertight::partition::PartitionConfigError>(())
    /// ```
    pub fn try_new(
        name: &'static str,
        classes: [(&'static str, usize); K],
        clock: C,
    ) -> Result<Self, PartitionConfigError> {
        check_shares(&classes)?;
        Ok(PartitionedBulkhead {
            name,
            rooms: core::array::from_fn(|i| Bulkhead::new(name, classes[i].1, clock.clone())),
            classes: classes.map(|(class, _)| class),
            borrowed: core::array::from_fn(|_| AtomicUsize::new(0)),
            queued: AtomicUsize::new(0),
            shares: classes.map(|(_, share)| share),
            target: AtomicUsize::new(
                classes
                    .iter()
                    .fold(0usize, |t, &(_, s)| t.saturating_add(s)),
            ),
            resizing: AtomicBool::new(false),
        })
    }

    /// Shares as percentages of `capacity` (adding up to 100), rounded to
    /// whole slots by largest remainder (the slots add up to `capacity`),
    /// each at least 1: `from_percent("api", 10, [("critical", 50),
    /// ("default", 30), ("batch", 20)], clock)` gives 5, 3 and 2 slots.
    ///
    /// # Errors
    ///
    /// [`PercentNot100`](PartitionConfigError::PercentNot100);
    /// [`ZeroShare`](PartitionConfigError::ZeroShare) when a class's
    /// percentage rounds to no slot (a capacity too small for that many
    /// classes, or a percentage of 0); [`NoClasses`](PartitionConfigError::NoClasses);
    /// [`ShareTooLarge`](PartitionConfigError::ShareTooLarge).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::{PartitionConfigError, PartitionedBulkhead};
    ///
    /// let b = PartitionedBulkhead::from_percent("api", 7, [("a", 50), ("b", 30), ("c", 20)], StdClock)?;
    /// assert_eq!((b.share(0), b.share(1), b.share(2)), (4, 2, 1));
    /// assert_eq!(
    ///     PartitionedBulkhead::from_percent("api", 2, [("a", 50), ("b", 30), ("c", 20)], StdClock).unwrap_err(),
    ///     PartitionConfigError::ZeroShare { class: "c" },
    /// );
    /// # Ok::<(), PartitionConfigError>(())
    /// ```
    pub fn from_percent(
        name: &'static str,
        capacity: usize,
        classes: [(&'static str, u8); K],
        clock: C,
    ) -> Result<Self, PartitionConfigError> {
        let names = classes.map(|(class, _)| class);
        let slots = config::percent_slots(capacity, &classes.map(|(_, p)| p))
            .map_err(|f| f.named(name, &names))?;
        Self::try_new(name, core::array::from_fn(|i| (names[i], slots[i])), clock)
    }
}

impl<C, const K: usize> PartitionedBulkhead<C, K> {
    /// The name given at construction (each room is a bulkhead of this
    /// name, so its metrics and events carry it).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1)], StdClock);
    /// assert_eq!(b.name(), "db");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The class's room: a [`Bulkhead`] of the class's share, for its
    /// metrics, [`close`](Bulkhead::close) or
    /// [`with_max_waiters`](Bulkhead::with_max_waiters)-style inspection.
    /// `None` past the last class.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// assert_eq!(b.room(0).unwrap().capacity(), 3);
    /// assert!(b.room(2).is_none());
    /// ```
    pub fn room(&self, class: usize) -> Option<&Bulkhead<C>> {
        self.rooms.get(class)
    }

    /// A class's configured share: its guaranteed slots at the configured
    /// total (0 past the last class). It stays as configured when
    /// [`resize`](Self::resize) moves the rooms; the slots guaranteed at
    /// the current total are [`capacity_of`](Self::capacity_of).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// assert_eq!((b.share(0), b.share(1), b.share(5)), (3, 1, 0));
    /// ```
    pub fn share(&self, class: usize) -> usize {
        self.shares.get(class).copied().unwrap_or(0)
    }

    /// The class's name, `None` past the last class.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// assert_eq!(b.class_name(1), Some("jobs"));
    /// ```
    pub fn class_name(&self, class: usize) -> Option<&'static str> {
        self.classes.get(class).copied()
    }

    /// The class numbered by its name, `None` if no class has it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// assert_eq!(b.class_of("jobs"), Some(1));
    /// assert_eq!(b.class_of("admin"), None);
    /// ```
    pub fn class_of(&self, name: &str) -> Option<usize> {
        self.classes.iter().position(|&c| c == name)
    }

    /// The total capacity: the sum of the rooms' capacities (of the
    /// shares, until a [`resize`](Self::resize)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// assert_eq!(b.capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.rooms.iter().map(Bulkhead::capacity).sum()
    }

    /// Slots in flight now, over every room (each room's count is exact;
    /// the sum is of loads made one after the other).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 1)], StdClock);
    /// let _p = b.try_acquire(1).unwrap();
    /// assert_eq!(b.in_flight(), 1);
    /// ```
    pub fn in_flight(&self) -> usize {
        self.rooms.iter().map(Bulkhead::in_flight).sum()
    }

    /// One class's numbers; `None` past the last class.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// let _held = (b.try_acquire(0).unwrap(), b.try_acquire(0).unwrap());
    /// assert!(b.try_acquire(1).is_err());
    /// let (web, jobs) = (b.class_metrics(0).unwrap(), b.class_metrics(1).unwrap());
    /// assert_eq!((web.borrowed, web.room_in_flight), (1, 1));
    /// assert_eq!((jobs.refused_full, jobs.room_in_flight), (1, 1));
    /// ```
    pub fn class_metrics(&self, class: usize) -> Option<ClassMetrics> {
        let room = self.rooms.get(class)?.metrics();
        Some(ClassMetrics {
            name: self.classes[class],
            share: self.shares[class],
            capacity: room.capacity,
            room_in_flight: room.in_flight,
            waiting: room.waiting,
            room_accepted: room.accepted,
            borrowed: self.borrowed[class].load(Ordering::Relaxed),
            refused_full: room.rejected_full,
            refused_timed_out: room.rejected_timed_out,
            refused_queue_full: room.rejected_queue_full,
        })
    }

    /// Closes every room: waiters and later calls fail with
    /// [`Closed`](AcquireError::Closed); slots held stay valid. Returns
    /// whether this call closed any room.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::{PartitionError, PartitionedBulkhead};
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// assert!(b.close());
    /// assert_eq!(b.try_acquire(0).unwrap_err(), PartitionError::Refused(AcquireError::Closed));
    /// ```
    pub fn close(&self) -> bool {
        self.rooms.iter().fold(false, |any, r| r.close() | any)
    }

    #[inline]
    fn rooms(&self) -> Rooms<'_, C> {
        Rooms {
            rooms: &self.rooms,
            borrowed: &self.borrowed,
            queued: &self.queued,
            #[cfg(feature = "tracing")]
            classes: &self.classes,
        }
    }

    /// A slot for `class` if one is free now, in its room or borrowed;
    /// never waits. Lock-free: a free slot of its own room is one
    /// compare-and-swap.
    ///
    /// # Errors
    ///
    /// [`Refused`](PartitionError::Refused)`(`[`Full`](AcquireError::Full)`)`
    /// when its room and every room it may borrow from are full (or its
    /// room has waiters and no room is free); `Refused(Closed)`;
    /// [`NoSuchClass`](PartitionError::NoSuchClass).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// let first = b.try_acquire(0).unwrap();
    /// let second = b.try_acquire(0).unwrap(); // borrowed from jobs
    /// assert!(b.try_acquire(1).is_err()); // jobs' room is lent out, and it cannot wait
    /// drop(second);
    /// assert!(!b.try_acquire(1).unwrap().is_borrowed());
    /// # drop(first);
    /// ```
    #[inline]
    pub fn try_acquire(&self, class: usize) -> Result<ClassPermit<'_, C>, PartitionError> {
        match self.rooms().take(class) {
            Ok(p) => Ok(p),
            Err(PartitionError::Refused(e)) => Err(self
                .rooms()
                .traced(class, self.rooms[class].count_rejection(e))),
            Err(e) => Err(e),
        }
    }

    /// Waits for a slot for `class` until `deadline`: a free one now (its
    /// room's or borrowed), or else the next its own room releases, in FIFO
    /// order among the class's waiters. No allocation: the future holds its
    /// place in the room's queue.
    ///
    /// # Errors
    ///
    /// `Refused(TimedOut)` when the deadline passes; `Refused(Closed)`;
    /// `Refused(QueueFull)` when the class's room bounds its waiters and
    /// the bound is reached; [`NoSuchClass`](PartitionError::NoSuchClass).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes takes no slot and leaves its
    /// place in the queue, as [`Bulkhead::acquire_until`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    /// let deadline = clock.now() + Duration::from_millis(50);
    /// let p = b.acquire_until(1, deadline).await.unwrap();
    /// assert_eq!(p.room(), 1);
    /// # });
    /// ```
    pub fn acquire_until(&self, class: usize, deadline: Instant) -> AcquireClass<'_, C>
    where
        C: Timer,
    {
        AcquireClass {
            rooms: self.rooms(),
            class,
            deadline,
            state: Stage::Start,
        }
    }

    /// [`acquire_until`](Self::acquire_until) now + `max_wait`, the deadline
    /// fixed when the future is made.
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::AcquireError;
    /// use watertight::clock::ManualClock;
    /// use watertight::partition::{PartitionError, PartitionedBulkhead};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = PartitionedBulkhead::new("db", [("web", 1)], &clock);
    /// let _held = b.try_acquire(0).unwrap();
    /// let err = b.acquire_timeout(0, Duration::ZERO).await.unwrap_err();
    /// assert_eq!(err, PartitionError::Refused(AcquireError::TimedOut));
    /// # });
    /// ```
    pub fn acquire_timeout(&self, class: usize, max_wait: Duration) -> AcquireClass<'_, C>
    where
        C: Timer,
    {
        let deadline = match self.rooms.first() {
            Some(room) => room.clock().now().saturating_add(max_wait),
            None => Instant::ZERO,
        };
        self.acquire_until(class, deadline)
    }
}

impl<C, const K: usize> PartitionedBulkhead<C, K> {
    /// Sets the total capacity to `total` slots by changing the rooms'
    /// capacities, the least important class shed first; returns the total
    /// asked before (the configured total if never resized). Never blocks,
    /// takes no lock: each room is [resized](Bulkhead::resize) in one
    /// atomic step.
    ///
    /// The rooms become [`room_capacities`]`(shares, total)` of the
    /// configured shares:
    ///
    /// - **below the configured total**, the last class's room gives up
    ///   slots first, down to 1, then the room of the class before it, and
    ///   so on: the most important class is the last to lose any of its
    ///   share. Every room keeps at least 1 slot, so that every class keeps
    ///   a room to wait in (FIFO, as before the shrink) and is never
    ///   refused for want of one; hence a total below `K` is an error;
    /// - **rising back**, the most important class recovers its share
    ///   first, then the next (the same rule read the other way: the rooms
    ///   depend on `total` alone, not on the way there);
    /// - **above the configured total**, the rooms grow in proportion to
    ///   the configured shares.
    ///
    /// A shrink takes effect as slots come back, as for a [`Bulkhead`]: no
    /// slot held is revoked (a borrowed one included), and a room with at
    /// least its new capacity out grants none, to its class or to a
    /// borrower, until fewer are out. A grow frees the new slots at once,
    /// to the room's waiters, or else a waiter of another class is woken
    /// to borrow them.
    ///
    /// [`AdaptiveLimit`](crate::limit::AdaptiveLimit) calls this when its
    /// algorithm moves the limit of a partitioned bulkhead, so that a
    /// falling limit sheds the least important class first.
    ///
    /// # Concurrent resizes
    ///
    /// One resize at a time applies the total asked last: a resize that
    /// finds another under way leaves its total to that one and returns at
    /// once; the one under way reads the total again after its last room,
    /// and starts over if it moved. So once racing resizes have returned,
    /// the rooms are the split of one total, the last asked, never a mix
    /// of two; while one is under way, [`capacity`](Self::capacity) may
    /// read a total between the old and the new.
    ///
    /// # Errors
    ///
    /// [`CapacityBelowClasses`](PartitionConfigError::CapacityBelowClasses)
    /// when `total` is below `K`;
    /// [`ShareTooLarge`](PartitionConfigError::ShareTooLarge) (naming the
    /// bulkhead) when `total` is above
    /// [`max_capacity`](Self::max_capacity). The rooms are then unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::{PartitionConfigError, PartitionedBulkhead};
    ///
    /// let b = PartitionedBulkhead::new("search", [("checkout", 5), ("browse", 3), ("export", 2)], StdClock);
    /// let rooms = |b: &PartitionedBulkhead<_, 3>| [b.capacity_of(0), b.capacity_of(1), b.capacity_of(2)];
    ///
    /// // 4 slots fewer: export is shed to 1, browse to 1, then checkout loses 1.
    /// assert_eq!(b.resize(6), Ok(10));
    /// assert_eq!(rooms(&b), [4, 1, 1]);
    /// // Back up to 8: checkout recovers its share first.
    /// b.resize(8)?;
    /// assert_eq!(rooms(&b), [5, 2, 1]);
    /// // Above 10, in proportion to the shares; share() stays as configured.
    /// b.resize(20)?;
    /// assert_eq!((rooms(&b), b.share(0), b.capacity()), ([10, 6, 4], 5, 20));
    /// assert_eq!(
    ///     b.resize(2),
    ///     Err(PartitionConfigError::CapacityBelowClasses { requested: 2, classes: 3 })
    /// );
    ///
    /// // A shrink revokes nothing: export holds 2, its room is now 1.
    /// b.resize(10)?;
    /// let held = [b.try_acquire(2)?, b.try_acquire(2)?];
    /// b.resize(9)?;
    /// assert_eq!(b.capacity_of(2), 1);
    /// drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resize(&self, total: usize) -> Result<usize, PartitionConfigError> {
        if total < K {
            return Err(PartitionConfigError::CapacityBelowClasses {
                requested: total,
                classes: K,
            });
        }
        let max = self.max_capacity();
        if total > max {
            return Err(PartitionConfigError::ShareTooLarge {
                class: self.name,
                requested: total,
                max,
            });
        }
        // SeqCst, with the flag's: a resize that stores its total and then
        // finds the flag taken, and the holder that gives the flag back and
        // then reads the total, cannot both miss the other.
        let old = self.target.swap(total, Ordering::SeqCst);
        self.apply_target();
        Ok(old)
    }

    /// Brings the rooms to the split of `target`, unless another resize
    /// is (it will see the new target).
    fn apply_target(&self) {
        loop {
            if self
                .resizing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                return;
            }
            let mut applied;
            loop {
                applied = self.target.load(Ordering::SeqCst);
                if let Some(capacities) = room_capacities(&self.shares, applied) {
                    // Shrinks first, then grows: between the two, the
                    // total is at most the larger of the old and the new.
                    for shrink in [true, false] {
                        for (room, &capacity) in self.rooms.iter().zip(&capacities) {
                            if (capacity < room.capacity()) == shrink {
                                // Each capacity is in 1..=MAX_PERMITS (see
                                // `max_capacity`): never an error.
                                let _ = room.resize(capacity);
                            }
                        }
                    }
                }
                if self.target.load(Ordering::SeqCst) == applied {
                    break;
                }
            }
            self.resizing.store(false, Ordering::SeqCst);
            // A slot a grow freed in a room nobody waits in is for a
            // waiter of another class to borrow.
            self.rooms().nudge_if_waiting();
            if self.target.load(Ordering::SeqCst) == applied {
                return;
            }
        }
    }

    /// The class's room's capacity now: its [share](Self::share) until a
    /// [`resize`](Self::resize) moves it; the slots the class is
    /// guaranteed at the current total. 0 past the last class.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 2)], StdClock);
    /// b.resize(3).unwrap();
    /// assert_eq!((b.capacity_of(0), b.capacity_of(1), b.capacity_of(2)), (2, 1, 0));
    /// assert_eq!((b.share(0), b.share(1)), (3, 2));
    /// ```
    pub fn capacity_of(&self, class: usize) -> usize {
        self.rooms.get(class).map_or(0, Bulkhead::capacity)
    }

    /// The configured total: the sum of the configured shares, what
    /// [`capacity`](Self::capacity) is until a [`resize`](Self::resize).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 2)], StdClock);
    /// b.resize(4).unwrap();
    /// assert_eq!((b.capacity(), b.configured_capacity()), (4, 5));
    /// ```
    pub fn configured_capacity(&self) -> usize {
        self.shares.iter().fold(0usize, |t, &s| t.saturating_add(s))
    }

    /// The largest total [`resize`](Self::resize) takes: the larger of
    /// [`Bulkhead::MAX_PERMITS`] and the configured total (no room can
    /// then exceed [`Bulkhead::MAX_PERMITS`]: each is at most the total,
    /// or at most its configured share).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let b = PartitionedBulkhead::new("db", [("web", 3), ("jobs", 2)], StdClock);
    /// assert_eq!(b.max_capacity(), Bulkhead::<StdClock>::MAX_PERMITS);
    /// assert!(b.resize(b.max_capacity() + 1).is_err());
    /// ```
    pub fn max_capacity(&self) -> usize {
        self.configured_capacity().max(Bulkhead::<C>::MAX_PERMITS)
    }
}

/// The rooms' capacities of a partitioned bulkhead whose classes were
/// configured with `shares` (class `0` the most important), at a total of
/// `total` slots: what [`PartitionedBulkhead::resize`] applies. `None` if
/// `total` is below `K` (every room keeps at least 1 slot, so that every
/// class has a room to wait in), if a share is 0, or if `K` is 0.
///
/// With `S` the sum of the shares:
///
/// - `total` ≤ `S`: the `S − total` slots are taken from the last class's
///   room first, down to 1 slot, then from the class before it, and so on.
///   The most important class loses slots last and, the total rising,
///   gets its share back first.
/// - `total` > `S`: each room gets a part of `total` in proportion to its
///   share, in whole slots by the D'Hondt (Jefferson) method, ties to the
///   more important class. Every room then has at least its share, and,
///   as below `S`, **no room ever shrinks when the total grows** (the
///   largest-remainder rounding of [`from_percent`](PartitionedBulkhead::from_percent)
///   can take a slot from one class when the total grows by one, the
///   "Alabama paradox": a limit moving up by one should move one room up
///   by one).
///
/// Why in proportion, rather than everything to class `0`: the shares say
/// how the capacity is divided under overload; a backend found to take
/// twice as much is no reason to change that division, and class `0` may
/// borrow whatever the others leave idle anyway.
///
/// Pure arithmetic in `u128`: no overflow, no panic, for any input.
///
/// # Examples
///
/// ```
/// use watertight::partition::room_capacities;
///
/// let shares = [5, 3, 2];
/// assert_eq!(room_capacities(&shares, 10), Some([5, 3, 2]));
/// assert_eq!(room_capacities(&shares, 9), Some([5, 3, 1])); // the last class first
/// assert_eq!(room_capacities(&shares, 7), Some([5, 1, 1])); // then the one before
/// assert_eq!(room_capacities(&shares, 3), Some([1, 1, 1])); // 1 slot each at least
/// assert_eq!(room_capacities(&shares, 2), None);
/// assert_eq!(room_capacities(&shares, 13), Some([7, 4, 2])); // in proportion
/// assert_eq!(room_capacities(&shares, 20), Some([10, 6, 4]));
/// ```
pub const fn room_capacities<const K: usize>(
    shares: &[usize; K],
    total: usize,
) -> Option<[usize; K]> {
    if K == 0 || total < K {
        return None;
    }
    let mut configured: u128 = 0;
    let mut i = 0;
    while i < K {
        if shares[i] == 0 {
            return None;
        }
        configured += shares[i] as u128;
        i += 1;
    }
    let mut rooms = *shares;
    let wanted = total as u128;
    if wanted <= configured {
        // Shed from the last class's room up, each down to 1 slot.
        let mut deficit = configured - wanted;
        let mut i = K;
        while deficit > 0 && i > 0 {
            i -= 1;
            let spare = (shares[i] - 1) as u128;
            let take = if deficit < spare { deficit } else { spare };
            // `take` is at most `shares[i] - 1`: it fits.
            rooms[i] = shares[i] - take as usize;
            deficit -= take;
        }
    } else {
        // D'Hondt: the floor of each exact part (which D'Hondt never goes
        // below), then each slot left (fewer than K) to the class with the
        // highest share ÷ (slots + 1), ties to the more important.
        let mut given: u128 = 0;
        let mut i = 0;
        while i < K {
            // At most `total`: it fits.
            let part = wanted * shares[i] as u128 / configured;
            rooms[i] = part as usize;
            given += part;
            i += 1;
        }
        let mut left = wanted - given;
        while left > 0 {
            let mut best = 0;
            let mut j = 1;
            while j < K {
                if shares[j] as u128 * (rooms[best] as u128 + 1)
                    > shares[best] as u128 * (rooms[j] as u128 + 1)
                {
                    best = j;
                }
                j += 1;
            }
            rooms[best] += 1;
            left -= 1;
        }
    }
    Some(rooms)
}

impl<C, const K: usize> fmt::Debug for PartitionedBulkhead<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("PartitionedBulkhead");
        d.field("name", &self.name);
        for (name, room) in self.classes.iter().zip(&self.rooms) {
            d.field(
                name,
                &format_args!("{}/{}", room.in_flight(), room.capacity()),
            );
        }
        d.finish()
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<'a, C: Timer> {
        Start,
        Queued { #[pin] wait: AcquireUntil<'a, C> },
        Done,
    }
}

pin_project! {
    /// The future of [`PartitionedBulkhead::acquire_until`] and
    /// [`acquire_timeout`](PartitionedBulkhead::acquire_timeout).
    ///
    /// Its first poll takes a free slot (its class's room's, or borrowed);
    /// if none is free it waits in its class's room, holding its queue node
    /// inside itself (no allocation).
    ///
    /// # Cancel safety
    ///
    /// Dropping it before completion takes no slot and leaves its place in
    /// the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::partition::{AcquireClass, PartitionedBulkhead};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    /// let wait: AcquireClass<'_, &ManualClock> = b.acquire_timeout(0, Duration::from_millis(5));
    /// assert_eq!(wait.await.unwrap().class(), 0);
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct AcquireClass<'a, C: Timer> {
        rooms: Rooms<'a, C>,
        class: usize,
        deadline: Instant,
        #[pin]
        state: Stage<'a, C>,
    }

    impl<'a, C: Timer> PinnedDrop for AcquireClass<'a, C> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if let StageProj::Queued { .. } = this.state.as_mut().project() {
                // The inner wait leaves its queue first, then the others
                // are nudged (it may have been the one woken).
                this.state.set(Stage::Done);
                if this.rooms.queued.fetch_sub(1, Ordering::SeqCst) > 1 {
                    this.rooms.nudge();
                }
            }
        }
    }
}

impl<'a, C: Timer> Future for AcquireClass<'a, C> {
    type Output = Result<ClassPermit<'a, C>, PartitionError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let rooms: Rooms<'a, C> = *this.rooms;
        let class = *this.class;
        loop {
            match this.state.as_mut().project() {
                StageProj::Start => match rooms.take(class) {
                    Ok(p) => {
                        this.state.set(Stage::Done);
                        return Poll::Ready(Ok(p));
                    }
                    Err(PartitionError::Refused(AcquireError::Full)) => {
                        // Counted before the wait links its node, so a
                        // release that misses the node still sees the count.
                        rooms.queued.fetch_add(1, Ordering::SeqCst);
                        let wait = rooms.rooms[class].acquire_until(*this.deadline);
                        this.state.set(Stage::Queued { wait });
                    }
                    Err(PartitionError::Refused(e)) => {
                        this.state.set(Stage::Done);
                        return Poll::Ready(Err(
                            rooms.traced(class, rooms.rooms[class].count_rejection(e))
                        ));
                    }
                    Err(e) => {
                        this.state.set(Stage::Done);
                        return Poll::Ready(Err(e));
                    }
                },
                StageProj::Queued { mut wait } => {
                    let out = match wait.as_mut().poll(cx) {
                        // Handed a slot of its own room: its permit's
                        // slot stays taken, given back by the class permit.
                        Poll::Ready(out) => out.map(|permit| {
                            core::mem::forget(permit);
                            class
                        }),
                        Poll::Pending => {
                            // First in line of its class: a slot another
                            // room frees, that nobody there waits for, is
                            // its to borrow (a release nudged it, or it
                            // just queued behind nobody).
                            let mut got = None;
                            if !wait.as_mut().leave_first_if(|| {
                                got = rooms.take_other(class);
                                got.is_some()
                            }) {
                                return Poll::Pending;
                            }
                            Ok(got.expect("left the queue for a slot"))
                        }
                    };
                    // Set to Done first: the inner wait is dropped (and
                    // its place given back) before others are nudged.
                    this.state.set(Stage::Done);
                    if rooms.queued.fetch_sub(1, Ordering::SeqCst) > 1 {
                        rooms.nudge();
                    }
                    return Poll::Ready(match out {
                        Ok(room) => Ok(ClassPermit::new(rooms, class, room)),
                        // Counted by the room's wait.
                        Err(e) => Err(rooms.traced(class, e)),
                    });
                }
                // A future polled again after it completed (a caller's
                // bug, as for any future): it has nothing more to give.
                StageProj::Done => return Poll::Pending,
            }
        }
    }
}

impl<C: Timer> fmt::Debug for AcquireClass<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireClass")
            .field("bulkhead", &self.rooms.rooms.first().map(Bulkhead::name))
            .field("class", &self.class)
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// The rooms and the borrow counters, as the take and the waiting future
/// see them (a view with no `K`, which the future's type cannot carry).
struct Rooms<'a, C> {
    rooms: &'a [Bulkhead<C>],
    borrowed: &'a [AtomicUsize],
    queued: &'a AtomicUsize,
    /// The class names, for the refusal event.
    #[cfg(feature = "tracing")]
    classes: &'a [&'static str],
}

impl<C> Clone for Rooms<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Rooms<'_, C> {}

impl<'a, C> Rooms<'a, C> {
    fn room_of(self, class: usize) -> Result<&'a Bulkhead<C>, PartitionError> {
        self.rooms.get(class).ok_or(PartitionError::NoSuchClass {
            class,
            classes: self.rooms.len(),
        })
    }

    /// A refusal of `class`, counted by its room (whose bulkhead event
    /// says `system` and `reason`): the partition's own event, which names
    /// the class (feature `tracing`).
    #[inline]
    fn traced(self, class: usize, e: AcquireError) -> PartitionError {
        #[cfg(feature = "tracing")]
        trace_refusal(self.rooms[class].name(), self.classes[class], e);
        #[cfg(not(feature = "tracing"))]
        let _ = class;
        PartitionError::Refused(e)
    }

    /// A free slot for `class` without waiting: its own room's, or else one
    /// borrowed (unless the class has waiters); the refusal uncounted.
    #[inline]
    fn take(self, class: usize) -> Result<ClassPermit<'a, C>, PartitionError> {
        let own = self.room_of(class)?;
        match own.try_acquire_uncounted() {
            Ok(()) => Ok(ClassPermit::new(self, class, class)),
            Err(AcquireError::Full) => self.borrow(class, own),
            Err(e) => Err(PartitionError::Refused(e)),
        }
    }

    /// The class's own room is full (or has waiters): a free slot of
    /// another room, the least important class's first, if nobody of the
    /// class waits.
    #[cold]
    #[inline(never)]
    fn borrow(self, class: usize, own: &Bulkhead<C>) -> Result<ClassPermit<'a, C>, PartitionError> {
        if own.waiting() == 0 {
            if let Some(room) = self.take_other(class) {
                return Ok(ClassPermit::new(self, class, room));
            }
        }
        Err(PartitionError::Refused(AcquireError::Full))
    }

    /// A free slot of a room other than `class`'s, the least important
    /// class's first, taken and counted as borrowed: its room.
    fn take_other(self, class: usize) -> Option<usize> {
        let room = (0..self.rooms.len())
            .rev()
            .filter(|&r| r != class)
            .find(|&r| self.rooms[r].try_acquire_uncounted().is_ok())?;
        self.borrowed[class].fetch_add(1, Ordering::Relaxed);
        Some(room)
    }

    /// Gives back one slot of `room` (to its first waiter, if any), then
    /// [`nudge_if_waiting`](Self::nudge_if_waiting): the one release path
    /// of the borrowed and the owned class permits.
    #[inline]
    fn give_back(self, room: usize) {
        self.rooms[room].release(1);
        self.nudge_if_waiting();
    }

    /// [`nudge`](Self::nudge)s if someone waits anywhere: one load when
    /// nobody does.
    #[inline]
    fn nudge_if_waiting(self) {
        if self.queued.load(Ordering::SeqCst) != 0 {
            self.nudge();
        }
    }

    /// Someone waits somewhere and a slot may be free: if a room has a
    /// free slot that nobody there waits for, wake the first waiter of the
    /// most important class that has waiters, to borrow it. Called after a
    /// release, and when a waiter leaves (served by its own room, timed
    /// out, dropped), so that a wake-up it did not use passes on.
    #[cold]
    #[inline(never)]
    fn nudge(self) {
        let free = |r: &Bulkhead<C>| r.available() != 0 && r.waiting() == 0;
        if !self.rooms.iter().any(free) {
            return;
        }
        if let Some(waiting) = self.rooms.iter().find(|r| r.waiting() != 0) {
            waiting.nudge_first();
        }
    }
}

/// The one event per refusal (feature `tracing`), at DEBUG as the
/// bulkhead's, which the class's room emits too: this one names the class.
#[cfg(feature = "tracing")]
#[cold]
fn trace_refusal(system: &'static str, class: &'static str, e: AcquireError) {
    tracing::debug!(
        target: "watertight::partition",
        system,
        class,
        reason = match e {
            AcquireError::TimedOut => "timed_out",
            AcquireError::Closed => "closed",
            AcquireError::QueueFull => "queue_full",
            _ => "full",
        },
        "partitioned bulkhead refused a call"
    );
}
