//! Hand-made wakers and a hand-polled task for deterministic tests.
//!
//! Every helper is plain safe std: a [`Probe`] is a waker that counts its
//! wake-ups, so a test can assert *who* a release, a close or a clock advance
//! woke, and a [`Task`] is a boxed future polled with its own probe, so a
//! test can drop it (cancel it) at any point.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Counts calls to `wake` / `wake_by_ref`.
#[derive(Debug, Default)]
struct WakeCounter(AtomicUsize);

impl Wake for WakeCounter {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker that counts how often it was woken.
#[derive(Debug, Clone)]
pub struct Probe {
    counter: Arc<WakeCounter>,
    waker: Waker,
}

impl Default for Probe {
    fn default() -> Self {
        Self::new()
    }
}

impl Probe {
    /// A fresh probe, woken zero times.
    pub fn new() -> Self {
        let counter = Arc::new(WakeCounter::default());
        let waker = Waker::from(Arc::clone(&counter));
        Probe { counter, waker }
    }

    /// The waker to poll with.
    pub fn waker(&self) -> &Waker {
        &self.waker
    }

    /// How many times the waker has been woken so far.
    pub fn wakes(&self) -> usize {
        self.counter.0.load(Ordering::SeqCst)
    }

    /// Whether the waker has been woken at least once.
    pub fn woken(&self) -> bool {
        self.wakes() > 0
    }

    /// Polls `fut` once with this probe's waker.
    pub fn poll<F: Future + ?Sized>(&self, fut: Pin<&mut F>) -> Poll<F::Output> {
        fut.poll(&mut Context::from_waker(&self.waker))
    }
}

/// Polls `fut` once with a waker that does nothing.
pub fn poll_noop<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls a future that must complete on its first poll and returns its output.
#[track_caller]
pub fn now_or_never<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    match poll_noop(fut.as_mut()) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("expected the future to complete on its first poll"),
    }
}

/// A future on the heap with its own counting waker, polled by hand; drop the
/// task to cancel the future.
pub struct Task<F: Future> {
    fut: Pin<Box<F>>,
    probe: Probe,
}

impl<F: Future> Task<F> {
    /// Wraps `fut` without polling it.
    pub fn new(fut: F) -> Self {
        Task {
            fut: Box::pin(fut),
            probe: Probe::new(),
        }
    }

    /// Wraps `fut` and polls it once, asserting that it is pending.
    #[track_caller]
    pub fn pending(fut: F) -> Self {
        let mut task = Self::new(fut);
        task.assert_pending();
        task
    }

    /// Polls once.
    pub fn poll(&mut self) -> Poll<F::Output> {
        self.probe.poll(self.fut.as_mut())
    }

    /// Polls once and asserts that the future is still pending.
    #[track_caller]
    pub fn assert_pending(&mut self) {
        assert!(self.poll().is_pending(), "expected the task to be pending");
    }

    /// Polls once and returns the output, asserting that the future is ready.
    #[track_caller]
    pub fn ready(&mut self) -> F::Output {
        match self.poll() {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("expected the task to be ready"),
        }
    }

    /// How many times the task's waker has been woken.
    pub fn wakes(&self) -> usize {
        self.probe.wakes()
    }

    /// Whether the task's waker has been woken at least once.
    pub fn woken(&self) -> bool {
        self.probe.woken()
    }
}
