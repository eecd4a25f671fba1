//! Directory numbers (store format 9): the stat cache is keyed by the number of a file's
//! directory and the file's name instead of its filesystem key and whole canonical path.
//!
//! `directories` maps (filesystem key, directory path with its trailing `/`) to a number from 1
//! and `directory_paths` maps it back; a `stat_by_dir` key is the number in LEB128 followed by
//! the name. A real tree has about one directory for ten files and names of ~18 bytes against
//! paths of ~80, so each row is ~60 bytes shorter. A listing under a prefix ranges over the
//! directories whose paths start with it, then over each one's rows (directory by directory,
//! not in path order). A store before format 9 kept whole paths in `stat_cache`: its first
//! read-write open moves them here ([`move_old_stat_rows`]), and one opened read-only is read
//! as it is (readers take both tables).
//!
//! A directory's two rows live only while some `stat_by_dir` row uses its number: a write that
//! removes the last one removes them too ([`write_stat_in`]; a subdirectory has its own rows and
//! number, and a listing finds it by its own path, so a parent goes even while children stay).
//! Numbers are never given twice (`meta[dir_numbers_from]`).

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::StorageResult as _;
use super::tables::{
    DIR_NUMBERS_FROM, DIRECTORIES, DIRECTORY_PATHS, META, STAT_BY_DIR, STAT_CACHE,
};
use crate::error::{Error, Result};

/// Splits canonical `path` into its directory (up to and with its last `/`; empty when it has
/// none) and its name.
pub(crate) fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => path.split_at(i + 1),
        None => ("", path),
    }
}

/// The key prefix of directory number `n` in `stat_by_dir`: `n` in LEB128 (1–5 bytes; no
/// number's prefix starts another's).
pub(crate) fn number_prefix(n: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    let mut n = n;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return out;
        }
        out.push(low | 0x80);
    }
}

/// The `stat_by_dir` key of file `name` in directory number `n`.
pub(crate) fn row_key(n: u32, name: &str) -> Vec<u8> {
    let mut key = number_prefix(n);
    key.extend_from_slice(name.as_bytes());
    key
}

/// The directory number and file name of a `stat_by_dir` key, when it is one.
pub(crate) fn split_row_key(key: &[u8]) -> Option<(u32, &str)> {
    let mut n = 0u32;
    for (i, &byte) in key.iter().enumerate().take(5) {
        n |= u32::from(byte & 0x7f).checked_shl(7 * u32::try_from(i).ok()?)?;
        if byte & 0x80 == 0 {
            let name = std::str::from_utf8(key.get(i + 1..)?).ok()?;
            return (!name.is_empty() && number_prefix(n).len() == i + 1).then_some((n, name));
        }
    }
    None
}

/// The least key after every key that starts with `prefix`, a [`number_prefix`] (whose last
/// byte is below 0x80, so adding one does not carry).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = last.saturating_add(1);
    }
    end
}

/// Calls `visit` with every (path, value) of a directory-keyed `table` on the filesystem of key
/// prefix `fs` at `prefix` or below it, whole path segments only (`/a/b` matches `/a/b` and
/// `/a/b/c`, not `/a/bc`), directory by directory.
///
/// # Errors
/// [`Error::Corrupt`] when a key holds no file name; the first error of `visit`.
pub(crate) fn for_each_under<V: redb::Value + 'static>(
    dirs: &impl ReadableTable<(&'static [u8], &'static str), u32>,
    table: &impl ReadableTable<&'static [u8], V>,
    fs: &[u8],
    prefix: &str,
    mut visit: impl FnMut(&str, V::SelfType<'_>) -> Result<()>,
) -> Result<()> {
    let base = prefix.trim_end_matches('/');
    if !base.is_empty() {
        let (dir, name) = split(base);
        let number = dirs.get((fs, dir)).db()?.map(|v| v.value());
        if let Some(n) = number
            && let Some(value) = table.get(row_key(n, name).as_slice()).db()?
        {
            visit(base, value.value())?;
        }
    }
    // Every directory under `base/` ('0' is the byte after '/').
    let (start, end) = (format!("{base}/"), format!("{base}0"));
    let mut path = String::new();
    for entry in dirs.range((fs, start.as_str())..(fs, end.as_str())).db()? {
        let (key, number) = entry.db()?;
        let dir = key.value().1;
        let from = number_prefix(number.value());
        let to = prefix_end(&from);
        for row in table.range(from.as_slice()..to.as_slice()).db()? {
            let (key, value) = row.db()?;
            let name = key
                .value()
                .get(from.len()..)
                .and_then(|name| std::str::from_utf8(name).ok())
                .ok_or_else(|| {
                    Error::corrupt(format!(
                        "a key in directory {dir:?} holds no file name; run `strata fsck`"
                    ))
                })?;
            path.clear();
            path.push_str(dir);
            path.push_str(name);
            visit(&path, value.value())?;
        }
    }
    Ok(())
}

