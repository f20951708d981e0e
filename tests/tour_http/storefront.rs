//! Act 5: a storefront calling stock and pricing over HTTP, each through its
//! own policy, inside a request budget.

use super::*;

/// Pricing's open duration: longer than any test, never waited for.
const PRICING_OPEN: Duration = Duration::from_secs(60);

/// One downstream system: requests that reached it, and (pricing) a switch
/// that makes it hang.
#[derive(Default)]
struct Backend {
    hits: AtomicUsize,
    hang: AtomicBool,
}

/// The two systems and the arrivals of pricing's requests.
struct Backends {
    stock: Backend,
    pricing: Backend,
    /// Each pricing request reports its SKU here on arrival.
    arrivals: mpsc::UnboundedSender<String>,
}

async fn stock(State(b): State<Arc<Backends>>, Path(_sku): Path<String>) -> &'static str {
    b.stock.hits.fetch_add(1, SeqCst);
    r#"{"in_stock":42}"#
}

async fn pricing(State(b): State<Arc<Backends>>, Path(sku): Path<String>) -> &'static str {
    b.pricing.hits.fetch_add(1, SeqCst);
    b.arrivals.send(sku).expect("test is listening");
    if b.pricing.hang.load(SeqCst) {
        std::future::pending::<()>().await;
    }
    r#"{"price_cents":1299}"#
}

struct Storefront {
    client: reqwest::Client,
    base: String,
    budget: Duration,
    stock: Policy<TokioClock, 8>,
    pricing: Policy<TokioClock, 8>,
}

/// The tour's stock policy, its call timeout the whole budget: it answers at
/// once, and these tests never let it time out.
fn stock_policy() -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(8)
        .minimum_calls(4)
        .build()
        .unwrap();
    PolicyConfig::builder(8)
        .max_wait(Duration::from_millis(100))
        .call_timeout(BUDGET)
        .breaker(breaker)
        .build()
        .unwrap()
}

/// The tour's pricing policy: opens once 2 of its last 4 calls failed.
fn pricing_policy(call_timeout: Duration) -> PolicyConfig {
    let breaker = BreakerConfig::builder()
        .window_size(4)
        .minimum_calls(4)
        .failure_rate_threshold(50.0)
        .open_duration(PRICING_OPEN)
        .build()
        .unwrap();
    PolicyConfig::builder(4)
        .max_wait(Duration::from_millis(50))
        .call_timeout(call_timeout)
        .breaker(breaker)
        .build()
        .unwrap()
}

type Reply = Result<(u16, String), reqwest::Error>;

