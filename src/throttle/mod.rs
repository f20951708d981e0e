//! [`AdaptiveThrottle`]: client-side adaptive throttling, after Google's
//! SRE book ("Handling Overload", client-side throttling).
//!
//! A backend that is overloaded refuses most of what it gets, but every
//! refusal still costs it something. A client that keeps sending at full
//! rate keeps it overloaded. The throttle lets the client refuse requests
//! *locally*, before they reach the network, in proportion to how much
//! more it is asking than the backend accepts. Over a window (two minutes
//! by default) it counts
//!
//! - `requests`: every request the application asked to send, including
//!   the ones the throttle refused itself, and
//! - `accepts`: the requests the backend accepted,
//!
//! and refuses a new request with probability
//!
//! ```text
//! p = min(max_probability, max(0, (requests − K × accepts) / (requests + 1)))
//! ```
//!
//! While the backend accepts everything the two counts are equal and
//! nothing is refused (for `K ≥ 1`); as it refuses more, `p` rises until
//! the requests that reach it are about `K ×` what it accepts. Refusing at
//! most `max_probability` (90 %) keeps a trickle going, so the client sees
//! the backend recover.
//!
//! # Counted at admission
//!
//! Both counts are taken at the request's **admission**: a request counts
//! in the bucket of the instant the throttle decided on it, and its accept
//! is credited to that same bucket when it comes in, however late. Counting
//! at completion instead (go-zero#5011's first mistake) lets slow calls'
//! accepts land in a window that did not send them. The window must be at
//! least the calls' timeout (the second mistake): [`ThrottleConfigBuilder::timeout`]
//! checks it.
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
//!
//! let clock = ManualClock::new();
//! let config = ThrottleConfig::builder().timeout(Duration::from_secs(30)).build().unwrap();
//! let search = AdaptiveThrottle::with_seed("search", config, &clock, 7);
//!
//! // The backend refuses what reaches it, for overload: 10 requests (some
//! // refused locally as the probability rises), 0 accepts.
//! for _ in 0..10 {
//!     if let Ok(ticket) = search.check() {
//!         ticket.overloaded();
//!     }
//! }
//! // p = (10 − 2 × 0) / (10 + 1), capped at 0.9.
//! assert_eq!(search.probability(), 0.9);
//! ```
//!
//! # What counts as an accept
//!
//! The book's rule: a request is *accepted* when the backend answered it
//! other than with a refusal for overload. So an application error (a 404,
//! a validation failure, even a 500 from a bug) is an accept — the backend
//! had the capacity to answer — and a "reject due to overload" (503, 429,
//! gRPC `RESOURCE_EXHAUSTED`) or a timeout (no answer; 3GPP TS 29.500's
//! annex counts these as not accepted too) is not. The caller says which
//! with the [`Ticket`]: [`accepted`](Ticket::accepted),
//! [`overloaded`](Ticket::overloaded), or [`ignore`](Ticket::ignore) for a
//! request that never reached the backend (another layer refused it); a
//! ticket dropped without a word is ignored, as a cancelled call is, so a
//! caller who gives up does not read as an overloaded backend.
//!
//! # Randomness
//!
//! The draws come from the same SplitMix64 sequence the retries' jitter
//! uses ([`Jitter`], one atomic `fetch_add` a draw),
//! seeded per throttle: [`with_seed`](AdaptiveThrottle::with_seed) for a
//! reproducible run, [`new`](AdaptiveThrottle::new) from the name (and,
//! with `std`, a random key per process, so replicas do not refuse in
//! step). A draw is taken only when `p > 0`: a healthy backend costs none.

use core::fmt;

use crate::clock::{Clock, Instant};
use crate::retry::Jitter;
use crate::sync::{const_fn, AtomicUsize, Ordering::Relaxed};

mod config;
pub(crate) mod window;

pub use config::{ThrottleConfig, ThrottleConfigBuilder, ThrottleConfigError};
pub use window::BUCKETS;
use window::{Change, Ring};

