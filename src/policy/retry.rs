//! Retries: retry ⊃ rate limit ⊃ bulkhead ⊃ breaker ⊃ deadline.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::call::{Dispatch, Handle, PolicyCall, Redispatch, SleepOf};
use super::error::{Error, ErrorKind};
use super::{Policy, Retries};
use crate::breaker::{Classify, ErrIsFailure, Outcome, WindowStorage};
use crate::clock::{Clock, Instant, Timer};
use crate::deadline::Deadline;
use crate::retry::{RetryBudget, RetryConfig};
use crate::sync::Ordering;

// ---------------------------------------------------------------------------
// Retries: retry ⊃ rate limit ⊃ bulkhead ⊃ breaker ⊃ deadline.

/// How many retries a policy has made, and why, and how often its budget
/// said no ([`Policy::retry_metrics`]).
///
/// # Examples
///
/// ```
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
///
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let m = p.retry_metrics();
/// assert_eq!((m.after_failure, m.after_timeout, m.budget_exhausted), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetryMetrics {
    /// Retries of a call that failed.
    pub after_failure: usize,
    /// Retries of a call that ran out of its call timeout.
    pub after_timeout: usize,
    /// Failed calls the budget did not let retry.
    pub budget_exhausted: usize,
}

impl<C, const N: usize, W, B> Policy<C, N, W, B> {
    /// The retry counts (see [`RetryMetrics`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// ```
    pub fn retry_metrics(&self) -> RetryMetrics {
        let r = &self.retry;
        RetryMetrics {
            after_failure: r.after_failure.load(Ordering::Relaxed),
            after_timeout: r.after_timeout.load(Ordering::Relaxed),
            budget_exhausted: r.budget_exhausted.load(Ordering::Relaxed),
        }
    }

    /// The system's retry budget, shared by every idempotent call through
    /// this policy.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_budget().tokens(), 10.0);
    /// ```
    pub fn retry_budget(&self) -> &RetryBudget {
        &self.retry.budget
    }

    /// The retry config.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::clock::ManualClock; use watertight::policy::{Policy, PolicyConfig};
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// assert_eq!(p.retry_config().max_attempts(), 2);
    /// ```
    pub fn retry_config(&self) -> &RetryConfig {
        &self.retry.config
    }
}

impl<C, const N: usize, W: WindowStorage, B> Policy<C, N, W, B> {
    /// Like [`call`](Self::call), for a call that is safe to make twice:
    /// a failure or a call timeout is retried, each attempt through the
    /// whole policy again (its own slot, the breaker, its own timeout), up
    /// to the config's attempts, after a backoff with full jitter, while
    /// the retry budget allows. A refusal by the policy (rate limited,
    /// bulkhead full, breaker open, budget spent) is never retried, nor a
    /// success. Each attempt takes a cell of the policy's rate limit, if it
    /// has one: a retry is a request to the system.
    ///
    /// `make` is called once per attempt. Add a request budget with
    /// [`within`](Retrying::within), a classifier with
    /// [`classify`](Retrying::classify), a server's `Retry-After` with
    /// [`retry_after`](Retrying::retry_after).
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call): the last attempt's error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the attempt in flight (as dropping a
    /// [`PolicyCall`] does: its slot goes back, the breaker records
    /// nothing) or the backoff sleep (no slot is held during it), and
    /// records nothing in the budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::cell::Cell;
    /// use core::future::IntoFuture;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let tries = Cell::new(0);
    /// let mut call = core::pin::pin!(p.call_idempotent(|| {
    ///     tries.set(tries.get() + 1);
    ///     let n = tries.get();
    ///     async move { if n == 1 { Err("reset by peer") } else { Ok("hits") } }
    /// }).into_future());
    /// // The first attempt fails; the retry waits its backoff (at most 50 ms).
    /// assert!(futures_lite::future::poll_once(call.as_mut()).await.is_none());
    /// clock.advance(core::time::Duration::from_millis(50));
    /// assert_eq!(call.await, Ok("hits"));
    /// assert_eq!(tries.get(), 2);
    /// # });
    /// ```
    pub fn call_idempotent<F, Fut, T, E>(
        &self,
        make: F,
    ) -> Retrying<'_, C, N, W, B, F, ErrIsFailure, NoHint>
    where
        C: Timer,
        B: Clock,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        Retrying {
            policy: self,
            budget: None,
            make,
            classify: ErrIsFailure,
            hint: NoHint,
        }
    }
}

