//! What a call's result means to the breaker: the crate's one classifier
//! concept ([`Classify`], with [`ErrIsFailure`] its default), used by the
//! breaker's call future and, through it, by every future that wraps a call
//! in a breaker.

/// What a call's result means to the breaker: the caller decides.
///
/// An HTTP 404 is an answer ([`Success`](Outcome::Success)); a 503 or a
/// timeout is a [`Failure`](Outcome::Failure); a call cancelled by its own
/// caller, or refused for bad input before it reached the system, says
/// nothing about the system ([`Ignored`](Outcome::Ignored)).
///
/// # Examples
///
/// ```
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
/// use watertight::clock::ManualClock;
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let search: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("search", BreakerConfig::DEFAULT, &clock);
/// let classify = |r: &Result<u16, &str>| match r {
///     Ok(status) if *status >= 500 => Outcome::Failure,
///     Ok(_) => Outcome::Success,
///     Err(_bad_query) => Outcome::Ignored, // refused before it reached the system
/// };
/// for result in [Ok(404), Ok(503), Err("empty query")] {
///     let got = search.call_with(async move { result }, classify).await;
///     assert_eq!(got.is_ok(), result.is_ok()); // the result comes back as it was
/// }
/// let m = search.metrics();
/// assert_eq!((m.calls, m.failed_calls), (2, 1)); // the ignored call is not in the window
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The system answered.
    Success,
    /// The system failed.
    Failure,
    /// Not recorded; a half-open probe gives its slot back.
    Ignored,
}

/// Says what a call's result means to the breaker: an [`Outcome`].
///
/// Any `Fn(&Result<T, E>) -> Outcome` is a classifier; a type of its own
/// can be one too, to be named in a struct or shared between breakers.
/// [`ErrIsFailure`] is the default: an `Err` is a failure, an `Ok` a
/// success.
///
/// A classifier sees the result by reference and decides only what is
/// recorded: the result goes back to the caller as it was.
///
/// # Examples
///
/// A classifier type: a 5xx is a failure, a 429 says nothing (the system
/// is alive and shedding load), any other status is an answer:
///
/// ```
/// use watertight::breaker::Classify;
/// use watertight::clock::ManualClock;
/// use watertight::{BreakerConfig, CircuitBreaker, Outcome};
///
/// #[derive(Clone, Copy)]
/// struct ByStatus;
///
/// impl<E> Classify<u16, E> for ByStatus {
///     fn classify(&self, result: &Result<u16, E>) -> Outcome {
///         match result {
///             Ok(429) => Outcome::Ignored,
///             Ok(status) if *status >= 500 => Outcome::Failure,
///             Ok(_) => Outcome::Success,
///             Err(_) => Outcome::Failure,
///         }
///     }
/// }
///
/// # futures_lite::future::block_on(async {
/// let clock = ManualClock::new();
/// let search: CircuitBreaker<_, 64> =
///     CircuitBreaker::new("search", BreakerConfig::DEFAULT, &clock);
/// for status in [200, 429, 503] {
///     let got = search.call_classified(async move { Ok::<u16, ()>(status) }, ByStatus).await;
///     assert_eq!(got, Ok(status)); // the result comes back as it was
/// }
/// let m = search.metrics();
/// assert_eq!((m.calls, m.failed_calls), (2, 1)); // the 429 is not in the window
///
/// // A closure is a classifier too.
/// let lenient = |r: &Result<u16, ()>| match r {
///     Ok(_) => Outcome::Success,
///     Err(()) => Outcome::Ignored,
/// };
/// assert_eq!(lenient.classify(&Err(())), Outcome::Ignored);
/// # });
/// ```
pub trait Classify<T, E> {
    /// The outcome of `result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::Outcome;
    /// use watertight::breaker::{Classify, ErrIsFailure};
    ///
    /// assert_eq!(ErrIsFailure.classify(&Ok::<u16, ()>(503)), Outcome::Success);
    /// assert_eq!(ErrIsFailure.classify(&Err::<u16, ()>(())), Outcome::Failure);
    /// ```
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F: Fn(&Result<T, E>) -> Outcome> Classify<T, E> for F {
    // Always inlined, as the closure call it forwards to was.
    #[inline(always)]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier (of [`CircuitBreaker::call`](super::CircuitBreaker::call)):
/// an `Err` is a failure, an `Ok` a success, whatever it holds.
///
/// Zero-sized: a call future that holds it is no larger for it.
///
/// # Examples
///
/// ```
/// use core::future::Ready;
/// use watertight::breaker::{Classify, ErrIsFailure};
/// use watertight::clock::ManualClock;
/// use watertight::futures::Call;
/// use watertight::{BreakerConfig, CallError, CircuitBreaker, Outcome};
///
/// // An `Ok` is an answer, whatever it holds.
/// assert_eq!(ErrIsFailure.classify(&Ok::<u16, ()>(503)), Outcome::Success);
///
/// // Named, so the future of `call` can sit in a struct without a box.
/// type Lookup<'b> = Call<'b, CircuitBreaker<&'b ManualClock, 64>, Ready<Result<u32, &'static str>>, ErrIsFailure>;
///
/// let clock = ManualClock::new();
/// let stock: CircuitBreaker<_, 64> = CircuitBreaker::new("stock", BreakerConfig::DEFAULT, &clock);
/// let call: Lookup<'_> = stock.call(core::future::ready(Err("timeout")));
/// assert_eq!(futures_lite::future::block_on(call), Err(CallError::Failed("timeout")));
/// assert_eq!(stock.metrics().failed_calls, 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ErrIsFailure;

impl<T, E> Classify<T, E> for ErrIsFailure {
    #[inline(always)]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        err_is_failure(result)
    }
}

/// What [`ErrIsFailure`] says, as a function.
#[inline]
fn err_is_failure<T, E>(result: &Result<T, E>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}