/// Client-side adaptive throttling for one backend: refuses locally, with
/// the SRE book's probability, what the backend would refuse anyway.
///
/// [`check`](Self::check) either refuses ([`Throttled`]) or admits with a
/// [`Ticket`], on which the caller reports what the backend made of the
/// request. See [the module](self) for the formula, when counts are taken
/// and what counts as an accept.
///
/// Lock-free and allocation-free: the window is a ring of [`BUCKETS`]
/// buckets of two `usize` words each (requests, accepts), rolled over
/// lazily by whoever first touches a stale one; time comes from any
/// [`Clock`] ([`ManualClock`](crate::clock::ManualClock) in tests). An
/// admission reads the clock once, reads the ring, and counts its request
/// with one compare-and-swap; an accept is one more.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
///
/// let clock = ManualClock::new();
/// let t = AdaptiveThrottle::with_seed("search", ThrottleConfig::DEFAULT, &clock, 1);
/// match t.check() {
///     Ok(ticket) => ticket.accepted(), // the backend answered
///     Err(refused) => unreachable!("a fresh throttle refuses nothing: {refused}"),
/// }
/// let m = t.metrics();
/// assert_eq!((m.requests, m.accepts, m.refused), (1, 1, 0));
/// ```
///
/// # Memory ordering
///
/// Everything is `Relaxed`: the throttle's words are statistics, and a
/// decision read a moment stale is a decision of that moment. What the
/// protocol guarantees (checked by the loom models in `tests/loom/throttle.rs`,
/// `throttle`): a request or an accept racing a bucket's rollover lands in
/// its own epoch or, if that epoch has left the window, nowhere — never in
/// a newer epoch, never twice.
pub struct AdaptiveThrottle<C> {
    ring: Ring,
    config: ThrottleConfig,
    rng: Jitter,
    admitted: AtomicUsize,
    refused: AtomicUsize,
    accepted: AtomicUsize,
    overloaded: AtomicUsize,
    ignored: AtomicUsize,
    late: AtomicUsize,
    name: &'static str,
    clock: C,
}

/// A snapshot of a throttle's counters, from [`AdaptiveThrottle::metrics`].
///
/// `requests` and `accepts` are the window's (what the probability is
/// computed from); the rest run over the throttle's life. Each field is
/// read separately: under load, not one atomic picture.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
///
/// let clock = ManualClock::new();
/// let t = AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, &clock, 1);
/// t.check().unwrap().overloaded();
/// let m = t.metrics();
/// assert_eq!((m.name, m.requests, m.accepts, m.admitted, m.overloaded), ("api", 1, 0, 1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ThrottleMetrics {
    /// The throttle's name.
    pub name: &'static str,
    /// Requests counted in the window now (admitted or refused).
    pub requests: u64,
    /// Accepts credited in the window now.
    pub accepts: u64,
    /// The refusal probability a request would meet now.
    pub probability: f64,
    /// Requests admitted (a ticket given).
    pub admitted: usize,
    /// Requests refused locally.
    pub refused: usize,
    /// Tickets reported accepted.
    pub accepted: usize,
    /// Tickets reported overloaded (refused by the backend, or timed out).
    pub overloaded: usize,
    /// Tickets ignored or dropped without an outcome: their requests were
    /// taken back out of the window.
    pub ignored: usize,
    /// Accepts that came in after their admission bucket's slot had been
    /// reused (or cleared as stale), and were dropped (the call outlived
    /// the window). An accept whose bucket left the window before anything
    /// reused its slot is not counted in any window either, but not here.
    pub late: usize,
}

/// The throttle refused a request locally: it was not sent.
///
/// # Examples
///
/// ```
/// use watertight::throttle::Throttled;
/// let t = Throttled::with_probability(0.25);
/// assert_eq!(t.probability(), 0.25);
/// assert_eq!(t.to_string(), "throttled locally (refusing 25.0 % of requests)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Throttled {
    ppm: u32,
}

impl Throttled {
    /// A refusal at probability `p` (kept to the millionth).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::throttle::Throttled::with_probability(2.0).probability(), 1.0);
    /// ```
    pub fn with_probability(p: f64) -> Self {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        Throttled {
            ppm: (p * 1e6 + 0.5) as u32,
        }
    }

    /// The refusal probability the request met.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(watertight::throttle::Throttled::with_probability(0.5).probability(), 0.5);
    /// ```
    pub fn probability(&self) -> f64 {
        f64::from(self.ppm) / 1e6
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "throttled locally (refusing {:.1} % of requests)",
            self.probability() * 100.0
        )
    }
}

impl core::error::Error for Throttled {}

