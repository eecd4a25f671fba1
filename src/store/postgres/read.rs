//! Queries, each inside one read-only snapshot: versions by (entity, valid time, tx), history,
//! the log (checked against its chain and digests as it is served), paths, contents, metadata.

use postgres::GenericClient;

use super::rule::{self, Row};
use super::*;
use crate::object::{ContentOmitted, FilesystemSource, Object, ObjectType, Source};
use crate::store::codec::{DocRec, OpRec, StatRec, TxHeaderRec, VersionRec};
use crate::store::log::{self, LoggedOp};
use crate::store::{DocumentMeta, Listing};

/// A version row from its columns.
pub(super) fn row_of(vt: i64, tx: i64, rec: &[u8]) -> Result<Row> {
    Ok(Row {
        vt,
        tx: unbig(tx),
        rec: codec::decode::<VersionRec>(rec, "version record")?,
    })
}

/// The entity row of `id`: (eid, record).
pub(super) fn entity(t: &mut impl GenericClient, id: &str) -> Result<Option<(u64, EntityRec)>> {
    super::write::entity_row(t, id)
}

/// "Now" in valid time: the wall clock, or the latest tx time when the clock is behind it.
pub(super) fn now(t: &mut impl GenericClient) -> Result<i64> {
    let head = super::write::head(t, false)?;
    Ok(Timestamp::now().as_micros().max(head.tx_time))
}

/// The row of `eid` visible at valid time `vt` as of tx `tx`, and where it ends (the next
/// valid_from visible at `tx`; `None`: open).
pub(super) fn as_of_row(
    t: &mut impl GenericClient,
    eid: u64,
    vt: i64,
    tx: u64,
) -> Result<Option<(Row, Option<i64>)>> {
    let found = t
        .maybe_row(
            "SELECT v.valid_from, v.tx_id, v.rec, (SELECT n.valid_from FROM strata_versions n \
             WHERE n.eid = v.eid AND n.valid_from > v.valid_from AND n.tx_id <= $3 ORDER BY \
             n.valid_from LIMIT 1) FROM (SELECT eid, valid_from, tx_id, rec FROM strata_versions \
             WHERE eid = $1 AND valid_from <= $2 AND tx_id <= $3 ORDER BY valid_from DESC, tx_id \
             DESC LIMIT 1) v",
            &[&big(eid), &vt, &big(tx)],
        )
        .pg("reading a version")?;
    found
        .map(|r| Ok((row_of(r.get(0), r.get(1), r.get(2))?, r.get(3))))
        .transpose()
}

fn info(id: &str, row: &Row, valid_to: Option<i64>) -> VersionInfo {
    VersionInfo {
        entity: id.to_string(),
        valid_from: ts(row.vt),
        valid_to: valid_to.map(ts),
        tx_id: TxId(row.tx),
        tx_time: ts(row.tx_time()),
        object_hash: row.rec.object_hash.map(Hash),
        restored: row.rec.restored,
        size: row.rec.size,
        spelling: row.rec.spelling.clone(),
        content_omitted: row.rec.content_omitted.map(ContentOmitted::from),
    }
}

/// The version info of `id` (number `eid`) at (`valid_time`, `tx`), with its row.
pub(super) fn info_at(
    t: &mut impl GenericClient,
    id: &str,
    eid: u64,
    valid_time: Option<Timestamp>,
    tx: Option<TxId>,
) -> Result<Option<(VersionInfo, Row)>> {
    let vt = match valid_time {
        Some(at) => at.as_micros(),
        None => now(t)?,
    };
    let tx = tx.map_or(u64::MAX, |t| t.0);
    let Some((row, end)) = as_of_row(t, eid, vt, tx)? else {
        return Ok(None);
    };
    check_rows(t, id, std::slice::from_ref(&row))?;
    Ok(Some((info(id, &row, end), row)))
}

