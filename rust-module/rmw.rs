// SPDX-License-Identifier: GPL-2.0

//! Read-modify-write primitives built on compare-and-swap, from "Lockless
//! patterns: more read-modify-write operations" (LWN, 2021) and commit
//! f7f497cb7024 ("jbd2: kill t_handle_lock transaction spinlock").
//!
//! Mirrors `c-module/rmw.c`, function for function, with
//! `kernel::sync::atomic::Atomic<T>`: `Atomic<i32>` where C has an `atomic_t`,
//! `Atomic<usize>` where jbd2 has an `unsigned long`. The orderings are C's:
//! `Full` where C's `atomic_cmpxchg()`/`cmpxchg()`/`atomic_xchg()` are fully
//! ordered, `Relaxed` where C uses `atomic_read()`/`READ_ONCE()`.
//!
//! Each primitive reports the value it replaced, the value it left and how many
//! of its cmpxchg attempts failed (lost a race and had to retry). The increments
//! saturate at `LP_RMW_VALUE_MAX` (`i32::MAX`) instead of wrapping, as
//! `refcount_t` does: see `enum lp_op` in `lockless_uapi.h`.

use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        SpinLock,
    },
};

use crate::{arena::Arena, uapi};

/// What one op did: `lp_rmw`'s output fields.
pub(crate) struct RmwOut {
    /// The value before the op.
    pub(crate) old: u64,
    /// The value after the op.
    pub(crate) new: u64,
    /// Failed cmpxchg attempts (retries).
    pub(crate) failed: u64,
}

/// `lp_max_cmpxchg()`: stores `max(*x, new)` into `x`.
///
/// The article's cmpxchg loop: give up as soon as the value seen is already
/// larger, retry while another CPU changed it under us. Fully ordered when it
/// stores, unordered (`load(Relaxed)`) when it gives up.
///
/// Returns the value the op replaced or found larger.
fn max_cmpxchg(x: &Atomic<i32>, new: i32, failed: &mut u64) -> i32 {
    let mut old = x.load(Relaxed);
    loop {
        if old > new {
            break;
        }
        match x.cmpxchg(old, new, Full) {
            Ok(_) => break,
            Err(current) => {
                old = current;
                *failed += 1;
            }
        }
    }
    old
}

/// `lp_max_jbd2()`: stores `max(*p, new)` into `p`, as jbd2's
/// `update_t_max_wait()`.
///
/// The loop exactly as commit f7f497cb7024 wrote it: `READ_ONCE()`, then
/// `while (old < new) old = cmpxchg(p, old, new);`. A successful cmpxchg returns
/// the old value, still below `new`, so the loop always runs once more after
/// storing and that last cmpxchg fails against `new` itself: it is counted in
/// `failed`, as in C.
///
/// Returns the value the op replaced or found not smaller.
fn max_jbd2(p: &Atomic<usize>, new: usize, failed: &mut u64) -> usize {
    let mut old = p.load(Relaxed);
    let mut replaced = None;
    while old < new {
        let prev = old;
        old = p.cmpxchg(old, new, Full).unwrap_or_else(|current| current);
        if old == prev {
            replaced = Some(prev);
        } else {
            *failed += 1;
        }
    }
    replaced.unwrap_or(old)
}

/// `lp_max_locked()`: stores `max(*p, new)` under jbd2's `t_handle_lock`.
///
/// `update_t_max_wait()` before commit f7f497cb7024: a compare-and-store under a
/// spinlock, ordered by the lock's acquire and release.
///
/// Returns the value before the op.
fn max_locked(lock: &SpinLock<usize>, new: usize) -> usize {
    let mut p = lock.lock();
    let old = *p;
    if new > old {
        *p = new;
    }
    old
}

/// `lp_inc_not_zero_cmpxchg()`: increments `x` unless it is zero.
///
/// The article's "increment if non-zero" loop, the lock-free fast path of
/// get-unless-zero, which also stops at `i32::MAX` (saturates) rather than wrap.
/// Fully ordered when it increments, unordered otherwise.
///
/// Returns the value before the op (0 or `i32::MAX`: nothing was stored).
fn inc_not_zero_cmpxchg(x: &Atomic<i32>, failed: &mut u64) -> i32 {
    let mut old = x.load(Relaxed);
    loop {
        if old == 0 || old == i32::MAX {
            break;
        }
        match x.cmpxchg(old, old + 1, Full) {
            Ok(_) => break,
            Err(current) => {
                old = current;
                *failed += 1;
            }
        }
    }
    old
}

/// `lp_inc_not_zero_try_cmpxchg()`: increments `x` unless it is zero, the
/// library way.
///
/// C writes out the generic `atomic_fetch_add_unless()` loop on
/// `atomic_try_cmpxchg()`, which refreshes the expected value on failure, plus
/// the saturation test the library call cannot make. `Atomic::cmpxchg()` is
/// `atomic_try_cmpxchg()` underneath and returns the value it found, so in Rust
/// this loop and [`inc_not_zero_cmpxchg`]'s are the same code: the two ops
/// differ only in C. Fully ordered when it increments, unordered otherwise.
///
/// Returns the value before the op (0 or `i32::MAX`: nothing was stored).
fn inc_not_zero_try_cmpxchg(x: &Atomic<i32>, failed: &mut u64) -> i32 {
    let mut old = x.load(Relaxed);
    while old != 0 && old != i32::MAX {
        match x.cmpxchg(old, old + 1, Full) {
            Ok(_) => break,
            Err(current) => {
                old = current;
                *failed += 1;
            }
        }
    }
    old
}

