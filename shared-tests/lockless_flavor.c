// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_flavor.c - the flavor fixture: the refcounted gadgets, one
 * variant per module x reference-counting flavor (flavor.c_locked.* ...
 * flavor.rust_kref_rwsem.*). The refcount seen through STAT, the final
 * put that frees once, parents and children, LOOKUP and TRYGET before and
 * after release, the gadget limit, a deep chain released by one put,
 * close() with live handles, RUN loops; get/put storms and the races of
 * lookups, trygets and handle ops against final puts (ioctl-driven and
 * in the kernel); and every allocation of every call failing.
 *
 * Part of the driver, #included by lockless_test.c.
 */
#include "lockless_test.h"

/*
 * ---- gadgets: one fixture over device x flavor x registry -------------
 *
 * LOCKLESS and KREF_MUTEX run again with an RCU registry (TRYGET under
 * rcu_read_lock() alone, frees after a grace period): the same tests, the
 * same answers. They are the two RCU paths of each module: atomic_t and
 * Arc (atomic_inc_not_zero(), Arc::drop_with_rcu()), kref and an
 * intrusive Refcount in a KBox (kref_get_unless_zero(), KBox::drop_rcu());
 * the other flavors differ from them in their put's lock only, which the
 * registry mode leaves alone, and meet RCU arenas in the fuzz, the
 * bad-input sweep and the demo. LOCKED has no RCU mode.
 */

FIXTURE(flavor)
{
	int fd;
	struct lp_identify id;
};

FIXTURE_VARIANT(flavor)
{
	const char *path;
	const char *module;
	bool reference;
	__u32 flavor;
	__u32 registry;
};

FIXTURE_VARIANT_ADD(flavor, c_locked)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKED,
};

FIXTURE_VARIANT_ADD(flavor, c_lockless)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKLESS,
};

FIXTURE_VARIANT_ADD(flavor, c_weak_cmpxchg)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_WEAK_CMPXCHG,
};

FIXTURE_VARIANT_ADD(flavor, c_kref_mutex)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_MUTEX,
};

FIXTURE_VARIANT_ADD(flavor, c_kref_lock)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_LOCK,
};

FIXTURE_VARIANT_ADD(flavor, c_kref_rwsem)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_RWSEM,
};

FIXTURE_VARIANT_ADD(flavor, rust_locked)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKED,
};

FIXTURE_VARIANT_ADD(flavor, rust_lockless)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKLESS,
};

FIXTURE_VARIANT_ADD(flavor, rust_weak_cmpxchg)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_WEAK_CMPXCHG,
};

FIXTURE_VARIANT_ADD(flavor, rust_kref_mutex)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_MUTEX,
};

FIXTURE_VARIANT_ADD(flavor, rust_kref_lock)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_LOCK,
};

FIXTURE_VARIANT_ADD(flavor, rust_kref_rwsem)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_RWSEM,
};

FIXTURE_VARIANT_ADD(flavor, c_lockless_rcu)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKLESS,
	.registry = LP_REGISTRY_RCU,
};

FIXTURE_VARIANT_ADD(flavor, c_kref_mutex_rcu)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_MUTEX,
	.registry = LP_REGISTRY_RCU,
};

FIXTURE_VARIANT_ADD(flavor, rust_lockless_rcu)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_LOCKLESS,
	.registry = LP_REGISTRY_RCU,
};

FIXTURE_VARIANT_ADD(flavor, rust_kref_mutex_rcu)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
	.flavor = LP_FLAVOR_KREF_MUTEX,
	.registry = LP_REGISTRY_RCU,
};

FIXTURE_SETUP(flavor)
{
	self->fd = open(variant->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s (is %s.ko loaded?)",
				      variant->path, strerror(errno),
				      variant->module);
	ASSERT_EQ(0, lpu_identify(self->fd, &self->id));
	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << variant->flavor, 0))
		return;
	ASSERT_EQ(1u << variant->registry,
		  self->id.registries & 1u << variant->registry)
		TH_LOG("%s must implement registry %s", variant->module,
		       registry_names[variant->registry]);
	ASSERT_EQ(0, lpu_configure_registry(self->fd, variant->flavor,
					    variant->registry));
}

FIXTURE_TEARDOWN(flavor)
{
	if (self->fd >= 0)
		close(self->fd);
	expect_module_clean(_metadata, variant->path);
}

TEST_F(flavor, refcount_arithmetic_seen_through_stat)
{
	struct lp_arena_stat as;
	struct lp_stat st;
	__u32 root, child, extra[3];
	__u64 rid, cid;
	int i;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, &rid));
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(1, st.refcount);
	EXPECT_EQ(rid, st.id);
	EXPECT_EQ(0, st.parent_id);
	EXPECT_EQ(0, st.children);
	EXPECT_NE(0, rid);

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, lpu_get(self->fd, root, &extra[i]));
	ASSERT_EQ(0, lpu_stat(self->fd, extra[1], &st));
	EXPECT_EQ(4, st.refcount);
	EXPECT_EQ(rid, st.id);

	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));
	EXPECT_NE(rid, cid);
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(5, st.refcount);
	EXPECT_EQ(1, st.children);
	ASSERT_EQ(0, lpu_stat(self->fd, child, &st));
	EXPECT_EQ(1, st.refcount);
	EXPECT_EQ(cid, st.id);
	EXPECT_EQ(rid, st.parent_id);

	for (i = 0; i < 3; i++)
		EXPECT_EQ(0, lpu_put(self->fd, extra[i]));
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(2, st.refcount);

	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(variant->flavor, as.flavor);
	EXPECT_EQ(2, as.handles);
	EXPECT_EQ(2, as.live);
	EXPECT_EQ(2, as.created);
	EXPECT_EQ(0, as.freed);
}

