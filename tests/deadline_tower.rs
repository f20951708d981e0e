#![cfg(not(loom))]
//! The budget's tower layers (`InboundDeadlineLayer`,
//! `OutboundDeadlineLayer`) around `tower::service_fn`s, on a
//! `ManualClock`: time moves only when a test advances it, futures are
//! polled by hand, so each test checks the exact instant something happens
//! and whether the inner service was called at all. The same layers over
//! real HTTP: tests/deadline_http.rs.

use std::convert::Infallible;
use std::future::pending;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::future::{block_on, poll_once};
use http::{HeaderMap, Request};
use tower::{Layer, Service, ServiceExt};
use watertight::clock::ManualClock;
use watertight::deadline::wire::ParseError;
use watertight::deadline::Deadline;
use watertight::tower::{
    BudgetHeader, InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineError,
    OutboundDeadlineLayer,
};

type Clock = Arc<ManualClock>;
const MS: Duration = Duration::from_millis(1);

fn req(headers: &[(&str, &str)]) -> Request<()> {
    let mut b = Request::builder();
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

/// A handler that counts its calls and answers with what is left of the
/// deadline it found in the request.
fn remaining_handler(
    calls: Arc<AtomicUsize>,
) -> impl Service<Request<()>, Response = Duration, Error = Infallible, Future: Send> + Clone {
    tower::service_fn(move |r: Request<()>| {
        calls.fetch_add(1, SeqCst);
        let d = r
            .extensions()
            .get::<Deadline<Clock>>()
            .expect("the inbound layer puts the deadline in the extensions")
            .clone();
        async move { Ok(d.remaining()) }
    })
}

#[test]
fn the_handler_gets_the_smaller_of_the_callers_budget_and_the_servers_max() {
    let clock = Clock::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = InboundDeadlineLayer::new(clock.clone(), 2000 * MS).layer(remaining_handler(calls));
    let ask = |h: &[(&str, &str)]| block_on(svc.clone().oneshot(req(h)));

    assert_eq!(ask(&[("x-request-timeout-ms", "300")]), Ok(300 * MS));
    assert_eq!(ask(&[("x-request-timeout-ms", "9000")]), Ok(2000 * MS));
    assert_eq!(ask(&[]), Ok(2000 * MS));
    // Sent twice: the smaller.
    assert_eq!(
        ask(&[
            ("x-request-timeout-ms", "700"),
            ("x-request-timeout-ms", "400")
        ]),
        Ok(400 * MS)
    );
    // Another header is not read.
    assert_eq!(ask(&[("grpc-timeout", "1m")]), Ok(2000 * MS));
}

#[test]
fn grpc_timeout_is_read_when_configured() {
    let clock = Clock::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = InboundDeadlineLayer::new(clock, Duration::from_secs(30))
        .header(BudgetHeader::grpc_timeout())
        .layer(remaining_handler(calls));
    let ask = |h: &[(&str, &str)]| block_on(svc.clone().oneshot(req(h)));
    assert_eq!(ask(&[("grpc-timeout", "1500000u")]), Ok(1500 * MS));
    assert_eq!(ask(&[("grpc-timeout", "2M")]), Ok(Duration::from_secs(30)));
    assert_eq!(
        ask(&[("grpc-timeout", "2")]),
        Err(InboundDeadlineError::Malformed(ParseError::MissingUnit))
    );
}

#[test]
fn too_little_budget_or_a_garbled_header_is_refused_without_calling_the_handler() {
    let clock = Clock::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = InboundDeadlineLayer::new(clock, Duration::from_secs(1))
        .min_cost(20 * MS)
        .layer(remaining_handler(calls.clone()));
    let ask = |h: &[(&str, &str)]| block_on(svc.clone().oneshot(req(h)));

    assert_eq!(
        ask(&[("x-request-timeout-ms", "19")]),
        Err(InboundDeadlineError::Refused { budget: 19 * MS })
    );
    assert_eq!(
        ask(&[("x-request-timeout-ms", "0")]),
        Err(InboundDeadlineError::Refused {
            budget: Duration::ZERO
        })
    );
    assert_eq!(
        ask(&[("x-request-timeout-ms", "-5")]),
        Err(InboundDeadlineError::Malformed(ParseError::Negative))
    );
    assert_eq!(
        calls.load(SeqCst),
        0,
        "no refused request reached the handler"
    );
    // The minimum cost itself is enough.
    assert_eq!(ask(&[("x-request-timeout-ms", "20")]), Ok(20 * MS));
    assert_eq!(calls.load(SeqCst), 1);
}

#[test]
fn a_spent_budget_is_refused_even_with_no_minimum_cost() {
    let clock = Clock::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = InboundDeadlineLayer::new(clock, Duration::from_secs(1))
        .layer(remaining_handler(calls.clone()));
    assert_eq!(
        block_on(svc.oneshot(req(&[("x-request-timeout-ms", "0")]))),
        Err(InboundDeadlineError::Refused {
            budget: Duration::ZERO
        })
    );
    assert_eq!(calls.load(SeqCst), 0);
}

/// Counts its drops: a handler future stopped by the layer is dropped.
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn the_handler_is_stopped_at_the_deadline_not_before() {
    let clock = Clock::default();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let mut svc = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(1)).layer(
        tower::service_fn(move |_: Request<()>| {
            let guard = DropCount(d.clone());
            async move {
                let _guard = guard;
                pending::<Result<(), Infallible>>().await
            }
        }),
    );
    let mut call = pin!(svc.call(req(&[("x-request-timeout-ms", "300")])));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(300 * MS - Duration::from_nanos(1));
    assert!(block_on(poll_once(call.as_mut())).is_none());
    assert_eq!(dropped.load(SeqCst), 0, "still working");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(
        block_on(poll_once(call.as_mut())),
        Some(Err(InboundDeadlineError::Elapsed))
    );
    assert_eq!(dropped.load(SeqCst), 1, "stopped at the deadline");
}

