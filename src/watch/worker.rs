//! The watcher's worker thread: owns the watches, turns each debounce window into one
//! transaction through the one disk path, walks new and suspect subtrees, and rescans what could
//! not be watched.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

use ignore::gitignore::Gitignore;
use notify::{Event, RecommendedWatcher};

use super::tap::is_cookie;
use super::{Control, Shared, WatchOptions};
use crate::engine::{Engine, IndexRequest};
use crate::error::{Error, Result};
use crate::index::{
    Action, DirStat, Indexer, Look, ScanSummary, Settings, StatChange, extra_ignore, look,
    presence, record, walk_builder,
};
use crate::object::FilesystemSource;
use crate::resolve::machine_filesystem_id;
use crate::store::{Op, StatUpdate, Timestamp};

/// Names whose edit changes what is ignored below their directory.
const IGNORE_FILES: &[&str] = &[".gitignore", ".ignore"];

/// How often the files live sessions hold are looked up, to watch those outside the roots.
const SESSIONS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What one reconcile plans before its commit.
struct Plan {
    ops: Vec<Op>,
    stat: StatUpdate,
    paths: Vec<String>,
    /// Every path looked at (each is planned once per transaction).
    looked: HashSet<String>,
    summary: ScanSummary,
}

/// The worker's state.
pub(super) struct Worker {
    engine: Arc<Engine>,
    /// The platform's watcher (its event thread feeds the tap, then the debouncer).
    platform: RecommendedWatcher,
    shared: Arc<Shared>,
    options: WatchOptions,
    filesystem_id: String,
    roots: Vec<PathBuf>,
    /// Directories watched now.
    watched: HashSet<PathBuf>,
    /// Directories that could not be watched (the limit), rescanned periodically.
    unwatched: BTreeSet<PathBuf>,
    /// Directories never entered (the store's).
    skip_dirs: Vec<PathBuf>,
    /// Files live sessions hold outside the roots, watched through their directories.
    session_files: HashSet<PathBuf>,
    /// The directories watched for them.
    session_dirs: HashSet<PathBuf>,
    /// The settings' ignore globs the watches and the last reconcile followed.
    ignore: Vec<String>,
    /// The rules of the settings last used (kept: building them compiles every glob).
    rules: RefCell<Option<Rules>>,
    /// Directory listings kept between windows (see [`Worker::listed`]).
    listings: HashMap<PathBuf, Listing>,
    limit_said: bool,
}

/// The entries of a directory the walk enters, and the directory's stat when they were listed.
struct Listing {
    stat: crate::store::FileStat,
    names: HashSet<OsString>,
    /// The [`Rules::generation`] it was listed under.
    generation: u64,
}

/// A listing taken this soon after its directory last changed is not kept: a change in the same
/// clock tick would leave the directory's mtime as it was.
const RACY_LISTING: std::time::Duration = std::time::Duration::from_millis(20);

/// Listings kept at most (then they are all dropped and listed again as needed).
const MAX_LISTINGS: usize = 4096;

/// The indexer and the extra ignore globs of one version of the settings.
struct Rules {
    settings: Settings,
    indexer: Arc<Indexer>,
    ignore: Option<Arc<Gitignore>>,
    /// Counts the rules built so far (a listing made under other rules is not kept).
    generation: u64,
}

/// `first` with the deliveries of its kind queued behind it (`same` takes one apart, or gives
/// back a command of another kind, kept in `held` to be answered next).
fn join_queued<T>(
    commands: &Receiver<Control>,
    mut first: Vec<T>,
    held: &mut Option<Control>,
    same: fn(Control) -> std::result::Result<Vec<T>, Control>,
) -> Vec<T> {
    while let Ok(control) = commands.try_recv() {
        match same(control) {
            Ok(more) => first.extend(more),
            Err(other) => {
                *held = Some(other);
                break;
            }
        }
    }
    first
}

