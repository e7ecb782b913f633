// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_bench.c - `make bench`: what each pattern costs, C vs Rust,
 * lock vs lockless, against the bare atomic floor, over 1..N CPUs.
 *
 * A cell is one device (/dev/lockless_c, /dev/lockless_rust) x one row (a
 * RUN op, and for the gadget ops a flavor) x one thread count (1, 2, 4, ...
 * up to the online CPUs, and their number). Its threads are pinned one per
 * CPU, wait on a barrier and then each run one LP_IOC_RUN loop in the
 * kernel. One repetition's ns/op is the threads' summed in-kernel elapsed
 * time over their summed completed ops: what one op costs its caller at
 * that contention. A cell is repeated BENCH_REPS times, C and Rust taking
 * turns, and keeps the median and the spread (min..max).
 *
 * Sharing (the row name says it, there is no column for it): every row
 * but ATOMIC_FLOOR/private puts all threads on one open file, so on one
 * gadget (GET_PUT, GET_PUT_REFCOUNT: all threads get and put the same
 * gadget; LOOKUP_PUT: the same child of the same parent; TRYGET_PUT: the
 * same id) or on the arena's one RMW variable (one cache line). ATOMIC_FLOOR/private gives
 * each thread its own open file, so a counter per thread: the uncontended
 * floor; ATOMIC_FLOOR/shared is the contended one, every thread on one
 * line.
 *
 * Iterations: calibrated per cell (a few short unrecorded runs on each
 * device, which also warm it up) so that one run lasts about BENCH_MS
 * milliseconds on the slower device, however contended the cell is; both
 * devices then run the same number of iterations per thread.
 *
 * Output on stdout: KTAP, one result per cell ("ok" when every RUN of
 * every repetition succeeded, completed all it was asked and took a
 * non-zero time), then, as "# " lines, the table, the ratio lines and the
 * CSV, each section opened by a "# === name ===" line, which
 * scripts/bench.sh extracts. Exit status 1 if a cell was not sane.
 *
 * BENCH_ICOUNT=1 (scripts/qemu.sh sets it when QEMU runs with -icount
 * shift=0, where the guest clock advances one ns per guest instruction):
 * one thread only, BENCH_ICOUNT_ITERATIONS per run, no calibration, and a
 * cell's figure is the fewest "ns" per op of its repetitions, which is the
 * instructions one op executes, RUN loop and helpers included (an
 * interrupt landing in a run only adds to it). The table and CSV then say
 * insns/op; the ratios are Rust/C per row.
 *
 * Environment (or -q): BENCH_QUICK=1, tiny fixed counts and one
 * repetition, for the smoke run of make check: every cell must produce a
 * sane number, nothing is claimed about speed. BENCH_MS=N (default 150),
 * BENCH_REPS=N (default 5).
 *
 * Of its own names, none is lp_ or LP_: those are the contract's and the
 * modules' (the ioctl helper is lpu_call(), see lockless_test.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "lockless_uapi.h"
#include "lockless_names.h"

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

#define BENCH_MAX_THREADS	64
#define BENCH_MAX_COUNTS	8
#define BENCH_MAX_REPS		25
#define BENCH_MAX_ROWS		40
#define BENCH_NR_DEVS		2
/* Defaults of BENCH_MS and BENCH_REPS. */
#define BENCH_MS		150
#define BENCH_REPS		5
/* Calibration: the first probe's iterations per thread, most probes. */
#define BENCH_PROBE		200
#define BENCH_PROBES		4
/* Fewest iterations per thread of a measured run. */
#define BENCH_MIN_ITERATIONS	200
/* BENCH_QUICK: iterations per thread, repetitions. */
#define BENCH_QUICK_ITERATIONS	20
#define BENCH_QUICK_REPS	1
/*
 * BENCH_ICOUNT: iterations per run (a multiple of LP_RUN_CHECK_EVERY, so
 * that every run pays the loop's periodic check alike), repetitions.
 */
#define BENCH_ICOUNT_ITERATIONS	(32 * LP_RUN_CHECK_EVERY)
#define BENCH_ICOUNT_REPS	5

struct bench_dev {
	const char *name;
	const char *path;
	struct lp_identify id;
	int err;
};

static struct bench_dev devs[BENCH_NR_DEVS] = {
	{ .name = "C", .path = LP_DEV_C },
	{ .name = "Rust", .path = LP_DEV_RUST },
};

