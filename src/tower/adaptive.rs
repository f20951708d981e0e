//! [`AdaptiveLayer`]: an [`AdaptiveBulkhead`] around a tower service.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::bulkhead::BulkheadError;
use super::classify::ErrIsFailure;
use crate::clock::Clock;
use crate::limit::{AdaptiveBulkhead, LimitAlgorithm, OwnedAdaptivePermit, Signal};

/// Says what a call's result means for a limit algorithm: a
/// [`Signal`]. Implemented for every `Fn(&Result<T, E>) -> Signal` and for
/// [`ErrIsFailure`] (`Ok` is a success, `Err` a failure: no congestion
/// signal at all, so an HTTP client should map its 429 and 503 to
/// [`Signal::Dropped`] with a closure).
///
/// # Examples
///
/// ```
/// use watertight::limit::Signal;
/// use watertight::tower::{ErrIsFailure, SignalOf};
///
/// let by_status = |r: &Result<u16, ()>| match r {
///     Ok(429 | 503) => Signal::Dropped,
///     Ok(_) => Signal::Success,
///     Err(()) => Signal::Failure,
/// };
/// assert_eq!(by_status.signal_of(&Ok(503)), Signal::Dropped);
/// assert_eq!(ErrIsFailure.signal_of(&Ok::<u16, ()>(503)), Signal::Success);
/// ```
pub trait SignalOf<T, E> {
    /// The signal of `result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::limit::Signal;
    /// use watertight::tower::{ErrIsFailure, SignalOf};
    ///
    /// assert_eq!(ErrIsFailure.signal_of(&Err::<(), _>("reset")), Signal::Failure);
    /// ```
    fn signal_of(&self, result: &Result<T, E>) -> Signal;
}

impl<T, E, F: Fn(&Result<T, E>) -> Signal> SignalOf<T, E> for F {
    fn signal_of(&self, result: &Result<T, E>) -> Signal {
        self(result)
    }
}

impl<T, E> SignalOf<T, E> for ErrIsFailure {
    fn signal_of(&self, result: &Result<T, E>) -> Signal {
        match result {
            Ok(_) => Signal::Success,
            Err(_) => Signal::Failure,
        }
    }
}

/// A [`Layer`] that runs every call through one shared
/// [`AdaptiveBulkhead`]: a call that finds the limit reached is refused at
/// once with [`BulkheadError::Rejected`] (the inner service is not called);
/// one that is let through records its round trip and its [`Signal`]
/// (from the classifier) when its response future completes. A response
/// future dropped before it completes gives its slot back and records
/// nothing.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
/// use watertight::tower::AdaptiveLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let aimd = Aimd::builder().min_limit(1).initial_limit(4).build().unwrap();
/// let limit = Arc::new(AdaptiveBulkhead::with_window("search", aimd, Duration::ZERO, 1, clock));
/// // The search service answers 503 when it is overloaded.
/// let mut svc = AdaptiveLayer::new(limit.clone())
///     .classify(|r: &Result<u16, ()>| match r {
///         Ok(503) => Signal::Dropped,
///         Ok(_) => Signal::Success,
///         Err(()) => Signal::Failure,
///     })
///     .layer(tower::service_fn(|_q: &str| async { Ok::<u16, ()>(503) }));
///
/// assert_eq!(svc.ready().await.unwrap().call("rust").await, Ok(503));
/// assert_eq!(limit.limit(), 3); // floor(4 × 0.9)
/// # });
/// ```
pub struct AdaptiveLayer<C: Clock, A: LimitAlgorithm, K = ErrIsFailure> {
    limit: Arc<AdaptiveBulkhead<C, A>>,
    classify: K,
}

impl<C: Clock, A: LimitAlgorithm> AdaptiveLayer<C, A> {
    /// A layer over `limit`, classifying `Ok` as a success and `Err` as a
    /// failure until [`classify`](Self::classify) says otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Gradient2};
    /// use watertight::tower::AdaptiveLayer;
    ///
    /// let limit = Arc::new(AdaptiveBulkhead::new("db", Gradient2::new(), StdClock));
    /// let layer = AdaptiveLayer::new(limit.clone());
    /// assert_eq!(layer.limit().limit(), 20);
    /// ```
    pub fn new(limit: Arc<AdaptiveBulkhead<C, A>>) -> Self {
        AdaptiveLayer {
            limit,
            classify: ErrIsFailure,
        }
    }
}

impl<C: Clock, A: LimitAlgorithm, K> AdaptiveLayer<C, A, K> {
    /// The classifier that turns a call's result into a [`Signal`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd, Signal};
    /// use watertight::tower::AdaptiveLayer;
    ///
    /// let limit = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
    /// let _layer = AdaptiveLayer::new(limit).classify(|r: &Result<u16, ()>| match r {
    ///     Ok(429 | 503) => Signal::Dropped,
    ///     Ok(_) => Signal::Success,
    ///     Err(()) => Signal::Failure,
    /// });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> AdaptiveLayer<C, A, K2> {
        AdaptiveLayer {
            limit: self.limit,
            classify,
        }
    }

    /// The adaptive bulkhead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    /// use watertight::tower::AdaptiveLayer;
    ///
    /// let limit = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
    /// assert!(Arc::ptr_eq(AdaptiveLayer::new(limit.clone()).limit(), &limit));
    /// ```
    pub fn limit(&self) -> &Arc<AdaptiveBulkhead<C, A>> {
        &self.limit
    }
}

