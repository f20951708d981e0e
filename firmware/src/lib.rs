//! What the firmware's binaries share: an embassy-time driver per chip.
//!
//! `build.rs` picks the chip from the target: `thumbv7em-none-eabihf` is an
//! STM32F4 (the size firmware's STM32F407, QEMU's `netduinoplus2` STM32F405),
//! `thumbv6m-none-eabi` an nRF51822 (QEMU's `microbit`). Both drivers tick at
//! `embassy_time::TICK_HZ` (1 kHz) and share [`ticker`]'s tick count and
//! timer queue.

#![no_std]

pub mod ticker;

#[cfg(chip = "stm32f4")]
pub mod systick;

#[cfg(chip = "nrf51")]
pub mod nrf51_timer;