/// The `meta` table of a write transaction.
pub(crate) type MetaTable<'t> = redb::Table<'t, &'static str, &'static [u8]>;

/// The directory tables of a write transaction, for one batch of rows.
pub(crate) struct Numbers<'t> {
    dirs: redb::Table<'t, (&'static [u8], &'static str), u32>,
    paths: redb::Table<'t, u32, (&'static [u8], &'static str)>,
    next: Option<u32>,
    /// `meta[DIR_NUMBERS_FROM]`: no new number below it (0: none).
    from: u64,
}

impl<'t> Numbers<'t> {
    /// Opens the two directory tables in `wtx`; `from` is the least number a new directory
    /// may take (`meta[DIR_NUMBERS_FROM]`).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn open(wtx: &'t WriteTransaction, from: u64) -> Result<Self> {
        Ok(Self {
            dirs: wtx.open_table(DIRECTORIES).db()?,
            paths: wtx.open_table(DIRECTORY_PATHS).db()?,
            next: None,
            from,
        })
    }

    /// The number of directory `dir` on the filesystem of key prefix `fs`, if it has one.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn get(&self, fs: &[u8], dir: &str) -> Result<Option<u32>> {
        Ok(self.dirs.get((fs, dir)).db()?.map(|v| v.value()))
    }

    /// The number of directory `dir` on the filesystem of key prefix `fs`, registering the
    /// next one when it has none (after every number given before, freed ones included).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails; [`Error::Invariant`] when every number is taken.
    pub(crate) fn get_or_add(&mut self, fs: &[u8], dir: &str) -> Result<u32> {
        if let Some(n) = self.get(fs, dir)? {
            return Ok(n);
        }
        let next = match self.next {
            Some(n) => u64::from(n),
            None => self
                .paths
                .last()
                .db()?
                .map_or(1, |(k, _)| u64::from(k.value()) + 1)
                .max(self.from),
        };
        let next = match u32::try_from(next) {
            Ok(n) if n < u32::MAX => n,
            _ => {
                return Err(Error::invariant(
                    "the store has numbered all the directories it can (2^32 - 2)",
                ));
            }
        };
        self.dirs.insert((fs, dir), next).db()?;
        self.paths.insert(next, (fs, dir)).db()?;
        self.next = Some(next + 1);
        Ok(next)
    }

    /// Removes the two rows of directory `dir` (number `n`) on the filesystem of key prefix
    /// `fs`.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    fn free(&mut self, fs: &[u8], dir: &str, n: u32) -> Result<()> {
        self.dirs.remove((fs, dir)).db()?;
        self.paths.remove(n).db()?;
        Ok(())
    }

    /// The greatest number a directory holds.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    fn last(&self) -> Result<Option<u32>> {
        Ok(self.paths.last().db()?.map(|(k, _)| k.value()))
    }
}

/// [`write_stat_in`] with the transaction's `meta` table opened here.
///
/// # Errors
/// As [`write_stat_in`].
pub(crate) fn write_stat(
    wtx: &WriteTransaction,
    fs: &[u8],
    puts: &[(&str, &[u8])],
    removes: &[&str],
) -> Result<()> {
    let mut meta = wtx.open_table(META).db()?;
    write_stat_in(wtx, &mut meta, fs, puts, removes)
}

