//! `Deserialize` for [`PartitionShares`](crate::partition::PartitionShares):
//! `shares`, or `capacity` and `percent`, as lists.

use super::*;
use crate::partition::{PartitionShares, SharesFault};

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
