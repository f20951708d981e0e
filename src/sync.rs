//! The one place the crate takes its atomics from.
//!
//! Normally they come from [`portable_atomic`], which maps to `core::sync::atomic`
//! where the target has the operation natively and otherwise falls back (to a
//! critical section on `thumbv6m` when the binary enables `critical-section`).
//! Under `cfg(loom)` they come from loom, so that the loom models in
//! `tests/loom.rs` explore every interleaving of the crate's own protocols.

#[cfg(not(loom))]
mod imp {
    #[allow(unused_imports)]
    pub(crate) use portable_atomic::{
        fence, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

#[cfg(loom)]
mod imp {
    #[allow(unused_imports)]
    pub(crate) use loom::sync::atomic::{
        fence, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

pub(crate) use imp::*;

/// `const fn` where the atomics allow it: loom's atomics cannot be built in a
/// constant, so under `cfg(loom)` the same function is an ordinary `fn`.
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])* $vis const fn $name $($rest)*
        #[cfg(loom)]
        $(#[$attr])* $vis fn $name $($rest)*
    };
}
pub(crate) use const_fn;
