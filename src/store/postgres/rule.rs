//! The bitemporal rules over one entity's version rows held in memory, in (valid_from, tx)
//! order: XTDB v1's write rule (the same as redb's `temporal::plan_write`, over the window of
//! rows a write can touch) and the history selection. The database reads the rows; these
//! functions decide.

use super::super::codec::VersionRec;

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
    let mut out = vec![(start, new.clone())];
    match end {
        Some(end) => {
            let before = visible_desc_until(window, start, end);
            for r in before.iter().take_while(|r| r.vt > start) {
                if r.vt != end {
                    out.push((r.vt, new.clone()));
                }
            }
            let restore = match before.first() {
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
        None => {
            if let Some(visible) = window.iter().rev().find(|r| r.vt <= start) {
                let after =
                    history_rows(window, start.saturating_add(1), i64::MAX, u64::MAX, false);
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
