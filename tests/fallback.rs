#![cfg(not(loom))]
//! `fallback::FallbackExt` and `tower::FallbackLayer` through the public
//! API, on a `ManualClock`: every kind of refusal reaches the fallback with
//! its data (the system, why, the retry hint); the call's own error, and a
//! request that could never succeed, do not — unless `or_fallback_any`; a
//! fallback that gives the refusal back returns it unchanged.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::pending;
use std::pin::pin;
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use watertight::clock::ManualClock;
use watertight::deadline::{Deadline, Elapsed};
use watertight::fallback::{FallbackExt, Refused};
use watertight::policy::{self, ErrorKind, Policy, PolicyConfig};
use watertight::rate::{KeyedError, KeyedRateLimiter, NotYet, Quota, RateError, RateLimiter};
use watertight::retry::RetryConfig;
use watertight::throttle::{ThrottleConfig, Throttled};
use watertight::{AcquireError, BreakerConfig, Bulkhead, CallError, CircuitBreaker, Rejection};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn policy(clock: &ManualClock, config: PolicyConfig) -> Policy<&ManualClock> {
    Policy::new("pricing", config, clock).unwrap()
}

/// Runs `call` through `p` with a fallback that records the refusal it
/// sees and answers 0; returns the answer and what the fallback saw.
fn refused_through(
    p: &Policy<&ManualClock>,
) -> (
    Result<u32, policy::Error<&'static str>>,
    Option<policy::Error<Infallible>>,
) {
    let seen = Cell::new(None);
    let out = block_on(
        p.call(|| async { Ok::<u32, &'static str>(7) })
            .or_fallback(|refused| {
                seen.set(Some(refused));
                Ok(0)
            }),
    );
    (out, seen.take())
}

// ---- each kind of policy refusal, with its data ----------------------------

#[test]
fn bulkhead_full_reaches_the_fallback() {
    let clock = ManualClock::new();
    let p = policy(
        &clock,
        PolicyConfig::builder(1)
            .max_wait(Duration::ZERO)
            .build()
            .unwrap(),
    );
    let _busy = p.bulkhead().try_acquire().unwrap();
    let (out, seen) = refused_through(&p);
    let seen = seen.expect("the fallback ran");
    assert_eq!(out, Ok(0));
    assert_eq!(
        (seen.system(), *seen.kind()),
        ("pricing", ErrorKind::BulkheadFull)
    );
    assert_eq!(seen.retry_after(), None);
}

#[test]
fn bulkhead_closed_reaches_the_fallback() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    p.bulkhead().close();
    let (out, seen) = refused_through(&p);
    assert_eq!(out, Ok(0));
    assert_eq!(*seen.unwrap().kind(), ErrorKind::BulkheadClosed);
}

#[test]
fn an_open_breaker_reaches_the_fallback_with_its_retry_hint() {
    let clock = ManualClock::new();
    let breaker = BreakerConfig::builder()
        .minimum_calls(1)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    let p = policy(
        &clock,
        PolicyConfig::builder(1).breaker(breaker).build().unwrap(),
    );
    // The call's own failure opens the breaker, and is not a refusal.
    let ran = Cell::new(false);
    let failed = block_on(p.call(|| async { Err::<u32, _>("503") }).or_fallback(|_| {
        ran.set(true);
        Ok(0)
    }));
    assert_eq!(failed.unwrap_err().into_inner(), Some("503"));
    assert!(!ran.get(), "a call's own error does not reach the fallback");

    clock.advance(4 * SEC);
    let (out, seen) = refused_through(&p);
    let seen = seen.unwrap();
    assert_eq!(out, Ok(0));
    assert_eq!(
        *seen.kind(),
        ErrorKind::CircuitOpen(Rejection::Open {
            retry_after: 6 * SEC
        })
    );
    assert_eq!(seen.retry_after(), Some(6 * SEC));
}

#[test]
fn a_forced_open_breaker_reaches_the_fallback() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    p.breaker().force_open();
    let (_, seen) = refused_through(&p);
    assert_eq!(
        *seen.unwrap().kind(),
        ErrorKind::CircuitOpen(Rejection::ForcedOpen)
    );
}

