use super::{Clock, Instant, Timer};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// embassy-time's clock and timer, for embassy executors on microcontrollers
/// (and on the host with embassy-time's `std` driver).
///
/// Its origin is embassy's (boot). Reads are exact multiples of the tick
/// (`embassy_time::TICK_HZ`, 1 MHz by default); a deadline between two ticks
/// is rounded up to the next tick, so a sleep never ends early. This crate
/// enables no `tick-*` feature of embassy-time: the firmware picks it.
///
/// # Examples
///
/// A bulkhead in a `static` on a gateway, with embassy's clock:
///
/// ```
/// use watertight::Bulkhead;
/// use watertight::clock::{Clock, EmbassyClock};
///
/// static MODEM: Bulkhead<EmbassyClock> = Bulkhead::new("modem", 2, EmbassyClock::new());
///
/// let permit = MODEM.try_acquire().unwrap();
/// let t0 = MODEM.clock().now();
/// assert!(MODEM.clock().now() >= t0);
/// drop(permit);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbassyClock;

impl EmbassyClock {
    /// The clock (it is zero-sized; `EmbassyClock` works as well).
    pub const fn new() -> Self {
        EmbassyClock
    }
}

impl Clock for EmbassyClock {
    #[inline]
    fn now(&self) -> Instant {
        let ticks = embassy_time::Instant::now().as_ticks() as u128;
        let nanos = ticks * NANOS_PER_SEC / embassy_time::TICK_HZ as u128;
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

impl Timer for EmbassyClock {
    type Sleep = embassy_time::Timer;

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        let hz = embassy_time::TICK_HZ as u128;
        // Round up: a sleep must never end before its deadline.
        let ticks = (deadline.as_nanos() as u128 * hz).div_ceil(NANOS_PER_SEC);
        let ticks = u64::try_from(ticks).unwrap_or(u64::MAX);
        embassy_time::Timer::at(embassy_time::Instant::from_ticks(ticks))
    }
}
