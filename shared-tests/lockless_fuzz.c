// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_fuzz.c - differential fuzzing of the two modules, part of the
 * driver: #included by lockless_test.c, because kselftest_harness.h keeps
 * its list of tests in static variables, one list per translation unit.
 *
 * A stream is a seeded sequence of steps. A step is one ioctl with its
 * argument as raw bytes (valid or not: stale, foreign and made-up
 * handles, ids of released gadgets, reserved fields set, unknown flavors
 * and ops, out-of-range values; in FZ_PAIR_PCT of the steps two bad
 * fields at once, whose answer lockless_uapi.h's order of the errors
 * fixes), an unmapped or read-only argument, an
 * unknown command, or one of three composite steps: fill a handle table
 * (GET or TXN_START until -ENOSPC), empty it again, and close and reopen
 * the file with its handles still held. Each step runs against /dev/lockless_c and
 * /dev/lockless_rust in lockstep, and everything is compared: the return
 * value and errno, every output field (but times, sleep counts and the
 * module's name), and after the step a snapshot of ARENA_STAT, TXN_STAT
 * and the STAT of the newest handles. The first difference stops the
 * stream: it is replayed with steps deleted while it still diverges, and
 * the shortest stream found is printed with its seed.
 *
 * Handles and ids are compared as numbers: both modules hand out the
 * lowest free handle and count ids up from 1 per arena, and a stale handle
 * means the same in both only if that holds.
 *
 * Four tests:
 *   fuzz.lockstep.streams             one thread, a fixed set of seeds (LP_PRESET
 *                                     full: new seeds each run); prints the
 *                                     ioctl x errno coverage matrix and fails
 *                                     if a cell the contract promises and one
 *                                     thread can reach was never hit
 *   fuzz.own_arenas.streams           one stream per thread, each on its own
 *                                     pair of files, all threads at once
 *   fuzz.shared_arena.streams         all threads on one pair of files: no
 *                                     lockstep (interleavings differ), only
 *                                     invariants: every answer is one the
 *                                     contract lists for that ioctl, the
 *                                     arena's counts add up, nothing leaks
 *   fuzz.failing.streams              lockstep, and half the steps fail an
 *                                     allocation (fail-nth) in the C
 *                                     module, the Rust one or both: see
 *                                     fz_exec_failing(); prints per ioctl
 *                                     and module the faults injected, those
 *                                     answered -ENOMEM, those got around
 *
 * Environment: LP_FUZZ_SEED=N replays stream N alone, printing every step
 * (make fuzz SEED=N; the failing mode's too, with
 * TESTS=fuzz.failing.streams); LP_FUZZ_STREAMS and LP_FUZZ_STEPS override
 * the preset's sizes.
 */
#include "lockless_test.h"

/* Steps per stream, streams per run (quick / full). */
#define FZ_STEPS_QUICK		120
#define FZ_STREAMS_QUICK	32
#define FZ_STEPS_FULL		300
#define FZ_STREAMS_FULL		200
/* The harness's limit for one fuzz test: the full sizes take minutes. */
#define FZ_TIMEOUT		1200
/*
 * One stream in this many may fill a handle table (4096 GETs or
 * TXN_STARTs, as many puts or stops later: ~1 s under TCG and KASAN).
 */
#define FZ_FILL_EVERY		8
/* Threads of the concurrent modes (at most; one per CPU). */
#define FZ_THREADS		4
/* Divergent streams after which a run stops (each costs a shrinking). */
#define FZ_MAX_DIVERGED		3
/* Most replays the shrinking of one divergence may take. */
#define FZ_SHRINK_REPLAYS	400
/* Newest handles whose STAT goes into a step's snapshot. */
#define FZ_SNAP_HANDLES		2
/* Failing mode: steps with a fail-nth, in percent. */
#define FZ_FAIL_PCT		50
/* Failing mode: streams per run (quick / full), of FZ_STEPS_* steps. */
#define FZ_FAIL_STREAMS_QUICK	20
#define FZ_FAIL_STREAMS_FULL	200
/* Failing mode: the STATs of this many handles at most in a snapshot. */
#define FZ_SNAP_MAX		256
/* Failing mode: most changes of the id offset between C and Rust. */
#define FZ_IDMAP		256
/* Steps with two bad fields, in percent (others may have one or none). */
#define FZ_PAIR_PCT		10
/* Largest argument struct of the contract, rounded up. */
#define FZ_ARG_MAX		96

/* Steps that are not one ioctl. */
enum fz_kind {
	FZ_IOCTL,		/* ioctl(fd, cmd, arg) */
	/* GET from arg's handle (arg[4] == 0) or TXN_START until an error */
	FZ_FILL,
	FZ_UNFILL,		/* give back every handle the last FILL got */
	FZ_REOPEN,		/* close the file with its handles, open anew */
};

/* Where the argument lives. */
enum fz_ptr {
	FZ_PTR_OK,		/* a writable buffer */
	FZ_PTR_NULL,		/* NULL */
	FZ_PTR_UNMAPPED,	/* a page mapped PROT_NONE */
	FZ_PTR_READONLY,	/* the argument, in a read-only page */
};

/* Which module's ioctl a step's fail-nth is for (failing mode). */
enum fz_fail { FZ_FAIL_NONE, FZ_FAIL_C, FZ_FAIL_RUST, FZ_FAIL_BOTH };

struct fz_step {
	__u8 kind;
	__u8 ptr;
	__u8 ioc;		/* index into fz_iocs[], or FZ_IOC_UNKNOWN */
	__u8 fail;		/* enum fz_fail */
	__u8 nth;		/* the allocation that fails, from 1 */
	unsigned long cmd;
	unsigned char arg[FZ_ARG_MAX];
};

/* The answers of the coverage matrix, in its column order. */
enum fz_col {
	FZ_COL_OK, FZ_COL_EFAULT, FZ_COL_EINVAL, FZ_COL_EBADF, FZ_COL_ENOENT,
	FZ_COL_EOPNOTSUPP, FZ_COL_EBUSY, FZ_COL_E2BIG, FZ_COL_ENOSPC,
	FZ_COL_EAGAIN, FZ_COL_ETIMEDOUT, FZ_COL_ENOMEM, FZ_COL_ENOTTY,
	FZ_NR_COLS
};

static const int fz_errnos[FZ_NR_COLS] = {
	0, EFAULT, EINVAL, EBADF, ENOENT, EOPNOTSUPP, EBUSY, E2BIG, ENOSPC,
	EAGAIN, ETIMEDOUT, ENOMEM, ENOTTY,
};

static const char * const fz_errno_names[FZ_NR_COLS] = {
	"ok", "EFAULT", "EINVAL", "EBADF", "ENOENT", "EOPNOTSUPP", "EBUSY",
	"E2BIG", "ENOSPC", "EAGAIN", "ETIMEDOUT", "ENOMEM", "ENOTTY",
};

struct fz_ioc {
	const char *name;
	unsigned long cmd;
	size_t size;
	/* bit FZ_COL_x for every errno x the header lists for it */
	__u32 errnos;
	/* those of them one thread can reach (promised coverage) */
	__u32 promised;
	/* output fields not compared: byte offset and length, up to two */
	unsigned char skip[2][2];
};

#define E(e)	(1u << FZ_COL_##e)
#define FZ_IOC_UNKNOWN	17
#define FZ_NR_IOCS	18

/*
 * From lockless_uapi.h's "Errors:" lines. Not promised: -ENOMEM (only
 * the failing mode injects failures, and counts them itself),
 * -EOPNOTSUPP for a flavor or op a module lacks (both implement all; a
 * LOCKED arena's RCU registry is promised),
 * -EAGAIN (only while another thread's COMMIT drains; the shared_arena
 * mode, the txn tests and badinput reach it).
 */
static const struct fz_ioc fz_iocs[FZ_NR_IOCS] = {
	{ "IDENTIFY", LP_IOC_IDENTIFY, sizeof(struct lp_identify),
	  E(EFAULT) | E(EINVAL), E(EFAULT) | E(EINVAL),
	  { { offsetof(struct lp_identify, name), LP_NAME_LEN } } },
	{ "CONFIGURE", LP_IOC_CONFIGURE, sizeof(struct lp_configure),
	  E(EFAULT) | E(EINVAL) | E(EOPNOTSUPP) | E(EBUSY),
	  E(EFAULT) | E(EINVAL) | E(EOPNOTSUPP) | E(EBUSY) },
	{ "NEW", LP_IOC_NEW, sizeof(struct lp_new),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOSPC) | E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOSPC) },
	{ "GET", LP_IOC_GET, sizeof(struct lp_get),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOSPC) | E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOSPC) },
	{ "PUT", LP_IOC_PUT, sizeof(struct lp_put),
	  E(EFAULT) | E(EINVAL) | E(EBADF),
	  E(EFAULT) | E(EINVAL) | E(EBADF) },
	{ "LOOKUP", LP_IOC_LOOKUP, sizeof(struct lp_lookup),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOENT) | E(EOPNOTSUPP) |
	  E(ENOSPC) | E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOENT) | E(EOPNOTSUPP) |
	  E(ENOSPC) },
	{ "TRYGET", LP_IOC_TRYGET, sizeof(struct lp_tryget),
	  E(EFAULT) | E(EINVAL) | E(ENOENT) | E(ENOSPC) | E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(ENOENT) | E(ENOSPC) },
	{ "STAT", LP_IOC_STAT, sizeof(struct lp_stat),
	  E(EFAULT) | E(EINVAL) | E(EBADF),
	  E(EFAULT) | E(EINVAL) | E(EBADF) },
	{ "ARENA_STAT", LP_IOC_ARENA_STAT, sizeof(struct lp_arena_stat),
	  E(EFAULT) | E(EINVAL), E(EFAULT) | E(EINVAL) },
	{ "RMW", LP_IOC_RMW, sizeof(struct lp_rmw),
	  E(EFAULT) | E(EINVAL) | E(EOPNOTSUPP), E(EFAULT) | E(EINVAL) },
	{ "RUN", LP_IOC_RUN, sizeof(struct lp_run),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(EOPNOTSUPP) | E(E2BIG) |
	  E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(EOPNOTSUPP) | E(E2BIG),
	  { { offsetof(struct lp_run, elapsed_ns), 8 } } },
	{ "TXN_CONFIGURE", LP_IOC_TXN_CONFIGURE,
	  sizeof(struct lp_txn_configure),
	  E(EFAULT) | E(EINVAL) | E(EOPNOTSUPP) | E(EBUSY),
	  E(EFAULT) | E(EINVAL) | E(EBUSY) },
	{ "TXN_START", LP_IOC_TXN_START, sizeof(struct lp_txn_start),
	  E(EFAULT) | E(EINVAL) | E(EAGAIN) | E(ENOSPC) | E(ENOMEM),
	  E(EFAULT) | E(EINVAL) | E(ENOSPC) },
	{ "TXN_STOP", LP_IOC_TXN_STOP, sizeof(struct lp_txn_stop),
	  E(EFAULT) | E(EINVAL) | E(EBADF),
	  E(EFAULT) | E(EINVAL) | E(EBADF) },
	{ "TXN_EXTEND", LP_IOC_TXN_EXTEND, sizeof(struct lp_txn_extend),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(EAGAIN) | E(ENOSPC),
	  E(EFAULT) | E(EINVAL) | E(EBADF) | E(ENOSPC) },
	{ "TXN_COMMIT", LP_IOC_TXN_COMMIT, sizeof(struct lp_txn_commit),
	  E(EFAULT) | E(EINVAL) | E(ETIMEDOUT),
	  E(EFAULT) | E(EINVAL) | E(ETIMEDOUT),
	  { { offsetof(struct lp_txn_commit, slept), 4 },
	    { offsetof(struct lp_txn_commit, wait_ns), 8 } } },
	{ "TXN_STAT", LP_IOC_TXN_STAT, sizeof(struct lp_txn_stat),
	  E(EFAULT) | E(EINVAL), E(EFAULT) | E(EINVAL) },
	{ "unknown", 0, FZ_ARG_MAX, E(ENOTTY), E(ENOTTY) },
};

