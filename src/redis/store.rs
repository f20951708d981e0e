//! The store: what the global bulkhead keeps in Redis and how it speaks to
//! it. The connections (`conn.rs`: one Redis, Sentinel's primary or a
//! cluster; RESP3 with the release channel's pushes), the Lua scripts
//! (sent as `EVALSHA`, with `WAIT` behind them for acknowledged grants),
//! the system's keys, and the leases this process holds.
//!
//! Both the handle ([`GlobalBulkhead`](super::GlobalBulkhead) and its
//! permits) and the keeper task use [`Core`]; neither uses the other.

use std::{boxed::Box, format, string::String, vec::Vec};

use core::future::Future;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ::redis::{Cmd, ErrorKind, PushInfo, PushKind, RedisError, Script, ServerErrorKind, Value};
use event_listener::{Event, EventListener};

use super::config::GlobalConfig;
use super::conn::{Blocking, Conn, Endpoint};
use super::error::{GlobalBuildError, StoreFailure};
use super::runtime::Runtime;
use super::telemetry::Stats;
use crate::clock::Instant;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The longest system name: its keys stay short.
const MAX_NAME: usize = 128;

/// Whether `name` can name a system's keys.
pub(super) fn check_name(name: &'static str) -> Result<(), GlobalBuildError> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_NAME {
        "it is longer than 128 bytes"
    } else if name.contains(['{', '}']) {
        "it holds `{` or `}`, which would break the keys' hash tag"
    } else if name.chars().any(char::is_control) {
        "it holds a control character"
    } else {
        return Ok(());
    };
    Err(GlobalBuildError::BadName { name, reason })
}

/// The scripts, loaded once per process (their text is part of the binary).
///
/// In a Redis Cluster they publish with `SPUBLISH`: sharded pub/sub, whose
/// channel lives in the slot of its hash tag (the system's, like its
/// keys), so a message goes only to the node that serves the system
/// instead of to every node over the cluster bus; one Redis keeps
/// `PUBLISH` (and so Redis 6).
struct Scripts {
    acquire: Script,
    release: Script,
    renew: Script,
    share_refresh: Script,
    share_leave: Script,
}

impl Scripts {
    fn new(sharded: bool) -> Self {
        let script = |text: &str| Script::new(&script_text(text, sharded));
        Scripts {
            acquire: script(include_str!("scripts/acquire.lua")),
            release: script(include_str!("scripts/release.lua")),
            renew: script(include_str!("scripts/renew.lua")),
            share_refresh: script(include_str!("scripts/share_refresh.lua")),
            share_leave: script(include_str!("scripts/share_leave.lua")),
        }
    }
}

/// A script's text, its publications made sharded (`SPUBLISH`) if
/// `sharded`.
fn script_text(text: &str, sharded: bool) -> String {
    if sharded {
        text.replace("redis.call('PUBLISH',", "redis.call('SPUBLISH',")
    } else {
        String::from(text)
    }
}

/// The system's names in Redis.
struct Keys {
    holders: String,
    fence: String,
    channel: String,
    /// Leased mode: a process that was granted less than its fair share
    /// says so here, so that processes holding more than they need give
    /// it back at once rather than at their next refresh.
    wanted: String,
    /// The leased shares: their processes (by lease expiry), the slots
    /// each may be using, and the demand each reported.
    sharers: String,
    shares: String,
    demand: String,
}

impl Keys {
    fn new(name: &str) -> Self {
        Keys {
            holders: format!("watertight:{{{name}}}:holders"),
            fence: format!("watertight:{{{name}}}:fence"),
            channel: format!("watertight:{{{name}}}:released"),
            wanted: format!("watertight:{{{name}}}:wanted"),
            sharers: format!("watertight:{{{name}}}:sharers"),
            shares: format!("watertight:{{{name}}}:shares"),
            demand: format!("watertight:{{{name}}}:demand"),
        }
    }
}

