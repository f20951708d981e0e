//! [`ChaosLayer`]: an [`Injector`] in front of a tower service (features
//! `chaos` and `tower`); its service.

use alloc::sync::Arc;
use core::fmt;
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::chaos::{Inject, Injector};
use crate::clock::Timer;

/// Fault injection around a tower service: each call takes the
/// [`Injector`]'s next draw and is passed to the inner service untouched,
/// passed after the injected latency (the inner service is called at once,
/// its future polled after the sleep), or answered with the injected error
/// or outcome, or left hanging, without calling the inner service.
///
/// The injector's output is the service's `Result<Response, Error>`, so an
/// injected error is an error of the inner service's type and an injected
/// outcome a response (an HTTP 503, say): the layers above cannot tell it
/// from the real thing. Put it innermost, right above the service it stands
/// for, with the policy under test outside it. The services share their
/// injector through an `Arc`: they are `Clone`, and one switch turns them
/// all on or off.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service};
/// use watertight::chaos::{ChaosConfig, Fault, Injector};
/// use watertight::clock::ManualClock;
/// use watertight::tower::ChaosLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let config = ChaosConfig::builder().outcome(0.5, || Ok(503)).seed(7).build().unwrap();
/// let chaos = Arc::new(Injector::new("pricing", config, clock));
/// let mut pricing = ChaosLayer::new(chaos.clone())
///     .layer(tower::service_fn(|_sku: u32| async { Ok::<u16, &str>(200) }));
///
/// let mut unavailable = 0;
/// for sku in 0..100 {
///     if pricing.call(sku).await == Ok(503) {
///         unavailable += 1;
///     }
/// }
/// assert_eq!(unavailable, chaos.metrics().injected(Fault::Outcome));
/// assert!((30..70).contains(&unavailable));
/// # });
/// ```
pub struct ChaosLayer<C, O> {
    injector: Arc<Injector<C, O>>,
}

impl<C, O> ChaosLayer<C, O> {
    /// A layer injecting by `injector`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watertight::chaos::{ChaosConfig, Injector};
    /// use watertight::clock::ManualClock;
    /// use watertight::tower::ChaosLayer;
    ///
    /// let clock = Arc::new(ManualClock::new());
    /// let config = ChaosConfig::<Result<(), ()>>::builder().build().unwrap();
    /// let layer = ChaosLayer::new(Arc::new(Injector::new("db", config, clock)));
    /// assert_eq!(layer.injector().name(), "db");
    /// ```
    pub fn new(injector: Arc<Injector<C, O>>) -> Self {
        ChaosLayer { injector }
    }

    /// The injector.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// # use watertight::tower::ChaosLayer;
    /// let clock = Arc::new(ManualClock::new());
    /// let config = ChaosConfig::<Result<(), ()>>::builder().build().unwrap();
    /// let chaos = Arc::new(Injector::new("db", config, clock));
    /// assert!(Arc::ptr_eq(ChaosLayer::new(chaos.clone()).injector(), &chaos));
    /// ```
    pub fn injector(&self) -> &Arc<Injector<C, O>> {
        &self.injector
    }
}

impl<C, O> Clone for ChaosLayer<C, O> {
    fn clone(&self) -> Self {
        ChaosLayer {
            injector: self.injector.clone(),
        }
    }
}

impl<C, O> fmt::Debug for ChaosLayer<C, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("injector", &self.injector.name())
            .finish()
    }
}

impl<S, C, O> Layer<S> for ChaosLayer<C, O> {
    type Service = ChaosService<S, C, O>;
    fn layer(&self, inner: S) -> Self::Service {
        ChaosService {
            inner,
            injector: self.injector.clone(),
        }
    }
}

/// The service of a [`ChaosLayer`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::Layer;
/// use watertight::chaos::{ChaosConfig, Injector};
/// use watertight::clock::ManualClock;
/// use watertight::tower::ChaosLayer;
///
/// let clock = Arc::new(ManualClock::new());
/// let config = ChaosConfig::<Result<u8, ()>>::builder().build().unwrap();
/// let svc = ChaosLayer::new(Arc::new(Injector::new("db", config, clock)))
///     .layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
/// let _twin = svc.clone(); // one injector, shared
/// assert_eq!(svc.injector().name(), "db");
/// ```
pub struct ChaosService<S, C, O> {
    inner: S,
    injector: Arc<Injector<C, O>>,
}

impl<S, C, O> ChaosService<S, C, O> {
    /// The injector.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tower::Layer;
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// # use watertight::tower::ChaosLayer;
    /// let clock = Arc::new(ManualClock::new());
    /// let config = ChaosConfig::<Result<u8, ()>>::builder().build().unwrap();
    /// let svc = ChaosLayer::new(Arc::new(Injector::new("db", config, clock)))
    ///     .layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
    /// assert_eq!(svc.injector().metrics().passed, 0);
    /// ```
    pub fn injector(&self) -> &Arc<Injector<C, O>> {
        &self.injector
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tower::Layer;
    /// # use watertight::chaos::{ChaosConfig, Injector};
    /// # use watertight::clock::ManualClock;
    /// # use watertight::tower::ChaosLayer;
    /// let clock = Arc::new(ManualClock::new());
    /// let config = ChaosConfig::<Result<u8, ()>>::builder().build().unwrap();
    /// let svc = ChaosLayer::new(Arc::new(Injector::new("db", config, clock)))
    ///     .layer(tower::service_fn(|x: u8| async move { Ok::<_, ()>(x) }));
    /// let _inner = svc.get_ref();
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, C, O> Clone for ChaosService<S, C, O> {
    fn clone(&self) -> Self {
        ChaosService {
            inner: self.inner.clone(),
            injector: self.injector.clone(),
        }
    }
}

impl<S: fmt::Debug, C, O> fmt::Debug for ChaosService<S, C, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosService")
            .field("inner", &self.inner)
            .field("injector", &self.injector.name())
            .finish()
    }
}

impl<S, C, Req, T, E> Service<Req> for ChaosService<S, C, Result<T, E>>
where
    S: Service<Req, Response = T, Error = E>,
    C: Timer,
{
    type Response = T;
    type Error = E;
    type Future = Inject<S::Future, C::Sleep, Result<T, E>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), E>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let inner = &mut self.inner;
        self.injector.call(move || inner.call(req))
    }
}
