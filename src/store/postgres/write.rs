//! Writes op by op: what the batched commit (`commit`) does not take (a request that evicts),
//! replaying the log (`append_log`, rebuild), and the pieces commits share (the head, contents
//! uploads, documents, version rows). Every statement goes through the connection's prepared
//! statements (`Cached`).

use std::collections::HashSet;

use postgres::GenericClient;

use super::rule::{self, Row};
use super::schema::CHUNK;
use super::*;
use crate::object::Object;
use crate::store::codec::{FirstRec, OpRec, StatRec, VersionRec, WriteRec};
use crate::store::log;
use crate::store::migrate::{ReplayOp, ReplayRecord};
use crate::store::{Put, ValidFrom};

/// The head of the log as a commit extends it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Head {
    pub tx: u64,
    pub tx_time: i64,
    pub chain: [u8; 32],
}

/// Reads the head (locking its row when `lock`): the latest tx, its time and chain value.
pub(super) fn head(t: &mut impl GenericClient, lock: bool) -> Result<Head> {
    // The lock first, then the header in a statement of its own: under READ COMMITTED a
    // statement that waited for the lock sees the head row as the other commit left it, but a
    // join in that statement would still read the log as of before.
    let sql = if lock {
        "SELECT tx_id FROM strata_head WHERE id = 1 FOR UPDATE"
    } else {
        "SELECT tx_id FROM strata_head WHERE id = 1"
    };
    let tx: i64 = t.row(sql, &[]).pg("reading the head of the log")?.get(0);
    head_at(t, tx)
}

/// Locks the head for a write, in one statement that also reads the head's header (kept in the
/// head row) and the damage mark: refused while the store is marked damaged, unless the write is
/// an `erasure` that fsck found the damage does not stop ([`PgStore::erasable_damage`]).
pub(super) fn head_for_write(t: &mut impl GenericClient, erasure: bool) -> Result<Head> {
    let row = t
        .row(
            "SELECT tx_id, header, (SELECT reason FROM strata_damage WHERE id = 1) FROM \
             strata_head WHERE id = 1 FOR UPDATE",
            &[],
        )
        .pg("locking the head of the log")?;
    if let Some(reason) = row.get::<_, Option<String>>(2)
        && !erasure
    {
        return Err(crate::store::damage::refusal(&reason));
    }
    let tx: i64 = row.get(0);
    match row.get::<_, Option<Vec<u8>>>(1) {
        Some(bytes) if tx > 0 => {
            let header = codec::decode_header(&bytes, &format!("header of tx {tx}"))?;
            Ok(Head {
                tx: unbig(tx),
                tx_time: header.tx_time,
                chain: header.chain,
            })
        }
        _ => head_at(t, tx),
    }
}

/// The head when the latest tx is `tx`.
fn head_at(t: &mut impl GenericClient, tx: i64) -> Result<Head> {
    let header: Option<Vec<u8>> = t
        .maybe_row("SELECT header FROM strata_log WHERE tx_id = $1", &[&tx])
        .pg("reading the head of the log")?
        .map(|row| row.get(0));
    match (tx, header) {
        (0, _) => Ok(Head {
            tx: 0,
            tx_time: 0,
            chain: [0; 32],
        }),
        (tx, Some(bytes)) => {
            let header = codec::decode_header(&bytes, &format!("header of tx {tx}"))?;
            Ok(Head {
                tx: unbig(tx),
                tx_time: header.tx_time,
                chain: header.chain,
            })
        }
        (tx, None) => Err(Error::corrupt(format!(
            "the head names tx {tx}, which the log does not hold; run `strata fsck`"
        ))),
    }
}

/// Stores content `hash` (the blob record `record` makes) unless it is there; the bytes stored.
pub(super) fn ensure_content(
    client: &mut impl GenericClient,
    hash: &[u8; 32],
    record: impl FnOnce() -> Vec<u8>,
) -> Result<u64> {
    let blobs: Vec<Blob<'_>> = vec![(*hash, Box::new(record))];
    Ok(ensure_contents(client, blobs)?
        .into_iter()
        .map(|(_, bytes)| bytes)
        .sum())
}

