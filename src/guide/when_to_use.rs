//! When to use it — and when tokio's `Semaphore` is enough.
//!
//! Use a [`Bulkhead`](crate::Bulkhead) per external system (named after it: `"payments"`,
//! `"inventory"`) when a call should **fail fast** rather than wait: it rejects at
//! once (`try_acquire`) or after a short, bounded wait (`acquire_timeout`), says
//! why (`Full`, `TimedOut`, `Closed`), counts accepted, rejected-by-cause,
//! queued and cancelled waits and peak in flight, and can be resized or closed
//! at run time. Waiters are served first come, first served, by a hand-off at
//! the release (no newcomer barges past them), and a wait allocates nothing.
//! It is the same type on tokio, smol, async-std and embassy, in a `static`, with
//! or without an allocator.
//!
//! If you need a general async semaphore on tokio — long or unbounded waits,
//! permits as a budget of bytes, no metrics, no other runtime — use
//! `tokio::sync::Semaphore`; elsewhere `async_lock::Semaphore` does that job.
//!
//! Decisions worth knowing (documented on the items):
//!
//! - **Fairness.** Waiters are woken in arrival order, and a newcomer never takes
//!   a free permit while anyone waits: otherwise a stream of newcomers can make a
//!   waiter run out its whole max wait although permits kept coming free.
//! - **Deadlines.** A free permit is taken even at the deadline; a waiter whose
//!   deadline has passed gives up; a request above capacity is an immediate
//!   `ExceedsCapacity` error, never an endless wait and never counted as a
//!   rejection; a cancelled wait is counted as cancelled, not rejected.
//! - **Resizing** never blocks; after a shrink no permit is granted until in
//!   flight is below the new capacity.
