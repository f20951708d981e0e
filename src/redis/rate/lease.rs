//! The leased mode of the global rate limiter
//! ([`GlobalRateConfigBuilder::leased`](super::GlobalRateConfigBuilder::leased)):
//! this process's pocket of cells leased from the unkeyed schedule in
//! Redis, spent with no Redis call, and the keeper task that fills it.
//!
//! **The pocket** is one counter: the cells this process may spend. A
//! spend takes `n` of them by compare-and-swap if there are `n` (and reads
//! no clock); only the keeper adds, with the cells Redis granted. Every
//! cell in it was admitted by the global GCRA once (`gcra_lease.lua`), so
//! no spend is ever a cell Redis did not grant.
//!
//! **Ageing.** The keeper keeps two generations: the cells of its last
//! grant (`young`) and older ones. At each refresh attempt (granted,
//! refused or failed) it wastes the older cells still in the pocket
//! (spends are taken as oldest first), keeps the young and adds the new
//! grant, in one compare-and-swap. A cell therefore stays in a pocket at
//! most from the refresh that leased it to the second attempt after it:
//! `2 × refresh` plus a store timeout.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use event_listener::Event;
use tokio::sync::{mpsc, oneshot};

use super::cells::Cells;
use super::Inner;
use crate::clock::Instant;
use crate::redis::runtime::Runtime;
use crate::redis::StoreFailure;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// Headroom on the demand asked for: a quarter more than the last
/// interval's, so that a steady load does not run dry on its noise (cells
/// left over are kept for one more refresh and asked for less next time).
const HEADROOM_DIV: u64 = 4;

/// What the handles tell the keeper.
pub(super) enum Msg {
    /// `close`: give back what can be, then stop; answered when done.
    Close(oneshot::Sender<()>),
}

/// This process's leased cells of the unkeyed limit.
pub(super) struct Pocket {
    /// Cells that may be spent now.
    cells: Cells,
    /// Cells asked for and not found since the last refresh (demand).
    refused: AtomicU64,
    /// Cells waited for right now (demand).
    waiting: AtomicU64,
    /// Whether the keeper has been asked to refresh early.
    nudged: AtomicBool,
    nudge: Event,
    /// Told after every refresh attempt, and at the end.
    pub(super) changed: Event,
    /// Whether a refresh has been attempted yet.
    tried: AtomicBool,
    /// The last attempt's failure (Redis unreachable), if it failed.
    failure: Mutex<Option<StoreFailure>>,
    down: AtomicBool,
    /// When more cells may come (the next refresh, or when Redis said the
    /// next cell conforms, whichever is later), in nanoseconds on the
    /// runtime's clock.
    ready_at: AtomicU64,
    /// Whether the keeper has ended (closed, or every handle dropped).
    ended: AtomicBool,
}

impl Pocket {
    pub(super) fn new() -> Self {
        Pocket {
            cells: Cells::new(),
            refused: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            nudged: AtomicBool::new(false),
            nudge: Event::new(),
            changed: Event::new(),
            tried: AtomicBool::new(false),
            failure: Mutex::new(None),
            down: AtomicBool::new(false),
            ready_at: AtomicU64::new(0),
            ended: AtomicBool::new(false),
        }
    }

    /// Takes `n` cells if the pocket holds them: the hot path (no clock,
    /// no count of its own).
    #[inline]
    pub(super) fn take(&self, n: u64) -> bool {
        self.cells.take(n)
    }

    /// Cells in the pocket now.
    pub(super) fn cells(&self) -> u64 {
        self.cells.get()
    }

    /// `n` cells were asked for and not found: demand, and an early
    /// refresh.
    pub(super) fn refused(&self, n: u64) {
        self.refused.fetch_add(n, Ordering::Relaxed);
        self.nudge();
    }

    fn nudge(&self) {
        if !self.nudged.swap(true, Ordering::AcqRel) {
            self.nudge.notify(1);
        }
    }

