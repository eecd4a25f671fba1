//! The tap: the platform watcher's event handler, which sees every raw event before the
//! debouncer does. It drops `Access` events (strata's own reads cause them) and the cookie
//! files' events (noting each cookie seen, so a sync need not wait for the debounce), counts
//! events, remembers the paths seen and not yet reconciled (what `index` on a watched root looks
//! at), and applies the test knobs: an injected watch limit and injected queue overflows.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use notify::event::Flag;
use notify::{Event, EventHandler, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

/// The name every cookie file starts with (Watchman's idea: a file written to learn that every
/// earlier event has been seen).
pub const COOKIE_PREFIX: &str = ".strata-cookie-";

/// Whether `path` names a cookie file.
pub fn is_cookie(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(COOKIE_PREFIX))
}

/// What the tap shares with the watcher.
#[derive(Debug, Default)]
pub struct Tap {
    /// Raw events taken (not dropped).
    pub events: AtomicU64,
    /// `Access` events dropped.
    pub dropped_access: AtomicU64,
    /// Watches added and not removed.
    pub watches: AtomicU64,
    /// A `Rescan` was seen and its rescan is not done yet.
    pub rescan_pending: AtomicBool,
    /// Paths seen in events and not reconciled yet.
    pending: Mutex<HashSet<PathBuf>>,
    /// Cookies seen, by file name, and the condition a sync waits on.
    cookies: Mutex<HashSet<String>>,
    cookie_seen: Condvar,
    /// Test knob: refuse a watch beyond this many, as the kernel does at its limit.
    pub watch_limit: Option<u64>,
    /// Test knob: every this many raw events, drop the event and flag a `Rescan` instead (a
    /// queue overflow).
    pub overflow_every: Option<u64>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tap {
    /// A tap with the test knobs `watch_limit` and `overflow_every`.
    pub fn new(watch_limit: Option<u64>, overflow_every: Option<u64>) -> Self {
        Tap {
            watch_limit,
            overflow_every,
            ..Tap::default()
        }
    }

    /// Watches directory `path` of `watcher` non-recursively, counted.
    ///
    /// # Errors
    /// The platform's error; `MaxFilesWatch` at the (injected) watch limit.
    pub fn watch_dir(&self, watcher: &mut RecommendedWatcher, path: &Path) -> notify::Result<()> {
        if let Some(limit) = self.watch_limit
            && self.watches.load(Ordering::SeqCst) >= limit
        {
            return Err(
                notify::Error::new(notify::ErrorKind::MaxFilesWatch).add_path(path.to_path_buf())
            );
        }
        watcher.watch(path, RecursiveMode::NonRecursive)?;
        self.watches.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Removes the watch of `path` from `watcher`.
    ///
    /// # Errors
    /// The platform's error (the kernel dropped the watch of a deleted directory already).
    pub fn unwatch_dir(&self, watcher: &mut RecommendedWatcher, path: &Path) -> notify::Result<()> {
        watcher.unwatch(path)?;
        let _ = self
            .watches
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        Ok(())
    }

    /// Paths seen and not reconciled yet.
    pub fn pending_len(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Takes `paths` off the pending set: the caller reconciles them now.
    pub fn taken(&self, paths: &[PathBuf]) {
        let mut pending = lock(&self.pending);
        for path in paths {
            pending.remove(path);
        }
    }

    /// Takes every pending path under one of `roots`.
    pub fn take_under(&self, roots: &[PathBuf]) -> Vec<PathBuf> {
        let mut pending = lock(&self.pending);
        let taken: Vec<PathBuf> = pending
            .iter()
            .filter(|p| roots.iter().any(|r| p.starts_with(r)))
            .cloned()
            .collect();
        for path in &taken {
            pending.remove(path);
        }
        taken
    }

    /// Waits up to `timeout` for the cookie named `name` to be seen; whether it was.
    pub fn wait_cookie(&self, name: &str, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut cookies = lock(&self.cookies);
        loop {
            if cookies.remove(name) {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            cookies = self
                .cookie_seen
                .wait_timeout(cookies, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Looks at one raw event: `None` when it is dropped here.
    fn filter(&self, event: Event) -> Option<Event> {
        if matches!(event.kind, EventKind::Access(_)) {
            self.dropped_access.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if !event.paths.is_empty() && event.paths.iter().all(|p| is_cookie(p)) {
            if matches!(event.kind, EventKind::Create(_)) {
                let mut cookies = lock(&self.cookies);
                for path in &event.paths {
                    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                        cookies.insert(name.to_string());
                    }
                }
                self.cookie_seen.notify_all();
            }
            return None;
        }
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        if event.need_rescan()
            || self
                .overflow_every
                .is_some_and(|every| n.is_multiple_of(every))
        {
            self.rescan_pending.store(true, Ordering::SeqCst);
            return Some(Event::new(EventKind::Other).set_flag(Flag::Rescan));
        }
        lock(&self.pending).extend(event.paths.iter().cloned());
        Some(event)
    }
}

/// The platform watcher's event handler: what the tap keeps goes on to `next` (the
/// debouncer's intake).
pub struct Handler<F> {
    /// The tap.
    pub tap: Arc<Tap>,
    /// Where kept events go.
    pub next: F,
}

impl<F: EventHandler> EventHandler for Handler<F> {
    fn handle_event(&mut self, event: notify::Result<Event>) {
        match event {
            Ok(event) => {
                if let Some(event) = self.tap.filter(event) {
                    self.next.handle_event(Ok(event));
                }
            }
            Err(err) => self.next.handle_event(Err(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, ModifyKind};

    fn event(kind: EventKind, path: &str) -> Event {
        Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn access_events_are_dropped_and_others_pending() {
        let tap = Tap::default();
        assert!(
            tap.filter(event(EventKind::Access(AccessKind::Any), "/t/a"))
                .is_none()
        );
        assert_eq!(tap.dropped_access.load(Ordering::Relaxed), 1);
        let kept = tap.filter(event(EventKind::Modify(ModifyKind::Any), "/t/a"));
        assert!(kept.is_some());
        assert_eq!(tap.events.load(Ordering::Relaxed), 1);
        assert_eq!(
            tap.take_under(&[PathBuf::from("/t")]),
            [PathBuf::from("/t/a")]
        );
        assert_eq!(tap.pending_len(), 0);
    }

    #[test]
    fn a_cookie_is_seen_before_debouncing_and_never_passed_on() {
        let tap = Tap::default();
        let name = format!("{COOKIE_PREFIX}1-0");
        let path = format!("/t/{name}");
        assert!(
            tap.filter(event(EventKind::Create(CreateKind::File), &path))
                .is_none()
        );
        assert!(tap.wait_cookie(&name, std::time::Duration::from_millis(1)));
        assert!(
            !tap.wait_cookie(&name, std::time::Duration::from_millis(1)),
            "each cookie is seen once"
        );
        assert_eq!(tap.events.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_injected_overflow_loses_the_event_and_flags_a_rescan() {
        let tap = Tap::new(None, Some(2));
        let first = tap.filter(event(EventKind::Modify(ModifyKind::Any), "/t/a"));
        assert!(first.is_some_and(|e| !e.need_rescan()));
        let second = tap.filter(event(EventKind::Modify(ModifyKind::Any), "/t/b"));
        assert!(second.is_some_and(|e| e.need_rescan()));
        assert!(tap.rescan_pending.load(Ordering::SeqCst));
        assert_eq!(
            tap.take_under(&[PathBuf::from("/t")]),
            [PathBuf::from("/t/a")]
        );
    }
}
