//! Outbound calls over a real HTTP client, one [`Policy`] per downstream
//! system, put where a ports-and-adapters (hexagonal) service puts them: on
//! the outbound adapter's public methods. The adapter is the protection
//! boundary — not the generated HTTP client under it, not the handler above
//! it — its public method runs the request through the system's policy, and
//! every refusal comes back as the port's own
//! `SystemUnavailable { system, retry_after }` error.
//!
//! Run: `cargo run --example outbound --features tokio`
//!
//! The program starts an axum server on `127.0.0.1` (a random free port,
//! loopback only) playing two systems, and calls it with `reqwest`:
//!
//! - `POST /payments/charge/{order}`: a payment API; `{order}` ending in
//!   `-declined` is answered 402. Its latency and a 503 switch are turned
//!   by the program as the story goes;
//! - `GET /inventory/{sku}`: healthy throughout; `unknown` is answered 404.
//!
//! Each adapter classifies the call's result for its breaker: a 5xx or no
//! answer at all (a transport error) is the system failing; any other
//! answer, 4xx included, is the system working (a declined card is not an
//! outage). The call's own errors keep their meaning (`Declined`,
//! `UnknownSku`, `Failed`); everything the policy refused — bulkhead full,
//! breaker open, call timeout — is `SystemUnavailable`, which a handler
//! turns into a 503 with `Retry-After` (when the breaker gives one) or a
//! fallback.
//!
//! The story, printed as a timeline (ms since start; the order of events is
//! the same every run, the milliseconds are measured):
//!
//! 1. both healthy: a charge, a declined charge, a stock query, an unknown SKU;
//! 2. payments slows to 200 ms: four charges at once against its 2 slots
//!    and 50 ms slot wait — two are charged, two are refused (bulkhead full);
//! 3. payments answers 503: charges fail until half of its breaker's last 4
//!    calls have failed, then are refused at once with a retry hint, and the
//!    server's count shows they never left the client; inventory is untouched;
//! 4. payments stops failing but hangs for 2 s: after the open wait, a probe
//!    runs out of its 300 ms call timeout (unavailable) and the breaker
//!    opens again;
//! 5. payments recovers: after the open wait, two probes pass, the breaker
//!    closes, charges go through.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use watertight::clock::TokioClock;
use watertight::{BreakerConfig, Outcome, Policy, PolicyConfig};

// ---------------------------------------------------------------- the server

/// The payment API's switches and its request count.
#[derive(Default)]
struct PaymentsServer {
    /// Answer every request 503 at once.
    failing: AtomicBool,
    /// Latency of an answer, in ms.
    delay_ms: AtomicU64,
    /// Requests that reached it.
    hits: AtomicUsize,
}

async fn charge(
    State(server): State<Arc<PaymentsServer>>,
    Path(order): Path<String>,
) -> (StatusCode, String) {
    server.hits.fetch_add(1, SeqCst);
    if server.failing.load(SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "acquirer down".to_owned());
    }
    tokio::time::sleep(Duration::from_millis(server.delay_ms.load(SeqCst))).await;
    if order.ends_with("-declined") {
        return (
            StatusCode::PAYMENT_REQUIRED,
            "insufficient funds".to_owned(),
        );
    }
    (StatusCode::OK, format!("pay-{order}"))
}

async fn inventory(Path(sku): Path<String>) -> (StatusCode, String) {
    tokio::time::sleep(Duration::from_millis(10)).await;
    if sku == "unknown" {
        return (StatusCode::NOT_FOUND, String::new());
    }
    (StatusCode::OK, "42".to_owned())
}

async fn start_server(payments: Arc<PaymentsServer>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    let app = Router::new()
        .route("/payments/charge/{order}", post(charge))
        .with_state(payments)
        .route("/inventory/{sku}", get(inventory));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("server") });
    base
}

// ---------------------------------------------------------------- HTTP calls

/// Why an HTTP call did not return a 2xx body.
#[derive(Debug)]
enum CallError {
    /// The system answered with this status and body.
    Status(reqwest::StatusCode, String),
    /// No answer: connection refused or reset, a broken body.
    Transport(reqwest::Error),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Status(status, _) => write!(f, "answered {status}"),
            CallError::Transport(e) => write!(f, "no answer: {e}"),
        }
    }
}

/// Sends the request; a 2xx body is `Ok`.
async fn send(request: reqwest::RequestBuilder) -> Result<String, CallError> {
    let response = request.send().await.map_err(CallError::Transport)?;
    let status = response.status();
    let body = response.text().await.map_err(CallError::Transport)?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(CallError::Status(status, body))
    }
}

