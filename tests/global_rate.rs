//! `redis::GlobalRateLimiter` against a real `redis-server`: each test starts
//! its own on a Unix socket (persistence off) and stops it. Assertions are
//! on counts, Redis's own state and bounds computed from Redis's clock;
//! where wall time matters, bounds are loose (seconds).
//!
//! The multi-process test runs this same test binary again as its child
//! processes (`child_process` below, selected by `WT_ROLE`).

#[path = "support/global.rs"]
mod global;
#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use global::{
    child, get, output, quick_breaker, redis_time, reported, role, runtime, spend, unix_micros,
};
use redis_server::RedisServer;
use watertight::clock::{Clock, TokioClock};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::rate::Quota;
use watertight::redis::{
    GlobalRateBuildError, GlobalRateConfig, GlobalRateConfigError, GlobalRateError,
    GlobalRateLimiter, RateFallback, RateKey, RateKeyError, StoreFailure,
};

/// A config for tests on a loaded machine: a generous store timeout.
fn config(quota: Quota) -> watertight::redis::GlobalRateConfigBuilder {
    GlobalRateConfig::builder(quota).store_timeout(Duration::from_secs(1))
}

fn limited(r: Result<(), GlobalRateError>) -> Duration {
    match r {
        Err(GlobalRateError::Limited { retry_after }) => retry_after,
        other => panic!("expected Limited, got {other:?}"),
    }
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.connection())
        .unwrap()
}

// ---------------------------------------------------------------------------
// One key: the burst, the refusal, the hint.

#[test]
fn the_burst_is_admitted_the_next_refused_with_its_retry_after_then_admitted_again() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // T = 100 ms, burst 5.
        let c = config(Quota::per_second(10).burst(5)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let whole = RateKey::whole();
        for _ in 0..5 {
            api.check(&whole).await.unwrap();
        }
        let tat = get(&server, "watertight:{api}:rate").expect("the key's TAT");
        let retry = limited(api.check(&whole).await);
        // The next cell comes back one interval after the first admission.
        assert!(
            retry > Duration::ZERO && retry <= Duration::from_millis(100),
            "{retry:?}"
        );
        // A refusal writes nothing.
        assert_eq!(
            get(&server, "watertight:{api}:rate").as_deref(),
            Some(&*tat)
        );
        tokio::time::sleep(retry).await;
        api.check(&whole).await.unwrap();
        let m = api.metrics();
        assert_eq!((m.admitted, m.refused_limited, m.redis_calls), (6, 1, 7));
    });
}

#[test]
fn keys_are_independent_and_the_unkeyed_limit_is_one_more() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = config(Quota::per_minute(60).burst(3)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let (a, b) = (RateKey::new("alice").unwrap(), RateKey::new("bob").unwrap());
        for _ in 0..3 {
            api.check(&a).await.unwrap();
        }
        assert!(limited(api.check(&a).await) > Duration::from_millis(900));
        for _ in 0..3 {
            api.check(&b).await.unwrap();
        }
        api.check_n(&RateKey::whole(), 3).await.unwrap();
        limited(api.check(&b).await);
        limited(api.check(&RateKey::whole()).await);
        // Another system's limit on the same Redis is its own.
        let other = GlobalRateLimiter::connect(
            &server.url(),
            "other",
            config(Quota::per_minute(60).burst(3)).build().unwrap(),
        )
        .unwrap();
        other.check_n(&a, 3).await.unwrap();
    });
}

#[test]
fn a_key_lives_in_redis_no_longer_than_its_burst_window() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // T = 100 ms, burst 5: a window of 500 ms.
        let c = config(Quota::per_second(10).burst(5)).build().unwrap();
        assert_eq!(c.window(), Duration::from_millis(500));
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let key = RateKey::new("k").unwrap();
        let name = api.redis_key(&key);
        api.check(&key).await.unwrap();
        let one = pttl(&server, &name);
        assert!(one > 0 && one <= 100, "one cell: PTTL {one} ms");
        api.check_n(&key, 4).await.unwrap();
        let full = pttl(&server, &name);
        assert!(full > 100 && full <= 500, "the burst: PTTL {full} ms");
        limited(api.check(&key).await);
        assert!(pttl(&server, &name) <= full, "a refusal extended the key");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(get(&server, &name), None, "the key outlived its window");
        // Gone, and the same as new: the full burst again.
        api.check_n(&key, 5).await.unwrap();
    });
}