/// A client that records the headers it was sent with and answers at once.
fn recording_client(
    seen: Arc<Mutex<Vec<HeaderMap>>>,
) -> impl Service<Request<()>, Response = (), Error = Infallible, Future: Send> + Clone {
    tower::service_fn(move |r: Request<()>| {
        seen.lock().unwrap().push(r.headers().clone());
        async { Ok(()) }
    })
}

#[test]
fn the_client_sends_what_is_left_minus_the_margin_replacing_any_value() {
    let clock = Clock::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = OutboundDeadlineLayer::<Clock>::new(10 * MS).layer(recording_client(seen.clone()));
    let deadline = Deadline::after(clock.clone(), 300 * MS);
    clock.advance(120 * MS);
    let r = Request::builder()
        .header("x-request-timeout-ms", "99999")
        .extension(deadline.clone())
        .body(())
        .unwrap();
    block_on(client.clone().oneshot(r)).unwrap();

    let grpc = OutboundDeadlineLayer::<Clock>::new(10 * MS)
        .header(BudgetHeader::grpc_timeout())
        .layer(recording_client(seen.clone()));
    clock.advance(Duration::from_nanos(1_500));
    let r = Request::builder().extension(deadline).body(()).unwrap();
    block_on(grpc.oneshot(r)).unwrap();

    let seen = seen.lock().unwrap();
    let values: Vec<_> = seen[0].get_all("x-request-timeout-ms").iter().collect();
    assert_eq!(values, ["170"]);
    // 169.9985 ms, rounded down in microseconds.
    assert_eq!(seen[1]["grpc-timeout"], "169998u");
    assert!(seen[1].get("x-request-timeout-ms").is_none());
}

#[test]
fn no_more_than_the_margin_left_is_not_sent() {
    let clock = Clock::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = OutboundDeadlineLayer::<Clock>::new(10 * MS).layer(recording_client(seen.clone()));
    let deadline = Deadline::after(clock.clone(), 300 * MS);
    clock.advance(290 * MS);
    let r = Request::builder()
        .extension(deadline.clone())
        .body(())
        .unwrap();
    assert_eq!(
        block_on(client.clone().oneshot(r)),
        Err(OutboundDeadlineError::Expired { left: 10 * MS })
    );
    clock.advance(MS);
    let r = Request::builder().extension(deadline).body(()).unwrap();
    assert_eq!(
        block_on(client.oneshot(r)),
        Err(OutboundDeadlineError::Expired { left: 9 * MS })
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
}

#[test]
fn without_a_deadline_the_request_passes_untouched_and_uncut() {
    let clock = Clock::default();
    let mut client =
        OutboundDeadlineLayer::<Clock>::new(10 * MS).layer(tower::service_fn(|r: Request<()>| {
            let has = r.headers().contains_key("x-request-timeout-ms");
            async move {
                if has {
                    return Ok::<_, Infallible>("header");
                }
                pending().await
            }
        }));
    let mut call = pin!(client.call(req(&[])));
    clock.advance(Duration::from_secs(3600));
    assert!(block_on(poll_once(call.as_mut())).is_none());
}

#[test]
fn the_call_is_cut_at_the_callers_deadline_not_the_headers() {
    let clock = Clock::default();
    let mut client =
        OutboundDeadlineLayer::<Clock>::new(50 * MS).layer(tower::service_fn(|_: Request<()>| {
            pending::<Result<(), Infallible>>()
        }));
    let deadline = Deadline::after(clock.clone(), 200 * MS);
    let mut call = pin!(client.call(Request::builder().extension(deadline).body(()).unwrap()));
    clock.advance(150 * MS); // the header's budget has passed
    assert!(block_on(poll_once(call.as_mut())).is_none());
    clock.advance(50 * MS);
    assert_eq!(
        block_on(poll_once(call.as_mut())),
        Some(Err(OutboundDeadlineError::Elapsed))
    );
}

/// B's handler calls C through the outbound layer with the deadline the
/// inbound layer gave it: C starts with B's budget less the time B spent
/// and the margin — the budget shrinks hop by hop, never restarts.
#[test]
fn two_hops_in_process_c_gets_what_b_had_left_minus_the_margin() {
    let clock = Clock::default();
    let c_calls = Arc::new(AtomicUsize::new(0));
    let c = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(10))
        .layer(remaining_handler(c_calls.clone()));
    let to_c = OutboundDeadlineLayer::<Clock>::new(5 * MS).layer(c.map_err(|e| format!("{e}")));
    let b_clock = clock.clone();
    let b = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(10)).layer(
        tower::service_fn(move |r: Request<()>| {
            let deadline = r.extensions().get::<Deadline<Clock>>().unwrap().clone();
            let to_c = to_c.clone();
            b_clock.advance(40 * MS); // B's own work before it calls C
            async move {
                let call = Request::builder().extension(deadline).body(()).unwrap();
                to_c.oneshot(call).await
            }
        }),
    );
    let answer = block_on(b.oneshot(req(&[("x-request-timeout-ms", "300")])));
    assert_eq!(answer, Ok(255 * MS)); // 300 - 40 - 5
    assert_eq!(c_calls.load(SeqCst), 1);
}

#[test]
fn the_layers_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let clock = Clock::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(1))
        .layer(remaining_handler(calls));
    let f = svc.call(req(&[]));
    send(&f);
    let mut client =
        OutboundDeadlineLayer::<Clock>::new(MS).layer(recording_client(Default::default()));
    let f = client.call(req(&[]));
    send(&f);
}
