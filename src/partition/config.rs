//! [`PartitionShares`]: the numbers of a partitioned bulkhead, apart from
//! its class names, for shares read from configuration.

use super::{PartitionConfigError, PartitionedBulkhead};
use crate::bulkhead::Bulkhead;

/// How a [`PartitionedBulkhead`] of `K` classes splits its capacity, and
/// the bound on each class's waiters: the numbers a configuration gives,
/// while the class names stay in code (they are `&'static str`).
///
/// Either explicit slots per class ([`slots`](Self::slots)) or percentages
/// of a capacity ([`percent`](Self::percent), rounded as
/// [`from_percent`](PartitionedBulkhead::from_percent) does), in class
/// order (class `0` the most important). Made in code it is checked when
/// [`PartitionedBulkhead::from_shares`] builds the bulkhead, which names
/// the class at fault; read with serde (feature `serde`) it is checked as
/// it is read, and an error names the key. Its keys:
///
/// | key | unit | default |
/// |---|---|---|
/// | `shares` | slots per class, one per class: `[5, 3, 2]` or `"5,3,2"` | required, or `capacity` and `percent` |
/// | `capacity` | slots, split by `percent` | |
/// | `percent` | percent of `capacity` per class, adding up to 100: `[50, 30, 20]` or `"50,30,20"` | |
/// | `max_waiters` | calls of each class waiting for a slot | no bound |
///
/// Set `shares`, or `capacity` with `percent`, not both. A list of the
/// wrong length (the count is `K`), a share of 0 (or a percentage that
/// rounds to no slot), a share or capacity above
/// [`Bulkhead::MAX_PERMITS`], percentages not adding up to 100 and a
/// `max_waiters` above [`Bulkhead::MAX_WAITERS`] are refused naming the
/// key; unknown keys are refused. A list is a sequence (JSON, TOML, YAML)
/// or a string of comma-separated numbers, as an environment variable
/// holds it (`SEARCH_PARTITION_SHARES=5,3,2`, read with
/// `envy::prefixed("SEARCH_PARTITION_")`).
///
/// # Examples
///
/// ```
/// use watertight::clock::StdClock;
/// use watertight::partition::{PartitionShares, PartitionedBulkhead};
///
/// let shares = PartitionShares::percent(10, [50, 30, 20]).with_max_waiters(32);
/// let search = PartitionedBulkhead::from_shares(
///     "search",
///     ["checkout", "browse", "export"],
///     shares,
///     StdClock,
/// )?;
/// assert_eq!((search.share(0), search.share(1), search.share(2)), (5, 3, 2));
/// assert_eq!(search.room(2).unwrap().max_waiters(), Some(32));
/// # Ok::<(), watertight::partition::PartitionConfigError>(())
/// ```
///
/// From the environment (feature `serde`):
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use watertight::clock::StdClock;
/// use watertight::partition::{PartitionShares, PartitionedBulkhead};
///
/// let env = [("SEARCH_PARTITION_SHARES", "5,3,2"), ("SEARCH_PARTITION_MAX_WAITERS", "32")]
///     .map(|(k, v)| (k.to_string(), v.to_string()));
/// let shares: PartitionShares<3> = envy::prefixed("SEARCH_PARTITION_").from_iter(env).unwrap();
/// let search =
///     PartitionedBulkhead::from_shares("search", ["checkout", "browse", "export"], shares, StdClock)
///         .unwrap();
/// assert_eq!(search.capacity(), 10);
///
/// let env = [("SEARCH_PARTITION_SHARES".to_string(), "5,5".to_string())];
/// let err = envy::prefixed("SEARCH_PARTITION_")
///     .from_iter::<_, PartitionShares<3>>(env)
///     .unwrap_err();
/// assert!(err.to_string().contains("`shares`: 2 entries, expected 3"), "{err}");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionShares<const K: usize> {
    split: Split<K>,
    max_waiters: Option<usize>,
}

/// The two ways to give the shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Split<const K: usize> {
    Slots([usize; K]),
    Percent { capacity: usize, percent: [u8; K] },
}

/// What is wrong with a [`PartitionShares`], by class number: rendered as a
/// [`PartitionConfigError`] naming the class by
/// [`PartitionedBulkhead::from_shares`], and as a message naming the key
/// by the `Deserialize` impl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharesFault {
    NoClasses,
    /// Class `index` has (or rounds to) no slot.
    ZeroShare {
        index: usize,
    },
    /// Class `index`'s share, or the capacity (`None`), is above
    /// [`Bulkhead::MAX_PERMITS`].
    ShareTooLarge {
        index: Option<usize>,
        requested: usize,
    },
    PercentNot100 {
        sum: u32,
    },
    MaxWaitersTooLarge {
        requested: usize,
    },
}

