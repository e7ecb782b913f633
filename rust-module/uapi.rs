// SPDX-License-Identifier: GPL-2.0

//! The contract, as bindgen reads it from `shared-tests/lockless_uapi.h`.
//!
//! `uapi_generated.rs` is produced by the Kbuild rule at build time; this
//! file only adds what bindgen cannot say: that the ioctl structs have no
//! padding (checked at build time below) and so may be copied to and from
//! userspace as plain bytes.

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
        // padding (`no_padding!` below fails the build unless its size is the sum of its fields'
        // sizes), so any byte pattern is a valid value and every byte of a value is initialised:
        // `AsBytes` copies out no stale kernel stack.
        unsafe impl kernel::transmute::FromBytes for $t {}
        // SAFETY: As above.
        unsafe impl kernel::transmute::AsBytes for $t {}
    )*};
}

/// The size of the field `f` projects to, without naming its type.
const fn field_size<T, F>(_f: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Fails the build unless `$t`'s size is the sum of the sizes of the fields
/// listed, which must be all of them: then nothing sits between or after them.
macro_rules! no_padding {
    ($($t:ident { $($f:ident),+ $(,)? }),* $(,)?) => {$(
        kernel::static_assert!(
            core::mem::size_of::<$t>() == 0 $(+ field_size(|s: &$t| &s.$f))+
        );
    )*};
}

no_padding!(
    lp_identify {
        name,
        abi_version,
        flavors,
        ops,
        live_gadgets,
        live_arenas,
        live_handles,
        txn_flavors,
        registries,
        delay_points,
        reserved
    },
    lp_configure {
        flavor,
        max_gadgets,
        registry,
        reserved
    },
    lp_new {
        parent,
        handle,
        id,
        reserved
    },
    lp_get {
        handle,
        new_handle,
        reserved
    },
    lp_put {
        handle,
        released,
        reserved
    },
    lp_lookup {
        parent,
        handle,
        id,
        reserved
    },
    lp_tryget {
        id,
        handle,
        reserved
    },
    lp_stat {
        handle,
        refcount,
        id,
        parent_id,
        children,
        reserved
    },
    lp_arena_stat {
        flavor,
        handles,
        live,
        created,
        freed,
        reserved
    },
    lp_rmw {
        value,
        old,
        new,
        failed,
        op,
        reserved
    },
    lp_run {
        op,
        handle,
        iterations,
        value,
        elapsed_ns,
        completed,
        failed,
        delta,
        broken,
        reserved
    },
    lp_txn_configure {
        flavor,
        max_credits,
        reserved
    },
    lp_txn_start {
        tid,
        handle,
        nblocks,
        reserved
    },
    lp_txn_stop {
        handle,
        credits,
        reserved
    },
    lp_txn_extend {
        handle,
        nblocks,
        credits,
        granted,
        reserved
    },
    lp_txn_commit {
        timeout_ms,
        slept,
        tid,
        updates,
        credits,
        wait_ns,
        reserved
    },
    lp_txn_stat {
        flavor,
        state,
        tid,
        updates,
        credits,
        max_credits,
        handles,
        committed,
        late_starts,
        max_wait_ns,
        overshoots,
        credits_hwm,
        reserved
    },
    lp_delay {
        points,
        usecs,
        reserved
    },
);

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
    lp_txn_configure,
    lp_txn_start,
    lp_txn_stop,
    lp_txn_extend,
    lp_txn_commit,
    lp_txn_stat,
    lp_delay,
);

// RUN's check interval must be a power of two, as C asserts too.
kernel::static_assert!(LP_RUN_CHECK_EVERY.is_power_of_two());
