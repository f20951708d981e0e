//! [`InboundDeadlineLayer`]: a server starts each request's [`Deadline`]
//! from the budget its caller sent, refuses the requests it cannot finish
//! in time, and stops the handler when the budget runs out.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use http::Request;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::BudgetHeader;
use crate::clock::Timer;
use crate::deadline::wire::ParseError;
use crate::deadline::{Deadline, Elapsed, Timeout};

/// The error of an [`InboundDeadline`] service: the request was refused
/// (its budget header is garbled, or too little of its budget is left to
/// be worth starting), the handler ran out of time, or it failed.
///
/// Map it to a response with axum's `HandleErrorLayer` (or tonic's
/// `Status`): [`Malformed`](Self::Malformed) is 400 /
/// `INVALID_ARGUMENT`; [`Refused`](Self::Refused) is 503 /
/// `DEADLINE_EXCEEDED`, answered at once; [`Elapsed`](Self::Elapsed) is
/// 504 / `DEADLINE_EXCEEDED`, answered at the deadline — to a caller that
/// has most likely stopped waiting, but its proxies and its logs see why.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::deadline::wire::ParseError;
/// use watertight::tower::InboundDeadlineError;
///
/// let refused: InboundDeadlineError<&str> = InboundDeadlineError::Refused { budget: Duration::from_millis(3) };
/// assert!(refused.is_deadline());
/// assert_eq!(refused.to_string(), "refused: 3ms of budget left is below the request's minimum cost");
/// let garbled: InboundDeadlineError<&str> = InboundDeadlineError::Malformed(ParseError::Negative);
/// assert_eq!(garbled.to_string(), "budget header is negative");
/// assert_eq!(InboundDeadlineError::Inner("db down").into_inner(), Some("db down"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboundDeadlineError<E> {
    /// The budget header is not a budget: the handler was not called.
    Malformed(ParseError),
    /// What is left of the budget (`budget`: the smaller of the caller's
    /// and the server's maximum) is zero or below the configured minimum
    /// cost: the handler was not called.
    Refused {
        /// The budget the request came with, capped at the server's maximum.
        budget: Duration,
    },
    /// The handler ran until the deadline and was stopped (its future
    /// dropped).
    Elapsed,
    /// The handler's own error.
    Inner(E),
}

impl<E> InboundDeadlineError<E> {
    /// Whether the request ran out of budget, before or during the
    /// handler ([`Refused`](Self::Refused) or [`Elapsed`](Self::Elapsed)):
    /// gRPC's `DEADLINE_EXCEEDED`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::deadline::wire::ParseError;
    /// use watertight::tower::InboundDeadlineError;
    /// assert!(InboundDeadlineError::<()>::Elapsed.is_deadline());
    /// assert!(!InboundDeadlineError::<()>::Malformed(ParseError::Empty).is_deadline());
    /// ```
    pub const fn is_deadline(&self) -> bool {
        matches!(
            self,
            InboundDeadlineError::Refused { .. } | InboundDeadlineError::Elapsed
        )
    }

