//! [`RateLimiter`]: how often calls to one system may start.
//!
//! A [`Bulkhead`](crate::Bulkhead) bounds how many calls are in flight and a
//! [deadline](crate::deadline) how long each may take; a rate limiter bounds
//! how often they start: a server sheds a client sending 500 requests a
//! second, a gateway keeps its uplink under the 10 messages a second its
//! modem contract allows, a client stays under a provider's "100 requests
//! per minute".
//!
//! The algorithm is GCRA, the generic cell rate algorithm (as governor and
//! redis-cell use it): a [`Quota`] of `n` cells per period spaces cells one
//! emission interval `T = period / n` apart and lets a caller run up to
//! `burst × T` ahead of that schedule. The limiter's whole state is one
//! 64-bit word, the *theoretical arrival time* (TAT): the instant at which
//! the cells taken so far would have been spent at the steady rate. A
//! request for `k` cells at time `t` conforms iff
//!
//! ```text
//! max(tat, t) + k·T − t ≤ burst·T
//! ```
//!
//! and, if it does, moves the TAT to `max(tat, t) + k·T` with one
//! compare-and-swap. A refusal only reads the word. Over any window of
//! length `w` the cells admitted are then at most `burst + ⌊w / T⌋`
//! (checked by `tests/rate_model.rs` over every window of random runs).
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::rate::{Quota, RateError, RateLimiter};
//!
//! let clock = ManualClock::new();
//! let client = RateLimiter::new("provider", Quota::per_second(50).burst(10), &clock);
//! for _ in 0..10 {
//!     client.check().unwrap(); // the burst
//! }
//! assert!(matches!(
//!     client.check(),
//!     Err(RateError::Limited(n)) if n.retry_after() == Duration::from_millis(20)
//! ));
//! clock.advance(Duration::from_millis(20)); // one emission interval
//! client.check().unwrap();
//! ```

use core::fmt;
use core::time::Duration;

