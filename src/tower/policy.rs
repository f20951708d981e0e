//! [`PolicyLayer`]: every call of a tower service through a [`Policy`]; its
//! service and response future, and how the policy starts a call of the
//! inner service and judges its result (`dispatch`, shared with the
//! retrying layer).

use alloc::sync::Arc;
use core::fmt;
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::classify::{Classify, ErrIsFailure};
use super::retry::IdempotentPolicyLayer;
use crate::breaker::{Inline, WindowStorage};
use crate::clock::{Clock, Timer};
use crate::policy::{self, NoHint, Policy, PolicyCall};

/// A [`Layer`] that runs every call through a [`Policy`]: bulkhead,
/// breaker and call timeout.
///
/// `C` is the policy's timer, `B` its breaker's clock (`C` unless the
/// policy was made with [`Policy::with_breaker_clock`], say to time slow
/// calls on a [`CoarseClock`](crate::clock::CoarseClock)).
///
/// The response future is [`PolicyFuture`], a named type: no allocation
/// per call.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::TokioClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::PolicyLayer;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let payments: Arc<Policy<TokioClock>> = Arc::new(Policy::new("payments", config, TokioClock).unwrap());
/// let svc = PolicyLayer::new(payments)
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n + 1) }));
/// assert_eq!(svc.oneshot(1).await, Ok(2));
/// # });
/// ```
pub struct PolicyLayer<C, const N: usize, K = ErrIsFailure, W = Inline<N>, B = C> {
    policy: Arc<Policy<C, N, W, B>>,
    classify: K,
}

impl<C, const N: usize, W, B> PolicyLayer<C, N, ErrIsFailure, W, B> {
    /// A layer where an `Err` from the inner service is a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::PolicyLayer;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let payments: Arc<Policy<_>> = Arc::new(Policy::new("payments", config, clock).unwrap());
    /// let svc = PolicyLayer::new(payments.clone()).layer(tower::service_fn(|cents: u32| async move {
    ///     if cents == 0 { Err("declined") } else { Ok(cents) }
    /// }));
    /// assert_eq!(svc.clone().oneshot(500).await, Ok(500));
    /// let err = svc.oneshot(0).await.unwrap_err();
    /// assert_eq!((err.system(), err.into_inner()), ("payments", Some("declined")));
    /// assert_eq!(payments.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn new(policy: Arc<Policy<C, N, W, B>>) -> Self {
        PolicyLayer {
            policy,
            classify: ErrIsFailure,
        }
    }
}

impl<C, const N: usize, K, W, B> PolicyLayer<C, N, K, W, B> {
    /// Uses `classify` to tell failures from answers.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::PolicyLayer;
    /// use watertight::Outcome;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock).unwrap());
    /// // A 404 is an answer; a 5xx is the system failing.
    /// let layer = PolicyLayer::new(search.clone()).classify(|r: &Result<u16, ()>| match r {
    ///     Ok(s) if *s < 500 => Outcome::Success,
    ///     _ => Outcome::Failure,
    /// });
    /// let svc = layer.layer(tower::service_fn(|status: u16| async move { Ok::<_, ()>(status) }));
    /// assert_eq!(svc.clone().oneshot(404).await, Ok(404));
    /// assert_eq!(svc.oneshot(503).await, Ok(503));
    /// assert_eq!(search.breaker().metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> PolicyLayer<C, N, K2, W, B> {
        PolicyLayer {
            policy: self.policy,
            classify,
        }
    }

    /// For requests that are safe to send twice: the layer's services retry
    /// a failure or a call timeout, as [`Policy::call_idempotent`] does,
    /// each attempt a clone of the request through the whole policy again
    /// (its own slot, the breaker, its own call timeout), within the
    /// policy's [`RetryConfig`](crate::retry::RetryConfig) and retry
    /// budget. A refusal by the policy is never retried, nor a success.
    /// Never the default: a [`PolicyLayer`] without it makes one attempt.
    ///
    /// The request must be `Clone`; the inner service is readied again
    /// (`poll_ready`) before each attempt, as tower's own retry does, so a
    /// readiness error is a failure like the call's own and is retried.
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
    /// let config = PolicyConfig::builder(4).build().unwrap();
    /// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock.clone()).unwrap());
    /// let sent = Arc::new(AtomicU32::new(0));
    /// let svc = PolicyLayer::new(search.clone()).idempotent().layer(tower::service_fn({
    ///     let sent = sent.clone();
    ///     move |q: &'static str| {
    ///         let first = sent.fetch_add(1, Ordering::Relaxed) == 0;
    ///         async move { if first { Err("reset") } else { Ok(q.len()) } }
    ///     }
    /// }));
    /// let mut call = Box::pin(svc.oneshot("shoes"));
    /// // The first attempt failed; the retry waits its backoff (at most 50 ms).
    /// assert!(futures_lite::future::block_on(futures_lite::future::poll_once(&mut call)).is_none());
    /// clock.advance(Duration::from_millis(50));
    /// assert_eq!(futures_lite::future::block_on(call), Ok(5));
    /// assert_eq!(sent.load(Ordering::Relaxed), 2);
    /// assert_eq!(search.retry_metrics().after_failure, 1);
    /// ```
    pub fn idempotent(self) -> IdempotentPolicyLayer<C, N, K, W, B> {
        IdempotentPolicyLayer {
            policy: self.policy,
            classify: self.classify,
            hint: NoHint,
        }
    }
}

