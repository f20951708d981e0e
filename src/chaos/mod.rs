//! Fault injection (feature `chaos`): errors, outcomes, latency and hangs
//! at a rate, from a seeded sequence, to prove that a policy does what it
//! should when the system behind it misbehaves.
//!
//! An [`Injector`] stands in front of a call — any future
//! ([`inject`](Injector::inject), [`call`](Injector::call)), a policy's call
//! where it starts ([`Policy::call_injected`](crate::policy::Policy::call_injected)),
//! or a tower service (`tower::ChaosLayer`, features `chaos` and `tower`) — and, per
//! call, either lets it through untouched or injects one [`Fault`]:
//!
//! | fault | what the caller sees | the call |
//! |---|---|---|
//! | [`Error`](Fault::Error) | the configured error value, at once | not made |
//! | [`Outcome`](Fault::Outcome) | the configured value, at once (an `Ok(503)`, say) | not made |
//! | [`Latency`](Fault::Latency) | the call's own result, after the configured latency, slept on the injector's clock (the policy's, through `call_injected`) | made, polled after the sleep |
//! | [`Hang`](Fault::Hang) | nothing, ever: the future stays pending until the caller's deadline drops it | not made |
//!
//! It is the shape of Polly's Simmy strategies (fault, outcome, latency,
//! behaviour, each at an injection rate) and of Envoy's fault filter (abort
//! and delay percentages), with one difference that makes it a test tool:
//! **the draws come from a seed**, on any [`Timer`] clock, so on
//! [`ManualClock`](crate::clock::ManualClock) the same seed gives the same
//! faults in the same order, and a latency is a clock advance, not a real
//! sleep. [The resilience test kit](crate::guide::chaos) shows how to test
//! a policy with it.
//!
//! # Rates and the draw
//!
//! Each rate is a probability per call, kept to the part per million. One
//! draw per call decides, by which slice of a million it falls in: errors
//! first, then outcomes, latencies, hangs, and the rest passes. So a call
//! gets at most one fault and the rates add up to at most 1 (the config
//! refuses more).
//!
//! The draws are the retries' jitter sequence ([`Jitter`]: SplitMix64 over
//! one atomic counter, each draw one `fetch_add`), scaled to a million by a
//! multiply and a shift.
//!
//! # Determinism
//!
//! A call takes the next draw of the injector's sequence when it is
//! injected (at [`inject`](Injector::inject), [`call`](Injector::call),
//! [`draw`](Injector::draw), or the tower service's `call`), not when it is
//! polled. So:
//!
//! - **one caller, or callers one after another** (a test on
//!   `ManualClock`, a single-threaded executor driving calls in a fixed
//!   order): the same seed gives exactly the same faults in the same order,
//!   on every run and every machine;
//! - **concurrent callers** share the one sequence: no draw is taken twice
//!   and none is skipped (each is one atomic `fetch_add`, checked by the
//!   loom model in `tests/loom/chaos.rs`), so the faults of the first *n*
//!   calls are the same multiset on every run, but which caller gets which
//!   depends on the order their calls land in. Give each concurrent caller
//!   an injector of its own for a per-caller replay.
//!
//! While disabled, an injector takes no draw: disabling for some calls
//! shifts the later faults along the sequence (they are the same faults, to
//! later calls).
//!
//! # Cost
//!
//! Disabled: one relaxed load and a branch. Through
//! [`Policy::call_injected`](crate::policy::Policy::call_injected) that is
//! all — the policy polls the call's own future —, 1.04× a policy call
//! on `ManualClock` that does nothing else (14 instructions, about 1 ns);
//! through [`inject`](Injector::inject) the call also sits in a wrapper
//! future, 1.09–1.14× ([the table](crate::guide::benchmarks#fault-injection)). Nothing
//! beside a call that leaves the process. Enabled: one
//! `fetch_add` for the draw and one for the counter. Nothing allocates, and
//! nothing here needs `std`.
//!
//! # Examples
//!
//! ```
//! use watertight::chaos::{ChaosConfig, Fault, Injector};
//! use watertight::clock::ManualClock;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let config = ChaosConfig::builder()
//!     .error(0.2, || Err("pricing: connection reset"))
//!     .outcome(0.1, || Ok(503))
//!     .seed(7)
//!     .build()
//!     .unwrap();
//! let chaos = Injector::new("pricing", config, &clock);
//!
//! let mut seen = Vec::new();
//! for _ in 0..10 {
//!     seen.push(chaos.inject(async { Ok::<u16, &str>(200) }).await);
//! }
//! // The same seed, the same ten answers, on every run.
//! let again = Injector::new("pricing", config, &clock);
//! for answer in &seen {
//!     assert_eq!(again.inject(async { Ok(200) }).await, *answer);
//! }
//! let m = chaos.metrics();
//! assert_eq!(m.injected(Fault::Error) + m.injected(Fault::Outcome) + m.passed, 10);
//! # });
//! ```

