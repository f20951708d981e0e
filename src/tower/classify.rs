//! What a tower service's result means for a breaker: the crate's one
//! classifier concept, [`Classify`], and its default, [`ErrIsFailure`],
//! re-exported from [`breaker`](crate::breaker) so that a classifier
//! written for [`CircuitBreaker::call_classified`], a [`Policy`] or a tower
//! layer is the same type.
//!
//! Every `Fn(&Result<T, E>) -> Outcome` is a [`Classify`]; the layers'
//! `classify` methods take any of them:
//!
//! ```
//! use watertight::Outcome;
//! use watertight::tower::{Classify, ErrIsFailure};
//!
//! let by_status = |r: &Result<u16, ()>| match r {
//!     Ok(s) if *s < 500 => Outcome::Success,
//!     _ => Outcome::Failure,
//! };
//! assert_eq!(by_status.classify(&Ok(404)), Outcome::Success);
//! assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
//! // The default of `BreakerLayer::new` and `PolicyLayer::new`.
//! assert_eq!(ErrIsFailure.classify(&Ok::<u16, ()>(503)), Outcome::Success);
//! assert_eq!(ErrIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
//! ```
//!
//! [`CircuitBreaker::call_classified`]: crate::breaker::CircuitBreaker::call_classified
//! [`Policy`]: crate::policy::Policy

pub use crate::breaker::{Classify, ErrIsFailure};
