//! [`RateLimitLayer`]: a [`RateLimiter`] in front of a tower service; its
//! service, response futures and error (see [`RateLimitLayer`] for the two
//! forms and why the cells are taken in `call`).

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::bulkhead::{FailFast, MaxWait};
use crate::clock::{Clock, Instant, Timer};
use crate::rate::{Begin, KeyedError, KeyedRateLimiter, RateError, RateLimiter};

/// The error of a [`RateLimitService`]: the limiter refused the request, or
/// the inner service failed.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::tower::RateLimitError;
///
/// let e: RateLimitError<&str> = RateLimitError::Limited { retry_after: Duration::from_millis(20) };
/// assert_eq!(e.retry_after(), Some(Duration::from_millis(20)));
/// assert!(e.is_refusal());
/// assert_eq!(e.to_string(), "rate limited: retry after 20ms");
/// assert_eq!(RateLimitError::Inner("boom").into_inner(), Some("boom"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RateLimitError<E> {
    /// The cells do not conform (within the max wait, in the waiting form):
    /// the inner service was not called. Answer 429 (or 503) with
    /// `Retry-After`.
    Limited {
        /// How long from the refusal until the cells conform (exact, on the
        /// limiter's clock).
        retry_after: Duration,
    },
    /// Each request costs more cells than the quota's burst, so none can
    /// ever conform: a configuration error, not a rate.
    ExceedsBurst {
        /// Cells per request.
        requested: u32,
        /// The quota's burst.
        burst: u32,
    },
    /// A keyed layer's new key found its set of the table held by live
    /// keys (see [`KeyedError::Full`]): the inner service was not called.
    /// Answer 429 (or 503) with `Retry-After`, as for `Limited`.
    TableFull {
        /// How long until a slot of the key's set frees.
        retry_after: Duration,
    },
    /// The inner service's own error.
    Inner(E),
}

impl<E> RateLimitError<E> {
    /// The time until the cells conform, for a `Retry-After`; `None` unless
    /// [`Limited`](Self::Limited).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::RateLimitError;
    ///
    /// let never: RateLimitError<()> = RateLimitError::ExceedsBurst { requested: 20, burst: 10 };
    /// assert_eq!(never.retry_after(), None);
    /// assert_eq!(RateLimitError::Inner("db down").retry_after(), None);
    /// ```
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            RateLimitError::Limited { retry_after } | RateLimitError::TableFull { retry_after } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }

    /// Whether the limiter refused (the inner service was not called).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::RateLimitError;
    ///
    /// let never: RateLimitError<()> = RateLimitError::ExceedsBurst { requested: 20, burst: 10 };
    /// assert!(never.is_refusal());
    /// assert!(!RateLimitError::Inner("db down").is_refusal());
    /// ```
    pub const fn is_refusal(&self) -> bool {
        !matches!(self, RateLimitError::Inner(_))
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::tower::RateLimitError;
    ///
    /// assert_eq!(RateLimitError::Inner("db down").into_inner(), Some("db down"));
    /// let refused: RateLimitError<&str> = RateLimitError::Limited { retry_after: Duration::from_secs(1) };
    /// assert_eq!(refused.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            RateLimitError::Inner(e) => Some(e),
            _ => None,
        }
    }

    fn refused_keyed(why: KeyedError) -> Self {
        match why {
            KeyedError::Rate(why) => Self::refused(why),
            KeyedError::Full { retry_after, .. } => RateLimitError::TableFull { retry_after },
        }
    }

    fn refused(why: RateError) -> Self {
        match why {
            RateError::Limited(n) => RateLimitError::Limited {
                retry_after: n.retry_after(),
            },
            RateError::ExceedsBurst { requested, burst } => {
                RateLimitError::ExceedsBurst { requested, burst }
            }
        }
    }
}

impl<E: fmt::Display> fmt::Display for RateLimitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimitError::Limited { retry_after } => {
                write!(f, "rate limited: retry after {retry_after:?}")
            }
            RateLimitError::ExceedsBurst { requested, burst } => write!(
                f,
                "each request takes {requested} cells but the rate limit's burst is {burst}"
            ),
            RateLimitError::TableFull { retry_after } => {
                write!(f, "rate limit table full: retry after {retry_after:?}")
            }
            RateLimitError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for RateLimitError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            RateLimitError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

