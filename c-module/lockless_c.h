/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lockless_c.h - what device.c, arena.c, gadget.c, rmw.c and txn.c share inside
 * lockless_c.ko. Not a contract: that is shared-tests/lockless_uapi.h.
 */
#ifndef _LOCKLESS_C_H
#define _LOCKLESS_C_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/delay.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/processor.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "lockless_uapi.h"

/**
 * struct lp_kids - a weak list of children and the lock that fences it
 * @head: the children, linked by &lp_gadget.node; weak references
 * @mutex: protects @head in WEAK_CMPXCHG and KREF_MUTEX
 * @lock: protects @head in KREF_LOCK
 * @rwsem: protects @head in KREF_RWSEM (LOOKUP takes it shared)
 *
 * A gadget's count may only go from 1 to 0 with the lock of the list it
 * sits on held, and it leaves the list before that lock is dropped: a
 * visitor holding the lock never sees a gadget whose count is zero.
 */
struct lp_kids {
	struct list_head head;
	struct mutex mutex;		/* WEAK_CMPXCHG, KREF_MUTEX */
	spinlock_t lock;		/* KREF_LOCK */
	struct rw_semaphore rwsem;	/* KREF_RWSEM */
};

/**
 * struct lp_gadget - one node of the tree
 * @count: the count in LOCKED, a plain integer only read or written under
 *	   &lp_arena.lock (STAT too)
 * @refcnt: the count in LOCKLESS and WEAK_CMPXCHG
 * @kref: the count in the KREF_* flavors
 * @parent: strong reference to the parent, NULL for a root
 * @arena: the arena the gadget lives in
 * @id: registry key, unique in the arena, never reused
 * @node: entry in the owner's &lp_kids (parent's, or the arena's for roots)
 * @kids: this gadget's children (weak references)
 * @nr_children: live children; each holds a reference to this gadget
 * @rcu: kfree_rcu()'s, in an arena whose registry is LP_REGISTRY_RCU
 */
struct lp_gadget {
	union {
		unsigned int count;
		atomic_t refcnt;
		struct kref kref;
	};
	struct lp_gadget *parent;
	struct lp_arena *arena;
	u64 id;
	struct list_head node;
	struct lp_kids kids;
	atomic_t nr_children;
	struct rcu_head rcu;
};

/**
 * struct lp_txn - the arena's transaction: jbd2's transaction_t and the
 *		   parts of journal_t that guard it
 * @j_state_lock: START and EXTEND take it shared, COMMIT, STAT and
 *		  TXN_CONFIGURE exclusive
 * @j_wait_updates: the drain's wait queue; the last STOP wakes it
 * @t_handle_lock: TXN_HANDLE_LOCK only: the spinlock commit f7f497cb7024
 *		   killed
 * @j_commit_mutex: serializes the COMMITs of one arena
 * @flavor: enum lp_txn_flavor; written under @j_state_lock exclusive
 * @t_state: enum lp_txn_state; written under @j_state_lock exclusive
 * @t_tid: the transaction's id; written under @j_state_lock exclusive
 * @t_start: when the transaction opened (ktime_get_ns()); written under
 *	     @j_state_lock exclusive
 * @j_max_transaction_buffers: the credit limit; written under
 *			       @j_state_lock exclusive
 * @t_updates: handles running in the transaction
 * @t_outstanding_credits: credits granted to running handles (plus, for a
 *			   moment, requests being checked)
 * @t_max_wait: the longest a START of this transaction waited for it to
 *		open, in ns; raised under @t_handle_lock (TXN_HANDLE_LOCK) or
 *		by cmpxchg() (TXN_ATOMIC) with @j_state_lock shared, reset
 *		under it exclusive
 * @committed: COMMITs that succeeded; under @j_state_lock exclusive
 * @late_starts: STARTs that saw @t_tid change under them (0 unless broken)
 * @overshoots: adders that found @t_outstanding_credits above the limit
 * @credits_hwm: the largest @t_outstanding_credits an adder found
 *
 * One transaction per arena, reused: a COMMIT opens the next one in its
 * place (@t_tid + 1) instead of allocating it.
 */
struct lp_txn {
	rwlock_t j_state_lock;
	wait_queue_head_t j_wait_updates;
	spinlock_t t_handle_lock;	/* TXN_HANDLE_LOCK only */
	struct mutex j_commit_mutex;
	u32 flavor;
	u32 t_state;
	u64 t_tid;
	u64 t_start;
	int j_max_transaction_buffers;
	atomic_t t_updates;
	atomic_t t_outstanding_credits;
	u64 t_max_wait;
	u64 committed;
	atomic64_t late_starts;
	atomic64_t overshoots;
	atomic_t credits_hwm;
};

