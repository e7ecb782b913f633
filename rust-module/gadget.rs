// SPDX-License-Identifier: GPL-2.0

//! The gadget reference-counting patterns of "Lockless patterns: more
//! read-modify-write operations" (LWN, 2021), one per flavor.
//!
//! Mirrors `c-module/gadget.c`, function for function. Gadgets form a tree:
//! each holds a strong reference to its parent. In the flavors with a child
//! list, a parent (or the arena, for roots) keeps weak references to its
//! children, and a child's count may only go from 1 to 0 under the lock of
//! that list. The registry (id -> gadget) is a second, `kvm_debugfs_open()`
//! style weak reference that is upgraded with get-unless-zero under its own
//! lock (LOCK mode) or under the RCU read lock alone, the gadget freed after a
//! grace period (RCU mode).
//!
//! Where C keeps the flavor in `arena->flavor` and `switch`es on it at every
//! get and put, here the flavor and the registry mode are a type, `F:
//! [`Flavor`]`: [`Gadget<F>`], [`GadgetRef<F>`] and [`Gadgets<F>`] are made for
//! one flavor, the arena picks its `Gadgets<F>` once (CONFIGURE, see
//! `arena.rs`), and every ioctl dispatches once into code monomorphized for
//! it. So a gadget's allocation (an [`Arc`] for [`Lockless`], a `KBox` for the
//! others), its count (`Arc`'s own, a [`Refcount`], or a count [`LockedBy`] the
//! arena's mutex) and its put are fixed by its type, and whether its free
//! waits for a grace period is a constant of it: nothing a put reads can
//! change under a TRYGET that holds a count.
//!
//! A strong reference is a [`GadgetRef<F>`], whose drop is a put and may
//! sleep. It is `ARef`'s twin rather than an `ARef`: `AlwaysRefCounted::inc_ref`
//! takes `&self`, whose provenance covers the gadget alone, and a LOCKLESS get
//! must reach the `Arc`'s count before it. A `GadgetRef` keeps the pointer its
//! allocator handed out, and every one is made from that pointer, from another
//! `GadgetRef`, or from a count taken on a pointer a weak list or the registry
//! stored. The decrement takes that pointer, never a `&Gadget`: once it has given
//! up its count, another CPU may free the gadget, and no reference to it may
//! still be live then.
//!
//! Release never recurses: [`put_cascade`] drops the parent's reference in a
//! loop, so a chain of any depth is freed in constant stack.

use core::{marker::PhantomData, mem::ManuallyDrop, ops::Deref, pin::Pin, ptr::NonNull};
use kernel::{
    new_mutex, new_rwsem, new_spinlock,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        rcu::{self, RcuHead},
        Arc, ArcBorrow, LockedBy, Mutex, Refcount, RwSem, SpinLock,
    },
    types::ForeignOwnable,
    xarray::{self, AllocKind, Unowned, UnownedRef, XArray},
};

use crate::uapi;

/// Gadgets alive in the whole module, all arenas together (`IDENTIFY.live_gadgets`):
/// counted from the allocation in [`Gadget::alloc`] until the gadget's drop, the
/// last step before its memory is freed (or queued to be, after a grace period).
/// `Relaxed`: a statistic that only module exit and a quiescent IDENTIFY read.
pub(crate) static LIVE_GADGETS: Atomic<i64> = Atomic::new(0);

/// The `enum lp_delay_point` values LP_IOC_DELAY accepts in this build
/// (IDENTIFY's `delay_points`): all, but without `CONFIG_FAULT_INJECTION`.
pub(crate) const DELAY_POINTS: u32 = if cfg!(CONFIG_FAULT_INJECTION) {
    (1 << uapi::LP_DELAY_COUNT) - 1
} else {
    0
};

/// LP_IOC_DELAY's knob (`struct lp_arena`'s `delay_points` and `delay_usecs`):
/// where an arena's threads stall, and for how long. Held by the arena; its
/// gadgets reach it through their [`Gadgets`].
pub(crate) struct Delay {
    /// Bitmask of `enum lp_delay_point` values, within [`DELAY_POINTS`].
    points: Atomic<u32>,
    /// The stall, in microseconds, at most `LP_DELAY_USECS_MAX`.
    usecs: Atomic<u32>,
}

impl Delay {
    /// No point on.
    pub(crate) const fn new() -> Self {
        Self {
            points: Atomic::new(0),
            usecs: Atomic::new(0),
        }
    }

    /// LP_IOC_DELAY, its arguments checked.
    pub(crate) fn set(&self, points: u32, usecs: u32) {
        self.usecs.store(usecs, Relaxed);
        self.points.store(points, Relaxed);
    }

    /// `lp_delay_on()`: whether the race test stalls at `point`; `false`, always,
    /// without `CONFIG_FAULT_INJECTION`.
    #[inline]
    pub(crate) fn on(&self, point: u32) -> bool {
        // The constant first: `load()` is a volatile read, never elided.
        DELAY_POINTS & (1 << point) != 0 && self.points.load(Relaxed) & (1 << point) != 0
    }

    /// `lp_delay()`: stalls here if the race test asked for it, at `point`, an
    /// `enum lp_delay_point` reached where the caller may sleep. Widens a window
    /// of a few instructions so that a race test meets it under TCG. Compiled out
    /// without `CONFIG_FAULT_INJECTION` (the perf kernels make bench counts on).
    /// The stall lasts at least that long on the monotonic clock the tests measure
    /// with: `fsleep()` of more than 20 ms counts jiffies, and on the rt kernel
    /// under TCG a 200 ms one ended early on that clock
    /// (`dev.*.get_takes_its_reference_under_the_handle_lock`), so it sleeps again
    /// for what is left.
    #[inline]
    pub(crate) fn stall(&self, point: u32) {
        use kernel::time::{delay::fsleep, Delta, Instant, Monotonic};

        if self.on(point) {
            let stall = Delta::from_micros(i64::from(self.usecs.load(Relaxed)));
            let start = Instant::<Monotonic>::now();
            loop {
                let left = stall - start.elapsed();
                if left <= Delta::ZERO {
                    break;
                }
                fsleep(left);
            }
        }
    }

    /// `lp_delay_atomic()`: [`Delay::stall`] for a point where the caller may not
    /// sleep (a spinlock or rwlock held, an RCU read-side section), which
    /// busy-waits on the monotonic clock instead of sleeping: in atomic context,
    /// or under `PREEMPT_RT`, where such a section is preemptible but sleeping in
    /// it is still a bug (a sleeping spinlock holds the RCU read lock and
    /// migration off; `CONFIG_DEBUG_ATOMIC_SLEEP` splats). Not `udelay()`: under TCG its
    /// calibration fails on secondary vCPUs, and a stall ran half or twice what
    /// was asked.
    #[inline]
    pub(crate) fn stall_atomic(&self, point: u32) {
        use kernel::time::{Delta, Instant, Monotonic};

        if self.on(point) {
            let stall = Delta::from_micros(i64::from(self.usecs.load(Relaxed)));
            let start = Instant::<Monotonic>::now();
            while start.elapsed() < stall {
                kernel::processor::cpu_relax();
            }
        }
    }
}

/// Where what an arena owns (its [`Gadgets`], its transaction) finds the
/// arena's [`Delay`]: C's `container_of()` to the arena, as a shared reference
/// without a lifetime, since the arena and what it owns are initialised in
/// place together. Not `Clone`: it stays in the arena's allocation.
///
/// # Invariants
///
/// Points to a [`Delay`], initialised before [`DelayRef::get`] is first called,
/// that outlives `self` and that nothing borrows mutably while `self` is used
/// (the arena's drop, which does, comes after every use of its parts).
pub(crate) struct DelayRef(NonNull<Delay>);

// SAFETY: A `DelayRef` only lends shared references to a `Delay`, which is
// `Sync` (two atomics) and outlives it (type invariant).
unsafe impl Send for DelayRef {}
// SAFETY: As above.
unsafe impl Sync for DelayRef {}

impl DelayRef {
    /// A `DelayRef` to `delays`.
    ///
    /// # Safety
    ///
    /// `delays` points to a [`Delay`] that is initialised before the returned
    /// value's [`DelayRef::get`] is first called, outlives that value, and that
    /// nothing borrows mutably while that value is used.
    pub(crate) unsafe fn new(delays: NonNull<Delay>) -> Self {
        // INVARIANT: As the caller guarantees.
        Self(delays)
    }

    /// The arena's LP_IOC_DELAY knob.
    #[inline]
    pub(crate) fn get(&self) -> &Delay {
        // SAFETY: By the type invariant, `self.0` points to an initialised
        // `Delay` that outlives `self`, so it outlives the returned borrow of
        // `self`, and nothing borrows it mutably while `self` is used.
        unsafe { self.0.as_ref() }
    }
}

