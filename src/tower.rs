//! tower `Layer`s and `Service`s (feature `tower`).