impl SharesFault {
    /// The error naming the class (`classes[index]`), or the system
    /// (`name`) for the capacity.
    pub(crate) fn named<const K: usize>(
        self,
        name: &'static str,
        classes: &[&'static str; K],
    ) -> PartitionConfigError {
        let max = Bulkhead::<()>::MAX_PERMITS;
        match self {
            SharesFault::NoClasses => PartitionConfigError::NoClasses,
            SharesFault::ZeroShare { index } => PartitionConfigError::ZeroShare {
                class: classes[index],
            },
            SharesFault::ShareTooLarge { index, requested } => {
                PartitionConfigError::ShareTooLarge {
                    class: index.map_or(name, |i| classes[i]),
                    requested,
                    max,
                }
            }
            SharesFault::PercentNot100 { sum } => PartitionConfigError::PercentNot100 { sum },
            SharesFault::MaxWaitersTooLarge { requested } => {
                PartitionConfigError::MaxWaitersTooLarge {
                    requested,
                    max: Bulkhead::<()>::MAX_WAITERS,
                }
            }
        }
    }
}

/// Each class's slots from percentages of `capacity`, by largest remainder
/// (the slots add up to `capacity`; ties go to the more important class).
/// Checks `K`, the sum and the capacity; a class rounded to no slot is left
/// at 0 for the shares' check to refuse.
pub(super) fn percent_slots<const K: usize>(
    capacity: usize,
    percent: &[u8; K],
) -> Result<[usize; K], SharesFault> {
    if K == 0 {
        return Err(SharesFault::NoClasses);
    }
    let sum = percent
        .iter()
        .fold(0u32, |s, &p| s.saturating_add(u32::from(p)));
    if sum != 100 {
        return Err(SharesFault::PercentNot100 { sum });
    }
    if capacity > Bulkhead::<()>::MAX_PERMITS {
        return Err(SharesFault::ShareTooLarge {
            index: None,
            requested: capacity,
        });
    }
    let mut slots = [0usize; K];
    let mut rest = [0usize; K];
    let mut given = 0;
    for (i, &p) in percent.iter().enumerate() {
        // At most MAX_PERMITS × 100: no overflow.
        let exact = capacity * usize::from(p);
        slots[i] = exact / 100;
        rest[i] = exact % 100;
        given += exact / 100;
    }
    for _ in given..capacity {
        let mut best = 0;
        for i in 1..K {
            if rest[i] > rest[best] {
                best = i;
            }
        }
        slots[best] += 1;
        rest[best] = 0;
    }
    Ok(slots)
}

/// Every class at least 1 slot, none above [`Bulkhead::MAX_PERMITS`].
fn check_slots<const K: usize>(slots: &[usize; K]) -> Result<(), SharesFault> {
    if K == 0 {
        return Err(SharesFault::NoClasses);
    }
    for (index, &share) in slots.iter().enumerate() {
        if share == 0 {
            return Err(SharesFault::ZeroShare { index });
        }
        if share > Bulkhead::<()>::MAX_PERMITS {
            return Err(SharesFault::ShareTooLarge {
                index: Some(index),
                requested: share,
            });
        }
    }
    Ok(())
}

impl<const K: usize> PartitionShares<K> {
    /// Explicit slots per class, in class order: `slots([5, 3, 2])` gives
    /// class 0 five slots, class 1 three and class 2 two (10 in all).
    /// Checked by [`PartitionedBulkhead::from_shares`].
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// let shares = PartitionShares::slots([5, 3, 2]);
    /// assert_eq!(shares.capacity(), 10);
    /// ```
    pub const fn slots(shares: [usize; K]) -> Self {
        PartitionShares {
            split: Split::Slots(shares),
            max_waiters: None,
        }
    }

    /// Percentages of `capacity` per class, in class order, adding up to
    /// 100; rounded to whole slots as
    /// [`from_percent`](PartitionedBulkhead::from_percent) rounds them.
    /// Checked by [`PartitionedBulkhead::from_shares`].
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// let shares = PartitionShares::percent(7, [50, 30, 20]);
    /// assert_eq!(shares.class_slots(), Some([4, 2, 1]));
    /// ```
    pub const fn percent(capacity: usize, percent: [u8; K]) -> Self {
        PartitionShares {
            split: Split::Percent { capacity, percent },
            max_waiters: None,
        }
    }

    /// At most `max_waiters` callers of each class wait at once, as
    /// [`PartitionedBulkhead::with_max_waiters`] bounds them; above
    /// [`Bulkhead::MAX_WAITERS`], [`from_shares`](PartitionedBulkhead::from_shares)
    /// refuses it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// let shares = PartitionShares::slots([5, 3, 2]).with_max_waiters(16);
    /// assert_eq!(shares.max_waiters(), Some(16));
    /// ```
    pub const fn with_max_waiters(mut self, max_waiters: usize) -> Self {
        self.max_waiters = Some(max_waiters);
        self
    }

