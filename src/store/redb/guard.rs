//! The storage boundary's guard: redb panics on some damaged pages (an `unreachable!` in a
//! cursor, a slice out of range, an unwrap on UTF-8); no such panic may reach a user. Every call
//! into redb from the [`Backend`] impl runs under [`guarded`], which turns a panic into
//! [`Error::Corrupt`] naming what was being done, and marks the handle damaged: its writes are
//! refused from then on (reads still answer what they can), until `strata fsck --repair`. The
//! store then reopens its handle ([`super::RedbStore`]'s `reopen`), once no transaction of the
//! old one runs.
//!
//! The panic's message would still be printed by the process's panic hook; [`quiet_panics`]
//! installs a hook that stays silent for panics inside a guard (their message becomes part of
//! the error) and leaves every other panic to the previous hook.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

thread_local! {
    /// Whether this thread is inside a guard (its panics are reported as errors).
    static GUARDED: Cell<u32> = const { Cell::new(0) };
    /// How many panics guards caught on this thread.
    static CAUGHT: Cell<u64> = const { Cell::new(0) };
    /// Whether a guarded panic is unwinding on this thread (set by the hook, cleared by the
    /// guard that catches it).
    static UNWINDING: Cell<bool> = const { Cell::new(false) };
}

/// How many panics the guards of this thread caught so far: a caller compares the count before
/// and after a guarded call to know whether it panicked.
pub(crate) fn panics_caught() -> u64 {
    CAUGHT.with(Cell::get)
}

/// Installs (once per process) a panic hook that prints nothing for a panic inside a storage
/// guard and defers to the previous hook for every other panic.
pub fn quiet_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A second panic while a guarded one unwinds (a destructor's) aborts the process:
            // it is printed, so that the abort says where.
            let guarded = GUARDED.with(Cell::get) > 0;
            let nested = guarded && UNWINDING.with(|u| u.replace(true));
            if !guarded || nested {
                previous(info);
            }
        }));
    });
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "no message".to_string()
    }
}

/// How many guarded calls this thread is inside.
pub(crate) fn depth() -> u32 {
    GUARDED.with(Cell::get)
}

/// Runs `f`, a call into the storage engine doing `what`; a panic inside it becomes
/// [`Error::Corrupt`] and sets `damaged`.
pub(crate) fn guarded<T>(
    damaged: &AtomicBool,
    what: &str,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    GUARDED.with(|depth| depth.set(depth.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|depth| depth.set(depth.get().saturating_sub(1)));
    UNWINDING.with(|u| u.set(false));
    match outcome {
        Ok(result) => result,
        Err(payload) => {
            CAUGHT.with(|count| count.set(count.get() + 1));
            damaged.store(true, Ordering::SeqCst);
            Err(Error::corrupt(format!(
                "the store file is damaged: the storage engine failed while {what} ({}); run \
                 `strata fsck` to see what is affected",
                panic_text(&*payload)
            )))
        }
    }
}

/// Drops `handle` (a redb database) without the commit redb makes when it closes a handle (the
/// allocator state, recorded for the next open). For a handle that met damage: its in-memory
/// state may be what a panic left half-changed, and committing from it can panic inside redb
/// and again in a destructor while that unwinds, which aborts the process. redb writes nothing
/// when the handle is dropped during an unwind, so it is dropped inside an unwind of our own
/// ([`std::panic::resume_unwind`] runs no panic hook), caught here. The file lock is released
/// as in any close. The next open finds the allocator state the last durable commit recorded
/// (every commit records it); a commit made without fsync and not yet made durable is lost.
pub(crate) fn close_without_writing<T>(handle: T) {
    /// Drops what it holds when dropped, that is while the unwind below runs.
    struct DroppedWhileUnwinding<T>(Option<T>);
    impl<T> Drop for DroppedWhileUnwinding<T> {
        fn drop(&mut self) {
            drop(self.0.take());
        }
    }
    let held = DroppedWhileUnwinding(Some(handle));
    let _ = catch_unwind(AssertUnwindSafe(move || {
        let _held = held;
        std::panic::resume_unwind(Box::new("closing a damaged store handle without writing"));
    }));
}

/// Runs `f` on a helper thread of a guarded call: a panic in it is not printed by the quiet hook
/// (as inside a guard) and is not caught here, so that it reaches the thread's `join`, whose
/// caller resumes it under its own guard.
pub(crate) fn quietly<T>(f: impl FnOnce() -> T) -> T {
    GUARDED.with(|depth| depth.set(depth.get() + 1));
    let out = f();
    GUARDED.with(|depth| depth.set(depth.get().saturating_sub(1)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic on a helper thread of a guarded call reaches the guard through the join.
    #[test]
    fn a_helper_threads_panic_becomes_the_guarded_calls_error() {
        quiet_panics();
        let damaged = AtomicBool::new(false);
        let result: Result<u32> = guarded(&damaged, "reading in parallel", || {
            std::thread::scope(|scope| {
                let part = scope.spawn(|| {
                    quietly(|| {
                        let pages: Vec<u8> = Vec::new();
                        // A range out of bounds, as redb's btree code meets on a zeroed page.
                        pages[3..9].len() as u32
                    })
                });
                match part.join() {
                    Ok(n) => Ok(n),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            })
        });
        let err = result.map(|_| "no error").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("out of range"), "{err}");
        assert!(damaged.load(Ordering::SeqCst));
    }

    #[test]
    fn a_panic_becomes_a_corrupt_error_and_marks_the_handle() {
        quiet_panics();
        let damaged = AtomicBool::new(false);
        let result: Result<()> = guarded(&damaged, "reading a page", || {
            let pages: Vec<u8> = Vec::new();
            // A range out of bounds, as redb's btree code meets on a zeroed page.
            let _ = &pages[3..9];
            Ok(())
        });
        let err = result.map(|()| "no error").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("reading a page"), "{err}");
        assert!(damaged.load(Ordering::SeqCst));
        // Outside a guard, the depth is back to zero: other panics keep the previous hook.
        assert_eq!(GUARDED.with(Cell::get), 0);
    }
}