#[test]
fn hostile_keys_are_typed_errors_or_encoded_into_their_own_limits() {
    assert_eq!(RateKey::new(""), Err(RateKeyError::Empty));
    assert_eq!(
        RateKey::new(vec![b'a'; RateKey::MAX_LEN + 1]),
        Err(RateKeyError::TooLong { len: 257 })
    );
    assert!(RateKey::new(vec![b'a'; RateKey::MAX_LEN]).is_ok());
    // Every byte alone makes its own key, and none of them a brace or a
    // control character in Redis.
    let mut seen = std::collections::HashSet::new();
    for b in 0..=255u8 {
        let k = RateKey::new([b]).unwrap();
        let enc = k.encoded().unwrap().to_owned();
        assert!(
            enc.bytes()
                .all(|c| c.is_ascii_graphic() && c != b'{' && c != b'}'),
            "{b}: {enc}"
        );
        assert!(seen.insert(enc));
    }

    let server = RedisServer::start();
    runtime().block_on(async {
        let c = config(Quota::per_minute(60).burst(1)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let hostile: [&[u8]; 7] = [
            b"}",
            b"{other}",
            b"%7B",
            b"a\r\nFLUSHALL\r\n",
            b"\0\xff\xfe",
            b"a b",
            b"a%20b",
        ];
        for k in hostile {
            // Each is its own key: one cell each, however they look alike.
            api.check(&RateKey::new(k).unwrap()).await.unwrap();
        }
        for k in hostile {
            limited(api.check(&RateKey::new(k).unwrap()).await);
        }
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut server.connection())
            .unwrap();
        assert_eq!(keys.len(), hostile.len());
        for k in &keys {
            assert!(k.starts_with("watertight:{api}:rate:"), "{k}");
            assert_eq!(k.matches('{').count(), 1, "{k}");
        }
    });
}

#[test]
fn more_than_the_burst_and_zero_cells_cost_no_redis_call() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = config(Quota::per_second(10).burst(4)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let k = RateKey::whole();
        assert!(matches!(
            api.check_n(&k, 5).await,
            Err(GlobalRateError::ExceedsBurst {
                requested: 5,
                burst: 4
            })
        ));
        assert!(matches!(
            api.acquire_n_until(&k, 5, TokioClock.now() + Duration::from_secs(9))
                .await,
            Err(GlobalRateError::ExceedsBurst { .. })
        ));
        api.check_n(&k, 0).await.unwrap();
        let m = api.metrics();
        assert_eq!((m.redis_calls, m.admitted, m.refused()), (0, 0, 0));
        assert_eq!(server.evalsha_calls(), 0);
    });
}

#[test]
fn a_wait_sleeps_for_its_cell_and_is_refused_at_once_past_its_deadline() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // T = 200 ms, burst 1.
        let c = config(Quota::per_second(5).burst(1)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let k = RateKey::new("w").unwrap();
        api.check(&k).await.unwrap();
        // The cell comes back in about 200 ms: a 20 ms wait is refused at
        // once, with the hint, after one check and no sleep.
        let retry = limited(api.acquire_timeout(&k, Duration::from_millis(20)).await);
        assert!(retry > Duration::from_millis(20), "{retry:?}");
        assert_eq!((api.metrics().redis_calls, api.metrics().waited), (2, 0));
        // A 5 s wait is served when the cell conforms.
        api.acquire_timeout(&k, Duration::from_secs(5))
            .await
            .unwrap();
        let m = api.metrics();
        assert_eq!((m.admitted, m.waited, m.refused_limited), (2, 1, 1));
        // Woken by the hint, not by polling: a check, a sleep, a check.
        assert_eq!(m.redis_calls, 4);
    });
}