async fn get_body(client: reqwest::Client, url: String) -> Reply {
    let response = client.get(&url).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

fn classify_reply(reply: &Reply) -> Outcome {
    match reply {
        Ok((status, _)) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// One system's part of an answer as JSON (its data, or why not and when to
/// retry), and its retry hint.
async fn fetch(
    client: &reqwest::Client,
    policy: &Policy<TokioClock, 8>,
    budget: &Deadline<TokioClock>,
    url: String,
) -> Result<String, (String, Option<Duration>)> {
    let call = || get_body(client.clone(), url);
    match policy.call_within_with(budget, call, classify_reply).await {
        Ok((200, body)) => Ok(body),
        Ok((status, _)) => Err((format!(r#"{{"unavailable":"status {status}"}}"#), None)),
        Err(e) => {
            let why = match e.kind() {
                ErrorKind::BulkheadFull | ErrorKind::BulkheadClosed => "busy",
                ErrorKind::CircuitOpen(_) => "circuit open",
                ErrorKind::DeadlineExceeded => "timed out",
                _ => "no answer",
            };
            let json = match e.retry_after() {
                Some(h) => format!(
                    r#"{{"unavailable":"{why}","retry_after_ms":{}}}"#,
                    h.as_millis()
                ),
                None => format!(r#"{{"unavailable":"{why}"}}"#),
            };
            Err((json, e.retry_after()))
        }
    }
}

fn part(r: &Result<String, (String, Option<Duration>)>) -> &str {
    match r {
        Ok(body) | Err((body, _)) => body,
    }
}

type Page = (StatusCode, HeaderMap, String);

/// A 503 with `Retry-After` (whole seconds, rounded up) when a hint was given.
fn unavailable(hint: Option<Duration>, body: String) -> Page {
    let mut headers = HeaderMap::new();
    if let Some(hint) = hint {
        let secs = hint.as_secs() + u64::from(hint.subsec_nanos() > 0);
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    (StatusCode::SERVICE_UNAVAILABLE, headers, body)
}

/// As the tour's: stock and pricing at once, inside one budget; a missing
/// price is a partial answer.
async fn product(State(f): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let budget = Deadline::after(TokioClock, f.budget);
    let (stock, price) = tokio::join!(
        fetch(
            &f.client,
            &f.stock,
            &budget,
            format!("{}/stock/{sku}", f.base)
        ),
        fetch(
            &f.client,
            &f.pricing,
            &budget,
            format!("{}/pricing/{sku}", f.base)
        ),
    );
    let body = format!(
        r#"{{"sku":"{sku}","stock":{},"price":{}}}"#,
        part(&stock),
        part(&price)
    );
    match (stock, price) {
        (Err((_, a)), Err((_, b))) => unavailable(a.max(b), body),
        _ => (StatusCode::OK, HeaderMap::new(), body),
    }
}

/// As the tour's: pricing first, then stock with what is left of the budget;
/// without a price, a 503 at once and stock is not asked.
async fn checkout(State(f): State<Arc<Storefront>>, Path(sku): Path<String>) -> Page {
    let budget = Deadline::after(TokioClock, f.budget);
    let url = format!("{}/pricing/{sku}", f.base);
    let price = fetch(&f.client, &f.pricing, &budget, url).await;
    if let Err((json, hint)) = price {
        return unavailable(hint, format!(r#"{{"sku":"{sku}","price":{json}}}"#));
    }
    let url = format!("{}/stock/{sku}", f.base);
    let stock = fetch(&f.client, &f.stock, &budget, url).await;
    let body = format!(
        r#"{{"sku":"{sku}","price":{},"stock":{}}}"#,
        part(&price),
        part(&stock)
    );
    match stock {
        Ok(_) => (StatusCode::OK, HeaderMap::new(), body),
        Err((_, hint)) => unavailable(hint, body),
    }
}

struct Shop {
    base: String,
    client: reqwest::Client,
    backends: Arc<Backends>,
    front: Arc<Storefront>,
    arrivals: mpsc::UnboundedReceiver<String>,
}

impl Shop {
    /// GETs `path` of the storefront: status, `Retry-After`, body.
    async fn get(&self, path: &str) -> (u16, Option<String>, String) {
        let url = format!("{}{path}", self.base);
        let response = self.client.get(&url).send().await.unwrap();
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get(RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        (status, retry, response.text().await.unwrap())
    }

    fn hits(&self) -> (usize, usize) {
        let b = &self.backends;
        (b.stock.hits.load(SeqCst), b.pricing.hits.load(SeqCst))
    }
}

/// The storefront with a `budget` per request and pricing's `call_timeout`,
/// on a random free loopback port.
async fn start_shop(budget: Duration, pricing_timeout: Duration) -> Shop {
    let (tx, arrivals) = mpsc::unbounded_channel();
    let backends = Arc::new(Backends {
        stock: Backend::default(),
        pricing: Backend::default(),
        arrivals: tx,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let front = Arc::new(Storefront {
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
        base: base.clone(),
        budget,
        stock: Policy::new("stock", stock_policy(), TokioClock).unwrap(),
        pricing: Policy::new("pricing", pricing_policy(pricing_timeout), TokioClock).unwrap(),
    });
    let app = Router::new()
        .route("/stock/{sku}", get(stock))
        .route("/pricing/{sku}", get(pricing))
        .with_state(backends.clone())
        .merge(
            Router::new()
                .route("/product/{sku}", get(product))
                .route("/checkout/{sku}", get(checkout))
                .with_state(front.clone()),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Shop {
        base,
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
        backends,
        front,
        arrivals,
    }
}

/// What an answer was: every part there, some missing (and why), or none.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Class {
    Full,
    NoPrice(String),
    Unavailable(String),
}

/// Classifies a storefront answer by its status and its price part.
fn class(status: u16, body: &str) -> Class {
    let why = body
        .split_once(r#""price":{"unavailable":""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(why, _)| why.to_owned());
    match (status, why) {
        (200, None) if body.contains(r#""price":{"price_cents":1299}"#) => Class::Full,
        (200, Some(why)) if body.contains(r#""stock":{"in_stock":42}"#) => Class::NoPrice(why),
        (503, Some(why)) => Class::Unavailable(why),
        _ => panic!("unexpected answer {status}: {body}"),
    }
}

/// The `retry_after_ms` of a body's price part, if it has one.
fn retry_ms(body: &str) -> Option<u128> {
    let (_, rest) = body.split_once(r#""retry_after_ms":"#)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(digits.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pricing_hangs_pages_answer_without_a_price_and_its_breaker_stops_the_calls() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut shop = start_shop(BUDGET, PRICING_TIMEOUT).await;
        let pricing = shop.front.pricing.breaker();
        let mut classes = Vec::new();
        let mut hints = Vec::new();

        // Healthy: a page and a checkout, each with stock and a price.
        for path in ["/product/SKU-1", "/checkout/SKU-1"] {
            let (status, retry, body) = shop.get(path).await;
            assert_eq!(retry, None);
            classes.push(class(status, &body));
            assert_eq!(shop.arrivals.recv().await.unwrap(), "SKU-1");
        }
        assert_eq!(shop.hits(), (2, 2));

        // Pricing hangs: each call reaches it and is cut at pricing's call
        // timeout (inside the budget), a failure; the page answers without a
        // price. The second failure makes 2 of the last 4: the breaker opens.
        shop.backends.pricing.hang.store(true, SeqCst);
        for (i, sku) in ["SKU-2", "SKU-3"].into_iter().enumerate() {
            assert_eq!(pricing.state(), Closed, "before {sku}");
            let (status, retry, body) = shop.get(&format!("/product/{sku}")).await;
            assert_eq!(retry, None);
            assert_eq!(retry_ms(&body), None, "{body}");
            classes.push(class(status, &body));
            assert_eq!(shop.arrivals.recv().await.unwrap(), sku);
            assert_eq!(shop.hits(), (3 + i, 3 + i));
        }
        assert_eq!(pricing.state(), Open);
        let m = pricing.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (4, 2, 0));

        // Open: pages still answer, with stock and the breaker's retry hint
        // for the price; a checkout answers 503 with Retry-After and asks
        // neither system. No request reaches pricing.
        for path in [
            "/product/SKU-4",
            "/product/SKU-5",
            "/checkout/SKU-5",
            "/product/SKU-6",
        ] {
            let (status, retry, body) = shop.get(path).await;
            let hint = retry_ms(&body).unwrap_or_else(|| panic!("no retry hint: {body}"));
            assert!(hint <= PRICING_OPEN.as_millis(), "{body}");
            if status == 503 {
                let secs: u128 = retry.expect("Retry-After").parse().unwrap();
                assert_eq!(secs, hint.div_ceil(1000).max(1), "{body}");
                assert!(!body.contains("stock"), "{body}");
            } else {
                assert_eq!(retry, None);
            }
            hints.push(hint);
            classes.push(class(status, &body));
        }
        assert!(hints.windows(2).all(|w| w[0] >= w[1]), "{hints:?}");

        let no_price = |why: &str| Class::NoPrice(why.to_owned());
        assert_eq!(
            classes,
            [
                Class::Full,
                Class::Full,
                no_price("timed out"),
                no_price("timed out"),
                no_price("circuit open"),
                no_price("circuit open"),
                Class::Unavailable("circuit open".to_owned()),
                no_price("circuit open"),
            ]
        );
        // Pricing: the 4 requests before it opened, none after.
        assert_eq!(shop.hits().1, 4);
        assert!(shop.arrivals.try_recv().is_err());
        let m = pricing.metrics();
        assert_eq!(
            (m.state, m.calls, m.failed_calls, m.rejected),
            (Open, 4, 2, 4)
        );
        // Stock served every request that asked it: all 7 but the refused checkout.
        assert_eq!(shop.hits().0, 7);
        let s = shop.front.stock.breaker().metrics();
        assert_eq!((s.state, s.calls, s.failed_calls), (Closed, 7, 0));
        let b = shop.front.stock.bulkhead().metrics();
        assert_eq!((b.accepted, b.rejected(), b.in_flight), (7, 0, 0));
        let b = shop.front.pricing.bulkhead().metrics();
        assert_eq!((b.accepted, b.rejected(), b.in_flight), (8, 0, 0));
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_the_request_budget_is_not_a_failure_of_the_system() {
    tokio::time::timeout(HANG_GUARD, async {
        // Pricing's own timeout (10 s) is past the whole budget (300 ms): a
        // hanging pricing is cut by the budget, which is the caller running
        // out of time, not pricing failing — its breaker records nothing and
        // never opens, however many calls are cut.
        let budget = Duration::from_millis(300);
        let mut shop = start_shop(budget, Duration::from_secs(10)).await;
        shop.backends.pricing.hang.store(true, SeqCst);
        for i in 1..=5 {
            let sku = format!("SKU-{i}");
            let (_, _, body) = shop.get(&format!("/product/{sku}")).await;
            assert!(
                body.contains(r#""price":{"unavailable":"timed out"}"#),
                "{body}"
            );
            assert_eq!(shop.arrivals.recv().await.unwrap(), sku);
        }
        assert_eq!(shop.hits().1, 5, "every call reached pricing");
        let m = shop.front.pricing.breaker().metrics();
        assert_eq!(
            (m.state, m.calls, m.failed_calls, m.rejected),
            (Closed, 0, 0, 0)
        );
        assert_eq!(shop.front.pricing.bulkhead().metrics().in_flight, 0);
    })
    .await
    .expect("test hung");
}