/// No `Retry-After` hint: the backoff is the config's.
///
/// # Examples
///
/// ```
/// use watertight::policy::{NoHint, RetryHint};
/// assert_eq!(RetryHint::<&str>::retry_after(&mut NoHint, &"busy"), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHint;

/// A hint from the call's error: how long to wait before the retry.
/// Any `FnMut(&E) -> Option<Duration>` is one.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::policy::RetryHint;
///
/// let mut hint = |status: &u16| (*status == 503).then_some(Duration::from_secs(2));
/// assert_eq!(hint.retry_after(&503), Some(Duration::from_secs(2)));
/// assert_eq!(hint.retry_after(&500), None);
/// ```
pub trait RetryHint<E> {
    /// `Some(d)`: wait `d` (a server's `Retry-After`) instead of the
    /// jittered backoff. `None`: the backoff.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::policy::RetryHint;
    /// let mut never = |_: &()| None::<Duration>;
    /// assert_eq!(never.retry_after(&()), None);
    /// ```
    fn retry_after(&mut self, error: &E) -> Option<Duration>;
}

impl<E> RetryHint<E> for NoHint {
    fn retry_after(&mut self, _: &E) -> Option<Duration> {
        None
    }
}

impl<E, H: FnMut(&E) -> Option<Duration>> RetryHint<E> for H {
    fn retry_after(&mut self, error: &E) -> Option<Duration> {
        self(error)
    }
}

/// A retrying call, before it starts: [`Policy::call_idempotent`]'s value.
/// Set its options, then `.await` it.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::Outcome;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let request = Deadline::after(&clock, Duration::from_millis(1500));
/// let hits = p
///     .call_idempotent(|| async { Ok::<_, u16>("hits") })
///     .within(&request)
///     .classify(|r: &Result<&str, u16>| match r {
///         Err(404) => Outcome::Success, // the system answered
///         Err(_) => Outcome::Failure,
///         Ok(_) => Outcome::Success,
///     })
///     .retry_after(|status: &u16| (*status == 503).then(|| Duration::from_secs(1)))
///     .await;
/// assert_eq!(hits, Ok("hits"));
/// # });
/// ```
#[must_use = "a retrying call does nothing until it is awaited"]
pub struct Retrying<'p, C, const N: usize, W, B, F, K, H> {
    policy: &'p Policy<C, N, W, B>,
    budget: Option<Instant>,
    make: F,
    classify: K,
    hint: H,
}

