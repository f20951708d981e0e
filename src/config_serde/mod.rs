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
//! # Breaker ([`BreakerConfig`](crate::BreakerConfig))
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
//! # Policy ([`PolicyConfig`](crate::PolicyConfig))
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
//! # Rate ([`Quota`](crate::rate::Quota))
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
//! its own error (zero cells, a zero burst, a zero period or one above 36
//! years are refused naming `rate_cells`, `rate_burst`, `rate_period`), the
//! period takes every duration the other keys take (`"1m"`, `"2.5s"`), and
//! the flat form follows the `cb_` and `retry_` keys. A request for more
//! cells than the burst is that request's error, not the config's.
//!
//! # Partition ([`PartitionShares`](crate::partition::PartitionShares))
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
//! [`Quota`](crate::rate::Quota)). Checked as it is read (the wrong count, naming `K`, a zero
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

mod breaker;
mod partition;
mod policy;
mod rate;
mod throttle;

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