    /// The handler's error, if it failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::tower::InboundDeadlineError;
    /// assert_eq!(InboundDeadlineError::Inner(7).into_inner(), Some(7));
    /// assert_eq!(InboundDeadlineError::<u8>::Elapsed.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            InboundDeadlineError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for InboundDeadlineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InboundDeadlineError::Malformed(e) => fmt::Display::fmt(e, f),
            InboundDeadlineError::Refused { budget } => write!(
                f,
                "refused: {budget:?} of budget left is below the request's minimum cost"
            ),
            InboundDeadlineError::Elapsed => fmt::Display::fmt(&Elapsed, f),
            InboundDeadlineError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for InboundDeadlineError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            InboundDeadlineError::Malformed(e) => Some(e),
            InboundDeadlineError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

/// A [`Layer`] for servers: each request's [`Deadline`] starts from the
/// budget its caller sent.
///
/// For each `http::Request` (axum, hyper, tonic):
///
/// 1. reads the [`BudgetHeader`] (`x-request-timeout-ms` unless set with
///    [`header`](Self::header)); a garbled value is refused
///    ([`InboundDeadlineError::Malformed`]);
/// 2. the budget is the smaller of the header's and the server's own
///    `max` (`max` alone without the header), and the request's
///    `Deadline` starts now;
/// 3. **admission**: a budget of zero, or below the [`min_cost`](Self::min_cost)
///    (what the cheapest useful answer takes), is refused at once
///    ([`InboundDeadlineError::Refused`]) — no work is started for a
///    caller who will have given up before it could end;
/// 4. the `Deadline<C>` goes into the request's extensions, for the
///    handler (axum: `Extension<Deadline<TokioClock>>`) to bound its own
///    calls by and to hand to the [`OutboundDeadlineLayer`](super::OutboundDeadlineLayer)
///    of its clients;
/// 5. the handler runs until the deadline at most: then its future is
///    dropped and the answer is [`InboundDeadlineError::Elapsed`].
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
/// use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer};
///
/// # futures_lite::future::block_on(async {
/// let clock = Arc::new(ManualClock::new());
/// let layer = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(2))
///     .min_cost(Duration::from_millis(20));
/// let handler = tower::service_fn(|req: Request<()>| async move {
///     let deadline = req.extensions().get::<Deadline<Arc<ManualClock>>>().unwrap();
///     Ok::<_, Infallible>(deadline.remaining())
/// });
/// let svc = layer.layer(handler);
///
/// // The caller has 300 ms left: so has the handler.
/// let req = Request::builder().header("x-request-timeout-ms", "300").body(()).unwrap();
/// assert_eq!(svc.clone().oneshot(req).await, Ok(Duration::from_millis(300)));
/// // No header: the server's own maximum.
/// assert_eq!(svc.clone().oneshot(Request::new(())).await, Ok(Duration::from_secs(2)));
/// // 5 ms left, the cheapest answer takes 20: refused without calling the handler.
/// let req = Request::builder().header("x-request-timeout-ms", "5").body(()).unwrap();
/// assert_eq!(
///     svc.oneshot(req).await,
///     Err(InboundDeadlineError::Refused { budget: Duration::from_millis(5) })
/// );
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct InboundDeadlineLayer<C> {
    clock: C,
    header: BudgetHeader,
    max: Duration,
    min_cost: Duration,
}

impl<C> InboundDeadlineLayer<C> {
    /// Deadlines on `clock`, each request given at most `max` (the
    /// server's own budget, also what a request without the header gets);
    /// the header is [`BudgetHeader::millis`]; every non-zero budget is
    /// admitted (so a `max` of zero refuses every request).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::TokioClock;
    /// use watertight::tower::InboundDeadlineLayer;
    ///
    /// let layer = InboundDeadlineLayer::new(TokioClock, Duration::from_millis(1500));
    /// # let _ = layer;
    /// ```
    pub fn new(clock: C, max: Duration) -> Self {
        InboundDeadlineLayer {
            clock,
            header: BudgetHeader::millis(),
            max,
            min_cost: Duration::ZERO,
        }
    }

    /// Reads the budget from `header` instead ([`BudgetHeader::grpc_timeout`]
    /// for gRPC).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::TokioClock;
    /// use watertight::tower::{BudgetHeader, InboundDeadlineLayer};
    ///
    /// let grpc = InboundDeadlineLayer::new(TokioClock, Duration::from_secs(5))
    ///     .header(BudgetHeader::grpc_timeout());
    /// # let _ = grpc;
    /// ```
    pub fn header(mut self, header: BudgetHeader) -> Self {
        self.header = header;
        self
    }

