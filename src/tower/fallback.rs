//! [`FallbackLayer`]: a refusal turned into a response by a function; and
//! which of the layers' errors are refusals ([`Refused`]).

use core::convert::Infallible;
use core::fmt;
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{BreakerError, BulkheadError, PartitionServiceError, RateLimitError, ThrottleError};
#[cfg(feature = "redis")]
use super::{GlobalBulkheadError, GlobalRateLimitError};
#[cfg(feature = "http")]
use super::{InboundDeadlineError, OutboundDeadlineError};
use crate::breaker::Rejection;
use crate::bulkhead::AcquireError;
use crate::fallback::{Fallback, OnAnyError, OnRefusal, OrFallback, Refused};
use crate::throttle::Throttled;

/// A [`Layer`] that answers for the inner service when it is refused: the
/// function gets the typed refusal (the policy's [`policy::Error`] without
/// a call error, the bulkhead's [`AcquireError`], the breaker's
/// [`Rejection`] with its retry hint, a rate limit's `retry_after`, …: the
/// inner service's error's [`Refused::Refusal`]) and returns the response,
/// or gives the refusal back. The inner service's own errors pass through,
/// unless the layer is made with [`any`](Self::any).
///
/// Put it outside the layer whose refusals it answers. The function is
/// cloned into each call's future ([`OrFallback`]): no allocation per
/// call.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::ServiceExt;
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{FallbackLayer, PolicyLayer};
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let reviews: Arc<Policy<_>> = Arc::new(Policy::new("reviews", config, clock).unwrap());
/// let svc = tower::ServiceBuilder::new()
///     .layer(FallbackLayer::new(|refused: watertight::policy::Error<_>| {
///         // A 503 with Retry-After when the breaker gave a hint.
///         let secs = refused.retry_after().map_or(1, |d| d.as_secs().max(1));
///         Ok((503u16, format!("retry after {secs} s")))
///     }))
///     .layer(PolicyLayer::new(reviews.clone()))
///     .service(tower::service_fn(|_: ()| async { Ok::<_, &str>((200u16, String::from("5 stars"))) }));
///
/// assert_eq!(svc.clone().oneshot(()).await.unwrap().0, 200);
/// reviews.breaker().force_open();
/// assert_eq!(svc.oneshot(()).await.unwrap(), (503, String::from("retry after 1 s")));
/// # });
/// ```
///
/// [`policy::Error`]: crate::policy::Error
#[derive(Clone, Copy)]
pub struct FallbackLayer<H> {
    fallback: H,
}

impl<F> FallbackLayer<OnRefusal<F>> {
    /// A layer whose services run `fallback` on a refusal only.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, ServiceExt};
    /// use watertight::clock::StdClock;
    /// use watertight::tower::{BulkheadLayer, FallbackLayer};
    /// use watertight::{AcquireError, Bulkhead};
    ///
    /// # futures_lite::future::block_on(async {
    /// let slots = Arc::new(Bulkhead::new("render", 1, StdClock));
    /// let inner = BulkheadLayer::new(slots.clone())
    ///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, &str>(n) }));
    /// let svc = FallbackLayer::new(|why: AcquireError| {
    ///     assert_eq!(why, AcquireError::Full);
    ///     Ok(0)
    /// })
    /// .layer(inner);
    /// let _busy = slots.try_acquire().unwrap();
    /// assert_eq!(svc.oneshot(7).await, Ok(0));
    /// # });
    /// ```
    pub fn new(fallback: F) -> Self {
        FallbackLayer {
            fallback: OnRefusal(fallback),
        }
    }
}

impl<F> FallbackLayer<OnAnyError<F>> {
    /// A layer whose services run `fallback` on every error, the inner
    /// service's own included.
    ///
    /// # Examples
    ///
    /// ```
    /// use tower::{Layer, ServiceExt};
    /// use watertight::tower::{BulkheadError, FallbackLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let failing = tower::service_fn(|_: ()| async { Err::<u32, _>(BulkheadError::Inner("500")) });
    /// let svc = FallbackLayer::any(|_: BulkheadError<&str>| Ok(0)).layer(failing);
    /// assert_eq!(svc.oneshot(()).await, Ok(0));
    /// # });
    /// ```
    pub fn any(fallback: F) -> Self {
        FallbackLayer {
            fallback: OnAnyError(fallback),
        }
    }
}

impl<H> fmt::Debug for FallbackLayer<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackLayer").finish_non_exhaustive()
    }
}

impl<S, H: Clone> Layer<S> for FallbackLayer<H> {
    type Service = FallbackService<S, H>;
    fn layer(&self, inner: S) -> Self::Service {
        FallbackService {
            inner,
            fallback: self.fallback.clone(),
        }
    }
}

/// The service of [`FallbackLayer`]: the inner service, with the fallback
/// run on its refusals (or errors). Its readiness is the inner service's,
/// and a readiness error is passed on as it is (no request to answer for).
///
/// # Examples
///
/// ```
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::tower::{FallbackLayer, FallbackService, ThrottleError};
/// use watertight::throttle::Throttled;
///
/// # futures_lite::future::block_on(async {
/// let refused = tower::service_fn(|_: ()| async {
///     Err::<&str, ThrottleError<()>>(ThrottleError::Throttled(Throttled::with_probability(0.5)))
/// });
/// let mut svc: FallbackService<_, _> = FallbackLayer::new(|_: Throttled| Ok("later")).layer(refused);
/// assert_eq!(svc.ready().await.unwrap().call(()).await, Ok("later"));
/// # });
/// ```
#[derive(Clone, Copy)]
pub struct FallbackService<S, H> {
    inner: S,
    fallback: H,
}

