//! Acts 1–3, the classic demonstration of the bulkhead pattern: a slow
//! dependency (`/shipping-rate`) and a fast one (`/inventory/{sku}`), called
//! over HTTP in bursts, each call through a [`Bulkhead`]: one shared limit
//! (act 1), one per system (act 2), and one per system with a short max wait
//! (act 3). Latency is what the caller observes, from submission.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use watertight::clock::TokioClock;
use watertight::{AcquireError, Bulkhead, OwnedPermit};

use crate::storefront::{Stage, SLOW};
use crate::{header, ms, FAST};

/// The longest a caller waits for a slot in act 3: half a slow call (1 s ÷ 5).
const MAX_WAIT: Duration = Duration::from_millis(200);

/// Acts 1–3, after a warm-up of the client's connections.
pub async fn acts_1_to_3(stage: &Stage) {
    let (client, base) = (&stage.client, stage.base.as_str());
    // Warm-up: open the client's pooled connections before measuring, with as
    // many concurrent requests as any act has in flight (7 in act 3), so that
    // TCP connection setup is not charged to the first calls of act 1.
    let warm_up = bulkhead("warm-up", 8);
    let traffic = [Traffic {
        system: System::Inventory,
        calls: 8,
        bulkhead: warm_up,
    }];
    burst(client, base, &traffic, MaxWait::Unbounded).await;

    println!("watertight tour: server on {base}");
    println!(
        "  /shipping-rate takes {} ms (degraded), /inventory/{{sku}} {} ms (healthy); \
         times scaled down 5x from a 2 s slow call",
        SLOW.as_millis(),
        FAST.as_millis()
    );

    // Act 1: one shared pool of 4 workers for every call.
    header(
        "Act 1: one shared limit — a fast dependency starves behind a slow one",
        "one bulkhead \"shared\" (4) for both systems, unbounded wait; \
         8 shipping then 2 inventory at once",
    );
    let shared = bulkhead("shared", 4);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 8,
            bulkhead: shared.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 2,
            bulkhead: shared.clone(),
        },
    ];
    let act1 = burst(client, base, &traffic, MaxWait::Unbounded).await;
    print_table(&act1);
    print_metrics(&[&shared]);
    let inv = worst(&act1, System::Inventory, true).unwrap_or_default();
    println!(
        "  -> a {} ms lookup took {} ms ({:.1} slow calls, {:.0}x its own time): it queued \
         behind all 8 shipping calls",
        FAST.as_millis(),
        ms(inv),
        inv.as_secs_f64() / SLOW.as_secs_f64(),
        inv.as_secs_f64() / FAST.as_secs_f64()
    );

    // Act 2: a compartment of its own per dependency.
    header(
        "Act 2: one bulkhead per system — the slow one floods only its own compartment",
        "bulkheads \"shipping\" (4) and \"inventory\" (2), unbounded wait; \
         the same burst as act 1",
    );
    let shipping = bulkhead("shipping", 4);
    let inventory = bulkhead("inventory", 2);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 8,
            bulkhead: shipping.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 2,
            bulkhead: inventory.clone(),
        },
    ];
    let act2 = burst(client, base, &traffic, MaxWait::Unbounded).await;
    print_table(&act2);
    print_metrics(&[&shipping, &inventory]);
    let inv = worst(&act2, System::Inventory, true).unwrap_or_default();
    let ship = worst(&act2, System::Shipping, true).unwrap_or_default();
    println!(
        "  -> inventory back to {} ms, its own time; shipping as slow as ever ({} ms): \
         slowness contained, not cured",
        ms(inv),
        ms(ship)
    );

    // Act 3: semaphore bulkheads with a max wait, shipping flooded.
    header(
        "Act 3: a flood with a short max wait — the overflow is turned away fast",
        &format!(
            "bulkheads \"shipping\" (3) and \"inventory\" (5), acquire_timeout({} ms); \
             10 shipping + 4 inventory at once",
            MAX_WAIT.as_millis()
        ),
    );
    let shipping = bulkhead("shipping", 3);
    let inventory = bulkhead("inventory", 5);
    let traffic = [
        Traffic {
            system: System::Shipping,
            calls: 10,
            bulkhead: shipping.clone(),
        },
        Traffic {
            system: System::Inventory,
            calls: 4,
            bulkhead: inventory.clone(),
        },
    ];
    let act3 = burst(client, base, &traffic, MaxWait::AtMost(MAX_WAIT)).await;
    print_table(&act3);
    print_metrics(&[&shipping, &inventory]);
    let rejected_after = worst(&act3, System::Shipping, false).unwrap_or_default();
    let inv = worst(&act3, System::Inventory, true).unwrap_or_default();
    println!(
        "  -> shipping: {} ok, {} turned away by {} ms (max wait {} ms); \
         inventory: {} ok by {} ms",
        count(&act3, System::Shipping, true),
        count(&act3, System::Shipping, false),
        ms(rejected_after),
        MAX_WAIT.as_millis(),
        count(&act3, System::Inventory, true),
        ms(inv)
    );
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum System {
    Shipping,
    Inventory,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Shipping => "shipping",
            System::Inventory => "inventory",
        }
    }
}

/// How long a caller is willing to wait for a slot.
#[derive(Clone, Copy)]
enum MaxWait {
    /// `acquire()` (here its owned form, `acquire_owned()`): as long as it
    /// takes, like a thread pool's queue.
    Unbounded,
    /// `acquire_timeout(d)` (`acquire_owned_timeout(d)`): at most `d` from
    /// submission, then rejected with `TimedOut`.
    AtMost(Duration),
}

