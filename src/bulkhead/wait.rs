//! Waiting for permits: the futures behind `acquire*`.
//!
//! Each wait first tries for its permits without a lock, as `try_acquire`
//! does. If none is free it links its own node (pinned inside the future)
//! into the bulkhead's wait queue (`queue.rs`), and a release hands it the
//! permits directly: the waiter finds them in its node, already taken for
//! it. No wait allocates, with or without `alloc`.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;

use super::queue::{Enqueued, Left, Node};
use super::{AcquireError, Bulkhead, Permit};
use crate::clock::{Instant, Timer};
use crate::sync::Ordering;

pin_project! {
    /// The state of one wait, shared by every acquire future (and the
    /// policy's and tower's futures): where it is, and its queue node.
    ///
    /// On a cache line of its own (64 B, the size it has anyway) except on
    /// microcontrollers: a release on another core writes the node (its
    /// state, links and waker) and the waiter then reads it and writes its
    /// phase. Sharing a line with whatever the task keeps beside the future,
    /// or straddling two, cost the hand-off one more cache-line transfer
    /// each way: about 75 ns of the woken poll's 180 ns on the 2-core
    /// machine of `benches/handoff.rs`. The futures that hold one grow to a
    /// multiple of 64 B (`Acquire` from 72 B to 128 B).
    #[derive(Debug)]
    #[cfg_attr(not(target_os = "none"), repr(C, align(64)))]
    pub(crate) struct Waiter {
        phase: Phase,
        #[pin]
        node: Node,
    }
}

// The node and the phase fit the one line (`guide::benchmarks`, the
// hand-off): a larger `Waiter` would straddle two again. (Not under
// loom, whose atomics and cells are larger.)
#[cfg(all(not(loom), not(target_os = "none"), target_pointer_width = "64"))]
const _: () =
    assert!(core::mem::align_of::<Waiter>() == 64 && core::mem::size_of::<Waiter>() == 64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not polled yet.
    Start,
    /// Linked into the queue.
    Queued,
    /// Finished: the permits were handed out or an error returned.
    Done,
}

impl Waiter {
    pub(crate) fn new(n: usize) -> Self {
        Waiter {
            phase: Phase::Start,
            node: Node::new(n),
        }
    }

    /// Permits this wait asks for.
    pub(crate) fn permits(&self) -> usize {
        self.node.permits()
    }

    /// Drives the wait. `Ready(Ok(()))` means the permits are now held by the
    /// caller. `expired` is asked once, on the first poll, if no permit was
    /// free: a wait whose deadline has already passed then fails at once
    /// instead of queueing.
    ///
    /// The first poll's take is inlined into the caller; queueing and
    /// waiting stay out of line, so an acquire that finds a permit free costs
    /// what `try_acquire` costs.
    #[inline]
    pub(crate) fn poll_permit<C>(
        self: Pin<&mut Self>,
        bh: &Bulkhead<C>,
        cx: &mut Context<'_>,
        expired: impl FnOnce() -> bool,
    ) -> Poll<Result<(), AcquireError>> {
        let this = self.project();
        match *this.phase {
            Phase::Start => {
                match bh.take(this.node.permits()) {
                    Ok(()) => {
                        *this.phase = Phase::Done;
                        return Poll::Ready(Ok(()));
                    }
                    Err(AcquireError::Full) => {}
                    Err(e) => return finish(this.phase, bh, Err(e)),
                }
                if expired() {
                    return finish(this.phase, bh, Err(AcquireError::TimedOut));
                }
                start_waiting(this.phase, this.node.as_ref(), bh, cx)
            }
            Phase::Queued => poll_queued(this.phase, this.node.as_ref(), bh, cx),
            Phase::Done => panic!("acquire future polled after completion"),
        }
    }

    /// See [`Bulkhead::leave_first_if`]: a queued wait, first in line,
    /// leaves the queue if `take` found its slot elsewhere; it is then done.
    pub(crate) fn leave_first_if<C>(
        self: Pin<&mut Self>,
        bh: &Bulkhead<C>,
        take: impl FnOnce() -> bool,
    ) -> bool {
        let this = self.project();
        if *this.phase != Phase::Queued || !bh.leave_first_if(this.node.as_ref(), take) {
            return false;
        }
        *this.phase = Phase::Done;
        true
    }

