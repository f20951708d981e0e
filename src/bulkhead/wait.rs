//! Waiting for permits: the futures behind `acquire*`.
//!
//! Each wait registers in the state word's waiter count and parks on the
//! bulkhead's `event_listener::Event`. A registered waiter is woken by a
//! release (or by another waiter that left permits free), takes the permits
//! if enough are free, and otherwise listens again. Registration, taking and
//! giving up are single CAS operations on the state word, so a release never
//! misses a registered waiter: it reads the count in the same atomic add that
//! returns its permits.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use event_listener::EventListener;
use pin_project_lite::pin_project;

use super::{check_request, word, AcquireError, Bulkhead, Mode, Permit};
use crate::clock::{Instant, Timer};
use crate::sync::Ordering;

/// The state of one wait, shared by every acquire future.
#[derive(Debug)]
pub(crate) struct Waiter {
    n: usize,
    state: State,
    /// The state word at which this waiter last passed a wake-up on.
    passed_at: Option<word::Word>,
}

#[derive(Debug)]
enum State {
    /// Not polled yet.
    Start,
    /// Registered in the waiter count; holds the listener when one is armed.
    Waiting(Option<EventListener>),
    /// Finished: the permits were handed out or an error returned.
    Done,
}

impl Waiter {
    pub(crate) fn new(n: usize) -> Self {
        Waiter {
            n,
            state: State::Start,
            passed_at: None,
        }
    }

    /// Drives the wait. `Ready(Ok(()))` means the permits are now held by the
    /// caller. `expired` is asked once, on the first poll, if no permit was
    /// free: a wait whose deadline has already passed then fails at once
    /// instead of registering.
    ///
    /// The first poll's take is inlined into the caller; listening and
    /// waiting stay out of line, so an acquire that finds a permit free costs
    /// what `try_acquire` costs.
    #[inline]
    fn poll_permit<C>(
        &mut self,
        bh: &Bulkhead<C>,
        cx: &mut Context<'_>,
        expired: impl FnOnce() -> bool,
    ) -> Poll<Result<(), AcquireError>> {
        if let State::Start = self.state {
            match bh.take(self.n, Mode::Newcomer) {
                Ok(()) => {
                    self.state = State::Done;
                    return Poll::Ready(Ok(()));
                }
                Err(AcquireError::Full) => {}
                Err(e) => return self.finish(bh, Err(e)),
            }
            if expired() {
                return self.finish(bh, Err(AcquireError::TimedOut));
            }
            return self.start_waiting(bh, cx);
        }
        self.poll_waiting(bh, cx)
    }

