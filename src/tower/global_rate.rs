//! [`GlobalRateLimitLayer`]: a [`GlobalRateLimiter`] in front of a tower
//! service, for inbound shedding fleet-wide (features `tower` and `redis`).

use alloc::boxed::Box;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use crate::redis::{GlobalRateError, GlobalRateLimiter, RateKey, RateKeyError, Runtime};

/// The error of a [`GlobalRateLimitService`]: the global limiter refused,
/// the request's key could not be made, or the inner service failed.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::redis::{GlobalRateError, RateKeyError};
/// use watertight::tower::GlobalRateLimitError;
///
/// let e: GlobalRateLimitError<()> =
///     GlobalRateLimitError::Refused(GlobalRateError::Limited { retry_after: Duration::from_millis(5) });
/// assert_eq!(e.retry_after(), Some(Duration::from_millis(5)));
/// assert!(e.is_refusal());
/// let bad: GlobalRateLimitError<&str> = GlobalRateLimitError::BadKey(RateKeyError::Empty);
/// assert_eq!(bad.to_string(), "bad rate key: empty rate key");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GlobalRateLimitError<E> {
    /// The global limiter refused (or Redis was unreachable and the
    /// fallback refused): the inner service was not called. Answer 429
    /// with `Retry-After` when [`retry_after`](Self::retry_after) is
    /// `Some`, 503 otherwise.
    Refused(GlobalRateError),
    /// The key function could not make a key of the request (an empty or
    /// over-long client id): the inner service was not called. Answer 400.
    BadKey(RateKeyError),
    /// The inner service's own error.
    Inner(E),
}

impl<E> GlobalRateLimitError<E> {
    /// The time until a cell conforms, for a `Retry-After`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::GlobalRateLimitError;
    ///
    /// assert_eq!(GlobalRateLimitError::Inner("db down").retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GlobalRateLimitError::Refused(e) => e.retry_after(),
            _ => None,
        }
    }

    /// Whether the layer refused (the inner service was not called).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::GlobalRateLimitError;
    ///
    /// assert!(!GlobalRateLimitError::Inner("db down").is_refusal());
    /// ```
    pub fn is_refusal(&self) -> bool {
        !matches!(self, GlobalRateLimitError::Inner(_))
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::GlobalRateLimitError;
    ///
    /// assert_eq!(GlobalRateLimitError::Inner("db down").into_inner(), Some("db down"));
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            GlobalRateLimitError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for GlobalRateLimitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalRateLimitError::Refused(e) => fmt::Display::fmt(e, f),
            GlobalRateLimitError::BadKey(e) => write!(f, "bad rate key: {e}"),
            GlobalRateLimitError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for GlobalRateLimitError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            GlobalRateLimitError::Refused(e) => Some(e),
            GlobalRateLimitError::BadKey(e) => Some(e),
            GlobalRateLimitError::Inner(e) => Some(e),
        }
    }
}