    /// Stops a queued wait because its deadline passed — unless its permits
    /// were handed to it first, which it then keeps.
    fn time_out<C>(self: Pin<&mut Self>, bh: &Bulkhead<C>) -> Poll<Result<(), AcquireError>> {
        let this = self.project();
        let r = match *this.phase {
            Phase::Queued => match bh.leave_queue(this.node.as_ref()) {
                Left::Granted => Ok(()),
                Left::Removed => Err(AcquireError::TimedOut),
                Left::Refused(e) => Err(e),
            },
            _ => Err(AcquireError::TimedOut),
        };
        finish(this.phase, bh, r)
    }

    /// Called from the futures' `Drop`: a wait abandoned while queued leaves
    /// the queue and is counted as cancelled. If its permits had been handed
    /// to it and it never saw them, they are given back (to the next waiter)
    /// and it counts as accepted; if it had been refused, as that refusal.
    pub(crate) fn cancel<C>(self: Pin<&mut Self>, bh: &Bulkhead<C>) {
        let this = self.project();
        if *this.phase != Phase::Queued {
            return;
        }
        *this.phase = Phase::Done;
        match bh.leave_queue(this.node.as_ref()) {
            Left::Removed => {
                bh.cold.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            Left::Granted => bh.release(this.node.permits()),
            Left::Refused(e) => {
                bh.count_rejection(e);
            }
        }
    }
}

/// Queues the wait (or takes the permits, if they came free), out of line.
#[inline(never)]
fn start_waiting<C>(
    phase: &mut Phase,
    node: Pin<&Node>,
    bh: &Bulkhead<C>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    match bh.enqueue(node, cx.waker()) {
        Ok(Enqueued::Took) => finish(phase, bh, Ok(())),
        Ok(Enqueued::Queued) => {
            *phase = Phase::Queued;
            Poll::Pending
        }
        Err(e) => finish(phase, bh, Err(e)),
    }
}

/// A queued wait's poll, out of line.
#[inline(never)]
fn poll_queued<C>(
    phase: &mut Phase,
    node: Pin<&Node>,
    bh: &Bulkhead<C>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    match bh.poll_queued(node, cx.waker()) {
        Poll::Ready(r) => finish(phase, bh, r),
        Poll::Pending => Poll::Pending,
    }
}

fn finish<C>(
    phase: &mut Phase,
    bh: &Bulkhead<C>,
    r: Result<(), AcquireError>,
) -> Poll<Result<(), AcquireError>> {
    *phase = Phase::Done;
    Poll::Ready(r.map_err(|e| bh.count_rejection(e)))
}

impl<C> Bulkhead<C> {
    /// Waits for one permit, for as long as it takes or until the bulkhead is
    /// closed. Prefer [`acquire_timeout`](Self::acquire_timeout): a bulkhead
    /// is meant to bound the wait.
    ///
    /// # Errors
    ///
    /// [`Closed`](AcquireError::Closed) if the bulkhead is or becomes closed;
    /// [`QueueFull`](AcquireError::QueueFull) at once if no permit is free
    /// and [`max_waiters`](Self::with_max_waiters) tasks wait already.
    /// Never [`Full`](AcquireError::Full).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future before it completes leaves no permit
    /// taken and no place held; if a permit had just been handed to it, the
    /// permit goes on to the next waiter. It is counted as a cancelled wait
    /// (or, in that last case, as accepted). No allocation, no lock unless it
    /// was queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::StdClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let b = Bulkhead::new("cache", 1, StdClock);
    /// let p = b.acquire().await.unwrap();
    /// assert_eq!(b.in_flight(), 1);
    /// # drop(p);
    /// # });
    /// ```
    pub fn acquire(&self) -> Acquire<'_, C> {
        self.acquire_many(1)
    }

    /// Waits for `n` permits, taken together.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and at once
    /// [`ExceedsCapacity`](AcquireError::ExceedsCapacity) if `n` is more than
    /// the capacity (or becomes so by a [`resize`](Self::resize) while waiting).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire): no permit is ever partly taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::StdClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let b = Bulkhead::new("gpu", 4, StdClock);
    /// assert_eq!(b.acquire_many(4).await.unwrap().count(), 4);
    /// assert!(matches!(b.acquire_many(5).await, Err(AcquireError::ExceedsCapacity { .. })));
    /// # });
    /// ```
    pub fn acquire_many(&self, n: usize) -> Acquire<'_, C> {
        Acquire {
            bulkhead: self,
            waiter: Waiter::new(n),
        }
    }
}

