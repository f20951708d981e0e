//! Hedged requests: when a call has not answered by the hedge delay, send
//! the same (idempotent) call again and take the first answer.
//!
//! The slowest calls to a replicated system are usually calls that met one
//! slow replica, not a slow system. "The Tail at Scale" (Dean & Barroso)
//! cut a p99.9 from 1,800 ms to 74 ms by sending a second request once the
//! first had been out for the 95th-percentile latency, for about 2 % more
//! load. This module holds the pieces; [`Policy::call_hedged`](crate::Policy::call_hedged)
//! runs the attempts through the policy's layers:
//!
//! - [`LatencyHistogram`]: recent latencies in log buckets of atomic
//!   counters, windowed by count, for the delay's percentile; usable on its
//!   own.
//! - [`HedgeConfig`]: the delay (fixed, or a [`Percentile`] of the
//!   histogram), how many hedges a call may send (1 by default), the
//!   budget.
//! - [`HedgeBudget`]: what stops hedging from multiplying the load when
//!   the whole system is slow.
//! - [`Hedge`]: one per system, the three together with the counts
//!   (`hedges_total{system,outcome}`).
//!
//! # The budget is its own
//!
//! Not the retry budget: a hedge is spent *before* anything failed, on a
//! healthy system whose tail is slow, about `100 − p` percent of the calls
//! all day long; a retry is spent on failures, rarely, and all at once in
//! an outage. In one bucket, steady hedging would keep the retry budget
//! drained down to its threshold (so a real failure finds no retry), and an
//! outage's failures would stop hedges on the replicas that are still
//! fine. Each gets its own rate: the hedge budget is a token bucket that
//! each hedge sent spends one token of and each successful hedged call
//! refills by `ratio` (10 % by default), so in the long run hedges are at
//! most `ratio` of the calls, plus the bucket's size at once. An exhausted
//! budget only stops **new** hedges: attempts already sent run to their
//! end (failsafe-go#141 cancelled them).

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

mod histogram;

pub use histogram::{LatencyHistogram, Percentile, PercentileError};

/// When a hedge is sent: a fixed time after the first attempt started, or
/// a percentile of the recent latencies of the system's calls.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::hedge::{HedgeDelay, Percentile};
///
/// let fixed = HedgeDelay::Fixed(Duration::from_millis(40));
/// let tail = HedgeDelay::Percentile(Percentile::P95);
/// assert_ne!(fixed, tail);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeDelay {
    /// This long after the first attempt started (and again after each
    /// hedge, up to `max_hedges`).
    Fixed(Duration),
    /// The percentile of the [`Hedge`]'s histogram, read when the call
    /// starts. While the histogram holds fewer than the config's
    /// `min_samples`, calls are not hedged: a tail of a few samples is not
    /// a tail.
    Percentile(Percentile),
}

/// How a system's calls are hedged.
///
/// Defaults: the delay at the 95th percentile ("The Tail at Scale"), one
/// hedge per call, no percentile before 100 samples, a histogram window of
/// 1000 calls, a budget of 10 tokens refilled by 10 % of a token per
/// successful call.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::hedge::{HedgeConfig, HedgeDelay, Percentile};
///
/// let config = HedgeConfig::builder().build().unwrap();
/// assert_eq!(config.delay(), HedgeDelay::Percentile(Percentile::P95));
/// assert_eq!(config.max_hedges(), 1);
///
/// let fixed = HedgeConfig::builder()
///     .delay(HedgeDelay::Fixed(Duration::from_millis(30)))
///     .max_hedges(2)
///     .build()
///     .unwrap();
/// assert_eq!(fixed.max_hedges(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgeConfig {
    delay: HedgeDelay,
    max_hedges: u8,
    min_samples: u32,
    window: u32,
    budget_max_tokens: u32,
    budget_ratio_milli: u32,
}

/// The most hedges one call may send: its future holds room for the first
/// attempt and this many more, inline.
pub const MAX_HEDGES: u8 = 3;

