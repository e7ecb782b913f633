// SPDX-License-Identifier: GPL-2.0

//! The transaction: jbd2's `t_updates` drain, `jbd2_journal_extend()` and
//! `update_t_max_wait()`, the three sites of commit f7f497cb7024 ("jbd2: kill
//! t_handle_lock transaction spinlock"), before (TXN_HANDLE_LOCK) and after
//! (TXN_ATOMIC) it; and `start_this_handle()`'s credits, which no transaction
//! spinlock ever guarded.
//!
//! Mirrors `c-module/txn.c`, function for function and in the same order. Each
//! arena has one [`Txn`], reused across commits: START counts a handle in
//! `t_updates` under the shared `j_state_lock`, STOP takes it out again with no
//! lock and wakes the committer when it was the last, EXTEND grants credits up to
//! `j_max_transaction_buffers`, and COMMIT locks the transaction, drains
//! `t_updates` to zero and opens the next one (tid + 1) in its place.
//!
//! `j_state_lock` is an `rwlock_t` ([`RwLock`]) protecting what jbd2 writes
//! only under `write_lock()` ([`TxnState`]); `t_updates` and
//! `t_outstanding_credits` are atomics, changed under the shared side or under no
//! lock at all. The drain sleeps on `j_wait_updates` through
//! [`CondVar::with_wait`], not `CondVar::wait()`: the waker takes no lock, so the
//! committer must queue itself before it reads `t_updates`.
//!
//! COMMIT's waits are killable, as C's: `j_commit_mutex` is taken with
//! `Mutex::lock_killable()` and the drain sleeps `TASK_KILLABLE`.

use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        barrier::{smp_mb, Read},
        new_condvar, new_rwlock, CondVar, Mutex, RwLock, RwLockWriteGuard, SpinLock, WaitState,
    },
    time::{msecs_to_jiffies, Instant, Monotonic},
};

use crate::{gadget::DelayRef, uapi};

/// What `j_state_lock` protects: the fields jbd2 writes only under
/// `write_lock(j_state_lock)`, read under either side.
pub(crate) struct TxnState {
    /// `enum lp_txn_flavor`.
    flavor: u32,
    /// `enum lp_txn_state`: running, or locked for commit.
    t_state: u32,
    /// The running transaction's id. Written only under the exclusive lock, and
    /// yet an atomic: START's late-start check reads it again (C's `READ_ONCE()`)
    /// to catch a START that COMMIT does not exclude, and if that ever happened, a
    /// plain field would be written while read, a data race (UB in Rust).
    t_tid: Atomic<u64>,
    /// When the running transaction opened (C's `ktime_get_ns()`).
    t_start: Instant<Monotonic>,
    /// The credit limit (`u32` in the UAPI, at most `LP_TXN_CREDITS_MAX`; an `int`
    /// in jbd2, compared with `t_outstanding_credits`).
    j_max_transaction_buffers: i32,
    /// COMMITs that succeeded.
    committed: u64,
}

/// jbd2's `handle_t` (`struct lp_txn_handle`): what one START gives. Not `Clone`:
/// [`Txn::stop`] consumes it, so a handle is stopped once.
pub(crate) struct TxnHandle {
    /// The transaction the handle runs in.
    pub(crate) tid: u64,
    /// The credits granted to the handle, counted in `t_outstanding_credits`.
    pub(crate) credits: u32,
}

/// An arena's transaction (`struct lp_txn`). `repr(C)`: C's layout, the state
/// lock first, at the transaction's own address, as rustc does not keep it:
/// elsewhere, START and EXTEND pay an address computation and a saved register
/// for it (`make bench`'s TXN rows).
#[repr(C)]
#[pin_data]
pub(crate) struct Txn {
    /// START and EXTEND take it shared, COMMIT, STAT and CONFIGURE exclusive.
    #[pin]
    j_state_lock: RwLock<TxnState>,
    /// The drain's wait queue: the last STOP wakes the committer.
    #[pin]
    j_wait_updates: CondVar,
    /// TXN_HANDLE_LOCK only: the drain's check and EXTEND's add-check-undo.
    #[pin]
    t_handle_lock: SpinLock<()>,
    /// Serializes the COMMITs of one arena.
    #[pin]
    j_commit_mutex: Mutex<()>,
    /// Handles running in the transaction.
    t_updates: Atomic<i32>,
    /// Credits granted to running handles (and, for a moment, requests being
    /// checked).
    t_outstanding_credits: Atomic<i32>,
    /// The longest a START of this transaction waited for it to open, in ns;
    /// raised under `t_handle_lock` (TXN_HANDLE_LOCK) or by cmpxchg (TXN_ATOMIC)
    /// with `j_state_lock` shared, reset under it exclusive. An atomic, as C's
    /// plain `u64` is written by cmpxchg() in one flavor.
    t_max_wait: Atomic<u64>,
    /// STARTs that saw the tid change under them: 0 unless START is broken.
    late_starts: Atomic<u64>,
    /// Adders that found `t_outstanding_credits` above the limit.
    overshoots: Atomic<u64>,
    /// The largest `t_outstanding_credits` an adder found.
    credits_hwm: Atomic<i32>,
    /// The arena's LP_IOC_DELAY knob (C's `lp_txn_arena()`).
    delays: DelayRef,
}

