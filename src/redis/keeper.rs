//! The keeper: one tokio task per global bulkhead that sends the releases
//! dropped permits hand it (batched into one script call), renews every
//! lease the process holds (one script call per renewal), and keeps the
//! connection subscribed to the release channel.

use std::{string::String, vec, vec::Vec};

use core::time::Duration;
use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::runtime::Runtime;
use super::store::{Core, Lease};
use crate::clock::Instant;

/// Members per script call: Redis takes many more arguments, but a call
/// this size already runs in well under a millisecond.
const MAX_BATCH: usize = 1024;

pub(super) async fn run<R: Runtime>(
    core: Arc<Core<R>>,
    mut releases: mpsc::UnboundedReceiver<String>,
) {
    // Subscriptions and retried releases are checked at least every second;
    // renewals run every `renew_every`.
    let every = core.config.renew_every.min(Duration::from_secs(1));
    // The first tick at once: subscribe before anyone waits.
    let mut next_tick = core.clock.now();
    let mut next_renew = core.clock.now().saturating_add(core.config.renew_every);
    // Releases Redis did not confirm, each with the time after which its
    // lease has ended anyway.
    let mut retry: Vec<(String, Instant)> = Vec::new();
    loop {
        tokio::select! {
            member = releases.recv() => {
                let Some(member) = member else { break };
                let mut batch = vec![member];
                while batch.len() < MAX_BATCH {
                    match releases.try_recv() {
                        Ok(m) => batch.push(m),
                        Err(_) => break,
                    }
                }
                if core.release(&batch).await.is_err() {
                    let give_up = core.clock.now().saturating_add(core.config.lease);
                    retry.extend(batch.into_iter().map(|m| (m, give_up)));
                }
            }
            () = core.clock.sleep_until(next_tick) => {
                next_tick = core.clock.now().saturating_add(every);
                if !core.is_subscribed() {
                    core.subscribe().await;
                }
                retry_releases(&core, &mut retry).await;
                let now = core.clock.now();
                if now >= next_renew {
                    renew(&core).await;
                    next_renew = now.saturating_add(core.config.renew_every);
                }
            }
        }
    }
    // Every handle and permit is gone: one last try for what is left.
    retry_releases(&core, &mut retry).await;
}

async fn retry_releases<R: Runtime>(core: &Core<R>, retry: &mut Vec<(String, Instant)>) {
    let now = core.clock.now();
    retry.retain(|(_, until)| *until > now);
    for chunk in retry.chunks(MAX_BATCH) {
        let members: Vec<String> = chunk.iter().map(|(m, _)| m.clone()).collect();
        if core.release(&members).await.is_err() {
            return;
        }
    }
    retry.clear();
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
