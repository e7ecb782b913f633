// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_txn.c - the txn fixture: the transaction (jbd2's start, extend,
 * stop and commit with its drain), one variant per module x transaction
 * flavor (txn.c_handle_lock.* ... txn.rust_atomic.*). A handle's life
 * through TXN_STAT; COMMIT's drain, its timeout, its killable waits and its
 * re-check after a sleep ran out; the transaction's errnos and its full
 * handle table; the races of the drain's wakeup, of EXTEND (never an
 * over-grant), of STAT against a refused EXTEND and of STOP against
 * EXTENDs; credits, overshoot and waits; the windows the transaction's
 * delay points stretch; t_max_wait bounded from below; and every
 * allocation failing.
 *
 * Part of the driver, #included by lockless_test.c.
 */
#include "lockless_test.h"

/* ---- the transaction: jbd2's drain and extend, per txn flavor ---------- */

FIXTURE(txn)
{
	int fd;
	struct lp_identify id;
};

FIXTURE_VARIANT(txn)
{
	const char *path;
	const char *module;
	__u32 flavor;		/* enum lp_txn_flavor */
};

FIXTURE_VARIANT_ADD(txn, c_handle_lock)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.flavor = LP_TXN_HANDLE_LOCK,
};

FIXTURE_VARIANT_ADD(txn, c_atomic)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
	.flavor = LP_TXN_ATOMIC,
};

FIXTURE_VARIANT_ADD(txn, rust_handle_lock)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.flavor = LP_TXN_HANDLE_LOCK,
};

FIXTURE_VARIANT_ADD(txn, rust_atomic)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
	.flavor = LP_TXN_ATOMIC,
};

/* Both modules implement the transaction: a missing flavor or op fails. */
FIXTURE_SETUP(txn)
{
	__u64 ops = 1ull << LP_OP_TXN_START_STOP | 1ull << LP_OP_TXN_EXTEND;

	self->fd = open(variant->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s (is %s.ko loaded?)",
				      variant->path, strerror(errno),
				      variant->module);
	ASSERT_EQ(0, lpu_identify(self->fd, &self->id));
	ASSERT_NE(0, self->id.txn_flavors & 1u << variant->flavor)
		TH_LOG("%s must implement %s", variant->module,
		       txn_flavor_names[variant->flavor]);
	ASSERT_EQ(ops, self->id.ops & ops)
		TH_LOG("%s must implement the TXN RUN ops", variant->module);
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LP_TXN_CREDITS_DEFAULT));
}

FIXTURE_TEARDOWN(txn)
{
	if (self->fd >= 0)
		close(self->fd);
	expect_module_clean(_metadata, variant->path);
}

/* A handle can start, extend and stop, and the transaction commits. */
static int txn_still_works(int fd)
{
	struct lp_txn_extend e;
	struct lp_txn_commit c;
	__u32 h;
	int ret = lpu_txn_start(fd, &h, NULL);

	if (ret)
		return ret;
	ret = lpu_txn_extend(fd, h, 1, &e);
	if (lpu_txn_stop(fd, h) != (ret ? 0 : 1))
		return -1000;
	return ret ? ret : lpu_txn_commit(fd, 1000, &c);
}

TEST_F(txn, handle_life_is_seen_through_txn_stat)
{
	struct lp_txn_extend e;
	struct lp_txn_commit c;
	struct lp_txn_stat s;
	__u32 h, h2;
	__u64 tid;

	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(variant->flavor, s.flavor);
	EXPECT_EQ(LP_TXN_RUNNING, s.state);
	EXPECT_EQ(0, s.tid);
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(LP_TXN_CREDITS_DEFAULT, s.max_credits);
	EXPECT_EQ(0, s.handles);
	EXPECT_EQ(0, s.committed);

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, &tid));
	EXPECT_NE(0, h);
	EXPECT_EQ(0, tid);
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h2, NULL));
	EXPECT_NE(h, h2);
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h, 10, &e));
	EXPECT_EQ(10, e.credits);
	EXPECT_EQ(10, e.granted);
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h2, 5, &e));
	EXPECT_EQ(15, e.credits);
	EXPECT_EQ(5, e.granted);
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h, 1, &e));
	EXPECT_EQ(16, e.credits);
	EXPECT_EQ(11, e.granted);
	/* One credit more than the limit: refused, nothing granted. */
	EXPECT_EQ(-ENOSPC, lpu_txn_extend(self->fd, h,
					  LP_TXN_CREDITS_DEFAULT - 15, &e));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(2, s.updates);
	EXPECT_EQ(16, s.credits);
	EXPECT_EQ(2, s.handles);
	/* Exactly up to the limit: granted. */
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h2, LP_TXN_CREDITS_DEFAULT - 16,
				    &e));
	EXPECT_EQ(LP_TXN_CREDITS_DEFAULT, e.credits);

	EXPECT_EQ(11, lpu_txn_stop(self->fd, h));
	EXPECT_EQ(LP_TXN_CREDITS_DEFAULT - 11, lpu_txn_stop(self->fd, h2));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.handles);

	ASSERT_EQ(0, lpu_txn_commit(self->fd, 1000, &c));
	EXPECT_EQ(0, c.tid);
	EXPECT_EQ(0, c.updates);
	EXPECT_EQ(0, c.credits);
	EXPECT_EQ(0, c.slept);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(1, s.tid);
	EXPECT_EQ(1, s.committed);
	EXPECT_EQ(LP_TXN_RUNNING, s.state);
	EXPECT_EQ(0, s.late_starts);
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, &tid));
	EXPECT_EQ(1, tid);
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
}

struct txn_stopper {
	int fd;
	__u32 handle;
	unsigned int delay_ms;
	int ret;
};

static void *txn_stop_later(void *arg)
{
	struct txn_stopper *s = arg;

	usleep(s->delay_ms * 1000);
	s->ret = lpu_txn_stop(s->fd, s->handle);
	return NULL;
}

/*
 * COMMIT waits for the running handle and wakes on its STOP; with the
 * handle still running when the timeout runs out, it fails -ETIMEDOUT
 * and leaves the transaction as it found it.
 */
TEST_F_TIMEOUT(txn, commit_drains_running_handles_or_times_out,
	       LPU_SLOW_TIMEOUT)
{
	struct txn_stopper st = { .fd = self->fd, .delay_ms = 300 };
	struct lp_txn_commit c;
	struct lp_txn_stat s;
	pthread_t t;
	double t0;
	__u32 h;

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	EXPECT_EQ(-ETIMEDOUT, lpu_txn_commit(self->fd, 0, &c));
	t0 = now_s();
	EXPECT_EQ(-ETIMEDOUT, lpu_txn_commit(self->fd, 100, &c));
	EXPECT_LE(0.09, now_s() - t0);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(LP_TXN_RUNNING, s.state);
	EXPECT_EQ(0, s.tid);
	EXPECT_EQ(0, s.committed);
	EXPECT_EQ(1, s.updates);
	ASSERT_EQ(0, txn_still_works(self->fd) == -ETIMEDOUT ? 0 : -1);

	/* The handle stops 300 ms into a 10 s drain: COMMIT wakes on it. */
	st.handle = h;
	ASSERT_EQ(0, pthread_create(&t, NULL, txn_stop_later, &st));
	t0 = now_s();
	EXPECT_EQ(0, lpu_txn_commit(self->fd, LP_TXN_TIMEOUT_MAX_MS, &c));
	EXPECT_GT(5.0, now_s() - t0) TH_LOG("the STOP did not wake COMMIT");
	pthread_join(t, NULL);
	EXPECT_EQ(0, st.ret);
	EXPECT_EQ(0, c.tid);
	EXPECT_EQ(1, c.updates);
	EXPECT_LE(1, c.slept);
	EXPECT_LE(100000000ull, c.wait_ns);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(1, s.tid);
	EXPECT_EQ(1, s.committed);
	EXPECT_EQ(0, s.updates);
	ASSERT_EQ(0, txn_still_works(self->fd));
}

struct txn_committer {
	int fd;
	int ret;
	struct lp_txn_commit c;
};

static void *txn_commit_thread(void *arg)
{
	struct txn_committer *k = arg;

	k->ret = lpu_txn_commit(k->fd, LP_TXN_TIMEOUT_MAX_MS, &k->c);
	return NULL;
}

/*
 * While COMMIT drains, the transaction is locked: START and EXTEND get
 * -EAGAIN (nothing granted), TXN_CONFIGURE -EBUSY; the last STOP lets
 * the commit end and the next transaction starts handles again.
 */
TEST_F_TIMEOUT(txn, locked_for_commit_refuses_start_and_extend,
	       LPU_SLOW_TIMEOUT)
{
	struct txn_committer k = { .fd = self->fd };
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	pthread_t t;
	__u32 h, h2;
	__u64 tid;
	int i;

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h, 3, &e));
	ASSERT_EQ(0, pthread_create(&t, NULL, txn_commit_thread, &k));
	for (i = 0; i < 5000; i++) {
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		if (s.state == LP_TXN_LOCKED_FOR_COMMIT)
			break;
		usleep(1000);
	}
	ASSERT_EQ(LP_TXN_LOCKED_FOR_COMMIT, s.state) {
		lpu_txn_stop(self->fd, h);
		pthread_join(t, NULL);
	}
	EXPECT_EQ(-EAGAIN, lpu_txn_start(self->fd, &h2, NULL));
	EXPECT_EQ(-EAGAIN, lpu_txn_extend(self->fd, h, 1, &e));
	EXPECT_EQ(-EBUSY, lpu_txn_configure(self->fd, variant->flavor, 10));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(1, s.updates);
	EXPECT_EQ(3, s.credits);
	EXPECT_EQ(1, s.handles);
	EXPECT_EQ(3, lpu_txn_stop(self->fd, h));
	pthread_join(t, NULL);
	EXPECT_EQ(0, k.ret);
	EXPECT_EQ(1, k.c.updates);
	EXPECT_EQ(3, k.c.credits);
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h2, &tid));
	EXPECT_EQ(1, tid);
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h2));
	EXPECT_EQ(0, lpu_txn_configure(self->fd, variant->flavor, 10));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(10, s.max_credits);
	ASSERT_EQ(0, txn_still_works(self->fd));
}

/* ---- COMMIT's waits: killable, and a sleep that ran out re-checked ---- */

/* A SIGKILLed COMMIT must die within this many seconds, not its 10 s. */
#define LPU_TXN_KILL_BOUND	2.0

