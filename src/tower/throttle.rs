//! [`ThrottleLayer`]: an [`AdaptiveThrottle`] in front of a tower service
//! (client-side adaptive throttling); its service, response future and
//! error.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::throttle::{AdaptiveThrottle, Response, Throttled};

/// The error of a [`ThrottleService`]: the throttle refused the request
/// locally, or the inner service failed.
///
/// # Examples
///
/// ```
/// use watertight::throttle::Throttled;
/// use watertight::tower::ThrottleError;
///
/// let e: ThrottleError<&str> = ThrottleError::Throttled(Throttled::with_probability(0.5));
/// assert!(e.is_refusal());
/// assert_eq!(e.to_string(), "throttled locally (refusing 50.0 % of requests)");
/// assert_eq!(ThrottleError::Inner("boom").into_inner(), Some("boom"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThrottleError<E> {
    /// Refused locally: the inner service was not called. Answer as for
    /// an overloaded backend (503), or degrade.
    Throttled(Throttled),
    /// The inner service's own error.
    Inner(E),
}

impl<E> ThrottleError<E> {
    /// Whether the throttle refused (rather than the inner service
    /// failing).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::ThrottleError;
    /// assert!(!ThrottleError::Inner(()).is_refusal());
    /// ```
    pub const fn is_refusal(&self) -> bool {
        matches!(self, ThrottleError::Throttled(_))
    }

    /// The inner service's error, if that is what this is.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::Throttled;
    /// use watertight::tower::ThrottleError;
    /// let e: ThrottleError<()> = ThrottleError::Throttled(Throttled::with_probability(0.9));
    /// assert_eq!(e.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            ThrottleError::Inner(e) => Some(e),
            ThrottleError::Throttled(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleError::Throttled(t) => fmt::Display::fmt(t, f),
            ThrottleError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for ThrottleError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            ThrottleError::Throttled(t) => Some(t),
            ThrottleError::Inner(e) => Some(e),
        }
    }
}

/// Says what a response means to the throttle: a [`Response`].
///
/// Any `Fn(&Result<T, E>) -> Response` is one; [`ErrIsOverloaded`] is the
/// default. The SRE book's rule is that only a refusal for overload (503,
/// 429, `RESOURCE_EXHAUSTED`) or no answer at all is not an accept: an
/// HTTP client whose errors are transport errors and whose 503s are `Ok`
/// responses should say so with a classifier of its own.
///
/// # Examples
///
/// ```
/// use watertight::throttle::Response;
/// use watertight::tower::ClassifyResponse;
///
/// let by_status = |r: &Result<u16, ()>| match r {
///     Ok(503) | Ok(429) | Err(()) => Response::Overloaded,
///     Ok(_) => Response::Accepted,
/// };
/// assert_eq!(by_status.classify(&Ok(404)), Response::Accepted);
/// assert_eq!(by_status.classify(&Ok(503)), Response::Overloaded);
/// ```
pub trait ClassifyResponse<T, E> {
    /// What `result` means to the throttle.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::throttle::Response;
    /// use watertight::tower::{ClassifyResponse, ErrIsOverloaded};
    /// assert_eq!(ErrIsOverloaded.classify(&Ok::<_, ()>(1)), Response::Accepted);
    /// ```
    fn classify(&self, result: &Result<T, E>) -> Response;
}

impl<T, E, F: Fn(&Result<T, E>) -> Response> ClassifyResponse<T, E> for F {
    #[inline(always)]
    fn classify(&self, result: &Result<T, E>) -> Response {
        self(result)
    }
}

/// The default classifier: an `Ok` is an accept, an `Err` is not (the
/// inner service's errors read as "the backend did not take it": a
/// connection refused, a timeout, a 503 turned into an error).
///
/// # Examples
///
/// ```
/// use watertight::throttle::Response;
/// use watertight::tower::{ClassifyResponse, ErrIsOverloaded};
/// assert_eq!(ErrIsOverloaded.classify(&Err::<(), _>("timeout")), Response::Overloaded);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrIsOverloaded;

impl<T, E> ClassifyResponse<T, E> for ErrIsOverloaded {
    #[inline(always)]
    fn classify(&self, result: &Result<T, E>) -> Response {
        match result {
            Ok(_) => Response::Accepted,
            Err(_) => Response::Overloaded,
        }
    }
}

