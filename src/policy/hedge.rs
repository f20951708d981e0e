//! Hedged calls: hedge ⊃ rate limit ⊃ bulkhead ⊃ breaker ⊃ deadline, each
//! attempt through the whole policy, polled together in one future.

use core::fmt;
use core::future::Future;
use core::ops::Deref;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::call::{Dispatch, Handle, PolicyCall, SleepOf};
use super::error::{Error, ErrorKind};
use super::Policy;
use crate::breaker::{Classify, ErrIsFailure, Outcome, WindowStorage};
use crate::clock::{Clock, Instant, Timer};
use crate::deadline::Deadline;
use crate::hedge::{Hedge, HedgeOutcome, MAX_HEDGES};

/// Attempts one hedged call has room for: the first and up to
/// [`MAX_HEDGES`] hedges.
const ATTEMPTS: usize = 1 + MAX_HEDGES as usize;

impl<C, const N: usize, W: WindowStorage, B> Policy<C, N, W, B> {
    /// Like [`call`](Self::call), for a call that is safe to make more
    /// than once, hedged by `hedge`: one attempt starts; if it has not
    /// answered by the hedge delay, another starts (up to the config's
    /// `max_hedges`, one delay apart), and the first acceptable answer
    /// wins. The others are cancelled by being dropped.
    ///
    /// - **Each attempt goes through the whole policy** on its own: its own
    ///   cell of the rate limit and throttle, its own bulkhead slot, the
    ///   breaker, its own call timeout. The first attempt waits for a slot
    ///   as [`call`](Self::call) does; a hedge never waits: one that finds
    ///   the bulkhead full, the breaker open or the limit reached is simply
    ///   not sent (counted as `not_sent_*`), and the attempts in flight go
    ///   on.
    /// - **The delay** is the config's fixed one, or its percentile of the
    ///   hedge's histogram read when the call starts, counted from the
    ///   first attempt's start (its slot taken and its call made). With a
    ///   percentile and fewer samples than `min_samples`, the call is not
    ///   hedged.
    /// - **The budget**: each hedge takes a token of the hedge budget when
    ///   it is due (given back if the policy does not send it); an empty
    ///   budget sends no new hedge and cancels nothing in flight. Each
    ///   successful call refills it.
    /// - **The request's deadline** ([`within`](Hedging::within)) bounds
    ///   every attempt, and no hedge starts at or past it.
    /// - **Acceptable** is what the classifier calls a
    ///   [`Success`](Outcome::Success) (or [`Ignored`](Outcome::Ignored)):
    ///   a failed attempt is not the answer while another is in flight;
    ///   when the last one in flight fails, its error is the call's. A
    ///   failure before any hedge is due ends the call: hedging is for
    ///   slowness, retrying failures is [`call_idempotent`](Self::call_idempotent)'s.
    /// - **Accounting**: an attempt cancelled because another answered
    ///   records nothing anywhere — not a failure, not a slow call for the
    ///   breaker, no outcome for the throttle — and gives its slot back. The
    ///   histogram gets one sample per call (see [`Hedge`]).
    ///
    /// `make` is called once per attempt sent. Everything lives in the
    /// returned future: no allocation, no task spawned, on any [`Timer`].
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call): the first attempt's refusal, or the last
    /// attempt's error when none answered.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops every attempt in flight, each as dropping a
    /// [`PolicyCall`] does (its slot back, nothing recorded); hedges in
    /// flight count as lost.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::future::IntoFuture;
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock, Timer};
    /// use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let search: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let hedge = Hedge::new("search", HedgeConfig::builder()
    ///     .delay(HedgeDelay::Fixed(Duration::from_millis(20)))
    ///     .build()
    ///     .unwrap());
    ///
    /// // The first replica takes 500 ms, the second 5 ms.
    /// let replica = core::cell::Cell::new(0);
    /// let call = search.call_hedged(&hedge, || {
    ///     replica.set(replica.get() + 1);
    ///     let (clock, ms) = (&clock, if replica.get() == 1 { 500 } else { 5 });
    ///     async move {
    ///         clock.sleep_until(clock.now() + Duration::from_millis(ms)).await;
    ///         Ok::<_, ()>(ms)
    ///     }
    /// });
    /// let mut call = core::pin::pin!(call.into_future());
    /// for _ in 0..25 {
    ///     assert!(futures_lite::future::poll_once(call.as_mut()).await.is_none());
    ///     clock.advance(Duration::from_millis(1));
    /// }
    /// // The hedge went out at 20 ms and answered at 25 ms.
    /// assert_eq!(call.await, Ok(5));
    /// assert_eq!(hedge.metrics().won, 1);
    /// assert_eq!(search.bulkhead().in_flight(), 0); // the loser's slot is back
    /// # });
    /// ```
    pub fn call_hedged<'h, F, Fut, T, E>(
        &'h self,
        hedge: &'h Hedge,
        make: F,
    ) -> Hedging<&'h Hedge, &'h Self, MakeEach<F>, ErrIsFailure>
    where
        C: Timer,
        B: Clock,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        Hedging {
            hedge,
            policy: self,
            budget: None,
            dispatch: MakeEach::new(make),
            classify: ErrIsFailure,
        }
    }
}