/* Read /proc/TID/@file of task @tid into @buf; its length, or -1. */
static int read_proc_task(pid_t tid, const char *file, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)tid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The state of task @tid in /proc/TID/stat ('R', 'S', 'D', ...), or 0. */
static char task_state(pid_t tid)
{
	char buf[512], *p;

	if (read_proc_task(tid, "stat", buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Whether task @tid sleeps in state D (TASK_UNINTERRUPTIBLE, TASK_KILLABLE
 * too), off its runqueue. /proc/TID/stat says D from prepare_to_wait() on,
 * before schedule() and while the task is preempted on its way there;
 * /proc/TID/wchan names a function only once the task is dequeued, asleep
 * (get_wchan()), "0" before.
 */
static bool task_asleep(pid_t tid)
{
	char buf[512];

	return task_state(tid) == 'D' &&
	       read_proc_task(tid, "wchan", buf, sizeof(buf)) > 0 &&
	       strcmp(buf, "0") != 0;
}

/*
 * Wait up to 5 s for the transaction to be locked for commit and task
 * @tid to be asleep in state D: its COMMIT sleeps, in the drain or on
 * j_commit_mutex.
 */
static bool txn_commit_asleep(int fd, pid_t tid)
{
	struct lp_txn_stat s;
	int i;

	for (i = 0; i < 5000; i++) {
		if (!lpu_txn_stat(fd, &s) && s.state == LP_TXN_LOCKED_FOR_COMMIT &&
		    task_asleep(tid))
			return true;
		usleep(1000);
	}
	return false;
}

/* A child that commits on @fd, shared with the test, until it is killed. */
static pid_t fork_committer(int fd)
{
	struct lp_txn_commit c;
	pid_t pid = fork();

	if (pid == 0) {
		lpu_txn_commit(fd, LP_TXN_TIMEOUT_MAX_MS, &c);
		_exit(0);	/* COMMIT ended on its own: not killed */
	}
	return pid;
}

/* SIGKILL @pid (> 0) and reap it: the seconds it took to die, or -1. */
static double kill_and_reap(pid_t pid, int *status)
{
	double t0 = now_s();

	if (kill(pid, SIGKILL) || waitpid(pid, status, 0) != pid)
		return -1;
	return now_s() - t0;
}

/*
 * A killed COMMIT leaves the transaction as -ETIMEDOUT does: running, its
 * tid unchanged, nothing committed, the handle still counted; the handle
 * then stops and the next COMMIT commits that tid.
 */
static void expect_txn_unchanged_then_commit(struct __test_metadata *_metadata,
					     int fd, __u32 h,
					     const struct lp_txn_stat *before)
{
	struct lp_txn_commit c;
	struct lp_txn_stat s;

	ASSERT_EQ(0, lpu_txn_stat(fd, &s));
	EXPECT_EQ(LP_TXN_RUNNING, s.state);
	EXPECT_EQ(before->tid, s.tid);
	EXPECT_EQ(before->committed, s.committed);
	EXPECT_EQ(1, s.updates);
	EXPECT_EQ(0, lpu_txn_stop(fd, h));
	ASSERT_EQ(0, lpu_txn_commit(fd, 1000, &c));
	EXPECT_EQ(before->tid, c.tid);
	ASSERT_EQ(0, lpu_txn_stat(fd, &s));
	EXPECT_EQ(before->tid + 1, s.tid);
	EXPECT_EQ(before->committed + 1, s.committed);
}

/*
 * The drain sleeps TASK_KILLABLE: a child sharing the file, asleep in a
 * 10 s drain for a running handle, dies at once of SIGKILL, and its
 * COMMIT changes nothing.
 */
TEST_F_TIMEOUT(txn, sigkill_ends_a_commit_in_its_drain, LPU_SLOW_TIMEOUT)
{
	struct lp_txn_stat before;
	int status = 0;
	double secs;
	pid_t pid;
	__u32 h;

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &before));
	pid = fork_committer(self->fd);
	ASSERT_LT(0, pid);
	ASSERT_TRUE(txn_commit_asleep(self->fd, pid))
		kill_and_reap(pid, &status);
	secs = kill_and_reap(pid, &status);
	ASSERT_LE(0, secs);
	EXPECT_GT(LPU_TXN_KILL_BOUND, secs)
		TH_LOG("COMMIT's drain ignored SIGKILL for %.1f s", secs);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the child was not killed in COMMIT (status %#x)",
		       status);
	expect_txn_unchanged_then_commit(_metadata, self->fd, h, &before);
	TH_LOG("a COMMIT asleep in its drain died %.1f ms after SIGKILL",
	       secs * 1e3);
}

/*
 * j_commit_mutex is taken killably: a second COMMIT, queued behind the
 * first one's 10 s drain, dies at once of SIGKILL while the first still
 * drains; then the first dies too, and neither changed anything.
 */
TEST_F_TIMEOUT(txn, sigkill_ends_a_commit_queued_behind_another,
	       LPU_SLOW_TIMEOUT)
{
	struct lp_txn_stat before, s;
	int status = 0;
	pid_t first, second;
	double secs;
	__u32 h;

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &before));
	first = fork_committer(self->fd);
	ASSERT_LT(0, first);
	ASSERT_TRUE(txn_commit_asleep(self->fd, first))
		kill_and_reap(first, &status);
	second = fork_committer(self->fd);
	ASSERT_LT(0, second)
		kill_and_reap(first, &status);
	ASSERT_TRUE(txn_commit_asleep(self->fd, second)) {
		kill_and_reap(second, &status);
		kill_and_reap(first, &status);
	}
	secs = kill_and_reap(second, &status);
	EXPECT_LE(0, secs);
	EXPECT_GT(LPU_TXN_KILL_BOUND, secs)
		TH_LOG("COMMIT waiting for j_commit_mutex ignored SIGKILL for %.1f s",
		       secs);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the second child was not killed in COMMIT (status %#x)",
		       status);
	TH_LOG("a COMMIT queued on j_commit_mutex died %.1f ms after SIGKILL",
	       secs * 1e3);
	/* It died queued: the first one drains still. */
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s))
		kill_and_reap(first, &status);
	EXPECT_EQ(LP_TXN_LOCKED_FOR_COMMIT, s.state);
	secs = kill_and_reap(first, &status);
	ASSERT_LE(0, secs);
	EXPECT_GT(LPU_TXN_KILL_BOUND, secs)
		TH_LOG("COMMIT's drain ignored SIGKILL for %.1f s", secs);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the first child was not killed in COMMIT (status %#x)",
		       status);
	expect_txn_unchanged_then_commit(_metadata, self->fd, h, &before);
}

/*
 * The re-check: a handle that stops after the drain's sleep ran out, but
 * before the committer runs again, must let the COMMIT succeed. The
 * committer is pinned to one CPU and, once it sleeps in the drain, a
 * SCHED_FIFO thread holds that CPU from before the timer can fire until
 * after the STOP, which comes once the timer has woken the committer
 * (runnable, R, but not running), so the committer runs again only with
 * t_updates already 0 and schedule_timeout() already 0. The CPU's fair
 * server, which would lend the committer a slice of it once starved for
 * ~950 ms, is off meanwhile. Under PREEMPT_RT the timer fires in the
 * CPU's ktimers thread, SCHED_FIFO 1 as the spinner is, which it then
 * could not preempt: the thread is raised to SCHED_FIFO 2 meanwhile, so
 * that the timer still wakes the committer on time. Each attempt checks
 * that the timing held, and is run again (up to 3 times) if not.
 */
#define LPU_TXN_RECHECK_MS	500

struct txn_recheck {
	int fd, cpu;
	pid_t tid;		/* __atomic: the committer's */
	bool pinned;		/* the committer ran on @cpu */
	int stop;		/* __atomic: the spinner may stop */
	double spin_from;	/* the spinner starts to spin then, */
	double spun_at, spun_until;	/* and did from, until */
	bool held_on;		/* the spinner spun until told to stop */
	double t0, t_asleep, t_stop;	/* COMMIT, asleep, STOP (about) */
	bool woken;		/* the committer was runnable before STOP */
	int ret;
	struct lp_txn_commit c;
};

static void sleep_until_s(double t)
{
	struct timespec ts = {
		.tv_sec = (time_t)t,
		.tv_nsec = (long)((t - (time_t)t) * 1e9),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void *txn_recheck_committer(void *arg)
{
	struct txn_recheck *r = arg;

	pin_to_cpu(r->cpu);
	r->pinned = sched_getcpu() == r->cpu;
	__atomic_store_n(&r->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	r->ret = lpu_txn_commit(r->fd, LPU_TXN_RECHECK_MS, &r->c);
	return NULL;
}

static void *txn_recheck_spinner(void *arg)
{
	struct sched_param p = { .sched_priority = 1 };
	struct txn_recheck *r = arg;
	double t;

	pin_to_cpu(r->cpu);
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) ||
	    sched_getcpu() != r->cpu)
		return NULL;
	sleep_until_s(r->spin_from);
	r->spun_at = now_s();
	/* Never asleep, never preempted: the CPU is ours until told. */
	do {
		r->held_on = __atomic_load_n(&r->stop, __ATOMIC_RELAXED);
		t = now_s();
	} while (!r->held_on && t < r->spun_at + 2.0);
	r->spun_until = t;
	return NULL;
}

/*
 * The pid of CPU @cpu's ktimers thread, where PREEMPT_RT expires the
 * timer wheel's timers (SCHED_FIFO 1); 0 without one (no PREEMPT_RT).
 */
static pid_t ktimers_pid(int cpu)
{
	char want[32], path[300], comm[32];
	struct dirent *e;
	pid_t pid = 0;
	ssize_t n;
	DIR *d;
	int fd;

	snprintf(want, sizeof(want), "ktimers/%d\n", cpu);
	d = opendir("/proc");
	if (!d)
		return 0;
	while (!pid && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n <= 0)
			continue;
		comm[n] = '\0';
		if (!strcmp(comm, want))
			pid = atoi(e->d_name);
	}
	closedir(d);
	return pid;
}

/* Set @pid (0: none, nothing to do) to SCHED_FIFO @prio. Return: 0, -1. */
static int fifo_prio(pid_t pid, int prio)
{
	struct sched_param p = { .sched_priority = prio };

	return pid ? sched_setscheduler(pid, SCHED_FIFO, &p) : 0;
}

/* CPU @cpu's fair server runtime (ns) through debugfs: read, or write @ns. */
static long long fair_server_runtime(int cpu, long long ns)
{
	char path[96], buf[32];
	long long v = -1;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path),
		 "/sys/kernel/debug/sched/fair_server/cpu%d/runtime", cpu);
	fd = open(path, (ns < 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ns < 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			v = atoll(buf);
		}
	} else {
		n = snprintf(buf, sizeof(buf), "%lld", ns);
		if (write(fd, buf, n) == n)
			v = ns;
	}
	close(fd);
	return v;
}

/*
 * One attempt: a COMMIT of LPU_TXN_RECHECK_MS waits for the running handle
 * @h; once the committer sleeps, the spinner holds its CPU from at least
 * 50 ms before the earliest the timer can fire (t0 + the timeout - one
 * jiffy); the handle stops once the timer has woken the committer, which
 * cannot run then (R in /proc: nothing else wakes it). Returns true if
 * the timing held (then r->ret and r->c say what COMMIT answered); false
 * if it must be run again. (A STOP at a fixed time after the timeout is
 * not enough: under TCG, jiffies lag the monotonic clock by 100 ms and
 * more when the host runs other guests.)
 */
static bool txn_recheck_once(int fd, int cpu, __u32 h, struct txn_recheck *r,
			     int *stop_ret)
{
	double t0, t_asleep, tmo = LPU_TXN_RECHECK_MS / 1e3;
	pthread_t committer, spinner;
	pid_t tid = 0;
	int i;

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->cpu = cpu;
	t0 = now_s();
	r->t0 = t0;
	if (pthread_create(&committer, NULL, txn_recheck_committer, r)) {
		*stop_ret = lpu_txn_stop(fd, h);
		return false;
	}
	for (i = 0; i < 5000 && !tid; i++) {
		tid = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);
		if (!tid)
			usleep(1000);
	}
	if (!tid || !txn_commit_asleep(fd, tid)) {
		*stop_ret = lpu_txn_stop(fd, h);
		pthread_join(committer, NULL);
		return false;
	}
	t_asleep = now_s();
	r->t_asleep = t_asleep;
	r->spin_from = t_asleep + 0.05 > t0 + tmo / 2 ? t_asleep + 0.05 :
							 t0 + tmo / 2;
	if (pthread_create(&spinner, NULL, txn_recheck_spinner, r)) {
		*stop_ret = lpu_txn_stop(fd, h);
		pthread_join(committer, NULL);
		return false;
	}
	while (!(r->woken = task_state(tid) == 'R') &&
	       now_s() < t_asleep + tmo + 1.0)
		usleep(1000);
	r->t_stop = now_s();
	*stop_ret = lpu_txn_stop(fd, h);
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELAXED);
	pthread_join(spinner, NULL);
	pthread_join(committer, NULL);
	return r->pinned && r->spun_at && r->spun_at < t0 + tmo - 0.05 &&
	       r->woken && r->held_on;
}

TEST_F_TIMEOUT(txn, commit_rechecks_updates_when_its_sleep_runs_out,
	       LPU_SLOW_TIMEOUT)
{
	struct lp_txn_stat before, s;
	struct txn_recheck r;
	long long runtime;
	int attempt, stop_ret, cpu = nr_cpus() - 1;
	bool held = false;
	pid_t ktimers;
	__u32 h;

	ASSERT_LE(2, nr_cpus()) TH_LOG("needs a CPU of its own for the committer");
	pin_to_cpu(0);
	runtime = fair_server_runtime(cpu, -1);
	ASSERT_LE(0, runtime)
		TH_LOG("cannot read CPU %d's fair server in debugfs", cpu);
	ktimers = ktimers_pid(cpu);
	ASSERT_EQ(0, fifo_prio(ktimers, 2))
		TH_LOG("cannot raise CPU %d's ktimers thread", cpu);
	ASSERT_EQ(0, fair_server_runtime(cpu, 0))
		fifo_prio(ktimers, 1);
	for (attempt = 1; attempt <= 3 && !held; attempt++) {
		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL)) {
			fair_server_runtime(cpu, runtime);
			fifo_prio(ktimers, 1);
		}
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &before)) {
			fair_server_runtime(cpu, runtime);
			fifo_prio(ktimers, 1);
		}
		held = txn_recheck_once(self->fd, cpu, h, &r, &stop_ret);
		EXPECT_EQ(0, stop_ret);
		if (!held)
			TH_LOG("try %d: pin %d R %d, ms: asleep %.0f spin %.0f-%.0f STOP %.0f",
			       attempt, r.pinned, r.woken,
			       (r.t_asleep - r.t0) * 1e3,
			       r.spun_at ? (r.spun_at - r.t0) * 1e3 : -1,
			       r.spun_at ? (r.spun_until - r.t0) * 1e3 : -1,
			       (r.t_stop - r.t0) * 1e3);
	}
	EXPECT_EQ(runtime, fair_server_runtime(cpu, runtime));
	EXPECT_EQ(0, fifo_prio(ktimers, 1));
	ASSERT_TRUE(held) TH_LOG("3 attempts, none timed as it must be");
	EXPECT_EQ(0, r.ret)
		TH_LOG("COMMIT answered %s: its sleep ran out, and it missed the STOP",
		       strerror(-r.ret));
	if (r.ret)
		return;
	EXPECT_EQ(1, r.c.slept);
	EXPECT_LE(LPU_TXN_RECHECK_MS * 1000000ull, r.c.wait_ns)
		TH_LOG("COMMIT ended after %.1f ms, before its sleep ran out",
		       r.c.wait_ns / 1e6);
	EXPECT_EQ(before.tid, r.c.tid);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(LP_TXN_RUNNING, s.state);
	EXPECT_EQ(before.tid + 1, s.tid);
	EXPECT_EQ(before.committed + 1, s.committed);
	TH_LOG("attempt %d: COMMIT slept %.1f ms, woke with the handle stopped, and committed",
	       attempt - 1, r.c.wait_ns / 1e6);
}