TEST_F(flavor, final_put_frees_once)
{
	struct lp_arena_stat as;
	__u32 h, h2;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h, NULL));
	ASSERT_EQ(0, lpu_get(self->fd, h, &h2));
	EXPECT_EQ(0, lpu_put(self->fd, h));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(1, as.live);
	EXPECT_EQ(0, as.freed);
	EXPECT_EQ(1, lpu_put(self->fd, h2));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(1, as.freed);
	EXPECT_EQ(0, as.handles);
	/* The handle is consumed: a second put cannot free again. */
	EXPECT_EQ(-EBADF, lpu_put(self->fd, h2));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(1, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
}

TEST_F(flavor, parent_outlives_children_and_goes_with_the_last)
{
	struct lp_arena_stat as;
	struct lp_stat st;
	__u32 root, a, b, a2;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &a, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &b, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, a, &a2, NULL));
	EXPECT_EQ(0, lpu_put(self->fd, root));
	EXPECT_EQ(0, lpu_put(self->fd, a));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(4, as.live);
	ASSERT_EQ(0, lpu_stat(self->fd, b, &st));
	EXPECT_EQ(1, st.refcount);
	/* a2 goes, and takes a (its last reference) with it; root stays. */
	EXPECT_EQ(2, lpu_put(self->fd, a2));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(2, as.live);
	/* The last child takes the parent with it. */
	EXPECT_EQ(2, lpu_put(self->fd, b));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(4, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
}

TEST_F(flavor, lookup_finds_live_child_and_enoent_once_released)
{
	struct lp_stat st;
	__u32 root, child, h = 0;
	__u64 cid;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));
	if (!has_child_list(variant->flavor)) {
		EXPECT_EQ(-EOPNOTSUPP, lpu_lookup(self->fd, root, cid, &h));
		return;
	}
	ASSERT_EQ(0, lpu_lookup(self->fd, root, cid, &h));
	ASSERT_EQ(0, lpu_stat(self->fd, h, &st));
	EXPECT_EQ(cid, st.id);
	EXPECT_EQ(2, st.refcount);
	EXPECT_EQ(-ENOENT, lpu_lookup(self->fd, root, cid + 100, &h));
	EXPECT_EQ(0, lpu_put(self->fd, h));
	EXPECT_EQ(1, lpu_put(self->fd, child));
	EXPECT_EQ(-ENOENT, lpu_lookup(self->fd, root, cid, &h));
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(1, st.refcount);
	EXPECT_EQ(0, st.children);
}

TEST_F(flavor, tryget_succeeds_on_live_and_enoent_once_released)
{
	struct lp_stat st;
	__u32 root, child, h = 0;
	__u64 rid, cid;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, &rid));
	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));
	ASSERT_EQ(0, lpu_tryget(self->fd, cid, &h));
	ASSERT_EQ(0, lpu_stat(self->fd, h, &st));
	EXPECT_EQ(cid, st.id);
	EXPECT_EQ(2, st.refcount);
	EXPECT_EQ(0, lpu_put(self->fd, h));
	EXPECT_EQ(1, lpu_put(self->fd, child));
	EXPECT_EQ(-ENOENT, lpu_tryget(self->fd, cid, &h));
	/* Roots are registered too. */
	ASSERT_EQ(0, lpu_tryget(self->fd, rid, &h));
	EXPECT_EQ(0, lpu_put(self->fd, h));
	EXPECT_EQ(1, lpu_put(self->fd, root));
	EXPECT_EQ(-ENOENT, lpu_tryget(self->fd, rid, &h));
}

/*
 * TRYGET under a spinlock: RUN TRYGET_ATOMIC_PUT holds one around it,
 * and CONFIG_DEBUG_ATOMIC_SLEEP and lockdep report (a kernel splat, a
 * failed run) a mutex or rw_semaphore taken in it; under PREEMPT_RT,
 * where the spinlock is an rtmutex, the section is preemptible but still
 * may not sleep, and both report the same. RCU mode takes no
 * lock at all, LOCK mode the registry's spinlock. LOCKED is left out, as
 * its TRYGET takes the arena mutex: the RUN answers -EOPNOTSUPP.
 */
TEST_F(flavor, tryget_takes_no_sleeping_lock)
{
	__u32 root, child;
	struct lp_run run;
	__u64 cid;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_TRYGET_ATOMIC_PUT))
		return;
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));
	if (variant->flavor == LP_FLAVOR_LOCKED) {
		EXPECT_EQ(-EOPNOTSUPP, lpu_run(self->fd, LP_OP_TRYGET_ATOMIC_PUT,
					       0, 1, cid, &run));
	} else {
		ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_ATOMIC_PUT, 0, 1000,
				     cid, &run));
		EXPECT_EQ(1000, run.completed);
	}
	EXPECT_EQ(1, lpu_put(self->fd, child));
	if (variant->flavor != LP_FLAVOR_LOCKED) {
		/* Gone: a failed lookup, not counted. */
		ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_ATOMIC_PUT, 0, 10,
				     cid, &run));
		EXPECT_EQ(0, run.completed);
	}
	EXPECT_EQ(1, lpu_put(self->fd, root));
}

/*
 * An arena holds at most max_gadgets live gadgets (CONFIGURE; default
 * LP_MAX_GADGETS): NEW, with or without a parent, and RUN NEW_PUT answer
 * -EDQUOT at the limit and change nothing, and a freed gadget makes room.
 */