/// Starts each attempt of a hedged call by calling the closure, and lends
/// it back once called, for the next one: the `D` of the [`HedgedCall`]
/// that [`Policy::call_hedged`] makes.
///
/// # Examples
///
/// ```
/// use core::future::{IntoFuture, Ready};
/// use watertight::breaker::ErrIsFailure;
/// use watertight::clock::ManualClock;
/// use watertight::hedge::{Hedge, HedgeConfig};
/// use watertight::policy::{HedgedCall, MakeEach, Policy, PolicyConfig};
///
/// type Lookup<'p> = HedgedCall<
///     &'p Hedge,
///     &'p Policy<&'p ManualClock>,
///     MakeEach<fn() -> Ready<Result<u32, ()>>>,
///     ErrIsFailure,
/// >;
/// let clock = ManualClock::new();
/// let p = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
/// let hedge = Hedge::new("stock", HedgeConfig::DEFAULT);
/// let make: fn() -> Ready<Result<u32, ()>> = || core::future::ready(Ok(7));
/// let call: Lookup<'_> = p.call_hedged(&hedge, make).into_future();
/// assert_eq!(futures_lite::future::block_on(call), Ok(7));
/// ```
#[derive(Debug)]
pub struct MakeEach<F> {
    make: Option<F>,
    called: bool,
}

impl<F> MakeEach<F> {
    fn new(make: F) -> Self {
        MakeEach {
            make: Some(make),
            called: false,
        }
    }
}

mod sealed {
    /// A [`Dispatch`](crate::policy::call::Dispatch) that the attempts of a
    /// hedged call take turns with: it gives back what the next attempt
    /// needs (the closure; the service and the request) once this one has
    /// made its call, or once it is over.
    pub trait Relend: crate::policy::call::Dispatch + Sized {
        /// Whether this attempt has made its call.
        #[doc(hidden)]
        fn called(&self) -> bool;
        /// What the next attempt needs, if this one has made its call or
        /// `over`; `None` while it still needs it.
        #[doc(hidden)]
        fn lend_back(&mut self, over: bool) -> Option<Self>;
    }
}
pub(crate) use sealed::Relend;

impl<F: FnMut() -> Fut, Fut: Future> Relend for MakeEach<F> {
    fn called(&self) -> bool {
        self.called
    }

    fn lend_back(&mut self, over: bool) -> Option<Self> {
        if self.called || over {
            self.make.take().map(MakeEach::new)
        } else {
            None
        }
    }
}

impl<F: FnMut() -> Fut, Fut: Future> Dispatch for MakeEach<F> {
    type Future = Fut;
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self
            .make
            .as_mut()
            .expect("an attempt holds the closure until it calls it");
        self.called = true;
        Poll::Ready(Ok(make()))
    }
}

type Attempt<R, D, K> = PolicyCall<R, D, K>;

