// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_badinput.c - bad input, all of it: part of the driver,
 * #included by lockless_test.c (see lockless_fuzz.c for why).
 *
 * For every ioctl, a table of the ways its argument can be wrong: a NULL
 * or read-only pointer, a reserved field set, an unknown flavor or op
 * (every op code: RUN-only ops in RMW, RACY_INC, codes past the enum), a
 * value, credit count, timeout or limit out of range, a bad handle, an
 * unknown id, and the arena states that make an ioctl fail (a full
 * handle table, the gadget limit reached, a flavor without a child list,
 * a transaction handle running, the transaction locked for commit by a
 * COMMIT draining in another thread). Every entry runs alone and with every
 * other entry of the table on another field, against both modules side
 * by side, and each answer must be the errno lockless_uapi.h's
 * precedence rule predicts (of the errors that apply, the first its
 * "Errors:" line lists), the same in both modules, with the arena (and
 * the module's live counts) unchanged.
 *
 * Each arena state is built once per module, identically on both sides,
 * so that handles and ids are the same numbers in both: root gadget
 * handle 1 (id 1), its child handle 2 (id 2), transaction handle 1.
 */
#include "lockless_test.h"

/* Where an answer comes, for what the same errno answers at two places. */
#define BI_RO		1001	/* -EFAULT (read-only): write-back, copy-out */
#define BI_EINVAL_RES	1002	/* RUN's -EINVAL (reserved) */
#define BI_ERACY	1003	/* RUN's -EOPNOTSUPP (RACY_INC not loaded) */
#define BI_ENOSPC_TABLE	1004	/* TXN_START's -ENOSPC (table full) */

/* The answer of an errno or a BI_ place: -errno. */
static int bi_answer(int code)
{
	switch (code) {
	case BI_RO:
		return -EFAULT;
	case BI_EINVAL_RES:
		return -EINVAL;
	case BI_ERACY:
		return -EOPNOTSUPP;
	case BI_ENOSPC_TABLE:
		return -ENOSPC;
	}
	return -code;
}

/* Arena states: one file per set, built once per module. */
enum {
	BI_FRESH	= 1 << 0,	/* opened only: not configured */
	BI_TXNRUN	= 1 << 1,	/* transaction handle 1 running */
	BI_QUOTA	= 1 << 2,	/* max_gadgets reached (2 gadgets) */
	BI_NOKIDS	= 1 << 3,	/* LOCKED: no child list */
	BI_LOCKLESS	= 1 << 4,	/* LOCKLESS, not KREF_MUTEX */
	BI_FULL		= 1 << 5,	/* gadget handle table full */
	BI_TFULL	= 1 << 6,	/* transaction handle table full */
	BI_LOCKED	= 1 << 7,	/* locked for commit (a COMMIT drains) */
};

#define BI_ROOT		1	/* handle and id of the root gadget */
#define BI_CHILD	2	/* handle and id of its child */
#define BI_TXN		1	/* the running transaction handle */
#define BI_NO_HANDLE	12345	/* never given */
#define BI_NO_ID	999	/* never given */
/* Credits one above the limit, within LP_TXN_CREDITS_MAX: -ENOSPC. */
#define BI_OVER_LIMIT	(LP_TXN_CREDITS_DEFAULT + 1)

enum { BI_PTR_OK, BI_PTR_NULL, BI_PTR_RO };

/* One way an argument is wrong; two faults on one field never pair. */
struct bi_fault {
	const char *name;
	int code;		/* the errno, or a BI_ place */
	int ptr;		/* BI_PTR_*: the pointer is the field */
	int off, len;		/* the field, len 0: none (an arena state) */
	__u64 value;
	unsigned int set, clear;	/* arena state bits */
	__u64 only;		/* RUN: the ops it applies to, 0: all */
};

#define BI_NULLP { "NULL", EFAULT, BI_PTR_NULL, -1 }
#define BI_ROP { "read-only", BI_RO, BI_PTR_RO, -1 }
/* A field of 4 or 8 bytes at @off (a reserved one: its first 4 bytes). */
#define BI_U32(n, c, off, v)	{ n, c, BI_PTR_OK, off, 4, v }
#define BI_U64(n, c, off, v)	{ n, c, BI_PTR_OK, off, 8, v }
/* An arena state: a field of its own (the line makes it unique). */
#define BI_STATE(n, c, s, cl)	{ n, c, BI_PTR_OK, -__LINE__, 0, 0, s, cl }
#define BI_RUN(n, c, off, len, v, ops) \
	{ n, c, BI_PTR_OK, offsetof(struct lp_run, off), len, v, 0, 0, ops }
#define BI_RUN_STATE(n, c, s, cl, ops) \
	{ n, c, BI_PTR_OK, -__LINE__, 0, 0, s, cl, ops }
#define BI_END			{ NULL }
#define BI_OP(op)		(1ull << (op))

/* An ioctl, its precedence (its Errors: line), its faults. */
struct bi_table {
	const char *name;
	unsigned long cmd;
	size_t size;
	int order[10];		/* the Errors: line, 0-terminated */
	const struct bi_fault *faults;	/* up to BI_END */
};

static const struct bi_fault bi_identify[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_identify, reserved[0]),
	       1),
	BI_END
};

