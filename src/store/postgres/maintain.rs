//! Maintenance: fsck (the log, then every content and document, then the derived tables
//! against a replay of the log in memory), the rebuild of the derived tables from the log,
//! gc, and restoring damaged contents. Each takes the head row's lock where it writes, so it is
//! serialized with commits from every process.

use std::collections::{BTreeMap, HashMap, HashSet};

use postgres::GenericClient;

use super::rule::{self, Row};
use super::write::{self, TxState};
use super::*;
use crate::store::answers::finding;
use crate::store::codec::{DocRec, FirstRec, OpRec, TxHeaderRec, VersionRec};
use crate::store::log;

/// The log read whole: headers by tx and the bodies that hash to their digests.
#[derive(Default)]
struct Log {
    headers: BTreeMap<u64, TxHeaderRec>,
    bodies: BTreeMap<(u64, u32), OpRec>,
}

/// Reads and checks the whole log: consecutive ids from 1, the chain, every body against its
/// digest, every missing body against the record of evictions, the head against the last.
fn check_log(t: &mut impl GenericClient, layout: i64, out: &mut Vec<Finding>) -> Result<Log> {
    let mut log = Log::default();
    let mut previous = [0u8; 32];
    let mut expected = 1u64;
    for row in t
        .rows("SELECT tx_id, header FROM strata_log ORDER BY tx_id", &[])
        .pg("reading the log")?
    {
        let tx = unbig(row.get(0));
        if tx != expected {
            out.push(Finding {
                tx: Some(expected),
                ..finding(
                    "log",
                    format!("tx {expected}"),
                    "the log has no record of it",
                )
            });
        }
        expected = tx + 1;
        let header = match codec::decode_header(row.get(1), &format!("header of tx {tx}")) {
            Ok(header) => header,
            Err(e) => {
                out.push(Finding {
                    tx: Some(tx),
                    ..finding("log", format!("tx {tx}"), e.to_string())
                });
                continue;
            }
        };
        let chain = log::next_chain(&previous, tx, &header)?;
        if chain != header.chain {
            out.push(Finding {
                tx: Some(tx),
                ..finding(
                    "chain",
                    format!("tx {tx}"),
                    "the record does not chain from the one before it",
                )
            });
        }
        previous = header.chain;
        log.headers.insert(tx, header);
    }
    let head = write::head(t, false)?;
    if head.tx != expected - 1 {
        out.push(finding(
            "head",
            "strata_head",
            format!(
                "the head names tx {}, the log ends at {}",
                head.tx,
                expected - 1
            ),
        ));
    }
    if layout >= 2 {
        let agrees: bool = t
            .row(
                "SELECT h.header IS NOT DISTINCT FROM (SELECT l.header FROM strata_log l WHERE \
                 l.tx_id = h.tx_id) FROM strata_head h WHERE h.id = 1",
                &[],
            )
            .pg("reading the head")?
            .get(0);
        if !agrees {
            out.push(finding(
                "head",
                "strata_head",
                format!(
                    "the head's copy of the header of tx {} is not the log's",
                    head.tx
                ),
            ));
        }
    }
    let evicted: HashSet<(u64, u32)> = t
        .rows("SELECT tx_id, n FROM strata_evicted_ops", &[])
        .pg("reading evictions")?
        .iter()
        .map(|r| (unbig(r.get(0)), r.get::<_, i32>(1) as u32))
        .collect();
    let mut seen = HashSet::new();
    for row in t
        .rows("SELECT tx_id, n, body FROM strata_ops", &[])
        .pg("reading op bodies")?
    {
        let (tx, n) = (unbig(row.get(0)), row.get::<_, i32>(1) as u32);
        seen.insert((tx, n));
        let Some(header) = log.headers.get(&tx) else {
            out.push(finding(
                "log",
                format!("op {n} of tx {tx}"),
                "a body of no logged tx",
            ));
            continue;
        };
        match read::checked_body(row.get(2), tx, n, header) {
            Ok(op) => {
                log.bodies.insert((tx, n), op);
            }
            Err(e) => out.push(Finding {
                tx: Some(tx),
                ..finding("log", format!("op {n} of tx {tx}"), e.to_string())
            }),
        }
    }
    for (tx, header) in &log.headers {
        for n in 0..header.digests.len() as u32 {
            if !seen.contains(&(*tx, n)) && !evicted.contains(&(*tx, n)) {
                out.push(Finding {
                    tx: Some(*tx),
                    ..finding(
                        "log",
                        format!("op {n} of tx {tx}"),
                        "its body is missing and no eviction removed it",
                    )
                });
            }
        }
    }
    Ok(log)
}

