/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lockless_test.h - what every part of the driver shares: the includes and
 * the harness, the sizes (LP_PRESET) and the bounds every fixture uses,
 * thin ioctl wrappers returning 0 or -errno, threads pinned to CPUs, the
 * after-test leak check, the helpers more than one fixture calls, and the
 * allocation-failure sweep (fl_*) that dev, flavor, txn and fuzz.failing
 * run.
 *
 * Included first by lockless_test.c, then by each fixture file it
 * #includes: one translation unit (see lockless_test.c).
 *
 * Sizes are for QEMU TCG with KASAN and lockdep on two host cores, where
 * one ioctl costs tens of microseconds: see each #define.
 *
 * Names: lp_ and LP_ are the contract's (lockless_uapi.h) and the
 * modules'. What userspace defines for itself, here and in
 * lockless_demo.c and lockless_bench.c, is lpu_ and LPU_ (lpu_txn_stop()
 * wraps TXN_STOP, lp_txn_stop() is the modules' function), so that a grep
 * for a module's name lands in a module. The environment variables
 * (LP_PRESET, LP_RACE_PUTS, ...) keep their names: scripts/ sets them.
 */
#ifndef _LOCKLESS_TEST_H
#define _LOCKLESS_TEST_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "lockless_uapi.h"
#include "lockless_names.h"

#ifndef LPU_MODULE_DIR
#define LPU_MODULE_DIR "/modules"
#endif

/*
 * Sizes. One ioctl costs ~50-100 us in the guest (TCG, KASAN, lockdep, 4
 * vCPUs on 2 host cores), so ioctl-driven loops stay in the thousands and
 * the big counts run in the kernel (LP_IOC_RUN). The sizes that only add
 * confidence with time come in two presets, chosen by LP_PRESET in the
 * environment (make check: quick, make soak: full):
 *
 *   chain_depth   the deep chain released by one put, without recursion
 *                 (2,000 is already far more than recursion survives on
 *                 a 16 KiB kernel stack: 8 bytes a level would fill it,
 *                 and a call's frame is more than its return address)
 *   race_puts     in-kernel racing final puts per flavor and module and
 *                 round (RUN NEW_PUT against RUN LOOKUP_PUT/TRYGET_PUT),
 *                 ~1,000 per second under TCG; another round runs, up to
 *                 LPU_RACE_ROUNDS, only while an interleaving is unseen
 *   race_children short-lived children per creator thread in the
 *                 ioctl-driven final-put race
 *   handle_rounds rounds of the handle-ops-vs-PUT race (~0.03 s each)
 *   storm_ioctls  ioctl get/put pairs per thread in a storm
 *   storm_run     in-kernel get/put pairs per thread in a storm
 *   rmw_run       in-kernel RMW ops per thread in the contention tests
 *   txn_commits   least COMMITs racing handle starts and stops in the
 *                 drain test, a third of which must find a handle running
 *                 (and 16 times as many watcher reads in the extend test,
 *                 every 16th a COMMIT)
 *
 * LP_RACE_PUTS=N and LP_CHAIN_DEPTH=N override one size of the preset.
 */
struct lpu_sizes {
	const char *preset;
	unsigned long long chain_depth;
	unsigned long long race_puts;
	unsigned long long race_children;
	unsigned long long handle_rounds;
	unsigned long long storm_ioctls;
	unsigned long long storm_run;
	unsigned long long rmw_run;
	unsigned long long txn_commits;
};

static const struct lpu_sizes lpu_presets[] = {
	{ "quick", 1000, 1000, 500, 20, 300, 20000, 50000, 300 },
	{ "full", 100000, 100000, 3000, 40, 1000, 50000, 100000, 3000 },
};

static struct lpu_sizes sizes;

static unsigned long long env_size(const char *name, unsigned long long def)
{
	const char *env = getenv(name);

	return env && *env ? strtoull(env, NULL, 10) : def;
}

/* Before the harness's KTAP header, so that the judge's parser skips it. */
static void __attribute__((constructor)) read_sizes(void)
{
	const char *preset = getenv("LP_PRESET");
	size_t i;

	sizes = lpu_presets[0];
	for (i = 0; i < ARRAY_SIZE(lpu_presets); i++)
		if (preset && !strcmp(preset, lpu_presets[i].preset))
			sizes = lpu_presets[i];
	sizes.race_puts = env_size("LP_RACE_PUTS", sizes.race_puts);
	sizes.chain_depth = env_size("LP_CHAIN_DEPTH", sizes.chain_depth);
	/* Enough for the race tests' "it happened" counts to be non-zero. */
	if (sizes.race_puts < 1000)
		sizes.race_puts = 1000;
	if (sizes.chain_depth < 2)
		sizes.chain_depth = 2;
	printf("# sizes: preset=%s chain_depth=%llu race_puts=%llu",
	       sizes.preset, sizes.chain_depth, sizes.race_puts);
	printf(" race_children=%llu handle_rounds=%llu storm_ioctls=%llu",
	       sizes.race_children, sizes.handle_rounds, sizes.storm_ioctls);
	printf(" storm_run=%llu rmw_run=%llu", sizes.storm_run, sizes.rmw_run);
	printf(" txn_commits=%llu\n", sizes.txn_commits);
	fflush(stdout);
}

/* The in-kernel race's own limit: 10^5 puts take ~100 s, 6x headroom. */
#define LPU_RACE_TIMEOUT		600
/* Iterations of one racer RUN chunk: a racer re-checks "done" after each. */
#define LPU_RACE_CHUNK		200
/* Racers' pause between two chunks (kernel_lookups_and_trygets_...). */
#define LPU_RACER_PAUSE_US	5000
/*
 * Most rounds of race_puts the in-kernel race runs until it has seen every
 * interleaving it checks for (in practice one: the slow phase below makes
 * the rarest of them, a racer's final put, near certain).
 */
#define LPU_RACE_ROUNDS		8
/* Most ioctl-made children of one creator's slow phase, and their hold. */
#define LPU_SLOW_CHILDREN	1000
#define LPU_SLOW_HOLD_US	200
/* Random values per thread in the RMW tests. */
#define LPU_RMW_VALUES		1000
/*
 * Values per thread in the chain test: a cmpxchg race is a window of a few
 * instructions against ~60 us per ioctl, so a lost race is rare there;
 * the in-kernel tests (rmw_run) are where the ops really contend.
 */
#define LPU_CHAIN_VALUES		2000
/* Least failed cmpxchg an in-kernel contention run of a CAS op must see. */
#define LPU_MIN_CONTENDED	200
/* Iterations of the RUN tests. */
#define LPU_RUN_ITERATIONS	10000
/* TXN_STATs a committer makes at most, waiting for a handle to drain. */
#define LPU_TXN_POLLS		1000
/* Longest the drain race goes on (its COMMITs take ~3 ms each). */
#define LPU_TXN_RACE_S		60
/* Slow tests get this many seconds instead of the harness's 30. */
#define LPU_SLOW_TIMEOUT		300

/* ---- thin ioctl wrappers: 0 or -errno ---------------------------------- */

static int lpu_call(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static int lpu_identify(int fd, struct lp_identify *id)
{
	memset(id, 0, sizeof(*id));
	return lpu_call(fd, LP_IOC_IDENTIFY, id);
}

static int lpu_configure_registry(int fd, __u32 flavor, __u32 registry)
{
	struct lp_configure c = { .flavor = flavor, .registry = registry };

	return lpu_call(fd, LP_IOC_CONFIGURE, &c);
}

static int lpu_configure(int fd, __u32 flavor)
{
	return lpu_configure_registry(fd, flavor, LP_REGISTRY_LOCK);
}

static int lpu_new(int fd, __u32 parent, __u32 *handle, __u64 *id)
{
	struct lp_new n = { .parent = parent };
	int ret = lpu_call(fd, LP_IOC_NEW, &n);

	if (!ret) {
		*handle = n.handle;
		if (id)
			*id = n.id;
	}
	return ret;
}

static int lpu_get(int fd, __u32 handle, __u32 *new_handle)
{
	struct lp_get g = { .handle = handle };
	int ret = lpu_call(fd, LP_IOC_GET, &g);

	if (!ret)
		*new_handle = g.new_handle;
	return ret;
}

/* Returns the number released (>= 0) or -errno. */
static int lpu_put(int fd, __u32 handle)
{
	struct lp_put p = { .handle = handle };
	int ret = lpu_call(fd, LP_IOC_PUT, &p);

	return ret ? ret : (int)p.released;
}

static int lpu_lookup(int fd, __u32 parent, __u64 id, __u32 *handle)
{
	struct lp_lookup l = { .parent = parent, .id = id };
	int ret = lpu_call(fd, LP_IOC_LOOKUP, &l);

	if (!ret)
		*handle = l.handle;
	return ret;
}

static int lpu_tryget(int fd, __u64 id, __u32 *handle)
{
	struct lp_tryget t = { .id = id };
	int ret = lpu_call(fd, LP_IOC_TRYGET, &t);

	if (!ret)
		*handle = t.handle;
	return ret;
}

static int lpu_stat(int fd, __u32 handle, struct lp_stat *s)
{
	memset(s, 0, sizeof(*s));
	s->handle = handle;
	return lpu_call(fd, LP_IOC_STAT, s);
}

static int lpu_arena_stat(int fd, struct lp_arena_stat *s)
{
	memset(s, 0, sizeof(*s));
	return lpu_call(fd, LP_IOC_ARENA_STAT, s);
}

static int lpu_rmw(int fd, __u32 op, __u64 value, struct lp_rmw *r)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->value = value;
	return lpu_call(fd, LP_IOC_RMW, r);
}

static int lpu_run(int fd, __u32 op, __u32 handle, __u64 iterations,
		   __u64 value, struct lp_run *r)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->handle = handle;
	r->iterations = iterations;
	r->value = value;
	return lpu_call(fd, LP_IOC_RUN, r);
}

