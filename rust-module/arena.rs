// SPDX-License-Identifier: GPL-2.0

//! The arena: what one open file of `/dev/lockless_rust` holds (`struct
//! lp_arena`), its handle table, and the module-wide counts of arenas and
//! handles.
//!
//! In C the arena is handled in `c-module/device.c` (`lp_open()`,
//! `lp_release()`, `lp_handle_*()`) with `struct lp_arena` in `lockless_c.h`;
//! here it has a module of its own, so that `device.rs` (the misc device and
//! the ioctls), `gadget.rs` and `rmw.rs` all find it in one place. A handle is
//! an index in the arena's handle table holding one strong reference
//! ([`GadgetRef`]): PUT consumes it, GET/LOOKUP/TRYGET/NEW create one, and
//! closing the file puts whatever is left.

use core::{cell::UnsafeCell, pin::Pin, ptr::NonNull};
use kernel::{
    new_mutex, new_rwsem, new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex, RwSem, SpinLock,
    },
};

use crate::{
    gadget::{
        self, Delay, DelayRef, Flavor, GadgetRef, Gadgets, KrefLock, KrefMutex, KrefRwsem, Locked,
        Lockless, RegLock, RegRcu, WeakCmpxchg,
    },
    txn::{Txn, TxnHandle},
    uapi,
};

/// Arenas alive in the whole module (`IDENTIFY.live_arenas`): counted from the
/// allocation in [`Arena::new_boxed`] (`open()`) until the arena's drop, the
/// last step before `KBox` frees its memory, so an arena that `release()` leaks
/// stays counted. `Relaxed`, like [`LIVE_GADGETS`](crate::gadget::LIVE_GADGETS):
/// only a quiescent IDENTIFY and module exit read it.
pub(crate) static LIVE_ARENAS: Atomic<i64> = Atomic::new(0);

/// Handles held in the whole module, all arenas together (`IDENTIFY.live_handles`):
/// entries of both handle tables (gadget and transaction handles), counted by
/// [`Handles::publish`] when it publishes one and until [`Handles::take`] takes it
/// out again (PUT, TXN_STOP, and [`Arena::release_handles`] at close() for every
/// handle still held). `Relaxed`.
pub(crate) static LIVE_HANDLES: Atomic<i64> = Atomic::new(0);

/// One slot of a handle table.
enum Slot<T> {
    /// No handle.
    Free,
    /// A handle being created (`XA_ZERO_ENTRY` in C): not a handle yet, so PUT,
    /// GET and STAT answer `EBADF` for it, but no other handle gets its number.
    Reserved,
    /// A handle: for a gadget handle, one strong reference owned by the file.
    Held(T),
}

/// A handle table: handle `h` is `slots[h - 1]`. The lowest free handle is
/// handed out first, as `xa_alloc()` does in C, so both modules give the same
/// handles. The arena has two, with numbers of their own: gadget handles hold a
/// [`GadgetRef`], transaction handles a [`TxnEntry`].
pub(crate) struct Handles<T> {
    slots: KVec<Slot<T>>,
    /// Handles in the table (`ARENA_STAT.handles`, `TXN_STAT.handles`), reserved
    /// ones not counted.
    pub(crate) held: u32,
}

/// A transaction handle in the file's table (C's `struct lp_txn_entry`): the
/// [`TxnHandle`] under a lock of its own, `None` once STOP (or close()) has taken
/// it. The table holds one `Arc`, from [`Arena::txn_handle_publish`] until
/// [`Arena::txn_handle_stop`] drops it, and each EXTEND using the entry another
/// ([`Arena::txn_handle_get`]); the last drop frees it.
///
/// jbd2's `handle_t` belongs to one task, so EXTENDs of different handles run
/// concurrently under the shared `j_state_lock` only. Ours belong to a file that
/// many threads share: the `Arc` keeps the entry alive for an EXTEND that a STOP
/// takes out of the table meanwhile, and the lock puts an EXTEND and the STOP of
/// the same handle in one order: EXTEND holds it across [`Txn::extend`], STOP
/// takes the handle out under it. So EXTENDs of different handles need no common
/// lock but the table's mutex, held only to find the entry. Lock order: the
/// entry's lock, then `j_state_lock` (read), then `t_handle_lock`; the table's
/// mutex is never held with it.
pub(crate) type TxnEntry = Arc<SpinLock<Option<TxnHandle>>>;

