//! Deadlines across the wire: the request's budget travels with the
//! request, so a service three hops down stops when the caller at the top
//! has given up.
//!
//! A [`Deadline`](crate::deadline::Deadline) bounds a request inside one
//! process: each step gets the smaller of its own limit and what is left.
//! Without help it ends at the process's edge: each service that a request
//! crosses starts a fresh budget, and the third one keeps working for a
//! caller who gave up a second ago — work nobody reads, holding the slots,
//! connections and CPU that live requests need. gRPC carries the budget in
//! `grpc-timeout`, Finagle in its `Deadline` context, Envoy in
//! `x-envoy-expected-rq-timeout-ms`. Here:
//!
//! | piece | where | what |
//! |---|---|---|
//! | the header codec | [`deadline::wire`](crate::deadline::wire), no feature, `no_std` | `grpc-timeout` (8 digits and a unit) or whole milliseconds; the sender rounds down, typed parse errors |
//! | the server side | `tower::InboundDeadlineLayer` (feature `http`) | the handler's `Deadline` from the header, capped by the server's maximum; refusal at admission; the handler stopped at the deadline |
//! | the client side | `tower::OutboundDeadlineLayer` (feature `http`) | the header set to what is left minus a margin; not sent when nothing is; the call cut at the deadline |
//!
//! # The header
//!
//! What travels is a *duration*, what is left, never an instant: the two
//! machines' clocks need not agree, only tick at the same rate (a
//! monotonic clock does). Two formats:
//!
//! - `x-request-timeout-ms: 250` — whole milliseconds, for HTTP services.
//!   The name is the default of [`wire::TIMEOUT_MS`](crate::deadline::wire::TIMEOUT_MS)
//!   (lowercase, an `x-` name because no standard header carries a
//!   budget, `-ms` for its unit, as Envoy's); any other name can be set
//!   (`BudgetHeader::millis_named`), Envoy's own included.
//! - `grpc-timeout: 250000u` — gRPC's, for tonic: at most 8 digits and a
//!   unit (`H M S m u n`); the sender picks the finest unit that fits, so
//!   nothing is lost below 100 ms and at most one unit of 8 significant
//!   digits above.
//!
//! **Rounding: down, at the sender.** A budget may shrink on its way, never
//! grow: a callee that believes it has more time than its caller works past
//! the caller's deadline. So the sender truncates (grpc-java does the same;
//! grpc-go rounds up, which lets each hop add up to a unit), and the
//! receiver reads the value exactly — every unit is a whole number of
//! nanoseconds. A budget too long for the format goes as the longest it
//! can say (99,999,999 hours).
//!
//! **Absurd values** are typed errors
//! ([`ParseError`](crate::deadline::wire::ParseError)): empty, negative, a
//! decimal point or white space, 9 digits, no unit or an unknown one, past
//! `u64::MAX` ms. The server answers them with
//! `InboundDeadlineError::Malformed` (a 400): a garbled budget is a bug in
//! the caller, and ignoring it would quietly give the request the
//! server's whole budget. **Zero** is a value, not an error: the caller had
//! nothing left, and the request is refused at admission. Sent more than
//! once, the smallest value counts.
//!
//! # The margin
//!
//! The callee starts its clock when it reads the header, but the request
//! left the caller some time before: connection set-up, the network,
//! proxies' queues. Without a margin the callee's deadline falls after the
//! caller's by that transit time, and its answer — even its "I ran out of
//! time" — arrives after the caller has stopped listening. So the sender
//! writes `left − margin`, and the margin is the transit time you expect,
//! both ways (the answer must come back too): a few milliseconds inside a
//! data centre, tens across regions. The budget shrinks by a margin at
//! each hop, which is right: every hop costs a round trip.
//!
//! With `left ≤ margin` the request is not sent at all
//! (`OutboundDeadlineError::Expired`): the callee would have nothing. And
//! the caller's own cut is at its deadline, not at the header's: the
//! margin is for the callee, so an answer that comes back within it is
//! still taken.
//!
//! # Admission refusal
//!
//! Every request costs the server something before it can answer at all:
//! parsing, a database round trip, the cheapest useful path. A request
//! that arrives with less budget than that cannot be answered in time,
//! and starting it spends capacity on work nobody will read — under
//! overload, exactly the requests that have waited longest in some queue.
//! `InboundDeadlineLayer::min_cost` is that cost: a request with less left
//! is refused at once with `InboundDeadlineError::Refused` (503, or gRPC's
//! `DEADLINE_EXCEEDED`), without calling the handler. Zero, the default,
//! refuses only a spent budget. Pick it from the server's own latency: the
//! median of its fastest endpoint is a fair start.
//!
//! Admitted, the handler finds the `Deadline` in the request's extensions
//! (axum: `Extension<Deadline<TokioClock>>`; there is no axum extractor of
//! our own, to keep axum out of the dependencies), bounds its own steps by
//! it and hands it to the `OutboundDeadlineLayer` of its clients. At the
//! deadline the layer drops the handler's future and answers
//! `InboundDeadlineError::Elapsed` (504). Work the handler has handed to
//! another task is not dropped with it: that work must check the deadline
//! itself, as C's job in the tour does.
//!
//! # In code
//!
//! A server (B) that reads its budget from its caller, refuses what it
//! cannot finish, and calls C with what is left:
//!
//! ```
//! # #[cfg(feature = "http")] {
//! use std::convert::Infallible;
//! use core::time::Duration;
//! use axum::error_handling::HandleErrorLayer;
//! use axum::extract::Extension;
//! use axum::http::{Request, StatusCode};
//! use axum::routing::get;
//! use axum::Router;
//! use tower::{Service, ServiceBuilder, ServiceExt, Layer};
//! use watertight::clock::TokioClock;
//! use watertight::deadline::Deadline;
//! use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer, OutboundDeadlineLayer};
//!
//! async fn answer(e: InboundDeadlineError<Infallible>) -> StatusCode {
//!     match e {
//!         InboundDeadlineError::Malformed(_) => StatusCode::BAD_REQUEST,
//!         InboundDeadlineError::Refused { .. } => StatusCode::SERVICE_UNAVAILABLE,
//!         _ => StatusCode::GATEWAY_TIMEOUT,
//!     }
//! }
//!
//! // The client B calls C with: here a stand-in that shows the header it
//! // was given; in a service, reqwest (`reqwest::Request::try_from` of the
//! // `http::Request`, then `Client::execute`), hyper's client or a tonic
//! // channel.
//! let to_c = OutboundDeadlineLayer::<TokioClock>::new(Duration::from_millis(10)).layer(
//!     tower::service_fn(|req: Request<String>| async move {
//!         let sent = req.headers()["x-request-timeout-ms"].to_str().unwrap().to_owned();
//!         Ok::<_, Infallible>(sent)
//!     }),
//! );
//!
//! let quote = move |Extension(deadline): Extension<Deadline<TokioClock>>| {
//!     let to_c = to_c.clone();
//!     async move {
//!         let call = Request::builder().uri("http://c.internal/price").extension(deadline);
//!         match to_c.oneshot(call.body(String::new()).unwrap()).await {
//!             Ok(sent) => (StatusCode::OK, format!("C was given {sent} ms")),
//!             Err(_) => (StatusCode::GATEWAY_TIMEOUT, String::new()),
//!         }
//!     }
//! };
//! let mut app = Router::new().route("/quote", get(quote)).route_layer(
//!     ServiceBuilder::new()
//!         .layer(HandleErrorLayer::new(answer))
//!         .layer(InboundDeadlineLayer::new(TokioClock, Duration::from_secs(2)).min_cost(Duration::from_millis(20))),
//! );
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let ask = |ms: &str| {
//!     Request::builder().uri("/quote").header("x-request-timeout-ms", ms).body(axum::body::Body::empty()).unwrap()
//! };
//! let ok = app.call(ask("300")).await.unwrap();
//! assert_eq!(ok.status(), StatusCode::OK);
//! let body = axum::body::to_bytes(ok.into_body(), 1024).await.unwrap();
//! let given: u64 = std::str::from_utf8(&body).unwrap()
//!     .trim_start_matches("C was given ").trim_end_matches(" ms").parse().unwrap();
//! assert!(given <= 290 && given > 250, "{given}"); // 300, less the margin and B's own time
//!
//! // 5 ms left, the cheapest answer takes 20: refused, the handler not called.
//! assert_eq!(app.call(ask("5")).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(app.call(ask("soon")).await.unwrap().status(), StatusCode::BAD_REQUEST);
//! # });
//! # }
//! ```
//!
//! For tonic, the same two layers with `BudgetHeader::grpc_timeout()` —
//! the server's on `Server::builder().layer(…)`, the client's around the
//! `Channel` — map the errors to `Status::deadline_exceeded` (and
//! `invalid_argument` for `Malformed`). The layers take any
//! `http::Request<B>`, which is what tonic serves and sends; they are
//! tested here with axum and reqwest, not with tonic itself.
//!
//! # Extensions, not a task-local
//!
//! The outbound layer reads the deadline from the request it sends, put
//! there by the code that makes the call, rather than from a task-local
//! set by the inbound layer: it needs no runtime's task-locals (a
//! task-local does not follow work into a spawned task anyway), it is
//! visible where the call is made, and a handler that calls two systems
//! can give each a [`child`](crate::deadline::Deadline::child) of its own.
//! A request sent without one passes through untouched.
//!
//! # The retries count
//!
//! Finagle sends, beside the deadline, how many times the request has
//! already been retried, so that a downstream does not retry what is
//! already a retry (retries multiply along a call chain: 3 tries at each
//! of 3 hops is 27 calls at the bottom). Carrying a number in a header is
//! simple; it is not done here because carrying it alone changes nothing:
//! the retrying code (`Policy::call_idempotent` and the idempotent tower
//! layer) would have to read it and skip its retries, a change to the
//! retry policy's rules that belongs with them, not with the wire. The
//! retry budget ([`retry`](crate::retry)) already bounds a storm per
//! process.
//!
//! # What it costs
//!
//! Both layers' own work is about 0.85 µs a request (outbound 0.55,
//! inbound 0.3, net of building the request): 1.9 % of an empty axum
//! handler's 45 µs round trip on loopback, measured in the same run
//! (`benches/deadline_http.rs`; [the table](super::benchmarks#deadlines-across-the-wire)).
//! Round trips with and without the layers differ by less than their own
//! noise on a shared machine.
