//! The `global_limit` example and the tour's act 7
//! (`examples/global_limit/demo.rs`), run for real: a neighbour on
//! 127.0.0.1, a redis-server of its own on a Unix socket, and four worker
//! processes (this test binary again: `harness = false`, so that `main`
//! can take the worker role the demonstration starts it in).
//!
//! It asserts what the example prints: every call answered in both rounds;
//! with a local `Bulkhead` of 20 in each process the neighbour saw more
//! than 20 calls at once (at most 80); with one `GlobalBulkhead` of 20 it
//! saw at most 20, and at least 10 (the limit is used, not just obeyed);
//! in leased mode the same, with under a quarter of the per-call mode's
//! Redis calls.
//! The first is the only assertion about timing: the four workers start
//! their calls together, each holding the neighbour 20-50 ms, so two of
//! them overlap. Without redis-server on PATH (CI installs it) it says so
//! and passes.

#[path = "../examples/global_limit/demo.rs"]
mod demo;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    if let Some(code) = demo::run_worker_if_asked().await {
        return code;
    }
    let Some(redis_server) = demo::redis_server_on_path() else {
        println!(
            "global_limit_example: skipped, no redis-server on PATH ({})",
            demo::HOW_TO_ENABLE
        );
        return ExitCode::SUCCESS;
    };
    println!("global_limit_example: {}", demo::setup());
    let reports = demo::run(&redis_server)
        .await
        .expect("the demonstration ran");
    demo::print_table(&reports, "  ");
    println!("  -> {}", demo::conclusion(&reports));

    let [local, global, leased] = &reports[..] else {
        panic!("three rounds, got {reports:?}");
    };
    assert_eq!(
        (local.round, global.round, leased.round),
        (demo::Round::Local, demo::Round::Global, demo::Round::Leased)
    );
    let all = demo::WORKERS * demo::CALLS;
    for r in [local, global, leased] {
        assert_eq!(
            (r.calls, r.ok, r.refused, r.failed, r.seen),
            (all, all, 0, 0, all),
            "{r:?}"
        );
    }
    let per_process = demo::LOCAL_SLOTS;
    let limit = demo::GLOBAL_LIMIT as usize;
    assert!(
        local.max_in_flight > limit && local.max_in_flight <= demo::WORKERS * per_process,
        "local limits only: {} at once at the neighbour",
        local.max_in_flight
    );
    assert!(
        (limit / 2..=limit).contains(&global.max_in_flight),
        "one global limit of {limit}: {} at once at the neighbour",
        global.max_in_flight
    );
    assert!(
        (limit / 2..=limit).contains(&leased.max_in_flight),
        "one leased limit of {limit}: {} at once at the neighbour",
        leased.max_in_flight
    );
    // Per call, at least one script per call (the releases are batched);
    // leased, a refresh now and then for the whole process.
    assert!(
        global.redis_calls >= all as u64 / 2,
        "per call: {} Redis calls for {all} calls",
        global.redis_calls
    );
    assert!(
        leased.redis_calls * 4 < global.redis_calls,
        "leased: {} Redis calls for {all} calls, per call {}",
        leased.redis_calls,
        global.redis_calls
    );
    println!("global_limit_example: ok");
    ExitCode::SUCCESS
}