/// A content to store: its hash, and what makes its blob record when it must be uploaded.
pub(super) type Blob<'a> = ([u8; 32], Box<dyn FnOnce() -> Vec<u8> + 'a>);

/// Stores each of `blobs` (hash, its blob record when it must be made) that is not there: one
/// statement finds which are there, one more (per 32 MiB) stores the others. The hashes it
/// stored, with their bytes.
pub(super) fn ensure_contents<'a>(
    client: &mut impl GenericClient,
    blobs: Vec<Blob<'a>>,
) -> Result<Vec<([u8; 32], u64)>> {
    if blobs.is_empty() {
        return Ok(Vec::new());
    }
    let hashes: Vec<&[u8]> = blobs.iter().map(|(hash, _)| hash.as_slice()).collect();
    let there: HashSet<Vec<u8>> = client
        .rows(
            "SELECT hash FROM strata_contents WHERE hash = ANY($1)",
            &[&hashes],
        )
        .pg("looking up contents")?
        .into_iter()
        .map(|row| row.get(0))
        .collect();
    let mut seen = HashSet::new();
    let records = blobs
        .into_iter()
        .filter(|(hash, _)| !there.contains(hash.as_slice()) && seen.insert(*hash))
        .map(|(hash, record)| (hash, record()));
    insert_contents(client, records)
}

/// The most record bytes one upload statement carries (a larger record goes alone).
const UPLOAD_BATCH: usize = 32 << 20;

/// Inserts contents (hash, blob record) unless there, cut into chunks: one statement per
/// [`UPLOAD_BATCH`] of records, each atomic on its own (a content is whole or absent). The
/// hashes it inserted, with their bytes.
pub(super) fn insert_contents(
    client: &mut impl GenericClient,
    records: impl IntoIterator<Item = ([u8; 32], Vec<u8>)>,
) -> Result<Vec<([u8; 32], u64)>> {
    let mut stored = Vec::new();
    let mut batch: Vec<([u8; 32], Vec<u8>)> = Vec::new();
    let mut size = 0;
    for (hash, record) in records {
        if size > 0 && size + record.len() > UPLOAD_BATCH {
            stored.extend(insert_batch(client, &std::mem::take(&mut batch))?);
            size = 0;
        }
        size += record.len();
        batch.push((hash, record));
    }
    if !batch.is_empty() {
        stored.extend(insert_batch(client, &batch)?);
    }
    Ok(stored)
}

/// One statement of [`insert_contents`].
fn insert_batch(
    client: &mut impl GenericClient,
    batch: &[([u8; 32], Vec<u8>)],
) -> Result<Vec<([u8; 32], u64)>> {
    let (mut chunk_hash, mut chunk_n, mut chunk_data) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hashes, mut lens, mut counts) = (Vec::new(), Vec::new(), Vec::new());
    for (hash, record) in batch {
        let chunks: Vec<&[u8]> = record.chunks(CHUNK).collect();
        for (n, chunk) in chunks.iter().enumerate() {
            chunk_hash.push(hash.as_slice());
            chunk_n.push(n as i32);
            chunk_data.push(*chunk);
        }
        hashes.push(hash.as_slice());
        lens.push(record.len() as i64);
        counts.push(chunks.len() as i32);
    }
    client
        .rows(
            "WITH c AS (INSERT INTO strata_chunks SELECT * FROM unnest($1::bytea[], $2::int[], \
             $3::bytea[]) ON CONFLICT DO NOTHING) INSERT INTO strata_contents SELECT * FROM \
             unnest($4::bytea[], $5::bigint[], $6::int[]) ON CONFLICT DO NOTHING RETURNING hash, \
             len",
            &[&chunk_hash, &chunk_n, &chunk_data, &hashes, &lens, &counts],
        )
        .pg("uploading contents")?
        .iter()
        .map(|row| Ok((hash32(row.get(0), "a content hash")?, unbig(row.get(1)))))
        .collect()
}

/// The contents a put stores: (hash, bytes), the content or the kept raw bytes.
pub(super) fn put_blobs(put: &Put) -> Result<Vec<([u8; 32], &[u8])>> {
    blobs_of(&put.object, put.kept_bytes())
}

