//! The permit protocol that every future wrapping a call in a breaker
//! shares: the permit ([`Raw`], and [`CallPermit`] its public form), what a
//! future needs from a breaker ([`Guard`]), the unwind guard
//! ([`fail_on_unwind`]), and the seam that puts them together for a call
//! future ([`Admission`]).

use core::fmt;
use core::future::Future;
use core::mem::ManuallyDrop;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::classify::{Classify, Outcome};
use super::error::Rejection;
use super::state::OnTransition;
use super::window::{Inline, WindowStorage};
use super::CircuitBreaker;
use crate::clock::{Clock, Instant};

pub(crate) use sealed::{Guard, Raw};

/// Leave to make one call, from [`CircuitBreaker::try_acquire`](super::CircuitBreaker::try_acquire): record the
/// outcome on it.
///
/// Dropped without an outcome, it records nothing and a half-open probe
/// gives its slot back (a cancelled call says nothing about the system).
/// Under `std`, dropped while its thread panics, it records a failure.
///
/// # Examples
///
/// Guarding a blocking call that cannot be wrapped in a future:
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker};
/// use watertight::clock::ManualClock;
///
/// fn fetch_stock(sku: &str) -> Result<u32, String> {
///     if sku.is_empty() { Err("timeout".into()) } else { Ok(3) }
/// }
///
/// let clock = ManualClock::new();
/// let inventory: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("inventory", BreakerConfig::DEFAULT, &clock);
/// for sku in ["A-1", ""] {
///     let permit = inventory.try_acquire().unwrap();
///     match fetch_stock(sku) {
///         Ok(_) => permit.success(),
///         Err(_) => permit.failure(),
///     }
/// }
/// drop(inventory.try_acquire().unwrap()); // no outcome: nothing recorded
/// let m = inventory.metrics();
/// assert_eq!((m.calls, m.failed_calls), (2, 1));
/// ```
#[must_use = "a permit records nothing unless its outcome is given"]
#[clippy::has_significant_drop]
pub struct CallPermit<
    'a,
    C: Clock,
    const N: usize,
    H: OnTransition = (),
    W: WindowStorage = Inline<N>,
> {
    pub(super) breaker: &'a CircuitBreaker<C, N, H, W>,
    pub(super) raw: Raw,
}

impl<'a, C: Clock, const N: usize, H: OnTransition, W: WindowStorage> CallPermit<'a, C, N, H, W> {
    /// Records that the system answered. Slow if it took longer than the
    /// slow-call duration.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().success();
    /// assert_eq!(b.metrics().calls, 1);
    /// ```
    #[inline(always)]
    pub fn success(self) {
        self.record(Outcome::Success)
    }

    /// Records that the system failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().failure();
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// ```
    #[inline(always)]
    pub fn failure(self) {
        self.record(Outcome::Failure)
    }

    /// Records nothing: the call said nothing about the system. A half-open
    /// probe gives its slot back.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// b.try_acquire().unwrap().ignore();
    /// assert_eq!(b.metrics().calls, 0);
    /// ```
    pub fn ignore(self) {
        self.record(Outcome::Ignored)
    }

    /// Records `outcome`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker, Outcome}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let status = 503;
    /// let permit = b.try_acquire().unwrap();
    /// permit.record(if status >= 500 { Outcome::Failure } else { Outcome::Success });
    /// assert_eq!(b.metrics().failed_calls, 1);
    /// ```
    #[inline(always)]
    pub fn record(self, outcome: Outcome) {
        let this = ManuallyDrop::new(self);
        finish(this.breaker, this.raw, outcome);
    }

    /// Whether this permit is a half-open probe.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// assert!(!b.try_acquire().unwrap().is_probe());
    /// ```
    pub fn is_probe(&self) -> bool {
        self.raw.is_probe()
    }

    /// The breaker this permit belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::{BreakerConfig, CircuitBreaker}; use watertight::clock::ManualClock;
    /// # let clock = ManualClock::new();
    /// # let b: CircuitBreaker<_, 64> = CircuitBreaker::new("x", BreakerConfig::DEFAULT, &clock);
    /// let p = b.try_acquire().unwrap();
    /// assert_eq!(p.breaker().name(), "x");
    /// ```
    pub fn breaker(&self) -> &'a CircuitBreaker<C, N, H, W> {
        self.breaker
    }
}

