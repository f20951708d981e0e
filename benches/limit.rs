//! The adaptive bulkhead's simulation as a table: a downstream whose
//! workers go from 40 to 10 and back, under open-loop arrivals, through
//! fixed limits of 8, 32 and 200 and through AIMD and Gradient2, on
//! `ManualClock` (deterministic: the same table on every run and machine).
//! `cargo bench -p watertight --bench limit`; `tests/limit_sim.rs` asserts
//! the targets on the same simulation. The table and what it shows: the
//! guide, `src/guide/benchmarks.rs` (`watertight::guide::benchmarks`).

#[path = "../tests/support/limit_sim.rs"]
mod sim;

fn main() {
    // `cargo bench` passes `--bench`; nothing here is timed.
    let runs = sim::all_runs();
    println!(
        "Adaptive concurrency on ManualClock: {} workers, then {}, then {} ({} s each); service {}–{} ms; downstream queue bound {}; windows of 1 s.",
        sim::WORKERS[0],
        sim::WORKERS[1],
        sim::WORKERS[2],
        sim::PHASE_SECS,
        sim::SERVICE_MS.0,
        sim::SERVICE_MS.1,
        sim::QUEUE_BOUND
    );
    print!("{}", sim::table(&runs));
}