/// The contents a write of `object` (with the raw `bytes` of a file) stores: (hash, bytes).
fn blobs_of<'a>(object: &'a Object, bytes: Option<&'a [u8]>) -> Result<Vec<([u8; 32], &'a [u8])>> {
    let mut out = Vec::new();
    if let (Some(content), Some(hash)) = (object.content(), object.content_hash()) {
        out.push((hash.0, content.as_bytes()));
    }
    if let Some(bytes) = bytes {
        let actual = crate::hash::sha256(bytes);
        if object.file_hash() != Some(&actual) {
            return Err(Error::invalid_input(format!(
                "the bytes given for {} hash to {actual}, not to its file_hash {}; give the \
                 file's own bytes",
                object.id(),
                object.file_hash().map_or("null".to_string(), Hash::to_hex),
            )));
        }
        if object.content().is_none() {
            out.push((actual.0, bytes));
        }
    }
    Ok(out)
}

/// Makes sure, under the head lock, that the contents of every put of `ops` are there (they
/// were uploaded before the lock; an eviction or gc in between may have removed one): one
/// statement, and an upload only of what went.
pub(super) fn recheck_contents(t: &mut impl GenericClient, ops: &[Op]) -> Result<()> {
    let mut blobs: Vec<Blob<'_>> = Vec::new();
    for op in ops {
        if let Op::Put(put) = op {
            for (hash, bytes) in put_blobs(put)? {
                blobs.push((hash, Box::new(move || codec::encode_blob(bytes))));
            }
        }
    }
    ensure_contents(t, blobs)?;
    Ok(())
}

/// The entity row of `id`: (eid, record).
pub(super) fn entity_row(t: &mut impl GenericClient, id: &str) -> Result<Option<(u64, EntityRec)>> {
    t.maybe_row(
        "SELECT eid, rec FROM strata_entities WHERE id = $1",
        &[&id.as_bytes()],
    )
    .pg("reading an entity")?
    .map(|row| entity_of(id, row.get(0), row.get(1)))
    .transpose()
}

/// What the writes of one transaction carry from op to op.
#[derive(Default)]
pub(super) struct TxState {
    /// Entities this transaction evicted (a later match on one loses its body too).
    pub evicted: HashSet<String>,
    /// Replaying the log (rebuild): evictions drop rows, not documents or contents.
    pub replay: bool,
    /// The entity number the commit read for the op about to be applied (id, eid or `None`
    /// when no entity has the id), so that applying it does not read the row again.
    pub known: Option<(String, Option<u64>)>,
    /// The number the next new entity gets (read once per transaction: under the head lock
    /// no other commit makes entities).
    pub next_eid: Option<i64>,
}

/// Applies one resolved op body (op `n` of transaction `tx`, whose body is already stored).
pub(super) fn apply(
    t: &mut impl GenericClient,
    tx: u64,
    tx_time: i64,
    n: u32,
    op: &OpRec,
    state: &mut TxState,
) -> Result<()> {
    match op {
        OpRec::Write(w) => {
            let known = state.known.take().filter(|(id, _)| *id == *w.entity);
            let row = match known {
                Some((_, eid)) => eid,
                None => entity_row(t, &w.entity)?.map(|(eid, _)| eid),
            };
            let eid = match (row, &w.first) {
                (Some(eid), _) => eid,
                (None, Some(first)) => create_entity(t, &w.entity, first, &mut state.next_eid)?,
                (None, None) => return Err(super::super::redb::unknown_entity(&w.entity)),
            };
            let window = window(t, eid, w.valid_from)?;
            for (vt, rec) in planned_versions(w, n, &window, tx_time) {
                t.run(
                    "INSERT INTO strata_versions VALUES ($1, $2, $3, $4, $5)",
                    &[
                        &big(eid),
                        &vt,
                        &big(tx),
                        &rec.object_hash.as_ref().map(<[u8; 32]>::as_slice),
                        &codec::encode(&rec)?,
                    ],
                )
                .pg("writing a version")?;
            }
        }
        OpRec::Evict { entity } => {
            if let Some((eid, rec)) = entity_row(t, entity)? {
                evict_entity(t, entity, eid, &rec, tx, state.replay)?;
            }
            state.evicted.insert(entity.0.clone());
        }
        OpRec::Match { entity, .. } => {
            if state.evicted.contains(&entity.0) {
                drop_bodies(t, &[(tx, n)], tx)?;
            } else {
                t.run(
                    "INSERT INTO strata_matches VALUES ($1, $2, $3)",
                    &[&entity.as_bytes(), &big(tx), &(n as i32)],
                )
                .pg("recording a match")?;
            }
        }
    }
    Ok(())
}

