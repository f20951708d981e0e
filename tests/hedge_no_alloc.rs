//! A hedged call allocates nothing: its attempts and its hedge timer live
//! in the call's own future. Run on tokio's paused clock, whose sleeps are
//! timer entries held in place (ManualClock's sleeps each register an
//! event-listener node, its documented cost: tests/no_alloc.rs), with a
//! first attempt that is slow, a hedge that wins, and the loser dropped.
//! Counted by a global allocator that tallies the allocations made on the
//! current thread.
#![cfg(all(not(loom), feature = "tokio"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use watertight::clock::TokioClock;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay};
use watertight::policy::{Policy, PolicyConfig};

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

#[test]
fn a_hedged_call_whose_hedge_wins_allocates_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let config = PolicyConfig::builder(4).build().unwrap();
    let p: Policy<TokioClock> = Policy::new("search", config, TokioClock).unwrap();
    let hedge = Hedge::new(
        "search",
        HedgeConfig::builder()
            .delay(HedgeDelay::Fixed(Duration::from_millis(20)))
            .build()
            .unwrap(),
    );
    let rounds: Vec<(usize, Result<u32, watertight::policy::Error<()>>)> = (0..3)
        .map(|_| {
            rt.block_on(async {
                // tokio makes its deferred-waker list on the first yield.
                tokio::task::yield_now().await;
                let before = ALLOCS.with(Cell::get);
                let mut n = 0u32;
                let out = p
                    .call_hedged(&hedge, || {
                        n += 1;
                        let (attempt, ms) = (n, if n == 1 { 500 } else { 10 });
                        async move {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            Ok::<_, ()>(attempt)
                        }
                    })
                    .await;
                (ALLOCS.with(Cell::get) - before, out)
            })
        })
        .collect();
    for (allocs, out) in &rounds[1..] {
        assert_eq!(*out, Ok(2), "the hedge answered");
        assert_eq!(
            *allocs, 0,
            "allocations in a hedged call; all rounds {rounds:?}"
        );
    }
    assert_eq!(hedge.metrics().won, 3);
    assert_eq!(p.bulkhead().in_flight(), 0);
}
