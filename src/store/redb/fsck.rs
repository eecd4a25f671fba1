//! Verification (`fsck`), rebuilding the query tables from the log (`fsck_rebuild`), and `gc`.

use super::*;
use std::collections::{HashMap, HashSet};

use redb::{ReadableTable, ReadableTableMetadata};

use super::codec::{self, DocRec, TxHeaderRec, VersionRec};
use super::tables::*;
use super::{Op, Origin, RedbStore, TxReceipt, WriteTables, blobs, log};
use crate::error::{Error, Result};
use crate::hash::{Hash, sha256, sha256_json};
use crate::object::composite_hash;

fn finding(kind: &'static str, subject: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding {
        kind,
        subject: subject.into(),
        detail: detail.into(),
    }
}

/// Recomputes a document's object hash from its record.
fn doc_object_hash(rec: &DocRec) -> Result<Hash> {
    let fields: serde_json::Value = serde_json::from_str(&rec.fields)
        .map_err(|e| Error::corrupt(format!("fields are not JSON: {e}")))?;
    let metadata = sha256_json(&fields)?;
    composite_hash(
        rec.file_hash.map(Hash).as_ref(),
        rec.content_hash.map(Hash).as_ref(),
        &metadata,
    )
}

impl RedbStore {
    /// Evicts `id`: a transaction of one [`Op::Evict`].
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn evict(&self, id: &str, origin: Origin) -> Result<TxReceipt> {
        self.transact(
            vec![Op::Evict {
                entity: id.to_string(),
            }],
            origin,
        )
    }

