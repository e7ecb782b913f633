/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lockless_names.h - printable names of the contract's flavors and ops,
 * for the userspace programs of shared-tests/ (not part of the UAPI).
 */
#ifndef _LOCKLESS_NAMES_H
#define _LOCKLESS_NAMES_H

#include "lockless_uapi.h"

static const char * const flavor_names[LP_FLAVOR_COUNT] = {
	[LP_FLAVOR_LOCKED] = "LOCKED",
	[LP_FLAVOR_LOCKLESS] = "LOCKLESS",
	[LP_FLAVOR_WEAK_CMPXCHG] = "WEAK_CMPXCHG",
	[LP_FLAVOR_KREF_MUTEX] = "KREF_MUTEX",
	[LP_FLAVOR_KREF_LOCK] = "KREF_LOCK",
	[LP_FLAVOR_KREF_RWSEM] = "KREF_RWSEM",
};

static const char * const registry_names[LP_REGISTRY_COUNT] = {
	[LP_REGISTRY_LOCK] = "LOCK",
	[LP_REGISTRY_RCU] = "RCU",
};

static const char * const op_names[LP_OP_COUNT] = {
	[LP_OP_MAX_CMPXCHG] = "MAX_CMPXCHG",
	[LP_OP_MAX_JBD2] = "MAX_JBD2",
	[LP_OP_MAX_LOCKED] = "MAX_LOCKED",
	[LP_OP_INC_NOT_ZERO_CMPXCHG] = "INC_NOT_ZERO_CMPXCHG",
	[LP_OP_INC_NOT_ZERO_TRY_CMPXCHG] = "INC_NOT_ZERO_TRY_CMPXCHG",
	[LP_OP_FETCH_INC_CMPXCHG] = "FETCH_INC_CMPXCHG",
	[LP_OP_SET] = "SET",
	[LP_OP_READ] = "READ",
	[LP_OP_GET_PUT] = "GET_PUT",
	[LP_OP_LOOKUP_PUT] = "LOOKUP_PUT",
	[LP_OP_TRYGET_PUT] = "TRYGET_PUT",
	[LP_OP_ATOMIC_FLOOR] = "ATOMIC_FLOOR",
	[LP_OP_NEW_PUT] = "NEW_PUT",
	[LP_OP_TXN_START_STOP] = "TXN_START_STOP",
	[LP_OP_TXN_EXTEND] = "TXN_EXTEND",
	[LP_OP_EMPTY] = "EMPTY",
	[LP_OP_GET_PUT_REFCOUNT] = "GET_PUT_REFCOUNT",
	[LP_OP_TRYGET_ATOMIC_PUT] = "TRYGET_ATOMIC_PUT",
};

static const char * const txn_flavor_names[LP_TXN_FLAVOR_COUNT] = {
	[LP_TXN_HANDLE_LOCK] = "TXN_HANDLE_LOCK",
	[LP_TXN_ATOMIC] = "TXN_ATOMIC",
};

#endif /* _LOCKLESS_NAMES_H */
