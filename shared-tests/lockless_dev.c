// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_dev.c - the dev fixture: what holds for each device as a whole,
 * one variant per module (dev.c.*, dev.rust.*). IDENTIFY; the RMW ops
 * (the max ops against the true maximum and an unbroken chain, lost
 * updates in in-kernel races, FETCH_INC, INC_NOT_ZERO, saturation); every
 * errno of the contract, with the arena still working after; a failed
 * copy-out that changes nothing; the handle count and table limits; a
 * fatal signal that stops a RUN; and the handle tables under allocation
 * failure.
 *
 * Part of the driver, #included by lockless_test.c.
 */
#include "lockless_test.h"

/* ---- identify and module life: one fixture over both devices ---------- */

FIXTURE(dev)
{
	int fd;
	struct lp_identify id;
};

FIXTURE_VARIANT(dev)
{
	const char *path;
	const char *module;
	bool reference;		/* must implement the whole contract */
};

FIXTURE_VARIANT_ADD(dev, c)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.reference = true,
};

FIXTURE_VARIANT_ADD(dev, rust)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.reference = true,
};

FIXTURE_SETUP(dev)
{
	self->fd = open(variant->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s (is %s.ko loaded?)",
				      variant->path, strerror(errno),
				      variant->module);
	ASSERT_EQ(0, lpu_identify(self->fd, &self->id));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
	expect_module_clean(_metadata, variant->path);
}

TEST_F(dev, identify_names_module_and_abi)
{
	EXPECT_STREQ(variant->module, self->id.name);
	EXPECT_EQ(LP_ABI_VERSION, self->id.abi_version);
	EXPECT_EQ(0, self->id.flavors & ~((1u << LP_FLAVOR_COUNT) - 1));
	EXPECT_EQ(0, self->id.ops & ~((1ull << LP_OP_COUNT) - 1));
	EXPECT_EQ(0, self->id.registries & ~((1u << LP_REGISTRY_COUNT) - 1));
	if (variant->reference) {
		EXPECT_EQ((1u << LP_FLAVOR_COUNT) - 1, self->id.flavors);
		EXPECT_EQ((1ull << LP_OP_COUNT) - 1, self->id.ops);
		EXPECT_EQ((1u << LP_REGISTRY_COUNT) - 1, self->id.registries);
	}
}

TEST_F(dev, identify_rejects_bad_input)
{
	struct lp_identify id;

	memset(&id, 0, sizeof(id));
	id.reserved[0] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, LP_IOC_IDENTIFY, &id));
	EXPECT_EQ(EINVAL, errno);

	EXPECT_EQ(-1, ioctl(self->fd, LP_IOC_IDENTIFY, NULL));
	EXPECT_EQ(EFAULT, errno);

	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(LP_IOC_MAGIC, 0x7f, struct lp_identify), &id));
	EXPECT_EQ(ENOTTY, errno);

	/* The device still answers after every rejection. */
	memset(&id, 0, sizeof(id));
	EXPECT_EQ(0, ioctl(self->fd, LP_IOC_IDENTIFY, &id));
}

/* ---- read-modify-write ops -------------------------------------------- */

struct rmw_shared {
	int fd;
	__u32 op;
	unsigned int seed;
	int errors;
	__u64 max_seen[64];
};

static void *rmw_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct rmw_shared *sh = t->shared;
	__u32 s = sh->seed + 7919 * (t->index + 1);
	struct lp_rmw r;
	__u64 v, max = 0;
	int i;

	for (i = 0; i < LPU_RMW_VALUES; i++) {
		v = rnd(&s) & LP_RMW_VALUE_MAX;
		if (lpu_rmw(sh->fd, sh->op, v, &r))
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
		if (v > max)
			max = v;
	}
	sh->max_seen[t->index] = max;
	return NULL;
}

/* Run @op from T threads x LPU_RMW_VALUES values; returns the errors. */
static int rmw_storm(int fd, __u32 op, unsigned int seed, __u64 *true_max)
{
	struct rmw_shared sh = { .fd = fd, .op = op, .seed = seed };
	int i, n = nr_cpus();

	if (n > 64)
		n = 64;
	run_threads(n, rmw_thread, &sh);
	*true_max = 0;
	for (i = 0; i < n; i++)
		if (sh.max_seen[i] > *true_max)
			*true_max = sh.max_seen[i];
	return sh.errors;
}

TEST_F_TIMEOUT(dev, max_ops_end_at_true_maximum, LPU_SLOW_TIMEOUT)
{
	static const __u32 ops[] = {
		LP_OP_MAX_CMPXCHG, LP_OP_MAX_JBD2, LP_OP_MAX_LOCKED,
	};
	struct lp_rmw r;
	__u64 max;
	int i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_MAX_CMPXCHG | 1ull << LP_OP_MAX_JBD2 |
		  1ull << LP_OP_MAX_LOCKED | 1ull << LP_OP_SET))
		return;
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &r));
		EXPECT_EQ(0, rmw_storm(self->fd, ops[i], 42 + i, &max));
		/* A MAX with operand 0 reads the op's own copy. */
		ASSERT_EQ(0, lpu_rmw(self->fd, ops[i], 0, &r));
		EXPECT_EQ(max, r.old) TH_LOG("%s", op_names[ops[i]]);
		EXPECT_EQ(max, r.new) TH_LOG("%s", op_names[ops[i]]);
	}
}

/*
 * Every store of a MAX op replaces the value the previous store left:
 * sorted by the value stored, each store's "old" is the previous store's
 * "new". Threads feed interleaved ascending values so that nearly every op
 * stores and they contend; a store that claims a value it never wrote (a
 * lost cmpxchg race) breaks the chain.
 */
struct chain_shared {
	int fd;
	__u32 op;
	int threads;
	int errors;
	struct lp_rmw *log;	/* LPU_CHAIN_VALUES per thread */
};

static void *chain_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct chain_shared *sh = t->shared;
	struct lp_rmw *log = sh->log + (size_t)t->index * LPU_CHAIN_VALUES;
	int i;

	for (i = 0; i < LPU_CHAIN_VALUES; i++) {
		__u64 v = (__u64)i * sh->threads + t->index + 1;

		if (lpu_rmw(sh->fd, sh->op, v, &log[i]))
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
		log[i].value = v;
	}
	return NULL;
}

static int cmp_new(const void *a, const void *b)
{
	const struct lp_rmw *x = a, *y = b;

	return x->new < y->new ? -1 : x->new > y->new;
}

TEST_F_TIMEOUT(dev, max_ops_store_an_unbroken_chain, LPU_SLOW_TIMEOUT)
{
	static const __u32 ops[] = {
		LP_OP_MAX_CMPXCHG, LP_OP_MAX_JBD2, LP_OP_MAX_LOCKED,
	};
	struct chain_shared sh = { .fd = self->fd };
	struct lp_rmw r, *stores;
	size_t n, i, nstores, breaks;
	__u64 prev, failed;
	int k;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_MAX_CMPXCHG | 1ull << LP_OP_MAX_JBD2 |
		  1ull << LP_OP_MAX_LOCKED | 1ull << LP_OP_SET))
		return;
	sh.threads = nr_cpus() > 64 ? 64 : nr_cpus();
	n = (size_t)sh.threads * LPU_CHAIN_VALUES;
	sh.log = calloc(n, sizeof(*sh.log));
	stores = calloc(n, sizeof(*stores));
	ASSERT_NE(NULL, sh.log);
	ASSERT_NE(NULL, stores);
	for (k = 0; k < 3; k++) {
		sh.op = ops[k];
		sh.errors = 0;
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &r));
		run_threads(sh.threads, chain_thread, &sh);
		EXPECT_EQ(0, sh.errors);
		nstores = 0;
		failed = 0;
		for (i = 0; i < n; i++) {
			failed += sh.log[i].failed;
			if (sh.log[i].new > sh.log[i].old)
				stores[nstores++] = sh.log[i];
		}
		qsort(stores, nstores, sizeof(*stores), cmp_new);
		prev = 0;
		breaks = 0;
		for (i = 0; i < nstores; i++) {
			if (stores[i].old != prev || stores[i].new != stores[i].value)
				breaks++;
			prev = stores[i].new;
		}
		EXPECT_EQ(0, breaks) TH_LOG("%s: %zu of %zu stores do not chain",
					    op_names[ops[k]], breaks, nstores);
		ASSERT_EQ(0, lpu_rmw(self->fd, ops[k], 0, &r));
		EXPECT_EQ(prev, r.old) TH_LOG("%s", op_names[ops[k]]);
		EXPECT_EQ(n, r.old) TH_LOG("%s", op_names[ops[k]]);
		TH_LOG("%s: %zu stores, %llu failed cmpxchg", op_names[ops[k]],
		       nstores, (unsigned long long)failed);
	}
	free(sh.log);
	free(stores);
}

