// SPDX-License-Identifier: GPL-2.0
/*
 * lockless_test.c - the judge: one kselftest_harness driver that runs every
 * test against /dev/lockless_c and /dev/lockless_rust (fixture variants).
 *
 * Runs as PID 1's child in the QEMU guest, statically linked, and prints
 * KTAP that scripts/judge.py parses with the kernel's kunit_parser.
 *
 * Both modules implement the whole contract (.reference = true): a device
 * that does not advertise (IDENTIFY) the flavor or op a test needs fails
 * that test. A variant marked .reference = false, a module still being
 * written, skips such tests with the reason instead.
 *
 * kselftest_harness.h keeps its list of tests in static variables, one
 * list per translation unit: the driver is this one file, which
 * #includes the shared part and then one file per fixture. The order of
 * the #includes is the order of the fixtures in the test list.
 *
 *   lockless_test.h      the shared part: includes, sizes, ioctl wrappers,
 *                        threads, the allocation-failure sweep
 *   lockless_dev.c       dev.*: each device as a whole (IDENTIFY, RMW, errnos)
 *   lockless_flavor.c    flavor.*: the gadgets, per reference-counting flavor
 *   lockless_txn.c       txn.*: the transaction, per transaction flavor
 *   lockless_mod.c       mod.*: unload and reload with no file open
 *   lockless_fuzz.c      fuzz.*: differential fuzzing, C and Rust in lockstep
 *   lockless_badinput.c  badinput.*: every bad argument, alone and in pairs
 */
#include "lockless_test.h"

#include "lockless_dev.c"
#include "lockless_flavor.c"
#include "lockless_txn.c"
#include "lockless_mod.c"
#include "lockless_fuzz.c"
#include "lockless_badinput.c"

TEST_HARNESS_MAIN
