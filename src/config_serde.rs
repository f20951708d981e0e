//! `Deserialize` for the configs (feature `serde`), validated by the same
//! `const` builders as code-built configs, so a bad value is refused with the
//! field named instead of being clamped.
//!
//! Every field is optional: a missing one keeps its default. Unknown fields
//! are refused, so a typo (`failure_rat`) is an error, not a silent default.
//! Values may be numbers, booleans or strings holding them (`"30"`,
//! `"0.25"`, `"true"`), so environment variables (envy), quoted YAML values
//! and `#[serde(flatten)]` all work; this needs a self-describing format
//! (`deserialize_any`), which every config format is. Flattened into an
//! application's own settings struct, unknown keys go to that struct (a
//! serde limitation of `flatten`), so typos are caught only when the
//! config is read on its own.
//!
//! # Breaker ([`BreakerConfig`])
//!
//! | key (alias) | unit | default |
//! |---|---|---|
//! | `window_size` | calls | 50 |
//! | `min_calls` (`minimum_calls`) | calls | 10 |
//! | `failure_rate` (`failure_rate_threshold`) | percent | 50 |
//! | `slow_call_rate` (`slow_call_rate_threshold`) | percent | 100 |
//! | `slow_call_duration` (`slow_threshold`) | duration | off |
//! | `open_duration` | duration | 30 s |
//! | `half_open_calls` | calls | 3 |
//! | `max_half_open_wait` | duration | no limit |
//!
//! Thresholds are percent: `30` means 30 %, kept to a hundredth of a
//! percent, and must be in (1, 100] as kept, the builder's rule. A value in
//! (0, 1] (a fraction, as in `cb_failure_rate: 0.30`) is refused with a hint
//! that percent is meant; a trailing `%` is accepted (`"30%"`).
//!
//! # Policy ([`PolicyConfig`])
//!
//! | key (alias) | unit | default |
//! |---|---|---|
//! | `max_concurrent` (`bulkhead_max_concurrent`) | calls | required, or `pool_size` |
//! | `pool_size` | connections | `max_concurrent = pool_size × 0.8` ([`PolicyConfig::for_pool`]) |
//! | `max_wait` (`bulkhead_acquire_timeout`) | duration | 100 ms |
//! | `allow_long_max_wait` | bool | false (a `max_wait` above 1 s is refused) |
//! | `max_waiters` (`bulkhead_max_waiters`) | calls waiting for a slot | no bound |
//! | `call_timeout` | duration | 30 s |
//! | `breaker` | a nested breaker table, as above | the breaker's defaults |
//! | `cb_window_size`, `cb_min_calls`, … | the breaker's keys with a `cb_` prefix | |
//! | `retry_max_attempts` | attempts, the first included | 2 (one retry) |
//! | `retry_base_backoff` | duration | 50 ms |
//! | `retry_max_backoff` | duration | 1 s |
//! | `retry_min_attempt_time` | duration | 50 ms |
//! | `retry_budget_tokens` | tokens | 10 |
//! | `retry_budget_ratio` | percent of a token per success | 10 |
//! | `rate` | a nested rate table: `cells`, `period`, `burst` (see [Rate](#rate-quota)) | no rate limit |
//! | `rate_cells`, `rate_period`, `rate_burst` | the rate's keys, flat, with a `rate_` prefix | no rate limit |
//! | `throttle` | a nested throttle table: `k`, `max_probability`, `window` | no throttle |
//! | `throttle_k`, `throttle_max_probability`, `throttle_window` | the throttle's keys, flat, with a `throttle_` prefix | no throttle |
//!
//! The retry keys are [`RetryConfig`](crate::retry::RetryConfig)'s, checked
//! by its builder: zero attempts, a zero base backoff, a cap below the base,
//! a budget of zero tokens or above 1 000 000 and a ratio outside 0.1–100 %
//! are refused, naming the key. They apply to calls made with
//! [`Policy::call_idempotent`](crate::Policy::call_idempotent) (and the
//! tower layer's `idempotent()`) only.
//!
//! Exactly one of `max_concurrent` and `pool_size` must be set. The breaker
//! is given either nested (`breaker: { failure_rate: 30 }`, for TOML, YAML,
//! JSON) or flat with the `cb_` prefix (`cb_failure_rate = 30`, for
//! environment variables: `CLIENT_PAYMENTS__CB_FAILURE_RATE=30`
//! read with `envy::prefixed("CLIENT_PAYMENTS__")`); setting both is refused.
//! A `window_size` above 1023
//! ([`BreakerConfig::MAX_WINDOW_SIZE`](crate::BreakerConfig::MAX_WINDOW_SIZE))
//! is refused here, naming the key. A window read at run time is best run
//! by a [`HeapPolicy`](crate::policy::HeapPolicy), which takes any window
//! up to that; a `Policy<C, N>` checks the window against its compile-time
//! capacity `N` (64 by default) in [`Policy::new`](crate::Policy::new),
//! which names `window_size`.
//!
//! # Rate ([`Quota`])
//!
//! | key | unit | default |
//! |---|---|---|
//! | `cells` | cells per period | required |
//! | `period` | duration | 1 s |
//! | `burst` | cells at once | `cells` |
//!
//! In a policy, nested (`rate: { cells: 50, burst: 10 }`) or flat with the
//! `rate_` prefix (`RATE_CELLS=100`, `RATE_PERIOD=1m`: environment
//! variables), not both; without either the policy has no rate limit.
//! Three keys rather than one `"50/s"` string: each is one typed value with
//! its own error (zero cells, a zero burst, a zero period or one above 146
//! years are refused naming `rate_cells`, `rate_burst`, `rate_period`), the
//! period takes every duration the other keys take (`"1m"`, `"2.5s"`), and
//! the flat form follows the `cb_` and `retry_` keys. A request for more
//! cells than the burst is that request's error, not the config's.
//!
//! # Partition ([`PartitionShares`])
//!
//! | key | unit | default |
//! |---|---|---|
//! | `shares` | slots per class, `K` of them | required, or `capacity` and `percent` |
//! | `capacity` | slots, split by `percent` | |
//! | `percent` | percent of `capacity` per class, `K` of them, adding up to 100 | |
//! | `max_waiters` | calls of each class waiting | no bound |
//!
//! Numbers only: the class names are `&'static str` in code, and
//! [`PartitionedBulkhead::from_shares`](crate::partition::PartitionedBulkhead::from_shares)
//! pairs them. A list is a sequence or a comma-separated string (an
//! environment variable: `SEARCH_PARTITION_SHARES=5,3,2` read with
//! `envy::prefixed("SEARCH_PARTITION_")`, as `RATE_CELLS` is read for a
//! [`Quota`]). Checked as it is read (the wrong count, naming `K`, a zero
//! share, a percentage rounding to none, a sum other than 100, values
//! above the maximums, both forms), so that a value read always builds.
//!
//! # Durations
//!
//! A number is seconds, whole or not (`30`, `0.25`, as Python settings such
//! as pydantic's write `cb_open_duration: float = 30.0`); a string may carry a
//! unit: `"250ms"`, `"30s"`, `"2m"`, `"1h"`, `"1.5s"`, `"500us"`, `"10ns"`
//! (no unit: seconds). Negative, NaN, infinite and unparsable values are
//! refused with the field named; zero is refused where the builder refuses
//! it (every breaker duration, `call_timeout`) and means "do not wait" for
//! `max_wait`.

