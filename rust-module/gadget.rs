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
//! A gadget is counted intrusively, the way Rust-for-Linux counts C objects:
//! [`Gadget`] is [`AlwaysRefCounted`] and a strong reference is an
//! [`ARef<Gadget>`] ([`GadgetRef`]), whose drop is a put. Where the C module
//! uses a union of counters, the count is the flavor's: in LOCKLESS the one of
//! the [`Arc`] the gadget lives in (a `refcount_t`, incremented and dropped with
//! `Arc`'s own operations), in LOCKED a count that only the arena's mutex may
//! touch (a [`LockedBy`]), in every other flavor an intrusive [`Refcount`] in a
//! `KBox`. The decrement ([`AlwaysRefCounted::dec_ref`]) takes a pointer, not a
//! `&Gadget`: once it has given up its count, another CPU may free the gadget,
//! and no reference to it may still be live then.
//!
//! Release never recurses: [`put_ptr`] drops the parent's reference in a loop, so a
//! chain of any depth is freed in constant stack.

use core::{marker::PhantomData, mem::ManuallyDrop, pin::Pin, ptr::NonNull};
use kernel::{
    ffi::c_void,
    impl_has_rcu_head, new_mutex, new_rwsem, new_spinlock,
    prelude::*,
    sync::{
        aref::{ARef, AlwaysRefCounted},
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        rcu::{self, RcuHead},
        Arc, ArcBorrow, LockedBy, Mutex, Refcount, RwSem, SpinLock,
    },
    types::ForeignOwnable,
    xarray::{AllocKind, RcuForeignOwnable, XArray},
};

use crate::uapi;

/// Gadgets alive in the whole module, all arenas together (`IDENTIFY.live_gadgets`):
/// counted from the allocation in [`Gadget::alloc`] until the gadget's drop, the
/// last step before its memory is freed. `Relaxed`: a statistic that only module
/// exit and a quiescent IDENTIFY read.
pub(crate) static LIVE_GADGETS: Atomic<i64> = Atomic::new(0);

/// One strong reference to a gadget, counted the way its arena's flavor counts;
/// dropping it is a put ([`put`] also tells how many gadgets the put released).
pub(crate) type GadgetRef = ARef<Gadget>;

/// The address of a gadget: what the weak child lists and the registry store.
///
/// It keeps nothing alive, and it is not a count (weak or strong). Only
/// [`GadgetPtr::as_ref`] dereferences it, and only a put that took the count to
/// zero frees through it ([`GadgetPtr::allocation`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct GadgetPtr(NonNull<Gadget>);

// SAFETY: A `GadgetPtr` is an address; dereferencing it is `unsafe`
// ([`GadgetPtr::as_ref`]) and allowed by a lock or a count, whatever the thread.
unsafe impl Send for GadgetPtr {}
// SAFETY: Through `&GadgetPtr` only the address can be copied.
unsafe impl Sync for GadgetPtr {}

impl GadgetPtr {
    /// The address of `g`.
    fn of(g: &Gadget) -> Self {
        Self(NonNull::from(g))
    }

    /// The pointer the gadget's allocator handed out, for `KBox::from_raw`,
    /// `Arc::from_raw` and `Arc::from_raw_inc_not_zero`, which need the
    /// provenance of the whole allocation (in LOCKLESS the `Arc`'s count lies
    /// before the gadget). [`Gadget::alloc`] exposed that provenance, so a
    /// pointer rebuilt from the address has it, whichever reference `self` was
    /// taken from ([`ARef::from`] makes one from a `&Gadget`).
    #[inline]
    fn allocation(self) -> *mut Gadget {
        core::ptr::with_exposed_provenance_mut(self.0.as_ptr().addr())
    }

    /// Borrows the gadget.
    ///
    /// # Safety
    ///
    /// For all of `'a`, the gadget must stay allocated and no `&mut Gadget` to it
    /// may exist. That holds while the caller owns a count of the gadget, and
    /// while it holds the lock of the weak list or registry it found `self` in:
    /// a gadget leaves its list under the lock that fenced its 1 -> 0 step, and
    /// the registry, under the registry lock, before its release path drops it.
    /// A caller that gives up its count must let `'a` end before.
    #[inline]
    unsafe fn as_ref<'a>(self) -> &'a Gadget {
        // SAFETY: The pointer is valid for reads (the caller's guarantee that the
        // gadget is allocated) and the caller guarantees that no `&mut Gadget`
        // exists for `'a`.
        unsafe { self.0.as_ref() }
    }

    /// The gadget's intrusive count, as `Arc::drop` reaches its own: a borrow of
    /// the `Refcount` alone, interior-mutable, never of the whole gadget, so that
    /// it may be held across the decrement after which another CPU frees the
    /// gadget, until the decrementing call returns.
    ///
    /// # Safety
    ///
    /// The gadget must stay allocated while the borrow is used: the caller owns
    /// a count of it and uses the borrow for the decrement that gives the count
    /// up (or before), not after that call returns; or it holds the lock of a
    /// weak list or of the registry the gadget is in, as for
    /// [`GadgetPtr::as_ref`]; or the borrow ends inside an RCU read-side
    /// critical section in which the caller found the gadget in an RCU-mode
    /// registry: the release path unregisters it, then frees it only after a
    /// grace period ([`KBox::drop_rcu`]). The gadget may be dropped meanwhile;
    /// its `Refcount` stays valid, as an `Opaque` is for any bytes and it has no
    /// destructor, and the drop's `&mut Gadget` claims no uniqueness over it.
    #[inline]
    unsafe fn refcnt<'a>(self) -> &'a Refcount {
        // SAFETY: The gadget is allocated (the caller's guarantee); the place
        // projection borrows only the `refcnt` field.
        unsafe { &(*self.0.as_ptr()).refcnt }
    }
}

/// A gadget found in the registry: its address, for as long as `'a`, the registry
/// lock or the RCU read-side critical section it was found in (`Guard::get()` and
/// [`XArray::load`] borrow the lock guard or the `rcu::Guard` for `'a`).
///
/// What is found may be released on another CPU meanwhile; what keeps it
/// allocated is the release path, which unregisters a gadget under the registry
/// lock before it frees it, at once in LOCK mode, after a grace period in RCU
/// mode. That is valid only while the lock or the critical section lasts: the
/// borrows [`Found`] lends end with `'a`, so the compiler rejects a count taken
/// after the lock or `rcu` was dropped.
#[derive(Clone, Copy)]
pub(crate) struct Found<'a> {
    ptr: GadgetPtr,
    _section: PhantomData<&'a ()>,
}

