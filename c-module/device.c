// SPDX-License-Identifier: GPL-2.0
/*
 * device.c - /dev/lockless_c: the misc device, its arenas and handles, and
 * the ioctl dispatch.
 *
 * lockless_c.ko is the C reference implementation of the contract in
 * shared-tests/lockless_uapi.h; rust-module/device.rs is its mirror.
 *
 * Each open file is an arena (struct lp_arena, arena.c): its handles,
 * gadgets and variables, and its transaction (txn.c).
 *
 * Every ioctl is all or nothing (see lockless_uapi.h): the ones that
 * create a handle (NEW, GET, LOOKUP, TRYGET, TXN_START) reserve it, copy
 * the answer out, then publish; the ones whose effect cannot be undone
 * (PUT, RMW, RUN, TXN_STOP, TXN_EXTEND, TXN_COMMIT) write the argument
 * back before they act.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "lockless_c.h"

/*
 * No UAPI struct has padding: every byte copied out is a field the module
 * wrote, none is stale kernel stack. The sum of the fields' sizes is the
 * struct's size only if nothing sits between or after them.
 */
#define LP_F(type, field) sizeof_field(struct type, field)

static_assert(sizeof(struct lp_identify) ==
	      LP_F(lp_identify, name) +
	      LP_F(lp_identify, abi_version) +
	      LP_F(lp_identify, flavors) +
	      LP_F(lp_identify, ops) +
	      LP_F(lp_identify, live_gadgets) +
	      LP_F(lp_identify, live_arenas) +
	      LP_F(lp_identify, live_handles) +
	      LP_F(lp_identify, txn_flavors) +
	      LP_F(lp_identify, registries) +
	      LP_F(lp_identify, delay_points) +
	      LP_F(lp_identify, reserved));
static_assert(sizeof(struct lp_configure) ==
	      LP_F(lp_configure, flavor) +
	      LP_F(lp_configure, max_gadgets) +
	      LP_F(lp_configure, registry) +
	      LP_F(lp_configure, reserved));
static_assert(sizeof(struct lp_new) ==
	      LP_F(lp_new, parent) +
	      LP_F(lp_new, handle) +
	      LP_F(lp_new, id) +
	      LP_F(lp_new, reserved));
static_assert(sizeof(struct lp_get) ==
	      LP_F(lp_get, handle) +
	      LP_F(lp_get, new_handle) +
	      LP_F(lp_get, reserved));
static_assert(sizeof(struct lp_put) ==
	      LP_F(lp_put, handle) +
	      LP_F(lp_put, released) +
	      LP_F(lp_put, reserved));
static_assert(sizeof(struct lp_lookup) ==
	      LP_F(lp_lookup, parent) +
	      LP_F(lp_lookup, handle) +
	      LP_F(lp_lookup, id) +
	      LP_F(lp_lookup, reserved));
static_assert(sizeof(struct lp_tryget) ==
	      LP_F(lp_tryget, id) +
	      LP_F(lp_tryget, handle) +
	      LP_F(lp_tryget, reserved));
static_assert(sizeof(struct lp_stat) ==
	      LP_F(lp_stat, handle) +
	      LP_F(lp_stat, refcount) +
	      LP_F(lp_stat, id) +
	      LP_F(lp_stat, parent_id) +
	      LP_F(lp_stat, children) +
	      LP_F(lp_stat, reserved));
static_assert(sizeof(struct lp_arena_stat) ==
	      LP_F(lp_arena_stat, flavor) +
	      LP_F(lp_arena_stat, handles) +
	      LP_F(lp_arena_stat, live) +
	      LP_F(lp_arena_stat, created) +
	      LP_F(lp_arena_stat, freed) +
	      LP_F(lp_arena_stat, reserved));
static_assert(sizeof(struct lp_rmw) ==
	      LP_F(lp_rmw, value) +
	      LP_F(lp_rmw, old) +
	      LP_F(lp_rmw, new) +
	      LP_F(lp_rmw, failed) +
	      LP_F(lp_rmw, op) +
	      LP_F(lp_rmw, reserved));
static_assert(sizeof(struct lp_run) ==
	      LP_F(lp_run, op) +
	      LP_F(lp_run, handle) +
	      LP_F(lp_run, iterations) +
	      LP_F(lp_run, value) +
	      LP_F(lp_run, elapsed_ns) +
	      LP_F(lp_run, completed) +
	      LP_F(lp_run, failed) +
	      LP_F(lp_run, delta) +
	      LP_F(lp_run, broken) +
	      LP_F(lp_run, reserved));
static_assert(sizeof(struct lp_txn_configure) ==
	      LP_F(lp_txn_configure, flavor) +
	      LP_F(lp_txn_configure, max_credits) +
	      LP_F(lp_txn_configure, reserved));
static_assert(sizeof(struct lp_txn_start) ==
	      LP_F(lp_txn_start, tid) +
	      LP_F(lp_txn_start, handle) +
	      LP_F(lp_txn_start, nblocks) +
	      LP_F(lp_txn_start, reserved));
