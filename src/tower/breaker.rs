//! [`BreakerLayer`]: a [`CircuitBreaker`] in front of a tower service; its
//! service, response future and error.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::classify::{Classify, ErrIsFailure};
use crate::breaker::{Admission, CircuitBreaker, Guard, Inline, Rejection, WindowStorage};
use crate::clock::Clock;

/// The error of a [`BreakerService`]: the breaker refused, or the inner
/// service failed.
///
/// Shaped like [`BulkheadError`] (`Rejected` / `Inner`), so the errors of
/// the tower layers read alike. It carries what
/// [`CallError`](crate::breaker::CallError) carries (its `Failed` is `Inner` here),
/// and converts to and from it with `From`, for code that handles both the
/// breaker's own `call` and its tower service.
///
/// [`BulkheadError`]: super::BulkheadError
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

impl<E> From<crate::breaker::CallError<E>> for BreakerError<E> {
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
    fn from(e: crate::breaker::CallError<E>) -> Self {
        match e {
            crate::breaker::CallError::Rejected(r) => BreakerError::Rejected(r),
            crate::breaker::CallError::Failed(e) => BreakerError::Inner(e),
        }
    }
}

impl<E> From<BreakerError<E>> for crate::breaker::CallError<E> {
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
            BreakerError::Rejected(r) => crate::breaker::CallError::Rejected(r),
            BreakerError::Inner(e) => crate::breaker::CallError::Failed(e),
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
pub struct BreakerLayer<C, const N: usize, K = ErrIsFailure, W = Inline<N>> {
    breaker: Arc<CircuitBreaker<C, N, (), W>>,
    classify: K,
}

impl<C, const N: usize, W> BreakerLayer<C, N, ErrIsFailure, W> {
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
            classify: ErrIsFailure,
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
pub struct BreakerService<S, C, const N: usize, K = ErrIsFailure, W = Inline<N>> {
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
                admission: Admission::admitted(raw, self.classify.clone()),
                inner: Some(self.inner.call(req)),
                rejected: None,
            },
            Err(why) => BreakerFuture {
                breaker: Arc::clone(&self.breaker),
                admission: Admission::refused(),
                inner: None,
                rejected: Some(why),
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
        // The permit (taken when the service was called) and the
        // classifier: the breaker's seam for call futures.
        admission: Admission<K>,
        #[pin]
        inner: Option<F>,
        rejected: Option<Rejection>,
    }

    impl<B: Guard, F, K> PinnedDrop for BreakerFuture<B, F, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.admission.abandon(&**this.breaker);
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
        // it unwinds (see `breaker::fail_on_unwind`); the seam records the
        // outcome once the call is ready. Admitted when the service was
        // called, it holds its permit here, so the breaker is not asked
        // again (a refusal would be `rejected`, above).
        let polled = core::task::ready!(this.admission.poll(&**this.breaker, inner, cx));
        this.inner.set(None);
        Poll::Ready(match polled {
            Ok(result) => result.map_err(BreakerError::Inner),
            Err(why) => Err(BreakerError::Rejected(why)),
        })
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