/// A [`Layer`] that puts a [`RateLimiter`] in front of a service.
///
/// `L` is where the cells come from: `Arc<RateLimiter<C>>` (see
/// [Keyed limits](Self#keyed-limits)). The layer and its services are
/// `Clone`, and every clone asks the same limiter.
///
/// Two forms, in the bulkhead layer's modes:
///
/// - **inbound, [`FailFast`]** (the default): each request takes its cells
///   in `call` or is refused at once with [`RateLimitError::Limited`] and
///   its exact `retry_after`, which a server answers with 429 (or 503) and
///   `Retry-After`;
/// - **outbound, [`MaxWait`]** ([`max_wait`](RateLimitLayer::max_wait)):
///   each request reserves its cells in `call` and waits up to the max wait
///   for them to conform, then calls the inner service; a request whose
///   cells would conform only later is refused at once, not after sleeping
///   to fail.
///
/// # Cells are taken in `call`, not in `poll_ready`
///
/// tower's contract lets `poll_ready` reserve capacity for the next `call`,
/// and tower's own `RateLimit` does: its window lives in the service, and a
/// `poll_ready` that finds the window spent sleeps until the next one. That
/// is why it cannot be `Clone` (a clone would carry a copy of the window,
/// tower#794), and why it is put behind a `Buffer` to be one; under axum
/// that still did not hold a limit (axum#2634: the state lives in a service
/// that axum clones), and a cap of 5 a second let 1,500 of 1,500 concurrent
/// requests through (axum#3682). Here the whole state is the shared [`RateLimiter`], and the
/// service holds nothing of its own but an [`Arc`] of it. The cells are
/// taken in `call`, once per request actually made:
///
/// - a clone made per request — axum's router clones the route's service,
///   polls it ready and calls it, for every request — asks the same limiter,
///   so the limit holds however the service is cloned, with no `Buffer`
///   (`tests/rate_http.rs` sends 100 requests through axum at a burst of 5:
///   5 reach the handler);
/// - a service polled ready and then not called (a balancer that polls
///   several, a request dropped between the two) spends nothing, where a
///   cell reserved in `poll_ready` would be held by a clone that may be
///   dropped, or spent on a request never made;
/// - a rate limit is a verdict per request, not backpressure: a
///   `poll_ready` that stayed `Pending` until the next cell would make a
///   server queue its clients instead of shedding them with a 429.
///
/// So `poll_ready` is the inner service's alone, as in every layer of this
/// module. In the [`MaxWait`] form, `call` reserves the cells (so requests
/// are served in the order they were called) and fixes the deadline; the
/// response future sleeps until the cells conform and only then calls the
/// inner service: the form needs `S: Clone`, and `call` keeps a clone while
/// the future takes the instance that was polled ready (tower's usual way
/// to call a service later).
///
/// # Answering a refusal: 429 and `Retry-After`
///
/// With axum, `HandleErrorLayer` turns the error into a response; the hint
/// is the exact time until a cell conforms, so `Retry-After` is that,
/// rounded up to whole seconds:
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use axum::error_handling::HandleErrorLayer;
/// use axum::http::{header, StatusCode};
/// use axum::response::{IntoResponse, Response};
/// use axum::{routing::get, Router};
/// use watertight::clock::StdClock;
/// use watertight::rate::{Quota, RateLimiter};
/// use watertight::tower::{RateLimitError, RateLimitLayer};
///
/// async fn too_many(err: RateLimitError<Infallible>) -> Response {
///     match err.retry_after() {
///         // Limited: come back when a cell conforms.
///         Some(wait) => {
///             let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
///             let headers = [(header::RETRY_AFTER, secs.to_string())];
///             (StatusCode::TOO_MANY_REQUESTS, headers, "slow down").into_response()
///         }
///         // ExceedsBurst: a request costing more than the burst never conforms.
///         None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
///     }
/// }
///
/// let api = Arc::new(RateLimiter::new("api", Quota::per_second(50).burst(10), StdClock));
/// let app: Router = Router::new().route("/search", get(|| async { "results" })).route_layer(
///     tower::ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(too_many))
///         .layer(RateLimitLayer::new(api)),
/// );
/// # let _ = app;
/// ```
///
/// # Keyed limits
///
/// The layer and the service are generic over `L`, where the cells come
/// from: `Arc<RateLimiter<C>>`, one limit for every request, or
/// [`Keyed`], a limit per client, API key or device:
/// [`RateLimitLayer::keyed`] takes a [`KeyedRateLimiter`] (a bounded table)
/// and a function of the request that names its key. A keyed layer fails
/// fast only (a keyed limiter has no waits); a new key whose part of the
/// table is held by live keys is [`RateLimitError::TableFull`].
///
/// # Examples
///
/// A client kept under a provider's quota, waiting up to 2 s for a cell:
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateLimiter};
/// use watertight::tower::RateLimitLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let provider = Arc::new(RateLimiter::new("provider", Quota::per_minute(100), clock.clone()));
/// let layer = RateLimitLayer::new(provider.clone()).max_wait(Duration::from_secs(2));
/// let client = layer.layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// assert_eq!(client.oneshot(7).await, Ok(7));
/// assert_eq!(provider.metrics().admitted, 1);
/// # });
/// ```
pub struct RateLimitLayer<L, M = FailFast> {
    limiter: L,
    mode: M,
    cells: u32,
}

