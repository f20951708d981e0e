//! [`Inject`]: the future of one call through an
//! [`Injector`](super::Injector).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::Fault;

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
        sleep: Option<S>,
        #[pin]
        fut: Option<F>,
        out: Option<O>,
        fault: Option<Fault>,
    }
}

impl<F, S, O> Inject<F, S, O> {
    pub(super) fn pass(fut: F) -> Self {
        Inject {
            sleep: None,
            fut: Some(fut),
            out: None,
            fault: None,
        }
    }

    pub(super) fn delayed(sleep: S, fut: F) -> Self {
        Inject {
            sleep: Some(sleep),
            fut: Some(fut),
            out: None,
            fault: Some(Fault::Latency),
        }
    }

    pub(super) fn replaced(fault: Fault, out: O) -> Self {
        Inject {
            sleep: None,
            fut: None,
            out: Some(out),
            fault: Some(fault),
        }
    }

    pub(super) fn hang() -> Self {
        Inject {
            sleep: None,
            fut: None,
            out: None,
            fault: Some(Fault::Hang),
        }
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
        self.fault
    }
}

impl<F, S, O> fmt::Debug for Inject<F, S, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inject")
            .field("fault", &self.fault)
            .field("sleeping", &self.sleep.is_some())
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
        let mut this = self.project();
        if let Some(sleep) = this.sleep.as_mut().as_pin_mut() {
            core::task::ready!(sleep.poll(cx));
            this.sleep.set(None);
        }
        if let Some(fut) = this.fut.as_pin_mut() {
            return fut.poll(cx);
        }
        match this.out.take() {
            Some(out) => Poll::Ready(out),
            // A hang, or polled again after its injected value: nothing
            // will ever wake it, and nothing needs to.
            None => Poll::Pending,
        }
    }
}
