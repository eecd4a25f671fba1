//! Group commits in few round trips. One database transaction per group: its contents are
//! uploaded first (idempotent by hash, before any lock), then the head row is locked and each
//! request is written with one statement that reads everything it needs (entities, the version
//! rows its writes can touch, its matches' current versions, its contents) and one that writes
//! it (op bodies, matches, documents, entities, paths, versions, log record, put-bytes count,
//! head, `NOTIFY`). A request that evicts is written op by op (`write::write_request`).
//!
//! The commit itself is asynchronous (`synchronous_commit = off`), so the head row's lock is
//! released without waiting for the WAL flush; the same round trip then commits a tiny
//! transaction synchronously, which waits until the WAL holds everything before it, ours too.
//! A request is answered only then: what it was told is durable, as before. Other sessions may
//! see a commit up to one flush earlier, and a commit lost in a crash before the flush takes
//! every later one with it (the WAL is flushed in order), so ids stay gapless and the chain
//! whole.
//!
//! A request that fails a check (a match conflict, an unknown entity, a type change) has
//! written nothing, so no savepoint is needed; one whose statement fails in the database spoils
//! the transaction: it is rolled back and the group written again without that request.

use std::collections::HashSet;

use postgres::Client;

use super::rule::Row;
use super::write::{self, DocRow, Head};
use super::*;
use crate::store::codec::{FirstRec, OpRec, WriteRec};
use crate::store::log;
use crate::store::{Put, ValidFrom};

/// Contents larger than this are looked up before they are sent; smaller ones are sent with
/// their insert (a lookup costs more than sending them).
const LOOKUP_ABOVE: usize = 64 << 10;

/// How a request of a group failed.
enum Failed {
    /// It wrote nothing: the transaction goes on without it.
    Clean(Error),
    /// A statement of it failed in the database: the transaction must be rolled back.
    Spoiled(Error),
}

/// What one try at writing a group came to.
enum Attempt {
    /// Committed (or nothing to commit): the receipts of the requests written, and the errors
    /// of those that failed.
    Done {
        receipts: Vec<(usize, Option<TxReceipt>)>,
        failed: Vec<(usize, Error)>,
    },
    /// Request `.0` spoiled the transaction with error `.1`; it was rolled back.
    Again(usize, Error),
}

impl PgStore {
    /// Writes a group of requests in one database transaction, each with its own tx id, as if
    /// one after another; a request that fails changes nothing.
    pub(super) fn commit_group(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.commit_group_as(group, false)
    }

    /// [`PgStore::commit_group`], of evictions let through a damage mark when `erasure`
    /// ([`PgStore::erasable_damage`] said the damage does not stop them).
    pub(super) fn commit_group_as(
        &self,
        group: Vec<TxRequest>,
        erasure: bool,
    ) -> Vec<Result<Option<TxReceipt>>> {
        if self.check_writable().is_err() {
            return group
                .iter()
                .map(|_| self.check_writable().map(|()| None))
                .collect();
        }
        if let Some(reason) = self.remembered_damage().filter(|_| !erasure) {
            return group
                .iter()
                .map(|_| Err(crate::store::damage::refusal(&reason)))
                .collect();
        }
        let mut results: Vec<Option<Result<Option<TxReceipt>>>> = group
            .iter()
            .map(|request| {
                let checked = if !request.ops.is_empty() || request.stat.is_none() {
                    super::super::redb::check_ops(&request.ops)
                } else {
                    Ok(())
                };
                checked.err().map(Err)
            })
            .collect();
        let channel = self.location.channel();
        let outcome = self.with_client(|client| {
            loop {
                let pending: Vec<usize> =
                    (0..group.len()).filter(|&i| results[i].is_none()).collect();
                if pending.is_empty() {
                    return Ok(Vec::new());
                }
                let attempt = attempt(client, &group, &pending, &channel, erasure);
                if !matches!(attempt, Ok(Attempt::Done { .. })) {
                    // Best effort: a broken connection is not pooled again.
                    let _ = client.batch_execute("ROLLBACK");
                }
                match attempt? {
                    Attempt::Done { receipts, failed } => {
                        for (i, e) in failed {
                            results[i] = Some(Err(e));
                        }
                        return Ok(receipts);
                    }
                    Attempt::Again(i, e) => results[i] = Some(Err(e)),
                }
            }
        });
        match outcome {
            Ok(receipts) => {
                for (i, receipt) in receipts {
                    results[i] = Some(Ok(receipt));
                }
            }
            Err(e) => {
                // Each request gets the error, of its kind (a damaged store's refusal stays one).
                let message = e.full_message();
                for result in results.iter_mut().filter(|r| r.is_none()) {
                    *result = Some(Err(match &e {
                        Error::Corrupt { what } => Error::corrupt(what.clone()),
                        _ => Error::storage("committing a group", message.clone()),
                    }));
                }
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Err(Error::invariant("a commit left a request unanswered")))
            })
            .collect()
    }
}

