// SPDX-License-Identifier: GPL-2.0

//! `/dev/lockless_rust`: the misc device and the ioctl dispatch.
//!
//! Mirrors `c-module/device.c`. Userspace drives it exactly like the C device,
//! through the structs of `shared-tests/lockless_uapi.h`:
//!
//! ```c
//! struct lp_identify id = { 0 };
//! int fd = open("/dev/lockless_rust", O_RDWR);
//!
//! if (fd < 0 || ioctl(fd, LP_IOC_IDENTIFY, &id) < 0)
//!         err(1, "identify");
//! printf("%s ABI %u\n", id.name, id.abi_version);
//! ```
//!
//! Each open file is an [`Arena`] (`arena.rs`, which C keeps in this file): its
//! handles, gadgets and variables.
//!
//! Every ioctl is all or nothing (see `lockless_uapi.h`): the ones that create a
//! handle reserve it, copy the answer out, then publish; the ones whose effect
//! cannot be undone (PUT, RMW, RUN) write the argument back before they act.

use core::{mem::size_of, pin::Pin};
use kernel::{
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    sync::atomic::{Acquire, Relaxed},
    time::{Instant, Monotonic},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice, UserSliceWriter},
};

use crate::{
    arena::{self, with_typed, Arena, Choice, Typed, LIVE_ARENAS, LIVE_HANDLES},
    gadget::{self, Flavor, Gadget, GadgetRef, Registry, DELAY_POINTS, LIVE_GADGETS},
    rmw,
    txn::{Txn, TxnHandle},
    uapi,
};

const ALL_FLAVORS: u32 = (1 << uapi::LP_FLAVOR_COUNT) - 1;
const ALL_OPS: u64 = (1 << uapi::LP_OP_COUNT) - 1;
const ALL_TXN_FLAVORS: u32 = (1 << uapi::LP_TXN_FLAVOR_COUNT) - 1;
const ALL_REGISTRIES: u32 = (1 << uapi::LP_REGISTRY_COUNT) - 1;

/// KCSAN's negative control, RUN RACY_INC: off unless loaded with it.
fn racy_control() -> bool {
    crate::module_parameters::racy_control.value() != 0
}

/// The registration of `/dev/lockless_rust`.
pub(crate) type Registration = MiscDeviceRegistration<Arena>;

/// Registers `/dev/lockless_rust`.
pub(crate) fn register() -> impl PinInit<Registration, Error> {
    MiscDeviceRegistration::register(MiscDeviceOptions {
        name: c"lockless_rust",
    })
}

/// An ioctl struct whose `reserved` field must be zero on input.
trait Reserved: FromBytes + AsBytes {
    fn reserved_is_zero(&self) -> bool;
}

macro_rules! impl_reserved {
    ($($t:ty),* $(,)?) => {$(
        impl Reserved for $t {
            fn reserved_is_zero(&self) -> bool {
                // An array of `__u32`, or one (CONFIGURE's).
                AsBytes::as_bytes(&self.reserved).iter().all(|&b| b == 0)
            }
        }
    )*};
}

impl_reserved!(
    uapi::lp_identify,
    uapi::lp_configure,
    uapi::lp_new,
    uapi::lp_get,
    uapi::lp_put,
    uapi::lp_lookup,
    uapi::lp_tryget,
    uapi::lp_stat,
    uapi::lp_arena_stat,
    uapi::lp_rmw,
    uapi::lp_run,
    uapi::lp_txn_configure,
    uapi::lp_txn_start,
    uapi::lp_txn_stop,
    uapi::lp_txn_extend,
    uapi::lp_txn_commit,
    uapi::lp_txn_stat,
    uapi::lp_delay,
);

/// `lp_copy_in()`: copies in an ioctl struct and checks that its reserved area is
/// zero. Returns the struct and the writer for the answer.
fn copy_in<T: Reserved>(arg: UserPtr) -> Result<(T, UserSliceWriter)> {
    let (mut reader, writer) = UserSlice::new(arg, size_of::<T>()).reader_writer();
    let input: T = reader.read()?;
    if !input.reserved_is_zero() {
        return Err(EINVAL);
    }
    Ok((input, writer))
}

/// `lp_copy_out()`.
fn copy_out<T: AsBytes>(mut writer: UserSliceWriter, value: &T) -> Result<isize> {
    writer.write(value)?;
    Ok(0)
}

