//! tower `Layer`s and `Service`s (feature `tower`).
//!
//! Inbound load shedding — a limit on the requests in flight, a short wait
//! for a slot, and a quick 503 with `Retry-After` when none came free, which
//! serves everyone better than slow answers to all: the refused clients
//! retry later or degrade, the admitted ones are answered in time — and the
//! breaker and the whole [`Policy`] around any tower service:
//!
//! | layer | service | refusal |
//! |---|---|---|
//! | [`BulkheadLayer`] | [`BulkheadService`] | [`BulkheadError::Rejected`] with the [`AcquireError`] |
//! | [`BreakerLayer`] | [`BreakerService`] | [`BreakerError::Rejected`] with the [`Rejection`] |
//! | [`PolicyLayer`] | [`PolicyService`] | [`policy::Error`] |
//! | [`PolicyLayer::idempotent`] | [`IdempotentPolicyService`] | [`policy::Error`], after the retries |
//! | [`AdaptiveLayer`] | [`AdaptiveService`] | [`BulkheadError::Rejected`]; the limit moved by an [`AdaptiveBulkhead`](crate::limit::AdaptiveBulkhead) |
//!
//! None of them takes a permit in `poll_ready`: readiness is the inner
//! service's. A permit is taken per call and travels with the response
//! future; it is given back when that future completes or is dropped.
//!
//! The response futures are named types, [`BulkheadFuture`],
//! [`BreakerFuture`], [`PolicyFuture`] and [`IdempotentPolicyFuture`], and
//! a call allocates nothing, a wait for a slot included (the future holds
//! its queue node). All are `Send` when the inner service and its future
//! are (and the request, for the retrying one).
//!
//! Retries are opt-in: only a layer marked [`PolicyLayer::idempotent`]
//! retries (a failure or a call timeout, never a refusal or a success,
//! within the policy's attempts and retry budget), sending a clone of the
//! request through the whole policy again; a plain [`PolicyLayer`] makes
//! one attempt, at the cost it had before retries existed.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use tower::{Layer, Service, ServiceExt};
//! use watertight::clock::StdClock;
//! use watertight::tower::{BulkheadError, BulkheadLayer};
//! use watertight::{AcquireError, Bulkhead};
//!
//! # futures_lite::future::block_on(async {
//! let slots = Arc::new(Bulkhead::new("search", 1, StdClock));
//! let mut svc = BulkheadLayer::new(slots.clone())
//!     .layer(tower::service_fn(|q: u32| async move { Ok::<_, std::convert::Infallible>(q * 2) }));
//!
//! let busy = slots.try_acquire().unwrap(); // the one slot is taken
//! let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
//! assert!(matches!(err, BulkheadError::Rejected(AcquireError::Full)));
//! drop(busy);
//! assert_eq!(svc.ready().await.unwrap().call(2).await.unwrap(), 4);
//! # });
//! ```

extern crate alloc;

mod adaptive;
pub use adaptive::{AdaptiveFuture, AdaptiveLayer, AdaptiveService, SignalOf};

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::breaker::{
    fail_on_unwind, take_raw, CircuitBreaker, Guard, Inline, Outcome, Raw, Rejection, WindowStorage,
};
use crate::bulkhead::{AcquireError, Bulkhead, OwnedPermit};
use crate::clock::{Clock, Timer};
use crate::futures::AcquireOwnedTimeout;
use crate::policy::{self, NoHint, Policy, PolicyCall, RetryCall, RetryHint};

// ---------------------------------------------------------------------------
// Bulkhead
// ---------------------------------------------------------------------------

/// The error of a [`BulkheadService`]: the bulkhead refused the call, or the
/// inner service failed.
///
/// # Examples
///
/// ```
/// use watertight::AcquireError;
/// use watertight::tower::BulkheadError;
///
/// let e: BulkheadError<&str> = BulkheadError::Rejected(AcquireError::Full);
/// assert_eq!(e.rejection(), Some(AcquireError::Full));
/// assert_eq!(e.to_string(), "bulkhead full");
/// assert_eq!(BulkheadError::Inner("boom").into_inner(), Some("boom"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkheadError<E> {
    /// No permit: the inner service was not called (answer 503).
    Rejected(AcquireError),
    /// The inner service's own error.
    Inner(E),
}

impl<E> BulkheadError<E> {
    /// The refusal, if the bulkhead refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::tower::BulkheadError;
    ///
    /// let refused: BulkheadError<&str> = BulkheadError::Rejected(AcquireError::TimedOut);
    /// assert_eq!(refused.rejection(), Some(AcquireError::TimedOut));
    /// // The inner service failed: the bulkhead let the call through.
    /// assert_eq!(BulkheadError::Inner("db down").rejection(), None);
    /// ```
    pub const fn rejection(&self) -> Option<AcquireError> {
        match self {
            BulkheadError::Rejected(e) => Some(*e),
            BulkheadError::Inner(_) => None,
        }
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::tower::BulkheadError;
    ///
    /// assert_eq!(BulkheadError::Inner("db down").into_inner(), Some("db down"));
    /// let refused: BulkheadError<&str> = BulkheadError::Rejected(AcquireError::Full);
    /// assert_eq!(refused.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            BulkheadError::Rejected(_) => None,
            BulkheadError::Inner(e) => Some(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for BulkheadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BulkheadError::Rejected(e) => fmt::Display::fmt(e, f),
            BulkheadError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for BulkheadError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BulkheadError::Rejected(e) => Some(e),
            BulkheadError::Inner(e) => Some(e),
        }
    }
}

