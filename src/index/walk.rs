//! Walking trees in parallel: stat every file, skip those the stat cache vouches for, read and hash
//! the rest on both cores, and hand the results to one consumer over a bounded channel.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use ignore::WalkBuilder;
use ignore::gitignore::Gitignore;

use super::Prepared;
use super::budget::{Budget, thread_cpu_seconds};
use super::disk::{Look, LookRules, Presence, StatChange, look};
use super::rules::DenyRules;
pub use super::scancache::{Cached, Cursor, ScanCache};
use super::tree::{Event, TreeOptions, Visit};
use crate::object::FilesystemSource;
use crate::store::{FileStat, Timestamp};

/// What the walk found at one path.
#[derive(Debug)]
pub enum Found {
    /// The stat cache vouched for this many files, not read (each marked met in the
    /// [`ScanCache`], so that they travel without their paths).
    Unchanged {
        /// How many.
        files: u64,
    },
    /// The file was read and hashed.
    Read {
        /// The canonical path.
        path: String,
        /// The stat it was read under.
        stat: FileStat,
        /// The stat cache change the read calls for (none recorded for a file that kept
        /// changing while it was read).
        change: StatChange,
        /// What was read, as its object.
        prepared: Box<Prepared>,
        /// Bytes reserved in the scan's budget for it, released once it is committed.
        reserved: u64,
    },
    /// A deny rule matches: not read at all.
    Denied {
        /// The canonical path.
        path: String,
    },
    /// Not indexed, with the reason (a symlink, a non-UTF-8 name, a read error).
    Skipped {
        /// The path as found on disk.
        path: PathBuf,
        /// What kind of skip, as [`SkipKind`] names it.
        kind: SkipKind,
        /// Why, in words (an error's own message, for a read error).
        reason: String,
    },
}

/// Why the walk did not index a path: the key of the counts a scan reports by reason.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// A symbolic link (never followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block or character device.
    Device,
    /// Some other kind of file that is not a regular one.
    Special,
    /// A file that could not be stat'ed or read.
    Unreadable,
    /// A directory that could not be listed.
    UnreadableDir,
    /// A name that is not UTF-8.
    NotUtf8,
    /// Another strata store's directory inside the tree.
    Store,
    /// A file deleted while the walk met it.
    Gone,
}

impl SkipKind {
    /// The kind of a file type that is neither a regular file nor a directory.
    pub fn of_type(file_type: std::fs::FileType) -> Self {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_symlink() {
            SkipKind::Symlink
        } else if file_type.is_fifo() {
            SkipKind::Fifo
        } else if file_type.is_socket() {
            SkipKind::Socket
        } else if file_type.is_block_device() || file_type.is_char_device() {
            SkipKind::Device
        } else {
            SkipKind::Special
        }
    }

    /// The kind in a few words, for one skipped path.
    pub fn describe(self) -> &'static str {
        match self {
            SkipKind::Symlink => "a symlink (symlinks are not followed)",
            SkipKind::Fifo => "a FIFO (named pipe), not a regular file",
            SkipKind::Socket => "a socket, not a regular file",
            SkipKind::Device => "a device, not a regular file",
            SkipKind::Special => "not a regular file",
            SkipKind::Unreadable => "cannot be read",
            SkipKind::UnreadableDir => "a directory that cannot be read",
            SkipKind::NotUtf8 => "its name is not UTF-8",
            SkipKind::Store => "another strata store's directory",
            SkipKind::Gone => "gone while it was walked",
        }
    }

    /// The kind's name in counts, singular or plural: `1 symlink`, `2 FIFOs`.
    pub fn counted(self, n: u64) -> String {
        let (one, many) = match self {
            SkipKind::Symlink => ("symlink", "symlinks"),
            SkipKind::Fifo => ("FIFO", "FIFOs"),
            SkipKind::Socket => ("socket", "sockets"),
            SkipKind::Device => ("device", "devices"),
            SkipKind::Special => ("special file", "special files"),
            SkipKind::Unreadable => ("unreadable file", "unreadable files"),
            SkipKind::UnreadableDir => ("unreadable directory", "unreadable directories"),
            SkipKind::NotUtf8 => ("non-UTF-8 name", "non-UTF-8 names"),
            SkipKind::Store => ("other store", "other stores"),
            SkipKind::Gone => ("file gone while walked", "files gone while walked"),
        };
        format!("{n} {}", if n == 1 { one } else { many })
    }
}

