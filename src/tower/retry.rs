//! [`IdempotentPolicyLayer`]: a policy layer whose services retry, for
//! requests that are safe to send twice; its service and response future.

use alloc::sync::Arc;
use core::fmt;
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::classify::{Classify, ErrIsFailure};
use super::policy::dispatch;
use crate::breaker::{Inline, WindowStorage};
use crate::clock::{Clock, Timer};
use crate::policy::{self, NoHint, Policy, RetryCall, RetryHint};

/// A [`PolicyLayer`] whose services retry (made by
/// [`PolicyLayer::idempotent`]): for requests that are safe to send twice.
///
/// [`PolicyLayer`]: super::PolicyLayer
/// [`PolicyLayer::idempotent`]: super::PolicyLayer::idempotent
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{IdempotentPolicyLayer, PolicyLayer};
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock).unwrap());
/// let layer: IdempotentPolicyLayer<_, 64> = PolicyLayer::new(search).idempotent();
/// let svc = layer.layer(tower::service_fn(|q: u32| async move { Ok::<_, ()>(q) }));
/// assert_eq!(svc.oneshot(3).await, Ok(3));
/// # });
/// ```
pub struct IdempotentPolicyLayer<
    C,
    const N: usize,
    K = ErrIsFailure,
    W = Inline<N>,
    B = C,
    H = NoHint,
> {
    pub(super) policy: Arc<Policy<C, N, W, B>>,
    pub(super) classify: K,
    pub(super) hint: H,
}

impl<C, const N: usize, K, W, B, H> IdempotentPolicyLayer<C, N, K, W, B, H> {
    /// With a hint from the inner service's error: `Some(d)` waits `d`
    /// before the retry (a server's `Retry-After`) instead of the jittered
    /// backoff, as [`Retrying::retry_after`](crate::policy::Retrying::retry_after)
    /// does. The hint is cloned into each call.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::PolicyLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let config = PolicyConfig::builder(4).call_timeout(Duration::from_secs(5)).build().unwrap();
    /// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock.clone()).unwrap());
    /// let sent = Arc::new(AtomicU32::new(0));
    /// // The error says how long to wait: 2 s, not the backoff.
    /// let layer = PolicyLayer::new(search.clone())
    ///     .idempotent()
    ///     .retry_after(|retry_after_s: &u64| Some(Duration::from_secs(*retry_after_s)));
    /// let svc = layer.layer(tower::service_fn({
    ///     let sent = sent.clone();
    ///     move |q: u32| {
    ///         let first = sent.fetch_add(1, Ordering::Relaxed) == 0;
    ///         async move { if first { Err(2u64) } else { Ok(q) } }
    ///     }
    /// }));
    /// let mut call = Box::pin(svc.oneshot(7));
    /// let poll = |call: &mut _| futures_lite::future::block_on(futures_lite::future::poll_once(call));
    /// assert!(poll(&mut call).is_none());
    /// clock.advance(Duration::from_millis(1999));
    /// assert!(poll(&mut call).is_none());
    /// clock.advance(Duration::from_millis(1));
    /// assert_eq!(poll(&mut call), Some(Ok(7)));
    /// ```
    pub fn retry_after<H2>(self, hint: H2) -> IdempotentPolicyLayer<C, N, K, W, B, H2> {
        IdempotentPolicyLayer {
            policy: self.policy,
            classify: self.classify,
            hint,
        }
    }
}

impl<C, const N: usize, K: Clone, W, B, H: Clone> Clone
    for IdempotentPolicyLayer<C, N, K, W, B, H>
{
    fn clone(&self) -> Self {
        IdempotentPolicyLayer {
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
            hint: self.hint.clone(),
        }
    }
}

impl<C, const N: usize, K, W, B, H> fmt::Debug for IdempotentPolicyLayer<C, N, K, W, B, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotentPolicyLayer")
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K: Clone, W, B, H: Clone> Layer<S>
    for IdempotentPolicyLayer<C, N, K, W, B, H>
{
    type Service = IdempotentPolicyService<S, C, N, K, W, B, H>;
    fn layer(&self, inner: S) -> Self::Service {
        IdempotentPolicyService {
            inner,
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
            hint: self.hint.clone(),
        }
    }
}