impl<C> RateLimitLayer<Arc<RateLimiter<C>>> {
    /// Fail fast: a request whose cell does not conform now is refused at
    /// once with [`RateLimitError::Limited`]. Any [`Clock`] will do.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::{RateLimitError, RateLimitLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(50).burst(2), &clock));
    /// let svc = RateLimitLayer::new(api.clone())
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    ///
    /// assert_eq!(svc.clone().oneshot(1).await, Ok(1));
    /// assert_eq!(svc.clone().oneshot(2).await, Ok(2)); // the burst
    /// assert_eq!(
    ///     svc.clone().oneshot(3).await,
    ///     Err(RateLimitError::Limited { retry_after: Duration::from_millis(20) })
    /// );
    /// clock.advance(Duration::from_millis(20)); // one emission interval
    /// assert_eq!(svc.oneshot(4).await, Ok(4));
    /// # });
    /// ```
    pub fn new(limiter: Arc<RateLimiter<C>>) -> Self {
        RateLimitLayer {
            limiter,
            mode: FailFast,
            cells: 1,
        }
    }
}

/// Where a keyed [`RateLimitLayer`]'s cells come from: a
/// [`KeyedRateLimiter`] and the function that names a request's key. Made
/// by [`RateLimitLayer::keyed`]; `Clone` when the function is (the limiter
/// is shared through its `Arc`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use watertight::clock::ManualClock;
/// use watertight::rate::{KeyedRateLimiter, Quota};
/// use watertight::tower::RateLimitLayer;
///
/// let clock = Arc::new(ManualClock::new());
/// let per_client: Arc<KeyedRateLimiter<u32, _, 16>> =
///     Arc::new(KeyedRateLimiter::new("api", Quota::per_second(5), clock));
/// let layer = RateLimitLayer::keyed(per_client, |req: &(u32, &str)| req.0);
/// assert_eq!(layer.limiter().limiter().capacity(), 16 * 8);
/// ```
#[derive(Clone)]
pub struct Keyed<L, F> {
    limiter: L,
    key: F,
}

impl<L, F> Keyed<L, F> {
    /// The keyed limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let limiter: Arc<KeyedRateLimiter<u8, _, 1>> =
    ///     Arc::new(KeyedRateLimiter::new("devices", Quota::per_minute(10), clock));
    /// let layer = RateLimitLayer::keyed(limiter.clone(), |device: &u8| *device);
    /// assert!(Arc::ptr_eq(layer.limiter().limiter(), &limiter));
    /// ```
    pub fn limiter(&self) -> &L {
        &self.limiter
    }
}

