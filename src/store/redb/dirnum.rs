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
//! From store format 10 the files' paths are keyed the same way: `paths_by_dir` maps a
//! directory number and a name to the file's eid where `paths` held the filesystem key and the
//! whole path ([`PathRows`] reads either; the first read-write open moves old rows,
//! [`move_old_path_rows`]). Both tables share the numbers.
//!
//! A directory's two rows live only while some `stat_by_dir` or `paths_by_dir` row uses its
//! number: a write that removes the last one removes them too ([`DirTables`]; a subdirectory
//! has its own rows and number, and a listing finds it by its own path, so a parent goes even
//! while children stay).
//! Numbers are never given twice (`meta[dir_numbers_from]`).

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::StorageResult as _;
use super::tables::{
    DIR_NUMBERS_FROM, DIRECTORIES, DIRECTORY_PATHS, META, PATHS, PATHS_BY_DIR, STAT_BY_DIR,
    STAT_CACHE,
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

/// Writes the stat rows `puts` and removes the rows of `removes` on the filesystem of key prefix
/// `fs` ([`DirTables::write_stat`]), inside `wtx`, opening the tables here.
///
/// # Errors
/// As [`DirTables::write_stat`].
pub(crate) fn write_stat(
    wtx: &WriteTransaction,
    fs: &[u8],
    puts: &[(&str, &[u8])],
    removes: &[&str],
) -> Result<()> {
    let mut meta = wtx.open_table(META).db()?;
    let mut tables = DirTables::open(wtx, &meta)?;
    tables.write_stat(fs, puts, removes)?;
    tables.save(&mut meta)
}

/// The tables keyed by directory number in a write transaction: the two directory tables, the
/// stat cache (`stat_by_dir`, format 9) and the files' paths (`paths_by_dir`, format 10). A
/// directory's rows live while a row of either table uses its number.
pub(crate) struct DirTables<'t> {
    wtx: &'t WriteTransaction,
    numbers: Numbers<'t>,
    stat: redb::Table<'t, &'static [u8], &'static [u8]>,
    paths: redb::Table<'t, &'static [u8], u64>,
    /// `meta[DIR_NUMBERS_FROM]` to write ([`DirTables::save`]), when a write raised it.
    raised: Option<u64>,
}

impl<'t> DirTables<'t> {
    /// Opens the tables in `wtx`, whose `meta` table is `meta`.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails; [`Error::Corrupt`] when `meta[DIR_NUMBERS_FROM]` is
    /// not a number.
    pub(crate) fn open(wtx: &'t WriteTransaction, meta: &MetaTable<'_>) -> Result<Self> {
        let from = super::read_counter(meta, DIR_NUMBERS_FROM)?;
        Ok(Self {
            wtx,
            numbers: Numbers::open(wtx, from)?,
            stat: wtx.open_table(STAT_BY_DIR).db()?,
            paths: wtx.open_table(PATHS_BY_DIR).db()?,
            raised: None,
        })
    }