/// `lp_txn_entry_alloc()`: a new entry for a handle being started, empty until
/// the handle is put in it before [`Arena::txn_handle_publish`].
pub(crate) fn txn_entry_alloc() -> Result<TxnEntry> {
    Arc::pin_init(new_spinlock!(None, "lp_txn_entry.lock"), GFP_KERNEL_ACCOUNT)
}

/// RACY_INC's counter (C's `racy`): KCSAN's negative control.
///
/// Concurrent RUNs of RACY_INC read and write it with plain accesses and no lock:
/// a data race on purpose, undefined behaviour in Rust as it is a bug in C. The op
/// runs only in a module loaded with `racy_control=1`, which nothing in `make
/// check` does; `make kcsan-control` loads it to see what KCSAN reports of it.
pub(crate) struct RacyCounter(pub(crate) UnsafeCell<u32>);

// SAFETY: This is not sound, and says so: sharing `RacyCounter` between threads
// lets RACY_INC race on its `u32`, which is the point of the control. Nothing
// else touches the counter, and the op is refused (`EOPNOTSUPP`) unless the
// module parameter `racy_control` asks for it.
unsafe impl Sync for RacyCounter {}

/// The gadgets and gadget handles of an arena whose flavor is `F`: what CONFIGURE
/// chooses, as a whole.
#[pin_data]
pub(crate) struct Typed<F: Flavor> {
    /// The gadgets: the article v1 "gadgets_lock", the roots, the registry and
    /// the counts (`gadget.rs`).
    #[pin]
    pub(crate) gadgets: Gadgets<F>,
    /// The handles; the mutex keeps a handle's gadget alive while a reference is
    /// taken from it.
    #[pin]
    handles: Mutex<Handles<GadgetRef<F>>>,
}

/// Which of the arena's [`Typed`] is live: its flavor and registry mode,
/// converted once from the UAPI's `u32`s (CONFIGURE). Each ioctl matches it
/// once ([`with_typed!`]) and runs code monomorphized for the flavor. LOCKED has
/// no RCU mode.
#[derive(Clone, Copy)]
pub(crate) enum Choice {
    /// `LP_FLAVOR_LOCKED`.
    Locked,
    /// `LP_FLAVOR_LOCKLESS`, `LP_REGISTRY_LOCK`.
    LocklessLock,
    /// `LP_FLAVOR_LOCKLESS`, `LP_REGISTRY_RCU`.
    LocklessRcu,
    /// `LP_FLAVOR_WEAK_CMPXCHG`, `LP_REGISTRY_LOCK`.
    WeakCmpxchgLock,
    /// `LP_FLAVOR_WEAK_CMPXCHG`, `LP_REGISTRY_RCU`.
    WeakCmpxchgRcu,
    /// `LP_FLAVOR_KREF_MUTEX`, `LP_REGISTRY_LOCK`.
    KrefMutexLock,
    /// `LP_FLAVOR_KREF_MUTEX`, `LP_REGISTRY_RCU`.
    KrefMutexRcu,
    /// `LP_FLAVOR_KREF_LOCK`, `LP_REGISTRY_LOCK`.
    KrefLockLock,
    /// `LP_FLAVOR_KREF_LOCK`, `LP_REGISTRY_RCU`.
    KrefLockRcu,
    /// `LP_FLAVOR_KREF_RWSEM`, `LP_REGISTRY_LOCK`.
    KrefRwsemLock,
    /// `LP_FLAVOR_KREF_RWSEM`, `LP_REGISTRY_RCU`.
    KrefRwsemRcu,
}