/*
 * The same, inside the kernel where the ops really contend: the threads
 * RUN the op in chunks, all on one variable. Each store replaces exactly
 * what it reports as old, so the deltas of all threads add up to the
 * final minus the initial value; a store that lost its race but reports
 * success shows as a surplus, an increment lost to a plain
 * read-modify-write as a deficit. The RUN loop also checks the max's
 * postcondition after every op (x >= v once max(x, v) returned:
 * run.broken), which a loop that gives up on a failed cmpxchg breaks.
 *
 * A race that produced no failed cmpxchg proved nothing, so the CAS ops
 * must lose at least LPU_MIN_CONTENDED cmpxchg races: they keep running
 * chunks (at least rmw_run ops per thread) until they have, within
 * LPU_CONTEND_BOUND seconds. Under TCG (4 vCPUs time-sliced on 2 host
 * cores) MAX ops racing each other rarely collide: whoever is behind
 * skips cheaply, so one thread mostly stores alone. MAX_CMPXCHG therefore
 * races FETCH_INC_CMPXCHG on the same atomic_t: half the threads feed the
 * max operands that run far ahead (thread k of n: k * gap + 1, then steps
 * of n * gap), so that every max op must store, while the other half
 * increment the variable under it. Both only raise it, so the max's
 * postcondition still holds, and the deltas of both ops add up.
 */
#define LPU_RMW_CHUNK		5000
#define LPU_CONTEND_BOUND	60
#define LPU_MAX_GAP		16

struct telescope {
	int fd;
	__u32 op;
	__u32 partner;	/* op of the threads from index n on, or 0 */
	bool cas;
	int errors;
	double t0;
	int n;		/* threads running @op */
	__u64 gap;	/* MAX ops: between two threads' operands */
	int stopped;	/* threads of @op done */
	__u64 delta, failed, broken, ops, last, partner_ops;
};

static void telescope_partner(struct telescope *sh)
{
	struct lp_run run;

	while (__atomic_load_n(&sh->stopped, __ATOMIC_ACQUIRE) < sh->n) {
		if (lpu_run(sh->fd, sh->partner, 0, LPU_RMW_CHUNK, 0, &run) ||
		    run.completed != LPU_RMW_CHUNK) {
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
			return;
		}
		__atomic_fetch_add(&sh->delta, run.delta, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->partner_ops, LPU_RMW_CHUNK,
				   __ATOMIC_RELAXED);
	}
}

static void *telescope_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct telescope *sh = t->shared;
	__u64 step = sh->gap * sh->n;
	unsigned long long j, done = 0;
	__u64 base, last = 0, seen;
	struct lp_run run;

	if (t->index >= sh->n) {
		telescope_partner(sh);
		return NULL;
	}
	for (j = 0;; j++) {
		if (done >= sizes.rmw_run &&
		    (!sh->cas || __atomic_load_n(&sh->failed, __ATOMIC_RELAXED) >=
				 LPU_MIN_CONTENDED))
			break;
		base = 1 + t->index * sh->gap + j * LPU_RMW_CHUNK * step;
		if (now_s() - sh->t0 > LPU_CONTEND_BOUND ||
		    base + (LPU_RMW_CHUNK - 1) * step > LP_RMW_VALUE_MAX)
			break;
		if (lpu_run(sh->fd, sh->op, step, LPU_RMW_CHUNK, base, &run) ||
		    run.completed != LPU_RMW_CHUNK) {
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
			break;
		}
		last = base + (LPU_RMW_CHUNK - 1) * step;
		done += LPU_RMW_CHUNK;
		__atomic_fetch_add(&sh->delta, run.delta, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->failed, run.failed, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->broken, run.broken, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&sh->ops, done, __ATOMIC_RELAXED);
	/* The largest operand of all: where the MAX ops must end (at least). */
	seen = __atomic_load_n(&sh->last, __ATOMIC_RELAXED);
	while (seen < last &&
	       !__atomic_compare_exchange_n(&sh->last, &seen, last, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	__atomic_fetch_add(&sh->stopped, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool is_max_op(__u32 op)
{
	return op == LP_OP_MAX_CMPXCHG || op == LP_OP_MAX_JBD2 ||
	       op == LP_OP_MAX_LOCKED;
}

TEST_F_TIMEOUT(dev, rmw_ops_in_kernel_races_lose_no_update, LPU_SLOW_TIMEOUT)
{
	static const struct {
		__u32 op;
		__u32 partner;	/* raced by half the threads, or 0 */
		bool cas;	/* a cmpxchg loop that must lose races */
	} ops[] = {
		{ LP_OP_MAX_CMPXCHG, LP_OP_FETCH_INC_CMPXCHG, true },
		{ LP_OP_MAX_JBD2, 0, false },	/* fails once per store anyway */
		{ LP_OP_MAX_LOCKED, 0, false },
		{ LP_OP_FETCH_INC_CMPXCHG, 0, true },
		{ LP_OP_INC_NOT_ZERO_CMPXCHG, 0, true },
		{ LP_OP_INC_NOT_ZERO_TRY_CMPXCHG, 0, false },
	};
	struct telescope sh = { .fd = self->fd };
	int k, n = nr_cpus();
	struct lp_rmw r;
	__u64 final;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  ((1ull << LP_OP_SET) - 1) | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	ASSERT_LE(2, n);
	for (k = 0; k < ARRAY_SIZE(ops); k++) {
		const char *name = op_names[ops[k].op];

		memset(&sh, 0, sizeof(sh));
		sh.fd = self->fd;
		sh.op = ops[k].op;
		sh.partner = ops[k].partner;
		sh.cas = ops[k].cas;
		sh.n = sh.partner ? n / 2 : n;
		sh.gap = sh.partner ? LPU_MAX_GAP : 1;
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 1, &r));
		sh.t0 = now_s();
		run_threads(n, telescope_thread, &sh);
		EXPECT_EQ(0, sh.errors) TH_LOG("%s", name);
		if (is_max_op(sh.op)) {
			ASSERT_EQ(0, lpu_rmw(self->fd, sh.op, 0, &r));
			/* The partner's increments may raise it further. */
			EXPECT_TRUE(sh.partner ? r.old >= sh.last : r.old == sh.last)
				TH_LOG("%s: ends at %llu, the largest operand was %llu",
				       name, (unsigned long long)r.old,
				       (unsigned long long)sh.last);
		} else {
			ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
			EXPECT_EQ(1 + sh.ops, r.old) TH_LOG("%s", name);
		}
		final = r.old;
		EXPECT_EQ(final - 1, sh.delta)
			TH_LOG("%s: deltas add up to %llu, the variable moved by %llu",
			       name, (unsigned long long)sh.delta,
			       (unsigned long long)(final - 1));
		EXPECT_EQ(0, sh.broken)
			TH_LOG("%s: %llu ops left the variable below their operand",
			       name, (unsigned long long)sh.broken);
		if (sh.cas)
			EXPECT_LE(LPU_MIN_CONTENDED, sh.failed)
				TH_LOG("%s: the race never happened", name);
		TH_LOG("%s: %d threads, %llu ops in %.1f s, %llu failed cmpxchg%s",
		       name, sh.n, (unsigned long long)sh.ops, now_s() - sh.t0,
		       (unsigned long long)sh.failed,
		       sh.partner ? " (raced by FETCH_INC_CMPXCHG)" : "");
	}
}

TEST_F(dev, max_ops_report_old_and_new)
{
	static const __u32 ops[] = {
		LP_OP_MAX_CMPXCHG, LP_OP_MAX_JBD2, LP_OP_MAX_LOCKED,
	};
	struct lp_rmw r;
	int i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_MAX_CMPXCHG | 1ull << LP_OP_MAX_JBD2 |
		  1ull << LP_OP_MAX_LOCKED | 1ull << LP_OP_SET))
		return;
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 10, &r));
		ASSERT_EQ(0, lpu_rmw(self->fd, ops[i], 5, &r));
		EXPECT_EQ(10, r.old);
		EXPECT_EQ(10, r.new);
		ASSERT_EQ(0, lpu_rmw(self->fd, ops[i], 20, &r));
		EXPECT_EQ(10, r.old);
		EXPECT_EQ(20, r.new);
		ASSERT_EQ(0, lpu_rmw(self->fd, ops[i], LP_RMW_VALUE_MAX, &r));
		EXPECT_EQ(20, r.old);
		EXPECT_EQ(LP_RMW_VALUE_MAX, r.new);
	}
}

TEST_F_TIMEOUT(dev, max_locked_and_max_cmpxchg_agree, LPU_SLOW_TIMEOUT)
{
	struct lp_rmw a, b;
	__u32 s = 12345;
	__u64 max;
	int i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_MAX_CMPXCHG | 1ull << LP_OP_MAX_LOCKED |
		  1ull << LP_OP_SET))
		return;
	/* One thread: the same sequence gives the same old/new at each step. */
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &a));
	for (i = 0; i < LPU_RMW_VALUES; i++) {
		__u64 v = rnd(&s) & LP_RMW_VALUE_MAX;

		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_LOCKED, v, &a));
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_CMPXCHG, v, &b));
		EXPECT_EQ(a.old, b.old);
		EXPECT_EQ(a.new, b.new);
		if (a.old != b.old || a.new != b.new)
			break;
	}
	/*
	 * Racing threads, the same seeded operands for both ops: each op's
	 * own copy must end at the operands' maximum, and so at the same
	 * value as the other op's.
	 */
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &a));
	EXPECT_EQ(0, rmw_storm(self->fd, LP_OP_MAX_LOCKED, 99, &max));
	EXPECT_EQ(0, rmw_storm(self->fd, LP_OP_MAX_CMPXCHG, 99, &max));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_LOCKED, 0, &a));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_CMPXCHG, 0, &b));
	EXPECT_EQ(a.new, b.new) TH_LOG("MAX_LOCKED and MAX_CMPXCHG stored different maxima");
	EXPECT_EQ(max, a.new) TH_LOG("MAX_LOCKED");
	EXPECT_EQ(max, b.new) TH_LOG("MAX_CMPXCHG");
}