impl<C, const N: usize, K: Clone, W, B> Clone for PolicyLayer<C, N, K, W, B> {
    fn clone(&self) -> Self {
        PolicyLayer {
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
        }
    }
}

impl<C, const N: usize, K, W, B> fmt::Debug for PolicyLayer<C, N, K, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyLayer")
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K: Clone, W, B> Layer<S> for PolicyLayer<C, N, K, W, B> {
    type Service = PolicyService<S, C, N, K, W, B>;
    fn layer(&self, inner: S) -> Self::Service {
        PolicyService {
            inner,
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
        }
    }
}

/// A service run through a [`Policy`]; made by [`PolicyLayer`].
///
/// `poll_ready` holds no slot and is always ready. `call` moves the inner
/// service into the response future ([`PolicyFuture`], a named type, no
/// allocation) and leaves a clone in its place; the future waits for the
/// service's readiness and calls it only once the policy's bulkhead and
/// breaker let it through, inside the call timeout. Errors are the policy's
/// [`policy::Error`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
/// use watertight::tower::PolicyLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(1).max_wait(Duration::ZERO).build().unwrap();
/// let stock: Arc<Policy<_>> = Arc::new(Policy::new("stock", config, clock).unwrap());
/// let mut svc = PolicyLayer::new(stock.clone())
///     .layer(tower::service_fn(|sku: u32| async move { Ok::<_, ()>(sku) }));
///
/// let _busy = stock.bulkhead().try_acquire().unwrap();
/// // Ready with the one slot taken: readiness holds no slot.
/// let err = svc.ready().await.unwrap().call(7).await.unwrap_err();
/// assert_eq!(*err.kind(), ErrorKind::BulkheadFull);
/// assert!(err.is_unavailable());
/// # });
/// ```
pub struct PolicyService<S, C, const N: usize, K = ErrIsFailure, W = Inline<N>, B = C> {
    inner: S,
    policy: Arc<Policy<C, N, W, B>>,
    classify: K,
}

impl<S, C, const N: usize, K, W, B> PolicyService<S, C, N, K, W, B> {
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
    /// let payments: Arc<Policy<_>> = Arc::new(Policy::new("payments", config, clock).unwrap());
    /// let svc = PolicyLayer::new(payments.clone())
    ///     .layer(tower::service_fn(|cents: u32| async move { Ok::<_, ()>(cents) }));
    /// assert!(Arc::ptr_eq(svc.policy(), &payments));
    /// assert_eq!(svc.policy().bulkhead().capacity(), 4);
    /// ```
    pub fn policy(&self) -> &Arc<Policy<C, N, W, B>> {
        &self.policy
    }
}

