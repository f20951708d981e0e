//! The hot paths allocate nothing: `try_acquire`, an acquire that succeeds at
//! once (including the timed ones), and release. Counted by a global
//! allocator that tallies the allocations made on the current thread.
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use watertight::clock::{ManualClock, StdClock};
use watertight::Bulkhead;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; the thread-local counter
// has a const initializer, so touching it never allocates or recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn hot_paths_do_not_allocate() {
    let clock = ManualClock::new();
    let b = Bulkhead::new("hot", 4, &clock);
    let std_b = Bulkhead::new("std", 4, StdClock);
    let owned = Arc::new(Bulkhead::new("owned", 4, StdClock));
    // Warm up once: nothing lazily allocated may hide in the first call.
    drop(b.try_acquire().unwrap());

    assert_eq!(
        allocations_in(|| drop(b.try_acquire().unwrap())),
        0,
        "try_acquire + release"
    );
    assert_eq!(
        allocations_in(|| drop(b.try_acquire_many(3).unwrap())),
        0,
        "try_acquire_many + release"
    );
    assert_eq!(
        allocations_in(|| drop(std_b.try_acquire().unwrap())),
        0,
        "StdClock bulkhead"
    );
    assert_eq!(
        allocations_in(|| drop(owned.try_acquire_owned().unwrap())),
        0,
        "owned permit"
    );
    assert_eq!(
        allocations_in(|| {
            let held = b.try_acquire_many(4).unwrap();
            assert!(b.try_acquire().is_err());
            drop(held);
        }),
        0,
        "a rejection"
    );

    // Acquires that find a permit free complete on their first poll without
    // creating a listener. block_on caches its waker on first use: warm it.
    futures_lite::future::block_on(async {});
    let n = allocations_in(|| drop(futures_lite::future::block_on(b.acquire()).unwrap()));
    assert_eq!(n, 0, "acquire() with a permit free");
    let n = allocations_in(|| {
        let p = futures_lite::future::block_on(b.acquire_timeout(Duration::from_millis(5)));
        drop(p.unwrap());
    });
    assert_eq!(n, 0, "acquire_timeout() with a permit free");
    let n = allocations_in(|| drop(futures_lite::future::block_on(b.acquire_many(2)).unwrap()));
    assert_eq!(n, 0, "acquire_many() with permits free");
}

#[test]
fn a_wait_allocates_its_listener() {
    // The documented cost of waiting: event-listener allocates one node per
    // wait. This test keeps that claim honest (and fails if it changes).
    let clock = ManualClock::new();
    let b = Bulkhead::new("wait", 1, &clock);
    let held = b.try_acquire().unwrap();
    let n = allocations_in(|| {
        let mut fut = std::pin::pin!(b.acquire());
        assert!(
            futures_lite::future::block_on(futures_lite::future::poll_once(&mut fut)).is_none()
        );
    });
    assert!(n >= 1, "a registered wait allocates its listener");
    drop(held);
}
