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
//! lock.
//!
//! Where the C module uses one `struct lp_gadget` with a union of counters,
//! this one uses the kernel's own types: LOCKLESS keeps its gadgets in
//! [`Arc`] (whose count is a `refcount_t`), every other flavor in a `KBox`
//! with an intrusive [`Refcount`] (or, in LOCKED, a count that only the
//! arena's mutex may touch, a [`LockedBy`]). [`GadgetRef`] is one strong
//! reference in either form; dropping it is a put.
//!
//! Release never recurses: [`GadgetRef::put`] drops the parent's reference in
//! a loop, so a chain of any depth is freed in constant stack.

use core::{cell::UnsafeCell, mem::ManuallyDrop, ops::Deref, pin::Pin, ptr::NonNull};
use kernel::{
    ffi::c_void,
    new_mutex, new_spinlock,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        Arc, LockedBy, Mutex, Refcount, SpinLock,
    },
    types::ForeignOwnable,
};

use crate::{
    arena::{Arena, ArenaState},
    rwsem::{new_rwsem, RwSem},
    uapi,
};

/// Gadgets alive in the whole module, all arenas together (`IDENTIFY.live_gadgets`):
/// counted from the allocation in [`Gadget::create`] until the gadget's drop, the
/// last step before its memory is freed. `Relaxed`: a statistic that only module
/// exit and a quiescent IDENTIFY read.
pub(crate) static LIVE_GADGETS: Atomic<i64> = Atomic::new(0);

/// A pointer to a gadget that carries its allocation's provenance: what the
/// weak child lists and the registry store, and what a [`GadgetRef::Counted`]
/// owns one count of.
///
/// It keeps nothing alive, and it is not a count (weak or strong): it is the
/// gadget's address as its allocator handed it out, so that a count taken
/// through it may later free the gadget through it ([`KBox::from_raw`]), or
/// rebuild an `Arc` from it ([`Arc::from_raw_inc_not_zero`]). Only
/// [`GadgetPtr::as_ref`] dereferences it.
///
/// # Invariants
///
/// The pointer is a copy of the one [`Gadget::create`] got for this gadget
/// from [`KBox::into_raw`] (every flavor but LOCKLESS) or [`Arc::as_ptr`]
/// (LOCKLESS), never one derived from a reference to the gadget.
#[derive(Clone, Copy)]
pub(crate) struct GadgetPtr(NonNull<Gadget>);

// SAFETY: A `GadgetPtr` is an address; dereferencing it is `unsafe`
// ([`GadgetPtr::as_ref`]) and allowed by a lock or a count, whatever the thread.
unsafe impl Send for GadgetPtr {}
// SAFETY: Through `&GadgetPtr` only the address can be copied.
unsafe impl Sync for GadgetPtr {}

impl GadgetPtr {
    /// The pointer `KBox::into_raw` returns for a new, pinned gadget, which
    /// from now on is freed only by [`put_counted`].
    fn from_box(boxed: Pin<KBox<Gadget>>) -> Self {
        // SAFETY: The gadget is never moved out of its allocation: `put_counted()`
        // rebuilds the pinned box from this pointer and drops it in place.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(boxed) });
        // SAFETY: `KBox::into_raw` never returns null.
        // INVARIANT: The pointer `KBox::into_raw` returned, unchanged.
        Self(unsafe { NonNull::new_unchecked(raw) })
    }

    /// The pointer `Arc::as_ptr` returns for a LOCKLESS gadget.
    fn from_arc(arc: &Arc<Gadget>) -> Self {
        let raw = Arc::as_ptr(arc).cast_mut();
        // SAFETY: `Arc::as_ptr` points into the `Arc`'s allocation: not null.
        // INVARIANT: The pointer `Arc::as_ptr` returned, unchanged.
        Self(unsafe { NonNull::new_unchecked(raw) })
    }

    /// The raw pointer, with its provenance, for `KBox::from_raw` and
    /// `Arc::from_raw_inc_not_zero`.
    fn as_ptr(self) -> *mut Gadget {
        self.0.as_ptr()
    }

