/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * lockless_uapi.h - the one contract between userspace and both
 * lockless-parity modules (/dev/lockless_c and /dev/lockless_rust).
 *
 * lockless_c.ko includes this header; lockless_rust.ko runs bindgen on it
 * at build time, so neither side keeps a copy that could drift.
 *
 * Every ioctl takes a pointer to a fixed-size struct of __u32/__u64 fields
 * without implicit padding (both modules assert each size at build time).
 * Fields named "reserved" must be zero on input (-EINVAL otherwise) so that
 * they can gain a meaning later without breaking old callers. Output
 * fields are ignored on input.
 *
 * All or nothing: an ioctl that fails changed nothing. NEW, GET, LOOKUP,
 * TRYGET and TXN_START reserve the new handle (and NEW the gadget's
 * registry slot), copy the answer out, and only then publish; if the copy
 * fails they undo the reservation and answer -EFAULT (a TXN_START undone
 * this way was counted in t_updates, and its credits in
 * t_outstanding_credits, between its start and its stop: a COMMIT or an
 * EXTEND meanwhile may have seen it). PUT, RMW, RUN, TXN_STOP, TXN_EXTEND
 * and TXN_COMMIT cannot be undone: they first write the argument back
 * unchanged, so an argument userspace cannot write fails with -EFAULT
 * before anything happened. If another thread unmaps or write-protects
 * the argument while one of those runs, the op has taken effect, the
 * answer is lost and the ioctl still returns 0: a return of 0 always
 * means "done", -EFAULT always "not done".
 *
 * Each open file is an arena: its own gadgets, handles, registry and
 * read-modify-write variable. Gadgets form a tree: each holds a strong
 * reference to its parent. A handle (a small non-zero __u32) is one strong
 * reference owned by the file: PUT consumes it, NEW/GET/LOOKUP/TRYGET
 * create one, close() puts every handle still held, so userspace can never
 * drive a refcount below what it owns. Gadget ids are non-zero, unique in
 * the arena and never reused.
 *
 * Errors, identical in both modules:
 *   -ENOTTY      unknown ioctl command
 *   -EFAULT      bad user pointer
 *   -EINVAL      non-zero reserved field, unknown flavor or op, RMW operand
 *                above LP_RMW_VALUE_MAX
 *   -EBADF       invalid or already-consumed handle
 *   -ENOENT      gadget gone (LOOKUP, TRYGET)
 *   -EOPNOTSUPP  op not supported by the arena's flavor (LOOKUP, LOOKUP_PUT
 *                in a flavor without a child list, GET_PUT_REFCOUNT outside
 *                LOCKLESS)
 *   -EBUSY       CONFIGURE after the arena's first NEW; TXN_CONFIGURE while
 *                a handle runs or a COMMIT drains
 *   -E2BIG       RUN iterations above LP_RUN_MAX_ITERATIONS
 *   -ENOSPC      the arena already holds LP_MAX_HANDLES handles; TXN_START
 *                or TXN_EXTEND beyond the transaction's credit limit
 *   -EDQUOT      NEW (or RUN NEW_PUT) in an arena that already holds its
 *                limit of live gadgets (LP_IOC_CONFIGURE's max_gadgets)
 *   -EAGAIN      TXN_START or TXN_EXTEND while the transaction is locked
 *                for commit
 *   -ETIMEDOUT   COMMIT's drain did not end within its timeout
 *   -ENOMEM      allocation failure
 *
 * When several errors apply, both modules answer the same one: each
 * ioctl checks its errors in the order its "Errors:" line lists them and
 * answers the first that applies. -EFAULT comes first, the copy-in of
 * the argument: nothing is checked in an argument that cannot be read.
 * An argument that can be read but not written fails with the later
 * -EFAULT its line calls "(read-only)": after the checks of the
 * argument's own fields for the ioctls that cannot be undone (they write
 * it back before they act), last for the others (the copy-out of the
 * answer); CONFIGURE and TXN_CONFIGURE write nothing back, a read-only
 * argument is no error for them. -ENOMEM has no fixed place: an
 * allocation may fail wherever the ioctl allocates, after the checks of
 * the argument's fields, so it may come before an error listed after it
 * (a NEW that cannot allocate its gadget answers -ENOMEM even in an
 * arena whose handle table is full). Conditions that share an errno
 * (a reserved field and an unknown op, both -EINVAL) need no order.
 *
 * There is no -EINTR: RUN stops early, and COMMIT stops waiting (for the
 * COMMIT before it or for its drain), only on a fatal signal, and a task
 * with a fatal signal never returns to userspace to read an errno.
 *
 * LP_ABI_VERSION changes whenever an existing ioctl's number, struct
 * layout, or documented meaning or errors change; adding an ioctl, a
 * flavor, an op or a meaning for a reserved field (zero keeping the old
 * behaviour) does not change it. Version 2: new magic (0xb7 is nsfs's and
 * remoteproc's), saturating RMW ops, all-or-nothing ioctls, no -EINTR,
 * RUN ids not capped. Added since, compatibly: the transaction
 * (TXN_*) ioctls and RUN ops, IDENTIFY's txn_flavors, the EMPTY RUN op,
 * the RACY_INC control (off unless a module parameter asks for it),
 * the GET_PUT_REFCOUNT RUN op.
 * Version 3: an arena's live gadgets are limited (-EDQUOT from NEW and
 * RUN NEW_PUT), by LP_MAX_GADGETS or CONFIGURE's max_gadgets.
 * Version 4: the transaction is jbd2's on both sides of the patch:
 * TXN_START takes credits (lp_txn_start.nblocks) and records its wait in
 * t_max_wait; TXN_STAT reports t_max_wait, the credits high-water mark and
 * the overshoots (struct lp_txn_stat grew); a request above the credit
 * limit is refused before it is added; COMMIT's waits are killable and a
 * drain whose sleep ran out checks t_updates once more (a COMMIT that
 * answered -ETIMEDOUT may now succeed); the flavor LP_TXN_LOCKED is named
 * LP_TXN_HANDLE_LOCK. Stated since, compatibly: the order of the errors
 * when several apply (what both modules already did). Added since,
 * compatibly: the registry mode (CONFIGURE's registry, IDENTIFY's
 * registries) and the TRYGET_ATOMIC_PUT RUN op.
 */
