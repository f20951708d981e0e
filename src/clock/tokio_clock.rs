use std::sync::OnceLock;

use super::{nanos, Clock, Instant, Timer};

static ORIGIN: OnceLock<tokio::time::Instant> = OnceLock::new();

/// The origin is taken from the real clock, not from a runtime's (possibly
/// paused) clock, and back-dated by up to a day: a paused runtime's virtual
/// time starts at the real time it was paused at, so any runtime created in
/// the day before the first read still reads at or after the origin.
fn origin() -> tokio::time::Instant {
    *ORIGIN.get_or_init(|| {
        let real = std::time::Instant::now();
        let back = [86_400, 3_600, 60, 1]
            .iter()
            .find_map(|&s| real.checked_sub(core::time::Duration::from_secs(s)))
            .unwrap_or(real);
        tokio::time::Instant::from_std(back)
    })
}

/// tokio's clock and timer: `tokio::time::Instant` and `tokio::time::Sleep`.
///
/// It honours tokio's paused time (`#[tokio::test(start_paused = true)]`,
/// `tokio::time::pause`/`advance`): time read through it is the runtime's
/// virtual time, and sleeps auto-advance with it. Its origin is fixed per
/// process, on the real clock, up to a day before the first read, so
/// runtimes paused and unpaused in one process (as in one test binary) all
/// read at or after it; a read before the origin would saturate at
/// [`Instant::ZERO`], which keeps the clock monotonic.
///
/// [`sleep_until`](Timer::sleep_until) must be called, and the sleep polled,
/// inside a tokio runtime with the time driver enabled (tokio's own rule).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::{Clock, Timer, TokioClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let start = TokioClock.now();
/// TokioClock.sleep_until(start + Duration::from_secs(5)).await; // paused: no real wait
/// assert!(TokioClock.now() - start >= Duration::from_secs(5));
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

impl TokioClock {
    /// The clock (it is zero-sized; `TokioClock` works as well).
    pub const fn new() -> Self {
        TokioClock
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        let d = tokio::time::Instant::now().saturating_duration_since(origin());
        Instant::from_nanos(nanos::saturating_from(d))
    }
}

impl Timer for TokioClock {
    type Sleep = tokio::time::Sleep;

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        let o = origin();
        // Past what `Instant` can hold, sleep "forever" as tokio itself does
        // (about 30 years).
        let at = o
            .checked_add(deadline.since_origin())
            .unwrap_or_else(|| o + core::time::Duration::from_secs(86_400 * 365 * 30));
        tokio::time::sleep_until(at)
    }
}
