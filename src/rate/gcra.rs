//! The generic cell rate algorithm's one step, as plain arithmetic: where a
//! request for `inc = k × T` nanoseconds of cells at `now` would put the
//! theoretical arrival time, and from when it conforms.

/// The last nanosecond a schedule can reach: `2^60 − 1`, about 36.5 years
/// after the clock's origin. The limiter's word keeps the TAT in its low 60
/// bits and the low bits of its admission counter above them (see
/// `RateLimiter`'s Counters), so a TAT past this does not fit; a request
/// that would end past it never conforms.
pub(crate) const HORIZON_NANOS: u64 = (1 << 60) - 1;

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

/// What one request does at `now`: [`place`] decided, as the admission
/// path needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// It conforms; the new TAT.
    Admit(u64),
    /// It does not; the earliest instant it would (`u64::MAX` past the
    /// horizon).
    Refuse(u64),
}

/// [`place`], and whether the request conforms at `now`, in the fewest
/// operations: the check's hot path. Requires `inc <= HORIZON_NANOS` (a
/// quota's `T` and any `k × T` up to its `burst × T` are), which makes
/// `start > HORIZON_NANOS - inc` the same as `start + inc > HORIZON_NANOS`
/// without an overflow test; and since `end >= now`, `end - tolerance <= now`
/// is `end - now <= tolerance`, with no saturation.
#[inline(always)]
pub(crate) const fn step(tat: u64, now: u64, inc: u64, tolerance: u64) -> Step {
    debug_assert!(inc <= HORIZON_NANOS);
    let start = if tat > now { tat } else { now };
    if start > HORIZON_NANOS - inc {
        return Step::Refuse(u64::MAX);
    }
    let end = start + inc;
    if end - now > tolerance {
        // `end > now + tolerance`, so this does not underflow.
        Step::Refuse(end - tolerance)
    } else {
        Step::Admit(end)
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

    /// `step` is `place` with its decision at `now`, for every `inc` up to
    /// the horizon: around zero, around the tolerance and at the horizon.
    #[test]
    #[cfg_attr(miri, ignore = "20 000 cases of plain arithmetic: no memory to check")]
    fn step_decides_as_place() {
        let h = HORIZON_NANOS;
        let edges = |c: u64| {
            [
                0,
                1,
                2,
                9,
                10,
                11,
                c.saturating_sub(1),
                c,
                c.saturating_add(1),
            ]
        };
        let mut checked = 0;
        for base in [0, 30, 1 << 40, h - 40, h] {
            for tat in edges(base).into_iter().chain([h, h - 1, h - 10]) {
                for now in edges(base)
                    .into_iter()
                    .chain([h + 1, u64::MAX, u64::MAX - 1])
                {
                    for inc in [0, 1, 10, 30, h - 1, h] {
                        for tolerance in [0, 10, 30, 31, h] {
                            let want = match place(tat, now, inc, tolerance) {
                                Some(s) if s.at <= now => Step::Admit(s.end),
                                Some(s) => Step::Refuse(s.at),
                                None => Step::Refuse(u64::MAX),
                            };
                            assert_eq!(
                                step(tat, now, inc, tolerance),
                                want,
                                "tat {tat} now {now} inc {inc} tolerance {tolerance}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }
}
