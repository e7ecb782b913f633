// SPDX-License-Identifier: GPL-2.0
/*
 * gadget.c - the gadget reference-counting patterns of "Lockless patterns:
 * more read-modify-write operations" (LWN, 2021), one per flavor.
 *
 * Gadgets form a tree: each holds a strong reference to its parent. In the
 * flavors with a child list, a parent (or the arena, for roots) keeps weak
 * references to its children, and a child's count may only go from 1 to 0
 * under the lock of that list. The registry (id -> gadget) is a second,
 * kvm_debugfs_open()-style weak reference that is upgraded with
 * get-unless-zero under the registry xarray's own lock (LOCK mode) or
 * under rcu_read_lock() alone, the gadget freed after a grace period
 * (RCU mode).
 *
 * Release never recurses: lp_gadget_put() drops the parent's reference in
 * a loop, so a chain of any depth is freed in constant stack.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bug.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "lockless_c.h"

atomic64_t lp_live_gadgets = ATOMIC64_INIT(0);

/*
 * Gadgets come from a cache of their own (made and destroyed by device.c):
 * one left behind at module exit makes kmem_cache_destroy() WARN, whatever
 * the counters say, so a release path that forgets its kmem_cache_free()
 * cannot hide behind a correct count.
 */
struct kmem_cache *lp_gadget_cache;

/**
 * lp_kids_init() - initialise a weak child list and all of its locks
 * @kids: the list
 *
 * Every flavor uses one of the three locks; initialising all keeps one
 * lockdep class per lock type for the whole module.
 */
void lp_kids_init(struct lp_kids *kids)
{
	INIT_LIST_HEAD(&kids->head);
	mutex_init(&kids->mutex);
	spin_lock_init(&kids->lock);
	init_rwsem(&kids->rwsem);
}

static u32 lp_flavor_of(const struct lp_gadget *g)
{
	return READ_ONCE(g->arena->flavor);
}

static bool lp_flavor_has_kids(u32 flavor)
{
	return flavor != LP_FLAVOR_LOCKED && flavor != LP_FLAVOR_LOCKLESS;
}

/* The list @g sits on: its parent's children, or the arena's roots. */
static struct lp_kids *lp_owner(const struct lp_gadget *g)
{
	return g->parent ? &g->parent->kids : &g->arena->roots;
}

static void lp_kids_lock(struct lp_kids *kids, u32 flavor)
{
	switch (flavor) {
	case LP_FLAVOR_KREF_LOCK:
		spin_lock(&kids->lock);
		break;
	case LP_FLAVOR_KREF_RWSEM:
		down_write(&kids->rwsem);
		break;
	default:
		WARN_ONCE(1, "unknown flavor %u", flavor);
		fallthrough;
	case LP_FLAVOR_WEAK_CMPXCHG:
	case LP_FLAVOR_KREF_MUTEX:
		mutex_lock(&kids->mutex);
		break;
	}
}

static void lp_kids_unlock(struct lp_kids *kids, u32 flavor)
{
	switch (flavor) {
	case LP_FLAVOR_KREF_LOCK:
		spin_unlock(&kids->lock);
		break;
	case LP_FLAVOR_KREF_RWSEM:
		up_write(&kids->rwsem);
		break;
	default:
		WARN_ONCE(1, "unknown flavor %u", flavor);
		fallthrough;
	case LP_FLAVOR_WEAK_CMPXCHG:
	case LP_FLAVOR_KREF_MUTEX:
		mutex_unlock(&kids->mutex);
		break;
	}
}

/**
 * lp_gadget_alloc() - allocate an unpublished gadget holding one reference
 * @arena: the arena, whose flavor may not change until the gadget is
 *	   published or discarded
 *
 * The gadget gets its id and its registry slot reserved (TRYGET reads a
 * reserved slot as empty), but nothing else knows it yet:
 * lp_gadget_publish() makes it visible, lp_gadget_discard() undoes this.
 * Splitting creation this way lets NEW copy its answer out before anything
 * can be seen, and publish only what nothing can fail any more.
 *
 * Counted against the arena's limit first, as jbd2 counts credits: add,
 * and undo over the limit, so that concurrent NEWs never exceed it. Every
 * allocation userspace makes is charged to its memory cgroup
 * (GFP_KERNEL_ACCOUNT).
 *
 * Return: the gadget, or an ERR_PTR() (-EDQUOT, -ENOMEM).
 */