/// Checks version rows `rows` of entity `id` against the log, as redb's reads do: for each,
/// its transaction's time and the op body that wrote it (present or evicted, hashing to its
/// digest, writing this entity with this row's values). One statement for all of them.
///
/// # Errors
/// [`Error::Corrupt`] naming the first row that fails.
pub(super) fn check_rows<R: std::borrow::Borrow<Row>>(
    t: &mut impl GenericClient,
    id: &str,
    rows: &[R],
) -> Result<()> {
    let mut wanted: Vec<(u64, u32)> = rows
        .iter()
        .map(|row| (row.borrow().tx, row.borrow().rec.op))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(());
    }
    let txs: Vec<i64> = wanted.iter().map(|&(tx, _)| big(tx)).collect();
    let ns: Vec<i32> = wanted.iter().map(|&(_, n)| n as i32).collect();
    let mut logged = std::collections::HashMap::new();
    for found in t
        .rows(
            "SELECT r.tx, r.n, l.header, o.body, e.by_tx IS NOT NULL FROM unnest($1::bigint[], \
             $2::int[]) AS r(tx, n) LEFT JOIN strata_log l ON l.tx_id = r.tx LEFT JOIN strata_ops \
             o ON o.tx_id = r.tx AND o.n = r.n LEFT JOIN strata_evicted_ops e ON e.tx_id = r.tx \
             AND e.n = r.n",
            &[&txs, &ns],
        )
        .pg("reading the log of versions")?
    {
        let (tx, n) = (unbig(found.get(0)), found.get::<_, i32>(1) as u32);
        let header: Option<Vec<u8>> = found.get(2);
        let Some(header) = header else {
            return Err(Error::corrupt(format!(
                "a version of {id} names tx {tx}, which the log does not hold; run `strata fsck`"
            )));
        };
        let header = codec::decode_header(&header, &format!("header of tx {tx}"))?;
        let op = match (found.get::<_, Option<Vec<u8>>>(3), found.get::<_, bool>(4)) {
            (Some(body), _) => Some(checked_body(&body, tx, n, &header)?),
            (None, true) => None,
            (None, false) => {
                return Err(Error::corrupt(format!(
                    "op {n} of tx {tx} is missing from the log and no eviction removed it; run \
                     `strata fsck`"
                )));
            }
        };
        logged.insert((tx, n), (header.tx_time, op));
    }
    for row in rows {
        let row = row.borrow();
        let (tx_time, op) = logged
            .get(&(row.tx, row.rec.op))
            .ok_or_else(|| Error::invariant("a version's log record was not read"))?;
        crate::store::rule::check_row(id, row, *tx_time, op.as_ref())?;
    }
    Ok(())
}

/// The version of `id` at (`valid_time`, `tx`), its object rebuilt and checked.
pub(super) fn version_at(
    t: &mut impl GenericClient,
    id: &str,
    valid_time: Option<Timestamp>,
    tx: Option<TxId>,
) -> Result<Option<Version>> {
    let (eid, rec) = entity(t, id)?.ok_or_else(|| super::super::redb::unknown_entity(id))?;
    let Some((info, _)) = info_at(t, id, eid, valid_time, tx)? else {
        return Ok(None);
    };
    let object = match &info.object_hash {
        Some(hash) => Some(object(t, id, &rec, &hash.0, info.content_omitted)?),
        None => None,
    };
    Ok(Some(Version { info, object }))
}

/// The document `hash` a version of `id` points at, checked against its hash.
pub(super) fn doc(t: &mut impl GenericClient, id: &str, hash: &[u8; 32]) -> Result<DocRec> {
    let row = t
        .maybe_row(
            "SELECT rec FROM strata_docs WHERE hash = $1",
            &[&hash.as_slice()],
        )
        .pg("reading a document")?
        .ok_or_else(|| {
            Error::corrupt(format!(
                "version of {id} points at missing document {}; run `strata fsck`",
                hex::encode(hash)
            ))
        })?;
    let doc: DocRec = codec::decode(row.get(0), "document")?;
    super::super::redb::check_doc(hash, &doc)?;
    Ok(doc)
}

