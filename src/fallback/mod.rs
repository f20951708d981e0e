//! What to answer when a call is refused: a fallback that sees the typed
//! refusal, and a cache of good answers to serve, marked with their age,
//! while the system is unavailable.
//!
//! The degrade ladder, for a call that did not make it, best first: answer
//! without the optional part; serve cached data marked with its age; retry
//! once if idempotent and the budget allows; refuse with a clear error and
//! `Retry-After` ([the guide's degrade ladder](crate::guide::degrade)
//! shows each rung). This module holds the pieces of the first two:
//!
//! - [`FallbackExt::or_fallback`] on any future of `Result<T, E>` whose
//!   error can be a refusal ([`Refused`]: a [`policy::Error`], the
//!   breaker's [`CallError`], the bulkhead's [`AcquireError`], a
//!   [`deadline::Elapsed`](crate::deadline::Elapsed), the tower layers'
//!   errors, the Redis-wide limits' `GlobalError`): when the call is
//!   **refused** — bulkhead full or closed, breaker open (with its retry
//!   hint), rate limited (with `retry_after`), throttled, out of time, the
//!   limit's store unreachable — the fallback gets the typed refusal with
//!   its data and chooses the answer, or gives the refusal back. A plain
//!   application error (the call ran and failed: [`ErrorKind::Call`])
//!   passes through untouched: the system answered, and its answer is the
//!   caller's to handle. [`or_fallback_any`](FallbackExt::or_fallback_any)
//!   runs the fallback for every error, when that is what is wanted.
//! - [`StaleCache`]: a bounded table of the last good answer per key;
//!   [`StaleCache::call`] records each `Ok` and, on a refusal, serves the
//!   last one as [`Served::Stale`] with its **age**, up to a max
//!   staleness, after which it is a miss and the refusal comes back.
//! - `tower::FallbackLayer` (feature `tower`): the same for a tower
//!   service, the refusal turned into a response by a function; and
//!   `tower::StaleCacheLayer`, a [`StaleCache`] keyed by a function of the
//!   request.
//!
//! Nothing here allocates, and all of it is `no_std`: the future is a named
//! type holding the call's future and the fallback closure; the cache is a
//! fixed table.
//!
//! # Why `or_fallback` and not `or_else`
//!
//! `futures::TryFutureExt::or_else` exists with another meaning (it runs
//! for every error, and its closure returns a future): with both traits in
//! scope, a method of the same name would not compile (ambiguous), and
//! without ours it would silently mean the other. `or_fallback` says what
//! it is. The fallback is a plain function, not a future: it is a choice
//! made from the refusal and what the caller holds (a default, a cached
//! value, a 503); an asynchronous second source is a `match` on the
//! awaited result.
//!
//! # Examples
//!
//! ```
//! use watertight::clock::ManualClock;
//! use watertight::fallback::FallbackExt;
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! use watertight::Rejection;
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let pricing: Policy<_> =
//!     Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
//! pricing.breaker().force_open();
//!
//! // Refused: the fallback sees why, and answers "no price" instead.
//! let price = pricing
//!     .call(|| async { Ok::<Option<u32>, &str>(Some(4200)) })
//!     .or_fallback(|refused| {
//!         assert_eq!(*refused.kind(), ErrorKind::CircuitOpen(Rejection::ForcedOpen));
//!         Ok(None)
//!     })
//!     .await;
//! assert_eq!(price, Ok(None));
//!
//! // The call's own error is not a refusal: it comes back as it was.
//! pricing.breaker().reset();
//! let err = pricing
//!     .call(|| async { Err::<Option<u32>, _>("no such sku") })
//!     .or_fallback(|_| Ok(None))
//!     .await
//!     .unwrap_err();
//! assert_eq!(err.into_inner(), Some("no such sku"));
//! # });
//! ```
//!
//! [`policy::Error`]: crate::policy::Error
//! [`ErrorKind::Call`]: crate::policy::ErrorKind::Call
//! [`CallError`]: crate::CallError
//! [`AcquireError`]: crate::AcquireError

use core::convert::Infallible;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use crate::breaker::{CallError, Rejection};
use crate::bulkhead::AcquireError;
use crate::deadline::Elapsed;
use crate::policy;
use crate::rate::{KeyedError, NotYet, RateError};
use crate::throttle::Throttled;

mod stale;

pub use crate::table::{DefaultState, FnvHasher, FnvState, WAYS};
pub use stale::{Served, Stale, StaleCache, StaleCall, StaleMetrics};