TEST_F_TIMEOUT(dev, fetch_inc_counts_every_increment, LPU_SLOW_TIMEOUT)
{
	struct lp_rmw r;
	__u64 max;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_FETCH_INC_CMPXCHG | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &r));
	EXPECT_EQ(0, rmw_storm(self->fd, LP_OP_FETCH_INC_CMPXCHG, 1, &max));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
	EXPECT_EQ((__u64)nr_cpus() * LPU_RMW_VALUES, r.old);
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_FETCH_INC_CMPXCHG, 0, &r));
	EXPECT_EQ(r.old + 1, r.new);
}

TEST_F_TIMEOUT(dev, inc_not_zero_keeps_zero_and_counts_from_nonzero,
	       LPU_SLOW_TIMEOUT)
{
	static const __u32 ops[] = {
		LP_OP_INC_NOT_ZERO_CMPXCHG, LP_OP_INC_NOT_ZERO_TRY_CMPXCHG,
	};
	struct lp_rmw r;
	__u64 max;
	int i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_INC_NOT_ZERO_CMPXCHG |
		  1ull << LP_OP_INC_NOT_ZERO_TRY_CMPXCHG | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 0, &r));
		EXPECT_EQ(0, rmw_storm(self->fd, ops[i], 3, &max));
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		EXPECT_EQ(0, r.old) TH_LOG("%s", op_names[ops[i]]);

		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 1, &r));
		EXPECT_EQ(0, rmw_storm(self->fd, ops[i], 3, &max));
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		EXPECT_EQ(1 + (__u64)nr_cpus() * LPU_RMW_VALUES, r.old)
			TH_LOG("%s", op_names[ops[i]]);
	}
}

/*
 * INC_NOT_ZERO racing a transition to zero: threads RUN the op on a
 * variable that starts at 1 while another thread SETs it to 0 in the
 * middle of their loops. Once 0, the op must never make it non-zero
 * again: the variable ends at 0, and every increment the loops report
 * happened before the SET (their deltas add up to what SET replaced,
 * minus the initial 1). A get-unless-zero written as "read, then plain
 * increment" revives the zero.
 */
struct inz_race {
	int fd;
	__u32 op;
	int errors;
	__u64 delta, set_old;
};

static void *inz_race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct inz_race *sh = t->shared;
	struct lp_run run;
	struct lp_rmw r;

	if (t->index == 0) {
		double t0 = now_s();

		/* Wait until the loops are well under way, then zero it. */
		do {
			if (lpu_rmw(sh->fd, LP_OP_READ, 0, &r) ||
			    now_s() - t0 > 60) {
				__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
				break;
			}
		} while (r.old < sizes.rmw_run / 4);
		if (lpu_rmw(sh->fd, LP_OP_SET, 0, &r))
			__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
		sh->set_old = r.old;
		return NULL;
	}
	if (lpu_run(sh->fd, sh->op, 0, sizes.rmw_run, 0, &run) ||
	    run.completed != sizes.rmw_run)
		__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->delta, run.delta, __ATOMIC_RELAXED);
	return NULL;
}

TEST_F_TIMEOUT(dev, inc_not_zero_never_revives_a_zero_set_mid_race,
	       LPU_SLOW_TIMEOUT)
{
	static const __u32 ops[] = {
		LP_OP_INC_NOT_ZERO_CMPXCHG, LP_OP_INC_NOT_ZERO_TRY_CMPXCHG,
	};
	struct inz_race sh = { .fd = self->fd };
	int i, n = nr_cpus();
	struct lp_rmw r;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_INC_NOT_ZERO_CMPXCHG |
		  1ull << LP_OP_INC_NOT_ZERO_TRY_CMPXCHG | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	ASSERT_LE(2, n);
	for (i = 0; i < 2; i++) {
		sh.op = ops[i];
		sh.errors = 0;
		sh.delta = 0;
		sh.set_old = 0;
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 1, &r));
		run_threads(n, inz_race_thread, &sh);
		EXPECT_EQ(0, sh.errors) TH_LOG("%s", op_names[ops[i]]);
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		EXPECT_EQ(0, r.old) TH_LOG("%s revived a zero", op_names[ops[i]]);
		EXPECT_EQ(sh.set_old - 1, sh.delta)
			TH_LOG("%s: %llu increments reported, %llu before the SET",
			       op_names[ops[i]], (unsigned long long)sh.delta,
			       (unsigned long long)sh.set_old - 1);
		/* The SET landed while the loops still ran. */
		EXPECT_GT((n - 1) * sizes.rmw_run, sh.set_old - 1)
			TH_LOG("%s: the loops had finished before the SET",
			       op_names[ops[i]]);
	}
}

TEST_F(dev, run_rmw_ops_complete_and_leave_their_state)
{
	struct lp_run run;
	__u64 prev, delta;
	struct lp_rmw r;
	__u32 op;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  (1ull << LP_OP_COUNT) - 1 -
		  (1ull << LP_OP_GET_PUT | 1ull << LP_OP_LOOKUP_PUT |
		   1ull << LP_OP_TRYGET_PUT | 1ull << LP_OP_NEW_PUT |
		   1ull << LP_OP_TXN_START_STOP | 1ull << LP_OP_TXN_EXTEND |
		   1ull << LP_OP_GET_PUT_REFCOUNT |
		   1ull << LP_OP_TRYGET_ATOMIC_PUT)))
		return;
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
	prev = r.old;
	for (op = 0; op < LP_OP_COUNT; op++) {
		if (op == LP_OP_GET_PUT || op == LP_OP_LOOKUP_PUT ||
		    op == LP_OP_TRYGET_PUT || op == LP_OP_NEW_PUT ||
		    op == LP_OP_TXN_START_STOP || op == LP_OP_TXN_EXTEND ||
		    op == LP_OP_GET_PUT_REFCOUNT ||
		    op == LP_OP_TRYGET_ATOMIC_PUT)
			continue;
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 5, &r));
		/* SET answers with the value it replaced: the last READ's. */
		EXPECT_EQ(prev, r.old) TH_LOG("SET after %s", op_names[op]);
		EXPECT_EQ(5, r.new);
		ASSERT_EQ(0, lpu_run(self->fd, op, 0, LPU_RUN_ITERATIONS, 7, &run))
			TH_LOG("%s", op_names[op]);
		EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed)
			TH_LOG("%s", op_names[op]);
		EXPECT_EQ(0, run.broken) TH_LOG("%s", op_names[op]);
		/*
		 * The deltas: the increments add one per op; the MAX ops and
		 * SET move their copy from 5 to the last operand, 7 + N - 1;
		 * READ, ATOMIC_FLOOR and EMPTY change nothing of the variable.
		 */
		if (op == LP_OP_READ || op == LP_OP_ATOMIC_FLOOR ||
		    op == LP_OP_EMPTY)
			delta = 0;
		else if (op == LP_OP_INC_NOT_ZERO_CMPXCHG ||
			 op == LP_OP_INC_NOT_ZERO_TRY_CMPXCHG ||
			 op == LP_OP_FETCH_INC_CMPXCHG)
			delta = LPU_RUN_ITERATIONS;
		else
			delta = 7 + LPU_RUN_ITERATIONS - 1 - 5;
		EXPECT_EQ(delta, run.delta) TH_LOG("%s", op_names[op]);
		/*
		 * One thread never loses a cmpxchg race, but jbd2's loop
		 * runs once more after each store, and that cmpxchg fails
		 * against its own new value: one per store, and with
		 * operands value + i every iteration stores.
		 */
		EXPECT_EQ(op == LP_OP_MAX_JBD2 ? LPU_RUN_ITERATIONS : 0, run.failed)
			TH_LOG("%s (one thread)", op_names[op]);
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		switch (op) {
		case LP_OP_INC_NOT_ZERO_CMPXCHG:
		case LP_OP_INC_NOT_ZERO_TRY_CMPXCHG:
		case LP_OP_FETCH_INC_CMPXCHG:
			EXPECT_EQ(5 + LPU_RUN_ITERATIONS, r.old)
				TH_LOG("%s", op_names[op]);
			break;
		case LP_OP_MAX_CMPXCHG:
		case LP_OP_SET:
			EXPECT_EQ(7 + LPU_RUN_ITERATIONS - 1, r.old)
				TH_LOG("%s", op_names[op]);
			break;
		default:
			EXPECT_EQ(5, r.old) TH_LOG("%s", op_names[op]);
			break;
		}
		prev = r.old;
	}
	/* MAX_JBD2 and MAX_LOCKED keep their own copy. */
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 5, &r));
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_MAX_JBD2, 0, 10, 9, &run));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_JBD2, 0, &r));
	EXPECT_EQ(18, r.new);
	EXPECT_EQ(18 - 5, run.delta);
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_MAX_LOCKED, 0, 10, 11, &run));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_LOCKED, 0, &r));
	EXPECT_EQ(20, r.new);
	EXPECT_EQ(20 - 5, run.delta);
}