pin_project_lite::pin_project! {
    /// The future of [`Policy::call_hedged`] (its [`Hedging`] awaited): the
    /// attempts, up to `1 + MAX_HEDGES`, held inline and polled together,
    /// and the timer of the next hedge. No allocation, no spawned task.
    ///
    /// # Cancel safety
    ///
    /// See [`Policy::call_hedged`].
    ///
    /// # Examples
    ///
    /// Named, so it can sit in a struct without a box: see [`MakeEach`].
    ///
    /// ```
    /// use core::future::IntoFuture;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
    /// let call = p.call_hedged(&hedge, || async { Ok::<_, ()>(1) }).into_future();
    /// assert_eq!(p.bulkhead().in_flight(), 0); // nothing taken before the first poll
    /// assert_eq!(futures_lite::future::block_on(call), Ok(1));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct HedgedCall<G: Deref<Target = Hedge>, R: Handle, D: Dispatch, K> {
        hedge: G,
        policy: R,
        budget: Option<Instant>,
        classify: K,
        // The starter, between attempts (lent to each until it calls it).
        next: Option<D>,
        begun: bool,
        // This call's hedge delay (`None`: not hedged), decided at its start.
        delay: Option<Duration>,
        // Hedges due so far, sent or not.
        due: u8,
        // When the first attempt made its call.
        started: Option<Instant>,
        #[pin]
        a0: Option<Attempt<R, D, K>>,
        #[pin]
        a1: Option<Attempt<R, D, K>>,
        #[pin]
        a2: Option<Attempt<R, D, K>>,
        #[pin]
        a3: Option<Attempt<R, D, K>>,
        #[pin]
        timer: Option<SleepOf<R>>,
    }

    impl<G: Deref<Target = Hedge>, R: Handle, D: Dispatch, K> PinnedDrop for HedgedCall<G, R, D, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // Hedges still out when the caller gives up: lost. The
            // attempts themselves are dropped next, recording nothing.
            for hedge in [this.a1.is_some(), this.a2.is_some(), this.a3.is_some()] {
                if hedge {
                    this.hedge.count(HedgeOutcome::Lost);
                }
            }
        }
    }
}

impl<G: Deref<Target = Hedge>, R: Handle, D: Dispatch, K> HedgedCall<G, R, D, K> {
    pub(crate) fn new(
        hedge: G,
        policy: R,
        budget: Option<Instant>,
        dispatch: D,
        classify: K,
    ) -> Self {
        HedgedCall {
            hedge,
            policy,
            budget,
            classify,
            next: Some(dispatch),
            begun: false,
            delay: None,
            due: 0,
            started: None,
            a0: None,
            a1: None,
            a2: None,
            a3: None,
            timer: None,
        }
    }
}

/// A hedged call, before it starts: [`Policy::call_hedged`]'s value. Set
/// its options, then `.await` it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
/// use watertight::hedge::{Hedge, HedgeConfig};
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::Outcome;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
/// let request = Deadline::after(&clock, Duration::from_millis(300));
/// let r = p
///     .call_hedged(&hedge, || async { Err::<(), u16>(404) })
///     .within(&request)
///     .classify(|r: &Result<(), u16>| match r {
///         Err(404) | Ok(()) => Outcome::Success, // an answer
///         Err(_) => Outcome::Failure,
///     })
///     .await;
/// assert_eq!(r.unwrap_err().into_inner(), Some(404));
/// # });
/// ```
#[must_use = "a hedged call does nothing until it is awaited"]
pub struct Hedging<G, R: Handle, D, K> {
    hedge: G,
    policy: R,
    budget: Option<Instant>,
    dispatch: D,
    classify: K,
}

impl<G: Deref<Target = Hedge>, R: Handle, D, K> fmt::Debug for Hedging<G, R, D, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedging")
            .field("system", &self.hedge.name())
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<G, R: Handle, D, K> Hedging<G, R, D, K> {
    /// Within a request budget: every attempt is cut at its end, and no
    /// hedge starts at or past it.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::future::IntoFuture;
    /// use core::time::Duration;
    /// use watertight::clock::{Clock, ManualClock, Timer};
    /// use watertight::deadline::Deadline;
    /// use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
    /// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let config = HedgeConfig::builder().delay(HedgeDelay::Fixed(Duration::from_millis(50))).build().unwrap();
    /// let hedge = Hedge::new("search", config);
    /// // 40 ms of budget: the hedge would be due at 50 ms, so none is sent.
    /// let request = Deadline::after(&clock, Duration::from_millis(40));
    /// let mut call = core::pin::pin!(p
    ///     .call_hedged(&hedge, || async { (&clock).sleep_until(clock.now() + Duration::from_secs(1)).await; Ok::<_, ()>(()) })
    ///     .within(&request)
    ///     .into_future());
    /// assert!(futures_lite::future::poll_once(call.as_mut()).await.is_none());
    /// clock.advance(Duration::from_millis(40));
    /// assert_eq!(*call.await.unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    /// assert_eq!(hedge.metrics().sent(), 0);
    /// # });
    /// ```
    pub fn within(mut self, budget: &Deadline<R::Clock>) -> Self {
        self.budget = Some(budget.instant());
        self
    }

    /// With a classifier (called once per attempt that ends, on a clone:
    /// keep it pure). What it calls a [`Failure`](Outcome::Failure) is not
    /// an answer.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock;
    /// # use watertight::hedge::{Hedge, HedgeConfig};
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let hedge = Hedge::new("search", HedgeConfig::DEFAULT);
    /// let r = p
    ///     .call_hedged(&hedge, || async { Ok::<u16, ()>(503) })
    ///     .classify(|r: &Result<u16, ()>| if matches!(r, Ok(503)) { Outcome::Failure } else { Outcome::Success })
    ///     .await;
    /// assert_eq!(r, Ok(503)); // the only attempt's answer, a failure for the breaker
    /// assert_eq!(p.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> Hedging<G, R, D, K2> {
        Hedging {
            hedge: self.hedge,
            policy: self.policy,
            budget: self.budget,
            dispatch: self.dispatch,
            classify,
        }
    }
}

