// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_demo.c - `make demo`: who answers on each device, and do both
 * give the same answers?
 *
 * First the IDENTIFY answers of /dev/lockless_c and /dev/lockless_rust
 * side by side. Then one row per reference-counting flavor and per op:
 * the C API and the Rust API behind it, and whether both devices answered
 * the row's short fixed script the same.
 *
 * A script runs on a fresh open() of each device and records every
 * ioctl's answer: 0 or the errno, and every output field that does not
 * depend on timing (refcounts, children, released counts, arena counters,
 * RMW old/new/failed, RUN completed/failed/delta; never elapsed_ns).
 * Handles and ids are recorded by the order in which the script received
 * them ("h2", "id2"): the contract says that handles are non-zero and
 * distinct and that ids are never reused, not which numbers they are.
 * The script never branches on an answer, so both transcripts have the
 * same steps and the first step whose answers differ is the difference.
 *
 * Exit status: 0 when every row is the same, 1 when a row differs or a
 * device cannot be opened or identified, so that `make demo` fails.
 *
 * Its own names are lpu_ and LPU_; lp_ and LP_ are the contract's and the
 * modules' (see lockless_test.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lockless_uapi.h"
#include "lockless_names.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* In-kernel iterations of RUN steps: enough to count, cheap under TCG. */
#define LPU_DEMO_RUN		100
/* ... and of the flavors' RUN GET_PUT step. */
#define LPU_DEMO_GET_PUT		1000

/* Most steps in one row's script (the RUN-only ops: ~10 per flavor). */
#define LPU_STEPS		96
/* Most handles, and most ids, one open() of a script receives. */
#define LPU_SYMS			32
#define LPU_WHAT			48
#define LPU_ANSWER		128
#define LPU_SYM			24

/**
 * struct lpu_row - one row of the table
 * @is_op: @which is an enum lp_op value, else an enum lp_flavor value
 * @which: the flavor or the op
 * @c_api: what lockless_c.ko does for it
 * @rust_api: what lockless_rust.ko does for it
 */
struct lpu_row {
	bool is_op;
	unsigned int which;
	const char *c_api;
	const char *rust_api;
};

static const struct lpu_row lpu_rows[] = {
	{ false, LP_FLAVOR_LOCKED,
	  "mutex + refcnt++/--", "Mutex guard + LockedBy count" },
	{ false, LP_FLAVOR_LOCKLESS,
	  "atomic_inc / atomic_fetch_dec", "Arc::from(ArcBorrow) / Arc::drop_with" },
	{ false, LP_FLAVOR_WEAK_CMPXCHG,
	  "atomic_cmpxchg loop + mutex", "Refcount::as_atomic().cmpxchg + Mutex" },
	{ false, LP_FLAVOR_KREF_MUTEX,
	  "kref_put_mutex", "Refcount::dec_and_lock(&Mutex)" },
	{ false, LP_FLAVOR_KREF_LOCK,
	  "kref_put_lock", "Refcount::dec_and_lock(&SpinLock)" },
	{ false, LP_FLAVOR_KREF_RWSEM,
	  "kref_put_rwsem (own)", "dec_not_one + RwSem write() + dec_and_test" },
	{ true, LP_OP_MAX_CMPXCHG,
	  "atomic_cmpxchg loop", "Atomic<i32>::cmpxchg(Full)" },
	{ true, LP_OP_MAX_JBD2,
	  "READ_ONCE + cmpxchg (ulong)", "Atomic<usize> load(Relaxed)+cmpxchg(Full)" },
	{ true, LP_OP_MAX_LOCKED,
	  "spin_lock + compare/store", "SpinLock<usize> guard" },
	{ true, LP_OP_INC_NOT_ZERO_CMPXCHG,
	  "atomic_cmpxchg loop", "Atomic<i32>::cmpxchg(Full) loop" },
	{ true, LP_OP_INC_NOT_ZERO_TRY_CMPXCHG,
	  "atomic_try_cmpxchg loop", "Atomic<i32>::cmpxchg(Full) loop" },
	{ true, LP_OP_FETCH_INC_CMPXCHG,
	  "atomic_cmpxchg loop", "Atomic<i32>::cmpxchg(Full) loop" },
	{ true, LP_OP_SET,
	  "atomic_xchg + WRITE_ONCE", "Atomic::xchg(Full) + store" },
	{ true, LP_OP_READ,
	  "atomic_read", "Atomic::load(Relaxed)" },
	{ true, LP_OP_GET_PUT,
	  "per flavor (above)", "per flavor (above)" },
	{ true, LP_OP_LOOKUP_PUT,
	  "per flavor (above)", "per flavor (above)" },
	{ true, LP_OP_TRYGET_PUT,
	  "per flavor (above)", "per flavor (above)" },
	{ true, LP_OP_ATOMIC_FLOOR,
	  "atomic_inc", "Atomic<i32>::add(Relaxed)" },
	{ true, LP_OP_NEW_PUT,
	  "per flavor (above)", "per flavor (above)" },
	{ true, LP_OP_TXN_START_STOP,
	  "read_lock+atomic_inc, dec_and_test+wake_up",
	  "RwLock + Atomic add, fetch_sub + CondVar notify_one" },
	{ true, LP_OP_TXN_EXTEND,
	  "read_lock + atomic_add_return/atomic_sub",
	  "RwLock + Atomic::fetch_add(Full)/fetch_sub" },
	{ true, LP_OP_EMPTY,
	  "nothing: the RUN loop alone", "nothing: the RUN loop alone" },
	{ true, LP_OP_GET_PUT_REFCOUNT,
	  "refcount_inc / refcount_dec_and_test",
	  "Arc::from(ArcBorrow) / Arc::drop_with" },
	{ true, LP_OP_TRYGET_ATOMIC_PUT,
	  "per flavor (above)", "per flavor (above)" },
};

