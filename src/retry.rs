//! Retries that cannot storm: bounded by attempts, by the request's
//! deadline, and by a retry budget shared by every caller of one system.
//!
//! When a call times out: retry once, if the operation is idempotent and
//! the budget allows; never retry in a loop with no limit and no delay,
//! which turns a slow neighbour into a dead one. This module holds the
//! pieces; [`Policy`](crate::Policy) puts them around its
//! layers.
//!
//! # Where retries sit
//!
//! Outermost: **retry ⊃ bulkhead ⊃ breaker ⊃ deadline**. Each attempt takes
//! its own bulkhead slot and passes the breaker again, so a retry is counted
//! like any call (a full bulkhead or an open breaker refuses it), and the
//! slot is not held through the backoff sleep. A refusal by this crate's own
//! layers is never retried: a full bulkhead or an open breaker means "stop",
//! and retrying it is the storm.
//!
//! # The budget
//!
//! gRPC's retry throttling (gRFC A6), with the check and the withdrawal made
//! one atomic step. The budget holds up to `max_tokens` tokens, and starts
//! full. Every retryable failure of an attempt takes one token; every
//! success gives back `token_ratio` of one. A failed call may be retried
//! only if, after its failure took its token, more than half of
//! `max_tokens` is left. So however many callers fail at once, the retries
//! in a storm are at most `max_tokens / 2` plus `token_ratio` per success
//! since: under a 100 % failure rate they stop after a few, and when the
//! system recovers its successes refill the budget.
//!
//! Tokens are kept in thousandths in one atomic `u32`: a ratio of 10 %
//! gives back exactly 100 of them. tower's `TpsBudget` turned a fractional
//! ratio into a whole withdrawal cost by truncation and so allowed more
//! retries than configured (tower issue 857); here a ratio is taken to the
//! nearest thousandth *below*, never above, and one below 0.1 % is refused
//! by the config.
//!
//! **Counted in a storm** (`cargo bench --bench retry --features tokio`,
//! which prints it): 10 000 calls, one per millisecond, every attempt
//! failing for the first 5 s, then one call in 20 failing once; each way
//! allowed up to 3 retries with the same backoff. While the system is
//! down, the default budget lets 4 retries through in 5000 calls (1.001
//! attempts per call), where a plain "retry 3 times" loop makes 3.978 per
//! call and tower's `retry` with its default `TpsBudget` 1.020; once the
//! system is back, the refilled budget retries the blips as the others do
//! (1.049 attempts per call).
//!
//! # Backoff
//!
//! Exponential with full jitter (the AWS architecture blog's "full
//! jitter"): before retry `n` (1 for the first), sleep a uniformly random
//! time in `[0, min(max_backoff, base_backoff × 2ⁿ⁻¹)]`. The random numbers
//! come from a SplitMix64 sequence in one atomic per policy (no global RNG,
//! `no_std`, no allocation), seeded by the config (or, with `std`, at
//! random per policy, so that replicas do not retry in step).

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// How a policy retries: attempts, backoff, the minimum time an attempt
/// needs, and the budget.
///
/// Defaults: 2 attempts (one retry), backoff from 50 ms
/// doubling up to 1 s, full jitter; no attempt started with less than
/// 50 ms of the request left; a budget of 10 tokens with a ratio of 10 %
/// (gRFC A6's example values).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::retry::RetryConfig;
///
/// let retry = RetryConfig::builder().build().unwrap();
/// assert_eq!(retry.max_attempts(), 2);
/// assert_eq!(retry.base_backoff(), Duration::from_millis(50));
/// assert_eq!(retry.budget_max_tokens(), 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    max_attempts: u32,
    base_backoff: Duration,
    max_backoff: Duration,
    min_attempt_time: Duration,
    budget_max_tokens: u32,
    /// Thousandths of a token per success.
    budget_ratio_milli: u32,
    seed: Option<u64>,
}