/// `lp_check_writable()`: writes an ioctl struct back as it was read, before an
/// effect that cannot be undone: an argument userspace cannot write then fails
/// with `EFAULT` before anything happened.
fn check_writable<T: AsBytes>(arg: UserPtr, value: &T) -> Result {
    UserSlice::new(arg, size_of::<T>()).writer().write(value)
}

/// The last copy of PUT, RMW and RUN, after an effect that cannot be undone: if
/// another thread made the argument unwritable since [`check_writable`], the op
/// has happened and the ioctl returns 0 without its answer (as C does).
fn write_back<T: AsBytes>(writer: UserSliceWriter, value: &T) -> Result<isize> {
    let _ = copy_out(writer, value);
    Ok(0)
}

/// `lp_handle_new()`: hands the caller's reference `g` out in a new handle, all
/// or nothing: reserves the handle, lets `answer` write its number into the
/// answer and copies that out, then publishes. On failure `g` is put and
/// nothing stays behind.
fn handle_new<T: AsBytes, F: Flavor>(
    t: &Typed<F>,
    g: GadgetRef<F>,
    writer: UserSliceWriter,
    value: &mut T,
    answer: impl FnOnce(&mut T, u32),
) -> Result<isize> {
    let handle = t.handle_reserve()?;
    answer(value, handle);
    if let Err(e) = copy_out(writer, value) {
        t.handle_release(handle);
        return Err(e);
    }
    t.handle_publish(handle, g);
    Ok(0)
}

/// `lp_identify()`: answers `LP_IOC_IDENTIFY`.
fn lp_identify(arg: UserPtr) -> Result<isize> {
    let (_, writer) = copy_in::<uapi::lp_identify>(arg)?;
    let mut id = uapi::lp_identify {
        abi_version: uapi::LP_ABI_VERSION,
        flavors: ALL_FLAVORS,
        ops: ALL_OPS
            | if racy_control() {
                1 << uapi::LP_OP_RACY_INC
            } else {
                0
            },
        // As C's `atomic64_read()` into a `__u64`: a count taken below zero (one
        // decrement too many) shows as a huge value, not as 0.
        live_gadgets: LIVE_GADGETS.load(Relaxed) as u64,
        live_arenas: LIVE_ARENAS.load(Relaxed) as u64,
        live_handles: LIVE_HANDLES.load(Relaxed) as u64,
        txn_flavors: ALL_TXN_FLAVORS,
        registries: ALL_REGISTRIES,
        delay_points: DELAY_POINTS,
        ..Default::default()
    };
    for (dst, src) in id.name.iter_mut().zip(c"lockless_rust".to_bytes()) {
        *dst = *src as core::ffi::c_char;
    }
    copy_out(writer, &id)
}

/// `lp_configure()`. CONFIGURE may be repeated until the first NEW succeeds, and
/// only while no gadget exists: it switches the arena's [`Choice`] of live
/// [`Typed`], under the write side of `config`, which every ioctl that touches a
/// gadget holds shared for its whole run. So no gadget, and no TRYGET in an RCU
/// registry, ever sees its flavor or registry change: C's `synchronize_rcu()`
/// when leaving RCU mode has nothing to wait for here. The ids go on from the
/// old `Typed`'s. Nothing is allocated: every `Typed` was made at open().
fn lp_configure(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (c, _) = copy_in::<uapi::lp_configure>(arg)?;
    if c.flavor >= uapi::LP_FLAVOR_COUNT
        || c.max_gadgets > uapi::LP_MAX_GADGETS
        || c.registry >= uapi::LP_REGISTRY_COUNT
    {
        return Err(EINVAL);
    }
    // LOCKED's count is `LockedBy` the arena mutex: no RCU mode.
    if c.flavor == uapi::LP_FLAVOR_LOCKED && c.registry == uapi::LP_REGISTRY_RCU {
        return Err(EOPNOTSUPP);
    }
    let choice = Choice::new(c.flavor, c.registry)?;
    let mut config = arena.config.write();
    let (live, next_id) =
        with_typed!(arena, config, t => (t.gadgets.live(), t.gadgets.next_id.load(Relaxed)));
    if arena.configured.load(Relaxed) || live != 0 {
        return Err(EBUSY);
    }
    let max = if c.max_gadgets != 0 {
        c.max_gadgets
    } else {
        uapi::LP_MAX_GADGETS
    };
    *config = choice;
    with_typed!(arena, config, t => {
        // `with_typed!` pairs each `Choice` with a field of `AllTyped` by hand:
        // the live one must be the flavor and mode asked for.
        kernel::warn_on!(typed_ids(t) != (c.flavor, c.registry));
        t.gadgets.max_gadgets.store(max, Relaxed);
        t.gadgets.next_id.store(next_id, Relaxed);
    });
    Ok(0)
}

