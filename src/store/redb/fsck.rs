//! Verification (`fsck`): every table proved against the log and the content tables.
//!
//! The log is checked first (consecutive records, the chain, every op body against its digest,
//! every missing body against the record of evictions), then every content against its hash and
//! every document against its object hash. The log's verified bodies are then replayed into a
//! scratch store in memory, through the same code as `transact`, and every derived table
//! (`entities`, `entity_ids`, `versions`, `versions_by_tx`, `match_ops`, `paths`,
//! `evicted_ops`, the reference counts) must equal its replay row for row, and every row an
//! iteration finds must be found again by a lookup (a damaged branch page can misroute one).
//! The stat cache must agree with the files' current versions.
//!
//! Each check runs under its own storage guard: a table the storage engine cannot read becomes
//! a finding and the other checks still run, so fsck never fails on damage. Each finding names
//! what it affects (entity, path, transaction) and the command that repairs it.

use super::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle};

use super::codec::{self, DocRec, OpRec, StatRec, TxHeaderRec};
use super::tables::*;
use super::{RedbStore, WriteTables, blobs, log};
use crate::error::{Error, Result};
use crate::hash::sha256;
use crate::object::sourced_identity;

pub(crate) use crate::store::answers::finding;

/// What a row of a derived table concerns, for its findings.
struct Named {
    /// The entity's number, when the key holds it.
    eid: Option<u64>,
    /// The entity id, when the key holds it.
    entity: Option<String>,
    /// The path, when the key holds it.
    path: Option<String>,
    /// The transaction, when the key holds it.
    tx: Option<u64>,
    /// How to name the row.
    subject: String,
}

impl Named {
    fn new(subject: String) -> Self {
        Named {
            eid: None,
            entity: None,
            path: None,
            tx: None,
            subject,
        }
    }
}

/// Short `entities` keys (store format 8) → the number and id of the file under each.
type ShortNames = HashMap<Vec<u8>, (u64, Option<String>)>;

/// What the checks learn, shared between them.
#[derive(Default)]
struct Check {
    out: Vec<Finding>,
    /// Decoded log headers by tx.
    headers: BTreeMap<u64, TxHeaderRec>,
    /// Op bodies that hash to their digests, by (tx, op index).
    bodies: BTreeMap<(u64, u32), OpRec>,
    /// The first transaction whose evictions `evicted_ops` records.
    evictions_since: u64,
    /// Blob hash → stored reference count.
    blob_refs: HashMap<[u8; 32], u64>,
    /// Blobs that read back and hash right.
    blobs_ok: HashSet<[u8; 32]>,
    /// References suffix records hold on their bases.
    suffix_refs: HashMap<[u8; 32], u64>,
    /// Document hash → (seq, stored reference count, file bytes kept).
    doc_index: HashMap<[u8; 32], (u64, u64, bool)>,
    /// Documents that read back and hash right.
    docs_ok: HashMap<[u8; 32], DocRec>,
    /// The replay: a scratch store holding the derived tables as the log makes them.
    replay: Option<Database>,
    /// eid → (entity id, path) as the replay (else the store) knows them.
    names: HashMap<u64, (String, Option<String>)>,
    /// Document hash → the versions using it, as the replay knows them: (eid, tx).
    doc_users: HashMap<[u8; 32], Vec<(u64, u64)>>,
    /// Entity id → the number the store gave it (the replay gives it the same when free).
    eid_hints: HashMap<String, u64>,
    /// The store's `meta[BY_TX_OMITTED_SINCE]`, which the replay writes by.
    by_tx_since: u64,
    /// The store's `meta[SOURCES_IN_IDS_SINCE]`, which the replay writes by.
    sources_since: u64,
    /// The store's `meta[SHORT_ENTITY_KEYS_SINCE]`, which the replay writes by.
    short_since: u64,
    /// The store's `meta[DOC_SEQS_SINCE]`, which the replay writes by.
    doc_seqs_since: u64,
    /// The object hash of each `doc_data` number the store's `doc_index` names: the replay
    /// has no `doc_data` to recompute
    /// the hash of a version row that names its document by number. A document the store
    /// lacks is placed at `u64::MAX`, and its rows keep its hash.
    seq_hashes: HashMap<u64, [u8; 32]>,
}

impl Check {
    fn push(&mut self, finding: Finding) {
        self.out.push(finding);
    }

    /// Runs one check (`what`) under its own guard: damage that stops it is a finding.
    fn section(&mut self, what: &str, f: impl FnOnce(&mut Check) -> Result<()>) {
        self.section_as("unreadable", what, f);
    }

    /// Like [`Check::section`], a stop found as `kind`: a check of the log that stops is damage
    /// to the log (`log`), which only salvage repairs, and a repair must not rebuild over it (a
    /// rebuild from a log it cannot read would replay nothing and drop every table's rows).
    fn section_as(
        &mut self,
        kind: &'static str,
        what: &str,
        f: impl FnOnce(&mut Check) -> Result<()>,
    ) {
        let flag = AtomicBool::new(false);
        let result = guard::guarded(&flag, &format!("checking {what}"), || f(self));
        if let Err(e) = result {
            self.push(finding(kind, what, format!("the check stopped: {e}")));
        }
    }

    /// The entity and path of eid `eid`, when known.
    fn name(&self, eid: u64) -> (Option<String>, Option<String>) {
        match self.names.get(&eid) {
            Some((id, path)) => (Some(id.clone()), path.clone()),
            None => (None, None),
        }
    }

    /// A finding about the row `named` names.
    fn about(&self, kind: &'static str, named: &Named, detail: impl Into<String>) -> Finding {
        let (mut entity, mut path) = named.eid.map_or((None, None), |eid| self.name(eid));
        if named.entity.is_some() {
            entity.clone_from(&named.entity);
        }
        if named.path.is_some() {
            path.clone_from(&named.path);
        }
        Finding {
            entity,
            path,
            tx: named.tx,
            ..finding(kind, named.subject.clone(), detail)
        }
    }

