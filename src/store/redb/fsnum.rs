//! Filesystem numbers (store format 5): the `paths` and `stat_cache` keys of a filesystem the
//! store registered carry `codec::fs_number_key` (a tag byte and a small number, 2–6 bytes)
//! instead of the filesystem's 33-byte `codec::id_key`.
//!
//! `filesystems` maps a filesystem's id key to its number and `filesystem_ids` maps it back. A
//! filesystem that already had rows when a format-4 store was upgraded is registered with
//! number [`LONG_KEYS`] and keeps its long keys; a filesystem with no number at all (a format-4
//! store opened read-only) has long keys too. So a reader asks `filesystems` first and uses
//! whichever key it says. The log is unchanged (op bodies keep the filesystem id): a rebuild
//! replays it through the same numbers, and fsck checks that the two tables agree.

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::StorageResult as _;
use super::codec;
use super::tables::{FILESYSTEM_IDS, FILESYSTEMS, PATHS, STAT_CACHE};
use crate::error::{Error, Result};

/// The number of a filesystem whose keys stay the long `codec::id_key` (it had rows when its
/// store was upgraded from format 4).
pub(crate) const LONG_KEYS: u32 = 0;

/// The key prefix of filesystem `id` for a store whose `filesystems` table is `table` (`None`:
/// the table does not exist, a format-4 file opened read-only).
pub(crate) fn key_in(
    table: Option<&impl ReadableTable<&'static [u8], u32>>,
    id: &str,
) -> Result<Vec<u8>> {
    let long = codec::id_key(id);
    let number = match table {
        Some(table) => table.get(long.as_slice()).db()?.map(|v| v.value()),
        None => None,
    };
    Ok(match number {
        Some(n) if n != LONG_KEYS => codec::fs_number_key(n),
        _ => long,
    })
}

/// The key prefix of filesystem `id` as the read transaction `rtx` sees the store.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn read_key(rtx: &ReadTransaction, id: &str) -> Result<Vec<u8>> {
    match rtx.open_table(FILESYSTEMS) {
        Ok(table) => key_in(Some(&table), id),
        Err(redb::TableError::TableDoesNotExist(_)) => key_in(None::<&FsTable>, id),
        Err(e) => Err(Error::storage("opening filesystems", e)),
    }
}

/// A read-only `filesystems` table (for naming the type of an absent one).
type FsTable = redb::ReadOnlyTable<&'static [u8], u32>;

/// The key prefix of filesystem `id` for rows written in `wtx`, registering the filesystem
/// with the next number when it has none (`register`; else its rows get long keys). Opens the
/// two tables for the call only, so that no other holder of them is disturbed.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn write_key(wtx: &WriteTransaction, id: &str, register: bool) -> Result<Vec<u8>> {
    let long = codec::id_key(id);
    let mut numbers = wtx.open_table(FILESYSTEMS).db()?;
    let known = numbers.get(long.as_slice()).db()?.map(|v| v.value());
    match known {
        Some(LONG_KEYS) => Ok(long),
        Some(n) => Ok(codec::fs_number_key(n)),
        None if !register => Ok(long),
        None => {
            let mut ids = wtx.open_table(FILESYSTEM_IDS).db()?;
            let next = ids
                .last()
                .db()?
                .map_or(1, |(k, _)| k.value().saturating_add(1));
            if next == u32::MAX {
                return Ok(long);
            }
            numbers.insert(long.as_slice(), next).db()?;
            ids.insert(next, long.as_slice()).db()?;
            Ok(codec::fs_number_key(next))
        }
    }
}

