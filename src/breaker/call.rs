//! The future of `CircuitBreaker::call`: a call wrapped in the breaker,
//! through the permit protocol's seam ([`Admission`]).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::classify::Classify;
use super::error::CallError;
use super::permit::{Admission, Guard};

pin_project_lite::pin_project! {
    /// The future of [`CircuitBreaker::call`](super::CircuitBreaker::call),
    /// [`call_with`](super::CircuitBreaker::call_with) and
    /// [`call_classified`](super::CircuitBreaker::call_classified): `B` is
    /// the breaker's type, `F` the call, `K` the classifier (a
    /// [`Classify`]; [`ErrIsFailure`](super::ErrIsFailure) for `call`).
    ///
    /// # Cancel safety
    ///
    /// Dropping it before it completes drops the call and records nothing;
    /// a half-open probe slot it held is given back. Under `std`, a call
    /// (or classifier) that panics records a failure as the panic unwinds
    /// out of `poll`, however the panic is caught.
    ///
    /// # Examples
    ///
    /// The breaker is asked on the first poll, not when the future is made:
    ///
    /// ```
    /// use futures_lite::future::block_on;
    /// use watertight::clock::ManualClock;
    /// use watertight::{BreakerConfig, CallError, CircuitBreaker, Rejection};
    ///
    /// let clock = ManualClock::new();
    /// let breaker: CircuitBreaker<_, 64> =
    ///     CircuitBreaker::new("ledger", BreakerConfig::DEFAULT, &clock);
    /// let call = breaker.call(async { Ok::<_, ()>(42) });
    /// breaker.force_open(); // before the first poll
    /// assert_eq!(block_on(call), Err(CallError::Rejected(Rejection::ForcedOpen)));
    /// breaker.reset();
    /// assert_eq!(block_on(breaker.call(async { Ok::<_, ()>(42) })), Ok(42));
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Call<'a, B: Guard, F, K> {
        breaker: &'a B,
        #[pin]
        call: F,
        // The permit while the call is pending, and the classifier.
        admission: Admission<K>,
    }

    impl<'a, B: Guard, F, K> PinnedDrop for Call<'a, B, F, K> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.admission.abandon(*this.breaker);
        }
    }
}

impl<'a, B: Guard, F, K> Call<'a, B, F, K> {
    /// The call `call` on `breaker`, classified by `classify`: the breaker
    /// is asked at the first poll.
    #[inline(always)]
    pub(super) fn new(breaker: &'a B, call: F, classify: K) -> Self {
        Call {
            breaker,
            call,
            admission: Admission::new(classify),
        }
    }
}

impl<B: Guard, F, K, T, E> Future for Call<'_, B, F, K>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    type Output = Result<T, CallError<E>>;

    // Always inlined: with `#[inline]`, LLVM kept it out of line as soon as
    // one program polled the same `Call` type from two places, and a ready
    // call then cost 99 instructions instead of 60 (the future passed by
    // address, its output through memory). The slow paths are out of line,
    // so what is inlined is the fast path. Where panics abort (firmware),
    // `#[inline]` as before: there the size counts, and without landing pads
    // an out-of-line poll costs less.
    #[cfg_attr(panic = "unwind", inline(always))]
    #[cfg_attr(not(panic = "unwind"), inline)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The breaker is read before anything is called, so it is known to
        // the optimiser (reloaded through a store, it was not); the seam
        // keeps the classifier and the permit out of the future while the
        // call is polled (see `Admission::poll_with`).
        let breaker: &B = this.breaker;
        if this.admission.is_done() {
            panic!("`Call` polled after completion");
        }
        match this.admission.poll(breaker, this.call, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(result)) => Poll::Ready(result.map_err(CallError::Failed)),
            Poll::Ready(Err(why)) => Poll::Ready(Err(CallError::Rejected(why))),
        }
    }
}

impl<B: Guard, F, K> fmt::Debug for Call<'_, B, F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = self.admission.is_done();
        f.debug_struct("Call")
            .field("started", &(self.admission.is_admitted() || done))
            .field("done", &done)
            .finish_non_exhaustive()
    }
}