/// What a process tells Redis when it refreshes its leased share.
pub(super) struct Report<'a> {
    pub(super) member: &'a str,
    /// Slots in use, waited for, and refused since the last refresh.
    pub(super) demand: u64,
    /// The most slots it may be using until it hears the answer.
    pub(super) bound: u64,
    /// It holds no lease now: it starts a new one (and a new token).
    pub(super) fresh: bool,
}

/// What Redis answered a share refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refreshed {
    /// The slots the process may use from now on.
    pub(super) grant: u64,
    /// What Redis counts as the process's share (at least the grant).
    pub(super) recorded: u64,
    /// The new lease's fencing token, if it started one.
    pub(super) token: Option<u64>,
    /// Redis no longer had the lease the process thought it held.
    pub(super) lost: bool,
    /// Slots held fleet-wide (per-call holders and recorded shares).
    pub(super) fleet_held: u64,
    /// Its fair share (the grant is smaller while others still hold what
    /// is to be its).
    pub(super) target: u64,
}

/// One grant this process holds in Redis.
pub(super) struct Lease {
    member: String,
    /// When the last renewal (or the grant) was *sent*, on the runtime's
    /// clock: Redis's lease ends no earlier than this plus the lease.
    renewed_at: AtomicU64,
    lost: AtomicBool,
    /// Its permit was dropped or released: a renewal that finds it gone
    /// is not a lost lease.
    released: AtomicBool,
}

impl Lease {
    /// The grant of `member`, whose acquire command was sent at `sent_at`.
    pub(super) fn new(member: String, sent_at: Instant) -> Self {
        Lease {
            member,
            renewed_at: AtomicU64::new(sent_at.as_nanos()),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
        }
    }

    /// The member in the holders' sorted set.
    pub(super) fn member(&self) -> &str {
        &self.member
    }

    /// Whether the lease is lost: marked so, or `length` has passed at
    /// `now` since the last renewal was sent.
    pub(super) fn is_lost(&self, length: Duration, now: Instant) -> bool {
        self.lost.load(Ordering::Acquire)
            || now.saturating_duration_since(Instant::from_nanos(
                self.renewed_at.load(Ordering::Acquire),
            )) >= length
    }

    /// A renewal sent at `sent` reached Redis and found the member there.
    pub(super) fn renewed(&self, sent: Instant) {
        self.renewed_at.store(sent.as_nanos(), Ordering::Release);
    }

    /// Marks the lease lost; true the first time (and never for a lease
    /// whose permit was already given back).
    pub(super) fn mark_lost(&self) -> bool {
        !self.released.load(Ordering::Acquire) && !self.lost.swap(true, Ordering::AcqRel)
    }

    /// Its permit gave the slot back (the release is on its way).
    pub(super) fn set_released(&self) {
        self.released.store(true, Ordering::Release);
    }
}

/// What Redis answered an acquire.
pub(super) enum Acquired {
    Granted { token: u64, held: u64 },
    Full { held: u64, next_free: Duration },
}

/// What the keeper task and the handles share; the keeper holds no sender,
/// so it ends when the last handle and permit are gone.
pub(super) struct Core<R> {
    pub(super) clock: R,
    pub(super) name: &'static str,
    pub(super) config: GlobalConfig,
    pub(super) stats: Stats,
    keys: Keys,
    scripts: Scripts,
    /// The scripts' connection, and the channel's (the same connection
    /// on one Redis and under Sentinel; two in a cluster, see
    /// `conn::open_with_pushes`).
    con: Conn,
    sub: Conn,
    /// Told by the push handler: a release elsewhere, or a lost connection.
    released: Arc<Event>,
    /// Whether `sub` is subscribed to the release channel, and the
    /// `Conn::generation` it subscribed on (a Sentinel link that moved to
    /// a new primary holds no subscription yet).
    subscribed: Arc<AtomicBool>,
    subscribed_on: AtomicU64,
    leases: Mutex<HashMap<u64, Arc<Lease>>>,
    /// Set (under the `leases` lock) by `GlobalBulkhead::close`: no lease
    /// is recorded after it.
    closed: AtomicBool,
    /// Global permits alive (dropped ones not counted), and the event
    /// `close` waits on for them to reach zero.
    alive: AtomicUsize,
    drained: Event,
    /// The keeper's future was dropped (its runtime shut down) without
    /// `close`: releases go to Redis on a blocking connection from then on.
    keeper_gone: AtomicBool,
    /// That blocking connection (under Sentinel, to the primary it named
    /// last), made on first need; and whether it failed once (then
    /// nothing more is tried: a shutdown must not wait a store timeout per
    /// permit).
    client: Blocking,
    blocking: Mutex<Option<Box<dyn ::redis::ConnectionLike + Send>>>,
    blocking_failed: AtomicBool,
}

