//! The partition layer over real HTTP on 127.0.0.1 (axum server, reqwest
//! client): an `x-priority` header picks each request's class. Then
//! unit-level checks of the service on a `ManualClock`: its wait, the
//! out-of-range class, readiness and the slot's lifetime.
//!
//! Counts and order only: the slow handler blocks on a gate the test opens,
//! so "before any slow request finishes" is a fact of the test, not a
//! timing. Every loop that waits for the server is bounded.
#![cfg(not(loom))]

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use futures_lite::future::{block_on, poll_once};
use tokio::sync::{mpsc, Semaphore};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use watertight::clock::{ManualClock, StdClock, TokioClock};
use watertight::partition::PartitionedBulkhead;
use watertight::tower::{PartitionLayer, PartitionServiceError};
use watertight::AcquireError;

const CRITICAL: usize = 0;
const BATCH: usize = 1;

/// `x-priority: critical` is class 0, `batch` class 1; anything else (or
/// no header) is class 2, which the bulkhead does not have: a typed error,
/// answered 500.
fn priority(req: &Request) -> usize {
    match req.headers().get("x-priority").map(|v| v.as_bytes()) {
        Some(b"critical") => CRITICAL,
        Some(b"batch") => BATCH,
        _ => 2,
    }
}

async fn shed(err: PartitionServiceError<Infallible>) -> StatusCode {
    match err {
        PartitionServiceError::Rejected { .. } => StatusCode::SERVICE_UNAVAILABLE,
        PartitionServiceError::NoSuchClass { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        PartitionServiceError::Inner(never) => match never {},
        _ => unreachable!("no other refusal"),
    }
}

/// Two gates the slow handler blocks on (`/slow/0`, `/slow/1`), and how
/// many requests reached each handler.
#[derive(Clone)]
struct Gates {
    open: Arc<[Semaphore; 2]>,
    entered: Arc<[AtomicUsize; 2]>,
    fast: Arc<AtomicUsize>,
}

async fn slow(State(g): State<Gates>, Path(gate): Path<usize>) -> &'static str {
    g.entered[gate].fetch_add(1, SeqCst);
    g.open[gate].acquire().await.unwrap().forget();
    "slow"
}

async fn fast(State(g): State<Gates>) -> &'static str {
    g.fast.fetch_add(1, SeqCst);
    "fast"
}

struct Server {
    base: String,
    client: reqwest::Client,
    gates: Gates,
    search: &'static PartitionedBulkhead<TokioClock, 2>,
}

/// critical 2 and batch 2 slots, each room holding at most 2 waiters;
/// waiting up to `max_wait` (`None`: failing fast).
async fn start(max_wait: Option<Duration>) -> Server {
    // One bulkhead per server, made at run time and leaked: the layer
    // borrows it for `'static`.
    let search: &'static PartitionedBulkhead<TokioClock, 2> = Box::leak(Box::new(
        PartitionedBulkhead::new("search", [("critical", 2), ("batch", 2)], TokioClock)
            .with_max_waiters(2),
    ));
    let gates = Gates {
        open: Arc::new([Semaphore::new(0), Semaphore::new(0)]),
        entered: Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]),
        fast: Arc::new(AtomicUsize::new(0)),
    };
    let routes = Router::new()
        .route("/slow/{gate}", get(slow))
        .route("/fast", get(fast));
    let layer = PartitionLayer::new(search, priority);
    let app = match max_wait {
        Some(d) => routes.route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(shed))
                .layer(layer.max_wait(d)),
        ),
        None => routes.route_layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(shed))
                .layer(layer),
        ),
    }
    .with_state(gates.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    Server {
        base,
        client,
        gates,
        search,
    }
}