/* Under the flavors: TRYGET is in every flavor's script. */
static const char * const lpu_tryget_note[] = {
	"TRYGET, in every flavor: C atomic_inc_not_zero / kref_get_unless_zero,",
	"Rust Refcount::inc_not_zero / Arc::from_raw_inc_not_zero (patches 0001/0002);",
	"with an RCU registry, C rcu_read_lock + xa_load + kfree_rcu, Rust",
	"XArray::load(&rcu::Guard) + KBox::drop_rcu / Arc::drop_with_rcu (0009-0011)",
};

struct lpu_errno_name {
	int err;
	const char *name;
};

/* The errnos of the contract, by name: a difference reads "-EBADF". */
static const struct lpu_errno_name lpu_errno_names[] = {
	{ ENOTTY, "ENOTTY" },
	{ EFAULT, "EFAULT" },
	{ EINVAL, "EINVAL" },
	{ EBADF, "EBADF" },
	{ ENOENT, "ENOENT" },
	{ EOPNOTSUPP, "EOPNOTSUPP" },
	{ EBUSY, "EBUSY" },
	{ E2BIG, "E2BIG" },
	{ ENOSPC, "ENOSPC" },
	{ ENOMEM, "ENOMEM" },
	{ EINTR, "EINTR" },
	{ EAGAIN, "EAGAIN" },
	{ ETIMEDOUT, "ETIMEDOUT" },
};

/**
 * struct lpu_step - one ioctl of a script
 * @what: what the script did ("PUT child")
 * @answer: what the device answered ("0 released=1", "-EBADF")
 */
struct lpu_step {
	char what[LPU_WHAT];
	char answer[LPU_ANSWER];
};

/**
 * struct lpu_transcript - one row's script on one device
 * @dev: the device
 * @fd: the current open() of @dev, -1 before the first
 * @open_err: errno of a failed open(), 0 if none failed
 * @full: the script made more than LPU_STEPS steps
 * @prefix: put before @what of the next steps ("KREF_LOCK, ")
 * @steps: steps recorded in @step
 * @step: the steps, in order
 * @handle: handles received from the current open(), in order
 * @live: @handle[i] has not been put yet
 * @nr_handles: entries in @handle
 * @id: ids seen in the current open(), in order
 * @nr_ids: entries in @id
 */
struct lpu_transcript {
	const char *dev;
	int fd;
	int open_err;
	bool full;
	char prefix[LPU_SYM];
	int steps;
	struct lpu_step step[LPU_STEPS];
	__u32 handle[LPU_SYMS];
	bool live[LPU_SYMS];
	int nr_handles;
	__u64 id[LPU_SYMS];
	int nr_ids;
};

static void lpu_errno_str(int err, char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(lpu_errno_names); i++) {
		if (lpu_errno_names[i].err == err) {
			snprintf(buf, len, "-%s", lpu_errno_names[i].name);
			return;
		}
	}
	snprintf(buf, len, "-%d", err);
}

/* Start a fresh arena on @t's device for the steps that follow. */
static bool lpu_open(struct lpu_transcript *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->nr_handles = 0;
	t->nr_ids = 0;
	t->fd = open(t->dev, O_RDWR | O_CLOEXEC);
	if (t->fd < 0 && !t->open_err)
		t->open_err = errno;
	return t->fd >= 0;
}

static int lpu_call(struct lpu_transcript *t, unsigned long cmd, void *arg)
{
	return ioctl(t->fd, cmd, arg) ? -errno : 0;
}

/*
 * Record a step: @what and, if @ret is an error, its name. Return: where
 * to write the answer of a successful step ("0" so far), else NULL.
 */
static char *lpu_rec(struct lpu_transcript *t, const char *what, int ret)
{
	struct lpu_step *s;

	if (t->steps == LPU_STEPS) {
		t->full = true;
		return NULL;
	}
	s = &t->step[t->steps++];
	snprintf(s->what, sizeof(s->what), "%s%s", t->prefix, what);
	if (ret) {
		lpu_errno_str(-ret, s->answer, sizeof(s->answer));
		return NULL;
	}
	snprintf(s->answer, sizeof(s->answer), "0");
	return s->answer;
}

