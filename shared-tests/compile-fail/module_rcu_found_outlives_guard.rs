// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0505 cannot move out of `rcu` because it is borrowed
// module-file: gadget.rs
//
// lockless_rust's RCU registry: a TRYGET that gives up the RCU read lock
// between XArray::load() and the get-unless-zero (mutant 39, whose C
// twin compiles). What load() found is an UnownedRef<'a>, made a
// Found<'a>, that borrows the guard: the increment cannot move past the
// end of the critical section, after which the gadget may be freed.

#[allow(dead_code)]
mod compile_fail {
    use super::*;

    fn get_unless_zero<F: Counted<Registry = RegRcu>>(
        gadgets: &Gadgets<F>,
        i: usize,
    ) -> Option<GadgetRef<F>> {
        let rcu = rcu::read_lock();
        let found = Found::under_rcu(&rcu, gadgets.registry.load(&rcu, i)?)?;
        drop(rcu);
        found.inc_not_zero()
    }
}