#[test]
fn a_rate_limit_reaches_the_fallback_with_retry_after() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4)
        .rate(Quota::per_second(4).burst(1))
        .build()
        .unwrap();
    let p = policy(&clock, config);
    assert_eq!(refused_through(&p), (Ok(7), None));
    clock.advance(100 * MS);
    let (out, seen) = refused_through(&p);
    let seen = seen.unwrap();
    assert_eq!(out, Ok(0));
    assert_eq!(
        *seen.kind(),
        ErrorKind::RateLimited {
            retry_after: 150 * MS
        }
    );
    assert_eq!(seen.retry_after(), Some(150 * MS));
}

#[test]
fn a_throttle_refusal_reaches_the_fallback_with_its_probability() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(4)
        .max_wait(Duration::ZERO)
        .call_timeout(SEC)
        .retry(RetryConfig::builder().seed(5))
        .throttle(ThrottleConfig::builder().window(20 * SEC).build().unwrap())
        .build()
        .unwrap();
    let p = policy(&clock, config);
    p.breaker().disable();
    for _ in 0..50 {
        let _ = block_on(p.call(|| async { Err::<u32, _>("503") }));
    }
    // At its cap the throttle refuses about nine in ten: bounded tries.
    let mut seen = None;
    for _ in 0..100 {
        if let (Ok(0), Some(s)) = refused_through(&p) {
            seen = Some(s);
            break;
        }
    }
    let seen = seen.expect("the throttle refused one of 100");
    let ErrorKind::Throttled(t) = *seen.kind() else {
        panic!("{seen}");
    };
    assert!(t.probability() > 0.5, "{}", t.probability());
}

#[test]
fn the_call_timeout_reaches_the_fallback() {
    let clock = ManualClock::new();
    let config = PolicyConfig::builder(1).call_timeout(SEC).build().unwrap();
    let p = policy(&clock, config);
    let seen = Cell::new(None);
    let mut call = pin!(p.call(pending::<Result<u32, &str>>).or_fallback(|refused| {
        seen.set(Some(*refused.kind()));
        Ok(0)
    }));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    assert_eq!(seen.get(), None, "not run before the call ends");
    clock.advance(SEC);
    assert_eq!(block_on(call), Ok(0));
    assert_eq!(seen.get(), Some(ErrorKind::DeadlineExceeded));
}

#[test]
fn a_spent_request_budget_reaches_the_fallback() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    let budget = Deadline::after(&clock, SEC);
    clock.advance(SEC);
    let seen = Cell::new(None);
    let out = block_on(
        p.call_within(&budget, || async { Ok::<u32, &str>(7) })
            .or_fallback(|refused| {
                seen.set(Some(*refused.kind()));
                Ok(0)
            }),
    );
    assert_eq!(out, Ok(0));
    assert_eq!(seen.get(), Some(ErrorKind::DeadlineExceeded));
}

// ---- what the fallback does with it -----------------------------------------

#[test]
fn a_refusal_given_back_is_the_error_as_it_was() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    p.breaker().force_open();
    let plain = block_on(p.call(|| async { Ok::<u32, &str>(7) })).unwrap_err();
    let given_back =
        block_on(p.call(|| async { Ok::<u32, &str>(7) }).or_fallback(Err)).unwrap_err();
    assert_eq!(given_back, plain);
    assert_eq!(
        given_back.to_string(),
        "pricing unavailable: circuit forced open"
    );
}

#[test]
fn a_success_never_runs_the_fallback() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    let ran = Cell::new(0);
    let out = block_on(
        p.call(|| async { Ok::<u32, &str>(7) })
            .or_fallback_any(|_| {
                ran.set(ran.get() + 1);
                Ok(0)
            }),
    );
    assert_eq!((out, ran.get()), (Ok(7), 0));
}