#ifndef _UAPI_LOCKLESS_PARITY_H
#define _UAPI_LOCKLESS_PARITY_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define LP_ABI_VERSION		4
/* Unlisted in 7.3's Documentation/userspace-api/ioctl/ioctl-number.rst. */
#define LP_IOC_MAGIC		0xb9
#define LP_NAME_LEN		32

#define LP_DEV_C		"/dev/lockless_c"
#define LP_DEV_RUST		"/dev/lockless_rust"

/* "No handle": the parent of a root gadget in LP_IOC_NEW. */
#define LP_HANDLE_NONE		0
/* Most handles one arena holds at a time (-ENOSPC beyond). */
#define LP_MAX_HANDLES		4096
/*
 * Most live gadgets one arena holds, the default of CONFIGURE's
 * max_gadgets (-EDQUOT beyond). Gadgets are charged to the memory cgroup
 * of the task that makes them, too.
 */
#define LP_MAX_GADGETS		1048576U	/* 2^20 */
/* Most iterations of one LP_IOC_RUN (-E2BIG beyond). */
#define LP_RUN_MAX_ITERATIONS	10000000ULL
/*
 * RUN tests for a fatal signal and offers to reschedule once every this
 * many iterations (a power of two), in both modules alike, so that the
 * loop's own cost per iteration stays small and the same in both.
 */
#define LP_RUN_CHECK_EVERY	256
/* LOOKUP_PUT/TRYGET_PUT value: the arena's newest id, re-read each time. */
#define LP_ID_NEWEST		0
/*
 * The range of the RMW variable: operands above it are refused (-EINVAL),
 * and the increments saturate at it (see enum lp_op).
 */
#define LP_RMW_VALUE_MAX	0x7fffffffULL
/* Largest credit limit and EXTEND size (-EINVAL beyond). */
#define LP_TXN_CREDITS_MAX	0x100000U
/* Credit limit of a new arena's transaction. */
#define LP_TXN_CREDITS_DEFAULT	1024
/* Longest COMMIT drain timeout, in milliseconds (-EINVAL beyond). */
#define LP_TXN_TIMEOUT_MAX_MS	10000

/*
 * Gadget reference-counting flavors; bit (1 << flavor) in lp_identify.
 * A new arena has flavor LP_FLAVOR_LOCKED until LP_IOC_CONFIGURE.
 */
enum lp_flavor {
	LP_FLAVOR_LOCKED	= 0,	/* article v1: mutex around refcnt */
	LP_FLAVOR_LOCKLESS	= 1,	/* article v2: atomic_inc / fetch_dec */
	LP_FLAVOR_WEAK_CMPXCHG	= 2,	/* article v3: cmpxchg loop, 1->0 locked */
	LP_FLAVOR_KREF_MUTEX	= 3,	/* kref_put_mutex */
	LP_FLAVOR_KREF_LOCK	= 4,	/* kref_put_lock */
	LP_FLAVOR_KREF_RWSEM	= 5,	/* kref_put_rwsem, the article's exercise */
	LP_FLAVOR_COUNT
};

/*
 * How TRYGET finds a gadget by id; bit (1 << registry) in lp_identify.
 * A new arena has registry LP_REGISTRY_LOCK until LP_IOC_CONFIGURE.
 *
 * LOCK: the lookup and the get-unless-zero run under the registry's lock,
 * which the release path takes to unregister a gadget before it frees it
 * (kvm_debugfs_open()). RCU: they run under rcu_read_lock() alone, no
 * lock taken; the release path unregisters the gadget under the lock and
 * frees it after a grace period (kfree_rcu()). Same answers either way.
 * LP_FLAVOR_LOCKED has no RCU mode: its count is a plain int that only
 * the arena mutex may read.
 */
enum lp_registry {
	LP_REGISTRY_LOCK	= 0,	/* xa_lock around the lookup */
	LP_REGISTRY_RCU		= 1,	/* rcu_read_lock(), kfree_rcu() */
	LP_REGISTRY_COUNT
};

