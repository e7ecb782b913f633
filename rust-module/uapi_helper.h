/* SPDX-License-Identifier: GPL-2.0 */
/*
 * uapi_helper.h - what bindgen sees of the contract.
 *
 * bindgen cannot expand function-like macros such as _IOWR(), so each
 * ioctl number is also given as a const that bindgen evaluates with
 * clang (the trick of rust/bindings/bindings_helper.h); the Kbuild rule
 * strips the LP_CONST_ prefix.
 */
#include "lockless_uapi.h"

const __u32 LP_CONST_LP_IOC_IDENTIFY = LP_IOC_IDENTIFY;
const __u32 LP_CONST_LP_IOC_CONFIGURE = LP_IOC_CONFIGURE;
const __u32 LP_CONST_LP_IOC_NEW = LP_IOC_NEW;
const __u32 LP_CONST_LP_IOC_GET = LP_IOC_GET;
const __u32 LP_CONST_LP_IOC_PUT = LP_IOC_PUT;
const __u32 LP_CONST_LP_IOC_LOOKUP = LP_IOC_LOOKUP;
const __u32 LP_CONST_LP_IOC_TRYGET = LP_IOC_TRYGET;
const __u32 LP_CONST_LP_IOC_STAT = LP_IOC_STAT;
const __u32 LP_CONST_LP_IOC_ARENA_STAT = LP_IOC_ARENA_STAT;
const __u32 LP_CONST_LP_IOC_RMW = LP_IOC_RMW;
const __u32 LP_CONST_LP_IOC_RUN = LP_IOC_RUN;
const __u32 LP_CONST_LP_IOC_TXN_CONFIGURE = LP_IOC_TXN_CONFIGURE;
const __u32 LP_CONST_LP_IOC_TXN_START = LP_IOC_TXN_START;
const __u32 LP_CONST_LP_IOC_TXN_STOP = LP_IOC_TXN_STOP;
const __u32 LP_CONST_LP_IOC_TXN_EXTEND = LP_IOC_TXN_EXTEND;
const __u32 LP_CONST_LP_IOC_TXN_COMMIT = LP_IOC_TXN_COMMIT;
const __u32 LP_CONST_LP_IOC_TXN_STAT = LP_IOC_TXN_STAT;
const __u32 LP_CONST_LP_IOC_DELAY = LP_IOC_DELAY;
