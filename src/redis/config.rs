//! The global bulkhead's settings, their defaults and their checks.

use core::fmt;
use core::time::Duration;

use crate::breaker::{BreakerConfig, BreakerConfigError};

/// What callers get while Redis cannot be reached (or its breaker is open).
///
/// # Examples
///
/// ```
/// use watertight::redis::{Fallback, GlobalConfig};
///
/// // 20 slots for the whole fleet; 12 replicas: ⌊20 / 12⌋ = 1 each on their own.
/// let config = GlobalConfig::builder(20).fallback(Fallback::LocalShare(1)).build().unwrap();
/// assert_eq!(config.fallback(), Fallback::LocalShare(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// Refuse at once with [`GlobalError::StoreUnavailable`](super::GlobalError::StoreUnavailable):
    /// the limit is never exceeded, and the system is unavailable while Redis is.
    FailClosed,
    /// Fall back to a bulkhead of this many slots in this process (for
    /// example the global limit ÷ the number of processes you expect): the
    /// system stays available, and the fleet as a whole stays near the limit
    /// if every process runs the same share. Permits taken from the share
    /// are not counted in Redis; when Redis comes back, new calls take
    /// global permits again while the share's holders finish, so for that
    /// moment the fleet can run up to the global limit plus the shares in
    /// flight.
    LocalShare(usize),
}

/// How a [`GlobalBulkhead`](super::GlobalBulkhead) takes its slots from
/// Redis.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::{GlobalConfig, Mode};
///
/// assert_eq!(GlobalConfig::builder(20).build().unwrap().mode(), Mode::PerCall);
/// let leased = GlobalConfig::builder(20)
///     .lease(Duration::from_secs(3))
///     .leased(Duration::from_millis(500))
///     .build()
///     .unwrap();
/// assert_eq!(leased.mode(), Mode::Leased { refresh: Duration::from_millis(500), floor: 1 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// One script call per acquisition and one per release (batched): the
    /// limit is exact at every moment, and every call pays a round trip.
    /// The default.
    PerCall,
    /// Each process holds a lease on a *share* of the slots and serves
    /// acquisitions from a local bulkhead of that size, without a Redis
    /// call; one script call every `refresh` (and early when the share runs
    /// dry) reports the process's demand and gets its new share. See
    /// [the module](super#leased-shares).
    Leased {
        /// How often the share is refreshed (its lease renewed, demand
        /// reported, the new share taken).
        refresh: Duration,
        /// The share a process is given whatever its demand, while the
        /// limit allows (so that a new or quiet process is not starved):
        /// a process with no demand holds at most this.
        floor: u32,
    },
}

/// Settings of a [`GlobalBulkhead`](super::GlobalBulkhead).
///
/// Defaults: a lease of 60 s (twice the policy's 30 s call timeout, so a
/// call that runs to its timeout still holds a live lease even if one
/// renewal is missed), renewed every 20 s (a third of the lease: two
/// renewals in a row can fail before a lease is lost); 100 ms for each
/// Redis command (a Redis next to the service answers in well under a
/// millisecond); no local cap; [`Fallback::FailClosed`]; and a breaker in
/// front of Redis that opens when half of the last 10 commands failed
/// (at least 5 of them), for 5 s.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::GlobalConfig;
///
/// let config = GlobalConfig::builder(20).build().unwrap();
/// assert_eq!(config.limit(), 20);
/// assert_eq!(config.lease(), Duration::from_secs(60));
/// assert_eq!(config.renew_every(), Duration::from_secs(20));
/// assert_eq!(config.store_timeout(), Duration::from_millis(100));
/// assert_eq!(config.local_cap(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalConfig {
    pub(super) limit: u32,
    pub(super) lease: Duration,
    pub(super) renew_every: Duration,
    pub(super) store_timeout: Duration,
    pub(super) local_cap: Option<usize>,
    pub(super) fallback: Fallback,
    pub(super) store_breaker: BreakerConfig,
    pub(super) mode: Mode,
    pub(super) ack: Option<Ack>,
}

