//! Reading: [`ReadTables`], the read tables of one query, and the queries of [`RedbStore`].

use super::*;

impl RedbStore {
    /// What `id` is now (valid now, as of the latest transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when stored data fails its
    /// hashes.
    pub fn get(&self, id: &str) -> Result<Option<Version>> {
        self.as_of(id, None, None)
    }

    /// What `id` was at `valid_time` as known at transaction `tx` (defaults: now, latest).
    ///
    /// `None` when no version is visible there; a tombstone is a version with no object.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when stored data fails its
    /// hashes.
    pub fn as_of(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let entity = entity_rec(&r, id)?.ok_or_else(|| unknown_entity(id))?;
        r.version_at(id, &entity, valid_time, tx)
    }

    /// Like [`RedbStore::as_of`] without rebuilding the object: only the version's times and hashes.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn version_info(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let entity = entity_rec(&r, id)?.ok_or_else(|| unknown_entity(id))?;
        r.info_at(id, &entity, valid_time, tx)
    }

    /// How many versions [`RedbStore::history`] lists for `id` by default, counted without
    /// reading their documents (the rows a history shows do not depend on them).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn history_len(&self, id: &str) -> Result<u64> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let entity = entity_rec(&r, id)?.ok_or_else(|| unknown_entity(id))?;
        let rows = temporal::history_rows(
            &r.versions,
            &temporal::LivenessOnly,
            entity.eid,
            i64::MIN,
            i64::MAX,
            u64::MAX,
            false,
        )?;
        Ok(rows.len() as u64)
    }

    /// The versions of `id` as `query` selects them.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<VersionInfo>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let entity = entity_rec(&r, id)?.ok_or_else(|| unknown_entity(id))?;
        r.history_of(id, &entity, query)
    }

    /// The byte size of each of `versions` (of entity `id`) in one read transaction, from the
    /// content records' headers ([`ReadTables::version_size`]).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a document or a record's header does not decode.
    pub fn version_sizes(&self, id: &str, versions: &[VersionInfo]) -> Result<Vec<Option<u64>>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        versions
            .iter()
            .map(|info| r.version_size(id, info))
            .collect()
    }

    /// What `ls` lists of each of `ids` ([`Backend::listings`]), all in one read transaction:
    /// each answer is that file's own, so that a damaged one does not hide the others.
    ///
    /// # Errors
    /// Storage errors opening the transaction; each file's errors are in its answer.
    pub fn listings(
        &self,
        ids: &[&str],
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
        deleted: bool,
    ) -> Result<Vec<Result<Option<Listing>>>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        Ok(ids
            .iter()
            .map(|id| r.listing(id, valid_time, tx, deleted))
            .collect())
    }

    /// Up to `limit` log records after transaction `since` (from the first when `None`), oldest
    /// first.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    pub fn log(&self, since: Option<TxId>, limit: usize) -> Result<Vec<TxRecord>> {
        let rtx = self.read()?;
        let log_tables = verify::LogTables::open(&rtx)?;
        let start = since.map_or(1, |t| t.0.saturating_add(1)).max(1);
        // Each record is checked: consecutive ids, its chain value from the one before, every
        // body against its digest, every missing body against the record of evictions.
        let mut previous = match start {
            1 => [0u8; 32],
            _ => log_tables.header(start - 1)?.chain,
        };
        let mut expected = start;
        let mut out = Vec::new();
        for entry in log_tables.tx_log.range(start..).db()?.take(limit) {
            let (key, value) = entry.db()?;
            let tx = key.value();
            if tx != expected {
                return Err(Error::corrupt(format!(
                    "the log has no record of tx {expected}; run `strata fsck`"
                )));
            }
            expected = tx + 1;
            let header = codec::decode_header(value.value(), &format!("header of tx {tx}"))?;
            let chain = log::next_chain(&previous, tx, &header)?;
            if chain != header.chain {
                return Err(Error::corrupt(format!(
                    "the log record of tx {tx} does not chain from the one before it; run \
                     `strata fsck`"
                )));
            }
            previous = chain;
            let mut ops = Vec::with_capacity(header.digests.len());
            for (n, digest) in header.digests.iter().enumerate() {
                let body = log_tables
                    .body(tx, n as u32, &header, None)?
                    .map(|op| log::op_json(&op));
                let evicted_by = match body {
                    Some(_) => None,
                    None => log_tables.evicted_by(tx, n as u32)?.map(TxId),
                };
                ops.push(LoggedOp {
                    digest: *digest,
                    body,
                    evicted_by,
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

    /// Up to `limit` transactions after `since`, each with its index run, from the headers only
    /// (the chain is not checked here: [`RedbStore::log`] and fsck do that).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a header does not decode.
    pub fn tx_runs(&self, since: Option<TxId>, limit: usize) -> Result<Vec<(TxId, Option<TxId>)>> {
        let rtx = self.read()?;
        let tx_log = rtx.open_table(TX_LOG).db()?;
        let start = since.map_or(0, |TxId(tx)| tx.saturating_add(1));
        let mut out = Vec::new();
        for entry in tx_log.range(start..).db()?.take(limit) {
            let (key, value) = entry.db()?;
            let tx = key.value();
            let header = codec::decode_header(value.value(), &format!("header of tx {tx}"))?;
            out.push((TxId(tx), header.run.map(TxId)));
        }
        Ok(out)
    }

    /// The latest transaction and the chain value after it (`None` in an empty store).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the header does not decode.
    pub fn chain_head(&self) -> Result<Option<(TxId, [u8; 32])>> {
        let rtx = self.read()?;
        let tx_log = rtx.open_table(TX_LOG).db()?;
        let Some((k, v)) = tx_log.last().db()? else {
            return Ok(None);
        };
        let tx = k.value();
        let header = codec::decode_header(v.value(), "tx header")?;
        // The head is checked against the record before it.
        let previous = match tx {
            0 | 1 => [0u8; 32],
            _ => match tx_log.get(tx - 1).db()? {
                Some(v) => codec::decode_header(v.value(), "tx header")?.chain,
                None => {
                    return Err(Error::corrupt(format!(
                        "the log has no record of tx {}; run `strata fsck`",
                        tx - 1
                    )));
                }
            },
        };
        let chain = log::next_chain(&previous, tx, &header)?;
        if chain != header.chain {
            return Err(Error::corrupt(format!(
                "the log record of tx {tx} does not chain from the one before it; run `strata \
                 fsck`"
            )));
        }
        Ok(Some((TxId(tx), header.chain)))
    }

    /// What the store knows about entity `id` itself.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn entity(&self, id: &str) -> Result<EntityInfo> {
        let rtx = self.read()?;
        let entities = ReadEntities::open(&rtx)?;
        let rec = entity_rec(&entities, id)?.ok_or_else(|| unknown_entity(id))?;
        entity_info(id, &rec)
    }

    /// The bytes stored under `hash` (a `content_hash`, or the `file_hash` of kept raw bytes),
    /// checked against it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the record does not decode or its bytes do not hash to `hash`.
    pub fn content(&self, hash: &Hash) -> Result<Option<Vec<u8>>> {
        let rtx = self.read()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        let data = rtx.open_table(BLOB_DATA).db()?;
        let bytes = blobs::read_blob(&index, &data, blobs::chunk_of(&rtx)?, &hash.0)?;
        if let Some(bytes) = &bytes {
            verify::check_content(&hash.0, bytes)?;
        }
        Ok(bytes)
    }

    /// Every entity that exists now (its current version is not a tombstone), in id order.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    pub fn live_entities(&self) -> Result<Vec<EntityInfo>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let now = r.now()?;
        let mut out = Vec::new();
        for entry in r.entities.iter().db()? {
            let (key, value) = entry.db()?;
            let id = entity::id_of_row(&r, key.value(), value.value())?;
            let rec = entity::entity_of_row(&r, &id, value.value())?;
            if temporal::is_live(&r.versions, &r.by_tx, rec.eid, now, u64::MAX)? {
                out.push(entity_info(&id, &rec)?);
            }
        }
        // Keys put hex ids before the others; callers get id order.
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Counts and sizes.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn stats(&self) -> Result<Stats> {
        let rtx = self.read()?;
        let meta = rtx.open_table(META).db()?;
        let file_bytes = match &self.dir {
            Some(dir) => std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len()),
            None => 0,
        };
        Ok(Stats {
            entities: rtx.open_table(ENTITIES).db()?.len().db()?,
            versions: rtx.open_table(VERSIONS).db()?.len().db()?,
            transactions: rtx.open_table(TX_LOG).db()?.len().db()?,
            blobs: rtx.open_table(BLOB_INDEX).db()?.len().db()?,
            documents: rtx.open_table(DOC_INDEX).db()?.len().db()?,
            stored_bytes: read_counter(&meta, STORED_BYTES)?,
            put_bytes: read_counter(&meta, PUT_BYTES)?,
            file_bytes,
        })
    }
}

pub(in crate::store) fn entity_info(id: &str, rec: &EntityRec) -> Result<EntityInfo> {
    Ok(EntityInfo {
        id: id.to_string(),
        object_type: rec.object_type.parse()?,
        source: rec.source.as_ref().map(|(filesystem_id, path)| {
            Source::Filesystem(FilesystemSource {
                filesystem_id: filesystem_id.0.clone(),
                path: path.clone(),
            })
        }),
    })
}

/// The read tables a query uses.
pub(crate) struct ReadTables {
    pub(super) meta: redb::ReadOnlyTable<&'static str, &'static [u8]>,
    pub(super) entities: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    pub(super) entity_ids: redb::ReadOnlyTable<u64, &'static [u8]>,
    /// `filesystem_ids` (`None` in a format-4 file opened read-only).
    pub(super) filesystems: Option<redb::ReadOnlyTable<u32, &'static [u8]>>,
    pub(super) versions: redb::ReadOnlyTable<(u64, i64, u64), &'static [u8]>,
    pub(super) by_tx: redb::ReadOnlyTable<(u64, u64), (i64, u64)>,
    pub(super) tx_log: redb::ReadOnlyTable<u64, &'static [u8]>,
    pub(super) blob_index: redb::ReadOnlyTable<[u8; 32], (u64, u64, u64)>,
    pub(super) blob_data: redb::ReadOnlyTable<u64, &'static [u8]>,
    pub(super) doc_index: redb::ReadOnlyTable<[u8; 32], (u64, u64, bool)>,
    pub(super) doc_data: redb::ReadOnlyTable<u64, &'static [u8]>,
    /// The log, which every version row served is checked against.
    pub(super) log: verify::LogTables,
    /// `meta[BY_TX_OMITTED_SINCE]` (`u64::MAX` when absent).
    pub(super) by_tx_since: u64,
    /// The store's blob chunk size (`blobs::chunk_size`).
    pub(super) chunk: u64,
}

impl EntityTables for ReadTables {
    type Entities = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
    type Ids = redb::ReadOnlyTable<u64, &'static [u8]>;
    fn entities(&self) -> &Self::Entities {
        &self.entities
    }
    fn entity_ids(&self) -> &Self::Ids {
        &self.entity_ids
    }
    fn filesystem(&self, n: u32) -> Result<Option<String>> {
        entity::filesystem_in(self.filesystems.as_ref(), n)
    }
}

impl ReadTables {
    /// The hashes of the documents version rows name by number.
    pub(super) fn docs(&self) -> docs::ReadDocs<'_> {
        docs::StoredDocs {
            index: &self.doc_index,
            data: &self.doc_data,
        }
    }

    pub(super) fn open(tx: &ReadTransaction) -> Result<Self> {
        let meta = tx.open_table(META).db()?;
        let by_tx_since = by_tx_omitted_since(&meta)?;
        let chunk = blobs::chunk_size(&meta)?;
        Ok(ReadTables {
            meta,
            entities: tx.open_table(ENTITIES).db()?,
            entity_ids: tx.open_table(ENTITY_IDS).db()?,
            filesystems: entity::filesystem_ids(tx)?,
            versions: tx.open_table(VERSIONS).db()?,
            by_tx: tx.open_table(VERSIONS_BY_TX).db()?,
            tx_log: tx.open_table(TX_LOG).db()?,
            blob_index: tx.open_table(BLOB_INDEX).db()?,
            blob_data: tx.open_table(BLOB_DATA).db()?,
            doc_index: tx.open_table(DOC_INDEX).db()?,
            doc_data: tx.open_table(DOC_DATA).db()?,
            log: verify::LogTables::open(tx)?,
            by_tx_since,
            chunk,
        })
    }

    /// Checks that the version rows of entity `eid` and its `versions_by_tx` rows name the same
    /// transactions (one `versions_by_tx` row per transaction that wrote the entity, but none
    /// for an only write of one row from `meta[BY_TX_OMITTED_SINCE]` on): a row lost from
    /// either table is caught before a history is served without it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when they differ.
    pub(super) fn check_writes(&self, id: &str, eid: u64) -> Result<()> {
        let mut from_versions = std::collections::BTreeSet::new();
        let mut rows = 0usize;
        for entry in self
            .versions
            .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
            .db()?
        {
            from_versions.insert(entry.db()?.0.value().2);
            rows += 1;
        }
        let mut from_by_tx = std::collections::BTreeSet::new();
        for entry in self.by_tx.range((eid, 0u64)..=(eid, u64::MAX)).db()? {
            from_by_tx.insert(entry.db()?.0.value().1);
        }
        let only_write = from_by_tx.is_empty()
            && from_versions
                .first()
                .is_some_and(|&tx| temporal::omits_first_by_tx(rows, tx, self.by_tx_since));
        if from_versions != from_by_tx && !only_write {
            return Err(Error::corrupt(format!(
                "the version rows of {id} and its versions_by_tx rows name different \
                 transactions; run `strata fsck`"
            )));
        }
        Ok(())
    }

    /// "Now" in valid time: the wall clock, or the latest tx time when the clock is behind it.
    pub(super) fn now(&self) -> Result<i64> {
        let wall = Timestamp::now().as_micros();
        // Through the log's header cache: a listing asks once per file.
        let last = self.log.last_header()?.map_or(0, |h| h.tx_time);
        let _ = &self.meta;
        Ok(wall.max(last))
    }

    pub(super) fn version_at(
        &self,
        id: &str,
        entity: &EntityRec,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        // The document a numbered row's hash was found from is kept and rebuilt from, not read
        // again (as `meta_at`).
        let docs = docs::KeptDocs {
            stored: self.docs(),
            kept: std::cell::RefCell::new(None),
        };
        let vt = match valid_time {
            Some(t) => t.as_micros(),
            None => self.now()?,
        };
        let tx = tx.map_or(u64::MAX, |t| t.0);
        let Some((info, _)) = self.info_row_in(&docs, id, entity.eid, vt, tx)? else {
            return Ok(None);
        };
        let object = match &info.object_hash {
            Some(hash) => Some(match docs.take(&hash.0) {
                Some(doc) => assemble(id, entity, &hash.0, &doc, info.content_omitted, |c| {
                    blobs::read_blob(&self.blob_index, &self.blob_data, self.chunk, c)
                })?,
                None => self.object(id, entity, &hash.0, info.content_omitted)?,
            }),
            None => None,
        };
        Ok(Some(Version { info, object }))
    }

    pub(super) fn info_at(
        &self,
        id: &str,
        entity: &EntityRec,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        let vt = match valid_time {
            Some(t) => t.as_micros(),
            None => self.now()?,
        };
        let tx = tx.map_or(u64::MAX, |t| t.0);
        Ok(self.info_row(id, entity.eid, vt, tx)?.map(|(info, _)| info))
    }

    /// The version row of entity `eid` visible at valid time `vt` as of transaction `tx`, with
    /// its info (valid_to included); `None` when nothing is visible there.
    pub(crate) fn info_row(
        &self,
        id: &str,
        eid: u64,
        vt: i64,
        tx: u64,
    ) -> Result<Option<(VersionInfo, temporal::Row)>> {
        self.info_row_in(&self.docs(), id, eid, vt, tx)
    }

    /// [`ReadTables::info_row`] finding a numbered row's object hash through `docs` (a
    /// [`docs::KeptDocs`] keeps the document it decoded for the caller).
    pub(super) fn info_row_in(
        &self,
        docs: &impl docs::DocHashes,
        id: &str,
        eid: u64,
        vt: i64,
        tx: u64,
    ) -> Result<Option<(VersionInfo, temporal::Row)>> {
        let Some((row, is_max)) =
            temporal::as_of_row(&self.versions, docs, &self.by_tx, eid, vt, tx)?
        else {
            return Ok(None);
        };
        self.log.check_row(id, &row)?;
        let end = if is_max {
            None
        } else {
            temporal::valid_to(&self.versions, eid, row.vt, tx)?
        };
        Ok(Some((version_info(id, &row, end), row)))
    }

    /// The versions of `id` (whose entity row is `entity`) as `query` selects them, each row
    /// checked against the log ([`RedbStore::history`]).
    pub(super) fn history_of(
        &self,
        id: &str,
        entity: &EntityRec,
        query: HistoryQuery,
    ) -> Result<Vec<VersionInfo>> {
        let tx = query.as_of_tx.map_or(u64::MAX, |t| t.0);
        let from = query.valid_from.map_or(i64::MIN, Timestamp::as_micros);
        let to = query.valid_to.map_or(i64::MAX, Timestamp::as_micros);
        let rows = temporal::history_rows(
            &self.versions,
            &self.docs(),
            entity.eid,
            from,
            to,
            tx,
            query.with_corrections,
        )?;
        for row in &rows {
            self.log.check_row(id, row)?;
        }
        self.check_writes(id, entity.eid)?;
        // valid_to of a row: the next distinct valid_from visible at `tx`.
        let mut distinct: Vec<i64> = rows.iter().map(|r| r.vt).collect();
        distinct.dedup();
        let tail_end = match distinct.last() {
            Some(&last) => temporal::valid_to(&self.versions, entity.eid, last, tx)?,
            None => None,
        };
        let mut out: Vec<VersionInfo> = rows
            .iter()
            .map(|row| {
                let i = distinct.partition_point(|&v| v <= row.vt);
                let end = distinct.get(i).copied().or(tail_end);
                version_info(id, row, end)
            })
            .collect();
        query.order.arrange(&mut out);
        Ok(out)
    }

    /// The byte size of version `info` of `id`: the size recorded on the row, else the length
    /// of its content (or kept raw bytes) as its record's header says it
    /// ([`blobs::stored_len`]); `None` for a tombstone or a stub. The content itself is not read
    /// or hashed (fsck, `show` and `cat` do that), unless the header does not say the length.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the document fails its hash, or the content is missing or its
    /// record's header does not decode.
    pub(super) fn version_size(&self, id: &str, info: &VersionInfo) -> Result<Option<u64>> {
        if info.size.is_some() {
            return Ok(info.size);
        }
        let Some(hash) = info.object_hash else {
            return Ok(None);
        };
        let Some(blob) = sized_blob(&self.version_doc(id, &hash.0)?, info.content_omitted) else {
            return Ok(None);
        };
        // A content the document names must be there: a missing one is damage, never a file
        // without content (a stub).
        let (offset, len, _) = self
            .blob_index
            .get(&blob)
            .db()?
            .map(|v| v.value())
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "a version of {id} points at missing content {}; run `strata fsck`",
                    hex::encode(blob)
                ))
            })?;
        if let Some(size) = blobs::stored_len(&self.blob_data, self.chunk, &blob, offset, len)? {
            return Ok(Some(size));
        }
        let bytes = blobs::read_at(
            &self.blob_index,
            &self.blob_data,
            self.chunk,
            &blob,
            offset,
            len,
        )?;
        verify::check_content(&blob, &bytes)?;
        Ok(Some(bytes.len() as u64))
    }

    /// What `ls` lists of `id` ([`Backend::listings`]): its version visible at (`valid_time`,
    /// `tx`), how many versions had begun by then, and its size; `None` when nothing is visible
    /// there, or the file is deleted then and `deleted` is false.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when its rows fail their
    /// checks.
    pub(super) fn listing(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
        deleted: bool,
    ) -> Result<Option<Listing>> {
        let entity = entity_rec(self, id)?.ok_or_else(|| unknown_entity(id))?;
        let Some(info) = self.info_at(id, &entity, valid_time, tx)? else {
            return Ok(None);
        };
        if info.is_tombstone() && !deleted {
            return Ok(None);
        }
        let versions = self
            .history_of(id, &entity, Listing::history_query(valid_time, tx))?
            .len() as u64;
        let size = self.version_size(id, &info)?;
        Ok(Some(Listing {
            info,
            versions,
            size,
        }))
    }

    /// The document (full fields) that a version of `id` points at by object hash `hash`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the document is missing or does not resolve.
    pub(super) fn version_doc(&self, id: &str, hash: &[u8; 32]) -> Result<codec::DocRec> {
        let (doc, _) = docs::read_doc(&self.doc_index, &self.doc_data, hash)?.ok_or_else(|| {
            Error::corrupt(format!(
                "version of {id} points at missing document {}; run `strata fsck`",
                hex::encode(hash)
            ))
        })?;
        verify::check_doc(hash, &doc)?;
        Ok(doc)
    }

    /// Rebuilds the envelope of `id` from its entity row, document and content.
    pub(super) fn object(
        &self,
        id: &str,
        entity: &EntityRec,
        hash: &[u8; 32],
        omitted: Option<ContentOmitted>,
    ) -> Result<Object> {
        let doc = self.version_doc(id, hash)?;
        assemble(id, entity, hash, &doc, omitted, |c| {
            blobs::read_blob(&self.blob_index, &self.blob_data, self.chunk, c)
        })
    }
}

