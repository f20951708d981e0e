//! Act 4: a circuit breaker in front of a shipping endpoint that answers 503.

use super::*;

/// The breaker tests' open duration: short, waited for in real time.
const OPEN: Duration = Duration::from_millis(200);

/// What the client makes of one HTTP call: the status, or no answer at all.
type Answer = Result<u16, reqwest::Error>;

/// The tour's classifier: a 5xx or no answer is a failure, any other status
/// (a 404 too) is an answer.
fn classify(answer: &Answer) -> Outcome {
    match answer {
        Ok(status) if *status >= 500 => Outcome::Failure,
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// One GET, its body read to the end.
async fn get_status(client: reqwest::Client, url: String) -> Answer {
    let response = client.get(&url).send().await?;
    let status = response.status().as_u16();
    response.bytes().await?;
    Ok(status)
}

/// State changes in the order the listener was told of them.
type Transitions = Arc<Mutex<Vec<(BreakerState, BreakerState)>>>;

fn seen(transitions: &Transitions) -> Vec<(BreakerState, BreakerState)> {
    transitions.lock().unwrap().clone()
}

/// The tour's breaker (window 10, minimum 5 calls, failure rate 50 %, 3
/// probes), open for `OPEN`, with a listener that logs every transition.
fn shipping_breaker() -> (
    Arc<CircuitBreaker<TokioClock, 10, impl OnTransition + Send + Sync + 'static>>,
    Transitions,
) {
    let config = BreakerConfig::builder()
        .window_size(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_duration(OPEN)
        .half_open_calls(3)
        .build()
        .unwrap();
    let transitions = Transitions::default();
    let log = transitions.clone();
    let breaker =
        CircuitBreaker::with_listener("shipping", config, TokioClock, move |t: &Transition| {
            log.lock().unwrap().push((t.from, t.to))
        });
    (Arc::new(breaker), transitions)
}

/// One GET of `url` through `breaker`, classified as the tour does.
async fn call<H: OnTransition>(
    breaker: &CircuitBreaker<TokioClock, 10, H>,
    client: &reqwest::Client,
    url: &str,
) -> Result<u16, CallError<reqwest::Error>> {
    let request = get_status(client.clone(), url.to_owned());
    breaker.call_with(request, classify).await
}

/// The refusal of a call the breaker did not let through.
fn refusal(result: Result<u16, CallError<reqwest::Error>>) -> Rejection {
    match result {
        Err(CallError::Rejected(why)) => why,
        Ok(status) => panic!("expected a refusal, the call ran: {status}"),
        Err(CallError::Failed(e)) => panic!("expected a refusal, the call ran: {e}"),
    }
}

/// The retry hint of a refusal while open.
fn open_hint(why: Rejection) -> Duration {
    match why {
        Rejection::Open { retry_after } => retry_after,
        other => panic!("expected Rejection::Open, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opens_on_503s_refuses_without_a_request_and_closes_after_probes() {
    tokio::time::timeout(HANG_GUARD, async {
        let mut server = start().await;
        let (breaker, transitions) = shipping_breaker();
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);

        // Shipping goes down: the first 5 calls (the minimum) reach it, get
        // a 503 each, which is passed back as the call's own result; the 5th
        // outcome trips the breaker.
        server.down.store(true, SeqCst);
        for i in 1..=5 {
            assert_eq!(breaker.state(), Closed, "before call {i}");
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
            assert_eq!(server.hits(), i);
        }
        assert_eq!(breaker.state(), Open);
        assert_eq!(seen(&transitions), [(Closed, Open)]);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (5, 5, 0));

        // Open: refused at once, no request made, each with a hint no longer
        // than the open duration and not growing (refusals do not extend it).
        let mut hints = Vec::new();
        for _ in 0..3 {
            let why = refusal(call(&breaker, &server.client, &url).await);
            hints.push(open_hint(why));
        }
        assert_eq!(server.hits(), 5, "a refused call reached the server");
        assert!(hints.iter().all(|h| *h <= OPEN), "{hints:?}");
        assert!(hints.windows(2).all(|w| w[0] >= w[1]), "{hints:?}");
        assert_eq!(breaker.metrics().rejected, 3);

        // The server recovers (its gate stays shut for now); the client waits
        // as the last hint said. `state()` then says half-open, changing
        // nothing: no transition has been made yet.
        server.down.store(false, SeqCst);
        tokio::time::sleep(*hints.last().unwrap()).await;
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(seen(&transitions), [(Closed, Open)]);

        // Three probes go through and wait at the server's gate; the first
        // one's admission began the half-open episode.
        let mut probes = Vec::new();
        for _ in 0..3 {
            let (breaker, client, url) = (breaker.clone(), server.client.clone(), url.clone());
            probes.push(tokio::spawn(
                async move { call(&breaker, &client, &url).await },
            ));
        }
        for _ in 0..3 {
            server.arrivals.recv().await.unwrap();
        }
        assert_eq!(server.hits(), 8);
        assert_eq!(seen(&transitions), [(Closed, Open), (Open, HalfOpen)]);

        // A fourth call while the three are out: refused at once, no hint.
        let why = refusal(call(&breaker, &server.client, &url).await);
        assert_eq!(why, Rejection::ProbesBusy);
        assert_eq!(why.retry_after(), None);
        assert_eq!(server.hits(), 8);
        assert_eq!(breaker.state(), HalfOpen);

        // The gate opens: three good probes close the breaker.
        server.open.add_permits(4);
        for probe in probes {
            assert_eq!(probe.await.unwrap().unwrap(), 200);
        }
        assert_eq!(
            seen(&transitions),
            [(Closed, Open), (Open, HalfOpen), (HalfOpen, Closed)]
        );
        assert_eq!(breaker.state(), Closed);
        assert_eq!(breaker.metrics().calls, 0, "closing starts an empty window");

        // Closed again: calls pass and fill the new window.
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 200);
        assert_eq!(server.hits(), 9);
        let m = breaker.metrics();
        assert_eq!(m.state, Closed);
        assert_eq!((m.calls, m.failed_calls), (1, 0));
        assert_eq!((m.rejected, m.stale), (4, 0));
        assert_eq!(seen(&transitions).len(), 3);
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_probe_reopens_the_breaker_for_a_new_open_wait() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = start().await;
        let (breaker, transitions) = shipping_breaker();
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);

        server.down.store(true, SeqCst);
        for _ in 0..5 {
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        }
        assert_eq!(breaker.state(), Open);
        let hint = open_hint(refusal(call(&breaker, &server.client, &url).await));
        assert_eq!(server.hits(), 5);

        // The wait is over but the server is still down: the probe gets a
        // 503 and the breaker reopens. It reads Open at once: a new wait
        // began (the old one is over, so it would read HalfOpen).
        tokio::time::sleep(hint).await;
        assert_eq!(breaker.state(), HalfOpen);
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        assert_eq!(server.hits(), 6);
        assert_eq!(breaker.state(), Open);
        assert_eq!(
            seen(&transitions),
            [(Closed, Open), (Open, HalfOpen), (HalfOpen, Open)]
        );
        let hint = open_hint(refusal(call(&breaker, &server.client, &url).await));
        assert!(hint <= OPEN, "{hint:?}");
        assert_eq!(server.hits(), 6);

        // Recovered, and after the new wait: three probes, one at a time, close it.
        server.down.store(false, SeqCst);
        server.open.add_permits(3);
        tokio::time::sleep(hint).await;
        for i in 0..3 {
            assert_eq!(breaker.state(), HalfOpen, "before probe {i}");
            assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 200);
        }
        assert_eq!(breaker.state(), Closed);
        assert_eq!(server.hits(), 9);
        assert_eq!(
            seen(&transitions),
            [
                (Closed, Open),
                (Open, HalfOpen),
                (HalfOpen, Open),
                (Open, HalfOpen),
                (HalfOpen, Closed)
            ]
        );
        let m = breaker.metrics();
        assert_eq!((m.rejected, m.stale), (2, 0));
    })
    .await
    .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_classifier_makes_a_404_an_answer_and_a_503_or_no_answer_a_failure() {
    tokio::time::timeout(HANG_GUARD, async {
        let server = start().await;
        let (breaker, transitions) = shipping_breaker();

        // A 404 is an answer: passed back as it is, recorded as a success.
        let missing = format!("{}/no-such-route", server.base);
        assert_eq!(call(&breaker, &server.client, &missing).await.unwrap(), 404);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls), (1, 0));

        // A 503 is a failure, still passed back as the call's own result.
        server.down.store(true, SeqCst);
        let url = format!("{}/shipping-rate?zip_code=94107", server.base);
        assert_eq!(call(&breaker, &server.client, &url).await.unwrap(), 503);
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls), (2, 1));

        // No answer at all (nothing listens on the port): the call's error,
        // recorded as a failure.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let nobody = format!("http://{}/shipping-rate", closed.local_addr().unwrap());
        drop(closed);
        match call(&breaker, &server.client, &nobody).await {
            Err(CallError::Failed(e)) => assert!(e.is_connect(), "{e:?}"),
            other => panic!("expected the transport error, got {other:?}"),
        }
        let m = breaker.metrics();
        assert_eq!((m.calls, m.failed_calls, m.rejected), (3, 2, 0));
        assert_eq!(
            breaker.state(),
            Closed,
            "3 outcomes: below the minimum of 5"
        );
        assert!(seen(&transitions).is_empty());
    })
    .await
    .expect("test hung");
}
