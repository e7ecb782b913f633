// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0505 cannot move out of `locked` because it is borrowed
//
// A borrow that XArray's Guard::get() returned outlives the lock guard:
// a lock holder may then remove and drop the element. lockless_rust's
// LOCK registry (RegLock::get_unless_zero()) and its handle tables rely
// on this (mutants 42, 44, 55): what is found must be counted before the
// lock is dropped.

use kernel::{prelude::*, xarray::XArray};

pub fn value(xa: &XArray<KBox<u32>>) -> Option<u32> {
    let locked = xa.lock();
    let found = locked.get(0);
    drop(locked);
    found.copied()
}