use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

use crate::breaker::{BreakerConfig, BreakerConfigError, BreakerField, BreakerWindow};
use crate::partition::{PartitionShares, SharesFault};
use crate::policy::{PolicyConfig, PolicyConfigError, PolicyField};
use crate::rate::{Quota, QuotaError};
use crate::retry::{RetryConfig, RetryConfigError};
use crate::throttle::{ThrottleConfig, ThrottleConfigError};

// ------------------------------------------------------------ field values

/// Why a value of the right shape is still refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    Negative,
    NotFinite,
    NotANumber,
    NotAWholeNumber,
    NotABool,
    TooLarge,
    Unit,
    NotAWindow,
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bad::Negative => "must not be negative",
            Bad::NotFinite => "must be a finite number",
            Bad::NotANumber => "is not a number",
            Bad::NotAWholeNumber => "must be a whole number",
            Bad::NotABool => "must be true or false",
            Bad::TooLarge => "is too large",
            Bad::Unit => {
                "has an unknown unit: write a number of seconds, or use ns, us, ms, s, m or h"
            }
            Bad::NotAWindow => "must be `count`, `time` or `consecutive`",
        })
    }
}

/// A kind of field value, read from any self-describing input.
trait FieldValue: Sized {
    const EXPECTING: &'static str;
    fn from_u64(v: u64) -> Result<Self, Bad>;
    fn from_f64(v: f64) -> Result<Self, Bad>;
    fn from_str(v: &str) -> Result<Self, Bad>;
    fn from_i64(v: i64) -> Result<Self, Bad> {
        match u64::try_from(v) {
            Ok(v) => Self::from_u64(v),
            Err(_) => Err(Bad::Negative),
        }
    }
    fn from_bool(_: bool) -> Option<Self> {
        None
    }
}

/// A count of calls, probes or connections.
impl FieldValue for usize {
    const EXPECTING: &'static str = "a whole number";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        usize::try_from(v).map_err(|_| Bad::TooLarge)
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        if v.is_nan() || v.is_infinite() {
            Err(Bad::NotFinite)
        } else if v < 0.0 {
            Err(Bad::Negative)
        } else if v % 1.0 != 0.0 {
            Err(Bad::NotAWholeNumber)
        } else if v >= u64::MAX as f64 {
            Err(Bad::TooLarge)
        } else {
            Self::from_u64(v as u64)
        }
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        let v = v.trim();
        match v.parse::<u64>() {
            Ok(n) => Self::from_u64(n),
            Err(_) => match v.parse::<f64>() {
                Ok(x) => Self::from_f64(x),
                Err(_) => Err(Bad::NotANumber),
            },
        }
    }
}

/// An attempt or token count.
impl FieldValue for u32 {
    const EXPECTING: &'static str = "a whole number";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        u32::try_from(v).map_err(|_| Bad::TooLarge)
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        usize::from_f64(v).and_then(|n| u32::try_from(n).map_err(|_| Bad::TooLarge))
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        usize::from_str(v).and_then(|n| u32::try_from(n).map_err(|_| Bad::TooLarge))
    }
}