/// How a [`BulkheadService`] asks for a permit: [`FailFast`] or [`MaxWait`].
///
/// Sealed: only this crate's two modes implement it. Name it as a bound to
/// write code that takes a [`BulkheadService`] in either mode.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::tower::{Admission, BulkheadError, BulkheadLayer, BulkheadService};
/// use watertight::Bulkhead;
///
/// async fn lookup<S, C, M>(svc: &mut BulkheadService<S, C, M>, id: u32) -> Result<u32, BulkheadError<Infallible>>
/// where
///     S: Service<u32, Response = u32, Error = Infallible>,
///     M: Admission<C>,
/// {
///     svc.ready().await?.call(id).await
/// }
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let slots = Arc::new(Bulkhead::new("search", 2, &clock));
/// let inner = tower::service_fn(|id: u32| async move { Ok::<_, Infallible>(id * 10) });
/// let mut fail_fast = BulkheadLayer::new(slots.clone()).layer(inner);
/// let mut patient = BulkheadLayer::new(slots).max_wait(Duration::from_millis(50)).layer(inner);
/// assert_eq!(lookup(&mut fail_fast, 1).await, Ok(10));
/// assert_eq!(lookup(&mut patient, 2).await, Ok(20));
/// # });
/// ```
pub trait Admission<C>: sealed::Sealed {
    /// The future that waits for a permit.
    type Wait: Future<Output = Result<OwnedPermit<C>, AcquireError>>;
    /// A permit (or refusal) now, or the wait for one.
    #[doc(hidden)]
    fn admit(
        &self,
        bulkhead: &Arc<Bulkhead<C>>,
    ) -> Result<Result<OwnedPermit<C>, AcquireError>, Self::Wait>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::FailFast {}
    impl Sealed for super::MaxWait {}
}

/// Take a permit at once or refuse with [`AcquireError::Full`]: the
/// default, and the only mode for a clock that cannot sleep (`StdClock`).
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::{BulkheadError, BulkheadLayer, FailFast};
/// use watertight::{AcquireError, Bulkhead};
///
/// # futures_lite::future::block_on(async {
/// let slots = Arc::new(Bulkhead::new("search", 1, StdClock));
/// let layer: BulkheadLayer<StdClock, FailFast> = BulkheadLayer::new(slots.clone());
/// let svc = layer.layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
///
/// let _busy = slots.try_acquire().unwrap();
/// // No free slot: refused at once, no waiting.
/// assert_eq!(svc.oneshot(1).await, Err(BulkheadError::Rejected(AcquireError::Full)));
/// assert_eq!(slots.metrics().rejected_full, 1);
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailFast;

impl<C> Admission<C> for FailFast {
    type Wait = core::future::Pending<Result<OwnedPermit<C>, AcquireError>>;
    fn admit(
        &self,
        bulkhead: &Arc<Bulkhead<C>>,
    ) -> Result<Result<OwnedPermit<C>, AcquireError>, Self::Wait> {
        Ok(bulkhead.try_acquire_owned())
    }
}

/// Wait for a permit for at most this long, then refuse with
/// [`AcquireError::TimedOut`]. For load shedding, tens of milliseconds
/// (50 ms, say): long enough for a slot to come free from a quick request,
/// too short to turn the limit into a queue.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::pin::pin;
/// use std::sync::Arc;
/// use core::time::Duration;
/// use futures_lite::future::poll_once;
/// use tower::{Layer, Service};
/// use watertight::clock::ManualClock;
/// use watertight::tower::{BulkheadError, BulkheadLayer, MaxWait};
/// use watertight::{AcquireError, Bulkhead};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let slots = Arc::new(Bulkhead::new("report", 1, &clock));
/// let layer: BulkheadLayer<_, MaxWait> = BulkheadLayer::new(slots.clone()).max_wait(Duration::from_millis(50));
/// let mut svc = layer.layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
///
/// let _busy = slots.try_acquire().unwrap();
/// let mut call = pin!(svc.call(1));
/// assert!(poll_once(call.as_mut()).await.is_none()); // waiting for a slot
/// clock.advance(Duration::from_millis(50));
/// assert_eq!(call.await, Err(BulkheadError::Rejected(AcquireError::TimedOut)));
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxWait(pub Duration);

impl<C: Timer> Admission<C> for MaxWait {
    type Wait = AcquireOwnedTimeout<C>;
    fn admit(
        &self,
        bulkhead: &Arc<Bulkhead<C>>,
    ) -> Result<Result<OwnedPermit<C>, AcquireError>, Self::Wait> {
        // The wait's first poll tries for a permit before it arms a timer;
        // trying here first would count a refusal that the wait then undoes.
        Err(bulkhead.acquire_owned_timeout(self.0))
    }
}

