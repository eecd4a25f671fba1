//! `watch.add`, `watch.rm`, `watch.ls`: the roots the daemon watches, kept in the store's
//! settings so that a restarted or auto-started daemon watches them again; and what the watcher
//! (module `watch`, above the engine) calls: [`Engine::commit_watched`] commits one debounce
//! window, publishes it and refreshes the metadata cache of the live sessions holding its files.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::request::Apply;
use super::{Engine, lock};
use crate::error::{Error, Result};
use crate::index::ScanSummary;
use crate::store::{Op, Origin, StatUpdate};

/// `watch.add`: watch these directories (host paths, relative ones taken from `cwd`) from now
/// on, and whenever a daemon serves the store.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchAddRequest {
    /// The directories to watch.
    pub paths: Vec<String>,
    /// The caller's working directory, for relative paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// `watch.rm`: stop watching these roots (host paths, relative ones taken from `cwd`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRmRequest {
    /// The roots to stop watching, as given to `watch.add` (or any path naming the same
    /// directory).
    pub paths: Vec<String>,
    /// The caller's working directory, for relative paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// `watch.ls`: the watched roots.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchLsRequest {}

/// What the watch requests answer: the watched roots now, and those the request added or
/// removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WatchRoots {
    /// Every watched root (canonical directories), sorted.
    pub roots: Vec<String>,
    /// The roots this request added or removed (empty for `watch.ls`, or when nothing changed).
    pub changed: Vec<String>,
}

/// What answers `index` from a watcher's state: the daemon's watcher registers one with
/// [`Engine::set_watch_index`].
pub trait WatchIndex: Send + Sync {
    /// Answers an index of the canonical `roots` when each lies under a watched root whose
    /// start-up reconcile is committed (only what the watcher saw change is looked at); `None`
    /// when the watcher cannot answer, and a full scan runs instead.
    fn index(&self, roots: &[PathBuf]) -> Option<Result<ScanSummary>>;
}

/// The registered [`WatchIndex`], if any.
#[derive(Clone, Default)]
pub(super) struct WatchHook(pub(super) Option<Arc<dyn WatchIndex>>);

impl std::fmt::Debug for WatchHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "WatchHook(set)"
        } else {
            "WatchHook(none)"
        })
    }
}

/// Canonicalises `path` (relative ones from `cwd`) into a directory that can be watched.
fn watchable_root(engine: &Engine, path: &str, cwd: &Path) -> Result<String> {
    let joined = cwd.join(path);
    let canonical = std::fs::canonicalize(&joined).map_err(|e| {
        Error::invalid_path(
            path,
            format!("cannot watch it: {e}; name an existing directory"),
        )
    })?;
    if !canonical.is_dir() {
        return Err(Error::invalid_path(
            path,
            "it is not a directory; watch the directory that holds it",
        ));
    }
    if let Some(dir) = engine
        .dir
        .as_ref()
        .and_then(|d| std::fs::canonicalize(d).ok())
        && canonical.starts_with(&dir)
    {
        return Err(Error::invalid_path(
            path,
            format!(
                "it is inside the store directory {}, which is never watched; watch the tree \
                 around it instead",
                dir.display()
            ),
        ));
    }
    canonical
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::invalid_path(path, "the path is not UTF-8"))
}

impl Engine {
    /// A receiver of the watched roots after every change of them (`watch.add`, `watch.rm`).
    pub fn watch_roots_changes(&self) -> Receiver<Vec<String>> {
        let (sender, receiver) = channel();
        lock(&self.watch_listeners).push(sender);
        receiver
    }

    /// Registers what answers `index` on watched roots (the daemon's watcher).
    pub fn set_watch_index(&self, hook: Arc<dyn WatchIndex>) {
        *lock(&self.watch_hook) = WatchHook(Some(hook));
    }

    /// The registered [`WatchIndex`], if any.
    pub(super) fn watch_index(&self) -> Option<Arc<dyn WatchIndex>> {
        lock(&self.watch_hook).0.clone()
    }

    /// Commits what the watcher planned for one debounce window (`ops` and the stat cache
    /// changes) as one transaction of origin `watcher`, publishes it, and refreshes the metadata
    /// cache of every live session that holds one of `paths` (cache only: no set changes, no
    /// session commit). Returns the transaction, `None` when there was nothing to write.
    ///
    /// # Errors
    /// Store errors from committing (nothing is written then).
    pub fn commit_watched(
        &self,
        ops: Vec<Op>,
        stat: StatUpdate,
        paths: &[String],
    ) -> Result<Option<u64>> {
        let receipt = self.store.transact_with_stat(ops, Origin::Watcher, stat)?;
        let tx = receipt.map(|r| r.tx_id.0);
        if let Some(tx) = tx {
            self.publish(&[tx]);
            self.refresh_sessions(paths);
        }
        Ok(tx)
    }

