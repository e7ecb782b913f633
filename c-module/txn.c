// SPDX-License-Identifier: GPL-2.0
/*
 * txn.c - the transaction of jbd2 (fs/jbd2/transaction.c) around commit
 * f7f497cb7024 ("jbd2: kill t_handle_lock transaction spinlock"): the
 * t_updates drain of jbd2_journal_wait_updates(), the credit check of
 * jbd2_journal_extend() and update_t_max_wait(), the three sites of the
 * patch, with t_handle_lock (TXN_HANDLE_LOCK, before the patch) and without
 * it (TXN_ATOMIC, after); and start_this_handle()'s credits, which no
 * transaction spinlock ever guarded.
 *
 * Handles start and stop under nothing more than the shared j_state_lock
 * (STOP under no lock at all); COMMIT takes j_state_lock exclusive, marks
 * the transaction locked, sleeps until t_updates is zero and opens the
 * next transaction in its place. rust-module/txn.rs is the mirror: the
 * same functions in the same order.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bug.h>
#include <linux/compiler.h>
#include <linux/container_of.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "lockless_c.h"

/**
 * lp_txn_init() - initialise a new arena's transaction
 * @txn: the transaction, zeroed
 *
 * TXN_HANDLE_LOCK, LP_TXN_CREDITS_DEFAULT credits, running, tid 0. Every lock
 * is initialised whatever the flavor, so that TXN_CONFIGURE may switch.
 */
void lp_txn_init(struct lp_txn *txn)
{
	rwlock_init(&txn->j_state_lock);
	init_waitqueue_head(&txn->j_wait_updates);
	spin_lock_init(&txn->t_handle_lock);
	mutex_init(&txn->j_commit_mutex);
	txn->flavor = LP_TXN_HANDLE_LOCK;
	txn->t_state = LP_TXN_RUNNING;
	txn->t_tid = 0;
	txn->t_start = ktime_get_ns();
	txn->j_max_transaction_buffers = LP_TXN_CREDITS_DEFAULT;
	atomic_set(&txn->t_updates, 0);
	atomic_set(&txn->t_outstanding_credits, 0);
	txn->t_max_wait = 0;
	atomic64_set(&txn->late_starts, 0);
	atomic64_set(&txn->overshoots, 0);
	atomic_set(&txn->credits_hwm, 0);
}

/**
 * lp_txn_arena() - the arena a transaction belongs to
 * @txn: the transaction, embedded in its arena as every one is
 *
 * For the stalls its race tests ask for (lp_delay_atomic()).
 *
 * Return: the arena.
 */
static struct lp_arena *lp_txn_arena(struct lp_txn *txn)
{
	return container_of(txn, struct lp_arena, txn);
}

/*
 * Not jbd2's: what TXN_STAT reports of the adders. @found is the sum an
 * adder found before its own request: above the limit, another request,
 * about to be refused and taken back, was in flight (an overshoot).
 * Relaxed: the counters order nothing.
 */
static void lp_txn_note_found(struct lp_txn *txn, int found)
{
	int hwm = atomic_read(&txn->credits_hwm);

	if (found > txn->j_max_transaction_buffers)
		atomic64_inc(&txn->overshoots);
	while (hwm < found &&
	       !atomic_try_cmpxchg_relaxed(&txn->credits_hwm, &hwm, found))
		;
}