/// A service run through a [`Policy`] with retries; made by
/// [`PolicyLayer::idempotent`].
///
/// As [`PolicyService`] (always ready; the inner service moves into the
/// response future), but a failure or a call timeout is retried as
/// [`Policy::call_idempotent`] retries it: each attempt sends a clone of
/// the request through the whole policy again, after a backoff with full
/// jitter (or after a `Retry-After` hint, see
/// [`IdempotentPolicyLayer::retry_after`]), while attempts and the retry
/// budget allow. The response future is [`IdempotentPolicyFuture`], a named
/// type; a call allocates nothing.
///
/// [`PolicyLayer::idempotent`]: super::PolicyLayer::idempotent
/// [`PolicyService`]: super::PolicyService
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
/// use watertight::tower::PolicyLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock).unwrap());
/// let svc = PolicyLayer::new(search.clone())
///     .idempotent()
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, ()>(q) }));
/// assert!(Arc::ptr_eq(svc.policy(), &search));
///
/// // An open breaker is a refusal: not retried.
/// search.breaker().force_open();
/// let err = svc.oneshot(1).await.unwrap_err();
/// assert!(matches!(err.kind(), ErrorKind::CircuitOpen(_)));
/// assert_eq!(search.retry_metrics().after_failure, 0);
/// # });
/// ```
pub struct IdempotentPolicyService<
    S,
    C,
    const N: usize,
    K = ErrIsFailure,
    W = Inline<N>,
    B = C,
    H = NoHint,
> {
    inner: S,
    policy: Arc<Policy<C, N, W, B>>,
    classify: K,
    hint: H,
}

impl<S, C, const N: usize, K, W, B, H> IdempotentPolicyService<S, C, N, K, W, B, H> {
    /// The policy.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::PolicyLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock).unwrap());
    /// let svc = PolicyLayer::new(search.clone())
    ///     .idempotent()
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, ()>(q) }));
    /// assert_eq!(svc.policy().retry_config().max_attempts(), 2);
    /// ```
    pub fn policy(&self) -> &Arc<Policy<C, N, W, B>> {
        &self.policy
    }
}

impl<S: Clone, C, const N: usize, K: Clone, W, B, H: Clone> Clone
    for IdempotentPolicyService<S, C, N, K, W, B, H>
{
    fn clone(&self) -> Self {
        IdempotentPolicyService {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
            hint: self.hint.clone(),
        }
    }
}

impl<S: fmt::Debug, C, const N: usize, K, W, B, H> fmt::Debug
    for IdempotentPolicyService<S, C, N, K, W, B, H>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotentPolicyService")
            .field("inner", &self.inner)
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K, W, B, H, Req> Service<Req>
    for IdempotentPolicyService<S, C, N, K, W, B, H>
where
    S: Service<Req> + Clone,
    Req: Clone,
    C: Timer,
    B: Clock,
    W: WindowStorage,
    K: Classify<S::Response, S::Error> + Clone,
    H: RetryHint<S::Error> + Clone,
{
    type Response = S::Response;
    type Error = policy::Error<S::Error>;
    type Future = IdempotentPolicyFuture<C, N, S, Req, K, W, B, H>;

    /// Always ready, as [`PolicyService`]'s: the inner service's readiness
    /// is awaited inside each attempt.
    ///
    /// [`PolicyService`]: super::PolicyService
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let inner = self.inner.clone();
        let service = core::mem::replace(&mut self.inner, inner);
        RetryCall::new(
            Arc::clone(&self.policy),
            None,
            dispatch::ServiceRetry {
                service: Some(service),
                req: Some(req),
            },
            self.classify.clone(),
            self.hint.clone(),
        )
    }
}

/// The response future of [`IdempotentPolicyService`]: the policy's
/// [`RetryCall`] on the `Arc` of the policy, each attempt a clone of the
/// request sent to the inner service once the policy lets it through.
///
/// # Cancel safety
///
/// As [`Policy::call_idempotent`]'s: dropping it cancels the attempt in
/// flight (its slot goes back, the breaker records nothing) or the backoff
/// sleep, and records nothing in the retry budget.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{IdempotentPolicyFuture, PolicyLayer};
///
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(1).build().unwrap();
/// let ledger = Arc::new(Policy::<_, 64>::new("ledger", config, clock).unwrap());
/// let mut svc = PolicyLayer::new(ledger.clone())
///     .idempotent()
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n * 10) }));
///
/// // A named type: it can sit in a struct without a box.
/// let call: IdempotentPolicyFuture<_, 64, _, u32> = svc.call(4);
/// assert_eq!(ledger.bulkhead().in_flight(), 0); // nothing taken before the first poll
/// assert_eq!(futures_lite::future::block_on(call), Ok(40));
/// ```
pub type IdempotentPolicyFuture<
    C,
    const N: usize,
    S,
    Req,
    K = ErrIsFailure,
    W = Inline<N>,
    B = C,
    H = NoHint,
> = RetryCall<Arc<Policy<C, N, W, B>>, dispatch::ServiceRetry<S, Req>, K, H>;