/// A threshold in percent. Range and the fraction hint are the builder's.
#[derive(Debug, Clone, Copy)]
struct Percent(f32);

impl FieldValue for Percent {
    const EXPECTING: &'static str = "a percentage (30 means 30 %)";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        Ok(Percent(v as f32))
    }
    fn from_i64(v: i64) -> Result<Self, Bad> {
        // Negative thresholds reach the builder, whose message gives the range.
        Ok(Percent(v as f32))
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        Ok(Percent(v as f32))
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        let v = v.trim();
        let v = v.strip_suffix('%').unwrap_or(v).trim_end();
        v.parse::<f64>()
            .map(Self::from_f64)
            .unwrap_or(Err(Bad::NotANumber))
    }
}

/// A plain number (the throttle's `k` and its maximum probability): the
/// range is the builder's.
#[derive(Debug, Clone, Copy)]
struct Number(f64);

impl FieldValue for Number {
    const EXPECTING: &'static str = "a number";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        Ok(Number(v as f64))
    }
    fn from_i64(v: i64) -> Result<Self, Bad> {
        Ok(Number(v as f64))
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        Ok(Number(v))
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        match v.trim().parse::<f64>() {
            Ok(x) if x.is_nan() => Err(Bad::NotANumber),
            Ok(x) => Ok(Number(x)),
            Err(_) => Err(Bad::NotANumber),
        }
    }
}

impl FieldValue for Duration {
    const EXPECTING: &'static str =
        "a duration: a number of seconds (30, 0.25) or a string with a unit (\"250ms\", \"30s\", \"2m\")";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        Ok(Duration::from_secs(v))
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        if v.is_nan() || v.is_infinite() {
            Err(Bad::NotFinite)
        } else if v < 0.0 {
            Err(Bad::Negative)
        } else {
            Duration::try_from_secs_f64(v).map_err(|_| Bad::TooLarge)
        }
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        parse_duration(v)
    }
}

impl FieldValue for bool {
    const EXPECTING: &'static str = "true or false";
    fn from_u64(_: u64) -> Result<Self, Bad> {
        Err(Bad::NotABool)
    }
    fn from_f64(_: f64) -> Result<Self, Bad> {
        Err(Bad::NotABool)
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if v.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err(Bad::NotABool)
        }
    }
    fn from_bool(v: bool) -> Option<Self> {
        Some(v)
    }
}

/// Which breaker window (`cb_window`), by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowName {
    Count,
    Time,
    Consecutive,
}

impl FieldValue for WindowName {
    const EXPECTING: &'static str = "`count`, `time` or `consecutive`";
    fn from_u64(_: u64) -> Result<Self, Bad> {
        Err(Bad::NotAWindow)
    }
    fn from_f64(_: f64) -> Result<Self, Bad> {
        Err(Bad::NotAWindow)
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("count") {
            Ok(WindowName::Count)
        } else if v.eq_ignore_ascii_case("time") {
            Ok(WindowName::Time)
        } else if v.eq_ignore_ascii_case("consecutive") {
            Ok(WindowName::Consecutive)
        } else {
            Err(Bad::NotAWindow)
        }
    }
}