/* Every TXN error of the contract, and the transaction still works. */
TEST_F(txn, bad_txn_input_gets_the_documented_errno)
{
	struct lp_txn_configure cf;
	struct lp_txn_start sa;
	struct lp_txn_stop so;
	struct lp_txn_extend e;
	struct lp_txn_commit c;
	struct lp_txn_stat s;
	struct lp_run run;
	__u32 h, g;

	/* -EFAULT: bad user pointer, for every TXN ioctl. */
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_CONFIGURE, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_START, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_STOP, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_EXTEND, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_COMMIT, NULL));
	EXPECT_EQ(-EFAULT, lpu_call(self->fd, LP_IOC_TXN_STAT, (void *)8));
	ASSERT_EQ(0, txn_still_works(self->fd));

	/* -EINVAL: a non-zero reserved field, for every TXN ioctl. */
	memset(&cf, 0, sizeof(cf));
	cf.max_credits = 10;
	cf.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_CONFIGURE, &cf));
	memset(&sa, 0, sizeof(sa));
	sa.reserved[3] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_START, &sa));
	memset(&so, 0, sizeof(so));
	so.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_STOP, &so));
	memset(&e, 0, sizeof(e));
	e.nblocks = 1;
	e.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_EXTEND, &e));
	memset(&c, 0, sizeof(c));
	c.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_COMMIT, &c));
	memset(&s, 0, sizeof(s));
	s.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, lpu_call(self->fd, LP_IOC_TXN_STAT, &s));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.handles) TH_LOG("a START with bad input started");
	ASSERT_EQ(0, txn_still_works(self->fd));

	/* -EINVAL: unknown flavor, credits and timeouts out of range. */
	EXPECT_EQ(-EINVAL, lpu_txn_configure(self->fd, LP_TXN_FLAVOR_COUNT, 10));
	EXPECT_EQ(-EINVAL, lpu_txn_configure(self->fd, variant->flavor, 0));
	EXPECT_EQ(-EINVAL, lpu_txn_configure(self->fd, variant->flavor,
					     LP_TXN_CREDITS_MAX + 1));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	EXPECT_EQ(-EINVAL, lpu_txn_extend(self->fd, h, 0, &e));
	EXPECT_EQ(-EINVAL, lpu_txn_extend(self->fd, h, LP_TXN_CREDITS_MAX + 1,
					  &e));
	EXPECT_EQ(-EINVAL, lpu_txn_commit(self->fd, LP_TXN_TIMEOUT_MAX_MS + 1,
					  &c));
	EXPECT_EQ(-EINVAL, lpu_run(self->fd, LP_OP_TXN_EXTEND, 0, 1, 0, &run));
	EXPECT_EQ(-EINVAL, lpu_run(self->fd, LP_OP_TXN_EXTEND, 0, 1,
				   LP_TXN_CREDITS_MAX + 1, &run));
	/* -EBUSY: TXN_CONFIGURE with a handle running. */
	EXPECT_EQ(-EBUSY, lpu_txn_configure(self->fd, variant->flavor, 10));
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(variant->flavor, s.flavor);
	EXPECT_EQ(LP_TXN_CREDITS_DEFAULT, s.max_credits);
	ASSERT_EQ(0, txn_still_works(self->fd));

	/*
	 * -EBADF: handle 0, one never given, one already stopped, and a
	 * gadget handle (the tables are apart, in both directions).
	 */
	EXPECT_EQ(-EBADF, lpu_txn_stop(self->fd, 0));
	EXPECT_EQ(-EBADF, lpu_txn_stop(self->fd, 12345));
	EXPECT_EQ(-EBADF, lpu_txn_extend(self->fd, 12345, 1, &e));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
	EXPECT_EQ(-EBADF, lpu_txn_stop(self->fd, h));
	EXPECT_EQ(-EBADF, lpu_txn_extend(self->fd, h, 1, &e));
	ASSERT_EQ(0, lpu_new(self->fd, LP_HANDLE_NONE, &g, NULL));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	if (g != h) {
		EXPECT_EQ(-EBADF, lpu_txn_stop(self->fd, g));
		EXPECT_EQ(-EBADF, lpu_put(self->fd, h));
	}
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
	EXPECT_EQ(1, lpu_put(self->fd, g));
	ASSERT_EQ(0, txn_still_works(self->fd));

	/* -ENOSPC: over the credit limit (a fresh handle, so it can stop). */
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor, 10));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	EXPECT_EQ(-ENOSPC, lpu_txn_extend(self->fd, h, 11, &e));
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
	ASSERT_EQ(0, txn_still_works(self->fd));
}

/* A full transaction-handle table answers -ENOSPC; close() stops all. */
TEST_F_TIMEOUT(txn, full_txn_handle_table_is_enospc, LPU_SLOW_TIMEOUT)
{
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	__u32 h, last = 0;
	int i;

	for (i = 0; i < LP_MAX_HANDLES; i++) {
		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL)) TH_LOG("start %d", i);
		last = h;
	}
	EXPECT_EQ(-ENOSPC, lpu_txn_start(self->fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_extend(self->fd, last, 7, &e));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(LP_MAX_HANDLES, s.handles);
	EXPECT_EQ(LP_MAX_HANDLES, s.updates);
	EXPECT_EQ(7, s.credits);
	/* One stop frees one slot. */
	EXPECT_EQ(7, lpu_txn_stop(self->fd, last));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	/* The teardown checks that close() stopped and freed them all. */
}

/* A TXN ioctl whose argument cannot be written back changed nothing. */
TEST_F(txn, failed_txn_copy_out_changes_nothing)
{
	long page = sysconf(_SC_PAGESIZE);
	struct lp_txn_stat before, after;
	struct lp_txn_extend e;
	__u32 h;
	char *ro;

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
#define EXPECT_TXN_UNCHANGED(what) do {					\
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &after));			\
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(before)))		\
		TH_LOG("%s changed the transaction", what);		\
} while (0)

	ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_extend(self->fd, h, 4, &e));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &before));
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TXN_START, struct lp_txn_start));
	EXPECT_TXN_UNCHANGED("START");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TXN_EXTEND, struct lp_txn_extend,
				   .handle = h, .nblocks = 2));
	EXPECT_TXN_UNCHANGED("EXTEND");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TXN_STOP, struct lp_txn_stop,
				   .handle = h));
	EXPECT_TXN_UNCHANGED("STOP");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TXN_COMMIT, struct lp_txn_commit,
				   .timeout_ms = 0));
	EXPECT_TXN_UNCHANGED("COMMIT");
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_RUN, struct lp_run,
				   .op = LP_OP_TXN_START_STOP,
				   .iterations = 10));
	EXPECT_EQ(4, lpu_txn_stop(self->fd, h));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &before));
	EXPECT_EQ(-EFAULT, RO_CALL(LP_IOC_TXN_COMMIT, struct lp_txn_commit,
				   .timeout_ms = 0));
	EXPECT_TXN_UNCHANGED("COMMIT of an idle transaction");
	/* CONFIGURE writes nothing back: a read-only argument is no error. */
	EXPECT_EQ(0, RO_CALL(LP_IOC_TXN_CONFIGURE, struct lp_txn_configure,
			     .flavor = variant->flavor, .max_credits = 1));
#undef EXPECT_TXN_UNCHANGED
#undef RO_CALL
	EXPECT_EQ(0, munmap(ro, page));
	ASSERT_EQ(0, txn_still_works(self->fd));
}

/*
 * The drain race: starters start and stop handles (in-kernel loops, whose
 * STARTs race the committer's state change, and threads through the
 * ioctls, whose handles live long enough to be drained) while a committer
 * commits again and again. A lost wakeup leaves a COMMIT asleep with
 * t_updates == 0 until its 10 s timeout; the drain's re-check then
 * commits, 10 s late, which the committer counts as the -ETIMEDOUT it was
 * before the re-check.
 */
struct txn_drain_race {
	int fd;
	int done;		/* __atomic: set by the committer */
	unsigned long long commits, slept, waited, refused, started;
	unsigned long long ioctl_handles;
	int err;		/* first unexpected errno of a starter */
};

