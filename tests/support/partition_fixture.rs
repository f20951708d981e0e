//! What the partitioned bulkhead's test files share: three classes of 5, 3
//! and 2 slots on a `ManualClock`, their numbers, and the refusal for lack
//! of a slot.
#![allow(dead_code)] // each test file uses its own part

use std::time::Duration;

use watertight::clock::ManualClock;
use watertight::partition::{PartitionError, PartitionedBulkhead};
use watertight::AcquireError;

pub const MS: Duration = Duration::from_millis(1);
pub const CRITICAL: usize = 0;
pub const DEFAULT: usize = 1;
pub const BATCH: usize = 2;

/// The refusal of a call that found no slot and had no time to wait.
pub fn full() -> PartitionError {
    PartitionError::Refused(AcquireError::Full)
}

/// critical 5, default 3, batch 2: 10 slots.
pub fn three(clock: &ManualClock) -> PartitionedBulkhead<&ManualClock, 3> {
    PartitionedBulkhead::new(
        "search",
        [("critical", 5), ("default", 3), ("batch", 2)],
        clock,
    )
}