/*
 * Read-modify-write and RUN loop ops; bit (1 << op) in lp_identify.
 *
 * The arena variable is kept in the type each pattern uses: an atomic_t
 * (the article's listings: MAX_CMPXCHG, INC_NOT_ZERO_*, FETCH_INC_CMPXCHG,
 * READ), jbd2's lockless unsigned long t_max_wait (MAX_JBD2) and the
 * pre-patch t_max_wait under its spinlock (MAX_LOCKED). SET stores the
 * value into all three; a MAX op with value 0 reads its own copy.
 *
 * Values stay in 0..LP_RMW_VALUE_MAX (INT_MAX, the atomic_t's range):
 * operands above it are refused with -EINVAL, and the increments
 * (INC_NOT_ZERO_*, FETCH_INC_CMPXCHG) saturate at it, as refcount_t
 * does, instead of wrapping: a count that wraps reads as negative or
 * dead, one that saturates only stops counting. An increment of a
 * variable at LP_RMW_VALUE_MAX stores nothing and reports old = new.
 * Every op reports the old value it replaced (or found) and the new value
 * it left, so (new - old) is exactly what the op added, with one
 * exclusion: jbd2's MAX_JBD2 loop runs one more cmpxchg() after it
 * stored, and if a concurrent SET put back the value it had replaced,
 * that cmpxchg() stores again, unreported. jbd2's t_max_wait only grows
 * (it has no SET), so the loop is kept as jbd2 wrote it; the deltas of
 * MAX_JBD2 add up as documented for struct lp_run's @delta only with no
 * SET racing it.
 *
 * INC_NOT_ZERO_CMPXCHG is the article's atomic_cmpxchg() loop;
 * INC_NOT_ZERO_TRY_CMPXCHG is the shape of the kernel's own
 * atomic_fetch_add_unless() (atomic_try_cmpxchg(), which refreshes the
 * expected value on failure): the library call itself cannot also stop at
 * LP_RMW_VALUE_MAX, so both carry that one extra test.
 *
 * GET_PUT, LOOKUP_PUT, TRYGET_PUT, ATOMIC_FLOOR, NEW_PUT, EMPTY,
 * GET_PUT_REFCOUNT and TRYGET_ATOMIC_PUT are RUN-only ops (LP_IOC_RMW
 * answers -EINVAL for them). TRYGET_ATOMIC_PUT is TRYGET_PUT with the
 * TRYGET under a spinlock (atomic context; under PREEMPT_RT a preemptible
 * section that still may not sleep) and the put after it: proof, under
 * CONFIG_DEBUG_ATOMIC_SLEEP and lockdep, that TRYGET takes no lock a
 * spinlock holder may not take (a mutex, an rw_semaphore). LOCKED arenas
 * answer -EOPNOTSUPP: their TRYGET takes the arena mutex.
 * GET_PUT_REFCOUNT is GET_PUT of a LOCKLESS gadget counted with
 * refcount_t's refcount_inc() and refcount_dec_and_test() instead of the
 * article's bare atomic_inc() and atomic_fetch_dec(): the primitive a
 * Rust LOCKLESS gadget (an Arc) uses, so that the two can be measured on
 * the same one. Both modules call the LOCKLESS get and put directly,
 * without GET_PUT's dispatch on the flavor. Only LOCKLESS arenas run it
 * (-EOPNOTSUPP in the others). EMPTY does nothing:
 * a RUN of it is the loop alone, what every other op's cost includes. NEW_PUT creates a child of
 * the RUN handle's gadget and puts it at once: a stream of short-lived
 * children whose final puts race other threads' LOOKUP_PUT/TRYGET_PUT
 * loops (which, given LP_ID_NEWEST, chase the newest gadget).
 *
 * TXN_START_STOP and TXN_EXTEND are RUN-only ops on the arena's
 * transaction (see enum lp_txn_flavor). TXN_START_STOP starts a handle of
 * its own (not in the file's table) with the RUN's value as its credits,
 * and stops it, per iteration; a refused START keeps its first time for
 * the next iteration's, as jbd2's retry loop does (see t_max_wait). TXN_EXTEND
 * starts a handle of its own, then per iteration extends it by the RUN's
 * value and gives the credits back at once, so that it can run forever
 * near the limit; when a COMMIT locks the transaction, the loop stops its
 * handle (letting the drain end) and starts a new one when it can.
 */
enum lp_op {
	LP_OP_MAX_CMPXCHG		= 0,
	LP_OP_MAX_JBD2			= 1,
	LP_OP_MAX_LOCKED		= 2,
	LP_OP_INC_NOT_ZERO_CMPXCHG	= 3,
	LP_OP_INC_NOT_ZERO_TRY_CMPXCHG	= 4,
	LP_OP_FETCH_INC_CMPXCHG		= 5,
	LP_OP_SET			= 6,
	LP_OP_READ			= 7,
	LP_OP_GET_PUT			= 8,
	LP_OP_LOOKUP_PUT		= 9,
	LP_OP_TRYGET_PUT		= 10,
	LP_OP_ATOMIC_FLOOR		= 11,
	LP_OP_NEW_PUT			= 12,
	LP_OP_TXN_START_STOP		= 13,
	LP_OP_TXN_EXTEND		= 14,
	LP_OP_EMPTY			= 15,
	LP_OP_GET_PUT_REFCOUNT		= 16,
	LP_OP_TRYGET_ATOMIC_PUT		= 17,
	LP_OP_COUNT,
	/*
	 * Not part of the contract, outside 0..LP_OP_COUNT: KCSAN's negative
	 * control. A RUN-only op whose every iteration increments an arena
	 * counter, for threads sharing a file to race on: with RUN value 0
	 * by a plain, unmarked load and store and no lock, a data race; with
	 * value 1 by a marked one (C: READ_ONCE()/WRITE_ONCE(), Rust: a
	 * relaxed Atomic load and store), a race condition (updates are lost)
	 * but no data race; with value 2 by a plain load and store under a
	 * spinlock, neither. Only a module loaded with racy_control=1 runs it
	 * (and sets its bit in lp_identify.ops); any other answers
	 * -EOPNOTSUPP, whatever the value; one that runs it answers
	 * -EINVAL for a value above 2. The RUN's @delta reports
	 * the value's counter after the loop; no test of make check runs it.
	 */
	LP_OP_RACY_INC			= 63,
};

