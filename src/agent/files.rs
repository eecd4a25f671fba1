//! A session's files as the tools see them: walking its mounts (the default excludes and the
//! store's ignore rules), numbering them `f1`, `f2`, … (seed 000), and what a `filepath` argument
//! names.
//!
//! Ids are given when the session first lists its files: every file under its mounts, mounts in
//! configuration order, then relative paths in docs-mcp's order (case-insensitive first, as
//! JavaScript's `localeCompare`). A file met later (a new file, or one an exclude hides, read by
//! name) gets the next number; a deleted file keeps its id. `filepath` is a file id, a path
//! relative to a mount (the first mount holding it), or an absolute path as the agent sees it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{WalkBuilder, WalkState};

use crate::agent::docs::collation_key;
use crate::error::{Error, Result};
use crate::session::Session;

/// What the tools never list or search unless a path names it (seed 001's default excludes;
/// the store directory is always skipped too).
pub const DEFAULT_EXCLUDES: [&str; 7] = [
    ".git",
    "node_modules",
    "__pycache__",
    "*.pyc",
    ".venv",
    "venv",
    "*.egg-info",
];

/// One mount of the session that can be walked on this machine.
#[derive(Clone, Debug)]
pub(crate) struct Root {
    /// The agent prefix, e.g. `/work`.
    pub agent_prefix: String,
    /// The directory on this machine.
    pub dir: PathBuf,
    /// Whether the mount compares names without case (ids then use lowercase paths).
    pub case_insensitive: bool,
}

/// A file found by a walk.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    /// Which root (mount) it is under.
    pub root: usize,
    /// Its path below the mount, with `/` separators, as on disk.
    pub rel: String,
    /// Its path on this machine.
    pub abs: PathBuf,
}

/// Walks a session's mounts.
pub(crate) struct Walker {
    roots: Vec<Root>,
    rules: Arc<Gitignore>,
    skip: Option<PathBuf>,
}

impl Walker {
    /// The walker of `session`'s mounts on this machine.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when an ignore glob of the store's settings does not parse.
    pub(crate) fn of(session: &Session) -> Result<Self> {
        let resolver = session.resolver();
        let roots = resolver
            .mounts()
            .iter()
            .filter(|m| {
                m.filesystem_id
                    .as_deref()
                    .is_none_or(|fs| fs == resolver.machine_id())
            })
            .map(|m| Root {
                agent_prefix: m.agent_prefix.clone(),
                dir: PathBuf::from(&m.canonical_prefix),
                case_insensitive: m.case_insensitive,
            })
            .collect();
        let mut builder = GitignoreBuilder::new("/");
        for glob in DEFAULT_EXCLUDES
            .iter()
            .copied()
            .chain(session.ignore_globs().iter().map(String::as_str))
        {
            builder
                .add_line(None, glob)
                .map_err(|e| Error::invalid_input(format!("ignore glob {glob:?}: {e}")))?;
        }
        let rules = builder
            .build()
            .map_err(|e| Error::invalid_input(format!("ignore globs: {e}")))?;
        Ok(Walker {
            roots,
            rules: Arc::new(rules),
            skip: session.store_dir().map(Path::to_path_buf),
        })
    }

    /// Visits every file under the roots on all cores (the trees' `.gitignore` files, the default
    /// excludes and the store's ignore globs hide files; symlinks are not followed). `make` makes
    /// one visitor per thread, which gets each file found and its directory entry.
    pub(crate) fn run<F>(&self, make: impl Fn() -> F + Sync)
    where
        F: FnMut(Found, &ignore::DirEntry) + Send,
    {
        for (index, root) in self.roots.iter().enumerate() {
            let rules = Arc::clone(&self.rules);
            let skip = self.skip.clone();
            let walk = WalkBuilder::new(&root.dir)
                .hidden(false)
                .git_ignore(true)
                .git_exclude(true)
                .git_global(false)
                .require_git(false)
                .parents(true)
                .follow_links(false)
                .filter_entry(move |entry| {
                    let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                    if is_dir && skip.as_deref() == Some(entry.path()) {
                        return false;
                    }
                    if !is_dir
                        && entry
                            .file_name()
                            .to_str()
                            .and_then(crate::index::write_temp_pid)
                            .is_some()
                    {
                        return false;
                    }
                    !rules
                        .matched_path_or_any_parents(entry.path(), is_dir)
                        .is_ignore()
                })
                .build_parallel();
            walk.run(|| {
                let mut visit = make();
                let dir = root.dir.clone();
                Box::new(move |entry| {
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        return WalkState::Continue;
                    }
                    let Some(rel) = relative(&dir, entry.path()) else {
                        return WalkState::Continue;
                    };
                    let found = Found {
                        root: index,
                        rel,
                        abs: entry.path().to_path_buf(),
                    };
                    visit(found, &entry);
                    WalkState::Continue
                })
            });
        }
    }

    /// The agent paths of the files named `names` that lie directly in a root (regular files,
    /// not symlinks, not hidden by the ignore rules), root by root, in the order of `names`.
    pub(crate) fn top_level(&self, names: &[&str]) -> Vec<String> {
        let mut paths = Vec::new();
        for root in &self.roots {
            for name in names {
                let abs = root.dir.join(name);
                let is_file = std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_file());
                if is_file
                    && !self
                        .rules
                        .matched_path_or_any_parents(&abs, false)
                        .is_ignore()
                {
                    paths.push(join(&root.agent_prefix, name));
                }
            }
        }
        paths
    }

    /// Every file under the roots, in no particular order.
    pub(crate) fn all(&self) -> Vec<Found> {
        let found = Mutex::new(Vec::new());
        self.run(|| {
            let found = &found;
            move |file: Found, _: &ignore::DirEntry| {
                found
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(file);
            }
        });
        found.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    /// The id key of a found file: its agent path (lowercase below a case-insensitive mount).
    pub(crate) fn key(&self, found: &Found) -> String {
        let root = &self.roots[found.root];
        key_of(root, &found.rel)
    }

    /// The agent path of a found file, spelled as on disk.
    pub(crate) fn agent_path(&self, found: &Found) -> String {
        join(&self.roots[found.root].agent_prefix, &found.rel)
    }
}