impl<S: fmt::Debug, H> fmt::Debug for FallbackService<S, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, H, Req> Service<Req> for FallbackService<S, H>
where
    S: Service<Req>,
    H: Fallback<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = OrFallback<S::Future, H>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        OrFallback::new(self.inner.call(req), self.fallback.clone())
    }
}

/// `Refused` for a layer error of the shape `Refused(R) | Inner(E)`.
macro_rules! refused_variant {
    ($t:ident :: $v:ident ($r:ty)) => {
        impl<E> Refused for $t<E> {
            type Refusal = $r;
            fn into_refusal(self) -> Result<$r, Self> {
                match self {
                    $t::$v(r) => Ok(r),
                    other => Err(other),
                }
            }
            fn from_refusal(refusal: $r) -> Self {
                $t::$v(refusal)
            }
        }
    };
}

refused_variant!(BreakerError::Rejected(Rejection));
refused_variant!(ThrottleError::Throttled(Throttled));
#[cfg(feature = "redis")]
refused_variant!(GlobalBulkheadError::Refused(crate::redis::GlobalError));

impl<E> Refused for BulkheadError<E> {
    type Refusal = AcquireError;
    fn into_refusal(self) -> Result<AcquireError, Self> {
        match self {
            BulkheadError::Rejected(r) if r.is_rejection() => Ok(r),
            other => Err(other),
        }
    }
    fn from_refusal(refusal: AcquireError) -> Self {
        BulkheadError::Rejected(refusal)
    }
}

/// A rate layer's refusal: `Limited` or `TableFull`, with `retry_after`.
impl<E> Refused for RateLimitError<E> {
    type Refusal = RateLimitError<Infallible>;
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        match self {
            RateLimitError::Limited { retry_after } => Ok(RateLimitError::Limited { retry_after }),
            RateLimitError::TableFull { retry_after } => {
                Ok(RateLimitError::TableFull { retry_after })
            }
            other => Err(other),
        }
    }
    fn from_refusal(refusal: Self::Refusal) -> Self {
        match refusal {
            RateLimitError::Limited { retry_after } => RateLimitError::Limited { retry_after },
            RateLimitError::TableFull { retry_after } => RateLimitError::TableFull { retry_after },
            RateLimitError::ExceedsBurst { requested, burst } => {
                RateLimitError::ExceedsBurst { requested, burst }
            }
            RateLimitError::Inner(never) => match never {},
        }
    }
}

/// A partition layer's refusal: the request's class and why its room
/// refused (not a bad class number).
impl<E> Refused for PartitionServiceError<E> {
    type Refusal = (usize, AcquireError);
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        match self {
            PartitionServiceError::Rejected { class, why } if why.is_rejection() => {
                Ok((class, why))
            }
            other => Err(other),
        }
    }
    fn from_refusal((class, why): Self::Refusal) -> Self {
        PartitionServiceError::Rejected { class, why }
    }
}

/// A global rate layer's refusal (not a bad key, nor `ExceedsBurst`).
#[cfg(feature = "redis")]
impl<E> Refused for GlobalRateLimitError<E> {
    type Refusal = crate::redis::GlobalRateError;
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        match self {
            GlobalRateLimitError::Refused(r) if r.is_rejection() => Ok(r),
            other => Err(other),
        }
    }
    fn from_refusal(refusal: Self::Refusal) -> Self {
        GlobalRateLimitError::Refused(refusal)
    }
}

/// An inbound deadline's refusal: `Refused` (the budget left was below the
/// minimum cost) or `Elapsed`; a malformed header is bad input.
#[cfg(feature = "http")]
impl<E> Refused for InboundDeadlineError<E> {
    type Refusal = InboundDeadlineError<Infallible>;
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        match self {
            InboundDeadlineError::Refused { budget } => {
                Ok(InboundDeadlineError::Refused { budget })
            }
            InboundDeadlineError::Elapsed => Ok(InboundDeadlineError::Elapsed),
            other => Err(other),
        }
    }
    fn from_refusal(refusal: Self::Refusal) -> Self {
        match refusal {
            InboundDeadlineError::Refused { budget } => InboundDeadlineError::Refused { budget },
            InboundDeadlineError::Elapsed => InboundDeadlineError::Elapsed,
            InboundDeadlineError::Malformed(p) => InboundDeadlineError::Malformed(p),
            InboundDeadlineError::Inner(never) => match never {},
        }
    }
}

/// An outbound deadline's refusal: `Expired` (not sent) or `Elapsed`.
#[cfg(feature = "http")]
impl<E> Refused for OutboundDeadlineError<E> {
    type Refusal = OutboundDeadlineError<Infallible>;
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        match self {
            OutboundDeadlineError::Expired { left } => Ok(OutboundDeadlineError::Expired { left }),
            OutboundDeadlineError::Elapsed => Ok(OutboundDeadlineError::Elapsed),
            OutboundDeadlineError::Inner(e) => Err(OutboundDeadlineError::Inner(e)),
        }
    }
    fn from_refusal(refusal: Self::Refusal) -> Self {
        match refusal {
            OutboundDeadlineError::Expired { left } => OutboundDeadlineError::Expired { left },
            OutboundDeadlineError::Elapsed => OutboundDeadlineError::Elapsed,
            OutboundDeadlineError::Inner(never) => match never {},
        }
    }
}
