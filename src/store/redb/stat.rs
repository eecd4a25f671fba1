//! The stat cache: what the indexer saw of each file when it last read it, so that a scan can
//! trust an unchanged file without reading it (git's index plays this part for `git status`).

use super::*;

use redb::{ReadableTableMetadata as _, WriteTransaction};

use super::codec::{self, StatRec};
use super::tables::{DIRECTORIES, STAT_BY_DIR};
use super::{Op, Origin, RedbStore, TxReceipt};
use crate::error::Result;

/// Writes `update` into the stat cache inside `wtx` (keyed by directory number and name from
/// store format 9, `dirnum.rs`), opening its tables.
pub(super) fn apply(wtx: &WriteTransaction, update: &StatUpdate) -> Result<()> {
    let mut meta = wtx.open_table(super::tables::META).db()?;
    let mut dirs = super::dirnum::DirTables::open(wtx, &meta)?;
    apply_in(wtx, &mut dirs, update)?;
    dirs.save(&mut meta)
}

/// [`apply`] through `dirs`, the directory-keyed tables of `wtx` a caller holds open (and
/// saves).
pub(super) fn apply_in(
    wtx: &WriteTransaction,
    dirs: &mut super::dirnum::DirTables<'_>,
    update: &StatUpdate,
) -> Result<()> {
    let fs = super::fsnum::write_key(wtx, &update.filesystem_id, true)?;
    let mut records = Vec::with_capacity(update.puts.len());
    for (path, entry) in &update.puts {
        let rec = StatRec {
            size: entry.stat.size,
            mtime_ns: entry.stat.mtime_ns,
            ctime_ns: entry.stat.ctime_ns,
            inode: entry.stat.inode,
            file_hash: entry.file_hash.0,
            scan_start_ns: entry.scan_start_ns,
        };
        records.push((path.as_str(), codec::encode(&rec)?));
    }
    let puts: Vec<(&str, &[u8])> = records
        .iter()
        .map(|(path, bytes)| (*path, bytes.as_slice()))
        .collect();
    let removes: Vec<&str> = update.removes.iter().map(String::as_str).collect();
    dirs.write_stat(&fs, &puts, &removes)
}

/// The stat cache's tables as a read transaction sees them: `stat_by_dir` with the directory
/// numbers (format 9), and the whole-path `stat_cache` of a store before format 9 read as it
/// is (which may lack the first two).
pub(super) struct StatTables {
    rows: Option<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>,
    dirs: Option<redb::ReadOnlyTable<(&'static [u8], &'static str), u32>>,
    old: Option<super::dirnum::OldStatTable>,
}

impl StatTables {
    /// Opens the tables in `rtx`.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails.
    pub(super) fn open(rtx: &redb::ReadTransaction) -> Result<Self> {
        let (old, rows) = super::dirnum::open_stat_table(rtx, STAT_BY_DIR)?;
        let (_, dirs) = super::dirnum::open_stat_table(rtx, DIRECTORIES)?;
        Ok(Self { rows, dirs, old })
    }

    /// How many entries the tables hold.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails.
    pub(super) fn len(&self) -> Result<u64> {
        let rows = match &self.rows {
            Some(t) => t.len().db()?,
            None => 0,
        };
        let old = match &self.old {
            Some(t) => t.len().db()?,
            None => 0,
        };
        Ok(rows + old)
    }