/// Writes the stat rows `puts` (canonical path, stat record bytes) and removes the rows of
/// `removes` on the filesystem of key prefix `fs`, inside `wtx` (whose `meta` table is
/// `meta`); new rows go in key order (random inserts leave redb's pages about half full). A
/// directory of `removes` left with no row loses its two directory rows (one range probe per
/// directory), and when it held the greatest number `meta[DIR_NUMBERS_FROM]` keeps that
/// number from being given again.
///
/// # Errors
/// [`Error::Storage`] when redb fails; [`Error::Corrupt`] when `meta[DIR_NUMBERS_FROM]` is
/// not a number.
pub(crate) fn write_stat_in(
    wtx: &WriteTransaction,
    meta: &mut MetaTable<'_>,
    fs: &[u8],
    puts: &[(&str, &[u8])],
    removes: &[&str],
) -> Result<()> {
    let from = super::read_counter(meta, DIR_NUMBERS_FROM)?;
    let mut numbers = Numbers::open(wtx, from)?;
    let mut known: rustc_hash::FxHashMap<&str, u32> = rustc_hash::FxHashMap::default();
    let mut rows = Vec::with_capacity(puts.len());
    // New directories numbered in path order: `directories` then takes them in key order
    // (random inserts leave redb's pages about half full) and `directory_paths` appends.
    let mut in_order: Vec<&(&str, &[u8])> = puts.iter().collect();
    in_order.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (path, value) in in_order {
        let (dir, name) = split(path);
        let n = match known.get(dir) {
            Some(&n) => n,
            None => {
                let n = numbers.get_or_add(fs, dir)?;
                known.insert(dir, n);
                n
            }
        };
        rows.push((row_key(n, name), value));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut table = wtx.open_table(STAT_BY_DIR).db()?;
    for (key, value) in rows {
        table.insert(key.as_slice(), *value).db()?;
    }
    // The directories rows were removed from, each once.
    let mut touched: BTreeMap<u32, &str> = BTreeMap::new();
    for path in removes {
        let (dir, name) = split(path);
        let n = match known.get(dir) {
            Some(&n) => Some(n),
            None => numbers.get(fs, dir)?,
        };
        if let Some(n) = n {
            known.insert(dir, n);
            table.remove(row_key(n, name).as_slice()).db()?;
            touched.insert(n, dir);
        }
    }
    let mut freed = None;
    for (n, dir) in touched {
        let from = number_prefix(n);
        let to = prefix_end(&from);
        if table
            .range(from.as_slice()..to.as_slice())
            .db()?
            .next()
            .is_none()
        {
            numbers.free(fs, dir, n)?;
            freed = Some(n);
        }
    }
    // `touched` goes in number order: `freed` is the greatest number freed.
    if let Some(n) = freed
        && numbers.last()?.is_none_or(|last| last < n)
        && u64::from(n) >= from
    {
        let next = u64::from(n) + 1;
        meta.insert(DIR_NUMBERS_FROM, next.to_le_bytes().as_slice())
            .db()?;
    }
    Ok(())
}

/// An old `stat_cache` row: filesystem key, whole path, record bytes.
pub(crate) type OldRow = (Vec<u8>, String, Vec<u8>);

/// The whole-path `stat_cache` table of a store before format 9.
pub(crate) type OldStatTable = redb::ReadOnlyTable<(&'static [u8], &'static str), &'static [u8]>;

/// Writes old `stat_cache` rows into `stat_by_dir`.
fn write_old_rows(wtx: &WriteTransaction, rows: Vec<OldRow>) -> Result<u64> {
    let count = rows.len() as u64;
    let mut by_fs: BTreeMap<Vec<u8>, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for (fs, path, value) in rows {
        by_fs.entry(fs).or_default().push((path, value));
    }
    for (fs, rows) in by_fs {
        let puts: Vec<(&str, &[u8])> = rows
            .iter()
            .map(|(path, value)| (path.as_str(), value.as_slice()))
            .collect();
        write_stat(wtx, &fs, &puts, &[])?;
    }
    Ok(count)
}

/// The rows of an old `stat_cache` table.
fn old_rows(
    table: &impl ReadableTable<(&'static [u8], &'static str), &'static [u8]>,
) -> Result<Vec<OldRow>> {
    let mut rows = Vec::new();
    for entry in table.iter().db()? {
        let (key, value) = entry.db()?;
        let (fs, path) = key.value();
        rows.push((fs.to_vec(), path.to_string(), value.value().to_vec()));
    }
    Ok(rows)
}

/// The rows of the whole-path `stat_cache` of a store before format 9 as `rtx` sees them, read
/// for its upgrade (none when it has no such table); `None` when the table cannot be read
/// through. Damage there (a key whose path is not UTF-8 makes the storage engine panic, caught
/// here without marking the handle) must not stop the upgrade, or every read-write open, `fsck
/// --repair` included, would fail on it: the stat cache is only a cache, and the upgrade then
/// moves none of it (the next scan reads every file again).
pub(crate) fn read_old_stat_rows(rtx: &ReadTransaction) -> Option<Vec<OldRow>> {
    let quiet = std::sync::atomic::AtomicBool::new(false);
    super::guard::guarded(
        &quiet,
        "reading the stat cache of format 8",
        || match open_if_any(rtx, STAT_CACHE)? {
            Some(table) => old_rows(&table),
            None => Ok(Vec::new()),
        },
    )
    .ok()
}

/// Moves `rows`, every row of the stat cache of a store before format 9 (`stat_cache`, keyed
/// by whole paths, as [`read_old_stat_rows`] read them; `None`: unreadable, none moved), into
/// `stat_by_dir` and deletes the old table, inside `wtx`: at the upgrade. Returns how many rows
/// moved.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn move_old_stat_rows(wtx: &WriteTransaction, rows: Option<Vec<OldRow>>) -> Result<u64> {
    let moved = match rows {
        Some(rows) => write_old_rows(wtx, rows)?,
        None => 0,
    };
    wtx.delete_table(STAT_CACHE).db()?;
    Ok(moved)
}