/**
 * lp_add_transaction_credits() - add a request to the outstanding credits
 * @txn: the transaction, running; j_state_lock held shared
 * @nblocks: the credits wanted, at most LP_TXN_CREDITS_MAX
 * @wanted: out: the sum with this request added, as the add returned it
 *
 * jbd2's add_transaction_credits() (START) and the same lines of
 * jbd2_journal_extend(): atomic_add_return(), then atomic_sub() to take
 * the request back when the sum is over the limit. START calls it with no
 * transaction spinlock in either flavor, as jbd2 did before the patch too;
 * TXN_HANDLE_LOCK's EXTEND holds t_handle_lock around it, which excludes
 * only other EXTENDs. So the sum may overshoot the limit for a moment, yet
 * what is granted never does: each grant checked a sum that included
 * every credit granted before it (litmus jbd2-extend-undo.litmus).
 *
 * The sum cannot wrap: a request above the limit is refused before it is
 * added (jbd2's "wants too many credits"), so each request in flight is
 * at most LP_TXN_CREDITS_MAX (2^20), and a refused one is in flight only
 * between the add and the undo, under read_lock(). Without PREEMPT_RT
 * that section runs with preemption off, so at most one is in flight per
 * CPU and the sum stays below (NR_CPUS + 1) * 2^20. Under PREEMPT_RT
 * read_lock() is preemptible: one per task inside the section, and a sum
 * past INT_MAX reads negative and is refused all the same; it would have
 * to wrap all the way round (2^32 / 2^20 = 4096 refused requests
 * preempted between their add and their undo at once) to be granted.
 *
 * Return: 0, or -ENOSPC if the credits would exceed the limit (nothing
 * added then).
 */
static int lp_add_transaction_credits(struct lp_txn *txn, u32 nblocks,
				      int *wanted)
{
	int max = txn->j_max_transaction_buffers;

	/* max > 0: the request fits an int once it passes. */
	if (nblocks > (u32)max)
		return -ENOSPC;
	*wanted = atomic_add_return(nblocks, &txn->t_outstanding_credits);
	lp_delay_atomic(lp_txn_arena(txn), LP_DELAY_TXN_EXTEND_ADDED);
	lp_txn_note_found(txn, *wanted - (int)nblocks);
	if (*wanted < 0 || *wanted > max) {
		atomic_sub(nblocks, &txn->t_outstanding_credits);
		return -ENOSPC;
	}
	return 0;
}

/**
 * lp_txn_update_max_wait() - jbd2's update_t_max_wait(), the third site
 * @txn: the transaction; j_state_lock held shared
 * @ts: when the START began (ktime_get_ns())
 *
 * If the transaction opened after @ts, the START waited for it: raise
 * t_max_wait to that wait. TXN_HANDLE_LOCK, before the patch: compare
 * and store under t_handle_lock. TXN_ATOMIC, the patch's loop:
 * READ_ONCE(), then ``while (old < new) old = cmpxchg(...)``; cmpxchg()
 * is fully ordered and returns what it found, so the loop ends once the
 * maximum is at least @new, whoever stored it (litmus
 * jbd2-max-spinlock.litmus and jbd2-max-cmpxchg.litmus, the same loops).
 * LP_DELAY_TXN_MAX_WAIT_READ stalls between the read and the store.
 */
static void lp_txn_update_max_wait(struct lp_txn *txn, u64 ts)
{
	struct lp_arena *arena = lp_txn_arena(txn);
	u64 newts, oldts;

	if (txn->t_start <= ts)
		return;
	newts = txn->t_start - ts;
	if (txn->flavor == LP_TXN_HANDLE_LOCK) {
		spin_lock(&txn->t_handle_lock);
		if (newts > txn->t_max_wait) {
			lp_delay_atomic(arena, LP_DELAY_TXN_MAX_WAIT_READ);
			txn->t_max_wait = newts;
		}
		spin_unlock(&txn->t_handle_lock);
		return;
	}
	oldts = READ_ONCE(txn->t_max_wait);
	while (oldts < newts) {
		lp_delay_atomic(arena, LP_DELAY_TXN_MAX_WAIT_READ);
		oldts = cmpxchg(&txn->t_max_wait, oldts, newts);
	}
}

/**
 * lp_txn_start() - count a new handle in the running transaction
 * @txn: the transaction
 * @h: the handle, owned by the caller
 * @nblocks: the credits it starts with, at most LP_TXN_CREDITS_MAX
 * @ts: when the START began (ktime_get_ns()), kept across retries
 *
 * jbd2's start_this_handle(): under the shared j_state_lock, the state
 * check, the credits (lp_add_transaction_credits(); none for 0), the
 * wait (lp_txn_update_max_wait()), then the handle counted in @t_updates.
 * The check of @t_state and the increment of @t_updates both run under
 * the shared j_state_lock, and the committer takes it exclusive to lock
 * the transaction and to read @t_updates (commit message 1.b): it
 * excludes the whole check-and-increment, so a START either counted its
 * handle before the committer's lock (and the drain waits for it) or sees
 * the transaction locked and answers -EAGAIN; it never counts a handle
 * the drain has already seen zero without.
 * Litmus: shared-tests/litmus/jbd2-start-vs-drain.litmus. The re-read of
 * @t_tid after the increment counts, in @late_starts, the STARTs that
 * break this (always 0 here).
 *
 * Return: 0, -EAGAIN if the transaction is locked for commit, or -ENOSPC
 * if the credits would exceed the limit.
 */