/// Content `hash` reassembled from its chunks (unchecked); `None` when there is none.
pub(super) fn content_raw(t: &mut impl GenericClient, hash: &[u8; 32]) -> Result<Option<Vec<u8>>> {
    let Some(head) = t
        .maybe_row(
            "SELECT len, chunks FROM strata_contents WHERE hash = $1",
            &[&hash.as_slice()],
        )
        .pg("reading a content")?
    else {
        return Ok(None);
    };
    let (len, chunks): (i64, i32) = (head.get(0), head.get(1));
    let mut record = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let rows = t
        .rows(
            "SELECT data FROM strata_chunks WHERE hash = $1 ORDER BY n",
            &[&hash.as_slice()],
        )
        .pg("reading a content's chunks")?;
    if rows.len() != usize::try_from(chunks).unwrap_or(0) {
        return Err(Error::corrupt(format!(
            "content {} has {} of its {chunks} chunks; run `strata fsck`",
            hex::encode(hash),
            rows.len()
        )));
    }
    for row in rows {
        record.extend_from_slice(row.get::<_, &[u8]>(0));
    }
    // The stated length is what a raw record's size is read from (`content_len`): one that is
    // not the record's is damage.
    if i64::try_from(record.len()).ok() != Some(len) {
        return Err(Error::corrupt(format!(
            "content {} is {} bytes long where its row says {len}; run `strata fsck`",
            hex::encode(hash),
            record.len()
        )));
    }
    Ok(Some(codec::decode_blob(
        &record,
        &format!("content {}", hex::encode(hash)),
    )?))
}

/// Content `hash`, checked against it.
pub(super) fn content(t: &mut impl GenericClient, hash: &[u8; 32]) -> Result<Option<Vec<u8>>> {
    let bytes = content_raw(t, hash)?;
    if let Some(bytes) = &bytes {
        super::super::redb::check_content(hash, bytes)?;
    }
    Ok(bytes)
}

/// Rebuilds the object of `id` from its entity row, document and content.
fn object(
    t: &mut impl GenericClient,
    id: &str,
    entity: &EntityRec,
    hash: &[u8; 32],
    omitted: Option<ContentOmitted>,
) -> Result<Object> {
    let doc = doc(t, id, hash)?;
    super::super::redb::assemble(id, entity, hash, &doc, omitted, |c| content(t, c))
}

/// The versions of `id` as `query` selects them.
pub(super) fn history(
    t: &mut impl GenericClient,
    id: &str,
    query: HistoryQuery,
) -> Result<Vec<VersionInfo>> {
    let (eid, _) = entity(t, id)?.ok_or_else(|| super::super::redb::unknown_entity(id))?;
    let tx = query.as_of_tx.map_or(u64::MAX, |t| t.0);
    let from = query.valid_from.map_or(i64::MIN, Timestamp::as_micros);
    let to = query.valid_to.map_or(i64::MAX, Timestamp::as_micros);
    if from >= to {
        return Ok(Vec::new());
    }
    let all: Vec<Row> = t
        .rows(
            "SELECT valid_from, tx_id, rec FROM strata_versions WHERE eid = $1 AND valid_from >= \
             $2 AND valid_from < $3 AND tx_id <= $4 ORDER BY valid_from, tx_id",
            &[&big(eid), &from, &to, &big(tx)],
        )
        .pg("reading a history")?
        .iter()
        .map(|r| row_of(r.get(0), r.get(1), r.get(2)))
        .collect::<Result<_>>()?;
    let rows = rule::history_rows(&all, from, to, tx, query.with_corrections);
    check_rows(t, id, &rows)?;
    let mut distinct: Vec<i64> = rows.iter().map(|r| r.vt).collect();
    distinct.dedup();
    let tail_end: Option<i64> = match distinct.last() {
        Some(&last) => t
            .maybe_row(
                "SELECT valid_from FROM strata_versions WHERE eid = $1 AND valid_from > $2 AND \
                 tx_id <= $3 ORDER BY valid_from LIMIT 1",
                &[&big(eid), &last, &big(tx)],
            )
            .pg("reading a history")?
            .map(|r| r.get(0)),
        None => None,
    };
    let mut out: Vec<VersionInfo> = rows
        .iter()
        .map(|row| {
            let i = distinct.partition_point(|&v| v <= row.vt);
            info(id, row, distinct.get(i).copied().or(tail_end))
        })
        .collect();
    query.order.arrange(&mut out);
    Ok(out)
}

/// The byte size of each of `versions` of `id` ([`version_size`]).
pub(super) fn version_sizes(
    t: &mut impl GenericClient,
    id: &str,
    versions: &[VersionInfo],
) -> Result<Vec<Option<u64>>> {
    versions
        .iter()
        .map(|info| version_size(t, id, info))
        .collect()
}