#[inline(always)]
fn finish<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    breaker: &CircuitBreaker<C, N, H, W>,
    raw: Raw,
    outcome: Outcome,
) {
    // One inlined `record` for both outcomes, not one per outcome: the
    // classifier decides at run time anyway, and on a microcontroller each
    // copy is a clock read and the healthy-window check in flash.
    match outcome {
        Outcome::Ignored => breaker.release(raw),
        _ => breaker.record(raw, matches!(outcome, Outcome::Failure)),
    }
}

/// Drop without an outcome: a failure if the thread is panicking (under
/// `std`), otherwise nothing, and a probe's slot back.
fn abandon<C: Clock, const N: usize, H: OnTransition, W: WindowStorage>(
    breaker: &CircuitBreaker<C, N, H, W>,
    raw: Raw,
) {
    #[cfg(feature = "std")]
    if std::thread::panicking() {
        breaker.record(raw, true);
        return;
    }
    breaker.release(raw);
}

/// Runs `poll` (a step of a call future that holds the permit `raw`) so
/// that a panic unwinding out of it records a failure on `raw` there and
/// then, whoever catches the panic: a task harness, `catch_unwind` around
/// the future, or `std::panic::catch_unwind` around the executor. A future
/// dropped after its panic was caught (as `FutureExt::catch_unwind` does)
/// cannot tell that drop from a cancellation, so the unwind is caught here,
/// in `poll`.
///
/// The guard is armed only while `poll` runs and is forgotten when it
/// returns, so only an unwind can drop it armed: it reads no thread-local
/// state and costs nothing when `poll` returns. Without `std` there is no
/// unwinding to catch (`no_std` targets abort on panic), and no guard.
///
/// The caller takes `raw` out of its future for the call (so that an unwind
/// finds the permit here only, and the future's drop does not see it again)
/// and puts it back if `poll` is pending. The permit is passed by value, not
/// by reference to the future's field: a future ready at its first poll then
/// keeps its permit in registers from admission to record (a round trip
/// through the field, stored in pieces and reloaded in one wide load,
/// stalled on store forwarding).
#[inline(always)]
pub(crate) fn fail_on_unwind<B: Guard + ?Sized, R>(
    breaker: &B,
    raw: Option<Raw>,
    poll: impl FnOnce() -> R,
) -> R {
    #[cfg(feature = "std")]
    let guard = Unwinding { breaker, raw };
    #[cfg(not(feature = "std"))]
    let _ = (breaker, raw);
    let r = poll();
    #[cfg(feature = "std")]
    core::mem::forget(guard);
    r
}

/// Armed by [`fail_on_unwind`]: dropped only by an unwind, it records a
/// failure on the permit it holds.
#[cfg(feature = "std")]
struct Unwinding<'a, B: Guard + ?Sized> {
    breaker: &'a B,
    raw: Option<Raw>,
}

#[cfg(feature = "std")]
impl<B: Guard + ?Sized> Drop for Unwinding<'_, B> {
    // Inlined into the landing pad, so that the guard's fields need not be
    // stored for an out-of-line drop to read (they are in registers anyway).
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.breaker.finish(raw, Outcome::Failure);
        }
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> Drop
    for CallPermit<'_, C, N, H, W>
{
    fn drop(&mut self) {
        abandon(self.breaker, self.raw);
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> fmt::Debug
    for CallPermit<'_, C, N, H, W>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallPermit")
            .field("breaker", &self.breaker.name)
            .field("generation", &self.raw.generation())
            .field("probe", &(self.raw.is_probe()))
            .finish()
    }
}

mod sealed {
    use core::num::NonZeroU32;

    use crate::clock::Instant;

    /// What a permit needs to know: when the call began (when slow-call
    /// detection is on), its generation, and whether it is a half-open
    /// probe.
    ///
    /// Two scalars, so that the compiler passes and returns it (and an
    /// `Option<Raw>`, through the tag's niche) in two registers and copies
    /// it field by field: the generation and the probe flag are one
    /// `NonZeroU32`, `gen << 2 | probe << 1 | 1`. (As three fields it was an
    /// aggregate: returned through memory, built there in pieces and
    /// reloaded in wider loads that stalled on store forwarding, 6 ns of a
    /// 2 ns call. With a `bool` for the flag, the padding bytes were copied
    /// piecemeal, to the same effect.)
    #[derive(Debug, Clone, Copy)]
    pub struct Raw {
        pub(crate) start: Instant,
        tag: NonZeroU32,
    }

