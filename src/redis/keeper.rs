//! The keeper: one tokio task per global bulkhead that sends the releases
//! dropped permits hand it (batched into one script call), renews every
//! lease the process holds (one script call per renewal), and keeps the
//! connection subscribed to the release channel.

use std::{string::String, vec::Vec};

use core::time::Duration;
use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::error::StoreFailure;
use super::runtime::Runtime;
use super::store::{Core, Lease};
use crate::clock::Instant;

/// Members per script call: Redis takes many more arguments, but a call
/// this size already runs in well under a millisecond.
const MAX_BATCH: usize = 1024;

/// What the handles and permits tell the keeper.
pub(super) enum Msg {
    /// A dropped permit's member, to be released.
    Release(String),
    /// `GlobalBulkhead::close`: send what is pending, then stop; the
    /// answer says whether Redis confirmed it all.
    Close(oneshot::Sender<Result<(), StoreFailure>>),
}

/// The keeper's state, which flushes on drop. A keeper dropped before it
/// ends (its runtime shut down: `main` returned) cannot await Redis any
/// more: what it holds, and what permits dropped after it hand on, goes
/// out on a blocking connection within one store timeout.
struct State<R: Runtime> {
    core: Arc<Core<R>>,
    releases: mpsc::UnboundedReceiver<Msg>,
    /// Releases Redis did not confirm, each with the time after which its
    /// lease has ended anyway.
    retry: Vec<(String, Instant)>,
    finished: bool,
}

impl<R: Runtime> Drop for State<R> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.core.set_keeper_gone();
        // From here a permit's drop finds the channel closed and releases
        // on its own (blocking) connection.
        self.releases.close();
        let mut members: Vec<String> = self.retry.drain(..).map(|(m, _)| m).collect();
        while let Ok(msg) = self.releases.try_recv() {
            match msg {
                Msg::Release(m) => members.push(m),
                Msg::Close(ack) => drop(ack),
            }
        }
        self.core.release_blocking(&members);
    }
}

pub(super) async fn run<R: Runtime>(core: Arc<Core<R>>, releases: mpsc::UnboundedReceiver<Msg>) {
    let mut st = State {
        core,
        releases,
        retry: Vec::new(),
        finished: false,
    };
    let core = Arc::clone(&st.core);
    // Subscriptions and retried releases are checked at least every second;
    // renewals run every `renew_every`.
    let every = core.config.renew_every.min(Duration::from_secs(1));
    // The first tick at once: subscribe before anyone waits.
    let mut next_tick = core.clock.now();
    let mut next_renew = core.clock.now().saturating_add(core.config.renew_every);
    let closing = loop {
        tokio::select! {
            msg = st.releases.recv() => {
                let mut batch = Vec::new();
                let mut closing = match msg {
                    None => break None,
                    Some(Msg::Release(m)) => { batch.push(m); None }
                    Some(Msg::Close(ack)) => Some(ack),
                };
                while batch.len() < MAX_BATCH && closing.is_none() {
                    match st.releases.try_recv() {
                        Ok(Msg::Release(m)) => batch.push(m),
                        Ok(Msg::Close(ack)) => closing = Some(ack),
                        Err(_) => break,
                    }
                }
                if !batch.is_empty() && core.release(&batch).await.is_err() {
                    let give_up = core.clock.now().saturating_add(core.config.lease);
                    st.retry.extend(batch.into_iter().map(|m| (m, give_up)));
                }
                if closing.is_some() {
                    break closing;
                }
            }
            () = core.clock.sleep_until(next_tick) => {
                next_tick = core.clock.now().saturating_add(every);
                if !core.is_subscribed() {
                    core.subscribe().await;
                }
                let _ = retry_releases(&core, &mut st.retry).await;
                let now = core.clock.now();
                if now >= next_renew {
                    renew(&core).await;
                    next_renew = now.saturating_add(core.config.renew_every);
                }
            }
        }
    };
    // Closed, or every handle and permit is gone: what is still queued
    // (a grant given back after `close` began), then one last try for the
    // releases Redis did not confirm.
    st.releases.close();
    let mut rest = Vec::new();
    let mut more_acks = Vec::new();
    while let Ok(msg) = st.releases.try_recv() {
        match msg {
            Msg::Release(m) => rest.push(m),
            Msg::Close(ack) => more_acks.push(ack),
        }
    }
    let give_up = core.clock.now().saturating_add(core.config.lease);
    st.retry.extend(rest.into_iter().map(|m| (m, give_up)));
    let outcome = retry_releases(&core, &mut st.retry).await;
    st.finished = true;
    // A second `close` racing the first learns the same outcome (a failure
    // as a timeout: the error itself went to the first).
    for ack in more_acks {
        let _ = ack.send(match &outcome {
            Ok(()) => Ok(()),
            Err(_) => Err(StoreFailure::TimedOut),
        });
    }
    if let Some(ack) = closing {
        let _ = ack.send(outcome);
    }
}

/// Sends the releases Redis has not confirmed yet (dropping those whose
/// lease has ended anyway); the first failure stops it.
async fn retry_releases<R: Runtime>(
    core: &Core<R>,
    retry: &mut Vec<(String, Instant)>,
) -> Result<(), StoreFailure> {
    let now = core.clock.now();
    retry.retain(|(_, until)| *until > now);
    for chunk in retry.chunks(MAX_BATCH) {
        let members: Vec<String> = chunk.iter().map(|(m, _)| m.clone()).collect();
        core.release(&members).await?;
    }
    retry.clear();
    Ok(())
}

async fn renew<R: Runtime>(core: &Core<R>) {
    let Some(held) = core.leases() else { return };
    for chunk in held.chunks(MAX_BATCH) {
        let sent = core.clock.now();
        match core.renew(chunk.iter().map(|(_, l)| l.member())).await {
            Ok(gone) => {
                let gone: HashSet<&str> = gone.iter().map(String::as_str).collect();
                let mut renewed = 0;
                for (seq, l) in chunk {
                    // A lease already over by our clock stays lost, even if
                    // Redis (whose lease began a little later) still had it.
                    if gone.contains(l.member()) || l.is_lost(core.config.lease, core.clock.now()) {
                        mark_lost(core, *seq, l);
                    } else {
                        l.renewed(sent);
                        renewed += 1;
                    }
                }
                core.stats.renewed(core.name, renewed);
            }
            Err(_) => {
                let now = core.clock.now();
                for (seq, l) in chunk {
                    if l.is_lost(core.config.lease, now) {
                        mark_lost(core, *seq, l);
                    }
                }
            }
        }
    }
}

fn mark_lost<R: Runtime>(core: &Core<R>, seq: u64, lease: &Lease) {
    if lease.mark_lost() {
        core.stats.lost(core.name, lease.member());
    }
    // Not renewed again; its permit's drop still sends a (harmless) release.
    core.forget_lease(seq);
}
