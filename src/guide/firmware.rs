//! Firmware: sizes on a Cortex-M4F, and runs on two emulated boards.
//!
//! `firmware/` is embassy firmware, its own crate kept out of the main build:
//! cortex-m-rt with a memory layout per chip, embassy's Cortex-M executor, a
//! small time driver of ours per chip (one 1 kHz tick and timer queue, fed by
//! SysTick on the STM32F4 and by TIMER0 on the nRF51), and `static` bulkheads
//! and breakers. It has two programs: one that is measured (its sizes) and
//! one that runs, in QEMU, on two emulated boards.
//!
//! # Sizes
//!
//! The measured firmware (`src/main.rs`, STM32F407 memory map, Cortex-M4F,
//! `thumbv7em-none-eabihf`) guards an upstream call with a `static` bulkhead
//! and breaker (plus a deadline). `bash firmware/build.sh` links five variants
//! at two optimisation levels and prints their sizes (fat LTO,
//! `panic = "abort"`; bytes; Δ against the unguarded build at the same level):
//!
//! | variant | flash `"z"` | RAM `"z"` | Δflash `"z"` | flash `"s"` | Δflash `"s"` |
//! |---|---|---|---|---|---|
//! | call unguarded (baseline) | 2 572 | 304 | 0 | 2 644 | 0 |
//! | **bulkhead + breaker**, fail-fast, no `alloc`, no global allocator (`--features no-deadline`) | 6 224 | 676 | **+3 652** | 6 640 | **+3 996** |
//! | + deadline (`deadline::timeout`): the default build | 8 292 | 752 | +5 720 | 8 576 | +5 932 |
//! | **+ a wait of up to 15 ms for a slot** (`acquire_timeout`), still no `alloc` and no global allocator (`--features wait`) | 11 248 | 752 | +8 676 | 11 992 | +9 348 |
//! | the same wait with `alloc` + embedded-alloc (8 KiB heap) (`--features heap`) | 11 356 | 8 976 | +8 784 | 12 116 | +9 472 |
//!
//! The firmware's `release` profile is `opt-level = "z"`, as size-bound
//! firmware usually is; `release-s` is the same at `"s"`. The target —
//! bulkhead + breaker add at most 4 KiB of flash — holds at both (3.6 KiB and
//! 3.9 KiB), and `build.sh` fails if it stops holding. The breaker is most of
//! it (the bulkhead's `try_acquire` and release are about 0.4 KiB); the
//! deadline adds about 2 KiB (its `Timeout` future and embassy's timer). What
//! got it there from 8.3 KiB: no 64-bit division anywhere in the time
//! arithmetic (Cortex-M has none; conversions multiply by a reciprocal
//! instead), time kept in nanoseconds inside the breaker, and its slow paths
//! sharing one copy of the window code, the clock read and the refusal.
//!
//! Waiting needs no heap: the waiting future holds its queue node, so the
//! `wait` build has no allocator at all (`build.sh` checks that no allocator
//! symbol is linked into it), and waiting costs 3 KiB of flash over the
//! default build (the queue, its lock and the timed wait) and no RAM beyond
//! the futures themselves. A fail-fast firmware links none of the queue's
//! code: a release reaches the queue through a pointer the first wait
//! stores, so nothing references it unless something waits. (Before the
//! wait queue was ours, waiting needed `alloc` and an allocator:
//! 13 096 B of flash at `"z"` and an 8 KiB heap.)
//!
//! RAM: a `static Bulkhead<EmbassyClock>` is 64 B (the wait queue's lock and
//! ends included), a `static CircuitBreaker<EmbassyClock, 64>` (64-call window)
//! 136 B, both with their initial values in `.data`.
//!
//! # Running on emulated boards (QEMU)
//!
//! ```sh
//! bash firmware/run-qemu.sh   # needs qemu-system-arm (7.2 here); CI's setup installs it
//! ```
//!
//! builds the scenario firmware (`src/bin/scenario.rs`, feature `qemu`) for
//! two boards and runs each in QEMU (`-M <machine>`, semihosting on) under a
//! 60 s timeout. The Cortex-M4F board is `netduinoplus2` (rather than ARM's
//! `mps2-an386`) because it is the STM32F4 the size firmware is laid out for:
//! the same memory map and the same SysTick driver. (The images' sizes move
//! by a few bytes with the checkout's path: the panic handler prints panic
//! locations, which name the source files.)
//!
//! | QEMU machine | chip | core, target | tick | scenario image |
//! |---|---|---|---|---|
//! | `netduinoplus2` | STM32F405 | Cortex-M4F, `thumbv7em-none-eabihf` | SysTick, from the 168 MHz core clock QEMU models | 27 292 B flash, 472 B RAM |
//! | `microbit` | nRF51822 | Cortex-M0, `thumbv6m-none-eabi`: no compare-and-swap, so watertight's atomics go through portable-atomic's critical-section fallback (cortex-m's single-core critical section) | TIMER0 at 1 MHz, through embassy's nrf-pac: the nRF51 has no SysTick (QEMU's model has one, and it ticks, but firmware for the chip cannot use it), and embassy-nrf's own driver runs on RTC1, which QEMU does not emulate | 28 092 B flash, 472 B RAM |
//!
//! One task runs the checks in order on embassy time: a `static` bulkhead of
//! 2 refuses the third call and takes the next after a release; a wait for a
//! slot with nothing released ends at its 10 ms timeout, and a wait that a
//! release 5 ms in serves (no allocator: the waiting future holds its queue
//! node); a `static` breaker opens after 4 failed calls, refuses the next
//! without running it and with a retry hint, is still open halfway through
//! the hint, half-open once it has passed, and closed after 2 good probes; a
//! deadline of 20 ms cuts a 100 ms call and lets a 5 ms one return. Each check
//! prints a line over semihosting (`ok` or `FAIL`, with what it saw), and QEMU
//! exits with the firmware's status: 1 on a failed check or a panic. The
//! checks assert counts, states and order; times only as bounds a correct run
//! cannot miss. The script fails on a non-zero exit, a `FAIL` or `panic` line,
//! an expected line missing or out of order, a hang (killed at the timeout),
//! or allocator code in an image (the scenario has no global allocator), and
//! prints each run's wall time and image size. CI runs it as its
//! `firmware-qemu` stage.
//!
//! Time in QEMU is its virtual time, and the boards' timers count it:
//! SysTick at the core clock QEMU gives the STM32F405 (a fixed 168 MHz; QEMU
//! models no clock tree, where the real chip starts on its 16 MHz internal
//! oscillator), TIMER0 at the nRF51's 16 MHz divided by 16. The runs use
//! `-icount shift=N,align=off,sleep=off`: virtual time is the instruction
//! count, 2^N ns per instruction (N = 3, 125 MHz, for the 168 MHz Cortex-M4F;
//! N = 6, 15.6 MHz, for the 16 MHz Cortex-M0), and never waits for the host.
//! So every run sees the same virtual time and prints the same lines, however
//! loaded the machine. Without `-icount`, virtual time follows the host's
//! clock: the checks pass too, but the milliseconds printed move by one or two
//! with the host's load (semihosting output takes host time), and a wait of
//! 3 s takes at least 3 s. With it, the wall time is instructions over QEMU's
//! speed: embassy's executor idles with `WFE`, on which QEMU does not sleep, so
//! the idle loop runs through the waits (a 3 s open wait took 16 s on the
//! Cortex-M4F at N = 3 and 2 s on the Cortex-M0 at N = 6, with the machine
//! loaded; the scenario's 140 ms take well under a second).
//!
//! Output of both runs (the same on every run):
//!
//! ```text
//! watertight scenario on netduinoplus2: STM32F405, Cortex-M4F, thumbv7em-none-eabihf; tick: SysTick
//! ok   bulkhead: 2 calls in, 2 of 2 slots taken
//! ok   bulkhead: the third call refused: bulkhead full
//! ok   bulkhead: after a release the next call is granted
//! ok   wait: nothing released, a 10 ms wait ended: timed out waiting for a bulkhead permit (after 10 ms, 0 left waiting)
//! ok   wait: 1 waiting, a release 5 ms in, then the wait granted (step 1 release, step 2 served, after 5 ms)
//! ok   bulkhead: 2 of 2 slots free at the end, 2 refusals counted (full, timed out)
//! ok   breaker: 4 of 4 calls failed, state open
//! ok   breaker: the next call refused without running (ran: false), retry after 100ms
//! ok   breaker: 50 ms after opening, state open
//! ok   breaker: once the retry hint has passed (100 ms after opening), state half_open
//! ok   breaker: 2 good probes: state half_open after the first, closed after the second
//! ok   deadline: a 100 ms call under a 20 ms deadline: cut after 20 ms
//! ok   deadline: a 5 ms call under a 20 ms deadline returned Ok(7)
//! scenario: 13 checks passed, 0 failed, 140 ms of embassy time
//! ```
//!
//! ```text
//! watertight scenario on microbit: nRF51822, Cortex-M0, thumbv6m-none-eabi (no CAS: critical sections); tick: TIMER0
//! ok   bulkhead: 2 calls in, 2 of 2 slots taken
//! ok   bulkhead: the third call refused: bulkhead full
//! ok   bulkhead: after a release the next call is granted
//! ok   wait: nothing released, a 10 ms wait ended: timed out waiting for a bulkhead permit (after 10 ms, 0 left waiting)
//! ok   wait: 1 waiting, a release 5 ms in, then the wait granted (step 1 release, step 2 served, after 5 ms)
//! ok   bulkhead: 2 of 2 slots free at the end, 2 refusals counted (full, timed out)
//! ok   breaker: 4 of 4 calls failed, state open
//! ok   breaker: the next call refused without running (ran: false), retry after 100ms
//! ok   breaker: 50 ms after opening, state open
//! ok   breaker: once the retry hint has passed (100 ms after opening), state half_open
//! ok   breaker: 2 good probes: state half_open after the first, closed after the second
//! ok   deadline: a 100 ms call under a 20 ms deadline: cut after 20 ms
//! ok   deadline: a 5 ms call under a 20 ms deadline returned Ok(7)
//! scenario: 13 checks passed, 0 failed, 140 ms of embassy time
//! ```
//!
//! Wall time on this 2-core machine with other builds beside it (load
//! average 3–3.5): `netduinoplus2` 0.54–0.65 s, `microbit` 0.12–0.23 s over
//! ten runs. The whole script takes 18 s from an empty target dir (64 crates
//! built for the two targets), 7–10 s after `build.sh` (as in CI, on a fresh
//! clone: `build.sh` 56 s, then this script 10 s), 1 s with both images built.