use crate::clock::{Clock, Instant, Timer};
use crate::sync::{
    const_fn, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

mod error;
mod gcra;
mod keyed;
mod quota;
mod wait;

pub use error::{NotYet, QuotaError, RateError};
pub use keyed::{
    DefaultState, FnvHasher, FnvState, KeyedError, KeyedRateLimiter, KeyedRateMetrics, WAYS,
};
pub use quota::Quota;
pub use wait::{AcquireTimeout, AcquireUntil, UntilReady};

use gcra::{Slot, Step};

/// The last instant a limiter's schedule reaches: `2^60 − 1` nanoseconds,
/// about 36 years after its clock's origin (the first read in the process
/// for the std clocks, boot for embassy, zero for a new `ManualClock`).
/// A request whose cells would end past it never conforms (it is refused
/// with `ready_at` at [`Instant::MAX`]), and a [`Quota`] whose period or
/// `burst × T` is longer is refused when it is made.
///
/// The word that holds the schedule keeps the low bits of the admission
/// counter above it (see [`RateLimiter`]'s Counters); that is what the four
/// bits above the horizon buy: an admission adds to a second counter only
/// once in sixteen.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateLimiter, HORIZON};
///
/// assert_eq!(HORIZON.since_origin(), Duration::from_nanos((1 << 60) - 1));
/// let clock = ManualClock::new();
/// let r = RateLimiter::new("api", Quota::per_second(1), &clock);
/// clock.set(HORIZON);
/// assert!(r.check().is_err()); // its cell would end after the horizon
/// ```
pub const HORIZON: Instant = Instant::from_nanos(gcra::HORIZON_NANOS);

/// Bits of the admission counter kept in the word, above the TAT. Four on
/// every target (the TAT keeps the low 60, up to [`HORIZON`]): the carry
/// costs one admission in sixteen an atomic add. One under loom, so that its
/// models reach a wrap in a few admissions.
#[cfg(not(loom))]
const COUNT_BITS: u32 = 4;
#[cfg(loom)]
const COUNT_BITS: u32 = 1;
/// Where the count starts: the TAT is the word's bits below it.
const TAT_BITS: u32 = 64 - COUNT_BITS;
const TAT_MASK: u64 = (1 << TAT_BITS) - 1;
/// What one wrap of the word's count carries.
const COUNT_PERIOD: usize = 1 << COUNT_BITS;
const _: () = assert!(gcra::HORIZON_NANOS <= TAT_MASK);

/// The TAT a word holds.
#[inline(always)]
const fn tat_of(w: u64) -> u64 {
    w & TAT_MASK
}

/// The admission count a word holds (modulo [`COUNT_PERIOD`]).
#[inline(always)]
const fn count_of(w: u64) -> usize {
    (w >> TAT_BITS) as usize
}

/// Whether an admission from `w` wraps the word's count.
#[inline(always)]
const fn wraps(w: u64) -> bool {
    w | TAT_MASK == u64::MAX
}

/// `w` with its TAT set to `tat` (at most the horizon), its count kept.
#[inline(always)]
const fn with_tat(w: u64, tat: u64) -> u64 {
    (w & !TAT_MASK) | tat
}

/// `w` after an admission that moved the TAT to `tat`: one more in the
/// count. Setting every TAT bit and adding one carries into the count, which
/// wraps off the word's top at its period.
#[inline(always)]
const fn admitted_word(w: u64, tat: u64) -> u64 {
    (w | TAT_MASK).wrapping_add(1) | tat
}

/// A GCRA rate limit for one external system: `cells` per period, with a
/// burst, on any [`Clock`]; lock-free, `no_std`, no allocation.
///
/// | method | when the cells do not conform yet |
/// |---|---|
/// | [`check`](Self::check), [`check_n`](Self::check_n) | `Err(Limited(not_yet))` at once, `not_yet.retry_after()` the hint |
/// | [`acquire_until`](Self::acquire_until), [`acquire_timeout`](Self::acquire_timeout), [`acquire_n_until`](Self::acquire_n_until) | reserves the cells and sleeps until they conform, if that is by the deadline; refused at once otherwise |
/// | [`until_ready`](Self::until_ready) | reserves the cells and sleeps until they conform |
///
/// Asking for more cells than the burst is
/// [`ExceedsBurst`](RateError::ExceedsBurst) at once, from every method:
/// such a request can never conform, so it is never a wait that cannot end.
/// A request for zero cells always conforms and changes and counts nothing.
///
/// # Examples
///
/// A `static`, as on a gateway whose modem allows 10 messages a second:
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateLimiter};
///
/// static CLOCK: ManualClock = ManualClock::new();
/// static UPLINK: RateLimiter<&ManualClock> =
///     RateLimiter::new("uplink", Quota::per_second(10).burst(2), &CLOCK);
///
/// assert!(UPLINK.check().is_ok());
/// assert!(UPLINK.check().is_ok());
/// assert!(UPLINK.check().is_err());
/// assert_eq!(UPLINK.metrics().refused, 1);
/// ```
///
/// # The state: one word, one compare-and-swap
///
/// The TAT is kept in an [`AtomicU64`](core::sync::atomic::AtomicU64) of the
/// clock's nanoseconds, taken from the crate's `sync` module
/// (portable-atomic): its low 60 bits, with the low 4 bits of the
/// admission counter above them (see [Counters](Self#counters)). An
/// admission is one compare-and-swap (retried only if another caller
/// changed the word in between); a refusal loads the word and writes
/// nothing to it (it counts itself in a counter on another cache line). On
/// targets with 64-bit atomics that is lock-free; on `thumbv6m` and
/// `thumbv7em`, which have none, the word goes through portable-atomic's
/// fallback: a critical section with `critical-section` (thumbv6m), a spin
/// lock shared by the fallback's words otherwise. A 32-bit tick form for
/// those targets is future work.
///
/// All arithmetic saturates, is checked or is bounded by the horizon (a
/// quota's `burst × T` is at most the horizon, so is every TAT, and an
/// admission's new TAT is compared with the horizon before it is formed):
/// nothing panics or overflows for a clock at [`Instant::MAX`] or one that
/// goes backwards (a backwards clock only finds the schedule further ahead
/// of it, so it is refused more, never admitted more). A request whose new
/// TAT would be past the schedule's [`HORIZON`] (`2^60 − 1` ns, about 36
/// years after the clock's origin) never conforms: it is refused with
/// `ready_at == Instant::MAX`, so the quota holds to the end of time rather
/// than overflowing.
///
/// # Waiting without a queue
///
/// A wait for `k` cells at time `t` (GCRA's virtual-scheduling form)
/// computes the instant its cells conform, `t* = max(tat, t) + k·T −
/// burst·T`:
///
/// - `t* ≤ t`: admitted at once, as [`check_n`](Self::check_n);
/// - `t* > deadline`: refused at once with the exact `retry_after`, nothing
///   written — no sleep only to fail;
/// - otherwise it moves the TAT forward by `k·T` with the same
///   compare-and-swap (its cells are now *reserved*) and sleeps on the
///   clock's [`Timer`] until `t*`.
///
/// Reservations are granted in compare-and-swap order and their instants
/// increase in that order, so waiters are served first come, first served;
/// a later `check` sees the reserved cells in the TAT, so a waiter and a
/// check never take the same cells. The future holds its reservation (two
/// words); there is no wait queue, no node, no lock and no allocation, and
/// the work is done on the first poll.
///
/// # Cancel safety
///
/// A wait dropped at or after its `t*` has spent its cells, as a permit
/// taken and dropped (it counts as admitted and waited). A wait dropped
/// before its `t*` gives its `k·T` back **if its reservation is still the
/// newest**: one compare-and-swap of the TAT from the value its reservation
/// wrote (`end`) back to `end − k·T`. That is exactly the state as if the
/// wait had never been made (the TAT before it, or the time it read if
/// that was later, which `max(tat, t)` makes the same for any later
/// request), so the freed cells go to the next caller and the schedule is
/// one that GCRA could have produced without it.
///
/// If another wait has reserved after it, the cancelled wait's cells stay
/// spent (it still counts as cancelled). Giving them back from the middle
/// of the chain would move the TAT below the later waiter's own `end`,
/// while that waiter keeps the instant it computed and will be admitted
/// then: with a burst of 1, `T` = 10, a check at 0 (TAT 10), waits W₀
/// (`t*` = 10, TAT 20) and W₁ (`t*` = 20, TAT 30), W₀ dropped at 0 (TAT
/// 20): at 20 a `check` conforms (20 + 10 − 20 ≤ 10) *and* W₁ is served, two
/// cells at one instant where the quota allows one. The value test is
/// exact: while a reservation is pending no check can be admitted after it
/// (that would need `t ≥ t* + k·T`), a later wait moves the TAT past `end`
/// and only its own cancellation brings it back, and a jump of the TAT to a
/// later clock (`max(tat, t) = t`) would need `t > end`, after which the
/// TAT never equals `end` again; so the TAT equals `end` exactly when
/// nothing was scheduled after the wait. `tests/rate_model.rs` checks the
/// window bound with cancellations in every position, and shows that the
/// give-back from the middle of the chain breaks it.
///
/// # Counters
///
/// [`metrics`](Self::metrics) returns admitted calls and cells, refused,
/// waited (admissions that had to wait), cancelled waits and waiting now.
/// What the hot path pays: an admission counts itself in the same
/// compare-and-swap that moves the TAT, in the word's four top bits (as the
/// bulkhead counts its acquisitions in its state word); once in sixteen
/// admissions those bits wrap and the admitter adds 16 to a carry on the
/// cold cache line (on the word's line, that locked add could take the
/// line from another thread between its load and its compare-and-swap;
/// the bench's two-thread runs are too noisy to show the difference
/// either way). Its cells
/// beyond the first go to a cold counter only when a request takes
/// several. A refusal adds one to a counter on a
/// cold line: the one read-modify-write a refusal makes, which governor's
/// (which counts nothing) does not, and most of a refusal's cost (about 10
/// of 23 ns in `benches/rate.rs`); a limiter made
/// [`without_refusal_count`](Self::without_refusal_count) leaves it out. All counters are relaxed and wrap at
/// `usize::MAX`; `ExceedsBurst` and zero-cell requests are not counted.
/// `admitted` is the carry plus the word's bits, read in that order, so a
/// snapshot taken while a wrap's carry is on its way can be up to a few
/// admissions short; it never reports less than an earlier snapshot did.
///
/// # Memory ordering
///
/// Every access to the TAT is `Relaxed`. The word guards no other memory:
/// an admission hands no data from one caller to the next (unlike a
/// bulkhead's permit), so there is nothing to publish. What the algorithm
/// needs is that all changes of the word are read-modify-writes of one
/// location, which have a single total order in which each reads the value
/// the previous one wrote; the window bound is proved over that order
/// alone (each admission moves the TAT by at least its `k·T` past where the
/// previous one left it, and ends at most `burst·T` after its own time,
/// whatever the clock reads of different threads), and the give-back's
/// value test above needs nothing more. A refusal's plain load may read a
/// value an instant old; it is then a refusal of the state at that
/// instant (the TAT only moves forward, except for a give-back, after which
/// refusing is only more careful). The counters are `Relaxed` statistics
/// but for the admission carry, added `Release` after a wrapping
/// compare-and-swap and read `Acquire` before the word, so that a snapshot
/// never counts a wrap twice;
/// a [`metrics`](Self::metrics) snapshot is a set of separate reads.
///
/// The loom models in `tests/loom/rate.rs` check racing checks never
/// admit past the burst, a reservation and a check never take the same
/// cells, and a cancellation racing a check never invents cells.
#[repr(C)]
pub struct RateLimiter<C> {
    hot: Hot,
    cold: Cold,
    clock: C,
}