/// What the backend made of an admitted request, reported on its
/// [`Ticket`].
///
/// # Examples
///
/// ```
/// use watertight::throttle::Response;
/// let of = |status: u16| if status == 503 || status == 429 { Response::Overloaded } else { Response::Accepted };
/// assert_eq!(of(404), Response::Accepted); // an answer, if not the one hoped for
/// assert_eq!(of(503), Response::Overloaded);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Response {
    /// The backend answered (success, or an application error).
    Accepted,
    /// The backend refused it for overload (503, 429,
    /// `RESOURCE_EXHAUSTED`), or it timed out without an answer.
    Overloaded,
    /// It never reached the backend (another layer refused it, or the
    /// caller gave up): its request is taken back out of the window.
    Ignored,
}

/// An admitted request's ticket: report what the backend made of it.
///
/// The ticket remembers the bucket its request was counted in, and an
/// accept is credited there. Dropped without a report, it is
/// [`ignore`](Self::ignore)d.
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::throttle::{AdaptiveThrottle, Response, ThrottleConfig};
///
/// let clock = ManualClock::new();
/// let t = AdaptiveThrottle::with_seed("db", ThrottleConfig::DEFAULT, &clock, 3);
/// let ticket = t.check().unwrap();
/// ticket.record(Response::Accepted);
/// drop(t.check().unwrap()); // cancelled: not counted
/// assert_eq!((t.metrics().requests, t.metrics().accepts), (1, 1));
/// ```
#[must_use = "report the outcome with `accepted`, `overloaded` or `ignore`; dropping ignores it"]
#[clippy::has_significant_drop]
pub struct Ticket<'a, C> {
    throttle: &'a AdaptiveThrottle<C>,
    epoch: u64,
    done: bool,
}

impl<C> AdaptiveThrottle<C> {
    const_fn! {
        /// A throttle named `name`, deciding by `config`, on `clock`, with
        /// its draws seeded by `seed` (the same seed, the same refusals in
        /// the same sequence of calls). `const`, for a `static`.
        ///
        /// # Examples
        ///
        /// ```
        /// use watertight::clock::StdClock;
        /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
        ///
        /// static SEARCH: AdaptiveThrottle<StdClock> =
        ///     AdaptiveThrottle::with_seed("search", ThrottleConfig::DEFAULT, StdClock, 42);
        /// assert!(SEARCH.check().is_ok());
        /// ```
        pub const fn with_seed(name: &'static str, config: ThrottleConfig, clock: C, seed: u64) -> Self {
            AdaptiveThrottle {
                ring: Ring::new(),
                config,
                rng: Jitter::new(seed),
                admitted: AtomicUsize::new(0),
                refused: AtomicUsize::new(0),
                accepted: AtomicUsize::new(0),
                overloaded: AtomicUsize::new(0),
                ignored: AtomicUsize::new(0),
                late: AtomicUsize::new(0),
                name,
                clock,
            }
        }
    }

    /// A throttle seeded from its name (with `std`, mixed with a random
    /// key per process, as a policy's retry jitter is).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    ///
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::new("search", ThrottleConfig::DEFAULT, &clock);
    /// assert_eq!(t.name(), "search");
    /// ```
    pub fn new(name: &'static str, config: ThrottleConfig, clock: C) -> Self {
        AdaptiveThrottle::with_seed(name, config, clock, crate::policy::default_seed(name))
    }

    /// The name given at construction, for metrics and logs.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// assert_eq!(AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0).name(), "x");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The config it decides by.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// assert_eq!(t.config().k(), 2.0);
    /// ```
    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    /// The clock it reads.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::{Clock, ManualClock};
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// assert_eq!(t.clock().now(), clock.now());
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The bucket `now` falls in.
    #[inline(always)]
    fn epoch(&self, now: Instant) -> u64 {
        now.as_nanos() / self.config.bucket_nanos
    }

    /// The window's counts at epoch `e`.
    #[inline]
    fn counts(&self, e: u64) -> (u64, u64) {
        self.ring.sums(e)
    }

    /// Counts an outcome other than an accept (which needs the clock:
    /// [`accept`](Self::accept)).
    fn report_unaccepted(&self, epoch: u64, response: Response) {
        if response == Response::Ignored {
            self.ignored.fetch_add(1, Relaxed);
            let _ = self.ring.requests.sub(epoch);
        } else {
            self.overloaded.fetch_add(1, Relaxed);
        }
    }
}