TEST_F(flavor, gadget_limit_is_edquot_and_exact)
{
	struct lp_configure c = { .flavor = variant->flavor, .max_gadgets = 4,
				  .registry = variant->registry };
	struct lp_arena_stat as;
	__u32 h[4], extra;
	struct lp_run run;
	int i;

	ASSERT_EQ(0, lpu_call(self->fd, LP_IOC_CONFIGURE, &c));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h[i], NULL));
	/* A child counts like a root. */
	ASSERT_EQ(0, lpu_new(self->fd, h[0], &h[3], NULL));
	EXPECT_EQ(-EDQUOT, lpu_new(self->fd, LP_HANDLE_NONE, &extra, NULL));
	EXPECT_EQ(-EDQUOT, lpu_new(self->fd, h[1], &extra, NULL));
	EXPECT_EQ(-EDQUOT, lpu_run(self->fd, LP_OP_NEW_PUT, h[2], 1, 0, &run));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(4, as.created);
	EXPECT_EQ(4, as.live);
	EXPECT_EQ(4, as.handles);
	/* The limit is fixed with the flavor by the first NEW. */
	c.max_gadgets = 0;
	EXPECT_EQ(-EBUSY, lpu_call(self->fd, LP_IOC_CONFIGURE, &c));
	/* A freed gadget makes room for exactly one. */
	EXPECT_EQ(1, lpu_put(self->fd, h[3]));
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_NEW_PUT, h[2], 100, 0, &run));
	EXPECT_EQ(100, run.completed);
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h[3], NULL));
	EXPECT_EQ(-EDQUOT, lpu_new(self->fd, LP_HANDLE_NONE, &extra, NULL));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(1, lpu_put(self->fd, h[i]));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(as.created, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
}

TEST_F_TIMEOUT(flavor, deep_chain_released_by_one_put, LPU_SLOW_TIMEOUT)
{
	struct lp_arena_stat as;
	double t0 = now_s(), t1;
	unsigned long long i;
	__u32 h, next;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h, NULL));
	for (i = 1; i < sizes.chain_depth; i++) {
		ASSERT_EQ(0, lpu_new(self->fd, h, &next, NULL));
		ASSERT_EQ(0, lpu_put(self->fd, h));
		h = next;
	}
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(sizes.chain_depth, as.live);
	EXPECT_EQ(1, as.handles);
	t1 = now_s();
	EXPECT_EQ(sizes.chain_depth, lpu_put(self->fd, h));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(sizes.chain_depth, as.freed);
	TH_LOG("built %llu levels in %.1f s, released by one put in %.1f s",
	       sizes.chain_depth, t1 - t0, now_s() - t1);
}

TEST_F(flavor, close_with_live_handles_frees_everything)
{
	__u32 root, a, b, h;
	__u64 aid;
	int fd;

	fd = open(variant->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, lpu_configure_registry(fd, variant->flavor,
					    variant->registry));
	ASSERT_EQ(0, lpu_new(fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(fd, root, &a, &aid));
	ASSERT_EQ(0, lpu_new(fd, a, &b, NULL));
	ASSERT_EQ(0, lpu_get(fd, b, &h));
	ASSERT_EQ(0, lpu_tryget(fd, aid, &h));
	EXPECT_EQ(3, module_live(self->fd));
	close(fd);
	EXPECT_EQ(0, module_live(self->fd));
}

TEST_F(flavor, run_loops_complete_and_keep_the_count)
{
	struct lp_stat st;
	struct lp_run run;
	__u32 root, child;
	__u64 cid;

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));

	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_GET_PUT, child, LPU_RUN_ITERATIONS, 0, &run));
	EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	ASSERT_EQ(0, lpu_stat(self->fd, child, &st));
	EXPECT_EQ(1, st.refcount);

	/* GET_PUT on refcount_t: LOCKLESS only. */
	if (variant->flavor == LP_FLAVOR_LOCKLESS) {
		ASSERT_EQ(0, lpu_run(self->fd, LP_OP_GET_PUT_REFCOUNT, child,
				     LPU_RUN_ITERATIONS, 0, &run));
		EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	} else {
		EXPECT_EQ(-EOPNOTSUPP, lpu_run(self->fd, LP_OP_GET_PUT_REFCOUNT,
					       child, LPU_RUN_ITERATIONS, 0, &run));
	}
	ASSERT_EQ(0, lpu_stat(self->fd, child, &st));
	EXPECT_EQ(1, st.refcount);

	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_PUT, 0, LPU_RUN_ITERATIONS, cid, &run));
	EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	ASSERT_EQ(0, lpu_stat(self->fd, child, &st));
	EXPECT_EQ(1, st.refcount);

	if (has_child_list(variant->flavor)) {
		ASSERT_EQ(0, lpu_run(self->fd, LP_OP_LOOKUP_PUT, root,
				     LPU_RUN_ITERATIONS, cid, &run));
		EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	} else {
		EXPECT_EQ(-EOPNOTSUPP, lpu_run(self->fd, LP_OP_LOOKUP_PUT, root,
					       LPU_RUN_ITERATIONS, cid, &run));
	}
	ASSERT_EQ(0, lpu_stat(self->fd, child, &st));
	EXPECT_EQ(1, st.refcount);
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(2, st.refcount);

	/* A gone gadget: the loop completes nothing and frees nothing twice. */
	EXPECT_EQ(0, lpu_put(self->fd, root));
	EXPECT_EQ(2, lpu_put(self->fd, child));
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_PUT, 0, 100, cid, &run));
	EXPECT_EQ(0, run.completed);
	EXPECT_EQ(0, module_live(self->fd));
}

/* Get/put storm: T pinned threads on one gadget, by ioctl and in-kernel. */
struct storm {
	int fd;
	__u32 handle;
	bool refcount;
	int errors;
};