impl<G, R, D, T, E, K> core::future::IntoFuture for Hedging<G, R, D, K>
where
    G: Deref<Target = Hedge>,
    R: Handle + Clone,
    D: Relend,
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E> + Clone,
{
    type Output = Result<T, Error<E>>;
    type IntoFuture = HedgedCall<G, R, D, K>;

    fn into_future(self) -> Self::IntoFuture {
        HedgedCall::new(
            self.hedge,
            self.policy,
            self.budget,
            self.dispatch,
            self.classify,
        )
    }
}

impl<G: Deref<Target = Hedge>, R: Handle, D: Dispatch, K> fmt::Debug for HedgedCall<G, R, D, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgedCall")
            .field("system", &self.hedge.name())
            .field("delay", &self.delay)
            .field("hedges_due", &self.due)
            .field(
                "in_flight",
                &[
                    self.a0.is_some(),
                    self.a1.is_some(),
                    self.a2.is_some(),
                    self.a3.is_some(),
                ]
                .iter()
                .filter(|x| **x)
                .count(),
            )
            .finish_non_exhaustive()
    }
}

/// Whether `kind` is a refusal by the policy's own layers before anything
/// was sent: a hedge with it was not sent.
fn not_sent<E>(kind: &ErrorKind<E>) -> Option<HedgeOutcome> {
    match kind {
        ErrorKind::BulkheadFull | ErrorKind::BulkheadClosed => Some(HedgeOutcome::NotSentBulkhead),
        ErrorKind::CircuitOpen(_) => Some(HedgeOutcome::NotSentBreaker),
        ErrorKind::RateLimited { .. } | ErrorKind::Throttled(_) => {
            Some(HedgeOutcome::NotSentLimited)
        }
        _ => None,
    }
}

type Slots<'a, R, D, K> = [Pin<&'a mut Option<Attempt<R, D, K>>>; ATTEMPTS];