/*
 * The transaction: jbd2's t_updates drain and jbd2_journal_extend(),
 * before and after commit f7f497cb7024 ("jbd2: kill t_handle_lock
 * transaction spinlock"); bit (1 << flavor) in lp_identify.txn_flavors.
 *
 * Each arena has one transaction, in one of two states: running (handles
 * may start) or locked for commit (COMMIT is draining it). Its fields are
 * jbd2's: t_updates (handles running), t_outstanding_credits (credits
 * granted to running handles), j_state_lock (an rwlock: START and EXTEND
 * take it shared, COMMIT exclusive), j_wait_updates (the drain's wait
 * queue) and j_max_transaction_buffers (the credit limit). COMMIT locks
 * the transaction, waits for t_updates to reach zero, and opens the next
 * one (tid + 1) in its place.
 *
 * Both flavors share what the patch did not touch: START adds its credits
 * with atomic_add_return() under the shared j_state_lock and takes them
 * back with atomic_sub() when the sum is over the limit (jbd2's
 * add_transaction_credits()), with no transaction spinlock, before and
 * after the patch. So the sum may overshoot the limit for a moment in
 * both flavors, while the credits granted never do.
 *
 * TXN_HANDLE_LOCK is the code before the patch: the drain checks
 * t_updates, EXTEND adds, checks and undoes, and START records its wait
 * in t_max_wait, each under t_handle_lock, a spinlock. Since START's add
 * never took it, the spinlock never kept EXTEND's add-check-undo from
 * overlapping another adder's (the commit message's argument); it only
 * keeps EXTENDs from overlapping each other. In TXN_ATOMIC, the code after
 * it, there is no transaction spinlock: the last STOP's
 * atomic_dec_and_test() wakes the committer with no lock held, which is
 * safe because the committer queues itself (prepare_to_wait()) before it
 * checks t_updates; EXTEND adds and undoes as START does; and START
 * raises t_max_wait with a cmpxchg() loop.
 *
 * An overshoot is an adder (START with credits, EXTEND) that found
 * t_outstanding_credits above the limit before adding its own request:
 * another request, about to be refused and taken back, was in flight.
 * TXN_STAT counts them, with the largest sum so found. With only EXTENDs
 * adding, TXN_HANDLE_LOCK never overshoots and TXN_ATOMIC may; with
 * STARTs adding too, both may.
 *
 * A new arena's transaction is TXN_HANDLE_LOCK with LP_TXN_CREDITS_DEFAULT.
 */
enum lp_txn_flavor {
	LP_TXN_HANDLE_LOCK		= 0,	/* jbd2 before f7f497cb7024 */
	LP_TXN_ATOMIC		= 1,	/* jbd2 after it */
	LP_TXN_FLAVOR_COUNT
};

/* lp_txn_stat.state */
enum lp_txn_state {
	LP_TXN_RUNNING		= 0,
	LP_TXN_LOCKED_FOR_COMMIT = 1,
};

/**
 * struct lp_identify - who answers on this device (LP_IOC_IDENTIFY)
 * @name: module name, NUL-terminated ("lockless_c" or "lockless_rust")
 * @abi_version: LP_ABI_VERSION the module was built against
 * @flavors: bitmask of implemented enum lp_flavor values
 * @ops: bitmask of implemented enum lp_op values
 * @live_gadgets: gadgets alive in the whole module, all files together
 * @live_arenas: arenas (open files) alive in the whole module
 * @live_handles: handles held in the whole module, all files together
 *		  (gadget and transaction handles)
 * @txn_flavors: bitmask of implemented enum lp_txn_flavor values
 * @registries: bitmask of implemented enum lp_registry values
 * @delay_points: bitmask of the enum lp_delay_point values LP_IOC_DELAY
 *		  accepts (0 but in a CONFIG_FAULT_INJECTION build)
 * @reserved: must be zero
 *
 * The three live counters count allocations, not what userspace can see:
 * an arena is counted from open() until its memory is freed. With no file
 * open they are all zero, and module unload warns (a kernel splat) if one
 * is not: a leak that kmemleak may miss (stale pointers keep it quiet)
 * still fails the run.
 *
 * Errors: -EFAULT, -EINVAL, -EFAULT (read-only).
 */
struct lp_identify {
	char name[LP_NAME_LEN];
	__u32 abi_version;
	__u32 flavors;
	__u64 ops;
	__u64 live_gadgets;
	__u64 live_arenas;
	__u64 live_handles;
	__u32 txn_flavors;
	__u32 registries;
	__u32 delay_points;
	__u32 reserved[1];	/* one element, not a flexible array */
};

/**
 * struct lp_configure - pick the arena's flavor (LP_IOC_CONFIGURE)
 * @flavor: in: an enum lp_flavor value
 * @max_gadgets: in: most live gadgets the arena may hold (NEW and RUN
 *		 NEW_PUT answer -EDQUOT beyond), 1 to LP_MAX_GADGETS;
 *		 0 for LP_MAX_GADGETS
 * @registry: in: an enum lp_registry value (0, LOCK, is the default)
 * @reserved: must be zero
 *
 * May be repeated until the arena's first successful LP_IOC_NEW, and
 * only while no gadget exists, published or not (a NEW in flight, or
 * one that failed while a TRYGET still held its gadget). In RCU mode
 * @max_gadgets bounds the live gadgets, not the memory of released ones
 * still waiting for a grace period.
 * Errors: -EFAULT, -EINVAL (reserved, unknown flavor or registry,
 * max_gadgets above LP_MAX_GADGETS), -EOPNOTSUPP (flavor or registry not
 * implemented by this module, LP_REGISTRY_RCU with LP_FLAVOR_LOCKED),
 * -EBUSY (a NEW succeeded, or a gadget exists).
 */
struct lp_configure {
	__u32 flavor;
	__u32 max_gadgets;
	__u32 registry;
	__u32 reserved;
};

/**
 * struct lp_new - create a gadget (LP_IOC_NEW)
 * @parent: in: handle of the parent, or LP_HANDLE_NONE for a root
 * @handle: out: handle of the new gadget (its one reference)
 * @id: out: the new gadget's id
 * @reserved: must be zero
 *
 * The new gadget holds a strong reference to its parent and, in flavors
 * with a child list, sits on the parent's list as a weak reference. The
 * first NEW that succeeds fixes the arena's flavor. A NEW that fails
 * creates nothing, but may have used up an id (ids are never reused).
 * Errors: -EFAULT, -EINVAL, -EBADF (parent), -EDQUOT, -ENOSPC, -EFAULT
 * (read-only); -ENOMEM (the gadget's allocation comes before -ENOSPC's
 * check, the handle's with it).
 */
struct lp_new {
	__u32 parent;
	__u32 handle;
	__u64 id;
	__u64 reserved[2];
};

/**
 * struct lp_get - take one more reference from a handle (LP_IOC_GET)
 * @handle: in: a handle held by this file
 * @new_handle: out: a new handle to the same gadget
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -EBADF, -ENOSPC, -EFAULT (read-only);
 * -ENOMEM.
 */