/// The most tokens a hedge budget holds (so that thousandths fit a `u32`).
const MAX_TOKENS: u32 = 1_000_000;

impl HedgeConfig {
    /// The defaults: see [`HedgeConfig`].
    pub const DEFAULT: HedgeConfig = match HedgeConfig::builder().build() {
        Ok(c) => c,
        Err(_) => panic!("the default hedge config is valid"),
    };

    /// A builder with the defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = watertight::hedge::HedgeConfig::builder().min_samples(20).build().unwrap();
    /// assert_eq!(c.min_samples(), 20);
    /// ```
    pub const fn builder() -> HedgeConfigBuilder {
        HedgeConfigBuilder {
            delay: HedgeDelay::Percentile(Percentile::P95),
            max_hedges: 1,
            min_samples: 100,
            window: 1000,
            budget_max_tokens: 10,
            budget_ratio_percent: 10.0,
        }
    }

    /// When a hedge is sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::*;
    /// assert_eq!(HedgeConfig::DEFAULT.delay(), HedgeDelay::Percentile(Percentile::P95));
    /// ```
    pub const fn delay(&self) -> HedgeDelay {
        self.delay
    }

    /// Hedges one call may send (1 to [`MAX_HEDGES`]).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeConfig::DEFAULT.max_hedges(), 1);
    /// ```
    pub const fn max_hedges(&self) -> u8 {
        self.max_hedges
    }

    /// Samples the histogram must hold before a percentile delay is used.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeConfig::DEFAULT.min_samples(), 100);
    /// ```
    pub const fn min_samples(&self) -> u32 {
        self.min_samples
    }

    /// The histogram's window, in calls.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeConfig::DEFAULT.window(), 1000);
    /// ```
    pub const fn window(&self) -> u32 {
        self.window
    }

    /// The budget's size in tokens.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeConfig::DEFAULT.budget_max_tokens(), 10);
    /// ```
    pub const fn budget_max_tokens(&self) -> u32 {
        self.budget_max_tokens
    }

    /// The share of a token each successful call gives back, in percent
    /// (to the 0.1 % below what was asked).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeConfig::DEFAULT.budget_ratio_percent(), 10.0);
    /// ```
    pub fn budget_ratio_percent(&self) -> f32 {
        self.budget_ratio_milli as f32 / 10.0
    }
}

/// Builds a [`HedgeConfig`]; [`build`](Self::build) checks it.
///
/// # Examples
///
/// ```
/// use watertight::hedge::{HedgeConfig, HedgeDelay, Percentile};
/// let c = HedgeConfig::builder()
///     .delay(HedgeDelay::Percentile(Percentile::P99))
///     .budget(20, 5.0)
///     .window(500)
///     .build()
///     .unwrap();
/// assert_eq!((c.budget_max_tokens(), c.window()), (20, 500));
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct HedgeConfigBuilder {
    delay: HedgeDelay,
    max_hedges: u8,
    min_samples: u32,
    window: u32,
    budget_max_tokens: u32,
    budget_ratio_percent: f32,
}

impl HedgeConfigBuilder {
    /// When a hedge is sent (the 95th percentile by default).
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::hedge::*;
    /// let c = HedgeConfig::builder().delay(HedgeDelay::Fixed(Duration::from_millis(5))).build().unwrap();
    /// assert_eq!(c.delay(), HedgeDelay::Fixed(Duration::from_millis(5)));
    /// ```
    pub const fn delay(mut self, delay: HedgeDelay) -> Self {
        self.delay = delay;
        self
    }

    /// Hedges one call may send, 1 (the default) to [`MAX_HEDGES`]: the
    /// first after one delay, the next after two, and so on.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::*;
    /// assert!(HedgeConfig::builder().max_hedges(0).build().is_err());
    /// assert!(HedgeConfig::builder().max_hedges(MAX_HEDGES).build().is_ok());
    /// ```
    pub const fn max_hedges(mut self, n: u8) -> Self {
        self.max_hedges = n;
        self
    }