static void txn_race_error(struct txn_drain_race *sh, int err)
{
	int zero = 0;

	__atomic_compare_exchange_n(&sh->err, &zero, err, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void *txn_run_starter(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_drain_race *sh = t->shared;
	struct lp_run run;
	int ret;

	while (!__atomic_load_n(&sh->done, __ATOMIC_RELAXED)) {
		ret = lpu_run(sh->fd, LP_OP_TXN_START_STOP, 0, LPU_RACE_CHUNK, 0,
			      &run);
		if (ret) {
			txn_race_error(sh, ret);
			break;
		}
		if (run.completed + run.failed != LPU_RACE_CHUNK)
			txn_race_error(sh, -ERANGE);
		__atomic_add_fetch(&sh->started, run.completed,
				   __ATOMIC_RELAXED);
		__atomic_add_fetch(&sh->refused, run.failed, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * START, then STOP at once: a handle that lives for two syscalls, long
 * enough for a COMMIT to find it running, and a STOP that takes no lock
 * the committer holds, so that it can land between the drain's queueing
 * and its check (an EXTEND in between would wait for the committer's
 * write_lock and stop only after the drain slept, which no broken drain
 * can miss).
 */
static void *txn_ioctl_starter(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_drain_race *sh = t->shared;
	__u32 h;
	int ret;

	while (!__atomic_load_n(&sh->done, __ATOMIC_RELAXED)) {
		ret = lpu_txn_start(sh->fd, &h, NULL);
		if (ret == -EAGAIN) {
			__atomic_add_fetch(&sh->refused, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (ret) {
			txn_race_error(sh, ret);
			break;
		}
		ret = lpu_txn_stop(sh->fd, h);
		if (ret < 0)
			txn_race_error(sh, ret);
		__atomic_add_fetch(&sh->ioctl_handles, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * Each COMMIT waits (up to LPU_TXN_POLLS TXN_STATs) for a handle to run
 * first: with 4 vCPUs on 2 host CPUs, a committer left alone can run its
 * COMMITs in one host time slice while no starter runs, and drain nothing.
 * Even so most handles stop between the TXN_STAT and the COMMIT, so the
 * committer goes on past sizes.txn_commits until a third as many COMMITs
 * found a handle running (each a chance for a broken drain to lose its
 * wakeup), for at most LPU_TXN_RACE_S seconds.
 */
static void *txn_committer(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_drain_race *sh = t->shared;
	double end = now_s() + LPU_TXN_RACE_S;
	struct lp_txn_commit c;
	struct lp_txn_stat s;
	int ret, poll;

	while ((sh->commits < sizes.txn_commits ||
		sh->waited < sizes.txn_commits / 3) && now_s() < end) {
		for (poll = 0; poll < LPU_TXN_POLLS; poll++)
			if (!lpu_txn_stat(sh->fd, &s) && s.updates)
				break;
		ret = lpu_txn_commit(sh->fd, LP_TXN_TIMEOUT_MAX_MS, &c);
		/* No handle here runs for 9 s: only a lost wakeup sleeps so. */
		if (!ret && c.wait_ns >= LP_TXN_TIMEOUT_MAX_MS * 900000ull)
			ret = -ETIMEDOUT;
		if (ret) {
			txn_race_error(sh, ret);
			break;
		}
		sh->commits++;
		sh->slept += c.slept;
		sh->waited += c.updates != 0;
	}
	__atomic_store_n(&sh->done, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Thread 0 commits; odd threads start through ioctls, even ones in RUN. */
static void *txn_drain_thread(void *arg)
{
	struct lpu_thread *t = arg;

	if (t->index == 0)
		return txn_committer(arg);
	if (t->index % 2)
		return txn_ioctl_starter(arg);
	return txn_run_starter(arg);
}

TEST_F_TIMEOUT(txn, drain_never_loses_a_wakeup, LPU_SLOW_TIMEOUT)
{
	struct txn_drain_race sh = { .fd = self->fd };
	struct lp_txn_stat s;

	/* The committer and, on 4 vCPUs, two ioctl and two RUN starters. */
	run_threads(nr_cpus() + 1, txn_drain_thread, &sh);
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_LE(sizes.txn_commits, sh.commits)
		TH_LOG("fewer COMMITs than asked: %s",
		       sh.err ? "one failed (a lost wakeup times out)" :
				"no error, LPU_TXN_RACE_S ran out first");
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(sh.commits, s.committed);
	EXPECT_EQ(sh.commits, s.tid);
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.late_starts)
		TH_LOG("handles were counted after the drain saw zero");
	/* The race happened: commits found handles running and slept. */
	EXPECT_LE(sizes.txn_commits / 3, sh.waited);
	EXPECT_LT(0, sh.slept);
	EXPECT_LT(0, sh.refused);
	TH_LOG("%llu commits: %llu found handles running, slept %llu times",
	       sh.commits, sh.waited, sh.slept);
	TH_LOG("handles: %llu in kernel loops (%llu refused), %llu by ioctl",
	       sh.started, sh.refused, sh.ioctl_handles);
}

/*
 * The extend race: in-kernel loops extend near the limit and give the
 * credits back, while a watcher reads the granted sum (TXN_STAT, under
 * the exclusive j_state_lock) and a committer locks and drains: neither
 * ever sees more granted than the limit.
 */
struct txn_extend_race {
	int fd;
	__u32 nblocks, max;
	int done;		/* __atomic: set by the watcher */
	unsigned long long granted, refused, reads, over, commits;
	__u32 most;
	int err;
};

/*
 * One RUN of LPU_RACE_CHUNK TXN_EXTENDs of @nblocks, its grants and
 * refusals added to the race's counts. Return: 0 or the RUN's -errno.
 */
static int txn_extend_chunk(int fd, __u32 nblocks,
			    unsigned long long *granted,
			    unsigned long long *refused)
{
	struct lp_run run;
	int ret = lpu_run(fd, LP_OP_TXN_EXTEND, 0, LPU_RACE_CHUNK, nblocks,
			 &run);

	if (ret)
		return ret;
	__atomic_add_fetch(granted, run.completed, __ATOMIC_RELAXED);
	__atomic_add_fetch(refused, run.failed, __ATOMIC_RELAXED);
	return 0;
}

static void *txn_extend_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_extend_race *sh = t->shared;
	struct lp_txn_commit c;
	struct lp_txn_stat s;
	unsigned long long i;
	int ret;

	if (t->index == 0) {
		/* The watcher, and every 16th read a COMMIT. */
		for (i = 0; i < sizes.txn_commits * 16; i++) {
			if (i % 16 == 15) {
				ret = lpu_txn_commit(sh->fd,
						     LP_TXN_TIMEOUT_MAX_MS, &c);
				if (ret) {
					sh->err = ret;
					break;
				}
				sh->commits++;
				s.credits = c.credits;
			} else {
				ret = lpu_txn_stat(sh->fd, &s);
				if (ret) {
					sh->err = ret;
					break;
				}
			}
			sh->reads++;
			if (s.credits > sh->max)
				sh->over++;
			if (s.credits > sh->most)
				sh->most = s.credits;
		}
		__atomic_store_n(&sh->done, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	while (!__atomic_load_n(&sh->done, __ATOMIC_RELAXED)) {
		ret = txn_extend_chunk(sh->fd, sh->nblocks, &sh->granted,
				       &sh->refused);
		if (ret) {
			sh->err = ret;
			break;
		}
	}
	return NULL;
}

TEST_F_TIMEOUT(txn, extend_never_over_grants, LPU_SLOW_TIMEOUT)
{
	/* Room for two grants of 4 and not three: every third must wait. */
	struct txn_extend_race sh = { .fd = self->fd, .nblocks = 4, .max = 10 };
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	__u32 h[3];
	unsigned int i, sum = 0;
	int ret;

	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor, sh.max));
	run_threads(nr_cpus() + 1, txn_extend_thread, &sh);
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_EQ(0, sh.over) TH_LOG("%llu of %llu reads saw more than %u granted (most %u)",
				     sh.over, sh.reads, sh.max, sh.most);
	EXPECT_LT(0, sh.granted);
	EXPECT_LT(0, sh.refused);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits) TH_LOG("credits left after every loop ended");
	EXPECT_EQ(0, s.updates);
	TH_LOG("%llu extends granted, %llu refused", sh.granted, sh.refused);
	TH_LOG("%llu reads, %llu commits, most granted seen %u of %u",
	       sh.reads, sh.commits, sh.most, sh.max);

	/* Through the ioctls: grants add up to the counter, to the limit. */
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, lpu_txn_start(self->fd, &h[i], NULL));
	for (i = 0; ; i = (i + 1) % 3) {
		ret = lpu_txn_extend(self->fd, h[i], 3, &e);
		if (ret)
			break;
		sum += 3;
		EXPECT_EQ(sum, e.credits);
	}
	EXPECT_EQ(-ENOSPC, ret);
	EXPECT_EQ(9, sum);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(sum, s.credits);
	for (i = 0; i < 3; i++)
		EXPECT_EQ(3, lpu_txn_stop(self->fd, h[i]));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits);
}

/*
 * TXN_STAT takes j_state_lock exclusive so that it never reads
 * t_outstanding_credits between an EXTEND's add and its undo: jbd2's
 * add_transaction_credits() runs under the shared lock. One handle holds
 * LPU_TXN_STAT_HELD credits; the other threads run RUN TXN_EXTEND loops
 * asking one credit more than the rest of the limit, refused every time,
 * so the true count never moves and a STAT that reads it with an EXTEND
 * half done sees more. Under TCG a STAT seldom lands inside one EXTEND,
 * so the reader counts the STATs that raced a loop (an extender was inside
 * the same RUN call from before the STAT to after it) and reads on until
 * LPU_TXN_STAT_RACING of them did: each of those overlapped ~200 refused
 * EXTENDs.
 */
#define LPU_TXN_STAT_HELD	5
#define LPU_TXN_STAT_RACING	200
/* A stuck extender must not hang the reader: at most this many reads. */
#define LPU_TXN_STAT_READS	20000

struct txn_stat_race {
	int fd;
	__u32 ask;
	int done;			/* __atomic: set by the reader */
	unsigned int seq[64];		/* __atomic: odd inside a RUN call */
	int nthreads;
	unsigned long long reads, racing, wrong, granted, refused;
	__u32 worst;
	int err;
};

static void *txn_stat_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_stat_race *sh = t->shared;
	unsigned int before[64];
	struct lp_txn_stat s;
	int i, ret;

	if (t->index == 0) {
		while (sh->racing < LPU_TXN_STAT_RACING &&
		       sh->reads < LPU_TXN_STAT_READS) {
			for (i = 1; i < sh->nthreads; i++)
				before[i] = __atomic_load_n(&sh->seq[i],
							    __ATOMIC_SEQ_CST);
			ret = lpu_txn_stat(sh->fd, &s);
			if (ret) {
				sh->err = ret;
				break;
			}
			sh->reads++;
			for (i = 1; i < sh->nthreads; i++)
				if (before[i] % 2 &&
				    __atomic_load_n(&sh->seq[i],
						    __ATOMIC_SEQ_CST) == before[i])
					break;
			sh->racing += i < sh->nthreads;
			if (s.credits != LPU_TXN_STAT_HELD) {
				sh->wrong++;
				if (s.credits > sh->worst)
					sh->worst = s.credits;
			}
		}
		__atomic_store_n(&sh->done, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	while (!__atomic_load_n(&sh->done, __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&sh->seq[t->index], 1, __ATOMIC_SEQ_CST);
		ret = txn_extend_chunk(sh->fd, sh->ask, &sh->granted,
				       &sh->refused);
		__atomic_add_fetch(&sh->seq[t->index], 1, __ATOMIC_SEQ_CST);
		if (ret) {
			sh->err = ret;
			break;
		}
	}
	return NULL;
}

TEST_F_TIMEOUT(txn, stat_never_sees_a_refused_extend_in_flight,
	       LPU_SLOW_TIMEOUT)
{
	struct txn_stat_race sh = {
		.fd = self->fd,
		.ask = LP_TXN_CREDITS_DEFAULT - LPU_TXN_STAT_HELD + 1,
	};
	struct lp_txn_stat s;
	__u32 h;

	sh.nthreads = nr_cpus() + 1;
	ASSERT_GE(64, sh.nthreads);
	ASSERT_EQ(0, lpu_txn_start_n(self->fd, LPU_TXN_STAT_HELD, &h));
	run_threads(sh.nthreads, txn_stat_thread, &sh);
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_EQ(0, sh.wrong)
		TH_LOG("%llu of %llu STATs saw an EXTEND half done (%u credits, %u held)",
		       sh.wrong, sh.reads, sh.worst, LPU_TXN_STAT_HELD);
	EXPECT_LE(LPU_TXN_STAT_RACING, sh.racing)
		TH_LOG("%llu of %llu STATs raced the refused EXTENDs",
		       sh.racing, sh.reads);
	EXPECT_EQ(0, sh.granted);
	EXPECT_LT(0, sh.refused);
	TH_LOG("%llu STATs, %llu of them during a loop of refused EXTENDs (%llu refused)",
	       sh.reads, sh.racing, sh.refused);
	EXPECT_EQ(LPU_TXN_STAT_HELD, lpu_txn_stop(self->fd, h));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.updates);
}

/*
 * START takes its credits as EXTEND does (jbd2's add_transaction_credits():
 * add, check, undo), and TXN_STAT reports what each adder found: the sum
 * before its own request, which alone never exceeds the limit.
 */
TEST_F(txn, start_takes_its_credits_within_the_limit)
{
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	struct lp_run run;
	__u32 h, h2, h3;

	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor, 10));
	ASSERT_EQ(0, lpu_txn_start_n(self->fd, 6, &h));
	EXPECT_EQ(-ENOSPC, lpu_txn_start_n(self->fd, 5, &h2));
	/* Above the limit itself: refused before it is added. */
	EXPECT_EQ(-ENOSPC, lpu_txn_start_n(self->fd, 11, &h2));
	EXPECT_EQ(-EINVAL, lpu_txn_start_n(self->fd, LP_TXN_CREDITS_MAX + 1,
					   &h2));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(6, s.credits);
	EXPECT_EQ(1, s.updates);
	EXPECT_EQ(1, s.handles);
	/* The refused START of 5 found 6; the one of 11 added nothing. */
	EXPECT_EQ(6, s.credits_hwm);
	EXPECT_EQ(0, s.overshoots);
	/* No START waited for the transaction. */
	EXPECT_EQ(0, s.max_wait_ns);

	ASSERT_EQ(0, lpu_txn_start_n(self->fd, 4, &h2));
	EXPECT_EQ(-ENOSPC, lpu_txn_extend(self->fd, h, 1, &e));
	/* A START of no credits adds nothing, even at the limit. */
	ASSERT_EQ(0, lpu_txn_start_n(self->fd, 0, &h3));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(10, s.credits);
	EXPECT_EQ(3, s.updates);
	EXPECT_EQ(10, s.credits_hwm);
	EXPECT_EQ(0, s.overshoots);
	EXPECT_EQ(6, lpu_txn_stop(self->fd, h));
	EXPECT_EQ(4, lpu_txn_stop(self->fd, h2));
	EXPECT_EQ(0, lpu_txn_stop(self->fd, h3));

	/* RUN TXN_START_STOP's value is each START's credits. */
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TXN_START_STOP, 0, 100, 10, &run));
	EXPECT_EQ(100, run.completed);
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TXN_START_STOP, 0, 100, 11, &run));
	EXPECT_EQ(0, run.completed);
	EXPECT_EQ(100, run.failed);
	EXPECT_EQ(-EINVAL, lpu_run(self->fd, LP_OP_TXN_START_STOP, 0, 1,
				   LP_TXN_CREDITS_MAX + 1, &run));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.handles);
	EXPECT_EQ(0, s.overshoots);
	/* TXN_CONFIGURE starts the counters again. */
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor, 10));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits_hwm);
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * The overshoot race (the commit message's argument for dropping
 * t_handle_lock from jbd2_journal_extend()): one handle holds every credit
 * of the transaction, and a loop per CPU asks for one more, which is
 * always refused. TXN_STAT counts the adders that found the sum above the
 * limit, i.e. another's refused request in flight. With only EXTENDs
 * adding, TXN_HANDLE_LOCK's t_handle_lock serializes the add-check-undo
 * and nobody ever overshoots; TXN_ATOMIC overshoots. With STARTs adding
 * too, which never took t_handle_lock, both flavors overshoot.
 */
#define LPU_TXN_FULL		8
/* Rounds of loops run while a wanted overshoot is unseen. */
#define LPU_OVERSHOOT_ROUNDS	20

struct txn_overshoot {
	int fd;
	bool starts;		/* odd loops START instead of EXTEND */
	int err;		/* __atomic */
	unsigned long long granted, refused;
};