static const struct bi_fault bi_configure[] = {
	BI_NULLP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_configure, reserved), 1),
	BI_U32("flavor COUNT", EINVAL, offsetof(struct lp_configure, flavor),
	       LP_FLAVOR_COUNT),
	BI_U32("flavor ~0", EINVAL, offsetof(struct lp_configure, flavor), ~0u),
	BI_U32("max_gadgets MAX+1", EINVAL,
	       offsetof(struct lp_configure, max_gadgets), LP_MAX_GADGETS + 1),
	BI_U32("registry COUNT", EINVAL,
	       offsetof(struct lp_configure, registry), LP_REGISTRY_COUNT),
	BI_U32("registry ~0", EINVAL, offsetof(struct lp_configure, registry),
	       ~0u),
	/* The base asks for an RCU registry, which LOCKED has not. */
	BI_U32("flavor LOCKED", EOPNOTSUPP,
	       offsetof(struct lp_configure, flavor), LP_FLAVOR_LOCKED),
	BI_STATE("configured", EBUSY, 0, BI_FRESH),
	BI_END
};

static const struct bi_fault bi_new[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_new, reserved[1]), 1),
	BI_U32("parent never given", EBADF, offsetof(struct lp_new, parent),
	       BI_NO_HANDLE),
	BI_U32("parent ~0", EBADF, offsetof(struct lp_new, parent), ~0u),
	BI_U32("parent MAX_HANDLES+1", EBADF, offsetof(struct lp_new, parent),
	       LP_MAX_HANDLES + 1),
	BI_STATE("gadget limit", EDQUOT, BI_QUOTA, 0),
	BI_STATE("table full", ENOSPC, BI_FULL, 0),
	BI_END
};

static const struct bi_fault bi_get[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_get, reserved[0]), 1),
	BI_U32("handle 0", EBADF, offsetof(struct lp_get, handle), 0),
	BI_U32("handle never given", EBADF, offsetof(struct lp_get, handle),
	       BI_NO_HANDLE),
	BI_STATE("table full", ENOSPC, BI_FULL, 0),
	BI_END
};

static const struct bi_fault bi_put[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_put, reserved[2]), 1),
	BI_U32("handle 0", EBADF, offsetof(struct lp_put, handle), 0),
	BI_U32("handle never given", EBADF, offsetof(struct lp_put, handle),
	       BI_NO_HANDLE),
	BI_END
};

static const struct bi_fault bi_lookup[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_lookup, reserved[1]), 1),
	BI_U32("parent never given", EBADF, offsetof(struct lp_lookup, parent),
	       BI_NO_HANDLE),
	BI_U64("id never given", ENOENT, offsetof(struct lp_lookup, id),
	       BI_NO_ID),
	BI_U64("id of the parent", ENOENT, offsetof(struct lp_lookup, id),
	       BI_ROOT),
	BI_STATE("no child list", EOPNOTSUPP, BI_NOKIDS, 0),
	BI_STATE("table full", ENOSPC, BI_FULL, 0),
	BI_END
};

static const struct bi_fault bi_tryget[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_tryget, reserved[4]), 1),
	BI_U64("id never given", ENOENT, offsetof(struct lp_tryget, id),
	       BI_NO_ID),
	BI_U64("id 0", ENOENT, offsetof(struct lp_tryget, id), 0),
	BI_STATE("table full", ENOSPC, BI_FULL, 0),
	BI_END
};

static const struct bi_fault bi_stat[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_stat, reserved[1]), 1),
	BI_U32("handle 0", EBADF, offsetof(struct lp_stat, handle), 0),
	BI_U32("handle never given", EBADF, offsetof(struct lp_stat, handle),
	       BI_NO_HANDLE),
	BI_END
};

static const struct bi_fault bi_arena_stat[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_arena_stat, reserved[1]),
	       1),
	BI_END
};

#define BI_RMW_OP(n, v) BI_U32(n, EINVAL, offsetof(struct lp_rmw, op), v)

/* RMW of READ: every op code that is not an RMW op, too. */
static const struct bi_fault bi_rmw[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_rmw, reserved[2]), 1),
	BI_U64("value MAX+1", EINVAL, offsetof(struct lp_rmw, value),
	       LP_RMW_VALUE_MAX + 1),
	BI_RMW_OP("op GET_PUT", LP_OP_GET_PUT),
	BI_RMW_OP("op LOOKUP_PUT", LP_OP_LOOKUP_PUT),
	BI_RMW_OP("op TRYGET_PUT", LP_OP_TRYGET_PUT),
	BI_RMW_OP("op ATOMIC_FLOOR", LP_OP_ATOMIC_FLOOR),
	BI_RMW_OP("op NEW_PUT", LP_OP_NEW_PUT),
	BI_RMW_OP("op TXN_START_STOP", LP_OP_TXN_START_STOP),
	BI_RMW_OP("op TXN_EXTEND", LP_OP_TXN_EXTEND),
	BI_RMW_OP("op EMPTY", LP_OP_EMPTY),
	BI_RMW_OP("op GET_PUT_REFCOUNT", LP_OP_GET_PUT_REFCOUNT),
	BI_RMW_OP("op TRYGET_ATOMIC_PUT", LP_OP_TRYGET_ATOMIC_PUT),
	BI_RMW_OP("op COUNT", LP_OP_COUNT),
	BI_RMW_OP("op 62", 62),
	BI_RMW_OP("op RACY_INC", LP_OP_RACY_INC),
	BI_RMW_OP("op 64", 64),
	BI_RMW_OP("op ~0", ~0u),
	BI_END
};

