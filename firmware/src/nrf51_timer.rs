//! The nRF51's tick: its TIMER0 peripheral. The nRF51's Cortex-M0 has no
//! SysTick (QEMU's model has one, the chip does not), so the tick comes from
//! a timer both have.
//!
//! TIMER0 runs in 32-bit timer mode at 1 MHz (the 16 MHz peripheral clock
//! divided by 2⁴); compare register 0 holds `1 MHz / TICK_HZ` and the
//! COMPARE0→CLEAR shortcut restarts the count, so COMPARE0 fires once per
//! tick. The registers and the vector table (feature `rt`) come from
//! embassy's nrf-pac. Not embassy-nrf's own time driver: it runs on RTC1,
//! which QEMU's nRF51 does not emulate (its timers are TIMER0–2).

use cortex_m::peripheral::NVIC;
use nrf_pac::timer::vals::{Bitmode, Mode};
use nrf_pac::{interrupt, Interrupt, TIMER0};

/// TIMER0's clock: 16 MHz / 2^PRESCALER.
const PRESCALER: u8 = 4;
const TIMER_HZ: u32 = 16_000_000 >> PRESCALER;

/// Starts TIMER0 ticking at `TICK_HZ`. Call once, before awaiting any
/// timer.
pub fn init() {
    const {
        let tick_hz = embassy_time_driver::TICK_HZ as u32;
        assert!(
            tick_hz <= TIMER_HZ && TIMER_HZ.is_multiple_of(tick_hz),
            "TICK_HZ must divide TIMER0's 1 MHz"
        );
    }
    TIMER0.tasks_stop().write_value(1);
    TIMER0.mode().write(|w| w.set_mode(Mode::Timer));
    TIMER0.bitmode().write(|w| w.set_bitmode(Bitmode::_32bit));
    TIMER0.prescaler().write(|w| w.set_prescaler(PRESCALER));
    TIMER0
        .cc(0)
        .write_value(TIMER_HZ / embassy_time_driver::TICK_HZ as u32);
    TIMER0.shorts().write(|w| w.set_compare_clear(0, true));
    TIMER0.events_compare(0).write_value(0);
    TIMER0.intenset().write(|w| w.set_compare(0, true));
    TIMER0.tasks_clear().write_value(1);
    // SAFETY: the handler below is ready, and shares state with the rest
    // of the firmware only through critical sections.
    unsafe { NVIC::unmask(Interrupt::TIMER0) };
    TIMER0.tasks_start().write_value(1);
}

#[interrupt]
fn TIMER0() {
    TIMER0.events_compare(0).write_value(0);
    // Read back, so that the event is clear before the handler returns
    // (otherwise the interrupt can fire again at once).
    let _ = TIMER0.events_compare(0).read();
    crate::ticker::tick();
}