/// Acknowledged grants ([`GlobalConfigBuilder::acknowledged`]): every
/// grant, renewal and share refresh is followed by `WAIT replicas timeout`
/// on the same connection, and counts only once that many replicas have
/// it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::GlobalConfig;
///
/// let config = GlobalConfig::builder(20)
///     .acknowledged(1, Duration::from_millis(50))
///     .build()
///     .unwrap();
/// let ack = config.acknowledged().unwrap();
/// assert_eq!((ack.replicas, ack.timeout), (1, Duration::from_millis(50)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Ack {
    /// Replicas that must have a write before it counts.
    pub replicas: u32,
    /// How long `WAIT` waits for them (whole milliseconds, as `WAIT`
    /// takes it; under the store timeout).
    pub timeout: Duration,
}

/// The breaker in front of Redis, by default: the last 10 commands, opened
/// by a failure rate of 50 % over at least 5 of them, for 5 s; Redis's
/// commands are not timed (their own timeout bounds them).
pub(super) const STORE_BREAKER: BreakerConfig = match BreakerConfig::builder()
    .window_size(10)
    .minimum_calls(5)
    .failure_rate_threshold(50.0)
    .no_slow_call_duration()
    .open_duration(Duration::from_secs(5))
    .build()
{
    Ok(c) => c,
    Err(_) => panic!("the store breaker's default config is valid"),
};

impl GlobalConfig {
    /// A builder for a global limit of `limit` calls at once, with the
    /// defaults above.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::redis::GlobalConfig;
    ///
    /// let config = GlobalConfig::builder(20)
    ///     .lease(Duration::from_secs(10))
    ///     .renew_every(Duration::from_secs(3))
    ///     .local_cap(4)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.local_cap(), Some(4));
    /// ```
    pub const fn builder(limit: u32) -> GlobalConfigBuilder {
        GlobalConfigBuilder {
            config: GlobalConfig {
                limit,
                lease: Duration::from_secs(60),
                renew_every: Duration::from_secs(20),
                store_timeout: Duration::from_millis(100),
                local_cap: None,
                fallback: Fallback::FailClosed,
                store_breaker: STORE_BREAKER,
                mode: Mode::PerCall,
                ack: None,
            },
        }
    }

    /// Calls at once across every process with the same Redis and name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().limit(), 7);
    /// ```
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// How long a grant lives in Redis unless renewed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().lease().as_secs(), 60);
    /// ```
    pub const fn lease(&self) -> Duration {
        self.lease
    }

    /// How often the process's keeper renews the leases it holds.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().renew_every().as_secs(), 20);
    /// ```
    pub const fn renew_every(&self) -> Duration {
        self.renew_every
    }

    /// The time each Redis command may take.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().store_timeout().as_millis(), 100);
    /// ```
    pub const fn store_timeout(&self) -> Duration {
        self.store_timeout
    }

    /// The per-process cap in front of Redis, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).local_cap(2).build().unwrap().local_cap(), Some(2));
    /// ```
    pub const fn local_cap(&self) -> Option<usize> {
        self.local_cap
    }

    /// What callers get while Redis cannot be reached.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{Fallback, GlobalConfig};
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().fallback(), Fallback::FailClosed);
    /// ```
    pub const fn fallback(&self) -> Fallback {
        self.fallback
    }

    /// The breaker in front of Redis.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// let config = GlobalConfig::builder(7).build().unwrap();
    /// assert_eq!(config.store_breaker().window_size(), 10);
    /// ```
    pub const fn store_breaker(&self) -> &BreakerConfig {
        &self.store_breaker
    }

    /// How slots are taken from Redis: per call (the default) or leased
    /// shares.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalConfig, Mode};
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().mode(), Mode::PerCall);
    /// ```
    pub const fn mode(&self) -> Mode {
        self.mode
    }

    /// Acknowledged grants, if asked for (see
    /// [`GlobalConfigBuilder::acknowledged`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::GlobalConfig;
    /// assert_eq!(GlobalConfig::builder(7).build().unwrap().acknowledged(), None);
    /// ```
    pub const fn acknowledged(&self) -> Option<Ack> {
        self.ack
    }
}

/// Builds a [`GlobalConfig`]; [`build`](Self::build) checks it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::{Fallback, GlobalConfig};
///
/// let config = GlobalConfig::builder(20)
///     .store_timeout(Duration::from_millis(50))
///     .fallback(Fallback::LocalShare(5))
///     .build()
///     .unwrap();
/// assert_eq!(config.store_timeout(), Duration::from_millis(50));
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct GlobalConfigBuilder {
    config: GlobalConfig,
}

impl GlobalConfigBuilder {
    /// How long a grant lives in Redis unless renewed (60 s by default).
    /// A process that dies holding permits gives them back within one lease.
    pub const fn lease(mut self, d: Duration) -> Self {
        self.config.lease = d;
        self
    }