impl<L: fmt::Debug, F> fmt::Debug for Keyed<L, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl<K, C, const SETS: usize, H, F> RateLimitLayer<Keyed<Arc<KeyedRateLimiter<K, C, SETS, H>>, F>> {
    /// A limit per key, failing fast: `key` names each request's key (its
    /// client address, API key or device id), and the request takes its
    /// cells from that key's limit in `limiter`. Refused at once with
    /// [`RateLimitError::Limited`] (the key's own limit) or
    /// [`RateLimitError::TableFull`] (a new key and no slot for it), both
    /// with their exact `retry_after`. The service is `Clone` when `key`
    /// is, and every clone shares the table.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{KeyedRateLimiter, Quota};
    /// use watertight::tower::{RateLimitError, RateLimitLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let per_client: Arc<KeyedRateLimiter<&'static str, _, 4>> =
    ///     Arc::new(KeyedRateLimiter::new("api", Quota::per_second(10).burst(1), clock));
    /// // Requests are (client, body); the client is the key.
    /// let svc = RateLimitLayer::keyed(per_client, |req: &(&'static str, u32)| req.0)
    ///     .layer(tower::service_fn(|(_, n): (&str, u32)| async move { Ok::<_, Infallible>(n) }));
    ///
    /// assert_eq!(svc.clone().oneshot(("ana", 1)).await, Ok(1));
    /// assert_eq!(
    ///     svc.clone().oneshot(("ana", 2)).await,
    ///     Err(RateLimitError::Limited { retry_after: Duration::from_millis(100) })
    /// );
    /// assert_eq!(svc.oneshot(("bo", 3)).await, Ok(3)); // a limit of its own
    /// # });
    /// ```
    pub fn keyed(limiter: Arc<KeyedRateLimiter<K, C, SETS, H>>, key: F) -> Self {
        RateLimitLayer {
            limiter: Keyed { limiter, key },
            mode: FailFast,
            cells: 1,
        }
    }
}

impl<L, M> RateLimitLayer<L, M> {
    /// Wait at most `max_wait` for the cells (the limiter's clock must be a
    /// [`Timer`]), then call the inner service; refused at once if they
    /// would conform only later. The inner service must be `Clone`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::pin::pin;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use tower::{Layer, Service, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::{RateLimitError, RateLimitLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let uplink = Arc::new(RateLimiter::new("uplink", Quota::per_second(10).burst(1), clock.clone()));
    /// let mut send = RateLimitLayer::new(uplink.clone())
    ///     .max_wait(Duration::from_millis(150))
    ///     .layer(tower::service_fn(|m: u32| async move { Ok::<_, Infallible>(m) }));
    ///
    /// assert_eq!(send.ready().await.unwrap().call(1).await, Ok(1)); // the burst
    /// let mut second = pin!(send.ready().await.unwrap().call(2)); // its cell: in 100 ms
    /// // A third would conform in 200 ms, past its 150 ms: refused at once.
    /// let third = send.ready().await.unwrap().call(3).await;
    /// assert_eq!(third, Err(RateLimitError::Limited { retry_after: Duration::from_millis(200) }));
    ///
    /// assert!(poll_once(second.as_mut()).await.is_none()); // waiting for its cell
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(second.await, Ok(2));
    /// assert_eq!(uplink.metrics().waited, 1);
    /// # });
    /// ```
    pub fn max_wait(self, max_wait: Duration) -> RateLimitLayer<L, MaxWait> {
        RateLimitLayer {
            limiter: self.limiter,
            mode: MaxWait(max_wait),
            cells: self.cells,
        }
    }

    /// Each request takes `cells` cells (1 unless set): a weight, for an
    /// endpoint that costs the system more. `0` admits every request
    /// without taking anything; above the quota's burst, every request is
    /// refused with [`RateLimitError::ExceedsBurst`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::{RateLimitError, RateLimitLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let db = Arc::new(RateLimiter::new("db", Quota::per_second(10), &clock));
    /// let export = RateLimitLayer::new(db.clone()).cells(4)
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// assert_eq!(export.clone().oneshot(1).await, Ok(1));
    /// assert_eq!(db.metrics().admitted_cells, 4);
    ///
    /// let bulk = RateLimitLayer::new(db).cells(11)
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// assert_eq!(bulk.oneshot(2).await, Err(RateLimitError::ExceedsBurst { requested: 11, burst: 10 }));
    /// # });
    /// ```
    pub fn cells(mut self, cells: u32) -> Self {
        self.cells = cells;
        self
    }

    /// Where the cells come from: the limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(5), StdClock));
    /// let layer = RateLimitLayer::new(api.clone());
    /// assert!(Arc::ptr_eq(layer.limiter(), &api));
    /// ```
    pub fn limiter(&self) -> &L {
        &self.limiter
    }
}

