//! tower `Layer`s and `Service`s (feature `tower`).
//!
//! Inbound load shedding — a limit on the requests in flight, a short wait
//! for a slot, and a quick 503 with `Retry-After` when none came free, which
//! serves everyone better than slow answers to all: the refused clients
//! retry later or degrade, the admitted ones are answered in time — a rate
//! limit, inbound (429 + `Retry-After`) or outbound (wait up to a deadline),
//! and the breaker and the whole [`Policy`] around any tower service:
//!
//! | layer | service | refusal |
//! |---|---|---|
//! | [`BulkheadLayer`] | [`BulkheadService`] | [`BulkheadError::Rejected`] with the [`AcquireError`] |
//! | [`BreakerLayer`] | [`BreakerService`] | [`BreakerError::Rejected`] with the [`Rejection`] |
//! | [`PolicyLayer`] | [`PolicyService`] | [`policy::Error`] |
//! | [`PolicyLayer::idempotent`] | [`IdempotentPolicyService`] | [`policy::Error`], after the retries |
//! | [`HedgeLayer`] | [`HedgeService`] | [`policy::Error`]: the first attempt's refusal, or the last attempt's error when none answered; a clone of the request sent again through the policy when the first is slow ([`Policy::call_hedged`](crate::Policy::call_hedged)) |
//! | [`AdaptiveLayer`] | [`AdaptiveService`] | [`BulkheadError::Rejected`]; the limit moved by an [`AdaptiveBulkhead`](crate::limit::AdaptiveBulkhead) |
//! | [`PartitionLayer`] | [`PartitionService`] | [`PartitionServiceError::Rejected`] with the request's class and the [`AcquireError`]; the class chosen by a function of the request, each class with its share of a [`PartitionedBulkhead`](crate::partition::PartitionedBulkhead) |
//! | [`RateLimitLayer`] | [`RateLimitService`] | [`RateLimitError::Limited`] with its `retry_after`, at once ([`FailFast`]) or when the cells would not conform within the max wait ([`MaxWait`]) |
//! | `GlobalBulkheadLayer` (feature `redis`) | `GlobalBulkheadService` | `GlobalBulkheadError::Refused` with the `GlobalError` of a limit shared by every process on one Redis (per call or leased shares) |
//! | `GlobalRateLimitLayer` (feature `redis`) | `GlobalRateLimitService` | `GlobalRateLimitError::Refused` with the `retry_after` of a rate shared by every process on one Redis, per client key (a function of the request) |
//! | `InboundDeadlineLayer` (feature `http`) | `InboundDeadline` | `InboundDeadlineError::Refused` at admission when the caller's budget (its `grpc-timeout` or milliseconds header, capped by the server's maximum) is below the minimum cost; `Elapsed` when the handler reaches the deadline, which it finds in the request's extensions |
//! | `OutboundDeadlineLayer` (feature `http`) | `OutboundDeadline` | `OutboundDeadlineError::Expired` (not sent) when the request's `Deadline` has no more than the margin left; otherwise the header says what is left minus the margin, and `Elapsed` cuts the call at the deadline |
//! | [`ThrottleLayer`] | [`ThrottleService`] | [`ThrottleError::Throttled`]: refused locally by an [`AdaptiveThrottle`](crate::throttle::AdaptiveThrottle), the response reported to it ([`ClassifyResponse`]) |
//! | `ChaosLayer` (feature `chaos`) | `ChaosService` | none of its own: an injected fault is the inner service's error or response type (an injected error, an outcome such as a 503, a latency, a hang), at the rates of a seeded `chaos::Injector`, to test the layers above it |
//! | [`FallbackLayer`] | [`FallbackService`] | none of its own: the inner layer's refusal ([`Refused`](crate::fallback::Refused)) turned into a response by a function (a 503 with `Retry-After`, a default, a cached answer), the inner service's own errors passed on |
//! | [`StaleCacheLayer`] | [`StaleCacheService`] | none of its own: good responses recorded in a [`StaleCache`](crate::fallback::StaleCache) under a key made of the request, the inner layer's refusal answered with the key's last response and its age ([`Served`](crate::fallback::Served)); the response future is a [`StaleCall`](crate::fallback::StaleCall) |
//!
//! None of them takes a permit (or a rate limit's cell) in `poll_ready`:
//! readiness is the inner service's. A permit is taken per call and travels
//! with the response future; it is given back when that future completes or
//! is dropped. A cell is taken (or reserved) per call too, and spent: the
//! rate layer's services share their limiter, so they are `Clone` and need
//! no `Buffer` ([why in `call`](RateLimitLayer#cells-are-taken-in-call-not-in-poll_ready)).
//!
//! The response futures are named types, [`BulkheadFuture`],
//! [`PartitionFuture`], [`BreakerFuture`], [`PolicyFuture`], [`IdempotentPolicyFuture`], [`HedgeFuture`],
//! [`RateLimitFuture`] and [`RateLimitWaitFuture`], and
//! a call allocates nothing, a wait for a slot included (the future holds
//! its queue node). All are `Send` when the inner service and its future
//! are (and the request, for the retrying one).
//!
//! Retries are opt-in: only a layer marked [`PolicyLayer::idempotent`]
//! retries (a failure or a call timeout, never a refusal or a success,
//! within the policy's attempts and retry budget), sending a clone of the
//! request through the whole policy again; a plain [`PolicyLayer`] makes
//! one attempt, at the cost it had before retries existed.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use tower::{Layer, Service, ServiceExt};
//! use watertight::clock::StdClock;
//! use watertight::tower::{BulkheadError, BulkheadLayer};
//! use watertight::{AcquireError, Bulkhead};
//!
//! # futures_lite::future::block_on(async {
//! let slots = Arc::new(Bulkhead::new("search", 1, StdClock));
//! let mut svc = BulkheadLayer::new(slots.clone())
//!     .layer(tower::service_fn(|q: u32| async move { Ok::<_, std::convert::Infallible>(q * 2) }));
//!
//! let busy = slots.try_acquire().unwrap(); // the one slot is taken
//! let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
//! assert!(matches!(err, BulkheadError::Rejected(AcquireError::Full)));
//! drop(busy);
//! assert_eq!(svc.ready().await.unwrap().call(2).await.unwrap(), 4);
//! # });
//! ```
//!
//! [`Policy`]: crate::policy::Policy
//! [`AcquireError`]: crate::bulkhead::AcquireError
//! [`Rejection`]: crate::breaker::Rejection
//! [`policy::Error`]: crate::policy::Error

