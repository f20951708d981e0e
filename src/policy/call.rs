//! The call future: slot, breaker, deadline, in that order, polled as one.

use super::*;

// ---- the call future -------------------------------------------------------

mod sealed {
    use core::future::Future;
    use core::task::{Context, Poll};
    use core::time::Duration;

    use crate::breaker::{Guard, Outcome};
    use crate::bulkhead::Bulkhead;
    use crate::clock::Timer;

    /// The parts of a policy that a [`PolicyCall`](super::PolicyCall) works
    /// with, borrowed from a handle: `&Policy` for `Policy::call` and its
    /// relatives, `Arc<Policy>` for the tower service.
    #[allow(missing_debug_implementations)]
    pub struct Parts<'a, C, B> {
        pub(crate) bulkhead: &'a Bulkhead<C>,
        pub(crate) breaker: &'a B,
        pub(crate) clock: &'a C,
        pub(crate) max_wait: Duration,
        pub(crate) call_timeout: Duration,
        pub(crate) retry: &'a super::Retries,
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
    }

    /// A [`Dispatch`] that can start the next attempt of a retried call:
    /// it gives back, out of the finished attempt's dispatch, what the next
    /// one needs (the closure; the service and the request).
    pub trait Redispatch: Dispatch + Sized {
        #[doc(hidden)]
        fn take_back(&mut self) -> Self;
    }

    /// What the breaker should make of a result.
    pub trait Judge<O> {
        #[doc(hidden)]
        fn judge(self, output: &O) -> Outcome;
    }
}
pub(crate) use sealed::{Dispatch, Handle, Judge, Parts, Redispatch};

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
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self.0.take().expect("a call is made once");
        Poll::Ready(Ok(make()))
    }
}

impl<T, E, K: FnOnce(&Result<T, E>) -> Outcome> Judge<Result<T, E>> for K {
    fn judge(self, output: &Result<T, E>) -> Outcome {
        self(output)
    }
}

/// A bulkhead wait: the acquire futures' core (with its own queue node),
/// kept in the call future.
type SlotWaiter = crate::bulkhead::Waiter;

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
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PolicyCall<R: Handle, D: Dispatch, K> {
        policy: R,
        budget: Option<Instant>,
        dispatch: D,
        classify: Option<K>,
        stage: Stage,
        // The bulkhead: a wait for a slot (idle until one is needed), and
        // whether the slot is held.
        #[pin]
        waiter: SlotWaiter,
        slot_deadline: Instant,
        #[pin]
        slot_sleep: Option<SleepOf<R>>,
        held: bool,
        // The breaker's permit.
        raw: Option<Raw>,
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
            let parts = this.policy.parts();
            this.waiter.cancel(parts.bulkhead);
            if let Some(raw) = take_raw(this.raw) {
                parts.breaker.abandon(raw);
            }
            if core::mem::take(this.held) {
                parts.bulkhead.release(1);
            }
        }
    }
}

impl<R: Handle, D: Dispatch, K> PolicyCall<R, D, K> {
    /// The call's starter, which a retry takes back after the attempt.
    pub(crate) fn dispatch_mut(self: Pin<&mut Self>) -> &mut D {
        self.project().dispatch
    }

    pub(crate) fn new(policy: R, budget: Option<Instant>, dispatch: D, classify: K) -> Self {
        PolicyCall {
            policy,
            budget,
            dispatch,
            classify: Some(classify),
            stage: Stage::Start,
            waiter: SlotWaiter::new(1),
            slot_deadline: Instant::ZERO,
            slot_sleep: None,
            held: false,
            raw: None,
            fut: None,
            sleep: None,
            by_budget: false,
        }
    }
}