/* RMW of the other RMW ops: the faults that do not replace the op. */
static const struct bi_fault bi_rmw_op[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_rmw, reserved[2]), 1),
	BI_U64("value MAX+1", EINVAL, offsetof(struct lp_rmw, value),
	       LP_RMW_VALUE_MAX + 1),
	BI_END
};

#define BI_RMW_OPS	(BI_OP(LP_OP_READ + 1) - 1)
#define BI_HANDLE_OPS	(BI_OP(LP_OP_GET_PUT) | BI_OP(LP_OP_LOOKUP_PUT) | \
			 BI_OP(LP_OP_NEW_PUT) | BI_OP(LP_OP_GET_PUT_REFCOUNT))
#define BI_RUN_UNKNOWN(n, v) BI_RUN(n, EINVAL, op, 4, v, BI_OP(LP_OP_EMPTY))

/* RUN: one table, each fault for the ops it applies to. */
static const struct bi_fault bi_run[] = {
	BI_NULLP, BI_ROP,
	BI_RUN("reserved", BI_EINVAL_RES, reserved[0], 4, 1, 0),
	BI_RUN("iterations MAX+1", E2BIG, iterations, 8,
	       LP_RUN_MAX_ITERATIONS + 1, 0),
	BI_RUN("iterations ~0", E2BIG, iterations, 8, ~0ull, 0),
	BI_RUN("value MAX+1", EINVAL, value, 8,
	       LP_RMW_VALUE_MAX + 1, BI_RMW_OPS),
	BI_RUN("credits MAX+1", EINVAL, value, 8, LP_TXN_CREDITS_MAX + 1,
	       BI_OP(LP_OP_TXN_START_STOP) | BI_OP(LP_OP_TXN_EXTEND)),
	BI_RUN("credits 0", EINVAL, value, 8, 0, BI_OP(LP_OP_TXN_EXTEND)),
	BI_RUN("value 2", EINVAL, value, 8, 2, BI_OP(LP_OP_RACY_INC)),
	BI_RUN("handle 0", EBADF, handle, 4, 0, BI_HANDLE_OPS),
	BI_RUN("handle never given", EBADF, handle, 4,
	       BI_NO_HANDLE, BI_HANDLE_OPS),
	BI_RUN_STATE("no child list", EOPNOTSUPP, BI_NOKIDS, 0,
		     BI_OP(LP_OP_LOOKUP_PUT)),
	BI_RUN_STATE("not LOCKLESS", EOPNOTSUPP, 0, BI_LOCKLESS,
		     BI_OP(LP_OP_GET_PUT_REFCOUNT)),
	BI_RUN_STATE("LOCKED", EOPNOTSUPP, BI_NOKIDS, 0,
		     BI_OP(LP_OP_TRYGET_ATOMIC_PUT)),
	BI_RUN_STATE("gadget limit", EDQUOT, BI_QUOTA, 0,
		     BI_OP(LP_OP_NEW_PUT)),
	BI_RUN_UNKNOWN("op COUNT", LP_OP_COUNT),
	BI_RUN_UNKNOWN("op 62", 62),
	BI_RUN_UNKNOWN("op 64", 64),
	BI_RUN_UNKNOWN("op ~0", ~0u),
	BI_END
};

static const struct bi_fault bi_txn_configure[] = {
	BI_NULLP,
	BI_U32("reserved", EINVAL,
	       offsetof(struct lp_txn_configure, reserved[2]), 1),
	BI_U32("flavor COUNT", EINVAL,
	       offsetof(struct lp_txn_configure, flavor),
	       LP_TXN_FLAVOR_COUNT),
	BI_U32("flavor ~0", EINVAL, offsetof(struct lp_txn_configure, flavor),
	       ~0u),
	BI_U32("credits 0", EINVAL,
	       offsetof(struct lp_txn_configure, max_credits), 0),
	BI_U32("credits MAX+1", EINVAL,
	       offsetof(struct lp_txn_configure, max_credits),
	       LP_TXN_CREDITS_MAX + 1),
	BI_STATE("handle running", EBUSY, BI_TXNRUN, 0),
	BI_END
};

static const struct bi_fault bi_txn_start[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_txn_start, reserved[3]),
	       1),
	BI_U32("credits MAX+1", EINVAL, offsetof(struct lp_txn_start, nblocks),
	       LP_TXN_CREDITS_MAX + 1),
	BI_U32("credits over the limit", ENOSPC,
	       offsetof(struct lp_txn_start, nblocks), BI_OVER_LIMIT),
	BI_STATE("table full", BI_ENOSPC_TABLE, BI_TFULL, 0),
	BI_STATE("locked for commit", EAGAIN, BI_LOCKED, 0),
	BI_END
};

static const struct bi_fault bi_txn_stop[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_txn_stop, reserved[0]),
	       1),
	BI_U32("handle 0", EBADF, offsetof(struct lp_txn_stop, handle), 0),
	BI_U32("handle of a gadget", EBADF,
	       offsetof(struct lp_txn_stop, handle), BI_CHILD),
	BI_U32("handle never given", EBADF,
	       offsetof(struct lp_txn_stop, handle), BI_NO_HANDLE),
	BI_END
};

