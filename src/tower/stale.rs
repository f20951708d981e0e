//! [`StaleCacheLayer`]: a [`StaleCache`] around a tower service, keyed by a
//! function of the request.

use alloc::sync::Arc;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::fallback::{Refused, StaleCache, StaleCall};

/// A [`Layer`] that records the inner service's good responses in a
/// [`StaleCache`], under a key made of the request, and answers the inner
/// layer's **refusal** (its error's [`Refused::Refusal`]: an open breaker,
/// a full bulkhead, …) with the key's last response and its age. The
/// response is a [`Served`](crate::fallback::Served): fresh, or stale with
/// its age (for an `Age` header, or "price 42 s old" on the page). The
/// inner service's own errors pass through, as does a refusal with no
/// answer for the key, or one older than the cache's max staleness.
///
/// Put it outside the layer whose refusals it answers. The response must
/// be `Clone` (a clone is recorded): make it cheap (an `Arc`, a small
/// value). The key function runs once per request, before the call.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::fallback::{Served, StaleCache};
/// use watertight::policy::{Policy, PolicyConfig};
/// use watertight::tower::{PolicyLayer, StaleCacheLayer};
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let pricing: Arc<Policy<_>> = Arc::new(
///     Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), clock.clone()).unwrap(),
/// );
/// let prices: Arc<StaleCache<u32, u64, _, 8>> =
///     Arc::new(StaleCache::new("prices", Duration::from_secs(300), clock.clone()));
/// let svc = StaleCacheLayer::new(prices, |sku: &u32| *sku).layer(
///     PolicyLayer::new(pricing.clone())
///         .layer(tower::service_fn(|sku: u32| async move { Ok::<u64, ()>(u64::from(sku) * 100) })),
/// );
///
/// assert_eq!(svc.clone().oneshot(7).await, Ok(Served::Fresh(700)));
/// clock.advance(Duration::from_secs(42));
/// pricing.breaker().force_open();
/// let stale = svc.oneshot(7).await.unwrap();
/// assert_eq!((stale.age(), stale.into_value()), (Some(Duration::from_secs(42)), 700));
/// # });
/// ```
pub struct StaleCacheLayer<Cache, F> {
    cache: Arc<Cache>,
    key: F,
}

impl<Cache, F> StaleCacheLayer<Cache, F> {
    /// A layer recording in `cache` under `key(&request)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use watertight::clock::StdClock;
    /// use watertight::fallback::StaleCache;
    /// use watertight::tower::StaleCacheLayer;
    ///
    /// let pages: Arc<StaleCache<String, Arc<str>, StdClock, 64>> =
    ///     Arc::new(StaleCache::new("pages", Duration::from_secs(60), StdClock));
    /// let layer = StaleCacheLayer::new(pages, |path: &&str| path.to_string());
    /// # let _ = layer;
    /// ```
    pub fn new(cache: Arc<Cache>, key: F) -> Self {
        StaleCacheLayer { cache, key }
    }
}

impl<Cache, F: Clone> Clone for StaleCacheLayer<Cache, F> {
    fn clone(&self) -> Self {
        StaleCacheLayer {
            cache: Arc::clone(&self.cache),
            key: self.key.clone(),
        }
    }
}

impl<Cache: fmt::Debug, F> fmt::Debug for StaleCacheLayer<Cache, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCacheLayer")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl<S, Cache, F: Clone> Layer<S> for StaleCacheLayer<Cache, F> {
    type Service = StaleCacheService<S, Cache, F>;
    fn layer(&self, inner: S) -> Self::Service {
        StaleCacheService {
            inner,
            cache: Arc::clone(&self.cache),
            key: self.key.clone(),
        }
    }
}

/// The service of [`StaleCacheLayer`]. Its readiness is the inner
/// service's; a readiness error is passed on as it is.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use core::time::Duration;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::fallback::{Served, StaleCache, Stale};
/// use watertight::tower::{BulkheadError, StaleCacheLayer, StaleCacheService};
/// use watertight::AcquireError;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let cache: Arc<StaleCache<u8, u8, _, 1>> = Arc::new(StaleCache::new("c", Duration::from_secs(9), clock));
/// cache.record(1, 10);
/// let refused = tower::service_fn(|_: u8| async { Err::<u8, _>(BulkheadError::<()>::Rejected(AcquireError::Full)) });
/// let svc: StaleCacheService<_, _, _> = StaleCacheLayer::new(cache, |k: &u8| *k).layer(refused);
/// assert_eq!(svc.clone().oneshot(1).await, Ok(Served::Stale(Stale { value: 10, age: Duration::ZERO })));
/// assert_eq!(svc.oneshot(2).await, Err(BulkheadError::Rejected(AcquireError::Full)));
/// # });
/// ```
pub struct StaleCacheService<S, Cache, F> {
    inner: S,
    cache: Arc<Cache>,
    key: F,
}

impl<S: Clone, Cache, F: Clone> Clone for StaleCacheService<S, Cache, F> {
    fn clone(&self) -> Self {
        StaleCacheService {
            inner: self.inner.clone(),
            cache: Arc::clone(&self.cache),
            key: self.key.clone(),
        }
    }
}

impl<S: fmt::Debug, Cache: fmt::Debug, F> fmt::Debug for StaleCacheService<S, Cache, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaleCacheService")
            .field("inner", &self.inner)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl<Svc, Req, K, V, C, const SETS: usize, S, F> Service<Req>
    for StaleCacheService<Svc, StaleCache<K, V, C, SETS, S>, F>
where
    Svc: Service<Req, Response = V>,
    Svc::Error: Refused,
    K: Hash + Eq,
    V: Clone,
    C: Clock,
    S: BuildHasher,
    F: Fn(&Req) -> K,
{
    type Response = crate::fallback::Served<V>;
    type Error = Svc::Error;
    type Future = StaleCall<Arc<StaleCache<K, V, C, SETS, S>>, K, Svc::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let key = (self.key)(&req);
        StaleCall::new(Arc::clone(&self.cache), key, self.inner.call(req))
    }
}
