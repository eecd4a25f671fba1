//! The agent's writes (issue 18): a batch of files written, created or deleted all or nothing,
//! each only if it still has the hash the agent quoted, then recorded through the index's one
//! disk path so that the watcher and later scans see the files as unchanged.
//!
//! How a batch is written, in one process-wide critical section (every strata writer of a store
//! lives in the one process that holds it open, so the check and the write are atomic against
//! the daemon's other sessions, the CLI and the watcher):
//! 1. each file is resolved (symlinks followed, never out of its mount; read-only mounts and deny
//!    rules refuse) and hashed; a hash other than the quoted one is [`Stale`];
//! 2. each new content goes to a temporary file in the target's directory (the target's mode
//!    kept), synced;
//! 3. each target is hashed again and kept as a hard link beside it (the rollback copy), then the
//!    temporary file is renamed over it (deletions rename the target to the rollback name); the
//!    directories are synced;
//! 4. a failure anywhere renames the rollback copies back and removes created files: nothing
//!    changed. On success the rollback copies go;
//! 5. each new version is queued for the session's commit as a scan would record it. Its
//!    record (hash, object, compressed blob) is prepared on a second thread during steps 2–3,
//!    and while the target is still the staged file (its inode, size and mtime as when it was
//!    synced) the bytes just written are what it holds and are not read back.
//!
//! A process that does not cooperate can still change a file between step 3's check and its
//! rename (a window of one `rename`); a SIGKILL between two renames of one batch leaves each file
//! either old or new, never mixed, and the next scan or resume records what is on disk.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::*;
use crate::index::{Body, Prepared, Reading, classify};
use crate::store::{FileStat, StatEntry};

/// Serialises every agent write of this process (see the module docs).
static WRITE_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
thread_local! {
    /// Tests: the swap of this file of the next batch fails as a full disk would.
    pub(crate) static FAIL_SWAP_AT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// One file of a write batch.
#[derive(Clone, Debug)]
pub struct FileWrite {
    /// The agent path.
    pub agent_path: String,
    /// The SHA-256 (hex) the file must have now; `None`: it must not exist.
    pub expected_sha256: Option<String>,
    /// The new bytes; `None` deletes the file.
    pub content: Option<Vec<u8>>,
}

/// A file of a batch whose hash is not the quoted one, or that another party's pushed copy
/// covers: nothing was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    /// Which file of the batch (its index).
    pub index: usize,
    /// The agent path.
    pub agent_path: String,
    /// The file as it is now (a pushed copy that stands, or the disk's): `None` when it does
    /// not exist.
    pub current: Option<DiskText>,
    /// `Some(who)` when another party's pushed copy covers the file (who pushed it; empty when
    /// unnamed): `current` is that copy.
    pub pushed_by: Option<String>,
}

impl Stale {
    fn at(mut self, agent_path: &str) -> Self {
        self.agent_path = agent_path.to_string();
        self
    }
}

/// A file's bytes on disk now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskText {
    /// The SHA-256 (hex) of the bytes.
    pub sha256: String,
    /// The text, when the bytes are text (UTF-8 without a NUL byte, the index's rule).
    pub text: Option<String>,
}

/// A file's bytes as a write found them on disk, with their hash.
struct OnDisk {
    sha256: String,
    bytes: Vec<u8>,
}

