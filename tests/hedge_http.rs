//! Hedging over real HTTP: an axum server on 127.0.0.1 with three replica
//! routes and a `reqwest` client, the policy on tokio's clock. Request `i`
//! goes to replica `i mod 3` first and its hedge to the next one; replica 2
//! never answers 1 in 10 of the requests it gets first (`i mod 30 = 2`): 3
//! of the 90 requests. Run one after another, without hedging (`call`, a
//! 300 ms call timeout) and with it (`call_hedged`, a fixed 50 ms delay).
//!
//! Asserted are counts, never latencies: without hedging exactly the 3
//! hanging requests end at their call timeout; with it every request is
//! answered, the 3 by replica 0 (their hedge), at least 3 hedges won, the
//! breaker's window all successes (every cancelled loser recorded
//! nothing), the losers' client futures dropped, no slot held at the end. It assumes only that a request reaches the server well within
//! 300 ms. The p99 of each run and the extra requests are printed
//! (`cargo test --all-features --test hedge_http -- --nocapture`).
#![cfg(not(loom))]
#![cfg(feature = "tokio")]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::Router;
use watertight::clock::TokioClock;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
use watertight::policy::{ErrorKind, Policy, PolicyConfig};
use watertight::BreakerConfig;

const REQUESTS: u64 = 90;
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Every request the replicas got, as (replica, request).
#[derive(Clone, Default)]
struct Replicas {
    arrivals: Arc<Mutex<Vec<(u64, u64)>>>,
}

async fn replica(State(r): State<Replicas>, Path((n, i)): Path<(u64, u64)>) -> String {
    r.arrivals.lock().unwrap().push((n, i));
    if n == 2 && i % 30 == 2 {
        std::future::pending::<()>().await;
    }
    format!("{n}")
}

/// Counts the client futures dropped before they finished.
struct Dropped(Arc<AtomicUsize>, bool);
impl Drop for Dropped {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, SeqCst);
        }
    }
}

fn policy() -> Policy<TokioClock> {
    // A breaker that does not open on these few calls.
    let breaker = BreakerConfig::builder()
        .window_size(64)
        .minimum_calls(64)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(8)
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .build()
        .unwrap();
    Policy::new("replicas", config, TokioClock).unwrap()
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort_unstable();
    let rank = (latencies.len() * 99).div_ceil(100);
    latencies[rank - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_replica_is_hedged_around_over_http() {
    tokio::time::timeout(HANG_GUARD, async {
        let replicas = Replicas::default();
        let app = Router::new()
            .route("/replica/{n}/{i}", get(replica))
            .with_state(replicas.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        let get = |i: u64, attempt: u64| {
            let url = format!("{base}/replica/{}/{i}", (i + attempt) % 3);
            let (client, dropped) = (client.clone(), dropped.clone());
            async move {
                let mut guard = Dropped(dropped, true);
                let r = async { client.get(&url).send().await?.text().await }.await;
                guard.1 = false;
                r.map_err(|_| ())
            }
        };

        // Without hedging: the 3 hanging requests end at their call timeout.
        let plain = policy();
        let mut latencies = Vec::new();
        let mut timed_out = Vec::new();
        for i in 0..REQUESTS {
            let start = std::time::Instant::now();
            match plain.call(|| get(i, 0)).await {
                Ok(replica) => assert_eq!(replica, format!("{}", i % 3)),
                Err(e) if *e.kind() == ErrorKind::DeadlineExceeded => timed_out.push(i),
                Err(e) => panic!("request {i}: {e:?}"),
            }
            latencies.push(start.elapsed());
        }
        assert_eq!(timed_out, [2, 32, 62]);
        let sent_plain = replicas.arrivals.lock().unwrap().len();
        assert_eq!(sent_plain, REQUESTS as usize);
        let p99_plain = p99(latencies);

        // With hedging: every request answered; the hanging ones by replica 0.
        replicas.arrivals.lock().unwrap().clear();
        let hedged = policy();
        let hedge = Hedge::new(
            "replicas",
            HedgeConfig::builder()
                .delay(HedgeDelay::Fixed(Duration::from_millis(50)))
                .build()
                .unwrap(),
        );
        let mut latencies = Vec::new();
        for i in 0..REQUESTS {
            let start = std::time::Instant::now();
            let mut attempt = 0;
            let r = hedged
                .call_hedged(&hedge, || {
                    attempt += 1;
                    get(i, attempt - 1)
                })
                .await;
            let replica = r.unwrap_or_else(|e| panic!("request {i}: {e:?}"));
            if i % 30 == 2 {
                assert_eq!(replica, "0", "request {i} answered by its hedge");
            }
            latencies.push(start.elapsed());
        }
        let p99_hedged = p99(latencies);
        let m = hedge.metrics();
        let sent = replicas.arrivals.lock().unwrap().len();
        println!(
            "90 requests, replica 2 hanging on 1 in 10 of its own: p99 without hedging {:?} \
             ({} requests sent), with a 50 ms hedge {:?} ({} sent: {} extra, {} hedges won)",
            p99_plain,
            sent_plain,
            p99_hedged,
            sent,
            sent - REQUESTS as usize,
            m.won
        );
        assert!(m.won >= 3, "{m:?}");
        assert_eq!(sent, REQUESTS as usize + m.sent(), "{m:?}");
        assert!(
            dropped.load(SeqCst) >= 3 + 3,
            "the 3 timed out, the 3 hedged around"
        );
        // The breaker's window (the last 64 outcomes) holds successes only:
        // the cancelled losers recorded no failure. (Without hedging the 3
        // timeouts were failures.)
        let b = hedged.breaker().metrics();
        assert_eq!((b.calls, b.failed_calls), (64, 0));
        assert_eq!(
            plain.breaker().metrics().failed_calls,
            2,
            "32 and 62, in the last 64"
        );
        assert_eq!(hedged.bulkhead().in_flight(), 0);
    })
    .await
    .expect("test hung");
}