static void *txn_overshoot_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_overshoot *sh = t->shared;
	__u32 op = sh->starts && (t->index & 1) ? LP_OP_TXN_START_STOP :
						  LP_OP_TXN_EXTEND;
	struct lp_run run;
	int ret;

	ret = lpu_run(sh->fd, op, 0, sizes.rmw_run, 1, &run);
	if (ret) {
		__atomic_store_n(&sh->err, ret, __ATOMIC_RELAXED);
		return NULL;
	}
	__atomic_add_fetch(&sh->granted, run.completed, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sh->refused, run.failed, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * Fill the transaction, then run rounds of one loop per CPU, until an
 * overshoot is seen if @want, else one round; leaves TXN_STAT in @s.
 */
static void txn_overshoot_rounds(struct __test_metadata *_metadata, int fd,
				 __u32 flavor, bool starts, bool want,
				 struct lp_txn_stat *s)
{
	struct txn_overshoot sh = { .fd = fd, .starts = starts };
	int rounds = 0, n = nr_cpus();
	struct lp_txn_extend e;
	__u32 h;

	ASSERT_LE(2, n);
	ASSERT_EQ(0, lpu_txn_configure(fd, flavor, LPU_TXN_FULL));
	ASSERT_EQ(0, lpu_txn_start(fd, &h, NULL));
	ASSERT_EQ(0, lpu_txn_extend(fd, h, LPU_TXN_FULL, &e));
	do {
		run_threads(n, txn_overshoot_thread, &sh);
		ASSERT_EQ(0, sh.err) TH_LOG("%s", strerror(-sh.err));
		ASSERT_EQ(0, lpu_txn_stat(fd, s));
		rounds++;
	} while (want && !s->overshoots && rounds < LPU_OVERSHOOT_ROUNDS);
	/* The transaction was full throughout: nothing was granted. */
	EXPECT_EQ(0, sh.granted);
	EXPECT_EQ(rounds * n * sizes.rmw_run, sh.refused);
	EXPECT_EQ(LPU_TXN_FULL, s->credits);
	/*
	 * Every adder found at least the holder's credits, and at most one
	 * request in flight per other loop.
	 */
	EXPECT_LE(LPU_TXN_FULL, s->credits_hwm);
	EXPECT_GE(LPU_TXN_FULL + n - 1, s->credits_hwm);
	EXPECT_EQ(s->overshoots != 0, s->credits_hwm > LPU_TXN_FULL);
	EXPECT_EQ(LPU_TXN_FULL, lpu_txn_stop(fd, h));
	TH_LOG("%s%s: %llu overshoots in %d round(s) of %d loops, most found %u of %u",
	       txn_flavor_names[flavor], starts ? ", STARTs and EXTENDs" : "",
	       (unsigned long long)s->overshoots, rounds, n, s->credits_hwm,
	       LPU_TXN_FULL);
}

TEST_F_TIMEOUT(txn, only_extends_overshoot_in_txn_atomic_alone,
	       LPU_SLOW_TIMEOUT)
{
	bool atomic = variant->flavor == LP_TXN_ATOMIC;
	struct lp_txn_stat s;

	txn_overshoot_rounds(_metadata, self->fd, variant->flavor, false,
			     atomic, &s);
	if (atomic) {
		EXPECT_LT(0, s.overshoots)
			TH_LOG("TXN_ATOMIC's EXTENDs never overlapped");
	} else {
		EXPECT_EQ(0, s.overshoots)
			TH_LOG("t_handle_lock did not serialize the EXTENDs");
	}
	EXPECT_EQ(0, txn_still_works(self->fd));
}

TEST_F_TIMEOUT(txn, starts_overshoot_in_both_flavors, LPU_SLOW_TIMEOUT)
{
	struct lp_txn_stat s;

	txn_overshoot_rounds(_metadata, self->fd, variant->flavor, true, true,
			     &s);
	EXPECT_LT(0, s.overshoots)
		TH_LOG("no adder ever found another's request in flight");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * update_t_max_wait(), in START: a RUN TXN_START_STOP loop refused while a
 * COMMIT drains keeps its first START's time, as jbd2's retry loop does,
 * and the START that joins the next transaction records how long it
 * waited for it to open: at least the time from its first refusal to the
 * commit, at most the loop's whole run. As in jbd2, a START that read its
 * clock just before the commit opened the next transaction records a
 * wait without being refused: at most its own call.
 */
struct txn_wait {
	int fd;
	int refused_all;	/* __atomic: a RUN call was refused throughout */
	int err;
	__u64 spanning_failed;	/* failed of the call that started again */
	double t_first, t_last, t_done;	/* first call, last call, its end */
};

static void *txn_wait_committer(void *arg)
{
	struct txn_wait *sh = arg;
	struct lp_txn_commit c;
	int ret = lpu_txn_commit(sh->fd, LP_TXN_TIMEOUT_MAX_MS, &c);

	if (ret)
		__atomic_store_n(&sh->err, ret, __ATOMIC_RELAXED);
	return NULL;
}

static void *txn_wait_starter(void *arg)
{
	struct txn_wait *sh = arg;
	struct lp_run run;
	int ret;

	sh->t_first = now_s();
	for (;;) {
		sh->t_last = now_s();
		ret = lpu_run(sh->fd, LP_OP_TXN_START_STOP, 0, 1000, 0, &run);
		if (ret) {
			__atomic_store_n(&sh->err, ret, __ATOMIC_RELAXED);
			break;
		}
		if (run.completed) {
			sh->spanning_failed = run.failed;
			break;
		}
		__atomic_store_n(&sh->refused_all, 1, __ATOMIC_RELEASE);
	}
	sh->t_done = now_s();
	return NULL;
}

TEST_F_TIMEOUT(txn, start_records_its_wait_for_the_next_transaction,
	       LPU_SLOW_TIMEOUT)
{
	struct txn_wait sh = { .fd = self->fd };
	pthread_t committer, starter;
	struct lp_txn_stat s;
	int tries;
	__u32 h;

	for (tries = 0; tries < 3; tries++) {
		memset(&sh, 0, sizeof(sh));
		sh.fd = self->fd;
		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
		ASSERT_EQ(0, pthread_create(&committer, NULL,
					    txn_wait_committer, &sh));
		do {
			ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		} while (s.state != LP_TXN_LOCKED_FOR_COMMIT);
		ASSERT_EQ(0, pthread_create(&starter, NULL, txn_wait_starter,
					    &sh));
		while (!__atomic_load_n(&sh.refused_all, __ATOMIC_ACQUIRE) &&
		       !__atomic_load_n(&sh.err, __ATOMIC_RELAXED))
			usleep(1000);
		usleep(20000);
		EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
		pthread_join(committer, NULL);
		pthread_join(starter, NULL);
		ASSERT_EQ(0, sh.err) TH_LOG("%s", strerror(-sh.err));
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		/* The call in which the commit ended started again. */
		if (sh.spanning_failed)
			break;
		/*
		 * The commit ended between two calls, or inside the last one
		 * after it read its clock and before its START's read_lock():
		 * that START was not refused, and waited at most that call.
		 */
		EXPECT_GE((sh.t_done - sh.t_last) * 1e9,
			  (double)s.max_wait_ns);
	}
	ASSERT_NE(0, sh.spanning_failed)
		TH_LOG("the commit never ended inside a RUN call");
	EXPECT_EQ(tries + 1, s.tid);
	EXPECT_LT(0, s.max_wait_ns);
	EXPECT_GE((sh.t_done - sh.t_first) * 1e9, (double)s.max_wait_ns);
	TH_LOG("%s: a START waited %.3f ms for the next transaction",
	       txn_flavor_names[variant->flavor], s.max_wait_ns / 1e6);
	/* The next commit opens a transaction nobody waited for. */
	EXPECT_EQ(0, txn_still_works(self->fd));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.max_wait_ns);
}

/*
 * ioctl EXTENDs of different handles at once, each thread extending a
 * handle of its own (jbd2's handle_t belongs to one task): one credit at
 * a time until the first -ENOSPC. Each handle's grants add up in its own
 * answers, and all of them to exactly the limit, in both flavors: with
 * one-credit requests and nothing given back, a request is refused only
 * once the grants added before it reach the limit (a refusal needs a sum
 * above it, and the first refusal cannot owe that to another refused
 * request in flight).
 */
#define LPU_TXN_OWN_LIMIT	4000

struct txn_own_race {
	int fd;
	__u32 *handle;		/* per thread: its handle */
	__u32 *granted;		/* per thread: its handle's credits */
	unsigned long long over;	/* grants that saw more than the limit */
	unsigned long long wrong;	/* granted answers off the thread's sum */
	int err;		/* first unexpected errno */
};

static void txn_first_error(int *slot, int err)
{
	int zero = 0;

	__atomic_compare_exchange_n(slot, &zero, err, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void *txn_own_extender(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_own_race *sh = t->shared;
	struct lp_txn_extend e;
	__u32 mine = 0;
	int ret;

	ret = lpu_txn_start(sh->fd, &sh->handle[t->index], NULL);
	if (ret) {
		txn_first_error(&sh->err, ret);
		return NULL;
	}
	while (!(ret = lpu_txn_extend(sh->fd, sh->handle[t->index], 1, &e))) {
		mine++;
		if (e.credits > LPU_TXN_OWN_LIMIT)
			__atomic_add_fetch(&sh->over, 1, __ATOMIC_RELAXED);
		if (e.granted != mine)
			__atomic_add_fetch(&sh->wrong, 1, __ATOMIC_RELAXED);
	}
	if (ret != -ENOSPC)
		txn_first_error(&sh->err, ret);
	sh->granted[t->index] = mine;
	return NULL;
}

TEST_F_TIMEOUT(txn, ioctl_extends_of_own_handles_fill_the_limit,
	       LPU_SLOW_TIMEOUT)
{
	int i, n = nr_cpus() < 2 ? 2 : nr_cpus();
	struct txn_own_race sh = { .fd = self->fd };
	struct lp_txn_stat s;
	__u32 sum = 0;
	double t0;

	sh.handle = calloc(n, sizeof(*sh.handle));
	sh.granted = calloc(n, sizeof(*sh.granted));
	ASSERT_NE(NULL, sh.handle);
	ASSERT_NE(NULL, sh.granted);
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LPU_TXN_OWN_LIMIT));
	t0 = now_s();
	run_threads(n, txn_own_extender, &sh);
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_EQ(0, sh.over);
	EXPECT_EQ(0, sh.wrong) TH_LOG("a handle's granted is not its grants' sum");
	for (i = 0; i < n; i++)
		sum += sh.granted[i];
	EXPECT_EQ(LPU_TXN_OWN_LIMIT, sum)
		TH_LOG("a request was refused before the limit was granted");
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(sum, s.credits);
	EXPECT_EQ(n, s.updates);
	EXPECT_EQ(n, s.handles);
	for (i = 0; i < n; i++)
		EXPECT_EQ(sh.granted[i], lpu_txn_stop(self->fd, sh.handle[i]));
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.updates);
	TH_LOG("%d threads granted %u credits in %.2f s", n, sum, now_s() - t0);
	for (i = 0; i < n; i++)
		TH_LOG("thread %d: %u", i, sh.granted[i]);
	free(sh.handle);
	free(sh.granted);
}

/*
 * TXN_ATOMIC's optimistic add, through the ioctls: thread 0's handle asks
 * for one credit at a time, far below the limit, while the other threads
 * ask for the whole limit on handles of their own, which, with a credit
 * already granted, is always refused. Only such a request's add in flight
 * can refuse a one-credit request, so in TXN_ATOMIC a refused one-credit
 * request shows EXTENDs of different handles running at once, as jbd2's
 * do under the shared j_state_lock (EXTENDs serialized by a table-wide
 * lock never show one); in TXN_HANDLE_LOCK, t_handle_lock makes each
 * add-check-undo one step, and none is ever refused.
 */
/*
 * The window is an add and its undo, a few instructions apart. Where the
 * module has delay points, every EXTEND stalls LPU_TXN_OVERSHOOT_US
 * between them (LP_DELAY_TXN_EXTEND_ADDED), so three whole-limit threads
 * keep a request in flight nearly all the time: the ATOMIC run needs
 * LPU_TXN_OVERSHOOTS refusals among at most LPU_TXN_OVERSHOOT_EXTENDS
 * one-credit EXTENDs, a bound in EXTENDs, as fast as the kernel is (an
 * rt kernel's EXTEND costs some 20 times a debug kernel's). Without delay
 * points the window is TCG's to hit: at most LPU_TXN_OVERSHOOT_S, which on
 * a debug kernel saw 6 to 8 refusals a second (4 vCPUs on 2 host cores).
 */
#define LPU_TXN_OVERSHOOTS		3
#define LPU_TXN_OVERSHOOT_US		200
#define LPU_TXN_OVERSHOOT_EXTENDS	1000
#define LPU_TXN_OVERSHOOT_S		5.0
/* The HANDLE_LOCK run's size, without and with the stall. */
#define LPU_TXN_LOCKED_EXTENDS		3000
#define LPU_TXN_LOCKED_STALLED		300

