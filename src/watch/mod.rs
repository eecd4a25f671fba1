//! `Watcher`: keeps the store equal to the disk under the watched roots while the daemon runs
//! (seed 003 §6: watcher event → `index_file` → the store, and the metadata cache of the live
//! sessions holding the file; nothing is activated).
//!
//! Uses `engine` (and through it `index`, `store`).
//!
//! How it works:
//! - The roots are walked here with the walk every scan makes (`index::walk_builder`:
//!   ignore rules, `.git` and the store directory skipped, links not followed), and each
//!   directory gets its own non-recursive watch, so ignored trees (`target/`, `node_modules/`)
//!   cost no watch. A new directory is walked (and watched) when its event arrives.
//! - Every event is a hint, never a fact: the paths it names are stat'ed through the one disk
//!   path (`index::presence`, `index::look`, [`crate::Indexer::plan_look`])
//!   and what is there now is what gets recorded. A directory created or moved in, a `Rescan`
//!   flag (the kernel's queue overflowed), an edit of a `.gitignore` or a watch error make the
//!   affected subtree be walked and compared with the store (files gone get tombstones).
//! - The files live sessions hold outside the roots are watched too, through their directories
//!   (looked up every second), and only those files of such a directory are followed.
//! - `Access` events are dropped before debouncing (strata's own reads cause them).
//! - Debouncing (`debounce`): each event is handed to the worker [`DEBOUNCE`] after it arrived,
//!   the debouncer's thread sleeping until the oldest waiting event is due (no periodic tick: a
//!   change waits the window and no longer, an idle watcher never wakes). What the worker takes
//!   at once (a delivery and every one queued behind it) is one transaction (origin `watcher`).
//! - Start-up: every root is watched first, then reconciled once with a tree scan (changes made
//!   while no daemon ran get valid time = mtime, as `index` gives them; the stat cache spares
//!   unchanged files); the daemon answers requests meanwhile.
//! - When the kernel's watch limit is reached the watcher says so once, naming the limit and the
//!   sysctl that raises it, keeps the directories it could not watch, and rescans them every
//!   [`RESCAN_EVERY`].
//! - `index` of a watched root is answered from the watcher's state (git's fsmonitor idea): a
//!   cookie file written in the root and seen by the watcher (before debouncing) proves every
//!   earlier event was seen; then only the paths seen and not yet reconciled are looked at.
//!
//! Test knobs (environment of the daemon): `STRATA_WATCH_LIMIT=N` refuses watches beyond N as
//! the kernel does at its limit; `STRATA_WATCH_OVERFLOW_EVERY=N` turns every Nth event into a
//! `Rescan` (the event is lost, as in an overflow); `STRATA_WATCH_RESCAN_SECONDS=S` sets the
//! periodic rescan of unwatched directories.

mod debounce;
mod tap;
mod worker;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::{Engine, WatchIndex};
use crate::error::{Error, Result};
use crate::index::ScanSummary;

pub use tap::{COOKIE_PREFIX, is_cookie};

/// The debounce window: events of one path closer together than this are one change, and a
/// change is committed about this long after its last event.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

/// How often directories that could not be watched (the watch limit) are rescanned.
pub const RESCAN_EVERY: Duration = Duration::from_secs(30);

/// How long `index` waits for its cookie before it scans instead.
const COOKIE_WAIT: Duration = Duration::from_secs(5);

/// How a watcher runs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// The debounce window.
    pub debounce: Duration,
    /// How often unwatched directories are rescanned.
    pub rescan_every: Duration,
    /// Refuse watches beyond this many (tests of the limit).
    pub watch_limit: Option<u64>,
    /// Turn every this many events into a `Rescan` (tests of an overflow).
    pub overflow_every: Option<u64>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: DEBOUNCE,
            rescan_every: RESCAN_EVERY,
            watch_limit: None,
            overflow_every: None,
        }
    }
}

impl WatchOptions {
    /// The defaults with the test knobs of the environment (`STRATA_WATCH_LIMIT`,
    /// `STRATA_WATCH_OVERFLOW_EVERY`, `STRATA_WATCH_RESCAN_SECONDS`).
    pub fn from_env() -> Self {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|n| *n > 0)
        };
        let mut options = WatchOptions {
            watch_limit: number("STRATA_WATCH_LIMIT"),
            overflow_every: number("STRATA_WATCH_OVERFLOW_EVERY"),
            ..WatchOptions::default()
        };
        if let Some(seconds) = number("STRATA_WATCH_RESCAN_SECONDS") {
            options.rescan_every = Duration::from_secs(seconds);
        }
        options
    }
}

/// The watcher's counters, shown by `strata status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WatchStatus {
    /// The watched roots.
    pub roots: Vec<String>,
    /// Whether the start-up reconcile of every root is committed.
    pub ready: bool,
    /// Directories watched now.
    pub watches: u64,
    /// Directories that could not be watched (the watch limit), rescanned periodically.
    pub unwatched_dirs: u64,
    /// Events taken since start (`Access` events are not counted).
    pub events: u64,
    /// `Access` events dropped.
    pub dropped_access: u64,
    /// Paths seen in events and not reconciled yet.
    pub queue_depth: u64,
    /// Debounce windows reconciled.
    pub windows: u64,
    /// Subtree rescans (new directories, overflows, errors, ignore file edits).
    pub rescans: u64,
    /// The last transaction the watcher committed.
    pub last_commit_tx: Option<u64>,
    /// When it committed it (RFC 3339).
    pub last_commit: Option<String>,
    /// Errors since start (watch errors, unreadable files, failed commits).
    pub errors: u64,
    /// The last error, in words.
    pub last_error: Option<String>,
    /// Whether the kernel's watch limit was reached.
    pub limit_reached: bool,
}

