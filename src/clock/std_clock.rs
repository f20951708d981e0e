use std::sync::OnceLock;

use super::{nanos, Clock, Instant};

/// The process-wide origin shared by the std-based clocks: a
/// `std::time::Instant`, and on Linux the same moment as raw
/// `CLOCK_MONOTONIC` nanoseconds.
struct Origin {
    std: std::time::Instant,
    #[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
    raw: u64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();

/// The origin: on the hot path `OnceLock::get`, one acquire load (a plain
/// load on x86) and a branch; the first read initialises it out of line.
#[inline(always)]
fn origin() -> &'static Origin {
    match ORIGIN.get() {
        Some(origin) => origin,
        None => init_origin(),
    }
}

#[cold]
#[inline(never)]
fn init_origin() -> &'static Origin {
    ORIGIN.get_or_init(|| {
        let std = std::time::Instant::now();
        // Read after `std`: a `StdClock` reading is never after the
        // `std_nanos` of the same moment (they differ by the gap between
        // these two reads, tens of nanoseconds).
        #[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
        let raw = raw_monotonic().unwrap_or(0);
        Origin {
            std,
            #[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
            raw,
        }
    })
}

/// `CLOCK_MONOTONIC` in nanoseconds, the clock `std::time::Instant::now()`
/// reads on Linux, without std's `Instant` subtraction: that is a call into
/// libstd (`duration_since` is not inlinable) returning a `Result`, and it
/// was what made `StdClock::now()` cost 1.3–1.4× `Instant::now()`.
#[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
#[inline(always)]
fn raw_monotonic() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; `clock_gettime` writes
    // only it (through the vDSO, no system call).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return None;
    }
    // Never negative for CLOCK_MONOTONIC; `tv_nsec` is below 10⁹.
    let secs = ts.tv_sec as u64;
    Some(
        secs.saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64),
    )
}

/// Nanoseconds of `t` since the process-wide origin shared by the std-based
/// clocks (the first time any of them is read); saturating, never panicking.
#[inline]
pub(crate) fn std_nanos(t: std::time::Instant) -> Instant {
    let d = t.saturating_duration_since(origin().std);
    // Seconds and nanoseconds in u64, saturating: cheaper than `as_nanos`'s
    // u128 on the breaker's slow-call path, which reads the clock twice.
    Instant::from_nanos(nanos::saturating_from(d))
}

/// The `std::time::Instant` at `t` on the shared origin.
#[allow(dead_code)] // used by the runtime clocks only
pub(crate) fn to_std(t: Instant) -> std::time::Instant {
    let origin = origin().std;
    origin
        .checked_add(t.since_origin())
        // Far-future deadlines (Instant::MAX) do not fit every platform's
        // `std::time::Instant`; a century is "never" for a wait.
        .unwrap_or_else(|| origin + core::time::Duration::from_secs(100 * 365 * 24 * 3600))
}

/// The process's monotonic clock, `std::time::Instant`, as a zero-sized [`Clock`].
///
/// Its origin is the first time any std-based clock of this crate is read in
/// the process. On 64-bit Linux it reads `CLOCK_MONOTONIC` itself (the
/// clock `std::time::Instant` reads there) and subtracts the origin as one
/// `u64`, which costs about what `Instant::now()` does; elsewhere it
/// converts `std::time::Instant::now()`. It is not a [`Timer`](super::Timer): waking a task needs a
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
    #[inline(always)]
    fn now(&self) -> Instant {
        #[cfg(all(target_os = "linux", target_pointer_width = "64", not(miri)))]
        if let Some(raw) = raw_monotonic() {
            return Instant::from_nanos(raw.saturating_sub(origin().raw));
        }
        std_nanos(std::time::Instant::now())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::time::Duration;

    /// `StdClock::now()` (CLOCK_MONOTONIC itself on 64-bit Linux) and the
    /// runtime clocks' `std_nanos(std::time::Instant::now())` are one clock:
    /// monotonic when interleaved, apart by no more than the gap between
    /// two reads at initialisation (allowed here: 1 ms, for a preempted
    /// first read on a loaded machine).
    #[test]
    fn now_agrees_with_std_nanos() {
        let slack = Duration::from_millis(1);
        let mut last = StdClock.now();
        // Miri runs the library's tests too, far slower.
        let reads = if cfg!(miri) { 100 } else { 100_000 };
        for _ in 0..reads {
            let a = StdClock.now();
            let b = std_nanos(std::time::Instant::now());
            let c = StdClock.now();
            assert!(a >= last && c >= a, "{last:?} {a:?} {c:?}");
            assert!(b + slack >= a && c + slack >= b, "{a:?} {b:?} {c:?}");
            last = c;
        }
        let t = StdClock.now();
        assert!(to_std(t) <= std::time::Instant::now() + slack);
    }
}
