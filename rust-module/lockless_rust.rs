// SPDX-License-Identifier: GPL-2.0

//! lockless_rust.ko: the Rust mirror of lockless_c.ko.
//!
//! The crate root only declares the module; `device.rs` mirrors
//! `c-module/device.c` and `uapi.rs` brings in the bindgen view of
//! `shared-tests/lockless_uapi.h`.

use kernel::prelude::*;

mod device;
mod uapi;

module! {
    type: LocklessRust,
    name: "lockless_rust",
    authors: ["lockless-parity developers"],
    description: "lockless-parity: lockless RMW patterns, Rust mirror",
    license: "GPL",
}

#[pin_data]
struct LocklessRust {
    #[pin]
    miscdev: device::Registration,
}

impl kernel::InPlaceModule for LocklessRust {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            miscdev <- device::register(),
        })
    }
}