    /// Gives each entry's path and record bytes on the filesystem of key prefix `fs` at
    /// `prefix` or below it (whole path segments) to `visit`, in no particular order.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a key holds no name; the first error of `visit`.
    pub(super) fn for_each_under(
        &self,
        fs: &[u8],
        prefix: &str,
        visit: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        if let Some(old) = &self.old {
            super::lookup::for_each_under(old, fs, prefix, |path, bytes| visit(path, bytes))?;
        }
        if let (Some(rows), Some(dirs)) = (&self.rows, &self.dirs) {
            super::dirnum::for_each_under(dirs, rows, fs, prefix, |path, bytes| {
                visit(path, bytes)
            })?;
        }
        Ok(())
    }
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
        let tables = StatTables::open(&rtx)?;
        // Sized for the whole table: a scan of the root holds all of it (rehashing showed up in
        // profiles of an unchanged re-index).
        let capacity = usize::try_from(tables.len()?).unwrap_or(0);
        let mut out = rustc_hash::FxHashMap::with_capacity_and_hasher(capacity, Default::default());
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        for_each_entry(&tables, &fs, prefix, &mut |path, entry| {
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
        StatTables::open(&rtx)?.len()
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
        let tables = StatTables::open(&rtx)?;
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        for_each_entry(&tables, &fs, prefix, visit)
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
        // Listed directory by directory (format 10, `dirnum.rs`).
        out.sort_unstable();
        Ok(out)
    }

    /// [`RedbStore::indexed_paths_under`] path by path, directory by directory (not in path
    /// order), without collecting them.
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
        let paths = super::dirnum::PathRows::open(&rtx)?;
        let fs = super::fsnum::read_key(&rtx, filesystem_id)?;
        paths.for_each_under(&fs, prefix, &mut |path, _| visit(path))
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

/// Gives each stat cache entry of `tables` on the filesystem of key prefix `fs` at `prefix` or
/// below it to `visit`.
///
/// # Errors
/// [`crate::Error::Corrupt`] when an entry does not decode; the first error of `visit`.
fn for_each_entry(
    tables: &StatTables,
    fs: &[u8],
    prefix: &str,
    visit: &mut dyn FnMut(&str, StatEntry) -> Result<()>,
) -> Result<()> {
    tables.for_each_under(fs, prefix, &mut |path, bytes| {
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

    /// The directory-keyed cache answers like the whole-path one it replaced, for any mix of
    /// writes and removes on two filesystems with the same paths: the root, names next to '/' in
    /// byte order ('.', '0', '!'), a directory and a file of the same name, deep and long names.
    #[test]
    fn directory_keyed_cache_answers_as_whole_paths_would() -> Result<()> {
        use std::collections::BTreeMap;
        let long = "n".repeat(300);
        let names = [
            "/x".to_string(),
            "/a".to_string(),
            "/a/b".to_string(),
            "/a/b/c".to_string(),
            "/a/b!/c".to_string(),
            "/a/b0/c".to_string(),
            "/a/b.d".to_string(),
            "/a/bc".to_string(),
            "/a/b/c/d/e/f".to_string(),
            "/\u{e9}t\u{e9}/\u{1f600} x".to_string(),
            format!("/{long}/{long}"),
            "/a/b/ c".to_string(),
        ];
        let prefixes = [
            "",
            "/",
            "/a",
            "/a/",
            "/a/b",
            "/a/b/",
            "/a/b/c",
            "/a/b!",
            "/a/b0",
            "/x",
            "/a/bc",
            "/\u{e9}t\u{e9}",
            "/nowhere",
        ];
        let store = RedbStore::in_memory()?;
        let mut model: BTreeMap<(String, String), StatEntry> = BTreeMap::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..40u64 {
            for fs in ["fs1", "fs2"] {
                let mut update = StatUpdate {
                    filesystem_id: fs.into(),
                    puts: vec![],
                    removes: vec![],
                };
                for name in &names {
                    match next() % 4 {
                        0 => {
                            let entry = StatEntry {
                                stat: FileStat {
                                    size: round,
                                    mtime_ns: i64::try_from(next() % 1000).unwrap_or(0),
                                    ctime_ns: 3,
                                    inode: next() % 1000,
                                },
                                file_hash: Hash([u8::try_from(round % 200).unwrap_or(0); 32]),
                                scan_start_ns: 5,
                            };
                            update.puts.push((name.clone(), entry));
                            model.insert((fs.to_string(), name.clone()), entry);
                        }
                        1 => {
                            update.removes.push(name.clone());
                            model.remove(&(fs.to_string(), name.clone()));
                        }
                        _ => {}
                    }
                }
                store.transact_with_stat(vec![], Origin::Indexer, update)?;
            }
            for fs in ["fs1", "fs2"] {
                for prefix in prefixes {
                    let base = prefix.trim_end_matches('/');
                    let want: BTreeMap<String, StatEntry> = model
                        .iter()
                        .filter(|((f, p), _)| {
                            f == fs
                                && ((!base.is_empty() && p == base)
                                    || p.starts_with(&format!("{base}/")))
                        })
                        .map(|((_, p), e)| (p.clone(), *e))
                        .collect();
                    let got: BTreeMap<String, StatEntry> =
                        store.stat_cache(fs, prefix)?.into_iter().collect();
                    assert_eq!(got, want, "round {round}, {fs}, prefix {prefix:?}");
                }
            }
            let total = model.len() as u64;
            assert_eq!(store.stat_cache_len()?, total, "round {round}");
        }
        Ok(())
    }
}