/// A [`Layer`] that puts a [`Bulkhead`] in front of a service.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use core::time::Duration;
/// use watertight::Bulkhead;
/// use watertight::clock::TokioClock;
/// use watertight::tower::BulkheadLayer;
///
/// let slow = Arc::new(Bulkhead::new("report", 8, TokioClock));
/// // Wait up to 50 ms for a slot, then answer 503.
/// let layer = BulkheadLayer::new(slow.clone()).max_wait(Duration::from_millis(50));
/// let app = tower::ServiceBuilder::new()
///     .layer(layer)
///     .service(tower::service_fn(|day: u32| async move { Ok::<_, ()>(day) }));
/// # let _ = app;
/// // Building the stack takes no slot; calls do.
/// assert_eq!(slow.in_flight(), 0);
/// ```
pub struct BulkheadLayer<C, M = FailFast> {
    bulkhead: Arc<Bulkhead<C>>,
    mode: M,
}

impl<C> BulkheadLayer<C> {
    /// Fail fast: no free permit, no call.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BulkheadLayer;
    /// use watertight::Bulkhead;
    ///
    /// # futures_lite::future::block_on(async {
    /// let slots = Arc::new(Bulkhead::new("search", 4, StdClock));
    /// let seen = slots.clone();
    /// let svc = BulkheadLayer::new(slots.clone()).layer(tower::service_fn(move |_q: &str| {
    ///     let in_flight = seen.in_flight(); // the call holds a permit
    ///     async move { Ok::<_, Infallible>(in_flight) }
    /// }));
    /// assert_eq!(svc.oneshot("shoes").await, Ok(1));
    /// assert_eq!(slots.in_flight(), 0); // given back when the call completed
    /// # });
    /// ```
    pub fn new(bulkhead: Arc<Bulkhead<C>>) -> Self {
        BulkheadLayer {
            bulkhead,
            mode: FailFast,
        }
    }

    /// Wait at most `max_wait` for a permit (the clock must be a [`Timer`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::pin::pin;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::tower::BulkheadLayer;
    /// use watertight::Bulkhead;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let slots = Arc::new(Bulkhead::new("report", 1, &clock));
    /// let layer = BulkheadLayer::new(slots.clone()).max_wait(Duration::from_millis(50));
    /// let mut svc = layer.layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    ///
    /// let busy = slots.try_acquire().unwrap();
    /// let mut call = pin!(svc.call(7));
    /// assert!(poll_once(call.as_mut()).await.is_none()); // waiting for a slot
    /// clock.advance(Duration::from_millis(20));
    /// drop(busy); // a slot comes free within the wait
    /// assert_eq!(call.await, Ok(7));
    /// # });
    /// ```
    pub fn max_wait(self, max_wait: Duration) -> BulkheadLayer<C, MaxWait> {
        BulkheadLayer {
            bulkhead: self.bulkhead,
            mode: MaxWait(max_wait),
        }
    }
}

impl<C, M: Clone> Clone for BulkheadLayer<C, M> {
    fn clone(&self) -> Self {
        BulkheadLayer {
            bulkhead: Arc::clone(&self.bulkhead),
            mode: self.mode.clone(),
        }
    }
}

impl<C, M: fmt::Debug> fmt::Debug for BulkheadLayer<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadLayer")
            .field("bulkhead", &self.bulkhead.name())
            .field("mode", &self.mode)
            .finish()
    }
}

impl<S, C, M: Clone> Layer<S> for BulkheadLayer<C, M> {
    type Service = BulkheadService<S, C, M>;
    fn layer(&self, inner: S) -> Self::Service {
        BulkheadService {
            inner,
            bulkhead: Arc::clone(&self.bulkhead),
            mode: self.mode.clone(),
        }
    }
}

/// A service behind a [`Bulkhead`]; made by [`BulkheadLayer`].
///
/// `poll_ready` is the inner service's and holds no permit, so a router
/// polling many routes for readiness reserves nothing. With [`FailFast`],
/// `call` takes a permit or refuses; with [`MaxWait`], the response future
/// asks for one on its first poll and waits at most the max wait. The
/// permit lives in the [`BulkheadFuture`] and is given back when the inner
/// future completes or the [`BulkheadFuture`] is dropped.
///
/// The inner service's `call` is made at once; with [`MaxWait`] its future
/// is polled only once the permit is granted, and dropped unpolled on a
/// refusal. (A service that does its work in `call` itself rather than in
/// its future, unusual in tower, is not held back by the wait.)
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::BulkheadLayer;
/// use watertight::Bulkhead;
///
/// # futures_lite::future::block_on(async {
/// let slots = Arc::new(Bulkhead::new("search", 1, StdClock));
/// let mut svc = BulkheadLayer::new(slots.clone())
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
///
/// let ready = svc.ready().await.unwrap();
/// assert_eq!(slots.available(), 1); // readiness reserves nothing
/// let response = ready.call(7);
/// assert_eq!(slots.available(), 0); // the permit rides in the response future
/// assert_eq!(response.await, Ok(7));
/// assert_eq!(slots.available(), 1);
/// # });
/// ```
pub struct BulkheadService<S, C, M = FailFast> {
    inner: S,
    bulkhead: Arc<Bulkhead<C>>,
    mode: M,
}