static const struct bi_fault bi_txn_extend[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_txn_extend, reserved[1]),
	       1),
	BI_U32("credits 0", EINVAL, offsetof(struct lp_txn_extend, nblocks), 0),
	BI_U32("credits MAX+1", EINVAL, offsetof(struct lp_txn_extend, nblocks),
	       LP_TXN_CREDITS_MAX + 1),
	BI_U32("credits over the limit", ENOSPC,
	       offsetof(struct lp_txn_extend, nblocks), BI_OVER_LIMIT),
	BI_U32("handle 0", EBADF, offsetof(struct lp_txn_extend, handle), 0),
	BI_U32("handle of a gadget", EBADF,
	       offsetof(struct lp_txn_extend, handle), BI_CHILD),
	BI_U32("handle never given", EBADF,
	       offsetof(struct lp_txn_extend, handle), BI_NO_HANDLE),
	BI_STATE("locked for commit", EAGAIN, BI_LOCKED, 0),
	BI_END
};

static const struct bi_fault bi_txn_commit[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_txn_commit, reserved[0]),
	       1),
	BI_U32("timeout MAX+1", EINVAL,
	       offsetof(struct lp_txn_commit, timeout_ms),
	       LP_TXN_TIMEOUT_MAX_MS + 1),
	BI_STATE("handle running", ETIMEDOUT, BI_TXNRUN, 0),
	BI_END
};

static const struct bi_fault bi_txn_stat[] = {
	BI_NULLP, BI_ROP,
	BI_U32("reserved", EINVAL, offsetof(struct lp_txn_stat, reserved[4]),
	       1),
	BI_END
};

#define BI_TABLE(n, cmd, size, faults, ...) \
	{ n, cmd, size, { __VA_ARGS__, 0 }, faults }

/* The Errors: lines of lockless_uapi.h, -ENOMEM aside. */
static const struct bi_table bi_tables[] = {
	BI_TABLE("IDENTIFY", LP_IOC_IDENTIFY, sizeof(struct lp_identify), bi_identify,
		 EFAULT, EINVAL, BI_RO),
	BI_TABLE("CONFIGURE", LP_IOC_CONFIGURE, sizeof(struct lp_configure),
		 bi_configure, EFAULT, EINVAL, EOPNOTSUPP, EBUSY),
	BI_TABLE("NEW", LP_IOC_NEW, sizeof(struct lp_new), bi_new,
		 EFAULT, EINVAL, EBADF, EDQUOT, ENOSPC, BI_RO),
	BI_TABLE("GET", LP_IOC_GET, sizeof(struct lp_get), bi_get,
		 EFAULT, EINVAL, EBADF, ENOSPC, BI_RO),
	BI_TABLE("PUT", LP_IOC_PUT, sizeof(struct lp_put), bi_put,
		 EFAULT, EINVAL, BI_RO, EBADF),
	BI_TABLE("LOOKUP", LP_IOC_LOOKUP, sizeof(struct lp_lookup), bi_lookup,
		 EFAULT, EINVAL, EBADF, EOPNOTSUPP, ENOENT, ENOSPC, BI_RO),
	BI_TABLE("TRYGET", LP_IOC_TRYGET, sizeof(struct lp_tryget), bi_tryget,
		 EFAULT, EINVAL, ENOENT, ENOSPC, BI_RO),
	BI_TABLE("STAT", LP_IOC_STAT, sizeof(struct lp_stat), bi_stat,
		 EFAULT, EINVAL, EBADF, BI_RO),
	BI_TABLE("ARENA_STAT", LP_IOC_ARENA_STAT, sizeof(struct lp_arena_stat),
		 bi_arena_stat, EFAULT, EINVAL, BI_RO),
	BI_TABLE("RMW", LP_IOC_RMW, sizeof(struct lp_rmw), bi_rmw,
		 EFAULT, EINVAL, BI_RO, EOPNOTSUPP),
	BI_TABLE("RMW", LP_IOC_RMW, sizeof(struct lp_rmw), bi_rmw_op,
		 EFAULT, EINVAL, BI_RO, EOPNOTSUPP),
	BI_TABLE("RUN", LP_IOC_RUN, sizeof(struct lp_run), bi_run,
		 EFAULT, BI_EINVAL_RES, BI_ERACY, EINVAL, E2BIG, BI_RO, EBADF,
		 EOPNOTSUPP, EDQUOT),
	BI_TABLE("TXN_CONFIGURE", LP_IOC_TXN_CONFIGURE,
		 sizeof(struct lp_txn_configure), bi_txn_configure,
		 EFAULT, EINVAL, EOPNOTSUPP, EBUSY),
	BI_TABLE("TXN_START", LP_IOC_TXN_START, sizeof(struct lp_txn_start),
		 bi_txn_start, EFAULT, EINVAL, BI_ENOSPC_TABLE, EAGAIN, ENOSPC,
		 BI_RO),
	BI_TABLE("TXN_STOP", LP_IOC_TXN_STOP, sizeof(struct lp_txn_stop), bi_txn_stop,
		 EFAULT, EINVAL, BI_RO, EBADF),
	BI_TABLE("TXN_EXTEND", LP_IOC_TXN_EXTEND, sizeof(struct lp_txn_extend),
		 bi_txn_extend, EFAULT, EINVAL, BI_RO, EBADF, EAGAIN, ENOSPC),
	BI_TABLE("TXN_COMMIT", LP_IOC_TXN_COMMIT, sizeof(struct lp_txn_commit),
		 bi_txn_commit, EFAULT, EINVAL, BI_RO, ETIMEDOUT),
	BI_TABLE("TXN_STAT", LP_IOC_TXN_STAT, sizeof(struct lp_txn_stat), bi_txn_stat,
		 EFAULT, EINVAL, BI_RO),
};