static void *storm_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct storm *sh = t->shared;
	struct lp_stat st;
	struct lp_run run;
	__u32 h, op;
	int i;

	/*
	 * STAT between the GET and the PUT reads the count while the other
	 * threads change it, and must see at least the two references held
	 * meanwhile (the handle's own and this GET's). LOCKED's plain count
	 * must be read under the lock it is written under; KCSAN (KIND=kcsan)
	 * watches for that, but samples: the full preset's 4 x 1,000 STATs
	 * did not catch a read without the lock.
	 */
	for (i = 0; i < sizes.storm_ioctls; i++) {
		if (lpu_get(sh->fd, sh->handle, &h) ||
		    lpu_stat(sh->fd, h, &st) || st.refcount < 2 ||
		    lpu_put(sh->fd, h) != 0)
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
	}
	/* LOCKLESS: half the loops count with refcount_t, against the rest. */
	op = sh->refcount && (t->index & 1) ? LP_OP_GET_PUT_REFCOUNT :
					      LP_OP_GET_PUT;
	if (lpu_run(sh->fd, op, sh->handle, sizes.storm_run, 0, &run) ||
	    run.completed != sizes.storm_run)
		__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
	return NULL;
}

TEST_F_TIMEOUT(flavor, get_put_storm_keeps_the_count, LPU_SLOW_TIMEOUT)
{
	struct storm sh = {
		.fd = self->fd,
		.refcount = variant->flavor == LP_FLAVOR_LOCKLESS,
	};
	struct lp_arena_stat as;
	struct lp_stat st;
	__u32 root;

	ASSERT_LE(4, nr_cpus());
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &sh.handle, NULL));
	run_threads(nr_cpus(), storm_thread, &sh);
	EXPECT_EQ(0, sh.errors);
	ASSERT_EQ(0, lpu_stat(self->fd, sh.handle, &st));
	EXPECT_EQ(1, st.refcount);
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	EXPECT_EQ(2, st.refcount);
	EXPECT_EQ(0, lpu_put(self->fd, root));
	EXPECT_EQ(2, lpu_put(self->fd, sh.handle));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(as.created, as.freed);
}

/*
 * The final-put race: half the threads create short-lived children of one
 * root and put them at once; the other half LOOKUP (flavors with a child
 * list) and TRYGET the children just published, and put what they got,
 * which may then be the final put. Every answer must be a handle or
 * -ENOENT, and at the end every child was freed exactly once.
 */
struct race {
	int fd;
	__u32 root;
	bool lookup;
	int creators;
	__u64 published[64];
	int done;
	int bad;
	__u64 found, gone, final_by_racer;
};

/*
 * A racer's step in the ioctl-driven final-put races: pick one of the ids
 * the creators published, upgrade it (LOOKUP under @root half the time
 * if @lookup, else TRYGET) and, half the time, hold the new reference a
 * while, so that the creator's put comes first and the racer's is the
 * final one: otherwise, with two ioctls against one, the racer's put
 * almost always comes first. Counts the upgrades in @found and the ids
 * found gone in @gone. Return: 1 with the new handle in @h, 0 if there
 * was nothing to upgrade, -1 on an answer that is neither.
 */
static int race_upgrade(int fd, const __u64 *published, int creators,
			bool lookup, __u32 root, __u32 *s, __u64 *found,
			__u64 *gone, __u32 *h)
{
	__u64 id = __atomic_load_n(&published[rnd(s) % creators],
				   __ATOMIC_ACQUIRE);
	int ret;

	if (!id)
		return 0;
	if (lookup && (rnd(s) & 1))
		ret = lpu_lookup(fd, root, id, h);
	else
		ret = lpu_tryget(fd, id, h);
	if (ret == -ENOENT) {
		++*gone;
		return 0;
	}
	if (ret)
		return -1;
	++*found;
	if (rnd(s) & 1)
		usleep(200);
	return 1;
}

/*
 * A creator's pause between publishing child @i and putting it: every
 * 16th of the first 128 children, 200 us, in which a racer finds the
 * child alive. Without it, a racer finds one alive only if its upgrade
 * lands within the few hundred instructions between the publish and
 * the put's decrement: on a vCPU of its own (x86's thread per vCPU) it
 * often does; with arm64's vCPUs run in turn in one TCG thread, which
 * switch only at a sleep, a wfe or yield, or a timer tick, it almost
 * never does ("0 upgrades won"). Bounded, so that the rest of the run is
 * the unwidened race.
 */
static void race_pause(int i)
{
	if (i < 128 && i % 16 == 0)
		usleep(200);
}

static void *race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct race *sh = t->shared;
	__u32 s = 1 + t->index, h;
	__u64 id, found = 0, gone = 0, final = 0;
	int i, ret;

	if (t->index < sh->creators) {
		for (i = 0; i < sizes.race_children; i++) {
			if (lpu_new(sh->fd, sh->root, &h, &id)) {
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
				continue;
			}
			__atomic_store_n(&sh->published[t->index], id,
					 __ATOMIC_RELEASE);
			race_pause(i);
			if (lpu_put(sh->fd, h) < 0)
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		}
		__atomic_fetch_add(&sh->done, 1, __ATOMIC_RELEASE);
		return NULL;
	}
	while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < sh->creators) {
		ret = race_upgrade(sh->fd, sh->published, sh->creators,
				   sh->lookup, sh->root, &s, &found, &gone, &h);
		if (ret < 0)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		if (ret <= 0)
			continue;
		ret = lpu_put(sh->fd, h);
		if (ret < 0)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		else if (ret == 1)
			final++;
	}
	__atomic_fetch_add(&sh->found, found, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->gone, gone, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->final_by_racer, final, __ATOMIC_RELAXED);
	return NULL;
}

