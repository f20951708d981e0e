//! The call future: slot, breaker, deadline, in that order, polled as one.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;

use super::error::{Error, ErrorKind};
use super::Policy;
use crate::breaker::{
    Admission, CircuitBreaker, Classify, Guard, Judged, Outcome, Raw, WindowStorage,
};
use crate::bulkhead::{poll_until, AcquireError, Waiter};
use crate::clock::{Clock, Instant, Timer};
use crate::rate::RateLimiter;
use crate::throttle::{AdaptiveThrottle, Response, Throttled};

// ---- the call future -------------------------------------------------------

mod sealed {
    use core::future::Future;
    use core::task::{Context, Poll};
    use core::time::Duration;

    use crate::breaker::Guard;
    use crate::bulkhead::Bulkhead;
    use crate::clock::Timer;
    use crate::policy::Retries;
    use crate::rate::RateLimiter;
    use crate::throttle::AdaptiveThrottle;

    /// The parts of a policy that a [`PolicyCall`](super::PolicyCall) works
    /// with, borrowed from a handle: `&Policy` for `Policy::call` and its
    /// relatives, `Arc<Policy>` for the tower service.
    #[allow(missing_debug_implementations)]
    pub struct Parts<'a, C, B> {
        pub(crate) throttle: Option<&'a AdaptiveThrottle<C>>,
        pub(crate) rate: Option<&'a RateLimiter<C>>,
        pub(crate) bulkhead: &'a Bulkhead<C>,
        pub(crate) breaker: &'a B,
        pub(crate) clock: &'a C,
        pub(crate) max_wait: Duration,
        pub(crate) call_timeout: Duration,
        pub(crate) retry: &'a Retries,
    }

    /// A way to reach a policy: a reference, or an `Arc`.
    pub trait Handle {
        #[doc(hidden)]
        type Clock: Timer;
        #[doc(hidden)]
        type Breaker: Guard;
        #[doc(hidden)]
        fn parts(&self) -> Parts<'_, Self::Clock, Self::Breaker>;
    }

    /// How the call is started once the policy lets it through: a closure
    /// that makes the future, or a tower service to ready and call.
    pub trait Dispatch {
        #[doc(hidden)]
        type Future: Future;
        /// `Ready(Ok(future))` once the call is made; `Ready(Err(output))`
        /// when starting it already failed (a service's readiness error).
        #[doc(hidden)]
        fn poll_dispatch(
            &mut self,
            cx: &mut Context<'_>,
        ) -> Poll<Result<Self::Future, <Self::Future as Future>::Output>>;

        /// Whether [`poll_before`](Self::poll_before) has anything to do
        /// before the call is made (an enabled injector, a latency under
        /// way); false once the call is made. Asked at every poll of the
        /// call: a load and a compare at most.
        #[doc(hidden)]
        #[inline(always)]
        fn before(&self) -> bool {
            false
        }

        /// What comes before the call is made, when [`before`](Self::before)
        /// says so: `Ready(Ok(()))` to make it now, `Ready(Err(output))`
        /// with an output in its place (an injected fault), `Pending` to
        /// wait (an injected latency, in `spare`: the policy's clock and
        /// the slot wait's sleep, idle once the call starts). Polled
        /// outside the breaker's unwind guard, its permit kept in the
        /// future (so that an unwind records a failure as the future
        /// drops), and out of line: the plain call's poll keeps nothing
        /// alive across it.
        #[doc(hidden)]
        fn poll_before<T: Timer>(
            &mut self,
            spare: Spare<'_, T>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), <Self::Future as Future>::Output>> {
            let _ = (spare, cx);
            Poll::Ready(Ok(()))
        }
    }

    /// The policy's clock and its slot wait's sleep, idle once the call
    /// starts: lent to [`Dispatch::poll_dispatch`], so that a start that
    /// waits (an injected latency) needs no sleep of its own in the future.
    #[allow(missing_debug_implementations)]
    pub struct Spare<'a, T: Timer> {
        // Read only by the injected start (feature `chaos`).
        #[cfg_attr(not(feature = "chaos"), allow(dead_code))]
        pub(crate) clock: &'a T,
        #[cfg_attr(not(feature = "chaos"), allow(dead_code))]
        pub(crate) sleep: core::pin::Pin<&'a mut Option<T::Sleep>>,
    }

    /// A [`Dispatch`] that can start the next attempt of a retried call:
    /// it gives back, out of the finished attempt's dispatch, what the next
    /// one needs (the closure; the service and the request).
    pub trait Redispatch: Dispatch + Sized {
        #[doc(hidden)]
        fn take_back(&mut self) -> Self;
    }
}
pub(crate) use sealed::{Dispatch, Handle, Parts, Redispatch, Spare};