/// `lp_fetch_inc_cmpxchg()`: `atomic_fetch_inc()` written as a cmpxchg loop.
///
/// The article's first listing, stopping at `i32::MAX` (saturating) rather than
/// wrap. Fully ordered when it increments, like `atomic_fetch_inc()`; unordered
/// at `i32::MAX`.
///
/// Returns the value before the increment (`i32::MAX`: nothing was stored).
fn fetch_inc_cmpxchg(x: &Atomic<i32>, failed: &mut u64) -> i32 {
    let mut old = x.load(Relaxed);
    while old != i32::MAX {
        match x.cmpxchg(old, old + 1, Full) {
            Ok(_) => break,
            Err(current) => {
                old = current;
                *failed += 1;
            }
        }
    }
    old
}

/// `lp_u32()`: the `atomic_t` value as the contract reports it. The variable
/// never goes negative (the ops saturate).
fn u32_of(v: i32) -> u64 {
    u64::from(v as u32)
}

/// `lp_report_inc()`: `(old, new)` of an increment that found `old`: it stored
/// `old + 1` if it was `allowed` to (not zero, for INC_NOT_ZERO) and `old` was
/// below `i32::MAX`, and nothing otherwise.
fn report_inc(old: i32, allowed: bool) -> (u64, u64) {
    let new = if allowed && old != i32::MAX {
        old + 1
    } else {
        old
    };
    (u32_of(old), u32_of(new))
}

/// `lp_op_is_rmw()`: whether `op` is one `LP_IOC_RMW` performs (MAX_CMPXCHG ..
/// READ).
pub(crate) fn op_is_rmw(op: u32) -> bool {
    op <= uapi::LP_OP_READ
}

/// `lp_op_is_max()`: whether `op` is one of the MAX ops (MAX_CMPXCHG, MAX_JBD2,
/// MAX_LOCKED).
pub(crate) fn op_is_max(op: u32) -> bool {
    matches!(
        op,
        uapi::LP_OP_MAX_CMPXCHG | uapi::LP_OP_MAX_JBD2 | uapi::LP_OP_MAX_LOCKED
    )
}

/// `lp_max_read()`: reads a MAX op's own copy of the arena variable again.
///
/// Reads the copy the way the op itself first reads it: `load(Relaxed)` of the
/// `Atomic<i32>` (`atomic_read()`) and of jbd2's lockless `t_max_wait`
/// (`READ_ONCE()`), the pre-patch `t_max_wait` under its spinlock. The first two
/// are unordered, and need no more: called after the op by the same thread, the
/// read is ordered after the op's own load or store of the same variable by
/// coherence, so it returns that value or a later one. RUN uses it to count
/// (`lp_run::broken`) MAX ops after which the copy is below their operand.
///
/// Returns the copy's current value.
pub(crate) fn max_read(arena: &Arena, op: u32) -> u64 {
    match op {
        uapi::LP_OP_MAX_CMPXCHG => u32_of(arena.var.load(Relaxed)),
        uapi::LP_OP_MAX_JBD2 => arena.max_wait.load(Relaxed) as u64,
        _ => *arena.max_locked.lock() as u64,
    }
}

/// `lp_rmw()`: performs one read-modify-write op on the arena variable.
///
/// `value` is at most `LP_RMW_VALUE_MAX` (checked by the caller), so it fits the
/// `i32` and `usize` copies. Returns `EINVAL` for an op that is not an RMW op.
pub(crate) fn rmw(arena: &Arena, op: u32, value: u64) -> Result<RmwOut> {
    let v32 = i32::try_from(value).map_err(|_| EINVAL)?;
    let vsize = usize::try_from(value).map_err(|_| EINVAL)?;
    let mut failed = 0;
    let (old, new) = match op {
        uapi::LP_OP_MAX_CMPXCHG => {
            let old = u32_of(max_cmpxchg(&arena.var, v32, &mut failed));
            (old, old.max(value))
        }
        uapi::LP_OP_MAX_JBD2 => {
            let old = max_jbd2(&arena.max_wait, vsize, &mut failed) as u64;
            (old, old.max(value))
        }
        uapi::LP_OP_MAX_LOCKED => {
            let old = max_locked(&arena.max_locked, vsize) as u64;
            (old, old.max(value))
        }
        uapi::LP_OP_INC_NOT_ZERO_CMPXCHG => {
            let old = inc_not_zero_cmpxchg(&arena.var, &mut failed);
            report_inc(old, old != 0)
        }
        uapi::LP_OP_INC_NOT_ZERO_TRY_CMPXCHG => {
            let old = inc_not_zero_try_cmpxchg(&arena.var, &mut failed);
            report_inc(old, old != 0)
        }
        uapi::LP_OP_FETCH_INC_CMPXCHG => {
            let old = fetch_inc_cmpxchg(&arena.var, &mut failed);
            report_inc(old, true)
        }
        uapi::LP_OP_SET => {
            *arena.max_locked.lock() = vsize;
            arena.max_wait.store(vsize, Relaxed);
            (u32_of(arena.var.xchg(v32, Full)), value)
        }
        uapi::LP_OP_READ => {
            let old = u32_of(arena.var.load(Relaxed));
            (old, old)
        }
        _ => return Err(EINVAL),
    };
    Ok(RmwOut { old, new, failed })
}