/// `enum lp_txn_flavor` of the code before the patch: the transaction spinlock.
fn is_locked(state: &TxnState) -> bool {
    state.flavor == uapi::LP_TXN_HANDLE_LOCK
}

impl Txn {
    /// `lp_txn_init()`: a new arena's transaction: TXN_HANDLE_LOCK with
    /// `LP_TXN_CREDITS_DEFAULT` credits, running, tid 0, stalling at the points
    /// of `delays`, the arena's.
    pub(crate) fn init(delays: DelayRef) -> impl PinInit<Self> {
        pin_init!(Self {
            j_state_lock <- new_rwlock!(
                TxnState {
                    flavor: uapi::LP_TXN_HANDLE_LOCK,
                    t_state: uapi::LP_TXN_RUNNING,
                    t_tid: Atomic::new(0),
                    t_start: Instant::now(),
                    j_max_transaction_buffers: uapi::LP_TXN_CREDITS_DEFAULT as i32,
                    committed: 0,
                },
                "lp_txn.j_state_lock"
            ),
            j_wait_updates <- new_condvar!("lp_txn.j_wait_updates"),
            t_handle_lock <- new_spinlock!((), "lp_txn.t_handle_lock"),
            j_commit_mutex <- new_mutex!((), "lp_txn.j_commit_mutex"),
            t_updates: Atomic::new(0),
            t_outstanding_credits: Atomic::new(0),
            t_max_wait: Atomic::new(0),
            late_starts: Atomic::new(0),
            overshoots: Atomic::new(0),
            credits_hwm: Atomic::new(0),
            delays,
        })
    }

    /// `lp_txn_note_found()`: not jbd2's: what TXN_STAT reports of the adders.
    /// `found` is the sum an adder found before its own request: above the
    /// limit, another request, about to be refused and taken back, was in flight
    /// (an overshoot). Relaxed: the counters order nothing.
    fn note_found(&self, state: &TxnState, found: i32) {
        let mut hwm = self.credits_hwm.load(Relaxed);
        if found > state.j_max_transaction_buffers {
            self.overshoots.add(1, Relaxed);
        }
        while hwm < found {
            match self.credits_hwm.cmpxchg(hwm, found, Relaxed) {
                Ok(_) => break,
                Err(now) => hwm = now,
            }
        }
    }

