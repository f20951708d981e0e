//! Act 8: a timed-out call retried once, and the retry budget stopping a
//! storm.

use super::*;

/// Search: each request reports its query on arrival; the first `hang`
/// requests never get an answer, and while `down` every request is a 503.
#[derive(Clone)]
struct SearchGate {
    arrivals: mpsc::UnboundedSender<String>,
    hang: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

async fn search(
    State(gate): State<SearchGate>,
    Path(q): Path<String>,
) -> Result<String, StatusCode> {
    gate.arrivals.send(q.clone()).expect("test is listening");
    if gate.down.load(SeqCst) {
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    if gate
        .hang
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        std::future::pending::<()>().await;
    }
    Ok(format!(r#"{{"q":"{q}","results":3}}"#))
}

/// A 5xx is an error, so that the default classifier retries it.
async fn get_search(client: reqwest::Client, url: String) -> Result<String, u16> {
    let response = client.get(&url).send().await.map_err(|_| 0u16)?;
    if response.status().is_server_error() {
        return Err(response.status().as_u16());
    }
    response.text().await.map_err(|_| 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_retried_once_and_the_budget_stops_a_storm() {
    tokio::time::timeout(HANG_GUARD, async {
        let (tx, mut arrivals) = mpsc::unbounded_channel();
        let gate = SearchGate {
            arrivals: tx,
            hang: Arc::new(AtomicUsize::new(1)),
            down: Arc::new(AtomicBool::new(false)),
        };
        let app = Router::new()
            .route("/search/{q}", get(search))
            .with_state(gate.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        // As the tour's: 300 ms per call, the default retries (2 attempts,
        // a budget of 10 tokens, 10 %), a breaker that judges after 50.
        let breaker = BreakerConfig::builder()
            .window_size(50)
            .minimum_calls(50)
            .build()
            .unwrap();
        let config = PolicyConfig::builder(4)
            .call_timeout(PRICING_TIMEOUT)
            .breaker(breaker)
            .retry(watertight::retry::RetryConfig::builder().seed(8))
            .build()
            .unwrap();
        let search: Policy<TokioClock> = Policy::new("search", config, TokioClock).unwrap();

        // The first request hangs; the call timeout cuts it; the retry answers.
        let url = format!("{base}/search/boots");
        let request = Deadline::after(TokioClock, BUDGET);
        let r = search
            .call_idempotent(|| get_search(client.clone(), url.clone()))
            .within(&request)
            .await;
        assert_eq!(r.unwrap(), r#"{"q":"boots","results":3}"#);
        assert_eq!(arrivals.recv().await.unwrap(), "boots");
        assert_eq!(arrivals.recv().await.unwrap(), "boots");
        let m = search.retry_metrics();
        assert_eq!(
            (m.after_failure, m.after_timeout, m.budget_exhausted),
            (0, 1, 0)
        );
        let b = search.breaker().metrics();
        assert_eq!(
            (b.calls, b.failed_calls),
            (2, 1),
            "the timeout was a failure"
        );

        // Down: 30 calls, one after another. The budget (9.1 tokens now)
        // lets a failed call retry while more than 5 are left after its
        // failure took one: the first two calls' (each taking two tokens),
        // then none.
        gate.down.store(true, SeqCst);
        for i in 0..30 {
            let url = format!("{base}/search/q{i}");
            let request = Deadline::after(TokioClock, BUDGET);
            let r = search
                .call_idempotent(|| get_search(client.clone(), url.clone()))
                .within(&request)
                .await;
            assert_eq!(r.unwrap_err().into_inner(), Some(503));
        }
        let mut seen = Vec::new();
        while let Ok(q) = arrivals.try_recv() {
            seen.push(q);
        }
        let expected: Vec<String> = ["q0", "q0", "q1", "q1"]
            .into_iter()
            .map(str::to_owned)
            .chain((2..30).map(|i| format!("q{i}")))
            .collect();
        assert_eq!(seen, expected, "the requests that reached search, in order");
        let m = search.retry_metrics();
        assert_eq!(
            (m.after_failure, m.after_timeout, m.budget_exhausted),
            (2, 1, 28)
        );
        assert_eq!(search.retry_budget().tokens(), 0.0);
        let b = search.breaker().metrics();
        assert_eq!((b.state, b.calls, b.failed_calls), (Closed, 34, 33));
        assert_eq!(search.bulkhead().metrics().in_flight, 0);
    })
    .await
    .expect("test hung");
}