impl Choice {
    /// `flavor` in `registry` mode: `EINVAL` for an unknown flavor or mode,
    /// `EOPNOTSUPP` for LOCKED with RCU.
    pub(crate) fn new(flavor: u32, registry: u32) -> Result<Self> {
        let rcu = match registry {
            uapi::LP_REGISTRY_LOCK => false,
            uapi::LP_REGISTRY_RCU => true,
            _ => return Err(EINVAL),
        };
        Ok(match (flavor, rcu) {
            (uapi::LP_FLAVOR_LOCKED, false) => Self::Locked,
            (uapi::LP_FLAVOR_LOCKED, true) => return Err(EOPNOTSUPP),
            (uapi::LP_FLAVOR_LOCKLESS, false) => Self::LocklessLock,
            (uapi::LP_FLAVOR_LOCKLESS, true) => Self::LocklessRcu,
            (uapi::LP_FLAVOR_WEAK_CMPXCHG, false) => Self::WeakCmpxchgLock,
            (uapi::LP_FLAVOR_WEAK_CMPXCHG, true) => Self::WeakCmpxchgRcu,
            (uapi::LP_FLAVOR_KREF_MUTEX, false) => Self::KrefMutexLock,
            (uapi::LP_FLAVOR_KREF_MUTEX, true) => Self::KrefMutexRcu,
            (uapi::LP_FLAVOR_KREF_LOCK, false) => Self::KrefLockLock,
            (uapi::LP_FLAVOR_KREF_LOCK, true) => Self::KrefLockRcu,
            (uapi::LP_FLAVOR_KREF_RWSEM, false) => Self::KrefRwsemLock,
            (uapi::LP_FLAVOR_KREF_RWSEM, true) => Self::KrefRwsemRcu,
            _ => return Err(EINVAL),
        })
    }
}

/// One [`Typed`] for each [`Choice`], all made with the arena at open(), so that
/// CONFIGURE allocates nothing (it has no `ENOMEM`, as in C): it only changes
/// which one is live, and only while that one is empty. The others stay empty.
#[pin_data]
pub(crate) struct AllTyped {
    #[pin]
    pub(crate) locked: Typed<Locked>,
    #[pin]
    pub(crate) lockless_lock: Typed<Lockless<RegLock>>,
    #[pin]
    pub(crate) lockless_rcu: Typed<Lockless<RegRcu>>,
    #[pin]
    pub(crate) weak_cmpxchg_lock: Typed<WeakCmpxchg<RegLock>>,
    #[pin]
    pub(crate) weak_cmpxchg_rcu: Typed<WeakCmpxchg<RegRcu>>,
    #[pin]
    pub(crate) kref_mutex_lock: Typed<KrefMutex<RegLock>>,
    #[pin]
    pub(crate) kref_mutex_rcu: Typed<KrefMutex<RegRcu>>,
    #[pin]
    pub(crate) kref_lock_lock: Typed<KrefLock<RegLock>>,
    #[pin]
    pub(crate) kref_lock_rcu: Typed<KrefLock<RegRcu>>,
    #[pin]
    pub(crate) kref_rwsem_lock: Typed<KrefRwsem<RegLock>>,
    #[pin]
    pub(crate) kref_rwsem_rcu: Typed<KrefRwsem<RegRcu>>,
}

impl AllTyped {
    /// Every `Typed<F>` empty, their gadgets each given a `delays()`, the arena's.
    fn new(delays: impl Fn() -> DelayRef) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            locked <- Typed::new(delays()),
            lockless_lock <- Typed::new(delays()),
            lockless_rcu <- Typed::new(delays()),
            weak_cmpxchg_lock <- Typed::new(delays()),
            weak_cmpxchg_rcu <- Typed::new(delays()),
            kref_mutex_lock <- Typed::new(delays()),
            kref_mutex_rcu <- Typed::new(delays()),
            kref_lock_lock <- Typed::new(delays()),
            kref_lock_rcu <- Typed::new(delays()),
            kref_rwsem_lock <- Typed::new(delays()),
            kref_rwsem_rcu <- Typed::new(delays()),
        })
    }
}

/// The arena's live [`Typed`] for the lifetime of `guard`, a borrow of the arena's
/// `config` lock: a gadget and the `Typed<F>` it came from cannot outlive the
/// lock side that keeps CONFIGURE from changing `F`.
#[inline]
pub(crate) fn typed_under<'a, G, T>(_guard: &'a G, typed: &'a T) -> &'a T {
    typed
}