/**
 * struct bench_row - one op (and flavor) measured on every device
 * @label: printed name, "GET_PUT/LOCKLESS", "MAX_JBD2", ...
 * @op: the enum lp_op of the RUN loop
 * @flavor: the arena's enum lp_flavor, or -1 for the default (RMW, floor);
 *	    for a @txn row, the transaction's enum lp_txn_flavor
 * @private: an open file per thread, else one for all threads
 * @txn: a transaction op (TXN_START_STOP, TXN_EXTEND)
 * @registry: the arena's enum lp_registry (a "+RCU" label: RCU)
 */
struct bench_row {
	char label[40];
	__u32 op;
	int flavor;
	bool private;
	bool txn;
	__u32 registry;
};

/**
 * struct bench_cell - the result of one device x row x thread count
 * @state: CELL_SKIP (not advertised), CELL_OK, CELL_BAD (not sane)
 * @iterations: per thread and run
 * @ns: ns/op per repetition, sorted once measured
 * @fail: failed cmpxchg attempts per op, per repetition
 * @reps: repetitions done
 * @why: what went wrong, when CELL_BAD
 */
struct bench_cell {
	enum { CELL_SKIP, CELL_OK, CELL_BAD } state;
	__u64 iterations;
	double ns[BENCH_MAX_REPS];
	double fail[BENCH_MAX_REPS];
	int reps;
	char why[128];
};

/* One open file set up for a cell: the fds and the RUN's handle and value. */
struct bench_fix {
	int fd[BENCH_MAX_THREADS];
	int nfd;
	__u32 handle;
	__u64 value;
};

struct bench_thread {
	pthread_t tid;
	int cpu;
	int fd;
	pthread_barrier_t *start;
	struct lp_run run;
	int err;
};

static struct bench_row rows[BENCH_MAX_ROWS];
static int nr_rows;
static int counts[BENCH_MAX_COUNTS];
static int nr_counts;
static struct bench_cell cells[BENCH_NR_DEVS][BENCH_MAX_ROWS][BENCH_MAX_COUNTS];
static bool quick;
static bool icount;
static int reps = BENCH_REPS;
static long target_ms = BENCH_MS;

static const __u32 rmw_ops[] = {
	LP_OP_MAX_CMPXCHG, LP_OP_MAX_JBD2, LP_OP_MAX_LOCKED,
	LP_OP_INC_NOT_ZERO_CMPXCHG, LP_OP_INC_NOT_ZERO_TRY_CMPXCHG,
	LP_OP_FETCH_INC_CMPXCHG, LP_OP_SET, LP_OP_READ,
};

/* Ops whose RUN reports failed cmpxchg attempts. */
static bool op_counts_failures(__u32 op)
{
	return op == LP_OP_MAX_CMPXCHG || op == LP_OP_MAX_JBD2 ||
	       op == LP_OP_INC_NOT_ZERO_CMPXCHG ||
	       op == LP_OP_FETCH_INC_CMPXCHG;
}

/* Flavors that keep a child list, the only ones LOOKUP_PUT can run in. */
static bool flavor_has_kids(int flavor)
{
	return flavor != LP_FLAVOR_LOCKED && flavor != LP_FLAVOR_LOCKLESS;
}

static void add_row(__u32 op, int flavor, bool private, const char *suffix)
{
	struct bench_row *r = &rows[nr_rows++];

	r->op = op;
	r->flavor = flavor;
	r->private = private;
	r->txn = op == LP_OP_TXN_START_STOP || op == LP_OP_TXN_EXTEND;
	snprintf(r->label, sizeof(r->label), "%s%s%s", op_names[op],
		 suffix ? "/" : "", suffix ? suffix : "");
}

static void make_rows(void)
{
	size_t i;
	int f;

	for (f = 0; f < LP_FLAVOR_COUNT; f++)
		add_row(LP_OP_GET_PUT, f, false, flavor_names[f]);
	/* C's LOCKLESS on refcount_t, Rust's Arc, beside the atomic_t row. */
	add_row(LP_OP_GET_PUT_REFCOUNT, LP_FLAVOR_LOCKLESS, false,
		flavor_names[LP_FLAVOR_LOCKLESS]);
	for (f = 0; f < LP_FLAVOR_COUNT; f++)
		if (flavor_has_kids(f))
			add_row(LP_OP_LOOKUP_PUT, f, false, flavor_names[f]);
	for (f = 0; f < LP_FLAVOR_COUNT; f++)
		add_row(LP_OP_TRYGET_PUT, f, false, flavor_names[f]);
	/* The same with an RCU registry: no lock on the lookup (not LOCKED). */
	for (f = 0; f < LP_FLAVOR_COUNT; f++) {
		char label[20];

		if (f == LP_FLAVOR_LOCKED)
			continue;
		snprintf(label, sizeof(label), "%s+RCU", flavor_names[f]);
		add_row(LP_OP_TRYGET_PUT, f, false, label);
		rows[nr_rows - 1].registry = LP_REGISTRY_RCU;
	}
	for (i = 0; i < ARRAY_SIZE(rmw_ops); i++)
		add_row(rmw_ops[i], -1, false, NULL);
	add_row(LP_OP_ATOMIC_FLOOR, -1, true, "private");
	add_row(LP_OP_ATOMIC_FLOOR, -1, false, "shared");
	for (f = 0; f < LP_TXN_FLAVOR_COUNT; f++)
		add_row(LP_OP_TXN_START_STOP, f, false, txn_flavor_names[f]);
	for (f = 0; f < LP_TXN_FLAVOR_COUNT; f++)
		add_row(LP_OP_TXN_EXTEND, f, false, txn_flavor_names[f]);
	/* The RUN loop alone: what every row above includes. */
	add_row(LP_OP_EMPTY, -1, true, "loop");
}