impl OnDisk {
    /// The file at `path` now: `None` when nothing is there.
    fn read(path: &Path) -> std::io::Result<Option<Self>> {
        match fs::read(path) {
            Ok(bytes) => Ok(Some(OnDisk {
                sha256: crate::hash::sha256(&bytes).to_hex(),
                bytes,
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The bytes as the agent's tools see them (text by the index's rule).
    fn to_text(&self) -> DiskText {
        DiskText {
            sha256: self.sha256.clone(),
            text: text_of(self.bytes.clone()),
        }
    }

    /// [`OnDisk::to_text`], keeping the bytes instead of copying them.
    fn into_text(self) -> DiskText {
        DiskText {
            sha256: self.sha256,
            text: text_of(self.bytes),
        }
    }
}

/// A file looked at for a write.
struct Target {
    agent_path: String,
    source: FilesystemSource,
    resolved: crate::resolve::ResolvedPath,
    real: PathBuf,
    current: Option<OnDisk>,
    mode: Option<u32>,
}

/// A new content written to its temporary file: where, and the file's stat once synced (how
/// the record after the rename knows the target still holds these bytes).
struct Staged {
    path: PathBuf,
    stat: FileStat,
}

impl Session {
    /// The file at `agent_path` as it is on disk now, for a write: `None` when nothing is
    /// there. Nothing is queued or recorded.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path outside the mounts, through a symlink out of its
    /// mount, or in a read-only mount; [`Error::PermissionDenied`] for a denied file;
    /// [`Error::Io`] when it cannot be read.
    pub fn disk_file(&self, agent_path: &str) -> Result<Option<DiskText>> {
        Ok(self.target(agent_path)?.current.map(OnDisk::into_text))
    }

    fn target(&self, agent_path: &str) -> Result<Target> {
        let (source, resolved) = self.source_of(agent_path)?;
        if resolved.read_only {
            return Err(Error::invalid_path(
                agent_path,
                "it lies in a read-only mount; the agent may write only in writable mounts",
            ));
        }
        if self.indexer.deny_rules().is_denied(&source.path) {
            return Err(Error::PermissionDenied {
                reason: format!("{agent_path} matches a deny rule; it is never read or written"),
            });
        }
        if let Some(tool) = &self.writing_tool {
            let (mode, why) = self
                .write_policy
                .decide(tool, self.mount_relative(&resolved));
            if mode == crate::index::ApprovalMode::Deny {
                return Err(Error::PermissionDenied {
                    reason: format!("{tool} may not write {agent_path}: {why}"),
                });
            }
        }
        let real = self.resolver.check_symlinks(&resolved)?;
        let (current, mode) = match fs::symlink_metadata(&real) {
            Ok(meta) if meta.is_file() => {
                let now = OnDisk::read(&real)
                    .map_err(|e| Error::io(format!("reading {agent_path}"), e))?;
                (now, Some(meta.permissions().mode()))
            }
            Ok(_) => {
                return Err(Error::invalid_path(
                    agent_path,
                    "it is not a regular file (a directory or a device); write files only",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
            Err(e) => return Err(Error::io(format!("looking at {agent_path}"), e)),
        };
        Ok(Target {
            agent_path: agent_path.to_string(),
            source,
            resolved,
            real,
            current,
            mode,
        })
    }

    /// Writes `writes` all or nothing (see the module docs) and queues the new versions (and
    /// tombstones) for the next commit, read back through the index's one disk path with their
    /// stat cache entries. The files join the session's active set. Returns what indexing did
    /// per file, or the first file whose hash is not the quoted one (nothing written then).
    ///
    /// # Errors
    /// As [`Session::disk_file`]; [`Error::Io`] when writing fails (everything rolled back);
    /// [`Error::InvalidInput`] on a read-only view or a path named twice.
    pub fn write_files(
        &mut self,
        writes: Vec<FileWrite>,
    ) -> Result<std::result::Result<Vec<Touched>, Stale>> {
        self.writable()?;
        let _guard = WRITE_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        let limit = self.indexer.max_content_bytes();
        if let Some(big) = writes
            .iter()
            .find(|w| w.content.as_ref().is_some_and(|c| c.len() as u64 > limit))
        {
            return Err(Error::invalid_input(format!(
                "the new content of {} is over the store's content limit ({limit} bytes); \
                 write smaller files or raise max_content_bytes in the store's settings",
                big.agent_path
            )));
        }
        let mut targets = Vec::with_capacity(writes.len());
        let mut effective = Vec::with_capacity(writes.len());
        // Copies the caller pushed itself that these writes build on (cleared once written).
        let mut superseded = Vec::new();
        for (index, mut write) in writes.into_iter().enumerate() {
            let target = self.target(&write.agent_path)?;
            if targets.iter().any(|t: &Target| t.real == target.real) {
                return Err(Error::invalid_input(format!(
                    "{} is named twice in one write; name each file once",
                    write.agent_path
                )));
            }
            let disk = target.current.as_ref().map(|c| c.sha256.as_str());
            if let Some(copy) = self.standing_copy(&target.agent_path, disk) {
                match based_on_copy(index, &write, &copy, self.writing_caller.as_deref()) {
                    Err(stale) => return Ok(Err(stale.at(&target.agent_path))),
                    // The copy is the base: the disk must still be what it was made over.
                    Ok(()) => write.expected_sha256 = Some(copy.base_sha256.clone()),
                }
                superseded.push(target.agent_path.clone());
            }
            if let Some(stale) = stale(index, &write, target.current.as_ref(), &target.agent_path) {
                return Ok(Err(stale));
            }
            targets.push(target);
            effective.push(write);
        }
        let writes = effective;
        for target in &targets {
            sweep_leftovers(&target.real);
        }
        // Each new content's record (its hash, object and compressed blob) is prepared on a
        // second thread while the files are staged, synced and swapped: the same work, less
        // waiting.
        let (swapped, prepared) = std::thread::scope(|scope| {
            let preparing: Vec<_> = writes
                .iter()
                .zip(&targets)
                .map(|(write, target)| {
                    let source = target.source.clone();
                    write
                        .content
                        .as_deref()
                        .map(|bytes| scope.spawn(move || prepare_written(source, bytes)))
                })
                .collect();
            let swapped = swap_all(&writes, &targets);
            let prepared: Vec<Option<Result<Prepared>>> = preparing
                .into_iter()
                .map(|handle| {
                    handle.map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::invariant(
                                "preparing a written file's record panicked",
                            ))
                        })
                    })
                })
                .collect();
            (swapped, prepared)
        });
        let staged = match swapped? {
            Ok(staged) => staged,
            Err(stale) => return Ok(Err(stale)),
        };
        let mut touched = Vec::with_capacity(targets.len());
        for ((target, staged), prepared) in targets.into_iter().zip(staged).zip(prepared) {
            let written = match (staged, prepared) {
                (Some(staged), Some(prepared)) => Some((staged, prepared?)),
                _ => None,
            };
            touched.push(self.record_written(target, written)?);
        }
        for agent_path in superseded {
            self.drop_copy(&agent_path);
        }
        Ok(Ok(touched))
    }

    /// Queues what is on disk now at a written target (`written`: how its new content was
    /// staged and that content's record; `None` for a deletion), through the one disk path.
    /// While the target is still the staged file (same inode, size and mtime as when it was
    /// synced), it holds the bytes just written, and their record is queued without reading
    /// them back; otherwise the file is read as any scan would.
    fn record_written(
        &mut self,
        target: Target,
        written: Option<(Staged, Prepared)>,
    ) -> Result<Touched> {
        let Target {
            source,
            resolved,
            real,
            ..
        } = target;
        let Some((staged, prepared)) = written else {
            let gone = presence(&mut DirStat::new(true), &source.path);
            let look = Look::Gone(gone);
            let change = StatChange::of(&look, Timestamp::now());
            let planned = self.plan_look(source.clone(), look, change)?;
            self.apply_planned(&planned, &source);
            self.ensure_cached(&planned.id)?;
            return Ok(Touched {
                path: self
                    .resolver
                    .reverse_resolve(&source.filesystem_id, &source.path),
                id: planned.id,
                action: planned.action,
            });
        };
        let start = Timestamp::now();
        let unchanged = fs::symlink_metadata(&real)
            .ok()
            .map(|meta| FileStat::of(&meta))
            .filter(|now| {
                now.inode == staged.stat.inode
                    && now.size == staged.stat.size
                    && now.mtime_ns == staged.stat.mtime_ns
            });
        let mut planned = match (unchanged, prepared.object.file_hash().copied()) {
            (Some(stat), Some(file_hash)) => {
                let change = StatChange::Put(StatEntry::recorded(stat, file_hash, start));
                self.index_prepared(&source, prepared, &stat, change)?
            }
            _ => self.index_from_disk_keeping(source.clone(), &real)?.0,
        };
        self.record_spelling(&mut planned, &resolved);
        self.after_read(planned, &source)
    }
}

/// The record of a new content, as a scan would prepare it after reading these bytes.
fn prepare_written(source: FilesystemSource, bytes: &[u8]) -> Result<Prepared> {
    let reading = Reading {
        file_hash: crate::hash::sha256(bytes),
        size: bytes.len() as u64,
        body: classify(bytes.to_vec()),
    };
    Prepared::new(source, reading)
}

/// Stages every new content, then checks each target once more and swaps it in, all or
/// nothing: how each content was staged (`None` for a deletion), or the first stale file.
fn swap_all(
    writes: &[FileWrite],
    targets: &[Target],
) -> Result<std::result::Result<Vec<Option<Staged>>, Stale>> {
    let mut staged = Vec::with_capacity(writes.len());
    for (write, target) in writes.iter().zip(targets) {
        match stage(write, target) {
            Ok(temp) => staged.push(temp),
            Err(e) => {
                for temp in staged.into_iter().flatten() {
                    let _ = fs::remove_file(temp.path);
                }
                return Err(e);
            }
        }
    }
    let mut done: Vec<Swapped> = Vec::with_capacity(writes.len());
    for (index, ((write, target), temp)) in writes.iter().zip(targets).zip(&staged).enumerate() {
        #[cfg(test)]
        let swapped = if FAIL_SWAP_AT.with(|f| f.get()) == Some(index) {
            Err(Error::io(
                "writing (a failure injected by a test)",
                std::io::Error::other("no space left"),
            ))
        } else {
            swap(index, write, target, temp.as_ref())
        };
        #[cfg(not(test))]
        let swapped = swap(index, write, target, temp.as_ref());
        match swapped {
            Ok(Ok(swapped)) => done.push(swapped),
            failed => {
                for swapped in done.iter().rev() {
                    swapped.undo();
                }
                for temp in staged.iter().skip(index).flatten() {
                    let _ = fs::remove_file(&temp.path);
                }
                return match failed {
                    Ok(Err(stale)) => Ok(Err(stale)),
                    Err(e) => Err(e),
                    Ok(Ok(_)) => Err(Error::invariant("a swap both failed and succeeded")),
                };
            }
        }
    }
    for swapped in &done {
        swapped.finish();
    }
    Ok(Ok(staged))
}

/// The bytes as text, by the index's rule ([`classify`]): UTF-8 without a NUL byte.
fn text_of(bytes: Vec<u8>) -> Option<String> {
    match classify(bytes) {
        Body::Text(text) => Some(text),
        Body::Binary(_) | Body::TooLarge => None,
    }
}

/// Checks a write over a pushed copy that stands: another party's copy refuses it (seed 001's
/// `overlapping_edits`); the caller's own must be the base the write quotes.
fn based_on_copy(
    index: usize,
    write: &FileWrite,
    copy: &PushedCopy,
    caller: Option<&str>,
) -> std::result::Result<(), Stale> {
    let refused = |pushed_by| Stale {
        index,
        agent_path: String::new(),
        current: Some(copy.as_disk_text()),
        pushed_by,
    };
    if !copy.pushed_by(caller) {
        return Err(refused(Some(copy.by.clone().unwrap_or_default())));
    }
    match &write.expected_sha256 {
        Some(quoted) if quoted.trim().eq_ignore_ascii_case(&copy.sha256) => Ok(()),
        _ => Err(refused(None)),
    }
}

fn stale(
    index: usize,
    write: &FileWrite,
    current: Option<&OnDisk>,
    agent_path: &str,
) -> Option<Stale> {
    let fresh = match (&write.expected_sha256, current) {
        (None, None) => true,
        (Some(expected), Some(now)) => expected.trim().eq_ignore_ascii_case(&now.sha256),
        _ => false,
    };
    (!fresh).then(|| Stale {
        index,
        agent_path: agent_path.to_string(),
        current: current.map(OnDisk::to_text),
        pushed_by: None,
    })
}

/// Removes the temporary files a writer that is gone (killed between its write and its
/// rename) left beside `path`: a `new` one is content never renamed in, an `old` one the
/// rollback link of content the target no longer needs. Those of a live process other than
/// this one are kept; this process's own are leftovers too, as every write of this process
/// holds the write lock. Best effort: what cannot be listed or removed stays.
///
/// A target is swept at most once every [`SWEEP_EVERY`] in a process: listing a directory of
/// 10 000 entries costs milliseconds, and leftovers only appear when a writer is killed.
fn sweep_leftovers(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    if !sweep_due(path, std::time::Instant::now()) {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let ours = std::process::id();
    let prefix = format!(".{name}.strata-");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(entry_name) = file_name.to_str() else {
            continue;
        };
        if !entry_name.starts_with(&prefix) {
            continue;
        }
        let Some(pid) = crate::index::write_temp_pid(entry_name) else {
            continue;
        };
        if pid == ours || !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// How long a target swept for leftovers stays swept in this process.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `path` is due a sweep at `now` (not swept within [`SWEEP_EVERY`]); records it as
/// swept when it is. The record is bounded: it starts again past 4 096 targets.
fn sweep_due(path: &Path, now: std::time::Instant) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    static SWEPT: Mutex<Option<HashMap<PathBuf, std::time::Instant>>> = Mutex::new(None);
    let mut swept = SWEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let swept = swept.get_or_insert_with(HashMap::new);
    if swept
        .get(path)
        .is_some_and(|at| now.saturating_duration_since(*at) < SWEEP_EVERY)
    {
        return false;
    }
    if swept.len() >= 4096 {
        swept.clear();
    }
    swept.insert(path.to_path_buf(), now);
    true
}

/// A name beside `path` for strata's own temporary files: hidden, with the pid and a counter.
fn beside(path: &Path, what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.strata-{what}-{}-{n}", std::process::id()))
}

/// Writes the new content to a temporary file beside the target (its mode kept), synced.
fn stage(write: &FileWrite, target: &Target) -> Result<Option<Staged>> {
    let Some(content) = &write.content else {
        return Ok(None);
    };
    let dir = target.real.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| {
            Error::io(
                format!("creating the directory of {}", target.agent_path),
                e,
            )
        })?;
    }
    let temp = beside(&target.real, "new");
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(content)?;
        if let Some(mode) = target.mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        file.metadata()
    })();
    match written {
        Ok(meta) => Ok(Some(Staged {
            path: temp,
            stat: FileStat::of(&meta),
        })),
        Err(e) => {
            let _ = fs::remove_file(&temp);
            Err(Error::io(format!("writing {}", target.agent_path), e))
        }
    }
}

