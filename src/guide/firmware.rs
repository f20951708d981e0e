//! Firmware: sizes on a Cortex-M4F, and runs on two emulated boards.
//!
//! `firmware/` is embassy firmware, its own crate kept out of the main build:
//! cortex-m-rt with a memory layout per chip, embassy's Cortex-M executor, a
//! small time driver of ours per chip (one 1 kHz tick and timer queue, fed by
//! SysTick on the STM32F4 and by TIMER0 on the nRF51), and `static` bulkheads,
//! breakers and rate limiters. It has two programs: one that is measured (its sizes) and
//! one that runs, in QEMU, on two emulated boards.
//!
//! # Sizes
//!
//! The measured firmware (`src/main.rs`, STM32F407 memory map, Cortex-M4F,
//! `thumbv7em-none-eabihf`) guards an upstream call with a `static` bulkhead
//! and breaker (plus a deadline, and in three variants a rate limiter).
//! `bash firmware/build.sh` links ten variants at two optimisation levels
//! and prints their sizes (fat LTO, `panic = "abort"`; bytes; Δ against the
//! unguarded build at the same level):
//!
//! | variant | flash `"z"` | RAM `"z"` | Δflash `"z"` | flash `"s"` | RAM `"s"` | Δflash `"s"` |
//! |---|---|---|---|---|---|---|
//! | call unguarded (baseline) | 2 572 | 304 | 0 | 2 644 | 308 | 0 |
//! | **bulkhead + breaker**, fail-fast, no `alloc`, no global allocator (`--features no-deadline`) | 6 432 | 684 | **+3 860** | 6 708 | 688 | **+4 064** |
//! | + deadline (`deadline::timeout`): the default build | 8 412 | 760 | +5 840 | 8 640 | 764 | +5 996 |
//! | **+ a wait of up to 15 ms for a slot** (`acquire_timeout`), still no `alloc` and no global allocator (`--features wait`) | 11 628 | 760 | +9 056 | 12 668 | 764 | +10 024 |
//! | the same wait with `alloc` + embedded-alloc (8 KiB heap) (`--features heap`) | 11 744 | 8 984 | +9 172 | 12 796 | 8 988 | +10 152 |
//! | **bulkhead + breaker + rate limiter** (`check()` first, 10/s, burst 3; `--features no-deadline,rate`) | 7 152 | 2 984 | +4 580 | 7 532 | 3 000 | +4 888 |
//! | the same, the limiter's 64-bit word with interrupts disabled (`--features no-deadline,rate,single-core-atomics`) | 6 796 | 836 | +4 224 | 7 196 | 840 | +4 552 |
//! | the `wait` build + a wait of up to 15 ms for a cell (`acquire_timeout`; `--features wait,rate`) | 14 076 | 3 084 | +11 504 | 15 756 | 3 064 | +13 112 |
//!
//! The firmware's `release` profile is `opt-level = "z"`, as size-bound
//! firmware usually is; `release-s` is the same at `"s"`. The target —
//! bulkhead + breaker add at most 4 KiB of flash — holds at both (3.8 KiB and
//! 4.0 KiB: 4 064 B of 4 096 at `"s"`, after the retry hint's conversion
//! lost its panic path), and `build.sh` fails if it stops holding. The breaker is most of
//! it (the bulkhead's `try_acquire` and release are about 0.4 KiB); the
//! deadline adds about 2 KiB (its `Timeout` future and embassy's timer). What
//! got it there from 8.3 KiB: no 64-bit division anywhere in the time
//! arithmetic (Cortex-M has none; conversions multiply by a reciprocal
//! instead), time kept in nanoseconds inside the breaker, and its slow paths
//! sharing one copy of the window code, the clock read and the refusal.
//! Its two other variants put the breaker on a time window (`time-window`:
//! 10 s in ten buckets, a `TimeBreaker`) or on consecutive failures
//! (`consecutive`) instead of the last 64 calls: the time window adds 2.8–3.0
//! KiB of flash, 0.8 KiB of it a 64-bit division (its bucket of
//! the time; the count and consecutive breakers link none), and consecutive
//! failures save 64–68 B (the guide's benchmarks page, "The other windows").
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
//! RAM: a `static Bulkhead<EmbassyClock>` is 68 B on the Cortex-M4F (the wait
//! queue's spin lock, ends and waiter count included; 64 B on the Cortex-M0,
//! whose lock is a critical section), a `static CircuitBreaker<EmbassyClock, 64>` (64-call window)
//! 136 B, a `static RateLimiter<EmbassyClock>` 80 B, all with their initial
//! values in `.data`.
//!
//! What the rate limiter adds (`build.sh` prints it, against the same build
//! without it):
//!
//! | the limiter | flash `"z"` | RAM `"z"` | flash `"s"` | RAM `"s"` |
//! |---|---|---|---|---|
//! | `check()`, fail-fast (`rate` − `no-deadline`) | +720 | +2 300 | +824 | +2 312 |
//! | `check()`, word with interrupts disabled (`rate-1core` − `no-deadline`) | **+364** | **+152** | +488 | +152 |
//! | a wait of up to 15 ms for a cell (`rate-wait` − `wait`) | +2 448 | +2 324 | +3 088 | +2 300 |
//!
//! The Cortex-M4F has 32-bit atomics but no 64-bit ones, so the limiter's
//! one 64-bit word (the theoretical arrival time) goes through
//! portable-atomic's fallback: by default a table of 67 cache-padded locks,
//! 2 144 B of `.bss`, which is most of the limiter's RAM. A firmware for a
//! single-core chip can have the word changed with interrupts disabled
//! instead, by enabling portable-atomic's `unsafe-assume-single-core` in the
//! binary (the firmware's `single-core-atomics` feature; sound only on one
//! core): then the limiter costs about 0.4 KiB of flash, its 80 B and a few
//! bytes of the tasks' futures. Watertight's own `critical-section` feature
//! does not change this on the Cortex-M4F: portable-atomic uses a critical
//! section only where a target lacks compare-and-swap altogether (the
//! Cortex-M0, below). A wait for a cell is a reservation held in the future
//! (no queue, no node, no allocator); its 1.6 KiB over `check()` are the
//! future and its sleep on embassy's timer.
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
//! | `netduinoplus2` | STM32F405 | Cortex-M4F, `thumbv7em-none-eabihf`: no 64-bit atomics, so the rate limiter's word goes through portable-atomic's fallback lock table (2 144 B of the RAM) | SysTick, from the 168 MHz core clock QEMU models | 49 096 B flash, 3 136 B RAM |
//! | `microbit` | nRF51822 | Cortex-M0, `thumbv6m-none-eabi`: no compare-and-swap, so watertight's atomics go through portable-atomic's critical-section fallback (cortex-m's single-core critical section) | TIMER0 at 1 MHz, through embassy's nrf-pac: the nRF51 has no SysTick (QEMU's model has one, and it ticks, but firmware for the chip cannot use it), and embassy-nrf's own driver runs on RTC1, which QEMU does not emulate | 52 760 B flash, 960 B RAM |
//!
//! One task runs the checks in order on embassy time: a `static` bulkhead of
//! 2 refuses the third call and takes the next after a release; a wait for a
//! slot with nothing released ends at its 10 ms timeout, and a wait that a
//! release 5 ms in serves (no allocator: the waiting future holds its queue
//! node) while a second caller, with the queue's one place taken
//! (`with_max_waiters(1)`), is refused at once with `QueueFull`; a `static`
//! breaker opens after 4 failed calls, refuses the next
//! without running it and with a retry hint, is still open halfway through
//! the hint, half-open once it has passed, and closed after 2 good probes; a
//! `static` time-window breaker (200 ms in four buckets) opens on 3 failed
//! calls, closes after a good probe, and forgets failures that have aged out
//! of its window; a
//! deadline of 20 ms cuts a 100 ms call and lets a 5 ms one return; a
//! `static` rate limiter of 10 cells a second with a burst of 3 (on
//! embassy's clock, no allocator) admits the burst at once and refuses the
//! fourth cell with the exact hint, 100 ms; 1 ms before the hint it still
//! refuses (1 ms away), at the hint it admits one cell and refuses the next;
//! a wait of 50 ms for a cell 100 ms away is refused at once, with the hint,
//! instead of sleeping only to fail; and a wait of 150 ms reserves the cell
//! (1 waiting, 5 ms in) and is served at the cell's instant, before its
//! deadline; the counters then read 5 admitted (1 after a wait), 4 refused.
//! Last, a `static` partitioned bulkhead for the uplink (alarms promised 1
//! slot, bulk uploads 2): a bulk burst takes all 3 (borrowing the alarms'
//! idle slot) and the 4th is refused; an alarm then waits in its lent-out
//! room and is served when the borrower leaves, 5 ms in, while bulk is
//! still refused.
//! On the Cortex-M0 the limiter's 64-bit word goes through
//! portable-atomic's critical section, as the bulkhead's atomics do. Each check
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
//! loaded; the scenario's 647 ms take about two to three seconds on the Cortex-M4F).
//!
//! Output of both runs (the same on every run):
//!
//! ```text
//! watertight scenario on netduinoplus2: STM32F405, Cortex-M4F, thumbv7em-none-eabihf; tick: SysTick
//! ok   bulkhead: 2 calls in, 2 of 2 slots taken
//! ok   bulkhead: the third call refused: bulkhead full
//! ok   bulkhead: after a release the next call is granted
//! ok   wait: nothing released, a 10 ms wait ended: timed out waiting for a bulkhead permit (after 10 ms, 0 left waiting)
//! ok   queue: a second waiter with 1 place in the queue: bulkhead wait queue full (after 0 ms)
//! ok   wait: 1 waiting, a release 5 ms in, then the wait granted (step 1 release, step 2 served, after 5 ms)
//! ok   bulkhead: 2 of 2 slots free at the end, 3 refusals counted (full, timed out, queue full)
//! ok   breaker: 4 of 4 calls failed, state open
//! ok   breaker: the next call refused without running (ran: false), retry after 100ms
//! ok   breaker: 50 ms after opening, state open
//! ok   breaker: once the retry hint has passed (100 ms after opening), state half_open
//! ok   breaker: 2 good probes: state half_open after the first, closed after the second
//! ok   time breaker: 3 of 3 calls in 200 ms failed, state open
//! ok   time breaker: after the open wait a good probe: state closed
//! ok   time breaker: 2 failures, 200 ms, 2 more: state closed, 2 calls in the window
//! ok   deadline: a 100 ms call under a 20 ms deadline: cut after 20 ms
//! ok   deadline: a 5 ms call under a 20 ms deadline returned Ok(7)
//! ok   rate: a burst of 3 admitted at once, the 4th refused: rate limited: retry after 100ms
//! ok   rate: 1 ms before the hint rate limited: retry after 1ms, at the hint (100 ms in) admitted, the next rate limited: retry after 100ms
//! ok   rate: a 50 ms wait for a cell 100 ms away refused at once (after 0 ms): rate limited: retry after 100ms
//! ok   rate: a 150 ms wait, 1 waiting 5 ms in, served at the cell's instant (after 100 ms, deadline 150 ms)
//! ok   rate: 5 admitted (1 after a wait), 4 refused, 0 cancelled, 0 waiting
//! ok   partition: bulk took 3 of 3 slots (1 borrowed from alarms), the 4th refused: bulkhead full
//! ok   partition: an alarm waited in its lent-out room and was served when the borrower left (after 5 ms, room alarms), bulk still refused
//! scenario: 24 checks passed, 0 failed, 646 ms of embassy time
//! ```
//!
//! ```text
//! watertight scenario on microbit: nRF51822, Cortex-M0, thumbv6m-none-eabi (no CAS: critical sections); tick: TIMER0
//! ok   bulkhead: 2 calls in, 2 of 2 slots taken
//! ok   bulkhead: the third call refused: bulkhead full
//! ok   bulkhead: after a release the next call is granted
//! ok   wait: nothing released, a 10 ms wait ended: timed out waiting for a bulkhead permit (after 10 ms, 0 left waiting)
//! ok   queue: a second waiter with 1 place in the queue: bulkhead wait queue full (after 0 ms)
//! ok   wait: 1 waiting, a release 5 ms in, then the wait granted (step 1 release, step 2 served, after 5 ms)
//! ok   bulkhead: 2 of 2 slots free at the end, 3 refusals counted (full, timed out, queue full)
//! ok   breaker: 4 of 4 calls failed, state open
//! ok   breaker: the next call refused without running (ran: false), retry after 100ms
//! ok   breaker: 50 ms after opening, state open
//! ok   breaker: once the retry hint has passed (100 ms after opening), state half_open
//! ok   breaker: 2 good probes: state half_open after the first, closed after the second
//! ok   time breaker: 3 of 3 calls in 200 ms failed, state open
//! ok   time breaker: after the open wait a good probe: state closed
//! ok   time breaker: 2 failures, 200 ms, 2 more: state closed, 2 calls in the window
//! ok   deadline: a 100 ms call under a 20 ms deadline: cut after 20 ms
//! ok   deadline: a 5 ms call under a 20 ms deadline returned Ok(7)
//! ok   rate: a burst of 3 admitted at once, the 4th refused: rate limited: retry after 100ms
//! ok   rate: 1 ms before the hint rate limited: retry after 1ms, at the hint (100 ms in) admitted, the next rate limited: retry after 100ms
//! ok   rate: a 50 ms wait for a cell 100 ms away refused at once (after 0 ms): rate limited: retry after 100ms
//! ok   rate: a 150 ms wait, 1 waiting 5 ms in, served at the cell's instant (after 100 ms, deadline 150 ms)
//! ok   rate: 5 admitted (1 after a wait), 4 refused, 0 cancelled, 0 waiting
//! ok   partition: bulk took 3 of 3 slots (1 borrowed from alarms), the 4th refused: bulkhead full
//! ok   partition: an alarm waited in its lent-out room and was served when the borrower left (after 5 ms, room alarms), bulk still refused
//! scenario: 24 checks passed, 0 failed, 647 ms of embassy time
//! ```
//!
//! Wall time on this 2-core machine with other builds beside it (load
//! average 4–6): `netduinoplus2` 1.1–1.7 s, `microbit` 0.19–0.28 s over
//! five runs (the rate checks' 200 ms of embassy time made the first of
//! them twice as long). From an empty target dir, `build.sh` (sixteen
//! links) takes 100 s and then this script 14 s, as in CI on a fresh clone;
//! 7 s with both images built.