impl<C: Timer, const N: usize, W: WindowStorage, B: Clock> Handle for &Policy<C, N, W, B> {
    type Clock = C;
    type Breaker = CircuitBreaker<B, N, (), W>;
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Policy::parts(self)
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "ptr"))]
impl<C: Timer, const N: usize, W: WindowStorage, B: Clock> Handle
    for alloc::sync::Arc<Policy<C, N, W, B>>
{
    type Clock = C;
    type Breaker = CircuitBreaker<B, N, (), W>;
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Policy::parts(self)
    }
}

impl<C, const N: usize, W, B> Policy<C, N, W, B> {
    fn parts(&self) -> Parts<'_, C, CircuitBreaker<B, N, (), W>> {
        Parts {
            throttle: self.throttle.as_ref(),
            rate: self.rate.as_ref(),
            bulkhead: &self.bulkhead,
            breaker: &self.breaker,
            clock: &self.clock,
            max_wait: self.max_wait,
            call_timeout: self.call_timeout,
            retry: &self.retry,
        }
    }
}

/// The call of [`Policy::call`] and its relatives: a closure that makes the
/// call's future, run once the policy lets it through (a refused call is
/// never made).
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
///
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("mail", PolicyConfig::builder(1).build().unwrap(), &clock).unwrap();
/// p.breaker().force_open();
/// let mut made = false;
/// let r = futures_lite::future::block_on(p.call(|| {
///     made = true;
///     async { Ok::<_, ()>(()) }
/// }));
/// assert!(matches!(r.unwrap_err().kind(), ErrorKind::CircuitOpen(_)));
/// assert!(!made);
/// ```
#[derive(Debug)]
pub struct Make<F>(pub(super) Option<F>);

impl<F: FnOnce() -> Fut, Fut: Future> Dispatch for Make<F> {
    type Future = Fut;
    #[inline]
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self.0.take().expect("a call is made once");
        Poll::Ready(Ok(make()))
    }
}

/// Where a [`PolicyCall`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Not polled yet: nothing taken.
    Start,
    /// Waiting for a bulkhead slot.
    Slot,
    /// Slot and breaker permit held: starting, then running the call.
    Call,
    /// Finished.
    Done,
}

pub(super) type SleepOf<R> = <<R as Handle>::Clock as Timer>::Sleep;
type OutputOf<D> = <<D as Dispatch>::Future as Future>::Output;

/// What a finished [`PolicyCall`] hands on: its output, and the verdict the
/// breaker recorded for it — `Some` when the call ran to its end and was
/// classified, `None` when the policy ended it (a refusal, out of time).
/// The retry loop decides on the verdict, without classifying again.
pub(crate) type Settled<T, E> = (Result<T, Error<E>>, Option<Outcome>);

/// The handle to the policy, and whether the call holds one of its
/// bulkhead's slots: given back by [`release`](Slot::release) when the
/// call settles, or on drop (a cancelled or unwound call). It owns the
/// handle because the slot is the policy's: a [`Permit`](crate::bulkhead::Permit)
/// borrowing the bulkhead could not sit in the same future as the `Arc` it
/// would borrow from.
struct Slot<R: Handle> {
    policy: R,
    held: bool,
    // The throttle's admission (the bucket the attempt counted in), while
    // the attempt is out: reported when it settles, taken back on drop.
    ticket: Option<u64>,
}

impl<R: Handle> Slot<R> {
    /// Gives the slot back, if it is held.
    #[inline]
    fn release(&mut self) {
        if core::mem::take(&mut self.held) {
            self.policy.parts().bulkhead.release(1);
        }
    }

    /// Reports the attempt to the throttle, if it holds one's admission.
    #[inline]
    fn report(&mut self, outcome: Outcome) {
        if let Some(epoch) = self.ticket.take() {
            report_throttle(self.policy.parts().throttle, epoch, outcome);
        }
    }
}