impl<'a> Found<'a> {
    /// The pointer the gadget's allocator handed out ([`GadgetPtr::allocation`]).
    #[inline]
    fn allocation(self) -> *mut Gadget {
        self.ptr.allocation()
    }

    /// Borrows the gadget, until the registry lock is dropped.
    ///
    /// # Safety
    ///
    /// The gadget was found under the registry lock ([`XArray::lock`]): its
    /// release path takes that lock to unregister it before it drops or frees it,
    /// so for all of `'a` it stays allocated and no `&mut Gadget` to it exists.
    #[inline]
    unsafe fn as_ref(self) -> &'a Gadget {
        // SAFETY: The caller's guarantee, for `'a`.
        unsafe { self.ptr.as_ref() }
    }

    /// The gadget's intrusive count ([`GadgetPtr::refcnt`]), until the lock or the
    /// critical section ends.
    ///
    /// # Safety
    ///
    /// The gadget was found under the registry lock, or found by
    /// [`XArray::load`] in a registry in RCU mode, a mode read inside the same
    /// critical section (a registry leaves RCU mode only after a grace period,
    /// see `lp_configure()`): its release path frees it only after a grace period
    /// that began once it was unregistered. Its count is then valid for `'a`, at
    /// zero if its release began.
    #[inline]
    unsafe fn refcnt(self) -> &'a Refcount {
        // SAFETY: The caller's guarantee, for `'a` (see `GadgetPtr::refcnt`).
        unsafe { self.ptr.refcnt() }
    }

    /// The strong reference to the gadget that the caller just took.
    ///
    /// # Safety
    ///
    /// The caller took a count of the gadget, which the returned `ARef` owns.
    #[inline]
    unsafe fn counted(self) -> GadgetRef {
        // SAFETY: The caller's guarantee.
        unsafe { ARef::from_raw(self.ptr.0) }
    }
}

// SAFETY: `into_foreign` hands the gadget's address to the XArray unchanged, and
// `from_foreign`/`borrow` rebuild the same `GadgetPtr` from it. Gadgets are
// aligned to `Gadget`'s alignment (at least 8, it holds pointers and `u64`s). A
// `GadgetPtr` owns nothing, so one rebuilt and dropped by the XArray frees
// nothing: the registry is a weak reference, which `kernel::xarray` has no type
// for (every `ForeignOwnable` of the kernel owns what it points to).
unsafe impl ForeignOwnable for GadgetPtr {
    const FOREIGN_ALIGN: usize = core::mem::align_of::<Gadget>();

    type Borrowed<'a> = Found<'a>;
    type BorrowedMut<'a> = Found<'a>;

    fn into_foreign(self) -> *mut c_void {
        self.0.as_ptr().cast()
    }

    unsafe fn from_foreign(ptr: *mut c_void) -> Self {
        // SAFETY: `ptr` came from `into_foreign`, so it is a non-null gadget pointer.
        GadgetPtr(unsafe { NonNull::new_unchecked(ptr.cast()) })
    }

    unsafe fn borrow<'a>(ptr: *mut c_void) -> Self::Borrowed<'a> {
        Found {
            // SAFETY: As in `from_foreign`.
            ptr: unsafe { Self::from_foreign(ptr) },
            _section: PhantomData,
        }
    }

    unsafe fn borrow_mut<'a>(ptr: *mut c_void) -> Self::BorrowedMut<'a> {
        // SAFETY: As in `borrow`.
        unsafe { Self::borrow(ptr) }
    }
}

// SAFETY: A `GadgetPtr` owns nothing and its borrow, a `Found`, is a copy of its
// address: dropping one invalidates no borrow. (What it points to is kept
// allocated for RCU readers by the release path, see [`Found::refcnt`].)
unsafe impl RcuForeignOwnable for GadgetPtr {}

/// A weak list of children and the lock that fences it (`struct lp_kids`).
///
/// A gadget's count may only go from 1 to 0 with the lock of the list it sits on
/// held, and it leaves the list before that lock is dropped: a visitor holding
/// the lock never sees a gadget whose count is zero.
///
/// C links gadgets into an intrusive `list_head`. Rust's `kernel::list::List`
/// owns its items (a `ListArc` is a strong reference), so it cannot hold the
/// weak references this list is about; the list is a vector of [`GadgetPtr`] under
/// each lock instead.
#[pin_data]
pub(crate) struct Kids {
    /// WEAK_CMPXCHG and KREF_MUTEX.
    #[pin]
    mutex: Mutex<KVec<GadgetPtr>>,
    /// KREF_LOCK.
    #[pin]
    lock: SpinLock<KVec<GadgetPtr>>,
    /// KREF_RWSEM: LOOKUP takes it shared.
    #[pin]
    rwsem: RwSem<KVec<GadgetPtr>>,
}