    /// Samples the histogram must hold before a percentile delay is used
    /// (100 by default); fewer, and calls are not hedged.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::*;
    /// assert_eq!(HedgeConfig::builder().min_samples(0).build().unwrap().min_samples(), 0);
    /// ```
    pub const fn min_samples(mut self, n: u32) -> Self {
        self.min_samples = n;
        self
    }

    /// The histogram's window in calls (1000 by default): percentiles rest
    /// on the last `window` to `2 × window` calls.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::*;
    /// assert!(HedgeConfig::builder().window(0).build().is_err());
    /// ```
    pub const fn window(mut self, calls: u32) -> Self {
        self.window = calls;
        self
    }

    /// The budget: `max_tokens` (10 by default) and the share of a token
    /// each successful call gives back, in percent (10 % by default; 0.1 %
    /// to 100 %).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::*;
    /// let c = HedgeConfig::builder().budget(50, 2.5).build().unwrap();
    /// assert_eq!(c.budget_ratio_percent(), 2.5);
    /// ```
    pub const fn budget(mut self, max_tokens: u32, ratio_percent: f32) -> Self {
        self.budget_max_tokens = max_tokens;
        self.budget_ratio_percent = ratio_percent;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`HedgeConfigError`]: `max_hedges` of 0 or above [`MAX_HEDGES`], a
    /// fixed delay of zero, a window of 0, a budget of 0 tokens or above
    /// 1 000 000, a ratio outside 0.1–100 % (or not a number).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::hedge::{HedgeConfig, HedgeConfigError, HedgeDelay};
    /// let err = HedgeConfig::builder().delay(HedgeDelay::Fixed(Duration::ZERO)).build();
    /// assert_eq!(err.unwrap_err(), HedgeConfigError::DelayZero);
    /// ```
    pub const fn build(self) -> Result<HedgeConfig, HedgeConfigError> {
        if self.max_hedges == 0 || self.max_hedges > MAX_HEDGES {
            return Err(HedgeConfigError::MaxHedges {
                max_hedges: self.max_hedges,
            });
        }
        if let HedgeDelay::Fixed(d) = self.delay {
            if d.is_zero() {
                return Err(HedgeConfigError::DelayZero);
            }
        }
        if self.window == 0 {
            return Err(HedgeConfigError::WindowZero);
        }
        if self.budget_max_tokens == 0 || self.budget_max_tokens > MAX_TOKENS {
            return Err(HedgeConfigError::BudgetTokens {
                max_tokens: self.budget_max_tokens,
            });
        }
        let r = self.budget_ratio_percent;
        // `!(a <= r && r <= b)` also refuses NaN.
        if !(0.1 <= r && r <= 100.0) {
            return Err(HedgeConfigError::BudgetRatio { percent: r });
        }
        // Thousandths of a token, rounded down: never more than asked.
        let milli = (r * 10.0) as u32;
        Ok(HedgeConfig {
            delay: self.delay,
            max_hedges: self.max_hedges,
            min_samples: self.min_samples,
            window: self.window,
            budget_max_tokens: self.budget_max_tokens,
            budget_ratio_milli: if milli == 0 { 1 } else { milli },
        })
    }
}

/// A [`HedgeConfig`] that [`build`](HedgeConfigBuilder::build) refused.
///
/// # Examples
///
/// ```
/// use watertight::hedge::{HedgeConfig, HedgeConfigError};
/// let err = HedgeConfig::builder().max_hedges(9).build().unwrap_err();
/// assert_eq!(err, HedgeConfigError::MaxHedges { max_hedges: 9 });
/// assert_eq!(err.to_string(), "max_hedges must be 1 to 3, not 9");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum HedgeConfigError {
    /// `max_hedges` is 0 or above [`MAX_HEDGES`].
    MaxHedges {
        /// What was asked for.
        max_hedges: u8,
    },
    /// A fixed delay of zero: every call would be sent twice at once.
    DelayZero,
    /// The histogram's window is zero.
    WindowZero,
    /// The budget's `max_tokens` is zero or above 1 000 000.
    BudgetTokens {
        /// What was asked for.
        max_tokens: u32,
    },
    /// The budget's ratio is outside 0.1–100 %, or not a number.
    BudgetRatio {
        /// What was asked for, in percent.
        percent: f32,
    },
}

