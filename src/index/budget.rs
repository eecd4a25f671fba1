//! The byte budget of a scan: file bytes read but not yet committed, shared by the walker
//! threads (which reserve before they read) and the writer (which releases after a commit), so
//! that memory follows the budget rather than the number of workers.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// How long a reservation waits without any release before it goes through anyway.
const STALL: Duration = Duration::from_millis(500);

/// Bytes in flight between the walkers and the writer, bounded by a budget.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    in_flight: u64,
    waiting: usize,
    /// Releases so far: a waiter that sees them go up knows the writer is making room.
    releases: u64,
}

impl Budget {
    /// A budget of `limit` bytes (at least one byte).
    pub fn new(limit: u64) -> Self {
        Budget {
            limit: limit.max(1),
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    /// Reserves `bytes`, waiting while they would not fit beside what is in flight. A reservation
    /// always succeeds when nothing is in flight, so one file larger than the budget still goes
    /// through (alone). `before_wait` runs once before the first wait (a walker sends what it
    /// holds, so that the writer can commit and release it).
    pub fn reserve(&self, bytes: u64, before_wait: &mut dyn FnMut()) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.in_flight > 0 && state.in_flight.saturating_add(bytes) > self.limit {
            drop(state);
            before_wait();
            state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.waiting += 1;
            // Bounded: bytes may sit in another walker's unsent batch while that walker waits for
            // work, so once nothing was released for a while the reservation goes through (the
            // budget is then soft). While the writer keeps releasing, the wait goes on: a large
            // file waits for the pipeline to drain rather than joining a full budget.
            let mut deadline = std::time::Instant::now() + STALL;
            let mut releases = state.releases;
            while state.in_flight > 0
                && state.in_flight.saturating_add(bytes) > self.limit
                && std::time::Instant::now() < deadline
            {
                // Timed, so that a release missed by a race costs a tick, never a hang.
                state = self
                    .freed
                    .wait_timeout(state, Duration::from_millis(50))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                if state.releases != releases {
                    releases = state.releases;
                    deadline = std::time::Instant::now() + STALL;
                }
            }
            state.waiting -= 1;
        }
        state.in_flight = state.in_flight.saturating_add(bytes);
    }

    /// Gives back `bytes` reserved before.
    pub fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.in_flight = state.in_flight.saturating_sub(bytes);
        state.releases += 1;
        drop(state);
        self.freed.notify_all();
    }

    /// Whether a walker waits for bytes to be released (the planner then commits what it holds
    /// rather than wait for a full batch).
    pub fn has_waiters(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            > 0
    }

    /// Bytes reserved and not released.
    #[cfg(test)]
    pub fn in_flight(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .in_flight
    }
}

/// CPU seconds the calling thread has run (`/proc/thread-self/schedstat`, nanoseconds on a
/// CPU); `None` where that file does not exist.
pub fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_reservation_waits_until_bytes_are_released() {
        let budget = Arc::new(Budget::new(100));
        budget.reserve(80, &mut || {});
        // Larger than the budget, but nothing else would ever make room: it waits for the 80.
        let other = Arc::clone(&budget);
        let waiter = std::thread::spawn(move || {
            let mut flushed = false;
            other.reserve(150, &mut || flushed = true);
            flushed
        });
        while !budget.has_waiters() {
            std::thread::yield_now();
        }
        assert_eq!(budget.in_flight(), 80);
        budget.release(80);
        assert!(waiter.join().unwrap_or(false), "the waiter flushed first");
        assert_eq!(budget.in_flight(), 150);
        budget.release(150);
        assert_eq!(budget.in_flight(), 0);
    }

    /// A reservation keeps waiting past the stall limit while the writer keeps releasing bytes
    /// (a large file waits for the pipeline to drain), and goes through once there is room.
    #[test]
    fn a_reservation_waits_on_while_bytes_are_being_released() {
        let budget = Arc::new(Budget::new(1000));
        budget.reserve(990, &mut || {});
        let other = Arc::clone(&budget);
        let waiter = std::thread::spawn(move || other.reserve(500, &mut || {}));
        while !budget.has_waiters() {
            std::thread::yield_now();
        }
        // Three stall limits of small releases that never make room for the 500.
        let until = std::time::Instant::now() + STALL * 3;
        let mut released = 0;
        while std::time::Instant::now() < until {
            std::thread::sleep(STALL / 10);
            budget.release(1);
            released += 1;
        }
        assert!(budget.has_waiters(), "it went through without room");
        assert_eq!(budget.in_flight(), 990 - released);
        budget.release(990 - released);
        assert!(waiter.join().is_ok());
        assert_eq!(budget.in_flight(), 500);
    }
}