static_assert(sizeof(struct lp_txn_stop) ==
	      LP_F(lp_txn_stop, handle) +
	      LP_F(lp_txn_stop, credits) +
	      LP_F(lp_txn_stop, reserved));
static_assert(sizeof(struct lp_txn_extend) ==
	      LP_F(lp_txn_extend, handle) +
	      LP_F(lp_txn_extend, nblocks) +
	      LP_F(lp_txn_extend, credits) +
	      LP_F(lp_txn_extend, granted) +
	      LP_F(lp_txn_extend, reserved));
static_assert(sizeof(struct lp_txn_commit) ==
	      LP_F(lp_txn_commit, timeout_ms) +
	      LP_F(lp_txn_commit, slept) +
	      LP_F(lp_txn_commit, tid) +
	      LP_F(lp_txn_commit, updates) +
	      LP_F(lp_txn_commit, credits) +
	      LP_F(lp_txn_commit, wait_ns) +
	      LP_F(lp_txn_commit, reserved));
static_assert(sizeof(struct lp_txn_stat) ==
	      LP_F(lp_txn_stat, flavor) +
	      LP_F(lp_txn_stat, state) +
	      LP_F(lp_txn_stat, tid) +
	      LP_F(lp_txn_stat, updates) +
	      LP_F(lp_txn_stat, credits) +
	      LP_F(lp_txn_stat, max_credits) +
	      LP_F(lp_txn_stat, handles) +
	      LP_F(lp_txn_stat, committed) +
	      LP_F(lp_txn_stat, late_starts) +
	      LP_F(lp_txn_stat, max_wait_ns) +
	      LP_F(lp_txn_stat, overshoots) +
	      LP_F(lp_txn_stat, credits_hwm) +
	      LP_F(lp_txn_stat, reserved));
static_assert(sizeof(struct lp_delay) ==
	      LP_F(lp_delay, points) +
	      LP_F(lp_delay, usecs) +
	      LP_F(lp_delay, reserved));
#undef LP_F

#define LP_ALL_FLAVORS	((1u << LP_FLAVOR_COUNT) - 1)
#define LP_ALL_TXN_FLAVORS	((1u << LP_TXN_FLAVOR_COUNT) - 1)
#define LP_ALL_REGISTRIES	((1u << LP_REGISTRY_COUNT) - 1)
#define LP_ALL_OPS	((1ull << LP_OP_COUNT) - 1)

/* KCSAN's negative control, RUN RACY_INC: off unless loaded with it. */
static unsigned int racy_control;
module_param(racy_control, uint, 0444);
MODULE_PARM_DESC(racy_control,
		 "1: run RACY_INC, a deliberate data race (KCSAN's negative control)");

static int lp_copy_in_checked(void *dst, const void __user *argp, size_t size,
			      size_t reserved_off, size_t reserved_len)
{
	if (copy_from_user(dst, argp, size))
		return -EFAULT;
	if (memchr_inv(dst + reserved_off, 0, reserved_len))
		return -EINVAL;
	return 0;
}

/* Copy in an ioctl struct and check that its reserved area is zero. */
#define lp_copy_in(obj, argp)						\
	lp_copy_in_checked(&(obj), argp, sizeof(obj),			\
			   offsetof(typeof(obj), reserved),		\
			   sizeof_field(typeof(obj), reserved))

static long lp_copy_out(void __user *argp, const void *src, size_t size)
{
	return copy_to_user(argp, src, size) ? -EFAULT : 0;
}

/*
 * Write an ioctl struct back as it was read, before an effect that cannot
 * be undone: an argument userspace cannot write then fails with -EFAULT
 * before anything happened.
 */
#define lp_check_writable(obj, argp) lp_copy_out(argp, &(obj), sizeof(obj))

/*
 * The last copy of PUT, RMW and RUN, after an effect that cannot be
 * undone: if another thread made the argument unwritable since
 * lp_check_writable(), the op has happened, so the ioctl returns 0
 * without its answer (see lockless_uapi.h).
 */
static long lp_write_back(void __user *argp, const void *src, size_t size)
{
	lp_copy_out(argp, src, size);
	return 0;
}

/*
 * Hand the caller's reference to @g out in a new handle, all or nothing:
 * reserve the handle, copy @size bytes of @obj (whose @handle_out field
 * the reserved number is written into) to @argp, then publish. On failure
 * the reference is put and nothing stays behind.
 */
static long lp_handle_new(struct lp_arena *arena, struct lp_gadget *g,
			  void __user *argp, void *obj, size_t size,
			  u32 *handle_out)
{
	long err;

	err = lp_handle_reserve(arena, handle_out);
	if (!err) {
		err = lp_copy_out(argp, obj, size);
		if (!err) {
			lp_handle_publish(arena, *handle_out, g);
			return 0;
		}
		lp_handle_release(arena, *handle_out);
	}
	lp_gadget_put(g);
	return err;
}

