//! [`OutboundDeadlineLayer`]: a client sends what is left of the request's
//! [`Deadline`], minus a margin for the network, and stops waiting at the
//! deadline itself.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use http::Request;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::BudgetHeader;
use crate::clock::Timer;
use crate::deadline::{Deadline, Elapsed, Timeout};

/// The error of an [`OutboundDeadline`] client: the call was not sent (no
/// more than the margin was left), was cut at the deadline, or failed.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::tower::OutboundDeadlineError;
///
/// let e: OutboundDeadlineError<&str> = OutboundDeadlineError::Expired { left: Duration::from_millis(2) };
/// assert!(e.is_deadline());
/// assert_eq!(e.to_string(), "not sent: 2ms of budget left, no more than the margin");
/// assert_eq!(OutboundDeadlineError::Inner("reset").into_inner(), Some("reset"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutboundDeadlineError<E> {
    /// What was left of the deadline (`left`) was no more than the margin:
    /// the callee would have had nothing, so the request was not sent.
    Expired {
        /// What was left of the deadline when the call was made.
        left: Duration,
    },
    /// The deadline passed before the answer came: the call was dropped
    /// (for a client, that closes or resets its stream).
    Elapsed,
    /// The inner client's own error.
    Inner(E),
}

impl<E> OutboundDeadlineError<E> {
    /// Whether the call ran out of budget ([`Expired`](Self::Expired) or
    /// [`Elapsed`](Self::Elapsed)).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::OutboundDeadlineError;
    /// assert!(OutboundDeadlineError::<()>::Elapsed.is_deadline());
    /// assert!(!OutboundDeadlineError::Inner(()).is_deadline());
    /// ```
    pub const fn is_deadline(&self) -> bool {
        matches!(
            self,
            OutboundDeadlineError::Expired { .. } | OutboundDeadlineError::Elapsed
        )
    }

    /// The inner client's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::OutboundDeadlineError;
    /// assert_eq!(OutboundDeadlineError::Inner(7).into_inner(), Some(7));
    /// assert_eq!(OutboundDeadlineError::<u8>::Elapsed.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            OutboundDeadlineError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for OutboundDeadlineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutboundDeadlineError::Expired { left } => write!(
                f,
                "not sent: {left:?} of budget left, no more than the margin"
            ),
            OutboundDeadlineError::Elapsed => fmt::Display::fmt(&Elapsed, f),
            OutboundDeadlineError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for OutboundDeadlineError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            OutboundDeadlineError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

/// A [`Layer`] for clients: each request carries what is left of its
/// [`Deadline`], minus a margin, and the call ends at the deadline.
///
/// The deadline is the `Deadline<C>` in the request's extensions — put
/// there by the handler that makes the call (`Request::builder()
/// .extension(deadline)`), usually the one the
/// [`InboundDeadlineLayer`](super::InboundDeadlineLayer) started. An
/// extension rather than a task-local: it is explicit in the code that
/// makes the call, needs no runtime's task-locals, and a handler that
/// calls two systems can give each its own [`child`](Deadline::child).
/// For each request (`http::Request`: hyper's client, tonic's channel,
/// reqwest through a `service_fn`):
///
/// - **with a deadline**: `left = deadline.remaining()`; if `left` is no
///   more than the `margin`, the request is not sent
///   ([`OutboundDeadlineError::Expired`]); otherwise the [`BudgetHeader`]
///   is set to `left − margin` (rounded down, replacing any value), and
///   the call is dropped when the deadline — not the header's, the
///   caller's own — passes ([`OutboundDeadlineError::Elapsed`]);
/// - **without one**: passed through untouched, no header, no cut. The
///   extension is found by its type: a `Deadline` of another clock than
///   the layer's `C` is not seen (`OutboundDeadlineLayer::<TokioClock>`
///   finds a `Deadline<TokioClock>`, which is what the
///   [`InboundDeadlineLayer`](super::InboundDeadlineLayer) on `TokioClock`
///   makes).
///
/// The margin is what the request spends between this `call` and the
/// callee's reading of the header: connection set-up, the network each
/// way (the answer must come back too), queues in proxies. The callee
/// starts its clock when it reads the header, so without a margin its
/// deadline falls after the caller's by that transit time, and its
/// answer arrives after the caller gave up. A few milliseconds inside a
/// data centre; more across regions.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use core::time::Duration;
/// use http::Request;
/// use tower::{Layer, ServiceExt};
/// use watertight::clock::ManualClock;
/// use watertight::deadline::Deadline;
/// use watertight::tower::OutboundDeadlineLayer;
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// // A client that shows the header it was sent with.
/// let client = tower::service_fn(|req: Request<()>| async move {
///     Ok::<_, Infallible>(req.headers()["x-request-timeout-ms"].clone())
/// });
/// let svc = OutboundDeadlineLayer::<Arc<ManualClock>>::new(Duration::from_millis(10)).layer(client);
///
/// let deadline = Deadline::after(clock.clone(), Duration::from_millis(300));
/// clock.advance(Duration::from_millis(50));
/// let req = Request::builder().extension(deadline).body(()).unwrap();
/// // 250 ms left, minus the 10 ms margin.
/// assert_eq!(svc.oneshot(req).await.unwrap(), "240");
/// # });
/// ```
pub struct OutboundDeadlineLayer<C> {
    header: BudgetHeader,
    margin: Duration,
    clock: PhantomData<fn() -> C>,
}