/* ---- errors, limits and edges of the contract ------------------------ */

TEST_F(dev, bad_input_gets_the_documented_errno)
{
	struct lp_configure c;
	struct lp_new n;
	struct lp_put p;
	struct lp_rmw r;
	struct lp_run run;
	struct lp_stat st;
	struct lp_arena_stat as;
	struct lp_get g;
	struct lp_lookup l;
	struct lp_tryget t;
	__u32 h, h2;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_READ | 1ull << LP_OP_ATOMIC_FLOOR))
		return;
	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_LOCKED, 0))
		return;
	/* -ENOTTY: unknown ioctl. */
	EXPECT_EQ(-ENOTTY, lpu_call(self->fd, _IOWR(LP_IOC_MAGIC, 0x40, struct lp_new), &n));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -EFAULT: bad user pointer, for every ioctl. */
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_CONFIGURE, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_NEW, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_GET, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_PUT, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_LOOKUP, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TRYGET, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_STAT, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_ARENA_STAT, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_RMW, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_RUN, (void *)8));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -EINVAL: a non-zero reserved field, for every ioctl. */
	memset(&c, 0, sizeof(c));
	c.reserved = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_CONFIGURE, &c));
	memset(&c, 0, sizeof(c));
	c.max_gadgets = LP_MAX_GADGETS + 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_CONFIGURE, &c));
	memset(&n, 0, sizeof(n));
	n.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_NEW, &n));
	memset(&g, 0, sizeof(g));
	g.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_GET, &g));
	memset(&p, 0, sizeof(p));
	p.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_PUT, &p));
	memset(&l, 0, sizeof(l));
	l.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_LOOKUP, &l));
	memset(&t, 0, sizeof(t));
	t.reserved[4] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TRYGET, &t));
	memset(&st, 0, sizeof(st));
	st.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_STAT, &st));
	memset(&as, 0, sizeof(as));
	as.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_ARENA_STAT, &as));
	memset(&r, 0, sizeof(r));
	r.op = LP_OP_READ;
	r.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_RMW, &r));
	memset(&run, 0, sizeof(run));
	run.op = LP_OP_ATOMIC_FLOOR;
	run.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_RUN, &run));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -EINVAL: unknown flavor, unknown op, RUN-only op, value too big. */
	EXPECT_EQ(-EINVAL, lpu_configure(self->fd, LP_FLAVOR_COUNT));
	EXPECT_EQ(-EINVAL, lpu_rmw(self->fd, LP_OP_COUNT, 0, &r));
	EXPECT_EQ(-EINVAL, lpu_rmw(self->fd, LP_OP_GET_PUT, 0, &r));
	EXPECT_EQ(-EINVAL, lpu_rmw(self->fd, LP_OP_SET, LP_RMW_VALUE_MAX + 1, &r));
	EXPECT_EQ(-EINVAL, lpu_run(self->fd, LP_OP_COUNT, 0, 1, 0, &run));
	EXPECT_EQ(-EINVAL, lpu_rmw(self->fd, LP_OP_RACY_INC, 0, &r));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -EOPNOTSUPP: KCSAN's racy control, off unless a parameter asks. */
	EXPECT_EQ(-EOPNOTSUPP, lpu_run(self->fd, LP_OP_RACY_INC, 0, 1, 0, &run));

	/* -EBUSY: CONFIGURE after the first NEW (above). */
	EXPECT_EQ(-EBUSY, lpu_configure(self->fd, LP_FLAVOR_LOCKLESS));

	/* -EBADF: handle never given, and handle already consumed. */
	EXPECT_EQ(-EBADF, lpu_get(self->fd, 0, &h2));
	EXPECT_EQ(-EBADF, lpu_get(self->fd, 12345, &h2));
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h, NULL));
	ASSERT_EQ(1, lpu_put(self->fd, h));
	EXPECT_EQ(-EBADF, lpu_put(self->fd, h));
	EXPECT_EQ(-EBADF, lpu_get(self->fd, h, &h2));
	EXPECT_EQ(-EBADF, lpu_stat(self->fd, h, &st));
	EXPECT_EQ(-EBADF, lpu_new(self->fd, h, &h2, NULL));
	EXPECT_EQ(-EBADF, lpu_lookup(self->fd, h, 1, &h2));
	EXPECT_EQ(-EBADF, lpu_run(self->fd, LP_OP_GET_PUT, h, 1, 0, &run));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -ENOENT: no such gadget. */
	EXPECT_EQ(-ENOENT, lpu_tryget(self->fd, 1ull << 40, &h2));
	ASSERT_EQ(0, arena_still_works(self->fd));

	/* -E2BIG: RUN above the cap. */
	EXPECT_EQ(-E2BIG, lpu_run(self->fd, LP_OP_ATOMIC_FLOOR, 0,
				  LP_RUN_MAX_ITERATIONS + 1, 0, &run));
	ASSERT_EQ(0, arena_still_works(self->fd));
}

/*
 * The increments saturate at LP_RMW_VALUE_MAX instead of wrapping, every
 * op reports the old and new value it actually left, and a MAX op finds
 * the saturated value above any operand (both modules once wrapped to
 * 0x80000000, and MAX_CMPXCHG then stored 5 over it).
 */
TEST_F(dev, rmw_increments_saturate_at_the_value_max)
{
	static const __u32 incs[] = {
		LP_OP_FETCH_INC_CMPXCHG, LP_OP_INC_NOT_ZERO_CMPXCHG,
		LP_OP_INC_NOT_ZERO_TRY_CMPXCHG,
	};
	const __u64 max = LP_RMW_VALUE_MAX;
	struct lp_run run;
	struct lp_rmw r;
	unsigned int i;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_FETCH_INC_CMPXCHG |
		  1ull << LP_OP_INC_NOT_ZERO_CMPXCHG |
		  1ull << LP_OP_INC_NOT_ZERO_TRY_CMPXCHG |
		  1ull << LP_OP_MAX_CMPXCHG | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	for (i = 0; i < ARRAY_SIZE(incs); i++) {
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, max - 1, &r));
		ASSERT_EQ(0, lpu_rmw(self->fd, incs[i], 0, &r));
		EXPECT_EQ(max - 1, r.old) TH_LOG("%s", op_names[incs[i]]);
		EXPECT_EQ(max, r.new) TH_LOG("%s", op_names[incs[i]]);
		ASSERT_EQ(0, lpu_rmw(self->fd, incs[i], 0, &r));
		EXPECT_EQ(max, r.old) TH_LOG("%s at the max", op_names[incs[i]]);
		EXPECT_EQ(max, r.new) TH_LOG("%s at the max", op_names[incs[i]]);
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		EXPECT_EQ(max, r.old) TH_LOG("%s wrapped", op_names[incs[i]]);

		/* In a RUN loop too: delta is what was really added. */
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, max - 3, &r));
		ASSERT_EQ(0, lpu_run(self->fd, incs[i], 0, 10, 0, &run));
		EXPECT_EQ(10, run.completed);
		EXPECT_EQ(3, run.delta) TH_LOG("%s", op_names[incs[i]]);
		ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
		EXPECT_EQ(max, r.old) TH_LOG("%s wrapped", op_names[incs[i]]);
	}
	/* The saturated value is the largest: MAX stores nothing below it. */
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_MAX_CMPXCHG, 5, &r));
	EXPECT_EQ(max, r.old);
	EXPECT_EQ(max, r.new);
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
	EXPECT_EQ(max, r.old);
}

/*
 * RUN's @value is an RMW operand only for RMW ops: for TRYGET_PUT and
 * LOOKUP_PUT it is a gadget id, and ids at or above 2^31 are ids like any
 * other (not -EINVAL).
 */
TEST_F(dev, run_takes_any_gadget_id)
{
	struct lp_run run;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_TRYGET_PUT))
		return;
	EXPECT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_PUT, 0, 3,
			     LP_RMW_VALUE_MAX + 1, &run));
	EXPECT_EQ(0, run.completed);
	EXPECT_EQ(0, lpu_run(self->fd, LP_OP_TRYGET_PUT, 0, 3, ~0ull, &run));
	EXPECT_EQ(0, run.completed);
}

/* What an arena and the module hold, to compare before and after. */
struct lpu_snapshot {
	struct lp_arena_stat as;
	__u64 live_gadgets, live_handles;
};