/// `<number>[.<digits>][unit]`, exact to the nanosecond (no float rounding):
/// `"250ms"`, `"1.5s"`, `"2m"`, `"30"` (seconds).
fn parse_duration(s: &str) -> Result<Duration, Bad> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(Bad::Negative);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let unit_ns: u128 = match unit.trim_start() {
        "" | "s" | "sec" | "secs" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ if number.is_empty() => return Err(Bad::NotANumber),
        _ => return Err(Bad::Unit),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(Bad::NotANumber);
    }
    let mut ns: u128 = 0;
    for d in whole.bytes() {
        ns = ns
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(d - b'0')))
            .ok_or(Bad::TooLarge)?;
    }
    ns = ns.checked_mul(unit_ns).ok_or(Bad::TooLarge)?;
    // Digits past the 18th are below a nanosecond for every unit: dropped.
    let (mut num, mut den) = (0u128, 1u128);
    for d in frac.bytes().take(18) {
        num = num * 10 + u128::from(d - b'0');
        den *= 10;
    }
    ns = ns.checked_add(num * unit_ns / den).ok_or(Bad::TooLarge)?;
    let secs = u64::try_from(ns / 1_000_000_000).map_err(|_| Bad::TooLarge)?;
    Ok(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

/// Reads one field's value, naming the field in every error.
struct FieldVisitor<T> {
    field: &'static str,
    _value: PhantomData<T>,
}

impl<T: FieldValue> FieldVisitor<T> {
    fn new(field: &'static str) -> Self {
        FieldVisitor {
            field,
            _value: PhantomData,
        }
    }

    fn check<E: de::Error>(&self, r: Result<T, Bad>, shown: &dyn fmt::Display) -> Result<T, E> {
        r.map_err(|why| {
            E::custom(format_args!(
                "invalid value for `{}`: {} {}",
                self.field, shown, why
            ))
        })
    }
}

impl<'de, T: FieldValue> Visitor<'de> for FieldVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for `{}`", T::EXPECTING, self.field)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        match T::from_bool(v) {
            Some(v) => Ok(Some(v)),
            None => Err(E::invalid_type(Unexpected::Bool(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.check(T::from_u64(v), &v).map(Some)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.check(T::from_i64(v), &v).map(Some)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.check(T::from_f64(v), &v).map(Some)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.check(T::from_str(v), &format_args!("{v:?}")).map(Some)
    }

    /// An explicit `null` keeps the default.
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// One `deserialize_with` function per field, so each error names its field.
macro_rules! fields {
    ($($name:ident: $ty:ty = $key:literal;)*) => {$(
        fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            d.deserialize_any(FieldVisitor::<$ty>::new($key))
        }
    )*};
}

fields! {
    window_size: usize = "window_size";
    min_calls: usize = "min_calls";
    failure_rate: Percent = "failure_rate";
    slow_call_rate: Percent = "slow_call_rate";
    slow_call_duration: Duration = "slow_call_duration";
    open_duration: Duration = "open_duration";
    half_open_calls: usize = "half_open_calls";
    max_half_open_wait: Duration = "max_half_open_wait";
    window: WindowName = "window";
    consecutive_failures: usize = "consecutive_failures";
    slow_calls_are_failures: bool = "slow_calls_are_failures";
    window_duration: Duration = "window_duration";
    window_buckets: usize = "window_buckets";

    cb_window_size: usize = "cb_window_size";
    cb_min_calls: usize = "cb_min_calls";
    cb_failure_rate: Percent = "cb_failure_rate";
    cb_slow_call_rate: Percent = "cb_slow_call_rate";
    cb_slow_call_duration: Duration = "cb_slow_call_duration";
    cb_open_duration: Duration = "cb_open_duration";
    cb_half_open_calls: usize = "cb_half_open_calls";
    cb_max_half_open_wait: Duration = "cb_max_half_open_wait";
    cb_window: WindowName = "cb_window";
    cb_consecutive_failures: usize = "cb_consecutive_failures";
    cb_slow_calls_are_failures: bool = "cb_slow_calls_are_failures";
    cb_window_duration: Duration = "cb_window_duration";
    cb_window_buckets: usize = "cb_window_buckets";

    max_concurrent: usize = "max_concurrent";
    pool_size: usize = "pool_size";
    max_wait: Duration = "max_wait";
    allow_long_max_wait: bool = "allow_long_max_wait";
    max_waiters: usize = "max_waiters";
    call_timeout: Duration = "call_timeout";

    retry_max_attempts: u32 = "retry_max_attempts";
    retry_base_backoff: Duration = "retry_base_backoff";
    retry_max_backoff: Duration = "retry_max_backoff";
    retry_min_attempt_time: Duration = "retry_min_attempt_time";
    retry_budget_tokens: u32 = "retry_budget_tokens";
    retry_budget_ratio: Percent = "retry_budget_ratio";

    cells: u32 = "cells";
    period: Duration = "period";
    burst: u32 = "burst";
    rate_cells: u32 = "rate_cells";
    rate_period: Duration = "rate_period";
    rate_burst: u32 = "rate_burst";

    k: Number = "k";
    max_probability: Number = "max_probability";
    throttle_window_nested: Duration = "window";
    throttle_k: Number = "throttle_k";
    throttle_max_probability: Number = "throttle_max_probability";
    throttle_window: Duration = "throttle_window";

    capacity: usize = "capacity";
}

// ------------------------------------------------------------ the breaker

/// The breaker's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a circuit breaker config")]
struct RawBreaker {
    #[serde(default, deserialize_with = "window_size")]
    window_size: Option<usize>,
    #[serde(default, alias = "minimum_calls", deserialize_with = "min_calls")]
    min_calls: Option<usize>,
    #[serde(
        default,
        alias = "failure_rate_threshold",
        deserialize_with = "failure_rate"
    )]
    failure_rate: Option<Percent>,
    #[serde(
        default,
        alias = "slow_call_rate_threshold",
        deserialize_with = "slow_call_rate"
    )]
    slow_call_rate: Option<Percent>,
    #[serde(
        default,
        alias = "slow_threshold",
        deserialize_with = "slow_call_duration"
    )]
    slow_call_duration: Option<Duration>,
    #[serde(default, deserialize_with = "open_duration")]
    open_duration: Option<Duration>,
    #[serde(default, deserialize_with = "half_open_calls")]
    half_open_calls: Option<usize>,
    #[serde(default, deserialize_with = "max_half_open_wait")]
    max_half_open_wait: Option<Duration>,
    #[serde(default, deserialize_with = "window")]
    window: Option<WindowName>,
    #[serde(default, deserialize_with = "consecutive_failures")]
    consecutive_failures: Option<usize>,
    #[serde(default, deserialize_with = "slow_calls_are_failures")]
    slow_calls_are_failures: Option<bool>,
    #[serde(default, deserialize_with = "window_duration")]
    window_duration: Option<Duration>,
    #[serde(default, deserialize_with = "window_buckets")]
    window_buckets: Option<usize>,
}