impl<G, R, D, T, E, K> Future for HedgedCall<G, R, D, K>
where
    G: Deref<Target = Hedge>,
    R: Handle + Clone,
    D: Relend,
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E> + Clone,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let hedge: &Hedge = this.hedge;
        let handle: &R = this.policy;
        let clock = handle.parts().clock;
        let mut slots: Slots<'_, R, D, K> = [this.a0, this.a1, this.a2, this.a3];
        if !*this.begun {
            *this.begun = true;
            *this.delay = hedge.delay();
            let first = this.next.take().expect("the starter is there at the start");
            slots[0].set(Some(PolicyCall::new(
                handle.clone(),
                *this.budget,
                first,
                this.classify.clone(),
            )));
        }
        let mut run = Run {
            hedge,
            clock,
            started: this.started,
            next: this.next,
        };

        // 1. The attempts in flight.
        for i in 0..ATTEMPTS {
            let Some(call) = slots[i].as_mut().as_pin_mut() else {
                continue;
            };
            // The first attempt's start: read before the poll that makes
            // its call (its slot may be granted in this very poll).
            let before = (i == 0 && run.started.is_none()).then(|| clock.now());
            let polled = run.poll_attempt(call, before, cx);
            if let Poll::Ready((out, verdict)) = polled {
                slots[i].set(None);
                if let Some(out) = run.finished(&mut slots, i, out, verdict) {
                    return Poll::Ready(out);
                }
            }
        }

        // 2. The hedges, each when due. Something is in flight here: an
        // attempt that ended with nothing else in flight has returned.
        loop {
            let (Some(delay), Some(started)) = (*this.delay, *run.started) else {
                return Poll::Pending;
            };
            // Hedge n is due n delays after the first attempt's start.
            let at = started.saturating_add(delay.saturating_mul(u32::from(*this.due) + 1));
            if *this.due >= hedge.config().max_hedges() || this.budget.is_some_and(|end| at >= end)
            {
                return Poll::Pending;
            }
            if this.timer.is_none() {
                this.timer.set(Some(clock.sleep_until(at)));
            }
            let timer = this.timer.as_mut().as_pin_mut().expect("armed just above");
            if timer.poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.timer.set(None);
            *this.due += 1;
            // The timer may fire late: still never a start past the deadline.
            if this.budget.is_some_and(|end| clock.now() >= end) {
                return Poll::Pending;
            }
            if !hedge.budget().try_spend() {
                hedge.count(HedgeOutcome::NotSentBudget);
                continue;
            }
            let make = run
                .next
                .take()
                .expect("the starter is back once the first attempt has made its call");
            let i = usize::from(*this.due);
            slots[i].set(Some(
                PolicyCall::new(handle.clone(), *this.budget, make, this.classify.clone())
                    .without_slot_wait(),
            ));
            let call = slots[i].as_mut().as_pin_mut().expect("set just above");
            if let Poll::Ready((out, verdict)) = run.poll_attempt(call, None, cx) {
                slots[i].set(None);
                let refused = match (&out, verdict) {
                    (Err(e), None) => not_sent(e.kind()),
                    _ => None,
                };
                if let Some(why) = refused {
                    hedge.budget().refund();
                    hedge.count(why);
                    continue;
                }
                if let Some(out) = run.finished(&mut slots, i, out, verdict) {
                    return Poll::Ready(out);
                }
            }
        }
    }
}

/// What one poll of a hedged call works with.
struct Run<'a, C, D> {
    hedge: &'a Hedge,
    clock: &'a C,
    started: &'a mut Option<Instant>,
    next: &'a mut Option<D>,
}

impl<C: Clock, D: Relend> Run<'_, C, D> {
    /// Polls one attempt; takes its closure back once it has called it (or
    /// once it is over), and notes the first attempt's start (`before`).
    fn poll_attempt<R, K, T, E>(
        &mut self,
        mut call: Pin<&mut Attempt<R, D, K>>,
        before: Option<Instant>,
        cx: &mut Context<'_>,
    ) -> Poll<super::call::Settled<T, E>>
    where
        R: Handle,
        D::Future: Future<Output = Result<T, E>>,
        K: Classify<T, E>,
    {
        let polled = call.as_mut().poll_settled(cx);
        let dispatch = call.dispatch_mut();
        if let Some(t) = before {
            if dispatch.called() {
                *self.started = Some(t);
            }
        }
        if self.next.is_none() {
            *self.next = dispatch.lend_back(polled.is_ready());
        }
        polled
    }

    /// Attempt `i` ended with `out`: the call's output if it is the answer,
    /// or if nothing else is in flight; `None` to wait for the others.
    fn finished<R: Handle, K, T, E>(
        &mut self,
        slots: &mut Slots<'_, R, D, K>,
        i: usize,
        out: Result<T, Error<E>>,
        verdict: Option<Outcome>,
    ) -> Option<Result<T, Error<E>>> {
        let now = self.started.map(|s| (s, self.clock.now()));
        if i == 0 && verdict.is_some() {
            // The first attempt answered: its latency.
            if let Some((start, now)) = now {
                self.hedge
                    .histogram()
                    .record(now.saturating_duration_since(start));
            }
        }
        if matches!(verdict, Some(Outcome::Success | Outcome::Ignored)) {
            for (j, other) in slots.iter_mut().enumerate() {
                if other.is_none() {
                    continue;
                }
                if j == 0 {
                    // Cancelled: how long it had run, a tail sample.
                    if let Some((start, now)) = now {
                        self.hedge
                            .histogram()
                            .record(now.saturating_duration_since(start));
                    }
                } else {
                    self.hedge.count(HedgeOutcome::Lost);
                }
                // Dropped: its slot back, nothing recorded.
                other.set(None);
            }
            if i > 0 {
                self.hedge.count(HedgeOutcome::Won);
            }
            if verdict == Some(Outcome::Success) {
                self.hedge.budget().succeeded();
            }
            return Some(out);
        }
        if i > 0 {
            self.hedge.count(HedgeOutcome::Lost);
        }
        slots.iter().all(|s| s.is_none()).then_some(out)
    }
}
