//! [`GlobalBulkheadLayer`]: a [`GlobalBulkhead`] in front of a tower
//! service, so that one limit holds for a whole fleet (features `tower` and
//! `redis`).

use alloc::boxed::Box;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use crate::redis::{GlobalBulkhead, GlobalError, Runtime};

/// The error of a [`GlobalBulkheadService`]: the global limit refused, or
/// the inner service failed.
///
/// # Examples
///
/// ```
/// use watertight::redis::GlobalError;
/// use watertight::tower::GlobalBulkheadError;
///
/// let e: GlobalBulkheadError<std::io::Error> = GlobalBulkheadError::Refused(GlobalError::Full);
/// assert!(e.is_refusal());
/// assert_eq!(e.to_string(), "global limit reached");
/// assert_eq!(GlobalBulkheadError::Inner("db down").into_inner(), Some("db down"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalBulkheadError<E> {
    /// The global limit refused (full, the wait timed out, the local cap,
    /// Redis unreachable with `FailClosed`, or closed): the inner service
    /// was not called. Answer 503.
    Refused(GlobalError),
    /// The inner service's own error.
    Inner(E),
}

impl<E> GlobalBulkheadError<E> {
    /// Whether the layer refused (the inner service was not called).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::GlobalBulkheadError;
    /// assert!(!GlobalBulkheadError::Inner("db down").is_refusal());
    /// ```
    pub fn is_refusal(&self) -> bool {
        matches!(self, GlobalBulkheadError::Refused(_))
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::GlobalError;
    /// use watertight::tower::GlobalBulkheadError;
    /// assert_eq!(GlobalBulkheadError::<()>::Refused(GlobalError::Full).into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            GlobalBulkheadError::Inner(e) => Some(e),
            GlobalBulkheadError::Refused(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for GlobalBulkheadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalBulkheadError::Refused(e) => fmt::Display::fmt(e, f),
            GlobalBulkheadError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for GlobalBulkheadError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalBulkheadError::Refused(e) => Some(e),
            GlobalBulkheadError::Inner(e) => Some(e),
        }
    }
}

/// A [`Layer`] that puts a [`GlobalBulkhead`] in front of a service: each
/// request holds a global permit (per call, or from the process's leased
/// share) until its response future completes, or is refused with
/// [`GlobalBulkheadError::Refused`] — at once by default, or after
/// waiting up to [`max_wait`](Self::max_wait).
///
/// The permit is taken in `call`, never in `poll_ready`, and the whole
/// state is the shared [`GlobalBulkhead`]: the service is `Clone`, every
/// clone counts against the same limit, and no `Buffer` is needed. The
/// response future is boxed (one allocation per request: the acquisition
/// is an `async fn` of the global bulkhead); it takes the instance polled
/// ready and leaves a clone in the service, so `S: Clone`.
///
/// # Examples
///
/// ```no_run
/// use core::time::Duration;
/// use std::convert::Infallible;
/// use axum::error_handling::HandleErrorLayer;
/// use axum::http::StatusCode;
/// use axum::{routing::get, Router};
/// use watertight::redis::{GlobalBulkhead, GlobalConfig};
/// use watertight::tower::{GlobalBulkheadError, GlobalBulkheadLayer};
///
/// async fn shed(_: GlobalBulkheadError<Infallible>) -> StatusCode {
///     StatusCode::SERVICE_UNAVAILABLE
/// }
///
/// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GlobalConfig::builder(20)
///     .lease(Duration::from_secs(3))
///     .leased(Duration::from_millis(500)) // no Redis call per request
///     .build()?;
/// let reports = GlobalBulkhead::connect("redis://127.0.0.1/", "reports", config)?;
/// let app: Router = Router::new().route("/report", get(|| async { "report" })).route_layer(
///     tower::ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(shed))
///         .layer(GlobalBulkheadLayer::new(reports).max_wait(Duration::from_millis(100))),
/// );
/// # let _ = app; Ok(()) }
/// ```
pub struct GlobalBulkheadLayer<R: Runtime> {
    limit: GlobalBulkhead<R>,
    max_wait: Option<Duration>,
}

impl<R: Runtime> Clone for GlobalBulkheadLayer<R> {
    fn clone(&self) -> Self {
        GlobalBulkheadLayer {
            limit: self.limit.clone(),
            max_wait: self.max_wait,
        }
    }
}