    /// Checks the log headers: consecutive ids, each decodes, each chains from the one before.
    fn log(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let tx_log = rtx.open_table(TX_LOG).db()?;
        let mut chain: Option<[u8; 32]> = Some([0u8; 32]);
        let mut expected = 1;
        for entry in tx_log.iter().db()? {
            let (key, value) = entry.db()?;
            let tx = key.value();
            let bytes = value.value().to_vec();
            if tx_log.get(tx).db()?.map(|v| v.value().to_vec()).as_ref() != Some(&bytes) {
                self.push(Finding {
                    tx: Some(tx),
                    // Damage to the log itself (readers and a rebuild look records up by
                    // key), which only salvage repairs.
                    ..finding(
                        "log",
                        format!("tx {tx}"),
                        "its log record is iterated but a lookup by its id does not find it",
                    )
                });
            }
            if tx != expected {
                self.push(Finding {
                    tx: Some(expected),
                    ..finding(
                        "log_gap",
                        format!("tx {expected}"),
                        format!(
                            "the log has no record of txs {expected} to {}",
                            tx.saturating_sub(1)
                        ),
                    )
                });
                chain = None;
            }
            expected = tx + 1;
            let header = match codec::decode_header(&bytes, &format!("header of tx {tx}")) {
                Ok(header) => header,
                Err(e) => {
                    self.push(Finding {
                        tx: Some(tx),
                        ..finding("header_unreadable", format!("tx {tx}"), e.to_string())
                    });
                    chain = None;
                    continue;
                }
            };
            if let Some(previous) = chain {
                let computed = log::next_chain(&previous, tx, &header)?;
                if computed != header.chain {
                    self.push(Finding {
                        tx: Some(tx),
                        ..finding(
                            "chain",
                            format!("tx {tx}"),
                            format!(
                                "stored chain {} but the record hashes to {}",
                                hex::encode(header.chain),
                                hex::encode(computed)
                            ),
                        )
                    });
                }
            }
            chain = Some(header.chain);
            self.headers.insert(tx, header);
        }
        Ok(())
    }

    /// `meta[key]`, the first transaction of a format's rows, as `read` gives it: a value that
    /// damage made no number is a `meta_since` finding, and the replay then writes that format's
    /// rows from the first transaction on (as the rebuild that repairs it does).
    fn since(&mut self, key: &str, read: Result<u64>) -> Result<u64> {
        match read {
            Ok(since) => Ok(since),
            Err(Error::Corrupt { what }) => {
                self.push(finding("meta_since", format!("meta[{key}]"), what));
                Ok(1)
            }
            Err(e) => Err(e),
        }
    }

    /// Checks every op body against its digest and every missing body against the record of
    /// evictions.
    fn bodies(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let tx_ops = rtx.open_table(TX_OPS).db()?;
        let log_tables = verify::LogTables::open(rtx)?;
        self.evictions_since = log_tables.since;
        let meta = rtx.open_table(META).db()?;
        self.by_tx_since = self.since(BY_TX_OMITTED_SINCE, by_tx_omitted_since(&meta))?;
        self.sources_since = self.since(SOURCES_IN_IDS_SINCE, sources_in_ids_since(&meta))?;
        self.short_since = self.since(SHORT_ENTITY_KEYS_SINCE, short_keys_since(&meta))?;
        self.doc_seqs_since = self.since(DOC_SEQS_SINCE, doc_seqs_since(&meta))?;
        // Not a since key, but read by every writer the same way: damage that made it no
        // number stops every write until a rebuild drops it.
        self.since(DOC_NUMBERS_FROM, read_counter(&meta, DOC_NUMBERS_FROM))?;
        self.since(DIR_NUMBERS_FROM, read_counter(&meta, DIR_NUMBERS_FROM))?;
        let mut present = HashSet::new();
        for entry in tx_ops.iter().db()? {
            let (key, value) = entry.db()?;
            let (tx, n) = key.value();
            let bytes = value.value().to_vec();
            present.insert((tx, n));
            let subject = format!("op {n} of tx {tx}");
            let at = |f: Finding| Finding { tx: Some(tx), ..f };
            if tx_ops
                .get((tx, n))
                .db()?
                .map(|v| v.value().to_vec())
                .as_ref()
                != Some(&bytes)
            {
                // Readers and a rebuild look op bodies up by key: to them it is missing.
                self.push(at(finding(
                    "op_missing",
                    subject.clone(),
                    "its body is iterated but a lookup by its key does not find it",
                )));
            }
            let Some(header) = self.headers.get(&tx) else {
                self.push(at(finding("op_orphan", subject, "no log record lists it")));
                continue;
            };
            let Some(digest) = header.digests.get(n as usize).copied() else {
                self.push(at(finding(
                    "op_orphan",
                    subject,
                    format!("its log record lists {} ops", header.digests.len()),
                )));
                continue;
            };
            let op = match codec::decode_op(&bytes, header.tx_time, &header.filesystems, &subject) {
                Ok(op) => op,
                Err(e) => {
                    self.push(at(finding("op_unreadable", subject, e.to_string())));
                    continue;
                }
            };
            let computed = log::op_digest(&op)?;
            if computed != digest {
                self.push(at(finding(
                    "op_digest",
                    subject,
                    format!(
                        "the body hashes to {}, its log record says {}",
                        hex::encode(computed),
                        hex::encode(digest)
                    ),
                )));
                continue;
            }
            self.bodies.insert((tx, n), op);
        }
        for (tx, header) in &self.headers {
            for n in 0..header.digests.len() as u32 {
                if !present.contains(&(*tx, n)) && !log_tables.body_evicted(*tx, n)? {
                    self.out.push(Finding {
                        tx: Some(*tx),
                        ..finding(
                            "op_missing",
                            format!("op {n} of tx {tx}"),
                            "its body is missing and no eviction removed it",
                        )
                    });
                }
            }
        }
        Ok(())
    }