    /// Registers as a waiter (or takes the permits, if they came free), then
    /// waits.
    #[inline(never)]
    fn start_waiting<C>(
        &mut self,
        bh: &Bulkhead<C>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AcquireError>> {
        // Listen before registering: a release that sees our registration is
        // then sure to find our listener.
        let listener = bh.hot.event.listen();
        match bh.register_or_take(self.n) {
            Ok(Registered::Took) => self.finish(bh, Ok(())),
            Ok(Registered::Waiting) => {
                self.state = State::Waiting(Some(listener));
                self.poll_waiting(bh, cx)
            }
            Err(e) => self.finish(bh, Err(e)),
        }
    }

    /// A registered waiter's poll: wait for a wake-up, then look.
    #[inline(never)]
    fn poll_waiting<C>(
        &mut self,
        bh: &Bulkhead<C>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AcquireError>> {
        loop {
            let State::Waiting(slot) = &mut self.state else {
                panic!("acquire future polled after completion");
            };
            if let Some(listener) = slot {
                match Pin::new(listener).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => *slot = None,
                }
                // Woken: look before listening again.
                match bh.take(self.n, Mode::Waiter) {
                    Ok(()) => return self.finish(bh, Ok(())),
                    Err(AcquireError::Full) => self.pass_on(bh),
                    Err(e) => return self.leave(bh, Err(e)),
                }
            }
            // Arm a fresh listener, then look again: a release between the
            // look above and the next poll is not missed.
            self.state = State::Waiting(Some(bh.hot.event.listen()));
            match bh.take(self.n, Mode::Waiter) {
                Ok(()) => return self.finish(bh, Ok(())),
                Err(AcquireError::Full) => {}
                Err(e) => return self.leave(bh, Err(e)),
            }
        }
    }

    /// A woken waiter that cannot use the free permits (it wants more than
    /// are free) hands its wake-up to the next waiter, who may want fewer:
    /// otherwise a single-permit waiter would sleep behind it while a permit
    /// is free.
    ///
    /// It passes at most once per state of the word: waiters that all want
    /// more than is free hand the wake-up round the queue once and then
    /// sleep until the word changes (a release, a take, a waiter arriving —
    /// the arrivals epoch sees to that even when another left — or leaving),
    /// instead of waking each other forever.
    fn pass_on<C>(&mut self, bh: &Bulkhead<C>) {
        let w = bh.hot.word.load(Ordering::Acquire);
        if word::available(w) > 0 && word::waiters(w) > 1 && self.passed_at != Some(w) {
            self.passed_at = Some(w);
            bh.wake_more(1);
        }
    }

    /// Leaves the queue with an error (closed, or above a shrunk capacity).
    fn leave<C>(
        &mut self,
        bh: &Bulkhead<C>,
        r: Result<(), AcquireError>,
    ) -> Poll<Result<(), AcquireError>> {
        let old = bh.deregister();
        // We were woken and leave without a permit: hand the wake-up on, or
        // the permits it was for could sit next to the waiters behind us.
        if word::available(old) > 0 && word::waiters(old) > 1 {
            bh.wake_more(1);
        }
        self.finish(bh, r)
    }

    fn finish<C>(
        &mut self,
        bh: &Bulkhead<C>,
        r: Result<(), AcquireError>,
    ) -> Poll<Result<(), AcquireError>> {
        self.state = State::Done;
        Poll::Ready(r.map_err(|e| bh.count_rejection(e)))
    }

    /// Stops a registered wait because its deadline passed.
    fn time_out<C>(&mut self, bh: &Bulkhead<C>) -> Poll<Result<(), AcquireError>> {
        if let State::Waiting(_) = self.state {
            bh.deregister();
        }
        self.finish(bh, Err(AcquireError::TimedOut))
    }

    /// Called from the futures' `Drop`: a wait abandoned while registered is
    /// counted as cancelled and leaves the queue. If it had been woken and
    /// not yet run, dropping its listener hands that wake-up to the next
    /// waiter (event-listener propagates a notification of a dropped listener).
    pub(crate) fn cancel<C>(&mut self, bh: &Bulkhead<C>) {
        if let State::Waiting(listener) = core::mem::replace(&mut self.state, State::Done) {
            drop(listener);
            bh.deregister();
            bh.cold.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

enum Registered {
    Took,
    Waiting,
}

impl<C> Bulkhead<C> {
    /// Takes the permits as a newcomer if allowed, otherwise registers as a
    /// waiter, in one CAS.
    fn register_or_take(&self, n: usize) -> Result<Registered, AcquireError> {
        let mut cur = self.hot.word.load(Ordering::Relaxed);
        loop {
            match self.take_or_register_step(cur, n)? {
                (next, Some(carried)) => match self.hot.word.compare_exchange_weak(
                    cur,
                    next,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.after_take(next, carried);
                        return Ok(Registered::Took);
                    }
                    Err(actual) => cur = actual,
                },
                (next, None) => match self.hot.word.compare_exchange_weak(
                    cur,
                    next,
                    // Release publishes our listener to the releaser that
                    // reads this registration.
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // Permits are free, yet we queue behind other waiters:
                        // make sure one of them is awake to look. One who
                        // cannot use them passes the wake-up on, down to us.
                        if word::available(next) > 0 && word::waiters(cur) > 0 {
                            // Not "additional": if a waiter is already woken
                            // and about to look, it is the one to look (and
                            // hands the wake-up on if it cannot use the
                            // permits); only if none is, wake the first.
                            self.wake_one_if_none();
                        }
                        return Ok(Registered::Waiting);
                    }
                    Err(actual) => cur = actual,
                },
            }
        }
    }

    /// The next word for `register_or_take`: `Some(carried)` when taking.
    fn take_or_register_step(
        &self,
        cur: word::Word,
        n: usize,
    ) -> Result<(word::Word, Option<bool>), AcquireError> {
        check_request(cur, n)?;
        if word::waiters(cur) == 0 && word::available(cur) >= n as i64 {
            let (next, carried) = word::take(cur, n);
            return Ok((next, Some(carried)));
        }
        if word::waiters(cur) >= word::MAX_WAITERS {
            return Err(AcquireError::Full);
        }
        Ok((word::register(cur), None))
    }

    /// Leaves the waiter count. If permits are free and others still wait,
    /// wakes one of them: the permits may have been released for us.
    fn deregister(&self) -> word::Word {
        let old = self.hot.word.fetch_sub(word::ONE_WAITER, Ordering::AcqRel);
        if word::available(old) > 0 && word::waiters(old) > 1 {
            self.hot.event.notify(1);
        }
        old
    }

    /// Waits for one permit, for as long as it takes or until the bulkhead is
    /// closed. Prefer [`acquire_timeout`](Self::acquire_timeout): a bulkhead
    /// is meant to bound the wait.
    ///
    /// # Errors
    ///
    /// [`Closed`](AcquireError::Closed) if the bulkhead is or becomes closed;
    /// [`Full`](AcquireError::Full) only if [`MAX_WAITERS`](Self::MAX_WAITERS)
    /// tasks are already waiting.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future before it completes leaves no permit
    /// taken and no place held, and passes on a wake-up it may have received,
    /// so the waiters behind it are served. It is counted as a cancelled wait.
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

impl<C: Timer> Bulkhead<C> {
    /// Waits for one permit until `deadline` on the bulkhead's clock.
    ///
    /// A free permit is taken even at or after the deadline (when nobody is
    /// queued ahead); a wait that would start after the deadline fails at
    /// once; a waiter gives up when the deadline passes, unless it was woken
    /// for a permit first.
    ///
    /// # Errors
    ///
    /// [`TimedOut`](AcquireError::TimedOut) when the deadline passes without a
    /// permit; [`Closed`](AcquireError::Closed);
    /// [`Full`](AcquireError::Full) only if
    /// [`MAX_WAITERS`](Self::MAX_WAITERS) tasks are already waiting.
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
    pub fn acquire_until(&self, deadline: Instant) -> AcquireUntil<'_, C> {
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
    pub fn acquire_many_until(&self, n: usize, deadline: Instant) -> AcquireUntil<'_, C> {
        AcquireUntil {
            bulkhead: self,
            waiter: Waiter::new(n),
            deadline,
            sleep: None,
        }
    }

    /// Waits for one permit for at most `max_wait` from now.
    ///
    /// This is the bulkhead's usual entrance: a short, bounded wait (the
    /// sources advise ≤ 100 ms, never over 1 s) and then a fast rejection.
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
    pub fn acquire_timeout(&self, max_wait: Duration) -> AcquireTimeout<'_, C> {
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
    pub fn acquire_many_timeout(&self, n: usize, max_wait: Duration) -> AcquireTimeout<'_, C> {
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
    waiter: Waiter,
}

impl<'a, C> Future for Acquire<'a, C> {
    type Output = Result<Permit<'a, C>, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let bh = this.bulkhead;
        this.waiter
            .poll_permit(bh, cx, || false)
            .map_ok(|()| Permit {
                bulkhead: bh,
                n: this.waiter.n,
            })
    }
}

impl<C> Drop for Acquire<'_, C> {
    fn drop(&mut self) {
        self.waiter.cancel(self.bulkhead);
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

impl<'a, C: Timer> Future for AcquireUntil<'a, C> {
    type Output = Result<Permit<'a, C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bh: &'a Bulkhead<C> = this.bulkhead;
        let n = this.waiter.n;
        poll_until(bh, this.waiter, *this.deadline, this.sleep, cx)
            .map_ok(|()| Permit { bulkhead: bh, n })
    }
}

/// The shared body of the deadline futures: the wait, then the timer.
pub(crate) fn poll_until<C: Timer>(
    bh: &Bulkhead<C>,
    waiter: &mut Waiter,
    deadline: Instant,
    mut sleep: Pin<&mut Option<C::Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    if let Poll::Ready(r) = waiter.poll_permit(bh, cx, || bh.clock.now() >= deadline) {
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

#[cfg(target_has_atomic = "ptr")]
pub use owned::{AcquireOwned, AcquireOwnedTimeout, AcquireOwnedUntil};

#[cfg(target_has_atomic = "ptr")]
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

    impl<C: Timer> Bulkhead<C> {
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
        pub fn acquire_owned_until(self: &Arc<Self>, deadline: Instant) -> AcquireOwnedUntil<C> {
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
        pub fn acquire_owned_timeout(
            self: &Arc<Self>,
            max_wait: Duration,
        ) -> AcquireOwnedTimeout<C> {
            self.acquire_owned_until(self.clock.now().saturating_add(max_wait))
        }
    }

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
        waiter: Waiter,
    }

    impl<C> Future for AcquireOwned<C> {
        type Output = Result<OwnedPermit<C>, AcquireError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = &mut *self;
            let bh = &this.bulkhead;
            this.waiter
                .poll_permit(bh, cx, || false)
                .map_ok(|()| OwnedPermit::new(Arc::clone(bh), this.waiter.n))
        }
    }

    impl<C> Drop for AcquireOwned<C> {
        fn drop(&mut self) {
            self.waiter.cancel(&self.bulkhead);
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
            let n = this.waiter.n;
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