    /// The metadata cache of every live session, refreshed for the files of `paths` it holds.
    pub(super) fn refresh_sessions(&self, paths: &[String]) {
        let live: Vec<Arc<Mutex<crate::session::Session>>> =
            lock(&self.sessions).values().cloned().collect();
        for session in live {
            let mut session = lock(&session);
            for path in paths {
                // Best effort: a version that does not decode leaves the old line, and the
                // session's next load shows the error.
                if let Err(err) = session.file_committed(path) {
                    tracing::warn!(path, error = %err, "refreshing a session's metadata cache");
                }
            }
        }
    }

    /// The files on this machine the live sessions want watched (their session indexes'
    /// files), deduplicated.
    pub fn sessions_watched_paths(&self) -> Vec<String> {
        let live: Vec<Arc<Mutex<crate::session::Session>>> =
            lock(&self.sessions).values().cloned().collect();
        let mut paths: Vec<String> = live
            .iter()
            .flat_map(|session| lock(session).watched_paths())
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// Which of `entities` live session `sid` holds (in its session index), in order: what a
    /// subscription to a session's objects filters by.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown session.
    pub fn session_holds(&self, sid: &str, entities: &[String]) -> Result<Vec<bool>> {
        let session = self.live_session(sid)?;
        let session = lock(&session);
        let index = session.sets().index();
        Ok(entities.iter().map(|e| index.contains(e)).collect())
    }

    fn announce_watch_roots(&self, roots: &[String]) {
        lock(&self.watch_listeners).retain(|s| s.send(roots.to_vec()).is_ok());
    }
}

impl Apply for WatchAddRequest {
    type Response = WatchRoots;

    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not an existing directory, is not UTF-8 or
    /// lies inside the store directory; [`Error::Io`] when the settings cannot be saved.
    fn apply(self, engine: &Engine) -> Result<WatchRoots> {
        if self.paths.is_empty() {
            return Err(Error::invalid_input(
                "no directory to watch; name one or more, e.g. `strata watch .`",
            ));
        }
        let cwd = PathBuf::from(self.cwd.as_deref().unwrap_or("/"));
        let wanted = self
            .paths
            .iter()
            .map(|p| watchable_root(engine, p, &cwd))
            .collect::<Result<Vec<_>>>()?;
        let (roots, changed) = engine.change_settings(|settings| {
            let mut changed = Vec::new();
            for root in wanted {
                if !settings.watch.contains(&root) {
                    settings.watch.push(root.clone());
                    changed.push(root);
                }
            }
            settings.watch.sort();
            Ok((settings.watch.clone(), changed))
        })?;
        if !changed.is_empty() {
            engine.announce_watch_roots(&roots);
        }
        Ok(WatchRoots { roots, changed })
    }
}

impl Apply for WatchRmRequest {
    type Response = WatchRoots;

    /// # Errors
    /// [`Error::NotFound`] for a path that is no watched root; [`Error::Io`] when the settings
    /// cannot be saved.
    fn apply(self, engine: &Engine) -> Result<WatchRoots> {
        let cwd = PathBuf::from(self.cwd.as_deref().unwrap_or("/"));
        let (roots, changed) = engine.change_settings(|settings| {
            let mut changed = Vec::new();
            for path in &self.paths {
                let joined = cwd.join(path);
                // A root removed from disk is still named by its old path.
                let canonical = std::fs::canonicalize(&joined).unwrap_or(joined);
                let name = canonical.to_string_lossy().into_owned();
                let Some(at) = settings.watch.iter().position(|r| *r == name) else {
                    return Err(Error::not_found(format!(
                        "a watched root {name}; the watched roots are: {}",
                        if settings.watch.is_empty() {
                            "none".to_string()
                        } else {
                            settings.watch.join(", ")
                        }
                    )));
                };
                changed.push(settings.watch.remove(at));
            }
            Ok((settings.watch.clone(), changed))
        })?;
        if !changed.is_empty() {
            engine.announce_watch_roots(&roots);
        }
        Ok(WatchRoots { roots, changed })
    }
}

impl Apply for WatchLsRequest {
    type Response = WatchRoots;

    /// # Errors
    /// Never.
    fn apply(self, engine: &Engine) -> Result<WatchRoots> {
        Ok(WatchRoots {
            roots: engine.settings().watch,
            changed: Vec::new(),
        })
    }
}
