#![cfg(not(loom))]
//! The adaptive bulkhead in a deterministic simulation on `ManualClock`
//! (`tests/support/limit_sim.rs`): a downstream of 40 workers, then 10,
//! then 40 again, under 1 500 calls/s of open-loop arrivals, behind fixed
//! limits of 8, 32 and 200 and behind AIMD and Gradient2. Asserted, per
//! phase and algorithm:
//!
//! - it converges (every second from then on reaches 90 % of the best
//!   fixed limit's goodput with a p99 within 1.5 × the best's) within
//!   `MAX_WINDOWS_TO_CONVERGE` windows of the change;
//! - after convergence its goodput is at least 90 % of the best fixed
//!   limit's and its p99 within 1.5 × of it;
//! - its limit never leaves `[min_limit, max_limit]`;
//! - once its limit has settled (within ±20 % of where it ends the
//!   phase), the downstream drops at most a third as many of its calls as
//!   it drops of the best fixed limit's over the same seconds: the load is
//!   shed here, not by the overloaded system (AIMD, loss-based, keeps
//!   probing and causes some drops; a limit that does not come down when
//!   calls are dropped causes as many as the fixed limits).
//!
//! `cargo bench -p watertight --bench limit` prints the same runs as the
//! the guide's table (`guide::benchmarks`).

#[path = "support/limit_sim.rs"]
mod sim;

use watertight::limit::LimitAlgorithm;

/// The stated bound: every adaptive algorithm performs like the best fixed
/// limit within this many 1 s windows of each change.
const MAX_WINDOWS_TO_CONVERGE: usize = 20;

#[test]
fn adaptive_limits_track_the_downstream_through_three_phases() {
    let runs = sim::all_runs();
    let table = sim::table(&runs);
    println!("{table}");
    let bounds = [
        ("AIMD", sim::aimd().min_limit(), sim::aimd().max_limit()),
        (
            "Gradient2",
            sim::gradient2().min_limit(),
            sim::gradient2().max_limit(),
        ),
    ];
    for (name, min, max) in bounds {
        let run = runs.iter().find(|r| r.name == name).unwrap();
        for s in &run.seconds {
            assert!(
                (min..=max).contains(&s.limit),
                "{name}: limit {} outside [{min}, {max}]",
                s.limit
            );
        }
        for phase in 0..3 {
            let (best, bf) = sim::best_fixed(&runs, phase);
            let secs = run.phase(phase);
            let k = sim::converged_at(secs, &bf).unwrap_or_else(|| {
                panic!("{name} never converged in phase {}\n{table}", phase + 1)
            });
            assert!(
                k <= MAX_WINDOWS_TO_CONVERGE,
                "{name}, phase {}: {k} windows to converge\n{table}",
                phase + 1
            );
            let f = sim::figures(&secs[k..]);
            assert!(
                f.goodput >= 0.9 * bf.goodput,
                "{name}, phase {}: goodput {:.0}/s against {}'s {:.0}/s\n{table}",
                phase + 1,
                f.goodput,
                best.name,
                bf.goodput
            );
            let settled = sim::settled_at(secs);
            let ours: usize = secs[settled..].iter().map(|s| s.dropped).sum();
            let theirs: usize = best.phase(phase)[settled..].iter().map(|s| s.dropped).sum();
            assert!(
                ours * 3 <= theirs || theirs == 0 && ours == 0,
                "{name}, phase {}: the downstream dropped {ours} calls after second {settled}, {theirs} of {}'s\n{table}",
                phase + 1,
                best.name
            );
            assert!(
                f.p99_ms <= 1.5 * bf.p99_ms,
                "{name}, phase {}: p99 {:.1} ms against {}'s {:.1} ms\n{table}",
                phase + 1,
                f.p99_ms,
                best.name,
                bf.p99_ms
            );
        }
    }
}