    /// Counts `n` cells waited for while the guard lives.
    pub(super) fn wait(&self, n: u64) -> Waiting<'_> {
        self.waiting.fetch_add(n, Ordering::Relaxed);
        self.nudge();
        Waiting { pocket: self, n }
    }

    pub(super) fn has_tried(&self) -> bool {
        self.tried.load(Ordering::Acquire)
    }

    pub(super) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Why the last refresh failed, if it did (Redis unreachable).
    pub(super) fn failure(&self) -> Option<StoreFailure> {
        if !self.down.load(Ordering::Acquire) {
            return None;
        }
        match self.failure.lock().ok().as_deref() {
            Some(Some(f)) => Some(crate::redis::share::copy_failure(f)),
            _ => Some(StoreFailure::TimedOut),
        }
    }

    /// How long until more cells may come, from `now` (at least 1 ms: a
    /// refresh is on its way).
    pub(super) fn hint(&self, now: Instant) -> Duration {
        let at = self.ready_at.load(Ordering::Acquire);
        Duration::from_nanos(at.saturating_sub(now.as_nanos())).max(Duration::from_millis(1))
    }

    /// Waits (until `until`) for the keeper's first refresh attempt.
    pub(super) async fn first_attempt<R: Runtime>(&self, clock: &R, until: Instant) {
        let done = || self.has_tried() || self.has_ended();
        crate::redis::conn::wait_for(&self.changed, done, clock, until).await;
    }

    /// The keeper's one write (see [`Cells::refill`]).
    fn refill(&self, young: u64, grant: u64) -> (u64, u64, u64) {
        self.cells.refill(young, grant)
    }

    fn record(&self, failure: Option<StoreFailure>, ready_at: Instant) {
        self.ready_at.store(ready_at.as_nanos(), Ordering::Release);
        let down = failure.is_some();
        if let Ok(mut f) = self.failure.lock() {
            *f = failure;
        }
        self.down.store(down, Ordering::Release);
        self.tried.store(true, Ordering::Release);
        self.changed.notify(usize::MAX);
    }
}

/// Cells waited for, counted as demand until dropped.
pub(super) struct Waiting<'a> {
    pocket: &'a Pocket,
    n: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.pocket.waiting.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// What the keeper knows between refreshes.
struct Books {
    /// Cells of the last grant (the young generation).
    young: u64,
    /// The pocket as the keeper last left it: spends since are the
    /// difference.
    left: u64,
    /// The last grant's TAT in Redis and its size, for the give-back.
    last_tat: Option<(i64, u64)>,
    /// Whether the last answer granted all that was asked (an early
    /// refresh may then get more; after a partial grant the schedule is
    /// full and cells come at Redis's pace, not sooner for asking).
    full: bool,
    last_sent: Option<Instant>,
}