struct lp_get {
	__u32 handle;
	__u32 new_handle;
	__u64 reserved[3];
};

/**
 * struct lp_put - drop a handle's reference (LP_IOC_PUT)
 * @handle: in: a handle held by this file; consumed
 * @released: out: gadgets this put released (0, or the length of the
 *            cascade: the gadget, its parent, ...). A put that did not
 *            release the gadget may still release ancestors: a slow put
 *            of the kref flavors pins the parent across its unlock
 *            (lp_owner_pin()), and if the gadget's release ran
 *            meanwhile on another CPU, dropping that pin is the
 *            parent's last reference.
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -EFAULT (read-only), -EBADF.
 */
struct lp_put {
	__u32 handle;
	__u32 released;
	__u64 reserved[3];
};

/**
 * struct lp_lookup - upgrade a child's weak reference (LP_IOC_LOOKUP)
 * @parent: in: handle of the parent whose child list is searched
 * @handle: out: new handle to the child
 * @id: in: id of the child
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -EBADF (parent), -EOPNOTSUPP (LOCKED and
 * LOCKLESS keep no child list), -ENOENT (no such live child), -ENOSPC,
 * -EFAULT (read-only); -ENOMEM.
 */
struct lp_lookup {
	__u32 parent;
	__u32 handle;
	__u64 id;
	__u64 reserved[2];
};

/**
 * struct lp_tryget - get a gadget by id unless it is dying (LP_IOC_TRYGET)
 * @id: in: gadget id
 * @handle: out: new handle to the gadget
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -ENOENT (no such gadget, or its count already
 * reached zero), -ENOSPC, -EFAULT (read-only); -ENOMEM.
 */
struct lp_tryget {
	__u64 id;
	__u32 handle;
	__u32 reserved[5];
};

/**
 * struct lp_stat - one gadget seen through a handle (LP_IOC_STAT)
 * @handle: in: a handle held by this file
 * @refcount: out: the gadget's reference count (handles, children and
 *            in-flight references together). In flight includes, in the
 *            Rust module only, the reference a NEW of a child holds from
 *            its allocation until it publishes or fails (C takes it when
 *            it publishes): the Rust child is linked on this gadget's
 *            list at its allocation, as neither its registry slot nor
 *            the list can be reserved in 7.3's Rust
 * @id: out: the gadget's id
 * @parent_id: out: the parent's id, 0 for a root
 * @children: out: live children (each holds a reference to this gadget)
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -EBADF, -EFAULT (read-only).
 */
struct lp_stat {
	__u32 handle;
	__u32 refcount;
	__u64 id;
	__u64 parent_id;
	__u64 children;
	__u64 reserved[2];
};

/**
 * struct lp_arena_stat - the counters of this file's arena (LP_IOC_ARENA_STAT)
 * @flavor: out: the arena's enum lp_flavor
 * @handles: out: handles held by this file
 * @live: out: gadgets alive in this arena
 * @created: out: gadgets ever created in this arena
 * @freed: out: gadgets ever freed in this arena
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL, -EFAULT (read-only).
 */
struct lp_arena_stat {
	__u32 flavor;
	__u32 handles;
	__u64 live;
	__u64 created;
	__u64 freed;
	__u64 reserved[2];
};

/**
 * struct lp_rmw - one read-modify-write on the arena variable (LP_IOC_RMW)
 * @value: in: the operand (ignored by READ and FETCH_INC/INC_NOT_ZERO)
 * @old: out: the value the op replaced, or found and left alone
 * @new: out: the value the op stored, or @old if it stored nothing
 * @failed: out: failed cmpxchg attempts (retries) of this op
 * @op: in: an enum lp_op value from MAX_CMPXCHG to READ
 * @reserved: must be zero
 *
 * Errors: -EFAULT, -EINVAL (reserved, unknown or RUN-only op, value above
 * LP_RMW_VALUE_MAX, whatever the op), -EFAULT (read-only), -EOPNOTSUPP
 * (op not implemented by this module).
 */
struct lp_rmw {
	__u64 value;
	__u64 old;
	__u64 new;
	__u64 failed;
	__u32 op;
	__u32 reserved[3];
};