/// One entity as the replay of the log makes it.
struct Replayed {
    first: FirstRec,
    rows: BTreeMap<(i64, u64), VersionRec>,
}

/// Replays the log's bodies in memory: the entities and version rows they make.
fn replay(log: &Log) -> HashMap<String, Replayed> {
    let mut entities: HashMap<String, Replayed> = HashMap::new();
    for ((tx, n), op) in &log.bodies {
        let Some(header) = log.headers.get(tx) else {
            continue;
        };
        match op {
            OpRec::Write(w) => {
                if !entities.contains_key(&w.entity.0) {
                    let Some(first) = &w.first else { continue };
                    entities.insert(
                        w.entity.0.clone(),
                        Replayed {
                            first: first.clone(),
                            rows: BTreeMap::new(),
                        },
                    );
                }
                let Some(entity) = entities.get_mut(&w.entity.0) else {
                    continue;
                };
                let from = entity
                    .rows
                    .range(..=(w.valid_from, u64::MAX))
                    .next_back()
                    .map_or(i64::MIN, |((vt, _), _)| *vt);
                let window: Vec<Row> = entity
                    .rows
                    .range((from, 0)..)
                    .map(|((vt, tx), rec)| Row {
                        vt: *vt,
                        tx: *tx,
                        rec: rec.clone(),
                    })
                    .collect();
                let new = VersionRec {
                    object_hash: w.object_hash,
                    tx_after: 0,
                    op: *n,
                    restored: false,
                    size: w.size,
                    spelling: w.spelling.clone(),
                    content_omitted: w.content_omitted,
                };
                for (vt, rec) in
                    rule::plan_write(&window, w.valid_from, w.valid_to, &new, header.tx_time)
                {
                    entity.rows.insert((vt, *tx), rec);
                }
            }
            OpRec::Evict { entity } => {
                entities.remove(&entity.0);
            }
            OpRec::Match { .. } => {}
        }
    }
    entities
}

/// The entities as stored, by id: record and version rows.
type Stored = HashMap<String, (EntityRec, BTreeMap<(i64, u64), VersionRec>)>;