/// An error that may be a **refusal** (the system was not asked, or did
/// not answer in time: the caller should degrade) rather than the call's
/// own answer, and the refusal's type.
///
/// [`into_refusal`](Self::into_refusal) splits the two;
/// [`from_refusal`](Self::from_refusal) puts a refusal back, for a
/// fallback that has nothing better to give.
///
/// | error | [`Refusal`](Self::Refusal) | not a refusal |
/// |---|---|---|
/// | [`policy::Error<E>`](crate::policy::Error) | `policy::Error<Infallible>`: every kind but `Call`, with the system's name | [`ErrorKind::Call`](crate::policy::ErrorKind::Call) |
/// | [`CallError<E>`](crate::CallError) (a breaker's call) | [`Rejection`] | `Failed` |
/// | [`AcquireError`] | itself | `ExceedsCapacity` (a bad request, never a wait's outcome) |
/// | [`RateError`] | [`NotYet`] | `ExceedsBurst` |
/// | [`KeyedError`] | itself | `Rate(ExceedsBurst)` |
/// | [`Throttled`], [`Rejection`], [`Elapsed`] | itself | — |
/// | the tower layers' errors (feature `tower`) | the layer's refusal | `Inner`, and bad input (`ExceedsBurst`, `NoSuchClass`, `Malformed`, `BadKey`) |
/// | `redis::GlobalError`, `redis::GlobalRateError` (feature `redis`) | itself | `ExceedsBurst` |
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::fallback::Refused;
/// use watertight::{CallError, Rejection};
///
/// let open: CallError<&str> = CallError::Rejected(Rejection::Open { retry_after: Duration::from_secs(3) });
/// assert_eq!(open.into_refusal().unwrap().retry_after(), Some(Duration::from_secs(3)));
/// let failed: CallError<&str> = CallError::Failed("500");
/// assert_eq!(failed.into_refusal(), Err(CallError::Failed("500")));
/// assert_eq!(CallError::<&str>::from_refusal(Rejection::ProbesBusy), CallError::Rejected(Rejection::ProbesBusy));
/// ```
pub trait Refused: Sized {
    /// The refusal with its data (the retry hint, the system's name).
    type Refusal;

    /// The refusal, or this error as it was when it is not one.
    ///
    /// # Errors
    ///
    /// `Err(self)` when this is not a refusal: the call's own error, or a
    /// request that could never succeed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::fallback::Refused;
    /// use watertight::AcquireError;
    ///
    /// assert_eq!(AcquireError::TimedOut.into_refusal(), Ok(AcquireError::TimedOut));
    /// let bad = AcquireError::ExceedsCapacity { requested: 9, capacity: 4 };
    /// assert_eq!(bad.into_refusal(), Err(bad)); // a bad request, not a refusal
    /// ```
    fn into_refusal(self) -> Result<Self::Refusal, Self>;

    /// The error that carries `refusal`.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::Instant;
    /// use watertight::fallback::Refused;
    /// use watertight::rate::{NotYet, RateError};
    ///
    /// let n = NotYet::new(Instant::ZERO, Instant::from_nanos(1_000_000));
    /// let e = RateError::from_refusal(n);
    /// assert_eq!(e.retry_after(), Some(Duration::from_millis(1)));
    /// ```
    fn from_refusal(refusal: Self::Refusal) -> Self;
}

impl<E> Refused for policy::Error<E> {
    type Refusal = policy::Error<Infallible>;
    fn into_refusal(self) -> Result<Self::Refusal, Self> {
        policy::Error::into_refusal(self)
    }
    fn from_refusal(refusal: Self::Refusal) -> Self {
        refusal.widen()
    }
}

impl<E> Refused for CallError<E> {
    type Refusal = Rejection;
    fn into_refusal(self) -> Result<Rejection, Self> {
        match self {
            CallError::Rejected(r) => Ok(r),
            failed => Err(failed),
        }
    }
    fn from_refusal(refusal: Rejection) -> Self {
        CallError::Rejected(refusal)
    }
}

impl Refused for RateError {
    type Refusal = NotYet;
    fn into_refusal(self) -> Result<NotYet, Self> {
        match self {
            RateError::Limited(n) => Ok(n),
            other => Err(other),
        }
    }
    fn from_refusal(refusal: NotYet) -> Self {
        RateError::Limited(refusal)
    }
}

/// Errors that are always refusals.
macro_rules! always_refused {
    ($($t:ty),*) => {$(
        impl $crate::fallback::Refused for $t {
            type Refusal = $t;
            fn into_refusal(self) -> Result<Self, Self> {
                Ok(self)
            }
            fn from_refusal(refusal: Self) -> Self {
                refusal
            }
        }
    )*};
}

