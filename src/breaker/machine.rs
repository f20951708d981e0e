//! The state machine: admission, recording, probes, generations and every
//! transition, on the state word (`word.rs`) and the window (`window.rs`).
//! A change to how the breaker moves between states is a change to this
//! file.

use core::time::Duration;

use super::config::{KIND_CONSECUTIVE, KIND_TIME};
use super::error::Rejection;
use super::permit::Raw;
use super::state::{OnTransition, State, Transition, Tripped};
use super::window::{Counts, Kind, Recorded, WindowStorage};
use super::word::{self, AtomicStamp, CLOSED, FORCED_OPEN, HALF_OPEN, OPEN};
use super::CircuitBreaker;
use crate::clock::{nanos, Clock, Instant};
use crate::sync::Ordering::*;

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> CircuitBreaker<C, N, H, W> {
    /// The state as the clock makes it, and, when the state word lags
    /// behind (the open wait is over but no probe has come yet, or a
    /// half-open episode ran out of time), when the state it reports began.
    pub(super) fn look(&self) -> Look {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            let settled = |bits| Look {
                state: State::from_bits(bits),
                lazy: None,
            };
            return match word::state(s) {
                OPEN => match self.began(s, now) {
                    Began::At(opened) if now >= opened.saturating_add(self.open_duration()) => {
                        Look {
                            state: State::HalfOpen,
                            lazy: Some(opened.saturating_add(self.open_duration())),
                        }
                    }
                    Began::Moved(current) => {
                        s = current;
                        continue;
                    }
                    _ => settled(OPEN),
                },
                HALF_OPEN if self.config.max_half_open_ns != 0 => {
                    match self.half_open_expiry(s, now) {
                        Expiry::At(expired) => {
                            let reopens = expired.saturating_add(self.open_duration());
                            if now < reopens {
                                Look {
                                    state: State::Open,
                                    lazy: Some(expired),
                                }
                            } else {
                                Look {
                                    state: State::HalfOpen,
                                    lazy: Some(reopens),
                                }
                            }
                        }
                        Expiry::Moved(current) => {
                            s = current;
                            continue;
                        }
                        Expiry::Not => settled(HALF_OPEN),
                    }
                }
                bits => settled(bits),
            };
        }
    }

    /// The clock: every read of the breaker's goes through here. Inlined
    /// for a clock whose read is a load ([`Clock::CHEAP_NOW`]: a
    /// `CoarseClock` read was one load inside a call, and the call was most
    /// of what slow-call timing cost: a closed call timed on the coarse
    /// clock took 77 instructions against 49 untimed, inlined 61), out of
    /// line for the others: on a microcontroller an inlined read is a
    /// critical section and a 64-bit multiplication, about 40 bytes of flash
    /// per call site, and inlining `StdClock`'s read made the untimed call
    /// (which reads no clock) 3 instructions longer for the registers it
    /// takes.
    #[inline(always)]
    pub(super) fn now(&self) -> Instant {
        if C::CHEAP_NOW {
            self.clock.now()
        } else {
            self.now_out_of_line()
        }
    }

    #[inline(never)]
    fn now_out_of_line(&self) -> Instant {
        self.clock.now()
    }

    fn open_duration(&self) -> Duration {
        hint(self.config.open_ns)
    }

    /// Whether generation `gen` is still the breaker's.
    #[inline]
    fn current(&self, generation: u32) -> bool {
        word::generation(self.state.load(Acquire)) == generation
    }

    /// When the state in word `s` began, as far as the stamp tells.
    #[inline]
    fn began(&self, s: u32, now: Instant) -> Began {
        match word::read(self.stamp.load(Acquire), word::generation(s), now) {
            Some(at) => Began::At(at),
            None => {
                // Either the transition into `s` has not published its stamp
                // yet, or the breaker has moved past `s` and the stamp is a
                // later generation's: a decision made on `s` would be stale.
                let current = self.state.load(Acquire);
                if word::generation(current) != word::generation(s) {
                    Began::Moved(current)
                } else {
                    Began::Unpublished
                }
            }
        }
    }

    /// For a half-open word `s` with a limit set: whether the episode has run
    /// out of time. It has when a probe is out (taken and not yet succeeded)
    /// and no probe has been admitted for `max_half_open_wait`.
    fn half_open_expiry(&self, s: u32, now: Instant) -> Expiry {
        if word::taken(s) <= word::succeeded(s) {
            return Expiry::Not;
        }
        let last = match word::read(self.admitted.load(Acquire), word::generation(s), now) {
            Some(at) => at,
            None => match self.began(s, now) {
                Began::At(at) => at,
                Began::Unpublished => return Expiry::Not,
                Began::Moved(current) => return Expiry::Moved(current),
            },
        };
        let expires =
            Instant::from_nanos(last.as_nanos().saturating_add(self.config.max_half_open_ns));
        if now >= expires {
            Expiry::At(expires)
        } else {
            Expiry::Not
        }
    }

    /// Notes that the half-open episode of generation `gen` admitted a probe
    /// at `now` (only with a limit set).
    fn note_admission(&self, generation: u32, now: Instant) {
        self.publish(&self.admitted, generation, word::stamp(generation, now));
    }

    /// Publishes `at` as the stamp of generation `gen` in `word`, unless the
    /// breaker has moved past `gen` (a later generation's stamp must not be
    /// overwritten by a late writer).
    fn publish(&self, word: &AtomicStamp, generation: u32, stamp: word::Stamp) {
        let mut old = word.load(Acquire);
        while old != stamp && self.current(generation) {
            match word.compare_exchange_weak(old, stamp, AcqRel, Acquire) {
                Ok(_) => break,
                Err(actual) => old = actual,
            }
        }
    }

    /// Counts a refusal (and reports it to `tracing`); out of line, as it is
    /// reached from four places of the slow path.
    #[inline(never)]
    fn reject(&self, why: Rejection) -> Rejection {
        self.rejected.fetch_add(1, Relaxed);
        // One event per refusal, at DEBUG: refusals come at the rate of
        // traffic (the counter above is what dashboards read).
        #[cfg(feature = "tracing")]
        // The breaker's module as the target, not this file's.
        tracing::debug!(
            target: "watertight::breaker",
            system = self.name,
            reason = match why {
                Rejection::Open { .. } => "open",
                Rejection::ProbesBusy => "probes_busy",
                Rejection::ForcedOpen => "forced_open",
            },
            retry_after_ms = why
                .retry_after()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "circuit breaker rejected a call"
        );
        why
    }

    /// The start of a call's duration, if slow-call detection is on.
    #[inline(always)]
    fn start(&self) -> Instant {
        if self.config.slow_ns != 0 {
            self.now()
        } else {
            Instant::from_nanos(0)
        }
    }

    /// Admits a call: the closed state inline, everything else out of line.
    ///
    /// The slow path returns an `Option<Raw>` (16 bytes: two registers) and
    /// writes a refusal through `why`, rather than returning the 24-byte
    /// `Result<Raw, Rejection>`, which goes through memory: the fast path
    /// then had to build its `Raw` in the same stack slot, field by field,
    /// and the caller's move of the permit out of it reloaded the 16 bytes
    /// in one wide load, which stalls on store forwarding (about 6 ns, when
    /// the caller's `Err` arm was live: `if let`, `match`, `call`).
    #[inline(always)]
    pub(super) fn acquire_raw(&self) -> Result<Raw, Rejection> {
        let s = self.state.load(Acquire);
        if word::state(s) == CLOSED {
            return Ok(Raw::new(self.start(), word::generation(s), false));
        }
        let mut why = Rejection::ProbesBusy;
        match self.acquire_slow(s, &mut why) {
            Some(raw) => Ok(raw),
            None => Err(why),
        }
    }

    /// Every state but closed: a permit, or `None` with the refusal in `why`.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, mut s: u32, why: &mut Rejection) -> Option<Raw> {
        loop {
            match word::state(s) {
                CLOSED => return Some(Raw::new(self.start(), word::generation(s), false)),
                FORCED_OPEN => {
                    *why = self.reject(Rejection::ForcedOpen);
                    return None;
                }
                OPEN => {
                    let now = self.now();
                    let opened = match self.began(s, now) {
                        Began::At(opened) => opened,
                        // Just opened by a thread that has not published the
                        // stamp yet: the whole wait is ahead (`open_ns` is
                        // never zero, so the refusal below follows).
                        Began::Unpublished => now,
                        Began::Moved(current) => {
                            s = current;
                            continue;
                        }
                    };
                    let ends = opened.as_nanos().saturating_add(self.config.open_ns);
                    if now.as_nanos() < ends {
                        *why = self.reject(Rejection::Open {
                            retry_after: hint(ends - now.as_nanos()),
                        });
                        return None;
                    }
                    // The wait is over: this call begins a half-open episode
                    // as its first probe.
                    let probing = word::with_taken(word::next(s, HALF_OPEN), 1);
                    match self.transition(s, probing, now) {
                        Ok(()) => {
                            return Some(Raw::new(
                                if self.config.slow_ns != 0 {
                                    now
                                } else {
                                    Instant::from_nanos(0)
                                },
                                word::generation(probing),
                                true,
                            ))
                        }
                        Err(actual) => s = actual,
                    }
                }
                HALF_OPEN => {
                    if self.config.max_half_open_ns != 0 {
                        match self.half_open_expiry(s, self.now()) {
                            Expiry::At(expired) => {
                                match self.transition(s, word::next(s, OPEN), expired) {
                                    Ok(()) => s = self.state.load(Acquire),
                                    Err(actual) => s = actual,
                                }
                                continue;
                            }
                            Expiry::Moved(current) => {
                                s = current;
                                continue;
                            }
                            Expiry::Not => {}
                        }
                    }
                    let taken = word::taken(s);
                    if taken >= self.config.half_open_calls as u32 {
                        *why = self.reject(Rejection::ProbesBusy);
                        return None;
                    }
                    let more = word::with_taken(s, taken + 1);
                    match self.state.compare_exchange_weak(s, more, AcqRel, Acquire) {
                        Ok(_) => {
                            let start = self.start();
                            if self.config.max_half_open_ns != 0 {
                                let now = if self.config.slow_ns != 0 {
                                    start
                                } else {
                                    self.now()
                                };
                                self.note_admission(word::generation(s), now);
                            }
                            return Some(Raw::new(start, word::generation(s), true));
                        }
                        Err(actual) => s = actual,
                    }
                }
                // DISABLED, the fifth state: admit and record nothing.
                _ => return Some(Raw::new(Instant::from_nanos(0), word::generation(s), false)),
            }
        }
    }

    /// Records the outcome of a permit: a plain success into a closed
    /// breaker's healthy window inline (it changes nothing), everything else
    /// out of line.
    #[inline(always)]
    pub(super) fn record(&self, raw: Raw, failed: bool) {
        let slow = self.config.slow_ns != 0
            && self.now().as_nanos().saturating_sub(raw.start.as_nanos()) > self.config.slow_ns;
        if !failed
            && !slow
            && self.state.load(Acquire) == word::make(CLOSED, raw.generation())
            && self
                .window
                .takes_plain_success_as_is(raw.generation(), self.config.plain_run as usize)
        {
            return;
        }
        self.record_slow(raw, Kind::new(failed, slow), failed, slow);
    }

    #[inline(never)]
    fn record_slow(&self, raw: Raw, kind: Kind, failed: bool, slow: bool) {
        // One increment for every way an outcome can turn out stale.
        if self.record_outcome(raw, kind, failed, slow) == Landed::Stale {
            self.stale.fetch_add(1, Relaxed);
        }
    }

    /// Records an outcome the inline check of `record` could not settle;
    /// says whether it was counted or came too late.
    #[inline(always)]
    fn record_outcome(&self, raw: Raw, kind: Kind, failed: bool, slow: bool) -> Landed {
        let s = self.state.load(Acquire);
        let state = word::state(s);
        if word::generation(s) != raw.generation() {
            return Landed::Stale;
        }
        // Disabled records nothing. Open and ForcedOpen hand out no permits,
        // so a permit of their generation cannot exist.
        if state != CLOSED && state != HALF_OPEN {
            return Landed::Yes;
        }
        if state == HALF_OPEN && self.config.max_half_open_ns != 0 {
            match self.half_open_expiry(s, self.now()) {
                Expiry::At(expired) => {
                    // The episode ran out before this probe came back: it
                    // reopens, and this outcome is too late.
                    let _ = self.transition(s, word::next(s, OPEN), expired);
                    return Landed::Stale;
                }
                Expiry::Moved(_) => {
                    return Landed::Stale;
                }
                Expiry::Not => {}
            }
        }
        // One call site for the window in either state: it is the largest
        // piece of the breaker's code (this matters on a microcontroller).
        // Only a breaker with bucket storage compiles the time window's code
        // (`BUCKETS` is a constant of the storage type).
        let consecutive = self.config.kind() == KIND_CONSECUTIVE;
        // A slow success fails a consecutive run only if told so.
        let fails = failed || (slow && (!consecutive || self.config.slow_calls_are_failures()));
        let recorded = if <W as super::window::sealed::Slots>::BUCKETS > 0
            && self.config.kind() == KIND_TIME
        {
            self.window.record_time(
                raw.generation(),
                kind,
                self.now().as_nanos(),
                self.config.time_spec(),
                self.config.minimum_calls as usize,
                || self.current(raw.generation()),
            )
        } else {
            // The count window, or (a size of 0) the consecutive run, which
            // takes an outcome as a failure or a success.
            let (kind, size) = if consecutive {
                (Kind::new(fails, false), 0)
            } else {
                (kind, self.config.window_size as usize)
            };
            self.window.record(raw.generation(), kind, size, || {
                self.current(raw.generation())
            })
        };
        let Some(recorded) = recorded else {
            return Landed::Stale;
        };
        if state == CLOSED {
            if let Recorded::Counted(counts) = recorded {
                if self.trips(counts) {
                    self.trip(s, counts);
                }
            }
            return Landed::Yes;
        }
        self.decide_probe(s, raw, fails)
    }

    /// Opens the closed breaker of word `s` on the window's `counts`.
    #[inline(always)]
    fn trip(&self, s: u32, counts: Counts) {
        let tripped = Tripped {
            window: self.config.window(),
            calls: counts.calls,
            failures: counts.failures,
            slow: counts.slow,
        };
        let _ = self.transition_why(s, word::next(s, OPEN), self.now(), Some(tripped));
    }

    /// A half-open probe of word `s`: it decides the episode, or adds to
    /// its successes. `failed` is a failure, or a slow call (for
    /// consecutive failures, one that counts as a failure).
    #[inline(always)]
    fn decide_probe(&self, mut s: u32, raw: Raw, failed: bool) -> Landed {
        loop {
            if word::generation(s) != raw.generation() {
                // Another probe decided the episode meanwhile.
                return Landed::Stale;
            }
            let decided = if failed {
                word::next(s, OPEN)
            } else {
                let succeeded = word::succeeded(s) + 1;
                if succeeded >= self.config.half_open_calls as u32 {
                    word::next(s, CLOSED)
                } else {
                    word::with_succeeded(s, succeeded)
                }
            };
            let result = if word::generation(decided) != raw.generation() {
                self.transition(s, decided, self.now())
            } else {
                self.state
                    .compare_exchange_weak(s, decided, AcqRel, Acquire)
                    .map(drop)
            };
            match result {
                Ok(()) => return Landed::Yes,
                Err(actual) => s = actual,
            }
        }
    }

    /// Gives back the half-open slot of a probe that brought no outcome.
    pub(super) fn release(&self, raw: Raw) {
        if !raw.is_probe() {
            return;
        }
        let mut s = self.state.load(Acquire);
        if word::generation(s) == raw.generation()
            && word::state(s) == HALF_OPEN
            && self.config.max_half_open_ns != 0
        {
            match self.half_open_expiry(s, self.now()) {
                Expiry::At(expired) => {
                    // The episode ran out while this probe was out: it
                    // reopens, and giving the slot back cannot revive it.
                    let _ = self.transition(s, word::next(s, OPEN), expired);
                    return;
                }
                Expiry::Moved(_) => return,
                Expiry::Not => {}
            }
        }
        while word::generation(s) == raw.generation()
            && word::state(s) == HALF_OPEN
            && word::taken(s) > 0
        {
            let fewer = word::with_taken(s, word::taken(s) - 1);
            match self.state.compare_exchange_weak(s, fewer, AcqRel, Acquire) {
                Ok(_) => return,
                Err(actual) => s = actual,
            }
        }
    }

    /// Whether the window's numbers trip the breaker.
    #[inline]
    fn trips(&self, c: Counts) -> bool {
        if self.config.kind() == KIND_CONSECUTIVE {
            return c.failures >= self.config.param();
        }
        let calls = c.calls as u64;
        if calls == 0 || calls < self.config.minimum_calls as u64 {
            return false;
        }
        c.failures as u64 * 10_000 >= self.config.failure_bp as u64 * calls
            || (self.config.slow_ns != 0
                && c.slow as u64 * 10_000 >= self.config.slow_bp as u64 * calls)
    }

    /// Empties the window and closes, from any state: a transition, but
    /// from Closed (a new generation and window, no change of state).
    pub(super) fn close(&self) {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            match self.transition(s, word::next(s, CLOSED), now) {
                Ok(()) => return,
                Err(actual) => s = actual,
            }
        }
    }

    /// Moves to `to` (an operator's switch); false if already there.
    pub(super) fn switch_to(&self, to: u32) -> bool {
        let mut s = self.state.load(Acquire);
        let now = self.now();
        loop {
            if word::state(s) == to {
                return false;
            }
            match self.transition(s, word::next(s, to), now) {
                Ok(()) => return true,
                Err(actual) => s = actual,
            }
        }
    }

    /// One transition: a single CAS of the state word from `from` to `to`
    /// (a word of the next generation); the winner then publishes when it
    /// happened, installs or freezes the window, and tells the listener.
    fn transition(&self, from: u32, to: u32, at: Instant) -> Result<(), u32> {
        self.transition_why(from, to, at, None)
    }

    /// [`transition`](Self::transition), saying what the window tripped on.
    fn transition_why(
        &self,
        from: u32,
        to: u32,
        at: Instant,
        tripped: Option<Tripped>,
    ) -> Result<(), u32> {
        self.state.compare_exchange(from, to, AcqRel, Acquire)?;
        let generation = word::generation(to);
        let current = || self.current(generation);
        // A reset of a closed breaker changes no state: a new generation and
        // an empty window, but no new transition time (a closed state's
        // stamp is never read but for `last_transition`) and nothing to tell.
        let changed = word::state(from) != word::state(to);
        let (stamp, at) = word::stamp_and_floor(generation, at);
        if changed {
            self.publish(&self.stamp, generation, stamp);
        }
        match word::state(to) {
            CLOSED | HALF_OPEN => self.window.install(generation, current),
            _ => self.window.freeze(current),
        }
        if !changed {
            return Ok(());
        }
        self.listener.on_transition(&Transition {
            name: self.name,
            from: State::from_bits(word::state(from)),
            to: State::from_bits(word::state(to)),
            at,
            tripped,
        });
        // One event per transition, by the thread that made it; a trip
        // says which window opened the breaker and on what numbers.
        #[cfg(feature = "tracing")]
        {
            let (from, to) = (
                State::from_bits(word::state(from)).as_str(),
                State::from_bits(word::state(to)).as_str(),
            );
            match tripped {
                Some(t) => tracing::info!(
                    target: "watertight::breaker",
                    system = self.name,
                    from,
                    to,
                    window = t.window.name(),
                    calls = t.calls,
                    failures = t.failures,
                    slow = t.slow,
                    "circuit breaker state changed"
                ),
                None => tracing::info!(
                    target: "watertight::breaker",
                    system = self.name,
                    from,
                    to,
                    "circuit breaker state changed"
                ),
            }
        }
        Ok(())
    }
}

/// A retry hint of `ns` nanoseconds. Out of line: the conversion is a
/// dozen multiplications on a 32-bit target, and two refusals need it.
#[inline(never)]
fn hint(ns: u64) -> Duration {
    nanos::duration(ns)
}

/// Whether an outcome was taken (or, in Disabled, deliberately not), or
/// arrived after the breaker had moved on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landed {
    Yes,
    Stale,
}

/// The state as [`CircuitBreaker::state`](super::CircuitBreaker::state) reports it and, when the state
/// word lags behind the clock, when that state began.
#[derive(Debug, Clone, Copy)]
pub(super) struct Look {
    pub(super) state: State,
    pub(super) lazy: Option<Instant>,
}

/// What the stamp says about when a state began.
#[derive(Debug, Clone, Copy)]
enum Began {
    At(Instant),
    /// The transition into the state has not published its stamp yet.
    Unpublished,
    /// The breaker has moved on to this state word.
    Moved(u32),
}

/// Whether a half-open episode has run out of time.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    Not,
    At(Instant),
    /// The breaker has moved on to this state word.
    Moved(u32),
}
