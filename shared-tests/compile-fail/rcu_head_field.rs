// SPDX-License-Identifier: GPL-2.0
// compile-pass
//
// The twin of rcu_head_kbox_field and rcu_head_deref_zst: an RcuHead
// field is accepted, in a plain and in a generic type.

use kernel::sync::rcu::{HasRcuHead, RcuHead};

struct Entry {
    value: u64,
    rcu: RcuHead,
}

kernel::impl_has_rcu_head! {
    impl HasRcuHead for Entry { self.rcu }
}

struct Pair<T> {
    value: T,
    rcu: RcuHead,
}

kernel::impl_has_rcu_head! {
    impl{T} HasRcuHead for Pair<T> { self.rcu }
}

pub fn offsets(e: &Entry, p: &Pair<u8>) -> (u64, u8, usize, usize) {
    (
        e.value,
        p.value,
        Entry::RCU_HEAD_OFFSET,
        Pair::<u8>::RCU_HEAD_OFFSET,
    )
}
