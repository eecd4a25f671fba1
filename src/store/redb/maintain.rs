//! Maintenance: `evict`, rebuilding the query tables from the log (`fsck_rebuild`), and `gc`.

use super::*;
use std::collections::HashMap;

use redb::ReadableTable;

use super::codec::{self, DocRec};
use super::tables::*;
use super::{Op, Origin, RedbStore, TxReceipt, WriteTables, blobs};
use crate::error::Result;

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

    /// Regenerates `entities`, `versions`, `versions_by_tx`, `match_ops` and `paths` from the
    /// log and the content tables, honouring evictions, recounts document references, and
    /// empties the stat cache and the metadata snapshots. Op bodies that fail their digest are left out (fsck still names
    /// them).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a log header does not decode or an op points at a missing
    /// document.
    pub fn fsck_rebuild(&self) -> Result<()> {
        // The log is what the tables are rebuilt from: a store whose log tables are gone (a
        // damaged table directory) would replay nothing and lose every row. A write transaction
        // would make them anew, empty, so they are looked for in a read first.
        {
            let rtx = self.read()?;
            let missing = [
                ("tx_log", rtx.open_table(TX_LOG).err()),
                ("tx_ops", rtx.open_table(TX_OPS).err()),
            ];
            if let Some((table, Some(e))) = missing.into_iter().find(|(_, e)| e.is_some()) {
                return Err(Error::corrupt(format!(
                    "the log table {table} cannot be opened ({e}), so the query tables are not \
                     rebuilt from it; `strata fsck --salvage NEW_DIR` copies what verifies \
                     into a new store"
                )));
            }
        }
        let wtx = self.begin_write()?;
        wtx.delete_table(ENTITIES).db()?;
        wtx.delete_table(ENTITY_IDS).db()?;
        wtx.delete_table(VERSIONS).db()?;
        wtx.delete_table(VERSIONS_BY_TX).db()?;
        wtx.delete_table(MATCH_OPS).db()?;
        wtx.delete_table(PATHS).db()?;
        // The stat cache is only a cache, and may vouch for bytes the store no longer holds:
        // emptied, so the next scan reads every file again (unchanged ones stay unchanged).
        wtx.delete_table(STAT_CACHE).db()?;
        wtx.delete_table(STAT_BY_DIR).db()?;
        wtx.open_table(STAT_BY_DIR).db()?;
        // The directory numbers key only the stat cache: numbered afresh by the next scan.
        wtx.delete_table(DIRECTORIES).db()?;
        wtx.delete_table(DIRECTORY_PATHS).db()?;
        wtx.open_table(DIRECTORIES).db()?;
        wtx.open_table(DIRECTORY_PATHS).db()?;
        // Only `paths` and the stat cache use the filesystem numbers, both made anew here: the
        // replay numbers the filesystems afresh (repairing numbers the two tables disagree on).
        wtx.delete_table(FILESYSTEMS).db()?;
        wtx.delete_table(FILESYSTEM_IDS).db()?;
        wtx.open_table(FILESYSTEMS).db()?;
        wtx.open_table(FILESYSTEM_IDS).db()?;
        // Metadata snapshots summarise the rows rebuilt here: emptied, the next resume reads
        // row by row and writes them anew.
        wtx.delete_table(META_SNAPSHOTS).db()?;
        wtx.open_table(META_SNAPSHOTS).db()?;
        // A damaged chunk size in `meta` (fsck's `blob_chunk_size`): the chunks say what it is.
        {
            let mut meta = wtx.open_table(META).db()?;
            let seen = blobs::stream_chunk(&wtx.open_table(BLOB_DATA).db()?)?;
            let right = match (blobs::chunk_size(&meta), seen) {
                (Ok(said), Some(seen)) if said != seen => Some(seen),
                (Ok(_), _) => None,
                (Err(Error::Corrupt { .. }), seen) => Some(seen.unwrap_or(BLOB_CHUNK)),
                (Err(e), _) => return Err(e),
            };
            if let Some(size) = right {
                meta.insert(BLOB_CHUNK_KEY, size.to_le_bytes().as_slice())
                    .db()?;
            }
        }
        // The rebuilt rows are format 5's, 6's and 8's from the first transaction on: said
        // before the tables are opened, which read these keys (damage may have made them no
        // number: fsck's `meta_since`).
        {
            let mut meta = wtx.open_table(META).db()?;
            for key in ROW_FORMAT_SINCE_KEYS {
                meta.insert(key, 1u64.to_le_bytes().as_slice()).db()?;
            }
            // The floor of new document numbers guards against numbers rows may still name;
            // the rebuilt rows name only documents the store holds, so one that damage made no
            // number is dropped.
            if read_counter(&meta, DOC_NUMBERS_FROM).is_err() {
                meta.remove(DOC_NUMBERS_FROM).db()?;
            }
        }
        {
            let mut w = WriteTables::open(&wtx)?;
            // The keys written above, as the tables read them: format 5's rows, format 6's
            // sources in `entity_ids`, format 8's short keys and version rows by number, all from
            // the first transaction on.
            w.by_tx_since = 1;
            w.sources_since = 1;
            w.short_since = 1;
            w.doc_seqs_since = 1;
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
                let header =
                    codec::decode_header(v.value(), &format!("header of tx {}", k.value()))?;
                headers.push((k.value(), header));
            }
            for (tx, header) in headers {
                let tx_time = header.tx_time;
                for (n, digest) in (0u32..).zip(&header.digests) {
                    let body = w.tx_ops.get((tx, n)).db()?.map(|v| v.value().to_vec());
                    let Some(body) = body else { continue };
                    // A body that does not decode or hash to its digest is damage: replaying it
                    // would write what the damage made of it (another path, another time). It
                    // is left out; fsck goes on naming it, and salvage keeps what verifies.
                    let Ok(op) = codec::decode_op(
                        &body,
                        tx_time,
                        &header.filesystems,
                        &format!("op {n} of tx {tx}"),
                    ) else {
                        continue;
                    };
                    if crate::store::log::op_digest(&op)? != *digest {
                        continue;
                    }
                    // An op that writes an entity whose first write the log no longer holds
                    // (a body lost without an eviction) is damage to the log, not a wrong id.
                    w.apply(tx, tx_time, n, &op).map_err(|e| match e {
                        Error::NotFound { what } => Error::corrupt(format!(
                            "op {n} of tx {tx} cannot be replayed: {what}; the log lost what \
                             came before it, so the tables are not rebuilt from it; `strata \
                             fsck --salvage NEW_DIR` copies what verifies into a new store"
                        )),
                        other => other,
                    })?;
                }
                w.end_tx()?;
            }
            w.finish()?;
        }
        // The replay wrote `entities` and `paths` in log order, that is at random places: their
        // pages are ~70 % full, where the close's repack would only come after a large write.
        super::repack::repack_tables(&wtx)?;
        wtx.commit().db()?;
        Ok(())
    }

    /// Writes each of `contents` back as a fresh whole record at the end of the blob stream and
    /// points `blob_index` at it, keeping the stored reference count (1 when the entry was
    /// lost). The damaged record's bytes stay where they were, unreferenced (its range may be
    /// what the damage invented, so erasing it could erase another content), rewritten as they
    /// are so that their pages verify again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when bytes do not hash to their hash.
    pub fn restore_contents(&self, contents: Vec<([u8; 32], Vec<u8>)>) -> Result<()> {
        for (hash, bytes) in &contents {
            if crate::hash::sha256(bytes).0 != *hash {
                return Err(crate::error::Error::invalid_input(format!(
                    "the bytes given for content {} do not hash to it",
                    hex::encode(hash)
                )));
            }
        }
        let wtx = self.begin_write()?;
        {
            let mut w = WriteTables::open(&wtx)?;
            for (hash, bytes) in contents {
                let old = w.blobs.index.get(&hash).db()?.map(|v| v.value());
                let refs = old.map_or(1, |(_, _, refs)| refs);
                // The chunks under the old record are written again as they are, so that their
                // pages get fresh checksums (the storage engine's own check passes). The
                // record's place is the damaged store's word: no further than the last chunk
                // there is (a damaged length once made this loop run for ever).
                let chunk_size = w.blobs.chunk;
                let last_chunk = w.blobs.data()?.last().db()?.map(|(no, _)| no.value());
                if let (Some((offset, len, _)), Some(last_chunk)) = (old, last_chunk) {
                    let first = offset / chunk_size;
                    let last = (offset.saturating_add(len.max(1) - 1) / chunk_size).min(last_chunk);
                    for no in first..=last {
                        let data = w.blobs.data()?;
                        let chunk = data.get(no).db()?.map(|v| v.value().to_vec());
                        if let Some(chunk) = chunk {
                            data.insert(no, chunk.as_slice()).db()?;
                        }
                    }
                }
                let record = codec::encode_blob(&bytes);
                let offset = w.blobs.append(&record)?;
                w.blobs
                    .index
                    .insert(&hash, (offset, record.len() as u64, refs))
                    .db()?;
            }
            w.blobs.flush()?;
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
                let rec = docs::version_rec(v.value(), &w.doc_hashes(), "version")?;
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
                    if let Some(record) = w.docs.remove_record(seq)? {
                        report.bytes_freed += record.len() as u64;
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
            let chunk = w.blobs.chunk;
            while let Some(hash) = live.pop() {
                let Some((offset, len)) = locations.get(&hash) else {
                    continue;
                };
                if let Some(base) =
                    blobs::record_header(w.blobs.data()?, chunk, &hash, *offset, *len)?.base
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
            w.save_numbers_from()?;
        }
        wtx.commit().db()?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};

    /// A new store in a temporary directory (kept while the returned guard lives).
    fn new_store() -> Result<(tempfile::TempDir, RedbStore)> {
        let dir = tempfile::tempdir().map_err(|e| crate::error::Error::io("tempdir", e))?;
        let store = RedbStore::create(dir.path())?;
        Ok((dir, store))
    }

    /// Puts file `/a` of filesystem `fs` holding `text`, in a transaction of its own.
    fn put_a(store: &RedbStore, text: &str) -> Result<Object> {
        let object = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a".into(),
            },
            text.into(),
        )?;
        Backend::transact(store, vec![Op::put(object.clone())], Origin::Cli)?;
        Ok(object)
    }

    /// A rebuild that meets a write to an entity whose first write the log lost (its body gone
    /// without an eviction) refuses as corrupt, naming salvage, instead of answering "not found"
    /// (corruption seed 114: a damaged key made a body unfindable while fsck called it only a
    /// lookup failure, so `fsck --repair` rebuilt and failed with `not_found`).
    #[test]
    fn a_rebuild_over_a_lost_first_write_is_corrupt_not_not_found() -> Result<()> {
        let (_dir, store) = new_store()?;
        put_a(&store, "one\n")?;
        put_a(&store, "two\n")?;
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
                .any(|f| f.kind == "op_missing"
                    && crate::store::damage::LOG_DAMAGE.contains(&f.kind)),
            "{findings:?}"
        );
        let answer = store.fsck_rebuild();
        assert!(
            matches!(&answer, Err(crate::error::Error::Corrupt { what })
                if what.contains("op 0 of tx 2") && what.contains("--salvage")),
            "{answer:?}"
        );
        Ok(())
    }

    /// A store whose table directory lost the log (a damaged name): fsck names log damage, so
    /// a repair does not rebuild, and a rebuild refuses instead of replaying an empty log over
    /// every table (corruption seed 114: the rebuild made a new, empty `tx_log` and dropped
    /// every row; the salvage after it then found an empty store).
    #[test]
    fn a_store_without_its_log_table_is_not_rebuilt_from_nothing() -> Result<()> {
        let (_dir, store) = new_store()?;
        let object = put_a(&store, "kept\n")?;
        let lost: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("tx_lox");
        let wtx = store.begin_write()?;
        wtx.rename_table(TX_LOG, lost).db()?;
        wtx.commit().db()?;
        let findings = store.fsck();
        assert!(
            findings
                .iter()
                .any(|f| crate::store::damage::LOG_DAMAGE.contains(&f.kind)),
            "{findings:?}"
        );
        let answer = store.fsck_rebuild();
        assert!(
            matches!(&answer, Err(crate::error::Error::Corrupt { what })
                if what.contains("tx_log") && what.contains("--salvage")),
            "{answer:?}"
        );
        // Nothing was dropped: with its name back, the store answers as before.
        let wtx = store.begin_write()?;
        wtx.rename_table(lost, TX_LOG).db()?;
        wtx.commit().db()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert!(store.as_of(object.id(), None, None)?.is_some());
        Ok(())
    }

    /// A rebuild while another reader of the store is live (a daemon's client) succeeds: the
    /// storage engine's check of the file after it waits for the reader, and skips when it
    /// keeps reading, instead of failing a repair that worked.
    #[test]
    fn a_rebuild_beside_a_live_reader_succeeds() -> Result<()> {
        let (_dir, store) = new_store()?;
        let object = put_a(&store, "read meanwhile\n")?;
        let reader = store.read()?;
        Backend::fsck_rebuild(&store)?;
        drop(reader);
        Backend::fsck_rebuild(&store)?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        assert!(store.as_of(object.id(), None, None)?.is_some());
        Ok(())
    }

    /// A chunk size in `meta` that damage changed (to the other size strata writes, or to bytes
    /// that are no size) is one `blob_chunk_size` finding, not a finding per chunk and per
    /// content; a rebuild writes the size the chunks show, and every content reads back.
    #[test]
    fn a_damaged_chunk_size_in_meta_is_found_and_repaired_from_the_chunks() -> Result<()> {
        for damage in [BLOB_CHUNK_OLD.to_le_bytes().to_vec(), vec![1, 2, 3]] {
            let (_dir, store) = new_store()?;
            // Hex of a multiplicative hash: ~20 KB after compression, five chunks.
            let text: String = (0..6000u32)
                .map(|i| format!("{:08x}", i.wrapping_mul(2_654_435_761)))
                .collect();
            put_a(&store, &text)?;
            let hash = crate::hash::sha256(text.as_bytes());
            let wtx = store.begin_write()?;
            wtx.open_table(META)
                .db()?
                .insert(BLOB_CHUNK_KEY, damage.as_slice())
                .db()?;
            wtx.commit().db()?;
            assert!(
                store.content(&hash).is_err(),
                "{damage:?}: reads cut wrongly"
            );
            let findings = store.fsck();
            let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
            // Bytes that are no size also stop the check of the metadata snapshots (it reads
            // contents): one more finding that the same repair clears.
            assert_eq!(
                kinds.first(),
                Some(&"blob_chunk_size"),
                "{damage:?}: {findings:?}"
            );
            assert!(
                kinds.len() == 1
                    || (damage.len() == 3 && kinds == ["blob_chunk_size", "unreadable"]),
                "{damage:?}: {findings:?}"
            );
            Backend::fsck_rebuild(&store)?;
            assert!(store.fsck().is_empty(), "{damage:?}: {:?}", store.fsck());
            assert_eq!(store.content(&hash)?, Some(text.into_bytes()));
        }
        Ok(())
    }

    /// A `meta` key saying from which transaction a format's rows begin (formats 5, 6 and 8)
    /// whose bytes damage made no number is one finding naming it (the op bodies are still
    /// checked and replayed), and a rebuild, which writes those rows from the first
    /// transaction on, repairs it; so is the floor of new document numbers, which every writer
    /// reads (the rebuild drops it).
    #[test]
    fn a_damaged_since_key_in_meta_is_found_and_repaired() -> Result<()> {
        for key in ROW_FORMAT_SINCE_KEYS.into_iter().chain([DOC_NUMBERS_FROM]) {
            let (_dir, store) = new_store()?;
            let object = put_a(&store, "a")?;
            let wtx = store.begin_write()?;
            wtx.open_table(META)
                .db()?
                .insert(key, [1u8, 2, 3].as_slice())
                .db()?;
            wtx.commit().db()?;
            let findings = store.fsck();
            let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
            // Readers read format 5's key too: the check of the metadata snapshots stops.
            let expected: &[&str] = match key {
                BY_TX_OMITTED_SINCE => &["meta_since", "unreadable"],
                _ => &["meta_since"],
            };
            assert_eq!(kinds, expected, "{key}: {findings:?}");
            assert!(findings[0].subject.contains(key), "{key}: {findings:?}");
            assert_eq!(findings[0].repair, crate::store::damage::REPAIR);
            Backend::fsck_rebuild(&store)?;
            assert!(store.fsck().is_empty(), "{key}: {:?}", store.fsck());
            put_a(&store, "a2")?;
            assert!(store.fsck().is_empty(), "{key}: {:?}", store.fsck());
            assert!(store.as_of(object.id(), None, None)?.is_some());
        }
        Ok(())
    }

    /// A content whose index row holds a damaged length (the 10 000-case corruption suite hung
    /// here: the rewrite of the old record's chunks ran for ~2^50 chunks) is restored at once,
    /// and reads back.
    #[test]
    fn restoring_a_content_whose_index_row_is_damaged_ends() -> Result<()> {
        let (_dir, store) = new_store()?;
        let text = "restored text\n".repeat(50);
        put_a(&store, &text)?;
        let hash = crate::hash::sha256(text.as_bytes()).0;
        {
            let wtx = store.begin_write()?;
            {
                let mut index = wtx.open_table(BLOB_INDEX).db()?;
                let (offset, _, refs) = index
                    .get(&hash)
                    .db()?
                    .map(|v| v.value())
                    .ok_or_else(|| crate::error::Error::invariant("no index row"))?;
                index.insert(&hash, (offset, u64::MAX / 2, refs)).db()?;
            }
            wtx.commit().db()?;
        }
        store.restore_contents(vec![(hash, text.as_bytes().to_vec())])?;
        let rtx = store.read()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        let (_, len, _) = index
            .get(&hash)
            .db()?
            .map(|v| v.value())
            .ok_or_else(|| crate::error::Error::invariant("no index row"))?;
        assert!(len < 4096, "the restored record's length is {len}");
        Ok(())
    }
}
