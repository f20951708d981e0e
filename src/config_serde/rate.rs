//! `Deserialize` for [`Quota`](crate::rate::Quota): `cells`, `period`, `burst`.

use super::*;
use crate::rate::{Quota, QuotaError};

/// A rate limit's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a rate limit: cells, period, burst")]
pub(super) struct RawQuota {
    #[serde(default, deserialize_with = "cells")]
    pub(super) cells: Option<u32>,
    #[serde(default, deserialize_with = "period")]
    pub(super) period: Option<Duration>,
    #[serde(default, deserialize_with = "burst")]
    pub(super) burst: Option<u32>,
}

impl RawQuota {
    pub(super) fn is_empty(&self) -> bool {
        self.cells.is_none() && self.period.is_none() && self.burst.is_none()
    }

    /// Builds through [`Quota::try_new`] and [`Quota::try_burst`]; `prefix`
    /// is how the input spelled the keys (`""`, `"rate_"`, `"rate."`).
    pub(super) fn build<E: de::Error>(self, prefix: &str) -> Result<Quota, E> {
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
pub(super) fn quota_error<E: de::Error>(prefix: &str, e: QuotaError) -> E {
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
/// | `period` | duration (above zero, at most 36 years) | 1 s |
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
