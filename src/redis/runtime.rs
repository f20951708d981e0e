//! What the global bulkhead runs on: a clock with a timer, and a place to
//! spawn its tasks (the keeper and each acquire command).

use core::future::Future;

use crate::clock::Timer;
#[cfg(feature = "tokio")]
use crate::clock::TokioClock;

mod sealed {
    pub trait Sealed {}
}

/// A runtime a [`GlobalBulkhead`](super::GlobalBulkhead) runs on: its clock
/// times the waits, the store timeouts and the leases, and its executor
/// runs the keeper task and each acquire command. redis-rs speaks to Redis
/// on tokio and on smol, so these are the two:
///
/// | runtime | type | feature |
/// |---|---|---|
/// | tokio | [`TokioClock`] | `redis` |
/// | smol (and async-std, through smol's global executor) | [`AsyncIoClock`](crate::clock::AsyncIoClock) | `redis-smol` |
///
/// Sealed: redis-rs supports no other runtime.
///
/// # Examples
///
/// ```
/// use watertight::clock::TokioClock;
/// use watertight::redis::Runtime;
///
/// fn on_tokio<R: Runtime>(_: R) {}
/// on_tokio(TokioClock);
/// ```
pub trait Runtime: Timer<Sleep: Send> + sealed::Sealed + Clone + Send + Sync + 'static {
    /// Runs `task` to completion in the background.
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::redis::Runtime;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (tx, rx) = tokio::sync::oneshot::channel();
    /// TokioClock.spawn(async move { tx.send(7).unwrap() });
    /// assert_eq!(rx.await, Ok(7));
    /// # });
    /// ```
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F);

    /// Whether tasks can be spawned from here (tokio: inside a runtime).
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::clock::TokioClock;
    /// use watertight::redis::Runtime;
    ///
    /// assert!(!TokioClock.can_spawn());
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// assert!(TokioClock.can_spawn());
    /// # });
    /// ```
    fn can_spawn(&self) -> bool;
}

#[cfg(feature = "tokio")]
impl sealed::Sealed for TokioClock {}

/// Tasks go to the current tokio runtime (`tokio::spawn`).
#[cfg(feature = "tokio")]
impl Runtime for TokioClock {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        drop(tokio::spawn(task));
    }

    fn can_spawn(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }
}

#[cfg(feature = "redis-smol")]
impl sealed::Sealed for crate::clock::AsyncIoClock {}

/// Tasks go to smol's global executor (`smol::spawn`), which redis-rs's
/// own smol tasks use too.
#[cfg(feature = "redis-smol")]
impl Runtime for crate::clock::AsyncIoClock {
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        smol::spawn(task).detach();
    }

    fn can_spawn(&self) -> bool {
        true
    }
}