impl fmt::Display for HedgeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HedgeConfigError::MaxHedges { max_hedges } => {
                write!(f, "max_hedges must be 1 to {MAX_HEDGES}, not {max_hedges}")
            }
            HedgeConfigError::DelayZero => f.write_str("a fixed hedge delay must not be zero"),
            HedgeConfigError::WindowZero => f.write_str("the histogram window must not be zero"),
            HedgeConfigError::BudgetTokens { max_tokens } => write!(
                f,
                "hedge budget: max_tokens must be 1 to {MAX_TOKENS}, not {max_tokens}"
            ),
            HedgeConfigError::BudgetRatio { percent } => write!(
                f,
                "hedge budget: the ratio must be 0.1 % to 100 %, not {percent} %"
            ),
        }
    }
}

impl core::error::Error for HedgeConfigError {}

/// The hedge budget of one system: a token bucket that each hedge sent
/// spends a token of and each successful call refills by the config's
/// ratio (see [the module](self#the-budget-is-its-own)). Lock-free, one
/// atomic.
///
/// # Memory ordering
///
/// Relaxed: the count is its own only datum.
///
/// # Examples
///
/// ```
/// use watertight::hedge::{HedgeBudget, HedgeConfig};
///
/// let budget = HedgeBudget::new(&HedgeConfig::builder().budget(2, 50.0).build().unwrap());
/// assert!(budget.try_spend());
/// assert!(budget.try_spend());
/// assert!(!budget.try_spend()); // empty: no more hedges
/// budget.succeeded();
/// budget.succeeded(); // two successes at 50 %: one token
/// assert!(budget.try_spend());
/// ```
#[derive(Debug)]
pub struct HedgeBudget {
    /// Thousandths of a token.
    milli: AtomicU32,
    max_milli: u32,
    ratio_milli: u32,
}

impl HedgeBudget {
    crate::sync::const_fn! {
        /// A full budget, sized by `config`.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::hedge::{HedgeBudget, HedgeConfig};
        /// static BUDGET: HedgeBudget = HedgeBudget::new(&HedgeConfig::DEFAULT);
        /// assert_eq!(BUDGET.tokens(), 10.0);
        /// ```
        pub const fn new(config: &HedgeConfig) -> Self {
            let max_milli = config.budget_max_tokens * 1000;
            HedgeBudget {
                milli: AtomicU32::new(max_milli),
                max_milli,
                ratio_milli: config.budget_ratio_milli,
            }
        }
    }

    /// Takes one whole token if there is one: `true`, a hedge may be sent.
    /// An empty budget is left as it is.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::{HedgeBudget, HedgeConfig};
    /// let budget = HedgeBudget::new(&HedgeConfig::builder().budget(1, 10.0).build().unwrap());
    /// assert!(budget.try_spend());
    /// assert!(!budget.try_spend());
    /// assert_eq!(budget.tokens(), 0.0);
    /// ```
    pub fn try_spend(&self) -> bool {
        self.milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                m.checked_sub(1000)
            })
            .is_ok()
    }

    /// Gives back a token taken for a hedge that was not sent after all
    /// (the bulkhead was full, the breaker open).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::{HedgeBudget, HedgeConfig};
    /// let budget = HedgeBudget::new(&HedgeConfig::DEFAULT);
    /// assert!(budget.try_spend());
    /// budget.refund();
    /// assert_eq!(budget.tokens(), 10.0);
    /// ```
    pub fn refund(&self) {
        self.add(1000);
    }

    /// Records a successful call: gives back the ratio's share of a token
    /// (one load, no write, when the budget is full).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::{HedgeBudget, HedgeConfig};
    /// let budget = HedgeBudget::new(&HedgeConfig::DEFAULT);
    /// assert!(budget.try_spend());
    /// budget.succeeded();
    /// assert_eq!(budget.tokens(), 9.1);
    /// ```
    pub fn succeeded(&self) {
        self.add(self.ratio_milli);
    }

    fn add(&self, milli: u32) {
        if self.milli.load(Ordering::Relaxed) >= self.max_milli {
            return;
        }
        let _ = self
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                Some(m.saturating_add(milli).min(self.max_milli))
            });
    }

    /// Tokens left (with their thousandths), for metrics and tests.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::{HedgeBudget, HedgeConfig};
    /// assert_eq!(HedgeBudget::new(&HedgeConfig::DEFAULT).tokens(), 10.0);
    /// ```
    pub fn tokens(&self) -> f64 {
        f64::from(self.milli.load(Ordering::Relaxed)) / 1000.0
    }
}

