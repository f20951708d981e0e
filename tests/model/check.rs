//! What the sequential references (`tests/model/*.rs`) report when the
//! library and the reference disagree, and the two assertions they use.
//!
//! The references are shared by the model tests (proptest drives them) and
//! the fuzz targets (`fuzz/`, libFuzzer drives them), so they return a
//! plain [`Mismatch`] instead of proptest's error type, and each driver turns
//! it into its own failure. Include it before the reference, with
//! `#[macro_use] #[path = "model/check.rs"] mod check;` at the crate root.

// Each driver uses a different part.
#![allow(dead_code, unused_macros)]

use std::fmt;

/// The library and the reference model disagreed: what, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch(pub String);

impl Mismatch {
    /// A mismatch described by `msg`.
    pub fn new(msg: impl Into<String>) -> Self {
        Mismatch(msg.into())
    }

    /// The same mismatch with `context` in front (a step, an operation).
    pub fn at(self, context: impl fmt::Display) -> Self {
        Mismatch(format!("{context}: {}", self.0))
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Returns a [`Mismatch`] from the enclosing function unless `cond` holds.
macro_rules! ensure {
    ($cond:expr_2021) => {
        ensure!($cond, "assertion failed: {}", stringify!($cond))
    };
    ($cond:expr_2021, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::check::Mismatch(format!($($fmt)+)));
        }
    };
}

/// Returns a [`Mismatch`] from the enclosing function unless the two sides
/// are equal; the message shows both.
macro_rules! ensure_eq {
    ($left:expr_2021, $right:expr_2021) => {
        ensure_eq!($left, $right, "{}", stringify!($left))
    };
    ($left:expr_2021, $right:expr_2021, $($fmt:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err($crate::check::Mismatch(format!(
                        "{}: {:?} != {:?}",
                        format_args!($($fmt)+),
                        left,
                        right
                    )));
                }
            }
        }
    };
}