int lp_txn_start(struct lp_txn *txn, struct lp_txn_handle *h, u32 nblocks,
		 u64 ts)
{
	int wanted;
	u64 tid;

	read_lock(&txn->j_state_lock);
	if (txn->t_state != LP_TXN_RUNNING) {
		read_unlock(&txn->j_state_lock);
		return -EAGAIN;
	}
	if (nblocks &&
	    lp_add_transaction_credits(txn, nblocks, &wanted)) {
		read_unlock(&txn->j_state_lock);
		return -ENOSPC;
	}
	lp_txn_update_max_wait(txn, ts);
	tid = txn->t_tid;
	atomic_inc(&txn->t_updates);
	if (READ_ONCE(txn->t_tid) != tid)
		atomic64_inc(&txn->late_starts);
	read_unlock(&txn->j_state_lock);
	h->tid = tid;
	h->credits = nblocks;
	return 0;
}

/**
 * lp_txn_stop() - give a handle's credits back and uncount it
 * @txn: the transaction
 * @h: a handle lp_txn_start() counted; the caller frees it after
 *
 * jbd2's stop_this_handle(), under no lock in either flavor (jbd2 took
 * none here before the patch either). atomic_dec_and_test() is fully
 * ordered: the credits given back are seen by whoever sees the handle
 * gone. wake_up() needs no transaction lock because the committer queued
 * itself (prepare_to_wait(), under the wait-queue lock) before it read
 * @t_updates, and wake_up() takes the same wait-queue lock: if the
 * waker's critical section comes first, the decrement before it is
 * visible to the committer's read after its own acquisition of that lock;
 * if the committer's comes first, wake_up() finds it queued. No wakeup
 * is lost. The lock alone carries this: the litmus test
 * shared-tests/litmus/jbd2-drain-wakeup.litmus still answers Never with a
 * relaxed decrement and without set_current_state()'s barrier.
 *
 * Return: the credits the handle gave back.
 */
u32 lp_txn_stop(struct lp_txn *txn, struct lp_txn_handle *h)
{
	atomic_sub(h->credits, &txn->t_outstanding_credits);
	if (atomic_dec_and_test(&txn->t_updates))
		wake_up(&txn->j_wait_updates);
	return h->credits;
}

/**
 * lp_txn_extend() - grant a running handle @nblocks more credits
 * @txn: the transaction
 * @h: a handle lp_txn_start() counted, owned by the caller
 * @nblocks: the credits wanted, 1..LP_TXN_CREDITS_MAX
 * @seen: out: @t_outstanding_credits with this request added
 *
 * jbd2_journal_extend(). The add-return and its undo
 * (lp_add_transaction_credits()) run under the shared j_state_lock, so a
 * holder of the exclusive lock (COMMIT, STAT) never sees an extend half
 * done. In TXN_ATOMIC, other extends and STARTs run between the add and
 * the undo: the sum may overshoot the limit for a moment, and an extend
 * may be refused because of a request that is itself refused, but what is
 * granted never exceeds the limit. TXN_HANDLE_LOCK holds t_handle_lock
 * around it, so no other EXTEND sees this one's request in flight; a
 * START still may, and this EXTEND a START's: t_handle_lock never
 * excluded START's add, which is why the patch could drop it here.
 *
 * Return: 0, -EAGAIN if the transaction is locked for commit, -ENOSPC if
 * the credits granted would exceed the limit (nothing granted then).
 */