/// What every admission touches, on a cache line of its own (left unpadded
/// on microcontrollers, `target_os = "none"`, which have no shared caches to
/// protect): the word (the TAT and the admission counter's low bits above
/// it) and the quota it is read with.
#[cfg_attr(not(target_os = "none"), repr(C, align(64)))]
#[cfg_attr(target_os = "none", repr(C))]
struct Hot {
    word: AtomicU64,
    quota: Quota,
    /// Read only (by a refusal's tracing event): here, in what would be
    /// padding.
    name: &'static str,
}

/// What refusals, multi-cell admissions, waits, readers and one admission
/// in sixteen touch.
#[repr(C)]
struct Cold {
    /// Admissions not in the word's count bits: a period for every wrap of
    /// them (one admission in sixteen), and one for every wait served. Off
    /// the word's line: with two threads admitting on one limiter, a locked
    /// add there right after a compare-and-swap could take the line from
    /// the other thread between its load and its compare-and-swap.
    admitted_carry: AtomicUsize,
    /// The most `metrics` has reported, so that it never goes back (see
    /// `admitted`); written only by readers.
    admitted_seen: AtomicUsize,
    extra_cells: AtomicUsize,
    refused: AtomicUsize,
    waited: AtomicUsize,
    cancelled: AtomicUsize,
    waiting: AtomicUsize,
    /// Whether a refusal adds to `refused` (see
    /// [`without_refusal_count`](RateLimiter::without_refusal_count)):
    /// beside the counter it guards, in what was padding.
    count_refusals: bool,
}