    /// Checks every content against its hash, and the blob stream's layout.
    fn contents(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let blob_index = rtx.open_table(BLOB_INDEX).db()?;
        let blob_data = rtx.open_table(BLOB_DATA).db()?;
        // The size `meta` records, checked against the chunks themselves: a damaged record
        // would make every read cut the stream wrongly (a repair writes what the chunks show).
        let seen = blobs::stream_chunk(&blob_data)?;
        let chunk = match (blobs::chunk_of(rtx), seen) {
            (Ok(said), Some(seen)) if said != seen => {
                self.push(finding(
                    "blob_chunk_size",
                    format!("meta[{BLOB_CHUNK_KEY}]"),
                    format!("says {said} bytes, but the blob stream's chunks are {seen} bytes"),
                ));
                seen
            }
            (Ok(said), _) => said,
            (Err(Error::Corrupt { what }), seen) => {
                self.push(finding(
                    "blob_chunk_size",
                    format!("meta[{BLOB_CHUNK_KEY}]"),
                    what,
                ));
                seen.unwrap_or(BLOB_CHUNK)
            }
            (Err(e), _) => return Err(e),
        };
        // Every chunk but the last is full: a read finds a byte by its offset ÷ the chunk size.
        let last = blob_data.last().db()?.map(|(k, _)| k.value());
        for entry in blob_data.iter().db()? {
            let (key, value) = entry.db()?;
            let (no, len) = (key.value(), value.value().len() as u64);
            if len > chunk || (len != chunk && Some(no) != last) {
                self.push(finding(
                    "blob_chunk",
                    format!("blob chunk {no}"),
                    format!("{len} bytes long, but the store's chunks are {chunk} bytes"),
                ));
            }
        }
        let mut ranges = Vec::new();
        for entry in blob_index.iter().db()? {
            let (key, value) = entry.db()?;
            let hash = key.value();
            let (offset, len, refs) = value.value();
            let subject = hex::encode(hash);
            if blob_index.get(&hash).db()?.map(|v| v.value()) != Some((offset, len, refs)) {
                self.push(finding(
                    "lookup",
                    "blob_index",
                    format!("{subject} is iterated but not found"),
                ));
            }
            self.blob_refs.insert(hash, refs);
            ranges.push((offset, len, subject.clone()));
            if let Ok(header) = blobs::record_header(&blob_data, chunk, &hash, offset, len)
                && let Some(base) = header.base
            {
                *self.suffix_refs.entry(base).or_default() += 1;
            }
            match blobs::read_at(&blob_index, &blob_data, chunk, &hash, offset, len) {
                Err(Error::Corrupt { what }) if what.contains("missing") => {
                    self.push(finding("blob_missing", subject, what));
                }
                Err(e) => self.push(finding("blob_unreadable", subject, e.to_string())),
                Ok(bytes) => {
                    let actual = sha256(&bytes);
                    if actual.0 == hash {
                        self.blobs_ok.insert(hash);
                    } else {
                        self.push(finding(
                            "blob_hash",
                            subject,
                            format!(
                                "its {} bytes (stream bytes {offset}..{}) hash to {actual}",
                                bytes.len(),
                                offset + len
                            ),
                        ));
                    }
                }
            }
        }
        ranges.sort();
        for pair in ranges.windows(2) {
            if let [(a_off, a_len, a), (b_off, _, b)] = pair
                && a_off + a_len > *b_off
            {
                self.push(finding(
                    "blob_overlap",
                    a.clone(),
                    format!("its bytes overlap blob {b}"),
                ));
            }
        }
        Ok(())
    }

    /// Checks every document against its object hash, and that its contents exist.
    fn documents(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let doc_index = rtx.open_table(DOC_INDEX).db()?;
        let doc_data = rtx.open_table(DOC_DATA).db()?;
        let mut seqs = HashSet::new();
        for entry in doc_index.iter().db()? {
            let (key, value) = entry.db()?;
            let hash = key.value();
            let (seq, refs, file_blob) = value.value();
            let subject = hex::encode(hash);
            if doc_index.get(&hash).db()?.map(|v| v.value()) != Some((seq, refs, file_blob)) {
                self.push(finding(
                    "lookup",
                    "doc_index",
                    format!("{subject} is iterated but not found"),
                ));
            }
            self.doc_index.insert(hash, (seq, refs, file_blob));
            seqs.insert(seq);
            if doc_data.get(seq).db()?.is_none() {
                self.push(finding(
                    "doc_missing",
                    subject,
                    format!("its record {seq} is missing"),
                ));
                continue;
            }
            let rec = match docs::read_doc(&doc_index, &doc_data, &hash) {
                Ok(Some((rec, _))) => rec,
                Ok(None) => continue,
                Err(e) => {
                    self.push(finding("doc_unreadable", subject, e.to_string()));
                    continue;
                }
            };
            if let Err(e) = verify::check_doc(&hash, &rec) {
                self.push(finding("doc_hash", subject, e.to_string()));
                continue;
            }
            for blob in docs::doc_blobs(&rec, file_blob) {
                if !self.blob_refs.contains_key(&blob) {
                    self.push(finding(
                        "doc_missing_content",
                        subject.clone(),
                        format!("its content {} is missing", hex::encode(blob)),
                    ));
                }
            }
            self.docs_ok.insert(hash, rec);
        }
        for entry in doc_data.iter().db()? {
            let seq = entry.db()?.0.value();
            if !seqs.contains(&seq) {
                self.push(finding(
                    "doc_orphan",
                    format!("record {seq}"),
                    "no object hash points at it",
                ));
            }
        }
        // Reference counts of contents: documents and suffix records that use them.
        let mut counted = self.suffix_refs.clone();
        for (hash, (_, _, file_blob)) in &self.doc_index {
            if let Some(rec) = self.docs_ok.get(hash) {
                for blob in docs::doc_blobs(rec, *file_blob) {
                    *counted.entry(blob).or_default() += 1;
                }
            }
        }
        let unreadable_docs = self.doc_index.len() > self.docs_ok.len();
        for (hash, stored) in &self.blob_refs {
            let counted = counted.get(hash).copied().unwrap_or(0);
            // An unreadable document may hold the missing references: it is reported already.
            if counted != *stored && !(unreadable_docs && counted < *stored) {
                self.out.push(finding(
                    "blob_refs",
                    hex::encode(hash),
                    format!("reference count {stored}, but {counted} documents and suffix records use it"),
                ));
            }
        }
        Ok(())
    }

