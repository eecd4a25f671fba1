//! Bitemporal queries and the XTDB v1 write rule over the `versions` tables.
//!
//! A version row is (eid, valid_from, tx_id) → record. `as_of(vt, tx)` is the row with the greatest
//! valid_from ≤ vt among rows with tx_id ≤ tx, a later tx winning on equal valid_from. It costs
//! one lookup in `versions_by_tx` (the prefix argmax of valid_from in tx order): when the asked
//! valid time is at or after the greatest valid_from known at that tx, that row is the answer;
//! otherwise a backward scan in valid-time order from (vt, tx) skips rows newer than tx, which
//! costs one step per correction made after `tx` at valid times in between.

use super::*;
use redb::ReadableTable;

use super::codec::VersionRec;
use super::docs::{self, DocHashes};
use crate::error::Result;

pub(crate) use crate::store::rule::Row;
use crate::store::rule::{self, Seen};

fn row(vt: i64, tx: u64, bytes: &[u8], docs: &impl DocHashes) -> Result<Row> {
    Ok(Row {
        vt,
        tx,
        rec: docs::version_rec(bytes, docs, "version record")?,
    })
}

/// The [`DocHashes`] of [`is_live`] (and of counting a history): it only asks whether a row is
/// a tombstone, which a row naming its document by number never is, so it reads no document
/// (the hash it gives is all zeros, never an answer).
pub(crate) struct LivenessOnly;

impl DocHashes for LivenessOnly {
    fn hash_at(&self, _seq: u64) -> Result<[u8; 32]> {
        Ok([0; 32])
    }
}

/// Whether entity `eid`'s version at (`vt`, `tx`) exists and is not a tombstone, reading no
/// document (a listing of every live entity: no document read, no hash recomputed, and a
/// damaged document fails the read of its file, not the listing).
pub(crate) fn is_live(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
    vt: i64,
    tx: u64,
) -> Result<bool> {
    Ok(as_of_row(versions, &LivenessOnly, by_tx, eid, vt, tx)?
        .is_some_and(|(row, _)| row.rec.object_hash.is_some()))
}

/// The row visible at (vt, tx) and whether it is the greatest valid_from known at tx (then its
/// valid_to is open).
pub(crate) fn as_of_row(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    docs: &impl DocHashes,
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
    vt: i64,
    tx: u64,
) -> Result<Option<(Row, bool)>> {
    let Some((max_vt, max_tx)) = last_by_tx(by_tx, eid, tx)? else {
        // No `versions_by_tx` row at or before tx: the entity's only version row when it has
        // none at all (format 5, see `latest_at`), read in the same step as its key.
        if has_by_tx_after(by_tx, eid, tx)? {
            return Ok(None);
        }
        let first = versions
            .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
            .db()?
            .next()
            .transpose()
            .db()?;
        return match first {
            Some((key, value)) => {
                let (_, row_vt, row_tx) = key.value();
                if row_tx <= tx && row_vt <= vt {
                    Ok(Some((row(row_vt, row_tx, value.value(), docs)?, true)))
                } else {
                    Ok(None)
                }
            }
            None => Ok(None),
        };
    };
    if max_vt <= vt {
        let found = versions.get((eid, max_vt, max_tx)).db()?;
        return match found {
            Some(bytes) => Ok(Some((row(max_vt, max_tx, bytes.value(), docs)?, true))),
            None => Err(crate::Error::corrupt(format!(
                "versions_by_tx points at a missing version row (eid {eid}, valid_from {max_vt}, tx {max_tx})"
            ))),
        };
    }
    for entry in versions
        .range((eid, i64::MIN, 0u64)..=(eid, vt, u64::MAX))
        .db()?
        .rev()
    {
        let (key, value) = entry.db()?;
        let (_, row_vt, row_tx) = key.value();
        if row_tx <= tx {
            return Ok(Some((row(row_vt, row_tx, value.value(), docs)?, false)));
        }
    }
    Ok(None)
}

/// (valid_from, tx) of the row with the greatest valid_from (then tx) among entity `eid`'s rows
/// written up to and including transaction `tx`; `None` when it had none then.
///
/// `versions_by_tx` answers, except for an entity whose only write so far wrote one row
/// (format 5 writes no `versions_by_tx` row for it, see [`omits_first_by_tx`]): an entity
/// with no `versions_by_tx` row at all has that one version row, visible from its tx on. An
/// entity with `versions_by_tx` rows has one for every write (the second write adds the
/// first's), so when none is at or before `tx`, the entity had no rows then.
pub(crate) fn latest_at(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
    tx: u64,
) -> Result<Option<(i64, u64)>> {
    if let Some(max) = last_by_tx(by_tx, eid, tx)? {
        return Ok(Some(max));
    }
    if has_by_tx_after(by_tx, eid, tx)? {
        return Ok(None);
    }
    Ok(only_row(versions, eid)?.filter(|&(_, row_tx)| row_tx <= tx))
}

/// The value of entity `eid`'s last `versions_by_tx` row at or before transaction `tx`.
pub(crate) fn last_by_tx(
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
    tx: u64,
) -> Result<Option<(i64, u64)>> {
    Ok(by_tx
        .range((eid, 0u64)..=(eid, tx))
        .db()?
        .next_back()
        .transpose()
        .db()?
        .map(|(_, max)| max.value()))
}

/// Whether entity `eid` has a `versions_by_tx` row after transaction `tx` (then, having none at
/// or before it, it had no rows at `tx`).
fn has_by_tx_after(
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
    tx: u64,
) -> Result<bool> {
    if tx == u64::MAX {
        return Ok(false);
    }
    Ok(by_tx
        .range((eid, tx + 1)..=(eid, u64::MAX))
        .db()?
        .next()
        .transpose()
        .db()?
        .is_some())
}

