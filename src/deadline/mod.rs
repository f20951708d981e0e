//! Deadlines: a timeout per call and a budget per request, on any [`Timer`].
//!
//! - [`timeout`] / [`timeout_at`] bound one future: it completes with the
//!   future's output, or with [`Elapsed`] once the time is up — and then the
//!   inner future is dropped at once, not when the [`Timeout`] is.
//! - [`Deadline`] is a request budget: made once at the edge from a
//!   clock and a budget, then handed down the call chain; each layer asks how
//!   much is [`remaining`](Deadline::remaining), or makes a
//!   [`child`](Deadline::child) capped by its own limit, never extending its
//!   parent — as `asyncio.timeout` nesting and Go's `context.WithTimeout` do.
//!
//! Nothing here spawns or needs an executor or `std`: time comes from the
//! [`Timer`] type parameter (tokio, async-io, embassy, or a
//! [`ManualClock`](crate::clock::ManualClock) in tests).
//!
//! Across the wire, [`wire`] writes what is left of a `Deadline` into a
//! header (`grpc-timeout`, or plain milliseconds) and reads it back, so the
//! next service starts its own `Deadline` from its caller's budget instead
//! of a fresh one; the tower layers that do it for HTTP and gRPC services
//! and clients are `watertight::tower::InboundDeadlineLayer` and
//! `OutboundDeadlineLayer` (feature `http`); [the guide](crate::guide::deadline)
//! explains the header, the network margin and refusal at admission.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::clock::{Clock, Instant, Timer};

pub mod wire;

/// Runs `future` for at most `duration` by `timer`'s clock.
///
/// The returned [`Timeout`] completes with `Ok(output)` if the future
/// finishes first, or with `Err(Elapsed)` once `timer.now() >= start +
/// duration`; the inner future is then dropped at once. A future that is
/// ready on its first poll wins even against a zero duration.
///
/// # Cancel safety
///
/// Dropping the `Timeout` drops the inner future and cancels the sleep; it
/// is as cancel-safe as the inner future.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::{timeout, Elapsed};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// assert_eq!(timeout(&clock, Duration::from_millis(10), async { 7 }).await, Ok(7));
///
/// let never = timeout(&clock, Duration::from_millis(10), core::future::pending::<()>());
/// clock.advance(Duration::from_millis(10));
/// assert_eq!(never.await, Err(Elapsed));
/// # });
/// ```
pub fn timeout<T: Timer, F: Future>(
    timer: T,
    duration: Duration,
    future: F,
) -> Timeout<F, T::Sleep> {
    let deadline = timer.now().saturating_add(duration);
    timeout_at(timer, deadline, future)
}

/// Runs `future` until `deadline` by `timer`'s clock; see [`timeout`].
///
/// # Cancel safety
///
/// Dropping the `Timeout` drops the inner future and cancels the sleep.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, ManualClock};
/// use watertight::deadline::{timeout_at, Elapsed};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let at = clock.now() + Duration::from_secs(1);
/// let slow = timeout_at(&clock, at, core::future::pending::<()>());
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(slow.await, Err(Elapsed));
/// # });
/// ```
pub fn timeout_at<T: Timer, F: Future>(
    timer: T,
    deadline: Instant,
    future: F,
) -> Timeout<F, T::Sleep> {
    Timeout {
        future: Some(future),
        sleep: timer.sleep_until(deadline),
    }
}

pin_project_lite::pin_project! {
    /// A future bounded in time, from [`timeout`] or [`timeout_at`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner future (if it is still there) and the
    /// sleep.
    ///
    /// # Examples
    ///
    /// A named future, so it can sit in a struct; when time runs out, the
    /// inner future is dropped at that moment:
    ///
    /// ```
    /// use core::time::Duration;
    /// use futures_lite::future::{block_on, poll_once};
    /// use watertight::clock::{ManualClock, ManualSleep};
    /// use watertight::deadline::{timeout, Elapsed, Timeout};
    ///
    /// struct Lookup<'a> {
    ///     call: Timeout<core::future::Pending<u32>, ManualSleep<&'a ManualClock>>,
    /// }
    ///
    /// let clock = ManualClock::new();
    /// let lookup = Lookup { call: timeout(&clock, Duration::from_millis(20), core::future::pending()) };
    /// let mut call = core::pin::pin!(lookup.call);
    /// assert_eq!(block_on(poll_once(call.as_mut())), None); // still running
    /// clock.advance(Duration::from_millis(20));
    /// assert_eq!(block_on(call), Err(Elapsed));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Timeout<F, S> {
        #[pin]
        future: Option<F>,
        #[pin]
        sleep: S,
    }
}

impl<F: Future, S: Future<Output = ()>> Future for Timeout<F, S> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            // Already ran out (or completed): a second poll after completion.
            return Poll::Ready(Err(Elapsed));
        };
        if let Poll::Ready(output) = future.poll(cx) {
            this.future.set(None);
            return Poll::Ready(Ok(output));
        }
        match this.sleep.poll(cx) {
            Poll::Ready(()) => {
                // Out of time: drop the call now, not when the caller drops us.
                this.future.set(None);
                Poll::Ready(Err(Elapsed))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F, S> fmt::Debug for Timeout<F, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("running", &self.future.is_some())
            .finish_non_exhaustive()
    }
}

