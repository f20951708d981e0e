#![cfg(not(loom))]
//! Deterministic integration tests of the public `Bulkhead` API.
//!
//! Time comes from a `ManualClock`, futures are polled by hand with counting
//! wakers (`common::Probe`, `common::Task`), and nothing sleeps: every test
//! gives the same answer on every run. The one test with real threads
//! (`never_exceeds_max_concurrent_calls`) asserts an invariant that must hold
//! in every interleaving.

#[path = "../common/mod.rs"]
mod common;

mod bounded_queue;
mod cancellation;
mod classic;
mod counters;
mod deadlines;
mod fairness;
mod waker_drop;

use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use common::{now_or_never, Probe, Task};
use futures_lite::future;
use watertight::clock::{Clock, Instant, ManualClock, StdClock};
use watertight::{AcquireError, Bulkhead, ConfigError, Permit};

const MS: Duration = Duration::from_millis(1);
const NS: Duration = Duration::from_nanos(1);

fn exceeds(requested: usize, capacity: usize) -> AcquireError {
    AcquireError::ExceedsCapacity {
        requested,
        capacity,
    }
}

/// Asserts every counter of `bh` in one line: accepted, rejected_full,
/// rejected_timed_out, rejected_closed, cancelled_waits.
#[track_caller]
fn assert_counters<C>(bh: &Bulkhead<C>, expected: (usize, usize, usize, usize, usize)) {
    let m = bh.metrics();
    assert_eq!(
        (
            m.accepted,
            m.rejected_full,
            m.rejected_timed_out,
            m.rejected_closed,
            m.cancelled_waits
        ),
        expected,
        "(accepted, full, timed out, closed, cancelled)"
    );
}