use core::fmt;
use core::future::Future;
#[cfg(feature = "tracing")]
use core::time::Duration;

use crate::clock::Timer;
use crate::retry::Jitter;
use crate::sync::{AtomicBool, AtomicUsize, Ordering::Relaxed};

mod config;
mod future;

pub use config::{ChaosConfig, ChaosConfigBuilder, ChaosConfigError};
pub use future::Inject;

/// One kind of injected fault.
///
/// # Examples
///
/// ```
/// use watertight::chaos::Fault;
/// assert_eq!(Fault::ALL.map(Fault::label), ["error", "outcome", "latency", "hang"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The configured error, in place of the call's result.
    Error = 0,
    /// The configured outcome (a value the call could have returned), in
    /// place of the call's result.
    Outcome = 1,
    /// The configured latency, then the call.
    Latency = 2,
    /// Never completes: the caller's deadline must cut it.
    Hang = 3,
}

impl Fault {
    /// Every fault, in the order their slices of a draw are laid out.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::Fault;
    /// assert_eq!(Fault::ALL[0], Fault::Error);
    /// ```
    pub const ALL: [Fault; 4] = [Fault::Error, Fault::Outcome, Fault::Latency, Fault::Hang];

    /// Its name in metrics and events: `error`, `outcome`, `latency`,
    /// `hang`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::Fault;
    /// assert_eq!(Fault::Hang.label(), "hang");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            Fault::Error => "error",
            Fault::Outcome => "outcome",
            Fault::Latency => "latency",
            Fault::Hang => "hang",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A snapshot of an [`Injector`]'s counters: the faults injected, by kind,
/// and the calls it let through while enabled (calls made while it was
/// disabled are not counted).
///
/// # Examples
///
/// ```
/// use watertight::chaos::{ChaosMetrics, Fault};
/// let m = ChaosMetrics::default();
/// assert_eq!((m.injected(Fault::Hang), m.passed, m.total_injected()), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChaosMetrics {
    /// Faults injected, indexed by [`Fault`] (`Fault::Error as usize`, …);
    /// [`injected`](Self::injected) reads one.
    pub injected: [usize; 4],
    /// Calls let through untouched while enabled.
    pub passed: usize,
    /// Whether the injector was enabled when the snapshot was taken.
    pub enabled: bool,
}

impl ChaosMetrics {
    /// The faults of one kind injected.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos = Injector::new("x", ChaosConfig::<()>::builder().hang(1.0).build().unwrap(), &clock);
    /// let _ = chaos.draw();
    /// assert_eq!(chaos.metrics().injected(Fault::Hang), 1);
    /// ```
    pub const fn injected(&self, fault: Fault) -> usize {
        self.injected[fault as usize]
    }

    /// All faults injected.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::ChaosMetrics;
    /// assert_eq!(ChaosMetrics::default().total_injected(), 0);
    /// ```
    pub const fn total_injected(&self) -> usize {
        self.injected[0]
            .wrapping_add(self.injected[1])
            .wrapping_add(self.injected[2])
            .wrapping_add(self.injected[3])
    }
}

/// Injects faults into the calls to one system, at the rates of its
/// [`ChaosConfig`], from a seeded sequence, on the clock `C`; `O` is the
/// calls' output (a `Result`, usually), whose injected errors and outcomes
/// the config makes.
///
/// See [the module](self) for the faults, the draw and what is
/// deterministic. Enabled and disabled at run time
/// ([`set_enabled`](Self::set_enabled)) through one atomic flag, so an
/// injector can stay in a build and be switched on for a game day.
///
/// # Memory ordering
///
/// Everything is `Relaxed`: the flag, the draws' counter and the fault
/// counters each stand alone and publish no other memory. A call that
/// races [`set_enabled`](Self::set_enabled) sees the flag before or after
/// the change; either way it draws at most once and is counted once.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::chaos::{ChaosConfig, Injector};
/// use watertight::clock::ManualClock;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let config = ChaosConfig::builder()
///     .latency(1.0, Duration::from_millis(250))
///     .build()
///     .unwrap();
/// let chaos = Injector::new("search", config, &clock);
///
/// let slow = chaos.inject(async { 7 });
/// futures_lite::pin!(slow);
/// assert!(futures_lite::future::poll_once(&mut slow).await.is_none()); // sleeping
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(slow.await, 7);
/// # });
/// ```
pub struct Injector<C, O> {
    config: ChaosConfig<O>,
    rng: Jitter,
    enabled: AtomicBool,
    injected: [AtomicUsize; 4],
    passed: AtomicUsize,
    name: &'static str,
    clock: C,
}