/// What became of a hedge: the `outcome` label of `hedges_total`.
///
/// # Examples
///
/// ```
/// use watertight::hedge::HedgeOutcome;
/// assert_eq!(HedgeOutcome::NotSentBudget.label(), "not_sent_budget");
/// assert_eq!(HedgeOutcome::ALL.len(), 6);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HedgeOutcome {
    /// Sent, and its answer was the call's.
    Won,
    /// Sent, and its answer was not used: another attempt answered first
    /// and it was cancelled, it failed, or the caller dropped the call.
    Lost,
    /// Due, but the hedge budget was empty.
    NotSentBudget,
    /// Due, but the policy's bulkhead had no free slot (a hedge never
    /// waits for one).
    NotSentBulkhead,
    /// Due, but the policy's breaker refused it.
    NotSentBreaker,
    /// Due, but the policy's rate limit or adaptive throttle refused it.
    NotSentLimited,
}

impl HedgeOutcome {
    /// Every outcome, in the order of [`HedgeMetrics`]' fields.
    pub const ALL: [HedgeOutcome; 6] = [
        HedgeOutcome::Won,
        HedgeOutcome::Lost,
        HedgeOutcome::NotSentBudget,
        HedgeOutcome::NotSentBulkhead,
        HedgeOutcome::NotSentBreaker,
        HedgeOutcome::NotSentLimited,
    ];

    /// The metrics label.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::hedge::HedgeOutcome::Won.label(), "won");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            HedgeOutcome::Won => "won",
            HedgeOutcome::Lost => "lost",
            HedgeOutcome::NotSentBudget => "not_sent_budget",
            HedgeOutcome::NotSentBulkhead => "not_sent_bulkhead",
            HedgeOutcome::NotSentBreaker => "not_sent_breaker",
            HedgeOutcome::NotSentLimited => "not_sent_limited",
        }
    }
}

/// How a system's hedges went, since its [`Hedge`] was made.
///
/// # Examples
///
/// ```
/// use watertight::hedge::{Hedge, HedgeConfig};
/// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
/// assert_eq!(hedge.metrics().sent(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HedgeMetrics {
    /// Hedges whose answer was the call's.
    pub won: usize,
    /// Hedges sent whose answer was not used.
    pub lost: usize,
    /// Hedges not sent: the budget was empty.
    pub not_sent_budget: usize,
    /// Hedges not sent: the bulkhead was full.
    pub not_sent_bulkhead: usize,
    /// Hedges not sent: the breaker refused.
    pub not_sent_breaker: usize,
    /// Hedges not sent: the rate limit or the throttle refused.
    pub not_sent_limited: usize,
}

impl HedgeMetrics {
    /// Hedges sent (won or lost; those still in flight are in neither).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = watertight::hedge::HedgeMetrics::default();
    /// assert_eq!(m.sent(), 0);
    /// ```
    pub fn sent(&self) -> usize {
        self.won + self.lost
    }