struct lp_gadget *lp_gadget_alloc(struct lp_arena *arena)
{
	struct lp_gadget *g;
	int err;

	if (atomic_inc_return_relaxed(&arena->nr_gadgets) >
	    READ_ONCE(arena->max_gadgets)) {
		atomic_dec(&arena->nr_gadgets);
		return ERR_PTR(-EDQUOT);
	}
	g = kmem_cache_zalloc(lp_gadget_cache, GFP_KERNEL_ACCOUNT);
	if (!g) {
		atomic_dec(&arena->nr_gadgets);
		return ERR_PTR(-ENOMEM);
	}

	switch (READ_ONCE(arena->flavor)) {
	case LP_FLAVOR_LOCKED:
		g->count = 1;
		break;
	case LP_FLAVOR_LOCKLESS:
	case LP_FLAVOR_WEAK_CMPXCHG:
		atomic_set(&g->refcnt, 1);
		break;
	default:
		WARN_ONCE(1, "unknown flavor %u", READ_ONCE(arena->flavor));
		fallthrough;
	case LP_FLAVOR_KREF_MUTEX:
	case LP_FLAVOR_KREF_LOCK:
	case LP_FLAVOR_KREF_RWSEM:
		kref_init(&g->kref);
		break;
	}
	g->arena = arena;
	g->id = atomic64_inc_return(&arena->next_id);
	INIT_LIST_HEAD(&g->node);
	lp_kids_init(&g->kids);
	atomic_set(&g->nr_children, 0);

	err = xa_reserve(&arena->registry, g->id, GFP_KERNEL_ACCOUNT);
	if (err) {
		kmem_cache_free(lp_gadget_cache, g);
		atomic_dec(&arena->nr_gadgets);
		return ERR_PTR(err);
	}
	atomic64_inc(&lp_live_gadgets);
	return g;
}

/**
 * lp_gadget_discard() - free a gadget lp_gadget_alloc() gave and nobody saw
 * @g: the gadget, never published
 */
void lp_gadget_discard(struct lp_gadget *g)
{
	xa_release(&g->arena->registry, g->id);
	atomic_dec(&g->arena->nr_gadgets);
	atomic64_dec(&lp_live_gadgets);
	kmem_cache_free(lp_gadget_cache, g);
}

/**
 * lp_gadget_publish() - make an allocated gadget visible; cannot fail
 * @g: the gadget from lp_gadget_alloc()
 * @parent: the parent (the caller holds a reference to it), or NULL
 *
 * Takes a reference to @parent for @g (the Rust module takes it at
 * allocation, see STAT's refcount in the UAPI header), registers @g for
 * TRYGET in the slot
 * lp_gadget_alloc() reserved (no allocation, so no failure), and links it
 * on its owner's list under the owner's lock last (flavors with a child
 * list). What orders the stores that completed @g before a TRYGET that
 * finds it is xa_store()'s rcu_assign_pointer(), a release, and the
 * address dependency of xa_load()'s rcu_dereference() in TRYGET: an
 * RCU-mode TRYGET takes no lock (registry-publish-rcu.litmus). A LOOKUP
 * finds @g under the list lock, which the link takes.
 */
void lp_gadget_publish(struct lp_gadget *g, struct lp_gadget *parent)
{
	struct lp_arena *arena = g->arena;
	u32 flavor = lp_flavor_of(g);
	struct lp_kids *owner;

	if (parent) {
		lp_gadget_get(parent);
		atomic_inc(&parent->nr_children);
		g->parent = parent;
	}
	atomic64_inc(&arena->created);

	WARN_ON_ONCE(xa_is_err(xa_store(&arena->registry, g->id, g,
					GFP_KERNEL)));

	if (lp_flavor_has_kids(flavor)) {
		owner = lp_owner(g);
		lp_kids_lock(owner, flavor);
		list_add_tail(&g->node, &owner->head);
		lp_kids_unlock(owner, flavor);
	}
}

/**
 * lp_gadget_new() - create and publish a gadget holding one reference
 * @arena: the arena, whose flavor is fixed by now
 * @parent: the parent (the caller holds a reference to it), or NULL
 *
 * lp_gadget_alloc() and lp_gadget_publish() in one, for RUN's NEW_PUT,
 * which has nothing to copy out in between.
 *
 * Return: the gadget, or an ERR_PTR() (-EDQUOT, -ENOMEM).
 */
