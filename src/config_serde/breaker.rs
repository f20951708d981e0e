//! `Deserialize` for [`BreakerConfig`](crate::BreakerConfig): its keys, flat
//! (`cb_` in a policy) or nested.

use super::*;
use crate::breaker::{BreakerConfig, BreakerConfigError, BreakerField, BreakerWindow};

/// The breaker's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a circuit breaker config")]
pub(super) struct RawBreaker {
    #[serde(default, deserialize_with = "window_size")]
    pub(super) window_size: Option<usize>,
    #[serde(default, alias = "minimum_calls", deserialize_with = "min_calls")]
    pub(super) min_calls: Option<usize>,
    #[serde(
        default,
        alias = "failure_rate_threshold",
        deserialize_with = "failure_rate"
    )]
    pub(super) failure_rate: Option<Percent>,
    #[serde(
        default,
        alias = "slow_call_rate_threshold",
        deserialize_with = "slow_call_rate"
    )]
    pub(super) slow_call_rate: Option<Percent>,
    #[serde(
        default,
        alias = "slow_threshold",
        deserialize_with = "slow_call_duration"
    )]
    pub(super) slow_call_duration: Option<Duration>,
    #[serde(default, deserialize_with = "open_duration")]
    pub(super) open_duration: Option<Duration>,
    #[serde(default, deserialize_with = "half_open_calls")]
    pub(super) half_open_calls: Option<usize>,
    #[serde(default, deserialize_with = "max_half_open_wait")]
    pub(super) max_half_open_wait: Option<Duration>,
    #[serde(default, deserialize_with = "window")]
    pub(super) window: Option<WindowName>,
    #[serde(default, deserialize_with = "consecutive_failures")]
    pub(super) consecutive_failures: Option<usize>,
    #[serde(default, deserialize_with = "slow_calls_are_failures")]
    pub(super) slow_calls_are_failures: Option<bool>,
    #[serde(default, deserialize_with = "window_duration")]
    pub(super) window_duration: Option<Duration>,
    #[serde(default, deserialize_with = "window_buckets")]
    pub(super) window_buckets: Option<usize>,
}

impl RawBreaker {
    pub(super) fn is_empty(&self) -> bool {
        self.window_size.is_none()
            && self.min_calls.is_none()
            && self.failure_rate.is_none()
            && self.slow_call_rate.is_none()
            && self.slow_call_duration.is_none()
            && self.open_duration.is_none()
            && self.half_open_calls.is_none()
            && self.max_half_open_wait.is_none()
            && self.window.is_none()
            && self.consecutive_failures.is_none()
            && self.slow_calls_are_failures.is_none()
            && self.window_duration.is_none()
            && self.window_buckets.is_none()
    }

    /// Builds through [`BreakerConfig::builder`]; `prefix` is how the
    /// input spelled the keys (`""`, `"cb_"`, `"breaker."`).
    pub(super) fn build<E: de::Error>(self, prefix: &str) -> Result<BreakerConfig, E> {
        let mut b = BreakerConfig::builder();
        if let Some(n) = self.window_size {
            b = b.window_size(n);
        }
        if let Some(n) = self.min_calls {
            b = b.minimum_calls(n);
        }
        if let Some(Percent(p)) = self.failure_rate {
            b = b.failure_rate_threshold(p);
        }
        if let Some(Percent(p)) = self.slow_call_rate {
            b = b.slow_call_rate_threshold(p);
        }
        if let Some(d) = self.slow_call_duration {
            b = b.slow_call_duration(d);
        }
        if let Some(d) = self.open_duration {
            b = b.open_duration(d);
        }
        if let Some(n) = self.half_open_calls {
            b = b.half_open_calls(n);
        }
        if let Some(d) = self.max_half_open_wait {
            b = b.max_half_open_wait(d);
        }
        if let Some(yes) = self.slow_calls_are_failures {
            b = b.slow_calls_are_failures(yes);
        }
        // The window: named by `window`, or implied by its own keys. A key
        // of another window than the one named is refused, not ignored.
        let timed = self.window_duration.is_some() || self.window_buckets.is_some();
        let counted = self.consecutive_failures.is_some();
        let implied = match (counted, timed) {
            (true, true) => {
                return Err(E::custom(format_args!(
                    "`{prefix}consecutive_failures` and `{prefix}window_duration`/`{prefix}window_buckets` \
                     belong to different windows: set one `{prefix}window`"
                )))
            }
            (true, false) => Some(WindowName::Consecutive),
            (false, true) => Some(WindowName::Time),
            (false, false) => None,
        };
        let name = match (self.window, implied) {
            (Some(named), Some(keys)) if named != keys => {
                let key = match keys {
                    WindowName::Consecutive => "consecutive_failures",
                    _ if self.window_buckets.is_some() => "window_buckets",
                    _ => "window_duration",
                };
                let named = match named {
                    WindowName::Count => "count",
                    WindowName::Time => "time",
                    WindowName::Consecutive => "consecutive",
                };
                return Err(E::custom(format_args!(
                    "`{prefix}{key}` is set, but `{prefix}window` is `{named}`: \
                     name its window, or drop it"
                )));
            }
            (Some(named), _) => named,
            (None, Some(keys)) => keys,
            (None, None) => WindowName::Count,
        };
        let window = match name {
            WindowName::Count => BreakerWindow::Count,
            WindowName::Consecutive => BreakerWindow::Consecutive {
                failures: self.consecutive_failures.unwrap_or(DEFAULT_CONSECUTIVE),
            },
            WindowName::Time => BreakerWindow::Time {
                duration: self.window_duration.unwrap_or(DEFAULT_TIME_WINDOW),
                buckets: self.window_buckets.unwrap_or(DEFAULT_BUCKETS),
            },
        };
        b = b.window(window);
        b.build().map_err(|e| breaker_error(prefix, e))
    }
}

