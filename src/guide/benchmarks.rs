//! Benchmarks: every table, each with the command that reproduces it.
//!
//! The benches are in `benches/` (criterion, but for the retry storm, the
//! adaptive simulation and the Redis bench, which print their own tables);
//! each bench file's module docs say what its groups measure. After a
//! criterion run, `python3 scripts/bench_table.py --write` turns criterion's
//! medians into the tables below and puts each in place of the one here
//! (between the `bench_table.py` markers, invisible on the rendered page);
//! without `--write` it prints them. `python3 scripts/forms_instructions.py
//! --write` does the same for the instruction counts. No bench run edits
//! the README.
//!
//! Sections: [bulkhead](#bulkhead), [circuit breaker](#circuit-breaker),
//! [policy](#policy), [retries](#retries),
//! [adaptive limits](#adaptive-limits-the-simulation),
//! [the global bulkhead on Redis](#the-global-bulkhead-on-redis) (and
//! [the global rate limiter](#the-global-rate-limiter-on-redis)),
//! [rate limiter](#rate-limiter) (beside governor),
//! [the rate limit layer](#the-rate-limit-layer-beside-towers-ratelimit),
//! [deadlines across the wire](#deadlines-across-the-wire),
//! [fault injection](#fault-injection).
//!
//! # Bulkhead
//!
//! Every peer in the same run: our `Bulkhead`, `tokio::sync::Semaphore`,
//! `async_lock::Semaphore`, maitake-sync's `Semaphore` (in [the
//! hand-off](#the-hand-off)) and the physical floor. Reproduce with
//!
//! ```sh
//! cargo bench --bench bulkhead && python3 scripts/bench_table.py --only bulkhead --write
//! ```
//!
//! (about 7 minutes; the script turns criterion's medians into these tables).
//! Machine: 2 cores, x86_64 virtual machine, Rust 1.95, one run on an otherwise
//! idle machine, with the intrusive wait queue. Atomic read-modify-writes are
//! slow on this machine (the floor is ~17 ns here against ~4 ns on bare metal)
//! and timings are noisy (±10 % between runs uncontended, ±10–20 % in the
//! contended cells), so read the ratios, which carry over, not the nanoseconds.
//!
//! <!-- bench_table.py: bulkhead-uncontended -->
//!
//! ns per acquire + release pair (criterion median); peer ÷ watertight above 1 means watertight is faster.
//!
//! | uncontended | floor (CAS + `fetch_add`) | watertight | tokio `Semaphore` | async-lock `Semaphore` | watertight ÷ floor | tokio ÷ watertight | async-lock ÷ watertight |
//! |---|---|---|---|---|---|---|---|
//! | `try_acquire` + drop | 17.7 ns | 16.9 ns | 24.2 ns | 30.2 ns | 0.96× | 1.43× | 1.78× |
//! | free `acquire().await` + drop (`block_on`) | – | 16.2 ns | 40.5 ns | 33.9 ns | – | 2.50× | 2.10× |
//! | free `acquire().await` + drop (tokio current-thread) | – | 16.8 ns | 43.0 ns | 34.8 ns | – | 2.56× | 2.07× |
//!
//! <!-- /bench_table.py: bulkhead-uncontended -->
//!
//! <!-- bench_table.py: bulkhead-contended -->
//!
//! Contended, permit held across `yield_now().await`: M tasks on a 2-worker tokio runtime, P permits; ns per pair (wall time ÷ pairs).
//!
//! | M tasks | P permits | watertight | tokio `Semaphore` | async-lock `Semaphore` | tokio ÷ watertight | async-lock ÷ watertight |
//! |---|---|---|---|---|---|---|
//! | 2 | 1 | 346 ns | 370 ns | 354 ns | 1.07× | 1.02× |
//! | 2 | 4 | 247 ns | 298 ns | 303 ns | 1.20× | 1.23× |
//! | 2 | 64 | 264 ns | 285 ns | 307 ns | 1.08× | 1.16× |
//! | 16 | 1 | 355 ns | 374 ns | 387 ns | 1.05× | 1.09× |
//! | 16 | 4 | 443 ns | 760 ns | 387 ns | 1.72× | 0.87× |
//! | 16 | 64 | 170 ns | 270 ns | 255 ns | 1.59× | 1.50× |
//! | 256 | 1 | 320 ns | 369 ns | 419 ns | 1.15× | 1.31× |
//! | 256 | 4 | 493 ns | 750 ns | 419 ns | 1.52× | 0.85× |
//! | 256 | 64 | 618 ns | 795 ns | 997 ns | 1.29× | 1.61× |
//!
//! Contended, permit held across 16 `black_box` adds: M tasks on a 2-worker tokio runtime, P permits; ns per pair (wall time ÷ pairs).
//!
//! | M tasks | P permits | watertight | tokio `Semaphore` | async-lock `Semaphore` | tokio ÷ watertight | async-lock ÷ watertight |
//! |---|---|---|---|---|---|---|
//! | 2 | 1 | 141 ns | 157 ns | 35.8 ns | 1.12× | 0.25× |
//! | 2 | 4 | 112 ns | 249 ns | 177 ns | 2.23× | 1.58× |
//! | 2 | 64 | 107 ns | 256 ns | 200 ns | 2.39× | 1.87× |
//! | 16 | 1 | 141 ns | 163 ns | 34.6 ns | 1.15× | 0.24× |
//! | 16 | 4 | 113 ns | 815 ns | 186 ns | 7.24× | 1.65× |
//! | 16 | 64 | 107 ns | 252 ns | 186 ns | 2.35× | 1.73× |
//! | 256 | 1 | 159 ns | 183 ns | 37.2 ns | 1.16× | 0.23× |
//! | 256 | 4 | 103 ns | 714 ns | 150 ns | 6.95× | 1.46× |
//! | 256 | 64 | 105 ns | 799 ns | 157 ns | 7.57× | 1.49× |
//!
//! <!-- /bench_table.py: bulkhead-contended -->
//!
//! The forms, in a run of the two `try_acquire` groups alone
//! (`cargo bench --bench bulkhead -- 'uncontended/try_acquire' --warm-up-time 1
//! --measurement-time 3 && python3 scripts/bench_table.py --only bulkhead --write`; the
//! bulkhead behind `black_box`, so every `Err` arm is live). They cost the same:
//! `Result<Permit, AcquireError>` is built inline and nothing is copied through
//! memory.
//!
//! <!-- bench_table.py: forms-bulkhead -->
//!
//! The same call written each way a caller writes it: bulkhead, `try_acquire` + drop (`benches/bulkhead.rs`); ns (criterion median) and ÷ the fastest form, one run.
//!
//! | form | ns | ÷ fastest |
//! |---|---|---|
//! | `.unwrap()` | 18.2 ns | 1.04× |
//! | `if let Ok(..)` | 17.5 ns | 1.00× |
//! | `match`, the `Err` arm using the error | 18.1 ns | 1.04× |
//! | `?` in a fn returning the error | 17.6 ns | 1.01× |
//!
//! <!-- /bench_table.py: forms-bulkhead -->
//!
//! <!-- bench_table.py: bulkhead-fairness -->
//!
//! Fairness: 16 tasks, 1 permit, 2 workers, each loops 2000× acquire → `yield_now` → release; each task's finishing time as a share of the whole run (median of 5 rounds). A fair limiter has both near 1.0; one that lets a releasing task take the permit straight back lets the first task finish early.
//!
//! | peer | first finisher | median finisher |
//! |---|---|---|
//! | watertight | 0.994 | 0.999 |
//! | tokio | 0.998 | 1.000 |
//! | async-lock | 0.065 | 0.545 |
//!
//! | type | `size_of` (x86_64) |
//! |---|---|
//! | `watertight::Bulkhead<StdClock>` | 128 B |
//! | `tokio::sync::Semaphore` | 40 B |
//! | `async_lock::Semaphore` | 16 B |
//!
//! <!-- /bench_table.py: bulkhead-fairness -->
//!
//! What the numbers say:
//!
//! - **Uncontended**, all counters on: `try_acquire` + drop costs 0.92–1.15×
//!   the floor across runs (the accepted count rides in the compare-and-swap
//!   that takes the permit), 1.4–1.7× faster than tokio and about 2× faster
//!   than async-lock; a free `acquire().await` is 2.4–2.9× faster than
//!   tokio's. A release that finds nobody queued is one atomic add and takes
//!   no lock.
//! - **Contended, every cell at least as fast as tokio** (1.05–7.6× in this
//!   run; the P = 1 hand-off cells 1.05–1.16×). Before the wait queue was ours
//!   those cells were 0.57–0.92×: a wait through event-listener cost a heap
//!   node and four lock round-trips (listen, poll, notify, drop). Now a
//!   waiting future links its own node (no allocation) and a release hands its
//!   permit to the head of the queue under one short lock hold: two lock
//!   round-trips per hand-off (the wait's, the release's), one wake-up per
//!   permit handed on and none for nothing, as tokio's `batch_semaphore`.
//! - **async-lock's 0.23–0.25× in the P = 1 spin cells is barging**: a task
//!   that releases takes the permit straight back. The fairness probe shows
//!   what that costs — its first task finishes at 7 % of the run and the median
//!   at 55 %, while ours and tokio's all finish together. With a bulkhead's
//!   short max wait, barging means the callers who asked first are the ones
//!   who time out.
//! - `size_of::<Bulkhead>()` is 128 B on x86_64 (two cache lines: the state
//!   word and the wait queue's lock and ends on the first, the cold counters
//!   on the second) and 68 B on `thumbv7em` (no padding where there are no
//!   caches; 64 B with `critical-section`, which needs no lock flag).
//!
//! ## The hand-off
//!
//! A queued `acquire` woken by a release on another thread, each peer with
//! owned permits (`Arc`), measured by its own harness rather than criterion
//! (whose mean over thousands of hand-offs moved by ±50 ns between runs on
//! this machine, as much as the gaps it was meant to show). Reproduce with
//!
//! ```sh
//! cargo bench --bench handoff
//! ```
//!
//! (under half a minute). The two threads are pinned to the two cores; each
//! step of each hand-off is timed on the thread that runs it (the
//! time-stamp counter) and a measurement is the median over 5 000
//! hand-offs, which no preemption moves; a run is 101 rounds, each running
//! every peer once, in an order rotated from round to round, and every
//! figure below is the median over rounds of the per-round figure (each
//! peer less the same round's floor, or less the same round's watertight).
//! The floor leaves a waker under a lock and has it taken out and woken, no
//! permits: the two threads' own handshakes. `benches/handoff.rs`'s docs
//! say what each column times.
//!
//! One run (the median one of five, same machine, Rust 1.95, another
//! session's builds and benches running on the same two cores), ns:
//!
//! | | floor | watertight | tokio `Semaphore` | async-lock `Semaphore` | maitake-sync `Semaphore` |
//! |---|---|---|---|---|---|
//! | latency (first poll to the drop of the permit handed over) | 618 | 815 | 877 | 881 | 811 |
//! | above the floor | – | 195 | 258 | 263 | 192 |
//! | peer ÷ watertight, above the floor | – | – | 1.32× | 1.35× | 0.98× |
//! | peer less watertight, latency | – | – | +62 | +68 | −3 |
//! | enqueue (the waiter's first poll) | 117 | 130 | 200 | 144 | 125 |
//! | release + wake (the releaser's drop) | 182 | 278 | 262 | 336 | 270 |
//! | woken poll (the waiter finds the permit) | 100 | 113 | 186 | 102 | 189 |
//! | drop of that permit | 31 | 103 | 38 | 111 | 39 |
//!
//! Over the five runs: ours 189–242 ns above the floor, tokio 1.10–1.57×
//! ours, async-lock 0.97–1.38×, maitake-sync 0.85–1.06× in four of them
//! (the fifth, 0.22×, ran while the machine went in and out of a slower
//! state: the floor at 1 098 ns, ours between 1 005 and 1 379 ns from round
//! to round). Over 21 more runs of ours and maitake-sync alone
//! (`HANDOFF_PEERS=watertight,maitake-sync`), maitake-sync's latency less
//! ours had a median of +2 ns (per run −58 to +16 ns; ours the faster in 11
//! of the 21). Eight later runs of the final build, all peers, on a less
//! loaded machine: maitake-sync's latency less ours −8 to +14 ns (median
//! +3), maitake-sync 0.95–1.08× ours above the floor, tokio 1.34–1.64×,
//! async-lock 0.99–1.97×, ours 157–266 ns above the floor. Before the node
//! had a cache line of its own (the same harness, five runs), ours was
//! 238–360 ns above the floor and maitake-sync 0.63–0.79× ours (−48 to
//! −97 ns), tokio and async-lock about 1.0×.
//!
//! So the hand-off is now level with maitake-sync's (−3 ns in the run
//! above, a median of +2 ns over 21 runs of the two alone, but ours the
//! faster in only 11 of them) and about 1.3× faster than tokio's and
//! async-lock's. What each step costs, from builds that change one thing
//! each (ablations; the rows with a `+` on top of the shipped build), each
//! run interleaved with the other builds' and with maitake-sync in every
//! round, 10–11 runs per build and batch; "gap" is maitake-sync's latency
//! less ours, the median over a batch's runs (two figures: two batches):
//!
//! | build | gap | what moved |
//! |---|---|---|
//! | before: the node anywhere in the future | −76 ns | woken poll 182 ns |
//! | the node on a line of its own (shipped) | −2, +3 ns | woken poll 108–112 ns |
//! | + a spin lock instead of `std::sync::Mutex` | +4, 0 ns | enqueue −4 to −7 ns |
//! | + the release hands its permit straight to a lone waiter that wants just that (no add, no CAS on the word) | −2, +6 ns | release + wake −14 to −16 ns |
//! | + both | +12, +8 ns | (within the runs' spread) |
//! | + one more waker `clone` on enqueue | −19 ns | enqueue +16 ns |
//! | + a wake-up batch of 1 instead of 8 | −5 ns | nothing |
//!
//! The cost was not where it was looked for. A release on the other core writes
//! the waiting future's node (its state, links and waker) and the woken waiter
//! then reads it and writes beside it; with the node sharing a cache line with
//! the rest of the future or the task (or straddling two), the woken poll paid
//! a second line transfer, about 75 ns. `Waiter` is now aligned to 64 B (its
//! size anyway; not on microcontrollers, which have no caches to share), which
//! costs the acquire futures size (`Acquire` 72 → 128 B, `AcquireUntil` on a
//! `&ManualClock` 104 → 128 B). The lock (with `std`, `std::sync::Mutex`: a
//! compare-and-swap to take, a swap to release) costs about 5 ns against a spin
//! lock (the ablation's yielded its core after 100 spins): not worth a lock
//! whose waiters spin or yield in a loop, instead of sleeping, while its holder
//! is preempted, so `std` keeps its mutex (the 127 ns an earlier spin-lock
//! build measured was inside the 127–198 ns our `std` build measured across
//! runs with criterion). The read-modify-writes per hand-off: the waiter's
//! first poll does four (the lock, the waker's clone, the compare-and-swap that
//! sets the queued flag, the unlock), the release five (the add that finds the
//! flag, the lock, the compare-and-swap that takes the permit for the waiter
//! and clears the flag, the unlock, and the waker's drop in `wake`); handing
//! the permit straight into the node instead of through the word saves one, 15
//! ns of the release's own time, but the waiter's latency did not move beyond
//! the noise, so the protocol stays as loom checked it. The waker is cloned
//! once per wait (about 15 ns; a re-poll keeps it if `will_wake`) and woken
//! after the lock is released, one wake-up per permit handed on. What still
//! differs from maitake-sync is where each pays one transfer: its release never
//! touches its permit counter while anyone waits, so the woken waiter's later
//! drop of the permit is local (39 ns against our 103 ns, whose add pulls back
//! the state word the release last wrote), but its woken poll takes the queue's
//! lock again (189 ns against our 113 ns). Ours keeps a release with nobody
//! queued at one atomic add and no lock.
//!
//! # Circuit breaker
//!
//! Every peer in the same run: our `CircuitBreaker`, recloser 1.4 and failsafe
//! 1.3 (twice: its default policy, and consecutive failures only). Reproduce with
//!
//! ```sh
//! cargo bench --bench breaker -- --warm-up-time 1 --measurement-time 3 && python3 scripts/bench_table.py --only breaker --write
//! ```
//!
//! (about 3 minutes; drop the two options for criterion's default times,
//! about 5 minutes). Run conditions of the tables below: the same 2-core x86_64
//! virtual machine, Rust 1.95, one run with those short times on a machine
//! otherwise idle (load average about 1, but slower that hour than in earlier
//! runs: `Instant::now()` 30 ns against 20–23 ns before): read the ratios,
//! within a row and within a group, which were all measured in that one run.
//! The nanoseconds are 2–3× what the same peers measure on a faster machine
//! (recloser 9.5 ns, failsafe's default 70.8 ns; here 29.3 ns and 137 ns).
//!
//! <!-- bench_table.py: breaker -->
//!
//! ns per call (criterion median): admit, run a trivial `Ok(())`, record the outcome; peer ÷ watertight above 1 means watertight is faster. Ours is `CircuitBreaker<StdClock, 64>` with `BreakerConfig::DEFAULT`; recloser `Recloser::default()`; failsafe `Config::new().build()` (default) and `consecutive_failures(5, constant(30 s))` (consecutive).
//!
//! | case | watertight | recloser | failsafe default | failsafe consecutive | recloser ÷ watertight | failsafe default ÷ watertight | failsafe consecutive ÷ watertight |
//! |---|---|---|---|---|---|---|---|
//! | closed, sync: ours `try_acquire().unwrap().success()`, peers `.call(\|\| Ok(()))` | 5.5 ns | 29.3 ns | 137 ns | 41.6 ns | 5.31× | 24.80× | 7.54× |
//! | closed, sync: ours as a `call(\|\| Ok(()))` function around `try_acquire` | 4.4 ns | 29.3 ns | 137 ns | 41.6 ns | 6.67× | 31.15× | 9.47× |
//! | closed, async: `call(async { Ok(()) }).await`, a loop in one `block_on` | 8.6 ns | 47.5 ns | 153 ns | 62.5 ns | 5.54× | 17.81× | 7.29× |
//! | closed, async: one `block_on(call(async { Ok(()) }))` per call | 9.8 ns | 53.9 ns | 142 ns | 61.6 ns | 5.51× | 14.51× | 6.30× |
//! | slow-timing group, ours untimed (slow calls off; the rows below in the same run) | 5.4 ns | 28.3 ns | 134 ns | 40.6 ns | 5.26× | 24.85× | 7.54× |
//! | slow-call timing on (ours: `slow_call_duration(1 s)`, `CoarseClock`; recloser and failsafe's default time nothing, failsafe consecutive reads the clock once), sync | 4.6 ns | 28.3 ns | 134 ns | 40.6 ns | 6.13× | 28.98× | 8.80× |
//! | slow-call timing on (ours: `slow_call_duration(1 s)`, a bench-local clock on `quanta::Clock::recent()`, quanta's `Upkeep` at 1 ms), sync | 9.8 ns | 28.3 ns | 134 ns | 40.6 ns | 2.90× | 13.71× | 4.16× |
//! | slow-call timing on (ours: `slow_call_duration(1 s)`, `StdClock`), sync | 74.2 ns | 28.3 ns | 134 ns | 40.6 ns | 0.38× | 1.80× | 0.55× |
//! | 2 threads on one breaker, sync; ns per call per thread | 7.0 ns | 36.4 ns | 336 ns | 170 ns | 5.20× | 48.00× | 24.39× |
//!
//! Clock reads, measured in the slow-timing group: `std::time::Instant::now()` 29.6 ns, `StdClock::now()` 26.1 ns. Ours there: 5.4 ns untimed, 74.2 ns timed, so slow-call timing adds 68.8 ns = 2.63 `StdClock` reads. Timed on `StdClock` ÷ untimed: 13.78×. `CoarseClock::now()` 1.0 ns; ours timed on it 4.6 ns (0.86× untimed). quanta, `Upkeep` at 1 ms: `Clock::now()` 15.3 ns (0.52× `Instant::now()`), `Clock::recent()` 2.1 ns (2.08× `CoarseClock::now()`), `Instant::recent()` 1.4 ns; ours timed on `Clock::recent()` 9.8 ns (2.11× timed on `CoarseClock`, 1.81× untimed).
//!
//! | type | `size_of` (x86_64) |
//! |---|---|
//! | `watertight::CircuitBreaker<StdClock, 64>` | 160 B |
//! | `recloser::Recloser` | 64 B |
//! | `failsafe::StateMachine (default)` | 8 B |
//!
//! <!-- /bench_table.py: breaker -->
//!
//! <!-- bench_table.py: forms-breaker -->
//!
//! The same call written each way a caller writes it: breaker, one closed-state call (`benches/breaker.rs`); ns (criterion median) and ÷ the fastest form, one run.
//!
//! | form | ns | ÷ fastest |
//! |---|---|---|
//! | `.unwrap()` | 6.0 ns | 1.63× |
//! | `if let Ok(..)` | 5.2 ns | 1.40× |
//! | `match`, the `Err` arm using the error | 3.7 ns | 1.00× |
//! | `?` in a fn returning the error | 5.2 ns | 1.41× |
//! | `call(..)` (polled once) | 4.1 ns | 1.12× |
//! | `call(..).await` in an `async` block (polled once) | 6.3 ns | 1.70× |
//! | `call_with(.., classifier)` | 3.9 ns | 1.05× |
//! | reference: the trivial call's future alone, polled once the same way (no breaker) | 2.3 ns | – |
//!
//! <!-- /bench_table.py: forms-breaker -->
//!
//! Each form is a function of its own (`#[inline(never)]`), and every loop
//! that runs the forms (criterion's, the rounds' and the instruction count's
//! below) calls it through its pointer in one table, so every form pays one
//! indirect call (4–6 ns a form here, where the same forms inlined into the
//! loop took 2–4 ns). At that size a form's criterion median moves by up to
//! a half from run to run on this machine, as its speed drifts under one
//! form and not the next: above, `.unwrap()` and the `match` are the same 55
//! instructions and read 6.0 ns and 3.7 ns (in the run before this one, with
//! the forms called directly, every form was within 1.19× of the fastest).
//! The same binary therefore also times the forms in interleaved rounds, each
//! round every form in turn, so the drift falls on all of them
//! (`WT_FORMS_ROUNDS=41 target/release/deps/breaker-…`, after the bench has
//! built it): three runs in a row gave 1.00–1.15×, 1.00–1.12× and
//! 1.00–1.07×, the first of them:
//!
//! | form | ns, median of 41 rounds of 200000 calls | ÷ fastest |
//! |---|---|---|
//! | `unwrap` | 5.70 ns | 1.00× |
//! | `if-let` | 5.99 ns | 1.05× |
//! | `match-err` | 5.70 ns | 1.00× |
//! | `question-mark` | 6.13 ns | 1.08× |
//! | `call` | 6.56 ns | 1.15× |
//! | `call-awaited` | 6.28 ns | 1.10× |
//! | `call_with` | 6.46 ns | 1.13× |
//! | `ref-poll-ready` | 2.24 ns | – |
//!
//! and counts them in instructions, which do not move at all (callgrind):
//!
//! <!-- bench_table.py: breaker-instructions -->
//!
//! Instructions per call (valgrind callgrind, 1,000,000 calls, net of the empty loop): breaker, one closed-state call written each way (`python3 scripts/forms_instructions.py`).
//!
//! | form | instructions | ÷ fewest |
//! |---|---|---|
//! | `.unwrap()` | 55 | 1.00× |
//! | `if let Ok(..)` | 55 | 1.00× |
//! | `match`, the `Err` arm using the error | 55 | 1.00× |
//! | `?` in a fn returning the error | 59 | 1.07× |
//! | `call(..)` (polled once) | 61 | 1.11× |
//! | `call(..).await` in an `async` block (polled once) | 61 | 1.11× |
//! | `call_with(.., classifier)` | 61 | 1.11× |
//! | reference: the trivial call's future alone, polled once the same way (no breaker) | 5 | – |
//!
//! | call | instructions | ÷ untimed |
//! |---|---|---|
//! | closed call, slow-call timing off (`StdClock`) | 50 | 1.00× |
//! | the same, `slow_call_duration(1 s)` on `CoarseClock` | 62 | 1.24× |
//! | time window (100 ms, 10 buckets) on `StdClock` | 152 | 3.03× |
//! | the same time window on `CoarseClock` | 119 | 2.39× |
//! | consecutive failures (5) | 50 | 1.00× |
//!
//! <!-- /bench_table.py: breaker-instructions -->
//!
//! The slow-timing group: with `slow_call_duration(1 s)` on a `CoarseClock` a
//! closed call costs 0.86× the untimed one in this run (the same, within the
//! noise; 1.24× the instructions; target: at most 2×; on `StdClock` it is
//! 14×: two clock reads of 26–30 ns each), still 6.1× faster than recloser
//! and 29× faster than failsafe's default, which time nothing, and 8.8×
//! faster than failsafe with consecutive failures, which reads the clock
//! once. A `StdClock::now()` costs what `std::time::Instant::now()` does
//! (0.88× here, 1.00× in the run before). The coarse clock's read is inlined
//! (`Clock::CHEAP_NOW`); before, the breaker called every clock's read out of
//! line, and that call was most of what timing on the coarse clock cost: 77
//! instructions against 49 untimed (1.34–2.7× in time).
//!
//! **The other windows.** The closed call (`try_acquire().unwrap().success()`)
//! on the time window (`time_window(100 ms, 10)`, a `TimeBreaker<_, 10>`: ten
//! buckets of 10 ms, so that every call the loop times is counted; see
//! below) and on consecutive failures (`consecutive_failures(5)`, a
//! `CircuitBreaker<_, 1>`) against the count window (`BreakerConfig::DEFAULT`,
//! the last 50 calls), with the peers in the same run of
//!
//! ```sh
//! cargo bench --bench breaker -- --warm-up-time 1 --measurement-time 3 'breaker/closed/sync'
//! ```
//!
//! and the instructions from `python3 scripts/forms_instructions.py` (the
//! table above; the same counts in two runs):
//!
//! | closed call | ns (criterion median) | ÷ count window | instructions | ÷ count window |
//! |---|---|---|---|---|
//! | count window, `StdClock` | 2.68 | 1.00× | 50 | 1.00× |
//! | time window, `StdClock` | 41.1 | 15.34× | 152 | 3.03× |
//! | time window, `CoarseClock` | 10.8 | 4.03× | 119 | 2.39× |
//! | consecutive failures, `StdClock` | 2.19 | 0.82× | 50 | 1.00× |
//! | recloser | 20.4 | 7.61× | – | – |
//! | failsafe, default (success rate over a time window, or consecutive failures) | 116 | 43.28× | – | – |
//! | failsafe, consecutive failures | 36.5 | 13.62× | – | – |
//!
//! The old code (before the inline path below), with this bench, in the
//! run just after: 3.05, 49.4 and 16.7 ns (16.2× and 5.47×). The machine
//! was loaded (other jobs on its 2 cores) and criterion's medians moved by
//! a third between runs; the same binaries timed in 9 interleaved rounds of
//! 10 million calls each (the instruction count's loop, `WT_COUNT_FORM=…`,
//! least time of the rounds, less the empty loop's) gave count window
//! 1.25 ns, consecutive 1.05 ns (0.84×), time window 7.73 ns on
//! `CoarseClock` (6.2×) and 29.9 ns on `StdClock`; the old code in the same
//! rounds 10.96 ns and 32.7 ns (in an earlier pair of runs 12.9 against
//! 9.0 ns on `CoarseClock`).
//!
//! The target of at most 1.2× the count window's call holds for consecutive
//! failures (the same 50 instructions: a success in a healthy run changes
//! nothing, and is the same inline load of the window's word). It does not
//! hold for the time window, on either clock, and cannot for any window
//! that is exact over time: where a count window full of successes takes
//! another success as it is (two loads, no write), a success must be
//! counted in its bucket, because it is the denominator of the failure
//! rate, and that is a read-modify-write of shared memory: a `lock
//! cmpxchg`, 11–13 ns back to back on this machine, where a load is under
//! 1 ns. With that one write taken out (a measurement build, not kept), the
//! same call was 4.2 ns against 8.7 ns in the same rounds: the write is
//! half the call, and the floor of a counted call is near 5× the count
//! window's here, whatever else is shaved. On `StdClock` the call also
//! reads the clock (`clock_gettime`, about 20–25 ns in this VM), which the
//! count window never does; on `CoarseClock` that read is one load.
//!
//! What the closed call does now: a plain success whose bucket is the
//! window's latest (nothing to move on or clear) and already holds the
//! minimum calls (no trip check due) is counted inline: its bucket from
//! the time (two divisions), the counter's load, the window word's load
//! and one compare-and-swap. Before, it went out of line through the
//! whole record path (callgrind: `record_time` 116 instructions a call,
//! `record_slow` 68, `advance` 45, 276 in all on `CoarseClock`, reading
//! the window word three times): 10.96 ns against 7.73 ns on
//! `CoarseClock` in the rounds above. The divisions
//! (`now / bucket` and `epoch % buckets`) are about 12 of the 119
//! instructions (a build with both as constants counted 116 against 128
//! before the last change, the same time within the noise): on x86 they
//! run in the shadow of the compare-and-swap. A `fetch_add` in place of the
//! compare-and-swap would cost the same here (measured: 12.6 against 11.9 ns
//! back to back) and cannot refuse to add to a counter that a rollover has
//! just replaced (`src/breaker/time.rs`).
//!
//! Earlier versions of this table timed a minute in buckets of 6 s: in
//! criterion's loop such a bucket reaches its cap of 4 194 303 calls in
//! well under a second, after which a success adds nothing, so those times
//! (9.40 ns, 4.48×) were mostly that path; the instruction counts (275)
//! were the one that adds. The bucket's length costs a counted call
//! nothing else (one call in about a million moves the window on here).
//!
//! Against the peers in the same run: failsafe's consecutive-failures breaker
//! (36.5 ns) is 16.7× ours (2.19 ns) and 3.4× our time window on
//! `CoarseClock`; our time window on `StdClock` is 1.13× it (it reads the
//! clock once per call too). failsafe's default policy, which keeps a success
//! rate over a time window, is 2.8× our time window on `StdClock` and 10.7× on
//! `CoarseClock`. resilience4j (Java) was not measured here: its time-based
//! sliding window is the same shape as ours, a ring of per-interval
//! aggregates that each call updates, and its count-based window a ring of
//! the last N outcomes.
//!
//! On the Cortex-M4F (`bash firmware/build.sh`, its `time-window` and
//! `consecutive` variants against `no-deadline`, the same firmware with the
//! count window of 64 calls): the time window (10 s in ten buckets) adds
//! 2 880 B of flash at `"z"` (3 060 B at `"s"`) and 64 B of RAM (the static
//! breaker is 200 B against 136 B); 864 B of that is compiler_builtins' 64-bit
//! division (`u64_div_rem`, for the bucket; Cortex-M has no such
//! instruction), most of the rest the time window's recording (the breaker's
//! out-of-line record path is 2 244 B against 1 092 B). The closed path's
//! inline count is 340 B of it at `"z"` (456 B at `"s"`; before it, 2 536 B
//! and 2 580 B); out of line (`#[inline(never)]`) it saved nothing at `"z"`
//! (2 884 B) and cost x86 11 instructions a call, so it stays inline. On
//! Cortex-M the two divisions are calls into `u64_div_rem` on every
//! counted call, where x86 hides them under the compare-and-swap: a
//! reciprocal for each (a multiply and a shift, set up with the config)
//! would take them and the 864 B out, not measured here. Consecutive failures
//! cost 68 B less flash at `"z"` (64 B at `"s"`) and 56 B less RAM (80 B).
//! A count-window or consecutive breaker links none of the time window's
//! code (their storage has no buckets), nor the division.
//!
//! quanta (`Upkeep` at 1 ms beside `CoarseClock`'s updater, in the same run):
//! its `Clock::recent()` costs 2.1× `CoarseClock::now()` (1.5–3.1× across
//! runs; it is not inlined: a call that checks for quanta's mock clock, then
//! the load), and the breaker timed on it 2.1× the breaker timed on
//! `CoarseClock`. Its `Clock::now()` (TSC, scaled) is 0.52× `Instant::now()`.
//! `CoarseClock` stays a plain thread and an atomic: its read and start are
//! cheaper, and quanta's TSC-scaled time drifted from `CLOCK_MONOTONIC` (0.5
//! ms ahead after 20 s here), so it could not share `StdClock`'s origin or
//! promise never to be ahead (the measurements: `CoarseClock`'s docs).
//!
//! On `thumbv7em-none-eabihf`, `size_of::<CircuitBreaker<C, 64>>()` with a
//! zero-sized clock is 136 B. Both limits (160 B on x86_64, 136 B on the
//! thumb targets) are asserted at compile time in `src/breaker/mod.rs`.
//!
//! What the numbers say:
//!
//! - **Closed state, slow-call detection off**: in a healthy system (the
//!   window full of plain successes) a call is three loads and no write — one
//!   of the state word to admit, the state word and the window word to record:
//!   a window of nothing but successes does not change with one more. No clock
//!   is read. 5.3–6.7× faster than recloser (a spin lock and an epoch pin per
//!   call), 25–31× faster than failsafe's default (a mutex, a clock read and a
//!   moving average) and 7.6–9.5× faster than failsafe with consecutive
//!   failures only (6.6–8×, 36–44× and 11–13× in an earlier run). Async,
//!   under the same `block_on`: 5.5× recloser's `AsyncRecloser` and 14.5–18×
//!   failsafe's default. A call whose outcome
//!   changes the window (a failure, a slow call, or any call before the window
//!   is full) adds one compare-and-swap, a slot write and a read of the
//!   window's slots.
//! - **Slow-call timing on**: on `CoarseClock` the untimed call's time
//!   (0.86×; 1.24× its instructions: two inlined relaxed loads and a
//!   comparison); on `StdClock` two clock reads on top of it, still 1.8×
//!   faster than failsafe's default.
//! - **2 threads hammering one breaker**: reads only, so the cores do not
//!   fight over a cache line — 5.2× faster than recloser per call per thread
//!   and 48× faster than failsafe's default in this run (18× and 77×, 9.6×
//!   and 46×, and 57× and 95× in earlier runs: the contended cells move most
//!   with load). This case records successes
//!   only; threads that record failures each take the window word's cache
//!   line with a compare-and-swap.
//! - **No heap allocation**: every breaker operation in every state —
//!   `try_acquire` with success / failure / ignore / drop, a trip, rejections,
//!   half-open probes and the close, an expired half-open episode, the operator
//!   switches, metrics, and `call` / `call_with` polled to completion —
//!   allocates nothing (`tests/no_alloc.rs`).
//! - `size_of::<CircuitBreaker<StdClock, 64>>()` is 160 B on x86_64 (the 64
//!   window slots are one byte each) and 136 B on `thumbv7em`; recloser and
//!   failsafe keep their state on the heap, so theirs is a handle's size.
//!
//! **One fast path however the call is written.** Before, in
//! one run of the forms group alone against the code before the change, a
//! closed call written `try_acquire().unwrap()` cost 2.2 ns and the same call
//! written `if let Ok(p) = b.try_acquire()` 10.2 ns (4.65×), `call` polled
//! once 13.0 ns (5.9×), `call_with` 12.1 ns (5.5×); the same run after: 2.0 to
//! 2.1 ns for the four `try_acquire` forms, 2.6–2.7 ns for `call` and
//! `call_with`. For the `try_acquire` forms the cause was the permit's layout,
//! not inlining or a drop (neither the permit nor the rejection does work on
//! drop): its innards (start, generation, probe flag: three fields) were an
//! aggregate,
//! and the slow path returned a 24-byte `Result<Raw, Rejection>` through
//! memory. Wherever the `Err` arm was live, the fast path built its permit in
//! that stack slot field by field and the permit's move reloaded it in one
//! 16-byte load, which cannot be forwarded from the narrower stores: a
//! store-forwarding stall of about 6 ns (`objdump -d` of the bench binary
//! shows the `movups` after three narrower `mov`s). With `unwrap` the
//! optimiser happened to keep the values in registers. Now the innards are
//! two scalars (the generation and the flag one `NonZeroU32`), returned in
//! registers, with the refusal written through a pointer. `call` and
//! `call_with` had inlining to blame as well: `Call::poll` and the breaker's
//! `finish` were out of line and `ErrIsFailure`, a function pointer read back
//! from the future after a call, was called indirectly; and the same stall
//! twice over (the permit stored into the future's field and reloaded whole,
//! and `Option::take` of the empty field reading stale bytes a narrower store
//! had just written). Now `Call::poll` is inlined and keeps the breaker, the
//! classifier and the permit out of the future while it polls (the permit
//! goes into the field only if the call is pending), and the field is read
//! only when it holds a permit. That left `call` and `call_with` at 75
//! instructions against the `try_acquire` forms' 55 (1.36×; 1.29× in time),
//! and the cause was unwinding. Every call inside the inlined `poll` that can
//! unwind (the inner future's poll, the clock, the breaker's slow paths) has
//! a landing pad that drops the `Call` future, through a `cold` call of its
//! drop glue, which LLVM inlines only when it is small; with the permit's
//! abandon inlined into it, it was not, so the glue took the future's
//! address, the future could not be kept in registers, and a call ready at
//! once still stored its fields, read them back after each opaque call and
//! tested its permit field on the way out. Built with `panic = "abort"` (no
//! landing pads) it was 60. Now the abandon is out of line and cold
//! (`Guard::abandon`), the glue is a test and a call and is inlined at the
//! landing pads, and `call` is 61 instructions with unwinding too: 1.11× the
//! `try_acquire` forms, which is the trivial call's own future polled once
//! (the reference row: 5–6). `Call::poll` is also always inlined now: with
//! `#[inline]`, a program that polled one `Call` type from two places got it
//! out of line, at 99 instructions. Where panics abort (the firmware) both
//! keep `#[inline]`, and the firmware's size is unchanged.
//!
//! An earlier run of this table (before the healthy-window path and the
//! inlining), under load from parallel builds, had our closed-state call at
//! 28 ns: 1.3× recloser and 6.4× failsafe's default, with the slow-call case at
//! 1.19×; the profile showed one compare-and-swap per call and a
//! store-forwarding stall on the permit's padding, both gone now.
//!
//! # Policy
//!
//! A policy call with nothing failing — a slot, the breaker's admission, the
//! call under its timeout, the outcome recorded, the slot back — beside the
//! same three layers built from peers and stacked the same way: tokio's
//! `Semaphore` outside, failsafe 1.3's futures breaker inside,
//! `tokio::time::timeout` innermost; both in the same run, on the same tokio
//! current-thread runtime (ours on `TokioClock`). Reproduce with
//!
//! ```sh
//! cargo bench --bench policy --features tokio -- --warm-up-time 1 --measurement-time 3 && python3 scripts/bench_table.py --only policy --write
//! ```
//!
//! (about 2 minutes). Run conditions of the tables below: the same 2-core
//! x86_64 virtual machine, Rust 1.95, one run with those short times on a
//! machine otherwise idle but slower that hour (a clock read 32–40 ns against
//! 24–27 ns in earlier runs): read the ratios.
//!
//! <!-- bench_table.py: policy -->
//!
//! ns per call with nothing failing (criterion median), a loop of calls in one tokio current-thread `block_on`; peers ÷ watertight above 1 means watertight is faster. Ours is `Policy<TokioClock, 64>` from `PolicyConfig::builder(64)` (slot wait 100 ms, call timeout 30 s, default breaker); the peers are `tokio::sync::Semaphore::new(64)` outside, failsafe's futures breaker (`Config::new().build()`) inside, `tokio::time::timeout(30 s)` innermost.
//!
//! | case | watertight | tokio `Semaphore` + failsafe + `tokio::time::timeout` | peers ÷ watertight |
//! |---|---|---|---|
//! | `call(\|\| async { Ok(()) })`; peers `sem.acquire()`, `breaker.call(timeout(30 s, async { Ok(()) }))` | 49.6 ns | 296 ns | 5.96× |
//! | the same in a 1.5 s request budget made per call: ours `call_within(&Deadline::after(..))`, peers inside an outer `timeout(1.5 s, ..)` | 135 ns | 380 ns | 2.82× |
//! | slow-timing group, ours untimed (`BreakerConfig::DEFAULT`) | 51.8 ns | 299 ns | 5.77× |
//! | slow-call timing on: `slow_call_duration(1 s)`, the breaker on `CoarseClock` (`Policy::with_breaker_clock`) | 53.9 ns | 299 ns | 5.54× |
//! | the same, the breaker on `StdClock` | 127 ns | 299 ns | 2.35× |
//! | the same, the breaker on `TokioClock` (the policy's own clock) | 131 ns | 299 ns | 2.28× |
//!
//! Slow-call timing's cost in the policy, same run: coarse 1.04× untimed, std 2.45× untimed, tokio 2.53× untimed.
//!
//! The parts, each alone in a loop in the same `block_on`, same run:
//!
//! | part | ns |
//! |---|---|
//! | ours: free slot + breaker permit + call + record, no clock read, no sleep | 27.9 ns |
//! | ours: free `Bulkhead::acquire_timeout(100 ms)` + drop | 77.1 ns |
//! | tokio: free `Semaphore::acquire()` + drop | 70.8 ns |
//! | ours: closed `CircuitBreaker::call(ready)` | 8.7 ns |
//! | failsafe: default breaker's `call(ready)` | 156 ns |
//! | ours: `timeout(TokioClock, 30 s, ready)` | 84.2 ns |
//! | tokio: `tokio::time::timeout(30 s, ready)` | 74.0 ns |
//! | `std::time::Instant::now()` | 32.0 ns |
//! | `TokioClock::now()` (tokio's `Instant::now()`) | 40.5 ns |
//!
//! <!-- /bench_table.py: policy -->
//!
//! <!-- bench_table.py: forms-policy -->
//!
//! The same call written each way a caller writes it: policy, `call(ready).await` in a tokio current-thread loop (`benches/policy.rs`); ns (criterion median) and ÷ the fastest form, one run.
//!
//! | form | ns | ÷ fastest |
//! |---|---|---|
//! | `.unwrap()` | 50.1 ns | 1.13× |
//! | `if let Ok(..)` | 45.1 ns | 1.01× |
//! | `match`, the `Err` arm using the error | 44.5 ns | 1.00× |
//! | `?` in a fn returning the error | 44.7 ns | 1.00× |
//! | `call_with(.., classifier)` | 47.9 ns | 1.08× |
//!
//! <!-- /bench_table.py: forms-policy -->
//!
//! Slow-call timing in a policy: the breaker on a `CoarseClock`
//! (`Policy::with_breaker_clock`, the waits still on `TokioClock`) costs 1.04×
//! the untimed call; on `StdClock` 2.45×, on the policy's own `TokioClock`
//! 2.5× (tokio's `Instant::now()` checks for paused time). All three stay
//! faster than the peers' stack, which has no slow-call detection: 5.5×,
//! 2.35× and 2.3×.
//!
//! What the numbers say:
//!
//! - **6.0× faster than the peers' stack** for a call with nothing to wait for
//!   (5.6× and 6.2× in earlier runs; 4× before the call became a named
//!   future):
//!   the policy tries the slot before it computes any wait, and polls the call
//!   once before it arms the timeout, so such a call reads no clock and sets
//!   no timer, where the peers' stack reads the clock three times (counted
//!   with a probe on `clock_gettime`) and registers a tokio timer entry. A
//!   clock read costs 24–40 ns here (`TokioClock::now()` more than
//!   `Instant::now()`: tokio's `test-util`, a dev-dependency, checks for
//!   paused time).
//! - **In a request budget, 2.8×**: one clock read checks that the budget is
//!   not spent before the call starts, and the bench makes a `Deadline` per
//!   call (another read).
//! - An earlier version read the clock three times as well (before the slot,
//!   in `acquire_timeout`, before the call) and made a tokio `Sleep` that was
//!   never polled: 1.3–1.6× the peers. Its profile put 45 % of the call in the
//!   clock reads.
//! - **The forms** (the same call as `.unwrap()`, `if let`, a `match`, `?`,
//!   `call_with`): within 1.13× of each other in this run (`.unwrap()` the
//!   slowest; 1.17–1.27× in earlier, loaded runs). The call is the same
//!   future each time (`PolicyCall::poll`, out of line); what differs is how
//!   the caller's code around a 32-byte `Result` is compiled: counted with
//!   callgrind on a copy of the forms, each polled once, 245–264 instructions
//!   a call (1.08×), so what the times add beyond that is this machine's
//!   noise at this size.
//! - **No heap allocation per call**: a policy call (`call`, `call_with`,
//!   `call_within`) with nothing failing and a slot free, polled to
//!   completion, allocates nothing; nor does a refusal (bulkhead full, circuit
//!   open, budget spent), nor a `timeout` that completes, nor a call that is
//!   pending once on tokio (its timer entry is registered in place), nor a
//!   *wait* for a slot: the call future holds its own queue node
//!   (`tests/no_alloc.rs`).
//!
//! # Retries
//!
//! **A storm, counted.** `benches/retry.rs` simulates 10 000 calls, one every
//! millisecond, against a system that fails every attempt for 5 s (the calls
//! that arrive then are the failing phase) and then recovers, after which only
//! the first attempt of every 20th call fails. Three ways to retry, each
//! allowed at most 3 retries per call with the same full-jitter backoff, so
//! that only what bounds the retries differs: ours (`call_idempotent`,
//! `max_attempts(4)`, the default budget; the breaker disabled, since it would
//! stop the storm on its own — every call refused, no attempt at all — and
//! here the budget alone is measured); a naive loop of 4 attempts; tower 0.5's
//! `retry` middleware with a policy that withdraws from
//! `TpsBudget::default()` (a 10 s window, a floor of 10 retries a second,
//! 20 % of requests) before each retry and deposits on each success. It runs
//! on paused tokio time, one task per call, so the counts are the same every
//! run (the bench checks it runs them twice alike):
//!
//! | way | phase | calls | attempts | attempts per call | retries | calls failed |
//! |---|---|---|---|---|---|---|
//! | watertight (budget 10 tokens, 10 %) | failing | 5000 | 5004 | 1.001 | 4 | 5000 |
//! | watertight (budget 10 tokens, 10 %) | recovered | 5000 | 5244 | 1.049 | 244 | 6 |
//! | naive (retry 3 times) | failing | 5000 | 19892 | 3.978 | 14892 | 4818 |
//! | naive (retry 3 times) | recovered | 5000 | 5250 | 1.050 | 250 | 0 |
//! | tower retry (TpsBudget::default) | failing | 5000 | 5100 | 1.020 | 100 | 5000 |
//! | tower retry (TpsBudget::default) | recovered | 5000 | 5249 | 1.050 | 249 | 1 |
//!
//! During the outage the naive loop sends almost four times the traffic to a
//! system that is down (the 182 of its calls that succeeded are the last
//! ones, whose retries landed after the recovery); tower's budget lets its
//! floor through — 10 retries a second over its 10 s window, 100 here, spent
//! in the outage's first moments (and, by its design, not measured here, 10
//! more a second for as long as an outage lasts) — and ours 4, then none
//! while nothing succeeds. After the recovery every way retries the
//! blips, the budgets once they have refilled: ours refused 6 of them (it came
//! out of the outage empty and refills by 0.1 token per success; it ended full
//! again, 10 tokens), tower's one.
//!
//! **What it costs when nothing is retried.** A policy call that succeeds
//! first time, through `call_idempotent` beside `call` (two policies from the
//! same config, as in `benches/policy.rs`, on `TokioClock` in one tokio
//! current-thread `block_on`), criterion medians in three runs on this 2-core
//! virtual machine (load average about 3, Rust 1.95), with the success path
//! as it is since an `Ok` the classifier calls a failure is retried:
//!
//! | case | `call` | `call_idempotent` | ÷ |
//! |---|---|---|---|
//! | `call(ready)` / `call_idempotent(ready)` | 37.6, 36.5, 37.9 ns | 36.2, 35.2, 36.0 ns | 0.96×, 0.96×, 0.95× |
//! | in a 1.5 s request budget made per call: `call_within` / `.within(&request)` | 145.7, 143.0, 143.1 ns | 142.6, 145.3, 145.0 ns | 0.98×, 1.02×, 1.01× |
//!
//! So marking a call idempotent costs nothing measurable on the path where it
//! succeeds (the target was at most 1.1×): the retry wrapper adds a look at
//! the outcome (the classifier's, on an `Ok`) and one relaxed load of a full
//! budget. That `call_idempotent` came out a little faster than `call` in
//! the first row in every run is within what this machine's noise does to
//! two separately compiled loops; read it as "the same". Reproduce the table
//! and the ratios with
//!
//! ```sh
//! cargo bench --bench retry --features tokio -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! (about 30 s after the build; it prints the storm table first and the
//! ratios of criterion's medians last).
//!
//! # Adaptive limits: the simulation
//!
//! A downstream of *c* workers (a call is served at once while fewer than *c*
//! are busy, queues behind them otherwise, and is refused at once past a queue
//! of 20), service times uniform in 10–30 ms, 1 500 calls/s of open-loop
//! (Poisson) arrivals, the same sequence for every limiter; *c* = 40 for 60 s,
//! then 10, then 40 again; everything on `ManualClock`, so the table is the same
//! on every run and machine. The adaptive runs use the defaults but for a
//! minimum limit of 1 (the default 20 is above the second phase's 10 workers).
//! A limiter has *converged* from the first second (= window) after which
//! every second reaches 90 % of the best fixed limit's goodput with a p99
//! within 1.5 × its p99 (the best fixed limit: the highest goodput over the
//! phase's second half); goodput, p50 and p99 are measured from there to the
//! end of the phase (for the fixed limits, over the second half); refused (by
//! the limiter) and dropped (by the downstream's full queue) count the whole
//! phase; *settle* is the first second from which the limit stays within ±20 %
//! of where it ends the phase.
//!
//! ```sh
//! cargo bench -p watertight --bench limit     # prints the table (nothing is timed)
//! cargo test -p watertight --test limit_sim   # asserts the targets on the same runs
//! ```
//!
//! ```text
//! The limit at the end of every 5th window (workers: 40 | 10 | 40):
//!     AIMD      24 29 34 39 44 49 54 59 64 69 74 79 | 45 29 29 29 29 29 29 29 29 29 29 29 | 34 39 44 49 54 59 64 69 74 79 84 89
//!     Gradient2 23 27 31 35 39 43 47 51 55 59 63 67 | 39 25 22 21 21 21 21 22 22 22 22 22 | 26 30 34 38 42 46 50 54 58 62 66 70
//! ```
//!
//! **Phase 1 (c = 40, 60 s, 1500 calls/s offered): best fixed = fixed 200**
//!
//! | limiter | goodput/s | vs best | p50 ms | p99 ms | refused | dropped | limit | limit at end | windows to converge | calls to converge | windows to settle |
//! |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|
//! | fixed 8 | 383 | 26 % | 19.9 | 29.8 | 66492 | 0 | 8–8 | 8 | – | – | – |
//! | fixed 32 | 1349 | 91 % | 20.0 | 29.8 | 8394 | 0 | 32–32 | 32 | – | – | – |
//! | fixed 200 | 1483 | 100 % | 20.1 | 29.8 | 0 | 0 | 200–200 | 200 | – | – | – |
//! | AIMD | 1477 | 100 % | 20.1 | 29.8 | 5068 | 0 | 33–79 | 79 | 13 | 19500 | 42 |
//! | Gradient2 | 1467 | 99 % | 20.1 | 29.8 | 6556 | 0 | 32–67 | 67 | 15 | 22452 | 42 |
//!
//! **Phase 2 (c = 10, 60 s, 1500 calls/s offered): best fixed = fixed 32**
//!
//! | limiter | goodput/s | vs best | p50 ms | p99 ms | refused | dropped | limit | limit at end | windows to converge | calls to converge | windows to settle |
//! |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|
//! | fixed 8 | 383 | 76 % | 20.0 | 29.8 | 67379 | 0 | 8–8 | 8 | – | – | – |
//! | fixed 32 | 502 | 100 % | 58.9 | 73.2 | 0 | 60284 | 32–32 | 32 | – | – | – |
//! | fixed 200 | 502 | 100 % | 58.9 | 73.2 | 0 | 60284 | 200–200 | 200 | – | – | – |
//! | AIMD | 500 | 100 % | 57.1 | 72.2 | 42230 | 18194 | 27–71 | 29 | 0 | 0 | 7 |
//! | Gradient2 | 500 | 100 % | 44.2 | 68.3 | 53287 | 7105 | 21–60 | 22 | 0 | 0 | 9 |
//!
//! **Phase 3 (c = 40, 60 s, 1500 calls/s offered): best fixed = fixed 200**
//!
//! | limiter | goodput/s | vs best | p50 ms | p99 ms | refused | dropped | limit | limit at end | windows to converge | calls to converge | windows to settle |
//! |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|
//! | fixed 8 | 384 | 26 % | 20.0 | 29.8 | 67180 | 0 | 8–8 | 8 | – | – | – |
//! | fixed 32 | 1358 | 90 % | 20.0 | 29.8 | 8633 | 0 | 32–32 | 32 | – | – | – |
//! | fixed 200 | 1502 | 100 % | 20.1 | 29.9 | 0 | 0 | 200–200 | 200 | – | – | – |
//! | AIMD | 1494 | 99 % | 20.1 | 29.9 | 1120 | 0 | 33–89 | 89 | 3 | 4430 | 40 |
//! | Gradient2 | 1484 | 99 % | 20.1 | 29.8 | 4338 | 0 | 32–70 | 70 | 11 | 16566 | 40 |
//!
//! What it shows. The limits follow the workers down within 8–9 windows and
//! back up at a window's pace: AIMD by one, Gradient2 by its queue allowance
//! (0.8 a window with the defaults). With 40 workers neither stops at what the
//! phase needs (30–45 in flight): both grow while at least half the limit is
//! in use, AIMD to 89 and Gradient2 to 70 by the end of the phase, harmless
//! here (no call waits for a limit it does not reach) but a limit that far up
//! is what takes AIMD 9 windows (× 0.9 each) to come down when the workers drop. With 40 workers, both algorithms reach 99–100 % of the best
//! fixed limit's goodput (fixed 200) within 15 windows of the start (AIMD 13,
//! Gradient2 15: 19 500 and 22 452 calls) and within 3 and 11 windows of the
//! workers' return (4 430 and 16 566 calls), at the same p99; fixed 32 loses
//! 9–10 % of the calls, fixed 8 — the pool-of-10 rule — 74 %. When the workers
//! drop to 10, every limit above 30 (10 busy + 20 queued) fills the
//! downstream's queue: fixed 32 and 200 have it drop 60 284 calls, and their
//! calls wait 59 ms (p50). Both algorithms meet the goodput and p99 targets
//! from the first window there (the best fixed limit's own p99 is that of a
//! full queue); what they change is where the load is shed: AIMD's limit
//! settles within 7 windows between 27 and 31 (loss-based, it probes the queue
//! bound every few windows: 18 194 drops in the phase, 8 130 of them in its
//! first 8 windows), Gradient2's within 9 windows at 21–22, with 7 105 drops (all in
//! its first 8 windows) and a p50 of 44 ms instead of 59. The test asserts, per
//! phase and algorithm: converged within 20 windows; after convergence ≥ 90 %
//! of the best fixed limit's goodput and a p99 within 1.5 ×; the limit always
//! within `[min, max]`; once settled, at most a third of the best fixed limit's
//! drops at the downstream. With drops counted as quick successes (the failure
//! mode [adaptive](super::adaptive) describes, planted), both algorithms' limits stay at 68–80 through the
//! second phase and the last assertion fails.
//!
//! # The global bulkhead on Redis
//!
//! **Measured** (`cargo bench --bench redis --features redis`, about 40 s:
//! it starts its own redis-server on a Unix socket; medians of 7 runs of
//! 4000 pairs each, on a quiet machine, two runs agreeing within 5 %). "÷
//! PING" is the time per pair over a `PING`'s at the same concurrency on a
//! connection of the same kind; "script calls" and "Redis µs" are what Redis
//! itself counted (`INFO commandstats`): the round trips a pair cost, and the
//! server time they took.
//!
//! | row | tasks | µs per pair | ÷ PING | script calls per pair | Redis µs per pair |
//! |---|---|---|---|---|---|
//! | PING (the floor) | 1 | 87.6 | 1.00 | — | — |
//! | the two scripts alone, one after the other | 1 | 164.9 | 1.88 | 2.00 | 20.0 |
//! | `try_acquire` + drop (release handed to the keeper) | 1 | 105.7 | **1.21** | **1.98** | 16.7 |
//! | `try_acquire` + `release().await` | 1 | 196.3 | 2.24 | 2.00 | 21.3 |
//! | PING (the floor) | 16 | 5.6 | 1.00 | — | — |
//! | the two scripts alone, one after the other | 16 | 32.0 | 5.68 | 2.00 | 12.5 |
//! | `try_acquire` + drop (release handed to the keeper) | 16 | 25.0 | 4.45 | **1.06** | 11.1 |
//! | `try_acquire` + `release().await` | 16 | 33.8 | 6.01 | 2.00 | 13.0 |
//! | local front at its cap refuses (no Redis call) | 1 | 25 ns | — | — | — |
//! | for reading it: `Bulkhead::try_acquire` refuses | 1 | 7 ns | — | — | — |
//!
//! How to read it:
//!
//! - A pair costs **1.06 to 1.98 round trips** with releases pipelined (target
//!   ≤ 2.2): one acquire script, and a release that the keeper sends in the
//!   background, batched with others (16 tasks: one release call per 16
//!   pairs or so). A dropped permit's release overlaps the next acquire, so
//!   one task pays 1.21 PINGs of time per pair; waiting for the release
//!   (`release().await`) is the two round trips it looks like.
//! - At 16 tasks the time is Redis's, not the round trips': a `PING` costs
//!   the server almost nothing and pipelines to 5.6 µs apiece, while each
//!   pair's Lua (`TIME`, the sweep, the count, `INCR`, `ZADD` and the key's
//!   expiry; then `ZREM` and `PUBLISH`) takes about 11 µs of Redis's single
//!   thread. That is the bound: about 90 000 pairs a second per system on one
//!   Redis core, as fast as the two scripts run bare (the second row of each
//!   group), with nothing of ours on top.
//! - One task's time here is mostly waking threads on an idle 2-core machine
//!   (a `PING` is 87.6 µs quiet, 10 µs when the cores are busy); the ratios
//!   are what carry over.
//! - The local front refuses in 25 ns, without a Redis call (Redis counted
//!   none in 1.4 million refusals).
//!
//! ## Leased shares
//!
//! **Measured** (`cargo bench --bench redis_leased --features redis`, about
//! 30 s: its own redis-server; medians of 7 runs of 200,000 pairs, timed
//! from the tasks' release; one run on the 2-core machine). The floor is a
//! local `Bulkhead`'s call of the same shape (`acquire_owned_timeout(d)` +
//! drop); "Redis calls" is what Redis counted (`INFO commandstats`).
//!
//! | row | tasks | ns per pair | ÷ `Bulkhead` | Redis calls per pair |
//! |---|---|---|---|---|
//! | `Bulkhead` (local) | 1 | 89 | 1.00 | — |
//! | leased `GlobalBulkhead` | 1 | 148 | **1.66** | 0 during the runs |
//! | per-call `GlobalBulkhead` | 1 | 100,959 | 1,134 | 1.93 |
//! | `Bulkhead` (local) | 16 | 246 | 1.00 | — |
//! | leased `GlobalBulkhead` | 16 | 381 | **1.55** | 0 during the runs |
//! | per-call `GlobalBulkhead` | 16 | 28,626 | 116 | 1.06 |
//!
//! | fleet: 4 processes × 16 tasks, 1 s | pairs (or admitted checks) per second | Redis calls per pair (or check) |
//! |---|---|---|
//! | `GlobalBulkhead` of 64, leased (refresh 500 ms) | 8,194,785 | 0.000009 |
//! | `GlobalBulkhead` of 64, per call | 31,107 | 2.00 |
//! | `GlobalRateLimiter` of 1,000,000/s (burst 100,000), leased (refresh 100 ms) | 1,077,406 | 0.000042 |
//! | `GlobalRateLimiter`, the same quota, per call (one GCRA script a check) | 72,480 | 1.00 |
//!
//! The leased rate fleet is held to its quota (1,000,000/s, the fastest a
//! quota in whole µs goes, plus the burst); per call, Redis's one thread
//! holds the fleet to 72,480 checks a second. (The rate rows are from a
//! later run than the bulkhead rows, with a CI run on the same cores.)
//!
//! - A leased pair is the local bulkhead's, plus the lease's checks (one
//!   clock read, the era word's two compare-and-swaps and a peak): 1.55–1.66×
//!   (target ≤ 2×). Redis sees one script per process per refresh, so the
//!   fleet runs 263× the per-call mode's pairs.
//! - At steady state under real calls (`tests/global_leased.rs`: 4 processes,
//!   limit 20, calls of 10 ms, demand above the limit, refresh 250 ms):
//!   0.016 Redis calls per call (target ≤ 0.05), 94 % of the limit in use.
//!
//! ## The global rate limiter on Redis
//!
//! The same bench, its GCRA rows (`GlobalRateLimiter::check`, every check
//! admitted: one script each), beside that run's `PING` and the local
//! `RateLimiter::check` on `StdClock`. One run on the 2-core machine with
//! other builds beside it (so a `PING` was 13.9 µs alone): read the ratios.
//!
//! | row | tasks | µs per check | ÷ PING | script calls per check | Redis µs per check |
//! |---|---|---|---|---|---|
//! | PING (the floor) | 1 | 13.9 | 1.00 | — | — |
//! | `GlobalRateLimiter::check` (one GCRA script) | 1 | 29.7 | **2.13** | **1.00** | 6.6 |
//! | the bulkhead's `try_acquire` + drop, same run, per pair | 1 | 68.5 | 4.92 | 1.89 | 14.9 |
//! | PING (the floor) | 16 | 5.2 | 1.00 | — | — |
//! | `GlobalRateLimiter::check` (one GCRA script) | 16 | 18.1 | **3.51** | **1.00** | 5.7 |
//! | the bulkhead's `try_acquire` + drop, same run, per pair | 16 | 29.9 | 5.80 | 1.06 | 11.1 |
//! | local `RateLimiter::check` admits | 1 | 47 ns | — | — | — |
//!
//! - A fleet-wide check is **one round trip and about 6 µs of Redis's
//!   single thread** (`TIME`, `GET`, `SET … PX`): about 170 000 checks a
//!   second per Redis core, for every key of every system on it, about
//!   twice the bulkhead's pairs.
//! - Against the local limiter it is some 600× the time per call
//!   (30 µs against 47 ns): the price of one schedule for the fleet, paid
//!   on every request. Where that is too much, the leased mode (below)
//!   spends cells from a pocket leased per refresh; a local `RateLimiter`
//!   per process with a fixed share of the quota costs nothing in Redis,
//!   and holds the fleet to the sum of the shares.
//!
//! **Leased** (`benches/redis_leased.rs`, its second table: 1,000,000/s
//! with a burst of 100,000, refreshed every 100 ms; each run 20,000
//! checks with a run's worth of cells leased before it, the median of 7;
//! the three rows timed the same way, from the tasks' release, one run on
//! the 2-core machine):
//!
//! | rate row | tasks | ns per check | ÷ `RateLimiter` | admitted | Redis calls per check |
//! |---|---|---|---|---|---|
//! | local `RateLimiter::check` | 1 | 54 | 1.00 | 100 % | — |
//! | leased `GlobalRateLimiter::check` | 1 | 55 | **1.02** | 100 % | 0 during the run |
//! | per-call `GlobalRateLimiter::check` | 1 | 19,656 | 364 | 100 % | 1.00 |
//! | local `RateLimiter::check` | 16 | 54 | 1.00 | 100 % | — |
//! | leased `GlobalRateLimiter::check` | 16 | 58 | **1.07** | 100 % | 0 during the run |
//! | per-call `GlobalRateLimiter::check` | 16 | 10,556 | 195 | 100 % | 1.00 |
//!
//! The leased check is one compare-and-swap on the pocket's counter (no
//! clock read); both local rows are mostly the async harness's own cost.
//! Redis calls per admitted cell at steady state, counted by `INFO
//! commandstats` in `tests/global_rate_leased.rs`: 0.010 (2 processes,
//! 2,000/s, burst 200, refresh 100 ms), 0.2 with 4 processes on 200/s and
//! a burst of 20 (each refresh leases about 5 cells there: a lease is at
//! most the burst).
//!
//! # Rate limiter
//!
//! Ours beside governor 0.10 on the same quotas, in the same run
//! (`benches/rate.rs`, whose module docs say what each group measures).
//! Reproduce with
//!
//! ```sh
//! cargo bench --bench rate --features quanta -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! (about 2 minutes). Three runs of that short form, one after the other,
//! on the 2-core virtual machine on a quiet moment (load average 1.1–1.3):
//! read the ratios, and only where the runs agree. ns per check (criterion
//! median; on two threads, the wall time of each thread's `iters` checks ÷
//! `iters`); ratio = ours ÷ governor, below 1 means ours is faster.
//! governor reads its default clock, quanta's `Clock::now()` (the TSC);
//! ours on `clock::QuantaClock` (feature `quanta`, the same read) compares
//! the limiters alone; `StdClock` is ours on its default clock
//! (`clock_gettime`); `CoarseClock` a relaxed load.
//!
//! | group | ours on | run 1 ours | run 1 governor | run 1 ratio | run 2 ours | run 2 governor | run 2 ratio | run 3 ours | run 3 governor | run 3 ratio |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | `check()` admitted, 1 thread | `QuantaClock` | 19.1 | 19.6 | **0.97** | 19.1 | 19.7 | **0.97** | 19.1 | 19.9 | **0.96** |
//! | | `CoarseClock` | 9.0 | | **0.46** | 9.2 | | **0.47** | 9.0 | | **0.45** |
//! | | `StdClock` | 21.5 | | 1.10 | 21.5 | | 1.09 | 21.5 | | 1.08 |
//! | `check()` refused, 1 thread | `QuantaClock` | 19.3 | 15.5 | 1.24 | 19.3 | 15.5 | 1.25 | 19.1 | 15.2 | 1.26 |
//! | | `QuantaClock`, `without_refusal_count()` | 10.6 | | **0.68** | 10.5 | | **0.68** | 10.3 | | **0.68** |
//! | | `CoarseClock` | 5.8 | | **0.37** | 5.8 | | **0.37** | 5.9 | | **0.39** |
//! | | `StdClock` | 21.7 | | 1.40 | 21.9 | | 1.41 | 21.8 | | 1.44 |
//! | `check()` admitted, 2 threads on one key | `QuantaClock` | 109.6 | 139.6 | **0.79** | 117.4 | 129.9 | **0.90** | 165.8 | 65.6 | (2.53) |
//! | | `StdClock` | 114.7 | | **0.82** | 130.3 | | 1.00 | 144.3 | | (2.20) |
//! | keyed, 1 thread, one key | `QuantaClock` | 23.6 | 41.4 | **0.57** | 23.7 | 42.2 | **0.56** | 23.6 | 42.2 | **0.56** |
//! | | `StdClock` | 32.2 | | **0.78** | 32.0 | | **0.76** | 31.6 | | **0.75** |
//! | keyed, 2 threads on two keys | `QuantaClock` | 24.3 | 42.0 | **0.58** | 24.3 | 41.7 | **0.58** | 24.4 | 42.7 | **0.57** |
//! | | `StdClock` | 32.2 | | **0.77** | 33.8 | | **0.81** | 32.9 | | **0.77** |
//!
//! The two-thread rows are bimodal on this machine: each sample spawns
//! its two threads afresh, and they either take turns on one core (when
//! other work holds the other), about 40 ns per check, twice a one-thread
//! check and no contention at all, or run on both cores at once, 75–170
//! ns, the word's cache line moving between the cores at every check. That
//! holds for ours and governor's alike; a median that mixes the modes (run
//! 3's governor at 65.6 ns) says nothing about either limiter. So the two
//! groups that decide the target were also run alone, our `QuantaClock`
//! limiter and governor in each run, 14 runs one after the other (load
//! average 0.8–3.2; the last three on the final code, the others on the
//! same hot path before a rebase), and the two-thread runs sorted by mode:
//!
//! | `QuantaClock`, ours ÷ governor | runs | median | range | at or below 1.0 |
//! |---|---|---|---|---|
//! | `check()` admitted, 1 thread | 14 | **0.974** | 0.963–1.062 (19.0–21.0 ns against 19.5–20.3) | 12 of 14 |
//! | `check()` admitted, 2 threads on one key, each thread on a core of its own (contended) | 10 | **0.88** | 0.59–1.01 (80.9–149.0 ns against 108.1–168.0) | 9 of 10 |
//! | the same, both threads taking turns on one core | 2 | | 0.925, 0.980 (39.1, 40.3 ns against 42.3, 41.1) | 2 of 2 |
//! | the same, the two limiters in different modes | 2 | | (not comparable) | |
//!
//! The keyed table against the maps it was chosen against (one GCRA step on
//! one of 512 live `u64` keys under one `std::sync::Mutex`; ours reads a
//! `ManualClock`, the others no clock):
//!
//! | map | run 1 | run 2 | run 3 |
//! |---|---|---|---|
//! | ours, set-associative, `RandomState` | 15.3 | 15.4 | 15.5 |
//! | ours, set-associative, `FnvState` | 11.8 | 11.8 | 12.0 |
//! | `hashbrown::HashMap`, `RandomState` | 14.7 | 15.0 | 14.9 |
//! | `heapless::FnvIndexMap<_, _, 1024>` | 13.1 | 13.0 | 13.4 |
//! | the `RandomState` hash alone | 6.7 | 6.8 | 6.8 |
//!
//! How to read it:
//!
//! - **On the same clock** (ours on `QuantaClock`): `check()` admitted is
//!   below governor's: 0.96–0.97 in the three full runs, a median of 0.974
//!   in fourteen runs of the pair alone (12 at or below 1.0, the others
//!   1.006 and 1.062), about half a nanosecond of 20: a margin smaller than
//!   this machine's noise from one run to the next, so a single loaded run
//!   can show 1.01. On two threads on one key, contended (each thread on a
//!   core), ours is faster: 0.79 and 0.90 in runs 1 and 2, a median of 0.88
//!   (0.59–1.01) in the ten runs of the pair where both limiters were in
//!   that mode; taking turns on one core, where a two-thread check is two
//!   one-thread checks, 0.93–0.98. Keyed, on one or two threads, ours is
//!   faster (0.56–0.58).
//! - **What brought the admission from 1.10× to below governor's**: the
//!   admission counter's bits in the word went from 2 to 4 (its carry, an
//!   atomic add, comes once in sixteen admissions instead of four), the
//!   carry moved off the word's cache line (so that it cannot take the line
//!   from another thread between its load and its compare-and-swap; these
//!   runs cannot tell that apart from the noise), and the check's step
//!   builds no `Option` and saturates nothing (`gcra::step`): 48
//!   instructions (and a padding nop) per admitted iteration of the bench's
//!   loop, the clock's `rdtsc` call aside, where governor's takes 56 with
//!   its two calls. The rest of a check is the clock read and the
//!   compare-and-swap, the same in both.
//! - **Refusal**, counted, is 1.24–1.26× governor's on the same clock, and
//!   no dearer than our own admission (19.1–19.3 ns against 19.1). The
//!   difference from governor is the `refused` counter: one relaxed atomic
//!   add, which governor does not keep (it counts nothing). A limiter made
//!   [`without_refusal_count`](crate::rate::RateLimiter::without_refusal_count)
//!   leaves the add out: 0.68× governor's. The add is most of a refusal
//!   here: one locked instruction on this virtual machine costs about 9 ns.
//! - **The clock is most of a check.** On `StdClock` ours pays
//!   `clock_gettime` where governor reads the TSC (1.08–1.10× admitted).
//!   A server that checks on every request can give the limiter a
//!   `QuantaClock` (governor's read), or a
//!   [`CoarseClock`](crate::clock::CoarseClock), where a check is half of
//!   governor's or less (0.37–0.47×) at that clock's resolution (1 ms by
//!   default: fine for an emission interval well above it).
//! - **The map**: ours with the FNV hash is the fastest of the four
//!   (11.8–12.0 ns, heapless's 13.0–13.4), and with `RandomState` about
//!   level with hashbrown's (15.3–15.5 against 14.7–15.0 ns); about half of
//!   ours with `RandomState` is SipHash itself. It was chosen for what the
//!   others lack, not for speed: eviction of a stale key scans 8 slots, not
//!   the table; lookups are bounded by 8 compares under any hash; no
//!   allocation or rehash, ever; one lock per set, the same code with and
//!   without `std` (see [the rate guide](crate::guide::rate#why-this-table)).
//!
//! # The rate limit layer beside tower's `RateLimit`
//!
//! **Measured** (`cargo bench --bench rate_tower --features tower,tokio --
//! --warm-up-time 1 --measurement-time 3`, about 1.5 minutes with the
//! build; it prints the ratio table itself after criterion's groups). One
//! request is `ready().await` then `call(()).await` around the same ready
//! inner service, on the admitted path (a quota of `u32::MAX` a second on
//! both sides, so nothing waits), in a loop in one tokio current-thread
//! `block_on`: ours a fail-fast `RateLimitLayer` on `TokioClock`, theirs
//! `Buffer::new(RateLimit::new(inner, Rate::new(u32::MAX, 1 s)), 1024)`,
//! whose worker is a task on the same runtime. On the shared 2-core
//! machine, load average 1.7 (a first run at 2.7 measured every time about
//! twice as long, with the same ratios: 0.090× and 0.098×):
//!
//! | request, admitted | criterion median | median of 11 interleaved rounds of 200 000 | ours ÷ theirs |
//! |---|---|---|---|
//! | ours, one service | 50.1 ns | 47.5 ns | **0.095×** |
//! | tower `RateLimit` behind a `Buffer`, one handle | 556 ns | 499.6 ns | 1 |
//! | ours, a clone per request (as axum calls a route) | 64.0 ns | 58.1 ns | **0.097×** |
//! | `Buffer` + `RateLimit`, a clone of the handle per request | 661 ns | 599.3 ns | 1 |
//! | tower `RateLimit` alone (not `Clone`: a reference, not a peer) | 27.3 ns | 26.4 ns | ours ÷ it: 1.8× |
//!
//! How to read it:
//!
//! - Behind its `Buffer`, tower's limit costs a message to the worker task
//!   and an answer back per request: about 0.5–0.6 µs here, where ours,
//!   shared by an `Arc` and taking its cell in `call`, costs 50–60 ns, a
//!   tenth.
//! - Alone, tower's `RateLimit` is about 20 ns cheaper than ours (1.8×): its
//!   window is plain fields of the one service (no atomics), which is
//!   exactly what keeps it from being `Clone`. Ours pays one
//!   compare-and-swap of the limiter's word and a relaxed counter, and holds
//!   the limit across every clone (`tests/rate_http.rs`).
//!
//! # Deadlines across the wire
//!
//! `benches/deadline_http.rs` (`cargo bench --bench deadline_http
//! --features http,tokio -- --warm-up-time 1 --measurement-time 3`, about
//! 2 minutes with the build; it prints the table itself after criterion's
//! groups): the budget's two layers — `OutboundDeadlineLayer` on a reqwest
//! client (an `http::Request` converted, as a tower client would), and
//! `InboundDeadlineLayer` on an axum route — against an empty axum
//! handler's round trip on 127.0.0.1 in the same run, the server on a
//! runtime of its own, keep-alive. Medians of 11 interleaved rounds (2 000
//! round trips, 200 000 layer calls each), on the shared 2-core machine,
//! load average 4.5–5.6:
//!
//! | what | per request | of the plain round trip |
//! |---|---|---|
//! | plain round trip | 45.2 µs | 100 % |
//! | both layers, round trip | 47.6 µs | 105.4 % |
//! | client's layer only | 46.6 µs | 103.2 % |
//! | server's layer only | 45.5 µs | 100.7 % |
//! | plain round trip inside `tokio::time::timeout`, no layer | 43.7 µs | 96.7 % |
//! | outbound layer's own work (net of building the request, 362 ns) | 546 ns | 1.21 % |
//! | inbound layer's own work (net of building the request, 577 ns) | 303 ns | 0.67 % |
//! | **both layers' own work** | **849 ns** | **1.88 %** (target ≤ 2 %) |
//!
//! How to read it:
//!
//! - The figure held to the target is the last: what the two layers do per
//!   request (read the extension, two clock reads, format and insert the
//!   header — `http::HeaderValue` owns its bytes, one small allocation —
//!   and on the server parse it, start the `Deadline` and insert it into
//!   the extensions, the map's allocations included; build each side's
//!   timeout), measured around a ready inner service so that the network
//!   is not in it. Two earlier runs: 1.75 % and 1.93 %.
//! - The round trips themselves differ by less than their noise: the
//!   trip inside `tokio::time::timeout` — the plain one *plus* a timer —
//!   came out 3 % faster than the plain one. Criterion's own round-trip
//!   groups are noisier still on this machine (confidence intervals of
//!   ±30 %; the layered group, run second, has read 40 µs alone and
//!   100–150 µs after the plain one), which is why the table interleaves.
//! - When the inner call is pending (every real one), the local cut
//!   registers a tokio timer on first poll and removes it at the end, as
//!   any timeout does; that part is in the round trips, not in the layers'
//!   own figure, and within the noise above.
//!
//! # Fault injection
//!
//! `benches/chaos.rs` (`cargo bench --bench chaos --features chaos --
//! --warm-up-time 1 --measurement-time 3`, about a minute after the build;
//! it prints the paired table itself after criterion's groups): what a
//! `chaos::Injector` (feature `chaos`) costs when it injects
//! nothing — disabled (one relaxed load), and enabled with every rate 0 (a
//! draw of the sequence and the `passed` counter: two `fetch_add`s) —
//! in a `Policy<&ManualClock>` call that answers at once (the call the
//! injector sits in, in a test or a game day; bulkhead, breaker and
//! deadline, no network), beside the same call without it. Two ways in:
//! `policy.call(|| chaos.inject(ready))`, a wrapper future around the
//! call's, and `policy.call_injected(&chaos, ready)`, where the policy
//! draws as it starts the call and polls the call's own future. And around
//! a bare ready future, for the wrapper's own nanoseconds. Futures are
//! polled once with a no-op waker. On the shared 2-core machine, load
//! average 4.2 (two other sessions building and benching):
//!
//! | group | call | criterion median |
//! |---|---|---|
//! | `chaos/policy-call` | `call(ready)` | 37.2 ns |
//! | | `call(‖ disabled.inject(ready))` | 39.3 ns |
//! | | `call(‖ rate0.inject(ready))` | 54.5 ns |
//! | | `call_injected(&disabled, ready)` | 36.8 ns |
//! | | `call_injected(&rate0, ready)` | 52.7 ns |
//! | `chaos/bare-future` | `ready` | 0.43 ns |
//! | | `disabled.inject(ready)` | 3.54 ns |
//! | | `rate0.inject(ready)` | 16.9 ns |
//!
//! Criterion times one benchmark after another, and on this machine the
//! load drifts between them (the same `call(ready)` has read from 25 to 74
//! ns across runs). The ratios come from the bench's paired rounds
//! instead — 201 rounds of 10 000 calls of each way, in a rotating order,
//! each round short enough to run whole between two preemptions. The same
//! run:
//!
//! | call | ns per call, median | minimum | ratio to `call`, median of rounds |
//! |---|---|---|---|
//! | `call(ready)` | 23.6 | 23.6 | 1 |
//! | `call(‖ disabled.inject(ready))` | 25.8 | 25.8 | 1.094 |
//! | `call(‖ rate0.inject(ready))` | 35.5 | 34.8 | 1.479 |
//! | `call_injected(&disabled, ready)` | 24.6 | 24.3 | **1.038** |
//! | `call_injected(&rate0, ready)` | 34.0 | 33.6 | 1.426 |
//!
//! Two more runs of that build: `call_injected` disabled 1.036 and 1.036,
//! `inject` disabled 1.094 and 1.093; with every function and branch
//! target aligned to 64/32 bytes (`RUSTFLAGS="-C
//! llvm-args=-align-all-functions=6 -C
//! llvm-args=-align-all-nofallthru-blocks=5"`), 1.031–1.032 and
//! 1.094–1.095. **Then the bulkhead's wait node moved to a cache line of
//! its own** (64-byte aligned, inside the policy's future), which changes
//! where everything in the policy's future sits: in the same bench, the
//! plain call went from 23.6 to 21.8–22.0 ns, `call_injected` disabled to
//! 23.8 ns, **1.078–1.091**, and `inject` disabled to 24.9 ns, 1.130–1.143
//! (four runs). The instructions did not change: counted by callgrind
//! (`CHAOS_WAY=k valgrind --tool=callgrind` on the bench binary runs one
//! way 100 000 times), a disabled injector added 23 instructions to a
//! policy call of about 272 through `call_injected`, and 53 through
//! `inject`, in both builds. Of `call_injected`'s, the load, the branch and
//! the start's stage are a handful; the rest is registers saved around
//! the draw's call, which returns into the policy's poll: a build with the
//! draw replaced by a `panic!` (a call that never returns) measured 1.033
//! in the second layout, and a closure that only checks the flag,
//! `call(|| { if off.is_enabled() { panic!() } ready })`, 1.011–1.022.
//! Then the start was asked, before the breaker's unwind guard, whether
//! it had anything to do (`before`: the start's stage, and the flag while
//! fresh), running it out of line only then: 26 instructions added,
//! 1.067. **The submitted build** asks `before` at the top of the call's
//! poll, and a start that has something to do takes a copy of the whole
//! poll of its own, out of line: the plain poll gains one branch and a
//! call in tail position, with nothing kept across it. 14 instructions
//! added, **1.044** in two runs (the plain call 21.8 ns, `call_injected`
//! 22.8 ns, `inject` 1.142), and a third, 1.044; with functions and
//! branch targets aligned as above, 1.032 in two runs. Enabled at rate 0
//! the out-of-line copy costs a little: 1.624 against `inject`'s 1.558.
//!
//! How to read it:
//!
//! - **Disabled, `call_injected` costs 1.04× a policy call that does
//!   nothing else (1 ns, 14 instructions): within the 1.05× aimed for.**
//!   The policy polls the call's own future; what is added is the start's
//!   stage and the flag, read at the top of each poll, and a branch to the
//!   out-of-line copy of the poll that a start with something to do takes.
//!   Earlier forms, with the start's work inside the plain poll, cost
//!   1.03–1.09× by code layout: registers saved around a call that
//!   returns into it. An injected
//!   latency sleeps in the policy's slot-wait sleep, idle once the call
//!   starts, so the future keeps no room for a sleep of its own.
//! - **Through `inject`, a wrapper future, 1.09–1.14× (2–3 ns).** The
//!   wrapper is built, moved and dropped inside the policy's future, and
//!   keeps room for a latency's sleep: 40 bytes more in the policy's
//!   future on `ManualClock`. Its pass path is one compare on the first
//!   poll (the faulted paths are out of line: 1.10× before, in the first
//!   layout). `inject` is the form for any future (retried, hedged, or no
//!   policy at all).
//! - Against any call that leaves the process either is noise: the plain
//!   loopback HTTP round trip of [deadlines across the
//!   wire](#deadlines-across-the-wire) is 45 µs, 15 000 times the 2–3 ns of `inject`.
//!   Leave an injector in a build disabled, and turn it on for a game day.
//! - Enabled at rate 0, each call takes its draw and is counted: two
//!   atomic read-modify-writes, about 10–13 ns here: 1.56× the bare
//!   policy call through `inject`, 1.62× through `call_injected` (whose
//!   enabled calls take the out-of-line poll). That is the
//!   price of every call's being counted and replayable while the injector
//!   is on.
//!
//! # Stale-if-error cache
//!
//! ```sh
//! cargo bench --bench stale -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! [`StaleCache`](crate::fallback::StaleCache)'s fixed table (`u64` keys
//! and values, 128 sets of 8: 1,024 keys; std's `RandomState`, and
//! `FnvState` to show what the hash costs) beside quick_cache 0.7's and
//! mini-moka 0.10's `sync::Cache` of 1,024 entries holding
//! `(value, Instant)` and computing the age on a hit, as ours does. One
//! thread; ns per operation, three runs on the shared 2-core machine while
//! other builds ran (so the absolute numbers are high and noisy; read the
//! ratios within a run):
//!
//! | operation | ours | ours, FNV | quick_cache | mini-moka |
//! |---|---|---|---|---|
//! | record, 1,024 keys held (replace) | 107 / 128 / 146 | — / — / 193 | 103 / 132 / 111 | 889 / 505 / 969 |
//! | record over 4,096 keys (evicting) | 120 / 108 / 144 | — / — / 117 | 144 / 137 / 219 | 1,033 / 939 / 1,184 |
//! | serve one of 896 keys held | 141 / 147 / 162 | — / — / 182 | 119 / 120 / 183 | 699 / 674 / 877 |
//!
//! How to read it: ours and quick_cache are on par — within 0.8–1.3× of
//! each other either way from run to run, ours ahead when most records
//! evict, quick_cache ahead on a lookup in two runs of three; mini-moka is
//! 4–8× slower than both (its `sync::Cache` records every read and write
//! for its TinyLFU policy). Neither crate is faster by a margin that pays
//! for a dependency, and neither builds without `std` or holds its entries
//! without allocating; so the table is the one implementation, with `std`
//! and without. The FNV column did not beat SipHash beyond the noise here:
//! the hash is not where the time goes at this load.