impl<S, C, M> BulkheadService<S, C, M> {
    /// The bulkhead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BulkheadLayer;
    /// use watertight::Bulkhead;
    ///
    /// let slots = Arc::new(Bulkhead::new("search", 4, StdClock));
    /// let svc = BulkheadLayer::new(slots.clone())
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// assert!(Arc::ptr_eq(svc.bulkhead(), &slots));
    /// assert_eq!(svc.bulkhead().metrics().capacity, 4);
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead<C>> {
        &self.bulkhead
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// # use std::future::{ready, Ready};
    /// # use std::task::{Context, Poll};
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BulkheadLayer;
    /// use watertight::Bulkhead;
    ///
    /// /// A client for one database pool.
    /// struct Db {
    ///     pool: &'static str,
    /// }
    /// # impl tower::Service<u32> for Db {
    /// #     type Response = u32;
    /// #     type Error = Infallible;
    /// #     type Future = Ready<Result<u32, Infallible>>;
    /// #     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
    /// #         Poll::Ready(Ok(()))
    /// #     }
    /// #     fn call(&mut self, id: u32) -> Self::Future {
    /// #         ready(Ok(id))
    /// #     }
    /// # }
    ///
    /// let slots = Arc::new(Bulkhead::new("orders-db", 8, StdClock));
    /// let svc = BulkheadLayer::new(slots).layer(Db { pool: "primary" });
    /// assert_eq!(svc.get_ref().pool, "primary");
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, C, M: Clone> Clone for BulkheadService<S, C, M> {
    fn clone(&self) -> Self {
        BulkheadService {
            inner: self.inner.clone(),
            bulkhead: Arc::clone(&self.bulkhead),
            mode: self.mode.clone(),
        }
    }
}

impl<S: fmt::Debug, C, M: fmt::Debug> fmt::Debug for BulkheadService<S, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadService")
            .field("inner", &self.inner)
            .field("bulkhead", &self.bulkhead.name())
            .field("mode", &self.mode)
            .finish()
    }
}