impl Kids {
    /// `lp_kids_init()`: every flavor uses one of the three locks; one lockdep
    /// class per lock type for the whole module, as in C.
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

/// The gadget half of an arena: what `struct lp_arena` holds for its gadgets,
/// and all that a gadget knows of its arena. The arena (`arena.rs`) embeds it;
/// gadgets point to it, not to the arena, so this file needs nothing of
/// `arena.rs`.
#[pin_data]
pub(crate) struct Gadgets {
    /// `enum lp_flavor`, fixed by the arena's first NEW; only ever one of the
    /// `LP_FLAVOR_*` values (`lp_configure()` checks it).
    pub(crate) flavor: Atomic<u32>,
    /// `enum lp_registry`, fixed with `flavor`; TRYGET reads it inside the RCU
    /// read lock (see `lp_configure()`).
    pub(crate) registry_mode: Atomic<u32>,
    /// The article v1 "gadgets_lock": LOCKED's counts.
    #[pin]
    lock: Mutex<GadgetsLock>,
    /// Weak list of the root gadgets, fenced like a gadget's children.
    #[pin]
    roots: Kids,
    /// id -> gadget, for TRYGET; its own lock (LOCK mode) or a grace period
    /// before the free (RCU mode) keeps a gadget TRYGET found from being freed
    /// (the release path removes it under that lock first).
    #[pin]
    registry: XArray<GadgetPtr>,
    /// Last id handed out.
    pub(crate) next_id: Atomic<u64>,
    /// Most live gadgets (CONFIGURE's `max_gadgets`); fixed with `flavor`.
    pub(crate) max_gadgets: Atomic<u32>,
    /// Live gadgets, counted from [`Gadget::alloc`] to the gadget's drop.
    nr_gadgets: Atomic<u32>,
    /// Gadgets ever created.
    pub(crate) created: Atomic<u64>,
    /// Gadgets ever freed; `Release`, so that whoever reads it with `Acquire`
    /// sees each freed gadget in `created` too.
    pub(crate) freed: Atomic<u64>,
}

impl Gadgets {
    /// An arena's gadgets, before its first NEW: LOCKED, none yet.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            flavor: Atomic::new(uapi::LP_FLAVOR_LOCKED),
            registry_mode: Atomic::new(uapi::LP_REGISTRY_LOCK),
            lock <- new_mutex!(GadgetsLock { _not_zero_sized: 0 }, "lp_arena.lock"),
            roots <- Kids::new(),
            registry <- XArray::new(AllocKind::Alloc),
            next_id: Atomic::new(0),
            max_gadgets: Atomic::new(uapi::LP_MAX_GADGETS),
            nr_gadgets: Atomic::new(0),
            created: Atomic::new(0),
            freed: Atomic::new(0),
        })
    }

    /// The arena's `enum lp_flavor`.
    #[inline]
    pub(crate) fn flavor(&self) -> u32 {
        self.flavor.load(Relaxed)
    }

    /// The arena's `enum lp_registry`.
    #[inline]
    pub(crate) fn registry_mode(&self) -> u32 {
        self.registry_mode.load(Relaxed)
    }
}

/// Whether `flavor` keeps weak child lists (LOOKUP works).
pub(crate) fn flavor_has_kids(flavor: u32) -> bool {
    flavor != uapi::LP_FLAVOR_LOCKED && flavor != uapi::LP_FLAVOR_LOCKLESS
}

/// The flavor that [`Gadgets::flavor`] never holds, read all the same: WARNs
/// once, for each `match` on the flavor that has no arm for it.
fn unknown_flavor(flavor: u32) {
    kernel::warn_on!(flavor >= uapi::LP_FLAVOR_COUNT);
}

/// Takes `g` off a locked list (`list_del()`).
fn list_remove(list: &mut KVec<GadgetPtr>, g: GadgetPtr) {
    if let Some(i) = list.iter().position(|x| *x == g) {
        let last = list.len() - 1;
        list.as_mut_slice().swap(i, last);
        list.pop();
    }
}