static int lpu_snapshot(int fd, struct lpu_snapshot *s)
{
	struct lp_identify id = { 0 };
	int ret;

	ret = lpu_arena_stat(fd, &s->as);
	if (!ret)
		ret = lpu_identify(fd, &id);
	s->live_gadgets = id.live_gadgets;
	s->live_handles = id.live_handles;
	return ret;
}

static void expect_unchanged(struct __test_metadata *_metadata,
			     const struct lpu_snapshot *before, int fd,
			     const char *what)
{
	struct lpu_snapshot now;

	ASSERT_EQ(0, lpu_snapshot(fd, &now));
	EXPECT_EQ(before->as.handles, now.as.handles) TH_LOG("%s", what);
	EXPECT_EQ(before->as.created, now.as.created) TH_LOG("%s", what);
	EXPECT_EQ(before->as.freed, now.as.freed) TH_LOG("%s", what);
	EXPECT_EQ(before->live_gadgets, now.live_gadgets) TH_LOG("%s", what);
	EXPECT_EQ(before->live_handles, now.live_handles) TH_LOG("%s", what);
}

/*
 * An ioctl whose answer cannot be written back fails with -EFAULT and
 * changes nothing: no gadget, no handle, no reference, no consumed handle,
 * no RMW store. The argument sits in a page userspace can read but not
 * write. The first NEW runs on a fresh arena: failing, it must not fix
 * the flavor either (CONFIGURE still works).
 */
TEST_F(dev, failed_copy_out_changes_nothing)
{
	long page = sysconf(_SC_PAGESIZE);
	struct lpu_snapshot before;
	struct lp_stat st, st2;
	struct lp_rmw r;
	__u32 root, child;
	__u64 cid;
	char *ro;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_KREF_MUTEX,
		  1ull << LP_OP_FETCH_INC_CMPXCHG | 1ull << LP_OP_SET |
		  1ull << LP_OP_READ))
		return;
	ro = mmap(NULL, page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);

#define RO_CALL(cmd, type, ...) ({					\
	memset(ro, 0, page);						\
	*(type *)ro = (type){ __VA_ARGS__ };				\
	mprotect(ro, page, PROT_READ) ? -1000 :				\
		({ int _r = lpu_call(self->fd, cmd, ro);			\
		   mprotect(ro, page, PROT_READ | PROT_WRITE); _r; });	\
})

	/* A failed first NEW leaves the arena unconfigured. */
	ASSERT_EQ(0, lpu_snapshot(self->fd, &before));
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_NEW, struct lp_new,
				   .parent = LP_HANDLE_NONE));
	expect_unchanged(_metadata, &before, self->fd, "NEW of a root");
	ASSERT_EQ(0, lpu_configure(self->fd, LP_FLAVOR_KREF_MUTEX))
		TH_LOG("a NEW that failed fixed the flavor");

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, root, &child, &cid));
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st));
	ASSERT_EQ(0, lpu_snapshot(self->fd, &before));

	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_NEW, struct lp_new, .parent = root));
	expect_unchanged(_metadata, &before, self->fd, "NEW of a child");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_GET, struct lp_get, .handle = root));
	expect_unchanged(_metadata, &before, self->fd, "GET");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_LOOKUP, struct lp_lookup,
				   .parent = root, .id = cid));
	expect_unchanged(_metadata, &before, self->fd, "LOOKUP");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TRYGET, struct lp_tryget, .id = cid));
	expect_unchanged(_metadata, &before, self->fd, "TRYGET");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_PUT, struct lp_put, .handle = child));
	expect_unchanged(_metadata, &before, self->fd, "PUT");
	EXPECT_EQ(0, lpu_stat(self->fd, child, &st2))
		TH_LOG("a PUT that failed consumed its handle");
	EXPECT_EQ(1, st2.refcount);
	ASSERT_EQ(0, lpu_stat(self->fd, root, &st2));
	EXPECT_EQ(st.refcount, st2.refcount);
	EXPECT_EQ(st.children, st2.children);

	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_SET, 7, &r));
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_RMW, struct lp_rmw,
				   .op = LP_OP_FETCH_INC_CMPXCHG));
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_RUN, struct lp_run,
				   .op = LP_OP_FETCH_INC_CMPXCHG,
				   .iterations = 10));
	ASSERT_EQ(0, lpu_rmw(self->fd, LP_OP_READ, 0, &r));
	EXPECT_EQ(7, r.old) TH_LOG("an RMW or RUN that failed stored");
#undef RO_CALL

	EXPECT_EQ(0, munmap(ro, page));
	EXPECT_EQ(1, lpu_put(self->fd, child));
	EXPECT_EQ(1, lpu_put(self->fd, root));
}

struct handle_count_race {
	int fd;
	__u32 root;
	int stop;		/* __atomic: set by the ARENA_STAT thread */
	unsigned long bad, reads;
};

/* GET a handle and let the other thread PUT it: the lowest free slot. */
static void *handle_churn_thread(void *arg)
{
	struct handle_count_race *sh = arg;
	__u32 h;

	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED))
		if (!lpu_get(sh->fd, sh->root, &h))
			lpu_put(sh->fd, h);
	return NULL;
}

static void *handle_put_thread(void *arg)
{
	struct handle_count_race *sh = arg;

	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED))
		lpu_put(sh->fd, sh->root + 1);
	return NULL;
}

static void *handle_stat_thread(void *arg)
{
	struct handle_count_race *sh = arg;
	struct lp_arena_stat as;
	double end = now_s() + 2.0;

	while (now_s() < end) {
		if (lpu_arena_stat(sh->fd, &as))
			continue;
		sh->reads++;
		if (as.handles > LP_MAX_HANDLES)
			sh->bad++;
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * ARENA_STAT's handle count never reads below zero (0xffffffff): a handle
 * is counted before it is published, so a PUT racing its GET finds it
 * counted. Two seconds of GETs of handle root + 1 raced by PUTs of it.
 */
TEST_F_TIMEOUT(dev, handle_count_never_goes_below_zero, LPU_SLOW_TIMEOUT)
{
	struct handle_count_race sh = { .fd = self->fd };
	pthread_t t[3];

	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &sh.root, NULL));
	ASSERT_EQ(0, pthread_create(&t[0], NULL, handle_churn_thread, &sh));
	ASSERT_EQ(0, pthread_create(&t[1], NULL, handle_put_thread, &sh));
	ASSERT_EQ(0, pthread_create(&t[2], NULL, handle_stat_thread, &sh));
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	EXPECT_LT(0, sh.reads);
	EXPECT_EQ(0, sh.bad) TH_LOG("%lu of %lu ARENA_STATs saw a count below 0",
				    sh.bad, sh.reads);
	EXPECT_EQ(1, lpu_put(self->fd, sh.root));
}

/*
 * LP_IOC_DELAY, the race tests' knob, answers bad input as every ioctl
 * does, with the same errno in both modules.
 */
TEST_F(dev, delay_knob_rejects_bad_input)
{
	const __u32 all = (1u << LP_DELAY_COUNT) - 1;
	struct lp_delay d;

	if (!self->id.delay_points) {
		memset(&d, 0, sizeof(d));
		EXPECT_EQ(-EOPNOTSUPP, lpu_call(self->fd, LP_IOC_DELAY, &d));
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	}
	EXPECT_EQ(all, self->id.delay_points);
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_DELAY, NULL));
	d = (struct lp_delay){ .points = all, .usecs = 1 };
	d.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_DELAY, &d));
	d = (struct lp_delay){ .points = all + 1, .usecs = 1 };
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_DELAY, &d));
	d = (struct lp_delay){ .points = all, .usecs = LP_DELAY_USECS_MAX + 1 };
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_DELAY, &d));
	d = (struct lp_delay){ .points = all, .usecs = LP_DELAY_USECS_MAX };
	EXPECT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));
	d = (struct lp_delay){ .points = 0, .usecs = 0 };
	EXPECT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));
	/* Disarmed again, the arena still works. */
	EXPECT_EQ(0, arena_still_works(self->fd));
}

/*
 * A NEW that fails after its gadget was allocated, a TRYGET of that
 * gadget, and a CONFIGURE that flips the flavor and the registry mode:
 * the gadget's last put must still be the put of the flavor it was made
 * in, and its free the free of its registry mode. The C module never lets
 * a TRYGET find an unpublished gadget (xa_reserve()); the Rust module
 * stores it in the registry at once, so its TRYGET may hold the last
 * count of a gadget whose NEW failed, and a CONFIGURE must not change
 * what that put does (a KBox freed as an Arc's data, or the reverse, is
 * heap corruption KASAN reports). LP_IOC_DELAY stretches both windows:
 * the NEW stalls after its allocation (NEW_ALLOC), the TRYGET after it
 * took its count (TRYGET_HELD), and the CONFIGURE comes in between.
 */
#define NF_STALL_US	200000
#define NF_TRYGET_US	50000
#define NF_CONFIGURE_US	100000

struct nf_race {
	int fd;
	void *ro;
	__u32 to_flavor, to_registry;
	int ret[3];		/* NEW, TRYGET, CONFIGURE */
};