// The sizes the docs and README report, checked at compile time: one
// 64-byte line for the TAT, the quota and the name, one for the counters
// (the admission carry among them), and a zero-sized clock, on x86_64.
#[cfg(all(target_arch = "x86_64", not(loom)))]
const _: () = assert!(core::mem::size_of::<RateLimiter<()>>() == 128);
#[cfg(all(target_os = "none", target_pointer_width = "32"))]
const _: () = assert!(core::mem::size_of::<RateLimiter<()>>() <= 80);

/// A snapshot of a rate limiter's counters, from [`RateLimiter::metrics`].
///
/// Each field is read separately, so a snapshot taken under load is not an
/// atomic picture of all of them at one instant.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let r = RateLimiter::new("api", Quota::per_second(3), &clock);
/// r.check_n(2).unwrap();
/// r.check().unwrap();
/// let _ = r.check();
/// let m = r.metrics();
/// assert_eq!((m.name, m.admitted, m.admitted_cells, m.refused), ("api", 2, 3, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateMetrics {
    /// The limiter's name.
    pub name: &'static str,
    /// Its quota.
    pub quota: Quota,
    /// Requests admitted (a `check_n(3)` counts once), waits served and
    /// waits dropped after their cells conformed included.
    pub admitted: usize,
    /// Cells those requests took.
    pub admitted_cells: usize,
    /// Requests refused because their cells did not conform (by their
    /// deadline, for a wait).
    pub refused: usize,
    /// Admissions that had to wait for their cells.
    pub waited: usize,
    /// Waits dropped before their cells conformed (not refusals).
    pub cancelled: usize,
    /// Waits holding a reservation right now.
    pub waiting: usize,
}

impl<C> RateLimiter<C> {
    const_fn! {
        /// A limiter named `name` admitting `quota`, reading time from
        /// `clock`. `const`, so it can live in a `static`; a [`Quota`] is
        /// validated when it is made, so this never fails.
        ///
        /// The first request finds the full burst available.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::StdClock;
        /// use watertight::rate::{Quota, RateLimiter};
        ///
        /// static PROVIDER: RateLimiter<StdClock> =
        ///     RateLimiter::new("provider", Quota::per_minute(100), StdClock);
        /// assert_eq!(PROVIDER.name(), "provider");
        /// assert!(PROVIDER.check().is_ok());
        /// ```
        pub const fn new(name: &'static str, quota: Quota, clock: C) -> Self {
            RateLimiter {
                hot: Hot {
                    word: AtomicU64::new(0),
                    quota,
                    name,
                },
                cold: Cold {
                    admitted_carry: AtomicUsize::new(0),
                    admitted_seen: AtomicUsize::new(0),
                    extra_cells: AtomicUsize::new(0),
                    refused: AtomicUsize::new(0),
                    waited: AtomicUsize::new(0),
                    cancelled: AtomicUsize::new(0),
                    waiting: AtomicUsize::new(0),
                    count_refusals: true,
                },
                clock,
            }
        }
    }