#[test]
fn or_fallback_any_runs_for_the_calls_own_error_too() {
    let clock = ManualClock::new();
    let p = policy(&clock, PolicyConfig::builder(1).build().unwrap());
    let seen = Cell::new(None);
    let out = block_on(
        p.call(|| async { Err::<u32, _>("no such sku") })
            .or_fallback_any(|err| {
                seen.set(Some(err));
                Ok(0)
            }),
    );
    assert_eq!(out, Ok(0));
    let seen = seen.take().unwrap();
    assert_eq!(
        (seen.system(), seen.into_inner()),
        ("pricing", Some("no such sku"))
    );
}

// ---- the primitives' own errors ---------------------------------------------

#[test]
fn a_breakers_rejection_reaches_the_fallback_and_its_failure_does_not() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .minimum_calls(1)
        .open_duration(5 * SEC)
        .build()
        .unwrap();
    let breaker: CircuitBreaker<_, 100> = CircuitBreaker::new("ledger", config, &clock);
    let ran = Cell::new(false);
    let failed = block_on(
        breaker
            .call(async { Err::<u32, _>("500") })
            .or_fallback(|_| {
                ran.set(true);
                Ok(0)
            }),
    );
    assert_eq!(failed, Err(CallError::Failed("500")));
    assert!(!ran.get());
    let seen = Cell::new(None);
    let out = block_on(breaker.call(async { Ok::<u32, &str>(7) }).or_fallback(|r| {
        seen.set(Some(r));
        Ok(0)
    }));
    assert_eq!(out, Ok(0));
    assert_eq!(
        seen.get(),
        Some(Rejection::Open {
            retry_after: 5 * SEC
        })
    );
}

#[test]
fn a_bulkhead_refusal_reaches_the_fallback_and_a_bad_request_does_not() {
    let clock = ManualClock::new();
    let b = Bulkhead::new("db", 1, &clock);
    let held = b.try_acquire().unwrap();
    let seen = Cell::new(None);
    let out = block_on(async { b.try_acquire().map(|_| 1u32) }.or_fallback(|why| {
        seen.set(Some(why));
        Ok(0)
    }));
    assert_eq!((out, seen.get()), (Ok(0), Some(AcquireError::Full)));
    // Waiting ran out on the bulkhead's clock: TimedOut.
    let mut wait = pin!(
        async { b.acquire_timeout(SEC).await.map(|_| 1u32) }.or_fallback(|why| {
            seen.set(Some(why));
            Ok(0)
        })
    );
    assert!(block_on(poll_once(wait.as_mut())).is_none());
    clock.advance(SEC);
    assert_eq!(
        (block_on(wait), seen.get()),
        (Ok(0), Some(AcquireError::TimedOut))
    );
    drop(held);
    // More permits than the bulkhead has: a bad request, never a refusal.
    let out = block_on(async { b.try_acquire_many(2).map(|_| 1u32) }.or_fallback(|_| Ok(0)));
    assert_eq!(
        out,
        Err(AcquireError::ExceedsCapacity {
            requested: 2,
            capacity: 1
        })
    );
}

#[test]
fn a_rate_limiters_refusal_reaches_the_fallback_and_exceeds_burst_does_not() {
    let clock = ManualClock::new();
    let api = RateLimiter::new("api", Quota::per_second(2).burst(1), &clock);
    api.check().unwrap();
    let seen = Cell::new(None);
    let out = block_on(
        async { api.check().map(|()| 1u32) }.or_fallback(|n: NotYet| {
            seen.set(Some(n.retry_after()));
            Ok(0)
        }),
    );
    assert_eq!((out, seen.get()), (Ok(0), Some(500 * MS)));
    let out = block_on(async { api.check_n(2).map(|()| 1u32) }.or_fallback(|_| Ok(0)));
    assert_eq!(
        out,
        Err(RateError::ExceedsBurst {
            requested: 2,
            burst: 1
        })
    );

    let keyed: KeyedRateLimiter<u8, _, 1> =
        KeyedRateLimiter::new("clients", Quota::per_second(1), &clock);
    keyed.check_key(&1).unwrap();
    let out = block_on(
        async { keyed.check_key(&1).map(|()| 1u32) }.or_fallback(|e| {
            assert!(matches!(e, KeyedError::Rate(RateError::Limited(_))));
            Ok(0)
        }),
    );
    assert_eq!(out, Ok(0));
}