/// One try at writing the requests `pending` of `group` in one database transaction (left open
/// on anything but [`Attempt::Done`]: the caller rolls it back); through a damage mark when
/// `erasure`.
fn attempt(
    c: &mut Client,
    group: &[TxRequest],
    pending: &[usize],
    channel: &str,
    erasure: bool,
) -> Result<Attempt> {
    // Its statements are planned once per connection: each gets the same plan whatever its
    // arrays hold, and planning them again at every commit cost more than running them.
    c.batch_execute(
        "BEGIN; SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = \
         force_generic_plan",
    )
    .pg("beginning a commit")?;
    let mut failed: Vec<(usize, Error)> = Vec::new();
    let mut uploaded: Vec<(usize, Vec<[u8; 32]>)> = Vec::new();
    for &i in pending {
        match upload(c, &group[i].ops) {
            Ok(hashes) => uploaded.push((i, hashes)),
            Err(Failed::Clean(e)) => failed.push((i, e)),
            Err(Failed::Spoiled(e)) => return Ok(Attempt::Again(i, e)),
        }
    }
    let mut head = write::head_for_write(c, erasure)?;
    let alone = pending.len() - failed.len() == 1;
    let mut receipts = Vec::new();
    for &i in pending {
        if failed.iter().any(|(f, _)| *f == i) {
            continue;
        }
        let request = &group[i];
        let written = if request.ops.iter().any(|op| matches!(op, Op::Evict { .. })) {
            one_by_one(c, request, head, alone, channel)
        } else {
            batched(c, request, head, channel)
        };
        match written {
            Ok(Some(new)) => {
                head = new;
                receipts.push((
                    i,
                    Some(TxReceipt {
                        tx_id: TxId(new.tx),
                        tx_time: ts(new.tx_time),
                    }),
                ));
            }
            Ok(None) => receipts.push((i, None)),
            Err(Failed::Clean(e)) => failed.push((i, e)),
            Err(Failed::Spoiled(e)) => return Ok(Attempt::Again(i, e)),
        }
    }
    if receipts.is_empty() {
        // Nothing to keep (the uploads go with the rollback).
        c.batch_execute("ROLLBACK").pg("rolling back a commit")?;
        return Ok(Attempt::Done { receipts, failed });
    }
    // Contents uploaded for requests that failed go again (nothing of a failed request stays);
    // a document of this transaction that uses one keeps it.
    for (i, hashes) in &uploaded {
        if failed.iter().any(|(f, _)| f == i) {
            for hash in hashes {
                write::release_content(c, hash)?;
            }
        }
    }
    // The commit releases the head at once; the synchronous transaction after it returns when
    // the WAL is flushed up to it, and so past this commit.
    c.batch_execute("COMMIT; SELECT pg_logical_emit_message(true, 'strata', '')")
        .pg("committing")?;
    Ok(Attempt::Done { receipts, failed })
}

