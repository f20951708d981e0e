//! The wait queue: an intrusive FIFO list of the waiting futures' own nodes.
//!
//! Each waiting future owns a [`Node`], pinned inside it; the bulkhead keeps
//! only the list's ends, under a short lock ([`crate::sync::Mutex`]). So a
//! wait allocates nothing, on any target, and the number of waiters is
//! bounded by memory alone, or by a bound the bulkhead was built with
//! ([`waiters`]).
//!
//! The protocol, with the state word (`word.rs`):
//!
//! - The word's queued flag is set exactly while the list is not empty, and
//!   changed only under the lock, in the same step that links the first node
//!   or unlinks the last. A release reads the flag in the atomic add that
//!   returns its permits: clear, nobody can be owed them and no lock is
//!   taken; set, it takes the lock and serves the queue.
//! - Serving (under the lock) walks the list from its head and hands each
//!   node its permits as soon as enough are free: the permits are taken from
//!   the word by a compare-and-swap (which also clears the queued flag if
//!   the node is the last), the node is unlinked, its waker taken out and its
//!   state set to granted. The owner sees the state without the lock. A node
//!   that asks for more than is free keeps its place and the walk goes on to
//!   the next (the bulkhead's rule for multi-permit requests), until no
//!   permit is free.
//! - A newcomer that finds the queued flag set never takes a permit without
//!   the lock; under the lock it serves the queue first, so it can only take
//!   what no queued waiter can use.
//! - Wakers are woken, and replaced wakers dropped, after the lock is
//!   released: a waker whose drop or wake gives back a permit of the same
//!   bulkhead (the last reference to a task whose future holds one) then
//!   takes the lock again instead of deadlocking on it.
//!
//! Why our own queue rather than a crate's: the hand-off needs the list and
//! the state word to agree (the queued flag, taken permits and the accepted
//! count change in one compare-and-swap under the lock), a multi-permit
//! request must be able to keep its place while single-permit requests behind
//! it are served, and a release with nobody waiting must take no lock.
//! tokio's `batch_semaphore` keeps its permits inside the queue's lock once
//! anyone waits and serves strictly in order; maitake-sync's `WaitQueue`
//! wakes waiters but holds no permits, so a woken waiter would have to race
//! newcomers for them. The layout of the node (links, waker and a state the
//! owner reads without the lock) follows both.

use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Poll, Waker};

use super::{check_request, word, AcquireError, Bulkhead};
use crate::sync::{AtomicU8, Ordering, UnsafeCell};

/// Not in the list (not queued yet, or its wait is over).
const IDLE: u8 = 0;
/// In the list, waiting.
const QUEUED: u8 = 1;
/// Its permits were taken for it and it was unlinked.
const GRANTED: u8 = 2;
/// Failed by `close` and unlinked.
const CLOSED: u8 = 3;
/// Asks for more than the capacity (after a shrink or a `forget`); unlinked.
const TOO_BIG: u8 = 4;

/// One waiting future's place in the queue.
///
/// `state` is written under the lock and read by the owner without it;
/// every other field is reached only under the lock, or by the owner while
/// the node is not linked (then nobody else has its address).
pub(crate) struct Node {
    state: AtomicU8,
    /// Permits asked for; fixed at creation.
    n: usize,
    links: UnsafeCell<Links>,
    waker: UnsafeCell<Option<Waker>>,
    /// The capacity that made the request too big (for `TOO_BIG`'s error).
    capacity: UnsafeCell<usize>,
    // Linked by address: the node must not move while it is in the list.
    _pin: PhantomPinned,
}

struct Links {
    prev: Option<NonNull<Node>>,
    next: Option<NonNull<Node>>,
}

// SAFETY: the non-atomic fields are reached only under the bulkhead's lock
// or by the owner while no other thread has the node's address (see
// `Node`), so a node can be moved to and shared with other threads; its
// waker is `Send + Sync`.
unsafe impl Send for Node {}
// SAFETY: as for `Send`.
unsafe impl Sync for Node {}

impl core::fmt::Debug for Node {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Node")
            .field("n", &self.n)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What a wait that leaves the queue found.
pub(super) enum Left {
    /// Still queued: it is out now, holding nothing.
    Removed,
    /// Its permits had been handed to it: the caller holds them now.
    Granted,
    /// It had been refused (closed, or too big); the error.
    Refused(AcquireError),
}

/// What a wait that asks to be queued got.
pub(super) enum Enqueued {
    /// The permits were free for it: the caller holds them.
    Took,
    /// It is in the queue.
    Queued,
}

impl Node {
    pub(crate) fn new(n: usize) -> Self {
        Node {
            state: AtomicU8::new(IDLE),
            n,
            links: UnsafeCell::new(Links {
                prev: None,
                next: None,
            }),
            waker: UnsafeCell::new(None),
            capacity: UnsafeCell::new(0),
            _pin: PhantomPinned,
        }
    }