/// Client-side adaptive throttling around a tower service: each call asks
/// the [`AdaptiveThrottle`] first; refused, it fails at once with
/// [`ThrottleError::Throttled`] and the inner service is not called;
/// admitted, the response is classified ([`ErrIsOverloaded`] by default,
/// or [`classify`](Self::classify)) and reported to the throttle, credited
/// to the bucket of the call's admission.
///
/// The decision is made in `call`, not `poll_ready` (readiness is the
/// inner service's), and the services share their throttle through an
/// `Arc`, so they are `Clone` and need no `Buffer`. A response future
/// dropped before it completes reports nothing: its request is taken back
/// out of the window, as a cancelled call's.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::clock::ManualClock;
/// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
/// use watertight::tower::{ThrottleError, ThrottleLayer};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let throttle = Arc::new(AdaptiveThrottle::with_seed("search", ThrottleConfig::DEFAULT, clock, 1));
/// // A backend that sheds everything.
/// let mut svc = ThrottleLayer::new(throttle.clone())
///     .layer(tower::service_fn(|_: u32| async { Err::<u32, _>("503") }));
/// let mut local = 0;
/// for i in 0..100 {
///     if let Err(ThrottleError::Throttled(_)) = svc.call(i).await {
///         local += 1;
///     }
/// }
/// assert!(local > 70);
/// assert_eq!(throttle.metrics().refused, local);
/// # });
/// ```
pub struct ThrottleLayer<C, K = ErrIsOverloaded> {
    throttle: Arc<AdaptiveThrottle<C>>,
    classify: K,
}

impl<C> ThrottleLayer<C> {
    /// A layer asking `throttle`, an `Ok` an accept, an `Err` not.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// use watertight::tower::ThrottleLayer;
    /// let t = Arc::new(AdaptiveThrottle::new("api", ThrottleConfig::DEFAULT, StdClock));
    /// let layer = ThrottleLayer::new(t);
    /// assert_eq!(layer.throttle().name(), "api");
    /// ```
    pub fn new(throttle: Arc<AdaptiveThrottle<C>>) -> Self {
        ThrottleLayer {
            throttle,
            classify: ErrIsOverloaded,
        }
    }
}

impl<C, K> ThrottleLayer<C, K> {
    /// The same layer with `classify` saying what a response means.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, Response, ThrottleConfig};
    /// use watertight::tower::ThrottleLayer;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let t = Arc::new(AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, clock, 1));
    /// let mut svc = ThrottleLayer::new(t.clone())
    ///     .classify(|r: &Result<u16, ()>| match r {
    ///         Ok(503) | Err(()) => Response::Overloaded,
    ///         Ok(_) => Response::Accepted,
    ///     })
    ///     .layer(tower::service_fn(|status: u16| async move { Ok::<_, ()>(status) }));
    /// svc.call(404).await.unwrap(); // an answer: accepted
    /// svc.call(503).await.unwrap(); // shed: not accepted
    /// assert_eq!((t.metrics().accepted, t.metrics().overloaded), (1, 1));
    /// # });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> ThrottleLayer<C, K2> {
        ThrottleLayer {
            throttle: self.throttle,
            classify,
        }
    }

    /// The throttle.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::StdClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// use watertight::tower::ThrottleLayer;
    /// let t = Arc::new(AdaptiveThrottle::new("api", ThrottleConfig::DEFAULT, StdClock));
    /// assert!(Arc::ptr_eq(ThrottleLayer::new(t.clone()).throttle(), &t));
    /// ```
    pub fn throttle(&self) -> &Arc<AdaptiveThrottle<C>> {
        &self.throttle
    }
}