/// Uploads the contents of the puts of `ops` inside the open transaction, before the head is
/// locked: the hashes it stored.
fn upload(c: &mut Client, ops: &[Op]) -> std::result::Result<Vec<[u8; 32]>, Failed> {
    let mut blobs: Vec<([u8; 32], &[u8], &Put)> = Vec::new();
    let mut seen = HashSet::new();
    for op in ops {
        if let Op::Put(put) = op {
            for (hash, bytes) in write::put_blobs(put).map_err(Failed::Clean)? {
                if seen.insert(hash) {
                    blobs.push((hash, bytes, put));
                }
            }
        }
    }
    let large: Vec<&[u8]> = blobs
        .iter()
        .filter(|(_, bytes, _)| bytes.len() > LOOKUP_ABOVE)
        .map(|(hash, _, _)| hash.as_slice())
        .collect();
    if !large.is_empty() {
        let there: HashSet<Vec<u8>> = c
            .rows(
                "SELECT hash FROM strata_contents WHERE hash = ANY($1)",
                &[&large],
            )
            .pg("looking up contents")
            .map_err(Failed::Spoiled)?
            .into_iter()
            .map(|row| row.get(0))
            .collect();
        blobs.retain(|(hash, _, _)| !there.contains(hash.as_slice()));
    }
    let records = blobs.into_iter().map(|(hash, bytes, put)| {
        let record = put
            .encoded
            .as_ref()
            .and_then(|e| e.record_for(&hash, bytes))
            .map_or_else(|| codec::encode_blob(bytes), std::borrow::Cow::into_owned);
        (hash, record)
    });
    Ok(write::insert_contents(c, records)
        .map_err(Failed::Spoiled)?
        .into_iter()
        .map(|(hash, _)| hash)
        .collect())
}

/// Writes a request that evicts op by op, under a savepoint unless it is alone.
fn one_by_one(
    c: &mut Client,
    request: &TxRequest,
    head: Head,
    alone: bool,
    channel: &str,
) -> std::result::Result<Option<Head>, Failed> {
    if alone {
        // Nothing else to keep: a failure rolls the transaction back.
        return write::write_request(c, request, head, channel).map_err(Failed::Clean);
    }
    let spoiled = |e| Failed::Spoiled(e);
    c.batch_execute("SAVEPOINT request")
        .pg("beginning a request")
        .map_err(spoiled)?;
    match write::write_request(c, request, head, channel) {
        Ok(written) => {
            c.batch_execute("RELEASE SAVEPOINT request")
                .pg("ending a request")
                .map_err(spoiled)?;
            Ok(written)
        }
        Err(e) => {
            c.batch_execute("ROLLBACK TO SAVEPOINT request")
                .pg("rolling back a request")
                .map_err(spoiled)?;
            Err(Failed::Clean(e))
        }
    }
}

/// What the read statement found for one op's entity.
#[derive(Default)]
struct Seen {
    /// The entity: (number, record).
    entity: Option<(u64, EntityRec)>,
    /// The path a new file would take is listed already.
    listed: bool,
    /// The version rows from the greatest valid_from at or before the op's start on.
    rows: Vec<Row>,
}

/// The rows one request writes, gathered per table for its one write statement.
#[derive(Default)]
struct Rows {
    ops: (Vec<i32>, Vec<Vec<u8>>),
    matches: (Vec<Vec<u8>>, Vec<i32>),
    entities: (Vec<Vec<u8>>, Vec<i64>, Vec<Vec<u8>>),
    paths: (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<i64>),
    docs: Vec<DocRow>,
    versions: Versions,
}

/// Version rows by column: entity number, valid_from, object hash, record.
#[derive(Default)]
struct Versions(Vec<i64>, Vec<i64>, Vec<Option<[u8; 32]>>, Vec<Vec<u8>>);

/// What the read statement reads for one op: its entity id, the valid time its rows are
/// needed from, and (filesystem id, path) when it puts a file.
type Wanted<'a> = (&'a str, i64, Option<(Vec<u8>, Vec<u8>)>);

