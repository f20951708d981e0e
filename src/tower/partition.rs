//! [`PartitionLayer`]: a [`PartitionedBulkhead`] in front of a tower
//! service, each request's class chosen by a function of the request; its
//! service, response future and error.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::bulkhead::{FailFast, MaxWait};
use crate::bulkhead::AcquireError;
use crate::clock::Timer;
use crate::partition::{AcquireClass, ClassPermit, PartitionError, PartitionedBulkhead};

/// The error of a [`PartitionService`]: the class's room refused the call,
/// the classifier named a class the bulkhead does not have, or the inner
/// service failed.
///
/// # Examples
///
/// ```
/// use watertight::AcquireError;
/// use watertight::tower::PartitionServiceError;
///
/// let e: PartitionServiceError<&str> = PartitionServiceError::Rejected { class: 1, why: AcquireError::Full };
/// assert_eq!(e.rejection(), Some(AcquireError::Full));
/// assert_eq!(e.class(), Some(1));
/// assert_eq!(e.to_string(), "class 1: bulkhead full");
/// assert_eq!(PartitionServiceError::Inner("boom").into_inner(), Some("boom"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionServiceError<E> {
    /// No slot for the request's class: its room and every room it could
    /// borrow from were full ([`AcquireError::Full`], failing fast), its
    /// wait ran out ([`TimedOut`](AcquireError::TimedOut)), its room's
    /// queue was at its bound ([`QueueFull`](AcquireError::QueueFull)) or
    /// the bulkhead is [`Closed`](AcquireError::Closed). The inner service
    /// was not called: answer 503.
    Rejected {
        /// The request's class.
        class: usize,
        /// Why its room refused.
        why: AcquireError,
    },
    /// The classifier returned a class number the bulkhead does not have:
    /// a bug in the classifier, not load (answer 500). The inner service
    /// was not called.
    NoSuchClass {
        /// The class the classifier returned.
        class: usize,
        /// How many classes the bulkhead has.
        classes: usize,
    },
    /// The inner service's own error.
    Inner(E),
}

impl<E> PartitionServiceError<E> {
    /// The refusal, if the class's room refused (not for a bad class
    /// number).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::tower::PartitionServiceError;
    ///
    /// let refused: PartitionServiceError<&str> =
    ///     PartitionServiceError::Rejected { class: 0, why: AcquireError::TimedOut };
    /// assert_eq!(refused.rejection(), Some(AcquireError::TimedOut));
    /// let bad: PartitionServiceError<&str> = PartitionServiceError::NoSuchClass { class: 7, classes: 2 };
    /// assert_eq!(bad.rejection(), None);
    /// assert_eq!(PartitionServiceError::Inner("db down").rejection(), None);
    /// ```
    pub const fn rejection(&self) -> Option<AcquireError> {
        match self {
            PartitionServiceError::Rejected { why, .. } => Some(*why),
            _ => None,
        }
    }

    /// Whether this is a refusal under load (answer 503), as opposed to a
    /// bad class number or the inner service's error.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::tower::PartitionServiceError;
    ///
    /// let refused: PartitionServiceError<()> = PartitionServiceError::Rejected { class: 1, why: AcquireError::Full };
    /// assert!(refused.is_refusal());
    /// let bad: PartitionServiceError<()> = PartitionServiceError::NoSuchClass { class: 7, classes: 2 };
    /// assert!(!bad.is_refusal());
    /// ```
    pub const fn is_refusal(&self) -> bool {
        matches!(self, PartitionServiceError::Rejected { .. })
    }

    /// The request's class, unless the inner service failed (a bad class
    /// number included).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::PartitionServiceError;
    ///
    /// let bad: PartitionServiceError<()> = PartitionServiceError::NoSuchClass { class: 7, classes: 2 };
    /// assert_eq!(bad.class(), Some(7));
    /// assert_eq!(PartitionServiceError::Inner(()).class(), None);
    /// ```
    pub const fn class(&self) -> Option<usize> {
        match self {
            PartitionServiceError::Rejected { class, .. }
            | PartitionServiceError::NoSuchClass { class, .. } => Some(*class),
            PartitionServiceError::Inner(_) => None,
        }
    }