/// One file swapped in (or deleted), with what undoes it.
struct Swapped {
    target: PathBuf,
    /// The old file's rollback copy (a hard link); `None` when the file was created.
    backup: Option<PathBuf>,
}

impl Swapped {
    /// Puts the old file back (or removes the created one).
    fn undo(&self) {
        match &self.backup {
            Some(backup) => {
                let _ = fs::rename(backup, &self.target);
            }
            None => {
                let _ = fs::remove_file(&self.target);
            }
        }
        sync_dir(&self.target);
    }

    /// Drops the rollback copy.
    fn finish(&self) {
        if let Some(backup) = &self.backup {
            let _ = fs::remove_file(backup);
        }
    }
}

/// Checks the target's hash once more, keeps a rollback link, and renames the temporary file
/// over it (or the target away, for a deletion).
fn swap(
    index: usize,
    write: &FileWrite,
    target: &Target,
    staged: Option<&Staged>,
) -> Result<std::result::Result<Swapped, Stale>> {
    let temp = staged.map(|s| s.path.as_path());
    let now = OnDisk::read(&target.real)
        .map_err(|e| Error::io(format!("reading {}", target.agent_path), e))?;
    if let Some(stale) = stale(index, write, now.as_ref(), &target.agent_path) {
        if let Some(temp) = temp {
            let _ = fs::remove_file(temp);
        }
        return Ok(Err(stale));
    }
    let io = |e| Error::io(format!("writing {}", target.agent_path), e);
    let backup = match now {
        Some(_) => {
            let backup = beside(&target.real, "old");
            fs::hard_link(&target.real, &backup).map_err(io)?;
            Some(backup)
        }
        None => None,
    };
    let moved = match temp {
        Some(temp) => fs::rename(temp, &target.real),
        None => match &backup {
            Some(_) => fs::remove_file(&target.real),
            None => Ok(()),
        },
    };
    if let Err(e) = moved {
        if let Some(backup) = &backup {
            let _ = fs::remove_file(backup);
        }
        return Err(io(e));
    }
    sync_dir(&target.real);
    Ok(Ok(Swapped {
        target: target.real.clone(),
        backup,
    }))
}

/// Syncs the directory holding `path`, so a rename in it survives a crash.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(dir) = fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    /// A target is swept at its first write, not again within a minute, and again after.
    #[test]
    fn a_target_is_swept_once_a_minute_at_most() {
        let now = std::time::Instant::now();
        let path = Path::new("/nonexistent/sweep-test/a.txt");
        assert!(sweep_due(path, now));
        assert!(!sweep_due(path, now + std::time::Duration::from_secs(59)));
        assert!(sweep_due(
            Path::new("/nonexistent/sweep-test/b.txt"),
            now + std::time::Duration::from_secs(1)
        ));
        assert!(sweep_due(
            path,
            now + SWEEP_EVERY + std::time::Duration::from_secs(1)
        ));
    }
}