/// The byte size of version `info` of `id`: the size recorded on the row, else the length of
/// its content (or kept raw bytes) as its record's header says it, read from the first bytes of
/// its first chunk and its stored record length ([`content_len`]); `None` for a tombstone or a
/// stub.
fn version_size(t: &mut impl GenericClient, id: &str, info: &VersionInfo) -> Result<Option<u64>> {
    if info.size.is_some() {
        return Ok(info.size);
    }
    let Some(hash) = info.object_hash else {
        return Ok(None);
    };
    let doc = doc(t, id, &hash.0)?;
    let Some(blob) = super::super::redb::sized_blob(&doc, info.content_omitted) else {
        return Ok(None);
    };
    let len = content_len(t, &blob)?.ok_or_else(|| {
        Error::corrupt(format!(
            "a version of {id} points at missing content {}; run `strata fsck`",
            hex::encode(blob)
        ))
    })?;
    Ok(Some(len))
}

/// The length of content `hash` from its record's header (`codec::blob_len`): the record's
/// first bytes (of its first chunk) and its stored length, one statement, nothing decompressed
/// or hashed; read whole and checked only when the header does not say. `None` when there is
/// no such content.
///
/// # Errors
/// [`Error::Corrupt`] when the first chunk is missing or the header does not decode.
pub(super) fn content_len(t: &mut impl GenericClient, hash: &[u8; 32]) -> Result<Option<u64>> {
    let Some(row) = t
        .maybe_row(
            "SELECT c.len, substring(k.data FROM 1 FOR $2) FROM strata_contents c LEFT JOIN \
             strata_chunks k ON k.hash = c.hash AND k.n = 0 WHERE c.hash = $1",
            &[&hash.as_slice(), &(codec::SUFFIX_HEADER as i32)],
        )
        .pg("reading a content's header")?
    else {
        return Ok(None);
    };
    let what = format!("content {}", hex::encode(hash));
    let (len, prefix): (i64, Option<Vec<u8>>) = (row.get(0), row.get(1));
    let prefix = prefix.ok_or_else(|| {
        Error::corrupt(format!(
            "{what} has lost its first chunk; run `strata fsck`"
        ))
    })?;
    let record_len = u64::try_from(len)
        .map_err(|_| Error::corrupt(format!("{what} says its record is {len} bytes long")))?;
    if let Some(size) = codec::blob_len(&prefix, record_len, &what)? {
        return Ok(Some(size));
    }
    Ok(content(t, hash)?.map(|bytes| bytes.len() as u64))
}

/// What `ls` lists of `id` ([`crate::store::Backend::listings`]), in the caller's snapshot.
///
/// # Errors
/// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when its rows fail their
/// checks.
pub(super) fn listing(
    t: &mut impl GenericClient,
    id: &str,
    valid_time: Option<Timestamp>,
    tx: Option<TxId>,
    deleted: bool,
) -> Result<Option<Listing>> {
    let (eid, _) = entity(t, id)?.ok_or_else(|| super::super::redb::unknown_entity(id))?;
    let Some((info, _)) = info_at(t, id, eid, valid_time, tx)? else {
        return Ok(None);
    };
    if info.is_tombstone() && !deleted {
        return Ok(None);
    }
    let versions = history(t, id, Listing::history_query(valid_time, tx))?.len() as u64;
    let size = version_size(t, id, &info)?;
    Ok(Some(Listing {
        info,
        versions,
        size,
    }))
}

/// The header of tx `tx`.
fn header(t: &mut impl GenericClient, tx: u64) -> Result<TxHeaderRec> {
    let row = t
        .maybe_row(
            "SELECT header FROM strata_log WHERE tx_id = $1",
            &[&big(tx)],
        )
        .pg("reading the log")?
        .ok_or_else(|| {
            Error::corrupt(format!(
                "the log has no record of tx {tx}; run `strata fsck`"
            ))
        })?;
    codec::decode_header(row.get(0), &format!("header of tx {tx}"))
}