TEST_F_TIMEOUT(flavor, lookups_and_trygets_race_final_puts, LPU_SLOW_TIMEOUT)
{
	struct race sh = { .fd = self->fd };
	struct lp_arena_stat as;
	int n = nr_cpus();
	double t0;

	ASSERT_LE(4, n);
	if (n > 64)
		n = 64;
	sh.creators = n / 2;
	sh.lookup = has_child_list(variant->flavor);
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &sh.root, NULL));
	t0 = now_s();
	run_threads(n, race_thread, &sh);
	EXPECT_EQ(0, sh.bad);
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ((__u64)sh.creators * sizes.race_children + 1, as.created);
	EXPECT_EQ(1, as.live);
	EXPECT_EQ(1, lpu_put(self->fd, sh.root));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(as.created, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
	/*
	 * The race must have happened: some upgrades won, some found the
	 * child gone, and some racer's put was a child's final put.
	 */
	EXPECT_NE(0, sh.found);
	EXPECT_NE(0, sh.gone);
	EXPECT_NE(0, sh.final_by_racer);
	TH_LOG("%llu racing final puts in %.1f s: %llu upgrades won",
	       (unsigned long long)as.created - 1, now_s() - t0,
	       (unsigned long long)sh.found);
	TH_LOG("%llu final puts done by a racer, %llu found the child gone",
	       (unsigned long long)sh.final_by_racer,
	       (unsigned long long)sh.gone);
}

/*
 * The same race where each final put frees the parent too: a creator
 * makes a root and a child of it, drops the root's handle (the child's
 * reference is then the root's only one), publishes the child and puts
 * it, while racers TRYGET the child by id and put what they got. In the
 * flavors whose put takes its owner's sleeping lock (KREF_MUTEX,
 * KREF_RWSEM), a TRYGET that lands while the creator's put waits for that
 * lock makes the put's decrement not the last; the racer's final put may
 * then free the child and the root, and the root's lock with it, while
 * the creator's unlock may still be touching the lock: the put must keep
 * the owner pinned (lp_owner_pin(), owner_pin()). KASAN reports a put that
 * does not.
 */
struct parent_race {
	int fd;
	int creators;
	__u64 published[64];
	int done;
	int bad;
	__u64 found, gone, final_by_racer, released;
};

static void *parent_race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct parent_race *sh = t->shared;
	__u32 s = 1 + t->index, root, child, h;
	__u64 id, found = 0, gone = 0, final = 0, released = 0;
	int i, ret;

	if (t->index < sh->creators) {
		for (i = 0; i < sizes.race_children / 2; i++) {
			if (lpu_new(sh->fd, LP_HANDLE_NONE, &root, NULL)) {
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
				continue;
			}
			if (lpu_new(sh->fd, root, &child, &id)) {
				lpu_put(sh->fd, root);
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
				continue;
			}
			/* The root lives on in its child alone. */
			if (lpu_put(sh->fd, root) != 0)
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&sh->published[t->index], id,
					 __ATOMIC_RELEASE);
			race_pause(i);
			ret = lpu_put(sh->fd, child);
			if (ret < 0)
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			else
				released += ret;
		}
		__atomic_fetch_add(&sh->released, released, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->done, 1, __ATOMIC_RELEASE);
		return NULL;
	}
	/* TRYGET only: the root's handle is gone, LOOKUP has no parent. */
	while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < sh->creators) {
		ret = race_upgrade(sh->fd, sh->published, sh->creators, false,
				   LP_HANDLE_NONE, &s, &found, &gone, &h);
		if (ret < 0)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		if (ret <= 0)
			continue;
		/*
		 * 2: the child and, with it, its root; 1: the child only,
		 * when a put that pinned the root still holds it (the root
		 * then goes with that put); 0: not the last.
		 */
		ret = lpu_put(sh->fd, h);
		if (ret < 0 || ret > 2) {
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		} else if (ret) {
			final++;
			released += ret;
		}
	}
	__atomic_fetch_add(&sh->released, released, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->found, found, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->gone, gone, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->final_by_racer, final, __ATOMIC_RELAXED);
	return NULL;
}

TEST_F_TIMEOUT(flavor, trygets_race_final_puts_that_free_the_parent,
	       LPU_SLOW_TIMEOUT)
{
	struct parent_race sh = { .fd = self->fd };
	struct lp_arena_stat as;
	int n = nr_cpus();
	double t0;

	ASSERT_LE(4, n);
	if (n > 64)
		n = 64;
	sh.creators = n / 2;
	t0 = now_s();
	run_threads(n, parent_race_thread, &sh);
	EXPECT_EQ(0, sh.bad);
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ((__u64)sh.creators * (sizes.race_children / 2) * 2,
		  as.created);
	EXPECT_EQ(as.created, as.freed);
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(0, module_live(self->fd));
	/* Every gadget was released by exactly one put. */
	EXPECT_EQ(as.created, sh.released);
	/*
	 * The race happened: some upgrades won (and some of those puts
	 * freed the child), some found the child gone.
	 */
	EXPECT_NE(0, sh.found);
	EXPECT_NE(0, sh.gone);
	EXPECT_NE(0, sh.final_by_racer);
	TH_LOG("%llu racing final puts of a child and its root in %.1f s: %llu upgrades won",
	       (unsigned long long)as.created / 2, now_s() - t0,
	       (unsigned long long)sh.found);
	TH_LOG("%llu children freed by a racer, %llu found the child gone",
	       (unsigned long long)sh.final_by_racer,
	       (unsigned long long)sh.gone);
}

