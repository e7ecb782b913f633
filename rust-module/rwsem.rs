// SPDX-License-Identifier: GPL-2.0

//! A minimal `rw_semaphore` abstraction: Rust-for-Linux 7.3 has none.
//!
//! `kernel::sync::Lock` models exclusive locks only, so the shared side of an
//! `rw_semaphore` (what KREF_RWSEM's LOOKUP takes) cannot be a `Lock` backend.
//! [`RwSem`] wraps `struct rw_semaphore` and the data it protects, and hands out
//! [`RwSemReadGuard`] (`down_read()`, shared access) and [`RwSemWriteGuard`]
//! (`down_write()`, exclusive access). No C file of the module mirrors this
//! one: `c-module/` calls `down_read()`/`down_write()` directly.

use core::{cell::UnsafeCell, marker::PhantomPinned, ops::Deref, ops::DerefMut, pin::Pin};
use kernel::{
    bindings,
    prelude::*,
    str::CStr,
    sync::LockClassKey,
    types::{NotThreadSafe, Opaque},
};

/// Creates an [`RwSem`] initialiser with a lockdep class of its own, as
/// `init_rwsem()` does for each call site in C.
macro_rules! new_rwsem {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::rwsem::RwSem::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_rwsem;

/// A read-write semaphore protecting a `T`.
///
/// # Invariants
///
/// `sem` was initialised by `__init_rwsem()`; `data` is only accessed through a
/// guard, which holds `sem` shared (read) or exclusively (write).
#[pin_data]
pub(crate) struct RwSem<T> {
    #[pin]
    sem: Opaque<bindings::rw_semaphore>,
    data: UnsafeCell<T>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: An `RwSem` can be moved to another thread with its data when `T` can.
unsafe impl<T: Send> Send for RwSem<T> {}
// SAFETY: Writers get `&mut T` one at a time (they need `T: Send`); readers share
// `&T` among threads (they need `T: Sync`).
unsafe impl<T: Send + Sync> Sync for RwSem<T> {}

impl<T> RwSem<T> {
    /// Returns an initialiser for an `RwSem` holding `data`; use [`new_rwsem!`].
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            data: UnsafeCell::new(data),
            _pin: PhantomPinned,
            // SAFETY: `slot` is valid while the closure runs; `name` and `key` are
            // static, as lockdep requires.
            sem <- Opaque::ffi_init(|slot| unsafe {
                bindings::__init_rwsem(slot, name.as_char_ptr(), key.as_ptr())
            }),
        })
    }

    /// Takes the semaphore shared (`down_read()`).
    pub(crate) fn read(&self) -> RwSemReadGuard<'_, T> {
        // SAFETY: `sem` is initialised (type invariant).
        unsafe { bindings::down_read(self.sem.get()) };
        // INVARIANT: We hold `sem` shared.
        RwSemReadGuard {
            lock: self,
            _not_send: NotThreadSafe,
        }
    }

    /// Takes the semaphore exclusively (`down_write()`).
    pub(crate) fn write(&self) -> RwSemWriteGuard<'_, T> {
        // SAFETY: `sem` is initialised (type invariant).
        unsafe { bindings::down_write(self.sem.get()) };
        // INVARIANT: We hold `sem` exclusively.
        RwSemWriteGuard {
            lock: self,
            _not_send: NotThreadSafe,
        }
    }
}

/// Shared access to an [`RwSem`]'s data.
///
/// # Invariants
///
/// The current task holds `lock.sem` shared; it is released on drop, by this task
/// (the guard is not `Send`: lockdep wants the owner to release).
#[must_use = "the semaphore is released immediately when the guard is unused"]
pub(crate) struct RwSemReadGuard<'a, T> {
    lock: &'a RwSem<T>,
    _not_send: NotThreadSafe,
}

impl<T> Deref for RwSemReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: We hold `sem` shared (type invariant): no writer has `&mut T`.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for RwSemReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: We hold `sem` shared (type invariant).
        unsafe { bindings::up_read(self.lock.sem.get()) };
    }
}

/// Exclusive access to an [`RwSem`]'s data.
///
/// # Invariants
///
/// The current task holds `lock.sem` exclusively; it is released on drop.
#[must_use = "the semaphore is released immediately when the guard is unused"]
pub(crate) struct RwSemWriteGuard<'a, T> {
    lock: &'a RwSem<T>,
    _not_send: NotThreadSafe,
}

impl<T> Deref for RwSemWriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: We hold `sem` exclusively (type invariant).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for RwSemWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: We hold `sem` exclusively (type invariant), and `&mut self` makes
        // this the only reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for RwSemWriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: We hold `sem` exclusively (type invariant).
        unsafe { bindings::up_write(self.lock.sem.get()) };
    }
}
