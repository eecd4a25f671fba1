//! The directory walk of scans, as git walks a work tree: each directory opened relative to its
//! parent's handle and listed with `getdents`, each file stated relative to its directory
//! (`fstatat`), on a few threads. It applies the rules of [`super::walk_builder`] (the walk of
//! the watcher and of strata's other tree walks) exactly, and a test holds the two to the same
//! paths and the same skip reports: `.gitignore`, `.ignore` and `.git/info/exclude` files of the
//! tree and of the directories above it, git's global excludes, hidden files included, symlinks
//! never followed, `.git` and the given directories never entered, agent writes' temporary
//! files and the extra ignore globs left out.
//!
//! What it saves over the `ignore` crate's walker: a path lookup from the root for every stat,
//! a path allocation and an ignore-matcher node for every entry (the walk was about half of an
//! unchanged re-index's CPU).

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::dirstat::file_stat;
use super::gitconfig;
use super::listings::{Listing, Listings, Lookup};
use super::walk::{SkipKind, is_write_temp};
use crate::store::FileStat;

/// What the walk tells its visitor.
#[derive(Debug)]
pub enum Event<'a> {
    /// A regular file with a UTF-8 path, and its stat.
    File {
        /// The file's path (canonical when the roots are).
        path: &'a str,
        /// Where its name starts in `path` (after the last `/`).
        name_at: usize,
        /// Its stat (symlinks not followed).
        stat: FileStat,
    },
    /// A path not indexed, and why.
    Skip {
        /// The path as found on disk.
        path: PathBuf,
        /// What kind of skip.
        kind: SkipKind,
        /// Why, in words.
        reason: String,
    },
}

/// Takes what one walker thread finds.
pub trait Visit {
    /// Takes one event; false stops the walk.
    fn event(&mut self, event: Event<'_>) -> bool;
}

/// What the walk leaves out besides the ignore files' rules.
pub struct TreeOptions<'a> {
    /// Directories never entered (the store's).
    pub skip_dirs: &'a [PathBuf],
    /// Extra ignore rules (gitignore syntax, matched against paths relative to `/`).
    pub ignore: Option<&'a Gitignore>,
    /// Walker threads (0: one per core, at most 12, as the `ignore` crate chooses).
    pub threads: usize,
    /// The directory listings earlier scans kept, and where this walk adds what it sees
    /// (none: every directory is listed).
    pub listings: Option<&'a Listings>,
}

/// Directory handles the walk keeps open for the subdirectories waiting to be read, at most; past
/// it a subdirectory is opened by its full path (a tree thousands of directories deep would
/// otherwise run out of descriptors).
const MAX_OPEN_DIRS: usize = 256;

/// Bytes of the buffer each walker thread lists directories into.
const LISTING_BUFFER: usize = 32 * 1024;

/// Walks `roots` (absolute paths of directories or files) on `options.threads` threads, each
/// with a visitor made by `visitor`; returns once every thread is done or a visitor stopped it.
pub fn walk<V: Visit>(
    roots: &[PathBuf],
    options: &TreeOptions<'_>,
    visitor: &(dyn Fn() -> V + Sync),
) {
    if roots.is_empty() {
        return;
    }
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(12)),
        n => n,
    };
    let open_dirs = AtomicUsize::new(0);
    let shared = Shared {
        options,
        global: OnceLock::new(),
        queue: Queue::new(roots.iter().rev().cloned().map(Work::Root).collect()),
        open_dirs: &open_dirs,
    };
    let work = || {
        let mut worker = Worker {
            shared: &shared,
            visit: visitor(),
            listing: Vec::with_capacity(LISTING_BUFFER),
            names: Vec::new(),
            entries: Vec::new(),
            path: Vec::new(),
            // Room for every kept directory at once (growing by doubling copied the list).
            seen: Vec::with_capacity(options.listings.map_or(0, Listings::kept_len)),
        };
        worker.run();
        if let Some(listings) = options.listings {
            listings.add_seen(&mut worker.seen);
        }
    };
    // The calling thread is one of the walkers, and the others start first: on two cores a
    // thread that spawned a walker waited for a core before it could spawn the next (the
    // second walker started 1-2 ms after the first in an unchanged re-index of 5 800 files).
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
}

/// Git's global excludes (`core.excludesFile` as git finds it, [`gitconfig::excludes_file`]),
/// patterns relative to the working directory as the `ignore` crate reads them (none when that
/// is unknown). [`super::walk_builder`] adds the same file, so the two walks agree.
fn global_excludes() -> Gitignore {
    let Ok(cwd) = std::env::current_dir() else {
        return Gitignore::empty();
    };
    let Some(file) = gitconfig::excludes_file(&gitconfig::ConfigEnv::current()) else {
        return Gitignore::empty();
    };
    if !file.is_file() {
        return Gitignore::empty();
    }
    let mut builder = GitignoreBuilder::new(cwd);
    // As the crate's own global matcher: a bad line is skipped, an unreadable file is none.
    let _partial = builder.add(file);
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// What the walker threads share.
struct Shared<'a> {
    options: &'a TreeOptions<'a>,
    /// Git's global excludes, read by the first walker that matches a path against them (the
    /// others start meanwhile).
    global: OnceLock<Gitignore>,
    queue: Queue<'a>,
    /// Directory handles open.
    open_dirs: &'a AtomicUsize,
}

/// A unit of work: a root, or a directory to list.
enum Work<'a> {
    Root(PathBuf),
    Dir(DirWork<'a>),
}