/**
 * struct lp_txn_handle - jbd2's handle_t: one update of the transaction
 * @tid: the transaction it was started in
 * @credits: credits granted to it, given back by lp_txn_stop()
 *
 * jbd2's handle lives in its task_struct, and only that task touches it.
 * Ours lives in a struct lp_txn_entry of the file's table, whose lock
 * serializes the threads of the file that use it, or on a RUN loop's
 * stack, touched by that loop only; so its fields need no lock of their
 * own.
 */
struct lp_txn_handle {
	u64 tid;
	u32 credits;
};

/**
 * struct lp_txn_entry - a transaction handle in the file's table
 * @ref: one reference that START holds from lp_txn_entry_alloc() and
 *	 gives to the table in lp_txn_handle_publish(), dropped by
 *	 lp_txn_handle_stop(), and one per EXTEND using the entry
 *	 (lp_txn_handle_get() to lp_txn_entry_put()); the last put frees it
 * @lock: held by EXTEND across its check of @stopped and its
 *	  lp_txn_extend() of @h, and by STOP to set @stopped
 * @stopped: set once, under @lock, by the STOP (or close()) that took the
 *	     entry out of the table; an EXTEND that finds it set answers
 *	     -EBADF and leaves @h alone
 * @h: the handle; filled by START before the entry is published, then
 *     written under @lock only while @stopped is false, and afterwards
 *     read by that STOP alone
 *
 * jbd2's handle_t belongs to one task, so EXTENDs of different handles run
 * concurrently under the shared j_state_lock only. Ours belong to a file
 * that many threads share: @ref keeps the entry alive for an EXTEND that a
 * STOP takes out of the table meanwhile, and @lock puts an EXTEND and the
 * STOP of the same handle in one order, so that EXTENDs of different
 * handles need no common lock but the table's, held only to find the
 * entry. Lock order: @lock, then &lp_txn.j_state_lock (read), then
 * &lp_txn.t_handle_lock; &lp_arena.txn_handles_lock is never held with
 * @lock.
 */
struct lp_txn_entry {
	refcount_t ref;
	spinlock_t lock;		/* @stopped, @h */
	bool stopped;
	struct lp_txn_handle h;
};

/**
 * struct lp_arena - one open file of /dev/lockless_c
 * @flavor: enum lp_flavor, fixed by the first NEW
 * @registry_mode: enum lp_registry, fixed with @flavor; TRYGET reads it
 *		   inside rcu_read_lock() (see lp_configure())
 * @configured: a NEW has succeeded; @flavor can no longer change
 * @config_rwsem: CONFIGURE (write) against NEWs in flight (read)
 * @lock: the article v1 "gadgets_lock": LOCKED's counts
 * @roots: weak list of the root gadgets, fenced like a gadget's @kids
 * @registry: id -> gadget, for TRYGET; NEW reserves a slot before publishing;
 *	      its own lock (LOCK mode) or a grace period before the free (RCU
 *	      mode) keeps a gadget TRYGET found from being freed
 * @handles: handle -> gadget, each entry one strong reference; a reserved
 *	     (XA_ZERO_ENTRY) slot is a handle being created, read as none
 * @handles_lock: keeps a handle's gadget alive while a reference is taken
 * @next_id: last id handed out
 * @max_gadgets: most live gadgets (CONFIGURE's max_gadgets); fixed with
 *		 @flavor
 * @nr_gadgets: live gadgets, counted from lp_gadget_alloc() to the free
 * @nr_handles: published entries in @handles
 * @created: gadgets ever created
 * @freed: gadgets ever freed
 * @var: the article's atomic_t variable
 * @max_wait: jbd2's t_max_wait after the patch (lockless)
 * @max_locked: jbd2's t_max_wait before the patch, under @max_lock
 * @max_lock: jbd2's t_handle_lock
 * @floor: private counter of the ATOMIC_FLOOR op
 * @racy: RACY_INC's counter, written with no lock and no marking on
 *	  purpose (KCSAN's negative control, module parameter racy_control)
 * @racy_marked: RACY_INC's second counter: no lock, marked accesses
 * @racy_locked: RACY_INC's third counter: plain accesses under @racy_lock
 * @racy_lock: the lock of @racy_locked
 * @atomic_ctx: held around TRYGET_ATOMIC_PUT's TRYGET, to run it where
 *		no sleeping lock may be taken (atomic context; under
 *		PREEMPT_RT, a preemptible section that may not sleep)
 * @txn: the transaction (TXN ioctls and RUN ops)
 * @txn_handles: transaction handle -> struct lp_txn_entry, each entry
 *		 one update counted in &lp_txn.t_updates and holding the
 *		 table's reference to the entry; a reserved (XA_ZERO_ENTRY)
 *		 slot reads as none, as in @handles
 * @delay_points: LP_IOC_DELAY's bitmask of enum lp_delay_point (lp_delay())
 * @delay_usecs: LP_IOC_DELAY's stall
 * @txn_handles_lock: held only to look an entry up and take a reference
 *		      to it (EXTEND) and to take it out (STOP, close()), so
 *		      that the table's reference cannot be dropped between
 *		      a lookup and its refcount_inc(); never while a handle is
 *		      used, which is under the entry's own lock
 * @nr_txn_handles: published entries in @txn_handles
 */