    /// Whether this is the address of `g`.
    fn is(self, g: &Gadget) -> bool {
        core::ptr::eq(self.0.as_ptr(), g)
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
    unsafe fn as_ref<'a>(self) -> &'a Gadget {
        // SAFETY: The pointer is valid for reads (the caller's guarantee that the
        // gadget is allocated) and came from its allocation (type invariant);
        // the caller guarantees that no `&mut Gadget` exists for `'a`.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: `into_foreign` hands the gadget's address to the XArray unchanged, and
// `from_foreign`/`borrow` rebuild the same `GadgetPtr` from it: the XArray stores
// and returns the pointer value it is given, so the copy keeps its provenance.
// Gadgets are aligned to `Gadget`'s alignment (at least 8, it holds pointers and
// `u64`s). A `GadgetPtr` owns nothing, so one rebuilt and dropped by the XArray
// frees nothing.
unsafe impl ForeignOwnable for GadgetPtr {
    const FOREIGN_ALIGN: usize = core::mem::align_of::<Gadget>();

    type Borrowed<'a> = GadgetPtr;
    type BorrowedMut<'a> = GadgetPtr;

    fn into_foreign(self) -> *mut c_void {
        self.0.as_ptr().cast()
    }

    unsafe fn from_foreign(ptr: *mut c_void) -> Self {
        // SAFETY: `ptr` came from `into_foreign`, so it is a non-null gadget pointer.
        // INVARIANT: `into_foreign` returned the pointer of a `GadgetPtr` unchanged.
        GadgetPtr(unsafe { NonNull::new_unchecked(ptr.cast()) })
    }

    unsafe fn borrow<'a>(ptr: *mut c_void) -> Self::Borrowed<'a> {
        // SAFETY: As in `from_foreign`.
        unsafe { Self::from_foreign(ptr) }
    }

    unsafe fn borrow_mut<'a>(ptr: *mut c_void) -> Self::BorrowedMut<'a> {
        // SAFETY: As in `from_foreign`.
        unsafe { Self::from_foreign(ptr) }
    }
}

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

/// Whether `flavor` keeps weak child lists (LOOKUP works).
pub(crate) fn flavor_has_kids(flavor: u32) -> bool {
    flavor != uapi::LP_FLAVOR_LOCKED && flavor != uapi::LP_FLAVOR_LOCKLESS
}

/// Takes `g` off a locked list (`list_del()`).
fn list_remove(list: &mut KVec<GadgetPtr>, g: &Gadget) {
    if let Some(i) = list.iter().position(|x| x.is(g)) {
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

        let mut bigger = KVec::with_capacity(want, GFP_KERNEL)?;
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
/// - `arena` points to the arena that created the gadget, which outlives it:
///   `MiscDevice::release` puts every handle the arena holds, through `&Arena`,
///   before the arena is dropped, and nothing else holds a reference across an
///   ioctl. The pointer comes from a shared borrow of the arena and is only read
///   through.
/// - `parent` is only written by the put that released the gadget
///   ([`Gadget::release`]), once its count is zero and it is off every weak list
///   and out of the registry: no other thread can reach it then.
#[pin_data(PinnedDrop)]
pub(crate) struct Gadget {
    /// LOCKED: article v1's count, serialised by the arena's mutex.
    count: LockedBy<u32, ArenaState>,
    /// WEAK_CMPXCHG and KREF_*: the intrusive count (LOCKLESS: `Arc`'s own).
    refcnt: Refcount,
    /// Strong reference to the parent, `None` for a root.
    parent: UnsafeCell<Option<GadgetRef>>,
    /// The arena the gadget lives in.
    arena: NonNull<Arena>,
    /// Registry key, unique in the arena, never reused.
    pub(crate) id: u64,
    /// This gadget's children (weak references).
    #[pin]
    kids: Kids,
    /// Live children; each holds a reference to this gadget.
    nr_children: Atomic<i32>,
    /// [`GadgetRef::publish`] ran: until then LOOKUP and TRYGET act as if the
    /// gadget were not on its list nor in the registry, and it is not counted.
    published: Atomic<bool>,
}

// SAFETY: Every field is thread-safe but the raw ones: `arena` is only read (the
// arena is `Sync`), and `parent` is only written by the releaser, alone (type
// invariants).
unsafe impl Send for Gadget {}
// SAFETY: As above.
unsafe impl Sync for Gadget {}

impl Gadget {
    fn arena(&self) -> &Arena {
        // SAFETY: The arena outlives its gadgets (type invariant).
        unsafe { self.arena.as_ref() }
    }

    fn flavor(&self) -> u32 {
        self.arena().flavor()
    }

    fn parent(&self) -> Option<&GadgetRef> {
        // SAFETY: Only the releaser writes `parent` (type invariant); the caller
        // holds a reference, so the gadget is not being released.
        unsafe { (*self.parent.get()).as_ref() }
    }

    /// The list the gadget sits on: its parent's children, or the arena's roots.
    fn owner(&self) -> &Kids {
        match self.parent() {
            Some(p) => &p.kids,
            None => &self.arena().roots,
        }
    }

    /// The parent's id, 0 for a root (`STAT`).
    pub(crate) fn parent_id(&self) -> u64 {
        self.parent().map_or(0, |p| p.id)
    }

    /// Live children (`STAT`).
    pub(crate) fn children(&self) -> u64 {
        u64::try_from(self.nr_children.load(Relaxed)).unwrap_or(0)
    }

    /// `lp_gadget_new()`: creates and publishes a gadget holding one reference,
    /// for RUN's NEW_PUT, which has nothing to copy out in between.
    pub(crate) fn create(arena: &Arena, parent: Option<&GadgetRef>) -> Result<GadgetRef> {
        let g = Self::alloc(arena, parent)?;
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
    pub(crate) fn alloc(arena: &Arena, parent: Option<&GadgetRef>) -> Result<GadgetRef> {
        let flavor = arena.flavor();
        let id = arena.next_id.fetch_add(1, Full) + 1;
        let init = pin_init!(Self {
            count: LockedBy::new(&arena.lock, 1),
            refcnt: Refcount::new(1),
            parent: UnsafeCell::new(parent.map(GadgetRef::get)),
            arena: NonNull::from(arena),
            id,
            kids <- Kids::new(),
            nr_children: Atomic::new(0),
            published: Atomic::new(false),
        });

        let g = if flavor == uapi::LP_FLAVOR_LOCKLESS {
            GadgetRef::Arc(ManuallyDrop::new(Arc::pin_init(init, GFP_KERNEL)?))
        } else {
            let ptr = GadgetPtr::from_box(KBox::pin_init(init, GFP_KERNEL)?);
            // INVARIANT: `KBox::into_raw`'s pointer in a flavor other than LOCKLESS;
            // the initial count of one is this reference's.
            GadgetRef::Counted(ptr)
        };

        LIVE_GADGETS.fetch_add(1, Relaxed);
        if flavor_has_kids(flavor) {
            // On failure, dropping `g` puts it: it is on no list, not registered.
            g.kids_add(flavor, g.ptr())?;
        }

        // Publish for TRYGET last, once `g` is complete: the registry lock orders
        // these stores before any TRYGET that finds `g`.
        arena
            .registry
            .lock()
            .store(index(g.id)?, g.ptr(), GFP_KERNEL)?;
        Ok(g)
    }

    /// `lp_gadget_publish()`: makes a gadget from [`Gadget::alloc`] visible to
    /// LOOKUP and TRYGET and counts it; cannot fail. `Release`, paired with their
    /// `Acquire` load (under the list or registry lock): who sees the flag also
    /// sees the counts.
    pub(crate) fn publish(&self) {
        if let Some(p) = self.parent() {
            p.nr_children.fetch_add(1, Relaxed);
        }
        self.arena().created.fetch_add(1, Relaxed);
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
            uapi::LP_FLAVOR_KREF_RWSEM => Ok(owner.rwsem.write().push(me, GFP_KERNEL)?),
            _ => Ok(owner.mutex.lock().push(me, GFP_KERNEL)?),
        }
    }

    /// `lp_put_locked()`: article v1 put, `refcnt--` under the arena mutex.
    ///
    /// The mutex orders every decrement; the one that sees 1 -> 0 is the last.
    fn put_locked(&self) -> bool {
        let mut state = self.arena().lock.lock();
        let count = self.count.access_mut(&mut state);
        *count -= 1;
        *count == 0
    }

    /// `lp_put_weak_cmpxchg()`: article v3 put, the cmpxchg loop.
    ///
    /// Lock-free while the count is above one; the 1 -> 0 step is a cmpxchg done
    /// under the owner's mutex, retried if a LOOKUP upgraded a weak reference
    /// before we got the mutex. The gadget leaves the list before the mutex is
    /// dropped. The cmpxchg is fully ordered (`Full`), as `atomic_cmpxchg()` is.
    /// Every call does exactly one successful cmpxchg.
    ///
    /// This is the one place the count is driven through `Refcount::as_atomic()`,
    /// which `Refcount` reserves for what `refcount.h` has no API for. Here the
    /// loop itself is the pattern under study; its packaged form is KREF_MUTEX's
    /// `Refcount::dec_and_lock()`. Nothing of `refcount_t` is lost: the loop never
    /// goes below zero, and the count, one per handle, child and in-flight
    /// reference, stays far from saturation.
    fn put_weak_cmpxchg(&self) -> bool {
        let owner = self.owner();
        let count = self.refcnt.as_atomic();
        loop {
            let old = count.load(Relaxed);
            if old > 1 {
                if count.cmpxchg(old, old - 1, Full).is_ok() {
                    return false;
                }
            } else {
                // old was 1, fence off accesses to weak references!
                let mut list = owner.mutex.lock();
                if count.cmpxchg(1, 0, Full).is_ok() {
                    list_remove(&mut list, self);
                    return true;
                }
                // Somebody upgraded a weak reference: try again.
            }
        }
    }

    /// `kref_put_mutex()`: `Refcount::dec_and_lock()` is
    /// `refcount_dec_and_mutex_lock()` on the owner's mutex, and the gadget
    /// leaves the list under it if that was the last reference. Release ordering
    /// before the decrement, acquire before the gadget is unlinked and freed.
    fn put_kref_mutex(&self) -> bool {
        let owner = self.owner();
        if let Some(mut list) = self.refcnt.dec_and_lock(&owner.mutex) {
            list_remove(&mut list, self);
            return true;
        }
        false
    }

    /// `kref_put_lock()`: the same with the owner's spinlock
    /// (`refcount_dec_and_lock()`).
    fn put_kref_lock(&self) -> bool {
        let owner = self.owner();
        if let Some(mut list) = self.refcnt.dec_and_lock(&owner.lock) {
            list_remove(&mut list, self);
            return true;
        }
        false
    }

    /// `kref_put_rwsem()`: the article's exercise, `refcount_dec_and_mutex_lock()`
    /// written out for `RwSem`, which is not a `Lock` backend: lock-free while
    /// the count is above one (`Refcount::dec_not_one()`); otherwise `down_write()`
    /// fences off readers of the list, which upgrade weak references under
    /// `down_read()`, and the 1 -> 0 step is `dec_and_test()` under it.
    fn put_kref_rwsem(&self) -> bool {
        let owner = self.owner();
        if self.refcnt.dec_not_one() {
            return false;
        }
        let mut list = owner.rwsem.write();
        if !self.refcnt.dec_and_test() {
            return false;
        }
        list_remove(&mut list, self);
        true
    }

    /// One put in the arena's flavor (not LOCKLESS, which is `Arc`'s). Returns
    /// `true` if it dropped the last reference; the gadget is then off every weak
    /// list, but still registered.
    fn put_one(&self) -> bool {
        match self.flavor() {
            uapi::LP_FLAVOR_LOCKED => self.put_locked(),
            uapi::LP_FLAVOR_WEAK_CMPXCHG => self.put_weak_cmpxchg(),
            uapi::LP_FLAVOR_KREF_MUTEX => self.put_kref_mutex(),
            uapi::LP_FLAVOR_KREF_LOCK => self.put_kref_lock(),
            _ => self.put_kref_rwsem(),
        }
    }

    /// `lp_gadget_free()`'s first half: the release path, once the put that took
    /// the count to zero unlinked the gadget from its weak list, and before the
    /// gadget is dropped and freed. Unregisters it (after the count reached zero,
    /// before the free, as `kvm_destroy_vm()` removes the debugfs files), then
    /// takes out the reference it held on its parent, for the caller to put next.
    ///
    /// Takes `&self`, as C does `struct lp_gadget *`: until we hold the registry
    /// lock, a TRYGET holding it may have found the gadget and be reading its count
    /// through a `&Gadget` of its own. Only once the gadget is out of the registry
    /// can the drop borrow it mutably.
    fn release(&self) -> Option<GadgetRef> {
        if let Ok(i) = index(self.id) {
            self.arena().registry.lock().remove(i);
        }
        take_parent(self)
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
            _ => upgrade(&self.kids.mutex.lock(), id),
        };
        found.ok_or(ENOENT)
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
    // SAFETY: As in the search above.
    let child = unsafe { p.as_ref() };
    // The fence failed if a listed gadget has count 0: `refcount_inc()` WARNs on
    // an increment from zero, where C says WARN_ON_ONCE() before `atomic_inc()`.
    child.refcnt.inc();
    // INVARIANT: Listed gadgets are never LOCKLESS ones, so `p` is `KBox::into_raw`'s
    // pointer; we just took the count this reference owns.
    Some(GadgetRef::Counted(p))
}

/// An id as an XArray index.
fn index(id: u64) -> Result<usize> {
    usize::try_from(id).map_err(|_| ENOENT)
}

/// `lp_gadget_tryget()`: gets a gadget by id unless it is already dying.
///
/// `kvm_debugfs_open()`: the registry entry is a weak reference that no put
/// fences, so the upgrade must fail once the count reached zero:
/// `Refcount::inc_not_zero()` (LOCKLESS: `Arc::from_raw_inc_not_zero()`; LOCKED:
/// a test of the count under the arena mutex), under the registry's own lock,
/// which the release path takes to unregister before it frees. One lock: LOCKED
/// takes its count's mutex too, first, as a mutex cannot nest in the XArray's
/// spinlock.
///
/// The flavor is fixed once a gadget exists; one read before the arena's first
/// NEW may be stale, so a LOCKED gadget found without the mutex held sends the
/// lookup round again.
///
/// Returns `ENOENT` if no gadget has `id` or its count reached zero.
pub(crate) fn tryget(arena: &Arena, id: u64) -> Result<GadgetRef> {
    let i = index(id)?;
    loop {
        let mut state = (arena.flavor() == uapi::LP_FLAVOR_LOCKED).then(|| arena.lock.lock());
        let registry = arena.registry.lock();
        let ptr = registry.get(i).ok_or(ENOENT)?;
        let got = match arena.flavor() {
            uapi::LP_FLAVOR_LOCKED => {
                let Some(state) = state.as_mut() else {
                    continue;
                };
                // SAFETY: We hold the registry lock, and the borrow ends before we drop
                // it: the release path takes that lock to unregister the gadget before
                // it drops it.
                let g = unsafe { ptr.as_ref() };
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
                // SAFETY: In LOCKLESS `ptr` is `Arc::as_ptr`'s pointer (`GadgetPtr`
                // invariant); the allocation is not freed while we hold the registry
                // lock (see above); LOCKLESS releases with `Arc::drop_with`, never
                // `Arc::into_unique_or_drop`.
                let arc = unsafe { Arc::from_raw_inc_not_zero(ptr.as_ptr()) };
                let g = GadgetRef::Arc(ManuallyDrop::new(arc.ok_or(ENOENT)?));
                // Tested only now that we hold a reference: before, the gadget may be
                // lent out as `Pin<&mut Gadget>` by `drop_with`. Unpublished, the NEW
                // that made it still holds its own reference, so this put is not the
                // last; it runs after the locks are dropped.
                drop(registry);
                drop(state);
                return if g.is_published() { Ok(g) } else { Err(ENOENT) };
            }
            _ => {
                // SAFETY: As in LOCKED.
                let g = unsafe { ptr.as_ref() };
                g.is_published() && g.refcnt.inc_not_zero()
            }
        };
        drop(registry);
        drop(state);

        if !got {
            return Err(ENOENT);
        }
        // INVARIANT: Not LOCKLESS, so `ptr` is `KBox::into_raw`'s pointer; we took
        // the count.
        return Ok(GadgetRef::Counted(ptr));
    }
}

#[pinned_drop]
impl PinnedDrop for Gadget {
    /// `lp_gadget_free()`'s second half: runs when the box or the `Arc` drops the
    /// gadget, just before its memory is freed, after [`Gadget::release`] took it
    /// out of the registry: no other thread can reach it any more.
    fn drop(self: Pin<&mut Self>) {
        kernel::warn_on!(self.nr_children.load(Relaxed) != 0);
        if self.published.load(Relaxed) {
            self.arena().freed.fetch_add(1, Relaxed);
        }
        LIVE_GADGETS.fetch_sub(1, Relaxed);
    }
}

/// One strong reference to a gadget, counted the way its arena's flavor counts.
///
/// Dropping it is a put; [`GadgetRef::put`] also tells how many gadgets that put
/// released.
///
/// # Invariants
///
/// `Counted(p)`: `p` is the pointer [`KBox::into_raw`] returned for a gadget
/// of a flavor other than LOCKLESS ([`Gadget::create`]), and this value owns one
/// count of its counter, so the gadget is alive.
pub(crate) enum GadgetRef {
    /// LOCKLESS, article v2 with the kernel's `Arc`: `Arc::clone` is `atomic_inc`
    /// without ordering (`refcount_inc`), the drop a fully ordered decrement.
    Arc(ManuallyDrop<Arc<Gadget>>),
    /// Every other flavor: one count of the gadget's own counter.
    Counted(GadgetPtr),
}

// SAFETY: A reference can be put from any thread, like an `Arc<Gadget>`.
unsafe impl Send for GadgetRef {}
// SAFETY: Through `&GadgetRef` only `&Gadget` is reachable, and `Gadget` is `Sync`.
unsafe impl Sync for GadgetRef {}

impl Deref for GadgetRef {
    type Target = Gadget;

    fn deref(&self) -> &Gadget {
        match self {
            Self::Arc(a) => a,
            // SAFETY: We own a count (type invariant) for as long as `self` is
            // borrowed, and no `&mut Gadget` exists before the count reaches zero.
            Self::Counted(p) => unsafe { p.as_ref() },
        }
    }
}

impl GadgetRef {
    /// `lp_gadget_get()`: takes one more reference; `self` already holds one.
    ///
    /// LOCKED: article v1, `refcnt++` under the arena mutex. Every other flavor:
    /// article v2, a bare increment without acquire or release semantics
    /// (`Arc::clone`, `Refcount::inc`): the caller's own reference keeps the gadget
    /// alive and was itself obtained with the ordering that mattered.
    pub(crate) fn get(&self) -> GadgetRef {
        match self {
            Self::Arc(a) => Self::Arc(ManuallyDrop::new(Arc::clone(a))),
            Self::Counted(p) => {
                if self.flavor() == uapi::LP_FLAVOR_LOCKED {
                    let mut state = self.arena().lock.lock();
                    *self.count.access_mut(&mut state) += 1;
                } else {
                    self.refcnt.inc();
                }
                // INVARIANT: Same allocation; we just took the count.
                Self::Counted(*p)
            }
        }
    }

    /// The gadget's pointer, as the weak lists and the registry store it.
    fn ptr(&self) -> GadgetPtr {
        match self {
            Self::Arc(a) => GadgetPtr::from_arc(a),
            Self::Counted(p) => *p,
        }
    }

    /// The gadget's count (`STAT`): a snapshot, maybe stale by the time it is used.
    pub(crate) fn refcount(&self) -> u32 {
        match self {
            Self::Arc(a) => Arc::count(a),
            Self::Counted(_) if self.flavor() == uapi::LP_FLAVOR_LOCKED => {
                *self.count.access(&self.arena().lock.lock())
            }
            Self::Counted(_) => u32::try_from(self.refcnt.as_atomic().load(Relaxed)).unwrap_or(0),
        }
    }

    /// `lp_gadget_put()`: drops this reference, releasing what reaches zero.
    ///
    /// Releasing a gadget drops its reference to the parent, which may cascade up
    /// the tree. The cascade is a loop, not a recursion: constant stack for any
    /// depth. Ordering is that of the flavor's put.
    ///
    /// Returns the number of gadgets this put released.
    pub(crate) fn put(self) -> u32 {
        let mut released = 0;
        let mut next = Some(self);
        while let Some(r) = next.take() {
            match r.release_one() {
                PutOutcome::Alive => break,
                PutOutcome::Freed(parent) => {
                    released += 1;
                    next = parent;
                }
            }
        }
        released
    }

    /// Drops this one reference, freeing the gadget if it was the last.
    fn release_one(self) -> PutOutcome {
        let mut this = ManuallyDrop::new(self);
        match &mut *this {
            // SAFETY: `this` is never used again, nor dropped.
            Self::Arc(a) => put_lockless(unsafe { ManuallyDrop::take(a) }),
            // SAFETY: We own one count of `p` (type invariant), which we hand over.
            Self::Counted(p) => unsafe { put_counted(*p) },
        }
    }
}

impl Drop for GadgetRef {
    fn drop(&mut self) {
        // SAFETY: Neither variant's field has drop glue (`ManuallyDrop`, `GadgetPtr`),
        // so after this copy the original is never used or dropped again: the copy
        // owns the reference, and `put` consumes it without dropping it twice.
        let this = unsafe { core::ptr::read(self) };
        this.put();
    }
}

/// What one put did to its gadget (one step of [`GadgetRef::put`]'s loop).
enum PutOutcome {
    /// It was not the last reference: the gadget lives on.
    Alive,
    /// It was the last reference: the gadget is freed. This is the reference it
    /// held on its parent (`None` for a root), the caller's to put next.
    Freed(Option<GadgetRef>),
}

/// Takes the parent reference out of a gadget being released and tells the
/// parent it lost a child.
fn take_parent(g: &Gadget) -> Option<GadgetRef> {
    // SAFETY: Called by `Gadget::release` only, after it unregistered `g`, whose
    // count is zero and which is off every weak list: no other thread can reach
    // `g`, so nobody else reads or writes `parent` (type invariant of `Gadget`).
    // The `&mut Option` made through the `UnsafeCell` lasts for this statement.
    let parent = unsafe { (*g.parent.get()).take() };
    if let Some(p) = &parent {
        // Counted by `publish`, which a discarded gadget never reached.
        if g.is_published() {
            p.nr_children.fetch_sub(1, Relaxed);
        }
    }
    parent
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
/// The release path runs in the closure, before the `Arc` frees the gadget, and
/// uses the gadget shared (`Gadget::release` takes `&Gadget`). `drop_with` lends
/// it as `Pin<&mut Gadget>`, which is sound only if no other thread holds a
/// reference into the gadget meanwhile: it is on no list (LOCKLESS keeps none),
/// no handle holds it (its count is zero), and a TRYGET that finds it in the
/// registry touches only the `Arc`'s count, beside the gadget, never the gadget
/// itself: `tryget()` makes no `&Gadget` in LOCKLESS before its increment
/// succeeded, and patch 0002's `Arc::from_raw_inc_not_zero()` reaches the count
/// through raw projections, without a reference to the gadget or its
/// `ArcInner`.
fn put_lockless(a: Arc<Gadget>) -> PutOutcome {
    let mut parent = None;
    if Arc::drop_with(a, |g| parent = g.as_ref().get_ref().release()) {
        PutOutcome::Freed(parent)
    } else {
        PutOutcome::Alive
    }
}

/// The put of the other flavors: [`Gadget::put_one`], then, if that was the last
/// reference, the free.
///
/// # Safety
///
/// `p` is a `GadgetRef::Counted` pointer whose count the caller owns and hands over.
unsafe fn put_counted(p: GadgetPtr) -> PutOutcome {
    // SAFETY: The caller owns a count, and no `&mut Gadget` exists while one is
    // owned; the borrow is not used after the box is dropped below.
    let g = unsafe { p.as_ref() };
    if !g.put_one() {
        return PutOutcome::Alive;
    }
    let parent = g.release();
    // SAFETY: `p` is `KBox::into_raw`'s pointer for a pinned box (the caller's
    // `GadgetRef::Counted` invariant). This was the last reference, and
    // `release()` took the gadget off the registry, the last place another thread
    // could find it, under the registry lock: no other reference to it exists, so
    // the box may borrow it mutably to drop it (in place, it was pinned) and free it.
    drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.as_ptr())) });
    PutOutcome::Freed(parent)
}
