// SPDX-License-Identifier: GPL-2.0
/*
 * rmw.c - read-modify-write primitives built on compare-and-swap, from
 * "Lockless patterns: more read-modify-write operations" (LWN, 2021) and
 * commit f7f497cb7024 ("jbd2: kill t_handle_lock transaction spinlock").
 *
 * Each primitive reports the value it replaced, the value it left and how
 * many of its cmpxchg attempts failed (lost a race and had to retry). The
 * increments saturate at LP_RMW_VALUE_MAX (INT_MAX) instead of wrapping,
 * as refcount_t does: see enum lp_op in lockless_uapi.h.
 */

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/limits.h>
#include <linux/spinlock.h>

#include "lockless_c.h"

/**
 * lp_max_cmpxchg() - store max(*@x, @new) into @x
 * @x: the variable
 * @new: the candidate
 * @failed: out: failed cmpxchg attempts
 *
 * The article's atomic_cmpxchg() loop: give up as soon as the value seen
 * is already larger, retry while another CPU changed it under us. Fully
 * ordered when it stores, unordered (atomic_read()) when it gives up.
 *
 * Return: the value the op replaced or found larger.
 */
static int lp_max_cmpxchg(atomic_t *x, int new, u64 *failed)
{
	int old, expected;

	old = atomic_read(x);
	do {
		expected = old;
		if (old > new)
			break;
		old = atomic_cmpxchg(x, expected, new);
		if (old != expected)
			(*failed)++;
	} while (old != expected);
	return old;
}

/**
 * lp_max_jbd2() - store max(*@p, @new) into @p, as jbd2's update_t_max_wait()
 * @p: the variable (jbd2's t_max_wait, an unsigned long)
 * @new: the candidate
 * @failed: out: failed cmpxchg attempts
 *
 * The loop exactly as commit f7f497cb7024 wrote it: READ_ONCE(), then
 * ``while (old < new) old = cmpxchg(p, old, new);``. cmpxchg() is fully
 * ordered. Note that a successful cmpxchg() returns the old value, still
 * below @new, so the loop always runs once more after storing and that
 * last cmpxchg() fails against @new itself: it is counted in @failed.
 *
 * Return: the value the op replaced or found not smaller.
 */
static unsigned long lp_max_jbd2(unsigned long *p, unsigned long new,
				 u64 *failed)
{
	unsigned long old, prev, replaced = 0;
	bool stored = false;

	old = READ_ONCE(*p);
	while (old < new) {
		prev = old;
		old = cmpxchg(p, old, new);
		if (old == prev) {
			stored = true;
			replaced = prev;
		} else {
			(*failed)++;
		}
	}
	return stored ? replaced : old;
}

/**
 * lp_max_locked() - store max(*@p, @new) into @p under @lock
 * @lock: jbd2's t_handle_lock
 * @p: the variable
 * @new: the candidate
 *
 * update_t_max_wait() before commit f7f497cb7024: a compare-and-store
 * under a spinlock, ordered by the lock's acquire and release.
 *
 * Return: the value before the op.
 */
static unsigned long lp_max_locked(spinlock_t *lock, unsigned long *p,
				   unsigned long new)
{
	unsigned long old;

	spin_lock(lock);
	old = *p;
	if (new > old)
		*p = new;
	spin_unlock(lock);
	return old;
}

/**
 * lp_inc_not_zero_cmpxchg() - increment @x unless it is zero
 * @x: the variable
 * @failed: out: failed cmpxchg attempts
 *
 * The article's "increment if non-zero" loop, the lock-free fast path of
 * get-unless-zero, which also stops at INT_MAX (saturates) rather than
 * wrap. Fully ordered when it increments, unordered otherwise.
 *
 * Return: the value before the op (0 or INT_MAX: nothing was stored).
 */
static int lp_inc_not_zero_cmpxchg(atomic_t *x, u64 *failed)
{
	int old, expected;

	old = atomic_read(x);
	do {
		expected = old;
		if (old == 0 || old == INT_MAX)
			break;
		old = atomic_cmpxchg(x, expected, expected + 1);
		if (old != expected)
			(*failed)++;
	} while (old != expected);
	return old;
}

/**
 * lp_inc_not_zero_try_cmpxchg() - increment @x unless it is zero, the library way
 * @x: the variable
 * @failed: out: failed cmpxchg attempts
 *
 * atomic_inc_not_zero() is atomic_fetch_add_unless(@x, 1, 0) != 0, and
 * the generic atomic_fetch_add_unless() (the one x86 uses) is this loop:
 * atomic_try_cmpxchg(), which on failure refreshes @old with the value it
 * found, so the loop re-reads nothing. The library call cannot also stop
 * at INT_MAX, hence its body here with that one test added. Fully ordered
 * when it increments, unordered otherwise.
 *
 * Return: the value before the op (0 or INT_MAX: nothing was stored).
 */
static int lp_inc_not_zero_try_cmpxchg(atomic_t *x, u64 *failed)
{
	int old = atomic_read(x);

	while (old != 0 && old != INT_MAX) {
		if (atomic_try_cmpxchg(x, &old, old + 1))
			break;
		(*failed)++;
	}
	return old;
}