// One file per layer family (its layer, service, response future and
// error); a new family gets a file of its own. The classifier that several
// families take is in `classify`.
mod adaptive;
mod breaker;
mod bulkhead;
#[cfg(feature = "chaos")]
mod chaos;
mod classify;
#[cfg(feature = "http")]
mod deadline;
mod fallback;
#[cfg(feature = "redis")]
mod global_bulkhead;
#[cfg(feature = "redis")]
mod global_rate;
mod hedge;
mod partition;
mod policy;
mod rate;
mod retry;
mod stale;
mod throttle;

pub use adaptive::{AdaptiveFuture, AdaptiveLayer, AdaptiveService, SignalOf};
pub use breaker::{BreakerError, BreakerFuture, BreakerLayer, BreakerService};
pub use bulkhead::{
    Admission, BulkheadError, BulkheadFuture, BulkheadLayer, BulkheadService, FailFast, MaxWait,
};
#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub use chaos::{ChaosLayer, ChaosService};
pub use classify::{Classify, ErrIsFailure};
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use deadline::{
    BudgetHeader, InboundDeadline, InboundDeadlineError, InboundDeadlineFuture,
    InboundDeadlineLayer, OutboundDeadline, OutboundDeadlineError, OutboundDeadlineFuture,
    OutboundDeadlineLayer,
};
pub use fallback::{FallbackLayer, FallbackService};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use global_bulkhead::{
    GlobalBulkheadError, GlobalBulkheadFuture, GlobalBulkheadLayer, GlobalBulkheadService,
};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use global_rate::{
    GlobalRateLimitError, GlobalRateLimitFuture, GlobalRateLimitLayer, GlobalRateLimitService,
};
pub use hedge::{HedgeFuture, HedgeLayer, HedgeService, ServiceHedge};
pub use partition::{PartitionFuture, PartitionLayer, PartitionService, PartitionServiceError};
pub use policy::{PolicyFuture, PolicyLayer, PolicyService};
pub use rate::{
    Keyed, RateLimitError, RateLimitFuture, RateLimitLayer, RateLimitService, RateLimitWaitFuture,
};
pub use retry::{IdempotentPolicyFuture, IdempotentPolicyLayer, IdempotentPolicyService};
pub use stale::{StaleCacheLayer, StaleCacheService};
pub use throttle::{
    ClassifyResponse, ErrIsOverloaded, ThrottleError, ThrottleFuture, ThrottleLayer,
    ThrottleService,
};