impl<C> Bulkhead<C> {
    /// Waits for one permit until `deadline` on the bulkhead's clock.
    ///
    /// A free permit is taken even at or after the deadline (when nobody is
    /// queued ahead); a wait that would start after the deadline fails at
    /// once; a waiter gives up when the deadline passes, unless a permit was
    /// handed to it first.
    ///
    /// # Errors
    ///
    /// [`TimedOut`](AcquireError::TimedOut) when the deadline passes without a
    /// permit; [`Closed`](AcquireError::Closed); [`QueueFull`](AcquireError::QueueFull)
    /// at once when the [bound on waiters](Self::with_max_waiters) is reached.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::{AcquireError, Bulkhead};
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("shipping", 1, &clock);
    /// let held = b.try_acquire().unwrap();
    /// let deadline = clock.now() + Duration::from_millis(100);
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(b.acquire_until(deadline).await.unwrap_err(), AcquireError::TimedOut);
    /// # drop(held);
    /// # });
    /// ```
    pub fn acquire_until(&self, deadline: Instant) -> AcquireUntil<'_, C>
    where
        C: Timer,
    {
        self.acquire_many_until(1, deadline)
    }

    /// Waits for `n` permits until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until) and
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::{Clock, ManualClock};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("batch", 3, &clock);
    /// let p = b.acquire_many_until(2, clock.now() + Duration::from_secs(1)).await.unwrap();
    /// assert_eq!(p.count(), 2);
    /// # });
    /// ```
    pub fn acquire_many_until(&self, n: usize, deadline: Instant) -> AcquireUntil<'_, C>
    where
        C: Timer,
    {
        AcquireUntil {
            bulkhead: self,
            waiter: Waiter::new(n),
            deadline,
            sleep: None,
        }
    }

    /// Waits for one permit for at most `max_wait` from now.
    ///
    /// This is the bulkhead's usual entrance: a short, bounded wait (tens of
    /// milliseconds, 100 ms at most for an interactive call, never seconds:
    /// a long wait is a queue) and then a fast rejection.
    /// `Duration::ZERO` takes a free permit or fails at once, like
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
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
    /// let b = Bulkhead::new("shipping", 1, &clock);
    /// let _held = b.try_acquire().unwrap();
    /// let r = b.acquire_timeout(Duration::ZERO).await;
    /// assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
    /// # });
    /// ```
    pub fn acquire_timeout(&self, max_wait: Duration) -> AcquireTimeout<'_, C>
    where
        C: Timer,
    {
        self.acquire_many_timeout(1, max_wait)
    }

    /// Waits for `n` permits for at most `max_wait` from now.
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until) and
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let b = Bulkhead::new("batch", 3, &clock);
    /// assert_eq!(b.acquire_many_timeout(3, Duration::from_millis(50)).await.unwrap().count(), 3);
    /// # });
    /// ```
    pub fn acquire_many_timeout(&self, n: usize, max_wait: Duration) -> AcquireTimeout<'_, C>
    where
        C: Timer,
    {
        self.acquire_many_until(n, self.clock.now().saturating_add(max_wait))
    }
}

/// [`AcquireUntil`] made from a duration by
/// [`Bulkhead::acquire_timeout`]; the deadline is fixed when it is created.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::Bulkhead;
/// use watertight::clock::ManualClock;
/// use watertight::futures::AcquireTimeout;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let db = Bulkhead::new("db", 2, &clock);
/// let wait: AcquireTimeout<'_, &ManualClock> = db.acquire_timeout(Duration::from_millis(100));
/// assert_eq!(wait.await.unwrap().count(), 1);
/// # });
/// ```
pub type AcquireTimeout<'a, C> = AcquireUntil<'a, C>;