/// `lp_new()`: all or nothing. The gadget is allocated unpublished and its
/// handle reserved, the answer is copied out, and only then is the gadget
/// published and the arena marked configured. NEWs in flight hold `config`
/// shared, so the flavor the gadget was made for cannot change under them.
fn lp_new(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (n, writer) = copy_in::<uapi::lp_new>(arg)?;
    with_typed!(arena, arena.config.read(), t => lp_new_typed(arena, t, n, writer))
}

fn lp_new_typed<F: Flavor>(
    arena: &Arena,
    t: &Typed<F>,
    mut n: uapi::lp_new,
    writer: UserSliceWriter,
) -> Result<isize> {
    let parent = if n.parent != uapi::LP_HANDLE_NONE {
        Some(t.handle_get(n.parent)?)
    } else {
        None
    };
    // On failure from here on, dropping `g` unpublished is `lp_gadget_discard()`.
    let g = Gadget::alloc(&t.gadgets, parent.as_ref())?;
    arena.delay(uapi::LP_DELAY_NEW_ALLOC);
    n.handle = t.handle_reserve()?;
    n.id = g.id;
    if let Err(e) = copy_out(writer, &n) {
        t.handle_release(n.handle);
        return Err(e);
    }
    g.publish();
    arena.configured.store(true, Relaxed);
    t.handle_publish(n.handle, g);
    Ok(0)
}

fn lp_get(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_get>(arg)?;
    with_typed!(arena, arena.config.read(), t => {
        let g = t.handle_get(a.handle)?;
        handle_new(t, g, writer, &mut a, |a, h| a.new_handle = h)
    })
}

/// `lp_put()`: PUT cannot be undone, so the answer's way back is checked before
/// the handle is consumed.
fn lp_put(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_put>(arg)?;
    check_writable(arg, &a)?;
    a.released = with_typed!(arena, arena.config.read(), t => {
        gadget::put(t.handle_take(a.handle).ok_or(EBADF)?)
    });
    write_back(writer, &a)
}

fn lp_lookup(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_lookup>(arg)?;
    with_typed!(arena, arena.config.read(), t => {
        let parent = t.handle_get(a.parent)?;
        let child = parent.lookup(a.id);
        drop(parent);
        handle_new(t, child?, writer, &mut a, |a, h| a.handle = h)
    })
}

fn lp_tryget(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_tryget>(arg)?;
    with_typed!(arena, arena.config.read(), t => {
        let g = gadget::tryget_any(&t.gadgets, a.id)?;
        arena.delay(uapi::LP_DELAY_TRYGET_HELD);
        let g = gadget::published(g)?;
        handle_new(t, g, writer, &mut a, |a, h| a.handle = h)
    })
}

fn lp_stat(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut s, writer) = copy_in::<uapi::lp_stat>(arg)?;
    with_typed!(arena, arena.config.read(), t => t.with_handle(s.handle, |g| {
        s.refcount = Gadget::refcount(g);
        s.id = g.id;
        s.parent_id = g.parent_id();
        s.children = g.children();
    }))?;
    copy_out(writer, &s)
}

fn lp_arena_stat(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut s, writer) = copy_in::<uapi::lp_arena_stat>(arg)?;
    with_typed!(arena, arena.config.read(), t => {
        s.flavor = typed_ids(t).0;
        s.handles = t.handles_held();
        // `Acquire`, paired with the gadget drop's `Release` increment: every
        // gadget counted in `freed` was counted in `created` before, so `live`
        // cannot wrap.
        s.freed = t.gadgets.freed.load(Acquire);
        s.created = t.gadgets.created.load(Relaxed);
    });
    s.live = s.created.wrapping_sub(s.freed);
    copy_out(writer, &s)
}

/// The `enum lp_flavor` and `enum lp_registry` of a [`Typed`].
fn typed_ids<F: Flavor>(_t: &Typed<F>) -> (u32, u32) {
    (F::ID, <F::Registry as Registry>::ID)
}