/// Writes a request without evictions in two statements (see the module); the new head when
/// it wrote a transaction.
fn batched(
    c: &mut Client,
    request: &TxRequest,
    head: Head,
    channel: &str,
) -> std::result::Result<Option<Head>, Failed> {
    let written = if request.ops.is_empty() {
        None
    } else {
        Some(batched_tx(c, &request.ops, &request.origin, head, channel)?)
    };
    if let Some(stat) = &request.stat {
        write::apply_stat(c, stat).map_err(Failed::Spoiled)?;
    }
    Ok(written)
}

/// The rows of `rows` (a suffix of an entity's rows in (valid_from, tx) order, holding the
/// greatest valid_from at or before `start` when there is one) a write starting at `start` can
/// touch: the same as `write::window` reads.
fn window(rows: &[Row], start: i64) -> &[Row] {
    let Some(last) = rows.iter().rposition(|r| r.vt <= start) else {
        return rows;
    };
    let vt = rows[last].vt;
    let first = rows.iter().position(|r| r.vt == vt).unwrap_or(last);
    &rows[first..]
}

/// Reads what the ops of one transaction need (one entry per op: its entity id, the valid time
/// its rows are needed from, the path a new file would take), in one statement; also how many
/// of `contents` are there and the number the next new entity gets.
fn read_ops(
    c: &mut Client,
    wanted: &[Wanted<'_>],
    contents: &[&[u8]],
) -> std::result::Result<(Vec<Seen>, usize, i64), Failed> {
    let ids: Vec<&[u8]> = wanted.iter().map(|(id, _, _)| id.as_bytes()).collect();
    let starts: Vec<i64> = wanted.iter().map(|(_, start, _)| *start).collect();
    let fss: Vec<Option<&[u8]>> = wanted
        .iter()
        .map(|(_, _, p)| p.as_ref().map(|(fs, _)| fs.as_slice()))
        .collect();
    let paths: Vec<Option<&[u8]>> = wanted
        .iter()
        .map(|(_, _, p)| p.as_ref().map(|(_, path)| path.as_slice()))
        .collect();
    // The lateral subqueries keep the joins nested loops over the indexes (the planner
    // guesses 100 rows for an unnest and would scan whole tables otherwise).
    let rows = c
        .rows(
            "SELECT q.k, e.eid, e.rec, p.listed, v.valid_from, v.tx_id, v.rec, (SELECT count(*) \
             FROM strata_contents WHERE hash = ANY($5)), (SELECT coalesce(max(eid), 0) + 1 FROM \
             strata_entities) FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::bytea[]) \
             WITH ORDINALITY AS q(id, start, fs, path, k) LEFT JOIN LATERAL (SELECT eid, rec \
             FROM strata_entities WHERE id = q.id LIMIT 1) e ON true LEFT JOIN LATERAL (SELECT \
             true AS listed FROM strata_paths WHERE e.eid IS NULL AND fs = q.fs AND path = \
             q.path LIMIT 1) p ON true LEFT JOIN LATERAL (SELECT valid_from, tx_id, rec FROM \
             strata_versions WHERE eid = e.eid AND valid_from >= coalesce((SELECT \
             max(valid_from) FROM strata_versions WHERE eid = e.eid AND valid_from <= q.start), \
             -9223372036854775808) ORDER BY valid_from, tx_id) v ON true ORDER BY q.k, \
             v.valid_from, v.tx_id",
            &[&ids, &starts, &fss, &paths, &contents],
        )
        .pg("reading what a commit needs")
        .map_err(Failed::Spoiled)?;
    let clean = Failed::Clean;
    let mut seen: Vec<Seen> = wanted.iter().map(|_| Seen::default()).collect();
    let (mut there, mut next_eid) = (0, 1);
    for row in rows {
        let k: i64 = row.get(0);
        let (id, _, _) = wanted[usize::try_from(k - 1).unwrap_or(0)];
        let s = &mut seen[usize::try_from(k - 1).unwrap_or(0)];
        if s.entity.is_none()
            && let Some(eid) = row.get::<_, Option<i64>>(1)
        {
            s.entity = Some(entity_of(id, eid, row.get(2)).map_err(clean)?);
        }
        s.listed |= row.get::<_, Option<bool>>(3).unwrap_or(false);
        if let Some(vt) = row.get::<_, Option<i64>>(4) {
            s.rows
                .push(read::row_of(vt, row.get(5), row.get(6)).map_err(clean)?);
        }
        there = usize::try_from(row.get::<_, i64>(7)).unwrap_or(0);
        next_eid = row.get(8);
    }
    Ok((seen, there, next_eid))
}

/// Writes `ops` (no evictions) as the transaction after `head`: one statement reads, checks
/// run in memory, one statement writes. The new head.
fn batched_tx(
    c: &mut Client,
    ops: &[Op],
    origin: &Origin,
    head: Head,
    channel: &str,
) -> std::result::Result<Head, Failed> {
    let clean = Failed::Clean;
    let tx = head.tx + 1;
    let now = Timestamp::now().as_micros();
    let tx_time = if head.tx == 0 {
        now
    } else {
        now.max(head.tx_time + 1)
    };
    // Per op: its entity, the valid time its rows are needed from (a write's start, or a
    // lower bound of it; a match's now), and for a put of a file the path it takes.
    let mut wanted = Vec::with_capacity(ops.len());
    let mut contents: Vec<[u8; 32]> = Vec::new();
    for op in ops {
        wanted.push(match op {
            Op::Match { entity, .. } => (entity.as_str(), tx_time, None),
            Op::Put(put) => {
                for (hash, _) in write::put_blobs(put).map_err(clean)? {
                    if !contents.contains(&hash) {
                        contents.push(hash);
                    }
                }
                let start = match put.valid_from {
                    ValidFrom::TxTime => tx_time,
                    ValidFrom::At(at) => at.as_micros(),
                    ValidFrom::MtimeClamped(mtime) => mtime.as_micros().min(tx_time),
                };
                let path = put.object.source().map(|source| {
                    let fs = source.as_filesystem();
                    (
                        fs.filesystem_id.as_bytes().to_vec(),
                        fs.path.as_bytes().to_vec(),
                    )
                });
                (put.object.id(), start, path)
            }
            Op::Delete {
                entity, valid_from, ..
            } => (
                entity.as_str(),
                valid_from.map_or(tx_time, Timestamp::as_micros),
                None,
            ),
            Op::Evict { .. } => {
                return Err(clean(Error::invariant(
                    "an eviction reached the batched commit",
                )));
            }
        });
    }
    let hashes: Vec<&[u8]> = contents.iter().map(<[u8; 32]>::as_slice).collect();
    let (seen, there, mut next_eid) = read_ops(c, &wanted, &hashes)?;
    if there < contents.len() {
        // An eviction or gc took an uploaded content before the lock: upload it again.
        write::recheck_contents(c, ops).map_err(Failed::Spoiled)?;
    }
    for (op, s) in ops.iter().zip(&seen) {
        if let Op::Match { entity, expected } = op {
            let actual = s
                .rows
                .iter()
                .rfind(|r| r.vt <= tx_time)
                .and_then(|r| r.rec.object_hash);
            if actual != expected.map(|h| h.0) {
                let show = |h: Option<[u8; 32]>| h.map_or("absent".to_string(), hex::encode);
                return Err(clean(Error::Conflict {
                    entity: entity.clone(),
                    expected: show(expected.map(|h| h.0)),
                    actual: show(actual),
                }));
            }
        }
    }
    let mut rows = Rows::default();
    let mut given = 0;
    let mut digests = Vec::with_capacity(ops.len());
    for (n, (op, s)) in ops.iter().zip(&seen).enumerate() {
        let n = n as u32;
        let body = match op {
            Op::Put(put) => {
                let (body, put_bytes) = put_body(put, s, tx_time, &mut rows).map_err(clean)?;
                given += put_bytes;
                body
            }
            Op::Delete {
                entity,
                valid_from,
                valid_to,
            } => {
                if s.entity.is_none() {
                    return Err(clean(super::super::redb::unknown_entity(entity)));
                }
                let from = valid_from.map_or(tx_time, Timestamp::as_micros);
                super::super::redb::check_range(entity, from, *valid_to).map_err(clean)?;
                OpRec::Write(WriteRec::delete(
                    entity.as_str().into(),
                    from,
                    valid_to.map(Timestamp::as_micros),
                ))
            }
            Op::Match { entity, expected } => OpRec::Match {
                entity: entity.as_str().into(),
                expected: expected.map(|h| h.0),
            },
            Op::Evict { .. } => {
                return Err(clean(Error::invariant(
                    "an eviction reached the batched commit",
                )));
            }
        };
        rows.ops.0.push(n as i32);
        rows.ops
            .1
            .push(codec::encode_op(&body, tx_time).map_err(clean)?);
        match &body {
            OpRec::Write(w) => {
                let eid = match (&s.entity, &w.first) {
                    (Some((eid, _)), _) => *eid,
                    (None, Some(first)) => {
                        let eid = next_eid;
                        next_eid += 1;
                        rows.entity(&w.entity, eid, first).map_err(clean)?;
                        unbig(eid)
                    }
                    (None, None) => {
                        return Err(clean(super::super::redb::unknown_entity(&w.entity)));
                    }
                };
                for (vt, rec) in
                    write::planned_versions(w, n, window(&s.rows, w.valid_from), tx_time)
                {
                    rows.versions.0.push(big(eid));
                    rows.versions.1.push(vt);
                    rows.versions.2.push(rec.object_hash);
                    rows.versions.3.push(codec::encode(&rec).map_err(clean)?);
                }
            }
            OpRec::Match { entity, .. } => {
                rows.matches.0.push(entity.as_bytes().to_vec());
                rows.matches.1.push(n as i32);
            }
            OpRec::Evict { .. } => {}
        }
        digests.push(log::op_digest(&body).map_err(clean)?);
    }
    let header = log::seal_header(&head.chain, tx, tx_time, origin, digests).map_err(clean)?;
    let encoded = codec::encode_header(&header).map_err(clean)?;
    rows.write(c, tx, &encoded, given, channel)
        .map_err(Failed::Spoiled)?;
    Ok(Head {
        tx,
        tx_time,
        chain: header.chain,
    })
}

/// The op body of `put` (whose entity the read found as `s`), its document added to `rows`;
/// also the bytes it puts.
fn put_body(put: &Put, s: &Seen, tx_time: i64, rows: &mut Rows) -> Result<(OpRec, i64)> {
    let object = &put.object;
    let id = object.id();
    let first = match &s.entity {
        Some((_, rec)) => {
            crate::store::ops::check_same_type(object, &rec.object_type)?;
            None
        }
        None if s.listed => {
            let path = object.source().map(|s| s.as_filesystem().path.clone());
            return Err(Error::corrupt(format!(
                "the store lists {path:?} but has no entity {id} for it; run `strata fsck`"
            )));
        }
        None => Some(FirstRec::of(object)),
    };
    let valid_from = match put.valid_from {
        ValidFrom::TxTime => tx_time,
        ValidFrom::At(at) => at.as_micros(),
        ValidFrom::MtimeClamped(mtime) => {
            // The rows read reach the entity's latest valid_from (they run to its end).
            let previous = s.rows.iter().map(|r| r.vt).max();
            let floor = previous.map_or(Timestamp::MIN.as_micros(), |p| p + 1);
            mtime.as_micros().max(floor).min(tx_time)
        }
    };
    super::super::redb::check_range(id, valid_from, put.valid_to)?;
    let (doc, given) = write::doc_row(object, put.kept_bytes())?;
    match rows.docs.iter_mut().find(|d| d.0 == doc.0) {
        Some(same) => same.2 = same.2.or(doc.2),
        None => rows.docs.push(doc),
    }
    let body = OpRec::Write(WriteRec::put(id, valid_from, first, put, object));
    Ok((body, given))
}

impl Rows {
    /// Adds new entity `id`, number `eid`, made by a write whose first record is `first`.
    fn entity(&mut self, id: &str, eid: i64, first: &FirstRec) -> Result<()> {
        let rec = write::entity_rec(unbig(eid), first);
        self.entities.0.push(id.as_bytes().to_vec());
        self.entities.1.push(eid);
        self.entities.2.push(codec::encode(&rec)?);
        if let Some((filesystem_id, path)) = &first.source {
            self.paths.0.push(filesystem_id.as_bytes().to_vec());
            self.paths.1.push(path.as_bytes().to_vec());
            self.paths.2.push(eid);
        }
        Ok(())
    }

    /// Writes the rows as transaction `tx` with log header `header`, adds `given` to the bytes
    /// put, moves the head and `NOTIFY`s `channel`: one statement.
    fn write(
        &self,
        c: &mut Client,
        tx: u64,
        header: &[u8],
        given: i64,
        channel: &str,
    ) -> Result<()> {
        fn slice(h: &Option<[u8; 32]>) -> Option<&[u8]> {
            h.as_ref().map(<[u8; 32]>::as_slice)
        }
        let doc_hash: Vec<&[u8]> = self.docs.iter().map(|d| d.0.as_slice()).collect();
        let doc_content: Vec<Option<&[u8]>> = self.docs.iter().map(|d| slice(&d.1)).collect();
        let doc_kept: Vec<Option<&[u8]>> = self.docs.iter().map(|d| slice(&d.2)).collect();
        let doc_rec: Vec<&[u8]> = self.docs.iter().map(|d| d.3.as_slice()).collect();
        let version_hash: Vec<Option<&[u8]>> = self.versions.2.iter().map(slice).collect();
        c.run(
            "WITH o AS (INSERT INTO strata_ops SELECT $1::bigint, n, body FROM unnest($2::int[], \
             $3::bytea[]) AS x(n, body)), m AS (INSERT INTO strata_matches SELECT id, \
             $1::bigint, n FROM unnest($4::bytea[], $5::int[]) AS x(id, n)), e AS (INSERT INTO \
             strata_entities SELECT * FROM unnest($6::bytea[], $7::bigint[], $8::bytea[])), p AS \
             (INSERT INTO strata_paths SELECT * FROM unnest($9::bytea[], $10::bytea[], \
             $11::bigint[])), d AS (INSERT INTO strata_docs SELECT * FROM unnest($12::bytea[], \
             $13::bytea[], $14::bytea[], $15::bytea[]) ON CONFLICT (hash) DO UPDATE SET \
             kept_hash = coalesce(strata_docs.kept_hash, EXCLUDED.kept_hash)), v AS (INSERT INTO \
             strata_versions SELECT eid, vt, $1::bigint, h, rec FROM unnest($16::bigint[], \
             $17::bigint[], $18::bytea[], $19::bytea[]) AS x(eid, vt, h, rec)), l AS (INSERT \
             INTO strata_log VALUES ($1::bigint, $20::bytea)), b AS (UPDATE strata_meta SET \
             value = value + $21::bigint WHERE name = 'put_bytes' AND $21::bigint <> 0), h AS \
             (UPDATE strata_head SET tx_id = $1::bigint, header = $20::bytea WHERE id = 1 \
             RETURNING tx_id) SELECT pg_notify($22::text, tx_id::text) FROM h",
            &[
                &big(tx),
                &self.ops.0,
                &self.ops.1,
                &self.matches.0,
                &self.matches.1,
                &self.entities.0,
                &self.entities.1,
                &self.entities.2,
                &self.paths.0,
                &self.paths.1,
                &self.paths.2,
                &doc_hash,
                &doc_content,
                &doc_kept,
                &doc_rec,
                &self.versions.0,
                &self.versions.1,
                &version_hash,
                &self.versions.3,
                &header,
                &given,
                &channel,
            ],
        )
        .pg("writing a transaction")?;
        Ok(())
    }
}