impl<S: Clone, C, const N: usize, K: Clone, W, B> Clone for PolicyService<S, C, N, K, W, B> {
    fn clone(&self) -> Self {
        PolicyService {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C, const N: usize, K, W, B> fmt::Debug for PolicyService<S, C, N, K, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyService")
            .field("inner", &self.inner)
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K, W, B, Req> Service<Req> for PolicyService<S, C, N, K, W, B>
where
    S: Service<Req> + Clone,
    C: Timer,
    B: Clock,
    W: WindowStorage,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = policy::Error<S::Error>;
    type Future = PolicyFuture<C, N, S, Req, K, W, B>;

    /// Always ready: the inner service's readiness is awaited inside the
    /// call, once the policy has let it through, so that waiting on it
    /// counts against the call timeout and a readiness error is the call's
    /// error (and a failure for the breaker, by the classifier).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The readied clone goes with the future, as tower's guide advises
        // for a service that calls its inner one later.
        let inner = self.inner.clone();
        let service = core::mem::replace(&mut self.inner, inner);
        PolicyCall::new(
            Arc::clone(&self.policy),
            None,
            dispatch::ServiceCall {
                service: Some(service),
                req: Some(req),
            },
            self.classify.clone(),
        )
    }
}

/// The response future of [`PolicyService`]: [`Policy::call_with`]'s own
/// future ([`PolicyCall`]) on the `Arc` of the policy, with the inner
/// service readied and called once the policy lets the call through. A
/// named type: no allocation per call, a wait for a slot included.
///
/// # Cancel safety
///
/// As [`PolicyCall`]: dropping it leaves a slot wait, records nothing for
/// the breaker and gives the slot back.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{PolicyFuture, PolicyLayer};
///
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(1).build().unwrap();
/// let ledger = Arc::new(Policy::<_, 64>::new("ledger", config, clock).unwrap());
/// let mut svc = PolicyLayer::new(ledger.clone())
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n * 10) }));
///
/// // A named type: it can sit in a struct without a box.
/// let call: PolicyFuture<_, 64, _, u32> = svc.call(4);
/// assert_eq!(ledger.bulkhead().in_flight(), 0); // nothing taken before the first poll
/// assert_eq!(futures_lite::future::block_on(call), Ok(40));
/// assert_eq!(ledger.breaker().metrics().calls, 1);
/// ```
pub type PolicyFuture<C, const N: usize, S, Req, K = ErrIsFailure, W = Inline<N>, B = C> =
    PolicyCall<Arc<Policy<C, N, W, B>>, dispatch::ServiceCall<S, Req>, K>;

/// How [`PolicyService`] starts a call and judges its result.
pub(super) mod dispatch {
    use core::task::{Context, Poll};

    use tower_service::Service;

    use crate::policy::{Dispatch, Redispatch};

    /// The inner service and the request: readied and called once the
    /// policy lets the call through.
    #[derive(Debug)]
    pub struct ServiceCall<S, Req> {
        pub(super) service: Option<S>,
        pub(super) req: Option<Req>,
    }

    impl<S: Service<Req>, Req> Dispatch for ServiceCall<S, Req> {
        type Future = S::Future;
        fn poll_dispatch(
            &mut self,
            cx: &mut Context<'_>,
        ) -> Poll<Result<S::Future, Result<S::Response, S::Error>>> {
            let svc = self
                .service
                .as_mut()
                .expect("the service is kept until called");
            let req = &mut self.req;
            let started = ready_and_call(svc, cx, || req.take().expect("the request is sent once"));
            if let Poll::Ready(Ok(_)) = started {
                self.service = None;
            }
            started
        }
    }

    /// A service call started (its future), or its output already (a
    /// readiness error).
    pub(in crate::tower) type Started<S, Req> = Result<
        <S as Service<Req>>::Future,
        Result<<S as Service<Req>>::Response, <S as Service<Req>>::Error>,
    >;

    /// Readies `service` and calls it with the request `req` gives, once
    /// ready: a readiness error is the call's output (the policy judges it
    /// as the call's error). The start of every service-backed call.
    #[inline]
    pub(in crate::tower) fn ready_and_call<S: Service<Req>, Req>(
        service: &mut S,
        cx: &mut Context<'_>,
        req: impl FnOnce() -> Req,
    ) -> Poll<Started<S, Req>> {
        match service.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Err(Err(e))),
            Poll::Ready(Ok(())) => Poll::Ready(Ok(service.call(req()))),
        }
    }

    /// The inner service and the request, for a retried call: each
    /// attempt readies the service and sends it a clone of the request.
    #[derive(Debug)]
    pub struct ServiceRetry<S, Req> {
        pub(in crate::tower) service: Option<S>,
        pub(in crate::tower) req: Option<Req>,
    }

    impl<S: Service<Req>, Req: Clone> Dispatch for ServiceRetry<S, Req> {
        type Future = S::Future;
        fn poll_dispatch(
            &mut self,
            cx: &mut Context<'_>,
        ) -> Poll<Result<S::Future, Result<S::Response, S::Error>>> {
            let svc = self
                .service
                .as_mut()
                .expect("the service is back before each attempt");
            let req = self
                .req
                .as_ref()
                .expect("the request is back before each attempt");
            ready_and_call(svc, cx, || req.clone())
        }
    }

    impl<S: Service<Req>, Req: Clone> Redispatch for ServiceRetry<S, Req> {
        fn take_back(&mut self) -> Self {
            ServiceRetry {
                service: self.service.take(),
                req: self.req.take(),
            }
        }
    }
}