pin_project! {
    /// The future of [`Bulkhead::acquire`] and [`Bulkhead::acquire_many`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it before completion takes no permit and holds no place.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Bulkhead;
    /// use watertight::clock::ManualClock;
    /// use watertight::futures::Acquire;
    ///
    /// // Named, so it can be kept in a struct.
    /// struct Pending<'a> {
    ///     slot: Acquire<'a, &'a ManualClock>,
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let db = Bulkhead::new("db", 1, &clock);
    /// let pending = Pending { slot: db.acquire() };
    /// assert_eq!(pending.slot.await.unwrap().count(), 1);
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct Acquire<'a, C> {
        bulkhead: &'a Bulkhead<C>,
        // Its own place in the wait queue: the future is `!Unpin`.
        #[pin]
        waiter: Waiter,
    }

    impl<'a, C> PinnedDrop for Acquire<'a, C> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.waiter.cancel(this.bulkhead);
        }
    }
}

impl<'a, C> Future for Acquire<'a, C> {
    type Output = Result<Permit<'a, C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bh: &'a Bulkhead<C> = this.bulkhead;
        let n = this.waiter.permits();
        this.waiter
            .poll_permit(bh, cx, || false)
            .map_ok(|()| Permit { bulkhead: bh, n })
    }
}

pin_project! {
    /// The future of [`Bulkhead::acquire_until`] and its relatives.
    ///
    /// # Cancel safety
    ///
    /// Dropping it before completion takes no permit and holds no place.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::futures::AcquireUntil;
    /// use watertight::{AcquireError, Bulkhead};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let db = Bulkhead::new("db", 1, &clock);
    /// let _held = db.try_acquire().unwrap();
    /// let wait: AcquireUntil<'_, &ManualClock> = db.acquire_until(clock.now() + Duration::from_millis(10));
    /// clock.advance(Duration::from_millis(10));
    /// assert_eq!(wait.await.unwrap_err(), AcquireError::TimedOut);
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct AcquireUntil<'a, C: Timer> {
        bulkhead: &'a Bulkhead<C>,
        #[pin]
        waiter: Waiter,
        deadline: Instant,
        #[pin]
        sleep: Option<C::Sleep>,
    }

    impl<'a, C: Timer> PinnedDrop for AcquireUntil<'a, C> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.waiter.cancel(this.bulkhead);
        }
    }
}

impl<C: Timer> AcquireUntil<'_, C> {
    /// For the partitioned bulkhead: a queued wait, first in line, that
    /// `take` found a slot for elsewhere leaves the queue (its timer too)
    /// and returns `true`; the future is then done, and must not be polled.
    pub(crate) fn leave_first_if(self: Pin<&mut Self>, take: impl FnOnce() -> bool) -> bool {
        let mut this = self.project();
        let left = this.waiter.as_mut().leave_first_if(this.bulkhead, take);
        if left {
            this.sleep.set(None);
        }
        left
    }
}

impl<'a, C: Timer> Future for AcquireUntil<'a, C> {
    type Output = Result<Permit<'a, C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bh: &'a Bulkhead<C> = this.bulkhead;
        let n = this.waiter.permits();
        poll_until(bh, this.waiter, *this.deadline, this.sleep, cx)
            .map_ok(|()| Permit { bulkhead: bh, n })
    }
}

/// The shared body of the deadline futures: the wait, then the timer.
pub(crate) fn poll_until<C: Timer>(
    bh: &Bulkhead<C>,
    mut waiter: Pin<&mut Waiter>,
    deadline: Instant,
    mut sleep: Pin<&mut Option<C::Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    if let Poll::Ready(r) = waiter
        .as_mut()
        .poll_permit(bh, cx, || bh.clock.now() >= deadline)
    {
        sleep.set(None);
        return Poll::Ready(r);
    }
    if sleep.is_none() {
        sleep.set(Some(bh.clock.sleep_until(deadline)));
    }
    let timer = sleep.as_mut().as_pin_mut().expect("armed just above");
    match timer.poll(cx) {
        Poll::Ready(()) => {
            sleep.set(None);
            waiter.time_out(bh)
        }
        Poll::Pending => Poll::Pending,
    }
}

impl<C: Timer> core::fmt::Debug for AcquireUntil<'_, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AcquireUntil")
            .field("bulkhead", &self.bulkhead.name)
            .field("waiter", &self.waiter)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
pub use owned::{AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil};

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
mod owned {
    use alloc::sync::Arc;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use core::time::Duration;

    use pin_project_lite::pin_project;