    /// Replays the verified op bodies into a scratch store in memory.
    fn replay(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .db()?;
        let wtx = db.begin_write().db()?;
        tables::create_all(&wtx)?;
        // The store's filesystem numbers (fsck checks them below): its rows were keyed by them.
        super::fsnum::copy(rtx, &wtx)?;
        {
            let mut w = WriteTables::open(&wtx)?;
            w.derived_only = true;
            w.eid_hints = std::mem::take(&mut self.eid_hints);
            w.by_tx_since = self.by_tx_since;
            w.sources_since = self.sources_since;
            w.short_since = self.short_since;
            w.doc_seqs_since = self.doc_seqs_since;
            w.register_filesystems = rtx.open_table(FILESYSTEMS).is_ok();
            for (hash, (seq, _, file_blob)) in &self.doc_index {
                w.docs.index.insert(hash, (*seq, 0, *file_blob)).db()?;
                self.seq_hashes.insert(*seq, *hash);
            }
            // Documents the log uses but the store lacks: reported, and placed so the replay
            // goes on.
            let mut missing: BTreeMap<[u8; 32], (u64, u32)> = BTreeMap::new();
            for ((tx, n), op) in &self.bodies {
                if let OpRec::Write(write) = op
                    && let Some(hash) = write.object_hash
                    && !self.doc_index.contains_key(&hash)
                {
                    missing.entry(hash).or_insert((*tx, *n));
                }
            }
            for (hash, (tx, n)) in missing {
                w.docs.index.insert(&hash, (u64::MAX, 0, false)).db()?;
                self.out.push(Finding {
                    tx: Some(tx),
                    ..finding(
                        "doc_missing",
                        hex::encode(hash),
                        format!("op {n} of tx {tx} put this document, which the store lacks"),
                    )
                });
            }
            w.seq_hashes = self.seq_hashes.clone();
            let mut current = None;
            let bodies = std::mem::take(&mut self.bodies);
            for ((tx, n), op) in &bodies {
                if current.is_some_and(|c| c != *tx) {
                    w.end_tx()?;
                }
                current = Some(*tx);
                let tx_time = self.headers.get(tx).map_or(0, |h| h.tx_time);
                if let Err(e) = w.apply(*tx, tx_time, *n, op) {
                    self.out.push(Finding {
                        tx: Some(*tx),
                        ..finding("replay", format!("op {n} of tx {tx}"), e.to_string())
                    });
                }
            }
            self.bodies = bodies;
            w.end_tx()?;
            w.finish()?;
        }
        wtx.commit().db()?;
        // Names and document users, from the replay.
        let rtx = db.begin_read().db()?;
        let entities = ReadEntities::open(&rtx)?;
        for entry in entities.entities.iter().db()? {
            let (key, value) = entry.db()?;
            let id = super::entity::id_of_row(&entities, key.value(), value.value())?;
            let rec = super::entity::entity_of_row(&entities, &id, value.value())?;
            if let (Some((fs, path)), Ok(ObjectType::File)) =
                (&rec.source, rec.object_type.parse::<ObjectType>())
            {
                let source = Source::Filesystem(FilesystemSource {
                    filesystem_id: fs.0.clone(),
                    path: path.clone(),
                });
                if sourced_identity(ObjectType::File, &source)?.to_hex() != id {
                    self.out.push(Finding {
                        entity: Some(id.clone()),
                        path: Some(path.clone()),
                        ..finding(
                            "entity_id",
                            id.clone(),
                            "the id is not its source's identity hash",
                        )
                    });
                }
            }
            self.names
                .insert(rec.eid, (id, rec.source.as_ref().map(|(_, p)| p.clone())));
        }
        let versions = rtx.open_table(VERSIONS).db()?;
        for entry in versions.iter().db()? {
            let (key, value) = entry.db()?;
            let (eid, _, tx) = key.value();
            let rec = docs::version_rec(value.value(), &self.seq_hashes, "version")?;
            if let Some(hash) = rec.object_hash {
                let users = self.doc_users.entry(hash).or_default();
                if users.len() < 8 {
                    users.push((eid, tx));
                }
            }
        }
        drop(rtx);
        self.replay = Some(db);
        Ok(())
    }

    /// Adds the store's own names of eids the replay does not know (for findings about them).
    fn store_names(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let entities = ReadEntities::open(rtx)?;
        // The ids of the log's first writes by their short keys (store format 8), made when a
        // short key's row cannot name its file (its `entity_ids` row is lost).
        let mut logged: Option<HashMap<Vec<u8>, Vec<String>>> = None;
        for entry in entities.entities.iter().db()? {
            let Ok((key, value)) = entry.db() else { break };
            let Ok(id) = super::entity::id_of_row(&entities, key.value(), value.value()) else {
                // A short key names its file by its source in `entity_ids`: without it, by the
                // one first write in the log whose id starts with the key (its number is still
                // known, so the replay gives the file the same one).
                if let Ok(codec::StoredEntity::Sourced(eid)) =
                    codec::decode_entity(value.value(), "entity")
                    && codec::is_short_entity_key(key.value())
                    && let Some([id]) = logged
                        .get_or_insert_with(|| self.logged_short_ids())
                        .get(key.value())
                        .map(Vec::as_slice)
                {
                    self.eid_hints.entry(id.clone()).or_insert(eid);
                    self.names.entry(eid).or_insert((id.clone(), None));
                }
                continue;
            };
            let Ok(rec) = super::entity::entity_of_row(&entities, &id, value.value()) else {
                // A file's number is still known when its source is not.
                if let Ok(codec::StoredEntity::Sourced(eid)) =
                    codec::decode_entity(value.value(), "entity")
                {
                    self.eid_hints.insert(id.clone(), eid);
                    self.names.entry(eid).or_insert((id, None));
                }
                continue;
            };
            self.eid_hints.insert(id.clone(), rec.eid);
            self.names
                .entry(rec.eid)
                .or_insert((id, rec.source.map(|(_, p)| p)));
        }
        Ok(())
    }

