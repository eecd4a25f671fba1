//! Lookups for callers that start from a name rather than an entity id: a path, an id prefix,
//! a moment in transaction time.

use super::*;
use redb::ReadableTable;

use super::codec;
use super::tables::TX_LOG;
use super::{RedbStore, Timestamp, TxId, Version};
use crate::error::{Error, Result};

/// Calls `visit` with every (path, value) of a `(filesystem key, path)`-keyed table at `prefix` or
/// below it, whole path segments only (`/a/b` matches `/a/b` and `/a/b/c`, not `/a/bc`), in path
/// order; `fs` is the filesystem's key prefix (`fsnum::read_key`).
pub(crate) fn for_each_under<V: redb::Value + 'static>(
    table: &impl ReadableTable<(&'static [u8], &'static str), V>,
    fs: &[u8],
    prefix: &str,
    mut visit: impl FnMut(&str, V::SelfType<'_>) -> Result<()>,
) -> Result<()> {
    let base = prefix.trim_end_matches('/');
    // The exact path, then everything under `base/` ('0' is the byte after '/').
    let below_start = format!("{base}/");
    let below_end = format!("{base}0");
    if !base.is_empty()
        && let Some(value) = table.get((fs, base)).db()?
    {
        visit(base, value.value())?;
    }
    for entry in table
        .range((fs, below_start.as_str())..(fs, below_end.as_str()))
        .db()?
    {
        let (key, value) = entry.db()?;
        visit(key.value().1, value.value())?;
    }
    Ok(())
}

/// The entity id of number `eid`, which the `paths` row (`filesystem_id`, `path`) names,
/// checked against the entity's own source.
///
/// # Errors
/// [`Error::Corrupt`] when the number or the entity is unknown or its source differs.
fn id_at_path(t: &ReadEntities, filesystem_id: &str, path: &str, eid: u64) -> Result<String> {
    let Some(id) = super::entity::id_of_eid(t, eid)? else {
        return Err(Error::corrupt(format!(
            "paths names entity number {eid}, which entity_ids does not know; run fsck --rebuild"
        )));
    };
    let rec = entity_rec(t, &id)?;
    super::verify::check_path_row(filesystem_id, path, &id, rec.as_ref())?;
    Ok(id)
}