impl<R: Runtime> Core<R> {
    /// The store of system `name` on the Redis at `endpoint`. It does not
    /// wait for Redis: the connection is made on first use, and again by
    /// itself after it is lost.
    pub(super) fn open(
        endpoint: Endpoint<'_>,
        name: &'static str,
        config: GlobalConfig,
        clock: R,
    ) -> Result<Self, GlobalBuildError> {
        let released = Arc::new(Event::new());
        let subscribed = Arc::new(AtomicBool::new(false));
        let keys = Keys::new(name);
        let push = {
            let released = Arc::clone(&released);
            let subscribed = Arc::clone(&subscribed);
            // The channel this handle listens on: releases per call, the
            // wanted notices in leased mode.
            let channel = match config.mode {
                super::config::Mode::Leased { .. } => keys.wanted.clone(),
                super::config::Mode::PerCall => keys.channel.clone(),
            };
            move |push: PushInfo| {
                on_push(&push, &channel, &released, &subscribed);
                Ok::<(), ::redis::aio::SendError>(())
            }
        };
        // The shared settings (conn.rs), with the release channel's pushes.
        let cons = super::conn::open_with_pushes(endpoint, config.store_timeout, push)
            .map_err(GlobalBuildError::BadUrl)?;

        Ok(Core {
            clock,
            name,
            config,
            stats: Stats::default(),
            keys,
            scripts: Scripts::new(cons.commands.sharded()),
            con: cons.commands,
            sub: cons.subscriptions,
            released,
            subscribed,
            subscribed_on: AtomicU64::new(0),
            leases: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            alive: AtomicUsize::new(0),
            drained: Event::new(),
            keeper_gone: AtomicBool::new(false),
            client: cons.blocking,
            blocking: Mutex::new(None),
            blocking_failed: AtomicBool::new(false),
        })
    }