/// A registry mode (`enum lp_registry`), as a type: how a gadget that TRYGET
/// found stays allocated while it takes a count, and so how a released gadget
/// is freed.
pub(crate) trait Registry: Send + Sync + 'static {
    /// `LP_REGISTRY_*`.
    const ID: u32;

    /// The registry's get-unless-zero ([`Counted::inc_not_zero`]) of the gadget
    /// at `i` in `gadgets`, under the registry's lock or inside an RCU read-side
    /// critical section.
    fn get_unless_zero<F: Counted<Registry = Self>>(
        gadgets: &Gadgets<F>,
        i: usize,
    ) -> Option<GadgetRef<F>>;

    /// Frees a released gadget's box: at once, or after a grace period. Only a
    /// gadget of this registry's flavors (`F::Registry = Self`), as for
    /// [`Registry::drop_arc`]: a release path cannot free through another
    /// mode's.
    fn free_box<F: Flavor<Registry = Self>>(g: Pin<KBox<Gadget<F>>>);

    /// `Arc::drop_with()` or `Arc::drop_with_rcu()`.
    fn drop_arc<F: Flavor<Registry = Self>>(
        a: Arc<Gadget<F>>,
        f: impl FnOnce(Pin<&mut Gadget<F>>),
    ) -> bool;
}

/// `LP_REGISTRY_LOCK`: TRYGET under the registry's own lock, which the release
/// path takes to unregister a gadget before it frees it, at once.
pub(crate) struct RegLock;

/// `LP_REGISTRY_RCU`: TRYGET under the RCU read lock alone; a released gadget is
/// unregistered under the registry's lock and freed after a grace period.
pub(crate) struct RegRcu;

impl Registry for RegLock {
    const ID: u32 = uapi::LP_REGISTRY_LOCK;

    #[inline]
    fn get_unless_zero<F: Counted<Registry = Self>>(
        gadgets: &Gadgets<F>,
        i: usize,
    ) -> Option<GadgetRef<F>> {
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_MODE);
        let registry = gadgets.registry.lock();
        let found = Found::under_lock(&registry, registry.get(i)?)?;
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_FOUND);
        found.inc_not_zero()
    }

    #[inline]
    fn free_box<F: Flavor<Registry = Self>>(g: Pin<KBox<Gadget<F>>>) {
        drop(g);
    }

    #[inline]
    fn drop_arc<F: Flavor<Registry = Self>>(
        a: Arc<Gadget<F>>,
        f: impl FnOnce(Pin<&mut Gadget<F>>),
    ) -> bool {
        Arc::drop_with(a, f)
    }
}

impl Registry for RegRcu {
    const ID: u32 = uapi::LP_REGISTRY_RCU;

    /// The lookup ([`XArray::load`]) and the increment inside the RCU read lock,
    /// no lock taken. What is found borrows `rcu` ([`Found`]): the increment
    /// cannot move past the end of the critical section.
    #[inline]
    fn get_unless_zero<F: Counted<Registry = Self>>(
        gadgets: &Gadgets<F>,
        i: usize,
    ) -> Option<GadgetRef<F>> {
        let rcu = rcu::read_lock();
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_MODE);
        let found = Found::under_rcu(&rcu, gadgets.registry.load(&rcu, i)?)?;
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_FOUND);
        let got = found.inc_not_zero();
        drop(rcu);
        got
    }

    #[inline]
    fn free_box<F: Flavor<Registry = Self>>(g: Pin<KBox<Gadget<F>>>) {
        KBox::drop_rcu(g);
    }

    #[inline]
    fn drop_arc<F: Flavor<Registry = Self>>(
        a: Arc<Gadget<F>>,
        f: impl FnOnce(Pin<&mut Gadget<F>>),
    ) -> bool {
        Arc::drop_with_rcu(a, f)
    }
}

/// Which lock fences a flavor's weak child lists (`struct lp_kids`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum KidsLock {
    /// WEAK_CMPXCHG and KREF_MUTEX: [`Kids::mutex`].
    Mutex,
    /// KREF_LOCK: [`Kids::lock`].
    Spin,
    /// KREF_RWSEM: [`Kids::rwsem`], taken shared by LOOKUP.
    RwSem,
}

/// A flavor (`enum lp_flavor`) with its registry mode, as a type: what a gadget
/// lives in, what counts it, how it is got and put. The arena's `u32` is
/// converted into one of these once, at CONFIGURE (`arena.rs`).
///
/// # Safety
///
/// The methods agree on one allocation and one count: [`Flavor::alloc`]
/// returns the pointer its allocator handed out for the gadget, holding a count
/// of one; [`Flavor::get`] and [`Counted::inc_not_zero`] add to that count,
/// [`Flavor::put_one`] takes from it and frees that allocation, the way it was
/// made, only when the count reaches zero, after a grace period if
/// `Registry` is [`RegRcu`]. Code outside the impl (`Gadget::alloc()`,
/// [`GadgetRef`]) relies on it.
pub(crate) unsafe trait Flavor: Sized + Send + Sync + 'static {
    /// `LP_FLAVOR_*`.
    const ID: u32;
    /// The lock of the weak child lists; `None`: no list (LOOKUP answers
    /// `EOPNOTSUPP`).
    const KIDS: Option<KidsLock>;
    /// The registry mode.
    type Registry: Registry;
    /// What counts a gadget: a `Refcount`, a count `LockedBy` the arena's mutex,
    /// or nothing in the gadget (`Arc`'s).
    type Count: Send + Sync;

    /// A new gadget's count, of one.
    fn new_count(gadgets: &Gadgets<Self>) -> Self::Count;

    /// Allocates a gadget: the pointer its allocator handed out, with the count
    /// of one that the caller now owns.
    fn alloc(init: impl PinInit<Gadget<Self>>) -> Result<GadgetPtr<Self>>;

    /// `lp_gadget_get()`: one more count, which the caller then owns.
    ///
    /// # Safety
    ///
    /// `g` is the pointer its allocator handed out, and its count is above zero
    /// for the whole call: the caller owns a count of it, or holds the lock of
    /// the weak list it found `g` on (which fences the 1 -> 0 step).
    unsafe fn get(g: GadgetPtr<Self>);

    /// STAT's count: a snapshot, maybe stale by the time it is used.
    fn refcount(g: &GadgetRef<Self>) -> u32;

    /// `lp_gadget_tryget()`'s upgrade of the registry's weak reference.
    fn registry_get(gadgets: &Gadgets<Self>, i: usize) -> Option<GadgetRef<Self>>;

    /// `lp_put_one()`: gives up one count; the release of a gadget this took to
    /// zero (`lp_gadget_free()`) included. A slow put may leave a reference to
    /// the parent in `pin`, for the caller to drop after it returns.
    ///
    /// # Safety
    ///
    /// The caller owns a count of `g` and hands it over.
    unsafe fn put_one(g: GadgetPtr<Self>, pin: &mut Option<GadgetRef<Self>>) -> Put<Self>;
}

/// A flavor whose count is atomic (every one but LOCKED): the registry's
/// get-unless-zero needs no lock but the registry's.
///
/// # Safety
///
/// As [`Flavor`]'s: [`Counted::inc_not_zero`] adds to the count the flavor's
/// put takes from, and only while it is above zero.
pub(crate) unsafe trait Counted: Flavor {
    /// `atomic_inc_not_zero()`: a count of `g` unless it reached zero.
    ///
    /// # Safety
    ///
    /// `g` stays allocated meanwhile (the registry's lock, or an RCU read-side
    /// critical section in an RCU registry); the gadget itself may be mid-drop,
    /// so nothing but its count may be touched.
    unsafe fn inc_not_zero(g: GadgetPtr<Self>) -> bool;
}

/// What a put did.
pub(crate) enum Put<F: Flavor> {
    /// The gadget lives on.
    Kept,
    /// That was the last reference: the gadget is released, off every list and
    /// out of the registry, and freed (or queued to be, after a grace period).
    /// Its reference to its parent (`None` for a root) is the caller's to put.
    Released(Option<GadgetRef<F>>),
}

/// The address of a gadget, as its allocator handed it out: what the weak child
/// lists store (and the registry, as an [`Unowned`]), and what a [`GadgetRef`]
/// holds.
///
/// It keeps nothing alive, and it is not a count (weak or strong).
pub(crate) struct GadgetPtr<F: Flavor>(NonNull<Gadget<F>>);

impl<F: Flavor> Clone for GadgetPtr<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Flavor> Copy for GadgetPtr<F> {}

impl<F: Flavor> PartialEq for GadgetPtr<F> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

// SAFETY: A `GadgetPtr` is an address; dereferencing it is `unsafe`
// ([`GadgetPtr::as_ref`]) and allowed by a lock or a count, whatever the thread.
unsafe impl<F: Flavor> Send for GadgetPtr<F> {}
// SAFETY: Through `&GadgetPtr` only the address can be copied.
unsafe impl<F: Flavor> Sync for GadgetPtr<F> {}

impl<F: Flavor> GadgetPtr<F> {
    /// The gadget's address as the registry stores it: an [`Unowned`], which owns
    /// nothing (the registry is a weak reference). `None` cannot happen: an
    /// allocator's pointer is not null and is aligned.
    #[inline]
    fn unowned(self) -> Option<Unowned<Gadget<F>>> {
        Unowned::new(self.0.as_ptr())
    }

    /// Borrows the gadget.
    ///
    /// # Safety
    ///
    /// For all of `'a`, the gadget must stay allocated and no `&mut Gadget` to it
    /// may exist. That holds while the caller owns a count of the gadget, and
    /// while it holds the lock of the weak list it found `self` on: a gadget
    /// leaves its list under the lock that fenced its 1 -> 0 step, before its
    /// release path drops it. A caller that gives up its count must let `'a` end
    /// before.
    #[inline]
    unsafe fn as_ref<'a>(self) -> &'a Gadget<F> {
        // SAFETY: The pointer is valid for reads (the caller's guarantee that the
        // gadget is allocated) and the caller guarantees that no `&mut Gadget`
        // exists for `'a`.
        unsafe { self.0.as_ref() }
    }