/// A scan's stat cache, loaded while the walk starts: a walker stats the files it meets before
/// the cache is there and judges them once it is (the load took a tenth of an unchanged
/// re-index, with a core idle).
#[derive(Debug, Default)]
pub struct CacheSlot(std::sync::OnceLock<Option<ScanCache>>);

impl CacheSlot {
    /// Puts the loaded cache, or `None` when it could not be loaded (the walk then stops).
    pub fn set(&self, cache: Option<ScanCache>) {
        // Set once, by the scan.
        let _ = self.0.set(cache);
    }

    /// The cache if it is there (`Some(None)`: it could not be loaded), without waiting.
    pub fn try_get(&self) -> Option<Option<&ScanCache>> {
        self.0.get().map(Option::as_ref)
    }

    /// The cache, once it is there (`None`: it could not be loaded).
    pub fn wait(&self) -> Option<&ScanCache> {
        self.0.wait().as_ref()
    }
}

/// What the walk needs: roots, rules, the stat cache, and which directories never to enter.
pub struct WalkPlan {
    /// The filesystem the roots are on (this machine's).
    pub filesystem_id: String,
    /// Canonical absolute roots (directories or files).
    pub roots: Vec<PathBuf>,
    /// Deny rules: matching files are reported, never read.
    pub deny: DenyRules,
    /// Files larger than this keep no bytes.
    pub max_content_bytes: u64,
    /// The stat cache entries of the files under the roots, by canonical path (set while the
    /// walk starts).
    pub cache: CacheSlot,
    /// Directories skipped wherever they are met (the store directory).
    pub skip_dirs: Vec<PathBuf>,
    /// Extra ignore rules (gitignore syntax, matched against paths relative to `/`).
    pub ignore: Option<Arc<Gitignore>>,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// When the scan began: the reference of the stat cache's racy-clean rule.
    pub scan_start: Timestamp,
    /// Bytes read and not yet committed: a walker reserves a file's bytes before reading it.
    pub budget: Arc<Budget>,
    /// CPU seconds of each walker thread, added when the thread ends.
    pub thread_cpu: std::sync::Mutex<Vec<f64>>,
    /// The cache entries the walkers met, each walker's in the order it met them (the order
    /// a stat file keeps them in), added when each walker ends.
    pub met_order: std::sync::Mutex<Vec<u32>>,
    /// The directory listings earlier scans kept (none: every directory is listed).
    pub listings: Option<super::listings::Listings>,
}

/// Walks the plan's roots, sending what it finds to `sink` in batches; returns when every worker is done
/// or the receiver hung up.
pub fn walk(plan: &WalkPlan, sink: SyncSender<Vec<Found>>) {
    let options = TreeOptions {
        skip_dirs: &plan.skip_dirs,
        ignore: plan.ignore.as_deref(),
        threads: plan.threads,
        listings: plan.listings.as_ref(),
    };
    let sink = std::sync::Mutex::new(sink);
    let visitor = || {
        Visitor::new(
            plan,
            sink.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    };
    super::tree::walk(&plan.roots, &options, &visitor);
}

/// Whether `name` is one of the temporary files an agent write makes beside its target
/// (`.NAME.strata-new-PID-N`, `.NAME.strata-old-PID-N`): never indexed, and swept when a crash
/// left one behind.
pub fn is_write_temp(name: &str) -> bool {
    write_temp_pid(name).is_some()
}

/// The pid of the writer that made temporary file `name` (see [`is_write_temp`]).
pub fn write_temp_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, tail) = name
        .rsplit_once(".strata-new-")
        .or_else(|| name.rsplit_once(".strata-old-"))?;
    let (pid, n) = tail.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(n) {
        return None;
    }
    digits(pid).then(|| pid.parse().ok()).flatten()
}