int lp_txn_extend(struct lp_txn *txn, struct lp_txn_handle *h, u32 nblocks,
		  u32 *seen)
{
	bool locked;
	int wanted, err;

	read_lock(&txn->j_state_lock);
	if (txn->t_state != LP_TXN_RUNNING) {
		err = -EAGAIN;
		goto unlock;
	}
	lp_delay_atomic(lp_txn_arena(txn), LP_DELAY_TXN_EXTEND_LOCKED);
	/* TXN_CONFIGURE cannot change it: this handle keeps t_updates up. */
	locked = txn->flavor == LP_TXN_HANDLE_LOCK;
	if (locked)
		spin_lock(&txn->t_handle_lock);
	err = lp_add_transaction_credits(txn, nblocks, &wanted);
	if (!err) {
		h->credits += nblocks;
		*seen = wanted;
	}
	if (locked)
		spin_unlock(&txn->t_handle_lock);
unlock:
	read_unlock(&txn->j_state_lock);
	return err;
}

/**
 * lp_txn_unextend() - give @nblocks of a handle's credits back at once
 * @txn: the transaction
 * @h: a running handle owned by the caller, granted at least @nblocks
 * @nblocks: the credits given back
 *
 * The RUN loop of TXN_EXTEND, which extends and gives back per iteration.
 * No lock: like lp_txn_stop(), giving credits back only lowers the sum,
 * and the handle still counts in @t_updates, so the drain cannot end
 * before the handle's lp_txn_stop(), whose fully ordered
 * atomic_dec_and_test() comes after this atomic_sub().
 */
void lp_txn_unextend(struct lp_txn *txn, struct lp_txn_handle *h,
		     u32 nblocks)
{
	atomic_sub(nblocks, &txn->t_outstanding_credits);
	h->credits -= nblocks;
}

/**
 * lp_txn_wait_updates() - sleep until no handle runs in the transaction
 * @txn: the transaction, locked for commit
 * @timeout_ms: the longest the drain may sleep in all; 0: do not sleep
 * @slept: out: incremented for each sleep
 *
 * jbd2_journal_wait_updates(), with t_handle_lock around the check in
 * TXN_HANDLE_LOCK. Called, and returns, with j_state_lock held exclusive; drops
 * it while it sleeps. The task queues itself on j_wait_updates
 * (prepare_to_wait(): wait-queue lock, then set_current_state(), a full
 * barrier) BEFORE it reads @t_updates, so that lp_txn_stop()'s
 * atomic_dec_and_test() + wake_up() either is seen by the read or finds
 * the task on the queue and wakes it (see lp_txn_stop(); litmus
 * shared-tests/litmus/jbd2-drain-wakeup.litmus). A sleep that runs out
 * does not end the drain by itself: schedule_timeout() returns 0 once its
 * expiry jiffy has come, whether the timer or the last STOP woke the
 * task, and that STOP may also land after the timer fired but before the
 * task runs again. So the loop goes round once more and checks
 * @t_updates, as wait_event_timeout() does: -ETIMEDOUT only if a handle
 * still runs then.
 *
 * The sleep is TASK_KILLABLE: it may last LP_TXN_TIMEOUT_MAX_MS, and the
 * hung-task detector skips a killable sleep; a fatal signal wakes the
 * task and ends the drain with -EINTR (the task is dying and never sees
 * it).
 *
 * Return: 0 once @t_updates is zero, -ETIMEDOUT, or -EINTR.
 */
static int lp_txn_wait_updates(struct lp_txn *txn, u32 timeout_ms, u32 *slept)
	__must_hold(&txn->j_state_lock)
{
	long left = msecs_to_jiffies(timeout_ms);
	bool locked = txn->flavor == LP_TXN_HANDLE_LOCK;

	for (;;) {
		DEFINE_WAIT(wait);

		if (locked)
			spin_lock(&txn->t_handle_lock);
		prepare_to_wait(&txn->j_wait_updates, &wait, TASK_KILLABLE);
		lp_delay_atomic(lp_txn_arena(txn), LP_DELAY_TXN_DRAIN_QUEUED);
		if (!atomic_read(&txn->t_updates)) {
			if (locked)
				spin_unlock(&txn->t_handle_lock);
			finish_wait(&txn->j_wait_updates, &wait);
			return 0;
		}
		if (locked)
			spin_unlock(&txn->t_handle_lock);
		if (!left) {
			finish_wait(&txn->j_wait_updates, &wait);
			return -ETIMEDOUT;
		}
		write_unlock(&txn->j_state_lock);
		left = schedule_timeout(left);
		(*slept)++;
		write_lock(&txn->j_state_lock);
		finish_wait(&txn->j_wait_updates, &wait);
		if (fatal_signal_pending(current))
			return -EINTR;
	}
}