/// Copies the old `stat_cache` rows `rtx` sees (a store before format 9 read as it is) into
/// `wtx`'s `stat_by_dir`, as the upgrade would (a backup).
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn copy_old_stat_rows(rtx: &ReadTransaction, wtx: &WriteTransaction) -> Result<u64> {
    match rtx.open_table(STAT_CACHE) {
        Ok(table) => write_old_rows(wtx, old_rows(&table)?),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
        Err(e) => Err(Error::storage("opening stat_cache", e)),
    }
}

/// Opens table `def` in `rtx`, `None` when the store has no such table (one made before it
/// existed, read as it is).
///
/// # Errors
/// [`Error::Storage`] when redb fails otherwise.
pub(crate) fn open_if_any<K: redb::Key + 'static, V: redb::Value + 'static>(
    rtx: &ReadTransaction,
    def: redb::TableDefinition<'static, K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>> {
    match rtx.open_table(def) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(Error::storage("opening a table", e)),
    }
}

/// What [`open_stat_table`] opens: the old table and the asked one, each if there.
pub(crate) type Opened<K, V> = (Option<OldStatTable>, Option<redb::ReadOnlyTable<K, V>>);

/// Opens the whole-path `stat_cache` of a store before format 9 read as it is (`None` in a
/// store of format 9) and then format 9's table `def` (`stat_by_dir` or a directory table),
/// which only such an older store may lack: in a store of format 9 a missing one is damage (a
/// damaged table name), an error as for any other table.
///
/// # Errors
/// [`Error::Storage`] when redb fails or a format-9 store lacks `def`.
pub(crate) fn open_stat_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    rtx: &ReadTransaction,
    def: redb::TableDefinition<'static, K, V>,
) -> Result<Opened<K, V>> {
    let old = open_if_any(rtx, STAT_CACHE)?;
    let new = if old.is_some() {
        open_if_any(rtx, def)?
    } else {
        Some(rtx.open_table(def).db()?)
    };
    Ok((old, new))
}

