//! The generic cell rate algorithm's one step, as plain arithmetic: where a
//! request for `inc = k × T` nanoseconds of cells at `now` would put the
//! theoretical arrival time, and from when it conforms.

/// The last nanosecond a schedule can reach: `2^62 − 1`, about 146 years
/// after the clock's origin. The limiter's word keeps the TAT in its upper
/// 62 bits and the low bits of its admission counter below them (see
/// `RateLimiter`'s Counters), so a TAT past this does not fit; a request
/// that would end past it never conforms.
pub(crate) const HORIZON_NANOS: u64 = (1 << 62) - 1;

/// A request placed on the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The theoretical arrival time after the request: `max(tat, now) + inc`.
    pub(crate) end: u64,
    /// The earliest instant the request conforms: `end - tolerance`
    /// (zero if that is negative). It conforms at `now` iff `at <= now`.
    pub(crate) at: u64,
}

/// Places `inc` nanoseconds of cells after `tat` at `now`, with `tolerance`
/// (`burst × T`) of slack. `None` if the new arrival time would be past
/// [`HORIZON_NANOS`]: past the schedule's end, the request never conforms.
///
/// No overflow and no panic for any input: `now` may be far behind `tat`
/// (a clock that went backwards) or at `u64::MAX`.
#[inline(always)]
pub(crate) const fn place(tat: u64, now: u64, inc: u64, tolerance: u64) -> Option<Slot> {
    let start = if tat > now { tat } else { now };
    match start.checked_add(inc) {
        Some(end) if end <= HORIZON_NANOS => Some(Slot {
            end,
            at: end.saturating_sub(tolerance),
        }),
        _ => None,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn idle_limiter_conforms_at_once() {
        // T = 10, burst 3.
        let s = place(0, 100, 10, 30).unwrap();
        assert_eq!(s, Slot { end: 110, at: 80 });
        assert!(s.at <= 100);
    }

    #[test]
    fn a_full_burst_waits_one_interval() {
        let s = place(130, 100, 10, 30).unwrap();
        assert_eq!(s, Slot { end: 140, at: 110 });
    }

    #[test]
    fn the_tolerance_is_the_bound() {
        // Exactly burst × T ahead: conforms; one ns more: does not.
        assert!(place(120, 100, 10, 30).unwrap().at <= 100);
        assert_eq!(place(121, 100, 10, 30).unwrap().at, 101);
    }

    #[test]
    fn backwards_and_end_of_time() {
        // A clock far behind the schedule: the schedule rules.
        assert_eq!(place(1_000, 0, 10, 30).unwrap().at, 980);
        let h = HORIZON_NANOS;
        assert_eq!(place(h - 5, 0, 5, 0).unwrap().end, h);
        assert_eq!(place(h - 5, 0, 6, 0), None);
        assert_eq!(place(0, h, 1, u64::MAX), None);
        assert_eq!(place(0, h, 0, 0).unwrap().at, h);
        // A clock past the horizon: nothing conforms, nothing overflows.
        assert_eq!(place(0, h + 1, 0, 0), None);
        assert_eq!(place(0, u64::MAX, 1, u64::MAX), None);
        assert_eq!(place(u64::MAX, 0, 0, 0), None);
    }
}