/// The version rows write `w` (op `n`) makes, given the `window` of rows it can touch (see
/// [`window`]) and its transaction's time.
pub(super) fn planned_versions(
    w: &WriteRec,
    n: u32,
    window: &[Row],
    tx_time: i64,
) -> Vec<(i64, VersionRec)> {
    let new = VersionRec::of_write(w, n);
    rule::plan_write(window, w.valid_from, w.valid_to, &new, tx_time)
}

/// The rows of `eid` a write starting at `start` can touch: from the greatest valid_from at
/// or before `start` on (all rows when there is none).
fn window(t: &mut impl GenericClient, eid: u64, start: i64) -> Result<Vec<Row>> {
    t.rows(
        "SELECT valid_from, tx_id, rec FROM strata_versions WHERE eid = $1 AND valid_from >= \
         coalesce((SELECT max(valid_from) FROM strata_versions WHERE eid = $1 AND valid_from <= \
         $2), -9223372036854775808) ORDER BY valid_from, tx_id",
        &[&big(eid), &start],
    )
    .pg("reading version rows")?
    .iter()
    .map(|row| read::row_of(row.get(0), row.get(1), row.get(2)))
    .collect()
}

/// The record of new entity number `eid` made by a write whose first record is `first`.
pub(super) fn entity_rec(eid: u64, first: &FirstRec) -> EntityRec {
    EntityRec {
        eid,
        object_type: first.object_type.clone(),
        source: first.source.clone(),
    }
}

fn create_entity(
    t: &mut impl GenericClient,
    id: &str,
    first: &FirstRec,
    next_eid: &mut Option<i64>,
) -> Result<u64> {
    let next = match *next_eid {
        Some(next) => next,
        None => t
            .row("SELECT coalesce(max(eid), 0) + 1 FROM strata_entities", &[])
            .pg("numbering an entity")?
            .get(0),
    };
    *next_eid = Some(next + 1);
    let rec = entity_rec(unbig(next), first);
    t.run(
        "INSERT INTO strata_entities VALUES ($1, $2, $3)",
        &[&id.as_bytes(), &next, &codec::encode(&rec)?],
    )
    .pg("creating an entity")?;
    if let Some((filesystem_id, path)) = &first.source {
        t.run(
            "INSERT INTO strata_paths VALUES ($1, $2, $3)",
            &[&filesystem_id.as_bytes(), &path.as_bytes(), &next],
        )
        .pg("recording a path")?;
    }
    Ok(unbig(next))
}

/// Removes op bodies (tx, n) and records that transaction `by` evicted them.
fn drop_bodies(t: &mut impl GenericClient, ops: &[(u64, u32)], by: u64) -> Result<()> {
    for &(tx, n) in ops {
        t.run(
            "DELETE FROM strata_ops WHERE tx_id = $1 AND n = $2",
            &[&big(tx), &(n as i32)],
        )
        .pg("removing an evicted op body")?;
        t.run(
            "INSERT INTO strata_evicted_ops VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&big(tx), &(n as i32), &big(by)],
        )
        .pg("recording an eviction")?;
    }
    Ok(())
}

