//! XTDB v1's write rule over one entity's version rows, for both backends: each backend reads
//! the rows a write can touch its own way ([`Seen`]) and [`plan_write`] decides the rows the
//! write adds.

use super::Timestamp;
use super::codec::{OpRec, VersionRec};
use crate::error::{Error, Result};

/// One version row: valid_from µs, writing tx, record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// valid_from in µs.
    pub vt: i64,
    /// The writing transaction.
    pub tx: u64,
    /// The record.
    pub rec: VersionRec,
}

impl Row {
    /// The writing transaction's time in µs.
    pub fn tx_time(&self) -> i64 {
        self.vt.saturating_add(self.rec.tx_after)
    }
}

/// Checks version row `row` of entity `id` against the log: `tx_time`, the time its
/// transaction's record holds, and `op`, the body of the op that wrote it (`None`: evicted),
/// which must write this entity with this row's values.
///
/// # Errors
/// [`Error::Corrupt`] naming the row when any of that fails.
pub(crate) fn check_row(id: &str, row: &Row, tx_time: i64, op: Option<&OpRec>) -> Result<()> {
    let wrong = |what: &str| {
        Error::corrupt(format!(
            "the version of {id} at {} (tx {}) {what}; run `strata fsck`",
            Timestamp::saturating_from_micros(row.vt),
            row.tx
        ))
    };
    if tx_time != row.tx_time() {
        return Err(wrong("disagrees with its transaction's time"));
    }
    let Some(op) = op else {
        return Err(wrong("was written by an op that was evicted"));
    };
    let OpRec::Write(w) = op else {
        return Err(wrong("points at an op that is not a put or a delete"));
    };
    if w.entity.0 != id {
        return Err(wrong("points at an op on another entity"));
    }
    let agrees = if row.rec.restored {
        w.valid_to == Some(row.vt)
    } else {
        w.object_hash == row.rec.object_hash
            && w.size == row.rec.size
            && w.spelling == row.rec.spelling
            && w.content_omitted == row.rec.content_omitted
            && row.vt >= w.valid_from
            && w.valid_to.is_none_or(|to| row.vt < to)
    };
    if !agrees {
        return Err(wrong("disagrees with the op that wrote it"));
    }
    Ok(())
}

/// What the write rule reads of an entity's rows.
pub(crate) enum Seen<'a, R> {
    /// A write over `[start, end)`: the visible rows (latest tx, no corrections) with
    /// valid_from ≤ `end`, newest valid time first, down to the first one at or before
    /// `start`.
    Ranged {
        /// The range's end.
        end: i64,
        /// Those rows.
        before: &'a [R],
    },
    /// A write from `start` on: the row visible at `start` and, when there is one, the visible
    /// rows after `start` in valid-time order.
    Open {
        /// The row visible at `start`.
        visible: Option<&'a Row>,
        /// The rows after `start`.
        after: &'a [Row],
    },
}

/// What [`plan_write`] plans for an entity without rows (one its transaction created), so a
/// backend need not read its versions to place the first ones.
pub(crate) fn plan_first_write(
    start: i64,
    end: Option<i64>,
    new: &VersionRec,
    tx_time: i64,
) -> Vec<(i64, VersionRec)> {
    let seen = match end {
        Some(end) => Seen::Ranged { end, before: &[] },
        None => Seen::Open {
            visible: None,
            after: &[],
        },
    };
    plan_write::<Row>(seen, start, new, tx_time)
}

/// The rows one put or delete writes, as (valid_from, record), in valid-time order. Over
/// `[start, end)`: the new value at `start` and at every change point inside the range, and
/// at `end` the value that was visible there (a tombstone when none), unless a row already
/// starts at `end`. Without an end: the new value at `start` and at every following change
/// point that belongs to the same version as the one visible at `start` (same tx, same
/// document, not a restore), so a put over a ranged put replaces the whole range. Every row
/// gets `tx_after` for the writing transaction's time `tx_time` and the writing op's index.
pub(crate) fn plan_write<R: std::borrow::Borrow<Row>>(
    seen: Seen<'_, R>,
    start: i64,
    new: &VersionRec,
    tx_time: i64,
) -> Vec<(i64, VersionRec)> {
    let mut out = vec![(start, new.clone())];
    match seen {
        Seen::Ranged { end, before } => {
            for r in before
                .iter()
                .map(|r| r.borrow())
                .take_while(|r| r.vt > start)
            {
                if r.vt != end {
                    out.push((r.vt, new.clone()));
                }
            }
            let restore = match before.first().map(|r| r.borrow()) {
                Some(r) if r.vt == end => None,
                Some(r) => Some(VersionRec {
                    restored: true,
                    ..r.rec.clone()
                }),
                None => Some(VersionRec {
                    object_hash: None,
                    tx_after: 0,
                    op: new.op,
                    restored: true,
                    size: None,
                    spelling: None,
                    content_omitted: None,
                }),
            };
            if let Some(rec) = restore {
                out.push((end, rec));
            }
        }
        Seen::Open { visible, after } => {
            if let Some(visible) = visible {
                for r in after.iter().take_while(|r| {
                    r.tx == visible.tx
                        && r.rec.object_hash == visible.rec.object_hash
                        && !r.rec.restored
                }) {
                    out.push((r.vt, new.clone()));
                }
            }
        }
    }
    out.sort_by_key(|(vt, _)| *vt);
    for (vt, rec) in &mut out {
        rec.tx_after = tx_time.saturating_sub(*vt);
        rec.op = new.op;
    }
    out
}