/// What disagrees between `directories` and `directory_paths` (each directory's number leads
/// back to it, and each number to a directory with that number), as (subject, problem) pairs.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn disagreements(rtx: &ReadTransaction) -> Result<Vec<(String, String)>> {
    let (Some(dirs), Some(paths)) = (
        open_stat_table(rtx, DIRECTORIES)?.1,
        open_stat_table(rtx, DIRECTORY_PATHS)?.1,
    ) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in dirs.iter().db()? {
        let (k, v) = entry.db()?;
        let ((fs, dir), n) = (k.value(), v.value());
        let back = paths
            .get(n)
            .db()?
            .map(|v| (v.value().0.to_vec(), v.value().1.to_string()));
        if back.as_ref().map(|(f, d)| (f.as_slice(), d.as_str())) != Some((fs, dir)) {
            out.push((
                format!("directory {dir:?}"),
                format!(
                    "directories gives it number {n}, which directory_paths does not give back"
                ),
            ));
        }
    }
    for entry in paths.iter().db()? {
        let (k, v) = entry.db()?;
        let (n, (fs, dir)) = (k.value(), v.value());
        let forth = dirs.get((fs, dir)).db()?.map(|v| v.value());
        if forth != Some(n) {
            out.push((
                format!("directory number {n}"),
                format!(
                    "directory_paths names {dir:?} for it, which directories does not number so"
                ),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Hash;
    use crate::store::redb::RedbStore;
    use crate::store::{FileStat, Op, Origin, Put, StatEntry, StatUpdate};

    /// A new store in a temporary directory (kept while the first is).
    fn new_store() -> Result<(tempfile::TempDir, RedbStore)> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("a temp dir", e))?;
        let store = RedbStore::create(dir.path())?;
        Ok((dir, store))
    }

    /// A stat cache entry whose inode is `i`.
    fn entry(i: u64) -> StatEntry {
        StatEntry {
            stat: FileStat {
                size: 1,
                mtime_ns: 2,
                ctime_ns: 3,
                inode: i,
            },
            file_hash: Hash([9; 32]),
            scan_start_ns: 5,
        }
    }

    /// Writes `puts` and `removes` into the stat cache of filesystem "fs".
    fn update(store: &RedbStore, puts: &[&str], removes: &[&str]) -> Result<()> {
        let update = StatUpdate {
            filesystem_id: "fs".into(),
            puts: puts.iter().map(|p| (p.to_string(), entry(1))).collect(),
            removes: removes.iter().map(|p| p.to_string()).collect(),
        };
        store.transact_with_stat(vec![], Origin::Indexer, update)?;
        Ok(())
    }

    /// Every row of `directories` as (path, number), after checking that `directory_paths`
    /// holds the same rows back.
    fn directories(store: &RedbStore) -> Result<Vec<(String, u32)>> {
        let rtx = store.read()?;
        let dirs = rtx.open_table(DIRECTORIES).db()?;
        let paths = rtx.open_table(DIRECTORY_PATHS).db()?;
        let mut out = Vec::new();
        for row in dirs.iter().db()? {
            let (k, v) = row.db()?;
            out.push((k.value().1.to_string(), v.value()));
        }
        let mut back = Vec::new();
        for row in paths.iter().db()? {
            let (k, v) = row.db()?;
            back.push((v.value().1.to_string(), k.value()));
        }
        back.sort();
        assert_eq!(
            out, back,
            "directory_paths gives the rows of directories back"
        );
        Ok(out)
    }

    /// The paths the stat cache lists under `prefix`, sorted.
    fn listed(store: &RedbStore, prefix: &str) -> Result<Vec<String>> {
        let mut paths: Vec<String> = store.stat_cache("fs", prefix)?.into_keys().collect();
        paths.sort();
        Ok(paths)
    }

    /// Asserts that fsck finds nothing but stat rows of files the store does not hold (these
    /// tests write only the cache).
    fn clean(store: &RedbStore) {
        let findings: Vec<_> = store
            .fsck()
            .into_iter()
            .filter(|f| f.detail != "the stat cache vouches for a file the store does not list")
            .collect();
        assert!(findings.is_empty(), "{findings:?}");
    }

    fn names(dirs: &[(String, u32)]) -> Vec<&str> {
        dirs.iter().map(|(d, _)| d.as_str()).collect()
    }

    #[test]
    fn a_deleted_or_renamed_directory_leaves_no_rows() -> Result<()> {
        let (_dir, store) = new_store()?;
        update(
            &store,
            &["/t/a/x", "/t/a/y", "/t/b/z", "/t/keep/k", "/t/top"],
            &[],
        )?;
        assert_eq!(
            names(&directories(&store)?),
            ["/t/", "/t/a/", "/t/b/", "/t/keep/"]
        );
        // `a` deleted, `b` renamed to `c`: one batch, as an index run sends it.
        update(&store, &["/t/c/z"], &["/t/a/x", "/t/a/y", "/t/b/z"])?;
        assert_eq!(names(&directories(&store)?), ["/t/", "/t/c/", "/t/keep/"]);
        assert_eq!(listed(&store, "/t")?, ["/t/c/z", "/t/keep/k", "/t/top"]);
        clean(&store);
        // One file of a directory goes: the directory stays.
        update(&store, &["/t/keep/l"], &[])?;
        update(&store, &[], &["/t/keep/k"])?;
        assert_eq!(names(&directories(&store)?), ["/t/", "/t/c/", "/t/keep/"]);
        // A removal of a file the cache does not hold changes nothing.
        update(&store, &[], &["/t/c/none", "/nowhere/x"])?;
        assert_eq!(names(&directories(&store)?), ["/t/", "/t/c/", "/t/keep/"]);
        update(&store, &[], &["/t/c/z", "/t/keep/l", "/t/top"])?;
        assert!(directories(&store)?.is_empty());
        assert!(listed(&store, "/")?.is_empty());
        clean(&store);
        Ok(())
    }

    /// A directory's rows are needed only while stat rows use its number: a parent without
    /// files of its own goes while its subdirectories stay, and a listing at the parent still
    /// finds them (it ranges over directory paths, not over a tree).
    #[test]
    fn a_parent_goes_while_its_subdirectory_keeps_rows() -> Result<()> {
        let (_dir, store) = new_store()?;
        update(&store, &["/p/f", "/p/sub/g", "/p/sub/deep/h"], &[])?;
        update(&store, &[], &["/p/f"])?;
        assert_eq!(names(&directories(&store)?), ["/p/sub/", "/p/sub/deep/"]);
        assert_eq!(listed(&store, "/p")?, ["/p/sub/deep/h", "/p/sub/g"]);
        assert_eq!(listed(&store, "/p/sub")?, ["/p/sub/deep/h", "/p/sub/g"]);
        clean(&store);
        update(&store, &[], &["/p/sub/g"])?;
        assert_eq!(names(&directories(&store)?), ["/p/sub/deep/"]);
        assert_eq!(listed(&store, "/")?, ["/p/sub/deep/h"]);
        clean(&store);
        Ok(())
    }

    /// A directory deleted and made again gets a new number, never a freed one (nor does any
    /// other directory), and answers as before; so after a reopen (the floor is in `meta`).
    #[test]
    fn a_recreated_directory_gets_rows_again_under_a_new_number() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("a temp dir", e))?;
        let numbers = {
            let store = RedbStore::create(dir.path())?;
            update(&store, &["/r/a/x", "/r/b/y"], &[])?;
            let before = directories(&store)?;
            assert_eq!(before, [("/r/a/".into(), 1), ("/r/b/".into(), 2)]);
            // The greatest number goes, then the other.
            update(&store, &[], &["/r/b/y"])?;
            update(&store, &[], &["/r/a/x"])?;
            assert!(directories(&store)?.is_empty());
            clean(&store);
            update(&store, &["/r/a/x"], &[])?;
            assert_eq!(directories(&store)?, [("/r/a/".into(), 3)]);
            assert_eq!(listed(&store, "/r")?, ["/r/a/x"]);
            assert_eq!(
                store.stat_cache("fs", "/r/a/x")?.get("/r/a/x"),
                Some(&entry(1))
            );
            clean(&store);
            update(&store, &[], &["/r/a/x"])?;
            directories(&store)?
        };
        assert!(numbers.is_empty());
        let store = RedbStore::open(dir.path())?;
        update(&store, &["/r/b/y", "/r/a/x"], &[])?;
        assert_eq!(
            directories(&store)?,
            [("/r/a/".into(), 4), ("/r/b/".into(), 5)]
        );
        assert_eq!(listed(&store, "/")?, ["/r/a/x", "/r/b/y"]);
        clean(&store);
        // A rebuild empties the cache and its directories, and numbers afresh.
        store.fsck_rebuild()?;
        assert!(directories(&store)?.is_empty());
        update(&store, &["/r/a/x"], &[])?;
        assert_eq!(directories(&store)?, [("/r/a/".into(), 1)]);
        clean(&store);
        Ok(())
    }

    /// Evicting the last file of a directory takes the directory's rows with its stat entry.
    #[test]
    fn a_directory_emptied_by_evict_leaves_no_rows() -> Result<()> {
        use crate::object::{FilesystemSource, Object};
        let (_dir, store) = new_store()?;
        let mut ops = Vec::new();
        let mut ids = Vec::new();
        let mut stat = StatUpdate {
            filesystem_id: "fs".into(),
            puts: Vec::new(),
            removes: Vec::new(),
        };
        for path in ["/e/gone/a.txt", "/e/kept/b.txt"] {
            let bytes = path.as_bytes().to_vec();
            let object = Object::file_bytes(
                FilesystemSource {
                    filesystem_id: "fs".into(),
                    path: path.into(),
                },
                bytes.clone(),
            )?;
            ids.push(object.id().to_string());
            let file_hash = object
                .file_hash()
                .cloned()
                .ok_or_else(|| Error::invariant("a file's hash"))?;
            let mut put = Put::new(object);
            put.bytes = Some(bytes);
            ops.push(Op::Put(Box::new(put)));
            stat.puts.push((
                path.into(),
                StatEntry {
                    file_hash,
                    ..entry(1)
                },
            ));
        }
        store.transact_with_stat(ops, Origin::Indexer, stat)?;
        assert_eq!(names(&directories(&store)?), ["/e/gone/", "/e/kept/"]);
        store.transact(
            vec![Op::Evict {
                entity: ids[0].clone(),
            }],
            Origin::Cli,
        )?;
        assert_eq!(names(&directories(&store)?), ["/e/kept/"]);
        assert_eq!(listed(&store, "/e")?, ["/e/kept/b.txt"]);
        clean(&store);
        Ok(())
    }

    /// A store written before directories were freed may hold a directory with no stat rows:
    /// harmless (fsck finds nothing), and the next removal there frees it.
    #[test]
    fn a_stale_directory_row_is_harmless_and_freed_by_a_removal() -> Result<()> {
        let (_dir, store) = new_store()?;
        update(&store, &["/s/a/x"], &[])?;
        {
            let wtx = store.begin_write()?;
            let fs = super::super::fsnum::write_key(&wtx, "fs", false)?;
            let mut numbers = Numbers::open(&wtx, 0)?;
            assert_eq!(numbers.get_or_add(&fs, "/s/stale/")?, 2);
            drop(numbers);
            wtx.commit().db()?;
        }
        assert_eq!(names(&directories(&store)?), ["/s/a/", "/s/stale/"]);
        assert_eq!(listed(&store, "/s")?, ["/s/a/x"]);
        clean(&store);
        update(&store, &[], &["/s/stale/gone"])?;
        assert_eq!(names(&directories(&store)?), ["/s/a/"]);
        update(&store, &["/s/new/y"], &[])?;
        assert_eq!(directories(&store)?[1], ("/s/new/".into(), 3));
        clean(&store);
        Ok(())
    }

    #[test]
    fn keys_split_back_into_directory_and_name() {
        assert_eq!(split("/a/b/c.txt"), ("/a/b/", "c.txt"));
        assert_eq!(split("/x"), ("/", "x"));
        assert_eq!(split("x"), ("", "x"));
        for n in [1, 127, 128, 300, 16_383, 16_384, u32::MAX - 1] {
            let key = row_key(n, "name.rs");
            assert_eq!(split_row_key(&key), Some((n, "name.rs")), "{n}");
            assert!(key.starts_with(&number_prefix(n)));
            assert!(prefix_end(&number_prefix(n)).as_slice() > key.as_slice());
        }
        assert_eq!(number_prefix(300).len(), 2);
        assert_eq!(split_row_key(&number_prefix(5)), None, "no name");
        assert_eq!(split_row_key(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(
            split_row_key(&[0x85, 0x00, b'a']),
            None,
            "not the shortest form"
        );
        assert_eq!(split_row_key(&[5, 0xff]), None, "not UTF-8");
    }
}