    /// Writes `meta[DIR_NUMBERS_FROM]` when a write freed the greatest number.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn save(&mut self, meta: &mut MetaTable<'_>) -> Result<()> {
        if let Some(next) = self.raised.take() {
            meta.insert(DIR_NUMBERS_FROM, next.to_le_bytes().as_slice())
                .db()?;
        }
        Ok(())
    }

    /// The numbers of the directories of `paths` (canonical paths) on the filesystem of key
    /// prefix `fs`, registering new ones in path order (`directories` then takes them in key
    /// order, and `directory_paths` appends), with each path's row key, in key order.
    fn keys_of<'p, V>(
        &mut self,
        fs: &[u8],
        rows: impl IntoIterator<Item = (&'p str, V)>,
    ) -> Result<Vec<(Vec<u8>, V)>> {
        let mut in_order: Vec<(&str, V)> = rows.into_iter().collect();
        in_order.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut known: Option<(&str, u32)> = None;
        let mut out = Vec::with_capacity(in_order.len());
        for (path, value) in in_order {
            let (dir, name) = split(path);
            let n = match known {
                Some((d, n)) if d == dir => n,
                _ => {
                    let n = self.numbers.get_or_add(fs, dir)?;
                    known = Some((dir, n));
                    n
                }
            };
            out.push((row_key(n, name), value));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Writes the stat rows `puts` (canonical path, stat record bytes) and removes the rows of
    /// `removes` on the filesystem of key prefix `fs`; new rows go in key order (random inserts
    /// leave redb's pages about half full). A directory of `removes` left with no row in either
    /// table loses its two directory rows (one range probe per table and directory).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails; [`Error::Invariant`] when every number is taken.
    pub(crate) fn write_stat(
        &mut self,
        fs: &[u8],
        puts: &[(&str, &[u8])],
        removes: &[&str],
    ) -> Result<()> {
        let rows = self.keys_of(fs, puts.iter().map(|(p, v)| (*p, *v)))?;
        for (key, value) in rows {
            self.stat.insert(key.as_slice(), value).db()?;
        }
        let mut touched: BTreeMap<u32, &str> = BTreeMap::new();
        let mut known: rustc_hash::FxHashMap<&str, Option<u32>> = Default::default();
        for path in removes {
            let (dir, name) = split(path);
            let n = match known.get(dir) {
                Some(&n) => n,
                None => {
                    let n = self.numbers.get(fs, dir)?;
                    known.insert(dir, n);
                    n
                }
            };
            if let Some(n) = n {
                self.stat.remove(row_key(n, name).as_slice()).db()?;
                touched.insert(n, dir);
            }
        }
        self.free_unused(fs, touched)
    }

    /// The eid the `paths_by_dir` row of `path` on the filesystem of key prefix `fs` holds.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn path_eid(&self, fs: &[u8], path: &str) -> Result<Option<u64>> {
        let (dir, name) = split(path);
        let Some(n) = self.numbers.get(fs, dir)? else {
            return Ok(None);
        };
        Ok(self
            .paths
            .get(row_key(n, name).as_slice())
            .db()?
            .map(|v| v.value()))
    }

    /// Writes the `paths_by_dir` rows `rows` (filesystem key prefix, canonical path, eid), in
    /// key order.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails; [`Error::Invariant`] when every number is taken.
    pub(crate) fn put_paths(&mut self, rows: &[(Vec<u8>, String, u64)]) -> Result<()> {
        let mut by_fs: BTreeMap<&[u8], Vec<(&str, u64)>> = BTreeMap::new();
        for (fs, path, eid) in rows {
            by_fs
                .entry(fs.as_slice())
                .or_default()
                .push((path.as_str(), *eid));
        }
        for (fs, rows) in by_fs {
            for (key, eid) in self.keys_of(fs, rows)? {
                self.paths.insert(key.as_slice(), eid).db()?;
            }
        }
        Ok(())
    }

    /// Removes the `paths_by_dir` row of `path` on the filesystem of key prefix `fs`, and its
    /// directory's rows when no row of either table uses it any more; and its row in the
    /// whole-path `paths` an upgrade that could not read it left beside the new table (read
    /// beside it until a rebuild, where the file would stay listed).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn remove_path(&mut self, fs: &[u8], path: &str) -> Result<()> {
        let old = self
            .wtx
            .list_tables()
            .db()?
            .any(|table| redb::TableHandle::name(&table) == redb::TableHandle::name(&PATHS));
        if old {
            self.wtx.open_table(PATHS).db()?.remove((fs, path)).db()?;
        }
        let (dir, name) = split(path);
        if let Some(n) = self.numbers.get(fs, dir)? {
            self.paths.remove(row_key(n, name).as_slice()).db()?;
            self.free_unused(fs, BTreeMap::from([(n, dir)]))?;
        }
        Ok(())
    }

    /// Whether a row of `table` uses directory number `n`.
    fn used_in<V: redb::Value + 'static>(
        table: &redb::Table<'t, &'static [u8], V>,
        n: u32,
    ) -> Result<bool> {
        let from = number_prefix(n);
        let to = prefix_end(&from);
        Ok(table
            .range(from.as_slice()..to.as_slice())
            .db()?
            .next()
            .is_some())
    }

    /// Frees each directory of `touched` (number → path, on the filesystem of key prefix `fs`)
    /// that no row of either table uses; when it held the greatest number,
    /// `meta[DIR_NUMBERS_FROM]` keeps that number from being given again.
    fn free_unused(&mut self, fs: &[u8], touched: BTreeMap<u32, &str>) -> Result<()> {
        let mut freed = None;
        for (n, dir) in touched {
            if !Self::used_in(&self.stat, n)? && !Self::used_in(&self.paths, n)? {
                self.numbers.free(fs, dir, n)?;
                freed = Some(n);
            }
        }
        // `touched` goes in number order: `freed` is the greatest number freed.
        if let Some(n) = freed
            && self.numbers.last()?.is_none_or(|last| last < n)
            && u64::from(n) >= self.numbers.from
        {
            let next = u64::from(n) + 1;
            self.numbers.from = next;
            self.numbers.next = None;
            self.raised = Some(next);
        }
        Ok(())
    }
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