    /// The inner service's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::AcquireError;
    /// use watertight::tower::PartitionServiceError;
    ///
    /// assert_eq!(PartitionServiceError::Inner("db down").into_inner(), Some("db down"));
    /// let refused: PartitionServiceError<&str> = PartitionServiceError::Rejected { class: 0, why: AcquireError::Full };
    /// assert_eq!(refused.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            PartitionServiceError::Inner(e) => Some(e),
            _ => None,
        }
    }

    fn refused(class: usize, why: PartitionError) -> Self {
        match why {
            PartitionError::NoSuchClass { class, classes } => {
                PartitionServiceError::NoSuchClass { class, classes }
            }
            PartitionError::Refused(why) => PartitionServiceError::Rejected { class, why },
        }
    }
}

impl<E: fmt::Display> fmt::Display for PartitionServiceError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionServiceError::Rejected { class, why } => write!(f, "class {class}: {why}"),
            PartitionServiceError::NoSuchClass { class, classes } => fmt::Display::fmt(
                &PartitionError::NoSuchClass {
                    class: *class,
                    classes: *classes,
                },
                f,
            ),
            PartitionServiceError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for PartitionServiceError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            PartitionServiceError::Rejected { why, .. } => Some(why),
            PartitionServiceError::NoSuchClass { .. } => None,
            PartitionServiceError::Inner(e) => Some(e),
        }
    }
}

/// A [`Layer`] that puts a [`PartitionedBulkhead`] in front of a service,
/// the class of each request chosen by `classify`, a function of the
/// request that returns a class number (`0` the most important).
///
/// Two forms, in the bulkhead layer's modes:
///
/// - **[`FailFast`]** (the default): `call` takes a slot for the request's
///   class (its room's, or one borrowed) or refuses at once with
///   [`PartitionServiceError::Rejected`] and [`AcquireError::Full`]. Any
///   clock will do. A class whose room is lent out to borrowers is refused
///   too: it has no time to wait for them.
/// - **[`MaxWait`]** ([`max_wait`](PartitionLayer::max_wait)): the response
///   future waits up to the max wait for a slot, in its class's FIFO queue,
///   and gets its room's slot back as soon as a borrower finishes: give it
///   at least as long as a call takes, so that the important classes get
///   their share back under a flood of the others (the clock must be a
///   [`Timer`]).
///
/// A class number the bulkhead does not have is
/// [`PartitionServiceError::NoSuchClass`], never a panic.
///
/// # The layer borrows the bulkhead
///
/// A partitioned bulkhead's permits borrow it, and it has no owned form:
/// the layer holds a `&'a PartitionedBulkhead`, and its services and
/// futures live as long as `'a`. A server, whose services must be
/// `'static`, keeps the bulkhead in a `static` (its constructor is
/// `const`), or leaks one built at run time once, at start-up
/// (`Box::leak`). The services are `Clone` (when the inner service and the
/// classifier are), every clone asks the same bulkhead, and none needs a
/// `Buffer`; no slot is taken in `poll_ready`.
///
/// # Answering a refusal: 503
///
/// With axum, the class read from a header:
///
/// ```
/// use std::convert::Infallible;
/// use axum::error_handling::HandleErrorLayer;
/// use axum::extract::Request;
/// use axum::http::StatusCode;
/// use axum::{routing::get, Router};
/// use watertight::clock::TokioClock;
/// use watertight::partition::PartitionedBulkhead;
/// use watertight::tower::{PartitionLayer, PartitionServiceError};
///
/// static SEARCH: PartitionedBulkhead<TokioClock, 2> =
///     PartitionedBulkhead::new("search", [("critical", 6), ("batch", 2)], TokioClock);
///
/// /// `x-priority: batch` is class 1; anything else is critical.
/// fn class(req: &Request) -> usize {
///     match req.headers().get("x-priority") {
///         Some(v) if v == "batch" => 1,
///         _ => 0,
///     }
/// }
///
/// async fn shed(err: PartitionServiceError<Infallible>) -> StatusCode {
///     if err.is_refusal() {
///         StatusCode::SERVICE_UNAVAILABLE
///     } else {
///         StatusCode::INTERNAL_SERVER_ERROR // a class the bulkhead has not
///     }
/// }
///
/// let app: Router = Router::new().route("/search", get(|| async { "results" })).route_layer(
///     tower::ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(shed))
///         .layer(PartitionLayer::new(&SEARCH, class)),
/// );
/// # let _ = app;
/// ```
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, ServiceExt};
/// use watertight::AcquireError;
/// use watertight::clock::StdClock;
/// use watertight::partition::PartitionedBulkhead;
/// use watertight::tower::{PartitionLayer, PartitionServiceError};
///
/// # futures_lite::future::block_on(async {
/// let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
/// // Requests are (class, query).
/// let svc = PartitionLayer::new(&db, |req: &(usize, u32)| req.0)
///     .layer(tower::service_fn(|(_, q): (usize, u32)| async move { Ok::<_, Infallible>(q) }));
///
/// let _web = db.try_acquire(0).unwrap();
/// let _jobs = db.try_acquire(1).unwrap();
/// assert_eq!(
///     svc.clone().oneshot((1, 7)).await,
///     Err(PartitionServiceError::Rejected { class: 1, why: AcquireError::Full })
/// );
/// assert_eq!(db.class_metrics(1).unwrap().refused_full, 1);
/// # });
/// ```
pub struct PartitionLayer<'a, C, const K: usize, F, M = FailFast> {
    bulkhead: &'a PartitionedBulkhead<C, K>,
    classify: F,
    mode: M,
}