    pub(crate) fn permits(&self) -> usize {
        self.n
    }

    /// The outcome a finished state stands for; `None` while queued.
    fn outcome(&self, state: u8) -> Option<Result<(), AcquireError>> {
        match state {
            GRANTED => Some(Ok(())),
            CLOSED => Some(Err(AcquireError::Closed)),
            TOO_BIG => Some(Err(AcquireError::ExceedsCapacity {
                requested: self.n,
                // SAFETY: written under the lock before the `Release` store of
                // `TOO_BIG` that the caller's `Acquire` load (or the lock) saw;
                // nobody writes it again.
                capacity: self.capacity.with(|c| unsafe { *c }),
            })),
            _ => None,
        }
    }

    /// Takes the waker out. Caller holds the lock.
    fn take_waker(&self) -> Option<Waker> {
        // SAFETY: under the lock (the caller's), the only access.
        self.waker.with_mut(|w| unsafe { (*w).take() })
    }

    fn next(&self) -> Option<NonNull<Node>> {
        // SAFETY: under the lock (the caller's).
        self.links.with(|l| unsafe { (*l).next })
    }
}

/// The list's ends, and how many acquires ever queued; lives inside the
/// lock. Its length is not kept here: the waiter count
/// (`Hot::waiters`, see [`waiters`]) is it.
pub(crate) struct List {
    head: Option<NonNull<Node>>,
    tail: Option<NonNull<Node>>,
    /// Acquires that had to queue, ever (wrapping); written only here,
    /// under the lock, so a plain integer.
    queued_total: usize,
}

// SAFETY: the list holds addresses of nodes that are `Send + Sync`, and is
// reached only under its lock.
unsafe impl Send for List {}

impl List {
    pub(crate) fn queued_total(&self) -> usize {
        self.queued_total
    }

    pub(crate) const fn new() -> Self {
        List {
            head: None,
            tail: None,
            queued_total: 0,
        }
    }

    /// Whether `node`, which is in the list, is the only one in it.
    fn is_only(&self, node: NonNull<Node>) -> bool {
        self.head == Some(node) && self.tail == Some(node)
    }

    /// Links `node` at the back.
    ///
    /// # Safety
    ///
    /// `node` is pinned, not in any list, and stays valid until it is
    /// unlinked (its owner unlinks it under the lock before it goes away).
    unsafe fn push_back(&mut self, node: NonNull<Node>) {
        // SAFETY: the caller's promise; the old tail is linked, so valid.
        unsafe {
            node.as_ref().links.with_mut(|l| {
                (*l).prev = self.tail;
                (*l).next = None;
            });
            match self.tail {
                Some(tail) => tail.as_ref().links.with_mut(|l| (*l).next = Some(node)),
                None => self.head = Some(node),
            }
        }
        self.tail = Some(node);
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    ///
    /// `node` is in this list.
    unsafe fn remove(&mut self, node: NonNull<Node>) {
        // SAFETY: the caller's promise; its neighbours are linked, so valid.
        unsafe {
            let (prev, next) = node
                .as_ref()
                .links
                .with_mut(|l| ((*l).prev.take(), (*l).next.take()));
            match prev {
                Some(p) => p.as_ref().links.with_mut(|l| (*l).next = next),
                None => self.head = next,
            }
            match next {
                Some(n) => n.as_ref().links.with_mut(|l| (*l).prev = prev),
                None => self.tail = prev,
            }
        }
    }
}

/// Wakers collected under the lock, woken after it is released. A fixed
/// batch, so that serving many waiters allocates nothing either: when it is
/// full, the lock is released, the batch woken, and the work goes on.
struct WakeList {
    /// Filled from the front; full when the last slot is taken.
    wakers: [Option<Waker>; WAKE_BATCH],
}

/// Wake-ups collected per lock hold: enough for a release of several permits
/// or a `close` to wake a queue in a few rounds. One on microcontrollers:
/// their queues are short, and a one-waker batch keeps the release path
/// small (no array to initialise, walk or copy).
const WAKE_BATCH: usize = if cfg!(target_os = "none") { 1 } else { 8 };

impl WakeList {
    const fn new() -> Self {
        WakeList {
            wakers: [const { None }; WAKE_BATCH],
        }
    }