impl<R, D, K, T, E> Future for PolicyCall<R, D, K>
where
    R: Handle,
    D: Dispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Judge<Result<T, E>>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Parts {
            bulkhead,
            breaker,
            clock,
            max_wait,
            call_timeout,
            ..
        } = this.policy.parts();
        let name = bulkhead.name();
        let budget = *this.budget;
        let fail = |kind| Poll::Ready(Err(Error::new(name, kind)));

        if *this.stage == Stage::Start {
            // 1. Bulkhead, outside: a free slot at once (no clock read); else
            // a wait of `max_wait`, or what is left of the budget if less.
            let slot = match bulkhead.try_acquire_uncounted() {
                Err(AcquireError::Full) => {
                    let wait = match budget {
                        Some(end) if !max_wait.is_zero() => {
                            max_wait.min(end.saturating_duration_since(clock.now()))
                        }
                        _ => max_wait,
                    };
                    if wait.is_zero() {
                        // Counted as the bulkhead's own refusal.
                        Some(bulkhead.try_acquire())
                    } else {
                        start_wait(bulkhead, wait, this.slot_deadline)
                    }
                }
                // Closed: refused again through the counted path, so the
                // bulkhead counts the refusal (and reports it, with
                // `tracing`) itself.
                Err(AcquireError::Closed) => Some(bulkhead.try_acquire()),
                other => Some(other),
            };
            *this.stage = Stage::Slot;
            match slot {
                None => {}
                Some(Ok(permit)) => {
                    core::mem::forget(permit);
                    *this.held = true;
                }
                Some(Err(e)) => {
                    *this.stage = Stage::Done;
                    return fail(slot_refusal(e));
                }
            }
        }
        if *this.stage == Stage::Slot && !*this.held {
            match poll_wait(
                bulkhead,
                this.waiter.as_mut(),
                *this.slot_deadline,
                this.slot_sleep.as_mut(),
                cx,
            ) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) => *this.held = true,
                Poll::Ready(Err(e)) => {
                    *this.stage = Stage::Done;
                    return fail(slot_refusal(e));
                }
            }
        }
        // The breaker's permit while the call is polled: out of the future
        // (see `breaker::fail_on_unwind`), so a call ready at its first poll
        // never stores it.
        let mut raw = None;
        if *this.stage == Stage::Slot {
            // 2. Breaker, inside: a refusal gives the slot back at once.
            match breaker.acquire_raw() {
                Ok(admitted) => raw = Some(admitted),
                Err(why) => {
                    *this.held = false;
                    bulkhead.release(1);
                    *this.stage = Stage::Done;
                    return fail(ErrorKind::CircuitOpen(why));
                }
            }
            *this.stage = Stage::Call;
            // 3. Deadline, innermost. A budget already spent does not start
            // the call: the system did nothing wrong, so nothing is recorded.
            if let Some(end) = budget {
                if clock.now() >= end {
                    if let Some(raw) = raw {
                        breaker.finish(raw, Outcome::Ignored);
                    }
                    *this.held = false;
                    bulkhead.release(1);
                    *this.stage = Stage::Done;
                    #[cfg(feature = "tracing")]
                    tracing::debug!(
                        target: "watertight::policy",
                        system = name,
                        reason = "deadline_exceeded",
                        by_budget = true,
                        "policy refused a call"
                    );
                    return fail(ErrorKind::DeadlineExceeded);
                }
            }
        }
        assert!(
            *this.stage == Stage::Call,
            "`PolicyCall` polled after completion"
        );

        // The call, polled once before a timer is armed. A panic in it is a
        // failure, recorded as it unwinds (see `breaker::fail_on_unwind`).
        let raw = raw.or_else(|| take_raw(this.raw));
        let polled = fail_on_unwind(breaker, raw, || {
            poll_call(this.dispatch, this.fut.as_mut(), cx)
        });
        let result = match polled {
            Poll::Ready(result) => result,
            Poll::Pending => {
                *this.raw = raw;
                if this.sleep.is_none() {
                    let now = clock.now();
                    let limit = match budget {
                        Some(end) if end.saturating_duration_since(now) < call_timeout => {
                            *this.by_budget = true;
                            end.saturating_duration_since(now)
                        }
                        _ => call_timeout,
                    };
                    this.sleep
                        .set(Some(clock.sleep_until(now.saturating_add(limit))));
                }
                let timer = this.sleep.as_mut().as_pin_mut().expect("armed just above");
                if timer.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Out of time: the call is dropped now. Out of
                // `call_timeout`, a failure of the system; cut short by the
                // caller's budget, nothing is recorded.
                this.fut.set(None);
                this.sleep.set(None);
                let outcome = if *this.by_budget {
                    Outcome::Ignored
                } else {
                    Outcome::Failure
                };
                if let Some(raw) = take_raw(this.raw) {
                    breaker.finish(raw, outcome);
                }
                *this.held = false;
                bulkhead.release(1);
                *this.stage = Stage::Done;
                #[cfg(feature = "tracing")]
                tracing::debug!(
                    target: "watertight::policy",
                    system = name,
                    reason = "deadline_exceeded",
                    by_budget = *this.by_budget,
                    "policy call ran out of time"
                );
                return fail(ErrorKind::DeadlineExceeded);
            }
        };
        this.fut.set(None);
        this.sleep.set(None);
        let classify = this.classify.take().expect("classifier taken once");
        let outcome = fail_on_unwind(breaker, raw, || classify.judge(&result));
        if let Some(raw) = raw {
            breaker.finish(raw, outcome);
        }
        *this.held = false;
        bulkhead.release(1);
        *this.stage = Stage::Done;
        Poll::Ready(result.map_err(|e| Error::new(name, ErrorKind::Call(e))))
    }
}

/// Starts a slot wait of `wait`; `None` means "wait".
fn start_wait<'b, C: Timer>(
    bulkhead: &'b Bulkhead<C>,
    wait: Duration,
    deadline: &mut Instant,
) -> Option<Result<crate::Permit<'b, C>, AcquireError>> {
    *deadline = bulkhead.clock().now().saturating_add(wait);
    None
}

/// Polls a slot wait; `Ready(Ok(()))` means the slot is held.
fn poll_wait<C: Timer>(
    bulkhead: &Bulkhead<C>,
    waiter: Pin<&mut SlotWaiter>,
    deadline: Instant,
    sleep: Pin<&mut Option<C::Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), AcquireError>> {
    crate::bulkhead::poll_until(bulkhead, waiter, deadline, sleep, cx)
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
            .field("slot_held", &self.held)
            .field("running", &self.fut.is_some())
            .finish_non_exhaustive()
    }
}
