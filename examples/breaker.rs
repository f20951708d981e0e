//! A circuit breaker in front of a flaky system, without HTTP.
//!
//! `cargo run --example breaker --features tokio`
//!
//! The "system" fails every call for a while, then recovers. The breaker
//! opens after its minimum calls, refuses calls at once with a retry hint
//! while open, lets three probes through after the open wait, and closes.
//! The tour's act 4 (`examples/tour/breaker.rs`) shows the same over real
//! loopback HTTP.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use watertight::breaker::Transition;
use watertight::clock::{Clock, TokioClock};
use watertight::{BreakerConfig, CallError, CircuitBreaker};

/// Whether the system answers.
static HEALTHY: AtomicBool = AtomicBool::new(false);

/// The system: 5 ms per call, and an error while it is down.
async fn fetch_quote(item: u32) -> Result<u32, &'static str> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    if HEALTHY.load(Ordering::Relaxed) {
        Ok(100 + item)
    } else {
        Err("upstream 503")
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let config = BreakerConfig::builder()
        .window_size(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(Duration::from_millis(300))
        .half_open_calls(3)
        .slow_call_duration(Duration::from_millis(100))
        .build()
        .expect("a valid config");
    let start = TokioClock.now();
    let quotes = CircuitBreaker::<_, 10, _>::with_listener(
        "quotes",
        config,
        TokioClock,
        move |t: &Transition| {
            let ms = t.at.saturating_duration_since(start).as_millis();
            println!("{ms:>5} ms  {}: {} -> {}", t.name, t.from, t.to);
        },
    );

    for item in 1..=20 {
        if item == 9 {
            HEALTHY.store(true, Ordering::Relaxed);
            println!("      the system recovers");
        }
        let result = quotes.call(fetch_quote(item)).await;
        let ms = TokioClock
            .now()
            .saturating_duration_since(start)
            .as_millis();
        match result {
            Ok(price) => println!("{ms:>5} ms  quote {item}: {price}"),
            Err(CallError::Failed(e)) => println!("{ms:>5} ms  quote {item}: failed ({e})"),
            Err(CallError::Rejected(why)) => {
                println!("{ms:>5} ms  quote {item}: refused at once ({why})");
                // A server would send `Retry-After`; here we just wait it out.
                if let Some(wait) = why.retry_after() {
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    let m = quotes.metrics();
    println!(
        "state {}, {} calls in the window ({} failed), {} refused over its life",
        m.state, m.calls, m.failed_calls, m.rejected
    );
}