    /// Borrows the gadget's `field` alone, as `Arc::drop` borrows its count: never
    /// the whole gadget, so that the borrow may be held across the decrement after
    /// which another CPU frees the gadget, until the decrementing call returns.
    ///
    /// # Safety
    ///
    /// The gadget must stay allocated while the borrow is used: the caller owns a
    /// count of it and uses the borrow for the decrement that gives the count up
    /// (or before), not after that call returns; or the gadget was found in the
    /// registry ([`Found`]) and `'a` ends with the lock or critical section it
    /// was found in. The gadget may be dropped and freed meanwhile: `field` must
    /// be wholly an `UnsafeCell` with no destructor (an `Opaque`, such as a
    /// `Refcount`), over which the drop's `&mut Gadget`, of a `!Unpin` type,
    /// claims no uniqueness, and which alone may be deallocated while a live
    /// reference to it is no longer used (`core::cell::UnsafeCell`'s documented
    /// exception, rust-lang/rust#98017).
    #[inline]
    unsafe fn field<'a, T>(self, field: impl FnOnce(*const Gadget<F>) -> *const T) -> &'a T {
        // SAFETY: `field` projects a place of the allocated gadget (the caller's
        // guarantees) without making a reference to the gadget.
        unsafe { &*field(self.0.as_ptr()) }
    }
}

/// A gadget found in the registry, for as long as `'a`, the registry lock or the
/// RCU read-side critical section it was found in (`Guard::get()` and
/// [`XArray::load`] borrow the lock guard or the `rcu::Guard` for `'a`).
///
/// # Invariants
///
/// The gadget stays allocated for `'a`: its release path unregisters it under the
/// registry lock before it frees it, at once in LOCK mode, after a grace period
/// in RCU mode (the only mode whose gadgets [`Found::under_rcu`] takes). Its
/// count may be zero, and the gadget mid-drop: what a `Found` lends is the count
/// and the publication flag alone, never a `&Gadget`.
pub(crate) struct Found<'a, F: Flavor> {
    ptr: GadgetPtr<F>,
    _section: PhantomData<&'a ()>,
}

impl<'a, F: Flavor> Found<'a, F> {
    /// What [`xarray::Guard::get`] found in the registry, whose lock `_registry`
    /// holds for `'a`.
    #[inline]
    fn under_lock(
        _registry: &'a xarray::Guard<'_, Unowned<Gadget<F>>>,
        found: UnownedRef<'a, Gadget<F>>,
    ) -> Option<Self> {
        // INVARIANT: The release path unregisters a gadget under the registry
        // lock, held for `'a`, before it frees it.
        Some(Found {
            ptr: GadgetPtr(NonNull::new(found.as_ptr())?),
            _section: PhantomData,
        })
    }

    /// What [`XArray::load`] found in the registry of an RCU-mode flavor, in the
    /// RCU read-side critical section that `_rcu` proves for `'a`. Only an RCU
    /// registry: a LOCK registry frees a released gadget at once.
    #[inline]
    fn under_rcu(_rcu: &'a rcu::Guard, found: UnownedRef<'a, Gadget<F>>) -> Option<Self>
    where
        F: Flavor<Registry = RegRcu>,
    {
        // INVARIANT: An RCU registry's release path unregisters a gadget, then
        // frees it after a grace period ([`RegRcu::free_box`],
        // [`RegRcu::drop_arc`]), which cannot end during `'a`: what was in the
        // registry in the critical section stays allocated for `'a`.
        Some(Found {
            ptr: GadgetPtr(NonNull::new(found.as_ptr())?),
            _section: PhantomData,
        })
    }
}

impl<F: Counted> Found<'_, F> {
    /// The registry's get-unless-zero: a strong reference, unless the count
    /// reached zero (the gadget is being released).
    #[inline]
    fn inc_not_zero(self) -> Option<GadgetRef<F>> {
        // SAFETY: The gadget stays allocated for the lifetime of `self` (type
        // invariant), to the end of this call.
        let got = unsafe { F::inc_not_zero(self.ptr) };
        // SAFETY: We took the count the new reference owns.
        got.then(|| unsafe { GadgetRef::from_raw(self.ptr) })
    }
}

/// One strong reference to a gadget, counted the way its flavor counts: `ARef`'s
/// twin (see the module documentation). Dropping it is a put, which may sleep
/// (the owner's mutex of a slow put, the release of a whole chain); [`put`] also
/// tells how many gadgets the put released.
///
/// # Invariants
///
/// `ptr` is the pointer the gadget's allocator handed out, and the reference
/// owns one count of the gadget.
pub(crate) struct GadgetRef<F: Flavor> {
    ptr: GadgetPtr<F>,
    _owns: PhantomData<Gadget<F>>,
}

impl<F: Flavor> GadgetRef<F> {
    /// The reference that owns a count of `ptr` the caller took.
    ///
    /// # Safety
    ///
    /// `ptr` is a pointer the gadget's allocator handed out, and the caller
    /// hands over a count of the gadget.
    #[inline]
    unsafe fn from_raw(ptr: GadgetPtr<F>) -> Self {
        // INVARIANT: The caller's guarantees.
        Self {
            ptr,
            _owns: PhantomData,
        }
    }

    /// Gives the count up to the caller, with the allocator's pointer.
    #[inline]
    fn into_raw(self) -> GadgetPtr<F> {
        ManuallyDrop::new(self).ptr
    }
}

impl<F: Flavor> Deref for GadgetRef<F> {
    type Target = Gadget<F>;

    #[inline]
    fn deref(&self) -> &Gadget<F> {
        // SAFETY: We own a count (type invariant), which the borrow of `self`
        // keeps until the borrow ends.
        unsafe { self.ptr.as_ref() }
    }
}

impl<F: Flavor> Clone for GadgetRef<F> {
    /// A get: article v1's `refcnt++` under the mutex (LOCKED) or v2's bare
    /// increment (the rest).
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: We own a count of `self.ptr` (type invariant).
        unsafe { F::get(self.ptr) };
        // SAFETY: The allocator's pointer (type invariant), and the count just taken.
        unsafe { Self::from_raw(self.ptr) }
    }
}

impl<F: Flavor> Drop for GadgetRef<F> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The count `self` owned (type invariant), handed over: `self` is
        // not used again.
        unsafe { put_ptr(self.ptr) };
    }
}

/// A weak list of children and the lock that fences it (`struct lp_kids`).
///
/// A gadget's count may only go from 1 to 0 with the lock of the list it sits on
/// held, and it leaves the list before that lock is dropped: a visitor holding
/// the lock never sees a gadget whose count is zero. The flavor uses one of the
/// three locks ([`Flavor::KIDS`]); all three are there, as in C, for one
/// lockdep class per lock type.
///
/// C links gadgets into an intrusive `list_head`. Rust's `kernel::list::List`
/// owns its items (a `ListArc` is a strong reference), so it cannot hold the
/// weak references this list is about; the list is a vector of [`GadgetPtr`]
/// under each lock instead.
#[pin_data]
pub(crate) struct Kids<F: Flavor> {
    /// WEAK_CMPXCHG and KREF_MUTEX.
    #[pin]
    mutex: Mutex<KVec<GadgetPtr<F>>>,
    /// KREF_LOCK.
    #[pin]
    lock: SpinLock<KVec<GadgetPtr<F>>>,
    /// KREF_RWSEM: LOOKUP takes it shared.
    #[pin]
    rwsem: RwSem<KVec<GadgetPtr<F>>>,
}

impl<F: Flavor> Kids<F> {
    /// `lp_kids_init()`.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            mutex <- new_mutex!(KVec::new(), "lp_kids.mutex"),
            lock <- new_spinlock!(KVec::new(), "lp_kids.lock"),
            rwsem <- new_rwsem!(KVec::new(), "lp_kids.rwsem"),
        })
    }
}

/// The state [`Gadgets::lock`] protects: the article v1 "gadgets_lock". LOCKED's
/// counts are `LockedBy` it (`Gadget::count`); it has no data of its own but one
/// byte, because `LockedBy` tells owners apart by address and refuses (at build
/// time) an owner type of size zero.
pub(crate) struct GadgetsLock {
    _not_zero_sized: u8,
}

/// The gadget half of an arena, for one flavor: what `struct lp_arena` holds for
/// its gadgets, and all that a gadget knows of its arena. The arena (`arena.rs`)
/// holds one, chosen by CONFIGURE; gadgets point to it, not to the arena, so this
/// file needs nothing of `arena.rs`.
#[pin_data]
pub(crate) struct Gadgets<F: Flavor> {
    /// The article v1 "gadgets_lock": LOCKED's counts.
    #[pin]
    lock: Mutex<GadgetsLock>,
    /// Weak list of the root gadgets, fenced like a gadget's children.
    #[pin]
    roots: Kids<F>,
    /// id -> gadget, for TRYGET; its own lock (LOCK mode) or a grace period
    /// before the free (RCU mode) keeps a gadget TRYGET found from being freed
    /// (the release path removes it under that lock first).
    #[pin]
    registry: XArray<Unowned<Gadget<F>>>,
    /// Last id handed out.
    pub(crate) next_id: Atomic<u64>,
    /// Most live gadgets (CONFIGURE's `max_gadgets`), set while there are none.
    pub(crate) max_gadgets: Atomic<u32>,
    /// Live gadgets, counted from [`Gadget::alloc`] to the gadget's drop.
    nr_gadgets: Atomic<u32>,
    /// Gadgets ever created.
    pub(crate) created: Atomic<u64>,
    /// Gadgets ever freed; `Release`, so that whoever reads it with `Acquire`
    /// sees each freed gadget in `created` too.
    pub(crate) freed: Atomic<u64>,
    /// The arena's LP_IOC_DELAY knob ([`Gadgets::delays`]).
    delays: DelayRef,
}