/// The walk every tree walk of strata makes from `root` (scans and the watcher alike): `.gitignore`,
/// `.ignore`, `.git/info/exclude` and the global excludes honoured (also from the directories above
/// the root), hidden files included, symlinks never followed, `.git` and the directories of
/// `skip_dirs` (the store's) never entered, and the settings' extra `ignore` globs applied; agent writes' temporary files
/// skipped.
pub fn walk_builder(
    root: &Path,
    skip_dirs: Vec<PathBuf>,
    ignore: Option<Arc<Gitignore>>,
) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir
                && (entry.file_name() == ".git" || skip_dirs.iter().any(|d| d == entry.path()))
            {
                return false;
            }
            if !is_dir && entry.file_name().to_str().is_some_and(is_write_temp) {
                return false;
            }
            !ignore.as_ref().is_some_and(|rules| {
                rules
                    .matched_path_or_any_parents(entry.path(), is_dir)
                    .is_ignore()
            })
        });
    builder
}

/// Files per message on the channel: one message per file made the walker and the consumer wake
/// each other thousands of times (most of an unchanged re-index was scheduler time).
const BATCH_FILES: usize = 256;

/// Files a walker reserves room for when it meets the first one before the stat cache is loaded.
const PENDING_FILES: usize = 4096;

/// Content bytes per message, so that a batch of large files does not hold much memory.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;

/// Bytes a read file holds besides its content (its object, paths, the op): counted in the
/// budget so that many small files weigh what they cost.
const RECORD_OVERHEAD: u64 = 1024;

/// One walker thread: visits entries and sends what it found in batches.
struct Visitor<'p> {
    plan: &'p WalkPlan,
    sink: SyncSender<Vec<Found>>,
    batch: Vec<Found>,
    batch_bytes: u64,
    /// Files the stat cache vouched for since the last [`Found::Unchanged`] in the batch.
    unchanged: u64,
    /// Files stated before the stat cache was loaded (each path with where its name starts), to
    /// judge once it is.
    pending: Vec<(String, usize, Presence)>,
    /// Whether this visitor saw an entry.
    visited: bool,
    /// The directory of the last file judged (`None` before the first: the files directly
    /// under `/` have the empty directory), and the cache's cursor in it.
    dir: Option<Vec<u8>>,
    cursor: Cursor,
    /// The cache entries met, in order.
    met: Vec<u32>,
}

impl<'p> Visitor<'p> {
    /// A walker's visitor that sends what it finds to `sink`, before it has met any directory.
    fn new(plan: &'p WalkPlan, sink: SyncSender<Vec<Found>>) -> Self {
        Visitor {
            plan,
            sink,
            batch: Vec::new(),
            batch_bytes: 0,
            unchanged: 0,
            pending: Vec::new(),
            visited: false,
            dir: None,
            cursor: Cursor::default(),
            met: Vec::new(),
        }
    }
}