    impl Raw {
        #[inline(always)]
        pub(crate) const fn new(start: Instant, generation: u32, probe: bool) -> Raw {
            // `gen` has 13 bits (`word::GEN_BITS`): the shift loses nothing.
            let bits = generation << 2 | (probe as u32) << 1 | 1;
            match NonZeroU32::new(bits) {
                Some(tag) => Raw { start, tag },
                None => unreachable!(),
            }
        }

        /// A permit from its parts, as [`tag`](Self::tag) gave them.
        #[inline(always)]
        pub(crate) const fn from_parts(start: Instant, tag: NonZeroU32) -> Raw {
            Raw { start, tag }
        }

        /// The generation and the probe flag, in one word.
        #[inline(always)]
        pub(crate) const fn tag(self) -> NonZeroU32 {
            self.tag
        }

        /// The generation it was admitted in.
        #[inline(always)]
        pub(crate) const fn generation(self) -> u32 {
            self.tag.get() >> 2
        }

        /// Whether it is a half-open probe.
        #[inline(always)]
        pub(crate) const fn is_probe(self) -> bool {
            self.tag.get() & 2 != 0
        }
    }

    /// What a call future ([`Call`](crate::breaker::Call), the tower
    /// service's, the policy's) needs from a breaker, so that the future
    /// can name the breaker as one type parameter (pin-project-lite cannot
    /// take the breaker's const generic).
    pub trait Guard {
        #[doc(hidden)]
        fn acquire_raw(&self) -> Result<super::Raw, super::Rejection>;
        #[doc(hidden)]
        fn finish(&self, raw: super::Raw, outcome: super::Outcome);
        #[doc(hidden)]
        fn abandon(&self, raw: super::Raw);
    }
}

impl<C: Clock, const N: usize, H: OnTransition, W: WindowStorage> Guard
    for CircuitBreaker<C, N, H, W>
{
    #[inline(always)]
    fn acquire_raw(&self) -> Result<Raw, Rejection> {
        CircuitBreaker::acquire_raw(self)
    }
    #[inline(always)]
    fn finish(&self, raw: Raw, outcome: Outcome) {
        finish(self, raw, outcome)
    }
    // Out of line and cold. A call future is dropped by the landing pads of
    // every call that may unwind while it is alive (the inner future's
    // poll, the clock, the breaker's slow paths): rustc calls its drop glue
    // there through a `cold` call site, which LLVM inlines only if the glue
    // is small. With the abandon inlined it was not, so the glue took the
    // future's address: the future could not live in registers, and a ready
    // `call` stored all its fields, re-read them after every opaque call,
    // and tested its permit field on the way out (75 instructions against
    // the `try_acquire` forms' 55; with this, 60). The glue is now a test of
    // the permit field and this call. Where panics abort there are no
    // landing pads, and it is inlined as before.
    #[cfg_attr(panic = "unwind", cold, inline(never))]
    #[cfg_attr(not(panic = "unwind"), inline)]
    fn abandon(&self, raw: Raw) {
        abandon(self, raw)
    }
}

/// What [`Admission::poll_with`] hands on once a call is done: its result
/// with the outcome recorded for it, or the breaker's refusal.
pub(crate) type Judged<T, E> = Result<(Result<T, E>, Outcome), Rejection>;

