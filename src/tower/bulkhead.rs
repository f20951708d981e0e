//! [`BulkheadLayer`]: a [`Bulkhead`] in front of a tower service; its
//! service, response future and error, and how it asks for a permit
//! ([`Admission`]: [`FailFast`] or [`MaxWait`]).

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::bulkhead::{AcquireError, AcquireOwnedTimeout, Bulkhead, OwnedPermit};
use crate::clock::Timer;

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