impl<'a, C, const K: usize, F> PartitionLayer<'a, C, K, F> {
    /// Fail fast: no free slot for the request's class, no call.
    /// `classify` returns the request's class number.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// # futures_lite::future::block_on(async {
    /// let db = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock);
    /// let svc = PartitionLayer::new(&db, |job: &bool| usize::from(*job)).layer(tower::service_fn(
    ///     |_job: bool| {
    ///         let in_flight = db.in_flight(); // the call holds a slot
    ///         async move { Ok::<_, Infallible>(in_flight) }
    ///     },
    /// ));
    /// assert_eq!(svc.oneshot(true).await, Ok(1));
    /// assert_eq!(db.in_flight(), 0); // given back when the call completed
    /// assert_eq!(db.room(1).unwrap().metrics().accepted, 1); // in the jobs room
    /// # });
    /// ```
    pub fn new(bulkhead: &'a PartitionedBulkhead<C, K>, classify: F) -> Self {
        PartitionLayer {
            bulkhead,
            classify,
            mode: FailFast,
        }
    }

    /// Wait at most `max_wait` for a slot (the clock must be a [`Timer`]):
    /// in the class's room's FIFO queue, first served by the slots its room
    /// releases (its borrowers' included), or by one another room frees
    /// that nobody there waits for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::pin::pin;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    /// let mut svc = PartitionLayer::new(&db, |class: &usize| *class)
    ///     .max_wait(Duration::from_millis(50))
    ///     .layer(tower::service_fn(|class: usize| async move { Ok::<_, Infallible>(class) }));
    ///
    /// let own = db.try_acquire(1).unwrap();
    /// let lent = db.try_acquire(1).unwrap(); // web's room, lent to jobs
    /// let mut web = pin!(svc.call(0));
    /// assert!(poll_once(web.as_mut()).await.is_none()); // waiting for its room
    /// drop(lent); // the borrower finishes: web's slot goes to web
    /// assert_eq!(web.await, Ok(0));
    /// # drop(own);
    /// # });
    /// ```
    pub fn max_wait(self, max_wait: Duration) -> PartitionLayer<'a, C, K, F, MaxWait> {
        PartitionLayer {
            bulkhead: self.bulkhead,
            classify: self.classify,
            mode: MaxWait(max_wait),
        }
    }
}

impl<'a, C, const K: usize, F, M> PartitionLayer<'a, C, K, F, M> {
    /// The partitioned bulkhead.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// let db = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock);
    /// let layer = PartitionLayer::new(&db, |_: &()| 0);
    /// assert_eq!(layer.bulkhead().capacity(), 3);
    /// ```
    pub fn bulkhead(&self) -> &'a PartitionedBulkhead<C, K> {
        self.bulkhead
    }
}

impl<C, const K: usize, F: Clone, M: Clone> Clone for PartitionLayer<'_, C, K, F, M> {
    fn clone(&self) -> Self {
        PartitionLayer {
            bulkhead: self.bulkhead,
            classify: self.classify.clone(),
            mode: self.mode.clone(),
        }
    }
}