/**
 * lp_txn_commit() - lock the transaction, drain it and open the next one
 * @txn: the transaction
 * @timeout_ms: the longest the drain may sleep, 0..LP_TXN_TIMEOUT_MAX_MS
 * @out: out: slept, tid, updates, credits and wait_ns of the commit
 *
 * The start of jbd2_journal_commit_transaction(): under j_commit_mutex
 * (one COMMIT per arena at a time), takes j_state_lock exclusive, which
 * waits out every START and EXTEND in progress (see lp_txn_start() and
 * lp_txn_extend()), marks the transaction locked for commit, so that new
 * ones answer -EAGAIN, and reads @t_outstanding_credits exactly: no
 * extend is half done. Then lp_txn_wait_updates(). After the drain, the
 * smp_rmb() orders the read of @t_outstanding_credits after the read of
 * @t_updates that saw zero, pairing with the full barrier of each
 * lp_txn_stop()'s atomic_dec_and_test(): every credit given back before a
 * handle stopped is seen, so the sum must be zero. On -ETIMEDOUT and
 * -EINTR the transaction is running again, unchanged. Both waits are
 * killable: a COMMIT queued behind another one's 10 s drain, or in its
 * own, ends at once on a fatal signal, with -EINTR.
 *
 * Return: 0, -ETIMEDOUT, or -EINTR (a fatal signal).
 */
int lp_txn_commit(struct lp_txn *txn, u32 timeout_ms,
		  struct lp_txn_commit *out)
{
	u64 t0;
	int err;

	err = mutex_lock_killable(&txn->j_commit_mutex);
	if (err)
		return err;
	write_lock(&txn->j_state_lock);
	txn->t_state = LP_TXN_LOCKED_FOR_COMMIT;
	out->slept = 0;
	out->tid = txn->t_tid;
	out->updates = atomic_read(&txn->t_updates);
	out->credits = atomic_read(&txn->t_outstanding_credits);
	t0 = ktime_get_ns();
	err = lp_txn_wait_updates(txn, timeout_ms, &out->slept);
	if (err) {
		txn->t_state = LP_TXN_RUNNING;
		goto unlock;
	}
	out->wait_ns = ktime_get_ns() - t0;
	smp_rmb();	/* t_updates == 0, then the credits given back */
	WARN_ON_ONCE(atomic_read(&txn->t_outstanding_credits) != 0);
	WRITE_ONCE(txn->t_tid, txn->t_tid + 1);
	txn->t_start = ktime_get_ns();
	txn->t_max_wait = 0;
	txn->t_state = LP_TXN_RUNNING;
	txn->committed++;
unlock:
	write_unlock(&txn->j_state_lock);
	mutex_unlock(&txn->j_commit_mutex);
	return err;
}

/**
 * lp_txn_configure() - set the transaction's flavor and credit limit
 * @txn: the transaction
 * @flavor: an enum lp_txn_flavor value, already checked
 * @max_credits: the new limit, already checked (1..LP_TXN_CREDITS_MAX)
 *
 * Under j_state_lock exclusive, so no START or EXTEND is in progress; and
 * only with no handle running and no COMMIT draining, so no handle or
 * drain that read the old flavor (which decides whether t_handle_lock is
 * taken) is still using it. The overshoot counters start again.
 *
 * Return: 0, or -EBUSY if a handle runs or a COMMIT is draining.
 */