type Answers = mpsc::UnboundedSender<(&'static str, u16)>;

impl Server {
    /// Sends `n` GETs of `path` with `x-priority: class` at once; each
    /// answer comes back on `tx` as (class, status).
    fn send(&self, n: usize, class: &'static str, path: &str, tx: &Answers) {
        for _ in 0..n {
            let req = self
                .client
                .get(format!("{}{path}", self.base))
                .header("x-priority", class);
            let tx = tx.clone();
            tokio::spawn(async move {
                let status = req.send().await.unwrap().status().as_u16();
                tx.send((class, status)).unwrap();
            });
        }
    }
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..5_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("never: {what}");
}

async fn recv(
    answers: &mut mpsc::UnboundedReceiver<(&'static str, u16)>,
    n: usize,
) -> Vec<(&'static str, u16)> {
    let mut got = Vec::new();
    for _ in 0..n {
        let answer = tokio::time::timeout(Duration::from_secs(10), answers.recv())
            .await
            .expect("an answer within 10 s")
            .unwrap();
        got.push(answer);
    }
    got.sort_unstable();
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_batch_flood_critical_gets_its_lent_slots_back_while_batch_gets_503() {
    let s = start(Some(Duration::from_secs(30))).await;
    let (tx, mut answers) = mpsc::unbounded_channel();
    let (entered, batch, critical) = (
        |g: usize| s.gates.entered[g].load(SeqCst),
        || s.search.class_metrics(BATCH).unwrap(),
        || s.search.class_metrics(CRITICAL).unwrap(),
    );

    // Batch fills its own room (gate 0), then borrows critical's idle room
    // (gate 1).
    s.send(2, "batch", "/slow/0", &tx);
    until("2 batch in their room", || entered(0) == 2).await;
    s.send(2, "batch", "/slow/1", &tx);
    until("2 batch in critical's room", || entered(1) == 2).await;
    assert_eq!((batch().borrowed, critical().room_in_flight), (2, 2));

    // The flood: 2 more wait in batch's room, its bound; 4 are refused at
    // once, before any slow request finished.
    s.send(6, "batch", "/slow/0", &tx);
    assert_eq!(recv(&mut answers, 4).await, vec![("batch", 503); 4]);
    until("2 batch waiting", || batch().waiting == 2).await;
    assert_eq!(batch().refused_queue_full, 4);

    // Critical arrives with its room lent out: it waits for it.
    s.send(2, "critical", "/fast", &tx);
    until("2 critical waiting", || critical().waiting == 2).await;
    assert!(answers.try_recv().is_err());

    // The two borrowers finish: critical's room goes to critical, ahead of
    // the batch calls that queued before it.
    s.gates.open[1].add_permits(2);
    assert_eq!(
        recv(&mut answers, 4).await,
        vec![
            ("batch", 200),
            ("batch", 200),
            ("critical", 200),
            ("critical", 200)
        ]
    );
    assert_eq!(s.gates.fast.load(SeqCst), 2);
    // Critical done, its room idle: batch's waiters borrow it, not earlier.
    until("the batch waiters borrow", || entered(0) == 4).await;
    assert_eq!((batch().borrowed, critical().borrowed), (4, 0));

    // Still flooded: more batch gets 503 (its queue is free again: 2 wait,
    // 1 refused).
    s.send(3, "batch", "/slow/0", &tx);
    assert_eq!(recv(&mut answers, 1).await, vec![("batch", 503)]);

    s.gates.open[0].add_permits(6);
    let rest = recv(&mut answers, 6).await;
    assert_eq!(rest, vec![("batch", 200); 6]);
    until("every slot back", || s.search.in_flight() == 0).await;
    assert_eq!(batch().refused_queue_full, 5);
    assert_eq!(critical().refused_timed_out + critical().refused_full, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_fast_a_batch_flood_gets_only_the_slots_critical_leaves() {
    let s = start(None).await;
    let (tx, mut answers) = mpsc::unbounded_channel();

    s.send(2, "critical", "/slow/0", &tx);
    until("2 critical in their room", || {
        s.gates.entered[0].load(SeqCst) == 2
    })
    .await;
    s.send(8, "batch", "/slow/0", &tx);
    // Batch gets its 2 slots and nothing of critical's: 6 refused at once.
    assert_eq!(recv(&mut answers, 6).await, vec![("batch", 503); 6]);
    until("2 batch in their room", || {
        s.gates.entered[0].load(SeqCst) == 4
    })
    .await;
    let batch = s.search.class_metrics(BATCH).unwrap();
    assert_eq!((batch.borrowed, batch.refused_full), (0, 6));

    // A class the bulkhead does not have: 500, the handler never called.
    for class in ["urgent", ""] {
        s.send(1, class, "/fast", &tx);
    }
    assert_eq!(
        recv(&mut answers, 2).await,
        vec![("", 500), ("urgent", 500)]
    );
    assert_eq!(s.gates.fast.load(SeqCst), 0);

    s.gates.open[0].add_permits(4);
    let rest = recv(&mut answers, 4).await;
    assert_eq!(
        rest,
        vec![
            ("batch", 200),
            ("batch", 200),
            ("critical", 200),
            ("critical", 200)
        ]
    );
    until("every slot back", || s.search.in_flight() == 0).await;
}

// ---------------------------------------------------------------------------
// Unit level, on a `ManualClock`.
// ---------------------------------------------------------------------------

/// A service answering its request, counting its calls.
fn echo(
    calls: &AtomicUsize,
) -> impl Service<usize, Response = usize, Error = Infallible, Future: Send> + Clone + '_ {
    tower::service_fn(move |n: usize| {
        calls.fetch_add(1, SeqCst);
        async move { Ok::<_, Infallible>(n) }
    })
}

fn by_itself(class: &usize) -> usize {
    *class
}

#[test]
fn the_wait_gets_a_lent_slot_back_or_times_out_counted_once() {
    let clock = ManualClock::new();
    let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let calls = AtomicUsize::new(0);
    let mut svc = PartitionLayer::new(&db, by_itself)
        .max_wait(Duration::from_millis(50))
        .layer(echo(&calls));

    let jobs = db.try_acquire(BATCH).unwrap();
    let lent = db.try_acquire(BATCH).unwrap();
    assert!(lent.is_borrowed());
    // Web finds its room lent out: it waits, its inner future unpolled.
    let mut web = pin!(svc.call(CRITICAL));
    assert!(block_on(poll_once(web.as_mut())).is_none());
    assert_eq!(db.class_metrics(CRITICAL).unwrap().waiting, 1);
    clock.advance(Duration::from_millis(49));
    assert!(block_on(poll_once(web.as_mut())).is_none());
    drop(lent);
    assert_eq!(block_on(web), Ok(CRITICAL));
    assert_eq!(calls.load(SeqCst), 1);

    // With nothing given back, the wait runs out: one refusal, counted as
    // timed out only (the first try is not a refusal of its own).
    let held = db.try_acquire(CRITICAL).unwrap();
    let mut web = pin!(svc.call(CRITICAL));
    assert!(block_on(poll_once(web.as_mut())).is_none());
    clock.advance(Duration::from_millis(50));
    assert_eq!(
        block_on(web),
        Err(PartitionServiceError::Rejected {
            class: CRITICAL,
            why: AcquireError::TimedOut
        })
    );
    let web = db.class_metrics(CRITICAL).unwrap();
    assert_eq!(
        (web.refused_timed_out, web.refused_full, web.waiting),
        (1, 0, 0)
    );

    // A wait dropped before its slot leaves the queue and takes nothing.
    let waiting = svc.call(CRITICAL);
    let mut waiting = Box::pin(waiting);
    assert!(block_on(poll_once(waiting.as_mut())).is_none());
    assert_eq!(db.class_metrics(CRITICAL).unwrap().waiting, 1);
    drop(waiting);
    assert_eq!(db.class_metrics(CRITICAL).unwrap().waiting, 0);
    drop((held, jobs));
    assert_eq!(db.in_flight(), 0);
    assert_eq!(calls.load(SeqCst), 3, "every call made, one future polled");
}

#[test]
fn a_class_out_of_range_is_a_typed_error_in_both_forms() {
    let clock = ManualClock::new();
    let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], &clock);
    let calls = AtomicUsize::new(0);
    let fail_fast = PartitionLayer::new(&db, by_itself).layer(echo(&calls));
    let waiting = PartitionLayer::new(&db, by_itself)
        .max_wait(Duration::from_millis(50))
        .layer(echo(&calls));

    for class in [2, usize::MAX] {
        let want = Err(PartitionServiceError::NoSuchClass { class, classes: 2 });
        assert_eq!(block_on(fail_fast.clone().oneshot(class)), want);
        assert_eq!(block_on(waiting.clone().oneshot(class)), want);
    }
    assert_eq!(calls.load(SeqCst), 0, "the inner service never called");
    for class in [CRITICAL, BATCH] {
        let m = db.class_metrics(class).unwrap();
        assert_eq!(m.refused_full + m.refused_timed_out + m.room_accepted, 0);
    }
    let err = block_on(fail_fast.oneshot(7)).unwrap_err();
    assert!(!err.is_refusal());
    assert_eq!(
        err.to_string(),
        "no class 7: the partitioned bulkhead has 2 classes"
    );
}

#[test]
fn readiness_holds_no_slot_and_the_slot_lives_until_the_response_completes() {
    let db = PartitionedBulkhead::new("db", [("web", 1), ("jobs", 1)], StdClock);
    let mut svc = PartitionLayer::new(&db, by_itself).layer(tower::service_fn(|_: usize| {
        std::future::pending::<Result<(), Infallible>>()
    }));
    let mut other = svc.clone();
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..100 {
        assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        assert!(matches!(other.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    }
    assert_eq!(db.in_flight(), 0);

    // Batch takes its room and borrows web's: the whole capacity.
    let mut first = Box::pin(svc.call(BATCH));
    assert!(first.as_mut().poll(&mut cx).is_pending());
    let second = other.call(BATCH);
    assert_eq!(db.in_flight(), 2);
    assert_eq!(db.class_metrics(BATCH).unwrap().borrowed, 1);
    // Web, failing fast, finds its room lent out.
    assert_eq!(
        block_on(svc.call(CRITICAL)),
        Err(PartitionServiceError::Rejected {
            class: CRITICAL,
            why: AcquireError::Full
        })
    );
    drop(second); // never polled: the borrowed slot goes back to web's room
    assert_eq!(db.room(CRITICAL).unwrap().in_flight(), 0);
    drop(first);
    assert_eq!(db.in_flight(), 0);

    // Completed, the future has given its slot back before it is dropped.
    let mut done =
        PartitionLayer::new(&db, by_itself).layer(tower::service_fn(|n: usize| async move {
            Ok::<_, Infallible>(n)
        }));
    let mut fut = pin!(done.call(CRITICAL));
    assert!(matches!(
        fut.as_mut().poll(&mut cx),
        Poll::Ready(Ok(CRITICAL))
    ));
    assert_eq!(db.in_flight(), 0);
}