#[test]
fn a_deadline_reaches_the_fallback() {
    let clock = ManualClock::new();
    let budget = Deadline::after(&clock, SEC);
    let mut call = pin!(budget.run(pending::<u32>()).or_fallback(|e: Elapsed| {
        assert_eq!(e, Elapsed);
        Ok(0)
    }));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(SEC);
    assert_eq!(block_on(call), Ok(0));
}

#[test]
fn every_refusal_round_trips_through_its_refusal_type() {
    let t = Throttled::with_probability(0.25);
    assert_eq!(t.into_refusal(), Ok(t));
    assert_eq!(Throttled::from_refusal(t), t);
    let open = Rejection::Open { retry_after: SEC };
    assert_eq!(CallError::<()>::from_refusal(open).into_refusal(), Ok(open));
    assert_eq!(
        AcquireError::from_refusal(AcquireError::QueueFull).into_refusal(),
        Ok(AcquireError::QueueFull)
    );
}

// ---- the tower layer ----------------------------------------------------------

#[cfg(feature = "tower")]
mod tower_layer {
    use std::sync::Arc;

    use tower::{Layer, ServiceExt};
    use watertight::clock::StdClock;
    use watertight::partition::PartitionedBulkhead;
    use watertight::tower::{
        BreakerError, BreakerLayer, BulkheadLayer, FallbackLayer, PartitionLayer, PolicyLayer,
        RateLimitError, RateLimitLayer,
    };

    use super::*;

    /// A service that answers `(200, n)` and fails for 0.
    fn backend() -> impl tower::Service<
        u32,
        Response = (u16, u32),
        Error = &'static str,
        Future = impl std::future::Future<Output = Result<(u16, u32), &'static str>>,
    > + Clone {
        tower::service_fn(|n: u32| async move {
            if n == 0 {
                Err("no such item")
            } else {
                Ok((200, n))
            }
        })
    }

    #[test]
    fn a_policys_refusal_becomes_the_fallbacks_response() {
        let clock = Arc::new(ManualClock::new());
        let breaker = BreakerConfig::builder()
            .minimum_calls(1)
            .open_duration(30 * SEC)
            .build()
            .unwrap();
        let config = PolicyConfig::builder(2).breaker(breaker).build().unwrap();
        let p: Arc<Policy<_>> = Arc::new(Policy::new("reviews", config, clock.clone()).unwrap());
        let svc = FallbackLayer::new(|refused: policy::Error<Infallible>| {
            let hint = refused.retry_after().map_or(0, |d| d.as_secs());
            Ok((503, u32::try_from(hint).unwrap()))
        })
        .layer(PolicyLayer::new(p.clone()).layer(backend()));

        assert_eq!(block_on(svc.clone().oneshot(5)), Ok((200, 5)));
        // The inner service's own error passes through, and opens the breaker.
        let err = block_on(svc.clone().oneshot(0)).unwrap_err();
        assert_eq!(err.into_inner(), Some("no such item"));
        clock.advance(10 * SEC);
        // Refused: a 503 that says when to come back.
        assert_eq!(block_on(svc.oneshot(5)), Ok((503, 20)));
    }