static int fz_errno_col(int ret)
{
	int i;

	for (i = 0; i < FZ_NR_COLS; i++)
		if (-ret == fz_errnos[i])
			return i;
	return -1;
}

/* ---- the random source: splitmix64, so a seed is a stream everywhere -- */

static __u64 fz_next(__u64 *s)
{
	__u64 z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static __u64 fz_below(__u64 *s, __u64 n)
{
	return n ? fz_next(s) % n : 0;
}

/* true with probability pct % */
static bool fz_pct(__u64 *s, unsigned int pct)
{
	return fz_below(s, 100) < pct;
}

/* ---- one module's side of a stream ------------------------------------ */

struct fz_side {
	const char *path;
	int fd;
	/* the handles the last FILL got, for UNFILL */
	__u32 filled[LP_MAX_HANDLES], tfilled[LP_MAX_HANDLES];
	unsigned int nfilled, ntfilled;
	/* failing mode: /proc/thread-self/fail-nth, the next ioctl's nth */
	int failfd;
	unsigned int nth;
	bool reached;		/* the last armed ioctl met its nth */
};

/* A page mapped PROT_NONE: an argument pointer that faults. */
static void *fz_unmapped;

static int fz_pages(void)
{
	if (fz_unmapped)
		return 0;
	fz_unmapped = mmap(NULL, 4096, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return fz_unmapped == MAP_FAILED ? -errno : 0;
}

/*
 * One ioctl; with sd->nth set, with the calling thread's nth allocation
 * failing (fail-nth, as call_failing_nth() does): armed right before the
 * ioctl, read back after (0: the fault was injected), disarmed.
 */
static int fz_call(struct fz_side *sd, unsigned long cmd, void *arg)
{
	char buf[16];
	ssize_t n;
	int ret;

	if (!sd->nth)
		return ioctl(sd->fd, cmd, arg) ? -errno : 0;
	snprintf(buf, sizeof(buf), "%u", sd->nth);
	if (pwrite(sd->failfd, buf, strlen(buf), 0) < 0)
		return -1000;
	ret = ioctl(sd->fd, cmd, arg) ? -errno : 0;
	n = pread(sd->failfd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	sd->reached = n > 0 && atoi(buf) == 0;
	if (pwrite(sd->failfd, "0", 1, 0) < 0)
		return -1000;
	return ret;
}

/* A read-only argument gets a page of its own, filled, then mprotect()ed. */
static int fz_ioctl(struct fz_side *sd, const struct fz_step *st,
		    unsigned char *out)
{
	void *p;
	int ret;

	memcpy(out, st->arg, FZ_ARG_MAX);
	switch (st->ptr) {
	case FZ_PTR_NULL:
		return fz_call(sd, st->cmd, NULL);
	case FZ_PTR_UNMAPPED:
		return fz_call(sd, st->cmd, fz_unmapped);
	case FZ_PTR_READONLY:
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		memcpy(p, st->arg, FZ_ARG_MAX);
		mprotect(p, 4096, PROT_READ);
		ret = fz_call(sd, st->cmd, p);
		memcpy(out, p, FZ_ARG_MAX);
		munmap(p, 4096);
		return ret;
	default:
		return fz_call(sd, st->cmd, out);
	}
}

/*
 * Run one step on one side. Returns 0 or -errno; @out gets the argument as
 * the module left it (FILL: the count of handles got; REOPEN: nothing).
 */
static int fz_exec(struct fz_side *sd, const struct fz_step *st,
		   unsigned char *out)
{
	struct lp_txn_start ts;
	struct lp_txn_stop tp;
	struct lp_get g;
	struct lp_put p;
	int ret = 0, tret = 0;

	memset(out, 0, FZ_ARG_MAX);
	switch (st->kind) {
	case FZ_IOCTL:
		return fz_ioctl(sd, st, out);
	case FZ_FILL:
		sd->nfilled = 0;
		sd->ntfilled = 0;
		memcpy(&g, st->arg, sizeof(g));
		while (!st->arg[4] && sd->nfilled < LP_MAX_HANDLES) {
			g.new_handle = 0;
			ret = ioctl(sd->fd, LP_IOC_GET, &g) ? -errno : 0;
			if (ret)
				break;
			sd->filled[sd->nfilled++] = g.new_handle;
		}
		while (st->arg[4] && sd->ntfilled < LP_MAX_HANDLES) {
			memset(&ts, 0, sizeof(ts));
			tret = ioctl(sd->fd, LP_IOC_TXN_START, &ts) ? -errno : 0;
			if (tret)
				break;
			sd->tfilled[sd->ntfilled++] = ts.handle;
		}
		memcpy(out, &sd->nfilled, sizeof(sd->nfilled));
		memcpy(out + 4, &sd->ntfilled, sizeof(sd->ntfilled));
		return ret ? ret : tret;
	case FZ_UNFILL:
		while (sd->nfilled) {
			memset(&p, 0, sizeof(p));
			p.handle = sd->filled[--sd->nfilled];
			if (ioctl(sd->fd, LP_IOC_PUT, &p) && !ret)
				ret = -errno;
		}
		while (sd->ntfilled) {
			memset(&tp, 0, sizeof(tp));
			tp.handle = sd->tfilled[--sd->ntfilled];
			if (ioctl(sd->fd, LP_IOC_TXN_STOP, &tp) && !ret)
				ret = -errno;
		}
		return ret;
	case FZ_REOPEN:
		close(sd->fd);
		sd->nfilled = 0;
		sd->ntfilled = 0;
		sd->fd = open(sd->path, O_RDWR | O_CLOEXEC);
		return sd->fd < 0 ? -errno : 0;
	}
	return -EINVAL;
}

/* ---- the generator ----------------------------------------------------- */

/*
 * What the generator knows of the arena, from the answers of the C side
 * (the Rust side answered the same, or the stream has stopped).
 */
struct fz_gen {
	__u64 rng;
	__u32 live[LP_MAX_HANDLES];	/* gadget handles held */
	unsigned int nlive;
	__u32 stale[64];		/* handles put, ring */
	unsigned int nstale;
	__u32 txn[64];			/* transaction handles held */
	unsigned int ntxn;
	__u64 ids[256];			/* ids seen, ring */
	unsigned int nids;
	__u64 newest;
	struct { __u32 parent; __u64 id; } kids[64];	/* NEWs, ring */
	unsigned int nkids;
	bool may_fill;		/* run the fill script once in this stream */
	bool fill_txn;		/* fill the transaction's table, not the gadgets' */
	unsigned int steps;
	unsigned int script;	/* the fill script's next step, 0: none */
	__u32 last_handle, root_handle, child_handle;	/* NEWs */
	__u64 last_id, root_id, child_id;
	bool configured;	/* CONFIGURE offered since the file opened */
	bool failing;		/* give steps a fail-nth (failing mode) */
};

static __u32 fz_pick_handle(struct fz_gen *g)
{
	unsigned int r = fz_below(&g->rng, 100);

	if (r < 70 && g->nlive)
		return g->live[g->nlive - 1 - fz_below(&g->rng,
						       g->nlive < 8 ? g->nlive : 8)];
	if (r < 80 && g->nstale)
		return g->stale[fz_below(&g->rng, g->nstale < 64 ? g->nstale : 64)];
	if (r < 85 && g->ntxn)
		return g->txn[fz_below(&g->rng, g->ntxn)];
	if (r < 90)
		return LP_HANDLE_NONE;
	if (r < 95)
		return fz_below(&g->rng, 16);
	return fz_pct(&g->rng, 50) ? 0xffffffffu : LP_MAX_HANDLES + 1;
}

static __u32 fz_pick_txn_handle(struct fz_gen *g)
{
	if (g->ntxn && fz_pct(&g->rng, 75))
		return g->txn[fz_below(&g->rng, g->ntxn)];
	return fz_pick_handle(g);
}

static __u64 fz_pick_id(struct fz_gen *g)
{
	unsigned int r = fz_below(&g->rng, 100);

	if (r < 40 && g->newest)
		return g->newest;
	if (r < 75 && g->nids)
		return g->ids[fz_below(&g->rng, g->nids < 256 ? g->nids : 256)];
	if (r < 85)
		return g->newest + 1 + fz_below(&g->rng, 3);
	if (r < 92)
		return 0;
	return fz_next(&g->rng);
}

static __u64 fz_pick_value(struct fz_gen *g)
{
	switch (fz_below(&g->rng, 8)) {
	case 0:
		return 0;
	case 1:
		return LP_RMW_VALUE_MAX;
	case 2:
		return LP_RMW_VALUE_MAX - fz_below(&g->rng, 3);
	case 3:
		return LP_RMW_VALUE_MAX + 1 + fz_below(&g->rng, 2);
	case 4:
		return fz_next(&g->rng);
	default:
		return fz_below(&g->rng, 1000);
	}
}

/* Set a reserved field now and then: the answer must be -EINVAL. */
static void fz_reserved(struct fz_gen *g, void *field, size_t size)
{
	if (fz_pct(&g->rng, 10))
		((unsigned char *)field)[fz_below(&g->rng, size)] =
			1 + fz_below(&g->rng, 255);
}

/*
 * The fill script: what a full handle table answers. On a fresh file in a
 * flavor with a child list, a root and a child; fill a table from the
 * child's handle; then NEW, GET, LOOKUP, TRYGET and TXN_START, each of
 * which must answer -ENOSPC if its table is the full one; then empty the
 * table or close the file with it full.
 */
static void fz_fill_script(struct fz_gen *g, struct fz_step *st)
{
	static const __u8 iocs[] = { 0, 0, 1, 2, 2, 0, 2, 3, 5, 6, 12 };
	unsigned int step = g->script++;

	st->ptr = FZ_PTR_OK;
	st->kind = FZ_IOCTL;
	if (step < ARRAY_SIZE(iocs))
		st->ioc = iocs[step];
	switch (step) {
	case 1:
		st->kind = FZ_REOPEN;
		break;
	case 2:
		((struct lp_configure *)st->arg)->flavor =
			LP_FLAVOR_WEAK_CMPXCHG + fz_below(&g->rng, 4);
		break;
	case 3:
		((struct lp_new *)st->arg)->parent = LP_HANDLE_NONE;
		break;
	case 4:
		g->root_handle = g->last_handle;
		g->root_id = g->last_id;
		((struct lp_new *)st->arg)->parent = g->root_handle;
		break;
	case 5:
		g->child_handle = g->last_handle;
		g->child_id = g->last_id;
		st->kind = FZ_FILL;
		((struct lp_get *)st->arg)->handle = g->child_handle;
		st->arg[4] = g->fill_txn;
		break;
	case 6:
		((struct lp_new *)st->arg)->parent = g->child_handle;
		break;
	case 7:
		((struct lp_get *)st->arg)->handle = g->child_handle;
		break;
	case 8:
		((struct lp_lookup *)st->arg)->parent = g->root_handle;
		((struct lp_lookup *)st->arg)->id = g->child_id;
		break;
	case 9:
		((struct lp_tryget *)st->arg)->id = g->child_id;
		break;
	case 10:
		break;
	default:
		st->kind = fz_pct(&g->rng, 50) ? FZ_UNFILL : FZ_REOPEN;
		g->script = 0;
		break;
	}
	st->cmd = fz_iocs[st->ioc].cmd;
}

/* A handle no table holds now (or, stale, one a later step got again). */
static __u32 fz_bad_handle(struct fz_gen *g)
{
	unsigned int r = fz_below(&g->rng, 4);

	if (r == 0 && g->nstale)
		return g->stale[fz_below(&g->rng, g->nstale < 64 ?
					     g->nstale : 64)];
	switch (r) {
	case 0:
	case 1:
		return 0xffffffffu;
	case 2:
		return LP_MAX_HANDLES + 1;
	default:
		return 1000 + fz_below(&g->rng, 1000);
	}
}

/* An id no gadget has (0 is the newest only for RUN). */
static __u64 fz_bad_id(struct fz_gen *g)
{
	if (fz_pct(&g->rng, 50))
		return g->newest + 1 + fz_below(&g->rng, 3);
	return fz_pct(&g->rng, 50) ? 0 : fz_next(&g->rng) | 1ull << 63;
}

/*
 * Make field @which of an ioctl's argument bad: 0 the reserved field
 * (every struct ends with it), 1 the pointer, then the ioctl's own.
 * Returns how many fields the ioctl has (@which is taken modulo that).
 */
static unsigned int fz_bad_field(struct fz_gen *g, struct fz_step *st,
				 unsigned int which)
{
	static const unsigned char nfields[FZ_NR_IOCS] = {
		2, 4, 3, 3, 3, 4, 3, 3, 2, 4, 6, 4, 4, 3, 4, 3, 2, 0,
	};
	unsigned int n = nfields[st->ioc];
	void *a = st->arg;
	__u32 *u32 = a;

	if (!n)
		return 0;
	which %= n;
	if (which == 0) {
		st->arg[fz_iocs[st->ioc].size - 1 - fz_below(&g->rng, 4)] =
			1 + fz_below(&g->rng, 255);
		return n;
	}
	if (which == 1) {
		st->ptr = FZ_PTR_NULL + fz_below(&g->rng, 3);
		return n;
	}
	switch (st->ioc * 8 + which) {
	case 1 * 8 + 2:		/* CONFIGURE */
		((struct lp_configure *)a)->flavor =
			LP_FLAVOR_COUNT + fz_below(&g->rng, 3);
		break;
	case 1 * 8 + 3:
		((struct lp_configure *)a)->max_gadgets =
			LP_MAX_GADGETS + 1 + fz_below(&g->rng, 2);
		break;
	case 2 * 8 + 2:		/* NEW, GET, PUT, STAT: the handle */
	case 3 * 8 + 2:
	case 4 * 8 + 2:
	case 5 * 8 + 2:		/* LOOKUP's parent */
	case 7 * 8 + 2:
		u32[0] = fz_bad_handle(g);
		break;
	case 5 * 8 + 3:
		((struct lp_lookup *)a)->id = fz_bad_id(g);
		break;
	case 6 * 8 + 2:
		((struct lp_tryget *)a)->id = fz_bad_id(g);
		break;
	case 9 * 8 + 2:		/* RMW: every op that is not one */
		((struct lp_rmw *)a)->op = LP_OP_GET_PUT +
			fz_below(&g->rng, LP_OP_COUNT - LP_OP_GET_PUT + 2);
		if (fz_pct(&g->rng, 25))
			((struct lp_rmw *)a)->op = fz_pct(&g->rng, 50) ?
				LP_OP_RACY_INC : ~0u;
		break;
	case 9 * 8 + 3:
		((struct lp_rmw *)a)->value = LP_RMW_VALUE_MAX + 1 +
			fz_below(&g->rng, 2);
		break;
	case 10 * 8 + 2:	/* RUN */
		((struct lp_run *)a)->op = fz_pct(&g->rng, 50) ?
			LP_OP_RACY_INC : LP_OP_COUNT + fz_below(&g->rng, 64);
		break;
	case 10 * 8 + 3:
		((struct lp_run *)a)->iterations = fz_pct(&g->rng, 50) ?
			~0ull : LP_RUN_MAX_ITERATIONS + 1;
		break;
	case 10 * 8 + 4:	/* out of range for whatever op it is */
		((struct lp_run *)a)->value = fz_pct(&g->rng, 25) ? 0 :
			fz_pct(&g->rng, 50) ? 2 : LP_RMW_VALUE_MAX + 1;
		break;
	case 10 * 8 + 5:
		((struct lp_run *)a)->handle = fz_bad_handle(g);
		break;
	case 11 * 8 + 2:	/* TXN_CONFIGURE */
		((struct lp_txn_configure *)a)->flavor =
			LP_TXN_FLAVOR_COUNT + fz_below(&g->rng, 2);
		break;
	case 11 * 8 + 3:
		((struct lp_txn_configure *)a)->max_credits =
			fz_pct(&g->rng, 50) ? 0 : LP_TXN_CREDITS_MAX + 1;
		break;
	case 12 * 8 + 2:	/* TXN_START: above the maximum, the limit */
	case 12 * 8 + 3:
		((struct lp_txn_start *)a)->nblocks = LP_TXN_CREDITS_MAX +
			(which == 2);
		break;
	case 13 * 8 + 2:	/* TXN_STOP, TXN_EXTEND: the handle */
	case 14 * 8 + 2:
		u32[0] = fz_bad_handle(g);
		break;
	case 14 * 8 + 3:
		((struct lp_txn_extend *)a)->nblocks =
			fz_pct(&g->rng, 30) ? 0 : LP_TXN_CREDITS_MAX +
			fz_below(&g->rng, 2);
		break;
	case 15 * 8 + 2:
		((struct lp_txn_commit *)a)->timeout_ms =
			LP_TXN_TIMEOUT_MAX_MS + 1;
		break;
	}
	return n;
}

/*
 * Failing mode: the step's nth allocation fails, in the C module's ioctl,
 * the Rust one's, or both (the same nth: the modules allocate at different
 * points, so it may fail in one and not the other). Small nths mostly:
 * one ioctl allocates a few times at most. A RUN NEW_PUT that failed in
 * its second iteration would keep its first (a loop is not undone): one
 * iteration, so that an -ENOMEM changed nothing.
 */
static void fz_give_fault(struct fz_gen *g, struct fz_step *st)
{
	struct lp_run *run = (struct lp_run *)st->arg;

	st->fail = FZ_FAIL_C + fz_below(&g->rng, 3);
	st->nth = 1 + fz_below(&g->rng, fz_pct(&g->rng, 80) ? 3 : 8);
	if (st->ioc == 10 && run->op == LP_OP_NEW_PUT && run->iterations > 1)
		run->iterations = 1;
}

/*
 * Two bad fields at once, on two different fields: both modules must
 * answer the error lockless_uapi.h's precedence puts first.
 */
static void fz_bad_pair(struct fz_gen *g, struct fz_step *st)
{
	unsigned int n, k = fz_below(&g->rng, 8);

	n = fz_bad_field(g, st, k);
	if (n > 1)
		fz_bad_field(g, st, k % n + 1 + fz_below(&g->rng, n - 1));
}

static void fz_generate(struct fz_gen *g, struct fz_step *st)
{
	unsigned int r = fz_below(&g->rng, 1000);
	void *a = st->arg;
	unsigned int i;

	memset(st, 0, sizeof(*st));
	st->kind = FZ_IOCTL;
	if (g->may_fill && ++g->steps > 20) {
		g->may_fill = false;
		g->script = 1;
	}
	if (g->script) {
		g->configured = true;
		fz_fill_script(g, st);
		return;
	}
	/* A bad argument pointer for any ioctl, a few percent of the time. */
	if (fz_pct(&g->rng, 6))
		st->ptr = FZ_PTR_NULL + fz_below(&g->rng, 3);

	/* A fresh file is usually configured first, to any flavor. */
	if (!g->configured) {
		g->configured = true;
		if (fz_pct(&g->rng, 75)) {
			st->ptr = FZ_PTR_OK;
			st->ioc = 1;
			st->cmd = fz_iocs[1].cmd;
			((struct lp_configure *)a)->flavor =
				fz_below(&g->rng, LP_FLAVOR_COUNT);
			return;
		}
	}
	if (r < 10) {
		st->ioc = FZ_IOC_UNKNOWN;
		switch (fz_below(&g->rng, 4)) {
		case 0:	/* a number past the last ioctl */
			st->cmd = _IOWR(LP_IOC_MAGIC, 0x11 + fz_below(&g->rng, 0xee),
					struct lp_new);
			break;
		case 1:	/* a known number, the wrong size */
			st->cmd = _IOC(_IOC_READ | _IOC_WRITE, LP_IOC_MAGIC,
				       fz_below(&g->rng, 0x11),
				       8 + 8 * fz_below(&g->rng, 7));
			if (st->cmd == fz_iocs[_IOC_NR(st->cmd)].cmd)
				st->cmd += 1 << _IOC_SIZESHIFT;
			break;
		case 2:	/* a known number, the wrong direction */
			st->cmd = fz_iocs[fz_below(&g->rng, 17)].cmd;
			st->cmd &= ~((unsigned long)_IOC_DIRMASK << _IOC_DIRSHIFT);
			st->cmd |= (unsigned long)(fz_pct(&g->rng, 50) ?
					_IOC_READ : _IOC_NONE) << _IOC_DIRSHIFT;
			break;
		default: /* another magic */
			st->cmd = _IOWR(LP_IOC_MAGIC + 1, fz_below(&g->rng, 0x11),
					struct lp_new);
			break;
		}
		return;
	}
	if (r < 46) {
		st->kind = FZ_REOPEN;
		return;
	}

	if (r < 60) {
		st->ioc = 1;			/* CONFIGURE */
		((struct lp_configure *)a)->flavor = fz_below(&g->rng, LP_FLAVOR_COUNT + 2);
		/* Small limits make NEW meet -EDQUOT; one above the range. */
		if (fz_pct(&g->rng, 30))
			((struct lp_configure *)a)->max_gadgets =
				fz_pct(&g->rng, 10) ? LP_MAX_GADGETS + 1 :
						      1 + fz_below(&g->rng, 8);
		/* Half the arenas look up locklessly; one in 20 asks wrong. */
		((struct lp_configure *)a)->registry =
			fz_pct(&g->rng, 5) ? LP_REGISTRY_COUNT :
			fz_pct(&g->rng, 50) ? LP_REGISTRY_RCU : LP_REGISTRY_LOCK;
		fz_reserved(g, &((struct lp_configure *)a)->reserved,
			    sizeof(((struct lp_configure *)a)->reserved));
	} else if (r < 250) {
		struct lp_new *x = a;

		st->ioc = 2;			/* NEW */
		x->parent = fz_pct(&g->rng, 25) ? LP_HANDLE_NONE : fz_pick_handle(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 330) {
		struct lp_get *x = a;

		st->ioc = 3;			/* GET */
		x->handle = fz_pick_handle(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 480) {
		struct lp_put *x = a;

		st->ioc = 4;			/* PUT */
		x->handle = fz_pick_handle(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 540) {
		struct lp_lookup *x = a;

		st->ioc = 5;			/* LOOKUP */
		if (g->nkids && fz_pct(&g->rng, 60)) {
			i = fz_below(&g->rng, g->nkids < 64 ? g->nkids : 64);
			x->parent = g->kids[i].parent;
			x->id = g->kids[i].id;
		} else {
			x->parent = fz_pick_handle(g);
			x->id = fz_pick_id(g);
		}
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 600) {
		struct lp_tryget *x = a;

		st->ioc = 6;			/* TRYGET */
		x->id = fz_pick_id(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 640) {
		struct lp_stat *x = a;

		st->ioc = 7;			/* STAT */
		x->handle = fz_pick_handle(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 680) {
		st->ioc = fz_pct(&g->rng, 50) ? 0 : 8;	/* IDENTIFY, ARENA_STAT */
		if (st->ioc == 0)
			fz_reserved(g, ((struct lp_identify *)a)->reserved,
				    sizeof(((struct lp_identify *)a)->reserved));
		else
			fz_reserved(g, ((struct lp_arena_stat *)a)->reserved,
				    sizeof(((struct lp_arena_stat *)a)->reserved));
	} else if (r < 730) {
		struct lp_rmw *x = a;

		st->ioc = 9;			/* RMW */
		x->op = fz_below(&g->rng, 100) < 90 ? fz_below(&g->rng, LP_OP_READ + 1)
						   : fz_below(&g->rng, LP_OP_COUNT + 2);
		x->value = fz_pick_value(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 800) {
		struct lp_run *x = a;

		st->ioc = 10;			/* RUN */
		/* The gadget ops a third of the time: their errnos need it. */
		x->op = fz_pct(&g->rng, 33) ?
			LP_OP_GET_PUT + fz_below(&g->rng, 3) :
			fz_below(&g->rng, LP_OP_COUNT + 1);
		x->handle = x->op <= LP_OP_READ ? fz_below(&g->rng, 4)
						: fz_pick_handle(g);
		x->iterations = fz_pct(&g->rng, 5) ?
			LP_RUN_MAX_ITERATIONS + 1 : fz_below(&g->rng, 40);
		if (x->op == LP_OP_LOOKUP_PUT || x->op == LP_OP_TRYGET_PUT)
			x->value = fz_pct(&g->rng, 30) ? LP_ID_NEWEST : fz_pick_id(g);
		else if (x->op == LP_OP_TXN_EXTEND)
			x->value = fz_below(&g->rng, 2 * LP_TXN_CREDITS_DEFAULT);
		else
			x->value = fz_pick_value(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 820) {
		struct lp_txn_configure *x = a;

		st->ioc = 11;			/* TXN_CONFIGURE */
		x->flavor = fz_below(&g->rng, LP_TXN_FLAVOR_COUNT + 1);
		x->max_credits = fz_pct(&g->rng, 10) ?
			LP_TXN_CREDITS_MAX + fz_below(&g->rng, 2) :
			fz_below(&g->rng, 2 * LP_TXN_CREDITS_DEFAULT);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 870) {
		struct lp_txn_start *x = a;

		st->ioc = 12;			/* TXN_START */
		x->nblocks = fz_pct(&g->rng, 10) ?
			LP_TXN_CREDITS_MAX + fz_below(&g->rng, 2) :
			fz_below(&g->rng, LP_TXN_CREDITS_DEFAULT / 2);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 910) {
		struct lp_txn_stop *x = a;

		st->ioc = 13;			/* TXN_STOP */
		x->handle = fz_pick_txn_handle(g);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 960) {
		struct lp_txn_extend *x = a;

		st->ioc = 14;			/* TXN_EXTEND */
		x->handle = fz_pick_txn_handle(g);
		x->nblocks = fz_pct(&g->rng, 10) ?
			LP_TXN_CREDITS_MAX + fz_below(&g->rng, 2) :
			fz_below(&g->rng, LP_TXN_CREDITS_DEFAULT / 2);
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else if (r < 985) {
		struct lp_txn_commit *x = a;

		st->ioc = 15;			/* TXN_COMMIT */
		x->timeout_ms = fz_pct(&g->rng, 10) ?
			LP_TXN_TIMEOUT_MAX_MS + 1 : fz_below(&g->rng, 3) / 2;
		fz_reserved(g, x->reserved, sizeof(x->reserved));
	} else {
		st->ioc = 16;			/* TXN_STAT */
		fz_reserved(g, ((struct lp_txn_stat *)a)->reserved,
			    sizeof(((struct lp_txn_stat *)a)->reserved));
	}
	st->cmd = fz_iocs[st->ioc].cmd;
	if (fz_pct(&g->rng, FZ_PAIR_PCT))
		fz_bad_pair(g, st);
	if (g->failing && fz_pct(&g->rng, FZ_FAIL_PCT))
		fz_give_fault(g, st);
}

static void fz_forget(__u32 *v, unsigned int *n, __u32 h)
{
	unsigned int i;

	for (i = 0; i < *n; i++)
		if (v[i] == h) {
			memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(*v));
			(*n)--;
			return;
		}
}

static void fz_add_id(struct fz_gen *g, __u64 id)
{
	g->ids[g->nids++ % 256] = id;
	if (id > g->newest)
		g->newest = id;
}

/* Learn from a step's answer (the same on both sides). */
static void fz_learn(struct fz_gen *g, const struct fz_step *st, int ret,
		     const unsigned char *out)
{
	__u32 h = 0;

	if (st->kind == FZ_FILL || st->kind == FZ_UNFILL)
		return;
	if (st->kind == FZ_REOPEN) {
		g->nlive = 0;
		g->ntxn = 0;
		g->configured = false;
		g->newest = 0;
		return;
	}
	if (ret || st->ptr != FZ_PTR_OK || st->ioc == FZ_IOC_UNKNOWN)
		return;
	switch (st->ioc) {
	case 2:
		h = ((const struct lp_new *)out)->handle;
		g->last_handle = h;
		g->last_id = ((const struct lp_new *)out)->id;
		fz_add_id(g, ((const struct lp_new *)out)->id);
		if (((const struct lp_new *)out)->parent != LP_HANDLE_NONE) {
			g->kids[g->nkids % 64].parent =
				((const struct lp_new *)out)->parent;
			g->kids[g->nkids++ % 64].id =
				((const struct lp_new *)out)->id;
		}
		break;
	case 3:
		h = ((const struct lp_get *)out)->new_handle;
		break;
	case 4:
		h = ((const struct lp_put *)out)->handle;
		fz_forget(g->live, &g->nlive, h);
		g->stale[g->nstale++ % 64] = h;
		return;
	case 5:
		h = ((const struct lp_lookup *)out)->handle;
		break;
	case 6:
		h = ((const struct lp_tryget *)out)->handle;
		break;
	case 10:
		/* NEW_PUT's children: their ids are past newest now */
		if (((const struct lp_run *)out)->op == LP_OP_NEW_PUT)
			g->newest += ((const struct lp_run *)out)->completed;
		return;
	case 12:
		if (g->ntxn < 64)
			g->txn[g->ntxn++] = ((const struct lp_txn_start *)out)->handle;
		return;
	case 13:
		fz_forget(g->txn, &g->ntxn, ((const struct lp_txn_stop *)out)->handle);
		return;
	default:
		return;
	}
	if (g->nlive < LP_MAX_HANDLES)
		g->live[g->nlive++] = h;
}

/* ---- comparing the two sides ------------------------------------------ */

struct fz_cmp {
	bool mask_live;		/* own_arenas: module-wide counts differ */
};

static bool fz_skipped(const struct fz_step *st, size_t off,
		       const struct fz_cmp *how)
{
	const struct fz_ioc *ioc = &fz_iocs[st->ioc];
	int i;

	if (st->kind != FZ_IOCTL)
		return false;
	for (i = 0; i < 2; i++)
		if (ioc->skip[i][1] && off >= ioc->skip[i][0] &&
		    off < ioc->skip[i][0] + ioc->skip[i][1])
			return true;
	if (how->mask_live && st->ioc == 0 &&
	    off >= offsetof(struct lp_identify, live_gadgets) &&
	    off < offsetof(struct lp_identify, txn_flavors))
		return true;
	return false;
}

/* First differing byte of the outputs, or -1. */
static int fz_diff(const struct fz_step *st, const unsigned char *a,
		   const unsigned char *b, const struct fz_cmp *how)
{
	size_t n = st->kind == FZ_IOCTL ? fz_iocs[st->ioc].size : FZ_ARG_MAX;
	size_t i;

	if (n > FZ_ARG_MAX)
		n = FZ_ARG_MAX;
	for (i = 0; i < n; i++)
		if (a[i] != b[i] && !fz_skipped(st, i, how))
			return i;
	return -1;
}

static void fz_describe(char *buf, size_t len, const struct fz_step *st)
{
	static const char * const ptrs[] = { "", " NULL", " unmapped", " read-only" };
	static const char * const kinds[] = { "", "FILL", "UNFILL", "REOPEN" };
	static const char * const fails[] = { "", "C", "Rust", "both" };
	const __u32 *w = (const __u32 *)st->arg;
	int n = 0, i;

	if (st->kind != FZ_IOCTL) {
		snprintf(buf, len, "%s%s", kinds[st->kind],
			 st->kind == FZ_FILL ? " (GET until an error)" : "");
		return;
	}
	n = snprintf(buf, len, "%s cmd=%#lx%s arg(u32)=", fz_iocs[st->ioc].name,
		     st->cmd, ptrs[st->ptr]);
	for (i = 0; i < 8 && n < (int)len; i++)
		n += snprintf(buf + n, len - n, "%s%#x", i ? "," : "", w[i]);
	if (st->fail && n < (int)len)
		snprintf(buf + n, len - n, " fail-nth %u in %s", st->nth,
			 fails[st->fail]);
}

/*
 * A snapshot of one side after a step: what the step may have changed.
 * The STATs of the newest handles; in failing mode, of every handle the
 * generator knows (up to FZ_SNAP_MAX), and IDENTIFY's live counts.
 */
struct fz_snap {
	int ret[3 + FZ_SNAP_MAX];
	struct lp_arena_stat as;
	struct lp_txn_stat ts;
	__u64 live[3];
	struct lp_stat st[FZ_SNAP_MAX];
};

static void fz_snapshot(int fd, const struct fz_gen *g, struct fz_snap *s)
{
	unsigned int i, n = g->failing ? FZ_SNAP_MAX : FZ_SNAP_HANDLES;
	struct lp_identify id;

	memset(s, 0, sizeof(*s));
	s->ret[0] = ioctl(fd, LP_IOC_ARENA_STAT, &s->as) ? -errno : 0;
	s->ret[1] = ioctl(fd, LP_IOC_TXN_STAT, &s->ts) ? -errno : 0;
	if (g->failing) {
		memset(&id, 0, sizeof(id));
		s->ret[2] = ioctl(fd, LP_IOC_IDENTIFY, &id) ? -errno : 0;
		s->live[0] = id.live_gadgets;
		s->live[1] = id.live_handles;
		s->live[2] = id.live_arenas;
	}
	for (i = 0; i < n && i < g->nlive; i++) {
		s->st[i].handle = g->live[g->nlive - 1 - i];
		s->ret[3 + i] = ioctl(fd, LP_IOC_STAT, &s->st[i]) ? -errno : 0;
	}
}

/*
 * Run @n steps on fresh files of both modules; return the index of the
 * first step whose answers differ, or -1. @why gets the difference.
 */
struct fz_fail_count {
	__u64 injected, enomem, got_around;
};

struct fz_run {
	struct fz_side side[2];
	struct fz_gen gen;
	struct fz_cmp how;
	bool verbose;
	__u64 cover[FZ_NR_IOCS][FZ_NR_COLS];
	char why[512];
	/* failing mode */
	bool failing;
	bool counting;		/* a generated stream, not a replay */
	struct fz_fail_count fails[2][FZ_NR_IOCS];
	struct fz_snap before[2], after;
	/*
	 * C and Rust may use up an id each at different points of a NEW
	 * that fails (ids are never reused): from C's id @c on, Rust's are
	 * C's + @d. The generator knows C's ids; the Rust side is given
	 * and compared in its own.
	 */
	struct { __u64 c; __s64 d; } idmap[FZ_IDMAP];
	unsigned int nidmap;
	bool burnt;		/* an injected NEW or RUN since the last NEW */
	__u64 id_shifts;	/* offsets learnt, in generated streams */
};

/* Rust's id for C's @id. */
static __u64 fz_c2r(const struct fz_run *r, __u64 id)
{
	__s64 d = 0;
	unsigned int i;

	for (i = 0; i < r->nidmap && id && r->idmap[i].c <= id; i++)
		d = r->idmap[i].d;
	return id + d;
}

/* The id fields of an argument (in) or answer (out), for the Rust side. */
static void fz_ids_to_rust(const struct fz_run *r, __u8 ioc,
			   unsigned char *arg, bool out)
{
	struct lp_stat *st = (struct lp_stat *)arg;
	struct lp_run *run = (struct lp_run *)arg;

	if (!r->nidmap)
		return;
	switch (ioc) {
	case 2:
		if (out)
			((struct lp_new *)arg)->id =
				fz_c2r(r, ((struct lp_new *)arg)->id);
		break;
	case 5:
		((struct lp_lookup *)arg)->id =
			fz_c2r(r, ((struct lp_lookup *)arg)->id);
		break;
	case 6:
		((struct lp_tryget *)arg)->id =
			fz_c2r(r, ((struct lp_tryget *)arg)->id);
		break;
	case 7:
		if (out) {
			st->id = fz_c2r(r, st->id);
			st->parent_id = fz_c2r(r, st->parent_id);
		}
		break;
	case 10:
		if (run->op == LP_OP_LOOKUP_PUT || run->op == LP_OP_TRYGET_PUT)
			run->value = fz_c2r(r, run->value);
		break;
	}
}

/*
 * A NEW both sides answered: a new offset between their ids, allowed
 * only after an injected failure may have used up an id on one side.
 */
static void fz_learn_ids(struct fz_run *r, const unsigned char *c,
			 const unsigned char *rust)
{
	__u64 cid = ((const struct lp_new *)c)->id;
	__s64 d = ((const struct lp_new *)rust)->id - cid;

	if (d != (__s64)(fz_c2r(r, cid) - cid) && r->burnt &&
	    r->nidmap < FZ_IDMAP) {
		r->idmap[r->nidmap].c = cid;
		r->idmap[r->nidmap++].d = d;
		r->id_shifts += r->counting;
	}
	r->burnt = false;
}

static int fz_open_sides(struct fz_run *r)
{
	int i;

	r->side[0].path = LP_DEV_C;
	r->side[1].path = LP_DEV_RUST;
	for (i = 0; i < 2; i++) {
		r->side[i].nfilled = 0;
		r->side[i].fd = open(r->side[i].path, O_RDWR | O_CLOEXEC);
		if (r->side[i].fd < 0)
			return -errno;
	}
	return 0;
}

static void fz_close_sides(struct fz_run *r)
{
	int i;

	for (i = 0; i < 2; i++)
		if (r->side[i].fd >= 0)
			close(r->side[i].fd);
}

/*
 * Failing mode: run a step whose fail-nth is for side @k (or both). An
 * injected side that answered -ENOMEM must have changed nothing (its
 * snapshot before and after), and the ioctl must list -ENOMEM; then it
 * runs the step again without injection, so that both sides are in
 * lockstep again. An injected side that answered anything else must
 * match the other side (the comparison after this). Returns false, with
 * r->why, on a violation.
 */
static bool fz_exec_failing(struct fz_run *r, const struct fz_step *st,
			    const struct fz_step *sts[2], int ret[2],
			    unsigned char out[2][FZ_ARG_MAX], int i)
{
	static const char * const names[2] = { "C", "Rust" };
	struct fz_fail_count *fc;
	bool on[2], reached[2];
	int k;

	for (k = 0; k < 2; k++) {
		on[k] = st->fail == FZ_FAIL_BOTH || st->fail == FZ_FAIL_C + k;
		if (on[k])
			fz_snapshot(r->side[k].fd, &r->gen, &r->before[k]);
	}
	for (k = 0; k < 2; k++) {
		r->side[k].nth = on[k] ? st->nth : 0;
		r->side[k].reached = false;
		ret[k] = fz_exec(&r->side[k], sts[k], out[k]);
		r->side[k].nth = 0;
		reached[k] = r->side[k].reached;
		if (ret[k] == -1000) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: fail-nth: %s", i, strerror(errno));
			return false;
		}
	}
	for (k = 0; k < 2; k++) {
		if (!on[k])
			continue;
		fc = &r->fails[k][st->ioc];
		if (r->counting) {
			fc->injected += reached[k];
			fc->enomem += reached[k] && ret[k] == -ENOMEM;
			fc->got_around += reached[k] && ret[k] != -ENOMEM;
		}
		if (reached[k] && (st->ioc == 2 || st->ioc == 10))
			r->burnt = true;
		if (ret[k] != -ENOMEM)
			continue;
		if (!(fz_iocs[st->ioc].errnos & E(ENOMEM))) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: %s %s answered -ENOMEM under fail-nth %u, which the header does not list for it",
				 i, names[k], fz_iocs[st->ioc].name, st->nth);
			return false;
		}
		fz_snapshot(r->side[k].fd, &r->gen, &r->after);
		if (memcmp(&r->before[k], &r->after, sizeof(r->after))) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: %s %s answered -ENOMEM under fail-nth %u but changed the arena: ARENA_STAT live %llu->%llu handles %u->%u created %llu->%llu freed %llu->%llu, TXN_STAT updates %u->%u handles %u->%u, live gadgets %llu->%llu handles %llu->%llu",
				 i, names[k], fz_iocs[st->ioc].name, st->nth,
				 (unsigned long long)r->before[k].as.live,
				 (unsigned long long)r->after.as.live,
				 r->before[k].as.handles, r->after.as.handles,
				 (unsigned long long)r->before[k].as.created,
				 (unsigned long long)r->after.as.created,
				 (unsigned long long)r->before[k].as.freed,
				 (unsigned long long)r->after.as.freed,
				 r->before[k].ts.updates, r->after.ts.updates,
				 r->before[k].ts.handles, r->after.ts.handles,
				 (unsigned long long)r->before[k].live[0],
				 (unsigned long long)r->after.live[0],
				 (unsigned long long)r->before[k].live[1],
				 (unsigned long long)r->after.live[1]);
			return false;
		}
		if (r->verbose)
			printf("# step %d: %s: -ENOMEM (fail-nth %u), no change; again without\n",
			       i, names[k], st->nth);
		ret[k] = fz_exec(&r->side[k], sts[k], out[k]);
	}
	return true;
}

static int fz_play(struct fz_run *r, struct fz_step *steps, int n,
		   const __u64 *seed)
{
	const struct fz_step *sts[2];
	unsigned char out[2][FZ_ARG_MAX], cmp[FZ_ARG_MAX];
	struct fz_step rust;
	struct fz_snap snap[2];
	char what[256];
	int i, k, ret[2], off, col;

	memset(&r->gen, 0, sizeof(r->gen));
	r->gen.failing = r->failing;
	r->counting = seed;
	r->nidmap = 0;
	r->burnt = false;
	if (seed) {
		r->gen.rng = *seed;
		r->gen.may_fill = !(*seed % FZ_FILL_EVERY);
		r->gen.fill_txn = *seed / FZ_FILL_EVERY % 2;
	}
	if (fz_open_sides(r)) {
		snprintf(r->why, sizeof(r->why), "open: %s", strerror(errno));
		fz_close_sides(r);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (seed)
			fz_generate(&r->gen, &steps[i]);
		fz_describe(what, sizeof(what), &steps[i]);
		/* The Rust side's argument, in its ids. */
		rust = steps[i];
		if (rust.kind == FZ_IOCTL)
			fz_ids_to_rust(r, rust.ioc, rust.arg, false);
		sts[0] = &steps[i];
		sts[1] = &rust;
		if (r->failing && steps[i].fail) {
			if (!fz_exec_failing(r, &steps[i], sts, ret, out, i))
				goto diverged;
		} else {
			for (k = 0; k < 2; k++)
				ret[k] = fz_exec(&r->side[k], sts[k], out[k]);
		}
		if (steps[i].kind == FZ_REOPEN)
			r->nidmap = 0;
		if (r->verbose)
			printf("# step %d: %s -> C %d, Rust %d\n", i, what,
			       ret[0], ret[1]);
		if (ret[0] != ret[1]) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: %s: C answered %d (%s), Rust %d (%s)",
				 i, what, ret[0], strerror(-ret[0]), ret[1],
				 strerror(-ret[1]));
			goto diverged;
		}
		/* C's answer, in Rust's ids. */
		memcpy(cmp, out[0], sizeof(cmp));
		if (steps[i].kind == FZ_IOCTL && steps[i].ioc == 2 &&
		    !ret[0] && steps[i].ptr == FZ_PTR_OK)
			fz_learn_ids(r, out[0], out[1]);
		if (steps[i].kind == FZ_IOCTL)
			fz_ids_to_rust(r, steps[i].ioc, cmp, true);
		off = fz_diff(&steps[i], cmp, out[1], &r->how);
		if (off >= 0) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: %s: both answered %d, output byte %d differs: C %#x, Rust %#x",
				 i, what, ret[0], off, cmp[off], out[1][off]);
			goto diverged;
		}
		if (seed && steps[i].kind == FZ_IOCTL) {
			col = fz_errno_col(ret[0]);
			if (col >= 0)
				r->cover[steps[i].ioc][col]++;
		}
		fz_learn(&r->gen, &steps[i], ret[0], out[0]);
		for (k = 0; k < 2; k++)
			fz_snapshot(r->side[k].fd, &r->gen, &snap[k]);
		for (k = 0; r->nidmap && k < FZ_SNAP_MAX; k++) {
			snap[0].st[k].id = fz_c2r(r, snap[0].st[k].id);
			snap[0].st[k].parent_id =
				fz_c2r(r, snap[0].st[k].parent_id);
		}
		if (memcmp(&snap[0], &snap[1], sizeof(snap[0]))) {
			snprintf(r->why, sizeof(r->why),
				 "step %d: %s: both answered %d, then the snapshots differ: ARENA_STAT live %llu/%llu handles %u/%u, TXN_STAT updates %u/%u credits %u/%u handles %u/%u, STAT refcount %u/%u children %llu/%llu",
				 i, what, ret[0],
				 (unsigned long long)snap[0].as.live,
				 (unsigned long long)snap[1].as.live,
				 snap[0].as.handles, snap[1].as.handles,
				 snap[0].ts.updates, snap[1].ts.updates,
				 snap[0].ts.credits, snap[1].ts.credits,
				 snap[0].ts.handles, snap[1].ts.handles,
				 snap[0].st[0].refcount, snap[1].st[0].refcount,
				 (unsigned long long)snap[0].st[0].children,
				 (unsigned long long)snap[1].st[0].children);
			goto diverged;
		}
	}
	fz_close_sides(r);
	return -1;
diverged:
	fz_close_sides(r);
	return i;
}

/*
 * Delete steps while the stream still diverges: one at a time from the
 * end (later steps rarely matter), at most FZ_SHRINK_REPLAYS replays.
 * Returns the new length.
 */
static int fz_shrink(struct fz_run *r, struct fz_step *steps, int n)
{
	struct fz_step *trial = calloc(n, sizeof(*trial));
	bool verbose = r->verbose;
	int replays = 0, i, at;

	r->verbose = false;
	for (i = n - 2; i >= 0 && replays < FZ_SHRINK_REPLAYS; i--) {
		memcpy(trial, steps, i * sizeof(*trial));
		memcpy(trial + i, steps + i + 1, (n - i - 1) * sizeof(*trial));
		replays++;
		at = fz_play(r, trial, n - 1, NULL);
		if (at >= 0) {
			n = at + 1;
			memcpy(steps, trial, n * sizeof(*steps));
			if (i > n - 1)
				i = n - 1;
		}
	}
	free(trial);
	r->verbose = verbose;
	return n;
}

static __u64 fz_module_live(const char *path, __u64 out[3])
{
	struct lp_identify id;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	memset(out, 0, 3 * sizeof(*out));
	if (fd < 0)
		return ~0ull;
	memset(&id, 0, sizeof(id));
	if (!ioctl(fd, LP_IOC_IDENTIFY, &id)) {
		out[0] = id.live_gadgets;
		out[1] = id.live_handles;
		out[2] = id.live_arenas;
	}
	close(fd);
	return 0;
}

/*
 * One stream, lockstep: generate and run it, comparing everything; on a
 * divergence, shrink it and describe it. Returns true if both modules
 * agreed.
 */
static bool fz_stream(struct __test_metadata *_metadata, struct fz_run *r,
		      __u64 seed, int nsteps)
{
	struct fz_step *steps = calloc(nsteps, sizeof(*steps));
	char what[256];
	int at, n, i;

	if (!steps) {
		TH_LOG("seed %llu: out of memory", (unsigned long long)seed);
		return false;
	}
	at = fz_play(r, steps, nsteps, &seed);
	if (at < 0) {
		free(steps);
		return true;
	}
	TH_LOG("seed %llu: C and Rust diverge at %s",
	       (unsigned long long)seed, r->why);
	n = fz_shrink(r, steps, at + 1);
	at = fz_play(r, steps, n, NULL);
	TH_LOG("seed %llu: shrunk to %d steps (replay: make fuzz SEED=%llu):",
	       (unsigned long long)seed, n, (unsigned long long)seed);
	for (i = 0; i < n; i++) {
		fz_describe(what, sizeof(what), &steps[i]);
		TH_LOG("  %d: %s", i, what);
	}
	TH_LOG("  diverges at %s", at >= 0 ? r->why : "(no longer diverges)");
	free(steps);
	return false;
}

static void fz_print_coverage(struct __test_metadata *_metadata,
			      __u64 cover[FZ_NR_IOCS][FZ_NR_COLS],
			      int *empty)
{
	char line[512];
	size_t c;
	int i, n;

	*empty = 0;
	n = snprintf(line, sizeof(line), "# %-14s", "ioctl \\ answer");
	for (c = 0; c < FZ_NR_COLS; c++)
		n += snprintf(line + n, sizeof(line) - n, " %9s",
			      fz_errno_names[c]);
	printf("%s\n", line);
	for (i = 0; i < FZ_NR_IOCS; i++) {
		n = snprintf(line, sizeof(line), "# %-14s", fz_iocs[i].name);
		for (c = 0; c < FZ_NR_COLS; c++) {
			bool promised = c ? fz_iocs[i].promised & (1u << c)
					  : i != FZ_IOC_UNKNOWN;
			bool listed = c ? fz_iocs[i].errnos & (1u << c)
					: i != FZ_IOC_UNKNOWN;

			if (cover[i][c])
				n += snprintf(line + n, sizeof(line) - n,
					      " %8llu%s",
					      (unsigned long long)cover[i][c],
					      listed ? " " : "!");
			else
				n += snprintf(line + n, sizeof(line) - n,
					      " %9s", promised ? "MISSING" :
					      listed ? "-" : ".");
			if (promised && !cover[i][c]) {
				(*empty)++;
				TH_LOG("%s never answered %s", fz_iocs[i].name,
				       fz_errno_names[c]);
			}
			if (cover[i][c] && !listed) {
				(*empty)++;
				TH_LOG("%s answered %s, which the header does not list for it",
				       fz_iocs[i].name, fz_errno_names[c]);
			}
		}
		printf("%s\n", line);
	}
	printf("# MISSING: promised, never seen; -: one thread cannot reach it; !: not listed\n");
}

/* ---- the fixture -------------------------------------------------------- */

FIXTURE(fuzz)
{
	__u64 before[2][3];
};

FIXTURE_VARIANT(fuzz)
{
	/* 0 lockstep, 1 own arenas, 2 shared arena, 3 lockstep, failing */
	int mode;
};

FIXTURE_VARIANT_ADD(fuzz, lockstep) { .mode = 0 };
FIXTURE_VARIANT_ADD(fuzz, own_arenas) { .mode = 1 };
FIXTURE_VARIANT_ADD(fuzz, shared_arena) { .mode = 2 };
FIXTURE_VARIANT_ADD(fuzz, failing) { .mode = 3 };

FIXTURE_SETUP(fuzz)
{
	ASSERT_EQ(0, fz_pages());
	fz_module_live(LP_DEV_C, self->before[0]);
	fz_module_live(LP_DEV_RUST, self->before[1]);
}

/* Every stream gave back everything: the module-wide counts are as before. */
FIXTURE_TEARDOWN(fuzz)
{
	__u64 after[3];
	int k;

	for (k = 0; k < 2; k++) {
		fz_module_live(k ? LP_DEV_RUST : LP_DEV_C, after);
		EXPECT_EQ(self->before[k][0], after[0])
			TH_LOG("%s: live gadgets", k ? "Rust" : "C");
		EXPECT_EQ(self->before[k][1], after[1])
			TH_LOG("%s: live handles", k ? "Rust" : "C");
		EXPECT_EQ(self->before[k][2], after[2])
			TH_LOG("%s: live arenas", k ? "Rust" : "C");
	}
}

static int fz_env(const char *name, int def)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : def;
}

