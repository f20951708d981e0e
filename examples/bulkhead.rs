//! A slow system floods its bulkhead; callers beyond its capacity are turned
//! away after a short wait instead of queueing, and a second system next to it
//! is unaffected.
//!
//! Run: `cargo run --example bulkhead --features tokio`

use std::sync::Arc;
use std::time::{Duration, Instant};

use watertight::clock::TokioClock;
use watertight::{AcquireError, Bulkhead};

static SHIPPING: Bulkhead<TokioClock> = Bulkhead::new("shipping", 3, TokioClock);
static INVENTORY: Bulkhead<TokioClock> = Bulkhead::new("inventory", 5, TokioClock);

/// One call to a system behind its bulkhead: wait at most `max_wait` for a
/// slot, then hold it for the call's duration.
async fn call(
    bulkhead: &'static Bulkhead<TokioClock>,
    work: Duration,
    max_wait: Duration,
) -> Result<(), AcquireError> {
    let _permit = bulkhead.acquire_timeout(max_wait).await?;
    tokio::time::sleep(work).await; // the remote call
    Ok(())
}

#[tokio::main]
async fn main() {
    let start = Instant::now();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // Ten checkouts need a shipping rate (slow: 400 ms) at the same moment...
    for i in 0..10 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let r = call(
                &SHIPPING,
                Duration::from_millis(400),
                Duration::from_millis(100),
            )
            .await;
            log.lock()
                .unwrap()
                .push(("shipping", i, r, start.elapsed()));
        }));
    }
    // ...while four inventory lookups (fast: 20 ms) arrive too.
    for i in 0..4 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let r = call(
                &INVENTORY,
                Duration::from_millis(20),
                Duration::from_millis(100),
            )
            .await;
            log.lock()
                .unwrap()
                .push(("inventory", i, r, start.elapsed()));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }

    println!(
        "{:<10} {:>4}  {:<28} {:>9}",
        "system", "call", "outcome", "latency"
    );
    for (system, i, r, t) in log.lock().unwrap().iter() {
        let outcome = match r {
            Ok(()) => "ok",
            Err(AcquireError::TimedOut) => "rejected: no slot in 100 ms",
            Err(_) => "rejected",
        };
        println!("{system:<10} {i:>4}  {outcome:<28} {:>6} ms", t.as_millis());
    }
    for b in [&SHIPPING, &INVENTORY] {
        let m = b.metrics();
        println!(
            "{}: accepted {}, rejected {} (timed out {}), peak in flight {} of {}",
            m.name,
            m.accepted,
            m.rejected(),
            m.rejected_timed_out,
            m.peak_in_flight,
            m.capacity
        );
    }
    println!("the slow system's overflow was turned away in ~100 ms; the fast one never waited.");
}