    /// The entity number and id of each short `entities` key (store format 8) of the replay,
    /// else of the store, for findings about its row (the key alone does not name its file).
    fn short_key_names(&self, rtx: &ReadTransaction) -> Result<ShortNames> {
        let mut out = HashMap::new();
        let replay = match &self.replay {
            Some(db) => Some(db.begin_read().db()?),
            None => None,
        };
        for tx in replay.iter().chain(std::iter::once(rtx)) {
            for entry in tx.open_table(ENTITIES).db()?.iter().db()? {
                let Ok((key, value)) = entry.db() else { break };
                if codec::is_short_entity_key(key.value())
                    && let Ok(codec::StoredEntity::Sourced(eid)) =
                        codec::decode_entity(value.value(), "entity")
                {
                    out.entry(key.value().to_vec())
                        .or_insert_with(|| (eid, self.name(eid).0));
                }
            }
        }
        Ok(out)
    }

    /// The ids that the log's verified first writes create, by their short `entities` keys
    /// (store format 8).
    fn logged_short_ids(&self) -> HashMap<Vec<u8>, Vec<String>> {
        let mut out: HashMap<Vec<u8>, Vec<String>> = HashMap::new();
        for op in self.bodies.values() {
            if let OpRec::Write(write) = op
                && write.first.as_ref().is_some_and(|f| f.source.is_some())
            {
                let key = codec::id_key(&write.entity);
                if let Some(short) = codec::short_entity_key(&key) {
                    let ids = out.entry(short.to_vec()).or_default();
                    if !ids.contains(&write.entity.0) {
                        ids.push(write.entity.0.clone());
                    }
                }
            }
        }
        out
    }