static int lpu_txn_configure(int fd, __u32 flavor, __u32 max_credits)
{
	struct lp_txn_configure c = {
		.flavor = flavor, .max_credits = max_credits,
	};

	return lpu_call(fd, LP_IOC_TXN_CONFIGURE, &c);
}

static int lpu_txn_start(int fd, __u32 *handle, __u64 *tid)
{
	struct lp_txn_start s = { 0 };
	int ret = lpu_call(fd, LP_IOC_TXN_START, &s);

	if (!ret) {
		*handle = s.handle;
		if (tid)
			*tid = s.tid;
	}
	return ret;
}

/* A START that asks for @nblocks credits. */
static int lpu_txn_start_n(int fd, __u32 nblocks, __u32 *handle)
{
	struct lp_txn_start s = { .nblocks = nblocks };
	int ret = lpu_call(fd, LP_IOC_TXN_START, &s);

	if (!ret)
		*handle = s.handle;
	return ret;
}

/* Returns the credits given back (>= 0) or -errno. */
static int lpu_txn_stop(int fd, __u32 handle)
{
	struct lp_txn_stop s = { .handle = handle };
	int ret = lpu_call(fd, LP_IOC_TXN_STOP, &s);

	return ret ? ret : (int)s.credits;
}

static int lpu_txn_extend(int fd, __u32 handle, __u32 nblocks,
			  struct lp_txn_extend *e)
{
	memset(e, 0, sizeof(*e));
	e->handle = handle;
	e->nblocks = nblocks;
	return lpu_call(fd, LP_IOC_TXN_EXTEND, e);
}

static int lpu_txn_commit(int fd, __u32 timeout_ms, struct lp_txn_commit *c)
{
	memset(c, 0, sizeof(*c));
	c->timeout_ms = timeout_ms;
	return lpu_call(fd, LP_IOC_TXN_COMMIT, c);
}

static int lpu_txn_stat(int fd, struct lp_txn_stat *s)
{
	memset(s, 0, sizeof(*s));
	return lpu_call(fd, LP_IOC_TXN_STAT, s);
}

static __u64 module_live(int fd)
{
	struct lp_identify id;

	if (lpu_identify(fd, &id))
		return ~0ull;
	return id.live_gadgets;
}

/*
 * Read once: glibc's sysconf() opens /sys/devices/system/cpu/online, and
 * threads opening one sysfs file at once meet a race of the kernel's own
 * (kernfs_iop_permission() rewrites the inode's i_mode while an RCU path
 * walk reads it), which the KCSAN kernel reports and panics on.
 */