struct lp_gadget *lp_gadget_new(struct lp_arena *arena,
				struct lp_gadget *parent)
{
	struct lp_gadget *g = lp_gadget_alloc(arena);

	if (!IS_ERR(g))
		lp_gadget_publish(g, parent);
	return g;
}

/**
 * lp_gadget_get() - take one more reference; the caller already holds one
 * @g: the gadget
 *
 * LOCKED: article v1, ``refcnt++`` under the arena mutex. Every other
 * flavor: article v2, a bare atomic_inc()/kref_get() without acquire or
 * release semantics: the caller's own reference keeps @g alive and was
 * itself obtained with the ordering that mattered.
 */
void lp_gadget_get(struct lp_gadget *g)
{
	struct lp_arena *arena = g->arena;

	switch (lp_flavor_of(g)) {
	case LP_FLAVOR_LOCKED:
		mutex_lock(&arena->lock);
		g->count++;
		mutex_unlock(&arena->lock);
		break;
	case LP_FLAVOR_LOCKLESS:
	case LP_FLAVOR_WEAK_CMPXCHG:
		atomic_inc(&g->refcnt);
		break;
	default:
		WARN_ONCE(1, "unknown flavor %u", lp_flavor_of(g));
		fallthrough;
	case LP_FLAVOR_KREF_MUTEX:
	case LP_FLAVOR_KREF_LOCK:
	case LP_FLAVOR_KREF_RWSEM:
		kref_get(&g->kref);
		break;
	}
}

/**
 * lp_put_locked() - article v1 put: ``refcnt--`` under the arena mutex
 * @g: the gadget
 *
 * The mutex orders every decrement; the one that sees 1 -> 0 is the last.
 *
 * Return: true if this put dropped the last reference.
 */
static bool lp_put_locked(struct lp_gadget *g)
{
	struct lp_arena *arena = g->arena;
	bool last;

	mutex_lock(&arena->lock);
	last = g->count-- == 1;
	mutex_unlock(&arena->lock);
	return last;
}

/**
 * lp_put_lockless() - article v2 put: atomic_fetch_dec()
 * @g: the gadget
 *
 * atomic_fetch_dec() is fully ordered (not _release): every earlier put
 * happens before the one that sees 1, so the releaser may then read
 * @g->parent and free @g with plain accesses.
 *
 * Return: true if this put dropped the last reference.
 */
static bool lp_put_lockless(struct lp_gadget *g)
{
	return atomic_fetch_dec(&g->refcnt) == 1;
}

/**
 * lp_put_weak_cmpxchg() - article v3 put: the atomic_cmpxchg() loop
 * @g: the gadget, on its owner's weak list
 *
 * Lock-free while the count is above one; the 1 -> 0 step is an
 * atomic_cmpxchg() done under the owner's mutex, retried if a LOOKUP
 * upgraded a weak reference before we got the mutex. The gadget leaves the
 * list before the mutex is dropped, so a visitor holding the mutex never
 * sees a count of zero. atomic_cmpxchg() is fully ordered on success.
 * Every call does exactly one successful cmpxchg, but for a count already
 * at or below zero (a bug), which WARNs once and is left alone.
 *
 * Return: true if this put dropped the last reference (@g is unlinked).
 */
static bool lp_put_weak_cmpxchg(struct lp_gadget *g)
{
	struct lp_kids *owner = lp_owner(g);
	int old;

	for (;;) {
		old = atomic_read(&g->refcnt);
		/* An over-put: nothing to release, and no retry would end. */
		if (WARN_ONCE(old <= 0, "put of a gadget whose count is %d", old))
			return false;
		if (old > 1) {
			if (atomic_cmpxchg(&g->refcnt, old, old - 1) == old)
				return false;
		} else {
			/* old was 1, fence off accesses to weak references! */
			mutex_lock(&owner->mutex);
			if (atomic_cmpxchg(&g->refcnt, 1, 0) == 1)
				break;
			/* Somebody upgraded a weak reference: try again. */
			mutex_unlock(&owner->mutex);
		}
	}

	list_del(&g->node);
	mutex_unlock(&owner->mutex);
	return true;
}