/* The tables whose base argument is not all zero, by index. */
enum {
	BI_T_CONFIGURE = 1,
	BI_T_RMW = 9,
	BI_T_RMW_OP = 10,
	BI_T_RUN = 11,
	BI_T_TXN_CONFIGURE = 12,
	BI_T_TXN_STOP = 14,
	BI_T_TXN_EXTEND = 15,
};

/* One call to check: a table, the op (RMW, RUN), the base argument. */
struct bi_call {
	const struct bi_table *t;
	__u32 op;
	unsigned int state;	/* the base's arena state */
	int inherent;		/* an error the base itself has, or 0 */
	unsigned char arg[FZ_ARG_MAX];
};

/* The base argument of table @ti: valid, unless @inherent. */
static void bi_base(struct bi_call *c, unsigned int ti, __u32 op,
		    __u64 ops)
{
	memset(c, 0, sizeof(*c));
	c->t = &bi_tables[ti];
	c->op = op;
	switch (ti) {
	case BI_T_CONFIGURE:
		c->state = BI_FRESH;
		((struct lp_configure *)c->arg)->flavor = LP_FLAVOR_KREF_MUTEX;
		((struct lp_configure *)c->arg)->registry = LP_REGISTRY_RCU;
		break;
	case 2:
		((struct lp_new *)c->arg)->parent = BI_ROOT;
		break;
	case 3:
		((struct lp_get *)c->arg)->handle = BI_ROOT;
		break;
	case 4:
		((struct lp_put *)c->arg)->handle = BI_CHILD;
		break;
	case 5:
		((struct lp_lookup *)c->arg)->parent = BI_ROOT;
		((struct lp_lookup *)c->arg)->id = BI_CHILD;
		break;
	case 6:
		((struct lp_tryget *)c->arg)->id = BI_CHILD;
		break;
	case 7:
		((struct lp_stat *)c->arg)->handle = BI_ROOT;
		break;
	case BI_T_RMW:
	case BI_T_RMW_OP:
		((struct lp_rmw *)c->arg)->op = op;
		((struct lp_rmw *)c->arg)->value = 1;
		break;
	case BI_T_RUN: {
		struct lp_run *r = (struct lp_run *)c->arg;

		r->op = op;
		r->iterations = 1;
		if (BI_OP(op) & BI_HANDLE_OPS)
			r->handle = BI_ROOT;
		if (op == LP_OP_LOOKUP_PUT || op == LP_OP_TRYGET_PUT ||
		    op == LP_OP_TRYGET_ATOMIC_PUT)
			r->value = BI_CHILD;
		else if (op == LP_OP_TXN_EXTEND || op <= LP_OP_READ)
			r->value = 1;
		if (op == LP_OP_GET_PUT_REFCOUNT)
			c->state = BI_LOCKLESS;
		if (op == LP_OP_RACY_INC && !(ops & BI_OP(LP_OP_RACY_INC)))
			c->inherent = BI_ERACY;
		break;
	}
	case BI_T_TXN_CONFIGURE:
		((struct lp_txn_configure *)c->arg)->flavor = LP_TXN_ATOMIC;
		((struct lp_txn_configure *)c->arg)->max_credits = 512;
		break;
	case BI_T_TXN_STOP:
		c->state = BI_TXNRUN;
		((struct lp_txn_stop *)c->arg)->handle = BI_TXN;
		break;
	case BI_T_TXN_EXTEND:
		c->state = BI_TXNRUN;
		((struct lp_txn_extend *)c->arg)->handle = BI_TXN;
		((struct lp_txn_extend *)c->arg)->nblocks = 1;
		break;
	}
}

/* ---- the arenas: one file per state and module ------------------------- */

#define BI_MAX_FILES	16

/* What a failed call must leave as it found. */
struct bi_snap {
	int ret[7];
	struct lp_arena_stat as;
	struct lp_txn_stat ts;
	struct lp_stat st[2];
	__u64 live[3];
	__u64 rmw;
};

/*
 * An arena. One locked for commit has a thread per side in a COMMIT that
 * drains, for as long as a handle runs: bi_unlock() stops them.
 */
struct bi_file {
	unsigned int state;
	int fd[2];
	bool locked;
	pthread_t committer[2];
	int commit_ret[2];
};

/* How a committer thread finds its side of the file. */
struct bi_commit_arg {
	struct bi_file *f;
	int k;
};

struct bi_run {
	struct __test_metadata *meta;
	struct bi_file files[BI_MAX_FILES];
	unsigned int nfiles;
	void *ro;		/* a page, read-only while a call runs */
	unsigned int cases, pairs, skipped, bad;
	double fill_s;
	struct bi_commit_arg commit_args[BI_MAX_FILES][2];
};