/// Erases entity `id`: its versions, op bodies, matches, path, stat entry, and (unless
/// replaying) every document and content nothing else uses.
fn evict_entity(
    t: &mut impl GenericClient,
    id: &str,
    eid: u64,
    rec: &EntityRec,
    tx: u64,
    replay: bool,
) -> Result<()> {
    let mut ops = std::collections::BTreeSet::new();
    let mut hashes = std::collections::BTreeSet::new();
    for row in t
        .rows(
            "DELETE FROM strata_versions WHERE eid = $1 RETURNING tx_id, object_hash, rec",
            &[&big(eid)],
        )
        .pg("removing versions")?
    {
        // A row that does not decode cannot say which op wrote it: refused (the transaction
        // rolls back) rather than leave that op's body in the log, as redb's evict does.
        let rec: VersionRec = codec::decode(row.get(2), "version record").map_err(|e| {
            Error::corrupt(format!(
                "{id} cannot be evicted: {e}; run `strata fsck --repair`, then evict it again"
            ))
        })?;
        ops.insert((unbig(row.get(0)), rec.op));
        let hash: Option<Vec<u8>> = row.get(1);
        if let Some(hash) = hash {
            hashes.insert(hash);
        }
    }
    for row in t
        .rows(
            "DELETE FROM strata_matches WHERE id = $1 RETURNING tx_id, n",
            &[&id.as_bytes()],
        )
        .pg("removing matches")?
    {
        let n: i32 = row.get(1);
        ops.insert((unbig(row.get(0)), n as u32));
    }
    let ops: Vec<(u64, u32)> = ops.into_iter().collect();
    if !replay {
        drop_bodies(t, &ops, tx)?;
    }
    t.run(
        "DELETE FROM strata_entities WHERE id = $1",
        &[&id.as_bytes()],
    )
    .pg("removing an entity")?;
    if let Some((filesystem_id, path)) = &rec.source {
        for table in ["strata_paths", "strata_stat"] {
            t.run(
                &format!("DELETE FROM {table} WHERE fs = $1 AND path = $2"),
                &[&filesystem_id.as_bytes(), &path.as_bytes()],
            )
            .pg("removing a path")?;
        }
    }
    if !replay {
        for hash in hashes {
            release_doc(t, &hash)?;
        }
    }
    Ok(())
}

/// Removes document `hash` when no version uses it, and then its contents no document uses.
pub(super) fn release_doc(t: &mut impl GenericClient, hash: &[u8]) -> Result<(u64, u64, u64)> {
    let (mut docs, mut contents, mut bytes) = (0, 0, 0);
    let removed = t
        .rows(
            "DELETE FROM strata_docs d WHERE d.hash = $1 AND NOT EXISTS (SELECT 1 FROM \
             strata_versions v WHERE v.object_hash = $1) RETURNING content_hash, kept_hash, \
             length(rec)",
            &[&hash],
        )
        .pg("removing a document")?;
    for row in removed {
        docs += 1;
        bytes += unbig(i64::from(row.get::<_, i32>(2)));
        for i in 0..2 {
            let Some(content) = row.get::<_, Option<Vec<u8>>>(i) else {
                continue;
            };
            let (n, b) = release_content(t, &content)?;
            contents += n;
            bytes += b;
        }
    }
    Ok((docs, contents, bytes))
}

/// Removes content `hash` when no document uses it: (1, its bytes) when it went.
pub(super) fn release_content(t: &mut impl GenericClient, hash: &[u8]) -> Result<(u64, u64)> {
    let gone = t
        .maybe_row(
            "DELETE FROM strata_contents c WHERE c.hash = $1 AND NOT EXISTS (SELECT 1 FROM \
             strata_docs d WHERE d.content_hash = $1 OR d.kept_hash = $1) RETURNING len",
            &[&hash],
        )
        .pg("removing a content")?;
    let Some(row) = gone else {
        return Ok((0, 0));
    };
    t.run("DELETE FROM strata_chunks WHERE hash = $1", &[&hash])
        .pg("removing a content's chunks")?;
    Ok((1, unbig(row.get(0))))
}

/// The current object hash of `id` (visible at `now` as of the latest tx); `None` when absent.
/// One statement: the entity and its version.
fn current_hash(t: &mut impl GenericClient, id: &str, now: i64) -> Result<Option<[u8; 32]>> {
    let found = t
        .maybe_row(
            "SELECT v.valid_from, v.tx_id, v.rec FROM strata_entities e JOIN LATERAL (SELECT \
             valid_from, tx_id, rec FROM strata_versions WHERE eid = e.eid AND valid_from <= $2 \
             ORDER BY valid_from DESC, tx_id DESC LIMIT 1) v ON true WHERE e.id = $1",
            &[&id.as_bytes(), &now],
        )
        .pg("reading a version")?;
    Ok(match found {
        Some(row) => {
            read::row_of(row.get(0), row.get(1), row.get(2))?
                .rec
                .object_hash
        }
        None => None,
    })
}

