//! Leased shares ([`Mode::Leased`](super::Mode::Leased)): this process's
//! share of a global limit, served from a local bulkhead without a Redis
//! call, and the task that refreshes it.
//!
//! The local bulkhead's capacity is the share plus one *plug*: a permit
//! the share holds for as long as it lives, so that a share of zero is a
//! bulkhead of one that is always full (a bulkhead's capacity is never
//! zero), and waiters wait rather than fail.
//!
//! **The era** ([`LeaseEra`], `era.rs`): a lease that ends (its time
//! passed without a refresh, or Redis no longer had it) starts a new era:
//! the permits of the old one then report `is_lost()`, and stop counting
//! as held.

use std::string::{String, ToString};

use core::time::Duration;
use std::sync::{Arc, Mutex};

use event_listener::Event;
use tokio::sync::mpsc;

use super::era::LeaseEra;
use super::error::StoreFailure;
use super::keeper::Msg;
use super::runtime::Runtime;
use super::store::{Core, Refreshed, Report};
use crate::bulkhead::{Bulkhead, OwnedPermit};
use crate::clock::{Clock, Instant};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// This process's leased share of one system.
pub(super) struct Share<R> {
    pub(super) local: Arc<Bulkhead<R>>,
    /// Holds one slot of `local` for the share's life (see the module).
    _plug: OwnedPermit<R>,
    /// The process, as Redis knows it.
    pub(super) member: String,
    floor: u32,
    refresh: Duration,
    /// When the lease ends, on the runtime's clock (the last successful
    /// refresh's *sending* time plus the lease: Redis's lease ends no
    /// earlier), and its era.
    lease: LeaseEra,
    /// The fencing token of the current lease, and the era it was issued
    /// in (a lease that ended needs a new one).
    token: AtomicU64,
    token_era: AtomicU64,
    /// Refusals since the last refresh (part of the demand reported).
    refused: AtomicU64,
    /// The most permits held at once under the lease since the last
    /// refresh (short calls are rarely in flight at the instant of a
    /// refresh; their peak is what they need).
    peak: AtomicU64,
    /// Whether the keeper has been asked to refresh early.
    nudged: AtomicBool,
    nudge: Event,
    /// Told after every refresh attempt (and at the end).
    changed: Event,
    /// Whether a refresh has been attempted yet.
    tried: AtomicBool,
    /// The last refresh's failure, while no lease has been taken since.
    failure: Mutex<Option<StoreFailure>>,
    /// What the last refresh reported and was answered, for the metrics.
    pub(super) last: Mutex<Last>,
}

/// The last refresh, as the metrics show it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Last {
    pub(super) demand: u64,
    pub(super) grant: u64,
    pub(super) recorded: u64,
    pub(super) target: u64,
    pub(super) refreshes: u64,
}

impl<R: Runtime> Share<R> {
    pub(super) fn new(
        name: &'static str,
        member: String,
        floor: u32,
        refresh: Duration,
        clock: R,
    ) -> Self {
        let local = Arc::new(Bulkhead::new(name, 1, clock));
        let _plug = match local.try_acquire_owned() {
            Ok(p) => p,
            // A new bulkhead of one always has its one slot free.
            Err(_) => unreachable!("a new bulkhead of one refused its first permit"),
        };
        Share {
            local,
            _plug,
            member,
            floor,
            refresh,
            lease: LeaseEra::new(),
            token: AtomicU64::new(0),
            token_era: AtomicU64::new(u64::MAX),
            refused: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            nudged: AtomicBool::new(false),
            nudge: Event::new(),
            changed: Event::new(),
            tried: AtomicBool::new(false),
            failure: Mutex::new(None),
            last: Mutex::new(Last::default()),
        }
    }

    /// Asks the keeper to refresh soon (it keeps a minimum gap between
    /// refreshes): the share ran dry.
    pub(super) fn nudge(&self) {
        if !self.nudged.swap(true, Ordering::AcqRel) {
            self.nudge.notify(1);
        }
    }