/**
 * struct lp_run - run a loop of one op inside the kernel (LP_IOC_RUN)
 * @op: in: an enum lp_op value
 * @handle: in: GET_PUT, GET_PUT_REFCOUNT: the gadget; LOOKUP_PUT,
 *          NEW_PUT: the parent; RMW ops: the step between operands (0 means 1); else ignored
 *          (TXN ops too)
 * @iterations: in: how many ops, at most LP_RUN_MAX_ITERATIONS
 * @value: in: RMW ops: the operand of the first iteration, at most
 *         LP_RMW_VALUE_MAX; iteration i uses value + i * step (capped at
 *         LP_RMW_VALUE_MAX) so that MAX ops keep storing, and N threads
 *         given values 1..N and step N feed interleaved operands that all
 *         need a store; LOOKUP_PUT: the child id; TRYGET_PUT,
 *         TRYGET_ATOMIC_PUT: the gadget id (all three: any id,
 *         LP_ID_NEWEST for the newest); TXN_EXTEND:
 *         the credits each iteration asks for, 1..LP_TXN_CREDITS_MAX;
 *         TXN_START_STOP: the credits each START asks for,
 *         0..LP_TXN_CREDITS_MAX; else ignored
 * @elapsed_ns: out: time the loop took
 * @completed: out: ops completed (a LOOKUP_PUT/TRYGET_PUT/
 *             TRYGET_ATOMIC_PUT that found the gadget gone completes as a
 *             failed lookup, not counted;
 *             TXN_START_STOP: handles started and stopped; TXN_EXTEND:
 *             extends granted)
 * @failed: out: failed cmpxchg attempts summed over the loop; NEW_PUT:
 *          children whose final put was not this loop's (another
 *          thread's upgrade still held them); TXN_START_STOP: starts
 *          refused (-EAGAIN, -ENOSPC); TXN_EXTEND: extends and
 *          starts refused (-ENOSPC, -EAGAIN). Every iteration is either
 *          completed or failed for the TXN ops.
 * @delta: out: RMW ops: the sum over the loop of (new - old) as each op
 *         reported it. Each store replaces exactly the value it reports as
 *         old, so over all threads the deltas add up to the variable's
 *         final minus initial value; a lost update shows as a surplus
 *         (MAX_JBD2 with a SET racing it excepted, see enum lp_op).
 * @broken: out: MAX ops: iterations after which the op's own copy of the
 *          variable, read again, was below the operand. Once max(x, v)
 *          returns, x >= v holds for good (other ops only raise x), so
 *          this is 0 unless the op gave up on a store it owed; SET in a
 *          concurrent loop may lower x and is not checked against. 0 for
 *          every other op.
 * @reserved: must be zero
 *
 * The loop runs in the caller's context; every LP_RUN_CHECK_EVERY
 * iterations it calls cond_resched() and stops early on a fatal signal
 * (the task is dying; it never sees the result).
 * Errors: -EFAULT, -EINVAL (reserved), -EOPNOTSUPP (RACY_INC in a module
 * loaded without racy_control), -EINVAL (unknown op, RMW operand above
 * LP_RMW_VALUE_MAX, TXN_EXTEND value 0 or above LP_TXN_CREDITS_MAX,
 * TXN_START_STOP value above LP_TXN_CREDITS_MAX, RACY_INC value above 2),
 * -E2BIG, -EFAULT (read-only), -EBADF (GET_PUT, GET_PUT_REFCOUNT,
 * LOOKUP_PUT, NEW_PUT), -EOPNOTSUPP (LOOKUP_PUT, GET_PUT_REFCOUNT or
 * TRYGET_ATOMIC_PUT in a flavor without it), then the loop's own:
 * NEW_PUT's -EDQUOT and -ENOMEM
 * (the iterations before the failing one stand).
 */
struct lp_run {
	__u32 op;
	__u32 handle;
	__u64 iterations;
	__u64 value;
	__u64 elapsed_ns;
	__u64 completed;
	__u64 failed;
	__u64 delta;
	__u32 broken;
	__u32 reserved[1];	/* one element, not a flexible array */
};

/**
 * struct lp_txn_configure - the transaction's flavor and credit limit
 *			     (LP_IOC_TXN_CONFIGURE)
 * @flavor: in: an enum lp_txn_flavor value
 * @max_credits: in: j_max_transaction_buffers, 1..LP_TXN_CREDITS_MAX
 * @reserved: must be zero
 *
 * Allowed while no handle is running in the transaction.
 * Errors: -EFAULT, -EINVAL (reserved, unknown flavor, credits out of
 * range), -EOPNOTSUPP (flavor not implemented), -EBUSY (handles running).
 */
struct lp_txn_configure {
	__u32 flavor;
	__u32 max_credits;
	__u64 reserved[3];
};

/**
 * struct lp_txn_start - start a handle (LP_IOC_TXN_START)
 * @tid: out: the transaction the handle runs in
 * @handle: out: the new transaction handle (one of t_updates)
 * @nblocks: in: the credits the handle starts with, 0..LP_TXN_CREDITS_MAX
 * @reserved: must be zero
 *
 * jbd2's start_this_handle(), under the shared j_state_lock: refuses a
 * transaction locked for commit (-EAGAIN); adds @nblocks to
 * t_outstanding_credits with atomic_add_return() and takes them back with
 * atomic_sub() if the sum is then over the limit (-ENOSPC; jbd2 would
 * wait for a commit and retry), in both flavors without t_handle_lock;
 * records in t_max_wait how long the START waited for the transaction it
 * joins (the time from the ioctl's entry to the transaction's opening, if
 * it opened later; a RUN TXN_START_STOP loop keeps its first time across
 * the STARTs refused meanwhile, as jbd2's retry loop does); then counts
 * the handle in t_updates. A START of 0 credits adds nothing (jbd2's
 * handles always ask for some). @nblocks above the limit is refused
 * before anything is added (jbd2: "wants too many credits").
 * A transaction handle is owned by the file like a gadget handle, in a
 * table of its own (its own numbering, its own LP_MAX_HANDLES limit:
 * gadget ioctls answer -EBADF for it and the TXN ones for a gadget's);
 * close() stops every handle still running.
 * Errors: -EFAULT, -EINVAL (reserved, @nblocks above
 * LP_TXN_CREDITS_MAX), -ENOSPC (handle table full), -EAGAIN (locked for
 * commit), -ENOSPC (the credits would exceed the limit), -EFAULT
 * (read-only); -ENOMEM (the handle's allocation comes before -EAGAIN's
 * check).
 */
struct lp_txn_start {
	__u64 tid;
	__u32 handle;
	__u32 nblocks;
	__u32 reserved[4];
};

/**
 * struct lp_txn_stop - stop a handle (LP_IOC_TXN_STOP)
 * @handle: in: a transaction handle held by this file; consumed
 * @credits: out: the credits the handle gave back
 * @reserved: must be zero
 *
 * jbd2's stop_this_handle(): gives the handle's credits back, then
 * atomic_dec_and_test(t_updates) and, on zero, wakes the committer with
 * no lock held (both flavors: jbd2 took no lock here before the patch
 * either).
 * Errors: -EFAULT, -EINVAL, -EFAULT (read-only), -EBADF.
 */
struct lp_txn_stop {
	__u32 handle;
	__u32 credits;
	__u64 reserved[3];
};

