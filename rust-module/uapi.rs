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

// SAFETY: `lp_identify` is `#[repr(C)]` with only integer and integer-array
// fields and no padding (bindgen's layout assertions check the size), so any
// byte pattern is a valid value and every byte of a value is initialised.
unsafe impl kernel::transmute::FromBytes for lp_identify {}
// SAFETY: As above.
unsafe impl kernel::transmute::AsBytes for lp_identify {}