static int nr_cpus(void)
{
	static int cached;
	int n = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	long v;

	if (n)
		return n;
	v = sysconf(_SC_NPROCESSORS_ONLN);
	n = v < 1 ? 1 : (int)v;
	__atomic_store_n(&cached, n, __ATOMIC_RELAXED);
	return n;
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % nr_cpus(), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Run @fn in @n threads, each pinned to CPU (index % online CPUs); they
 * start together (a barrier after pinning) so that they overlap.
 */
struct lpu_thread {
	pthread_t tid;
	int index;
	void *shared;
	void *(*fn)(void *arg);
	pthread_barrier_t *start;
};

static void *thread_start(void *arg)
{
	struct lpu_thread *t = arg;

	pin_to_cpu(t->index);
	pthread_barrier_wait(t->start);
	return t->fn(arg);
}

static void run_threads(int n, void *(*fn)(void *), void *shared)
{
	struct lpu_thread *t = calloc(n, sizeof(*t));
	pthread_barrier_t start;
	int i;

	pthread_barrier_init(&start, NULL, n);
	for (i = 0; i < n; i++) {
		t[i].index = i;
		t[i].shared = shared;
		t[i].fn = fn;
		t[i].start = &start;
		pthread_create(&t[i].tid, NULL, thread_start, &t[i]);
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i].tid, NULL);
	pthread_barrier_destroy(&start);
	free(t);
}

/*
 * After every test, with its own files closed: the module holds exactly the
 * one arena this check opens, and no gadget or handle. A leaked arena,
 * gadget or handle fails the test that leaked it, even where kmemleak
 * stays quiet (a stale pointer is enough to hide a leak from it).
 */
static void expect_module_clean(struct __test_metadata *_metadata,
				const char *path)
{
	struct lp_identify id;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd) TH_LOG("open %s: %s", path, strerror(errno));
	EXPECT_EQ(0, lpu_identify(fd, &id));
	EXPECT_EQ(1, id.live_arenas) TH_LOG("%s: arenas leaked", path);
	EXPECT_EQ(0, id.live_gadgets) TH_LOG("%s: gadgets leaked", path);
	EXPECT_EQ(0, id.live_handles) TH_LOG("%s: handles leaked", path);
	close(fd);
}

/* ---- helpers more than one fixture calls ----------------------------- */

/*
 * lacks() - whether the device lacks a flavor or op the test needs
 *
 * A variant that is not a reference skips with the reason; a reference
 * fails. Either way the test returns at once when this is true.
 */
static bool lacks(struct __test_metadata *_metadata,
		  const struct lp_identify *id, const char *module,
		  bool reference, __u32 flavors, __u64 ops)
{
	__u32 fmiss = flavors & ~id->flavors;
	__u64 omiss = ops & ~id->ops;

	if (!fmiss && !omiss)
		return false;
	if (fmiss && !reference)
		SKIP(return true, "%s does not implement flavor %s yet",
		     module, flavor_names[__builtin_ctz(fmiss)]);
	if (!reference)
		SKIP(return true, "%s does not implement op %s yet",
		     module, op_names[__builtin_ctzll(omiss)]);
	EXPECT_EQ(0, fmiss) TH_LOG("%s must implement every flavor", module);
	EXPECT_EQ(0, omiss) TH_LOG("%s must implement every op", module);
	return true;
}