/// A directory to list.
struct DirWork<'a> {
    path: PathBuf,
    /// Its name, and its parent's handle to open it by (none: opened by its path).
    at: Option<(CString, Arc<DirFd<'a>>)>,
    /// The ignore rules of its parent and the directories above.
    level: Option<Arc<Level>>,
}

/// An open directory, counted in [`Shared::open_dirs`] while it lives.
struct DirFd<'a> {
    fd: OwnedFd,
    open: &'a AtomicUsize,
}

impl Drop for DirFd<'_> {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The work queue: last in, first out (depth first, which bounds the directories held open).
struct Queue<'a> {
    state: Mutex<QueueState<'a>>,
    wake: Condvar,
}

/// What the queue's lock guards.
struct QueueState<'a> {
    work: Vec<Work<'a>>,
    /// Threads working on an item (which may add more).
    busy: usize,
    quit: bool,
}

impl<'a> Queue<'a> {
    /// A queue holding `work` (the last item is taken first).
    fn new(work: Vec<Work<'a>>) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                work,
                busy: 0,
                quit: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// The next item, waiting while other threads may add some; `None` once all is done.
    fn next(&self) -> Option<Work<'a>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.quit {
                return None;
            }
            if let Some(work) = state.work.pop() {
                state.busy += 1;
                return Some(work);
            }
            if state.busy == 0 {
                self.wake.notify_all();
                return None;
            }
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Ends one item, adding the work it found.
    fn done(&self, found: &mut Vec<Work<'a>>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.busy -= 1;
        let (added, idle) = (found.len(), state.busy == 0);
        state.work.append(found);
        drop(state);
        if added > 1 || idle {
            self.wake.notify_all();
        } else if added == 1 {
            self.wake.notify_one();
        }
    }

    /// Stops every thread.
    fn quit(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .quit = true;
        self.wake.notify_all();
    }
}

/// Stops the walk when dropped by a panicking thread.
struct QuitOnPanic<'q, 'a>(&'q Queue<'a>);

impl Drop for QuitOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.quit();
        }
    }
}

/// One directory's ignore files, chained to those of the directories above it (a directory
/// without any shares its parent's level).
struct Level {
    /// `.ignore`.
    ignore: Gitignore,
    /// `.gitignore`.
    git: Gitignore,
    /// `.git/info/exclude`.
    exclude: Gitignore,
    parent: Option<Arc<Level>>,
}

/// Which ignore files a directory's listing holds.
#[derive(Clone, Copy, Default)]
struct Holds {
    ignore: bool,
    gitignore: bool,
    git: bool,
}

impl Holds {
    /// What a directory that was not listed may hold: everything is looked for.
    const ALL: Holds = Holds {
        ignore: true,
        gitignore: true,
        git: true,
    };

    /// Whether it holds any.
    fn any(self) -> bool {
        self.ignore || self.gitignore || self.git
    }

    /// Notes an entry of the listing, by its NUL-terminated name.
    fn note(&mut self, name: &[u8]) {
        match name {
            b".ignore\0" => self.ignore = true,
            b".gitignore\0" => self.gitignore = true,
            b".git\0" => self.git = true,
            _ => {}
        }
    }
}

/// The rules of `dir`, which holds `holds`, below `parent`; the errors met reading them (`.ignore`,
/// `.gitignore`, then `.git/info/exclude`, as the `ignore` crate orders them).
fn read_level(
    dir: &Path,
    holds: Holds,
    parent: Option<Arc<Level>>,
) -> (Option<Arc<Level>>, Vec<ignore::Error>) {
    let mut errors = Vec::new();
    if !holds.any() {
        return (parent, errors);
    }
    let ignore = if holds.ignore {
        rules_file(dir, &dir.join(".ignore"), &mut errors)
    } else {
        Gitignore::empty()
    };
    let git = if holds.gitignore {
        rules_file(dir, &dir.join(".gitignore"), &mut errors)
    } else {
        Gitignore::empty()
    };
    let exclude = if holds.git {
        let kind = dir.join(".git").metadata().ok().map(|m| m.file_type());
        match git_common_dir(dir, kind) {
            Ok(git_dir) => rules_file(dir, &git_dir.join("info/exclude"), &mut errors),
            Err(err) => {
                errors.extend(err);
                Gitignore::empty()
            }
        }
    } else {
        Gitignore::empty()
    };
    if ignore.is_empty() && git.is_empty() && exclude.is_empty() {
        return (parent, errors);
    }
    let level = Level {
        ignore,
        git,
        exclude,
        parent,
    };
    (Some(Arc::new(level)), errors)
}

/// The rules of one ignore file, relative to `dir`, when it exists (errors other than I/O ones
/// kept, as the `ignore` crate keeps them).
fn rules_file(dir: &Path, file: &Path, errors: &mut Vec<ignore::Error>) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    if file.exists()
        && let Some(err) = builder.add(file)
        && !err.is_io()
    {
        errors.push(err);
    }
    builder.build().unwrap_or_else(|err| {
        errors.push(err);
        Gitignore::empty()
    })
}