/* Name a handle a device just gave: "hN", the N-th of this open(). */
static void lpu_handle_new(struct lpu_transcript *t, __u32 h, char *buf,
			   size_t len)
{
	int i;

	if (h == LP_HANDLE_NONE) {
		snprintf(buf, len, "h?0");
		return;
	}
	for (i = 0; i < t->nr_handles; i++) {
		if (t->live[i] && t->handle[i] == h) {
			snprintf(buf, len, "h%d-again", i + 1);
			return;
		}
	}
	if (t->nr_handles == LPU_SYMS) {
		t->full = true;
		snprintf(buf, len, "h?");
		return;
	}
	t->handle[t->nr_handles] = h;
	t->live[t->nr_handles++] = true;
	snprintf(buf, len, "h%d", t->nr_handles);
}

/* A PUT consumed @h: the device may hand its number out again. */
static void lpu_handle_gone(struct lpu_transcript *t, __u32 h)
{
	int i;

	for (i = 0; i < t->nr_handles; i++)
		if (t->live[i] && t->handle[i] == h)
			t->live[i] = false;
}

/*
 * Name an id: "idN", the N-th this open() saw, or "0" for no gadget. A
 * @fresh id (NEW) must be new; any other must be one seen before.
 */
static void lpu_id_name(struct lpu_transcript *t, __u64 id, bool fresh,
			char *buf, size_t len)
{
	int i;

	if (!id) {
		snprintf(buf, len, fresh ? "id?0" : "0");
		return;
	}
	for (i = 0; i < t->nr_ids; i++) {
		if (t->id[i] == id) {
			snprintf(buf, len, fresh ? "id%d-again" : "id%d", i + 1);
			return;
		}
	}
	if (!fresh || t->nr_ids == LPU_SYMS) {
		snprintf(buf, len, "id?%llu", id);
		return;
	}
	t->id[t->nr_ids++] = id;
	snprintf(buf, len, "id%d", t->nr_ids);
}

/* ---- one recorded step per ioctl --------------------------------------- */

static void lpu_configure_registry(struct lpu_transcript *t, const char *what,
				   __u32 flavor, __u32 max_gadgets,
				   __u32 registry)
{
	struct lp_configure c = { .flavor = flavor, .max_gadgets = max_gadgets,
				  .registry = registry };

	lpu_rec(t, what, lpu_call(t, LP_IOC_CONFIGURE, &c));
}

static void lpu_configure(struct lpu_transcript *t, const char *what,
			  __u32 flavor, __u32 max_gadgets)
{
	lpu_configure_registry(t, what, flavor, max_gadgets, LP_REGISTRY_LOCK);
}

/* NEW under @parent (LP_HANDLE_NONE: a root). Return: the handle, or 0. */
static __u32 lpu_new(struct lpu_transcript *t, const char *what, __u32 parent,
		     __u64 *id)
{
	struct lp_new n = { .parent = parent };
	int ret = lpu_call(t, LP_IOC_NEW, &n);
	char *a = lpu_rec(t, what, ret);
	char h[LPU_SYM], i[LPU_SYM];

	if (ret)
		return LP_HANDLE_NONE;
	lpu_handle_new(t, n.handle, h, sizeof(h));
	lpu_id_name(t, n.id, true, i, sizeof(i));
	if (a)
		snprintf(a, LPU_ANSWER, "0 %s %s", h, i);
	if (id)
		*id = n.id;
	return n.handle;
}

/* Record an ioctl that answers one new handle. Return: it, or 0. */
static __u32 lpu_rec_handle(struct lpu_transcript *t, const char *what,
			    int ret, __u32 handle)
{
	char *a = lpu_rec(t, what, ret);
	char h[LPU_SYM];

	if (ret)
		return LP_HANDLE_NONE;
	lpu_handle_new(t, handle, h, sizeof(h));
	if (a)
		snprintf(a, LPU_ANSWER, "0 %s", h);
	return handle;
}

static __u32 lpu_get(struct lpu_transcript *t, const char *what, __u32 handle)
{
	struct lp_get g = { .handle = handle };
	int ret = lpu_call(t, LP_IOC_GET, &g);

	return lpu_rec_handle(t, what, ret, g.new_handle);
}

static __u32 lpu_lookup(struct lpu_transcript *t, const char *what,
			__u32 parent, __u64 id)
{
	struct lp_lookup l = { .parent = parent, .id = id };
	int ret = lpu_call(t, LP_IOC_LOOKUP, &l);

	return lpu_rec_handle(t, what, ret, l.handle);
}

static __u32 lpu_tryget(struct lpu_transcript *t, const char *what, __u64 id)
{
	struct lp_tryget g = { .id = id };
	int ret = lpu_call(t, LP_IOC_TRYGET, &g);

	return lpu_rec_handle(t, what, ret, g.handle);
}

static void lpu_put(struct lpu_transcript *t, const char *what, __u32 handle)
{
	struct lp_put p = { .handle = handle };
	int ret = lpu_call(t, LP_IOC_PUT, &p);
	char *a = lpu_rec(t, what, ret);

	if (ret)
		return;
	lpu_handle_gone(t, handle);
	if (a)
		snprintf(a, LPU_ANSWER, "0 released=%u", p.released);
}