struct lp_arena {
	u32 flavor;
	u32 registry_mode;
	bool configured;
	struct rw_semaphore config_rwsem; /* @flavor, @configured */
	struct mutex lock;		/* LOCKED counts */
	struct lp_kids roots;
	struct xarray registry;		/* lookups vs erase: xa_lock */
	struct xarray handles;
	struct mutex handles_lock;	/* handle -> live gadget */
	atomic64_t next_id;
	u32 max_gadgets;
	atomic_t nr_gadgets;
	atomic_t nr_handles;
	atomic64_t created;
	atomic64_t freed;
	atomic_t var;
	unsigned long max_wait;
	unsigned long max_locked;
	spinlock_t max_lock;		/* @max_locked */
	atomic_t floor;
	unsigned int racy;
	unsigned int racy_marked;
	unsigned int racy_locked;
	spinlock_t racy_lock;		/* @racy_locked */
	spinlock_t atomic_ctx;		/* nothing: a no-sleep section */
	struct lp_txn txn;
	struct xarray txn_handles;
	struct mutex txn_handles_lock;	/* lookup + get vs take */
	atomic_t nr_txn_handles;
	u32 delay_points;
	u32 delay_usecs;
};

/*
 * The enum lp_delay_point values LP_IOC_DELAY accepts in this build: all
 * where the kernel can inject faults (the debug kinds), none in the perf
 * kernels make bench counts on (they have CONFIG_DEBUG_KERNEL too).
 */
#define LP_DELAY_POINTS \
	(IS_ENABLED(CONFIG_FAULT_INJECTION) ? BIT(LP_DELAY_COUNT) - 1 : 0)

/**
 * lp_delay_on() - whether the arena's race test stalls at @point
 * @arena: the arena
 * @point: an enum lp_delay_point
 *
 * Return: false, always, without CONFIG_FAULT_INJECTION.
 */
static inline bool lp_delay_on(struct lp_arena *arena, unsigned int point)
{
	/* The constant first: READ_ONCE() is a volatile load, never elided. */
	return (LP_DELAY_POINTS & BIT(point)) &&
	       (READ_ONCE(arena->delay_points) & BIT(point));
}

/**
 * lp_delay() - stall here if the arena's race test asked for it
 * @arena: the arena
 * @point: an enum lp_delay_point, reached where the caller may sleep
 *
 * Widens a window of a few instructions to LP_IOC_DELAY's stall, so that
 * a race test meets it under TCG. Compiled out without
 * CONFIG_FAULT_INJECTION (the perf kernels make bench counts on). The
 * stall lasts at least that long on the monotonic clock the tests measure
 * with: fsleep() of more than 20 ms counts jiffies, and on the rt kernel
 * under TCG a 200 ms one ended early on that clock
 * (dev.*.get_takes_its_reference_under_the_handle_lock), so it sleeps
 * again for what is left.
 */
static inline void lp_delay(struct lp_arena *arena, unsigned int point)
{
	u64 now, end;

	if (!lp_delay_on(arena, point))
		return;
	now = ktime_get_ns();
	end = now + (u64)READ_ONCE(arena->delay_usecs) * NSEC_PER_USEC;
	do {
		fsleep(DIV_ROUND_UP(end - now, NSEC_PER_USEC));
		now = ktime_get_ns();
	} while (now < end);
}

/**
 * lp_delay_atomic() - lp_delay() for a point where the caller may not sleep
 * @arena: the arena
 * @point: an enum lp_delay_point, reached under a spinlock or rwlock, or
 *	   inside an RCU read-side section
 *
 * Busy-waits on the monotonic clock instead of sleeping: in atomic
 * context, or under PREEMPT_RT, where such a section is preemptible but
 * sleeping in it is still a bug (a sleeping spinlock holds the RCU read
 * lock and migration off; CONFIG_DEBUG_ATOMIC_SLEEP splats). Not udelay():
 * under TCG its calibration fails on secondary vCPUs, and a stall ran half
 * or twice what was asked.
 */
