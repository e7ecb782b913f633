// SPDX-License-Identifier: GPL-2.0
/*
 * arena.c - what one open file of /dev/lockless_c holds (struct lp_arena),
 * its handle table, and the module-wide counts of arenas and handles.
 *
 * device.c (the misc device and the ioctls), gadget.c and rmw.c all find
 * the arena here; rust-module/arena.rs is its mirror. A handle is an index
 * in the arena's handle table holding one strong reference: PUT consumes
 * it, GET/LOOKUP/TRYGET/NEW create one, and close() puts whatever is left.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bug.h>
#include <linux/slab.h>

#include "lockless_c.h"

/*
 * Arenas alive in the whole module (IDENTIFY.live_arenas): counted from the
 * allocation in lp_arena_new() (open()) until the free in lp_arena_free()
 * (close()), so an arena that close() never reaches the end of stays counted. Relaxed, like
 * lp_live_gadgets: only a quiescent IDENTIFY and module exit read it.
 */
atomic64_t lp_live_arenas = ATOMIC64_INIT(0);

/*
 * Arenas come from a cache of their own: one that release() counts but
 * forgets to free makes kmem_cache_destroy() WARN at module exit.
 */
struct kmem_cache *lp_arena_cache;

/*
 * Handles held in the whole module, all arenas together
 * (IDENTIFY.live_handles): handle-table entries, counted by
 * lp_handle_publish() before it publishes one and until lp_handle_take()
 * takes it out again (PUT, and lp_arena_release_handles() at close()
 * for every handle still held), so
 * it never goes below zero. Transaction handles count the same way
 * (lp_txn_handle_publish() .. lp_txn_handle_take(), txn.c). Relaxed.
 */
atomic64_t lp_live_handles = ATOMIC64_INIT(0);

/**
 * lp_arena_new() - allocate and initialise the arena of a new open file
 *
 * Counted in lp_live_arenas until lp_arena_free().
 *
 * Return: the arena, or NULL (-ENOMEM).
 */
struct lp_arena *lp_arena_new(void)
{
	struct lp_arena *arena;

	arena = kmem_cache_zalloc(lp_arena_cache, GFP_KERNEL_ACCOUNT);
	if (!arena)
		return NULL;
	atomic64_inc(&lp_live_arenas);
	arena->flavor = LP_FLAVOR_LOCKED;
	arena->registry_mode = LP_REGISTRY_LOCK;
	arena->max_gadgets = LP_MAX_GADGETS;
	init_rwsem(&arena->config_rwsem);
	mutex_init(&arena->lock);
	lp_kids_init(&arena->roots);
	xa_init(&arena->registry);
	xa_init_flags(&arena->handles, XA_FLAGS_ALLOC1);
	mutex_init(&arena->handles_lock);
	spin_lock_init(&arena->max_lock);
	spin_lock_init(&arena->racy_lock);
	spin_lock_init(&arena->atomic_ctx);
	lp_txn_init(&arena->txn);
	xa_init_flags(&arena->txn_handles, XA_FLAGS_ALLOC1);
	mutex_init(&arena->txn_handles_lock);
	return arena;
}

/*
 * Resolve @handle and take a reference to its gadget for the caller; the
 * handle lock keeps the handle's own reference in place meanwhile.
 */
int lp_handle_get(struct lp_arena *arena, u32 handle, struct lp_gadget **g)
{
	struct lp_gadget *found;

	mutex_lock(&arena->handles_lock);
	found = xa_load(&arena->handles, handle);
	if (found) {
		lp_delay(arena, LP_DELAY_HANDLE_GET);
		lp_gadget_get(found);
	}
	mutex_unlock(&arena->handles_lock);
	if (!found)
		return -EBADF;
	*g = found;
	return 0;
}

/*
 * Reserve a handle: a slot of the table that reads as empty (so PUT, GET
 * and STAT answer -EBADF for it) until lp_handle_publish() fills it, or
 * lp_handle_release() gives it back. Return: 0, -ENOSPC or -ENOMEM.
 */
int lp_handle_reserve(struct lp_arena *arena, u32 *handle)
{
	int err;

	err = xa_alloc(&arena->handles, handle, NULL,
		       XA_LIMIT(1, LP_MAX_HANDLES), GFP_KERNEL_ACCOUNT);
	return err == -EBUSY ? -ENOSPC : err;
}

void lp_handle_release(struct lp_arena *arena, u32 handle)
{
	xa_release(&arena->handles, handle);
}

/*
 * Give the caller's reference to @g to the reserved @handle. Counted
 * before it is published, so a racing PUT cannot take the counts below 0;
 * storing into a reserved slot allocates nothing, so it cannot fail.
 */
void lp_handle_publish(struct lp_arena *arena, u32 handle,
		       struct lp_gadget *g)
{
	atomic_inc(&arena->nr_handles);
	atomic64_inc(&lp_live_handles);
	WARN_ON_ONCE(xa_is_err(xa_store(&arena->handles, handle, g,
					GFP_KERNEL)));
}

/*
 * Take a handle out of the table; the caller owns its reference. A
 * reserved slot reads as NULL and is left alone: it is not a handle yet.
 */
struct lp_gadget *lp_handle_take(struct lp_arena *arena, u32 handle)
{
	struct lp_gadget *g;

	mutex_lock(&arena->handles_lock);
	g = xa_load(&arena->handles, handle);
	if (g)
		xa_erase(&arena->handles, handle);
	mutex_unlock(&arena->handles_lock);
	if (g) {
		atomic_dec(&arena->nr_handles);
		atomic64_dec(&lp_live_handles);
	}
	return g;
}

/**
 * lp_arena_release_handles() - close()'s first half: put every handle left
 * @arena: the arena of the file being closed
 *
 * Takes out and puts every handle still held, which frees every gadget.
 */
void lp_arena_release_handles(struct lp_arena *arena)
{
	struct lp_gadget *g;
	unsigned long h;

	xa_for_each(&arena->handles, h, g)
		lp_gadget_put(lp_handle_take(arena, h));
}

/**
 * lp_arena_free() - close()'s second half: free the arena
 * @arena: the arena, after lp_arena_release_handles() and
 *	   lp_txn_release_handles()
 *
 * The arena stops counting in lp_live_arenas last, once its memory is freed.
 */
void lp_arena_free(struct lp_arena *arena)
{
	xa_destroy(&arena->handles);
	WARN_ON(!xa_empty(&arena->txn_handles));
	xa_destroy(&arena->txn_handles);
	WARN_ON(!xa_empty(&arena->registry));
	xa_destroy(&arena->registry);
	kmem_cache_free(lp_arena_cache, arena);
	atomic64_dec(&lp_live_arenas);
}
