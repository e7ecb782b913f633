// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0277 `Cell<u32>` cannot be shared between threads safely
//
// XArray::load() (patch 0011) of a Send but !Sync element. XArray<T> is
// Sync for T: Send (right under its lock, where one CPU at a time
// borrows an element), and load() lets any number of CPUs borrow the
// same element at once with no lock: two of them running hit() would
// race on the Cell. load() must require T: Sync.

use core::cell::Cell;
use kernel::{
    ffi::c_void,
    prelude::*,
    sync::rcu,
    types::ForeignOwnable,
    xarray::{RcuForeignOwnable, XArray},
};

struct Counter {
    hits: Cell<u32>,
}

/// A box whose release path (not shown) erases it and waits for a grace
/// period before it drops it.
struct RcuBox(KBox<Counter>);

// SAFETY: As `KBox`'s impl, which each function calls.
unsafe impl ForeignOwnable for RcuBox {
    const FOREIGN_ALIGN: usize = <KBox<Counter> as ForeignOwnable>::FOREIGN_ALIGN;
    type Borrowed<'a> = &'a Counter;
    type BorrowedMut<'a> = &'a mut Counter;

    fn into_foreign(self) -> *mut c_void {
        self.0.into_foreign()
    }

    unsafe fn from_foreign(ptr: *mut c_void) -> Self {
        // SAFETY: As the caller's.
        RcuBox(unsafe { KBox::from_foreign(ptr) })
    }

    unsafe fn borrow<'a>(ptr: *mut c_void) -> &'a Counter {
        // SAFETY: As the caller's.
        unsafe { <KBox<Counter> as ForeignOwnable>::borrow(ptr) }
    }

    unsafe fn borrow_mut<'a>(ptr: *mut c_void) -> &'a mut Counter {
        // SAFETY: As the caller's.
        unsafe { <KBox<Counter> as ForeignOwnable>::borrow_mut(ptr) }
    }
}

// SAFETY: The release path drops an element only a grace period after
// it erased it.
unsafe impl RcuForeignOwnable for RcuBox {}

fn shared<T: Sync>(_: &T) {}

pub fn hit(xa: &XArray<RcuBox>) {
    shared(xa);
    let guard = rcu::read_lock();
    if let Some(c) = xa.load(&guard, 0) {
        c.hits.set(c.hits.get() + 1);
    }
}