/// A document row: object hash, content hash, kept bytes' hash, record (codec DocRec).
pub(super) type DocRow = ([u8; 32], Option<[u8; 32]>, Option<[u8; 32]>, Vec<u8>);

/// The document row of `object` (with `bytes` kept for a file whose content is null), and the
/// bytes it puts, for the store's count.
pub(super) fn doc_row(object: &Object, bytes: Option<&[u8]>) -> Result<(DocRow, i64)> {
    let kept = bytes
        .filter(|_| object.content().is_none())
        .and(object.file_hash());
    let doc = codec::DocRec {
        file_hash: object.file_hash().map(|h| h.0),
        content_hash: object.content_hash().map(|h| h.0),
        fields: object.metadata_json().to_string(),
    };
    let given =
        object.content().map_or(0, str::len) as i64 + kept.and(bytes).map_or(0, |b| b.len() as i64);
    let row = (
        object.object_hash().0,
        object.content_hash().map(|h| h.0),
        kept.map(|h| h.0),
        codec::encode(&doc)?,
    );
    Ok((row, given))
}

/// Stores the document of `object` (with `bytes` kept for a file whose content is null),
/// whose contents are there: the bytes put, for the store's count.
fn store_doc(t: &mut impl GenericClient, object: &Object, bytes: Option<&[u8]>) -> Result<i64> {
    let ((hash, content, kept, rec), given) = doc_row(object, bytes)?;
    t.run(
        "INSERT INTO strata_docs VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO UPDATE SET \
         kept_hash = coalesce(strata_docs.kept_hash, EXCLUDED.kept_hash)",
        &[
            &hash.as_slice(),
            &content.as_ref().map(<[u8; 32]>::as_slice),
            &kept.as_ref().map(<[u8; 32]>::as_slice),
            &rec,
        ],
    )
    .pg("storing a document")?;
    Ok(given)
}

/// Adds `given` to the count of bytes put.
fn count_put_bytes(t: &mut impl GenericClient, given: i64) -> Result<()> {
    if given == 0 {
        return Ok(());
    }
    t.run(
        "UPDATE strata_meta SET value = value + $1 WHERE name = 'put_bytes'",
        &[&given],
    )
    .pg("counting put bytes")?;
    Ok(())
}

/// Resolves a put into its op body, storing its document (its contents are there) and adding
/// the bytes it puts to `given`; also the number of its entity when it exists.
fn resolve_put(
    t: &mut impl GenericClient,
    put: &Put,
    tx_time: i64,
    given: &mut i64,
) -> Result<(OpRec, Option<u64>)> {
    let object = &put.object;
    let id = object.id();
    let existing = entity_row(t, id)?;
    let first = match &existing {
        Some((_, rec)) => {
            crate::store::ops::check_same_type(object, &rec.object_type)?;
            None
        }
        None => {
            if let Some(source) = object.source() {
                let fs = source.as_filesystem();
                let listed = t
                    .maybe_row(
                        "SELECT 1 FROM strata_paths WHERE fs = $1 AND path = $2",
                        &[&fs.filesystem_id.as_bytes(), &fs.path.as_bytes()],
                    )
                    .pg("looking up a path")?
                    .is_some();
                if listed {
                    return Err(Error::corrupt(format!(
                        "the store lists {:?} but has no entity {id} for it; run `strata fsck`",
                        fs.path
                    )));
                }
            }
            Some(FirstRec::of(object))
        }
    };
    let valid_from = match put.valid_from {
        ValidFrom::TxTime => tx_time,
        ValidFrom::At(at) => at.as_micros(),
        ValidFrom::MtimeClamped(mtime) => {
            let previous: Option<i64> = match &existing {
                Some((eid, _)) => t
                    .row(
                        "SELECT max(valid_from) FROM strata_versions WHERE eid = $1",
                        &[&big(*eid)],
                    )
                    .pg("reading the latest valid time")?
                    .get(0),
                None => None,
            };
            let floor = previous.map_or(Timestamp::MIN.as_micros(), |p| p + 1);
            mtime.as_micros().max(floor).min(tx_time)
        }
    };
    super::super::redb::check_range(id, valid_from, put.valid_to)?;
    *given += store_doc(t, object, put.kept_bytes())?;
    let body = OpRec::Write(WriteRec::put(id, valid_from, first, put, object));
    Ok((body, existing.map(|(eid, _)| eid)))
}

