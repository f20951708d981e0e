//! A sequential reference for `AdaptiveThrottle`: every request kept as a
//! record (its admission epoch, whether it still counts, whether its accept
//! was credited), the window's counts found by brute force, the SRE book's
//! formula written out, and the same SplitMix64 draws (`retry::Jitter`,
//! seeded alike, drawn only when the probability is above zero).
//!
//! `run` drives the real throttle on a `ManualClock` and the reference with
//! the same operations and demands the same decisions, probabilities,
//! window counts and counters at every step.

use std::time::Duration;

use watertight::clock::ManualClock;
use watertight::retry::Jitter;
use watertight::throttle::{AdaptiveThrottle, Response, ThrottleConfig, Ticket, BUCKETS};

use crate::check::Mismatch;

/// The throttle's settings for one run.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub k: f64,
    pub max_probability: f64,
    /// One bucket's width in nanoseconds (the window is `BUCKETS` of them).
    pub bucket: u64,
    pub seed: u64,
}

/// One step.
#[derive(Debug, Clone)]
pub enum Op {
    /// Move the clock on by this many nanoseconds.
    Advance(u64),
    /// Ask the throttle; an admitted request's ticket is kept.
    Check,
    /// Report on the `n`-th kept ticket (modulo how many there are).
    Report(usize, Response),
    /// Drop the `n`-th kept ticket without a word.
    Drop(usize),
}

#[derive(Debug, Clone, Copy)]
struct Record {
    epoch: u64,
    counted: bool,
    credited: bool,
}

struct Reference {
    spec: Spec,
    now: u64,
    records: Vec<Record>,
    rng: Jitter,
    admitted: usize,
    refused: usize,
    accepted: usize,
    overloaded: usize,
    ignored: usize,
    late: usize,
}

impl Reference {
    fn epoch(&self) -> u64 {
        self.now / self.spec.bucket
    }

    fn in_window(&self, epoch: u64) -> bool {
        let now = self.epoch();
        epoch <= now && now - epoch < BUCKETS as u64
    }

    fn counts(&self) -> (u64, u64) {
        let mut requests = 0;
        let mut accepts = 0;
        for r in &self.records {
            if self.in_window(r.epoch) {
                requests += u64::from(r.counted);
                accepts += u64::from(r.credited);
            }
        }
        (requests, accepts)
    }

    fn probability(&self) -> f64 {
        let (requests, accepts) = self.counts();
        let excess = requests as f64 - self.spec.k * accepts as f64;
        if excess <= 0.0 {
            0.0
        } else {
            (excess / (requests as f64 + 1.0)).min(self.spec.max_probability)
        }
    }

    /// `Some(index of the record)` if admitted.
    fn check(&mut self) -> Option<usize> {
        let p = self.probability();
        let epoch = self.epoch();
        self.records.push(Record {
            epoch,
            counted: true,
            credited: false,
        });
        let refused = p > 0.0 && {
            let u = (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            u < p
        };
        if refused {
            self.refused += 1;
            None
        } else {
            self.admitted += 1;
            Some(self.records.len() - 1)
        }
    }

    fn report(&mut self, at: usize, response: Response) {
        match response {
            Response::Accepted => {
                self.accepted += 1;
                if self.in_window(self.records[at].epoch) {
                    self.records[at].credited = true;
                } else {
                    self.late += 1;
                }
            }
            Response::Overloaded => self.overloaded += 1,
            Response::Ignored => {
                self.ignored += 1;
                self.records[at].counted = false;
            }
        }
    }
}

/// Runs `ops` on both; the first disagreement, if any.
pub fn run(spec: Spec, ops: &[Op]) -> Result<(), Mismatch> {
    let config = ThrottleConfig::builder()
        .k(spec.k)
        .max_probability(spec.max_probability)
        .window(Duration::from_nanos(spec.bucket * BUCKETS as u64))
        .build()
        .map_err(|e| Mismatch::new(format!("config: {e}")))?;
    ensure!(config.bucket() == Duration::from_nanos(spec.bucket));
    let clock = ManualClock::new();
    let throttle = AdaptiveThrottle::with_seed("model", config, &clock, spec.seed);
    let mut reference = Reference {
        spec,
        now: 0,
        records: Vec::new(),
        rng: Jitter::new(spec.seed),
        admitted: 0,
        refused: 0,
        accepted: 0,
        overloaded: 0,
        ignored: 0,
        late: 0,
    };
    // The live tickets, each beside its record in the reference.
    let mut tickets: Vec<(Ticket<'_, &ManualClock>, usize)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let at = |m: Mismatch| m.at(format!("step {step} ({op:?})"));
        let mut one = || -> Result<(), Mismatch> {
            match *op {
                Op::Advance(ns) => {
                    clock.advance(Duration::from_nanos(ns));
                    reference.now += ns;
                }
                Op::Check => {
                    let expected_p = reference.probability();
                    let got_p = throttle.probability();
                    ensure_eq!(got_p, expected_p);
                    let expected = reference.check();
                    match (throttle.check(), expected) {
                        (Ok(ticket), Some(record)) => tickets.push((ticket, record)),
                        (Err(refused), None) => {
                            let p = watertight::throttle::Throttled::with_probability(expected_p);
                            ensure_eq!(refused, p);
                        }
                        (got, expected) => {
                            return Err(Mismatch::new(format!(
                                "admitted {} where the reference {}",
                                got.is_ok(),
                                if expected.is_some() {
                                    "admits"
                                } else {
                                    "refuses"
                                }
                            )));
                        }
                    }
                }
                Op::Report(n, response) => {
                    if !tickets.is_empty() {
                        let (ticket, record) = tickets.swap_remove(n % tickets.len());
                        ticket.record(response);
                        reference.report(record, response);
                    }
                }
                Op::Drop(n) => {
                    if !tickets.is_empty() {
                        let (ticket, record) = tickets.swap_remove(n % tickets.len());
                        drop(ticket);
                        reference.report(record, Response::Ignored);
                    }
                }
            }
            let m = throttle.metrics();
            let (requests, accepts) = reference.counts();
            ensure_eq!((m.requests, m.accepts), (requests, accepts));
            ensure_eq!(m.probability, reference.probability());
            ensure_eq!(
                (m.admitted, m.refused, m.accepted, m.overloaded, m.ignored),
                (
                    reference.admitted,
                    reference.refused,
                    reference.accepted,
                    reference.overloaded,
                    reference.ignored,
                )
            );
            // `late` counts the late accepts whose slot had been reused:
            // at most the accepts that came in after their bucket left.
            ensure!(
                m.late <= reference.late,
                "late {} > {} accepts after their bucket left",
                m.late,
                reference.late
            );
            Ok(())
        };
        one().map_err(at)?;
    }
    Ok(())
}
