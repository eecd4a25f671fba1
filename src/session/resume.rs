//! Resume: restore a session's latest commit and reconcile its files against disk, writing what
//! changed as one commit.
//!
//! For each file of the session index on this machine's filesystem: a stat that the stat cache
//! vouches for (same stat, same `file_hash`, racy-clean) proves it unchanged without reading; a
//! changed file gets a new version dated by its mtime (clamped); a readable stub is upgraded; a
//! file missing on disk gets a tombstone; a file that cannot be stat'ed for another reason, or
//! lies on a filesystem strata cannot reach, keeps its last version. The sets never change.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::index::{Action, Look, Presence, Settings, StatChange, presence_all};
use crate::store::{FileStat, StatEntry, Store, Timestamp, TxReceipt};

use super::{FileState, Meta, Session};

/// One file whose version reconciliation changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reconciled {
    /// The file's entity id.
    pub id: String,
    /// The path as the agent sees it.
    pub path: String,
    /// created (reappeared), updated (changed or stub upgraded) or deleted.
    pub action: Action,
}

/// What [`Session::resume`] found and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResumeReport {
    /// Files of the session checked against disk.
    pub checked: usize,
    /// Files the stat cache vouched for (not read).
    pub vouched: usize,
    /// Files read and hashed.
    pub read: usize,
    /// Files on a filesystem strata cannot reach (kept as they were).
    pub unreachable: usize,
    /// Files that exist but could not be stat'ed or read (kept as they were).
    pub unreadable: usize,
    /// The changes, in session index order.
    pub changes: Vec<Reconciled>,
    /// The commit that recorded them (`None` when nothing changed).
    pub tx_id: Option<u64>,
}

/// The longest whole-segment directory prefix shared by `paths` (`/` when none). Compared as
/// bytes, cut back to a `/`: no path is split into segments.
fn common_dir(paths: &[&str]) -> String {
    let dir = |path: &'_ str| -> usize { path.rfind('/').unwrap_or(0) };
    let Some(first) = paths.first() else {
        return "/".into();
    };
    let mut prefix = &first[..dir(first)];
    for path in &paths[1..] {
        // Mostly the prefix is already a whole-segment prefix of the path's directory (one
        // `memcmp`, no walk of the bytes).
        if path.len() > prefix.len()
            && path.as_bytes().get(prefix.len()) == Some(&b'/')
            && path.as_bytes().starts_with(prefix.as_bytes())
        {
            continue;
        }
        let other = &path[..dir(path)];
        let same = prefix
            .bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        // `prefix` is whole segments of `other` when it ends where a segment of `other` does.
        let whole = |n: usize| {
            (n == prefix.len() || prefix.as_bytes()[n] == b'/')
                && (n == other.len() || other.as_bytes()[n] == b'/')
        };
        if !whole(same) {
            let cut = prefix.as_bytes()[..same].iter().rposition(|b| *b == b'/');
            prefix = &prefix[..cut.unwrap_or(0)];
        } else {
            prefix = &prefix[..same];
        }
    }
    if prefix.is_empty() {
        "/".into()
    } else {
        prefix.to_string()
    }
}

impl Session {
    /// Opens session `sid` at its latest commit and reconciles its files against disk; what
    /// changed is written as one commit, so the latest render shows it.
    ///
    /// # Errors
    /// As [`Session::load`]; store errors from the commit.
    pub fn resume(store: &Store, settings: &Settings, sid: &str) -> Result<(Self, ResumeReport)> {
        let mut session = Session::load_at(store, settings, sid, None, true)?;
        let report = session.reconcile()?;
        Ok((session, report))
    }