    const_fn! {
        /// The same limiter, but its refusals are not counted:
        /// [`metrics`](Self::metrics)`().refused` stays 0 (and so does
        /// `rate_limit_refused_total` when exported), and a refusal writes
        /// no memory at all. `const`, for a `static`.
        ///
        /// Counting a refusal is one atomic add on a line of its own, the
        /// one read-modify-write a refusal makes; on the machine of
        /// `benches/rate.rs` it is most of a refusal's cost (about 10 of
        /// 23 ns). For a limiter that sheds a flood, where refusals come
        /// at the rate of the flood and are counted elsewhere (a tower
        /// layer's 429s, a load balancer's logs), this takes it out of the
        /// path. Admissions are counted either way (in the same
        /// compare-and-swap that admits them, at no extra cost), and the
        /// tracing event per refusal stays.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::StdClock;
        /// use watertight::rate::{Quota, RateLimiter};
        ///
        /// static EDGE: RateLimiter<StdClock> =
        ///     RateLimiter::new("edge", Quota::per_second(1), StdClock).without_refusal_count();
        /// assert!(EDGE.check().is_ok());
        /// assert!(EDGE.check().is_err());
        /// let m = EDGE.metrics();
        /// assert_eq!((m.admitted, m.refused), (1, 0));
        /// assert!(!EDGE.counts_refusals());
        /// ```
        pub const fn without_refusal_count(mut self) -> Self {
            self.cold.count_refusals = false;
            self
        }
    }

    /// Whether refusals are counted: `true` unless the limiter was made
    /// [`without_refusal_count`](Self::without_refusal_count).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let r = RateLimiter::new("api", Quota::per_second(5), StdClock);
    /// assert!(r.counts_refusals());
    /// assert!(!r.without_refusal_count().counts_refusals());
    /// ```
    pub fn counts_refusals(&self) -> bool {
        self.cold.count_refusals
    }