impl<L: Clone, M: Clone> Clone for RateLimitLayer<L, M> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            limiter: self.limiter.clone(),
            mode: self.mode.clone(),
            cells: self.cells,
        }
    }
}

impl<L: fmt::Debug, M: fmt::Debug> fmt::Debug for RateLimitLayer<L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &self.limiter)
            .field("mode", &self.mode)
            .field("cells", &self.cells)
            .finish()
    }
}

impl<S, L: Clone, M: Clone> Layer<S> for RateLimitLayer<L, M> {
    type Service = RateLimitService<S, L, M>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            limiter: self.limiter.clone(),
            mode: self.mode.clone(),
            cells: self.cells,
        }
    }
}

/// A service behind a [`RateLimiter`]; made by [`RateLimitLayer`].
///
/// `poll_ready` is the inner service's and takes no cell (see
/// [why](RateLimitLayer#cells-are-taken-in-call-not-in-poll_ready)). With
/// [`FailFast`], `call` takes the cells or refuses, and the inner service
/// is called only for an admitted request; with [`MaxWait`], `call`
/// reserves them (or refuses at once) and the response future calls the
/// inner service when they conform. `Clone` when the inner service is, and
/// every clone shares the limiter: no `Buffer` needed.
///
/// # Examples
///
/// A clone per request, as axum makes them, holds the limit:
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::rate::{Quota, RateLimiter};
/// use watertight::tower::RateLimitLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let api = Arc::new(RateLimiter::new("api", Quota::per_second(5), &clock));
/// let svc = RateLimitLayer::new(api.clone())
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
/// let mut admitted = 0;
/// for q in 0..1500 {
///     admitted += usize::from(svc.clone().oneshot(q).await.is_ok());
/// }
/// assert_eq!(admitted, 5); // the burst, not 1,500
/// assert_eq!(api.metrics().refused, 1495);
/// # });
/// ```
pub struct RateLimitService<S, L, M = FailFast> {
    inner: S,
    limiter: L,
    mode: M,
    cells: u32,
}

impl<S, L, M> RateLimitService<S, L, M> {
    /// Where the cells come from: the limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(5), StdClock));
    /// let svc = RateLimitLayer::new(api.clone())
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// assert_eq!(svc.limiter().name(), "api");
    /// ```
    pub fn limiter(&self) -> &L {
        &self.limiter
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(5), StdClock));
    /// let svc = RateLimitLayer::new(api).layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// let _inner = svc.get_ref();
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, L: Clone, M: Clone> Clone for RateLimitService<S, L, M> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            limiter: self.limiter.clone(),
            mode: self.mode.clone(),
            cells: self.cells,
        }
    }
}

impl<S: fmt::Debug, L: fmt::Debug, M: fmt::Debug> fmt::Debug for RateLimitService<S, L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("mode", &self.mode)
            .field("cells", &self.cells)
            .finish()
    }
}

impl<S, C, Req> Service<Req> for RateLimitService<S, Arc<RateLimiter<C>>, FailFast>
where
    S: Service<Req>,
    C: Clock,
{
    type Response = S::Response;
    type Error = RateLimitError<S::Error>;
    type Future = RateLimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(RateLimitError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let state = match self.limiter.check_n(self.cells) {
            Ok(()) => FastState::Running {
                fut: self.inner.call(req),
            },
            Err(why) => FastState::Refused {
                why: Some(KeyedError::Rate(why)),
            },
        };
        RateLimitFuture { state }
    }
}

pin_project! {
    #[project = FastProj]
    enum FastState<F> {
        Running { #[pin] fut: F },
        // A keyed refusal, or an unkeyed one as `KeyedError::Rate`.
        Refused { why: Option<KeyedError> },
    }
}

pin_project! {
    /// The response future of a fail-fast [`RateLimitService`]: the inner
    /// future, or the refusal. `Send` when the inner future is.
    ///
    /// # Cancel safety
    ///
    /// The cells were taken (or refused) in `call`; dropping the future
    /// does not give them back: the request was made.
    ///
    /// # Examples
    ///
    /// The decision is made in `call`, before the future is polled:
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// let clock = ManualClock::new();
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(1), &clock));
    /// let mut svc = RateLimitLayer::new(api.clone())
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// let first = svc.call(1);
    /// let second = svc.call(2);
    /// assert_eq!((api.metrics().admitted, api.metrics().refused), (1, 1));
    /// assert_eq!(futures_lite::future::block_on(first), Ok(1));
    /// assert!(futures_lite::future::block_on(second).is_err());
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RateLimitFuture<F> {
        #[pin]
        state: FastState<F>,
    }
}