    use super::{poll_until, Waiter};
    use crate::bulkhead::{AcquireError, Bulkhead, OwnedPermit};
    use crate::clock::{Instant, Timer};

    impl<C> Bulkhead<C> {
        /// [`acquire`](Bulkhead::acquire) for an `Arc`'d bulkhead; the future and
        /// its permit are `'static`.
        ///
        /// # Errors
        ///
        /// As [`acquire`](Bulkhead::acquire).
        ///
        /// # Cancel safety
        ///
        /// As [`acquire`](Bulkhead::acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// # futures_lite::future::block_on(async {
        /// let b = Arc::new(Bulkhead::new("jobs", 1, StdClock));
        /// let p = b.acquire_owned().await.unwrap();
        /// std::thread::spawn(move || drop(p)).join().unwrap();
        /// # });
        /// ```
        pub fn acquire_owned(self: &Arc<Self>) -> AcquireOwned<C> {
            self.acquire_many_owned(1)
        }

        /// [`acquire_many`](Bulkhead::acquire_many) for an `Arc`'d bulkhead.
        ///
        /// # Errors
        ///
        /// As [`acquire_many`](Bulkhead::acquire_many).
        ///
        /// # Cancel safety
        ///
        /// As [`acquire`](Bulkhead::acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        ///
        /// # futures_lite::future::block_on(async {
        /// let b = Arc::new(Bulkhead::new("jobs", 2, StdClock));
        /// assert_eq!(b.acquire_many_owned(2).await.unwrap().count(), 2);
        /// # });
        /// ```
        pub fn acquire_many_owned(self: &Arc<Self>, n: usize) -> AcquireOwned<C> {
            AcquireOwned {
                bulkhead: Arc::clone(self),
                waiter: Waiter::new(n),
            }
        }
    }

    impl<C> Bulkhead<C> {
        /// [`acquire_until`](Bulkhead::acquire_until) for an `Arc`'d bulkhead.
        ///
        /// # Errors
        ///
        /// As [`acquire_until`](Bulkhead::acquire_until).
        ///
        /// # Cancel safety
        ///
        /// As [`acquire`](Bulkhead::acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use core::time::Duration;
        /// use watertight::Bulkhead;
        /// use watertight::clock::{Clock, ManualClock};
        ///
        /// # futures_lite::future::block_on(async {
        /// let clock = Arc::new(ManualClock::new());
        /// let b = Arc::new(Bulkhead::new("jobs", 1, clock.clone()));
        /// let p = b.acquire_owned_until(clock.now() + Duration::from_millis(10)).await.unwrap();
        /// # drop(p);
        /// # });
        /// ```
        pub fn acquire_owned_until(self: &Arc<Self>, deadline: Instant) -> AcquireOwnedUntil<C>
        where
            C: Timer,
        {
            AcquireOwnedUntil {
                bulkhead: Arc::clone(self),
                waiter: Waiter::new(1),
                deadline,
                sleep: None,
            }
        }

        /// [`acquire_timeout`](Bulkhead::acquire_timeout) for an `Arc`'d bulkhead.
        ///
        /// # Errors
        ///
        /// As [`acquire_until`](Bulkhead::acquire_until).
        ///
        /// # Cancel safety
        ///
        /// As [`acquire`](Bulkhead::acquire).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use core::time::Duration;
        /// use watertight::{AcquireError, Bulkhead};
        /// use watertight::clock::ManualClock;
        ///
        /// # futures_lite::future::block_on(async {
        /// let clock = Arc::new(ManualClock::new());
        /// let b = Arc::new(Bulkhead::new("jobs", 1, clock.clone()));
        /// let _held = b.try_acquire_owned().unwrap();
        /// let r = b.acquire_owned_timeout(Duration::ZERO).await;
        /// assert_eq!(r.unwrap_err(), AcquireError::TimedOut);
        /// # });
        /// ```
        pub fn acquire_owned_timeout(self: &Arc<Self>, max_wait: Duration) -> AcquireOwnedTimeout<C>
        where
            C: Timer,
        {
            self.acquire_owned_until(self.clock.now().saturating_add(max_wait))
        }
    }

