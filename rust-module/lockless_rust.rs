// SPDX-License-Identifier: GPL-2.0

//! lockless_rust.ko: the Rust mirror of lockless_c.ko.
//!
//! The crate root only declares the module. Each file mirrors one of
//! `c-module/`: `device.rs` <-> `device.c` (misc device, ioctls),
//! `gadget.rs` <-> `gadget.c` (the reference-counting flavors), `rmw.rs` <->
//! `rmw.c` (the cmpxchg loops), `txn.rs` <-> `txn.c` (jbd2's transaction),
//! `arena.rs` <-> `arena.c` (the open file's arena and its handles).
//! `uapi.rs` brings in the bindgen view of `shared-tests/lockless_uapi.h`.

use kernel::prelude::*;

mod arena;
mod device;
mod gadget;
mod rmw;
mod txn;
mod uapi;

module! {
    type: LocklessRust,
    name: "lockless_rust",
    authors: ["lockless-parity developers"],
    description: "lockless-parity: lockless RMW patterns, Rust mirror",
    license: "GPL",
    params: {
        racy_control: u32 {
            default: 0,
            description: "1: run RACY_INC, a deliberate data race (KCSAN's negative control)",
        },
    },
}

#[pin_data(PinnedDrop)]
struct LocklessRust {
    #[pin]
    miscdev: device::Registration,
}

#[pinned_drop]
impl PinnedDrop for LocklessRust {
    /// `lp_exit()`: module exit WARNs if any arena, gadget or handle is still
    /// alive ([`device::check_leaks`]). C checks after `misc_deregister()`, this
    /// before `miscdev` is dropped: the same, since no file is open at exit and
    /// none can be opened once unload has begun (`try_module_get()` fails).
    fn drop(self: Pin<&mut Self>) {
        device::check_leaks();
    }
}

impl kernel::InPlaceModule for LocklessRust {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            miscdev <- device::register(),
        })
    }
}