static inline void lp_delay_atomic(struct lp_arena *arena, unsigned int point)
{
	u64 end;

	if (!lp_delay_on(arena, point))
		return;
	end = ktime_get_ns() + (u64)READ_ONCE(arena->delay_usecs) * NSEC_PER_USEC;
	while (ktime_get_ns() < end)
		cpu_relax();
}

/*
 * Gadgets alive in the whole module, all arenas together
 * (IDENTIFY.live_gadgets): counted from the allocation in lp_gadget_alloc()
 * until the kfree() in lp_gadget_free(). Relaxed: a statistic that only
 * module exit and a quiescent IDENTIFY read.
 */
extern atomic64_t lp_live_gadgets;

/* The cache every struct lp_gadget comes from (gadget.c). */
extern struct kmem_cache *lp_gadget_cache;

/* arena.c */
extern atomic64_t lp_live_arenas;
extern atomic64_t lp_live_handles;
extern struct kmem_cache *lp_arena_cache;
struct lp_arena *lp_arena_new(void);
int lp_handle_get(struct lp_arena *arena, u32 handle, struct lp_gadget **g);
int lp_handle_reserve(struct lp_arena *arena, u32 *handle);
void lp_handle_release(struct lp_arena *arena, u32 handle);
void lp_handle_publish(struct lp_arena *arena, u32 handle,
		       struct lp_gadget *g);
struct lp_gadget *lp_handle_take(struct lp_arena *arena, u32 handle);
void lp_arena_release_handles(struct lp_arena *arena);
void lp_arena_free(struct lp_arena *arena);

/* gadget.c */
void lp_kids_init(struct lp_kids *kids);
struct lp_gadget *lp_gadget_alloc(struct lp_arena *arena);
void lp_gadget_discard(struct lp_gadget *g);
void lp_gadget_publish(struct lp_gadget *g, struct lp_gadget *parent);
struct lp_gadget *lp_gadget_new(struct lp_arena *arena,
				struct lp_gadget *parent);
void lp_gadget_get(struct lp_gadget *g);
unsigned int lp_gadget_put(struct lp_gadget *g);
void lp_gadget_get_refcount(struct lp_gadget *g);
unsigned int lp_gadget_put_refcount(struct lp_gadget *g);
int lp_gadget_lookup(struct lp_gadget *parent, u64 id,
		     struct lp_gadget **child);
int lp_gadget_tryget(struct lp_arena *arena, u64 id,
		     struct lp_gadget **g);
unsigned int lp_gadget_refcount(struct lp_gadget *g);

/* rmw.c */
int lp_rmw(struct lp_arena *arena, u32 op, u64 value, struct lp_rmw *out);
bool lp_op_is_rmw(u32 op);
bool lp_op_is_max(u32 op);
u64 lp_max_read(struct lp_arena *arena, u32 op);

/* txn.c */
void lp_txn_init(struct lp_txn *txn);
int lp_txn_start(struct lp_txn *txn, struct lp_txn_handle *h, u32 nblocks,
		 u64 ts);
u32 lp_txn_stop(struct lp_txn *txn, struct lp_txn_handle *h);
int lp_txn_extend(struct lp_txn *txn, struct lp_txn_handle *h, u32 nblocks,
		  u32 *seen);
void lp_txn_unextend(struct lp_txn *txn, struct lp_txn_handle *h,
		     u32 nblocks);
int lp_txn_commit(struct lp_txn *txn, u32 timeout_ms,
		  struct lp_txn_commit *out);
int lp_txn_configure(struct lp_txn *txn, u32 flavor, u32 max_credits);
void lp_txn_stat(struct lp_txn *txn, struct lp_txn_stat *out);
struct lp_txn_entry *lp_txn_entry_alloc(void);
void lp_txn_entry_put(struct lp_txn_entry *e);
int lp_txn_handle_get(struct lp_arena *arena, u32 handle,
		      struct lp_txn_entry **e);
int lp_txn_handle_reserve(struct lp_arena *arena, u32 *handle);
void lp_txn_handle_release(struct lp_arena *arena, u32 handle);
void lp_txn_handle_publish(struct lp_arena *arena, u32 handle,
			   struct lp_txn_entry *e);
struct lp_txn_entry *lp_txn_handle_take(struct lp_arena *arena, u32 handle);
u32 lp_txn_handle_stop(struct lp_arena *arena, struct lp_txn_entry *e);
void lp_txn_release_handles(struct lp_arena *arena);

#endif /* _LOCKLESS_C_H */
