// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_demo.c - `make demo`: ask both devices who they are and print
 * the answers side by side.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lockless_uapi.h"
#include "lockless_names.h"

struct answer {
	int err;
	struct lp_identify id;
};

static void identify(const char *path, struct answer *a)
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

static const char *yesno(const struct answer *a, int implemented)
{
	if (a->err)
		return "-";
	return implemented ? "yes" : "no";
}

int main(void)
{
	struct answer c, rust;
	char cv[16], rv[16];
	int i, bad = 0;

	identify(LP_DEV_C, &c);
	identify(LP_DEV_RUST, &rust);

	printf("%-22s %-16s %-16s\n", "", LP_DEV_C, LP_DEV_RUST);
	printf("%-22s %-16s %-16s\n", "module",
	       c.err ? strerror(c.err) : c.id.name,
	       rust.err ? strerror(rust.err) : rust.id.name);
	snprintf(cv, sizeof(cv), "%u", c.id.abi_version);
	snprintf(rv, sizeof(rv), "%u", rust.id.abi_version);
	printf("%-22s %-16s %-16s\n", "ABI version",
	       c.err ? "-" : cv, rust.err ? "-" : rv);

	printf("flavors:\n");
	for (i = 0; i < LP_FLAVOR_COUNT; i++)
		printf("  %-20s %-16s %-16s\n", flavor_names[i],
		       yesno(&c, c.id.flavors & (1u << i)),
		       yesno(&rust, rust.id.flavors & (1u << i)));
	printf("ops:\n");
	for (i = 0; i < LP_OP_COUNT; i++)
		printf("  %-20s %-16s %-16s\n", op_names[i],
		       yesno(&c, c.id.ops & (1ull << i)),
		       yesno(&rust, rust.id.ops & (1ull << i)));

	bad = c.err || rust.err;
	return bad;
}