static void lpu_stat(struct lpu_transcript *t, const char *what, __u32 handle)
{
	struct lp_stat s = { .handle = handle };
	int ret = lpu_call(t, LP_IOC_STAT, &s);
	char *a = lpu_rec(t, what, ret);
	char id[LPU_SYM], parent[LPU_SYM];

	if (!a)
		return;
	lpu_id_name(t, s.id, false, id, sizeof(id));
	lpu_id_name(t, s.parent_id, false, parent, sizeof(parent));
	snprintf(a, LPU_ANSWER, "0 ref=%u %s parent=%s children=%llu",
		 s.refcount, id, parent, s.children);
}

static void lpu_arena_stat(struct lpu_transcript *t, const char *what)
{
	struct lp_arena_stat s = { 0 };
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_ARENA_STAT, &s));

	if (a)
		snprintf(a, LPU_ANSWER,
			 "0 flavor=%u handles=%u live=%llu created=%llu freed=%llu",
			 s.flavor, s.handles, s.live, s.created, s.freed);
}

static void lpu_rmw(struct lpu_transcript *t, const char *what, __u32 op,
		    __u64 value)
{
	struct lp_rmw r = { .op = op, .value = value };
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_RMW, &r));

	if (a)
		snprintf(a, LPU_ANSWER, "0 old=%llu new=%llu failed=%llu",
			 r.old, r.new, r.failed);
}

static void lpu_run(struct lpu_transcript *t, const char *what, __u32 op,
		    __u32 handle, __u64 iterations, __u64 value)
{
	struct lp_run r = {
		.op = op,
		.handle = handle,
		.iterations = iterations,
		.value = value,
	};
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_RUN, &r));

	if (a)
		snprintf(a, LPU_ANSWER, "0 completed=%llu failed=%llu delta=%llu",
			 r.completed, r.failed, r.delta);
}

static void lpu_txn_configure(struct lpu_transcript *t, const char *what,
			      __u32 flavor, __u32 max_credits)
{
	struct lp_txn_configure c = {
		.flavor = flavor, .max_credits = max_credits,
	};

	lpu_rec(t, what, lpu_call(t, LP_IOC_TXN_CONFIGURE, &c));
}

/* START: the handle is named like a gadget handle (the script has none). */
static __u32 lpu_txn_start(struct lpu_transcript *t, const char *what,
			   __u32 nblocks)
{
	struct lp_txn_start s = { .nblocks = nblocks };
	int ret = lpu_call(t, LP_IOC_TXN_START, &s);
	char *a = lpu_rec(t, what, ret);
	char h[LPU_SYM];

	if (ret)
		return LP_HANDLE_NONE;
	lpu_handle_new(t, s.handle, h, sizeof(h));
	if (a)
		snprintf(a, LPU_ANSWER, "0 %s tid=%llu", h, s.tid);
	return s.handle;
}

static void lpu_txn_stop(struct lpu_transcript *t, const char *what,
			 __u32 handle)
{
	struct lp_txn_stop s = { .handle = handle };
	int ret = lpu_call(t, LP_IOC_TXN_STOP, &s);
	char *a = lpu_rec(t, what, ret);

	if (ret)
		return;
	lpu_handle_gone(t, handle);
	if (a)
		snprintf(a, LPU_ANSWER, "0 credits=%u", s.credits);
}

static void lpu_txn_extend(struct lpu_transcript *t, const char *what,
			   __u32 handle, __u32 nblocks)
{
	struct lp_txn_extend e = { .handle = handle, .nblocks = nblocks };
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_TXN_EXTEND, &e));

	if (a)
		snprintf(a, LPU_ANSWER, "0 credits=%u granted=%u", e.credits,
			 e.granted);
}

/* COMMIT: never slept or wait_ns, which are times. */
static void lpu_txn_commit(struct lpu_transcript *t, const char *what,
			   __u32 timeout_ms)
{
	struct lp_txn_commit c = { .timeout_ms = timeout_ms };
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_TXN_COMMIT, &c));

	if (a)
		snprintf(a, LPU_ANSWER, "0 tid=%llu updates=%u credits=%u",
			 c.tid, c.updates, c.credits);
}

/* TXN_STAT: whether a START waited, not how long (a time). */
static void lpu_txn_stat(struct lpu_transcript *t, const char *what)
{
	struct lp_txn_stat s = { 0 };
	char *a = lpu_rec(t, what, lpu_call(t, LP_IOC_TXN_STAT, &s));

	if (a)
		snprintf(a, LPU_ANSWER,
			 "0 %s state=%u tid=%llu updates=%u credits=%u/%u handles=%u committed=%llu late=%llu waited=%s over=%llu hwm=%u",
			 s.flavor < LP_TXN_FLAVOR_COUNT ?
			 txn_flavor_names[s.flavor] : "?",
			 s.state, s.tid, s.updates, s.credits, s.max_credits,
			 s.handles, s.committed, s.late_starts,
			 s.max_wait_ns ? "yes" : "no", s.overshoots,
			 s.credits_hwm);
}

