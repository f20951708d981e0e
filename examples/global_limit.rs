//! One limit across processes: four worker processes with a bulkhead of
//! 20 each put 80 calls at their neighbour at once; here the same four go
//! through one [`watertight::redis::GlobalBulkhead`] of 20.
//!
//! Run: `cargo run --example global_limit --features redis`
//! (redis-rs 1.x needs rustc 1.88; a `redis-server` on PATH:
//! `apt-get install -y redis-server`).
//!
//! It starts a neighbour (an axum server on 127.0.0.1 that counts the calls
//! in flight), a redis-server of its own (a Unix socket in a temporary
//! directory, persistence off) and, twice, four worker processes (this
//! program again, with an environment variable naming the role), each firing
//! 40 calls at once at the neighbour: first each through a local
//! `Bulkhead` of 20, then all through one `GlobalBulkhead` of 20. It prints
//! the most calls the neighbour saw at once in each round, stops every
//! process it started, and ends in a few seconds. Without redis-server it
//! says how to get it and exits.

#[path = "global_limit/demo.rs"]
mod demo;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(code) = demo::run_worker_if_asked().await {
        return code;
    }
    let Some(redis_server) = demo::redis_server_on_path() else {
        println!(
            "global_limit: skipped, no redis-server on PATH (to run it: {})",
            demo::HOW_TO_ENABLE
        );
        return ExitCode::SUCCESS;
    };
    println!("global_limit: {}", demo::setup());
    match demo::run(&redis_server).await {
        Ok(reports) => {
            demo::print_table(&reports, "  ");
            println!("  -> {}", demo::conclusion(&reports));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("global_limit: {e}");
            ExitCode::FAILURE
        }
    }
}