    /// `lp_add_transaction_credits()`: jbd2's `add_transaction_credits()` (START)
    /// and the same lines of `jbd2_journal_extend()`: `atomic_add_return()`
    /// (`fetch_add(Full)`), then `atomic_sub()` to take the request back when the
    /// sum is over the limit. Returns the sum with this request added, or
    /// `ENOSPC` (nothing added then). `state` is the shared `j_state_lock` guard;
    /// the transaction is running. The arena's race test may stall it between
    /// the add and the check (`LP_DELAY_TXN_EXTEND_ADDED`).
    ///
    /// START calls it with no transaction spinlock in either flavor, as jbd2 did
    /// before the patch too; TXN_HANDLE_LOCK's EXTEND holds `t_handle_lock` around
    /// it, which excludes only other EXTENDs. So the sum may overshoot the limit
    /// for a moment, yet what is granted never does: each grant checked a sum
    /// that included every credit granted before it (litmus
    /// `jbd2-extend-undo.litmus`).
    ///
    /// The sum cannot wrap: a request above the limit is refused before it is
    /// added (jbd2's "wants too many credits"), so each request in flight is at
    /// most `LP_TXN_CREDITS_MAX` (2^20), and a refused one is in flight only
    /// between the add and the undo, under `read_lock()`. Without `PREEMPT_RT`
    /// that section runs with preemption off, so at most one is in flight per
    /// CPU and the sum stays below (`NR_CPUS` + 1) * 2^20. Under `PREEMPT_RT`
    /// `read_lock()` is preemptible: one per task inside the section, and a sum
    /// past `i32::MAX` reads negative and is refused all the same; it would have
    /// to wrap all the way round (2^32 / 2^20 = 4096 refused requests preempted
    /// between their add and their undo at once) to be granted.
    fn add_transaction_credits(&self, state: &TxnState, nblocks: u32) -> Result<i32> {
        let max = state.j_max_transaction_buffers;
        // `max` > 0, so a `nblocks` that passes fits an `i32`.
        let n = match i32::try_from(nblocks) {
            Ok(n) if n <= max => n,
            _ => return Err(ENOSPC),
        };
        let wanted = self
            .t_outstanding_credits
            .fetch_add(n, Full)
            .wrapping_add(n);
        self.delays
            .get()
            .stall_atomic(uapi::LP_DELAY_TXN_EXTEND_ADDED);
        self.note_found(state, wanted.wrapping_sub(n));
        if wanted < 0 || wanted > max {
            self.t_outstanding_credits.fetch_sub(n, Relaxed);
            return Err(ENOSPC);
        }
        Ok(wanted)
    }

    /// `lp_txn_update_max_wait()`: jbd2's `update_t_max_wait()`, the third site.
    /// `state` is the shared `j_state_lock` guard; `ts` is when the START began.
    ///
    /// If the transaction opened after `ts`, the START waited for it: raise
    /// `t_max_wait` to that wait. TXN_HANDLE_LOCK, before the patch: compare and
    /// store under `t_handle_lock` (relaxed loads and stores, C's plain accesses
    /// under the lock). TXN_ATOMIC, the patch's loop: `READ_ONCE()`, then
    /// `while (old < new) old = cmpxchg(...)`; the cmpxchg is fully ordered and
    /// returns what it found, so the loop ends once the maximum is at least `new`,
    /// whoever stored it (litmus `jbd2-max-spinlock.litmus` and
    /// `jbd2-max-cmpxchg.litmus`, the same loops). The arena's race test may
    /// stall it between the read and the store (`LP_DELAY_TXN_MAX_WAIT_READ`).
    fn update_max_wait(&self, state: &TxnState, ts: Instant<Monotonic>) {
        let waited = (state.t_start - ts).as_nanos();
        if waited <= 0 {
            return;
        }
        // Positive (above), so the cast is exact.
        let newts = waited as u64;
        if is_locked(state) {
            let _handle_lock = self.t_handle_lock.lock();
            if newts > self.t_max_wait.load(Relaxed) {
                self.delays
                    .get()
                    .stall_atomic(uapi::LP_DELAY_TXN_MAX_WAIT_READ);
                self.t_max_wait.store(newts, Relaxed);
            }
            return;
        }
        let mut oldts = self.t_max_wait.load(Relaxed);
        while oldts < newts {
            self.delays
                .get()
                .stall_atomic(uapi::LP_DELAY_TXN_MAX_WAIT_READ);
            oldts = match self.t_max_wait.cmpxchg(oldts, newts, Full) {
                Ok(old) | Err(old) => old,
            };
        }
    }

    /// `lp_txn_start()`: jbd2's `start_this_handle()`. Refuses a transaction
    /// locked for commit (`EAGAIN`); adds `nblocks` credits
    /// ([`Txn::add_transaction_credits`]; none for 0; `ENOSPC` over the limit);
    /// records the wait since `ts`, when the START began, kept across retries
    /// ([`Txn::update_max_wait`]); then counts a new handle in `t_updates`.
    ///
    /// The state check and the increment (`atomic_inc()`, unordered) both run
    /// under the shared `j_state_lock`, and COMMIT sets the state under the
    /// exclusive one: the committer's `write_lock()` excludes the whole
    /// check-and-increment, so a START either increments before the committer
    /// locks (and the drain sees it) or sees the transaction locked and counts
    /// nothing; it never counts a handle in a transaction whose drain already saw
    /// zero (commit message 1.b; litmus `jbd2-start-vs-drain.litmus`). The tid is
    /// read again after the increment to count such late starts: it cannot change
    /// under the read lock, so `late_starts` stays 0.
    pub(crate) fn start(&self, nblocks: u32, ts: Instant<Monotonic>) -> Result<TxnHandle> {
        let state = self.j_state_lock.read();
        if state.t_state != uapi::LP_TXN_RUNNING {
            return Err(EAGAIN);
        }
        if nblocks != 0 {
            self.add_transaction_credits(&state, nblocks)?;
        }
        self.update_max_wait(&state, ts);
        let tid = state.t_tid.load(Relaxed);
        self.t_updates.add(1, Relaxed);
        // C's `READ_ONCE()`: `load()` is `atomic64_read()`, a volatile load, so this
        // reads the field again rather than reusing `tid`.
        if state.t_tid.load(Relaxed) != tid {
            self.late_starts.add(1, Relaxed);
        }
        drop(state);
        Ok(TxnHandle {
            tid,
            credits: nblocks,
        })
    }

