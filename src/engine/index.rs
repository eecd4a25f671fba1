//! `index`: scan trees into the store.

use serde::{Deserialize, Serialize};

use super::request::Apply;
use super::{Engine, Result};
use crate::index::{Indexer, ScanOptions, ScanProgress, ScanStore, ScanSummary, scan, scan_from};

/// `index`: record every new, changed and deleted file under the given trees or files. Under a
/// root a daemon's watcher watches (and has reconciled), it is answered from the watcher's state:
/// only the paths seen changing are looked at, and `files` counts those.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexRequest {
    /// The trees or files to index: host paths, relative ones taken from `cwd`.
    pub paths: Vec<String>,
    /// The caller's working directory, for relative paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Worker threads that read, hash and compress (default: one per core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

/// What `index` answers: the scan's counts, its transactions and the first skipped files.
pub type IndexResponse = ScanSummary;

impl IndexRequest {
    /// Answers the request, calling `progress` after every file.
    ///
    /// # Errors
    /// As [`Apply::apply`].
    pub fn apply_with_progress(
        self,
        engine: &Engine,
        progress: &mut dyn FnMut(ScanProgress),
    ) -> Result<ScanSummary> {
        // A write command: refused on a store marked damaged even when nothing changed, since
        // "unchanged" would be the damaged stat cache's word.
        if let Some(reason) = engine.store.damage() {
            return Err(crate::store::damage::refusal(&reason));
        }
        let settings = engine.settings();
        let cwd = std::path::PathBuf::from(self.cwd.as_deref().unwrap_or("/"));
        let roots: Vec<std::path::PathBuf> = self.paths.iter().map(|p| cwd.join(p)).collect();
        if let Some(hook) = engine.watch_index() {
            let canonical: Option<Vec<std::path::PathBuf>> = roots
                .iter()
                .map(|r| std::fs::canonicalize(r).ok())
                .collect();
            if let Some(canonical) = canonical
                && let Some(answered) = hook.index(&canonical)
            {
                // The watcher's commit is published already.
                return answered;
            }
        }
        let skip_dirs = engine
            .dir
            .iter()
            .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))
            .collect();
        let options = ScanOptions {
            skip_dirs,
            ignore: settings.ignore.clone(),
            threads: self.threads.unwrap_or(0),
            ..ScanOptions::default()
        };
        let indexer = Indexer::new(&engine.store, &settings)?;
        let summary = match scan(&indexer, &roots, &options, progress) {
            // A store opened to write at its first write refused that write: another process
            // committed after this scan read the store, so nothing was written. The handle
            // writes now, so a second scan plans from the store as it is.
            Err(err) if crate::store::is_written_meanwhile(&err) => {
                let indexer = Indexer::new(&engine.store, &settings)?;
                scan(&indexer, &roots, &options, progress)?
            }
            other => other?,
        };
        engine.publish(&summary.tx_ids);
        Ok(summary)
    }
}

impl IndexRequest {
    /// Answers the request in a process of its own over the existing store in `dir` with its
    /// `settings` ([`crate::index::Settings::load`] of `dir`), opening it with `open` once the
    /// walk has started: the walkers stat files while the store opens. The answer is
    /// [`IndexRequest::apply_with_progress`]'s over the engine `open` gives (a fresh one: no
    /// watcher answers for its roots). `open` is called once, and its error is the answer when it
    /// fails, with nothing read of the store and nothing written.
    ///
    /// # Errors
    /// As [`IndexRequest::apply_with_progress`], and `open`'s.
    pub fn apply_opening(
        self,
        dir: &std::path::Path,
        settings: &crate::index::Settings,
        open: &mut dyn FnMut() -> Result<Engine>,
        progress: &mut dyn FnMut(ScanProgress),
    ) -> Result<ScanSummary> {
        let cwd = std::path::PathBuf::from(self.cwd.as_deref().unwrap_or("/"));
        let roots: Vec<std::path::PathBuf> = self.paths.iter().map(|p| cwd.join(p)).collect();
        let options = ScanOptions {
            skip_dirs: vec![std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())],
            ignore: settings.ignore.clone(),
            threads: self.threads.unwrap_or(0),
            ..ScanOptions::default()
        };
        let engine = std::cell::OnceCell::new();
        let opening = ScanStore::Opening {
            dir,
            settings,
            open: Box::new(|| {
                let opened = open()?;
                // Refused on a store marked damaged, as `apply_with_progress` refuses it.
                if let Some(reason) = opened.store.damage() {
                    return Err(crate::store::damage::refusal(&reason));
                }
                let indexer = Indexer::new(&opened.store, settings)?;
                let _ = engine.set(opened);
                Ok(indexer)
            }),
        };
        let summary = match scan_from(opening, &roots, &options, progress) {
            // As in `apply_with_progress`: another process committed after the scan read the
            // store; the handle writes now, and a second scan plans from the store as it is.
            Err(err) if crate::store::is_written_meanwhile(&err) => {
                let engine = engine
                    .get()
                    .ok_or_else(|| crate::Error::invariant("the index's store is not open"))?;
                let indexer = Indexer::new(&engine.store, settings)?;
                scan(&indexer, &roots, &options, progress)?
            }
            other => other?,
        };
        if let Some(engine) = engine.get() {
            engine.publish(&summary.tx_ids);
        }
        Ok(summary)
    }
}