impl<F> fmt::Debug for RateLimitFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            FastState::Running { .. } => "running",
            FastState::Refused { .. } => "refused",
        };
        f.debug_struct("RateLimitFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, T, E> Future for RateLimitFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, RateLimitError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            FastProj::Running { fut } => fut.poll(cx).map_err(RateLimitError::Inner),
            FastProj::Refused { why } => match why.take() {
                Some(why) => Poll::Ready(Err(RateLimitError::refused_keyed(why))),
                None => Poll::Pending, // polled after completion
            },
        }
    }
}

impl<S, K, C, const SETS: usize, H, F, Req> Service<Req>
    for RateLimitService<S, Keyed<Arc<KeyedRateLimiter<K, C, SETS, H>>, F>, FailFast>
where
    S: Service<Req>,
    K: Hash + Eq + Clone,
    C: Clock,
    H: BuildHasher,
    F: Fn(&Req) -> K,
{
    type Response = S::Response;
    type Error = RateLimitError<S::Error>;
    type Future = RateLimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(RateLimitError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let key = (self.limiter.key)(&req);
        let state = match self.limiter.limiter.check_key_n(&key, self.cells) {
            Ok(()) => FastState::Running {
                fut: self.inner.call(req),
            },
            Err(why) => FastState::Refused { why: Some(why) },
        };
        RateLimitFuture { state }
    }
}

impl<S, C, Req> Service<Req> for RateLimitService<S, Arc<RateLimiter<C>>, MaxWait>
where
    S: Service<Req> + Clone,
    C: Timer,
{
    type Response = S::Response;
    type Error = RateLimitError<S::Error>;
    type Future = RateLimitWaitFuture<S, Req, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(RateLimitError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let limiter = &self.limiter;
        let deadline = limiter.clock().now().saturating_add(self.mode.0);
        match limiter.begin_wait(self.cells, deadline) {
            Begin::Admitted => RateLimitWaitFuture {
                state: WaitState::Running {
                    fut: self.inner.call(req),
                },
                reservation: None,
            },
            Begin::Refused(why) => RateLimitWaitFuture {
                state: WaitState::Refused { why: Some(why) },
                reservation: None,
            },
            Begin::Reserved(slot) => {
                let ready_at = Instant::from_nanos(slot.at);
                // The instance polled ready goes with the request; `self`
                // keeps a clone, to be polled ready before its next call.
                let clone = self.inner.clone();
                let ready = core::mem::replace(&mut self.inner, clone);
                RateLimitWaitFuture {
                    state: WaitState::Waiting {
                        sleep: None,
                        ready_at,
                        svc: Some(ready),
                        req: Some(req),
                    },
                    reservation: Some(Reservation {
                        limiter: Arc::clone(limiter),
                        cells: self.cells,
                        held: Some(Begin::Reserved(slot)),
                    }),
                }
            }
        }
    }
}

/// Cells reserved on the limiter's schedule, until they are served or given
/// back (by the limiter's rule: only if the reservation is still the
/// newest).
struct Reservation<C: Clock> {
    limiter: Arc<RateLimiter<C>>,
    cells: u32,
    /// Always `Begin::Reserved` while held; `None` once served.
    held: Option<Begin>,
}

impl<C: Clock> Reservation<C> {
    /// The cells conformed and the request goes on: they are spent.
    fn served(mut self) {
        if self.held.take().is_some() {
            self.limiter.served(self.cells);
        }
    }
}

impl<C: Clock> Drop for Reservation<C> {
    fn drop(&mut self) {
        if let Some(Begin::Reserved(slot)) = self.held.take() {
            self.limiter.abandon(self.cells, slot);
        }
    }
}

