use super::{Clock, Instant, Timer};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Nanoseconds per tick when the tick rate divides a second evenly (1 kHz,
/// 1 MHz, …); zero otherwise (32.768 kHz).
const NANOS_PER_TICK: u64 = if NANOS_PER_SEC % embassy_time::TICK_HZ as u128 == 0 {
    (NANOS_PER_SEC / embassy_time::TICK_HZ as u128) as u64
} else {
    0
};

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
    fn now(&self) -> Instant {
        let ticks = embassy_time::Instant::now().as_ticks();
        let nanos = if NANOS_PER_TICK != 0 {
            // Every common tick rate divides a second into whole
            // nanoseconds: one 64-bit multiplication, no 128-bit arithmetic
            // (a few instructions on a Cortex-M instead of a library call).
            ticks.saturating_mul(NANOS_PER_TICK)
        } else {
            let nanos = ticks as u128 * NANOS_PER_SEC / embassy_time::TICK_HZ as u128;
            u64::try_from(nanos).unwrap_or(u64::MAX)
        };
        Instant::from_nanos(nanos)
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
