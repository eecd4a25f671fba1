//! `index`: scan trees into the store.

use serde::{Deserialize, Serialize};

use super::request::Apply;
use super::{Engine, Result};
use crate::index::{Indexer, ScanOptions, ScanProgress, ScanSummary, scan, scan_unchanged};

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

/// How far an `index` run got: files seen and bytes read so far.
pub type IndexProgress = ScanProgress;

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
        let roots = self.roots(engine)?;
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
        let settings = engine.settings();
        let indexer = Indexer::new(&engine.store, &settings)?;
        let summary = scan(&indexer, &roots, &self.options(engine, &settings), progress)?;
        engine.publish(&summary.tx_ids);
        Ok(summary)
    }

    /// The answer the request would give when it would write nothing (every file unchanged,
    /// nothing deleted, no stat cache entry to refresh), found without writing; `None` as soon as
    /// the scan meets something to write, or under a daemon's watcher. A front end without a
    /// daemon tries this on the store opened read-only before it opens it to write (an open to
    /// write costs the storage engine several syncs, more than the scan of an unchanged tree).
    ///
    /// # Errors
    /// As [`Apply::apply`].
    pub fn apply_unchanged(
        &self,
        engine: &Engine,
        progress: &mut dyn FnMut(ScanProgress),
    ) -> Result<Option<ScanSummary>> {
        let roots = self.roots(engine)?;
        if engine.watch_index().is_some() {
            return Ok(None);
        }
        let settings = engine.settings();
        let indexer = Indexer::new(&engine.store, &settings)?;
        scan_unchanged(&indexer, &roots, &self.options(engine, &settings), progress)
    }

    /// The roots to scan, after refusing a store marked damaged.
    fn roots(&self, engine: &Engine) -> Result<Vec<std::path::PathBuf>> {
        // A write command: refused on a store marked damaged even when nothing changed, since
        // "unchanged" would be the damaged stat cache's word.
        if let Some(reason) = engine.store.damage() {
            return Err(crate::store::damage::refusal(&reason));
        }
        let cwd = std::path::PathBuf::from(self.cwd.as_deref().unwrap_or("/"));
        Ok(self.paths.iter().map(|p| cwd.join(p)).collect())
    }

    /// The scan's options: the request's threads, the settings' ignore globs, and the store's
    /// own directory skipped.
    fn options(&self, engine: &Engine, settings: &crate::index::Settings) -> ScanOptions {
        let skip_dirs = engine
            .dir
            .iter()
            .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))
            .collect();
        ScanOptions {
            skip_dirs,
            ignore: settings.ignore.clone(),
            threads: self.threads.unwrap_or(0),
            ..ScanOptions::default()
        }
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
