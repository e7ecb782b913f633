// SPDX-License-Identifier: GPL-2.0

//! A minimal wait queue: `wait_queue_head_t`, `DEFINE_WAIT()`,
//! `prepare_to_wait()`, `finish_wait()`, `wake_up()` and `schedule_timeout()`.
//!
//! `kernel::sync::CondVar` is the wait queue Rust-for-Linux 7.3 offers, and it
//! cannot express jbd2's drain. Its caller tests the condition under a lock and
//! only then calls `wait()`, which queues the task; a waker that changes the
//! condition without that lock (STOP's `atomic_dec_and_test()`) can run between
//! the test and the queueing, find nobody on the queue, and the wakeup is lost.
//! jbd2 does it the other way round: the waiter queues itself first
//! ([`Wait::prepare_to_wait`]), then tests the condition, so either its test sees
//! the waker's change or the waker sees it on the queue (see `txn.rs`). Besides,
//! `CondVar` sleeps only under `kernel::sync::Lock` guards (not an `rwlock_t`)
//! and has no killable wait (`TASK_KILLABLE`), with a timeout or without.
//!
//! The entry (`DEFINE_WAIT()`) is owned by [`WaitQueueHead::with_wait`]: it lives
//! in that function's stack frame, the caller's closure only borrows it, and
//! `finish_wait()` runs before the frame goes. A `Wait` that safe code could own
//! could be leaked (`mem::forget` of a pinned box) while queued, leaving a pointer
//! to a task that may be gone on the queue for the next `wake_up()`; like
//! `CondVar`'s private entry, this one cannot be.
//!
//! No C file of the module mirrors this one: `c-module/` uses `<linux/wait.h>`
//! directly.

use core::{marker::PhantomPinned, pin::Pin, ptr};
use kernel::{
    bindings,
    prelude::*,
    str::CStr,
    sync::LockClassKey,
    task::{MAX_SCHEDULE_TIMEOUT, TASK_NORMAL},
    time::Jiffies,
    types::{NotThreadSafe, Opaque},
};
use pin_init::stack_pin_init;

/// `TASK_KILLABLE`: `kernel::task` of 7.3 has `TASK_UNINTERRUPTIBLE` and
/// `TASK_INTERRUPTIBLE` only.
const TASK_KILLABLE: c_int = bindings::TASK_KILLABLE as c_int;