    /// The name given at construction, for metrics and logs.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let r = RateLimiter::new("payments", Quota::per_second(5), StdClock);
    /// assert_eq!(r.name(), "payments");
    /// ```
    pub fn name(&self) -> &'static str {
        self.hot.name
    }

    /// The quota given at construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let r = RateLimiter::new("payments", Quota::per_second(5).burst(2), StdClock);
    /// assert_eq!(r.quota().burst_size(), 2);
    /// ```
    pub fn quota(&self) -> Quota {
        self.hot.quota
    }

    /// The clock this limiter reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("db", Quota::per_second(1), &clock);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(r.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Waits holding a reservation right now.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use futures_lite::future::{block_on, poll_once};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("db", Quota::per_second(1), &clock);
    /// r.check().unwrap();
    /// let mut wait = Box::pin(r.until_ready());
    /// assert!(block_on(poll_once(&mut wait)).is_none());
    /// assert_eq!(r.waiting(), 1);
    /// clock.advance(Duration::from_secs(1));
    /// block_on(wait).unwrap();
    /// assert_eq!(r.waiting(), 0);
    /// ```
    pub fn waiting(&self) -> usize {
        self.cold.waiting.load(Relaxed)
    }

    /// A snapshot of the counters (see [Counters](Self#counters)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("api", Quota::per_second(1), &clock);
    /// r.check().unwrap();
    /// assert!(r.check().is_err());
    /// let m = r.metrics();
    /// assert_eq!((m.admitted, m.refused, m.waited, m.cancelled), (1, 1, 0, 0));
    /// ```
    pub fn metrics(&self) -> RateMetrics {
        let admitted = self.admitted();
        RateMetrics {
            name: self.hot.name,
            quota: self.hot.quota,
            admitted,
            admitted_cells: admitted.wrapping_add(self.cold.extra_cells.load(Relaxed)),
            refused: self.cold.refused.load(Relaxed),
            waited: self.cold.waited.load(Relaxed),
            cancelled: self.cold.cancelled.load(Relaxed),
            waiting: self.cold.waiting.load(Relaxed),
        }
    }

    /// Admissions so far: the carry plus the word's count bits, never less
    /// than a snapshot reported before.
    ///
    /// The carry is read first (`Acquire`, pairing with the `Release` add
    /// that follows a wrapping compare-and-swap), so the word read after it
    /// is at least as new as every wrap the carry already holds: the sum
    /// is never too large. It can be too small, by a period for each wrap
    /// whose carry is still on its way; `admitted_seen` keeps a later
    /// snapshot from reporting less than an earlier one (compared modulo
    /// the counter's wrap, so that it keeps counting after `usize::MAX`).
    fn admitted(&self) -> usize {
        let carry = self.cold.admitted_carry.load(Acquire);
        let low = count_of(self.hot.word.load(Relaxed));
        let total = carry.wrapping_add(low);
        let mut seen = self.cold.admitted_seen.load(Relaxed);
        loop {
            if (total.wrapping_sub(seen) as isize) <= 0 {
                return seen;
            }
            match self
                .cold
                .admitted_seen
                .compare_exchange_weak(seen, total, Relaxed, Relaxed)
            {
                Ok(_) => return total,
                Err(actual) => seen = actual,
            }
        }
    }

    /// After the compare-and-swap from `old` that admitted `n` cells: the
    /// carry if the word's count wrapped, the cells beyond the first.
    #[inline(always)]
    fn count_admitted(&self, old: u64, n: u32) {
        if wraps(old) {
            self.cold.admitted_carry.fetch_add(COUNT_PERIOD, Release);
        }
        if n > 1 {
            self.cold.extra_cells.fetch_add(n as usize - 1, Relaxed);
        }
    }

    /// Counts a refusal of cells that would conform at `at` (`u64::MAX`:
    /// never, past the horizon). Inlined: a refusal is as common as an
    /// admission when a client is shed, and a call out of line cost it
    /// ~2.5 ns (a quarter) in `benches/rate.rs`.
    #[inline(always)]
    fn refuse(&self, now: u64, at: u64) -> RateError {
        if self.cold.count_refusals {
            self.cold.refused.fetch_add(1, Relaxed);
        }
        #[cfg(feature = "tracing")]
        trace_refusal(self.hot.name, now, at);
        RateError::Limited(NotYet::new(
            Instant::from_nanos(now),
            Instant::from_nanos(at),
        ))
    }

    #[cold]
    #[inline(never)]
    fn exceeds_burst(&self, n: u32) -> RateError {
        RateError::ExceedsBurst {
            requested: n,
            burst: self.hot.quota.burst_size(),
        }
    }

    /// Takes `inc` nanoseconds of cells (`n` cells, `inc` at most the
    /// quota's `burst × T`) at `now` if they conform.
    #[inline(always)]
    fn take(&self, n: u32, inc: u64, now: u64) -> Result<(), RateError> {
        let tolerance = self.hot.quota.tolerance_nanos();
        let mut w = self.hot.word.load(Relaxed);
        loop {
            match gcra::step(tat_of(w), now, inc, tolerance) {
                Step::Admit(end) => {
                    match self.hot.word.compare_exchange_weak(
                        w,
                        admitted_word(w, end),
                        Relaxed,
                        Relaxed,
                    ) {
                        Ok(_) => {
                            self.count_admitted(w, n);
                            return Ok(());
                        }
                        Err(actual) => w = actual,
                    }
                }
                Step::Refuse(at) => return Err(self.refuse(now, at)),
            }
        }
    }
}