/// Verifies the whole store (of layout version `layout`); one finding per problem.
pub(super) fn fsck(client: &mut Client, layout: i64) -> Result<Vec<Finding>> {
    let mut t = super::snapshot(client, "beginning fsck")?;
    let mut out = Vec::new();
    let log = check_log(&mut t, layout, &mut out)?;
    let expected = replay(&log);
    // The entities and their version rows against the replay.
    let mut stored: Stored = HashMap::new();
    let mut by_eid = HashMap::new();
    for row in t
        .rows("SELECT id, eid, rec FROM strata_entities", &[])
        .pg("reading entities")?
    {
        let id = String::from_utf8_lossy(row.get(0)).into_owned();
        match entity_of(&id, row.get(1), row.get(2)) {
            Ok((eid, rec)) => {
                by_eid.insert(eid, id.clone());
                stored.insert(id, (rec, BTreeMap::new()));
            }
            Err(e) => out.push(finding("entities", id, e.to_string())),
        }
    }
    for row in t
        .rows(
            "SELECT eid, valid_from, tx_id, rec FROM strata_versions",
            &[],
        )
        .pg("reading versions")?
    {
        let eid = unbig(row.get(0));
        let Some(id) = by_eid.get(&eid) else {
            out.push(finding(
                "versions",
                format!("entity number {eid}"),
                "version rows of no entity",
            ));
            continue;
        };
        match codec::decode::<VersionRec>(row.get(3), "version record") {
            Ok(rec) => {
                if let Some((_, rows)) = stored.get_mut(id) {
                    rows.insert((row.get(1), unbig(row.get(2))), rec);
                }
            }
            Err(e) => out.push(finding("versions", id.clone(), e.to_string())),
        }
    }
    let mut ids: Vec<&String> = expected.keys().chain(stored.keys()).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let named = |kind, detail: String| Finding {
            entity: Some(id.clone()),
            ..finding(kind, id.clone(), detail)
        };
        match (expected.get(id), stored.get(id)) {
            (Some(want), Some((rec, rows))) => {
                if want.rows != *rows {
                    out.push(named(
                        "versions",
                        format!(
                            "{} version rows, the log makes {}",
                            rows.len(),
                            want.rows.len()
                        ),
                    ));
                }
                if want.first.object_type != rec.object_type || want.first.source != rec.source {
                    out.push(named(
                        "entities",
                        "its type or source differs from its first write".into(),
                    ));
                }
            }
            (Some(_), None) => {
                out.push(named("entities", "the log makes it; it is missing".into()))
            }
            (None, Some(_)) => out.push(named("entities", "the log does not make it".into())),
            (None, None) => {}
        }
    }
    // Paths against the entities' sources.
    let mut paths = HashSet::new();
    for row in t
        .rows("SELECT fs, path, eid FROM strata_paths", &[])
        .pg("reading paths")?
    {
        let (fs, path): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
        let (fs, path) = (
            String::from_utf8_lossy(&fs).into_owned(),
            String::from_utf8_lossy(&path).into_owned(),
        );
        let owner = by_eid.get(&unbig(row.get(2))).and_then(|id| stored.get(id));
        let matches = owner.is_some_and(|(rec, _)| {
            rec.source
                .as_ref()
                .is_some_and(|(f, p)| f.0 == fs && *p == path)
        });
        if !matches {
            out.push(Finding {
                path: Some(path.clone()),
                ..finding("paths", path.clone(), "names no entity with this source")
            });
        }
        paths.insert((fs, path));
    }
    for (id, (rec, _)) in &stored {
        if let Some((fs, path)) = &rec.source
            && !paths.contains(&(fs.0.clone(), path.clone()))
        {
            out.push(Finding {
                entity: Some(id.clone()),
                path: Some(path.clone()),
                ..finding("paths", path.clone(), "the file's path is not listed")
            });
        }
    }
    // Who uses each document, to name a damaged one's entity, path and tx.
    let mut users: HashMap<[u8; 32], (String, u64)> = HashMap::new();
    for (id, (_, rows)) in &stored {
        for ((_, tx), rec) in rows {
            if let Some(hash) = rec.object_hash {
                users.entry(hash).or_insert_with(|| (id.clone(), *tx));
            }
        }
    }
    let mut content_users: HashMap<[u8; 32], [u8; 32]> = HashMap::new();
    let mut docs = HashSet::new();
    for row in t
        .rows("SELECT hash, rec, kept_hash FROM strata_docs", &[])
        .pg("reading documents")?
    {
        let Ok(hash) = hash32(row.get(0), "a document hash") else {
            out.push(finding("documents", "?", "a document key is not 32 bytes"));
            continue;
        };
        docs.insert(hash);
        let checked = codec::decode::<DocRec>(row.get(1), "document")
            .and_then(|doc| super::super::redb::check_doc(&hash, &doc).map(|()| doc));
        match checked {
            Ok(doc) => {
                let kept: Option<Vec<u8>> = row.get(2);
                let kept = kept.and_then(|k| hash32(&k, "kept hash").ok());
                for content in doc.content_hash.iter().chain(kept.iter()) {
                    content_users.insert(*content, hash);
                }
            }
            Err(e) => out.push(named_by(&users, &stored, "documents", &hash, e.to_string())),
        }
    }
    for (hash, (id, tx)) in &users {
        if !docs.contains(hash) {
            out.push(Finding {
                entity: Some(id.clone()),
                tx: Some(*tx),
                ..finding(
                    "documents",
                    hex::encode(hash),
                    "a version points at it; it is missing",
                )
            });
        }
    }
    let mut contents = HashSet::new();
    for row in t
        .rows("SELECT hash FROM strata_contents", &[])
        .pg("listing contents")?
    {
        let Ok(hash) = hash32(row.get(0), "a content hash") else {
            continue;
        };
        contents.insert(hash);
        let checked = read::content_raw(&mut t, &hash).and_then(|bytes| match bytes {
            Some(bytes) => super::super::redb::check_content(&hash, &bytes),
            None => Ok(()),
        });
        if let Err(e) = checked {
            let doc = content_users.get(&hash).copied().unwrap_or(hash);
            let mut f = named_by(&users, &stored, "blob_hash", &doc, e.to_string());
            f.subject = hex::encode(hash);
            out.push(f);
        }
    }
    for (content, doc) in &content_users {
        if !contents.contains(content) {
            out.push(named_by(
                &users,
                &stored,
                "blobs",
                doc,
                format!(
                    "its document uses content {}, which is missing",
                    hex::encode(content)
                ),
            ));
        }
    }
    t.commit().pg("ending fsck")?;
    Ok(out)
}