fn lp_rmw_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut r, writer) = copy_in::<uapi::lp_rmw>(arg)?;
    if !rmw::op_is_rmw(r.op) || r.value > u64::from(uapi::LP_RMW_VALUE_MAX) {
        return Err(EINVAL);
    }
    // The op cannot be undone: as PUT, check the way back first.
    check_writable(arg, &r)?;
    let out = rmw::rmw(arena, r.op, r.value)?;
    r.old = out.old;
    r.new = out.new;
    r.failed = out.failed;
    write_back(writer, &r)
}

fn lp_run_id<F: Flavor>(t: &Typed<F>, r: &uapi::lp_run) -> u64 {
    if r.value == u64::from(uapi::LP_ID_NEWEST) {
        return t.gadgets.next_id.load(Relaxed);
    }
    r.value
}

/// `lp_run_txn_start()`: starts a handle of `nblocks` credits, or keeps, in
/// `retry_ts`, when the refused START began, for the retry (see [`RunTxn`]).
fn lp_run_txn_start(
    txn: &Txn,
    retry_ts: &mut Option<Instant<Monotonic>>,
    nblocks: u32,
) -> Result<TxnHandle> {
    let ts = *retry_ts.get_or_insert_with(Instant::now);
    let ret = txn.start(nblocks, ts);
    if ret.is_ok() {
        *retry_ts = None;
    }
    ret
}