static bool fz_full(void)
{
	return !strcmp(sizes.preset, "full");
}

/* The first seed of this run: fixed for make check, new for make soak. */
static __u64 fz_first_seed(void)
{
	return fz_full() ? (__u64)time(NULL) * 1000 : 1;
}

struct fz_thread_arg {
	struct __test_metadata *meta;
	__u64 seed;
	int streams, steps;
	int diverged;
	int shared_fd[2];
	__u64 bad;
	__u64 eagain;
};

static void *fz_own_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct fz_thread_arg *a = t->shared;
	struct fz_run *r = calloc(1, sizeof(*r));
	struct __test_metadata *_metadata = a->meta;
	int s;

	r->how.mask_live = true;
	for (s = 0; s < a->streams; s++) {
		if (__atomic_load_n(&a->diverged, __ATOMIC_RELAXED) >=
		    FZ_MAX_DIVERGED)
			break;
		if (!fz_stream(_metadata, r, a->seed + t->index * 1000003ull + s,
			       a->steps))
			__atomic_fetch_add(&a->diverged, 1, __ATOMIC_RELAXED);
	}
	free(r);
	return NULL;
}

/*
 * Shared arena: both modules' files are shared by all threads, each thread
 * runs its own generator; a step may act on another thread's handles. No
 * REOPEN (it would close the others' file) and no FILL (one thread's table
 * filling makes the others' answers -ENOSPC, which is fine, but the
 * handles it holds would go with the stream).
 */
