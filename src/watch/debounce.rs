//! The debouncer: every raw event the tap keeps is handed on one window after it arrived, in
//! arrival order, together with every other event due by then. Its thread sleeps until the
//! oldest waiting event falls due, so a change waits the window and no longer, and an idle
//! watcher never wakes (notify-debouncer-full wakes on a fixed tick whether or not anything
//! waits, and hands an event over up to a tick late). Errors are handed on at once.
//!
//! Nothing is merged here: every event is a hint that the worker reconciles by path, and the
//! worker takes every delivery queued behind the one it is given as the same transaction, so a
//! storm of events becomes a few large transactions rather than one per event.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use notify::{Event, EventHandler};

/// What the debouncer hands on.
#[derive(Debug)]
pub(super) enum Debounced {
    /// Events whose window has passed, oldest first.
    Events(Vec<Event>),
    /// An error of the platform's watcher.
    Error(notify::Error),
}

/// One raw event or error, with when it arrived.
enum Raw {
    Event(Event, Instant),
    Error(notify::Error),
}

/// The debouncer's intake: the platform watcher's event handler (the debouncer ends when it is
/// dropped with the watcher).
pub(super) struct Intake(Sender<Raw>);

impl EventHandler for Intake {
    fn handle_event(&mut self, event: notify::Result<Event>) {
        let raw = match event {
            Ok(event) => Raw::Event(event, Instant::now()),
            Err(err) => Raw::Error(err),
        };
        let _ = self.0.send(raw);
    }
}

/// Starts the debouncer's thread with `window`: what falls due goes to `deliver`, until it
/// returns false or the intake is dropped.
///
/// # Errors
/// When the thread cannot be started.
pub(super) fn start(
    window: Duration,
    deliver: impl FnMut(Debounced) -> bool + Send + 'static,
) -> std::io::Result<Intake> {
    let (sender, receiver) = channel();
    std::thread::Builder::new()
        .name("strata-debounce".into())
        .spawn(move || run(window, &receiver, deliver))?;
    Ok(Intake(sender))
}

/// The debouncer's loop.
fn run(window: Duration, raw: &Receiver<Raw>, mut deliver: impl FnMut(Debounced) -> bool) {
    let mut waiting: VecDeque<(Instant, Event)> = VecDeque::new();
    loop {
        let received = match waiting.front() {
            None => raw.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some((arrived, _)) => {
                raw.recv_timeout((*arrived + window).saturating_duration_since(Instant::now()))
            }
        };
        match received {
            Ok(Raw::Event(event, arrived)) => waiting.push_back((arrived, event)),
            Ok(Raw::Error(err)) => {
                if !deliver(Debounced::Error(err)) {
                    return;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        let due = waiting
            .iter()
            .take_while(|(arrived, _)| *arrived + window <= now)
            .count();
        if due > 0 {
            let events = waiting.drain(..due).map(|(_, event)| event).collect();
            if !deliver(Debounced::Events(events)) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::EventKind;
    use notify::event::ModifyKind;
    use std::path::PathBuf;

    fn event(path: &str) -> notify::Result<Event> {
        Ok(Event::new(EventKind::Modify(ModifyKind::Any)).add_path(PathBuf::from(path)))
    }

    #[test]
    fn each_event_is_handed_on_one_window_after_it_arrived_and_errors_at_once() {
        let window = Duration::from_millis(60);
        let (sender, delivered) = channel();
        let mut intake = start(window, move |d| sender.send((Instant::now(), d)).is_ok())
            .unwrap_or_else(|e| panic!("{e}"));
        let first = Instant::now();
        intake.handle_event(event("/t/a"));
        intake.handle_event(event("/t/b"));
        intake.handle_event(Err(notify::Error::generic("boom")));
        let (at, error) = delivered
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(error, Debounced::Error(_)),
            "an error is not held: {error:?}"
        );
        assert!(at.duration_since(first) < window * 50);
        let (at, events) = delivered
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
        let Debounced::Events(events) = events else {
            panic!("{events:?}")
        };
        let paths: Vec<_> = events.iter().flat_map(|e| e.paths.clone()).collect();
        assert_eq!(paths, [PathBuf::from("/t/a"), PathBuf::from("/t/b")]);
        assert!(at.duration_since(first) >= window, "held the window");
        // A later event is its own delivery, a window after it arrived.
        let second = Instant::now();
        intake.handle_event(event("/t/c"));
        let (at, events) = delivered
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(&events, Debounced::Events(e) if e.len() == 1),
            "{events:?}"
        );
        assert!(at.duration_since(second) >= window);
        // The debouncer ends with its intake.
        drop(intake);
        assert!(delivered.recv_timeout(Duration::from_secs(5)).is_err());
    }
}