static void lp_release_mutex(struct kref *kref)
	__releases(&lp_owner(container_of(kref, struct lp_gadget, kref))->mutex)
{
	struct lp_gadget *g = container_of(kref, struct lp_gadget, kref);
	struct lp_kids *owner = lp_owner(g);

	list_del(&g->node);
	mutex_unlock(&owner->mutex);
}

static void lp_release_lock(struct kref *kref)
	__releases(&lp_owner(container_of(kref, struct lp_gadget, kref))->lock)
{
	struct lp_gadget *g = container_of(kref, struct lp_gadget, kref);
	struct lp_kids *owner = lp_owner(g);

	list_del(&g->node);
	spin_unlock(&owner->lock);
}

static void lp_release_rwsem(struct kref *kref)
	__releases(&lp_owner(container_of(kref, struct lp_gadget, kref))->rwsem)
{
	struct lp_gadget *g = container_of(kref, struct lp_gadget, kref);
	struct lp_kids *owner = lp_owner(g);

	list_del(&g->node);
	up_write(&owner->rwsem);
}

/**
 * lp_owner_pin() - keep the lock of @g's list allocated across a slow put
 * @g: the gadget; the caller still holds its reference to it
 *
 * kref_put_mutex() and lp_kref_put_rwsem() take the owner's lock for a
 * decrement that may not be the last: if a TRYGET raised the count while
 * we waited for the lock, the decrement under it takes 2 -> 1 and the
 * unlock follows with no reference held. The final put may then run on
 * another CPU as soon as the lock is free, free @g and, with it, the
 * parent's last reference: the parent and the lock inside it are freed
 * while mutex_unlock() or up_write() may still be touching the lock in its
 * slow path (Documentation/locking/mutex-design.rst). A reference to the
 * parent, taken while our own reference to @g keeps it alive, keeps the
 * lock allocated until lp_gadget_put() drops it, after the unlock. A root
 * needs none: its list is the arena's, which outlives every put.
 * The article's cmpxchg loop (lp_put_weak_cmpxchg()) needs none either: it
 * unlocks before it decrements. Nor does KREF_LOCK (lp_put_kref_lock()):
 * spin_unlock() touches the lock no more after releasing it, also under
 * PREEMPT_RT, where a spinlock is an rtmutex. Under PREEMPT_RT
 * mutex_unlock() is an rtmutex's too, and no more touches the lock once
 * another task may take it; the pin stays all the same: the rule of
 * mutex-design.rst is the mutex API's on every kernel, and up_write() of
 * PREEMPT_RT still touches the semaphore after readers may take it.
 *
 * That tail lasts a few instructions. With LP_DELAY_PUT_UNLOCKED on, the
 * slow put that did not release stalls after its unlock and then
 * try-locks the lock, as the tail would touch it: a put without this pin
 * then touches a freed lock, which KASAN reports.
 *
 * Return: the parent, with a new reference for the caller, or NULL.
 */
static struct lp_gadget *lp_owner_pin(struct lp_gadget *g)
{
	if (g->parent)
		kref_get(&g->parent->kref);
	return g->parent;
}

/**
 * lp_put_kref_mutex() - kref_put_mutex() on the owner's mutex
 * @g: the gadget, on its owner's weak list
 * @pin: out: a reference to @g's parent that the caller must drop, or NULL
 *
 * refcount_dec_and_mutex_lock(): lock-free while the count is above one,
 * the 1 -> 0 step under the mutex, which lp_release_mutex() unlinks the
 * gadget under and drops. Release ordering before the decrement, acquire
 * before the gadget is unlinked and freed. The slow path pins the owner
 * first (lp_owner_pin()): kref_put_mutex() may unlock after a decrement
 * that was not the last.
 *
 * Return: true if this put dropped the last reference (@g is unlinked).
 */
static bool lp_put_kref_mutex(struct lp_gadget *g, struct lp_gadget **pin)
{
	struct lp_arena *arena = g->arena;
	struct lp_kids *owner;

	if (refcount_dec_not_one(&g->kref.refcount))
		return false;
	*pin = lp_owner_pin(g);
	owner = lp_owner(g);
	if (kref_put_mutex(&g->kref, lp_release_mutex, &owner->mutex))
		return true;
	/* Debug: mutex_unlock()'s tail, widened (lp_owner_pin()). */
	if (lp_delay_on(arena, LP_DELAY_PUT_UNLOCKED)) {
		lp_delay(arena, LP_DELAY_PUT_UNLOCKED);
		if (mutex_trylock(&owner->mutex))
			mutex_unlock(&owner->mutex);
	}
	return false;
}

