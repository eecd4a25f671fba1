//! `index`: scan trees into the store.

use serde::{Deserialize, Serialize};

use super::request::Apply;
use super::{Engine, Result};
use crate::index::{Indexer, ScanOptions, ScanProgress, ScanSummary, scan};

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