/// Errors that are refusals when their `is_rejection` says so; otherwise a
/// request that could never succeed.
macro_rules! refused_if_rejection {
    ($($t:ty),*) => {$(
        impl $crate::fallback::Refused for $t {
            type Refusal = $t;
            fn into_refusal(self) -> Result<Self, Self> {
                if self.is_rejection() {
                    Ok(self)
                } else {
                    Err(self)
                }
            }
            fn from_refusal(refusal: Self) -> Self {
                refusal
            }
        }
    )*};
}
#[cfg(feature = "redis")]
pub(crate) use {always_refused, refused_if_rejection};

always_refused!(Throttled, Rejection, Elapsed);
refused_if_rejection!(AcquireError, KeyedError);

/// What a fallback does with the error of a call: [`OnRefusal`] (the
/// refusals only) or [`OnAnyError`]. The handler of an [`OrFallback`]
/// and of `tower::FallbackService`.
///
/// # Examples
///
/// ```
/// use watertight::fallback::{Fallback, OnAnyError, OnRefusal};
/// use watertight::AcquireError;
///
/// let full = OnRefusal(|_: AcquireError| Ok::<_, AcquireError>(0));
/// assert_eq!(Fallback::<u32, AcquireError>::fall_back(full, AcquireError::Full), Ok(0));
/// let any = OnAnyError(|e: AcquireError| if e.is_rejection() { Ok(0) } else { Err(e) });
/// assert_eq!(any.fall_back(AcquireError::Closed), Ok::<u32, _>(0));
/// ```
pub trait Fallback<T, E> {
    /// The answer for the call that failed with `err`, or an error.
    ///
    /// # Errors
    ///
    /// The handler's choice: the error as it was, or the refusal given
    /// back.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::fallback::{Fallback, OnRefusal};
    /// use watertight::deadline::Elapsed;
    ///
    /// let late = OnRefusal(|_: Elapsed| Ok::<_, Elapsed>("cached"));
    /// assert_eq!(late.fall_back(Elapsed), Ok("cached"));
    /// ```
    fn fall_back(self, err: E) -> Result<T, E>;
}

/// A fallback run for refusals only ([`Refused::into_refusal`]): the
/// call's own error passes through.
///
/// # Examples
///
/// ```
/// use watertight::fallback::{Fallback, OnRefusal};
/// use watertight::CallError;
///
/// let f = OnRefusal(|_| Ok(0));
/// assert_eq!(f.fall_back(CallError::Failed("no")), Err::<u32, _>(CallError::Failed("no")));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OnRefusal<F>(pub F);

impl<T, E, F> Fallback<T, E> for OnRefusal<F>
where
    E: Refused,
    F: FnOnce(E::Refusal) -> Result<T, E::Refusal>,
{
    #[inline]
    fn fall_back(self, err: E) -> Result<T, E> {
        match err.into_refusal() {
            Ok(refusal) => (self.0)(refusal).map_err(E::from_refusal),
            Err(own) => Err(own),
        }
    }
}

/// A fallback run for every error, the call's own included.
///
/// # Examples
///
/// ```
/// use watertight::fallback::{Fallback, OnAnyError};
/// use watertight::CallError;
///
/// let f = OnAnyError(|_: CallError<&str>| Ok(0));
/// assert_eq!(f.fall_back(CallError::Failed("no")), Ok::<u32, _>(0));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OnAnyError<F>(pub F);

impl<T, E, F> Fallback<T, E> for OnAnyError<F>
where
    F: FnOnce(E) -> Result<T, E>,
{
    #[inline]
    fn fall_back(self, err: E) -> Result<T, E> {
        (self.0)(err)
    }
}