/**
 * lp_put_kref_lock() - kref_put_lock() on the owner's spinlock
 * @g: the gadget, on its owner's weak list
 *
 * The same with refcount_dec_and_lock() and lp_release_lock(). No pin:
 * spin_unlock() does not touch the lock after releasing it, which the
 * kernel guarantees (Documentation/locking/mutex-design.rst contrasts it
 * with mutex_unlock()). Under PREEMPT_RT, where a spinlock is an rtmutex,
 * the guarantee holds as well: an acquirer must take the rtmutex's
 * wait_lock, whose release is the unlock's last access to the lock
 * (rt_mutex_slowunlock(); rt_spin_unlock() drops the RCU read lock only
 * after it), as make pin-experiment shows (docs/testing.md).
 *
 * Return: true if this put dropped the last reference (@g is unlinked).
 */
static bool lp_put_kref_lock(struct lp_gadget *g)
{
	return kref_put_lock(&g->kref, lp_release_lock, &lp_owner(g)->lock);
}

/**
 * lp_kref_put_rwsem() - kref_put_mutex() for a list fenced by an rw_semaphore
 * @kref: the object
 * @release: called with @sem held for write when the count reaches zero;
 *	     it must unlink the object and up_write(@sem)
 * @sem: the rw_semaphore protecting the weak references to the object; the
 *	 caller keeps it allocated until this returns, whatever it returns
 *
 * The article's exercise (named as ours: kref.h may grow its own). Lock-free
 * while the count is above one
 * (refcount_dec_not_one()); otherwise down_write() fences off readers of
 * the list, which upgrade weak references under down_read(), and the
 * 1 -> 0 step is refcount_dec_and_test() under it, exactly as
 * refcount_dec_and_mutex_lock() does with a mutex. Provides release
 * ordering before the decrement and acquire ordering before @release.
 *
 * Return: 1 if @release was called (and @sem released), 0 otherwise.
 */
static int lp_kref_put_rwsem(struct kref *kref,
			     void (*release)(struct kref *kref),
			     struct rw_semaphore *sem)
	__cond_acquires(true, sem)
{
	if (refcount_dec_not_one(&kref->refcount))
		return 0;

	down_write(sem);
	if (!refcount_dec_and_test(&kref->refcount)) {
		up_write(sem);
		return 0;
	}
	release(kref);
	return 1;
}

/**
 * lp_put_kref_rwsem() - lp_kref_put_rwsem() on the owner's rw_semaphore
 * @g: the gadget, on its owner's weak list
 * @pin: out: a reference to @g's parent that the caller must drop, or NULL
 *
 * As lp_put_kref_mutex(): lock-free while the count is above one, the owner
 * pinned before the slow path, since up_write() may touch the semaphore
 * after releasing it.
 *
 * Return: true if this put dropped the last reference (@g is unlinked).
 */
static bool lp_put_kref_rwsem(struct lp_gadget *g, struct lp_gadget **pin)
{
	struct lp_arena *arena = g->arena;
	struct lp_kids *owner;

	if (refcount_dec_not_one(&g->kref.refcount))
		return false;
	*pin = lp_owner_pin(g);
	owner = lp_owner(g);
	if (lp_kref_put_rwsem(&g->kref, lp_release_rwsem, &owner->rwsem))
		return true;
	/* Debug: up_write()'s tail, widened (lp_owner_pin()). */
	if (lp_delay_on(arena, LP_DELAY_PUT_UNLOCKED)) {
		lp_delay(arena, LP_DELAY_PUT_UNLOCKED);
		if (down_write_trylock(&owner->rwsem))
			up_write(&owner->rwsem);
	}
	return false;
}

/*
 * One put in the arena's flavor. Return: true if it dropped the last
 * reference; @g is then off every weak list, but still registered. *@pin
 * is set to a reference the put took on @g's parent (lp_owner_pin()),
 * which the caller drops once this returns, or left alone.
 */