/* ---- the scripts ------------------------------------------------------- */

/*
 * A flavor: a root and a child, every way to take and drop a reference,
 * every errno a flavor can answer, a cascade of two.
 */
static void lpu_script_flavor(struct lpu_transcript *t, unsigned int flavor)
{
	struct lp_new reserved = { .reserved = { 1 } };
	__u32 root, child, got, looked, tried, child2;
	__u64 child_id = 0;

	if (!lpu_open(t))
		return;
	lpu_rec(t, "NEW, reserved field set", lpu_call(t, LP_IOC_NEW, &reserved));
	lpu_configure(t, "CONFIGURE, unknown flavor", LP_FLAVOR_COUNT, 0);
	lpu_configure(t, "CONFIGURE, max_gadgets 2", flavor, 2);
	root = lpu_new(t, "NEW root", LP_HANDLE_NONE, NULL);
	child = lpu_new(t, "NEW child", root, &child_id);
	lpu_new(t, "NEW beyond max_gadgets", root, NULL);
	got = lpu_get(t, "GET child", child);
	lpu_stat(t, "STAT root", root);
	lpu_stat(t, "STAT child", child);
	looked = lpu_lookup(t, "LOOKUP child", root, child_id);
	tried = lpu_tryget(t, "TRYGET child", child_id);
	lpu_stat(t, "STAT child", child);
	lpu_put(t, "PUT GET's handle", got);
	lpu_put(t, "PUT LOOKUP's handle", looked);
	lpu_put(t, "PUT TRYGET's handle", tried);
	lpu_stat(t, "STAT child", child);
	lpu_put(t, "PUT child", child);
	lpu_stat(t, "STAT root", root);
	lpu_tryget(t, "TRYGET child, gone", child_id);
	lpu_lookup(t, "LOOKUP child, gone", root, child_id);
	lpu_put(t, "PUT child again", child);
	lpu_configure(t, "CONFIGURE after NEW", flavor, 0);
	lpu_arena_stat(t, "ARENA_STAT");
	lpu_run(t, "RUN GET_PUT on root", LP_OP_GET_PUT, root,
		LPU_DEMO_GET_PUT, 0);
	lpu_stat(t, "STAT root", root);
	child2 = lpu_new(t, "NEW child2", root, NULL);
	lpu_put(t, "PUT root (child2 holds it)", root);
	lpu_stat(t, "STAT child2", child2);
	lpu_put(t, "PUT child2 (and root)", child2);
	lpu_arena_stat(t, "ARENA_STAT");

	/* TRYGET again with an RCU registry, which LOCKED has not. */
	if (!lpu_open(t))
		return;
	lpu_configure_registry(t, "CONFIGURE, unknown registry", flavor, 0,
			       LP_REGISTRY_COUNT);
	lpu_configure_registry(t, "CONFIGURE, RCU registry", flavor, 0,
			       LP_REGISTRY_RCU);
	if (flavor == LP_FLAVOR_LOCKED)
		return;
	root = lpu_new(t, "RCU: NEW root", LP_HANDLE_NONE, NULL);
	child = lpu_new(t, "RCU: NEW child", root, &child_id);
	tried = lpu_tryget(t, "RCU: TRYGET child", child_id);
	lpu_stat(t, "RCU: STAT child", child);
	lpu_put(t, "RCU: PUT TRYGET's handle", tried);
	lpu_put(t, "RCU: PUT child", child);
	lpu_tryget(t, "RCU: TRYGET child, gone", child_id);
	lpu_put(t, "RCU: PUT root", root);
	lpu_arena_stat(t, "RCU: ARENA_STAT");
}

/* Operands and limits every op must refuse the same way. */
static void lpu_script_bad_values(struct lpu_transcript *t, __u32 op,
				  __u32 handle)
{
	lpu_rmw(t, "RMW above LP_RMW_VALUE_MAX", op, LP_RMW_VALUE_MAX + 1);
	lpu_run(t, "RUN above LP_RMW_VALUE_MAX", op, handle, 1,
		LP_RMW_VALUE_MAX + 1);
	lpu_run(t, "RUN above LP_RUN_MAX_ITERATIONS", op, handle,
		LP_RUN_MAX_ITERATIONS + 1, 0);
}

/* An RMW op: fixed operands around a SET, then a short RUN of it. */
static void lpu_script_rmw(struct lpu_transcript *t, unsigned int op)
{
	static const __u64 values[] = { 5, 3, 9, 0 };
	char what[LPU_WHAT];
	size_t i;

	if (!lpu_open(t))
		return;
	lpu_rmw(t, "SET 7", LP_OP_SET, 7);
	for (i = 0; i < ARRAY_SIZE(values); i++) {
		snprintf(what, sizeof(what), "RMW %llu", values[i]);
		lpu_rmw(t, what, op, values[i]);
	}
	lpu_rmw(t, "READ", LP_OP_READ, 0);
	lpu_rmw(t, "SET 0", LP_OP_SET, 0);
	lpu_rmw(t, "RMW 4", op, 4);
	lpu_rmw(t, "SET 1", LP_OP_SET, 1);
	lpu_run(t, "RUN 10 from 100", op, LP_HANDLE_NONE, 10, 100);
	lpu_rmw(t, "RMW 0", op, 0);
	lpu_rmw(t, "READ", LP_OP_READ, 0);
	lpu_rmw(t, "RMW LP_RMW_VALUE_MAX", op, LP_RMW_VALUE_MAX);
	lpu_rmw(t, "READ", LP_OP_READ, 0);
	lpu_script_bad_values(t, op, LP_HANDLE_NONE);
}