// ---------------------------------------------------------------------------
// Redis down.

#[test]
fn frozen_redis_costs_a_timeout_then_fast_refusals_then_resumes() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalRateConfig::builder(Quota::per_second(100))
            .store_timeout(Duration::from_millis(200))
            .store_breaker(quick_breaker())
            .build()
            .unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let k = RateKey::new("c").unwrap();
        api.check(&k).await.unwrap();
        server.freeze();
        let (mut timed_out, mut open) = (0, 0);
        for _ in 0..20 {
            let t = Instant::now();
            match api.acquire_timeout(&k, Duration::from_secs(5)).await {
                Err(GlobalRateError::StoreUnavailable(StoreFailure::TimedOut)) => timed_out += 1,
                Err(GlobalRateError::StoreUnavailable(StoreFailure::BreakerOpen(_))) => open += 1,
                other => panic!("unexpected {other:?}"),
            }
            // Never past the store timeout, whatever the caller's deadline.
            assert!(t.elapsed() < Duration::from_secs(2));
        }
        println!("Redis frozen: {timed_out} timeout, then {open} refusals at once");
        assert_eq!(timed_out, 1, "the breaker opened after one timeout");
        assert_eq!(open, 19);
        let m = api.metrics();
        assert_eq!((m.refused_store_unavailable, m.store_timeouts), (20, 1));
        server.thaw();
        let back = tokio::time::timeout(Duration::from_secs(10), async {
            while api.check(&k).await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(back.is_ok(), "the global rate did not resume");
    });
}

#[test]
fn frozen_redis_falls_back_to_the_local_quota_per_key() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = GlobalRateConfig::builder(Quota::per_second(100))
            .store_timeout(Duration::from_millis(200))
            .store_breaker(quick_breaker())
            .fallback(RateFallback::Local(Quota::per_minute(60).burst(2)))
            .build()
            .unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let (a, b) = (RateKey::new("a").unwrap(), RateKey::new("b").unwrap());
        api.check(&a).await.unwrap();
        server.freeze();
        for k in [&a, &b, &RateKey::whole()] {
            api.check(k).await.unwrap();
            api.check(k).await.unwrap();
            // The local quota holds 2 per key: the third is refused, not
            // let through, with the local limiter's hint.
            let retry = limited(api.check(k).await);
            assert!(retry > Duration::from_millis(500) && retry <= Duration::from_secs(1));
        }
        let m = api.metrics();
        assert_eq!(
            (m.admitted, m.fallback_admitted, m.refused_limited),
            (1, 6, 3)
        );
        assert_eq!(m.refused_store_unavailable, 0);
        server.thaw();
    });
}

// ---------------------------------------------------------------------------
// The policy, and bad input.

#[test]
fn a_policy_behind_a_global_rate_answers_rate_limited_with_the_hint() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let c = config(Quota::per_minute(60).burst(2)).build().unwrap();
        let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
        let policy: Policy<_> =
            Policy::new("api", PolicyConfig::builder(4).build().unwrap(), TokioClock).unwrap();
        let k = RateKey::new("client").unwrap();
        for _ in 0..2 {
            let ok = api.call(&policy, &k, || async { Ok::<_, ()>(7) }).await;
            assert_eq!(ok, Ok(7));
        }
        let mut made = false;
        let err = api
            .call(&policy, &k, || {
                made = true;
                async { Ok::<_, ()>(7) }
            })
            .await
            .unwrap_err();
        assert!(!made, "a refused call was made");
        let ErrorKind::RateLimited { retry_after } = *err.kind() else {
            panic!("{err:?}")
        };
        assert!(retry_after > Duration::from_millis(900) && retry_after <= Duration::from_secs(1));
        assert!(err.is_unavailable());

        // FailClosed with Redis gone: the policy's StoreUnavailable.
        let down = GlobalRateLimiter::connect(
            "redis://127.0.0.1:1/",
            "api",
            GlobalRateConfig::builder(Quota::per_second(1))
                .build()
                .unwrap(),
        )
        .unwrap();
        let err = down
            .call(&policy, &k, || async { Ok::<_, ()>(7) })
            .await
            .unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::StoreUnavailable);
    });
}

