//! The byte budget of a scan: file bytes read but not yet handed to a commit, shared by the
//! walker threads (which reserve before they read) and the writer (which releases a batch's
//! bytes as it starts to commit it), so that memory follows the budget rather than the number
//! of workers.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// How long a reservation waits without any release before it goes through anyway.
const STALL: Duration = Duration::from_millis(500);

/// Bytes in flight between the walkers and the writer, bounded by a budget.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    /// How long a reservation waits without any release before it goes through anyway.
    stall: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    in_flight: u64,
    /// The tickets of the reservations waiting, oldest first: they are served in that order.
    line: std::collections::VecDeque<u64>,
    /// The next ticket.
    next_ticket: u64,
    /// Releases so far: a waiter that sees them go up knows the writer is making room.
    releases: u64,
}

impl State {
    fn fits(&self, bytes: u64, limit: u64) -> bool {
        self.in_flight == 0 || self.in_flight.saturating_add(bytes) <= limit
    }
}

impl Budget {
    /// A budget of `limit` bytes (at least one byte).
    pub fn new(limit: u64) -> Self {
        Budget {
            limit: limit.max(1),
            stall: STALL,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    /// Reserves `bytes`, waiting while they would not fit beside what is in flight or while
    /// earlier reservations wait (first come, first served: a large file is not overtaken for
    /// ever by small ones). A reservation always succeeds when nothing is in flight, so one file
    /// larger than the budget still goes through (alone). `before_wait` runs once before the
    /// first wait (a walker sends what it holds, so that the writer can commit and release it).
    pub fn reserve(&self, bytes: u64, before_wait: &mut dyn FnMut()) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !state.line.is_empty() || !state.fits(bytes, self.limit) {
            drop(state);
            before_wait();
            state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.line.push_back(ticket);
            // Bounded: bytes may sit in another walker's unsent batch while that walker waits for
            // work, so once nothing was released for a while the reservation goes through (the
            // budget is then soft). While the writer keeps releasing, the wait goes on: a large
            // file waits for the pipeline to drain rather than joining a full budget.
            let mut deadline = std::time::Instant::now() + self.stall;
            let mut releases = state.releases;
            while !(state.line.front() == Some(&ticket) && state.fits(bytes, self.limit))
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
                    deadline = std::time::Instant::now() + self.stall;
                }
            }
            state.line.retain(|t| *t != ticket);
            state.in_flight = state.in_flight.saturating_add(bytes);
            drop(state);
            // The next in line may fit now.
            self.freed.notify_all();
            return;
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
        !self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .line
            .is_empty()
    }

    /// Bytes reserved and not released.
    /// A budget whose waits give up after `stall` without a release (tests: long enough that
    /// a loaded machine does not end a wait the test means to hold).
    #[cfg(test)]
    pub fn with_stall(limit: u64, stall: Duration) -> Self {
        Budget {
            stall,
            ..Budget::new(limit)
        }
    }

    /// How many reservations wait.
    #[cfg(test)]
    pub fn waiters(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .line
            .len()
    }

    #[cfg(test)]
    pub fn in_flight(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .in_flight
    }
}

/// CPU seconds the calling thread has run (its CPU-time clock, `CLOCK_THREAD_CPUTIME_ID`: the
/// run time `/proc/thread-self/schedstat` shows). Not read from `/proc`: a thread that opened
/// its `/proc/thread-self` files left dentries that the kernel walks when the parent reaps the
/// process, which took the parent 1–5 ms (a shell's or a bench's wait for `strata index`,
/// against 0.02 ms for git) and up to tens of ms. Always `Some` on Linux.
pub fn thread_cpu_seconds() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A thread's CPU seconds grow while it runs, and only its own.
    #[test]
    fn a_threads_cpu_seconds_count_its_own_work() {
        let spin = |until: f64| {
            let start = thread_cpu_seconds().unwrap_or_default();
            let mut x = 0u64;
            while thread_cpu_seconds().unwrap_or(f64::MAX) - start < until {
                x = x.wrapping_add(1);
            }
            (start, x)
        };
        let (start, _) = spin(0.02);
        let after = thread_cpu_seconds().unwrap_or_default();
        assert!(after - start >= 0.02, "{start} {after}");
        let other = std::thread::spawn(|| thread_cpu_seconds().unwrap_or(f64::MAX))
            .join()
            .unwrap_or(f64::MAX);
        assert!(other < 0.02, "a new thread has not run 20 ms: {other}");
    }

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
        let stall = Duration::from_secs(1);
        let budget = Arc::new(Budget::with_stall(1000, stall));
        budget.reserve(990, &mut || {});
        let other = Arc::clone(&budget);
        let waiter = std::thread::spawn(move || other.reserve(500, &mut || {}));
        while !budget.has_waiters() {
            std::thread::yield_now();
        }
        // Two and a half stall limits of small releases that never make room for the 500.
        let until = std::time::Instant::now() + stall * 5 / 2;
        let mut released = 0;
        while std::time::Instant::now() < until {
            std::thread::sleep(stall / 20);
            budget.release(1);
            released += 1;
        }
        assert!(budget.has_waiters(), "it went through without room");
        assert_eq!(budget.in_flight(), 990 - released);
        budget.release(990 - released);
        assert!(waiter.join().is_ok());
        assert_eq!(budget.in_flight(), 500);
    }

    /// A small reservation that would fit waits behind an earlier one that does not (first
    /// come, first served), and both go through once there is room.
    #[test]
    fn a_small_reservation_does_not_overtake_a_waiting_large_one() {
        let budget = Arc::new(Budget::with_stall(100, Duration::from_secs(600)));
        budget.reserve(90, &mut || {});
        let large = Arc::clone(&budget);
        let large = std::thread::spawn(move || large.reserve(50, &mut || {}));
        while budget.waiters() < 1 {
            std::thread::yield_now();
        }
        let small = Arc::clone(&budget);
        let small = std::thread::spawn(move || small.reserve(5, &mut || {}));
        while budget.waiters() < 2 {
            std::thread::yield_now();
        }
        assert_eq!(
            budget.in_flight(),
            90,
            "the 5 fitted but must wait its turn"
        );
        budget.release(90);
        assert!(large.join().is_ok() && small.join().is_ok());
        assert_eq!(budget.in_flight(), 55);
        assert_eq!(budget.waiters(), 0);
    }
}
