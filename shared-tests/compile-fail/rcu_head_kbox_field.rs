// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0308 expected `*mut RcuHead`, found `*mut Box<RcuHead, Kmalloc>`
//
// impl_has_rcu_head! (patch 0009) on a field that only derefs to an
// RcuHead. Through a reference check (`&x.rcu` as `&RcuHead`) deref
// coercion accepted it, and the safe macro emitted an unsafe impl whose
// offset is the KBox's: kvfree_call_rcu() would write its head over the
// box pointer.

use kernel::prelude::*;
use kernel::sync::rcu::RcuHead;

struct Entry {
    value: u64,
    rcu: KBox<RcuHead>,
}

kernel::impl_has_rcu_head! {
    impl HasRcuHead for Entry { self.rcu }
}

pub fn value(e: &Entry) -> u64 {
    e.value
}
