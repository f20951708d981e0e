//! [`Classify`]: what a call's result means for a breaker, and the default
//! classifier, [`ErrorIsFailure`].

use crate::breaker::Outcome;

/// Says what a call's result means for a breaker: [`Outcome::Success`] (the
/// system answered: an HTTP 404 too), [`Outcome::Failure`] (a 5xx, a
/// connection error) or [`Outcome::Ignored`].
///
/// Implemented for every `Fn(&Result<T, E>) -> Outcome` and for
/// [`ErrorIsFailure`].
///
/// # Examples
///
/// ```
/// use watertight::Outcome;
/// use watertight::tower::{Classify, ErrorIsFailure};
///
/// let by_status = |r: &Result<u16, ()>| match r {
///     Ok(s) if *s < 500 => Outcome::Success,
///     _ => Outcome::Failure,
/// };
/// assert_eq!(by_status.classify(&Ok(404)), Outcome::Success);
/// assert_eq!(by_status.classify(&Ok(503)), Outcome::Failure);
/// assert_eq!(ErrorIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
/// ```
pub trait Classify<T, E> {
    /// The outcome of `result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io;
    /// use watertight::Outcome;
    /// use watertight::tower::Classify;
    ///
    /// // A 429 says the system is alive and shedding load: no verdict.
    /// let by_status = |r: &Result<u16, io::Error>| match r {
    ///     Ok(429) => Outcome::Ignored,
    ///     Ok(s) if *s >= 500 => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    ///     Err(_) => Outcome::Failure,
    /// };
    /// assert_eq!(by_status.classify(&Ok(429)), Outcome::Ignored);
    /// assert_eq!(by_status.classify(&Ok(502)), Outcome::Failure);
    /// assert_eq!(by_status.classify(&Err(io::Error::other("reset"))), Outcome::Failure);
    /// ```
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F: Fn(&Result<T, E>) -> Outcome> Classify<T, E> for F {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: an `Err` is a failure, an `Ok` a success.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::StdClock;
/// use watertight::tower::{BreakerLayer, BreakerService, Classify, ErrorIsFailure};
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
///
/// // An `Ok` is an answer, whatever it holds.
/// assert_eq!(ErrorIsFailure.classify(&Ok::<u16, ()>(503)), Outcome::Success);
/// assert_eq!(ErrorIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
///
/// # futures_lite::future::block_on(async {
/// let breaker: Arc<CircuitBreaker<StdClock, 100>> =
///     Arc::new(CircuitBreaker::new("pricing", BreakerConfig::DEFAULT, StdClock));
/// // The default of `BreakerLayer::new`.
/// let svc: BreakerService<_, _, 100, ErrorIsFailure> = BreakerLayer::new(breaker.clone())
///     .layer(tower::service_fn(|_sku: u32| async move { Err::<u32, _>("timeout") }));
/// assert!(svc.oneshot(7).await.is_err());
/// assert_eq!(breaker.metrics().failed_calls, 1);
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorIsFailure;

impl<T, E> Classify<T, E> for ErrorIsFailure {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        crate::breaker::err_is_failure(result)
    }
}