/// Writes `ops` as the transaction after `head` inside `t`; the new head.
fn write_tx(t: &mut impl GenericClient, ops: &[Op], origin: &Origin, head: Head) -> Result<Head> {
    let tx = head.tx + 1;
    let now = Timestamp::now().as_micros();
    let tx_time = if head.tx == 0 {
        now
    } else {
        now.max(head.tx_time + 1)
    };
    for op in ops {
        if let Op::Match { entity, expected } = op {
            let actual = current_hash(t, entity, tx_time)?;
            if actual != expected.map(|h| h.0) {
                let show = |h: Option<[u8; 32]>| h.map_or("absent".to_string(), hex::encode);
                return Err(Error::Conflict {
                    entity: entity.clone(),
                    expected: show(expected.map(|h| h.0)),
                    actual: show(actual),
                });
            }
        }
    }
    recheck_contents(t, ops)?;
    let mut state = TxState::default();
    let mut given = 0;
    let mut digests = Vec::with_capacity(ops.len());
    for (n, op) in ops.iter().enumerate() {
        let body = match op {
            Op::Put(put) => {
                let (body, eid) = resolve_put(t, put, tx_time, &mut given)?;
                state.known = Some((put.object.id().to_string(), eid));
                body
            }
            Op::Delete {
                entity,
                valid_from,
                valid_to,
            } => {
                let Some((eid, _)) = entity_row(t, entity)? else {
                    return Err(super::super::redb::unknown_entity(entity));
                };
                state.known = Some((entity.clone(), Some(eid)));
                let from = valid_from.map_or(tx_time, Timestamp::as_micros);
                super::super::redb::check_range(entity, from, *valid_to)?;
                OpRec::Write(WriteRec::delete(
                    entity.as_str().into(),
                    from,
                    valid_to.map(Timestamp::as_micros),
                ))
            }
            Op::Evict { entity } => {
                if entity_row(t, entity)?.is_none() {
                    return Err(super::super::redb::unknown_entity(entity));
                }
                OpRec::Evict {
                    entity: entity.as_str().into(),
                }
            }
            Op::Match { entity, expected } => OpRec::Match {
                entity: entity.as_str().into(),
                expected: expected.map(|h| h.0),
            },
        };
        let n = n as u32;
        t.run(
            "INSERT INTO strata_ops VALUES ($1, $2, $3)",
            &[&big(tx), &(n as i32), &codec::encode_op(&body, tx_time)?],
        )
        .pg("writing an op body")?;
        apply(t, tx, tx_time, n, &body, &mut state)?;
        digests.push(log::op_digest(&body)?);
    }
    if !state.evicted.is_empty() {
        // An eviction before a put of the same content released it (no document used it
        // yet): the put's document needs it again.
        recheck_contents(t, ops)?;
    }
    count_put_bytes(t, given)?;
    let header = log::seal_header(&head.chain, tx, tx_time, origin, digests)?;
    let chain = header.chain;
    t.run(
        "INSERT INTO strata_log VALUES ($1, $2)",
        &[&big(tx), &codec::encode_header(&header)?],
    )
    .pg("writing a log record")?;
    Ok(Head { tx, tx_time, chain })
}

/// Writes one request of a group op by op (its transaction, when it has ops, after `head`,
/// moving the head to it and `NOTIFY`ing `channel`; its stat cache changes) inside `t`; the
/// new head when it wrote a transaction. What the batched writer does not take (evictions).
pub(super) fn write_request(
    t: &mut impl GenericClient,
    request: &TxRequest,
    head: Head,
    channel: &str,
) -> Result<Option<Head>> {
    let written = if request.ops.is_empty() {
        None
    } else {
        let new = write_tx(t, &request.ops, &request.origin, head)?;
        move_head(t, new.tx, channel)?;
        Some(new)
    };
    if let Some(stat) = &request.stat {
        apply_stat(t, stat)?;
    }
    Ok(written)
}