    /// Checks everything: every blob's hash, every document's object hash and references,
    /// every version's document and entity, reference counts, the indexes, every op digest and
    /// the chain. Returns one finding per problem (empty when the store is sound).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb itself fails.
    pub fn fsck(&self) -> Result<Vec<Finding>> {
        let rtx = self.handle.begin_read().db()?;
        let mut out = Vec::new();

        // Blobs.
        let blob_index = rtx.open_table(BLOB_INDEX).db()?;
        let blob_data = rtx.open_table(BLOB_DATA).db()?;
        let mut blob_refs: HashMap<[u8; 32], u64> = HashMap::new();
        let mut ranges = Vec::new();
        // References from suffix records to their bases, which count like documents'.
        let mut suffix_refs: HashMap<[u8; 32], u64> = HashMap::new();
        for entry in blob_index.iter().db()? {
            let (key, value) = entry.db()?;
            let hash = key.value();
            let (offset, len, refs) = value.value();
            let subject = hex::encode(hash);
            blob_refs.insert(hash, refs);
            ranges.push((offset, len, subject.clone()));
            if let Ok(header) = blobs::record_header(&blob_data, &hash, offset, len)
                && let Some(base) = header.base
            {
                *suffix_refs.entry(base).or_default() += 1;
            }
            match blobs::read_at(&blob_index, &blob_data, &hash, offset, len) {
                Err(Error::Corrupt { what }) if what.contains("missing") => {
                    out.push(finding("blob_missing", subject, what));
                }
                Err(e) => out.push(finding("blob_unreadable", subject, e.to_string())),
                Ok(bytes) => {
                    let actual = sha256(&bytes);
                    if actual.0 != hash {
                        out.push(finding(
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
                out.push(finding(
                    "blob_overlap",
                    a.clone(),
                    format!("its bytes overlap blob {b}"),
                ));
            }
        }

        // Documents.
        let doc_index = rtx.open_table(DOC_INDEX).db()?;
        let doc_data = rtx.open_table(DOC_DATA).db()?;
        let mut doc_refs: HashMap<[u8; 32], u64> = HashMap::new();
        let mut counted_blobs = suffix_refs;
        let mut doc_seqs = HashSet::new();
        for entry in doc_index.iter().db()? {
            let (key, value) = entry.db()?;
            let hash = key.value();
            let (seq, refs, file_blob) = value.value();
            let subject = hex::encode(hash);
            doc_refs.insert(hash, refs);
            doc_seqs.insert(seq);
            let Some(record) = doc_data.get(seq).db()? else {
                out.push(finding(
                    "doc_missing",
                    subject,
                    format!("its record {seq} is missing"),
                ));
                continue;
            };
            let rec: DocRec = match codec::decode(record.value(), "document")
                .and_then(|rec| super::docs::resolved(&doc_index, &doc_data, rec))
            {
                Ok(rec) => rec,
                Err(e) => {
                    out.push(finding("doc_unreadable", subject, e.to_string()));
                    continue;
                }
            };
            match doc_object_hash(&rec) {
                Ok(actual) if actual.0 != hash => out.push(finding(
                    "doc_hash",
                    subject.clone(),
                    format!("its fields and hashes make object hash {actual}"),
                )),
                Ok(_) => {}
                Err(e) => out.push(finding("doc_unreadable", subject.clone(), e.to_string())),
            }
            for blob in docs::doc_blobs(&rec, file_blob) {
                *counted_blobs.entry(blob).or_default() += 1;
                if !blob_refs.contains_key(&blob) {
                    out.push(finding(
                        "doc_missing_content",
                        subject.clone(),
                        format!("its blob {} is missing", hex::encode(blob)),
                    ));
                }
            }
        }
        for entry in doc_data.iter().db()? {
            let seq = entry.db()?.0.value();
            if !doc_seqs.contains(&seq) {
                out.push(finding(
                    "doc_orphan",
                    format!("record {seq}"),
                    "no object hash points at it",
                ));
            }
        }
        for (hash, stored) in &blob_refs {
            let counted = counted_blobs.get(hash).copied().unwrap_or(0);
            if counted != *stored {
                out.push(finding(
                    "blob_refs",
                    hex::encode(hash),
                    format!(
                        "reference count {stored}, but {counted} documents and suffix records use it"
                    ),
                ));
            }
        }

        // Entities and versions.
        let entities = rtx.open_table(ENTITIES).db()?;
        let entity_ids = rtx.open_table(ENTITY_IDS).db()?;
        let mut eids = HashMap::new();
        for entry in entities.iter().db()? {
            let (key, value) = entry.db()?;
            let id = match codec::id_of_key(key.value(), "entity key") {
                Ok(id) => id,
                Err(e) => {
                    out.push(finding(
                        "entity_unreadable",
                        hex::encode(key.value()),
                        e.to_string(),
                    ));
                    continue;
                }
            };
            match codec::decode::<codec::EntityRec>(value.value(), "entity") {
                Ok(rec) => {
                    let back = entity_ids
                        .get(rec.eid)
                        .db()?
                        .map(|v| codec::id_of_key(v.value(), "entity_ids value"))
                        .transpose()
                        .ok()
                        .flatten();
                    if back.as_deref() != Some(id.as_str()) {
                        out.push(finding(
                            "index",
                            format!("entity {id}"),
                            format!("entity_ids[{}] is {back:?}", rec.eid),
                        ));
                    }
                    eids.insert(rec.eid, id);
                }
                Err(e) => out.push(finding("entity_unreadable", id, e.to_string())),
            }
        }
        if entity_ids.len().db()? != entities.len().db()? {
            out.push(finding(
                "index",
                "entity_ids",
                format!(
                    "{} rows for {} entities",
                    entity_ids.len().db()?,
                    entities.len().db()?
                ),
            ));
        }
        let versions = rtx.open_table(VERSIONS).db()?;
        let by_tx = rtx.open_table(VERSIONS_BY_TX).db()?;
        let mut counted_docs: HashMap<[u8; 32], u64> = HashMap::new();
        let mut writes = HashSet::new();
        for entry in versions.iter().db()? {
            let (key, value) = entry.db()?;
            let (eid, vt, tx) = key.value();
            let entity = eids.get(&eid).cloned().unwrap_or_else(|| format!("#{eid}"));
            let subject = format!("{entity} at {} (tx {tx})", super::ts(vt));
            if !eids.contains_key(&eid) {
                out.push(finding(
                    "version_no_entity",
                    subject.clone(),
                    format!("no entity has number {eid}"),
                ));
            }
            writes.insert((eid, tx));
            if by_tx.get((eid, tx)).db()?.is_none() {
                out.push(finding(
                    "index",
                    subject.clone(),
                    "missing from versions_by_tx",
                ));
            }
            match codec::decode::<VersionRec>(value.value(), "version") {
                Ok(rec) => {
                    if let Some(hash) = rec.object_hash {
                        *counted_docs.entry(hash).or_default() += 1;
                        if !doc_refs.contains_key(&hash) {
                            out.push(finding(
                                "version_missing_doc",
                                subject,
                                format!("its document {} is missing", hex::encode(hash)),
                            ));
                        }
                    }
                }
                Err(e) => out.push(finding("version_unreadable", subject, e.to_string())),
            }
        }
        if by_tx.len().db()? != writes.len() as u64 {
            out.push(finding(
                "index",
                "versions_by_tx",
                format!(
                    "{} rows for {} (entity, transaction) pairs of versions",
                    by_tx.len().db()?,
                    writes.len()
                ),
            ));
        }
        for (hash, stored) in &doc_refs {
            let counted = counted_docs.get(hash).copied().unwrap_or(0);
            if counted != *stored {
                out.push(finding(
                    "doc_refs",
                    hex::encode(hash),
                    format!("reference count {stored}, but {counted} versions use it"),
                ));
            }
        }

        // The log: consecutive ids, op digests, the chain.
        let tx_log = rtx.open_table(TX_LOG).db()?;
        let tx_ops = rtx.open_table(TX_OPS).db()?;
        let mut chain = [0u8; 32];
        let mut expected_tx = 1;
        let mut digests: HashMap<u64, (i64, Vec<[u8; 32]>)> = HashMap::new();
        for entry in tx_log.iter().db()? {
            let (key, value) = entry.db()?;
            let tx = key.value();
            if tx != expected_tx {
                out.push(finding(
                    "chain",
                    format!("tx {tx}"),
                    format!("expected tx {expected_tx} next"),
                ));
            }
            expected_tx = tx + 1;
            let header: TxHeaderRec = match codec::decode(value.value(), "tx header") {
                Ok(h) => h,
                Err(e) => {
                    out.push(finding("chain", format!("tx {tx}"), e.to_string()));
                    continue;
                }
            };
            let computed =
                log::next_chain(&chain, tx, header.tx_time, &header.origin, &header.digests)?;
            if computed != header.chain {
                out.push(finding(
                    "chain",
                    format!("tx {tx}"),
                    format!(
                        "stored chain {} but the header hashes to {}",
                        hex::encode(header.chain),
                        hex::encode(computed)
                    ),
                ));
            }
            chain = header.chain;
            digests.insert(tx, (header.tx_time, header.digests));
        }
        for entry in tx_ops.iter().db()? {
            let (key, value) = entry.db()?;
            let (tx, n) = key.value();
            let subject = format!("op {n} of tx {tx}");
            let (tx_time, stored) = match digests.get(&tx) {
                Some((tx_time, d)) => (*tx_time, d.get(n as usize).copied()),
                None => (0, None),
            };
            match codec::decode_op(value.value(), tx_time, "op") {
                Ok(op) => {
                    let computed = log::op_digest(&op)?;
                    if stored != Some(computed) {
                        out.push(finding(
                            "op_digest",
                            subject,
                            format!(
                                "body hashes to {}, header says {}",
                                hex::encode(computed),
                                stored.map_or("nothing".into(), hex::encode)
                            ),
                        ));
                    }
                }
                Err(e) => out.push(finding("op_unreadable", subject, e.to_string())),
            }
        }
        Ok(out)
    }

    /// Regenerates `entities`, `versions`, `versions_by_tx`, `match_ops` and `paths` from the
    /// log and the content tables, honouring evictions, and recounts document references.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a log record does not decode or points at a missing document.
    pub fn fsck_rebuild(&self) -> Result<()> {
        let wtx = self.begin_write()?;
        wtx.delete_table(ENTITIES).db()?;
        wtx.delete_table(ENTITY_IDS).db()?;
        wtx.delete_table(VERSIONS).db()?;
        wtx.delete_table(VERSIONS_BY_TX).db()?;
        wtx.delete_table(MATCH_OPS).db()?;
        wtx.delete_table(PATHS).db()?;
        {
            let mut w = WriteTables::open(&wtx)?;
            let mut docs = Vec::new();
            for entry in w.docs.index.iter().db()? {
                let (k, v) = entry.db()?;
                docs.push((k.value(), v.value()));
            }
            for (hash, (seq, _, file_blob)) in docs {
                w.docs.index.insert(hash, (seq, 0, file_blob)).db()?;
            }
            let mut headers = Vec::new();
            for entry in w.tx_log.iter().db()? {
                let (k, v) = entry.db()?;
                let header: TxHeaderRec =
                    codec::decode(v.value(), &format!("header of tx {}", k.value()))?;
                headers.push((k.value(), header.tx_time, header.digests.len()));
            }
            for (tx, tx_time, count) in headers {
                for n in 0..count as u32 {
                    let body = w.tx_ops.get((tx, n)).db()?.map(|v| v.value().to_vec());
                    if let Some(body) = body {
                        let op = codec::decode_op(&body, tx_time, &format!("op {n} of tx {tx}"))?;
                        w.apply(tx, tx_time, n, &op)?;
                    }
                }
                w.end_tx()?;
            }
            w.finish()?;
        }
        wtx.commit().db()?;
        Ok(())
    }

    /// Removes documents no version references and blobs no document references, and fixes
    /// reference counts.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    pub fn gc(&self) -> Result<GcReport> {
        let wtx = self.begin_write()?;
        let mut report = GcReport::default();
        {
            let mut w = WriteTables::open(&wtx)?;
            let mut doc_counts: HashMap<[u8; 32], u64> = HashMap::new();
            for entry in w.versions.iter().db()? {
                let (_, v) = entry.db()?;
                let rec: VersionRec = codec::decode(v.value(), "version")?;
                if let Some(hash) = rec.object_hash {
                    *doc_counts.entry(hash).or_default() += 1;
                }
            }
            let mut docs = Vec::new();
            for entry in w.docs.index.iter().db()? {
                let (k, v) = entry.db()?;
                docs.push((k.value(), v.value()));
            }
            let mut blob_counts: HashMap<[u8; 32], u64> = HashMap::new();
            for (hash, (seq, refs, file_blob)) in docs {
                let counted = doc_counts.get(&hash).copied().unwrap_or(0);
                if counted == 0 {
                    w.docs.index.remove(hash).db()?;
                    if let Some(record) = w.docs.data.remove(seq).db()? {
                        report.bytes_freed += record.value().len() as u64;
                    }
                    report.documents_removed += 1;
                    continue;
                }
                if counted != refs {
                    report.counts_fixed += 1;
                    w.docs.index.insert(hash, (seq, counted, file_blob)).db()?;
                }
                if let Some(record) = w.docs.data.get(seq).db()? {
                    let rec: DocRec = codec::decode(record.value(), "document")?;
                    for blob in docs::doc_blobs(&rec, file_blob) {
                        *blob_counts.entry(blob).or_default() += 1;
                    }
                }
            }
            let mut all_blobs = Vec::new();
            for entry in w.blobs.index.iter().db()? {
                let (k, v) = entry.db()?;
                all_blobs.push((k.value(), v.value()));
            }
            // A live suffix record keeps its base alive: propagate along the chains, reading
            // each live blob's header once.
            let locations: HashMap<[u8; 32], (u64, u64)> = all_blobs
                .iter()
                .map(|(hash, (offset, len, _))| (*hash, (*offset, *len)))
                .collect();
            let mut live: Vec<[u8; 32]> = blob_counts.keys().copied().collect();
            while let Some(hash) = live.pop() {
                let Some((offset, len)) = locations.get(&hash) else {
                    continue;
                };
                if let Some(base) = blobs::record_header(&w.blobs.data, &hash, *offset, *len)?.base
                {
                    let count = blob_counts.entry(base).or_default();
                    *count += 1;
                    if *count == 1 {
                        live.push(base);
                    }
                }
            }
            for (hash, (offset, len, refs)) in all_blobs {
                let counted = blob_counts.get(&hash).copied().unwrap_or(0);
                if counted == 0 {
                    w.blobs.index.remove(hash).db()?;
                    blobs::erase_blob(&mut w.blobs, offset, len)?;
                    report.bytes_freed += len;
                    report.blobs_removed += 1;
                } else if counted != refs {
                    report.counts_fixed += 1;
                    w.blobs.index.insert(hash, (offset, len, counted)).db()?;
                }
            }
            w.add_counter(super::STORED_BYTES, -(report.bytes_freed as i64))?;
        }
        wtx.commit().db()?;
        Ok(report)
    }
}
