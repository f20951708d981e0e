//! `Deserialize` for `BreakerConfig`, `PolicyConfig`, `Quota`, `ThrottleConfig`
//! and `PartitionShares` (feature `serde`):
//! every field from typed values (a small self-describing test format below)
//! and from environment-style string maps (envy on a fake env vector; the
//! real environment is never touched), validation through the builders with
//! the field named, thresholds in percent, unknown fields refused, and
//! durations in each form.

mod breaker;
mod environment;
mod max_waiters;
mod partition;
mod policy;
mod rate;
mod retry;
mod throttle;

use core::time::Duration;

use serde::de::value::{Error as ValueError, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use watertight::clock::{ManualClock, StdClock};
use watertight::partition::{PartitionShares, PartitionedBulkhead};
use watertight::rate::{Quota, RateError, RateLimiter};
use watertight::{BreakerConfig, Policy, PolicyConfig};

/// A value of a self-describing format (as JSON, TOML or YAML would give).
#[derive(Debug, Clone)]
enum V {
    U(u64),
    I(i64),
    F(f64),
    S(&'static str),
    B(bool),
    Null,
    Map(Vec<(&'static str, V)>),
    Seq(Vec<V>),
}

impl<'de> IntoDeserializer<'de, ValueError> for V {
    type Deserializer = V;
    fn into_deserializer(self) -> V {
        self
    }
}

impl<'de> Deserializer<'de> for V {
    type Error = ValueError;

    fn deserialize_any<W: Visitor<'de>>(self, w: W) -> Result<W::Value, ValueError> {
        match self {
            V::U(n) => w.visit_u64(n),
            V::I(n) => w.visit_i64(n),
            V::F(x) => w.visit_f64(x),
            V::S(s) => w.visit_str(s),
            V::B(b) => w.visit_bool(b),
            V::Null => w.visit_unit(),
            V::Map(m) => {
                let mut map = MapDeserializer::new(m.into_iter());
                let value = w.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
            V::Seq(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter());
                let value = w.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_option<W: Visitor<'de>>(self, w: W) -> Result<W::Value, ValueError> {
        match self {
            V::Null => w.visit_none(),
            other => w.visit_some(other),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

fn from<T: DeserializeOwned>(fields: Vec<(&'static str, V)>) -> Result<T, String> {
    T::deserialize(V::Map(fields)).map_err(|e| e.to_string())
}

fn breaker(fields: Vec<(&'static str, V)>) -> Result<BreakerConfig, String> {
    from(fields)
}

fn policy(fields: Vec<(&'static str, V)>) -> Result<PolicyConfig, String> {
    from(fields)
}

/// An error that names `field` and says `what`.
#[track_caller]
fn assert_names(err: Result<impl core::fmt::Debug, String>, field: &str, what: &str) {
    let err = err.unwrap_err();
    assert!(
        err.contains(&format!("`{field}`")),
        "{err:?} does not name `{field}`"
    );
    assert!(err.contains(what), "{err:?} does not say {what:?}");
}

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;
