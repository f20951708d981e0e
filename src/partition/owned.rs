//! Class permits that own an `Arc` of their bulkhead, so they can move into
//! a spawned task (`'static`), for a partitioned bulkhead built at run time
//! (from configuration) rather than in a `static`.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::time::Duration;

use super::{ClassPermit, PartitionError, PartitionedBulkhead};
use crate::clock::{Instant, Timer};

/// A slot of a [`PartitionedBulkhead`] held through an `Arc`: `'static`,
/// so it can move into a spawned task. Given back to the room it came from
/// when dropped, as a [`ClassPermit`] is.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use watertight::clock::StdClock;
/// use watertight::partition::PartitionedBulkhead;
///
/// let db = Arc::new(PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock));
/// let permit = db.try_acquire_owned(1).unwrap();
/// let worker = std::thread::spawn(move || (permit.class(), permit.room()));
/// assert_eq!(worker.join().unwrap(), (1, 1));
/// assert_eq!(db.in_flight(), 0);
/// ```
#[must_use = "the slot is released as soon as it is dropped"]
#[clippy::has_significant_drop]
pub struct OwnedClassPermit<C, const K: usize> {
    bulkhead: Arc<PartitionedBulkhead<C, K>>,
    class: usize,
    room: usize,
}

impl<C, const K: usize> OwnedClassPermit<C, K> {
    /// The class the call was admitted for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let db = Arc::new(PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock));
    /// assert_eq!(db.try_acquire_owned(1).unwrap().class(), 1);
    /// ```
    pub fn class(&self) -> usize {
        self.class
    }

    /// The class whose room the slot belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let db = Arc::new(PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock));
    /// let _jobs = db.try_acquire_owned(1).unwrap();
    /// assert_eq!(db.try_acquire_owned(1).unwrap().room(), 0); // borrowed from web
    /// ```
    pub fn room(&self) -> usize {
        self.room
    }

    /// Whether the slot was borrowed from another class's room.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let db = Arc::new(PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock));
    /// assert!(!db.try_acquire_owned(0).unwrap().is_borrowed());
    /// ```
    pub fn is_borrowed(&self) -> bool {
        self.class != self.room
    }

    /// The bulkhead the slot belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// let db = Arc::new(PartitionedBulkhead::new("db", [("web", 1)], StdClock));
    /// let permit = db.try_acquire_owned(0).unwrap();
    /// assert_eq!(permit.bulkhead().name(), "db");
    /// ```
    pub fn bulkhead(&self) -> &Arc<PartitionedBulkhead<C, K>> {
        &self.bulkhead
    }
}

impl<C, const K: usize> Drop for OwnedClassPermit<C, K> {
    fn drop(&mut self) {
        self.bulkhead.rooms().give_back(self.room);
    }
}

impl<C, const K: usize> fmt::Debug for OwnedClassPermit<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedClassPermit")
            .field("bulkhead", &self.bulkhead.name())
            .field("class", &self.class)
            .field("room", &self.room)
            .finish()
    }
}

/// Turns a borrowed permit of `bulkhead` into an owned one, without
/// giving its slot back in between.
fn own<C, const K: usize>(
    bulkhead: &Arc<PartitionedBulkhead<C, K>>,
    permit: ClassPermit<'_, C>,
) -> OwnedClassPermit<C, K> {
    let (class, room) = permit.into_parts();
    OwnedClassPermit {
        bulkhead: Arc::clone(bulkhead),
        class,
        room,
    }
}

impl<C, const K: usize> PartitionedBulkhead<C, K> {
    /// [`try_acquire`](Self::try_acquire), holding the bulkhead through its
    /// `Arc`.
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
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// // Shares read at run time: no `static`, an `Arc` instead.
    /// let db = Arc::new(PartitionedBulkhead::try_new("db", [("web", 2), ("jobs", 1)], StdClock)?);
    /// let permit = db.try_acquire_owned(0)?;
    /// assert_eq!(db.in_flight(), 1);
    /// drop(permit);
    /// assert_eq!(db.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(
        self: &Arc<Self>,
        class: usize,
    ) -> Result<OwnedClassPermit<C, K>, PartitionError> {
        self.try_acquire(class).map(|p| own(self, p))
    }

    /// [`acquire_until`](Self::acquire_until), holding the bulkhead through
    /// its `Arc`: the future and the permit are `'static`.
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_until`](Self::acquire_until): dropped before it
    /// completes, it takes no slot and leaves its place in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use std::sync::Arc;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::partition::PartitionedBulkhead;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let db = Arc::new(PartitionedBulkhead::try_new("db", [("web", 1)], clock.clone()).unwrap());
    /// let deadline = clock.now() + Duration::from_millis(10);
    /// let permit = db.acquire_owned_until(0, deadline).await.unwrap();
    /// assert_eq!(permit.class(), 0);
    /// # });
    /// ```
    pub fn acquire_owned_until(
        self: &Arc<Self>,
        class: usize,
        deadline: Instant,
    ) -> impl Future<Output = Result<OwnedClassPermit<C, K>, PartitionError>> + use<C, K>
    where
        C: Timer,
    {
        let this = Arc::clone(self);
        async move {
            let permit = this.acquire_until(class, deadline).await?;
            Ok(own(&this, permit))
        }
    }

    /// [`acquire_timeout`](Self::acquire_timeout), holding the bulkhead
    /// through its `Arc`; the deadline is fixed when the future is made.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Self::acquire_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_owned_until`](Self::acquire_owned_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use std::sync::Arc;
    /// use watertight::AcquireError;
    /// use watertight::clock::ManualClock;
    /// use watertight::partition::{PartitionError, PartitionedBulkhead};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let db = Arc::new(PartitionedBulkhead::try_new("db", [("web", 1)], clock).unwrap());
    /// let _held = db.try_acquire_owned(0).unwrap();
    /// let err = db.acquire_owned_timeout(0, Duration::ZERO).await.unwrap_err();
    /// assert_eq!(err, PartitionError::Refused(AcquireError::TimedOut));
    /// # });
    /// ```
    pub fn acquire_owned_timeout(
        self: &Arc<Self>,
        class: usize,
        max_wait: Duration,
    ) -> impl Future<Output = Result<OwnedClassPermit<C, K>, PartitionError>> + use<C, K>
    where
        C: Timer,
    {
        let deadline = match self.rooms.first() {
            Some(room) => room.clock().now().saturating_add(max_wait),
            None => Instant::ZERO,
        };
        self.acquire_owned_until(class, deadline)
    }
}