/* xorshift32: a seeded, reproducible value stream per thread. */
static __u32 rnd(__u32 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static int arena_still_works(int fd)
{
	__u32 h;
	int ret = lpu_new(fd, LP_HANDLE_NONE, &h, NULL);

	if (ret)
		return ret;
	ret = lpu_put(fd, h);
	return ret == 1 ? 0 : -1;
}

static bool has_child_list(__u32 flavor)
{
	return flavor != LP_FLAVOR_LOCKED && flavor != LP_FLAVOR_LOCKLESS;
}

/* ---- allocation failure: every allocation of every call may fail ------- */

/*
 * fail-nth (FAILSLAB and FAIL_PAGE_ALLOC in the debug kernel) fails the
 * N-th allocation the calling thread makes from the moment N is written
 * to /proc/thread-self/fail-nth: slab or page, sleeping or not, the
 * module's own or one the core makes on its behalf (an xarray node,
 * kmemleak's record of the object). The sweep calls one ioctl with
 * N = 1, 2, ... on the same state until a call no longer reaches an N-th
 * allocation, twice for each N: with the N-th allocation failing alone,
 * and with it and every later one failing (make-it-fail, probability 100,
 * from the N-th on), which also fails the retry that gets around a single
 * failure (an xarray node is tried under the lock, then outside it: one
 * failure alone never reaches the caller of xa_alloc()). The contract is
 * all or nothing (lockless_uapi.h):
 *
 *   - a call that answers -ENOMEM leaves the state exactly as it found it;
 *   - a call that got around its failure (the xarray retries a node it
 *     could not allocate under its lock outside it; kmemleak falls back to
 *     its pool) leaves exactly what the same call leaves without one.
 *
 * The state is everything userspace can see of the arena (struct
 * fl_snap): its counters, the transaction's, the module's live counters,
 * whether CONFIGURE is still allowed (the arena not yet configured, no
 * gadget counted in its quota; the flavor sweep asks with the same
 * CONFIGURE again), the STAT of the gadgets the sweep tracks, which ids
 * the registry and the child list hold (RUN TRYGET_PUT and LOOKUP_PUT:
 * they find a gadget without creating a handle, so they do not grow the
 * handle tables themselves), and the handle numbers: a call that
 * succeeds must get the lowest free number, which a slot leaked by an
 * earlier failure would take away. What no snapshot shows, a count
 * kept against a limit, the fl_fill_*() checks see after the sweep, by
 * filling the limit exactly. After a call that got around its
 * failure, the sweep undoes it (PUT, TXN_STOP, close) and goes on with
 * N + 1 (fl_sweep_once() says in which order); after the call that
 * reached no N-th allocation, it keeps what the call made, so that
 * successive calls walk the tables up past their growth points.
 */
static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = write(fd, s, strlen(s)) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Fail sleeping and page allocations too, of any order, and quietly; and
 * every allocation of a task whose make-it-fail is set (only the sweep's
 * own thread, for the length of one call). fuzz.failing uses it too.
 */
static int fl_setup(void)
{
	static const char * const attrs[] = { "failslab", "fail_page_alloc" };
	static const char * const knobs[][2] = {
		{ "ignore-gfp-wait", "N" },
		{ "verbose", "0" },
		{ "task-filter", "Y" },
		{ "probability", "100" },
		{ "interval", "1" },
		{ "times", "-1" },
		{ "space", "0" },
	};
	char path[128];
	size_t a, i;
	int ret;

	for (a = 0; a < ARRAY_SIZE(attrs); a++)
		for (i = 0; i < ARRAY_SIZE(knobs); i++) {
			snprintf(path, sizeof(path), "/sys/kernel/debug/%s/%s",
				 attrs[a], knobs[i][0]);
			ret = write_file(path, knobs[i][1]);
			if (ret)
				return ret;
		}
	ret = write_file("/sys/kernel/debug/fail_page_alloc/ignore-gfp-highmem",
			 "N");
	return ret ?: write_file("/sys/kernel/debug/fail_page_alloc/min-order",
				 "0");
}

/* Most allocations one call may make before the sweep gives up on it. */
#define FL_NTH_MAX	64
/* The gadget sweep's max_gadgets: a quota that fl_fill_gadgets() fills. */
#define FL_MAX_GADGETS	8
/* Calls the walks up the handle tables take at least (quick, full). */
#define FL_GROW_QUICK	70
#define FL_GROW_FULL	600
/*
 * The page window: a Rust handle table of 512 slots of 16 bytes is
 * kmalloc()'s largest slab size (8 KiB); the 513th handle makes it a
 * 16 KiB page allocation. C's xarray takes a new node at 512.
 */
#define FL_PAGE_FROM	508
#define FL_PAGE_TO	516

enum fl_op {
	FL_OPEN, FL_CONFIGURE, FL_NEW_ROOT, FL_NEW_CHILD, FL_GET, FL_LOOKUP,
	FL_TRYGET, FL_RUN_NEW_PUT, FL_TXN_START,
	/* The ioctls whose errors do not include -ENOMEM: no allocation. */
	FL_IDENTIFY, FL_STAT, FL_ARENA_STAT, FL_RMW, FL_RUN_GET_PUT,
	FL_RUN_LOOKUP_PUT, FL_RUN_TRYGET_PUT, FL_PUT, FL_TXN_CONFIGURE,
	FL_TXN_EXTEND, FL_TXN_STAT, FL_RUN_TXN_START_STOP, FL_RUN_TXN_EXTEND,
	FL_TXN_STOP, FL_TXN_COMMIT,
	FL_OPS
};

static const char * const fl_names[FL_OPS] = {
	"open", "CONFIGURE", "NEW root", "NEW child", "GET", "LOOKUP",
	"TRYGET", "RUN NEW_PUT", "TXN_START", "IDENTIFY", "STAT",
	"ARENA_STAT", "RMW", "RUN GET_PUT", "RUN LOOKUP_PUT",
	"RUN TRYGET_PUT", "PUT", "TXN_CONFIGURE", "TXN_EXTEND", "TXN_STAT",
	"RUN TXN_START_STOP", "RUN TXN_EXTEND", "TXN_STOP", "TXN_COMMIT",
};

/* The gadgets the sweep tracks: a root and its child. */
enum { FL_ROOT, FL_CHILD, FL_TRACKED };

struct fl_ctx {
	const char *path;
	int fd;
	__u32 flavor;
	__u32 registry;			/* FL_CONFIGURE's; LOCK unless set */
	__u32 max_gadgets;		/* FL_CONFIGURE's; 0: the default */
	bool probe_configure;		/* snapshot CONFIGURE's answer */
	unsigned int tracked;		/* FL_ROOT, FL_CHILD made so far */
	__u32 handle[FL_TRACKED];
	__u64 id[FL_TRACKED];
	__u64 max_id;			/* the newest id a call returned */
	__u32 spare;			/* a handle of the root PUT consumes */
	/* Every handle held, by number, in each table (1 = held). */
	unsigned char held[LP_MAX_HANDLES + 1];
	unsigned char txn_held[LP_MAX_HANDLES + 1];
	__u32 nheld, ntxn_held;
};

struct fl_snap {
	struct lp_arena_stat as;
	struct lp_txn_stat ts;
	__u64 live_gadgets, live_arenas, live_handles;
	struct lp_stat st[FL_TRACKED];
	__u64 found[FL_TRACKED];	/* RUN TRYGET_PUT of each tracked id */
	__u64 next_found;		/* ... of the next two ids */
	__u64 listed;			/* RUN LOOKUP_PUT of the child */
	__u64 configured;		/* CONFIGURE answers -EBUSY */
};

/* What a call that succeeded changes, besides the handle it returns. */
struct fl_effect {
	int handles, live, created, freed, live_gadgets, live_arenas;
	int live_handles, txn_handles, updates, credits, tid, committed;
	bool adds;		/* it added credits: the high-water mark */
	bool configures;	/* a NEW: CONFIGURE answers -EBUSY after it */
	int refcount[FL_TRACKED], children[FL_TRACKED];
};

/* The result of one call, for the sweep. */
struct fl_result {
	int ret;
	bool reached;		/* the N-th allocation came, and failed */
	__u32 handle;		/* the handle it created, if any */
	__u64 id;		/* the gadget it created, if any */
	int fd;			/* FL_OPEN: the file */
};

static __u32 fl_lowest_free(const unsigned char *held)
{
	__u32 h;

	for (h = 1; h <= LP_MAX_HANDLES; h++)
		if (!held[h])
			return h;
	return 0;
}

static void fl_hold(struct fl_ctx *c, bool txn, __u32 h)
{
	if (txn) {
		c->txn_held[h] = 1;
		c->ntxn_held++;
	} else {
		c->held[h] = 1;
		c->nheld++;
	}
}

static void fl_unhold(struct fl_ctx *c, bool txn, __u32 h)
{
	if (txn) {
		c->txn_held[h] = 0;
		c->ntxn_held--;
	} else {
		c->held[h] = 0;
		c->nheld--;
	}
}

/* RUN TRYGET_PUT or LOOKUP_PUT of @id: 1 if found, 0 if not, or -errno. */
static int fl_find(int fd, __u32 op, __u32 parent, __u64 id)
{
	struct lp_run r;
	int ret = lpu_run(fd, op, parent, 1, id, &r);

	return ret ? ret : (int)r.completed;
}

/* FL_CONFIGURE: the sweep's flavor, registry mode and gadget limit. */
static int fl_configure(const struct fl_ctx *c)
{
	struct lp_configure cf = {
		.flavor = c->flavor, .registry = c->registry,
		.max_gadgets = c->max_gadgets,
	};

	return lpu_call(c->fd, LP_IOC_CONFIGURE, &cf);
}

static int fl_snapshot(struct fl_ctx *c, struct fl_snap *s)
{
	struct lp_identify id;
	unsigned int i;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = lpu_arena_stat(c->fd, &s->as);
	if (!ret)
		ret = lpu_txn_stat(c->fd, &s->ts);
	if (!ret)
		ret = lpu_identify(c->fd, &id);
	if (ret)
		return ret;
	s->live_gadgets = id.live_gadgets;
	s->live_arenas = id.live_arenas;
	s->live_handles = id.live_handles;
	/*
	 * The arena's first NEW must leave CONFIGURE allowed until it
	 * succeeds: neither the arena marked configured nor a gadget counted
	 * (published or not) before then. The same CONFIGURE again changes
	 * nothing.
	 */
	if (c->probe_configure) {
		ret = fl_configure(c);
		if (ret && ret != -EBUSY)
			return ret;
		s->configured = ret == -EBUSY;
	}
	for (i = 0; i < c->tracked; i++) {
		ret = lpu_stat(c->fd, c->handle[i], &s->st[i]);
		if (ret)
			return ret;
		ret = fl_find(c->fd, LP_OP_TRYGET_PUT, 0, c->id[i]);
		if (ret < 0)
			return ret;
		s->found[i] = ret;
	}
	for (i = 1; i <= 2; i++) {
		ret = fl_find(c->fd, LP_OP_TRYGET_PUT, 0, c->max_id + i);
		if (ret < 0)
			return ret;
		s->next_found += ret;
	}
	if (c->tracked > FL_CHILD && has_child_list(c->flavor)) {
		ret = fl_find(c->fd, LP_OP_LOOKUP_PUT, c->handle[FL_ROOT],
			      c->id[FL_CHILD]);
		if (ret < 0)
			return ret;
		s->listed = ret;
	}
	return 0;
}

static void fl_eq(struct __test_metadata *_metadata, __u64 exp, __u64 got,
		  const char *field, const char *what, unsigned int nth)
{
	EXPECT_EQ(exp, got) TH_LOG("%s, allocation %u: %s", what, nth, field);
}

/* @after is @before changed by @e (all zero: unchanged). */
static void fl_expect(struct __test_metadata *_metadata,
		      const struct fl_snap *b, const struct fl_snap *a,
		      const struct fl_effect *e, const char *what,
		      unsigned int nth)
{
	unsigned int i;

#define FL_EQ(exp, got) fl_eq(_metadata, (exp), (got), #got, what, nth)
	FL_EQ(b->as.flavor, a->as.flavor);
	FL_EQ(b->as.handles + e->handles, a->as.handles);
	FL_EQ(b->as.live + e->live, a->as.live);
	FL_EQ(b->as.created + e->created, a->as.created);
	FL_EQ(b->as.freed + e->freed, a->as.freed);
	FL_EQ(b->live_gadgets + e->live_gadgets, a->live_gadgets);
	FL_EQ(b->live_arenas + e->live_arenas, a->live_arenas);
	FL_EQ(b->live_handles + e->live_handles, a->live_handles);
	FL_EQ(b->configured || e->configures, a->configured);
	FL_EQ(b->ts.flavor, a->ts.flavor);
	FL_EQ(b->ts.state, a->ts.state);
	FL_EQ(b->ts.tid + e->tid, a->ts.tid);
	FL_EQ(b->ts.updates + e->updates, a->ts.updates);
	FL_EQ(b->ts.credits + e->credits, a->ts.credits);
	FL_EQ(b->ts.max_credits, a->ts.max_credits);
	FL_EQ(b->ts.handles + e->txn_handles, a->ts.handles);
	FL_EQ(b->ts.committed + e->committed, a->ts.committed);
	FL_EQ(b->ts.late_starts, a->ts.late_starts);
	FL_EQ(b->ts.max_wait_ns, a->ts.max_wait_ns);
	FL_EQ(b->ts.overshoots, a->ts.overshoots);
	/* An adder records the credits it found, its own not included. */
	FL_EQ(e->adds && b->ts.credits > b->ts.credits_hwm ?
	      b->ts.credits : b->ts.credits_hwm, a->ts.credits_hwm);
	for (i = 0; i < FL_TRACKED; i++) {
		FL_EQ(b->st[i].refcount + e->refcount[i], a->st[i].refcount);
		FL_EQ(b->st[i].children + e->children[i], a->st[i].children);
		FL_EQ(b->st[i].id, a->st[i].id);
		FL_EQ(b->st[i].parent_id, a->st[i].parent_id);
		FL_EQ(b->found[i], a->found[i]);
	}
	FL_EQ(b->listed, a->listed);
	FL_EQ(0, a->next_found);
#undef FL_EQ
}

/* @s changed by @e: what fl_expect() checks, for a call not measured. */
static void fl_apply(struct fl_snap *s, const struct fl_effect *e)
{
	unsigned int i;

	if (e->adds && s->ts.credits > s->ts.credits_hwm)
		s->ts.credits_hwm = s->ts.credits;
	s->as.handles += e->handles;
	s->as.live += e->live;
	s->as.created += e->created;
	s->as.freed += e->freed;
	s->live_gadgets += e->live_gadgets;
	s->live_arenas += e->live_arenas;
	s->live_handles += e->live_handles;
	s->configured = s->configured || e->configures;
	s->ts.tid += e->tid;
	s->ts.updates += e->updates;
	s->ts.credits += e->credits;
	s->ts.handles += e->txn_handles;
	s->ts.committed += e->committed;
	for (i = 0; i < FL_TRACKED; i++) {
		s->st[i].refcount += e->refcount[i];
		s->st[i].children += e->children[i];
	}
}

/*
 * One call of @op with its @nth allocation failing (0: none), and every
 * later one too if @persist. Between the arming and the disarming, the
 * thread touches no memory it has not touched before (a page fault that
 * fails to allocate would be the OOM killer's).
 */
static void fl_call(struct fl_ctx *c, enum fl_op op, unsigned int nth,
		    bool persist, struct fl_result *res)
{
	struct lp_txn_commit tc;
	struct lp_txn_extend te;
	struct lp_rmw rmw;
	struct lp_run run;
	struct lp_stat st;
	struct lp_arena_stat as;
	struct lp_txn_stat ts;
	struct lp_identify id;
	int ff = -1, mf = -1;
	char buf[16];
	ssize_t n;
	__u32 h;

	memset(res, 0, sizeof(*res));
	res->fd = -1;
	if (nth) {
		ff = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
		mf = open("/proc/thread-self/make-it-fail",
			  O_WRONLY | O_CLOEXEC);
		snprintf(buf, sizeof(buf), "%u", nth);
		if (ff < 0 || mf < 0 || write(ff, buf, strlen(buf)) < 0 ||
		    (persist && write(mf, "1", 1) < 0)) {
			res->ret = -1000;
			goto disarm;
		}
	}
	switch (op) {
	case FL_OPEN:
		res->fd = open(c->path, O_RDWR | O_CLOEXEC);
		res->ret = res->fd < 0 ? -errno : 0;
		break;
	case FL_CONFIGURE:
		res->ret = fl_configure(c);
		break;
	case FL_NEW_ROOT:
		res->ret = lpu_new(c->fd, LP_HANDLE_NONE, &res->handle,
				   &res->id);
		break;
	case FL_NEW_CHILD:
		res->ret = lpu_new(c->fd, c->handle[FL_ROOT], &res->handle,
				   &res->id);
		break;
	case FL_GET:
		res->ret = lpu_get(c->fd, c->handle[FL_ROOT], &res->handle);
		break;
	case FL_LOOKUP:
		res->ret = lpu_lookup(c->fd, c->handle[FL_ROOT],
				      c->id[FL_CHILD], &res->handle);
		break;
	case FL_TRYGET:
		res->ret = lpu_tryget(c->fd, c->id[FL_CHILD], &res->handle);
		break;
	case FL_RUN_NEW_PUT:
		res->ret = lpu_run(c->fd, LP_OP_NEW_PUT, c->handle[FL_ROOT], 1,
				   0, &run);
		break;
	case FL_TXN_START:
		res->ret = lpu_txn_start_n(c->fd, 1, &res->handle);
		break;
	case FL_IDENTIFY:
		res->ret = lpu_identify(c->fd, &id);
		break;
	case FL_STAT:
		res->ret = lpu_stat(c->fd, c->handle[FL_CHILD], &st);
		break;
	case FL_ARENA_STAT:
		res->ret = lpu_arena_stat(c->fd, &as);
		break;
	case FL_RMW:
		res->ret = lpu_rmw(c->fd, LP_OP_MAX_CMPXCHG, 1, &rmw);
		break;
	case FL_RUN_GET_PUT:
		res->ret = lpu_run(c->fd, LP_OP_GET_PUT, c->handle[FL_CHILD], 1,
				   0, &run);
		break;
	case FL_RUN_LOOKUP_PUT:
		res->ret = lpu_run(c->fd, LP_OP_LOOKUP_PUT, c->handle[FL_ROOT],
				   1, c->id[FL_CHILD], &run);
		break;
	case FL_RUN_TRYGET_PUT:
		res->ret = lpu_run(c->fd, LP_OP_TRYGET_PUT, 0, 1,
				   c->id[FL_CHILD], &run);
		break;
	case FL_PUT:
		res->handle = c->spare;
		res->ret = lpu_put(c->fd, c->spare);
		break;
	case FL_TXN_CONFIGURE:
		res->ret = lpu_txn_configure(c->fd, c->flavor,
					     LP_TXN_CREDITS_DEFAULT);
		break;
	case FL_TXN_EXTEND:
		/* The newest handle: TXN_STOP stops the oldest. */
		for (h = LP_MAX_HANDLES; h && !c->txn_held[h]; h--)
			;
		res->ret = lpu_txn_extend(c->fd, h, 1, &te);
		break;
	case FL_TXN_STAT:
		res->ret = lpu_txn_stat(c->fd, &ts);
		break;
	case FL_RUN_TXN_START_STOP:
		res->ret = lpu_run(c->fd, LP_OP_TXN_START_STOP, 0, 1, 1, &run);
		break;
	case FL_RUN_TXN_EXTEND:
		res->ret = lpu_run(c->fd, LP_OP_TXN_EXTEND, 0, 1, 1, &run);
		break;
	case FL_TXN_STOP:
		for (h = 1; h < LP_MAX_HANDLES && !c->txn_held[h]; h++)
			;
		res->handle = h;
		res->ret = lpu_txn_stop(c->fd, h);
		break;
	default:
		res->ret = lpu_txn_commit(c->fd, 0, &tc);
		break;
	}
	if (persist && write(mf, "0", 1) < 0)
		res->ret = -1000;
	if (res->ret > 0)	/* PUT's released, TXN_STOP's credits */
		res->ret = 0;
	if (!nth)
		return;
	/* 0: the fault was injected; N > 0: no N-th allocation came. */
	n = pread(ff, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	res->reached = n > 0 && atoi(buf) == 0;
	if (write(ff, "0", 1) < 0)
		res->ret = -1000;
	goto out;
disarm:
	/* Half armed: nothing else of this thread's may fail. */
	if (mf >= 0 && write(mf, "0", 1) < 0)
		res->ret = -1000;
	if (ff >= 0 && write(ff, "0", 1) < 0)
		res->ret = -1000;
out:
	if (ff >= 0)
		close(ff);
	if (mf >= 0)
		close(mf);
}

/*
 * What a call of @op that succeeded changes (@res: what it returned), and
 * take what it made into the bookkeeping.
 */
static void fl_effect_of(struct fl_ctx *c, enum fl_op op,
			 const struct fl_result *res, struct fl_effect *e)
{
	memset(e, 0, sizeof(*e));
	switch (op) {
	case FL_OPEN:
		e->live_arenas = 1;
		break;
	case FL_NEW_ROOT:
	case FL_NEW_CHILD:
	case FL_GET:
	case FL_LOOKUP:
	case FL_TRYGET:
		e->handles = 1;
		e->live_handles = 1;
		if (op == FL_NEW_ROOT || op == FL_NEW_CHILD) {
			e->live = 1;
			e->created = 1;
			e->live_gadgets = 1;
			e->configures = c->probe_configure;
		}
		/* A child holds its parent; GET's handle is the root's. */
		if (op == FL_NEW_CHILD || op == FL_GET)
			e->refcount[FL_ROOT] = 1;
		e->children[FL_ROOT] = op == FL_NEW_CHILD;
		if (op == FL_LOOKUP || op == FL_TRYGET)
			e->refcount[FL_CHILD] = 1;
		fl_hold(c, false, res->handle);
		break;
	case FL_RUN_NEW_PUT:
		e->created = 1;
		e->freed = 1;
		c->max_id++;
		break;
	case FL_TXN_START:
		e->txn_handles = 1;
		e->updates = 1;
		e->credits = 1;
		e->adds = true;
		e->live_handles = 1;
		fl_hold(c, true, res->handle);
		break;
	case FL_PUT:
		e->handles = -1;
		e->live_handles = -1;
		e->refcount[FL_ROOT] = -1;	/* the spare is the root's */
		fl_unhold(c, false, res->handle);
		c->spare = 0;
		break;
	case FL_TXN_EXTEND:
		e->credits = 1;
		e->adds = true;
		break;
	case FL_RUN_TXN_START_STOP:
	case FL_RUN_TXN_EXTEND:
		e->adds = true;
		break;
	case FL_TXN_COMMIT:
		e->tid = 1;
		e->committed = 1;
		break;
	case FL_TXN_STOP:
		e->txn_handles = -1;
		e->updates = -1;
		e->credits = -1;
		e->live_handles = -1;
		fl_unhold(c, true, res->handle);
		break;
	default:
		break;
	}
	if (res->id > c->max_id)
		c->max_id = res->id;
}

/* Undo a call that got around its failure, back to the same state. */
static int fl_undo(struct fl_ctx *c, enum fl_op op, struct fl_result *res)
{
	switch (op) {
	case FL_OPEN:
		return close(res->fd);
	case FL_NEW_ROOT:
	case FL_NEW_CHILD:
	case FL_GET:
	case FL_LOOKUP:
	case FL_TRYGET:
		fl_unhold(c, false, res->handle);
		return lpu_put(c->fd, res->handle) < 0 ? -1 : 0;
	case FL_TXN_START:
		fl_unhold(c, true, res->handle);
		return lpu_txn_stop(c->fd, res->handle) < 0 ? -1 : 0;
	default:
		return 0;	/* nothing to undo, or it cannot be */
	}
}

/* One op's line of the coverage table. */
struct fl_count {
	unsigned int calls;	/* states swept */
	unsigned int reached;	/* calls in which an allocation failed */
	unsigned int enomem;	/* ... that answered -ENOMEM */
	unsigned int around;	/* ... that got around it */
	unsigned int most;	/* most allocations one call made */
};

/*
 * Sweep one call of @op from the current state, @cur its snapshot: first
 * N = 1, 2, ... with every allocation from the N-th on failing, then
 * N = 1, 2, ... with the N-th alone failing. A call that got around its
 * failures is undone, but an undo cannot shrink a table that grew (a
 * Rust KVec keeps its capacity): the first pass, in which only the
 * failures at the end of the call can be got around, reaches every
 * allocation the call makes from the state the walk came to. Return
 * whether the last call reached no N-th allocation before FL_NTH_MAX;
 * what it made is kept, and @cur is the state it left.
 */
static bool fl_sweep_once(struct __test_metadata *_metadata,
			  struct fl_ctx *c, enum fl_op op, struct fl_snap *cur,
			  struct fl_count *cnt)
{
	bool creates = op == FL_OPEN ||
		       (op >= FL_NEW_ROOT && op <= FL_TXN_START);
	struct fl_effect e, none = { 0 };
	struct fl_result res;
	struct fl_snap after;
	unsigned int nth;
	int persist;
	__u32 want;

	cnt->calls++;
	for (persist = 1; persist >= 0; persist--) {
		for (nth = 1; nth <= FL_NTH_MAX; nth++) {
			want = fl_lowest_free(op == FL_TXN_START ?
					      c->txn_held : c->held);
			fl_call(c, op, nth, persist, &res);
			if (res.ret == -1000) {
				EXPECT_TRUE(false)
					TH_LOG("fail-nth: %s", strerror(errno));
				return false;
			}
			if (res.reached) {
				cnt->reached++;
				if (nth > cnt->most)
					cnt->most = nth;
			}
			if (res.ret) {
				EXPECT_EQ(-ENOMEM, res.ret)
					TH_LOG("%s, allocation %u%s: %s",
					       fl_names[op], nth,
					       persist ? " on" : "",
					       strerror(-res.ret));
				EXPECT_TRUE(res.reached)
					TH_LOG("%s failed with no allocation failed",
					       fl_names[op]);
				EXPECT_TRUE(creates)
					TH_LOG("%s answered -ENOMEM: its contract has none",
					       fl_names[op]);
				cnt->enomem++;
				if (fl_snapshot(c, &after))
					return false;
				fl_expect(_metadata, cur, &after, &none,
					  fl_names[op], nth);
				continue;
			}
			if (res.handle && op != FL_PUT && op != FL_TXN_STOP)
				EXPECT_EQ(want, res.handle)
					TH_LOG("%s, allocation %u: not the lowest free handle",
					       fl_names[op], nth);
			fl_effect_of(c, op, &res, &e);
			if (!res.reached && (!persist || nth == 1)) {
				/*
				 * Fewer than N allocations, none failed (or
				 * none at all): an ordinary call, kept. Its
				 * effect is checked with the next snapshot:
				 * a walk up a table costs one ioctl a step.
				 */
				if (op == FL_OPEN)
					close(res.fd);
				else
					fl_apply(cur, &e);
				return true;
			}
			if (fl_snapshot(c, &after))
				return false;
			fl_expect(_metadata, cur, &after, &e, fl_names[op],
				  nth);
			cnt->around += res.reached;
			if (fl_undo(c, op, &res) || fl_snapshot(c, cur)) {
				EXPECT_TRUE(false)
					TH_LOG("%s: undo failed", fl_names[op]);
				return false;
			}
			if (!res.reached)
				break;	/* the first pass is done */
		}
		if (nth > FL_NTH_MAX) {
			EXPECT_TRUE(false)
				TH_LOG("%s still allocating at %u",
				       fl_names[op], FL_NTH_MAX);
			return false;
		}
	}
	return false;	/* not reached: the second pass returns */
}

/*
 * Sweep successive calls of @op, each from the state the last left, until
 * @least calls are done and one of them reached an allocation, or @most
 * calls: the tables grow a handle a call, up past their growth points.
 */
static void fl_sweep(struct __test_metadata *_metadata, struct fl_ctx *c,
		     enum fl_op op, unsigned int least, unsigned int most,
		     struct fl_count *cnt)
{
	struct fl_snap cur, after;
	struct fl_effect none = { 0 };

	memset(cnt, 0, sizeof(*cnt));
	if (fl_snapshot(c, &cur)) {
		EXPECT_TRUE(false) TH_LOG("snapshot: %s", strerror(errno));
		return;
	}
	while (cnt->calls < most &&
	       fl_sweep_once(_metadata, c, op, &cur, cnt))
		if (cnt->calls >= least && cnt->reached)
			break;
	/* The state the sweep left: the last calls were not measured. */
	if (fl_snapshot(c, &after))
		return;
	fl_expect(_metadata, &cur, &after, &none, fl_names[op], 0);
}

static void fl_report(struct __test_metadata *_metadata, const char *module,
		      const char *flavor, enum fl_op op,
		      const struct fl_count *cnt)
{
	TH_LOG("%-13s %-15s %-11s %4u calls, %3u failed: %3u -ENOMEM %3u around, most %u",
	       module, flavor, fl_names[op], cnt->calls, cnt->reached,
	       cnt->enomem, cnt->around, cnt->most);
}

/* A call that allocates must have met its failures: one at least. */
static void fl_expect_reached(struct __test_metadata *_metadata,
			      enum fl_op op, const struct fl_count *cnt)
{
	EXPECT_LT(0, cnt->enomem)
		TH_LOG("%s: no allocation failure reached its caller",
		       fl_names[op]);
}

static void fl_init(struct fl_ctx *c, const char *path, int fd,
		    __u32 flavor)
{
	memset(c, 0, sizeof(*c));
	c->path = path;
	c->fd = fd;
	c->flavor = flavor;
}

/* Take what the last sweep kept, the newest handle, as tracked gadget @t. */
static void fl_track(struct fl_ctx *c, unsigned int t, __u32 handle)
{
	struct lp_stat st;

	c->handle[t] = handle;
	c->id[t] = lpu_stat(c->fd, handle, &st) ? 0 : st.id;
	c->tracked = t + 1;
	if (c->id[t] > c->max_id)
		c->max_id = c->id[t];
}

/* The newest handle held. */
static __u32 fl_newest(const struct fl_ctx *c)
{
	__u32 h;

	for (h = LP_MAX_HANDLES; h; h--)
		if (c->held[h])
			return h;
	return 0;
}

/*
 * The limits behind the counts, filled after a sweep. A count that an
 * undo forgot and no STAT reports (the arena's live gadgets, counted
 * against max_gadgets from the allocation on) shows only as a limit
 * reached early; one that a STAT reports must be the one the limit is
 * checked against. Each of these fills its limit from what the sweep
 * left, exactly, and checks that the next call is refused.
 */

/*
 * The gadget quota: as many more roots as c->max_gadgets leaves room for
 * beside ARENA_STAT's live gadgets, then -EDQUOT; the roots are put again.
 */
static void fl_fill_gadgets(struct __test_metadata *_metadata,
			    struct fl_ctx *c)
{
	struct lp_arena_stat as;
	unsigned int i, room;
	__u32 *h, extra = 0;
	int ret = 0;

	ASSERT_EQ(0, lpu_arena_stat(c->fd, &as));
	ASSERT_NE(0, c->max_gadgets);
	ASSERT_GE(c->max_gadgets, as.live);
	room = c->max_gadgets - as.live;
	h = calloc(room + 1, sizeof(*h));
	ASSERT_NE(NULL, h);
	for (i = 0; i < room; i++) {
		ret = lpu_new(c->fd, LP_HANDLE_NONE, &h[i], NULL);
		EXPECT_EQ(0, ret)
			TH_LOG("NEW %u of %u: max_gadgets %u, %llu live",
			       i + 1, room, c->max_gadgets,
			       (unsigned long long)as.live);
		if (ret)
			break;
	}
	if (!ret) {
		ret = lpu_new(c->fd, LP_HANDLE_NONE, &extra, NULL);
		EXPECT_EQ(-EDQUOT, ret)
			TH_LOG("NEW beyond max_gadgets %u", c->max_gadgets);
		if (!ret)
			h[i++] = extra;
	}
	while (i--)
		EXPECT_EQ(1, lpu_put(c->fd, h[i]));
	free(h);
}

/*
 * A handle table (@txn: the transaction's): handles up to LP_MAX_HANDLES,
 * each the lowest free number, then -ENOSPC. GET of the root, START of no
 * credits; kept in @c, for close() to put and stop.
 */
static void fl_fill_handles(struct __test_metadata *_metadata,
			    struct fl_ctx *c, bool txn)
{
	unsigned char *held = txn ? c->txn_held : c->held;
	__u32 *n = txn ? &c->ntxn_held : &c->nheld;
	__u32 h, want;
	int ret;

	while (*n < LP_MAX_HANDLES) {
		want = fl_lowest_free(held);
		ret = txn ? lpu_txn_start(c->fd, &h, NULL) :
			    lpu_get(c->fd, c->handle[FL_ROOT], &h);
		EXPECT_EQ(0, ret)
			TH_LOG("%s %u of LP_MAX_HANDLES", txn ? "START" : "GET",
			       *n + 1);
		if (ret)
			return;
		EXPECT_EQ(want, h) TH_LOG("not the lowest free handle");
		fl_hold(c, txn, h);
	}
	ret = txn ? lpu_txn_start(c->fd, &h, NULL) :
		    lpu_get(c->fd, c->handle[FL_ROOT], &h);
	EXPECT_EQ(-ENOSPC, ret)
		TH_LOG("%s beyond LP_MAX_HANDLES", txn ? "START" : "GET");
}

/*
 * The credit limit, TXN_STAT's max_credits: a START of exactly the
 * credits TXN_STAT says are left must succeed, one more credit be refused
 * (-ENOSPC). Stopped again.
 */
static void fl_fill_credits(struct __test_metadata *_metadata,
			    struct fl_ctx *c)
{
	struct lp_txn_stat ts;
	__u32 h, extra = 0;
	int ret;

	ASSERT_EQ(0, lpu_txn_stat(c->fd, &ts));
	ASSERT_GE(ts.max_credits, ts.credits);
	ret = lpu_txn_start_n(c->fd, ts.max_credits - ts.credits, &h);
	EXPECT_EQ(0, ret)
		TH_LOG("START of the %u credits left of %u",
		       ts.max_credits - ts.credits, ts.max_credits);
	if (ret)
		return;
	ret = lpu_txn_start_n(c->fd, 1, &extra);
	EXPECT_EQ(-ENOSPC, ret) TH_LOG("START beyond max_credits");
	if (!ret)
		lpu_txn_stop(c->fd, extra);
	EXPECT_EQ(ts.max_credits - ts.credits, lpu_txn_stop(c->fd, h));
}

#endif /* _LOCKLESS_TEST_H */