static void bi_snapshot(int fd, struct bi_snap *s)
{
	struct lp_identify id = { 0 };
	struct lp_rmw r = { .op = LP_OP_READ };
	int i;

	memset(s, 0, sizeof(*s));
	s->ret[0] = ioctl(fd, LP_IOC_ARENA_STAT, &s->as) ? -errno : 0;
	s->ret[1] = ioctl(fd, LP_IOC_TXN_STAT, &s->ts) ? -errno : 0;
	/* t_max_wait is a time: equal within one side, not across. */
	s->ts.max_wait_ns = !!s->ts.max_wait_ns;
	for (i = 0; i < 2; i++) {
		s->st[i].handle = i ? BI_CHILD : BI_ROOT;
		s->ret[2 + i] = ioctl(fd, LP_IOC_STAT, &s->st[i]) ? -errno : 0;
	}
	s->ret[4] = ioctl(fd, LP_IOC_IDENTIFY, &id) ? -errno : 0;
	s->live[0] = id.live_gadgets;
	s->live[1] = id.live_handles;
	s->live[2] = id.live_arenas;
	s->ret[5] = ioctl(fd, LP_IOC_RMW, &r) ? -errno : 0;
	s->rmw = r.old;
}

/* Fill a handle table: GET of the root, or TXN_START, until -ENOSPC. */
static int bi_fill(int fd, bool txn)
{
	struct lp_txn_start s;
	struct lp_get g;
	int n = 0, ret;

	do {
		memset(&g, 0, sizeof(g));
		memset(&s, 0, sizeof(s));
		g.handle = BI_ROOT;
		ret = txn ? lpu_call(fd, LP_IOC_TXN_START, &s) :
			    lpu_call(fd, LP_IOC_GET, &g);
		n += !ret;
	} while (!ret);
	return ret == -ENOSPC ? n : ret;
}

/*
 * Build the arena of @state on one side: a root (handle 1, id 1) and its
 * child (handle 2, id 2) in KREF_MUTEX (LOCKED for BI_NOKIDS, LOCKLESS
 * for BI_LOCKLESS), max_gadgets 3 (2: BI_QUOTA), then a running
 * transaction handle and the full tables the state asks for.
 */
static int bi_build(int fd, unsigned int state)
{
	struct lp_configure c = { .flavor = LP_FLAVOR_KREF_MUTEX,
				  .max_gadgets = 3 };
	__u32 h;
	int ret;

	if (state & BI_FRESH)
		return 0;
	if (state & BI_NOKIDS)
		c.flavor = LP_FLAVOR_LOCKED;
	if (state & BI_LOCKLESS)
		c.flavor = LP_FLAVOR_LOCKLESS;
	if (state & BI_QUOTA)
		c.max_gadgets = 2;
	ret = lpu_call(fd, LP_IOC_CONFIGURE, &c);
	if (!ret)
		ret = lpu_new(fd, LP_HANDLE_NONE, &h, NULL);
	if (!ret && h != BI_ROOT)
		ret = -ERANGE;
	if (!ret)
		ret = lpu_new(fd, BI_ROOT, &h, NULL);
	if (!ret && h != BI_CHILD)
		ret = -ERANGE;
	if (!ret && (state & BI_TXNRUN))
		ret = lpu_txn_start(fd, &h, NULL);
	if (!ret && (state & BI_TXNRUN) && h != BI_TXN)
		ret = -ERANGE;
	if (!ret && (state & BI_FULL))
		ret = bi_fill(fd, false) == LP_MAX_HANDLES - 2 ? 0 : -ERANGE;
	if (!ret && (state & BI_TFULL))
		ret = bi_fill(fd, true) == LP_MAX_HANDLES -
			!!(state & BI_TXNRUN) ? 0 : -ERANGE;
	return ret;
}

static void *bi_committer(void *arg)
{
	struct bi_commit_arg *a = arg;
	struct lp_txn_commit c = { .timeout_ms = LP_TXN_TIMEOUT_MAX_MS };

	a->f->commit_ret[a->k] = lpu_call(a->f->fd[a->k], LP_IOC_TXN_COMMIT, &c);
	return NULL;
}

/*
 * Lock a built arena for commit: a COMMIT in another thread, which waits
 * for the handles running (BI_TXN, or a full table of them) to stop.
 */