impl RawBreaker {
    fn is_empty(&self) -> bool {
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
    fn build<E: de::Error>(self, prefix: &str) -> Result<BreakerConfig, E> {
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

fn breaker_error<E: de::Error>(prefix: &str, e: BreakerConfigError) -> E {
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

// ------------------------------------------------------------ the rate

/// A rate limit's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a rate limit: cells, period, burst")]
struct RawQuota {
    #[serde(default, deserialize_with = "cells")]
    cells: Option<u32>,
    #[serde(default, deserialize_with = "period")]
    period: Option<Duration>,
    #[serde(default, deserialize_with = "burst")]
    burst: Option<u32>,
}

impl RawQuota {
    fn is_empty(&self) -> bool {
        self.cells.is_none() && self.period.is_none() && self.burst.is_none()
    }

    /// Builds through [`Quota::try_new`] and [`Quota::try_burst`]; `prefix`
    /// is how the input spelled the keys (`""`, `"rate_"`, `"rate."`).
    fn build<E: de::Error>(self, prefix: &str) -> Result<Quota, E> {
        let Some(cells) = self.cells else {
            return Err(E::custom(format_args!(
                "missing field `{prefix}cells` (the cells per period of the rate limit)"
            )));
        };
        let period = self.period.unwrap_or(Duration::from_secs(1));
        let quota = Quota::try_new(cells, period).map_err(|e| quota_error(prefix, e))?;
        match self.burst {
            Some(burst) => quota.try_burst(burst).map_err(|e| quota_error(prefix, e)),
            None => Ok(quota),
        }
    }
}

/// The key a [`QuotaError`] is about, as the input spells it.
fn quota_error<E: de::Error>(prefix: &str, e: QuotaError) -> E {
    let key = match e {
        QuotaError::ZeroCells => "cells",
        QuotaError::ZeroPeriod | QuotaError::PeriodTooLong => "period",
        // `BurstTooLong` for the default burst (the cells) is the cells'.
        _ => "burst",
    };
    E::custom(format_args!("invalid value for `{prefix}{key}`: {e}"))
}

/// Reads a rate limit from a map of the keys below and checks it with
/// [`Quota::try_new`] and [`Quota::try_burst`]; an error names the key.
///
/// | key | unit | default |
/// |---|---|---|
/// | `cells` | cells per period (at least 1) | required |
/// | `period` | duration (above zero, at most 146 years) | 1 s |
/// | `burst` | cells taken at once (at least 1) | `cells` |
///
/// A duration is a number of seconds or a string with a unit (`"1m"`,
/// `"250ms"`), as for the other configs; numbers may come as strings, and
/// unknown keys are refused. Asking for more cells than the burst in one
/// request is an error of that request
/// ([`RateError::ExceedsBurst`](crate::rate::RateError::ExceedsBurst)),
/// not of the config.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::rate::Quota;
///
/// let env = [("RATE_CELLS", "100"), ("RATE_PERIOD", "1m"), ("RATE_BURST", "10")];
/// let env = env.map(|(k, v)| (k.to_string(), v.to_string()));
/// let quota: Quota = envy::prefixed("RATE_").from_iter(env).unwrap();
/// assert_eq!(quota, Quota::per_minute(100).burst(10));
/// assert_eq!(quota.emission_interval(), Duration::from_millis(600));
///
/// let env = [("RATE_CELLS".to_string(), "50".to_string()), ("RATE_BURST".to_string(), "0".to_string())];
/// let err = envy::prefixed("RATE_").from_iter::<_, Quota>(env).unwrap_err();
/// assert!(err.to_string().contains("`burst`"), "{err}");
/// ```
impl<'de> Deserialize<'de> for Quota {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawQuota::deserialize(d)?.build("")
    }
}

// ------------------------------------------------------------ the throttle

/// A throttle's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an adaptive throttle: k, max_probability, window"
)]
struct RawThrottle {
    #[serde(default, deserialize_with = "k")]
    k: Option<Number>,
    #[serde(default, deserialize_with = "max_probability")]
    max_probability: Option<Number>,
    #[serde(default, deserialize_with = "throttle_window_nested")]
    window: Option<Duration>,
}

impl RawThrottle {
    fn is_empty(&self) -> bool {
        self.k.is_none() && self.max_probability.is_none() && self.window.is_none()
    }