    fn lease_ms(&self) -> u64 {
        u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX)
    }

    /// Runs a command under the store timeout.
    async fn run<T, F>(&self, cmd: F) -> Result<T, StoreFailure>
    where
        F: Future<Output = Result<T, ::redis::RedisError>>,
    {
        self.stats.redis_call(self.name);
        let out = super::conn::timed(&self.clock, self.config.store_timeout, cmd).await;
        match &out {
            Err(StoreFailure::Redis(e)) => self.stats.store_error(self.name, e),
            Err(_) => self.stats.store_timeout(self.name),
            Ok(_) => {}
        }
        out
    }

    /// Runs `cmd` (an `EVALSHA` of `script`) under the store timeout,
    /// loading the script on `NOSCRIPT` (a restarted or new primary) and
    /// sending it again. With acknowledged grants, `WAIT` goes right behind
    /// it in one pipeline (one round trip, on the same connection: a `WAIT`
    /// on another connection would count that connection's writes, none),
    /// and the answer says whether enough replicas had it (`None` without
    /// acknowledged grants).
    async fn eval(&self, script: &Script, cmd: &Cmd) -> Result<(Value, Option<u32>), StoreFailure> {
        let mut con = self.con.clone();
        let Some(ack) = self.config.ack else {
            let v = self
                .run(async {
                    match cmd.query_async::<Value>(&mut con).await {
                        Err(e) if is_noscript(&e) => {
                            script.load_async(&mut con).await?;
                            cmd.query_async(&mut con).await
                        }
                        r => r,
                    }
                })
                .await?;
            return Ok((v, None));
        };
        let ms = u64::try_from(ack.timeout.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = ::redis::pipe();
        pipe.add_command(cmd.clone())
            .cmd("WAIT")
            .arg(ack.replicas)
            .arg(ms);
        let (v, acked) = self
            .run(async {
                match pipe.query_async::<(Value, u32)>(&mut con).await {
                    Err(e) if is_noscript(&e) => {
                        script.load_async(&mut con).await?;
                        pipe.query_async(&mut con).await
                    }
                    r => r,
                }
            })
            .await?;
        Ok((v, Some(acked)))
    }

    /// The failure of a write `acked` by fewer replicas than asked for
    /// (counted), if it was.
    fn check_ack(&self, acked: Option<u32>) -> Result<(), StoreFailure> {
        match (acked, self.config.ack) {
            (Some(acked), Some(ack)) if acked < ack.replicas => {
                self.stats.unacknowledged(self.name, acked, ack.replicas);
                // Perhaps a primary Sentinel has replaced: ask again.
                self.con.suspect();
                Err(StoreFailure::NotAcknowledged {
                    acked,
                    wanted: ack.replicas,
                })
            }
            _ => Ok(()),
        }
    }

    /// Runs the acquire script for `member`: a grant with its fencing
    /// token, or the limit reached and when the earliest lease ends. With
    /// acknowledged grants, a grant that too few replicas had in time is
    /// [`StoreFailure::NotAcknowledged`] (the caller gives it back).
    pub(super) async fn acquire(&self, member: &str) -> Result<Acquired, StoreFailure> {
        let script = &self.scripts.acquire;
        let mut cmd = evalsha(
            script,
            &[
                &self.keys.holders,
                &self.keys.fence,
                &self.keys.sharers,
                &self.keys.shares,
            ],
        );
        cmd.arg(self.config.limit).arg(self.lease_ms()).arg(member);
        let (v, acked) = self.eval(script, &cmd).await?;
        let got = parse_acquire(&v)?;
        if let Acquired::Granted { .. } = got {
            self.check_ack(acked)?;
        }
        Ok(got)
    }

    /// Removes `members` in one script call.
    pub(super) async fn release(&self, members: &[String]) -> Result<u64, StoreFailure> {
        let mut inv = self.scripts.release.key(&self.keys.holders);
        inv.arg(&self.keys.channel);
        for m in members {
            inv.arg(m);
        }
        let mut con = self.con.clone();
        let freed: u64 = self.run(inv.invoke_async(&mut con)).await?;
        self.stats.released(members.len());
        Ok(freed)
    }

    /// Renews `members`' leases in one script call; Redis answers with the
    /// members it no longer had (or whose lease had ended there). With
    /// acknowledged grants, a renewal too few replicas had in time is
    /// [`StoreFailure::NotAcknowledged`]: it renewed nothing the caller
    /// may count on.
    pub(super) async fn renew<'a>(
        &self,
        members: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<String>, StoreFailure> {
        let script = &self.scripts.renew;
        let mut cmd = evalsha(script, &[&self.keys.holders]);
        cmd.arg(&self.keys.channel).arg(self.lease_ms());
        for m in members {
            cmd.arg(m);
        }
        let (v, acked) = self.eval(script, &cmd).await?;
        self.check_ack(acked)?;
        ::redis::from_redis_value(v).map_err(|_| StoreFailure::BadReply)
    }

    /// Refreshes this process's leased share: renews its lease, reports
    /// its demand, and takes its new share.
    pub(super) async fn refresh(
        &self,
        report: &Report<'_>,
        floor: u32,
    ) -> Result<Refreshed, StoreFailure> {
        let script = &self.scripts.share_refresh;
        let mut cmd = evalsha(
            script,
            &[
                &self.keys.sharers,
                &self.keys.shares,
                &self.keys.demand,
                &self.keys.fence,
                &self.keys.holders,
            ],
        );
        cmd.arg(self.config.limit)
            .arg(self.lease_ms())
            .arg(report.member)
            .arg(report.demand)
            .arg(report.bound)
            .arg(floor)
            .arg(u8::from(report.fresh))
            .arg(&self.keys.channel)
            .arg(&self.keys.wanted);
        let (v, acked) = self.eval(script, &cmd).await?;
        // Not acknowledged: the grant, the renewed lease and a new token
        // may all be lost with the primary, so none of it is taken.
        self.check_ack(acked)?;
        parse_refresh(&v)
    }

    /// Gives this process's whole leased share back.
    pub(super) async fn leave(&self, member: &str) -> Result<u64, StoreFailure> {
        let mut con = self.con.clone();
        let freed = self
            .run(self.leave_invocation(member).invoke_async(&mut con))
            .await?;
        Ok(freed)
    }

    /// [`leave`](Self::leave) on the blocking connection, for a keeper
    /// whose runtime has shut down (as [`release_blocking`](Self::release_blocking)).
    pub(super) fn leave_blocking(&self, member: &str) {
        self.with_blocking(|con| self.leave_invocation(member).invoke::<u64>(con).map(drop));
    }

    fn leave_invocation(&self, member: &str) -> ::redis::ScriptInvocation<'_> {
        let mut inv = self.scripts.share_leave.key(&self.keys.sharers);
        inv.key(&self.keys.shares)
            .key(&self.keys.demand)
            .arg(&self.keys.channel)
            .arg(member);
        inv
    }

    /// Whether `sub` is subscribed to the release channel (on its current
    /// connection, under Sentinel).
    pub(super) fn is_subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Acquire)
            && self.subscribed_on.load(Ordering::Acquire) == self.sub.generation()
    }

    /// Subscribes the connection to its channel: the release channel per
    /// call, the wanted channel in leased mode.
    pub(super) async fn subscribe(&self) {
        let channel = match self.config.mode {
            super::config::Mode::Leased { .. } => &self.keys.wanted,
            super::config::Mode::PerCall => &self.keys.channel,
        };
        let generation = self.sub.generation();
        if self.run(self.sub.subscribe(channel)).await.is_ok() {
            self.subscribed_on.store(generation, Ordering::Release);
            self.subscribed.store(true, Ordering::Release);
        }
    }

    /// Woken by a release anywhere (as many as it freed slots), and all at
    /// once by a lost connection; in leased mode, by a wanted notice.
    pub(super) fn listen(&self) -> EventListener {
        self.released.listen()
    }

    /// Records a grant this process holds, to be renewed, and counts its
    /// permit alive; false (nothing recorded) once `close` has begun.
    pub(super) fn hold(&self, seq: u64, lease: Arc<Lease>) -> bool {
        let Ok(mut leases) = self.leases.lock() else {
            return false;
        };
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        leases.insert(seq, lease);
        self.alive.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Refuses every later `hold`; true the first time.
    pub(super) fn close(&self) -> bool {
        let _leases = self.leases.lock();
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Whether `close` has begun.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A global permit is gone (its release already handed on).
    pub(super) fn permit_gone(&self) {
        if self.alive.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.drained.notify(usize::MAX);
        }
    }

    /// Global permits alive (per call).
    pub(super) fn alive(&self) -> usize {
        self.alive.load(Ordering::Acquire)
    }

    /// Resolves once `done` holds, checked at first and after each
    /// [`wake_drained`](Self::wake_drained) (and each per-call permit
    /// that was the last alive).
    pub(super) async fn drained_by(&self, done: impl Fn() -> bool) {
        loop {
            let listener = self.drained.listen();
            if done() {
                return;
            }
            listener.await;
        }
    }

    /// Wakes `drained_by`'s waiters to check again.
    pub(super) fn wake_drained(&self) {
        self.drained.notify(usize::MAX);
    }

    /// How many grants this process holds with a live lease. A lease found
    /// over by the clock here is marked lost (and counted) at once, so
    /// that `held`, the metrics and [`GlobalPermit::is_lost`] agree
    /// without waiting for the keeper's next renewal.
    ///
    /// [`GlobalPermit::is_lost`]: super::GlobalPermit::is_lost
    pub(super) fn held(&self) -> usize {
        let now = self.clock.now();
        let Ok(mut leases) = self.leases.lock() else {
            return 0;
        };
        leases.retain(|_, l| {
            if l.is_lost(self.config.lease, now) {
                if l.mark_lost() {
                    self.stats.lost(self.name, l.member());
                }
                false
            } else {
                true
            }
        });
        leases.len()
    }

    /// Whether `lease` is lost at `now`; the first time that is seen, it
    /// is marked and counted and no longer renewed (as the keeper would).
    pub(super) fn check_lost(&self, seq: u64, lease: &Lease) -> bool {
        if !lease.is_lost(self.config.lease, self.clock.now()) {
            return false;
        }
        if lease.mark_lost() {
            self.stats.lost(self.name, lease.member());
        }
        self.forget_lease(seq);
        true
    }

    /// Whether the keeper is gone with its runtime.
    pub(super) fn keeper_gone(&self) -> bool {
        self.keeper_gone.load(Ordering::Acquire)
    }

    /// The keeper's future was dropped without `close`.
    pub(super) fn set_keeper_gone(&self) {
        self.keeper_gone.store(true, Ordering::Release);
    }

    /// Removes `members` on a blocking connection, bounded by the store
    /// timeout: the last resort once the keeper's runtime has shut down.
    /// After one failure it tries nothing more (the leases end by
    /// themselves within one lease).
    pub(super) fn release_blocking(&self, members: &[String]) {
        if members.is_empty() {
            return;
        }
        self.with_blocking(|con| {
            for chunk in members.chunks(1024) {
                let mut inv = self.scripts.release.key(&self.keys.holders);
                inv.arg(&self.keys.channel);
                for m in chunk {
                    inv.arg(m);
                }
                inv.invoke::<u64>(con)?;
                self.stats.released(chunk.len());
            }
            Ok(())
        });
    }

    /// Runs `f` on the blocking connection (made on first need, each
    /// read and write bounded by the store timeout). After one failure
    /// nothing more is tried: a shutdown must not wait a store timeout
    /// per permit.
    fn with_blocking(
        &self,
        f: impl FnOnce(&mut dyn ::redis::ConnectionLike) -> Result<(), ::redis::RedisError>,
    ) {
        if self.blocking_failed.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut slot) = self.blocking.lock() else {
            return;
        };
        if slot.is_none() {
            *slot = self.client.connect(self.config.store_timeout).ok();
        }
        let Some(con) = slot.as_mut() else {
            self.blocking_failed.store(true, Ordering::Release);
            return;
        };
        if f(&mut **con).is_err() {
            self.blocking_failed.store(true, Ordering::Release);
            *slot = None;
        }
    }

    /// The grants this process holds now (`None` if the lock is poisoned).
    pub(super) fn leases(&self) -> Option<Vec<(u64, Arc<Lease>)>> {
        match self.leases.lock() {
            Ok(leases) => Some(leases.iter().map(|(s, l)| (*s, Arc::clone(l))).collect()),
            Err(_) => None,
        }
    }

    /// Stops renewing grant `seq`.
    pub(super) fn forget_lease(&self, seq: u64) {
        if let Ok(mut leases) = self.leases.lock() {
            leases.remove(&seq);
        }
    }
}