static void *fz_shared_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct fz_thread_arg *a = t->shared;
	struct fz_gen *g = calloc(1, sizeof(*g));
	unsigned char out[FZ_ARG_MAX];
	struct fz_step st;
	struct fz_side sd[2];
	int s, i, k, ret, col;

	for (k = 0; k < 2; k++) {
		memset(&sd[k], 0, sizeof(sd[k]));
		sd[k].fd = a->shared_fd[k];
	}
	for (s = 0; s < a->streams; s++) {
		memset(g, 0, sizeof(*g));
		g->rng = a->seed + t->index * 1000003ull + s;
		for (i = 0; i < a->steps; i++) {
			fz_generate(g, &st);
			if (st.kind != FZ_IOCTL)
				continue;
			for (k = 0; k < 2; k++) {
				ret = fz_exec(&sd[k], &st, out);
				col = fz_errno_col(ret);
				if (ret == -EAGAIN)
					__atomic_fetch_add(&a->eagain, 1,
							   __ATOMIC_RELAXED);
				if (col < 0 ||
				    (ret && !(fz_iocs[st.ioc].errnos & (1u << col)))) {
					char what[256];

					fz_describe(what, sizeof(what), &st);
					__atomic_fetch_add(&a->bad, 1,
							   __ATOMIC_RELAXED);
					printf("# %s: %s answered %d, not in the contract\n",
					       k ? "Rust" : "C", what, ret);
				}
				/* Only the C side's handles are tracked. */
				if (!k)
					fz_learn(g, &st, ret, out);
			}
		}
	}
	free(g);
	return NULL;
}

