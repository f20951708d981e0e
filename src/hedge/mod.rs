//! Hedged requests: the pieces. So far the latency histogram a hedge delay
//! is read from, usable on its own.

mod histogram;

pub use histogram::{LatencyHistogram, Percentile, PercentileError};