static int bi_lock(struct bi_run *r, struct bi_file *f)
{
	struct bi_commit_arg *a = r->commit_args[f - r->files];
	struct lp_txn_stat ts;
	int k, i;

	for (k = 0; k < 2; k++) {
		a[k].f = f;
		a[k].k = k;
		if (pthread_create(&f->committer[k], NULL, bi_committer, &a[k]))
			return -EAGAIN;
		f->locked = true;
		for (i = 0; i < 10000; i++) {
			memset(&ts, 0, sizeof(ts));
			if (lpu_call(f->fd[k], LP_IOC_TXN_STAT, &ts))
				return -EIO;
			if (ts.state == LP_TXN_LOCKED_FOR_COMMIT)
				break;
			usleep(1000);
		}
		if (ts.state != LP_TXN_LOCKED_FOR_COMMIT)
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Let the COMMITs of a locked arena end: stop its running handles, so the
 * drains see t_updates reach zero. The arena is no longer of its state.
 */
static void bi_unlock(struct bi_run *r, struct bi_file *f)
{
	struct __test_metadata *_metadata = r->meta;
	struct lp_txn_stop st;
	__u32 h, last;
	int k;

	if (!f->locked)
		return;
	last = f->state & BI_TFULL ? LP_MAX_HANDLES : BI_TXN;
	for (k = 0; k < 2; k++) {
		for (h = 1; h <= last; h++) {
			memset(&st, 0, sizeof(st));
			st.handle = h;
			lpu_call(f->fd[k], LP_IOC_TXN_STOP, &st);
		}
		pthread_join(f->committer[k], NULL);
		EXPECT_EQ(0, f->commit_ret[k])
			TH_LOG("%s: the COMMIT that held the arena locked",
			       k ? "Rust" : "C");
	}
	f->locked = false;
	f->state = ~0u;
}

static void bi_unlock_all(struct bi_run *r)
{
	unsigned int i;

	for (i = 0; i < r->nfiles; i++)
		bi_unlock(r, &r->files[i]);
}

/* The file of @state, built on first use; NULL if it cannot be. */
static struct bi_file *bi_file(struct bi_run *r, unsigned int state)
{
	struct __test_metadata *_metadata = r->meta;
	static const char * const paths[2] = { LP_DEV_C, LP_DEV_RUST };
	struct bi_snap snap[2];
	struct bi_file *f;
	double t0 = now_s();
	unsigned int i;
	int k;

	for (i = 0; i < r->nfiles; i++)
		if (r->files[i].state == state)
			return &r->files[i];
	if (r->nfiles == BI_MAX_FILES)
		return NULL;
	f = &r->files[r->nfiles++];
	f->state = state;
	for (k = 0; k < 2; k++) {
		f->fd[k] = open(paths[k], O_RDWR | O_CLOEXEC);
		if (f->fd[k] < 0 || bi_build(f->fd[k], state)) {
			TH_LOG("%s: cannot build the arena of state %#x",
			       paths[k], state);
			r->bad++;
		}
	}
	if ((state & BI_LOCKED) && bi_lock(r, f)) {
		TH_LOG("cannot lock the arena of state %#x for commit", state);
		r->bad++;
	}
	for (k = 0; k < 2; k++)
		bi_snapshot(f->fd[k], &snap[k]);
	if (memcmp(&snap[0], &snap[1], sizeof(snap[0]))) {
		TH_LOG("the arenas of state %#x differ between C and Rust",
		       state);
		r->bad++;
	}
	r->fill_s += now_s() - t0;
	return f;
}

/* ---- the calls ----------------------------------------------------------- */

static int bi_ioctl(struct bi_run *r, int fd, const struct bi_call *c,
		    int ptr)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char buf[FZ_ARG_MAX];
	int ret;

	switch (ptr) {
	case BI_PTR_NULL:
		return ioctl(fd, c->t->cmd, NULL) ? -errno : 0;
	case BI_PTR_RO:
		mprotect(r->ro, page, PROT_READ | PROT_WRITE);
		memcpy(r->ro, c->arg, c->t->size);
		mprotect(r->ro, page, PROT_READ);
		return ioctl(fd, c->t->cmd, r->ro) ? -errno : 0;
	default:
		memcpy(buf, c->arg, sizeof(buf));
		ret = ioctl(fd, c->t->cmd, buf) ? -errno : 0;
		return ret;
	}
}

static bool bi_applies(const struct bi_fault *f, const struct bi_call *c)
{
	return c->t != &bi_tables[BI_T_RUN] || !f->only ||
	       (f->only & BI_OP(c->op));
}

static int bi_rank(const struct bi_table *t, int code)
{
	int i;

	for (i = 0; t->order[i]; i++)
		if (t->order[i] == code)
			return i;
	return 100;
}

static void bi_apply(struct bi_call *c, const struct bi_fault *f)
{
	if (f->len == 4)
		*(__u32 *)(c->arg + f->off) = f->value;
	else if (f->len == 8)
		*(__u64 *)(c->arg + f->off) = f->value;
}

/*
 * Run the base @c with faults @a and @b (@b NULL: @a alone), on two
 * fields, on both modules. Returns false if no arena has both states.
 */
static bool bi_case(struct bi_run *r, const struct bi_call *base,
		    const struct bi_fault *a, const struct bi_fault *b)
{
	struct __test_metadata *_metadata = r->meta;
	unsigned int state = base->state;
	int ptr = BI_PTR_OK, want, code, ret[2], k;
	struct bi_call c = *base;
	struct bi_snap before[2], after;
	struct bi_file *f;

	state = (state | a->set | (b ? b->set : 0)) &
		~(a->clear | (b ? b->clear : 0));
	if (((state & BI_FRESH) && state != BI_FRESH) ||
	    ((state & BI_NOKIDS) && (state & BI_LOCKLESS)))
		return false;
	/* A COMMIT drains only while a handle runs. */
	if ((state & BI_LOCKED) && !(state & BI_TFULL))
		state |= BI_TXNRUN;
	f = bi_file(r, state);
	if (!f)
		return false;
	bi_apply(&c, a);
	if (b)
		bi_apply(&c, b);
	ptr = a->ptr ? a->ptr : b ? b->ptr : BI_PTR_OK;
	code = a->code;
	if (b && bi_rank(c.t, b->code) < bi_rank(c.t, code))
		code = b->code;
	if (c.inherent && bi_rank(c.t, c.inherent) < bi_rank(c.t, code))
		code = c.inherent;
	want = bi_answer(code);
	/* IDENTIFY's live counts are the module's: every case its own. */
	for (k = 0; k < 2; k++)
		bi_snapshot(f->fd[k], &before[k]);
	for (k = 0; k < 2; k++)
		ret[k] = bi_ioctl(r, f->fd[k], &c, ptr);
	r->cases++;
	r->pairs += !!b;
	if (ret[0] != want || ret[1] != want) {
		if (r->bad++ < 40)
			TH_LOG("%s op %u, %s%s%s: C %d, Rust %d, the contract says %d",
			       c.t->name, c.op, a->name, b ? " + " : "",
			       b ? b->name : "", ret[0], ret[1], want);
	}
	for (k = 0; k < 2; k++) {
		bi_snapshot(f->fd[k], &after);
		if (!memcmp(&after, &before[k], sizeof(after)))
			continue;
		if (r->bad++ < 40)
			TH_LOG("%s: %s op %u, %s%s%s (answered %d) changed the arena",
			       k ? "Rust" : "C", c.t->name, c.op, a->name,
			       b ? " + " : "", b ? b->name : "", ret[k]);
	}
	return true;
}

/* Every fault of @c's table alone, then every pair. */
static void bi_table_run(struct bi_run *r, const struct bi_call *c)
{
	const struct bi_table *t = c->t;
	unsigned int i, j;

	for (i = 0; t->faults[i].name; i++) {
		if (!bi_applies(&t->faults[i], c))
			continue;
		bi_case(r, c, &t->faults[i], NULL);
		for (j = i + 1; t->faults[j].name; j++)
			if (bi_applies(&t->faults[j], c) &&
			    t->faults[i].off != t->faults[j].off &&
			    !bi_case(r, c, &t->faults[i], &t->faults[j]))
				r->skipped++;
	}
}

FIXTURE(badinput)
{
	struct bi_run r;
	struct lp_identify id[2];
};

/*
 * One variant, named for neither module (the judge pairs c_ and rust_
 * variants): each test drives both modules side by side.
 */
FIXTURE_VARIANT(badinput)
{
	int unused;
};

FIXTURE_VARIANT_ADD(badinput, both) { .unused = 0 };

FIXTURE_SETUP(badinput)
{
	int fd, k;

	memset(&self->r, 0, sizeof(self->r));
	self->r.meta = _metadata;
	self->r.ro = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->r.ro);
	for (k = 0; k < 2; k++) {
		fd = open(k ? LP_DEV_RUST : LP_DEV_C, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, lpu_identify(fd, &self->id[k]));
		close(fd);
	}
}

