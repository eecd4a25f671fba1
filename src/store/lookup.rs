//! Lookups for callers that start from a name rather than an entity id: a path, an id prefix,
//! a moment in transaction time.

use redb::ReadableTable;

use super::codec::{self, TxHeaderRec};
use super::tables::{ENTITIES, PATHS, TX_LOG};
use super::{Db as _, Store, Timestamp, TxId, Version};
use crate::error::{Error, Result};

/// Calls `visit` with every (path, value) of a `(filesystem id, path)`-keyed table at `prefix` or
/// below it, whole path segments only (`/a/b` matches `/a/b` and `/a/b/c`, not `/a/bc`), in path
/// order.
pub(super) fn for_each_under<V: redb::Value + 'static>(
    table: &impl ReadableTable<(&'static str, &'static str), V>,
    filesystem_id: &str,
    prefix: &str,
    mut visit: impl FnMut(&str, V::SelfType<'_>) -> Result<()>,
) -> Result<()> {
    let base = prefix.trim_end_matches('/');
    // The exact path, then everything under `base/` ('0' is the byte after '/').
    let below_start = format!("{base}/");
    let below_end = format!("{base}0");
    if !base.is_empty()
        && let Some(value) = table.get((filesystem_id, base)).db()?
    {
        visit(base, value.value())?;
    }
    for entry in table
        .range((filesystem_id, below_start.as_str())..(filesystem_id, below_end.as_str()))
        .db()?
    {
        let (key, value) = entry.db()?;
        visit(key.value().1, value.value())?;
    }
    Ok(())
}

impl Store {
    /// The entity id of the file at exactly `path` on `filesystem_id`, if the store knows one.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn entity_at_path(&self, filesystem_id: &str, path: &str) -> Result<Option<String>> {
        let rtx = self.read()?;
        let paths = rtx.open_table(PATHS).db()?;
        Ok(paths
            .get((filesystem_id, path))
            .db()?
            .map(|v| v.value().to_string()))
    }

    /// The (path, entity id) pairs of the files on `filesystem_id` at `prefix` or below it (whole
    /// path segments), in path order; deleted files included.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        let rtx = self.read()?;
        let paths = rtx.open_table(PATHS).db()?;
        let mut out = Vec::new();
        for_each_under(&paths, filesystem_id, prefix, |path, id| {
            out.push((path.to_string(), id.to_string()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Whether the store knows entity `id` (it may be deleted now; evicted ones are unknown).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn entity_exists(&self, id: &str) -> Result<bool> {
        let rtx = self.read()?;
        let entities = rtx.open_table(ENTITIES).db()?;
        Ok(entities.get(id).db()?.is_some())
    }

    /// Up to `limit` entity ids that start with `prefix`, in id order.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let rtx = self.read()?;
        let entities = rtx.open_table(ENTITIES).db()?;
        let mut out = Vec::new();
        for entry in entities.range(prefix..).db()? {
            let (key, _) = entry.db()?;
            let id = key.value();
            if !id.starts_with(prefix) || out.len() >= limit {
                break;
            }
            out.push(id.to_string());
        }
        Ok(out)
    }

    /// The last transaction committed at or before `time`, if any.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a transaction header does not decode.
    pub fn tx_at_time(&self, time: Timestamp) -> Result<Option<TxId>> {
        let rtx = self.read()?;
        let log = rtx.open_table(TX_LOG).db()?;
        let Some((last, _)) = log.last().db()? else {
            return Ok(None);
        };
        let tx_time = |tx: u64| -> Result<i64> {
            let header = log
                .get(tx)
                .db()?
                .ok_or_else(|| Error::corrupt(format!("tx {tx} is missing from the log")))?;
            Ok(codec::decode::<TxHeaderRec>(header.value(), "tx header")?.tx_time)
        };
        // tx_time strictly increases with tx_id: binary search for the last tx_time <= time.
        let (mut lo, mut hi) = (1u64, last.value());
        if tx_time(lo)? > time.as_micros() {
            return Ok(None);
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if tx_time(mid)? <= time.as_micros() {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(Some(TxId(lo)))
    }

    /// What `id` is now, or `None` when the store does not know it (unlike [`Store::get`], an
    /// unknown entity is not an error).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when stored data fails its hashes.
    pub fn get_if_known(&self, id: &str) -> Result<Option<Version>> {
        match self.get(id) {
            Err(Error::NotFound { .. }) => Ok(None),
            other => other,
        }
    }
}
