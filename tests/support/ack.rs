//! What the tests of acknowledged grants check alike on one Redis
//! (`tests/global_failover.rs`) and on a cluster (`tests/global_cluster.rs`):
//! a grant that no replica acknowledged is refused, counted, and given back.

#![allow(dead_code)] // each test file uses its own part

use std::time::{Duration, Instant};

use watertight::redis::{GlobalBulkhead, GlobalError, StoreFailure};

/// `g` (acknowledged by one replica, on a primary with none) refuses a
/// `try_acquire` with `NotAcknowledged { acked: 0, wanted: 1 }`, counts it
/// once, hands out nothing, and its keeper gives the grant Redis made
/// back: `holders()` (the system's holders in Redis) reaches 0 within 5 s.
pub async fn refused_and_given_back(g: &GlobalBulkhead, holders: impl Fn() -> u64) {
    let err = g.try_acquire().await.unwrap_err();
    assert!(
        matches!(
            err,
            GlobalError::StoreUnavailable(StoreFailure::NotAcknowledged {
                acked: 0,
                wanted: 1
            })
        ),
        "{err:?}"
    );
    let m = g.metrics();
    assert_eq!((m.unacknowledged, m.granted, m.held), (1, 0, 0));
    assert_eq!(m.rejected_store_unavailable, 1);
    let start = Instant::now();
    while holders() > 0 && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(holders(), 0, "the unacknowledged grant stayed in Redis");
}