static void *nf_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct nf_race *r = t->shared;
	__u32 h;

	switch (t->index) {
	case 0:
		r->ret[0] = lpu_call(r->fd, LP_IOC_NEW, r->ro);
		break;
	case 1:
		usleep(NF_TRYGET_US);
		r->ret[1] = lpu_tryget(r->fd, 1, &h);
		break;
	default:
		usleep(NF_CONFIGURE_US);
		r->ret[2] = lpu_configure_registry(r->fd, r->to_flavor,
						   r->to_registry);
		break;
	}
	return NULL;
}

TEST_F(dev, failed_new_held_by_tryget_keeps_its_flavor)
{
	static const __u32 flips[][4] = {
		{ LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_LOCK,
		  LP_FLAVOR_LOCKLESS, LP_REGISTRY_RCU },
		{ LP_FLAVOR_LOCKLESS, LP_REGISTRY_LOCK,
		  LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_RCU },
		{ LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_RCU,
		  LP_FLAVOR_LOCKLESS, LP_REGISTRY_LOCK },
		{ LP_FLAVOR_LOCKLESS, LP_REGISTRY_RCU,
		  LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_LOCK },
	};
	const __u32 points = 1u << LP_DELAY_NEW_ALLOC |
			     1u << LP_DELAY_TRYGET_HELD;
	long page = sysconf(_SC_PAGESIZE);
	struct lp_arena_stat as;
	unsigned int k;
	void *ro;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_KREF_MUTEX | 1u << LP_FLAVOR_LOCKLESS, 0))
		return;
	if ((self->id.delay_points & points) != points)
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	ro = mmap(NULL, page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	*(struct lp_new *)ro = (struct lp_new){ .parent = LP_HANDLE_NONE };
	ASSERT_EQ(0, mprotect(ro, page, PROT_READ));

	for (k = 0; k < ARRAY_SIZE(flips); k++) {
		struct lp_delay d = { .points = points, .usecs = NF_STALL_US };
		struct nf_race r = {
			.ro = ro,
			.to_flavor = flips[k][2],
			.to_registry = flips[k][3],
		};

		r.fd = open(variant->path, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, r.fd);
		ASSERT_EQ(0, lpu_configure_registry(r.fd, flips[k][0],
						    flips[k][1]));
		ASSERT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &d));
		run_threads(3, nf_racer, &r);

		/* The NEW's answer could not be copied out. */
		EXPECT_EQ(-EFAULT, r.ret[0]) TH_LOG("flip %u", k);
		/* Unpublished, then released: never handed out. */
		EXPECT_EQ(-ENOENT, r.ret[1]) TH_LOG("flip %u", k);
		/* Waited for the gadget to go, then flipped. */
		EXPECT_EQ(0, r.ret[2]) TH_LOG("flip %u", k);
		d.points = 0;
		EXPECT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &d));
		EXPECT_EQ(0, lpu_arena_stat(r.fd, &as));
		EXPECT_EQ(flips[k][2], as.flavor) TH_LOG("flip %u", k);
		EXPECT_EQ(0, as.live) TH_LOG("flip %u", k);
		EXPECT_EQ(0, arena_still_works(r.fd)) TH_LOG("flip %u", k);
		close(r.fd);
		/* Every gadget of the round freed, by its own put. */
		EXPECT_EQ(0, module_live(self->fd)) TH_LOG("flip %u", k);
	}
	munmap(ro, page);
}

/*
 * Windows of a few instructions where the code relies on a lock, a pin or
 * an RCU read-side section, widened by LP_IOC_DELAY to WD_STALL_US: the
 * thread that reaches the point stalls there, and the other comes in at
 * WD_ENTER_US. With the lock, pin or grace period in place, the order of
 * events is fixed and the answers below are exact; without it, KASAN
 * reports a use-after-free, or an answer changes. Each test also checks
 * that its stall ran, so that a point that is never reached cannot pass.
 */
#define WD_STALL_US	200000
#define WD_ENTER_US	100000

static bool wd_lacks_points(const struct lp_identify *id, __u32 points)
{
	return (id->delay_points & points) != points;
}

struct wd_race {
	int fd;
	__u32 h[3];
	__u64 id;
	int ret[4];
	double took[4];
	double t0[2];	/* now_s() as each racer began */
};

/* GET stalls between its handle lookup and its reference; PUT comes in. */
static void *wd_get_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct wd_race *r = t->shared;
	double t0 = now_s();

	if (t->index == 0) {
		r->ret[0] = lpu_get(r->fd, r->h[0], &r->h[1]);
		r->took[0] = now_s() - t0;
	} else {
		usleep(WD_ENTER_US);
		r->ret[1] = lpu_put(r->fd, r->h[0]);
	}
	return NULL;
}

TEST_F(dev, get_takes_its_reference_under_the_handle_lock)
{
	struct lp_delay d = {
		.points = 1u << LP_DELAY_HANDLE_GET, .usecs = WD_STALL_US,
	};
	struct wd_race r = { .fd = self->fd };

	if (wd_lacks_points(&self->id, d.points))
		SKIP(return, "%s has no delay points", variant->module);
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &r.h[0], NULL));
	ASSERT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));
	run_threads(2, wd_get_racer, &r);
	d.points = 0;
	ASSERT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));

	/* The GET found the handle and stalled holding the handle lock... */
	EXPECT_EQ(0, r.ret[0]);
	EXPECT_LE(WD_STALL_US / 1e6, r.took[0]);
	/* ...so the PUT of that handle waited, and its gadget lived on. */
	EXPECT_EQ(0, r.ret[1]);
	EXPECT_EQ(1, lpu_put(self->fd, r.h[1]));
	EXPECT_EQ(0, arena_still_works(self->fd));
}

/*
 * TRYGET stalls with the gadget found, before its get-unless-zero; the
 * final put comes in. LOCK mode: the put's release path unregisters the
 * gadget under the registry lock the TRYGET holds. RCU mode: the free
 * waits for a grace period, which waits for the TRYGET. Either way the
 * increment meets a count of zero and fails.
 */
static void *wd_tryget_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct wd_race *r = t->shared;
	double t0 = now_s();

	if (t->index == 0) {
		r->ret[0] = lpu_tryget(r->fd, r->id, &r->h[1]);
		r->took[0] = now_s() - t0;
	} else {
		usleep(WD_ENTER_US);
		r->ret[1] = lpu_put(r->fd, r->h[0]);
	}
	return NULL;
}

TEST_F(dev, tryget_found_gadget_outlives_its_final_put)
{
	static const __u32 cases[][2] = {
		{ LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_LOCK },
		{ LP_FLAVOR_KREF_MUTEX, LP_REGISTRY_RCU },
		{ LP_FLAVOR_LOCKLESS, LP_REGISTRY_LOCK },
		{ LP_FLAVOR_LOCKLESS, LP_REGISTRY_RCU },
	};
	struct lp_delay d = {
		.points = 1u << LP_DELAY_TRYGET_FOUND, .usecs = WD_STALL_US,
	};
	unsigned int k;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_KREF_MUTEX | 1u << LP_FLAVOR_LOCKLESS, 0))
		return;
	if (wd_lacks_points(&self->id, d.points))
		SKIP(return, "%s has no delay points", variant->module);
	for (k = 0; k < ARRAY_SIZE(cases); k++) {
		struct wd_race r = {
			.fd = open(variant->path, O_RDWR | O_CLOEXEC),
		};

		ASSERT_LE(0, r.fd);
		ASSERT_EQ(0, lpu_configure_registry(r.fd, cases[k][0],
						    cases[k][1]));
		ASSERT_EQ(0, lpu_new(r.fd, LP_HANDLE_NONE, &r.h[0], &r.id));
		ASSERT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &d));
		run_threads(2, wd_tryget_racer, &r);

		/* Found, stalled, and then the count was zero. */
		EXPECT_EQ(-ENOENT, r.ret[0]) TH_LOG("case %u", k);
		EXPECT_LE(WD_STALL_US / 1e6, r.took[0]) TH_LOG("case %u", k);
		EXPECT_EQ(1, r.ret[1]) TH_LOG("case %u", k);
		close(r.fd);
		EXPECT_EQ(0, module_live(self->fd)) TH_LOG("case %u", k);
	}
}

/*
 * The registry mode switch: a TRYGET reads RCU mode and stalls inside its
 * read-side section before its lookup; a CONFIGURE to LOCK mode comes in,
 * then a NEW whose gadget has the id the TRYGET looks for, and its final
 * put. C's CONFIGURE waits for a grace period when it leaves RCU mode,
 * Rust's for the TRYGET's hold of the arena's config: either way the
 * CONFIGURE returns only after the TRYGET's stall, whose lookup comes
 * before the NEW and finds nothing. Without that wait, the CONFIGURE
 * returns at once, the TRYGET's lookup lands between the NEW and the
 * put, finds the new gadget and stalls again (TRYGET_FOUND), and the put
 * frees it at once, as LOCK mode does, before its increment: KASAN, or
 * at least the CONFIGURE's early return.
 */