/// `EVALSHA` of `script` on `keys`; its arguments follow.
fn evalsha(script: &Script, keys: &[&str]) -> Cmd {
    let mut cmd = ::redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

fn parse_acquire(v: &Value) -> Result<Acquired, StoreFailure> {
    let int = |v: &Value| match v {
        Value::Int(i) => Some(*i),
        _ => None,
    };
    let Value::Array(items) = v else {
        return Err(StoreFailure::BadReply);
    };
    let nums: Option<Vec<i64>> = items.iter().map(int).collect();
    match nums.as_deref() {
        Some([1, token, held]) => Ok(Acquired::Granted {
            token: u64::try_from(*token).unwrap_or(0),
            held: u64::try_from(*held).unwrap_or(0),
        }),
        Some([0, held, ms]) => Ok(Acquired::Full {
            held: u64::try_from(*held).unwrap_or(0),
            next_free: Duration::from_millis(u64::try_from(*ms).unwrap_or(0)),
        }),
        _ => Err(StoreFailure::BadReply),
    }
}

fn parse_refresh(v: &Value) -> Result<Refreshed, StoreFailure> {
    let Value::Array(items) = v else {
        return Err(StoreFailure::BadReply);
    };
    let nums: Option<Vec<u64>> = items
        .iter()
        .map(|v| match v {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        })
        .collect();
    match nums.as_deref() {
        Some(&[grant, recorded, token, lost, fleet_held, target]) if lost <= 1 => Ok(Refreshed {
            grant,
            recorded,
            token: (token != 0).then_some(token),
            lost: lost == 1,
            fleet_held,
            target,
        }),
        _ => Err(StoreFailure::BadReply),
    }
}

/// RESP3 pushes on the connection: release notifications wake waiters, and
/// a lost connection wakes them all (they retry, and meet the fallback).
/// In a cluster the messages are sharded (`SMESSAGE`), and a node that
/// gives the system's slot away unsubscribes us (`SUNSUBSCRIBE`): the
/// waiters are woken as for a lost connection, and the keeper subscribes
/// again, on the node that serves the slot now.
fn on_push(push: &PushInfo, channel: &str, released: &Event, subscribed: &AtomicBool) {
    match push.kind {
        PushKind::Message | PushKind::SMessage => {
            let [Value::BulkString(ch), payload, ..] = push.data.as_slice() else {
                return;
            };
            if ch.as_slice() != channel.as_bytes() {
                return;
            }
            let freed = match payload {
                Value::BulkString(b) => core::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .unwrap_or(1),
                _ => 1,
            };
            released.notify(event_listener::IntoNotification::additional(freed));
        }
        PushKind::Subscribe | PushKind::SSubscribe => subscribed.store(true, Ordering::Release),
        PushKind::Unsubscribe | PushKind::SUnsubscribe => {
            let ours = matches!(push.data.first(), Some(Value::BulkString(ch)) if ch.as_slice() == channel.as_bytes());
            if ours {
                subscribed.store(false, Ordering::Release);
                released.notify(usize::MAX);
            }
        }
        PushKind::Disconnection => {
            subscribed.store(false, Ordering::Release);
            released.notify(usize::MAX);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::script_text;

    const SCRIPTS: [&str; 5] = [
        include_str!("scripts/acquire.lua"),
        include_str!("scripts/release.lua"),
        include_str!("scripts/renew.lua"),
        include_str!("scripts/share_refresh.lua"),
        include_str!("scripts/share_leave.lua"),
    ];

    #[test]
    fn sharded_scripts_publish_only_with_spublish() {
        for text in SCRIPTS {
            let publishes = text.matches("'PUBLISH'").count();
            let sharded = script_text(text, true);
            // Every publication is sharded (none left in another spelling).
            assert_eq!(sharded.matches("'PUBLISH'").count(), 0, "{text}");
            assert_eq!(sharded.matches("\"PUBLISH\"").count(), 0, "{text}");
            assert_eq!(sharded.matches("redis.call('SPUBLISH',").count(), publishes);
            assert_eq!(script_text(text, false), text);
        }
    }
}