    fn is_full(&self) -> bool {
        self.wakers[WAKE_BATCH - 1].is_some()
    }

    /// Callers check `is_full` first.
    fn push(&mut self, waker: Option<Waker>) {
        if WAKE_BATCH == 1 {
            // Not full, so empty (no search; the microcontroller build).
            self.wakers[0] = waker;
        } else if let Some(slot) = self.wakers.iter_mut().find(|w| w.is_none()) {
            *slot = waker;
        }
    }
}

/// Dropped after the lock is released: wakes what was collected.
impl Drop for WakeList {
    fn drop(&mut self) {
        for slot in &mut self.wakers {
            match slot.take() {
                Some(waker) => waker.wake(),
                None => return,
            }
        }
    }
}

/// Whether a step under the lock finished, or stopped with a full batch of
/// wake-ups and must run again after they are woken.
enum Step {
    Done,
    Again,
}

impl<C> Bulkhead<C> {
    /// Runs `step` under the queue's lock, then wakes what it collected with
    /// the lock released; runs it again as long as it stopped for a full
    /// batch.
    fn locked(&self, mut step: impl FnMut(&mut List, &mut WakeList) -> Step) {
        loop {
            // Declared before the guard, so dropped (and woken) after it.
            let mut wakers = WakeList::new();
            let mut list = self.hot.queue.lock();
            let step = step(&mut list, &mut wakers);
            drop(list);
            drop(wakers);
            if let Step::Done = step {
                return;
            }
        }
    }

    /// Under the lock: hands free permits to queued waiters in order (a
    /// waiter that wants more than is free keeps its place and the next is
    /// looked at) and, with `all` (after a shrink), looks at every waiter and
    /// fails those that ask for more than the capacity. `false` if it
    /// stopped for a full batch of wake-ups.
    fn serve(&self, list: &mut List, wakers: &mut WakeList, all: bool) -> bool {
        let mut w = self.hot.word.load(Ordering::Acquire);
        let mut cur = list.head;
        while let Some(ptr) = cur {
            // SAFETY: linked, so valid while we hold the lock.
            let node = unsafe { ptr.as_ref() };
            let next = node.next();
            let n = node.n;
            if word::closed(w) {
                // `close` fails every waiter, under this lock, next (a grant
                // racing it is one made just before it).
                return true;
            }
            if wakers.is_full() {
                return false;
            }
            loop {
                let capacity = word::capacity(w);
                // Only a shrink (`resize`, `forget`) makes a queued request
                // too big, and each serves with `all` right after; a release
                // never grants one (fewer than `n` can be free).
                if all && n > capacity {
                    // SAFETY: `ptr` is in `list`.
                    if let Some(after) = unsafe { self.unlink(list, ptr) } {
                        w = after;
                    }
                    // SAFETY: under the lock; read after the store below.
                    node.capacity.with_mut(|c| unsafe { *c = capacity });
                    self.finish_node(node, TOO_BIG, wakers);
                    break;
                }
                if word::available(w) < n as word::Avail {
                    if !all && word::available(w) <= 0 {
                        return true;
                    }
                    break;
                }
                // The last waiter's grant clears the queued flag in the same
                // CAS; the waiter is published by its node's `Release` store
                // below.
                match self.take_from(w, n, list.is_only(ptr)) {
                    Ok(next_w) => {
                        w = next_w;
                        // SAFETY: `ptr` is in `list`.
                        unsafe { list.remove(ptr) };
                        self.count_left();
                        self.finish_node(node, GRANTED, wakers);
                        break;
                    }
                    Err(actual) => w = actual,
                }
            }
            cur = next;
        }
        true
    }

    /// Under the lock: unlinks `ptr`, and if that empties the queue clears
    /// the queued flag; the word after that, if it did. (A hand-off unlinks
    /// with `List::remove` itself: its CAS clears the flag.)
    ///
    /// # Safety
    ///
    /// `ptr` is in `list`, the list under this bulkhead's lock.
    unsafe fn unlink(&self, list: &mut List, ptr: NonNull<Node>) -> Option<word::Word> {
        // SAFETY: the caller's promise.
        unsafe { list.remove(ptr) };
        self.count_left();
        list.head
            .is_none()
            .then(|| self.hot.word.fetch_and(!word::QUEUED, Ordering::AcqRel) & !word::QUEUED)
    }