/*
 * A RUN-only gadget op, in every flavor: on a live child, on the newest
 * id, and once the child is gone; then the counts must be back.
 */
static void lpu_script_loop(struct lpu_transcript *t, unsigned int op)
{
	bool by_id = op == LP_OP_LOOKUP_PUT || op == LP_OP_TRYGET_PUT ||
		     op == LP_OP_TRYGET_ATOMIC_PUT;
	__u32 root = LP_HANDLE_NONE, child, on;
	__u64 child_id = 0;
	unsigned int f;

	for (f = 0; f < LP_FLAVOR_COUNT; f++) {
		if (!lpu_open(t))
			return;
		snprintf(t->prefix, sizeof(t->prefix), "%s, ", flavor_names[f]);
		lpu_configure(t, "CONFIGURE", f, 0);
		root = lpu_new(t, "NEW root", LP_HANDLE_NONE, NULL);
		child = lpu_new(t, "NEW child", root, &child_id);
		on = op == LP_OP_GET_PUT || op == LP_OP_GET_PUT_REFCOUNT ?
			child : root;
		lpu_run(t, "RUN", op, on, LPU_DEMO_RUN, by_id ? child_id : 0);
		if (by_id)
			lpu_run(t, "RUN on the newest id", op, on, LPU_DEMO_RUN,
				LP_ID_NEWEST);
		lpu_stat(t, "STAT root", root);
		lpu_stat(t, "STAT child", child);
		lpu_put(t, "PUT child", child);
		lpu_run(t, "RUN, child gone", op, on, LPU_DEMO_RUN,
			by_id ? child_id : 0);
		lpu_arena_stat(t, "ARENA_STAT");
	}
	t->prefix[0] = '\0';
	lpu_script_bad_values(t, op, root);
}

static void lpu_script_floor(struct lpu_transcript *t, unsigned int op)
{
	if (!lpu_open(t))
		return;
	lpu_run(t, "RUN", op, LP_HANDLE_NONE, LPU_DEMO_RUN, 0);
	lpu_run(t, "RUN 0 times", op, LP_HANDLE_NONE, 0, 0);
	lpu_script_bad_values(t, op, LP_HANDLE_NONE);
}

/*
 * A transaction RUN op, in both transaction flavors: a handle's life
 * through the ioctls and every TXN errno that needs no second thread,
 * then the RUN loop, which must leave the transaction as it found it.
 */
static void lpu_script_txn(struct lpu_transcript *t, unsigned int op)
{
	__u32 h, h2;
	unsigned int f;

	for (f = 0; f < LP_TXN_FLAVOR_COUNT; f++) {
		if (!lpu_open(t))
			return;
		snprintf(t->prefix, sizeof(t->prefix), "%s, ",
			 txn_flavor_names[f]);
		lpu_txn_configure(t, "TXN_CONFIGURE, 0 credits", f, 0);
		lpu_txn_configure(t, "TXN_CONFIGURE", f, 10);
		h = lpu_txn_start(t, "START", 0);
		h2 = lpu_txn_start(t, "START 2 credits", 2);
		lpu_txn_extend(t, "EXTEND 4", h, 4);
		lpu_txn_extend(t, "EXTEND 4", h2, 4);
		lpu_txn_extend(t, "EXTEND 1, full", h, 1);
		lpu_txn_start(t, "START 1, full", 1);
		lpu_txn_start(t, "START 11, above the limit", 11);
		lpu_txn_start(t, "START above LP_TXN_CREDITS_MAX",
			      LP_TXN_CREDITS_MAX + 1);
		lpu_txn_extend(t, "EXTEND 0", h, 0);
		lpu_txn_configure(t, "TXN_CONFIGURE, running", f, 20);
		lpu_txn_commit(t, "COMMIT, no wait", 0);
		lpu_txn_stat(t, "TXN_STAT");
		lpu_txn_stop(t, "STOP", h);
		lpu_txn_stop(t, "STOP again", h);
		lpu_txn_stop(t, "STOP", h2);
		lpu_txn_commit(t, "COMMIT", 1000);
		lpu_run(t, "RUN, 5 credits", op, LP_HANDLE_NONE, LPU_DEMO_RUN,
			5);
		lpu_run(t, "RUN, over the limit", op, LP_HANDLE_NONE,
			LPU_DEMO_RUN, 11);
		lpu_txn_stat(t, "TXN_STAT");
	}
	t->prefix[0] = '\0';
	lpu_run(t, "RUN above LP_RUN_MAX_ITERATIONS", op, LP_HANDLE_NONE,
		LP_RUN_MAX_ITERATIONS + 1, 1);
	lpu_run(t, "RUN, value 0", op, LP_HANDLE_NONE, 1, 0);
}