/// The breaker's side of a call future: the one seam through which a
/// future that wraps a call in a breaker takes its permit, polls its call,
/// classifies the result and records it, or gives the permit back when it
/// is dropped. [`Call`](crate::breaker::Call) is built on it; so can any
/// other such future be (the tower service's, the policy's).
///
/// It holds the permit while the call is pending and the classifier `K`
/// (a [`Classify`]) until the call is done. Three states:
///
/// | state | permit | classifier | made by |
/// |---|---|---|---|
/// | not admitted: the breaker is asked at the first poll | none | held | [`new`](Self::new) |
/// | admitted: the call runs | held | held | [`admitted`](Self::admitted), or a poll |
/// | done: the outcome is recorded, or the breaker refused | none | none | a poll that is ready, [`settle`](Self::settle) |
///
/// # How a future uses it
///
/// - Keep it as an unpinned field next to the pinned call and the breaker
///   (`&B`, or an `Arc<B>`, with `B:` [`Guard`]).
/// - In `poll`: panic with the future's own message if
///   [`is_done`](Self::is_done) (polled after completion); then return
///   `admission.poll(breaker, call, cx)` (or
///   [`poll_with`](Self::poll_with), for a call that is not a pinned
///   future, such as one made on the first poll), mapping its
///   `Ready(Ok(result))` (the call's own result, already recorded) and
///   `Ready(Err(rejection))` (the breaker refused; the call was never
///   polled) to the future's output.
/// - For an outcome of the future's own (its timeout fired: a failure;
///   the caller's budget ran out: ignored), [`settle`](Self::settle).
/// - In its drop (`PinnedDrop`): [`abandon`](Self::abandon). A cancelled
///   call records nothing and a half-open probe gives its slot back.
///
/// Everything a call ready at its first poll needs is inlined and kept in
/// registers: the breaker, the classifier and the permit are taken out of
/// the future before the call is polled and put back only if it is pending
/// (see [`fail_on_unwind`] and [`Admission::take_raw`]). Under `std`, a panic in the
/// call or the classifier records a failure as it unwinds out of the poll.
///
/// ```text
/// pin_project! {
///     struct Guarded<'a, B: Guard, F, K> {
///         breaker: &'a B,
///         #[pin]
///         call: F,
///         admission: Admission<K>,
///     }
///     impl<'a, B: Guard, F, K> PinnedDrop for Guarded<'a, B, F, K> {
///         fn drop(this: Pin<&mut Self>) {
///             let this = this.project();
///             this.admission.abandon(*this.breaker);
///         }
///     }
/// }
///
/// impl<B: Guard, F: Future<Output = Result<T, E>>, K: Classify<T, E>, T, E> Future
///     for Guarded<'_, B, F, K>
/// {
///     type Output = Result<T, CallError<E>>;
///     fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
///         let this = self.project();
///         if this.admission.is_done() {
///             panic!("`Guarded` polled after completion");
///         }
///         this.admission.poll(*this.breaker, this.call, cx).map(|polled| match polled {
///             Ok(result) => result.map_err(CallError::Failed),
///             Err(why) => Err(CallError::Rejected(why)),
///         })
///     }
/// }
/// ```
pub(crate) struct Admission<K> {
    // The permit while the call is pending, as an `Option<Raw>` laid out
    // flat (`tag` is `None` for no permit): so the classifier's flag can
    // sit in the permit's padding, and a future is no larger for the seam
    // than with the two fields of its own (on a 32-bit target a nested
    // `Option<Raw>` and a flag took 24 bytes; the firmware's tasks grew by
    // 8 bytes each). Not asked yet: no permit and the classifier still
    // there; done: no classifier.
    start: Instant,
    tag: Option<NonZeroU32>,
    classify: Option<K>,
}

impl<K> Admission<K> {
    /// Not admitted yet: the breaker is asked at the first poll.
    #[inline(always)]
    pub(crate) const fn new(classify: K) -> Self {
        Admission {
            start: Instant::ZERO,
            tag: None,
            classify: Some(classify),
        }
    }

    /// Admitted already, with `raw` (from [`Guard::acquire_raw`], asked
    /// before the first poll: the tower service asks when it is called).
    // Used by the tower breaker service only.
    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(crate) const fn admitted(raw: Raw, classify: K) -> Self {
        Admission {
            start: raw.start,
            tag: Some(raw.tag()),
            classify: Some(classify),
        }
    }

    /// Refused before the first poll (the tower service asks when it is
    /// called): done, with no permit and no classifier.
    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(crate) const fn refused() -> Self {
        Admission {
            start: Instant::ZERO,
            tag: None,
            classify: None,
        }
    }

    /// Whether the call is done: its outcome recorded, or refused (a poll
    /// now is a poll after completion).
    #[inline(always)]
    pub(crate) fn is_done(&self) -> bool {
        self.classify.is_none()
    }

    /// Whether it holds a permit: admitted and not done.
    #[inline(always)]
    pub(crate) fn is_admitted(&self) -> bool {
        self.tag.is_some()
    }

    /// Takes the permit out, reading its start only if there is one.
    /// `Option::take` on an `Option<Raw>` reads the whole field, and for
    /// `None` its first eight bytes are whatever the stack slot last held:
    /// a narrower store there (a neighbour's byte, say) makes that wide load
    /// stall on store forwarding, which cost a ready `call` half again its
    /// time in the bench.
    #[inline(always)]
    fn take_raw(&mut self) -> Option<Raw> {
        let tag = self.tag.take()?;
        Some(Raw::from_parts(self.start, tag))
    }

    /// Puts the permit of a pending call back.
    #[inline(always)]
    fn keep(&mut self, raw: Raw) {
        self.start = raw.start;
        self.tag = Some(raw.tag());
    }