/// A [`Layer`] that puts a [`GlobalRateLimiter`] in front of a service:
/// each request takes `cells` (1 by default) of the limit of the key that
/// `key` names for it, or is refused at once with
/// [`GlobalRateLimitError::Refused`] and the exact `retry_after` (inbound
/// shedding: 429 and `Retry-After`).
///
/// As [`RateLimitLayer`](super::RateLimitLayer), the cells are taken in
/// `call`, never in `poll_ready`, and the whole state is the shared
/// limiter (in Redis): the service is `Clone`, every clone asks the same
/// limit, and no `Buffer` is needed. The check is a Redis round trip, so
/// the response future is boxed (one allocation per request, beside
/// redis-rs's own); it takes the instance polled ready and leaves a clone
/// in the service, so `S: Clone`.
///
/// # Examples
///
/// ```no_run
/// use std::convert::Infallible;
/// use axum::error_handling::HandleErrorLayer;
/// use axum::http::{header, Request, StatusCode};
/// use axum::response::{IntoResponse, Response};
/// use axum::{body::Body, routing::get, Router};
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
/// use watertight::tower::{GlobalRateLimitError, GlobalRateLimitLayer};
///
/// async fn shed(err: GlobalRateLimitError<Infallible>) -> Response {
///     match (&err, err.retry_after()) {
///         (GlobalRateLimitError::BadKey(_), _) => StatusCode::BAD_REQUEST.into_response(),
///         (_, Some(wait)) => {
///             let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
///             let headers = [(header::RETRY_AFTER, secs.to_string())];
///             (StatusCode::TOO_MANY_REQUESTS, headers).into_response()
///         }
///         _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
///     }
/// }
///
/// # #[allow(dead_code)] async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = GlobalRateConfig::builder(Quota::per_second(20).burst(5)).build()?;
/// let api = GlobalRateLimiter::connect("redis://127.0.0.1/", "api", config)?;
/// // Each API key gets 20 requests a second across the whole fleet.
/// let per_client = GlobalRateLimitLayer::new(api, |req: &Request<Body>| {
///     RateKey::new(req.headers().get("x-api-key").map_or(&b""[..], |v| v.as_bytes()))
/// });
/// let app: Router = Router::new().route("/search", get(|| async { "results" })).route_layer(
///     tower::ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(shed))
///         .layer(per_client),
/// );
/// # let _ = app; Ok(()) }
/// ```
pub struct GlobalRateLimitLayer<R: Runtime, F> {
    limiter: GlobalRateLimiter<R>,
    key: F,
    cells: u32,
}

impl<R: Runtime, F: Clone> Clone for GlobalRateLimitLayer<R, F> {
    fn clone(&self) -> Self {
        GlobalRateLimitLayer {
            limiter: self.limiter.clone(),
            key: self.key.clone(),
            cells: self.cells,
        }
    }
}

impl<R: Runtime, F> fmt::Debug for GlobalRateLimitLayer<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalRateLimitLayer")
            .field("limiter", &self.limiter)
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F> GlobalRateLimitLayer<R, F> {
    /// One cell of `limiter` per request, of the key `key` names for it
    /// (return `Ok(RateKey::whole())` for one limit for everyone).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::rate::Quota;
    /// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
    /// use watertight::tower::GlobalRateLimitLayer;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let config = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
    /// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
    /// let layer = GlobalRateLimitLayer::new(api, |user: &(String, u32)| RateKey::new(&user.0));
    /// assert_eq!(layer.limiter().name(), "api");
    /// # });
    /// ```
    pub fn new<Req>(limiter: GlobalRateLimiter<R>, key: F) -> Self
    where
        F: Fn(&Req) -> Result<RateKey, RateKeyError>,
    {
        GlobalRateLimitLayer {
            limiter,
            key,
            cells: 1,
        }
    }

    /// Each request takes `n` cells (a request for more than the burst is
    /// refused with `ExceedsBurst`; zero cells admits every request).
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota;
    /// # use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
    /// # use watertight::tower::GlobalRateLimitLayer;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// let heavy = GlobalRateLimitLayer::new(api, |_: &u32| Ok(RateKey::whole())).cells(3);
    /// # let _ = heavy; });
    /// ```
    pub fn cells(mut self, n: u32) -> Self {
        self.cells = n;
        self
    }

    /// The limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use watertight::rate::Quota;
    /// # use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
    /// # use watertight::tower::GlobalRateLimitLayer;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap()).unwrap();
    /// let layer = GlobalRateLimitLayer::new(api, |_: &u32| Ok(RateKey::whole()));
    /// assert_eq!(layer.limiter().config().quota(), Quota::per_second(5));
    /// # });
    /// ```
    pub fn limiter(&self) -> &GlobalRateLimiter<R> {
        &self.limiter
    }
}

impl<S, R: Runtime, F: Clone> Layer<S> for GlobalRateLimitLayer<R, F> {
    type Service = GlobalRateLimitService<S, R, F>;

