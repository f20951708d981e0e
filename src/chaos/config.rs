//! [`ChaosConfig`]: which faults, at which rates, with which values; its
//! builder and its error.

use core::fmt;
use core::time::Duration;

use super::Fault;

/// One million: rates are kept in parts per million.
pub(super) const PPM: u32 = 1_000_000;

/// What an [`Injector`](super::Injector) injects: for each [`Fault`] its
/// rate (a probability per call, kept to the part per million), the
/// injected error's and outcome's values, the injected latency, the seed of
/// the draws, and whether the injector starts enabled.
///
/// The rates are of disjoint slices of one draw per call, so a call gets at
/// most one fault and their sum must not pass 1. The values come from plain
/// `fn() -> O` (a closure that captures nothing): the config is `Copy`, and
/// an injected fault allocates nothing.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::chaos::{ChaosConfig, Fault};
///
/// let config: ChaosConfig<Result<u16, &str>> = ChaosConfig::builder()
///     .error(0.1, || Err("connection reset"))
///     .outcome(0.05, || Ok(503))
///     .latency(0.2, Duration::from_millis(300))
///     .hang(0.01)
///     .seed(7)
///     .build()
///     .unwrap();
/// assert_eq!(config.rate_ppm(Fault::Error), 100_000);
/// assert_eq!(config.rate_ppm(Fault::Hang), 10_000);
/// assert_eq!(config.latency(), Duration::from_millis(300));
/// ```
pub struct ChaosConfig<O> {
    pub(super) rates: [u32; 4],
    pub(super) error: Option<fn() -> O>,
    pub(super) outcome: Option<fn() -> O>,
    pub(super) latency: Duration,
    pub(super) seed: Option<u64>,
    pub(super) enabled: bool,
}

// By hand: the derives would ask `O: Clone` / `O: Debug`, which a
// `fn() -> O` does not need.
impl<O> Clone for ChaosConfig<O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<O> Copy for ChaosConfig<O> {}

impl<O> fmt::Debug for ChaosConfig<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosConfig")
            .field("error_ppm", &self.rates[Fault::Error as usize])
            .field("outcome_ppm", &self.rates[Fault::Outcome as usize])
            .field("latency_ppm", &self.rates[Fault::Latency as usize])
            .field("latency", &self.latency)
            .field("hang_ppm", &self.rates[Fault::Hang as usize])
            .field("seed", &self.seed)
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl<O> ChaosConfig<O> {
    /// A builder: no faults, no seed (with `std`, random per injector;
    /// without, from the injector's name), enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// let quiet: ChaosConfig<()> = ChaosConfig::builder().build().unwrap();
    /// assert_eq!(quiet.rate_ppm(Fault::Error), 0);
    /// assert!(quiet.enabled());
    /// ```
    pub const fn builder() -> ChaosConfigBuilder<O> {
        ChaosConfigBuilder {
            rates: [0.0; 4],
            error: None,
            outcome: None,
            latency: Duration::ZERO,
            seed: None,
            enabled: true,
        }
    }

    /// The rate of `fault`, in parts per million of calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// let c: ChaosConfig<()> = ChaosConfig::builder().hang(0.0000015).build().unwrap();
    /// assert_eq!(c.rate_ppm(Fault::Hang), 2); // to the nearest part per million
    /// ```
    pub const fn rate_ppm(&self, fault: Fault) -> u32 {
        self.rates[fault as usize]
    }

    /// The injected latency (zero when none is set).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::chaos::ChaosConfig;
    /// let c: ChaosConfig<()> =
    ///     ChaosConfig::builder().latency(0.5, Duration::from_millis(80)).build().unwrap();
    /// assert_eq!(c.latency(), Duration::from_millis(80));
    /// ```
    pub const fn latency(&self) -> Duration {
        self.latency
    }

    /// The seed, if one was set.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::ChaosConfig;
    /// let c: ChaosConfig<()> = ChaosConfig::builder().seed(7).build().unwrap();
    /// assert_eq!(c.seed(), Some(7));
    /// ```
    pub const fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Whether an injector made from this config starts enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::ChaosConfig;
    /// let c: ChaosConfig<()> = ChaosConfig::builder().enabled(false).build().unwrap();
    /// assert!(!c.enabled());
    /// ```
    pub const fn enabled(&self) -> bool {
        self.enabled
    }
}

