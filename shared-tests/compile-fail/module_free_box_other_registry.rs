// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0271 type mismatch resolving `<F as Flavor>::Registry == RegLock`
// module-file: gadget.rs
//
// lockless_rust's release path: a gadget of an RCU registry freed
// through the LOCK registry's free_box(), at once, while a TRYGET under
// RCU may still be reading its count (mutant 67). A registry mode frees
// only gadgets whose flavor names it as theirs.

#[allow(dead_code)]
mod compile_fail {
    use super::*;

    fn free<F: Flavor<Registry = RegRcu>>(g: Pin<KBox<Gadget<F>>>) {
        RegLock::free_box(g);
    }
}