    /// Compares derived table `def` of the store with its replay, row for row, and checks that
    /// every row the store's iteration finds is found by a lookup. `about` says which eid and tx
    /// a key concerns, and how to name it.
    fn compare<K, V>(
        &mut self,
        rtx: &ReadTransaction,
        def: TableDefinition<K, V>,
        kind: &'static str,
        keep: impl Fn(&K::SelfType<'_>, &V::SelfType<'_>) -> bool,
        about: impl Fn(&K::SelfType<'_>) -> Named,
    ) -> Result<()>
    where
        K: redb::Key + 'static,
        V: redb::Value + 'static,
    {
        let Some(db) = &self.replay else {
            return Ok(());
        };
        let replay_rtx = db.begin_read().db()?;
        let replay = replay_rtx.open_table(def).db()?;
        let mut truth: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for entry in replay.iter().db()? {
            let (key, value) = entry.db()?;
            if keep(&key.value(), &value.value()) {
                truth.insert(
                    K::as_bytes(&key.value()).as_ref().to_vec(),
                    V::as_bytes(&value.value()).as_ref().to_vec(),
                );
            }
        }
        let table = rtx.open_table(def).db()?;
        let mut found: Vec<Finding> = Vec::new();
        for entry in table.iter().db()? {
            let (key, value) = entry.db()?;
            let (k, v) = (key.value(), value.value());
            if !keep(&k, &v) {
                continue;
            }
            let key_bytes = K::as_bytes(&k).as_ref().to_vec();
            let value_bytes = V::as_bytes(&v).as_ref().to_vec();
            let named = about(&k);
            let looked_up = table
                .get(&k)
                .db()?
                .map(|v| V::as_bytes(&v.value()).as_ref().to_vec());
            if looked_up.as_ref() != Some(&value_bytes) {
                let lookup = Named {
                    subject: format!("{} {}", def.name(), named.subject),
                    ..about(&k)
                };
                found.push(self.about(
                    "lookup",
                    &lookup,
                    "an iteration finds this row but a lookup does not",
                ));
            }
            match truth.remove(&key_bytes) {
                Some(expected) if expected == value_bytes => {}
                Some(_) => found.push(self.about(
                    kind,
                    &named,
                    "this row differs from the one the log makes",
                )),
                None => found.push(self.about(kind, &named, "this row is not one the log makes")),
            }
        }
        for key_bytes in truth.keys() {
            let k = K::from_bytes(key_bytes);
            let named = about(&k);
            found.push(self.about(
                kind,
                &named,
                "the log makes this row, but the table lacks it",
            ));
        }
        self.out.extend(found);
        Ok(())
    }

    /// Compares the files' paths (`paths_by_dir` with its directory numbers, format 10, or the
    /// whole-path `paths` before it) with the ones the log makes, path by path: the store's
    /// directory numbers are its own (the stat cache shares them), not the replay's.
    fn paths(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let Some(db) = &self.replay else {
            return Ok(());
        };
        let replay_rtx = db.begin_read().db()?;
        let mut problems = Vec::new();
        let truth_rows = super::dirnum::PathRows::open(&replay_rtx)?;
        let numbers = super::dirnum::open_if_any(&replay_rtx, DIRECTORY_PATHS)?;
        let mut truth: BTreeMap<(Vec<u8>, String), u64> = truth_rows
            .all(numbers.as_ref(), &mut problems)?
            .into_iter()
            .map(|(fs, path, eid)| ((fs, path), eid))
            .collect();
        problems.clear();
        let rows = super::dirnum::PathRows::open(rtx)?;
        let numbers = super::dirnum::open_if_any(rtx, DIRECTORY_PATHS)?;
        let mut found = Vec::new();
        let about = |path: &str| Named {
            path: Some(path.to_string()),
            ..Named::new(format!("{path:?}"))
        };
        for (fs, path, eid) in rows.all(numbers.as_ref(), &mut problems)? {
            if rows.get(&fs, &path)? != Some(eid) {
                let lookup = Named {
                    subject: format!("paths {path:?}"),
                    ..about(&path)
                };
                found.push(self.about(
                    "lookup",
                    &lookup,
                    "an iteration finds this row but a lookup does not",
                ));
            }
            match truth.remove(&(fs, path.clone())) {
                Some(expected) if expected == eid => {}
                Some(_) => found.push(self.about(
                    "paths",
                    &about(&path),
                    "this row differs from the one the log makes",
                )),
                None => found.push(self.about(
                    "paths",
                    &about(&path),
                    "this row is not one the log makes",
                )),
            }
        }
        for problem in problems {
            found.push(finding("paths", "paths_by_dir", problem));
        }
        for (_, path) in truth.keys() {
            found.push(self.about(
                "paths",
                &about(path),
                "the log makes this row, but the table lacks it",
            ));
        }
        self.out.extend(found);
        Ok(())
    }

    /// Checks the record of evictions: each names a body that is gone, removed by an eviction
    /// in a later transaction.
    fn evictions(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let evicted = match rtx.open_table(EVICTED_OPS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(Error::storage("opening evicted_ops", e)),
        };
        let tx_ops = rtx.open_table(TX_OPS).db()?;
        let mut found = Vec::new();
        for entry in evicted.iter().db()? {
            let (key, value) = entry.db()?;
            let ((tx, n), by) = (key.value(), value.value());
            let subject = format!("op {n} of tx {tx}");
            let evicts = self.headers.get(&by).is_some_and(|h| {
                (0..h.digests.len() as u32)
                    .any(|m| matches!(self.bodies.get(&(by, m)), Some(OpRec::Evict { .. })))
            });
            let wrong = if evicted.get((tx, n)).db()?.map(|v| v.value()) != Some(by) {
                Some("an iteration finds this record but a lookup does not")
            } else if tx_ops.get((tx, n)).db()?.is_some() {
                Some("it is recorded as evicted, but its body is still there")
            } else if by < tx || !evicts {
                Some("it is recorded as evicted by a transaction that evicts nothing after it")
            } else {
                None
            };
            if let Some(wrong) = wrong {
                found.push(Finding {
                    tx: Some(tx),
                    ..finding("evicted_ops", subject, wrong)
                });
            }
        }
        self.out.extend(found);
        Ok(())
    }

    /// Compares the document reference counts with the replay's.
    fn doc_refs(&mut self) -> Result<()> {
        let Some(db) = &self.replay else {
            return Ok(());
        };
        let rtx = db.begin_read().db()?;
        let replay = rtx.open_table(DOC_INDEX).db()?;
        let mut found = Vec::new();
        for (hash, (_, stored, _)) in &self.doc_index {
            let counted = replay.get(hash).db()?.map_or(0, |v| v.value().1);
            if counted != *stored {
                found.push(finding(
                    "doc_refs",
                    hex::encode(hash),
                    format!("reference count {stored}, but {counted} versions use it"),
                ));
            }
        }
        self.out.extend(found);
        Ok(())
    }

    /// Checks the stat cache: each entry decodes, names a file the store lists, and vouches for
    /// that file's current bytes; a format-9 entry's directory number is known.
    fn stat_cache(&mut self, rtx: &ReadTransaction) -> Result<()> {
        let Some(db) = &self.replay else {
            return Ok(());
        };
        let replay_rtx = db.begin_read().db()?;
        let paths = super::dirnum::PathRows::open(&replay_rtx)?;
        let versions = replay_rtx.open_table(VERSIONS).db()?;
        let by_tx = replay_rtx.open_table(VERSIONS_BY_TX).db()?;
        // (filesystem key, path, record bytes, a lookup by the key finds the same bytes).
        let mut entries: Vec<(Vec<u8>, String, Vec<u8>, bool)> = Vec::new();
        let mut found = Vec::new();
        let (old, new) = super::dirnum::open_stat_table(rtx, STAT_BY_DIR)?;
        let (_, dirs) = super::dirnum::open_stat_table(rtx, DIRECTORY_PATHS)?;
        if let Some(cache) = old {
            for entry in cache.iter().db()? {
                let (key, value) = entry.db()?;
                let (fs, path) = key.value();
                let bytes = value.value().to_vec();
                let same =
                    cache.get((fs, path)).db()?.map(|v| v.value().to_vec()) == Some(bytes.clone());
                entries.push((fs.to_vec(), path.to_string(), bytes, same));
            }
        }
        if let (Some(cache), Some(dirs)) = (new, dirs) {
            for entry in cache.iter().db()? {
                let (key, value) = entry.db()?;
                let key = key.value();
                let bytes = value.value().to_vec();
                let Some((n, name)) = super::dirnum::split_row_key(key) else {
                    found.push(finding(
                        "stat_cache",
                        format!("key {}", hex::encode(key)),
                        "a stat cache key that holds no directory number and file name",
                    ));
                    continue;
                };
                let Some((fs, dir)) = dirs
                    .get(n)
                    .db()?
                    .map(|v| (v.value().0.to_vec(), v.value().1.to_string()))
                else {
                    found.push(finding(
                        "stat_cache",
                        format!("{name:?} in directory number {n}"),
                        "a stat cache entry names a directory number directory_paths does not know",
                    ));
                    continue;
                };
                let same = cache.get(key).db()?.map(|v| v.value().to_vec()) == Some(bytes.clone());
                entries.push((fs, format!("{dir}{name}"), bytes, same));
            }
        }
        let now = Timestamp::now().as_micros();
        for (fs, path, bytes, same) in entries {
            let named = |f: Finding| Finding {
                path: Some(path.clone()),
                ..f
            };
            if !same {
                found.push(named(finding(
                    "lookup",
                    "stat_cache",
                    "an iteration finds this entry but a lookup does not",
                )));
            }
            let rec: StatRec = match codec::decode(&bytes, "stat cache entry") {
                Ok(rec) => rec,
                Err(e) => {
                    found.push(named(finding(
                        "stat_cache",
                        format!("{path:?}"),
                        e.to_string(),
                    )));
                    continue;
                }
            };
            let Some(eid) = paths.get(&fs, &path)? else {
                found.push(named(finding(
                    "stat_cache",
                    format!("{path:?}"),
                    "the stat cache vouches for a file the store does not list",
                )));
                continue;
            };
            let current =
                temporal::as_of_row(&versions, &self.seq_hashes, &by_tx, eid, now, u64::MAX)?;
            let file_hash = current
                .and_then(|(row, _)| row.rec.object_hash)
                .and_then(|hash| self.docs_ok.get(&hash))
                .and_then(|doc| doc.file_hash);
            if let Some(file_hash) = file_hash
                && file_hash != rec.file_hash
            {
                let (entity, _) = self.name(eid);
                found.push(Finding {
                    entity,
                    ..named(finding(
                        "stat_cache",
                        format!("{path:?}"),
                        "the stat cache vouches for bytes the file's current version does not hold",
                    ))
                });
            }
        }
        self.out.extend(found);
        Ok(())
    }

    /// Runs the storage engine's own integrity check on the file at `path` (see
    /// [`page_damage`]).
    fn checksums(&mut self, path: &std::path::Path) -> Result<()> {
        if let Some(problem) = page_damage(path)? {
            self.push(finding("checksum", "the store file", problem));
        }
        Ok(())
    }

    /// Names the versions a content or document finding affects.
    fn affected(&mut self) {
        let mut blob_docs: HashMap<[u8; 32], Vec<[u8; 32]>> = HashMap::new();
        for (hash, rec) in &self.docs_ok {
            let file_blob = self.doc_index.get(hash).is_some_and(|(_, _, f)| *f);
            for blob in docs::doc_blobs(rec, file_blob) {
                blob_docs.entry(blob).or_default().push(*hash);
            }
        }
        let mut out = std::mem::take(&mut self.out);
        for f in &mut out {
            if f.entity.is_some() || !(f.kind.starts_with("blob_") || f.kind.starts_with("doc_")) {
                continue;
            }
            let Ok(bytes) = hex::decode(&f.subject) else {
                continue;
            };
            let Ok(hash) = <[u8; 32]>::try_from(bytes.as_slice()) else {
                continue;
            };
            let docs: Vec<[u8; 32]> = if f.kind.starts_with("blob_") {
                blob_docs.get(&hash).cloned().unwrap_or_default()
            } else {
                vec![hash]
            };
            let users: Vec<(u64, u64)> = docs
                .iter()
                .filter_map(|d| self.doc_users.get(d))
                .flatten()
                .copied()
                .collect();
            if let Some((eid, tx)) = users.first() {
                let (entity, path) = self.name(*eid);
                f.entity = entity;
                f.path = path;
                f.tx = Some(*tx);
                if users.len() > 1 {
                    f.detail
                        .push_str(&format!(" ({} versions use it)", users.len()));
                }
            }
        }
        self.out = out;
    }
}

impl RedbStore {
    /// Checks everything: the log (chain, digests, missing bodies against evictions), every
    /// content's hash, every document's object hash, every derived table and reference count
    /// against a replay of the log, lookups against iterations, and the stat cache. Returns one
    /// finding per problem (empty when the store is sound); damage is a finding, never an
    /// error.
    pub fn fsck(&self) -> Vec<Finding> {
        let mut check = Check {
            by_tx_since: u64::MAX,
            sources_since: u64::MAX,
            short_since: u64::MAX,
            doc_seqs_since: u64::MAX,
            ..Check::default()
        };
        let flag = AtomicBool::new(false);
        let rtx = match guard::guarded(&flag, "beginning a read", || self.read()) {
            Ok(rtx) => rtx,
            Err(e) => {
                check.push(finding("unreadable", "the store file", e.to_string()));
                return check.out;
            }
        };
        check.section_as("log", "the log", |c| c.log(&rtx));
        check.section_as("log", "the op bodies", |c| c.bodies(&rtx));
        check.section("the contents", |c| c.contents(&rtx));
        check.section("the documents", |c| c.documents(&rtx));
        check.section("the store's entity numbers", |c| c.store_names(&rtx));
        check.section("the log's replay", |c| c.replay(&rtx));
        check.section("filesystems", |c| {
            for (subject, problem) in super::fsnum::disagreements(&rtx)? {
                c.push(finding("filesystems", subject, problem));
            }
            Ok(())
        });
        check.section("directories", |c| {
            for (subject, problem) in super::dirnum::disagreements(&rtx)? {
                c.push(finding("directories", subject, problem));
            }
            Ok(())
        });
        check.section("entities", |c| {
            let short = c.short_key_names(&rtx)?;
            c.compare(
                &rtx,
                ENTITIES,
                "entities",
                |_, _| true,
                |k| {
                    if let Some((eid, id)) = short.get(*k) {
                        return Named {
                            eid: Some(*eid),
                            entity: id.clone(),
                            ..Named::new(match id {
                                Some(id) => format!("entity {id}"),
                                None => format!("entity number {eid}"),
                            })
                        };
                    }
                    let id = codec::id_of_key(k, "entity key").unwrap_or_else(|_| hex::encode(k));
                    Named {
                        entity: Some(id.clone()),
                        ..Named::new(format!("entity {id}"))
                    }
                },
            )
        });
        check.section("entity_ids", |c| {
            c.compare(
                &rtx,
                ENTITY_IDS,
                "entity_ids",
                |_, _| true,
                |eid| Named {
                    eid: Some(*eid),
                    ..Named::new(format!("entity number {eid}"))
                },
            )
        });
        check.section("versions", |c| {
            c.compare(
                &rtx,
                VERSIONS,
                "versions",
                |_, _| true,
                |(eid, vt, tx)| Named {
                    eid: Some(*eid),
                    tx: Some(*tx),
                    ..Named::new(format!("version at {} (tx {tx})", ts(*vt)))
                },
            )
        });
        check.section("versions_by_tx", |c| {
            c.compare(
                &rtx,
                VERSIONS_BY_TX,
                "versions_by_tx",
                |_, _| true,
                |(eid, tx)| Named {
                    eid: Some(*eid),
                    tx: Some(*tx),
                    ..Named::new(format!("write of tx {tx}"))
                },
            )
        });
        check.section("match_ops", |c| {
            c.compare(
                &rtx,
                MATCH_OPS,
                "match_ops",
                |_, _| true,
                |(eid, tx, n)| Named {
                    eid: Some(*eid),
                    tx: Some(*tx),
                    ..Named::new(format!("match op {n} of tx {tx}"))
                },
            )
        });
        check.section("paths", |c| c.paths(&rtx));
        check.section("evicted_ops", |c| c.evictions(&rtx));
        check.section("document references", Check::doc_refs);
        check.section("the stat cache", |c| c.stat_cache(&rtx));
        check.section("metadata snapshots", |c| {
            let found = super::snapshot::check_all(&rtx)?;
            c.out.extend(found);
            Ok(())
        });
        drop(rtx);
        if let Some(dir) = &self.dir {
            // Writers wait while the file is read (a read-write handle holds a write
            // transaction, never committed): the pages checked are the committed ones.
            let pause = match self.reads_only_now() {
                true => None,
                false => guard::guarded(&flag, "pausing writers", || self.begin_write()).ok(),
            };
            check.section("page checksums", |c| c.checksums(&dir.join(DB_FILE)));
            drop(pause);
        }
        check.affected();
        check.out
    }
}

/// Runs the storage engine's own integrity check (every page of the committed trees against
/// its checksum) on the file at `path`, opened through an [`overlay::Overlay`] so that the
/// check's repairs never reach the file: what is wrong, or `None`.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read.
pub(super) fn page_damage(path: &std::path::Path) -> Result<Option<String>> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
        .len();
    let backend = overlay::Overlay::new(file, len)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mut builder = Database::builder();
    builder.set_cache_size(4 * 1024 * 1024);
    Ok(match builder.create_with_backend(backend) {
        Err(e) => Some(format!("the storage engine cannot open the file: {e}")),
        Ok(mut db) => {
            // A panic inside the check would drop the database while unwinding, and its drop
            // may panic again on the same damage, which aborts the process: the panic is
            // caught here and the database leaked instead (an in-memory overlay).
            let checked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.check_integrity()));
            match checked {
                Ok(Ok(true)) => None,
                Ok(Ok(false)) => Some(
                    "pages fail their checksums; the storage engine would fall back to an \
                     earlier commit"
                        .to_string(),
                ),
                Ok(Err(e)) => Some(format!("pages fail their checksums: {e}")),
                Err(_) => {
                    std::mem::forget(db);
                    Some("the storage engine failed while checking the pages".to_string())
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;
    use crate::store::{Op, Origin};

    fn file(path: &str, text: &str) -> Result<Object> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            text.into(),
        )
    }

    #[test]
    fn a_sound_store_with_an_eviction_verifies() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let a = file("/a", "a")?;
        let b = file("/b", "b")?;
        store.transact(vec![Op::put(a.clone()), Op::put(b)], Origin::Cli)?;
        store.transact(vec![Op::put(file("/a", "a2")?)], Origin::Cli)?;
        store.evict(a.id(), Origin::Cli)?;
        assert_eq!(store.fsck(), vec![]);
        Ok(())
    }

