// SPDX-License-Identifier: GPL-2.0

//! A minimal `rwlock_t` abstraction: Rust-for-Linux 7.3 has none.
//!
//! jbd2's `j_state_lock` is an `rwlock_t`: START and EXTEND take it shared
//! (`read_lock()`), COMMIT, STAT and CONFIGURE exclusive (`write_lock()`).
//! `kernel::sync::Lock` models exclusive locks only, so the shared side cannot be
//! a `Lock` backend, and `rwlock_init()`, `read_lock()`, ... are C macros: the
//! kernel patch `0006-rust-helpers-add-rwlock_t-helpers.patch` adds the helpers
//! this file calls. [`RwLock`] wraps `rwlock_t` and the data it protects, and
//! hands out [`RwLockReadGuard`] (shared access) and [`RwLockWriteGuard`]
//! (exclusive access), the same shape as `rwsem.rs`. The write guard can drop
//! and retake the lock around a sleep ([`RwLockWriteGuard::do_unlocked`]), as
//! `jbd2_journal_wait_updates()` does. No C file of the module mirrors this one:
//! `c-module/` calls `read_lock()`/`write_lock()` directly.
//!
//! An `rwlock_t` spins: nothing may sleep while a guard holds it (lockdep and
//! `CONFIG_DEBUG_ATOMIC_SLEEP` report it if something does).

use core::{cell::UnsafeCell, marker::PhantomPinned, ops::Deref, ops::DerefMut, pin::Pin};
use kernel::{
    bindings,
    prelude::*,
    str::CStr,
    sync::LockClassKey,
    types::{NotThreadSafe, Opaque},
};

/// Creates an [`RwLock`] initialiser with a lockdep class of its own, as
/// `rwlock_init()` does for each call site in C.
macro_rules! new_rwlock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::rwlock::RwLock::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_rwlock;

/// A reader-writer spinlock protecting a `T`.
///
/// # Invariants
///
/// `lock` was initialised by `__rwlock_init()`; `data` is only accessed through a
/// guard, which holds `lock` shared (read) or exclusively (write).
#[pin_data]
pub(crate) struct RwLock<T> {
    #[pin]
    lock: Opaque<bindings::rwlock_t>,
    data: UnsafeCell<T>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: An `RwLock` can be moved to another thread with its data when `T` can.
unsafe impl<T: Send> Send for RwLock<T> {}
// SAFETY: Writers get `&mut T` one at a time (they need `T: Send`); readers share
// `&T` among threads (they need `T: Sync`).
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}

impl<T> RwLock<T> {
    /// Returns an initialiser for an `RwLock` holding `data`; use [`new_rwlock!`].
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
            lock <- Opaque::ffi_init(|slot| unsafe {
                bindings::__rwlock_init(slot, name.as_char_ptr(), key.as_ptr())
            }),
        })
    }

    /// Takes the lock shared (`read_lock()`).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        // SAFETY: `lock` is initialised (type invariant).
        unsafe { bindings::read_lock(self.lock.get()) };
        // INVARIANT: We hold `lock` shared.
        RwLockReadGuard {
            lock: self,
            _not_send: NotThreadSafe,
        }
    }

    /// Takes the lock exclusively (`write_lock()`).
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        // SAFETY: `lock` is initialised (type invariant).
        unsafe { bindings::write_lock(self.lock.get()) };
        // INVARIANT: We hold `lock` exclusively.
        RwLockWriteGuard {
            lock: self,
            _not_send: NotThreadSafe,
        }
    }
}

/// Shared access to an [`RwLock`]'s data.
///
/// # Invariants
///
/// The current task holds `lock.lock` shared; it is released on drop, by this
/// task (the guard is not `Send`: lockdep wants the owner to release).
#[must_use = "the lock unlocks immediately when the guard is unused"]
pub(crate) struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
    _not_send: NotThreadSafe,
}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: We hold `lock` shared (type invariant): no writer has `&mut T`.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: We hold `lock` shared (type invariant).
        unsafe { bindings::read_unlock(self.lock.lock.get()) };
    }
}

/// Exclusive access to an [`RwLock`]'s data.
///
/// # Invariants
///
/// The current task holds `lock.lock` exclusively; it is released on drop.
#[must_use = "the lock unlocks immediately when the guard is unused"]
pub(crate) struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
    _not_send: NotThreadSafe,
}

impl<T> RwLockWriteGuard<'_, T> {
    /// Runs `cb` with the lock dropped (`write_unlock()`), and retakes it
    /// (`write_lock()`) before returning, as jbd2 does around the drain's sleep.
    ///
    /// `&mut self` keeps every reference to the data obtained through the guard
    /// dead while `cb` runs: other tasks may take the lock and change the data
    /// meanwhile, so the caller must read again what it needs afterwards.
    pub(crate) fn do_unlocked<U>(&mut self, cb: impl FnOnce() -> U) -> U {
        // SAFETY: We hold `lock` exclusively (type invariant).
        unsafe { bindings::write_unlock(self.lock.lock.get()) };
        let ret = cb();
        // SAFETY: `lock` is initialised (type invariant of `RwLock`), and we
        // released it above.
        unsafe { bindings::write_lock(self.lock.lock.get()) };
        // INVARIANT: We hold `lock` exclusively again before the guard is used or
        // dropped.
        ret
    }
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: We hold `lock` exclusively (type invariant).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: We hold `lock` exclusively (type invariant), and `&mut self`
        // makes this the only reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: We hold `lock` exclusively (type invariant).
        unsafe { bindings::write_unlock(self.lock.lock.get()) };
    }
}
