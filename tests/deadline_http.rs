#![cfg(not(loom))]
//! The request budget across three hops of real HTTP on 127.0.0.1: A (this
//! test, a reqwest client) → B (an axum server that calls C) → C (an axum
//! server whose work takes a second). A has 300 ms.
//!
//! C's work runs in a task of its own, as work handed to a worker pool or a
//! database does: dropping C's handler (or closing its connection) does not
//! stop it. What stops it is the budget: the work is a loop of 10 ms steps
//! and checks C's `Deadline` (from the request's extensions) before each
//! one, logging the instant it checked. So "no step started after A's
//! deadline" follows from the instants C's own checks read, not from how
//! fast anything ran.
//!
//! - With the layers, C's budget is what A had, less what each hop spent
//!   and two 25 ms margins: C stops before A's deadline, neither B nor C
//!   starts any work after it, and A has its error well before C's second.
//! - The control: the same servers, the budget header not sent. B and C
//!   each get their server's own 10 s; A still gives up at 300 ms, and C
//!   works its full second for nobody.
//!
//! The three hops are the tour's act 12 (`examples/tour/hops.rs`, its code
//! compiled in, with `examples/tour/net.rs` for its servers and client): B
//! and C log each step with the instant their clock read.
//!
//! Counts and order are asserted, and instants against instants; the one
//! latency bound (A's answer well under C's second) is loose.

#[allow(dead_code)] // the tour's printing is not used here
#[path = "../examples/tour/hops.rs"]
mod hops;
#[path = "../examples/tour/net.rs"]
mod net;

use std::time::Duration;

use axum::http::StatusCode;
use hops::{Answer, Event, Run, BUDGET, MARGIN, STEPS};
use watertight::clock::Instant;

/// A guard against hangs only.
const PATIENCE: Duration = Duration::from_secs(5);

/// The three hops, C's job ended (either way) before it returns.
async fn three_hops(propagate: bool) -> Run {
    let run = hops::run(propagate, PATIENCE).await;
    assert!(hops::ended(&run.log), "C's work never ended: {:?}", run.log);
    run
}

/// What A got: a status, or an error and whether a deadline ended it.
fn answer(run: &Run) -> Result<StatusCode, bool> {
    match run.a_answer {
        Answer::Status(status) => Ok(status),
        Answer::Failed { deadline, .. } => Err(deadline),
    }
}

fn steps(log: &[Event]) -> Vec<Instant> {
    log.iter()
        .filter_map(|e| match e {
            Event::CStep(at) => Some(*at),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_travels_a_to_b_to_c_and_c_stops_before_a_gives_up() {
    let run = three_hops(true).await;
    let log = &run.log;
    println!("A: {:?} after {:?}; log: {log:?}", run.a_answer, run.a_took);

    // A got an error (B's 504, or its own cut), well before C's second.
    assert!(
        matches!(answer(&run), Ok(StatusCode::GATEWAY_TIMEOUT) | Err(true)),
        "{:?}",
        run.a_answer
    );
    assert!(run.a_took < Duration::from_millis(800), "{:?}", run.a_took);

    // One request each at B and C; C started with less than A's budget,
    // two margins less at least.
    let b_started: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::BStarted(at, _) => Some(*at),
            _ => None,
        })
        .collect();
    let c_budgets: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::CStarted(_, budget) => Some(*budget),
            _ => None,
        })
        .collect();
    assert_eq!(b_started.len(), 1, "{log:?}");
    assert_eq!(c_budgets.len(), 1, "{log:?}");
    assert!(c_budgets[0] <= BUDGET - 2 * MARGIN, "{c_budgets:?}");

    // C stopped by its budget, never finished, and its stop came before
    // A's deadline; B and C started nothing after it.
    let stops: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::CStopped(at, n) => Some((*at, *n)),
            _ => None,
        })
        .collect();
    assert_eq!(stops.len(), 1, "{log:?}");
    assert!(!log.iter().any(|e| matches!(e, Event::CFinished(_))));
    let (stopped_at, done) = stops[0];
    assert!(done < STEPS, "{done}");
    assert!(
        stopped_at < run.a_deadline,
        "C stopped at {stopped_at:?}, A's deadline {:?}",
        run.a_deadline
    );
    assert!(b_started.iter().all(|&at| at < run.a_deadline));
    assert!(steps(log).iter().all(|&at| at < run.a_deadline), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_without_the_header_c_works_its_full_second_for_nobody() {
    let run = three_hops(false).await;
    let log = &run.log;
    println!(
        "control: A: {:?} after {:?}; C: {} steps",
        run.a_answer,
        run.a_took,
        steps(log).len()
    );

    // A gave up at its own deadline, as before.
    assert_eq!(answer(&run), Err(true));
    // C got its server's budget, not A's, and did all its work: most of it
    // after A had given up.
    assert!(log
        .iter()
        .any(|e| matches!(e, Event::CStarted(_, budget) if *budget > BUDGET)));
    assert!(log.iter().any(|e| matches!(e, Event::CFinished(_))));
    assert!(!log.iter().any(|e| matches!(e, Event::CStopped(..))));
    let steps = steps(log);
    assert_eq!(steps.len(), STEPS);
    assert!(
        steps.iter().filter(|&&at| at >= run.a_deadline).count() > STEPS / 2,
        "{log:?}"
    );
}
