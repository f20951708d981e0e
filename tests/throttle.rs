#![cfg(not(loom))]
//! `AdaptiveThrottle` on a `ManualClock`: its refusals against the SRE
//! book's formula over a scripted sequence, and a deterministic overload
//! simulation (a backend of capacity C under 2–5× C offered load).
//!
//! The formula's probabilities here come from the test's own tally of
//! requests and accepts (a plain list of admission instants), not from the
//! throttle: what is checked is that the throttle refuses as often as the
//! formula says, within ±0.01 in every band of probability that has enough
//! samples.
use std::time::Duration;

use watertight::clock::ManualClock;
use watertight::throttle::{AdaptiveThrottle, ThrottleConfig, BUCKETS};

/// The test's own window: requests and accepts per bucket, by admission.
#[derive(Default)]
struct Tally {
    buckets: std::collections::BTreeMap<u64, (f64, f64)>,
}

impl Tally {
    fn counts(&mut self, now: u64) -> (f64, f64) {
        let oldest = now.saturating_sub(BUCKETS as u64 - 1);
        self.buckets = self.buckets.split_off(&oldest);
        self.buckets
            .values()
            .fold((0.0, 0.0), |(r, a), &(br, ba)| (r + br, a + ba))
    }

    fn count(&mut self, epoch: u64, accepted: bool) {
        let b = self.buckets.entry(epoch).or_default();
        b.0 += 1.0;
        b.1 += f64::from(u8::from(accepted));
    }
}

/// A scripted backend that accepts up to `capacity` requests per bucket and
/// refuses the rest for overload, under phases of offered load (multiples
/// of its capacity, 1000 requests per bucket at 1×): at `L×` the formula
/// settles near `1 − K / L`, so the phases hold it in different bands. In
/// each band of predicted probability (tenths) with at least 50 000
/// samples, the refusal rate is the band's mean predicted probability
/// ± 0.01 (the sampling error there is under 0.0023, a standard deviation).
#[test]
fn refusals_follow_the_formula_within_a_hundredth() {
    let k = 2.0;
    let max_p = 0.9;
    let config = ThrottleConfig::builder()
        .k(k)
        .max_probability(max_p)
        .window(Duration::from_secs(BUCKETS as u64))
        .build()
        .unwrap();
    let bucket = config.bucket();
    assert_eq!(bucket, Duration::from_secs(1));
    let clock = ManualClock::new();
    let throttle = AdaptiveThrottle::with_seed("scripted", config, &clock, 2026);
    let mut tally = Tally::default();
    let capacity = 1000u64;
    // (buckets, offered load in tenths of the capacity)
    let phases = [
        (30, 10),
        (60, 25),
        (60, 33),
        (60, 45),
        (60, 60),
        (60, 90),
        (60, 300),
        (40, 10),
    ];
    // Per band of predicted p: samples, sum of predicted p, refusals.
    let mut bands = [(0u32, 0.0f64, 0u32); 10];
    let mut epoch = 0u64;
    for (buckets, tenths) in phases {
        for _ in 0..buckets {
            let offered = capacity * tenths / 10;
            let step = bucket / offered as u32;
            let mut served = 0;
            for _ in 0..offered {
                let (r, a) = tally.counts(epoch);
                let predicted = ((r - k * a) / (r + 1.0)).clamp(0.0, max_p);
                let band = ((predicted * 10.0) as usize).min(9);
                bands[band].0 += 1;
                bands[band].1 += predicted;
                match throttle.check() {
                    Ok(ticket) => {
                        let accepted = served < capacity;
                        served += u64::from(accepted);
                        tally.count(epoch, accepted);
                        if accepted {
                            ticket.accepted();
                        } else {
                            ticket.overloaded();
                        }
                    }
                    Err(_) => {
                        bands[band].2 += 1;
                        tally.count(epoch, false);
                    }
                }
                clock.advance(step);
            }
            // The rest of the bucket, to its end.
            let into = clock_nanos(&clock) % bucket.as_nanos() as u64;
            if into != 0 {
                clock.advance(bucket - Duration::from_nanos(into));
            }
            epoch += 1;
            assert_eq!(clock_nanos(&clock) / bucket.as_nanos() as u64, epoch);
        }
    }
    let mut checked = 0;
    for (i, &(n, sum, refused)) in bands.iter().enumerate() {
        let mean = sum / f64::from(n.max(1));
        let rate = f64::from(refused) / f64::from(n.max(1));
        println!(
            "band {:.1}-{:.1}: {n:>7} samples, predicted {mean:.4}, refused {rate:.4}",
            i as f64 / 10.0,
            (i + 1) as f64 / 10.0
        );
        if n < 50_000 {
            continue;
        }
        assert!(
            (rate - mean).abs() <= 0.01,
            "band {i}: predicted {mean}, refused {rate} of {n}"
        );
        checked += 1;
    }
    assert!(
        checked >= 5,
        "only {checked} bands had enough samples: {bands:?}"
    );
}