impl<F: Flavor> Gadgets<F> {
    /// An arena's gadgets of flavor `F`, none yet, stalling at the points of
    /// `delays`.
    pub(crate) fn new(delays: DelayRef) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            lock <- new_mutex!(GadgetsLock { _not_zero_sized: 0 }, "lp_arena.lock"),
            roots <- Kids::new(),
            registry <- XArray::new(AllocKind::Alloc),
            next_id: Atomic::new(0),
            max_gadgets: Atomic::new(uapi::LP_MAX_GADGETS),
            nr_gadgets: Atomic::new(0),
            created: Atomic::new(0),
            freed: Atomic::new(0),
            delays,
        })
    }

    /// The arena's LP_IOC_DELAY knob.
    #[inline]
    pub(crate) fn delays(&self) -> &Delay {
        self.delays.get()
    }

    /// Live gadgets, published or not (CONFIGURE's `EBUSY`).
    pub(crate) fn live(&self) -> u32 {
        self.nr_gadgets.load(Relaxed)
    }
}

/// Takes `g` off a locked list (`list_del()`).
fn list_remove<F: Flavor>(list: &mut KVec<GadgetPtr<F>>, g: GadgetPtr<F>) {
    if let Some(i) = list.iter().position(|x| *x == g) {
        let last = list.len() - 1;
        list.as_mut_slice().swap(i, last);
        list.pop();
    }
}

/// `list_add_tail()` on a list fenced by a spinlock. `GFP_KERNEL` may sleep, so
/// the vector grows outside the lock and is swapped in under it.
fn list_add_spinlocked<F: Flavor>(lock: &SpinLock<KVec<GadgetPtr<F>>>, w: GadgetPtr<F>) -> Result {
    loop {
        let mut list = lock.lock();
        if list.push_within_capacity(w).is_ok() {
            return Ok(());
        }
        let want = list.capacity() * 2 + 4;
        drop(list);

        let mut bigger = KVec::with_capacity(want, GFP_KERNEL_ACCOUNT)?;
        let mut list = lock.lock();
        if list.capacity() < want {
            for x in list.iter() {
                // Cannot fail: `list` holds fewer than `want` entries.
                let _ = bigger.push_within_capacity(*x);
            }
            core::mem::swap(&mut *list, &mut bigger);
        }
        drop(list);
        // `bigger`, now the old storage (or unused), is freed outside the lock.
    }
}

/// One node of the tree (`struct lp_gadget`), of flavor `F`.
///
/// # Invariants
///
/// - `gadgets` points to the [`Gadgets`] of the arena that created the gadget,
///   which outlives it: the arena puts every handle it holds before it drops its
///   `Gadgets`, and CONFIGURE replaces them only while no gadget exists. The
///   pointer comes from a shared borrow and is only read through.
/// - `parent` is only written (taken) by the put that released the gadget, with
///   the gadget's allocation in hand (`Pin<&mut Gadget>`): its count is zero and
///   it is off every weak list and out of the registry, so no other reference
///   to it exists.
/// - The gadget lives in the allocation `F::alloc` made.
#[pin_data(PinnedDrop)]
pub(crate) struct Gadget<F: Flavor> {
    /// The flavor's count ([`Flavor::Count`]).
    count: F::Count,
    /// Strong reference to the parent, `None` for a root.
    parent: Option<GadgetRef<F>>,
    /// The gadgets of the arena the gadget lives in.
    gadgets: NonNull<Gadgets<F>>,
    /// Registry key, unique in the arena, never reused.
    pub(crate) id: u64,
    /// This gadget's children (weak references).
    #[pin]
    kids: Kids<F>,
    /// Live children; each holds a reference to this gadget.
    nr_children: Atomic<i32>,
    /// [`Gadget::publish`] ran: until then LOOKUP and TRYGET act as if the
    /// gadget were not on its list nor in the registry, and it is not counted.
    published: Atomic<bool>,
    /// `kfree_rcu()`'s, in an arena whose registry is RCU.
    rcu: RcuHead,
}

kernel::impl_has_rcu_head! {
    impl{F: Flavor} HasRcuHead for Gadget<F> { self.rcu }
}

// SAFETY: Every field is thread-safe but `gadgets`, only read (and `Gadgets` is
// `Sync`), and `parent`, only taken by the releaser, alone (type invariants).
unsafe impl<F: Flavor> Send for Gadget<F> {}
// SAFETY: As above.
unsafe impl<F: Flavor> Sync for Gadget<F> {}

impl<F: Flavor> Gadget<F> {
    #[inline]
    fn gadgets(&self) -> &Gadgets<F> {
        // SAFETY: The arena's gadgets outlive their gadgets (type invariant).
        unsafe { self.gadgets.as_ref() }
    }

    /// The list the gadget sits on: its parent's children, or the arena's roots.
    #[inline]
    fn owner(&self) -> &Kids<F> {
        match &self.parent {
            Some(p) => &p.kids,
            None => &self.gadgets().roots,
        }
    }

    /// The parent's id, 0 for a root (`STAT`).
    pub(crate) fn parent_id(&self) -> u64 {
        self.parent.as_ref().map_or(0, |p| p.id)
    }

    /// Live children (`STAT`).
    pub(crate) fn children(&self) -> u64 {
        u64::try_from(self.nr_children.load(Relaxed)).unwrap_or(0)
    }

    /// The gadget's count (`STAT`): a snapshot, maybe stale by the time it is used.
    pub(crate) fn refcount(this: &GadgetRef<F>) -> u32 {
        F::refcount(this)
    }

    /// `lp_gadget_new()`: creates and publishes a gadget holding one reference,
    /// for RUN's NEW_PUT, which has nothing to copy out in between.
    pub(crate) fn create(
        gadgets: &Gadgets<F>,
        parent: Option<&GadgetRef<F>>,
    ) -> Result<GadgetRef<F>> {
        let g = Self::alloc(gadgets, parent)?;
        g.publish();
        Ok(g)
    }

    /// `lp_gadget_alloc()`: creates an unpublished gadget holding one reference.
    ///
    /// Takes a reference to `parent` for the new gadget, links it on its owner's
    /// list under the owner's lock (flavors with a child list), and registers it
    /// for TRYGET last, once it is complete; every step that can fail is here.
    /// So, unlike C, which takes it in `lp_gadget_publish()`, the parent counts
    /// the new gadget's reference from now on, and a STAT of the parent sees it
    /// while the NEW is in flight, until a failed NEW drops it again (STAT's
    /// `refcount` in the UAPI header says so).
    /// Unpublished, it is invisible: LOOKUP and TRYGET skip it, and nothing counts
    /// it but [`LIVE_GADGETS`] and the arena's live gadgets (so CONFIGURE answers
    /// `EBUSY`). C reserves its registry slot (`xa_reserve()`) and links it only
    /// in `lp_gadget_publish()`; here the registry cannot reserve
    /// (`kernel::xarray` has no `xa_reserve()`) and a push on the list may
    /// allocate, so both happen now and the `published` flag hides them: a
    /// TRYGET may take a count of an unpublished gadget, and puts it again
    /// ([`published`]). Dropping the reference unpublished is
    /// `lp_gadget_discard()`.
    ///
    /// Counted against the arena's limit first, as jbd2 counts credits: add, and
    /// undo over the limit (`EDQUOT`), so that concurrent NEWs never exceed it.
    /// Every allocation userspace makes is charged to its memory cgroup
    /// (`GFP_KERNEL_ACCOUNT`).
    pub(crate) fn alloc(
        gadgets: &Gadgets<F>,
        parent: Option<&GadgetRef<F>>,
    ) -> Result<GadgetRef<F>> {
        if gadgets.nr_gadgets.fetch_add(1, Relaxed) >= gadgets.max_gadgets.load(Relaxed) {
            gadgets.nr_gadgets.fetch_sub(1, Relaxed);
            return Err(EDQUOT);
        }
        let id = gadgets.next_id.fetch_add(1, Full) + 1;
        let init = pin_init!(Self {
            count: F::new_count(gadgets),
            parent: parent.cloned(),
            gadgets: NonNull::from(gadgets),
            id,
            kids <- Kids::new(),
            nr_children: Atomic::new(0),
            published: Atomic::new(false),
            rcu: RcuHead::new(),
        });
        // From here on the gadget exists, and its drop uncounts it.
        let ptr = F::alloc(init).inspect_err(|_| {
            gadgets.nr_gadgets.fetch_sub(1, Relaxed);
        })?;
        LIVE_GADGETS.fetch_add(1, Relaxed);
        // SAFETY: The allocator's pointer, with the initial count of one.
        let g = unsafe { GadgetRef::from_raw(ptr) };

        // On failure, dropping `g` puts it: it is on no list, not registered.
        match F::KIDS {
            Some(KidsLock::Spin) => list_add_spinlocked(&g.owner().lock, ptr)?,
            Some(KidsLock::RwSem) => g.owner().rwsem.write().push(ptr, GFP_KERNEL_ACCOUNT)?,
            Some(KidsLock::Mutex) => g.owner().mutex.lock().push(ptr, GFP_KERNEL_ACCOUNT)?,
            None => (),
        }

        // Register for TRYGET last, once `g` is complete. The XArray's store is
        // `rcu_assign_pointer()`, a release: an RCU-mode TRYGET that finds `g`
        // with `xa_load()` (a dependent load) sees it complete.
        gadgets.registry.lock().store(
            index(g.id)?,
            ptr.unowned().ok_or(EINVAL)?,
            GFP_KERNEL_ACCOUNT,
        )?;
        Ok(g)
    }

