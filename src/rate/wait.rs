//! Waiting for cells: the future behind `acquire*` and `until_ready`.
//!
//! A wait is a reservation on the schedule, not a place in a queue: its
//! first poll moves the TAT past its cells with one compare-and-swap and
//! keeps where they are (two words); later polls only poll the clock's
//! sleep. No lock, no node, no allocation.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::gcra::Slot;
use super::{Begin, RateError, RateLimiter};
use crate::clock::{Instant, Timer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not polled yet: nothing taken, nothing reserved.
    Start,
    /// The cells are reserved; they conform at `slot.at`.
    Reserved(Slot),
    /// Finished: admitted or refused.
    Done,
}

pin_project! {
    /// The future of [`RateLimiter::acquire_until`] and its relatives
    /// ([`acquire_n_until`](RateLimiter::acquire_n_until),
    /// [`acquire_timeout`](RateLimiter::acquire_timeout),
    /// [`until_ready`](RateLimiter::until_ready)).
    ///
    /// It does nothing until first polled; that poll admits, refuses, or
    /// reserves the cells and arms the clock's sleep until they conform.
    ///
    /// # Cancel safety
    ///
    /// Dropped before its cells conform, it gives them back if its
    /// reservation is still the newest, and otherwise leaves them spent;
    /// dropped after, they are spent. Either way nothing is ever invented
    /// (see [`RateLimiter`'s Cancel safety](RateLimiter#cancel-safety)).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{AcquireUntil, Quota, RateLimiter};
    ///
    /// // Named, so it can be kept in a struct.
    /// struct Pending<'a> {
    ///     send: AcquireUntil<'a, &'a ManualClock>,
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let uplink = RateLimiter::new("uplink", Quota::per_second(10), &clock);
    /// let pending = Pending { send: uplink.acquire_timeout(Duration::from_millis(5)) };
    /// assert!(pending.send.await.is_ok());
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct AcquireUntil<'a, C: Timer> {
        limiter: &'a RateLimiter<C>,
        n: u32,
        deadline: Instant,
        state: State,
        #[pin]
        sleep: Option<C::Sleep>,
    }

    impl<'a, C: Timer> PinnedDrop for AcquireUntil<'a, C> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let State::Reserved(slot) = *this.state {
                this.limiter.abandon(*this.n, slot);
            }
        }
    }
}

/// The future of [`RateLimiter::acquire_timeout`]: an [`AcquireUntil`] whose
/// deadline was fixed at the call.
pub type AcquireTimeout<'a, C> = AcquireUntil<'a, C>;

/// The future of [`RateLimiter::until_ready`]: an [`AcquireUntil`] with no
/// deadline.
pub type UntilReady<'a, C> = AcquireUntil<'a, C>;

impl<'a, C: Timer> AcquireUntil<'a, C> {
    pub(super) fn new(limiter: &'a RateLimiter<C>, n: u32, deadline: Instant) -> Self {
        AcquireUntil {
            limiter,
            n,
            deadline,
            state: State::Start,
            sleep: None,
        }
    }
}

impl<C: Timer> Future for AcquireUntil<'_, C> {
    type Output = Result<(), RateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let State::Start = *this.state {
            match this.limiter.begin_wait(*this.n, *this.deadline) {
                Begin::Admitted => {
                    *this.state = State::Done;
                    return Poll::Ready(Ok(()));
                }
                Begin::Refused(e) => {
                    *this.state = State::Done;
                    return Poll::Ready(Err(e));
                }
                Begin::Reserved(slot) => {
                    *this.state = State::Reserved(slot);
                    this.sleep.set(Some(
                        this.limiter
                            .clock()
                            .sleep_until(Instant::from_nanos(slot.at)),
                    ));
                }
            }
        }
        match *this.state {
            State::Reserved(_) => {
                let sleep = this
                    .sleep
                    .as_mut()
                    .as_pin_mut()
                    .expect("armed with the reservation");
                match sleep.poll(cx) {
                    Poll::Ready(()) => {
                        this.sleep.set(None);
                        *this.state = State::Done;
                        this.limiter.served(*this.n);
                        Poll::Ready(Ok(()))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            _ => panic!("rate limiter future polled after completion"),
        }
    }
}

impl<C: Timer> fmt::Debug for AcquireUntil<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("AcquireUntil");
        d.field("limiter", &self.limiter.name())
            .field("n", &self.n)
            .field("deadline", &self.deadline);
        match self.state {
            State::Reserved(slot) => d.field("ready_at", &Instant::from_nanos(slot.at)),
            State::Start => d.field("state", &"start"),
            State::Done => d.field("state", &"done"),
        };
        d.finish_non_exhaustive()
    }
}