/* Stall this arena's threads at @points for @usecs each; 0, 0: none. */
static int txn_stall(int fd, __u32 points, __u32 usecs)
{
	struct lp_delay d = { .points = points, .usecs = usecs };

	return lpu_call(fd, LP_IOC_DELAY, &d);
}

/* This build of the module cannot stall at @points (not a debug kernel). */
static bool txn_lacks_points(const struct lp_identify *id, __u32 points)
{
	return (id->delay_points & points) != points;
}

struct txn_overshoot_race {
	int fd;
	__u32 flavor;
	bool stalled;		/* at LP_DELAY_TXN_EXTEND_ADDED */
	int done;		/* __atomic: set by thread 0 */
	__u32 small;		/* thread 0's handle */
	unsigned long long granted, refused, whole_refused;
	int err;
};

/* Thread 0 goes on with its one-credit EXTENDs. */
static bool txn_overshoot_more(const struct txn_overshoot_race *sh,
			       double end)
{
	unsigned long long tried = sh->granted + sh->refused;

	if (sh->flavor != LP_TXN_ATOMIC)
		return tried < (sh->stalled ? LPU_TXN_LOCKED_STALLED :
				LPU_TXN_LOCKED_EXTENDS);
	if (sh->refused >= LPU_TXN_OVERSHOOTS)
		return false;
	return sh->stalled ? tried < LPU_TXN_OVERSHOOT_EXTENDS : now_s() < end;
}

static void *txn_ioctl_overshoot_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_overshoot_race *sh = t->shared;
	double end = now_s() + LPU_TXN_OVERSHOOT_S;
	struct lp_txn_extend e;
	__u32 h;
	int ret;

	if (t->index == 0) {
		while (txn_overshoot_more(sh, end)) {
			ret = lpu_txn_extend(sh->fd, sh->small, 1, &e);
			if (!ret) {
				sh->granted++;
			} else if (ret == -ENOSPC) {
				sh->refused++;
			} else {
				txn_first_error(&sh->err, ret);
				break;
			}
		}
		__atomic_store_n(&sh->done, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	ret = lpu_txn_start(sh->fd, &h, NULL);
	if (ret) {
		txn_first_error(&sh->err, ret);
		return NULL;
	}
	while (!__atomic_load_n(&sh->done, __ATOMIC_RELAXED)) {
		ret = lpu_txn_extend(sh->fd, h, LP_TXN_CREDITS_MAX, &e);
		if (ret != -ENOSPC) {
			txn_first_error(&sh->err, ret ? ret : -EOVERFLOW);
			break;
		}
		__atomic_add_fetch(&sh->whole_refused, 1, __ATOMIC_RELAXED);
	}
	ret = lpu_txn_stop(sh->fd, h);
	if (ret)
		txn_first_error(&sh->err, ret < 0 ? ret : -EOVERFLOW);
	return NULL;
}

TEST_F_TIMEOUT(txn, ioctl_extends_overshoot_only_in_txn_atomic,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_EXTEND_ADDED;
	struct txn_overshoot_race sh = {
		.fd = self->fd, .flavor = variant->flavor,
	};
	int n = nr_cpus() < 2 ? 2 : nr_cpus();
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	double t0;

	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LP_TXN_CREDITS_MAX));
	ASSERT_EQ(0, lpu_txn_start(self->fd, &sh.small, NULL));
	/* From here on, a whole-limit request is over the limit. */
	ASSERT_EQ(0, lpu_txn_extend(self->fd, sh.small, 1, &e));
	sh.stalled = !txn_lacks_points(&self->id, points);
	if (sh.stalled)
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_OVERSHOOT_US));
	t0 = now_s();
	run_threads(n, txn_ioctl_overshoot_thread, &sh);
	if (sh.stalled)
		ASSERT_EQ(0, txn_stall(self->fd, 0, 0));
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_LT(0, sh.whole_refused);
	if (variant->flavor == LP_TXN_ATOMIC) {
		EXPECT_LE(1, sh.refused)
			TH_LOG("no one-credit EXTEND met a whole-limit one in flight: %s",
			       "are ioctl EXTENDs serialized?");
	} else {
		EXPECT_EQ(0, sh.refused)
			TH_LOG("t_handle_lock let an overshoot be seen");
	}
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(1 + sh.granted, s.credits);
	EXPECT_EQ(1, s.updates);
	EXPECT_EQ(1 + sh.granted, lpu_txn_stop(self->fd, sh.small));
	TH_LOG("%.2f s, %s: one-credit EXTENDs: %llu granted, %llu refused",
	       now_s() - t0, sh.stalled ? "stalled" : "no stall",
	       sh.granted, sh.refused);
	TH_LOG("%llu whole-limit EXTENDs refused", sh.whole_refused);
}

/*
 * A STOP racing EXTENDs of the same handle from other threads: each round
 * one handle, which the other threads extend (thread i by i credits) until
 * it is gone, while thread 0 extends it too, a few times, and then stops
 * it. Each EXTEND either comes before the STOP, and its credits are in
 * the STOP's answer, or after it, and answers -EBADF having granted
 * nothing: STOP gives back exactly what the EXTENDs that answered 0 were
 * granted, and the transaction is left with no credits.
 */
#define LPU_TXN_STOP_ROUNDS	1000
#define LPU_TXN_STOP_S		1.0
#define LPU_TXN_STOP_AFTER	4	/* grants a round waits for, at most */
/* Far more than a round grants, and soon reached if a STOP fails. */
#define LPU_TXN_STOP_LIMIT	65536

struct txn_stop_race {
	int fd;
	pthread_barrier_t go, gone;
	__u32 handle;		/* this round's */
	int done;		/* no more rounds */
	unsigned long long granted;	/* __atomic: this round's credits */
	unsigned long long grants;	/* __atomic: this round's grants */
	__u32 most;		/* __atomic: most granted answered */
	unsigned long long rounds, mismatched, by_others, refused;
	int first_stop;		/* the first mismatched round's STOP answer */
	unsigned long long first_granted;	/* and its grants */
	int err;
};

static void txn_stop_race_grant(struct txn_stop_race *sh, __u32 nblocks,
				__u32 granted)
{
	__u32 most = __atomic_load_n(&sh->most, __ATOMIC_RELAXED);

	__atomic_add_fetch(&sh->granted, nblocks, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sh->grants, 1, __ATOMIC_RELAXED);
	while (granted > most &&
	       !__atomic_compare_exchange_n(&sh->most, &most, granted, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Thread 0: each round a handle, a few EXTENDs, the STOP, the check. */
static void txn_stop_racer(struct txn_stop_race *sh)
{
	double end = now_s() + LPU_TXN_STOP_S;
	struct lp_txn_extend e;
	int ret, own;

	while (sh->rounds < LPU_TXN_STOP_ROUNDS && now_s() < end &&
	       !__atomic_load_n(&sh->err, __ATOMIC_RELAXED)) {
		ret = lpu_txn_start(sh->fd, &sh->handle, NULL);
		if (ret) {
			txn_first_error(&sh->err, ret);
			break;
		}
		sh->granted = 0;
		sh->grants = 0;
		sh->most = 0;
		pthread_barrier_wait(&sh->go);
		/* Let the others run: until they were granted a few times. */
		for (own = 0; own < LPU_TXN_STOP_AFTER &&
		     __atomic_load_n(&sh->grants, __ATOMIC_RELAXED) <
		     LPU_TXN_STOP_AFTER; own++) {
			ret = lpu_txn_extend(sh->fd, sh->handle, 1, &e);
			if (ret) {
				txn_first_error(&sh->err, ret);
				break;
			}
			txn_stop_race_grant(sh, 1, e.granted);
		}
		ret = lpu_txn_stop(sh->fd, sh->handle);
		/* Every other EXTEND of the handle has answered now. */
		pthread_barrier_wait(&sh->gone);
		if (ret < 0) {
			txn_first_error(&sh->err, ret);
			break;
		}
		sh->rounds++;
		if (ret != sh->granted || ret != sh->most) {
			if (!sh->mismatched++) {
				sh->first_stop = ret;
				sh->first_granted = sh->granted;
			}
		}
		sh->by_others += sh->grants > (unsigned long long)own;
	}
	__atomic_store_n(&sh->done, 1, __ATOMIC_RELAXED);
	pthread_barrier_wait(&sh->go);
}

static void *txn_stop_race_thread(void *arg)
{
	struct lpu_thread *t = arg;
	struct txn_stop_race *sh = t->shared;
	struct lp_txn_extend e;
	int ret;

	if (t->index == 0) {
		txn_stop_racer(sh);
		return NULL;
	}
	for (;;) {
		pthread_barrier_wait(&sh->go);
		if (__atomic_load_n(&sh->done, __ATOMIC_RELAXED))
			return NULL;
		while (!(ret = lpu_txn_extend(sh->fd, sh->handle, t->index, &e)))
			txn_stop_race_grant(sh, t->index, e.granted);
		if (ret == -EBADF)
			__atomic_add_fetch(&sh->refused, 1, __ATOMIC_RELAXED);
		else
			txn_first_error(&sh->err, ret);
		pthread_barrier_wait(&sh->gone);
	}
}

TEST_F_TIMEOUT(txn, stop_racing_ioctl_extends_gives_back_every_grant,
	       LPU_SLOW_TIMEOUT)
{
	int n = nr_cpus() < 3 ? 3 : nr_cpus();
	struct txn_stop_race sh = { .fd = self->fd };
	struct lp_txn_stat s;

	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LPU_TXN_STOP_LIMIT));
	ASSERT_EQ(0, pthread_barrier_init(&sh.go, NULL, n));
	ASSERT_EQ(0, pthread_barrier_init(&sh.gone, NULL, n));
	run_threads(n, txn_stop_race_thread, &sh);
	pthread_barrier_destroy(&sh.go);
	pthread_barrier_destroy(&sh.gone);
	EXPECT_EQ(0, sh.err) TH_LOG("first error: %s", strerror(-sh.err));
	EXPECT_EQ(0, sh.mismatched)
		TH_LOG("%llu of %llu STOPs did not give back what was granted, first %d of %llu",
		       sh.mismatched, sh.rounds, sh.first_stop,
		       sh.first_granted);
	EXPECT_LE(20, sh.rounds);
	EXPECT_LT(0, sh.by_others) TH_LOG("the other threads were never granted");
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.credits) TH_LOG("credits granted after their STOP");
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.handles);
	TH_LOG("%llu rounds, %llu with grants to the other threads; %llu EXTENDs answered -EBADF",
	       sh.rounds, sh.by_others, sh.refused);
}

/* The RUN loops complete every iteration and leave nothing behind. */
TEST_F(txn, run_loops_complete_and_give_everything_back)
{
	struct lp_txn_stat s;
	struct lp_run run;

	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TXN_START_STOP, 0,
			     LPU_RUN_ITERATIONS, 0, &run));
	EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	EXPECT_EQ(0, run.failed);
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TXN_EXTEND, 0, LPU_RUN_ITERATIONS,
			     LP_TXN_CREDITS_DEFAULT, &run));
	EXPECT_EQ(LPU_RUN_ITERATIONS, run.completed);
	EXPECT_EQ(0, run.failed);
	ASSERT_EQ(0, lpu_run(self->fd, LP_OP_TXN_EXTEND, 0, 100,
			     LP_TXN_CREDITS_DEFAULT + 1, &run));
	EXPECT_EQ(0, run.completed);
	EXPECT_EQ(100, run.failed);
	EXPECT_EQ(0, run.delta);
	EXPECT_EQ(0, run.broken);
	ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.handles);
	EXPECT_EQ(0, s.late_starts);
}

/* ---- the windows, stretched: LP_IOC_DELAY's transaction points ------ */

/*
 * Each test below turns on points of enum lp_delay_point for its arena:
 * one thread stalls in a window of a few instructions while another does
 * what the window's lock or ordering must hold off. Without that lock or
 * ordering the race is a KASAN report or a wrong count in the first
 * round. A round whose threads did not meet in the window (the stalling
 * thread came late) runs again, up to LPU_TXN_STALL_TRIES times; only a
 * round that met is judged for the race.
 */

/*
 * The stall: long against an ioctl (~100 us), short against a test. The
 * other thread acts LPU_TXN_ACT_US into it: a busy-wait stall counts
 * udelay() loops of each CPU's boot-time calibration, which under TCG
 * may run short by half or more (the guest's console: "calibrate_delay_
 * direct() failed to get a good estimate for loops_per_jiffy").
 */
#define LPU_TXN_STALL_US	80000
#define LPU_TXN_ACT_US		(LPU_TXN_STALL_US / 4)
#define LPU_TXN_STALL_TRIES	3