    /// Reconciles every file of the index against disk and commits what changed.
    ///
    /// # Errors
    /// Store errors.
    pub fn reconcile(&mut self) -> Result<ResumeReport> {
        self.writable()?;
        let machine = self.resolver.machine_id().to_string();
        let mut report = ResumeReport::default();
        // First pass, reading only: stat every file; the stat cache vouches for most. What it
        // does not vouch for is handled in a second pass, in index order, which may write.
        let mut todo: Vec<(String, Meta, Option<FileStat>)> = Vec::new();
        let mut files = Vec::new();
        let mut local: Vec<&str> = Vec::new();
        let mut slot_of: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        slot_of.reserve(self.sets.index().len());
        // The files are taken from the cache as loaded, without making it a map (see
        // `MetaCache::file_at`).
        for (n, id) in self.sets.index().ids().iter().enumerate() {
            let Some(file) = self.cache.file_at(n, id) else {
                continue;
            };
            report.checked += 1;
            if file.filesystem_id() != machine {
                report.unreachable += 1;
                continue;
            }
            let path = file.path();
            // Each distinct canonical path gets a slot for its stat cache entry, filled as the
            // entries are read one by one (no map of owned paths is built).
            local.push(path);
            let next = slot_of.len();
            let slot = *slot_of.entry(path).or_insert(next);
            // A case-insensitive mount's identity path is lowercased: open the on-disk spelling.
            files.push((id, file, self.open_path(id, path), slot));
        }
        let opens: Vec<&str> = files.iter().map(|(_, _, open, _)| *open).collect();
        let mut entries: Vec<Option<StatEntry>> = vec![None; slot_of.len()];
        // The stats run on their threads while this one reads the stat cache.
        let (cache, presences) = std::thread::scope(|scope| {
            let stats = scope.spawn(|| presence_all(&opens, true));
            let cache = if local.is_empty() {
                Ok(())
            } else {
                self.store
                    .for_each_stat_entry(&machine, &common_dir(&local), &mut |path, entry| {
                        if let Some(slot) = slot_of.get(path).and_then(|&n| entries.get_mut(n)) {
                            *slot = Some(entry);
                        }
                        Ok(())
                    })
            };
            let presences = stats
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (cache, presences)
        });
        cache?;
        for ((id, file, _, slot), presence) in files.into_iter().zip(presences) {
            let (file_hash, state) = (file.file_hash(), file.state());
            let cached = entries.get(slot).copied().flatten();
            // Gone by the one disk path's rule: nothing there, a parent that is no longer a
            // directory, or something other than a regular file there now.
            let stat = match presence {
                Presence::File(stat) => stat,
                Presence::Unknown(_) => {
                    report.unreadable += 1;
                    continue;
                }
                _gone => {
                    if state != FileState::Deleted {
                        todo.push((id.clone(), file.to_meta(), None));
                    }
                    continue;
                }
            };
            let vouched = matches!(
                state,
                FileState::Read | FileState::Binary | FileState::TooLarge
            ) && cached.is_some_and(|entry| {
                Some(entry.file_hash) == file_hash && entry.vouches_for(&stat)
            });
            if vouched {
                report.vouched += 1;
            } else if state != FileState::Denied {
                todo.push((id.clone(), file.to_meta(), Some(stat)));
            }
        }
        for (id, meta, stat) in todo {
            let Meta::File { source, path, .. } = meta else {
                continue;
            };
            if stat.is_none() {
                let gone = Look::Gone(Presence::NotAFile);
                let change = StatChange::of(&gone, Timestamp::now());
                let planned = self.plan_look(source.clone(), gone, change)?;
                if planned.action == Action::Deleted {
                    self.apply_planned(&planned, &source);
                    report.changes.push(Reconciled {
                        id,
                        path,
                        action: Action::Deleted,
                    });
                }
                continue;
            }
            let open = self.open_path(&id, &source.path).to_string();
            // Read as `read` would: a link out of the file's mount is not followed, and the
            // file keeps its last version.
            let Ok(real) = self.checked_open_path(&id, &source) else {
                report.unreadable += 1;
                continue;
            };
            let (look, change) = self.look_at(&source, &real);
            if let Look::Unreadable(_) = look {
                report.unreadable += 1;
                continue;
            }
            let mut planned = self.plan_look(source.clone(), look, change)?;
            report.read += 1;
            Self::keep_spelling(&mut planned, &open, &source.path);
            if planned.action != Action::Unchanged {
                self.apply_planned(&planned, &source);
                report.changes.push(Reconciled {
                    id,
                    path,
                    action: planned.action,
                });
            }
        }
        let receipt: Option<TxReceipt> = if report.changes.is_empty() {
            // Only stat cache entries may have changed: written without a transaction.
            self.commit()?
        } else {
            let receipt = self.commit_forced()?;
            Some(receipt)
        };
        report.tx_id = receipt.map(|r| r.tx_id.0);
        Ok(report)
    }

    /// Commits even when the session document is unchanged (its files changed).
    fn commit_forced(&mut self) -> Result<TxReceipt> {
        self.commit()?
            .ok_or_else(|| Error::invariant("reconciliation changed files but wrote no commit"))
    }
}

#[cfg(test)]
mod tests {
    use super::common_dir;

    /// The segment-by-segment definition `common_dir` computes by bytes.
    fn common_dir_by_segments(paths: &[&str]) -> String {
        let Some(first) = paths.first() else {
            return "/".into();
        };
        let mut prefix: Vec<&str> = first.split('/').collect();
        prefix.pop();
        for path in &paths[1..] {
            let segments: Vec<&str> = path.split('/').collect();
            let shared = prefix
                .iter()
                .zip(&segments[..segments.len().saturating_sub(1)])
                .take_while(|(a, b)| a == b)
                .count();
            prefix.truncate(shared);
        }
        let joined = prefix.join("/");
        if joined.is_empty() {
            "/".into()
        } else {
            joined
        }
    }

    proptest::proptest! {
        #[test]
        fn common_dir_matches_segments(
            paths in proptest::collection::vec("(/[ab\u{e9}]{0,2}){1,4}", 0..6),
        ) {
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            proptest::prop_assert_eq!(common_dir(&paths), common_dir_by_segments(&paths));
        }
    }

    #[test]
    fn common_dir_is_whole_segments() {
        assert_eq!(common_dir(&["/a/b/c.txt", "/a/b/d.txt"]), "/a/b");
        assert_eq!(common_dir(&["/a/bc/x", "/a/b/y"]), "/a");
        assert_eq!(common_dir(&["/x", "/y"]), "/");
        assert_eq!(common_dir(&["/a/b/c.txt"]), "/a/b");
    }
}
