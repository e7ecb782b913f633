// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_racy.c - KCSAN's negative control (make kcsan-control).
 *
 * With both modules loaded racy_control=1, runs RUN RACY_INC, an
 * arena counter increment in the kernel, from four threads sharing one
 * open file of each module: first with plain loads and stores and no lock,
 * then with marked ones, then plain under a spinlock; and prints how many
 * increments were lost. Before each run it writes
 * "lockless_racy: DEVICE plain|marked|locked" to the kernel log, so
 * that each KCSAN report on the console falls under the run it came from.
 * KCSAN's report, or its absence, is the verdict; the lost count shows
 * that the race happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lockless_uapi.h"

#define RACY_THREADS	4
#define RACY_ITERATIONS	200000ULL

static const char *const racy_modes[] = { "plain", "marked", "locked" };

struct racy {
	int fd;
	__u64 mode;
	int err;
};

static void *racy_thread(void *arg)
{
	struct racy *r = arg;
	struct lp_run run = {
		.op = LP_OP_RACY_INC,
		.iterations = RACY_ITERATIONS,
		.value = r->mode,
	};

	if (ioctl(r->fd, LP_IOC_RUN, &run))
		r->err = errno;
	return NULL;
}

static int racy_module(const char *path, __u64 mode)
{
	struct racy r[RACY_THREADS];
	pthread_t t[RACY_THREADS];
	struct lp_run run = { .op = LP_OP_RACY_INC, .value = mode };
	unsigned long long want = RACY_THREADS * RACY_ITERATIONS;
	int fd, kmsg, i, err = 0;

	kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (kmsg >= 0) {
		dprintf(kmsg, "lockless_racy: %s %s\n", path,
			racy_modes[mode]);
		close(kmsg);
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("%s: open: %s\n", path, strerror(errno));
		return 1;
	}
	for (i = 0; i < RACY_THREADS; i++) {
		r[i].fd = fd;
		r[i].mode = mode;
		r[i].err = 0;
		pthread_create(&t[i], NULL, racy_thread, &r[i]);
	}
	for (i = 0; i < RACY_THREADS; i++) {
		pthread_join(t[i], NULL);
		if (r[i].err)
			err = r[i].err;
	}
	/* A RUN of no iteration reports the counter. */
	if (err || ioctl(fd, LP_IOC_RUN, &run)) {
		printf("%s: RUN RACY_INC: %s (loaded without racy_control=1?)\n",
		       path, strerror(err ?: errno));
		close(fd);
		return 1;
	}
	printf("%s: %d threads x %llu %s increments: counter %llu, %llu lost\n",
	       path, RACY_THREADS, RACY_ITERATIONS, racy_modes[mode],
	       (unsigned long long)run.delta, want - run.delta);
	close(fd);
	return 0;
}

/* Plain, marked, locked: KCSAN must report only the plain ones. */
int main(void)
{
	__u64 mode;
	int ret = 0;

	for (mode = 0; mode < 3; mode++) {
		ret |= racy_module(LP_DEV_C, mode);
		ret |= racy_module(LP_DEV_RUST, mode);
	}
	return ret;
}