/// The SRE book's refusal probability for `requests` and `accepts` in the
/// window, capped at `max`: `min(max, max(0, (requests − k × accepts) /
/// (requests + 1)))`.
///
/// # Examples
///
/// ```
/// use watertight::throttle::probability;
/// assert_eq!(probability(100, 50, 2.0, 0.9), 0.0);
/// assert_eq!(probability(100, 25, 2.0, 0.9), 50.0 / 101.0);
/// assert_eq!(probability(100, 0, 2.0, 0.9), 0.9);
/// ```
#[inline]
pub fn probability(requests: u64, accepts: u64, k: f64, max: f64) -> f64 {
    let excess = requests as f64 - k * accepts as f64;
    if excess <= 0.0 {
        return 0.0;
    }
    let p = excess / (requests as f64 + 1.0);
    if p > max {
        max
    } else {
        p
    }
}

impl<C: Clock> AdaptiveThrottle<C> {
    /// Decides on one request: admitted with a [`Ticket`] (report the
    /// backend's answer on it), or refused locally. Either way the request
    /// counts in the window, in the bucket of now.
    ///
    /// # Errors
    ///
    /// [`Throttled`], with the probability the request met, when the draw
    /// falls under it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    ///
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 5);
    /// for _ in 0..50 {
    ///     if let Ok(ticket) = t.check() {
    ///         ticket.overloaded();
    ///     }
    /// }
    /// let m = t.metrics();
    /// assert_eq!(m.requests, 50);
    /// assert!(m.refused > 30); // about 90 % once a few refusals are in
    /// ```
    #[inline]
    pub fn check(&self) -> Result<Ticket<'_, C>, Throttled> {
        let epoch = self.admit()?;
        Ok(Ticket {
            throttle: self,
            epoch,
            done: false,
        })
    }

    /// [`check`](Self::check) without the ticket: `Ok(epoch)`, the bucket
    /// the request counted in, for [`finish`](Self::finish) — what a
    /// future that owns its handle to the throttle (a policy's call) keeps
    /// instead of a borrowing [`Ticket`].
    #[inline]
    pub(crate) fn admit(&self) -> Result<u64, Throttled> {
        let e = self.epoch(self.clock.now());
        let (requests, accepts) = self.counts(e);
        let p = probability(
            requests,
            accepts,
            self.config.k,
            self.config.max_probability,
        );
        let _ = self.ring.requests.add(e);
        if p > 0.0 && self.draw() < p {
            return Err(self.refuse(p));
        }
        self.admitted.fetch_add(1, Relaxed);
        Ok(e)
    }

    /// Reports on a request [`admit`](Self::admit) let through in `epoch`.
    #[inline]
    pub(crate) fn finish(&self, epoch: u64, response: Response) {
        match response {
            Response::Accepted => self.accept(epoch),
            other => self.report_unaccepted(epoch, other),
        }
    }

    /// The probability a request would be refused with now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    ///
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 5);
    /// assert_eq!(t.probability(), 0.0);
    /// t.check().unwrap().overloaded();
    /// assert_eq!(t.probability(), 0.5); // (1 − 0) / (1 + 1)
    /// ```
    pub fn probability(&self) -> f64 {
        let (requests, accepts) = self.counts(self.epoch(self.clock.now()));
        probability(
            requests,
            accepts,
            self.config.k,
            self.config.max_probability,
        )
    }

    /// A snapshot of the counters, with the window's counts and the
    /// probability now.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    ///
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 5);
    /// t.check().unwrap().accepted();
    /// clock.advance(ThrottleConfig::DEFAULT.window()); // the window moves past it
    /// let m = t.metrics();
    /// assert_eq!((m.requests, m.accepts, m.admitted, m.accepted), (0, 0, 1, 1));
    /// ```
    pub fn metrics(&self) -> ThrottleMetrics {
        let (requests, accepts) = self.counts(self.epoch(self.clock.now()));
        ThrottleMetrics {
            name: self.name,
            requests,
            accepts,
            probability: probability(
                requests,
                accepts,
                self.config.k,
                self.config.max_probability,
            ),
            admitted: self.admitted.load(Relaxed),
            refused: self.refused.load(Relaxed),
            accepted: self.accepted.load(Relaxed),
            overloaded: self.overloaded.load(Relaxed),
            ignored: self.ignored.load(Relaxed),
            late: self.late.load(Relaxed),
        }
    }

    /// A uniform draw in `[0, 1)`, 53 bits.
    #[inline]
    fn draw(&self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Credits an accept to the bucket of `epoch`, with no clock read.
    ///
    /// The requests' slot says whether the bucket is still there: once it
    /// holds another epoch (a newer bucket reused it, or a reader cleared
    /// it as stale), the accept is late and dropped — so a ticket kept for
    /// many laps of the ring can never overwrite a newer bucket's accepts.
    /// If the slot rolls between that look and the accept's own
    /// compare-and-swap, the accepts' word, holding the newer epoch by
    /// then, refuses it (a word up to eight laps newer is recognised). A
    /// bucket that left the window with its slot not reused yet takes the
    /// accept under its old tag, which no window counts.
    #[inline]
    fn accept(&self, epoch: u64) {
        self.accepted.fetch_add(1, Relaxed);
        if !self.ring.requests.holds(epoch) || self.ring.accepts.add(epoch) == Change::Gone {
            self.count_late();
        }
    }

    #[cold]
    #[inline(never)]
    fn count_late(&self) {
        self.late.fetch_add(1, Relaxed);
    }

    #[cold]
    #[inline(never)]
    fn refuse(&self, p: f64) -> Throttled {
        self.refused.fetch_add(1, Relaxed);
        #[cfg(feature = "tracing")]
        trace_refusal(self.name, p);
        Throttled::with_probability(p)
    }
}