    /// A call was refused for want of a slot.
    pub(super) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.nudge();
    }

    /// Whether the lease is live at `now`. A lease whose time has passed
    /// is ended here (whoever sees it first): a new era, no more grants.
    pub(super) fn is_live<C: Clock>(&self, core: &Core<C>, now: Instant) -> bool {
        self.live_or_end(core, self.lease.is_live(now.as_nanos()))
    }

    /// What `LeaseEra::is_live` said, with the lease's end handled when
    /// this caller ended it.
    fn live_or_end<C: Clock>(&self, core: &Core<C>, live: Result<bool, u64>) -> bool {
        match live {
            Ok(live) => live,
            Err(held) => {
                self.ended(core, held);
                false
            }
        }
    }

    /// An era ended with `held` permits: the local share closes to the
    /// plug until a refresh grants one again; a lease lost with permits
    /// under it is counted.
    fn ended<C: Clock>(&self, core: &Core<C>, held: u64) {
        let _ = self.local.resize(1);
        if held > 0 {
            core.stats.lost(core.name, &self.member);
        }
    }

    /// When the lease ends (`None`: no lease).
    pub(super) fn lease_end(&self) -> Option<Instant> {
        self.lease.until().map(Instant::from_nanos)
    }

    /// Counts a permit held under the current lease and returns its era,
    /// if the lease is live at `now`.
    pub(super) fn enter<C: Clock>(&self, core: &Core<C>, now: Instant) -> Option<u32> {
        match self.lease.enter(now.as_nanos()) {
            Ok((era, held)) => {
                self.peak.fetch_max(held, Ordering::Relaxed);
                Some(era)
            }
            Err(live) => {
                self.live_or_end(core, live);
                None
            }
        }
    }

    /// A permit of era `era` is gone.
    pub(super) fn leave(&self, era: u32) {
        self.lease.leave(era);
    }

    /// Whether a permit of era `era` is lost at `now`.
    pub(super) fn is_lost<C: Clock>(&self, core: &Core<C>, era: u32, now: Instant) -> bool {
        let _ = self.is_live(core, now);
        self.lease.era() != era
    }

    /// Permits held under the live lease.
    pub(super) fn held<C: Clock>(&self, core: &Core<C>, now: Instant) -> usize {
        if !self.is_live(core, now) {
            return 0;
        }
        self.lease.held() as usize
    }

    /// Permits granted from the share (its local bulkhead's, less the plug).
    pub(super) fn granted(&self) -> u64 {
        self.local.metrics().accepted.saturating_sub(1) as u64
    }

    /// The current lease's fencing token.
    pub(super) fn token(&self) -> u64 {
        self.token.load(Ordering::Acquire)
    }

    /// Waits (until `until`) for the keeper's first refresh attempt.
    pub(super) async fn first_attempt(&self, clock: &R, until: Instant) {
        let tried = || self.tried.load(Ordering::Acquire);
        super::conn::wait_for(&self.changed, tried, clock, until).await;
    }

    /// Why there is no lease: the last refresh's failure (a timeout if
    /// none was recorded).
    pub(super) fn failure(&self) -> StoreFailure {
        match self.failure.lock().ok().as_deref() {
            Some(Some(f)) => copy_failure(f),
            _ => StoreFailure::TimedOut,
        }
    }

    /// Slots in use now (the plug aside) and the demand: the most in use
    /// at once since `peak` was last reset (or now, if more), waited for,
    /// and `refused`.
    fn demand(&self, peak: u64, refused: u64, limit: u32) -> (u64, u64) {
        // The plug is one slot of capacity and one in flight.
        let in_flight = self.local.in_flight().saturating_sub(1) as u64;
        let waiting = self.local.waiting() as u64;
        let demand = in_flight
            .max(peak)
            .saturating_add(waiting)
            .saturating_add(refused)
            .min(u64::from(limit));
        (in_flight, demand)
    }

    /// Whether a nudge is worth an early refresh: the demand grew since
    /// the last report, or the last answer gave less than the fair share
    /// (others were still giving slots back). A process at its fair share
    /// under overload waits for its regular refresh.
    fn worth_refreshing(&self, limit: u32) -> bool {
        let (_, now) = self.demand(
            self.peak.load(Ordering::Acquire),
            self.refused.load(Ordering::Acquire),
            limit,
        );
        match self.last.lock() {
            Ok(last) => last.refreshes == 0 || now > last.demand || last.grant < last.target,
            Err(_) => true,
        }
    }

    /// What to report: (demand, bound, fresh). A share above the demand
    /// is first cut to it (never below what is in use): the process will
    /// not use the rest before the answer, and Redis can then record the
    /// smaller share at once instead of a refresh later.
    fn report<C: Clock>(&self, core: &Core<C>, now: Instant, limit: u32) -> (u64, u64, bool) {
        let (in_flight, demand) = self.demand(
            self.peak.swap(0, Ordering::AcqRel),
            self.refused.swap(0, Ordering::AcqRel),
            limit,
        );
        let mut capacity = self.local.capacity().saturating_sub(1) as u64;
        if demand < capacity {
            let keep = usize::try_from(demand.max(in_flight)).unwrap_or(usize::MAX);
            let _ = self.local.resize(keep.saturating_add(1));
            capacity = self.local.capacity().saturating_sub(1) as u64;
        }
        let live = self.is_live(core, now);
        let fresh = !live || self.token_era.load(Ordering::Acquire) != u64::from(self.lease.era());
        // In use may have grown past the cut meanwhile (grants in flight):
        // the bound covers it.
        let in_use = self.local.in_flight().saturating_sub(1) as u64;
        (demand, capacity.max(in_use), fresh)
    }

    /// Whether this process holds more than it needs now: worth giving
    /// back at once when another process wants its fair share.
    fn holds_more_than_needed(&self, limit: u32) -> bool {
        let (_, now) = self.demand(
            self.peak.load(Ordering::Acquire),
            self.refused.load(Ordering::Acquire),
            limit,
        );
        match self.last.lock() {
            Ok(last) => last.recorded > now,
            Err(_) => false,
        }
    }

    /// Takes Redis's answer to a refresh sent at `sent`.
    fn apply<C: Clock>(&self, core: &Core<C>, r: Refreshed, sent: Instant) {
        if r.lost {
            // Redis had forgotten the lease (it ended there, or Redis
            // restarted): what was granted under it is lost.
            let held = self.lease.end();
            self.ended(core, held);
        }
        if let Some(token) = r.token {
            self.token.store(token, Ordering::Release);
            self.token_era
                .store(u64::from(self.lease.era()), Ordering::Release);
        }
        let grant = usize::try_from(r.grant)
            .unwrap_or(usize::MAX)
            .min(Bulkhead::<R>::MAX_PERMITS - 1);
        let _ = self.local.resize(grant + 1);
        self.lease
            .renew(sent.saturating_add(core.config.lease).as_nanos());
        if let Ok(mut f) = self.failure.lock() {
            *f = None;
        }
        core.stats.share(core.name, r.grant, r.target, r.fleet_held);
    }

    fn failed<C: Clock>(&self, core: &Core<C>, failure: StoreFailure, now: Instant) {
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(failure);
        }
        let _ = self.is_live(core, now);
    }

    /// The share is given back (at `close`): no lease, nothing granted.
    fn end(&self) {
        self.lease.end();
        let _ = self.local.resize(1);
        self.changed.notify(usize::MAX);
    }
}