impl<C> OutboundDeadlineLayer<C> {
    /// Sends the request's `Deadline<C>` (from its extensions) less
    /// `margin`, in [`BudgetHeader::millis`].
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::TokioClock;
    /// use watertight::tower::OutboundDeadlineLayer;
    ///
    /// let layer = OutboundDeadlineLayer::<TokioClock>::new(Duration::from_millis(5));
    /// # let _ = layer;
    /// ```
    pub fn new(margin: Duration) -> Self {
        OutboundDeadlineLayer {
            header: BudgetHeader::millis(),
            margin,
            clock: PhantomData,
        }
    }

    /// Sends the budget in `header` instead ([`BudgetHeader::grpc_timeout`]
    /// for a gRPC channel).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::TokioClock;
    /// use watertight::tower::{BudgetHeader, OutboundDeadlineLayer};
    ///
    /// let layer = OutboundDeadlineLayer::<TokioClock>::new(Duration::from_millis(5))
    ///     .header(BudgetHeader::grpc_timeout());
    /// # let _ = layer;
    /// ```
    pub fn header(mut self, header: BudgetHeader) -> Self {
        self.header = header;
        self
    }
}

impl<C> Clone for OutboundDeadlineLayer<C> {
    fn clone(&self) -> Self {
        OutboundDeadlineLayer {
            header: self.header.clone(),
            margin: self.margin,
            clock: PhantomData,
        }
    }
}

impl<C> fmt::Debug for OutboundDeadlineLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundDeadlineLayer")
            .field("header", &self.header)
            .field("margin", &self.margin)
            .finish()
    }
}