    /// Under the lock, for a node just unlinked: its waker to the batch,
    /// then its final state — the last touch, after which its owner may
    /// free it.
    fn finish_node(&self, node: &Node, state: u8, wakers: &mut WakeList) {
        wakers.push(node.take_waker());
        node.state.store(state, Ordering::Release);
    }

    /// A first poll that found no permit: under the lock, serves the queue,
    /// then takes the permits if they are free, or links `node` at the back.
    ///
    /// With a bound on waiters, a place is reserved first, without the lock
    /// (see [`waiters`]): at the bound the wait is refused with
    /// `QueueFull` and no lock is taken, unless permits look free (then,
    /// under the lock, it may take what no queued waiter can use, as without
    /// a bound, but never queues). The reservation is the node's once it is
    /// linked (whoever unlinks it gives it back) and is given back here in
    /// every other case, a panic in the waker's `clone` included.
    pub(super) fn enqueue(
        &self,
        node: Pin<&Node>,
        waker: &Waker,
    ) -> Result<Enqueued, AcquireError> {
        let Ok(reserved) = self.reserve() else {
            return self.take_unqueued(node.n);
        };
        let mut reservation = Reservation {
            bulkhead: self,
            held: reserved,
        };
        let mut out = Err(AcquireError::Closed);
        self.locked(|list, wakers| {
            if !self.serve(list, wakers, false) {
                return Step::Again;
            }
            out = self.take_or_link(list, node, waker, reserved);
            Step::Done
        });
        if let Ok(Enqueued::Queued) = out {
            // Linked: its unlinking gives the place back.
            reservation.held = false;
        }
        out
    }

    /// A wait refused a place at the bound: `QueueFull` at once, without the
    /// lock, unless `n` permits look free; then, under the lock, the queue
    /// is served and the permits taken if still free (the queued waiters all
    /// want more), else `QueueFull`. It never queues.
    #[cold]
    #[inline(never)]
    fn take_unqueued(&self, n: usize) -> Result<Enqueued, AcquireError> {
        if word::available(self.load()) < n as word::Avail {
            return Err(AcquireError::QueueFull);
        }
        let mut out = Err(AcquireError::QueueFull);
        self.locked(|list, wakers| {
            if !self.serve(list, wakers, false) {
                return Step::Again;
            }
            let mut w = self.hot.word.load(Ordering::Acquire);
            out = loop {
                if let Err(e) = check_request(w, n) {
                    break Err(e);
                }
                if word::available(w) < n as word::Avail {
                    break Err(AcquireError::QueueFull);
                }
                match self.take_from(w, n, false) {
                    Ok(_) => break Ok(Enqueued::Took),
                    Err(actual) => w = actual,
                }
            };
            Step::Done
        });
        out
    }

    fn take_or_link(
        &self,
        list: &mut List,
        node: Pin<&Node>,
        waker: &Waker,
        reserved: bool,
    ) -> Result<Enqueued, AcquireError> {
        let n = node.n;
        // Cloned before anything changes: a waker's `clone` is the one
        // piece of foreign code run under the lock.
        let mut clone = None;
        let mut w = self.hot.word.load(Ordering::Acquire);
        loop {
            check_request(w, n)?;
            if word::available(w) >= n as word::Avail {
                // Nobody queued can use them (served just above): ours.
                match self.take_from(w, n, false) {
                    Ok(_) => return Ok(Enqueued::Took),
                    Err(actual) => {
                        w = actual;
                        continue;
                    }
                }
            }
            if clone.is_none() {
                clone = Some(waker.clone());
            }
            if !word::queued(w) {
                // Releases reach the queue through this (see `Hot::serve`):
                // stored before the flag that sends them there (once).
                #[cfg(target_os = "none")]
                if self.hot.serve.load(Ordering::Relaxed).is_null() {
                    self.hot.serve.store(Self::serve_fn(), Ordering::Relaxed);
                }
                // The first waiter: set the flag in the same CAS that sees
                // too few permits, so a release either adds its permits
                // before it (and we take them above) or sees the flag.
                if let Err(actual) = self.hot.word.compare_exchange_weak(
                    w,
                    w | word::QUEUED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    w = actual;
                    continue;
                }
            }
            let ptr = NonNull::from(node.get_ref());
            // SAFETY: the owner's, not linked yet; nobody else has its address.
            node.waker.with_mut(|slot| unsafe { *slot = clone });
            // SAFETY: pinned (`node` is a `Pin`), not linked, and its owner
            // unlinks it under this lock before it is dropped.
            unsafe { list.push_back(ptr) };
            node.state.store(QUEUED, Ordering::Relaxed);
            if !reserved {
                self.count_joined();
            }
            list.queued_total = list.queued_total.wrapping_add(1);
            return Ok(Enqueued::Queued);
        }
    }

