//! The degrade ladder: what to answer when a call did not make it.
//!
//! A timeout or a refusal is not only an error, it is a decision about
//! what to do next. The answers, best first:
//!
//! 1. answer **without the optional part** (the catalog did not answer:
//!    show the order without the product pictures);
//! 2. serve **cached data marked with its freshness**;
//! 3. **retry once**, if the operation is idempotent and the budget allows;
//! 4. **refuse** with a clear error and `Retry-After`.
//!
//! And what not to do: retry in a loop without a limit or a delay, turning
//! a slow neighbour into a dead one. Each rung below is a few lines on the
//! crate's pieces; every example runs on a
//! [`ManualClock`](crate::clock::ManualClock), so time moves only when the
//! example says.
//!
//! The pieces: [`FallbackExt::or_fallback`](crate::fallback::FallbackExt::or_fallback)
//! (the fallback sees the **typed refusal**: which layer refused and its
//! retry hint; the call's own error passes through),
//! [`StaleCache`](crate::fallback::StaleCache) (the last good answer per
//! key, served with its age), [`Policy::call_idempotent`](crate::Policy::call_idempotent)
//! (one retry within the retry budget and the request's
//! [`Deadline`](crate::deadline::Deadline)), and
//! [`policy::Error::retry_after`](crate::policy::Error::retry_after) (the
//! `Retry-After`). For a tower service, `tower::FallbackLayer` turns the
//! refusal into a response.
//!
//! # Rung 1: answer without the optional part
//!
//! The optional part gets its own [`Policy`](crate::Policy) (its own
//! bulkhead, breaker and timeout: one slow optional system cannot hold the
//! page), and any failure of it — refusal or error — answers "none":
//! [`or_fallback_any`](crate::fallback::FallbackExt::or_fallback_any).
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::fallback::FallbackExt;
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! struct OrderView {
//!     items: Vec<&'static str>,
//!     pictures: Vec<&'static str>, // optional
//! }
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let config = PolicyConfig::builder(8).call_timeout(Duration::from_millis(200)).build().unwrap();
//! let catalog: Policy<_> = Policy::new("catalog", config, &clock).unwrap();
//! catalog.breaker().force_open(); // the catalog is down
//!
//! let items = vec!["boots"];
//! let pictures = catalog
//!     .call(|| async { Ok::<_, &str>(vec!["boots.jpg"]) })
//!     .or_fallback_any(|_| Ok(Vec::new()))
//!     .await
//!     .unwrap();
//! let view = OrderView { items, pictures };
//! assert_eq!((view.items.len(), view.pictures.len()), (1, 0));
//! # });
//! ```
//!
//! # Rung 2: cached data marked with its age
//!
//! A [`StaleCache`](crate::fallback::StaleCache) records each good answer
//! and, when the system is unavailable, serves the last one with how old
//! it is, up to a max staleness. The age goes to the user ("price 42 s
//! old") or into an HTTP `Age` header. The call's own error (a 404, "no
//! such product") is never answered from the cache: the system answered.
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::fallback::{Served, StaleCache};
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let pricing: Policy<_> =
//!     Policy::new("pricing", PolicyConfig::builder(8).build().unwrap(), &clock).unwrap();
//! // 256 products; a price may be shown up to 10 minutes old.
//! let prices: StaleCache<u32, u64, _, 32> =
//!     StaleCache::new("prices", Duration::from_secs(600), &clock);
//!
//! let label = |served: Served<u64>| match served.age() {
//!     None => format!("{} ct", served.value()),
//!     Some(age) => format!("{} ct (price {} s old)", served.value(), age.as_secs()),
//! };
//!
//! let now = prices.call(42, pricing.call(|| async { Ok::<u64, &str>(1999) })).await.unwrap();
//! assert_eq!(label(now), "1999 ct");
//!
//! clock.advance(Duration::from_secs(42));
//! pricing.breaker().force_open(); // pricing is failing
//! let then = prices.call(42, pricing.call(|| async { Ok::<u64, &str>(1) })).await.unwrap();
//! assert_eq!(label(then), "1999 ct (price 42 s old)");
//! # });
//! ```
//!
//! Past the max staleness, or for a key never answered, the refusal comes
//! back and the next rung decides. The cache's counters
//! ([`metrics`](crate::fallback::StaleCache::metrics), exported by
//! `metrics::StaleCacheExporter`) say how often stale answers were served
//! and how often there was none.
//!
//! [The tour's act 13](super::tour) does this over loopback HTTP, a fault
//! injector making pricing answer 503: the product page keeps its price,
//! with its age, while pricing fails and while its breaker is open.
//!
//! # Rung 3: retry once, if idempotent and the budget allows
//!
//! [`call_idempotent`](crate::Policy::call_idempotent) makes at most the
//! config's attempts (two by default: one retry), after a jittered backoff,
//! only while the policy's retry budget has tokens, and never past the
//! request's [`Deadline`](crate::deadline::Deadline)
//! ([`within`](crate::policy::Retrying::within)). A refusal is never
//! retried: a full bulkhead or an open breaker says "not now", and asking
//! again at once is the loop that keeps an overloaded system down.
//!
//! ```
//! use core::cell::Cell;
//! use core::future::IntoFuture;
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::deadline::Deadline;
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let search: Policy<_> =
//!     Policy::new("search", PolicyConfig::builder(8).build().unwrap(), &clock).unwrap();
//! let request = Deadline::after(&clock, Duration::from_secs(2));
//! let tries = Cell::new(0);
//! let mut call = core::pin::pin!(search
//!     .call_idempotent(|| {
//!         tries.set(tries.get() + 1);
//!         let first = tries.get() == 1;
//!         async move { if first { Err("connection reset") } else { Ok("hits") } }
//!     })
//!     .within(&request)
//!     .into_future());
//! // The first attempt failed; the retry waits its backoff (at most 50 ms).
//! assert!(futures_lite::future::poll_once(call.as_mut()).await.is_none());
//! clock.advance(Duration::from_millis(50));
//! assert_eq!(call.await, Ok("hits"));
//! assert_eq!(tries.get(), 2);
//! # });
//! ```
//!
//! # Rung 4: refuse with a clear error and `Retry-After`
//!
//! What is left is the refusal itself: a 503 (or a 429 for a rate limit),
//! naming the system, with `Retry-After` when a layer knows it — the open
//! breaker's wait, the rate limit's next cell
//! ([`retry_after`](crate::policy::Error::retry_after)), in whole seconds
//! rounded up so that a client never comes back early.
//!
//! ```
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::policy::{ErrorKind, Policy, PolicyConfig};
//! use watertight::BreakerConfig;
//!
//! fn status(err: &watertight::policy::Error<&str>) -> (u16, Option<u64>) {
//!     let retry_after = err.retry_after().map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
//!     match err.kind() {
//!         ErrorKind::Call(_) => (502, None),
//!         ErrorKind::RateLimited { .. } => (429, retry_after),
//!         _ => (503, retry_after),
//!     }
//! }
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let breaker = BreakerConfig::builder().minimum_calls(1).open_duration(Duration::from_secs(30)).build().unwrap();
//! let payments: Policy<_> =
//!     Policy::new("payments", PolicyConfig::builder(8).breaker(breaker).build().unwrap(), &clock).unwrap();
//! let err = payments.call(|| async { Err::<(), _>("gateway down") }).await.unwrap_err();
//! assert_eq!(status(&err), (502, None));
//!
//! clock.advance(Duration::from_millis(20_500));
//! let err = payments.call(|| async { Ok::<(), &str>(()) }).await.unwrap_err();
//! assert_eq!(err.to_string(), "payments unavailable: circuit open, retry after 9.5s");
//! assert_eq!(status(&err), (503, Some(10)));
//! # });
//! ```
//!
//! # The ladder in one handler
//!
//! The rungs compose in their order: the cache (rung 2) around an
//! idempotent call (rung 3); what still fails is refused (rung 4). The
//! optional part (rung 1) is a separate call with its own policy.
//!
//! ```
//! use core::future::IntoFuture;
//! use core::time::Duration;
//! use watertight::clock::ManualClock;
//! use watertight::fallback::StaleCache;
//! use watertight::policy::{Policy, PolicyConfig};
//!
//! # futures_lite::future::block_on(async {
//! let clock = ManualClock::new();
//! let pricing: Policy<_> =
//!     Policy::new("pricing", PolicyConfig::builder(8).build().unwrap(), &clock).unwrap();
//! let prices: StaleCache<u32, u64, _, 32> =
//!     StaleCache::new("prices", Duration::from_secs(600), &clock);
//!
//! let price = |sku: u32| {
//!     let call = pricing.call_idempotent(move || async move { Ok::<u64, &str>(u64::from(sku) * 100) });
//!     prices.call(sku, call.into_future())
//! };
//! assert_eq!(price(3).await.unwrap().age(), None); // fresh, recorded
//!
//! pricing.breaker().force_open();
//! clock.advance(Duration::from_secs(5));
//! assert_eq!(price(3).await.unwrap().age(), Some(Duration::from_secs(5))); // rung 2
//! let refused = price(4).await.unwrap_err(); // never answered: rung 4
//! assert!(refused.is_unavailable());
//! # });
//! ```
//!
//! For a tower service, the same ladder's last rung is a
//! `tower::FallbackLayer` outside the policy's layer, turning the typed
//! refusal into the 503 with `Retry-After`: see its example.