/// An old `paths` row: filesystem key, whole path, eid.
pub(crate) type OldPathRow = (Vec<u8>, String, u64);

/// The whole-path `paths` table of a store before format 10.
pub(crate) type OldPathTable = redb::ReadOnlyTable<(&'static [u8], &'static str), u64>;

/// The rows of an old `paths` table.
fn old_path_rows(
    table: &impl ReadableTable<(&'static [u8], &'static str), u64>,
) -> Result<Vec<OldPathRow>> {
    let mut rows = Vec::new();
    for entry in table.iter().db()? {
        let (key, value) = entry.db()?;
        let (fs, path) = key.value();
        rows.push((fs.to_vec(), path.to_string(), value.value()));
    }
    Ok(rows)
}

/// The rows of the whole-path `paths` table of a store before format 10 as `rtx` sees them,
/// read for its upgrade (none when it has no such table); `None` when the table cannot be read
/// through (damage; a key whose path is not UTF-8 makes the storage engine panic, caught here
/// without marking the handle). The upgrade then leaves the old table where it is, read beside
/// the new one, so that a damaged row does not stop every read-write open, `fsck --repair`
/// included: fsck names it, and the rebuild writes every row anew.
pub(crate) fn read_old_path_rows(rtx: &ReadTransaction) -> Option<Vec<OldPathRow>> {
    let quiet = std::sync::atomic::AtomicBool::new(false);
    super::guard::guarded(
        &quiet,
        "reading the paths of format 9",
        || match open_if_any(rtx, PATHS)? {
            Some(table) => old_path_rows(&table),
            None => Ok(Vec::new()),
        },
    )
    .ok()
}

/// Moves `rows`, every row of the whole-path `paths` of a store before format 10 (as
/// [`read_old_path_rows`] read them), into `paths_by_dir` and deletes the old table, inside
/// `wtx`: at the upgrade. `None` (unreadable): nothing moves and the old table stays, read
/// beside the new one until a rebuild. Returns how many rows moved.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn move_old_path_rows(
    wtx: &WriteTransaction,
    rows: Option<Vec<OldPathRow>>,
) -> Result<u64> {
    let Some(rows) = rows else {
        return Ok(0);
    };
    let moved = write_old_path_rows(wtx, &rows)?;
    wtx.delete_table(PATHS).db()?;
    Ok(moved)
}

/// Writes old `paths` rows into `paths_by_dir`.
fn write_old_path_rows(wtx: &WriteTransaction, rows: &[OldPathRow]) -> Result<u64> {
    let mut meta = wtx.open_table(META).db()?;
    let mut tables = DirTables::open(wtx, &meta)?;
    tables.put_paths(rows)?;
    tables.save(&mut meta)?;
    Ok(rows.len() as u64)
}

/// Moves the whole-path `paths` rows `wtx` holds (a backup of a store before format 10, copied
/// as it is) into its `paths_by_dir`, as the upgrade would, and deletes the old table.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn move_paths_within(wtx: &WriteTransaction) -> Result<u64> {
    let rows = {
        let table = wtx.open_table(PATHS).db()?;
        old_path_rows(&table)?
    };
    let moved = write_old_path_rows(wtx, &rows)?;
    wtx.delete_table(PATHS).db()?;
    Ok(moved)
}