static void *wd_switch_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct wd_race *r = t->shared;
	double t0 = now_s();
	__u64 id = 0;

	r->t0[t->index] = t0;
	if (t->index == 0) {
		r->ret[0] = lpu_tryget(r->fd, r->id, &r->h[1]);
		r->took[0] = now_s() - t0;
		return NULL;
	}
	usleep(WD_ENTER_US);
	r->ret[1] = lpu_configure_registry(r->fd, LP_FLAVOR_LOCKLESS,
					   LP_REGISTRY_LOCK);
	r->took[1] = now_s() - t0;
	r->ret[2] = lpu_new(r->fd, LP_HANDLE_NONE, &r->h[0], &id);
	if (!r->ret[2] && id != r->id)
		r->ret[2] = -ERANGE;
	r->took[2] = now_s() - t0;
	usleep(WD_STALL_US);
	r->ret[3] = lpu_put(r->fd, r->h[0]);
	r->took[3] = now_s() - t0;
	return NULL;
}

TEST_F(dev, tryget_in_rcu_mode_finishes_before_a_switch_to_lock)
{
	struct lp_delay d = {
		.points = 1u << LP_DELAY_TRYGET_MODE |
			  1u << LP_DELAY_TRYGET_FOUND,
		.usecs = WD_STALL_US,
	};
	struct wd_race r = { .fd = self->fd, .id = 1 };

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_LOCKLESS, 0))
		return;
	if (wd_lacks_points(&self->id, d.points))
		SKIP(return, "%s has no delay points", variant->module);
	ASSERT_EQ(0, lpu_configure_registry(self->fd, LP_FLAVOR_LOCKLESS,
					    LP_REGISTRY_RCU));
	ASSERT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));
	run_threads(2, wd_switch_racer, &r);
	d.points = 0;
	ASSERT_EQ(0, lpu_call(self->fd, LP_IOC_DELAY, &d));

	/* The lookup ran before the NEW: nothing found, one stall only. */
	EXPECT_EQ(-ENOENT, r.ret[0]);
	EXPECT_LE(WD_STALL_US / 1e6, r.took[0]);
	/*
	 * The CONFIGURE waited for the TRYGET's stall: it returned a stall
	 * after the TRYGET was called, at least (its own thread may have
	 * begun later).
	 */
	EXPECT_EQ(0, r.ret[1]);
	EXPECT_LE(WD_STALL_US / 1e6, r.t0[1] + r.took[1] - r.t0[0])
		TH_LOG("TRYGET %.3f s, CONFIGURE %.3f s (%.3f s later), NEW %.3f s, PUT %.3f s",
		       r.took[0], r.took[1], r.t0[1] - r.t0[0], r.took[2],
		       r.took[3]);
	EXPECT_EQ(0, r.ret[2]);
	EXPECT_EQ(1, r.ret[3]);
	EXPECT_EQ(0, arena_still_works(self->fd));
}

/*
 * LOOKUP stalls holding the parent's list lock, the child found, before
 * its upgrade; the child's final put comes in, and must wait for the lock
 * (the 1 -> 0 step is taken under it): it then takes the count 2 -> 1
 * and releases nothing.
 */
static void *wd_lookup_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct wd_race *r = t->shared;
	double t0 = now_s();

	if (t->index == 0) {
		r->ret[0] = lpu_lookup(r->fd, r->h[0], r->id, &r->h[2]);
		r->took[0] = now_s() - t0;
	} else {
		usleep(WD_ENTER_US);
		r->ret[1] = lpu_put(r->fd, r->h[1]);
	}
	return NULL;
}

TEST_F(dev, lookup_upgrades_under_the_list_lock)
{
	static const __u32 flavors[] = {
		LP_FLAVOR_WEAK_CMPXCHG, LP_FLAVOR_KREF_MUTEX,
		LP_FLAVOR_KREF_LOCK, LP_FLAVOR_KREF_RWSEM,
	};
	struct lp_delay d = {
		.points = 1u << LP_DELAY_UPGRADE_LOCKED, .usecs = WD_STALL_US,
	}, off = { 0 };
	unsigned int k;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_WEAK_CMPXCHG | 1u << LP_FLAVOR_KREF_MUTEX |
		  1u << LP_FLAVOR_KREF_LOCK | 1u << LP_FLAVOR_KREF_RWSEM, 0))
		return;
	if (wd_lacks_points(&self->id, d.points))
		SKIP(return, "%s has no delay points", variant->module);
	for (k = 0; k < ARRAY_SIZE(flavors); k++) {
		struct wd_race r = {
			.fd = open(variant->path, O_RDWR | O_CLOEXEC),
		};

		ASSERT_LE(0, r.fd);
		ASSERT_EQ(0, lpu_configure(r.fd, flavors[k]));
		ASSERT_EQ(0, lpu_new(r.fd, LP_HANDLE_NONE, &r.h[0], NULL));
		ASSERT_EQ(0, lpu_new(r.fd, r.h[0], &r.h[1], &r.id));
		ASSERT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &d));
		run_threads(2, wd_lookup_racer, &r);
		ASSERT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &off));

		EXPECT_EQ(0, r.ret[0]) TH_LOG("flavor %u", flavors[k]);
		EXPECT_LE(WD_STALL_US / 1e6, r.took[0])
			TH_LOG("flavor %u", flavors[k]);
		/* The upgrade came first: the put was not the last. */
		EXPECT_EQ(0, r.ret[1]) TH_LOG("flavor %u", flavors[k]);
		if (!r.ret[0])
			EXPECT_EQ(1, lpu_put(r.fd, r.h[2]))
				TH_LOG("flavor %u", flavors[k]);
		EXPECT_EQ(1, lpu_put(r.fd, r.h[0])) TH_LOG("flavor %u", flavors[k]);
		close(r.fd);
		EXPECT_EQ(0, module_live(self->fd)) TH_LOG("flavor %u", flavors[k]);
	}
}

/*
 * The owner pin of a slow put (lp_owner_pin()). A LOOKUP of the child
 * stalls holding the parent's lock before its upgrade (UPGRADE_LOCKED);
 * the child's put comes in, finds the count at one, pins the parent and
 * waits for the lock; the upgrade takes the count to two, so the put's
 * decrement under the lock is not the last, and after its unlock the put
 * stalls and touches the lock again, as the unlock's slow path may
 * (PUT_UNLOCKED). Meanwhile the parent's handle and the LOOKUP's
 * reference are put: the child is released, and with it its reference to
 * the parent, whose only one left is the pin. Dropping the pin releases
 * the parent, after the touch. Without the pin the parent, and the lock
 * in it, are freed before the touch: KASAN.
 */
static void *wd_pin_racer(void *arg)
{
	struct lpu_thread *t = arg;
	struct wd_race *r = t->shared;
	double t0 = now_s();

	r->t0[t->index] = t0;
	if (t->index == 0) {
		r->ret[0] = lpu_lookup(r->fd, r->h[0], r->id, &r->h[2]);
		/* Past the put's decrement, inside its second stall. */
		usleep(WD_ENTER_US);
		r->ret[2] = lpu_put(r->fd, r->h[0]);
		r->ret[3] = r->ret[0] ? -1 : lpu_put(r->fd, r->h[2]);
	} else {
		usleep(WD_ENTER_US);
		r->ret[1] = lpu_put(r->fd, r->h[1]);
		r->took[1] = now_s() - t0;
	}
	return NULL;
}

TEST_F(dev, slow_put_keeps_the_lock_it_unlocks_pinned)
{
	static const __u32 flavors[] = {
		LP_FLAVOR_KREF_MUTEX, LP_FLAVOR_KREF_RWSEM,
	};
	struct lp_delay d = {
		.points = 1u << LP_DELAY_UPGRADE_LOCKED |
			  1u << LP_DELAY_PUT_UNLOCKED,
		.usecs = WD_STALL_US,
	};
	unsigned int k;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_KREF_MUTEX | 1u << LP_FLAVOR_KREF_RWSEM, 0))
		return;
	if (wd_lacks_points(&self->id, d.points))
		SKIP(return, "%s has no delay points", variant->module);
	for (k = 0; k < ARRAY_SIZE(flavors); k++) {
		struct wd_race r = {
			.fd = open(variant->path, O_RDWR | O_CLOEXEC),
		};

		ASSERT_LE(0, r.fd);
		ASSERT_EQ(0, lpu_configure(r.fd, flavors[k]));
		ASSERT_EQ(0, lpu_new(r.fd, LP_HANDLE_NONE, &r.h[0], NULL));
		ASSERT_EQ(0, lpu_new(r.fd, r.h[0], &r.h[1], &r.id));
		ASSERT_EQ(0, lpu_call(r.fd, LP_IOC_DELAY, &d));
		run_threads(2, wd_pin_racer, &r);

		EXPECT_EQ(0, r.ret[0]) TH_LOG("flavor %u", flavors[k]);
		/* The parent's handle: the child and the pin hold it. */
		EXPECT_EQ(0, r.ret[2]) TH_LOG("flavor %u", flavors[k]);
		/* The LOOKUP's reference was the child's last. */
		EXPECT_EQ(1, r.ret[3]) TH_LOG("flavor %u", flavors[k]);
		/* Not the last of the child, and the pin was the parent's. */
		EXPECT_EQ(1, r.ret[1]) TH_LOG("flavor %u", flavors[k]);
		/* The LOOKUP's stall, then the put's own, from the LOOKUP on. */
		EXPECT_LE(2 * WD_STALL_US / 1e6, r.t0[1] + r.took[1] - r.t0[0])
			TH_LOG("flavor %u", flavors[k]);
		close(r.fd);
		EXPECT_EQ(0, module_live(self->fd)) TH_LOG("flavor %u", flavors[k]);
	}
}