/// For the breaker: a 5xx or no answer is the system failing; any other
/// answer, a 4xx included, is the system working.
fn classify(result: &Result<String, CallError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(CallError::Status(status, _)) if status.is_server_error() => Outcome::Failure,
        Err(CallError::Status(..)) => Outcome::Success,
        Err(CallError::Transport(_)) => Outcome::Failure,
    }
}

/// "System unavailable" as the ports spell it: whichever layer refused.
fn unavailable_text(system: &str, retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!("{system} unavailable, retry after {} ms", d.as_millis()),
        None => format!("{system} unavailable"),
    }
}

// ---------------------------------------------------------------- payments port

/// The payment port's errors: what the order service's handlers see.
#[derive(Debug)]
enum PaymentError {
    /// Not called, or no answer in time: bulkhead full, breaker open, call
    /// timeout. Answer 503 (with `Retry-After` when there is a hint) or
    /// queue the payment.
    SystemUnavailable {
        system: &'static str,
        retry_after: Option<Duration>,
    },
    /// The payment system said no.
    Declined(String),
    /// The payment system failed this call (a 5xx, or no answer).
    Failed(String),
}

impl fmt::Display for PaymentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaymentError::SystemUnavailable {
                system,
                retry_after,
            } => f.write_str(&unavailable_text(system, *retry_after)),
            PaymentError::Declined(why) => write!(f, "declined: {why}"),
            PaymentError::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// The outbound adapter for the payment system: its client and its own policy.
struct PaymentsAdapter {
    client: reqwest::Client,
    base: String,
    policy: Policy<TokioClock, 8>,
}

impl PaymentsAdapter {
    /// Charges `order`; returns the payment id.
    async fn charge(&self, order: &str) -> Result<String, PaymentError> {
        let request = self
            .client
            .post(format!("{}/payments/charge/{order}", self.base));
        match self.policy.call_with(|| send(request), classify).await {
            Ok(payment_id) => Ok(payment_id),
            Err(e) if e.is_unavailable() => Err(PaymentError::SystemUnavailable {
                system: e.system(),
                retry_after: e.retry_after(),
            }),
            Err(e) => Err(match e.into_inner() {
                Some(CallError::Status(reqwest::StatusCode::PAYMENT_REQUIRED, why)) => {
                    PaymentError::Declined(why)
                }
                Some(other) => PaymentError::Failed(other.to_string()),
                // Not reached: only a refusal carries no call error.
                None => PaymentError::Failed("refused".to_owned()),
            }),
        }
    }
}

// ---------------------------------------------------------------- inventory port

/// The inventory port's errors.
#[derive(Debug)]
enum InventoryError {
    /// Not called, or no answer in time.
    SystemUnavailable {
        system: &'static str,
        retry_after: Option<Duration>,
    },
    /// No such SKU.
    UnknownSku(String),
    /// The inventory system failed this call.
    Failed(String),
}

impl fmt::Display for InventoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InventoryError::SystemUnavailable {
                system,
                retry_after,
            } => f.write_str(&unavailable_text(system, *retry_after)),
            InventoryError::UnknownSku(sku) => write!(f, "unknown SKU {sku}"),
            InventoryError::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// The outbound adapter for the inventory system.
struct InventoryAdapter {
    client: reqwest::Client,
    base: String,
    policy: Policy<TokioClock, 8>,
}

impl InventoryAdapter {
    /// Units of `sku` in stock.
    async fn stock(&self, sku: &str) -> Result<u32, InventoryError> {
        let request = self.client.get(format!("{}/inventory/{sku}", self.base));
        match self.policy.call_with(|| send(request), classify).await {
            Ok(body) => body
                .trim()
                .parse()
                .map_err(|_| InventoryError::Failed(format!("bad body {body:?}"))),
            Err(e) if e.is_unavailable() => Err(InventoryError::SystemUnavailable {
                system: e.system(),
                retry_after: e.retry_after(),
            }),
            Err(e) => Err(match e.into_inner() {
                Some(CallError::Status(reqwest::StatusCode::NOT_FOUND, _)) => {
                    InventoryError::UnknownSku(sku.to_owned())
                }
                Some(other) => InventoryError::Failed(other.to_string()),
                None => InventoryError::Failed("refused".to_owned()),
            }),
        }
    }
}

// ---------------------------------------------------------------- policies

/// How long a breaker stays open (the default 30 s, scaled down).
const OPEN: Duration = Duration::from_secs(1);

