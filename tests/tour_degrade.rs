//! The tour's act 13 (`examples/tour/degrade.rs`, its code compiled in)
//! over real HTTP on 127.0.0.1: a pricing server behind a `ChaosLayer`,
//! a storefront asking it through a `StaleCacheLayer` over a `PolicyLayer`.
//! Asserted, as counts and order and never as latencies: what each page
//! got (fresh, stale after pricing's 503, stale while the breaker is open,
//! no price), whether pricing was asked for it, the breaker after it, and
//! the counters of pricing, its breaker and the cache.
//!
//! Real time passes (the act's clock is tokio's), shortened: no pause
//! between pages and a 3 s open wait. It assumes only that the outage's
//! four pages (four loopback requests, a few milliseconds each) are
//! answered within those 3 s of the breaker opening, on however loaded a
//! machine.
#![cfg(not(loom))]

#[allow(dead_code)] // the tour's printing is not used here
#[path = "../examples/tour/degrade.rs"]
mod degrade;
#[path = "../examples/tour/net.rs"]
mod net;

use std::time::Duration;

use degrade::{Setup, Source};
use watertight::breaker::State as BreakerState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_keeps_its_price_with_its_age_while_pricing_is_down() {
    let setup = Setup {
        step: Duration::ZERO,
        open: Duration::from_secs(3),
    };
    let d = tokio::time::timeout(Duration::from_secs(30), degrade::run(setup))
        .await
        .expect("the act ends");
    let rows: Vec<_> = d
        .rows
        .iter()
        .map(|r| (r.sku, r.chaos, r.sent, r.status, r.source, r.breaker))
        .collect();
    use BreakerState::{Closed, Open};
    use Source::{Fresh, StaleAfterFailure as Failed, StaleAfterRefusal as Refused, Unavailable};
    assert_eq!(
        rows,
        [
            (42, false, true, 200, Some(Fresh), Closed),
            (7, false, true, 200, Some(Fresh), Closed),
            // 503 twice: the cached price; half the window failed, it opens.
            (42, true, true, 200, Some(Failed), Closed),
            (42, true, true, 200, Some(Failed), Open),
            // Refused without a request: the cached price, or none.
            (42, true, false, 200, Some(Refused), Open),
            (7, true, false, 200, Some(Refused), Open),
            (9, true, false, 503, Some(Unavailable), Open),
            (42, true, false, 200, Some(Refused), Open),
            // The probe closes it.
            (42, false, true, 200, Some(Fresh), Closed),
            (7, false, true, 200, Some(Fresh), Closed),
            (9, false, true, 200, Some(Fresh), Closed),
        ],
        "{:#?}",
        d.rows
    );
    assert_eq!(d.probe, (8, BreakerState::HalfOpen));
    assert!(
        d.rows[3].body.contains("price 4200, "),
        "{}",
        d.rows[3].body
    );
    assert!(d.rows[5].body.contains("price 700, "), "{}", d.rows[5].body);
    assert!(d.rows[6].body.contains("retry in"), "{}", d.rows[6].body);
    assert_eq!((d.handled, d.injected, d.refused), (5, 2, 4));
    let c = d.cache;
    assert_eq!(
        (
            c.recorded,
            c.served_stale,
            c.missed_absent,
            c.missed_too_old
        ),
        (5, 5, 1, 0)
    );
}