fn clock_nanos(clock: &ManualClock) -> u64 {
    use watertight::clock::Clock;
    clock.now().as_nanos()
}

/// The outcome of one simulated run.
#[derive(Debug)]
struct Run {
    offered: u64,
    /// Requests that reached the backend.
    backend: u64,
    accepted: u64,
}

/// A backend that serves up to `capacity` requests per tick (10 ms) and
/// refuses the rest for overload; `load × capacity` requests offered per
/// tick, evenly; every request answered within its tick. Counts over the
/// last `measure` ticks, after a warm-up of two windows.
fn simulate(capacity: u64, load: u64, throttled: bool, k: f64) -> Run {
    let tick = Duration::from_millis(10);
    let config = ThrottleConfig::builder()
        .k(k)
        .window(Duration::from_secs(10))
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let throttle = AdaptiveThrottle::with_seed("backend", config, &clock, load);
    let warm_up = 2 * 1000; // two windows of 10 ms ticks
    let measure = 3000;
    let mut run = Run {
        offered: 0,
        backend: 0,
        accepted: 0,
    };
    for i in 0..warm_up + measure {
        let counting = i >= warm_up;
        let offered = capacity * load;
        let mut served = 0;
        for _ in 0..offered {
            let ticket = if throttled {
                match throttle.check() {
                    Ok(ticket) => Some(ticket),
                    Err(_) => {
                        run.offered += u64::from(counting);
                        continue;
                    }
                }
            } else {
                None
            };
            run.offered += u64::from(counting);
            run.backend += u64::from(counting);
            let accept = served < capacity;
            if accept {
                served += 1;
                run.accepted += u64::from(counting);
            }
            if let Some(ticket) = ticket {
                if accept {
                    ticket.accepted();
                } else {
                    ticket.overloaded();
                }
            }
        }
        clock.advance(tick);
    }
    run
}

/// The throttle cuts what reaches the backend to `K ×` what it accepts
/// (within 10 %), at 2, 3, 4 and 5 times its capacity; without the
/// throttle the backend gets all of it.
#[test]
fn the_throttle_cuts_backend_load_to_k_times_accepts() {
    let capacity = 20;
    println!("load  K    offered  backend(no throttle)  backend(throttled)  accepted  backend/(K·accepted)");
    for k in [2.0, 1.5] {
        for load in 2..=5 {
            let plain = simulate(capacity, load, false, k);
            let run = simulate(capacity, load, true, k);
            let ratio = run.backend as f64 / (k * run.accepted as f64);
            println!(
                "{load}×   {k:.1}  {:>7}  {:>20}  {:>18}  {:>8}  {ratio:.3}",
                run.offered, plain.backend, run.backend, run.accepted
            );
            assert_eq!(plain.backend, plain.offered);
            assert!(
                (ratio - 1.0).abs() <= 0.10,
                "{load}× at K = {k}: {run:?}, ratio {ratio}"
            );
            // The backend stays busy: it accepts (nearly) its capacity.
            assert!(
                run.accepted as f64 >= 0.95 * (capacity * 3000) as f64,
                "{run:?}"
            );
        }
    }
}

/// Once the backend recovers, the throttle refuses less and less, and
/// nothing from two windows on (the requests it refused while recovering
/// count against it for one window).
#[test]
fn recovery_within_two_windows() {
    let config = ThrottleConfig::builder()
        .window(Duration::from_secs(10))
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let throttle = AdaptiveThrottle::with_seed("recovering", config, &clock, 3);
    for _ in 0..1000 {
        if let Ok(ticket) = throttle.check() {
            ticket.overloaded();
        }
        clock.advance(Duration::from_millis(10));
    }
    assert_eq!(throttle.probability(), 0.9);
    let mut refused = [0u32; 3];
    for i in 0..3000 {
        match throttle.check() {
            Ok(ticket) => ticket.accepted(),
            Err(_) => refused[i / 1000] += 1,
        }
        clock.advance(Duration::from_millis(10));
    }
    println!("refused per window of the recovery: {refused:?}");
    assert!(refused[0] > refused[1], "{refused:?}");
    assert_eq!(refused[2], 0, "{refused:?}");
    assert_eq!(throttle.probability(), 0.0);
}