impl<R: Handle> Drop for Slot<R> {
    #[inline]
    fn drop(&mut self) {
        self.report(Outcome::Ignored);
        self.release();
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Policy::call`] and its relatives (and of the tower
    /// policy service): the three layers as one named future. `R` reaches
    /// the policy (`&Policy` or `Arc<Policy>`), `D` starts the call, `K`
    /// classifies its result.
    ///
    /// In order: a bulkhead slot (at once, or within the policy's
    /// `max_wait`, or what is left of the budget if less); the breaker's
    /// permit (a refusal gives the slot back at once); then the call, under
    /// the policy's `call_timeout` (or the budget's end if sooner), armed
    /// after its first poll: a call that is ready at once reads no clock and
    /// arms no timer, and its timeout counts from the end of that poll.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point leaves a slot wait (counted as cancelled),
    /// drops the call, records nothing for the breaker (a half-open probe
    /// slot is given back) and gives the bulkhead slot back.
    ///
    /// Under `std`, a call (or classifier) that panics records a failure as
    /// the panic unwinds out of `poll`, however it is caught (a task
    /// harness, `catch_unwind` on the future or on the thread); the slot
    /// goes back when the future is dropped.
    ///
    /// # Examples
    ///
    /// Named, so it can sit in a struct without a box:
    ///
    /// ```
    /// use core::future::Ready;
    /// use watertight::breaker::ErrIsFailure;
    /// use watertight::clock::ManualClock;
    /// use watertight::futures::PolicyCall;
    /// use watertight::policy::{Make, Policy, PolicyConfig};
    ///
    /// type Lookup<'p> = PolicyCall<
    ///     &'p Policy<&'p ManualClock>,
    ///     Make<fn() -> Ready<Result<u32, ()>>>,
    ///     ErrIsFailure,
    /// >;
    ///
    /// let clock = ManualClock::new();
    /// let stock = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
    /// let call: Lookup<'_> = stock.call(|| core::future::ready(Ok(7)));
    /// assert_eq!(stock.bulkhead().in_flight(), 0); // nothing taken before the first poll
    /// assert_eq!(futures_lite::future::block_on(call), Ok(7));
    /// ```
    #[project = CallProj]
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PolicyCall<R: Handle, D: Dispatch, K> {
        // The policy, and the bulkhead slot once held (given back on drop).
        slot: Slot<R>,
        budget: Option<Instant>,
        dispatch: D,
        stage: Stage,
        // Whether a full bulkhead is waited on (`max_wait`) or refuses at
        // once (a hedge: `without_slot_wait`).
        wait: bool,
        // A wait for a slot (idle until one is needed) and its deadline.
        #[pin]
        waiter: Waiter,
        slot_deadline: Instant,
        #[pin]
        slot_sleep: Option<SleepOf<R>>,
        // The breaker's permit while the call is pending, and the
        // classifier: the breaker's seam for call futures.
        admission: Admission<K>,
        // The call once made; its timeout once armed, and whether that
        // timeout is the caller's budget rather than `call_timeout`.
        #[pin]
        fut: Option<D::Future>,
        #[pin]
        sleep: Option<SleepOf<R>>,
        by_budget: bool,
    }

    impl<R: Handle, D: Dispatch, K> PinnedDrop for PolicyCall<R, D, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let parts = this.slot.policy.parts();
            this.waiter.cancel(parts.bulkhead);
            this.admission.abandon(parts.breaker);
            // The slot goes back as `slot` is dropped, next.
        }
    }
}

impl<R: Handle, D: Dispatch, K> PolicyCall<R, D, K> {
    /// The call's starter, which a retry takes back after the attempt.
    pub(crate) fn dispatch_mut(self: Pin<&mut Self>) -> &mut D {
        self.project().dispatch
    }

    /// A full bulkhead refuses this call at once instead of letting it
    /// wait `max_wait` (a hedge, which is worth sending only now).
    pub(crate) fn without_slot_wait(mut self) -> Self {
        self.wait = false;
        self
    }

    pub(crate) fn new(policy: R, budget: Option<Instant>, dispatch: D, classify: K) -> Self {
        PolicyCall {
            slot: Slot {
                policy,
                held: false,
                ticket: None,
            },
            budget,
            dispatch,
            stage: Stage::Start,
            wait: true,
            waiter: Waiter::new(1),
            slot_deadline: Instant::ZERO,
            slot_sleep: None,
            admission: Admission::new(classify),
            fut: None,
            sleep: None,
            by_budget: false,
        }
    }
}