impl<S, C, M, Req> Service<Req> for BulkheadService<S, C, M>
where
    S: Service<Req>,
    M: Admission<C>,
{
    type Response = S::Response;
    type Error = BulkheadError<S::Error>;
    type Future = BulkheadFuture<S::Future, C, M::Wait>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BulkheadError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let state = match self.mode.admit(&self.bulkhead) {
            Ok(Ok(permit)) => State::Running {
                fut: self.inner.call(req),
                permit: Some(permit),
            },
            Ok(Err(why)) => State::Refused { why: Some(why) },
            Err(wait) => State::Waiting {
                wait,
                fut: Some(self.inner.call(req)),
            },
        };
        BulkheadFuture { state }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C, W> {
        Waiting { #[pin] wait: W, fut: Option<F> },
        Running { #[pin] fut: F, permit: Option<OwnedPermit<C>> },
        Refused { why: Option<AcquireError> },
    }
}

pin_project! {
    /// The response future of [`BulkheadService`]: holds the permit while
    /// the inner future runs. `Send` when the inner future is (and the
    /// clock is `Send + Sync`).
    ///
    /// # Cancel safety
    ///
    /// Dropping it gives the permit back (or leaves the wait).
    ///
    /// # Examples
    ///
    /// The permit is taken by `call` and travels with the future, polled or
    /// not, until it completes or is dropped:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BulkheadLayer;
    /// use watertight::Bulkhead;
    ///
    /// let bulkhead = Arc::new(Bulkhead::new("inventory", 2, StdClock));
    /// let mut svc = BulkheadLayer::new(bulkhead.clone())
    ///     .layer(tower::service_fn(|sku: u32| async move { Ok::<_, ()>(sku) }));
    ///
    /// let first = svc.call(1);
    /// let second = svc.call(2);
    /// assert_eq!(bulkhead.in_flight(), 2);
    /// drop(first); // never polled: the permit is back anyway
    /// assert_eq!(bulkhead.in_flight(), 1);
    /// assert_eq!(futures_lite::future::block_on(second), Ok(2));
    /// assert_eq!(bulkhead.in_flight(), 0);
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct BulkheadFuture<F, C, W> {
        #[pin]
        state: State<F, C, W>,
    }
}

impl<F, C, W> fmt::Debug for BulkheadFuture<F, C, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting",
            State::Running { .. } => "running",
            State::Refused { .. } => "refused",
        };
        f.debug_struct("BulkheadFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, C, W, T, E> Future for BulkheadFuture<F, C, W>
where
    F: Future<Output = Result<T, E>>,
    W: Future<Output = Result<OwnedPermit<C>, AcquireError>>,
{
    type Output = Result<T, BulkheadError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Waiting { wait, fut } => match wait.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(why)) => {
                        // The inner future is dropped unpolled.
                        state.set(State::Refused { why: Some(why) });
                    }
                    Poll::Ready(Ok(permit)) => match fut.take() {
                        Some(fut) => state.set(State::Running {
                            fut,
                            permit: Some(permit),
                        }),
                        None => return Poll::Pending,
                    },
                },
                StateProj::Running { fut, permit } => {
                    let out = core::task::ready!(fut.poll(cx));
                    // The call is over: the permit goes back now, not when
                    // the future is dropped.
                    drop(permit.take());
                    return Poll::Ready(out.map_err(BulkheadError::Inner));
                }
                StateProj::Refused { why } => {
                    return match why.take() {
                        Some(why) => Poll::Ready(Err(BulkheadError::Rejected(why))),
                        None => Poll::Pending, // polled after completion
                    };
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Breaker
// ---------------------------------------------------------------------------

/// Says what a call's result means for a breaker: [`Outcome::Success`] (the
/// system answered: an HTTP 404 too), [`Outcome::Failure`] (a 5xx, a
/// connection error) or [`Outcome::Ignored`].
///
/// Implemented for every `Fn(&Result<T, E>) -> Outcome` and for
/// [`ErrorIsFailure`].
///
/// # Examples
///
/// ```
/// use watertight::Outcome;
/// use watertight::tower::{Classify, ErrorIsFailure};
///
/// let by_status = |r: &Result<u16, ()>| match r {
///     Ok(s) if *s < 500 => Outcome::Success,
///     _ => Outcome::Failure,
/// };
/// assert_eq!(by_status.classify(&Ok(404)), Outcome::Success);
/// assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
/// assert_eq!(ErrorIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
/// ```
pub trait Classify<T, E> {
    /// The outcome of `result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io;
    /// use watertight::Outcome;
    /// use watertight::tower::Classify;
    ///
    /// // A 429 says the system is alive and shedding load: no verdict.
    /// let by_status = |r: &Result<u16, io::Error>| match r {
    ///     Ok(429) => Outcome::Ignored,
    ///     Ok(s) if *s >= 500 => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    ///     Err(_) => Outcome::Failure,
    /// };
    /// assert_eq!(by_status.classify(&Ok(429)), Outcome::Ignored);
    /// assert_eq!(by_status.classify(&Ok(502)), Outcome::Failure);
    /// assert_eq!(by_status.classify(&Err(io::Error::other("reset"))), Outcome::Failure);
    /// ```
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F: Fn(&Result<T, E>) -> Outcome> Classify<T, E> for F {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: an `Err` is a failure, an `Ok` a success.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::{BreakerLayer, BreakerService, Classify, ErrorIsFailure};
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
///
/// // An `Ok` is an answer, whatever it holds.
/// assert_eq!(ErrorIsFailure.classify(&Ok::<u16, ()>(503)), Outcome::Success);
/// assert_eq!(ErrorIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
///
/// # futures_lite::future::block_on(async {
/// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
/// // The default of `BreakerLayer::new`.
/// let svc: BreakerService<_, _, 100, ErrorIsFailure> = BreakerLayer::new(breaker.clone())
///     .layer(tower::service_fn(|_sku: u32| async move { Err::<u32, _>("timeout") }));
/// assert!(svc.oneshot(7).await.is_err());
/// assert_eq!(breaker.metrics().failed_calls, 1);
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorIsFailure;

impl<T, E> Classify<T, E> for ErrorIsFailure {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        crate::breaker::err_is_failure(result)
    }
}

/// The error of a [`BreakerService`]: the breaker refused, or the inner
/// service failed.
///
/// Shaped like [`BulkheadError`] (`Rejected` / `Inner`), so the errors of
/// the tower layers read alike. It carries what
/// [`CallError`](crate::CallError) carries (its `Failed` is `Inner` here),
/// and converts to and from it with `From`, for code that handles both the
/// breaker's own `call` and its tower service.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::Rejection;
/// use watertight::tower::BreakerError;
///
/// let e: BreakerError<()> = BreakerError::Rejected(Rejection::Open {
///     retry_after: Duration::from_millis(2500),
/// });
/// // A server's Retry-After, in whole seconds rounded up: 3.
/// let hint = e.retry_after().unwrap();
/// assert_eq!(hint.as_secs() + u64::from(hint.subsec_nanos() > 0), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerError<E> {
    /// The breaker refused; the inner service was not called. Its
    /// [`retry_after`](Rejection::retry_after) is a server's `Retry-After`.
    Rejected(Rejection),
    /// The inner service's own error.
    Inner(E),
}

impl<E> BreakerError<E> {
    /// The refusal, if the breaker refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Rejection;
    /// use watertight::tower::BreakerError;
    ///
    /// let busy: BreakerError<&str> = BreakerError::Rejected(Rejection::ProbesBusy);
    /// assert_eq!(busy.rejection(), Some(Rejection::ProbesBusy));
    /// // The inner service failed: the breaker let the call through.
    /// assert_eq!(BreakerError::Inner("timeout").rejection(), None);
    /// ```
    pub const fn rejection(&self) -> Option<Rejection> {
        match self {
            BreakerError::Rejected(r) => Some(*r),
            BreakerError::Inner(_) => None,
        }
    }

    /// How long until a probe may pass, if the breaker refused because it is
    /// open.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::Rejection;
    /// use watertight::tower::BreakerError;
    ///
    /// let open: BreakerError<&str> = BreakerError::Rejected(Rejection::Open {
    ///     retry_after: Duration::from_secs(30),
    /// });
    /// assert_eq!(open.retry_after(), Some(Duration::from_secs(30)));
    /// // Forced open by an operator: no time to promise.
    /// let forced: BreakerError<&str> = BreakerError::Rejected(Rejection::ForcedOpen);
    /// assert_eq!(forced.retry_after(), None);
    /// assert_eq!(BreakerError::Inner("timeout").retry_after(), None);
    /// ```
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            BreakerError::Rejected(r) => r.retry_after(),
            BreakerError::Inner(_) => None,
        }
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Rejection;
    /// use watertight::tower::BreakerError;
    ///
    /// assert_eq!(BreakerError::Inner("timeout").into_inner(), Some("timeout"));
    /// let forced: BreakerError<&str> = BreakerError::Rejected(Rejection::ForcedOpen);
    /// assert_eq!(forced.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            BreakerError::Rejected(_) => None,
            BreakerError::Inner(e) => Some(e),
        }
    }
}