impl RetryConfig {
    /// The defaults: see [`RetryConfig`].
    pub const DEFAULT: RetryConfig = match RetryConfig::builder().build() {
        Ok(c) => c,
        Err(_) => panic!("the default retry config is valid"),
    };

    /// A builder with the defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::retry::RetryConfig;
    ///
    /// let retry = RetryConfig::builder()
    ///     .max_attempts(3)
    ///     .backoff(Duration::from_millis(20), Duration::from_millis(200))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(retry.max_backoff(), Duration::from_millis(200));
    /// ```
    pub const fn builder() -> RetryConfigBuilder {
        RetryConfigBuilder {
            max_attempts: 2,
            base_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            min_attempt_time: Duration::from_millis(50),
            budget_max_tokens: 10,
            budget_ratio_percent: 10.0,
            seed: None,
        }
    }

    /// Attempts in all, the first included (1: no retries).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.max_attempts(), 2);
    /// ```
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The first retry's backoff cap.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.base_backoff().as_millis(), 50);
    /// ```
    pub const fn base_backoff(&self) -> Duration {
        self.base_backoff
    }

    /// The largest backoff.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.max_backoff().as_secs(), 1);
    /// ```
    pub const fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// An attempt is not started with less than this left of the request:
    /// the last error is returned instead. Zero means any time left will
    /// do, but some must be: a retry never waits to the request's end, or
    /// past it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.min_attempt_time().as_millis(), 50);
    /// ```
    pub const fn min_attempt_time(&self) -> Duration {
        self.min_attempt_time
    }

    /// The budget's size in tokens.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.budget_max_tokens(), 10);
    /// ```
    pub const fn budget_max_tokens(&self) -> u32 {
        self.budget_max_tokens
    }

    /// The share of a token each success gives back, in percent, as in
    /// effect: to the 0.1 % below what was asked.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::DEFAULT.budget_ratio_percent(), 10.0);
    /// let fine = RetryConfig::builder().budget(10, 2.55).build().unwrap();
    /// assert_eq!(fine.budget_ratio_percent(), 2.5);
    /// ```
    pub fn budget_ratio_percent(&self) -> f32 {
        self.budget_ratio_milli as f32 / 10.0
    }

    /// The jitter's seed, if one was set.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::builder().seed(7).build().unwrap().seed(), Some(7));
    /// ```
    pub const fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// The cap of the backoff before retry `n` (1 for the first retry):
    /// `min(max_backoff, base_backoff × 2ⁿ⁻¹)`. The sleep is drawn
    /// uniformly from `[0, cap]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// # use watertight::retry::RetryConfig;
    /// let c = RetryConfig::DEFAULT;
    /// assert_eq!(c.backoff_cap(1), Duration::from_millis(50));
    /// assert_eq!(c.backoff_cap(3), Duration::from_millis(200));
    /// assert_eq!(c.backoff_cap(30), Duration::from_secs(1));
    /// ```
    pub fn backoff_cap(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(63);
        let nanos = u64::try_from(self.base_backoff.as_nanos()).unwrap_or(u64::MAX);
        let grown = nanos
            .checked_shl(doublings)
            .filter(|g| g >> doublings == nanos);
        match grown {
            Some(g) => Duration::from_nanos(g).min(self.max_backoff),
            None => self.max_backoff,
        }
    }
}

/// Builds a [`RetryConfig`]; [`build`](Self::build) checks it.
///
/// # Examples
///
/// ```
/// use watertight::retry::RetryConfig;
/// let retry = RetryConfig::builder().budget(100, 20.0).build().unwrap();
/// assert_eq!(retry.budget_max_tokens(), 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetryConfigBuilder {
    max_attempts: u32,
    base_backoff: Duration,
    max_backoff: Duration,
    min_attempt_time: Duration,
    budget_max_tokens: u32,
    budget_ratio_percent: f32,
    seed: Option<u64>,
}