    /// The count for `outcome`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::hedge::{HedgeMetrics, HedgeOutcome};
    /// assert_eq!(HedgeMetrics::default().get(HedgeOutcome::Won), 0);
    /// ```
    pub fn get(&self, outcome: HedgeOutcome) -> usize {
        match outcome {
            HedgeOutcome::Won => self.won,
            HedgeOutcome::Lost => self.lost,
            HedgeOutcome::NotSentBudget => self.not_sent_budget,
            HedgeOutcome::NotSentBulkhead => self.not_sent_bulkhead,
            HedgeOutcome::NotSentBreaker => self.not_sent_breaker,
            HedgeOutcome::NotSentLimited => self.not_sent_limited,
        }
    }
}

/// One system's hedging: its config, the latency histogram its percentile
/// delay reads, its budget and its counts. Made once per system (a
/// `static` if you like: [`new`](Self::new) is `const`), and passed to
/// [`Policy::call_hedged`](crate::Policy::call_hedged) with every call.
///
/// Kept beside the policy rather than in it: the histogram is 23.4 KB, which
/// a policy that never hedges (a gateway's firmware) should not carry.
///
/// **What the histogram records.** One sample per hedged call: the first
/// attempt's latency when it answered, or, when a hedge answered first,
/// how long the first attempt had run when it was cancelled. That is a
/// sample of the latency *without* hedging, cut off from below; since it is
/// at least the hedge delay, a tail sample stays in the tail, so the
/// percentile the delay is read from is the unhedged one. Recording the
/// winners' latencies instead would feed the hedged (shorter) tail back
/// into the delay and lower it call after call.
///
/// # Memory ordering
///
/// Relaxed throughout: counters, the budget, the histogram and the kept
/// delay (value and tag in one word) each hold their own data. A delay
/// read while records race with it may miss some of them, as any read of
/// the histogram may; it is read again in the next refresh period.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
///
/// let config = HedgeConfig::builder().delay(HedgeDelay::Fixed(Duration::from_millis(20))).build().unwrap();
/// static SEARCH: Hedge = Hedge::new("search", match HedgeConfig::builder().build() {
///     Ok(c) => c,
///     Err(_) => panic!(),
/// });
/// let hedge = Hedge::new("search", config);
/// assert_eq!(hedge.delay(), Some(Duration::from_millis(20)));
/// assert_eq!(SEARCH.delay(), None); // a percentile, and no samples yet
/// ```
pub struct Hedge {
    name: &'static str,
    config: HedgeConfig,
    histogram: LatencyHistogram,
    budget: HedgeBudget,
    counts: [AtomicUsize; 6],
    // The percentile delay last read, tagged with the refresh period it
    // was read in (see `delay`); 0: none yet.
    cached: AtomicU64,
}

impl Hedge {
    crate::sync::const_fn! {
        /// The hedging of system `name`.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::hedge::{Hedge, HedgeConfig};
        /// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
        /// assert_eq!(hedge.name(), "search");
        /// assert_eq!(hedge.histogram().window(), 1000);
        /// ```
        pub const fn new(name: &'static str, config: HedgeConfig) -> Self {
            Hedge {
                name,
                histogram: LatencyHistogram::new(config.window),
                budget: HedgeBudget::new(&config),
                config,
                counts: new_counts(),
                cached: AtomicU64::new(0),
            }
        }
    }

    /// The system's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// assert_eq!(Hedge::new("db", HedgeConfig::DEFAULT).name(), "db");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The config.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// assert_eq!(Hedge::new("db", HedgeConfig::DEFAULT).config().max_hedges(), 1);
    /// ```
    pub fn config(&self) -> &HedgeConfig {
        &self.config
    }

    /// The latency histogram (one sample per hedged call, see the type's
    /// docs).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// assert!(Hedge::new("db", HedgeConfig::DEFAULT).histogram().is_empty());
    /// ```
    pub fn histogram(&self) -> &LatencyHistogram {
        &self.histogram
    }

    /// The budget.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// assert_eq!(Hedge::new("db", HedgeConfig::DEFAULT).budget().tokens(), 10.0);
    /// ```
    pub fn budget(&self) -> &HedgeBudget {
        &self.budget
    }