    fn layer(&self, inner: S) -> Self::Service {
        GlobalRateLimitService {
            inner,
            limiter: self.limiter.clone(),
            key: self.key.clone(),
            cells: self.cells,
        }
    }
}

/// The service of a [`GlobalRateLimitLayer`]. `Clone` when the inner
/// service and the key function are; every clone asks the same limit.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, ServiceExt};
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateError, GlobalRateLimiter, RateKey};
/// use watertight::tower::{GlobalRateLimitError, GlobalRateLimitLayer};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
/// // Nothing listens there: FailClosed refuses, and the inner service is not called.
/// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
/// let svc = GlobalRateLimitLayer::new(api, |_: &u32| Ok(RateKey::whole()))
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// let err = svc.oneshot(7).await.unwrap_err();
/// assert!(matches!(err, GlobalRateLimitError::Refused(GlobalRateError::StoreUnavailable(_))));
/// # });
/// ```
pub struct GlobalRateLimitService<S, R: Runtime, F> {
    inner: S,
    limiter: GlobalRateLimiter<R>,
    key: F,
    cells: u32,
}

impl<S: Clone, R: Runtime, F: Clone> Clone for GlobalRateLimitService<S, R, F> {
    fn clone(&self) -> Self {
        GlobalRateLimitService {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            key: self.key.clone(),
            cells: self.cells,
        }
    }
}

impl<S, R: Runtime, F> fmt::Debug for GlobalRateLimitService<S, R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalRateLimitService")
            .field("limiter", &self.limiter)
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

/// The response future of a [`GlobalRateLimitService`]: the check in
/// Redis, then the inner service's call. Boxed (`Send`).
///
/// # Cancel safety
///
/// Dropped before Redis answers, the inner service is not called; a cell
/// the check took is spent (lost, never invented).
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, Service};
/// use watertight::rate::Quota;
/// use watertight::redis::{GlobalRateConfig, GlobalRateLimiter, RateKey};
/// use watertight::tower::GlobalRateLimitLayer;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let config = GlobalRateConfig::builder(Quota::per_second(5)).build().unwrap();
/// let api = GlobalRateLimiter::connect("redis://127.0.0.1:1/", "api", config).unwrap();
/// let mut svc = GlobalRateLimitLayer::new(api, |_: &u32| Ok(RateKey::whole()))
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// let fut = svc.call(1);
/// assert_eq!(format!("{fut:?}"), "GlobalRateLimitFuture");
/// # });
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct GlobalRateLimitFuture<T, E> {
    fut: Pin<Box<dyn Future<Output = Result<T, GlobalRateLimitError<E>>> + Send>>,
}

impl<T, E> fmt::Debug for GlobalRateLimitFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GlobalRateLimitFuture")
    }
}

impl<T, E> Future for GlobalRateLimitFuture<T, E> {
    type Output = Result<T, GlobalRateLimitError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.fut.as_mut().poll(cx)
    }
}

impl<S, R, F, Req> Service<Req> for GlobalRateLimitService<S, R, F>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    S::Response: 'static,
    R: Runtime,
    F: Fn(&Req) -> Result<RateKey, RateKeyError>,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = GlobalRateLimitError<S::Error>;
    type Future = GlobalRateLimitFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(GlobalRateLimitError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let key = (self.key)(&req);
        // The instance polled ready goes with the request; `self` keeps a
        // clone, to be polled ready before its next call.
        let clone = self.inner.clone();
        let mut ready = core::mem::replace(&mut self.inner, clone);
        let limiter = self.limiter.clone();
        let cells = self.cells;
        GlobalRateLimitFuture {
            fut: Box::pin(async move {
                let key = key.map_err(GlobalRateLimitError::BadKey)?;
                limiter
                    .check_n(&key, cells)
                    .await
                    .map_err(GlobalRateLimitError::Refused)?;
                ready.call(req).await.map_err(GlobalRateLimitError::Inner)
            }),
        }
    }
}