    /// `lp_gadget_publish()`: makes a gadget from [`Gadget::alloc`] visible to
    /// LOOKUP and TRYGET and counts it; cannot fail. `Release`, paired with their
    /// `Acquire` load (under the list or registry lock, or in RCU mode after the
    /// count was taken): who sees the flag also sees the counts.
    pub(crate) fn publish(&self) {
        if let Some(p) = &self.parent {
            p.nr_children.fetch_add(1, Relaxed);
        }
        self.gadgets().created.fetch_add(1, Relaxed);
        self.published.store(true, Release);
    }

    /// Whether [`Gadget::publish`] ran.
    fn is_published(&self) -> bool {
        self.published.load(Acquire)
    }

    /// `lp_gadget_lookup()`: upgrades a child's weak reference to a strong one.
    ///
    /// The article's rule: a weak reference may be upgraded with a plain get while
    /// holding the lock that protects the list, because the put that goes 1 -> 0
    /// takes the same lock and unlinks the gadget before dropping it. KREF_RWSEM
    /// takes its semaphore shared: lookups run in parallel, only the 1 -> 0 step
    /// excludes them.
    ///
    /// Returns `ENOENT` if no live child has `id`, `EOPNOTSUPP` in LOCKED and
    /// LOCKLESS (they keep no child list).
    pub(crate) fn lookup(&self, id: u64) -> Result<GadgetRef<F>> {
        let found = match F::KIDS {
            None => return Err(EOPNOTSUPP),
            Some(KidsLock::Spin) => upgrade(&self.kids.lock.lock(), id, self.gadgets().delays()),
            Some(KidsLock::RwSem) => upgrade(&self.kids.rwsem.read(), id, self.gadgets().delays()),
            Some(KidsLock::Mutex) => upgrade(&self.kids.mutex.lock(), id, self.gadgets().delays()),
        };
        found.ok_or(ENOENT)
    }

    /// `lp_gadget_free()`'s first half: the release path, once the put that took
    /// the count to zero unlinked the gadget from its weak list, and before the
    /// gadget is dropped and freed. Unregisters it (after the count reached zero,
    /// before the free, as `kvm_destroy_vm()` removes the debugfs files) and tells
    /// the parent it lost a child.
    ///
    /// Takes `&self`, as C does `struct lp_gadget *`: until we hold the registry
    /// lock, a TRYGET holding it may have found the gadget and be reading its
    /// count. Only once the gadget is out of the registry can the drop borrow it
    /// mutably.
    fn release(&self) {
        if let Ok(i) = index(self.id) {
            self.gadgets().registry.lock().remove(i);
        }
        // Counted by `publish`, which a discarded gadget never reached.
        if let Some(p) = &self.parent {
            if self.is_published() {
                p.nr_children.fetch_sub(1, Relaxed);
            }
        }
    }
}

/// Upgrades the weak reference to child `id` on a list whose lock the caller
/// holds, stalling at `delays`' `LP_DELAY_UPGRADE_LOCKED` once it is found.
fn upgrade<F: Flavor>(list: &KVec<GadgetPtr<F>>, id: u64, delays: &Delay) -> Option<GadgetRef<F>> {
    let p = *list.iter().find(|p| {
        // SAFETY: The caller holds `list`'s lock, and the borrow ends before it
        // drops it: a gadget on a weak list leaves it under that lock before its
        // release path frees it (or mutably borrows it, in its drop).
        let g = unsafe { p.as_ref() };
        g.id == id && g.is_published()
    })?;
    delays.stall_atomic(uapi::LP_DELAY_UPGRADE_LOCKED);
    // The fence failed if a listed gadget has count 0: `refcount_inc()` WARNs on
    // an increment from zero, where C says WARN_ON_ONCE() before `atomic_inc()`.
    // SAFETY: As above: the gadget is allocated while we hold the lock, and we
    // own no count yet, so this is the get of `Flavor::get`'s precondition met
    // by the lock instead.
    unsafe { F::get(p) };
    // SAFETY: The pointer the list stored, its allocator's; we took the count.
    Some(unsafe { GadgetRef::from_raw(p) })
}

/// An id as an XArray index: an id no `usize` holds names no gadget.
fn index(id: u64) -> Result<usize> {
    usize::try_from(id).map_err(|_| ENOENT)
}

/// `lp_gadget_tryget()`: TRYGET, [`tryget_any`] then [`published`].
pub(crate) fn tryget<F: Flavor>(gadgets: &Gadgets<F>, id: u64) -> Result<GadgetRef<F>> {
    published(tryget_any(gadgets, id)?)
}

/// `lp_gadget_tryget()` but the test of [`published`], which may put the gadget
/// (a put may sleep): TRYGET_ATOMIC_PUT calls this under a spinlock, and
/// [`published`] after.
///
/// `kvm_debugfs_open()`: the registry entry is a weak reference that no put
/// fences, so the upgrade must fail once the count reached zero:
/// `Refcount::inc_not_zero()` (LOCKLESS: `Arc::from_raw_inc_not_zero()`; LOCKED:
/// a test of the count under the arena mutex), under the registry's lock (LOCK
/// mode) or inside the RCU read lock alone (RCU mode): [`Registry::get_unless_zero`].
///
/// Returns `ENOENT` if no gadget has `id` or its count reached zero.
pub(crate) fn tryget_any<F: Flavor>(gadgets: &Gadgets<F>, id: u64) -> Result<GadgetRef<F>> {
    F::registry_get(gadgets, index(id)?).ok_or(ENOENT)
}

/// The gadget a TRYGET took a count of, unless it is not published yet, tested
/// only once we hold the count (before, the gadget may be lent out as
/// `Pin<&mut Gadget>` by its release path). An unpublished gadget's count is
/// dropped again, outside any lock or atomic context: its NEW holds a
/// reference of its own, or, if that NEW failed and let go first, this put
/// releases it, as its own flavor's put (the arena cannot change flavor while
/// it exists).
pub(crate) fn published<F: Flavor>(g: GadgetRef<F>) -> Result<GadgetRef<F>> {
    if g.is_published() {
        Ok(g)
    } else {
        Err(ENOENT)
    }
}

#[pinned_drop]
impl<F: Flavor> PinnedDrop for Gadget<F> {
    /// `lp_gadget_free()`'s second half: runs when the box or the `Arc` drops the
    /// gadget, just before its memory is freed, after [`Gadget::release`] took it
    /// out of the registry and the put took its parent reference out: no other
    /// thread can reach it any more.
    fn drop(self: Pin<&mut Self>) {
        kernel::warn_on!(self.nr_children.load(Relaxed) != 0);
        kernel::warn_on!(self.parent.is_some());
        if self.published.load(Relaxed) {
            self.gadgets().freed.fetch_add(1, Release);
        }
        self.gadgets().nr_gadgets.fetch_sub(1, Relaxed);
        LIVE_GADGETS.fetch_sub(1, Relaxed);
    }
}

/// `refcount_read()`, the value C's `kref_read()` returns, for STAT: a
/// snapshot, unordered and unsigned as in C (a saturated count reads above
/// `i32::MAX`). C's is `atomic_read()`, which `as_atomic()` gives; the kernel
/// patches add no `Refcount::read()`, as a count is not to be read for anything
/// but a report.
fn refcount_read(count: &Refcount) -> u32 {
    count.as_atomic().load(Relaxed) as u32
}

