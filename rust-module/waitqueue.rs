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
//! and has no uninterruptible wait with a timeout.
//!
//! No C file of the module mirrors this one: `c-module/` uses `<linux/wait.h>`
//! directly.

use core::{marker::PhantomPinned, pin::Pin, ptr};
use kernel::{
    bindings,
    prelude::*,
    str::CStr,
    sync::LockClassKey,
    task::{MAX_SCHEDULE_TIMEOUT, TASK_NORMAL, TASK_UNINTERRUPTIBLE},
    time::Jiffies,
    types::{NotThreadSafe, Opaque},
};

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
/// on `head` with ([`Wait::prepare_to_wait`]) and unlinked from it (`finish_wait()`)
/// when dropped, on every path out of the scope that holds it.
///
/// Create it pinned on the stack:
///
/// ```ignore
/// stack_pin_init!(let wait = Wait::new(&head));
/// wait.as_ref().prepare_to_wait();
/// if !condition() {
///     schedule_timeout(left);
/// }
/// // `finish_wait()` runs when `wait` goes out of scope.
/// ```
///
/// # Invariants
///
/// `entry` was initialised by `init_wait()` in the task that created it (its
/// `private` is that task, its wake function `autoremove_wake_function()`), and
/// is either off every list or on `head`'s list only. A `Wait` is `!Unpin` and
/// only made in place by a `PinInit`, so it never moves and its drop runs before
/// its memory is reused: the drop's `finish_wait()` unlinks the entry before that.
#[pin_data(PinnedDrop)]
pub(crate) struct Wait<'a> {
    #[pin]
    entry: Opaque<bindings::wait_queue_entry>,
    head: &'a WaitQueueHead,
    /// The entry names the task that made it: it must not be queued by another.
    _not_send: NotThreadSafe,
}

impl<'a> Wait<'a> {
    /// Returns an initialiser for an entry of the current task, on no list yet.
    pub(crate) fn new(head: &'a WaitQueueHead) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs;
            // `init_wait()` initialises every field the wait code reads
            // (`flags`, `private` = current, `func`, an empty `entry` list).
            entry <- Opaque::ffi_init(|slot| unsafe { bindings::init_wait(slot) }),
            head,
            _not_send: NotThreadSafe,
        })
    }

    /// `prepare_to_wait(head, &wait, TASK_UNINTERRUPTIBLE)`: queues the entry on
    /// `head` (unless it is queued already) and sets the task state, both under
    /// the queue's spinlock; `set_current_state()` is a full barrier, so the
    /// caller's next read of its condition is ordered after the queueing.
    ///
    /// Sleep with [`schedule_timeout`] after testing the condition; a
    /// [`WaitQueueHead::wake_up`] from then on sets the task running again.
    pub(crate) fn prepare_to_wait(self: Pin<&Self>) {
        // SAFETY: `head` is initialised (its type invariant) and outlives `self`
        // (`'a`). `entry` is initialised and belongs to the current task (type
        // invariant, and `Wait` is not `Send`). The entry is pinned (`self` is
        // `Pin`, and `Wait` is `!Unpin`), so the address linked into `head`'s list
        // stays valid until the drop unlinks it. Both pointers come from `Opaque`
        // (an `UnsafeCell`), so other CPUs writing through them (a waker's
        // `list_del_init_careful()` of the entry) is allowed under our `&`.
        unsafe {
            bindings::prepare_to_wait(self.head.head.get(), self.entry.get(), TASK_UNINTERRUPTIBLE)
        };
    }
}

#[pinned_drop]
impl PinnedDrop for Wait<'_> {
    /// `finish_wait()`: sets the task running and unlinks the entry if a waker has
    /// not done so already. After it returns no waker touches the entry any more
    /// (`finish_wait()` takes the queue lock unless `list_empty_careful()` saw the
    /// waker's `list_del_init_careful()`, a release store, complete), so the
    /// memory may go.
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `head` is initialised and alive (`'a`); `entry` was initialised by
        // `init_wait()`, so it is on `head`'s list or off every list with an
        // empty `entry` (type invariant), the two cases `finish_wait()` handles;
        // calling it on an entry never queued, or twice, is allowed. A waker may
        // still be writing to the entry as we start, although we hold a `&mut`
        // here: `Opaque` is `UnsafeCell` plus `PhantomPinned`, and Rust makes no
        // uniqueness assumption about a `&mut` to a `!Unpin` value (the rule every
        // C-shared object of the kernel crate relies on), and we only use raw
        // pointers derived from it.
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