/// `match`es the arena's [`Choice`], read through `$guard` (a guard of its
/// `config`), once: `$t` is the live `&Typed<F>`, borrowing `$guard`, and `$body`
/// is compiled once for each flavor.
macro_rules! with_typed {
    ($arena:expr, $guard:expr, $t:ident => $body:expr) => {{
        use $crate::arena::Choice as C;
        let all = &$arena.typed;
        let guard = &$guard;
        match **guard {
            C::Locked => with_typed!(@arm guard, all.locked, $t, $body),
            C::LocklessLock => with_typed!(@arm guard, all.lockless_lock, $t, $body),
            C::LocklessRcu => with_typed!(@arm guard, all.lockless_rcu, $t, $body),
            C::WeakCmpxchgLock => with_typed!(@arm guard, all.weak_cmpxchg_lock, $t, $body),
            C::WeakCmpxchgRcu => with_typed!(@arm guard, all.weak_cmpxchg_rcu, $t, $body),
            C::KrefMutexLock => with_typed!(@arm guard, all.kref_mutex_lock, $t, $body),
            C::KrefMutexRcu => with_typed!(@arm guard, all.kref_mutex_rcu, $t, $body),
            C::KrefLockLock => with_typed!(@arm guard, all.kref_lock_lock, $t, $body),
            C::KrefLockRcu => with_typed!(@arm guard, all.kref_lock_rcu, $t, $body),
            C::KrefRwsemLock => with_typed!(@arm guard, all.kref_rwsem_lock, $t, $body),
            C::KrefRwsemRcu => with_typed!(@arm guard, all.kref_rwsem_rcu, $t, $body),
        }
    }};
    (@arm $guard:ident, $typed:expr, $t:ident, $body:expr) => {{
        let $t = $crate::arena::typed_under($guard, &$typed);
        $body
    }};
}
pub(crate) use with_typed;

/// One open file of `/dev/lockless_rust` (`struct lp_arena`).
#[pin_data(PinnedDrop)]
pub(crate) struct Arena {
    /// A NEW has succeeded: the flavor can no longer change. Set by NEW under
    /// `config`'s read side, read by CONFIGURE under its write side.
    pub(crate) configured: Atomic<bool>,
    /// Which of `typed` is live, the flavor CONFIGURE chose. Every ioctl that
    /// touches a gadget holds the read side for its whole run, and sees `typed`
    /// through it ([`with_typed!`]); CONFIGURE, which changes it, the write
    /// side: so no gadget and no TRYGET, even of an RCU registry, ever sees its
    /// flavor or registry mode change (C's `synchronize_rcu()` in
    /// `lp_configure()` has nothing to wait for here).
    #[pin]
    pub(crate) config: RwSem<Choice>,
    /// The gadgets and their handles, one [`Typed`] per flavor and mode.
    #[pin]
    pub(crate) typed: AllTyped,
    /// LP_IOC_DELAY's knob ([`Arena::delay`]), which the gadgets of every
    /// [`Typed`] point to.
    pub(crate) delays: Delay,
    /// The article's `atomic_t` variable.
    pub(crate) var: Atomic<i32>,
    /// jbd2's `t_max_wait` after the patch (lockless).
    pub(crate) max_wait: Atomic<usize>,
    /// jbd2's `t_max_wait` before the patch, under its `t_handle_lock`.
    #[pin]
    pub(crate) max_locked: SpinLock<usize>,
    /// Private counter of the ATOMIC_FLOOR op.
    pub(crate) floor: Atomic<i32>,
    /// RACY_INC's counter, written with no lock and no marking on purpose.
    pub(crate) racy: RacyCounter,
    /// RACY_INC's second counter: no lock, marked (atomic) accesses.
    pub(crate) racy_marked: Atomic<u32>,
    /// RACY_INC's third counter: plain accesses under its lock.
    #[pin]
    pub(crate) racy_locked: SpinLock<u32>,
    /// Held around TRYGET_ATOMIC_PUT's TRYGET, to run it where no sleeping lock
    /// may be taken (atomic context; under `PREEMPT_RT`, a preemptible section
    /// that may not sleep).
    #[pin]
    pub(crate) atomic_ctx: SpinLock<()>,
    /// jbd2's transaction (`struct lp_txn`).
    #[pin]
    pub(crate) txn: Txn,
    /// The transaction handles (C's `txn_handles` xarray and count, under
    /// `txn_handles_lock`), each one [`TxnEntry`]. The mutex is held only to
    /// reserve, release, publish, look up (cloning the entry's `Arc`) and take out
    /// an entry, and to read the count, never while a handle is used, which is
    /// under the entry's own lock.
    #[pin]
    pub(crate) txn_handles: Mutex<Handles<TxnEntry>>,
}