impl<C, O> Injector<C, O> {
    /// An injector named `name` (the `system` of its metrics and events),
    /// injecting by `config`, sleeping its latencies on `clock`. Its draws
    /// start from the config's seed or, with none, from a seed made as a
    /// [`Policy`](crate::Policy)'s jitter seed is (random per injector with
    /// `std`, the name's hash without).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Injector};
    /// use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// assert_eq!(chaos.name(), "db");
    /// assert!(chaos.is_enabled());
    /// ```
    pub fn new(name: &'static str, config: ChaosConfig<O>, clock: C) -> Self {
        // The policy's seed rule, so the crate has one (the throttle uses
        // it too); a seeded config never reaches it.
        let seed = match config.seed {
            Some(s) => s,
            None => crate::policy::default_seed(name),
        };
        Injector {
            rng: Jitter::new(seed),
            enabled: AtomicBool::new(config.enabled),
            injected: [
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            ],
            passed: AtomicUsize::new(0),
            config,
            name,
            clock,
        }
    }

    /// The name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// assert_eq!(chaos.name(), "db");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The config.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::<()>::builder().hang(0.5).build().unwrap();
    /// let chaos = Injector::new("db", config, &clock);
    /// assert_eq!(chaos.config().rate_ppm(Fault::Hang), 500_000);
    /// ```
    pub fn config(&self) -> &ChaosConfig<O> {
        &self.config
    }

    /// The clock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// assert!(core::ptr::eq(*chaos.clock(), &clock));
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Turns injection on or off, for every call that starts after (one
    /// relaxed store). Off, calls pass untouched, take no draw and are not
    /// counted.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().error(1.0, || Err(())).build().unwrap();
    /// let chaos = Injector::new("db", config, &clock);
    /// chaos.set_enabled(false);
    /// assert_eq!(futures_lite::future::block_on(chaos.inject(async { Ok(1) })), Ok(1));
    /// chaos.set_enabled(true);
    /// assert_eq!(futures_lite::future::block_on(chaos.inject(async { Ok(1) })), Err(()));
    /// ```
    #[inline]
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Relaxed);
    }

    /// [`set_enabled(true)`](Self::set_enabled).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::<()>::builder().enabled(false).build().unwrap();
    /// let chaos = Injector::new("db", config, &clock);
    /// chaos.enable();
    /// assert!(chaos.is_enabled());
    /// ```
    #[inline]
    pub fn enable(&self) {
        self.set_enabled(true);
    }

    /// [`set_enabled(false)`](Self::set_enabled).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// chaos.disable();
    /// assert!(!chaos.is_enabled());
    /// ```
    #[inline]
    pub fn disable(&self) {
        self.set_enabled(false);
    }

    /// Whether injection is on.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let chaos: Injector<_, ()> = Injector::new("db", ChaosConfig::builder().build().unwrap(), &clock);
    /// assert!(chaos.is_enabled());
    /// ```
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    /// Decides the next call's fault, counting it: `None` to let the call
    /// through (counted as passed while enabled; not counted, and no draw
    /// taken, while disabled). For code that is not a future — a
    /// synchronous call, a fault of your own kind ("behaviour" in Simmy's
    /// words) — or to decide before building the call.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// use watertight::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::<()>::builder().hang(0.5).seed(3).build().unwrap();
    /// let chaos = Injector::new("cache", config, &clock);
    /// let hangs = (0..1000).filter(|_| chaos.draw() == Some(Fault::Hang)).count();
    /// assert!((400..600).contains(&hangs));
    /// assert_eq!(chaos.metrics().passed, 1000 - hangs);
    /// ```
    #[inline]
    pub fn draw(&self) -> Option<Fault> {
        if !self.enabled.load(Relaxed) {
            return None;
        }
        self.draw_enabled()
    }

    #[inline(never)]
    fn draw_enabled(&self) -> Option<Fault> {
        // Uniform in [0, 1 000 000): a multiply and a shift (the jitter's
        // way), no division.
        let x = ((u128::from(self.rng.next_u64()) * u128::from(config::PPM)) >> 64) as u32;
        let mut edge = 0u32;
        for fault in Fault::ALL {
            edge += self.config.rates[fault as usize];
            if x < edge {
                self.injected[fault as usize].fetch_add(1, Relaxed);
                #[cfg(feature = "tracing")]
                trace_fault(self.name, fault, self.config.latency);
                return Some(fault);
            }
        }
        self.passed.fetch_add(1, Relaxed);
        None
    }

    /// The counters now: faults injected by kind, calls passed while
    /// enabled, and the flag. Each a separate relaxed read.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// # use watertight::clock::ManualClock;
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().error(1.0, || Err(())).build().unwrap();
    /// let chaos = Injector::new("db", config, &clock);
    /// let _ = futures_lite::future::block_on(chaos.inject(async { Ok(()) }));
    /// let m = chaos.metrics();
    /// assert_eq!((m.injected(Fault::Error), m.passed, m.enabled), (1, 0, true));
    /// ```
    pub fn metrics(&self) -> ChaosMetrics {
        ChaosMetrics {
            injected: [
                self.injected[0].load(Relaxed),
                self.injected[1].load(Relaxed),
                self.injected[2].load(Relaxed),
                self.injected[3].load(Relaxed),
            ],
            passed: self.passed.load(Relaxed),
            enabled: self.enabled.load(Relaxed),
        }
    }

    /// The value an error or outcome fault returns in place of the call's.
    #[inline]
    pub(crate) fn made(&self, fault: Fault) -> Option<O> {
        let make = match fault {
            Fault::Error => self.config.error,
            Fault::Outcome => self.config.outcome,
            Fault::Latency | Fault::Hang => None,
        };
        // A rate above zero comes with its maker (the builder sets both).
        make.map(|m| m())
    }
}