impl<C: Clock, A: LimitAlgorithm, K: Clone> Clone for AdaptiveLayer<C, A, K> {
    fn clone(&self) -> Self {
        AdaptiveLayer {
            limit: self.limit.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<C: Clock, A: LimitAlgorithm, K> fmt::Debug for AdaptiveLayer<C, A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLayer")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clock, A: LimitAlgorithm, K: Clone> Layer<S> for AdaptiveLayer<C, A, K> {
    type Service = AdaptiveService<S, C, A, K>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveService {
            inner,
            limit: self.limit.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// The service of [`AdaptiveLayer`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::AcquireError;
/// use watertight::clock::StdClock;
/// use watertight::limit::{AdaptiveBulkhead, Aimd};
/// use watertight::tower::{AdaptiveLayer, BulkheadError};
///
/// let aimd = Aimd::builder().min_limit(1).initial_limit(1).build().unwrap();
/// let limit = Arc::new(AdaptiveBulkhead::new("db", aimd, StdClock));
/// let mut svc = AdaptiveLayer::new(limit)
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n) }));
/// let first = svc.call(1); // holds the one slot
/// let second = futures_lite::future::block_on(svc.call(2));
/// assert_eq!(second, Err(BulkheadError::Rejected(AcquireError::Full)));
/// assert_eq!(futures_lite::future::block_on(first), Ok(1));
/// ```
pub struct AdaptiveService<S, C: Clock, A: LimitAlgorithm, K = ErrIsFailure> {
    inner: S,
    limit: Arc<AdaptiveBulkhead<C, A>>,
    classify: K,
}

impl<S: Clone, C: Clock, A: LimitAlgorithm, K: Clone> Clone for AdaptiveService<S, C, A, K> {
    fn clone(&self) -> Self {
        AdaptiveService {
            inner: self.inner.clone(),
            limit: self.limit.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C: Clock, A: LimitAlgorithm, K> fmt::Debug for AdaptiveService<S, C, A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveService")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<S, C, A, K, Req, T, E> Service<Req> for AdaptiveService<S, C, A, K>
where
    S: Service<Req, Response = T, Error = E>,
    C: Clock,
    A: LimitAlgorithm,
    K: SignalOf<T, E> + Clone,
{
    type Response = T;
    type Error = BulkheadError<E>;
    type Future = AdaptiveFuture<S::Future, C, A, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(BulkheadError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.limit.try_acquire_owned() {
            Ok(permit) => AdaptiveFuture {
                fut: Some(self.inner.call(req)),
                permit: Some(permit),
                refused: None,
                classify: self.classify.clone(),
            },
            Err(why) => AdaptiveFuture {
                fut: None,
                permit: None,
                refused: Some(why),
                classify: self.classify.clone(),
            },
        }
    }
}

pin_project! {
    /// The response future of [`AdaptiveService`]: holds the permit while
    /// the inner future runs, and records the call's signal when it
    /// completes.
    ///
    /// # Cancel safety
    ///
    /// Dropping it gives the slot back and records nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use watertight::clock::StdClock;
    /// use watertight::limit::{AdaptiveBulkhead, Aimd};
    /// use watertight::tower::AdaptiveLayer;
    ///
    /// let limit = Arc::new(AdaptiveBulkhead::new("db", Aimd::new(), StdClock));
    /// let mut svc = AdaptiveLayer::new(limit.clone())
    ///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n) }));
    /// let call = svc.call(7);
    /// assert_eq!(limit.bulkhead().in_flight(), 1);
    /// drop(call); // cancelled
    /// assert_eq!(limit.bulkhead().in_flight(), 0);
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct AdaptiveFuture<F, C: Clock, A: LimitAlgorithm, K> {
        #[pin]
        fut: Option<F>,
        permit: Option<OwnedAdaptivePermit<C, A>>,
        refused: Option<crate::bulkhead::AcquireError>,
        classify: K,
    }
}

impl<F, C: Clock, A: LimitAlgorithm, K> fmt::Debug for AdaptiveFuture<F, C, A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveFuture")
            .field("running", &self.permit.is_some())
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<F, C, A, K, T, E> Future for AdaptiveFuture<F, C, A, K>
where
    F: Future<Output = Result<T, E>>,
    C: Clock,
    A: LimitAlgorithm,
    K: SignalOf<T, E>,
{
    type Output = Result<T, BulkheadError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(why) = this.refused.take() {
            return Poll::Ready(Err(BulkheadError::Rejected(why)));
        }
        let Some(fut) = this.fut.as_pin_mut() else {
            return Poll::Pending; // polled after completion
        };
        let out = core::task::ready!(fut.poll(cx));
        if let Some(permit) = this.permit.take() {
            permit.record(this.classify.signal_of(&out));
        }
        Poll::Ready(out.map_err(BulkheadError::Inner))
    }
}
