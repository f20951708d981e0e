//! `Deserialize` for [`PolicyConfig`](crate::PolicyConfig): its own keys, and
//! the breaker's, the rate's and the throttle's, nested or flat.

use super::breaker::{breaker_error, RawBreaker};
use super::rate::RawQuota;
use super::throttle::RawThrottle;
use super::*;
use crate::policy::{PolicyConfig, PolicyConfigError, PolicyField};
use crate::retry::{RetryConfig, RetryConfigError};

/// The policy's settings as written, the breaker nested or flat (`cb_`).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a policy config")]
struct RawPolicy {
    #[serde(
        default,
        alias = "bulkhead_max_concurrent",
        deserialize_with = "max_concurrent"
    )]
    max_concurrent: Option<usize>,
    #[serde(default, deserialize_with = "pool_size")]
    pool_size: Option<usize>,
    #[serde(
        default,
        alias = "bulkhead_acquire_timeout",
        deserialize_with = "max_wait"
    )]
    max_wait: Option<Duration>,
    #[serde(default, deserialize_with = "allow_long_max_wait")]
    allow_long_max_wait: Option<bool>,
    #[serde(
        default,
        alias = "bulkhead_max_waiters",
        deserialize_with = "max_waiters"
    )]
    max_waiters: Option<usize>,
    #[serde(default, deserialize_with = "call_timeout")]
    call_timeout: Option<Duration>,
    #[serde(default)]
    breaker: Option<RawBreaker>,

    #[serde(default, deserialize_with = "cb_window_size")]
    cb_window_size: Option<usize>,
    #[serde(default, alias = "cb_minimum_calls", deserialize_with = "cb_min_calls")]
    cb_min_calls: Option<usize>,
    #[serde(default, deserialize_with = "cb_failure_rate")]
    cb_failure_rate: Option<Percent>,
    #[serde(default, deserialize_with = "cb_slow_call_rate")]
    cb_slow_call_rate: Option<Percent>,
    #[serde(
        default,
        alias = "cb_slow_threshold",
        deserialize_with = "cb_slow_call_duration"
    )]
    cb_slow_call_duration: Option<Duration>,
    #[serde(default, deserialize_with = "cb_open_duration")]
    cb_open_duration: Option<Duration>,
    #[serde(default, deserialize_with = "cb_half_open_calls")]
    cb_half_open_calls: Option<usize>,
    #[serde(default, deserialize_with = "cb_max_half_open_wait")]
    cb_max_half_open_wait: Option<Duration>,
    #[serde(default, deserialize_with = "cb_window")]
    cb_window: Option<WindowName>,
    #[serde(default, deserialize_with = "cb_consecutive_failures")]
    cb_consecutive_failures: Option<usize>,
    #[serde(default, deserialize_with = "cb_slow_calls_are_failures")]
    cb_slow_calls_are_failures: Option<bool>,
    #[serde(default, deserialize_with = "cb_window_duration")]
    cb_window_duration: Option<Duration>,
    #[serde(default, deserialize_with = "cb_window_buckets")]
    cb_window_buckets: Option<usize>,

    #[serde(default, deserialize_with = "retry_max_attempts")]
    retry_max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "retry_base_backoff")]
    retry_base_backoff: Option<Duration>,
    #[serde(default, deserialize_with = "retry_max_backoff")]
    retry_max_backoff: Option<Duration>,
    #[serde(default, deserialize_with = "retry_min_attempt_time")]
    retry_min_attempt_time: Option<Duration>,
    #[serde(default, deserialize_with = "retry_budget_tokens")]
    retry_budget_tokens: Option<u32>,
    #[serde(default, deserialize_with = "retry_budget_ratio")]
    retry_budget_ratio: Option<Percent>,

    #[serde(default)]
    rate: Option<RawQuota>,
    #[serde(default, deserialize_with = "rate_cells")]
    rate_cells: Option<u32>,
    #[serde(default, deserialize_with = "rate_period")]
    rate_period: Option<Duration>,
    #[serde(default, deserialize_with = "rate_burst")]
    rate_burst: Option<u32>,

    #[serde(default)]
    throttle: Option<RawThrottle>,
    #[serde(default, deserialize_with = "throttle_k")]
    throttle_k: Option<Number>,
    #[serde(default, deserialize_with = "throttle_max_probability")]
    throttle_max_probability: Option<Number>,
    #[serde(default, deserialize_with = "throttle_window")]
    throttle_window: Option<Duration>,
}