/**
 * struct lp_txn_extend - ask for more credits (LP_IOC_TXN_EXTEND)
 * @handle: in: a transaction handle held by this file
 * @nblocks: in: credits wanted, 1..LP_TXN_CREDITS_MAX
 * @credits: out: t_outstanding_credits with this request added, as the
 *	     op saw it (other handles' requests in flight included)
 * @granted: out: the handle's credits now
 * @reserved: must be zero
 *
 * jbd2_journal_extend(). On -ENOSPC and -EAGAIN nothing was granted. A
 * request above max_credits is refused before it is added; a sum that
 * wraps below zero is refused as over the limit.
 * Errors: -EFAULT, -EINVAL (reserved, @nblocks 0 or above
 * LP_TXN_CREDITS_MAX), -EFAULT (read-only), -EBADF, -EAGAIN (locked for
 * commit), -ENOSPC (the credits granted would exceed max_credits).
 */
struct lp_txn_extend {
	__u32 handle;
	__u32 nblocks;
	__u32 credits;
	__u32 granted;
	__u64 reserved[2];
};

/**
 * struct lp_txn_commit - lock, drain and replace the transaction
 *			  (LP_IOC_TXN_COMMIT)
 * @timeout_ms: in: the longest the drain may sleep in all, at most
 *		LP_TXN_TIMEOUT_MAX_MS; 0 fails at once if a handle runs
 * @slept: out: times the drain slept (schedule()) before t_updates was 0
 * @tid: out: the transaction committed (the next one is @tid + 1)
 * @updates: out: t_updates when the transaction was locked
 * @credits: out: t_outstanding_credits when it was locked, read under the
 *	     exclusive j_state_lock: exactly the credits granted, never
 *	     above max_credits
 * @wait_ns: out: time from locking to the end of the drain
 * @reserved: must be zero
 *
 * Takes j_state_lock exclusive, marks the transaction locked for commit,
 * then jbd2_journal_wait_updates()'s loop: prepare_to_wait(), check
 * t_updates, drop the lock, sleep, retake it, finish_wait(). When the
 * timeout runs out, t_updates is checked once more, as
 * wait_event_timeout() does: zero, and the commit goes on; a handle still
 * running, and COMMIT unlocks the transaction, changes nothing and answers
 * -ETIMEDOUT. Commits of one arena are serialized. Both waits, for the
 * COMMIT before it and in the drain, are killable: a fatal signal ends
 * COMMIT as -ETIMEDOUT does (the transaction running again, its tid
 * unchanged, nothing committed), with -EINTR, which the dying task never
 * sees. Cannot be undone: the argument is written back first, as PUT's is.
 * Errors: -EFAULT, -EINVAL (reserved, timeout above the maximum),
 * -EFAULT (read-only), -ETIMEDOUT.
 */
struct lp_txn_commit {
	__u32 timeout_ms;
	__u32 slept;
	__u64 tid;
	__u32 updates;
	__u32 credits;
	__u64 wait_ns;
	__u64 reserved[2];
};

/**
 * struct lp_txn_stat - the arena's transaction (LP_IOC_TXN_STAT)
 * @flavor: out: enum lp_txn_flavor
 * @state: out: enum lp_txn_state
 * @tid: out: the current transaction's id (0 for the first)
 * @updates: out: t_updates
 * @credits: out: t_outstanding_credits, read under the exclusive
 *	     j_state_lock (so no EXTEND is half done)
 * @max_credits: out: the credit limit
 * @handles: out: transaction handles held by this file
 * @committed: out: COMMITs that succeeded
 * @late_starts: out: STARTs that counted a handle in a transaction whose
 *		 tid had changed since they checked its state (a handle
 *		 counted after the drain saw zero); 0 unless START is broken
 * @max_wait_ns: out: t_max_wait of the running transaction: the longest
 *		 a START of it waited for it to open (see struct
 *		 lp_txn_start); 0 when it opens
 * @overshoots: out: adders that found t_outstanding_credits above the
 *		limit when they added (see enum lp_txn_flavor)
 * @credits_hwm: out: the largest t_outstanding_credits an adder found
 *		 when it added, its own request not included: above
 *		 max_credits exactly when @overshoots is not 0
 * @reserved: must be zero
 *
 * @overshoots and @credits_hwm count from the last TXN_CONFIGURE (from
 * open() if none): they keep counting across COMMITs.
 * Errors: -EFAULT, -EINVAL, -EFAULT (read-only).
 */
struct lp_txn_stat {
	__u32 flavor;
	__u32 state;
	__u64 tid;
	__u32 updates;
	__u32 credits;
	__u32 max_credits;
	__u32 handles;
	__u64 committed;
	__u64 late_starts;
	__u64 max_wait_ns;
	__u64 overshoots;
	__u32 credits_hwm;
	__u32 reserved[5];
};