impl<C, K: Clone> Clone for ThrottleLayer<C, K> {
    fn clone(&self) -> Self {
        ThrottleLayer {
            throttle: self.throttle.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<C, K> fmt::Debug for ThrottleLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleLayer")
            .field("throttle", &self.throttle.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, K: Clone> Layer<S> for ThrottleLayer<C, K> {
    type Service = ThrottleService<S, C, K>;
    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            throttle: self.throttle.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// The service of a [`ThrottleLayer`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::Layer;
/// use watertight::clock::StdClock;
/// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
/// use watertight::tower::ThrottleLayer;
///
/// let t = Arc::new(AdaptiveThrottle::new("api", ThrottleConfig::DEFAULT, StdClock));
/// let svc = ThrottleLayer::new(t).layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
/// let _twin = svc.clone(); // one throttle, shared
/// assert_eq!(svc.throttle().name(), "api");
/// ```
pub struct ThrottleService<S, C, K = ErrIsOverloaded> {
    inner: S,
    throttle: Arc<AdaptiveThrottle<C>>,
    classify: K,
}

impl<S, C, K> ThrottleService<S, C, K> {
    /// The throttle.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tower::Layer;
    /// # use watertight::clock::StdClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// # use watertight::tower::ThrottleLayer;
    /// let t = Arc::new(AdaptiveThrottle::new("api", ThrottleConfig::DEFAULT, StdClock));
    /// let svc = ThrottleLayer::new(t).layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
    /// assert_eq!(svc.throttle().metrics().admitted, 0);
    /// ```
    pub fn throttle(&self) -> &Arc<AdaptiveThrottle<C>> {
        &self.throttle
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tower::Layer;
    /// # use watertight::clock::StdClock;
    /// # use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// # use watertight::tower::ThrottleLayer;
    /// let t = Arc::new(AdaptiveThrottle::new("api", ThrottleConfig::DEFAULT, StdClock));
    /// let svc = ThrottleLayer::new(t).layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
    /// let _inner = svc.get_ref();
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, C, K: Clone> Clone for ThrottleService<S, C, K> {
    fn clone(&self) -> Self {
        ThrottleService {
            inner: self.inner.clone(),
            throttle: self.throttle.clone(),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C, K> fmt::Debug for ThrottleService<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleService")
            .field("inner", &self.inner)
            .field("throttle", &self.throttle.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, K, Req> Service<Req> for ThrottleService<S, C, K>
where
    S: Service<Req>,
    C: Clock,
    K: ClassifyResponse<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = ThrottleError<S::Error>;
    type Future = ThrottleFuture<S::Future, C, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ThrottleError::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let state = match self.throttle.admit() {
            Ok(epoch) => State::Running {
                fut: self.inner.call(req),
                ticket: Some(Held {
                    throttle: self.throttle.clone(),
                    epoch,
                    response: Response::Ignored,
                }),
                classify: self.classify.clone(),
            },
            Err(why) => State::Refused { why: Some(why) },
        };
        ThrottleFuture { state }
    }
}

/// An admitted call's place in the throttle's window, reported once, when
/// dropped: with the response set on it, or, unset, as ignored (its
/// request taken back).
struct Held<C: Clock> {
    throttle: Arc<AdaptiveThrottle<C>>,
    epoch: u64,
    response: Response,
}

impl<C: Clock> Drop for Held<C> {
    fn drop(&mut self) {
        self.throttle.finish(self.epoch, self.response);
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, C: Clock, K> {
        Running { #[pin] fut: F, ticket: Option<Held<C>>, classify: K },
        Refused { why: Option<Throttled> },
    }
}

pin_project! {
    /// The response future of a [`ThrottleService`]: the inner future,
    /// whose result is reported to the throttle, or the local refusal.
    /// `Send` when the inner future and the classifier are.
    ///
    /// # Cancel safety
    ///
    /// Dropped before it completes, it reports nothing: its request is
    /// taken back out of the throttle's window.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::throttle::{AdaptiveThrottle, ThrottleConfig};
    /// use watertight::tower::ThrottleLayer;
    ///
    /// let clock = ManualClock::new();
    /// let t = Arc::new(AdaptiveThrottle::with_seed("api", ThrottleConfig::DEFAULT, clock, 1));
    /// let mut svc = ThrottleLayer::new(t.clone())
    ///     .layer(tower::service_fn(|q: u32| async move { Ok::<_, ()>(q) }));
    /// let call = svc.call(1); // admitted here, counted in the window
    /// assert_eq!(t.metrics().requests, 1);
    /// drop(call); // never polled: taken back
    /// assert_eq!(t.metrics().requests, 0);
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ThrottleFuture<F, C: Clock, K> {
        #[pin]
        state: State<F, C, K>,
    }
}

impl<F, C: Clock, K> fmt::Debug for ThrottleFuture<F, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Running { .. } => "running",
            State::Refused { .. } => "refused",
        };
        f.debug_struct("ThrottleFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, C, K, T, E> Future for ThrottleFuture<F, C, K>
where
    F: Future<Output = Result<T, E>>,
    C: Clock,
    K: ClassifyResponse<T, E>,
{
    type Output = Result<T, ThrottleError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Running {
                fut,
                ticket,
                classify,
            } => {
                let result = core::task::ready!(fut.poll(cx));
                if let Some(mut held) = ticket.take() {
                    held.response = classify.classify(&result);
                    drop(held); // reports it
                }
                Poll::Ready(result.map_err(ThrottleError::Inner))
            }
            StateProj::Refused { why } => match why.take() {
                Some(why) => Poll::Ready(Err(ThrottleError::Throttled(why))),
                None => Poll::Pending, // polled after completion
            },
        }
    }
}