    /// Refuses a request whose budget is below `min_cost`: what the
    /// cheapest useful answer takes this server (its typical latency, or
    /// the median of its fastest endpoint). Zero, the default, refuses
    /// only a spent budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::clock::TokioClock;
    /// use watertight::tower::InboundDeadlineLayer;
    ///
    /// // A lookup takes 20 ms; less than that left is a request nobody will wait for.
    /// let layer = InboundDeadlineLayer::new(TokioClock, Duration::from_secs(1))
    ///     .min_cost(Duration::from_millis(20));
    /// # let _ = layer;
    /// ```
    pub fn min_cost(mut self, min_cost: Duration) -> Self {
        self.min_cost = min_cost;
        self
    }
}

impl<S, C: Clone> Layer<S> for InboundDeadlineLayer<C> {
    type Service = InboundDeadline<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        InboundDeadline {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of an [`InboundDeadlineLayer`]. `Clone` when the inner
/// service is; no `Buffer` needed.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use core::time::Duration;
/// use http::Request;
/// use tower::Layer;
/// use watertight::clock::TokioClock;
/// use watertight::tower::{InboundDeadline, InboundDeadlineLayer};
///
/// let svc: InboundDeadline<_, TokioClock> = InboundDeadlineLayer::new(TokioClock, Duration::from_secs(1))
///     .layer(tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>("hi") }));
/// let _copy = svc.clone();
/// ```
#[derive(Debug, Clone)]
pub struct InboundDeadline<S, C> {
    inner: S,
    layer: InboundDeadlineLayer<C>,
}

impl<S, C, B> Service<Request<B>> for InboundDeadline<S, C>
where
    S: Service<Request<B>>,
    C: Timer + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = InboundDeadlineError<S::Error>;
    type Future = InboundDeadlineFuture<S::Future, C::Sleep, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(InboundDeadlineError::Inner)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let l = &self.layer;
        let budget = match l.header.read(req.headers()) {
            Ok(Some(asked)) => asked.min(l.max),
            Ok(None) => l.max,
            Err(e) => return InboundDeadlineFuture::refused(InboundDeadlineError::Malformed(e)),
        };
        if budget.is_zero() || budget < l.min_cost {
            return InboundDeadlineFuture::refused(InboundDeadlineError::Refused { budget });
        }
        let deadline = Deadline::after(l.clock.clone(), budget);
        req.extensions_mut().insert(deadline.clone());
        InboundDeadlineFuture {
            state: State::Running {
                call: deadline.run(self.inner.call(req)),
            },
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, Z, E> {
        Running { #[pin] call: Timeout<F, Z> },
        Refused { why: Option<InboundDeadlineError<E>> },
    }
}

pin_project! {
    /// The response future of an [`InboundDeadline`] service: the handler
    /// bounded by the request's deadline, or the refusal. `Send` when the
    /// handler's future is.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the handler's future.
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
    /// use watertight::tower::{InboundDeadlineError, InboundDeadlineLayer};
    ///
    /// # futures_lite::future::block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let mut svc = InboundDeadlineLayer::new(clock.clone(), Duration::from_secs(1))
    ///     .layer(tower::service_fn(|_: Request<()>| core::future::pending::<Result<(), Infallible>>()));
    /// let req = Request::builder().header("x-request-timeout-ms", "300").body(()).unwrap();
    /// let mut call = core::pin::pin!(svc.call(req));
    /// assert!(poll_once(call.as_mut()).await.is_none()); // the handler is working
    /// clock.advance(Duration::from_millis(300));
    /// assert_eq!(call.await, Err(InboundDeadlineError::Elapsed)); // and was stopped
    /// # });
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct InboundDeadlineFuture<F, Z, E> {
        #[pin]
        state: State<F, Z, E>,
    }
}

impl<F, Z, E> InboundDeadlineFuture<F, Z, E> {
    fn refused(why: InboundDeadlineError<E>) -> Self {
        InboundDeadlineFuture {
            state: State::Refused { why: Some(why) },
        }
    }
}

impl<F, Z, R, E> Future for InboundDeadlineFuture<F, Z, E>
where
    F: Future<Output = Result<R, E>>,
    Z: Future<Output = ()>,
{
    type Output = Result<R, InboundDeadlineError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Running { call } => match call.poll(cx) {
                Poll::Ready(Ok(Ok(r))) => Poll::Ready(Ok(r)),
                Poll::Ready(Ok(Err(e))) => Poll::Ready(Err(InboundDeadlineError::Inner(e))),
                Poll::Ready(Err(Elapsed)) => Poll::Ready(Err(InboundDeadlineError::Elapsed)),
                Poll::Pending => Poll::Pending,
            },
            // Polled again after completion: the same answer as a spent
            // timeout gives.
            StateProj::Refused { why } => {
                Poll::Ready(Err(why.take().unwrap_or(InboundDeadlineError::Elapsed)))
            }
        }
    }
}

impl<F, Z, E> fmt::Debug for InboundDeadlineFuture<F, Z, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let running = matches!(self.state, State::Running { .. });
        f.debug_struct("InboundDeadlineFuture")
            .field("running", &running)
            .finish_non_exhaustive()
    }
}