impl Worker {
    /// A worker over `engine` with the platform's watcher `platform`.
    pub(super) fn new(
        engine: Arc<Engine>,
        platform: RecommendedWatcher,
        shared: Arc<Shared>,
        options: WatchOptions,
    ) -> Result<Worker> {
        let skip_dirs = engine
            .dir()
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf()))
            .into_iter()
            .collect();
        Ok(Worker {
            ignore: engine.settings().ignore,
            engine,
            platform,
            shared,
            options,
            filesystem_id: machine_filesystem_id(),
            roots: Vec::new(),
            watched: HashSet::new(),
            unwatched: BTreeSet::new(),
            skip_dirs,
            session_files: HashSet::new(),
            session_dirs: HashSet::new(),
            rules: RefCell::new(None),
            listings: HashMap::new(),
            limit_said: false,
        })
    }

    /// Watches `roots`, then answers what arrives on `commands` until told to stop.
    pub(super) fn run(&mut self, roots: Vec<String>, commands: Receiver<Control>) {
        self.set_roots(roots);
        let mut next_rescan = Instant::now() + self.options.rescan_every;
        let mut next_sessions = Instant::now();
        // A command taken while joining deliveries, answered next.
        let mut held: Option<Control> = None;
        loop {
            if Instant::now() >= next_sessions {
                self.follow_settings();
                self.watch_session_files();
                next_sessions = Instant::now() + SESSIONS_EVERY;
            }
            let wait = next_rescan
                .min(next_sessions)
                .saturating_duration_since(Instant::now());
            let received = match held.take() {
                Some(control) => Ok(control),
                None => commands.recv_timeout(wait),
            };
            match received {
                Ok(Control::Window(events)) => {
                    // Deliveries queued behind this one join its transaction (a storm becomes
                    // a few large transactions).
                    let events = join_queued(&commands, events, &mut held, |c| match c {
                        Control::Window(events) => Ok(events),
                        other => Err(other),
                    });
                    self.window(events);
                }
                Ok(Control::Errors(errors)) => {
                    // Errors queued behind this one are rescanned with it.
                    let errors = join_queued(&commands, errors, &mut held, |c| match c {
                        Control::Errors(errors) => Ok(errors),
                        other => Err(other),
                    });
                    self.errors(errors);
                }
                Ok(Control::Roots(roots)) => self.set_roots(roots),
                Ok(Control::Flush(roots, reply)) => {
                    let hints = self.shared.tap.take_under(&roots);
                    let _ = reply.send(self.reconcile(hints, Vec::new()));
                }
                Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if Instant::now() < next_rescan => {}
                Err(RecvTimeoutError::Timeout) => {
                    next_rescan = Instant::now() + self.options.rescan_every;
                    if !self.unwatched.is_empty() {
                        let dirs: Vec<PathBuf> =
                            std::mem::take(&mut self.unwatched).into_iter().collect();
                        self.count_rescans(dirs.len());
                        let _ = self.reconcile(Vec::new(), dirs);
                        self.publish_counts();
                    }
                }
            }
        }
    }

    /// Follows an edit of `settings.toml` made while the daemon runs: roots added or removed
    /// by hand are watched or unwatched, and a change of the ignore globs re-evaluates every
    /// root (what they newly admit is indexed and watched).
    fn follow_settings(&mut self) {
        let settings = self.engine.settings();
        let roots: Vec<PathBuf> = settings.watch.iter().map(PathBuf::from).collect();
        if roots != self.roots {
            self.set_roots(settings.watch.clone());
        }
        if settings.ignore != self.ignore {
            self.ignore = settings.ignore;
            if let Err(err) = extra_ignore(&self.ignore) {
                self.error(format!("the settings' ignore globs: {err}"));
                return;
            }
            let roots = self.roots.clone();
            self.count_rescans(roots.len());
            let _ = self.reconcile(Vec::new(), roots);
            self.publish_counts();
        }
    }

    /// Watches the directories of the files live sessions hold outside the roots (seed 003:
    /// a session's paths are watched, and a resumed session's again), and unwatches those no
    /// session needs any more.
    fn watch_session_files(&mut self) {
        let files: HashSet<PathBuf> = self
            .engine
            .sessions_watched_paths()
            .into_iter()
            .map(PathBuf::from)
            .filter(|p| {
                !self.roots.iter().any(|r| p.starts_with(r))
                    && !self.skip_dirs.iter().any(|d| p.starts_with(d))
            })
            .collect();
        let dirs: HashSet<PathBuf> = files
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        for dir in self
            .session_dirs
            .difference(&dirs)
            .cloned()
            .collect::<Vec<_>>()
        {
            if self.watched.remove(&dir) {
                let _ = self.shared.tap.unwatch_dir(&mut self.platform, &dir);
            }
            self.session_dirs.remove(&dir);
        }
        for dir in &dirs {
            if !self.session_dirs.contains(dir) && dir.is_dir() {
                self.ensure_watch(dir);
                if self.watched.contains(dir) {
                    self.session_dirs.insert(dir.clone());
                }
            }
        }
        self.session_files = files;
        self.publish_counts();
    }

    /// Makes `roots` the watched roots: new ones are watched and reconciled once (a tree scan),
    /// removed ones lose their watches.
    fn set_roots(&mut self, roots: Vec<String>) {
        let wanted: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
        let removed: Vec<PathBuf> = self
            .roots
            .iter()
            .filter(|r| !wanted.contains(r))
            .cloned()
            .collect();
        for root in &removed {
            let under: Vec<PathBuf> = self
                .watched
                .iter()
                .filter(|d| d.starts_with(root) && !wanted.iter().any(|w| d.starts_with(w)))
                .cloned()
                .collect();
            for dir in under {
                let _ = self.shared.tap.unwatch_dir(&mut self.platform, &dir);
                self.watched.remove(&dir);
            }
            self.unwatched.retain(|d| !d.starts_with(root));
        }
        let added: Vec<PathBuf> = wanted
            .iter()
            .filter(|r| !self.roots.contains(r))
            .cloned()
            .collect();
        self.roots = wanted;
        {
            let mut status = self.shared.status();
            status.roots = roots;
            status.ready = added.is_empty() && status.ready || self.roots.is_empty();
        }
        for root in &added {
            if !root.is_dir() {
                self.error(format!(
                    "the watched root {} is not a directory now; it is watched again once it \
                     is one (after a restart), or remove it with `strata unwatch`",
                    root.display()
                ));
                continue;
            }
            // Watches first, so nothing changed during the scan goes unseen.
            self.watch_tree(root);
            self.publish_counts();
            let scanned = self.engine.call(IndexRequest {
                paths: vec![root.display().to_string()],
                cwd: None,
                threads: None,
            });
            match scanned {
                Ok(summary) => {
                    if let Some(&tx) = summary.tx_ids.last() {
                        self.committed(tx);
                    }
                    tracing::info!(
                        root = %root.display(),
                        files = summary.files,
                        created = summary.created,
                        updated = summary.updated,
                        deleted = summary.deleted,
                        "watching"
                    );
                }
                Err(err) => self.error(format!("reconciling {}: {err}", root.display())),
            }
        }
        self.shared.status().ready = true;
        self.publish_counts();
    }

    /// Walks `root` and watches every directory the walk enters.
    fn watch_tree(&mut self, root: &Path) {
        let walk = walk_builder(root, self.skip_dirs.clone(), self.extra_ignore()).build();
        for entry in walk.flatten() {
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                self.ensure_watch(entry.path());
            }
        }
    }

    /// The settings' extra ignore globs (none when they do not parse: the scan says so).
    fn extra_ignore(&self) -> Option<Arc<Gitignore>> {
        match self.rules() {
            Ok((_, ignore)) => ignore,
            Err(_) => extra_ignore(&self.engine.settings().ignore).ok().flatten(),
        }
    }

    /// The indexer and the extra ignore globs of the settings in force, built again only when
    /// the settings changed.
    fn rules(&self) -> Result<(Arc<Indexer>, Option<Arc<Gitignore>>)> {
        let settings = self.engine.settings();
        let mut cached = self.rules.borrow_mut();
        if let Some(rules) = cached.as_ref().filter(|r| r.settings == settings) {
            return Ok((Arc::clone(&rules.indexer), rules.ignore.clone()));
        }
        let indexer = Arc::new(Indexer::new(self.engine.store(), &settings)?);
        let ignore = extra_ignore(&settings.ignore).ok().flatten();
        let generation = cached.as_ref().map_or(0, |r| r.generation + 1);
        *cached = Some(Rules {
            settings,
            indexer: Arc::clone(&indexer),
            ignore: ignore.clone(),
            generation,
        });
        Ok((indexer, ignore))
    }

    /// Watches directory `dir` (non-recursively) unless it is watched already.
    fn ensure_watch(&mut self, dir: &Path) {
        if self.watched.contains(dir) {
            return;
        }
        match self.shared.tap.watch_dir(&mut self.platform, dir) {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                self.unwatched.remove(dir);
            }
            Err(err) if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) => {
                self.unwatched.insert(dir.to_path_buf());
                self.limit_reached();
            }
            Err(err) if matches!(err.kind, notify::ErrorKind::PathNotFound) => {}
            Err(err) => self.error(format!("watching {}: {err}", dir.display())),
        }
    }

    /// Says once that the watch limit is reached, with its value and how to raise it.
    fn limit_reached(&mut self) {
        self.shared.status().limit_reached = true;
        if self.limit_said {
            return;
        }
        self.limit_said = true;
        let current = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .map_or_else(|_| "unknown".to_string(), |v| v.trim().to_string());
        let injected = self.options.watch_limit.map_or_else(String::new, |n| {
            format!(" (STRATA_WATCH_LIMIT={n} for a test)")
        });
        let message = format!(
            "the inotify watch limit is reached{injected}: fs.inotify.max_user_watches = \
             {current}; directories beyond it are rescanned every {} s instead of watched; raise \
             it with `sudo sysctl fs.inotify.max_user_watches=524288` (and a line in \
             /etc/sysctl.d/ to keep it)",
            self.options.rescan_every.as_secs()
        );
        tracing::warn!("{message}");
        self.error(message);
    }

    /// Counts an error and keeps its words.
    fn error(&self, message: String) {
        tracing::warn!("{message}");
        let mut status = self.shared.status();
        status.errors += 1;
        status.last_error = Some(message);
    }

    fn count_rescans(&self, n: usize) {
        self.shared.status().rescans += n as u64;
    }

    fn committed(&self, tx: u64) {
        let mut status = self.shared.status();
        status.last_commit_tx = Some(tx);
        status.last_commit = Some(Timestamp::now().to_rfc3339());
    }

    fn publish_counts(&self) {
        let mut status = self.shared.status();
        status.watches = self.watched.len() as u64;
        status.unwatched_dirs = self.unwatched.len() as u64;
    }

    /// Whether an event's `path` is the watcher's business: under a root, outside the store
    /// directory and `.git`, not a cookie.
    fn in_scope(&self, path: &Path) -> bool {
        if self.session_files.contains(path) {
            return true;
        }
        let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) else {
            return false;
        };
        !is_cookie(path)
            && !self.skip_dirs.iter().any(|d| path.starts_with(d))
            && !path
                .strip_prefix(root)
                .is_ok_and(|rest| rest.components().any(|c| c.as_os_str() == ".git"))
    }

    /// One debounce window: one transaction.
    fn window(&mut self, events: Vec<Event>) {
        let mut hints = Vec::new();
        let mut subtrees = Vec::new();
        for event in &events {
            if event.need_rescan() {
                self.shared
                    .tap
                    .rescan_pending
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                subtrees.extend(self.roots.iter().cloned());
                continue;
            }
            hints.extend(event.paths.iter().filter(|p| self.in_scope(p)).cloned());
        }
        self.shared.tap.taken(&hints);
        self.count_rescans(subtrees.len());
        self.shared.status().windows += 1;
        let _ = self.reconcile(hints, subtrees);
        self.publish_counts();
    }

    /// Errors of the platform's watcher: the paths they name (or every root) are rescanned.
    fn errors(&mut self, errors: Vec<notify::Error>) {
        let mut subtrees = Vec::new();
        for err in errors {
            if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) {
                self.unwatched.extend(err.paths.iter().cloned());
                self.limit_reached();
                continue;
            }
            self.error(format!("the file watcher: {err}"));
            if err.paths.is_empty() {
                subtrees.extend(self.roots.iter().cloned());
            } else {
                subtrees.extend(err.paths.iter().filter(|p| self.in_scope(p)).cloned());
            }
        }
        self.count_rescans(subtrees.len());
        let _ = self.reconcile(Vec::new(), subtrees);
        self.publish_counts();
    }

    /// Reconciles the hinted paths and the subtrees with the store by stat, through the one disk
    /// path, and commits what differs as one transaction.
    fn reconcile(
        &mut self,
        hints: Vec<PathBuf>,
        mut subtrees: Vec<PathBuf>,
    ) -> Result<ScanSummary> {
        let started = Instant::now();
        let (indexer, _) = self.rules()?;
        let mut plan = Plan {
            ops: Vec::new(),
            stat: StatUpdate {
                filesystem_id: self.filesystem_id.clone(),
                puts: Vec::new(),
                removes: Vec::new(),
            },
            paths: Vec::new(),
            looked: HashSet::new(),
            summary: ScanSummary::default(),
        };
        let mut dirs = DirStat::new(false);
        let mut seen_hints = HashSet::new();
        for hint in hints {
            if !seen_hints.insert(hint.clone()) {
                continue;
            }
            self.hint(&indexer, &hint, &mut plan, &mut subtrees, &mut dirs);
        }
        // A subtree inside another is walked once, by the outer one.
        subtrees.sort();
        subtrees.dedup();
        let mut outer: Vec<PathBuf> = Vec::new();
        for tree in subtrees {
            if !outer.iter().any(|o| tree.starts_with(o)) {
                outer.push(tree);
            }
        }
        for tree in &outer {
            if let Err(err) = self.subtree(&indexer, tree, &mut plan) {
                self.error(format!("rescanning {}: {err}", tree.display()));
            }
        }
        let Plan {
            ops,
            stat,
            paths,
            mut summary,
            ..
        } = plan;
        match self.engine.commit_watched(ops, stat, &paths) {
            Ok(Some(tx)) => {
                summary.tx_ids.push(tx);
                self.committed(tx);
            }
            Ok(None) => {}
            Err(err) => {
                self.error(format!("committing the watcher's changes: {err}"));
                return Err(err);
            }
        }
        summary.seconds = started.elapsed().as_secs_f64();
        Ok(summary)
    }

    /// Whether the entry `name` of directory `dir` is one the walk enters (not ignored). A
    /// directory's listing is kept between windows while its stat stays what it was when it was
    /// listed (an entry added, removed or renamed changes its mtime), unless it was listed within
    /// [`RACY_LISTING`] of its last change (a change in the same clock tick keeps the mtime).
    fn listed(&mut self, dir: &Path, name: &std::ffi::OsStr) -> bool {
        let stat = std::fs::symlink_metadata(dir)
            .ok()
            .map(|meta| crate::store::FileStat::of(&meta));
        let extra = self.extra_ignore();
        let generation = self.rules.borrow().as_ref().map(|r| r.generation);
        if let (Some(stat), Some(kept)) = (stat, self.listings.get(dir))
            && kept.stat == stat
            && Some(kept.generation) == generation
        {
            return kept.names.contains(name);
        }
        let started = Timestamp::now();
        let mut builder = walk_builder(dir, self.skip_dirs.clone(), extra);
        builder.max_depth(Some(1));
        let names: HashSet<OsString> = builder
            .build()
            .flatten()
            .filter(|e| e.depth() == 1)
            .map(|e| e.file_name().to_os_string())
            .collect();
        let listed = names.contains(name);
        let settled = stat.filter(|stat| {
            // Saturating: a file system may report any mtime, far past or future.
            started
                .as_micros()
                .saturating_mul(1000)
                .saturating_sub(stat.mtime_ns)
                > RACY_LISTING.as_nanos() as i64
        });
        match (settled, generation) {
            (Some(stat), Some(generation)) => {
                if self.listings.len() >= MAX_LISTINGS {
                    self.listings.clear();
                }
                let listing = Listing {
                    stat,
                    names,
                    generation,
                };
                self.listings.insert(dir.to_path_buf(), listing);
            }
            _ => {
                self.listings.remove(dir);
            }
        }
        listed
    }

    /// Reconciles one hinted path.
    fn hint(
        &mut self,
        indexer: &Indexer,
        hint: &Path,
        plan: &mut Plan,
        subtrees: &mut Vec<PathBuf>,
        dirs: &mut DirStat,
    ) {
        let (Some(path), Some(parent), Some(name)) =
            (hint.to_str(), hint.parent(), hint.file_name())
        else {
            return;
        };
        if IGNORE_FILES.iter().any(|n| name == *n) {
            // Listings below it may list what it ignores now (or not what it no longer does).
            self.listings.clear();
            subtrees.push(parent.to_path_buf());
            return;
        }
        let held_below = self.watched.contains(hint)
            || self
                .engine
                .store()
                .indexed_paths_under(&self.filesystem_id, &format!("{path}/"))
                .is_ok_and(|below| !below.is_empty());
        let found = presence(dirs, path);
        match found {
            found if found.is_gone() => {
                let is_dir = std::fs::symlink_metadata(hint).is_ok_and(|m| m.is_dir());
                self.plan_file(indexer, path, Look::Gone(found), Timestamp::now(), plan);
                if (is_dir && self.listed(parent, name)) || held_below {
                    subtrees.push(hint.to_path_buf());
                }
            }
            crate::index::Presence::Unknown(err) => {
                self.error(format!("stat of {path}: {err}"));
            }
            found => {
                if held_below {
                    // A directory replaced by a file: what was below it is gone.
                    subtrees.push(hint.to_path_buf());
                }
                // A file a session holds is followed whatever the ignore rules say.
                if !self.session_files.contains(hint) && !self.listed(parent, name) {
                    return;
                }
                let start = Timestamp::now();
                let cache = self
                    .engine
                    .store()
                    .stat_cache(&self.filesystem_id, path)
                    .unwrap_or_default();
                let seen = look(path, hint, found, indexer.look_rules(cache.get(path)));
                self.plan_file(indexer, path, seen, start, plan);
            }
        }
    }

    /// Plans what a look at `path` saw into `plan`.
    fn plan_file(
        &self,
        indexer: &Indexer,
        path: &str,
        seen: Look,
        start: Timestamp,
        plan: &mut Plan,
    ) {
        if !plan.looked.insert(path.to_string()) {
            return;
        }
        if let Look::Unreadable(err) = &seen {
            self.error(format!("reading {path}: {err}"));
            return;
        }
        let gone = matches!(seen, Look::Gone(_));
        let change = StatChange::of(&seen, start);
        let source = FilesystemSource {
            filesystem_id: self.filesystem_id.clone(),
            path: path.to_string(),
        };
        match indexer.plan_look(source, seen) {
            Ok(planned) => {
                if !gone {
                    plan.summary.files += 1;
                }
                plan.summary.bytes_read += planned.bytes_read;
                match planned.action {
                    Action::Created => plan.summary.created += 1,
                    Action::Updated => plan.summary.updated += 1,
                    Action::Unchanged => plan.summary.unchanged += 1,
                    Action::Deleted => plan.summary.deleted += 1,
                }
                record(&mut plan.stat, path, change);
                if !planned.ops.is_empty() {
                    plan.paths.push(path.to_string());
                    plan.ops.extend(planned.ops);
                }
            }
            Err(err) => self.error(format!("planning {path}: {err}")),
        }
    }

    /// Walks subtree `tree` (watching its directories) and reconciles every file in it, and every
    /// stored file under it that is gone.
    fn subtree(&mut self, indexer: &Indexer, tree: &Path, plan: &mut Plan) -> Result<()> {
        let prefix = tree
            .to_str()
            .ok_or_else(|| Error::invalid_path(tree.display().to_string(), "not UTF-8"))?;
        let is_dir = std::fs::symlink_metadata(tree).is_ok_and(|m| m.is_dir());
        // Directories that are gone (or moved away) lose their watch and their place in the
        // watched set.
        let vanished: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|d| d.starts_with(tree) && !d.is_dir())
            .cloned()
            .collect();
        for dir in vanished {
            // A directory moved out of the tree keeps its inotify watch (and would report its
            // changes under its old path) until it is removed; for a deleted one the kernel
            // dropped it already and this fails harmlessly.
            let _ = self.shared.tap.unwatch_dir(&mut self.platform, &dir);
            self.watched.remove(&dir);
        }
        self.unwatched
            .retain(|d| !d.starts_with(tree) || d.is_dir());
        let mut seen: HashSet<String> = HashSet::new();
        // The directories the walk enters under `tree`: a watched one it no longer enters is
        // ignored now (a `.gitignore` or settings edit) and loses its watch.
        let mut entered: HashSet<PathBuf> = HashSet::new();
        if is_dir {
            let cache = self
                .engine
                .store()
                .stat_cache(&self.filesystem_id, prefix)?;
            let mut dirs = DirStat::new(false);
            let walk = walk_builder(tree, self.skip_dirs.clone(), self.extra_ignore()).build();
            for entry in walk {
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(err) => {
                        self.error(format!("walking {}: {err}", tree.display()));
                        continue;
                    }
                };
                let Some(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    self.ensure_watch(entry.path());
                    entered.insert(entry.path().to_path_buf());
                    continue;
                }
                if !kind.is_file() || is_cookie(entry.path()) {
                    continue;
                }
                let Some(path) = entry.path().to_str() else {
                    continue;
                };
                seen.insert(path.to_string());
                if plan.looked.contains(path) {
                    continue;
                }
                let start = Timestamp::now();
                let found = presence(&mut dirs, path);
                let look = look(
                    path,
                    entry.path(),
                    found,
                    indexer.look_rules(cache.get(path)),
                );
                self.plan_file(indexer, path, look, start, plan);
            }
        }
        if is_dir {
            let ignored: Vec<PathBuf> = self
                .watched
                .iter()
                .filter(|d| {
                    d.starts_with(tree) && !entered.contains(*d) && !self.session_dirs.contains(*d)
                })
                .cloned()
                .collect();
            for dir in ignored {
                let _ = self.shared.tap.unwatch_dir(&mut self.platform, &dir);
                self.watched.remove(&dir);
            }
        }
        let mut dirs = DirStat::new(false);
        for path in self
            .engine
            .store()
            .indexed_paths_under(&self.filesystem_id, prefix)?
        {
            if seen.contains(&path) || plan.looked.contains(&path) {
                continue;
            }
            let found = presence(&mut dirs, &path);
            if found.is_gone() {
                self.plan_file(indexer, &path, Look::Gone(found), Timestamp::now(), plan);
            }
        }
        Ok(())
    }
}