static bool lp_put_one(struct lp_gadget *g, struct lp_gadget **pin)
{
	switch (lp_flavor_of(g)) {
	case LP_FLAVOR_LOCKED:
		return lp_put_locked(g);
	case LP_FLAVOR_LOCKLESS:
		return lp_put_lockless(g);
	case LP_FLAVOR_WEAK_CMPXCHG:
		return lp_put_weak_cmpxchg(g);
	case LP_FLAVOR_KREF_MUTEX:
		return lp_put_kref_mutex(g, pin);
	case LP_FLAVOR_KREF_LOCK:
		return lp_put_kref_lock(g);
	case LP_FLAVOR_KREF_RWSEM:
		return lp_put_kref_rwsem(g, pin);
	}
	WARN_ONCE(1, "unknown flavor %u", lp_flavor_of(g));
	return false;
}

/*
 * Free a gadget whose count reached zero: unregister it (after the count
 * reached zero, before the free, as kvm_destroy_vm() removes the debugfs
 * files; xa_erase() takes the registry's lock, which a LOCK-mode TRYGET
 * holds while it touches the gadget), then free it: at once in LOCK mode,
 * after a grace period in RCU mode, where a TRYGET that found the gadget
 * before xa_erase() may still be reading its count (at zero: the
 * get-unless-zero fails). kfree_rcu() frees an object of any slab cache;
 * kmem_cache_destroy() waits for those in flight. The reference the gadget
 * held on its parent is the caller's to drop.
 */
static void lp_gadget_free(struct lp_gadget *g)
{
	struct lp_arena *arena = g->arena;

	xa_erase(&arena->registry, g->id);

	WARN_ON_ONCE(atomic_read(&g->nr_children));
	if (g->parent)
		atomic_dec(&g->parent->nr_children);
	/* Release: an ARENA_STAT that sees this also sees @g's creation. */
	atomic64_fetch_inc_release(&arena->freed);
	atomic_dec(&arena->nr_gadgets);
	atomic64_dec(&lp_live_gadgets);
	if (READ_ONCE(arena->registry_mode) == LP_REGISTRY_RCU)
		kfree_rcu(g, rcu);
	else
		kmem_cache_free(lp_gadget_cache, g);
}

/**
 * lp_gadget_put() - drop one reference, releasing what reaches zero
 * @g: the gadget; the caller's reference is consumed
 *
 * Context: may sleep (the owner's mutex or rw_semaphore of a slow put,
 * cond_resched() between released gadgets), whatever the flavor.
 *
 * Releasing a gadget drops its reference to the parent, which may cascade
 * up the tree. The cascade is a loop, not a recursion: constant stack for
 * any depth, and the pin a slow put took on the owner (lp_owner_pin()) is
 * dropped in the same loop, after that put's unlock. Ordering is that of
 * the flavor's put (see lp_put_*()).
 *
 * Return: the number of gadgets this put released.
 */
unsigned int lp_gadget_put(struct lp_gadget *g)
{
	struct lp_gadget *parent, *pin;
	unsigned int released = 0;

	might_sleep();
	while (g) {
		pin = NULL;
		if (!lp_put_one(g, &pin)) {
			/* Not the last; drop the owner's pin if it took one. */
			g = pin;
			continue;
		}
		parent = g->parent;
		lp_gadget_free(g);
		released++;
		/* @parent has @g's reference as well: this is not its last. */
		if (pin)
			refcount_dec(&pin->kref.refcount);
		g = parent;
		cond_resched();
	}
	return released;
}

/**
 * lp_gadget_get_refcount() - LOCKLESS get on refcount_t (GET_PUT_REFCOUNT)
 * @g: a LOCKLESS gadget; the caller already holds a reference
 *
 * The article's LOCKLESS flavor counts in a bare atomic_t, Rust's in Arc's
 * refcount_t. This get and lp_gadget_put_refcount() count the same
 * @g->refcnt as a refcount_t (@g->kref.refcount shares its storage): the
 * bench's like-for-like row against Rust's GET_PUT/LOCKLESS. As
 * atomic_inc(), refcount_inc() is unordered; it also saturates instead of
 * wrapping.
 */
void lp_gadget_get_refcount(struct lp_gadget *g)
{
	refcount_inc(&g->kref.refcount);
}