/// A copy of a failure, for each caller that meets it (a Redis error keeps
/// its kind and text).
pub(crate) fn copy_failure(f: &StoreFailure) -> StoreFailure {
    match f {
        StoreFailure::TimedOut => StoreFailure::TimedOut,
        StoreFailure::BadReply => StoreFailure::BadReply,
        StoreFailure::NotAcknowledged { acked, wanted } => StoreFailure::NotAcknowledged {
            acked: *acked,
            wanted: *wanted,
        },
        StoreFailure::BreakerOpen(r) => StoreFailure::BreakerOpen(*r),
        StoreFailure::Redis(e) => StoreFailure::Redis(::redis::RedisError::from((
            e.kind(),
            "the last share refresh failed",
            e.to_string(),
        ))),
    }
}

/// Gives the share back on a blocking connection if the keeper is dropped
/// before it ends (its runtime shut down without `close`).
struct LeaveOnDrop<R: Runtime> {
    core: Arc<Core<R>>,
    share: Arc<Share<R>>,
    done: bool,
}

impl<R: Runtime> Drop for LeaveOnDrop<R> {
    fn drop(&mut self) {
        if !self.done {
            self.core.set_keeper_gone();
            self.core.leave_blocking(&self.share.member);
            self.share.end();
        }
    }
}

