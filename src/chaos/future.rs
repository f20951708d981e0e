//! [`Inject`]: the future of one call through an
//! [`Injector`](super::Injector).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Fault;

pin_project! {
    #[project = StateProj]
    enum State<F, S, O> {
        // Passed: the call itself.
        Pass { #[pin] fut: F },
        // The latency's sleep, then the call (made already, polled after).
        Delay { #[pin] sleep: S, #[pin] fut: F, slept: bool },
        // An injected error or outcome: ready on the first poll.
        Replaced { out: Option<O>, fault: Fault },
        // Never ready.
        Hang,
    }
}

pin_project! {
    /// One call through an [`Injector`](super::Injector): the call itself,
    /// the call after an injected latency, an injected error or outcome
    /// (ready on the first poll, the call not made), or an injected hang
    /// (never ready). Allocates nothing; `Send` when the call's future, its
    /// output and the clock's sleep are.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point is safe and drops the call (and the
    /// latency's sleep) with it. A hang is meant to be dropped: by the
    /// caller's deadline, such as [`deadline::timeout`](crate::deadline::timeout)
    /// or a [`Policy`](crate::Policy)'s call timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// use watertight::clock::ManualClock;
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().error(1.0, || Err("injected")).seed(1).build().unwrap();
    /// let chaos = Injector::new("pricing", config, &clock);
    /// let call = chaos.inject(async { Ok::<u32, &str>(42) });
    /// assert_eq!(call.fault(), Some(Fault::Error));
    /// assert_eq!(call.await, Err("injected"));
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Inject<F, S, O> {
        #[pin]
        state: State<F, S, O>,
    }
}

impl<F, S, O> Inject<F, S, O> {
    #[inline]
    pub(super) fn pass(fut: F) -> Self {
        Inject {
            state: State::Pass { fut },
        }
    }

    #[inline]
    pub(super) fn delayed(sleep: S, fut: F) -> Self {
        Inject {
            state: State::Delay {
                sleep,
                fut,
                slept: false,
            },
        }
    }

    #[inline]
    pub(super) fn replaced(fault: Fault, out: O) -> Self {
        Inject {
            state: State::Replaced {
                out: Some(out),
                fault,
            },
        }
    }

    #[inline]
    pub(super) fn hang() -> Self {
        Inject { state: State::Hang }
    }

    /// The fault this call got, or `None` if it passes untouched.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::chaos::{ChaosConfig, Fault, Injector};
    /// use watertight::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let config = ChaosConfig::builder().latency(1.0, Duration::from_secs(1)).build().unwrap();
    /// let chaos = Injector::new("db", config, &clock);
    /// assert_eq!(chaos.inject(async {}).fault(), Some(Fault::Latency));
    /// chaos.disable();
    /// assert_eq!(chaos.inject(async {}).fault(), None);
    /// ```
    pub fn fault(&self) -> Option<Fault> {
        match &self.state {
            State::Pass { .. } => None,
            State::Delay { .. } => Some(Fault::Latency),
            State::Replaced { fault, .. } => Some(*fault),
            State::Hang => Some(Fault::Hang),
        }
    }
}

impl<F, S, O> fmt::Debug for Inject<F, S, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sleeping = matches!(self.state, State::Delay { slept: false, .. });
        f.debug_struct("Inject")
            .field("fault", &self.fault())
            .field("sleeping", &sleeping)
            .finish_non_exhaustive()
    }
}

impl<F, S, O> Future for Inject<F, S, O>
where
    F: Future<Output = O>,
    S: Future<Output = ()>,
{
    type Output = O;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        match self.project().state.project() {
            // The one path a disabled injector takes, kept to a compare.
            StateProj::Pass { fut } => fut.poll(cx),
            faulted => poll_faulted(faulted, cx),
        }
    }
}

/// An injected latency (its sleep, then the call), an injected error or
/// outcome (ready once), or a hang (never ready): out of line, so that the
/// pass path stays small in the caller's poll.
#[cold]
#[inline(never)]
fn poll_faulted<F, S, O>(state: StateProj<'_, F, S, O>, cx: &mut Context<'_>) -> Poll<O>
where
    F: Future<Output = O>,
    S: Future<Output = ()>,
{
    match state {
        StateProj::Pass { fut } => fut.poll(cx),
        StateProj::Delay { sleep, fut, slept } => {
            if !*slept {
                core::task::ready!(sleep.poll(cx));
                *slept = true;
            }
            fut.poll(cx)
        }
        StateProj::Replaced { out, .. } => match out.take() {
            Some(out) => Poll::Ready(out),
            // Polled again after its value: never ready again.
            None => Poll::Pending,
        },
        // Nothing will ever wake it, and nothing needs to.
        StateProj::Hang => Poll::Pending,
    }
}