/// The flavors counted by a `Refcount` in a `KBox`: all but their 1 -> 0 step
/// (`$put`) is common.
macro_rules! refcounted_flavor {
    ($flavor:ident, $id:expr, $kids:expr, $put:ident) => {
        // SAFETY: `alloc_box` makes the box `release_box` frees, through
        // `R::free_box` (after a grace period for `RegRcu`); the count is the
        // `Refcount` that `get`, `inc_not_zero` and `$put` change, and `$put`
        // says it reached zero only by its own last decrement.
        unsafe impl<R: Registry> Flavor for $flavor<R> {
            const ID: u32 = $id;
            const KIDS: Option<KidsLock> = Some($kids);
            type Registry = R;
            type Count = Refcount;

            fn new_count(_gadgets: &Gadgets<Self>) -> Refcount {
                Refcount::new(1)
            }

            fn alloc(init: impl PinInit<Gadget<Self>>) -> Result<GadgetPtr<Self>> {
                alloc_box(init)
            }

            #[inline]
            unsafe fn get(g: GadgetPtr<Self>) {
                // SAFETY: The gadget is allocated, its count above zero, for the
                // whole call (the caller's guarantee).
                refcount_get(unsafe { g.field(|g| &raw const (*g).count) });
            }

            fn refcount(g: &GadgetRef<Self>) -> u32 {
                refcount_read(&g.count)
            }

            fn registry_get(gadgets: &Gadgets<Self>, i: usize) -> Option<GadgetRef<Self>> {
                R::get_unless_zero(gadgets, i)
            }

            #[inline]
            unsafe fn put_one(g: GadgetPtr<Self>, pin: &mut Option<GadgetRef<Self>>) -> Put<Self> {
                // SAFETY: The caller owns a count of `g` and hands it over: the
                // gadget is allocated until `$put` gives the count up, and the
                // borrow of its count alone ([`GadgetPtr::field`]) is used for
                // that and before. That borrow, an argument of `$put` and of the
                // `Refcount` method that decrements, is still live when another
                // CPU may free the gadget: allowed, because a `Refcount` is wholly
                // an `Opaque`, an `UnsafeCell`, which may be deallocated after the
                // reference's last use while it lives (`core::cell::UnsafeCell`'s
                // documented exception, rust-lang/rust#98017; 7.3's `Arc::drop`
                // relies on it with the same `dec_and_test()`). For `release_box`,
                // the gadget lives in a box (`alloc_box`), and `$put` says whether
                // it took the count to zero and unlinked it.
                unsafe {
                    let refcnt = g.field(|g| &raw const (*g).count);
                    release_box(g, $put(g, refcnt, pin))
                }
            }
        }

        // SAFETY: `Refcount::inc_not_zero()` adds to the same count unless it is
        // zero.
        unsafe impl<R: Registry> Counted for $flavor<R> {
            #[inline]
            unsafe fn inc_not_zero(g: GadgetPtr<Self>) -> bool {
                // SAFETY: The gadget is allocated to the end of this call (the
                // caller's guarantee); a `Refcount` is an `Opaque` with no
                // destructor ([`GadgetPtr::field`]).
                refcount_inc_not_zero(unsafe { g.field(|g| &raw const (*g).count) })
            }
        }
    };
}

/// LOCKED (article v1): a plain count under the arena's mutex, in a `KBox`. Its
/// registry is always LOCK: the count cannot be tested without the mutex.
pub(crate) struct Locked;

/// LOCKLESS (article v2): the count of the [`Arc`] the gadget lives in.
pub(crate) struct Lockless<R>(PhantomData<R>);

/// WEAK_CMPXCHG (article v3): a `Refcount` driven by the cmpxchg loop, 1 -> 0
/// under the owner's mutex.
pub(crate) struct WeakCmpxchg<R>(PhantomData<R>);

/// KREF_MUTEX: `kref_put_mutex()`, `Refcount::dec_and_lock()` on the owner's mutex.
pub(crate) struct KrefMutex<R>(PhantomData<R>);

/// KREF_LOCK: `kref_put_lock()`, `Refcount::dec_and_lock()` on the owner's spinlock.
pub(crate) struct KrefLock<R>(PhantomData<R>);

/// KREF_RWSEM: the article's exercise, `kref_put_rwsem()`.
pub(crate) struct KrefRwsem<R>(PhantomData<R>);

// SAFETY: `alloc_box` makes the box `release_box` frees; the count is the
// `LockedBy` one that `get`, `registry_get` and `put_one` change under the
// arena's mutex, and `put_one` frees only at zero.
unsafe impl Flavor for Locked {
    const ID: u32 = uapi::LP_FLAVOR_LOCKED;
    const KIDS: Option<KidsLock> = None;
    type Registry = RegLock;
    type Count = LockedBy<u32, GadgetsLock>;

    fn new_count(gadgets: &Gadgets<Self>) -> Self::Count {
        LockedBy::new(&gadgets.lock, 1)
    }

    fn alloc(init: impl PinInit<Gadget<Self>>) -> Result<GadgetPtr<Self>> {
        alloc_box(init)
    }

    /// Article v1: `refcnt++` under the arena mutex. Out of line: its `LockedBy`
    /// check and overflow check need a stack frame (their panic messages) that
    /// the other flavors' gets need not set up.
    #[inline(never)]
    unsafe fn get(g: GadgetPtr<Self>) {
        // SAFETY: The caller owns a count; the borrow ends in this call.
        let g = unsafe { g.as_ref() };
        let count: &LockedBy<u32, GadgetsLock> = &g.count;
        let mut state = g.gadgets().lock.lock();
        *count.access_mut(&mut state) += 1;
    }

    fn refcount(g: &GadgetRef<Self>) -> u32 {
        *g.count.access(&g.gadgets().lock.lock())
    }

    /// One lock: the count's mutex, taken first, as a mutex cannot nest in the
    /// XArray's spinlock; then the registry's, which the release path takes to
    /// unregister.
    fn registry_get(gadgets: &Gadgets<Self>, i: usize) -> Option<GadgetRef<Self>> {
        let mut state = gadgets.lock.lock();
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_MODE);
        let registry = gadgets.registry.lock();
        let found = Found::under_lock(&registry, registry.get(i)?)?;
        gadgets.delays().stall_atomic(uapi::LP_DELAY_TRYGET_FOUND);
        // SAFETY: Found under the registry lock, which we hold until the borrow
        // ends ([`Found`]'s invariant); the count is `LockedBy` the mutex we hold.
        let count = unsafe { found.ptr.field(|g| &raw const (*g).count) };
        let count = count.access_mut(&mut state);
        if *count == 0 {
            return None;
        }
        *count += 1;
        // SAFETY: The allocator's pointer (the registry stores it); we took the count.
        Some(unsafe { GadgetRef::from_raw(found.ptr) })
    }

    /// `lp_put_locked()`: article v1 put, `refcnt--` under the arena mutex. The
    /// mutex orders every decrement; the one that sees 1 -> 0 is the last.
    unsafe fn put_one(g: GadgetPtr<Self>, _pin: &mut Option<GadgetRef<Self>>) -> Put<Self> {
        let last = {
            // SAFETY: We own a count; `gr` is last used before the unlock, which
            // is when another put may free the gadget.
            let gr = unsafe { g.as_ref() };
            let mut state = gr.gadgets().lock.lock();
            let count = gr.count.access_mut(&mut state);
            *count -= 1;
            *count == 0
        };
        // SAFETY: We released the gadget, and it lives in a box.
        unsafe { release_box(g, last) }
    }
}

// SAFETY: `alloc` makes an `Arc`, and every other method reaches it, its count
// included, through `Arc`'s own API on the pointer `Arc::into_raw` returned;
// `put_one` frees through `R::drop_arc`, after a grace period for `RegRcu`.
unsafe impl<R: Registry> Flavor for Lockless<R> {
    const ID: u32 = uapi::LP_FLAVOR_LOCKLESS;
    const KIDS: Option<KidsLock> = None;
    type Registry = R;
    type Count = ();

    fn new_count(_gadgets: &Gadgets<Self>) {}

    fn alloc(init: impl PinInit<Gadget<Self>>) -> Result<GadgetPtr<Self>> {
        let raw = Arc::into_raw(Arc::pin_init(init, GFP_KERNEL_ACCOUNT)?);
        // `Arc::into_raw` never returns null (an `Arc` is never null).
        NonNull::new(raw.cast_mut()).map(GadgetPtr).ok_or(ENOMEM)
    }

    /// Article v2: a bare increment without acquire or release semantics,
    /// `Arc`'s clone (`refcount_inc()`): the caller's own reference keeps the
    /// gadget alive and was itself obtained with the ordering that mattered.
    #[inline]
    unsafe fn get(g: GadgetPtr<Self>) {
        // SAFETY: `g` is the pointer `Arc::into_raw` returned (`Lockless::alloc`);
        // the caller's count keeps the `Arc`'s above zero while the borrow lives,
        // and no `UniqueArc` of a gadget is ever made.
        let arc = unsafe { ArcBorrow::from_raw(g.0.as_ptr()) };
        // The new count (`refcount_inc()`) goes to the caller's new reference.
        core::mem::forget(Arc::from(arc));
    }

    fn refcount(g: &GadgetRef<Self>) -> u32 {
        // SAFETY: The pointer `Arc::into_raw` returned; `g`'s count keeps the
        // `Arc` alive. The `Arc` made here owns none of it and is never dropped,
        // as in `From<ArcBorrow> for Arc`.
        let arc = ManuallyDrop::new(unsafe { Arc::from_raw(g.ptr.0.as_ptr()) });
        Arc::count(&arc)
    }

    fn registry_get(gadgets: &Gadgets<Self>, i: usize) -> Option<GadgetRef<Self>> {
        R::get_unless_zero(gadgets, i)
    }