/// A caller's place in a bulkhead's queue: resolves to a permit or a rejection.
type Slot = Pin<Box<dyn Future<Output = Result<OwnedPermit<TokioClock>, AcquireError>> + Send>>;

/// The HTTP request itself, made once the caller holds a permit.
async fn request(client: &reqwest::Client, base: &str, system: System, i: usize) {
    let url = match system {
        System::Shipping => format!("{base}/shipping-rate?zip_code=9410{i}"),
        System::Inventory => format!("{base}/inventory/SKU-{i}"),
    };
    let response = client.get(&url).send().await.expect("HTTP request");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.text().await.expect("HTTP response body");
}

/// `calls` calls to `system`, each through `bulkhead`.
struct Traffic {
    system: System,
    calls: usize,
    bulkhead: Arc<Bulkhead<TokioClock>>,
}

struct Outcome {
    system: System,
    result: Result<(), AcquireError>,
    /// From submission to completion, as the caller sees it.
    latency: Duration,
}

/// Submits every call at once, in the order given, each as its own task, and
/// waits for all of them.
async fn burst(
    client: &reqwest::Client,
    base: &str,
    traffic: &[Traffic],
    max_wait: MaxWait,
) -> Vec<Outcome> {
    let mut tasks = Vec::new();
    for t in traffic {
        for i in 0..t.calls {
            // The clock starts at submission, not when the call gets its slot:
            // time spent waiting for a slot is latency the caller feels.
            let submitted = Instant::now();
            let mut slot: Slot = match max_wait {
                MaxWait::Unbounded => Box::pin(t.bulkhead.acquire_owned()),
                MaxWait::AtMost(d) => Box::pin(t.bulkhead.acquire_owned_timeout(d)),
            };
            // Submitting joins the bulkhead's queue now, in submission order,
            // as submitting to a thread pool joins its queue: this first
            // poll takes a free slot or registers the wait. (Left to
            // the spawned tasks, the queue order would be whatever order the
            // runtime's worker threads happen to first poll them in.)
            let first_look = poll_fn(|cx| Poll::Ready(slot.as_mut().poll(cx))).await;
            let (client, base, system) = (client.clone(), base.to_owned(), t.system);
            tasks.push(tokio::spawn(async move {
                let permit = match first_look {
                    Poll::Ready(r) => r,
                    Poll::Pending => slot.await,
                };
                let result = match permit {
                    Ok(_permit) => {
                        // The permit is held until the response is read.
                        request(&client, &base, system, i).await;
                        Ok(())
                    }
                    Err(rejected) => Err(rejected),
                };
                // ...and stops here, as the call completes, not when the
                // loop below gets round to this task (the other classic timing
                // mistake).
                let latency = submitted.elapsed();
                Outcome {
                    system,
                    result,
                    latency,
                }
            }));
        }
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await.expect("call task panicked"));
    }
    outcomes
}
/// Prints one row per system: counts, then every call's latency, sorted.
fn print_table(outcomes: &[Outcome]) {
    println!(
        "  {:<10} {:>5} {:>4} {:>8}   caller-observed latency, ms from submission (sorted)",
        "system", "calls", "ok", "rejected"
    );
    let mut any_rejected = false;
    for system in [System::Shipping, System::Inventory] {
        let mut mine: Vec<&Outcome> = outcomes.iter().filter(|o| o.system == system).collect();
        mine.sort_by_key(|o| o.latency);
        let ok = mine.iter().filter(|o| o.result.is_ok()).count();
        let rejected = mine.len() - ok;
        any_rejected |= rejected > 0;
        let latencies: String = mine
            .iter()
            .map(|o| {
                let mark = if o.result.is_ok() { ' ' } else { '*' };
                format!("{:>5}{mark}", ms(o.latency))
            })
            .collect();
        println!(
            "  {:<10} {:>5} {:>4} {:>8}  {}",
            system.name(),
            mine.len(),
            ok,
            rejected,
            latencies.trim_end()
        );
    }
    if any_rejected {
        println!("  (* = rejected by its bulkhead: no slot within the max wait)");
    }
}

fn print_metrics(bulkheads: &[&Bulkhead<TokioClock>]) {
    for b in bulkheads {
        let m = b.metrics();
        println!(
            "  bulkhead {:<12} accepted {:>2}, rejected {:>2} (timed out {}), peak in flight {}/{}",
            format!("{:?}:", m.name),
            m.accepted,
            m.rejected(),
            m.rejected_timed_out,
            m.peak_in_flight,
            m.capacity
        );
    }
}
/// The slowest successful call of `system` (or rejection, if `ok` is false).
fn worst(outcomes: &[Outcome], system: System, ok: bool) -> Option<Duration> {
    outcomes
        .iter()
        .filter(|o| o.system == system && o.result.is_ok() == ok)
        .map(|o| o.latency)
        .max()
}

fn count(outcomes: &[Outcome], system: System, ok: bool) -> usize {
    outcomes
        .iter()
        .filter(|o| o.system == system && o.result.is_ok() == ok)
        .count()
}

fn bulkhead(name: &'static str, capacity: usize) -> Arc<Bulkhead<TokioClock>> {
    Arc::new(Bulkhead::new(name, capacity, TokioClock))
}