/// The git directory whose `info/exclude` applies to `dir`, which holds a `.git` of type `kind`
/// (the `ignore` crate's `resolve_git_commondir`: a `.git` file names a worktree's directory,
/// whose `commondir` names the repository's).
fn git_common_dir(
    dir: &Path,
    kind: Option<std::fs::FileType>,
) -> Result<PathBuf, Option<ignore::Error>> {
    let dot_git = dir.join(".git");
    if !kind.is_some_and(|kind| kind.is_file()) {
        return Ok(dot_git);
    }
    let with_path = |err: std::io::Error, path: PathBuf| ignore::Error::WithPath {
        path,
        err: Box::new(ignore::Error::Io(err)),
    };
    let first_line = |file: std::fs::File| -> std::io::Result<Option<String>> {
        use std::io::BufRead;
        std::io::BufReader::new(file).lines().next().transpose()
    };
    let file =
        std::fs::File::open(&dot_git).map_err(|err| Some(with_path(err, dot_git.clone())))?;
    let line = match first_line(file) {
        Ok(Some(line)) => line,
        Ok(None) => return Err(None),
        Err(err) => return Err(Some(with_path(err, dot_git))),
    };
    let Some(real) = line.strip_prefix("gitdir: ") else {
        return Err(None);
    };
    let real = PathBuf::from(real);
    let commondir = real.join("commondir");
    let Ok(file) = std::fs::File::open(&commondir) else {
        return Err(None);
    };
    match first_line(file) {
        Ok(Some(common)) if common.starts_with('.') => Ok(real.join(common)),
        Ok(Some(common)) => Ok(PathBuf::from(common)),
        Ok(None) => Err(None),
        Err(err) => Err(Some(with_path(err, commondir))),
    }
}

/// Whether the rules of `level` and above, or git's global excludes, ignore `path`: for each
/// kind of ignore file the deepest match decides, and `.ignore` outranks `.gitignore`, which
/// outranks `.git/info/exclude`, which outranks the global excludes.
fn ignored(level: Option<&Arc<Level>>, global: &Gitignore, path: &Path, is_dir: bool) -> bool {
    if level.is_none() && global.is_empty() {
        return false;
    }
    let (mut ignore, mut git, mut exclude) = (Match::None, Match::None, Match::None);
    let mut next = level;
    while let Some(level) = next {
        if ignore.is_none() {
            ignore = level.ignore.matched(path, is_dir);
        }
        if git.is_none() {
            git = level.git.matched(path, is_dir);
        }
        if exclude.is_none() {
            exclude = level.exclude.matched(path, is_dir);
        }
        next = level.parent.as_ref();
    }
    let found = ignore.or(git).or(exclude);
    if found.is_none() {
        global.matched(path, is_dir).is_ignore()
    } else {
        found.is_ignore()
    }
}

/// Errors as the `ignore` crate gathers them: none, the one, or all of them as a partial error.
fn one_error(mut errors: Vec<ignore::Error>) -> Option<ignore::Error> {
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(ignore::Error::Partial(errors)),
    }
}

/// The path a walk error is about, if it names one.
fn error_path(err: &ignore::Error) -> Option<PathBuf> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        ignore::Error::Loop { child, .. } => Some(child.clone()),
        ignore::Error::Partial(errs) => errs.iter().find_map(error_path),
        _ => None,
    }
}

/// The I/O error under a walk error, if it is one.
fn error_io(err: &ignore::Error) -> Option<&std::io::Error> {
    match err {
        ignore::Error::Io(io) => Some(io),
        ignore::Error::WithPath { err, .. }
        | ignore::Error::WithDepth { err, .. }
        | ignore::Error::WithLineNumber { err, .. } => error_io(err),
        ignore::Error::Partial(errs) => errs.iter().find_map(error_io),
        _ => None,
    }
}

/// What a walk reports for an error of the `ignore` crate: an unreadable directory (or ignore
/// file) named by the error.
fn error_skip(err: &ignore::Error) -> Event<'static> {
    let reason = match error_io(err) {
        Some(io) => format!("cannot be read: {io}"),
        None => err.to_string(),
    };
    Event::Skip {
        path: error_path(err).unwrap_or_default(),
        kind: SkipKind::UnreadableDir,
        reason,
    }
}

/// The skip kind of a file type that is neither a regular file nor a directory.
fn kind_of(file_type: FileType) -> SkipKind {
    match file_type {
        FileType::Symlink => SkipKind::Symlink,
        FileType::Fifo => SkipKind::Fifo,
        FileType::Socket => SkipKind::Socket,
        FileType::BlockDevice | FileType::CharacterDevice => SkipKind::Device,
        _ => SkipKind::Special,
    }
}

/// A skip of `path` for `kind`, with the kind's own words.
fn skip(path: PathBuf, kind: SkipKind) -> Event<'static> {
    Event::Skip {
        path,
        kind,
        reason: kind.describe().into(),
    }
}

/// A skip of `path` for an I/O error.
fn unreadable(path: PathBuf, kind: SkipKind, err: impl Into<std::io::Error>) -> Event<'static> {
    Event::Skip {
        path,
        kind,
        reason: format!("cannot be read: {}", err.into()),
    }
}

/// One entry of a listing: where its NUL-terminated name starts and ends in
/// [`Worker::names`], and its type (`Unknown` when the filesystem does not say).
struct Entry {
    start: usize,
    end: usize,
    file_type: FileType,
}

/// One walker thread.
struct Worker<'s, 'o, V> {
    shared: &'s Shared<'o>,
    visit: V,
    /// The listing buffer.
    listing: Vec<u8>,
    /// The names of the directory being read, each NUL-terminated.
    names: Vec<u8>,
    entries: Vec<Entry>,
    /// The path being built.
    path: Vec<u8>,
    /// The directories read, for [`TreeOptions::listings`]: each with its new listing, or
    /// `None` when the kept one held.
    seen: Vec<(Vec<u8>, Option<Listing>)>,
}