    /// `lp_put_lockless()`: article v2 put, the last `Arc` reference's release.
    ///
    /// `Arc` decrements with `refcount_dec_and_test()`: release ordering before
    /// the decrement and acquire after the last one, which is what the article
    /// asks of `atomic_fetch_dec()` (C uses its fully ordered form): every
    /// earlier put happens before the releaser reads the parent and frees the
    /// gadget. `Arc::drop_with` leaves the count at zero while it lends us the
    /// gadget, so TRYGET's `Arc::from_raw_inc_not_zero` cannot revive it.
    ///
    /// The release path runs in the closure, before the `Arc` frees the gadget.
    /// `drop_with` lends it as `Pin<&mut Gadget>`, which is sound only if no
    /// other thread holds a reference into the gadget meanwhile: it is on no list
    /// (LOCKLESS keeps none), no handle holds it (its count is zero), and a
    /// TRYGET that finds it in the registry touches only the `Arc`'s count,
    /// beside the gadget, never the gadget itself ([`Found`]), through patch
    /// 0002's `Arc::from_raw_inc_not_zero()`, which reaches the count by raw
    /// projections. In an RCU registry the `Arc` frees with
    /// [`Arc::drop_with_rcu`]: the gadget is dropped at once, the memory, count
    /// included, after a grace period. Which of the two is `R`'s, a constant.
    ///
    /// Always inlined: its fast path is `Arc::drop_with()`'s decrement and one
    /// test, and left out of line it pays for the release path's stack frame on
    /// every put. The release path itself is [`release_arc`], out of line.
    #[inline(always)]
    unsafe fn put_one(g: GadgetPtr<Self>, _pin: &mut Option<GadgetRef<Self>>) -> Put<Self> {
        // SAFETY: The pointer `Arc::into_raw` returned (`Lockless::alloc`); the
        // count the caller hands over is this `Arc`'s.
        let a = unsafe { Arc::from_raw(g.0.as_ptr()) };
        let mut parent = None;
        if R::drop_arc(a, |g| parent = release_arc(g)) {
            Put::Released(parent)
        } else {
            Put::Kept
        }
    }
}

/// [`Lockless::put_one`]'s release path, out of line: [`Gadget::release`], and
/// the parent reference taken out of the gadget `Arc::drop_with()` lends.
#[cold]
#[inline(never)]
fn release_arc<F: Flavor>(mut g: Pin<&mut Gadget<F>>) -> Option<GadgetRef<F>> {
    g.as_ref().get_ref().release();
    g.as_mut().project().parent.take()
}

// SAFETY: `Arc::from_raw_inc_not_zero()` adds to the `Arc`'s count unless it is
// zero.
unsafe impl<R: Registry> Counted for Lockless<R> {
    #[inline]
    unsafe fn inc_not_zero(g: GadgetPtr<Self>) -> bool {
        let allocation = g.0.as_ptr();
        // SAFETY: The pointer `Arc::into_raw` returned, whose allocation stays
        // live meanwhile (the caller's guarantee); no `UniqueArc` of a gadget is
        // ever made. The count it took goes to the caller's reference.
        unsafe { Arc::from_raw_inc_not_zero(allocation) }
            .map(core::mem::forget)
            .is_some()
    }
}

/// Allocates a gadget in a pinned `KBox` (every flavor but LOCKLESS).
fn alloc_box<F: Flavor>(init: impl PinInit<Gadget<F>>) -> Result<GadgetPtr<F>> {
    // The gadget is never moved out of its allocation: [`release_box`] rebuilds
    // the pinned box from this pointer and drops it in place.
    let raw = KBox::pin_init(init, GFP_KERNEL_ACCOUNT)?.into_foreign();
    // `into_foreign` never returns null (a `KBox` is never null).
    NonNull::new(raw.cast()).map(GadgetPtr).ok_or(ENOMEM)
}

/// `lp_gadget_free()` of a boxed gadget, if the put that computed `last` took
/// its count to zero: unregisters it ([`Gadget::release`]), takes out its parent
/// reference, and drops and frees it, at once or after a grace period
/// ([`Registry::free_box`]).
///
/// # Safety
///
/// `g` lives in a box from [`alloc_box`]; if `last`, the caller's put took its
/// count to zero and unlinked it from its weak list, so no other thread can take
/// a count of it but through the registry.
#[inline]
unsafe fn release_box<F: Flavor>(g: GadgetPtr<F>, last: bool) -> Put<F> {
    if !last {
        return Put::Kept;
    }
    // SAFETY: The caller's guarantees, with `last`.
    unsafe { free_box(g) }
}

/// [`release_box`] once the count reached zero, out of line: the put's fast
/// path is the decrement alone, as in std's `Arc::drop()`.
///
/// # Safety
///
/// As [`release_box`]'s, with `last`.
#[cold]
#[inline(never)]
unsafe fn free_box<F: Flavor>(g: GadgetPtr<F>) -> Put<F> {
    // SAFETY: We released the gadget, so nobody else frees it; the borrow ends
    // before the box is rebuilt.
    unsafe { g.as_ref() }.release();
    // SAFETY: `alloc_box` made the pointer with `into_foreign` of a pinned box.
    // `release()` took the gadget out of the registry, the last place another
    // thread could find it, under the registry lock: no other reference to it
    // exists, so the box may borrow it mutably to drop it (in place, it is
    // pinned) and free it. In RCU mode a TRYGET that found it before may still
    // hold a borrow of its count ([`GadgetPtr::field`]): a `Refcount`, an
    // `Opaque`, which `KBox::drop_rcu` keeps allocated for a grace period.
    let mut b = unsafe { <Pin<KBox<Gadget<F>>>>::from_foreign(g.0.as_ptr().cast()) };
    let parent = b.as_mut().project().parent.take();
    F::Registry::free_box(b);
    Put::Released(parent)
}

/// `lp_owner_pin()`: keeps the lock of `g`'s list allocated across a slow put.
///
/// `Refcount::dec_and_lock()` and [`put_kref_rwsem`] take the owner's lock for a
/// decrement that may not be the last: if a TRYGET raised the count while we
/// waited for the lock, the decrement under it takes 2 -> 1 and the unlock
/// follows with no count held. The final put may then run on another CPU as soon
/// as the lock is free, free `g` and, with it, the parent's last reference: the
/// parent and the lock inside it are freed while `mutex_unlock()` or `up_write()`
/// may still be touching the lock in its slow path
/// (`Documentation/locking/mutex-design.rst`). A reference to the parent, taken
/// while our own count of `g` keeps it alive, keeps the lock allocated until
/// [`put_cascade`] drops it, after the unlock. A root needs none: its list is
/// the arena's, which outlives every put. The article's cmpxchg loop
/// ([`put_weak_cmpxchg`]) needs none either: it unlocks before it decrements.
/// Nor does KREF_LOCK ([`put_kref_lock`]): `spin_unlock()` touches the lock no
/// more after releasing it, also under `PREEMPT_RT`, where a spinlock is an
/// rtmutex. Under `PREEMPT_RT` `mutex_unlock()` is an rtmutex's too, and no more
/// touches the lock once another task may take it; the pin stays all the same:
/// the rule of `mutex-design.rst` is the mutex API's on every kernel, and
/// `up_write()` of `PREEMPT_RT` still touches the semaphore after readers may
/// take it.
///
/// That tail lasts a few instructions. With `LP_DELAY_PUT_UNLOCKED` on, the slow
/// put that did not release stalls after its unlock and then try-locks the
/// lock, as the tail would touch it: a put without this pin then touches a freed
/// lock, which KASAN reports.
///
/// Returns the owner's list, borrowed from the pin or the arena, not from `g`,
/// and the arena's LP_IOC_DELAY knob.
///
/// # Safety
///
/// The caller owns a count of `g`.
#[inline]
unsafe fn owner_pin<F: Flavor>(
    g: GadgetPtr<F>,
    pin: &mut Option<GadgetRef<F>>,
) -> (&Kids<F>, &Delay) {
    // SAFETY: The caller owns a count, so `g` is allocated and not mutably
    // borrowed; the borrow ends in this function, before any decrement.
    let gr = unsafe { g.as_ref() };
    // Not borrowed from `g`: the arena's, which outlive their gadgets.
    let gadgets = gr.gadgets();
    *pin = gr.parent.clone();
    let owner = match pin {
        Some(p) => &p.kids,
        None => &gadgets.roots,
    };
    (owner, gadgets.delays())
}

/// `lp_put_weak_cmpxchg()`: article v3 put, the cmpxchg loop.
///
/// Lock-free while the count is above one; the 1 -> 0 step is a cmpxchg done
/// under the owner's mutex, retried if a LOOKUP upgraded a weak reference
/// before we got the mutex. The gadget leaves the list before the mutex is
/// dropped. The cmpxchg is fully ordered (`Full`), as `atomic_cmpxchg()` is.
/// Every call does exactly one successful cmpxchg, but for a count already at
/// or below zero (a bug), which WARNs and is left alone. No pin: the mutex is
/// only unlocked by a put that still holds its count (a failed 1 -> 0), or that
/// is the last.
///
/// This is the one place the count is driven through `Refcount::as_atomic()`
/// (besides [`refcount_read`]'s read), which `Refcount` reserves for what
/// `refcount.h` has no API for. Here the
/// loop itself is the pattern under study; its packaged form is KREF_MUTEX's
/// `Refcount::dec_and_lock()`. Nothing of `refcount_t` is lost: the loop never
/// goes below zero, and the count, one per handle, child and in-flight
/// reference, stays far from saturation.
///
/// # Safety
///
/// The caller owns a count of `g`, whose count is `refcnt`, and hands it over.
#[inline]
unsafe fn put_weak_cmpxchg<F: Flavor>(
    g: GadgetPtr<F>,
    refcnt: &Refcount,
    _pin: &mut Option<GadgetRef<F>>,
) -> bool {
    // SAFETY: We own a count; the borrow of `g` ends in this statement. The
    // owner is the parent, which `g` keeps alive until its final put, or the
    // arena.
    let owner = unsafe { g.as_ref() }.owner();
    // Given up only in a cmpxchg below, after which `count` is not used again.
    let count = refcnt.as_atomic();
    loop {
        let old = count.load(Relaxed);
        // An over-put: nothing to release, and no retry would end.
        if old <= 0 {
            kernel::warn_on!(true);
            return false;
        }
        if old > 1 {
            if count.cmpxchg(old, old - 1, Full).is_ok() {
                return false;
            }
        } else {
            // old was 1, fence off accesses to weak references!
            let mut list = owner.mutex.lock();
            if count.cmpxchg(1, 0, Full).is_ok() {
                list_remove(&mut list, g);
                return true;
            }
            // Somebody upgraded a weak reference: try again.
        }
    }
}