impl<E> From<crate::CallError<E>> for BreakerError<E> {
    /// `Rejected` stays `Rejected`; `Failed` becomes `Inner`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::BreakerError;
    /// use watertight::{CallError, Rejection};
    ///
    /// let e: BreakerError<&str> = CallError::Failed("503").into();
    /// assert_eq!(e, BreakerError::Inner("503"));
    /// let e: BreakerError<&str> = CallError::Rejected(Rejection::ProbesBusy).into();
    /// assert_eq!(e.rejection(), Some(Rejection::ProbesBusy));
    /// ```
    fn from(e: crate::CallError<E>) -> Self {
        match e {
            crate::CallError::Rejected(r) => BreakerError::Rejected(r),
            crate::CallError::Failed(e) => BreakerError::Inner(e),
        }
    }
}

impl<E> From<BreakerError<E>> for crate::CallError<E> {
    /// `Rejected` stays `Rejected`; `Inner` becomes `Failed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::BreakerError;
    /// use watertight::CallError;
    ///
    /// let e: CallError<&str> = BreakerError::Inner("503").into();
    /// assert_eq!(e.into_inner(), Some("503"));
    /// ```
    fn from(e: BreakerError<E>) -> Self {
        match e {
            BreakerError::Rejected(r) => crate::CallError::Rejected(r),
            BreakerError::Inner(e) => crate::CallError::Failed(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for BreakerError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerError::Rejected(r) => fmt::Display::fmt(r, f),
            BreakerError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for BreakerError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BreakerError::Rejected(r) => Some(r),
            BreakerError::Inner(e) => Some(e),
        }
    }
}

/// A [`Layer`] that puts a [`CircuitBreaker`] in front of a service, with a
/// classifier over the response.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::{BreakerError, BreakerLayer};
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
///
/// # futures_lite::future::block_on(async {
/// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
/// // A status >= 500 is a failure, a 4xx an answer.
/// let layer = BreakerLayer::new(breaker.clone()).classify(|r: &Result<u16, ()>| match r {
///     Ok(s) if *s < 500 => Outcome::Success,
///     _ => Outcome::Failure,
/// });
/// let svc = layer.layer(tower::service_fn(|s: u16| async move { Ok::<u16, ()>(s) }));
/// assert_eq!(svc.clone().oneshot(404).await, Ok(404));
/// assert_eq!(svc.clone().oneshot(503).await, Ok(503));
/// assert_eq!(breaker.metrics().failed_calls, 1);
/// breaker.force_open();
/// assert!(matches!(svc.oneshot(200).await, Err(BreakerError::Rejected(_))));
/// # });
/// ```
pub struct BreakerLayer<C, const N: usize, K = ErrorIsFailure, W = Inline<N>> {
    breaker: Arc<CircuitBreaker<C, N, (), W>>,
    classify: K,
}

impl<C, const N: usize, W> BreakerLayer<C, N, ErrorIsFailure, W> {
    /// A layer where an `Err` from the inner service is a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::StdClock;
    /// use watertight::tower::{BreakerError, BreakerLayer};
    /// use watertight::{BreakerConfig, CircuitBreaker};
    ///
    /// # futures_lite::future::block_on(async {
    /// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
    ///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
    /// let svc = BreakerLayer::new(breaker.clone()).layer(tower::service_fn(|sku: u32| async move {
    ///     if sku == 0 { Err("no price") } else { Ok(sku * 100) }
    /// }));
    /// assert_eq!(svc.clone().oneshot(3).await, Ok(300));
    /// assert_eq!(svc.oneshot(0).await, Err(BreakerError::Inner("no price")));
    /// assert_eq!((breaker.metrics().calls, breaker.metrics().failed_calls), (2, 1));
    /// # });
    /// ```
    pub fn new(breaker: Arc<CircuitBreaker<C, N, (), W>>) -> Self {
        BreakerLayer {
            breaker,
            classify: ErrorIsFailure,
        }
    }
}

impl<C, const N: usize, K, W> BreakerLayer<C, N, K, W> {
    /// Uses `classify` to tell failures from answers.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BreakerLayer;
    /// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
    ///
    /// #[derive(Debug, Clone, Copy, PartialEq)]
    /// enum FetchError {
    ///     Cancelled,
    ///     Upstream,
    /// }
    ///
    /// # futures_lite::future::block_on(async {
    /// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
    ///     Arc::new(CircuitBreaker::new("catalog", BreakerConfig::DEFAULT, StdClock));
    /// // The caller gave up: that says nothing about the catalog.
    /// let layer = BreakerLayer::new(breaker.clone()).classify(|r: &Result<u32, FetchError>| match r {
    ///     Err(FetchError::Cancelled) => Outcome::Ignored,
    ///     Err(FetchError::Upstream) => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    /// });
    /// let svc = layer.layer(tower::service_fn(|e: FetchError| async move { Err::<u32, _>(e) }));
    /// assert!(svc.clone().oneshot(FetchError::Cancelled).await.is_err());
    /// assert_eq!(breaker.metrics().calls, 0);
    /// assert!(svc.oneshot(FetchError::Upstream).await.is_err());
    /// assert_eq!(breaker.metrics().failed_calls, 1);
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> BreakerLayer<C, N, K2, W> {
        BreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }
}

impl<C, const N: usize, K: Clone, W> Clone for BreakerLayer<C, N, K, W> {
    fn clone(&self) -> Self {
        BreakerLayer {
            breaker: Arc::clone(&self.breaker),
            classify: self.classify.clone(),
        }
    }
}

impl<C, const N: usize, K, W> fmt::Debug for BreakerLayer<C, N, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K: Clone, W> Layer<S> for BreakerLayer<C, N, K, W> {
    type Service = BreakerService<S, C, N, K, W>;
    fn layer(&self, inner: S) -> Self::Service {
        BreakerService {
            inner,
            breaker: Arc::clone(&self.breaker),
            classify: self.classify.clone(),
        }
    }
}

/// A service behind a [`CircuitBreaker`]; made by [`BreakerLayer`].
///
/// `poll_ready` is the inner service's. `call` asks the breaker at once:
/// if it lets the call through, the inner service is called and its future
/// rides in the response future, which classifies and records the result;
/// if not, the inner service is not called and the response future
/// resolves to the refusal. Dropping the future records nothing and frees a
/// half-open probe slot.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::{BreakerError, BreakerLayer};
/// use watertight::{BreakerConfig, CircuitBreaker, Rejection};
///
/// # futures_lite::future::block_on(async {
/// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
/// let reached = Arc::new(AtomicUsize::new(0));
/// let hits = reached.clone();
/// let svc = BreakerLayer::new(breaker.clone()).layer(tower::service_fn(move |sku: u32| {
///     hits.fetch_add(1, Ordering::Relaxed);
///     async move { Ok::<_, ()>(sku) }
/// }));
///
/// breaker.force_open();
/// let refused = svc.oneshot(7).await;
/// assert_eq!(refused, Err(BreakerError::Rejected(Rejection::ForcedOpen)));
/// assert_eq!(reached.load(Ordering::Relaxed), 0); // the pricing service was spared
/// # });
/// ```
pub struct BreakerService<S, C, const N: usize, K = ErrorIsFailure, W = Inline<N>> {
    inner: S,
    breaker: Arc<CircuitBreaker<C, N, (), W>>,
    classify: K,
}

impl<S, C, const N: usize, K, W> BreakerService<S, C, N, K, W> {
    /// The breaker.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::breaker::State;
    /// use watertight::clock::StdClock;
    /// use watertight::tower::BreakerLayer;
    /// use watertight::{BreakerConfig, CircuitBreaker};
    ///
    /// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
    ///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
    /// let svc = BreakerLayer::new(breaker)
    ///     .layer(tower::service_fn(|sku: u32| async move { Ok::<_, ()>(sku) }));
    /// // An operator's switch, through the service that owns the breaker.
    /// svc.breaker().force_open();
    /// assert_eq!(svc.breaker().state(), State::ForcedOpen);
    /// assert_eq!(svc.breaker().name(), "pricing");
    /// ```
    pub fn breaker(&self) -> &Arc<CircuitBreaker<C, N, (), W>> {
        &self.breaker
    }
}

impl<S: Clone, C, const N: usize, K: Clone, W> Clone for BreakerService<S, C, N, K, W> {
    fn clone(&self) -> Self {
        BreakerService {
            inner: self.inner.clone(),
            breaker: Arc::clone(&self.breaker),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C, const N: usize, K, W> fmt::Debug for BreakerService<S, C, N, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K, W, Req> Service<Req> for BreakerService<S, C, N, K, W>
where
    S: Service<Req>,
    C: Clock,
    W: WindowStorage,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = BreakerError<S::Error>;
    type Future = BreakerFuture<CircuitBreaker<C, N, (), W>, S::Future, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BreakerError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The breaker decides before the inner service is called: a refused
        // call never reaches it.
        match Guard::acquire_raw(&*self.breaker) {
            Ok(raw) => BreakerFuture {
                breaker: Arc::clone(&self.breaker),
                raw: Some(raw),
                inner: Some(self.inner.call(req)),
                rejected: None,
                classify: Some(self.classify.clone()),
            },
            Err(why) => BreakerFuture {
                breaker: Arc::clone(&self.breaker),
                raw: None,
                inner: None,
                rejected: Some(why),
                classify: None,
            },
        }
    }
}

pin_project! {
    /// The response future of a [`BreakerService`]: the inner call with the
    /// breaker's permit riding along. No allocation.
    ///
    /// Completed, it records the classifier's verdict; dropped before, it
    /// records nothing and gives a half-open probe slot back. A call that
    /// panics records a failure as the panic unwinds out of `poll`, however
    /// it is caught (and one dropped while its thread panics, too).
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner call and records nothing.
    ///
    /// # Examples
    ///
    /// Dropped before it completes, a half-open probe gives its slot back:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::tower::BreakerLayer;
    /// use watertight::breaker::State;
    /// use watertight::{BreakerConfig, CircuitBreaker};
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let config = BreakerConfig::builder().half_open_calls(1).build().unwrap();
    /// let breaker: Arc<CircuitBreaker<Arc<ManualClock>, 64>> =
    ///     Arc::new(CircuitBreaker::new("pricing", config, clock.clone()));
    /// let mut svc = BreakerLayer::new(breaker.clone())
    ///     .layer(tower::service_fn(|_: ()| core::future::pending::<Result<(), ()>>()));
    ///
    /// for _ in 0..10 {
    ///     breaker.try_acquire().unwrap().failure();
    /// }
    /// clock.advance(Duration::from_secs(30));
    /// let probe = svc.call(()); // the one half-open probe
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// assert!(breaker.try_acquire().is_err()); // no second probe
    /// drop(probe); // cancelled: records nothing, frees the slot
    /// assert!(breaker.try_acquire().is_ok());
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct BreakerFuture<B: Guard, F, K> {
        breaker: Arc<B>,
        raw: Option<Raw>,
        #[pin]
        inner: Option<F>,
        rejected: Option<Rejection>,
        classify: Option<K>,
    }

    impl<B: Guard, F, K> PinnedDrop for BreakerFuture<B, F, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(raw) = take_raw(this.raw) {
                this.breaker.abandon(raw);
            }
        }
    }
}