/// The keeper of the pocket: refreshes every `refresh`, early (at most
/// every quarter of it) when a spend found the pocket dry and the last
/// grant was full, and ends at `close` or when every handle is gone,
/// giving back the unspent tail of its last grant if it can.
pub(super) async fn run<R: Runtime>(
    inner: Arc<Inner<R>>,
    pocket: Arc<Pocket>,
    refresh: Duration,
    mut msgs: mpsc::UnboundedReceiver<Msg>,
) {
    let clock = inner.clock.clone();
    let gap = refresh / 4;
    let burst = u64::from(inner.config.quota.burst_size());
    let mut books = Books {
        young: 0,
        left: 0,
        last_tat: None,
        full: true,
        last_sent: None,
    };
    let mut next = clock.now();
    let closing = loop {
        let nudge = pocket.nudge.listen();
        tokio::select! {
            biased;
            msg = msgs.recv() => match msg {
                None => break None,
                Some(Msg::Close(ack)) => break Some(ack),
            },
            () = clock.sleep_until(next) => {}
            () = nudge => {
                if books.full {
                    next = next.min(books.last_sent.map_or(clock.now(), |s| s.saturating_add(gap)));
                    pocket.ready_at.fetch_min(next.as_nanos(), Ordering::AcqRel);
                }
                // Otherwise left set: no more wake-ups until the refresh.
                continue;
            }
        }
        let sent = clock.now();
        pocket.nudged.store(false, Ordering::Release);
        let elapsed = books
            .last_sent
            .map_or(refresh, |s| sent.saturating_duration_since(s))
            .max(gap);
        // The demand of the last interval, for one refresh interval.
        let now_cells = pocket.cells();
        let spent = books.left.saturating_sub(now_cells);
        let asked = spent
            .saturating_add(pocket.refused.swap(0, Ordering::AcqRel))
            .saturating_mul(refresh.as_micros().max(1) as u64)
            / elapsed.as_micros().max(1) as u64;
        let demand = asked
            .saturating_add(asked / HEADROOM_DIV)
            .saturating_add(pocket.waiting.load(Ordering::Relaxed))
            .max(1);
        // Cells that will still be spendable after this refresh.
        let kept = now_cells.min(books.young);
        let want = demand.saturating_sub(kept).min(burst.saturating_sub(kept));
        let (grant, failure, ready_at) = if want == 0 {
            (0, None, sent.saturating_add(refresh))
        } else {
            match inner.lease(want).await {
                Ok(l) => {
                    if l.grant > 0 {
                        books.last_tat = Some((l.tat, l.grant));
                    }
                    books.full = l.grant == want;
                    let until = sent.saturating_add(refresh);
                    let more = clock.now().saturating_add(l.retry);
                    (
                        l.grant,
                        None,
                        if l.grant == want {
                            until
                        } else {
                            until.max(more)
                        },
                    )
                }
                Err(f) => {
                    books.full = true;
                    (0, Some(f), sent.saturating_add(refresh))
                }
            }
        };
        let (before, wasted, after) = pocket.refill(books.young, grant);
        inner.stats.pocket(
            inner.name,
            grant,
            books.left.saturating_sub(before),
            wasted,
            0,
        );
        books.young = grant;
        books.left = after;
        books.last_sent = Some(sent);
        next = sent.saturating_add(refresh);
        pocket.record(failure, ready_at);
        // A nudge that came while the refresh ran is served after the gap.
        if pocket.nudged.load(Ordering::Acquire) && books.full {
            next = next.min(sent.saturating_add(gap));
        }
    };
    msgs.close();
    // No more cells: what is left is given back if it is the tail of the
    // schedule, wasted otherwise.
    let left = pocket.cells.take_all();
    let spent = books.left.saturating_sub(left);
    let mut returned = 0;
    if let Some((tat, granted)) = books.last_tat {
        let back = left.min(granted);
        if back > 0 && inner.give_back(tat, back).await {
            returned = back;
        }
    }
    inner
        .stats
        .pocket(inner.name, 0, spent, left - returned, returned);
    pocket.ended.store(true, Ordering::Release);
    pocket.changed.notify(usize::MAX);
    if let Some(ack) = closing {
        let _ = ack.send(());
    }
}

/// Redis's answer to a lease.
pub(super) struct Leased {
    pub(super) grant: u64,
    /// Until one more cell conforms (zero if all were granted).
    pub(super) retry: Duration,
    /// The key's TAT after the grant.
    pub(super) tat: i64,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn spends_take_only_what_the_pocket_holds() {
        let p = Pocket::new();
        assert!(!p.take(1));
        assert_eq!(p.refill(0, 3), (0, 0, 3));
        assert!(p.take(2));
        assert!(!p.take(2));
        assert!(p.take(1));
        assert!(!p.take(1));
    }

    #[test]
    fn cells_older_than_the_last_grant_age_out() {
        let p = Pocket::new();
        p.refill(0, 5);
        assert!(p.take(1));
        // 4 left of the grant of 5: kept, and 3 more.
        assert_eq!(p.refill(5, 3), (4, 0, 7));
        // Of 7, only the last grant's 3 are young: 4 are wasted.
        assert_eq!(p.refill(3, 0), (7, 4, 3));
        assert_eq!(p.refill(0, 0), (3, 3, 0));
    }

    #[test]
    fn racing_spends_and_refills_lose_and_invent_nothing() {
        let p = Arc::new(Pocket::new());
        let spent = Arc::new(AtomicU64::new(0));
        let spenders: Vec<_> = (0..3)
            .map(|_| {
                let (p, spent) = (p.clone(), spent.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if p.take(1) {
                            spent.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let (mut young, mut granted, mut wasted) = (0, 0, 0);
        for g in 0..2_000u64 {
            let (_, w, _) = p.refill(young, g % 7);
            wasted += w;
            granted += g % 7;
            young = g % 7;
        }
        for s in spenders {
            s.join().unwrap();
        }
        let left = p.cells();
        assert_eq!(spent.load(Ordering::Relaxed) + wasted + left, granted);
    }
}