impl<R: Runtime> fmt::Debug for GlobalBulkheadLayer<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalBulkheadLayer")
            .field("limit", &self.limit)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl<R: Runtime> GlobalBulkheadLayer<R> {
    /// One permit of `limit` per request, refused at once when none is
    /// free (inbound shedding).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// use watertight::tower::GlobalBulkheadLayer;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "reports", GlobalConfig::builder(20).build().unwrap()).unwrap();
    /// let layer = GlobalBulkheadLayer::new(g);
    /// assert_eq!(layer.limit().name(), "reports");
    /// # });
    /// ```
    pub fn new(limit: GlobalBulkhead<R>) -> Self {
        GlobalBulkheadLayer {
            limit,
            max_wait: None,
        }
    }

    /// Each request waits up to `d` for a permit before it is refused.
    ///
    /// # Examples
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # use watertight::tower::GlobalBulkheadLayer;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "reports", GlobalConfig::builder(20).build().unwrap()).unwrap();
    /// let layer = GlobalBulkheadLayer::new(g).max_wait(Duration::from_millis(100));
    /// # let _ = layer; });
    /// ```
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = Some(d);
        self
    }

    /// The global bulkhead.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::redis::{GlobalBulkhead, GlobalConfig};
    /// # use watertight::tower::GlobalBulkheadLayer;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "reports", GlobalConfig::builder(20).build().unwrap()).unwrap();
    /// let layer = GlobalBulkheadLayer::new(g);
    /// assert_eq!(layer.limit().config().limit(), 20);
    /// # });
    /// ```
    pub fn limit(&self) -> &GlobalBulkhead<R> {
        &self.limit
    }
}

impl<S, R: Runtime> Layer<S> for GlobalBulkheadLayer<R> {
    type Service = GlobalBulkheadService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        GlobalBulkheadService {
            inner,
            limit: self.limit.clone(),
            max_wait: self.max_wait,
        }
    }
}

/// The service of a [`GlobalBulkheadLayer`]. `Clone` when the inner
/// service is; every clone counts against the same limit.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, ServiceExt};
/// use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError};
/// use watertight::tower::{GlobalBulkheadError, GlobalBulkheadLayer};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalConfig::builder(20).build().unwrap();
/// // Nothing listens there: FailClosed refuses, and the inner service is not called.
/// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "reports", config).unwrap();
/// let svc = GlobalBulkheadLayer::new(g)
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// let err = svc.oneshot(7).await.unwrap_err();
/// assert!(matches!(err, GlobalBulkheadError::Refused(GlobalError::StoreUnavailable(_))));
/// # });
/// ```
pub struct GlobalBulkheadService<S, R: Runtime> {
    inner: S,
    limit: GlobalBulkhead<R>,
    max_wait: Option<Duration>,
}

impl<S: Clone, R: Runtime> Clone for GlobalBulkheadService<S, R> {
    fn clone(&self) -> Self {
        GlobalBulkheadService {
            inner: self.inner.clone(),
            limit: self.limit.clone(),
            max_wait: self.max_wait,
        }
    }
}

impl<S, R: Runtime> fmt::Debug for GlobalBulkheadService<S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalBulkheadService")
            .field("limit", &self.limit)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

/// The response future of a [`GlobalBulkheadService`]: the acquisition,
/// then the inner service's call with the permit held. Boxed (`Send`).
///
/// # Cancel safety
///
/// Dropped at any point, it gives back what it took: a permit (its drop
/// releases it) or a grant Redis made after the drop (the keeper releases
/// it).
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, Service};
/// use watertight::redis::{GlobalBulkhead, GlobalConfig};
/// use watertight::tower::GlobalBulkheadLayer;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let g = GlobalBulkhead::connect("redis://127.0.0.1:1/", "reports", GlobalConfig::builder(2).build().unwrap()).unwrap();
/// let mut svc = GlobalBulkheadLayer::new(g)
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// let fut = svc.call(1);
/// assert_eq!(format!("{fut:?}"), "GlobalBulkheadFuture");
/// # });
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct GlobalBulkheadFuture<T, E> {
    fut: Pin<Box<dyn Future<Output = Result<T, GlobalBulkheadError<E>>> + Send>>,
}

impl<T, E> fmt::Debug for GlobalBulkheadFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GlobalBulkheadFuture")
    }
}

impl<T, E> Future for GlobalBulkheadFuture<T, E> {
    type Output = Result<T, GlobalBulkheadError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.fut.as_mut().poll(cx)
    }
}

impl<S, R, Req> Service<Req> for GlobalBulkheadService<S, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    S::Response: 'static,
    R: Runtime,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = GlobalBulkheadError<S::Error>;
    type Future = GlobalBulkheadFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(GlobalBulkheadError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The instance polled ready goes with the request; `self` keeps a
        // clone, to be polled ready before its next call.
        let clone = self.inner.clone();
        let mut ready = core::mem::replace(&mut self.inner, clone);
        let limit = self.limit.clone();
        let max_wait = self.max_wait;
        GlobalBulkheadFuture {
            fut: Box::pin(async move {
                let permit = match max_wait {
                    None => limit.try_acquire().await,
                    Some(d) => limit.acquire_timeout(d).await,
                }
                .map_err(GlobalBulkheadError::Refused)?;
                let out = ready.call(req).await.map_err(GlobalBulkheadError::Inner);
                drop(permit);
                out
            }),
        }
    }
}