/**
 * lp_identify() - answer LP_IOC_IDENTIFY
 * @argp: user pointer to a struct lp_identify
 *
 * Return: 0, -EFAULT for a bad pointer, -EINVAL for a non-zero reserved field.
 */
static long lp_identify(void __user *argp)
{
	struct lp_identify id;
	int err;

	err = lp_copy_in(id, argp);
	if (err)
		return err;

	memset(&id, 0, sizeof(id));
	strscpy(id.name, KBUILD_MODNAME, sizeof(id.name));
	id.abi_version = LP_ABI_VERSION;
	id.flavors = LP_ALL_FLAVORS;
	id.txn_flavors = LP_ALL_TXN_FLAVORS;
	id.registries = LP_ALL_REGISTRIES;
	id.ops = LP_ALL_OPS;
	if (racy_control)
		id.ops |= BIT_ULL(LP_OP_RACY_INC);
	id.live_gadgets = atomic64_read(&lp_live_gadgets);
	id.live_arenas = atomic64_read(&lp_live_arenas);
	id.live_handles = atomic64_read(&lp_live_handles);
	id.delay_points = LP_DELAY_POINTS;
	return lp_copy_out(argp, &id, sizeof(id));
}

/*
 * CONFIGURE may be repeated until the first NEW succeeds, and only while
 * no gadget exists: a gadget's flavor and registry mode, which its put
 * reads, cannot change under it. A TRYGET that read the
 * registry mode RCU just before a CONFIGURE set it back to LOCK must not
 * meet a gadget that LOCK mode frees at once: TRYGET reads the mode inside
 * its read-side critical section, and such a CONFIGURE waits for a grace
 * period before it lets a NEW in (it holds @config_rwsem, which NEW takes).
 * A TRYGET that read LOCK in an RCU arena takes the registry's lock, which
 * is safe in either mode.
 */
static long lp_configure(struct lp_arena *arena, void __user *argp)
{
	struct lp_configure c;
	bool was_rcu;
	int err;

	err = lp_copy_in(c, argp);
	if (err)
		return err;
	if (c.flavor >= LP_FLAVOR_COUNT || c.max_gadgets > LP_MAX_GADGETS ||
	    c.registry >= LP_REGISTRY_COUNT)
		return -EINVAL;
	/* LOCKED's count is a plain int under the arena mutex: no RCU mode. */
	if (c.flavor == LP_FLAVOR_LOCKED && c.registry == LP_REGISTRY_RCU)
		return -EOPNOTSUPP;

	down_write(&arena->config_rwsem);
	if (arena->configured || atomic_read(&arena->nr_gadgets)) {
		err = -EBUSY;
	} else {
		was_rcu = arena->registry_mode == LP_REGISTRY_RCU;
		WRITE_ONCE(arena->flavor, c.flavor);
		WRITE_ONCE(arena->max_gadgets,
			   c.max_gadgets ? c.max_gadgets : LP_MAX_GADGETS);
		WRITE_ONCE(arena->registry_mode, c.registry);
		if (was_rcu && c.registry != LP_REGISTRY_RCU)
			synchronize_rcu();
	}
	up_write(&arena->config_rwsem);
	return err;
}

/*
 * NEW, all or nothing: the gadget is allocated with its registry slot and
 * its handle reserved, the answer is copied out, and only then is the
 * gadget published (registered, then linked on its parent's list) and the
 * arena marked configured. NEWs in flight hold config_rwsem shared, so the
 * flavor the gadget was made for cannot change under them.
 */
static long lp_new(struct lp_arena *arena, void __user *argp)
{
	struct lp_gadget *parent = NULL, *g;
	struct lp_new n;
	int err;

	err = lp_copy_in(n, argp);
	if (err)
		return err;
	if (n.parent != LP_HANDLE_NONE) {
		err = lp_handle_get(arena, n.parent, &parent);
		if (err)
			return err;
	}

	down_read(&arena->config_rwsem);
	g = lp_gadget_alloc(arena);
	if (IS_ERR(g)) {
		err = PTR_ERR(g);
		goto out;
	}
	lp_delay(arena, LP_DELAY_NEW_ALLOC);
	err = lp_handle_reserve(arena, &n.handle);
	if (err)
		goto out_discard;
	n.id = g->id;
	err = lp_copy_out(argp, &n, sizeof(n));
	if (err)
		goto out_release;

	lp_gadget_publish(g, parent);
	WRITE_ONCE(arena->configured, true);
	lp_handle_publish(arena, n.handle, g);
	goto out;

out_release:
	lp_handle_release(arena, n.handle);
out_discard:
	lp_gadget_discard(g);
out:
	up_read(&arena->config_rwsem);
	if (parent)
		lp_gadget_put(parent);
	return err;
}

static long lp_get(struct lp_arena *arena, void __user *argp)
{
	struct lp_gadget *g;
	struct lp_get a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	err = lp_handle_get(arena, a.handle, &g);
	if (err)
		return err;
	return lp_handle_new(arena, g, argp, &a, sizeof(a), &a.new_handle);
}