int lp_txn_configure(struct lp_txn *txn, u32 flavor, u32 max_credits)
{
	int err = 0;

	write_lock(&txn->j_state_lock);
	if (atomic_read(&txn->t_updates) ||
	    txn->t_state != LP_TXN_RUNNING) {
		err = -EBUSY;
	} else {
		txn->flavor = flavor;
		txn->j_max_transaction_buffers = max_credits;
		atomic64_set(&txn->overshoots, 0);
		atomic_set(&txn->credits_hwm, 0);
	}
	write_unlock(&txn->j_state_lock);
	return err;
}

/**
 * lp_txn_stat() - read the transaction's state and counters
 * @txn: the transaction
 * @out: out: every field but handles (the file's table, not the txn's)
 *
 * Everything is read under j_state_lock exclusive: no START or EXTEND is
 * half done, so @t_outstanding_credits never shows an overshoot (the
 * adders' own findings are @overshoots and @credits_hwm), and
 * state, tid and counters are one consistent snapshot. Handles that stop
 * meanwhile (no lock) may still lower @t_updates and the credits.
 */
void lp_txn_stat(struct lp_txn *txn, struct lp_txn_stat *out)
{
	write_lock(&txn->j_state_lock);
	out->flavor = txn->flavor;
	out->state = txn->t_state;
	out->tid = txn->t_tid;
	out->updates = atomic_read(&txn->t_updates);
	out->credits = atomic_read(&txn->t_outstanding_credits);
	out->max_credits = txn->j_max_transaction_buffers;
	out->committed = txn->committed;
	out->late_starts = atomic64_read(&txn->late_starts);
	out->max_wait_ns = txn->t_max_wait;
	out->overshoots = atomic64_read(&txn->overshoots);
	out->credits_hwm = atomic_read(&txn->credits_hwm);
	write_unlock(&txn->j_state_lock);
}

/*
 * The file's table of transaction handles, the gadget handle table's
 * twin (arena.c): its own numbering 1..LP_MAX_HANDLES, each published
 * entry one handle counted in t_updates and in lp_live_handles. A handle
 * lives in a struct lp_txn_entry, pinned by a reference while an EXTEND
 * uses it, so that no table-wide lock is held across lp_txn_extend().
 */

/*
 * A new entry for a handle being started: one reference (the table's
 * once lp_txn_handle_publish() stores it), not stopped, @h to be filled
 * by lp_txn_start(). Return: the entry, or NULL (-ENOMEM).
 */
struct lp_txn_entry *lp_txn_entry_alloc(void)
{
	struct lp_txn_entry *e;

	e = kmalloc_obj(*e, GFP_KERNEL_ACCOUNT);
	if (!e)
		return NULL;
	refcount_set(&e->ref, 1);
	spin_lock_init(&e->lock);
	e->stopped = false;
	return e;
}

/**
 * lp_txn_entry_put() - drop a reference to a transaction handle's entry
 * @e: the entry
 *
 * The last put frees it. refcount_dec_and_test() provides release
 * ordering, such that this holder's prior loads and stores of @e are done
 * before, and acquire ordering on success, such that the kfree() comes
 * after every other holder's.
 */
void lp_txn_entry_put(struct lp_txn_entry *e)
{
	if (refcount_dec_and_test(&e->ref))
		kfree(e);
}

/*
 * Resolve @handle and take a reference to its entry for the caller (an
 * EXTEND, which then uses it under the entry's lock alone and puts it).
 * txn_handles_lock, held for the lookup and the increment only, keeps a
 * STOP from taking the entry out, and so from dropping the table's
 * reference, in between. The entry's fields were initialised before
 * lp_txn_handle_publish()'s xa_store() (a release), and xa_load() reads
 * the pointer with a dependency on it. A reserved slot reads as NULL:
 * -EBADF, as for no handle.
 */
int lp_txn_handle_get(struct lp_arena *arena, u32 handle,
		      struct lp_txn_entry **e)
{
	struct lp_txn_entry *found;

	mutex_lock(&arena->txn_handles_lock);
	found = xa_load(&arena->txn_handles, handle);
	lp_delay(arena, LP_DELAY_TXN_HANDLE_GET);
	if (found)
		refcount_inc(&found->ref);
	mutex_unlock(&arena->txn_handles_lock);
	if (!found)
		return -EBADF;
	*e = found;
	return 0;
}

