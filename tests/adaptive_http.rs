//! `examples/adaptive.rs` over real HTTP on 127.0.0.1, shortened (1.5 s per
//! phase): an axum server whose workers go 20 → 5 → 20, called through an
//! adaptive bulkhead (Gradient2). Asserted, as counts and order and never
//! as latencies:
//!
//! - no call is lost: every call started is answered 200, answered 503 by
//!   the server, or refused by the bulkhead (none fails otherwise);
//! - with 5 workers the server sheds load (503s), and the bulkhead's limit
//!   comes down: it ends the phase below where it ended the first, and the
//!   bulkhead refuses calls itself;
//! - once the workers are back, the limit ends above where the 5-worker
//!   phase left it;
//! - the limit is never 0 or above Gradient2's maximum of 200.
#![cfg(not(loom))]

#[allow(dead_code)] // the example's `main` is not used here
#[path = "../examples/adaptive.rs"]
mod example;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_follows_the_servers_workers() {
    let setup = example::Setup {
        phase: Duration::from_millis(1_500),
        ..example::Setup::DEFAULT
    };
    let r = example::run(setup, false).await;
    let answered: usize = (0..3).map(|p| r.ok[p] + r.dropped[p] + r.refused[p]).sum();
    assert_eq!(r.failed, [0, 0, 0], "{r:?}");
    assert_eq!(answered, r.started, "{r:?}");

    let last = |phase: usize| {
        r.limits
            .iter()
            .rev()
            .find(|(p, _)| *p == phase)
            .map(|(_, l)| *l)
            .unwrap()
    };
    assert!(r.dropped[1] > 0, "5 workers never answered 503: {r:?}");
    assert!(
        r.refused[1] > 0,
        "the bulkhead refused nothing with 5 workers: {r:?}"
    );
    assert!(last(1) < last(0), "{r:?}");
    assert!(last(2) > last(1), "{r:?}");
    assert!(r.limits.iter().all(|(_, l)| (1..=200).contains(l)), "{r:?}");
}