impl<C, O> Injector<C, O> {
    /// The configured latency of a [`Fault::Latency`].
    #[inline]
    pub(crate) fn latency(&self) -> core::time::Duration {
        self.config.latency
    }
}

impl<C: Timer, O> Injector<C, O> {
    /// Runs `fut` through the injector: decides its fault now (one draw,
    /// when enabled) and returns a future that is `fut` untouched, `fut`
    /// after the latency, the injected error or outcome in its place (`fut`
    /// dropped unpolled), or a hang (`fut` dropped unpolled).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Injector};
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().outcome(1.0, || Ok(503)).build().unwrap();
    /// let chaos = Injector::new("pricing", config, &clock);
    /// assert_eq!(chaos.inject(async { Ok::<u16, ()>(200) }).await, Ok(503));
    /// # });
    /// ```
    #[inline]
    pub fn inject<F>(&self, fut: F) -> Inject<F, C::Sleep, O>
    where
        F: Future<Output = O>,
    {
        self.call(move || fut)
    }

    /// Calls `op` through the injector: decides the fault first (one draw,
    /// when enabled), and calls `op` only if the call is to be made — when
    /// it passes, or after an injected latency (its future is made at once
    /// and polled once the latency is slept). An injected error, outcome or
    /// hang never calls `op`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::cell::Cell;
    /// use watertight::chaos::{ChaosConfig, Injector};
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().error(0.5, || Err("injected")).seed(11).build().unwrap();
    /// let chaos = Injector::new("pricing", config, &clock);
    /// let made = Cell::new(0);
    /// let mut injected = 0;
    /// for _ in 0..100 {
    ///     let r = chaos.call(|| { made.set(made.get() + 1); async { Ok::<_, &str>(()) } }).await;
    ///     injected += usize::from(r.is_err());
    /// }
    /// assert_eq!(made.get() + injected, 100); // an injected error is never a call
    /// # });
    /// ```
    #[inline]
    pub fn call<F, Fut>(&self, op: F) -> Inject<Fut, C::Sleep, O>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = O>,
    {
        match self.draw() {
            None => Inject::pass(op()),
            Some(fault) => self.faulted(fault, op),
        }
    }

    #[cold]
    fn faulted<F, Fut>(&self, fault: Fault, op: F) -> Inject<Fut, C::Sleep, O>
    where
        F: FnOnce() -> Fut,
    {
        match fault {
            Fault::Latency => {
                let until = self.clock.now().saturating_add(self.config.latency);
                Inject::delayed(self.clock.sleep_until(until), op())
            }
            Fault::Hang => Inject::hang(),
            Fault::Error | Fault::Outcome => match self.made(fault) {
                Some(out) => Inject::replaced(fault, out),
                // Not reached: the builder sets a rate above zero only
                // with its maker. Were it, the call would be made.
                None => Inject::pass(op()),
            },
        }
    }
}

impl<C, O> fmt::Debug for Injector<C, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("metrics", &self.metrics())
            .finish_non_exhaustive()
    }
}

/// The one event per injected fault (feature `tracing`), at DEBUG: faults
/// come at a rate of traffic, and the counters are what dashboards read.
#[cfg(feature = "tracing")]
#[cold]
fn trace_fault(system: &'static str, fault: Fault, latency: Duration) {
    if fault == Fault::Latency {
        tracing::debug!(
            target: "watertight::chaos",
            system,
            fault = fault.label(),
            latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            "chaos injected a fault"
        );
    } else {
        tracing::debug!(
            target: "watertight::chaos",
            system,
            fault = fault.label(),
            "chaos injected a fault"
        );
    }
}