    /// A queued wait's poll: done if the node was served or refused,
    /// otherwise its waker is refreshed (the one it replaces is dropped
    /// after the lock is released).
    pub(super) fn poll_queued(
        &self,
        node: Pin<&Node>,
        waker: &Waker,
    ) -> Poll<Result<(), AcquireError>> {
        if let Some(r) = node.outcome(node.state.load(Ordering::Acquire)) {
            return Poll::Ready(r);
        }
        let replaced = {
            let _list = self.hot.queue.lock();
            if let Some(r) = node.outcome(node.state.load(Ordering::Acquire)) {
                return Poll::Ready(r);
            }
            node.waker.with_mut(|slot| {
                // SAFETY: linked, and we hold the lock: the only access.
                let slot = unsafe { &mut *slot };
                match slot {
                    Some(old) if old.will_wake(waker) => None,
                    _ => slot.replace(waker.clone()),
                }
            })
        };
        drop(replaced);
        Poll::Pending
    }

    /// Takes a queued node out (cancel, deadline), or finds what it was
    /// given first. Its waker is dropped after the lock is released.
    pub(super) fn leave_queue(&self, node: Pin<&Node>) -> Left {
        let state = node.state.load(Ordering::Acquire);
        if state != QUEUED {
            return Self::left(&node, state);
        }
        let mut waker = None;
        let left = {
            let mut list = self.hot.queue.lock();
            let state = node.state.load(Ordering::Acquire);
            if state == QUEUED {
                // SAFETY: still queued, so in `list`.
                unsafe { self.unlink(&mut list, NonNull::from(node.get_ref())) };
                waker = node.take_waker();
                node.state.store(IDLE, Ordering::Relaxed);
                // Nobody behind it gains from its going: every one of them
                // already wanted more than was free.
                Left::Removed
            } else {
                Self::left(&node, state)
            }
        };
        drop(waker);
        left
    }

    /// For a wait that looks elsewhere for its slot (the partitioned
    /// bulkhead's borrowing): under the lock, if `node` is still queued and
    /// first in line, runs `take`; if that found a slot, unlinks `node`
    /// (counted nowhere: the caller counts what it got) and returns `true`.
    /// A node handed its permits or refused meanwhile, or not first, stays
    /// as it is and gets `false`. `take` must not take this bulkhead's lock.
    pub(crate) fn leave_first_if(&self, node: Pin<&Node>, take: impl FnOnce() -> bool) -> bool {
        if node.state.load(Ordering::Acquire) != QUEUED {
            return false;
        }
        let mut waker = None;
        let left = {
            let mut list = self.hot.queue.lock();
            let ptr = NonNull::from(node.get_ref());
            if node.state.load(Ordering::Acquire) == QUEUED && list.head == Some(ptr) && take() {
                // SAFETY: still queued, so in `list`.
                unsafe { self.unlink(&mut list, ptr) };
                waker = node.take_waker();
                node.state.store(IDLE, Ordering::Relaxed);
                // As in `leave_queue`: nobody behind it gains from its going.
                true
            } else {
                false
            }
        };
        drop(waker);
        left
    }

    /// Wakes the first waiter without handing it anything, so that it looks
    /// elsewhere for a slot (the partitioned bulkhead: another room freed
    /// one that nobody there waits for). Its waker is cloned under the lock
    /// and woken after it is released.
    #[cold]
    pub(crate) fn nudge_first(&self) {
        self.locked(|list, wakers| {
            if let Some(ptr) = list.head {
                // SAFETY: linked, so valid while we hold the lock; its waker
                // is reached only under the lock.
                let waker = unsafe { ptr.as_ref() }
                    .waker
                    .with(|w| unsafe { (*w).clone() });
                wakers.push(waker);
            }
            Step::Done
        });
    }

    fn left(node: &Node, state: u8) -> Left {
        match node.outcome(state) {
            Some(Ok(())) => Left::Granted,
            Some(Err(e)) => Left::Refused(e),
            None => Left::Removed,
        }
    }