/* One ioctl in a thread of its own, timed from userspace. */
enum txn_bg_op { TXN_BG_EXTEND, TXN_BG_COMMIT, TXN_BG_RUN_EXTEND };

struct txn_bg {
	int fd;
	enum txn_bg_op op;
	__u32 handle;		/* EXTEND */
	__u32 nblocks;		/* EXTEND; RUN TXN_EXTEND: its value */
	__u64 iterations;	/* RUN TXN_EXTEND */
	bool pin;		/* run on CPU @cpu only */
	int cpu;
	/* SCHED_FIFO, and the CPU held this long after the call returned */
	__u32 hold_us;
	int hold_err;		/* making it SCHED_FIFO failed: -errno */
	pthread_t thread;
	pid_t tid;
	int called;		/* __atomic: set just before the call */
	int ret;
	double t_call, t_ret;	/* now_s() just before and after the call */
	struct lp_txn_extend e;
	struct lp_txn_commit c;
	struct lp_run run;
};

static void *txn_bg_thread(void *arg)
{
	struct txn_bg *b = arg;

	if (b->pin)
		pin_to_cpu(b->cpu);
	b->tid = (pid_t)syscall(SYS_gettid);
	if (b->hold_us && fifo_prio(b->tid, 1))
		b->hold_err = -errno;
	b->t_call = now_s();
	__atomic_store_n(&b->called, 1, __ATOMIC_RELEASE);
	switch (b->op) {
	case TXN_BG_EXTEND:
		b->ret = lpu_txn_extend(b->fd, b->handle, b->nblocks, &b->e);
		break;
	case TXN_BG_COMMIT:
		b->ret = lpu_txn_commit(b->fd, LP_TXN_TIMEOUT_MAX_MS, &b->c);
		break;
	case TXN_BG_RUN_EXTEND:
		b->ret = lpu_run(b->fd, LP_OP_TXN_EXTEND, 0, b->iterations,
				 b->nblocks, &b->run);
		break;
	}
	b->t_ret = now_s();
	/* No task of this CPU's below SCHED_FIFO runs until it ends. */
	while (now_s() < b->t_ret + b->hold_us / 1e6)
		;
	return NULL;
}

/* Start @b's call in a thread; return once the thread is about to make it. */
static int txn_bg_start(struct txn_bg *b)
{
	int err = pthread_create(&b->thread, NULL, txn_bg_thread, b);

	if (err)
		return -err;
	while (!__atomic_load_n(&b->called, __ATOMIC_ACQUIRE))
		usleep(100);
	return 0;
}

static void txn_bg_join(struct txn_bg *b)
{
	pthread_join(b->thread, NULL);
}

/* Wait up to a stall's length for task @tid to sleep in state D. */
static bool txn_asleep_within_a_stall(pid_t tid)
{
	int i;

	for (i = 0; i < LPU_TXN_STALL_US / 1000; i++) {
		if (task_asleep(tid))
			return true;
		usleep(1000);
	}
	return false;
}

/* Nothing left running: no handle, no credit, no stall. */
static void expect_txn_idle(struct __test_metadata *_metadata, int fd)
{
	struct lp_txn_stat s;

	ASSERT_EQ(0, txn_stall(fd, 0, 0));
	ASSERT_EQ(0, lpu_txn_stat(fd, &s));
	EXPECT_EQ(0, s.updates);
	EXPECT_EQ(0, s.credits);
	EXPECT_EQ(0, s.handles);
	EXPECT_EQ(0, s.late_starts);
}

/*
 * LP_DELAY_TXN_HANDLE_GET: an EXTEND sleeps in its handle's lookup, the
 * table's lock held and the entry found but not yet referenced, when a
 * STOP of the same handle comes. The lock holds the STOP's take off until
 * the EXTEND holds a reference of its own, so the entry outlives the
 * STOP's put, and the EXTEND either extends before the STOP (whose answer
 * then includes the grant) or finds the handle stopped (-EBADF). A
 * reference taken after the unlock would be to an entry the STOP freed:
 * KASAN.
 */
TEST_F_TIMEOUT(txn, stop_during_an_extend_lookup_waits_for_its_reference,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_HANDLE_GET;
	int tries, stopped;
	bool met = false;
	__u32 h;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	for (tries = 0; tries < LPU_TXN_STALL_TRIES && !met; tries++) {
		struct txn_bg b = {
			.fd = self->fd, .op = TXN_BG_EXTEND, .nblocks = 2,
		};

		ASSERT_EQ(0, lpu_txn_start_n(self->fd, 1, &h));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_STALL_US));
		b.handle = h;
		ASSERT_EQ(0, txn_bg_start(&b));
		/* The stall is the one sleep of this EXTEND. */
		met = txn_asleep_within_a_stall(b.tid);
		stopped = lpu_txn_stop(self->fd, h);
		txn_bg_join(&b);
		if (b.ret) {
			EXPECT_EQ(-EBADF, b.ret);
			EXPECT_EQ(1, stopped);
		} else {
			EXPECT_EQ(3, b.e.granted);
			EXPECT_EQ(3, stopped) TH_LOG("the grant was not given back");
		}
		expect_txn_idle(_metadata, self->fd);
	}
	EXPECT_TRUE(met) TH_LOG("the EXTEND never slept in its lookup");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * LP_DELAY_TXN_EXTEND_LOCKED: an EXTEND stalls with its handle's entry
 * locked, past its check that the handle runs and before its credits,
 * when a STOP of the same handle comes. The STOP's wait for that lock
 * puts the grant into the STOP's answer. A STOP that does not wait gives
 * back the credits of before, and the grant stays in
 * t_outstanding_credits with no handle left to give it back.
 */
TEST_F_TIMEOUT(txn, stop_during_an_extend_of_its_handle_gives_its_grant_back,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_EXTEND_LOCKED;
	int tries, stopped;
	bool met = false;
	double t_stop;
	__u32 h;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	for (tries = 0; tries < LPU_TXN_STALL_TRIES && !met; tries++) {
		struct txn_bg b = {
			.fd = self->fd, .op = TXN_BG_EXTEND, .nblocks = 2,
		};

		ASSERT_EQ(0, lpu_txn_start_n(self->fd, 1, &h));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_STALL_US));
		b.handle = h;
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_ACT_US);
		t_stop = now_s();
		stopped = lpu_txn_stop(self->fd, h);
		txn_bg_join(&b);
		if (b.ret == -EBADF) {
			/* The EXTEND came late: the STOP was first. */
			EXPECT_EQ(1, stopped);
		} else {
			EXPECT_EQ(0, b.ret);
			EXPECT_EQ(3, b.e.granted);
			EXPECT_EQ(b.e.granted, stopped)
				TH_LOG("the STOP did not wait for the EXTEND");
			met = t_stop < b.t_ret;
		}
		expect_txn_idle(_metadata, self->fd);
	}
	EXPECT_TRUE(met) TH_LOG("the STOP never came during the EXTEND");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * LP_DELAY_TXN_EXTEND_ADDED: an EXTEND over the limit stalls with its
 * request added, before its check takes it back, when an EXTEND of
 * another handle asks for one credit that fits. TXN_HANDLE_LOCK's
 * t_handle_lock keeps the second out until the first is undone: granted,
 * with no overshoot. TXN_ATOMIC has no such lock: the second finds the
 * refused request in flight, counts an overshoot and is refused as well
 * (after the patch a refusal may be owed to a request itself refused).
 */
#define LPU_TXN_SMALL_LIMIT	10

TEST_F_TIMEOUT(txn, only_extends_in_txn_atomic_meet_a_refused_one_in_flight,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_EXTEND_ADDED;
	bool atomic = variant->flavor == LP_TXN_ATOMIC;
	struct lp_txn_extend e;
	struct lp_txn_stat s;
	int tries, ret;
	double t_call, t_ret;
	bool met = false;
	__u32 h1, h2;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	for (tries = 0; tries < LPU_TXN_STALL_TRIES && !met; tries++) {
		struct txn_bg b = {
			.fd = self->fd, .op = TXN_BG_EXTEND, .nblocks = 4,
		};

		/* CONFIGURE also starts the overshoot count again. */
		ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
					       LPU_TXN_SMALL_LIMIT));
		ASSERT_EQ(0, lpu_txn_start_n(self->fd, 8, &h1));
		ASSERT_EQ(0, lpu_txn_start_n(self->fd, 0, &h2));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_STALL_US));
		b.handle = h1;
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_ACT_US);
		t_call = now_s();
		ret = lpu_txn_extend(self->fd, h2, 1, &e);
		t_ret = now_s();
		txn_bg_join(&b);
		ASSERT_EQ(0, txn_stall(self->fd, 0, 0));
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		EXPECT_EQ(-ENOSPC, b.ret);
		if (atomic) {
			/* Refused: it met the first one's request in flight. */
			met = ret == -ENOSPC;
			EXPECT_EQ(met, s.overshoots);
		} else {
			/*
			 * Called during the first one, it waited on
			 * t_handle_lock and then stalled: it returned after.
			 */
			met = t_call < b.t_ret && b.t_ret < t_ret;
		}
		if (!met || !atomic) {
			EXPECT_EQ(0, ret)
				TH_LOG("t_handle_lock let it see a request in flight");
			EXPECT_EQ(9, e.credits);
			EXPECT_EQ(0, s.overshoots);
		}
		EXPECT_EQ(8, lpu_txn_stop(self->fd, h1));
		EXPECT_EQ(ret ? 0 : 1, lpu_txn_stop(self->fd, h2));
		expect_txn_idle(_metadata, self->fd);
	}
	EXPECT_TRUE(met) TH_LOG("the second EXTEND never came during the first");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * LP_DELAY_TXN_EXTEND_ADDED again: a STAT comes while an EXTEND over the
 * limit stalls with its request added. STAT takes j_state_lock
 * exclusive, so it waits for the undo and reads only what was granted. A
 * STAT under the shared side reads the refused request too, above the
 * limit.
 */
TEST_F_TIMEOUT(txn, stat_waits_out_a_refused_extend_in_flight,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_EXTEND_ADDED;
	struct lp_txn_stat s;
	bool met = false;
	double t_stat;
	int tries;
	__u32 h;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LPU_TXN_SMALL_LIMIT));
	for (tries = 0; tries < LPU_TXN_STALL_TRIES && !met; tries++) {
		struct txn_bg b = {
			.fd = self->fd, .op = TXN_BG_EXTEND, .nblocks = 4,
		};

		ASSERT_EQ(0, lpu_txn_start_n(self->fd, 8, &h));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_STALL_US));
		b.handle = h;
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_ACT_US);
		t_stat = now_s();
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		txn_bg_join(&b);
		EXPECT_EQ(-ENOSPC, b.ret);
		EXPECT_EQ(8, s.credits) TH_LOG("STAT read a request in flight");
		met = t_stat < b.t_ret;
		EXPECT_EQ(8, lpu_txn_stop(self->fd, h));
		expect_txn_idle(_metadata, self->fd);
	}
	EXPECT_TRUE(met) TH_LOG("the STAT never came during the EXTEND");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * LP_DELAY_TXN_DRAIN_QUEUED: COMMIT's drain stalls between queueing
 * itself on j_wait_updates and reading t_updates when the last handle
 * stops, with no lock, and wakes whoever is queued. Queued first, the
 * drain cannot miss that STOP: its read sees the handle gone (the round
 * that met: the drain never slept), or the wakeup finds it queued. A
 * drain that reads first and queues after (a condition variable's order,
 * this stall between the two) sleeps with t_updates at zero until its
 * timeout: 10 s, where a drain that lost nothing takes a stall or two.
 */
TEST_F_TIMEOUT(txn, stop_during_the_drain_check_is_never_lost,
	       LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_DRAIN_QUEUED;
	bool met = false;
	int tries;
	__u32 h;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	for (tries = 0; tries < LPU_TXN_STALL_TRIES && !met; tries++) {
		struct txn_bg b = { .fd = self->fd, .op = TXN_BG_COMMIT };

		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_STALL_US));
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_ACT_US);
		EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
		txn_bg_join(&b);
		ASSERT_EQ(0, b.ret) TH_LOG("%s", strerror(-b.ret));
		ASSERT_GT(LP_TXN_TIMEOUT_MAX_MS * 900000ull, b.c.wait_ns)
			TH_LOG("the drain lost the STOP's wakeup: %u sleeps",
			       b.c.slept);
		/* Found the handle running, and saw it stop without a sleep. */
		met = b.c.updates == 1 && b.c.slept == 0;
		expect_txn_idle(_metadata, self->fd);
	}
	EXPECT_TRUE(met) TH_LOG("the STOP never came during the drain's check");
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/* ---- t_max_wait from below ------------------------------------------ */