impl RawPolicy {
    fn build<E: de::Error>(self) -> Result<PolicyConfig, E> {
        let flat = RawBreaker {
            window_size: self.cb_window_size,
            min_calls: self.cb_min_calls,
            failure_rate: self.cb_failure_rate,
            slow_call_rate: self.cb_slow_call_rate,
            slow_call_duration: self.cb_slow_call_duration,
            open_duration: self.cb_open_duration,
            half_open_calls: self.cb_half_open_calls,
            max_half_open_wait: self.cb_max_half_open_wait,
            window: self.cb_window,
            consecutive_failures: self.cb_consecutive_failures,
            slow_calls_are_failures: self.cb_slow_calls_are_failures,
            window_duration: self.cb_window_duration,
            window_buckets: self.cb_window_buckets,
        };
        let breaker =
            match self.breaker {
                Some(_) if !flat.is_empty() => return Err(E::custom(
                    "set the breaker either as a nested `breaker` or as `cb_*` fields, not both",
                )),
                Some(nested) => nested.build("breaker.")?,
                None => flat.build("cb_")?,
            };
        let (mut b, size_key) = match (self.max_concurrent, self.pool_size) {
            (Some(_), Some(_)) => {
                return Err(E::custom(
                    "set `max_concurrent` or `pool_size` (max_concurrent = pool_size × 0.8), not both",
                ))
            }
            (Some(n), None) => (PolicyConfig::builder(n), "max_concurrent"),
            (None, Some(pool)) => (PolicyConfig::for_pool(pool), "pool_size"),
            (None, None) => {
                return Err(E::custom(
                    "missing field `max_concurrent` (or `pool_size`, for max_concurrent = pool_size × 0.8)",
                ))
            }
        };
        b = b.breaker(breaker);
        let flat = RawQuota {
            cells: self.rate_cells,
            period: self.rate_period,
            burst: self.rate_burst,
        };
        let rate =
            match self.rate {
                Some(_) if !flat.is_empty() => return Err(E::custom(
                    "set the rate limit either as a nested `rate` or as `rate_*` fields, not both",
                )),
                Some(nested) => Some(nested.build("rate.")?),
                None if flat.is_empty() => None,
                None => Some(flat.build("rate_")?),
            };
        if let Some(quota) = rate {
            b = b.rate(quota);
        }
        let flat = RawThrottle {
            k: self.throttle_k,
            max_probability: self.throttle_max_probability,
            window: self.throttle_window,
        };
        let flat_throttle = !flat.is_empty();
        let throttle = match self.throttle {
            Some(_) if flat_throttle => {
                return Err(E::custom(
                    "set the throttle either as a nested `throttle` or as `throttle_*` fields, not both",
                ))
            }
            Some(nested) => Some(nested.build("throttle.")?),
            None if !flat_throttle => None,
            None => Some(flat.build("throttle_")?),
        };
        if let Some(t) = throttle {
            b = b.throttle(t);
        }
        if let Some(d) = self.max_wait {
            b = b.max_wait(d);
        }
        if self.allow_long_max_wait == Some(true) {
            b = b.allow_long_max_wait();
        }
        if let Some(n) = self.max_waiters {
            b = b.max_waiters(n);
        }
        if let Some(d) = self.call_timeout {
            b = b.call_timeout(d);
        }
        // The retry settings, each over the default of its pair: the
        // builder sets the backoff and the budget two values at a time.
        let d = RetryConfig::DEFAULT;
        let mut r = RetryConfig::builder();
        if let Some(n) = self.retry_max_attempts {
            r = r.max_attempts(n);
        }
        if self.retry_base_backoff.is_some() || self.retry_max_backoff.is_some() {
            r = r.backoff(
                self.retry_base_backoff.unwrap_or(d.base_backoff()),
                self.retry_max_backoff.unwrap_or(d.max_backoff()),
            );
        }
        if let Some(t) = self.retry_min_attempt_time {
            r = r.min_attempt_time(t);
        }
        if self.retry_budget_tokens.is_some() || self.retry_budget_ratio.is_some() {
            r = r.budget(
                self.retry_budget_tokens.unwrap_or(d.budget_max_tokens()),
                self.retry_budget_ratio
                    .map_or(d.budget_ratio_percent(), |Percent(p)| p),
            );
        }
        b = b.retry(r);
        b.build().map_err(|e| match e {
            PolicyConfigError::Breaker(e) => breaker_error("", e),
            // Only the window against `call_timeout` is left to check here.
            PolicyConfigError::Throttle(e) => E::custom(format_args!(
                "invalid value for `{}`: {e}",
                if flat_throttle {
                    "throttle_window"
                } else {
                    "throttle.window"
                }
            )),
            PolicyConfigError::Retry(e) => {
                let key = match e {
                    RetryConfigError::AttemptsZero => "retry_max_attempts",
                    RetryConfigError::BaseBackoffZero => "retry_base_backoff",
                    RetryConfigError::BackoffCapBelowBase { .. } => "retry_max_backoff",
                    RetryConfigError::BudgetTokens { .. } => "retry_budget_tokens",
                    RetryConfigError::BudgetRatio { .. } => "retry_budget_ratio",
                };
                E::custom(format_args!("invalid value for `{key}`: {e}"))
            }
            e => {
                let key = match e.field() {
                    PolicyField::MaxConcurrent => size_key,
                    other => other.name(),
                };
                let hint = match e {
                    PolicyConfigError::MaxWaitTooLong { .. } => {
                        "; in config: allow_long_max_wait = true"
                    }
                    _ => "",
                };
                E::custom(format_args!("invalid value for `{key}`: {e}{hint}"))
            }
        })
    }
}