impl<B: Guard, F, K, T, E> Future for BreakerFuture<B, F, K>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    type Output = Result<T, BreakerError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(why) = this.rejected.take() {
            return Poll::Ready(Err(BreakerError::Rejected(why)));
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            panic!("`BreakerFuture` polled after completion");
        };
        // A panic in the call or its classifier is a failure, recorded as
        // it unwinds (see `breaker::fail_on_unwind`).
        let classify = this.classify;
        let raw = take_raw(this.raw);
        let polled = fail_on_unwind(&**this.breaker, raw, || {
            let result = core::task::ready!(inner.poll(cx));
            let outcome = classify.take().map(|k| k.classify(&result));
            Poll::Ready((result, outcome))
        });
        let Poll::Ready((result, outcome)) = polled else {
            *this.raw = raw;
            return Poll::Pending;
        };
        this.inner.set(None);
        if let (Some(raw), Some(outcome)) = (raw, outcome) {
            this.breaker.finish(raw, outcome);
        }
        Poll::Ready(result.map_err(BreakerError::Inner))
    }
}

impl<B: Guard, F, K> fmt::Debug for BreakerFuture<B, F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerFuture")
            .field("rejected", &self.rejected)
            .field("running", &self.inner.is_some())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------

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
pub struct PolicyLayer<C, const N: usize, K = ErrorIsFailure, W = Inline<N>, B = C> {
    policy: Arc<Policy<C, N, W, B>>,
    classify: K,
}