pin_project! {
    #[project = WaitProj]
    enum WaitState<S, Req, Z>
    where
        S: Service<Req>,
    {
        Waiting {
            #[pin]
            sleep: Option<Z>,
            ready_at: Instant,
            svc: Option<S>,
            req: Option<Req>,
        },
        Running { #[pin] fut: S::Future },
        Refused { why: Option<RateError> },
    }
}

pin_project! {
    /// The response future of a waiting ([`MaxWait`]) [`RateLimitService`]:
    /// sleeps until the cells reserved in `call` conform, then calls the
    /// inner service and runs its future. Holds the reservation, the
    /// request and the inner service while it waits (no allocation). `Send`
    /// when they are and the clock's sleep is.
    ///
    /// # Cancel safety
    ///
    /// Dropped before its cells conform, the inner service is not called
    /// and the cells go back if nothing was reserved after them (otherwise
    /// they stay spent: see [`RateLimiter`'s Cancel safety](RateLimiter#cancel-safety));
    /// dropped after, they are spent.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use tower::{Layer, Service, ServiceExt};
    /// use watertight::clock::ManualClock;
    /// use watertight::rate::{Quota, RateLimiter};
    /// use watertight::tower::RateLimitLayer;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let api = Arc::new(RateLimiter::new("api", Quota::per_second(10).burst(1), clock.clone()));
    /// let mut svc = RateLimitLayer::new(api.clone())
    ///     .max_wait(Duration::from_secs(1))
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// svc.ready().await.unwrap().call(1).await.unwrap();
    /// let waiting = svc.ready().await.unwrap().call(2); // reserved for +100 ms
    /// assert_eq!(api.waiting(), 1);
    /// drop(waiting); // before its cell: given back, the inner service never called
    /// assert_eq!((api.waiting(), api.metrics().cancelled), (0, 1));
    /// // The next request gets that same cell, 100 ms from now.
    /// let next = svc.ready().await.unwrap().call(3);
    /// assert_eq!(format!("{next:?}"), "RateLimitWaitFuture { state: \"waiting\", ready_at: Instant(100ms) }");
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(next.await, Ok(3));
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RateLimitWaitFuture<S, Req, C>
    where
        S: Service<Req>,
        C: Timer,
    {
        #[pin]
        state: WaitState<S, Req, C::Sleep>,
        reservation: Option<Reservation<C>>,
    }
}

impl<S, Req, C> fmt::Debug for RateLimitWaitFuture<S, Req, C>
where
    S: Service<Req>,
    C: Timer,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RateLimitWaitFuture");
        match &self.state {
            WaitState::Waiting { ready_at, .. } => {
                d.field("state", &"waiting").field("ready_at", ready_at)
            }
            WaitState::Running { .. } => d.field("state", &"running"),
            WaitState::Refused { .. } => d.field("state", &"refused"),
        };
        d.finish()
    }
}

impl<S, Req, C> Future for RateLimitWaitFuture<S, Req, C>
where
    S: Service<Req>,
    C: Timer,
{
    type Output = Result<S::Response, RateLimitError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                WaitProj::Waiting {
                    mut sleep,
                    ready_at,
                    svc,
                    req,
                } => {
                    if sleep.is_none() {
                        let Some(reservation) = this.reservation.as_ref() else {
                            return Poll::Pending; // unreachable: waiting holds one
                        };
                        let timer = reservation.limiter.clock().sleep_until(*ready_at);
                        sleep.set(Some(timer));
                    }
                    if let Some(timer) = sleep.as_pin_mut() {
                        core::task::ready!(timer.poll(cx));
                    }
                    if let Some(reservation) = this.reservation.take() {
                        reservation.served();
                    }
                    match (svc.take(), req.take()) {
                        (Some(mut svc), Some(req)) => {
                            let fut = svc.call(req);
                            this.state.set(WaitState::Running { fut });
                        }
                        _ => return Poll::Pending, // polled after completion
                    }
                }
                WaitProj::Running { fut } => {
                    return fut.poll(cx).map_err(RateLimitError::Inner);
                }
                WaitProj::Refused { why } => {
                    return match why.take() {
                        Some(why) => Poll::Ready(Err(RateLimitError::refused(why))),
                        None => Poll::Pending, // polled after completion
                    };
                }
            }
        }
    }
}