/**
 * lp_gadget_put_refcount() - LOCKLESS put on refcount_t (GET_PUT_REFCOUNT)
 * @g: a LOCKLESS gadget
 *
 * refcount_dec_and_test() orders every access before the decrement
 * (release) and, after the last one, smp_acquire__after_ctrl_dep(): every
 * earlier put happens before the releaser's plain loads of @g->parent, as
 * Arc's put does (put-arc-dec-and-test.litmus). The parent's reference is
 * dropped with lp_gadget_put().
 *
 * Return: the number of gadgets released.
 */
unsigned int lp_gadget_put_refcount(struct lp_gadget *g)
{
	struct lp_gadget *parent;

	if (!refcount_dec_and_test(&g->kref.refcount))
		return 0;
	parent = g->parent;
	lp_gadget_free(g);
	return parent ? 1 + lp_gadget_put(parent) : 1;
}

/**
 * lp_gadget_lookup() - upgrade a child's weak reference to a strong one
 * @parent: the parent; the caller holds a reference to it
 * @id: the child's id
 * @child: out: the child, with a new reference for the caller
 *
 * The article's rule: a weak reference may be upgraded with a plain get
 * while holding the lock that protects the list, because the put that
 * goes 1 -> 0 takes the same lock and unlinks the gadget before dropping
 * it. KREF_RWSEM takes its rw_semaphore shared: lookups run in parallel;
 * the 1 -> 0 step and NEW's link of a new child take it exclusive.
 *
 * Return: 0, -ENOENT if no live child has @id, -EOPNOTSUPP in LOCKED and
 * LOCKLESS (they keep no child list).
 */
int lp_gadget_lookup(struct lp_gadget *parent, u64 id,
		     struct lp_gadget **child)
{
	u32 flavor = lp_flavor_of(parent);
	struct lp_kids *kids = &parent->kids;
	struct lp_gadget *c, *found = NULL;

	if (!lp_flavor_has_kids(flavor))
		return -EOPNOTSUPP;

	if (flavor == LP_FLAVOR_KREF_RWSEM)
		down_read(&kids->rwsem);
	else
		lp_kids_lock(kids, flavor);
	list_for_each_entry(c, &kids->head, node) {
		if (c->id != id)
			continue;
		lp_delay_atomic(parent->arena, LP_DELAY_UPGRADE_LOCKED);
		if (flavor == LP_FLAVOR_WEAK_CMPXCHG) {
			/* The fence failed if a listed gadget has count 0. */
			WARN_ON_ONCE(!atomic_read(&c->refcnt));
			atomic_inc(&c->refcnt);
		} else {
			kref_get(&c->kref);
		}
		found = c;
		break;
	}
	if (flavor == LP_FLAVOR_KREF_RWSEM)
		up_read(&kids->rwsem);
	else
		lp_kids_unlock(kids, flavor);

	if (!found)
		return -ENOENT;
	*child = found;
	return 0;
}

/*
 * The get-unless-zero of a gadget found in the registry, in a flavor with
 * an atomic count (not LOCKED): atomic_inc_not_zero() /
 * kref_get_unless_zero(). The caller keeps the gadget allocated: the
 * registry's lock or, in RCU mode, its read-side critical section.
 */
static bool lp_gadget_get_unless_zero(struct lp_gadget *g)
{
	switch (lp_flavor_of(g)) {
	case LP_FLAVOR_LOCKLESS:
	case LP_FLAVOR_WEAK_CMPXCHG:
		return atomic_inc_not_zero(&g->refcnt);
	default:
		WARN_ONCE(1, "unknown flavor %u", lp_flavor_of(g));
		fallthrough;
	case LP_FLAVOR_KREF_MUTEX:
	case LP_FLAVOR_KREF_LOCK:
	case LP_FLAVOR_KREF_RWSEM:
		return kref_get_unless_zero(&g->kref);
	}
}