/// (valid_from, tx) of the first version row of entity `eid` (its only one when it has no
/// `versions_by_tx` row); `None` when it has none.
pub(crate) fn only_row(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    eid: u64,
) -> Result<Option<(i64, u64)>> {
    Ok(versions
        .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
        .db()?
        .next()
        .transpose()
        .db()?
        .map(|(key, _)| {
            let (_, vt, tx) = key.value();
            (vt, tx)
        }))
}

/// Whether a first write of transaction `tx` that writes `rows` version rows goes without its
/// `versions_by_tx` row: one row, written from `since` on (`meta[BY_TX_OMITTED_SINCE]`: 1 in a
/// store made as format 5, the first transaction after the upgrade in a format-4 store, whose
/// earlier writes all have their row; absent, never).
pub(crate) fn omits_first_by_tx(rows: usize, tx: u64, since: u64) -> bool {
    rows == 1 && tx >= since
}

/// The valid_from of the next row after `vt` visible at `tx`: the end of the version at `vt`.
pub(crate) fn valid_to(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    eid: u64,
    vt: i64,
    tx: u64,
) -> Result<Option<i64>> {
    if vt == i64::MAX {
        return Ok(None);
    }
    for entry in versions
        .range((eid, vt + 1, 0u64)..=(eid, i64::MAX, u64::MAX))
        .db()?
    {
        let (key, _) = entry.db()?;
        let (_, row_vt, row_tx) = key.value();
        if row_tx <= tx {
            return Ok(Some(row_vt));
        }
    }
    Ok(None)
}

/// Every row of `eid` with valid_from in `[from, to)` and tx ≤ `tx`, in valid-time order (then tx
/// order); without corrections only the last row of each valid_from is kept.
pub(crate) fn history_rows(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    docs: &impl DocHashes,
    eid: u64,
    from: i64,
    to: i64,
    tx: u64,
    with_corrections: bool,
) -> Result<Vec<Row>> {
    let mut rows: Vec<Row> = Vec::new();
    if from >= to {
        return Ok(rows);
    }
    for entry in versions.range((eid, from, 0u64)..(eid, to, 0u64)).db()? {
        let (key, value) = entry.db()?;
        let (_, row_vt, row_tx) = key.value();
        if row_tx > tx {
            continue;
        }
        let new = row(row_vt, row_tx, value.value(), docs)?;
        if !with_corrections
            && let Some(previous) = rows.last_mut()
            && previous.vt == row_vt
        {
            *previous = new;
            continue;
        }
        rows.push(new);
    }
    Ok(rows)
}

/// Visible rows (latest tx, no corrections) with valid_from ≤ `end`, newest valid time first,
/// stopping after the first one at or before `start`.
fn visible_desc_until(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    docs: &impl DocHashes,
    eid: u64,
    start: i64,
    end: i64,
) -> Result<Vec<Row>> {
    let mut rows: Vec<Row> = Vec::new();
    for entry in versions
        .range((eid, i64::MIN, 0u64)..=(eid, end, u64::MAX))
        .db()?
        .rev()
    {
        let (key, value) = entry.db()?;
        let (_, row_vt, row_tx) = key.value();
        if rows.last().is_some_and(|r| r.vt == row_vt) {
            continue; // an older correction at the same valid time
        }
        if rows.last().is_some_and(|r| r.vt <= start) {
            break;
        }
        rows.push(row(row_vt, row_tx, value.value(), docs)?);
    }
    Ok(rows)
}

/// The rows one put or delete writes, XTDB v1's rule, as (valid_from, record).
///
/// With an end: the new value at `start` and at every visible change point in (start, end), and
/// at `end` the value that was visible there (a tombstone when none), unless a row already
/// starts at `end`. Without an end: the new value at `start` and at every following change
/// point that belongs to the same version as the one visible at `start` (same tx, same
/// document, not a restore), so a put over a ranged put replaces the whole range.
///
/// Deviation from XTDB: the restoring row at `end` carries the writing transaction, not the
/// restored row's (same answers for every query; keeps rows append-only in tx order).
///
/// Every row planned gets `tx_after` for the writing transaction's time `tx_time` and the
/// writing op's index.
pub(crate) fn plan_write(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    docs: &impl DocHashes,
    eid: u64,
    start: i64,
    end: Option<i64>,
    new: &VersionRec,
    tx_time: i64,
) -> Result<Vec<(i64, VersionRec)>> {
    Ok(match end {
        Some(end) => {
            let before = visible_desc_until(versions, docs, eid, start, end)?;
            rule::plan_write(
                Seen::Ranged {
                    end,
                    before: &before,
                },
                start,
                new,
                tx_time,
            )
        }
        None => {
            let last = versions
                .range((eid, i64::MIN, 0u64)..=(eid, start, u64::MAX))
                .db()?
                .next_back()
                .transpose()
                .db()?;
            let visible = match last {
                Some((key, value)) => {
                    let (_, row_vt, row_tx) = key.value();
                    Some(row(row_vt, row_tx, value.value(), docs)?)
                }
                None => None,
            };
            let after = match &visible {
                Some(_) => history_rows(versions, docs, eid, start + 1, i64::MAX, u64::MAX, false)?,
                None => Vec::new(),
            };
            rule::plan_write::<Row>(
                Seen::Open {
                    visible: visible.as_ref(),
                    after: &after,
                },
                start,
                new,
                tx_time,
            )
        }
    })
}