    /// How often the leases this process holds are renewed (20 s by
    /// default); at most half the lease, so that one missed renewal loses
    /// nothing.
    pub const fn renew_every(mut self, d: Duration) -> Self {
        self.config.renew_every = d;
        self
    }

    /// The time each Redis command may take (100 ms by default). A command
    /// that takes longer counts as a failure of Redis, for its breaker.
    pub const fn store_timeout(mut self, d: Duration) -> Self {
        self.config.store_timeout = d;
        self
    }

    /// A per-process cap of `k` calls, checked before Redis: a process
    /// already running `k` calls is refused (or waits) without a Redis
    /// round trip.
    pub const fn local_cap(mut self, k: usize) -> Self {
        self.config.local_cap = Some(k);
        self
    }

    /// What callers get while Redis cannot be reached.
    pub const fn fallback(mut self, fallback: Fallback) -> Self {
        self.config.fallback = fallback;
        self
    }

    /// The breaker in front of Redis (see [`GlobalConfig`] for its default).
    pub const fn store_breaker(mut self, config: BreakerConfig) -> Self {
        self.config.store_breaker = config;
        self
    }

    /// Leased shares, refreshed every `refresh`, with a floor of one slot
    /// per process (see [`Mode::Leased`] and [the module](super#leased-shares)).
    /// The lease ([`lease`](Self::lease)) is then how long a share outlives
    /// its last refresh: how long a dead process's share stays taken.
    pub const fn leased(mut self, refresh: Duration) -> Self {
        let floor = match self.config.mode {
            Mode::Leased { floor, .. } => floor,
            Mode::PerCall => 1,
        };
        self.config.mode = Mode::Leased { refresh, floor };
        self
    }

    /// The floor of a leased share ([`Mode::Leased`]'s `floor`; 1 by
    /// default, 0 lets a quiet process hold nothing). Sets the leased mode
    /// (with a refresh of a third of the lease) if it is not set yet.
    pub const fn lease_floor(mut self, floor: u32) -> Self {
        let refresh = match self.config.mode {
            Mode::Leased { refresh, .. } => refresh,
            Mode::PerCall => Duration::from_nanos(self.config.lease.as_nanos() as u64 / 3),
        };
        self.config.mode = Mode::Leased { refresh, floor };
        self
    }

