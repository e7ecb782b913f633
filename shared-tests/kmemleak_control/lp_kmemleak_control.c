// SPDX-License-Identifier: GPL-2.0
/*
 * lp_kmemleak_control.c - a known leak: the positive control for kmemleak.
 *
 * The judge fails a run on a kmemleak report, so a scan that finds
 * nothing must mean that nothing leaked, not that kmemleak was off, never
 * scanned, or looked too early. Loaded in the guest and never unloaded,
 * this module leaks LP_LEAK_OBJECTS objects at init and keeps no pointer
 * to them: a working scan reports each one, with an allocation backtrace
 * naming lp_kmemleak_control_leak(), by which the guest's /init tells
 * these expected records from real leaks.
 *
 * The objects are larger than any kmalloc cache, so they come straight
 * from the page allocator. Tried: 256-byte objects were never reported,
 * each one "referenced" once, most likely by the stale copy of its address
 * that the slab allocator's per-CPU object arrays (sheaves) keep after
 * handing it out. The same blindness hides a leaked object of our modules
 * from kmemleak, which is why both modules also count their live objects
 * and the driver checks those counts after every test.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/init.h>
#include <linux/module.h>
#include <linux/printk.h>
#include <linux/slab.h>
#include <linux/string.h>

#define LP_LEAK_OBJECTS	4
/* Above KMALLOC_MAX_CACHE_SIZE: a page allocation, not a slab object. */
#define LP_LEAK_SIZE	(4 * PAGE_SIZE)

/**
 * lp_kmemleak_control_leak() - allocate one object and lose it
 *
 * noinline, so that kmemleak's allocation backtrace names this function.
 * The object is zeroed, so it refers to nothing, and barrier_data() makes
 * the compiler believe it is used, so that neither the allocation nor the
 * memset() can be optimised away. Nothing is stored anywhere: once this
 * returns, nothing refers to it.
 *
 * Return: true if an object was allocated (and leaked).
 */
static noinline bool lp_kmemleak_control_leak(void)
{
	void *p;

	p = kmalloc(LP_LEAK_SIZE, GFP_KERNEL);
	if (!p)
		return false;
	memset(p, 0, LP_LEAK_SIZE);
	barrier_data(p);
	return true;
}

static int __init lp_kmemleak_control_init(void)
{
	unsigned int i, leaked = 0;

	for (i = 0; i < LP_LEAK_OBJECTS; i++)
		leaked += lp_kmemleak_control_leak();
	pr_info("leaked %u objects of %lu bytes on purpose\n", leaked,
		LP_LEAK_SIZE);
	return 0;
}

/* Nothing to undo: the leaked objects stay leaked. */
static void __exit lp_kmemleak_control_exit(void)
{
}

module_init(lp_kmemleak_control_init);
module_exit(lp_kmemleak_control_exit);

MODULE_DESCRIPTION("lockless-parity: a known leak, kmemleak's positive control");
MODULE_LICENSE("GPL");