/// The time given to a future ran out.
///
/// # Examples
///
/// ```
/// use watertight::deadline::Elapsed;
/// assert_eq!(Elapsed.to_string(), "deadline has elapsed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl core::error::Error for Elapsed {}

/// A request budget: the instant by which the whole request must be done,
/// with the clock that measures it.
///
/// Made once where the request enters (from the outer SLA: "answer within
/// 1.5 s"), then passed down by value or reference; it is `Copy` when the
/// clock is (every clock of this crate, and `&ManualClock`). Each layer asks
/// how much is [`remaining`](Self::remaining) and bounds its own waits by it,
/// or makes a [`child`](Self::child) with its own cap — a child never ends
/// after its parent.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
///
/// let clock = ManualClock::new();
/// let request = Deadline::after(&clock, Duration::from_millis(1500));
/// clock.advance(Duration::from_millis(1200));
/// assert_eq!(request.remaining(), Duration::from_millis(300));
///
/// // A call that allows itself 1 s gets only what is left of the request.
/// let call = request.child(Duration::from_secs(1));
/// assert_eq!(call.remaining(), Duration::from_millis(300));
/// clock.advance(Duration::from_millis(300));
/// assert!(call.is_expired() && request.is_expired());
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Deadline<C> {
    clock: C,
    at: Instant,
}

impl<C: Clock> Deadline<C> {
    /// A budget of `budget` from now by `clock`. A budget too large for the
    /// clock ends at [`Instant::MAX`] (never).
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::{Instant, ManualClock}; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let request = Deadline::after(&clock, Duration::from_millis(1500));
    /// assert_eq!(request.remaining(), Duration::from_millis(1500));
    /// assert_eq!(Deadline::after(&clock, Duration::MAX).instant(), Instant::MAX);
    /// ```
    pub fn after(clock: C, budget: Duration) -> Self {
        let at = clock.now().saturating_add(budget);
        Deadline { clock, at }
    }

    /// A deadline at the instant `at` of `clock`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::{Clock, ManualClock}; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let d = Deadline::at(&clock, clock.now() + Duration::from_secs(2));
    /// assert_eq!(d.remaining(), Duration::from_secs(2));
    /// ```
    pub const fn at(clock: C, at: Instant) -> Self {
        Deadline { clock, at }
    }

    /// A deadline that never ends (no budget was given).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// assert!(!Deadline::never(&clock).is_expired());
    /// ```
    pub const fn never(clock: C) -> Self {
        Deadline {
            clock,
            at: Instant::MAX,
        }
    }

    /// The instant it ends.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::{ManualClock, Instant}; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// assert_eq!(Deadline::after(&clock, Duration::from_secs(1)).instant(), Instant::ZERO + Duration::from_secs(1));
    /// ```
    pub const fn instant(&self) -> Instant {
        self.at
    }

    /// What is left of the budget now; zero once it has run out.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let d = Deadline::after(&clock, Duration::from_secs(1));
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(d.remaining(), Duration::ZERO);
    /// ```
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(self.clock.now())
    }

    /// Whether the budget has run out (`now >= instant`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let d = Deadline::after(&clock, Duration::from_millis(5));
    /// assert!(!d.is_expired());
    /// clock.advance(Duration::from_millis(5));
    /// assert!(d.is_expired());
    /// ```
    pub fn is_expired(&self) -> bool {
        self.clock.now() >= self.at
    }

    /// A deadline for one step of the request: `max` from now, but never
    /// after this deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let request = Deadline::after(&clock, Duration::from_secs(10));
    /// assert_eq!(request.child(Duration::from_secs(2)).remaining(), Duration::from_secs(2));
    /// assert_eq!(request.child(Duration::from_secs(60)).remaining(), Duration::from_secs(10));
    /// ```
    pub fn child(&self, max: Duration) -> Self
    where
        C: Clone,
    {
        let at = self.clock.now().saturating_add(max).min(self.at);
        Deadline {
            clock: self.clock.clone(),
            at,
        }
    }

    /// The clock it is measured by.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::{Clock, ManualClock}; use watertight::deadline::Deadline;
    /// let clock = ManualClock::new();
    /// let d = Deadline::after(&clock, Duration::from_secs(1));
    /// assert_eq!(d.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Runs `future` until this deadline: [`timeout_at`] with the
    /// deadline's own clock.
    ///
    /// # Cancel safety
    ///
    /// As for [`timeout_at`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock; use watertight::deadline::Deadline;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let d = Deadline::after(&clock, Duration::from_millis(50));
    /// assert_eq!(d.run(async { "fast" }).await, Ok("fast"));
    /// # });
    /// ```
    pub fn run<F: Future>(&self, future: F) -> Timeout<F, C::Sleep>
    where
        C: Timer + Clone,
    {
        timeout_at(self.clock.clone(), self.at, future)
    }
}

impl<C> fmt::Debug for Deadline<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deadline")
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}