/// The keeper of a leased share: refreshes it every `refresh` (a quarter
/// of that while a shrink is pending, so that the slots given back reach
/// Redis soon), early when nudged (the share ran dry; never more often
/// than a quarter of `refresh`), and gives it back at `close` or when the
/// last handle and permit are gone.
pub(super) async fn run<R: Runtime>(
    core: Arc<Core<R>>,
    share: Arc<Share<R>>,
    mut msgs: mpsc::UnboundedReceiver<Msg>,
) {
    let mut guard = LeaveOnDrop {
        core: Arc::clone(&core),
        share: Arc::clone(&share),
        done: false,
    };
    let clock = core.clock.clone();
    let gap = share.refresh / 4;
    let mut next = clock.now();
    let mut last_sent: Option<Instant> = None;
    // Grants told to the metrics (counted in bulk at each refresh: the
    // hot path counts nothing of its own).
    let mut counted = 0;
    let closing = loop {
        let nudge = share.nudge.listen();
        let wanted = core.listen();
        tokio::select! {
            biased;
            msg = msgs.recv() => match msg {
                None => break None,
                Some(Msg::Close(ack)) => break Some(ack),
                // Not sent in this mode; given back all the same.
                Some(Msg::Release(m)) => {
                    let _ = core.release(core::slice::from_ref(&m)).await;
                    continue;
                }
            },
            () = clock.sleep_until(next) => {}
            // Another process was granted less than its fair share: give
            // back what this one does not need, after the usual gap.
            () = wanted => {
                if share.holds_more_than_needed(core.config.limit) {
                    let soon = last_sent.map_or(clock.now(), |sent| sent.saturating_add(gap));
                    next = next.min(soon);
                }
                continue;
            }
            () = nudge => {
                if !share.worth_refreshing(core.config.limit) {
                    // Left set: no more wake-ups until the regular refresh.
                    continue;
                }
                if let Some(sent) = last_sent {
                    next = next.min(sent.saturating_add(gap));
                } else {
                    next = clock.now();
                }
                continue;
            }
        }
        // Listening for wanted notices: tried again before each refresh
        // (the connection manager resubscribes after a reconnect too).
        if !core.is_subscribed() {
            core.subscribe().await;
        }
        let sent = clock.now();
        share.nudged.store(false, Ordering::Release);
        let granted = share.granted();
        core.stats.granted_leased(core.name, granted - counted);
        counted = granted;
        let (demand, bound, fresh) = share.report(&core, sent, core.config.limit);
        core.stats.demand(core.name, demand);
        let report = Report {
            member: &share.member,
            demand,
            bound,
            fresh,
        };
        let shrinking = match core.refresh(&report, share.floor).await {
            Ok(r) => {
                share.apply(&core, r, sent);
                if let Ok(mut last) = share.last.lock() {
                    *last = Last {
                        demand,
                        grant: r.grant,
                        recorded: r.recorded,
                        target: r.target,
                        refreshes: last.refreshes + 1,
                    };
                }
                r.recorded > r.grant
            }
            Err(f) => {
                share.failed(&core, f, clock.now());
                false
            }
        };
        share.tried.store(true, Ordering::Release);
        share.changed.notify(usize::MAX);
        last_sent = Some(sent);
        next = sent.saturating_add(if shrinking { gap } else { share.refresh });
        // A nudge that came while the refresh ran is served after the gap.
        if share.nudged.load(Ordering::Acquire) {
            next = next.min(sent.saturating_add(gap));
        }
    };
    msgs.close();
    let outcome = core.leave(&share.member).await.map(drop);
    share.end();
    guard.done = true;
    if let Some(ack) = closing {
        let _ = ack.send(outcome);
    }
}

impl<R: Runtime> super::GlobalBulkhead<R> {
    /// An acquisition in leased mode: from the local share while its lease
    /// is live (no Redis call), the fallback while there is none.
    pub(super) async fn acquire_leased(
        &self,
        share: &Share<R>,
        front: Option<OwnedPermit<R>>,
        deadline: Option<Instant>,
        now: Option<Instant>,
    ) -> Result<super::GlobalPermit<R>, super::GlobalError> {
        use super::GlobalError;
        let inner = &*self.inner;
        let core = &*inner.core;
        let clock = &core.clock;
        if !share.tried.load(Ordering::Acquire) {
            // Just connected: the keeper's first refresh is on its way.
            let bound = clock.now().saturating_add(core.config.store_timeout * 2);
            share
                .first_attempt(clock, deadline.map_or(bound, |d| d.min(bound)))
                .await;
        }
        let mut now = now.unwrap_or_else(|| clock.now());
        loop {
            if !share.is_live(core, now) {
                share.nudge();
                return self.fallback(front, deadline, share.failure()).await;
            }
            let got = match deadline {
                None => share.local.try_acquire_owned(),
                Some(d) => {
                    if share.local.available() == 0 {
                        share.nudge();
                    }
                    // Not past the lease: a wait that outlives it falls back.
                    let until = share.lease_end().map_or(d, |end| end.min(d));
                    share.local.acquire_owned_until(until).await
                }
            };
            // A wait above ended before the lease it started under (or
            // the lease was renewed): `now` from before it still tells
            // whether that lease is live, unless it was lost meanwhile,
            // which `enter` sees.
            match got {
                Ok(slot) => {
                    let Some(era) = share.enter(core, now) else {
                        now = clock.now();
                        continue; // the lease ended as the slot was taken
                    };
                    return Ok(super::GlobalPermit {
                        held: super::Held::Leased {
                            era,
                            token: share.token(),
                            slot: Some(slot),
                        },
                        inner: Arc::clone(&self.inner),
                        _front: front,
                    });
                }
                Err(crate::bulkhead::AcquireError::TimedOut) => {
                    if deadline.is_some_and(|d| clock.now() >= d) {
                        share.refused();
                        return Err(core.stats.rejected(core.name, GlobalError::TimedOut));
                    }
                    // The lease ended first: try again (and fall back).
                    now = clock.now();
                }
                Err(crate::bulkhead::AcquireError::Closed) => {
                    return Err(core.stats.rejected(core.name, GlobalError::Closed));
                }
                Err(_) => {
                    share.refused();
                    return Err(core.stats.rejected(core.name, GlobalError::Full));
                }
            }
        }
    }
}