impl<C, const N: usize, W, B> PolicyLayer<C, N, ErrorIsFailure, W, B> {
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
            classify: ErrorIsFailure,
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
pub struct PolicyService<S, C, const N: usize, K = ErrorIsFailure, W = Inline<N>, B = C> {
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
            dispatch::ByClassify(self.classify.clone()),
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
pub type PolicyFuture<C, const N: usize, S, Req, K = ErrorIsFailure, W = Inline<N>, B = C> =
    PolicyCall<Arc<Policy<C, N, W, B>>, dispatch::ServiceCall<S, Req>, dispatch::ByClassify<K>>;

/// How [`PolicyService`] starts a call and judges its result.
mod dispatch {
    use core::task::{Context, Poll};

    use tower_service::Service;

    use super::Classify;
    use crate::breaker::Outcome;
    use crate::policy::{Dispatch, Judge, Redispatch};

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
            match svc.poll_ready(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(e)) => Poll::Ready(Err(Err(e))),
                Poll::Ready(Ok(())) => {
                    let req = self.req.take().expect("the request is sent once");
                    let fut = svc.call(req);
                    self.service = None;
                    Poll::Ready(Ok(fut))
                }
            }
        }
    }

    /// The inner service and the request, for a retried call: each
    /// attempt readies the service and sends it a clone of the request.
    #[derive(Debug)]
    pub struct ServiceRetry<S, Req> {
        pub(super) service: Option<S>,
        pub(super) req: Option<Req>,
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
            match svc.poll_ready(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(e)) => Poll::Ready(Err(Err(e))),
                Poll::Ready(Ok(())) => {
                    let req = self
                        .req
                        .as_ref()
                        .expect("the request is back before each attempt");
                    Poll::Ready(Ok(svc.call(req.clone())))
                }
            }
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

    /// A tower [`Classify`] as the policy's classifier.
    #[derive(Debug, Clone)]
    pub struct ByClassify<K>(pub(super) K);

    impl<T, E, K: Classify<T, E>> Judge<Result<T, E>> for ByClassify<K> {
        fn judge(self, output: &Result<T, E>) -> Outcome {
            self.0.classify(output)
        }
    }
}

// ---------------------------------------------------------------------------
// Policy, with retries
// ---------------------------------------------------------------------------

/// A [`PolicyLayer`] whose services retry (made by
/// [`PolicyLayer::idempotent`]): for requests that are safe to send twice.
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
    K = ErrorIsFailure,
    W = Inline<N>,
    B = C,
    H = NoHint,
> {
    policy: Arc<Policy<C, N, W, B>>,
    classify: K,
    hint: H,
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
    K = ErrorIsFailure,
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
            dispatch::ByClassify(self.classify.clone()),
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
    K = ErrorIsFailure,
    W = Inline<N>,
    B = C,
    H = NoHint,
> = RetryCall<Arc<Policy<C, N, W, B>>, dispatch::ServiceRetry<S, Req>, dispatch::ByClassify<K>, H>;
