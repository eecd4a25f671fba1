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

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::StorageResult as _;
use super::tables::{DIRECTORIES, DIRECTORY_PATHS, STAT_BY_DIR, STAT_CACHE};
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

/// The directory tables of a write transaction, for one batch of rows.
pub(crate) struct Numbers<'t> {
    dirs: redb::Table<'t, (&'static [u8], &'static str), u32>,
    paths: redb::Table<'t, u32, (&'static [u8], &'static str)>,
    next: Option<u32>,
}

impl<'t> Numbers<'t> {
    /// Opens the two directory tables in `wtx`.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn open(wtx: &'t WriteTransaction) -> Result<Self> {
        Ok(Self {
            dirs: wtx.open_table(DIRECTORIES).db()?,
            paths: wtx.open_table(DIRECTORY_PATHS).db()?,
            next: None,
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
    /// next one when it has none.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails; [`Error::Invariant`] when every number is taken.
    pub(crate) fn get_or_add(&mut self, fs: &[u8], dir: &str) -> Result<u32> {
        if let Some(n) = self.get(fs, dir)? {
            return Ok(n);
        }
        let next = match self.next {
            Some(n) => n,
            None => self
                .paths
                .last()
                .db()?
                .map_or(1, |(k, _)| k.value().saturating_add(1)),
        };
        if next == u32::MAX {
            return Err(Error::invariant(
                "the store has numbered all the directories it can (2^32 - 2)",
            ));
        }
        self.dirs.insert((fs, dir), next).db()?;
        self.paths.insert(next, (fs, dir)).db()?;
        self.next = Some(next + 1);
        Ok(next)
    }
}

/// Writes the stat rows `puts` (canonical path, stat record bytes) and removes the rows of
/// `removes` on the filesystem of key prefix `fs`, inside `wtx`; new rows go in key order
/// (random inserts leave redb's pages about half full).
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn write_stat(
    wtx: &WriteTransaction,
    fs: &[u8],
    puts: &[(&str, &[u8])],
    removes: &[&str],
) -> Result<()> {
    let mut numbers = Numbers::open(wtx)?;
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
    for path in removes {
        let (dir, name) = split(path);
        if let Some(n) = numbers.get(fs, dir)? {
            table.remove(row_key(n, name).as_slice()).db()?;
        }
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