/// Creates a [`WaitQueueHead`] initialiser with a lockdep class of its own, as
/// `init_waitqueue_head()` does for each call site in C.
macro_rules! new_wait_queue_head {
    ($($name:literal)?) => {
        $crate::waitqueue::WaitQueueHead::new(
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_wait_queue_head;

/// A `wait_queue_head_t`.
///
/// # Invariants
///
/// `head` was initialised by `__init_waitqueue_head()`. It is pinned: the list of
/// waiters points back into it.
#[pin_data]
pub(crate) struct WaitQueueHead {
    #[pin]
    head: Opaque<bindings::wait_queue_head>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: A `wait_queue_head_t` may be used from any thread: its list is only
// touched under its own spinlock.
unsafe impl Send for WaitQueueHead {}
// SAFETY: As above, concurrently from several threads too.
unsafe impl Sync for WaitQueueHead {}

impl WaitQueueHead {
    /// Returns an initialiser for a wait queue head; use [`new_wait_queue_head!`].
    pub(crate) fn new(name: &'static CStr, key: Pin<&'static LockClassKey>) -> impl PinInit<Self> {
        pin_init!(Self {
            _pin: PhantomPinned,
            // SAFETY: `slot` is valid while the closure runs; `name` and `key` are
            // static, as lockdep requires.
            head <- Opaque::ffi_init(|slot| unsafe {
                bindings::__init_waitqueue_head(slot, name.as_char_ptr(), key.as_ptr())
            }),
        })
    }

    /// Runs `f` with a wait-queue entry for the current task on this queue, and
    /// returns what `f` returns: `DEFINE_WAIT()`, then `f`, then `finish_wait()`.
    ///
    /// `f` queues the entry with [`Wait::prepare_to_wait`], then tests its
    /// condition, then sleeps with [`schedule_timeout`] if the condition is not met,
    /// as a C loop around `prepare_to_wait()` does; one call is one round of such a
    /// loop. The entry lives in this function's stack frame and `f` only borrows
    /// it, so it cannot outlive the call: whatever `f` did, `finish_wait()` sets the
    /// task running and unlinks the entry before this returns.
    ///
    /// ```ignore
    /// let done = head.with_wait(|wait| {
    ///     wait.prepare_to_wait();
    ///     if condition() {
    ///         return true;
    ///     }
    ///     schedule_timeout(left);
    ///     false
    /// });
    /// ```
    pub(crate) fn with_wait<R>(&self, f: impl FnOnce(Pin<&Wait<'_>>) -> R) -> R {
        stack_pin_init!(let wait = Wait::new(self));
        // From here on only shared references to the entry: a waker on another CPU
        // may write to it while it is queued.
        let wait = wait.into_ref();
        let ret = f(wait);
        wait.finish_wait();
        ret
    }

    /// `wake_up()`: wakes the waiters queued now (and at most one exclusive one,
    /// of which there are none here), as `__wake_up(head, TASK_NORMAL, 1, NULL)`.
    ///
    /// Takes the queue's spinlock, so it is ordered against [`Wait::prepare_to_wait`]
    /// (which queues under the same lock): a waiter queued before this call is
    /// woken; one queued after it will test its condition after the lock hand-off,
    /// so it sees whatever the waker did before calling this.
    pub(crate) fn wake_up(&self) {
        // SAFETY: `head` is initialised (type invariant); a null key is what the C
        // `wake_up()` macro passes.
        unsafe { bindings::__wake_up(self.head.get(), TASK_NORMAL, 1, ptr::null_mut()) };
    }
}

/// `DEFINE_WAIT()`: a wait-queue entry for the current task, which it is queued
/// on `head` with ([`Wait::prepare_to_wait`]). Only [`WaitQueueHead::with_wait`]
/// makes one, and lends it to its closure.
///
/// # Invariants
///
/// `entry` was initialised by `init_wait()` in the task that created it (its
/// `private` is that task, its wake function `autoremove_wake_function()`), and
/// is either off every list or on `head`'s list only. A `Wait` exists only in the
/// stack frame of [`WaitQueueHead::with_wait`], pinned, in the task that made it
/// (it is neither `Send` nor `Sync`), and that function calls `finish_wait()` on
/// it before it returns: the entry is unlinked before its memory is reused, and
/// before the task can exit.
#[pin_data]
pub(crate) struct Wait<'a> {
    #[pin]
    entry: Opaque<bindings::wait_queue_entry>,
    head: &'a WaitQueueHead,
    /// The entry names the task that made it: it must not be queued by another.
    _not_send: NotThreadSafe,
}

impl<'a> Wait<'a> {
    /// Returns an initialiser for an entry of the current task, on no list yet.
    ///
    /// Private: [`WaitQueueHead::with_wait`] is the only place a `Wait` is made.
    fn new(head: &'a WaitQueueHead) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs;
            // `init_wait()` initialises every field the wait code reads
            // (`flags`, `private` = current, `func`, an empty `entry` list).
            entry <- Opaque::ffi_init(|slot| unsafe { bindings::init_wait(slot) }),
            head,
            _not_send: NotThreadSafe,
        })
    }

    /// `prepare_to_wait(head, &wait, TASK_KILLABLE)`: queues the entry on `head`
    /// (unless it is queued already) and sets the task state, both under the
    /// queue's spinlock; `set_current_state()` is a full barrier, so the caller's
    /// next read of its condition is ordered after the queueing.
    ///
    /// Sleep with [`schedule_timeout`] after testing the condition; a
    /// [`WaitQueueHead::wake_up`] from then on sets the task running again, and
    /// so does a fatal signal (`TASK_KILLABLE`: `TASK_UNINTERRUPTIBLE` |
    /// `TASK_WAKEKILL`; the hung-task detector skips such a sleep). The caller
    /// tests for one after the sleep, with `fatal_signal_pending()`: a dying
    /// task's sleeps end at once.
    pub(crate) fn prepare_to_wait(self: Pin<&Self>) {
        // SAFETY: `head` is initialised (its type invariant) and outlives `self`
        // (`'a`). `entry` is initialised and belongs to the current task (type
        // invariant: `Wait` is neither `Send` nor `Sync`, so only the task that
        // made it can reach it). The entry is pinned in the frame of
        // `WaitQueueHead::with_wait`, which unlinks it with `finish_wait()` before
        // that frame goes (type invariant), so the address linked into `head`'s
        // list stays valid while it is there. Both pointers come from `Opaque` (an
        // `UnsafeCell`) behind shared references, so other CPUs writing through
        // them (a waker's `list_del_init_careful()` of the entry) is allowed.
        unsafe { bindings::prepare_to_wait(self.head.head.get(), self.entry.get(), TASK_KILLABLE) };
    }

    /// `finish_wait()`: sets the task running and unlinks the entry if a waker has
    /// not done so already. After it returns no waker touches the entry any more
    /// (`finish_wait()` takes the queue lock unless `list_empty_careful()` saw the
    /// waker's `list_del_init_careful()`, a release store, complete), so the
    /// memory may go. Only [`WaitQueueHead::with_wait`] calls it, last.
    fn finish_wait(self: Pin<&Self>) {
        // SAFETY: `head` is initialised and alive (`'a`); `entry` was initialised by
        // `init_wait()` in this task, so it is on `head`'s list or off every list
        // with an empty `entry` (type invariant), the two cases `finish_wait()`
        // handles; calling it on an entry never queued is allowed. A waker may be
        // writing to the entry as we start: we hold only a shared reference, and
        // the pointer comes from `Opaque` (an `UnsafeCell`), so that is allowed.
        unsafe { bindings::finish_wait(self.head.head.get(), self.entry.get()) };
    }
}

/// `schedule_timeout()`: sleeps in the state [`Wait::prepare_to_wait`] set, until a
/// wakeup or until `timeout` jiffies have passed. Returns the jiffies left, 0 when
/// the time ran out. Must not be called with a spinning lock held (a bug that
/// `CONFIG_DEBUG_ATOMIC_SLEEP` and lockdep report, not a memory-safety one, as for
/// `kernel::sync::CondVar`, whose waits are safe functions too).
pub(crate) fn schedule_timeout(timeout: Jiffies) -> Jiffies {
    let timeout = timeout.try_into().unwrap_or(MAX_SCHEDULE_TIMEOUT);
    // SAFETY: `schedule_timeout()` has no precondition a caller could break
    // through memory: it accepts any timeout (`timeout` is 0..=MAX_SCHEDULE_TIMEOUT
    // here), and in the `TASK_RUNNING` state it just yields. Called where sleeping
    // is not allowed, the scheduler reports it ("scheduling while atomic").
    let left = unsafe { bindings::schedule_timeout(timeout) };
    left.try_into().unwrap_or(0)
}