    #[test]
    fn fallback_any_sees_the_inner_services_error() {
        let clock = Arc::new(ManualClock::new());
        let p: Arc<Policy<_>> = Arc::new(
            Policy::new("reviews", PolicyConfig::builder(2).build().unwrap(), clock).unwrap(),
        );
        let svc = FallbackLayer::any(|e: policy::Error<&'static str>| {
            assert_eq!(e.into_inner(), Some("no such item"));
            Ok((404, 0))
        })
        .layer(PolicyLayer::new(p).layer(backend()));
        assert_eq!(block_on(svc.oneshot(0)), Ok((404, 0)));
    }

    #[test]
    fn each_layers_refusal_reaches_the_fallback_with_its_data() {
        let clock = Arc::new(ManualClock::new());

        let slots = Arc::new(Bulkhead::new("render", 1, clock.clone()));
        let _busy = slots.try_acquire().unwrap();
        let svc = FallbackLayer::new(|why: AcquireError| {
            assert_eq!(why, AcquireError::Full);
            Ok((503, 1))
        })
        .layer(BulkheadLayer::new(slots.clone()).layer(backend()));
        assert_eq!(block_on(svc.oneshot(5)), Ok((503, 1)));

        let breaker: Arc<CircuitBreaker<_, 100>> = Arc::new(CircuitBreaker::new(
            "ledger",
            BreakerConfig::DEFAULT,
            clock.clone(),
        ));
        breaker.force_open();
        let svc = FallbackLayer::new(|r: Rejection| {
            assert_eq!(r, Rejection::ForcedOpen);
            Ok((503, 2))
        })
        .layer(BreakerLayer::new(breaker).layer(backend()));
        assert_eq!(block_on(svc.clone().oneshot(5)), Ok((503, 2)));
        let err = block_on(
            FallbackLayer::new(|r: Rejection| Err(r))
                .layer(tower::service_fn(|_: u32| async {
                    Err::<(u16, u32), _>(BreakerError::Inner("boom"))
                }))
                .oneshot(1),
        );
        assert_eq!(err, Err(BreakerError::Inner("boom")));

        let api = Arc::new(RateLimiter::new(
            "api",
            Quota::per_second(10).burst(1),
            clock.clone(),
        ));
        api.check().unwrap();
        let svc = FallbackLayer::new(|r: RateLimitError<Infallible>| {
            assert_eq!(r.retry_after(), Some(100 * MS));
            Ok((429, 100))
        })
        .layer(RateLimitLayer::new(api).layer(backend()));
        assert_eq!(block_on(svc.oneshot(5)), Ok((429, 100)));

        static DB: PartitionedBulkhead<StdClock, 2> =
            PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
        let db = &DB;
        let _web = db.try_acquire(0).unwrap();
        let _jobs = db.try_acquire(1).unwrap();
        let svc = FallbackLayer::new(|(class, why): (usize, AcquireError)| {
            assert_eq!((class, why), (1, AcquireError::Full));
            Ok((503, 3))
        })
        .layer(PartitionLayer::new(db, |_: &u32| 1).layer(backend()));
        assert_eq!(block_on(svc.oneshot(5)), Ok((503, 3)));
    }
}

// ---- a limit store that cannot be reached --------------------------------------

#[cfg(feature = "redis")]
mod store_down {
    use watertight::clock::TokioClock;
    use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError, StoreFailure};

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Nothing listens on port 1: every command fails, and `FailClosed`
    /// (the default) refuses.
    fn down() -> GlobalBulkhead {
        GlobalBulkhead::connect(
            "redis://127.0.0.1:1/",
            "payments",
            GlobalConfig::builder(1).build().unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn store_unavailable_reaches_the_fallback_through_a_policy() {
        runtime().block_on(async {
            let g = down();
            let p: Policy<_> = Policy::new(
                "payments",
                PolicyConfig::builder(4).build().unwrap(),
                TokioClock,
            )
            .unwrap();
            let seen = Cell::new(None);
            let out = g
                .call(&p, || async { Ok::<u32, &str>(7) })
                .or_fallback(|refused| {
                    seen.set(Some(*refused.kind()));
                    Ok(0)
                })
                .await;
            assert_eq!(out, Ok(0));
            assert_eq!(seen.get(), Some(ErrorKind::StoreUnavailable));
        });
    }

    #[test]
    fn the_global_error_reaches_the_fallback_with_the_store_failure() {
        runtime().block_on(async {
            let g = down();
            let mut why = None;
            let out = async { g.try_acquire().await.map(|_permit| 1u32) }
                .or_fallback(|e: GlobalError| {
                    why = Some(e.cause());
                    assert!(matches!(e, GlobalError::StoreUnavailable(_)), "{e}");
                    if let GlobalError::StoreUnavailable(StoreFailure::BreakerOpen(r)) = e {
                        assert!(r.retry_after().is_some());
                    }
                    Ok(0)
                })
                .await;
            assert!(matches!(out, Ok(0)));
            assert_eq!(why, Some("store_unavailable"));
        });
    }
}
