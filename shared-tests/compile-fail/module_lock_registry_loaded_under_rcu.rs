// SPDX-License-Identifier: GPL-2.0
// compile-fail: E0271 type mismatch resolving `<F as Flavor>::Registry == RegRcu`
// module-file: gadget.rs
//
// lockless_rust's LOCK registry looked up under RCU alone: its release
// path frees a gadget at once, with no grace period, so what load()
// found could be freed under the reader. XArray::load() reads any
// registry; only a gadget whose flavor says RegRcu becomes a Found, what
// the get-unless-zero takes.

#[allow(dead_code)]
mod compile_fail {
    use super::*;

    fn get_unless_zero<F: Counted<Registry = RegLock>>(
        gadgets: &Gadgets<F>,
        i: usize,
    ) -> Option<GadgetRef<F>> {
        let rcu = rcu::read_lock();
        let found = Found::under_rcu(&rcu, gadgets.registry.load(&rcu, i)?)?;
        found.inc_not_zero()
    }
}