/*
 * Reserve a transaction handle: a slot that reads as empty (STOP and
 * EXTEND answer -EBADF for it) until lp_txn_handle_publish() fills it or
 * lp_txn_handle_release() gives it back. Return: 0, -ENOSPC or -ENOMEM.
 */
int lp_txn_handle_reserve(struct lp_arena *arena, u32 *handle)
{
	int err;

	err = xa_alloc(&arena->txn_handles, handle, NULL,
		       XA_LIMIT(1, LP_MAX_HANDLES), GFP_KERNEL_ACCOUNT);
	return err == -EBUSY ? -ENOSPC : err;
}

void lp_txn_handle_release(struct lp_arena *arena, u32 handle)
{
	xa_release(&arena->txn_handles, handle);
}

/*
 * Give the entry @e, its handle started, and its reference to the
 * reserved @handle. Counted before it is published, so a racing STOP
 * cannot take the counts below 0; storing into a reserved slot allocates
 * nothing, so it cannot fail.
 */
void lp_txn_handle_publish(struct lp_arena *arena, u32 handle,
			   struct lp_txn_entry *e)
{
	atomic_inc(&arena->nr_txn_handles);
	atomic64_inc(&lp_live_handles);
	WARN_ON_ONCE(xa_is_err(xa_store(&arena->txn_handles, handle, e,
					GFP_KERNEL)));
}

/*
 * Take a transaction handle's entry out of the table; the caller then
 * owns the table's reference and stops the handle (lp_txn_handle_stop()).
 * Under txn_handles_lock, so not between an EXTEND's lookup and its
 * reference; an EXTEND may still be using the entry. A reserved slot
 * reads as NULL and is left alone.
 */
struct lp_txn_entry *lp_txn_handle_take(struct lp_arena *arena, u32 handle)
{
	struct lp_txn_entry *e;

	mutex_lock(&arena->txn_handles_lock);
	e = xa_load(&arena->txn_handles, handle);
	if (e)
		xa_erase(&arena->txn_handles, handle);
	mutex_unlock(&arena->txn_handles_lock);
	if (e) {
		atomic_dec(&arena->nr_txn_handles);
		atomic64_dec(&lp_live_handles);
	}
	return e;
}

/**
 * lp_txn_handle_stop() - stop a handle taken out of the table
 * @arena: the arena
 * @e: an entry lp_txn_handle_take() gave the caller, with the table's
 *     reference, which this consumes
 *
 * Takes @e->lock, which waits out an EXTEND of this handle in progress,
 * and marks the entry stopped, so that an EXTEND that got its reference
 * before the take but takes the lock only now answers -EBADF. Every
 * EXTEND that answered 0 thus unlocked before this lock, and its credits
 * are in @e->h, which lp_txn_stop() reads after the unlock: nobody writes
 * @e->h once @stopped is set. Then drops the table's reference; an EXTEND
 * still holding one frees the entry with its own put.
 *
 * Return: the credits the handle gave back.
 */
u32 lp_txn_handle_stop(struct lp_arena *arena, struct lp_txn_entry *e)
{
	u32 credits;

	spin_lock(&e->lock);
	/* Only the one that took it out of the table stops it. */
	WARN_ON_ONCE(e->stopped);
	e->stopped = true;
	spin_unlock(&e->lock);
	credits = lp_txn_stop(&arena->txn, &e->h);
	lp_txn_entry_put(e);
	return credits;
}

/**
 * lp_txn_release_handles() - close(): stop every transaction handle left
 * @arena: the arena of the file being closed, before lp_arena_free()
 *
 * Takes out and stops (giving its credits back, and waking a drain that
 * waits for it) every handle still in the table, which frees its entry:
 * no EXTEND can hold a reference once the file is being released.
 */
void lp_txn_release_handles(struct lp_arena *arena)
{
	struct lp_txn_entry *e;
	unsigned long handle;

	xa_for_each(&arena->txn_handles, handle, e)
		lp_txn_handle_stop(arena, lp_txn_handle_take(arena, handle));
}