    /// The cold half of a release that found the queued flag set.
    #[cold]
    #[inline(never)]
    pub(super) fn serve_queue(&self, all: bool) {
        self.locked(|list, wakers| {
            if self.serve(list, wakers, all) {
                Step::Done
            } else {
                Step::Again
            }
        });
    }

    /// After `close` set the flag: fails every queued waiter.
    pub(super) fn fail_all(&self) {
        self.locked(|list, wakers| {
            while let Some(ptr) = list.head {
                if wakers.is_full() {
                    return Step::Again;
                }
                // SAFETY: the head is in `list`; valid under the lock.
                unsafe { self.unlink(list, ptr) };
                // SAFETY: as above.
                self.finish_node(unsafe { ptr.as_ref() }, CLOSED, wakers);
            }
            Step::Done
        });
    }
}

/// The waiter count (`Hot::waiters`): one word holding the bound on
/// waiters (high half, fixed at construction; all ones for no bound) and
/// how many are waiting (low half).
///
/// - **Bounded.** A wait reserves its place before it takes the lock, with a
///   compare-and-swap that never takes the count past the bound: at the
///   bound it is refused at once (`QueueFull`), lock-free. The count is
///   therefore the queue's length plus the reservations of waits on their
///   way into the queue, and never above the bound, so neither is the
///   queue. A reservation that ends without linking (the permits were free
///   after all, the bulkhead was closed, a panic) is given back by the
///   waiter; a linked node's is given back by whoever unlinks it, under the
///   lock — once, as a node is unlinked once. A bound never counts twice
///   or leaks: each increment is paired with exactly one decrement.
/// - **No bound.** Nothing is reserved; the count is changed only under the
///   lock, when a node is linked or unlinked (a load and a store: no
///   read-modify-write on the hand-off), and is the queue's length.
///
/// Either way [`Bulkhead::waiting`] reads it without the lock. The bound's
/// half is half the word: at most [`MAX`] waiters (4 294 967 294 on 64-bit
/// targets, 65 534 on 32-bit ones).
///
/// `Relaxed` throughout: the count publishes nothing (the list is published
/// by its lock, the permits by the state word); its atomicity alone keeps
/// the bound.
pub(crate) mod waiters {
    const HALF: u32 = usize::BITS / 2;
    const COUNT: usize = (1 << HALF) - 1;
    /// The bound's half when there is no bound.
    pub(crate) const UNBOUNDED: usize = COUNT;
    /// The largest bound.
    pub(crate) const MAX: usize = COUNT - 1;

    /// The word for `bound` waiters (`UNBOUNDED` for none), nobody waiting.
    pub(crate) const fn initial(bound: usize) -> usize {
        bound << HALF
    }

    pub(crate) const fn count(w: usize) -> usize {
        w & COUNT
    }

    pub(crate) const fn bound(w: usize) -> usize {
        w >> HALF
    }
}

/// A place reserved in a bounded queue, given back when dropped (on every
/// path out of `enqueue` but a link, a panic's unwinding included).
struct Reservation<'a, C> {
    bulkhead: &'a Bulkhead<C>,
    held: bool,
}

impl<C> Drop for Reservation<'_, C> {
    fn drop(&mut self) {
        if self.held {
            self.bulkhead.hot.waiters.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl<C> Bulkhead<C> {
    /// Reserves a place for a wait before it takes the lock: `Ok(true)`
    /// reserved, `Ok(false)` nothing to reserve (no bound), `Err(())` at
    /// the bound. Lock-free: one load and, below the bound, one CAS.
    #[inline]
    fn reserve(&self) -> Result<bool, ()> {
        let mut cur = self.hot.waiters.load(Ordering::Relaxed);
        loop {
            let bound = waiters::bound(cur);
            if bound == waiters::UNBOUNDED {
                return Ok(false);
            }
            if waiters::count(cur) >= bound {
                return Err(());
            }
            match self.hot.waiters.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(true),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Under the lock, a node just unlinked: its place is given back.
    #[inline]
    fn count_left(&self) {
        let w = self.hot.waiters.load(Ordering::Relaxed);
        if waiters::bound(w) == waiters::UNBOUNDED {
            // Only ever written under the lock: no read-modify-write.
            self.hot.waiters.store(w - 1, Ordering::Relaxed);
        } else {
            // Reservations change it outside the lock.
            self.hot.waiters.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Under the lock, a node just linked in a queue without a bound.
    #[inline]
    fn count_joined(&self) {
        let w = self.hot.waiters.load(Ordering::Relaxed);
        self.hot.waiters.store(w + 1, Ordering::Relaxed);
    }
}
