//! The one place the crate takes its atomics, its lock and its shared cells
//! from.
//!
//! Normally the atomics come from [`portable_atomic`], which maps to
//! `core::sync::atomic` where the target has the operation natively and
//! otherwise falls back (to a critical section on `thumbv6m` when the binary
//! enables `critical-section`). Under `cfg(loom)` they come from loom, so that
//! the loom models in `tests/loom/` explore every interleaving of the
//! crate's own protocols.
//!
//! [`Mutex`] is the short lock that guards the bulkhead's wait queue (and
//! nothing else): `std::sync::Mutex` with `std`, a critical section with
//! `critical-section` and no `std`, a spin lock otherwise, loom's under
//! `cfg(loom)`. [`UnsafeCell`] is `core`'s behind loom's closure API, so the
//! same code lets loom check every access to a queue node.

#[cfg(not(loom))]
mod imp {
    #[allow(unused_imports)]
    pub(crate) use portable_atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

#[cfg(loom)]
mod imp {
    #[allow(unused_imports)]
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

pub(crate) use imp::*;

/// `const fn` where the atomics allow it: loom's atomics cannot be built in a
/// constant, so under `cfg(loom)` the same function is an ordinary `fn`.
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])* $vis const fn $name $($rest)*
        #[cfg(loom)]
        $(#[$attr])* $vis fn $name $($rest)*
    };
}
pub(crate) use const_fn;

/// A cell whose contents are reached through raw pointers inside a closure
/// (loom's API, so that loom can track each access).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

pub(crate) use lock::Mutex;

/// `std::sync::Mutex`. A poisoned lock is taken anyway: nothing that can
/// panic runs while the queue's lock is held, except a waker's `clone`,
/// which happens before the queue is changed.
#[cfg(all(not(loom), feature = "std"))]
mod lock {
    pub(crate) struct Mutex<T>(std::sync::Mutex<T>);
    pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Self {
            Mutex(std::sync::Mutex::new(value))
        }

        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }
}

/// loom's mutex, so the models explore the lock's interleavings too.
#[cfg(loom)]
mod lock {
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }
}

/// Without `std`: a critical section (`critical-section`, which the binary
/// implements for its chip — interrupts off on a single core), or else a
/// spin lock on one atomic flag. The queue's lock is held for a few loads
/// and stores, never across a wake-up or user code that could block.
#[cfg(all(not(loom), not(feature = "std")))]
mod lock {
    use core::cell::UnsafeCell;
    use core::ops::{Deref, DerefMut};

    pub(crate) struct Mutex<T> {
        #[cfg(not(feature = "critical-section"))]
        locked: super::AtomicBool,
        value: UnsafeCell<T>,
    }

    // SAFETY: the value is reached only through a `MutexGuard`, and at most
    // one guard exists at a time (the flag, or the critical section, sees
    // to that), so sharing the mutex shares `T` only by moving access to it
    // from one thread to another.
    unsafe impl<T: Send> Sync for Mutex<T> {}
    // SAFETY: as above; the mutex owns its value.
    unsafe impl<T: Send> Send for Mutex<T> {}

    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a Mutex<T>,
        #[cfg(feature = "critical-section")]
        restore: critical_section::RestoreState,
    }

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Self {
            Mutex {
                #[cfg(not(feature = "critical-section"))]
                locked: super::AtomicBool::new(false),
                value: UnsafeCell::new(value),
            }
        }

        #[cfg(feature = "critical-section")]
        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            // SAFETY: released in the guard's `Drop`; guards of this crate
            // are never held across another acquisition of a critical
            // section that outlives them, so acquire and release nest.
            let restore = unsafe { critical_section::acquire() };
            MutexGuard {
                mutex: self,
                restore,
            }
        }

        #[cfg(not(feature = "critical-section"))]
        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            use super::Ordering::{Acquire, Relaxed};
            while self
                .locked
                .compare_exchange_weak(false, true, Acquire, Relaxed)
                .is_err()
            {
                while self.locked.load(Relaxed) {
                    core::hint::spin_loop();
                }
            }
            MutexGuard { mutex: self }
        }
    }

    impl<T> Drop for MutexGuard<'_, T> {
        #[inline]
        fn drop(&mut self) {
            #[cfg(feature = "critical-section")]
            // SAFETY: the state this guard's `acquire` returned, released
            // once, in reverse order of acquisition.
            unsafe {
                critical_section::release(self.restore)
            };
            #[cfg(not(feature = "critical-section"))]
            self.mutex.locked.store(false, super::Ordering::Release);
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard is the only one (see `Sync` above).
            unsafe { &*self.mutex.value.get() }
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: this guard is the only one, and `&mut self` is unique.
            unsafe { &mut *self.mutex.value.get() }
        }
    }
}