impl<C: Clock> Ticket<'_, C> {
    /// The backend answered: an accept, credited to the bucket the request
    /// was admitted in (if that bucket is still in the window; else it is
    /// counted as late).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// t.check().unwrap().accepted();
    /// assert_eq!(t.metrics().accepts, 1);
    /// ```
    pub fn accepted(self) {
        self.record(Response::Accepted);
    }

    /// The backend refused it for overload, or it timed out: not an accept.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// t.check().unwrap().overloaded();
    /// assert_eq!((t.metrics().requests, t.metrics().accepts), (1, 0));
    /// ```
    pub fn overloaded(self) {
        self.record(Response::Overloaded);
    }

    /// It never reached the backend: its request is taken back out of the
    /// window (as a drop does).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// t.check().unwrap().ignore();
    /// assert_eq!((t.metrics().requests, t.metrics().ignored), (0, 1));
    /// ```
    pub fn ignore(self) {
        self.record(Response::Ignored);
    }

    /// Reports `response`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::throttle::{AdaptiveThrottle, Response, ThrottleConfig};
    /// let clock = ManualClock::new();
    /// let t = AdaptiveThrottle::with_seed("x", ThrottleConfig::DEFAULT, &clock, 0);
    /// t.check().unwrap().record(Response::Overloaded);
    /// assert_eq!(t.metrics().overloaded, 1);
    /// ```
    pub fn record(mut self, response: Response) {
        self.done = true;
        self.throttle.finish(self.epoch, response);
    }
}

impl<C> Drop for Ticket<'_, C> {
    fn drop(&mut self) {
        if !self.done {
            self.throttle
                .report_unaccepted(self.epoch, Response::Ignored);
        }
    }
}