/* Run @row's script on a fresh open() of @dev into @t. */
static void lpu_script(struct lpu_transcript *t, const char *dev,
		       const struct lpu_row *row)
{
	memset(t, 0, sizeof(*t));
	t->dev = dev;
	t->fd = -1;
	if (!row->is_op)
		lpu_script_flavor(t, row->which);
	else if (row->which <= LP_OP_READ)
		lpu_script_rmw(t, row->which);
	else if (row->which == LP_OP_ATOMIC_FLOOR ||
		 row->which == LP_OP_EMPTY)
		lpu_script_floor(t, row->which);
	else if (row->which == LP_OP_TXN_START_STOP ||
		 row->which == LP_OP_TXN_EXTEND)
		lpu_script_txn(t, row->which);
	else
		lpu_script_loop(t, row->which);
	if (t->fd >= 0)
		close(t->fd);
}

/* Whether @c and @r are the same; if not, @why says where they part. */
static bool lpu_same(const struct lpu_transcript *c,
		     const struct lpu_transcript *r, char *why, size_t len)
{
	const struct lpu_transcript *bad = c->open_err ? c : r;
	int i;

	if (c->open_err || r->open_err) {
		snprintf(why, len, "cannot open %s: %s (counts as a difference)",
			 bad->dev, strerror(bad->open_err));
		return false;
	}
	if (c->full || r->full) {
		snprintf(why, len, "the script outgrew LPU_STEPS or LPU_SYMS: raise them");
		return false;
	}
	for (i = 0; i < c->steps && i < r->steps; i++) {
		if (strcmp(c->step[i].what, r->step[i].what) ||
		    strcmp(c->step[i].answer, r->step[i].answer)) {
			snprintf(why, len,
				 "first difference: step %d, %s: C %s, Rust %s", i + 1,
				 c->step[i].what, c->step[i].answer,
				 r->step[i].answer);
			return false;
		}
	}
	if (c->steps != r->steps) {
		snprintf(why, len, "C made %d steps, Rust %d", c->steps, r->steps);
		return false;
	}
	return true;
}

/* ---- the report -------------------------------------------------------- */

/* Columns of the identify header: what, /dev/lockless_c, /dev/lockless_rust. */
#define LPU_ID_COLS	3
/* Columns of the rows: row name, C API, Rust API, verdict. */
#define LPU_ROW_COLS	4
/* Spaces between two columns. */
#define LPU_GAP		2

/*
 * A column is as wide as its widest cell, so that no cell runs into the
 * next one: lpu_widen() measures each line of a table before any of it is
 * printed, lpu_print_cells() prints a line. The last column is not padded.
 */
static void lpu_widen(int *width, const char * const *cell, int cols)
{
	int i, len;

	for (i = 0; i < cols; i++) {
		len = strlen(cell[i]);
		if (len > width[i])
			width[i] = len;
	}
}

static void lpu_print_cells(const int *width, const char * const *cell,
			    int cols)
{
	int i;

	for (i = 0; i < cols - 1; i++)
		printf("%-*s", width[i] + LPU_GAP, cell[i]);
	printf("%s\n", cell[cols - 1]);
}

struct lpu_answer {
	int err;
	struct lp_identify id;
};

static void lpu_identify(const char *path, struct lpu_answer *a)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	memset(a, 0, sizeof(*a));
	if (fd < 0) {
		a->err = errno;
		return;
	}
	if (ioctl(fd, LP_IOC_IDENTIFY, &a->id))
		a->err = errno;
	close(fd);
}

/* "3 of 6" implemented, or "-" for a device that did not answer. */
static void lpu_count(const struct lpu_answer *a, unsigned long long mask,
		      int all, char *buf, size_t len)
{
	if (a->err)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%d of %d", __builtin_popcountll(mask), all);
}