    /// Acknowledged grants: a grant (its fencing token with it), a lease
    /// renewal and a share refresh count only once `replicas` replicas
    /// have them, checked with `WAIT replicas timeout` sent on the same
    /// connection right behind the script (one pipeline: one round trip,
    /// and the `WAIT` cannot land on another connection). A grant not
    /// acknowledged within `timeout` is given back and refused as
    /// [`StoreFailure::NotAcknowledged`](super::StoreFailure::NotAcknowledged):
    /// a store failure like any other, so the [`Fallback`] decides what the
    /// caller gets (`FailClosed`: [`GlobalError::StoreUnavailable`](super::GlobalError::StoreUnavailable);
    /// `LocalShare`: a permit of the local share, not counted in Redis),
    /// the store breaker counts it, and
    /// [`GlobalMetrics::unacknowledged`](super::GlobalMetrics::unacknowledged)
    /// counts it. A renewal or refresh not acknowledged is a failed one:
    /// the lease runs on from the last acknowledged one.
    ///
    /// What it buys: a primary that fails after the acknowledgement cannot
    /// take the grant with it, as long as Sentinel (or, in a Redis
    /// Cluster, the cluster) promotes a replica that had it (with
    /// `replicas` equal to the number of replicas, every replica has it;
    /// in a cluster, the replicas of the primary that serves the system's
    /// slot). What it costs: each grant waits for a replica's
    /// acknowledgement (one replica round trip), a `WAIT` holds the
    /// connection it runs on (commands behind it wait too), and no grant
    /// is made while fewer than `replicas` replicas are connected. See
    /// [the module](super#failover).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::redis::{GlobalConfig, GlobalConfigError};
    ///
    /// // One replica must have each grant within 50 ms (the store timeout is 100 ms).
    /// let config = GlobalConfig::builder(20).acknowledged(1, Duration::from_millis(50)).build();
    /// assert!(config.is_ok());
    /// let err = GlobalConfig::builder(20).acknowledged(1, Duration::from_millis(100)).build();
    /// assert!(matches!(err, Err(GlobalConfigError::AckTimeoutTooLong { .. })));
    /// ```
    pub const fn acknowledged(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.ack = Some(Ack { replicas, timeout });
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`GlobalConfigError`] names the setting at fault: a zero limit, a
    /// zero or sub-millisecond lease, a zero renewal interval or one above
    /// half the lease, a zero store timeout, a zero local cap or local
    /// share, (leased) a zero refresh, one above half the lease, or a
    /// floor above the limit, or (acknowledged) zero replicas, or a timeout
    /// under a millisecond or not under the store timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::redis::{GlobalConfig, GlobalConfigError};
    ///
    /// assert_eq!(GlobalConfig::builder(0).build().unwrap_err(), GlobalConfigError::LimitZero);
    /// let err = GlobalConfig::builder(5)
    ///     .lease(Duration::from_secs(10))
    ///     .renew_every(Duration::from_secs(8))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, GlobalConfigError::RenewTooRare { .. }));
    /// ```
    pub fn build(self) -> Result<GlobalConfig, GlobalConfigError> {
        let c = self.config;
        if c.limit == 0 {
            return Err(GlobalConfigError::LimitZero);
        }
        if c.lease < Duration::from_millis(10) {
            return Err(GlobalConfigError::LeaseTooShort { lease: c.lease });
        }
        if c.lease > Duration::from_secs(86_400) {
            return Err(GlobalConfigError::LeaseTooLong { lease: c.lease });
        }
        if c.renew_every.is_zero() {
            return Err(GlobalConfigError::RenewEveryZero);
        }
        // (Leased mode renews its share every refresh instead.)
        if c.renew_every > c.lease / 2 && matches!(c.mode, Mode::PerCall) {
            return Err(GlobalConfigError::RenewTooRare {
                lease: c.lease,
                renew_every: c.renew_every,
            });
        }
        if c.store_timeout.is_zero() {
            return Err(GlobalConfigError::StoreTimeoutZero);
        }
        if c.local_cap == Some(0) {
            return Err(GlobalConfigError::LocalCapZero);
        }
        if let Some(cap) = c.local_cap {
            if cap > crate::bulkhead::Bulkhead::<()>::MAX_PERMITS {
                return Err(GlobalConfigError::LocalCapTooLarge);
            }
        }
        match c.fallback {
            Fallback::LocalShare(0) => return Err(GlobalConfigError::LocalShareZero),
            Fallback::LocalShare(k) if k > crate::bulkhead::Bulkhead::<()>::MAX_PERMITS => {
                return Err(GlobalConfigError::LocalCapTooLarge)
            }
            _ => {}
        }
        if let Mode::Leased { refresh, floor } = c.mode {
            if refresh.is_zero() {
                return Err(GlobalConfigError::RefreshZero);
            }
            if refresh > c.lease / 2 {
                return Err(GlobalConfigError::RefreshTooRare {
                    lease: c.lease,
                    refresh,
                });
            }
            if floor > c.limit {
                return Err(GlobalConfigError::FloorAboveLimit {
                    floor,
                    limit: c.limit,
                });
            }
        }
        if let Some(ack) = c.ack {
            if ack.replicas == 0 {
                return Err(GlobalConfigError::AckReplicasZero);
            }
            // `WAIT n 0` blocks for ever: the smallest timeout is 1 ms.
            if ack.timeout < Duration::from_millis(1) {
                return Err(GlobalConfigError::AckTimeoutTooShort {
                    timeout: ack.timeout,
                });
            }
            if ack.timeout >= c.store_timeout {
                return Err(GlobalConfigError::AckTimeoutTooLong {
                    timeout: ack.timeout,
                    store_timeout: c.store_timeout,
                });
            }
        }
        Ok(c)
    }
}

