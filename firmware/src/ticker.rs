//! The embassy-time driver both chips share: a 64-bit tick count bumped by a
//! periodic interrupt at `embassy_time::TICK_HZ` (1 kHz, feature
//! `tick-hz-1_000`), and the timer queue.
//!
//! Each chip's module starts its own periodic interrupt (SysTick on the
//! STM32F4, TIMER0 on the nRF51, which has no SysTick) and calls [`tick`]
//! from it. The queue is embassy-time-queue-utils' default (integrated)
//! queue: its items live in the executor's task headers, so it holds no fixed
//! number of timers.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

struct TickDriver {
    /// Ticks since the chip's timer started.
    ticks: Mutex<Cell<u64>>,
    /// Tick at which the queue's earliest timer expires (`u64::MAX`: none).
    alarm: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: TickDriver = TickDriver {
    ticks: Mutex::new(Cell::new(0)),
    alarm: Mutex::new(Cell::new(u64::MAX)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for TickDriver {
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

/// One tick: call it from the chip's periodic interrupt, once per
/// `1 / TICK_HZ` s. Bumps the count and, when the earliest alarm is due,
/// lets the queue wake the expired tasks.
pub fn tick() {
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