    /// The delay a call starting now would hedge after: the fixed one, or
    /// the percentile of the histogram; `None` (no hedge) while the
    /// histogram holds fewer than `min_samples`.
    ///
    /// A percentile is read from the histogram once per refresh period,
    /// `window / 16` records (at least 1), and kept in between: reading
    /// 976 buckets per call would cost a call a microsecond (`benches/hedge.rs`).
    /// So the delay lags the histogram by at most that many records. The
    /// kept value is one atomic word, tagged with the period it was read
    /// in; a call that finds another period's tag reads the histogram
    /// again. While there are too few samples nothing is kept, so the
    /// first call after the `min_samples`th record hedges.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::hedge::{Hedge, HedgeConfig};
    ///
    /// let hedge = Hedge::new("db", HedgeConfig::builder().min_samples(10).build().unwrap());
    /// assert_eq!(hedge.delay(), None);
    /// for ms in 1..=10 {
    ///     hedge.histogram().record(Duration::from_millis(ms));
    /// }
    /// assert!(hedge.delay().unwrap() >= Duration::from_millis(10));
    /// ```
    pub fn delay(&self) -> Option<Duration> {
        let p = match self.config.delay {
            HedgeDelay::Fixed(d) => return Some(d),
            HedgeDelay::Percentile(p) => p,
        };
        let refresh = u64::from((self.config.window / 16).max(1));
        // The period's tag, 1 to 2²⁴ − 1 (0 is "nothing kept").
        let tag = (self.histogram.recorded() / refresh) % TAG_PERIODS + 1;
        let kept = self.cached.load(Ordering::Relaxed);
        if kept >> DELAY_BITS == tag {
            return Some(Duration::from_nanos(kept & DELAY_MASK));
        }
        let delay = self
            .histogram
            .percentile_of_at_least(p, u64::from(self.config.min_samples))?;
        // Kept if it fits in 40 bits of nanoseconds (18 minutes).
        if let Ok(nanos) = u64::try_from(delay.as_nanos()) {
            if nanos <= DELAY_MASK {
                self.cached
                    .store(tag << DELAY_BITS | nanos, Ordering::Relaxed);
            }
        }
        Some(delay)
    }

    /// The counts (see [`HedgeMetrics`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// assert_eq!(Hedge::new("db", HedgeConfig::DEFAULT).metrics().won, 0);
    /// ```
    pub fn metrics(&self) -> HedgeMetrics {
        let n = |o: HedgeOutcome| self.counts[o as usize].load(Ordering::Relaxed);
        HedgeMetrics {
            won: n(HedgeOutcome::Won),
            lost: n(HedgeOutcome::Lost),
            not_sent_budget: n(HedgeOutcome::NotSentBudget),
            not_sent_bulkhead: n(HedgeOutcome::NotSentBulkhead),
            not_sent_breaker: n(HedgeOutcome::NotSentBreaker),
            not_sent_limited: n(HedgeOutcome::NotSentLimited),
        }
    }

    /// Counts one hedge's `outcome`.
    pub(crate) fn count(&self, outcome: HedgeOutcome) {
        self.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        if !matches!(outcome, HedgeOutcome::Won | HedgeOutcome::Lost) {
            tracing::debug!(
                target: "watertight::hedge",
                system = self.name,
                outcome = outcome.label(),
                "hedge not sent"
            );
        }
    }
}

/// The kept delay's nanoseconds: the low 40 bits of its word.
const DELAY_BITS: u32 = 40;
const DELAY_MASK: u64 = (1 << DELAY_BITS) - 1;
/// Refresh periods told apart by the tag in the high 24 bits.
const TAG_PERIODS: u64 = (1 << (64 - DELAY_BITS)) - 1;

crate::sync::const_fn! {
    const fn new_counts() -> [AtomicUsize; 6] {
        [
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ]
    }
}

impl fmt::Debug for Hedge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("histogram", &self.histogram)
            .field("budget", &self.budget)
            .field("metrics", &self.metrics())
            .finish()
    }
}