static void lpu_print_identify(const struct lpu_answer *c,
			       const struct lpu_answer *r)
{
	char abi[2][LPU_SYM], fl[2][LPU_SYM], ops[2][LPU_SYM], txn[2][LPU_SYM],
	     reg[2][LPU_SYM];
	const char *line[][LPU_ID_COLS] = {
		{ "", LP_DEV_C, LP_DEV_RUST },
		{ "module", c->err ? strerror(c->err) : c->id.name,
		  r->err ? strerror(r->err) : r->id.name },
		{ "ABI version", c->err ? "-" : abi[0], r->err ? "-" : abi[1] },
		{ "flavors implemented", fl[0], fl[1] },
		{ "ops implemented", ops[0], ops[1] },
		{ "txn flavors implemented", txn[0], txn[1] },
		{ "registries implemented", reg[0], reg[1] },
	};
	int width[LPU_ID_COLS] = { 0 };
	size_t i;

	snprintf(abi[0], sizeof(abi[0]), "%u", c->id.abi_version);
	snprintf(abi[1], sizeof(abi[1]), "%u", r->id.abi_version);
	lpu_count(c, c->id.flavors, LP_FLAVOR_COUNT, fl[0], sizeof(fl[0]));
	lpu_count(r, r->id.flavors, LP_FLAVOR_COUNT, fl[1], sizeof(fl[1]));
	lpu_count(c, c->id.ops, LP_OP_COUNT, ops[0], sizeof(ops[0]));
	lpu_count(r, r->id.ops, LP_OP_COUNT, ops[1], sizeof(ops[1]));
	lpu_count(c, c->id.txn_flavors, LP_TXN_FLAVOR_COUNT, txn[0],
		  sizeof(txn[0]));
	lpu_count(r, r->id.txn_flavors, LP_TXN_FLAVOR_COUNT, txn[1],
		  sizeof(txn[1]));
	lpu_count(c, c->id.registries, LP_REGISTRY_COUNT, reg[0],
		  sizeof(reg[0]));
	lpu_count(r, r->id.registries, LP_REGISTRY_COUNT, reg[1],
		  sizeof(reg[1]));
	for (i = 0; i < ARRAY_SIZE(line); i++)
		lpu_widen(width, line[i], LPU_ID_COLS);
	for (i = 0; i < ARRAY_SIZE(line); i++)
		lpu_print_cells(width, line[i], LPU_ID_COLS);
}

/* The header line of the flavor rows (0) and of the op rows (1). */
static const char * const lpu_row_head[2][LPU_ROW_COLS] = {
	{ "flavor", "C API", "Rust API", "C vs Rust" },
	{ "op", "C API", "Rust API", "C vs Rust" },
};

/* The cells of @row's line, with @verdict in the last column. */
static void lpu_row_cells(const struct lpu_row *row, const char *verdict,
			  const char **cell)
{
	cell[0] = row->is_op ? op_names[row->which] : flavor_names[row->which];
	cell[1] = row->c_api;
	cell[2] = row->rust_api;
	cell[3] = verdict;
}

/* The rows' column widths: every cell but the verdict is known before. */
static void lpu_row_widths(int *width)
{
	const char *cell[LPU_ROW_COLS];
	size_t i;

	lpu_widen(width, lpu_row_head[0], LPU_ROW_COLS);
	lpu_widen(width, lpu_row_head[1], LPU_ROW_COLS);
	for (i = 0; i < ARRAY_SIZE(lpu_rows); i++) {
		lpu_row_cells(&lpu_rows[i], "DIFFERS", cell);
		lpu_widen(width, cell, LPU_ROW_COLS);
	}
}

/* Run @row on both devices and print its line. Return: true if the same. */
static bool lpu_print_row(const int *width, const struct lpu_row *row)
{
	static struct lpu_transcript c, rust;
	char why[2 * LPU_WHAT + 2 * LPU_ANSWER];
	const char *cell[LPU_ROW_COLS];
	const char *verdict = "same";
	bool same;

	lpu_script(&c, LP_DEV_C, row);
	lpu_script(&rust, LP_DEV_RUST, row);
	same = lpu_same(&c, &rust, why, sizeof(why));
	if (!same)
		verdict = c.open_err || rust.open_err ? "-" : "DIFFERS";
	lpu_row_cells(row, verdict, cell);
	lpu_print_cells(width, cell, LPU_ROW_COLS);
	if (!same)
		printf("    %s\n", why);
	return same;
}

int main(void)
{
	int width[LPU_ROW_COLS] = { 0 };
	struct lpu_answer c, rust;
	int differ = 0;
	size_t i, n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	lpu_identify(LP_DEV_C, &c);
	lpu_identify(LP_DEV_RUST, &rust);
	lpu_print_identify(&c, &rust);

	printf("\nEach row: one short script on a fresh open() of each device, every answer\n");
	printf("compared (errnos, refcounts, released counts, arena counters, RMW and RUN\n");
	printf("results; handles and ids by the order received, never times).\n");
	lpu_row_widths(width);
	for (i = 0; i < ARRAY_SIZE(lpu_rows); i++) {
		if (i == 0 || lpu_rows[i].is_op != lpu_rows[i - 1].is_op) {
			printf("\n");
			lpu_print_cells(width, lpu_row_head[lpu_rows[i].is_op],
					LPU_ROW_COLS);
		}
		differ += !lpu_print_row(width, &lpu_rows[i]);
		if (!lpu_rows[i].is_op && i + 1 < ARRAY_SIZE(lpu_rows) &&
		    lpu_rows[i + 1].is_op)
			for (n = 0; n < ARRAY_SIZE(lpu_tryget_note); n++)
				printf("    %s\n", lpu_tryget_note[n]);
	}

	printf("\nC vs Rust: %zu of %zu rows the same", ARRAY_SIZE(lpu_rows) - differ,
	       ARRAY_SIZE(lpu_rows));
	if (differ)
		printf(", %d differ (the first difference is under each)", differ);
	printf("\n");
	return differ || c.err || rust.err;
}