/*
 * PUT cannot be undone: check that the answer can be written before the
 * handle is consumed. If another thread makes the argument unwritable in
 * between, the put has happened and PUT returns 0 without @released.
 */
static long lp_put(struct lp_arena *arena, void __user *argp)
{
	struct lp_gadget *g;
	struct lp_put a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	err = lp_check_writable(a, argp);
	if (err)
		return err;
	g = lp_handle_take(arena, a.handle);
	if (!g)
		return -EBADF;
	a.released = lp_gadget_put(g);
	return lp_write_back(argp, &a, sizeof(a));
}

static long lp_lookup(struct lp_arena *arena, void __user *argp)
{
	struct lp_gadget *parent, *child;
	struct lp_lookup a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	err = lp_handle_get(arena, a.parent, &parent);
	if (err)
		return err;
	err = lp_gadget_lookup(parent, a.id, &child);
	lp_gadget_put(parent);
	if (err)
		return err;
	return lp_handle_new(arena, child, argp, &a, sizeof(a), &a.handle);
}

static long lp_tryget(struct lp_arena *arena, void __user *argp)
{
	struct lp_tryget a;
	struct lp_gadget *g;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	err = lp_gadget_tryget(arena, a.id, &g);
	if (err)
		return err;
	lp_delay(arena, LP_DELAY_TRYGET_HELD);
	return lp_handle_new(arena, g, argp, &a, sizeof(a), &a.handle);
}

static long lp_stat(struct lp_arena *arena, void __user *argp)
{
	struct lp_gadget *g;
	struct lp_stat s;
	int err;

	err = lp_copy_in(s, argp);
	if (err)
		return err;

	mutex_lock(&arena->handles_lock);
	g = xa_load(&arena->handles, s.handle);
	if (g) {
		s.refcount = lp_gadget_refcount(g);
		s.id = g->id;
		s.parent_id = g->parent ? g->parent->id : 0;
		s.children = atomic_read(&g->nr_children);
	}
	mutex_unlock(&arena->handles_lock);
	if (!g)
		return -EBADF;
	return lp_copy_out(argp, &s, sizeof(s));
}

static long lp_arena_stat(struct lp_arena *arena, void __user *argp)
{
	struct lp_arena_stat s;
	int err;

	err = lp_copy_in(s, argp);
	if (err)
		return err;
	s.flavor = READ_ONCE(arena->flavor);
	s.handles = atomic_read(&arena->nr_handles);
	/*
	 * Acquire, paired with lp_gadget_free()'s release increment: every
	 * gadget counted in @freed was counted in @created before, so @live
	 * cannot wrap below zero.
	 */
	s.freed = atomic64_read_acquire(&arena->freed);
	s.created = atomic64_read(&arena->created);
	s.live = s.created - s.freed;
	return lp_copy_out(argp, &s, sizeof(s));
}

static long lp_rmw_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_rmw r;
	int err;

	err = lp_copy_in(r, argp);
	if (err)
		return err;
	if (!lp_op_is_rmw(r.op) || r.value > LP_RMW_VALUE_MAX)
		return -EINVAL;
	/* The op cannot be undone: as PUT, check the way back first. */
	err = lp_check_writable(r, argp);
	if (err)
		return err;
	err = lp_rmw(arena, r.op, r.value, &r);
	if (err)
		return err;
	return lp_write_back(argp, &r, sizeof(r));
}

static long lp_txn_configure_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_txn_configure c;
	int err;

	err = lp_copy_in(c, argp);
	if (err)
		return err;
	if (c.flavor >= LP_TXN_FLAVOR_COUNT || !c.max_credits ||
	    c.max_credits > LP_TXN_CREDITS_MAX)
		return -EINVAL;
	return lp_txn_configure(&arena->txn, c.flavor, c.max_credits);
}

/*
 * START, all or nothing, as NEW: reserve the handle and allocate it,
 * start it, copy the answer out, and only then publish. If the copy
 * fails, the handle is stopped again (which gives its credits back and
 * may wake a drain) and nothing stays behind. The START's wait counts
 * from the ioctl's entry.
 */
static long lp_txn_start_ioctl(struct lp_arena *arena, void __user *argp)
{
	u64 ts = ktime_get_ns();
	struct lp_txn_entry *e;
	struct lp_txn_handle *h;
	struct lp_txn_start a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	if (a.nblocks > LP_TXN_CREDITS_MAX)
		return -EINVAL;
	err = lp_txn_handle_reserve(arena, &a.handle);
	if (err)
		return err;
	e = lp_txn_entry_alloc();
	if (!e) {
		err = -ENOMEM;
		goto out_release;
	}
	h = &e->h;
	err = lp_txn_start(&arena->txn, h, a.nblocks, ts);
	if (err)
		goto out_free;
	a.tid = h->tid;
	err = lp_copy_out(argp, &a, sizeof(a));
	if (err) {
		lp_txn_stop(&arena->txn, h);
		goto out_free;
	}
	lp_txn_handle_publish(arena, a.handle, e);
	return 0;

out_free:
	lp_txn_entry_put(e);
out_release:
	lp_txn_handle_release(arena, a.handle);
	return err;
}

