//! Export through the `metrics` facade (feature `metrics`).