/// `path` below `dir`, with `/` separators; the file's own name when `path` is `dir` (a mount
/// of one file); `None` when it is not UTF-8.
fn relative(dir: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(dir).ok()?;
    if rel.as_os_str().is_empty() {
        return path.file_name()?.to_str().map(str::to_string);
    }
    rel.to_str().map(str::to_string)
}

fn join(prefix: &str, rel: &str) -> String {
    if prefix == "/" {
        format!("/{rel}")
    } else {
        format!("{prefix}/{rel}")
    }
}

fn key_of(root: &Root, rel: &str) -> String {
    if root.case_insensitive {
        join(&root.agent_prefix, &rel.to_lowercase())
    } else {
        join(&root.agent_prefix, rel)
    }
}

/// Numbers the files of `found` that have no id yet, in the listing order (mount, then relative
/// path as docs-mcp orders them), and returns each file's id number, in `found`'s order.
pub(crate) fn number(session: &mut Session, walker: &Walker, found: &[Found]) -> Result<Vec<u64>> {
    let keys: Vec<String> = found.iter().map(|f| walker.key(f)).collect();
    let ids = session.file_ids_mut()?;
    let mut new: Vec<usize> = (0..found.len())
        .filter(|&i| ids.id_of(&keys[i]).is_none())
        .collect();
    new.sort_by_cached_key(|&i| {
        (
            found[i].root,
            collation_key(&found[i].rel),
            found[i].rel.clone(),
        )
    });
    for i in new {
        ids.number(&keys[i]);
    }
    Ok(keys.iter().map(|k| ids.id_of(k).unwrap_or(0)).collect())
}

/// Lists the session's files once, numbering them all, unless it did already: the ids of a
/// session follow its first listing whatever tool needs one first.
pub(crate) fn ensure_listed(session: &mut Session) -> Result<()> {
    if session.file_ids().is_listed() {
        return Ok(());
    }
    let walker = Walker::of(session)?;
    let found = walker.all();
    number(session, &walker, &found)?;
    session.file_ids_mut()?.mark_listed();
    Ok(())
}

/// A file named by a tool's `filepath`: its id, the agent path to read it by, its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileRef {
    /// The id number (`fN`); 0 until [`FileRef::number`] gives a path named for the first time
    /// its id (only once it was read: a path that names nothing gets none).
    pub n: u64,
    /// The agent path (its id key).
    pub agent_path: String,
    /// The path below its mount (the agent path when no mount holds it).
    pub filename: String,
}

impl FileRef {
    /// `fN`.
    pub(crate) fn file_id(&self) -> String {
        format!("f{}", self.n)
    }

    /// Gives the file its id if it has none yet.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub(crate) fn number(&mut self, session: &mut Session) -> Result<()> {
        if self.n == 0 {
            self.n = session.file_ids_mut()?.number(&self.agent_path);
        }
        Ok(())
    }
}