impl<C, const K: usize, F, M: fmt::Debug> fmt::Debug for PartitionLayer<'_, C, K, F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionLayer")
            .field("bulkhead", &self.bulkhead.name())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<'a, S, C, const K: usize, F: Clone, M: Clone> Layer<S> for PartitionLayer<'a, C, K, F, M> {
    type Service = PartitionService<'a, S, C, K, F, M>;
    fn layer(&self, inner: S) -> Self::Service {
        PartitionService {
            inner,
            bulkhead: self.bulkhead,
            classify: self.classify.clone(),
            mode: self.mode.clone(),
        }
    }
}

/// A service behind a [`PartitionedBulkhead`]; made by [`PartitionLayer`].
///
/// `poll_ready` is the inner service's and holds no slot. `call` asks the
/// classifier for the request's class; with [`FailFast`] it takes a slot
/// for that class or refuses, with [`MaxWait`] the response future asks
/// for one on its first poll and waits at most the max wait. The slot
/// lives in the [`PartitionFuture`] and is given back when the inner future
/// completes or the [`PartitionFuture`] is dropped.
///
/// As in the bulkhead layer, the inner service's `call` is made at once
/// (unless the class number is out of range); with [`MaxWait`] its future
/// is polled only once the slot is granted, and dropped unpolled on a
/// refusal.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::partition::PartitionedBulkhead;
/// use watertight::tower::PartitionLayer;
///
/// # futures_lite::future::block_on(async {
/// let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
/// let mut svc = PartitionLayer::new(&db, |q: &u32| (*q % 2) as usize)
///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
///
/// let ready = svc.ready().await.unwrap();
/// assert_eq!(db.in_flight(), 0); // readiness reserves nothing
/// let response = ready.call(3); // class 1
/// assert_eq!(db.room(1).unwrap().in_flight(), 1); // the slot rides in the response future
/// assert_eq!(response.await, Ok(3));
/// assert_eq!(db.in_flight(), 0);
/// # });
/// ```
pub struct PartitionService<'a, S, C, const K: usize, F, M = FailFast> {
    inner: S,
    bulkhead: &'a PartitionedBulkhead<C, K>,
    classify: F,
    mode: M,
}

impl<'a, S, C, const K: usize, F, M> PartitionService<'a, S, C, K, F, M> {
    /// The partitioned bulkhead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// let db = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock);
    /// let svc = PartitionLayer::new(&db, |_: &u32| 0)
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// assert_eq!(svc.bulkhead().name(), "db");
    /// ```
    pub fn bulkhead(&self) -> &'a PartitionedBulkhead<C, K> {
        self.bulkhead
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::Layer;
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// let db = PartitionedBulkhead::new("db", [("web", 2), ("jobs", 1)], StdClock);
    /// let svc = PartitionLayer::new(&db, |_: &u32| 0)
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, Infallible>(q) }));
    /// let _inner = svc.get_ref();
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, C, const K: usize, F: Clone, M: Clone> Clone
    for PartitionService<'_, S, C, K, F, M>
{
    fn clone(&self) -> Self {
        PartitionService {
            inner: self.inner.clone(),
            bulkhead: self.bulkhead,
            classify: self.classify.clone(),
            mode: self.mode.clone(),
        }
    }
}

impl<S: fmt::Debug, C, const K: usize, F, M: fmt::Debug> fmt::Debug
    for PartitionService<'_, S, C, K, F, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionService")
            .field("inner", &self.inner)
            .field("bulkhead", &self.bulkhead.name())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The wait of a fail-fast [`PartitionService`]: it never waits.
type NoWait<'a, C> = core::future::Pending<Result<ClassPermit<'a, C>, PartitionError>>;

impl<'a, S, C, const K: usize, F, Req> Service<Req> for PartitionService<'a, S, C, K, F, FailFast>
where
    S: Service<Req>,
    F: Fn(&Req) -> usize,
{
    type Response = S::Response;
    type Error = PartitionServiceError<S::Error>;
    type Future = PartitionFuture<'a, S::Future, C, NoWait<'a, C>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(PartitionServiceError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let class = (self.classify)(&req);
        let state = match self.bulkhead.try_acquire(class) {
            Ok(permit) => State::Running {
                fut: self.inner.call(req),
                permit: Some(permit),
            },
            Err(why) => State::Refused {
                why: Some((class, why)),
            },
        };
        PartitionFuture { state }
    }
}