impl<C, const N: usize, W, B, F, K, H> fmt::Debug for Retrying<'_, C, N, W, B, F, K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrying")
            .field("system", &self.policy.bulkhead.name())
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<'p, C, const N: usize, W, B, F, K, H> Retrying<'p, C, N, W, B, F, K, H> {
    /// Within a request budget: no attempt runs past it, no backoff sleeps
    /// past it, and no attempt starts with less than the config's
    /// [`min_attempt_time`](RetryConfig::min_attempt_time) of it left.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let request = Deadline::after(&clock, Duration::from_millis(30));
    /// // 30 ms left is under the 50 ms an attempt needs: no retry.
    /// let r = p.call_idempotent(|| async { Err::<(), _>("reset") }).within(&request).await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some("reset"));
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// # });
    /// ```
    pub fn within(mut self, budget: &Deadline<C>) -> Self
    where
        C: Clock,
    {
        self.budget = Some(budget.instant());
        self
    }

    /// With a classifier (called once per attempt, on a clone: keep it
    /// pure). Only what it calls a [`Failure`](Outcome::Failure) is retried.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// // A 404 is an answer, not a failure: not retried.
    /// let r = p
    ///     .call_idempotent(|| async { Err::<(), u16>(404) })
    ///     .classify(|r: &Result<(), u16>| if matches!(r, Err(404)) { Outcome::Success } else { Outcome::Failure })
    ///     .await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some(404));
    /// assert_eq!(p.retry_metrics().after_failure, 0);
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> Retrying<'p, C, N, W, B, F, K2, H> {
        Retrying {
            policy: self.policy,
            budget: self.budget,
            make: self.make,
            classify,
            hint: self.hint,
        }
    }

    /// With a hint from the error: `Some(d)` waits `d` before the retry
    /// (a server's `Retry-After`) instead of the jittered backoff; still
    /// never past the request budget.
    ///
    /// # Examples
    ///
    /// ```
    /// # #![allow(unused_imports)]
    /// # use core::time::Duration;
    /// # use watertight::clock::ManualClock;
    /// # use watertight::deadline::Deadline;
    /// # use watertight::policy::{Policy, PolicyConfig};
    /// # use watertight::Outcome;
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("search", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let request = Deadline::after(&clock, Duration::from_secs(1));
    /// // The server says: come back in 5 s. The request cannot wait that long.
    /// let r = p
    ///     .call_idempotent(|| async { Err::<(), u16>(503) })
    ///     .retry_after(|_: &u16| Some(Duration::from_secs(5)))
    ///     .within(&request)
    ///     .await;
    /// assert_eq!(r.unwrap_err().into_inner(), Some(503));
    /// # });
    /// ```
    pub fn retry_after<H2>(self, hint: H2) -> Retrying<'p, C, N, W, B, F, K, H2> {
        Retrying {
            policy: self.policy,
            budget: self.budget,
            make: self.make,
            classify: self.classify,
            hint,
        }
    }
}

impl<'p, C, const N: usize, W, B, F, Fut, T, E, K, H> core::future::IntoFuture
    for Retrying<'p, C, N, W, B, F, K, H>
where
    C: Timer,
    W: WindowStorage,
    B: Clock,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    K: Classify<T, E> + Clone,
    H: RetryHint<E>,
{
    type Output = Result<T, Error<E>>;
    type IntoFuture = RetryCall<&'p Policy<C, N, W, B>, MakeMut<F>, K, H>;

    fn into_future(self) -> Self::IntoFuture {
        RetryCall::new(
            self.policy,
            self.budget,
            MakeMut(Some(self.make)),
            self.classify,
            self.hint,
        )
    }
}

/// Starts an attempt by calling the closure, which it keeps (so that the
/// retry can take it back for the next attempt): the `D` of the
/// [`RetryCall`] that [`Policy::call_idempotent`] makes.
///
/// # Examples
///
/// ```
/// use core::future::{IntoFuture, Ready};
/// use watertight::clock::ManualClock;
/// use watertight::futures::RetryCall;
/// use watertight::policy::{MakeMut, NoHint, Policy, PolicyConfig};
///
/// type Lookup<'p> = RetryCall<
///     &'p Policy<&'p ManualClock>,
///     MakeMut<fn() -> Ready<Result<u32, ()>>>,
///     watertight::breaker::ErrIsFailure,
///     NoHint,
/// >;
/// let clock = ManualClock::new();
/// let p = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
/// let call: Lookup<'_> = p.call_idempotent((|| core::future::ready(Ok(7))) as fn() -> _).into_future();
/// assert_eq!(futures_lite::future::block_on(call), Ok(7));
/// ```
#[derive(Debug)]
pub struct MakeMut<F>(Option<F>);

impl<F: FnMut() -> Fut, Fut: Future> Dispatch for MakeMut<F> {
    type Future = Fut;
    fn poll_dispatch(&mut self, _: &mut Context<'_>) -> Poll<Result<Fut, Fut::Output>> {
        let make = self
            .0
            .as_mut()
            .expect("the closure is back before each attempt");
        Poll::Ready(Ok(make()))
    }
}