/// The stored bytes whose length is the size of a version with document `doc`: its content,
/// or the kept raw bytes of a binary file; `None` when it has neither (a stub, a file whose
/// bytes were not kept). What every backend's `version_sizes` measures.
pub(in crate::store) fn sized_blob(
    doc: &codec::DocRec,
    omitted: Option<ContentOmitted>,
) -> Option<[u8; 32]> {
    match (doc.content_hash, omitted) {
        (Some(content), _) => Some(content),
        (None, Some(ContentOmitted::Binary)) => doc.file_hash,
        _ => None,
    }
}

/// Rebuilds the envelope of `id` from its entity row and its verified document `doc` (of object
/// hash `hash`), with the content `read_content` reads by its hash, and checks that it hashes to
/// `hash`: what every backend serves.
///
/// # Errors
/// [`Error::Corrupt`] when the content is missing or not UTF-8, the fields do not parse, or the
/// object does not rebuild to `hash`.
pub(in crate::store) fn assemble(
    id: &str,
    entity: &EntityRec,
    hash: &[u8; 32],
    doc: &codec::DocRec,
    omitted: Option<ContentOmitted>,
    read_content: impl FnOnce(&[u8; 32]) -> Result<Option<Vec<u8>>>,
) -> Result<Object> {
    let content =
        match &doc.content_hash {
            Some(c) => {
                let bytes = read_content(c)?.ok_or_else(|| {
                    Error::corrupt(format!(
                        "document {} points at missing content {}",
                        hex::encode(hash),
                        hex::encode(c)
                    ))
                })?;
                Some(String::from_utf8(bytes).map_err(|_| {
                    Error::corrupt(format!("content {} is not UTF-8", hex::encode(c)))
                })?)
            }
            None => None,
        };
    let object_type: ObjectType = entity.object_type.parse()?;
    let fields_json: serde_json::Value = serde_json::from_str(&doc.fields)
        .map_err(|e| Error::corrupt(format!("fields of document {}: {e}", hex::encode(hash))))?;
    let fields = Fields::from_json(object_type, fields_json)
        .map_err(|e| Error::corrupt(format!("document {}: {e}", hex::encode(hash))))?;
    let source = entity_info(id, entity)?.source;
    let object = Object::from_parts(
        Some(id),
        source,
        doc.file_hash.map(Hash),
        content,
        fields,
        omitted,
    )
    .map_err(|e| Error::corrupt(format!("object {id} cannot be rebuilt: {e}")))?;
    if object.object_hash().0 != *hash {
        return Err(Error::corrupt(format!(
            "object {id} rebuilds to object hash {}, not the stored {}",
            object.object_hash(),
            hex::encode(hash)
        )));
    }
    Ok(object)
}