/*
 * STOP cannot be undone: as PUT, check that the answer can be written
 * before the handle is consumed; a failure of the last copy is ignored.
 */
static long lp_txn_stop_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_txn_entry *e;
	struct lp_txn_stop a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	err = lp_check_writable(a, argp);
	if (err)
		return err;
	e = lp_txn_handle_take(arena, a.handle);
	if (!e)
		return -EBADF;
	a.credits = lp_txn_handle_stop(arena, e);
	return lp_write_back(argp, &a, sizeof(a));
}

/*
 * EXTEND cannot be undone either. The handle's entry is pinned by a
 * reference (lp_txn_handle_get(): txn_handles_lock held for the lookup
 * only) and used under its own lock, so EXTENDs of different handles
 * run concurrently, as in jbd2, and a STOP of this one either waits for
 * the extend (whose credits its answer then includes) or comes first
 * (-EBADF, nothing granted).
 */
static long lp_txn_extend_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_txn_entry *e;
	struct lp_txn_handle *h;
	struct lp_txn_extend a;
	int err;

	err = lp_copy_in(a, argp);
	if (err)
		return err;
	if (!a.nblocks || a.nblocks > LP_TXN_CREDITS_MAX)
		return -EINVAL;
	err = lp_check_writable(a, argp);
	if (err)
		return err;

	err = lp_txn_handle_get(arena, a.handle, &e);
	if (err)
		return err;
	h = &e->h;
	spin_lock(&e->lock);
	if (e->stopped) {
		err = -EBADF;
	} else {
		err = lp_txn_extend(&arena->txn, h, a.nblocks, &a.credits);
		a.granted = h->credits;
	}
	spin_unlock(&e->lock);
	lp_txn_entry_put(e);
	if (err)
		return err;
	return lp_write_back(argp, &a, sizeof(a));
}

/* COMMIT cannot be undone: as PUT, check the way back first. */
static long lp_txn_commit_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_txn_commit c;
	int err;

	err = lp_copy_in(c, argp);
	if (err)
		return err;
	if (c.timeout_ms > LP_TXN_TIMEOUT_MAX_MS)
		return -EINVAL;
	err = lp_check_writable(c, argp);
	if (err)
		return err;
	err = lp_txn_commit(&arena->txn, c.timeout_ms, &c);
	if (err)
		return err;
	return lp_write_back(argp, &c, sizeof(c));
}

static long lp_txn_stat_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_txn_stat s;
	int err;

	err = lp_copy_in(s, argp);
	if (err)
		return err;
	lp_txn_stat(&arena->txn, &s);
	s.handles = atomic_read(&arena->nr_txn_handles);
	return lp_copy_out(argp, &s, sizeof(s));
}

static u64 lp_run_id(struct lp_arena *arena, const struct lp_run *r)
{
	if (r->value == LP_ID_NEWEST)
		return atomic64_read(&arena->next_id);
	return r->value;
}

/*
 * A TXN loop's state: the handle a TXN_EXTEND loop extends, its own, not
 * in the file's table, started lazily and stopped whenever COMMIT locks
 * the transaction (so that the drain can end), and when the loop ends;
 * and when the START being retried began: jbd2's start_this_handle()
 * takes its time once and keeps it across its retries, so that
 * t_max_wait sees the whole wait.
 */
struct lp_run_txn {
	struct lp_txn_handle h;
	u64 ts;
	bool started;
	bool retrying;
};

/* Start @h, or count a refusal and keep the START's time for the retry. */
static int lp_run_txn_start(struct lp_txn *txn, struct lp_run_txn *t,
			    struct lp_txn_handle *h, u32 nblocks)
{
	int err;

	if (!t->retrying)
		t->ts = ktime_get_ns();
	err = lp_txn_start(txn, h, nblocks, t->ts);
	t->retrying = err != 0;
	return err;
}

/*
 * One TXN_START_STOP iteration: a handle on the stack with r->value
 * credits, started and stopped. Return: 1, or 0 (r->failed counted) if
 * the start was refused.
 */
static int lp_run_txn_start_stop(struct lp_txn *txn, struct lp_run *r,
				 struct lp_run_txn *t)
{
	struct lp_txn_handle h;

	if (lp_run_txn_start(txn, t, &h, r->value)) {
		r->failed++;
		return 0;
	}
	lp_txn_stop(txn, &h);
	return 1;
}

/*
 * One TXN_EXTEND iteration: start the loop's handle if need be, extend it
 * by r->value and give the credits back at once, so the loop can run
 * forever near the limit. On -EAGAIN the handle is stopped, letting the
 * COMMIT's drain end. Return: 1 granted, or 0 (r->failed counted).
 */
static int lp_run_txn_extend(struct lp_txn *txn, struct lp_run *r,
			     struct lp_run_txn *t)
{
	u32 seen;
	int err;