/// RUN TXN_START_STOP's iteration: a handle of its own (not in the table) with
/// `value` credits, started and stopped at once. Returns 1 completed, 0 refused
/// (locked for commit, or over the credit limit; counted in `failed`).
#[inline(always)]
fn lp_run_txn_start_stop(t: &mut RunTxn<'_>, r: &mut uapi::lp_run) -> Result<u32> {
    // `lp_run()` checked `value`: 0..=LP_TXN_CREDITS_MAX.
    let nblocks = u32::try_from(r.value).map_err(|_| EINVAL)?;
    match lp_run_txn_start(t.txn, &mut t.retry_ts, nblocks) {
        Ok(h) => {
            t.txn.stop(h);
            Ok(1)
        }
        Err(e) if e == EAGAIN || e == ENOSPC => {
            r.failed += 1;
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// RUN TXN_EXTEND's iteration on the loop's private handle, started here when
/// there is none: extends it by `value` and gives the credits back at once.
/// Returns 1 completed, 0 refused (counted in `failed`): a START or an EXTEND
/// refused because a COMMIT locked the transaction (the handle is then stopped,
/// so that the drain can end), or an EXTEND over the limit.
#[inline(always)]
fn lp_run_txn_extend(t: &mut RunTxn<'_>, r: &mut uapi::lp_run) -> Result<u32> {
    // `lp_run()` checked `value`: 1..=LP_TXN_CREDITS_MAX.
    let nblocks = u32::try_from(r.value).map_err(|_| EINVAL)?;
    let RunTxn { txn, h, retry_ts } = t;
    let txn: &Txn = txn;
    let handle = match h {
        Some(handle) => handle,
        None => match lp_run_txn_start(txn, retry_ts, 0) {
            Ok(new) => h.insert(new),
            Err(e) if e == EAGAIN => {
                r.failed += 1;
                return Ok(0);
            }
            Err(e) => return Err(e),
        },
    };
    match txn.extend(handle, nblocks) {
        Ok(_) => {
            txn.unextend(handle, nblocks);
            Ok(1)
        }
        Err(e) if e == ENOSPC => {
            r.failed += 1;
            Ok(0)
        }
        Err(e) if e == EAGAIN => {
            if let Some(stopped) = h.take() {
                txn.stop(stopped);
            }
            r.failed += 1;
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// `struct lp_run_txn`: a TXN loop's state. TXN_EXTEND's private handle, stopped
/// when the loop ends, on every way out of it; and when the START being retried
/// began (`None`: no START refused): jbd2's `start_this_handle()` takes its time
/// once and keeps it across its retries, so that `t_max_wait` sees the whole
/// wait.
struct RunTxn<'a> {
    txn: &'a Txn,
    h: Option<TxnHandle>,
    retry_ts: Option<Instant<Monotonic>>,
}

impl Drop for RunTxn<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.h.take() {
            self.txn.stop(h);
        }
    }
}

/// `lp_run_get_put()`: LOOKUP_PUT, TRYGET_PUT: gets a gadget by id (`g`'s child,
/// or the arena's) and puts it. Returns 1 completed, 0 gone (`ENOENT`).
#[inline(always)]
fn lp_run_get_put<F: Flavor>(
    arena: &Arena,
    t: &Typed<F>,
    r: &uapi::lp_run,
    g: Option<&GadgetRef<F>>,
) -> Result<u32> {
    let other = if r.op == uapi::LP_OP_LOOKUP_PUT {
        g.ok_or(EBADF)?.lookup(lp_run_id(t, r))
    } else if r.op == uapi::LP_OP_TRYGET_ATOMIC_PUT {
        let atomic = arena.atomic_ctx.lock();
        let other = gadget::tryget_any(&t.gadgets, lp_run_id(t, r));
        drop(atomic);
        // Its put, if unpublished, may sleep: after the spinlock.
        other.and_then(gadget::published)
    } else {
        gadget::tryget(&t.gadgets, lp_run_id(t, r))
    };
    match other {
        Ok(other) => {
            gadget::put(other);
            Ok(1)
        }
        Err(e) if e == ENOENT => Ok(0),
        Err(e) => Err(e),
    }
}

/// `lp_run_rmw()`: an RMW op's iteration `i`. Returns 1 (an RMW op always
/// completes).
#[inline(always)]
fn lp_run_rmw(arena: &Arena, r: &mut uapi::lp_run, i: u64) -> Result<u32> {
    // The RUN handle of an RMW op is the step between operands. As in C, plain
    // arithmetic: `value` <= LP_RMW_VALUE_MAX, `i` < LP_RUN_MAX_ITERATIONS and
    // `step` < 2^32 keep the sum below 2^63, so it cannot wrap.
    let step = u64::from(r.handle.max(1));
    let value = r
        .value
        .wrapping_add(i.wrapping_mul(step))
        .min(u64::from(uapi::LP_RMW_VALUE_MAX));
    let out = rmw::rmw(arena, r.op, value)?;
    r.failed = r.failed.wrapping_add(out.failed);
    r.delta = r.delta.wrapping_add(out.new.wrapping_sub(out.old));
    // Once max(x, v) returned, x >= v for good (SET aside).
    if rmw::op_is_max(r.op) && rmw::max_read(arena, r.op) < value {
        r.broken += 1;
    }
    Ok(1)
}

/// `lp_run_one()`: one iteration of a RUN loop. Returns 1 completed, 0 not: a
/// `Result<u32>`, which comes back in a register, as C's `int` does.
///
/// Out of line, as clang compiles C's `lp_run_one()`, and with the helpers of
/// its arms inlined, as clang inlines C's (`lp_run_get_put()`, `lp_run_rmw()`,
/// `lp_run_txn_*()`): the two RUN loops then cost the same (EMPTY's row), and
/// every row compares the ops alone.
#[inline(never)]
fn lp_run_one<F: Flavor>(
    arena: &Arena,
    typed: &Typed<F>,
    r: &mut uapi::lp_run,
    g: Option<&GadgetRef<F>>,
    t: &mut RunTxn<'_>,
    i: u64,
) -> Result<u32> {
    match r.op {
        // GET_PUT_REFCOUNT: LOCKLESS's get and put are already `refcount_t`'s
        // (`Arc`'s), the like-for-like row of C's `lp_gadget_get_refcount()`.
        uapi::LP_OP_GET_PUT | uapi::LP_OP_GET_PUT_REFCOUNT => {
            gadget::put(g.ok_or(EBADF)?.clone());
            Ok(1)
        }
        uapi::LP_OP_LOOKUP_PUT | uapi::LP_OP_TRYGET_PUT | uapi::LP_OP_TRYGET_ATOMIC_PUT => {
            lp_run_get_put(arena, typed, r, g)
        }
        uapi::LP_OP_NEW_PUT => {
            let child = Gadget::create(&typed.gadgets, Some(g.ok_or(EBADF)?))?;
            if gadget::put(child) == 0 {
                r.failed = r.failed.wrapping_add(1);
            }
            Ok(1)
        }
        uapi::LP_OP_ATOMIC_FLOOR => {
            arena.floor.add(1, Relaxed);
            Ok(1)
        }
        uapi::LP_OP_TXN_START_STOP => lp_run_txn_start_stop(t, r),
        uapi::LP_OP_TXN_EXTEND => lp_run_txn_extend(t, r),
        uapi::LP_OP_EMPTY => Ok(1),
        uapi::LP_OP_RACY_INC if r.value == 2 => {
            // No race at all: plain, under the lock.
            *arena.racy_locked.lock() += 1;
            Ok(1)
        }
        uapi::LP_OP_RACY_INC if r.value != 0 => {
            // A race condition, not a data race: C's READ_ONCE()/WRITE_ONCE().
            let v = arena.racy_marked.load(Relaxed);
            arena.racy_marked.store(v.wrapping_add(1), Relaxed);
            Ok(1)
        }
        uapi::LP_OP_RACY_INC => {
            let p = arena.racy.0.get();
            // SAFETY: `p` points into the arena, alive for the whole ioctl. The
            // plain read and write race with other threads' RACY_INC: the data
            // race KCSAN is asked to see, reachable only with `racy_control=1`
            // (see `RacyCounter`).
            unsafe { *p = (*p).wrapping_add(1) };
            Ok(1)
        }
        _ => lp_run_rmw(arena, r, i),
    }
}

/// `lp_run()`: answers `LP_IOC_RUN`, a loop of one op in the caller's context.
///
/// GET_PUT, GET_PUT_REFCOUNT, LOOKUP_PUT and NEW_PUT hold their own reference
/// to the handle's gadget for the whole loop, so a concurrent PUT of the handle
/// cannot free it. After each MAX op, its copy of the variable is read again
/// ([`rmw::max_read`]) and `broken` counts the ops it found below their
/// operand. TXN_EXTEND's private handle is stopped when the loop ends, however
/// it ends. The fatal-signal test and the reschedule point run once every
/// `LP_RUN_CHECK_EVERY` iterations, not on each, as in C: EMPTY's RUN shows what
/// is left per iteration.
///
/// C calls `cond_resched()`; Rust 7.3 has no binding for it. On this kernel
/// (`CONFIG_PREEMPTION`, no `CONFIG_PREEMPT_DYNAMIC`) the C call is only its
/// debug check, `__might_resched()`, which `might_sleep()` performs here too.
fn lp_run(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut r, writer) = copy_in::<uapi::lp_run>(arg)?;
    // `value` is an RMW operand only for RMW ops; else an id, or ignored.
    // A TXN op's value is a credit count.
    if r.op == uapi::LP_OP_RACY_INC && !racy_control() {
        return Err(EOPNOTSUPP);
    }
    if r.op == uapi::LP_OP_RACY_INC && r.value > 2 {
        return Err(EINVAL);
    }
    if (r.op >= uapi::LP_OP_COUNT && r.op != uapi::LP_OP_RACY_INC)
        || (rmw::op_is_rmw(r.op) && r.value > u64::from(uapi::LP_RMW_VALUE_MAX))
        || (r.op == uapi::LP_OP_TXN_EXTEND
            && (r.value == 0 || r.value > u64::from(uapi::LP_TXN_CREDITS_MAX)))
        || (r.op == uapi::LP_OP_TXN_START_STOP && r.value > u64::from(uapi::LP_TXN_CREDITS_MAX))
    {
        return Err(EINVAL);
    }
    if r.iterations > u64::from(uapi::LP_RUN_MAX_ITERATIONS) {
        return Err(E2BIG);
    }
    // The loop cannot be undone: as PUT, check the way back first.
    check_writable(arg, &r)?;
    with_typed!(arena, arena.config.read(), t => lp_run_typed(arena, t, &mut r))?;
    write_back(writer, &r)
}

/// [`lp_run`]'s loop, compiled for the arena's flavor `F`. `lp_run()` checked
/// `iterations` (at most `LP_RUN_MAX_ITERATIONS`), so the loop's counts cannot
/// wrap: wrapping arithmetic, with no overflow check in the loop.
fn lp_run_typed<F: Flavor>(arena: &Arena, typed: &Typed<F>, r: &mut uapi::lp_run) -> Result {
    let g = match r.op {
        uapi::LP_OP_GET_PUT
        | uapi::LP_OP_GET_PUT_REFCOUNT
        | uapi::LP_OP_LOOKUP_PUT
        | uapi::LP_OP_NEW_PUT => Some(typed.handle_get(r.handle)?),
        _ => None,
    };
    if (r.op == uapi::LP_OP_LOOKUP_PUT && F::KIDS.is_none())
        || (r.op == uapi::LP_OP_GET_PUT_REFCOUNT && F::ID != uapi::LP_FLAVOR_LOCKLESS)
        || (r.op == uapi::LP_OP_TRYGET_ATOMIC_PUT && F::ID == uapi::LP_FLAVOR_LOCKED)
    {
        return Err(EOPNOTSUPP);
    }

    r.failed = 0;
    r.delta = 0;
    r.broken = 0;
    let mut completed = 0u64;
    let mut t = RunTxn {
        txn: &arena.txn,
        h: None,
        retry_ts: None,
    };
    let start = Instant::<Monotonic>::now();
    let mut i = 0u64;
    while i < r.iterations {
        let done = lp_run_one(arena, typed, r, g.as_ref(), &mut t, i)?;
        completed = completed.wrapping_add(u64::from(done));
        i = i.wrapping_add(1);
        if i % u64::from(uapi::LP_RUN_CHECK_EVERY) != 0 {
            continue;
        }
        // Dying: nobody will read the answer (no -EINTR in the contract).
        if kernel::current!().fatal_signal_pending() {
            return Err(EINTR);
        }
        kernel::task::might_sleep();
    }
    drop(t);
    r.elapsed_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(0);
    r.completed = completed;
    if r.op == uapi::LP_OP_RACY_INC {
        let v = if r.value == 2 {
            *arena.racy_locked.lock()
        } else if r.value != 0 {
            arena.racy_marked.load(Relaxed)
        } else {
            // SAFETY: as the increments' (see `RacyCounter`); C's `data_race()`.
            unsafe { arena.racy.0.get().read_volatile() }
        };
        r.delta = u64::from(v);
    }
    Ok(())
}

/// `lp_txn_configure_ioctl()`: validates (`EINVAL`), then configures (`EBUSY`
/// while handles run); writes nothing back, as CONFIGURE.
fn lp_txn_configure_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (c, _) = copy_in::<uapi::lp_txn_configure>(arg)?;
    arena.txn.configure(c.flavor, c.max_credits)?;
    Ok(0)
}

/// `lp_txn_start_ioctl()`: all or nothing, like NEW. Reserves a handle and
/// allocates its entry, starts (`EAGAIN` while a COMMIT drains, `ENOSPC` over
/// the credit limit), copies the answer out, and only then publishes; if the
/// copy fails, stops the handle again (giving its credits back) and frees the
/// slot. The START's wait counts from the ioctl's entry.
fn lp_txn_start_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let ts = Instant::<Monotonic>::now();
    let (mut s, writer) = copy_in::<uapi::lp_txn_start>(arg)?;
    if s.nblocks > uapi::LP_TXN_CREDITS_MAX {
        return Err(EINVAL);
    }
    let handle = arena.txn_handle_reserve()?;
    let entry = match arena::txn_entry_alloc() {
        Ok(entry) => entry,
        Err(e) => {
            arena.txn_handle_release(handle);
            return Err(e);
        }
    };
    let h = match arena.txn.start(s.nblocks, ts) {
        Ok(h) => h,
        Err(e) => {
            arena.txn_handle_release(handle);
            return Err(e);
        }
    };
    s.tid = h.tid;
    s.handle = handle;
    if let Err(e) = copy_out(writer, &s) {
        arena.txn.stop(h);
        arena.txn_handle_release(handle);
        return Err(e);
    }
    *entry.lock() = Some(h);
    arena.txn_handle_publish(handle, entry);
    Ok(0)
}