impl<C: Clock> RateLimiter<C> {
    /// Takes one cell if it conforms now; never waits.
    ///
    /// # Errors
    ///
    /// [`Limited`](RateError::Limited) with the exact `retry_after` if it
    /// does not; nothing is written then.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::rate::{NotYet, Quota, RateError, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("api", Quota::per_second(4).burst(1), &clock);
    /// r.check().unwrap();
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(
    ///     r.check(),
    ///     Err(RateError::Limited(NotYet::new(
    ///         clock.now(),
    ///         clock.now() + Duration::from_millis(150),
    ///     )))
    /// );
    /// ```
    #[inline]
    pub fn check(&self) -> Result<(), RateError> {
        let now = self.clock.now().as_nanos();
        self.take(1, self.hot.quota.interval_nanos(), now)
    }

    /// Takes `n` cells at once if they conform now; never waits.
    ///
    /// # Errors
    ///
    /// [`ExceedsBurst`](RateError::ExceedsBurst) if `n` is above the burst
    /// (it never could); otherwise as [`check`](Self::check).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("batch", Quota::per_second(10), &clock);
    /// r.check_n(8).unwrap();
    /// // 2 cells left; 3 come back 100 ms after the next one.
    /// assert_eq!(r.check_n(3).unwrap_err().retry_after(), Some(Duration::from_millis(100)));
    /// r.check_n(2).unwrap();
    /// ```
    #[inline]
    pub fn check_n(&self, n: u32) -> Result<(), RateError> {
        let q = &self.hot.quota;
        if n > q.burst_size() {
            return Err(self.exceeds_burst(n));
        }
        if n == 0 {
            return Ok(());
        }
        // Fits: n ≤ burst and burst × T fits (checked by the quota).
        let inc = n as u64 * q.interval_nanos();
        self.take(n, inc, self.clock.now().as_nanos())
    }

    /// The first poll of a wait: admitted at once, refused at once, or the
    /// cells reserved until their instant.
    pub(crate) fn begin_wait(&self, n: u32, deadline: Instant) -> Begin {
        let q = &self.hot.quota;
        if n > q.burst_size() {
            return Begin::Refused(self.exceeds_burst(n));
        }
        if n == 0 {
            return Begin::Admitted;
        }
        let inc = n as u64 * q.interval_nanos();
        let tolerance = q.tolerance_nanos();
        let now = self.clock.now().as_nanos();
        let mut w = self.hot.word.load(Relaxed);
        loop {
            let slot = match gcra::place(tat_of(w), now, inc, tolerance) {
                // Conforms now (even past the deadline), or by the deadline.
                Some(slot) if slot.at <= now || slot.at <= deadline.as_nanos() => slot,
                Some(slot) => return Begin::Refused(self.refuse(now, slot.at)),
                None => return Begin::Refused(self.refuse(now, u64::MAX)),
            };
            let now_ok = slot.at <= now;
            // A reservation is counted when it is served (in the carry).
            let next = if now_ok {
                admitted_word(w, slot.end)
            } else {
                with_tat(w, slot.end)
            };
            match self
                .hot
                .word
                .compare_exchange_weak(w, next, Relaxed, Relaxed)
            {
                Ok(_) if now_ok => {
                    self.count_admitted(w, n);
                    return Begin::Admitted;
                }
                Ok(_) => {
                    self.cold.waiting.fetch_add(1, Relaxed);
                    return Begin::Reserved(slot);
                }
                Err(actual) => w = actual,
            }
        }
    }

    /// A reserved wait whose instant came: its cells are spent.
    pub(crate) fn served(&self, n: u32) {
        self.cold.waiting.fetch_sub(1, Relaxed);
        self.cold.waited.fetch_add(1, Relaxed);
        self.cold.admitted_carry.fetch_add(1, Release);
        if n > 1 {
            self.cold.extra_cells.fetch_add(n as usize - 1, Relaxed);
        }
    }

    /// A reserved wait dropped: before its instant, its cells go back if its
    /// reservation is the newest (see [Cancel safety](Self#cancel-safety));
    /// at or after it, they are spent.
    pub(crate) fn abandon(&self, n: u32, slot: Slot) {
        let now = self.clock.now().as_nanos();
        if now < slot.at {
            let inc = n as u64 * self.hot.quota.interval_nanos();
            // The TAT equals `end` exactly when nothing was scheduled after
            // this reservation; otherwise the cells stay spent. Retried only
            // while the TAT still is `end` (a spurious failure; the count
            // bits below it are kept as they are).
            let mut w = self.hot.word.load(Relaxed);
            while tat_of(w) == slot.end {
                match self.hot.word.compare_exchange_weak(
                    w,
                    with_tat(w, slot.end - inc),
                    Relaxed,
                    Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => w = actual,
                }
            }
            self.cold.waiting.fetch_sub(1, Relaxed);
            self.cold.cancelled.fetch_add(1, Relaxed);
        } else {
            self.served(n);
        }
    }
}

impl<C: Timer> RateLimiter<C> {
    /// Waits for one cell until `deadline` at the latest.
    ///
    /// On its first poll the future takes the cell if it conforms, is
    /// refused at once if the cell would conform only after `deadline`, and
    /// otherwise reserves the cell and sleeps until it conforms (see
    /// [Waiting without a queue](Self#waiting-without-a-queue)). A cell that
    /// conforms now is taken even if `deadline` has passed.
    ///
    /// # Errors
    ///
    /// [`Limited`](RateError::Limited), at once, if the cell would not
    /// conform by `deadline`; `retry_after` says when it would.
    ///
    /// # Cancel safety
    ///
    /// Dropped before its cell conforms, the wait gives it back if nothing
    /// was scheduled after it, and otherwise leaves it spent; dropped after,
    /// the cell is spent (see [Cancel safety](Self#cancel-safety)).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use futures_lite::future::{block_on, poll_once};
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("uplink", Quota::per_second(10).burst(1), &clock);
    /// r.check().unwrap();
    ///
    /// // Too early a deadline: refused at once, with the hint.
    /// let early = block_on(r.acquire_until(clock.now() + Duration::from_millis(50)));
    /// assert_eq!(early.unwrap_err().retry_after(), Some(Duration::from_millis(100)));
    ///
    /// // Long enough: served when the cell conforms, 100 ms from now.
    /// let mut wait = Box::pin(r.acquire_until(clock.now() + Duration::from_millis(150)));
    /// assert!(block_on(poll_once(&mut wait)).is_none());
    /// clock.advance(Duration::from_millis(100));
    /// assert!(block_on(wait).is_ok());
    /// ```
    pub fn acquire_until(&self, deadline: Instant) -> AcquireUntil<'_, C> {
        self.acquire_n_until(1, deadline)
    }