impl Visitor<'_> {
    /// Sends the batch; false when the receiver hung up.
    fn flush(&mut self) -> bool {
        if self.unchanged > 0 {
            self.batch.push(Found::Unchanged {
                files: std::mem::take(&mut self.unchanged),
            });
        }
        if self.batch.is_empty() {
            return true;
        }
        self.batch_bytes = 0;
        self.sink.send(std::mem::take(&mut self.batch)).is_ok()
    }

    /// Judges one stated file against `cache` (see [`judge_file`]): its entry is found by its
    /// name in its directory, the next one in the cache's order when the walk and the stat
    /// file agree (the usual case), by name otherwise.
    fn judge(
        &mut self,
        cache: &ScanCache,
        path: &str,
        name_at: usize,
        presence: Presence,
    ) -> Option<Found> {
        let bytes = path.as_bytes();
        let dir = bytes.get(..name_at.saturating_sub(1)).unwrap_or_default();
        let name = bytes.get(name_at..).unwrap_or_default();
        if self.dir.as_deref() != Some(dir) {
            let kept = self.dir.get_or_insert_with(Vec::new);
            kept.clear();
            kept.extend_from_slice(dir);
            self.cursor = cache.cursor(dir);
        }
        let cached = cache.next_in(&mut self.cursor, name);
        if let Some(cached) = cached {
            if self.met.capacity() == 0 {
                // Room for every entry at once: growing by doubling copied it into fresh pages.
                self.met.reserve(cache.len());
            }
            self.met.push(cached.index());
        }
        let Visitor {
            plan,
            sink,
            batch,
            batch_bytes,
            ..
        } = self;
        // Before waiting for the budget, send what this thread holds: the writer can only
        // release what it has been given.
        let mut flush = || {
            if !batch.is_empty() {
                *batch_bytes = 0;
                // A hung-up receiver shows at the next send.
                let _ = sink.send(std::mem::take(batch));
            }
        };
        judge_file(plan, cached, path, presence, &mut flush)
    }

    /// Adds what was found to the batch (`None`: one more unchanged file) and sends the batch
    /// once it is full; false when the receiver hung up.
    fn add(&mut self, found: Option<Found>) -> bool {
        let Some(found) = found else {
            self.unchanged += 1;
            return self.unchanged < BATCH_FILES as u64 || self.flush();
        };
        if let Found::Read { prepared, .. } = &found {
            self.batch_bytes += prepared.bytes_read;
        }
        self.batch.push(found);
        !(self.batch.len() >= BATCH_FILES || self.batch_bytes >= BATCH_BYTES) || self.flush()
    }

    /// Judges the files stated before the cache was there; false when the receiver hung up.
    fn judge_pending(&mut self, cache: &ScanCache) -> bool {
        for (path, name_at, presence) in std::mem::take(&mut self.pending) {
            let found = self.judge(cache, &path, name_at, presence);
            if !self.add(found) {
                return false;
            }
        }
        true
    }
}

impl Visit for Visitor<'_> {
    fn event(&mut self, event: Event<'_>) -> bool {
        self.visited = true;
        let (path, name_at, stat) = match event {
            Event::File {
                path,
                name_at,
                stat,
            } => (path, name_at, stat),
            Event::Skip { path, kind, reason } => {
                return self.add(Some(Found::Skipped { path, kind, reason }));
            }
        };
        let presence = Presence::File(stat);
        let found = match self.plan.cache.try_get() {
            None => {
                if self.pending.capacity() == 0 {
                    // Room for the files one walker meets while a large cache loads, at once:
                    // grown by doubling, the copies showed among an unchanged re-index's page
                    // faults.
                    self.pending.reserve(PENDING_FILES);
                }
                self.pending.push((path.to_string(), name_at, presence));
                return true;
            }
            // The scan could not load its cache and stops.
            Some(None) => return false,
            Some(Some(cache)) => {
                if !self.pending.is_empty() && !self.judge_pending(cache) {
                    return false;
                }
                self.judge(cache, path, name_at, presence)
            }
        };
        self.add(found)
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        // The walker drops each thread's visitor when the thread is done: judge what waited for
        // the cache, and send what is left.
        if !self.pending.is_empty()
            && let Some(cache) = self.plan.cache.wait()
        {
            self.judge_pending(cache);
        }
        self.flush();
        if !self.visited {
            return;
        }
        self.plan
            .met_order
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .append(&mut self.met);
        if let Some(seconds) = thread_cpu_seconds() {
            self.plan
                .thread_cpu
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(seconds);
        }
    }
}