/// Fallbacks on any future of `Result<T, E>`: implemented for every
/// future; the methods apply where the error is [`Refused`] (or, for
/// [`or_fallback_any`](Self::or_fallback_any), any error).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::clock::ManualClock;
/// use watertight::fallback::FallbackExt;
/// use watertight::policy::{ErrorKind, Policy, PolicyConfig};
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let config = PolicyConfig::builder(1).max_wait(Duration::ZERO).build().unwrap();
/// let search: Policy<_> = Policy::new("search", config, &clock).unwrap();
/// let _busy = search.bulkhead().try_acquire().unwrap();
///
/// let hits = search
///     .call(|| async { Ok::<Vec<&str>, ()>(vec!["shoes"]) })
///     .or_fallback(|refused| match refused.kind() {
///         ErrorKind::BulkheadFull => Ok(Vec::new()), // "no results" beats an error page
///         _ => Err(refused),
///     })
///     .await;
/// assert_eq!(hits, Ok(vec![]));
/// # });
/// ```
pub trait FallbackExt: Future + Sized {
    /// When this call is refused, `fallback` gets the refusal (with its
    /// data: the system, why, the retry hint) and returns the answer, or
    /// gives the refusal back (`Err(refusal)`: the caller gets it as the
    /// call's error). Not run for the call's own error, nor on success.
    ///
    /// # Cancel safety
    ///
    /// As the call's future: dropping the returned future drops it (and
    /// the fallback, unrun).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::FallbackExt;
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::rate::Quota;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = PolicyConfig::builder(4).rate(Quota::per_second(2).burst(1)).build().unwrap();
    /// let geo: Policy<_> = Policy::new("geo", config, &clock).unwrap();
    /// assert!(geo.call(|| async { Ok::<&str, ()>("Lisbon") }).await.is_ok());
    ///
    /// // Rate limited: answer without the optional part, and say when to ask again.
    /// let mut hint = None;
    /// let city = geo
    ///     .call(|| async { Ok::<&str, ()>("Lisbon") })
    ///     .or_fallback(|refused| {
    ///         hint = refused.retry_after();
    ///         Ok("")
    ///     })
    ///     .await;
    /// assert_eq!(city, Ok(""));
    /// assert_eq!(hint, Some(Duration::from_millis(500)));
    /// # });
    /// ```
    fn or_fallback<T, E, F>(self, fallback: F) -> OrFallback<Self, OnRefusal<F>>
    where
        Self: Future<Output = Result<T, E>>,
        E: Refused,
        F: FnOnce(E::Refusal) -> Result<T, E::Refusal>,
    {
        OrFallback {
            fut: self,
            fallback: Some(OnRefusal(fallback)),
        }
    }

    /// Like [`or_fallback`](Self::or_fallback), but run for every error,
    /// the call's own included: `fallback` gets the error as it is.
    ///
    /// # Cancel safety
    ///
    /// As [`or_fallback`](Self::or_fallback).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::ManualClock;
    /// use watertight::fallback::FallbackExt;
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let ads: Policy<_> = Policy::new("ads", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// // Ads are optional: whatever went wrong, the page shows none.
    /// let shown = ads
    ///     .call(|| async { Err::<Vec<u32>, _>("500") })
    ///     .or_fallback_any(|_| Ok(Vec::new()))
    ///     .await;
    /// assert_eq!(shown, Ok(vec![]));
    /// # });
    /// ```
    fn or_fallback_any<T, E, F>(self, fallback: F) -> OrFallback<Self, OnAnyError<F>>
    where
        Self: Future<Output = Result<T, E>>,
        F: FnOnce(E) -> Result<T, E>,
    {
        OrFallback {
            fut: self,
            fallback: Some(OnAnyError(fallback)),
        }
    }
}

impl<Fut: Future> FallbackExt for Fut {}

pin_project! {
    /// The future of [`FallbackExt::or_fallback`] and
    /// [`or_fallback_any`](FallbackExt::or_fallback_any), and of
    /// `tower::FallbackService`: the call's future, then the fallback on
    /// its error. A named type holding both: no allocation.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the call's future and the fallback, unrun.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::fallback::{FallbackExt, OnRefusal, OrFallback};
    /// use watertight::AcquireError;
    ///
    /// type Answer = core::future::Ready<Result<u32, AcquireError>>;
    /// type Zero = fn(AcquireError) -> Result<u32, AcquireError>;
    /// let zero: Zero = |_| Ok(0);
    /// // A named type: it can sit in a struct without a box.
    /// let fut: OrFallback<Answer, OnRefusal<Zero>> =
    ///     core::future::ready(Err(AcquireError::Full)).or_fallback(zero);
    /// assert_eq!(futures_lite::future::block_on(fut), Ok(0));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct OrFallback<Fut, H> {
        #[pin]
        fut: Fut,
        fallback: Option<H>,
    }
}

impl<Fut, H> OrFallback<Fut, H> {
    /// `fut`, with `fallback` run on its error: how the tower service
    /// makes its response future.
    #[cfg(feature = "tower")]
    pub(crate) fn new(fut: Fut, fallback: H) -> Self {
        OrFallback {
            fut,
            fallback: Some(fallback),
        }
    }
}

impl<Fut, H, T, E> Future for OrFallback<Fut, H>
where
    Fut: Future<Output = Result<T, E>>,
    H: Fallback<T, E>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.fut.poll(cx));
        let fallback = this
            .fallback
            .take()
            .expect("OrFallback polled after it completed");
        Poll::Ready(match out {
            Ok(t) => Ok(t),
            Err(e) => fallback.fall_back(e),
        })
    }
}