    /// `lp_txn_stop()`: jbd2's `stop_this_handle()`, with no lock in either flavor.
    /// Gives the handle's credits back and takes it out of `t_updates`; the last
    /// handle wakes the committer. Returns the credits given back.
    ///
    /// `atomic_dec_and_test()` (`fetch_sub(Full)`) is fully ordered: the credits
    /// given back, and everything the handle did, are visible before its
    /// decrement. `wake_up()` (`notify_one()`) needs no transaction lock because
    /// the committer queued itself on `j_wait_updates` ([`prepare_to_wait`], under
    /// the wait-queue lock) before it read `t_updates`, and `wake_up()` takes the same
    /// wait-queue lock: if the waker's critical section comes first, the
    /// decrement before it is visible to the committer's read after its own
    /// acquisition of that lock; if the committer's comes first, the waker finds
    /// it queued and wakes it. The lock alone carries this (litmus
    /// `shared-tests/litmus/jbd2-drain-wakeup.litmus`, which still answers
    /// `Never` with a relaxed decrement and no `set_current_state()` barrier).
    ///
    /// [`prepare_to_wait`]: kernel::sync::WaitEntry::prepare_to_wait
    pub(crate) fn stop(&self, h: TxnHandle) -> u32 {
        // `h.credits` <= the credit limit <= LP_TXN_CREDITS_MAX: fits an `i32`.
        // C's `atomic_sub()`: Rust 7.3 has no `sub()`, the unused fetch is the same.
        self.t_outstanding_credits
            .fetch_sub(h.credits as i32, Relaxed);
        if self.t_updates.fetch_sub(1, Full) == 1 {
            self.j_wait_updates.notify_one();
        }
        h.credits
    }

    /// `lp_txn_extend()`: `jbd2_journal_extend()`. Grants `nblocks` more credits to
    /// `h` unless the transaction is locked for commit (`EAGAIN`) or the credits
    /// granted would exceed the limit (`ENOSPC`; nothing granted). Returns
    /// `t_outstanding_credits` with this request added, as it saw it.
    ///
    /// The add and its undo ([`Txn::add_transaction_credits`]) run under the
    /// shared `j_state_lock`, so a reader holding it exclusively (COMMIT, STAT)
    /// sees no half-done extend. In TXN_ATOMIC, other extends and STARTs run
    /// between the add and the undo: the sum may overshoot the limit for a
    /// moment, and an extend may be refused because of a request that is itself
    /// refused, but what is granted never exceeds the limit. TXN_HANDLE_LOCK
    /// holds `t_handle_lock` around it, so no other EXTEND sees this one's request
    /// in flight; a START still may, and this EXTEND a START's: `t_handle_lock`
    /// never excluded START's add, which is why the patch could drop it here.
    /// The arena's race test may stall it before the credits
    /// (`LP_DELAY_TXN_EXTEND_LOCKED`: an ioctl's EXTEND holds its handle's entry
    /// locked).
    pub(crate) fn extend(&self, h: &mut TxnHandle, nblocks: u32) -> Result<u32> {
        let state = self.j_state_lock.read();
        if state.t_state != uapi::LP_TXN_RUNNING {
            return Err(EAGAIN);
        }
        self.delays
            .get()
            .stall_atomic(uapi::LP_DELAY_TXN_EXTEND_LOCKED);
        // Dropped before `state`: `spin_unlock()`, then `read_unlock()`.
        let _handle_lock = is_locked(&state).then(|| self.t_handle_lock.lock());
        let wanted = self.add_transaction_credits(&state, nblocks)?;
        // A handle holds at most the limit (`LP_TXN_CREDITS_MAX`): no wrap.
        h.credits = h.credits.wrapping_add(nblocks);
        // 0 < `wanted` <= the limit.
        Ok(wanted as u32)
    }