/// Whether `text` has the form of a file id, `f` and digits (seed 000's `^f[0-9]+$`).
pub(crate) fn looks_like_id(text: &str) -> bool {
    text.strip_prefix('f')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// What `filepath` names in `session`: a file id (`f12`), a path relative to a mount, or an
/// absolute agent path (with id 0 when it has none yet; see [`FileRef::number`]).
///
/// # Errors
/// [`Error::NotFound`] for an id never given; [`Error::InvalidInput`] for `f0` or an empty
/// path; [`Error::InvalidPath`] for a path outside the session's mounts or one that does not
/// resolve.
pub(crate) fn resolve(session: &mut Session, filepath: &str) -> Result<FileRef> {
    ensure_listed(session)?;
    let filepath = filepath.trim();
    if filepath.is_empty() {
        return Err(Error::invalid_input(
            "filepath is empty; give a file id (f1, …) from list_files or a path",
        ));
    }
    if looks_like_id(filepath) {
        let n: u64 = filepath[1..].parse().unwrap_or(0);
        if n == 0 {
            return Err(Error::invalid_input(format!(
                "the file id '{filepath}' is invalid: ids start at f1; list_files gives them"
            )));
        }
        let path = session
            .file_ids()
            .path_of(n)
            .ok_or_else(|| {
                Error::not_found(format!(
                    "file id {filepath} (this session gave ids f1 to f{}); list_files gives them",
                    session.file_ids().len()
                ))
            })?
            .to_string();
        return Ok(FileRef {
            n,
            filename: filename_of(session, &path),
            agent_path: path,
        });
    }
    let path = if filepath.starts_with('/') {
        absolute_in_mounts(session, filepath)?
    } else {
        relative_in_mounts(session, filepath)?
    };
    let key = key_of_path(session, &path)?;
    Ok(FileRef {
        n: session.file_ids().id_of(&key).unwrap_or(0),
        filename: filename_of(session, &key),
        agent_path: key,
    })
}

/// The id key of an agent path: the path normalised, lowercase below a case-insensitive mount.
fn key_of_path(session: &Session, path: &str) -> Result<String> {
    let resolver = session.resolver();
    let resolved = resolver.resolve(path)?;
    Ok(match resolved.mount {
        Some(i) if resolver.mounts()[i].case_insensitive => {
            resolver.reverse_resolve(&resolved.filesystem_id, &resolved.canonical_path)
        }
        _ => resolved.agent_path,
    })
}

/// An absolute agent path, which must lie under a mount when the session has mounts.
fn absolute_in_mounts(session: &Session, path: &str) -> Result<String> {
    let resolver = session.resolver();
    let resolved = resolver.resolve(path)?;
    if resolved.mount.is_none() && !resolver.mounts().is_empty() {
        let prefixes: Vec<&str> = resolver
            .mounts()
            .iter()
            .map(|m| m.agent_prefix.as_str())
            .collect();
        return Err(Error::invalid_path(
            path,
            format!(
                "it lies outside this session's mounts ({}); give a path under one of them, or a file id",
                prefixes.join(", ")
            ),
        ));
    }
    Ok(resolved.agent_path)
}

/// A relative path under the first mount that holds it (a known id, or a file on disk); under
/// the first mount when none does.
fn relative_in_mounts(session: &Session, rel: &str) -> Result<String> {
    let resolver = session.resolver();
    let mounts = resolver.mounts();
    if mounts.is_empty() {
        return Err(Error::invalid_path(
            rel,
            "this session has no mounts, so a relative path names nothing; give an absolute path or a file id",
        ));
    }
    let candidates: Vec<String> = mounts
        .iter()
        .map(|m| join(&m.agent_prefix, rel.trim_start_matches("./")))
        .collect();
    for candidate in &candidates {
        let Ok(resolved) = resolver.resolve(candidate) else {
            continue;
        };
        if resolved.mount.is_none() {
            continue;
        }
        let known =
            key_of_path(session, candidate).is_ok_and(|k| session.file_ids().id_of(&k).is_some());
        if known || std::fs::symlink_metadata(&resolved.open_path).is_ok() {
            return Ok(resolved.agent_path);
        }
    }
    let first = resolver.resolve(&candidates[0])?;
    if first.mount.is_none() {
        return Err(Error::invalid_path(
            rel,
            "`..` leaves the session's mounts; name a file under one of them",
        ));
    }
    Ok(first.agent_path)
}

/// The name shown for `agent_path`: its path below the mount holding it.
pub(crate) fn filename_of(session: &Session, agent_path: &str) -> String {
    let mounts = session.resolver().mounts();
    let best = mounts
        .iter()
        .filter_map(|m| {
            let rest = if m.agent_prefix == "/" {
                agent_path.strip_prefix('/')
            } else {
                agent_path
                    .strip_prefix(m.agent_prefix.as_str())
                    .and_then(|r| r.strip_prefix('/'))
            }?;
            Some((m.agent_prefix.len(), rest))
        })
        .max_by_key(|(len, _)| *len);
    match best {
        Some((_, rest)) if !rest.is_empty() => rest.to_string(),
        _ => agent_path.to_string(),
    }
}
