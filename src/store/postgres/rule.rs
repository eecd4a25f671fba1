//! The bitemporal rules over one entity's version rows held in memory, in (valid_from, tx)
//! order: the rows XTDB v1's write rule (`store::rule`, shared with redb) reads from the window
//! of rows a write can touch, and the history selection. The database reads the rows; these
//! functions select.

use super::super::codec::VersionRec;

pub(crate) use crate::store::rule::Row;
use crate::store::rule::Seen;

/// Rows with valid_from in `[from, to)` and tx ≤ `tx`, in order; without corrections only the
/// last row of each valid_from is kept.
pub(crate) fn history_rows(
    rows: &[Row],
    from: i64,
    to: i64,
    tx: u64,
    with_corrections: bool,
) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.vt >= from && r.vt < to && r.tx <= tx)
    {
        if !with_corrections
            && let Some(previous) = out.last_mut()
            && previous.vt == r.vt
        {
            *previous = r.clone();
            continue;
        }
        out.push(r.clone());
    }
    out
}

/// Visible rows (latest tx, no corrections) with valid_from ≤ `end`, newest valid time first,
/// stopping after the first one at or before `start`.
fn visible_desc_until(rows: &[Row], start: i64, end: i64) -> Vec<&Row> {
    let mut out: Vec<&Row> = Vec::new();
    for r in rows.iter().rev().filter(|r| r.vt <= end) {
        if out.last().is_some_and(|l| l.vt == r.vt) {
            continue;
        }
        if out.last().is_some_and(|l| l.vt <= start) {
            break;
        }
        out.push(r);
    }
    out
}

/// The rows one put or delete writes (XTDB v1's rule, as redb's `plan_write`), as (valid_from,
/// record). `window` holds every row of the entity whose valid_from is at or after the greatest
/// valid_from at or before `start` (all rows when there is none), in (valid_from, tx) order.
pub(crate) fn plan_write(
    window: &[Row],
    start: i64,
    end: Option<i64>,
    new: &VersionRec,
    tx_time: i64,
) -> Vec<(i64, VersionRec)> {
    match end {
        Some(end) => {
            let before = visible_desc_until(window, start, end);
            crate::store::rule::plan_write(
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
            let visible = window.iter().rev().find(|r| r.vt <= start);
            let after = match visible {
                Some(_) => history_rows(window, start.saturating_add(1), i64::MAX, u64::MAX, false),
                None => Vec::new(),
            };
            crate::store::rule::plan_write::<Row>(
                Seen::Open {
                    visible,
                    after: &after,
                },
                start,
                new,
                tx_time,
            )
        }
    }
}