/*
 * A START that waits through a COMMIT records at least that wait. The
 * waits are made by RUN TXN_EXTEND loops, whose START, refused while a
 * COMMIT drains a handle the test holds, is retried with the time of the
 * first attempt (jbd2's start_this_handle() reads its clock once). The
 * loops ask for more credits than the limit, so that once started they
 * are refused as cheaply as their STARTs were, and a loop sized from a
 * measured run of refusals outlasts the COMMIT by a known margin.
 *
 * The bound, from userspace clocks (CLOCK_MONOTONIC, ktime_get_ns()'s):
 * a RUN's loop began by t_ret - elapsed_ns, and its first START a few
 * instructions later; the next transaction opened after the handle's
 * STOP began. So the START waited at least t_stop - (t_ret - elapsed),
 * less LPU_TXN_WAIT_SLACK for those instructions.
 */
#define LPU_TXN_WAIT_MS		30	/* the handle held after a RUN starts */
#define LPU_TXN_WAIT_SLACK	0.002
#define LPU_TXN_CALIBRATE	1000	/* refusals measured first */
#define LPU_TXN_LIMIT_SMALL	8	/* RUN asks for LPU_TXN_LIMIT_SMALL + 1 */

/*
 * Lock the transaction for commit with a handle held (the COMMIT in @c),
 * then measure a refused RUN iteration, the faster of two runs (a vCPU
 * the host preempted makes one slow). Return: its cost in seconds, or a
 * negative value on an error.
 */
static double txn_lock_and_measure(int fd, struct txn_bg *c)
{
	double cost = 1;
	struct lp_txn_stat s;
	struct lp_run run;
	int i;

	if (txn_bg_start(c))
		return -1;
	do {
		if (lpu_txn_stat(fd, &s))
			return -1;
	} while (s.state != LP_TXN_LOCKED_FOR_COMMIT);
	for (i = 0; i < 2; i++) {
		if (lpu_run(fd, LP_OP_TXN_EXTEND, 0, LPU_TXN_CALIBRATE,
			    LPU_TXN_LIMIT_SMALL + 1, &run) ||
		    run.failed != LPU_TXN_CALIBRATE)
			return -1;
		if (run.elapsed_ns / 1e9 / LPU_TXN_CALIBRATE < cost)
			cost = run.elapsed_ns / 1e9 / LPU_TXN_CALIBRATE;
	}
	return cost;
}

/* A RUN of refusals that lasts about @s seconds at @cost each. */
static void txn_wait_run(struct txn_bg *b, int fd, double s, double cost)
{
	double n = s / cost;

	*b = (struct txn_bg){
		.fd = fd, .op = TXN_BG_RUN_EXTEND,
		.nblocks = LPU_TXN_LIMIT_SMALL + 1,
		.iterations = n < LP_RUN_MAX_ITERATIONS ?
			      (__u64)n : LP_RUN_MAX_ITERATIONS,
	};
}

/*
 * What RUN @b's START waited at least, given that the handle it waited
 * for began to stop at @t_stop; 0 if @b's loop ended before COMMIT @c
 * returned (its START may never have got in).
 */
static double txn_wait_at_least(const struct txn_bg *b,
				const struct txn_bg *c, double t_stop)
{
	double began = b->t_ret - b->run.elapsed_ns / 1e9;

	if (b->t_call + b->run.elapsed_ns / 1e9 <= c->t_ret)
		return 0;
	return t_stop - began - LPU_TXN_WAIT_SLACK;
}

TEST_F_TIMEOUT(txn, start_waiting_out_a_drain_records_at_least_its_length,
	       LPU_SLOW_TIMEOUT)
{
	const double wait_s = LPU_TXN_WAIT_MS / 1000.0;
	double cost, at_least = 0, t_stop;
	struct lp_txn_stat s;
	int tries;
	__u32 h;

	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LPU_TXN_LIMIT_SMALL));
	for (tries = 0; tries < LPU_TXN_STALL_TRIES; tries++) {
		struct txn_bg c = { .fd = self->fd, .op = TXN_BG_COMMIT };
		struct txn_bg b;

		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
		cost = txn_lock_and_measure(self->fd, &c);
		ASSERT_LT(0, cost);
		/* Three times the drain it waits out. */
		txn_wait_run(&b, self->fd, 3 * wait_s, cost);
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_WAIT_MS * 1000);
		t_stop = now_s();
		EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
		txn_bg_join(&c);
		txn_bg_join(&b);
		ASSERT_EQ(0, c.ret);
		ASSERT_EQ(0, b.ret);
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		at_least = txn_wait_at_least(&b, &c, t_stop);
		TH_LOG("%s: waited %.1f ms, at least %.1f ms; %llu refusals",
		       txn_flavor_names[variant->flavor], s.max_wait_ns / 1e6,
		       at_least * 1e3, (unsigned long long)b.run.failed);
		/* Met: the loop outlasted the COMMIT, begun well before. */
		if (at_least < wait_s / 2)
			continue;
		EXPECT_LE(at_least * 1e9, (double)s.max_wait_ns)
			TH_LOG("the START's clock started after its first try");
		EXPECT_GE((c.t_ret - b.t_call) * 1e9, (double)s.max_wait_ns);
		break;
	}
	EXPECT_LE(wait_s / 2, at_least)
		TH_LOG("no RUN outlasted the COMMIT, begun well before");
	expect_txn_idle(_metadata, self->fd);
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/*
 * Racing STARTs leave the longest wait, as racing MAX ops leave the
 * largest operand. Two RUN loops wait through one COMMIT: A from
 * LPU_TXN_WAIT_MS before B, on the committer's CPU, B on a CPU of its
 * own. LP_DELAY_TXN_DRAIN_QUEUED holds j_state_lock exclusive while the
 * drain reads t_updates at zero; B queues on it and is first into
 * update_t_max_wait() once the committer unlocks. The committer runs
 * SCHED_FIFO and holds its CPU for half a stall after its COMMIT
 * returns, so A, whose START got in with B's, reads only then: whatever
 * the host does with the vCPUs, B has read first by that time.
 * LP_DELAY_TXN_MAX_WAIT_READ stalls each between its read of t_max_wait
 * and its store, so A reads the value B read, and B's store lands half a
 * stall before A's. TXN_ATOMIC's cmpxchg loop retries A's store that
 * lost, and TXN_HANDLE_LOCK's lock lets one read at a time: either way
 * t_max_wait ends at least A's wait (bounded as above), where B waited
 * about a stall and a wakeup. A raise tried once keeps B's wait, in every
 * round (left to the scheduler, A went first in about half of them).
 * TXN_ATOMIC runs until two rounds met (A outlasted the COMMIT, begun
 * well before the STOP), TXN_HANDLE_LOCK, whose lock no raise can get
 * around, until one did; each gets two more rounds.
 */
#define LPU_TXN_MAX_STALL_US	20000
#define LPU_TXN_MAX_MET		2	/* TXN_ATOMIC's rounds that must meet */

TEST_F_TIMEOUT(txn, racing_starts_leave_the_longest_wait, LPU_SLOW_TIMEOUT)
{
	const __u32 points = 1u << LP_DELAY_TXN_DRAIN_QUEUED |
			     1u << LP_DELAY_TXN_MAX_WAIT_READ;
	const double wait_s = LPU_TXN_WAIT_MS / 1000.0;
	int need = variant->flavor == LP_TXN_ATOMIC ? LPU_TXN_MAX_MET : 1;
	double cost, at_least, t_stop;
	struct lp_txn_stat s;
	int round, met = 0;
	__u32 h;

	if (txn_lacks_points(&self->id, points))
		SKIP(return, "%s has no delay points (not a debug kernel)",
		     variant->module);
	ASSERT_LE(2, nr_cpus());
	ASSERT_EQ(0, lpu_txn_configure(self->fd, variant->flavor,
				       LPU_TXN_LIMIT_SMALL));
	for (round = 0; round < need + 2 && met < need; round++) {
		struct txn_bg c = {
			.fd = self->fd, .op = TXN_BG_COMMIT, .pin = true,
			.hold_us = LPU_TXN_MAX_STALL_US / 2,
		};
		struct txn_bg a, b;

		ASSERT_EQ(0, lpu_txn_start(self->fd, &h, NULL));
		ASSERT_EQ(0, txn_stall(self->fd, points, LPU_TXN_MAX_STALL_US));
		cost = txn_lock_and_measure(self->fd, &c);
		ASSERT_LT(0, cost);
		/* A outlasts the COMMIT, stalls included, 3 times over, B twice. */
		txn_wait_run(&a, self->fd, 3 * (2 * wait_s + 0.03), cost);
		txn_wait_run(&b, self->fd, 2 * (wait_s + 0.03), cost);
		a.pin = true;
		b.pin = true;
		b.cpu = 1;
		ASSERT_EQ(0, txn_bg_start(&a));
		usleep(LPU_TXN_WAIT_MS * 1000);
		ASSERT_EQ(0, txn_bg_start(&b));
		usleep(LPU_TXN_WAIT_MS * 1000);
		t_stop = now_s();
		EXPECT_EQ(0, lpu_txn_stop(self->fd, h));
		txn_bg_join(&c);
		txn_bg_join(&a);
		txn_bg_join(&b);
		ASSERT_EQ(0, txn_stall(self->fd, 0, 0));
		ASSERT_EQ(0, c.hold_err) TH_LOG("SCHED_FIFO: %s", strerror(-c.hold_err));
		ASSERT_EQ(0, c.ret);
		ASSERT_EQ(0, a.ret);
		ASSERT_EQ(0, b.ret);
		ASSERT_EQ(0, lpu_txn_stat(self->fd, &s));
		at_least = txn_wait_at_least(&a, &c, t_stop);
		TH_LOG("%s round %d: max %.1f ms, A waited at least %.1f ms, B at most %.1f ms",
		       txn_flavor_names[variant->flavor], round,
		       s.max_wait_ns / 1e6, at_least * 1e3,
		       (c.t_ret - b.t_call) * 1e3);
		/* Met: A began well before the STOP and outlasted the COMMIT. */
		if (at_least < wait_s)
			continue;
		met++;
		EXPECT_LE(at_least * 1e9, (double)s.max_wait_ns)
			TH_LOG("round %d lost the longest wait", round);
		EXPECT_GE((c.t_ret - a.t_call) * 1e9, (double)s.max_wait_ns);
	}
	EXPECT_LE(need, met) TH_LOG("A outlasted the COMMIT in %d rounds", met);
	expect_txn_idle(_metadata, self->fd);
	EXPECT_EQ(0, txn_still_works(self->fd));
}

/* ---- allocation failure: the sweep of lockless_test.h -------------- */

/* The transaction's ioctls, in this flavor: as the gadget side. */
TEST_F_TIMEOUT(txn, every_allocation_may_fail_all_or_nothing,
	       LPU_SLOW_TIMEOUT)
{
	static const enum fl_op probes[] = {
		FL_TXN_STAT, FL_TXN_EXTEND, FL_RUN_TXN_START_STOP,
		FL_RUN_TXN_EXTEND, FL_TXN_STOP,
	};
	const char *fname = txn_flavor_names[variant->flavor];
	bool full = !strcmp(sizes.preset, "full");
	struct fl_count cnt;
	struct fl_ctx *c;
	size_t i;
	__u32 h;

	ASSERT_EQ(0, fl_setup())
		TH_LOG("the debug kernel needs FAILSLAB, FAIL_PAGE_ALLOC and debugfs");
	c = calloc(1, sizeof(*c));
	ASSERT_NE(NULL, c);
	fl_init(c, variant->path, self->fd, variant->flavor);
	fl_sweep(_metadata, c, FL_TXN_CONFIGURE, 1, 1, &cnt);
	EXPECT_EQ(0, cnt.reached) TH_LOG("TXN_CONFIGURE allocates");
	/* C allocates an entry a handle, Rust an Arc'd one: every START. */
	fl_sweep(_metadata, c, FL_TXN_START, full ? FL_GROW_FULL : 3,
		 LP_MAX_HANDLES, &cnt);
	fl_report(_metadata, variant->module, fname, FL_TXN_START, &cnt);
	fl_expect_reached(_metadata, FL_TXN_START, &cnt);
	for (i = 0; i < ARRAY_SIZE(probes); i++) {
		fl_sweep(_metadata, c, probes[i], 1, 1, &cnt);
		EXPECT_EQ(0, cnt.reached)
			TH_LOG("%s allocates: its contract has no -ENOMEM",
			       fl_names[probes[i]]);
	}
	/* COMMIT drains: every handle stopped first. */
	while (c->ntxn_held) {
		for (h = 1; !c->txn_held[h]; h++)
			;
		ASSERT_LE(0, lpu_txn_stop(self->fd, h));
		fl_unhold(c, true, h);
	}
	fl_sweep(_metadata, c, FL_TXN_COMMIT, 1, 1, &cnt);
	EXPECT_EQ(0, cnt.reached) TH_LOG("TXN_COMMIT allocates");
	/* No credit kept by a failure: a START of all that are left. */
	fl_fill_credits(_metadata, c);
	free(c);
	EXPECT_EQ(0, txn_still_works(self->fd));
}