/* The flavor column: a gadget flavor, a transaction flavor, or none. */
static const char *row_flavor_name(const struct bench_row *row)
{
	if (row->flavor < 0)
		return "";
	return row->txn ? txn_flavor_names[row->flavor] :
			  flavor_names[row->flavor];
}

static int nr_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > BENCH_MAX_THREADS ? BENCH_MAX_THREADS : (int)n;
}

/*
 * 1, 2, 4, ... up to the online CPUs, and the online CPUs themselves; one
 * thread only with BENCH_ICOUNT (several threads' instructions would add
 * up on icount's one clock).
 */
static void make_counts(void)
{
	int n, cpus = icount ? 1 : nr_cpus();

	for (n = 1; n <= cpus && nr_counts < BENCH_MAX_COUNTS - 1; n *= 2)
		counts[nr_counts++] = n;
	if (counts[nr_counts - 1] != cpus)
		counts[nr_counts++] = cpus;
}

static int lpu_call(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/* Is @row's op (and flavor) advertised by @dev? */
static bool dev_supports(const struct bench_dev *dev,
			 const struct bench_row *row)
{
	if (dev->err || !(dev->id.ops & (1ull << row->op)))
		return false;
	if (row->txn)
		return dev->id.txn_flavors & (1u << row->flavor);
	return row->flavor < 0 || (dev->id.flavors & (1u << row->flavor));
}

static void fix_close(struct bench_fix *fix)
{
	while (fix->nfd > 0)
		close(fix->fd[--fix->nfd]);
}

/*
 * Open what a cell of @row with @n threads runs on; 0 or -errno, with the
 * step that failed in @why.
 */
static int fix_open(const struct bench_dev *dev, const struct bench_row *row,
		    int n, struct bench_fix *fix, char *why, size_t len)
{
	struct lp_configure c = { .flavor = row->flavor,
				  .registry = row->registry };
	struct lp_txn_configure tc = {
		.flavor = row->flavor, .max_credits = LP_TXN_CREDITS_DEFAULT,
	};
	struct lp_new root = { .parent = LP_HANDLE_NONE };
	struct lp_new child = { 0 };
	int i, err, nfd = row->private ? n : 1;

	memset(fix, 0, sizeof(*fix));
	for (i = 0; i < nfd; i++) {
		fix->fd[i] = open(dev->path, O_RDWR);
		if (fix->fd[i] < 0) {
			err = -errno;
			snprintf(why, len, "open %s: %s", dev->path, strerror(-err));
			fix_close(fix);
			return err;
		}
		fix->nfd++;
	}
	if (row->flavor < 0)
		return 0;
	if (row->txn) {
		/*
		 * EXTEND asks for one credit and gives it back at once: with
		 * at most BENCH_MAX_THREADS in flight it is never refused.
		 */
		fix->value = row->op == LP_OP_TXN_EXTEND ? 1 : 0;
		err = lpu_call(fix->fd[0], LP_IOC_TXN_CONFIGURE, &tc);
		if (err) {
			snprintf(why, len, "TXN_CONFIGURE %.31s: %s",
				 row->label, strerror(-err));
			fix_close(fix);
		}
		return err;
	}

	err = lpu_call(fix->fd[0], LP_IOC_CONFIGURE, &c);
	if (!err)
		err = lpu_call(fix->fd[0], LP_IOC_NEW, &root);
	if (!err && row->op == LP_OP_LOOKUP_PUT) {
		child.parent = root.handle;
		err = lpu_call(fix->fd[0], LP_IOC_NEW, &child);
	}
	if (err) {
		snprintf(why, len, "setting up %.31s: %s", row->label,
			 strerror(-err));
		fix_close(fix);
		return err;
	}
	fix->handle = root.handle;
	if (row->op == LP_OP_LOOKUP_PUT)
		fix->value = child.id;
	else if (row->op == LP_OP_TRYGET_PUT)
		fix->value = root.id;
	return 0;
}

/*
 * Before each repetition the RMW variable starts over: at 1 for the
 * increment-if-not-zero ops (they never move a zero), at 0 otherwise. The
 * RUN value is the first MAX operand; iteration i stores value + i.
 */
static int fix_reset(const struct bench_row *row, struct bench_fix *fix)
{
	bool inz = row->op == LP_OP_INC_NOT_ZERO_CMPXCHG ||
		   row->op == LP_OP_INC_NOT_ZERO_TRY_CMPXCHG;
	struct lp_rmw set = { .op = LP_OP_SET, .value = inz ? 1 : 0 };

	if (row->flavor >= 0 || row->op == LP_OP_ATOMIC_FLOOR ||
	    row->op == LP_OP_EMPTY)
		return 0;
	fix->value = 1;
	return lpu_call(fix->fd[0], LP_IOC_RMW, &set);
}

static void *thread_main(void *arg)
{
	struct bench_thread *t = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		t->err = -errno;
	pthread_barrier_wait(t->start);
	if (!t->err)
		t->err = lpu_call(t->fd, LP_IOC_RUN, &t->run);
	return NULL;
}

/**
 * struct bench_sample - what one repetition measured
 * @ns: ns/op, the threads' elapsed time over their completed ops
 * @fail: failed cmpxchg attempts per op
 * @wall: the longest thread's elapsed time, ns
 */
struct bench_sample {
	double ns;
	double fail;
	double wall;
};

/*
 * One repetition: @n threads, one per CPU, start together and each run
 * @iterations of @row's op. Returns true if sane, the numbers in @s.
 */
static bool run_once(const struct bench_row *row, struct bench_fix *fix,
		     int n, __u64 iterations, struct bench_sample *s,
		     char *why, size_t len)
{
	struct bench_thread t[BENCH_MAX_THREADS];
	__u64 elapsed = 0, done = 0, failed = 0, wall = 0;
	pthread_barrier_t start;
	int i, err;

	err = fix_reset(row, fix);
	if (err) {
		snprintf(why, len, "RMW SET before the run: %s", strerror(-err));
		return false;
	}
	memset(t, 0, sizeof(t));
	pthread_barrier_init(&start, NULL, n);
	for (i = 0; i < n; i++) {
		t[i].cpu = i;
		t[i].fd = fix->fd[row->private ? i : 0];
		t[i].start = &start;
		t[i].run.op = row->op;
		t[i].run.handle = fix->handle;
		t[i].run.iterations = iterations;
		t[i].run.value = fix->value;
		err = pthread_create(&t[i].tid, NULL, thread_main, &t[i]);
		if (err) {
			/* The barrier cannot be met: give up loudly. */
			fprintf(stderr, "pthread_create: %s\n", strerror(err));
			exit(2);
		}
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i].tid, NULL);
	pthread_barrier_destroy(&start);

	for (i = 0; i < n; i++) {
		if (t[i].err) {
			snprintf(why, len, "thread %d (CPU %d): %s", i,
				 t[i].cpu, strerror(-t[i].err));
			return false;
		}
		if (t[i].run.completed != iterations ||
		    !t[i].run.elapsed_ns) {
			snprintf(why, len,
				 "thread %d: completed %llu of %llu in %llu ns",
				 i, (unsigned long long)t[i].run.completed,
				 (unsigned long long)iterations,
				 (unsigned long long)t[i].run.elapsed_ns);
			return false;
		}
		elapsed += t[i].run.elapsed_ns;
		done += t[i].run.completed;
		failed += t[i].run.failed;
		if (t[i].run.elapsed_ns > wall)
			wall = t[i].run.elapsed_ns;
	}
	s->ns = (double)elapsed / done;
	s->fail = (double)failed / done;
	s->wall = wall;
	return true;
}