/// What the worker thread is asked.
enum Control {
    /// Events whose debounce window has passed.
    Window(Vec<notify::Event>),
    /// Errors the watcher reported.
    Errors(Vec<notify::Error>),
    /// The watched roots changed.
    Roots(Vec<String>),
    /// Reconcile now what was seen under these roots (an `index` after its cookie).
    Flush(Vec<PathBuf>, Sender<Result<ScanSummary>>),
    /// Stop.
    Stop,
}

/// What the watcher, its worker and the `index` hook share.
struct Shared {
    tap: Arc<tap::Tap>,
    status: Mutex<WatchStatus>,
    control: Mutex<Sender<Control>>,
}

impl Shared {
    fn status(&self) -> std::sync::MutexGuard<'_, WatchStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn send(&self, control: Control) -> bool {
        self.control
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(control)
            .is_ok()
    }
}

/// A running watcher: started by the daemon over its engine, stopped when dropped.
pub struct Watcher {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// Starts watching the roots of the engine's settings (and those added later with
    /// `watch.add`), and registers itself to answer `index` on them.
    ///
    /// # Errors
    /// [`Error::Io`] when the platform's watcher cannot be made (no inotify).
    pub fn start(engine: Arc<Engine>, options: WatchOptions) -> Result<Watcher> {
        let tap = Arc::new(tap::Tap::new(options.watch_limit, options.overflow_every));
        let (control, commands) = channel();
        let shared = Arc::new(Shared {
            tap: Arc::clone(&tap),
            status: Mutex::new(WatchStatus::default()),
            control: Mutex::new(control.clone()),
        });
        let control_of_debouncer = control;
        let intake = debounce::start(options.debounce, move |debounced| {
            let control = match debounced {
                debounce::Debounced::Events(events) => Control::Window(events),
                debounce::Debounced::Error(err) => Control::Errors(vec![err]),
            };
            control_of_debouncer.send(control).is_ok()
        })
        .map_err(|e| Error::io("starting the watcher's debouncer", e))?;
        let platform = <notify::RecommendedWatcher as notify::Watcher>::new(
            tap::Handler {
                tap: Arc::clone(&tap),
                next: intake,
            },
            notify::Config::default(),
        )
        .map_err(|e| Error::io("starting the file watcher", std::io::Error::other(e)))?;
        let roots_changes = engine.watch_roots_changes();
        let forward = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("strata-watch-roots".into())
            .spawn(move || {
                while let Ok(roots) = roots_changes.recv() {
                    if !forward.send(Control::Roots(roots)) {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io("starting the watcher", e))?;
        let roots = engine.settings().watch;
        let mut worker =
            worker::Worker::new(Arc::clone(&engine), platform, Arc::clone(&shared), options)?;
        let thread = std::thread::Builder::new()
            .name("strata-watch".into())
            .spawn(move || worker.run(roots, commands))
            .map_err(|e| Error::io("starting the watcher", e))?;
        engine.set_watch_index(Arc::new(IndexHook(Arc::clone(&shared))));
        Ok(Watcher {
            shared,
            thread: Some(thread),
        })
    }

    /// The watcher's counters now.
    pub fn status(&self) -> WatchStatus {
        let tap = &self.shared.tap;
        let mut status = self.shared.status().clone();
        status.events = tap.events.load(Ordering::Relaxed);
        status.dropped_access = tap.dropped_access.load(Ordering::Relaxed);
        status.queue_depth = tap.pending_len() as u64;
        status
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.send(Control::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers `index` on watched roots from the watcher's state.
struct IndexHook(Arc<Shared>);

impl WatchIndex for IndexHook {
    fn index(&self, roots: &[PathBuf]) -> Option<Result<ScanSummary>> {
        let shared = &self.0;
        let watched: Vec<PathBuf> = {
            let status = shared.status();
            if !status.ready || status.unwatched_dirs > 0 {
                return None;
            }
            status.roots.iter().map(PathBuf::from).collect()
        };
        if shared.tap.rescan_pending.load(Ordering::SeqCst) {
            return None;
        }
        // Each root asked for must lie under a watched root; the cookie goes there.
        let mut cookie_dirs: Vec<&PathBuf> = Vec::new();
        for root in roots {
            let outer = watched.iter().find(|w| root.starts_with(w))?;
            if !cookie_dirs.contains(&outer) {
                cookie_dirs.push(outer);
            }
        }
        for dir in cookie_dirs {
            if !sync_cookie(&shared.tap, dir) {
                return None;
            }
        }
        let (reply, answer) = channel();
        if !shared.send(Control::Flush(roots.to_vec(), reply)) {
            return None;
        }
        answer.recv().ok()
    }
}

/// Writes a cookie file in `dir` and waits until the watcher has seen it: every event before
/// it has been seen then. Whether it was seen in time.
fn sync_cookie(tap: &tap::Tap, dir: &std::path::Path) -> bool {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "{COOKIE_PREFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(&name);
    if std::fs::write(&path, b"").is_err() {
        return false;
    }
    let seen = tap.wait_cookie(&name, COOKIE_WAIT);
    let _ = std::fs::remove_file(&path);
    seen
}