impl<S, C> Layer<S> for OutboundDeadlineLayer<C> {
    type Service = OutboundDeadline<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        OutboundDeadline {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of an [`OutboundDeadlineLayer`]. `Clone` when the inner
/// client is; no `Buffer` needed.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use core::time::Duration;
/// use http::Request;
/// use tower::Layer;
/// use watertight::clock::TokioClock;
/// use watertight::tower::{OutboundDeadline, OutboundDeadlineLayer};
///
/// let client: OutboundDeadline<_, TokioClock> = OutboundDeadlineLayer::new(Duration::from_millis(5))
///     .layer(tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(200u16) }));
/// let _copy = client.clone();
/// ```
pub struct OutboundDeadline<S, C> {
    inner: S,
    layer: OutboundDeadlineLayer<C>,
}

impl<S: Clone, C> Clone for OutboundDeadline<S, C> {
    fn clone(&self) -> Self {
        OutboundDeadline {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for OutboundDeadline<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundDeadline")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, C, B> Service<Request<B>> for OutboundDeadline<S, C>
where
    S: Service<Request<B>>,
    C: Timer + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = OutboundDeadlineError<S::Error>;
    type Future = OutboundDeadlineFuture<S::Future, C::Sleep, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(OutboundDeadlineError::Inner)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let Some(deadline) = req.extensions().get::<Deadline<C>>().cloned() else {
            return OutboundDeadlineFuture {
                state: State::Unbounded {
                    call: self.inner.call(req),
                },
            };
        };
        let left = deadline.remaining();
        let Some(send) = left.checked_sub(self.layer.margin).filter(|s| !s.is_zero()) else {
            return OutboundDeadlineFuture {
                state: State::Expired {
                    why: Some(OutboundDeadlineError::Expired { left }),
                },
            };
        };
        self.layer.header.write(req.headers_mut(), send);
        OutboundDeadlineFuture {
            state: State::Bounded {
                call: deadline.run(self.inner.call(req)),
            },
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, Z, E> {
        Bounded { #[pin] call: Timeout<F, Z> },
        Unbounded { #[pin] call: F },
        Expired { why: Option<OutboundDeadlineError<E>> },
    }
}

pin_project! {
    /// The response future of an [`OutboundDeadline`] client: the call
    /// bounded by the request's deadline (or unbounded, without one), or
    /// the refusal to send it. `Send` when the inner future is.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner call.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::sync::Arc;
    /// use core::time::Duration;
    /// use futures_lite::future::poll_once;
    /// use http::Request;
    /// use tower::{Layer, Service};
    /// use watertight::clock::ManualClock;
    /// use watertight::deadline::Deadline;
    /// use watertight::tower::{OutboundDeadlineError, OutboundDeadlineLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let hangs = tower::service_fn(|_: Request<()>| core::future::pending::<Result<(), Infallible>>());
    /// let mut client = OutboundDeadlineLayer::<Arc<ManualClock>>::new(Duration::from_millis(5)).layer(hangs);
    /// let deadline = Deadline::after(clock.clone(), Duration::from_millis(100));
    /// let req = Request::builder().extension(deadline).body(()).unwrap();
    /// let mut call = core::pin::pin!(client.call(req));
    /// assert!(poll_once(call.as_mut()).await.is_none());
    /// clock.advance(Duration::from_millis(100)); // the caller's deadline, not the header's
    /// assert_eq!(call.await, Err(OutboundDeadlineError::Elapsed));
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct OutboundDeadlineFuture<F, Z, E> {
        #[pin]
        state: State<F, Z, E>,
    }
}

impl<F, Z, R, E> Future for OutboundDeadlineFuture<F, Z, E>
where
    F: Future<Output = Result<R, E>>,
    Z: Future<Output = ()>,
{
    type Output = Result<R, OutboundDeadlineError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Bounded { call } => match call.poll(cx) {
                Poll::Ready(Ok(Ok(r))) => Poll::Ready(Ok(r)),
                Poll::Ready(Ok(Err(e))) => Poll::Ready(Err(OutboundDeadlineError::Inner(e))),
                Poll::Ready(Err(Elapsed)) => Poll::Ready(Err(OutboundDeadlineError::Elapsed)),
                Poll::Pending => Poll::Pending,
            },
            StateProj::Unbounded { call } => call.poll(cx).map_err(OutboundDeadlineError::Inner),
            // Polled again after completion: as a spent timeout answers.
            StateProj::Expired { why } => {
                Poll::Ready(Err(why.take().unwrap_or(OutboundDeadlineError::Elapsed)))
            }
        }
    }
}

impl<F, Z, E> fmt::Debug for OutboundDeadlineFuture<F, Z, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Bounded { .. } => "bounded",
            State::Unbounded { .. } => "unbounded",
            State::Expired { .. } => "expired",
        };
        f.debug_struct("OutboundDeadlineFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