/// Reads a policy config from a map of the keys below, each optional
/// but for the size, and checks it with [`PolicyConfig::builder`]; an error
/// names the key.
///
/// | key (alias) | unit | default |
/// |---|---|---|
/// | `max_concurrent` (`bulkhead_max_concurrent`) | calls | required, or `pool_size` |
/// | `pool_size` | connections | `max_concurrent = pool_size × 0.8` |
/// | `max_wait` (`bulkhead_acquire_timeout`) | duration | 100 ms |
/// | `allow_long_max_wait` | bool | false: a `max_wait` above 1 s is refused |
/// | `max_waiters` (`bulkhead_max_waiters`) | calls waiting for a slot | no bound |
/// | `call_timeout` | duration | 30 s |
/// | `breaker` | a nested breaker map (see [`BreakerConfig`](crate::BreakerConfig)'s `Deserialize`) | defaults |
/// | `cb_window_size`, `cb_min_calls`, `cb_failure_rate`, … | the breaker's keys, flat, with a `cb_` prefix | defaults |
/// | `retry_max_attempts` | attempts, the first included | 2 |
/// | `retry_base_backoff`, `retry_max_backoff` | duration | 50 ms, 1 s |
/// | `retry_min_attempt_time` | duration | 50 ms |
/// | `retry_budget_tokens` | tokens | 10 |
/// | `retry_budget_ratio` | percent (0.1 to 100) | 10 |
/// | `rate` | a nested rate map (see [`Quota`](crate::rate::Quota)'s `Deserialize`) | no rate limit |
/// | `rate_cells`, `rate_period`, `rate_burst` | the rate's keys, flat, with a `rate_` prefix | no rate limit |
/// | `throttle` | a nested throttle map (see [`ThrottleConfig`](crate::throttle::ThrottleConfig)'s `Deserialize`) | no throttle |
/// | `throttle_k`, `throttle_max_probability`, `throttle_window` | the throttle's keys, flat, with a `throttle_` prefix | no throttle |
///
/// Set exactly one of `max_concurrent` and `pool_size`, and the breaker
/// either nested (TOML, YAML, JSON) or flat (environment variables:
/// `CLIENT_PAYMENTS__CB_FAILURE_RATE=30` read with
/// `envy::prefixed("CLIENT_PAYMENTS__")`), not both. A window above 1023 is
/// refused here; a [`HeapPolicy`](crate::policy::HeapPolicy) runs any
/// window up to that, while a `Policy<C, N>` checks the window against its
/// `N` in [`Policy::new`](crate::Policy::new).
/// Durations, numbers-as-strings and null as for [`BreakerConfig`](crate::BreakerConfig). With
/// `#[serde(flatten)]` inside an application's settings, unknown keys go to
/// the outer struct rather than being refused.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::PolicyConfig;
///
/// let env = [
///     ("CLIENT_PAYMENTS__POOL_SIZE", "10"),
///     ("CLIENT_PAYMENTS__CALL_TIMEOUT", "5"),
///     ("CLIENT_PAYMENTS__CB_FAILURE_RATE", "30"),
///     ("CLIENT_PAYMENTS__CB_SLOW_CALL_DURATION", "2.5s"),
///     ("CLIENT_INVENTORY__MAX_CONCURRENT", "20"),
/// ]
/// .map(|(k, v)| (k.to_string(), v.to_string()));
///
/// let payments: PolicyConfig = envy::prefixed("CLIENT_PAYMENTS__").from_iter(env.clone()).unwrap();
/// assert_eq!(payments.max_concurrent(), 8);
/// assert_eq!(payments.call_timeout(), Duration::from_secs(5));
/// assert_eq!(payments.breaker().failure_rate_threshold(), 30.0);
/// assert_eq!(payments.breaker().slow_call_duration(), Some(Duration::from_millis(2500)));
///
/// let inventory: PolicyConfig = envy::prefixed("CLIENT_INVENTORY__").from_iter(env).unwrap();
/// assert_eq!(inventory.max_concurrent(), 20);
/// assert_eq!(inventory.max_wait(), Duration::from_millis(100));
/// assert_eq!(inventory.max_waiters(), None);
///
/// // A bounded wait queue: at most 32 calls wait for one of the 16 slots.
/// let env = [("SEARCH__MAX_CONCURRENT", "16"), ("SEARCH__MAX_WAITERS", "32")]
///     .map(|(k, v)| (k.to_string(), v.to_string()));
/// let search: PolicyConfig = envy::prefixed("SEARCH__").from_iter(env).unwrap();
/// assert_eq!(search.max_waiters(), Some(32));
///
/// let env = [
///     ("SEARCH__MAX_CONCURRENT", "16"),
///     ("SEARCH__RETRY_MAX_ATTEMPTS", "3"),
///     ("SEARCH__RETRY_MAX_BACKOFF", "500ms"),
///     ("SEARCH__RETRY_BUDGET_RATIO", "20"),
/// ]
/// .map(|(k, v)| (k.to_string(), v.to_string()));
/// let search: PolicyConfig = envy::prefixed("SEARCH__").from_iter(env).unwrap();
/// assert_eq!(search.retry().max_attempts(), 3);
/// assert_eq!(search.retry().max_backoff(), Duration::from_millis(500));
/// assert_eq!(search.retry().budget_ratio_percent(), 20.0);
///
/// let env = [("SEARCH__MAX_CONCURRENT", "16"), ("SEARCH__RETRY_MAX_ATTEMPTS", "0")]
///     .map(|(k, v)| (k.to_string(), v.to_string()));
/// let err = envy::prefixed("SEARCH__").from_iter::<_, PolicyConfig>(env).unwrap_err();
/// assert!(err.to_string().contains("`retry_max_attempts`"));
/// ```
impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawPolicy::deserialize(d)?.build()
    }
}