/// The files' paths as a read transaction sees them: `paths_by_dir` with the directory numbers
/// (format 10), and the whole-path `paths` of a store before format 10 read as it is (or one
/// whose upgrade could not read it through).
pub(crate) struct PathRows {
    old: Option<OldPathTable>,
    rows: Option<redb::ReadOnlyTable<&'static [u8], u64>>,
    dirs: Option<redb::ReadOnlyTable<(&'static [u8], &'static str), u32>>,
}

impl PathRows {
    /// Opens the tables in `rtx`: a store without the old table must have the new ones.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails or a table is missing.
    pub(crate) fn open(rtx: &ReadTransaction) -> Result<Self> {
        let old = open_if_any(rtx, PATHS)?;
        let (rows, dirs) = if old.is_some() {
            (
                open_if_any(rtx, PATHS_BY_DIR)?,
                open_if_any(rtx, DIRECTORIES)?,
            )
        } else {
            (
                Some(rtx.open_table(PATHS_BY_DIR).db()?),
                Some(rtx.open_table(DIRECTORIES).db()?),
            )
        };
        Ok(Self { old, rows, dirs })
    }

    /// The eid of the file at `path` on the filesystem of key prefix `fs`, if listed.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn get(&self, fs: &[u8], path: &str) -> Result<Option<u64>> {
        if let (Some(rows), Some(dirs)) = (&self.rows, &self.dirs) {
            let (dir, name) = split(path);
            if let Some(n) = dirs.get((fs, dir)).db()?.map(|v| v.value())
                && let Some(eid) = rows.get(row_key(n, name).as_slice()).db()?
            {
                return Ok(Some(eid.value()));
            }
        }
        match &self.old {
            Some(old) => Ok(old.get((fs, path)).db()?.map(|v| v.value())),
            None => Ok(None),
        }
    }

    /// Gives each (path, eid) on the filesystem of key prefix `fs` at `prefix` or below it
    /// (whole path segments) to `visit`, directory by directory (not in path order).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a key holds no name; the first error of `visit`.
    pub(crate) fn for_each_under(
        &self,
        fs: &[u8],
        prefix: &str,
        visit: &mut dyn FnMut(&str, u64) -> Result<()>,
    ) -> Result<()> {
        if let Some(old) = &self.old {
            super::lookup::for_each_under(old, fs, prefix, |path, eid| visit(path, eid))?;
        }
        if let (Some(rows), Some(dirs)) = (&self.rows, &self.dirs) {
            for_each_under(dirs, rows, fs, prefix, |path, eid| visit(path, eid))?;
        }
        Ok(())
    }

    /// Every row as (filesystem key, path, eid), `problems` naming the keys of `paths_by_dir`
    /// that hold no directory number and name, or a number `directory_paths` (`numbers`) does
    /// not know.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn all(
        &self,
        numbers: Option<&redb::ReadOnlyTable<u32, (&'static [u8], &'static str)>>,
        problems: &mut Vec<String>,
    ) -> Result<Vec<OldPathRow>> {
        let mut out = match &self.old {
            Some(old) => old_path_rows(old)?,
            None => Vec::new(),
        };
        if let Some(rows) = &self.rows {
            for entry in rows.iter().db()? {
                let (key, value) = entry.db()?;
                let key = key.value();
                let Some((n, name)) = split_row_key(key) else {
                    problems.push(format!(
                        "key {} holds no directory number and file name",
                        hex::encode(key)
                    ));
                    continue;
                };
                let dir = match numbers {
                    Some(numbers) => numbers.get(n).db()?.map(|v| {
                        let (fs, dir) = v.value();
                        (fs.to_vec(), dir.to_string())
                    }),
                    None => None,
                };
                match dir {
                    Some((fs, dir)) => out.push((fs, format!("{dir}{name}"), value.value())),
                    None => problems.push(format!(
                        "{name:?} names directory number {n}, which directory_paths does not know"
                    )),
                }
            }
        }
        Ok(out)
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

    /// A file put with its stat entry: both tables key it by its directory's number.
    fn put_file(store: &RedbStore, path: &str) -> Result<String> {
        use crate::object::{FilesystemSource, Object};
        let object = Object::file_bytes(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            path.as_bytes().to_vec(),
        )?;
        let id = object.id().to_string();
        store.transact(vec![Op::put(object)], Origin::Indexer)?;
        Ok(id)
    }

    /// The paths (format 10) share the directory numbers with the stat cache: a directory
    /// stays while either table has a row in it, and goes (its number never given again) with
    /// the last one of both; listings under a prefix come in path order.
    #[test]
    fn a_directory_lives_while_a_path_or_a_stat_row_uses_it() -> Result<()> {
        let (_dir, store) = new_store()?;
        let a = put_file(&store, "/q/a/x")?;
        put_file(&store, "/q/b/y")?;
        put_file(&store, "/q/a/sub/z")?;
        assert_eq!(
            names(&directories(&store)?),
            ["/q/a/", "/q/a/sub/", "/q/b/"]
        );
        // The stat cache takes the paths' numbers, and its removal leaves the paths' rows.
        update(&store, &["/q/a/x", "/q/c/w"], &[])?;
        assert_eq!(
            names(&directories(&store)?),
            ["/q/a/", "/q/a/sub/", "/q/b/", "/q/c/"]
        );
        update(&store, &[], &["/q/a/x", "/q/c/w"])?;
        assert_eq!(
            names(&directories(&store)?),
            ["/q/a/", "/q/a/sub/", "/q/b/"]
        );
        let listed: Vec<String> = store
            .paths_under("fs", "/q")?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(listed, ["/q/a/sub/z", "/q/a/x", "/q/b/y"], "in path order");
        assert_eq!(
            store.indexed_paths_under("fs", "/q/a")?,
            ["/q/a/sub/z", "/q/a/x"]
        );
        assert_eq!(store.entity_at_path("fs", "/q/a/x")?, Some(a.clone()));
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        // Evicting the file: its path goes, and its directory with it once the stat cache has
        // no row there either.
        update(&store, &["/q/a/x"], &[])?;
        store.transact(vec![Op::Evict { entity: a }], Origin::Cli)?;
        assert_eq!(names(&directories(&store)?), ["/q/a/sub/", "/q/b/"]);
        assert_eq!(store.entity_at_path("fs", "/q/a/x")?, None);
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        // A new directory takes a number after the freed one.
        put_file(&store, "/q/d/v")?;
        let dirs = directories(&store)?;
        assert_eq!(dirs.last(), Some(&("/q/d/".to_string(), 5)));
        // The rebuild renumbers from the log: the paths' directories come back.
        store.fsck_rebuild()?;
        assert_eq!(
            names(&directories(&store)?),
            ["/q/a/sub/", "/q/b/", "/q/d/"]
        );
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        Ok(())
    }

    /// A store whose upgrade could not read its old whole-path `paths` keeps that table beside
    /// `paths_by_dir` (rows of the files made before the upgrade) until a rebuild: evicting
    /// such a file must take its old row too, or every listing that reaches it shows the file
    /// evicted as damaged.
    #[test]
    fn an_evict_removes_the_row_an_old_paths_table_kept() -> Result<()> {
        let (_dir, store) = new_store()?;
        let a = put_file(&store, "/q/a")?;
        put_file(&store, "/q/b")?;
        // The layout an upgrade that could not read `paths` leaves: the file made before it
        // listed only in the old table.
        let wtx = store.begin_write()?;
        {
            let fs = super::super::fsnum::write_key(&wtx, "fs", false)?;
            let mut tables = {
                let meta = wtx.open_table(META).db()?;
                DirTables::open(&wtx, &meta)?
            };
            let eid = tables
                .path_eid(&fs, "/q/a")?
                .ok_or_else(|| Error::invariant("a path row"))?;
            tables
                .paths
                .remove(row_key(tables.numbers.get(&fs, "/q/")?.unwrap_or(0), "a").as_slice())
                .db()?;
            drop(tables);
            wtx.open_table(PATHS)
                .db()?
                .insert((fs.as_slice(), "/q/a"), eid)
                .db()?;
        }
        wtx.commit().db()?;
        assert_eq!(store.entity_at_path("fs", "/q/a")?, Some(a.clone()));
        store.transact(vec![Op::Evict { entity: a }], Origin::Cli)?;
        assert_eq!(store.entity_at_path("fs", "/q/a")?, None);
        let listed: Vec<String> = store
            .paths_under("fs", "/q")?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(listed, ["/q/b"]);
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
