//! `Deserialize` for [`ThrottleConfig`](crate::throttle::ThrottleConfig): `k`,
//! `max_probability`, `window`.

use super::*;
use crate::throttle::{ThrottleConfig, ThrottleConfigError};

/// A throttle's settings as written; `None` keeps the default.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an adaptive throttle: k, max_probability, window"
)]
pub(super) struct RawThrottle {
    #[serde(default, deserialize_with = "k")]
    pub(super) k: Option<Number>,
    #[serde(default, deserialize_with = "max_probability")]
    pub(super) max_probability: Option<Number>,
    #[serde(default, deserialize_with = "throttle_window_nested")]
    pub(super) window: Option<Duration>,
}

impl RawThrottle {
    pub(super) fn is_empty(&self) -> bool {
        self.k.is_none() && self.max_probability.is_none() && self.window.is_none()
    }

    /// Builds through [`ThrottleConfig::builder`]; `prefix` is how the
    /// input spelled the keys (`""`, `"throttle_"`, `"throttle."`).
    pub(super) fn build<E: de::Error>(self, prefix: &str) -> Result<ThrottleConfig, E> {
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
pub(super) fn throttle_error<E: de::Error>(prefix: &str, e: ThrottleConfigError) -> E {
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