/**
 * enum lp_delay_point - where LP_IOC_DELAY stalls the thread that gets there
 * @LP_DELAY_NEW_ALLOC: NEW, after the gadget is allocated (and, in Rust,
 *			stored in the registry), before its answer is
 *			copied out: a NEW that then fails holds an
 *			unpublished gadget this long
 * @LP_DELAY_TRYGET_HELD: TRYGET, after the count is taken, before the
 *			  gadget is tested and handed out (or put again)
 * @LP_DELAY_HANDLE_GET: a gadget handle found in the file's table, under
 *			 the table's lock, before its reference is taken
 * @LP_DELAY_PUT_UNLOCKED: a slow put (KREF_MUTEX, KREF_RWSEM) whose
 *			   decrement under the owner's lock was not the
 *			   last: after the unlock, then the lock is read,
 *			   as the unlock's slow path may still do; the
 *			   owner pin keeps it allocated
 * @LP_DELAY_UPGRADE_LOCKED: LOOKUP, the owner's lock held and the child
 *			     found, before its weak reference is upgraded
 * @LP_DELAY_TRYGET_MODE: TRYGET, after the registry mode is read (C:
 *			  inside the RCU read-side section; Rust: the
 *			  arena's config held), before the registry lookup
 * @LP_DELAY_TRYGET_FOUND: TRYGET, the gadget found in the registry, before
 *			   its get-unless-zero (under the registry lock or
 *			   inside the RCU read-side section)
 * @LP_DELAY_TXN_HANDLE_GET: a transaction handle found in the file's
 *			     table, under the table's lock, before its
 *			     reference is taken
 * @LP_DELAY_TXN_EXTEND_LOCKED: EXTEND, the entry's lock held and the
 *				handle seen running, before its credits
 * @LP_DELAY_TXN_EXTEND_ADDED: START or EXTEND, the credits added, before
 *			       the limit is checked (and the add undone)
 * @LP_DELAY_TXN_DRAIN_QUEUED: COMMIT's drain, queued on the wait queue,
 *			       before it reads t_updates
 * @LP_DELAY_TXN_MAX_WAIT_READ: START's update of t_max_wait, the
 *				maximum read and found below this START's
 *				wait, before it is raised (TXN_HANDLE_LOCK:
 *				under t_handle_lock; TXN_ATOMIC: before each
 *				cmpxchg)
 * @LP_DELAY_COUNT: the number of points
 *
 * A window that lasts a few instructions is never hit under TCG; a race
 * test stalls one of its threads there, so that a missing lock, pin or
 * check becomes a sanitizer report or a wrong count in a quick run. A
 * point reached where the thread may not sleep (a spinlock or rwlock held,
 * an RCU read-side section: atomic context, or under PREEMPT_RT a
 * preemptible section that still may not sleep) busy-waits instead.
 */
enum lp_delay_point {
	LP_DELAY_NEW_ALLOC		= 0,
	LP_DELAY_TRYGET_HELD		= 1,
	LP_DELAY_HANDLE_GET		= 2,
	LP_DELAY_PUT_UNLOCKED		= 3,
	LP_DELAY_UPGRADE_LOCKED		= 4,
	LP_DELAY_TRYGET_MODE		= 5,
	LP_DELAY_TRYGET_FOUND		= 6,
	LP_DELAY_TXN_HANDLE_GET		= 7,
	LP_DELAY_TXN_EXTEND_LOCKED	= 8,
	LP_DELAY_TXN_EXTEND_ADDED	= 9,
	LP_DELAY_TXN_DRAIN_QUEUED	= 10,
	LP_DELAY_TXN_MAX_WAIT_READ	= 11,
	LP_DELAY_COUNT
};

/* Longest LP_IOC_DELAY stall, in microseconds (-EINVAL beyond). */
#define LP_DELAY_USECS_MAX	1000000U

/**
 * struct lp_delay - stall this arena's threads at points (LP_IOC_DELAY)
 * @points: in: bitmask of enum lp_delay_point values to stall at; 0: none
 * @usecs: in: how long each stall lasts, 0 to LP_DELAY_USECS_MAX
 * @reserved: must be zero
 *
 * Not part of the contract: built only into modules made against a
 * CONFIG_FAULT_INJECTION kernel (IDENTIFY's delay_points says which points;
 * 0: none), off in a new arena, for the race tests alone. Every thread of
 * the arena that reaches a point in @points stalls @usecs there.
 * Errors: -EFAULT, -EINVAL (reserved, a point outside IDENTIFY's
 * delay_points, usecs above LP_DELAY_USECS_MAX), -EOPNOTSUPP (no delay
 * points in this build).
 */
struct lp_delay {
	__u32 points;
	__u32 usecs;
	__u32 reserved[2];
};

#define LP_IOC_IDENTIFY		_IOWR(LP_IOC_MAGIC, 0x00, struct lp_identify)
#define LP_IOC_CONFIGURE	_IOWR(LP_IOC_MAGIC, 0x01, struct lp_configure)
#define LP_IOC_NEW		_IOWR(LP_IOC_MAGIC, 0x02, struct lp_new)
#define LP_IOC_GET		_IOWR(LP_IOC_MAGIC, 0x03, struct lp_get)
#define LP_IOC_PUT		_IOWR(LP_IOC_MAGIC, 0x04, struct lp_put)
#define LP_IOC_LOOKUP		_IOWR(LP_IOC_MAGIC, 0x05, struct lp_lookup)
#define LP_IOC_TRYGET		_IOWR(LP_IOC_MAGIC, 0x06, struct lp_tryget)
#define LP_IOC_STAT		_IOWR(LP_IOC_MAGIC, 0x07, struct lp_stat)
#define LP_IOC_ARENA_STAT	_IOWR(LP_IOC_MAGIC, 0x08, struct lp_arena_stat)
#define LP_IOC_RMW		_IOWR(LP_IOC_MAGIC, 0x09, struct lp_rmw)
#define LP_IOC_RUN		_IOWR(LP_IOC_MAGIC, 0x0a, struct lp_run)
#define LP_IOC_TXN_CONFIGURE	_IOWR(LP_IOC_MAGIC, 0x0b, struct lp_txn_configure)
#define LP_IOC_TXN_START	_IOWR(LP_IOC_MAGIC, 0x0c, struct lp_txn_start)
#define LP_IOC_TXN_STOP		_IOWR(LP_IOC_MAGIC, 0x0d, struct lp_txn_stop)
#define LP_IOC_TXN_EXTEND	_IOWR(LP_IOC_MAGIC, 0x0e, struct lp_txn_extend)
#define LP_IOC_TXN_COMMIT	_IOWR(LP_IOC_MAGIC, 0x0f, struct lp_txn_commit)
#define LP_IOC_TXN_STAT		_IOWR(LP_IOC_MAGIC, 0x10, struct lp_txn_stat)

/*
 * Not part of the contract, like RACY_INC: the race tests' window
 * widener. Its number lies outside what the differential fuzz sends.
 */
#define LP_IOC_DELAY		_IOWR(LP_IOC_MAGIC, 0xff, struct lp_delay)

#endif /* _UAPI_LOCKLESS_PARITY_H */