impl<'a, S, C, const K: usize, F, Req> Service<Req> for PartitionService<'a, S, C, K, F, MaxWait>
where
    S: Service<Req>,
    C: Timer,
    F: Fn(&Req) -> usize,
{
    type Response = S::Response;
    type Error = PartitionServiceError<S::Error>;
    type Future = PartitionFuture<'a, S::Future, C, AcquireClass<'a, C>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(PartitionServiceError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let class = (self.classify)(&req);
        let state = if class < K {
            // The wait's first poll tries for a slot before it queues, so
            // nothing is tried (or counted) here.
            State::Waiting {
                wait: self.bulkhead.acquire_timeout(class, self.mode.0),
                fut: Some(self.inner.call(req)),
                class,
            }
        } else {
            State::Refused {
                why: Some((class, PartitionError::NoSuchClass { class, classes: K })),
            }
        };
        PartitionFuture { state }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<'a, F, C, W> {
        Waiting { #[pin] wait: W, fut: Option<F>, class: usize },
        Running { #[pin] fut: F, permit: Option<ClassPermit<'a, C>> },
        Refused { why: Option<(usize, PartitionError)> },
    }
}

pin_project! {
    /// The response future of [`PartitionService`]: holds the slot while
    /// the inner future runs. `Send` when the inner future is (and the
    /// clock is `Send + Sync`). `W` is the wait for a slot:
    /// [`AcquireClass`] with [`MaxWait`], a future that never completes
    /// (and is never made) with [`FailFast`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it gives the slot back, to the room it came from (or
    /// leaves the class's queue, taking no slot).
    ///
    /// # Examples
    ///
    /// The slot is taken by `call` and travels with the future, polled or
    /// not, until it completes or is dropped:
    ///
    /// ```
    /// use tower::{Layer, Service};
    /// use watertight::clock::StdClock;
    /// use watertight::partition::PartitionedBulkhead;
    /// use watertight::tower::PartitionLayer;
    ///
    /// let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    /// let mut svc = PartitionLayer::new(&db, |_: &u32| 1)
    ///     .layer(tower::service_fn(|sku: u32| async move { Ok::<_, ()>(sku) }));
    ///
    /// let first = svc.call(1);
    /// let second = svc.call(2); // borrowed from web's room
    /// assert_eq!(db.in_flight(), 2);
    /// drop(first); // never polled: the slot is back anyway
    /// assert_eq!(db.in_flight(), 1);
    /// assert_eq!(futures_lite::future::block_on(second), Ok(2));
    /// assert_eq!(db.in_flight(), 0);
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct PartitionFuture<'a, F, C, W> {
        #[pin]
        state: State<'a, F, C, W>,
    }
}

impl<F, C, W> fmt::Debug for PartitionFuture<'_, F, C, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("PartitionFuture");
        match &self.state {
            State::Waiting { class, .. } => d.field("state", &"waiting").field("class", class),
            State::Running { permit, .. } => {
                d.field("state", &"running");
                if let Some(p) = permit {
                    d.field("class", &p.class()).field("room", &p.room());
                }
                &mut d
            }
            State::Refused { .. } => d.field("state", &"refused"),
        };
        d.finish()
    }
}

impl<'a, F, C, W, T, E> Future for PartitionFuture<'a, F, C, W>
where
    F: Future<Output = Result<T, E>>,
    W: Future<Output = Result<ClassPermit<'a, C>, PartitionError>>,
{
    type Output = Result<T, PartitionServiceError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Waiting { wait, fut, class } => match wait.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(why)) => {
                        // The inner future is dropped unpolled.
                        let class = *class;
                        state.set(State::Refused {
                            why: Some((class, why)),
                        });
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
                    // The call is over: the slot goes back now, not when
                    // the future is dropped.
                    drop(permit.take());
                    return Poll::Ready(out.map_err(PartitionServiceError::Inner));
                }
                StateProj::Refused { why } => {
                    return match why.take() {
                        Some((class, why)) => {
                            Poll::Ready(Err(PartitionServiceError::refused(class, why)))
                        }
                        None => Poll::Pending, // polled after completion
                    };
                }
            }
        }
    }
}
