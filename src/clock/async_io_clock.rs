use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::std_clock::{std_nanos, to_std};
use super::{Clock, Instant, Timer};

/// async-io's timer on the process's monotonic clock: the clock for smol and
/// async-std.
///
/// Time is `std::time::Instant` on the same origin as `StdClock`; sleeps are
/// `async_io::Timer`s, driven by async-io's reactor thread, so they work under
/// any executor (smol, async-std, `futures_lite::future::block_on`).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{AsyncIoClock, Clock, Timer};
///
/// smol::block_on(async {
///     let start = AsyncIoClock.now();
///     AsyncIoClock.sleep_until(start + Duration::from_millis(1)).await;
///     assert!(AsyncIoClock.now() - start >= Duration::from_millis(1));
/// });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncIoClock;

impl AsyncIoClock {
    /// The clock (it is zero-sized; `AsyncIoClock` works as well).
    pub const fn new() -> Self {
        AsyncIoClock
    }
}

impl Clock for AsyncIoClock {
    #[inline]
    fn now(&self) -> Instant {
        std_nanos(std::time::Instant::now())
    }
}

impl Timer for AsyncIoClock {
    type Sleep = AsyncIoSleep;

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        AsyncIoSleep(async_io::Timer::at(to_std(deadline)))
    }
}

/// The [`Timer::Sleep`] of [`AsyncIoClock`]: an `async_io::Timer` that
/// completes with `()`.
///
/// # Cancel safety
///
/// Dropping it deregisters the timer from async-io's reactor.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct AsyncIoSleep(async_io::Timer);

impl Future for AsyncIoSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}