/// A [`GlobalConfig`] that [`build`](GlobalConfigBuilder::build) refused.
///
/// # Examples
///
/// ```
/// use watertight::redis::{Fallback, GlobalConfig, GlobalConfigError};
///
/// let err = GlobalConfig::builder(5).fallback(Fallback::LocalShare(0)).build().unwrap_err();
/// assert_eq!(err, GlobalConfigError::LocalShareZero);
/// assert_eq!(err.to_string(), "fallback: a local share of zero slots refuses every call; use FailClosed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum GlobalConfigError {
    /// The limit is zero.
    LimitZero,
    /// The lease is under 10 ms: it would expire before a renewal could
    /// reach Redis.
    LeaseTooShort {
        /// The lease asked for.
        lease: Duration,
    },
    /// The lease is above a day: a crashed process's permits would stay
    /// taken that long.
    LeaseTooLong {
        /// The lease asked for.
        lease: Duration,
    },
    /// The renewal interval is zero.
    RenewEveryZero,
    /// Leases are renewed less often than twice per lease, so one late or
    /// failed renewal would lose them.
    RenewTooRare {
        /// The lease.
        lease: Duration,
        /// The renewal interval asked for.
        renew_every: Duration,
    },
    /// The store timeout is zero.
    StoreTimeoutZero,
    /// The local cap is zero.
    LocalCapZero,
    /// The local cap or the local share is above what a bulkhead holds.
    LocalCapTooLarge,
    /// `Fallback::LocalShare(0)`.
    LocalShareZero,
    /// The store breaker's config does not fit a breaker's window.
    StoreBreaker(BreakerConfigError),
    /// Leased mode with a zero refresh interval.
    RefreshZero,
    /// Leased mode with a refresh interval above half the lease: one late
    /// or failed refresh would lose the share.
    RefreshTooRare {
        /// The lease.
        lease: Duration,
        /// The refresh interval asked for.
        refresh: Duration,
    },
    /// Leased mode with a floor above the limit.
    FloorAboveLimit {
        /// The floor asked for.
        floor: u32,
        /// The limit.
        limit: u32,
    },
    /// Acknowledged grants by zero replicas.
    AckReplicasZero,
    /// Acknowledged grants with a timeout under a millisecond (`WAIT`
    /// takes whole milliseconds, and 0 would wait for ever).
    AckTimeoutTooShort {
        /// The timeout asked for.
        timeout: Duration,
    },
    /// Acknowledged grants with a timeout not under the store timeout: the
    /// command would time out before `WAIT` answers.
    AckTimeoutTooLong {
        /// The timeout asked for.
        timeout: Duration,
        /// The store timeout.
        store_timeout: Duration,
    },
}

impl fmt::Display for GlobalConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalConfigError::LimitZero => f.write_str("limit must not be zero"),
            GlobalConfigError::LeaseTooShort { lease } => {
                write!(f, "lease: {lease:?} is under the 10 ms minimum")
            }
            GlobalConfigError::LeaseTooLong { lease } => {
                write!(f, "lease: {lease:?} is above the one-day maximum")
            }
            GlobalConfigError::RenewEveryZero => f.write_str("renew_every must not be zero"),
            GlobalConfigError::RenewTooRare { lease, renew_every } => write!(
                f,
                "renew_every: {renew_every:?} is above half the lease ({lease:?}); one missed renewal would lose the lease"
            ),
            GlobalConfigError::StoreTimeoutZero => f.write_str("store_timeout must not be zero"),
            GlobalConfigError::LocalCapZero => f.write_str("local_cap must not be zero"),
            GlobalConfigError::LocalCapTooLarge => {
                f.write_str("local_cap: above what a bulkhead holds (Bulkhead::MAX_PERMITS)")
            }
            GlobalConfigError::LocalShareZero => f.write_str(
                "fallback: a local share of zero slots refuses every call; use FailClosed",
            ),
            GlobalConfigError::StoreBreaker(e) => write!(f, "store_breaker: {e}"),
            GlobalConfigError::RefreshZero => f.write_str("leased: refresh must not be zero"),
            GlobalConfigError::RefreshTooRare { lease, refresh } => write!(
                f,
                "leased: refresh {refresh:?} is above half the lease ({lease:?}); one missed refresh would lose the share"
            ),
            GlobalConfigError::FloorAboveLimit { floor, limit } => {
                write!(f, "lease_floor: {floor} is above the limit ({limit})")
            }
            GlobalConfigError::AckReplicasZero => {
                f.write_str("acknowledged: replicas must not be zero")
            }
            GlobalConfigError::AckTimeoutTooShort { timeout } => write!(
                f,
                "acknowledged: timeout {timeout:?} is under 1 ms (WAIT 0 would wait for ever)"
            ),
            GlobalConfigError::AckTimeoutTooLong {
                timeout,
                store_timeout,
            } => write!(
                f,
                "acknowledged: timeout {timeout:?} is not under the store timeout ({store_timeout:?})"
            ),
        }
    }
}

impl core::error::Error for GlobalConfigError {}