/* Per ioctl and module: faults injected, answered -ENOMEM, got around. */
static void fz_print_fails(struct __test_metadata *_metadata,
			   struct fz_fail_count fails[2][FZ_NR_IOCS])
{
	int i;

	printf("# %-14s %28s %28s\n", "fail-nth", "C: injected -ENOMEM around",
	       "Rust: injected -ENOMEM around");
	for (i = 0; i < FZ_NR_IOCS; i++) {
		if (!fails[0][i].injected && !fails[1][i].injected)
			continue;
		printf("# %-14s %10llu %8llu %8llu %10llu %8llu %8llu\n",
		       fz_iocs[i].name,
		       (unsigned long long)fails[0][i].injected,
		       (unsigned long long)fails[0][i].enomem,
		       (unsigned long long)fails[0][i].got_around,
		       (unsigned long long)fails[1][i].injected,
		       (unsigned long long)fails[1][i].enomem,
		       (unsigned long long)fails[1][i].got_around);
	}
	/* Proof that the mode injects at all: NEW always allocates. */
	EXPECT_LT(0, fails[0][2].enomem) TH_LOG("no C NEW answered -ENOMEM");
	EXPECT_LT(0, fails[1][2].enomem)
		TH_LOG("no Rust NEW answered -ENOMEM");
}