impl<'o, V: Visit> Worker<'_, 'o, V> {
    /// Takes work until there is none left or the walk stops.
    fn run(&mut self) {
        // A thread that panics never ends its item: the others would wait for it forever.
        let _quit = QuitOnPanic(&self.shared.queue);
        let mut found = Vec::new();
        while let Some(work) = self.shared.queue.next() {
            let go_on = match work {
                Work::Root(root) => self.root(root, &mut found),
                Work::Dir(dir) => self.dir(dir, &mut found),
            };
            if !go_on {
                self.shared.queue.quit();
                return;
            }
            self.shared.queue.done(&mut found);
        }
    }

    /// Sends one event; false when the visitor stops the walk.
    fn send(&mut self, event: Event<'_>) -> bool {
        self.visit.event(event)
    }

    /// Starts at a root: a directory is read with the rules of the directories above it, a file
    /// reported as it is.
    fn root(&mut self, root: PathBuf, found: &mut Vec<Work<'o>>) -> bool {
        let meta = match std::fs::symlink_metadata(&root) {
            Ok(meta) => meta,
            Err(err) => return self.send(unreadable(root, SkipKind::UnreadableDir, err)),
        };
        if meta.is_dir() {
            let (level, error) = Self::parents(&root);
            if let Some(err) = error
                && !self.send(error_skip(&err))
            {
                return false;
            }
            let dir = DirWork {
                path: root,
                at: None,
                level,
            };
            return self.dir(dir, found);
        }
        if !meta.is_file() {
            return self.send(skip(root, SkipKind::of_type(meta.file_type())));
        }
        match root.to_str() {
            Some(path) => self.send(Event::File {
                path,
                name_at: path.rfind('/').map_or(0, |at| at + 1),
                stat: FileStat::of(&meta),
            }),
            None => self.send(skip(root, SkipKind::NotUtf8)),
        }
    }

    /// The rules of the directories above `root` (from `/` down), and the errors met reading
    /// them, as one (each root reads them anew and reports their errors, as the `ignore` crate's
    /// walk does when the roots are not walked at the same time).
    fn parents(root: &Path) -> (Option<Arc<Level>>, Option<ignore::Error>) {
        let mut errors = Vec::new();
        let mut above: Option<Arc<Level>> = None;
        let mut ancestors: Vec<&Path> = root.ancestors().skip(1).collect();
        ancestors.reverse();
        for dir in ancestors {
            let (level, errs) = read_level(dir, Holds::ALL, above);
            errors.extend(one_error(errs));
            above = level;
        }
        (above, one_error(errors))
    }

    /// Lists one directory: reports its files and queues its subdirectories.
    fn dir(&mut self, dir: DirWork<'o>, found: &mut Vec<Work<'o>>) -> bool {
        if dir.path.file_name() == Some(OsStr::new(".strata")) && crate::store::exists(&dir.path) {
            // Another store inside the tree: its files are that store's, not content.
            let event = Event::Skip {
                path: dir.path,
                kind: SkipKind::Store,
                reason: "another strata store's directory".into(),
            };
            return self.visit.event(event);
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let opened = match &dir.at {
            Some((name, parent)) => rustix::fs::openat(
                &parent.fd,
                name.as_c_str(),
                flags | OFlags::NOFOLLOW,
                Mode::empty(),
            ),
            None => rustix::fs::open(dir.path.as_path(), flags, Mode::empty()),
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(err) => {
                return self
                    .visit
                    .event(unreadable(dir.path, SkipKind::UnreadableDir, err));
            }
        };
        self.shared.open_dirs.fetch_add(1, Ordering::Relaxed);
        let fd = Arc::new(DirFd {
            fd,
            open: self.shared.open_dirs,
        });
        let (holds, listing_error) = self.read_dir(&dir.path, &fd.fd);
        // The directory's own ignore files (their errors are not reported, as the `ignore`
        // crate does not report them below a root).
        let (level, _) = read_level(&dir.path, holds, dir.level);
        let dir_bytes = dir.path.as_os_str().as_bytes();
        for n in 0..self.entries.len() {
            let Entry {
                start,
                end,
                file_type,
            } = self.entries[n];
            let name = &self.names[start..end - 1];
            self.path.clear();
            self.path.extend_from_slice(dir_bytes);
            if !dir_bytes.ends_with(b"/") {
                self.path.push(b'/');
            }
            self.path.extend_from_slice(name);
            let Ok(cname) = CStr::from_bytes_with_nul(&self.names[start..end]) else {
                continue;
            };
            // A filesystem that does not give types: ask.
            let mut stated = None;
            let file_type = if file_type == FileType::Unknown {
                match rustix::fs::statat(&fd.fd, cname, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => {
                        let file_type = FileType::from_raw_mode(st.st_mode);
                        stated = Some(st);
                        file_type
                    }
                    Err(err) => {
                        let path = PathBuf::from(OsStr::from_bytes(&self.path));
                        if !self
                            .visit
                            .event(unreadable(path, SkipKind::UnreadableDir, err))
                        {
                            return false;
                        }
                        continue;
                    }
                }
            } else {
                file_type
            };
            let is_dir = file_type == FileType::Directory;
            let path = Path::new(OsStr::from_bytes(&self.path));
            if self.left_out(level.as_ref(), path, name, is_dir) {
                continue;
            }
            if is_dir {
                let at = (self.shared.open_dirs.load(Ordering::Relaxed) < MAX_OPEN_DIRS)
                    .then(|| (cname.to_owned(), Arc::clone(&fd)));
                found.push(Work::Dir(DirWork {
                    path: path.to_path_buf(),
                    at,
                    level: level.clone(),
                }));
                continue;
            }
            let event = if file_type != FileType::RegularFile {
                skip(path.to_path_buf(), kind_of(file_type))
            } else if let Ok(path) = std::str::from_utf8(&self.path) {
                let stat = match stated {
                    Some(st) => Ok(st),
                    None => rustix::fs::statat(&fd.fd, cname, AtFlags::SYMLINK_NOFOLLOW),
                };
                match stat {
                    Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                        FileType::RegularFile => Event::File {
                            path,
                            name_at: path.len() - name.len(),
                            stat: file_stat(&st),
                        },
                        // Replaced since it was listed.
                        other => skip(PathBuf::from(path), kind_of(other)),
                    },
                    Err(err) => unreadable(PathBuf::from(path), SkipKind::Unreadable, err),
                }
            } else {
                skip(path.to_path_buf(), SkipKind::NotUtf8)
            };
            if !self.visit.event(event) {
                return false;
            }
        }
        match listing_error {
            Some(err) => self
                .visit
                .event(unreadable(dir.path, SkipKind::UnreadableDir, err)),
            None => true,
        }
    }

    /// The entries of directory `path`, open as `fd`, into [`Self::names`] and
    /// [`Self::entries`]: from the listing an earlier scan kept when the directory's stamp is
    /// the same, else from the directory itself (see [`Self::list`]).
    fn read_dir(&mut self, path: &Path, fd: &OwnedFd) -> (Holds, Option<rustix::io::Errno>) {
        let Some(listings) = self.shared.options.listings else {
            return self.list(fd);
        };
        // Stated before it is listed: a change made while it is listed gives the next scan
        // another stamp.
        let Ok(st) = super::listings::stat_dir(fd) else {
            return self.list(fd);
        };
        let path = path.as_os_str().as_bytes();
        match listings.lookup(path, fd, &st) {
            Lookup::Kept(kept) => {
                self.names.clear();
                self.entries.clear();
                self.names.extend_from_slice(kept.names);
                let mut holds = Holds::default();
                let mut start = 0;
                for (name, file_type) in kept.entries() {
                    holds.note(name);
                    let end = start + name.len();
                    self.entries.push(Entry {
                        start,
                        end,
                        file_type,
                    });
                    start = end;
                }
                self.seen.push((path.to_vec(), None));
                (holds, None)
            }
            Lookup::List(stamp) => {
                let (holds, error) = self.list(fd);
                if let (Some(stamp), None) = (stamp, error) {
                    let listing = Listing::new(
                        stamp,
                        self.names.clone(),
                        self.entries.iter().map(|e| e.file_type),
                    );
                    self.seen.push((path.to_vec(), Some(listing)));
                }
                (holds, error)
            }
        }
    }

    /// Lists the directory open as `fd` into [`Self::names`] and [`Self::entries`]: which ignore
    /// files it holds, and the error that ended the listing early, if one did.
    fn list(&mut self, fd: &OwnedFd) -> (Holds, Option<rustix::io::Errno>) {
        self.names.clear();
        self.entries.clear();
        let mut holds = Holds::default();
        let mut listing = RawDir::new(fd.as_fd(), self.listing.spare_capacity_mut());
        while let Some(entry) = listing.next() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => return (holds, Some(err)),
            };
            let name = entry.file_name().to_bytes_with_nul();
            if matches!(name, b".\0" | b"..\0") {
                continue;
            }
            holds.note(name);
            let start = self.names.len();
            self.names.extend_from_slice(name);
            self.entries.push(Entry {
                start,
                end: self.names.len(),
                file_type: entry.file_type(),
            });
        }
        (holds, None)
    }

    /// Whether an entry is left out of the walk: `.git` and the skipped directories, agent
    /// writes' temporary files, what the ignore files or the extra globs ignore.
    fn left_out(&self, level: Option<&Arc<Level>>, path: &Path, name: &[u8], is_dir: bool) -> bool {
        let options = self.shared.options;
        if is_dir && (name == b".git" || options.skip_dirs.iter().any(|d| d == path)) {
            return true;
        }
        if !is_dir && std::str::from_utf8(name).is_ok_and(is_write_temp) {
            return true;
        }
        if ignored(
            level,
            self.shared.global.get_or_init(global_excludes),
            path,
            is_dir,
        ) {
            return true;
        }
        options
            .ignore
            .is_some_and(|rules| rules.matched_path_or_any_parents(path, is_dir).is_ignore())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::walk::walk_builder;
    use std::io::Result;

    /// What a walk reports about one path: `file` or the skip kind, the path, the reason.
    type Outcome = (String, PathBuf, String);

    /// Collects what the new walk reports.
    struct Collect<'a>(&'a Mutex<Vec<Outcome>>);

    impl Visit for Collect<'_> {
        fn event(&mut self, event: Event<'_>) -> bool {
            let outcome = match event {
                Event::File { path, .. } => ("file".into(), PathBuf::from(path), String::new()),
                Event::Skip { path, kind, reason } => (format!("{kind:?}"), path, reason),
            };
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(outcome);
            true
        }
    }

    fn new_walk(
        roots: &[PathBuf],
        skip_dirs: &[PathBuf],
        ignore: Option<&Gitignore>,
        threads: usize,
    ) -> Vec<Outcome> {
        listed_walk(roots, skip_dirs, ignore, threads, None)
    }

    /// [`new_walk`] with directory listings kept between walks.
    fn listed_walk(
        roots: &[PathBuf],
        skip_dirs: &[PathBuf],
        ignore: Option<&Gitignore>,
        threads: usize,
        listings: Option<&Listings>,
    ) -> Vec<Outcome> {
        let found = Mutex::new(Vec::new());
        let options = TreeOptions {
            skip_dirs,
            ignore,
            threads,
            listings,
        };
        walk(roots, &options, &|| Collect(&found));
        let mut found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        found.sort();
        found
    }

    /// What the walk of scans reported before this one: `walk_builder`'s parallel walk, each
    /// entry classified as its visitor did.
    fn old_walk(
        roots: &[PathBuf],
        skip_dirs: &[PathBuf],
        ignore: Option<Arc<Gitignore>>,
    ) -> Vec<Outcome> {
        let found = Mutex::new(Vec::new());
        let Some((first, rest)) = roots.split_first() else {
            return Vec::new();
        };
        let mut builder = walk_builder(first, skip_dirs.to_vec(), ignore);
        for root in rest {
            builder.add(root);
        }
        builder.threads(2);
        builder.build_parallel().run(|| {
            let found = &found;
            Box::new(move |entry| {
                let (outcome, state) = old_outcome(entry);
                if let Some(outcome) = outcome {
                    found
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(outcome);
                }
                state
            })
        });
        let mut found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        found.sort();
        found
    }

    /// The old visitor's classification of one entry.
    fn old_outcome(
        entry: std::result::Result<ignore::DirEntry, ignore::Error>,
    ) -> (Option<Outcome>, ignore::WalkState) {
        use ignore::WalkState;
        let skip = |kind: SkipKind, path: &Path, reason: String| {
            Some((format!("{kind:?}"), path.to_path_buf(), reason))
        };
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                let Event::Skip { path, kind, reason } = error_skip(&err) else {
                    return (None, WalkState::Continue);
                };
                return (skip(kind, &path, reason), WalkState::Continue);
            }
        };
        let path = entry.path();
        match entry.file_type() {
            Some(t) if t.is_dir() => {
                if path.file_name() == Some(OsStr::new(".strata")) && crate::store::exists(path) {
                    let reason = "another strata store's directory".into();
                    return (skip(SkipKind::Store, path, reason), WalkState::Skip);
                }
                (None, WalkState::Continue)
            }
            Some(t) if t.is_file() => {
                let outcome = if path.to_str().is_none() {
                    skip(SkipKind::NotUtf8, path, SkipKind::NotUtf8.describe().into())
                } else {
                    match std::fs::symlink_metadata(path) {
                        Ok(meta) if meta.is_file() => {
                            Some(("file".into(), path.to_path_buf(), String::new()))
                        }
                        Ok(meta) => {
                            let kind = SkipKind::of_type(meta.file_type());
                            skip(kind, path, kind.describe().into())
                        }
                        Err(err) => {
                            skip(SkipKind::Unreadable, path, format!("cannot be read: {err}"))
                        }
                    }
                };
                (outcome, WalkState::Continue)
            }
            other => {
                let kind = other.map_or(SkipKind::Special, SkipKind::of_type);
                (
                    skip(kind, path, kind.describe().into()),
                    WalkState::Continue,
                )
            }
        }
    }

    /// Writes `text` to `path`, making its directory.
    fn put(path: &Path, text: &str) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)
    }

    /// Asserts that the new walk, at several thread counts, reports what the old one did.
    fn assert_same(roots: &[PathBuf], skip_dirs: &[PathBuf], ignore: Option<Arc<Gitignore>>) {
        let old = old_walk(roots, skip_dirs, ignore.clone());
        for threads in [1, 2, 3] {
            let new = new_walk(roots, skip_dirs, ignore.as_deref(), threads);
            assert_eq!(new, old, "{threads} threads");
        }
    }

    /// Where no config file uses an include (this process's own environment, in CI), the
    /// global excludes are the `ignore` crate's.
    #[test]
    fn the_global_excludes_are_the_crates_without_includes() -> Result<()> {
        let env = gitconfig::ConfigEnv::current();
        let includes = [
            env.home.as_ref().map(|home| home.join(".gitconfig")),
            env.global.clone(),
        ]
        .into_iter()
        .flatten()
        .any(|path| std::fs::read(path).is_ok_and(|text| text.windows(7).any(|w| w == b"include")));
        if includes {
            return Ok(());
        }
        let cwd = std::env::current_dir()?;
        let crate_global = GitignoreBuilder::new(cwd).build_global().0;
        let ours = global_excludes();
        assert_eq!(
            (ours.num_ignores(), ours.num_whitelists()),
            (crate_global.num_ignores(), crate_global.num_whitelists())
        );
        Ok(())
    }

    #[test]
    fn listings_kept_between_walks_report_what_listing_each_directory_reports() -> Result<()> {
        let tmp = tempfile::tempdir()?;
        let outer = std::fs::canonicalize(tmp.path())?;
        let (tree, store) = (outer.join("tree"), outer.join("store"));
        std::fs::create_dir_all(&store)?;
        put(&tree.join(".gitignore"), "*.log\n")?;
        put(&tree.join("a.txt"), "a")?;
        put(&tree.join("b.log"), "b")?;
        put(&tree.join("sub/c.txt"), "c")?;
        put(&tree.join("sub/deeper/d.txt"), "d")?;
        put(&tree.join("gone/e.txt"), "e")?;
        std::os::unix::fs::symlink("a.txt", tree.join("link"))?;
        // Walks as by scans that start a minute from now: every directory is settled.
        let later = || {
            crate::store::Timestamp::saturating_from_micros(
                crate::store::Timestamp::now().as_micros() + 60_000_000,
            )
        };
        let roots = [tree.clone()];
        let walk_kept = |threads| {
            let listings = Listings::load(&store, later());
            let found = listed_walk(&roots, &[], None, threads, Some(&listings));
            listings.save(&store, &roots);
            found
        };
        let changes: [&dyn Fn() -> Result<()>; 5] = [
            &|| Ok(()),
            // Entries added, removed and renamed; a directory made and one removed.
            &|| {
                put(&tree.join("new.txt"), "n")?;
                std::fs::remove_file(tree.join("a.txt"))?;
                std::fs::rename(tree.join("sub/c.txt"), tree.join("sub/c2.txt"))?;
                put(&tree.join("sub/fresh/f.txt"), "f")?;
                std::fs::remove_dir_all(tree.join("gone"))
            },
            // An ignore file changed in place: the directory's listing holds, its rules do not.
            &|| put(&tree.join(".gitignore"), "*.txt\n"),
            // A file replaced by a directory of the same name, deep down.
            &|| {
                std::fs::remove_file(tree.join("sub/deeper/d.txt"))?;
                put(&tree.join("sub/deeper/d.txt/inner"), "i")
            },
            &|| Ok(()),
        ];
        for change in changes {
            // Past the coarse clock's tick: with the racy rule moved out of the way by the later
            // start, a change in the tick of the last one would leave its directory's stamp.
            std::thread::sleep(std::time::Duration::from_millis(50));
            change()?;
            let plain = new_walk(&roots, &[], None, 1);
            for threads in [1, 2, 3] {
                assert_eq!(walk_kept(threads), plain, "{threads} threads");
            }
        }
        Ok(())
    }

    #[test]
    fn reports_what_the_walk_of_the_ignore_crate_reported() -> Result<()> {
        let tmp = tempfile::tempdir()?;
        let outer = std::fs::canonicalize(tmp.path())?;
        let tree = outer.join("tree");
        // Rules above the root: a parent's .gitignore (with a glob that does not parse, which is
        // reported) and a parent repository's exclude file.
        put(&outer.join(".gitignore"), "*.outer\n!kept.outer\nbad{a,b\n")?;
        put(&outer.join(".git/info/exclude"), "by-parent-exclude\n")?;
        // The root's own rules: .gitignore, .ignore (which outranks it), a repository's exclude.
        put(
            &tree.join(".gitignore"),
            "*.log\n!important.log\nbuild/\n/top-only\n**/deep/*.tmp\nunparsed{a\n",
        )?;
        put(&tree.join(".ignore"), "by-dotignore\n!reincluded.log\n")?;
        put(&tree.join(".git/info/exclude"), "excluded\n")?;
        put(&tree.join(".git/config"), "")?;
        // A worktree's .git file naming a git directory whose commondir holds the exclude file.
        let gitdirs = outer.join("gitdirs");
        put(&gitdirs.join("wt/commondir"), "../common\n")?;
        put(&gitdirs.join("common/info/exclude"), "wt-excluded\n")?;
        put(
            &tree.join("wt/.git"),
            &format!("gitdir: {}\n", gitdirs.join("wt").display()),
        )?;
        put(&tree.join("wt/wt-excluded"), "x")?;
        put(&tree.join("wt/kept"), "x")?;
        // A .git file that names nothing.
        put(&tree.join("wt2/.git"), "not a gitdir line\n")?;
        put(&tree.join("wt2/kept"), "x")?;
        for name in [
            "a.log",
            "important.log",
            "reincluded.log",
            "top-only",
            "by-dotignore",
            "excluded",
            "by-parent-exclude",
            "x.outer",
            "kept.outer",
            "plain.txt",
            ".hidden",
            ".config/settings",
            "build/ignored",
            "sub/top-only",
            "sub/a.log",
            "sub/b.log",
            "sub/excluded",
            "sub/build/ignored",
            "sub/deep/x.tmp",
            "sub/deep/y.txt",
            "sub/sub/deep/z.tmp",
            "sub2/.gitignore/inside",
            "x.bak",
            "extra-dir/file",
            "skipped/file",
            "other/.strata/store.redb",
            "other/kept",
            ".a.log.strata-new-12-3",
            ".b.strata-old-1-2",
            ".c.strata-new-x-2",
            "empty-file",
        ] {
            put(&tree.join(name), name)?;
        }
        put(&tree.join("sub/.gitignore"), "!a.log\n*.txt\n")?;
        std::fs::create_dir_all(tree.join("empty/deeper"))?;
        std::os::unix::fs::symlink("a.log", tree.join("link-file"))?;
        std::os::unix::fs::symlink("sub", tree.join("link-dir"))?;
        std::os::unix::fs::symlink("missing", tree.join("dangling"))?;
        std::os::unix::fs::symlink("sub", tree.join(".git-link"))?;
        rustix::fs::mknodat(
            rustix::fs::CWD,
            tree.join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )?;
        // Names that are not UTF-8: a file, and a directory with a file inside.
        let bad = |name: &[u8]| tree.join(OsStr::from_bytes(name));
        put(&bad(b"bad\xff.txt"), "x")?;
        put(&bad(b"bad\xfe-dir").join("inner"), "x")?;
        std::os::unix::fs::symlink("a.log", bad(b"bad\xfd-link"))?;
        // A directory that cannot be listed (unless the tests run as root).
        put(&tree.join("locked/file"), "x")?;
        std::fs::set_permissions(
            tree.join("locked"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )?;

        let mut extra = GitignoreBuilder::new("/");
        extra
            .add_line(None, "*.bak")
            .and_then(|b| b.add_line(None, "**/extra-dir"))
            .map_err(std::io::Error::other)?;
        let extra = Arc::new(extra.build().map_err(std::io::Error::other)?);
        let skip_dirs = [tree.join("skipped")];

        let new = new_walk(
            std::slice::from_ref(&tree),
            &skip_dirs,
            Some(extra.as_ref()),
            2,
        );
        let files: Vec<&Path> = new
            .iter()
            .filter(|(what, ..)| what == "file")
            .map(|(_, path, _)| path.as_path())
            .collect();
        for kept in [
            "important.log",
            "reincluded.log",
            "sub/a.log",
            "sub/top-only",
            "wt/kept",
        ] {
            assert!(
                files.contains(&tree.join(kept).as_path()),
                "{kept}: {new:#?}"
            );
        }
        for left in [
            "a.log",
            "by-dotignore",
            "excluded",
            "wt/wt-excluded",
            "x.outer",
            "sub/b.log",
        ] {
            assert!(
                !files.contains(&tree.join(left).as_path()),
                "{left}: {new:#?}"
            );
        }
        assert!(
            new.iter().any(|(what, path, _)| what == "UnreadableDir"
                && path == &outer.join(".gitignore")),
            "the parent's bad glob is reported: {new:#?}"
        );

        assert_same(std::slice::from_ref(&tree), &skip_dirs, Some(extra));
        assert_same(std::slice::from_ref(&tree), &[], None);
        // Several roots: nested ones, a file, an ignored file named as a root, a symlink, a
        // FIFO, a missing path, another store's directory. (Without bad globs above them: the
        // `ignore` crate reports a parent's errors again for each root unless another root's
        // walk still holds that parent's rules, which depends on timing.)
        put(&outer.join(".gitignore"), "*.outer\n!kept.outer\n")?;
        put(
            &tree.join(".gitignore"),
            "*.log\n!important.log\nbuild/\n/top-only\n**/deep/*.tmp\n",
        )?;
        let roots = [
            tree.clone(),
            tree.join("sub"),
            tree.join("plain.txt"),
            tree.join("a.log"),
            tree.join("link-file"),
            tree.join("pipe"),
            tree.join("missing"),
            tree.join("other/.strata"),
            bad(b"bad\xff.txt"),
        ];
        assert_same(&roots, &skip_dirs, None);
        std::fs::set_permissions(
            tree.join("locked"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        Ok(())
    }

    /// Names of the generated trees' entries, and lines of their ignore files.
    const NAMES: &[&str] = &["a", "b", "c.log", "d.txt", ".e", "build", "keep.log"];
    const LINES: &[&str] = &[
        "*.log",
        "!keep.log",
        "build/",
        "/a",
        "b",
        "**/c.log",
        "d.txt",
        "!d.txt",
        "*/",
        "!b/",
        "a/**",
        "!a",
        ".e",
        "b/*.txt",
        "#a",
        "",
        "!*.log",
        "/b/",
        "**/build/**",
    ];

    /// A generated tree: directories (by index path) and files, some of them ignore files.
    fn tree_strategy()
    -> impl proptest::strategy::Strategy<Value = Vec<(Vec<usize>, Option<Vec<usize>>)>> {
        use proptest::prelude::*;
        // Each entry: a path of name indices; `Some(lines)`: a .gitignore (or .ignore, when the
        // last name index is odd) at that directory with those lines; `None`: a file.
        prop::collection::vec(
            (
                prop::collection::vec(0..NAMES.len(), 1..4),
                prop::option::weighted(0.3, prop::collection::vec(0..LINES.len(), 0..5)),
            ),
            1..24,
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// On generated trees with ignore files anywhere, the new walk reports what the old one
        /// did.
        #[test]
        fn generated_trees_walk_as_before(entries in tree_strategy()) {
            let tmp = tempfile::tempdir()?;
            let root = std::fs::canonicalize(tmp.path())?.join("t");
            std::fs::create_dir_all(&root)?;
            for (names, rules) in entries {
                let mut path = root.clone();
                for &n in &names {
                    path.push(NAMES[n]);
                }
                // A path whose prefix is a file already cannot be made: skip it.
                let made = match rules {
                    None => put(&path, "x"),
                    Some(lines) => {
                        let file = if names.last().is_some_and(|n| n % 2 == 1) {
                            ".ignore"
                        } else {
                            ".gitignore"
                        };
                        let text: String = lines.iter().map(|&l| format!("{}\n", LINES[l])).collect();
                        std::fs::create_dir_all(&path).and_then(|()| put(&path.join(file), &text))
                    }
                };
                let _ = made;
            }
            let old = old_walk(std::slice::from_ref(&root), &[], None);
            let new = new_walk(std::slice::from_ref(&root), &[], None, 2);
            proptest::prop_assert_eq!(&new, &old);
            // With listings kept (by walks that start a minute from now, so every directory is
            // settled): the walk that keeps them and the one that reads them report the same.
            let store = tmp.path().join("store");
            std::fs::create_dir_all(&store)?;
            let later = crate::store::Timestamp::saturating_from_micros(
                crate::store::Timestamp::now().as_micros() + 60_000_000,
            );
            for _ in 0..2 {
                let listings = Listings::load(&store, later);
                let roots = std::slice::from_ref(&root);
                let kept = listed_walk(roots, &[], None, 2, Some(&listings));
                listings.save(&store, roots);
                proptest::prop_assert_eq!(&kept, &old);
            }
        }
    }
}
