// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0505 cannot move out of `guard` because it is borrowed
//
// A borrow that XArray::load() (patch 0011) returned outlives the
// rcu::Guard it was found under: the element may be freed once the
// critical section ends. lockless_rust's RCU registry relies on this
// (RegRcu::get_unless_zero(), mutant 39): its Found<'a> is such a
// borrow, and the get-unless-zero must happen before the guard goes.

use kernel::{
    ffi::c_void,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        rcu,
    },
    types::ForeignOwnable,
    xarray::{RcuForeignOwnable, XArray},
};

struct Counter {
    hits: Atomic<u32>,
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
    let found = xa.load(&guard, 0);
    drop(guard);
    if let Some(c) = found {
        c.hits.fetch_add(1, Relaxed);
    }
}