    /// Waits for `n` cells until `deadline` at the latest.
    ///
    /// # Errors
    ///
    /// [`ExceedsBurst`](RateError::ExceedsBurst) if `n` is above the burst;
    /// otherwise as [`acquire_until`](Self::acquire_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock};
    /// use watertight::rate::{Quota, RateError, RateLimiter};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("batch", Quota::per_second(10), &clock);
    /// let soon = clock.now() + Duration::from_secs(1);
    /// r.acquire_n_until(10, soon).await.unwrap();
    /// let err = r.acquire_n_until(11, soon).await.unwrap_err();
    /// assert_eq!(err, RateError::ExceedsBurst { requested: 11, burst: 10 });
    /// # });
    /// ```
    pub fn acquire_n_until(&self, n: u32, deadline: Instant) -> AcquireUntil<'_, C> {
        AcquireUntil::new(self, n, deadline)
    }

    /// Waits for one cell for at most `max_wait` from now (the deadline is
    /// fixed when this is called).
    ///
    /// # Errors
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("api", Quota::per_second(1), &clock);
    /// r.acquire_timeout(Duration::ZERO).await.unwrap(); // conforms now
    /// assert!(r.acquire_timeout(Duration::from_millis(999)).await.is_err());
    /// # });
    /// ```
    pub fn acquire_timeout(&self, max_wait: Duration) -> AcquireTimeout<'_, C> {
        self.acquire_until(self.clock.now().saturating_add(max_wait))
    }

    /// Waits for one cell, however long it takes (no deadline).
    ///
    /// # Errors
    ///
    /// Only at the end of the clock's time: [`Limited`](RateError::Limited)
    /// with `ready_at == Instant::MAX` if the cell would conform after it.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_until`](Self::acquire_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use futures_lite::future::{block_on, poll_once};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let r = RateLimiter::new("report", Quota::per_hour(1), &clock);
    /// block_on(r.until_ready()).unwrap();
    /// let mut next = Box::pin(r.until_ready());
    /// assert!(block_on(poll_once(&mut next)).is_none());
    /// clock.advance(Duration::from_secs(3600));
    /// block_on(next).unwrap();
    /// ```
    pub fn until_ready(&self) -> UntilReady<'_, C> {
        self.acquire_until(Instant::MAX)
    }
}

/// What the first poll of a wait decided.
pub(crate) enum Begin {
    Admitted,
    Reserved(Slot),
    Refused(RateError),
}

impl<C> fmt::Debug for RateLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.hot.name)
            .field("quota", &self.hot.quota)
            .field(
                "tat",
                &Instant::from_nanos(tat_of(self.hot.word.load(Relaxed))),
            )
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

/// The one event per refusal (feature `tracing`), at DEBUG as the
/// bulkhead's: refusals come at the rate of traffic, and the `refused`
/// counter is what dashboards read. `retry_after_ms` is rounded up (a
/// `Retry-After` that never comes back early), as the breaker names it.
#[cfg(feature = "tracing")]
#[cold]
fn trace_refusal(system: &'static str, now: u64, at: u64) {
    let ns = at.saturating_sub(now);
    tracing::debug!(
        target: "watertight::rate",
        system,
        retry_after_ms = ns.div_ceil(1_000_000),
        "rate limiter refused a request"
    );
}
