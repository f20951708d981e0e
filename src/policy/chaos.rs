//! A policy call with faults injected at its start (feature `chaos`):
//! [`Policy::call_injected`] and its starter, [`Injected`].

use core::fmt;
use core::future::Future;
use core::task::{Context, Poll};

use super::call::{Dispatch, Make, PolicyCall, Spare};
use super::Policy;
use crate::breaker::{ErrIsFailure, WindowStorage};
use crate::chaos::{Fault, Injector};
use crate::clock::{Clock, Timer};

/// Where an [`Injected`] start is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Not drawn yet.
    Fresh,
    /// An injected latency, sleeping in the policy's spare sleep.
    Sleeping,
    /// Decided: the call is to be made (passed, or its latency slept).
    Passed,
    /// Made: the policy polls the call's own future.
    Made,
    /// An injected hang: never started.
    Hung,
}

/// The start of [`Policy::call_injected`]: the closure that makes the
/// call, and the injector that decides, once the policy has let the call
/// through, whether the call is made.
///
/// The call's own future is the one the policy polls: there is no wrapper
/// future around it. An injected error or outcome is handed to the policy
/// in place of the call's result (the closure is not called); a latency
/// is slept in the policy's own idle slot-wait sleep, on the policy's
/// clock, and then the call is made; a hang never starts the call.
///
/// # Examples
///
/// ```
/// use watertight::chaos::{ChaosConfig, Injector};
/// use watertight::clock::ManualClock;
/// use watertight::policy::{Policy, PolicyConfig};
///
/// let clock = ManualClock::new();
/// let p: Policy<_> = Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
/// let config = ChaosConfig::builder().error(1.0, || Err("injected")).build().unwrap();
/// let chaos = Injector::new("pricing", config, &clock);
/// let call = p.call_injected(&chaos, || async { Ok::<u32, &str>(7) });
/// assert!(format!("{:?}", call).starts_with("PolicyCall"));
/// ```
pub struct Injected<'a, C, O, F> {
    chaos: &'a Injector<C, O>,
    make: Make<F>,
    stage: Stage,
}

impl<C, O, F> fmt::Debug for Injected<'_, C, O, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injected")
            .field("chaos", &self.chaos.name())
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

impl<C, O, F, Fut> Dispatch for Injected<'_, C, O, F>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = O>,
{
    type Future = Fut;

    #[inline]
    fn poll_dispatch(&mut self, cx: &mut Context<'_>) -> Poll<Result<Fut, O>> {
        self.stage = Stage::Made;
        self.make.poll_dispatch(cx)
    }

    // The one thing a disabled injector does on the policy's hot path: a
    // load and a branch. The rest (a draw, a fault) is `poll_before`, out
    // of line, and only decides whether the call is made.
    #[inline(always)]
    fn before(&self) -> bool {
        match self.stage {
            Stage::Fresh => self.chaos.is_enabled(),
            Stage::Sleeping | Stage::Hung => true,
            Stage::Passed | Stage::Made => false,
        }
    }

    // A first poll while enabled (its draw), or a later one: `Ok` to make
    // the call now, `Err` with an injected error or outcome in its place,
    // `Pending` during a latency or a hang. Reached only through the
    // policy's out-of-line poll for such starts.
    fn poll_before<T: Timer>(
        &mut self,
        spare: Spare<'_, T>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), O>> {
        let Spare { clock, mut sleep } = spare;
        match self.stage {
            Stage::Fresh => match self.chaos.draw() {
                // Passed, or disabled since the flag was read.
                None => {
                    self.stage = Stage::Passed;
                    Poll::Ready(Ok(()))
                }
                Some(Fault::Latency) => {
                    let until = clock.now().saturating_add(self.chaos.latency());
                    sleep.set(Some(clock.sleep_until(until)));
                    self.stage = Stage::Sleeping;
                    self.poll_before(Spare { clock, sleep }, cx)
                }
                Some(Fault::Hang) => {
                    self.stage = Stage::Hung;
                    Poll::Pending
                }
                Some(fault @ (Fault::Error | Fault::Outcome)) => match self.chaos.made(fault) {
                    Some(out) => Poll::Ready(Err(out)),
                    // Not reached: the builder sets a rate above zero only
                    // with its maker. Were it, the call would be made.
                    None => {
                        self.stage = Stage::Passed;
                        Poll::Ready(Ok(()))
                    }
                },
            },
            Stage::Sleeping => {
                if let Some(s) = sleep.as_mut().as_pin_mut() {
                    core::task::ready!(s.poll(cx));
                    sleep.set(None);
                }
                self.stage = Stage::Passed;
                Poll::Ready(Ok(()))
            }
            // Nothing will ever wake a hang, and nothing needs to: the
            // policy's call timeout (or the caller's budget) ends it.
            Stage::Hung => Poll::Pending,
            // Not asked: `before` says there is nothing to do.
            Stage::Passed | Stage::Made => Poll::Ready(Ok(())),
        }
    }
}

impl<C: Timer + Clone, const N: usize, W: WindowStorage, B: Clock> Policy<C, N, W, B> {
    /// Like [`call`](Self::call), with faults injected by `chaos` where the
    /// call starts (feature `chaos`): once the policy has let the call
    /// through (a slot, the breaker's permit), the injector draws, and the
    /// call is made untouched, made after the injected latency (slept on
    /// the policy's clock, under the call timeout), replaced by the
    /// injected error or outcome (the closure not called; the breaker
    /// judges it as the call's result), or never made (a hang, ended by
    /// the call timeout as a failure).
    ///
    /// The injector's output type is the call's, `Result<T, E>`. A refused
    /// call (bulkhead full, circuit open) takes no draw.
    ///
    /// Unlike `policy.call(|| chaos.inject(fut))`, no future wraps the
    /// call's: disabled, the injector costs one relaxed load and a branch
    /// ([the table](crate::guide::benchmarks#fault-injection)).
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call); an injected error is the call's own error
    /// ([`ErrorKind::Call`](super::ErrorKind::Call)), a hang or a latency
    /// past the call timeout is [`ErrorKind::DeadlineExceeded`](super::ErrorKind::DeadlineExceeded).
    ///
    /// # Cancel safety
    ///
    /// As [`call`](Self::call); dropped during an injected latency, the
    /// sleep is dropped with it and the call is never made.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// use watertight::clock::ManualClock;
    /// use watertight::policy::{Policy, PolicyConfig};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let p: Policy<_> = Policy::new("pricing", PolicyConfig::builder(4).build().unwrap(), &clock).unwrap();
    /// let config = ChaosConfig::builder().error(0.5, || Err("reset")).seed(7).build().unwrap();
    /// let chaos = Injector::new("pricing", config, &clock);
    /// let mut made = 0;
    /// for _ in 0..10 {
    ///     let _ = p.call_injected(&chaos, || { made += 1; async { Ok::<u32, &str>(1) } }).await;
    /// }
    /// let m = chaos.metrics();
    /// assert_eq!(made + m.injected(Fault::Error), 10); // an injected error is never a call
    /// assert_eq!(p.breaker().metrics().failed_calls, m.injected(Fault::Error));
    /// # });
    /// ```
    pub fn call_injected<'a, F, Fut, T, E, C2>(
        &'a self,
        chaos: &'a Injector<C2, Result<T, E>>,
        make: F,
    ) -> PolicyCall<&'a Self, Injected<'a, C2, Result<T, E>, F>, ErrIsFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let start = Injected {
            chaos,
            make: Make(Some(make)),
            stage: Stage::Fresh,
        };
        PolicyCall::new(self, None, start, ErrIsFailure)
    }
}