/// 2 calls at once (a pool of 3 × 0.8), a slot within 50 ms, 300 ms per
/// call; the breaker opens once half of its last 4 calls failed, and lets 2
/// probes through.
fn payments_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN)
        .half_open_calls(2)
        .build()
        .expect("payments breaker");
    PolicyConfig::for_pool(3)
        .max_wait(Duration::from_millis(50))
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .build()
        .expect("payments policy")
}

fn inventory_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(4)
        .open_duration(OPEN)
        .build()
        .expect("inventory breaker");
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(Duration::from_millis(300))
        .breaker(breaker)
        .build()
        .expect("inventory policy")
}

// ---------------------------------------------------------------- the story

struct World {
    start: Instant,
    server: Arc<PaymentsServer>,
    payments: PaymentsAdapter,
    inventory: InventoryAdapter,
}

impl World {
    fn say(&self, what: impl fmt::Display) {
        println!("{:>6} ms  {what}", self.start.elapsed().as_millis());
    }

    async fn charge(&self, order: &str) -> Result<String, PaymentError> {
        let result = self.payments.charge(order).await;
        self.say(format_args!(
            "payments.charge({order}) -> {}   [breaker {:?}, server saw {}]",
            show(&result),
            self.payments.policy.breaker().state(),
            self.server.hits.load(SeqCst)
        ));
        result
    }

    async fn stock(&self, sku: &str) {
        let result = self.inventory.stock(sku).await;
        self.say(format_args!(
            "inventory.stock({sku}) -> {}   [breaker {:?}]",
            show(&result),
            self.inventory.policy.breaker().state()
        ));
    }
}

fn show<T: fmt::Display, E: fmt::Display>(result: &Result<T, E>) -> String {
    match result {
        Ok(v) => format!("Ok({v})"),
        Err(e) => format!("Err({e})"),
    }
}

fn retry_after(result: &Result<String, PaymentError>) -> Option<Duration> {
    match result {
        Err(PaymentError::SystemUnavailable { retry_after, .. }) => *retry_after,
        _ => None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = Arc::new(PaymentsServer::default());
    server.delay_ms.store(20, SeqCst);
    let base = start_server(server.clone()).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    let world = World {
        start: Instant::now(),
        server: server.clone(),
        payments: PaymentsAdapter {
            client: client.clone(),
            base: base.clone(),
            policy: Policy::new("payments", payments_policy(), TokioClock).expect("policy"),
        },
        inventory: InventoryAdapter {
            client,
            base,
            policy: Policy::new("inventory", inventory_policy(), TokioClock).expect("policy"),
        },
    };

    println!("1. both systems healthy");
    let _ = world.charge("order-1").await;
    let _ = world.charge("order-2-declined").await;
    world.stock("sku-1").await;
    world.stock("unknown").await;

    println!("\n2. payments slows to 200 ms: four charges at once, 2 slots, 50 ms slot wait");
    server.delay_ms.store(200, SeqCst);
    let (a, b, c, d) = tokio::join!(
        world.charge("order-3"),
        world.charge("order-4"),
        world.charge("order-5"),
        world.charge("order-6"),
    );
    let results = [a, b, c, d];
    let refused = results.iter().filter(|r| r.is_err()).count();
    world.say(format_args!(
        "{} charged, {refused} refused as unavailable",
        results.len() - refused
    ));
    world.stock("sku-1").await;

    println!("\n3. payments answers 503");
    server.delay_ms.store(20, SeqCst);
    server.failing.store(true, SeqCst);
    let mut hint = None;
    for i in 7..13 {
        let result = world.charge(&format!("order-{i}")).await;
        hint = retry_after(&result).or(hint);
        world.stock("sku-1").await;
    }

    println!("\n4. payments stops failing but hangs for 2 s (call timeout 300 ms)");
    server.failing.store(false, SeqCst);
    server.delay_ms.store(2000, SeqCst);
    let wait = hint.unwrap_or(OPEN);
    world.say(format_args!(
        "waiting {} ms for the breaker's open wait",
        wait.as_millis()
    ));
    tokio::time::sleep(wait).await;
    let _ = world.charge("order-13").await;
    let result = world.charge("order-14").await;

    println!("\n5. payments recovers");
    server.delay_ms.store(20, SeqCst);
    let wait = retry_after(&result).unwrap_or(OPEN);
    world.say(format_args!(
        "waiting {} ms for the breaker's open wait",
        wait.as_millis()
    ));
    tokio::time::sleep(wait).await;
    for i in 15..18 {
        let _ = world.charge(&format!("order-{i}")).await;
    }
    world.stock("sku-1").await;
}
