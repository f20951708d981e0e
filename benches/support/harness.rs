//! The harness of the Redis bench binaries (`benches/redis.rs`,
//! `benches/redis_leased.rs`): tasks that run an operation over and over
//! from one start, and the median of a few runs. (Their runtime, as their
//! server, is the tests': `tests/support/global.rs`.)

#![allow(dead_code)] // each bench uses its own part

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use tokio::task::JoinHandle;

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `per_task` iterations of `op` on each of `tasks` tasks at once;
/// returns the wall time per iteration (all tasks' iterations together).
pub async fn run<F, Fut>(tasks: usize, per_task: usize, op: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (start, handles) = spawn(tasks, per_task, op);
    start.wait().await;
    let t = Instant::now();
    per_iteration(t, handles, per_task).await
}

/// As [`run`], timed from the moment the tasks are released (a run of fast
/// operations may end before the spawning task reads the clock after them).
pub async fn run_timed<F, Fut>(tasks: usize, per_task: usize, op: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (start, handles) = spawn(tasks, per_task, op);
    // Every task waits at the barrier already or soon: the clock is read
    // just before the last arrival releases them.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t = Instant::now();
    start.wait().await;
    per_iteration(t, handles, per_task).await
}

/// `tasks` tasks, each waiting at the barrier (whose last party is the
/// caller), then running `op` `per_task` times.
fn spawn<F, Fut>(tasks: usize, per_task: usize, op: F) -> (Arc<Barrier>, Vec<JoinHandle<()>>)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let start = Arc::new(Barrier::new(tasks + 1));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (op, start) = (op.clone(), start.clone());
        handles.push(tokio::spawn(async move {
            start.wait().await;
            for _ in 0..per_task {
                op().await;
            }
        }));
    }
    (start, handles)
}

/// Waits for every task, then the time since `t` per iteration.
async fn per_iteration(t: Instant, handles: Vec<JoinHandle<()>>, per_task: usize) -> Duration {
    let n = handles.len() * per_task;
    for h in handles {
        h.await.unwrap();
    }
    t.elapsed() / u32::try_from(n).unwrap()
}