	if (!t->started) {
		if (lp_run_txn_start(txn, t, &t->h, 0)) {
			r->failed++;
			return 0;
		}
		t->started = true;
	}
	err = lp_txn_extend(txn, &t->h, r->value, &seen);
	if (!err) {
		lp_txn_unextend(txn, &t->h, r->value);
		return 1;
	}
	if (err == -EAGAIN) {
		lp_txn_stop(txn, &t->h);
		t->started = false;
	}
	r->failed++;
	return 0;
}

static_assert((LP_RUN_CHECK_EVERY & (LP_RUN_CHECK_EVERY - 1)) == 0);

/*
 * LOOKUP_PUT, TRYGET_PUT, TRYGET_ATOMIC_PUT: get a gadget by id (@g's
 * child, or the arena's) and put it; TRYGET_ATOMIC_PUT's TRYGET runs
 * under a spinlock, where CONFIG_DEBUG_ATOMIC_SLEEP and lockdep catch a
 * mutex or rw_semaphore (under PREEMPT_RT too, where the spinlock is
 * preemptible but still may not sleep). Return: 1 completed, 0 gone (-ENOENT), or -errno.
 */
static int lp_run_get_put(struct lp_arena *arena, struct lp_run *r,
			  struct lp_gadget *g)
{
	struct lp_gadget *other;
	int err;

	if (r->op == LP_OP_LOOKUP_PUT) {
		err = lp_gadget_lookup(g, lp_run_id(arena, r), &other);
	} else if (r->op == LP_OP_TRYGET_ATOMIC_PUT) {
		spin_lock(&arena->atomic_ctx);
		err = lp_gadget_tryget(arena, lp_run_id(arena, r), &other);
		spin_unlock(&arena->atomic_ctx);
	} else {
		err = lp_gadget_tryget(arena, lp_run_id(arena, r), &other);
	}
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	lp_gadget_put(other);
	return 1;
}

/* An RMW op's iteration @i. Return: 1 (an RMW op always completes). */
static int lp_run_rmw(struct lp_arena *arena, struct lp_run *r, u64 i)
{
	/* The RUN handle of an RMW op is the step between operands. */
	u64 v = min_t(u64, r->value + i * (r->handle ?: 1), LP_RMW_VALUE_MAX);
	struct lp_rmw out;

	lp_rmw(arena, r->op, v, &out);
	r->failed += out.failed;
	r->delta += out.new - out.old;
	/* Once max(x, v) returned, x >= v for good (SET aside). */
	if (lp_op_is_max(r->op) && lp_max_read(arena, r->op) < v)
		r->broken++;
	return 1;
}

/*
 * One iteration of a RUN loop. Return: 1 completed, 0 not, or -errno.
 * Each op's locals live in its own function: the kernel zero-fills every
 * local at its scope's entry (CONFIG_INIT_STACK_ALL_ZERO), and in the one
 * scope of the whole switch that cost seven stores per iteration of every
 * op, EMPTY's included; Rust has no such fill.
 */
static int lp_run_one(struct lp_arena *arena, struct lp_run *r,
		      struct lp_gadget *g, struct lp_run_txn *t, u64 i)
{
	struct lp_gadget *child;

	switch (r->op) {
	case LP_OP_GET_PUT:
		lp_gadget_get(g);
		lp_gadget_put(g);
		return 1;
	case LP_OP_GET_PUT_REFCOUNT:
		lp_gadget_get_refcount(g);
		lp_gadget_put_refcount(g);
		return 1;
	case LP_OP_LOOKUP_PUT:
	case LP_OP_TRYGET_PUT:
	case LP_OP_TRYGET_ATOMIC_PUT:
		return lp_run_get_put(arena, r, g);
	case LP_OP_NEW_PUT:
		child = lp_gadget_new(arena, g);
		if (IS_ERR(child))
			return PTR_ERR(child);
		if (!lp_gadget_put(child))
			r->failed++;
		return 1;
	case LP_OP_ATOMIC_FLOOR:
		atomic_inc(&arena->floor);
		return 1;
	case LP_OP_TXN_START_STOP:
		return lp_run_txn_start_stop(&arena->txn, r, t);
	case LP_OP_TXN_EXTEND:
		return lp_run_txn_extend(&arena->txn, r, t);
	case LP_OP_EMPTY:
		return 1;
	case LP_OP_RACY_INC:
		if (r->value == 2) {
			/* No race at all: plain, under the lock. */
			spin_lock(&arena->racy_lock);
			arena->racy_locked++;
			spin_unlock(&arena->racy_lock);
			return 1;
		}
		if (r->value) {
			/* A race condition, not a data race: marked. */
			WRITE_ONCE(arena->racy_marked,
				   READ_ONCE(arena->racy_marked) + 1);
			return 1;
		}
		/* The data race KCSAN must report: plain load, add, store. */
		arena->racy++;
		return 1;
	default:
		return lp_run_rmw(arena, r, i);
	}
}

