//! Picks the chip from the target and puts its memory layout on the linker
//! search path as `memory.x`, where cortex-m-rt's link.x includes it:
//! `thumbv7em-none-eabihf` is an STM32F4 (`memory-stm32f4.x`), `thumbv6m-none-eabi`
//! an nRF51822 (`memory-nrf51.x`). Sets `cfg(chip = "stm32f4" | "nrf51")`.
//! Neither file is named `memory.x` itself: the linker looks in the
//! package directory before the search path, and would take that one for
//! every target.
use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let target = env::var("TARGET").unwrap();
    let (chip, layout): (&str, &[u8]) = if target.starts_with("thumbv6m") {
        ("nrf51", include_bytes!("memory-nrf51.x"))
    } else {
        ("stm32f4", include_bytes!("memory-stm32f4.x"))
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    fs::write(out.join("memory.x"), layout).unwrap();
    println!("cargo::rustc-link-search={}", out.display());
    println!("cargo::rustc-check-cfg=cfg(chip, values(\"stm32f4\", \"nrf51\"))");
    println!("cargo::rustc-cfg=chip=\"{chip}\"");
    println!("cargo::rerun-if-changed=memory-stm32f4.x");
    println!("cargo::rerun-if-changed=memory-nrf51.x");
    println!("cargo::rerun-if-changed=build.rs");
}