/// `lp_txn_stop_ioctl()`: STOP cannot be undone, so, as PUT, the answer's way
/// back is checked before the handle is consumed.
fn lp_txn_stop_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_txn_stop>(arg)?;
    check_writable(arg, &a)?;
    let entry = arena.txn_handle_take(a.handle).ok_or(EBADF)?;
    a.credits = arena.txn_handle_stop(entry);
    write_back(writer, &a)
}

/// `lp_txn_extend_ioctl()`: EXTEND cannot be undone either. The handle's entry is
/// pinned by a reference ([`Arena::txn_handle_get`]: the table's mutex held for
/// the clone only) and used under its own lock, so EXTENDs of different handles
/// run concurrently, as in jbd2, and a STOP of this one either waits for the
/// extend (whose credits its answer then includes) or comes first (`EBADF`,
/// nothing granted).
fn lp_txn_extend_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut a, writer) = copy_in::<uapi::lp_txn_extend>(arg)?;
    if a.nblocks == 0 || a.nblocks > uapi::LP_TXN_CREDITS_MAX {
        return Err(EINVAL);
    }
    check_writable(arg, &a)?;
    {
        let entry = arena.txn_handle_get(a.handle)?;
        // Dropped in reverse: the entry's unlock, then its reference.
        let mut running = entry.lock();
        let h = (*running).as_mut().ok_or(EBADF)?;
        a.credits = arena.txn.extend(h, a.nblocks)?;
        a.granted = h.credits;
    }
    write_back(writer, &a)
}

