// SPDX-License-Identifier: GPL-2.0
/*
 * device.c - /dev/lockless_c: the misc device and its ioctl dispatch.
 *
 * lockless_c.ko is the C reference implementation of the contract in
 * shared-tests/lockless_uapi.h; rust-module/device.rs is its mirror.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "lockless_uapi.h"

/**
 * lp_identify() - answer LP_IOC_IDENTIFY
 * @argp: user pointer to a struct lp_identify
 *
 * Return: 0, -EFAULT for a bad pointer, -EINVAL for a non-zero reserved field.
 */
static long lp_identify(void __user *argp)
{
	struct lp_identify id;

	if (copy_from_user(&id, argp, sizeof(id)))
		return -EFAULT;
	if (memchr_inv(id.reserved, 0, sizeof(id.reserved)))
		return -EINVAL;

	memset(&id, 0, sizeof(id));
	strscpy(id.name, KBUILD_MODNAME, sizeof(id.name));
	id.abi_version = LP_ABI_VERSION;
	id.flavors = 0;
	id.ops = 0;
	id.live_gadgets = 0;

	if (copy_to_user(argp, &id, sizeof(id)))
		return -EFAULT;
	return 0;
}

static long lp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case LP_IOC_IDENTIFY:
		return lp_identify(argp);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations lp_fops = {
	.owner		= THIS_MODULE,
	.unlocked_ioctl	= lp_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

static struct miscdevice lp_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "lockless_c",
	.fops	= &lp_fops,
};

static int __init lp_init(void)
{
	return misc_register(&lp_miscdev);
}

static void __exit lp_exit(void)
{
	misc_deregister(&lp_miscdev);
}

module_init(lp_init);
module_exit(lp_exit);

MODULE_DESCRIPTION("lockless-parity: lockless RMW patterns, C reference");
MODULE_LICENSE("GPL");