/// Applies stat cache changes.
pub(super) fn apply_stat(t: &mut impl GenericClient, update: &StatUpdate) -> Result<()> {
    let fs = update.filesystem_id.as_bytes();
    for (path, entry) in &update.puts {
        let rec = StatRec {
            size: entry.stat.size,
            mtime_ns: entry.stat.mtime_ns,
            ctime_ns: entry.stat.ctime_ns,
            inode: entry.stat.inode,
            file_hash: entry.file_hash.0,
            scan_start_ns: entry.scan_start_ns,
        };
        t.run(
            "INSERT INTO strata_stat VALUES ($1, $2, $3) ON CONFLICT (fs, path) DO UPDATE SET \
             rec = EXCLUDED.rec",
            &[&fs, &path.as_bytes(), &codec::encode(&rec)?],
        )
        .pg("writing the stat cache")?;
    }
    for path in &update.removes {
        t.run(
            "DELETE FROM strata_stat WHERE fs = $1 AND path = $2",
            &[&fs, &path.as_bytes()],
        )
        .pg("writing the stat cache")?;
    }
    Ok(())
}

/// Moves the head to transaction `tx` and `NOTIFY`s `channel` with it (delivered when the
/// transaction commits).
fn move_head(t: &mut impl GenericClient, tx: u64, channel: &str) -> Result<()> {
    // One statement, one round trip.
    t.run(
        "WITH moved AS (UPDATE strata_head SET tx_id = $1, header = (SELECT header FROM \
         strata_log WHERE tx_id = $1) WHERE id = 1 RETURNING tx_id) SELECT pg_notify($2, \
         tx_id::text) FROM moved",
        &[&big(tx), &channel],
    )
    .pg("moving the head")?;
    Ok(())
}

impl PgStore {
    /// Appends `records` in one database transaction as this store's next transactions (see
    /// [`Backend::append_log`]), under the head lock, and `NOTIFY`s.
    pub(super) fn append_log(&self, records: &[ReplayRecord]) -> Result<()> {
        self.with_client(|client| {
            let mut t = client.transaction().pg("beginning an append")?;
            let mut head = head_for_write(&mut t, false)?;
            let mut given = 0;
            for record in records {
                let time = (head.tx > 0).then_some(head.tx_time);
                record.check_follows(head.tx, &head.chain, time)?;
                let (tx, tx_time) = (record.tx, record.header.tx_time);
                let mut state = TxState::default();
                for (n, op) in record.ops.iter().enumerate() {
                    let n = n as u32;
                    match op {
                        ReplayOp::Body { op, put } => {
                            if let Some(put) = put {
                                let kept = put.kept.as_deref();
                                let blobs = blobs_of(&put.object, kept)?
                                    .into_iter()
                                    .map(|(hash, bytes)| {
                                        let record: Box<dyn FnOnce() -> Vec<u8>> =
                                            Box::new(move || codec::encode_blob(bytes));
                                        (hash, record)
                                    })
                                    .collect();
                                ensure_contents(&mut t, blobs)?;
                                given += store_doc(&mut t, &put.object, kept)?;
                            }
                            t.run(
                                "INSERT INTO strata_ops VALUES ($1, $2, $3)",
                                &[&big(tx), &(n as i32), &codec::encode_op(op, tx_time)?],
                            )
                            .pg("writing an op body")?;
                            apply(&mut t, tx, tx_time, n, op, &mut state)?;
                        }
                        ReplayOp::Evicted { by } => {
                            t.run(
                                "INSERT INTO strata_evicted_ops VALUES ($1, $2, $3)",
                                &[&big(tx), &(n as i32), &big(*by)],
                            )
                            .pg("recording an eviction")?;
                        }
                    }
                }
                t.run(
                    "INSERT INTO strata_log VALUES ($1, $2)",
                    &[&big(tx), &codec::encode_header(&record.header)?],
                )
                .pg("writing a log record")?;
                head = Head {
                    tx,
                    tx_time,
                    chain: record.header.chain,
                };
            }
            count_put_bytes(&mut t, given)?;
            move_head(&mut t, head.tx, &self.location.channel())?;
            t.commit().pg("committing an append")
        })
    }
}