    /// `lp_txn_unextend()`: gives back at once, with no lock, `nblocks` credits
    /// that [`Txn::extend`] granted to `h` (RUN TXN_EXTEND's loop). As STOP's
    /// give-back, an `atomic_sub()`.
    pub(crate) fn unextend(&self, h: &mut TxnHandle, nblocks: u32) {
        // `nblocks` was granted, so it is at most the limit and fits an `i32`.
        self.t_outstanding_credits
            .fetch_sub(nblocks as i32, Relaxed);
        // `h` holds the `nblocks` granted: no wrap.
        h.credits = h.credits.wrapping_sub(nblocks);
    }

    /// `lp_txn_wait_updates()`: `jbd2_journal_wait_updates()`. Called and
    /// returning with `j_state_lock` held exclusively (`state`); drops it while it
    /// sleeps. Waits until `t_updates` is 0, or answers `ETIMEDOUT` if a handle
    /// still runs once it slept `timeout_ms` in all (at once if `timeout_ms` is
    /// 0), or `EINTR` once a fatal signal woke it. Counts its sleeps in `slept`.
    ///
    /// Each round queues the task on `j_wait_updates` *before* reading
    /// `t_updates`; see [`Txn::stop`] for why that makes a lock-free waker
    /// safe. A round is one [`CondVar::with_wait`]: its entry is unlinked
    /// (`finish_wait()`) when the round ends, on every path: after the lock was
    /// retaken when it slept.
    ///
    /// A sleep that runs out does not end the drain by itself: `schedule_timeout()`
    /// returns 0 once its expiry jiffy has come, whether the timer or the last STOP
    /// woke the task, and that STOP may also land after the timer fired but before
    /// the task runs again. So the loop goes round once more and checks
    /// `t_updates`, as `wait_event_timeout()` does. The sleep is `TASK_KILLABLE`
    /// ([`prepare_to_wait`]): a fatal signal wakes it and ends the drain
    /// (the task is dying and never sees `EINTR`). The arena's race test may
    /// stall it between the queueing and the read (`LP_DELAY_TXN_DRAIN_QUEUED`).
    ///
    /// [`prepare_to_wait`]: kernel::sync::WaitEntry::prepare_to_wait
    fn wait_updates(
        &self,
        state: &mut RwLockWriteGuard<'_, TxnState>,
        timeout_ms: u32,
        slept: &mut u32,
    ) -> Result {
        let mut left = msecs_to_jiffies(timeout_ms);
        loop {
            // `Some` ends the drain with that result, `None` goes round again.
            let end = self.j_wait_updates.with_wait(|wait| {
                let handle_lock = is_locked(state).then(|| self.t_handle_lock.lock());
                // Queue first, then check: a STOP after this sees us on the queue.
                wait.prepare_to_wait(WaitState::Killable);
                self.delays
                    .get()
                    .stall_atomic(uapi::LP_DELAY_TXN_DRAIN_QUEUED);
                if self.t_updates.load(Relaxed) == 0 {
                    drop(handle_lock);
                    return Some(Ok(()));
                }
                drop(handle_lock);
                if left == 0 {
                    return Some(Err(ETIMEDOUT));
                }
                left = state.do_unlocked(|| wait.schedule_timeout(left));
                *slept = slept.wrapping_add(1);
                // Ran out (`left == 0`) or not, the next round checks `t_updates`.
                kernel::current!()
                    .fatal_signal_pending()
                    .then_some(Err(EINTR))
            });
            if let Some(ret) = end {
                return ret;
            }
        }
    }