/// The failures in a row a `consecutive` window trips on when the input
/// names the window but not the count: 5, the run gobreaker's default
/// allows before it trips on the sixth.
const DEFAULT_CONSECUTIVE: usize = 5;

/// A `time` window named without its duration: a minute.
const DEFAULT_TIME_WINDOW: Duration = Duration::from_secs(60);

/// A `time` window named without its buckets: 10.
const DEFAULT_BUCKETS: usize = 10;

/// The builder's field name as the input spells it.
fn breaker_key(field: BreakerField) -> &'static str {
    match field {
        BreakerField::MinimumCalls => "min_calls",
        BreakerField::FailureRateThreshold => "failure_rate",
        BreakerField::SlowCallRateThreshold => "slow_call_rate",
        other => other.name(),
    }
}

pub(super) fn breaker_error<E: de::Error>(prefix: &str, e: BreakerConfigError) -> E {
    E::custom(format_args!(
        "invalid value for `{prefix}{}`: {e}",
        breaker_key(e.field())
    ))
}

/// Reads a breaker config from a map of the keys below, each optional
/// (a missing key keeps the builder's default), and checks it with
/// [`BreakerConfig::builder`]; an error names the key.
///
/// | key (alias) | unit | default |
/// |---|---|---|
/// | `window_size` | calls | 50 |
/// | `min_calls` (`minimum_calls`) | calls | 10 |
/// | `failure_rate` (`failure_rate_threshold`) | percent | 50 |
/// | `slow_call_rate` (`slow_call_rate_threshold`) | percent | 100 |
/// | `slow_call_duration` (`slow_threshold`) | duration | off |
/// | `open_duration` | duration | 30 s |
/// | `half_open_calls` | calls | 3 |
/// | `max_half_open_wait` | duration | no limit |
/// | `window` | `count`, `time` or `consecutive` | `count` |
/// | `window_duration` | duration (implies `window = time`) | 60 s |
/// | `window_buckets` | buckets (implies `window = time`) | 10 |
/// | `consecutive_failures` | failures in a row (implies `window = consecutive`) | 5 |
/// | `slow_calls_are_failures` | bool (consecutive: a slow success fails the run) | true |
///
/// Thresholds are percent (`30` is 30 %; `0.3` is refused with a hint). A
/// duration is a number of seconds (`30`, `0.25`) or a string with a unit
/// (`"250ms"`, `"30s"`, `"2m"`). Unknown keys are refused. Numbers may come
/// as strings, as environment variables do, and an explicit null keeps the
/// default.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::BreakerConfig;
///
/// let env = [("CB_FAILURE_RATE", "30"), ("CB_OPEN_DURATION", "45s"), ("OTHER", "x")];
/// let env = env.map(|(k, v)| (k.to_string(), v.to_string()));
/// let config: BreakerConfig = envy::prefixed("CB_").from_iter(env.clone()).unwrap();
/// assert_eq!(config.failure_rate_threshold(), 30.0);
/// assert_eq!(config.open_duration(), Duration::from_secs(45));
/// assert_eq!(config.window_size(), 50);
///
/// let env = [("CB_FAILURE_RATE".to_string(), "0.3".to_string())];
/// let err = envy::prefixed("CB_").from_iter::<_, BreakerConfig>(env).unwrap_err();
/// assert!(err.to_string().contains("`failure_rate`"));
/// assert!(err.to_string().contains("percent"));
/// ```
impl<'de> Deserialize<'de> for BreakerConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawBreaker::deserialize(d)?.build("")
    }
}