/// `lp_put_kref_mutex()`: `kref_put_mutex()`, `Refcount::dec_and_lock()` being
/// `refcount_dec_and_mutex_lock()` on the owner's mutex, and the gadget leaves
/// the list under it if that was the last reference. Release ordering before the
/// decrement, acquire before the gadget is unlinked and freed. The slow path
/// pins the owner first ([`owner_pin`]): `dec_and_lock()` may unlock after a
/// decrement that was not the last.
///
/// # Safety
///
/// The caller owns a count of `g`, whose count is `refcnt`, and hands it over;
/// it drops `pin` after this returns.
#[inline]
unsafe fn put_kref_mutex<F: Flavor>(
    g: GadgetPtr<F>,
    refcnt: &Refcount,
    pin: &mut Option<GadgetRef<F>>,
) -> bool {
    if refcnt.dec_not_one() {
        return false;
    }
    // SAFETY: We still own our count.
    let (owner, delays) = unsafe { owner_pin(g, pin) };
    // `owner` is the pin's or the arena's, not `g`'s.
    if let Some(mut list) = refcnt.dec_and_lock(&owner.mutex) {
        list_remove(&mut list, g);
        return true;
    }
    // Debug: `mutex_unlock()`'s tail, widened ([`owner_pin`]).
    if delays.on(uapi::LP_DELAY_PUT_UNLOCKED) {
        delays.stall(uapi::LP_DELAY_PUT_UNLOCKED);
        drop(owner.mutex.try_lock());
    }
    false
}

/// `lp_put_kref_lock()`: `kref_put_lock()`, the same with the owner's spinlock
/// (`refcount_dec_and_lock()`). No pin: `spin_unlock()` does not touch the lock
/// after releasing it (`Documentation/locking/mutex-design.rst` contrasts it with
/// `mutex_unlock()`), also under `PREEMPT_RT`, where a spinlock is an rtmutex: an
/// acquirer must take its `wait_lock`, whose release is the unlock's last access
/// (`rt_mutex_slowunlock()`; `rt_spin_unlock()` drops the RCU read lock only
/// after it), as `make pin-experiment` shows (docs/testing.md). The `&SpinLock`
/// lent to `dec_and_lock()` outlives that release only as `Arc::drop`'s
/// `&Refcount` outlives its decrement, a shared borrow of interior-mutable
/// memory.
///
/// # Safety
///
/// The caller owns a count of `g`, whose count is `refcnt`, and hands it over.
#[inline]
unsafe fn put_kref_lock<F: Flavor>(
    g: GadgetPtr<F>,
    refcnt: &Refcount,
    _pin: &mut Option<GadgetRef<F>>,
) -> bool {
    // SAFETY: We own a count; the borrow of `g` ends in this statement. The
    // owner is the parent, which `g` keeps alive until its final put, or the
    // arena.
    let owner = unsafe { g.as_ref() }.owner();
    if let Some(mut list) = refcnt.dec_and_lock(&owner.lock) {
        list_remove(&mut list, g);
        return true;
    }
    false
}

/// `lp_put_kref_rwsem()`: `kref_put_rwsem()`, the article's exercise,
/// `refcount_dec_and_mutex_lock()` written out for `RwSem`, step by step as C
/// writes it: lock-free while the count is above one (`Refcount::dec_not_one()`);
/// otherwise the owner is pinned ([`owner_pin`]), `down_write()` fences off
/// readers of the list, which upgrade weak references under `down_read()`, and
/// the 1 -> 0 step is `dec_and_test()` under it.
///
/// # Safety
///
/// The caller owns a count of `g`, whose count is `refcnt`, and hands it over;
/// it drops `pin` after this returns.
#[inline]
unsafe fn put_kref_rwsem<F: Flavor>(
    g: GadgetPtr<F>,
    refcnt: &Refcount,
    pin: &mut Option<GadgetRef<F>>,
) -> bool {
    if refcnt.dec_not_one() {
        return false;
    }
    // SAFETY: We still own our count.
    let (owner, delays) = unsafe { owner_pin(g, pin) };
    let mut list = owner.rwsem.write();
    if refcnt.dec_and_test() {
        list_remove(&mut list, g);
        return true;
    }
    drop(list);
    // Debug: `up_write()`'s tail, widened ([`owner_pin`]).
    if delays.on(uapi::LP_DELAY_PUT_UNLOCKED) {
        delays.stall(uapi::LP_DELAY_PUT_UNLOCKED);
        drop(owner.rwsem.try_write());
    }
    false
}

/// `kref_get()` of the flavors counted by a `Refcount` (article v2's get): a bare
/// increment, `Refcount::inc()`, without acquire or release semantics: the
/// caller's own reference keeps the gadget alive and was itself obtained with
/// the ordering that mattered.
#[inline]
fn refcount_get(refcnt: &Refcount) {
    refcnt.inc();
}

/// `kref_get_unless_zero()` of the flavors counted by a `Refcount`:
/// `Refcount::inc_not_zero()`. Its caller reaches the count by place projection
/// alone ([`GadgetPtr::field`]): the gadget may be mid-drop, lent out as
/// `Pin<&mut Gadget>` by its release path.
#[inline]
fn refcount_inc_not_zero(refcnt: &Refcount) -> bool {
    refcnt.inc_not_zero()
}

refcounted_flavor!(
    WeakCmpxchg,
    uapi::LP_FLAVOR_WEAK_CMPXCHG,
    KidsLock::Mutex,
    put_weak_cmpxchg
);
refcounted_flavor!(
    KrefMutex,
    uapi::LP_FLAVOR_KREF_MUTEX,
    KidsLock::Mutex,
    put_kref_mutex
);
refcounted_flavor!(
    KrefLock,
    uapi::LP_FLAVOR_KREF_LOCK,
    KidsLock::Spin,
    put_kref_lock
);
refcounted_flavor!(
    KrefRwsem,
    uapi::LP_FLAVOR_KREF_RWSEM,
    KidsLock::RwSem,
    put_kref_rwsem
);

/// `lp_gadget_put()`: drops one reference, releasing what reaches zero; the
/// drop of a [`GadgetRef`], and [`put`] for a count of what it released.
///
/// May sleep, whatever the flavor (`might_sleep()`): the slow put of the kref
/// flavors takes the owner's mutex or semaphore, and releasing a gadget may
/// release its whole chain. The common case, a put that was not the last and
/// pinned nothing, returns at once; the rest is [`put_cascade`]. Ordering is
/// that of the flavor's put.
///
/// Returns the number of gadgets this put released.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over.
#[inline(always)]
unsafe fn put_ptr<F: Flavor>(g: GadgetPtr<F>) -> u32 {
    kernel::task::might_sleep();
    let mut pin = None;
    // SAFETY: The caller's count, handed over.
    let put = unsafe { F::put_one(g, &mut pin) };
    if matches!(put, Put::Kept) && pin.is_none() {
        // Neither holds a reference: nothing to drop. (Their drop glue, which
        // may put, is recursive, and would stay an out-of-line call.)
        core::mem::forget((put, pin));
        return 0;
    }
    put_cascade(put, pin)
}

/// The rest of a put that released a gadget or pinned its owner
/// ([`owner_pin`]). Releasing a gadget drops its reference to the parent, which
/// may cascade up the tree. The cascade is a loop, not a recursion: constant
/// stack for any depth, and a pin is dropped in the same loop, after its put's
/// unlock. It offers to reschedule after each released gadget, as C's
/// `cond_resched()` does: Rust 7.3 has no binding for it, and on these kernels
/// (`CONFIG_PREEMPTION`, no `CONFIG_PREEMPT_DYNAMIC`) C's call is only the debug
/// check `__might_resched()`, which `might_sleep()` performs too.
#[cold]
#[inline(never)]
fn put_cascade<F: Flavor>(mut put: Put<F>, mut pin: Option<GadgetRef<F>>) -> u32 {
    let mut released = 0;
    loop {
        let next = match put {
            // Not the last: put the owner's pin, which may be the last of the
            // parent if the gadget was released meanwhile on another CPU.
            Put::Kept => pin.take(),
            Put::Released(parent) => {
                released += 1;
                // `parent` is a reference to the same gadget: not its last, so
                // dropping the pin here releases nothing.
                drop(pin.take());
                kernel::task::might_sleep();
                parent
            }
        };
        let Some(next) = next else {
            return released;
        };
        // SAFETY: We own `next`'s count (the parent reference the released child
        // held, or the pin) and hand it over.
        put = unsafe { F::put_one(next.into_raw(), &mut pin) };
    }
}

/// Drops `g`, as its drop would, telling how many gadgets that put released
/// (PUT's answer).
pub(crate) fn put<F: Flavor>(g: GadgetRef<F>) -> u32 {
    // SAFETY: `into_raw` hands over the count `g` owned.
    unsafe { put_ptr(g.into_raw()) }
}
