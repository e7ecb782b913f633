// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0308 expected `*mut RcuHead`, found `*mut Phantom`
//
// impl_has_rcu_head! (patch 0009) on a zero-sized field with
// Deref<Target = RcuHead>: the offset of a field with no room at all.

use core::ops::Deref;
use kernel::sync::rcu::RcuHead;

struct Phantom;

impl Deref for Phantom {
    type Target = RcuHead;

    fn deref(&self) -> &RcuHead {
        unreachable!()
    }
}

struct Entry {
    value: u64,
    rcu: Phantom,
}

kernel::impl_has_rcu_head! {
    impl HasRcuHead for Entry { self.rcu }
}

pub fn value(e: &Entry) -> u64 {
    e.value
}