impl RetryConfigBuilder {
    /// Attempts in all, the first included (2 by default; 1 turns retries
    /// off; 0 is refused).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// assert_eq!(RetryConfig::builder().max_attempts(3).build().unwrap().max_attempts(), 3);
    /// ```
    pub const fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The backoff: `base` before the first retry, doubling up to `max`
    /// (50 ms and 1 s by default), each drawn with full jitter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::retry::RetryConfig;
    /// let c = RetryConfig::builder()
    ///     .backoff(Duration::from_millis(20), Duration::from_millis(100))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(c.backoff_cap(4), Duration::from_millis(100));
    /// ```
    pub const fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base_backoff = base;
        self.max_backoff = max;
        self
    }

    /// No attempt is started with less than this left of the request
    /// (50 ms by default): the last error is returned instead. Zero means
    /// any time left will do; a backoff (or a `Retry-After` hint) that would
    /// end at the request's deadline or past it still returns the last error
    /// at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration; use watertight::retry::RetryConfig;
    /// let c = RetryConfig::builder().min_attempt_time(Duration::from_millis(200)).build().unwrap();
    /// assert_eq!(c.min_attempt_time(), Duration::from_millis(200));
    /// ```
    pub const fn min_attempt_time(mut self, d: Duration) -> Self {
        self.min_attempt_time = d;
        self
    }

    /// The budget: `max_tokens` (10 by default) and the share of a token
    /// each success gives back, in percent (10 % by default; at least
    /// 0.1 %, at most 100 %).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// let c = RetryConfig::builder().budget(100, 5.0).build().unwrap();
    /// assert_eq!((c.budget_max_tokens(), c.budget_ratio_percent()), (100, 5.0));
    /// ```
    pub const fn budget(mut self, max_tokens: u32, ratio_percent: f32) -> Self {
        self.budget_max_tokens = max_tokens;
        self.budget_ratio_percent = ratio_percent;
        self
    }

    /// The jitter's seed (by default: random per policy with `std`, a
    /// constant mixed with the policy's name without it).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::retry::RetryConfig;
    /// // Reproducible backoffs, in a test.
    /// assert_eq!(RetryConfig::builder().seed(42).build().unwrap().seed(), Some(42));
    /// ```
    pub const fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`RetryConfigError`]: zero attempts, a zero base backoff or a cap
    /// below it, a budget of zero tokens or above 1 000 000, a ratio
    /// outside 0.1–100 % (or not a number).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::retry::{RetryConfig, RetryConfigError};
    ///
    /// let err = RetryConfig::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(err, RetryConfigError::AttemptsZero);
    /// let err = RetryConfig::builder()
    ///     .backoff(Duration::from_secs(1), Duration::from_millis(10))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, RetryConfigError::BackoffCapBelowBase { .. }));
    /// let err = RetryConfig::builder().budget(10, 150.0).build().unwrap_err();
    /// assert!(matches!(err, RetryConfigError::BudgetRatio { .. }));
    /// ```
    pub const fn build(self) -> Result<RetryConfig, RetryConfigError> {
        if self.max_attempts == 0 {
            return Err(RetryConfigError::AttemptsZero);
        }
        if self.base_backoff.is_zero() {
            return Err(RetryConfigError::BaseBackoffZero);
        }
        if self.max_backoff.as_nanos() < self.base_backoff.as_nanos() {
            return Err(RetryConfigError::BackoffCapBelowBase {
                base: self.base_backoff,
                max: self.max_backoff,
            });
        }
        if self.budget_max_tokens == 0 || self.budget_max_tokens > MAX_TOKENS {
            return Err(RetryConfigError::BudgetTokens {
                max_tokens: self.budget_max_tokens,
            });
        }
        let r = self.budget_ratio_percent;
        // `!(a <= r && r <= b)` also refuses NaN.
        if !(0.1 <= r && r <= 100.0) {
            return Err(RetryConfigError::BudgetRatio { percent: r });
        }
        // Thousandths of a token, rounded down: never more than asked.
        let milli = (r * 10.0) as u32;
        Ok(RetryConfig {
            max_attempts: self.max_attempts,
            base_backoff: self.base_backoff,
            max_backoff: self.max_backoff,
            min_attempt_time: self.min_attempt_time,
            budget_max_tokens: self.budget_max_tokens,
            budget_ratio_milli: if milli == 0 { 1 } else { milli },
            seed: self.seed,
        })
    }
}

