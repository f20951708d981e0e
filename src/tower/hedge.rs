//! [`HedgeLayer`]: hedged calls of a tower service through a [`Policy`]
//! and a [`Hedge`]; its service, response future, and how the attempts
//! take turns with the inner service and the request.

use alloc::sync::Arc;
use core::fmt;
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::classify::{Classify, ErrIsFailure};
use super::policy::dispatch::ready_and_call;
use crate::breaker::{Inline, WindowStorage};
use crate::clock::{Clock, Timer};
use crate::hedge::Hedge;
use crate::policy::{self, Dispatch, HedgedCall, Policy, Relend};

/// A layer whose services hedge every call, for requests that are safe to
/// send more than once: [`Policy::call_hedged`] around the inner service,
/// each attempt a clone of the request sent through the whole policy.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::{Clock, ManualClock, Timer};
/// use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::HedgeLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = PolicyConfig::builder(4).build().unwrap();
/// let search: Arc<Policy<_>> = Arc::new(Policy::new("search", config, clock.clone()).unwrap());
/// let hedge = Arc::new(Hedge::new(
///     "search",
///     HedgeConfig::builder().delay(HedgeDelay::Fixed(Duration::from_millis(20))).build().unwrap(),
/// ));
/// // The first request to the service stalls; the second answers in 5 ms.
/// let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let (c, s) = (clock.clone(), sent.clone());
/// let mut svc = HedgeLayer::new(search.clone(), hedge.clone()).layer(tower::service_fn(move |q: u32| {
///     let n = s.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///     let (clock, ms) = (c.clone(), if n == 0 { 500 } else { 5 });
///     async move {
///         clock.sleep_until(clock.now() + Duration::from_millis(ms)).await;
///         Ok::<_, ()>(q * 10)
///     }
/// }));
/// let call = svc.ready().await.unwrap().call(4);
/// let mut call = core::pin::pin!(call);
/// let answer = loop {
///     if let Some(answer) = futures_lite::future::poll_once(call.as_mut()).await {
///         break answer;
///     }
///     clock.advance(Duration::from_millis(1));
/// };
/// assert_eq!(answer, Ok(40));
/// assert_eq!(hedge.metrics().won, 1);
/// assert_eq!(search.bulkhead().in_flight(), 0);
/// # });
/// ```
pub struct HedgeLayer<C, const N: usize, K = ErrIsFailure, W = Inline<N>, B = C> {
    policy: Arc<Policy<C, N, W, B>>,
    hedge: Arc<Hedge>,
    classify: K,
}

impl<C, const N: usize, W, B> HedgeLayer<C, N, ErrIsFailure, W, B> {
    /// Hedges through `policy` and `hedge` (the same two for every call of
    /// the system), an `Err` a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::ManualClock;
    /// use watertight::hedge::{Hedge, HedgeConfig};
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::HedgeLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let p: Arc<Policy<_>> = Arc::new(Policy::new("db", PolicyConfig::builder(4).build().unwrap(), clock).unwrap());
    /// let layer = HedgeLayer::new(p, Arc::new(Hedge::new("db", HedgeConfig::DEFAULT)));
    /// assert!(format!("{layer:?}").contains("db"));
    /// ```
    pub fn new(policy: Arc<Policy<C, N, W, B>>, hedge: Arc<Hedge>) -> Self {
        HedgeLayer {
            policy,
            hedge,
            classify: ErrIsFailure,
        }
    }
}

impl<C, const N: usize, K, W, B> HedgeLayer<C, N, K, W, B> {
    /// With a classifier: only what it calls a success (or ignores) is an
    /// answer; a failure waits for the other attempts in flight.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::clock::ManualClock;
    /// use watertight::hedge::{Hedge, HedgeConfig};
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::HedgeLayer;
    /// use watertight::Outcome;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let p: Arc<Policy<_>> = Arc::new(Policy::new("db", PolicyConfig::builder(4).build().unwrap(), clock).unwrap());
    /// let _layer = HedgeLayer::new(p, Arc::new(Hedge::new("db", HedgeConfig::DEFAULT)))
    ///     .classify(|r: &Result<u16, ()>| match r {
    ///         Ok(s) if *s < 500 => Outcome::Success,
    ///         _ => Outcome::Failure,
    ///     });
    /// ```
    pub fn classify<K2>(self, classify: K2) -> HedgeLayer<C, N, K2, W, B> {
        HedgeLayer {
            policy: self.policy,
            hedge: self.hedge,
            classify,
        }
    }
}

impl<C, const N: usize, K: Clone, W, B> Clone for HedgeLayer<C, N, K, W, B> {
    fn clone(&self) -> Self {
        HedgeLayer {
            policy: Arc::clone(&self.policy),
            hedge: Arc::clone(&self.hedge),
            classify: self.classify.clone(),
        }
    }
}

impl<C, const N: usize, K, W, B> fmt::Debug for HedgeLayer<C, N, K, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("policy", &self.policy.name())
            .field("hedge", &self.hedge.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K: Clone, W, B> Layer<S> for HedgeLayer<C, N, K, W, B> {
    type Service = HedgeService<S, C, N, K, W, B>;
    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            policy: Arc::clone(&self.policy),
            hedge: Arc::clone(&self.hedge),
            classify: self.classify.clone(),
        }
    }
}