/**
 * lp_run() - answer LP_IOC_RUN: a loop of one op in the caller's context
 * @arena: the arena
 * @argp: user pointer to a struct lp_run
 *
 * GET_PUT, GET_PUT_REFCOUNT, LOOKUP_PUT and NEW_PUT hold their own
 * reference to the handle's gadget for the whole loop, so a concurrent PUT
 * of the handle cannot free it. After each MAX op, its copy of the variable
 * is read again (lp_max_read()) and @broken counts the ops it found below
 * their operand.
 * TXN_EXTEND's handle, if started, is stopped however the loop ends. The
 * fatal-signal test and cond_resched() run once every LP_RUN_CHECK_EVERY
 * iterations, not on each: EMPTY's RUN shows what is left per iteration.
 *
 * Return: 0 or -errno (see struct lp_run).
 */
static long lp_run(struct lp_arena *arena, void __user *argp)
{
	struct lp_run_txn t = { .started = false, .retrying = false };
	struct lp_gadget *g = NULL;
	u64 i, start, completed = 0;
	struct lp_run r;
	int err;

	err = lp_copy_in(r, argp);
	if (err)
		return err;
	/* @value: an RMW operand, an id, a TXN op's credits, or ignored. */
	if (r.op == LP_OP_RACY_INC && !racy_control)
		return -EOPNOTSUPP;
	if (r.op == LP_OP_RACY_INC && r.value > 2)
		return -EINVAL;
	if ((r.op >= LP_OP_COUNT && r.op != LP_OP_RACY_INC) ||
	    (lp_op_is_rmw(r.op) && r.value > LP_RMW_VALUE_MAX) ||
	    (r.op == LP_OP_TXN_EXTEND &&
	     (!r.value || r.value > LP_TXN_CREDITS_MAX)) ||
	    (r.op == LP_OP_TXN_START_STOP && r.value > LP_TXN_CREDITS_MAX))
		return -EINVAL;
	if (r.iterations > LP_RUN_MAX_ITERATIONS)
		return -E2BIG;
	/* The loop cannot be undone: as PUT, check the way back first. */
	err = lp_check_writable(r, argp);
	if (err)
		return err;
	if (r.op == LP_OP_GET_PUT || r.op == LP_OP_LOOKUP_PUT ||
	    r.op == LP_OP_NEW_PUT || r.op == LP_OP_GET_PUT_REFCOUNT) {
		err = lp_handle_get(arena, r.handle, &g);
		if (err)
			return err;
	}
	/*
	 * TRYGET_ATOMIC_PUT has no handle to fix the flavor: hold off
	 * CONFIGURE, so that an arena found not LOCKED stays so.
	 */
	if (r.op == LP_OP_TRYGET_ATOMIC_PUT)
		down_read(&arena->config_rwsem);
	if ((r.op == LP_OP_LOOKUP_PUT &&
	     (READ_ONCE(arena->flavor) == LP_FLAVOR_LOCKED ||
	      READ_ONCE(arena->flavor) == LP_FLAVOR_LOCKLESS)) ||
	    (r.op == LP_OP_GET_PUT_REFCOUNT &&
	     READ_ONCE(arena->flavor) != LP_FLAVOR_LOCKLESS) ||
	    (r.op == LP_OP_TRYGET_ATOMIC_PUT &&
	     READ_ONCE(arena->flavor) == LP_FLAVOR_LOCKED)) {
		err = -EOPNOTSUPP;
		goto out;
	}

	r.failed = 0;
	r.delta = 0;
	r.broken = 0;
	start = ktime_get_ns();
	for (i = 0; i < r.iterations; i++) {
		err = lp_run_one(arena, &r, g, &t, i);
		if (err < 0)
			goto out;
		completed += err;
		if ((i + 1) % LP_RUN_CHECK_EVERY)
			continue;
		/* Dying: nobody will read the answer (no -EINTR, see uapi). */
		if (fatal_signal_pending(current)) {
			err = -EINTR;
			goto out;
		}
		cond_resched();
	}
	r.elapsed_ns = ktime_get_ns() - start;
	r.completed = completed;
	if (r.op == LP_OP_RACY_INC && r.value == 2) {
		spin_lock(&arena->racy_lock);
		r.delta = arena->racy_locked;
		spin_unlock(&arena->racy_lock);
	} else if (r.op == LP_OP_RACY_INC && r.value) {
		r.delta = READ_ONCE(arena->racy_marked);
	} else if (r.op == LP_OP_RACY_INC) {
		/* Not the control: the increments are; KCSAN may skip this one. */
		r.delta = data_race(arena->racy);
	}
	err = lp_write_back(argp, &r, sizeof(r));
out:
	if (r.op == LP_OP_TRYGET_ATOMIC_PUT)
		up_read(&arena->config_rwsem);
	if (t.started)
		lp_txn_stop(&arena->txn, &t.h);
	if (g)
		lp_gadget_put(g);
	return err;
}

/*
 * The race tests' window widener (not part of the contract): which points
 * of this arena stall, and for how long; lp_delay() reads both.
 */
