//! The stat cache: what the indexer saw of each file when it last read it, so that a scan can
//! trust an unchanged file without reading it (git's index plays this part for `git status`).

use super::*;

use redb::{ReadableTableMetadata as _, WriteTransaction};

use super::codec::{self, StatRec};
use super::tables::STAT_CACHE;
use super::{Op, Origin, RedbStore, TxReceipt};
use crate::error::Result;

/// Writes `update` into the stat cache inside `wtx`.
pub(super) fn apply(wtx: &WriteTransaction, update: &StatUpdate) -> Result<()> {
    let fs = super::fsnum::write_key(wtx, &update.filesystem_id, true)?;
    let fs = fs.as_slice();
    let mut table = wtx.open_table(STAT_CACHE).db()?;
    // In path order: random inserts leave redb's pages about half full.
    let mut puts: Vec<_> = update.puts.iter().collect();
    puts.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, entry) in puts {
        let rec = StatRec {
            size: entry.stat.size,
            mtime_ns: entry.stat.mtime_ns,
            ctime_ns: entry.stat.ctime_ns,
            inode: entry.stat.inode,
            file_hash: entry.file_hash.0,
            scan_start_ns: entry.scan_start_ns,
        };
        table
            .insert((fs, path.as_str()), codec::encode(&rec)?.as_slice())
            .db()?;
    }
    for path in &update.removes {
        table.remove((fs, path.as_str())).db()?;
    }
    Ok(())
}

impl RedbStore {
    /// The stat cache entries of files on `filesystem_id` at `prefix` or below it (whole path
    /// segments), by canonical path.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when an entry does not decode.
    pub fn stat_cache(
        &self,
        filesystem_id: &str,
        prefix: &str,
    ) -> Result<rustc_hash::FxHashMap<String, StatEntry>> {
        let rtx = self.read()?;
        let table = rtx.open_table(STAT_CACHE).db()?;
        // Sized for the whole table: a scan of the root holds all of it (rehashing showed up in
        // profiles of an unchanged re-index).
        let capacity = usize::try_from(table.len().db()?).unwrap_or(0);
        let mut out = rustc_hash::FxHashMap::with_capacity_and_hasher(capacity, Default::default());
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        for_each_entry(&table, &fs, prefix, &mut |path, entry| {
            out.insert(path.to_string(), entry);
            Ok(())
        })?;
        Ok(out)
    }

    /// How many stat cache entries the store holds, on every filesystem.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails.
    pub fn stat_cache_len(&self) -> Result<u64> {
        let rtx = self.read()?;
        let table = rtx.open_table(STAT_CACHE).db()?;
        table.len().db()
    }

    /// [`RedbStore::stat_cache`] entry by entry, without building a map.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when an entry does not decode; the first error of `visit`.
    pub fn for_each_stat_entry(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str, StatEntry) -> Result<()>,
    ) -> Result<()> {
        let rtx = self.read()?;
        let table = rtx.open_table(STAT_CACHE).db()?;
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        for_each_entry(&table, &fs, prefix, visit)
    }

    /// The paths of the files the store knows on `filesystem_id` at `prefix` or below it (whole
    /// path segments), in path order, deleted files included: [`RedbStore::paths_under`] without
    /// the entity ids, for a scan looking for deletions.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails.
    pub fn indexed_paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.for_each_indexed_path_under(filesystem_id, prefix, &mut |path| {
            out.push(path.to_string());
            Ok(())
        })?;
        Ok(out)
    }

    /// [`RedbStore::indexed_paths_under`] path by path, without collecting them.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails; the first error of `visit`.
    pub fn for_each_indexed_path_under(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        let rtx = self.read()?;
        let paths = rtx.open_table(super::tables::PATHS).db()?;
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        super::lookup::for_each_under(&paths, &fs, prefix, |path, _| visit(path))
    }

    /// Writes `ops` (when there are any) and the stat cache changes in one redb transaction.
    /// Returns the receipt of the store transaction, or `None` when only the cache changed.
    ///
    /// # Errors
    /// As [`RedbStore::transact`]; on error nothing is written.
    pub fn transact_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>> {
        if !ops.is_empty() {
            return self.transact_inner(ops, origin, Some(&stat)).map(Some);
        }
        if !stat.is_empty() {
            let wtx = self.begin_write()?;
            apply(&wtx, &stat)?;
            wtx.commit().db()?;
        }
        Ok(None)
    }
}

/// Gives each stat cache entry of `table` on the filesystem of key prefix `fs` at `prefix` or
/// below it to `visit`.
///
/// # Errors
/// [`crate::Error::Corrupt`] when an entry does not decode; the first error of `visit`.
fn for_each_entry(
    table: &redb::ReadOnlyTable<(&'static [u8], &'static str), &'static [u8]>,
    fs: &[u8],
    prefix: &str,
    visit: &mut dyn FnMut(&str, StatEntry) -> Result<()>,
) -> Result<()> {
    super::lookup::for_each_under(table, fs, prefix, |path, bytes| {
        let rec: StatRec = codec::decode(bytes, "stat cache entry")
            .map_err(|e| crate::Error::corrupt(format!("{e} (the entry of {path})")))?;
        visit(path, rec.entry())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Hash;
    use crate::store::FileStat;

    #[test]
    fn racy_entries_are_not_trusted() {
        let stat = FileStat {
            size: 3,
            mtime_ns: 1_000,
            ctime_ns: 1_000,
            inode: 7,
        };
        let entry = StatEntry {
            stat,
            file_hash: Hash([0; 32]),
            scan_start_ns: 2_000,
        };
        assert!(entry.vouches_for(&stat));
        assert!(!entry.vouches_for(&FileStat { size: 4, ..stat }));
        assert!(!entry.vouches_for(&FileStat {
            ctime_ns: 1_001,
            ..stat
        }));
        let racy = StatEntry {
            scan_start_ns: 1_000,
            ..entry
        };
        assert!(
            !racy.vouches_for(&stat),
            "mtime not older than the scan start"
        );
    }

    #[test]
    fn cache_round_trips_by_prefix() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let entry = StatEntry {
            stat: FileStat {
                size: 1,
                mtime_ns: 2,
                ctime_ns: 3,
                inode: 4,
            },
            file_hash: Hash([9; 32]),
            scan_start_ns: 5,
        };
        let update = StatUpdate {
            filesystem_id: "fs".into(),
            puts: vec![
                ("/a/b".into(), entry),
                ("/a/b/c".into(), entry),
                ("/a/bc".into(), entry),
            ],
            removes: vec![],
        };
        assert_eq!(
            store.transact_with_stat(vec![], Origin::Indexer, update)?,
            None
        );
        let under = store.stat_cache("fs", "/a/b")?;
        let mut paths: Vec<_> = under.keys().cloned().collect();
        paths.sort();
        assert_eq!(paths, vec!["/a/b", "/a/b/c"]);
        assert_eq!(under["/a/b/c"], entry);
        assert!(store.stat_cache("other", "/")?.is_empty());
        let remove = StatUpdate {
            filesystem_id: "fs".into(),
            puts: vec![],
            removes: vec!["/a/b".into()],
        };
        store.transact_with_stat(vec![], Origin::Indexer, remove)?;
        assert_eq!(store.stat_cache("fs", "/")?.len(), 2);
        assert!(
            store.log(None, 10)?.is_empty(),
            "cache-only writes make no transaction"
        );
        Ok(())
    }
}