/// Builds a [`ChaosConfig`]; [`build`](Self::build) checks it.
///
/// # Examples
///
/// ```
/// use watertight::chaos::{ChaosConfig, Fault};
/// let c: ChaosConfig<Result<(), &str>> =
///     ChaosConfig::builder().error(0.5, || Err("boom")).seed(1).build().unwrap();
/// assert_eq!(c.rate_ppm(Fault::Error), 500_000);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct ChaosConfigBuilder<O> {
    rates: [f64; 4],
    error: Option<fn() -> O>,
    outcome: Option<fn() -> O>,
    latency: Duration,
    seed: Option<u64>,
    enabled: bool,
}

impl<O> fmt::Debug for ChaosConfigBuilder<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosConfigBuilder")
            .field("rates", &self.rates)
            .field("latency", &self.latency)
            .field("seed", &self.seed)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl<O> ChaosConfigBuilder<O> {
    /// Injects an error — the value `make` returns, in place of the call's
    /// — in `rate` of calls (0 to 1). The call is not made.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// #[derive(Debug)]
    /// enum PricingError { Unavailable }
    /// let c: ChaosConfig<Result<u32, PricingError>> = ChaosConfig::builder()
    ///     .error(0.25, || Err(PricingError::Unavailable))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(c.rate_ppm(Fault::Error), 250_000);
    /// ```
    pub const fn error(mut self, rate: f64, make: fn() -> O) -> Self {
        self.rates[Fault::Error as usize] = rate;
        self.error = Some(make);
        self
    }

    /// Injects an outcome — a value the call could have returned, such as
    /// `Ok(503)` — in `rate` of calls (0 to 1). The call is not made.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// let c: ChaosConfig<Result<u16, ()>> =
    ///     ChaosConfig::builder().outcome(0.1, || Ok(503)).build().unwrap();
    /// assert_eq!(c.rate_ppm(Fault::Outcome), 100_000);
    /// ```
    pub const fn outcome(mut self, rate: f64, make: fn() -> O) -> Self {
        self.rates[Fault::Outcome as usize] = rate;
        self.outcome = Some(make);
        self
    }

    /// Delays `rate` of calls (0 to 1) by `latency`, slept on the
    /// injector's clock; the call is made after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// let c: ChaosConfig<()> = ChaosConfig::builder()
    ///     .latency(0.3, Duration::from_secs(2))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(c.rate_ppm(Fault::Latency), 300_000);
    /// ```
    pub const fn latency(mut self, rate: f64, latency: Duration) -> Self {
        self.rates[Fault::Latency as usize] = rate;
        self.latency = latency;
        self
    }

    /// Hangs `rate` of calls (0 to 1): the call is not made and the
    /// injected future never completes — until the caller's deadline drops
    /// it, as a server that never answers.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault};
    /// let c: ChaosConfig<()> = ChaosConfig::builder().hang(0.01).build().unwrap();
    /// assert_eq!(c.rate_ppm(Fault::Hang), 10_000);
    /// ```
    pub const fn hang(mut self, rate: f64) -> Self {
        self.rates[Fault::Hang as usize] = rate;
        self
    }

    /// The draws' seed: the same seed, the same faults in the same order of
    /// calls. By default random per injector with `std` (so replicas do not
    /// fail in step), and from the injector's name without it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::ChaosConfig;
    /// let c: ChaosConfig<()> = ChaosConfig::builder().seed(42).build().unwrap();
    /// assert_eq!(c.seed(), Some(42));
    /// ```
    pub const fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Whether the injector starts enabled (by default it does); turn it
    /// on and off at run time with [`Injector::set_enabled`](super::Injector::set_enabled).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::ChaosConfig;
    /// let c: ChaosConfig<()> = ChaosConfig::builder().enabled(false).build().unwrap();
    /// assert!(!c.enabled());
    /// ```
    pub const fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`ChaosConfigError`]: a rate outside 0–1 (or not a number), rates
    /// whose sum passes 1, or a latency rate above zero with a zero
    /// latency.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::chaos::{ChaosConfig, ChaosConfigError, Fault};
    ///
    /// let err = ChaosConfig::<()>::builder().hang(1.5).build().unwrap_err();
    /// assert_eq!(err, ChaosConfigError::Rate { fault: Fault::Hang, rate: 1.5 });
    /// let err = ChaosConfig::<()>::builder()
    ///     .hang(0.6)
    ///     .latency(0.6, Duration::from_millis(1))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, ChaosConfigError::RatesAboveOne { ppm: 1_200_000 });
    /// let err = ChaosConfig::<()>::builder().latency(0.1, Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err, ChaosConfigError::LatencyZero);
    /// ```
    pub const fn build(self) -> Result<ChaosConfig<O>, ChaosConfigError> {
        let mut rates = [0u32; 4];
        let mut sum = 0u32;
        let mut i = 0;
        while i < 4 {
            let r = self.rates[i];
            // `!(a <= r && r <= b)` also refuses NaN.
            if !(0.0 <= r && r <= 1.0) {
                return Err(ChaosConfigError::Rate {
                    fault: Fault::ALL[i],
                    rate: r,
                });
            }
            // To the nearest part per million (at most 1 000 000: fits).
            rates[i] = (r * PPM as f64 + 0.5) as u32;
            sum += rates[i];
            i += 1;
        }
        if sum > PPM {
            return Err(ChaosConfigError::RatesAboveOne { ppm: sum });
        }
        if rates[Fault::Latency as usize] > 0 && self.latency.is_zero() {
            return Err(ChaosConfigError::LatencyZero);
        }
        Ok(ChaosConfig {
            rates,
            error: self.error,
            outcome: self.outcome,
            latency: self.latency,
            seed: self.seed,
            enabled: self.enabled,
        })
    }
}