    /// `lp_txn_commit()`: locks the transaction for commit, drains it
    /// ([`Txn::wait_updates`]) and opens the next one (tid + 1). Fills `out`'s
    /// tid, updates and credits (read under the exclusive lock: exact), slept
    /// and wait_ns. On `ETIMEDOUT` and `EINTR` the transaction runs on,
    /// unchanged. Both waits are killable: a COMMIT queued behind another one's
    /// 10 s drain, or in its own, ends at once on a fatal signal, with `EINTR`.
    pub(crate) fn commit(&self, timeout_ms: u32, out: &mut uapi::lp_txn_commit) -> Result {
        // Dropped in reverse: `write_unlock()`, then `mutex_unlock()`.
        let _commit = self.j_commit_mutex.lock_killable()?;
        let mut state = self.j_state_lock.write();
        state.t_state = uapi::LP_TXN_LOCKED_FOR_COMMIT;
        // Plain, as C's: nobody writes it while the lock is held exclusively.
        out.tid = *state.t_tid.get_mut();
        // Both counts are non-negative while the lock is held exclusively.
        out.updates = self.t_updates.load(Relaxed) as u32;
        out.credits = self.t_outstanding_credits.load(Relaxed) as u32;
        out.slept = 0;
        let t0 = Instant::<Monotonic>::now();
        if let Err(e) = self.wait_updates(&mut state, timeout_ms, &mut out.slept) {
            state.t_state = uapi::LP_TXN_RUNNING;
            return Err(e);
        }
        out.wait_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(0);
        // C's `smp_rmb()`: the read of `t_outstanding_credits` after the read of
        // `t_updates` that saw zero, pairing with each STOP's fully ordered
        // decrement, so that every credit given back before it is seen.
        smp_mb(Read);
        // Every handle gave its credits back (C's `WARN_ON_ONCE()`).
        warn_on_once(self.t_outstanding_credits.load(Relaxed) != 0);
        // C's `WRITE_ONCE()`: START's late-start check may read it (atomically).
        let next = state.t_tid.get_mut().wrapping_add(1);
        state.t_tid.store(next, Relaxed);
        state.t_start = Instant::now();
        self.t_max_wait.store(0, Relaxed);
        state.t_state = uapi::LP_TXN_RUNNING;
        state.committed += 1;
        Ok(())
    }

    /// `lp_txn_configure()`: sets the flavor and the credit limit, and starts the
    /// overshoot counters again. `EINVAL` for an unknown flavor or a limit out of
    /// 1..=`LP_TXN_CREDITS_MAX` (checked before the lock), `EBUSY` while a handle
    /// runs or a COMMIT is draining.
    pub(crate) fn configure(&self, flavor: u32, max_credits: u32) -> Result {
        if flavor >= uapi::LP_TXN_FLAVOR_COUNT
            || max_credits == 0
            || max_credits > uapi::LP_TXN_CREDITS_MAX
        {
            return Err(EINVAL);
        }
        let mut state = self.j_state_lock.write();
        if self.t_updates.load(Relaxed) != 0 || state.t_state != uapi::LP_TXN_RUNNING {
            return Err(EBUSY);
        }
        state.flavor = flavor;
        // At most LP_TXN_CREDITS_MAX (above): fits an `i32`.
        state.j_max_transaction_buffers = max_credits as i32;
        self.overshoots.store(0, Relaxed);
        self.credits_hwm.store(0, Relaxed);
        Ok(())
    }

    /// `lp_txn_stat()`: fills `out` (all but `handles`, which the arena's table
    /// counts), everything read under the exclusive `j_state_lock`, so that
    /// `credits` includes no half-done START or EXTEND (the adders' own findings
    /// are `overshoots` and `credits_hwm`).
    pub(crate) fn stat(&self, out: &mut uapi::lp_txn_stat) {
        let mut state = self.j_state_lock.write();
        out.flavor = state.flavor;
        out.state = state.t_state;
        out.tid = *state.t_tid.get_mut();
        // As C's `atomic_read()` into a `__u32`.
        out.updates = self.t_updates.load(Relaxed) as u32;
        out.credits = self.t_outstanding_credits.load(Relaxed) as u32;
        out.max_credits = state.j_max_transaction_buffers as u32;
        out.committed = state.committed;
        out.late_starts = self.late_starts.load(Relaxed);
        out.max_wait_ns = self.t_max_wait.load(Relaxed);
        out.overshoots = self.overshoots.load(Relaxed);
        // Never negative: 0 or a sum an adder found, which is at least 0.
        out.credits_hwm = self.credits_hwm.load(Relaxed) as u32;
    }
}

/// C's `WARN_ON_ONCE(cond)` for [`Txn::commit`]'s one call site: Rust 7.3 has
/// `warn_on!` only. Any WARN fails the run; once keeps the log readable.
fn warn_on_once(cond: bool) {
    static WARNED: Atomic<bool> = Atomic::new(false);
    if cond && !WARNED.xchg(true, Relaxed) {
        kernel::warn_on!(true);
    }
}
