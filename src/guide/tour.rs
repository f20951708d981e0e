//! The tour: thirteen acts on real loopback HTTP, and what each one shows.
//!
//! # Run it
//!
//! ```sh
//! # the tour: a slow dependency starving a fast one and a bulkhead per system, a circuit breaker, a request budget, tower load shedding, Prometheus metrics, retries within the budget, a rate limit both ways, classes of callers with guaranteed shares, hedged requests, a budget that travels across three services, and a page served stale with its age while a fault injector fails the system behind it, on real loopback HTTP (axum + reqwest); about 14 s, after a first build of under 90 s
//! cargo run --example tour --features tokio,tower,metrics,http,chaos
//! # ... and act 7, one limit across processes on Redis (rustc 1.88, redis-server on PATH)
//! cargo run --example tour --features tokio,tower,metrics,http,chaos,redis
//! ```
//!
//! `cargo run --example bulkhead --features tokio` and
//! `cargo run --example breaker --features tokio` are shorter examples without
//! HTTP; every integration has one of its own ([features](super::features#examples)).
//!
//! The repository is a cargo workspace of two packages, both default members,
//! so these commands and the test command (`cargo test --all-features`) work
//! from its root: the library, `watertight`, with its
//! tests (`tests/`) and benches (`benches/`); and its examples (`examples/`,
//! the unpublished package `watertight-examples`), which depend on only what
//! they use. Running the tour therefore builds tokio, axum, reqwest, tower and
//! a Prometheus exporter, and not what the tests and benches need (criterion,
//! the peer breakers, proptest, smol, async-std, embassy's executor).
//!
//! The tour's code is `examples/tour.rs`, which runs the acts in order, and
//! a module per act or group of acts under `examples/tour/`: the server of
//! acts 1–6 (`storefront.rs`), `bulkheads.rs` (acts 1–3), `breaker.rs`,
//! `budget.rs`, `integrations.rs` (acts 4, 5, 6), `retries.rs`, `rate.rs`,
//! `partitions.rs`, `hedging.rs`, `hops.rs`, `degrade.rs` (acts 8 to 13);
//! act 7 is the `global_limit` example's `examples/global_limit/demo.rs`.
//!
//! The tour's first build from a fresh clone (crates already downloaded)
//! compiles 116 crates: 78–85 s on this 2-core machine while two other builds
//! ran beside it (load average 5–7), about 66 s of CPU time. Before the
//! examples had a package of their own it compiled 231 crates: 126–153 s
//! under the same load (about 117 s of CPU), 57–65 s with the machine nearly
//! idle (load average 0–2). The test command still builds every
//! dev-dependency of the library, criterion and the peers included.
//!
//! # What the tour shows
//!
//! Acts 1–3 are the classic demonstration of the bulkhead pattern (named, in
//! Microsoft's Azure Architecture Center, after the sectioned partitions of a
//! ship's hull: if the hull is breached, only the damaged section floods). A
//! checkout that needs only a quick inventory lookup hangs because a degraded
//! shipping-rate API holds every worker of a shared pool. The slow dependency
//! (`/shipping-rate`, 400 ms: the usual 2 s scaled down five times) and the
//! fast one (`/inventory/{sku}`, 50 ms) are each called over real HTTP;
//! latencies are what the caller observes, from submission:
//!
//! ```text
//! == Act 1: one shared limit — a fast dependency starves behind a slow one
//!   system     calls   ok rejected   caller-observed latency, ms from submission (sorted)
//!   shipping       8    8        0    403   404   404   404   806   807   807   807
//!   inventory      2    2        0    860   860
//!   -> a 50 ms lookup took 860 ms (2.2 slow calls, 17x its own time): it queued behind all 8 shipping calls
//!
//! == Act 2: one bulkhead per system — the slow one floods only its own compartment
//!   shipping       8    8        0    403   404   404   405   806   807   807   807
//!   inventory      2    2        0     53    54
//!   -> inventory back to 54 ms, its own time; shipping as slow as ever (807 ms): slowness contained, not cured
//!
//! == Act 3: a flood with a short max wait — the overflow is turned away fast
//!   shipping      10    3        7    201*  202*  202*  202*  202*  202*  202*  402   403   403
//!   inventory      4    4        0     52    52    53    53
//!   -> shipping: 3 ok, 7 turned away by 202 ms (max wait 200 ms); inventory: 4 ok by 53 ms
//! ```
//!
//! Act 4 is the circuit breaker: `/shipping-rate` starts answering 503, and the
//! client calls it through a `CircuitBreaker` (window 10, minimum 5 calls, 50 %,
//! open 500 ms — the default 30 s scaled down — 3 probes) whose classifier counts
//! a 5xx or no answer as a failure. The timeline (ms since the act began):
//!
//! ```text
//! == Act 4: a circuit breaker — shipping goes down, the calls stop, it comes back
//!   +   0 ms  server: /shipping-rate goes down, answers 503 at once
//!   +   1 ms  call 1 -> 503 (failure)
//!   ...
//!   +   8 ms  call 5 -> 503 (failure)
//!   +   8 ms  breaker CLOSED -> OPEN
//!             (window: 5 failures of 5 calls = 100 %, threshold 50 %)
//!   +   8 ms  call 6 refused: open, retry after 499.98 ms
//!   +   8 ms  call 7 refused: open, retry after 499.98 ms
//!   +   8 ms  call 8 refused: open, retry after 499.97 ms
//!   +   8 ms  server: 5 requests so far; the 3 refused calls never reached it
//!   +   8 ms  server: /shipping-rate is back, healthy (50 ms)
//!   +   8 ms  client sleeps 499.97 ms, as the last refusal said
//!   + 513 ms  state() says HALF_OPEN: the open wait is over, the next call is a probe
//!   + 513 ms  breaker OPEN -> HALF_OPEN
//!   + 570 ms  call 9 (probe) -> 200 (success)
//!   + 622 ms  call 10 (probe) -> 200 (success)
//!   + 678 ms  call 11 (probe) -> 200 (success)
//!   + 678 ms  breaker HALF_OPEN -> CLOSED
//!   + 730 ms  call 12 -> 200 (success)
//! ```
//!
//! **Act 5: a request budget over two systems.** `GET /product/{sku}` and
//! `GET /checkout/{sku}` each have 1.5 s (`Deadline::after(TokioClock, 1500 ms)`)
//! and call `/stock` and `/pricing` over HTTP, each through its own `Policy`
//! (pricing: 4 at once, 50 ms slot wait, 300 ms call timeout, breaker window 4,
//! minimum 4, 50 %, open 1 s). Pricing degrades to 3 s answers. Pages are
//! still answered in about 300 ms, without a price: pricing's call timeout
//! cuts the call, and the breaker counts that as a failure. After two timeouts
//! the breaker opens: pages come back in stock's 50 ms with a retry hint for
//! the price, and no request reaches pricing; a checkout, which needs a price,
//! answers `503` with `Retry-After: 1` in about 1 ms. Stock serves every
//! request it is asked.
//!
//! ```text
//!   +   0 ms  GET /product/SKU-1  -> 200 in  54 ms      {"sku":"SKU-1","stock":{"in_stock":42},"price":{"price_cents":1299}}
//!   +  54 ms  GET /checkout/SKU-1 -> 200 in 104 ms
//!   + 158 ms  server: /pricing degrades, answers in 3000 ms
//!   + 158 ms  GET /product/SKU-2  -> 200 in 309 ms      ..."price":{"unavailable":"timed out"}}
//!   + 467 ms  GET /product/SKU-3  -> 200 in 302 ms      ..."price":{"unavailable":"timed out"}}
//!   + 770 ms  pricing breaker CLOSED -> OPEN (window: 2 failures of 4 calls)
//!   + 770 ms  GET /product/SKU-4  -> 200 in  53 ms      ..."price":{"unavailable":"circuit open","retry_after_ms":997}}
//!   + 875 ms  GET /checkout/SKU-5 -> 503 in   1 ms, Retry-After: 1
//!
//!   8 answers: 2 full, 5 partial (no price), 1 unavailable (503); the slowest took 309 ms of its 1500 ms budget
//!   stock:   7 requests reached it, all it was asked; breaker closed, 0 failures
//!   pricing: 4 requests reached it (2 answered, 2 cut at 300 ms); breaker open, 4 calls refused without a request
//! ```
//!
//! **Act 6: the integrations, briefly.** The server's `GET /report` (200 ms)
//! sits behind `watertight::tower::BulkheadLayer` (2 slots, fail fast), a
//! refusal answered `503` with `Retry-After: 1` through axum's
//! `HandleErrorLayer`; 5 requests at once get 3 × `503` in about 1 ms and
//! 2 × `200` in about 200 ms. Then a few lines of Prometheus text from a real
//! exporter, for act 5's policies and this bulkhead:
//!
//! ```text
//!   GET /report -> 503 in   1 ms, Retry-After: 1  bulkhead full
//!   ...
//!   GET /report -> 200 in 202 ms                  {"report":"ready"}
//!     bulkhead_rejected_total{system="report",reason="full"} 3
//!     circuit_breaker_rejected_total{system="pricing"} 4
//!     circuit_breaker_state{system="pricing"} 1
//!     circuit_breaker_state{system="stock"} 0
//! ```
//!
//! **Act 7: one limit across processes** (feature `redis` and `redis-server`
//! on PATH) is the `global_limit` example
//! ([the global bulkhead](super::global)), whose code the
//! tour includes: four worker processes (the tour's binary again) against one
//! neighbour, first with a local bulkhead of 20 each, then through one
//! `GlobalBulkhead` of 20 per call, then the same in leased mode (each
//! worker serving from its share, refreshed every 200 ms):
//!
//! ```text
//! == Act 7: one limit across processes — 4 workers, a Bulkhead of 20 each, then one GlobalBulkhead of 20, per call and leased
//!    4 worker processes, each firing 40 calls at once at a neighbour on 127.0.0.1 that holds each call 20-50 ms; a redis-server of our own on a Unix socket
//!
//!   round  limit                                                     answered  max in flight at the neighbour     time  Redis calls per call
//!   1      Bulkhead(20) in each of the 4 processes                    160/160                              80   122 ms                     -
//!   2      GlobalBulkhead(20) on Redis, local_cap(20) each            160/160                              20   364 ms                  4.55
//!   3      the same, leased: a share each, refreshed every 200 ms     160/160                              20   435 ms                  0.09
//!   -> local limits alone let 80 calls at once reach the neighbour (4 x 20 slots); through one GlobalBulkhead of 20, 20 at most (4.55 Redis calls per call), and leased, 20 at most (0.09 Redis calls per call)
//! ```
//!
//! Without the feature, or without `redis-server`, the act is one line:
//!
//! ```text
//! == Act 7: one limit across processes: skipped, it needs the redis feature (--features tokio,tower,metrics,http,chaos,redis; rustc 1.88) and a redis-server on PATH (apt-get install -y redis-server)
//! ```
//!
//! **Act 8: retries within the budget** ([retries](super::policy#retries)), on a search
//! server of its own (`GET /search/{q}`, 50 ms) called through a policy with
//! `call_idempotent(..).within(&budget)` and the default retries. The server
//! holds the first request 3 s: the 300 ms call timeout cuts it and the call
//! is retried once, after a jittered backoff, inside its 1.5 s budget. Then
//! search goes down (503 at once) and 30 calls are made one after another:
//! the budget lets the first two retry and then refuses (search's breaker
//! judges only after 50 calls here, so the budget alone is at work), where a
//! loop that retries 3 times with no delay sends four times the requests.
//! The counts are the same every run (seeded jitter, one call at a time):
//!
//! ```text
//! == Act 8: retries within the budget — a timed-out call retried once, a storm the budget stops
//!   +   0 ms  attempt 1: GET /search/boots (search holds this one 3 s)
//!   + 337 ms  attempt 2: GET /search/boots
//!   + 392 ms  answered {"q":"boots","results":3}
//!   -> attempt 1 was cut at its 300 ms call timeout and retried once, inside the request's 1500 ms (1108 left): 1 retry after a timeout, 2 requests reached search, 9.1 of 10 tokens left
//!
//!   + 392 ms  server: /search goes down, answers 503 at once
//!   + 476 ms  30 calls through call_idempotent: 30 failed; 32 requests reached search: 2 retries, then the budget refused 28 (0.0 tokens left)
//!   + 535 ms  the same 30 calls in a loop that retries 3 times, no delay, no budget: 120 requests reached search
//!   -> the budget let 2 of 30 failing calls retry and then stopped: 32 requests for 30 calls, where the loop sent 120; breaker closed (33 failures of 34 calls, it judges after 50)
//! ```
//!
//! **Act 9: a rate limit, both ways** ([`RateLimiter`](crate::rate::RateLimiter)
//! and `tower::RateLimitLayer`, feature `tower`), on a server of its
//! own, at 50 requests a second with a burst of 10. Outbound, a client
//! behind `RateLimitLayer::new(limiter).max_wait(2 s)` sends 30 requests at
//! once, each through its own clone of the service (no `Buffer`: the clones
//! share the limiter); the server records when each arrived. The burst
//! reaches it at once, then one request every 20 ms, and by every instant
//! no more than the GCRA bound `burst + elapsed / T` has arrived. Inbound,
//! `GET /search` sits behind a fail-fast `RateLimitLayer` on the same
//! quota, a refusal answered `429` with `Retry-After` (the limiter's exact
//! hint, rounded up to whole seconds) by axum's `HandleErrorLayer`; 25
//! requests at once get the burst's 10 answers, the handler running only
//! for those. The client's connections are opened first, so the act counts
//! the limiter's time, not TCP handshakes'; the counts are the limiter's,
//! the milliseconds measured (a burst slower than 20 ms to arrive earns one
//! more cell). About half a second:
//!
//! ```text
//! == Act 9: a rate limit — a client held to 50/s with a burst of 10, and inbound shedding with 429 + Retry-After
//!   by  10 ms: 10 requests had reached the server (bound: 10 + 10 ms / 20 ms = 10)
//!   by 100 ms: 14 requests had reached the server (bound: 10 + 100 ms / 20 ms = 15)
//!   by 200 ms: 19 requests had reached the server (bound: 10 + 200 ms / 20 ms = 20)
//!   by 300 ms: 24 requests had reached the server (bound: 10 + 300 ms / 20 ms = 25)
//!   by 400 ms: 29 requests had reached the server (bound: 10 + 400 ms / 20 ms = 30)
//!   by 500 ms: 30 requests had reached the server (bound: 10 + 500 ms / 20 ms = 35)
//!   -> 30 of 30 answered, the last reached the server at 402 ms: the burst at once, then one every 20 ms (20 waited for their cell, 0 refused); arrivals over the bound at their own instant: 0
//!
//!   -> 10 x 200, 15 x 429 with Retry-After: 1 (the limiter's hint, at most 20 ms, in whole seconds rounded up); the handler ran 10 times; limiter "search": admitted 10, refused 15
//! ```
//!
//! (The cell due at 100 ms reaches the server a moment after it, hence 14,
//! not 15, by 100 ms.) `tests/tour_http/rate.rs` runs the same act on a
//! `ManualClock`: 10 at once, then exactly 5 per 100 ms advanced; 10 answers
//! and 15 × `429` inbound.
//!
//! **Act 10: who gets a slot under overload**
//! ([`PartitionedBulkhead`](crate::partition::PartitionedBulkhead),
//! `tower::PartitionLayer`). `GET /search` has 5 slots in front of it,
//! once as one FIFO [`Bulkhead`](crate::Bulkhead) and once partitioned
//! (checkout promised 3, export 2; the class from an `x-class` header); the
//! handler holds each call until the act lets it go. 8 export calls come
//! first: 5 take every slot (with partitions, 3 of them borrowed from
//! checkout's idle room) and 3 wait; then 3 checkout calls wait too. The act
//! lets the first 5 go and counts who reached the handler next: with one
//! queue the export calls that came first; with partitions checkout gets
//! its 3 slots back, ahead of the export calls that waited longer. Every
//! step waits for the server's counters, not for time, so the counts are
//! the same every run:
//!
//! ```text
//! == Act 10: who gets a slot under overload — one FIFO queue, then checkout 3 / export 2
//!   one Bulkhead of 5 (FIFO):          the 5 freed slots went to 3 export, 2 checkout; 11 of 11 answered 200
//!   PartitionedBulkhead (3 / 2):       the 5 freed slots went to 2 export, 3 checkout; 11 of 11 answered 200
//!   -> with one queue checkout waits behind the export calls that came first; with partitions it gets back its 3 slots, which export had borrowed (3 borrowed), ahead of them
//! ```
//!
//! `tests/partition_http.rs` asserts the same over HTTP: a critical class
//! gets its lent slots back ahead of batch requests that queued earlier.
//!
//! **Act 11: hedged requests** ([`Policy::call_hedged`](crate::Policy::call_hedged),
//! [`hedge`](crate::hedge); [hedging](super::hedging)). Three replicas of
//! `GET /replica/{n}/{i}` answer in 20 ms, except that replica 2 holds 1 in
//! 10 of the requests it gets first for 2 s. 90 calls one after another,
//! request `i` to replica `i mod 3`: first through `Policy::call` with a
//! 300 ms call timeout, every latency recorded into the hedge's
//! [`LatencyHistogram`](crate::hedge::LatencyHistogram); then through
//! `call_hedged` with the delay at that histogram's p95, the hedge going to
//! the next replica. The 3 calls that met the slow replica end at the call
//! timeout without hedging, and are answered by the next replica a p95
//! later with it, for 3 more requests. The milliseconds are measured (one
//! run):
//!
//! ```text
//! == Act 11: hedged requests — one replica of three slow 1 time in 10
//!   Policy::call:         p99  302 ms, 90 requests sent, 3 cut by the call timeout
//!   Policy::call_hedged:  p99   56 ms, 93 requests sent (3 extra: 3 hedges won, 0 lost), 0 failed; delay 31 ms
//!   -> the requests that met the slow replica are answered by the next one after the p95 instead of at the call timeout; the hedges cost the extra requests above
//! ```
//!
//! `tests/hedge_http.rs` asserts the counts over HTTP (which calls time
//! out, that the hedges answer them, the breaker's window free of
//! failures), never the milliseconds.
//!
//! **Act 12: the budget travels** ([`deadline::wire`](crate::deadline::wire),
//! `tower::InboundDeadlineLayer`, `tower::OutboundDeadlineLayer`; feature
//! `http`, the act is skipped with one line without it). Three services on
//! loopback: A (the tour's client) → B (an axum server that calls C) → C
//! (an axum server whose job takes a second, in 10 ms steps, run in a task
//! of its own so that only its budget stops it: closing the connection
//! would not). A has 300 ms. With the layers, each sender writes what is
//! left minus a 25 ms margin into `x-request-timeout-ms`, each server
//! starts its handler's `Deadline` from it (capped by its own 10 s) and C
//! checks that deadline before each step. Then the same with the header
//! off: A still gives up at 300 ms, and B and C each get their own 10 s.
//! The milliseconds are measured:
//!
//! ```text
//! == Act 12: the budget travels — A (300 ms) → B → C (a 1 s job), over loopback HTTP
//!   with the header: A: 504                          after  251 ms | B got   273 ms | C got   247 ms, ran  23 of 100 steps, stopped by its budget at 251 ms
//!   header off:      A: gave up (its own deadline)   after  301 ms | B got  9999 ms | C got  9999 ms, ran 100 of 100 steps, finished its job at 1131 ms
//!   -> with the header C stops before A's 300 ms are up and nobody works for a caller who has gone; without it A gives up just the same, and C works its full second for nobody
//! ```
//!
//! B's budget is A's 300 ms less the margin and the time on the way; C's is
//! B's less the same again. `tests/deadline_http.rs` asserts the same three
//! hops: C stops before A's deadline, no step of C's job and no work of B
//! starts after it, A has its error well under a second, and without the
//! header C does all 100 steps, most of them after A gave up. Why the
//! header, the margin and admission refusal: [the deadline
//! guide](super::deadline).
//!
//! **Act 13: serve stale, marked with its age**
//! ([`fallback`](crate::fallback), `chaos`, `tower::StaleCacheLayer`,
//! `tower::ChaosLayer`; [the degrade ladder](super::degrade), and
//! `guide::chaos`, the resilience test kit; feature `chaos`, the act is
//! skipped with one line without it). The degrade ladder's second rung over loopback
//! HTTP, with the fault made by the injector rather than by hand. Pricing's
//! `GET /price/{sku}` sits behind a `ChaosLayer`: a seeded
//! `chaos::Injector`, off at first, that once on answers every request 503
//! itself (an outcome at rate 1), the handler not called. The storefront's
//! `GET /product/{sku}` asks pricing through a `StaleCacheLayer` (the last
//! good price per sku, up to 60 s old) over a `PolicyLayer` (a breaker of
//! window 4 that opens at 50 % failed, for 1.5 s, with 1 probe). Pages one
//! after another: two while pricing is healthy record its prices; then the
//! injector goes on. Pricing's 503 is its own answer, which the cache layer
//! passes on (a failure is not a refusal); the page chooses to serve the
//! cache's price for it all the same
//! ([`StaleCache::serve`](crate::fallback::StaleCache::serve)), and two
//! such failures with the two good calls make half of the window: the
//! breaker opens. The next pages are refused without a request, and the
//! layer answers them with the cached price and its age (the `Age` header
//! too); a product never priced gets 503 with the breaker's `Retry-After`.
//! Then the injector goes off, the open wait ends, the next page's call is
//! the half-open probe, it closes the breaker, and the prices are fresh.
//! The counts are the same every run; the ages are real, on `TokioClock`,
//! with a page every 200 ms:
//!
//! ```text
//! == Act 13: serve stale, marked with its age — a fault injector fails pricing, its breaker opens, the page keeps its price
//!    #  product  injector  pricing asked  breaker after  page
//!    1  42       off       yes            closed         200 product 42: price 4200
//!    2  7        off       yes            closed         200 product 7: price 700
//!    3  42       on        yes            closed         200 product 42: price 4200, 0.4 s old (pricing answered 503)
//!    4  42       on        yes            open           200 product 42: price 4200, 0.6 s old (pricing answered 503)
//!    5  42       on        no             open           200 product 42: price 4200, 0.8 s old (pricing not asked: its breaker is open)
//!    6  7        on        no             open           200 product 7: price 700, 1.0 s old (pricing not asked: its breaker is open)
//!    7  9        on        no             open           503 product 9: price unavailable (pricing not asked: its breaker is open, retry in 0.9 s)
//!    8  42       on        no             open           200 product 42: price 4200, 1.4 s old (pricing not asked: its breaker is open)
//!   -- injector off, the open wait over: breaker half-open (the next page's call is its probe)
//!    9  42       off       yes            closed         200 product 42: price 4200
//!   10  7        off       yes            closed         200 product 7: price 700
//!   11  9        off       yes            closed         200 product 9: price 900
//!   pages: 5 fresh, 2 stale after pricing's 503, 3 stale while its breaker was open, 1 without a price
//!   pricing: 7 requests reached it (5 answered by its handler, 2 answered 503 by the injector); its breaker refused 4 calls, and 4 pages sent it nothing
//!   cache "prices": 5 prices recorded, 5 served stale, 1 miss (nothing recorded), 0 too old; act took 2165 ms
//!   -> while pricing failed and while its breaker was open the page kept its price, marked with its age (measured on the tour's clock); the refused pages sent pricing nothing; once the injector was off and the open wait over, one probe closed the breaker and the prices were fresh again
//! ```
//!
//! `tests/tour_degrade.rs` runs the act's code (without the pauses) and
//! asserts every row — what each page got, whether pricing was asked, the
//! breaker after it, the probe's half-open state — and the counters of
//! pricing, the injector, the breaker and the cache. `tests/stale_http.rs`
//! asserts the exact ages, on a `ManualClock`.
