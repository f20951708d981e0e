//! `redis::GlobalBulkhead<AsyncIoClock>` on smol (feature `redis-smol`),
//! against a real `redis-server` started per test: no tokio runtime
//! anywhere; redis-rs talks to Redis on smol, and the keeper and the
//! acquire commands run on smol's global executor.

#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use global::quick_breaker;
use redis_server::RedisServer;
use watertight::clock::AsyncIoClock;
use watertight::redis::{GlobalBulkhead, GlobalConfig, GlobalError, StoreFailure};

fn connect(server: &RedisServer, config: GlobalConfig) -> GlobalBulkhead<AsyncIoClock> {
    GlobalBulkhead::connect_on(&server.url(), "payments", config, AsyncIoClock).unwrap()
}

fn holders(server: &RedisServer) -> u64 {
    server.zcard("watertight:{payments}:holders")
}

#[test]
fn the_limit_holds_and_a_release_wakes_a_waiter_on_smol() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    let server = RedisServer::start();
    smol::block_on(async {
        let config = GlobalConfig::builder(2)
            .store_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let a = connect(&server, config);
        let b = connect(&server, config);
        let p1 = a.try_acquire().await.unwrap();
        let p2 = b.try_acquire().await.unwrap();
        assert!(matches!(b.try_acquire().await, Err(GlobalError::Full)));
        let t1 = p1.fencing_token().unwrap();
        assert_eq!(p2.fencing_token(), Some(t1 + 1));
        assert_eq!(holders(&server), 2);
        // Let the keepers subscribe before b waits.
        async_io::Timer::after(Duration::from_millis(300)).await;
        let waiter = smol::spawn(async move {
            let start = Instant::now();
            let p = b
                .acquire_timeout(Duration::from_secs(20))
                .await
                .map(|p| p.fencing_token());
            (p, start.elapsed())
        });
        async_io::Timer::after(Duration::from_millis(300)).await;
        p1.release().await.unwrap();
        let (token, waited) = waiter.await;
        assert_eq!(token.unwrap(), Some(t1 + 2));
        // Woken by the release, long before the 60 s lease could free a slot.
        assert!(waited < Duration::from_secs(10));
        drop(p2);
    });
}

#[test]
fn renewal_and_a_frozen_redis_on_smol() {
    let server = RedisServer::start();
    smol::block_on(async {
        let config = GlobalConfig::builder(1)
            .store_timeout(Duration::from_millis(200))
            .lease(Duration::from_millis(600))
            .renew_every(Duration::from_millis(150))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let g = connect(&server, config);
        let other = connect(&server, config);
        let permit = g.try_acquire().await.unwrap();
        // Three leases long: renewed by the keeper, on smol's executor.
        for _ in 0..6 {
            async_io::Timer::after(Duration::from_millis(300)).await;
            assert!(!permit.is_lost());
            assert!(matches!(other.try_acquire().await, Err(GlobalError::Full)));
        }
        assert!(g.metrics().lease_renewals >= 3);

        server.freeze();
        let mut seen = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            match other.try_acquire().await.unwrap_err() {
                GlobalError::StoreUnavailable(StoreFailure::TimedOut) => seen.push("timeout"),
                GlobalError::StoreUnavailable(StoreFailure::BreakerOpen(_)) => seen.push("open"),
                e => panic!("unexpected {e}"),
            }
            assert!(t.elapsed() < Duration::from_secs(2), "a call hung");
        }
        // Its window of 4 holds the Fulls above (Redis answered: successes);
        // two timeouts make half of it, which opens it.
        assert_eq!(
            seen,
            ["timeout", "timeout", "open", "open", "open"],
            "{seen:?}"
        );
        server.thaw();
    });
}