/// `lp_txn_commit_ioctl()`: a COMMIT that succeeded cannot be undone: the way
/// back is checked first.
fn lp_txn_commit_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut c, writer) = copy_in::<uapi::lp_txn_commit>(arg)?;
    if c.timeout_ms > uapi::LP_TXN_TIMEOUT_MAX_MS {
        return Err(EINVAL);
    }
    check_writable(arg, &c)?;
    arena.txn.commit(c.timeout_ms, &mut c)?;
    write_back(writer, &c)
}

/// `lp_txn_stat_ioctl()`.
fn lp_txn_stat_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (mut s, writer) = copy_in::<uapi::lp_txn_stat>(arg)?;
    arena.txn.stat(&mut s);
    s.handles = arena.txn_handles.lock().held;
    copy_out(writer, &s)
}

/// `lp_delay_ioctl()`: the race tests' window widener (not part of the
/// contract): which points of this arena stall, and for how long;
/// [`Arena::delay`] reads both.
fn lp_delay_ioctl(arena: &Arena, arg: UserPtr) -> Result<isize> {
    let (d, _) = copy_in::<uapi::lp_delay>(arg)?;
    if d.points & !DELAY_POINTS != 0 || d.usecs > uapi::LP_DELAY_USECS_MAX {
        return Err(EINVAL);
    }
    if DELAY_POINTS == 0 {
        return Err(EOPNOTSUPP);
    }
    arena.delays.set(d.points, d.usecs);
    Ok(0)
}