    /// Puts a permit just taken into the future, if there is one, before
    /// something that may unwind is run outside [`poll_with`](Self::poll_with)
    /// (which then takes it back): dropped while unwinding, the future
    /// records a failure with it ([`abandon`](Self::abandon)).
    #[inline(always)]
    pub(crate) fn keep_admitted(&mut self, admitted: Option<Raw>) {
        if let Some(raw) = admitted {
            self.keep(raw);
        }
    }

    /// One poll of the call: admits it if it is not admitted yet, polls
    /// `call` under [`fail_on_unwind`], and when it is ready classifies its
    /// result and records the outcome. `Ready(Ok(result))`: the call's
    /// result, recorded; `Ready(Err(why))`: the breaker refused (the call
    /// was not polled); both leave it done. Pending, it keeps the permit.
    ///
    /// # Panics
    ///
    /// If it is done: check [`is_done`](Self::is_done) first, to panic with
    /// the future's own message (the check and this one are one test once
    /// inlined).
    #[inline(always)]
    pub(crate) fn poll<B, F, T, E>(
        &mut self,
        breaker: &B,
        call: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Result<T, E>, Rejection>>
    where
        B: Guard + ?Sized,
        F: Future<Output = Result<T, E>>,
        K: Classify<T, E>,
    {
        match self.poll_with(breaker, None, move || call.poll(cx)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok((result, _))) => Poll::Ready(Ok(result)),
            Poll::Ready(Err(why)) => Poll::Ready(Err(why)),
        }
    }

    /// [`poll`](Self::poll) for a call that is not a pinned future: `poll`
    /// polls it (making it first, say). Ready, it hands on the outcome it
    /// recorded beside the result (the policy's retry loop decides on it). `admitted` is a permit the caller
    /// has just taken with [`Guard::acquire_raw`] in this same poll (kept
    /// in registers rather than stored here); with `None`, the permit held
    /// is used, or the breaker is asked.
    ///
    /// # Panics
    ///
    /// If it is done, as [`poll`](Self::poll).
    #[inline(always)]
    pub(crate) fn poll_with<B, T, E>(
        &mut self,
        breaker: &B,
        admitted: Option<Raw>,
        poll: impl FnOnce() -> Poll<Result<T, E>>,
    ) -> Poll<Judged<T, E>>
    where
        B: Guard + ?Sized,
        K: Classify<T, E>,
    {
        // The classifier and the permit stay out of the future while the
        // call is polled: read before anything is called, they are known to
        // the optimiser, and a call ready at its first poll never stores
        // its permit (see `fail_on_unwind`).
        let Some(classify) = self.classify.take() else {
            panic!("a breaker's call future polled after completion");
        };
        let raw = match admitted {
            Some(raw) => raw,
            None => match self.take_raw() {
                Some(raw) => raw,
                None => match breaker.acquire_raw() {
                    Ok(raw) => raw,
                    Err(why) => return Poll::Ready(Err(why)),
                },
            },
        };
        // A panic in the call or its classifier is a failure, recorded as it
        // unwinds (see `fail_on_unwind`). Pending, the classifier and the
        // permit go back.
        let polled = fail_on_unwind(breaker, Some(raw), move || match poll() {
            Poll::Pending => Err(classify),
            Poll::Ready(result) => {
                let outcome = classify.classify(&result);
                Ok((result, outcome))
            }
        });
        let (result, outcome) = match polled {
            Ok(done) => done,
            Err(classify) => {
                self.classify = Some(classify);
                self.keep(raw);
                return Poll::Pending;
            }
        };
        breaker.finish(raw, outcome);
        Poll::Ready(Ok((result, outcome)))
    }

    /// Ends the call with `outcome` without polling it (the future's own
    /// verdict: a timeout that fired is a failure, a caller's budget that
    /// ran out records nothing): the permit held, if any, records it, and
    /// the call is done.
    #[inline(always)]
    pub(crate) fn settle<B: Guard + ?Sized>(&mut self, breaker: &B, outcome: Outcome) {
        self.classify = None;
        if let Some(raw) = self.take_raw() {
            breaker.finish(raw, outcome);
        }
    }

    /// The drop step: a permit still held (the call was cancelled, or
    /// dropped while its thread panics) is abandoned (see
    /// [`Guard::abandon`]).
    #[inline(always)]
    pub(crate) fn abandon<B: Guard + ?Sized>(&mut self, breaker: &B) {
        if let Some(raw) = self.take_raw() {
            breaker.abandon(raw);
        }
    }
}