    /// Builds through [`ThrottleConfig::builder`]; `prefix` is how the
    /// input spelled the keys (`""`, `"throttle_"`, `"throttle."`).
    fn build<E: de::Error>(self, prefix: &str) -> Result<ThrottleConfig, E> {
        let mut b = ThrottleConfig::builder();
        if let Some(Number(k)) = self.k {
            b = b.k(k);
        }
        if let Some(Number(p)) = self.max_probability {
            b = b.max_probability(p);
        }
        if let Some(w) = self.window {
            b = b.window(w);
        }
        b.build().map_err(|e| throttle_error(prefix, e))
    }
}

/// A [`ThrottleConfigError`] naming its key as the input spells it.
fn throttle_error<E: de::Error>(prefix: &str, e: ThrottleConfigError) -> E {
    E::custom(format_args!(
        "invalid value for `{prefix}{}`: {e}",
        e.field()
    ))
}

/// Reads an adaptive throttle's settings from a map of the keys below
/// and checks them with [`ThrottleConfig::builder`]; an error names the
/// key.
///
/// | key | unit | default |
/// |---|---|---|
/// | `k` | a multiplier, at least 1 | 2 |
/// | `max_probability` | a probability in [0, 1] (0.9 is 90 %) | 0.9 |
/// | `window` | duration (at least 20 ns) | 2 min |
///
/// In a policy: nested (`throttle: { k: 1.5 }`; `throttle: {}` for the
/// defaults) or flat with a `throttle_` prefix (`THROTTLE_K=1.5`), not
/// both; the window is then checked against the policy's `call_timeout`.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::throttle::ThrottleConfig;
///
/// let env = [("THROTTLE_K", "1.5"), ("THROTTLE_WINDOW", "1m")];
/// let env = env.map(|(k, v)| (k.to_string(), v.to_string()));
/// let t: ThrottleConfig = envy::prefixed("THROTTLE_").from_iter(env).unwrap();
/// assert_eq!((t.k(), t.window(), t.max_probability()), (1.5, Duration::from_secs(60), 0.9));
///
/// let env = [("THROTTLE_MAX_PROBABILITY".to_string(), "90".to_string())];
/// let err = envy::prefixed("THROTTLE_").from_iter::<_, ThrottleConfig>(env).unwrap_err();
/// assert!(err.to_string().contains("`max_probability`"), "{err}");
/// ```
impl<'de> Deserialize<'de> for ThrottleConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawThrottle::deserialize(d)?.build("")
    }
}

// ------------------------------------------------------------ the partition

/// A percentage of a partition's capacity: a whole number, at most 255
/// (the sum is checked against 100 after).
impl FieldValue for u8 {
    const EXPECTING: &'static str = "a whole number";
    fn from_u64(v: u64) -> Result<Self, Bad> {
        u8::try_from(v).map_err(|_| Bad::TooLarge)
    }
    fn from_f64(v: f64) -> Result<Self, Bad> {
        usize::from_f64(v).and_then(|n| u8::try_from(n).map_err(|_| Bad::TooLarge))
    }
    fn from_str(v: &str) -> Result<Self, Bad> {
        usize::from_str(v).and_then(|n| u8::try_from(n).map_err(|_| Bad::TooLarge))
    }
}

/// One entry of a list, a [`FieldVisitor`]'s value; null is refused.
struct Entry<T> {
    field: &'static str,
    _value: PhantomData<T>,
}

impl<'de, T: FieldValue> de::DeserializeSeed<'de> for Entry<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        match d.deserialize_any(FieldVisitor::<T>::new(self.field))? {
            Some(v) => Ok(v),
            None => Err(de::Error::custom(format_args!(
                "invalid value for `{}`: an entry is null",
                self.field
            ))),
        }
    }
}

/// A list of `K` values, one per class: a sequence, or a string of
/// comma-separated values (an environment variable); a lone number is a
/// list of one. The wrong count is refused naming the field and `K`.
struct ListVisitor<T, const K: usize> {
    field: &'static str,
    _value: PhantomData<T>,
}

impl<T, const K: usize> ListVisitor<T, K> {
    fn new(field: &'static str) -> Self {
        ListVisitor {
            field,
            _value: PhantomData,
        }
    }

    fn count<E: de::Error>(&self, n: usize) -> Result<(), E> {
        if n == K {
            return Ok(());
        }
        Err(E::custom(format_args!(
            "invalid value for `{}`: {n} {}, expected {K} (one per class)",
            self.field,
            if n == 1 { "entry" } else { "entries" }
        )))
    }

    fn one<E: de::Error>(
        self,
        v: Result<T, Bad>,
        shown: &dyn fmt::Display,
    ) -> Result<Option<[T; K]>, E>
    where
        T: FieldValue + Copy + Default,
    {
        let v = FieldVisitor::<T>::new(self.field).check(v, shown)?;
        self.count(1)?;
        Ok(Some([v; K]))
    }
}