impl Apply for IndexRequest {
    type Response = IndexResponse;

    /// # Errors
    /// [`crate::Error::InvalidPath`] for a root that does not exist or is not UTF-8;
    /// [`crate::Error::Corrupt`] on a store marked damaged (before anything is read); store
    /// errors from committing (what was committed before stays committed).
    fn apply(self, engine: &Engine) -> Result<ScanSummary> {
        self.apply_with_progress(engine, &mut |_| {})
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::Error;
    use crate::engine::Access;
    use crate::index::Settings;

    fn io<T>(what: &str, result: std::io::Result<T>) -> Result<T> {
        result.map_err(|e| Error::io(what, e))
    }

    /// Every file under `dir` with its bytes, by path.
    fn files_of(dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>> {
        let mut out = Vec::new();
        for entry in io("listing", std::fs::read_dir(dir))? {
            let path = io("listing", entry)?.path();
            if path.is_dir() {
                out.extend(files_of(&path)?);
            } else {
                let bytes = io("reading", std::fs::read(&path))?;
                out.push((path, bytes));
            }
        }
        out.sort();
        Ok(out)
    }

    /// A tree of 300 files in 30 directories indexed twice into a store (a second index keeps
    /// the stat and listings files an unchanged re-index reads), and one file changed since.
    fn indexed(tmp: &Path) -> Result<(PathBuf, PathBuf)> {
        let (tree, store) = (tmp.join("tree"), tmp.join("store"));
        for n in 0..300 {
            let dir = tree.join(format!("d{}", n % 30));
            io("mkdir", std::fs::create_dir_all(&dir))?;
            io("write", std::fs::write(dir.join(format!("f{n}.txt")), format!("{n}\n")))?;
        }
        let engine = Engine::open(&store, Access::Create)?;
        for _ in 0..2 {
            engine.call(IndexRequest {
                paths: vec![tree.display().to_string()],
                ..IndexRequest::default()
            })?;
        }
        drop(engine);
        io("write", std::fs::write(tree.join("d0/f0.txt"), "changed\n"))?;
        Ok((tree, store))
    }

    /// The answer of an index of `tree` whose store in `dir` is opened by `open` once the walk
    /// has started, and how many times `open` was called.
    fn index_opening(
        tree: &Path,
        dir: &Path,
        open: &dyn Fn() -> Result<Engine>,
    ) -> (Result<ScanSummary>, usize) {
        let settings = match Settings::load(dir) {
            Ok(settings) => settings,
            Err(err) => return (Err(err), 0),
        };
        let mut calls = 0;
        let answer = IndexRequest {
            paths: vec![tree.display().to_string()],
            ..IndexRequest::default()
        }
        .apply_opening(
            dir,
            &settings,
            &mut || {
                calls += 1;
                open()
            },
            &mut |_| {},
        );
        (answer, calls)
    }

    /// An index that starts its walk before it opens the store answers the open's error as an
    /// index of an opened store meets it (the same kind and words: a store held by another
    /// process, of another format, marked damaged), calls the open once, and leaves every file
    /// of the store directory as it was, though its walkers had stated the tree meanwhile.
    #[test]
    fn a_store_that_fails_to_open_after_the_walk_began_answers_as_before_and_writes_nothing()
    -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (tree, store) = indexed(tmp.path())?;
        // Another process holds the store.
        let locked = Error::StoreLocked {
            path: store.join(crate::store::DB_FILE),
            holder: "pid 1 (test)".into(),
        };
        let before = files_of(&store)?;
        let (answer, calls) = index_opening(&tree, &store, &|| {
            Err(Error::StoreLocked {
                path: store.join(crate::store::DB_FILE),
                holder: "pid 1 (test)".into(),
            })
        });
        let err = answer.err().ok_or_else(|| Error::invariant("indexed a held store"))?;
        assert_eq!((err.kind(), err.to_string()), (locked.kind(), locked.to_string()));
        assert_eq!(calls, 1);
        assert_eq!(files_of(&store)?, before, "nothing written");

        // Marked damaged: the refusal of an index of the opened store.
        crate::store::damage::mark(&store, "fsck found 1 problem", &["a finding".into()]);
        let before = files_of(&store)?;
        let opened = Engine::open(&store, Access::CreateDeferred)?;
        let expected = IndexRequest {
            paths: vec![tree.display().to_string()],
            ..IndexRequest::default()
        }
        .apply(&opened)
        .err()
        .ok_or_else(|| Error::invariant("indexed a damaged store"))?;
        drop(opened);
        let (answer, calls) = index_opening(&tree, &store, &|| {
            Engine::open(&store, Access::CreateDeferred)
        });
        let err = answer.err().ok_or_else(|| Error::invariant("indexed a damaged store"))?;
        assert_eq!(err.kind(), "corrupt");
        assert_eq!((err.kind(), err.to_string()), (expected.kind(), expected.to_string()));
        assert_eq!(calls, 1);
        assert_eq!(files_of(&store)?, before, "nothing written");
        crate::store::damage::clear(&store)?;

        // Another format version: the open's own error.
        {
            let db = redb::Database::open(store.join(crate::store::DB_FILE))
                .map_err(|e| Error::storage("opening", e.to_string()))?;
            let tx = db
                .begin_write()
                .map_err(|e| Error::storage("writing", e.to_string()))?;
            let mut meta = tx
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                .map_err(|e| Error::storage("writing", e.to_string()))?;
            meta.insert("format_version", 99u32.to_le_bytes().as_slice())
                .map_err(|e| Error::storage("writing", e.to_string()))?;
            drop(meta);
            tx.commit()
                .map_err(|e| Error::storage("committing", e.to_string()))?;
        }
        let before = files_of(&store)?;
        let expected = Engine::open(&store, Access::CreateDeferred)
            .err()
            .ok_or_else(|| Error::invariant("opened another format"))?;
        assert_eq!(expected.kind(), "format_version");
        let (answer, calls) = index_opening(&tree, &store, &|| {
            Engine::open(&store, Access::CreateDeferred)
        });
        let err = answer.err().ok_or_else(|| Error::invariant("indexed another format"))?;
        assert_eq!((err.kind(), err.to_string()), (expected.kind(), expected.to_string()));
        assert_eq!(calls, 1);
        assert_eq!(files_of(&store)?, before, "nothing written");
        Ok(())
    }

    /// An index that opens its store once the walk has started finds what an index of the
    /// opened store finds: the changed file updated, the rest unchanged, the same counts.
    #[test]
    fn an_index_opening_its_store_after_the_walk_began_finds_the_same() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (tree, store) = indexed(tmp.path())?;
        let (answer, calls) = index_opening(&tree, &store, &|| {
            Engine::open(&store, Access::CreateDeferred)
        });
        let summary = answer?;
        assert_eq!(calls, 1);
        assert_eq!(
            (summary.files, summary.updated, summary.unchanged, summary.created),
            (300, 1, 299, 0)
        );
        let again = Engine::open(&store, Access::CreateDeferred)?.call(IndexRequest {
            paths: vec![tree.display().to_string()],
            ..IndexRequest::default()
        })?;
        assert_eq!((again.files, again.unchanged, again.updated), (300, 300, 0));
        Ok(())
    }
}