/// Looks at one stated regular file through the one disk path: unless the cache vouches for it
/// or a rule denies it, it is read, hashed and turned into its object here, on the walker's
/// thread. `None`: the cache vouched for it, and it is marked met there.
fn judge_file(
    plan: &WalkPlan,
    cached: Option<Cached<'_>>,
    canonical: &str,
    presence: Presence,
    before_wait: &mut dyn FnMut(),
) -> Option<Found> {
    let path = Path::new(canonical);
    // The cache's vouch, without a path of its own; the deny rules (a file denied since it was
    // indexed is stubbed whatever its stat) asked once, unless the stat file found the file
    // not denied by the same rules (its key names them: a path's answer cannot have changed).
    let mut denied = None;
    if let (Presence::File(stat), Some(cached)) = (&presence, cached)
        && cached.entry().vouches_for(stat)
        && (cached.checked() || !*denied.get_or_insert_with(|| plan.deny.is_denied(canonical)))
    {
        cached.mark_vouched();
        if cached.mark() {
            return None;
        }
        // Met twice (overlapping roots): counted once.
        return Some(Found::Unchanged { files: 0 });
    }
    let denied = denied.unwrap_or_else(|| plan.deny.is_denied(canonical));
    let canonical = canonical.to_string();
    let entry = cached.map(Cached::entry);
    let rules = LookRules {
        deny: &plan.deny,
        max_content_bytes: plan.max_content_bytes,
        cached: entry.as_ref(),
    };
    // The bytes a read holds until the commit: the file's, kept up to the content limit (a larger
    // file streams through the hash), once more for the compressed record beside them, at most.
    let reserved = match &presence {
        Presence::File(stat) if !denied => {
            let kept = if stat.size > plan.max_content_bytes {
                0
            } else {
                stat.size
            };
            kept.saturating_mul(2).saturating_add(RECORD_OVERHEAD)
        }
        _ => 0,
    };
    if reserved > 0 {
        plan.budget.reserve(reserved, before_wait);
    }
    let look = look(&canonical, path, presence, rules);
    if !matches!(look, Look::Read { .. }) {
        plan.budget.release(reserved);
    }
    let change = StatChange::of(&look, plan.scan_start);
    Some(match look {
        Look::Denied => Found::Denied { path: canonical },
        Look::Vouched(_) => Found::Unchanged {
            files: u64::from(cached.is_some_and(Cached::mark)),
        },
        Look::Read { reading, stat, .. } => {
            let source = FilesystemSource {
                filesystem_id: plan.filesystem_id.clone(),
                path: canonical.clone(),
            };
            match Prepared::new(source, reading) {
                Ok(prepared) => Found::Read {
                    path: canonical,
                    stat,
                    change,
                    prepared: Box::new(prepared),
                    reserved,
                },
                Err(err) => {
                    plan.budget.release(reserved);
                    Found::Skipped {
                        path: path.to_path_buf(),
                        kind: SkipKind::Unreadable,
                        reason: err.to_string(),
                    }
                }
            }
        }
        Look::Unreadable(err) => Found::Skipped {
            path: path.to_path_buf(),
            kind: SkipKind::Unreadable,
            reason: format!("cannot be read: {err}"),
        },
        Look::Gone(_) => Found::Skipped {
            path: path.to_path_buf(),
            kind: SkipKind::Gone,
            reason: SkipKind::Gone.describe().into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::store::StatEntry;

    /// A plan over `root` with an empty slot for the cache.
    fn plan(root: &Path) -> Result<WalkPlan> {
        Ok(WalkPlan {
            filesystem_id: "fs".into(),
            roots: vec![root.to_path_buf()],
            deny: DenyRules::with_defaults::<&str>(&[])?,
            max_content_bytes: 1 << 20,
            cache: CacheSlot::default(),
            skip_dirs: Vec::new(),
            ignore: None,
            threads: 2,
            scan_start: Timestamp::now(),
            budget: Arc::new(Budget::new(1 << 20)),
            thread_cpu: std::sync::Mutex::new(Vec::new()),
            met_order: std::sync::Mutex::new(Vec::new()),
            listings: None,
        })
    }

    /// Walks with the cache put `delay` after the walk started; returns the unchanged count and
    /// the paths read.
    fn walk_late(
        plan: &WalkPlan,
        cache: Option<ScanCache>,
        delay: std::time::Duration,
    ) -> (u64, Vec<String>) {
        let (sender, receiver) = std::sync::mpsc::sync_channel(4);
        std::thread::scope(|scope| {
            scope.spawn(move || walk(plan, sender));
            std::thread::sleep(delay);
            plan.cache.set(cache);
            let (mut unchanged, mut read) = (0, Vec::new());
            for found in receiver.iter().flatten() {
                match found {
                    Found::Unchanged { files } => unchanged += files,
                    Found::Read { path, .. } => read.push(path),
                    _ => {}
                }
            }
            read.sort();
            (unchanged, read)
        })
    }

    /// A walker's first file directly under `/` (a scan of `/`, or a root file there) is judged
    /// by its own entry, not by the entry of the same name in the cache's first directory: that
    /// entry, marked met, would hide its own file's deletion (a hard link of one inode vouches
    /// for both paths).
    #[test]
    fn a_first_file_under_the_filesystem_root_is_judged_by_its_own_entry() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let plan = plan(tmp.path())?;
        let stat = FileStat {
            size: 5,
            mtime_ns: 1_000_000_000,
            ctime_ns: 1_000_000_000,
            inode: 42,
        };
        let entry = StatEntry::recorded(stat, crate::hash::sha256(b"same"), Timestamp::now());
        let mut cache = ScanCache::with_capacity(2);
        // `/t/sub` is the cache's first directory, `` (the filesystem root's files) its second.
        cache.insert("/t/sub/x", entry);
        cache.insert("/x", entry);
        let (sender, _receiver) = std::sync::mpsc::sync_channel(4);
        let mut visitor = Visitor::new(&plan, sender);
        assert!(
            visitor
                .judge(&cache, "/x", 1, Presence::File(stat))
                .is_none(),
            "vouched for"
        );
        assert!(cache.get("/x").is_some_and(|c| c.is_marked()));
        assert!(
            cache.get("/t/sub/x").is_some_and(|c| !c.is_marked()),
            "another directory's entry was taken"
        );
        Ok(())
    }

    #[test]
    fn files_stated_before_the_cache_is_loaded_are_judged_once_it_is() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let root = std::fs::canonicalize(tmp.path()).map_err(|e| Error::io("canonicalize", e))?;
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let mut cache = ScanCache::with_capacity(4);
        for name in ["a.txt", "b.txt", "c.txt"] {
            let path = root.join(name);
            std::fs::write(&path, name).map_err(|e| Error::io("write", e))?;
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(hour_ago))
                .map_err(|e| Error::io("set mtime", e))?;
            let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat", e))?;
            if name != "c.txt" {
                let entry = StatEntry::recorded(
                    FileStat::of(&meta),
                    crate::hash::sha256(name.as_bytes()),
                    Timestamp::now(),
                );
                cache.insert(path.to_str().unwrap_or_default(), entry);
            }
        }
        let plan = plan(&root)?;
        let (unchanged, read) =
            walk_late(&plan, Some(cache), std::time::Duration::from_millis(300));
        let c = root.join("c.txt").to_str().unwrap_or_default().to_string();
        assert_eq!((unchanged, read), (2, vec![c]));
        assert!(plan.cache.wait().is_some_and(|cache| {
            ["a.txt", "b.txt"].iter().all(|name| {
                cache
                    .get(root.join(name).to_str().unwrap_or_default())
                    .is_some_and(|c| c.is_marked())
            })
        }));
        // A cache that could not be loaded: nothing is read, the walk ends.
        let plan = self::plan(&root)?;
        let (unchanged, read) = walk_late(&plan, None, std::time::Duration::from_millis(100));
        assert_eq!((unchanged, read.len()), (0, 0));
        Ok(())
    }
}
