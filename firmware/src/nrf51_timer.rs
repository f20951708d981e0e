//! The nRF51's tick: its TIMER0 peripheral. The nRF51's Cortex-M0 has no
//! SysTick (QEMU's model has one, the chip does not), so the tick comes from
//! a timer both have.
//!
//! TIMER0 runs in 32-bit timer mode at 1 MHz (the 16 MHz peripheral clock
//! divided by 2⁴); compare register 0 holds `1 MHz / TICK_HZ` and the
//! COMPARE0→CLEAR shortcut restarts the count, so COMPARE0 fires once per
//! tick. Its interrupt (IRQ 8, the peripheral's ID) reaches `DefaultHandler`:
//! without a PAC, cortex-m-rt points every device interrupt there. The
//! registers are written by hand, a handful of them, from the nRF51 Series
//! Reference Manual: the nRF51 PAC crates are no longer maintained, and
//! embassy-nrf's nRF51 time driver uses RTC1, which QEMU does not emulate.

use core::ptr::{read_volatile, write_volatile};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::NVIC;
use cortex_m_rt::exception;

/// TIMER0's base address.
const TIMER0: usize = 0x4000_8000;
const TASKS_START: usize = 0x000;
const TASKS_STOP: usize = 0x004;
const TASKS_CLEAR: usize = 0x00C;
const EVENTS_COMPARE0: usize = 0x140;
const SHORTS: usize = 0x200;
const INTENSET: usize = 0x304;
const MODE: usize = 0x504;
const BITMODE: usize = 0x508;
const PRESCALER: usize = 0x510;
const CC0: usize = 0x540;

/// SHORTS: COMPARE0 clears the counter.
const COMPARE0_CLEAR: u32 = 1 << 0;
/// INTENSET: interrupt on COMPARE0.
const INT_COMPARE0: u32 = 1 << 16;
/// BITMODE: 32 bits.
const BITMODE_32: u32 = 3;
/// 16 MHz / 2⁴ = 1 MHz.
const PRESCALE_1MHZ: u32 = 4;
const TIMER_HZ: u32 = 1_000_000;

/// TIMER0's interrupt: IRQ 8 (an nRF51 peripheral's IRQ is its ID, bits
/// 12..17 of its address).
#[derive(Clone, Copy)]
struct Timer0Irq;

// SAFETY: 8 is TIMER0's interrupt on every nRF51, below the Cortex-M0's 32.
unsafe impl InterruptNumber for Timer0Irq {
    fn number(self) -> u16 {
        ((TIMER0 >> 12) & 0x1F) as u16
    }
}

fn write(offset: usize, value: u32) {
    // SAFETY: a TIMER0 register (word-aligned, inside its 4 KiB block);
    // only this module touches TIMER0.
    unsafe { write_volatile((TIMER0 + offset) as *mut u32, value) }
}

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
    write(TASKS_STOP, 1);
    write(MODE, 0);
    write(BITMODE, BITMODE_32);
    write(PRESCALER, PRESCALE_1MHZ);
    write(CC0, TIMER_HZ / embassy_time_driver::TICK_HZ as u32);
    write(SHORTS, COMPARE0_CLEAR);
    write(EVENTS_COMPARE0, 0);
    write(INTENSET, INT_COMPARE0);
    write(TASKS_CLEAR, 1);
    // SAFETY: the handler below is ready and shares state with the rest of
    // the firmware only through critical sections.
    unsafe { NVIC::unmask(Timer0Irq) };
    write(TASKS_START, 1);
}

/// Every device interrupt: TIMER0's is the tick; any other is a bug (none is
/// enabled), and panics.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn == Timer0Irq.number() as i16 {
        write(EVENTS_COMPARE0, 0);
        // Read back so the event is cleared before the handler returns
        // (otherwise the interrupt can fire again at once).
        // SAFETY: as in `write`.
        let _ = unsafe { read_volatile((TIMER0 + EVENTS_COMPARE0) as *const u32) };
        crate::ticker::tick();
    } else {
        panic!("unexpected interrupt {irqn}");
    }
}