/// The most tokens a budget holds (so that thousandths fit in a `u32`).
const MAX_TOKENS: u32 = 1_000_000;

/// A [`RetryConfig`] that [`build`](RetryConfigBuilder::build) refused.
///
/// # Examples
///
/// ```
/// use watertight::retry::{RetryConfig, RetryConfigError};
/// let err = RetryConfig::builder().budget(0, 10.0).build().unwrap_err();
/// assert_eq!(err, RetryConfigError::BudgetTokens { max_tokens: 0 });
/// assert_eq!(err.to_string(), "retry budget: max_tokens must be 1 to 1000000, not 0");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RetryConfigError {
    /// `max_attempts` is zero (1 means no retries).
    AttemptsZero,
    /// The base backoff is zero: retries would not wait at all.
    BaseBackoffZero,
    /// The backoff cap is below its base.
    BackoffCapBelowBase {
        /// The base.
        base: Duration,
        /// The cap.
        max: Duration,
    },
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

impl fmt::Display for RetryConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryConfigError::AttemptsZero => {
                f.write_str("max_attempts must not be zero (1 means no retries)")
            }
            RetryConfigError::BaseBackoffZero => f.write_str("base_backoff must not be zero"),
            RetryConfigError::BackoffCapBelowBase { base, max } => {
                write!(f, "max_backoff {max:?} is below base_backoff {base:?}")
            }
            RetryConfigError::BudgetTokens { max_tokens } => write!(
                f,
                "retry budget: max_tokens must be 1 to {MAX_TOKENS}, not {max_tokens}"
            ),
            RetryConfigError::BudgetRatio { percent } => write!(
                f,
                "retry budget: the ratio must be 0.1 % to 100 %, not {percent} %"
            ),
        }
    }
}

impl core::error::Error for RetryConfigError {}

/// The retry budget of one system, shared by all its callers: lock-free,
/// one atomic, no allocation. See [the module](self#the-budget).
///
/// # Memory ordering
///
/// Relaxed: the count is its own only datum; no other memory is published
/// through it.
///
/// # Examples
///
/// ```
/// use watertight::retry::{RetryBudget, RetryConfig};
///
/// let budget = RetryBudget::new(&RetryConfig::DEFAULT); // 10 tokens, 10 %
/// // A storm: every call fails. Each failure takes a token; a retry is
/// // allowed only while more than half (5) are left after that.
/// let retries = (0..1000).filter(|_| budget.failed_may_retry()).count();
/// assert_eq!(retries, 4);
/// // Recovery: 10 successes give back one token; 70 give back 7.
/// for _ in 0..70 {
///     budget.succeeded();
/// }
/// assert!(budget.failed_may_retry());
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    /// Thousandths of a token.
    milli: AtomicU32,
    max_milli: u32,
    ratio_milli: u32,
}

impl RetryBudget {
    crate::sync::const_fn! {
        /// A full budget, sized by `config`.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::retry::{RetryBudget, RetryConfig};
        /// static BUDGET: RetryBudget = RetryBudget::new(&RetryConfig::DEFAULT);
        /// assert_eq!(BUDGET.tokens(), 10.0);
        /// ```
        pub const fn new(config: &RetryConfig) -> Self {
            let max_milli = config.budget_max_tokens * 1000;
            RetryBudget {
                milli: AtomicU32::new(max_milli),
                max_milli,
                ratio_milli: config.budget_ratio_milli,
            }
        }
    }

