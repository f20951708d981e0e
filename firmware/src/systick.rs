//! The STM32F4's tick: the Cortex-M SysTick, fed by the core clock.

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;

/// The STM32F4's core clock after reset: its 16 MHz internal oscillator
/// (HSI). The size firmware runs on it.
pub const HSI_HZ: u32 = 16_000_000;

/// The core clock of QEMU's `netduinoplus2`: QEMU models no RCC and feeds the
/// STM32F405 a fixed 168 MHz SYSCLK, which SysTick counts in QEMU's virtual
/// time.
pub const QEMU_NETDUINOPLUS2_HZ: u32 = 168_000_000;

/// Starts SysTick at `TICK_HZ` from a core clock of `CORE_HZ`. Call once,
/// before awaiting any timer.
pub fn init<const CORE_HZ: u32>(mut syst: SYST) {
    const {
        let reload = CORE_HZ / embassy_time_driver::TICK_HZ as u32;
        assert!(reload > 1 && reload <= 1 << 24, "SysTick reload is 24-bit");
    }
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CORE_HZ / embassy_time_driver::TICK_HZ as u32 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    crate::ticker::tick();
}