/*
 * Every ioctl that acts through a handle (GET, LOOKUP, NEW with it as
 * parent, STAT, RUN GET_PUT) races the PUT that drops that same handle
 * from another thread: each answers as if it ran wholly before the PUT (it
 * succeeds, and what it made is put back) or wholly after (-EBADF), and
 * nothing leaks or is freed twice. One round: a root with one child, a
 * dropper that puts the root's handle after a short random pause, and
 * users that loop over the ops through that handle until it is gone. An
 * op counts as raced when it began while the PUT was in flight.
 *
 * Handle numbers are reused, lowest free first, so a handle an op makes
 * after the PUT could take the very number being raced on. Each round
 * therefore fills the lowest slots before making the root, and frees them
 * before the race: the ops' new handles take those, never the root's.
 */
enum { HR_GET, HR_LOOKUP, HR_NEW, HR_STAT, HR_RUN, HR_OPS };

struct handle_race {
	int fd;
	__u32 handle;
	__u64 child_id;
	bool lookup;
	int putting;		/* 1: the PUT began; 2: it returned */
	int bad;
	__u64 ok[HR_OPS], ebadf[HR_OPS], raced;
};

/* One op through @sh->handle. Return: 0, -EBADF, or another -errno. */
static int handle_race_op(struct handle_race *sh, int op)
{
	struct lp_stat st;
	struct lp_run run;
	int ret, last = 0;
	__u32 h;

	switch (op) {
	case HR_GET:
		ret = lpu_get(sh->fd, sh->handle, &h);
		break;
	case HR_LOOKUP:
		if (!sh->lookup)
			return lpu_stat(sh->fd, sh->handle, &st);
		ret = lpu_lookup(sh->fd, sh->handle, sh->child_id, &h);
		break;
	case HR_NEW:
		ret = lpu_new(sh->fd, sh->handle, &h, NULL);
		/* The new child's only reference is its handle. */
		last = 1;
		break;
	case HR_STAT:
		return lpu_stat(sh->fd, sh->handle, &st);
	default:
		ret = lpu_run(sh->fd, LP_OP_GET_PUT, sh->handle, 16, 0, &run);
		return ret || run.completed == 16 ? ret : -EPROTO;
	}
	/* Put back what the op made; the root and its child live on. */
	if (!ret && lpu_put(sh->fd, h) != last)
		return -EPROTO;
	return ret;
}

static void *handle_race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct handle_race *sh = t->shared;
	__u32 s = 1 + t->index;
	int op, ret, state;

	if (t->index == 0) {
		usleep(rnd(&s) % 400);
		__atomic_store_n(&sh->putting, 1, __ATOMIC_SEQ_CST);
		/* The child keeps the root: the handle's put is not the last. */
		if (lpu_put(sh->fd, sh->handle) != 0)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&sh->putting, 2, __ATOMIC_SEQ_CST);
		return NULL;
	}
	for (op = t->index % HR_OPS;; op = (op + 1) % HR_OPS) {
		state = __atomic_load_n(&sh->putting, __ATOMIC_SEQ_CST);
		ret = handle_race_op(sh, op);
		if (state == 1)
			__atomic_fetch_add(&sh->raced, 1, __ATOMIC_RELAXED);
		if (ret == -EBADF) {
			__atomic_fetch_add(&sh->ebadf[op], 1, __ATOMIC_RELAXED);
			/* Gone for good: a PUT that returned ends every use. */
			return NULL;
		}
		if (ret || state == 2) {
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			return NULL;
		}
		__atomic_fetch_add(&sh->ok[op], 1, __ATOMIC_RELAXED);
	}
}

TEST_F_TIMEOUT(flavor, handle_ops_race_the_put_of_their_handle,
	       LPU_SLOW_TIMEOUT)
{
	struct handle_race sh = { .fd = self->fd };
	__u32 child, filler, fill[64];
	__u64 ok = 0, ebadf = 0;
	struct lp_arena_stat as;
	unsigned long long round;
	int i, n = nr_cpus();

	ASSERT_LE(2, n);
	if (n > 64)
		n = 64;
	sh.lookup = has_child_list(variant->flavor);
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &filler, NULL));
	/* More rounds, up to ten times as many, while no op met the PUT. */
	for (round = 0; round < sizes.handle_rounds ||
	     (!sh.raced && round < 10 * sizes.handle_rounds); round++) {
		/* At most one new handle per user at a time: n slots. */
		for (i = 0; i < n; i++)
			ASSERT_EQ(0, lpu_get(self->fd, filler, &fill[i]));
		ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &sh.handle,
				     NULL));
		ASSERT_EQ(0, lpu_new(self->fd, sh.handle, &child,
				     &sh.child_id));
		for (i = 0; i < n; i++)
			ASSERT_EQ(0, lpu_put(self->fd, fill[i]));
		ASSERT_LT(fill[n - 1], sh.handle);
		sh.putting = 0;
		run_threads(n, handle_race_thread, &sh);
		ASSERT_EQ(0, sh.bad);
		/* The handle is gone for every op. */
		EXPECT_EQ(-EBADF, lpu_put(self->fd, sh.handle));
		/* The child's put frees it and the root it kept. */
		EXPECT_EQ(2, lpu_put(self->fd, child));
	}
	EXPECT_EQ(1, lpu_put(self->fd, filler));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(0, as.handles);
	EXPECT_EQ(0, as.live);
	EXPECT_EQ(as.created, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
	for (i = 0; i < HR_OPS; i++) {
		ok += sh.ok[i];
		ebadf += sh.ebadf[i];
	}
	/* Ops ran before the PUT, after it, and while it was in flight. */
	EXPECT_NE(0, ok);
	EXPECT_NE(0, ebadf);
	EXPECT_NE(0, sh.raced);
	TH_LOG("%llu rounds: %llu ops before the handle's PUT, %llu after it",
	       round, (unsigned long long)ok,
	       (unsigned long long)ebadf);
	TH_LOG("%llu ops began while the PUT was in flight",
	       (unsigned long long)sh.raced);
}