/*
 * Iterations per thread for a cell of @n threads: short runs on every
 * device still in the cell, growing until one lasts a tenth of target_ms,
 * then scaled to target_ms on the slowest device. A failing probe leaves
 * the failure to the measured runs.
 */
static __u64 calibrate(const struct bench_row *row, struct bench_fix *fix,
		       int n)
{
	double want = target_ms * 1e6, slowest = 0;
	__u64 it = BENCH_PROBE;
	struct bench_sample s;
	char why[128];
	int d, probe;

	if (quick)
		return BENCH_QUICK_ITERATIONS / n ? BENCH_QUICK_ITERATIONS / n : 1;
	if (icount)
		return BENCH_ICOUNT_ITERATIONS;
	for (probe = 0; probe < BENCH_PROBES; probe++) {
		slowest = 0;
		for (d = 0; d < BENCH_NR_DEVS; d++) {
			if (fix[d].nfd && run_once(row, &fix[d], n, it, &s, why,
						   sizeof(why)) &&
			    s.wall > slowest)
				slowest = s.wall;
		}
		if (slowest <= 0 || slowest >= want / 10)
			break;
		it = it * (want / 10 / slowest) + 1;
		if (it > LP_RUN_MAX_ITERATIONS)
			it = LP_RUN_MAX_ITERATIONS;
	}
	if (slowest > 0)
		it = it * (want / slowest);
	if (it < BENCH_MIN_ITERATIONS)
		it = BENCH_MIN_ITERATIONS;
	if (it > LP_RUN_MAX_ITERATIONS)
		it = LP_RUN_MAX_ITERATIONS;
	return it;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[BENCH_MAX_REPS];

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double cell_min(const struct bench_cell *c)
{
	double m = c->ns[0];
	int i;

	for (i = 1; i < c->reps; i++)
		if (c->ns[i] < m)
			m = c->ns[i];
	return m;
}

static double cell_max(const struct bench_cell *c)
{
	double m = c->ns[0];
	int i;

	for (i = 1; i < c->reps; i++)
		if (c->ns[i] > m)
			m = c->ns[i];
	return m;
}

/* A cell's figure: its median ns/op, or with BENCH_ICOUNT its fewest. */
static double cell_figure(const struct bench_cell *c)
{
	return icount ? cell_min(c) : median(c->ns, c->reps);
}

/* The figure of a sane cell, or 0. */
static double cell_ns(int d, int r, int k)
{
	const struct bench_cell *c = &cells[d][r][k];

	return c->state == CELL_OK ? cell_figure(c) : 0;
}

/*
 * Measure every device's cell of @row at counts[@k]: the devices take
 * turns repetition by repetition, so that a slow phase of the host hits
 * both alike.
 */
static void measure(int r, int k)
{
	const struct bench_row *row = &rows[r];
	struct bench_fix fix[BENCH_NR_DEVS];
	struct bench_sample s;
	int d, i, n = counts[k];
	__u64 iterations;

	memset(fix, 0, sizeof(fix));
	for (d = 0; d < BENCH_NR_DEVS; d++) {
		struct bench_cell *c = &cells[d][r][k];

		c->state = CELL_SKIP;
		if (!dev_supports(&devs[d], row))
			continue;
		c->state = CELL_OK;
		if (fix_open(&devs[d], row, n, &fix[d], c->why, sizeof(c->why)))
			c->state = CELL_BAD;
	}
	iterations = calibrate(row, fix, n);
	for (i = 0; i < reps; i++) {
		for (d = 0; d < BENCH_NR_DEVS; d++) {
			struct bench_cell *c = &cells[d][r][k];

			c->iterations = iterations;
			if (c->state != CELL_OK)
				continue;
			if (!run_once(row, &fix[d], n, iterations, &s, c->why,
				      sizeof(c->why))) {
				c->state = CELL_BAD;
				continue;
			}
			c->ns[c->reps] = s.ns;
			c->fail[c->reps] = s.fail;
			c->reps++;
		}
	}
	for (d = 0; d < BENCH_NR_DEVS; d++)
		fix_close(&fix[d]);
}

/* KTAP: one result per device x row x count, in the order measured. */
static int report_ktap(int r, int k, int num)
{
	int d;

	for (d = 0; d < BENCH_NR_DEVS; d++) {
		const struct bench_cell *c = &cells[d][r][k];
		char name[96];

		snprintf(name, sizeof(name), "%s %.31s %d thread%s",
			 devs[d].name, rows[r].label, counts[k],
			 counts[k] == 1 ? "" : "s");
		switch (c->state) {
		case CELL_SKIP:
			printf("ok %d %s # SKIP %s %s\n", ++num, name,
			       devs[d].path, devs[d].err ? "cannot be opened" :
			       "does not advertise it");
			break;
		case CELL_OK:
			printf("ok %d %s: %.1f %s\n", ++num, name,
			       cell_figure(c), icount ? "insns/op" : "ns/op");
			break;
		default:
			printf("# %s: %s\n", name, c->why);
			printf("not ok %d %s\n", ++num, name);
			break;
		}
	}
	return num;
}

/* "812.3 [801..830]" (icount: "812.0 [..830.1]") or "-" into @buf. */
static const char *fmt_cell(const struct bench_cell *c, char *buf, size_t len)
{
	if (c->state == CELL_SKIP)
		snprintf(buf, len, "n/a");
	else if (c->state == CELL_BAD)
		snprintf(buf, len, "FAILED");
	else if (icount)
		snprintf(buf, len, "%.1f [..%.1f]", cell_min(c), cell_max(c));
	else
		snprintf(buf, len, "%.1f [%.0f..%.0f]", median(c->ns, c->reps),
			 cell_min(c), cell_max(c));
	return buf;
}

static const char *fmt_fail(const struct bench_row *row,
			    const struct bench_cell *c, char *buf, size_t len)
{
	if (!op_counts_failures(row->op) || c->state != CELL_OK)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.3f", median(c->fail, c->reps));
	return buf;
}

/* @a / @b, or "n/a" when either is missing. */
static const char *fmt_ratio(double a, double b, char *buf, size_t len)
{
	if (a > 0 && b > 0)
		snprintf(buf, len, "%.2f", a / b);
	else
		snprintf(buf, len, "n/a");
	return buf;
}

static void print_table(void)
{
	char a[48], b[48], fa[16], fb[16], q[16];
	int r, k;

	printf("# === table ===\n");
	printf("# All threads share one open file: one gadget, %s\n",
	       "one RMW variable, one floor counter;");
	printf("# except ATOMIC_FLOOR/private: an open file, so a counter, per thread.\n");
	if (icount)
		printf("# insns/op: instructions per op, the fewest of %d %s\n",
		       reps, "repetitions [..the most]; fail/op: failed cmpxchg attempts per op.");
	else
		printf("# ns/op: median of the repetitions [min..max]; fail/op: %s\n",
		       "failed cmpxchg attempts per op.");
	printf("# %-24s %3s | %-24s %7s | %-24s %7s | %6s\n", "row", "thr",
	       icount ? "C insns/op [..max]" : "C ns/op [min..max]", "fail/op",
	       icount ? "Rust insns/op [..max]" : "Rust ns/op [min..max]",
	       "fail/op", "Rust/C");
	for (r = 0; r < nr_rows; r++) {
		for (k = 0; k < nr_counts; k++) {
			const struct bench_cell *c = &cells[0][r][k];
			const struct bench_cell *rs = &cells[1][r][k];

			printf("# %-24s %3d | %-24s %7s | %-24s %7s | %6s\n",
			       rows[r].label, counts[k],
			       fmt_cell(c, a, sizeof(a)),
			       fmt_fail(&rows[r], c, fa, sizeof(fa)),
			       fmt_cell(rs, b, sizeof(b)),
			       fmt_fail(&rows[r], rs, fb, sizeof(fb)),
			       fmt_ratio(cell_ns(1, r, k), cell_ns(0, r, k),
					 q, sizeof(q)));
		}
	}
}

static int find_row(__u32 op, int flavor, bool private)
{
	int r;

	for (r = 0; r < nr_rows; r++)
		if (rows[r].op == op && rows[r].flavor == flavor &&
		    rows[r].private == private)
			return r;
	return -1;
}

/*
 * Device @d's ratio of row @a's cell over row @b's into @buf: the ratio of
 * their figures and, over wall-clock repetitions, its spread: repetition
 * i over repetition i, the least and the greatest, "1.23 [1.10..1.31]".
 */
static const char *fmt_ratio_spread(int d, int a, int ka, int b, int kb,
				    char *buf, size_t len)
{
	const struct bench_cell *x = &cells[d][a][ka], *y = &cells[d][b][kb];
	double lo = 0, hi = 0, q;
	int i, n;

	fmt_ratio(cell_ns(d, a, ka), cell_ns(d, b, kb), buf, len);
	if (icount || x->state != CELL_OK || y->state != CELL_OK)
		return buf;
	n = x->reps < y->reps ? x->reps : y->reps;
	for (i = 0; i < n; i++) {
		q = x->ns[i] / y->ns[i];
		if (!i || q < lo)
			lo = q;
		if (!i || q > hi)
			hi = q;
	}
	if (n > 1)
		snprintf(buf + strlen(buf), len - strlen(buf), " [%.2f..%.2f]",
			 lo, hi);
	return buf;
}

/* One ratio line: "<what>: C x.xx [..]  Rust y.yy [..]", row @a over @b. */
static void print_ratio(const char *what, int a, int ka, int b, int kb)
{
	char x[48], y[48];

	if (a < 0 || b < 0)
		return;
	printf("# %s: C %s  Rust %s\n", what,
	       fmt_ratio_spread(0, a, ka, b, kb, x, sizeof(x)),
	       fmt_ratio_spread(1, a, ka, b, kb, y, sizeof(y)));
}

/* The rest of the jbd2 patch: TXN_ATOMIC over TXN_HANDLE_LOCK, 1 and N threads. */
static void print_txn_ratios(void)
{
	static const __u32 txn_ops[] = {
		LP_OP_TXN_START_STOP, LP_OP_TXN_EXTEND,
	};
	int k, top = nr_counts - 1;
	char what[128];
	size_t i;

	printf("# the jbd2 patch, drain and extend: %s\n",
	       "TXN_ATOMIC over TXN_HANDLE_LOCK, one transaction:");
	for (i = 0; i < ARRAY_SIZE(txn_ops); i++) {
		for (k = 0; k < nr_counts; k += top > 0 ? top : 1) {
			snprintf(what, sizeof(what),
				 "  %s/TXN_ATOMIC / %s/TXN_HANDLE_LOCK @%d",
				 op_names[txn_ops[i]], op_names[txn_ops[i]],
				 counts[k]);
			print_ratio(what,
				    find_row(txn_ops[i], LP_TXN_ATOMIC, false),
				    k,
				    find_row(txn_ops[i], LP_TXN_HANDLE_LOCK, false),
				    k);
		}
	}
}

static void print_ratios(void)
{
	int r, k, f, top = nr_counts - 1, maxn = counts[top];
	int locked = find_row(LP_OP_GET_PUT, LP_FLAVOR_LOCKED, false);
	int lockless = find_row(LP_OP_GET_PUT, LP_FLAVOR_LOCKLESS, false);
	int mlocked = find_row(LP_OP_MAX_LOCKED, -1, false);
	int floor_p = find_row(LP_OP_ATOMIC_FLOOR, -1, true);
	int floor_s = find_row(LP_OP_ATOMIC_FLOOR, -1, false);
	static const __u32 max_ops[] = { LP_OP_MAX_CMPXCHG, LP_OP_MAX_JBD2 };
	char what[128], q[16];
	size_t i;

	printf("# === ratios ===\n");
	printf("# Rust/C, %s, per row at 1..%d threads:\n",
	       icount ? "insns/op" : "median ns/op", maxn);
	for (r = 0; r < nr_rows; r++) {
		printf("#   Rust/C %-24s", rows[r].label);
		for (k = 0; k < nr_counts; k++)
			printf(" %6s @%d", fmt_ratio(cell_ns(1, r, k),
						     cell_ns(0, r, k), q,
						     sizeof(q)), counts[k]);
		printf("\n");
	}
	if (!icount)
		printf("# Spread: [least..greatest] of repetition i over %s, %d repetitions.\n",
		       "repetition i", reps);
	printf("# each flavor's GET_PUT over LOCKED's, one shared gadget, %d threads:\n",
	       maxn);
	for (f = 0; f < LP_FLAVOR_COUNT; f++) {
		if (f == LP_FLAVOR_LOCKED)
			continue;
		snprintf(what, sizeof(what), "  GET_PUT/%s / GET_PUT/LOCKED @%d",
			 flavor_names[f], maxn);
		print_ratio(what, find_row(LP_OP_GET_PUT, f, false), top,
			    locked, top);
	}
	printf("# the jbd2 patch: lockless max over the spinlocked one, one shared variable:\n");
	for (i = 0; i < ARRAY_SIZE(max_ops); i++) {
		for (k = 0; k < nr_counts; k += top > 0 ? top : 1) {
			snprintf(what, sizeof(what), "  %s / MAX_LOCKED @%d",
				 op_names[max_ops[i]], counts[k]);
			print_ratio(what, find_row(max_ops[i], -1, false), k,
				    mlocked, k);
		}
	}
	printf("# the floor: uncontended LOCKLESS GET_PUT (two atomic RMWs)\n");
	printf("# over one atomic_inc on a private line, and the shared line:\n");
	print_ratio("  GET_PUT/LOCKLESS @1 / ATOMIC_FLOOR/private @1", lockless,
		    0, floor_p, 0);
	snprintf(what, sizeof(what),
		 "  ATOMIC_FLOOR/shared @%d / ATOMIC_FLOOR/private @%d", maxn,
		 maxn);
	print_ratio(what, floor_s, top, floor_p, top);
	print_txn_ratios();
}

/* The CSV; with clock "icount", the ns_op_ columns are instructions per op. */
static void print_csv(void)
{
	int d, r, k;

	printf("# === csv ===\n");
	printf("# module,row,op,flavor,arena,threads,iterations,reps,");
	printf("ns_op_median,ns_op_min,ns_op_max,failed_per_op,sane,clock\n");
	for (r = 0; r < nr_rows; r++) {
		for (k = 0; k < nr_counts; k++) {
			for (d = 0; d < BENCH_NR_DEVS; d++) {
				const struct bench_cell *c = &cells[d][r][k];
				bool ok = c->state == CELL_OK;

				if (c->state == CELL_SKIP)
					continue;
				printf("# %s,%s,%s,%s,%s,%d,%llu,%d,%.2f,%.2f,%.2f,%.4f,%d,%s\n",
				       d ? "rust" : "c", rows[r].label,
				       op_names[rows[r].op],
				       row_flavor_name(&rows[r]),
				       rows[r].private ? "private" : "shared",
				       counts[k],
				       (unsigned long long)c->iterations,
				       c->reps, ok ? median(c->ns, c->reps) : 0,
				       ok ? cell_min(c) : 0,
				       ok ? cell_max(c) : 0,
				       ok && op_counts_failures(rows[r].op) ?
				       median(c->fail, c->reps) : 0, ok,
				       icount ? "icount" : "tcg");
			}
		}
	}
	printf("# === end ===\n");
}

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "%s=%s: not a number in %ld..%ld\n", name, s,
			lo, hi);
		exit(2);
	}
	return v;
}