/// Up to `limit` log records after `since`, each checked: consecutive ids, its chain value,
/// every body against its digest, every missing body against the record of evictions.
pub(super) fn log(
    t: &mut impl GenericClient,
    since: Option<TxId>,
    limit: usize,
) -> Result<Vec<TxRecord>> {
    let start = since.map_or(1, |t| t.0.saturating_add(1)).max(1);
    // One statement: the record before `start` (for its chain value), then the records with
    // their op bodies and evictions.
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut headers = t
        .rows(
            "SELECT l.tx_id, l.header, ARRAY(SELECT n FROM strata_ops o WHERE o.tx_id = l.tx_id \
             AND l.tx_id >= $2 ORDER BY n), ARRAY(SELECT body FROM strata_ops o WHERE o.tx_id = \
             l.tx_id AND l.tx_id >= $2 ORDER BY n), ARRAY(SELECT n FROM strata_evicted_ops e \
             WHERE e.tx_id = l.tx_id AND l.tx_id >= $2 ORDER BY n), ARRAY(SELECT by_tx FROM \
             strata_evicted_ops e WHERE e.tx_id = l.tx_id AND l.tx_id >= $2 ORDER BY n) FROM \
             strata_log l WHERE l.tx_id >= $1 ORDER BY l.tx_id LIMIT $3",
            &[&big(start - 1), &big(start), &limit.saturating_add(1)],
        )
        .pg("reading the log")?;
    let mut previous = [0u8; 32];
    if start > 1 {
        match headers.first() {
            Some(row) if unbig(row.get(0)) == start - 1 => {
                let tx = start - 1;
                previous = codec::decode_header(row.get(1), &format!("header of tx {tx}"))?.chain;
                headers.remove(0);
            }
            _ => {
                return Err(Error::corrupt(format!(
                    "the log has no record of tx {}; run `strata fsck`",
                    start - 1
                )));
            }
        }
    } else {
        headers.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    let mut bodies = std::collections::HashMap::new();
    let mut evicted = std::collections::HashMap::new();
    for row in &headers {
        let tx = unbig(row.get(0));
        let ns: Vec<i32> = row.get(2);
        let bs: Vec<Vec<u8>> = row.get(3);
        for (n, body) in ns.into_iter().zip(bs) {
            bodies.insert((tx, n as u32), body);
        }
        let ns: Vec<i32> = row.get(4);
        let by: Vec<i64> = row.get(5);
        for (n, by) in ns.into_iter().zip(by) {
            evicted.insert((tx, n as u32), TxId(unbig(by)));
        }
    }
    let mut expected = start;
    let mut out = Vec::with_capacity(headers.len());
    for row in headers {
        let tx = unbig(row.get(0));
        if tx != expected {
            return Err(Error::corrupt(format!(
                "the log has no record of tx {expected}; run `strata fsck`"
            )));
        }
        expected = tx + 1;
        let header = codec::decode_header(row.get(1), &format!("header of tx {tx}"))?;
        let chain = log::next_chain(&previous, tx, &header)?;
        if chain != header.chain {
            return Err(Error::corrupt(format!(
                "the log record of tx {tx} does not chain from the one before it; run `strata \
                 fsck`"
            )));
        }
        previous = chain;
        let mut ops = Vec::with_capacity(header.digests.len());
        for (n, digest) in header.digests.iter().enumerate() {
            let key = (tx, n as u32);
            let evicted_by = evicted.get(&key).copied();
            let body = match bodies.get(&key) {
                Some(bytes) => {
                    let op = checked_body(bytes, tx, n as u32, &header)?;
                    Some(log::op_json(&op))
                }
                None if evicted_by.is_some() => None,
                None => {
                    return Err(Error::corrupt(format!(
                        "op {n} of tx {tx} has no body and was not evicted; run `strata fsck`"
                    )));
                }
            };
            ops.push(LoggedOp {
                digest: *digest,
                evicted_by: body.is_none().then_some(evicted_by).flatten(),
                body,
            });
        }
        out.push(TxRecord {
            tx_id: TxId(tx),
            tx_time: ts(header.tx_time),
            origin: Origin::from_name(&header.origin),
            run: header.run.map(TxId),
            ops,
            chain: header.chain,
        });
    }
    Ok(out)
}

/// Op body `n` of tx `tx` decoded and checked against its digest.
pub(super) fn checked_body(bytes: &[u8], tx: u64, n: u32, header: &TxHeaderRec) -> Result<OpRec> {
    let op = codec::decode_op(
        bytes,
        header.tx_time,
        &header.filesystems,
        &format!("op {n} of tx {tx}"),
    )?;
    let digest = log::op_digest(&op)?;
    if header.digests.get(n as usize) != Some(&digest) {
        return Err(Error::corrupt(format!(
            "op {n} of tx {tx} does not match its digest in the log; run `strata fsck`"
        )));
    }
    Ok(op)
}

/// The latest tx and its chain value, checked against the record before it.
pub(super) fn chain_head(t: &mut postgres::Transaction<'_>) -> Result<Option<(TxId, [u8; 32])>> {
    let head = super::write::head(t, false)?;
    if head.tx == 0 {
        return Ok(None);
    }
    let header = header(t, head.tx)?;
    let previous = match head.tx {
        1 => [0u8; 32],
        tx => self::header(t, tx - 1)?.chain,
    };
    let chain = log::next_chain(&previous, head.tx, &header)?;
    if chain != header.chain {
        return Err(Error::corrupt(format!(
            "the log record of tx {} does not chain from the one before it; run `strata fsck`",
            head.tx
        )));
    }
    Ok(Some((TxId(head.tx), header.chain)))
}

/// The latest tx whose time is at or before `time`.
pub(super) fn tx_at_time(
    t: &mut postgres::Transaction<'_>,
    time: Timestamp,
) -> Result<Option<TxId>> {
    let last = super::write::head(t, false)?.tx;
    if last == 0 || header(t, 1)?.tx_time > time.as_micros() {
        return Ok(None);
    }
    let (mut lo, mut hi) = (1u64, last);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if header(t, mid)?.tx_time <= time.as_micros() {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(Some(TxId(lo)))
}

/// Up to `limit` entity ids starting with `prefix`, in id order.
pub(super) fn ids_with_prefix(
    t: &mut impl GenericClient,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for row in t
        .rows(
            "SELECT id FROM strata_entities WHERE id >= $1 ORDER BY id LIMIT $2",
            &[&prefix.as_bytes(), &limit],
        )
        .pg("listing entity ids")?
    {
        let id = text(row.get(0), "entity id")?;
        if !id.starts_with(prefix) {
            break;
        }
        out.push(id);
    }
    Ok(out)
}

fn text(bytes: Vec<u8>, what: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| Error::corrupt(format!("a stored {what} is not UTF-8")))
}

/// The entity at `path` on `filesystem_id`.
pub(super) fn entity_at_path(
    t: &mut impl GenericClient,
    filesystem_id: &str,
    path: &str,
) -> Result<Option<String>> {
    t.maybe_row(
        "SELECT e.id FROM strata_paths p JOIN strata_entities e ON e.eid = p.eid WHERE p.fs = $1 \
         AND p.path = $2",
        &[&filesystem_id.as_bytes(), &path.as_bytes()],
    )
    .pg("looking up a path")?
    .map(|row| text(row.get(0), "entity id"))
    .transpose()
}

/// The bounds of "at `prefix` or below it" in whole path segments: (the prefix itself, start
/// and end of the range below it).
fn under(prefix: &str) -> (String, String, String) {
    let base = prefix.trim_end_matches('/').to_string();
    let start = format!("{base}/");
    let end = format!("{base}0");
    (base, start, end)
}

/// (path, entity id) of the files on `filesystem_id` at `prefix` or below it, in path order.
pub(super) fn paths_under(
    t: &mut impl GenericClient,
    filesystem_id: &str,
    prefix: &str,
) -> Result<Vec<(String, String)>> {
    let (base, start, end) = under(prefix);
    t.rows(
        "SELECT p.path, e.id FROM strata_paths p LEFT JOIN strata_entities e ON e.eid = p.eid \
         WHERE p.fs = $1 AND ((p.path = $2 AND $2 <> ''::bytea) OR (p.path >= $3 AND p.path < \
         $4)) ORDER BY p.path",
        &[
            &filesystem_id.as_bytes(),
            &base.as_bytes(),
            &start.as_bytes(),
            &end.as_bytes(),
        ],
    )
    .pg("listing paths")?
    .into_iter()
    .map(|row| {
        let path = text(row.get(0), "path")?;
        let id: Option<Vec<u8>> = row.get(1);
        let id = id.ok_or_else(|| {
            Error::corrupt(format!(
                "the paths table lists {path:?} for an entity the store does not have; run \
                 `strata fsck`"
            ))
        })?;
        Ok((path, text(id, "entity id")?))
    })
    .collect()
}

/// The stat cache entries at `prefix` or below it.
pub(super) fn stat_cache(
    t: &mut impl GenericClient,
    filesystem_id: &str,
    prefix: &str,
) -> Result<rustc_hash::FxHashMap<String, StatEntry>> {
    let (base, start, end) = under(prefix);
    let mut out = rustc_hash::FxHashMap::default();
    for row in t
        .rows(
            "SELECT path, rec FROM strata_stat WHERE fs = $1 AND ((path = $2 AND $2 <> \
             ''::bytea) OR (path >= $3 AND path < $4))",
            &[
                &filesystem_id.as_bytes(),
                &base.as_bytes(),
                &start.as_bytes(),
                &end.as_bytes(),
            ],
        )
        .pg("reading the stat cache")?
    {
        let path = text(row.get(0), "path")?;
        let rec: StatRec = codec::decode(row.get(1), "stat cache entry")
            .map_err(|e| Error::corrupt(format!("{e} (the entry of {path})")))?;
        out.insert(path, rec.entry());
    }
    Ok(out)
}

/// Every entity whose current version is not a tombstone, in id order.
pub(super) fn live_entities(t: &mut postgres::Transaction<'_>) -> Result<Vec<EntityInfo>> {
    let now = now(t)?;
    let mut out = Vec::new();
    for row in t
        .rows(
            "SELECT DISTINCT ON (e.id) e.id, e.eid, e.rec, v.object_hash FROM strata_entities e \
             JOIN strata_versions v ON v.eid = e.eid AND v.valid_from <= $1 ORDER BY e.id, \
             v.valid_from DESC, v.tx_id DESC",
            &[&now],
        )
        .pg("listing entities")?
    {
        let hash: Option<Vec<u8>> = row.get(3);
        if hash.is_none() {
            continue;
        }
        let id = text(row.get(0), "entity id")?;
        let (_, rec) = entity_of(&id, row.get(1), row.get(2))?;
        out.push(super::super::redb::entity_info(&id, &rec)?);
    }
    Ok(out)
}

/// The metadata of `id` at valid time `now` as of `tx`, with its document's fields JSON.
pub(super) fn meta_at(
    t: &mut impl GenericClient,
    id: &str,
    now: i64,
    tx: Option<TxId>,
) -> Result<Option<(ObjectMeta, Option<String>)>> {
    let Some((eid, entity)) = entity(t, id)? else {
        return Ok(None);
    };
    let tx = tx.map_or(u64::MAX, |t| t.0);
    let Some((row, end)) = as_of_row(t, eid, now, tx)? else {
        return Ok(None);
    };
    let object_type: ObjectType = entity.object_type.parse()?;
    let (document, json) = match &row.rec.object_hash {
        None => (None, None),
        Some(hash) => {
            let doc = doc(t, id, hash)?;
            let meta = DocumentMeta {
                file_hash: doc.file_hash.map(Hash),
                content_hash: doc.content_hash.map(Hash),
                fields: super::super::redb::parse_fields(object_type, &doc.fields)?,
            };
            (Some(meta), Some(doc.fields))
        }
    };
    let source = entity.source.map(|(filesystem_id, path)| {
        Source::Filesystem(FilesystemSource {
            filesystem_id: filesystem_id.0,
            path,
        })
    });
    let meta = ObjectMeta {
        info: info(id, &row, end),
        object_type,
        source,
        document,
    };
    Ok(Some((meta, json)))
}

/// Counts and sizes; `file_bytes` is what the store's tables take in the database.
pub(super) fn stats(t: &mut postgres::Transaction<'_>, schema: &str) -> Result<Stats> {
    let row = t
        .row(
            "SELECT (SELECT count(*) FROM strata_entities), (SELECT count(*) FROM \
             strata_versions), (SELECT count(*) FROM strata_log), (SELECT count(*) FROM \
             strata_contents), (SELECT count(*) FROM strata_docs), (SELECT coalesce(sum(len), \
             0)::bigint FROM strata_contents) + (SELECT coalesce(sum(length(rec)), 0)::bigint FROM \
             strata_docs), (SELECT value FROM strata_meta WHERE name = 'put_bytes'), (SELECT \
             coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN \
             pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r')",
            &[&schema],
        )
        .pg("counting")?;
    let n = |i: usize| unbig(row.get(i));
    Ok(Stats {
        entities: n(0),
        versions: n(1),
        transactions: n(2),
        blobs: n(3),
        documents: n(4),
        stored_bytes: n(5),
        put_bytes: n(6),
        file_bytes: n(7),
    })
}