    /// Records a success: gives back the ratio's share of a token (one
    /// load, no write, when the budget is full).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::retry::{RetryBudget, RetryConfig};
    /// let budget = RetryBudget::new(&RetryConfig::DEFAULT);
    /// budget.succeeded();
    /// assert_eq!(budget.tokens(), 10.0);
    /// ```
    #[inline]
    pub fn succeeded(&self) {
        if self.milli.load(Ordering::Relaxed) >= self.max_milli {
            return;
        }
        let _ = self
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                Some(m.saturating_add(self.ratio_milli).min(self.max_milli))
            });
    }

    /// Records a retryable failure, taking one token, and says whether it
    /// may be retried: whether more than half of the budget is left after
    /// the token was taken. One atomic step, so that callers failing at
    /// once cannot all see the same tokens.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::retry::{RetryBudget, RetryConfig};
    /// let budget = RetryBudget::new(&RetryConfig::builder().budget(4, 10.0).build().unwrap());
    /// assert!(budget.failed_may_retry()); // 3 left, > 2
    /// assert!(!budget.failed_may_retry()); // 2 left, not > 2
    /// ```
    pub fn failed_may_retry(&self) -> bool {
        let before = self
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                Some(m.saturating_sub(1000))
            })
            .unwrap_or(0);
        // Strictly more than half after the withdrawal (gRFC A6's rule).
        u64::from(before.saturating_sub(1000)) * 2 > u64::from(self.max_milli)
    }

    /// Records a failure that will not be retried anyway (the last
    /// attempt, or a call not marked idempotent): takes one token.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::retry::{RetryBudget, RetryConfig};
    /// let budget = RetryBudget::new(&RetryConfig::DEFAULT);
    /// budget.failed();
    /// assert_eq!(budget.tokens(), 9.0);
    /// ```
    pub fn failed(&self) {
        let _ = self.failed_may_retry();
    }

    /// Tokens left (with their thousandths), for metrics and tests.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::retry::{RetryBudget, RetryConfig};
    /// assert_eq!(RetryBudget::new(&RetryConfig::DEFAULT).tokens(), 10.0);
    /// ```
    pub fn tokens(&self) -> f64 {
        f64::from(self.milli.load(Ordering::Relaxed)) / 1000.0
    }
}

/// The jitter's random numbers: SplitMix64 over one atomic counter (each
/// draw one `fetch_add`, so concurrent draws never repeat one another).
///
/// # Memory ordering
///
/// Relaxed: only the counter's own value matters.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::retry::Jitter;
///
/// let jitter = Jitter::new(42);
/// let d = jitter.up_to(Duration::from_millis(100));
/// assert!(d <= Duration::from_millis(100));
/// ```
#[derive(Debug)]
pub struct Jitter {
    state: AtomicU64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Jitter {
    crate::sync::const_fn! {
        /// A sequence from `seed`: the same seed gives the same draws, in order.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::retry::Jitter;
        /// static JITTER: Jitter = Jitter::new(7);
        /// let _ = JITTER.next_u64();
        /// ```
        pub const fn new(seed: u64) -> Self {
            Jitter {
                state: AtomicU64::new(seed),
            }
        }
    }

    /// The next 64 random bits.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::retry::Jitter;
    /// let (a, b) = (Jitter::new(1), Jitter::new(1));
    /// assert_eq!(a.next_u64(), b.next_u64());
    /// assert_ne!(a.next_u64(), Jitter::new(2).next_u64());
    /// ```
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GOLDEN, Ordering::Relaxed)
            .wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A time drawn uniformly from `[0, cap]` (to the nanosecond).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::retry::Jitter;
    /// assert_eq!(Jitter::new(9).up_to(Duration::ZERO), Duration::ZERO);
    /// ```
    pub fn up_to(&self, cap: Duration) -> Duration {
        let cap = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        if cap == 0 {
            return Duration::ZERO;
        }
        // Lemire's multiply-shift: uniform enough for a backoff (bias under
        // 2⁻⁶⁴ × cap), and no division.
        let span = u128::from(cap) + 1;
        let x = (u128::from(self.next_u64()) * span) >> 64;
        Duration::from_nanos(x as u64)
    }
}
