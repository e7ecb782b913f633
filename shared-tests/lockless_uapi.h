/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * lockless_uapi.h - the one contract between userspace and both
 * lockless-parity modules (/dev/lockless_c and /dev/lockless_rust).
 *
 * lockless_c.ko includes this header; lockless_rust.ko runs bindgen on it
 * at build time, so neither side keeps a copy that could drift.
 *
 * Every ioctl takes a pointer to a fixed-size struct. Fields named
 * "reserved" must be zero on input (-EINVAL otherwise) so that they can
 * gain a meaning later without breaking old callers.
 *
 * Errors, identical in both modules:
 *   -ENOTTY   unknown ioctl command
 *   -EFAULT   bad user pointer
 *   -EINVAL   non-zero reserved field, unknown flavor or op
 */
#ifndef _UAPI_LOCKLESS_PARITY_H
#define _UAPI_LOCKLESS_PARITY_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define LP_ABI_VERSION		1
#define LP_IOC_MAGIC		0xb7
#define LP_NAME_LEN		32

#define LP_DEV_C		"/dev/lockless_c"
#define LP_DEV_RUST		"/dev/lockless_rust"

/* Gadget reference-counting flavors; bit (1 << flavor) in lp_identify. */
enum lp_flavor {
	LP_FLAVOR_LOCKED	= 0,	/* article v1: mutex around refcnt */
	LP_FLAVOR_LOCKLESS	= 1,	/* article v2: atomic_inc / fetch_dec */
	LP_FLAVOR_WEAK_CMPXCHG	= 2,	/* article v3: cmpxchg loop, 1->0 locked */
	LP_FLAVOR_KREF_MUTEX	= 3,	/* kref_put_mutex */
	LP_FLAVOR_KREF_LOCK	= 4,	/* kref_put_lock */
	LP_FLAVOR_KREF_RWSEM	= 5,	/* kref_put_rwsem, the article's exercise */
	LP_FLAVOR_COUNT
};

/* Read-modify-write and RUN loop ops; bit (1 << op) in lp_identify. */
enum lp_op {
	LP_OP_MAX_CMPXCHG		= 0,
	LP_OP_MAX_JBD2			= 1,
	LP_OP_MAX_LOCKED		= 2,
	LP_OP_INC_NOT_ZERO_CMPXCHG	= 3,
	LP_OP_INC_NOT_ZERO_BUILTIN	= 4,
	LP_OP_FETCH_INC_CMPXCHG		= 5,
	LP_OP_SET			= 6,
	LP_OP_READ			= 7,
	LP_OP_GET_PUT			= 8,
	LP_OP_LOOKUP_PUT		= 9,
	LP_OP_TRYGET_PUT		= 10,
	LP_OP_ATOMIC_FLOOR		= 11,
	LP_OP_COUNT
};

/**
 * struct lp_identify - who answers on this device
 * @name: module name, NUL-terminated ("lockless_c" or "lockless_rust")
 * @abi_version: LP_ABI_VERSION the module was built against
 * @flavors: bitmask of implemented enum lp_flavor values
 * @ops: bitmask of implemented enum lp_op values
 * @live_gadgets: gadgets alive in the whole module, all files together
 * @reserved: must be zero
 */
struct lp_identify {
	char name[LP_NAME_LEN];
	__u32 abi_version;
	__u32 flavors;
	__u64 ops;
	__u64 live_gadgets;
	__u64 reserved[4];
};

#define LP_IOC_IDENTIFY		_IOWR(LP_IOC_MAGIC, 0x00, struct lp_identify)

#endif /* _UAPI_LOCKLESS_PARITY_H */