#[test]
fn bad_configs_names_and_urls_are_typed_errors() {
    assert!(matches!(
        GlobalRateConfig::builder(Quota::per_second(1_000_001 * 2)).build(),
        Err(GlobalRateConfigError::TooFast { .. })
    ));
    assert_eq!(
        GlobalRateConfig::builder(Quota::per_second(1))
            .store_timeout(Duration::ZERO)
            .build(),
        Err(GlobalRateConfigError::StoreTimeoutZero)
    );
    // Rounded up to whole microseconds: never faster than asked.
    let c = GlobalRateConfig::builder(Quota::per_second(3))
        .build()
        .unwrap();
    assert_eq!(c.interval(), Duration::from_micros(333_334));
    let ok = GlobalRateConfig::builder(Quota::per_second(5))
        .build()
        .unwrap();
    assert!(matches!(
        GlobalRateLimiter::connect("redis://127.0.0.1/", "api", ok),
        Err(GlobalRateBuildError::NoRuntime)
    ));
    runtime().block_on(async {
        for url in ["", "http://example.com/", "redis://[::1", "not a url"] {
            let err = GlobalRateLimiter::connect(url, "api", ok).unwrap_err();
            assert!(
                matches!(err, GlobalRateBuildError::BadUrl(_)),
                "{url:?}: {err}"
            );
        }
        for name in ["", "a{b}", "tab\there", String::leak("x".repeat(129))] {
            let err = GlobalRateLimiter::connect("redis://127.0.0.1/", name, ok).unwrap_err();
            assert!(
                matches!(err, GlobalRateBuildError::BadName { .. }),
                "{name:?}"
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Four processes, one quota.

const QUOTA_PER_S: u32 = 200;
const BURST: u32 = 20;
const RUN: Duration = Duration::from_secs(5);
const TASKS: usize = 4;

#[test]
#[ignore = "the entry point of the child processes the multi-process test starts"]
fn child_process() {
    let Some((role, url)) = role() else {
        return;
    };
    assert_eq!(role, "spender");
    let start_us: u64 = std::env::var("WT_START").unwrap().parse().unwrap();
    runtime().block_on(spender(&url, start_us));
}

/// From `start_us` (Unix time, µs) for `RUN`: `TASKS` tasks each check the
/// one quota, then sleep 2 ms, over and over (demand about 30 × the
/// quota across the four processes). Reports its admissions, and Redis's
/// clock before its first check and after its last answer.
async fn spender(url: &str, start_us: u64) {
    let c = GlobalRateConfig::builder(Quota::per_second(QUOTA_PER_S).burst(BURST))
        .store_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let api = GlobalRateLimiter::connect(url, "fleet", c).unwrap();
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let wait = start_us.saturating_sub(unix_micros());
    tokio::time::sleep(Duration::from_micros(wait)).await;
    let first = redis_time(&mut con).await;
    let admitted = spend(&api, TASKS, tokio::time::Instant::now() + RUN).await;
    let last = redis_time(&mut con).await;
    println!("WT admitted={admitted}");
    println!("WT first={first}");
    println!("WT last={last}");
}

#[test]
fn four_processes_stay_within_one_quota_and_use_it() {
    let server = RedisServer::start();
    // Every child starts spending at the same instant, once all are up.
    let start = unix_micros() + 1_500_000;
    let children: Vec<_> = (0..4)
        .map(|_| child("spender", &server, &[("WT_START", start.to_string())]))
        .collect();
    let (mut admitted, mut first, mut last) = (0, u64::MAX, 0);
    for c in children {
        let out = output(c);
        admitted += reported(&out, "admitted");
        first = first.min(reported(&out, "first"));
        last = last.max(reported(&out, "last"));
    }
    // Every admission ran in Redis between `first` and `last` (Redis's
    // clock, read before the first check and after the last answer), so
    // GCRA bounds them by burst + ⌊window / T⌋ exactly (T = 5,000 µs).
    let window = last - first;
    let bound = u64::from(BURST) + window / 5_000;
    let nominal = u64::from(BURST) + u64::from(QUOTA_PER_S) * RUN.as_secs();
    println!(
        "4 processes x {TASKS} tasks, {QUOTA_PER_S}/s burst {BURST} for {RUN:?}: \
         {admitted} admitted over {window} µs of Redis time (bound {bound}; \
         burst + {QUOTA_PER_S} x 5 s = {nominal}; {:.1} % of it)",
        admitted as f64 * 100.0 / nominal as f64
    );
    assert!(admitted <= bound, "{admitted} admitted, bound {bound}");
    assert!(
        window < RUN.as_micros() as u64 + 1_000_000,
        "the run took {window} µs"
    );
    assert!(
        admitted * 10 >= nominal * 9,
        "{admitted} admitted, under 90 % of {nominal}"
    );
}

// ---------------------------------------------------------------------------
// The tower layer, over real HTTP on 127.0.0.1.

#[cfg(feature = "tower")]
mod http {
    use super::*;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    use axum::error_handling::HandleErrorLayer;
    use axum::http::{header, Request, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::{body::Body, routing::get, Router};
    use watertight::tower::{GlobalRateLimitError, GlobalRateLimitLayer};

    async fn shed(err: GlobalRateLimitError<Infallible>) -> Response {
        match (&err, err.retry_after()) {
            (GlobalRateLimitError::BadKey(_), _) => StatusCode::BAD_REQUEST.into_response(),
            (_, Some(wait)) => {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let headers = [(header::RETRY_AFTER, secs.to_string())];
                (StatusCode::TOO_MANY_REQUESTS, headers).into_response()
            }
            _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        }
    }

    #[test]
    fn the_layer_sheds_each_api_key_past_its_fleet_wide_rate_with_429() {
        let server = RedisServer::start();
        runtime().block_on(async {
            let c = config(Quota::per_minute(60).burst(3)).build().unwrap();
            let api = GlobalRateLimiter::connect(&server.url(), "api", c).unwrap();
            let hits = Arc::new(AtomicUsize::new(0));
            let handler = {
                let hits = hits.clone();
                move || async move {
                    hits.fetch_add(1, SeqCst);
                    "results"
                }
            };
            let per_client = GlobalRateLimitLayer::new(api, |req: &Request<Body>| {
                RateKey::new(
                    req.headers()
                        .get("x-api-key")
                        .map_or(&b""[..], |v| v.as_bytes()),
                )
            });
            let app: Router = Router::new().route(
                "/search",
                get(handler).route_layer(
                    tower::ServiceBuilder::new()
                        .layer(HandleErrorLayer::new(shed))
                        .layer(per_client),
                ),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/search", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let get = |key: Option<&'static str>| {
                let mut req = client.get(&url);
                if let Some(k) = key {
                    req = req.header("x-api-key", k);
                }
                async move {
                    let resp = req.send().await.unwrap();
                    let retry = resp
                        .headers()
                        .get(header::RETRY_AFTER)
                        .map(|v| v.to_str().unwrap().to_owned());
                    (resp.status().as_u16(), retry)
                }
            };
            let mut a = Vec::new();
            for _ in 0..6 {
                a.push(get(Some("a")).await);
            }
            let ok = (200, None);
            let slow_down = (429, Some("1".to_owned()));
            assert_eq!(a[..3], [ok.clone(), ok.clone(), ok.clone()]);
            assert_eq!(a[3..], [slow_down.clone(), slow_down.clone(), slow_down]);
            for _ in 0..3 {
                assert_eq!(get(Some("b")).await, ok);
            }
            assert_eq!(get(None).await.0, 400);
            assert_eq!(
                hits.load(SeqCst),
                6,
                "a refused request reached the handler"
            );
        });
    }
}