impl<R, D, K, T, E> PolicyCall<R, D, K>
where
    R: Handle,
    D: Dispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    /// [`poll`](Future::poll), with the verdict the breaker recorded (see
    /// [`Settled`]): the retry loop's view of the call.
    #[inline(always)]
    pub(crate) fn poll_settled(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Settled<T, E>> {
        self.poll_to(cx, |out, verdict| (out, verdict))
    }

    /// The poll itself, handing its output and the verdict to `to` (each
    /// caller's own output is built in place, not moved out of a pair). A
    /// start with something to do before the call (an injected fault) takes
    /// a copy of the poll of its own, out of line: the plain call's poll
    /// then has one branch more and nothing else, no call that returns
    /// into it and no register kept across one.
    #[inline(always)]
    fn poll_to<O>(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        to: impl FnOnce(Result<T, Error<E>>, Option<Outcome>) -> O,
    ) -> Poll<O> {
        if self.as_mut().project().dispatch.before() {
            return self.poll_to_before(cx, to);
        }
        self.poll_body::<false, O>(cx, to)
    }

    /// [`poll_to`](Self::poll_to) for a start with something to do first.
    #[cold]
    #[inline(never)]
    fn poll_to_before<O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        to: impl FnOnce(Result<T, Error<E>>, Option<Outcome>) -> O,
    ) -> Poll<O> {
        self.poll_body::<true, O>(cx, to)
    }

    /// The poll's body; `BEFORE`: whether the start may have something to
    /// do before the call is made.
    #[inline(always)]
    fn poll_body<const BEFORE: bool, O>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        to: impl FnOnce(Result<T, Error<E>>, Option<Outcome>) -> O,
    ) -> Poll<O> {
        let mut this = self.project();
        let name = this.slot.policy.parts().bulkhead.name();
        // The breaker's permit just taken stays out of the future while the
        // call is polled (see `Admission::poll_with`), so a call ready at
        // its first poll never stores it; later polls use the one kept.
        let admitted = match *this.stage {
            Stage::Call => None,
            Stage::Done => panic!("`PolicyCall` polled after completion"),
            Stage::Start | Stage::Slot => match ready!(admit(&mut this, cx)) {
                Ok(admitted) => Some(admitted),
                Err(kind) => return Poll::Ready(to(Err(Error::new(name, kind)), None)),
            },
        };
        // The call, polled once before its timeout is armed.
        match poll_in_breaker::<BEFORE, _, _, _, _, _>(&mut this, admitted, cx) {
            Poll::Ready(Ok((result, outcome))) => {
                settle(&mut this, None, outcome);
                let out = result.map_err(|e| Error::new(name, ErrorKind::Call(e)));
                return Poll::Ready(to(out, Some(outcome)));
            }
            // Only without a permit does the seam ask the breaker, and
            // `admit` has always taken one: a refusal there is the same
            // refusal as `admit`'s.
            Poll::Ready(Err(why)) => {
                settle(&mut this, None, Outcome::Ignored);
                let out = Err(Error::new(name, ErrorKind::CircuitOpen(why)));
                return Poll::Ready(to(out, None));
            }
            Poll::Pending => {}
        }
        let Parts {
            clock,
            call_timeout,
            ..
        } = this.slot.policy.parts();
        if this.sleep.is_none() {
            let now = clock.now();
            let left = this.budget.map(|end| end.saturating_duration_since(now));
            let limit = match left {
                Some(left) if left < call_timeout => {
                    *this.by_budget = true;
                    left
                }
                _ => call_timeout,
            };
            this.sleep
                .set(Some(clock.sleep_until(now.saturating_add(limit))));
        }
        let timer = this.sleep.as_mut().as_pin_mut().expect("armed just above");
        ready!(timer.poll(cx));
        // Out of time: the call is dropped now. Out of `call_timeout`, a
        // failure of the system; cut short by the caller's budget, nothing
        // is recorded.
        this.fut.set(None);
        this.sleep.set(None);
        let by_budget = *this.by_budget;
        let outcome = if by_budget {
            Outcome::Ignored
        } else {
            Outcome::Failure
        };
        let parts = this.slot.policy.parts();
        this.admission.settle(parts.breaker, outcome);
        settle(&mut this, None, outcome);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "watertight::policy",
            system = name,
            reason = "deadline_exceeded",
            by_budget,
            "policy call ran out of time"
        );
        Poll::Ready(to(Err(Error::new(name, ErrorKind::DeadlineExceeded)), None))
    }
}

impl<R, D, K, T, E> Future for PolicyCall<R, D, K>
where
    R: Handle,
    D: Dispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_to(cx, |out, _| out)
    }
}