impl<F: FnMut() -> Fut, Fut: Future> Redispatch for MakeMut<F> {
    fn take_back(&mut self) -> Self {
        MakeMut(self.0.take())
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`Retrying`] call (and of the tower
    /// [`IdempotentPolicyService`](crate::tower::IdempotentPolicyService)):
    /// attempts through the policy and the backoff sleeps between them. `R`
    /// reaches the policy, `D` starts each attempt (a closure, or a clone
    /// of a request sent to a tower service), `K` classifies, `H` reads a
    /// `Retry-After` hint.
    ///
    /// # Cancel safety
    ///
    /// See [`Policy::call_idempotent`].
    ///
    /// # Examples
    ///
    /// Named, so it can sit in a struct without a box:
    ///
    /// ```
    /// use core::future::{IntoFuture, Ready};
    /// use watertight::breaker::ErrIsFailure;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{MakeMut, NoHint, Policy, PolicyConfig, RetryCall};
    ///
    /// type Lookup<'p> = RetryCall<
    ///     &'p Policy<&'p ManualClock>,
    ///     MakeMut<fn() -> Ready<Result<u32, ()>>>,
    ///     ErrIsFailure,
    ///     NoHint,
    /// >;
    ///
    /// let clock = ManualClock::new();
    /// let stock = Policy::new("stock", PolicyConfig::builder(2).build().unwrap(), &clock).unwrap();
    /// let make: fn() -> Ready<Result<u32, ()>> = || core::future::ready(Ok(7));
    /// let call: Lookup<'_> = stock.call_idempotent(make).into_future();
    /// assert_eq!(futures_lite::future::block_on(call), Ok(7));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RetryCall<R: Handle, D: Dispatch, K, H> {
        policy: R,
        budget: Option<Instant>,
        classify: K,
        hint: H,
        attempts: u32,
        // What starts the next attempt, between attempts.
        next: Option<D>,
        #[pin]
        attempt: Option<PolicyCall<R, D, K>>,
        #[pin]
        backoff: Option<SleepOf<R>>,
    }
}

impl<R: Handle + Clone, D: Dispatch, K: Clone, H> RetryCall<R, D, K, H> {
    /// The call before its first attempt: nothing is taken until it is
    /// polled.
    pub(crate) fn new(
        policy: R,
        budget: Option<Instant>,
        dispatch: D,
        classify: K,
        hint: H,
    ) -> Self {
        let first = PolicyCall::new(policy.clone(), budget, dispatch, classify.clone());
        RetryCall {
            policy,
            budget,
            classify,
            hint,
            attempts: 1,
            next: None,
            attempt: Some(first),
            backoff: None,
        }
    }
}

impl<R: Handle, D: Dispatch, K, H> fmt::Debug for RetryCall<R, D, K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryCall")
            .field("system", &self.policy.parts().bulkhead.name())
            .field("attempts", &self.attempts)
            .field("backing_off", &self.backoff.is_some())
            .finish_non_exhaustive()
    }
}

/// Why an attempt is retried: the label of `retries_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryReason {
    Failure,
    Timeout,
}

impl<R, D, T, E, K, H> Future for RetryCall<R, D, K, H>
where
    R: Handle + Clone,
    D: Redispatch,
    D::Future: Future<Output = Result<T, E>>,
    K: Classify<T, E> + Clone,
    H: RetryHint<E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Borrowed, not cloned: an `Arc` handle is cloned only for a new attempt.
        let handle: &R = this.policy;
        let parts = handle.parts();
        let (retry, clock) = (parts.retry, parts.clock);
        let name = parts.bulkhead.name();
        loop {
            if let Some(sleep) = this.backoff.as_mut().as_pin_mut() {
                core::task::ready!(sleep.poll(cx));
                this.backoff.set(None);
                *this.attempts += 1;
                let next = this
                    .next
                    .take()
                    .expect("the dispatch is back before each attempt");
                this.attempt.set(Some(PolicyCall::new(
                    handle.clone(),
                    *this.budget,
                    next,
                    this.classify.clone(),
                )));
            }
            let mut call = this
                .attempt
                .as_mut()
                .as_pin_mut()
                .expect("`RetryCall` polled after completion");
            // The attempt's output and the verdict its breaker recorded.
            let (out, verdict) = core::task::ready!(call.as_mut().poll_settled(cx));
            let next = call.dispatch_mut().take_back();
            this.attempt.set(None);

            let budget = *this.budget;
            let Some(reason) = retry.reason(&out, verdict, budget, clock) else {
                return Poll::Ready(out);
            };
            let hint = &mut *this.hint;
            let hinted = || match &out {
                Err(Error {
                    kind: ErrorKind::Call(e),
                    ..
                }) => hint.retry_after(e),
                _ => None,
            };
            let start = retry.backoff(name, reason, *this.attempts, hinted, budget, clock);
            let Some(start) = start else {
                return Poll::Ready(out);
            };
            *this.next = Some(next);
            this.backoff.set(Some(clock.sleep_until(start)));
        }
    }
}