FIXTURE_TEARDOWN(badinput)
{
	unsigned int i;
	int k;

	bi_unlock_all(&self->r);
	for (i = 0; i < self->r.nfiles; i++) {
		for (k = 0; k < 2; k++)
			if (self->r.files[i].fd[k] >= 0)
				close(self->r.files[i].fd[k]);
	}
	munmap(self->r.ro, sysconf(_SC_PAGESIZE));
	expect_module_clean(_metadata, LP_DEV_C);
	expect_module_clean(_metadata, LP_DEV_RUST);
}

/*
 * Every bad field of every ioctl, alone and two at a time: both modules
 * answer the errno the precedence predicts, and change nothing.
 */
TEST_F_TIMEOUT(badinput, pairs_answer_the_first_listed_errno, 120)
{
	__u64 ops = self->id[0].ops;
	struct bi_call c;
	double t0 = now_s();
	unsigned int ti;
	__u32 op;

	/* RACY_INC's answers depend on racy_control: the same in both. */
	ASSERT_EQ(self->id[0].ops, self->id[1].ops);
	for (ti = 0; ti < ARRAY_SIZE(bi_tables); ti++) {
		/* Locked arenas last one table: well within COMMIT's timeout. */
		bi_unlock_all(&self->r);
		if (ti == BI_T_RMW) {
			bi_base(&c, ti, LP_OP_READ, ops);
			bi_table_run(&self->r, &c);
			continue;
		}
		if (ti == BI_T_RMW_OP) {
			for (op = 0; op < LP_OP_READ; op++) {
				bi_base(&c, ti, op, ops);
				bi_table_run(&self->r, &c);
			}
			continue;
		}
		if (ti == BI_T_RUN) {
			for (op = 0; op <= LP_OP_COUNT; op++) {
				bi_base(&c, ti, op < LP_OP_COUNT ? op :
					LP_OP_RACY_INC, ops);
				bi_table_run(&self->r, &c);
			}
			continue;
		}
		bi_base(&c, ti, 0, ops);
		bi_table_run(&self->r, &c);
	}
	bi_unlock_all(&self->r);
	EXPECT_EQ(0, self->r.bad);
	TH_LOG("%u calls (%u pairs, %u pairs no arena makes), %u arenas",
	       self->r.cases, self->r.pairs, self->r.skipped, self->r.nfiles);
	TH_LOG("in %.1f s, %.1f s of it building the arenas",
	       now_s() - t0, self->r.fill_s);
}