TEST_F(dev, lookup_in_flavor_without_child_list_is_eopnotsupp)
{
	struct lp_run run;
	__u32 p, c, h;
	__u64 id;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_LOCKLESS, 0))
		return;
	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_LOOKUP_PUT))
		return;
	ASSERT_EQ(0, lpu_configure(self->fd, LP_FLAVOR_LOCKLESS));
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &p, NULL));
	ASSERT_EQ(0, lpu_new(self->fd, p, &c, &id));
	EXPECT_EQ(-EOPNOTSUPP, lpu_lookup(self->fd, p, id, &h));
	EXPECT_EQ(-EOPNOTSUPP, lpu_run(self->fd, LP_OP_LOOKUP_PUT, p, 1, id, &run));
	EXPECT_EQ(0, lpu_put(self->fd, p));
	EXPECT_EQ(2, lpu_put(self->fd, c));
	EXPECT_EQ(0, arena_still_works(self->fd));
}

TEST_F_TIMEOUT(dev, full_handle_table_is_enospc, LPU_SLOW_TIMEOUT)
{
	struct lp_arena_stat as;
	__u32 root, h;
	int i, ret = 0;

	if (lacks(_metadata, &self->id, variant->module, variant->reference,
		  1u << LP_FLAVOR_LOCKED, 0))
		return;
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	for (i = 1; i < LP_MAX_HANDLES; i++) {
		ret = lpu_get(self->fd, root, &h);
		if (ret)
			break;
	}
	ASSERT_EQ(0, ret) TH_LOG("GET %d of %d", i, LP_MAX_HANDLES);
	EXPECT_EQ(-ENOSPC, lpu_get(self->fd, root, &h));
	EXPECT_EQ(-ENOSPC, lpu_new(self->fd, LP_HANDLE_NONE, &h, NULL));
	EXPECT_EQ(-ENOSPC, lpu_tryget(self->fd, 1, &h));
	ASSERT_EQ(0, lpu_arena_stat(self->fd, &as));
	EXPECT_EQ(LP_MAX_HANDLES, as.handles);
	/* The refused gets left nothing behind; one put frees room again. */
	EXPECT_EQ(1, as.live);
	EXPECT_EQ(0, lpu_put(self->fd, root));
	EXPECT_EQ(0, arena_still_works(self->fd));
	/* close() in teardown puts the rest. */
}

/*
 * A SIGKILL must end a RUN within LPU_KILL_BOUND seconds, i.e. inside the
 * loop: the test first measures that the RUN it kills (NEW_PUT, an
 * allocation and a free per iteration, LP_RUN_MAX_ITERATIONS of them)
 * would take at least ten times that long.
 */
#define LPU_KILL_BOUND	5

TEST_F_TIMEOUT(dev, fatal_signal_stops_a_run, 120)
{
	struct lp_run run;
	int status, fd, ready[2];
	double t_kill;
	__u32 root;
	pid_t pid;
	char c;

	if (lacks(_metadata, &self->id, variant->module, variant->reference, 0,
		  1ull << LP_OP_NEW_PUT))
		return;
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &root, NULL));
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_NEW_PUT, root, 1000, 0, &run));
	ASSERT_LT(10.0 * LPU_KILL_BOUND,
		  run.elapsed_ns / 1e9 * (LP_RUN_MAX_ITERATIONS / 1000))
		TH_LOG("a full RUN is too quick to tell a kill from its end");
	ASSERT_EQ(1, lpu_put(self->fd, root));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		fd = open(variant->path, O_RDWR | O_CLOEXEC);
		if (fd < 0 || lpu_new(fd, LP_HANDLE_NONE, &root, NULL))
			_exit(2);
		/* Tell the parent we are about to enter the loop. */
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		lpu_run(fd, LP_OP_NEW_PUT, root, LP_RUN_MAX_ITERATIONS, 0, &run);
		_exit(3);	/* the loop ended on its own: not killed */
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	usleep(200000);
	t_kill = now_s();
	ASSERT_EQ(0, kill(pid, SIGKILL));
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_s() - t_kill > LPU_KILL_BOUND)
			break;
		usleep(10000);
	}
	EXPECT_GE(LPU_KILL_BOUND, now_s() - t_kill)
		TH_LOG("RUN ignored SIGKILL for more than %d s", LPU_KILL_BOUND);
	if (now_s() - t_kill > LPU_KILL_BOUND)
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* Killed inside the loop, not after it finished. */
	ASSERT_TRUE(WIFSIGNALED(status)) TH_LOG("child exited %d", WEXITSTATUS(status));
	EXPECT_EQ(SIGKILL, WTERMSIG(status));
	EXPECT_EQ(0, arena_still_works(self->fd));
}

/* ---- allocation failure: the sweep of lockless_test.h -------------- */

/*
 * open() itself, and the handle tables at their growth points: GET walks
 * the table up past C's first new xarray node (64) and Rust's vector
 * doublings, LOOKUP and TRYGET each on to the next growth; then the
 * tables past a page, where a Rust table of more than 512 handles is a
 * page allocation, which failslab alone never fails.
 */
TEST_F_TIMEOUT(dev, handle_tables_fail_all_or_nothing, LPU_SLOW_TIMEOUT)
{
	const char *m = variant->module;
	struct fl_count cnt;
	struct fl_ctx *c;
	unsigned int i;
	__u32 h;

	ASSERT_EQ(0, fl_setup())
		TH_LOG("the debug kernel needs FAILSLAB, FAIL_PAGE_ALLOC and debugfs");
	c = calloc(1, sizeof(*c));
	ASSERT_NE(NULL, c);
	fl_init(c, variant->path, self->fd, LP_FLAVOR_KREF_MUTEX);
	fl_sweep(_metadata, c, FL_OPEN, 1, 1, &cnt);
	fl_report(_metadata, m, "-", FL_OPEN, &cnt);
	fl_expect_reached(_metadata, FL_OPEN, &cnt);

	ASSERT_EQ(0, lpu_configure(self->fd, LP_FLAVOR_KREF_MUTEX));
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &h, NULL));
	fl_hold(c, false, h);
	fl_track(c, FL_ROOT, h);
	ASSERT_EQ(0, lpu_new(self->fd, h, &h, NULL));
	fl_hold(c, false, h);
	fl_track(c, FL_CHILD, h);
	fl_sweep(_metadata, c, FL_GET, FL_GROW_QUICK, LP_MAX_HANDLES, &cnt);
	fl_report(_metadata, m, "KREF_MUTEX", FL_GET, &cnt);
	fl_expect_reached(_metadata, FL_GET, &cnt);
	fl_sweep(_metadata, c, FL_LOOKUP, 1, LP_MAX_HANDLES, &cnt);
	fl_report(_metadata, m, "KREF_MUTEX", FL_LOOKUP, &cnt);
	fl_expect_reached(_metadata, FL_LOOKUP, &cnt);
	fl_sweep(_metadata, c, FL_TRYGET, 1, LP_MAX_HANDLES, &cnt);
	fl_report(_metadata, m, "KREF_MUTEX", FL_TRYGET, &cnt);
	fl_expect_reached(_metadata, FL_TRYGET, &cnt);

	while (c->nheld < FL_PAGE_FROM) {
		ASSERT_EQ(0, lpu_get(self->fd, c->handle[FL_ROOT], &h));
		fl_hold(c, false, h);
	}
	fl_sweep(_metadata, c, FL_GET, FL_PAGE_TO - FL_PAGE_FROM,
		 FL_PAGE_TO - FL_PAGE_FROM, &cnt);
	fl_report(_metadata, m, "KREF_MUTEX", FL_GET, &cnt);
	fl_expect_reached(_metadata, FL_GET, &cnt);
	for (i = 0; i < FL_PAGE_FROM; i++) {
		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
		fl_hold(c, true, h);
	}
	fl_sweep(_metadata, c, FL_TXN_START, FL_PAGE_TO - FL_PAGE_FROM,
		 FL_PAGE_TO - FL_PAGE_FROM, &cnt);
	fl_report(_metadata, m, "-", FL_TXN_START, &cnt);
	fl_expect_reached(_metadata, FL_TXN_START, &cnt);
	/* No slot kept by a failure: both tables fill to LP_MAX_HANDLES. */
	fl_fill_handles(_metadata, c, false);
	fl_fill_handles(_metadata, c, true);
	free(c);
	/* close() puts and stops every handle. */
}
