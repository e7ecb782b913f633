// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_test.c - the judge: one kselftest_harness driver that runs every
 * test against /dev/lockless_c and /dev/lockless_rust (fixture variants).
 *
 * Runs as PID 1's child in the QEMU guest, statically linked, and prints
 * KTAP that scripts/judge.py parses with the kernel's kunit_parser.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "lockless_uapi.h"

#ifndef LP_MODULE_DIR
#define LP_MODULE_DIR "/modules"
#endif

/* One device under test: which node, which module answers on it. */
FIXTURE(dev)
{
	int fd;
};

FIXTURE_VARIANT(dev)
{
	const char *path;
	const char *module;
};

FIXTURE_VARIANT_ADD(dev, c)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
};

FIXTURE_VARIANT_ADD(dev, rust)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
};

FIXTURE_SETUP(dev)
{
	self->fd = open(variant->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s (is %s.ko loaded?)",
				      variant->path, strerror(errno),
				      variant->module);
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(dev, identify_names_module_and_abi)
{
	struct lp_identify id;

	memset(&id, 0, sizeof(id));
	ASSERT_EQ(0, ioctl(self->fd, LP_IOC_IDENTIFY, &id));
	EXPECT_STREQ(variant->module, id.name);
	EXPECT_EQ(LP_ABI_VERSION, id.abi_version);
	EXPECT_EQ(0, id.flavors & ~((1u << LP_FLAVOR_COUNT) - 1));
	EXPECT_EQ(0, id.ops & ~((1ull << LP_OP_COUNT) - 1));
}

TEST_F(dev, identify_rejects_bad_input)
{
	struct lp_identify id;

	memset(&id, 0, sizeof(id));
	id.reserved[3] = 1;
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

/* Module load/unload needs no open file, so it gets its own fixture. */
FIXTURE(mod)
{
	char ko[256];
};

FIXTURE_VARIANT(mod)
{
	const char *path;
	const char *module;
};

FIXTURE_VARIANT_ADD(mod, c)
{
	.path = LP_DEV_C,
	.module = "lockless_c",
};

FIXTURE_VARIANT_ADD(mod, rust)
{
	.path = LP_DEV_RUST,
	.module = "lockless_rust",
};

FIXTURE_SETUP(mod)
{
	snprintf(self->ko, sizeof(self->ko), "%s/%s.ko", LP_MODULE_DIR,
		 variant->module);
}

FIXTURE_TEARDOWN(mod)
{
}

static int load_module(const char *ko)
{
	int fd = open(ko, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return ret;
}

static int unload_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

TEST_F(mod, unload_and_reload_twice)
{
	struct lp_identify id;
	int round, fd;

	for (round = 0; round < 2; round++) {
		ASSERT_EQ(0, unload_module(variant->module))
			TH_LOG("round %d: rmmod %s", round, variant->module);
		EXPECT_NE(0, access(variant->path, F_OK))
			TH_LOG("%s still exists after rmmod", variant->path);

		ASSERT_EQ(0, load_module(self->ko))
			TH_LOG("round %d: insmod %s", round, self->ko);
		fd = open(variant->path, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd) TH_LOG("open %s after reload", variant->path);
		memset(&id, 0, sizeof(id));
		EXPECT_EQ(0, ioctl(fd, LP_IOC_IDENTIFY, &id));
		EXPECT_STREQ(variant->module, id.name);
		close(fd);
	}
}

TEST_HARNESS_MAIN