static long lp_delay_ioctl(struct lp_arena *arena, void __user *argp)
{
	struct lp_delay d;
	int err;

	err = lp_copy_in(d, argp);
	if (err)
		return err;
	if (d.points & ~LP_DELAY_POINTS || d.usecs > LP_DELAY_USECS_MAX)
		return -EINVAL;
	if (!LP_DELAY_POINTS)
		return -EOPNOTSUPP;
	WRITE_ONCE(arena->delay_usecs, d.usecs);
	WRITE_ONCE(arena->delay_points, d.points);
	return 0;
}

static long lp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct lp_arena *arena = file->private_data;
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case LP_IOC_IDENTIFY:
		return lp_identify(argp);
	case LP_IOC_CONFIGURE:
		return lp_configure(arena, argp);
	case LP_IOC_NEW:
		return lp_new(arena, argp);
	case LP_IOC_GET:
		return lp_get(arena, argp);
	case LP_IOC_PUT:
		return lp_put(arena, argp);
	case LP_IOC_LOOKUP:
		return lp_lookup(arena, argp);
	case LP_IOC_TRYGET:
		return lp_tryget(arena, argp);
	case LP_IOC_STAT:
		return lp_stat(arena, argp);
	case LP_IOC_ARENA_STAT:
		return lp_arena_stat(arena, argp);
	case LP_IOC_RMW:
		return lp_rmw_ioctl(arena, argp);
	case LP_IOC_RUN:
		return lp_run(arena, argp);
	case LP_IOC_TXN_CONFIGURE:
		return lp_txn_configure_ioctl(arena, argp);
	case LP_IOC_TXN_START:
		return lp_txn_start_ioctl(arena, argp);
	case LP_IOC_TXN_STOP:
		return lp_txn_stop_ioctl(arena, argp);
	case LP_IOC_TXN_EXTEND:
		return lp_txn_extend_ioctl(arena, argp);
	case LP_IOC_TXN_COMMIT:
		return lp_txn_commit_ioctl(arena, argp);
	case LP_IOC_TXN_STAT:
		return lp_txn_stat_ioctl(arena, argp);
	case LP_IOC_DELAY:
		return lp_delay_ioctl(arena, argp);
	default:
		return -ENOTTY;
	}
}

static int lp_open(struct inode *inode, struct file *file)
{
	struct lp_arena *arena = lp_arena_new();

	if (!arena)
		return -ENOMEM;
	file->private_data = arena;
	return 0;
}

/*
 * close(): put every handle still held, which frees every gadget, and
 * stop every transaction handle, then free the arena; only then does it
 * stop counting.
 */
static int lp_release(struct inode *inode, struct file *file)
{
	struct lp_arena *arena = file->private_data;

	lp_arena_release_handles(arena);
	lp_txn_release_handles(arena);
	lp_arena_free(arena);
	return 0;
}

static const struct file_operations lp_fops = {
	.owner		= THIS_MODULE,
	.open		= lp_open,
	.release	= lp_release,
	.unlocked_ioctl	= lp_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

static struct miscdevice lp_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "lockless_c",
	.fops	= &lp_fops,
};

/**
 * lp_check_leaks() - WARN at module exit if any object is still alive
 *
 * No file can be open at exit (each holds a reference to the module), and
 * closing the last one frees every arena, gadget and handle, so a non-zero
 * live counter is a leak: one that kmemleak may miss when a stale pointer
 * still refers to the object. The WARN fails the run.
 */
static void lp_check_leaks(void)
{
	s64 arenas = atomic64_read(&lp_live_arenas);
	s64 gadgets = atomic64_read(&lp_live_gadgets);
	s64 handles = atomic64_read(&lp_live_handles);

	WARN(arenas || gadgets || handles,
	     KBUILD_MODNAME ": leaked %lld arenas, %lld gadgets, %lld handles\n",
	     arenas, gadgets, handles);
}

static int __init lp_init(void)
{
	int err = -ENOMEM;

	lp_arena_cache = KMEM_CACHE(lp_arena, 0);
	if (!lp_arena_cache)
		return err;
	lp_gadget_cache = KMEM_CACHE(lp_gadget, 0);
	if (!lp_gadget_cache)
		goto out_arenas;
	err = misc_register(&lp_miscdev);
	if (err)
		goto out_gadgets;
	return 0;

out_gadgets:
	kmem_cache_destroy(lp_gadget_cache);
out_arenas:
	kmem_cache_destroy(lp_arena_cache);
	return err;
}

/*
 * After the counters' WARN, the caches' own: kmem_cache_destroy() WARNs
 * if an object is still allocated from it, freed or not in the counts.
 */
static void __exit lp_exit(void)
{
	misc_deregister(&lp_miscdev);
	lp_check_leaks();
	kmem_cache_destroy(lp_gadget_cache);
	kmem_cache_destroy(lp_arena_cache);
}

module_init(lp_init);
module_exit(lp_exit);

MODULE_DESCRIPTION("lockless-parity: lockless RMW patterns, C reference");
MODULE_LICENSE("GPL");