/// A [`ChaosConfig`] that [`build`](ChaosConfigBuilder::build) refused.
///
/// # Examples
///
/// ```
/// use watertight::chaos::{ChaosConfig, ChaosConfigError};
/// let err = ChaosConfig::<()>::builder().hang(f64::NAN).build().unwrap_err();
/// assert!(matches!(err, ChaosConfigError::Rate { .. }));
/// assert_eq!(err.to_string(), "chaos: the hang rate must be 0 to 1, not NaN");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ChaosConfigError {
    /// A rate outside 0–1, or not a number.
    Rate {
        /// Which fault's rate.
        fault: Fault,
        /// What was asked for.
        rate: f64,
    },
    /// The rates add up to more than 1: a call gets at most one fault.
    RatesAboveOne {
        /// Their sum, in parts per million.
        ppm: u32,
    },
    /// Latency is injected at a rate above zero, but the latency is zero.
    LatencyZero,
}

impl fmt::Display for ChaosConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChaosConfigError::Rate { fault, rate } => write!(
                f,
                "chaos: the {} rate must be 0 to 1, not {rate}",
                fault.label()
            ),
            ChaosConfigError::RatesAboveOne { ppm } => write!(
                f,
                "chaos: the rates add up to {ppm} parts per million, more than 1 (a call gets at most one fault)"
            ),
            ChaosConfigError::LatencyZero => {
                f.write_str("chaos: a latency rate above zero needs a latency above zero")
            }
        }
    }
}

impl core::error::Error for ChaosConfigError {}
