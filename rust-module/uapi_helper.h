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