    /// The bound on each class's waiters, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// assert_eq!(PartitionShares::slots([5, 3, 2]).max_waiters(), None);
    /// ```
    pub const fn max_waiters(&self) -> Option<usize> {
        self.max_waiters
    }

    /// The total: the sum of the slots (saturating), or the capacity the
    /// percentages split. A bulkhead built from these shares has this
    /// [`capacity`](PartitionedBulkhead::capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// assert_eq!(PartitionShares::slots([5, 3, 2]).capacity(), 10);
    /// assert_eq!(PartitionShares::percent(8, [50, 50]).capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        match &self.split {
            Split::Slots(slots) => slots.iter().fold(0usize, |t, &s| t.saturating_add(s)),
            Split::Percent { capacity, .. } => *capacity,
        }
    }

    /// Each class's slots, the percentages rounded to whole slots; `None`
    /// if [`from_shares`](PartitionedBulkhead::from_shares) would refuse
    /// them (it says why).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::partition::PartitionShares;
    ///
    /// assert_eq!(PartitionShares::percent(10, [50, 30, 20]).class_slots(), Some([5, 3, 2]));
    /// assert_eq!(PartitionShares::percent(10, [50, 30, 30]).class_slots(), None);
    /// assert_eq!(PartitionShares::slots([5, 0]).class_slots(), None);
    /// ```
    pub fn class_slots(&self) -> Option<[usize; K]> {
        self.check().ok()
    }

    /// Each class's slots, or what is wrong, by class number.
    pub(crate) fn check(&self) -> Result<[usize; K], SharesFault> {
        let slots = match &self.split {
            Split::Slots(slots) => *slots,
            Split::Percent { capacity, percent } => percent_slots(*capacity, percent)?,
        };
        check_slots(&slots)?;
        if let Some(requested) = self.max_waiters {
            if requested > Bulkhead::<()>::MAX_WAITERS {
                return Err(SharesFault::MaxWaitersTooLarge { requested });
            }
        }
        Ok(slots)
    }
}

impl<C: Clone, const K: usize> PartitionedBulkhead<C, K> {
    /// A bulkhead named `name` whose classes are `classes`, in order of
    /// importance (class `0` first), with the slots and the waiter bound of
    /// `shares`: the class names from code, the numbers from configuration
    /// (see [`PartitionShares`]). As [`try_new`](Self::try_new) or
    /// [`from_percent`](Self::from_percent), then
    /// [`with_max_waiters`](Self::with_max_waiters) if `shares` bounds the
    /// waiters.
    ///
    /// # Errors
    ///
    /// [`ZeroShare`](PartitionConfigError::ZeroShare) (a share of 0, or a
    /// percentage rounding to no slot),
    /// [`ShareTooLarge`](PartitionConfigError::ShareTooLarge) (a share, or
    /// the capacity, above [`Bulkhead::MAX_PERMITS`]),
    /// [`PercentNot100`](PartitionConfigError::PercentNot100),
    /// [`MaxWaitersTooLarge`](PartitionConfigError::MaxWaitersTooLarge),
    /// [`NoClasses`](PartitionConfigError::NoClasses), each naming the class
    /// (the system, for the capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::{PartitionConfigError, PartitionShares, PartitionedBulkhead};
    ///
    /// let classes = ["checkout", "browse", "export"];
    /// let search = PartitionedBulkhead::from_shares("search", classes, PartitionShares::slots([5, 3, 2]), StdClock)?;
    /// assert_eq!(search.capacity(), 10);
    ///
    /// let err = PartitionedBulkhead::from_shares("search", classes, PartitionShares::slots([5, 3, 0]), StdClock);
    /// assert_eq!(err.unwrap_err(), PartitionConfigError::ZeroShare { class: "export" });
    /// # Ok::<(), PartitionConfigError>(())
    /// ```
    pub fn from_shares(
        name: &'static str,
        classes: [&'static str; K],
        shares: PartitionShares<K>,
        clock: C,
    ) -> Result<Self, PartitionConfigError> {
        let slots = shares.check().map_err(|f| f.named(name, &classes))?;
        let mut b = Self::try_new(
            name,
            core::array::from_fn(|i| (classes[i], slots[i])),
            clock,
        )?;
        if let Some(n) = shares.max_waiters {
            // Checked above: within Bulkhead::MAX_WAITERS.
            for room in &mut b.rooms {
                room.bound_waiters(n);
            }
        }
        Ok(b)
    }
}