/// What lets the call start, in order: 0. a cell of the rate limit, if the
/// policy has one, 1. a bulkhead slot, 2. the breaker's permit, 3. a budget
/// not spent yet. `Ok`: the permit, with the slot held. A refusal settles
/// the call.
#[inline(always)]
fn admit<R: Handle, D: Dispatch, K, E>(
    this: &mut CallProj<'_, R, D, K>,
    cx: &mut Context<'_>,
) -> Poll<Result<Raw, ErrorKind<E>>> {
    let Parts {
        rate,
        bulkhead,
        breaker,
        clock,
        max_wait,
        ..
    } = this.slot.policy.parts();
    let budget = *this.budget;
    let max_wait = if *this.wait { max_wait } else { Duration::ZERO };
    if *this.stage == Stage::Start {
        // Throttle, outermost, once per attempt: a local refusal costs no
        // cell and no slot. Without one, this is one branch.
        if let Some(throttle) = this.slot.policy.parts().throttle {
            match admit_throttle(throttle) {
                Ok(epoch) => this.slot.ticket = Some(epoch),
                Err(t) => {
                    settle(this, None, Outcome::Ignored);
                    return Poll::Ready(Err(ErrorKind::Throttled(t)));
                }
            }
        }
        // 0. Rate limit, outermost, once per attempt: a refused cell costs
        // no slot. Without one, this is one branch.
        if let Some(rate) = rate {
            if let Err(retry_after) = take_cell(rate) {
                settle(this, None, Outcome::Ignored);
                return Poll::Ready(Err(ErrorKind::RateLimited { retry_after }));
            }
        }
        // 1. Bulkhead, outside: a free slot at once (no clock read); else
        // a wait of `max_wait`, or what is left of the budget if less.
        match bulkhead.try_acquire_uncounted() {
            Ok(()) => this.slot.held = true,
            Err(e) => {
                let wait = match (e, budget) {
                    (AcquireError::Full, Some(end)) if !max_wait.is_zero() => {
                        max_wait.min(end.saturating_duration_since(clock.now()))
                    }
                    (AcquireError::Full, _) => max_wait,
                    _ => Duration::ZERO,
                };
                if wait.is_zero() {
                    // Refused at once: counted (and, with `tracing`,
                    // reported) as the bulkhead's own refusal.
                    let kind = slot_refusal(bulkhead.count_rejection(e));
                    settle(this, None, Outcome::Ignored);
                    return Poll::Ready(Err(kind));
                }
                *this.slot_deadline = bulkhead.clock().now().saturating_add(wait);
                *this.stage = Stage::Slot;
            }
        }
    }
    if *this.stage == Stage::Slot {
        let waited = poll_until(
            bulkhead,
            this.waiter.as_mut(),
            *this.slot_deadline,
            this.slot_sleep.as_mut(),
            cx,
        );
        if let Err(e) = ready!(waited) {
            settle(this, None, Outcome::Ignored);
            return Poll::Ready(Err(slot_refusal(e)));
        }
        this.slot.held = true;
    }
    // 2. Breaker, inside: a refusal gives the slot back at once.
    let raw = match breaker.acquire_raw() {
        Ok(raw) => raw,
        Err(why) => {
            settle(this, None, Outcome::Ignored);
            return Poll::Ready(Err(ErrorKind::CircuitOpen(why)));
        }
    };
    *this.stage = Stage::Call;
    // 3. Deadline, innermost. A budget already spent does not start the
    // call: the system did nothing wrong, so nothing is recorded.
    if budget.is_some_and(|end| clock.now() >= end) {
        #[cfg(feature = "tracing")]
        let name = bulkhead.name();
        settle(this, Some(raw), Outcome::Ignored);
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "watertight::policy",
            system = name,
            reason = "deadline_exceeded",
            by_budget = true,
            "policy refused a call"
        );
        return Poll::Ready(Err(ErrorKind::DeadlineExceeded));
    }
    Poll::Ready(Ok(raw))
}

/// The call's end, however it ends, in one step: the breaker's permit (if
/// it got one) records `outcome`, once; the slot (if held) goes back; the
/// future is done.
#[inline(always)]
fn settle<R: Handle, D: Dispatch, K>(
    this: &mut CallProj<'_, R, D, K>,
    raw: Option<Raw>,
    outcome: Outcome,
) {
    if let Some(raw) = raw {
        this.slot.policy.parts().breaker.finish(raw, outcome);
    }
    this.slot.report(outcome);
    this.slot.release();
    *this.stage = Stage::Done;
}