/**
 * lp_fetch_inc_cmpxchg() - atomic_fetch_inc() written as a cmpxchg loop
 * @x: the variable
 * @failed: out: failed cmpxchg attempts
 *
 * The article's first listing, stopping at INT_MAX (saturating) rather
 * than wrap, which atomic_fetch_inc() itself cannot do. Fully ordered
 * when it increments, like atomic_fetch_inc(); unordered at INT_MAX.
 *
 * Return: the value before the increment (INT_MAX: nothing was stored).
 */
static int lp_fetch_inc_cmpxchg(atomic_t *x, u64 *failed)
{
	int old, expected;

	old = atomic_read(x);
	do {
		expected = old;
		if (old == INT_MAX)
			break;
		old = atomic_cmpxchg(x, expected, expected + 1);
		if (old != expected)
			(*failed)++;
	} while (old != expected);
	return old;
}

/* The variable never goes negative (the ops saturate): as an unsigned. */
static u64 lp_u32(int v)
{
	return (u32)v;
}

/*
 * Report an increment that found @old: it stored @old + 1 if it was
 * @allowed to (not zero, for INC_NOT_ZERO) and @old was below INT_MAX,
 * and nothing otherwise.
 */
static void lp_report_inc(struct lp_rmw *out, int old, bool allowed)
{
	out->old = lp_u32(old);
	out->new = allowed && old != INT_MAX ? out->old + 1 : out->old;
}

/**
 * lp_op_is_rmw() - whether @op is one LP_IOC_RMW performs
 * @op: an enum lp_op value
 *
 * Return: true for MAX_CMPXCHG .. READ.
 */
bool lp_op_is_rmw(u32 op)
{
	return op <= LP_OP_READ;
}

/**
 * lp_op_is_max() - whether @op is one of the MAX ops
 * @op: an enum lp_op value
 *
 * Return: true for MAX_CMPXCHG, MAX_JBD2 and MAX_LOCKED.
 */
bool lp_op_is_max(u32 op)
{
	return op == LP_OP_MAX_CMPXCHG || op == LP_OP_MAX_JBD2 ||
	       op == LP_OP_MAX_LOCKED;
}

/**
 * lp_max_read() - read a MAX op's own copy of the arena variable again
 * @arena: the arena
 * @op: MAX_CMPXCHG, MAX_JBD2 or MAX_LOCKED
 *
 * Reads the copy the way the op itself first reads it: atomic_read() of
 * the atomic_t, READ_ONCE() of jbd2's lockless t_max_wait, the pre-patch
 * t_max_wait under its spinlock. The first two are unordered, and need no
 * more: called after the op by the same thread, the read is ordered after
 * the op's own load or store of the same variable by coherence, so it
 * returns that value or a later one. RUN uses it to count (struct lp_run
 * @broken) MAX ops after which the copy is below their operand.
 *
 * Return: the copy's current value.
 */
u64 lp_max_read(struct lp_arena *arena, u32 op)
{
	u64 v;

	switch (op) {
	case LP_OP_MAX_CMPXCHG:
		return lp_u32(atomic_read(&arena->var));
	case LP_OP_MAX_JBD2:
		return READ_ONCE(arena->max_wait);
	default:
		spin_lock(&arena->max_lock);
		v = arena->max_locked;
		spin_unlock(&arena->max_lock);
		return v;
	}
}

/**
 * lp_rmw() - perform one read-modify-write op on the arena variable
 * @arena: the arena
 * @op: MAX_CMPXCHG .. READ
 * @value: the operand, at most LP_RMW_VALUE_MAX (checked by the caller)
 * @out: out: old, new and failed are filled in
 *
 * Return: 0, or -EINVAL for an op that is not an RMW op.
 */
int lp_rmw(struct lp_arena *arena, u32 op, u64 value, struct lp_rmw *out)
{
	u64 failed = 0;
	int old;

	switch (op) {
	case LP_OP_MAX_CMPXCHG:
		old = lp_max_cmpxchg(&arena->var, value, &failed);
		out->old = lp_u32(old);
		out->new = max_t(u64, out->old, value);
		break;
	case LP_OP_MAX_JBD2:
		out->old = lp_max_jbd2(&arena->max_wait, value, &failed);
		out->new = max_t(u64, out->old, value);
		break;
	case LP_OP_MAX_LOCKED:
		out->old = lp_max_locked(&arena->max_lock, &arena->max_locked,
					 value);
		out->new = max_t(u64, out->old, value);
		break;
	case LP_OP_INC_NOT_ZERO_CMPXCHG:
		old = lp_inc_not_zero_cmpxchg(&arena->var, &failed);
		lp_report_inc(out, old, old != 0);
		break;
	case LP_OP_INC_NOT_ZERO_TRY_CMPXCHG:
		old = lp_inc_not_zero_try_cmpxchg(&arena->var, &failed);
		lp_report_inc(out, old, old != 0);
		break;
	case LP_OP_FETCH_INC_CMPXCHG:
		old = lp_fetch_inc_cmpxchg(&arena->var, &failed);
		lp_report_inc(out, old, true);
		break;
	case LP_OP_SET:
		spin_lock(&arena->max_lock);
		arena->max_locked = value;
		spin_unlock(&arena->max_lock);
		WRITE_ONCE(arena->max_wait, value);
		out->old = lp_u32(atomic_xchg(&arena->var, value));
		out->new = value;
		break;
	case LP_OP_READ:
		out->old = lp_u32(atomic_read(&arena->var));
		out->new = out->old;
		break;
	default:
		return -EINVAL;
	}
	out->failed = failed;
	return 0;
}
