use core::fmt;
use core::time::Duration;

use super::{nanos, Clock, Instant};
use crate::sync::{const_fn, AtomicU64, Ordering};

/// A clock that moves only when told to: the deterministic clock for tests,
/// simulations and loom models.
///
/// [`advance`](ManualClock::advance) moves time forward and wakes every
/// sleeper that is now due, so a test of time-based behaviour runs without a
/// single real sleep and gives the same answer on every run. With `alloc`,
/// `&ManualClock` and `Arc<ManualClock>` are [`Timer`](super::Timer)s.
///
/// Time never goes backwards: [`set`](ManualClock::set) to an earlier instant is
/// ignored, which keeps the [`Clock`] contract.
///
/// On targets without 64-bit atomics (thumbv6m, thumbv7em) the counter goes
/// through portable-atomic's lock-based fallback: fine for a test clock, and
/// the reason production code there uses `EmbassyClock` instead.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, Instant, ManualClock};
///
/// static CLOCK: ManualClock = ManualClock::new();
/// assert_eq!(CLOCK.now(), Instant::ZERO);
/// CLOCK.advance(Duration::from_secs(2));
/// assert_eq!(CLOCK.now(), Instant::from_nanos(2_000_000_000));
/// ```
pub struct ManualClock {
    nanos: AtomicU64,
    #[cfg(feature = "alloc")]
    wake: event_listener::Event,
}

impl ManualClock {
    const_fn! {
        /// A clock at [`Instant::ZERO`].
        pub const fn new() -> Self {
            ManualClock {
                nanos: AtomicU64::new(0),
                #[cfg(feature = "alloc")]
                wake: event_listener::Event::new(),
            }
        }
    }

    /// Moves time forward by `d` (saturating at [`Instant::MAX`]) and wakes the
    /// sleepers that are due.
    ///
    /// # Memory ordering
    ///
    /// The new time is published with `Release`; a task woken by this call sees
    /// it, and everything this thread wrote before advancing.
    pub fn advance(&self, d: Duration) {
        let step = nanos::saturating_from(d);
        let mut cur = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(step);
            match self
                .nanos
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        self.wake_sleepers();
    }

    /// Moves time forward to `t`; an instant not after the current one changes
    /// nothing (the clock stays monotonic).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::{Clock, Instant, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.set(Instant::from_nanos(500));
    /// clock.set(Instant::from_nanos(100)); // earlier: ignored
    /// assert_eq!(clock.now(), Instant::from_nanos(500));
    /// ```
    pub fn set(&self, t: Instant) {
        self.nanos.fetch_max(t.as_nanos(), Ordering::AcqRel);
        self.wake_sleepers();
    }

    #[inline]
    fn wake_sleepers(&self) {
        #[cfg(feature = "alloc")]
        self.wake.notify(usize::MAX);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::from_nanos(self.nanos.load(Ordering::Acquire))
    }
    /// One load.
    const CHEAP_NOW: bool = true;
}

#[cfg(feature = "alloc")]
pub use sleep::ManualSleep;

#[cfg(feature = "alloc")]
mod sleep {
    use core::fmt;
    use core::future::Future;
    use core::ops::Deref;
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use event_listener::EventListener;

    use super::ManualClock;
    use crate::clock::{Clock, Instant, Timer};

    /// The [`Timer::Sleep`] of a [`ManualClock`] handle: completes once the clock
    /// has been advanced to its deadline.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any time only removes its wake-up registration.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ManualSleep<R> {
        clock: R,
        deadline: Instant,
        listener: Option<EventListener>,
    }

    impl<R: Deref<Target = ManualClock> + Unpin> Future for ManualSleep<R> {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let this = &mut *self;
            loop {
                if this.clock.now() >= this.deadline {
                    this.listener = None;
                    return Poll::Ready(());
                }
                match &mut this.listener {
                    // Listen first, then re-check the time: an advance between
                    // the check above and the registration is not missed.
                    None => this.listener = Some(this.clock.wake.listen()),
                    Some(l) => match Pin::new(l).poll(cx) {
                        Poll::Ready(()) => this.listener = None,
                        Poll::Pending => return Poll::Pending,
                    },
                }
            }
        }
    }

    impl<R> fmt::Debug for ManualSleep<R> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ManualSleep")
                .field("deadline", &self.deadline)
                .finish_non_exhaustive()
        }
    }

    impl<'a> Timer for &'a ManualClock {
        type Sleep = ManualSleep<&'a ManualClock>;

        fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
            ManualSleep {
                clock: *self,
                deadline,
                listener: None,
            }
        }
    }

    #[cfg(target_has_atomic = "ptr")]
    impl Timer for alloc::sync::Arc<ManualClock> {
        type Sleep = ManualSleep<alloc::sync::Arc<ManualClock>>;

        fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
            ManualSleep {
                clock: alloc::sync::Arc::clone(self),
                deadline,
                listener: None,
            }
        }
    }
}
