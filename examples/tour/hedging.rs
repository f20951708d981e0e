//! Act 11, hedged requests, on a server of its own: three replicas, one of
//! them slow one time in ten, called without and then with a hedge at the
//! first run's 95th percentile.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::routing::get;
use axum::Router;
use watertight::clock::TokioClock;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};
use watertight::{Policy, PolicyConfig};

use crate::{header, ms, net};

/// How many calls act 11 makes, each way.
const HEDGE_CALLS: u64 = 90;

/// A replica: 20 ms, except that replica 2 holds 1 in 10 of the requests
/// it gets first (`i mod 30 = 2`) for 2 s.
async fn replica(Path((n, i)): Path<(u64, u64)>, State(sent): State<Arc<AtomicUsize>>) -> String {
    sent.fetch_add(1, SeqCst);
    let hold = if n == 2 && i % 30 == 2 {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(20)
    };
    tokio::time::sleep(hold).await;
    format!("{n}")
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort_unstable();
    latencies[(latencies.len() * 99).div_ceil(100) - 1]
}

/// Act 11: a slow replica, called with and without hedging.
pub async fn act_11() {
    let sent = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/replica/{n}/{i}", get(replica))
        .with_state(sent.clone());
    let base = net::serve(app).await;
    let client = net::client();
    let get = |i: u64, attempt: u64| {
        let url = format!("{base}/replica/{}/{i}", (i + attempt) % 3);
        let client = client.clone();
        async move {
            let r = async { client.get(&url).send().await?.text().await }.await;
            r.map_err(|e| e.to_string())
        }
    };
    let policy = || {
        let config = PolicyConfig::builder(8)
            .call_timeout(Duration::from_millis(300))
            .build()
            .expect("replicas policy");
        Policy::<TokioClock>::new("replicas", config, TokioClock).expect("replicas policy")
    };
    header(
        "Act 11: hedged requests — one replica of three slow 1 time in 10",
        &format!(
            "GET /replica/{{n}}/{{i}}: 20 ms, replica 2 holds 1 in 10 of its own requests 2 s; \
             {HEDGE_CALLS} calls, call timeout 300 ms; then call_hedged at the p95 of the first run's latencies"
        ),
    );
    let hedge = Hedge::new(
        "replicas",
        HedgeConfig::builder()
            .delay(HedgeDelay::Percentile(Percentile::P95))
            .min_samples(20)
            .window(100)
            .build()
            .expect("hedge config"),
    );

    let plain = policy();
    let mut latencies = Vec::new();
    let mut timed_out = 0;
    for i in 0..HEDGE_CALLS {
        let start = Instant::now();
        if plain.call(|| get(i, 0)).await.is_err() {
            timed_out += 1;
        }
        latencies.push(start.elapsed());
        // The plain run's latencies are the hedge's history.
        hedge.histogram().record(start.elapsed());
    }
    let sent_plain = sent.swap(0, SeqCst);
    println!(
        "  Policy::call:         p99 {:>4} ms, {sent_plain} requests sent, {timed_out} cut by the call timeout",
        ms(p99(latencies))
    );

    let hedged = policy();
    let delay = hedge.delay().expect("the first run's samples");
    let mut latencies = Vec::new();
    let mut failed = 0;
    for i in 0..HEDGE_CALLS {
        let start = Instant::now();
        let mut attempt = 0;
        let r = hedged
            .call_hedged(&hedge, || {
                attempt += 1;
                get(i, attempt - 1)
            })
            .await;
        failed += usize::from(r.is_err());
        latencies.push(start.elapsed());
    }
    let sent_hedged = sent.swap(0, SeqCst);
    let m = hedge.metrics();
    println!(
        "  Policy::call_hedged:  p99 {:>4} ms, {sent_hedged} requests sent ({} extra: {} hedges won, {} lost), {failed} failed; delay {} ms",
        ms(p99(latencies)),
        sent_hedged.saturating_sub(HEDGE_CALLS as usize),
        m.won,
        m.lost,
        ms(delay)
    );
    println!(
        "  -> the requests that met the slow replica are answered by the next one after the \
         p95 instead of at the call timeout; the hedges cost the extra requests above"
    );
}