impl<C> fmt::Debug for Ticket<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("throttle", &self.throttle.name)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl<C> fmt::Debug for AdaptiveThrottle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottle")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("admitted", &self.admitted.load(Relaxed))
            .field("refused", &self.refused.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The one event per local refusal (feature `tracing`), at DEBUG as the
/// rate limiter's: refusals come at the rate of traffic, and the `refused`
/// counter is what dashboards read.
#[cfg(feature = "tracing")]
#[cold]
fn trace_refusal(system: &'static str, p: f64) {
    tracing::debug!(
        target: "watertight::throttle",
        system,
        probability = p,
        "adaptive throttle refused a request locally"
    );
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use core::time::Duration;

    fn throttle(clock: &ManualClock) -> AdaptiveThrottle<&ManualClock> {
        AdaptiveThrottle::with_seed("t", ThrottleConfig::DEFAULT, clock, 11)
    }

    #[test]
    fn the_formula() {
        assert_eq!(probability(0, 0, 2.0, 0.9), 0.0);
        assert_eq!(probability(10, 5, 2.0, 0.9), 0.0);
        assert_eq!(probability(10, 4, 2.0, 0.9), 2.0 / 11.0);
        assert_eq!(probability(10, 4, 1.0, 1.0), 6.0 / 11.0);
        assert_eq!(probability(10, 0, 2.0, 0.5), 0.5);
    }

    #[test]
    fn a_healthy_backend_is_never_refused() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        for _ in 0..if cfg!(miri) { 50 } else { 1000 } {
            t.check().unwrap().accepted();
            clock.advance(Duration::from_millis(100));
        }
        assert_eq!(t.metrics().refused, 0);
    }

    #[test]
    fn refusals_count_as_requests_and_are_counted() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        let mut refused = 0;
        for _ in 0..100 {
            match t.check() {
                Ok(ticket) => ticket.overloaded(),
                Err(e) => {
                    assert!(e.probability() > 0.0);
                    refused += 1;
                }
            }
        }
        let m = t.metrics();
        assert_eq!(m.requests, 100);
        assert_eq!(m.refused, refused);
        assert_eq!(m.admitted + m.refused, 100);
        assert_eq!(m.probability, 0.9);
    }

    #[test]
    fn an_accept_is_credited_to_its_admission_bucket() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        let ticket = t.check().unwrap();
        // The call takes 10 buckets: its accept still lands in the first.
        clock.advance(ThrottleConfig::DEFAULT.bucket() * 10);
        ticket.accepted();
        // When the first bucket leaves the window, both counts leave with it.
        clock.advance(ThrottleConfig::DEFAULT.bucket() * 10);
        assert_eq!((t.metrics().requests, t.metrics().accepts), (0, 0));
    }

    #[test]
    fn a_late_accept_is_not_counted() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        let ticket = t.check().unwrap();
        clock.advance(ThrottleConfig::DEFAULT.window());
        ticket.accepted();
        // Not in the window; its slot was not reused, so not late either.
        let m = t.metrics();
        assert_eq!((m.accepts, m.late, m.accepted), (0, 0, 1));
    }

    #[test]
    fn an_accept_racing_the_rollover_lands_nowhere_newer() {
        // The requests' slot rolled before the accept comes in, the
        // accepts' slot not: the accept is late, dropped.
        let clock = ManualClock::new();
        let t = throttle(&clock);
        let ticket = t.check().unwrap();
        clock.advance(ThrottleConfig::DEFAULT.window());
        let second = t.check().unwrap();
        ticket.accepted();
        second.overloaded();
        assert_eq!(
            (t.metrics().requests, t.metrics().accepts, t.metrics().late),
            (1, 0, 1)
        );
    }

    #[test]
    fn a_dropped_ticket_takes_its_request_back() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        drop(t.check().unwrap());
        t.check().unwrap().ignore();
        assert_eq!((t.metrics().requests, t.metrics().ignored), (0, 2));
    }

    #[test]
    fn the_same_seed_refuses_the_same_requests() {
        let run = |seed| {
            let clock = ManualClock::new();
            let t = AdaptiveThrottle::with_seed("t", ThrottleConfig::DEFAULT, &clock, seed);
            let mut pattern = 0u64;
            for i in 0..64 {
                match t.check() {
                    Ok(ticket) => ticket.overloaded(),
                    Err(_) => pattern |= 1 << i,
                }
            }
            pattern
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn recovery_lowers_the_probability() {
        let clock = ManualClock::new();
        let t = throttle(&clock);
        for _ in 0..100 {
            if let Ok(ticket) = t.check() {
                ticket.overloaded();
            }
        }
        assert_eq!(t.probability(), 0.9);
        // The overloaded window ages out; a healthy one follows.
        clock.advance(ThrottleConfig::DEFAULT.window());
        assert_eq!(t.probability(), 0.0);
    }

    #[test]
    fn throttled_probability_round_trips() {
        assert_eq!(Throttled::with_probability(f64::NAN).probability(), 0.0);
        assert_eq!(Throttled::with_probability(-1.0).probability(), 0.0);
        assert_eq!(
            Throttled::with_probability(0.123456).probability(),
            0.123456
        );
    }
}