static void identify(struct bench_dev *dev)
{
	int fd = open(dev->path, O_RDWR);

	if (fd < 0) {
		dev->err = -errno;
		return;
	}
	dev->err = lpu_call(fd, LP_IOC_IDENTIFY, &dev->id);
	close(fd);
}

int main(int argc, char **argv)
{
	int d, r, k, num = 0, bad = 0;
	struct utsname u;

	setvbuf(stdout, NULL, _IOLBF, 0);
	quick = env_long("BENCH_QUICK", 0, 0, 1) ||
		(argc > 1 && !strcmp(argv[1], "-q"));
	icount = env_long("BENCH_ICOUNT", 0, 0, 1);
	target_ms = env_long("BENCH_MS", BENCH_MS, 1, 60000);
	reps = env_long("BENCH_REPS", icount ? BENCH_ICOUNT_REPS : BENCH_REPS,
			1, BENCH_MAX_REPS);
	if (quick)
		reps = BENCH_QUICK_REPS;
	make_rows();
	make_counts();

	printf("TAP version 13\n");
	printf("1..%d\n", BENCH_NR_DEVS * nr_rows * nr_counts);
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	printf("# lockless_bench: Linux %s %s, %d CPUs online, threads:",
	       u.release, u.version, nr_cpus());
	for (k = 0; k < nr_counts; k++)
		printf(" %d", counts[k]);
	printf("\n");
	if (quick)
		printf("# BENCH_QUICK: %d iterations per thread, %d repetition: %s\n",
		       BENCH_QUICK_ITERATIONS, reps, "sanity only, no claims");
	else if (icount)
		printf("# BENCH_ICOUNT: %d repetitions per cell of %d iterations, %s\n",
		       reps, BENCH_ICOUNT_ITERATIONS,
		       "guest clock = instructions (QEMU -icount shift=0)");
	else
		printf("# %d repetitions per cell, each run calibrated to ~%ld ms\n",
		       reps, target_ms);
	for (d = 0; d < BENCH_NR_DEVS; d++) {
		identify(&devs[d]);
		if (devs[d].err)
			printf("# %s: %s\n", devs[d].path, strerror(-devs[d].err));
		else
			printf("# %s: %s ABI %u\n", devs[d].path,
			       devs[d].id.name, devs[d].id.abi_version);
	}

	for (r = 0; r < nr_rows; r++) {
		for (k = 0; k < nr_counts; k++) {
			measure(r, k);
			num = report_ktap(r, k, num);
			for (d = 0; d < BENCH_NR_DEVS; d++)
				bad += cells[d][r][k].state == CELL_BAD;
		}
	}
	/* A device that is not there fails, rather than skipping everything. */
	for (d = 0; d < BENCH_NR_DEVS; d++)
		bad += devs[d].err != 0;

	print_table();
	print_ratios();
	print_csv();
	printf("# lockless_bench: %d cells, %d not sane\n", num, bad);
	return bad ? 1 : 0;
}