/**
 * lp_gadget_tryget() - get a gadget by id unless it is already dying
 * @arena: the arena
 * @id: the gadget's id
 * @g: out: the gadget, with a new reference for the caller
 *
 * kvm_debugfs_open(): the registry entry is a weak reference that no put
 * fences, so the upgrade must fail once the count reached zero:
 * atomic_inc_not_zero() / kref_get_unless_zero() (LOCKED: a test of the
 * plain count under the arena mutex).
 *
 * LOCK mode: under the registry's own lock, which the release path's
 * xa_erase() takes before it frees. One lock: LOCKED takes its count's
 * mutex too, first, as a mutex cannot nest in the xarray's spinlock. The
 * flavor is fixed once a gadget exists; one read before the arena's first
 * NEW may be stale, so a LOCKED gadget found without the mutex held sends
 * the lookup round again.
 *
 * RCU mode: no lock at all, the lookup and the increment inside
 * rcu_read_lock(); the release path frees after a grace period, so a
 * gadget that xa_load() found stays allocated until rcu_read_unlock(),
 * its count at zero if its release has begun: the increment fails then,
 * as it does under the lock. The mode is read inside the critical section
 * (see lp_configure()). The gadget cache is not SLAB_TYPESAFE_BY_RCU:
 * with it, a gadget's memory could hold another gadget before the grace
 * period ends, and both halves of the kernel's protocol for that would be
 * needed: the writer initialises the new gadget, its id included, before
 * it makes the count nonzero with refcount_set_release(), and the reader
 * checks the id again after an increment ordered before that check
 * (refcount_inc_not_zero_acquire()), putting back what it got if the id
 * differs. kfree_rcu() instead costs a rcu_head per gadget and keeps
 * freed memory for a grace period.
 *
 * Return: 0, or -ENOENT if no gadget has @id (or @id does not fit an
 * unsigned long, the registry's index) or its count reached zero.
 */
int lp_gadget_tryget(struct lp_arena *arena, u64 id, struct lp_gadget **g)
{
	struct lp_gadget *found;
	bool rcu, locked, got = false;

	/* An id no unsigned long holds (32-bit) names no gadget. */
	if (id != (unsigned long)id)
		return -ENOENT;
	rcu_read_lock();
	rcu = READ_ONCE(arena->registry_mode) == LP_REGISTRY_RCU;
	lp_delay_atomic(arena, LP_DELAY_TRYGET_MODE);
	if (rcu) {
		found = xa_load(&arena->registry, id);
		if (found)
			lp_delay_atomic(arena, LP_DELAY_TRYGET_FOUND);
		got = found && lp_gadget_get_unless_zero(found);
		rcu_read_unlock();
		goto out;
	}
	rcu_read_unlock();

again:
	locked = READ_ONCE(arena->flavor) == LP_FLAVOR_LOCKED;
	if (locked)
		mutex_lock(&arena->lock);
	xa_lock(&arena->registry);
	found = xa_load(&arena->registry, id);
	if (found)
		lp_delay_atomic(arena, LP_DELAY_TRYGET_FOUND);
	if (found && lp_flavor_of(found) == LP_FLAVOR_LOCKED) {
		if (!locked) {
			xa_unlock(&arena->registry);
			goto again;
		}
		got = found->count != 0;
		if (got)
			found->count++;
	} else if (found) {
		got = lp_gadget_get_unless_zero(found);
	}
	xa_unlock(&arena->registry);
	if (locked)
		mutex_unlock(&arena->lock);

out:
	if (!got)
		return -ENOENT;
	*g = found;
	return 0;
}

/**
 * lp_gadget_refcount() - the gadget's count, for STAT
 * @g: the gadget; the caller holds a reference
 *
 * LOCKED's plain count is read under the arena mutex it is written under
 * (a racy read of a plain int is a data race, whatever it returns).
 *
 * Return: a snapshot of the count; may be stale by the time it is used.
 */
unsigned int lp_gadget_refcount(struct lp_gadget *g)
{
	unsigned int count;

	switch (lp_flavor_of(g)) {
	case LP_FLAVOR_LOCKED:
		mutex_lock(&g->arena->lock);
		count = g->count;
		mutex_unlock(&g->arena->lock);
		return count;
	case LP_FLAVOR_LOCKLESS:
	case LP_FLAVOR_WEAK_CMPXCHG:
		return atomic_read(&g->refcnt);
	default:
		WARN_ONCE(1, "unknown flavor %u", lp_flavor_of(g));
		fallthrough;
	case LP_FLAVOR_KREF_MUTEX:
	case LP_FLAVOR_KREF_LOCK:
	case LP_FLAVOR_KREF_RWSEM:
		return kref_read(&g->kref);
	}
}