impl<'de, T: FieldValue + Copy + Default, const K: usize> Visitor<'de> for ListVisitor<T, K> {
    type Value = Option<[T; K]>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a list of {K} (one per class), each {}, or a string of them separated by commas, for `{}`",
            T::EXPECTING,
            self.field
        )
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut list = [T::default(); K];
        let mut n = 0usize;
        for slot in &mut list {
            match seq.next_element_seed(Entry::<T> {
                field: self.field,
                _value: PhantomData,
            })? {
                Some(v) => *slot = v,
                None => return self.count(n).map(|()| None),
            }
            n += 1;
        }
        // Past `K`: only counted, whatever they are.
        while seq.next_element::<de::IgnoredAny>()?.is_some() {
            n = n.saturating_add(1);
        }
        self.count(n)?;
        Ok(Some(list))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let mut list = [T::default(); K];
        let mut n = 0usize;
        if !v.trim().is_empty() {
            let field = FieldVisitor::<T>::new(self.field);
            for part in v.split(',') {
                if let Some(slot) = list.get_mut(n) {
                    *slot = field.check(T::from_str(part), &format_args!("{:?}", part.trim()))?;
                }
                n = n.saturating_add(1);
            }
        }
        self.count(n)?;
        Ok(Some(list))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.one(T::from_u64(v), &v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.one(T::from_i64(v), &v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.one(T::from_f64(v), &v)
    }

    /// An explicit `null` is the key not given.
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

fn shares_list<'de, D: Deserializer<'de>, const K: usize>(
    d: D,
) -> Result<Option<[usize; K]>, D::Error> {
    d.deserialize_any(ListVisitor::<usize, K>::new("shares"))
}

fn percent_list<'de, D: Deserializer<'de>, const K: usize>(
    d: D,
) -> Result<Option<[u8; K]>, D::Error> {
    d.deserialize_any(ListVisitor::<u8, K>::new("percent"))
}

/// A partition's numbers as written; `None` is a key not given.
#[derive(Debug, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "partition shares: `shares`, or `capacity` and `percent`; `max_waiters`"
)]
struct RawShares<const K: usize> {
    #[serde(default, deserialize_with = "shares_list")]
    shares: Option<[usize; K]>,
    #[serde(default, deserialize_with = "capacity")]
    capacity: Option<usize>,
    #[serde(default, deserialize_with = "percent_list")]
    percent: Option<[u8; K]>,
    #[serde(default, deserialize_with = "max_waiters")]
    max_waiters: Option<usize>,
}

impl<const K: usize> RawShares<K> {
    /// Checked as
    /// [`PartitionedBulkhead::from_shares`](crate::partition::PartitionedBulkhead::from_shares)
    /// checks it, so that
    /// a value read always builds; an error names the key.
    fn build<E: de::Error>(self) -> Result<PartitionShares<K>, E> {
        let mut shares = match (self.shares, self.capacity, self.percent) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(E::custom(
                    "set `shares` (slots per class) or `capacity` and `percent`, not both",
                ))
            }
            (Some(slots), None, None) => PartitionShares::slots(slots),
            (None, Some(capacity), Some(percent)) => PartitionShares::percent(capacity, percent),
            (None, Some(_), None) => {
                return Err(E::custom(
                    "missing field `percent` (each class's percent of `capacity`)",
                ))
            }
            (None, None, Some(_)) => {
                return Err(E::custom(
                    "missing field `capacity` (the slots that `percent` splits)",
                ))
            }
            (None, None, None) => {
                return Err(E::custom(
                    "missing field `shares` (slots per class), or `capacity` and `percent`",
                ))
            }
        };
        if let Some(n) = self.max_waiters {
            shares = shares.with_max_waiters(n);
        }
        match shares.check() {
            Ok(_) => Ok(shares),
            Err(fault) => Err(shares_error(fault, &self.percent)),
        }
    }
}

/// A [`SharesFault`] naming its key; `percent` is the percentages, if the
/// shares were given so.
fn shares_error<E: de::Error, const K: usize>(fault: SharesFault, percent: &Option<[u8; K]>) -> E {
    let max = crate::Bulkhead::<()>::MAX_PERMITS;
    match (fault, percent) {
        (SharesFault::NoClasses, _) => {
            E::custom("a partitioned bulkhead needs at least one class (`K` is 0)")
        }
        (SharesFault::ZeroShare { index }, None) => E::custom(format_args!(
            "invalid value for `shares`: class {index} has a share of 0 slots: \
             every class needs at least 1"
        )),
        (SharesFault::ZeroShare { index }, Some(percent)) => E::custom(format_args!(
            "invalid value for `percent`: class {index}'s {} % of `capacity` rounds to 0 slots: \
             every class needs at least 1",
            percent[index]
        )),
        (SharesFault::ShareTooLarge { index: Some(index), requested }, _) => {
            E::custom(format_args!(
                "invalid value for `shares`: class {index} asks for {requested} slots, \
                 above the maximum of {max}"
            ))
        }
        (SharesFault::ShareTooLarge { index: None, requested }, _) => E::custom(format_args!(
            "invalid value for `capacity`: {requested} slots, above the maximum of {max}"
        )),
        (SharesFault::PercentNot100 { sum }, _) => E::custom(format_args!(
            "invalid value for `percent`: the percentages add up to {sum}, not 100"
        )),
        (SharesFault::MaxWaitersTooLarge { requested }, _) => E::custom(format_args!(
            "invalid value for `max_waiters`: {requested} waiters per class, above the maximum of {}",
            crate::Bulkhead::<()>::MAX_WAITERS
        )),
    }
}