/*
 * The same race inside the kernel, where it is cheap enough for 10^5
 * final puts per flavor under TCG: creators RUN NEW_PUT, racers RUN
 * LOOKUP_PUT and TRYGET_PUT on the newest id (LP_ID_NEWEST) in chunks
 * until the creators are done. Any answer but a gadget or -ENOENT stops
 * a RUN with that error.
 *
 * A NEW_PUT child lives a few instructions, so a racer's put is its final
 * put only when the creator's put lands inside the racer's own get-to-put
 * window: a few per 10^4 on a quiet host, none at all in 32,000 while CI
 * ran the lint beside the guest. So each creator ends its round with a
 * slow phase: children made and put by ioctl, held LPU_SLOW_HOLD_US in
 * between, while the racers chase them without pausing. A racer's RUN
 * then sits on the child for thousands of iterations and the creator's
 * put lands inside a get-to-put window about as often as the racer is in
 * one, so one of those children soon has its final put done by a racer:
 * the release races the other racers' lookups of the same child.
 */
struct kernel_race {
	int fd;
	__u32 root;
	bool lookup;
	int creators;
	__u64 per_creator;
	int done;
	int slow;
	int bad;
	__u64 created, by_racers, won, tries;
	__u64 slow_created, slow_by_racers;
};

/*
 * A creator's slow phase: children by ioctl until a racer has done the
 * final put of one of them (the PUT ioctl answers released 0), at most
 * LPU_SLOW_CHILDREN.
 */
static void kernel_race_slow_children(struct kernel_race *sh)
{
	__u32 h;
	int i, ret;

	__atomic_store_n(&sh->slow, 1, __ATOMIC_RELAXED);
	for (i = 0; i < LPU_SLOW_CHILDREN &&
	     !__atomic_load_n(&sh->slow_by_racers, __ATOMIC_RELAXED); i++) {
		if (lpu_new(sh->fd, sh->root, &h, NULL)) {
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			return;
		}
		__atomic_fetch_add(&sh->slow_created, 1, __ATOMIC_RELAXED);
		usleep(LPU_SLOW_HOLD_US);
		ret = lpu_put(sh->fd, h);
		if (ret < 0)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		else if (ret == 0)
			__atomic_fetch_add(&sh->slow_by_racers, 1,
					   __ATOMIC_RELAXED);
	}
}

static void *kernel_race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct kernel_race *sh = t->shared;
	__u64 won = 0, tries = 0;
	struct lp_run run;
	__u32 op;
	int ret;

	if (t->index < sh->creators) {
		ret = lpu_run(sh->fd, LP_OP_NEW_PUT, sh->root,
			      sh->per_creator, 0, &run);
		if (ret || run.completed != sh->per_creator)
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&sh->by_racers, run.failed,
					   __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->created, run.completed, __ATOMIC_RELAXED);
		kernel_race_slow_children(sh);
		__atomic_fetch_add(&sh->done, 1, __ATOMIC_RELEASE);
		return NULL;
	}
	op = (sh->lookup && (t->index & 1)) ? LP_OP_LOOKUP_PUT : LP_OP_TRYGET_PUT;
	while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < sh->creators) {
		ret = lpu_run(sh->fd, op, sh->root, LPU_RACE_CHUNK, LP_ID_NEWEST,
			      &run);
		if (ret) {
			__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			break;
		}
		won += run.completed;
		tries += LPU_RACE_CHUNK;
		/*
		 * Pause between chunks: an idle vCPU gives its host core to
		 * the creators (TCG runs 4 vCPUs on 2 host cores), whose
		 * final puts are what the test counts; the racers still
		 * race every one of them in the chunks. Not in the slow
		 * phase, where a racer must be inside its RUN when the
		 * creator's put comes.
		 */
		if (!__atomic_load_n(&sh->slow, __ATOMIC_RELAXED))
			usleep(LPU_RACER_PAUSE_US);
	}
	__atomic_fetch_add(&sh->won, won, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->tries, tries, __ATOMIC_RELAXED);
	return NULL;
}

TEST_F_TIMEOUT(flavor, kernel_lookups_and_trygets_race_final_puts,
	       LPU_RACE_TIMEOUT)
{
	struct kernel_race sh = { .fd = self->fd };
	struct lp_arena_stat as;
	struct lp_stat st;
	int n = nr_cpus();
	__u64 rounds = 0;
	double t0;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_NEW_PUT | 1ull << LP_OP_LOOKUP_PUT |
		  1ull << LP_OP_TRYGET_PUT))
		return;
	ASSERT_LE(4, n);
	if (n > 64)
		n = 64;
	sh.creators = n / 2;
	sh.per_creator = (sizes.race_puts + sh.creators - 1) / sh.creators;
	sh.lookup = has_child_list(variant->flavor);
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &sh.root, NULL));
	t0 = now_s();
	/* Another round only while an interleaving is still unseen. */
	do {
		sh.done = 0;
		sh.slow = 0;
		run_threads(n, kernel_race_thread, &sh);
		rounds++;
	} while (!sh.bad && rounds < LPU_RACE_ROUNDS &&
		 (!sh.won || sh.won == sh.tries ||
		  !(sh.by_racers + sh.slow_by_racers)));
	EXPECT_EQ(0, sh.bad);
	EXPECT_EQ(rounds * sh.creators * sh.per_creator, sh.created);
	ASSERT_EQ(0, lpu_stat(self->fd, sh.root, &st));
	EXPECT_EQ(1, st.refcount);
	EXPECT_EQ(0, st.children);
	EXPECT_EQ(1, lpu_put(self->fd, sh.root));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(sh.created + sh.slow_created + 1, as.created);
	EXPECT_EQ(as.created, as.freed);
	EXPECT_EQ(0, module_live(self->fd));
	/*
	 * The dangerous interleavings happened: an upgrade won against a
	 * final put, one found its gadget gone (-ENOENT), and a racer's put
	 * was a child's final put.
	 */
	EXPECT_NE(0, sh.won);
	EXPECT_NE(0, sh.tries - sh.won);
	EXPECT_NE(0, sh.by_racers + sh.slow_by_racers);
	TH_LOG("%llu racing final puts in %.1f s over %llu round(s): %llu of %llu upgrades won",
	       (unsigned long long)sh.created, now_s() - t0,
	       (unsigned long long)rounds,
	       (unsigned long long)sh.won, (unsigned long long)sh.tries);
	TH_LOG("final puts done by a racer: %llu of the RUN's, %llu of %llu slow children",
	       (unsigned long long)sh.by_racers,
	       (unsigned long long)sh.slow_by_racers,
	       (unsigned long long)sh.slow_created);
}