TEST_F_TIMEOUT(fuzz, streams, FZ_TIMEOUT)
{
	int streams = fz_env("LP_FUZZ_STREAMS",
			     fz_full() ? FZ_STREAMS_FULL : FZ_STREAMS_QUICK);
	int steps = fz_env("LP_FUZZ_STEPS",
			   fz_full() ? FZ_STEPS_FULL : FZ_STEPS_QUICK);
	const char *replay = getenv("LP_FUZZ_SEED");
	__u64 seed = fz_first_seed();
	struct fz_thread_arg a = { .meta = _metadata };
	int threads = nr_cpus() < FZ_THREADS ? nr_cpus() : FZ_THREADS;
	double t0 = now_s();
	int k;

	if (variant->mode == 3)
		streams = fz_env("LP_FUZZ_STREAMS", fz_full() ?
				 FZ_FAIL_STREAMS_FULL : FZ_FAIL_STREAMS_QUICK);
	if (replay && *replay) {
		if (variant->mode == 1 || variant->mode == 2)
			SKIP(return, "LP_FUZZ_SEED replays one lockstep stream");
		seed = strtoull(replay, NULL, 0);
		streams = 1;
	}
	if (variant->mode == 0 || variant->mode == 3) {
		struct fz_run *r = calloc(1, sizeof(*r));
		int s, diverged = 0, empty;

		ASSERT_NE(NULL, r);
		r->verbose = replay && *replay;
		if (variant->mode == 3) {
			ASSERT_EQ(0, fl_setup())
				TH_LOG("needs FAILSLAB, FAIL_PAGE_ALLOC, debugfs");
			r->failing = true;
			r->side[0].failfd = open("/proc/thread-self/fail-nth",
						 O_RDWR | O_CLOEXEC);
			ASSERT_LE(0, r->side[0].failfd);
			r->side[1].failfd = r->side[0].failfd;
			/* Other seeds than lockstep's: other streams. */
			if (!replay || !*replay)
				seed += 2000000;
		}
		TH_LOG("seeds %llu..%llu, %d steps each",
		       (unsigned long long)seed,
		       (unsigned long long)seed + streams - 1, steps);
		for (s = 0; s < streams && diverged < FZ_MAX_DIVERGED; s++)
			if (!fz_stream(_metadata, r, seed + s, steps))
				diverged++;
		EXPECT_EQ(0, diverged);
		/* Coverage is a claim about whole streams that agreed. */
		if (!diverged && (!replay || !*replay) && variant->mode == 0) {
			fz_print_coverage(_metadata, r->cover, &empty);
			EXPECT_EQ(0, empty);
		}
		if (variant->mode == 3) {
			if (!replay || !*replay)
				fz_print_fails(_metadata, r->fails);
			TH_LOG("ids of C and Rust drifted apart %llu times",
			       (unsigned long long)r->id_shifts);
			close(r->side[0].failfd);
		}
		TH_LOG("%d streams of %d steps in %.1f s, %d diverged",
		       streams, steps, now_s() - t0, diverged);
		free(r);
		return;
	}
	a.seed = seed + 1000000;
	a.steps = steps;
	a.streams = (streams + threads - 1) / threads;
	if (variant->mode == 1) {
		run_threads(threads, fz_own_thread, &a);
		EXPECT_EQ(0, a.diverged);
		TH_LOG("%d threads x %d streams of %d steps in %.1f s, %d diverged",
		       threads, a.streams, steps, now_s() - t0, a.diverged);
		return;
	}
	a.shared_fd[0] = open(LP_DEV_C, O_RDWR | O_CLOEXEC);
	a.shared_fd[1] = open(LP_DEV_RUST, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, a.shared_fd[0]);
	ASSERT_LE(0, a.shared_fd[1]);
	run_threads(threads, fz_shared_thread, &a);
	for (k = 0; k < 2; k++) {
		struct lp_arena_stat as = { 0 };
		struct lp_txn_stat ts = { 0 };

		EXPECT_EQ(0, ioctl(a.shared_fd[k], LP_IOC_ARENA_STAT, &as));
		EXPECT_EQ(as.live, as.created - as.freed)
			TH_LOG("%s: the arena's counts do not add up",
			       k ? "Rust" : "C");
		EXPECT_EQ(0, ioctl(a.shared_fd[k], LP_IOC_TXN_STAT, &ts));
		EXPECT_GE(ts.max_credits, ts.credits)
			TH_LOG("%s: credits granted above the limit",
			       k ? "Rust" : "C");
		EXPECT_EQ(ts.handles, ts.updates)
			TH_LOG("%s: handles running but not held, or held but not running",
			       k ? "Rust" : "C");
		close(a.shared_fd[k]);
	}
	EXPECT_EQ(0, a.bad);
	TH_LOG("%d threads x %d streams of %d steps on one arena in %.1f s",
	       threads, a.streams, steps, now_s() - t0);
	TH_LOG("%llu answers outside the contract, %llu -EAGAIN",
	       (unsigned long long)a.bad, (unsigned long long)a.eagain);
}