    #[test]
    fn a_derived_row_that_differs_from_the_log_is_found_with_its_entity() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let a = file("/a", "a")?;
        store.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        // Damage: the paths row of /a now points at another entity number.
        let wtx = store.begin_write()?;
        {
            let mut paths = wtx.open_table(super::super::tables::PATHS_BY_DIR).db()?;
            paths
                .insert(super::super::dirnum::row_key(1, "a").as_slice(), 7)
                .db()?;
        }
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "paths" && f.repair == crate::store::damage::REPAIR),
            "{findings:?}"
        );
        // A missing op body that no eviction removed is damage, not an eviction.
        let wtx = store.begin_write()?;
        {
            let mut ops = wtx.open_table(TX_OPS).db()?;
            ops.remove((1u64, 0u32)).db()?;
        }
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "op_missing" && f.tx == Some(1)),
            "{findings:?}"
        );
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "versions" && f.entity.as_deref() == Some(a.id())),
            "{findings:?}"
        );
        Ok(())
    }

    /// The `entities` row of a file under its short key (store format 8) that is damaged is
    /// found with its file's id and path, not with the key's bytes.
    #[test]
    fn a_damaged_short_entities_row_is_found_with_its_file() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let a = file("/a", "a")?;
        store.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        let full = codec::id_key(a.id());
        let short = codec::short_entity_key(&full)
            .ok_or_else(|| Error::invariant("a hash id"))?
            .to_vec();
        let wtx = store.begin_write()?;
        let row = {
            let mut entities = wtx.open_table(ENTITIES).db()?;
            let row = entities
                .remove(short.as_slice())
                .db()?
                .map(|v| v.value().to_vec());
            row.ok_or_else(|| Error::invariant("a's short row"))?
        };
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings.iter().any(|f| f.kind == "entities"
                && f.entity.as_deref() == Some(a.id())
                && f.path.as_deref() == Some("/a")),
            "{findings:?}"
        );
        // The row back, its bytes damaged: the same.
        assert!(!row.is_empty());
        let wtx = store.begin_write()?;
        {
            let mut entities = wtx.open_table(ENTITIES).db()?;
            entities.insert(short.as_slice(), [0xff].as_slice()).db()?;
        }
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| f.kind == "entities" && f.entity.as_deref() == Some(a.id())),
            "{findings:?}"
        );
        Ok(())
    }

    /// A file under its short key whose `entity_ids` row is lost keeps its number in fsck's
    /// replay (as a file under its whole key does): the one lost row is found, not every row
    /// of the file under another number.
    #[test]
    fn a_short_keyed_file_whose_entity_ids_row_is_lost_keeps_its_number() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let (b, c) = (file("/b", "b")?, file("/c", "c")?);
        store.transact(vec![Op::put(b.clone())], Origin::Cli)?;
        store.transact(vec![Op::put(c)], Origin::Cli)?;
        store.evict(b.id(), Origin::Cli)?;
        assert_eq!(store.fsck(), vec![]);
        // c keeps number 2 (b's 1 is free): a replay that did not know it would give it 1.
        let wtx = store.begin_write()?;
        {
            let mut entity_ids = wtx.open_table(ENTITY_IDS).db()?;
            entity_ids
                .remove(2u64)
                .db()?
                .ok_or_else(|| Error::invariant("c's number is 2"))?;
        }
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings.iter().any(|f| f.kind == "entity_ids"),
            "{findings:?}"
        );
        assert!(
            findings
                .iter()
                .all(|f| f.kind == "entity_ids" || f.kind == "entities"),
            "only the lost row (and the row that needs it): {findings:?}"
        );
        Ok(())
    }
}