/// The service of a [`HedgeLayer`]: each call hedged (see
/// [`Policy::call_hedged`]). Ready whenever the inner service is asked to
/// be, per attempt: readiness is checked by each attempt, inside the
/// policy.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::hedge::{Hedge, HedgeConfig};
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::HedgeLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let p: Arc<Policy<_>> = Arc::new(Policy::new("db", PolicyConfig::builder(4).build().unwrap(), clock).unwrap());
/// let mut svc = HedgeLayer::new(p.clone(), Arc::new(Hedge::new("db", HedgeConfig::DEFAULT)))
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n + 1) }));
/// assert_eq!(svc.ready().await.unwrap().call(1).await, Ok(2));
/// assert_eq!(svc.policy().breaker().metrics().calls, 1);
/// # });
/// ```
pub struct HedgeService<S, C, const N: usize, K = ErrIsFailure, W = Inline<N>, B = C> {
    inner: S,
    policy: Arc<Policy<C, N, W, B>>,
    hedge: Arc<Hedge>,
    classify: K,
}

impl<S, C, const N: usize, K, W, B> HedgeService<S, C, N, K, W, B> {
    /// The policy, for its metrics.
    ///
    /// # Examples
    ///
    /// See [`HedgeService`].
    pub fn policy(&self) -> &Arc<Policy<C, N, W, B>> {
        &self.policy
    }

    /// The hedge, for its metrics and histogram.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use watertight::clock::ManualClock;
    /// use watertight::hedge::{Hedge, HedgeConfig};
    /// use watertight::policy::{Policy, PolicyConfig};
    /// use watertight::tower::HedgeLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let p: Arc<Policy<_>> = Arc::new(Policy::new("db", PolicyConfig::builder(4).build().unwrap(), clock).unwrap());
    /// let svc = HedgeLayer::new(p, Arc::new(Hedge::new("db", HedgeConfig::DEFAULT)))
    ///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n) }));
    /// assert_eq!(svc.hedge().metrics().sent(), 0);
    /// ```
    pub fn hedge(&self) -> &Arc<Hedge> {
        &self.hedge
    }
}

impl<S: Clone, C, const N: usize, K: Clone, W, B> Clone for HedgeService<S, C, N, K, W, B> {
    fn clone(&self) -> Self {
        HedgeService {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
            hedge: Arc::clone(&self.hedge),
            classify: self.classify.clone(),
        }
    }
}

impl<S: fmt::Debug, C, const N: usize, K, W, B> fmt::Debug for HedgeService<S, C, N, K, W, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("policy", &self.policy.name())
            .finish_non_exhaustive()
    }
}

impl<S, C, const N: usize, K, W, B, Req> Service<Req> for HedgeService<S, C, N, K, W, B>
where
    S: Service<Req> + Clone,
    Req: Clone,
    C: Timer,
    B: Clock,
    W: WindowStorage,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = policy::Error<S::Error>;
    type Future = HedgeFuture<C, N, S, Req, K, W, B>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The readied clone goes with the future, as the policy layer's does.
        let inner = self.inner.clone();
        let service = core::mem::replace(&mut self.inner, inner);
        HedgedCall::new(
            Arc::clone(&self.hedge),
            Arc::clone(&self.policy),
            None,
            ServiceHedge {
                service: Some(service),
                req: Some(req),
                called: false,
            },
            self.classify.clone(),
        )
    }
}

/// The response future of a [`HedgeService`]: a [`HedgedCall`], its
/// attempts inline (no allocation per call).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::clock::ManualClock;
/// use watertight::hedge::{Hedge, HedgeConfig};
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{HedgeFuture, HedgeLayer};
///
/// let clock = Arc::new(ManualClock::new());
/// let p: Arc<Policy<_>> = Arc::new(Policy::new("db", PolicyConfig::builder(4).build().unwrap(), clock).unwrap());
/// let mut svc = HedgeLayer::new(p, Arc::new(Hedge::new("db", HedgeConfig::DEFAULT)))
///     .layer(tower::service_fn(|n: u32| async move { Ok::<_, ()>(n) }));
/// // A named type: it can sit in a struct without a box.
/// let call: HedgeFuture<_, 64, _, u32> = svc.call(3);
/// assert_eq!(futures_lite::future::block_on(call), Ok(3));
/// ```
pub type HedgeFuture<C, const N: usize, S, Req, K = ErrIsFailure, W = Inline<N>, B = C> =
    HedgedCall<Arc<Hedge>, Arc<Policy<C, N, W, B>>, ServiceHedge<S, Req>, K>;

/// The inner service and the request, which the attempts of a hedged call
/// take turns with: each readies the service and sends it a clone of the
/// request, then lends both to the next attempt.
///
/// # Examples
///
/// Named in [`HedgeFuture`]; see [`HedgeLayer`].
#[derive(Debug)]
pub struct ServiceHedge<S, Req> {
    service: Option<S>,
    req: Option<Req>,
    called: bool,
}

impl<S: Service<Req>, Req: Clone> Dispatch for ServiceHedge<S, Req> {
    type Future = S::Future;
    fn poll_dispatch(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<S::Future, Result<S::Response, S::Error>>> {
        let svc = self
            .service
            .as_mut()
            .expect("an attempt holds the service until it calls it");
        let req = self
            .req
            .as_ref()
            .expect("an attempt holds the request until it calls");
        let called = &mut self.called;
        ready_and_call(svc, cx, || {
            *called = true;
            req.clone()
        })
    }
}

impl<S: Service<Req>, Req: Clone> Relend for ServiceHedge<S, Req> {
    fn called(&self) -> bool {
        self.called
    }

    fn lend_back(&mut self, over: bool) -> Option<Self> {
        if !(self.called || over) {
            return None;
        }
        // Lent once: after that this attempt holds neither.
        Some(ServiceHedge {
            service: Some(self.service.take()?),
            req: Some(self.req.take()?),
            called: false,
        })
    }
}