impl Retries {
    /// Why the attempt that ended with `out` (and `verdict`, see
    /// [`Settled`](super::call::Settled)) is to be retried, or `None`: a
    /// success (a token back to the budget), a refusal by the policy's own
    /// layers, or out of the request's `budget`.
    fn reason<T, E, C: Clock>(
        &self,
        out: &Result<T, Error<E>>,
        verdict: Option<Outcome>,
        budget: Option<Instant>,
        clock: &C,
    ) -> Option<RetryReason> {
        match verdict {
            // A result the classifier calls a failure (an error, or an HTTP
            // client's `Ok(503)`) is retried.
            Some(Outcome::Failure) => Some(RetryReason::Failure),
            Some(Outcome::Success) => {
                self.budget.succeeded();
                None
            }
            Some(_) => None,
            // Ended by the policy. Out of the call timeout: retried. Out of
            // the request's budget: nothing to say about the system, and no
            // time to retry. A refusal by the policy's own layers: stop.
            None => match out {
                Err(err) if matches!(err.kind(), ErrorKind::DeadlineExceeded) => {
                    let spent = budget.is_some_and(|end| clock.now() >= end);
                    (!spent).then_some(RetryReason::Timeout)
                }
                _ => None,
            },
        }
    }

    /// When the retry after attempt number `attempts` starts, or `None`
    /// when there is none: out of attempts, no time left in the request's
    /// `budget` after the backoff (the jittered one, or the error's `hint`),
    /// or the retry budget said no. A retryable failure takes its token
    /// whatever comes next; a retry is counted (and, with `tracing`,
    /// reported) by `reason`.
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    fn backoff<C: Clock>(
        &self,
        name: &'static str,
        reason: RetryReason,
        attempts: u32,
        hint: impl FnOnce() -> Option<Duration>,
        budget: Option<Instant>,
        clock: &C,
    ) -> Option<Instant> {
        if attempts >= self.config.max_attempts() {
            self.budget.failed();
            return None;
        }
        let now = clock.now();
        let wait = hint().unwrap_or_else(|| self.jitter.up_to(self.config.backoff_cap(attempts)));
        let start = now.saturating_add(wait);
        if let Some(end) = budget {
            // No backoff sleeps to the budget's end or past it (no attempt
            // could start there), whatever the config's `min_attempt_time`,
            // zero included.
            if start >= end || end.saturating_duration_since(start) < self.config.min_attempt_time()
            {
                self.budget.failed();
                return None;
            }
        }
        if !self.budget.failed_may_retry() {
            self.budget_exhausted.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::debug!(
                target: "watertight::policy",
                system = name,
                "retry budget exhausted: the failed call is not retried"
            );
            return None;
        }
        match reason {
            RetryReason::Failure => &self.after_failure,
            RetryReason::Timeout => &self.after_timeout,
        }
        .fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::info!(
            target: "watertight::policy",
            system = name,
            reason = match reason {
                RetryReason::Failure => "failure",
                RetryReason::Timeout => "timeout",
            },
            attempt = attempts + 1,
            backoff_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "retrying a call"
        );
        Some(start)
    }
}