/// Reads a partitioned bulkhead's numbers (its class names stay in code)
/// from a map of the keys below and checks them as
/// [`PartitionedBulkhead::from_shares`](crate::partition::PartitionedBulkhead::from_shares) does, so that a value read always
/// builds a bulkhead; an error names the key.
///
/// | key | unit | default |
/// |---|---|---|
/// | `shares` | slots per class, `K` of them: `[5, 3, 2]` or `"5,3,2"` | required, or `capacity` and `percent` |
/// | `capacity` | slots (at most `Bulkhead::MAX_PERMITS`), split by `percent` | |
/// | `percent` | percent of `capacity` per class, `K` of them, adding up to 100 | |
/// | `max_waiters` | calls of each class waiting for a slot | no bound |
///
/// Set `shares`, or `capacity` with `percent`, not both. A list is a
/// sequence or a string of comma-separated numbers (an environment
/// variable); a list of other than `K` entries is refused naming the key
/// and `K`, as are a share of 0, a percentage rounding to no slot,
/// percentages not adding up to 100 and values above the bulkhead's
/// maximums. Numbers may come as strings, unknown keys are refused, and
/// an explicit null is the key not given.
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::partition::{PartitionShares, PartitionedBulkhead};
///
/// let env = [("SEARCH_PARTITION_CAPACITY", "10"), ("SEARCH_PARTITION_PERCENT", "50,30,20")];
/// let env = env.map(|(k, v)| (k.to_string(), v.to_string()));
/// let shares: PartitionShares<3> = envy::prefixed("SEARCH_PARTITION_").from_iter(env).unwrap();
/// assert_eq!(shares.class_slots(), Some([5, 3, 2]));
/// let classes = ["checkout", "browse", "export"];
/// let search = PartitionedBulkhead::from_shares("search", classes, shares, StdClock).unwrap();
/// assert_eq!(search.capacity(), 10);
///
/// let env = [("SEARCH_PARTITION_CAPACITY", "10"), ("SEARCH_PARTITION_PERCENT", "50,30,30")];
/// let env = env.map(|(k, v)| (k.to_string(), v.to_string()));
/// let err = envy::prefixed("SEARCH_PARTITION_").from_iter::<_, PartitionShares<3>>(env).unwrap_err();
/// assert!(err.to_string().contains("`percent`: the percentages add up to 110"), "{err}");
/// ```
impl<'de, const K: usize> Deserialize<'de> for PartitionShares<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawShares::<K>::deserialize(d)?.build()
    }
}

// ------------------------------------------------------------ the policy

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
/// | `breaker` | a nested breaker map (see [`BreakerConfig`]'s `Deserialize`) | defaults |
/// | `cb_window_size`, `cb_min_calls`, `cb_failure_rate`, … | the breaker's keys, flat, with a `cb_` prefix | defaults |
/// | `retry_max_attempts` | attempts, the first included | 2 |
/// | `retry_base_backoff`, `retry_max_backoff` | duration | 50 ms, 1 s |
/// | `retry_min_attempt_time` | duration | 50 ms |
/// | `retry_budget_tokens` | tokens | 10 |
/// | `retry_budget_ratio` | percent (0.1 to 100) | 10 |
/// | `rate` | a nested rate map (see [`Quota`]'s `Deserialize`) | no rate limit |
/// | `rate_cells`, `rate_period`, `rate_burst` | the rate's keys, flat, with a `rate_` prefix | no rate limit |
/// | `throttle` | a nested throttle map (see [`ThrottleConfig`]'s `Deserialize`) | no throttle |
/// | `throttle_k`, `throttle_max_probability`, `throttle_window` | the throttle's keys, flat, with a `throttle_` prefix | no throttle |
///
/// Set exactly one of `max_concurrent` and `pool_size`, and the breaker
/// either nested (TOML, YAML, JSON) or flat (environment variables:
/// `CLIENT_PAYMENTS__CB_FAILURE_RATE=30` read with
/// `envy::prefixed("CLIENT_PAYMENTS__")`), not both. A window above 1023 is
/// refused here; a [`HeapPolicy`](crate::policy::HeapPolicy) runs any
/// window up to that, while a `Policy<C, N>` checks the window against its
/// `N` in [`Policy::new`](crate::Policy::new).
/// Durations, numbers-as-strings and null as for [`BreakerConfig`]. With
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0.25"), Ok(ms(250)));
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration(" 1.5 s "), Ok(ms(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0.1"), Ok(ms(100)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
        assert_eq!(parse_duration("1.0000000001s"), Ok(Duration::new(1, 0)));
        assert_eq!(parse_duration("-1s"), Err(Bad::Negative));
        assert_eq!(parse_duration("30x"), Err(Bad::Unit));
        assert_eq!(parse_duration("s"), Err(Bad::NotANumber));
        assert_eq!(parse_duration(""), Err(Bad::NotANumber));
        assert_eq!(parse_duration("."), Err(Bad::NotANumber));
        assert_eq!(parse_duration("1.2.3"), Err(Bad::NotANumber));
        assert_eq!(parse_duration("NaN"), Err(Bad::NotANumber));
        assert_eq!(
            parse_duration("99999999999999999999999h"),
            Err(Bad::TooLarge)
        );
    }

    #[test]
    fn counts_and_bools_from_strings() {
        assert_eq!(<usize as FieldValue>::from_str(" 12 "), Ok(12));
        assert_eq!(<usize as FieldValue>::from_str("12.0"), Ok(12));
        assert_eq!(
            <usize as FieldValue>::from_str("1.5"),
            Err(Bad::NotAWholeNumber)
        );
        assert_eq!(<usize as FieldValue>::from_str("-3"), Err(Bad::Negative));
        assert_eq!(<usize as FieldValue>::from_str("x"), Err(Bad::NotANumber));
        assert_eq!(<bool as FieldValue>::from_str("TRUE"), Ok(true));
        assert_eq!(<bool as FieldValue>::from_str("yes"), Err(Bad::NotABool));
    }
}