/// `list_add_tail()` on a list fenced by a spinlock. `GFP_KERNEL` may sleep, so
/// the vector grows outside the lock and is swapped in under it.
fn list_add_spinlocked(lock: &SpinLock<KVec<GadgetPtr>>, w: GadgetPtr) -> Result {
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

/// One node of the tree (`struct lp_gadget`).
///
/// # Invariants
///
/// - `gadgets` points to the [`Gadgets`] of the arena that created the gadget,
///   which outlives it: `MiscDevice::release` puts every handle the arena holds,
///   through `&Arena`, before the arena is dropped, and nothing else holds a
///   reference across an ioctl. The pointer comes from a shared borrow and is
///   only read through.
/// - `parent` is only written (taken) by the put that released the gadget, with
///   the gadget's allocation in hand (`Pin<&mut Gadget>`): its count is zero and
///   it is off every weak list and out of the registry, so no other reference
///   to it exists.
/// - A LOCKLESS gadget lives in an [`Arc`], any other in a pinned `KBox`; either
///   way [`Gadget::alloc`] exposed the allocation's provenance.
#[pin_data(PinnedDrop)]
pub(crate) struct Gadget {
    /// LOCKED: article v1's count, serialised by the arena's mutex.
    count: LockedBy<u32, GadgetsLock>,
    /// WEAK_CMPXCHG and KREF_*: the intrusive count (LOCKLESS: `Arc`'s own).
    refcnt: Refcount,
    /// Strong reference to the parent, `None` for a root.
    parent: Option<GadgetRef>,
    /// The gadgets of the arena the gadget lives in.
    gadgets: NonNull<Gadgets>,
    /// Registry key, unique in the arena, never reused.
    pub(crate) id: u64,
    /// This gadget's children (weak references).
    #[pin]
    kids: Kids,
    /// Live children; each holds a reference to this gadget.
    nr_children: Atomic<i32>,
    /// [`Gadget::publish`] ran: until then LOOKUP and TRYGET act as if the
    /// gadget were not on its list nor in the registry, and it is not counted.
    published: Atomic<bool>,
    /// `kfree_rcu()`'s, in an arena whose registry is RCU.
    rcu: RcuHead,
}

impl_has_rcu_head! {
    impl HasRcuHead for Gadget { self.rcu }
}

// SAFETY: Every field is thread-safe but `gadgets`, only read (and `Gadgets` is
// `Sync`), `parent`, only taken by the releaser, alone (type invariants), and
// `rcu`, which nothing reads and only the free after a grace period writes,
// once the gadget is dropped.
unsafe impl Send for Gadget {}
// SAFETY: As above.
unsafe impl Sync for Gadget {}

// SAFETY: A gadget is counted from its creation (the one count of the `ARef`
// that `Gadget::alloc` returns) and freed only by the put that takes its
// flavor's count to zero (`dec_ref`, `put`): `inc_ref` takes one more count of
// that same counter, which keeps the gadget allocated until the matching
// `dec_ref`.
unsafe impl AlwaysRefCounted for Gadget {
    #[inline]
    fn inc_ref(&self) {
        self.get();
    }

    #[inline]
    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns the count that an `inc_ref` took (or the one
        // `alloc` gave) and hands it over, and uses `obj` no more.
        unsafe { put_ptr(GadgetPtr(obj)) };
    }
}

impl Gadget {
    #[inline]
    fn gadgets(&self) -> &Gadgets {
        // SAFETY: The arena's gadgets outlive their gadgets (type invariant).
        unsafe { self.gadgets.as_ref() }
    }

    #[inline]
    fn flavor(&self) -> u32 {
        self.gadgets().flavor()
    }

    /// The list the gadget sits on: its parent's children, or the arena's roots.
    #[inline]
    fn owner(&self) -> &Kids {
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

    /// `lp_gadget_new()`: creates and publishes a gadget holding one reference,
    /// for RUN's NEW_PUT, which has nothing to copy out in between.
    pub(crate) fn create(gadgets: &Gadgets, parent: Option<&Gadget>) -> Result<GadgetRef> {
        let g = Self::alloc(gadgets, parent)?;
        g.publish();
        Ok(g)
    }

    /// `lp_gadget_alloc()`: creates an unpublished gadget holding one reference.
    ///
    /// Takes a reference to `parent` for the new gadget, links it on its owner's
    /// list under the owner's lock (flavors with a child list), and registers it
    /// for TRYGET last, once it is complete; every step that can fail is here.
    /// Unpublished, it is invisible: LOOKUP and TRYGET skip it, and nothing counts
    /// it but [`LIVE_GADGETS`]. C reserves its registry slot (`xa_reserve()`) and
    /// links it only in `lp_gadget_publish()`; here the registry cannot reserve
    /// (`kernel::xarray` has no `xa_reserve()`) and a push on the list may
    /// allocate, so both happen now and the `published` flag hides them.
    /// Dropping the reference unpublished is `lp_gadget_discard()`.
    ///
    /// Counted against the arena's limit first, as jbd2 counts credits: add, and
    /// undo over the limit (`EDQUOT`), so that concurrent NEWs never exceed it.
    /// Every allocation userspace makes is charged to its memory cgroup
    /// (`GFP_KERNEL_ACCOUNT`).
    pub(crate) fn alloc(gadgets: &Gadgets, parent: Option<&Gadget>) -> Result<GadgetRef> {
        if gadgets.nr_gadgets.fetch_add(1, Relaxed) >= gadgets.max_gadgets.load(Relaxed) {
            gadgets.nr_gadgets.fetch_sub(1, Relaxed);
            return Err(EDQUOT);
        }
        let flavor = gadgets.flavor();
        let id = gadgets.next_id.fetch_add(1, Full) + 1;
        let init = pin_init!(Self {
            count: LockedBy::new(&gadgets.lock, 1),
            refcnt: Refcount::new(1),
            parent: parent.map(ARef::from),
            gadgets: NonNull::from(gadgets),
            id,
            kids <- Kids::new(),
            nr_children: Atomic::new(0),
            published: Atomic::new(false),
            rcu: RcuHead::new(),
        });

        let allocated = if flavor == uapi::LP_FLAVOR_LOCKLESS {
            Arc::pin_init(init, GFP_KERNEL_ACCOUNT).map(|a| Arc::into_raw(a).cast_mut())
        } else {
            KBox::pin_init(init, GFP_KERNEL_ACCOUNT).map(|boxed| {
                // SAFETY: The gadget is never moved out of its allocation: the put
                // that frees it rebuilds the pinned box and drops it in place.
                KBox::into_raw(unsafe { Pin::into_inner_unchecked(boxed) })
            })
        };
        // From here on the gadget exists, and its drop uncounts it.
        let raw = allocated.inspect_err(|_| {
            gadgets.nr_gadgets.fetch_sub(1, Relaxed);
        })?;
        // INVARIANT: The allocation's provenance, for `GadgetPtr::allocation()`.
        raw.expose_provenance();
        // SAFETY: `Arc::into_raw` and `KBox::into_raw` never return null.
        let ptr = GadgetPtr(unsafe { NonNull::new_unchecked(raw) });
        // SAFETY: The initial count of one, `Arc`'s or the gadget's own, is this
        // reference's.
        let g = unsafe { ARef::from_raw(ptr.0) };

        LIVE_GADGETS.fetch_add(1, Relaxed);
        if flavor_has_kids(flavor) {
            // On failure, dropping `g` puts it: it is on no list, not registered.
            g.kids_add(flavor, ptr)?;
        }

        // Publish for TRYGET last, once `g` is complete: the registry lock orders
        // these stores before any TRYGET that finds `g`.
        gadgets
            .registry
            .lock()
            .store(index(g.id)?, ptr, GFP_KERNEL_ACCOUNT)?;
        Ok(g)
    }

    /// `lp_gadget_publish()`: makes a gadget from [`Gadget::alloc`] visible to
    /// LOOKUP and TRYGET and counts it; cannot fail. `Release`, paired with their
    /// `Acquire` load (under the list or registry lock): who sees the flag also
    /// sees the counts.
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

    /// Links the new gadget, whose pointer is `me`, on its owner's list, under
    /// the owner's lock.
    fn kids_add(&self, flavor: u32, me: GadgetPtr) -> Result {
        let owner = self.owner();
        match flavor {
            uapi::LP_FLAVOR_KREF_LOCK => list_add_spinlocked(&owner.lock, me),
            uapi::LP_FLAVOR_KREF_RWSEM => Ok(owner.rwsem.write().push(me, GFP_KERNEL_ACCOUNT)?),
            uapi::LP_FLAVOR_WEAK_CMPXCHG | uapi::LP_FLAVOR_KREF_MUTEX => {
                Ok(owner.mutex.lock().push(me, GFP_KERNEL_ACCOUNT)?)
            }
            other => {
                unknown_flavor(other);
                Err(EINVAL)
            }
        }
    }

    /// `lp_gadget_get()`: takes one more reference; the caller already holds one.
    /// [`AlwaysRefCounted::inc_ref`], so `ARef::clone` is a get.
    ///
    /// LOCKED: article v1, `refcnt++` under the arena mutex. Every other flavor:
    /// article v2, a bare increment without acquire or release semantics
    /// (`Arc`'s clone, `Refcount::inc`): the caller's own reference keeps the
    /// gadget alive and was itself obtained with the ordering that mattered.
    #[inline]
    fn get(&self) {
        match self.flavor() {
            uapi::LP_FLAVOR_LOCKED => self.get_locked(),
            uapi::LP_FLAVOR_LOCKLESS => {
                // SAFETY: A LOCKLESS gadget lives in an `Arc` (type invariant), whose
                // pointer `allocation()` rebuilds; the caller's reference keeps the
                // count above zero while the borrow lives, and no `UniqueArc` of a
                // gadget is ever made.
                let arc = unsafe { ArcBorrow::from_raw(GadgetPtr::of(self).allocation()) };
                // The new count (`refcount_inc()`) goes to the caller's new `ARef`.
                core::mem::forget(Arc::from(arc));
            }
            uapi::LP_FLAVOR_WEAK_CMPXCHG
            | uapi::LP_FLAVOR_KREF_MUTEX
            | uapi::LP_FLAVOR_KREF_LOCK
            | uapi::LP_FLAVOR_KREF_RWSEM => self.refcnt.inc(),
            other => {
                unknown_flavor(other);
                self.refcnt.inc();
            }
        }
    }

    /// LOCKED's get, out of line: its `LockedBy` check and overflow check need a
    /// stack frame (their panic messages) that the other flavors' gets need not
    /// set up.
    #[inline(never)]
    fn get_locked(&self) {
        let mut state = self.gadgets().lock.lock();
        *self.count.access_mut(&mut state) += 1;
    }

    /// The gadget's count (`STAT`): a snapshot, maybe stale by the time it is used.
    pub(crate) fn refcount(&self) -> u32 {
        match self.flavor() {
            uapi::LP_FLAVOR_LOCKED => *self.count.access(&self.gadgets().lock.lock()),
            uapi::LP_FLAVOR_LOCKLESS => {
                let ptr = GadgetPtr::of(self).allocation();
                // SAFETY: A LOCKLESS gadget lives in an `Arc` (type invariant), whose
                // pointer `allocation()` rebuilds. The caller's reference keeps the
                // count above zero; the `Arc` made here owns none of it and is never
                // dropped, as in `From<ArcBorrow> for Arc`.
                let arc = ManuallyDrop::new(unsafe { Arc::from_raw(ptr) });
                Arc::count(&arc)
            }
            // `refcount_read()`, the value C's `kref_read()`/`atomic_read()` returns.
            uapi::LP_FLAVOR_WEAK_CMPXCHG
            | uapi::LP_FLAVOR_KREF_MUTEX
            | uapi::LP_FLAVOR_KREF_LOCK
            | uapi::LP_FLAVOR_KREF_RWSEM => self.refcnt.read(),
            other => {
                unknown_flavor(other);
                self.refcnt.read()
            }
        }
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
    pub(crate) fn lookup(&self, id: u64) -> Result<GadgetRef> {
        let found = match self.flavor() {
            uapi::LP_FLAVOR_LOCKED | uapi::LP_FLAVOR_LOCKLESS => return Err(EOPNOTSUPP),
            uapi::LP_FLAVOR_KREF_LOCK => upgrade(&self.kids.lock.lock(), id),
            uapi::LP_FLAVOR_KREF_RWSEM => upgrade(&self.kids.rwsem.read(), id),
            uapi::LP_FLAVOR_WEAK_CMPXCHG | uapi::LP_FLAVOR_KREF_MUTEX => {
                upgrade(&self.kids.mutex.lock(), id)
            }
            other => {
                unknown_flavor(other);
                return Err(EOPNOTSUPP);
            }
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
    /// lock, a TRYGET holding it may have found the gadget and be reading its count
    /// through a `&Gadget` of its own. Only once the gadget is out of the registry
    /// can the drop borrow it mutably.
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

/// Upgrades the weak reference to child `id` on a list whose lock the caller holds.
fn upgrade(list: &KVec<GadgetPtr>, id: u64) -> Option<GadgetRef> {
    let p = *list.iter().find(|p| {
        // SAFETY: The caller holds `list`'s lock, and the borrow ends before it
        // drops it: a gadget on a weak list leaves it under that lock before its
        // release path frees it (or mutably borrows it, in its drop).
        let g = unsafe { p.as_ref() };
        g.id == id && g.is_published()
    })?;
    // The fence failed if a listed gadget has count 0: `refcount_inc()` WARNs on
    // an increment from zero, where C says WARN_ON_ONCE() before `atomic_inc()`.
    // SAFETY: As in the search above.
    let refcnt = unsafe { p.refcnt() };
    refcnt.inc();
    // SAFETY: Listed gadgets are counted by `refcnt` (never LOCKED nor LOCKLESS
    // ones); we just took the count the new `ARef` owns.
    Some(unsafe { ARef::from_raw(p.0) })
}

/// An id as an XArray index.
fn index(id: u64) -> Result<usize> {
    usize::try_from(id).map_err(|_| ENOENT)
}

/// `lp_gadget_tryget()`: TRYGET, [`tryget_any`] then [`published`].
pub(crate) fn tryget(gadgets: &Gadgets, id: u64) -> Result<GadgetRef> {
    published(tryget_any(gadgets, id)?)
}

/// `lp_gadget_tryget()` but the test of [`published`], which may put the gadget
/// (a put may sleep): TRYGET_ATOMIC_PUT calls this in atomic context, and
/// [`published`] after. A gadget returned may be unpublished only in LOCKLESS
/// and in RCU mode, where the count is taken before the flag can be read.
///
/// `kvm_debugfs_open()`: the registry entry is a weak reference that no put
/// fences, so the upgrade must fail once the count reached zero:
/// `Refcount::inc_not_zero()` (LOCKLESS: `Arc::from_raw_inc_not_zero()`; LOCKED:
/// a test of the count under the arena mutex).
///
/// LOCK mode: under the registry's own lock, which the release path takes to
/// unregister before it frees. One lock: LOCKED takes its count's mutex too,
/// first, as a mutex cannot nest in the XArray's spinlock. The flavor is fixed
/// once a gadget exists; one read before the arena's first NEW may be stale, so
/// a LOCKED gadget found without the mutex held sends the lookup round again.
///
/// RCU mode ([`tryget_rcu`]): no lock at all. The mode is read inside the RCU
/// read lock (see `lp_configure()`).
///
/// Returns `ENOENT` if no gadget has `id` or its count reached zero.
pub(crate) fn tryget_any(gadgets: &Gadgets, id: u64) -> Result<GadgetRef> {
    let i = index(id)?;
    let rcu = rcu::read_lock();
    if gadgets.registry_mode() == uapi::LP_REGISTRY_RCU {
        let g = tryget_rcu(gadgets, &rcu, i);
        drop(rcu);
        return g.ok_or(ENOENT);
    }
    drop(rcu);
    loop {
        let mut state = (gadgets.flavor() == uapi::LP_FLAVOR_LOCKED).then(|| gadgets.lock.lock());
        let registry = gadgets.registry.lock();
        let found = registry.get(i).ok_or(ENOENT)?;
        let got = match gadgets.flavor() {
            uapi::LP_FLAVOR_LOCKED => {
                let Some(state) = state.as_mut() else {
                    continue;
                };
                // SAFETY: We found the gadget under the registry lock, which we hold.
                let g = unsafe { found.as_ref() };
                if !g.is_published() {
                    return Err(ENOENT);
                }
                let count = g.count.access_mut(state);
                if *count != 0 {
                    *count += 1;
                }
                *count > 1
            }
            uapi::LP_FLAVOR_LOCKLESS => {
                // SAFETY: A LOCKLESS gadget lives in an `Arc`, whose pointer
                // `allocation()` rebuilds; the allocation is not freed while we hold
                // the registry lock, under which we found it (see `Found`); no
                // `UniqueArc` of a gadget is ever made (LOCKLESS releases with
                // `Arc::drop_with`).
                let arc = unsafe { Arc::from_raw_inc_not_zero(found.allocation()) };
                // The count `from_raw_inc_not_zero` took goes to the `ARef` below.
                arc.map(core::mem::forget).is_some()
            }
            flavor => {
                unknown_flavor(flavor);
                // SAFETY: As in LOCKED.
                let g = unsafe { found.as_ref() };
                g.is_published() && g.refcnt.inc_not_zero()
            }
        };
        // SAFETY: If `got`, we took the count the new `ARef` owns.
        let got = got.then(|| unsafe { found.counted() });
        drop(registry);
        drop(state);
        return got.ok_or(ENOENT);
    }
}

/// [`tryget`] in RCU mode: the lookup ([`XArray::load`]) and the increment
/// inside the RCU read lock, no lock taken. The release path unregisters a
/// gadget under the registry lock, then frees it only after a grace period
/// ([`Arc::drop_with_rcu`], [`KBox::drop_rcu`]), so a gadget found here stays
/// allocated until `rcu` is dropped, its count at zero if its release has
/// begun: the increment fails then, as it does under the lock. What is found
/// borrows `rcu` ([`Found`]): the increment cannot move past the end of the
/// critical section. Only the count is touched before the increment succeeded:
/// the gadget itself may be mid-drop, lent out as `Pin<&mut Gadget>` by the
/// release path. LOCKED never gets here (`lp_configure()` refuses it an RCU
/// registry). Returns the gadget with the count taken, not yet tested for
/// [`published`].
fn tryget_rcu(gadgets: &Gadgets, rcu: &rcu::Guard, i: usize) -> Option<GadgetRef> {
    let found = gadgets.registry.load(rcu, i)?;
    let got = if gadgets.flavor() == uapi::LP_FLAVOR_LOCKLESS {
        // SAFETY: A LOCKLESS gadget lives in an `Arc`, whose pointer
        // `allocation()` rebuilds. The allocation outlives `rcu`: the release path
        // frees it with `Arc::drop_with_rcu`, after the gadget left the registry in
        // which we found it, in this read-side critical section. No `UniqueArc` of a
        // gadget is ever made.
        let arc = unsafe { Arc::from_raw_inc_not_zero(found.allocation()) };
        // The count `from_raw_inc_not_zero` took goes to the `ARef` below.
        arc.map(core::mem::forget).is_some()
    } else {
        // SAFETY: We found the gadget in this read-side critical section, in a
        // registry whose RCU mode our caller read inside it.
        unsafe { found.refcnt() }.inc_not_zero()
    };
    // SAFETY: If `got`, we took the count the new `ARef` owns.
    got.then(|| unsafe { found.counted() })
}

/// The gadget a TRYGET took a count of, unless it is not published yet, tested
/// only once we hold the count (before, the gadget may be lent out as
/// `Pin<&mut Gadget>` by its release path). An unpublished gadget's count is
/// dropped again, outside any lock or atomic context: its NEW holds a
/// reference of its own, or, if that NEW failed and let go first, this put
/// releases it.
pub(crate) fn published(g: GadgetRef) -> Result<GadgetRef> {
    if g.is_published() {
        Ok(g)
    } else {
        Err(ENOENT)
    }
}

#[pinned_drop]
impl PinnedDrop for Gadget {
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
/// [`put_ptr`] drops it, after the unlock. A root needs none: its list is the
/// arena's, which outlives every put. The article's cmpxchg loop
/// ([`put_weak_cmpxchg`]) needs none either: it unlocks before it decrements.
/// `spin_unlock()` (KREF_LOCK) is one release store and touches the lock no more
/// after it, but for `PREEMPT_RT`, where a spinlock sleeps.
///
/// Returns the pin (`None` for a root) and the owner's list, borrowed from the
/// pin or the arena, not from `g`.
///
/// # Safety
///
/// The caller owns a count of `g`.
#[inline]
unsafe fn owner_pin<'a>(g: GadgetPtr, pin: &'a mut Option<GadgetRef>) -> &'a Kids {
    // SAFETY: The caller owns a count, so `g` is allocated and not mutably
    // borrowed; the borrow ends in this function, before any decrement.
    let gr = unsafe { g.as_ref() };
    let gadgets = gr.gadgets;
    *pin = gr.parent.clone();
    let pin: &'a Option<GadgetRef> = pin;
    match pin {
        Some(p) => &p.kids,
        // SAFETY: The arena's gadgets outlive their gadgets (`Gadget` invariant).
        None => unsafe { &gadgets.as_ref().roots },
    }
}

/// `lp_put_locked()`: article v1 put, `refcnt--` under the arena mutex.
///
/// The mutex orders every decrement; the one that sees 1 -> 0 is the last.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over.
#[inline]
unsafe fn put_locked(g: GadgetPtr) -> bool {
    // SAFETY: We own a count; `gr` is last used before the unlock, which is
    // when another put may free the gadget.
    let gr = unsafe { g.as_ref() };
    // SAFETY: The arena's gadgets outlive their gadgets (`Gadget` invariant).
    let gadgets = unsafe { gr.gadgets.as_ref() };
    let mut state = gadgets.lock.lock();
    let count = gr.count.access_mut(&mut state);
    *count -= 1;
    *count == 0
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
/// This is the one place the count is driven through `Refcount::as_atomic()`,
/// which `Refcount` reserves for what `refcount.h` has no API for. Here the
/// loop itself is the pattern under study; its packaged form is KREF_MUTEX's
/// `Refcount::dec_and_lock()`. Nothing of `refcount_t` is lost: the loop never
/// goes below zero, and the count, one per handle, child and in-flight
/// reference, stays far from saturation.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over.
#[inline]
unsafe fn put_weak_cmpxchg(g: GadgetPtr) -> bool {
    // SAFETY: We own a count; `gr` is last used before the first decrement.
    let gr = unsafe { g.as_ref() };
    let owner = gr.owner();
    // SAFETY: We own a count, and give it up only in a cmpxchg below, after
    // which `count` is not used again.
    let count = unsafe { g.refcnt() }.as_atomic();
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
/// The caller owns a count of `g` and hands it over; it drops `pin` after this
/// returns.
#[inline]
unsafe fn put_kref_mutex(g: GadgetPtr, pin: &mut Option<GadgetRef>) -> bool {
    // SAFETY: We own a count, and give it up only in this call.
    let refcnt = unsafe { g.refcnt() };
    if refcnt.dec_not_one() {
        return false;
    }
    // SAFETY: We still own our count.
    let owner = unsafe { owner_pin(g, pin) };
    // `owner` is the pin's or the arena's, not `g`'s.
    if let Some(mut list) = refcnt.dec_and_lock(&owner.mutex) {
        list_remove(&mut list, g);
        return true;
    }
    false
}

/// `lp_put_kref_lock()`: `kref_put_lock()`, the same with the owner's spinlock
/// (`refcount_dec_and_lock()`). No pin: `spin_unlock()` is a single release
/// store, the lock's last access; the `&SpinLock` lent to `dec_and_lock()`
/// outlives that store only as `Arc::drop`'s `&Refcount` outlives its decrement,
/// a shared borrow of interior-mutable memory. But under `PREEMPT_RT` a spinlock
/// is an `rt_mutex`, whose unlock may touch it after releasing it: the owner is
/// pinned there as in KREF_MUTEX.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over; it drops `pin` after this
/// returns.
#[inline]
unsafe fn put_kref_lock(g: GadgetPtr, pin: &mut Option<GadgetRef>) -> bool {
    // SAFETY: We own a count, and give it up only in this call.
    let refcnt = unsafe { g.refcnt() };
    let owner = if cfg!(CONFIG_PREEMPT_RT) {
        if refcnt.dec_not_one() {
            return false;
        }
        // SAFETY: We still own our count.
        unsafe { owner_pin(g, pin) }
    } else {
        // SAFETY: We own a count; the borrow of `g` ends in this statement. The
        // owner is the parent, which `g` keeps alive until its final put, or the
        // arena.
        unsafe { g.as_ref() }.owner()
    };
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
/// The caller owns a count of `g` and hands it over; it drops `pin` after this
/// returns.
#[inline]
unsafe fn put_kref_rwsem(g: GadgetPtr, pin: &mut Option<GadgetRef>) -> bool {
    // SAFETY: We own a count, and give it up only in this call.
    let refcnt = unsafe { g.refcnt() };
    if refcnt.dec_not_one() {
        return false;
    }
    // SAFETY: We still own our count.
    let owner = unsafe { owner_pin(g, pin) };
    let mut list = owner.rwsem.write();
    if !refcnt.dec_and_test() {
        return false;
    }
    list_remove(&mut list, g);
    true
}

/// `lp_put_lockless()`: article v2 put, the last `Arc` reference's release.
///
/// `Arc` decrements with `refcount_dec_and_test()`: release ordering before the
/// decrement and acquire after the last one, which is what the article asks of
/// `atomic_fetch_dec()` (C uses its fully ordered form): every earlier put
/// happens before the releaser reads the parent and frees the gadget.
/// `Arc::drop_with` leaves the count at zero while it lends us the gadget, so
/// TRYGET's `Arc::from_raw_inc_not_zero` cannot revive it.
///
/// The release path runs in the closure, before the `Arc` frees the gadget.
/// `drop_with` lends it as `Pin<&mut Gadget>`, which is sound only if no other
/// thread holds a reference into the gadget meanwhile: it is on no list
/// (LOCKLESS keeps none), no handle holds it (its count is zero), and a TRYGET
/// that finds it in the registry touches only the `Arc`'s count, beside the
/// gadget, never the gadget itself: `tryget()` makes no `&Gadget` in LOCKLESS
/// before its increment succeeded, and patch 0002's
/// `Arc::from_raw_inc_not_zero()` reaches the count through raw projections,
/// without a reference to the gadget or its `ArcInner`.
///
/// In an RCU-mode arena the `Arc` frees with [`Arc::drop_with_rcu`]: the gadget
/// is dropped at once, the memory, count included, after a grace period, for
/// the TRYGETs that found it in the registry without a lock. Which of the two
/// must be known before the decrement: the mode is read first, from the arena.
///
/// Returns the parent reference if this was the last reference (the gadget is
/// freed), `None` inside `Some` for a root, `None` if the gadget lives on.
///
/// # Safety
///
/// The caller owns a count of LOCKLESS gadget `g` and hands it over.
#[inline]
unsafe fn put_lockless(g: GadgetPtr) -> Option<Option<GadgetRef>> {
    // SAFETY: We own a count; the borrow ends in this statement.
    let rcu = unsafe { g.as_ref() }.gadgets().registry_mode() == uapi::LP_REGISTRY_RCU;
    // SAFETY: A LOCKLESS gadget lives in an `Arc` whose pointer `allocation()`
    // rebuilds; the count the caller hands over is this `Arc`'s.
    let a = unsafe { Arc::from_raw(g.allocation()) };
    let mut parent = None;
    let release = |mut g: Pin<&mut Gadget>| {
        g.as_ref().get_ref().release();
        parent = g.as_mut().project().parent.take();
    };
    let freed = if rcu {
        Arc::drop_with_rcu(a, release)
    } else {
        Arc::drop_with(a, release)
    };
    freed.then_some(parent)
}

/// One put in the arena's flavor (`lp_put_one()`, and `lp_gadget_free()` for the
/// gadget it released). Returns the parent reference if this put released the
/// gadget (`None` inside `Some` for a root), `None` if the gadget lives on. A
/// slow put may leave a reference to the parent in `pin`, for the caller to drop.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over.
#[inline]
unsafe fn put_one(g: GadgetPtr, pin: &mut Option<GadgetRef>) -> Option<Option<GadgetRef>> {
    // SAFETY: We own a count; the borrow ends in this statement.
    let flavor = unsafe { g.as_ref() }.flavor();
    // SAFETY: For each: we own a count and hand it over.
    let last = unsafe {
        match flavor {
            uapi::LP_FLAVOR_LOCKED => put_locked(g),
            uapi::LP_FLAVOR_LOCKLESS => return put_lockless(g),
            uapi::LP_FLAVOR_WEAK_CMPXCHG => put_weak_cmpxchg(g),
            uapi::LP_FLAVOR_KREF_MUTEX => put_kref_mutex(g, pin),
            uapi::LP_FLAVOR_KREF_LOCK => put_kref_lock(g, pin),
            uapi::LP_FLAVOR_KREF_RWSEM => put_kref_rwsem(g, pin),
            other => {
                unknown_flavor(other);
                false
            }
        }
    };
    if !last {
        return None;
    }
    // This was the last reference: the gadget is off every weak list, and no
    // other thread can take a count of it any more but through the registry.
    // SAFETY: We released the gadget, so nobody else frees it; the borrow ends
    // before the box is rebuilt.
    let gr = unsafe { g.as_ref() };
    gr.release();
    let rcu = gr.gadgets().registry_mode() == uapi::LP_REGISTRY_RCU;
    // SAFETY: The gadget lives in a pinned `KBox` (not LOCKLESS), whose pointer
    // `allocation()` rebuilds. `release()` took it out of the registry, the last
    // place another thread could find it, under the registry lock: no other
    // reference to it exists, so the box may borrow it mutably to drop it (in
    // place, it was pinned) and free it. In RCU mode a TRYGET that found it
    // before may still hold a borrow of its `refcnt` (see `GadgetPtr::refcnt`):
    // a `Refcount`, an `Opaque`, over which the box's `&mut Gadget` claims no
    // uniqueness, and which `KBox::drop_rcu` keeps allocated for a grace period.
    let mut b = unsafe { Pin::new_unchecked(KBox::from_raw(g.allocation())) };
    let parent = b.as_mut().project().parent.take();
    if rcu {
        KBox::drop_rcu(b);
    }
    Some(parent)
}

/// `lp_gadget_put()`: drops one reference, releasing what reaches zero.
/// [`AlwaysRefCounted::dec_ref`], and [`put`] for a count of what it released.
///
/// Releasing a gadget drops its reference to the parent, which may cascade up
/// the tree. The cascade is a loop, not a recursion: constant stack for any
/// depth, and the pin a slow put took on the owner ([`owner_pin`]) is dropped
/// in the same loop, after that put's unlock. Ordering is that of the flavor's
/// put.
///
/// Returns the number of gadgets this put released.
///
/// # Safety
///
/// The caller owns a count of `g` and hands it over.
unsafe fn put_ptr(mut g: GadgetPtr) -> u32 {
    let mut released = 0;
    loop {
        let mut pin = None;
        // SAFETY: We own a count of `g` (the caller's, then the parent reference
        // the released child held, or the pin) and hand it over.
        let next = match unsafe { put_one(g, &mut pin) } {
            // Not the last: drop the owner's pin if it took one.
            None => pin,
            Some(parent) => {
                released += 1;
                if let Some(p) = pin {
                    // `parent` is a reference to the same gadget: not its last.
                    p.refcnt.dec();
                    core::mem::forget(p);
                }
                parent
            }
        };
        let Some(next) = next else {
            return released;
        };
        g = GadgetPtr(ARef::into_raw(next));
    }
}

/// Drops `g`, as its drop would, telling how many gadgets that put released
/// (PUT's answer).
pub(crate) fn put(g: GadgetRef) -> u32 {
    // SAFETY: `into_raw` hands over the count `g` owned.
    unsafe { put_ptr(GadgetPtr(ARef::into_raw(g))) }
}

/// `lp_gadget_get_refcount()`: RUN GET_PUT_REFCOUNT's get: LOCKLESS's
/// `refcount_inc()` ([`Arc::from`] an [`ArcBorrow`]) without the flavor
/// dispatch of [`Gadget::get`], the shape of C's row.
///
/// # Safety
///
/// `g` is a LOCKLESS gadget: it lives in an `Arc`. (Any other lives in a
/// `KBox`, where no `Arc` count lies before it.)
#[inline]
pub(crate) unsafe fn get_refcount(g: &Gadget) -> GadgetRef {
    // SAFETY: `g` lives in an `Arc` (the caller's promise), whose pointer
    // `allocation()` rebuilds; the caller's reference keeps the count above zero
    // while the borrow lives, and no `UniqueArc` of a gadget is ever made.
    let arc = unsafe { ArcBorrow::from_raw(GadgetPtr::of(g).allocation()) };
    core::mem::forget(Arc::from(arc));
    // SAFETY: The count just taken (`refcount_inc()`) goes to the new `ARef`.
    unsafe { ARef::from_raw(NonNull::from(g)) }
}

/// `lp_gadget_put_refcount()`: RUN GET_PUT_REFCOUNT's put: LOCKLESS's
/// [`Arc::drop_with`] (`refcount_dec_and_test()`) without the flavor dispatch
/// of [`put`]; a released gadget's parent is put with [`put`]. Returns the
/// gadgets released.
///
/// # Safety
///
/// `g` is a LOCKLESS gadget, as for [`get_refcount`].
#[inline]
pub(crate) unsafe fn put_refcount(g: GadgetRef) -> u32 {
    // SAFETY: `g` lives in an `Arc` (the caller's promise); `into_raw` hands over
    // the count `g` owned.
    match unsafe { put_lockless(GadgetPtr(ARef::into_raw(g))) } {
        None => 0,
        Some(None) => 1,
        Some(Some(parent)) => 1 + put(parent),
    }
}
