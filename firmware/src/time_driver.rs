//! A minimal embassy-time driver on the Cortex-M SysTick.
//!
//! SysTick fires at `embassy_time::TICK_HZ` (1 kHz, feature `tick-hz-1_000`),
//! from the core clock (`CORE_HZ`: the STM32F407's 16 MHz HSI after reset).
//! Every interrupt bumps a 64-bit tick count and, when the earliest alarm is
//! due, lets the timer queue wake the expired tasks. The queue is
//! embassy-time-queue-utils' default (integrated) queue: its items live in
//! the executor's task headers, so it holds no fixed number of timers.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

/// Core clock feeding SysTick. 16 MHz is the STM32F4 HSI, the clock at reset.
pub const CORE_HZ: u32 = 16_000_000;

struct SysTickDriver {
    /// Ticks since `init`.
    ticks: Mutex<Cell<u64>>,
    /// Tick at which the queue's earliest timer expires (`u64::MAX`: none).
    alarm: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    alarm: Mutex::new(Cell::new(u64::MAX)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                // Wakes what is already due; the rest is checked every tick,
                // so an alarm set in the past fires on the next interrupt.
                let now = self.ticks.borrow(cs).get();
                self.alarm.borrow(cs).set(queue.next_expiration(now));
            }
        });
    }
}

/// Starts SysTick at `TICK_HZ`. Call once, before awaiting any timer.
pub fn init(mut syst: SYST) {
    const RELOAD: u32 = CORE_HZ / embassy_time_driver::TICK_HZ as u32 - 1;
    const _: () = assert!(RELOAD > 0 && RELOAD < (1 << 24), "SysTick reload is 24-bit");
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(RELOAD);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        let now = ticks.get() + 1;
        ticks.set(now);
        let alarm = DRIVER.alarm.borrow(cs);
        if now >= alarm.get() {
            alarm.set(DRIVER.queue.borrow_ref_mut(cs).next_expiration(now));
        }
    });
}