/* ---- allocation failure: the sweep of lockless_test.h -------------- */

/*
 * Every ioctl and RUN op of the gadget side, in this flavor: the ones that
 * create something meet every allocation failure all or nothing, and the
 * others allocate nothing at all. Each op is swept from one state (make
 * soak: GET, LOOKUP and TRYGET walk the handle table up past 512 handles);
 * dev.*.handle_tables_fail_all_or_nothing walks the growth points.
 */
TEST_F_TIMEOUT(flavor, every_allocation_may_fail_all_or_nothing,
	       LPU_SLOW_TIMEOUT)
{
	static const enum fl_op probes[] = {
		FL_IDENTIFY, FL_STAT, FL_ARENA_STAT, FL_RMW, FL_RUN_GET_PUT,
		FL_RUN_LOOKUP_PUT, FL_RUN_TRYGET_PUT, FL_PUT,
	};
	bool list = has_child_list(variant->flavor);
	const char *fname = flavor_names[variant->flavor];
	bool full = !strcmp(sizes.preset, "full");
	unsigned int walk = full ? FL_GROW_FULL : 1;
	unsigned int most = full ? LP_MAX_HANDLES : 1;
	struct fl_count cnt;
	struct fl_ctx *c;
	size_t i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << variant->flavor, 0))
		return;
	ASSERT_EQ(0, fl_setup())
		TH_LOG("the debug kernel needs FAILSLAB, FAIL_PAGE_ALLOC and debugfs");
	c = calloc(1, sizeof(*c));
	ASSERT_NE(NULL, c);
	fl_init(c, variant->path, self->fd, variant->flavor);
	c->registry = variant->registry;
	c->max_gadgets = FL_MAX_GADGETS;
	c->probe_configure = true;

	fl_sweep(_metadata, c, FL_CONFIGURE, 1, 1, &cnt);
	EXPECT_EQ(0, cnt.reached) TH_LOG("CONFIGURE allocates");
	/* The first NEW of a new arena: a gadget, a registry node, a handle. */
	fl_sweep(_metadata, c, FL_NEW_ROOT, 1, 1, &cnt);
	fl_report(_metadata, variant->module, fname, FL_NEW_ROOT, &cnt);
	fl_expect_reached(_metadata, FL_NEW_ROOT, &cnt);
	ASSERT_EQ(1, c->nheld);
	fl_track(c, FL_ROOT, fl_newest(c));
	/* The first child: a child list's first entry too (Rust). */
	fl_sweep(_metadata, c, FL_NEW_CHILD, 1, 1, &cnt);
	fl_report(_metadata, variant->module, fname, FL_NEW_CHILD, &cnt);
	fl_expect_reached(_metadata, FL_NEW_CHILD, &cnt);
	ASSERT_EQ(2, c->nheld);
	fl_track(c, FL_CHILD, fl_newest(c));
	fl_sweep(_metadata, c, FL_GET, walk, most, &cnt);
	fl_report(_metadata, variant->module, fname, FL_GET, &cnt);
	if (full)
		fl_expect_reached(_metadata, FL_GET, &cnt);
	if (list) {
		fl_sweep(_metadata, c, FL_LOOKUP, walk, most, &cnt);
		fl_report(_metadata, variant->module, fname, FL_LOOKUP, &cnt);
		if (full)
			fl_expect_reached(_metadata, FL_LOOKUP, &cnt);
	}
	fl_sweep(_metadata, c, FL_TRYGET, walk, most, &cnt);
	fl_report(_metadata, variant->module, fname, FL_TRYGET, &cnt);
	if (full)
		fl_expect_reached(_metadata, FL_TRYGET, &cnt);
	/* A child created and released in the kernel: no handle. */
	fl_sweep(_metadata, c, FL_RUN_NEW_PUT, 1, 1, &cnt);
	fl_report(_metadata, variant->module, fname, FL_RUN_NEW_PUT, &cnt);
	fl_expect_reached(_metadata, FL_RUN_NEW_PUT, &cnt);
	/* The PUT probe's handle, made without injection. */
	ASSERT_EQ(0, lpu_get(self->fd, c->handle[FL_ROOT], &c->spare));
	fl_hold(c, false, c->spare);
	for (i = 0; i < ARRAY_SIZE(probes); i++) {
		if (probes[i] == FL_RUN_LOOKUP_PUT && !list)
			continue;
		fl_sweep(_metadata, c, probes[i], 1, 1, &cnt);
		EXPECT_EQ(0, cnt.reached)
			TH_LOG("%s allocates: its contract has no -ENOMEM",
			       fl_names[probes[i]]);
	}
	/* The quota no STAT shows: exactly max_gadgets live, then -EDQUOT. */
	fl_fill_gadgets(_metadata, c);
	free(c);
	ASSERT_EQ(0, arena_still_works(self->fd));
	/* close() puts every handle the sweep kept. */
}