impl<T> Handles<T> {
    /// An empty table.
    fn new() -> Self {
        Self {
            slots: KVec::new(),
            held: 0,
        }
    }

    /// The slot of `handle`, if it is in the table's range.
    fn slot(handle: u32) -> Option<usize> {
        usize::try_from(handle).ok()?.checked_sub(1)
    }

    /// What `handle` holds, if it is a live handle.
    pub(crate) fn get(&self, handle: u32) -> Option<&T> {
        match self.slots.get(Self::slot(handle)?)? {
            Slot::Held(v) => Some(v),
            _ => None,
        }
    }

    /// Reserves the lowest free handle (`ENOSPC` when the table is full): a slot
    /// that reads as no handle until [`Handles::publish`] fills it or
    /// [`Handles::release`] frees it.
    fn reserve(&mut self) -> Result<u32> {
        let slot = match self.slots.iter().position(|s| matches!(s, Slot::Free)) {
            Some(i) => i,
            None if self.slots.len() < uapi::LP_MAX_HANDLES as usize => {
                self.slots.push(Slot::Free, GFP_KERNEL_ACCOUNT)?;
                self.slots.len() - 1
            }
            None => return Err(ENOSPC),
        };
        self.slots[slot] = Slot::Reserved;
        // `slot` < LP_MAX_HANDLES, so the handle fits a `u32`.
        Ok(slot as u32 + 1)
    }

    /// The slot of a handle [`Handles::reserve`] gave. Only the thread that
    /// reserved it fills or frees it, so it is still reserved: `None` (and a
    /// WARN) would be a bug of this file.
    fn reserved_slot(&mut self, handle: u32) -> Option<&mut Slot<T>> {
        let slot = self.slots.get_mut(Self::slot(handle)?)?;
        let reserved = matches!(slot, Slot::Reserved);
        kernel::warn_on!(!reserved);
        reserved.then_some(slot)
    }

    /// Gives a reserved handle back, unused.
    fn release(&mut self, handle: u32) {
        if let Some(slot) = self.reserved_slot(handle) {
            *slot = Slot::Free;
        }
    }

    /// Fills the reserved `handle` with `v`. Counted under the table's lock, as is
    /// the take: the counts cannot go below 0. Cannot fail: the slot exists.
    fn publish(&mut self, handle: u32, v: T) {
        if let Some(slot) = self.reserved_slot(handle) {
            *slot = Slot::Held(v);
            self.held += 1;
            LIVE_HANDLES.fetch_add(1, Relaxed);
        }
    }

    /// Takes a handle out of the table; the caller owns what it held. A reserved
    /// slot is not a handle yet, and is left alone.
    fn take(&mut self, handle: u32) -> Option<T> {
        let slot = self.slots.get_mut(Self::slot(handle)?)?;
        let v = match core::mem::replace(slot, Slot::Free) {
            Slot::Held(v) => v,
            other => {
                *slot = other;
                return None;
            }
        };
        self.held -= 1;
        LIVE_HANDLES.fetch_sub(1, Relaxed);
        Some(v)
    }
}

