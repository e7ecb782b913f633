// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_mod.c - the mod fixture: each module unloads and loads again
 * with no file open (mod.c.*, mod.rust.*).
 *
 * Part of the driver, #included by lockless_test.c.
 */
#include "lockless_test.h"

/* ---- module load/unload needs no open file: its own fixture ------------ */

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
	snprintf(self->ko, sizeof(self->ko), "%s/%s.ko", LPU_MODULE_DIR,
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
