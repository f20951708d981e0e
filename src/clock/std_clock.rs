use std::sync::OnceLock;

use super::{nanos, Clock, Instant};

static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();

/// Nanoseconds of `t` since the process-wide origin shared by the std-based
/// clocks (the first time any of them is read); saturating, never panicking.
#[inline]
pub(crate) fn std_nanos(t: std::time::Instant) -> Instant {
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    let d = t.saturating_duration_since(origin);
    // Seconds and nanoseconds in u64, saturating: cheaper than `as_nanos`'s
    // u128 on the breaker's slow-call path, which reads the clock twice.
    Instant::from_nanos(nanos::saturating_from(d))
}

/// The `std::time::Instant` at `t` on the shared origin.
#[allow(dead_code)] // used by the runtime clocks only
pub(crate) fn to_std(t: Instant) -> std::time::Instant {
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    origin
        .checked_add(t.since_origin())
        // Far-future deadlines (Instant::MAX) do not fit every platform's
        // `std::time::Instant`; a century is "never" for a wait.
        .unwrap_or_else(|| origin + core::time::Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The process's monotonic clock, `std::time::Instant`, as a zero-sized [`Clock`].
///
/// Its origin is the first time any std-based clock of this crate is read in
/// the process. It is not a [`Timer`](super::Timer): waking a task needs a
/// runtime, so use `TokioClock`, `AsyncIoClock` or `EmbassyClock` to wait
/// (or `ManualClock`, by reference or `Arc`, in tests). Given to something
/// that waits, it fails to compile with "`StdClock` cannot wait", naming
/// those clocks.
///
/// # Examples
///
/// ```
/// use watertight::clock::{Clock, StdClock};
///
/// let a = StdClock.now();
/// let b = StdClock.now();
/// assert!(b >= a);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdClock;

impl StdClock {
    /// The clock (it is zero-sized; `StdClock` works as well).
    pub const fn new() -> Self {
        StdClock
    }
}

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Instant {
        std_nanos(std::time::Instant::now())
    }
}
