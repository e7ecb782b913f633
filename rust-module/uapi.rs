// SPDX-License-Identifier: GPL-2.0

//! The contract, as bindgen reads it from `shared-tests/lockless_uapi.h`.
//!
//! `uapi_generated.rs` is produced by the Kbuild rule at build time; this
//! file only adds what bindgen cannot say: that the ioctl structs may be
//! copied to and from userspace as plain bytes.

#![allow(
    dead_code,
    unreachable_pub,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]

include!("uapi_generated.rs");

/// Marks ioctl structs as plain bytes in both directions.
macro_rules! plain_bytes {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: The struct is `#[repr(C)]` with only integer and integer-array fields and no
        // padding (the header lays every struct out without holes, and bindgen's layout
        // assertions check each size), so any byte pattern is a valid value and every byte of a
        // value is initialised.
        unsafe impl kernel::transmute::FromBytes for $t {}
        // SAFETY: As above.
        unsafe impl kernel::transmute::AsBytes for $t {}
    )*};
}

plain_bytes!(
    lp_identify,
    lp_configure,
    lp_new,
    lp_get,
    lp_put,
    lp_lookup,
    lp_tryget,
    lp_stat,
    lp_arena_stat,
    lp_rmw,
    lp_run,
);