    pin_project! {
        /// The future of [`Bulkhead::acquire_owned`]; `'static` when `C` is.
        ///
        /// # Cancel safety
        ///
        /// Dropping it before completion takes no permit and holds no place.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use watertight::Bulkhead;
        /// use watertight::clock::StdClock;
        /// use watertight::futures::AcquireOwned;
        ///
        /// # futures_lite::future::block_on(async {
        /// let db = Arc::new(Bulkhead::new("db", 1, StdClock));
        /// // Owns its `Arc`: `'static`, so it can move into a spawned task.
        /// let wait: AcquireOwned<StdClock> = db.acquire_owned();
        /// let permit = wait.await.unwrap();
        /// assert_eq!(db.in_flight(), 1);
        /// drop(permit);
        /// # });
        /// ```
        #[must_use = "futures do nothing unless you `.await` or poll them"]
        #[derive(Debug)]
        pub struct AcquireOwned<C> {
            bulkhead: Arc<Bulkhead<C>>,
            #[pin]
            waiter: Waiter,
        }

        impl<C> PinnedDrop for AcquireOwned<C> {
            fn drop(this: Pin<&mut Self>) {
                let this = this.project();
                this.waiter.cancel(this.bulkhead);
            }
        }
    }

    impl<C> Future for AcquireOwned<C> {
        type Output = Result<OwnedPermit<C>, AcquireError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            let bh = &*this.bulkhead;
            let n = this.waiter.permits();
            this.waiter
                .poll_permit(bh, cx, || false)
                .map_ok(|()| OwnedPermit::new(Arc::clone(this.bulkhead), n))
        }
    }

    /// [`AcquireOwnedUntil`] made from a duration.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use watertight::Bulkhead;
    /// use watertight::clock::ManualClock;
    /// use watertight::futures::AcquireOwnedTimeout;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let db = Arc::new(Bulkhead::new("db", 1, clock));
    /// let wait: AcquireOwnedTimeout<Arc<ManualClock>> = db.acquire_owned_timeout(Duration::from_millis(10));
    /// assert_eq!(wait.await.unwrap().count(), 1);
    /// # });
    /// ```
    pub type AcquireOwnedTimeout<C> = AcquireOwnedUntil<C>;

    pin_project! {
        /// The future of [`Bulkhead::acquire_owned_until`] and
        /// [`Bulkhead::acquire_owned_timeout`].
        ///
        /// # Cancel safety
        ///
        /// Dropping it before completion takes no permit and holds no place.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// use core::time::Duration;
        /// use watertight::Bulkhead;
        /// use watertight::clock::{Clock, ManualClock};
        /// use watertight::futures::AcquireOwnedUntil;
        ///
        /// # futures_lite::future::block_on(async {
        /// let clock = Arc::new(ManualClock::new());
        /// let db = Arc::new(Bulkhead::new("db", 1, Arc::clone(&clock)));
        /// let wait: AcquireOwnedUntil<Arc<ManualClock>> =
        ///     db.acquire_owned_until(clock.now() + Duration::from_millis(10));
        /// assert_eq!(wait.await.unwrap().count(), 1);
        /// # });
        /// ```
        #[must_use = "futures do nothing unless you `.await` or poll them"]
        pub struct AcquireOwnedUntil<C: Timer> {
            bulkhead: Arc<Bulkhead<C>>,
            #[pin]
            waiter: Waiter,
            deadline: Instant,
            #[pin]
            sleep: Option<C::Sleep>,
        }

        impl<C: Timer> PinnedDrop for AcquireOwnedUntil<C> {
            fn drop(this: Pin<&mut Self>) {
                let this = this.project();
                this.waiter.cancel(this.bulkhead);
            }
        }
    }

    impl<C: Timer> Future for AcquireOwnedUntil<C> {
        type Output = Result<OwnedPermit<C>, AcquireError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            let bh = &*this.bulkhead;
            let n = this.waiter.permits();
            poll_until(bh, this.waiter, *this.deadline, this.sleep, cx)
                .map_ok(|()| OwnedPermit::new(Arc::clone(bh), n))
        }
    }

    impl<C: Timer> core::fmt::Debug for AcquireOwnedUntil<C> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("AcquireOwnedUntil")
                .field("bulkhead", &self.bulkhead.name())
                .field("waiter", &self.waiter)
                .field("deadline", &self.deadline)
                .finish_non_exhaustive()
        }
    }
}