impl RedbStore {
    /// The entity id of the file at exactly `path` on `filesystem_id`, if the store knows one.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn entity_at_path(&self, filesystem_id: &str, path: &str) -> Result<Option<String>> {
        let rtx = self.read()?;
        let paths = super::dirnum::PathRows::open(&rtx)?;
        let entities = ReadEntities::open(&rtx)?;
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        paths
            .get(&fs, path)?
            .map(|eid| id_at_path(&entities, filesystem_id, path, eid))
            .transpose()
    }

    /// The (path, entity id) pairs of the files on `filesystem_id` at `prefix` or below it (whole
    /// path segments), in path order; deleted files included.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        let rtx = self.read()?;
        let paths = super::dirnum::PathRows::open(&rtx)?;
        let entities = ReadEntities::open(&rtx)?;
        let mut out = Vec::new();
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        paths.for_each_under(&fs, prefix, &mut |path, eid| {
            let id = id_at_path(&entities, filesystem_id, path, eid)?;
            out.push((path.to_string(), id));
            Ok(())
        })?;
        // Listed directory by directory (format 10, `dirnum.rs`).
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Every file in the stat cache has a `paths` row: one missing from the listing is a
        // damaged `paths` table, not a file the store does not know.
        let cache = super::stat::StatTables::open(&rtx)?;
        let listed: std::collections::HashSet<&str> = out.iter().map(|(p, _)| p.as_str()).collect();
        cache.for_each_under(&fs, prefix, &mut |path, _| {
            if listed.contains(path) {
                return Ok(());
            }
            Err(Error::corrupt(format!(
                "the stat cache knows {path:?} but the paths table does not list it; run `strata \
                 fsck`"
            )))
        })?;
        Ok(out)
    }

    /// Whether the store knows entity `id` (it may be deleted now; evicted ones are unknown).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn entity_exists(&self, id: &str) -> Result<bool> {
        let rtx = self.read()?;
        let entities = ReadEntities::open(&rtx)?;
        Ok(super::entity::entity_row(&entities, id)?.is_some())
    }

    /// Up to `limit` entity ids that start with `prefix`, in id order.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let rtx = self.read()?;
        let entities = ReadEntities::open(&rtx)?;
        let mut out = Vec::new();
        // Ids that are not hashes: their keys are a tag byte and the id, in id order.
        let text = codec::text_id_key(prefix);
        for entry in entities.entities.range(text.as_slice()..).db()? {
            let (key, _) = entry.db()?;
            let key = key.value();
            if !key.starts_with(&text) || out.len() >= limit {
                break;
            }
            out.push(codec::id_of_key(key, "entity key")?);
        }
        // Hash ids (33-byte keys, or a file's 12-byte short key from format 8, which sorts
        // before the whole keys it starts): every key whose hex starts with the prefix, or is
        // the start of it, lies from the prefix padded with '0' (cut to a short key) on.
        if prefix.len() <= 64
            && prefix
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            let low = codec::id_key(&format!("{prefix:0<64}"));
            let start = codec::short_entity_key(&low).unwrap_or(&low);
            let mut hash_ids = Vec::new();
            // The short key of the last id taken: the whole keys that start with it sort after
            // it but may hold smaller ids, so the limit stops only past them.
            let mut last_short: Option<Vec<u8>> = None;
            for entry in entities.entities.range(start..).db()? {
                let (key, value) = entry.db()?;
                let key = key.value();
                let hash_key = key.len() == 33 || codec::is_short_entity_key(key);
                if !hash_key || key.first() != low.first() {
                    break;
                }
                if hash_ids.len() >= limit
                    && key.get(..codec::SHORT_ENTITY_KEY) != last_short.as_deref()
                {
                    break;
                }
                let seen = crate::hash::to_hex(key.get(1..).unwrap_or_default());
                let n = seen.len().min(prefix.len());
                match seen.get(..n).cmp(&prefix.get(..n)) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Greater => break,
                    std::cmp::Ordering::Equal => {}
                }
                let id = super::entity::id_of_row(&entities, key, value.value())?;
                if id.starts_with(prefix) {
                    hash_ids.push(id);
                    last_short = key.get(..codec::SHORT_ENTITY_KEY).map(<[u8]>::to_vec);
                }
            }
            out.extend(hash_ids);
            out.sort();
            out.truncate(limit);
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
            Ok(codec::decode_header(header.value(), "tx header")?.tx_time)
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

    /// What `id` is now, or `None` when the store does not know it (unlike [`RedbStore::get`], an
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};
    use crate::store::{Op, Origin};

    #[test]
    fn ids_with_prefix_finds_hash_ids_and_named_ids_in_id_order() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let mut ops = Vec::new();
        for i in 0..20 {
            let source = FilesystemSource {
                filesystem_id: "f".repeat(64),
                path: format!("/t/{i}.txt"),
            };
            ops.push(Op::put(Object::file_text(source, format!("{i}"))?));
        }
        for name in ["a", "ab", "b"] {
            ops.push(Op::put(Object::system_prompt(name, "p".to_string())?));
        }
        store.transact(ops, Origin::Cli)?;
        let mut all: Vec<String> = store.live_entities()?.into_iter().map(|e| e.id).collect();
        assert_eq!(all.len(), 23);
        let sorted = {
            let mut s = all.clone();
            s.sort();
            s
        };
        assert_eq!(all, sorted, "live_entities is in id order");
        assert_eq!(store.ids_with_prefix("", 100)?, all);
        assert_eq!(store.ids_with_prefix("", 5)?, all[..5]);
        let hash_id = all
            .iter()
            .find(|id| id.len() == 64)
            .cloned()
            .unwrap_or_default();
        for len in [1, 2, 7, 63, 64] {
            let prefix = &hash_id[..len];
            let want: Vec<String> = all
                .iter()
                .filter(|id| id.starts_with(prefix))
                .cloned()
                .collect();
            assert_eq!(store.ids_with_prefix(prefix, 100)?, want, "prefix {prefix}");
        }
        assert_eq!(
            store.ids_with_prefix("system_prompt:a", 10)?,
            vec!["system_prompt:a", "system_prompt:ab"]
        );
        assert!(store.ids_with_prefix("zz", 10)?.is_empty());
        all.retain(|id| id.len() == 64);
        let fs = "f".repeat(64);
        let under: Vec<String> = store
            .paths_under(&fs, "/t")?
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        assert_eq!(under.len(), 20);
        assert_eq!(
            store.entity_at_path(&fs, "/t/3.txt")?.as_deref(),
            under.get(13).map(String::as_str)
        );
        assert!(store.entity_exists(&hash_id)?);
        Ok(())
    }
}