/// A finding about document `doc`, naming the entity, path and tx of a version using it.
fn named_by(
    users: &HashMap<[u8; 32], (String, u64)>,
    stored: &Stored,
    kind: &'static str,
    doc: &[u8; 32],
    detail: String,
) -> Finding {
    let mut f = finding(kind, hex::encode(doc), detail);
    if let Some((id, tx)) = users.get(doc) {
        f.entity = Some(id.clone());
        f.tx = Some(*tx);
        f.path = stored
            .get(id)
            .and_then(|(rec, _)| rec.source.as_ref().map(|(_, p)| p.clone()));
    }
    f
}

/// Rebuilds the derived tables (entities, versions, matches, paths) by replaying the log.
pub(super) fn rebuild(client: &mut Client) -> Result<()> {
    let mut t = client.transaction().pg("beginning the rebuild")?;
    let head = write::head(&mut t, true)?;
    t.batch_execute(
        "DELETE FROM strata_versions; DELETE FROM strata_entities; DELETE FROM strata_matches; \
         DELETE FROM strata_paths; UPDATE strata_head SET header = (SELECT l.header FROM \
         strata_log l WHERE l.tx_id = strata_head.tx_id);",
    )
    .pg("clearing the derived tables")?;
    let headers = t
        .rows(
            "SELECT tx_id, header FROM strata_log WHERE tx_id <= $1 ORDER BY tx_id",
            &[&big(head.tx)],
        )
        .pg("reading the log")?;
    for row in headers {
        let tx = unbig(row.get(0));
        let header = codec::decode_header(row.get(1), &format!("header of tx {tx}"))?;
        let bodies = t
            .rows(
                "SELECT n, body FROM strata_ops WHERE tx_id = $1 ORDER BY n",
                &[&big(tx)],
            )
            .pg("reading op bodies")?;
        let mut state = TxState {
            replay: true,
            ..TxState::default()
        };
        for body in bodies {
            let n = body.get::<_, i32>(0) as u32;
            let op = read::checked_body(body.get(1), tx, n, &header)?;
            write::apply(&mut t, tx, header.tx_time, n, &op, &mut state)?;
        }
    }
    t.commit().pg("committing the rebuild")?;
    Ok(())
}

/// Sweeps documents no version uses and contents no document uses.
pub(super) fn gc(client: &mut Client) -> Result<GcReport> {
    let mut t = client.transaction().pg("beginning gc")?;
    write::head_for_write(&mut t, false)?;
    let mut report = GcReport::default();
    let docs: Vec<Vec<u8>> = t
        .rows(
            "SELECT d.hash FROM strata_docs d WHERE NOT EXISTS (SELECT 1 FROM strata_versions v \
             WHERE v.object_hash = d.hash)",
            &[],
        )
        .pg("finding unused documents")?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for hash in docs {
        let (d, c, b) = write::release_doc(&mut t, &hash)?;
        report.documents_removed += d;
        report.blobs_removed += c;
        report.bytes_freed += b;
    }
    let contents: Vec<Vec<u8>> = t
        .rows(
            "SELECT c.hash FROM strata_contents c WHERE NOT EXISTS (SELECT 1 FROM strata_docs d \
             WHERE d.content_hash = c.hash OR d.kept_hash = c.hash)",
            &[],
        )
        .pg("finding unused contents")?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for hash in contents {
        let (c, b) = write::release_content(&mut t, &hash)?;
        report.blobs_removed += c;
        report.bytes_freed += b;
    }
    t.commit().pg("committing gc")?;
    Ok(report)
}

/// Writes each of `contents` back whole, replacing what is stored under its hash.
pub(super) fn restore_contents(
    client: &mut Client,
    contents: Vec<([u8; 32], Vec<u8>)>,
) -> Result<()> {
    for (hash, bytes) in &contents {
        let actual = crate::hash::sha256(bytes);
        if actual.0 != *hash {
            return Err(Error::invalid_input(format!(
                "the bytes given for content {} hash to {actual}; give the content's own bytes",
                hex::encode(hash)
            )));
        }
    }
    let mut t = client.transaction().pg("beginning a restore")?;
    for (hash, bytes) in &contents {
        for table in ["strata_chunks", "strata_contents"] {
            t.run(
                &format!("DELETE FROM {table} WHERE hash = $1"),
                &[&hash.as_slice()],
            )
            .pg("removing a damaged content")?;
        }
        write::ensure_content(&mut t, hash, || codec::encode_blob(bytes))?;
    }
    t.commit().pg("committing a restore")?;
    Ok(())
}