/// Registers every filesystem that has rows in `paths` or `stat_cache` (all with long keys: the
/// file is format 4) with [`LONG_KEYS`], so that its rows keep their keys; at the upgrade to
/// format 5. One seek per filesystem.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn register_long(wtx: &WriteTransaction) -> Result<()> {
    let mut found = std::collections::BTreeSet::new();
    {
        let table = wtx.open_table(PATHS).db()?;
        distinct_prefixes(&table, &mut found)?;
    }
    {
        let table = wtx.open_table(STAT_CACHE).db()?;
        distinct_prefixes(&table, &mut found)?;
    }
    let mut numbers = wtx.open_table(FILESYSTEMS).db()?;
    wtx.open_table(FILESYSTEM_IDS).db()?;
    for fs in found {
        if numbers.get(fs.as_slice()).db()?.is_none() {
            numbers.insert(fs.as_slice(), LONG_KEYS).db()?;
        }
    }
    Ok(())
}

/// Adds to `out` the distinct filesystem key prefixes of a `(fs key, path)`-keyed table.
fn distinct_prefixes<V: redb::Value + 'static>(
    table: &impl ReadableTable<(&'static [u8], &'static str), V>,
    out: &mut std::collections::BTreeSet<Vec<u8>>,
) -> Result<()> {
    let mut from: Vec<u8> = Vec::new();
    loop {
        let next = table
            .range((from.as_slice(), "")..)
            .db()?
            .next()
            .transpose()
            .db()?
            .map(|(k, _)| k.value().0.to_vec());
        let Some(fs) = next else {
            return Ok(());
        };
        // The least key after every key of this filesystem: its prefix and a zero byte.
        from = fs.clone();
        from.push(0);
        out.insert(fs);
    }
}

/// Copies the store's two filesystem tables (as `rtx` sees them) into `wtx`: a replay or a
/// copy uses the store's numbers.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn copy(rtx: &ReadTransaction, wtx: &WriteTransaction) -> Result<()> {
    if let Ok(from) = rtx.open_table(FILESYSTEMS) {
        let mut to = wtx.open_table(FILESYSTEMS).db()?;
        for entry in from.iter().db()? {
            let (k, v) = entry.db()?;
            to.insert(k.value(), v.value()).db()?;
        }
    }
    if let Ok(from) = rtx.open_table(FILESYSTEM_IDS) {
        let mut to = wtx.open_table(FILESYSTEM_IDS).db()?;
        for entry in from.iter().db()? {
            let (k, v) = entry.db()?;
            to.insert(k.value(), v.value()).db()?;
        }
    }
    Ok(())
}

/// What disagrees between `filesystems` and `filesystem_ids` (each numbered filesystem's
/// number leads back to it, and each number to a filesystem with that number), as (subject,
/// problem) pairs.
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn disagreements(rtx: &ReadTransaction) -> Result<Vec<(String, String)>> {
    let (Ok(numbers), Ok(ids)) = (rtx.open_table(FILESYSTEMS), rtx.open_table(FILESYSTEM_IDS))
    else {
        return Ok(Vec::new());
    };
    let name =
        |key: &[u8]| codec::id_of_key(key, "filesystem id").unwrap_or_else(|_| hex::encode(key));
    let mut out = Vec::new();
    for entry in numbers.iter().db()? {
        let (k, v) = entry.db()?;
        let (key, n) = (k.value(), v.value());
        if n == LONG_KEYS {
            continue;
        }
        let back = ids.get(n).db()?.map(|v| v.value().to_vec());
        if back.as_deref() != Some(key) {
            out.push((
                format!("filesystem {}", name(key)),
                format!("filesystems gives it number {n}, which filesystem_ids does not give back"),
            ));
        }
    }
    for entry in ids.iter().db()? {
        let (k, v) = entry.db()?;
        let (n, key) = (k.value(), v.value());
        let forth = numbers.get(key).db()?.map(|v| v.value());
        if forth != Some(n) || n == LONG_KEYS {
            out.push((
                format!("filesystem number {n}"),
                format!(
                    "filesystem_ids names {} for it, which filesystems does not number so",
                    name(key)
                ),
            ));
        }
    }
    Ok(out)
}