/// The call under the breaker's permit, through the breaker's seam for
/// call futures ([`Admission`]): the call is polled (started first, if need
/// be) with the permit out of the future, so that a panic in it or in its
/// classifier records a failure as it unwinds; while it is pending the
/// permit goes back into the future. Ready, its result is classified and
/// the outcome recorded, once, and handed on with the result. `admitted`:
/// the permit [`admit`] took in this same poll; `None`, the one kept.
#[inline(always)]
fn poll_in_breaker<const BEFORE: bool, R: Handle, D: Dispatch, K, T, E>(
    this: &mut CallProj<'_, R, D, K>,
    admitted: Option<Raw>,
    cx: &mut Context<'_>,
) -> Poll<Judged<T, E>>
where
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    let Parts { breaker, clock, .. } = this.slot.policy.parts();
    let mut admitted = admitted;
    // What comes before the call (an injected fault), if anything: one
    // branch here for a plain call. Its permit waits in the future, where
    // an unwind out of it records a failure as the future drops.
    let mut before = Poll::Ready(Ok(()));
    if BEFORE && this.dispatch.before() {
        this.admission.keep_admitted(admitted.take());
        // The slot wait is over: its sleep is the start's to use.
        let spare = Spare {
            clock,
            sleep: this.slot_sleep.as_mut(),
        };
        before = this.dispatch.poll_before(spare, cx);
    }
    let (dispatch, fut) = (&mut *this.dispatch, this.fut.as_mut());
    let polled = ready!(this
        .admission
        .poll_with(breaker, admitted, || match before {
            Poll::Ready(Ok(())) => poll_call(dispatch, fut, cx),
            Poll::Ready(Err(output)) => Poll::Ready(output),
            Poll::Pending => Poll::Pending,
        }));
    this.fut.set(None);
    this.sleep.set(None);
    Poll::Ready(polled)
}

/// One cell of the policy's rate limit, never waiting, or how long until
/// one conforms: out of line, so that a policy without a rate limit
/// carries none of its code. A refusal counts (and, with `tracing`,
/// reports) itself in the limiter; one cell never exceeds a burst, which is
/// at least 1.
#[cold]
#[inline(never)]
fn take_cell<C: Clock>(rate: &RateLimiter<C>) -> Result<(), Duration> {
    rate.check()
        .map_err(|e| e.retry_after().unwrap_or(Duration::MAX))
}

/// The throttle's admission, out of line as the rate limit's is.
#[cold]
#[inline(never)]
fn admit_throttle<C: Clock>(throttle: &AdaptiveThrottle<C>) -> Result<u64, Throttled> {
    throttle.admit()
}

/// What the attempt's end means to the throttle: the breaker's success is
/// an accept, its failure (the call timeout included) is not, and an
/// attempt that recorded nothing (refused by another layer, cut by the
/// caller's budget, cancelled) takes its request back.
#[cold]
#[inline(never)]
fn report_throttle<C: Clock>(throttle: Option<&AdaptiveThrottle<C>>, epoch: u64, outcome: Outcome) {
    if let Some(throttle) = throttle {
        let response = match outcome {
            Outcome::Success => Response::Accepted,
            Outcome::Failure => Response::Overloaded,
            Outcome::Ignored => Response::Ignored,
        };
        throttle.finish(epoch, response);
    }
}

/// The policy's error for a slot that was not had.
fn slot_refusal<E>(e: AcquireError) -> ErrorKind<E> {
    match e {
        AcquireError::Closed => ErrorKind::BulkheadClosed,
        _ => ErrorKind::BulkheadFull,
    }
}

/// Starts the call if it is not started yet, and polls it.
fn poll_call<D: Dispatch>(
    dispatch: &mut D,
    mut fut: Pin<&mut Option<D::Future>>,
    cx: &mut Context<'_>,
) -> Poll<OutputOf<D>> {
    if fut.is_none() {
        match core::task::ready!(dispatch.poll_dispatch(cx)) {
            Ok(started) => fut.set(Some(started)),
            Err(output) => return Poll::Ready(output),
        }
    }
    fut.as_pin_mut().expect("started just above").poll(cx)
}

impl<R: Handle, D: Dispatch, K> fmt::Debug for PolicyCall<R, D, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyCall")
            .field("stage", &self.stage)
            .field("slot_held", &self.slot.held)
            .field("running", &self.fut.is_some())
            .finish_non_exhaustive()
    }
}