#[vtable]
impl MiscDevice for Arena {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        Arena::new_boxed()
    }

    /// `lp_release()`: close() puts every gadget handle and stops every transaction
    /// handle the arena still holds, through `&Arena` ([`Arena::release_handles`]),
    /// then the arena is dropped and freed.
    fn release(arena: Pin<KBox<Arena>>, _file: &File) {
        arena.release_handles();
        drop(arena);
    }

    fn ioctl(me: Pin<&Arena>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let arena = me.get_ref();
        let arg = UserPtr::from_addr(arg);
        match cmd {
            uapi::LP_IOC_IDENTIFY => lp_identify(arg),
            uapi::LP_IOC_CONFIGURE => lp_configure(arena, arg),
            uapi::LP_IOC_NEW => lp_new(arena, arg),
            uapi::LP_IOC_GET => lp_get(arena, arg),
            uapi::LP_IOC_PUT => lp_put(arena, arg),
            uapi::LP_IOC_LOOKUP => lp_lookup(arena, arg),
            uapi::LP_IOC_TRYGET => lp_tryget(arena, arg),
            uapi::LP_IOC_STAT => lp_stat(arena, arg),
            uapi::LP_IOC_ARENA_STAT => lp_arena_stat(arena, arg),
            uapi::LP_IOC_RMW => lp_rmw_ioctl(arena, arg),
            uapi::LP_IOC_RUN => lp_run(arena, arg),
            uapi::LP_IOC_TXN_CONFIGURE => lp_txn_configure_ioctl(arena, arg),
            uapi::LP_IOC_TXN_START => lp_txn_start_ioctl(arena, arg),
            uapi::LP_IOC_TXN_STOP => lp_txn_stop_ioctl(arena, arg),
            uapi::LP_IOC_TXN_EXTEND => lp_txn_extend_ioctl(arena, arg),
            uapi::LP_IOC_TXN_COMMIT => lp_txn_commit_ioctl(arena, arg),
            uapi::LP_IOC_TXN_STAT => lp_txn_stat_ioctl(arena, arg),
            uapi::LP_IOC_DELAY => lp_delay_ioctl(arena, arg),
            _ => Err(ENOTTY),
        }
    }
}

/// `lp_check_leaks()`: WARNs at module exit if any object is still alive.
///
/// No file can be open at exit (each holds a reference to the module), and
/// closing the last one frees every arena, gadget and handle, so a non-zero live
/// counter is a leak: one that kmemleak may miss when a stale pointer still refers
/// to the object. The WARN fails the run.
pub(crate) fn check_leaks() {
    let arenas = LIVE_ARENAS.load(Relaxed);
    let gadgets = LIVE_GADGETS.load(Relaxed);
    let handles = LIVE_HANDLES.load(Relaxed);
    let leaked = arenas != 0 || gadgets != 0 || handles != 0;
    if leaked {
        pr_warn!("leaked {arenas} arenas, {gadgets} gadgets, {handles} handles\n");
    }
    kernel::warn_on!(leaked);
}