impl<F: Flavor> Typed<F> {
    /// An empty `Typed<F>`, its ids from 1, at most `LP_MAX_GADGETS` gadgets.
    fn new(delays: DelayRef) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            gadgets <- Gadgets::new(delays),
            handles <- new_mutex!(Handles::new(), "lp_arena.handles_lock"),
        })
    }

    /// `lp_handle_get()`: resolves `handle` and takes a reference to its gadget
    /// for the caller; the handle lock keeps the handle's own reference in place
    /// meanwhile.
    pub(crate) fn handle_get(&self, handle: u32) -> Result<GadgetRef<F>> {
        let handles = self.handles.lock();
        let found = handles.get(handle).ok_or(EBADF)?;
        self.gadgets.delays().stall(uapi::LP_DELAY_HANDLE_GET);
        Ok(found.clone())
    }

    /// `lp_handle_reserve()`: reserves the lowest free handle (`ENOSPC` when the
    /// table is full): a slot that reads as no handle until
    /// [`Typed::handle_publish`] fills it or [`Typed::handle_release`] frees it.
    pub(crate) fn handle_reserve(&self) -> Result<u32> {
        self.handles.lock().reserve()
    }

    /// `lp_handle_release()`: gives a reserved handle back, unused.
    pub(crate) fn handle_release(&self, handle: u32) {
        self.handles.lock().release(handle);
    }

    /// `lp_handle_publish()`: gives the caller's reference to `g` to the reserved
    /// `handle`, and counts it in [`LIVE_HANDLES`].
    pub(crate) fn handle_publish(&self, handle: u32, g: GadgetRef<F>) {
        self.handles.lock().publish(handle, g);
    }

    /// `lp_handle_take()`: takes a handle out of the table; the caller owns its
    /// reference. A reserved slot is not a handle yet, and is left alone.
    pub(crate) fn handle_take(&self, handle: u32) -> Option<GadgetRef<F>> {
        self.handles.lock().take(handle)
    }

    /// `lp_arena_release_handles()`'s gadget half: takes out and puts every
    /// gadget handle still held, which frees every gadget.
    fn release_handles(&self) {
        let slots = self.handles.lock().slots.len();
        for slot in 0..slots {
            // `slot` < LP_MAX_HANDLES, so the handle fits a `u32`.
            if let Some(g) = self.handle_take(slot as u32 + 1) {
                gadget::put(g);
            }
        }
    }

    /// Handles in the table (`ARENA_STAT.handles`).
    pub(crate) fn handles_held(&self) -> u32 {
        self.handles.lock().held
    }

    /// Runs `f` on the gadget of `handle` under the handle lock, which keeps the
    /// handle's reference in place meanwhile (STAT).
    pub(crate) fn with_handle<T>(
        &self,
        handle: u32,
        f: impl FnOnce(&GadgetRef<F>) -> T,
    ) -> Result<T> {
        let handles = self.handles.lock();
        handles.get(handle).map(f).ok_or(EBADF)
    }
}

impl Arena {
    /// `lp_open()`'s arena: allocated, initialised, and counted in [`LIVE_ARENAS`]
    /// until its drop.
    pub(crate) fn new_boxed() -> Result<Pin<KBox<Self>>> {
        let arena = KBox::try_pin_init(Self::new(), GFP_KERNEL_ACCOUNT)?;
        LIVE_ARENAS.fetch_add(1, Relaxed);
        Ok(arena)
    }

    fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            configured: Atomic::new(false),
            config <- new_rwsem!(Choice::Locked, "lp_arena.config_rwsem"),
            typed <- AllTyped::new(|| Self::delays_of(this)),
            delays: Delay::new(),
            var: Atomic::new(0),
            max_wait: Atomic::new(0),
            max_locked <- new_spinlock!(0, "lp_arena.max_lock"),
            floor: Atomic::new(0),
            racy: RacyCounter(UnsafeCell::new(0)),
            racy_marked: Atomic::new(0),
            racy_locked <- new_spinlock!(0, "lp_arena.racy_lock"),
            atomic_ctx <- new_spinlock!((), "lp_arena.atomic_ctx"),
            txn <- Txn::init(Self::delays_of(this)),
            txn_handles <- new_mutex!(Handles::new(), "lp_arena.txn_handles_lock"),
        })
    }

    /// A [`DelayRef`] to `this` arena's `delays`, for its gadgets and its
    /// transaction: C's `container_of()` to the arena.
    fn delays_of(this: NonNull<Self>) -> DelayRef {
        // SAFETY: `this` points to an arena's allocation (being initialised, in
        // `Arena::new()`): the projection stays in bounds, and `&raw const`
        // takes the field's address without reading it or making a reference,
        // so the field may be uninitialised yet. The address is not null, as
        // `this` is not.
        let delays =
            unsafe { NonNull::new_unchecked((&raw const (*this.as_ptr()).delays).cast_mut()) };
        // SAFETY: `delays` is a field of the same arena as the gadgets and the
        // transaction that hold the `DelayRef`: it is initialised with the arena,
        // before the arena is handed out and any part of it runs, and it lives in
        // the same allocation, freed after every part is dropped. The arena is
        // pinned and only ever shared until its drop, which borrows it mutably
        // after every use of its parts ([`Arena::release_handles`]).
        unsafe { DelayRef::new(delays) }
    }

    /// `lp_delay()`: [`Delay::stall`] on the arena's knob, at `point`.
    #[inline]
    pub(crate) fn delay(&self, point: u32) {
        self.delays.stall(point);
    }

    /// `lp_txn_handle_get()`: resolves a transaction `handle` and takes a reference
    /// to its entry for the caller (EXTEND, which then uses it under the entry's
    /// lock alone). The table's mutex, held for the clone only, keeps a STOP from
    /// taking the entry out, and so from dropping the table's reference, in between.
    pub(crate) fn txn_handle_get(&self, handle: u32) -> Result<TxnEntry> {
        let handles = self.txn_handles.lock();
        let found = handles.get(handle);
        self.delay(uapi::LP_DELAY_TXN_HANDLE_GET);
        found.cloned().ok_or(EBADF)
    }

    /// Reserves the lowest free transaction handle (`ENOSPC` when the table is
    /// full), as [`Typed::handle_reserve`] does a gadget handle.
    pub(crate) fn txn_handle_reserve(&self) -> Result<u32> {
        self.txn_handles.lock().reserve()
    }

    /// Gives a reserved transaction handle back, unused.
    pub(crate) fn txn_handle_release(&self, handle: u32) {
        self.txn_handles.lock().release(handle);
    }

    /// Gives `entry`, its handle started, to the reserved transaction `handle`, and
    /// counts it in [`LIVE_HANDLES`].
    pub(crate) fn txn_handle_publish(&self, handle: u32, entry: TxnEntry) {
        self.txn_handles.lock().publish(handle, entry);
    }

    /// Takes a transaction handle's entry out of the table; the caller then owns
    /// the table's reference and stops the handle ([`Arena::txn_handle_stop`]). An
    /// EXTEND may still be using the entry.
    pub(crate) fn txn_handle_take(&self, handle: u32) -> Option<TxnEntry> {
        self.txn_handles.lock().take(handle)
    }

    /// `lp_txn_handle_stop()`: stops the handle of an `entry` that
    /// [`Arena::txn_handle_take`] took out of the table, and drops the table's
    /// reference to it. Returns the credits the handle gave back.
    ///
    /// Taking the entry's lock waits out an EXTEND of this handle in progress;
    /// taking the handle out under it leaves `None`, so that an EXTEND that got its
    /// reference before the take but locks only now answers `EBADF`. Every EXTEND
    /// that answered 0 thus unlocked before, and its credits are in the handle,
    /// which [`Txn::stop`] gives back after the unlock. An EXTEND still holding a
    /// reference frees the entry when it drops it.
    pub(crate) fn txn_handle_stop(&self, entry: TxnEntry) -> u32 {
        let h = entry.lock().take();
        // Only the one that took it out of the table stops it (C's
        // `WARN_ON_ONCE(e->stopped)`).
        kernel::warn_on!(h.is_none());
        h.map_or(0, |h| self.txn.stop(h))
    }

    /// `lp_release()`'s first half, called by `MiscDevice::release` at close():
    /// takes out and puts every gadget handle still held, which frees every
    /// gadget, then takes out and stops every transaction handle still running.
    ///
    /// Runs on `&Arena`, before the arena is dropped: the gadgets being released
    /// read their arena through pointers derived from shared borrows of it, which
    /// the drop's `&mut Arena` would invalidate.
    pub(crate) fn release_handles(&self) {
        with_typed!(self, self.config.read(), t => t.release_handles());
        let slots = self.txn_handles.lock().slots.len();
        for slot in 0..slots {
            // As above.
            if let Some(entry) = self.txn_handle_take(slot as u32 + 1) {
                self.txn_handle_stop(entry);
            }
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Arena {
    /// `lp_release()`'s second half: runs when `KBox` drops the arena, after
    /// [`Arena::release_handles`] freed every gadget; the arena stops counting in
    /// [`LIVE_ARENAS`] last, just before `KBox` frees its memory.
    fn drop(self: Pin<&mut Self>) {
        with_typed!(self, self.config.read(), t => {
            let gadgets = &t.gadgets;
            kernel::warn_on!(gadgets.created.load(Relaxed) != gadgets.freed.load(Relaxed));
        });
        LIVE_ARENAS.fetch_sub(1, Relaxed);
    }
}
